/* The all-reduce client: fusion buckets, pieces to reducers (or a ring). */
#include "ztrain/zt_allreduce.h"
#include "allreduce/zt_arlayout.h"
#include "wire/zt_msg.h"
#include "wire/zt_transport.h"
#include "base/zt_shard.h"
#include "wire/zt_spin.h"
#include "wire/zt_shm.h"
#include "base/zt_util.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_knobs.h"
#include "ztrain/zt_log.h"
#include <czmq.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define PIECE_BYTES self->layout.piece_bytes
#define RESEND_MS 2000
#define MAX_PENDING 4096

typedef struct {
    char name[64];              /* tensor name */
    int64_t shape[8];
    int ndims;
    int dtype;
    void *data;                 /* caller's buffer this round */
    bool submitted, sent;       /* this round */
} s_tensor_t;

typedef struct {
    char *buf;                  /* packed contributions, then the results */
    char *last;                 /* the previous round's result (a restarted reducer may ask) */
    int64_t last_gen;           /* its generation, -1 none */
    size_t es;                  /* element size */
    int64_t gen;                /* rounds completed */
    bool active;                /* has submissions this round */
    int nsubmitted;
    int64_t oldest_ms;          /* first submitted-unsent tensor */
    int64_t *lo, *hi;           /* per reducer chunk */
    bool **piece_done;          /* per reducer: result pieces received */
    int *npieces;
    atomic_int lent;            /* zero-copy frames ZeroMQ still holds */
    bool windowed;              /* one large tensor: pieces go out under the send window */
    bool in_shm;                /* buf and last live in the shared region: every tensor is packed */
    int64_t *wnext, *wend;      /* per reducer: next element to send, end of what to send */
    int64_t *wfly;              /* per reducer: bytes sent whose sums have not come back */
} s_bucket_t;

typedef struct {
    zt_msg_t msg;               /* a ring message received early */
    zmq_msg_t payload;
} s_pending_t;

struct zt_allreduce_t {
    int rank, workers, R;
    char **reducer_addrs;
    zsock_t **red;              /* DEALER per reducer */
    char **peer_addrs;
    zsock_t *ring_in, *ring_out;/* ROUTER (from prev), DEALER (to next) */
    s_tensor_t *t;
    int nt, tcap;
    bool committed;
    zt_ar_layout_t layout;
    s_bucket_t *b;
    json_t *tensors_json;
    char *layout_text;
    int64_t threshold;
    int cycle_ms;
    int64_t *window;            /* per reducer: send window in bytes; 0: none */
    bool *red_local;            /* per reducer: on this host (ipc://) */
    zt_shm_region_t *shm;       /* the buckets' buffers, read in place by local reducers */
    int64_t req;
    uint64_t seq;
    s_pending_t *pending;
    int npending;
    zt_spin_t spin;             /* busy-poll budget while waiting for sums */
    char err[512];
};

/* A fusion or cycle knob in its unit times scale; -1 when unset or 0. */
static int64_t s_knob_scaled(zt_knob_t knob, double scale)
{
    double d = zt_knob_is_set(knob) ? zt_knob_num(knob) : 0;
    return d > 0 ? (int64_t) (d * scale) : -1;
}

zt_allreduce_t *zt_allreduce_new(const zt_allreduce_opts_t *o)
{
    if (o->workers < 1 || o->rank < 0 || o->rank >= o->workers || o->nreducers < 0 ||
        (o->nreducers == 0 && o->workers > 1 && !o->peers))
        return NULL;
    char why[512];
    if (zt_knobs_check(why, sizeof why) != ZT_OK) {
        zt_error("all-reduce: %s", why);
        return NULL;
    }
    zt_allreduce_t *self = calloc(1, sizeof *self);
    self->rank = o->rank;
    self->workers = o->workers;
    self->R = o->nreducers;
    zt_spin_init(&self->spin);
    /* Threshold precedence: explicit, ZT_FUSION_THRESHOLD, HOROVOD_FUSION_THRESHOLD,
     * ZT_BUCKET_CAP_MB, 64 MiB. Cycle: explicit, ZT_CYCLE_TIME_MS, HOROVOD_CYCLE_TIME, 5. */
    int64_t th = o->fusion_threshold;
    if (th <= 0) th = s_knob_scaled(ZT_KNOB_FUSION_THRESHOLD, 1);
    if (th <= 0) th = s_knob_scaled(ZT_KNOB_HOROVOD_FUSION_THRESHOLD, 1);
    if (th <= 0) th = s_knob_scaled(ZT_KNOB_BUCKET_CAP_MB, 1024.0 * 1024.0);
    if (th <= 0) th = (int64_t) 1 << 20; /* measured best: see the README's fusion figures */
    self->threshold = th;
    int64_t cy = o->cycle_time_ms;
    if (cy < 0) cy = s_knob_scaled(ZT_KNOB_CYCLE_TIME_MS, 1);
    if (cy < 0) cy = s_knob_scaled(ZT_KNOB_HOROVOD_CYCLE_TIME, 1);
    if (cy < 0) cy = 5;
    self->cycle_ms = (int) cy;
    if (self->R > 0) {
        self->reducer_addrs = calloc((size_t) self->R, sizeof(char *));
        self->red = calloc((size_t) self->R, sizeof(zsock_t *));
        self->window = calloc((size_t) self->R, sizeof(int64_t));
        self->red_local = calloc((size_t) self->R, sizeof(bool));
        int64_t net = zt_knob_int(ZT_KNOB_AR_WINDOW_BYTES), local = zt_knob_int(ZT_KNOB_AR_LOCAL_WINDOW_BYTES);
        for (int r = 0; r < self->R; r++) {
            bool here = zt_data_is_local(o->reducers[r]);
            self->window[r] = here ? local : net;
            self->red_local[r] = here;
            if (self->window[r] < 0)
                self->window[r] = 0;
            self->reducer_addrs[r] = strdup(o->reducers[r]);
            self->red[r] = zt_sock_dealer(ZT_PLANE_DATA, o->reducers[r]);
            if (!self->red[r]) {
                zt_allreduce_destroy(&self);
                return NULL;
            }
        }
    }
    else if (self->workers > 1) {
        self->peer_addrs = calloc((size_t) self->workers, sizeof(char *));
        for (int w = 0; w < self->workers; w++)
            self->peer_addrs[w] = strstr(o->peers[w], "://") ? strdup(o->peers[w])
                                                            : zt_strdupf("tcp://%s", o->peers[w]);
        self->ring_in = zt_sock_router(ZT_PLANE_DATA, self->peer_addrs[self->rank], NULL);
        self->ring_out = zt_sock_dealer(ZT_PLANE_DATA, self->peer_addrs[(self->rank + 1) % self->workers]);
        if (!self->ring_in || !self->ring_out) {
            zt_error("ring: cannot bind %s or connect to %s", self->peer_addrs[self->rank],
                     self->peer_addrs[(self->rank + 1) % self->workers]);
            zt_allreduce_destroy(&self);
            return NULL;
        }
        zsock_set_linger(self->ring_out, 5000); /* deliver what others wait for */
        self->pending = calloc(MAX_PENDING, sizeof *self->pending);
    }
    self->tensors_json = json_array();
    return self;
}

void zt_allreduce_destroy(zt_allreduce_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zt_allreduce_t *self = *self_p;
    for (int r = 0; r < self->R; r++) {
        zt_sock_destroy(&self->red[r]);
        free(self->reducer_addrs[r]);
    }
    zt_sock_destroy(&self->ring_in);
    zt_sock_destroy(&self->ring_out);
    for (int w = 0; self->peer_addrs && w < self->workers; w++)
        free(self->peer_addrs[w]);
    for (int i = 0; i < self->npending; i++)
        zmq_msg_close(&self->pending[i].payload);
    for (int b = 0; self->b && b < self->layout.nbuckets; b++) {
        s_bucket_t *k = &self->b[b];
        for (int w = 0; w < 2000 && atomic_load(&k->lent) > 0; w++)
            zclock_sleep(1);
        if (!k->in_shm) {
            free(k->buf);
            free(k->last);
        }
        for (int r = 0; r < self->R; r++)
            free(k->piece_done[r]);
        free(k->piece_done);
        free(k->npieces);
        free(k->lo);
        free(k->hi);
        free(k->wnext);
        free(k->wend);
        free(k->wfly);
    }
    free(self->b);
    zt_ar_layout_free(&self->layout);
    free(self->pending);
    free(self->red);
    free(self->window);
    free(self->red_local);
    zt_shm_destroy(&self->shm);
    free(self->reducer_addrs);
    free(self->peer_addrs);
    free(self->t);
    json_decref(self->tensors_json);
    free(self->layout_text);
    free(self);
    *self_p = NULL;
}

const char *zt_allreduce_error(zt_allreduce_t *self) { return self->err; }
int zt_allreduce_buckets(zt_allreduce_t *self) { return self->layout.nbuckets; }
int64_t zt_allreduce_threshold(zt_allreduce_t *self) { return self->threshold; }

int zt_allreduce_register(zt_allreduce_t *self, const char *name, const int64_t *shape, int ndims,
                          zt_dtype_t dtype)
{
    if (self->committed || ndims < 0 || ndims > 8 || (int) dtype < 0 || dtype > ZT_BF16)
        return ZT_EINVAL;
    if (self->nt == self->tcap) {
        self->tcap = self->tcap ? self->tcap * 2 : 16;
        self->t = realloc(self->t, (size_t) self->tcap * sizeof *self->t);
    }
    s_tensor_t *t = &self->t[self->nt];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndims = ndims;
    t->dtype = dtype;
    json_t *sh = json_array();
    for (int i = 0; i < ndims; i++) {
        if (shape[i] < 0)
            return ZT_EINVAL;
        t->shape[i] = shape[i];
        json_array_append_new(sh, json_integer(shape[i]));
    }
    json_array_append_new(self->tensors_json, json_pack("{s:s, s:o, s:i}", "name", t->name, "shape",
                                                        sh, "dtype", (int) dtype));
    return self->nt++;
}

/* ------------------------------------------------------------ sending */

/* Tensors this large are sent straight from the caller's buffer instead of
 * being packed into the bucket (packing only pays for small ones). */
#define DIRECT_BYTES (64 << 10)
static bool s_direct(const s_bucket_t *k, int64_t numel)
{
    return !k->in_shm && (int64_t) k->es * numel >= DIRECT_BYTES;
}

static void s_release(void *data, void *hint)
{
    (void) data;
    atomic_fetch_sub(&((s_bucket_t *) hint)->lent, 1);
}

static int s_send(zt_allreduce_t *self, zsock_t *sock, zt_msg_t *m, void *payload, size_t bytes,
                  s_bucket_t *lend)
{
    m->seq = self->seq++;
    m->pool = 1;
    m->index = self->rank;
    zframe_t *h = zt_msg_encode(m);
    if (!h || zframe_send(&h, sock, payload || lend ? ZFRAME_MORE : 0) < 0) {
        zframe_destroy(&h);
        return ZT_EIO;
    }
    if (!payload && !lend)
        return ZT_OK;
    zmq_msg_t pm;
    if (lend && bytes > 0) {
        atomic_fetch_add(&lend->lent, 1);
        zmq_msg_init_data(&pm, payload, bytes, s_release, lend);
    }
    else {
        zmq_msg_init_size(&pm, bytes);
        if (bytes)
            memcpy(zmq_msg_data(&pm), payload, bytes);
    }
    if (zmq_msg_send(&pm, zsock_resolve(sock), 0) < 0) {
        zmq_msg_close(&pm);
        return ZT_EIO;
    }
    return ZT_OK;
}

/* A piece to reducer r: by reference when both are on this host and the
 * bytes are in the shared region, else as a frame. */
static void s_send_piece(zt_allreduce_t *self, int r, zt_msg_t *m, char *src, size_t bytes, s_bucket_t *lend)
{
    int64_t off = self->red_local[r] && bytes ? zt_shm_offset(self->shm, src, bytes) : -1;
    if (off >= 0) {
        zt_msg_set_str(m->u.AR_PIECE.shm, self->shm->name);
        m->u.AR_PIECE.shm_off = off;
        s_send(self, self->red[r], m, NULL, 0, NULL);
    }
    else
        s_send(self, self->red[r], m, src, bytes, lend);
}

static void s_wait_lent(s_bucket_t *k)
{
    while (atomic_load(&k->lent) > 0)
        zclock_sleep(0);
}

static int s_hello(zt_allreduce_t *self, int r)
{
    zt_msg_t m = { .type = ZT_MSG_AR_HELLO };
    m.u.AR_HELLO.req = ++self->req;
    m.u.AR_HELLO.workers = self->workers;
    m.u.AR_HELLO.shm_ok = self->shm && self->red_local[r];
    return s_send(self, self->red[r], &m, self->layout_text, strlen(self->layout_text), NULL);
}

/* The send window. A reducer sends a block's sum only once every worker's
 * piece of it has arrived, so over real links (TCP flows sharing each host's
 * link unfairly) pieces that run ahead of the slowest worker's only wait
 * there, while the sums trickle out late and the op ends in a long tail.
 * A bucket holding one large tensor is sent in order, from its start, by
 * every worker; it is the only kind windowed (so no two workers can each be
 * waiting for pieces the other holds back): at most window bytes per reducer
 * are out whose sums have not come back; each sum that comes back lets the
 * next piece go. */
static void s_pump(zt_allreduce_t *self, int bi, int r)
{
    s_bucket_t *k = &self->b[bi];
    int t = self->layout.buckets[bi].first;
    int64_t per = PIECE_BYTES / (int64_t) k->es, ta = self->layout.offset[t];
    while (k->wnext[r] < k->wend[r] && (k->wfly[r] < self->window[r] || !self->window[r])) {
        int64_t at = k->wnext[r], c = k->wend[r] - at < per ? k->wend[r] - at : per;
        zt_msg_t m = { .type = ZT_MSG_AR_PIECE };
        m.u.AR_PIECE = (zt_msg_AR_PIECE_t) { .bucket = bi, .gen = k->gen, .offset = at, .count = c,
                                             .dtype = self->layout.buckets[bi].dtype, .step = 0 };
        char *src = k->in_shm ? k->buf + at * (int64_t) k->es
                              : (char *) self->t[t].data + (at - ta) * (int64_t) k->es;
        s_send_piece(self, r, &m, src, (size_t) c * k->es, k);
        k->wfly[r] += c * (int64_t) k->es;
        k->wnext[r] = at + c;
    }
}

/* Sends elements [a, b) of bucket bi to the reducers owning them, in pieces. */
static void s_send_range(zt_allreduce_t *self, int bi, int64_t a, int64_t b, int only_reducer)
{
    s_bucket_t *k = &self->b[bi];
    int64_t per = PIECE_BYTES / (int64_t) k->es;
    for (int r = 0; r < self->R; r++) {
        if (only_reducer >= 0 && r != only_reducer)
            continue;
        int64_t lo = a > k->lo[r] ? a : k->lo[r], hi = b < k->hi[r] ? b : k->hi[r];
        if (lo >= hi)
            continue;
        if (k->windowed && only_reducer < 0) {
            k->wnext[r] = lo;
            k->wend[r] = hi;
            s_pump(self, bi, r);
            continue;
        }
        for (int64_t at = lo; at < hi;) {
            int64_t c = hi - at < per ? hi - at : per;
            char *src = k->buf + at * (int64_t) k->es;
            /* inside a large tensor: send from its own buffer, never past its end */
            zt_ar_bucket_t *lb = &self->layout.buckets[bi];
            for (int t = lb->first; c > 0 && t <= lb->last; t++) {
                int64_t ta = self->layout.offset[t], tb = ta + self->layout.numel[t];
                if (at >= ta && at < tb && s_direct(k, self->layout.numel[t])) {
                    src = (char *) self->t[t].data + (at - ta) * (int64_t) k->es;
                    if (at + c > tb)
                        c = tb - at;
                    break;
                }
                if (at < ta && at + c > ta && s_direct(k, self->layout.numel[t]))
                    c = ta - at; /* stop the packed run where a large tensor starts */
            }
            zt_msg_t m = { .type = ZT_MSG_AR_PIECE };
            m.u.AR_PIECE = (zt_msg_AR_PIECE_t) { .bucket = bi, .gen = k->gen, .offset = at, .count = c,
                                                 .dtype = lb->dtype, .step = 0 };
            s_send_piece(self, r, &m, src, (size_t) c * k->es, c > 0 ? k : NULL);
            if (c == 0)
                break;
            at += c;
        }
    }
}

/* Sends every submitted, unsent tensor of bucket bi, coalescing neighbours. */
static void s_flush(zt_allreduce_t *self, int bi)
{
    zt_ar_bucket_t *lb = &self->layout.buckets[bi];
    int64_t run_a = -1, run_b = -1;
    for (int t = lb->first; t <= lb->last; t++) {
        s_tensor_t *x = &self->t[t];
        bool go = x->submitted && !x->sent;
        int64_t a = self->layout.offset[t], b = a + self->layout.numel[t];
        if (go) {
            x->sent = true;
            if (run_a < 0)
                run_a = a;
            run_b = b;
        }
        else if (run_a >= 0) {
            s_send_range(self, bi, run_a, run_b, -1);
            run_a = -1;
        }
    }
    if (run_a >= 0)
        s_send_range(self, bi, run_a, run_b, -1);
    self->b[bi].oldest_ms = 0;
}

/* ------------------------------------------------------------ commit */

static int s_commit_reducers(zt_allreduce_t *self, int timeout_ms)
{
    bool *ok = calloc((size_t) self->R, sizeof(bool));
    int nok = 0, rc = ZT_OK;
    for (int r = 0; r < self->R; r++)
        s_hello(self, r);
    int64_t deadline = zt_now_ms() + timeout_ms, resend = zt_now_ms() + RESEND_MS;
    zmq_pollitem_t items[64];
    for (int r = 0; r < self->R && r < 64; r++)
        items[r] = (zmq_pollitem_t) { zsock_resolve(self->red[r]), 0, ZMQ_POLLIN, 0 };
    while (nok < self->R) {
        if (zt_now_ms() >= deadline) {
            snprintf(self->err, sizeof self->err, "the reducers did not confirm the tensor list within "
                     "%d ms (%d of %d answered): not every worker registered?", timeout_ms, nok, self->R);
            rc = ZT_ETIMEDOUT;
            break;
        }
        if (zt_now_ms() >= resend) {
            for (int r = 0; r < self->R; r++)
                if (!ok[r])
                    s_hello(self, r);
            resend = zt_now_ms() + RESEND_MS;
        }
        if (zmq_poll(items, self->R < 64 ? self->R : 64, 50) <= 0)
            continue;
        for (int r = 0; r < self->R && r < 64; r++) {
            if (!(items[r].revents & ZMQ_POLLIN))
                continue;
            zmsg_t *zm = zmsg_recv(self->red[r]);
            zframe_t *h = zm ? zmsg_first(zm) : NULL;
            zt_msg_t m;
            if (h && zt_msg_decode(zframe_data(h), zframe_size(h), &m, NULL) == ZT_OK) {
                if (m.type == ZT_MSG_AR_READY && !ok[r]) {
                    ok[r] = true;
                    nok++;
                }
                else if (m.type == ZT_MSG_AR_ERROR) {
                    snprintf(self->err, sizeof self->err, "%s", m.u.AR_ERROR.text);
                    rc = ZT_ESPEC;
                }
            }
            zmsg_destroy(&zm);
        }
        if (rc != ZT_OK)
            break;
    }
    free(ok);
    return rc;
}

static int s_ring_recv_msg(zt_allreduce_t *self, zt_msg_t *m, zmq_msg_t *payload, int timeout_ms);

static int s_commit_ring(zt_allreduce_t *self, int timeout_ms)
{
    /* Each worker's list travels once around the ring; everyone compares it. */
    zt_msg_t m = { .type = ZT_MSG_AR_HELLO };
    m.u.AR_HELLO.req = self->rank; /* origin */
    m.u.AR_HELLO.workers = self->workers;
    s_send(self, self->ring_out, &m, self->layout_text, strlen(self->layout_text), NULL);
    int seen = 0, rc = ZT_OK;
    int64_t deadline = zt_now_ms() + timeout_ms;
    while (seen < self->workers - 1) {
        zt_msg_t in;
        zmq_msg_t payload;
        int left = (int) (deadline - zt_now_ms());
        if (left <= 0 || s_ring_recv_msg(self, &in, &payload, left) != ZT_OK) {
            snprintf(self->err, sizeof self->err, "ring: heard from %d of %d other workers within %d ms",
                     seen, self->workers - 1, timeout_ms);
            return ZT_ETIMEDOUT;
        }
        if (in.type != ZT_MSG_AR_HELLO) { /* data of a faster worker: keep it */
            if (self->npending < MAX_PENDING) {
                self->pending[self->npending].msg = in;
                self->pending[self->npending++].payload = payload;
            }
            else
                zmq_msg_close(&payload);
            continue;
        }
        int origin = (int) in.u.AR_HELLO.req;
        char *text = strndup(zmq_msg_data(&payload), zmq_msg_size(&payload));
        if (strcmp(text, self->layout_text) && rc == ZT_OK) {
            json_t *doc = json_loads(text, 0, NULL);
            zt_ar_describe_mismatch(self->tensors_json, self->rank, json_object_get(doc, "tensors"),
                                    origin, self->err, sizeof self->err);
            json_decref(doc);
            rc = ZT_ESPEC;
        }
        if ((origin + self->workers - 1) % self->workers != self->rank) /* not back home next */
            s_send(self, self->ring_out, &in, zmq_msg_data(&payload), zmq_msg_size(&payload), NULL);
        free(text);
        zmq_msg_close(&payload);
        seen++;
    }
    return rc;
}

int zt_allreduce_commit(zt_allreduce_t *self, int timeout_ms)
{
    if (self->committed)
        return ZT_OK;
    int64_t piece = zt_ar_piece_bytes();
    json_t *doc = json_pack("{s:O, s:I, s:I}", "tensors", self->tensors_json, "threshold",
                            (json_int_t) self->threshold, "piece_bytes", (json_int_t) piece);
    self->layout_text = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(doc);
    if (zt_ar_layout_build(&self->layout, self->tensors_json, self->threshold, piece) != ZT_OK)
        return ZT_EINVAL;
    int R = self->R;
    self->b = calloc((size_t) self->layout.nbuckets + 1, sizeof *self->b);
    /* With a reducer on this host, the buckets' buffers go to shared memory:
     * that reducer reads the pieces in place (see s_send_piece). */
    bool any_local = false;
    for (int r = 0; r < R; r++)
        any_local = any_local || self->red_local[r];
    size_t total = 0;
    for (int bi = 0; bi < self->layout.nbuckets; bi++) {
        size_t bytes = (size_t) self->layout.buckets[bi].numel * zt_dtype_size(self->layout.buckets[bi].dtype);
        total += 2 * ((bytes + 16 + 63) & ~(size_t) 63);
    }
    if (any_local)
        self->shm = zt_shm_create("ar", total);
    size_t at_shm = 0;
    for (int bi = 0; bi < self->layout.nbuckets; bi++) {
        s_bucket_t *k = &self->b[bi];
        zt_ar_bucket_t *lb = &self->layout.buckets[bi];
        k->es = zt_dtype_size(lb->dtype);
        size_t bytes = (size_t) lb->numel * k->es + 16;
        if (self->shm) {
            k->in_shm = true;
            k->buf = self->shm->base + at_shm;
            at_shm += (bytes + 63) & ~(size_t) 63;
            k->last = self->shm->base + at_shm;
            at_shm += (bytes + 63) & ~(size_t) 63;
        }
        else {
            k->buf = malloc(bytes);
            k->last = malloc(bytes);
        }
        k->last_gen = -1;
        k->lo = calloc((size_t) R + 1, sizeof(int64_t));
        k->hi = calloc((size_t) R + 1, sizeof(int64_t));
        k->piece_done = calloc((size_t) R + 1, sizeof(bool *));
        k->npieces = calloc((size_t) R + 1, sizeof(int));
        k->wnext = calloc((size_t) R + 1, sizeof(int64_t));
        k->wend = calloc((size_t) R + 1, sizeof(int64_t));
        k->wfly = calloc((size_t) R + 1, sizeof(int64_t));
        k->windowed = lb->first == lb->last && (int64_t) k->es * lb->numel >= DIRECT_BYTES;
        for (int r = 0; r < R; r++) {
            zt_ar_chunk(lb->numel, k->es, bi, R, r, &k->lo[r], &k->hi[r]);
            int64_t per = PIECE_BYTES / (int64_t) k->es, n = k->hi[r] - k->lo[r];
            k->npieces[r] = (int) ((n + per - 1) / per); /* an empty chunk is never sent */
            k->piece_done[r] = calloc((size_t) k->npieces[r] + 1, sizeof(bool));
        }
    }
    int rc = ZT_OK;
    if (R > 0)
        rc = s_commit_reducers(self, timeout_ms);
    else if (self->workers > 1)
        rc = s_commit_ring(self, timeout_ms);
    if (rc == ZT_OK)
        self->committed = true;
    return rc;
}

/* ------------------------------------------------------------ submit */

void *zt_allreduce_buffer(zt_allreduce_t *self, int tensor)
{
    if (!self->committed || tensor < 0 || tensor >= self->nt)
        return NULL;
    s_bucket_t *k = &self->b[self->layout.bucket[tensor]];
    if (!k->active)
        s_wait_lent(k); /* last round's frames may still be read from it */
    return k->buf + self->layout.offset[tensor] * (int64_t) k->es;
}

int zt_allreduce_submit(zt_allreduce_t *self, int tensor, void *data)
{
    if (!self->committed || tensor < 0 || tensor >= self->nt || self->t[tensor].submitted)
        return ZT_EINVAL;
    s_tensor_t *x = &self->t[tensor];
    int bi = self->layout.bucket[tensor];
    s_bucket_t *k = &self->b[bi];
    if (!k->active) {
        s_wait_lent(k); /* last round's frames */
        k->active = true;
        k->nsubmitted = 0;
        for (int r = 0; r < self->R; r++) {
            memset(k->piece_done[r], 0, (size_t) k->npieces[r]);
            k->wnext[r] = k->wend[r] = k->wfly[r] = 0;
        }
    }
    x->data = data;
    x->submitted = true;
    x->sent = false;
    int64_t n = self->layout.numel[tensor];
    char *packed = k->buf + self->layout.offset[tensor] * (int64_t) k->es;
    if (n > 0 && (self->R == 0 || !s_direct(k, n)) && data != packed) /* small tensors are packed (fused) */
        memcpy(packed, data, (size_t) n * k->es);
    k->nsubmitted++;
    if (!k->oldest_ms)
        k->oldest_ms = zt_now_ms();
    if (self->R > 0) {
        zt_ar_bucket_t *lb = &self->layout.buckets[bi];
        int64_t now = zt_now_ms();
        if (k->nsubmitted == lb->last - lb->first + 1)
            s_flush(self, bi);
        for (int b2 = 0; b2 < self->layout.nbuckets; b2++) /* the cycle time */
            if (self->b[b2].active && self->b[b2].oldest_ms && now - self->b[b2].oldest_ms >= self->cycle_ms)
                s_flush(self, b2);
    }
    return ZT_OK;
}

/* ------------------------------------------------------------ reducers: wait */

static bool s_bucket_done(zt_allreduce_t *self, s_bucket_t *k)
{
    for (int r = 0; r < self->R; r++)
        for (int p = 0; p < k->npieces[r]; p++)
            if (!k->piece_done[r][p])
                return false;
    return true;
}

static void s_resend(zt_allreduce_t *self, int r)
{
    for (int bi = 0; bi < self->layout.nbuckets; bi++) {
        s_bucket_t *k = &self->b[bi];
        if (!k->active || s_bucket_done(self, k))
            continue;
        bool chunk_done = true;
        for (int p = 0; p < k->npieces[r]; p++)
            chunk_done = chunk_done && k->piece_done[r][p];
        if (chunk_done)
            continue;
        /* A block whose sum came back holds the sum now, not our piece (the
         * sums land where the pieces were): send the sum, which a restarted
         * reducer takes as it is; the pieces of the others again. */
        zt_ar_bucket_t *lb = &self->layout.buckets[bi];
        int64_t per = PIECE_BYTES / (int64_t) k->es;
        bool *sum_out = calloc((size_t) k->npieces[r] + 1, sizeof(bool));
        for (int t = lb->first; t <= lb->last; t++) {
            if (!self->t[t].sent)
                continue;
            int64_t a = self->layout.offset[t], b = a + self->layout.numel[t];
            if (a < k->lo[r])
                a = k->lo[r];
            if (b > k->hi[r])
                b = k->hi[r];
            if (a >= b) {
                s_send_range(self, bi, self->layout.offset[t], self->layout.offset[t] + self->layout.numel[t], r);
                continue;
            }
            for (int64_t at = a; at < b;) {
                int p = (int) ((at - k->lo[r]) / per);
                int64_t e = k->lo[r] + (int64_t) (p + 1) * per;
                e = e < b ? e : b;
                if (p < k->npieces[r] && k->piece_done[r][p]) {
                    if (!sum_out[p]) {
                        int64_t ba = k->lo[r] + (int64_t) p * per, be = ba + per < k->hi[r] ? ba + per : k->hi[r];
                        zt_msg_t m = { .type = ZT_MSG_AR_RESULT };
                        m.u.AR_RESULT = (zt_msg_AR_RESULT_t) { .bucket = bi, .gen = k->gen, .offset = ba,
                                                               .count = be - ba, .dtype = lb->dtype };
                        s_send(self, self->red[r], &m, k->buf + ba * (int64_t) k->es, (size_t) (be - ba) * k->es,
                               NULL);
                        sum_out[p] = true;
                    }
                }
                else
                    s_send_range(self, bi, at, e, r);
                at = e;
            }
        }
        free(sum_out);
    }
}

static int s_wait_reducers(zt_allreduce_t *self, int timeout_ms)
{
    for (int bi = 0; bi < self->layout.nbuckets; bi++)
        if (self->b[bi].active)
            s_flush(self, bi);
    int64_t deadline = zt_now_ms() + timeout_ms, progress = zt_now_ms();
    zmq_pollitem_t items[64];
    int n = self->R < 64 ? self->R : 64;
    for (int r = 0; r < n; r++)
        items[r] = (zmq_pollitem_t) { zsock_resolve(self->red[r]), 0, ZMQ_POLLIN, 0 };
    for (;;) {
        bool all = true;
        for (int bi = 0; bi < self->layout.nbuckets && all; bi++)
            if (self->b[bi].active && !s_bucket_done(self, &self->b[bi]))
                all = false;
        if (all)
            return ZT_OK;
        int64_t now = zt_now_ms();
        if (now >= deadline) {
            for (int bi = 0; bi < self->layout.nbuckets; bi++) {
                s_bucket_t *k = &self->b[bi];
                for (int r = 0; k->active && r < self->R; r++)
                    for (int p = 0; p < k->npieces[r]; p++)
                        if (!k->piece_done[r][p]) {
                            snprintf(self->err, sizeof self->err, "bucket %d (tensors %s..%s): reducer %d "
                                     "(%s) sent no sum within %d ms; see its log for the workers it "
                                     "waits for", bi, self->t[self->layout.buckets[bi].first].name,
                                     self->t[self->layout.buckets[bi].last].name, r,
                                     self->reducer_addrs[r], timeout_ms);
                            return ZT_ETIMEDOUT;
                        }
            }
        }
        if (now - progress >= RESEND_MS) {
            for (int r = 0; r < self->R; r++)
                s_resend(self, r);
            progress = now;
        }
        if (zt_spin_poll(&self->spin, items, n, 50) <= 0)
            continue;
        for (int r = 0; r < n; r++) {
            if (!(items[r].revents & ZMQ_POLLIN))
                continue;
            for (int budget = 0; budget < 1024; budget++) {
                zmq_msg_t hm, pm;
                zmq_msg_init(&hm);
                if (zmq_msg_recv(&hm, items[r].socket, ZMQ_DONTWAIT) < 0) {
                    zmq_msg_close(&hm);
                    break;
                }
                bool has_payload = zmq_msg_more(&hm);
                zmq_msg_init(&pm);
                if (has_payload)
                    zmq_msg_recv(&pm, items[r].socket, 0);
                while (zmq_msg_more(&pm)) { /* never more than one payload: drain */
                    zmq_msg_t extra;
                    zmq_msg_init(&extra);
                    zmq_msg_recv(&extra, items[r].socket, 0);
                    bool more = zmq_msg_more(&extra);
                    zmq_msg_close(&extra);
                    if (!more)
                        break;
                }
                zt_msg_t m;
                if (zt_msg_decode(zmq_msg_data(&hm), zmq_msg_size(&hm), &m, NULL) == ZT_OK) {
                    if (m.type == ZT_MSG_AR_RESULT && m.u.AR_RESULT.bucket >= 0 &&
                        m.u.AR_RESULT.bucket < self->layout.nbuckets) {
                        s_bucket_t *k = &self->b[m.u.AR_RESULT.bucket];
                        int64_t off = m.u.AR_RESULT.offset, c = m.u.AR_RESULT.count;
                        int64_t per = PIECE_BYTES / (int64_t) k->es;
                        int p = (int) ((off - k->lo[r]) / per);
                        bool wanted = k->active && m.u.AR_RESULT.gen == k->gen && off >= k->lo[r] && c >= 0 &&
                                      off + c <= k->hi[r] && p >= 0 && p < k->npieces[r] && !k->piece_done[r][p];
                        char why[300];
                        const char *src = wanted ? zt_shm_payload(m.u.AR_RESULT.shm, m.u.AR_RESULT.shm_off,
                                                                  c * (int64_t) k->es, zmq_msg_data(&pm),
                                                                  zmq_msg_size(&pm), why, sizeof why)
                                                 : NULL;
                        if (wanted && !src)
                            zt_warn("reducer %d: %s", r, why);
                        if (src) {
                            if (!k->windowed) /* its pieces went from the tensor, not buf */
                                s_wait_lent(k);
                            if (c)
                                memcpy(k->buf + off * (int64_t) k->es, src, (size_t) c * k->es);
                            k->piece_done[r][p] = true;
                            progress = zt_now_ms();
                            if (k->windowed) {
                                k->wfly[r] -= c * (int64_t) k->es;
                                s_pump(self, m.u.AR_RESULT.bucket, r);
                            }
                        }
                    }
                    else if (m.type == ZT_MSG_AR_RESEND && m.u.AR_RESEND.bucket >= 0 &&
                             m.u.AR_RESEND.bucket < self->layout.nbuckets &&
                             self->b[m.u.AR_RESEND.bucket].last_gen == m.u.AR_RESEND.gen) {
                        /* A restarted reducer rebuilds a sum some workers missed. */
                        s_bucket_t *k = &self->b[m.u.AR_RESEND.bucket];
                        int64_t per = PIECE_BYTES / (int64_t) k->es;
                        for (int64_t at = k->lo[r]; at < k->hi[r] || at == k->lo[r]; at += per) {
                            int64_t c = k->hi[r] - at < per ? k->hi[r] - at : per;
                            int64_t bi = m.u.AR_RESEND.bucket;
                            zt_msg_t a = { .type = ZT_MSG_AR_RESULT };
                            a.u.AR_RESULT = (zt_msg_AR_RESULT_t) { .bucket = bi, .gen = k->last_gen, .offset = at,
                                                                   .count = c, .dtype = self->layout.buckets[bi].dtype };
                            s_send(self, self->red[r], &a, k->last + at * (int64_t) k->es,
                                   (size_t) c * k->es, NULL);
                            if (c == 0 || at + c >= k->hi[r])
                                break;
                        }
                    }
                    else if (m.type == ZT_MSG_AR_ERROR && m.u.AR_ERROR.code == ZT_PS_NOT_CONFIGURED) {
                        zt_info("reducer %d (%s) lost its state: sending the layout and the pieces again",
                                r, self->reducer_addrs[r]);
                        s_hello(self, r);
                        s_resend(self, r);
                        progress = zt_now_ms();
                    }
                    else if (m.type == ZT_MSG_AR_ERROR) {
                        snprintf(self->err, sizeof self->err, "reducer %d (%s): %s", r,
                                 self->reducer_addrs[r], m.u.AR_ERROR.text);
                        zmq_msg_close(&hm);
                        zmq_msg_close(&pm);
                        return m.u.AR_ERROR.code == ZT_PS_CONFIG_MISMATCH ? ZT_ESPEC : ZT_EIO;
                    }
                }
                zmq_msg_close(&hm);
                zmq_msg_close(&pm);
            }
        }
    }
}

/* ------------------------------------------------------------ ring */

static int s_ring_recv_msg(zt_allreduce_t *self, zt_msg_t *m, zmq_msg_t *payload, int timeout_ms)
{
    zsock_set_rcvtimeo(self->ring_in, timeout_ms);
    for (;;) {
        zmq_msg_t id, hm;
        zmq_msg_init(&id);
        if (zmq_msg_recv(&id, zsock_resolve(self->ring_in), 0) < 0) {
            zmq_msg_close(&id);
            return ZT_ETIMEDOUT;
        }
        zmq_msg_close(&id);
        zmq_msg_init(&hm);
        zmq_msg_recv(&hm, zsock_resolve(self->ring_in), 0);
        zmq_msg_init(payload);
        if (zmq_msg_more(&hm))
            zmq_msg_recv(payload, zsock_resolve(self->ring_in), 0);
        int rc = zt_msg_decode(zmq_msg_data(&hm), zmq_msg_size(&hm), m, NULL);
        zmq_msg_close(&hm);
        if (rc == ZT_OK)
            return ZT_OK;
        zmq_msg_close(payload);
    }
}

/* Receives chunk [lo, hi) of bucket bi for (gen, step); adds or copies it. */
static int s_ring_take(zt_allreduce_t *self, int bi, int step, int64_t lo, int64_t hi, bool add,
                       int timeout_ms)
{
    s_bucket_t *k = &self->b[bi];
    int64_t need = hi - lo, got = 0;
    int64_t deadline = zt_now_ms() + timeout_ms;
    bool first = true;
    while (got < need || (need == 0 && first)) {
        zt_msg_t m;
        zmq_msg_t pm;
        int found = -1;
        for (int i = 0; i < self->npending; i++) {
            zt_msg_AR_PIECE_t *p = &self->pending[i].msg.u.AR_PIECE;
            if (self->pending[i].msg.type == ZT_MSG_AR_PIECE && p->bucket == bi && p->gen == k->gen &&
                p->step == step) {
                found = i;
                break;
            }
        }
        if (found >= 0) {
            m = self->pending[found].msg;
            pm = self->pending[found].payload;
            self->pending[found] = self->pending[--self->npending];
        }
        else {
            int left = (int) (deadline - zt_now_ms());
            if (left <= 0 || s_ring_recv_msg(self, &m, &pm, left) != ZT_OK) {
                snprintf(self->err, sizeof self->err, "ring: worker %d sent nothing for bucket %d step %d "
                         "within %d ms", (self->rank + self->workers - 1) % self->workers, bi, step, timeout_ms);
                return ZT_ETIMEDOUT;
            }
            zt_msg_AR_PIECE_t *p = &m.u.AR_PIECE;
            if (m.type != ZT_MSG_AR_PIECE || p->bucket != bi || p->gen != k->gen || p->step != step) {
                if (self->npending < MAX_PENDING) {
                    self->pending[self->npending].msg = m;
                    self->pending[self->npending++].payload = pm;
                }
                else
                    zmq_msg_close(&pm);
                continue;
            }
        }
        zt_msg_AR_PIECE_t *p = &m.u.AR_PIECE;
        first = false;
        if (p->offset < lo || p->offset + p->count > hi || zmq_msg_size(&pm) != (size_t) p->count * k->es) {
            zmq_msg_close(&pm);
            snprintf(self->err, sizeof self->err, "ring: malformed piece for bucket %d", bi);
            return ZT_EPROTO;
        }
        s_wait_lent(k);
        char *dst = k->buf + p->offset * (int64_t) k->es;
        if (add)
            zt_ar_add(dst, zmq_msg_data(&pm), p->count, self->layout.buckets[bi].dtype);
        else if (p->count)
            memcpy(dst, zmq_msg_data(&pm), (size_t) p->count * k->es);
        got += p->count;
        zmq_msg_close(&pm);
    }
    return ZT_OK;
}

static void s_ring_give(zt_allreduce_t *self, int bi, int step, int64_t lo, int64_t hi)
{
    s_bucket_t *k = &self->b[bi];
    /* ring pieces are data-plane frames: no reducer streams them back */
    int64_t per = zt_frame_bytes() / (int64_t) k->es;
    for (int64_t at = lo; at < hi || at == lo; at += per) {
        int64_t c = hi - at < per ? hi - at : per;
        zt_msg_t m = { .type = ZT_MSG_AR_PIECE };
        m.u.AR_PIECE = (zt_msg_AR_PIECE_t) { .bucket = bi, .gen = k->gen, .offset = at, .count = c,
                                             .dtype = self->layout.buckets[bi].dtype, .step = step };
        s_send(self, self->ring_out, &m, k->buf + at * (int64_t) k->es, (size_t) c * k->es, c ? k : NULL);
        if (c == 0 || at + c >= hi)
            break;
    }
}

static int s_wait_ring(zt_allreduce_t *self, int timeout_ms)
{
    int N = self->workers, me = self->rank;
    for (int bi = 0; bi < self->layout.nbuckets; bi++) {
        if (!self->b[bi].active)
            continue;
        int64_t numel = self->layout.buckets[bi].numel, lo, hi;
        for (int s = 0; s < N - 1; s++) { /* reduce-scatter */
            zt_shard_range(numel, N, (me - s + N) % N, &lo, &hi);
            s_ring_give(self, bi, s, lo, hi);
            zt_shard_range(numel, N, (me - s - 1 + 2 * N) % N, &lo, &hi);
            int rc = s_ring_take(self, bi, s, lo, hi, true, timeout_ms);
            if (rc != ZT_OK)
                return rc;
        }
        for (int s = 0; s < N - 1; s++) { /* all-gather */
            zt_shard_range(numel, N, (me + 1 - s + 2 * N) % N, &lo, &hi);
            s_ring_give(self, bi, N - 1 + s, lo, hi);
            zt_shard_range(numel, N, (me - s + 2 * N) % N, &lo, &hi);
            int rc = s_ring_take(self, bi, N - 1 + s, lo, hi, false, timeout_ms);
            if (rc != ZT_OK)
                return rc;
        }
    }
    return ZT_OK;
}

/* ------------------------------------------------------------ wait */

int zt_allreduce_wait(zt_allreduce_t *self, bool average, int timeout_ms)
{
    if (!self->committed)
        return ZT_EINVAL;
    int rc = ZT_OK;
    if (self->R > 0)
        rc = s_wait_reducers(self, timeout_ms);
    else if (self->workers > 1)
        rc = s_wait_ring(self, timeout_ms);
    if (rc != ZT_OK)
        return rc;
    /* Unpack the results into the callers' tensors. */
    for (int bi = 0; bi < self->layout.nbuckets; bi++) {
        s_bucket_t *k = &self->b[bi];
        if (!k->active)
            continue;
        s_wait_lent(k);
        zt_ar_bucket_t *lb = &self->layout.buckets[bi];
        for (int t = lb->first; t <= lb->last; t++) {
            s_tensor_t *x = &self->t[t];
            if (!x->submitted)
                continue;
            int64_t n = self->layout.numel[t];
            const char *src = k->buf + self->layout.offset[t] * (int64_t) k->es;
            if (!average || self->workers == 1) {
                if (x->data != src) /* not written in place (zt_allreduce_buffer) */
                    memcpy(x->data, src, (size_t) n * k->es);
            }
            else if (x->dtype == ZT_F32) {
                const float *s = (const float *) src;
                float *d = x->data, inv = 1.0f / (float) self->workers;
                for (int64_t i = 0; i < n; i++)
                    d[i] = s[i] * inv;
            }
            else
                for (int64_t i = 0; i < n; i++) {
                    uint16_t h;
                    memcpy(&h, src + 2 * i, 2);
                    float f = (x->dtype == ZT_F16 ? zt_f16_to_f32(h) : zt_bf16_to_f32(h)) / (float) self->workers;
                    h = x->dtype == ZT_F16 ? zt_f32_to_f16(f) : zt_f32_to_bf16(f);
                    memcpy((char *) x->data + 2 * i, &h, 2);
                }
            x->submitted = x->sent = false;
        }
        if (self->R > 0) { /* keep this result (a restarted reducer may ask): swap, no copy */
            char *tmp = k->last;
            k->last = k->buf;
            k->buf = tmp;
            k->last_gen = k->gen;
        }
        k->active = false;
        k->gen++;
    }
    return ZT_OK;
}
