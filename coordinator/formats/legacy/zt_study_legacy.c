/* AI Platform's hyperparameter tuning: a legacy trainingInput config with a
 * hyperparameters block (HyperparameterSpec) is a study, as `gcloud
 * ai-platform jobs submit training` ran it. Converted to the Vertex
 * HyperparameterTuningJob the study runner reads, every problem named at
 * the legacy field the user wrote. */
#include "formats/legacy/zt_legacy_int.h"
#include "plan/zt_doc.h"
#include "base/zt_util.h"
#include <stdlib.h>
#include <string.h>

static const char *const s_hp = "trainingInput.hyperparameters";

bool zt_study_is_legacy(json_t *root)
{
    return json_is_object(json_object_get(json_object_get(root, "trainingInput"), "hyperparameters")) &&
           !json_object_get(root, "studySpec");
}

/* One ParameterSpec as a Vertex parameter. */
static json_t *s_param(zt_doc_t *doc, zt_diag_t *diag, json_t *p, const char *pp, bool allow)
{
    static const char *const known[] = { "parameterName", "type", "minValue", "maxValue", "categoricalValues",
                                         "discreteValues", "scaleType", NULL };
    zt_doc_check_unknown(doc, diag, p, pp, known, allow);
    const char *name = json_string_value(json_object_get(p, "parameterName"));
    const char *type = json_string_value(json_object_get(p, "type"));
    char *np = zt_strdupf("%s.parameterName", pp), *tp = zt_strdupf("%s.type", pp);
    json_t *out = json_object();
    if (!name)
        ZT_DOC_ERR(doc, diag, np, json_object_get(p, "parameterName"), "required: the name (it becomes --name=value)");
    else
        json_object_set_new(out, "parameterId", json_string(name));
    static const char *const kinds[][3] = { { "DOUBLE", "doubleValueSpec", "" },
        { "INTEGER", "integerValueSpec", "" }, { "CATEGORICAL", "categoricalValueSpec", "categoricalValues" },
        { "DISCRETE", "discreteValueSpec", "discreteValues" } };
    int k = -1;
    for (int i = 0; i < 4 && type; i++)
        if (!strcmp(type, kinds[i][0]))
            k = i;
    if (k < 0)
        ZT_DOC_ERR(doc, diag, tp, json_object_get(p, "type"), "required: DOUBLE, INTEGER, CATEGORICAL or DISCRETE");
    else if (k < 2) /* a range; the study's checks name minValue and maxValue */
        json_object_set_new(out, kinds[k][1], json_pack("{s:O?, s:O?}", "minValue", json_object_get(p, "minValue"),
                                                        "maxValue", json_object_get(p, "maxValue")));
    else {
        json_t *v = json_object_get(p, kinds[k][2]);
        char *vp = zt_strdupf("%s.%s", pp, kinds[k][2]);
        if (!json_is_array(v) || !json_array_size(v))
            ZT_DOC_ERR(doc, diag, vp, v, "required for type %s: a list of values", type);
        else
            json_object_set_new(out, kinds[k][1], json_pack("{s:O}", "values", v));
        free(vp);
    }
    const char *scale = json_string_value(json_object_get(p, "scaleType"));
    if (scale && strcmp(scale, "NONE"))
        json_object_set_new(out, "scaleType", json_string(scale)); /* the same names in both */
    free(np);
    free(tp);
    return out;
}

/* Long on purpose: the HyperparameterSpec's fields in order, each mapped
 * (or named as not acted on) where it is read. */
json_t *zt_study_from_legacy(zt_doc_t *doc, zt_diag_t *diag, bool allow)
{
    json_t *root = doc->root, *ti = json_object_get(root, "trainingInput"), *hp = json_object_get(ti, "hyperparameters");
    static const char *const known[] = { "goal", "params", "maxTrials", "maxParallelTrials", "maxFailedTrials",
        "hyperparameterMetricTag", "enableTrialEarlyStopping", "resumePreviousJobId", "algorithm", NULL };
    zt_doc_check_unknown(doc, diag, hp, s_hp, known, allow);
    const char *goal = json_string_value(json_object_get(hp, "goal"));
    if (!goal || (strcmp(goal, "MAXIMIZE") && strcmp(goal, "MINIMIZE")))
        ZT_DOC_ERR(doc, diag, "trainingInput.hyperparameters.goal", json_object_get(hp, "goal"),
            "required: MAXIMIZE or MINIMIZE");
    const char *tag = json_string_value(json_object_get(hp, "hyperparameterMetricTag"));
    json_t *ss = json_pack("{s:[{s:s, s:s}], s:[]}", "metrics", "metricId", tag ? tag : "training/hptuning/metric",
                           "goal", goal ? goal : "MAXIMIZE", "parameters");
    json_t *params = json_object_get(hp, "params");
    if (!json_is_array(params) || !json_array_size(params))
        ZT_DOC_ERR(doc, diag, "trainingInput.hyperparameters.params", params, "required: the parameters to tune");
    size_t i;
    json_t *p;
    json_array_foreach(json_is_array(params) ? params : NULL, i, p) {
        char *pp = zt_strdupf("%s.params[%zu]", s_hp, i);
        json_array_append_new(json_object_get(ss, "parameters"), s_param(doc, diag, p, pp, allow));
        free(pp);
    }
    const char *algo = json_string_value(json_object_get(hp, "algorithm"));
    if (algo && strcmp(algo, "ALGORITHM_UNSPECIFIED") && strcmp(algo, "GRID_SEARCH") && strcmp(algo, "RANDOM_SEARCH"))
        ZT_DOC_ERR(doc, diag, "trainingInput.hyperparameters.algorithm", json_object_get(hp, "algorithm"),
            "ALGORITHM_UNSPECIFIED (Bayesian optimization), GRID_SEARCH or RANDOM_SEARCH");
    else if (algo && strcmp(algo, "ALGORITHM_UNSPECIFIED"))
        json_object_set_new(ss, "algorithm", json_string(algo));
    if (json_is_true(json_object_get(hp, "enableTrialEarlyStopping")))
        json_object_set_new(ss, "medianAutomatedStoppingSpec", json_object());
    if (json_object_get(hp, "resumePreviousJobId"))
        ZT_DOC_WARN(doc, diag, "trainingInput.hyperparameters.resumePreviousJobId", json_object_get(hp, "resumePreviousJobId"),
             "no job ids here: run the config again with the same --job-dir, and its finished trials are kept");
    json_t *trial = json_deep_copy(ti);
    json_object_del(trial, "hyperparameters");
    const char *id = json_string_value(json_object_get(root, "jobId"));
    json_t *mt = json_object_get(hp, "maxTrials"), *mp = json_object_get(hp, "maxParallelTrials");
    json_t *study = json_pack("{s:s, s:o, s:o, s:o, s:{s:o}}", "displayName", id ? id : "hptuning", "studySpec", ss,
                              "maxTrialCount", mt ? json_incref(mt) : json_integer(1), "parallelTrialCount",
                              mp ? json_incref(mp) : json_integer(1), "trialJobSpec", "trainingInput", trial);
    if (json_object_get(hp, "maxFailedTrials"))
        json_object_set(study, "maxFailedTrialCount", json_object_get(hp, "maxFailedTrials"));
    return study;
}
