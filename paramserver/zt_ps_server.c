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

/* The area of the worker with this identity (made on first use), or NULL. */
static zt_shm_region_t *s_area(zt_ps_server_t *self, zmq_msg_t *identity)
{
    size_t n = zmq_msg_size(identity);
    for (int i = 0; i < self->nareas; i++)
        if (self->areas[i].idlen == n && !memcmp(self->areas[i].id, zmq_msg_data(identity), n)) {
            self->areas[i].used = ++self->area_clock;
            return self->areas[i].region;
        }
    if (n > sizeof self->areas[0].id || self->hi <= self->lo)
        return NULL;
    /* A restarted worker comes back under a new identity: beyond one area per
     * worker and two spare, the least recently used goes (a worker still
     * alive just gets a new one at its next pull). */
    int keep = self->workers + 2 < MAX_AREAS ? self->workers + 2 : MAX_AREAS;
    while (self->nareas >= keep && self->nareas > 0) {
        int lru = 0;
        for (int i = 1; i < self->nareas; i++)
            if (self->areas[i].used < self->areas[lru].used)
                lru = i;
        zt_shm_destroy(&self->areas[lru].region);
        self->areas[lru] = self->areas[--self->nareas];
    }
    zt_shm_region_t *r = zt_shm_create("psv", (size_t) (self->hi - self->lo) * sizeof(float));
    if (!r)
        return NULL;
    s_area_t *a = &self->areas[self->nareas++];
    memcpy(a->id, zmq_msg_data(identity), n);
    a->idlen = n;
    a->region = r;
    a->used = ++self->area_clock;
    return r;
}

zt_ps_server_t *zt_ps_server_new(const zt_ps_server_opts_t *opts)
{
    zt_ps_server_t *self = calloc(1, sizeof *self);
    self->opts = *opts;
    if (!(self->srv = zt_bulk_bind_direct(ZT_PLANE_DATA, opts->bind, NULL, ZT_BULK_DIRECT_ON)) || zt_bulk_server_pool_copies(self->srv)) {
        zt_bulk_server_destroy(&self->srv);
        free(self);
        return NULL;
    }
    self->allow_nonfinite = zt_knob_int(ZT_KNOB_ALLOW_NONFINITE) != 0;
    self->deferred = calloc(MAX_DEFERRED, sizeof *self->deferred);
    zt_ps_restore(self);
    zt_ps_snapshot_restore(self);
    return self;
}

void zt_ps_server_destroy(zt_ps_server_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zt_ps_server_t *self = *self_p;
    for (int i = 0; i < self->ndeferred; i++)
        zmq_msg_close(&self->deferred[i].identity);
    free(self->deferred);
    zt_bulk_server_destroy(&self->srv);
    zt_ps_free_state(self);
    free(self->scratch);
    free(self);
    *self_p = NULL;
}

int64_t zt_ps_server_restored_step(zt_ps_server_t *self) { return self->restored_step; }

/* A reply's sender fields. */
static void s_stamp(zt_ps_server_t *self, zt_msg_t *m)
{
    m->seq = self->seq++;
    m->pool = 2;
    m->index = self->opts.index;
}

/* Sends [identity][header][payload frames...], sealed to a client of
 * another host. */
static void s_reply(zt_ps_server_t *self, zmq_msg_t *identity, zt_msg_t *m, zmq_msg_t *payload,
                    int npayload)
{
    s_stamp(self, m);
    zt_bulk_reply_frames(self->srv, identity, m, payload, npayload);
}

static void s_error(zt_ps_server_t *self, zmq_msg_t *id, int64_t req, int code, const char *text)
{
    zt_msg_t m = { .type = ZT_MSG_PS_ERROR };
    m.u.PS_ERROR.req = req;
    m.u.PS_ERROR.code = code;
    zt_msg_set_str(m.u.PS_ERROR.text, text);
    s_reply(self, id, &m, NULL, 0);
}

/* [off, off + count) inside this shard, without overflow for any inputs
 * (they come from the network). */
static bool s_range_ok(zt_ps_server_t *self, int64_t off, int64_t count)
{
    return off >= self->lo && off <= self->hi && count >= 0 && count <= self->hi - off;
}

static int64_t s_min_progress(zt_ps_server_t *self)
{
    int64_t m = INT64_MAX;
    for (int w = 0; w < self->workers; w++)
        if (self->progress[w] < m)
            m = self->progress[w];
    return m;
}

/* Whether a pull for `step` from worker `rank` may be answered now. */
static bool s_pull_ready(zt_ps_server_t *self, const zt_msg_t *m)
{
    int64_t step = m->u.PS_PULL.step;
    if (self->sync)
        return self->version >= step;
    int64_t behind;
    if (self->max_staleness >= 0) /* no overflow for any step from the network */
        return !__builtin_sub_overflow(step, s_min_progress(self), &behind) && behind <= self->max_staleness;
    return true;
}

static void s_answer_pull(zt_ps_server_t *self, zmq_msg_t *id, const zt_msg_t *q)
{
    int64_t off = q->u.PS_PULL.offset, count = q->u.PS_PULL.count;
    zt_msg_t m = { .type = ZT_MSG_PS_VALUES };
    m.u.PS_VALUES = (zt_msg_PS_VALUES_t) { .req = q->u.PS_PULL.req, .offset = off, .count = count,
                                           .version = self->version };
    zt_shm_region_t *area = q->u.PS_PULL.shm_ok ? s_area(self, id) : NULL;
    if (area) {
        memcpy(area->base + (off - self->lo) * (int64_t) sizeof(float), self->values + (off - self->lo),
               (size_t) count * sizeof(float));
        zt_msg_set_str(m.u.PS_VALUES.shm, area->name);
        m.u.PS_VALUES.shm_off = (off - self->lo) * (int64_t) sizeof(float);
        s_reply(self, id, &m, NULL, 0);
        return;
    }
    /* from the values into the send buffer (the one pass): sealed, or a
     * copy (the values move on) */
    s_stamp(self, &m);
    zt_bulk_reply(self->srv, id, &m, self->values + (off - self->lo), (size_t) count * sizeof(float), NULL);
}

static void s_retry_deferred(zt_ps_server_t *self)
{
    for (int i = 0; i < self->ndeferred;) {
        s_deferred_t *d = &self->deferred[i];
        if (s_pull_ready(self, &d->msg)) {
            s_answer_pull(self, &d->identity, &d->msg);
            zmq_msg_close(&d->identity);
            *d = self->deferred[--self->ndeferred];
        }
        else
            i++;
    }
}

/* PS_CONFIG: the first worker's config configures the server; later ones
 * must match it. */
static void s_on_config(zt_ps_server_t *self, zmq_msg_t *id, const zt_msg_t *m, zmq_msg_t *payload)
{
    char text[1 << 16];
    size_t len = payload ? zmq_msg_size(payload) : 0;
    if (len == 0 || len >= sizeof text) {
        s_error(self, id, m->u.PS_CONFIG.req, ZT_PS_BAD_PAYLOAD, "config missing or too long");
        return;
    }
    memcpy(text, zmq_msg_data(payload), len);
    text[len] = 0;
    bool same = self->configured && self->hash == m->u.PS_CONFIG.hash && !strcmp(text, self->config_text);
    if (self->configured && !same) {
        char diff[400], why[512];
        json_t *mine = json_loads(text, 0, NULL), *held = json_loads(self->config_text, 0, NULL);
        if (!zt_json_diff(mine, held, diff, sizeof diff))
            snprintf(diff, sizeof diff, "same fields, different hash");
        snprintf(why, sizeof why, "model or optimizer differs from the server's: %s (this worker's vs "
                 "the server's)", diff);
        json_decref(mine);
        json_decref(held);
        zt_warn("refused a configuration: %s", why);
        s_error(self, id, m->u.PS_CONFIG.req, ZT_PS_CONFIG_MISMATCH, why);
        return;
    }
    if (!self->configured) {
        char err[256];
        if (zt_ps_configure(self, text, true, err, sizeof err) != ZT_OK) {
            s_error(self, id, m->u.PS_CONFIG.req, ZT_PS_BAD_PAYLOAD, err);
            return;
        }
        zt_info("configured: elements [%lld, %lld) of %lld, %s lr %g%s", (long long) self->lo,
                (long long) self->hi, (long long) self->total, zt_opt_kind_name(self->opt.kind), self->opt.lr,
                self->sync ? ", sync" : "");
    }
    zt_msg_t a = { .type = ZT_MSG_PS_ACK };
    a.u.PS_ACK = (zt_msg_PS_ACK_t) { m->u.PS_CONFIG.req, self->version };
    s_reply(self, id, &a, NULL, 0);
}

/* PS_PULL: answered now, or deferred until the staleness bound allows. */
static void s_on_pull(zt_ps_server_t *self, zmq_msg_t *id, const zt_msg_t *m)
{
    if (!self->configured)
        s_error(self, id, m->u.PS_PULL.req, ZT_PS_NOT_CONFIGURED, "not configured");
    else if (!s_range_ok(self, m->u.PS_PULL.offset, m->u.PS_PULL.count))
        s_error(self, id, m->u.PS_PULL.req, ZT_PS_BAD_RANGE, "range outside this shard");
    else if (s_pull_ready(self, m))
        s_answer_pull(self, id, m);
    else if (self->ndeferred < MAX_DEFERRED) {
        s_deferred_t *d = &self->deferred[self->ndeferred++];
        zmq_msg_init(&d->identity);
        zmq_msg_copy(&d->identity, id);
        d->msg = *m;
    }
}

/* A push's gradients, aligned: ZeroMQ may hand over a frame at any offset
 * of its receive buffer, so a misaligned one is copied to scratch (reused,
 * not per message). NULL with the reason in why. */
static const float *s_push_grads(zt_ps_server_t *self, const zt_msg_t *m, zmq_msg_t *payload, char *why,
                                 size_t whylen)
{
    int64_t count = m->u.PS_PUSH.count;
    const float *g = zt_shm_payload(m->u.PS_PUSH.shm, m->u.PS_PUSH.shm_off, count * (int64_t) sizeof(float),
                                    payload ? zmq_msg_data(payload) : NULL, payload ? zmq_msg_size(payload) : 0,
                                    why, whylen);
    if (!g || (uintptr_t) g % _Alignof(float) == 0)
        return g;
    size_t bytes = (size_t) count * sizeof(float);
    if (bytes > self->scratch_cap) {
        free(self->scratch);
        self->scratch = malloc(bytes);
        self->scratch_cap = self->scratch ? bytes : 0;
    }
    if (!self->scratch) {
        snprintf(why, whylen, "out of memory");
        return NULL;
    }
    memcpy(self->scratch, g, bytes);
    return self->scratch;
}

/* Applies gradients for [off, off+count): at once (async), or averaged
 * once every worker has pushed the whole shard (sync). */
static void s_apply_push(zt_ps_server_t *self, int64_t off, int64_t count, const float *g)
{
    int64_t rel = off - self->lo, n = self->hi - self->lo;
    if (!self->sync) {
        float *st[ZT_OPT_MAX_STATE];
        for (int a = 0; a < ZT_OPT_MAX_STATE; a++)
            st[a] = self->state[a] ? self->state[a] + rel : NULL;
        zt_opt_apply(&self->opt, self->values + rel, st, g, 1.0f, count);
        self->version++;
        return;
    }
    float *acc = self->accum + rel;
    for (int64_t i = 0; i < count; i++)
        acc[i] += g[i];
    self->pushed += count;
    if (self->pushed >= (int64_t) self->workers * n) {
        zt_opt_apply(&self->opt, self->values, self->state, self->accum, 1.0f / self->workers, n);
        memset(self->accum, 0, (size_t) n * sizeof(float));
        self->pushed = 0;
        self->version++;
    }
}

static void s_on_push(zt_ps_server_t *self, zmq_msg_t *id, const zt_msg_t *m, zmq_msg_t *payload)
{
    int64_t off = m->u.PS_PUSH.offset, count = m->u.PS_PUSH.count;
    if (!self->configured) {
        s_error(self, id, m->u.PS_PUSH.req, ZT_PS_NOT_CONFIGURED, "not configured");
        return;
    }
    if (!s_range_ok(self, off, count)) {
        s_error(self, id, m->u.PS_PUSH.req, ZT_PS_BAD_RANGE, "range outside this shard");
        return;
    }
    char why[300];
    const float *g = s_push_grads(self, m, payload, why, sizeof why);
    if (!g) {
        s_error(self, id, m->u.PS_PUSH.req, ZT_PS_BAD_PAYLOAD, why);
        return;
    }
    if (!self->allow_nonfinite && !zt_all_finite(g, count, ZT_F32)) { /* nothing of it is applied */
        char what[160];
        snprintf(what, sizeof what, "a push of non-finite gradients (NaN or infinity) to [%lld, +%lld) from a "
                 "sender claiming worker %d", (long long) off, (long long) count, m->index);
        zt_process_refused(&self->nonfinite, self->opts.replica, "nonfinite_refused", what);
        s_error(self, id, m->u.PS_PUSH.req, ZT_PS_BAD_PAYLOAD, "non-finite gradients (NaN or infinity) refused; "
                "the step is not applied (ZT_ALLOW_NONFINITE=1 takes them)");
        return;
    }
    int rank = m->index >= 0 && m->index < MAX_WORKERS ? m->index : 0;
    int64_t step = m->u.PS_PUSH.step;
    if (step >= 0 && step < INT64_MAX && self->progress[rank] < step + 1) /* steps come from the network */
        self->progress[rank] = step + 1;
    s_apply_push(self, off, count, g);
    zt_msg_t a = { .type = ZT_MSG_PS_ACK };
    a.u.PS_ACK = (zt_msg_PS_ACK_t) { m->u.PS_PUSH.req, self->version };
    s_reply(self, id, &a, NULL, 0);
    if (self->ndeferred)
        s_retry_deferred(self);
}

/* PS_SNAPSHOT: the shard's values and optimizer state, one frame each. */
static void s_on_snapshot(zt_ps_server_t *self, zmq_msg_t *id, const zt_msg_t *m)
{
    if (!self->configured) {
        s_error(self, id, m->u.PS_SNAPSHOT.req, ZT_PS_NOT_CONFIGURED, "not configured");
        return;
    }
    int arrays = 1 + zt_opt_state_arrays(self->opt.kind);
    size_t bytes = (size_t) (self->hi - self->lo) * sizeof(float);
    zmq_msg_t payload[1 + ZT_OPT_MAX_STATE];
    for (int a = 0; a < arrays; a++) {
        zmq_msg_init_size(&payload[a], bytes);
        memcpy(zmq_msg_data(&payload[a]), a == 0 ? self->values : self->state[a - 1], bytes);
    }
    zt_msg_t r = { .type = ZT_MSG_PS_SHARD };
    r.u.PS_SHARD = (zt_msg_PS_SHARD_t) { m->u.PS_SNAPSHOT.req, self->lo, self->hi - self->lo, self->version,
                                         arrays };
    s_reply(self, id, &r, payload, arrays);
}

/* One request: [identity, header, payload?]. Garbage is counted and dropped. */
void zt_ps_server_handle(zt_ps_server_t *self, zmq_msg_t *parts, int n)
{
    zt_msg_t m;
    if (n < 2 || zt_msg_decode(zmq_msg_data(&parts[1]), zmq_msg_size(&parts[1]), &m, NULL) != ZT_OK) {
        self->drops++;
        zt_process_refused(&self->dropped, NULL, NULL, "a malformed request");
        return;
    }
    zmq_msg_t *id = &parts[0], *payload = n >= 3 ? &parts[2] : NULL;
    switch (m.type) {
    case ZT_MSG_PS_CONFIG:
        s_on_config(self, id, &m, payload);
        break;
    case ZT_MSG_PS_PULL:
        s_on_pull(self, id, &m);
        break;
    case ZT_MSG_PS_PUSH:
        s_on_push(self, id, &m, payload);
        break;
    case ZT_MSG_PS_SNAPSHOT:
        s_on_snapshot(self, id, &m);
        break;
    default:
        self->drops++;
        zt_process_refused(&self->dropped, NULL, NULL, "a message that is not a parameter-server request");
    }
}

int zt_ps_server_run(zt_ps_server_t *self, bool (*should_stop)(void *), void *arg)
{
    while (!(should_stop && should_stop(arg))) {
        if (self->version != self->snap_version && self->opts.snapshot_ms > 0 &&
            zt_now_ms() - self->snap_ms >= self->opts.snapshot_ms)
            zt_ps_snapshot_write(self);
        zt_process_refusals_flush(&self->nonfinite, self->opts.replica, "nonfinite_refused");
        zt_process_refusals_flush(&self->unsealed, self->opts.replica, "seal_refused");
        zmq_pollitem_t items[2]; /* the router, and the TCP port served on this thread */
        if (zmq_poll(items, zt_bulk_server_items(self->srv, items), 100) <= 0)
            continue;
        for (int k = 0; k < 256; k++) {
            zmq_msg_t parts[5];
            int n = zt_bulk_server_recv(self->srv, parts, 5);
            if (n == ZT_ETIMEDOUT)
                break;
            if (n == ZT_EPROTO)
                zt_process_refused(&self->unsealed, self->opts.replica, "seal_refused", ZT_PROCESS_UNSEALED);
            if (n <= 0)
                continue;
            zt_ps_server_handle(self, parts, n);
            zt_msg_close_parts(parts, n);
        }
    }
    /* stopped (a preemption, the job's end): the shard as it is now, for
     * the server that takes this one's place */
    if (self->version != self->snap_version && self->opts.snapshot_ms > 0)
        zt_ps_snapshot_write(self);
    return ZT_OK;
}
