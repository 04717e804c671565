/* The parameter server's state: its range configured from the workers'
 * config, restored from a job checkpoint, and kept in (and restored from)
 * its snapshot file. */
#include "zt_ps_server_int.h"
#include "state/zt_ckpt.h"
#include "wire/zt_msg.h"
#include "wire/zt_transport.h"
#include "wire/zt_bulk.h"
#include "state/zt_optim.h"
#include "base/zt_json.h"
#include "base/zt_shard.h"
#include "wire/zt_shm.h"
#include "base/zt_util.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_log.h"
#include "ztrain/zt_knobs.h"
#include "ztrain/zt_allreduce.h"
#include "allreduce/zt_arlayout.h"
#include "runtime/zt_process.h"
#include "base/zt_refusals.h"
#include <czmq.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

static void s_free_areas(zt_ps_server_t *self)
{
    for (int i = 0; i < self->nareas; i++)
        zt_shm_destroy(&self->areas[i].region);
    self->nareas = 0;
}

void zt_ps_free_state(zt_ps_server_t *self)
{
    free(self->values);
    for (int a = 0; a < ZT_OPT_MAX_STATE; a++)
        free(self->state[a]);
    free(self->accum);
    free(self->config_text);
    self->values = self->accum = NULL;
    self->config_text = NULL;
    s_free_areas(self);
    memset(self->state, 0, sizeof self->state);
    self->configured = false;
}

static uint64_t s_fnv(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char) *s) * 1099511628211ull;
    return h;
}

/* Takes a config; allocates and (when init) initialises our range. */
int zt_ps_configure(zt_ps_server_t *self, const char *text, bool init, char *err, size_t errlen)
{
    json_error_t jerr;
    json_t *cfg = json_loads(text, 0, &jerr);
    json_t *tensors = cfg ? json_object_get(cfg, "tensors") : NULL;
    int64_t total = cfg ? json_integer_value(json_object_get(cfg, "total")) : -1;
    int servers = cfg ? (int) json_integer_value(json_object_get(cfg, "servers")) : 0;
    zt_opt_t opt;
    char why[160] = "";
    if (!cfg || !json_is_array(tensors) || total < 0 || total > ((int64_t) 1 << 40) ||
        zt_opt_from_json(&opt, json_object_get(cfg, "optimizer"), why, sizeof why)) {
        snprintf(err, errlen, "malformed model config%s%s", *why ? ": " : "", why);
        json_decref(cfg);
        return ZT_EPROTO;
    }
    if (servers != self->opts.servers) {
        snprintf(err, errlen, "the worker knows %d parameter servers, this job has %d", servers,
                 self->opts.servers);
        json_decref(cfg);
        return ZT_EINVAL;
    }
    int64_t lo, hi;
    zt_shard_range(total, self->opts.servers, self->opts.index, &lo, &hi);
    size_t phys = (size_t) sysconf(_SC_PHYS_PAGES) * (size_t) sysconf(_SC_PAGESIZE);
    size_t need = (size_t) (hi - lo) * sizeof(float) * (size_t) (2 + zt_opt_state_arrays(opt.kind));
    if (need > phys) { /* the config came from the network */
        snprintf(err, errlen, "a shard of %lld elements needs %.1f GB, more than this machine's %.1f GB",
                 (long long) (hi - lo), (double) need / 1e9, (double) phys / 1e9);
        json_decref(cfg);
        return ZT_EINVAL;
    }
    zt_ps_free_state(self);
    self->opt = opt;
    self->sync = json_is_true(json_object_get(cfg, "sync"));
    self->workers = (int) json_integer_value(json_object_get(cfg, "workers"));
    if (self->workers < 1 || self->workers > MAX_WORKERS)
        self->workers = 1;
    self->max_staleness = (int) json_integer_value(json_object_get(cfg, "max_staleness"));
    self->total = total;
    self->lo = lo;
    self->hi = hi;
    size_t n = (size_t) (self->hi - self->lo);
    self->values = malloc(n * sizeof(float) + 1);
    for (int a = 0; a < zt_opt_state_arrays(self->opt.kind); a++)
        self->state[a] = malloc(n * sizeof(float) + 1);
    if (self->sync)
        self->accum = calloc(n + 1, sizeof(float));
    bool ok = self->values && (!self->sync || self->accum);
    for (int a = 0; a < zt_opt_state_arrays(self->opt.kind); a++)
        ok = ok && self->state[a];
    if (!ok) {
        snprintf(err, errlen, "out of memory for a shard of %zu elements", n);
        zt_ps_free_state(self);
        json_decref(cfg);
        return ZT_ENOMEM;
    }
    zt_opt_init_state(&self->opt, self->state, (int64_t) n);
    if (init) {
        uint64_t seed = (uint64_t) json_integer_value(json_object_get(cfg, "seed"));
        size_t i;
        json_t *t;
        json_array_foreach(tensors, i, t) {
            int64_t off = json_integer_value(json_object_get(t, "offset"));
            int64_t cnt = json_integer_value(json_object_get(t, "numel"));
            float scale = (float) json_number_value(json_object_get(t, "scale"));
            if (off < 0 || cnt < 0 || off > total || cnt > total - off)
                continue; /* outside the model (no overflow for any inputs) */
            int64_t a = off > self->lo ? off : self->lo;
            int64_t b = off + cnt < self->hi ? off + cnt : self->hi;
            for (int64_t k = a; k < b; k++)
                self->values[k - self->lo] = scale != 0 ? zt_init_uniform(seed, k, scale) : 0.0f;
        }
    }
    self->config_text = strdup(text);
    self->hash = (int64_t) (s_fnv(text) >> 1);
    self->configured = true;
    self->version = 0;
    self->pushed = 0;
    memset(self->progress, 0, sizeof self->progress);
    json_decref(cfg);
    return ZT_OK;
}

void zt_ps_restore(zt_ps_server_t *self)
{
    self->restored_step = -1;
    if (!self->opts.checkpoint_dir)
        return;
    json_t *man = NULL;
    char *dir = zt_ckpt_latest(self->opts.checkpoint_dir, &man);
    if (!dir)
        return;
    char *cfg = json_dumps(json_object_get(man, "config"), JSON_COMPACT | JSON_SORT_KEYS);
    char err[256];
    if (!cfg || zt_ps_configure(self, cfg, false, err, sizeof err) != ZT_OK) {
        zt_warn("cannot restore from %s: %s", dir, cfg ? err : "no config");
        zt_ps_free_state(self);
    }
    else {
        int rc = zt_ckpt_read_range(dir, man, 0, self->lo, self->hi, self->values);
        for (int a = 0; rc == ZT_OK && a < zt_opt_state_arrays(self->opt.kind); a++)
            rc = zt_ckpt_read_range(dir, man, 1 + a, self->lo, self->hi, self->state[a]);
        if (rc != ZT_OK) {
            zt_warn("cannot restore from %s: %s", dir, zt_strerror(rc));
            zt_ps_free_state(self);
        }
        else {
            char *mp = zt_strdupf("%s/manifest.json", dir);
            struct stat st;
            self->restored_mtime = stat(mp, &st) == 0 ? (double) st.st_mtim.tv_sec + st.st_mtim.tv_nsec / 1e9 : 0;
            free(mp);
            self->restored_step = json_integer_value(json_object_get(man, "step"));
            zt_info("restored elements [%lld, %lld) from %s (step %lld)", (long long) self->lo,
                    (long long) self->hi, dir, (long long) self->restored_step);
        }
    }
    free(cfg);
    free(dir);
    json_decref(man);
}

/* ------------------------------------------------------------ snapshots
 * The file: "ZTPSSNP1", then u32 arrays, u32 config length, i64 lo, hi and
 * version, the config text, the arrays (values, then the optimizer's state),
 * and a CRC-32 of everything before it. Written to a temporary name and
 * renamed, so a reader sees a whole one or the previous one. */
#define SNAP_MAGIC "ZTPSSNP1"

/* A snapshot write that failed: the one before stays the shard's, the
 * updates since are not taken as written (the next try comes after the
 * usual interval), the failure is counted (snapshot_failures in job.json)
 * and logged with its reason at most once per 5 s. */
static void s_snapshot_failed(zt_ps_server_t *self, const char *tmp, const char *what, int err)
{
    int64_t now = zt_now_ms();
    self->snap_ms = now;
    self->snap_failures++;
    if (!self->snap_failed_said || now - self->snap_failed_said >= ZT_REFUSALS_LOG_MS) {
        zt_warn("the shard snapshot %s: %s: %s (%lld failed writes in all; the last one written holds version "
                "%lld of %lld)", tmp, what, strerror(err), (long long) self->snap_failures,
                (long long) self->snap_version, (long long) self->version);
        self->snap_failed_said = now;
    }
    if (self->opts.replica && self->snap_failures != self->snap_failed_sent) {
        zt_replica_report_metric(self->opts.replica, "snapshot_failures", (double) self->snap_failures, 0);
        self->snap_failed_sent = self->snap_failures;
    }
}

void zt_ps_snapshot_write(zt_ps_server_t *self)
{
    if (!self->configured || self->sync || !self->opts.snapshot_path)
        return;
    char *tmp = zt_strdupf("%s.tmp", self->opts.snapshot_path);
    /* made afresh, mode 0600, never through a link planted in its place */
    unlink(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f && fd >= 0)
        close(fd);
    if (!f) {
        s_snapshot_failed(self, tmp, "cannot create it", errno);
        free(tmp);
        return;
    }
    uint32_t arrays = 1 + (uint32_t) zt_opt_state_arrays(self->opt.kind), clen = (uint32_t) strlen(self->config_text);
    int64_t head[3] = { self->lo, self->hi, self->version };
    size_t bytes = (size_t) (self->hi - self->lo) * sizeof(float);
    uLong crc = crc32(0L, Z_NULL, 0);
#define SNAP_PUT(p, n) do { fwrite((p), 1, (n), f); crc = crc32(crc, (const Bytef *) (p), (uInt) (n)); } while (0)
    SNAP_PUT(SNAP_MAGIC, 8);
    SNAP_PUT(&arrays, sizeof arrays);
    SNAP_PUT(&clen, sizeof clen);
    SNAP_PUT(head, sizeof head);
    SNAP_PUT(self->config_text, clen);
    for (uint32_t a = 0; a < arrays; a++)
        SNAP_PUT(a == 0 ? self->values : self->state[a - 1], bytes);
#undef SNAP_PUT
    uint32_t c32 = (uint32_t) crc;
    fwrite(&c32, sizeof c32, 1, f);
    int err = ferror(f) ? errno : 0;
    if (fflush(f) != 0 && !err) /* (no fsync: the snapshot outlives the process, not the machine) */
        err = errno;
    if (fclose(f) != 0 && !err)
        err = errno;
    if (!err && rename(tmp, self->opts.snapshot_path) != 0)
        err = errno ? errno : EIO;
    if (err) {
        unlink(tmp);
        s_snapshot_failed(self, tmp, "cannot write it", err);
    }
    else {
        self->snap_version = self->version;
        self->snap_ms = zt_now_ms();
    }
    free(tmp);
}

/* Seconds since the wall-clock time t (0 for one ahead). */
static double s_age_s(double t)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    double age = (double) now.tv_sec + now.tv_nsec / 1e9 - t;
    return age > 0 ? age : 0;
}

/* The snapshot file, when it is whole, of this shard, and newer than the
 * checkpoint restored: the shard goes on from it. */
void zt_ps_snapshot_restore(zt_ps_server_t *self)
{
    const char *path = self->opts.snapshot_path;
    struct stat st;
    if (!path || lstat(path, &st) != 0)
        return;
    if (!S_ISREG(st.st_mode) || st.st_uid != geteuid()) { /* a link, or another user's: never read */
        zt_warn("the shard snapshot %s is not a file of this user's: not restored from", path);
        return;
    }
    double mtime = (double) st.st_mtim.tv_sec + st.st_mtim.tv_nsec / 1e9;
    if (self->restored_step >= 0 && mtime <= self->restored_mtime)
        return; /* the checkpoint is newer */
    size_t len = 0;
    char *buf = zt_read_file(path, &len);
    const char *why = NULL;
    uint32_t arrays = 0, clen = 0, c32 = 0;
    int64_t head[3];
    size_t fixed = 8 + sizeof arrays + sizeof clen + sizeof head;
    if (!buf || len < fixed + sizeof c32 || memcmp(buf, SNAP_MAGIC, 8))
        why = "not a shard snapshot";
    else {
        memcpy(&arrays, buf + 8, sizeof arrays);
        memcpy(&clen, buf + 8 + sizeof arrays, sizeof clen);
        memcpy(head, buf + 8 + sizeof arrays + sizeof clen, sizeof head);
        size_t bytes = head[1] > head[0] ? (size_t) (head[1] - head[0]) * sizeof(float) : 0;
        if (arrays < 1 || arrays > 1 + ZT_OPT_MAX_STATE || clen > len ||
            len != fixed + clen + arrays * bytes + sizeof c32)
            why = "its sizes do not add up";
        else {
            memcpy(&c32, buf + len - sizeof c32, sizeof c32);
            if ((uint32_t) crc32(crc32(0L, Z_NULL, 0), (const Bytef *) buf, (uInt) (len - sizeof c32)) != c32)
                why = "its checksum does not match (a torn write)";
        }
    }
    char err[256] = "";
    char *cfg = why ? NULL : strndup(buf + fixed, clen);
    if (!why && zt_ps_configure(self, cfg, false, err, sizeof err) != ZT_OK)
        why = err;
    else if (!why && (self->lo != head[0] || self->hi != head[1] ||
                      arrays != 1 + (uint32_t) zt_opt_state_arrays(self->opt.kind)))
        why = "another shard's";
    if (why) {
        zt_warn("not restoring from the shard snapshot %s: %s", path, why);
        if (cfg) { /* configured from it: back to the checkpoint, if any */
            zt_ps_free_state(self);
            zt_ps_restore(self);
        }
    }
    else {
        size_t bytes = (size_t) (self->hi - self->lo) * sizeof(float);
        const char *at = buf + fixed + clen;
        for (uint32_t a = 0; a < arrays; a++, at += bytes)
            memcpy(a == 0 ? self->values : self->state[a - 1], at, bytes);
        self->version = self->snap_version = head[2];
        zt_info("restored elements [%lld, %lld) from the shard snapshot %s (%lld updates, written %.1f s ago; "
                "newer than %s)", (long long) self->lo, (long long) self->hi, path, (long long) head[2],
                s_age_s(mtime),
                self->restored_step >= 0 ? "the checkpoint" : "any checkpoint");
    }
    free(cfg);
    free(buf);
}

