/* The all-reduce client's ring between workers (no reducers): each worker
 * connects to the next, then every bucket goes round in a reduce-scatter
 * and an all-gather. */
#include "base/zt_env.h"
#include "allreduce/zt_ar_internal.h"

static int s_ring_recv_msg(zt_allreduce_t *self, zt_msg_t *m, zmq_msg_t *payload, int timeout_ms);

int zt_ar_commit_ring(zt_allreduce_t *self, int timeout_ms)
{
    /* Each worker's list travels once around the ring; everyone compares it. */
    zt_msg_t m = { .type = ZT_MSG_AR_HELLO };
    m.u.AR_HELLO.req = self->rank; /* origin */
    m.u.AR_HELLO.workers = self->workers;
    zt_ar_send(self, self->ring_out, &m, self->layout_text, strlen(self->layout_text), NULL);
    int seen = 0, rc = ZT_OK;
    int64_t deadline = zt_now_ms() + timeout_ms;
    while (seen < self->workers - 1) {
        zt_msg_t in;
        zmq_msg_t payload;
        int left = (int) (deadline - zt_now_ms()), got = left <= 0 ? ZT_ETIMEDOUT
                                                                    : s_ring_recv_msg(self, &in, &payload, left);
        if (got == ZT_ESHUTDOWN) {
            snprintf(self->err, sizeof self->err, "ring: stopping");
            return ZT_ESHUTDOWN;
        }
        if (got != ZT_OK) {
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
            zt_ar_send(self, self->ring_out, &in, zmq_msg_data(&payload), zmq_msg_size(&payload), NULL);
        free(text);
        zmq_msg_close(&payload);
        seen++;
    }
    return rc;
}

/* ------------------------------------------------------------ ring */

/* One message from the ring within timeout_ms: ZT_OK, ZT_ETIMEDOUT, or
 * ZT_ESHUTDOWN as soon as the process is stopping. */
static int s_ring_recv_msg(zt_allreduce_t *self, zt_msg_t *m, zmq_msg_t *payload, int timeout_ms)
{
    int64_t deadline = zt_now_ms() + timeout_ms;
    for (;;) {
        if (zt_stop_requested())
            return ZT_ESHUTDOWN;
        int64_t left = deadline - zt_now_ms();
        if (left <= 0)
            return ZT_ETIMEDOUT;
        zsock_set_rcvtimeo(self->ring_in, left < 100 ? (int) left : 100);
        zmq_msg_t id, hm;
        zmq_msg_init(&id);
        if (zmq_msg_recv(&id, zsock_resolve(self->ring_in), 0) < 0) {
            zmq_msg_close(&id);
            continue;
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
        zt_ar_wait_lent(k);
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
    zt_ar_state_t *k = &self->b[bi];
    /* ring pieces are data-plane frames: no reducer streams them back */
    int64_t per = zt_frame_bytes() / (int64_t) k->es;
    for (int64_t at = lo; at < hi || at == lo; at += per) {
        int64_t c = hi - at < per ? hi - at : per;
        zt_msg_t m = { .type = ZT_MSG_AR_PIECE };
        m.u.AR_PIECE = (zt_msg_AR_PIECE_t) { .bucket = bi, .gen = k->gen, .offset = at, .count = c,
                                             .dtype = self->layout.buckets[bi].dtype, .step = step };
        zt_ar_send(self, self->ring_out, &m, k->buf + at * (int64_t) k->es, (size_t) c * k->es, c ? k : NULL);
        if (c == 0 || at + c >= hi)
            break;
    }
}

int zt_ar_wait_ring(zt_allreduce_t *self, int timeout_ms)
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
