/* SageMaker's CreateTrainingJob request (what `aws sagemaker
 * create-training-job --cli-input-json` takes): hosts algo-1..N from
 * ResourceConfig, the program from AlgorithmSpecification or the framework
 * containers' sagemaker_program, hyperparameters as --name value, input
 * channels from local folders, the output path, the checkpoint folder and
 * the stopping condition. The hosts are pool 0 (algo-1, the primary) and
 * pool 1 (algo-2..N), all running the one program. */
#include "formats/sagemaker/zt_sm_int.h"
#include "base/zt_util.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_knobs.h"
#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Fields SageMaker acts on that have nothing to act on here: each is a
 * warning naming it and why. */
static const char *const s_not_here[][2] = {
    { "RoleArn", "no AWS role is assumed: the job runs as you" },
    { "Tags", "kept nowhere" },
    { "VpcConfig", "the job's hosts are yours; its ports accept only them" },
    { "EnableNetworkIsolation", "the program's network is the host's" },
    { "EnableInterContainerTrafficEncryption", "replicas' traffic is always authenticated and encrypted (CURVE)" },
    { "DebugHookConfig", "SageMaker Debugger is not run" },
    { "DebugRuleConfigurations", "SageMaker Debugger is not run" },
    { "ProfilerConfig", "SageMaker Profiler is not run" },
    { "ProfilerRuleConfigurations", "SageMaker Profiler is not run" },
    { "TensorBoardOutputConfig", "TensorBoard logs go to the job's logs/ folder (AIP_TENSORBOARD_LOG_DIR)" },
    { "ExperimentConfig", "no SageMaker Experiments here" },
    { "RetryStrategy", "a failed job is retried by ZT_MAX_JOB_RETRIES" },
    { "RemoteDebugConfig", "no remote debugging here" },
    { "InfraCheckConfig", "no infrastructure checks here" },
    { "SessionChainingConfig", "no AWS session here" },
};

/* A hyperparameter's value as the training toolkit hands it to the
 * program: the SDK JSON-encodes every value ("\"abc\"", "0.1"), the
 * toolkit decodes it; text that is no JSON stays as it is. */
static char *s_hp_text(const char *v)
{
    json_t *d = json_loads(v, JSON_DECODE_ANY, NULL);
    char *out = NULL;
    if (json_is_string(d))
        out = strdup(json_string_value(d));
    else if (d && !json_is_object(d) && !json_is_array(d))
        out = json_dumps(d, JSON_ENCODE_ANY);
    json_decref(d);
    return out ? out : strdup(v);
}

static int s_strcmp_p(const void *a, const void *b)
{
    return strcmp(*(const char *const *) a, *(const char *const *) b);
}

/* A hyperparameter's value as the framework containers' training toolkit
 * passes it to the script as an argument: the request's text decoded as
 * JSON, a string as it is, true and false as Python prints them, a number
 * as the request wrote it. */
static char *s_hp_arg(const char *v)
{
    json_t *d = json_loads(v, JSON_DECODE_ANY, NULL);
    char *out;
    if (json_is_string(d))
        out = strdup(json_string_value(d));
    else if (json_is_boolean(d))
        out = strdup(json_is_true(d) ? "True" : "False");
    else if (json_is_null(d))
        out = strdup("");
    else { /* a number, or text that is no JSON: the request's own text */
        while (*v == ' ' || *v == '\t')
            v++;
        size_t n = strlen(v);
        while (n && (v[n - 1] == ' ' || v[n - 1] == '\t' || v[n - 1] == '\n'))
            n--;
        out = strndup(v, n);
    }
    json_decref(d);
    return out;
}

/* The program: ContainerEntrypoint and ContainerArguments (only those, as
 * SageMaker runs them), else the framework containers' sagemaker_program
 * (in sagemaker_submit_directory, or SAGEMAKER_PROGRAM in Environment) or
 * an image naming a ztrain role, then ContainerArguments and the
 * hyperparameters but sagemaker_*, sorted, as the training toolkit passes
 * them: --name value (-n value for a one-letter name). */
static void s_program(zt_spec_ctx_t *c, zt_pool_t *pool, json_t *alg, json_t *hps, json_t *envmap)
{
    const char *ap = "AlgorithmSpecification";
    zt_sf_str_array(c, alg, ap, "ContainerEntrypoint", pool->argv);
    bool entrypoint = json_array_size(pool->argv) > 0;
    const char *image = zt_sf_str(c, alg, ap, "TrainingImage", NULL);
    if (image)
        pool->image_uri = strdup(image);
    const char *program = json_string_value(json_object_get(hps, "sagemaker_program"));
    const char *where = "HyperParameters.sagemaker_program";
    if (!program && (program = json_string_value(json_object_get(envmap, "SAGEMAKER_PROGRAM"))))
        where = "Environment.SAGEMAKER_PROGRAM";
    char *prog = program ? s_hp_text(program) : NULL;
    if (json_array_size(pool->argv) == 0 && prog) {
        const char *dir = json_string_value(json_object_get(hps, "sagemaker_submit_directory"));
        char *d = dir ? s_hp_text(dir) : NULL, *local = d ? zt_sf_local_path(c, "HyperParameters.sagemaker_submit_directory", d) : NULL;
        char *path = local ? zt_strdupf("%s/%s", local, prog) : strdup(prog), real[PATH_MAX];
        struct stat st;
        json_t *v = json_string(path);
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            ERR(c, local ? "HyperParameters.sagemaker_submit_directory" : where, v,
                "no such program file (sagemaker_submit_directory is a local folder or file:// here)");
        json_decref(v);
        size_t n = strlen(prog);
        if (n < 3 || strcmp(prog + n - 3, ".py"))
            json_array_append_new(pool->argv, json_string(realpath(path, real) ? real : path));
        else {
            json_array_append_new(pool->argv, json_string("python3"));
            json_array_append_new(pool->argv, json_string(realpath(path, real) ? real : path));
        }
        if (local)
            pool->python_path = realpath(local, real) ? strdup(real) : strdup(local);
        free(path);
        free(d);
        free(local);
    }
    else if (json_array_size(pool->argv) == 0 && (pool->role = zt_sf_image_role(image, 0)) != ZT_ROLE_NONE)
        json_array_append_new(pool->argv, json_string(zt_role_binary(pool->role)));
    else if (json_array_size(pool->argv) == 0)
        ERR(c, "AlgorithmSpecification.ContainerEntrypoint", NULL, "required: the image%s%s%s is not pulled "
            "here, so give the command (or the hyperparameter sagemaker_program, the script the framework "
            "containers run)", image ? " '" : "", image ? image : "", image ? "'" : "");
    free(prog);
    zt_sf_str_array(c, alg, ap, "ContainerArguments", pool->argv);
    if (entrypoint) /* the program reads its hyperparameters from hyperparameters.json */
        return;
    const char **keys = calloc(json_object_size(hps) + 1, sizeof *keys);
    size_t nk = 0;
    const char *k;
    json_t *v;
    json_object_foreach(hps, k, v)
        if (strncmp(k, "sagemaker_", 10))
            keys[nk++] = k;
    qsort(keys, nk, sizeof *keys, s_strcmp_p);
    for (size_t i = 0; i < nk; i++) {
        char *text = s_hp_arg(json_string_value(json_object_get(hps, keys[i])));
        json_array_append_new(pool->argv, json_sprintf(strlen(keys[i]) > 1 ? "--%s" : "-%s", keys[i]));
        json_array_append_new(pool->argv, json_string(text));
        free(text);
    }
    free(keys);
}

/* Whether hyperparameter name (the SDK's `distribution`) says true. */
static bool s_hp_true(json_t *hps, const char *name)
{
    const char *v = json_string_value(json_object_get(hps, name));
    char *t = v ? s_hp_text(v) : NULL;
    bool yes = t && (!strcmp(t, "true") || !strcmp(t, "True"));
    free(t);
    return yes;
}

/* The estimator's `distribution`, as the SDK hands it over in the
 * hyperparameters: torch_distributed starts a process per GPU on every
 * host under torchrun, as SageMaker's launcher does (its options from the
 * PET_* variables: zt_layout.c); a host with one GPU or none runs the
 * program itself, with the variables torchrun would give its one process
 * (every replica has them). mpi is recorded here and laid out by s_mpi.
 * A ContainerEntrypoint (SageMaker's training toolkit) launches torchrun
 * itself; with mpi it would reach the other hosts over SSH: refused. */
static void s_distribution(zt_spec_ctx_t *c, zt_pool_t *pool, json_t *hps, zt_sm_plan_t *sm, bool entrypoint)
{
    if (s_hp_true(hps, "sagemaker_mpi_enabled") && entrypoint)
        ERR(c, "AlgorithmSpecification.ContainerEntrypoint", NULL, "with distribution mpi "
            "(sagemaker_mpi_enabled) an entry point starts the other hosts' ranks over SSH, which ztrain's "
            "hosts do not run: name the script with the hyperparameter sagemaker_program instead, and "
            "ztrain-mpi starts every host's ranks");
    if (s_hp_true(hps, "sagemaker_mpi_enabled")) {
        if (s_hp_true(hps, "sagemaker_torch_distributed_enabled") ||
            s_hp_true(hps, "sagemaker_distributed_dataparallel_enabled"))
            ERR(c, "HyperParameters.sagemaker_mpi_enabled", json_object_get(hps, "sagemaker_mpi_enabled"),
                "one launcher a job: mpi, torch_distributed or smdistributed");
        const char *per = json_string_value(json_object_get(hps, "sagemaker_mpi_num_of_processes_per_host"));
        char *pt = per ? s_hp_text(per) : strdup("1"), *end = NULL;
        long n = strtol(pt, &end, 10);
        if (*end || n < 1 || n > 1024) {
            ERR(c, "HyperParameters.sagemaker_mpi_num_of_processes_per_host",
                json_object_get(hps, "sagemaker_mpi_num_of_processes_per_host"), "a whole number from 1 to 1024");
            n = 1;
        }
        const char *opts = json_string_value(json_object_get(hps, "sagemaker_mpi_custom_mpi_options"));
        char *ot = opts ? s_hp_text(opts) : strdup("");
        sm->mpi = true;
        sm->mpi_processes_per_host = (int) n;
        sm->mpi_options = ot;
        c->plan->launcher = ZT_LAUNCH_MPI;
        free(pt);
        return;
    }
    bool smddp = s_hp_true(hps, "sagemaker_distributed_dataparallel_enabled");
    sm->data_parallel = smddp; /* reducers in pool 2 once the hosts are known: s_data_parallel */
    if (!smddp && !s_hp_true(hps, "sagemaker_torch_distributed_enabled"))
        return;
    sm->torch_distributed = true;
    c->plan->launcher = ZT_LAUNCH_TORCHRUN;
    if (entrypoint || pool->accel_count <= 1 || json_array_size(pool->argv) == 0)
        return; /* an entry point (the training toolkit) starts torchrun itself, as in SageMaker's containers */
    json_t *argv = json_array();
    const char *interp;
    bool python = zt_pool_python(pool, &interp);
    json_array_append_new(argv, json_string(interp));
    json_array_append_new(argv, json_string("-m"));
    json_array_append_new(argv, json_string("torch.distributed.run"));
    if (!python)
        json_array_append_new(argv, json_string("--no-python"));
    for (size_t i = python ? 1 : 0; i < json_array_size(pool->argv); i++)
        json_array_append(argv, json_array_get(pool->argv, i));
    json_array_clear(pool->argv);
    json_array_extend(pool->argv, argv);
    json_decref(argv);
}

void zt_sm_copy_pool(zt_pool_t *pool, const zt_pool_t *primary, int replicas)
{
    json_t *argv = pool->argv, *env = pool->env;
    *pool = *primary;
    pool->replicas = replicas;
    pool->argv = argv;
    pool->env = env;
    json_array_extend(argv, primary->argv);
    json_array_extend(env, primary->env);
    pool->image_uri = primary->image_uri ? strdup(primary->image_uri) : NULL;
    pool->python_path = primary->python_path ? strdup(primary->python_path) : NULL;
}

/* ResourceConfig.InstanceGroups: up to 3 named groups of hosts, each of
 * its own instance type, the hosts algo-1..N in group order. The first
 * group is pools 0 and 1 (its first host the primary), the second pool 2,
 * the third pool 3: a job's pools have one machine type each. sm's
 * groups list them; returns the first group's type, its count in *count. */
static const char *s_instance_groups(zt_spec_ctx_t *c, json_t *groups, zt_sm_plan_t *sm, long long *count)
{
    const char *gp = "ResourceConfig.InstanceGroups";
    size_t n = json_array_size(groups), i;
    if (!json_is_array(groups) || n < 1 || n > 3) {
        ERR(c, gp, groups, "1 to 3 groups here (a job has four pools: the first group takes the first two, "
            "the others one each)");
        return NULL;
    }
    json_t *g;
    const char *first = NULL;
    sm->groups = calloc(n, sizeof *sm->groups);
    json_array_foreach(groups, i, g) {
        char path[64];
        snprintf(path, sizeof path, "%s[%zu]", gp, i);
        static const char *const gknown[] = { "InstanceGroupName", "InstanceType", "InstanceCount", NULL };
        zt_sf_unknown_fields(c, g, path, gknown);
        const char *name = zt_sf_str(c, g, path, "InstanceGroupName", NULL);
        const char *type = zt_sf_str(c, g, path, "InstanceType", NULL);
        long long k = zt_sf_int(c, g, path, "InstanceCount", 1, 1, zt_knob_int(ZT_KNOB_MAX_REPLICAS),
                                "hosts on one machine; ZT_MAX_REPLICAS raises it", NULL);
        bool ok = name && *name && strlen(name) <= 64; /* SageMaker's: any 1 to 64 characters */
        for (const char *p = name; ok && *p; p++)
            ok = (unsigned char) *p >= 0x20 && *p != 0x7f;
        for (int j = 0; j < sm->ngroups; j++)
            if (ok && !strcmp(sm->groups[j].name, name)) {
                char *np = zt_sf_path(path, "InstanceGroupName");
                json_t *v = json_string(name);
                ERR(c, np, v, "a second group of this name");
                json_decref(v);
                free(np);
            }
        if (!ok) {
            char *np = zt_sf_path(path, "InstanceGroupName");
            ERR(c, np, json_object_get(g, "InstanceGroupName"), "required: 1 to 64 characters, none a control "
                "character");
            free(np);
        }
        if (!type) {
            char *ip = zt_sf_path(path, "InstanceType");
            ERR(c, ip, NULL, "required: a SageMaker instance type such as ml.m5.xlarge");
            free(ip);
        }
        sm->groups[sm->ngroups++] = (zt_sm_group_t) { strdup(ok ? name : ""), strdup(type ? type : ""), k,
                                                      i == 0 ? 0 : (int) i + 1 };
        if (i == 0) {
            first = type;
            *count = k;
        }
    }
    return first;
}

/* The second and third instance groups as pools 2 and 3: the primary's
 * program on their own machine type. */
static void s_group_pools(zt_spec_ctx_t *c, json_t *groups, zt_plan_t *plan)
{
    zt_pool_t *primary = &plan->pools[0];
    const zt_sm_plan_t *sm = zt_sm_plan(plan);
    for (int i = 1; groups && i < sm->ngroups; i++) {
        const char *type = sm->groups[i].type;
        zt_pool_t *pool = &plan->pools[i + 1];
        zt_sm_copy_pool(pool, primary, (int) sm->groups[i].count);
        char path[80];
        snprintf(path, sizeof path, "ResourceConfig.InstanceGroups[%d].InstanceType", i);
        json_t *tv = json_string(type);
        if (!*type)
            ; /* named at the group already */
        else if (strncmp(type, "ml.", 3) || !zt_machine_lookup(type, &pool->machine))
            ERR(c, path, tv, "unknown SageMaker instance type (known: %s)", zt_ml_names());
        else
            zt_sf_check_machine(c, pool, type, path, NULL, NULL, 0, false, NULL);
        json_decref(tv);
    }
}

/* distribution mpi (ztrain-mpi): the primary host runs mpirun over every
 * host through `ztrain-mpi launch`; every other host runs `ztrain-mpi
 * host`, which starts Open MPI's daemon there when the primary's mpirun
 * asks (SageMaker's hosts run sshd for it). The job ends with the
 * primary's mpirun. */
static void s_mpi(zt_plan_t *plan)
{
    const zt_sm_plan_t *sm = zt_sm_plan(plan);
    if (!sm->mpi)
        return;
    zt_pool_t *primary = &plan->pools[0];
    json_t *argv = json_pack("[s, s, s, o]", "ztrain-mpi", "launch", "--processes-per-host",
                             json_sprintf("%d", sm->mpi_processes_per_host));
    const char *opts = sm->mpi_options;
    if (opts && *opts) {
        json_array_append_new(argv, json_string("--mpi-options"));
        json_array_append_new(argv, json_string(opts));
    }
    json_array_append_new(argv, json_string("--"));
    json_array_extend(argv, primary->argv);
    json_array_clear(primary->argv);
    json_array_extend(primary->argv, argv);
    json_decref(argv);
    for (int p = 1; p < ZT_POOLS; p++)
        if (plan->pools[p].present) {
            json_array_clear(plan->pools[p].argv);
            json_array_append_new(plan->pools[p].argv, json_string("ztrain-mpi"));
            json_array_append_new(plan->pools[p].argv, json_string("host"));
        }
}

/* smdistributed's data parallelism: ztrain's reducers stand in for its
 * servers, one per host, in pool 2 (they are no SageMaker hosts: not in
 * SM_HOSTS, and the job ends when the hosts' programs have). The program's
 * `import smdistributed.dataparallel.torch.torch_smddp` is the Python
 * package's: the "smddp" backend, DDP's gradients through the reducers. */
static void s_data_parallel(zt_spec_ctx_t *c, zt_plan_t *plan)
{
    if (!zt_sm_plan(plan)->data_parallel)
        return;
    zt_pool_t *red = &plan->pools[2];
    if (red->present) {
        ERR(c, "HyperParameters.sagemaker_distributed_dataparallel_enabled", NULL, "distribution smdistributed "
            "takes pool 2 for its reducers, which a second instance group holds here: one group with it");
        return;
    }
    red->present = true;
    red->replicas = plan->pools[0].replicas + (plan->pools[1].present ? plan->pools[1].replicas : 0);
    red->machine = plan->pools[0].machine;
    red->role = ZT_ROLE_REDUCER;
    json_array_append_new(red->argv, json_string(zt_role_binary(ZT_ROLE_REDUCER)));
    snprintf(red->disk_type, sizeof red->disk_type, "%s", plan->pools[0].disk_type);
    red->disk_gb = plan->pools[0].disk_gb;
}

/* A map of strings (HyperParameters, Environment); an error for any value
 * that is not a string. */
static json_t *s_string_map(zt_spec_ctx_t *c, json_t *root, const char *key)
{
    json_t *m = zt_sf_obj(c, root, "", key);
    const char *k;
    json_t *v;
    json_object_foreach(m, k, v)
        if (!json_is_string(v)) {
            char *p = zt_sf_path(key, k);
            ERR(c, p, v, "expected a string (SageMaker's maps hold strings only)");
            free(p);
        }
    return m;
}

/* AlgorithmSpecification, checked (an empty one made where it is missing,
 * with the error said). */
static json_t *s_algorithm(zt_spec_ctx_t *c, json_t *root)
{
    json_t *alg = zt_sf_obj(c, root, "", "AlgorithmSpecification");
    if (!alg) {
        ERR(c, "AlgorithmSpecification", NULL, "required");
        alg = json_object();
        json_object_set_new(root, "AlgorithmSpecification", alg);
    }
    static const char *const aknown[] = { "TrainingImage", "AlgorithmName", "TrainingInputMode",
        "MetricDefinitions", "EnableSageMakerMetricsTimeSeries", "ContainerEntrypoint", "ContainerArguments",
        "TrainingImageConfig", NULL };
    zt_sf_unknown_fields(c, alg, "AlgorithmSpecification", aknown);
    if (json_object_get(alg, "AlgorithmName"))
        ERR(c, "AlgorithmSpecification.AlgorithmName", json_object_get(alg, "AlgorithmName"),
            "SageMaker's own and Marketplace algorithms are not here: give TrainingImage and a program");
    const char *mode = zt_sf_str(c, alg, "AlgorithmSpecification", "TrainingInputMode", "File");
    if (strcmp(mode, "File")) {
        json_t *mv = json_string(mode);
        ERR(c, "AlgorithmSpecification.TrainingInputMode", mv, "only File mode here: the channels are local "
            "folders, so Pipe and FastFile have nothing to stream");
        json_decref(mv);
    }
    if (json_object_get(alg, "MetricDefinitions"))
        WARN(c, "AlgorithmSpecification.MetricDefinitions", NULL, "read by `ztrain tune` only; a training job's "
             "metrics are the ones its program reports");
    return alg;
}

/* ResourceConfig: the primary pool's volume, the hosts' count (*count)
 * and their instance type (returned; NULL when missing), or their
 * InstanceGroups (*groups). *rc_p: the object, NULL when missing. */
static const char *s_resources(zt_spec_ctx_t *c, json_t *root, zt_plan_t *plan, zt_sm_plan_t *sm, json_t **rc_p,
                               long long *count, json_t **groups)
{
    const char *type = NULL;
    json_t *rc = zt_sf_obj(c, root, "", "ResourceConfig");
    const char *rp = "ResourceConfig";
    if (!rc)
        ERR(c, rp, NULL, "required: InstanceType and InstanceCount");
    else {
        static const char *const rknown[] = { "InstanceType", "InstanceCount", "VolumeSizeInGB",
            "VolumeKmsKeyId", "KeepAlivePeriodInSeconds", "InstanceGroups", "TrainingPlanArn", NULL };
        zt_sf_unknown_fields(c, rc, rp, rknown);
        *groups = json_object_get(rc, "InstanceGroups");
        if (*groups && (json_object_get(rc, "InstanceType") || json_object_get(rc, "InstanceCount")))
            ERR(c, "ResourceConfig.InstanceGroups", NULL, "give InstanceType and InstanceCount, or InstanceGroups, "
                "not both");
        if (*groups)
            type = s_instance_groups(c, *groups, sm, count);
        else {
            type = zt_sf_str(c, rc, rp, "InstanceType", NULL);
            *count = zt_sf_int(c, rc, rp, "InstanceCount", 1, 1, zt_knob_int(ZT_KNOB_MAX_REPLICAS),
                               "hosts on one machine; ZT_MAX_REPLICAS raises it", NULL);
        }
        plan->pools[0].disk_gb = (int) zt_sf_int(c, rc, rp, "VolumeSizeInGB", 30, 1, 16384,
                                                 "SageMaker's largest volume", NULL);
        snprintf(plan->pools[0].disk_type, sizeof plan->pools[0].disk_type, "ebs");
        if (json_object_get(rc, "KeepAlivePeriodInSeconds"))
            WARN(c, "ResourceConfig.KeepAlivePeriodInSeconds", NULL, "ignored: nothing is kept warm here");
    }
    *rc_p = rc;
    return type;
}

void zt_sm_job_name(zt_spec_ctx_t *c, json_t *root, const char *key, const char *fallback, zt_sm_plan_t *sm)
{
    const char *name = zt_sf_str(c, root, "", key, NULL);
    bool ok = name && isalnum((unsigned char) name[0]) && strlen(name) <= 63;
    for (const char *p = name; ok && *p; p++)
        ok = isalnum((unsigned char) *p) || (*p == '-' && p[1]);
    json_t *nv = name ? json_string(name) : NULL;
    if (!ok)
        ERR(c, key, nv, name ? "1 to 63 letters, digits and inner hyphens" : "required");
    json_decref(nv);
    c->plan->display_name = strdup(name ? name : fallback);
    free(sm->job_name);
    sm->job_name = strdup(c->plan->display_name);
}

void zt_sm_apply_flags(zt_spec_ctx_t *c, const zt_plan_opts_t *opts, const char *request)
{
    size_t i;
    json_t *f;
    json_array_foreach(opts->flags, i, f) {
        const char *n = json_string_value(json_array_get(f, 0));
        if (strcmp(n, "--display-name"))
            ERR(c, n, NULL, "applies to Vertex and AI Platform jobs; %s is a SageMaker %s request", c->plan->source,
                request);
        else {
            free(c->plan->display_name);
            c->plan->display_name = strdup(json_string_value(json_array_get(f, 1)));
        }
    }
}

/* One pass over the request's fields in its own order, each checked where
 * it is read. */
void zt_sm_parse_request(zt_spec_ctx_t *c, json_t *root)
{
    static const char *const known[] = { "TrainingJobName", "AlgorithmSpecification", "HyperParameters",
        "ResourceConfig", "InputDataConfig", "OutputDataConfig", "CheckpointConfig", "StoppingCondition",
        "EnableManagedSpotTraining", "Environment", "RoleArn", "Tags", "VpcConfig", "EnableNetworkIsolation",
        "EnableInterContainerTrafficEncryption", "DebugHookConfig", "DebugRuleConfigurations",
        "ProfilerConfig", "ProfilerRuleConfigurations", "TensorBoardOutputConfig", "ExperimentConfig",
        "RetryStrategy", "RemoteDebugConfig", "InfraCheckConfig", "SessionChainingConfig", NULL };
    zt_sf_unknown_fields(c, root, "", known);
    zt_plan_t *plan = c->plan;
    zt_sm_plan_t *sm = zt_sm_plan_new(plan);
    zt_sm_job_name(c, root, "TrainingJobName", "training-job", sm);
    for (size_t i = 0; i < sizeof s_not_here / sizeof *s_not_here; i++)
        if (json_object_get(root, s_not_here[i][0]))
            WARN(c, s_not_here[i][0], NULL, "ignored: %s", s_not_here[i][1]);
    json_t *alg = s_algorithm(c, root);
    json_t *hps = s_string_map(c, root, "HyperParameters"), *envmap = s_string_map(c, root, "Environment");
    long long count = 1;
    json_t *groups = NULL, *rc;
    const char *rp = "ResourceConfig";
    const char *type = s_resources(c, root, plan, sm, &rc, &count, &groups);
    zt_pool_t *primary = &plan->pools[0], *others = &plan->pools[1];
    primary->present = true;
    primary->replicas = 1;
    char *tp = groups ? strdup("ResourceConfig.InstanceGroups[0].InstanceType") : zt_sf_path(rp, "InstanceType");
    json_t *tv = type ? json_string(type) : NULL;
    if (rc && !type)
        ERR(c, tp, NULL, "required: a SageMaker instance type such as ml.m5.xlarge");
    else if (type && (strncmp(type, "ml.", 3) || !zt_machine_lookup(type, &primary->machine)))
        ERR(c, tp, tv, "unknown SageMaker instance type (known: %s)", zt_ml_names());
    else if (type)
        zt_sf_check_machine(c, primary, type, tp, NULL, NULL, 0, false, NULL);
    json_decref(tv);
    free(tp);
    s_program(c, primary, alg, hps, envmap);
    s_distribution(c, primary, hps, sm, json_array_size(json_object_get(alg, "ContainerEntrypoint")) > 0);
    const char *k;
    json_t *v;
    json_object_foreach(envmap, k, v) {
        char *ep = zt_sf_path("Environment", k);
        if (!zt_sf_env_name_ok(k))
            ERR(c, ep, NULL, "not a valid environment variable name");
        else if (json_is_string(v))
            json_array_append_new(primary->env, json_pack("[s, s]", k, json_string_value(v)));
        free(ep);
    }
    if (count > 1) /* algo-2..N: the same hosts running the same program */
        zt_sm_copy_pool(others, primary, (int) count - 1);
    s_group_pools(c, groups, plan);
    s_data_parallel(c, plan);
    s_mpi(plan);
    zt_spec_sm_channels(c, root, sm);
    zt_spec_sm_outputs(c, root, sm);
    plan->spot = zt_sf_bool(c, root, "", "EnableManagedSpotTraining", false);
    if (hps)
        json_object_update(sm->hyperparameters, hps);
    plan->tf_master = false;
    plan->job = json_deep_copy(root);
}
