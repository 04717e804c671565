/* The control plane's messages from the replicas: REGISTER, HEARTBEAT,
 * CHECKPOINT, METRIC, LATENCY, DONE, REJOINED, REGROUPED. Nothing from the network is
 * trusted: a message that does not decode, or from no replica, or from a
 * replica speaking for another, is counted, logged (zt_refusals) and
 * dropped. */
#include "chief/zt_coord_int.h"
#include "base/zt_hist.h"
#include "base/zt_util.h"
#include "state/zt_ckpt.h"
#include "wire/zt_auth.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_knobs.h"
#include "ztrain/zt_log.h"
#include "ztrain/zt_replica.h"
#include <czmq.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

struct zt_coord_ctl_t {
    zt_refusals_t drop_log[ZT_DROP_REASONS]; /* dropped messages by reason: logged at most once per 5 s each */
    bool backlog;               /* control messages are still queued: heartbeats may be among them */
    int64_t hb_ms, hb_timeout_ms, register_timeout_ms;
};

zt_coord_ctl_t *zt_coord_ctl_new(void)
{
    zt_coord_ctl_t *self = calloc(1, sizeof *self);
    self->hb_ms = zt_knob_int(ZT_KNOB_HEARTBEAT_MS);
    self->hb_timeout_ms = zt_knob_int(ZT_KNOB_HEARTBEAT_TIMEOUT_MS);
    self->register_timeout_ms = zt_knob_int(ZT_KNOB_REGISTER_TIMEOUT_MS);
    return self;
}

void zt_coord_ctl_destroy(zt_coord_ctl_t **self_p)
{
    free(*self_p);
    *self_p = NULL;
}

static void s_kill_silent(zt_coord_t *self, zt_crep_t *r)
{
    zt_warn("%s %s: killing it, to be handled as a crash", r->name, r->killed_why);
    r->killed_by_us = true;
    self->backend->signal(self->backend, r->handle, SIGKILL);
}

void zt_coord_check_silent(zt_coord_t *self)
{
    if (self->ctl->backlog)
        return;
    int64_t now = zt_now_ms();
    for (int i = 0; i < self->nreps; i++) {
        zt_crep_t *r = &self->reps[i];
        if (!r->handle || r->killed_by_us)
            continue;
        if (r->registered && now - r->last_hb_ms > self->ctl->hb_timeout_ms) {
            snprintf(r->killed_why, sizeof r->killed_why, "sent no heartbeat for %lld ms",
                     (long long) (now - r->last_hb_ms));
            s_kill_silent(self, r);
        }
        else if (!r->registered && r->expect_register && now - r->started_ms > self->ctl->register_timeout_ms) {
            snprintf(r->killed_why, sizeof r->killed_why, "did not register within %lld ms",
                     (long long) self->ctl->register_timeout_ms);
            s_kill_silent(self, r);
        }
    }
}

/* A dropped message, logged at most once per 5 s per reason. */
static void s_refuse(zt_coord_t *self, zt_drop_t why, const char *what)
{
    zt_refusals_count(&self->ctl->drop_log[why], what, zt_now_ms());
}

static zt_crep_t *s_find_at(zt_coord_t *self, int pool, int index)
{
    for (int i = 0; i < self->nreps; i++)
        if (self->reps[i].pool == pool && self->reps[i].index == index)
            return &self->reps[i];
    return NULL;
}

/* REGISTER: a replica of this incarnation is welcomed, told the job's
 * state and (an evaluator) the last checkpoint; one of an older
 * incarnation is told to shut down. */
static void s_on_register(zt_coord_t *self, zt_crep_t *r, zframe_t *id, const zt_msg_t *m)
{
    if (m->incarnation != self->layout.incarnation) {
        zt_msg_t s = { .type = ZT_MSG_SHUTDOWN, .incarnation = self->layout.incarnation, .seq = self->seq++ };
        zt_msg_set_str(s.u.SHUTDOWN.reason, "stale incarnation");
        zt_msg_send(self->router, id, &s);
        return;
    }
    /* a second REGISTER from another connection while the registered one
     * heartbeats and its process lives is an impostor with the replica's
     * keys (taking the slot would get the real one killed as silent) */
    int64_t silent = zt_now_ms() - r->last_hb_ms;
    pid_t pid = r->handle ? (pid_t) self->backend->pid(self->backend, r->handle) : 0;
    if (r->registered && r->identity && !zframe_eq(r->identity, id) && silent < self->ctl->hb_timeout_ms && pid > 0 &&
        kill(pid, 0) == 0) {
        zt_coord_record_refused(self->rec, ZT_RECORD_UNKNOWN_SENDER);
        char what[200];
        snprintf(what, sizeof what, "REGISTER as %s from a new connection while %s runs (pid %lld, its heartbeat "
                 "%lld ms ago)", r->name, r->name, (long long) pid, (long long) silent);
        s_refuse(self, ZT_DROP_UNREGISTERED, what);
        return;
    }
    zframe_destroy(&r->identity);
    r->identity = zframe_dup(id);
    r->registered = true;
    r->last_hb_ms = zt_now_ms();
    if (r->state == ZT_REP_STARTING || r->state == ZT_REP_RESTARTING)
        r->state = ZT_REP_RUNNING;
    zt_info("%s registered (%s, pid %lld)", r->name, m->u.REGISTER.role, (long long) m->u.REGISTER.pid);
    zt_msg_t w = { .type = ZT_MSG_WELCOME, .incarnation = self->layout.incarnation, .seq = self->seq++ };
    w.u.WELCOME.heartbeat_ms = self->ctl->hb_ms;
    w.u.WELCOME.replicas = self->nreps;
    zt_msg_send(self->router, id, &w);
    zt_msg_t s = { .type = ZT_MSG_STATUS, .incarnation = self->layout.incarnation, .seq = self->seq++ };
    zt_msg_set_str(s.u.STATUS.state, zt_job_state_name(self->state));
    s.u.STATUS.running = self->state == ZT_JOB_RUNNING;
    zt_msg_send(self->router, id, &s);
    if (r->pool == 3 && self->last_ckpt.type == ZT_MSG_CHECKPOINT &&
        !zt_coord_record_evaluated(self->rec, self->last_ckpt.u.CHECKPOINT.step, r->name)) { /* (not again after its restart) */
        self->last_ckpt.seq = self->seq++;
        zt_msg_send(self->router, id, &self->last_ckpt);
    }
    zt_coord_write_state(self);
    zt_coord_check_all_up(self);
}

/* A checkpoint notice: recorded in job.json and, from a replica still
 * running (its file server up), passed to the evaluators. */
static void s_on_checkpoint(zt_coord_t *self, zt_crep_t *r, zt_msg_t *m, bool tell_evaluators)
{
    if (!zt_ckpt_name_ok(m->u.CHECKPOINT.name)) { /* it becomes a path on the evaluators */
        char what[200];
        snprintf(what, sizeof what, "a checkpoint notice from %s: '%.64s' is not a checkpoint's name "
                 "(checkpoints/ckpt-N or model/ckpt-N)", r->name, m->u.CHECKPOINT.name);
        s_refuse(self, ZT_DROP_BAD_CHECKPOINT, what);
        return;
    }
    zt_info("checkpoint %s at step %lld (from %s)", m->u.CHECKPOINT.name, (long long) m->u.CHECKPOINT.step,
            r->name);
    /* written within a second (s_timers): a flood costs no fsync each */
    zt_coord_record_checkpoint(self->rec, m->u.CHECKPOINT.step, m->u.CHECKPOINT.name);
    if (!tell_evaluators)
        return;
    self->last_ckpt = *m;
    for (int k = 0; k < self->nreps; k++)
        if (self->reps[k].pool == 3 && self->reps[k].registered) {
            m->seq = self->seq++;
            zt_msg_send(self->router, self->reps[k].identity, m);
        }
}

/* job.json's metrics (zt_coord_record_metric), what is refused said. */
static void s_record_metric(zt_coord_t *self, zt_crep_t *r, const char *name, double value, int64_t step)
{
    zt_record_rc_t rc = zt_coord_record_metric(self->rec, r->name, name, value, step);
    char what[200];
    if (rc == ZT_RECORD_TOO_MANY) {
        snprintf(what, sizeof what, "a metric '%.64s' from %s: it already reports %d metrics, the most "
                 "job.json keeps per replica", name, r->name, ZT_COORD_MAX_METRIC_NAMES);
        s_refuse(self, ZT_DROP_METRIC_LIMIT, what);
    }
    else if (rc == ZT_RECORD_NOT_A_KEY) {
        snprintf(what, sizeof what, "a metric from %s whose name is not a JSON key", r->name);
        s_refuse(self, ZT_DROP_MALFORMED, what);
    }
}

/* A checkpoint a replica could not write: said at once, and kept as an
 * event of job.json (the newest ZT_COORD_MAX_RECORDS) for `ztrain status`. */
static void s_record_checkpoint_error(zt_coord_t *self, zt_crep_t *r, int code, int64_t step)
{
    const char *why = zt_error_name(code) ? zt_strerror(code) : "an unknown error";
    zt_warn("%s cannot write checkpoints: the checkpoint of step %lld failed: %s", r->name, (long long) step, why);
    zt_coord_record_event(self->rec, "checkpointFailed", json_pack("{s:s, s:I, s:s}", "replica", r->name, "step",
                                                                   (json_int_t) step, "error", why));
}

/* METRIC: an evaluator's result is an evaluation; anyone else's a metric
 * (and a sign of life); a failed checkpoint an event. */
static void s_on_metric(zt_coord_t *self, zt_crep_t *r, const zt_msg_t *m)
{
    if (r->pool == 3) {
        zt_info("evaluation by %s: %s = %.4f at step %lld", r->name, m->u.METRIC.name, m->u.METRIC.value,
                (long long) m->u.METRIC.step);
        zt_coord_record_evaluation(self->rec, r->name, m->u.METRIC.name, m->u.METRIC.value, m->u.METRIC.step);
    }
    else if (!strcmp(m->u.METRIC.name, ZT_METRIC_CHECKPOINT_ERROR)) {
        r->last_hb_ms = zt_now_ms();
        s_record_checkpoint_error(self, r, (int) m->u.METRIC.value, m->u.METRIC.step);
    }
    else {
        r->last_hb_ms = zt_now_ms();
        /* The replica's own progress line says it already; no echo here. */
        zt_debug("%s metric %s = %g (step %lld)", r->name, m->u.METRIC.name, m->u.METRIC.value,
                 (long long) m->u.METRIC.step);
        s_record_metric(self, r, m->u.METRIC.name, m->u.METRIC.value, m->u.METRIC.step);
    }
    /* job.json holds every replica's series and every evaluation: rewritten
     * once a second (s_timers), not once per report, whoever sends them */
}

/* A joiner the group's change could not start (NULL: none): the job fails. */
static void s_joiner_failed(zt_coord_t *self, zt_crep_t *r)
{
    if (!r)
        return;
    zt_coord_set_error(self, r, "%s could not be started to join the group", r->name);
    zt_coord_stop_all(self, ZT_AFTER_FINISH, ZT_JOB_FAILED);
}

/* A replica's latency histogram (zt_hist): kept as job.json's
 * latency.<kind>.<replica>, which /metrics serves. A kind not known, counts
 * that do not parse or a sum that is not a finite number >= 0 are malformed. */
static void s_on_latency(zt_coord_t *self, zt_crep_t *r, const zt_msg_t *m)
{
    uint64_t counts[ZT_HIST_NB + 1];
    double sum = m->u.LATENCY.sum;
    int kind = zt_hist_kind(m->u.LATENCY.kind);
    if (kind < 0 || zt_hist_parse(m->u.LATENCY.counts, counts) != 0 || !isfinite(sum) || sum < 0) {
        zt_coord_record_refused(self->rec, ZT_RECORD_MALFORMED);
        char what[200];
        snprintf(what, sizeof what, "latency histogram from %s: kind '%.32s', counts '%.64s'", r->name,
                 m->u.LATENCY.kind, m->u.LATENCY.counts);
        s_refuse(self, ZT_DROP_BAD_LATENCY, what);
        return;
    }
    json_t *le = json_array(), *c = json_array();
    for (int b = 0; b < ZT_HIST_NB; b++)
        json_array_append_new(le, json_real(zt_hist_bounds[b]));
    for (int b = 0; b <= ZT_HIST_NB; b++)
        json_array_append_new(c, json_integer((json_int_t) (counts[b] > INT64_MAX ? INT64_MAX : counts[b])));
    zt_coord_record_latency(self->rec, zt_hist_name(kind), r->name,
                            json_pack("{s:o, s:o, s:f}", "le", le, "counts", c, "sum", sum));
}

/* One decoded control message from identity id, whose connection
 * authenticated as replica `who` (NULL on a plain socket). A replica speaks
 * only for itself: a message claiming another is refused. Only a running
 * replica may register, and only a registered one (from the identity it
 * registered with) may send anything else. */
static void s_on_message(zt_coord_t *self, zframe_t *id, const char *who, zt_msg_t *m)
{
    zt_crep_t *r = s_find_at(self, m->pool, m->index);
    if (!r) {
        zt_coord_record_refused(self->rec, ZT_RECORD_UNKNOWN_SENDER);
        char what[160];
        snprintf(what, sizeof what, "%s from workerpool%d-%d: no such replica", zt_msg_type_name(m->type), m->pool,
                 m->index);
        s_refuse(self, ZT_DROP_UNKNOWN_SENDER, what);
        return;
    }
    /* a stop's save, sent just before the replica ended and read after: on
     * disk, so recorded (its sender's keys are the replica's), though its
     * file server is gone */
    bool late_save = m->type == ZT_MSG_CHECKPOINT && zt_auth_on() && who && !strcmp(who, r->name);
    if (!r->handle) { /* sent before it ended (the job stopping, a restart): still queued */
        if (late_save)
            s_on_checkpoint(self, r, m, false);
        else
            zt_debug("dropped %s from %s: it has ended", zt_msg_type_name(m->type), r->name);
        return;
    }
    if (zt_auth_on() && (!who || strcmp(who, r->name))) { /* its keys are another replica's */
        zt_coord_record_refused(self->rec, ZT_RECORD_WRONG_IDENTITY);
        char what[200];
        snprintf(what, sizeof what, "%s claiming to be %s from a connection that authenticated as %s",
                 zt_msg_type_name(m->type), r->name, who && *who ? who : "no replica");
        s_refuse(self, ZT_DROP_WRONG_IDENTITY, what);
        return;
    }
    if (m->type == ZT_MSG_REGISTER) {
        s_on_register(self, r, id, m);
        return;
    }
    if ((!r->registered || !zframe_eq(r->identity, id)) && late_save) { /* ... and restarted already */
        s_on_checkpoint(self, r, m, false);
        return;
    }
    if (!r->registered || !zframe_eq(r->identity, id)) {
        zt_coord_record_refused(self->rec, ZT_RECORD_UNKNOWN_SENDER);
        char what[160];
        snprintf(what, sizeof what, "%s from %s: not registered (or from another identity)",
                 zt_msg_type_name(m->type), r->name);
        s_refuse(self, ZT_DROP_UNREGISTERED, what);
        return;
    }
    switch (m->type) {
    case ZT_MSG_HEARTBEAT:
        r->last_hb_ms = zt_now_ms();
        r->hb_step = m->u.HEARTBEAT.step;
        if (r->pool <= 1)
            zt_coord_settle_reducers(self, r->hb_step);
        break;
    case ZT_MSG_CHECKPOINT:
        s_on_checkpoint(self, r, m, true);
        break;
    case ZT_MSG_METRIC:
        s_on_metric(self, r, m);
        break;
    case ZT_MSG_LATENCY:
        s_on_latency(self, r, m);
        break;
    case ZT_MSG_DONE:
        zt_info("%s done: %s", r->name, m->u.DONE.reason);
        break;
    case ZT_MSG_REGROUPED:
        s_joiner_failed(self, zt_coord_elastic_regrouped(self, r, m->u.REGROUPED.group, m->u.REGROUPED.step, true));
        break;
    case ZT_MSG_REJOINED: /* a joiner */
        s_joiner_failed(self, zt_coord_elastic_regrouped(self, r, self->layout.group, m->u.REJOINED.step, false));
        if (r->rejoining) {
            r->rejoining = false;
            r->rejoins++;
            zt_info("%s rejoined the group at step %lld (round %lld), %lld ms after it was lost", r->name,
                    (long long) m->u.REJOINED.step, (long long) m->u.REJOINED.gen,
                    (long long) (zt_now_ms() - r->lost_ms));
            zt_coord_write_state(self);
        }
        break;
    default:
        zt_debug("ignored %s from %s", zt_msg_type_name(m->type), r->name);
    }
}

/* One received message: its body (data, size; well_formed false when the
 * message was not [identity, body]) from identity id, whose connection
 * authenticated as who. Undecodable input is counted and dropped. */
static void s_on_body(zt_coord_t *self, zframe_t *id, const void *data, size_t size, bool well_formed,
                      const char *who)
{
    zt_msg_t m;
    int rc = well_formed ? zt_msg_decode(data, size, &m, zt_coord_record_drops(self->rec)) : ZT_EPROTO;
    if (rc == ZT_OK) {
        s_on_message(self, id, who, &m);
        return;
    }
    if (!well_formed)
        zt_coord_record_refused(self->rec, ZT_RECORD_MALFORMED);
    char what[200];
    snprintf(what, sizeof what, "a malformed control message (%s); drops so far: %llu malformed, "
             "%llu wrong version", zt_strerror(rc), (unsigned long long) zt_coord_record_drops(self->rec)->malformed,
             (unsigned long long) zt_coord_record_drops(self->rec)->bad_version);
    s_refuse(self, ZT_DROP_MALFORMED, what);
}

/* Control messages waiting on the router: [identity, body] each; anything
 * else, or a body that does not decode, is counted and dropped. */
void zt_coord_on_control(zt_coord_t *self)
{
    self->ctl->backlog = true; /* until the queue is seen empty */
    for (int budget = 0; budget < 256; budget++) {
        zmsg_t *zm = zmsg_recv_nowait(self->router);
        if (!zm) {
            self->ctl->backlog = false;
            return;
        }
        zframe_t *id = zmsg_pop(zm);
        zframe_t *body = zmsg_pop(zm);
        bool shape = body && zmsg_size(zm) == 0;
        s_on_body(self, id, shape ? zframe_data(body) : NULL, shape ? zframe_size(body) : 0, shape,
                  zt_auth_peer(body));
        zframe_destroy(&id);
        zframe_destroy(&body);
        zmsg_destroy(&zm);
    }
}

void zt_coord_start(zt_coord_t *self) { zt_coord_spawn_all(self, zt_coord_on_control); }

void zt_coord_handle(zt_coord_t *self, zframe_t *id, const void *body, size_t len, const char *who)
{
    s_on_body(self, id, body, len, true, who);
}
