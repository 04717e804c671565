#include "base/zt_env.h"
#include "base/zt_util.h"
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const s_names[ZT_ENV_COUNT_] = {
#define ZT_X_(id, name, help) name,
    ZT_ENV_LIST(ZT_X_)
#undef ZT_X_
};

static const char *const s_keys[ZT_ENV_COUNT_] = {
#define ZT_X_(id, name, help) #id,
    ZT_ENV_LIST(ZT_X_)
#undef ZT_X_
};

int zt_env_lookup(const char *key)
{
    for (int i = 0; key && i < ZT_ENV_COUNT_; i++)
        if (!strcmp(key, s_keys[i]))
            return i;
    return -1;
}

const char *zt_env_name(zt_env_t var)
{
    return var >= 0 && var < ZT_ENV_COUNT_ ? s_names[var] : "";
}

const char *zt_env_get(zt_env_t var)
{
    return getenv(zt_env_name(var));
}

bool zt_env_int(zt_env_t var, int64_t *out)
{
    long long n;
    const char *v = zt_env_get(var);
    if (!v || !zt_parse_int(v, &n))
        return false;
    *out = n;
    return true;
}

int64_t zt_env_int_or(zt_env_t var, int64_t def)
{
    int64_t v;
    return zt_env_int(var, &v) ? v : def;
}

char **zt_env_list(zt_env_t var, int *n)
{
    return zt_env_split(zt_env_get(var), n);
}

char **zt_env_pool(int pool, int *n)
{
    *n = 0;
    const char *text = zt_env_get(ZT_ENV_CLUSTER_SPEC);
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

static void s_describe(int pool, int index, const char *addr, char *out, size_t size)
{
    const char *map = zt_env_get(ZT_ENV_HOSTS);
    json_t *hosts = map ? json_loads(map, 0, NULL) : NULL;
    const char *host = json_string_value(json_object_get(hosts, addr));
    if (host)
        snprintf(out, size, "workerpool%d-%d on %s at %s", pool, index, host, addr);
    else
        snprintf(out, size, "workerpool%d-%d at %s", pool, index, addr);
    json_decref(hosts);
}

/* Where CLUSTER_SPEC places addr: true with *pool and *index. */
static bool s_place_of(const char *addr, int *pool, int *index)
{
    const char *a = !strncmp(addr, "tcp://", 6) ? addr + 6 : addr;
    bool found = false;
    for (int p = 0; p < 4 && !found; p++) {
        int n = 0;
        char **list = zt_env_pool(p, &n);
        for (int i = 0; i < n && !found; i++)
            if (!strcmp(list[i], a)) {
                *pool = p;
                *index = i;
                found = true;
            }
        zt_env_free(list);
    }
    return found;
}

void zt_env_describe_addr(const char *addr, char *out, size_t size)
{
    int p, i;
    snprintf(out, size, "%s", addr);
    if (s_place_of(addr, &p, &i))
        s_describe(p, i, !strncmp(addr, "tcp://", 6) ? addr + 6 : addr, out, size);
}

bool zt_env_replica_at(const char *addr, char *name, size_t size)
{
    int p, i;
    /* pool 1's places are its members' dense ranks (an elastic pool's
     * change), not replica indices: not named */
    bool found = s_place_of(addr, &p, &i) && p != 1;
    if (found)
        snprintf(name, size, "workerpool%d-%d", p, i);
    else if (size)
        name[0] = 0;
    return found;
}

void zt_env_describe_rank(int rank, char *out, size_t size)
{
    int n0 = 0, n1 = 0;
    char **p0 = zt_env_pool(0, &n0), **p1 = zt_env_pool(1, &n1);
    if (rank >= 0 && rank < n0)
        s_describe(0, rank, p0[rank], out, size);
    else if (rank >= n0 && rank < n0 + n1)
        s_describe(1, rank - n0, p1[rank - n0], out, size);
    else
        snprintf(out, size, "rank %d", rank);
    zt_env_free(p0);
    zt_env_free(p1);
}

void zt_env_free(char **list) { zt_strv_free(list); }

char **zt_env_split(const char *text, int *n)
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
