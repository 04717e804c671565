/* The all-reduce client's reducer transport: each bucket is cut into a
 * chunk per reducer and pieces per chunk; pieces go out (by reference in
 * shared memory on the same host, zero-copy frames otherwise, under a send
 * window for one large tensor), sums come back into the bucket, and a
 * reducer that restarts or goes quiet is sent what it lacks again. */
#include "base/zt_env.h"
#include "allreduce/zt_ar_internal.h"
#include "base/zt_copy.h"

/* A piece to reducer r: by reference when both are on this host and the
 * bytes are in the shared region, else as a frame. */
static void s_send_piece(zt_allreduce_t *self, int r, zt_msg_t *m, char *src, size_t bytes, zt_ar_state_t *lend)
{
    int64_t off = self->red_local[r] && bytes ? zt_shm_offset(self->shm, src, bytes) : -1;
    if (off >= 0) {
        zt_msg_set_str(m->u.AR_PIECE.shm, self->shm->name);
        m->u.AR_PIECE.shm_off = off;
        zt_ar_send(self, self->red[r], m, NULL, 0, NULL);
    }
    else
        zt_ar_send(self, self->red[r], m, src, bytes, lend);
}

static int s_hello(zt_allreduce_t *self, int r)
{
    zt_msg_t m = { .type = ZT_MSG_AR_HELLO };
    m.u.AR_HELLO.req = __atomic_add_fetch(&self->req, 1, __ATOMIC_RELAXED);
    m.u.AR_HELLO.workers = self->workers;
    m.u.AR_HELLO.shm_ok = self->shm && self->red_local[r];
    return zt_ar_send(self, self->red[r], &m, self->layout_text, strlen(self->layout_text),
                      NULL);
}

/* The send window. A reducer sends a block's sum only once every worker's
 * piece of it has arrived, so over real links (TCP flows sharing each host's
 * link unfairly) pieces that run ahead of the slowest worker's only wait
 * there, while the sums trickle out late and the op ends in a long tail.
 * A bucket holding one large tensor is sent in order, from its start, by
 * every worker; only such buckets are windowed: at most window bytes per
 * reducer are out whose sums have not come back; each sum that comes back
 * lets the next piece go. Sends bucket bi's next pieces while its own window
 * and room allow; returns the bytes sent. */
static int64_t s_pump(zt_allreduce_t *self, int bi, int r, int64_t room)
{
    zt_ar_state_t *k = &self->b[bi];
    int t = self->layout.buckets[bi].first;
    int64_t per = PIECE_BYTES / (int64_t) k->es, ta = self->layout.offset[t], sent = 0;
    while (k->wnext[r] < k->wend[r] && (k->wfly[r] < self->window[r] || !self->window[r]) && sent < room) {
        int64_t at = k->wnext[r], c = k->wend[r] - at < per ? k->wend[r] - at : per;
        zt_msg_t m = { .type = ZT_MSG_AR_PIECE };
        m.u.AR_PIECE = (zt_msg_AR_PIECE_t) { .bucket = bi, .gen = k->gen, .offset = at, .count = c,
                                             .dtype = self->layout.buckets[bi].dtype, .step = 0 };
        char *src = k->in_shm ? k->buf + at * (int64_t) k->es
                              : (char *) self->t[t].data + (at - ta) * (int64_t) k->es;
        s_send_piece(self, r, &m, src, (size_t) c * k->es, k);
        k->wfly[r] += c * (int64_t) k->es;
        k->wnext[r] = at + c;
        sent += c * (int64_t) k->es;
    }
    return sent;
}

/* The window of a reducer on another host holds across buckets too: at most
 * window bytes out to it over every windowed bucket of the round. Each under
 * a window of its own only, the collective's 1 MiB slots (a bucket each) put
 * a whole 16 MiB call in flight at once: the bytes waited in the kernel's
 * buffers, out of the cache, and a 16 MiB all-reduce through 4 reducers took
 * 15-20% more CPU than as one bucket. The lowest bucket not done (bytes to
 * send, or sums to come) may always send under its own window: every worker
 * sends the same buckets, so the lowest one whose sums are missing anywhere
 * becomes every worker's lowest not done, is sent by all, and its sums come
 * back; no worker holds back what another's sums wait for. A reducer on
 * this host (pieces by reference) keeps a window per bucket. The lanes read
 * a bucket's window only once it is active: it is set (zt_allreduce.c's
 * s_submit) before it becomes so. */
static void s_pump_all(zt_allreduce_t *self, int r)
{
    int nb = self->layout.nbuckets, first = -1;
    int64_t w = self->red_local[r] ? 0 : self->window[r], fly = 0;
    for (int bi = 0; bi < nb; bi++) {
        zt_ar_state_t *k = &self->b[bi];
        if (!k->windowed || !__atomic_load_n(&k->active, __ATOMIC_ACQUIRE))
            continue;
        fly += k->wfly[r];
        if (first < 0 && (k->wnext[r] < k->wend[r] || k->wfly[r] > 0))
            first = bi;
    }
    for (int bi = first; bi >= 0 && bi < nb; bi++) {
        zt_ar_state_t *k = &self->b[bi];
        if (!k->windowed || !__atomic_load_n(&k->active, __ATOMIC_ACQUIRE) || k->wnext[r] >= k->wend[r])
            continue;
        if (bi != first && w && fly >= w)
            break;
        fly += s_pump(self, bi, r, bi == first || !w ? INT64_MAX : w - fly);
    }
}

void zt_ar_send_range(zt_allreduce_t *self, int bi, int64_t a, int64_t b, int only_reducer, bool again)
{
    zt_ar_state_t *k = &self->b[bi];
    int64_t per = PIECE_BYTES / (int64_t) k->es;
    for (int r = 0; r < self->R; r++) {
        if (only_reducer >= 0 && r != only_reducer)
            continue;
        int64_t lo = a > k->lo[r] ? a : k->lo[r], hi = b < k->hi[r] ? b : k->hi[r];
        if (lo >= hi)
            continue;
        if (k->windowed && !again) {
            k->wnext[r] = lo;
            k->wend[r] = hi;
            s_pump_all(self, r);
            continue;
        }
        for (int64_t at = lo; at < hi;) {
            int64_t c = hi - at < per ? hi - at : per;
            char *src = k->buf + at * (int64_t) k->es;
            /* inside a large tensor: send from its own buffer, never past its end */
            zt_ar_bucket_t *lb = &self->layout.buckets[bi];
            for (int t = lb->first; c > 0 && t <= lb->last; t++) {
                int64_t ta = self->layout.offset[t], tb = ta + self->layout.numel[t];
                if (at >= ta && at < tb && zt_ar_direct(k, self->layout.numel[t])) {
                    src = (char *) self->t[t].data + (at - ta) * (int64_t) k->es;
                    if (at + c > tb)
                        c = tb - at;
                    break;
                }
                if (at < ta && at + c > ta && zt_ar_direct(k, self->layout.numel[t]))
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
void zt_ar_flush(zt_allreduce_t *self, int bi)
{
    zt_ar_bucket_t *lb = &self->layout.buckets[bi];
    int64_t run_a = -1, run_b = -1;
    for (int t = lb->first; t <= lb->last; t++) {
        zt_ar_tensor_t *x = &self->t[t];
        bool go = x->submitted && !x->sent;
        int64_t a = self->layout.offset[t], b = a + self->layout.numel[t];
        if (go) {
            x->sent = true;
            if (run_a < 0)
                run_a = a;
            run_b = b;
        }
        else if (run_a >= 0) {
            if (!zt_ar_lanes_post(self, bi, run_a, run_b))
                zt_ar_send_range(self, bi, run_a, run_b, -1, false);
            run_a = -1;
        }
    }
    if (run_a >= 0 && !zt_ar_lanes_post(self, bi, run_a, run_b))
        zt_ar_send_range(self, bi, run_a, run_b, -1, false);
    self->b[bi].oldest_ms = 0;
}

/* ------------------------------------------------------------ commit */


/* Whether tensor t's sum is written into its caller's buffer as it comes
 * (s_land): a large tensor sent from there, whose sum is wanted as it is,
 * or times a factor in float32. */
/* The factor tensor t's sum is wanted times this round. */
static float s_scale(const zt_allreduce_t *self, int t)
{
    return self->averaging ? 1.0f / (float) self->workers : self->t[t].scale;
}

static bool s_lands(zt_allreduce_t *self, zt_ar_state_t *k, int t)
{
    const zt_ar_tensor_t *x = &self->t[t];
    float scale = s_scale(self, t);
    return x->submitted && zt_ar_direct(k, self->layout.numel[t]) && zt_ar_may_land() &&
           x->data != k->buf + self->layout.offset[t] * (int64_t) k->es && (scale == 1.0f || x->dtype == ZT_F32);
}

/* Where a sealed sum from reducer r opens, its one copy made by the
 * opening: its place in the bucket, when every byte of it there is only a
 * landing place (large tensors, sent from the caller's buffers), so that a
 * sum that does not open, having written there, costs nothing a resend
 * would need; from there it is written on to the tensors that take it as
 * it comes (s_land). NULL: opened in place, then copied. */
static void *s_landing(zt_allreduce_t *self, int r, const zt_msg_t *m, size_t bytes)
{
    if (m->type != ZT_MSG_AR_RESULT)
        return NULL;
    const zt_msg_AR_RESULT_t *res = &m->u.AR_RESULT;
    if (res->bucket < 0 || res->bucket >= self->layout.nbuckets || res->shm[0])
        return NULL;
    zt_ar_state_t *k = &self->b[res->bucket];
    int64_t off = res->offset, c = res->count, per = PIECE_BYTES / (int64_t) k->es;
    if (!k->active || k->in_shm || res->gen != k->gen || off < k->lo[r] || c <= 0 || c > k->hi[r] - off ||
        (size_t) c * k->es != bytes)
        return NULL;
    int p = (int) ((off - k->lo[r]) / per);
    if (p < 0 || p >= k->npieces[r] || k->piece_done[r][p])
        return NULL;
    zt_ar_bucket_t *lb = &self->layout.buckets[res->bucket];
    for (int t = lb->first; t <= lb->last; t++) {
        int64_t ta = self->layout.offset[t], tb = ta + self->layout.numel[t];
        if (tb <= off || ta >= off + c)
            continue;
        if (!zt_ar_direct(k, self->layout.numel[t]) || self->t[t].data == k->buf + ta * (int64_t) k->es)
            return NULL;
    }
    return k->buf + off * (int64_t) k->es;
}

/* One message from reducer r, opened when it came sealed: parts holds
 * [header][payload?] (*np of them; 0 when there is nothing to handle: the
 * stream's opening, or a message that did not open, counted and dropped,
 * or one of another group).
 * When r's stream has just opened (the first time, or again after the
 * reducer restarted), the layout and what r lacks go out now. false when
 * nothing waits. */
static bool s_recv_reply(zt_allreduce_t *self, int r, zmq_msg_t *parts, int *np)
{
    /* header, seal, payload; a sum opens into its landing place from the
     * frame it came in */
    *np = zt_bulk_recv(self->red[r], parts, 3);
    if (*np == 0)
        return false;
    /* A message of another group (membership generation) is dropped: a
     * reducer still serving an earlier group, or one of its messages still
     * on the way. Garbage is left to the callers, which drop it. */
    zt_msg_t h;
    bool decoded = zt_msg_decode(zmq_msg_data(&parts[0]), zmq_msg_size(&parts[0]), &h, NULL) == ZT_OK,
         ours = !decoded || h.incarnation == self->group;
    zt_bulk_t *b = self->red[r];
    if (!zt_bulk_sealed(b)) {
        if (!ours) {
            zt_msg_close_parts(parts, *np);
            *np = 0;
        }
        return true;
    }
    bool was = zt_bulk_ready(b);
    void *into = *np == 3 && decoded && ours ? s_landing(self, r, &h, zmq_msg_size(&parts[2])) : NULL;
    if (zt_bulk_open(b, parts, np, into, into ? zmq_msg_size(&parts[2]) : 0) != ZT_OK &&
        __atomic_fetch_add(&self->seal_drops, 1, __ATOMIC_RELAXED) % 100 == 0)
        zt_warn("reducer %d (%s): a message that is not sealed under this job's keys was dropped (%llu so far)", r,
                self->reducer_addrs[r], (unsigned long long) self->seal_drops);
    if (!was && zt_bulk_ready(b))
        zt_ar_reopened(self, r);
    if (*np > 0 && !ours) { /* opened (the stream's count moves on), then dropped */
        zt_msg_close_parts(parts, *np);
        *np = 0;
    }
    return true;
}

void zt_ar_reopened(zt_allreduce_t *self, int r)
{
    s_hello(self, r);
    zt_ar_resend(self, r);
}

int zt_ar_commit_reducers(zt_allreduce_t *self, int timeout_ms)
{
    bool *ok = calloc((size_t) self->R, sizeof(bool));
    int nok = 0, rc = ZT_OK;
    for (int r = 0; r < self->R; r++)
        s_hello(self, r);
    int64_t deadline = zt_now_ms() + timeout_ms, resend = zt_now_ms() + RESEND_MS;
    zmq_pollitem_t items[65];
    int nr = self->R < 64 ? self->R : 64, nitems = nr;
    for (int r = 0; r < nr; r++)
        items[r] = zt_bulk_item(self->red[r]);
    /* a new layout of a running group (autotune's) waits for every worker's
     * hello, a restarted one's too: it is served here what it asks first */
    if (self->watch && self->committed_once)
        items[nitems++] = (zmq_pollitem_t) { self->watch, 0, ZMQ_POLLIN, 0 };
    while (nok < self->R) {
        if (zt_stop_requested()) {
            snprintf(self->err, sizeof self->err, "stopping before the reducers confirmed the tensor list");
            rc = ZT_ESHUTDOWN;
            break;
        }
        if (zt_now_ms() >= deadline) {
            snprintf(self->err, sizeof self->err, "the reducers did not confirm the tensor list within "
                     "%d ms (%d of %d answered): not every worker registered?", timeout_ms, nok, self->R);
            rc = ZT_ETIMEDOUT;
            break;
        }
        if (zt_now_ms() >= resend) {
            for (int r = 0; r < self->R; r++)
                if (!ok[r]) {
                    zt_bulk_revive(self->red[r], RESEND_MS, UNHEARD_MS);
                    s_hello(self, r);
                }
            resend = zt_now_ms() + RESEND_MS;
        }
        zt_ar_tend_reducers(self, items, nr);
        if (zmq_poll(items, nitems, 50) <= 0)
            continue;
        if (nitems > nr && (items[nr].revents & ZMQ_POLLIN))
            self->watch_fn(self->watch_arg);
        for (int r = 0; r < self->R && r < 64; r++) {
            zmq_msg_t parts[3];
            int np;
            if (!(items[r].revents & ZMQ_POLLIN) || !s_recv_reply(self, r, parts, &np))
                continue;
            zt_msg_t m;
            if (np > 0 && zt_msg_decode(zmq_msg_data(&parts[0]), zmq_msg_size(&parts[0]), &m, NULL) == ZT_OK) {
                if (m.type == ZT_MSG_AR_READY && !ok[r]) {
                    ok[r] = true;
                    nok++;
                }
                else if (m.type == ZT_MSG_AR_ERROR) {
                    snprintf(self->err, sizeof self->err, "%s", m.u.AR_ERROR.text);
                    rc = ZT_ESPEC;
                }
            }
            zt_msg_close_parts(parts, np);
        }
        if (rc != ZT_OK)
            break;
    }
    free(ok);
    return rc;
}

/* ------------------------------------------------------------ reducers: wait */

/* What reducer r lacks of elements [a, b) of bucket bi (sent this round):
 * a block whose sum came back holds the sum now, not our piece (the sums
 * land where the pieces were), so the sum goes, which a restarted reducer
 * takes as it is (once: sum_out); the pieces of the others again. */
static void s_resend_range(zt_allreduce_t *self, int bi, int r, int64_t a, int64_t b, bool *sum_out)
{
    zt_ar_state_t *k = &self->b[bi];
    zt_ar_bucket_t *lb = &self->layout.buckets[bi];
    int64_t per = PIECE_BYTES / (int64_t) k->es;
    if (a < k->lo[r])
        a = k->lo[r];
    if (b > k->hi[r])
        b = k->hi[r];
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
                zt_ar_send(self, self->red[r], &m, k->buf + ba * (int64_t) k->es, (size_t) (be - ba) * k->es,
                           NULL);
                sum_out[p] = true;
            }
        }
        else
            zt_ar_send_range(self, bi, at, e, r, true);
        at = e;
    }
}

/* What was sent this round: on a lane's thread the ranges it was handed,
 * else every tensor sent. */
void zt_ar_resend(zt_allreduce_t *self, int r)
{
    int nruns;
    const zt_ar_run_t *runs = zt_ar_lane_runs(&nruns);
    for (int bi = 0; bi < self->layout.nbuckets; bi++) {
        zt_ar_state_t *k = &self->b[bi];
        if (!k->active)
            continue;
        bool chunk_done = true;
        for (int p = 0; p < k->npieces[r]; p++)
            chunk_done = chunk_done && k->piece_done[r][p];
        if (chunk_done)
            continue;
        bool *sum_out = calloc((size_t) k->npieces[r] + 1, sizeof(bool));
        if (runs) {
            for (int i = 0; i < nruns; i++)
                if (runs[i].bi == bi)
                    s_resend_range(self, bi, r, runs[i].a, runs[i].b, sum_out);
        }
        else {
            zt_ar_bucket_t *lb = &self->layout.buckets[bi];
            for (int t = lb->first; t <= lb->last; t++)
                if (self->t[t].sent)
                    s_resend_range(self, bi, r, self->layout.offset[t],
                                   self->layout.offset[t] + self->layout.numel[t], sum_out);
        }
        free(sum_out);
    }
}

bool zt_ar_chunks_done(zt_allreduce_t *self, int r)
{
    for (int bi = 0; bi < self->layout.nbuckets; bi++) {
        zt_ar_state_t *k = &self->b[bi];
        for (int p = 0; k->active && p < k->npieces[r]; p++)
            if (!k->piece_done[r][p])
                return false;
    }
    return true;
}

static bool s_all_done(zt_allreduce_t *self)
{
    for (int r = 0; r < self->R; r++)
        if (!zt_ar_chunks_done(self, r))
            return false;
    return true;
}

int zt_ar_timed_out(zt_allreduce_t *self, int timeout_ms)
{
    for (int bi = 0; bi < self->layout.nbuckets; bi++) {
        zt_ar_state_t *k = &self->b[bi];
        for (int r = 0; k->active && r < self->R; r++)
            for (int p = 0; p < k->npieces[r]; p++)
                if (!k->piece_done[r][p]) {
                    char who[300];
                    zt_env_describe_addr(self->reducer_addrs[r], who, sizeof who);
                    snprintf(self->err, sizeof self->err, "bucket %d (tensors %s..%s): reducer %d (%s) "
                             "sent no sum within %d ms (ZT_ALLREDUCE_TIMEOUT_MS); its log names the workers "
                             "it waits for%s", bi, self->t[self->layout.buckets[bi].first].name,
                             self->t[self->layout.buckets[bi].last].name, r, who, timeout_ms,
                             zt_bulk_unopened(self->red[r]));
                    return ZT_ETIMEDOUT;
                }
    }
    return ZT_OK;
}

/* Elements [off, off + c) of bucket bi's sum, from src (the frame it came
 * in, or its place in the bucket, opened there: s_landing), into the
 * bucket. The parts of it that belong to large tensors sent from their
 * callers' buffers are also written there now (times the average's
 * factor, or the tensor's: s_lands), while src is in the cache, past the
 * cache (zt_copy_cold, as the bucket's copy when src is the frame): no
 * copy out when the round ends, and no cache line read only to be
 * overwritten.
 * (The callers' bytes are free to overwrite: a sealed piece was sealed out
 * of them, a plain one lent to ZeroMQ is back (zt_ar_wait_lent) and one on
 * a direct end was written or copied, and a piece whose sum came back is
 * sent again as that sum.) */
static void s_land(zt_allreduce_t *self, zt_ar_state_t *k, int bi, int64_t off, int64_t c, const char *src)
{
    char *kept = k->buf + off * (int64_t) k->es;
    if (src != kept)
        zt_copy_cold(kept, src, (size_t) c * k->es);
    zt_ar_bucket_t *lb = &self->layout.buckets[bi];
    for (int t = lb->first; t <= lb->last; t++) {
        zt_ar_tensor_t *x = &self->t[t];
        int64_t ta = self->layout.offset[t], tb = ta + self->layout.numel[t];
        int64_t a = off > ta ? off : ta, b = off + c < tb ? off + c : tb;
        if (a >= b || !s_lands(self, k, t))
            continue;
        float scale = s_scale(self, t);
        char *to = (char *) x->data + (a - ta) * (int64_t) k->es;
        const char *from = src + (a - off) * (int64_t) k->es;
        if (scale == 1.0f)
            zt_copy_cold(to, from, (size_t) (b - a) * k->es);
        else /* float32 (s_lands) */
            zt_copy_cold_scaled((float *) to, (const float *) from, (size_t) (b - a), scale);
        __atomic_fetch_add(&x->landed, b - a, __ATOMIC_RELAXED); /* lanes share a tensor */
    }
}

/* A sum from reducer r: into the bucket when it is one we wait for. */
static bool s_on_result(zt_allreduce_t *self, int r, const zt_msg_AR_RESULT_t *res, zmq_msg_t *pm)
{
    if (res->bucket < 0 || res->bucket >= self->layout.nbuckets)
        return false;
    zt_ar_state_t *k = &self->b[res->bucket];
    int64_t off = res->offset, c = res->count;
    int64_t per = PIECE_BYTES / (int64_t) k->es;
    int p = (int) ((off - k->lo[r]) / per);
    if (!(k->active && res->gen == k->gen && off >= k->lo[r] && off <= k->hi[r] && c >= 0 && c <= k->hi[r] - off &&
          p >= 0 &&
          p < k->npieces[r] && !k->piece_done[r][p]))
        return false;
    char why[300];
    const char *src = zt_shm_payload(res->shm, res->shm_off, c * (int64_t) k->es, pm ? zmq_msg_data(pm) : NULL,
                                     pm ? zmq_msg_size(pm) : 0, why, sizeof why);
    if (!src) {
        zt_warn("reducer %d: %s", r, why);
        return false;
    }
    if (!k->windowed) /* its pieces went from the tensor, not buf */
        zt_ar_wait_lent(k);
    if (c)
        s_land(self, k, res->bucket, off, c, src);
    k->piece_done[r][p] = true;
    if (k->windowed) {
        k->wfly[r] -= c * (int64_t) k->es;
        s_pump_all(self, r);
    }
    return true;
}

/* A restarted reducer rebuilds a sum some workers missed: our chunk of the
 * previous round's result, again. */
static void s_on_resend(zt_allreduce_t *self, int r, const zt_msg_AR_RESEND_t *rq)
{
    if (rq->bucket < 0 || rq->bucket >= self->layout.nbuckets || self->b[rq->bucket].last_gen != rq->gen)
        return;
    zt_ar_state_t *k = &self->b[rq->bucket];
    int64_t per = PIECE_BYTES / (int64_t) k->es;
    for (int64_t at = k->lo[r]; at < k->hi[r] || at == k->lo[r]; at += per) {
        int64_t c = k->hi[r] - at < per ? k->hi[r] - at : per;
        zt_msg_t a = { .type = ZT_MSG_AR_RESULT };
        a.u.AR_RESULT = (zt_msg_AR_RESULT_t) { .bucket = rq->bucket, .gen = k->last_gen, .offset = at,
                                               .count = c, .dtype = self->layout.buckets[rq->bucket].dtype };
        zt_ar_send(self, self->red[r], &a, k->last + at * (int64_t) k->es, (size_t) c * k->es, NULL);
        if (c == 0 || at + c >= k->hi[r])
            break;
    }
}

void zt_ar_present(zt_allreduce_t *self, int r)
{
    /* Never blocks: a reducer long gone has let its queue fill up, and the
     * caller's next call would wait for this thread. */
    if (!zt_bulk_writable(self->red[r]))
        return;
    /* a sealed stream's reducer answers AR_IDLE: silent, it was restarted */
    zt_bulk_revive(self->red[r], RESEND_MS, UNHEARD_MS);
    zt_msg_t m = { .type = ZT_MSG_AR_IDLE };
    m.u.AR_IDLE.rounds = self->rounds;
    zt_ar_send(self, self->red[r], &m, NULL, 0, NULL);
}

/* Between rounds only a request for a kept sum needs an answer: sums of a
 * round already done and errors about pieces are moot until the next
 * round, which sends what a reducer lacks again. */
bool zt_ar_serve_idle(zt_allreduce_t *self, int r)
{
    zmq_msg_t parts[3];
    int np;
    if (!s_recv_reply(self, r, parts, &np))
        return false;
    zt_msg_t m;
    if (np > 0 && zt_msg_decode(zmq_msg_data(&parts[0]), zmq_msg_size(&parts[0]), &m, NULL) == ZT_OK &&
        m.type == ZT_MSG_AR_RESEND)
        s_on_resend(self, r, &m.u.AR_RESEND);
    zt_msg_close_parts(parts, np);
    return true;
}

/* One reply from reducer r. ZT_OK, or the error that ends the wait;
 * *progress is set when it moved a bucket forward. */
static int s_on_reply(zt_allreduce_t *self, int r, zmq_msg_t *parts, int np, bool *progress)
{
    zt_msg_t m;
    if (zt_msg_decode(zmq_msg_data(&parts[0]), zmq_msg_size(&parts[0]), &m, NULL) != ZT_OK)
        return ZT_OK; /* garbage: ignored */
    switch (m.type) {
    case ZT_MSG_AR_RESULT:
        *progress |= s_on_result(self, r, &m.u.AR_RESULT, np > 1 ? &parts[1] : NULL);
        return ZT_OK;
    case ZT_MSG_AR_RESEND:
        s_on_resend(self, r, &m.u.AR_RESEND);
        return ZT_OK;
    case ZT_MSG_AR_ERROR:
        if (m.u.AR_ERROR.code == ZT_PS_NOT_CONFIGURED) {
            zt_info("reducer %d (%s) lost its state: sending the layout and the pieces again", r,
                    self->reducer_addrs[r]);
            s_hello(self, r);
            zt_ar_resend(self, r);
            *progress = true;
            return ZT_OK;
        }
        snprintf(zt_ar_errbuf(self), ZT_AR_ERRLEN, "reducer %d (%s): %s", r, self->reducer_addrs[r],
                 m.u.AR_ERROR.text);
        return m.u.AR_ERROR.code == ZT_PS_CONFIG_MISMATCH ? ZT_ESPEC : ZT_EIO;
    default:
        return ZT_OK;
    }
}

int zt_ar_serve_reducer(zt_allreduce_t *self, int r, const zmq_pollitem_t *item, bool *moved)
{
    zmq_msg_t parts[3];
    int got;
    for (int budget = 0; (item->revents & ZMQ_POLLIN) && budget < 1024 && s_recv_reply(self, r, parts, &got);
         budget++) {
        int rc = got > 0 ? s_on_reply(self, r, parts, got, moved) : ZT_OK;
        zt_msg_close_parts(parts, got);
        if (rc != ZT_OK)
            return rc;
    }
    return ZT_OK;
}

/* Until every active bucket's sums are back: replies as they come, pieces
 * sent again to a reducer that made no progress for RESEND_MS. */
int zt_ar_wait_reducers(zt_allreduce_t *self, int timeout_ms)
{
    if (self->lanes)
        return zt_ar_lanes_wait(self, timeout_ms);
    for (int bi = 0; bi < self->layout.nbuckets; bi++)
        if (self->b[bi].active)
            zt_ar_flush(self, bi);
    int64_t deadline = zt_now_ms() + timeout_ms, progress = zt_now_ms();
    zmq_pollitem_t items[65];
    int n = self->R < 64 ? self->R : 64, np = n;
    for (int r = 0; r < n; r++)
        items[r] = zt_bulk_item(self->red[r]);
    if (self->watch) /* zt_allreduce_watch: served while we wait */
        items[np++] = (zmq_pollitem_t) { self->watch, 0, ZMQ_POLLIN, 0 };
    while (!s_all_done(self)) {
        int64_t now = zt_now_ms();
        if (zt_stop_requested()) {
            snprintf(self->err, sizeof self->err, "stopping with buckets unfinished");
            return ZT_ESHUTDOWN;
        }
        if (self->abandon_fn && self->abandon_fn(self->abandon_arg)) {
            snprintf(self->err, sizeof self->err, "the round was given up: the group forms again without a "
                     "member it lost");
            return ZT_ECANCELLED;
        }
        if (now >= deadline && zt_ar_timed_out(self, timeout_ms) != ZT_OK)
            return ZT_ETIMEDOUT;
        if (now - progress >= RESEND_MS) {
            __atomic_add_fetch(&self->stalls, 1, __ATOMIC_RELAXED);
            for (int r = 0; r < self->R; r++) {
                zt_bulk_revive(self->red[r], RESEND_MS, UNHEARD_MS);
                zt_ar_resend(self, r);
            }
            progress = now;
        }
        zt_ar_tend_reducers(self, items, n);
        if (zt_spin_poll(&self->spin, items, np, 50) <= 0)
            continue;
        if (np > n && (items[n].revents & ZMQ_POLLIN))
            self->watch_fn(self->watch_arg);
        for (int r = 0; r < n; r++) {
            bool moved = false;
            int rc = zt_ar_serve_reducer(self, r, &items[r], &moved);
            if (rc != ZT_OK)
                return rc;
            if (moved)
                progress = zt_now_ms();
        }
    }
    return ZT_OK;
}
