/* A study in TensorBoard's HParams dashboard: <study-dir>/tensorboard holds
 * the experiment (the parameters with their domains, the study's metric)
 * and a run per trial (trial-N): its parameter values when it starts, each
 * measurement of the metric as it comes, its status when it ends. Point
 * `tensorboard --logdir <study-dir>/tensorboard` at it to compare trials in
 * the table, parallel coordinates and scatter views. A folder that cannot be
 * written is a warning, once: the study goes on. */
#include "tune/zt_study_int.h"
#include "tboard/zt_tb.h"
#include "base/zt_util.h"
#include "ztrain/zt_log.h"
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

static double s_now(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double) tv.tv_sec + (double) tv.tv_usec / 1e6;
}

static char *s_dir(zt_study_t *s, const char *run)
{
    return run ? zt_strdupf("%s/tensorboard/%s", s->dir, run) : zt_strdupf("%s/tensorboard", s->dir);
}

static zt_tb_t *s_open(zt_study_t *s, const char *run)
{
    char *dir = s_dir(s, run), err[600];
    zt_tb_t *tb = zt_tb_open(dir, err, sizeof err);
    if (!tb && !s->tb_warned) {
        zt_warn("%s: the study is not shown in TensorBoard", err);
        s->tb_warned = true;
    }
    free(dir);
    return tb;
}

/* Whether the folder holds an event file already (a resumed study). */
static bool s_has_events(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    bool found = false;
    while (d && !found && (e = readdir(d)))
        found = !strncmp(e->d_name, "events.out.tfevents.", 20);
    if (d)
        closedir(d);
    return found;
}

void zt_study_tb_experiment(zt_study_t *s)
{
    char *root = s_dir(s, NULL);
    bool had = s_has_events(root);
    free(root);
    if (had)
        return; /* resumed: the same study (its spec is checked), the same experiment */
    zt_tb_hparam_t hp[MAX_PARAMS];
    double *nums[MAX_PARAMS] = { 0 };
    const char **strs[MAX_PARAMS] = { 0 };
    for (int i = 0; i < s->np; i++) {
        const s_param_t *p = &s->p[i];
        hp[i] = (zt_tb_hparam_t) { .name = p->name, .kind = p->kind == P_CAT ? ZT_TB_STRING : ZT_TB_NUMBER,
                                   .min = p->min, .max = p->max };
        if (p->kind == P_CAT || p->kind == P_DISC) {
            size_t n = json_array_size(p->values);
            nums[i] = calloc(n + 1, sizeof(double));
            strs[i] = calloc(n + 1, sizeof(char *));
            for (size_t k = 0; k < n; k++) {
                json_t *v = json_array_get(p->values, k);
                nums[i][k] = json_number_value(v);
                strs[i][k] = json_string_value(v);
            }
            hp[i].ndiscrete = (int) n;
            if (p->kind == P_CAT)
                hp[i].discrete_strings = strs[i];
            else
                hp[i].discrete_numbers = nums[i];
        }
    }
    const char *metrics[2 + ZT_STUDY_MAX_METRICS] = { s->metric };
    for (int k = 0; k < s->nextra; k++)
        metrics[1 + k] = s->extra[k];
    if (s->nextra) /* several: the study's hypervolume when each trial ended */
        metrics[1 + s->nextra] = "hypervolume";
    zt_tb_t *tb = s_open(s, NULL);
    char *desc = zt_strdupf("ztrain study in %s: %s %s", s->dir, s->maximize ? "maximize" : "minimize", s->metric);
    zt_tb_experiment(tb, s->dir, desc, hp, s->np, metrics, 1 + s->nextra + (s->nextra > 0), s_now());
    free(desc);
    zt_tb_close(&tb);
    for (int i = 0; i < s->np; i++) {
        free(nums[i]);
        free(strs[i]);
    }
}

void zt_study_tb_start(zt_study_t *s, s_trial_t *t)
{
    char run[32];
    snprintf(run, sizeof run, "trial-%d", t->id);
    if (!(t->tb = s_open(s, run)))
        return;
    zt_tb_hparam_t hp[MAX_PARAMS];
    int n = 0;
    for (int i = 0; i < s->np; i++) {
        json_t *v = json_object_get(t->params, s->p[i].name);
        if (!v)
            continue; /* a conditional parameter its parent left inactive */
        hp[n++] = (zt_tb_hparam_t) { .name = s->p[i].name, .kind = json_is_string(v) ? ZT_TB_STRING : ZT_TB_NUMBER,
                                     .number = json_number_value(v), .string = json_string_value(v) };
    }
    zt_tb_session_start(t->tb, hp, n, NULL, s_now());
    t->tb_meas = 0;
}

void zt_study_tb_measure(zt_study_t *s, s_trial_t *t)
{
    for (; t->tb && t->tb_meas < json_array_size(t->meas); t->tb_meas++) {
        json_t *m = json_array_get(t->meas, t->tb_meas);
        double step = json_number_value(json_array_get(m, 0));
        zt_tb_scalar(t->tb, s->metric, json_number_value(json_array_get(m, 1)),
                     isfinite(step) && step >= 0 ? (int64_t) step : 0);
    }
}

void zt_study_tb_end(zt_study_t *s, s_trial_t *t)
{
    if (!t->tb)
        return;
    zt_study_tb_measure(s, t);
    int64_t last = 0; /* the other metrics' last values, at the last step */
    json_t *lm = json_array_get(t->meas, json_array_size(t->meas) ? json_array_size(t->meas) - 1 : 0);
    if (lm && isfinite(json_number_value(json_array_get(lm, 0))) && json_number_value(json_array_get(lm, 0)) >= 0)
        last = (int64_t) json_number_value(json_array_get(lm, 0));
    for (int k = 0; k < s->nextra; k++)
        if (t->extra_has[k])
            zt_tb_scalar(t->tb, s->extra[k], t->extra_final[k], last);
    double ref[1 + ZT_STUDY_MAX_METRICS], hv = s->nextra ? zt_study_hypervolume(s, ref) : NAN;
    if (isfinite(hv))
        zt_tb_scalar(t->tb, "hypervolume", hv, last);
    zt_tb_status_t st = zt_state_succeeded(t->state) ? ZT_TB_STATUS_SUCCESS
                        : !strcmp(t->state, "CANCELLED") ? ZT_TB_STATUS_UNKNOWN : ZT_TB_STATUS_FAILURE;
    zt_tb_session_end(t->tb, st, s_now());
    zt_tb_close(&t->tb);
}
