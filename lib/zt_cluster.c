#include "zt_cluster.h"
#include <jansson.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char **zt_cluster_pool(int pool, int *n)
{
    *n = 0;
    const char *text = getenv("CLUSTER_SPEC");
    json_t *cs = text ? json_loads(text, 0, NULL) : NULL;
    char key[16];
    snprintf(key, sizeof key, "workerpool%d", pool);
    json_t *list = json_object_get(json_object_get(cs, "cluster"), key);
    char **out = calloc(json_array_size(list) + 1, sizeof *out);
    size_t i;
    json_t *a;
    json_array_foreach(list, i, a)
        if (json_is_string(a))
            out[(*n)++] = strdup(json_string_value(a));
    json_decref(cs);
    return out;
}

void zt_cluster_free(char **list)
{
    for (char **p = list; p && *p; p++)
        free(*p);
    free(list);
}

void zt_tune_malloc(void)
{
    mallopt(M_MMAP_THRESHOLD, 512 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

char **zt_cluster_split(const char *text, int *n)
{
    *n = 0;
    size_t len = text ? strlen(text) : 0;
    char **out = calloc(len / 2 + 2, sizeof *out);
    char *dup = strdup(text ? text : ""), *save = NULL;
    for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save))
        out[(*n)++] = strdup(t);
    free(dup);
    return out;
}
