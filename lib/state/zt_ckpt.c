#include "state/zt_ckpt.h"
#include "base/zt_util.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_log.h"
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static const char *const s_array_names[] = { "values", "state0", "state1", "state2" };

static int s_write_all(int fd, const void *p, size_t n, uLong *crc)
{
    *crc = crc32(*crc, p, (uInt) 0);
    const char *c = p;
    while (n > 0) {
        size_t part = n > (1u << 30) ? (1u << 30) : n;
        *crc = crc32(*crc, (const Bytef *) c, (uInt) part);
        size_t left = part;
        while (left > 0) {
            ssize_t w = write(fd, c, left);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                return w < 0 ? zt_write_error() : ZT_EIO;
            c += w;
            left -= (size_t) w;
        }
        n -= part;
    }
    return ZT_OK;
}

static void s_fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

static void s_rm_rf(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                char *p = zt_strdupf("%s/%s", dir, e->d_name);
                unlink(p);
                free(p);
            }
        closedir(d);
    }
    rmdir(dir);
}

int zt_ckpt_remove_all(const char *root)
{
    DIR *d = opendir(root);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, "ckpt-", 5) || !strncmp(e->d_name, ".ckpt-", 6)) {
            char *p = zt_strdupf("%s/%s", root, e->d_name);
            s_rm_rf(p);
            free(p);
            n++;
        }
    closedir(d);
    return n;
}

static int s_cmp_desc(const void *a, const void *b)
{
    return strcmp(*(char *const *) b, *(char *const *) a);
}

/* Names of ckpt-* directories under root, newest first. */
static char **s_list(const char *root, int *n_p)
{
    *n_p = 0;
    DIR *d = opendir(root);
    if (!d)
        return NULL;
    char **names = NULL;
    int n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "ckpt-", 5) || strchr(e->d_name, '.'))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            names = realloc(names, (size_t) cap * sizeof *names);
        }
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    if (n)
        qsort(names, (size_t) n, sizeof *names, s_cmp_desc);
    *n_p = n;
    return names;
}

int zt_ckpt_remove_oldest(const char *root, char *name, size_t size)
{
    int n;
    char **names = s_list(root, &n);
    if (n > 0) {
        char *p = zt_strdupf("%s/%s", root, names[n - 1]);
        s_rm_rf(p);
        free(p);
        snprintf(name, size, "%s", names[n - 1]);
    }
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return n > 0;
}

/* Long on purpose: one atomic write (a temporary directory, each shard's
 * arrays, the manifest, fsync, rename, then pruning), kept in one function
 * so that every failure removes the temporary directory in one place and
 * no partial checkpoint is ever visible. */
int zt_ckpt_write(const char *root, int64_t step, json_t *config, json_t *tensors, json_t *extra,
                  const zt_ps_shard_t *shards, int nshards, int keep, char **path_p)
{
    int rc = ZT_OK;
    char *final = zt_strdupf("%s/ckpt-%012lld", root, (long long) step);
    char *tmp = zt_strdupf("%s/.ckpt-%012lld.tmp-%d", root, (long long) step, (int) getpid());
    json_t *files = json_array();
    struct stat st;
    if (path_p)
        *path_p = NULL;
    if (stat(final, &st) == 0) { /* this step is already saved (a retried job) */
        if (path_p)
            *path_p = final;
        else
            free(final);
        free(tmp);
        json_decref(files);
        return ZT_OK;
    }
    s_rm_rf(tmp);
    if (zt_mkdir_p(root) != ZT_OK || mkdir(tmp, 0755) < 0) {
        rc = errno == ENOSPC || errno == EDQUOT ? ZT_ENOSPC : ZT_ESYS;
        goto out;
    }
    for (int s = 0; s < nshards; s++) {
        char *name = zt_strdupf("shard-%d.bin", s);
        char *path = zt_strdupf("%s/%s", tmp, name);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644); /* in its new folder */
        uLong crc = crc32(0L, Z_NULL, 0);
        json_t *arrays = json_array();
        for (int a = 0; fd >= 0 && rc == ZT_OK && a < shards[s].arrays; a++) {
            rc = s_write_all(fd, shards[s].data[a], (size_t) shards[s].count * sizeof(float), &crc);
            json_array_append_new(arrays, json_string(s_array_names[a]));
        }
        if (fd < 0 || rc != ZT_OK || fsync(fd) < 0)
            rc = rc != ZT_OK ? rc : zt_write_error();
        if (fd >= 0)
            close(fd);
        json_array_append_new(files, json_pack("{s:s, s:I, s:I, s:I, s:o, s:I, s:I}", "file", name,
                              "offset", (json_int_t) shards[s].offset, "count",
                              (json_int_t) shards[s].count, "version", (json_int_t) shards[s].version,
                              "arrays", arrays, "bytes", (json_int_t) ((size_t) shards[s].count *
                              sizeof(float) * (size_t) shards[s].arrays), "crc32", (json_int_t) crc));
        free(name);
        free(path);
        if (rc != ZT_OK)
            goto out;
    }
    char now[40];
    zt_wall_iso(now, sizeof now);
    json_t *man = json_pack("{s:s, s:I, s:s, s:O, s:O, s:o}", "format", "ztrain-checkpoint-1",
                            "step", (json_int_t) step, "time", now, "config", config, "tensors",
                            tensors, "files", json_incref(files));
    if (extra)
        json_object_update(man, extra);
    char *text = json_dumps(man, JSON_INDENT(1));
    json_decref(man);
    char *mpath = zt_strdupf("%s/manifest.json", tmp);
    rc = zt_write_file_atomic(mpath, text, strlen(text));
    free(mpath);
    free(text);
    if (rc != ZT_OK)
        goto out;
    s_fsync_dir(tmp);
    if (rename(tmp, final) < 0) {
        rc = ZT_ESYS;
        goto out;
    }
    s_fsync_dir(root);
    if (keep > 0) {
        int n;
        char **names = s_list(root, &n);
        for (int i = 0; i < n; i++) {
            if (i >= keep) {
                char *old = zt_strdupf("%s/%s", root, names[i]);
                s_rm_rf(old);
                free(old);
            }
            free(names[i]);
        }
        free(names);
    }
out:
    if (rc != ZT_OK)
        s_rm_rf(tmp);
    if (rc == ZT_OK && path_p)
        *path_p = final;
    else
        free(final);
    free(tmp);
    json_decref(files);
    return rc;
}

/* A manifest's file entry holds what its numbers say, without overflow:
 * offset and count >= 0, offset + count representable, at least one array,
 * and bytes = count x arrays x 4. A manifest comes from the network (an
 * evaluator fetches it): read_range trusts only entries that pass. */
static bool s_entry_ok(json_t *f)
{
    json_t *o = json_object_get(f, "offset"), *c = json_object_get(f, "count"), *b = json_object_get(f, "bytes");
    size_t arrays = json_array_size(json_object_get(f, "arrays"));
    if (!json_is_integer(o) || !json_is_integer(c) || !json_is_integer(b) || arrays == 0 || arrays > 64)
        return false;
    int64_t off = json_integer_value(o), cnt = json_integer_value(c), bytes;
    return off >= 0 && cnt >= 0 && off <= INT64_MAX - cnt &&
           !__builtin_mul_overflow(cnt, (int64_t) (arrays * sizeof(float)), &bytes) && bytes == json_integer_value(b);
}

/* A plain file of this user's (not a link, not another user's): the only
 * kind a checkpoint is read from. */
static bool s_own_file(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid();
}

json_t *zt_ckpt_open(const char *dir, char *err, size_t errlen)
{
    char *mpath = zt_strdupf("%s/manifest.json", dir);
    if (!s_own_file(mpath)) {
        snprintf(err, errlen, "manifest.json: not a file of this user's (never read)");
        free(mpath);
        return NULL;
    }
    json_error_t jerr;
    json_t *man = json_load_file(mpath, 0, &jerr);
    free(mpath);
    if (!man) {
        snprintf(err, errlen, "manifest.json: %s", jerr.text);
        return NULL;
    }
    json_t *files = json_object_get(man, "files");
    if (!json_is_array(files) || !json_is_integer(json_object_get(man, "step"))) {
        snprintf(err, errlen, "manifest.json: no step or files");
        json_decref(man);
        return NULL;
    }
    size_t i;
    json_t *f;
    json_array_foreach(files, i, f) {
        const char *name = json_string_value(json_object_get(f, "file"));
        if (!name || strchr(name, '/') || !s_entry_ok(f)) {
            snprintf(err, errlen, "manifest.json: bad file entry %zu (its name, range, arrays or size)", i);
            json_decref(man);
            return NULL;
        }
        char *path = zt_strdupf("%s/%s", dir, name);
        size_t len = 0;
        char *data = s_own_file(path) ? zt_read_file(path, &len) : NULL;
        free(path);
        uLong crc = data ? crc32(crc32(0L, Z_NULL, 0), (const Bytef *) data, (uInt) len) : 0;
        free(data);
        if (!data || (json_int_t) len != json_integer_value(json_object_get(f, "bytes"))) {
            snprintf(err, errlen, "%s: %s", name, data ? "wrong size" : "missing");
            json_decref(man);
            return NULL;
        }
        if ((json_int_t) crc != json_integer_value(json_object_get(f, "crc32"))) {
            snprintf(err, errlen, "%s: checksum mismatch", name);
            json_decref(man);
            return NULL;
        }
    }
    return man;
}

char *zt_ckpt_latest(const char *root, json_t **manifest_p)
{
    int n;
    char **names = s_list(root, &n);
    char *found = NULL;
    for (int i = 0; i < n; i++) {
        char *dir = zt_strdupf("%s/%s", root, names[i]);
        char err[256];
        json_t *man = found ? NULL : zt_ckpt_open(dir, err, sizeof err);
        if (!found && !man)
            zt_warn("checkpoint %s is corrupt (%s); trying the previous one", dir, err);
        if (man) {
            found = dir;
            dir = NULL;
            if (manifest_p)
                *manifest_p = man;
            else
                json_decref(man);
        }
        free(dir);
        free(names[i]);
    }
    free(names);
    return found;
}

int zt_ckpt_read_range(const char *dir, json_t *man, int array, int64_t lo, int64_t hi, float *dst)
{
    size_t i;
    json_t *f;
    int64_t covered = 0;
    json_array_foreach(json_object_get(man, "files"), i, f) {
        if (!s_entry_ok(f)) /* a manifest not from zt_ckpt_open */
            return ZT_EPROTO;
        int64_t off = json_integer_value(json_object_get(f, "offset"));
        int64_t cnt = json_integer_value(json_object_get(f, "count"));
        int64_t a = off > lo ? off : lo, b = off + cnt < hi ? off + cnt : hi;
        if (a >= b)
            continue;
        if (array >= (int) json_array_size(json_object_get(f, "arrays")))
            return ZT_ENOTFOUND;
        char *path = zt_strdupf("%s/%s", dir, json_string_value(json_object_get(f, "file")));
        int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        free(path);
        struct stat st;
        if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid())) {
            close(fd); /* a file of another user's, or not a file: never read */
            return ZT_EIO;
        }
        if (fd < 0)
            return ZT_EIO;
        off_t pos = (off_t) (((int64_t) array * cnt + (a - off)) * (int64_t) sizeof(float));
        size_t want = (size_t) (b - a) * sizeof(float);
        ssize_t got = pread(fd, dst + (a - lo), want, pos);
        close(fd);
        if (got != (ssize_t) want)
            return ZT_EIO;
        covered += b - a;
    }
    return covered == hi - lo ? ZT_OK : ZT_ENOTFOUND;
}

bool zt_ckpt_name_ok(const char *name)
{
    const char *rest = NULL;
    if (!name)
        return false;
    if (!strncmp(name, "checkpoints/ckpt-", 17))
        rest = name + 17;
    else if (!strncmp(name, "model/ckpt-", 11))
        rest = name + 11;
    size_t n = rest ? strspn(rest, "0123456789") : 0;
    return n >= 1 && n <= 20 && rest[n] == '\0';
}

void zt_ckpt_selftest(const char *tmp)
{
    assert(zt_ckpt_name_ok("checkpoints/ckpt-000000000300") && zt_ckpt_name_ok("model/ckpt-1"));
    assert(!zt_ckpt_name_ok("..") && !zt_ckpt_name_ok("checkpoints/..") && !zt_ckpt_name_ok("checkpoints/ckpt-") &&
           !zt_ckpt_name_ok("checkpoints/ckpt-1/../..") && !zt_ckpt_name_ok("/etc/ckpt-1") &&
           !zt_ckpt_name_ok("model/ckpt-123456789012345678901") && !zt_ckpt_name_ok(NULL));
    char *root = zt_strdupf("%s/ckpt-selftest-%d", tmp, (int) getpid());
    float a0[5] = { 1, 2, 3, 4, 5 }, s0[5] = { 9, 9, 9, 9, 9 }, a1[3] = { 6, 7, 8 }, s1[3] = { 0, 0, 0 };
    zt_ps_shard_t sh[2] = { { 0, 5, 11, 2, { a0, s0 } }, { 5, 3, 12, 2, { a1, s1 } } };
    json_t *cfg = json_pack("{s:i}", "total", 8), *tens = json_pack("[{s:s, s:i}]", "name", "w", "numel", 8);
    char *p1 = NULL, *p2 = NULL;
    assert(zt_ckpt_write(root, 10, cfg, tens, NULL, sh, 2, 0, &p1) == ZT_OK);
    a0[0] = 100;
    assert(zt_ckpt_write(root, 20, cfg, tens, NULL, sh, 2, 0, &p2) == ZT_OK);
    json_t *man = NULL;
    char *latest = zt_ckpt_latest(root, &man);
    assert(latest && !strcmp(latest, p2));
    float out[8];
    assert(zt_ckpt_read_range(latest, man, 0, 0, 8, out) == ZT_OK);
    assert(out[0] == 100 && out[4] == 5 && out[7] == 8);
    assert(zt_ckpt_read_range(latest, man, 1, 3, 6, out) == ZT_OK && out[0] == 9 && out[2] == 0);
    json_decref(man);
    free(latest);
    /* Corrupt the newest: one flipped byte; the previous one is used. */
    char *f = zt_strdupf("%s/shard-1.bin", p2);
    int fd = open(f, O_WRONLY);
    assert(fd >= 0 && pwrite(fd, "X", 1, 4) == 1);
    close(fd);
    free(f);
    latest = zt_ckpt_latest(root, &man);
    assert(latest && !strcmp(latest, p1));
    assert(zt_ckpt_read_range(latest, man, 0, 0, 1, out) == ZT_OK && out[0] == 1);
    /* A manifest whose ranges overflow (from a broken or hostile chief; its
     * files' checksums still right) is refused, and read_range does not
     * trust such an entry either. */
    json_t *bad = json_deep_copy(man), *e = json_array_get(json_object_get(bad, "files"), 0);
    json_object_set_new(e, "offset", json_integer((json_int_t) 1 << 62));
    json_object_set_new(e, "count", json_integer(((json_int_t) 1 << 62) + 7305735122790187287LL / 4));
    assert(zt_ckpt_read_range(latest, bad, 0, 0, 1, out) == ZT_EPROTO);
    char *mpath = zt_strdupf("%s/manifest.json", latest), *saved = zt_read_file(mpath, NULL);
    assert(saved && json_dump_file(bad, mpath, 0) == 0);
    char err[256];
    json_t *none = zt_ckpt_open(latest, err, sizeof err);
    assert(!none && strstr(err, "bad file entry 0"));
    FILE *mf = fopen(mpath, "w");
    assert(mf && fputs(saved, mf) >= 0 && fclose(mf) == 0);
    free(saved);
    free(mpath);
    json_decref(bad);
    json_decref(man);
    free(latest);
    /* A half-written checkpoint (no manifest) is never the latest. */
    char *partial = zt_strdupf("%s/ckpt-000000000099", root);
    mkdir(partial, 0755);
    latest = zt_ckpt_latest(root, NULL);
    assert(latest && !strcmp(latest, p1));
    free(latest);
    s_rm_rf(partial);
    free(partial);
    s_rm_rf(p1);
    s_rm_rf(p2);
    rmdir(root);
    free(p1);
    free(p2);
    free(root);
    json_decref(cfg);
    json_decref(tens);
}
