/* The parameter-server client: one DEALER per server, requests split by
 * shard and into chunks, gradients sent zero-copy, replies matched by id. */
#include "base/zt_hist.h"
#include "base/zt_env.h"
#include "ztrain/zt_ps.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_knobs.h"
#include "ztrain/zt_log.h"
#include "wire/zt_msg.h"
#include "wire/zt_transport.h"
#include "wire/zt_bulk.h"
#include "state/zt_ckpt.h"
#include "state/zt_optim.h"
#include "base/zt_shard.h"
#include "wire/zt_spin.h"
#include "wire/zt_shm.h"
#include "base/zt_util.h"
#include <jansson.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* A request unanswered this long is sent again (lost to a restarting server). */
#define ZT_PS_RESEND_MS 1500

typedef struct {
    char *name;             /* tensor name */
    int64_t numel;          /* elements */
    int64_t offset;         /* in the flat key space */
    float scale;            /* initial values: uniform [-scale, scale]; 0 zeros */
} s_tensor_t;

typedef enum { OP_CONFIG, OP_PULL, OP_PUSH, OP_SNAPSHOT } s_kind_t;

typedef struct {
    int64_t req;            /* request id in flight */
    s_kind_t kind;          /* what it is */
    int server;             /* where it went */
    int64_t offset, count;  /* global range */
    float *dst;             /* pull: where values go */
    const float *src;       /* push: the gradients */
    int64_t step;           /* push/pull step */
    int64_t sent_ms;        /* last sent */
    zt_ps_shard_t *shard;   /* snapshot: where it goes */
    bool by_ref;            /* push: the gradients went to shared memory */
} s_op_t;

static int s_send(zt_ps_client_t *self, s_op_t *op);

struct zt_ps_client_t {
    int nservers;           /* parameter servers */
    char **addrs;           /* their host:port */
    zt_bulk_t **ways;       /* per server: the way to it (sealed to another host in a sealing job) */
    uint64_t seal_drops;    /* replies that did not open (counted, dropped) */
    s_tensor_t *tensors;    /* declared tensors */
    int ntensors, tcap;
    int64_t total;          /* elements over all tensors */
    int rank;               /* our worker rank */
    char *config;           /* JSON sent in PS_CONFIG */
    int64_t hash;           /* its hash */
    s_op_t *ops;            /* outstanding requests */
    int nops, opcap;
    int64_t next_req;       /* request ids */
    int64_t step;           /* the step pulls are for (sync, staleness) */
    int64_t chunk_elems;    /* largest payload frame, in floats (ZT_PS_CHUNK_BYTES) */
    uint64_t seq;           /* message sequence */
    atomic_int lent;        /* zero-copy frames not yet released by ZeroMQ */
    zt_spin_t spin;         /* busy-poll budget while waiting for replies */
    bool *local;            /* per server: on this host */
    zt_shm_region_t *shm;   /* pushes to local servers, at their key offsets */
    bool shm_refused;       /* a server could not map it: sockets only from then on */
    char err[768];          /* last error */
};

const char *zt_ps_optimizer(int index)
{
    return index >= 0 && index < ZT_OPT_COUNT ? zt_opt_kind_name((zt_opt_kind_t) index) : NULL;
}

void zt_ps_options_defaults(zt_ps_options_t *o)
{
    *o = (zt_ps_options_t) { "adam", 0.001f, 0.9f, 0.9f, 0.999f, 1e-7f, 1, 0, 1, -1 };
}

zt_ps_client_t *zt_ps_client_new(const char *const *servers, int nservers, int rank)
{
    char why[512];
    if (nservers < 1)
        return NULL;
    if (zt_knobs_check(why, sizeof why) != ZT_OK) {
        zt_error("parameter-server client: %s", why);
        return NULL;
    }
    zt_ps_client_t *self = calloc(1, sizeof *self);
    self->nservers = nservers;
    self->rank = rank;
    self->chunk_elems = zt_frame_bytes() / (int64_t) sizeof(float);
    zt_spin_init(&self->spin);
    self->addrs = calloc((size_t) nservers, sizeof *self->addrs);
    self->local = calloc((size_t) nservers, sizeof *self->local);
    self->ways = calloc((size_t) nservers, sizeof *self->ways);
    for (int s = 0; s < nservers; s++) {
        self->addrs[s] = strdup(servers[s]);
        self->local[s] = zt_data_is_local(servers[s]);
        /* the servers of a sealing job are bulk sockets (no CURVE): another
         * host's is reached through a sealed stream, this host's over the
         * user's private ipc folder, plain */
        if (!(self->ways[s] = zt_bulk_connect(ZT_PLANE_DATA, servers[s], true))) {
            zt_error("cannot connect to parameter server %d at %s", s, servers[s]);
            zt_ps_client_destroy(&self);
            return NULL;
        }
    }
    return self;
}

void zt_ps_client_destroy(zt_ps_client_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zt_ps_client_t *self = *self_p;
    for (int s = 0; s < self->nservers; s++) {
        if (self->ways)
            zt_bulk_destroy(&self->ways[s], 0);
        free(self->addrs[s]);
    }
    /* Destroying the sockets drops unsent frames, which releases them. */
    for (int w = 0; w < 2000 && atomic_load(&self->lent) > 0; w++)
        zclock_sleep(1);
    for (int t = 0; t < self->ntensors; t++)
        free(self->tensors[t].name);
    free(self->tensors);
    free(self->ways);
    free(self->addrs);
    free(self->config);
    free(self->ops);
    free(self->local);
    zt_shm_destroy(&self->shm);
    if (atomic_load(&self->lent) == 0) /* else a release still to come lowers the count in it */
        free(self);
    *self_p = NULL;
}

int zt_ps_declare(zt_ps_client_t *self, const char *name, int64_t numel, float scale)
{
    if (self->config || numel < 0)
        return ZT_EINVAL;
    if (self->ntensors == self->tcap) {
        self->tcap = self->tcap ? self->tcap * 2 : 8;
        self->tensors = realloc(self->tensors, (size_t) self->tcap * sizeof *self->tensors);
    }
    self->tensors[self->ntensors] = (s_tensor_t) { strdup(name), numel, self->total, scale };
    self->total += numel;
    return self->ntensors++;
}

int zt_ps_tensors(zt_ps_client_t *self) { return self->ntensors; }
const char *zt_ps_tensor_name(zt_ps_client_t *self, int t) { return self->tensors[t].name; }
int64_t zt_ps_tensor_numel(zt_ps_client_t *self, int t) { return self->tensors[t].numel; }
int64_t zt_ps_total(zt_ps_client_t *self) { return self->total; }
int zt_ps_servers(zt_ps_client_t *self) { return self->nservers; }
const char *zt_ps_config_json(zt_ps_client_t *self) { return self->config; }
const char *zt_ps_error(zt_ps_client_t *self) { return self->err; }


/* Whether another outstanding op of this kind, through shared memory,
 * covers any of op's range (its bytes there are still to be read). */
static bool s_shm_busy(zt_ps_client_t *self, const s_op_t *op)
{
    for (int i = 0; i < self->nops; i++) {
        const s_op_t *o = &self->ops[i];
        if (o != op && o->kind == op->kind && o->by_ref && o->req != -2 && o->offset < op->offset + op->count &&
            op->offset < o->offset + o->count)
            return true;
    }
    return false;
}

/* Sends one op (again, with a fresh id). */
static int s_send(zt_ps_client_t *self, s_op_t *op)
{
    zt_msg_t m = { .pool = 1, .index = self->rank, .seq = self->seq++ };
    op->req = ++self->next_req;
    op->sent_ms = zt_now_ms();
    const void *payload = NULL;
    size_t bytes = 0;
    switch (op->kind) {
    case OP_CONFIG:
        m.type = ZT_MSG_PS_CONFIG;
        m.u.PS_CONFIG = (zt_msg_PS_CONFIG_t) { op->req, self->total, self->hash };
        payload = self->config;
        bytes = strlen(self->config);
        break;
    case OP_PULL:
        /* the server's reply area for our range is ours until we read it */
        op->by_ref = self->shm && !self->shm_refused && self->local[op->server] && !s_shm_busy(self, op);
        m.type = ZT_MSG_PS_PULL;
        m.u.PS_PULL = (zt_msg_PS_PULL_t) { .req = op->req, .offset = op->offset, .count = op->count,
                                           .step = op->step, .shm_ok = op->by_ref };
        break;
    case OP_PUSH:
        m.type = ZT_MSG_PS_PUSH;
        m.u.PS_PUSH = (zt_msg_PS_PUSH_t) { .req = op->req, .offset = op->offset, .count = op->count,
                                           .step = op->step };
        if (self->shm && !self->shm_refused && self->local[op->server] && (op->by_ref || !s_shm_busy(self, op))) {
            /* one copy into shared memory that the server reads in place,
             * instead of the kernel's two (it acks once applied) */
            if (!op->by_ref)
                memcpy(self->shm->base + op->offset * (int64_t) sizeof(float), op->src,
                       (size_t) op->count * sizeof(float));
            op->by_ref = true;
            zt_msg_set_str(m.u.PS_PUSH.shm, self->shm->name);
            m.u.PS_PUSH.shm_off = op->offset * (int64_t) sizeof(float);
            break;
        }
        payload = op->src;
        bytes = (size_t) op->count * sizeof(float);
        break;
    case OP_SNAPSHOT:
        m.type = ZT_MSG_PS_SNAPSHOT;
        m.u.PS_SNAPSHOT = (zt_msg_PS_SNAPSHOT_t) { op->req, op->step };
        break;
    }
    zt_bulk_t *to = self->ways[op->server];
    if (!zt_bulk_ready(to))
        return ZT_OK; /* a sealed stream not open yet: sent once it is */
    /* a plain push is lent (the caller keeps grads until wait()), a sealed
     * one sealed from the caller's bytes */
    return zt_bulk_send(to, &m, payload, bytes, op->kind == OP_PUSH ? &self->lent : NULL);
}

static s_op_t *s_new_op(zt_ps_client_t *self)
{
    if (self->nops == self->opcap) {
        self->opcap = self->opcap ? self->opcap * 2 : 64;
        self->ops = realloc(self->ops, (size_t) self->opcap * sizeof *self->ops);
    }
    s_op_t *op = &self->ops[self->nops++];
    memset(op, 0, sizeof *op);
    return op;
}

static uint64_t s_fnv(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char) *s) * 1099511628211ull;
    return h;
}

int zt_ps_connect(zt_ps_client_t *self, const zt_ps_options_t *o, int timeout_ms)
{
    zt_opt_t opt;
    zt_opt_defaults(&opt);
    int kind = zt_opt_parse_kind(o->optimizer ? o->optimizer : "adam");
    if (kind < 0) {
        snprintf(self->err, sizeof self->err, "unknown optimizer '%s' (%s)", o->optimizer, zt_opt_names());
        return ZT_EINVAL;
    }
    opt.kind = (zt_opt_kind_t) kind;
    opt.lr = o->learning_rate;
    opt.momentum = o->momentum;
    opt.beta1 = o->beta1;
    opt.beta2 = o->beta2;
    opt.eps = o->epsilon;
    json_t *tensors = json_array();
    for (int t = 0; t < self->ntensors; t++)
        json_array_append_new(tensors, json_pack("{s:s, s:I, s:I, s:f}", "name",
                              self->tensors[t].name, "numel", (json_int_t) self->tensors[t].numel,
                              "offset", (json_int_t) self->tensors[t].offset, "scale",
                              (double) self->tensors[t].scale));
    json_t *cfg = json_pack("{s:I, s:I, s:o, s:b, s:i, s:i, s:i, s:o}",
                            "total", (json_int_t) self->total, "seed", (json_int_t) o->seed,
                            "optimizer", zt_opt_to_json(&opt), "sync", o->sync, "workers", o->workers, "max_staleness",
                            o->max_staleness, "servers", self->nservers, "tensors", tensors);
    free(self->config);
    self->config = json_dumps(cfg, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(cfg);
    self->hash = (int64_t) (s_fnv(self->config) >> 1);
    bool any_local = false;
    for (int s = 0; s < self->nservers; s++)
        any_local = any_local || self->local[s];
    if (any_local && !self->shm)
        self->shm = zt_shm_create("ps", (size_t) self->total * sizeof(float));
    for (int s = 0; s < self->nservers; s++) {
        s_op_t *op = s_new_op(self);
        op->kind = OP_CONFIG;
        op->server = s;
        if (s_send(self, op) != ZT_OK)
            return ZT_EIO;
    }
    return zt_ps_wait(self, timeout_ms);
}

/* Splits [offset, offset+count) of the key space by server and chunk. */
static int s_queue(zt_ps_client_t *self, s_kind_t kind, int tensor, int64_t off, int64_t count,
                   float *dst, const float *src, int64_t step)
{
    if (!self->config || tensor < 0 || tensor >= self->ntensors || off < 0 || count < 0 ||
        off + count > self->tensors[tensor].numel)
        return ZT_EINVAL;
    int64_t at = self->tensors[tensor].offset + off, end = at + count;
    const int64_t chunk = self->chunk_elems;
    while (at < end) {
        int s = zt_shard_owner(self->total, self->nservers, at);
        int64_t lo, hi;
        zt_shard_range(self->total, self->nservers, s, &lo, &hi);
        int64_t n = (hi < end ? hi : end) - at;
        if (n > chunk)
            n = chunk;
        s_op_t *op = s_new_op(self);
        op->kind = kind;
        op->server = s;
        op->offset = at;
        op->count = n;
        op->step = step;
        int64_t rel = at - self->tensors[tensor].offset - off;
        op->dst = dst ? dst + rel : NULL;
        op->src = src ? src + rel : NULL;
        int rc = s_send(self, op);
        if (rc != ZT_OK)
            return rc;
        at += n;
    }
    return ZT_OK;
}

void zt_ps_set_step(zt_ps_client_t *self, int64_t step)
{
    self->step = step;
}

int zt_ps_pull(zt_ps_client_t *self, int t, float *dst)
{
    return t >= 0 && t < self->ntensors ? s_queue(self, OP_PULL, t, 0, self->tensors[t].numel, dst, NULL, self->step)
                                        : ZT_EINVAL;
}

int zt_ps_pull_range(zt_ps_client_t *self, int t, int64_t off, int64_t count, float *dst)
{
    return s_queue(self, OP_PULL, t, off, count, dst, NULL, self->step);
}

int zt_ps_push(zt_ps_client_t *self, int t, const float *grads, int64_t step)
{
    return t >= 0 && t < self->ntensors
               ? s_queue(self, OP_PUSH, t, 0, self->tensors[t].numel, NULL, grads, step) : ZT_EINVAL;
}

int zt_ps_push_range(zt_ps_client_t *self, int t, int64_t off, int64_t count, const float *grads,
                     int64_t step)
{
    return s_queue(self, OP_PUSH, t, off, count, NULL, grads, step);
}

static int s_find(zt_ps_client_t *self, int64_t req)
{
    for (int i = 0; i < self->nops; i++)
        if (self->ops[i].req == req)
            return i;
    return -1;
}

static void s_remove(zt_ps_client_t *self, int i)
{
    self->ops[i] = self->ops[--self->nops];
}

/* PS_ERROR for op i: a server that lost its state is configured again and
 * the op resent; a refused shared-memory push goes over the socket; any
 * other error fails the op (wait() reports it). */
static void s_on_error(zt_ps_client_t *self, int server, int i, const zt_msg_PS_ERROR_t *e)
{
    s_op_t *op = &self->ops[i];
    if (e->code == ZT_PS_NOT_CONFIGURED) {
        zt_info("parameter server %d (%s) lost its state: configuring it again", server, self->addrs[server]);
        s_op_t *c = s_new_op(self);
        op = &self->ops[i]; /* may have moved */
        c->kind = OP_CONFIG;
        c->server = server;
        s_send(self, c);
        s_send(self, op);
        return;
    }
    if (e->code == ZT_PS_BAD_PAYLOAD && op->kind == OP_PUSH && op->by_ref) {
        zt_warn("parameter server %d (%s): %s; sending over the socket from now on", server,
                self->addrs[server], e->text);
        self->shm_refused = true;
        op->by_ref = false;
        s_send(self, op);
        return;
    }
    snprintf(self->err, sizeof self->err, "parameter server %d (%s): %s", server, self->addrs[server], e->text);
    op->req = -2;
}

/* PS_VALUES for a pull: copied into the caller's buffer. false when the
 * pull was sent again instead. */
static bool s_on_values(zt_ps_client_t *self, int server, s_op_t *op, const zt_msg_PS_VALUES_t *v,
                        zmq_msg_t *parts, int nparts)
{
    size_t want = (size_t) op->count * sizeof(float);
    char why[300];
    const char *shm = op->by_ref ? v->shm : ""; /* only where we asked for it */
    const void *src = zt_shm_payload(shm, v->shm_off, (int64_t) want, nparts >= 2 ? zmq_msg_data(&parts[1]) : NULL,
                                     nparts >= 2 ? zmq_msg_size(&parts[1]) : 0, why, sizeof why);
    if (!src && shm[0]) {
        zt_warn("parameter server %d: %s; asking for the values over the socket", server, why);
        op->by_ref = false;
        self->shm_refused = true;
    }
    if (!src || v->offset != op->offset) {
        zt_warn("parameter server %d sent a malformed reply; asking again", server);
        s_send(self, op);
        return false;
    }
    if (src != op->dst) /* not opened there already */
        memcpy(op->dst, src, want);
    return true;
}

/* PS_SHARD for a snapshot: one frame per array. false (op failed) when malformed. */
static bool s_on_shard(zt_ps_client_t *self, int server, s_op_t *op, const zt_msg_PS_SHARD_t *m,
                       zmq_msg_t *parts, int nparts)
{
    zt_ps_shard_t *sh = op->shard;
    int arrays = (int) m->arrays;
    size_t want = (size_t) m->count * sizeof(float);
    if (arrays < 1 || arrays > 4 || nparts < 1 + arrays) {
        snprintf(self->err, sizeof self->err, "parameter server %d sent a malformed snapshot", server);
        op->req = -2;
        return false;
    }
    sh->offset = m->offset;
    sh->count = m->count;
    sh->version = m->version;
    sh->arrays = arrays;
    for (int a = 0; a < arrays; a++) {
        if (zmq_msg_size(&parts[1 + a]) != want) {
            snprintf(self->err, sizeof self->err, "parameter server %d: snapshot size mismatch", server);
            op->req = -2;
            return false;
        }
        sh->data[a] = malloc(want ? want : 1);
        memcpy(sh->data[a], zmq_msg_data(&parts[1 + a]), want);
    }
    return true;
}

/* One reply from a server: matched to its op by request id; the op is done
 * unless it had to be sent again or failed. */
static void s_on_reply(zt_ps_client_t *self, int server, zmq_msg_t *parts, int nparts)
{
    zt_msg_t m;
    if (nparts < 1 || zt_msg_decode(zmq_msg_data(&parts[0]), zmq_msg_size(&parts[0]), &m, NULL) != ZT_OK) {
        zt_warn("dropped a malformed reply from parameter server %d", server);
        return;
    }
    int64_t req = m.type == ZT_MSG_PS_VALUES ? m.u.PS_VALUES.req : m.type == ZT_MSG_PS_ACK ? m.u.PS_ACK.req
                  : m.type == ZT_MSG_PS_ERROR ? m.u.PS_ERROR.req : m.type == ZT_MSG_PS_SHARD
                  ? m.u.PS_SHARD.req : -1;
    int i = s_find(self, req);
    if (i < 0 || self->ops[i].server != server)
        return; /* a late answer to a request already sent again */
    s_op_t *op = &self->ops[i];
    bool done;
    if (m.type == ZT_MSG_PS_ERROR) {
        s_on_error(self, server, i, &m.u.PS_ERROR);
        return;
    }
    if (m.type == ZT_MSG_PS_VALUES && op->kind == OP_PULL)
        done = s_on_values(self, server, op, &m.u.PS_VALUES, parts, nparts);
    else if (m.type == ZT_MSG_PS_SHARD && op->kind == OP_SNAPSHOT)
        done = s_on_shard(self, server, op, &m.u.PS_SHARD, parts, nparts);
    else if (m.type == ZT_MSG_PS_ACK)
        done = true;
    else {
        zt_warn("unexpected %s from parameter server %d", zt_msg_type_name(m.type), server);
        return;
    }
    if (done)
        s_remove(self, i);
}

/* A reply of server s's sealed stream opened in place (false: nothing to
 * hand on: the stream's opening, or a reply that did not open, counted).
 * When the stream has just opened (the first time, or again after the
 * server restarted), every request for that server goes out now. */
/* Where the payload (size bytes) of server s's message with header hdr
 * goes: a pull's values straight into the caller's buffer, which a reply
 * that does not open leaves to the next one (the pull is still waiting);
 * NULL: anywhere. */
static void *s_pull_place(zt_ps_client_t *self, int s, const zmq_msg_t *hdr, size_t size)
{
    zt_msg_t m;
    int at;
    zmq_msg_t *h = (zmq_msg_t *) hdr;
    if (zt_msg_decode(zmq_msg_data(h), zmq_msg_size(h), &m, NULL) != ZT_OK || m.type != ZT_MSG_PS_VALUES ||
        (at = s_find(self, m.u.PS_VALUES.req)) < 0 || self->ops[at].server != s || self->ops[at].kind != OP_PULL ||
        m.u.PS_VALUES.offset != self->ops[at].offset || m.u.PS_VALUES.count != self->ops[at].count ||
        m.u.PS_VALUES.shm[0] || size != (size_t) self->ops[at].count * sizeof(float))
        return NULL;
    return self->ops[at].dst;
}

/* Every request to server s outstanding, again (its way opened again). */
static void s_resend_to(zt_ps_client_t *self, int s)
{
    for (int i = 0; i < self->nops; i++)
        if (self->ops[i].server == s)
            s_send(self, &self->ops[i]);
}

static bool s_unseal(zt_ps_client_t *self, int s, zmq_msg_t *parts, int *np)
{
    bool was = zt_bulk_ready(self->ways[s]);
    void *into = *np == 3 ? s_pull_place(self, s, &parts[0], zmq_msg_size(&parts[2])) : NULL;
    size_t into_len = into ? zmq_msg_size(&parts[2]) : 0;
    if (zt_bulk_open(self->ways[s], parts, np, into, into_len) != ZT_OK) {
        if (self->seal_drops++ % 100 == 0)
            zt_warn("parameter server %d (%s): a reply that is not sealed under this job's keys was dropped (%llu "
                    "so far)", s, self->addrs[s], (unsigned long long) self->seal_drops);
        return false;
    }
    if (!was && zt_bulk_ready(self->ways[s]))
        s_resend_to(self, s);
    return *np > 0;
}

int zt_ps_wait(zt_ps_client_t *self, int timeout_ms)
{
    int64_t deadline = zt_now_ms() + timeout_ms, t0 = zt_now_us();
    bool timed = self->nops > 0; /* a round to time: requests outstanding */
    zmq_pollitem_t items[64];
    int n = self->nservers < 64 ? self->nservers : 64;
    for (int s = 0; s < n; s++)
        items[s] = zt_bulk_item(self->ways[s]);
    while (self->nops > 0 || atomic_load(&self->lent) > 0) {
        for (int i = 0; i < self->nops; i++)
            if (self->ops[i].req == -2) {
                self->nops = 0;
                return ZT_EIO;
            }
        if (self->nops > 0 && zt_stop_requested()) {
            snprintf(self->err, sizeof self->err, "stopping: %d parameter-server requests left unanswered",
                     self->nops);
            self->nops = 0;
            return ZT_ESHUTDOWN;
        }
        int64_t now = zt_now_ms();
        if (now >= deadline) {
            int s = self->nops > 0 ? self->ops[0].server : 0;
            char who[300];
            zt_env_describe_addr(self->addrs[s], who, sizeof who);
            snprintf(self->err, sizeof self->err, "parameter server %d (%s) did not answer within "
                     "%d ms (ZT_PS_TIMEOUT_MS; %d requests outstanding)%s", s, who, timeout_ms, self->nops,
                     zt_bulk_unopened(self->ways[s]));
            self->nops = 0;
            zt_fail_retryable(); /* a server gone: the system's failure, not the program's */
            return ZT_ETIMEDOUT;
        }
        if (self->nops == 0) { /* only zero-copy frames still being sent */
            zclock_sleep(0);
            continue;
        }
        for (int s = 0; s < self->nservers; s++) /* write what waits, reconnect, poll for room */
            if (zt_bulk_tend(self->ways[s], s < n ? &items[s] : NULL))
                s_resend_to(self, s); /* connected again after a loss */
        int rc = zt_spin_poll(&self->spin, items, n, 50);
        if (rc < 0)
            continue;
        for (int s = 0; s < n; s++) {
            if (!(items[s].revents & ZMQ_POLLIN))
                continue;
            for (int k = 0; k < 1024; k++) {
                zmq_msg_t parts[8];
                int np = zt_bulk_recv(self->ways[s], parts, 8);
                if (np == 0)
                    break;
                if (zt_bulk_sealed(self->ways[s]) && !s_unseal(self, s, parts, &np))
                    continue;
                s_on_reply(self, s, parts, np);
                zt_msg_close_parts(parts, np);
            }
        }
        now = zt_now_ms();
        for (int s = 0; s < self->nservers; s++) /* an opening lost: its ops go once it is open */
            zt_bulk_revive(self->ways[s], ZT_PS_RESEND_MS, 0);
        for (int i = 0; i < self->nops; i++)
            if (self->ops[i].req > 0 && now - self->ops[i].sent_ms > ZT_PS_RESEND_MS) {
                /* a server that restarted drops what it holds no stream of: silent, it gets a new opening */
                zt_bulk_revive(self->ways[self->ops[i].server], 0, 3 * ZT_PS_RESEND_MS);
                zt_debug("re-sending a request to parameter server %d", self->ops[i].server);
                s_send(self, &self->ops[i]);
            }
    }
    if (timed)
        zt_hist_observe(ZT_HIST_PS, (double) (zt_now_us() - t0) / 1e6);
    return ZT_OK;
}

int zt_ps_snapshot(zt_ps_client_t *self, zt_ps_shard_t *shards, int timeout_ms)
{
    memset(shards, 0, sizeof *shards * (size_t) self->nservers);
    for (int s = 0; s < self->nservers; s++) {
        s_op_t *op = s_new_op(self);
        op->kind = OP_SNAPSHOT;
        op->server = s;
        op->shard = &shards[s];
        if (s_send(self, op) != ZT_OK)
            return ZT_EIO;
    }
    int rc = zt_ps_wait(self, timeout_ms);
    if (rc != ZT_OK)
        zt_ps_shards_free(shards, self->nservers);
    return rc;
}

void zt_ps_shards_free(zt_ps_shard_t *shards, int n)
{
    for (int s = 0; s < n; s++)
        for (int a = 0; a < 4; a++) {
            free(shards[s].data[a]);
            shards[s].data[a] = NULL;
        }
}

/* ------------------------------------------------------------ checkpoints */

int zt_ps_checkpoint(zt_ps_client_t *self, const char *root, int64_t step, const char *model_json, int keep,
                     char *path, size_t path_size, int timeout_ms)
{
    if (path && path_size)
        path[0] = '\0';
    if (!self->config) {
        snprintf(self->err, sizeof self->err, "checkpoint: not connected to the parameter servers (zt_ps_connect)");
        return ZT_EINVAL;
    }
    json_t *model = NULL;
    if (model_json) {
        json_error_t je;
        model = json_loads(model_json, 0, &je);
        if (!json_is_object(model)) {
            snprintf(self->err, sizeof self->err, "checkpoint: the model description is not a JSON object (%s)",
                     model ? "another JSON value" : je.text);
            json_decref(model);
            return ZT_EINVAL;
        }
    }
    zt_ps_shard_t *shards = calloc((size_t) self->nservers, sizeof *shards);
    int rc = zt_ps_snapshot(self, shards, timeout_ms);
    if (rc != ZT_OK) {
        free(shards);
        json_decref(model);
        return rc; /* err names the server */
    }
    json_t *tensors = json_array();
    for (int t = 0; t < self->ntensors; t++)
        json_array_append_new(tensors, json_pack("{s:s, s:[I], s:I, s:I}", "name", self->tensors[t].name, "shape",
                              (json_int_t) self->tensors[t].numel, "offset", (json_int_t) self->tensors[t].offset,
                              "numel", (json_int_t) self->tensors[t].numel));
    json_t *config = json_loads(self->config, 0, NULL);
    json_t *extra = model ? json_pack("{s:o}", "model", model) : NULL;
    char *written = NULL;
    rc = zt_ckpt_write(root, step, config, tensors, extra, shards, self->nservers, keep, &written);
    if (rc != ZT_OK)
        snprintf(self->err, sizeof self->err, "cannot write a checkpoint of step %lld under %s: %s",
                 (long long) step, root, zt_strerror(rc));
    else if (path && path_size)
        snprintf(path, path_size, "%s", written);
    free(written);
    json_decref(extra);
    json_decref(config);
    json_decref(tensors);
    zt_ps_shards_free(shards, self->nservers);
    free(shards);
    return rc;
}

int64_t zt_ps_checkpoint_latest(const char *root, char *path, size_t path_size)
{
    if (path && path_size)
        path[0] = '\0';
    json_t *man = NULL;
    char *dir = zt_ckpt_latest(root, &man);
    if (!dir)
        return 0;
    int64_t step = json_integer_value(json_object_get(man, "step"));
    if (path && path_size)
        snprintf(path, path_size, "%s", dir);
    json_decref(man);
    free(dir);
    return step;
}
