/* A study's spec, read and checked (Vertex HyperparameterTuningJob
 * fields): every problem is reported with its path and value. */
#include "tune/zt_study_int.h"
#include "base/zt_util.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_log.h"
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "plan/zt_doc.h"
#include "plan/zt_jobspec.h"
#include "formats/zt_format.h"
#include <unistd.h>

/* ------------------------------------------------------------ parsing */

typedef struct { zt_doc_t *doc; zt_diag_t *diag; zt_study_t *s; bool allow_unknown; } s_ctx_t;
#define ERR(c, path, val, ...) zt_doc_report((c)->doc, (c)->diag, 1, (path), (val), __VA_ARGS__)
#define WARN(c, path, val, ...) zt_doc_report((c)->doc, (c)->diag, 0, (path), (val), __VA_ARGS__)

static void s_unknown(s_ctx_t *c, json_t *obj, const char *path, const char *const *known)
{
    zt_doc_check_unknown(c->doc, c->diag, obj, path, known, c->allow_unknown);
}


static int s_cmp_json_num(const void *a, const void *b)
{
    double x = json_number_value(*(json_t *const *) a), y = json_number_value(*(json_t *const *) b);
    return x < y ? -1 : x > y;
}

/* parameterId: required, unique, short enough. */
static void s_param_id(s_ctx_t *c, json_t *j, const char *path, s_param_t *p)
{
    zt_study_t *s = c->s;
    const char *id = json_string_value(json_object_get(j, "parameterId"));
    char *ip = zt_strdupf("%s.parameterId", path);
    if (!id || !*id || strlen(id) >= sizeof p->name)
        ERR(c, ip, json_object_get(j, "parameterId"), "required: a name (it becomes --name=value)");
    else {
        for (int i = 0; i < s->np; i++)
            if (!strcmp(s->p[i].name, id))
                ERR(c, ip, json_object_get(j, "parameterId"), "duplicate parameterId");
        snprintf(p->name, sizeof p->name, "%s", id);
    }
    free(ip);
}

/* doubleValueSpec / integerValueSpec: minValue and maxValue. */
static void s_param_range(s_ctx_t *c, json_t *spec, const char *sp, s_param_t *p)
{
    char *mnp = zt_strdupf("%s.minValue", sp), *mxp = zt_strdupf("%s.maxValue", sp);
    json_t *mn = json_object_get(spec, "minValue"), *mx = json_object_get(spec, "maxValue");
    if (!zt_study_num(mn, &p->min))
        ERR(c, mnp, mn, "required: a number");
    else if (!zt_study_num(mx, &p->max))
        ERR(c, mxp, mx, "required: a number");
    else if (p->kind == P_DOUBLE ? p->min >= p->max : p->min > p->max)
        ERR(c, mxp, mx, "must be %s minValue (%g)", p->kind == P_DOUBLE ? "greater than" : "at least", p->min);
    else if (p->kind == P_INT && (p->min != floor(p->min) || p->max != floor(p->max)))
        ERR(c, sp, spec, "integerValueSpec bounds must be whole numbers");
    free(mnp);
    free(mxp);
}

/* categoricalValueSpec / discreteValueSpec: values (discrete ones sorted). */
static void s_param_values(s_ctx_t *c, json_t *spec, const char *sp, s_param_t *p)
{
    json_t *vals = json_object_get(spec, "values");
    char *vp = zt_strdupf("%s.values", sp);
    if (!json_is_array(vals) || json_array_size(vals) == 0) {
        ERR(c, vp, vals, "required: a non-empty list");
        free(vp);
        return;
    }
    p->values = json_array();
    size_t i;
    json_t *v;
    json_array_foreach(vals, i, v) {
        double d = 0;
        char *ep = zt_strdupf("%s[%zu]", vp, i);
        if (p->kind == P_CAT && !json_is_string(v))
            ERR(c, ep, v, "categorical values are strings");
        else if (p->kind == P_DISC && !zt_study_num(v, &d))
            ERR(c, ep, v, "discrete values are numbers");
        else
            json_array_append_new(p->values, p->kind == P_CAT ? json_incref(v) : json_real(d));
        free(ep);
    }
    free(vp);
    if (p->kind != P_DISC)
        return;
    size_t n = json_array_size(p->values);
    json_t **a = malloc((n + 1) * sizeof *a);
    for (i = 0; i < n; i++)
        a[i] = json_incref(json_array_get(p->values, i));
    qsort(a, n, sizeof *a, s_cmp_json_num);
    json_array_clear(p->values);
    for (i = 0; i < n; i++)
        json_array_append_new(p->values, a[i]);
    free(a);
}

/* scaleType, and what it needs of the range. */
static void s_param_scale(s_ctx_t *c, json_t *j, const char *path, const char *sp, s_param_t *p)
{
    const char *scale = json_string_value(json_object_get(j, "scaleType"));
    char *scp = zt_strdupf("%s.scaleType", path);
    if (!scale || !strcmp(scale, "UNIT_LINEAR_SCALE") || !strcmp(scale, "SCALE_TYPE_UNSPECIFIED"))
        p->scale = SC_LINEAR;
    else if (!strcmp(scale, "UNIT_LOG_SCALE"))
        p->scale = SC_LOG;
    else if (!strcmp(scale, "UNIT_REVERSE_LOG_SCALE"))
        p->scale = SC_RLOG;
    else
        ERR(c, scp, json_object_get(j, "scaleType"),
            "expected UNIT_LINEAR_SCALE, UNIT_LOG_SCALE or UNIT_REVERSE_LOG_SCALE");
    if (p->scale != SC_LINEAR && (p->kind == P_DOUBLE || p->kind == P_INT) && p->min <= 0) {
        json_t *v = json_real(p->min);
        char *mnp = zt_strdupf("%s.minValue", sp);
        ERR(c, mnp, v, "a log scale needs minValue > 0");
        free(mnp);
        json_decref(v);
    }
    if (p->scale != SC_LINEAR && p->kind == P_CAT)
        WARN(c, scp, json_object_get(j, "scaleType"), "ignored for categorical parameters");
    free(scp);
}

static void s_parse_param(s_ctx_t *c, json_t *j, const char *path, int parent, json_t *when);

/* conditionalParameterSpecs: child parameters, active for some parent values. */
static void s_param_children(s_ctx_t *c, json_t *j, const char *path, int me)
{
    json_t *conds = json_object_get(j, "conditionalParameterSpecs");
    size_t i;
    json_t *cs;
    json_array_foreach(conds, i, cs) {
        char *cp = zt_strdupf("%s.conditionalParameterSpecs[%zu]", path, i);
        static const char *const ck[] = { "parentDiscreteValues", "parentIntValues",
                                          "parentCategoricalValues", "parameterSpec", NULL };
        s_unknown(c, cs, cp, ck);
        json_t *w = json_object_get(json_object_get(cs, "parentDiscreteValues"), "values");
        if (!w) w = json_object_get(json_object_get(cs, "parentIntValues"), "values");
        if (!w) w = json_object_get(json_object_get(cs, "parentCategoricalValues"), "values");
        if (!json_is_array(w))
            ERR(c, cp, NULL, "give parentDiscreteValues, parentIntValues or parentCategoricalValues "
                "{values: [...]}");
        else {
            char *pp = zt_strdupf("%s.parameterSpec", cp);
            s_parse_param(c, json_object_get(cs, "parameterSpec"), pp, me, w);
            free(pp);
        }
        free(cp);
    }
}

/* One parameter spec (and, recursively, its conditional children). */
static void s_parse_param(s_ctx_t *c, json_t *j, const char *path, int parent, json_t *when)
{
    zt_study_t *s = c->s;
    if (!json_is_object(j)) {
        ERR(c, path, j, "expected a parameter spec object");
        return;
    }
    if (s->np >= MAX_PARAMS) {
        ERR(c, path, NULL, "at most %d parameters", MAX_PARAMS);
        return;
    }
    static const char *const known[] = { "parameterId", "doubleValueSpec", "integerValueSpec",
        "categoricalValueSpec", "discreteValueSpec", "scaleType", "conditionalParameterSpecs", NULL };
    s_unknown(c, j, path, known);
    s_param_t *p = &s->p[s->np];
    memset(p, 0, sizeof *p);
    p->parent = parent;
    p->when = when ? json_incref(when) : NULL;
    s_param_id(c, j, path, p);
    static const char *const specs[4] = { "doubleValueSpec", "integerValueSpec",
                                          "categoricalValueSpec", "discreteValueSpec" };
    int nspec = 0, which = -1;
    for (int k = 0; k < 4; k++)
        if (json_object_get(j, specs[k])) {
            nspec++;
            which = k;
        }
    if (nspec != 1) {
        ERR(c, path, NULL, "give exactly one of doubleValueSpec, integerValueSpec, "
            "categoricalValueSpec, discreteValueSpec (%d given)", nspec);
        return;
    }
    p->kind = (s_kind_t) which;
    json_t *spec = json_object_get(j, specs[which]);
    char *sp = zt_strdupf("%s.%s", path, specs[which]);
    if (p->kind == P_DOUBLE || p->kind == P_INT)
        s_param_range(c, spec, sp, p);
    else
        s_param_values(c, spec, sp, p);
    s_param_scale(c, j, path, sp, p);
    free(sp);
    s_param_children(c, j, path, s->np++);
}

/* ------------------------------------------------------------ load */

/* studySpec.metrics: the first metric and its goal. */
static void s_parse_metric(s_ctx_t *c, json_t *ss)
{
    zt_study_t *s = c->s;
    json_t *ms = json_object_get(ss, "metrics");
    if (!json_is_array(ms) || json_array_size(ms) == 0) {
        ERR(c, "studySpec.metrics", ms, "required: [{metricId, goal}]");
        return;
    }
    if (json_array_size(ms) > 1 + ZT_STUDY_MAX_METRICS)
        ERR(c, "studySpec.metrics", NULL, "at most %d metrics", 1 + ZT_STUDY_MAX_METRICS);
    json_t *m;
    size_t i;
    json_array_foreach(ms, i, m) {
        static const char *const mk[] = { "metricId", "goal", "safetyConfig", NULL };
        char *mp = zt_strdupf("studySpec.metrics[%zu]", i);
        s_unknown(c, m, mp, mk);
        const char *xid = json_string_value(json_object_get(m, "metricId"));
        const char *xg = json_string_value(json_object_get(m, "goal"));
        if (i > 0 && s->nextra < ZT_STUDY_MAX_METRICS) { /* the first is read below */
            char *ip = zt_strdupf("%s.metricId", mp), *gp = zt_strdupf("%s.goal", mp);
            if (!xid || !*xid || strlen(xid) >= sizeof s->extra[0])
                ERR(c, ip, json_object_get(m, "metricId"), "required: the metric tag the trials report");
            if (!xg || (strcmp(xg, "MAXIMIZE") && strcmp(xg, "MINIMIZE")))
                ERR(c, gp, json_object_get(m, "goal"), "expected MAXIMIZE or MINIMIZE");
            for (size_t k = 0; xid && k < i; k++) {
                const char *prev = json_string_value(json_object_get(json_array_get(ms, k), "metricId"));
                if (prev && !strcmp(xid, prev))
                    ERR(c, ip, json_object_get(m, "metricId"), "a second metric of this name");
            }
            snprintf(s->extra[s->nextra], sizeof s->extra[0], "%s", xid ? xid : "");
            s->extra_max[s->nextra++] = xg && !strcmp(xg, "MAXIMIZE");
            free(ip);
            free(gp);
        }
        free(mp);
    }
    m = json_array_get(ms, 0);
    const char *id = json_string_value(json_object_get(m, "metricId"));
    const char *goal = json_string_value(json_object_get(m, "goal"));
    if (!id || !*id || strlen(id) >= sizeof s->metric)
        ERR(c, "studySpec.metrics[0].metricId", json_object_get(m, "metricId"),
            "required: the metric tag the trials report");
    else
        snprintf(s->metric, sizeof s->metric, "%s", id);
    if (!goal || (strcmp(goal, "MAXIMIZE") && strcmp(goal, "MINIMIZE")))
        ERR(c, "studySpec.metrics[0].goal", json_object_get(m, "goal"), "expected MAXIMIZE or MINIMIZE");
    else
        s->maximize = !strcmp(goal, "MAXIMIZE");
}

/* studySpec.algorithm, and what grid search needs of the parameters. */
static void s_parse_algorithm(s_ctx_t *c, json_t *ss)
{
    zt_study_t *s = c->s;
    const char *algo = json_string_value(json_object_get(ss, "algorithm"));
    if (!algo || !strcmp(algo, "ALGORITHM_UNSPECIFIED"))
        s->algo = A_BAYES;
    else if (!strcmp(algo, "GRID_SEARCH"))
        s->algo = A_GRID;
    else if (!strcmp(algo, "RANDOM_SEARCH"))
        s->algo = A_RANDOM;
    else
        ERR(c, "studySpec.algorithm", json_object_get(ss, "algorithm"),
            "expected GRID_SEARCH, RANDOM_SEARCH, or unset (Bayesian optimisation)");
    for (int k = 0; s->algo == A_GRID && k < s->np; k++)
        if (s->p[k].kind == P_DOUBLE)
            ERR(c, "studySpec.algorithm", json_object_get(ss, "algorithm"),
                "GRID_SEARCH needs integer, categorical or discrete parameters; '%s' is a "
                "doubleValueSpec", s->p[k].name);
}

/* A Duration ("3600s") at path: its milliseconds; 0 when absent. */
static int64_t s_duration_ms(s_ctx_t *c, json_t *obj, const char *path, const char *key)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return 0;
    double sec = json_is_string(v) ? zt_parse_duration(json_string_value(v)) : -1;
    char *p = zt_strdupf("%s.%s", path, key);
    if (sec <= 0)
        ERR(c, p, v, "expected a duration such as \"3600s\"");
    free(p);
    return sec > 0 ? (int64_t) (sec * 1000) : 0;
}

/* A whole number >= 0 at path; 0 when absent. */
static double s_count(s_ctx_t *c, json_t *obj, const char *path, const char *key)
{
    json_t *v = json_object_get(obj, key);
    double n = 0;
    char *p = zt_strdupf("%s.%s", path, key);
    if (v && (!zt_study_num(v, &n) || n < 0 || n != floor(n)))
        ERR(c, p, v, "expected a whole number >= 0");
    free(p);
    return v ? n : 0;
}

/* The early-stopping rule (one of median, decay curve, convex), the GP's
 * observationNoise, and studyStoppingConfig. */
static void s_parse_stopping(s_ctx_t *c, json_t *ss)
{
    zt_study_t *s = c->s;
    json_t *dc = json_object_get(ss, "decayCurveStoppingSpec"), *cv = json_object_get(ss, "convexAutomatedStoppingSpec");
    s->decay_stop = json_is_object(dc);
    s->convex_stop = json_is_object(cv);
    if (s->median_stop + s->decay_stop + s->convex_stop > 1)
        ERR(c, "studySpec", NULL, "one early-stopping rule at most: medianAutomatedStoppingSpec, "
            "decayCurveStoppingSpec or convexAutomatedStoppingSpec");
    static const char *const dk[] = { "useElapsedDuration", NULL };
    static const char *const ck[] = { "maxStepCount", "minStepCount", "minMeasurementCount",
        "learningRateParameterName", "useElapsedDuration", "updateAllStoppedTrials", NULL };
    if (s->decay_stop)
        s_unknown(c, dc, "studySpec.decayCurveStoppingSpec", dk);
    if (s->convex_stop) {
        s_unknown(c, cv, "studySpec.convexAutomatedStoppingSpec", ck);
        const char *cp = "studySpec.convexAutomatedStoppingSpec";
        s->convex_max_step = s_count(c, cv, cp, "maxStepCount");
        s->convex_min_step = s_count(c, cv, cp, "minStepCount");
        s->convex_min_meas = (int) s_count(c, cv, cp, "minMeasurementCount");
        if (json_object_get(cv, "learningRateParameterName"))
            WARN(c, "studySpec.convexAutomatedStoppingSpec.learningRateParameterName", NULL,
                 "ignored: the curve is the measurements' own");
        if (json_object_get(cv, "updateAllStoppedTrials"))
            WARN(c, "studySpec.convexAutomatedStoppingSpec.updateAllStoppedTrials", NULL,
                 "ignored: a stopped trial stays stopped");
    }
    json_t *el = s->decay_stop ? json_object_get(dc, "useElapsedDuration") : json_object_get(cv, "useElapsedDuration");
    if (json_is_true(el))
        WARN(c, s->decay_stop ? "studySpec.decayCurveStoppingSpec.useElapsedDuration"
                              : "studySpec.convexAutomatedStoppingSpec.useElapsedDuration", NULL,
             "ignored: the curve is over the measurements' steps");
    const char *noise = json_string_value(json_object_get(ss, "observationNoise"));
    s->gp_noise = noise && !strcmp(noise, "HIGH") ? 1e-2 : 1e-6;
    if (json_object_get(ss, "observationNoise") && (!noise || (strcmp(noise, "HIGH") && strcmp(noise, "LOW") &&
                                                               strcmp(noise, "OBSERVATION_NOISE_UNSPECIFIED"))))
        ERR(c, "studySpec.observationNoise", json_object_get(ss, "observationNoise"), "LOW or HIGH");
    json_t *sc = json_object_get(ss, "studyStoppingConfig");
    if (!sc)
        return;
    const char *sp = "studySpec.studyStoppingConfig";
    static const char *const sk[] = { "shouldStopAsap", "minimumRuntimeConstraint", "maximumRuntimeConstraint",
        "minNumTrials", "maxNumTrials", "maxNumTrialsNoProgress", "maxDurationNoProgress", NULL };
    s_unknown(c, sc, sp, sk);
    s->stop_asap = json_is_true(json_object_get(sc, "shouldStopAsap"));
    s->stop_min_trials = (int) s_count(c, sc, sp, "minNumTrials");
    s->stop_no_progress_trials = (int) s_count(c, sc, sp, "maxNumTrialsNoProgress");
    s->stop_no_progress_ms = s_duration_ms(c, sc, sp, "maxDurationNoProgress");
    double cap = s_count(c, sc, sp, "maxNumTrials");
    if (cap > 0 && cap < s->max_trials)
        s->max_trials = (int) cap;
    static const char *const tk[] = { "maxDuration", "endTime", NULL };
    const char *names[2] = { "minimumRuntimeConstraint", "maximumRuntimeConstraint" };
    int64_t *into[2] = { &s->stop_min_ms, &s->stop_max_ms };
    for (int i = 0; i < 2; i++) {
        json_t *tc = json_object_get(sc, names[i]);
        char *tp = zt_strdupf("%s.%s", sp, names[i]);
        if (tc)
            s_unknown(c, tc, tp, tk);
        if (tc && json_object_get(tc, "endTime"))
            ERR(c, tp, json_object_get(tc, "endTime"), "give maxDuration (a duration from the study's start)");
        else if (tc)
            *into[i] = s_duration_ms(c, tc, tp, "maxDuration");
        free(tp);
    }
}

static void s_parse_study_spec(s_ctx_t *c, json_t *ss)
{
    zt_study_t *s = c->s;
    static const char *const sk[] = { "metrics", "parameters", "algorithm", "measurementSelectionType",
        "medianAutomatedStoppingSpec", "observationNoise", "decayCurveStoppingSpec",
        "convexAutomatedStoppingSpec", "studyStoppingConfig", NULL };
    s_unknown(c, ss, "studySpec", sk);
    s_parse_metric(c, ss);
    json_t *ps = json_object_get(ss, "parameters");
    if (!json_is_array(ps) || json_array_size(ps) == 0)
        ERR(c, "studySpec.parameters", ps, "required: at least one parameter");
    size_t i;
    json_t *pj;
    json_array_foreach(ps, i, pj) {
        char *pp = zt_strdupf("studySpec.parameters[%zu]", i);
        s_parse_param(c, pj, pp, -1, NULL);
        free(pp);
    }
    s_parse_algorithm(c, ss);
    const char *sel = json_string_value(json_object_get(ss, "measurementSelectionType"));
    if (sel && strcmp(sel, "LAST_MEASUREMENT") && strcmp(sel, "BEST_MEASUREMENT") && strcmp(sel, "LAST") &&
        strcmp(sel, "BEST") && strcmp(sel, "MEASUREMENT_SELECTION_TYPE_UNSPECIFIED"))
        ERR(c, "studySpec.measurementSelectionType", json_object_get(ss, "measurementSelectionType"),
            "expected LAST_MEASUREMENT or BEST_MEASUREMENT");
    s->select_best = sel && strstr(sel, "BEST");
    s->median_stop = json_is_object(json_object_get(ss, "medianAutomatedStoppingSpec"));
    s_parse_stopping(c, ss);
}

/* maxTrialCount, parallelTrialCount, maxFailedTrialCount. */
static void s_parse_counts(s_ctx_t *c, json_t *root)
{
    zt_study_t *s = c->s;
    double v = 0;
    json_t *mt = json_object_get(root, "maxTrialCount"), *pt = json_object_get(root, "parallelTrialCount"),
           *mf = json_object_get(root, "maxFailedTrialCount");
    if (!zt_study_num(mt, &v) || v < 1 || v > MAX_TRIALS || v != floor(v))
        ERR(c, "maxTrialCount", mt, "required: a whole number from 1 to %d", MAX_TRIALS);
    else
        s->max_trials = (int) v;
    s->parallel = 1;
    if (pt && (!zt_study_num(pt, &v) || v < 1 || v != floor(v)))
        ERR(c, "parallelTrialCount", pt, "expected a whole number >= 1");
    else if (pt)
        s->parallel = (int) v;
    if (s->max_trials && s->parallel > s->max_trials) {
        json_t *pv = json_integer(s->parallel);
        ERR(c, "parallelTrialCount", pv, "must be at most maxTrialCount (%d)", s->max_trials);
        json_decref(pv);
    }
    if (mf && (!zt_study_num(mf, &v) || v < 0 || v != floor(v)))
        ERR(c, "maxFailedTrialCount", mf, "expected a whole number >= 0");
    /* 0 or unset: the service decides; ztrain allows half the trials to fail */
    s->max_failed = mf && v > 0 ? (int) v : (s->max_trials > 1 ? s->max_trials / 2 : 1);
}

/* The trial job, checked like any job; then the study directory, with the
 * trial job written there (and, for grid search, every assignment). */
static void s_trial_job(zt_study_t *s, json_t *root, zt_diag_t *diag)
{
    zt_plan_opts_t po = { s->opts.file, json_array(), NULL, 0, NULL, "trialJobSpec",
                          s->opts.allow_unknown_fields, s->job_text };
    zt_plan_t *plan = NULL;
    zt_format_load(&po, &plan, diag);
    json_decref(po.flags);
    char why[1024];
    if (plan) {
        if (plan->base_output_dir)
            s->base_output = strdup(plan->base_output_dir);
        if (zt_format_folders(plan, ZT_DIR_CHECK, why, sizeof why) != 0) /* every trial's, before any starts */
            zt_diag_add(diag, true, s->opts.file, 0, 0, NULL, NULL, "%s", why);
        zt_plan_destroy(&plan);
    }
    if (zt_diag_errors(diag) > 0)
        return;
    if (zt_mkdir_trusted(s->opts.study_dir, why, sizeof why) != ZT_OK) { /* before its study.json is read */
        zt_diag_add(diag, true, s->opts.study_dir, 0, 0, NULL, NULL, "the study directory: %s", why);
        return;
    }
    char real[4096];
    s->dir = strdup(realpath(s->opts.study_dir, real) ? real : s->opts.study_dir);
    s->spec = json_incref(root);
    s->t = calloc((size_t) s->max_trials, sizeof *s->t);
    zt_study_adopt_dir(s, diag);
    zt_study_warm_start(s, diag);
    if (zt_diag_errors(diag) > 0)
        return;
    s->trial_job = zt_strdupf("%s/trial-job.json", s->dir); /* written when trials start (zt_study_run) */
    if (s->algo == A_GRID) {
        s->grid = json_array();
        json_t *params = json_object();
        zt_search_grid(s, 0, params, s->grid);
        json_decref(params);
    }
}

/* What another service's tuning job said beyond the study document (its
 * format's x), taken over. */
static void s_take_extras(zt_study_t *s, zt_study_extras_t *x)
{
    s->metric_re = x->metric_re; /* moved: freed (regfree) as the study's */
    s->has_metric_re = x->has_metric_re;
    s->hyperband = x->hyperband;
    s->hb_min = x->hb_min;
    s->hb_max = x->hb_max;
    for (int i = 0; i < x->nwarm; i++)
        s->warm[i] = x->warm[i];
    s->nwarm = x->nwarm;
    s->warm_transfer = x->warm_transfer;
}

zt_study_t *zt_study_new(const zt_study_opts_t *opts, zt_diag_t *diag)
{
    zt_doc_t *doc = NULL;
    if (zt_doc_load(opts->file, &doc, diag) != ZT_OK)
        return NULL;
    zt_study_t *s = calloc(1, sizeof *s);
    s->opts = *opts;
    s->rng = (unsigned) (opts->seed ? opts->seed : 1);
    s->state = "RUNNING";
    s_ctx_t ctx = { doc, diag, s, s->opts.allow_unknown_fields }, *c = &ctx;
    json_t *root = doc->root;
    const zt_format_t *f = zt_format_study_of(root);
    if (f) { /* another service's tuning job (AI Platform's hyperparameters block, SageMaker's): the study it is */
        zt_study_extras_t x = { 0 };
        root = f->study(doc, diag, s->opts.allow_unknown_fields, &x);
        s_take_extras(s, &x);
        json_decref(doc->root);
        doc->root = root;
        s->job_text = json_dumps(root, JSON_COMPACT);
    }
    static const char *const rk[] = { "displayName", "studySpec", "maxTrialCount", "parallelTrialCount",
        "maxFailedTrialCount", "trialJobSpec", "labels", "encryptionSpec", NULL };
    s_unknown(c, root, "", rk);
    s_parse_counts(c, root);
    json_t *ss = json_object_get(root, "studySpec");
    if (!json_is_object(ss))
        ERR(c, "studySpec", ss, "required: the metrics, parameters and algorithm");
    else
        s_parse_study_spec(c, ss); /* after the counts: studyStoppingConfig.maxNumTrials caps them */
    s_trial_job(s, root, diag);
    zt_doc_destroy(&doc);
    if (zt_diag_errors(diag) > 0) {
        zt_study_destroy(&s);
        return NULL;
    }
    s->tty = isatty(STDOUT_FILENO);
    s->launcher = zt_backend_local_new();
    return s;
}

void zt_study_destroy(zt_study_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zt_study_t *s = *self_p;
    for (int i = 0; i < s->np; i++) {
        json_decref(s->p[i].values);
        json_decref(s->p[i].when);
    }
    for (int i = 0; i < s->nt; i++) {
        json_decref(s->t[i].params);
        json_decref(s->t[i].meas);
        free(s->t[i].job_dir);
        free(s->t[i].base);
        free(s->t[i].message);
    }
    free(s->t);
    if (s->launcher) {
        s->launcher->cleanup(s->launcher);
        s->launcher->destroy(&s->launcher);
    }
    json_decref(s->grid);
    json_decref(s->spec);
    if (s->has_metric_re)
        regfree(&s->metric_re);
    free(s->job_text);
    for (int k = 0; k < s->nwarm; k++)
        free(s->warm[k]);
    free(s->prior_u);
    free(s->prior_y);
    json_decref(s->warm_record);
    free(s->dir);
    free(s->trial_job);
    free(s->base_output);
    free(s);
    *self_p = NULL;
}
