/* A study's record: study.json (its trials, the best, the Pareto front
 * of several metrics) and trials.csv kept current, and a study resumed
 * from them. */
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

bool zt_study_better(zt_study_t *s, double a, double b)
{
    return s->maximize ? a > b : a < b;
}

/* A parameter's value as text: a string as it is, a number in 8 digits. */
char *zt_study_value_text(json_t *v)
{
    return !v ? strdup("") : json_is_string(v) ? strdup(json_string_value(v))
                                               : json_dumps(v, JSON_ENCODE_ANY | JSON_REAL_PRECISION(8));
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
            char *text = zt_study_value_text(json_object_get(t->params, s->p[k].name));
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
    bool strictly = zt_study_better(s, a->final, b->final);
    if (zt_study_better(s, b->final, a->final))
        return false;
    for (int k = 0; k < s->nextra; k++) {
        double x = a->extra_final[k], y = b->extra_final[k];
        if (s->extra_max[k] ? x < y : x > y)
            return false;
        strictly = strictly || (s->extra_max[k] ? x > y : x < y);
    }
    return strictly;
}

/* Whether t succeeded with a value for every metric. */
static bool s_full(const zt_study_t *s, const s_trial_t *t)
{
    bool full = t->has_final && zt_state_succeeded(t->state);
    for (int k = 0; full && k < s->nextra; k++)
        full = t->extra_has[k];
    return full;
}

/* The ids of the trials with every metric that no other such trial dominates. */
static json_t *s_pareto(zt_study_t *s)
{
    json_t *front = json_array();
    for (int i = 0; i < s->nt; i++) {
        const s_trial_t *t = &s->t[i];
        bool full = s_full(s, t), beaten = false;
        for (int j = 0; full && !beaten && j < s->nt; j++)
            beaten = &s->t[j] != t && s_full(s, &s->t[j]) && s_dominates(s, &s->t[j], t);
        if (full && !beaten)
            json_array_append_new(front, json_sprintf("%d", t->id));
    }
    return front;
}

double zt_study_hypervolume(zt_study_t *s, double *ref)
{
    int m = 1 + s->nextra, n = 0;
    double *F = malloc(sizeof(double) * (size_t) (s->nt + 1) * (size_t) m);
    for (int j = 0; j < m; j++)
        ref[j] = -INFINITY;
    for (int i = 0; i < s->nt; i++) {
        if (!s_full(s, &s->t[i]))
            continue;
        for (int j = 0; j < m; j++) { /* every metric minimised */
            double v = j == 0 ? s->t[i].final : s->t[i].extra_final[j - 1];
            bool max = j == 0 ? s->maximize : s->extra_max[j - 1];
            F[n * m + j] = max ? -v : v;
            ref[j] = F[n * m + j] > ref[j] ? F[n * m + j] : ref[j];
        }
        n++;
    }
    double hv = n ? zt_bo_hypervolume(F, n, m, ref) : NAN;
    for (int j = 0; j < m; j++) /* back to each metric's own sign */
        ref[j] = (j == 0 ? s->maximize : s->extra_max[j - 1]) ? -ref[j] : ref[j];
    free(F);
    return hv;
}

/* study.json's hypervolume: its value and the reference point. */
static json_t *s_hypervolume_json(zt_study_t *s)
{
    double ref[1 + ZT_STUDY_MAX_METRICS];
    double hv = zt_study_hypervolume(s, ref);
    json_t *r = json_object();
    for (int j = 0; j <= s->nextra && isfinite(hv); j++)
        json_object_set_new(r, j == 0 ? s->metric : s->extra[j - 1], json_real(ref[j]));
    return json_pack("{s:o, s:o}", "value", isfinite(hv) ? json_real(hv) : json_null(), "reference", r);
}

void zt_study_write(zt_study_t *s)
{
    json_t *trials = json_array();
    int best = -1;
    for (int i = 0; i < s->nt; i++) {
        s_trial_t *t = &s->t[i];
        json_array_append_new(trials, s_trial_json(s, t, s->np));
        if (t->has_final && zt_state_succeeded(t->state) &&
            (best < 0 || zt_study_better(s, t->final, s->t[best].final)))
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
    if (s->nextra) {
        json_object_set_new(doc, "paretoFront", s_pareto(s));
        json_object_set_new(doc, "hypervolume", s_hypervolume_json(s));
    }
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
    for (int p = 0; p < s->np; p++) { /* from its values, as this version places them (an inactive one at 0.5) */
        json_t *v = json_object_get(t->params, s->p[p].name);
        if (!v || !zt_search_unit(&s->p[p], v, &t->u[p]))
            t->u[p] = 0.5;
    }
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
    json_error_t jerr;
    json_t *doc = json_load_file(path, 0, &jerr);
    char diff[400];
    if (!doc && access(path, F_OK) == 0) /* an earlier study's record that cannot be read: not to be overwritten */
        zt_diag_add(diag, true, path, jerr.line, jerr.column, NULL, NULL, "cannot be read as a study's record (%s); "
                    "give --overwrite to start over there, or another --study-dir", jerr.text);
    free(path);
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

