/* The all-reduce client's API and fusion buckets: tensors registered,
 * laid out into buckets, submitted, and the results unpacked (averaged);
 * the transport is the reducers' (zt_ar_reducers.c) or the ring's
 * (zt_ar_ring.c). */
#include "base/zt_hist.h"
#include "ztrain/zt_error.h"
#include "allreduce/zt_ar_internal.h"

/* A fusion or cycle knob in its unit times scale; -1 when unset or 0. */
static int64_t s_knob_scaled(zt_knob_t knob, double scale)
{
    double d = zt_knob_is_set(knob) ? zt_knob_num(knob) : 0;
    return d > 0 ? (int64_t) (d * scale) : -1;
}

/* A way to each reducer (zt_bulk: sealed to another host's in a sealing
 * job, plain with security off, on this thread with ZT_BULK_DIRECT on;
 * this host's over the user's private ipc folder, plain). */
static int s_connect_reducers(zt_allreduce_t *self, const zt_allreduce_opts_t *o)
{
    self->reducer_addrs = calloc((size_t) self->R, sizeof(char *));
    self->red = calloc((size_t) self->R, sizeof(zt_bulk_t *));
    self->window = calloc((size_t) self->R, sizeof(int64_t));
    self->red_local = calloc((size_t) self->R, sizeof(bool));
    /* The network window is the worker's in all, an equal share per reducer
     * on another host (at least one piece): with 8 reducers, 512 KiB each
     * overflowed the links' queues (8 flows into each reducer's link) and
     * the drops stalled every round on a retransmission timeout. */
    int64_t net = zt_knob_int(ZT_KNOB_AR_WINDOW_BYTES), local = zt_knob_int(ZT_KNOB_AR_LOCAL_WINDOW_BYTES);
    int64_t piece = zt_knob_int(ZT_KNOB_AR_PIECE_BYTES);
    int remote = 0;
    for (int r = 0; r < self->R; r++)
        remote += !zt_data_is_local(o->reducers[r]);
    if (net > 0 && remote > 0)
        net = net / remote > piece ? net / remote : piece;
    int rc = ZT_OK;
    for (int r = 0; r < self->R && rc == ZT_OK; r++) {
        bool here = zt_data_is_local(o->reducers[r]);
        self->window[r] = here ? local : net;
        self->red_local[r] = here;
        if (self->window[r] < 0)
            self->window[r] = 0;
        self->reducer_addrs[r] = strdup(o->reducers[r]);
        rc = (self->red[r] = zt_bulk_connect(ZT_PLANE_DATA, o->reducers[r], true)) ? ZT_OK : ZT_EIO;
    }
    return rc;
}

/* The ring: a ROUTER from the previous worker, a DEALER to the next; in a
 * sealing job bulk sockets, sealed to another host's worker. */
static int s_connect_ring(zt_allreduce_t *self, const zt_allreduce_opts_t *o)
{
    self->peer_addrs = calloc((size_t) self->workers, sizeof(char *));
    for (int w = 0; w < self->workers; w++)
        self->peer_addrs[w] = strstr(o->peers[w], "://") ? strdup(o->peers[w]) : zt_strdupf("tcp://%s", o->peers[w]);
    const char *next = self->peer_addrs[(self->rank + 1) % self->workers];
    self->ring_in = zt_bulk_bind(ZT_PLANE_DATA, self->peer_addrs[self->rank], NULL);
    self->ring_out = zt_bulk_connect(ZT_PLANE_DATA, next, true);
    if (!self->ring_in || !self->ring_out) {
        zt_error("ring: cannot bind %s or connect to %s", self->peer_addrs[self->rank], next);
        return ZT_EIO;
    }
    self->pending = calloc(MAX_PENDING, sizeof *self->pending);
    return ZT_OK;
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
    self->layout_no = o->layout >= 0 && o->layout < ZT_AR_LAYOUTS ? o->layout : 0;
    self->group_base = o->group * ZT_AR_LAYOUTS;
    self->group = self->group_base + self->layout_no;
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
    bool tune = o->autotune == 1 || (o->autotune != -1 && zt_ar_tune_wanted());
    if (tune && (self->R > 0 || self->workers > 1))
        self->tune = zt_ar_tune_new(o->rank == 0, th, self->cycle_ms, self->layout_no, o->autotune == 2 ? th : 0);
    if ((self->R > 0 && s_connect_reducers(self, o) != ZT_OK) ||
        (self->R == 0 && self->workers > 1 && s_connect_ring(self, o) != ZT_OK)) {
        zt_allreduce_destroy(&self);
        return NULL;
    }
    self->tensors_json = json_array();
    return self;
}

/* The buckets, their shared memory and the layout, once ZeroMQ has let go
 * of their frames (or for at most 2 s each). A bucket whose frames ZeroMQ
 * still holds then keeps its buffers and the bucket array (the release
 * lowers a count in it) to the process's end. */
static void s_free_buckets(zt_allreduce_t *self)
{
    bool held = false;
    for (int b = 0; self->b && b < self->layout.nbuckets; b++) {
        zt_ar_state_t *k = &self->b[b];
        for (int w = 0; w < 2000 && atomic_load(&k->lent) > 0; w++)
            zclock_sleep(1);
        bool lent = atomic_load(&k->lent) > 0;
        held |= lent;
        if (!k->in_shm && !lent) {
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
    if (!held)
        free(self->b);
    self->b = NULL;
    zt_ar_layout_free(&self->layout);
    zt_shm_destroy(&self->shm);
    free(self->layout_text);
    self->layout_text = NULL;
}

void zt_allreduce_destroy(zt_allreduce_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zt_allreduce_t *self = *self_p;
    zt_ar_lanes_stop(self); /* before the sockets they may hold close */
    zt_ar_idle_stop(self);
    for (int r = 0; r < self->R; r++) {
        zt_bulk_destroy(&self->red[r], 0);
        free(self->reducer_addrs[r]);
    }
    zt_bulk_server_destroy(&self->ring_in);
    zt_bulk_destroy(&self->ring_out, 5000); /* deliver what others wait for */
    for (int w = 0; self->peer_addrs && w < self->workers; w++)
        free(self->peer_addrs[w]);
    for (int i = 0; i < self->npending; i++)
        zmq_msg_close(&self->pending[i].payload);
    s_free_buckets(self);
    zt_ar_tune_destroy(&self->tune);
    free(self->pending);
    free(self->red);
    free(self->window);
    free(self->red_local);
    free(self->reducer_addrs);
    free(self->peer_addrs);
    free(self->t);
    json_decref(self->tensors_json);
    free(self);
    *self_p = NULL;
}

const char *zt_allreduce_error(zt_allreduce_t *self) { return self->err; }
int zt_allreduce_buckets(zt_allreduce_t *self) { return self->layout.nbuckets; }
uint64_t zt_allreduce_stalls(zt_allreduce_t *self) { return __atomic_load_n(&self->stalls, __ATOMIC_RELAXED); }
int64_t zt_allreduce_threshold(zt_allreduce_t *self) { return self->threshold; }
int64_t zt_allreduce_generation(zt_allreduce_t *self) { return self->rounds; }

bool zt_allreduce_autotune_asked(void) { return zt_ar_tune_wanted(); }

bool zt_allreduce_in_round(zt_allreduce_t *self) { return self->committed && zt_ar_any_active(self); }

int zt_allreduce_layout(zt_allreduce_t *self, int64_t *threshold, int *cycle_ms, bool *searching)
{
    bool due = self->reform.layout > 0; /* formed as the next round starts */
    if (threshold)
        *threshold = due ? self->reform.threshold : self->threshold;
    if (cycle_ms)
        *cycle_ms = due ? self->reform.cycle_ms : self->cycle_ms;
    if (searching)
        *searching = self->tune != NULL && !(due && self->reform.final);
    return due ? self->reform.layout : self->layout_no;
}

static int s_set_generation(zt_allreduce_t *self, int64_t gen)
{
    if (!self->committed || gen < 0)
        return ZT_EINVAL;
    for (int bi = 0; bi < self->layout.nbuckets; bi++)
        if (self->b[bi].active)
            return ZT_EINVAL;
    zt_ar_lanes_forget(self);
    for (int bi = 0; bi < self->layout.nbuckets; bi++) {
        self->b[bi].gen = gen;
        self->b[bi].last_gen = -1; /* no earlier sum kept here */
    }
    self->rounds = gen;
    return ZT_OK;
}

void zt_allreduce_watch(zt_allreduce_t *self, void *socket, void (*fn)(void *arg), void *arg)
{
    self->watch = fn ? socket : NULL;
    self->watch_fn = fn;
    self->watch_arg = arg;
}

void zt_allreduce_abandon_when(zt_allreduce_t *self, bool (*fn)(void *arg), void *arg)
{
    self->abandon_fn = fn;
    self->abandon_arg = arg;
}

int zt_allreduce_register(zt_allreduce_t *self, const char *name, const int64_t *shape, int ndims,
                          zt_dtype_t dtype)
{
    if (self->committed || ndims < 0 || ndims > 8 || (int) dtype < 0 || dtype > ZT_BF16)
        return ZT_EINVAL;
    if (self->nt == self->tcap) {
        self->tcap = self->tcap ? self->tcap * 2 : 16;
        self->t = realloc(self->t, (size_t) self->tcap * sizeof *self->t);
    }
    zt_ar_tensor_t *t = &self->t[self->nt];
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

int zt_ar_send(zt_allreduce_t *self, zt_bulk_t *to, zt_msg_t *m, void *payload, size_t bytes,
               zt_ar_state_t *lend)
{
    m->seq = __atomic_fetch_add(&self->seq, 1, __ATOMIC_RELAXED); /* lanes send too */
    m->pool = 1;
    m->index = self->rank;
    m->incarnation = self->group;
    return zt_bulk_send(to, m, payload, bytes, lend ? &lend->lent : NULL);
}

/* The layout of the registered tensors at the threshold in force, its
 * buckets (their rounds counted on from the group's), and the reducers'
 * or the ring's agreement on it. */
/* Long on purpose: the buffers, then each bucket's chunks and pieces. */
static int s_form(zt_allreduce_t *self, int timeout_ms)
{
    zt_ar_lanes_forget(self); /* what they sent was of the layout before */
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
        zt_ar_state_t *k = &self->b[bi];
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
        k->gen = self->rounds;
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
        rc = zt_ar_commit_reducers(self, timeout_ms);
    else if (self->workers > 1)
        rc = zt_ar_commit_ring(self, timeout_ms);
    if (rc == ZT_OK)
        self->committed = true;
    return rc;
}

int zt_allreduce_commit(zt_allreduce_t *self, int timeout_ms)
{
    if (self->committed)
        return ZT_OK;
    if (self->tune) { /* the leader's word travels with each round while the search goes on */
        int64_t word = ZT_AR_TUNE_WORD;
        self->tune_id = zt_allreduce_register(self, "ztrain/autotune", &word, 1, ZT_F32);
    }
    int rc = s_form(self, timeout_ms);
    self->committed_once = rc == ZT_OK;
    if (rc == ZT_OK && self->R > 1 && zt_ar_lanes_start(self) != ZT_OK)
        zt_warn("all-reduce: no threads of its own to move the bytes (ZT_AR_THREADS): the caller's thread does");
    if (rc == ZT_OK && self->R > 0 && zt_ar_idle_start(self) != ZT_OK)
        zt_warn("all-reduce: no thread to serve the reducers between rounds: a reducer restarted in "
                "mid-broadcast may wait for this worker until its next round");
    else if (rc == ZT_ETIMEDOUT) /* a peer is gone: the system's failure, not the program's */
        zt_fail_retryable();
    return rc;
}

/* ------------------------------------------------------------ submit */

static int s_reform(zt_allreduce_t *self);

static void *s_buffer(zt_allreduce_t *self, int tensor)
{
    if (s_reform(self) != ZT_OK || !self->committed || tensor < 0 || tensor >= self->nt)
        return NULL;
    zt_ar_state_t *k = &self->b[self->layout.bucket[tensor]];
    if (!k->active)
        zt_ar_wait_lent(k); /* last round's frames may still be read from it */
    return k->buf + self->layout.offset[tensor] * (int64_t) k->es;
}

static int s_submit(zt_allreduce_t *self, int tensor, void *data)
{
    if (s_reform(self) != ZT_OK)
        return self->reform_rc;
    if (!self->committed || tensor < 0 || tensor >= self->nt || self->t[tensor].submitted)
        return ZT_EINVAL;
    if (self->tune && tensor != self->tune_id && !self->t[self->tune_id].submitted) { /* a round starts */
        zt_ar_tune_word(self->tune, self->tune_word);
        s_submit(self, self->tune_id, self->tune_word);
    }
    zt_ar_tensor_t *x = &self->t[tensor];
    int bi = self->layout.bucket[tensor];
    zt_ar_state_t *k = &self->b[bi];
    if (!k->active) {
        zt_ar_wait_lent(k); /* last round's frames */
        k->nsubmitted = 0;
        for (int r = 0; r < self->R; r++) {
            memset(k->piece_done[r], 0, (size_t) k->npieces[r]);
            k->wnext[r] = k->wend[r] = k->wfly[r] = 0;
        }
        __atomic_store_n(&k->active, true, __ATOMIC_RELEASE); /* the lanes read its window after */
    }
    x->data = data;
    x->submitted = true;
    x->landed = 0;
    x->scale = 1.0f;
    x->sent = false;
    int64_t n = self->layout.numel[tensor];
    char *packed = k->buf + self->layout.offset[tensor] * (int64_t) k->es;
    if (n > 0 && (self->R == 0 || !zt_ar_direct(k, n)) && data != packed) /* small tensors are packed (fused) */
        memcpy(packed, data, (size_t) n * k->es);
    k->nsubmitted++;
    if (!k->oldest_ms)
        k->oldest_ms = zt_now_ms();
    if (self->R > 0) {
        zt_ar_bucket_t *lb = &self->layout.buckets[bi];
        int64_t now = zt_now_ms();
        if (k->nsubmitted == lb->last - lb->first + 1)
            zt_ar_flush(self, bi);
        for (int b2 = 0; b2 < self->layout.nbuckets; b2++) /* the cycle time */
            if (self->b[b2].active && self->b[b2].oldest_ms && now - self->b[b2].oldest_ms >= self->cycle_ms)
                zt_ar_flush(self, b2);
    }
    return ZT_OK;
}

/* ------------------------------------------------------------ autotune */

/* The group's word after a round: a new setting is a new layout, which
 * every worker forms as the next round starts (s_reform): this round's
 * results stay where they are until then. */
static int s_tune_round(zt_allreduce_t *self, bool average)
{
    zt_ar_tune_round(self->tune, zt_now_us());
    zt_ar_tune_setting_t s = zt_ar_tune_read(self->tune_word, average ? (float) self->workers : 1.0f);
    if (s.layout == 0 || s.layout == self->layout_no)
        return ZT_OK;
    if (s.layout != self->layout_no + 1)
        zt_warn("all-reduce: autotune's word names layout %d after %d: ignored", s.layout, self->layout_no);
    else
        self->reform = s;
    return ZT_OK;
}

/* The layout autotune asked for after the last round, formed before the
 * next one starts (the last one without the word); ZT_OK when none is due. */
static int s_reform(zt_allreduce_t *self)
{
    zt_ar_tune_setting_t s = self->reform;
    if (s.layout == 0 || !self->tune)
        return self->reform_rc;
    self->reform.layout = 0;
    for (int bi = 0; bi < self->layout.nbuckets; bi++)
        zt_ar_wait_lent(&self->b[bi]);
    s_free_buckets(self);
    self->committed = false;
    self->threshold = s.threshold;
    self->cycle_ms = s.cycle_ms;
    self->layout_no = s.layout;
    self->group = self->group_base + s.layout;
    int kept = 0; /* the ring's messages of the earlier layouts are not waited for */
    for (int i = 0; i < self->npending; i++)
        if (self->pending[i].msg.incarnation >= self->group)
            self->pending[kept++] = self->pending[i];
        else
            zmq_msg_close(&self->pending[i].payload);
    self->npending = kept;
    if (s.final) { /* the search is over: the word leaves the layout */
        zt_ar_tune_destroy(&self->tune);
        self->nt--;
        json_array_remove(self->tensors_json, json_array_size(self->tensors_json) - 1);
    }
    else
        zt_ar_tune_formed(self->tune, &s);
    int rc = s_form(self, self->reform_timeout_ms);
    if (rc != ZT_OK) {
        if (!*self->err)
            snprintf(self->err, sizeof self->err, "autotune's layout %d: %s", s.layout, zt_strerror(rc));
        self->reform_rc = rc; /* the calls fail from here on */
    }
    return rc;
}

/* ------------------------------------------------------------ wait */

/* Tensor t's result out of bucket k's buffer into the caller's: the sum,
 * or the average (averages); with keep_copy, the sum into last as well. */
static void s_unpack(zt_allreduce_t *self, zt_ar_state_t *k, int t, bool averages, bool keep_copy)
{
    zt_ar_tensor_t *x = &self->t[t];
    int64_t n = self->layout.numel[t];
    const char *src = k->buf + self->layout.offset[t] * (int64_t) k->es;
    float *keep = keep_copy ? (float *) (k->last + self->layout.offset[t] * (int64_t) k->es) : NULL;
    if (keep && (x->dtype != ZT_F32 || x->landed == n))
        memcpy(keep, src, (size_t) n * k->es);
    if (x->landed == n)
        ; /* written on as it came (zt_ar_reducers.c) */
    else if (!averages) {
        if (x->data != src) /* not written in place (zt_allreduce_buffer) */
            memcpy(x->data, src, (size_t) n * k->es);
    }
    else if (x->dtype == ZT_F32) {
        const float *s = (const float *) src;
        float *d = x->data, inv = 1.0f / (float) self->workers;
        if (keep) /* one pass: the sum kept, the average out */
            for (int64_t i = 0; i < n; i++) {
                float v = s[i];
                keep[i] = v;
                d[i] = v * inv;
            }
        else
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

static int s_wait(zt_allreduce_t *self, bool average, int timeout_ms)
{
    if (self->reform_rc != ZT_OK || !self->committed) /* autotune's last layout did not form */
        return self->reform_rc != ZT_OK ? self->reform_rc : ZT_EINVAL;
    int rc = ZT_OK;
    int64_t t0 = zt_now_us();
    self->averaging = average;
    if (self->R > 0)
        rc = zt_ar_wait_reducers(self, timeout_ms);
    else if (self->workers > 1)
        rc = zt_ar_wait_ring(self, timeout_ms);
    if (rc == ZT_OK && (self->R > 0 || self->workers > 1))
        zt_hist_observe(ZT_HIST_ALLREDUCE, (double) (zt_now_us() - t0) / 1e6);
    if (rc == ZT_ETIMEDOUT)
        zt_fail_retryable();
    if (rc != ZT_OK)
        return rc;
    /* Unpack the results into the callers' tensors. */
    for (int bi = 0; bi < self->layout.nbuckets; bi++) {
        zt_ar_state_t *k = &self->b[bi];
        if (!k->active)
            continue;
        zt_ar_wait_lent(k);
        zt_ar_bucket_t *lb = &self->layout.buckets[bi];
        /* A restarted reducer may ask for this round's sum again, and buf is
         * kept for it (swapped into last); but a tensor averaged in place
         * (its buffer is buf) leaves the average there, so then every sum is
         * copied into last as it is read, and nothing is swapped. */
        bool averages = average && self->workers > 1, keep_copy = false;
        for (int t = lb->first; self->R > 0 && averages && t <= lb->last; t++)
            keep_copy |= self->t[t].submitted &&
                         self->t[t].data == k->buf + self->layout.offset[t] * (int64_t) k->es;
        for (int t = lb->first; t <= lb->last; t++)
            if (self->t[t].submitted)
                s_unpack(self, k, t, averages, keep_copy);
        if (self->R > 0) { /* keep this round's sum (a restarted reducer may ask) */
            if (!keep_copy) { /* buf still holds it: swap, no copy */
                char *tmp = k->last;
                k->last = k->buf;
                k->buf = tmp;
            }
            k->last_gen = k->gen;
        }
        k->active = false;
        k->gen++;
    }
    self->rounds++;
    self->reform_timeout_ms = timeout_ms;
    return self->tune ? s_tune_round(self, average) : ZT_OK;
}

/* ------------------------------------------------------------ the calls
 * Each takes the reducer sockets back from the thread that serves them
 * between rounds (zt_ar_idle.c). */

int zt_allreduce_set_generation(zt_allreduce_t *self, int64_t gen)
{
    zt_ar_idle_enter(self);
    int rc = s_set_generation(self, gen);
    zt_ar_idle_leave(self);
    return rc;
}

void *zt_allreduce_buffer(zt_allreduce_t *self, int tensor)
{
    zt_ar_idle_enter(self);
    void *p = s_buffer(self, tensor);
    zt_ar_idle_leave(self);
    return p;
}

int zt_allreduce_submit(zt_allreduce_t *self, int tensor, void *data)
{
    zt_ar_idle_enter(self);
    int rc = s_submit(self, tensor, data);
    zt_ar_idle_leave(self);
    return rc;
}

int zt_ar_submit_scaled(zt_allreduce_t *self, int tensor, void *data, float scale)
{
    zt_ar_idle_enter(self);
    int rc = s_submit(self, tensor, data);
    if (rc == ZT_OK)
        self->t[tensor].scale = scale;
    zt_ar_idle_leave(self);
    return rc;
}

int zt_allreduce_wait(zt_allreduce_t *self, bool average, int timeout_ms)
{
    zt_ar_idle_enter(self);
    int rc = s_wait(self, average, timeout_ms);
    zt_ar_idle_leave(self);
    return rc;
}
