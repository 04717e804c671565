/* A study's trial runner: each trial is a `ztrain run --trial ID` of the
 * trial job with its parameters appended, started through the launch
 * interface; measurements are read as they come, median stopping applied,
 * and study.json / trials.csv kept current. */
#include "tune/zt_study_int.h"
#include "launch/zt_layout.h"
#include "base/zt_util.h"
#include "base/zt_json.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_log.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

/* ------------------------------------------------------------ running */

static volatile sig_atomic_t s_interrupted;
static void s_on_signal(int sig) { (void) sig; s_interrupted = 1; }

static void s_add_meas(s_trial_t *t, double step, double value)
{
    size_t i;
    json_t *m;
    json_array_foreach(t->meas, i, m)
        if (json_real_value(json_array_get(m, 0)) == step && json_real_value(json_array_get(m, 1)) == value)
            return;
    json_array_append_new(t->meas, json_pack("[ff]", step, value));
}

/* The tags a metric-file line or a job.json metric set reports, for the
 * message of an INFEASIBLE trial. */
static void s_note_tags(json_t *tags, json_t *obj)
{
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v)
        if (strcmp(k, "global_step") && strcmp(k, "timestamp") && strcmp(k, "trial") &&
            strcmp(k, "checkpoint_path") &&
            !json_object_get(tags, k))
            json_object_set_new(tags, k, json_true());
}

/* Measurements come from the trial's primary replica (workerpool0-0), as
 * the managed service takes them: its hypertune metric file, and what it
 * reported through libztrain (job.json's metrics of workerpool0-0). The
 * tags it reported go to tags (may be NULL). */
/* SageMaker's MetricDefinitions: every line of the primary replica's
 * output that the regex matches is a measurement, its group the value, the
 * n-th match step n (a program prints its metric once an epoch). */
static void s_collect_output(zt_study_t *s, s_trial_t *t)
{
    char *path = zt_strdupf("%s/replica-logs/workerpool0-0.log", t->job_dir);
    char *text = zt_read_file(path, NULL);
    free(path);
    int n = 0;
    regmatch_t g[2];
    for (char *save = NULL, *l = text ? strtok_r(text, "\n", &save) : NULL; l; l = strtok_r(NULL, "\n", &save))
        if (regexec(&s->metric_re, l, 2, g, 0) == 0 && g[1].rm_so >= 0) {
            l[g[1].rm_eo] = 0;
            char *end;
            double v = strtod(l + g[1].rm_so, &end);
            if (end != l + g[1].rm_so && isfinite(v))
                s_add_meas(t, ++n, v);
        }
    free(text);
}

static void s_collect(zt_study_t *s, s_trial_t *t, json_t *tags)
{
    char *path = zt_layout_hp_metric_file(t->base, 0, 0);
    char *text = zt_read_file(path, NULL);
    free(path);
    int line = 0;
    for (char *save = NULL, *l = text ? strtok_r(text, "\n", &save) : NULL; l; l = strtok_r(NULL, "\n", &save)) {
        json_t *j = json_loads(l, 0, NULL);
        double v, step;
        line++;
        if (j && zt_study_num(json_object_get(j, s->metric), &v) && isfinite(v))
            s_add_meas(t, zt_study_num(json_object_get(j, "global_step"), &step) ? step : line, v);
        for (int k = 0; j && k < s->nextra; k++) /* the other metrics: the last value reported */
            if (zt_study_num(json_object_get(j, s->extra[k]), &v) && isfinite(v)) {
                t->extra_final[k] = v;
                t->extra_has[k] = true;
            }
        if (tags && json_is_object(j))
            s_note_tags(tags, j);
        json_decref(j);
    }
    free(text);
    char *jp = zt_strdupf("%s/job.json", t->job_dir);
    json_t *job = json_load_file(jp, 0, NULL);
    free(jp);
    json_t *primary = json_object_get(json_object_get(job, "metrics"), "workerpool0-0");
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(json_object_get(primary, s->metric), "series"), i, m)
        s_add_meas(t, json_number_value(json_array_get(m, 0)), json_number_value(json_array_get(m, 1)));
    for (int k = 0; k < s->nextra; k++) {
        json_t *last = json_object_get(json_object_get(primary, s->extra[k]), "value");
        if (json_is_number(last) && isfinite(json_number_value(last))) {
            t->extra_final[k] = json_number_value(last);
            t->extra_has[k] = true;
        }
    }
    if (tags)
        s_note_tags(tags, primary);
    json_decref(job);
    if (s->has_metric_re)
        s_collect_output(s, t);
}

/* LAST: the measurement of the highest step; BEST: the best one. */
static bool s_select(zt_study_t *s, s_trial_t *t, double max_step, double *out)
{
    bool have = false;
    double best = 0, best_step = -INFINITY;
    size_t i;
    json_t *m;
    json_array_foreach(t->meas, i, m) {
        double step = json_real_value(json_array_get(m, 0)), v = json_real_value(json_array_get(m, 1));
        if (step > max_step)
            continue;
        if (s->select_best || max_step < INFINITY ? (!have || zt_study_better(s, v, best)) : step >= best_step) {
            best = v;
            best_step = step;
        }
        have = true;
    }
    if (have)
        *out = best;
    return have;
}

static void s_param_args(s_trial_t *t, char **argv, int *argc)
{
    const char *key;
    json_t *v;
    json_object_foreach(t->params, key, v) {
        char *text = zt_study_value_text(v);
        argv[(*argc)++] = zt_strdupf("--%s=%s", key, text);
        free(text);
    }
}

static char *s_params_text(s_trial_t *t)
{
    char buf[1024] = "";
    const char *key;
    json_t *v;
    json_object_foreach(t->params, key, v) {
        char *text = zt_study_value_text(v);
        snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s=%s", buf[0] ? " " : "", key, text);
        free(text);
    }
    return strdup(buf);
}

static int s_start_trial(zt_study_t *s)
{
    s_trial_t *t = &s->t[s->nt];
    memset(t, 0, sizeof *t);
    t->params = zt_search_suggest(s, t->u);
    if (!t->params)
        return ZT_ENOTFOUND;
    t->id = ++s->next_id;
    t->meas = json_array();
    t->state = "ACTIVE";
    t->job_dir = zt_strdupf("%s/trial-%d", s->dir, t->id);
    t->base = zt_strdupf("%s/%d", s->base_output ? s->base_output : t->job_dir, t->id);
    zt_wall_iso(t->started, sizeof t->started);
    char idbuf[16];
    snprintf(idbuf, sizeof idbuf, "%d", t->id);
    char *argv[MAX_PARAMS + 16];
    int argc = 0;
    argv[argc++] = strdup(s->opts.ztrain);
    argv[argc++] = strdup("run");
    argv[argc++] = strdup(s->trial_job);
    argv[argc++] = strdup("--job-dir");
    argv[argc++] = strdup(t->job_dir);
    argv[argc++] = strdup("--trial");
    argv[argc++] = strdup(idbuf);
    if (s->opts.cpu_only)
        argv[argc++] = strdup("--cpu-only");
    if (s->opts.allow_unknown_fields)
        argv[argc++] = strdup("--allow-unknown-fields");
    argv[argc++] = strdup("--overwrite"); /* a trial's directory is the study's to reuse */
    if (s->opts.backend) {
        argv[argc++] = strdup("--backend");
        argv[argc++] = strdup(s->opts.backend);
    }
    argv[argc++] = strdup("--");
    s_param_args(t, argv, &argc);
    argv[argc] = NULL;
    char *log = zt_strdupf("%s/trial-%d.log", s->dir, t->id);
    unlink(log);
    /* The trial's own coordinator is started the way a job's replicas are,
     * through the launch interface; its replicas go through opts.backend. */
    zt_launch_t req = { -1, t->id, -1, argv, environ, log, SIGTERM };
    int fd = -1;
    int rc = s->launcher ? s->launcher->start(s->launcher, &req, &t->run, &fd) : ZT_ESYS;
    for (int i = 0; i < argc; i++)
        free(argv[i]);
    free(log);
    s->nt++;
    if (rc != ZT_OK) { /* could not even start it: a failed trial */
        zt_error("trial %d: cannot start %s: %s", t->id, s->opts.ztrain, strerror(errno));
        t->state = "FAILED";
        zt_wall_iso(t->ended, sizeof t->ended);
        s->failed++;
        return ZT_ESYS;
    }
    zt_study_tb_start(s, t);
    char *pt = s_params_text(t);
    if (!s->tty)
        printf("trial %d ACTIVE %s\n", t->id, pt);
    free(pt);
    return ZT_OK;
}

static void s_table(zt_study_t *s)
{
    if (!s->tty)
        return;
    printf("\033[H\033[J"); /* redraw in place */
    printf("study %s: %s (%s %s, %d of %d trials)\n", s->dir, s->state, s->maximize ? "maximize" : "minimize",
           s->metric, s->nt, s->max_trials);
    printf("%-6s %-10s %-12s %-12s %s\n", "trial", "state", "latest", "final", "parameters");
    for (int i = 0; i < s->nt; i++) {
        s_trial_t *t = &s->t[i];
        char latest[32] = "-", fin[32] = "-";
        size_t n = json_array_size(t->meas);
        if (n)
            snprintf(latest, sizeof latest, "%.4g", json_real_value(json_array_get(json_array_get(t->meas, n - 1), 1)));
        if (t->has_final)
            snprintf(fin, sizeof fin, "%.4g", t->final);
        char *pt = s_params_text(t);
        printf("%-6d %-10s %-12s %-12s %s\n", t->id, t->state, latest, fin, pt);
        free(pt);
    }
    fflush(stdout);
}

static void s_request_stop(zt_study_t *s, s_trial_t *t)
{
    t->stop_requested = true;
    t->state = "STOPPING";
    s->launcher->signal(s->launcher, t->run, SIGTERM);
}

/* Median stopping: an active trial whose best so far is worse than the
 * median of the completed trials' bests up to the same step. */
static void s_median_stop(zt_study_t *s, s_trial_t *t)
{
    size_t n = json_array_size(t->meas);
    if (!s->median_stop || t->stop_requested || n == 0)
        return;
    double step = -INFINITY;
    size_t i;
    json_t *m;
    json_array_foreach(t->meas, i, m)
        if (json_real_value(json_array_get(m, 0)) > step)
            step = json_real_value(json_array_get(m, 0));
    double mine = 0, others[MAX_TRIALS];
    int no = 0;
    bool saved = s->select_best;
    s->select_best = true;
    s_select(s, t, step, &mine);
    for (int k = 0; k < s->nt; k++)
        if (&s->t[k] != t && !strcmp(s->t[k].state, "SUCCEEDED") && s_select(s, &s->t[k], step, &others[no]))
            no++;
    s->select_best = saved;
    if (no < 2)
        return;
    for (int a = 1; a < no; a++) /* insertion sort */
        for (int b = a; b > 0 && others[b] < others[b - 1]; b--) {
            double x = others[b];
            others[b] = others[b - 1];
            others[b - 1] = x;
        }
    double median = no % 2 ? others[no / 2] : 0.5 * (others[no / 2 - 1] + others[no / 2]);
    if (zt_study_better(s, median, mine)) {
        zt_info("trial %d: best %g so far is worse than the median %g of %d completed trials at step %g: "
                "stopping it", t->id, mine, median, no, step);
        if (!s->tty)
            printf("trial %d STOPPING: best %.4g < median %.4g at step %g\n", t->id, mine, median, step);
        s_request_stop(s, t);
    }
}

/* Decay-curve and convex stopping (zt_study_stop.c). */
static void s_curve_stop(zt_study_t *s, s_trial_t *t)
{
    char why[512];
    if (t->stop_requested || !zt_study_curve_stop(s, t, why, sizeof why))
        return;
    zt_info("trial %d: %s: stopping it", t->id, why);
    if (!s->tty)
        printf("trial %d STOPPING: %s\n", t->id, why);
    s_request_stop(s, t);
}

static void s_finish(zt_study_t *s, s_trial_t *t, int status)
{
    s->launcher->release(s->launcher, &t->run);
    t->exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    zt_wall_iso(t->ended, sizeof t->ended);
    json_t *tags = json_object();
    s_collect(s, t, tags);
    t->has_final = s_select(s, t, INFINITY, &t->final);
    if (t->stop_requested)
        t->state = "STOPPED";
    else if (t->cancelled) /* the study stopped it: not the trial's failure */
        t->state = "CANCELLED";
    else if (t->exit_status == 0 && t->has_final)
        t->state = "SUCCEEDED";
    else if (t->exit_status == 0) { /* ran, but never measured the study's metric */
        char names[512] = "";
        const char *k;
        json_t *v;
        json_object_foreach(tags, k, v)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", names[0] ? ", " : "", k);
        t->state = "INFEASIBLE";
        free(t->message);
        t->message = zt_strdupf("workerpool0-0 reported no '%s' (%s%s)", s->metric,
                                names[0] ? "it reported: " : "it reported no metric at all", names);
    }
    else {
        t->state = "FAILED";
        s->failed++;
    }
    json_decref(tags);
    zt_study_tb_end(s, t);
    if (!s->tty) {
        if (t->has_final)
            printf("trial %d %s %s=%.6g (%zu measurements)\n", t->id, t->state, s->metric, t->final,
                   json_array_size(t->meas));
        else if (t->message)
            printf("trial %d %s: %s\n", t->id, t->state, t->message);
        else
            printf("trial %d %s (exit status %d; see %s/trial-%d.log)\n", t->id, t->state, t->exit_status,
                   s->dir, t->id);
        fflush(stdout);
    }
}

/* Stops every running trial; they end CANCELLED. */
static void s_stop_all(zt_study_t *s)
{
    for (int i = 0; i < s->nt; i++)
        if (s->t[i].run) {
            s->t[i].cancelled = true;
            s->launcher->signal(s->launcher, s->t[i].run, SIGTERM);
        }
}

/* Trials that ended: their results; too many failures fail the study. */
static void s_reap_trials(zt_study_t *s, bool *stopping)
{
    int status;
    zt_handle_t *h;
    while (s->launcher->reap(s->launcher, &h, &status) == 1)
        for (int i = 0; i < s->nt; i++) {
            if (s->t[i].run != h)
                continue;
            s_finish(s, &s->t[i], status);
            if (s->failed > s->max_failed && !*stopping) {
                zt_error("%d trials failed (maxFailedTrialCount %d): the study fails", s->failed, s->max_failed);
                *stopping = true;
                s->state = "FAILED";
                s_stop_all(s);
            }
            zt_study_write(s);
        }
}

/* New measurements of running trials, and median stopping on them. */
static void s_poll_measurements(zt_study_t *s)
{
    for (int i = 0; i < s->nt; i++)
        if (s->t[i].run) {
            size_t before = json_array_size(s->t[i].meas);
            s_collect(s, &s->t[i], NULL);
            if (json_array_size(s->t[i].meas) != before) {
                zt_study_tb_measure(s, &s->t[i]);
                s_median_stop(s, &s->t[i]);
                s_curve_stop(s, &s->t[i]);
                zt_study_write(s);
            }
        }
}

/* The study's end state, its files, and the best trial on stdout. */
static int s_conclude(zt_study_t *s)
{
    int ok = 0;
    for (int i = 0; i < s->nt; i++)
        ok += zt_state_succeeded(s->t[i].state);
    if (!strcmp(s->state, "RUNNING"))
        s->state = ok ? "SUCCEEDED" : "FAILED";
    zt_study_write(s);
    s_table(s);
    char *path = zt_strdupf("%s/study.json", s->dir);
    json_t *doc = json_load_file(path, 0, NULL);
    free(path);
    json_t *best = json_object_get(doc, "bestTrial");
    if (json_is_object(best)) {
        char *pt = json_dumps(json_object_get(best, "parameters"), JSON_COMPACT | JSON_REAL_PRECISION(8));
        printf("study %s: best trial %s: %s = %.6g with %s\n", s->state,
               json_string_value(json_object_get(best, "id")), s->metric,
               json_number_value(json_object_get(best, "finalMeasurement")), pt);
        free(pt);
    }
    else
        printf("study %s: no trial succeeded\n", s->state);
    printf("results: %s/study.json, %s/trials.csv\n", s->dir, s->dir);
    json_decref(doc);
    return zt_state_exit_code(s->state);
}

/* Keeps up to parallelTrialCount trials running until maxTrialCount (or
 * the grid) is done, the study fails, or it is interrupted. */
int zt_study_run(zt_study_t *s)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = s_on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    /* `ztrain tune ... | head`: the table's reader may go; the study goes on. */
    signal(SIGPIPE, SIG_IGN);
    bool exhausted = false, stopping = false;
    int64_t last_table = 0;
    s->started_ms = zt_now_ms();
    char *job = json_dumps(json_object_get(s->spec, "trialJobSpec"), JSON_INDENT(2));
    zt_write_file_atomic(s->trial_job, job, strlen(job)); /* what every trial runs */
    free(job);
    zt_study_tb_experiment(s);
    zt_study_write(s);
    for (;;) {
        int running = 0;
        for (int i = 0; i < s->nt; i++)
            running += s->t[i].run != NULL;
        if (s_interrupted && !stopping) {
            stopping = true;
            s->state = "CANCELLED";
            zt_info("interrupted: stopping every trial");
            s_stop_all(s);
        }
        char why[256];
        if (!stopping && !exhausted && zt_study_done(s, zt_now_ms(), why, sizeof why)) {
            exhausted = true; /* studyStoppingConfig: no new trial */
            zt_info("the study stops: %s%s", why, s->stop_asap && running ? "; stopping the running trials" : "");
            if (!s->tty)
                printf("study STOPPING: %s\n", why);
            if (s->stop_asap)
                s_stop_all(s);
        }
        while (!stopping && !exhausted && running < s->parallel && s->nt < s->max_trials) {
            if (s_start_trial(s) == ZT_ENOTFOUND) {
                exhausted = true;
                break;
            }
            running++;
            zt_study_write(s);
        }
        if (running == 0 && (stopping || exhausted || s->nt >= s->max_trials))
            break;
        s_reap_trials(s, &stopping);
        s_poll_measurements(s);
        if (zt_now_ms() - last_table > 1000) {
            s_table(s);
            last_table = zt_now_ms();
        }
        usleep(100000);
    }
    return s_conclude(s);
}

void zt_study_print(const char *study_dir, json_t *doc)
{
    printf("study %s: %s", study_dir, json_string_value(json_object_get(doc, "state")));
    if (json_is_true(json_object_get(doc, "processGone")))
        printf(" (recorded %s, but `ztrain tune` is gone)", json_string_value(json_object_get(doc, "recordedState")));
    printf(", %s %s, %s\n", json_string_value(json_object_get(doc, "goal")),
           json_string_value(json_object_get(doc, "metricId")), json_string_value(json_object_get(doc, "algorithm")));
    printf("  %-6s %-10s %-12s %s\n", "trial", "state", "final", "parameters");
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(doc, "trials"), i, t) {
        char fin[32] = "-";
        if (json_is_number(json_object_get(t, "finalMeasurement")))
            snprintf(fin, sizeof fin, "%.6g", json_number_value(json_object_get(t, "finalMeasurement")));
        char *pt = json_dumps(json_object_get(t, "parameters"), JSON_COMPACT | JSON_REAL_PRECISION(8));
        printf("  %-6s %-10s %-12s %s\n", json_string_value(json_object_get(t, "id")),
               json_string_value(json_object_get(t, "state")), fin, pt);
        free(pt);
    }
    json_t *b = json_object_get(doc, "bestTrial");
    if (json_is_object(b))
        printf("  best: trial %s, %.6g\n", json_string_value(json_object_get(b, "id")),
               json_number_value(json_object_get(b, "finalMeasurement")));
    json_t *front = json_object_get(doc, "paretoFront"), *hv = json_object_get(doc, "hypervolume"), *id;
    if (json_array_size(front)) { /* several metrics: the trials no other betters in all */
        printf("  Pareto front: trial%s", json_array_size(front) > 1 ? "s" : "");
        json_array_foreach(front, i, id)
            printf("%s %s", i ? "," : "", json_string_value(id));
        if (json_is_number(json_object_get(hv, "value")))
            printf("; hypervolume %.6g", json_number_value(json_object_get(hv, "value")));
        printf("\n");
    }
    json_t *e = json_object_get(doc, "error");
    if (json_is_object(e))
        printf("  error: %s\n", json_string_value(json_object_get(e, "message")));
}
