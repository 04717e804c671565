/* ztrain status and ztrain cancel, and the effective state of a job or
 * study that they, logs, wait and list share: job.json or study.json as
 * written, FAILED when the process that writes it is gone, and a Slurm
 * job's state from Slurm itself while it has no job.json. */
#include "cli/zt_cli.h"
#include "plan/zt_state.h"
#include "launch/zt_slurm.h"
#include "tune/zt_study.h"
#include "base/zt_json.h"
#include "base/zt_text.h"
#include "base/zt_util.h"
#include "ztrain/ztrain.h"
#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The job's state in dir/job.json (NULL: none yet), into buf. */
const char *zt_cli_job_state(const char *dir, char *buf, size_t size)
{
    char *path = zt_strdupf("%s/job.json", dir);
    json_t *doc = json_load_file(path, 0, NULL);
    free(path);
    const char *st = json_string_value(json_object_get(doc, "state"));
    if (st)
        snprintf(buf, size, "%s", st);
    json_decref(doc);
    return st ? buf : NULL;
}

/* The exit status `ztrain status` gives a state: as `ztrain run` would,
 * and 0 while the job runs. */
static int s_state_exit(const char *state)
{
    return state && !zt_state_final(state) ? ZT_CLI_OK : zt_state_exit_code(state);
}

/* A job.json or study.json whose state is not final, but whose process is
 * gone (killed, or the machine restarted): its state is FAILED, and the
 * record says so, in what status shows (the file itself is left as it is). */
static void s_check_owner(json_t *doc, const char *record_key, const char *what)
{
    const char *state = json_string_value(json_object_get(doc, "state"));
    json_t *rec = json_object_get(doc, record_key);
    if (zt_state_final(state) || zt_json_process_alive(rec) != 0)
        return;
    char *msg = zt_strdupf("its %s (pid %lld on %s) is gone without recording an end: it was killed or "
                           "its machine restarted while the state was %s", what,
                           (long long) json_integer_value(json_object_get(rec, "pid")),
                           json_string_value(json_object_get(rec, "host")), state ? state : "?");
    json_object_set_new(doc, "recordedState", json_string(state ? state : "?"));
    json_object_set_new(doc, "state", json_string("FAILED"));
    json_object_set_new(doc, "processGone", json_true());
    json_object_set_new(doc, "error", json_pack("{s:s}", "message", msg));
    free(msg);
}

/* A string of job.json, safe to print (its writer may be a stranger or a
 * replica's words): control bytes as \xNN, newlines too. */
static const char *s_str(json_t *o, const char *key, int slot)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? zt_text_safe(s, slot) : "?";
}

static void s_print_job(json_t *doc)
{
    printf("job %s: %s", s_str(doc, "name", 0), s_str(doc, "state", 1));
    if (json_is_true(json_object_get(doc, "processGone")))
        printf(" (recorded %s, but the coordinator is gone)", s_str(doc, "recordedState", 0));
    json_t *sl = json_object_get(doc, "slurm");
    if (sl) {
        const char *reason = json_string_value(json_object_get(sl, "reason"));
        bool said = reason && *reason && strcmp(reason, "None");
        printf("\n  Slurm job %s: %s%s%s%s", s_str(sl, "jobId", 0), s_str(sl, "state", 1), said ? " (" : "",
               said ? s_str(sl, "reason", 2) : "", said ? ")" : "");
    }
    json_t *plan = json_object_get(doc, "plan");
    if (json_string_value(json_object_get(plan, "format")))
        printf("\n  from %s (%s)", s_str(plan, "source", 1), s_str(plan, "format", 0));
    printf("\n  incarnation %lld, job retries %lld, preemptions %lld\n",
           (long long) json_integer_value(json_object_get(doc, "incarnation")),
           (long long) json_integer_value(json_object_get(doc, "jobRetries")),
           (long long) json_integer_value(json_object_get(doc, "preemptions")));
    json_t *el = json_object_get(doc, "elastic");
    if (el)
        printf("  elastic: workerpool1 runs %lld replicas (%lld to %lld), membership generation %lld%s, %zu "
               "changes\n", (long long) json_integer_value(json_object_get(el, "replicas")),
               (long long) json_integer_value(json_object_get(el, "minReplicaCount")),
               (long long) json_integer_value(json_object_get(el, "maxReplicaCount")),
               (long long) json_integer_value(json_object_get(el, "group")),
               json_is_true(json_object_get(el, "changing")) ? ", changing" : "",
               json_array_size(json_object_get(el, "changes")));
    json_t *events = json_object_get(doc, "events"), *last = NULL, *resumed = NULL, *ev;
    size_t k;
    json_array_foreach(events, k, ev) {
        if (!strcmp(s_str(ev, "kind", 0), "checkpointFailed"))
            last = ev;
        if (!strcmp(s_str(ev, "kind", 0), "resumed"))
            resumed = ev;
    }
    if (resumed)
        printf("  resumed at %s: the earlier run: %s; from step %lld (%lld steps trained again)\n",
               s_str(resumed, "time", 0), s_str(resumed, "earlierEnd", 1),
               (long long) json_integer_value(json_object_get(resumed, "fromStep")),
               (long long) json_integer_value(json_object_get(resumed, "stepsTrainedAgain")));
    if (last)
        printf("  warning: %s cannot write checkpoints: the checkpoint of step %lld failed at %s: %s\n",
               s_str(last, "replica", 0), (long long) json_integer_value(json_object_get(last, "step")),
               s_str(last, "time", 1), s_str(last, "error", 2));
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(doc, "transitions"), i, v)
        printf("  %-10s %s\n", s_str(v, "state", 0), s_str(v, "time", 1));
    printf("  %-16s %-10s %8s %8s %6s %s\n", "replica", "state", "pid", "restarts", "exit", "address");
    json_array_foreach(json_object_get(doc, "replicas"), i, v) {
        char ex[16] = "-";
        json_t *es = json_object_get(v, "exitStatus"), *sg = json_object_get(v, "signal");
        if (json_is_integer(es))
            snprintf(ex, sizeof ex, "%lld", (long long) json_integer_value(es));
        else if (json_is_integer(sg))
            snprintf(ex, sizeof ex, "sig%lld", (long long) json_integer_value(sg));
        printf("  %-16s %-10s %8lld %8lld %6s %s\n", s_str(v, "name", 0), s_str(v, "state", 1),
               (long long) json_integer_value(json_object_get(v, "pid")),
               (long long) json_integer_value(json_object_get(v, "restarts")), ex, s_str(v, "address", 2));
    }
    const char *rep, *name;
    json_t *per, *m;
    json_object_foreach(json_object_get(doc, "metrics"), rep, per)
        json_object_foreach(per, name, m)
            printf("  %-16s %s = %g (step %lld)\n", zt_text_safe(rep, 0), zt_text_safe(name, 1),
                   json_number_value(json_object_get(m, "value")),
                   (long long) json_integer_value(json_object_get(m, "step")));
    json_t *evs = json_object_get(doc, "evaluations");
    printf("  checkpoints: %zu, evaluations: %zu\n", json_array_size(json_object_get(doc, "checkpoints")),
           json_array_size(evs));
    json_array_foreach(evs, i, v)
        if (i + 2 >= json_array_size(evs)) /* the latest evaluation (its metrics) */
            printf("  latest evaluation: %s = %.4f at step %lld (%s)\n", s_str(v, "name", 0),
                   json_real_value(json_object_get(v, "value")),
                   (long long) json_integer_value(json_object_get(v, "step")), s_str(v, "replica", 1));
    json_t *e = json_object_get(doc, "error");
    if (json_is_object(e))
        printf("  error: %s\n", s_str(e, "message", 0));
}

/* A job.json of a Slurm job: its coordinator runs on a node, so Slurm says
 * whether it still runs. Slurm's view goes into doc ("slurm"), and a job
 * that Slurm has ended while job.json says otherwise is FAILED. */
static void s_check_slurm(json_t *doc, const char *id)
{
    char state[256], reason[256];
    int known = zt_slurm_query(id, state, sizeof state, reason, sizeof reason);
    if (known < 0)
        return; /* Slurm cannot be asked: job.json as it is */
    json_object_set_new(doc, "slurm", json_pack("{s:s, s:s, s:s}", "jobId", id, "state", known ? state : "ENDED",
                                                "reason", reason));
    const char *st = json_string_value(json_object_get(doc, "state"));
    if (zt_state_final(st) || (known && !zt_slurm_state_final(state)))
        return;
    char *msg = zt_strdupf("its Slurm job %s is %s while the job was %s: the allocation ended under the "
                           "coordinator (see slurm/batch.out in the job directory)", id,
                           known ? state : "no longer known to Slurm", st ? st : "?");
    json_object_set_new(doc, "recordedState", json_string(st ? st : "?"));
    json_object_set_new(doc, "state", json_string("FAILED"));
    json_object_set_new(doc, "processGone", json_true());
    json_object_set_new(doc, "error", json_pack("{s:s}", "message", msg));
    free(msg);
}

/* What a job submitted to Slurm is while it has no job.json: queued, or
 * ended before its coordinator started ("slurmUnreachable" when Slurm
 * cannot be asked). */
static json_t *s_slurm_only_doc(const char *dir, const char *id)
{
    char state[256], reason[256], *path = zt_strdupf("%s/slurm/submission.json", dir);
    json_t *sub = json_load_file(path, 0, NULL);
    free(path);
    int known = zt_slurm_query(id, state, sizeof state, reason, sizeof reason);
    const char *ours = "QUEUED";
    char msg[600] = "";
    if (known < 0)
        snprintf(msg, sizeof msg, "Slurm cannot be asked: %s", state);
    else if (known > 0 && !zt_slurm_state_final(state))
        snprintf(msg, sizeof msg, "Slurm job %s is %s%s%s%s", id, state, reason[0] ? " (" : "", reason,
                 reason[0] ? ")" : "");
    else if ((known > 0 && !strcmp(state, "CANCELLED")) || json_is_true(json_object_get(sub, "cancelRequested"))) {
        ours = "CANCELLED";
        snprintf(msg, sizeof msg, "Slurm job %s was cancelled before the job started", id);
    }
    else {
        ours = "FAILED";
        snprintf(msg, sizeof msg, "Slurm job %s ended %s before ztrain's coordinator started; see %s/slurm/batch.out",
                 id, known > 0 ? state : "(no longer known to Slurm)", dir);
    }
    json_t *doc = json_pack("{s:s, s:s, s:{s:s, s:s, s:s}, s:O}", "state", ours, "message", msg, "slurm", "jobId",
                            id, "state", known > 0 ? state : "ENDED", "reason", reason, "submission",
                            sub ? sub : json_null());
    if (known < 0)
        json_object_set_new(doc, "slurmUnreachable", json_true());
    json_decref(sub);
    return doc;
}

/* A submitted job without job.json: queued, or ended before its
 * coordinator started. Exits as status does. */
static int s_slurm_only_status(const char *dir, bool json, const char *id)
{
    json_t *doc = s_slurm_only_doc(dir, id);
    const char *ours = json_string_value(json_object_get(doc, "state"));
    if (json) {
        char *t = json_dumps(doc, JSON_INDENT(2));
        printf("%s\n", t);
        free(t);
    }
    else
        printf("job in %s: %s\n  %s\n", dir, ours, s_str(doc, "message", 0));
    int rc = json_is_true(json_object_get(doc, "slurmUnreachable")) ? ZT_CLI_USAGE : s_state_exit(ours);
    json_decref(doc);
    return rc;
}

json_t *zt_cli_load(const char *dir, const char **kind)
{
    char *path = zt_strdupf("%s/job.json", dir), *id = zt_slurm_submitted_id(dir);
    json_t *doc = json_load_file(path, 0, NULL);
    free(path);
    *kind = "job";
    if (doc && id)
        s_check_slurm(doc, id);
    else if (doc)
        s_check_owner(doc, "coordinatorProcess", "coordinator");
    else if (id)
        doc = s_slurm_only_doc(dir, id);
    else {
        path = zt_strdupf("%s/study.json", dir);
        doc = json_load_file(path, 0, NULL);
        free(path);
        *kind = "study";
        if (doc)
            s_check_owner(doc, "process", "`ztrain tune`");
    }
    free(id);
    if (doc && !json_is_string(json_object_get(doc, "state"))) { /* a file of that name, not ztrain's record */
        json_decref(doc);
        doc = NULL;
    }
    return doc;
}

/* After a cancel: waits until the job has ended (and its Slurm allocation,
 * when it has one), at most twice the stop grace and 30 s, and says how it
 * ended or that it is still stopping. */
static void s_await_cancelled(const char *dir, const char *id, const char *name)
{
    char buf[64];
    int64_t deadline = zt_now_ms() + 2 * zt_knob_int(ZT_KNOB_STOP_GRACE_MS) + 30000;
    char state[256], reason[256];
    const char *now = NULL;
    while (zt_now_ms() < deadline) {
        now = zt_cli_job_state(dir, buf, sizeof buf);
        if (zt_state_final(now))
            break;
        if (id && !now && zt_slurm_query(id, state, sizeof state, reason, sizeof reason) != 1) {
            now = "CANCELLED"; /* cancelled while queued */
            break;
        }
        usleep(200 * 1000);
    }
    /* and until Slurm has ended its allocation (no step still
     * completing), so that the directory is free for --resume */
    while (id && zt_state_final(now) && zt_now_ms() < deadline &&
           zt_slurm_query(id, state, sizeof state, reason, sizeof reason) == 1 && !zt_slurm_state_final(state))
        usleep(200 * 1000);
    if (zt_state_final(now))
        printf("job %s: %s\n", zt_text_safe(name ? name : dir, 0), zt_text_safe(now, 1));
    else
        printf("job %s: cancel requested; still stopping (ztrain status %s)\n", zt_text_safe(name ? name : dir, 0),
               dir);
}

/* Cancels the job in dir: its Slurm job (scancel), or its coordinator on
 * this machine (SIGTERM, as Ctrl-C), then waits for its end. */
int zt_cli_cancel(const char *dir)
{
    if (!dir) {
        fprintf(stderr, "ztrain cancel: give the job directory (ztrain cancel DIR)\n");
        return ZT_CLI_USAGE;
    }
    char *path = zt_strdupf("%s/job.json", dir), *id = zt_slurm_submitted_id(dir), err[2048];
    json_t *doc = json_load_file(path, 0, NULL);
    free(path);
    const char *name = json_string_value(json_object_get(doc, "name"));
    const char *st = json_string_value(json_object_get(doc, "state"));
    int rc = ZT_CLI_OK;
    if (!doc && !id) {
        fprintf(stderr, "ztrain cancel: %s holds no job (no job.json, nothing submitted to Slurm)\n", dir);
        rc = ZT_CLI_USAGE;
    }
    else if (zt_state_final(st))
        printf("job %s already ended %s; nothing to cancel\n", zt_text_safe(name ? name : dir, 0), zt_text_safe(st, 1));
    else if (id) {
        if (zt_slurm_cancel(id, err, sizeof err) != 0) {
            fprintf(stderr, "ztrain cancel: %s\n", err);
            rc = ZT_CLI_FAILED;
        }
        else {
            char *sp = zt_strdupf("%s/slurm/submission.json", dir);
            json_t *sub = json_load_file(sp, 0, NULL);
            if (sub) {
                json_object_set_new(sub, "cancelRequested", json_true());
                char *t = json_dumps(sub, JSON_INDENT(2));
                zt_write_file_atomic(sp, t, strlen(t));
                free(t);
                json_decref(sub);
            }
            free(sp);
        }
    }
    else {
        json_t *rec = json_object_get(doc, "coordinatorProcess");
        int alive = zt_json_process_alive(rec);
        pid_t pid = (pid_t) json_integer_value(json_object_get(rec, "pid"));
        if (alive == 1 && kill(pid, SIGTERM) == 0)
            ;
        else {
            if (alive == 1)
                fprintf(stderr, "ztrain cancel: cannot signal the coordinator (pid %d): %s\n", (int) pid,
                        strerror(errno));
            else if (alive == 0)
                fprintf(stderr, "ztrain cancel: the coordinator (pid %d) is gone already; the job did not "
                                "record an end (ztrain status %s)\n", (int) pid, dir);
            else
                fprintf(stderr, "ztrain cancel: the coordinator runs on %s, not here: run ztrain cancel there\n",
                        json_string_value(json_object_get(rec, "host")));
            rc = ZT_CLI_FAILED;
        }
    }
    if (rc == ZT_CLI_OK && !zt_state_final(st))
        s_await_cancelled(dir, id, name);
    json_decref(doc);
    free(id);
    return rc;
}

/* Exits as `ztrain run` would have: 0 SUCCEEDED (or still running), 1
 * FAILED (or its process gone), 3 CANCELLED; 2 when there is nothing to
 * read. */
int zt_cli_status(const char *job_dir, const char *study_dir, bool json)
{
    if (!study_dir && !job_dir) {
        fprintf(stderr, "ztrain status: give --job-dir DIR or --study-dir DIR\n");
        return ZT_CLI_USAGE;
    }
    if (!study_dir) { /* a study's folder given as DIR: its study.json, as wait and logs read it */
        char *job = zt_strdupf("%s/job.json", job_dir), *st = zt_strdupf("%s/study.json", job_dir);
        if (access(job, F_OK) != 0 && access(st, F_OK) == 0) {
            study_dir = job_dir;
            job_dir = NULL;
        }
        free(job);
        free(st);
    }
    bool study = study_dir != NULL;
    char *path = zt_strdupf("%s/%s", study ? study_dir : job_dir, study ? "study.json" : "job.json");
    json_error_t err;
    json_t *doc = json_load_file(path, 0, &err);
    char *id = study ? NULL : zt_slurm_submitted_id(job_dir);
    if (!doc && id) { /* submitted; its coordinator has not started (yet) */
        free(path);
        int rc = s_slurm_only_status(job_dir, json, id);
        free(id);
        return rc;
    }
    if (!doc) {
        const char *dir = study ? study_dir : job_dir;
        struct stat st;
        if (stat(dir, &st) != 0)
            fprintf(stderr, "ztrain status: %s: no such directory\n", dir);
        else if (!S_ISDIR(st.st_mode))
            fprintf(stderr, "ztrain status: %s: not a directory\n", dir);
        else if (access(path, F_OK) != 0)
            fprintf(stderr, "ztrain status: %s holds no %s (not a %s directory, or it has not started yet)\n", dir,
                    study ? "study.json" : "job.json", study ? "study" : "job");
        else
            fprintf(stderr, "ztrain status: %s: not a record ztrain wrote: %s (line %d)\n", path, err.text, err.line);
        free(path);
        return ZT_CLI_USAGE;
    }
    free(path);
    if (id)
        s_check_slurm(doc, id);
    else
        s_check_owner(doc, study ? "process" : "coordinatorProcess", study ? "`ztrain tune`" : "coordinator");
    free(id);
    if (json) {
        char *t = json_dumps(doc, JSON_INDENT(2));
        printf("%s\n", t);
        free(t);
    }
    else if (study)
        zt_study_print(study_dir, doc);
    else
        s_print_job(doc);
    int rc = s_state_exit(json_string_value(json_object_get(doc, "state")));
    json_decref(doc);
    return rc;
}
