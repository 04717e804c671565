/* SageMaker's CreateProcessingJob request (what `aws sagemaker
 * create-processing-job --cli-input-json` takes): hosts algo-1..N from
 * ProcessingResources.ClusterConfig, the program from AppSpecification,
 * ProcessingInputs from local folders or files (each host's share), and
 * ProcessingOutputConfig's folders. The hosts are pool 0 (algo-1) and pool 1
 * (algo-2..N), all running the one program; the job waits for every one. */
#include "formats/sagemaker/zt_processing.h"
#include "formats/sagemaker/zt_sm_int.h"
#include "plan/zt_machines.h"
#include "base/zt_util.h"
#include "ztrain/zt_knobs.h"
#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define S_ROOT "/opt/ml/processing/"

/* Fields SageMaker acts on that have nothing to act on here. */
static const char *const s_not_here[][2] = {
    { "RoleArn", "no AWS role is assumed: the job runs as you" },
    { "Tags", "kept nowhere" },
    { "NetworkConfig", "the hosts' traffic stays on your machines; ztrain's own is authenticated and encrypted" },
    { "ExperimentConfig", "no SageMaker Experiments here" },
};

/* A LocalPath: under /opt/ml/processing/, plain names (no "." or ".."
 * parts, no empty ones), not within another's (seen: the ones so far).
 * Its part after "/opt/ml/" (heap), or NULL with the error said. */
static char *s_local(zt_spec_ctx_t *c, json_t *parent, const char *path, json_t *seen)
{
    char *lp = zt_sf_path(path, "LocalPath");
    const char *v = zt_sf_str(c, parent, path, "LocalPath", NULL);
    const char *bad = !v ? "required: where the program finds it, under " S_ROOT : NULL;
    size_t n = v ? strlen(v) : 0;
    if (!bad && (strncmp(v, S_ROOT, strlen(S_ROOT)) || n == strlen(S_ROOT) || n >= 256))
        bad = "a folder under " S_ROOT " (SageMaker's rule), at most 255 characters";
    for (const char *p = v + (v ? strlen(S_ROOT) - 1 : 0); v && !bad && *p; p++)
        if (*p == '/' && (p[1] == '/' || (p[1] == '.' && (p[2] == '/' || !p[2] || (p[2] == '.' && (p[3] == '/' || !p[3]))))))
            bad = "no empty, '.' or '..' parts";
    char *rel = bad ? NULL : strndup(v + strlen("/opt/ml/"), n - strlen("/opt/ml/") - (v[n - 1] == '/'));
    const char *k;
    json_t *other;
    json_object_foreach(seen, k, other) {
        size_t m = strlen(k), r = rel ? strlen(rel) : 0;
        if (rel && !bad && !strncmp(k, rel, m < r ? m : r) && (m == r || (m > r && k[r] == '/') || (m < r && rel[m] == '/')))
            bad = json_string_value(other); /* said below with the other's field */
    }
    json_t *val = v ? json_string(v) : NULL;
    if (bad && rel)
        ERR(c, lp, val, "the same folder as, or within, %s's", bad);
    else if (bad)
        ERR(c, lp, val, "%s", bad);
    else
        json_object_set_new(seen, rel, json_string(path));
    json_decref(val);
    free(lp);
    if (bad) {
        free(rel);
        return NULL;
    }
    return rel;
}

/* A name field (InputName, OutputName): required, unique among seen. */
static const char *s_name(zt_spec_ctx_t *c, json_t *o, const char *path, const char *key, json_t *seen)
{
    const char *name = zt_sf_str(c, o, path, key, NULL);
    char *np = zt_sf_path(path, key);
    json_t *v = name ? json_string(name) : NULL;
    bool ok = name && *name && strlen(name) <= 64;
    for (const char *p = name; ok && *p; p++)
        ok = isalnum((unsigned char) *p) || *p == '-' || *p == '_' || *p == '.';
    if (!ok)
        ERR(c, np, v, name ? "1 to 64 letters, digits, '-', '_' or '.'" : "required");
    else if (json_object_get(seen, name))
        ERR(c, np, v, "a second one of this name");
    else
        json_object_set_new(seen, name, json_true());
    json_decref(v);
    free(np);
    return ok ? name : NULL;
}

/* A field whose only value here is want: an error naming why otherwise. */
static void s_only(zt_spec_ctx_t *c, json_t *o, const char *path, const char *key, const char *want,
                   const char *why)
{
    const char *v = zt_sf_str(c, o, path, key, want);
    if (strcmp(v, want)) {
        char *p = zt_sf_path(path, key);
        json_t *jv = json_string(v);
        ERR(c, p, jv, "only %s here: %s", want, why);
        json_decref(jv);
        free(p);
    }
}

/* Long on purpose: its fields in order, each checked where it is read.
 * One ProcessingInputs entry into ch; whether it is one. */
static bool s_input(zt_spec_ctx_t *c, json_t *in, const char *ip, json_t *names, json_t *locals,
                    zt_sm_channel_t *ch)
{
    static const char *const known[] = { "InputName", "AppManaged", "S3Input", "DatasetDefinition", NULL };
    zt_sf_unknown_fields(c, in, ip, known);
    const char *name = s_name(c, in, ip, "InputName", names);
    char *dp = zt_sf_path(ip, "DatasetDefinition"), *ap = zt_sf_path(ip, "AppManaged"), *sp = zt_sf_path(ip, "S3Input");
    if (json_object_get(in, "DatasetDefinition"))
        ERR(c, dp, NULL, "not here: Athena and Redshift queries have no local stand-in; give S3Input with a "
            "local folder");
    if (zt_sf_bool(c, in, ip, "AppManaged", false))
        ERR(c, ap, NULL, "not here: ztrain places every input where its LocalPath says");
    json_t *s3 = zt_sf_obj(c, in, ip, "S3Input");
    if (!s3 && !json_object_get(in, "DatasetDefinition"))
        ERR(c, sp, NULL, "required: S3Uri (a local folder or file, or file://) and LocalPath");
    char *local = NULL, *uri_path = NULL, *path = NULL, real[PATH_MAX];
    const char *dist = "FullyReplicated";
    if (s3) {
        static const char *const sknown[] = { "S3Uri", "LocalPath", "S3DataType", "S3InputMode",
            "S3DataDistributionType", "S3CompressionType", NULL };
        zt_sf_unknown_fields(c, s3, sp, sknown);
        const char *uri = zt_sf_str(c, s3, sp, "S3Uri", NULL);
        uri_path = zt_sf_path(sp, "S3Uri");
        path = uri ? zt_sf_local_path(c, uri_path, uri) : NULL;
        struct stat st;
        json_t *uv = uri ? json_string(uri) : NULL;
        if (!uri)
            ERR(c, uri_path, NULL, "required: the input's folder or file (a local path or file:// here)");
        else if (path && stat(path, &st) != 0) {
            ERR(c, uri_path, uv, "no such folder or file on this machine");
            free(path);
            path = NULL;
        }
        json_decref(uv);
        local = s_local(c, s3, sp, locals);
        s_only(c, s3, sp, "S3DataType", "S3Prefix", "every file under the folder (a manifest lists S3 objects)");
        s_only(c, s3, sp, "S3InputMode", "File", "the input is on this machine's disk, so Pipe has nothing to stream");
        s_only(c, s3, sp, "S3CompressionType", "None", "SageMaker decompresses only in Pipe mode");
        dist = zt_sm_distribution(c, s3, sp);
    }
    bool made = name && path && local;
    if (made)
        *ch = (zt_sm_channel_t) { .name = strdup(name), .path = strdup(realpath(path, real) ? real : path),
                                  .distribution = strdup(dist), .content_type = strdup(""),
                                  .record_wrapper = strdup("None"), .local = local };
    else
        free(local);
    free(path);
    free(uri_path);
    free(dp);
    free(ap);
    free(sp);
    return made;
}

/* ProcessingInputs: every entry, into sm's channels. */
static void s_inputs(zt_spec_ctx_t *c, json_t *root, zt_sm_plan_t *sm, json_t *locals)
{
    json_t *list = json_object_get(root, "ProcessingInputs"), *names = json_object(), *in;
    if (list && !json_is_array(list))
        ERR(c, "ProcessingInputs", list, "expected an array of inputs");
    sm->channels = calloc(json_array_size(list) + 1, sizeof *sm->channels);
    size_t i;
    json_array_foreach(json_is_array(list) ? list : NULL, i, in) {
        char *ip = zt_strdupf("ProcessingInputs[%zu]", i);
        if (!json_is_object(in))
            ERR(c, ip, in, "expected an input object");
        else if (s_input(c, in, ip, names, locals, &sm->channels[sm->nchannels]))
            sm->nchannels++;
        free(ip);
    }
    json_decref(names);
}

/* ProcessingOutputConfig: every output, into sm's outputs. */
static void s_outputs(zt_spec_ctx_t *c, json_t *root, zt_sm_plan_t *sm, json_t *locals)
{
    const char *cp = "ProcessingOutputConfig";
    json_t *cfg = zt_sf_obj(c, root, "", cp), *list = cfg ? json_object_get(cfg, "Outputs") : NULL, *o;
    static const char *const cknown[] = { "Outputs", "KmsKeyId", NULL };
    if (cfg)
        zt_sf_unknown_fields(c, cfg, cp, cknown);
    if (cfg && json_object_get(cfg, "KmsKeyId"))
        WARN(c, "ProcessingOutputConfig.KmsKeyId", NULL, "ignored: the outputs are files of yours (0600)");
    if (cfg && !json_is_array(list))
        ERR(c, "ProcessingOutputConfig.Outputs", list, "required: an array of outputs");
    sm->outputs = calloc(json_array_size(list) + 1, sizeof *sm->outputs);
    json_t *names = json_object();
    size_t i;
    json_array_foreach(json_is_array(list) ? list : NULL, i, o) {
        char *op = zt_strdupf("ProcessingOutputConfig.Outputs[%zu]", i), *sp = zt_sf_path(op, "S3Output");
        static const char *const known[] = { "OutputName", "S3Output", "FeatureStoreOutput", "AppManaged", NULL };
        json_t *s3 = json_is_object(o) ? zt_sf_obj(c, o, op, "S3Output") : NULL;
        const char *name = NULL, *uri = NULL;
        char *local = NULL, *up = zt_sf_path(sp, "S3Uri");
        if (!json_is_object(o))
            ERR(c, op, o, "expected an output object");
        else {
            zt_sf_unknown_fields(c, o, op, known);
            name = s_name(c, o, op, "OutputName", names);
            if (json_object_get(o, "FeatureStoreOutput"))
                ERR(c, op, NULL, "FeatureStoreOutput: not here (no SageMaker Feature Store); give S3Output");
            if (zt_sf_bool(c, o, op, "AppManaged", false))
                ERR(c, op, NULL, "AppManaged: not here: ztrain uploads every output from its LocalPath");
            if (!s3 && !json_object_get(o, "FeatureStoreOutput"))
                ERR(c, sp, NULL, "required: S3Uri (a local folder or file:// here) and LocalPath");
        }
        if (s3) {
            static const char *const sknown[] = { "S3Uri", "LocalPath", "S3UploadMode", NULL };
            zt_sf_unknown_fields(c, s3, sp, sknown);
            if (!(uri = zt_sf_str(c, s3, sp, "S3Uri", NULL)))
                ERR(c, up, NULL, "required: the folder the hosts' files go to (a local path or file:// here)");
            local = s_local(c, s3, sp, locals);
            s_only(c, s3, sp, "S3UploadMode", "EndOfJob", "the outputs are uploaded once, when every host's "
                   "program has ended (Continuous uploading is not done)");
        }
        char *dest = uri ? zt_sf_local_path(c, up, uri) : NULL;
        if (name && local && dest)
            sm->outputs[sm->noutputs++] = (zt_sm_output_t) { strdup(name), local, zt_sm_absolute(dest) };
        else {
            free(local);
            free(dest);
        }
        free(up);
        free(sp);
        free(op);
    }
    json_decref(names);
}

/* ProcessingResources.ClusterConfig: the hosts' type and count. */
static long long s_cluster(zt_spec_ctx_t *c, json_t *root, zt_pool_t *primary)
{
    json_t *pr = zt_sf_obj(c, root, "", "ProcessingResources");
    json_t *cc = pr ? zt_sf_obj(c, pr, "ProcessingResources", "ClusterConfig") : NULL;
    const char *cp = "ProcessingResources.ClusterConfig";
    if (!cc) {
        ERR(c, pr ? cp : "ProcessingResources", NULL, "required: ClusterConfig with InstanceCount and InstanceType");
        return 1;
    }
    static const char *const known[] = { "InstanceCount", "InstanceType", "VolumeSizeInGB", "VolumeKmsKeyId", NULL };
    zt_sf_unknown_fields(c, cc, cp, known);
    static const char *const pknown[] = { "ClusterConfig", NULL };
    zt_sf_unknown_fields(c, pr, "ProcessingResources", pknown);
    long long count = zt_sf_int(c, cc, cp, "InstanceCount", 1, 1, zt_knob_int(ZT_KNOB_MAX_REPLICAS),
                                "hosts on one machine; ZT_MAX_REPLICAS raises it", NULL);
    const char *type = zt_sf_str(c, cc, cp, "InstanceType", NULL);
    char *tp = zt_sf_path(cp, "InstanceType");
    json_t *tv = type ? json_string(type) : NULL;
    if (!type)
        ERR(c, tp, NULL, "required: a SageMaker instance type such as ml.m5.xlarge");
    else if (strncmp(type, "ml.", 3) || !zt_machine_lookup(type, &primary->machine))
        ERR(c, tp, tv, "unknown SageMaker instance type (known: %s)", zt_ml_names());
    else
        zt_sf_check_machine(c, primary, type, tp, NULL, NULL, 0, false, NULL);
    json_decref(tv);
    free(tp);
    primary->disk_gb = (int) zt_sf_int(c, cc, cp, "VolumeSizeInGB", 30, 1, 16384, "SageMaker's largest volume", NULL);
    snprintf(primary->disk_type, sizeof primary->disk_type, "ebs");
    if (json_object_get(cc, "VolumeKmsKeyId"))
        WARN(c, "ProcessingResources.ClusterConfig.VolumeKmsKeyId", NULL, "ignored: the hosts' folders are yours");
    return count;
}

/* AppSpecification: the program (ContainerEntrypoint, or an image naming a
 * ztrain role) and ContainerArguments. */
static void s_program(zt_spec_ctx_t *c, json_t *root, zt_pool_t *pool)
{
    const char *ap = "AppSpecification";
    json_t *app = zt_sf_obj(c, root, "", ap);
    if (!app) {
        ERR(c, ap, NULL, "required: ImageUri and the command (ContainerEntrypoint)");
        return;
    }
    static const char *const known[] = { "ImageUri", "ContainerEntrypoint", "ContainerArguments", NULL };
    zt_sf_unknown_fields(c, app, ap, known);
    const char *image = zt_sf_str(c, app, ap, "ImageUri", NULL);
    if (image)
        pool->image_uri = strdup(image);
    zt_sf_str_array(c, app, ap, "ContainerEntrypoint", pool->argv);
    if (json_array_size(pool->argv) == 0 && (pool->role = zt_sf_image_role(image, 0)) != ZT_ROLE_NONE)
        json_array_append_new(pool->argv, json_string(zt_role_binary(pool->role)));
    else if (json_array_size(pool->argv) == 0)
        ERR(c, "AppSpecification.ContainerEntrypoint", NULL, "required: the image%s%s%s is not pulled here, so "
            "give the command it would run", image ? " '" : "", image ? image : "", image ? "'" : "");
    zt_sf_str_array(c, app, ap, "ContainerArguments", pool->argv);
}

/* Environment: a map of strings, the hosts' variables. */
static void s_environment(zt_spec_ctx_t *c, json_t *root, zt_pool_t *pool)
{
    json_t *m = zt_sf_obj(c, root, "", "Environment"), *v;
    const char *k;
    json_object_foreach(m, k, v) {
        char *ep = zt_sf_path("Environment", k);
        if (!json_is_string(v))
            ERR(c, ep, v, "expected a string (SageMaker's maps hold strings only)");
        else if (!zt_sf_env_name_ok(k))
            ERR(c, ep, NULL, "not a valid environment variable name");
        else
            json_array_append_new(pool->env, json_pack("[s, s]", k, json_string_value(v)));
        free(ep);
    }
}

void zt_processing_parse(zt_spec_ctx_t *c, json_t *root)
{
    static const char *const known[] = { "ProcessingJobName", "ProcessingResources", "AppSpecification",
        "Environment", "ProcessingInputs", "ProcessingOutputConfig", "StoppingCondition", "RoleArn", "NetworkConfig",
        "Tags", "ExperimentConfig", NULL };
    zt_sf_unknown_fields(c, root, "", known);
    zt_plan_t *plan = c->plan;
    zt_sm_plan_t *sm = zt_sm_plan_new(plan);
    sm->processing = true;
    zt_sm_job_name(c, root, "ProcessingJobName", "processing-job", sm);
    for (size_t i = 0; i < sizeof s_not_here / sizeof *s_not_here; i++)
        if (json_object_get(root, s_not_here[i][0]))
            WARN(c, s_not_here[i][0], NULL, "ignored: %s", s_not_here[i][1]);
    zt_pool_t *primary = &plan->pools[0];
    primary->present = true;
    primary->replicas = 1;
    long long count = s_cluster(c, root, primary);
    s_program(c, root, primary);
    s_environment(c, root, primary);
    if (count > 1) /* algo-2..N: the same hosts running the same program */
        zt_sm_copy_pool(&plan->pools[1], primary, (int) count - 1);
    json_t *locals = json_object();
    s_inputs(c, root, sm, locals);
    s_outputs(c, root, sm, locals);
    json_decref(locals);
    json_t *stop = zt_sf_obj(c, root, "", "StoppingCondition");
    plan->timeout_field = "StoppingCondition.MaxRuntimeInSeconds";
    plan->timeout_s = stop ? (double) zt_sf_int(c, stop, "StoppingCondition", "MaxRuntimeInSeconds", 86400, 1, 604800,
                                                "SageMaker's limit for processing, 7 days", NULL)
                           : 86400; /* SageMaker's default */
    plan->tf_master = false;
    plan->job = json_deep_copy(root);
}
