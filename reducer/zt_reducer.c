#include "base/zt_env.h"
#include "runtime/zt_process.h"
#include "zt_reducer_int.h"
#include "zt_ranges.h"
#include "zt_held.h"
#include "allreduce/zt_arlayout.h"
#include "wire/zt_bufpool.h"
#include "wire/zt_msg.h"
#include "wire/zt_transport.h"
#include "base/zt_shard.h"
#include "wire/zt_shm.h"
#include "wire/zt_stream.h"
#include "base/zt_util.h"
#include "ztrain/zt_allreduce.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_knobs.h"
#include "ztrain/zt_log.h"
#include <czmq.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


static void s_send_lent(zt_reducer_t *self, int rank, zt_msg_t *m, const void *payload, size_t bytes,
                        atomic_int *lent);

static void s_send(zt_reducer_t *self, int rank, zt_msg_t *m, const void *payload, size_t bytes)
{
    s_send_lent(self, rank, m, payload, bytes, NULL);
}

static void s_send_lent(zt_reducer_t *self, int rank, zt_msg_t *m, const void *payload, size_t bytes,
                        atomic_int *lent)
{
    if (rank < 0 || rank >= MAX_WORKERS || !self->have_id[rank])
        return;
    m->seq = self->seq++;
    m->pool = 2;
    m->index = self->opts.index;
    m->incarnation = self->group;
    int64_t off = m->type == ZT_MSG_AR_RESULT && self->local[rank] && payload && bytes
                      ? zt_shm_offset(self->shm, payload, bytes) : -1;
    if (off >= 0) { /* this host's worker reads it in place */
        zt_msg_set_str(m->u.AR_RESULT.shm, self->shm->name);
        m->u.AR_RESULT.shm_off = off;
        payload = NULL;
    }
    /* lent: the same sum goes to every plain worker without a copy;
     * another host's is sealed for it alone, from the sum */
    zt_bulk_reply(self->srv, &self->ids[rank], m, payload, bytes, lent);
}

static void s_error(zt_reducer_t *self, int rank, int64_t req, int code, const char *text)
{
    zt_msg_t m = { .type = ZT_MSG_AR_ERROR };
    m.u.AR_ERROR.req = req;
    m.u.AR_ERROR.code = code;
    zt_msg_set_str(m.u.AR_ERROR.text, text);
    s_send(self, rank, &m, NULL, 0);
}

/* Elements [a, e) of bucket b's sum of generation gen to one worker, from
 * the sums kept by generation parity, lent (no copy). */
static void s_send_sum(zt_reducer_t *self, int rank, int b, int64_t gen, int64_t a, int64_t e)
{
    s_bucket_t *k = &self->buckets[b];
    size_t es = zt_dtype_size(k->dtype);
    int par = (int) (gen & 1);
    zt_msg_t m = { .type = ZT_MSG_AR_RESULT };
    m.u.AR_RESULT = (zt_msg_AR_RESULT_t) { .bucket = b, .gen = gen, .offset = a, .count = e - a, .dtype = k->dtype };
    s_send_lent(self, rank, &m, (char *) k->res[par] + (a - k->lo) * (int64_t) es, (size_t) (e - a) * es,
                &k->res_lent[par]);
}

/* Elements [a, e) of bucket b's sum of the generation being summed to every
 * worker: to another host's workers sealed once, under this reducer's
 * one-to-many key (the same frames to each), to this host's as
 * s_send_sum. */
static void s_send_sum_to_all(zt_reducer_t *self, int b, int64_t a, int64_t e)
{
    s_bucket_t *k = &self->buckets[b];
    size_t es = zt_dtype_size(k->dtype);
    zt_bulk_shared_t sh = { 0 };
    zt_msg_t m = { .type = ZT_MSG_AR_RESULT, .seq = self->seq++, .pool = 2, .index = self->opts.index,
                   .incarnation = self->group };
    m.u.AR_RESULT = (zt_msg_AR_RESULT_t) { .bucket = b, .gen = k->gen, .offset = a, .count = e - a,
                                           .dtype = k->dtype };
    const char *sum = (char *) k->res[k->gen & 1] + (a - k->lo) * (int64_t) es;
    for (int w = 0; w < self->workers; w++) {
        if (!self->have_id[w] || e <= a || !zt_bulk_server_sealed_to(self->srv, &self->ids[w]))
            s_send_sum(self, w, b, k->gen, a, e); /* this host's, by shared memory or lent */
        else
            zt_bulk_reply_shared(self->srv, &self->ids[w], &m, sum, (size_t) (e - a) * es, NULL, &sh);
    }
    zt_bulk_shared_close(&sh);
}

/* Streams the result of bucket b's last finished generation to one worker. */
static void s_send_result(zt_reducer_t *self, int b, int rank)
{
    s_bucket_t *k = &self->buckets[b];
    int64_t per = k->per;
    for (int64_t at = k->lo; at < k->hi; at += per)
        s_send_sum(self, rank, b, k->result_gen, at, k->hi - at < per ? k->hi : at + per);
}

/* Whether every block that elements [pa, pb) of bucket k touch is summed. */
static bool s_summed(void *arg, int64_t pa, int64_t pb)
{
    s_bucket_t *k = arg;
    int64_t per = k->per;
    for (int64_t j = (pa - k->lo) / per; j <= (pb - 1 - k->lo) / per && j < k->nblocks; j++)
        if (!k->block_sent[j])
            return false;
    return true;
}

/* Sends block j of bucket b's sum to every worker as soon as every worker
 * has contributed it: the sums stream back while later blocks still arrive,
 * so each link carries both directions at once. sum: the block's sum as a
 * worker had it from this reducer's predecessor, or NULL: ours. */
static void s_send_block(zt_reducer_t *self, int b, int j, const char *sum)
{
    s_bucket_t *k = &self->buckets[b];
    size_t es = zt_dtype_size(k->dtype);
    int64_t per = k->per;
    int64_t a = k->lo + (int64_t) j * per, e = a + per < k->hi ? a + per : k->hi;
    int par = (int) (k->gen & 1);
    if (k->blocks_sent == 0)
        while (atomic_load(&k->res_lent[par]) > 0) /* generation gen-2 still being sent */
            zclock_sleep(0);
    char *res = (char *) k->res[par] + (a - k->lo) * (int64_t) es;
    if (sum)
        memcpy(res, sum, (size_t) (e - a) * es);
    else /* in rank order, whatever order the pieces came in: the same sum every run */
        zt_held_sum(k->held, self->workers, a, e, k->dtype, res);
    s_send_sum_to_all(self, b, a, e);
    k->block_sent[j] = true;
    k->blocks_sent++;
    for (int w = 0; w < self->workers && k->blocks_sent < k->nblocks; w++)
        zt_held_release(&k->held[w], a, e, s_summed, k);
    if (k->blocks_sent == k->nblocks) { /* the whole chunk: the generation is done */
        if (k->want_gen == k->gen) /* asked for in vain (s_probe_ahead): nobody had it */
            k->want_gen = -1;
        k->result_gen = k->gen;
        zt_reducer_reset_bucket(self, k);
        k->gen++;
    }
}


/* Asks a worker that is past generation gen for its copy of the sum (from:
 * that worker, or -1: any worker that sent pieces of a later generation). */
static void s_ask_for_result(zt_reducer_t *self, int b, int64_t gen, int from)
{
    s_bucket_t *k = &self->buckets[b];
    int64_t now = zt_now_ms();
    if (k->want_gen == gen && now - k->asked_ms < 1000)
        return;
    if (from < 0)
        for (int w = 0; w < self->workers && from < 0; w++)
            if (k->gen == gen + 1 && k->from[w].got > 0)
                from = w;
    if (from < 0)
        return; /* nobody ahead has spoken yet; the behind worker will resend */
    if (k->want_gen != gen) {
        while (atomic_load(&k->res_lent[gen & 1]) > 0)
            zclock_sleep(0);
        k->want_gen = gen;
        k->want_got.n = 0;
        k->want_got.got = 0;
    }
    k->asked_ms = now;
    zt_info("bucket %d: fetching the sum of generation %lld from worker %d for the workers that "
            "missed it", b, (long long) gen, from);
    zt_msg_t m = { .type = ZT_MSG_AR_RESEND };
    m.u.AR_RESEND = (zt_msg_AR_RESEND_t) { b, gen };
    s_send(self, from, &m, NULL, 0);
}

/* A worker's copy of an older sum, sent because we asked. */
static void s_on_worker_result(zt_reducer_t *self, const zt_msg_t *m, zmq_msg_t *payload)
{
    const zt_msg_AR_RESULT_t *p = &m->u.AR_RESULT;
    if (!self->configured || p->bucket < 0 || p->bucket >= self->layout.nbuckets)
        return;
    s_bucket_t *k = &self->buckets[p->bucket];
    size_t es = zt_dtype_size(k->dtype);
    if (p->offset < k->lo || p->offset > k->hi || p->count < 0 || p->count > k->hi - p->offset || !payload ||
        zmq_msg_size(payload) != (size_t) p->count * es)
        return;
    if (p->gen != k->want_gen && (p->gen == k->gen || k->gen < 0)) {
        /* A block of the generation being summed that a worker already had
         * from our predecessor (restarted mid-broadcast): its pieces of it
         * are gone (the sum took their place), so the sum is taken as it
         * is, for the workers still without it. */
        if (k->gen < 0)
            k->gen = p->gen;
        int64_t per = k->per;
        int64_t rel = p->offset - k->lo;
        if (rel % per || (p->count != per && p->offset + p->count != k->hi))
            return; /* not one whole block */
        int j = (int) (rel / per);
        if (j < k->nblocks && !k->block_sent[j]) {
            zt_info("bucket %lld block %d: a worker's copy of the sum taken (it had it from the "
                    "reducer before this one)", (long long) p->bucket, j);
            s_send_block(self, (int) p->bucket, j, zmq_msg_data(payload));
        }
        return;
    }
    if (p->gen != k->want_gen)
        return;
    zt_iv_t fresh[64];
    if (k->want_got.n < 62) {
        int nf = zt_ranges_add(&k->want_got, p->offset, p->offset + p->count, fresh);
        for (int i = 0; i < nf; i++)
            memcpy((char *) k->res[k->want_gen & 1] + (fresh[i].a - k->lo) * (int64_t) es,
                   (const char *) zmq_msg_data(payload) + (fresh[i].a - p->offset) * (int64_t) es,
                   (size_t) (fresh[i].b - fresh[i].a) * es);
    }
    if (k->want_got.got < k->hi - k->lo)
        return;
    k->result_gen = k->want_gen;
    k->want_gen = -1;
    zt_info("bucket %lld: recovered the sum of generation %lld", (long long) p->bucket,
            (long long) k->result_gen);
    for (int w = 0; w < self->workers; w++) /* those past it ignore it */
        s_send_result(self, (int) p->bucket, w);
    if (k->gen == k->result_gen) { /* we were stuck on it: move on */
        zt_reducer_reset_bucket(self, k);
        k->gen++;
    }
}

/* A piece of another generation than the bucket's. true when handled. */
static bool s_other_generation(zt_reducer_t *self, int rank, const zt_msg_AR_PIECE_t *p, s_bucket_t *k)
{
    if (k->gen < 0)
        k->gen = p->gen; /* a fresh (restarted) reducer joins the workers' count */
    if (p->gen < k->gen) { /* resent for a round already done: the worker missed the sum */
        if (p->gen == k->result_gen)
            s_send_result(self, (int) p->bucket, rank);
        else
            s_ask_for_result(self, (int) p->bucket, p->gen, -1);
        return true;
    }
    if (p->gen > k->gen) {
        /* This worker has the sum of our generation already (the reducer was
         * restarted mid-broadcast): fetch it from the worker, finish that
         * generation for the others, and move on; its pieces come again. */
        if (p->gen == k->gen + 1)
            s_ask_for_result(self, (int) p->bucket, k->gen, rank);
        else
            zt_warn("bucket %lld: worker %d is at generation %lld, this reducer at %lld; dropped",
                    (long long) p->bucket, rank, (long long) p->gen, (long long) k->gen);
        return true;
    }
    return false;
}

/* Holds the parts of a piece not yet received from this worker, by
 * reference (frame: the frame they are in; NULL: in the worker's shared
 * memory), checked first for NaN and infinity unless allowed. false for a
 * non-finite value: nothing of the piece is taken. */
static bool s_hold(s_bucket_t *k, int rank, const zt_msg_AR_PIECE_t *p, const char *src, size_t es,
                   zmq_msg_t *frame, bool check)
{
    zt_iv_t fresh[64], unused[64];
    int nf = zt_ranges_missing(&k->from[rank], p->offset, p->offset + p->count, fresh);
    for (int i = 0; check && i < nf; i++)
        if (!zt_all_finite(src + (fresh[i].a - p->offset) * (int64_t) es, fresh[i].b - fresh[i].a, k->dtype))
            return false;
    for (int i = 0; i < nf; i++) {
        if (zt_held_add(&k->held[rank], fresh[i].a, fresh[i].b, src + (fresh[i].a - p->offset) * (int64_t) es,
                        (size_t) (fresh[i].b - fresh[i].a) * es, frame) != ZT_OK)
            return true; /* out of memory: not recorded, so it is asked for again */
        zt_ranges_add(&k->from[rank], fresh[i].a, fresh[i].b, unused);
    }
    return true;
}

/* Sends the sum of every block the piece touched that every worker has now
 * covered. A block already summed and sent goes again to this worker alone:
 * it is a worker restarted into the group, whose earlier self had sent its
 * piece of the block and died before the sum came back (or a resend). */
static void s_send_complete_blocks(zt_reducer_t *self, int rank, const zt_msg_AR_PIECE_t *p, s_bucket_t *k,
                                   size_t es)
{
    int64_t per = k->per;
    int j0 = (int) ((p->offset - k->lo) / per);
    int j1 = (int) ((p->offset + p->count - 1 - k->lo) / per);
    for (int j = j0; j <= j1 && j < k->nblocks; j++) {
        int64_t a = k->lo + (int64_t) j * per, e = a + per < k->hi ? a + per : k->hi;
        if (k->block_sent[j]) {
            s_send_sum(self, rank, (int) p->bucket, k->gen, a, e);
            continue;
        }
        bool all = true;
        for (int w = 0; w < self->workers && all; w++)
            all = zt_ranges_cover(&k->from[w], a, e);
        if (all) {
            int64_t gen = k->gen;
            s_send_block(self, (int) p->bucket, j, NULL);
            if (k->gen != gen) /* that was the last block */
                break;
        }
    }
}

/* A piece holding NaN or infinity: refused (counted, logged, the sender told). */
static void s_refuse_nonfinite(zt_reducer_t *self, int rank, const zt_msg_AR_PIECE_t *p)
{
    char what[512], who[300];
    zt_env_describe_rank(rank, who, sizeof who);
    snprintf(what, sizeof what, "a piece of non-finite values (NaN or infinity) for bucket %lld from a sender "
             "claiming to be %s (rank %d)", (long long) p->bucket, who, rank);
    zt_process_refused(&self->nonfinite, self->opts.replica, "nonfinite_refused", what);
    s_error(self, rank, -1, ZT_PS_BAD_PAYLOAD, "non-finite gradients (NaN or infinity) refused; the round "
            "cannot complete with them (ZT_ALLOW_NONFINITE=1 takes them)");
}

/* AR_PIECE: checked, added to the bucket's sums, and the blocks it
 * completes sent back to every worker. */
static void s_on_piece(zt_reducer_t *self, int rank, const zt_msg_t *m, zmq_msg_t *payload)
{
    const zt_msg_AR_PIECE_t *p = &m->u.AR_PIECE;
    if (!self->configured || !self->said_hello[rank]) {
        /* A restarted reducer (this one) knows only the workers that said
         * hello to it since: one summing on, unaware of the restart, is told
         * to say it (its hello may be the one the group's READY waits for),
         * once a while, not once per piece in flight. */
        int64_t now = zt_now_ms();
        if (now - self->asked_ms[rank] >= 500) {
            self->asked_ms[rank] = now;
            s_error(self, rank, -1, ZT_PS_NOT_CONFIGURED, "reducer has no layout from this worker (restarted?)");
        }
        return;
    }
    if (p->bucket < 0 || p->bucket >= self->layout.nbuckets || rank >= self->workers) {
        s_error(self, rank, -1, ZT_PS_BAD_RANGE, "no such bucket or worker");
        return;
    }
    s_bucket_t *k = &self->buckets[p->bucket];
    size_t es = zt_dtype_size(k->dtype);
    if (p->dtype != k->dtype || p->offset < k->lo || p->offset > k->hi || p->count <= 0 ||
        p->count > k->hi - p->offset) { /* no overflow for any inputs */
        s_error(self, rank, -1, ZT_PS_BAD_PAYLOAD, "piece outside this reducer's chunk");
        return;
    }
    char why[300];
    const char *src = zt_shm_payload(p->shm, p->shm_off, p->count * (int64_t) es,
                                     payload ? zmq_msg_data(payload) : NULL, payload ? zmq_msg_size(payload) : 0,
                                     why, sizeof why);
    if (!src) {
        s_error(self, rank, -1, ZT_PS_BAD_PAYLOAD, why);
        return;
    }
    if (k->gen >= 0 && p->gen != k->gen && !self->allow_nonfinite && !zt_all_finite(src, p->count, k->dtype)) {
        s_refuse_nonfinite(self, rank, p); /* off the summing path: checked whole */
        return;
    }
    if (s_other_generation(self, rank, p, k))
        return;
    if (!k->started_ms)
        k->started_ms = zt_now_ms();
    if (k->from[rank].n >= 62) { /* pathological cuts: fall back to whole-piece granularity */
        zt_warn("bucket %lld: too many separate pieces from worker %d", (long long) p->bucket, rank);
        return;
    }
    if (!s_hold(k, rank, p, src, es, p->shm[0] ? NULL : payload, !self->allow_nonfinite)) {
        s_refuse_nonfinite(self, rank, p);
        return;
    }
    s_send_complete_blocks(self, rank, p, k, es);
}

/* A group's layout, as its first hello brought it (autotune's later ones at debug level). */
static void s_say_layout(zt_reducer_t *self, int rank, int workers)
{
    ZT_LOG(self->group % ZT_AR_LAYOUTS ? ZT_LOG_DEBUG : ZT_LOG_INFO, "layout from worker %d: %d buckets for %d workers",
           rank, self->layout.nbuckets, workers);
}

static void s_on_hello(zt_reducer_t *self, int rank, const zt_msg_t *m, zmq_msg_t *payload)
{
    if (!payload || zmq_msg_size(payload) == 0 || zmq_msg_size(payload) > (1 << 24)) {
        s_error(self, rank, m->u.AR_HELLO.req, ZT_PS_BAD_PAYLOAD, "layout missing");
        return;
    }
    char *text = strndup(zmq_msg_data(payload), zmq_msg_size(payload));
    int workers = (int) m->u.AR_HELLO.workers;
    if (self->failed) {
        s_error(self, rank, m->u.AR_HELLO.req, ZT_PS_CONFIG_MISMATCH, self->failure);
        free(text);
        return;
    }
    if (!self->configured) {
        if (zt_reducer_configure(self, text, workers) != ZT_OK) {
            s_error(self, rank, m->u.AR_HELLO.req, ZT_PS_BAD_PAYLOAD,
                    "layout refused: malformed, or more than this reducer can hold");
            free(text);
            return;
        }
        self->first_rank = rank;
        s_say_layout(self, rank, workers);
    }
    else if ((strcmp(text, self->layout_text) || workers != self->workers) && self->ready_sent) {
        /* the group is summing: a different layout now is no worker of it
         * (a restarted one comes with the same): refused to its sender
         * alone, the group goes on */
        zt_process_refused(&self->dropped, NULL, NULL, "a layout unlike the running group's");
        s_error(self, rank, m->u.AR_HELLO.req, ZT_PS_CONFIG_MISMATCH,
                "this layout is not the running group's; refused (the group goes on)");
        free(text);
        return;
    }
    else if (strcmp(text, self->layout_text) || workers != self->workers) {
        json_t *doc = json_loads(text, 0, NULL);
        zt_ar_describe_mismatch(self->first_tensors, self->first_rank, json_object_get(doc, "tensors"), rank,
                                self->failure, sizeof self->failure);
        int64_t th = json_integer_value(json_object_get(doc, "threshold"));
        int64_t piece = json_integer_value(json_object_get(doc, "piece_bytes"));
        if (strstr(self->failure, "tensor lists differ") && piece != self->layout.piece_bytes)
            snprintf(self->failure, sizeof self->failure, "worker %d sends all-reduce pieces of %lld "
                     "bytes, worker %d of %lld (ZT_AR_PIECE_BYTES must be the same on every worker)",
                     rank, (long long) piece, self->first_rank, (long long) self->layout.piece_bytes);
        else if (strstr(self->failure, "tensor lists differ") && th != self->layout.threshold)
            snprintf(self->failure, sizeof self->failure, "worker %d has a fusion threshold of %lld "
                     "bytes, worker %d of %lld (ZT_FUSION_THRESHOLD, HOROVOD_FUSION_THRESHOLD or "
                     "ZT_BUCKET_CAP_MB must be the same on every worker)", rank, (long long) th,
                     self->first_rank, (long long) self->layout.threshold);
        if (workers != self->workers)
            snprintf(self->failure, sizeof self->failure, "worker %d counts %d workers, worker %d "
                     "counts %d", rank, workers, self->first_rank, self->workers);
        json_decref(doc);
        self->failed = true;
        zt_error("%s", self->failure);
        for (int w = 0; w < MAX_WORKERS; w++)
            if (self->said_hello[w] || w == rank)
                s_error(self, w, w == rank ? m->u.AR_HELLO.req : self->hello_req[w],
                        ZT_PS_CONFIG_MISMATCH, self->failure);
        free(text);
        return;
    }
    free(text);
    self->said_hello[rank] = true;
    self->hello_req[rank] = m->u.AR_HELLO.req;
    self->local[rank] = m->u.AR_HELLO.shm_ok != 0 && self->shm;
    int n = 0;
    for (int w = 0; w < self->workers; w++)
        n += self->said_hello[w];
    zt_msg_t r = { .type = ZT_MSG_AR_READY };
    r.u.AR_READY.buckets = self->layout.nbuckets;
    if (self->ready_sent) { /* a late or restarted worker */
        r.u.AR_READY.req = m->u.AR_HELLO.req;
        s_send(self, rank, &r, NULL, 0);
    }
    else if (n == self->workers) {
        self->ready_sent = true;
        zt_shm_destroy(&self->old_shm); /* every worker is past the earlier group's last round */
        for (int w = 0; w < self->workers; w++) {
            r.u.AR_READY.req = self->hello_req[w];
            s_send(self, w, &r, NULL, 0);
        }
    }
}

/* A generation that has waited PROBE_MS for workers that sent nothing of
 * it: those may be past it already, with its sum from this reducer's
 * predecessor (killed in mid-broadcast), and busy elsewhere (between rounds
 * a worker only tells it is there: AR_IDLE). Each is asked for its copy
 * (AR_RESEND); one that has it sends it, and the generation ends with it
 * for the others; one that is behind ignores the question and sends its
 * pieces when it comes. */
#define PROBE_MS 1000
static void s_probe_ahead(zt_reducer_t *self)
{
    int64_t now = zt_now_ms();
    for (int b = 0; self->buckets && b < self->layout.nbuckets; b++) {
        s_bucket_t *k = &self->buckets[b];
        if (!k->started_ms || k->gen < 0 || k->blocks_sent > 0 || now - k->started_ms < PROBE_MS ||
            now - k->probed_ms < PROBE_MS || (k->want_gen >= 0 && k->want_gen != k->gen))
            continue;
        k->probed_ms = now;
        for (int w = 0; w < self->workers; w++) {
            if (!self->have_id[w] || k->from[w].got > 0)
                continue;
            if (k->want_gen != k->gen) {
                while (atomic_load(&k->res_lent[k->gen & 1]) > 0) /* generation gen-2 still being sent */
                    zclock_sleep(0);
                k->want_gen = k->gen;
                k->want_got.n = 0;
                k->want_got.got = 0;
            }
            zt_debug("bucket %d (generation %lld): asking worker %d whether it has the sum already", b,
                     (long long) k->gen, w);
            zt_msg_t m = { .type = ZT_MSG_AR_RESEND };
            m.u.AR_RESEND = (zt_msg_AR_RESEND_t) { b, k->gen };
            s_send(self, w, &m, NULL, 0);
        }
    }
}

static void s_check_slow(zt_reducer_t *self)
{
    int64_t now = zt_now_ms();
    for (int b = 0; self->buckets && b < self->layout.nbuckets; b++) {
        s_bucket_t *k = &self->buckets[b];
        if (!k->started_ms || now - k->started_ms < self->warn_ms || now - k->warned_ms < self->warn_ms)
            continue;
        char who[1024] = "", one[300];
        for (int w = 0; w < self->workers; w++)
            if (k->from[w].got < k->hi - k->lo) {
                zt_env_describe_rank(w, one, sizeof one);
                snprintf(who + strlen(who), sizeof who - strlen(who), "%s%s (rank %d)", who[0] ? ", " : "", one, w);
            }
        zt_warn("bucket %d (generation %lld) has waited %lld ms for %s", b, (long long) k->gen,
                (long long) (now - k->started_ms), who);
        k->warned_ms = now;
    }
}

/* A message of another membership generation than the group's: an earlier
 * one's is dropped (counted: a worker that left, or a piece of the old group
 * still on its way); a later one's hello starts the new group, whose
 * workers' count and ranks may differ, from nothing. A reducer that holds
 * no layout (just started, or restarted) takes the group of whoever speaks
 * first, and asks for its hello as it would. True to handle it. */
static bool s_group_message(zt_reducer_t *self, const zt_msg_t *m)
{
    if (!self->configured && m->incarnation > self->group) {
        self->group = m->incarnation;
        return true;
    }
    if (m->incarnation < self->group || m->type != ZT_MSG_AR_HELLO) {
        zt_process_refused(&self->stale, self->opts.replica, "earlier_group_dropped",
                           "a message of another group (membership generation)");
        return false;
    }
    if (m->incarnation / ZT_AR_LAYOUTS == self->group / ZT_AR_LAYOUTS)
        zt_debug("layout %lld of the group (autotune; %lld workers, from worker %lld's hello): the earlier "
                "layout's state is dropped", (long long) (m->incarnation % ZT_AR_LAYOUTS),
                (long long) m->u.AR_HELLO.workers, (long long) m->index);
    else
        zt_info("membership generation %lld: a new group (%lld workers, from worker %lld's hello); the "
                "earlier group's state is dropped", (long long) (m->incarnation / ZT_AR_LAYOUTS),
                (long long) m->u.AR_HELLO.workers, (long long) m->index);
    zt_reducer_free_buckets_keep_sums(self);
    self->group = m->incarnation;
    self->configured = self->ready_sent = self->failed = false;
    self->failure[0] = 0;
    memset(self->said_hello, 0, sizeof self->said_hello);
    memset(self->local, 0, sizeof self->local);
    return true;
}

void zt_reducer_handle(zt_reducer_t *self, zmq_msg_t *parts, int n)
{
    zt_msg_t m;
    if (n < 2 || zt_msg_decode(zmq_msg_data(&parts[1]), zmq_msg_size(&parts[1]), &m, NULL) != ZT_OK ||
        m.index < 0 || m.index >= MAX_WORKERS) {
        zt_process_refused(&self->dropped, NULL, NULL, "a malformed message");
        return;
    }
    int rank = m.index;
    if (m.incarnation != self->group && !s_group_message(self, &m))
        return;
    if (!self->have_id[rank])
        zmq_msg_init(&self->ids[rank]);
    zmq_msg_copy(&self->ids[rank], &parts[0]);
    self->have_id[rank] = true;
    if (m.type == ZT_MSG_AR_HELLO)
        s_on_hello(self, rank, &m, n >= 3 ? &parts[2] : NULL);
    else if (m.type == ZT_MSG_AR_PIECE)
        s_on_piece(self, rank, &m, n >= 3 ? &parts[2] : NULL);
    else if (m.type == ZT_MSG_AR_RESULT)
        s_on_worker_result(self, &m, n >= 3 ? &parts[2] : NULL);
    else if (m.type == ZT_MSG_AR_RESEND && self->configured && m.u.AR_RESEND.bucket >= 0 &&
             m.u.AR_RESEND.bucket < self->layout.nbuckets &&
             self->buckets[m.u.AR_RESEND.bucket].result_gen == m.u.AR_RESEND.gen)
        s_send_result(self, (int) m.u.AR_RESEND.bucket, rank);
    else if (m.type == ZT_MSG_AR_IDLE) {
        /* between rounds: its address is known now (s_probe_ahead); over a
         * sealed stream it hears from us (a stream of a reducer that was
         * restarted hears nothing, and is opened again) */
        if (zt_bulk_server_sealed_to(self->srv, &parts[0])) {
            zt_msg_t back = { .type = ZT_MSG_AR_IDLE };
            back.u.AR_IDLE.rounds = m.u.AR_IDLE.rounds;
            s_send(self, rank, &back, NULL, 0);
        }
    }
    else
        zt_debug("ignored %s from worker %d", zt_msg_type_name(m.type), rank);
}

int zt_reducer_run(zt_reducer_t *self, bool (*should_stop)(void *), void *arg)
{
    while (!(should_stop && should_stop(arg))) {
        s_check_slow(self);
        s_probe_ahead(self);
        zt_process_refusals_flush(&self->nonfinite, self->opts.replica, "nonfinite_refused");
        zt_process_refusals_flush(&self->unsealed, self->opts.replica, "seal_refused");
        zt_process_refusals_flush(&self->stale, self->opts.replica, "earlier_group_dropped");
        zmq_pollitem_t items[2]; /* the router, and the TCP port served on this thread */
        if (zmq_poll(items, zt_bulk_server_items(self->srv, items), 100) <= 0)
            continue;
        zt_bulk_in_t in[16]; /* sealed ones opened together (ZT_REDUCER_THREADS) */
        for (int k = 0; k < 256;) {
            int got = zt_bulk_server_recv_many(self->srv, in, 16);
            if (got == 0)
                break;
            for (int i = 0; i < got; i++, k++) {
                if (in[i].n == ZT_EPROTO)
                    zt_process_refused(&self->unsealed, self->opts.replica, "seal_refused",
                                       ZT_PROCESS_UNSEALED);
                if (in[i].n <= 0)
                    continue;
                zt_reducer_handle(self, in[i].parts, in[i].n);
                zt_msg_close_parts(in[i].parts, in[i].n);
            }
        }
    }
    return ZT_OK;
}
