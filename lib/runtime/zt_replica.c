/* zt_replica: a replica's control-plane link. An actor thread owns the
 * DEALER socket: it registers, heartbeats on its own timer (so training work
 * never delays a heartbeat), and records what the coordinator says. */
#include "ztrain/zt_replica.h"
#include "ztrain/zt_collective.h"
#include "base/zt_hist.h"
#include "ztrain/zt_job.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_knobs.h"
#include "ztrain/zt_log.h"
#include "base/zt_env.h"
#include "runtime/zt_fileserver.h"
#include "state/zt_ckpt.h"
#include "wire/zt_msg.h"
#include "wire/zt_transport.h"
#include "base/zt_util.h"
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

struct zt_replica_t {
    zactor_t *actor;            /* owns the DEALER and the heartbeat timer */
    int pool;                   /* ZT_POOL */
    int index;                  /* ZT_INDEX */
    int64_t incarnation;        /* ZT_INCARNATION */
    char endpoint[256];         /* ZT_COORDINATOR */
    char role[64];              /* printed by the coordinator */
    int timeout_ms;             /* registration deadline */
    atomic_bool shutdown;       /* the coordinator asked us to stop */
    atomic_int job_running;     /* the coordinator said RUNNING */
    pthread_mutex_t lock;       /* guards the checkpoint notice */
    pthread_cond_t changed;     /* shutdown, job_running or the checkpoint notice changed */
    int64_t ckpt_step;          /* newest checkpoint announced, -1 none */
    int64_t ckpt_taken;         /* newest one handed to the caller */
    char ckpt_name[ZT_MSG_STR_MAX];    /* its name */
    char ckpt_address[ZT_MSG_STR_MAX]; /* who serves it */
    zt_fileserver_t *files;     /* this replica's checkpoint and model folders, once it announces one */
    int64_t group;              /* the newest membership generation told (elastic pools), -1 none */
    int group_rank, group_world; /* this replica's rank in it (-1: it leaves) and its size */
    atomic_llong abandon_before; /* a round of a generation below this is given up (a member was lost) */
    atomic_llong coll_group;    /* the generation of the collective that zt_replica_follow watches */
};

static void s_header(zt_replica_t *self, zt_msg_t *m, zt_msg_type_t type, uint64_t *seq)
{
    memset(m, 0, sizeof *m);
    m->type = type;
    m->pool = self->pool;
    m->index = self->index;
    m->incarnation = self->incarnation;
    m->seq = (*seq)++;
}

static void s_on_message(zt_replica_t *self, zt_msg_t *m)
{
    if (m->type == ZT_MSG_SHUTDOWN) {
        zt_info("coordinator asks to shut down: %s", m->u.SHUTDOWN.reason);
        atomic_store(&self->shutdown, true);
        zt_stop_request();
    }
    else if (m->type == ZT_MSG_STATUS)
        atomic_store(&self->job_running, !strcmp(m->u.STATUS.state, "RUNNING") ? 1 : 0);
    else if (m->type == ZT_MSG_MEMBERSHIP) {
        const zt_msg_MEMBERSHIP_t *g = &m->u.MEMBERSHIP;
        if (g->group < 0 || g->world < 1 || g->world > 1000000 || g->rank < -1 || g->rank >= g->world) {
            zt_warn("dropped a membership the coordinator sent: group %lld, rank %lld of %lld do not fit",
                    (long long) g->group, (long long) g->rank, (long long) g->world);
            return;
        }
        pthread_mutex_lock(&self->lock);
        if (g->group > self->group) {
            self->group = g->group;
            self->group_rank = (int) g->rank;
            self->group_world = (int) g->world;
            if (g->abandon)
                atomic_store(&self->abandon_before, g->group);
        }
        pthread_mutex_unlock(&self->lock);
    }
    else if (m->type == ZT_MSG_CHECKPOINT) {
        pthread_mutex_lock(&self->lock);
        if (m->u.CHECKPOINT.step > self->ckpt_step) {
            self->ckpt_step = m->u.CHECKPOINT.step;
            zt_msg_set_str(self->ckpt_name, m->u.CHECKPOINT.name);
            zt_msg_set_str(self->ckpt_address, m->u.CHECKPOINT.address);
        }
        pthread_mutex_unlock(&self->lock);
    }
    else
        return;
    pthread_mutex_lock(&self->lock);
    pthread_cond_broadcast(&self->changed);
    pthread_mutex_unlock(&self->lock);
}

/* Waits for a change (a message that may end a wait) until deadline, at
 * most 200 ms: a signal (zsys_interrupted) cannot wake a condition
 * variable, so it is noticed within that. Called with self->lock held. */
static void s_wait_change(zt_replica_t *self, int64_t deadline)
{
    int64_t now = zt_now_ms(), until = deadline - now < 200 ? deadline : now + 200;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t ns = ts.tv_nsec + (until - now) * 1000000;
    ts.tv_sec += ns / 1000000000;
    ts.tv_nsec = ns % 1000000000;
    pthread_cond_timedwait(&self->changed, &self->lock, &ts);
}

/* The actor's side of the control plane. */
typedef struct {
    zt_replica_t *self;
    zsock_t *pipe, *dealer;
    zpoller_t *poller;
    uint64_t seq;
    int64_t hb_ms;              /* heartbeat interval (the coordinator's, once welcomed) */
    int64_t step;               /* the last step reported, sent with heartbeats */
    uint64_t hist_sent[ZT_HIST_KINDS]; /* observations of each latency histogram last sent */
    zt_msg_drops_t drops;
} s_actor_t;

/* REGISTER, then WELCOME (or the deadline). 1: welcomed; 0: not; -1: the
 * actor was destroyed meanwhile. */
static int s_register(s_actor_t *a)
{
    zt_msg_t m;
    s_header(a->self, &m, ZT_MSG_REGISTER, &a->seq);
    zt_msg_set_str(m.u.REGISTER.role, a->self->role);
    m.u.REGISTER.pid = getpid();
    zt_msg_set_str(m.u.REGISTER.address, zt_env_get(ZT_ENV_ADDRESS));
    if (zt_msg_send(a->dealer, NULL, &m) != ZT_OK)
        return 0;
    int64_t deadline = zt_now_ms() + a->self->timeout_ms;
    while (zt_now_ms() < deadline) {
        void *which = zpoller_wait(a->poller, 100);
        if (which == a->pipe) { /* destroyed before registration finished */
            zmsg_t *cmd = zmsg_recv(a->pipe);
            zmsg_destroy(&cmd);
            return -1;
        }
        if (which != a->dealer)
            continue;
        zframe_t *f = zframe_recv(a->dealer);
        bool welcomed = false;
        if (f && zt_msg_decode(zframe_data(f), zframe_size(f), &m, &a->drops) == ZT_OK) {
            welcomed = m.type == ZT_MSG_WELCOME;
            if (welcomed && m.u.WELCOME.heartbeat_ms > 0)
                a->hb_ms = m.u.WELCOME.heartbeat_ms;
            else if (!welcomed)
                s_on_message(a->self, &m);
        }
        zframe_destroy(&f);
        if (welcomed)
            return 1;
    }
    return 0;
}

/* The command's next frame as a number (0 when it is missing). */
static int64_t s_pop_int(zmsg_t *cmd)
{
    char *text = zmsg_popstr(cmd);
    int64_t v = text ? strtoll(text, NULL, 10) : 0;
    free(text);
    return v;
}

/* A command from the main thread: METRIC name value step, CHECKPOINT step
 * name address, REJOINED step gen, REGROUPED group rank step, or $TERM.
 * true when it is time to stop. */
static bool s_on_command(s_actor_t *a)
{
    zmsg_t *cmd = zmsg_recv(a->pipe);
    char *verb = cmd ? zmsg_popstr(cmd) : NULL;
    bool term = !verb || !strcmp(verb, "$TERM");
    zt_msg_t m;
    if (verb && !strcmp(verb, "METRIC")) {
        char *name = zmsg_popstr(cmd), *value = zmsg_popstr(cmd), *st = zmsg_popstr(cmd);
        s_header(a->self, &m, ZT_MSG_METRIC, &a->seq);
        zt_msg_set_str(m.u.METRIC.name, name);
        m.u.METRIC.value = value ? strtod(value, NULL) : 0;
        m.u.METRIC.step = st ? strtoll(st, NULL, 10) : 0;
        a->step = m.u.METRIC.step;
        zt_msg_send(a->dealer, NULL, &m);
        free(name);
        free(value);
        free(st);
    }
    else if (verb && !strcmp(verb, "CHECKPOINT")) {
        char *st = zmsg_popstr(cmd), *name = zmsg_popstr(cmd), *addr = zmsg_popstr(cmd);
        s_header(a->self, &m, ZT_MSG_CHECKPOINT, &a->seq);
        m.u.CHECKPOINT.step = st ? strtoll(st, NULL, 10) : 0;
        zt_msg_set_str(m.u.CHECKPOINT.name, name);
        zt_msg_set_str(m.u.CHECKPOINT.address, addr);
        zt_msg_send(a->dealer, NULL, &m);
        free(st);
        free(name);
        free(addr);
    }
    else if (verb && !strcmp(verb, "REJOINED")) {
        s_header(a->self, &m, ZT_MSG_REJOINED, &a->seq);
        m.u.REJOINED.step = a->step = s_pop_int(cmd);
        m.u.REJOINED.gen = s_pop_int(cmd);
        zt_msg_send(a->dealer, NULL, &m);
    }
    else if (verb && !strcmp(verb, "REGROUPED")) {
        s_header(a->self, &m, ZT_MSG_REGROUPED, &a->seq);
        m.u.REGROUPED.group = s_pop_int(cmd);
        m.u.REGROUPED.rank = s_pop_int(cmd);
        m.u.REGROUPED.step = a->step = s_pop_int(cmd);
        zt_msg_send(a->dealer, NULL, &m);
    }
    free(verb);
    zmsg_destroy(&cmd);
    return term;
}

static void s_on_coordinator(s_actor_t *a)
{
    zt_msg_t m;
    zframe_t *f = zframe_recv(a->dealer);
    if (f && zt_msg_decode(zframe_data(f), zframe_size(f), &m, &a->drops) == ZT_OK)
        s_on_message(a->self, &m);
    else
        zt_warn("dropped a malformed message from the coordinator");
    zframe_destroy(&f);
}

/* The data-plane latency histograms that grew since the last heartbeat. */
static void s_send_latency(s_actor_t *a)
{
    for (int k = 0; k < ZT_HIST_KINDS; k++) {
        uint64_t counts[ZT_HIST_NB + 1];
        double sum;
        uint64_t n = zt_hist_read((zt_hist_kind_t) k, counts, &sum);
        if (n == a->hist_sent[k])
            continue;
        zt_msg_t m;
        s_header(a->self, &m, ZT_MSG_LATENCY, &a->seq);
        zt_msg_set_str(m.u.LATENCY.kind, zt_hist_name((zt_hist_kind_t) k));
        m.u.LATENCY.sum = sum;
        if (zt_hist_format(counts, m.u.LATENCY.counts, sizeof m.u.LATENCY.counts) == 0 &&
            zt_msg_send(a->dealer, NULL, &m) == ZT_OK)
            a->hist_sent[k] = n;
    }
}

/* Registers, then relays the main thread's reports, handles the
 * coordinator's messages and sends heartbeats until $TERM. */
static void s_actor(zsock_t *pipe, void *arg)
{
    s_actor_t a = { .self = arg, .pipe = pipe, .hb_ms = zt_knob_int(ZT_KNOB_HEARTBEAT_MS) };
    zsock_signal(pipe, 0); /* started: zactor_new returns; registration follows */
    a.dealer = zt_sock_dealer(ZT_PLANE_CONTROL, a.self->endpoint);
    a.poller = zpoller_new(pipe, a.dealer, NULL);
    /* Signals are the main thread's business; this loop ends on $TERM only. */
    zpoller_set_nonstop(a.poller, true);
    int welcomed = a.dealer ? s_register(&a) : 0;
    if (welcomed >= 0)
        zsock_signal(pipe, welcomed ? 0 : 1);
    int64_t next_hb = zt_now_ms() + a.hb_ms;
    while (welcomed == 1) {
        int64_t wait = next_hb - zt_now_ms();
        void *which = zpoller_wait(a.poller, (int) (wait > 0 ? wait : 0));
        if (which == pipe && s_on_command(&a))
            break;
        if (which == a.dealer)
            s_on_coordinator(&a);
        if (zt_now_ms() >= next_hb) {
            zt_msg_t m;
            s_header(a.self, &m, ZT_MSG_HEARTBEAT, &a.seq);
            m.u.HEARTBEAT.step = a.step;
            zt_msg_send(a.dealer, NULL, &m);
            s_send_latency(&a);
            next_hb = zt_now_ms() + a.hb_ms;
        }
    }
    zpoller_destroy(&a.poller);
    zt_sock_destroy(&a.dealer);
    if (welcomed == 0) { /* wait for $TERM so that zactor_destroy returns */
        zmsg_t *cmd = zmsg_recv(pipe);
        zmsg_destroy(&cmd);
    }
}

zt_replica_t *zt_replica_new(const char *role, int timeout_ms)
{
    const char *ep = zt_env_get(ZT_ENV_COORDINATOR);
    int64_t pool, index, inc;
    if (!ep || !zt_env_int(ZT_ENV_POOL, &pool) || !zt_env_int(ZT_ENV_INDEX, &index) ||
        !zt_env_int(ZT_ENV_INCARNATION, &inc)) {
        zt_error("ZT_COORDINATOR, ZT_POOL, ZT_INDEX and ZT_INCARNATION must be set "
                 "(`ztrain run` sets them for every replica)");
        return NULL;
    }
    zt_replica_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    self->pool = (int) pool;
    self->index = (int) index;
    self->incarnation = inc;
    pthread_mutex_init(&self->lock, NULL);
    pthread_cond_init(&self->changed, NULL);
    self->ckpt_step = self->ckpt_taken = -1;
    self->group = -1;
    self->timeout_ms = timeout_ms > 0 ? timeout_ms : (int) zt_knob_int(ZT_KNOB_REGISTER_TIMEOUT_MS);
    snprintf(self->endpoint, sizeof self->endpoint, "%s", ep);
    snprintf(self->role, sizeof self->role, "%s", role);
    self->actor = zactor_new(s_actor, self);
    if (!self->actor || zsock_wait(self->actor) != 0) {
        zt_error("could not register with the coordinator at %s within %d ms (ZT_REGISTER_TIMEOUT_MS); "
                 "exiting with status %d for a restart", ep, self->timeout_ms, ZT_EXIT_RETRY);
        zt_fail_retryable();
        zt_replica_destroy(&self);
        return NULL;
    }
    zt_debug("registered with %s as workerpool%d-%d", ep, self->pool, self->index);
    return self;
}

void zt_replica_destroy(zt_replica_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zt_replica_t *self = *self_p;
    zactor_destroy(&self->actor);
    zt_fileserver_destroy(&self->files);
    pthread_mutex_destroy(&self->lock);
    pthread_cond_destroy(&self->changed);
    free(self);
    *self_p = NULL;
}

int zt_replica_pool(zt_replica_t *self) { return self->pool; }
int zt_replica_index(zt_replica_t *self) { return self->index; }
bool zt_replica_shutdown_requested(zt_replica_t *self) { return atomic_load(&self->shutdown); }

int zt_replica_stop_status(zt_replica_t *self)
{
    if (self && atomic_load(&self->shutdown))
        return 0;
    return zt_stop_came() ? ZT_EXIT_STOPPED : -1;
}

void zt_replica_hold_stop(bool hold)
{
    zt_stop_hold(hold);
}

int zt_replica_report_metric(zt_replica_t *self, const char *name, double value, int64_t step)
{
    char v[64], s[32];
    snprintf(v, sizeof v, "%.17g", value);
    snprintf(s, sizeof s, "%lld", (long long) step);
    return zstr_sendx(self->actor, "METRIC", name, v, s, NULL) == 0 ? ZT_OK : ZT_EIO;
}

int zt_replica_report_checkpoint_error(zt_replica_t *self, int64_t step, int code)
{
    return zt_replica_report_metric(self, ZT_METRIC_CHECKPOINT_ERROR, code, step);
}

/* Waits until ready(self, arg) is true (ZT_OK), the job shuts down or a
 * signal arrives (ZT_ESHUTDOWN), or timeout_ms pass (ZT_ETIMEDOUT; < 0:
 * none). ready is asked with self->lock held. */
static int s_wait_until(zt_replica_t *self, int timeout_ms, bool (*ready)(zt_replica_t *, void *), void *arg)
{
    int64_t deadline = timeout_ms < 0 ? INT64_MAX : zt_now_ms() + timeout_ms;
    int rc;
    pthread_mutex_lock(&self->lock);
    for (;;) {
        if (ready && ready(self, arg)) {
            rc = ZT_OK;
            break;
        }
        if (atomic_load(&self->shutdown) || zsys_interrupted) {
            rc = ZT_ESHUTDOWN;
            break;
        }
        if (zt_now_ms() >= deadline) {
            rc = ZT_ETIMEDOUT;
            break;
        }
        s_wait_change(self, deadline);
    }
    pthread_mutex_unlock(&self->lock);
    return rc;
}

int zt_replica_wait_shutdown(zt_replica_t *self, int timeout_ms)
{
    int rc = s_wait_until(self, timeout_ms, NULL, NULL);
    return rc == ZT_ESHUTDOWN ? ZT_OK : rc;
}

static bool s_running(zt_replica_t *self, void *arg)
{
    (void) arg;
    return atomic_load(&self->job_running);
}

int zt_replica_wait_running(zt_replica_t *self, int timeout_ms)
{
    return s_wait_until(self, timeout_ms, s_running, NULL);
}

int zt_replica_notify_checkpoint(zt_replica_t *self, int64_t step, const char *name,
                                 const char *address)
{
    char st[32];
    snprintf(st, sizeof st, "%lld", (long long) step);
    return zstr_sendx(self->actor, "CHECKPOINT", st, name, address ? address : "", NULL) == 0
               ? ZT_OK : ZT_EIO;
}

/* Whether folders a and b are the same one. */
static bool s_same_dir(const char *a, const char *b)
{
    char ra[PATH_MAX], rb[PATH_MAX];
    if (realpath(a, ra) && realpath(b, rb))
        return !strcmp(ra, rb);
    return !strcmp(a, b);
}

int zt_replica_announce_checkpoint(zt_replica_t *self, int64_t step, const char *dir)
{
    static const char *names[2] = { "checkpoints", "model" };
    char *copy = strdup(dir), *copy2 = strdup(dir);
    const char *parent = dirname(copy), *base = basename(copy2);
    int which = s_same_dir(parent, zt_job_checkpoint_dir(false)) ? 0 : s_same_dir(parent, zt_job_checkpoint_dir(true)) ? 1 : -1;
    char name[ZT_MSG_STR_MAX];
    snprintf(name, sizeof name, "%s/%s", which >= 0 ? names[which] : "", base);
    free(copy);
    free(copy2);
    if (which < 0 || !zt_ckpt_name_ok(name)) {
        zt_warn("checkpoint %s not announced: evaluators are served ckpt-N folders of %s (AIP_CHECKPOINT_DIR) "
                "and %s (AIP_MODEL_DIR) only", dir, zt_job_checkpoint_dir(false), zt_job_checkpoint_dir(true));
        return ZT_EINVAL;
    }
    if (!self->files) {
        const char *roots[2][2] = { { names[0], zt_job_checkpoint_dir(false) }, { names[1], zt_job_checkpoint_dir(true) } };
        /* where other replicas reach this one: ZT_ADDRESS's host (127.0.0.1 here, the node's
         * name on a cluster), on a port of the kernel's choosing */
        const char *me = zt_env_get(ZT_ENV_ADDRESS);
        const char *colon = me ? strrchr(me, ':') : NULL;
        char *ep = colon ? zt_strdupf("tcp://%.*s:*", (int) (colon - me), me) : strdup("tcp://127.0.0.1:*");
        self->files = zt_fileserver_new(ep, (const char *const (*)[2]) roots, 2);
        free(ep);
    }
    const char *address = self->files ? zt_fileserver_endpoint(self->files) : NULL;
    if (!address) {
        zt_warn("checkpoint %s not announced: cannot serve its files", dir);
        return ZT_EIO;
    }
    return zt_replica_notify_checkpoint(self, step, name, address);
}

int zt_replica_notify_rejoined(zt_replica_t *self, int64_t step, int64_t gen)
{
    char st[32], g[32];
    snprintf(st, sizeof st, "%lld", (long long) step);
    snprintf(g, sizeof g, "%lld", (long long) gen);
    return zstr_sendx(self->actor, "REJOINED", st, g, NULL) == 0 ? ZT_OK : ZT_EIO;
}

bool zt_replica_round_abandoned(zt_replica_t *self, int64_t group)
{
    return self && group < atomic_load(&self->abandon_before);
}

static bool s_coll_abandoned(void *arg)
{
    zt_replica_t *self = arg;
    return zt_replica_round_abandoned(self, atomic_load(&self->coll_group));
}

void zt_replica_follow(zt_replica_t *self, zt_coll_t *coll, int64_t group)
{
    atomic_store(&self->coll_group, group);
    zt_coll_abandon_when(coll, s_coll_abandoned, self);
}

int zt_replica_notify_regrouped(zt_replica_t *self, int64_t group, int rank, int64_t step)
{
    char g[32], r[16], st[32];
    snprintf(g, sizeof g, "%lld", (long long) group);
    snprintf(r, sizeof r, "%d", rank);
    snprintf(st, sizeof st, "%lld", (long long) step);
    return zstr_sendx(self->actor, "REGROUPED", g, r, st, NULL) == 0 ? ZT_OK : ZT_EIO;
}

typedef struct {
    int64_t after, *group;
    int *rank, *world;
} s_member_out_t;

static bool s_take_membership(zt_replica_t *self, void *arg)
{
    s_member_out_t *o = arg;
    if (self->group <= o->after)
        return false;
    *o->group = self->group;
    *o->rank = self->group_rank;
    *o->world = self->group_world;
    return true;
}

int zt_replica_membership(zt_replica_t *self, int64_t after, int timeout_ms, int64_t *group, int *rank,
                          int *world)
{
    s_member_out_t o = { after, group, rank, world };
    return s_wait_until(self, timeout_ms, s_take_membership, &o);
}

typedef struct {
    int64_t *step;
    char *name, *address;
    size_t name_size, address_size;
} s_ckpt_out_t;

/* A checkpoint not taken yet: taken into *arg. */
static bool s_take_checkpoint(zt_replica_t *self, void *arg)
{
    s_ckpt_out_t *o = arg;
    if (self->ckpt_step <= self->ckpt_taken)
        return false;
    self->ckpt_taken = *o->step = self->ckpt_step;
    snprintf(o->name, o->name_size, "%s", self->ckpt_name);
    snprintf(o->address, o->address_size, "%s", self->ckpt_address);
    return true;
}

int zt_replica_next_checkpoint(zt_replica_t *self, int64_t *step, char *name, size_t name_size,
                               char *address, size_t address_size, int timeout_ms)
{
    s_ckpt_out_t o = { step, name, address, name_size, address_size };
    return s_wait_until(self, timeout_ms, s_take_checkpoint, &o);
}
