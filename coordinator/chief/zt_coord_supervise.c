/* Supervision as the managed service does it: what a replica's start or
 * end does to the job. A crash restarts the replica in place (bounded), or
 * its synchronous group together, then retries the whole job (bounded); a
 * user error (exit 1) fails the job; pool 0 exiting 0 ends it SUCCEEDED; a
 * lost node requeues it. */
#include "chief/zt_coord_int.h"
#include "formats/zt_format.h"
#include "base/zt_util.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_knobs.h"
#include "ztrain/zt_log.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

struct zt_coord_supervisor_t {
    int max_restarts, max_preemptions; /* a replica's in-place restarts and uncounted preemptions */
    int64_t incident_ms;        /* when a replica was last lost (a signal, a crash), 0: never */
    char incident[192];         /* which, and how ("workerpool1-0 (algo-2) was killed by signal 9 (Killed)") */
    int64_t echo_ms;            /* when a peer's failure was last taken as an incident's consequence, 0: never */
    char echo[64];              /* that peer's name: its restart breaks the others' collectives in turn */
    int64_t final_eval_deadline; /* the primary finished: evaluators score its final model until then (0: no wait) */
    int64_t final_eval_step;
    bool requeue, give_up;      /* at the end: the allocation runs the job again, or not */
    bool preempted;             /* the allocation was preempted (requeued) under the job */
    /* the stop under way (zt_coord_t's stopping) */
    zt_after_t after_stop;      /* what to do once all are down */
    zt_job_state_t final_state; /* for ZT_AFTER_FINISH */
    int64_t kill_deadline;      /* SIGKILL whoever is left at this time */
    int64_t grace_ms;           /* ZT_STOP_GRACE_MS */
};

zt_coord_supervisor_t *zt_coord_supervisor_new(void)
{
    zt_coord_supervisor_t *self = calloc(1, sizeof *self);
    self->max_restarts = (int) zt_knob_int(ZT_KNOB_MAX_RESTARTS);
    self->max_preemptions = (int) zt_knob_int(ZT_KNOB_MAX_PREEMPTIONS);
    self->grace_ms = zt_knob_int(ZT_KNOB_STOP_GRACE_MS);
    return self;
}

void zt_coord_supervisor_destroy(zt_coord_supervisor_t **self_p)
{
    free(*self_p);
    *self_p = NULL;
}

bool zt_coord_preempting(const zt_coord_t *self)
{
    return self->sv->preempted;
}

zt_after_t zt_coord_after_stop(const zt_coord_t *self)
{
    return self->sv->after_stop;
}

zt_job_state_t zt_coord_final_state(const zt_coord_t *self)
{
    return self->sv->final_state;
}

void zt_coord_stop_tick(zt_coord_t *self, int64_t now)
{
    if (!self->stopping || self->sv->kill_deadline > now)
        return;
    for (int i = 0; i < self->nreps; i++)
        if (self->reps[i].handle) {
            zt_warn("%s did not stop within the grace period: SIGKILL", self->reps[i].name);
            self->backend->signal(self->backend, self->reps[i].handle, SIGKILL);
            self->sv->kill_deadline = now + 1000;
        }
}

void zt_coord_supervise_end(zt_coord_t *self)
{
    if (self->sv->requeue && self->backend->requeue)
        self->backend->requeue(self->backend);
    if (self->sv->give_up && self->backend->give_up)
        self->backend->give_up(self->backend);
}

void zt_coord_check_all_up(zt_coord_t *self)
{
    if (self->state != ZT_JOB_PENDING || self->stopping)
        return;
    for (int i = 0; i < self->nreps; i++)
        if (self->reps[i].state != ZT_REP_RUNNING && self->reps[i].state != ZT_REP_SUCCEEDED &&
            zt_coord_is_member(self, &self->reps[i]))
            return;
    zt_coord_set_state(self, ZT_JOB_RUNNING);
}

void zt_coord_spawn_all(zt_coord_t *self, void (*serve)(zt_coord_t *self))
{
    zt_coord_set_state(self, ZT_JOB_PENDING);
    zt_coord_elastic_restart(self);
    int64_t served = zt_now_ms();
    for (int i = 0; i < self->nreps; i++) {
        if (!zt_coord_is_member(self, &self->reps[i]))
            continue; /* an elastic pool's free slot */
        if (zt_now_ms() - served >= 20) {
            serve(self);
            served = zt_now_ms();
        }
        self->reps[i].restarts = 0;
        self->reps[i].rejoining = false;
        if (zt_crep_spawn(&self->reps[i], &self->layout, self->backend, self->opts.echo) != ZT_OK) {
            self->reps[i].state = ZT_REP_FAILED;
            zt_coord_set_error(self, &self->reps[i], "%s could not be started", self->reps[i].name);
            zt_coord_stop_all(self, ZT_AFTER_FINISH, ZT_JOB_FAILED);
            return;
        }
    }
    zt_coord_write_state(self);
    zt_coord_check_all_up(self);
}

/* One replica told to stop: SHUTDOWN, and SIGTERM. */
static void s_stop_one(zt_coord_t *self, zt_crep_t *r)
{
    zt_msg_t m = { .type = ZT_MSG_SHUTDOWN, .incarnation = self->layout.incarnation, .seq = self->seq++ };
    zt_msg_set_str(m.u.SHUTDOWN.reason, self->sv->after_stop == ZT_AFTER_RESPAWN ? "restarting the job"
                                                                             : "the job is ending");
    if (r->registered)
        zt_msg_send(self->router, r->identity, &m);
    self->backend->signal(self->backend, r->handle, SIGTERM);
}

/* Whether a replica of pool 0 (the chief) is still running. */
static bool s_chief_up(const zt_coord_t *self)
{
    for (int i = 0; i < self->nreps; i++)
        if (self->reps[i].pool == 0 && self->reps[i].handle)
            return true;
    return false;
}

/* Stops every live replica: SHUTDOWN, SIGTERM, then SIGKILL after the grace. */
void zt_coord_stop_all(zt_coord_t *self, zt_after_t after, zt_job_state_t final_state)
{
    if (self->stopping) {
        /* Already stopping: a finish wins over a respawn. */
        if (after == ZT_AFTER_FINISH) {
            self->sv->after_stop = ZT_AFTER_FINISH;
            self->sv->final_state = final_state;
        }
        return;
    }
    self->stopping = true;
    self->sv->after_stop = after;
    self->sv->final_state = final_state;
    self->sv->kill_deadline = zt_now_ms() + self->sv->grace_ms;
    /* the chief saves the model at its step as it stops, gathering it from
     * the parameter servers: they stop once it has ended (or late in the
     * grace), so that it finds them serving */
    bool hold = s_chief_up(self) && self->plan->pools[2].present && self->plan->pools[2].role == ZT_ROLE_PARAMSERVER;
    for (int i = 0; i < self->nreps; i++) {
        zt_crep_t *r = &self->reps[i];
        if (!r->handle)
            continue;
        if (hold && r->pool == 2)
            r->stop_held = true;
        else
            s_stop_one(self, r);
    }
}

/* The parameter servers' stop, held while the chief saves: sent when no
 * chief runs any more, or when a quarter of the grace is left (they write
 * their snapshots in it). */
void zt_coord_release_held_stops(zt_coord_t *self)
{
    if (!self->stopping)
        return;
    bool held = false;
    for (int i = 0; i < self->nreps; i++)
        held |= self->reps[i].stop_held;
    if (!held || (s_chief_up(self) && zt_now_ms() < self->sv->kill_deadline - self->sv->grace_ms / 4))
        return;
    for (int i = 0; i < self->nreps; i++)
        if (self->reps[i].stop_held) {
            self->reps[i].stop_held = false;
            if (self->reps[i].handle)
                s_stop_one(self, &self->reps[i]);
        }
}

void zt_coord_cancel(zt_coord_t *self, const char *why)
{
    if (self->state == ZT_JOB_CANCELLING) {
        zt_warn("%s again: killing every replica now", why);
        self->sv->kill_deadline = 0;
        return;
    }
    if (self->stopping && self->sv->after_stop == ZT_AFTER_FINISH)
        return; /* already ending with a result */
    zt_info("%s: cancelling the job", why);
    zt_coord_record_set_error(self->rec, json_pack("{s:s}", "message", why));
    zt_coord_set_state(self, ZT_JOB_CANCELLING);
    self->stopping = false; /* a pending respawn is dropped */
    zt_coord_stop_all(self, ZT_AFTER_FINISH, ZT_JOB_CANCELLED);
}

/* A node under the job is lost: every replica stops, and the job is retried
 * by its allocation running it again on other nodes (Slurm requeues it), or,
 * with no job retry left, fails naming the node. */
void zt_coord_node_lost(zt_coord_t *self, const char *why)
{
    if (self->sv->requeue || self->sv->give_up) {
        self->sv->kill_deadline = 0; /* a second notice: now */
        return;
    }
    zt_coord_record_lost_node(self->rec, why);
    bool retry = zt_coord_record_retry(self->rec, self->plan->disable_retries);
    char *msg;
    if (retry) {
        self->layout.incarnation++;
        self->sv->requeue = true;
        msg = zt_strdupf("%s: the job is retried on other nodes (job retry %d of %d) once its allocation "
                         "runs again (Slurm requeues it)", why, zt_coord_record_retries(self->rec),
                         zt_coord_record_max_retries(self->rec));
    }
    else {
        self->sv->give_up = true;
        msg = zt_strdupf("%s, and %s: the job fails", why, self->plan->disable_retries ? "retries are disabled"
                                                                                        : "every job retry was used");
    }
    zt_error("lost a node: %s", msg);
    zt_coord_record_set_error(self->rec, json_pack("{s:s, s:s}", "message", msg, "lostNode", why));
    free(msg);
    self->stopping = false; /* whatever was under way (a respawn) gives way */
    zt_coord_stop_all(self, ZT_AFTER_FINISH, retry ? ZT_JOB_QUEUED : ZT_JOB_FAILED);
}

/* The scheduler takes the whole allocation back and will run the job again
 * (a Slurm preemption or requeue): every program got SIGTERM and saves; the
 * job goes back to QUEUED as a preemption, not a retry, and its next run
 * resumes from what was saved now. */
void zt_coord_preempted(zt_coord_t *self, const char *why)
{
    if (self->sv->preempted) {
        self->sv->kill_deadline = 0; /* a second notice: now */
        return;
    }
    self->sv->preempted = true;
    zt_coord_record_preempted(self->rec);
    self->layout.incarnation++;
    if (self->state == ZT_JOB_CANCELLING) { /* an earlier notice of this stop was taken for a cancel */
        zt_coord_record_set_error(self->rec, NULL);
        self->sv->final_state = ZT_JOB_QUEUED;
    }
    zt_warn("%s: the job is preempted (not a failure, no job retry used): every replica saves, and the job "
            "resumes when Slurm runs it again", why);
    zt_coord_record_event(self->rec, "preempted", json_pack("{s:s}", "why", why));
    self->stopping = false; /* whatever was under way (a respawn) gives way */
    zt_coord_stop_all(self, ZT_AFTER_FINISH, ZT_JOB_QUEUED);
}

/* Whether r trains in lockstep with others: a training replica (pool 0 or
 * 1) of a job whose gradients are all-reduced, through reducers (pool 2 is
 * ztrain's reducer) or a ring between built-in trainers (no pool 2). One of
 * them restarted alone would come back at its checkpoint's step while the
 * others wait at theirs, so the group restarts together. A reducer keeps
 * the group going: restarted in place, it asks the workers again. */
static bool s_in_sync_group(const zt_coord_t *self, const zt_crep_t *r)
{
    const zt_pool_t *p = self->plan->pools;
    if (r->pool > 1)
        return false;
    if (p[2].present)
        return p[2].role == ZT_ROLE_REDUCER;
    int trainers = (p[0].role == ZT_ROLE_WORKER ? p[0].replicas : 0) +
                   (p[1].present && p[1].role == ZT_ROLE_WORKER ? p[1].replicas : 0);
    return p[r->pool].role == ZT_ROLE_WORKER && trainers > 1;
}

/* Whether a lost trainer of a synchronous group can rejoin it in place,
 * taking the model from a live peer: the gradients go through reducers
 * (a ring broken mid-round cannot finish it), it was not itself rejoining,
 * and every other trainer is up and in the group. Otherwise the group
 * restarts together from the newest checkpoint. */
static bool s_can_rejoin(const zt_coord_t *self, const zt_crep_t *r, char *why, size_t size)
{
    const zt_pool_t *p = self->plan->pools;
    if (!p[2].present || p[2].role != ZT_ROLE_REDUCER) {
        snprintf(why, size, "its gradients go round a ring between the trainers, which a lost one breaks");
        return false;
    }
    if (zt_coord_elastic_changing(self)) {
        snprintf(why, size, "the group is changing its membership");
        return false;
    }
    if (r->rejoining) {
        snprintf(why, size, "it was lost again before it had rejoined");
        return false;
    }
    for (int i = 0; i < self->nreps; i++) {
        const zt_crep_t *o = &self->reps[i];
        if (o != r && o->pool == 2 && (o->state != ZT_REP_RUNNING || o->fresh)) { /* its round needs every reducer */
            snprintf(why, size, "reducer %s is being restarted too", o->name);
            return false;
        }
        if (o == r || o->pool > 1 || p[o->pool].role != ZT_ROLE_WORKER || !zt_coord_is_member(self, o))
            continue;
        if (o->state != ZT_REP_RUNNING || o->rejoining) {
            snprintf(why, size, "%s is not training either", o->name);
            return false;
        }
    }
    return true;
}

void zt_coord_settle_reducers(zt_coord_t *self, int64_t step)
{
    for (int i = 0; i < self->nreps; i++) {
        zt_crep_t *o = &self->reps[i];
        if (!o->fresh)
            continue;
        if (o->settle_step < 0) /* the first step named since its restart, and a margin for a round in flight */
            o->settle_step = step + 2;
        else if (step >= o->settle_step)
            o->fresh = false;
    }
}

/* A reducer lost while a trainer of its group rejoins (or is not back
 * yet): the round the rejoiner comes into needs this reducer's state, so
 * the group restarts together instead of stalling until the all-reduce
 * timeout. The trainer's name in why. */
static bool s_reducer_mid_rejoin(const zt_coord_t *self, const zt_crep_t *r, char *why, size_t size)
{
    if (r->pool != 2 || self->plan->pools[2].role != ZT_ROLE_REDUCER)
        return false;
    for (int i = 0; i < self->nreps; i++) {
        const zt_crep_t *o = &self->reps[i];
        if (o->pool <= 1 && s_in_sync_group(self, o) && (o->rejoining || o->state == ZT_REP_RESTARTING)) {
            snprintf(why, size, "%s is rejoining the group", o->name);
            return true;
        }
    }
    return false;
}

/* A crashed replica with restarts left: restarted in place, rejoining its
 * synchronous group when it can; or its group (or, with
 * restartJobOnWorkerRestart, the job) restarted together. */
static void s_restart(zt_coord_t *self, zt_crep_t *r, bool counted)
{
    if (counted) {
        r->restarts++;
        r->total_restarts++;
    }
    r->state = ZT_REP_RESTARTING;
    bool sync = s_in_sync_group(self, r);
    char why[300] = "";
    bool rejoin = sync && !self->plan->restart_job_on_worker_restart && s_can_rejoin(self, r, why, sizeof why);
    bool together = !sync && s_reducer_mid_rejoin(self, r, why, sizeof why);
    /* an elastic pool's member that could not come back (its restart in
     * place failed too: on a cluster, its node is taken for gone before the
     * scheduler says so) leaves it instead */
    if (sync && !rejoin && r->rejoining && !self->plan->restart_job_on_worker_restart &&
        zt_coord_elastic_lose(self, r, why, self->backend->drop_node != NULL))
        return;
    if (self->plan->restart_job_on_worker_restart || (sync && !rejoin) || together) {
        if (together)
            zt_info("%s lost while %s: the group restarts together from the newest checkpoint", r->name, why);
        else if (sync && !self->plan->restart_job_on_worker_restart)
            zt_info("%s trains in step with the others (synchronous) and cannot rejoin them (%s): the group "
                    "restarts together from the newest checkpoint", r->name, why);
        else
            zt_info("restartJobOnWorkerRestart: restarting every replica");
        self->layout.incarnation++;
        zt_coord_stop_all(self, ZT_AFTER_RESPAWN, ZT_JOB_FAILED);
        return;
    }
    r->rejoining = rejoin;
    /* A reducer restarted in place holds no round yet: a trainer lost before
     * the group's steps go on past it (one lost at the same moment, whose
     * exit is seen only after the reducer is back) cannot rejoin through it
     * (zt_coord_settle_reducers, s_can_rejoin). */
    r->fresh = r->pool == 2 && self->plan->pools[2].role == ZT_ROLE_REDUCER;
    r->settle_step = -1;
    if (rejoin) {
        r->lost_ms = zt_now_ms();
        zt_info("%s trains in step with the others (synchronous): restarted in place, it takes the model "
                "from a live peer while the others wait", r->name);
    }
    if (counted)
        zt_info("%s: restart %d of %d, in place", r->name, r->restarts, self->sv->max_restarts);
    else
        zt_info("%s: restarted in place after its preemption (%d so far)", r->name, r->preemptions);
    if (zt_crep_spawn(r, &self->layout, self->backend, self->opts.echo) != ZT_OK) {
        r->state = ZT_REP_FAILED;
        zt_coord_set_error(self, r, "%s could not be restarted", r->name);
        zt_coord_stop_all(self, ZT_AFTER_FINISH, ZT_JOB_FAILED);
    }
    zt_coord_write_state(self);
}

/* r's name, and its host when the job's format names hosts
 * ("workerpool1-0 (algo-2)"); host: the host alone, or "". */
static void s_who(const zt_coord_t *self, const zt_crep_t *r, char *out, size_t size, char *host, size_t hsize)
{
    host[0] = 0;
    const zt_format_t *f = zt_format_of(self->plan);
    if (f && f->host_name)
        f->host_name(&self->layout, r->pool, r->index, host, hsize);
    snprintf(out, size, host[0] ? "%s (%s)" : "%s", r->name, host);
}

/* A replica lost (a signal, a crash, ztrain's own kill): the incident that
 * a peer's failing exit soon after is taken as the consequence of, and an
 * event in job.json naming it (a SageMaker job's host by its name). */
static void s_note_loss(zt_coord_t *self, const zt_crep_t *r, const char *how)
{
    char host[32], who[80];
    s_who(self, r, who, sizeof who, host, sizeof host);
    snprintf(self->sv->incident, sizeof self->sv->incident, "%s %s", who, how);
    self->sv->incident_ms = zt_now_ms();
    json_t *e = json_pack("{s:s, s:s}", "replica", r->name, "how", how);
    if (host[0])
        json_object_set_new(e, "host", json_string(host));
    zt_coord_record_event(self->rec, "replicaLost", e);
}

/* Whether any replica but r is running. */
static bool s_peers_up(const zt_coord_t *self, const zt_crep_t *r)
{
    for (int i = 0; i < self->nreps; i++)
        if (&self->reps[i] != r && self->reps[i].handle)
            return true;
    return false;
}

/* Whether an end at exit_ms falls in the window of an event at at_ms (0:
 * none): up to ZT_INCIDENT_MS after it, or ZT_VERDICT_MS before it (seen
 * while the verdict was held). */
static bool s_near(int64_t at_ms, int64_t exit_ms)
{
    return at_ms && exit_ms - at_ms <= ZT_INCIDENT_MS && exit_ms - at_ms >= -ZT_VERDICT_MS;
}

/* A replica that ended on its own, not with 0: a user error (a status
 * below 128 other than ZT_EXIT_RETRY) fails the job; a crash restarts it in
 * place (or its synchronous group together), then retries the whole job,
 * then fails it. `how` says how it ended; exit_ms: when; held: its verdict
 * was held already. */
static void s_on_failure(zt_coord_t *self, zt_crep_t *r, int status, const char *how, int64_t exit_ms, bool held)
{
    bool system = WIFEXITED(status) && WEXITSTATUS(status) == ZT_EXIT_RETRY;
    bool crash = r->killed_by_us || WIFSIGNALED(status) || WEXITSTATUS(status) >= 128 || system;
    int64_t since = exit_ms - self->sv->incident_ms; /* negative: the loss came after (seen while held) */
    size_t nl = strlen(r->name);
    bool itself = !strncmp(self->sv->incident, r->name, nl) && self->sv->incident[nl] == ' ';
    bool followed = s_near(self->sv->incident_ms, exit_ms) && !itself;
    /* A peer that failed as the loss's consequence is restarting: the lost
     * replica's own new run, reaching for it, fails in turn (a refused
     * connection) and is that echo's consequence, not a user error. */
    int64_t echo_since = exit_ms - self->sv->echo_ms;
    bool echoed = !followed && s_near(self->sv->echo_ms, exit_ms) && strcmp(self->sv->echo, r->name) != 0;
    char who[80], host[32], after[sizeof self->sv->incident + 32] = "";
    s_who(self, r, who, sizeof who, host, sizeof host);
    if (followed)
        snprintf(after, sizeof after, ", following the loss of %s", self->sv->incident);
    if (!crash && followed && WEXITSTATUS(status) != ZT_EXIT_DISK) {
        /* a peer's loss about then (a connection reset under its
         * collective): that loss's consequence, handled as a crash */
        zt_warn("%s %s %lld ms %s %s: taken as that loss's consequence, not a user error", r->name, how,
                (long long) (since >= 0 ? since : -since), since >= 0 ? "after" : "before", self->sv->incident);
        crash = true;
        snprintf(self->sv->echo, sizeof self->sv->echo, "%s", r->name);
        self->sv->echo_ms = exit_ms;
    }
    else if (!crash && echoed && WEXITSTATUS(status) != ZT_EXIT_DISK) {
        zt_warn("%s %s %lld ms after %s failed following %s: taken as a consequence too, not a user error",
                r->name, how, (long long) (echo_since >= 0 ? echo_since : -echo_since), self->sv->echo, self->sv->incident);
        crash = true;
    }
    if (!crash && !held && s_peers_up(self, r) && WEXITSTATUS(status) != ZT_EXIT_DISK) {
        r->held_until = zt_now_ms() + ZT_VERDICT_MS; /* a peer's loss may be reaped a moment later */
        r->held_exit_ms = exit_ms;
        r->held_status = status;
        snprintf(r->held_how, sizeof r->held_how, "%s", how);
        return;
    }
    if (!crash && WIFEXITED(status) && WEXITSTATUS(status) == ZT_EXIT_DISK) { /* no restart mends a full disk */
        r->state = ZT_REP_FAILED;
        zt_coord_set_error(self, r, "%s %s (its disk is full: a failure of the system, not the program; the job "
                           "fails)", r->name, how);
        zt_coord_stop_all(self, ZT_AFTER_FINISH, ZT_JOB_FAILED);
        return;
    }
    if (!crash) {
        r->state = ZT_REP_FAILED;
        zt_coord_set_error(self, r, "%s %s (a user error: the job fails)", r->name, how);
        zt_coord_stop_all(self, ZT_AFTER_FINISH, ZT_JOB_FAILED);
        return;
    }
    if (r->killed_by_us)
        zt_warn("%s %s: ztrain's own kill, as it %s (handled as a crash)", r->name, how, r->killed_why);
    else
        zt_warn("%s %s (%s)", r->name, how, system ? "a failure of the system, not the program" : "a crash");
    if (r->restarts < self->sv->max_restarts) {
        s_restart(self, r, true);
        return;
    }
    if (zt_coord_elastic_lose(self, r, "its restarts are used up", false))
        return;
    if (zt_coord_record_retry(self->rec, self->plan->disable_retries)) {
        self->layout.incarnation++;
        r->state = ZT_REP_RESTARTING;
        zt_warn("%s crashed %d times: retrying the whole job (retry %d of %d)", r->name,
                r->restarts + 1, zt_coord_record_retries(self->rec), zt_coord_record_max_retries(self->rec));
        zt_coord_stop_all(self, ZT_AFTER_RESPAWN, ZT_JOB_FAILED);
        return;
    }
    r->state = ZT_REP_FAILED;
    zt_coord_set_error(self, r, "%s %s after %d restarts%s%s", who, how, r->restarts,
                       self->plan->disable_retries ? " (retries disabled)" : " and every job retry was used", after);
    zt_coord_stop_all(self, ZT_AFTER_FINISH, ZT_JOB_FAILED);
}

/* Whether any evaluator is running. */
static bool s_evaluator_running(const zt_coord_t *self)
{
    for (int i = 0; i < self->nreps; i++)
        if (self->reps[i].pool == 3 && self->reps[i].handle && self->reps[i].state != ZT_REP_SUCCEEDED)
            return true;
    return false;
}

/* The primary finished, its final model announced (model/ckpt-N) and not
 * scored yet, evaluators running: they get ZT_EVAL_FINAL_MS to score it
 * before the job ends (zt_coord_check_final_evaluation). */
static bool s_await_final_evaluation(zt_coord_t *self)
{
    int64_t wait = zt_knob_int(ZT_KNOB_EVAL_FINAL_MS), step = self->last_ckpt.u.CHECKPOINT.step;
    if (wait <= 0 || strncmp(self->last_ckpt.u.CHECKPOINT.name, "model/", 6) || !s_evaluator_running(self) ||
        zt_coord_record_evaluated(self->rec, step, NULL))
        return false;
    self->sv->final_eval_step = step;
    self->sv->final_eval_deadline = zt_now_ms() + wait;
    zt_info("the primary replica finished: the evaluators have up to %lld ms to score its final model (%s, "
            "step %lld)", (long long) wait, self->last_ckpt.u.CHECKPOINT.name, (long long) step);
    return true;
}

void zt_coord_check_final_evaluation(zt_coord_t *self)
{
    if (!self->sv->final_eval_deadline || self->stopping)
        return;
    bool late = zt_now_ms() >= self->sv->final_eval_deadline;
    if (!late && s_evaluator_running(self) && !zt_coord_record_evaluated(self->rec, self->sv->final_eval_step, NULL))
        return;
    self->sv->final_eval_deadline = 0;
    if (late)
        zt_warn("the final model was not scored within ZT_EVAL_FINAL_MS: ending the job without its score");
    zt_info("stopping the others");
    zt_coord_stop_all(self, ZT_AFTER_FINISH, ZT_JOB_SUCCEEDED);
}

/* Stopped by a signal that ztrain did not send (a spot machine's
 * shutdown, an operator's kill, a scheduler): SIGTERM or SIGINT, or the
 * status a program that caught one exits with (ZT_EXIT_STOPPED, 130); up
 * to ZT_MAX_PREEMPTIONS times per replica. */
static bool s_preempted(const zt_coord_t *self, const zt_crep_t *r, int status)
{
    return zt_wait_status_stopped(status) && !r->killed_by_us && r->preemptions < self->sv->max_preemptions;
}

void zt_coord_replica_exited(zt_coord_t *self, zt_crep_t *r, int status)
{
    char lost[1024]; /* asked while the handle still names the replica's node */
    bool node_lost = !(WIFEXITED(status) && WEXITSTATUS(status) == 0) && !self->stopping &&
                     self->backend->node_lost && self->backend->node_lost(self->backend, r->handle, lost, sizeof lost);
    self->backend->release(self->backend, &r->handle);
    r->registered = false;
    zframe_destroy(&r->identity);
    r->last_status = status;
    zt_crep_read_output(r, self->opts.echo);
    if (node_lost && zt_coord_elastic_lose(self, r, lost, true)) /* an elastic pool goes on without it */
        return;
    if (node_lost) {
        r->state = ZT_REP_FAILED;
        zt_coord_node_lost(self, lost);
        return;
    }
    char how[64];
    if (WIFEXITED(status))
        snprintf(how, sizeof how, "exited with status %d", WEXITSTATUS(status));
    else
        snprintf(how, sizeof how, "was killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    if (r->log)
        fprintf(r->log, "=== ztrain: %s %s\n", r->name, how);
    if (self->stopping) {
        zt_info("%s %s", r->name, how);
        /* stopped by the job's end: a cancel's replicas are CANCELLED, as the job */
        r->state = self->sv->final_state == ZT_JOB_CANCELLED             ? ZT_REP_CANCELLED
                   : WIFEXITED(status) && WEXITSTATUS(status) == 0 ? ZT_REP_SUCCEEDED
                                                                    : ZT_REP_STOPPED;
        zt_coord_write_state(self);
        return;
    }
    if (zt_coord_elastic_left(self, r, how))
        return;
    if (WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) >= 128) || r->killed_by_us)
        s_note_loss(self, r, how);
    if (s_preempted(self, r, status)) {
        r->preemptions++;
        zt_coord_record_preempted(self->rec);
        zt_warn("%s %s: a signal ztrain did not send, so a preemption (not a crash, not the end of its work)",
                r->name, how);
        if (!zt_coord_elastic_preempted(self, r, how))
            s_restart(self, r, false);
        return;
    }
    bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (ok) {
        zt_info("%s %s", r->name, how);
        r->state = ZT_REP_SUCCEEDED;
        zt_coord_judge_held(self, true); /* a failure held back comes before this success */
        zt_coord_write_state(self);
        if (self->stopping)
            return;
        const zt_format_t *f = zt_format_of(self->plan);
        if (f && f->awaited) { /* the job ends when every host's program has (SageMaker's) */
            int left = 0;
            for (int i = 0; i < self->nreps; i++)
                left += f->awaited(self->plan, self->reps[i].pool) && self->reps[i].state != ZT_REP_SUCCEEDED;
            if (!left) {
                zt_info("every host's program finished");
                zt_coord_stop_all(self, ZT_AFTER_FINISH, ZT_JOB_SUCCEEDED);
            }
            return;
        }
        if (r->pool == 0 && !s_await_final_evaluation(self)) {
            zt_info("the primary replica finished: stopping the others");
            zt_coord_stop_all(self, ZT_AFTER_FINISH, ZT_JOB_SUCCEEDED);
        }
        else
            zt_coord_check_all_up(self);
        return;
    }
    s_on_failure(self, r, status, how, zt_now_ms(), false);
}

void zt_coord_judge_held(zt_coord_t *self, bool all)
{
    int64_t now = zt_now_ms();
    for (int i = 0; i < self->nreps; i++) {
        zt_crep_t *r = &self->reps[i];
        if (!r->held_until || (!all && now < r->held_until))
            continue;
        r->held_until = 0;
        if (self->stopping) { /* the job ends (or restarts) for another reason already */
            r->state = ZT_REP_STOPPED;
            continue;
        }
        s_on_failure(self, r, r->held_status, r->held_how, r->held_exit_ms, true);
    }
}
