#include "base/zt_json.h"
#include "base/zt_util.h"
#include "ztrain/zt_error.h"
#include <assert.h>
#include <errno.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A value as short text: compact JSON, cut with "..." past 60 characters. */
static void s_short(const json_t *v, char *out, size_t len)
{
    char *t = v ? json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY) : NULL;
    const char *text = t ? t : "(absent)";
    if (strlen(text) > 60)
        snprintf(out, len, "%.57s...", text);
    else
        snprintf(out, len, "%s", text);
    free(t);
}

static int s_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *) a, *(const char *const *) b);
}

/* The sorted union of the keys of a and b (heap; *n its length). */
static const char **s_keys(const json_t *a, const json_t *b, size_t *n)
{
    const char **keys = calloc(json_object_size(a) + json_object_size(b) + 1, sizeof *keys);
    const char *k;
    json_t *v;
    *n = 0;
    json_object_foreach((json_t *) a, k, v)
        keys[(*n)++] = k;
    json_object_foreach((json_t *) b, k, v)
        if (!json_object_get(a, k))
            keys[(*n)++] = k;
    qsort(keys, *n, sizeof *keys, s_cmp);
    return keys;
}

static bool s_diff(const json_t *a, const json_t *b, char *path, size_t plen, char *out, size_t len)
{
    if (a && b && json_equal((json_t *) a, (json_t *) b))
        return false;
    size_t at = strlen(path);
    if (json_is_object(a) && json_is_object(b)) {
        size_t n;
        const char **keys = s_keys(a, b, &n);
        bool found = false;
        for (size_t i = 0; i < n && !found; i++) {
            snprintf(path + at, plen - at, "%s%s", at ? "." : "", keys[i]);
            found = s_diff(json_object_get(a, keys[i]), json_object_get(b, keys[i]), path, plen, out, len);
            path[at] = 0;
        }
        free(keys);
        if (found)
            return true;
    }
    if (json_is_array(a) && json_is_array(b) && json_array_size(a) == json_array_size(b)) {
        for (size_t i = 0; i < json_array_size(a); i++) {
            snprintf(path + at, plen - at, "[%zu]", i);
            bool found = s_diff(json_array_get(a, i), json_array_get(b, i), path, plen, out, len);
            path[at] = 0;
            if (found)
                return true;
        }
    }
    char sa[80], sb[80];
    s_short(a, sa, sizeof sa);
    s_short(b, sb, sizeof sb);
    snprintf(out, len, "%s: %s vs %s", at ? path : "(the whole document)", sa, sb);
    return true;
}

bool zt_json_diff(const json_t *a, const json_t *b, char *out, size_t len)
{
    char path[512] = "";
    if (len)
        out[0] = 0;
    return s_diff(a, b, path, sizeof path, out, len);
}

json_t *zt_json_this_process(void)
{
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    return json_pack("{s:i, s:I, s:s}", "pid", (int) getpid(), "startTime",
                     (json_int_t) zt_proc_start_time(getpid()), "host", host);
}

int zt_json_process_alive(const json_t *record)
{
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    const char *h = json_string_value(json_object_get(record, "host"));
    json_int_t pid = json_integer_value(json_object_get(record, "pid"));
    if (!h || pid <= 0 || strcmp(h, host))
        return -1;
    return zt_proc_alive((pid_t) pid, (uint64_t) json_integer_value(json_object_get(record, "startTime")));
}

int zt_json_write_files(const char *dir, json_t *files, char *why, size_t len)
{
    const char *name;
    json_t *doc;
    json_object_foreach(files, name, doc) {
        char *path = zt_strdupf("%s/%s", dir, name), *text = json_dumps(doc, JSON_COMPACT);
        int rc = zt_write_file_atomic(path, text, strlen(text));
        if (rc != ZT_OK)
            snprintf(why, len, "cannot write %s: %s", path, strerror(errno));
        free(text);
        free(path);
        if (rc != ZT_OK)
            return -1;
    }
    return 0;
}

void zt_json_selftest(void)
{
    char why[256];
    json_t *a = json_pack("{s:{s:s, s:f}, s:[i,i,i], s:i}", "optimizer", "kind", "adam", "lr", 0.01,
                          "layers", 784, 64, 10, "seed", 1);
    json_t *b = json_deep_copy(a);
    assert(!zt_json_diff(a, b, why, sizeof why) && why[0] == 0);
    json_object_set_new(json_object_get(b, "optimizer"), "lr", json_real(0.1));
    assert(zt_json_diff(a, b, why, sizeof why));
    assert(!strcmp(why, "optimizer.lr: 0.01 vs 0.10000000000000001") || !strcmp(why, "optimizer.lr: 0.01 vs 0.1"));
    json_object_set_new(json_object_get(b, "optimizer"), "lr", json_real(0.01));
    json_array_set_new(json_object_get(b, "layers"), 1, json_integer(128));
    assert(zt_json_diff(a, b, why, sizeof why) && !strcmp(why, "layers[1]: 64 vs 128"));
    json_array_append_new(json_object_get(b, "layers"), json_integer(5));
    assert(zt_json_diff(a, b, why, sizeof why) && !strncmp(why, "layers: [784,64,10] vs [784,128,10,5]", 36));
    json_object_del(b, "layers");
    json_object_set(b, "layers", json_object_get(a, "layers"));
    json_object_set_new(b, "extra", json_true());
    assert(zt_json_diff(a, b, why, sizeof why) && !strcmp(why, "extra: (absent) vs true"));
    json_decref(a);
    json_decref(b);
    a = json_integer(1);
    b = json_string("x");
    assert(zt_json_diff(a, b, why, sizeof why) && !strcmp(why, "(the whole document): 1 vs \"x\""));
    json_decref(a);
    json_decref(b);
    json_t *files = json_pack("{s:{s:i}, s:[i]}", "a.json", "x", 1, "b.json", 2);
    char dir[] = "/tmp/zt-json-files-XXXXXX";
    assert(mkdtemp(dir));
    assert(zt_json_write_files(dir, files, why, sizeof why) == 0);
    char *pa = zt_strdupf("%s/a.json", dir), *pb = zt_strdupf("%s/b.json", dir);
    json_t *back = json_load_file(pa, 0, NULL);
    assert(back && json_integer_value(json_object_get(back, "x")) == 1);
    json_decref(back);
    unlink(pa);
    unlink(pb);
    rmdir(dir);
    assert(zt_json_write_files(dir, files, why, sizeof why) == -1 && strstr(why, "cannot write /tmp/zt-json-files-"));
    free(pa);
    free(pb);
    json_decref(files);
    json_t *me = zt_json_this_process();
    assert(zt_json_process_alive(me) == 1);
    json_object_set_new(me, "startTime", json_integer(1)); /* the pid reused by another process */
    assert(zt_json_process_alive(me) == 0);
    json_object_set_new(me, "host", json_string("elsewhere.invalid"));
    assert(zt_json_process_alive(me) == -1);
    json_decref(me);
}
