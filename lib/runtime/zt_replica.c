/* zt_replica: a replica's control-plane link. An actor thread owns the
 * DEALER socket: it registers, heartbeats on its own timer (so training work
 * never delays a heartbeat), and records what the coordinator says. */
#include "ztrain/zt_replica.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_knobs.h"
#include "ztrain/zt_log.h"
#include "runtime/zt_env.h"
#include "wire/zt_msg.h"
#include "wire/zt_transport.h"
#include "base/zt_util.h"
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
    int64_t ckpt_step;          /* newest checkpoint announced, -1 none */
    int64_t ckpt_taken;         /* newest one handed to the caller */
    char ckpt_name[ZT_MSG_STR_MAX];    /* its name */
    char ckpt_address[ZT_MSG_STR_MAX]; /* who serves it */
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
    }
    else if (m->type == ZT_MSG_STATUS)
        atomic_store(&self->job_running, !strcmp(m->u.STATUS.state, "RUNNING") ? 1 : 0);
    else if (m->type == ZT_MSG_CHECKPOINT) {
        pthread_mutex_lock(&self->lock);
        if (m->u.CHECKPOINT.step > self->ckpt_step) {
            self->ckpt_step = m->u.CHECKPOINT.step;
            zt_msg_set_str(self->ckpt_name, m->u.CHECKPOINT.name);
            zt_msg_set_str(self->ckpt_address, m->u.CHECKPOINT.address);
        }
        pthread_mutex_unlock(&self->lock);
    }
}

static void s_actor(zsock_t *pipe, void *arg)
{
    zt_replica_t *self = arg;
    zsock_signal(pipe, 0); /* started: zactor_new returns; registration follows */
    zsock_t *dealer = zt_sock_dealer(ZT_PLANE_CONTROL, self->endpoint);
    uint64_t seq = 0;
    int64_t hb_ms = zt_knob_int(ZT_KNOB_HEARTBEAT_MS);
    zt_msg_drops_t drops = { 0 };
    int ok = dealer != NULL;
    zt_msg_t m;
    if (ok) {
        s_header(self, &m, ZT_MSG_REGISTER, &seq);
        zt_msg_set_str(m.u.REGISTER.role, self->role);
        m.u.REGISTER.pid = getpid();
        zt_msg_set_str(m.u.REGISTER.address, zt_env_get(ZT_ENV_ADDRESS));
        ok = zt_msg_send(dealer, NULL, &m) == ZT_OK;
    }
    /* Wait for WELCOME. */
    int64_t deadline = zt_now_ms() + self->timeout_ms;
    bool welcomed = false;
    zpoller_t *poller = zpoller_new(pipe, dealer, NULL);
    /* Signals are the main thread's business; this loop ends on $TERM only. */
    zpoller_set_nonstop(poller, true);
    while (ok && !welcomed && zt_now_ms() < deadline) {
        void *which = zpoller_wait(poller, 100);
        if (which == pipe) { /* destroyed before registration finished */
            zmsg_t *cmd = zmsg_recv(pipe);
            zmsg_destroy(&cmd);
            zpoller_destroy(&poller);
            zt_sock_destroy(&dealer);
            return;
        }
        if (which != dealer)
            continue;
        zframe_t *f = zframe_recv(dealer);
        if (f && zt_msg_decode(zframe_data(f), zframe_size(f), &m, &drops) == ZT_OK) {
            if (m.type == ZT_MSG_WELCOME) {
                welcomed = true;
                if (m.u.WELCOME.heartbeat_ms > 0)
                    hb_ms = m.u.WELCOME.heartbeat_ms;
            }
            else
                s_on_message(self, &m);
        }
        zframe_destroy(&f);
    }
    zsock_signal(pipe, welcomed ? 0 : 1);
    if (!welcomed)
        goto out;
    int64_t next_hb = zt_now_ms() + hb_ms;
    int64_t step = 0;
    for (;;) {
        int64_t wait = next_hb - zt_now_ms();
        void *which = zpoller_wait(poller, (int) (wait > 0 ? wait : 0));
        if (which == pipe) {
            zmsg_t *cmd = zmsg_recv(pipe);
            char *verb = cmd ? zmsg_popstr(cmd) : NULL;
            bool term = !verb || !strcmp(verb, "$TERM");
            if (verb && !strcmp(verb, "METRIC")) {
                char *name = zmsg_popstr(cmd), *value = zmsg_popstr(cmd), *st = zmsg_popstr(cmd);
                s_header(self, &m, ZT_MSG_METRIC, &seq);
                zt_msg_set_str(m.u.METRIC.name, name);
                m.u.METRIC.value = value ? strtod(value, NULL) : 0;
                m.u.METRIC.step = st ? strtoll(st, NULL, 10) : 0;
                step = m.u.METRIC.step;
                zt_msg_send(dealer, NULL, &m);
                free(name); free(value); free(st);
            }
            else if (verb && !strcmp(verb, "CHECKPOINT")) {
                char *st = zmsg_popstr(cmd), *name = zmsg_popstr(cmd), *addr = zmsg_popstr(cmd);
                s_header(self, &m, ZT_MSG_CHECKPOINT, &seq);
                m.u.CHECKPOINT.step = st ? strtoll(st, NULL, 10) : 0;
                zt_msg_set_str(m.u.CHECKPOINT.name, name);
                zt_msg_set_str(m.u.CHECKPOINT.address, addr);
                zt_msg_send(dealer, NULL, &m);
                free(st); free(name); free(addr);
            }
            free(verb);
            zmsg_destroy(&cmd);
            if (term)
                break;
        }
        else if (which == dealer) {
            zframe_t *f = zframe_recv(dealer);
            if (f && zt_msg_decode(zframe_data(f), zframe_size(f), &m, &drops) == ZT_OK)
                s_on_message(self, &m);
            else
                zt_warn("dropped a malformed message from the coordinator");
            zframe_destroy(&f);
        }
        if (zt_now_ms() >= next_hb) {
            s_header(self, &m, ZT_MSG_HEARTBEAT, &seq);
            m.u.HEARTBEAT.step = step;
            zt_msg_send(dealer, NULL, &m);
            next_hb = zt_now_ms() + hb_ms;
        }
    }
out:
    zpoller_destroy(&poller);
    zt_sock_destroy(&dealer);
    if (!welcomed) { /* wait for $TERM so that zactor_destroy returns */
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
    self->ckpt_step = self->ckpt_taken = -1;
    self->timeout_ms = timeout_ms > 0 ? timeout_ms : (int) zt_knob_int(ZT_KNOB_REGISTER_TIMEOUT_MS);
    snprintf(self->endpoint, sizeof self->endpoint, "%s", ep);
    snprintf(self->role, sizeof self->role, "%s", role);
    self->actor = zactor_new(s_actor, self);
    if (!self->actor || zsock_wait(self->actor) != 0) {
        zt_error("could not register with the coordinator at %s within %d ms", ep, self->timeout_ms);
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
    pthread_mutex_destroy(&self->lock);
    free(self);
    *self_p = NULL;
}

int zt_replica_pool(zt_replica_t *self) { return self->pool; }
int zt_replica_index(zt_replica_t *self) { return self->index; }
bool zt_replica_shutdown_requested(zt_replica_t *self) { return atomic_load(&self->shutdown); }

int zt_replica_report_metric(zt_replica_t *self, const char *name, double value, int64_t step)
{
    char v[64], s[32];
    snprintf(v, sizeof v, "%.17g", value);
    snprintf(s, sizeof s, "%lld", (long long) step);
    return zstr_sendx(self->actor, "METRIC", name, v, s, NULL) == 0 ? ZT_OK : ZT_EIO;
}

int zt_replica_wait_shutdown(zt_replica_t *self, int timeout_ms)
{
    int64_t deadline = timeout_ms < 0 ? INT64_MAX : zt_now_ms() + timeout_ms;
    while (!atomic_load(&self->shutdown) && !zsys_interrupted) {
        if (zt_now_ms() >= deadline)
            return ZT_ETIMEDOUT;
        zclock_sleep(20);
    }
    return ZT_OK;
}

int zt_replica_wait_running(zt_replica_t *self, int timeout_ms)
{
    int64_t deadline = timeout_ms < 0 ? INT64_MAX : zt_now_ms() + timeout_ms;
    while (!atomic_load(&self->job_running)) {
        if (atomic_load(&self->shutdown) || zsys_interrupted)
            return ZT_ESHUTDOWN;
        if (zt_now_ms() >= deadline)
            return ZT_ETIMEDOUT;
        zclock_sleep(10);
    }
    return ZT_OK;
}

int zt_replica_notify_checkpoint(zt_replica_t *self, int64_t step, const char *name,
                                 const char *address)
{
    char st[32];
    snprintf(st, sizeof st, "%lld", (long long) step);
    return zstr_sendx(self->actor, "CHECKPOINT", st, name, address ? address : "", NULL) == 0
               ? ZT_OK : ZT_EIO;
}

int zt_replica_next_checkpoint(zt_replica_t *self, int64_t *step, char *name, size_t name_size,
                               char *address, size_t address_size, int timeout_ms)
{
    int64_t deadline = timeout_ms < 0 ? INT64_MAX : zt_now_ms() + timeout_ms;
    for (;;) {
        pthread_mutex_lock(&self->lock);
        bool fresh = self->ckpt_step > self->ckpt_taken;
        if (fresh) {
            self->ckpt_taken = *step = self->ckpt_step;
            snprintf(name, name_size, "%s", self->ckpt_name);
            snprintf(address, address_size, "%s", self->ckpt_address);
        }
        pthread_mutex_unlock(&self->lock);
        if (fresh)
            return ZT_OK;
        if (atomic_load(&self->shutdown) || zsys_interrupted)
            return ZT_ESHUTDOWN;
        if (zt_now_ms() >= deadline)
            return ZT_ETIMEDOUT;
        zclock_sleep(20);
    }
}
