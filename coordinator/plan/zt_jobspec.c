#include "plan/zt_spec_int.h"
#include "base/zt_util.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_knobs.h"
#include "plan/zt_cuda_probe.h"
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* -------------------------------------------------------------- overrides */

static const char *const s_pool_spec_keys[][2] = {
    { "machine-type", "machineSpec.machineType" },
    { "replica-count", "replicaCount" },
    { "accelerator-type", "machineSpec.acceleratorType" },
    { "accelerator-count", "machineSpec.acceleratorCount" },
    { "container-image-uri", "containerSpec.imageUri" },
    { "executor-image-uri", "pythonPackageSpec.executorImageUri" },
    { "python-module", "pythonPackageSpec.pythonModule" },
    { "local-package-path", "pythonPackageSpec.packageUris" },
    { "disk-type", "diskSpec.bootDiskType" },
    { "disk-size", "diskSpec.bootDiskSizeGb" },
};

/* Legacy flags: flag, trainingInput field path, kind (s string, i integer,
 * a accelerator "count=N,type=T", l list of one string, u upper-case string). */
static const char *const s_training_input_flags[][3] = {
    { "--scale-tier", "scaleTier", "u" },
    { "--master-machine-type", "masterType", "s" },
    { "--master-accelerator", "masterConfig.acceleratorConfig", "a" },
    { "--master-image-uri", "masterConfig.imageUri", "s" },
    { "--worker-count", "workerCount", "i" },
    { "--worker-machine-type", "workerType", "s" },
    { "--worker-accelerator", "workerConfig.acceleratorConfig", "a" },
    { "--worker-image-uri", "workerConfig.imageUri", "s" },
    { "--parameter-server-count", "parameterServerCount", "i" },
    { "--parameter-server-machine-type", "parameterServerType", "s" },
    { "--parameter-server-accelerator", "parameterServerConfig.acceleratorConfig", "a" },
    { "--parameter-server-image-uri", "parameterServerConfig.imageUri", "s" },
    { "--evaluator-count", "evaluatorCount", "i" },
    { "--evaluator-machine-type", "evaluatorType", "s" },
    { "--evaluator-accelerator", "evaluatorConfig.acceleratorConfig", "a" },
    { "--evaluator-image-uri", "evaluatorConfig.imageUri", "s" },
    { "--module-name", "pythonModule", "s" },
    { "--package-path", "packageUris", "l" },
    { "--use-chief-in-tf-config", "useChiefInTfConfig", "b" },
};

const char *zt_plan_override_flag(int i)
{
    int n = (int) (sizeof s_training_input_flags / sizeof *s_training_input_flags);
    if (i == 0)
        return "--worker-pool-spec";
    if (i == 1)
        return "--display-name";
    return i - 2 < n && i >= 2 ? s_training_input_flags[i - 2][0] : NULL;
}

const char *zt_plan_override_help(void)
{
    return
        "Overrides (win over the file):\n"
        "  --worker-pool-spec=KEY=VAL,...  once per pool, in order; keys: machine-type,\n"
        "        replica-count, accelerator-type, accelerator-count, container-image-uri,\n"
        "        executor-image-uri, python-module, local-package-path, disk-type, disk-size\n"
        "  --display-name=NAME\n"
        "  legacy trainingInput: --scale-tier, --master-machine-type, --master-accelerator\n"
        "        count=N,type=T, --master-image-uri, --worker-count, --worker-machine-type,\n"
        "        --worker-accelerator, --worker-image-uri, --parameter-server-count,\n"
        "        --parameter-server-machine-type, --parameter-server-accelerator,\n"
        "        --parameter-server-image-uri, --evaluator-count, --evaluator-machine-type,\n"
        "        --evaluator-accelerator, --evaluator-image-uri, --module-name, --package-path,\n"
        "        --use-chief-in-tf-config=true|false\n";
}

/* Sets obj[dotted path] = v (creating objects), recording the flag. */
static void s_set_path(zt_doc_t *doc, json_t *obj, const char *prefix, const char *dotted,
                       json_t *v, const char *flag)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", dotted);
    char *save, *tok = strtok_r(buf, ".", &save);
    while (tok) {
        char *next = strtok_r(NULL, ".", &save);
        if (!next) {
            json_object_set_new(obj, tok, v);
            break;
        }
        json_t *child = json_object_get(obj, tok);
        if (!json_is_object(child)) {
            child = json_object();
            json_object_set_new(obj, tok, child);
        }
        obj = child;
        tok = next;
    }
    char *full = zt_strdupf("%s%s%s", prefix, *prefix ? "." : "", dotted);
    zt_doc_set_origin(doc, full, flag);
    free(full);
}

static json_t *s_flag_int_or_string(const char *v)
{
    long long n;
    return zt_parse_int(v, &n) ? json_integer(n) : json_string(v);
}

/* One --worker-pool-spec KEY=VALUE,... (the pool-th on the command line)
 * into spec's workerPoolSpecs[pool]. */
static void s_apply_pool_flag(zt_spec_ctx_t *c, json_t *spec, const char *prefix, int pool, const char *val)
{
    char flag[64];
    snprintf(flag, sizeof flag, "--worker-pool-spec #%d", pool + 1);
    json_t *pools = json_object_get(spec, "workerPoolSpecs");
    if (!json_is_array(pools)) {
        pools = json_array();
        json_object_set_new(spec, "workerPoolSpecs", pools);
    }
    while ((int) json_array_size(pools) <= pool)
        json_array_append_new(pools, json_object());
    json_t *ps = json_array_get(pools, pool);
    char *pp = zt_strdupf("%s%sworkerPoolSpecs[%d]", prefix, *prefix ? "." : "", pool);
    if (!json_is_object(ps)) {
        ps = json_object();
        json_array_set_new(pools, pool, ps);
    }
    char *dup = strdup(val), *save = NULL;
    for (char *kv = strtok_r(dup, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        const char *field = NULL;
        if (eq) {
            *eq = 0;
            for (size_t k = 0; k < sizeof s_pool_spec_keys / sizeof *s_pool_spec_keys; k++)
                if (!strcmp(kv, s_pool_spec_keys[k][0]))
                    field = s_pool_spec_keys[k][1];
        }
        if (!field) {
            zt_diag_add(c->diag, true, "command line", 0, 0, flag, NULL,
                        "'%s' is not KEY=VALUE with a known key (machine-type, "
                        "replica-count, accelerator-type, accelerator-count, "
                        "container-image-uri, executor-image-uri, python-module, "
                        "local-package-path, disk-type, disk-size)", kv);
            continue;
        }
        json_t *jv;
        if (!strcmp(kv, "replica-count") || !strcmp(kv, "accelerator-count") || !strcmp(kv, "disk-size"))
            jv = s_flag_int_or_string(eq + 1);
        else if (!strcmp(kv, "local-package-path"))
            jv = json_pack("[s]", eq + 1);
        else
            jv = json_string(eq + 1);
        char flagkey[96];
        snprintf(flagkey, sizeof flagkey, "%s %s", flag, kv);
        s_set_path(c->doc, ps, pp, field, jv, flagkey);
    }
    free(dup);
    free(pp);
}

/* A legacy flag's value as its field takes it, by the flag's kind (the
 * third column of s_training_input_flags): i an integer, l a list of one, b a
 * boolean, u upper case, a an accelerator (count=N,type=TYPE), else text. */
static json_t *s_training_input_flag_value(zt_spec_ctx_t *c, char kind, const char *name, const char *val)
{
    if (kind == 'i')
        return s_flag_int_or_string(val);
    if (kind == 'l')
        return json_pack("[s]", val);
    if (kind == 'b')
        return !strcasecmp(val, "true") || !strcmp(val, "1")    ? json_true()
               : !strcasecmp(val, "false") || !strcmp(val, "0") ? json_false()
                                                                 : json_string(val);
    if (kind == 'u') {
        char up[64];
        snprintf(up, sizeof up, "%s", val);
        for (char *p = up; *p; p++)
            *p = (char) toupper((unsigned char) *p);
        return json_string(up);
    }
    if (kind != 'a')
        return json_string(val);
    json_t *jv = json_object();
    char *dup = strdup(val), *save = NULL;
    for (char *kv = strtok_r(dup, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (eq && !strncmp(kv, "count", 5) && eq == kv + 5)
            json_object_set_new(jv, "count", s_flag_int_or_string(eq + 1));
        else if (eq && !strncmp(kv, "type", 4) && eq == kv + 4)
            json_object_set_new(jv, "type", json_string(eq + 1));
        else
            zt_diag_add(c->diag, true, "command line", 0, 0, name, val, "expected count=N,type=TYPE");
    }
    free(dup);
    return jv;
}

void zt_sf_apply_flags(zt_spec_ctx_t *c, json_t *spec, const char *prefix, bool training_input,
                          json_t *flags)
{
    size_t i;
    json_t *f;
    int pool = 0;
    json_array_foreach(flags, i, f) {
        const char *name = json_string_value(json_array_get(f, 0));
        const char *val = json_string_value(json_array_get(f, 1));
        if (!strcmp(name, "--display-name")) {
            zt_doc_set_origin(c->doc, "displayName", name);
            free(c->plan->display_name);
            c->plan->display_name = strdup(val);
            continue;
        }
        if (!strcmp(name, "--worker-pool-spec")) {
            if (training_input) {
                zt_diag_add(c->diag, true, "command line", 0, 0, NULL, NULL,
                            "--worker-pool-spec applies to a Vertex CustomJobSpec; %s is a legacy "
                            "trainingInput config (use --worker-count, --worker-machine-type...)",
                            c->doc->source);
                return;
            }
            s_apply_pool_flag(c, spec, prefix, pool++, val);
            continue;
        }
        size_t k;
        for (k = 0; k < sizeof s_training_input_flags / sizeof *s_training_input_flags; k++)
            if (!strcmp(name, s_training_input_flags[k][0]))
                break;
        if (k == sizeof s_training_input_flags / sizeof *s_training_input_flags)
            continue;
        if (!training_input) {
            zt_diag_add(c->diag, true, "command line", 0, 0, NULL, NULL,
                        "%s applies to a legacy trainingInput config; %s is a Vertex "
                        "CustomJobSpec (use --worker-pool-spec)", name, c->doc->source);
            continue;
        }
        json_t *jv = s_training_input_flag_value(c, s_training_input_flags[k][2][0], name, val);
        char *pp = zt_strdupf("%s", prefix);
        s_set_path(c->doc, spec, pp, s_training_input_flags[k][1], jv, name);
        free(pp);
    }
}

/* ------------------------------------------------------------------- plan */

bool zt_sf_training_input_flags(json_t *flags)
{
    size_t i;
    json_t *f;
    json_array_foreach(flags, i, f) {
        const char *n = json_string_value(json_array_get(f, 0));
        if (strcmp(n, "--worker-pool-spec") && strcmp(n, "--display-name"))
            return true;
    }
    return false;
}

zt_plan_t *zt_plan_new(const char *source)
{
    zt_plan_t *plan = calloc(1, sizeof *plan);
    for (int i = 0; i < ZT_POOLS; i++)
        zt_sf_pool_init(&plan->pools[i]);
    plan->source = strdup(source);
    return plan;
}

void zt_plan_finish(zt_plan_t *plan, const zt_plan_opts_t *opts, zt_diag_t *diag)
{
    if (opts->tf_chief_name) {
        if (!strcmp(opts->tf_chief_name, "master"))
            plan->tf_master = true;
        else if (!strcmp(opts->tf_chief_name, "chief"))
            plan->tf_master = false;
        else
            zt_diag_add(diag, true, "command line (--tf-chief-name)", 0, 0, NULL, NULL,
                        "'%s': expected chief or master", opts->tf_chief_name);
    }
    /* Arguments after "--" (a trial's parameters among them) go to the
     * training program of pools 0 and 1, and to any user program in pools 2
     * and 3; ztrain's own parameter server, reducer and evaluator take none. */
    for (int p = 0; p < ZT_POOLS; p++)
        if (plan->pools[p].present && (p < 2 || plan->pools[p].role == ZT_ROLE_NONE))
            for (int a = 0; a < opts->n_user_args; a++)
                json_array_append_new(plan->pools[p].argv, json_string(opts->user_args[a]));
}

void zt_plan_destroy(zt_plan_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zt_plan_t *self = *self_p;
    for (int i = 0; i < ZT_POOLS; i++) {
        json_decref(self->pools[i].argv);
        json_decref(self->pools[i].env);
        free(self->pools[i].image_uri);
        free(self->pools[i].python_path);
    }
    free(self->source);
    free(self->format);
    free(self->display_name);
    free(self->scale_tier);
    free(self->base_output_dir);
    json_decref(self->job);
    if (self->own && self->own_ops)
        self->own_ops->destroy(self->own);
    free(self);
    *self_p = NULL;
}

int zt_plan_replicas(const zt_plan_t *self)
{
    int n = 0;
    for (int i = 0; i < ZT_POOLS; i++)
        if (self->pools[i].present)
            n += self->pools[i].replicas;
    return n;
}

int zt_plan_check_gpus(zt_plan_t *self, int gpus_found, bool cpu_only, zt_diag_t *diag)
{
    int asked = 0;
    char detail[512] = "";
    for (int i = 0; i < ZT_POOLS; i++) {
        const zt_pool_t *p = &self->pools[i];
        if (!p->present || p->accel_count == 0)
            continue;
        asked += p->accel_count * p->replicas;
        snprintf(detail + strlen(detail), sizeof detail - strlen(detail), "%sworkerpool%d: %d x %d %s",
                 detail[0] ? ", " : "", i, p->replicas, p->accel_count, p->accel_type);
    }
    if (asked > 0 && !cpu_only && !zt_have_cuda_build())
        zt_diag_add(diag, true, self->source, 0, 0, NULL, NULL,
                    "%d GPU%s asked for (%s) but this ztrain was built without CUDA (the toolkit was "
                    "not found at build time), or installed without its CUDA module (make wheel "
                    "WHEEL_CUDA=1 carries it); rebuild with the CUDA toolkit, or pass --cpu-only",
                    asked, asked == 1 ? "" : "s", detail);
    else if (asked > gpus_found && !cpu_only)
        zt_diag_add(diag, true, self->source, 0, 0, NULL, NULL,
                    "%d GPU%s asked for (%s) but %d found on this machine; pass --cpu-only to run "
                    "the job without GPUs", asked, asked == 1 ? "" : "s", detail, gpus_found);
    return asked;
}

static const char *s_pool_title(int i)
{
    static const char *t[ZT_POOLS] = { "primary", "workers", "parameter servers / reducers",
                                       "evaluators" };
    return t[i];
}

json_t *zt_plan_to_json(const zt_plan_t *self)
{
    json_t *pools = json_array();
    for (int i = 0; i < ZT_POOLS; i++) {
        const zt_pool_t *p = &self->pools[i];
        if (!p->present) {
            json_array_append_new(pools, json_null());
            continue;
        }
        json_t *env = json_object();
        size_t k;
        json_t *e;
        json_array_foreach(p->env, k, e)
            json_object_set(env, json_string_value(json_array_get(e, 0)), json_array_get(e, 1));
        json_array_append_new(pools, json_pack(
            "{s:s, s:s, s:i, s:s, s:s, s:i, s:f, s:s?, s:i, s:s, s:i, s:s?, s:s?, s:O, s:o, s:s?}",
            "name", "", "title", s_pool_title(i),
            "replicaCount", p->replicas, "machineType", p->machine.name,
            "computeType", p->machine.compute, "vcpus", p->machine.vcpus,
            "memoryGb", p->machine.memory_gb,
            "acceleratorType", p->accel_count ? p->accel_type : NULL,
            "acceleratorCount", p->accel_count, "diskType", p->disk_type, "diskSizeGb", p->disk_gb,
            "imageUri", p->image_uri, "role", zt_role_binary(p->role), "command", p->argv,
            "env", env, "pythonPath", p->python_path));
        json_object_set_new(json_array_get(pools, (size_t) i), "name",
                            json_sprintf("workerpool%d", i));
        if (p->elastic_min)
            json_object_set_new(json_array_get(pools, (size_t) i), "elasticPolicy",
                                json_pack("{s:i, s:i}", "minReplicaCount", p->elastic_min, "maxReplicaCount",
                                          p->elastic_max));
    }
    json_t *o = json_pack("{s:s, s:s, s:s, s:s?, s:o, s:s?, s:f, s:b, s:b, s:b, s:s, s:i}",
                          "source", self->source, "format", self->format, "displayName",
                          self->display_name, "scaleTier", self->scale_tier, "pools", pools,
                          "baseOutputDirectory", self->base_output_dir, "timeoutSeconds",
                          self->timeout_s, "restartJobOnWorkerRestart",
                          self->restart_job_on_worker_restart, "disableRetries", self->disable_retries,
                          "spot", self->spot, "tfConfigChief", self->tf_master ? "master" : "chief", "replicas",
                          zt_plan_replicas(self));
    if (self->own && self->own_ops)
        json_object_set_new(o, self->own_ops->key, self->own_ops->to_json(self->own));
    return o;
}

void zt_plan_print(const zt_plan_t *self, FILE *out)
{
    fprintf(out, "job %s (%s from %s)%s%s\n", self->display_name, self->format, self->source,
            self->scale_tier ? ", scale tier " : "", self->scale_tier ? self->scale_tier : "");
    for (int i = 0; i < ZT_POOLS; i++) {
        const zt_pool_t *p = &self->pools[i];
        if (!p->present) {
            fprintf(out, "  workerpool%d (%s): none\n", i, s_pool_title(i));
            continue;
        }
        fprintf(out, "  workerpool%d (%s): %d x %s (%d vCPU, %.1f GB", i, s_pool_title(i),
                p->replicas, p->machine.name, p->machine.vcpus, p->machine.memory_gb);
        if (p->accel_count)
            fprintf(out, ", %d x %s", p->accel_count, p->accel_type);
        fprintf(out, ", %d GB %s)\n", p->disk_gb, p->disk_type);
        if (p->elastic_min)
            fprintf(out, "    elastic: %d to %d replicas\n", p->elastic_min, p->elastic_max);
        fprintf(out, "    command:");
        size_t k;
        json_t *a;
        json_array_foreach(p->argv, k, a)
            fprintf(out, " %s", json_string_value(a));
        fprintf(out, "\n");
        json_array_foreach(p->env, k, a)
            fprintf(out, "    env: %s=%s\n", json_string_value(json_array_get(a, 0)),
                    json_string_value(json_array_get(a, 1)));
        if (p->python_path)
            fprintf(out, "    PYTHONPATH+: %s\n", p->python_path);
    }
    fprintf(out, "  output: %s\n", self->base_output_dir ? self->base_output_dir : "(the job directory)");
    if (self->own && self->own_ops && self->own_ops->print)
        self->own_ops->print(self->own, out);
    fprintf(out, "  scheduling: timeout %s, restartJobOnWorkerRestart %s, retries %s%s; "
            "TF_CONFIG names pool 0 \"%s\"\n",
            self->timeout_s > 0 ? "set" : "none",
            self->restart_job_on_worker_restart ? "true" : "false",
            self->disable_retries ? "off" : "on", self->spot ? ", spot" : "", self->tf_master ? "master" : "chief");
    if (self->timeout_s > 0)
        fprintf(out, "  timeout: %.0fs\n", self->timeout_s);
}
