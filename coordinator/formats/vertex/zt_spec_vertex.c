/* The Vertex CustomJob format: jobSpec.workerPoolSpecs, each a containerSpec or
 * pythonPackageSpec on a machineSpec. */
#include "formats/zt_format.h"
#include "base/zt_env.h"
#include "base/zt_util.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_knobs.h"
#include "plan/zt_cuda_probe.h"
#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* ------------------------------------------------------------ Vertex spec */

static void s_vertex_program(zt_spec_ctx_t *c, int idx, zt_pool_t *pool, json_t *wps, const char *pp)
{
    char *csp = zt_sf_path(pp, "containerSpec");
    char *psp = zt_sf_path(pp, "pythonPackageSpec");
    json_t *cs = zt_sf_obj(c, wps, pp, "containerSpec");
    json_t *ps = zt_sf_obj(c, wps, pp, "pythonPackageSpec");
    if (cs && ps)
        ERR(c, psp, NULL, "give containerSpec or pythonPackageSpec, not both");
    else if (cs) {
        static const char *const known[] = { "imageUri", "command", "args", "env", NULL };
        zt_sf_unknown_fields(c, cs, csp, known);
        const char *image = zt_sf_str(c, cs, csp, "imageUri", NULL);
        if (image)
            pool->image_uri = strdup(image);
        else {
            char *ip = zt_sf_path(csp, "imageUri");
            ERR(c, ip, NULL, "required (locally it is not pulled, but it names the role when "
                "no command is given)");
            free(ip);
        }
        json_t *cmd = json_array();
        zt_sf_str_array(c, cs, csp, "command", cmd);
        if (json_array_size(cmd) > 0)
            json_array_extend(pool->argv, cmd);
        else if ((pool->role = zt_sf_image_role(image, idx)) != ZT_ROLE_NONE)
            json_array_append_new(pool->argv, json_string(zt_role_binary(pool->role)));
        else if (image) {
            char *ip = zt_sf_path(csp, "command");
            ERR(c, ip, NULL, "required: image '%s' is not pulled on this machine, so give the "
                "command to run (or an image naming a ztrain role: ztrain-worker, "
                "ztrain-paramserver, ztrain-reducer, ztrain-evaluator, reductionserver)", image);
            free(ip);
        }
        json_decref(cmd);
        zt_sf_str_array(c, cs, csp, "args", pool->argv);
        zt_sf_env(c, cs, csp, pool->env);
    }
    else if (ps) {
        static const char *const known[] = { "executorImageUri", "packageUris", "pythonModule",
                                             "args", "env", NULL };
        zt_sf_unknown_fields(c, ps, psp, known);
        const char *image = zt_sf_str(c, ps, psp, "executorImageUri", NULL);
        if (image)
            pool->image_uri = strdup(image);
        const char *module = zt_sf_str(c, ps, psp, "pythonModule", NULL);
        if (!module) {
            char *mp = zt_sf_path(psp, "pythonModule");
            ERR(c, mp, NULL, "required: the module to run as python3 -m MODULE");
            free(mp);
        }
        else
            zt_sf_python_module(pool, module);
        zt_sf_package_uris(c, pool, ps, psp, "packageUris");
        zt_sf_str_array(c, ps, psp, "args", pool->argv);
        zt_sf_env(c, ps, psp, pool->env);
    }
    else
        ERR(c, pp, NULL, "give containerSpec (imageUri, command, args) or pythonPackageSpec "
            "(pythonModule, args)");
    free(csp);
    free(psp);
}

/* machineSpec: the machine type and its accelerators, checked against the
 * machine table. */
static void s_vertex_machine(zt_spec_ctx_t *c, zt_pool_t *pool, json_t *wps, const char *pp)
{
    char *msp = zt_sf_path(pp, "machineSpec");
    json_t *ms = zt_sf_obj(c, wps, pp, "machineSpec");
    if (ms) {
        static const char *const mknown[] = { "machineType", "acceleratorType",
            "acceleratorCount", "tpuTopology", "reservationAffinity", NULL };
        zt_sf_unknown_fields(c, ms, msp, mknown);
    }
    char *mtp = zt_sf_path(msp, "machineType"), *atp = zt_sf_path(msp, "acceleratorType"),
         *acp = zt_sf_path(msp, "acceleratorCount");
    bool count_given = false;
    long long count = ms ? zt_sf_int(c, ms, msp, "acceleratorCount", 0, 0, 16,
                                     "no machine type takes more than 16", &count_given) : 0;
    zt_sf_check_machine(c, pool, ms ? zt_sf_str(c, ms, msp, "machineType", NULL) : NULL, mtp,
                        ms ? zt_sf_str(c, ms, msp, "acceleratorType", NULL) : NULL, atp, count,
                        count_given, acp);
    free(mtp);
    free(atp);
    free(acp);
    free(msp);
}

/* diskSpec: the boot disk's type and size (pd-ssd, 100 GB by default). */
static void s_vertex_disk(zt_spec_ctx_t *c, zt_pool_t *pool, json_t *wps, const char *pp)
{
    char *dsp = zt_sf_path(pp, "diskSpec");
    json_t *ds = zt_sf_obj(c, wps, pp, "diskSpec");
    snprintf(pool->disk_type, sizeof pool->disk_type, "pd-ssd");
    pool->disk_gb = 100;
    if (ds) {
        static const char *const dknown[] = { "bootDiskType", "bootDiskSizeGb", NULL };
        zt_sf_unknown_fields(c, ds, dsp, dknown);
        const char *dt = zt_sf_str(c, ds, dsp, "bootDiskType", "pd-ssd");
        if (strcmp(dt, "pd-ssd") && strcmp(dt, "pd-standard") && strcmp(dt, "hyperdisk-balanced")) {
            char *tp = zt_sf_path(dsp, "bootDiskType");
            json_t *v = json_string(dt);
            ERR(c, tp, v, "expected pd-ssd, pd-standard or hyperdisk-balanced");
            json_decref(v);
            free(tp);
        }
        else
            snprintf(pool->disk_type, sizeof pool->disk_type, "%s", dt);
        pool->disk_gb = (int) zt_sf_int(c, ds, dsp, "bootDiskSizeGb", 100, 10, 64000, "the largest boot disk", NULL);
    }
    free(dsp);
}

/* elasticPolicy (ztrain's own field, like useChiefInTfConfig): the workers'
 * pool of a synchronous job may grow and shrink between minReplicaCount and
 * maxReplicaCount while it runs; replicaCount is where it starts. */
static void s_vertex_elastic(zt_spec_ctx_t *c, int i, zt_pool_t *pool, json_t *wps, const char *pp)
{
    json_t *ep = zt_sf_obj(c, wps, pp, "elasticPolicy");
    if (!ep)
        return;
    char *path = zt_sf_path(pp, "elasticPolicy");
    static const char *const known[] = { "minReplicaCount", "maxReplicaCount", NULL };
    zt_sf_unknown_fields(c, ep, path, known);
    long long cap = zt_knob_int(ZT_KNOB_MAX_REPLICAS);
    bool has_min, has_max;
    int lo = (int) zt_sf_int(c, ep, path, "minReplicaCount", 1, 1, cap, "replicas on one machine; "
                             "ZT_MAX_REPLICAS raises it", &has_min);
    int hi = (int) zt_sf_int(c, ep, path, "maxReplicaCount", pool->replicas, 1, cap, "replicas on one machine; "
                             "ZT_MAX_REPLICAS raises it", &has_max);
    char *mp = zt_sf_path(path, "maxReplicaCount"), *rp = zt_sf_path(pp, "replicaCount");
    json_t *vhi = json_integer(hi), *vn = json_integer(pool->replicas);
    if (i != 1)
        ERR(c, path, ep, "only the workers' pool (workerPoolSpecs[1]) can be elastic: the primary replica "
                         "is the chief, and servers, reducers and evaluators keep their count");
    else if (!has_min || !has_max)
        ERR(c, path, ep, "expected both minReplicaCount and maxReplicaCount");
    else if (hi < lo)
        ERR(c, mp, vhi, "below minReplicaCount (%d)", lo);
    else if (pool->replicas < lo || pool->replicas > hi)
        ERR(c, rp, vn, "outside the pool's elasticPolicy, %d to %d replicas", lo, hi);
    else {
        pool->elastic_min = lo;
        pool->elastic_max = hi;
    }
    json_decref(vhi);
    json_decref(vn);
    free(mp);
    free(rp);
    free(path);
}

/* workerPoolSpecs[i] (at path pp): its replica count, machine, disk and
 * program. {} or null skips a pool other than the primary. */
static void s_vertex_pool(zt_spec_ctx_t *c, int i, json_t *wps, const char *pp)
{
    zt_pool_t *pool = &c->plan->pools[i];
    if (json_is_null(wps) || (json_is_object(wps) && json_object_size(wps) == 0)) {
        if (i == 0)
            ERR(c, pp, wps, "the primary pool is required (exactly one replica that coordinates the job)");
        return;
    }
    if (!json_is_object(wps)) {
        ERR(c, pp, wps, "expected a worker pool spec object ({} skips the pool)");
        return;
    }
    static const char *const wknown[] = { "machineSpec", "replicaCount", "diskSpec",
        "containerSpec", "pythonPackageSpec", "nfsMounts", "elasticPolicy", NULL };
    zt_sf_unknown_fields(c, wps, pp, wknown);
    pool->present = true;
    bool given;
    pool->replicas = (int) zt_sf_int(c, wps, pp, "replicaCount", 1, 1, zt_knob_int(ZT_KNOB_MAX_REPLICAS),
                                     "replicas on one machine; ZT_MAX_REPLICAS raises it", &given);
    if (i == 0 && given && pool->replicas != 1) {
        char *rp = zt_sf_path(pp, "replicaCount");
        json_t *v = json_integer(pool->replicas);
        ERR(c, rp, v, "the primary pool must have exactly 1 replica");
        json_decref(v);
        free(rp);
    }
    if (i == 0)
        pool->replicas = 1;
    s_vertex_machine(c, pool, wps, pp);
    s_vertex_disk(c, pool, wps, pp);
    s_vertex_program(c, i, pool, wps, pp);
    s_vertex_elastic(c, i, pool, wps, pp);
}

/* scheduling.strategy and maxWaitDuration: what of them holds on the
 * user's own machines is said, by name, not silently dropped. Every
 * strategy gets the services' preemption handling (a replica stopped from
 * outside saves, is restarted uncounted and resumes); nothing waits for
 * capacity. */
static void s_vertex_strategy(zt_spec_ctx_t *c, json_t *sch, const char *sp)
{
    static const char *const strategies[] = { "STRATEGY_UNSPECIFIED", "ON_DEMAND", "LOW_COST", "STANDARD", "SPOT",
                                              "FLEX_START", NULL };
    const char *st = zt_sf_str(c, sch, sp, "strategy", NULL);
    char *path = zt_sf_path(sp, "strategy");
    if (st) {
        bool known = false;
        for (int i = 0; strategies[i] && !known; i++)
            known = !strcmp(st, strategies[i]);
        json_t *v = json_string(st);
        if (!known)
            ERR(c, path, v, "expected one of STRATEGY_UNSPECIFIED, ON_DEMAND, LOW_COST, STANDARD, SPOT, FLEX_START");
        else if (!strcmp(st, "SPOT") || !strcmp(st, "LOW_COST")) {
            c->plan->spot = true;
            WARN(c, path, v, "the machines are yours, so nothing here is reclaimed for price; a replica stopped from "
                             "outside (SIGTERM) is handled as a preemption in any job: it saves, is restarted "
                             "without counting a crash, and resumes. Under Slurm, name a preemptible partition "
                             "or QOS (--partition, --qos): a preemption there requeues the job, which resumes "
                             "from what it saved on the signal");
        }
        else if (!strcmp(st, "FLEX_START"))
            WARN(c, path, v, "nothing waits for capacity here: the job starts when `ztrain run` does (on Slurm, "
                             "when the allocation is granted)");
        json_decref(v);
    }
    free(path);
    json_t *wait = json_object_get(sch, "maxWaitDuration");
    if (wait) {
        char *wp = zt_sf_path(sp, "maxWaitDuration");
        WARN(c, wp, wait, "not acted on: nothing waits for capacity here");
        free(wp);
    }
}

/* scheduling: the timeout, restartJobOnWorkerRestart, disableRetries. */
static void s_vertex_scheduling(zt_spec_ctx_t *c, json_t *spec, const char *prefix)
{
    char *sp = zt_sf_path(prefix, "scheduling");
    json_t *sch = zt_sf_obj(c, spec, prefix, "scheduling");
    if (sch) {
        static const char *const sknown[] = { "timeout", "restartJobOnWorkerRestart",
            "disableRetries", "strategy", "maxWaitDuration", NULL };
        zt_sf_unknown_fields(c, sch, sp, sknown);
        const char *t = zt_sf_str(c, sch, sp, "timeout", NULL);
        if (t) {
            c->plan->timeout_s = zt_parse_duration(t);
            if (c->plan->timeout_s <= 0) {
                char *tp = zt_sf_path(sp, "timeout");
                json_t *v = json_string(t);
                ERR(c, tp, v, "expected a positive duration such as \"7200s\"");
                json_decref(v);
                free(tp);
                c->plan->timeout_s = 0;
            }
        }
        c->plan->restart_job_on_worker_restart = zt_sf_bool(c, sch, sp, "restartJobOnWorkerRestart", false);
        c->plan->disable_retries = zt_sf_bool(c, sch, sp, "disableRetries", false);
        s_vertex_strategy(c, sch, sp);
    }
    free(sp);
}

/* One pass over a CustomJob in the order a reader of the spec meets its
 * fields (job fields, then each pool, then the output folder and
 * scheduling), each checked where it is read. */
static void s_custom_job_spec(zt_spec_ctx_t *c, json_t *spec, const char *prefix)
{
    static const char *const known[] = {
        "workerPoolSpecs", "baseOutputDirectory", "scheduling", "serviceAccount", "network",
        "reservedIpRanges", "tensorboard", "enableWebAccess", "enableDashboardAccess",
        "experiment", "experimentRun", "models", "persistentResourceId", "useChiefInTfConfig",
        "protectedArtifactLocationId", NULL };
    zt_sf_unknown_fields(c, spec, prefix, known);
    char *wp = zt_sf_path(prefix, "workerPoolSpecs");
    json_t *pools = json_object_get(spec, "workerPoolSpecs");
    if (!pools)
        ERR(c, wp, NULL, "required: the list of worker pools (pool 0 is the primary replica)");
    else if (!json_is_array(pools))
        ERR(c, wp, pools, "expected a list of worker pool specs");
    else if (json_array_size(pools) == 0)
        ERR(c, wp, pools, "at least the primary pool, workerPoolSpecs[0], is required");
    else if (json_array_size(pools) > ZT_POOLS)
        ERR(c, wp, NULL, "at most 4 pools (primary, workers, parameter servers or reducers, "
            "evaluators); %zu given", json_array_size(pools));
    for (int i = 0; json_is_array(pools) && i < ZT_POOLS && i < (int) json_array_size(pools); i++) {
        char *pp = zt_strdupf("%s[%d]", wp, i);
        s_vertex_pool(c, i, json_array_get(pools, (size_t) i), pp);
        free(pp);
    }
    if (c->plan->pools[1].elastic_min &&
        !(c->plan->pools[2].present && c->plan->pools[2].role == ZT_ROLE_REDUCER)) {
        char *ep = zt_strdupf("%s[1].elasticPolicy", wp);
        ERR(c, ep, json_object_get(json_array_get(pools, 1), "elasticPolicy"),
            "an elastic pool trains through reducers, whose group takes a new count of workers at a step: "
            "workerPoolSpecs[2] must be the Reduction Server (the ztrain-reducer or reductionserver image)");
        c->plan->pools[1].elastic_min = c->plan->pools[1].elastic_max = 0;
        free(ep);
    }
    free(wp);
    char *bp = zt_sf_path(prefix, "baseOutputDirectory");
    json_t *bo = zt_sf_obj(c, spec, prefix, "baseOutputDirectory");
    if (bo) {
        const char *uri = zt_sf_str(c, bo, bp, "outputUriPrefix", NULL);
        char *up = zt_sf_path(bp, "outputUriPrefix");
        if (!uri)
            ERR(c, up, NULL, "required: a local path or file:// URI");
        else
            c->plan->base_output_dir = zt_sf_local_path(c, up, uri);
        free(up);
    }
    free(bp);
    s_vertex_scheduling(c, spec, prefix);
    c->plan->tf_master = !zt_sf_bool(c, spec, prefix, "useChiefInTfConfig", true);
}

/* ---------------------------------------------------------------- format */

/* The Vertex formats: a study's trial job (opts->spec_key), a CustomJob
 * ({displayName, jobSpec}), or a bare CustomJobSpec. */
static void s_parse(zt_spec_ctx_t *c, json_t *root, const zt_plan_opts_t *opts)
{
    zt_plan_t *plan = c->plan;
    plan->service = "vertex";
    json_t *spec = root;
    const char *prefix = "";
    json_t *js = json_object_get(root, opts->spec_key ? opts->spec_key : "jobSpec");
    if (opts->spec_key) { /* a study: only the trial job is ours to check */
        plan->format = strdup("CustomJobSpec");
        if (!json_is_object(js)) {
            ERR(c, opts->spec_key, js, js ? "expected a CustomJobSpec object" : "required: the job every trial runs");
            js = json_object();
            json_object_set_new(root, opts->spec_key, js);
        }
        spec = js;
        prefix = opts->spec_key;
    }
    else if (js) {
        static const char *const known[] = { "displayName", "jobSpec", "labels", "name", "encryptionSpec",
            "state", "createTime", "startTime", "endTime", "updateTime", "error", "webAccessUris", NULL };
        zt_sf_unknown_fields(c, root, "", known);
        plan->format = strdup("CustomJob");
        if (!json_is_object(js)) {
            ERR(c, "jobSpec", js, "expected a CustomJobSpec object");
            js = json_object();
            json_object_set_new(root, "jobSpec", js);
        }
        spec = js;
        prefix = "jobSpec";
        const char *dn = zt_sf_str(c, root, "", "displayName", NULL);
        if (dn && !plan->display_name)
            plan->display_name = strdup(dn);
    }
    else {
        plan->format = strdup("CustomJobSpec");
        /* A bare spec may still carry a displayName; it is not an error. */
        const char *dn = json_string_value(json_object_get(root, "displayName"));
        if (dn) {
            plan->display_name = strdup(dn);
            json_object_del(root, "displayName");
        }
    }
    zt_sf_apply_flags(c, spec, prefix, false, opts->flags);
    s_custom_job_spec(c, spec, prefix);
    if (!plan->display_name)
        plan->display_name = strdup("job");
    plan->job = json_deep_copy(spec);
}

static void s_put_dir(json_t *env, zt_env_t var, const char *base, const char *sub)
{
    char *d = zt_strdupf("%s/%s/", base, sub);
    zt_layout_put(env, zt_env_name(var), d);
    free(d);
}

/* The last name of path (trailing slashes ignored) into out. */
static void s_last_name(const char *path, char *out, size_t size)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    size_t b = n;
    while (b > 0 && path[b - 1] != '/')
        b--;
    snprintf(out, size, "%.*s", (int) (n - b), path + b);
}

/* CLOUD_ML_JOB_ID: the job's ID, the name of its directory (unique: a
 * job's directory is its own). A trial runs as a job of its own, as on
 * Vertex; its ID is the study folder's name and the trial's folder's
 * ("mystudy-trial-3"). */
static void s_put_job_id(json_t *env, const zt_layout_t *layout)
{
    char real[PATH_MAX], id[512], own[256], study[256];
    if (!realpath(layout->job_dir, real))
        snprintf(real, sizeof real, "%s", layout->job_dir);
    size_t len = strlen(real);
    while (len > 1 && real[len - 1] == '/')
        real[--len] = 0;
    const char *dir = real;
    s_last_name(dir, own, sizeof own);
    snprintf(id, sizeof id, "%s", own);
    size_t n = strlen(dir) - strlen(own);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    char *parent = strndup(dir, n);
    s_last_name(parent, study, sizeof study);
    if (layout->trial && *study && strcmp(study, "/") && strcmp(study, "."))
        snprintf(id, sizeof id, "%s-%s", study, own);
    free(parent);
    zt_layout_put(env, zt_env_name(ZT_ENV_JOB_ID), id);
}

/* Vertex's view: the job's ID, and the output folders under the job's
 * base output folder. */
static void s_env(json_t *env, const zt_layout_t *layout, int pool, int index)
{
    (void) pool;
    (void) index;
    s_put_job_id(env, layout);
    s_put_dir(env, ZT_ENV_AIP_MODEL_DIR, layout->base_dir, "model");
    s_put_dir(env, ZT_ENV_AIP_CHECKPOINT_DIR, layout->base_dir, "checkpoints");
    s_put_dir(env, ZT_ENV_AIP_TENSORBOARD_LOG_DIR, layout->base_dir, "logs");
}

static const char *const s_folders[] = { "model", "checkpoints", "logs", NULL };

const zt_format_t zt_vertex_format = {
    .name = "vertex",
    .claims = NULL, /* a document no other format claims is a CustomJobSpec */
    .parse = s_parse,
    .view = { s_env, NULL, s_folders },
};
