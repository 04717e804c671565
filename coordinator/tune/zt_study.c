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

static bool s_better(zt_study_t *s, double a, double b)
{
    return s->maximize ? a > b : a < b;
}

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
        if (s->select_best || max_step < INFINITY ? (!have || s_better(s, v, best)) : step >= best_step) {
            best = v;
            best_step = step;
        }
        have = true;
    }
    if (have)
        *out = best;
    return have;
}

/* A parameter's value as text: a string as it is, a number in 8 digits. */
static char *s_value_text(json_t *v)
{
    return !v ? strdup("") : json_is_string(v) ? strdup(json_string_value(v))
                                               : json_dumps(v, JSON_ENCODE_ANY | JSON_REAL_PRECISION(8));
}

static void s_param_args(s_trial_t *t, char **argv, int *argc)
{
    const char *key;
    json_t *v;
    json_object_foreach(t->params, key, v) {
        char *text = s_value_text(v);
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
        char *text = s_value_text(v);
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

/* One CSV field, RFC 4180: quoted when it holds a comma, a quote or a line
 * break, with its quotes doubled. */
static void s_csv_field(FILE *f, const char *text, bool first)
{
    if (!first)
        fputc(',', f);
    if (!strpbrk(text, ",\"\r\n")) {
        fputs(text, f);
        return;
    }
    fputc('"', f);
    for (const char *c = text; *c; c++) {
        if (*c == '"')
            fputc('"', f);
        fputc(*c, f);
    }
    fputc('"', f);
}


/* trials.csv: a header, then a row per trial (RFC 4180, CRLF line ends). */
static void s_write_csv(zt_study_t *s)
{
    char *csv = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&csv, &len);
    s_csv_field(f, "trial", true);
    s_csv_field(f, "state", false);
    for (int k = 0; k < s->np; k++)
        s_csv_field(f, s->p[k].name, false);
    s_csv_field(f, s->metric, false);
    for (int k = 0; k < s->nextra; k++)
        s_csv_field(f, s->extra[k], false);
    s_csv_field(f, "measurements", false);
    fputs("\r\n", f);
    for (int i = 0; i < s->nt; i++) {
        s_trial_t *t = &s->t[i];
        char buf[64];
        snprintf(buf, sizeof buf, "%d", t->id);
        s_csv_field(f, buf, true);
        s_csv_field(f, t->state, false);
        for (int k = 0; k < s->np; k++) {
            char *text = s_value_text(json_object_get(t->params, s->p[k].name));
            s_csv_field(f, text, false);
            free(text);
        }
        snprintf(buf, sizeof buf, "%.6g", t->final);
        s_csv_field(f, t->has_final ? buf : "", false);
        for (int k = 0; k < s->nextra; k++) {
            snprintf(buf, sizeof buf, "%.6g", t->extra_final[k]);
            s_csv_field(f, t->extra_has[k] ? buf : "", false);
        }
        snprintf(buf, sizeof buf, "%zu", json_array_size(t->meas));
        s_csv_field(f, buf, false);
        fputs("\r\n", f);
    }
    fclose(f);
    char *path = zt_strdupf("%s/trials.csv", s->dir);
    zt_write_file_atomic(path, csv, len);
    free(path);
    free(csv);
}

static json_t *s_trial_json(zt_study_t *s, s_trial_t *t, int np)
{
    json_t *u = json_array();
    for (int k = 0; k < np; k++)
        json_array_append_new(u, json_real(t->u[k]));
    json_t *o = json_pack("{s:s, s:s, s:O, s:O, s:s, s:s, s:s, s:o}", "id", "", "state", t->state,
                          "parameters", t->params, "measurements", t->meas, "jobDir", t->job_dir,
                          "startTime", t->started, "endTime", t->ended, "scaledParameters", u);
    json_object_set_new(o, "id", json_sprintf("%d", t->id));
    json_object_set_new(o, "finalMeasurement", t->has_final ? json_real(t->final) : json_null());
    if (s->nextra) { /* every metric's */
        json_t *all = json_object();
        if (t->has_final)
            json_object_set_new(all, s->metric, json_real(t->final));
        for (int k = 0; k < s->nextra; k++)
            if (t->extra_has[k])
                json_object_set_new(all, s->extra[k], json_real(t->extra_final[k]));
        json_object_set_new(o, "finalMeasurements", all);
    }
    if (t->message)
        json_object_set_new(o, "message", json_string(t->message));
    return o;
}

/* Whether a's results are at least b's in every metric and better in one. */
static bool s_dominates(zt_study_t *s, const s_trial_t *a, const s_trial_t *b)
{
    bool strictly = s_better(s, a->final, b->final);
    if (s_better(s, b->final, a->final))
        return false;
    for (int k = 0; k < s->nextra; k++) {
        double x = a->extra_final[k], y = b->extra_final[k];
        if (s->extra_max[k] ? x < y : x > y)
            return false;
        strictly = strictly || (s->extra_max[k] ? x > y : x < y);
    }
    return strictly;
}

/* The ids of the trials with every metric that no other such trial dominates. */
static json_t *s_pareto(zt_study_t *s)
{
    json_t *front = json_array();
    for (int i = 0; i < s->nt; i++) {
        const s_trial_t *t = &s->t[i];
        bool full = t->has_final && zt_state_succeeded(t->state), beaten = false;
        for (int k = 0; full && k < s->nextra; k++)
            full = t->extra_has[k];
        for (int j = 0; full && !beaten && j < s->nt; j++) {
            const s_trial_t *u = &s->t[j];
            bool ufull = u != t && u->has_final && zt_state_succeeded(u->state);
            for (int k = 0; ufull && k < s->nextra; k++)
                ufull = u->extra_has[k];
            beaten = ufull && s_dominates(s, u, t);
        }
        if (full && !beaten)
            json_array_append_new(front, json_sprintf("%d", t->id));
    }
    return front;
}

static void s_write(zt_study_t *s)
{
    json_t *trials = json_array();
    int best = -1;
    for (int i = 0; i < s->nt; i++) {
        s_trial_t *t = &s->t[i];
        json_array_append_new(trials, s_trial_json(s, t, s->np));
        if (t->has_final && zt_state_succeeded(t->state) &&
            (best < 0 || s_better(s, t->final, s->t[best].final)))
            best = i;
    }
    json_t *doc = json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:o}", "studyDir", s->dir, "state", s->state,
                            "metricId", s->metric, "goal", s->maximize ? "MAXIMIZE" : "MINIMIZE",
                            "maxTrialCount", s->max_trials, "parallelTrialCount", s->parallel,
                            "failedTrials", s->failed, "trials", trials);
    json_object_set_new(doc, "process", zt_json_this_process());
    json_object_set(doc, "spec", s->spec);
    json_object_set_new(doc, "algorithm", json_string(s->algo == A_GRID ? "GRID_SEARCH" : s->algo == A_RANDOM
                                                                             ? "RANDOM_SEARCH" : "BAYESIAN"));
    if (best >= 0)
        json_object_set(doc, "bestTrial", json_array_get(trials, (size_t) best));
    else
        json_object_set_new(doc, "bestTrial", json_null());
    if (s->nextra)
        json_object_set_new(doc, "paretoFront", s_pareto(s));
    if (s->warm_record)
        json_object_set(doc, "warmStart", s->warm_record);
    char *text = json_dumps(doc, JSON_INDENT(2));
    char *path = zt_strdupf("%s/study.json", s->dir);
    zt_write_file_atomic(path, text, strlen(text));
    free(path);
    free(text);
    json_decref(doc);
    s_write_csv(s);
}

/* ------------------------------------------------------------ resuming */

/* A trial of an earlier run, as study.json recorded it, into t. False when
 * it did not finish (it is run again as a new trial). */
static bool s_restore_trial(zt_study_t *s, json_t *o, s_trial_t *t)
{
    /* a trial cancelled (with its study) did not finish: it runs again */
    const char *state = zt_state_known(json_string_value(json_object_get(o, "state")));
    if (!zt_state_final(state) || !strcmp(state, "CANCELLED") || !json_is_object(json_object_get(o, "parameters")))
        return false;
    memset(t, 0, sizeof *t);
    t->id = atoi(json_string_value(json_object_get(o, "id")) ?: "0");
    t->state = state;
    t->params = json_incref(json_object_get(o, "parameters"));
    t->meas = json_deep_copy(json_object_get(o, "measurements"));
    if (!json_is_array(t->meas)) {
        json_decref(t->meas);
        t->meas = json_array();
    }
    t->job_dir = strdup(json_string_value(json_object_get(o, "jobDir")) ?: "");
    t->base = strdup("");
    snprintf(t->started, sizeof t->started, "%s", json_string_value(json_object_get(o, "startTime")) ?: "");
    snprintf(t->ended, sizeof t->ended, "%s", json_string_value(json_object_get(o, "endTime")) ?: "");
    t->has_final = json_is_number(json_object_get(o, "finalMeasurement"));
    t->final = json_number_value(json_object_get(o, "finalMeasurement"));
    for (int k = 0; k < s->nextra; k++) {
        json_t *v = json_object_get(json_object_get(o, "finalMeasurements"), s->extra[k]);
        t->extra_has[k] = json_is_number(v);
        t->extra_final[k] = json_number_value(v);
    }
    if (json_is_string(json_object_get(o, "message")))
        t->message = strdup(json_string_value(json_object_get(o, "message")));
    json_t *u = json_object_get(o, "scaledParameters");
    for (int p = 0; p < s->np; p++)
        t->u[p] = json_is_number(json_array_get(u, (size_t) p)) ? json_number_value(json_array_get(u, (size_t) p))
                                                               : 0.5;
    return true;
}

/* Removes an earlier study's files: study.json, trials.csv, trial-N and
 * trial-N.log. Nothing else in the directory is touched. */
static void s_clear_dir(zt_study_t *s)
{
    DIR *d = opendir(s->dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        int id, end = 0;
        bool trial = sscanf(e->d_name, "trial-%d%n", &id, &end) == 1 &&
                     (!e->d_name[end] || !strcmp(e->d_name + end, ".log"));
        if (trial || !strcmp(e->d_name, "study.json") || !strcmp(e->d_name, "trials.csv") ||
            !strcmp(e->d_name, "tensorboard")) {
            char *p = zt_strdupf("%s/%s", s->dir, e->d_name);
            zt_rm_tree(p);
            free(p);
        }
    }
    if (d)
        closedir(d);
}

void zt_study_adopt_dir(zt_study_t *s, zt_diag_t *diag)
{
    char *path = zt_strdupf("%s/study.json", s->dir);
    json_t *doc = json_load_file(path, 0, NULL);
    free(path);
    char diff[400];
    if (!doc)
        return;
    if (zt_json_process_alive(json_object_get(doc, "process")) == 1)
        zt_diag_add(diag, true, s->dir, 0, 0, NULL, NULL, "a study is running there (pid %lld); choose "
                    "another --study-dir", (long long) json_integer_value(json_object_get(
                        json_object_get(doc, "process"), "pid")));
    else if (s->opts.overwrite) {
        zt_info("--overwrite: starting the study in %s over", s->dir);
        s_clear_dir(s);
    }
    else if (zt_json_diff(s->spec, json_object_get(doc, "spec"), diff, sizeof diff))
        zt_diag_add(diag, true, s->dir, 0, 0, NULL, NULL, "holds the results of another study (they differ "
                    "at %s, this one's vs the earlier one's); give --overwrite to start over there, or "
                    "another --study-dir", diff);
    else {
        size_t i;
        json_t *o;
        int last_id = 0, kept = 0;
        json_array_foreach(json_object_get(doc, "trials"), i, o) {
            int id = atoi(json_string_value(json_object_get(o, "id")) ?: "0");
            last_id = id > last_id ? id : last_id;
            if (s->nt < s->max_trials && s_restore_trial(s, o, &s->t[s->nt])) {
                s->failed += !strcmp(s->t[s->nt].state, "FAILED");
                s->nt++;
                kept++;
            }
            else { /* unfinished: what it left goes; it runs again as a new trial */
                char *p = zt_strdupf("%s/trial-%d", s->dir, id);
                zt_rm_tree(p);
                free(p);
                p = zt_strdupf("%s/trial-%d.log", s->dir, id);
                unlink(p);
                free(p);
            }
        }
        s->next_id = last_id;
        s->rng ^= 2654435761u * (unsigned) (last_id + 1); /* new draws, not the earlier run's again */
        zt_info("resuming the study in %s: %d finished trial%s kept; trials from %d on", s->dir, kept,
                kept == 1 ? "" : "s", last_id + 1);
    }
    json_decref(doc);
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
    if (s_better(s, median, mine)) {
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
            s_write(s);
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
                s_write(s);
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
    s_write(s);
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
    s_write(s);
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
            s_write(s);
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
    json_t *e = json_object_get(doc, "error");
    if (json_is_object(e))
        printf("  error: %s\n", json_string_value(json_object_get(e, "message")));
}
