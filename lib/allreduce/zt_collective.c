/* Collectives of any size over one fixed all-reduce group: an agreement
 * tensor and K slots, each slot one fusion bucket (or, under autotune's
 * layouts, several slots one bucket). Data streams through the slots (see
 * zt_collective.h); this file only packs and unpacks, the all-reduce
 * (zt_allreduce.c) moves the bytes. */
#include "ztrain/zt_collective.h"
#include "allreduce/zt_ar_internal.h"
#include "ztrain/zt_job.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_knobs.h"
#include "ztrain/zt_log.h"
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define META 5          /* agreement floats per worker: op, root + 1, n in three 21-bit parts */
#define MAX_SLOTS 4096
enum { OP_ALLREDUCE = 1, OP_BROADCAST = 2 };

typedef enum {
    P_SUM,   /* floats in, their sum (times scale) out */
    P_WORDS  /* 16-bit words in as floats (the root's; zeros elsewhere), words out */
} s_kind_t;

/* A stretch of one slot and where its result goes. */
typedef struct {
    void *dst;      /* NULL: nothing comes back (a broadcast's root) */
    int64_t n;      /* elements */
    int slot;       /* tensor id, 1..K */
    int64_t pos;    /* first float in the slot */
    s_kind_t kind;
    float scale;    /* P_SUM: 1, or 1/workers to average */
} s_piece_t;

struct zt_coll_t {
    zt_allreduce_t *ar;         /* the group: tensor 0 agrees, 1..K are slots */
    int rank, workers;
    int K;                      /* slots per round */
    int64_t S;                  /* floats per slot */
    int cur;                    /* the slot being filled, 1..K; K + 1: the round is full */
    int64_t pos;                /* floats used in slot cur */
    float **sent;               /* [1..K]: the buffer each slot was filled in this round */
    s_piece_t *pieces;          /* this round's stretches */
    int npieces, cap;
    int regions;                /* zt_coll_add calls since the last finish */
    int64_t rounds;             /* completed */
    bool broken;                /* a round failed: the workers are out of step */
    bool pad;                   /* autotune: a bucket may join slots, and is padded whole */
    int timeout_ms;             /* ZT_ALLREDUCE_TIMEOUT_MS */
    char err[1024];
};

static int s_fail(zt_coll_t *self, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int s_fail(zt_coll_t *self, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(self->err, sizeof self->err, fmt, ap);
    va_end(ap);
    return rc;
}

zt_coll_t *zt_coll_new(const zt_allreduce_opts_t *opts, int timeout_ms, char *why, size_t why_size)
{
    zt_coll_t *self = calloc(1, sizeof *self);
    self->rank = opts->rank;
    self->workers = opts->workers;
    self->timeout_ms = timeout_ms >= 0 ? timeout_ms : (int) zt_knob_int(ZT_KNOB_ALLREDUCE_TIMEOUT_MS);
    /* Autotune searches thresholds from the slot size up: a layout then
     * joins slots into buckets, and a round's partly filled bucket is padded
     * with zero slots (s_pad). An elastic group's members come and go: no
     * search there. */
    zt_allreduce_opts_t o = *opts;
    o.autotune = opts->autotune < 0 ? -1 : 2;
    self->ar = zt_allreduce_new(&o);
    if (self->ar && o.autotune < 0 && zt_allreduce_autotune_asked() && opts->rank == 0)
        zt_warn("ZT_AUTOTUNE (HOROVOD_AUTOTUNE) is not used in an elastic pool (its members come and go): the "
                "fusion threshold, the slot size, stays %lld bytes (ZT_FUSION_THRESHOLD)",
                (long long) zt_allreduce_threshold(self->ar));
    self->pad = self->ar && self->ar->tune;
    if (!self->ar) {
        snprintf(why, why_size, "cannot start the all-reduce (rank %d of %d, %d reducers): see the log "
                 "above", opts->rank, opts->workers, opts->nreducers);
        zt_coll_destroy(&self);
        return NULL;
    }
    self->S = zt_allreduce_threshold(self->ar) / (int64_t) sizeof(float);
    if (self->S < 1)
        self->S = 1;
    int64_t k = zt_knob_int(ZT_KNOB_COLL_ROUND_BYTES) / (self->S * (int64_t) sizeof(float));
    self->K = (int) (k < 1 ? 1 : k > MAX_SLOTS ? MAX_SLOTS : k);
    int64_t meta[1] = { (int64_t) META * self->workers }, slot[1] = { self->S };
    zt_allreduce_register(self->ar, "agree", meta, 1, ZT_F32);
    for (int s = 1; s <= self->K; s++) {
        char name[32];
        snprintf(name, sizeof name, "slot%d", s);
        zt_allreduce_register(self->ar, name, slot, 1, ZT_F32);
    }
    int rc = zt_allreduce_commit(self->ar, self->timeout_ms);
    if (rc != ZT_OK) {
        snprintf(why, why_size, "%s", zt_allreduce_error(self->ar) ? zt_allreduce_error(self->ar)
                                                                   : zt_strerror(rc));
        zt_coll_destroy(&self);
        return NULL;
    }
    self->sent = calloc((size_t) self->K + 2, sizeof *self->sent);
    self->cur = 1;
    return self;
}

void zt_coll_destroy(zt_coll_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zt_coll_t *self = *self_p;
    zt_allreduce_destroy(&self->ar);
    free(self->sent);
    free(self->pieces);
    free(self);
    *self_p = NULL;
}

int zt_coll_rank(zt_coll_t *self) { return self->rank; }
int zt_coll_size(zt_coll_t *self) { return self->workers; }
int64_t zt_coll_slot_bytes(zt_coll_t *self) { return self->S * (int64_t) sizeof(float); }
int zt_coll_slots(zt_coll_t *self) { return self->K; }
int64_t zt_coll_rounds(zt_coll_t *self) { return self->rounds; }
int zt_coll_layout(zt_coll_t *self, int64_t *threshold, int *cycle_ms, bool *searching)
{
    return zt_allreduce_layout(self->ar, threshold, cycle_ms, searching);
}
int zt_coll_pending(zt_coll_t *self) { return self->regions; }
const char *zt_coll_error(zt_coll_t *self) { return self->err; }

void zt_coll_abandon_when(zt_coll_t *self, bool (*fn)(void *arg), void *arg)
{
    zt_allreduce_abandon_when(self->ar, fn, arg);
}

/* ------------------------------------------------------------ rounds */

/* Under autotune's layouts: every bucket some of whose tensors this round
 * submitted is completed with zeros (a bucket goes out only whole; the
 * agreement tensor's zeros say "no call", a slot's are summed to nothing). */
static void s_pad(zt_coll_t *self)
{
    for (int t = 0; self->pad && t <= self->K;) {
        int first = t, last = t;
        bool partial = zt_ar_bucket_partial(self->ar, t, &first, &last);
        for (int u = first; partial && u <= last && u <= self->K; u++)
            if (!self->ar->t[u].submitted) {
                float *buf = zt_allreduce_buffer(self->ar, u);
                int64_t n = u == 0 ? (int64_t) META * self->workers : self->S;
                if (buf) {
                    memset(buf, 0, (size_t) n * sizeof(float));
                    zt_allreduce_submit(self->ar, u, buf);
                }
            }
        t = last + 1; /* last >= t: t's own bucket, or t itself */
    }
}

/* Waits for what was submitted; a failure leaves the workers out of step
 * (who got which sum is unknown), so every later call fails too. */
static int s_wait(zt_coll_t *self, int timeout_ms)
{
    s_pad(self);
    int rc = zt_allreduce_wait(self->ar, false, timeout_ms < 0 ? self->timeout_ms : timeout_ms);
    if (rc != ZT_OK) {
        self->broken = true;
        return s_fail(self, rc, "all-reduce: %s", zt_allreduce_error(self->ar) && *zt_allreduce_error(self->ar)
                                                      ? zt_allreduce_error(self->ar) : zt_strerror(rc));
    }
    self->rounds++;
    return ZT_OK;
}

static void s_unpack(zt_coll_t *self, const s_piece_t *p)
{
    const float *src = self->sent[p->slot] + p->pos;
    if (!p->dst)
        return;
    if (src == p->dst) { /* a whole slot sent from the caller's floats: the sum is there */
        float *d = p->dst;
        for (int64_t i = 0; p->scale != 1.0f && !zt_ar_landed(self->ar, p->slot) && i < p->n; i++)
            d[i] *= p->scale; /* (landed: already times the scale) */
    }
    else if (p->kind == P_WORDS) {
        uint16_t *d = p->dst;
        for (int64_t i = 0; i < p->n; i++)
            d[i] = (uint16_t) lrintf(src[i]);
    }
    else if (p->scale == 1.0f)
        memcpy(p->dst, src, (size_t) p->n * sizeof(float));
    else {
        float *d = p->dst;
        for (int64_t i = 0; i < p->n; i++)
            d[i] = src[i] * p->scale;
    }
}

/* Sends the partly filled slot (its unused end zeroed: the reducers refuse
 * what is not finite), completes the round, and writes every result back. */
static int s_round(zt_coll_t *self, int timeout_ms)
{
    if (self->cur <= self->K && self->pos > 0) {
        float *buf = self->sent[self->cur];
        memset(buf + self->pos, 0, (size_t) (self->S - self->pos) * sizeof(float));
        zt_allreduce_submit(self->ar, self->cur, buf);
        self->cur++;
    }
    if (self->cur == 1)
        return ZT_OK; /* nothing in this round */
    int rc = s_wait(self, timeout_ms);
    for (int i = 0; rc == ZT_OK && i < self->npieces; i++)
        s_unpack(self, &self->pieces[i]);
    self->npieces = 0;
    self->cur = 1;
    self->pos = 0;
    return rc;
}

static void s_record(zt_coll_t *self, s_piece_t p)
{
    if (self->npieces == self->cap) {
        self->cap = self->cap ? 2 * self->cap : 64;
        self->pieces = realloc(self->pieces, (size_t) self->cap * sizeof *self->pieces);
    }
    self->pieces[self->npieces++] = p;
}

/* Copies n elements of src (NULL: zeros) into the slots, recording where
 * each result goes (dst), and sends each slot as it fills. */
static int s_stream(zt_coll_t *self, s_kind_t kind, const void *src, void *dst, int64_t n, float scale,
                    int timeout_ms)
{
    int64_t done = 0;
    while (done < n) {
        if (self->cur > self->K) {
            int rc = s_round(self, timeout_ms);
            if (rc != ZT_OK)
                return rc;
        }
        int64_t c = n - done < self->S - self->pos ? n - done : self->S - self->pos;
        /* A whole slot of the caller's floats, summed in place, is sent from
         * where it is and its sum written back there (no copy in, one out);
         * anything else is copied into the slot's own buffer. */
        bool whole = self->pos == 0 && c == self->S && kind == P_SUM && src && src == dst;
        if (self->pos == 0)
            self->sent[self->cur] = whole ? (float *) dst + done : zt_allreduce_buffer(self->ar, self->cur);
        float *to = self->sent[self->cur] + self->pos;
        if (whole)
            ;
        else if (!src)
            memset(to, 0, (size_t) c * sizeof(float));
        else if (kind == P_WORDS)
            for (int64_t i = 0; i < c; i++)
                to[i] = (float) ((const uint16_t *) src)[done + i];
        else
            memcpy(to, (const float *) src + done, (size_t) c * sizeof(float));
        void *back = !dst ? NULL : kind == P_WORDS ? (void *) ((uint16_t *) dst + done)
                                                   : (void *) ((float *) dst + done);
        s_record(self, (s_piece_t) { back, c, self->cur, self->pos, kind, scale });
        self->pos += c;
        done += c;
        if (self->pos == self->S) {
            zt_ar_submit_scaled(self->ar, self->cur, self->sent[self->cur], whole ? scale : 1.0f);
            self->cur++;
            self->pos = 0;
        }
    }
    return ZT_OK;
}

static int s_usable(zt_coll_t *self, const char *what)
{
    if (self->broken)
        return s_fail(self, ZT_EIO, "%s: an earlier round failed, the workers are out of step (%s)", what,
                      self->err[0] ? self->err : "no detail");
    return ZT_OK;
}

/* ------------------------------------------------------------ agreement */

static void s_describe(char *out, size_t size, const float *m)
{
    int64_t n = (int64_t) m[2] | (int64_t) m[3] << 21 | (int64_t) m[4] << 42;
    if ((int) m[0] == OP_ALLREDUCE)
        snprintf(out, size, "allreduce of %" PRId64 " floats", n);
    else if ((int) m[0] == OP_BROADCAST)
        snprintf(out, size, "broadcast of %" PRId64 " bytes from rank %d", n, (int) m[1] - 1);
    else
        snprintf(out, size, "no call");
}

/* Every worker says what it is about to do; all see all, so all agree or
 * all fail alike (and the group stays in step). */
static int s_agree(zt_coll_t *self, int op, int64_t n, int root, const char *what, int timeout_ms)
{
    int rc = s_usable(self, what);
    if (rc == ZT_OK && self->regions > 0)
        rc = s_fail(self, ZT_EINVAL, "%s: a stream of %d region%s is open (zt_coll_finish first)", what,
                    self->regions, self->regions == 1 ? "" : "s");
    if (rc != ZT_OK)
        return rc;
    float *m = zt_allreduce_buffer(self->ar, 0);
    memset(m, 0, (size_t) META * (size_t) self->workers * sizeof(float));
    float *mine = m + (size_t) META * (size_t) self->rank;
    mine[0] = (float) op;
    mine[1] = (float) (root + 1);
    for (int i = 0; i < 3; i++)
        mine[2 + i] = (float) ((n >> (21 * i)) & ((1 << 21) - 1));
    float me[META];
    memcpy(me, mine, sizeof me);
    zt_allreduce_submit(self->ar, 0, m);
    if ((rc = s_wait(self, timeout_ms)) != ZT_OK)
        return rc;
    bool same = true;
    for (int w = 0; w < self->workers; w++)
        same = same && !memcmp(m + (size_t) META * (size_t) w, me, sizeof me);
    if (same)
        return ZT_OK;
    size_t len = (size_t) snprintf(self->err, sizeof self->err, "%s: the workers' calls differ:", what);
    for (int w = 0; w < self->workers && len < sizeof self->err; w++) {
        char d[128];
        s_describe(d, sizeof d, m + (size_t) META * (size_t) w);
        len += (size_t) snprintf(self->err + len, sizeof self->err - len, "%s rank %d: %s", w ? ";" : "", w, d);
    }
    return ZT_EINVAL;
}

/* ------------------------------------------------------------ the calls */

int zt_coll_allreduce(zt_coll_t *self, float *data, int64_t n, bool average, int timeout_ms)
{
    if (n < 0 || (n > 0 && !data) || n >= (int64_t) 1 << 62)
        return s_fail(self, ZT_EINVAL, "allreduce: %" PRId64 " elements at %p", n, (void *) data);
    int rc = s_agree(self, OP_ALLREDUCE, n, -1, "allreduce", timeout_ms);
    if (rc != ZT_OK)
        return rc;
    float scale = average ? 1.0f / (float) self->workers : 1.0f;
    rc = s_stream(self, P_SUM, data, data, n, scale, timeout_ms);
    return rc == ZT_OK ? s_round(self, timeout_ms) : rc;
}

int zt_coll_broadcast(zt_coll_t *self, void *data, int64_t bytes, int root, int timeout_ms)
{
    if (bytes < 0 || (bytes > 0 && !data) || bytes >= (int64_t) 1 << 62 || root < 0 || root >= self->workers)
        return s_fail(self, ZT_EINVAL, "broadcast: %" PRId64 " bytes from rank %d of %d", bytes, root,
                      self->workers);
    int rc = s_agree(self, OP_BROADCAST, bytes, root, "broadcast", timeout_ms);
    if (rc != ZT_OK)
        return rc;
    bool me = self->rank == root;
    int64_t words = bytes / 2;
    uint16_t tail[2] = { 0, 0 }; /* an odd last byte travels as a word of its own */
    if (bytes % 2)
        memcpy(tail, (char *) data + bytes - 1, 1);
    rc = s_stream(self, P_WORDS, me ? data : NULL, me ? NULL : data, words, 1.0f, timeout_ms);
    if (rc == ZT_OK && bytes % 2)
        rc = s_stream(self, P_WORDS, me ? tail : NULL, me ? NULL : tail, 1, 1.0f, timeout_ms);
    if (rc == ZT_OK)
        rc = s_round(self, timeout_ms);
    if (rc == ZT_OK && !me && bytes % 2)
        memcpy((char *) data + bytes - 1, tail, 1);
    return rc;
}

int zt_coll_add(zt_coll_t *self, float *data, int64_t n, bool average, int timeout_ms)
{
    int rc = s_usable(self, "add");
    if (rc != ZT_OK)
        return rc;
    if (n < 0 || (n > 0 && !data))
        return s_fail(self, ZT_EINVAL, "add: %" PRId64 " elements at %p", n, (void *) data);
    self->regions++;
    return s_stream(self, P_SUM, data, data, n, average ? 1.0f / (float) self->workers : 1.0f, timeout_ms);
}

int zt_coll_finish(zt_coll_t *self, int timeout_ms)
{
    int rc = s_usable(self, "finish");
    if (rc == ZT_OK)
        rc = s_round(self, timeout_ms);
    self->regions = 0;
    return rc;
}

zt_coll_t *zt_job_collective(const zt_job_t *job, int timeout_ms, char *why, size_t why_size)
{
    zt_allreduce_opts_t o = { job->rank, job->size, (const char *const *) job->reducers, job->nreducers,
                              (const char *const *) job->peers, 0, -1, job->group > 0 ? job->group : 0, 0,
                              job->group >= 0 ? -1 : 0 /* an elastic pool: no autotune */ };
    return zt_coll_new(&o, timeout_ms, why, why_size);
}
