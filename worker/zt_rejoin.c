#include "zt_rejoin.h"
#include "allreduce/zt_arlayout.h"
#include "base/zt_env.h"
#include "runtime/zt_process.h"
#include "wire/zt_msg.h"
#include "wire/zt_bulk.h"
#include "wire/zt_transport.h"
#include "base/zt_util.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_log.h"
#include <czmq.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct zt_rejoin_t {
    zt_bulk_server_t *srv;  /* sealed from another host's peers in a sealing job */
    zt_refusals_t refused;  /* what came over TCP not sealed under the job's keys */
    char endpoint[256];
};

static char *s_endpoint(const char *addr)
{
    return strstr(addr, "://") ? strdup(addr) : zt_strdupf("tcp://%s", addr);
}

zt_rejoin_t *zt_rejoin_serve(const char *endpoint)
{
    char *ep = s_endpoint(endpoint);
    /* as a reducer's: a bulk socket in a job that seals its bulk data */
    zt_bulk_server_t *s = zt_bulk_bind(ZT_PLANE_DATA, ep, NULL);
    if (!s) {
        zt_warn("cannot serve the model to a restarted peer on %s (%s): a peer that restarts asks another",
                ep, zmq_strerror(zmq_errno()));
        free(ep);
        return NULL;
    }
    zt_rejoin_t *self = calloc(1, sizeof *self);
    self->srv = s;
    snprintf(self->endpoint, sizeof self->endpoint, "%s", ep);
    free(ep);
    return self;
}

void zt_rejoin_destroy(zt_rejoin_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zt_bulk_server_destroy(&(*self_p)->srv);
    free(*self_p);
    *self_p = NULL;
}

void *zt_rejoin_socket(zt_rejoin_t *self) { return self ? zt_bulk_server_socket(self->srv) : NULL; }

/* One REJOIN_STATE header; count 0 with no payload is a refusal. Sealed
 * (straight from the model) on the stream of a peer that has one. */
static int s_send_part(zt_rejoin_t *self, zmq_msg_t *id, int64_t req, const zt_rejoin_state_t *st, int a,
                       int64_t offset, int64_t count)
{
    zt_msg_t m = { .type = ZT_MSG_REJOIN_STATE };
    m.u.REJOIN_STATE = (zt_msg_REJOIN_STATE_t) { req, st->step, st->gen, st->total, st->arrays, a, offset, count,
                                                 st->group, st->layout, st->threshold, st->cycle_ms, st->searching };
    return zt_bulk_reply(self->srv, id, &m, count > 0 ? st->data[a] + offset : NULL,
                         count > 0 ? (size_t) count * sizeof(float) : 0, NULL);
}

void zt_rejoin_answer(zt_rejoin_t *self, int (*get)(void *arg, zt_rejoin_state_t *state), void *arg)
{
    if (!self)
        return;
    zt_rejoin_state_t st;
    bool have = false;
    int64_t per = zt_frame_bytes() / (int64_t) sizeof(float);
    for (int k = 0; k < 16; k++) {
        zmq_msg_t parts[4]; /* id, header, seal, payload */
        int n = zt_bulk_server_recv(self->srv, parts, 4);
        if (n == ZT_ETIMEDOUT)
            break;
        if (n == ZT_EPROTO)
            zt_process_refused(&self->refused, NULL, "seal_refused", ZT_PROCESS_UNSEALED);
        if (n <= 0)
            continue; /* a stream's opening answered, or dropped (counted) */
        zt_msg_t m;
        if (n != 2 || zt_msg_decode(zmq_msg_data(&parts[1]), zmq_msg_size(&parts[1]), &m, NULL) != ZT_OK ||
            m.type != ZT_MSG_REJOIN_ASK) {
            zt_warn("rejoin server: dropped a malformed request");
            zt_msg_close_parts(parts, n);
            continue;
        }
        if (!have && get(arg, &st) != 0) {
            zt_warn("rejoin server: the model cannot be read here; the restarted peer asks another");
            zt_msg_close_parts(parts, n);
            break;
        }
        have = true;
        const zt_msg_REJOIN_ASK_t *q = &m.u.REJOIN_ASK;
        if (q->group != st.group) { /* a joiner early (or late): it asks again */
            zt_info("a trainer of membership generation %lld asked for the model; this one is in %lld: asked again "
                    "later", (long long) q->group, (long long) st.group);
            s_send_part(self, &parts[0], q->req, &st, 0, 0, 0);
        }
        else if (q->total != st.total || q->arrays != st.arrays) {
            zt_warn("a restarted peer expects %lld elements in %lld arrays, this trainer holds %lld in %d: refused",
                    (long long) q->total, (long long) q->arrays, (long long) st.total, st.arrays);
            s_send_part(self, &parts[0], q->req, &st, 0, 0, 0);
        }
        else {
            int64_t t0 = zt_now_ms();
            int rc = ZT_OK;
            for (int a = 0; a < st.arrays && rc == ZT_OK; a++)
                for (int64_t at = 0; at < st.total && rc == ZT_OK; at += per)
                    rc = s_send_part(self, &parts[0], q->req, &st, a, at, st.total - at < per ? st.total - at : per);
            bool sealed = zt_bulk_server_sealed_to(self->srv, &parts[0]);
            zt_info("sent the model to a restarted peer: step %lld, round %lld, %.1f MB in %lld ms%s%s",
                    (long long) st.step, (long long) st.gen,
                    (double) st.total * st.arrays * sizeof(float) / 1e6, (long long) (zt_now_ms() - t0),
                    sealed ? ", sealed" : "", rc == ZT_OK ? "" : " (the send failed: it asks another)");
        }
        zt_msg_close_parts(parts, n);
    }
}

/* Where an answer's parts have come to: the array arriving (in order), its
 * next element, and whether none came yet. */
typedef struct {
    int a;
    int64_t next;
    bool first;
} s_progress_t;

/* A peer's answer: it is in another membership generation (an internal
 * code, never returned to callers). */
#define S_OTHER_GROUP 1

/* One received answer, parts [header][payload] (n of them), into state.
 * ZT_OK when the state is complete, ZT_ETIMEDOUT while parts are due (or
 * this was not an answer to req: skipped), S_OTHER_GROUP, ZT_EPROTO with why. */
static int s_take_part(zt_rejoin_state_t *state, int64_t req, zmq_msg_t *parts, int n, s_progress_t *at,
                       char *why, size_t why_size)
{
    zt_msg_t m;
    const zt_msg_REJOIN_STATE_t *p = &m.u.REJOIN_STATE;
    if (zt_msg_decode(zmq_msg_data(&parts[0]), zmq_msg_size(&parts[0]), &m, NULL) != ZT_OK ||
        m.type != ZT_MSG_REJOIN_STATE || p->req != req)
        return ZT_ETIMEDOUT; /* not ours (an earlier ask's late answer) */
    if (p->group != state->group) {
        snprintf(why, why_size, "it trains in membership generation %lld, not %lld yet", (long long) p->group,
                 (long long) state->group);
        return S_OTHER_GROUP;
    }
    if (p->total != state->total || p->arrays != state->arrays) {
        snprintf(why, why_size, "it holds %lld elements in %lld arrays, this trainer %lld in %d "
                 "(the same program and arguments on every trainer?)", (long long) p->total,
                 (long long) p->arrays, (long long) state->total, state->arrays);
        return ZT_EPROTO;
    }
    if (p->array != at->a || p->offset != at->next || p->count <= 0 || p->count > state->total - at->next ||
        n != 2 || zmq_msg_size(&parts[1]) != (size_t) p->count * sizeof(float) || p->step < 0 || p->gen < 0 ||
        (!at->first && (p->step != state->step || p->gen != state->gen))) {
        snprintf(why, why_size, "a malformed or out-of-order part (array %lld at %lld, %lld elements)",
                 (long long) p->array, (long long) p->offset, (long long) p->count);
        return ZT_EPROTO;
    }
    if (at->first && (p->layout < 0 || p->layout >= ZT_AR_LAYOUTS || p->threshold < 1 || p->cycle_ms < 0 ||
                      p->cycle_ms > 1000000)) {
        snprintf(why, why_size, "an all-reduce layout that cannot be (number %lld, threshold %lld bytes, cycle %lld ms)",
                 (long long) p->layout, (long long) p->threshold, (long long) p->cycle_ms);
        return ZT_EPROTO;
    }
    if (at->first) {
        state->layout = (int) p->layout;
        state->threshold = p->threshold;
        state->cycle_ms = (int) p->cycle_ms;
        state->searching = p->searching != 0;
    }
    state->step = p->step;
    state->gen = p->gen;
    at->first = false;
    memcpy(state->data[at->a] + at->next, zmq_msg_data(&parts[1]), (size_t) p->count * sizeof(float));
    at->next += p->count;
    if (at->next == state->total) {
        at->a++;
        at->next = 0;
    }
    return at->a == state->arrays ? ZT_OK : ZT_ETIMEDOUT;
}

/* One peer's answer into state. ZT_OK, ZT_ETIMEDOUT, ZT_ESHUTDOWN, or
 * ZT_EPROTO with why. */
static int s_fetch_one(const char *peer, int64_t req, int timeout_ms, zt_rejoin_state_t *state, char *why,
                       size_t why_size)
{
    /* another host's peer, in a job that seals its bulk data: on a sealed
     * stream, the ask sent once it is open */
    zt_bulk_t *way = zt_bulk_connect(ZT_PLANE_DATA, peer, false);
    if (!way) {
        snprintf(why, why_size, "cannot connect");
        return ZT_EIO;
    }
    zt_msg_t ask = { .type = ZT_MSG_REJOIN_ASK };
    ask.u.REJOIN_ASK = (zt_msg_REJOIN_ASK_t) { req, state->total, state->arrays, state->group };
    int rc = zt_bulk_wait_ready(way, timeout_ms);
    bool asked = rc == ZT_OK;
    if (asked) /* ZT_ETIMEDOUT: waiting for the answer */
        rc = zt_bulk_send(way, &ask, NULL, 0, NULL) == ZT_OK ? ZT_ETIMEDOUT : ZT_EIO;
    s_progress_t at = { 0, 0, true };
    int64_t deadline = zt_now_ms() + timeout_ms;
    while (asked && rc == ZT_ETIMEDOUT && zt_now_ms() < deadline) {
        if (zt_stop_requested()) {
            rc = ZT_ESHUTDOWN;
            break;
        }
        zmq_pollitem_t item = zt_bulk_item(way);
        if (zmq_poll(&item, 1, 100) <= 0)
            continue;
        zmq_msg_t parts[3]; /* header, seal, payload */
        int n;
        while (rc == ZT_ETIMEDOUT && (n = zt_bulk_recv(way, parts, 3)) > 0) {
            if (zt_bulk_open(way, parts, &n, NULL, 0) != ZT_OK || n == 0)
                continue; /* the stream's opening taken, or dropped (counted) */
            rc = s_take_part(state, req, parts, n, &at, why, why_size);
            zt_msg_close_parts(parts, n);
        }
    }
    if (rc == ZT_ETIMEDOUT)
        snprintf(why, why_size, "no complete answer within %d ms (ZT_REJOIN_TIMEOUT_MS)%s", timeout_ms,
                 asked ? "" : ": its sealed stream never opened");
    zt_bulk_destroy(&way, 0);
    return rc;
}

int zt_rejoin_fetch(const char *const *peers, int npeers, int self_rank, int timeout_ms, zt_rejoin_state_t *state,
                    char *why, size_t why_size)
{
    int64_t req = ((int64_t) getpid() << 20) ^ zt_now_ms(), until = zt_now_ms() + timeout_ms;
    char last[512] = "no other trainer in CLUSTER_SPEC";
    bool early = true; /* a peer was still in an earlier generation: the peers are asked again */
    for (int round = 0; early && (round == 0 || zt_now_ms() < until); round++) {
        if (round > 0)
            zclock_sleep(100);
        early = false;
        for (int i = 1; i < npeers; i++) {
            int p = (self_rank + i) % npeers;
            char who[300], err[400] = "";
            zt_env_describe_rank(p, who, sizeof who);
            int64_t t0 = zt_now_ms();
            int rc = s_fetch_one(peers[p], ++req, timeout_ms, state, err, sizeof err);
            snprintf(last, sizeof last, "%s: %s", who, err);
            if (rc == S_OTHER_GROUP) {
                early = true;
                continue;
            }
            if (rc == ZT_OK) {
                zt_info("took the model from %s: step %lld, round %lld, %.1f MB in %lld ms", who,
                        (long long) state->step, (long long) state->gen,
                        (double) state->total * state->arrays * sizeof(float) / 1e6, (long long) (zt_now_ms() - t0));
                return ZT_OK;
            }
            if (rc == ZT_ESHUTDOWN) {
                snprintf(why, why_size, "stopping while asking %s for the model", who);
                return rc;
            }
            zt_warn("cannot take the model from %s: %s%s", who, err, i + 1 < npeers ? "; asking the next" : "");
        }
    }
    snprintf(why, why_size, "no live peer gave this restarted trainer the model (last: %s)", last);
    return ZT_ETIMEDOUT;
}
