/* The all-reduce client's ring between workers (no reducers): each worker
 * connects to the next, then every bucket goes round in a reduce-scatter
 * and an all-gather. */
#include "base/zt_env.h"
#include "allreduce/zt_ar_internal.h"

static int s_ring_recv_msg(zt_allreduce_t *self, zt_msg_t *m, zmq_msg_t *payload, int timeout_ms);

/* A message received before its turn: kept for later (dropped when too many wait). */
static void s_keep(zt_allreduce_t *self, const zt_msg_t *m, zmq_msg_t *payload)
{
    if (self->npending < MAX_PENDING) {
        self->pending[self->npending].msg = *m;
        self->pending[self->npending++].payload = *payload;
    }
    else
        zmq_msg_close(payload);
}

/* Until ring_out's sealed stream is open (at once when it has none),
 * serving ring_in meanwhile: the previous worker opens its stream to us at
 * the same time, and what it sends is kept. The opening goes again every
 * RESEND_MS (the next worker was not there yet, or restarted). */
static int s_ring_out_ready(zt_allreduce_t *self, int timeout_ms)
{
    int64_t deadline = zt_now_ms() + timeout_ms;
    while (!zt_bulk_ready(self->ring_out)) {
        if (zt_stop_requested()) {
            snprintf(self->err, sizeof self->err, "ring: stopping");
            return ZT_ESHUTDOWN;
        }
        if (zt_now_ms() >= deadline) {
            char who[300];
            int next = (self->rank + 1) % self->workers;
            zt_env_describe_rank(next, who, sizeof who);
            snprintf(self->err, sizeof self->err, "ring: %s (rank %d) did not open a sealed stream within %d ms",
                     who, next, timeout_ms);
            return ZT_ETIMEDOUT;
        }
        zt_bulk_revive(self->ring_out, RESEND_MS, 0);
        zt_msg_t m;
        zmq_msg_t pm;
        if (s_ring_recv_msg(self, &m, &pm, 50) == ZT_OK)
            s_keep(self, &m, &pm);
    }
    return ZT_OK;
}

int zt_ar_commit_ring(zt_allreduce_t *self, int timeout_ms)
{
    /* Each worker's list travels once around the ring; everyone compares it. */
    zt_msg_t m = { .type = ZT_MSG_AR_HELLO };
    m.u.AR_HELLO.req = self->rank; /* origin */
    m.u.AR_HELLO.workers = self->workers;
    int rc = s_ring_out_ready(self, timeout_ms);
    if (rc != ZT_OK)
        return rc;
    zt_ar_send(self, self->ring_out, &m, self->layout_text, strlen(self->layout_text), NULL);
    int seen = 0;
    int64_t deadline = zt_now_ms() + timeout_ms;
    while (seen < self->workers - 1) {
        zt_msg_t in;
        zmq_msg_t payload;
        int kept = -1, left = (int) (deadline - zt_now_ms()), got = ZT_OK;
        for (int i = 0; i < self->npending && kept < 0; i++) /* a hello kept while our stream opened */
            if (self->pending[i].msg.type == ZT_MSG_AR_HELLO && self->pending[i].msg.incarnation == self->group)
                kept = i;
        if (kept >= 0) {
            in = self->pending[kept].msg;
            payload = self->pending[kept].payload;
            self->pending[kept] = self->pending[--self->npending];
        }
        else
            got = left <= 0 ? ZT_ETIMEDOUT : s_ring_recv_msg(self, &in, &payload, left);
        if (got == ZT_ESHUTDOWN) {
            snprintf(self->err, sizeof self->err, "ring: stopping");
            return ZT_ESHUTDOWN;
        }
        if (got != ZT_OK) {
            snprintf(self->err, sizeof self->err, "ring: heard from %d of %d other workers within %d ms",
                     seen, self->workers - 1, timeout_ms);
            return ZT_ETIMEDOUT;
        }
        if (in.type != ZT_MSG_AR_HELLO || in.incarnation != self->group) { /* a faster worker's: keep it */
            s_keep(self, &in, &payload);
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
            zt_ar_send(self, self->ring_out, &in, zmq_msg_data(&payload), zmq_msg_size(&payload),
                       NULL);
        free(text);
        zmq_msg_close(&payload);
        seen++;
    }
    return rc;
}

/* ------------------------------------------------------------ ring */

/* ring_out's own messages: the next worker's acceptance of our stream, or
 * its reset (nothing else comes that way). */
static void s_ring_out_service(zt_allreduce_t *self)
{
    zmq_msg_t parts[3];
    int np;
    while ((np = zt_bulk_recv(self->ring_out, parts, 3)) > 0) {
        zt_bulk_open(self->ring_out, parts, &np, NULL, 0);
        zt_msg_close_parts(parts, np);
    }
}

/* Where a sealed ring block opens (zt_bulk_server_recv_into): straight into
 * the bucket when it is the all-gather block awaited now (ring_land), whose
 * place there is only a landing place, and none of the bucket's bytes is
 * lent to a send still queued; else NULL, in its frame. */
static void *s_ring_landing(void *arg, const void *hdr, size_t hlen, size_t bytes)
{
    zt_allreduce_t *self = arg;
    zt_msg_t m;
    if (!self->ring_land.on || zt_msg_decode(hdr, hlen, &m, NULL) != ZT_OK || m.type != ZT_MSG_AR_PIECE)
        return NULL;
    const zt_msg_AR_PIECE_t *p = &m.u.AR_PIECE;
    zt_ar_state_t *k = &self->b[self->ring_land.bucket];
    if (p->bucket != self->ring_land.bucket || p->gen != k->gen || p->step != self->ring_land.step ||
        m.incarnation != self->group || p->offset < self->ring_land.lo || p->count <= 0 ||
        p->count > self->ring_land.hi - p->offset || (size_t) p->count * k->es != bytes ||
        atomic_load(&k->lent) > 0)
        return NULL;
    return k->buf + p->offset * (int64_t) k->es;
}

/* One message from the ring within timeout_ms, opened when it came sealed:
 * ZT_OK, ZT_ETIMEDOUT, or ZT_ESHUTDOWN as soon as the process is stopping.
 * A message that does not open is counted and dropped. */
static int s_ring_recv_msg(zt_allreduce_t *self, zt_msg_t *m, zmq_msg_t *payload, int timeout_ms)
{
    int64_t deadline = zt_now_ms() + timeout_ms;
    for (;;) {
        if (zt_stop_requested())
            return ZT_ESHUTDOWN;
        int64_t left = deadline - zt_now_ms();
        if (left <= 0)
            return ZT_ETIMEDOUT;
        zt_bulk_tend(self->ring_out, NULL); /* a broken connection made again, what waits written */
        zmq_pollitem_t items[2] = { { zt_bulk_server_socket(self->ring_in), 0, ZMQ_POLLIN, 0 },
                                    zt_bulk_item(self->ring_out) };
        if (zmq_poll(items, 2, left < 100 ? left : 100) <= 0)
            continue;
        if (items[1].revents & ZMQ_POLLIN)
            s_ring_out_service(self);
        zmq_msg_t parts[4]; /* identity, header, seal, payload */
        int np = items[0].revents & ZMQ_POLLIN ? zt_bulk_server_recv_into(self->ring_in, parts, 4, s_ring_landing, self)
                                               : ZT_ETIMEDOUT;
        if (np == ZT_EPROTO && self->seal_drops++ % 100 == 0)
            zt_warn("ring: a message that is not sealed under this job's keys was dropped (%llu so far)",
                    (unsigned long long) self->seal_drops);
        if (np <= 0)
            continue;
        if (np >= 2 && zt_msg_decode(zmq_msg_data(&parts[1]), zmq_msg_size(&parts[1]), m, NULL) == ZT_OK &&
            m->incarnation >= self->group) { /* not a block of an earlier group (a later layout's is kept) */
            zmq_msg_init(payload);
            if (np >= 3)
                zmq_msg_move(payload, &parts[2]);
            zt_msg_close_parts(parts, np);
            return ZT_OK;
        }
        zt_msg_close_parts(parts, np);
    }
}

/* Receives chunk [lo, hi) of bucket bi for (gen, step); adds or copies it. */
static int s_ring_take_blocks(zt_allreduce_t *self, int bi, int step, int64_t lo, int64_t hi, bool add,
                              int timeout_ms)
{
    zt_ar_state_t *k = &self->b[bi];
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
                p->step == step && self->pending[i].msg.incarnation == self->group) {
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
            int left = (int) (deadline - zt_now_ms()), rcv = left <= 0 ? ZT_ETIMEDOUT
                                                                        : s_ring_recv_msg(self, &m, &pm, left);
            if (rcv == ZT_ESHUTDOWN) {
                snprintf(self->err, sizeof self->err, "ring: stopping");
                return ZT_ESHUTDOWN;
            }
            if (rcv != ZT_OK) {
                char who[300];
                int prev = (self->rank + self->workers - 1) % self->workers;
                zt_env_describe_rank(prev, who, sizeof who);
                snprintf(self->err, sizeof self->err, "ring: %s (rank %d) sent nothing for bucket %d step %d "
                         "within %d ms (ZT_ALLREDUCE_TIMEOUT_MS)", who, prev, bi, step, timeout_ms);
                return ZT_ETIMEDOUT;
            }
            zt_msg_AR_PIECE_t *p = &m.u.AR_PIECE;
            if (m.type != ZT_MSG_AR_PIECE || p->bucket != bi || p->gen != k->gen || p->step != step ||
                m.incarnation != self->group) {
                s_keep(self, &m, &pm);
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
        zt_ar_wait_lent(k);
        char *dst = k->buf + p->offset * (int64_t) k->es;
        if (add)
            zt_ar_add(dst, zmq_msg_data(&pm), p->count, self->layout.buckets[bi].dtype);
        else if (p->count && zmq_msg_data(&pm) != dst) /* not opened there already (s_ring_landing) */
            memcpy(dst, zmq_msg_data(&pm), (size_t) p->count * k->es);
        got += p->count;
        zmq_msg_close(&pm);
    }
    return ZT_OK;
}

/* Chunk [lo, hi) of bucket bi for (gen, step): added (reduce-scatter) or,
 * in the all-gather, sealed blocks opened straight into their place. */
static int s_ring_take(zt_allreduce_t *self, int bi, int step, int64_t lo, int64_t hi, bool add,
                       int timeout_ms)
{
    if (!add) {
        self->ring_land.bucket = bi;
        self->ring_land.step = step;
        self->ring_land.lo = lo;
        self->ring_land.hi = hi;
        self->ring_land.on = true;
    }
    int rc = s_ring_take_blocks(self, bi, step, lo, hi, add, timeout_ms);
    self->ring_land.on = false;
    return rc;
}

static void s_ring_give(zt_allreduce_t *self, int bi, int step, int64_t lo, int64_t hi)
{
    zt_ar_state_t *k = &self->b[bi];
    /* ring pieces are data-plane frames: no reducer streams them back */
    int64_t per = zt_frame_bytes() / (int64_t) k->es;
    for (int64_t at = lo; at < hi || at == lo; at += per) {
        int64_t c = hi - at < per ? hi - at : per;
        zt_msg_t m = { .type = ZT_MSG_AR_PIECE };
        m.u.AR_PIECE = (zt_msg_AR_PIECE_t) { .bucket = bi, .gen = k->gen, .offset = at, .count = c,
                                             .dtype = self->layout.buckets[bi].dtype, .step = step };
        zt_ar_send(self, self->ring_out, &m, k->buf + at * (int64_t) k->es, (size_t) c * k->es,
                   c ? k : NULL);
        if (c == 0 || at + c >= hi)
            break;
    }
}

int zt_ar_wait_ring(zt_allreduce_t *self, int timeout_ms)
{
    int N = self->workers, me = self->rank;
    int rc = s_ring_out_ready(self, timeout_ms); /* open again after a reset */
    if (rc != ZT_OK)
        return rc;
    for (int bi = 0; bi < self->layout.nbuckets; bi++) {
        if (!self->b[bi].active)
            continue;
        int64_t numel = self->layout.buckets[bi].numel, lo, hi;
        for (int s = 0; s < N - 1; s++) { /* reduce-scatter */
            zt_shard_range(numel, N, (me - s + N) % N, &lo, &hi);
            s_ring_give(self, bi, s, lo, hi);
            zt_shard_range(numel, N, (me - s - 1 + 2 * N) % N, &lo, &hi);
            rc = s_ring_take(self, bi, s, lo, hi, true, timeout_ms);
            if (rc != ZT_OK)
                return rc;
        }
        for (int s = 0; s < N - 1; s++) { /* all-gather */
            zt_shard_range(numel, N, (me + 1 - s + 2 * N) % N, &lo, &hi);
            s_ring_give(self, bi, N - 1 + s, lo, hi);
            zt_shard_range(numel, N, (me - s + 2 * N) % N, &lo, &hi);
            rc = s_ring_take(self, bi, N - 1 + s, lo, hi, false, timeout_ms);
            if (rc != ZT_OK)
                return rc;
        }
    }
    /* The next worker may still wait for the end of our last block, which
     * its own end of a direct connection keeps until the kernel takes it:
     * out before the round ends (after it this worker may compute for long,
     * or exit). A broken connection is the next worker's to find. */
    zt_bulk_flush(self->ring_out);
    return ZT_OK;
}
