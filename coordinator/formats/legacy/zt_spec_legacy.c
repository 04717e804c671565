/* The legacy AI Platform format: trainingInput with masterConfig,
 * workerCount/workerConfig, parameterServerCount/..., evaluatorCount/... */
#include "formats/legacy/zt_legacy_int.h"
#include "formats/zt_format.h"
#include "base/zt_util.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_knobs.h"
#include "plan/zt_cuda_probe.h"
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* ---------------------------------------------------------- legacy config */

static void s_legacy_pool(zt_spec_ctx_t *c, json_t *ti, int idx, const char *type_key, const char *type,
                          const char *cfg_key, int count, bool custom)
{
    zt_pool_t *pool = &c->plan->pools[idx];
    pool->present = count > 0;
    if (!pool->present)
        return;
    pool->replicas = count;
    snprintf(pool->disk_type, sizeof pool->disk_type, "pd-ssd");
    pool->disk_gb = 100;
    char *cfgp = zt_sf_path("trainingInput", cfg_key);
    json_t *cfg = zt_sf_obj(c, ti, "trainingInput", cfg_key);
    const char *acc = NULL;
    long long acount = 0;
    bool acount_given = false;
    char *acp = zt_sf_path(cfgp, "acceleratorConfig");
    if (cfg) {
        static const char *const known[] = { "acceleratorConfig", "imageUri", "containerCommand",
            "containerArgs", "tpuTfVersion", "diskConfig", NULL };
        zt_sf_unknown_fields(c, cfg, cfgp, known);
        json_t *ac = zt_sf_obj(c, cfg, cfgp, "acceleratorConfig");
        if (ac) {
            static const char *const aknown[] = { "count", "type", NULL };
            zt_sf_unknown_fields(c, ac, acp, aknown);
            acc = zt_sf_str(c, ac, acp, "type", NULL);
            acount = zt_sf_int(c, ac, acp, "count", 0, 0, 16, "no machine type takes more than 16",
                           &acount_given);
            if (!acc && acount_given) {
                char *tp = zt_sf_path(acp, "type");
                ERR(c, tp, NULL, "required with acceleratorConfig.count");
                free(tp);
            }
            if (acc && !custom) {
                WARN(c, acp, NULL, "ignored: accelerators are attached only with scaleTier CUSTOM");
                acc = NULL;
            }
        }
    }
    char *tp = zt_strdupf("trainingInput.%s", type_key);
    char *atp = zt_sf_path(acp, "type"), *ccp = zt_sf_path(acp, "count");
    zt_sf_check_machine(c, pool, type, tp, acc, atp, acount, acount_given, ccp);
    free(tp); free(atp); free(ccp); free(acp);
    /* The program: a container command, the Python module, a ztrain role. */
    const char *image = cfg ? zt_sf_str(c, cfg, cfgp, "imageUri", NULL) : NULL;
    if (image)
        pool->image_uri = strdup(image);
    json_t *cmd = json_array();
    if (cfg)
        zt_sf_str_array(c, cfg, cfgp, "containerCommand", cmd);
    const char *module = zt_sf_str(c, ti, "trainingInput", "pythonModule", NULL);
    zt_role_t image_role = zt_sf_image_role(image, idx);
    if (json_array_size(cmd) > 0)
        json_array_extend(pool->argv, cmd);
    else if (image && image_role != ZT_ROLE_NONE) {
        pool->role = image_role;
        json_array_append_new(pool->argv, json_string(zt_role_binary(pool->role)));
    }
    else if (image) {
        char *ip = zt_sf_path(cfgp, "containerCommand");
        ERR(c, ip, NULL, "required: image '%s' is not pulled on this machine, so give the "
            "command to run (or an image naming a ztrain role)", image);
        free(ip);
    }
    else if (module) {
        zt_sf_python_module(pool, module);
        zt_sf_package_uris(c, pool, ti, "trainingInput", "packageUris");
    }
    else {
        pool->role = zt_sf_pool_default_role(idx);
        json_array_append_new(pool->argv, json_string(zt_role_binary(pool->role)));
    }
    json_decref(cmd);
    if (cfg)
        zt_sf_str_array(c, cfg, cfgp, "containerArgs", pool->argv);
    free(cfgp);
}

/* Long on purpose: one pass over trainingInput's fields in the format's
 * own order (scale tier, then the master, worker, parameter-server and
 * evaluator pools), each checked where it is read. */
static void s_training_input(zt_spec_ctx_t *c, json_t *ti)
{
    static const char *const known[] = {
        "scaleTier", "masterType", "masterConfig", "workerType", "workerCount", "workerConfig",
        "parameterServerType", "parameterServerCount", "parameterServerConfig", "evaluatorType",
        "evaluatorCount", "evaluatorConfig", "useChiefInTfConfig", "region", "runtimeVersion",
        "pythonVersion", "pythonModule", "packageUris", "args", "jobDir", "scheduling",
        "hyperparameters", "serviceAccount", "network", "encryptionConfig", "enableWebAccess",
        NULL };
    const char *tp = "trainingInput";
    zt_sf_unknown_fields(c, ti, tp, known);
    zt_plan_t *plan = c->plan;
    int64_t max_replicas = zt_knob_int(ZT_KNOB_MAX_REPLICAS);
    const char *tier_name = zt_sf_str(c, ti, tp, "scaleTier", "BASIC");
    char up[32];
    snprintf(up, sizeof up, "%s", tier_name);
    for (char *p = up; *p; p++)
        *p = (char) toupper((unsigned char) *p);
    const zt_scale_tier_t *tier = zt_scale_tier_find(up);
    if (!tier) {
        json_t *v = json_string(tier_name);
        ERR(c, "trainingInput.scaleTier", v, "unknown scale tier (known: %s)", zt_scale_tier_names());
        json_decref(v);
        tier = zt_scale_tier_find("BASIC");
    }
    plan->scale_tier = strdup(tier->name);
    bool custom = !strcmp(tier->name, "CUSTOM");
    static const char *const names[ZT_POOLS][3] = {
        { "masterType", NULL, "masterConfig" },
        { "workerType", "workerCount", "workerConfig" },
        { "parameterServerType", "parameterServerCount", "parameterServerConfig" },
        { "evaluatorType", "evaluatorCount", "evaluatorConfig" },
    };
    for (int i = 0; i < ZT_POOLS; i++) {
        const char *type = zt_sf_str(c, ti, tp, names[i][0], NULL);
        bool count_given = false;
        int count = i == 0 ? 1 : (int) zt_sf_int(c, ti, tp, names[i][1], 0, 0, max_replicas,
                                               "replicas on one machine; ZT_MAX_REPLICAS raises it",
                                               &count_given);
        if (!custom) {
            const char *tier_type = i == 0 ? tier->master : i == 1 ? tier->worker
                                    : i == 2 ? tier->ps_machine : NULL;
            int tier_count = i == 0 ? 1 : i == 1 ? tier->workers : i == 2 ? tier->ps : 0;
            if (type || count_given) {
                char *p = zt_sf_path(tp, type ? names[i][0] : names[i][1]);
                WARN(c, p, NULL, "ignored: scaleTier %s fixes the machines (use CUSTOM to choose)",
                     tier->name);
                free(p);
            }
            type = tier_type;
            count = tier_count;
        }
        else if (i == 0 && !type) {
            ERR(c, "trainingInput.masterType", NULL, "required when scaleTier is CUSTOM");
            type = "n1-standard-4";
        }
        else if (i > 0 && count > 0 && !type) {
            char *p = zt_sf_path(tp, names[i][0]);
            ERR(c, p, NULL, "required when %s is %d", names[i][1], count);
            free(p);
            type = "n1-standard-4";
        }
        s_legacy_pool(c, ti, i, names[i][0], type, names[i][2], count, custom);
    }
    json_t *args = json_array();
    zt_sf_str_array(c, ti, tp, "args", args);
    const char *job_dir = zt_sf_str(c, ti, tp, "jobDir", NULL);
    if (job_dir)
        plan->base_output_dir = zt_sf_local_path(c, "trainingInput.jobDir", job_dir);
    /* AI Platform gave the program its jobDir as "--job-dir PATH" after
     * args; ztrain's own binaries take no such flag. */
    for (int i = 0; i < ZT_POOLS; i++) {
        zt_pool_t *pool = &plan->pools[i];
        if (pool->present && (i < 2 || pool->role == ZT_ROLE_NONE))
            json_array_extend(pool->argv, args);
        if (pool->present && pool->role == ZT_ROLE_NONE && plan->base_output_dir) {
            json_array_append_new(pool->argv, json_string("--job-dir"));
            json_array_append_new(pool->argv, json_string(plan->base_output_dir));
        }
    }
    json_decref(args);
    json_t *sch = zt_sf_obj(c, ti, tp, "scheduling");
    if (sch) {
        const char *t = zt_sf_str(c, sch, "trainingInput.scheduling", "maxRunningTime", NULL);
        if (t && (plan->timeout_s = zt_parse_duration(t)) <= 0) {
            json_t *v = json_string(t);
            ERR(c, "trainingInput.scheduling.maxRunningTime", v,
                "expected a positive duration such as \"7200s\"");
            json_decref(v);
            plan->timeout_s = 0;
        }
    }
    /* hyperparameters: a study's own, read by zt_study (s_load says so) */
    /* AI Platform: "master" unless useChiefInTfConfig, or runtime 2.1 and later. */
    const char *rv = zt_sf_str(c, ti, tp, "runtimeVersion", NULL);
    bool modern = rv && strtod(rv, NULL) >= 2.1;
    plan->tf_master = !zt_sf_bool(c, ti, tp, "useChiefInTfConfig", modern);
}

/* ---------------------------------------------------------------- format */

/* The legacy format: a trainingInput document, or no file and a legacy override flag. */
static void s_load(zt_spec_ctx_t *c, json_t *root, json_t *ti, const zt_plan_opts_t *opts)
{
    zt_plan_t *plan = c->plan;
    static const char *const known[] = { "trainingInput", "jobId", "labels", NULL };
    zt_sf_unknown_fields(c, root, "", known);
    plan->format = strdup("trainingInput");
    if (!ti) {
        ti = json_object();
        json_object_set_new(root, "trainingInput", ti);
    }
    if (!json_is_object(ti))
        ERR(c, "trainingInput", ti, "expected an object");
    else {
        zt_sf_apply_flags(c, ti, "trainingInput", true, opts->flags);
        s_training_input(c, ti);
        if (json_object_get(ti, "hyperparameters") && !opts->spec_key)
            WARN(c, "trainingInput.hyperparameters", NULL, "a study: `ztrain run` and `ztrain tune` run this "
                 "config's trials (maxTrials), each this job with its parameters; this checks the job");
    }
    const char *id = json_string_value(json_object_get(root, "jobId"));
    if (!plan->display_name)
        plan->display_name = strdup(id ? id : "job");
    plan->job = json_deep_copy(ti);
}

/* A study's trial job may be the legacy tuning config itself (holder NULL:
 * its trainingInput is at the root). */
static json_t *s_holder(json_t *root, const zt_plan_opts_t *opts)
{
    json_t *holder = opts->spec_key ? json_object_get(root, opts->spec_key) : root;
    return opts->spec_key && !holder && json_object_get(root, "trainingInput") ? root : holder;
}

static bool s_claims(json_t *root, const zt_plan_opts_t *opts)
{
    json_t *holder = s_holder(root, opts);
    return (json_is_object(holder) && json_object_get(holder, "trainingInput")) ||
           (!opts->file && zt_sf_training_input_flags(opts->flags));
}

static void s_parse(zt_spec_ctx_t *c, json_t *root, const zt_plan_opts_t *opts)
{
    json_t *holder = s_holder(root, opts);
    json_t *ti = json_is_object(holder) ? json_object_get(holder, "trainingInput") : NULL;
    c->plan->service = "legacy";
    s_load(c, holder ? holder : root, ti, opts);
}

static const char *s_runs_as_study(json_t *root)
{
    return zt_study_is_legacy(root) ? "trainingInput.hyperparameters: gcloud ai-platform jobs submit training "
                                      "ran it so" : NULL;
}

static json_t *s_study(zt_doc_t *doc, zt_diag_t *diag, bool allow, zt_study_extras_t *x)
{
    (void) x;
    return zt_study_from_legacy(doc, diag, allow);
}

const zt_format_t zt_legacy_format = {
    .name = "legacy",
    .claims = s_claims,
    .parse = s_parse,
    .is_study = zt_study_is_legacy,
    .study = s_study,
    .runs_as_study = s_runs_as_study,
};
