/* The job document, <job-dir>/job.json: written whole and atomically at
 * every change of state (metrics at most once a second), read back when
 * Slurm runs a requeued job again. */
#include "chief/zt_coord_int.h"
#include "formats/zt_format.h"
#include "base/zt_json.h"
#include "base/zt_util.h"
#include "wire/zt_auth.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_knobs.h"
#include "ztrain/zt_log.h"
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

void zt_coord_write_state(zt_coord_t *self)
{
    json_t *reps = json_array();
    for (int i = 0; i < self->nreps; i++) {
        zt_crep_t *r = &self->reps[i];
        json_t *o = json_pack("{s:s, s:i, s:i, s:s, s:s, s:i, s:i, s:b, s:s}", "name", r->name,
                              "pool", r->pool, "index", r->index, "address", "",
                              "state", zt_replica_state_name(r->state), "pid",
                              (int) (r->handle ? self->backend->pid(self->backend, r->handle) : 0),
                              "restarts", r->total_restarts, "registered", r->registered,
                              "log", r->log_path ? r->log_path : "");
        const zt_place_t *pl = zt_layout_place(&self->layout, r->pool, r->index);
        json_object_set_new(o, "address", json_sprintf("%s:%d", pl->addr, pl->port));
        json_object_set_new(o, "host", json_string(pl->host));
        json_object_set_new(o, "rejoins", json_integer(r->rejoins));
        json_object_set_new(o, "preemptions", json_integer(r->preemptions));
        json_object_set_new(o, "rejoining", json_boolean(r->rejoining));
        json_object_set_new(o, "member", json_boolean(zt_coord_is_member(self, r)));
        if (r->last_status >= 0 && WIFEXITED(r->last_status))
            json_object_set_new(o, "exitStatus", json_integer(WEXITSTATUS(r->last_status)));
        else
            json_object_set_new(o, "exitStatus", json_null());
        if (r->last_status >= 0 && WIFSIGNALED(r->last_status))
            json_object_set_new(o, "signal", json_integer(WTERMSIG(r->last_status)));
        else
            json_object_set_new(o, "signal", json_null());
        json_array_append_new(reps, o);
    }
    json_t *doc = json_pack(
        "{s:s, s:s, s:i, s:s?, s:s, s:i, s:o, s:o}",
        "name", self->plan->display_name, "jobDir", self->layout.job_dir,
        "coordinatorPid", (int) getpid(), "coordinator", self->layout.coordinator,
        "state", zt_job_state_name(self->state), "incarnation", self->layout.incarnation,
        "replicas", reps, "plan", zt_plan_to_json(self->plan));
    json_object_set_new(doc, "security", json_string(zt_auth_on() ? "curve" : "off"));
    json_object_set_new(doc, "coordinatorProcess", zt_json_this_process());
    if (self->backend->allocation)
        json_object_set_new(doc, "slurmJobId", json_string(self->backend->allocation));
    json_t *elastic = zt_coord_elastic_json(self);
    if (elastic)
        json_object_set_new(doc, "elastic", elastic);
    zt_coord_record_into(self->rec, doc);
    json_object_set_new(json_object_get(doc, "controlPlaneDrops"), "unauthenticated",
                        json_integer((json_int_t) zt_auth_refused()));
    if (self->prom) {
        if (self->metrics_token_file)
            json_object_set_new(doc, "metricsTokenFile", json_string(self->metrics_token_file));
        json_object_set_new(doc, "metricsUrl", json_sprintf("http://%s:%d/metrics", zt_knob_str(ZT_KNOB_METRICS_ADDR),
                                                            zt_prom_port(self->prom)));
        zt_prom_update(self->prom, doc);
    }
    char *text = json_dumps(doc, JSON_INDENT(2));
    char *path = zt_strdupf("%s/job.json", self->layout.job_dir);
    if (zt_write_file_atomic(path, text, strlen(text)) != ZT_OK)
        zt_warn("cannot write %s: %s", path, strerror(errno));
    free(path);
    free(text);
    json_decref(doc);
}

void zt_coord_set_state(zt_coord_t *self, zt_job_state_t state)
{
    if (self->state == state && zt_coord_record_transitions(self->rec) > 0)
        return;
    self->state = state;
    if (state >= ZT_JOB_SUCCEEDED)
        zt_coord_elastic_end(self);
    zt_coord_record_transition(self->rec, zt_job_state_name(state));
    zt_info("job %s: %s", self->plan->display_name, zt_job_state_name(state));
    zt_coord_write_state(self);
    /* Tell every registered replica. */
    zt_msg_t m = { .type = ZT_MSG_STATUS, .incarnation = self->layout.incarnation };
    zt_msg_set_str(m.u.STATUS.state, zt_job_state_name(state));
    m.u.STATUS.running = state == ZT_JOB_RUNNING;
    for (int i = 0; i < self->nreps; i++)
        if (self->reps[i].registered) {
            m.seq = self->seq++;
            zt_msg_send(self->router, self->reps[i].identity, &m);
        }
}

void zt_coord_set_error(zt_coord_t *self, zt_crep_t *r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void zt_coord_set_error(zt_coord_t *self, zt_crep_t *r, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_t *error = json_pack("{s:s}", "message", msg);
    zt_coord_record_set_error(self->rec, error);
    if (r) {
        if (r->log)
            fflush(r->log);
        char *tail = zt_file_tail(r->log_path, 2000);
        json_object_set_new(error, "replica", json_string(r->name));
        json_object_set_new(error, "logTail", json_string(tail ? tail : ""));
        zt_error("%s; last lines of %s:\n%s", msg, r->log_path, tail ? tail : "");
        free(tail);
    }
    else
        zt_error("%s", msg);
}

zt_job_state_t zt_coord_format_end(zt_coord_t *self, zt_job_state_t final)
{
    const zt_format_t *f = zt_format_of(self->plan);
    if (!f || !f->finish || (final != ZT_JOB_SUCCEEDED && final != ZT_JOB_FAILED))
        return final;
    char why[512], *failure = NULL;
    if (f->finish(&self->layout, final == ZT_JOB_SUCCEEDED, &failure, why, sizeof why) != 0) {
        zt_coord_set_error(self, NULL, "the job's output could not be written: %s", why);
        final = ZT_JOB_FAILED;
    }
    if (failure) { /* the service's failure reason: what the program wrote where its format says */
        json_t *error = zt_coord_record_error(self->rec);
        if (!error) {
            error = json_pack("{s:s}", "message", "the job failed");
            zt_coord_record_set_error(self->rec, error);
        }
        const char *was = json_string_value(json_object_get(error, "message"));
        json_object_set_new(error, "message", json_sprintf("%s; %s says: %s", was ? was : "",
                                                           f->failure_from, failure));
        json_object_set_new(error, "failureReason", json_string(failure));
        zt_error("%s says: %s", f->failure_from, failure);
        free(failure);
    }
    return final;
}

/* The earlier run's record (its job.json) carried on: retries, incarnation,
 * preemptions, transitions, checkpoints, evaluations, lost nodes, metrics
 * and the creation time. */
static void s_take_history(zt_coord_t *self, json_t *doc)
{
    self->layout.incarnation = (int) json_integer_value(json_object_get(doc, "incarnation"));
    zt_job_state_t was; /* where the record left off: QUEUED after it is a transition again */
    if (zt_job_state_parse(json_string_value(json_object_get(doc, "state")), &was))
        self->state = was;
    zt_coord_record_take(self->rec, doc);
}

/* The resume in the job's history: how the earlier run ended (its own end,
 * or its coordinator lost while the job ran), the checkpoint it goes on
 * from, and the steps the earlier run trained past it, trained again. */
static void s_note_resume(zt_coord_t *self, const json_t *doc)
{
    const char *was = json_string_value(json_object_get(doc, "state"));
    char how[160];
    if (zt_state_final(was))
        snprintf(how, sizeof how, "it ended %s", was);
    else
        snprintf(how, sizeof how, "its coordinator was lost while the job was %s (killed, or its machine went "
                 "down)", was ? was : "starting");
    int64_t from = zt_coord_record_last_checkpoint(self->rec);
    /* the newest step the chief reported (its metrics') */
    int64_t reached = zt_coord_record_step_of(self->rec, "workerpool0-0"), again = reached > from ? reached - from : 0;
    if (zt_state_final(was))
        zt_info("the earlier run: %s; going on from step %lld", how, (long long) from);
    else
        zt_warn("the earlier run: %s, at step %lld; going on from the checkpoint of step %lld: %lld steps are "
                "trained again", how, (long long) reached, (long long) from, (long long) again);
    zt_coord_record_event(self->rec, "resumed", json_pack("{s:s, s:s, s:I, s:I, s:I}", "earlierState", was ? was : "",
                                                          "earlierEnd", how, "earlierStep", (json_int_t) reached,
                                                          "fromStep", (json_int_t) from, "stepsTrainedAgain",
                                                          (json_int_t) again));
}

/* A job folder holding this job's earlier run (the same spec resumed, or
 * --resume, after the job ended or its coordinator was killed, in another
 * Slurm allocation too; `ztrain run` checked it is this job's): the run
 * goes on as that job's next incarnation, with its history. A run of the
 * same allocation again (Slurm requeued it) has its own path
 * (zt_coord_continue_requeued). */
void zt_coord_continue_earlier(zt_coord_t *self)
{
    zt_remove_dead_pid_entries(self->opts.job_dir, "job.json.tmp."); /* a killed coordinator's write */
    char *path = zt_strdupf("%s/job.json", self->opts.job_dir);
    json_t *doc = json_load_file(path, 0, NULL);
    free(path);
    const char *id = json_string_value(json_object_get(doc, "slurmJobId"));
    if (!json_is_object(doc) || !json_is_array(json_object_get(doc, "transitions")) ||
        (id && self->backend->allocation && !strcmp(id, self->backend->allocation))) {
        json_decref(doc);
        return;
    }
    s_take_history(self, doc);
    self->layout.incarnation++;
    zt_info("continuing the job's record from its earlier run (created %s): incarnation %d, %d job retr%s so far",
            zt_coord_record_created(self->rec), self->layout.incarnation, zt_coord_record_retries(self->rec), zt_coord_record_retries(self->rec) == 1 ? "y" : "ies");
    s_note_resume(self, doc);
    json_decref(doc);
}

/* A run of the same allocation again (Slurm requeued it after a lost node,
 * or a preemption): the job goes on with its history, as its next retry
 * when the earlier run could not say why it ended. false (logged) when
 * that job has ended already, so there is nothing to run. */
bool zt_coord_continue_requeued(zt_coord_t *self)
{
    long requeues = self->backend->requeues;
    if (!self->backend->allocation || requeues <= 0)
        return true;
    char *path = zt_strdupf("%s/job.json", self->opts.job_dir);
    json_t *doc = json_load_file(path, 0, NULL);
    free(path);
    const char *id = json_string_value(json_object_get(doc, "slurmJobId"));
    if (!doc || !id || strcmp(id, self->backend->allocation)) {
        json_decref(doc);
        return true;
    }
    const char *st = json_string_value(json_object_get(doc, "state"));
    if (zt_state_final(st)) {
        zt_error("Slurm ran job %s again (requeue %ld), but the job ended %s already: nothing is run", id, requeues,
                 st);
        json_decref(doc);
        return false;
    }
    s_take_history(self, doc);
    bool ok = true;
    if (st && strcmp(st, "QUEUED")) {
        /* the earlier run could not record a retry: its allocation was taken
         * from under it (the coordinator's own node lost) */
        char *why = zt_strdupf("the allocation ended under the job while it was %s (the coordinator's "
                               "node lost?), and Slurm requeued it", st);
        zt_coord_record_lost_node(self->rec, why);
        if (zt_coord_record_retry(self->rec, self->plan->disable_retries)) {
            self->layout.incarnation++;
            zt_warn("%s", why);
        }
        else {
            char *msg = zt_strdupf("%s, but no job retry is left: the job fails", why);
            zt_error("%s", msg);
            zt_coord_record_set_error(self->rec, json_pack("{s:s, s:s}", "message", msg, "lostNode", why));
            free(msg);
            zt_coord_set_state(self, ZT_JOB_FAILED);
            ok = false;
        }
        free(why);
    }
    if (ok)
        zt_info("Slurm ran job %s again (requeue %ld): job retry %d of %d, incarnation %d, %d preemption%s so far",
                id, requeues, zt_coord_record_retries(self->rec), zt_coord_record_max_retries(self->rec),
                self->layout.incarnation, zt_coord_record_preemptions(self->rec),
                zt_coord_record_preemptions(self->rec) == 1 ? "" : "s");
    json_decref(doc);
    return ok;
}
