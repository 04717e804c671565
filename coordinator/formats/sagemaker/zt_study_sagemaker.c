/* SageMaker's CreateHyperParameterTuningJob request as a study: its
 * objective, ParameterRanges, ResourceLimits and Strategy (Bayesian,
 * Random, Grid or Hyperband) become the Vertex study the runner reads; its
 * TrainingJobDefinition, every trial's CreateTrainingJob; the objective is
 * read from the primary host's output by its MetricDefinitions regex, as
 * SageMaker reads it from the job's log. */
#include "formats/sagemaker/zt_sm_int.h"
#include "base/zt_util.h"
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

static const char *const s_cfg = "HyperParameterTuningJobConfig";

bool zt_study_is_sagemaker(json_t *root)
{
    return json_is_object(json_object_get(root, "HyperParameterTuningJobConfig"));
}

/* A Python regex's \d, \s and \w as POSIX classes (SageMaker's examples
 * use both forms). */
static char *s_posix_regex(const char *re)
{
    char *out = malloc(strlen(re) * 12 + 1), *o = out;
    for (const char *p = re; *p; p++) {
        const char *cls = p[0] == '\\' && p[1] == 'd' ? "[0-9]" : p[0] == '\\' && p[1] == 's' ? "[[:space:]]"
                          : p[0] == '\\' && p[1] == 'w' ? "[[:alnum:]_]" : NULL;
        if (cls) {
            strcpy(o, cls);
            o += strlen(cls);
            p++;
        }
        else
            *o++ = *p;
    }
    *o = 0;
    return out;
}

/* ParameterRanges: Integer, Continuous and Categorical ranges as Vertex
 * parameters (ScalingType Auto and Linear linear; Logarithmic and
 * ReverseLogarithmic the unit log scales). */
static void s_ranges(zt_doc_t *doc, zt_diag_t *diag, json_t *pr, json_t *out)
{
    static const char *const kinds[][2] = { { "IntegerParameterRanges", "integerValueSpec" },
        { "ContinuousParameterRanges", "doubleValueSpec" }, { "CategoricalParameterRanges", "categoricalValueSpec" } };
    for (int k = 0; k < 3; k++) {
        size_t i;
        json_t *r;
        json_array_foreach(json_object_get(pr, kinds[k][0]), i, r) {
            char *rp = zt_strdupf("%s.ParameterRanges.%s[%zu]", s_cfg, kinds[k][0], i);
            const char *name = json_string_value(json_object_get(r, "Name"));
            json_t *p = json_pack("{s:s}", "parameterId", name ? name : "");
            if (!name) {
                char *np = zt_strdupf("%s.Name", rp);
                ZT_DOC_ERR(doc, diag, np, NULL, "required");
                free(np);
            }
            if (k < 2) {
                /* SageMaker's bounds are strings: the study's checks name a bad one */
                json_t *lo = json_object_get(r, "MinValue"), *hi = json_object_get(r, "MaxValue");
                json_object_set_new(p, kinds[k][1], json_pack("{s:O?, s:O?}", "minValue", lo, "maxValue", hi));
                const char *sc = json_string_value(json_object_get(r, "ScalingType"));
                if (sc && !strcmp(sc, "Logarithmic"))
                    json_object_set_new(p, "scaleType", json_string("UNIT_LOG_SCALE"));
                else if (sc && !strcmp(sc, "ReverseLogarithmic"))
                    json_object_set_new(p, "scaleType", json_string("UNIT_REVERSE_LOG_SCALE"));
                else if (sc && strcmp(sc, "Auto") && strcmp(sc, "Linear")) {
                    char *sp = zt_strdupf("%s.ScalingType", rp);
                    ZT_DOC_ERR(doc, diag, sp, json_object_get(r, "ScalingType"), "Auto, Linear, Logarithmic or ReverseLogarithmic");
                    free(sp);
                }
            }
            else
                json_object_set_new(p, kinds[k][1], json_pack("{s:O?}", "values", json_object_get(r, "Values")));
            json_array_append_new(out, p);
            free(rp);
        }
    }
}

/* The trial's CreateTrainingJob: TrainingJobDefinition with
 * StaticHyperParameters as its HyperParameters. */
static json_t *s_trial_job(json_t *root)
{
    json_t *def = json_deep_copy(json_object_get(root, "TrainingJobDefinition"));
    if (!json_is_object(def)) {
        json_decref(def);
        def = json_object();
    }
    json_t *hps = json_object_get(def, "StaticHyperParameters");
    json_object_set(def, "HyperParameters", hps ? hps : json_object());
    json_object_del(def, "StaticHyperParameters");
    json_object_del(def, "TuningObjective");
    json_object_del(def, "HyperParameterRanges");
    const char *name = json_string_value(json_object_get(root, "HyperParameterTuningJobName"));
    json_object_set_new(def, "TrainingJobName", json_string(name ? name : "tuning-trial"));
    json_t *alg = json_object_get(def, "AlgorithmSpecification");
    json_object_del(alg, "MetricDefinitions"); /* read by the study */
    return def;
}

/* WarmStartConfig: the parents' names (resolved and read once the study's
 * parameters are known: zt_study_warm.c) and the type. */
static void s_warm_start_config(zt_doc_t *doc, zt_diag_t *diag, bool allow, json_t *w, zt_study_extras_t *s)
{
    if (!w)
        return;
    static const char *const wk[] = { "ParentHyperParameterTuningJobs", "WarmStartType", NULL };
    zt_doc_check_unknown(doc, diag, w, "WarmStartConfig", wk, allow);
    const char *type = json_string_value(json_object_get(w, "WarmStartType"));
    if (!type || (strcmp(type, "IdenticalDataAndAlgorithm") && strcmp(type, "TransferLearning")))
        ZT_DOC_ERR(doc, diag, "WarmStartConfig.WarmStartType", json_object_get(w, "WarmStartType"),
            "required: IdenticalDataAndAlgorithm or TransferLearning");
    s->warm_transfer = type && !strcmp(type, "TransferLearning");
    json_t *parents = json_object_get(w, "ParentHyperParameterTuningJobs"), *p;
    size_t i, n = json_array_size(parents);
    if (!json_is_array(parents) || n < 1 || n > 5)
        ZT_DOC_ERR(doc, diag, "WarmStartConfig.ParentHyperParameterTuningJobs", parents,
            "1 to 5 parents, each {\"HyperParameterTuningJobName\": an earlier study's directory or name}");
    json_array_foreach(parents, i, p) {
        const char *name = json_string_value(json_object_get(p, "HyperParameterTuningJobName"));
        if (!name || !*name) {
            char field[160];
            snprintf(field, sizeof field, "WarmStartConfig.ParentHyperParameterTuningJobs[%zu]"
                     ".HyperParameterTuningJobName", i);
            ZT_DOC_ERR(doc, diag, field, json_object_get(p, "HyperParameterTuningJobName"), "required");
        }
        else if (i < 5)
            s->warm[s->nwarm++] = strdup(name);
    }
}

/* Long on purpose: the request's fields in order, each mapped (or named as
 * not acted on) where it is read. */
json_t *zt_study_from_sagemaker(zt_doc_t *doc, zt_diag_t *diag, bool allow, zt_study_extras_t *s)
{
    json_t *root = doc->root, *cfg = json_object_get(root, s_cfg);
    static const char *const rk[] = { "HyperParameterTuningJobName", "HyperParameterTuningJobConfig",
        "TrainingJobDefinition", "TrainingJobDefinitions", "WarmStartConfig", "Tags", "Autotune", NULL };
    zt_doc_check_unknown(doc, diag, root, "", rk, allow);
    static const char *const ck[] = { "Strategy", "StrategyConfig", "HyperParameterTuningJobObjective",
        "ResourceLimits", "ParameterRanges", "TrainingJobEarlyStoppingType", "TuningJobCompletionCriteria",
        "RandomSeed", NULL };
    zt_doc_check_unknown(doc, diag, cfg, s_cfg, ck, allow);
    static const char *const later[] = { "TrainingJobDefinitions", "Autotune" };
    for (size_t f = 0; f < sizeof later / sizeof *later; f++)
        if (json_object_get(root, later[f]))
            ZT_DOC_ERR(doc, diag, later[f], NULL, "not supported yet");
    s_warm_start_config(doc, diag, allow, json_object_get(root, "WarmStartConfig"), s);
    if (json_object_get(cfg, "TuningJobCompletionCriteria"))
        ZT_DOC_WARN(doc, diag, "HyperParameterTuningJobConfig.TuningJobCompletionCriteria", NULL,
             "ignored: the study runs its ResourceLimits");
    json_t *obj = json_object_get(cfg, "HyperParameterTuningJobObjective");
    const char *type = json_string_value(json_object_get(obj, "Type"));
    const char *metric = json_string_value(json_object_get(obj, "MetricName"));
    if (!type || (strcmp(type, "Maximize") && strcmp(type, "Minimize")))
        ZT_DOC_ERR(doc, diag, "HyperParameterTuningJobConfig.HyperParameterTuningJobObjective.Type",
            json_object_get(obj, "Type"), "required: Maximize or Minimize");
    if (!metric)
        ZT_DOC_ERR(doc, diag, "HyperParameterTuningJobConfig.HyperParameterTuningJobObjective.MetricName", NULL, "required");
    /* the objective's regex, from the training job's MetricDefinitions */
    json_t *defs = json_object_get(json_object_get(json_object_get(root, "TrainingJobDefinition"),
                                                   "AlgorithmSpecification"), "MetricDefinitions");
    const char *regex = NULL;
    size_t i;
    json_t *d;
    json_array_foreach(defs, i, d)
        if (metric && json_is_string(json_object_get(d, "Name")) &&
            !strcmp(json_string_value(json_object_get(d, "Name")), metric))
            regex = json_string_value(json_object_get(d, "Regex"));
    if (metric && !regex)
        ZT_DOC_ERR(doc, diag, "TrainingJobDefinition.AlgorithmSpecification.MetricDefinitions", defs,
            "required: a definition named %s, whose Regex finds the objective in the program's output", metric);
    if (regex) {
        char *posix = s_posix_regex(regex), err[200];
        json_t *rv = json_string(regex);
        const char *mp = "TrainingJobDefinition.AlgorithmSpecification.MetricDefinitions";
        int rc = regcomp(&s->metric_re, posix, REG_EXTENDED);
        if (rc != 0) {
            regerror(rc, &s->metric_re, err, sizeof err);
            ZT_DOC_ERR(doc, diag, mp, rv, "not a regular expression: %s", err);
        }
        else if (s->metric_re.re_nsub < 1) {
            regfree(&s->metric_re);
            ZT_DOC_ERR(doc, diag, mp, rv, "needs a group, ( ), around the value");
        }
        else
            s->has_metric_re = true;
        json_decref(rv);
        free(posix);
    }
    json_t *ss = json_pack("{s:[{s:s, s:s}], s:[]}", "metrics", "metricId", metric ? metric : "objective", "goal",
                           type && !strcmp(type, "Minimize") ? "MINIMIZE" : "MAXIMIZE", "parameters");
    s_ranges(doc, diag, json_object_get(cfg, "ParameterRanges"), json_object_get(ss, "parameters"));
    const char *strategy = json_string_value(json_object_get(cfg, "Strategy"));
    if (strategy && !strcmp(strategy, "Random"))
        json_object_set_new(ss, "algorithm", json_string("RANDOM_SEARCH"));
    else if (strategy && !strcmp(strategy, "Grid"))
        json_object_set_new(ss, "algorithm", json_string("GRID_SEARCH"));
    else if (strategy && !strcmp(strategy, "Hyperband")) { /* random points, stopped at rungs */
        json_object_set_new(ss, "algorithm", json_string("RANDOM_SEARCH"));
        json_t *hb = json_object_get(json_object_get(cfg, "StrategyConfig"), "HyperbandStrategyConfig");
        s->hb_min = json_integer_value(json_object_get(hb, "MinResource"));
        s->hb_max = json_integer_value(json_object_get(hb, "MaxResource"));
        if (s->hb_min < 1 || s->hb_max <= s->hb_min)
            ZT_DOC_ERR(doc, diag, "HyperParameterTuningJobConfig.StrategyConfig.HyperbandStrategyConfig", hb,
                "required with Hyperband: MinResource >= 1 and MaxResource above it (epochs)");
        s->hyperband = true;
    }
    else if (strategy && strcmp(strategy, "Bayesian"))
        ZT_DOC_ERR(doc, diag, "HyperParameterTuningJobConfig.Strategy", json_object_get(cfg, "Strategy"),
            "Bayesian, Random, Grid or Hyperband");
    const char *es = json_string_value(json_object_get(cfg, "TrainingJobEarlyStoppingType"));
    if (es && !strcmp(es, "Auto")) {
        if (s->hyperband)
            ZT_DOC_ERR(doc, diag, "HyperParameterTuningJobConfig.TrainingJobEarlyStoppingType", json_object_get(cfg,
                "TrainingJobEarlyStoppingType"), "Off with Hyperband, which stops trials itself");
        else /* SageMaker's rule: worse than the median of earlier jobs at the same epoch */
            json_object_set_new(ss, "medianAutomatedStoppingSpec", json_object());
    }
    json_t *lim = json_object_get(cfg, "ResourceLimits");
    const char *tname = json_string_value(json_object_get(root, "HyperParameterTuningJobName"));
    json_t *study = json_pack("{s:s, s:o, s:O?, s:O?, s:o}", "displayName", tname ? tname : "tuning",
                              "studySpec", ss, "maxTrialCount", json_object_get(lim, "MaxNumberOfTrainingJobs"),
                              "parallelTrialCount", json_object_get(lim, "MaxParallelTrainingJobs"), "trialJobSpec",
                              s_trial_job(root));
    json_int_t runtime = json_integer_value(json_object_get(lim, "MaxRuntimeInSeconds"));
    if (runtime > 0) {
        char dur[32];
        snprintf(dur, sizeof dur, "%llds", (long long) runtime);
        json_object_set_new(ss, "studyStoppingConfig", json_pack("{s:{s:s}}", "maximumRuntimeConstraint",
                                                                 "maxDuration", dur));
    }
    return study;
}
