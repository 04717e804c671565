/* A study warm-started from earlier ones (SageMaker's WarmStartConfig):
 * each parent's finished trials, in this study's coordinates, are the
 * Gaussian process's first observations. A parent is an earlier study's
 * directory, named by its path or as the newest $ZT_JOBS_DIR/NAME-* (the
 * default directory of `ztrain tune` for a tuning job named NAME). */
#include "tune/zt_study_int.h"
#include "base/zt_util.h"
#include "ztrain/zt_knobs.h"
#include "ztrain/zt_log.h"
#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static bool s_has_study(const char *dir)
{
    char *p = zt_strdupf("%s/study.json", dir);
    struct stat st;
    bool ok = stat(p, &st) == 0 && S_ISREG(st.st_mode);
    free(p);
    return ok;
}

/* The directory a parent's name stands for (heap), or NULL. */
static char *s_parent_dir(const char *name)
{
    if (s_has_study(name))
        return realpath(name, NULL);
    if (strchr(name, '/'))
        return NULL;
    const char *jobs = zt_knob_str(ZT_KNOB_JOBS_DIR);
    DIR *d = opendir(jobs);
    struct dirent *e;
    char best[NAME_MAX + 1] = "";
    size_t n = strlen(name);
    while (d && (e = readdir(d))) /* NAME-YYYYmmdd-HHMMSS-PID: the newest sorts last */
        if (!strncmp(e->d_name, name, n) && e->d_name[n] == '-' && strcmp(e->d_name, best) > 0) {
            char *p = zt_strdupf("%s/%s", jobs, e->d_name);
            if (s_has_study(p))
                snprintf(best, sizeof best, "%s", e->d_name);
            free(p);
        }
    if (d)
        closedir(d);
    if (!best[0])
        return NULL;
    char *p = zt_strdupf("%s/%s", jobs, best), *real = realpath(p, NULL);
    free(p);
    return real;
}

/* One parent's finished trials into the priors; false (with the reason in
 * diag) when it is no study of this one's objective. */
static bool s_take_parent(zt_study_t *s, int k, const char *dir, zt_diag_t *diag, json_t *record)
{
    char field[128];
    snprintf(field, sizeof field, "WarmStartConfig.ParentHyperParameterTuningJobs[%d]", k);
    char *path = zt_strdupf("%s/study.json", dir);
    json_t *doc = json_load_file(path, 0, NULL);
    free(path);
    const char *metric = json_string_value(json_object_get(doc, "metricId"));
    const char *goal = json_string_value(json_object_get(doc, "goal"));
    if (!metric || !goal || strcmp(metric, s->metric) || strcmp(goal, s->maximize ? "MAXIMIZE" : "MINIMIZE")) {
        zt_diag_add(diag, true, s->opts.file, 0, 0, field, NULL, "%s: its study %s %s, this one %s %s: a warm start "
                    "needs the same objective", dir, goal ? goal : "(none)", metric ? metric : "(none)",
                    s->maximize ? "MAXIMIZE" : "MINIMIZE", s->metric);
        json_decref(doc);
        return false;
    }
    size_t i;
    json_t *t;
    int used = 0, outside = 0, finished = 0;
    json_array_foreach(json_object_get(doc, "trials"), i, t) {
        json_t *fin = json_object_get(t, "finalMeasurement"), *params = json_object_get(t, "parameters");
        if (!json_is_number(fin) || strcmp(json_string_value(json_object_get(t, "state")) ?: "", "SUCCEEDED"))
            continue;
        finished++;
        double u[MAX_PARAMS];
        bool in = true;
        for (int p = 0; in && p < s->np; p++) {
            json_t *v = json_object_get(params, s->p[p].name);
            if (!v && s->p[p].parent >= 0)
                u[p] = 0.5; /* a conditional parameter inactive there */
            else
                in = v && zt_search_unit(&s->p[p], v, &u[p]);
        }
        if (!in) {
            outside++;
            continue;
        }
        s->prior_u = realloc(s->prior_u, sizeof(double) * (size_t) (s->nprior + 1) * MAX_PARAMS);
        s->prior_y = realloc(s->prior_y, sizeof(double) * (size_t) (s->nprior + 1));
        memcpy(s->prior_u + (size_t) s->nprior * MAX_PARAMS, u, sizeof u);
        s->prior_y[s->nprior++] = json_number_value(fin);
        used++;
    }
    zt_info("warm start: %d of the %d finished trials of %s are the search's first observations%s", used,
            finished, dir, outside ? " (the others lie outside this study's ranges)" : "");
    json_array_append_new(record, json_pack("{s:s, s:i, s:i}", "studyDir", dir, "finishedTrials", finished,
                                            "observations", used));
    json_decref(doc);
    return true;
}

void zt_study_warm_start(zt_study_t *s, zt_diag_t *diag)
{
    if (!s->nwarm)
        return;
    if (s->algo != A_BAYES || s->hyperband)
        zt_warn("warm start: the parents' trials guide the Bayesian search only; this study's strategy "
                "records them and does not use them");
    json_t *record = json_array();
    for (int k = 0; k < s->nwarm; k++) {
        char *dir = s_parent_dir(s->warm[k]);
        if (!dir) {
            char field[128];
            snprintf(field, sizeof field, "WarmStartConfig.ParentHyperParameterTuningJobs[%d]"
                     ".HyperParameterTuningJobName", k);
            json_t *v = json_string(s->warm[k]);
            char *quoted = json_dumps(v, JSON_ENCODE_ANY);
            json_decref(v);
            zt_diag_add(diag, true, s->opts.file, 0, 0, field, quoted, "no earlier study there: give a "
                        "study directory (holding study.json), or the name of a tuning job whose study is "
                        "in %s (NAME-*)", zt_knob_str(ZT_KNOB_JOBS_DIR));
            free(quoted);
            continue;
        }
        s_take_parent(s, k, dir, diag, record);
        free(dir);
    }
    s->warm_record = json_pack("{s:s, s:o}", "type", s->warm_transfer ? "TransferLearning"
                                                                      : "IdenticalDataAndAlgorithm", "parents", record);
}
