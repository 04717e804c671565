#include "spec/zt_jobspec.h"
#include "spec/zt_doc.h"
#include "base/zt_util.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_knobs.h"
#include "launch/zt_cuda_probe.h"
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* ---------------------------------------------------------------- helpers */

typedef struct {
    zt_doc_t *doc;       /* the document (positions, origins) */
    zt_diag_t *diag;     /* where problems go */
    zt_plan_t *plan;     /* what is being built */
} s_ctx_t;

#define ERR(c, path, val, ...)  zt_doc_report((c)->doc, (c)->diag, 1, (path), (val), __VA_ARGS__)
#define WARN(c, path, val, ...) zt_doc_report((c)->doc, (c)->diag, 0, (path), (val), __VA_ARGS__)

static char *s_path(const char *base, const char *key)
{
    return zt_strdupf("%s%s%s", base, *base ? "." : "", key);
}

static void s_unknown_fields(s_ctx_t *c, json_t *obj, const char *path, const char *const *known)
{
    zt_doc_warn_unknown(c->doc, c->diag, obj, path, known);
}

/* An object field: NULL when absent; an error when present but not an object. */
static json_t *s_obj(s_ctx_t *c, json_t *parent, const char *path, const char *key)
{
    json_t *v = json_object_get(parent, key);
    if (!v || json_is_null(v))
        return NULL;
    if (!json_is_object(v)) {
        char *p = s_path(path, key);
        ERR(c, p, v, "expected an object");
        free(p);
        return NULL;
    }
    return v;
}

/* A string field; def when absent. */
static const char *s_str(s_ctx_t *c, json_t *parent, const char *path, const char *key,
                         const char *def)
{
    json_t *v = json_object_get(parent, key);
    if (!v || json_is_null(v))
        return def;
    if (!json_is_string(v)) {
        char *p = s_path(path, key);
        ERR(c, p, v, "expected a string");
        free(p);
        return def;
    }
    return json_string_value(v);
}

/* An integer field (int64 fields may be strings in proto3 JSON); within
 * [min, max]; *present tells whether it was given. */
static long long s_int(s_ctx_t *c, json_t *parent, const char *path, const char *key,
                       long long def, long long min, long long max, const char *why_max,
                       bool *present)
{
    json_t *v = json_object_get(parent, key);
    if (present)
        *present = v && !json_is_null(v);
    if (!v || json_is_null(v))
        return def;
    char *p = s_path(path, key);
    long long n = def;
    if (json_is_integer(v))
        n = json_integer_value(v);
    else if (json_is_string(v) && zt_parse_int(json_string_value(v), &n))
        ;
    else {
        ERR(c, p, v, "expected an integer");
        free(p);
        return def;
    }
    if (n < min)
        ERR(c, p, v, "must be at least %lld", min);
    else if (n > max)
        ERR(c, p, v, "must be at most %lld (%s)", max, why_max);
    free(p);
    return n < min || n > max ? def : n;
}

static bool s_bool(s_ctx_t *c, json_t *parent, const char *path, const char *key, bool def)
{
    json_t *v = json_object_get(parent, key);
    if (!v || json_is_null(v))
        return def;
    if (!json_is_boolean(v)) {
        char *p = s_path(path, key);
        ERR(c, p, v, "expected true or false");
        free(p);
        return def;
    }
    return json_is_true(v);
}

/* An array of strings, appended to out. */
static void s_str_array(s_ctx_t *c, json_t *parent, const char *path, const char *key, json_t *out)
{
    json_t *v = json_object_get(parent, key);
    if (!v || json_is_null(v))
        return;
    char *p = s_path(path, key);
    if (!json_is_array(v))
        ERR(c, p, v, "expected a list of strings");
    else {
        size_t i;
        json_t *s;
        json_array_foreach(v, i, s) {
            if (json_is_string(s))
                json_array_append(out, s);
            else if (json_is_number(s) || json_is_boolean(s)) {
                /* YAML turns 0.1 or true into non-strings; pass them on as text. */
                char *t = json_dumps(s, JSON_ENCODE_ANY);
                json_array_append_new(out, json_string(t));
                free(t);
            }
            else {
                char *ip = zt_strdupf("%s[%zu]", p, i);
                ERR(c, ip, s, "expected a string");
                free(ip);
            }
        }
    }
    free(p);
}

static bool s_env_name_ok(const char *n)
{
    if (!n || !(isalpha((unsigned char) *n) || *n == '_'))
        return false;
    for (; *n; n++)
        if (!(isalnum((unsigned char) *n) || *n == '_'))
            return false;
    return true;
}

/* env[{name, value}] appended to out as [name, value] pairs. */
static void s_env(s_ctx_t *c, json_t *parent, const char *path, json_t *out)
{
    json_t *v = json_object_get(parent, "env");
    if (!v || json_is_null(v))
        return;
    char *p = s_path(path, "env");
    if (!json_is_array(v))
        ERR(c, p, v, "expected a list of {name, value}");
    else {
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) {
            char *ip = zt_strdupf("%s[%zu]", p, i);
            const char *name = json_string_value(json_object_get(e, "name"));
            json_t *val = json_object_get(e, "value");
            if (!json_is_object(e))
                ERR(c, ip, e, "expected {\"name\": ..., \"value\": ...}");
            else if (!s_env_name_ok(name)) {
                char *np = s_path(ip, "name");
                ERR(c, np, json_object_get(e, "name"),
                    "an environment variable name is letters, digits and _, not starting with a digit");
                free(np);
            }
            else {
                char *t = json_is_string(val) ? strdup(json_string_value(val))
                          : val ? json_dumps(val, JSON_ENCODE_ANY) : strdup("");
                int knob = zt_knob_find(name);
                char why[512];
                if (knob >= 0 && zt_knob_check_value((zt_knob_t) knob, t, why, sizeof why) != ZT_OK) {
                    char *vp = s_path(ip, "value");
                    ERR(c, vp, val, "%s", why);
                    free(vp);
                }
                json_array_append_new(out, json_pack("[ss]", name, t));
                free(t);
            }
            free(ip);
        }
    }
    free(p);
}

/* "file:///x" -> "/x"; gs:// and other remote schemes are refused. */
static char *s_local_path(s_ctx_t *c, const char *path, const char *uri)
{
    if (!strncmp(uri, "file://", 7))
        return strdup(uri + 7);
    if (strstr(uri, "://")) {
        json_t *v = json_string(uri);
        ERR(c, path, v, "only local paths and file:// URIs are available on this machine");
        json_decref(v);
        return NULL;
    }
    return strdup(uri);
}

/* The ztrain role an image URI names: ".../ztrain-worker:tag" -> WORKER; the
 * Vertex Reduction Server image -> REDUCER; "ztrain" -> the pool's default. */
static zt_role_t s_pool_default_role(int pool)
{
    static const zt_role_t d[ZT_POOLS] = { ZT_ROLE_WORKER, ZT_ROLE_WORKER, ZT_ROLE_PARAMSERVER,
                                           ZT_ROLE_EVALUATOR };
    return d[pool];
}

static zt_role_t s_image_role(const char *uri, int pool)
{
    if (!uri)
        return ZT_ROLE_NONE;
    const char *base = strrchr(uri, '/');
    base = base ? base + 1 : uri;
    size_t n = strcspn(base, ":@");
    static const struct { const char *name; zt_role_t role; } names[] = {
        { "ztrain-worker", ZT_ROLE_WORKER },       { "ztrain-paramserver", ZT_ROLE_PARAMSERVER },
        { "ztrain-reducer", ZT_ROLE_REDUCER },     { "ztrain-evaluator", ZT_ROLE_EVALUATOR },
        { "reductionserver", ZT_ROLE_REDUCER },
    };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strlen(names[i].name) == n && !strncmp(base, names[i].name, n))
            return names[i].role;
    if (n == 6 && !strncmp(base, "ztrain", 6))
        return s_pool_default_role(pool);
    return ZT_ROLE_NONE;
}

const char *zt_role_binary(zt_role_t role)
{
    switch (role) {
    case ZT_ROLE_WORKER:      return "ztrain-worker";
    case ZT_ROLE_PARAMSERVER: return "ztrain-paramserver";
    case ZT_ROLE_REDUCER:     return "ztrain-reducer";
    case ZT_ROLE_EVALUATOR:   return "ztrain-evaluator";
    default:                  return NULL;
    }
}

/* Machine type, accelerator type and count, checked against the tables. */
static void s_check_machine(s_ctx_t *c, zt_pool_t *pool, const char *mt, const char *mt_path,
                            const char *acc, const char *acc_path, long long count,
                            bool count_given, const char *count_path)
{
    json_t *mv = mt ? json_string(mt) : NULL;
    if (!mt)
        ERR(c, mt_path, NULL, "required: the machine type of this pool (e.g. n1-standard-4)");
    else if (!zt_machine_lookup(mt, &pool->machine))
        ERR(c, mt_path, mv,
            "unknown machine type (n1-standard-*, n1-highmem-*, n1-highcpu-*, n2-*, e2-*, c2-*, "
            "a2-highgpu-*, a2-megagpu-16g, a2-ultragpu-*, a3-highgpu-*, g2-standard-*, or a legacy "
            "name such as standard, complex_model_m_gpu)");
    json_decref(mv);
    if (acc && (!*acc || !strcmp(acc, "ACCELERATOR_TYPE_UNSPECIFIED")))
        acc = NULL;
    json_t *av = acc ? json_string(acc) : NULL;
    json_t *cv = json_integer(count);
    if (acc && !zt_accel_canonical(acc, pool->accel_type, sizeof pool->accel_type)) {
        ERR(c, acc_path, av, "unknown accelerator type (known: %s)", zt_accel_names());
        pool->accel_type[0] = 0;
    }
    else if (acc) {
        if (!count_given)
            count = 1;
        if (pool->machine.builtin_accel)
            ERR(c, acc_path, av, "machine type %s already includes %d x %s; drop the accelerator "
                "fields or use a Compute Engine machine type", pool->machine.name,
                pool->machine.builtin_count, pool->machine.builtin_accel);
        else if (pool->machine.compute[0]) {
            char allowed[64];
            if (!zt_accel_allowed(pool->machine.compute, pool->accel_type, (int) count, allowed,
                                  sizeof allowed)) {
                if (allowed[0])
                    ERR(c, count_path, cv, "%s on %s allows %s", pool->accel_type,
                        pool->machine.compute, allowed);
                else
                    ERR(c, acc_path, av, "%s cannot be attached to %s (see the compatibility "
                        "table: A100 only on a2 types, H100 on a3, L4 on g2)",
                        pool->accel_type, pool->machine.compute);
            }
        }
        pool->accel_count = (int) count;
    }
    else if (count_given && count > 0)
        ERR(c, count_path, cv, "an accelerator count needs an accelerator type");
    int ngpu = 0;
    const char *comes = mt && !acc && !pool->machine.builtin_accel ? zt_machine_gpus(mt, &ngpu) : NULL;
    if (comes) /* as Vertex AI: the GPUs of an a2/a3/g2 type must be named */
        ERR(c, acc_path, NULL, "machine type %s comes with %d x %s: set acceleratorType %s and "
            "acceleratorCount %d", mt, ngpu, comes, comes, ngpu);
    if (!acc && pool->machine.builtin_accel) {
        snprintf(pool->accel_type, sizeof pool->accel_type, "%s", pool->machine.builtin_accel);
        pool->accel_count = pool->machine.builtin_count;
    }
    json_decref(av);
    json_decref(cv);
}

static void s_pool_init(zt_pool_t *pool)
{
    memset(pool, 0, sizeof *pool);
    pool->argv = json_array();
    pool->env = json_array();
}

/* argv += python3 -m MODULE */
static void s_python_module(zt_pool_t *pool, const char *module)
{
    json_t *cmd = json_pack("[sss]", "python3", "-m", module);
    json_array_extend(pool->argv, cmd);
    json_decref(cmd);
}

/* Adds packageUris as PYTHONPATH entries: local directories, .whl or .zip. */
static void s_package_uris(s_ctx_t *c, zt_pool_t *pool, json_t *parent, const char *path,
                           const char *key)
{
    json_t *uris = json_array();
    s_str_array(c, parent, path, key, uris);
    size_t i;
    json_t *u;
    json_array_foreach(uris, i, u) {
        char *ip = zt_strdupf("%s.%s[%zu]", path, key, i);
        char *lp = s_local_path(c, ip, json_string_value(u));
        struct stat st;
        if (lp) {
            size_t n = strlen(lp);
            bool archive = n > 4 && (!strcmp(lp + n - 4, ".whl") || !strcmp(lp + n - 4, ".zip"));
            if (stat(lp, &st) < 0)
                ERR(c, ip, u, "no such file or directory");
            else if (!S_ISDIR(st.st_mode) && !archive)
                ERR(c, ip, u, "give a directory, a .whl or a .zip (a source .tar.gz is not "
                    "installed locally: unpack it and give the directory)");
            else {
                char *old = pool->python_path;
                pool->python_path = old ? zt_strdupf("%s:%s", old, lp) : strdup(lp);
                free(old);
            }
        }
        free(lp);
        free(ip);
    }
    json_decref(uris);
}

/* -------------------------------------------------------------- overrides */

static const char *const s_vertex_keys[][2] = {
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
static const char *const s_legacy_flags[][3] = {
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

bool zt_plan_is_override_flag(const char *name)
{
    if (!strcmp(name, "--worker-pool-spec") || !strcmp(name, "--display-name"))
        return true;
    for (size_t i = 0; i < sizeof s_legacy_flags / sizeof *s_legacy_flags; i++)
        if (!strcmp(name, s_legacy_flags[i][0]))
            return true;
    return false;
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

/* Applies the override flags to the document; legacy selects the format. */
static void s_apply_flags(s_ctx_t *c, json_t *spec, const char *prefix, bool legacy,
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
            char flag[64];
            snprintf(flag, sizeof flag, "--worker-pool-spec #%d", pool + 1);
            if (legacy) {
                zt_diag_add(c->diag, true, "command line", 0, 0, NULL, NULL,
                            "--worker-pool-spec applies to a Vertex CustomJobSpec; %s is a legacy "
                            "trainingInput config (use --worker-count, --worker-machine-type...)",
                            c->doc->source);
                return;
            }
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
                    for (size_t k = 0; k < sizeof s_vertex_keys / sizeof *s_vertex_keys; k++)
                        if (!strcmp(kv, s_vertex_keys[k][0]))
                            field = s_vertex_keys[k][1];
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
                if (!strcmp(kv, "replica-count") || !strcmp(kv, "accelerator-count") ||
                    !strcmp(kv, "disk-size"))
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
            pool++;
            continue;
        }
        size_t k;
        for (k = 0; k < sizeof s_legacy_flags / sizeof *s_legacy_flags; k++)
            if (!strcmp(name, s_legacy_flags[k][0]))
                break;
        if (k == sizeof s_legacy_flags / sizeof *s_legacy_flags)
            continue;
        if (!legacy) {
            zt_diag_add(c->diag, true, "command line", 0, 0, NULL, NULL,
                        "%s applies to a legacy trainingInput config; %s is a Vertex "
                        "CustomJobSpec (use --worker-pool-spec)", name, c->doc->source);
            continue;
        }
        const char kind = s_legacy_flags[k][2][0];
        json_t *jv = NULL;
        if (kind == 'i')
            jv = s_flag_int_or_string(val);
        else if (kind == 'l')
            jv = json_pack("[s]", val);
        else if (kind == 'b')
            jv = !strcasecmp(val, "true") || !strcmp(val, "1") ? json_true()
                 : !strcasecmp(val, "false") || !strcmp(val, "0") ? json_false() : json_string(val);
        else if (kind == 'u') {
            char up[64];
            snprintf(up, sizeof up, "%s", val);
            for (char *p = up; *p; p++)
                *p = (char) toupper((unsigned char) *p);
            jv = json_string(up);
        }
        else if (kind == 'a') {
            jv = json_object();
            char *dup = strdup(val), *save = NULL;
            for (char *kv = strtok_r(dup, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
                char *eq = strchr(kv, '=');
                if (eq && !strncmp(kv, "count", 5) && eq == kv + 5)
                    json_object_set_new(jv, "count", s_flag_int_or_string(eq + 1));
                else if (eq && !strncmp(kv, "type", 4) && eq == kv + 4)
                    json_object_set_new(jv, "type", json_string(eq + 1));
                else
                    zt_diag_add(c->diag, true, "command line", 0, 0, name, json_string_value(
                                json_array_get(f, 1)), "expected count=N,type=TYPE");
            }
            free(dup);
        }
        else
            jv = json_string(val);
        char *pp = zt_strdupf("%s", prefix);
        s_set_path(c->doc, spec, pp, s_legacy_flags[k][1], jv, name);
        free(pp);
    }
}

/* ------------------------------------------------------------ Vertex spec */

static void s_vertex_program(s_ctx_t *c, int idx, zt_pool_t *pool, json_t *wps, const char *pp)
{
    char *csp = s_path(pp, "containerSpec");
    char *psp = s_path(pp, "pythonPackageSpec");
    json_t *cs = s_obj(c, wps, pp, "containerSpec");
    json_t *ps = s_obj(c, wps, pp, "pythonPackageSpec");
    if (cs && ps)
        ERR(c, psp, NULL, "give containerSpec or pythonPackageSpec, not both");
    else if (cs) {
        static const char *const known[] = { "imageUri", "command", "args", "env", NULL };
        s_unknown_fields(c, cs, csp, known);
        const char *image = s_str(c, cs, csp, "imageUri", NULL);
        if (image)
            pool->image_uri = strdup(image);
        else {
            char *ip = s_path(csp, "imageUri");
            ERR(c, ip, NULL, "required (locally it is not pulled, but it names the role when "
                "no command is given)");
            free(ip);
        }
        json_t *cmd = json_array();
        s_str_array(c, cs, csp, "command", cmd);
        if (json_array_size(cmd) > 0)
            json_array_extend(pool->argv, cmd);
        else if ((pool->role = s_image_role(image, idx)) != ZT_ROLE_NONE)
            json_array_append_new(pool->argv, json_string(zt_role_binary(pool->role)));
        else if (image) {
            char *ip = s_path(csp, "command");
            ERR(c, ip, NULL, "required: image '%s' is not pulled on this machine, so give the "
                "command to run (or an image naming a ztrain role: ztrain-worker, "
                "ztrain-paramserver, ztrain-reducer, ztrain-evaluator, reductionserver)", image);
            free(ip);
        }
        json_decref(cmd);
        s_str_array(c, cs, csp, "args", pool->argv);
        s_env(c, cs, csp, pool->env);
    }
    else if (ps) {
        static const char *const known[] = { "executorImageUri", "packageUris", "pythonModule",
                                             "args", "env", NULL };
        s_unknown_fields(c, ps, psp, known);
        const char *image = s_str(c, ps, psp, "executorImageUri", NULL);
        if (image)
            pool->image_uri = strdup(image);
        const char *module = s_str(c, ps, psp, "pythonModule", NULL);
        if (!module) {
            char *mp = s_path(psp, "pythonModule");
            ERR(c, mp, NULL, "required: the module to run as python3 -m MODULE");
            free(mp);
        }
        else
            s_python_module(pool, module);
        s_package_uris(c, pool, ps, psp, "packageUris");
        s_str_array(c, ps, psp, "args", pool->argv);
        s_env(c, ps, psp, pool->env);
    }
    else
        ERR(c, pp, NULL, "give containerSpec (imageUri, command, args) or pythonPackageSpec "
            "(pythonModule, args)");
    free(csp);
    free(psp);
}

static void s_vertex(s_ctx_t *c, json_t *spec, const char *prefix)
{
    static const char *const known[] = {
        "workerPoolSpecs", "baseOutputDirectory", "scheduling", "serviceAccount", "network",
        "reservedIpRanges", "tensorboard", "enableWebAccess", "enableDashboardAccess",
        "experiment", "experimentRun", "models", "persistentResourceId", "useChiefInTfConfig",
        "protectedArtifactLocationId", NULL };
    s_unknown_fields(c, spec, prefix, known);
    zt_plan_t *plan = c->plan;
    int64_t max_replicas = zt_knob_int(ZT_KNOB_MAX_REPLICAS);
    char *wp = s_path(prefix, "workerPoolSpecs");
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
        json_t *wps = json_array_get(pools, (size_t) i);
        char *pp = zt_strdupf("%s[%d]", wp, i);
        zt_pool_t *pool = &plan->pools[i];
        if (json_is_null(wps) || (json_is_object(wps) && json_object_size(wps) == 0)) {
            if (i == 0)
                ERR(c, pp, wps, "the primary pool is required (exactly one replica that "
                    "coordinates the job)");
            free(pp);
            continue;
        }
        if (!json_is_object(wps)) {
            ERR(c, pp, wps, "expected a worker pool spec object ({} skips the pool)");
            free(pp);
            continue;
        }
        static const char *const wknown[] = { "machineSpec", "replicaCount", "diskSpec",
            "containerSpec", "pythonPackageSpec", "nfsMounts", NULL };
        s_unknown_fields(c, wps, pp, wknown);
        pool->present = true;
        bool given;
        pool->replicas = (int) s_int(c, wps, pp, "replicaCount", 1, 1, max_replicas,
                                     "replicas on one machine; ZT_MAX_REPLICAS raises it", &given);
        if (i == 0 && given && pool->replicas != 1) {
            char *rp = s_path(pp, "replicaCount");
            json_t *v = json_integer(pool->replicas);
            ERR(c, rp, v, "the primary pool must have exactly 1 replica");
            json_decref(v);
            free(rp);
        }
        if (i == 0)
            pool->replicas = 1;
        char *msp = s_path(pp, "machineSpec");
        json_t *ms = s_obj(c, wps, pp, "machineSpec");
        if (ms) {
            static const char *const mknown[] = { "machineType", "acceleratorType",
                "acceleratorCount", "tpuTopology", "reservationAffinity", NULL };
            s_unknown_fields(c, ms, msp, mknown);
        }
        char *mtp = s_path(msp, "machineType"), *atp = s_path(msp, "acceleratorType"),
             *acp = s_path(msp, "acceleratorCount");
        bool count_given = false;
        long long count = ms ? s_int(c, ms, msp, "acceleratorCount", 0, 0, 16,
                                     "no machine type takes more than 16", &count_given) : 0;
        s_check_machine(c, pool, ms ? s_str(c, ms, msp, "machineType", NULL) : NULL, mtp,
                        ms ? s_str(c, ms, msp, "acceleratorType", NULL) : NULL, atp, count,
                        count_given, acp);
        free(mtp); free(atp); free(acp); free(msp);
        char *dsp = s_path(pp, "diskSpec");
        json_t *ds = s_obj(c, wps, pp, "diskSpec");
        snprintf(pool->disk_type, sizeof pool->disk_type, "pd-ssd");
        pool->disk_gb = 100;
        if (ds) {
            static const char *const dknown[] = { "bootDiskType", "bootDiskSizeGb", NULL };
            s_unknown_fields(c, ds, dsp, dknown);
            const char *dt = s_str(c, ds, dsp, "bootDiskType", "pd-ssd");
            if (strcmp(dt, "pd-ssd") && strcmp(dt, "pd-standard") && strcmp(dt, "hyperdisk-balanced")) {
                char *tp = s_path(dsp, "bootDiskType");
                json_t *v = json_string(dt);
                ERR(c, tp, v, "expected pd-ssd, pd-standard or hyperdisk-balanced");
                json_decref(v);
                free(tp);
            }
            else
                snprintf(pool->disk_type, sizeof pool->disk_type, "%s", dt);
            pool->disk_gb = (int) s_int(c, ds, dsp, "bootDiskSizeGb", 100, 10, 64000,
                                        "the largest boot disk", NULL);
        }
        free(dsp);
        s_vertex_program(c, i, pool, wps, pp);
        free(pp);
    }
    free(wp);
    char *bp = s_path(prefix, "baseOutputDirectory");
    json_t *bo = s_obj(c, spec, prefix, "baseOutputDirectory");
    if (bo) {
        const char *uri = s_str(c, bo, bp, "outputUriPrefix", NULL);
        char *up = s_path(bp, "outputUriPrefix");
        if (!uri)
            ERR(c, up, NULL, "required: a local path or file:// URI");
        else
            plan->base_output_dir = s_local_path(c, up, uri);
        free(up);
    }
    free(bp);
    char *sp = s_path(prefix, "scheduling");
    json_t *sch = s_obj(c, spec, prefix, "scheduling");
    if (sch) {
        static const char *const sknown[] = { "timeout", "restartJobOnWorkerRestart",
            "disableRetries", "strategy", "maxWaitDuration", NULL };
        s_unknown_fields(c, sch, sp, sknown);
        const char *t = s_str(c, sch, sp, "timeout", NULL);
        if (t) {
            plan->timeout_s = zt_parse_duration(t);
            if (plan->timeout_s <= 0) {
                char *tp = s_path(sp, "timeout");
                json_t *v = json_string(t);
                ERR(c, tp, v, "expected a positive duration such as \"7200s\"");
                json_decref(v);
                free(tp);
                plan->timeout_s = 0;
            }
        }
        plan->restart_job_on_worker_restart = s_bool(c, sch, sp, "restartJobOnWorkerRestart", false);
        plan->disable_retries = s_bool(c, sch, sp, "disableRetries", false);
    }
    free(sp);
    plan->tf_master = !s_bool(c, spec, prefix, "useChiefInTfConfig", true);
}

/* ---------------------------------------------------------- legacy config */

static void s_legacy_pool(s_ctx_t *c, json_t *ti, int idx, const char *type_key, const char *type,
                          const char *cfg_key, int count, bool custom)
{
    zt_pool_t *pool = &c->plan->pools[idx];
    pool->present = count > 0;
    if (!pool->present)
        return;
    pool->replicas = count;
    snprintf(pool->disk_type, sizeof pool->disk_type, "pd-ssd");
    pool->disk_gb = 100;
    char *cfgp = s_path("trainingInput", cfg_key);
    json_t *cfg = s_obj(c, ti, "trainingInput", cfg_key);
    const char *acc = NULL;
    long long acount = 0;
    bool acount_given = false;
    char *acp = s_path(cfgp, "acceleratorConfig");
    if (cfg) {
        static const char *const known[] = { "acceleratorConfig", "imageUri", "containerCommand",
            "containerArgs", "tpuTfVersion", "diskConfig", NULL };
        s_unknown_fields(c, cfg, cfgp, known);
        json_t *ac = s_obj(c, cfg, cfgp, "acceleratorConfig");
        if (ac) {
            static const char *const aknown[] = { "count", "type", NULL };
            s_unknown_fields(c, ac, acp, aknown);
            acc = s_str(c, ac, acp, "type", NULL);
            acount = s_int(c, ac, acp, "count", 0, 0, 16, "no machine type takes more than 16",
                           &acount_given);
            if (!acc && acount_given) {
                char *tp = s_path(acp, "type");
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
    char *atp = s_path(acp, "type"), *ccp = s_path(acp, "count");
    s_check_machine(c, pool, type, tp, acc, atp, acount, acount_given, ccp);
    free(tp); free(atp); free(ccp); free(acp);
    /* The program: a container command, the Python module, a ztrain role. */
    const char *image = cfg ? s_str(c, cfg, cfgp, "imageUri", NULL) : NULL;
    if (image)
        pool->image_uri = strdup(image);
    json_t *cmd = json_array();
    if (cfg)
        s_str_array(c, cfg, cfgp, "containerCommand", cmd);
    const char *module = s_str(c, ti, "trainingInput", "pythonModule", NULL);
    zt_role_t image_role = s_image_role(image, idx);
    if (json_array_size(cmd) > 0)
        json_array_extend(pool->argv, cmd);
    else if (image && image_role != ZT_ROLE_NONE) {
        pool->role = image_role;
        json_array_append_new(pool->argv, json_string(zt_role_binary(pool->role)));
    }
    else if (image) {
        char *ip = s_path(cfgp, "containerCommand");
        ERR(c, ip, NULL, "required: image '%s' is not pulled on this machine, so give the "
            "command to run (or an image naming a ztrain role)", image);
        free(ip);
    }
    else if (module) {
        s_python_module(pool, module);
        s_package_uris(c, pool, ti, "trainingInput", "packageUris");
    }
    else {
        pool->role = s_pool_default_role(idx);
        json_array_append_new(pool->argv, json_string(zt_role_binary(pool->role)));
    }
    json_decref(cmd);
    if (cfg)
        s_str_array(c, cfg, cfgp, "containerArgs", pool->argv);
    free(cfgp);
}

static void s_legacy(s_ctx_t *c, json_t *ti)
{
    static const char *const known[] = {
        "scaleTier", "masterType", "masterConfig", "workerType", "workerCount", "workerConfig",
        "parameterServerType", "parameterServerCount", "parameterServerConfig", "evaluatorType",
        "evaluatorCount", "evaluatorConfig", "useChiefInTfConfig", "region", "runtimeVersion",
        "pythonVersion", "pythonModule", "packageUris", "args", "jobDir", "scheduling",
        "hyperparameters", "serviceAccount", "network", "encryptionConfig", "enableWebAccess",
        NULL };
    const char *tp = "trainingInput";
    s_unknown_fields(c, ti, tp, known);
    zt_plan_t *plan = c->plan;
    int64_t max_replicas = zt_knob_int(ZT_KNOB_MAX_REPLICAS);
    const char *tier_name = s_str(c, ti, tp, "scaleTier", "BASIC");
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
        const char *type = s_str(c, ti, tp, names[i][0], NULL);
        bool count_given = false;
        int count = i == 0 ? 1 : (int) s_int(c, ti, tp, names[i][1], 0, 0, max_replicas,
                                               "replicas on one machine; ZT_MAX_REPLICAS raises it",
                                               &count_given);
        if (!custom) {
            const char *tier_type = i == 0 ? tier->master : i == 1 ? tier->worker
                                    : i == 2 ? tier->ps_machine : NULL;
            int tier_count = i == 0 ? 1 : i == 1 ? tier->workers : i == 2 ? tier->ps : 0;
            if (type || count_given) {
                char *p = s_path(tp, type ? names[i][0] : names[i][1]);
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
            char *p = s_path(tp, names[i][0]);
            ERR(c, p, NULL, "required when %s is %d", names[i][1], count);
            free(p);
            type = "n1-standard-4";
        }
        s_legacy_pool(c, ti, i, names[i][0], type, names[i][2], count, custom);
    }
    json_t *args = json_array();
    s_str_array(c, ti, tp, "args", args);
    for (int i = 0; i < ZT_POOLS; i++)
        if (plan->pools[i].present && (i < 2 || plan->pools[i].role == ZT_ROLE_NONE))
            json_array_extend(plan->pools[i].argv, args);
    json_decref(args);
    const char *job_dir = s_str(c, ti, tp, "jobDir", NULL);
    if (job_dir)
        plan->base_output_dir = s_local_path(c, "trainingInput.jobDir", job_dir);
    json_t *sch = s_obj(c, ti, tp, "scheduling");
    if (sch) {
        const char *t = s_str(c, sch, "trainingInput.scheduling", "maxRunningTime", NULL);
        if (t && (plan->timeout_s = zt_parse_duration(t)) <= 0) {
            json_t *v = json_string(t);
            ERR(c, "trainingInput.scheduling.maxRunningTime", v,
                "expected a positive duration such as \"7200s\"");
            json_decref(v);
            plan->timeout_s = 0;
        }
    }
    if (json_object_get(ti, "hyperparameters"))
        WARN(c, "trainingInput.hyperparameters", NULL, "ignored by `ztrain run`; use `ztrain tune`");
    /* AI Platform: "master" unless useChiefInTfConfig, or runtime 2.1 and later. */
    const char *rv = s_str(c, ti, tp, "runtimeVersion", NULL);
    bool modern = rv && strtod(rv, NULL) >= 2.1;
    plan->tf_master = !s_bool(c, ti, tp, "useChiefInTfConfig", modern);
}

/* ------------------------------------------------------------------- load */

int zt_plan_load(const zt_plan_opts_t *opts, zt_plan_t **plan_p, zt_diag_t *diag)
{
    *plan_p = NULL;
    zt_doc_t *doc = NULL;
    int rc = ZT_OK;
    if (opts->file) {
        if ((rc = zt_doc_load(opts->file, &doc, diag)) != ZT_OK)
            return rc;
    }
    else
        doc = zt_doc_new_empty("command line");
    zt_plan_t *plan = calloc(1, sizeof *plan);
    for (int i = 0; i < ZT_POOLS; i++)
        s_pool_init(&plan->pools[i]);
    plan->source = strdup(doc->source);
    s_ctx_t ctx = { doc, diag, plan };
    s_ctx_t *c = &ctx;
    json_t *root = doc->root;
    bool has_legacy_flag = false;
    size_t i;
    json_t *f;
    json_array_foreach(opts->flags, i, f) {
        const char *n = json_string_value(json_array_get(f, 0));
        if (strcmp(n, "--worker-pool-spec") && strcmp(n, "--display-name"))
            has_legacy_flag = true;
    }
    json_t *ti = opts->spec_key ? NULL : json_object_get(root, "trainingInput");
    bool legacy = ti || (!opts->file && has_legacy_flag);
    if (legacy) {
        static const char *const known[] = { "trainingInput", "jobId", "labels", NULL };
        s_unknown_fields(c, root, "", known);
        plan->format = strdup("trainingInput");
        if (!ti) {
            ti = json_object();
            json_object_set_new(root, "trainingInput", ti);
        }
        if (!json_is_object(ti))
            ERR(c, "trainingInput", ti, "expected an object");
        else {
            s_apply_flags(c, ti, "trainingInput", true, opts->flags);
            s_legacy(c, ti);
        }
        const char *id = json_string_value(json_object_get(root, "jobId"));
        if (!plan->display_name)
            plan->display_name = strdup(id ? id : "job");
        plan->job = json_deep_copy(ti);
    }
    else {
        json_t *spec = root;
        const char *prefix = "";
        json_t *js = json_object_get(root, opts->spec_key ? opts->spec_key : "jobSpec");
        if (opts->spec_key) { /* a study: only the trial job is ours to check */
            plan->format = strdup("CustomJobSpec");
            if (!json_is_object(js)) {
                ERR(c, opts->spec_key, js, js ? "expected a CustomJobSpec object"
                                              : "required: the job every trial runs");
                js = json_object();
                json_object_set_new(root, opts->spec_key, js);
            }
            spec = js;
            prefix = opts->spec_key;
        }
        else if (js) {
            static const char *const known[] = { "displayName", "jobSpec", "labels", "name",
                "encryptionSpec", "state", "createTime", "startTime", "endTime", "updateTime",
                "error", "webAccessUris", NULL };
            s_unknown_fields(c, root, "", known);
            plan->format = strdup("CustomJob");
            if (!json_is_object(js)) {
                ERR(c, "jobSpec", js, "expected a CustomJobSpec object");
                js = json_object();
                json_object_set_new(root, "jobSpec", js);
            }
            spec = js;
            prefix = "jobSpec";
            const char *dn = s_str(c, root, "", "displayName", NULL);
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
        s_apply_flags(c, spec, prefix, false, opts->flags);
        s_vertex(c, spec, prefix);
        if (!plan->display_name)
            plan->display_name = strdup("job");
        plan->job = json_deep_copy(spec);
    }
    if (opts->tf_chief_name) {
        if (!strcmp(opts->tf_chief_name, "master"))
            plan->tf_master = true;
        else if (!strcmp(opts->tf_chief_name, "chief"))
            plan->tf_master = false;
        else
            zt_diag_add(diag, true, "command line (--tf-chief-name)", 0, 0, NULL, NULL,
                        "'%s': expected chief or master", opts->tf_chief_name);
    }
    /* Arguments after "--" go to the training program of pools 0 and 1, and
     * to any user program in pools 2 and 3 (a trial's parameters: 0 and 1 only). */
    for (int p = 0; p < ZT_POOLS; p++)
        if (plan->pools[p].present && (p < 2 || (!opts->trial && plan->pools[p].role == ZT_ROLE_NONE)))
            for (int a = 0; a < opts->n_user_args; a++)
                json_array_append_new(plan->pools[p].argv, json_string(opts->user_args[a]));
    zt_doc_destroy(&doc);
    if (zt_diag_errors(diag) > 0) {
        zt_plan_destroy(&plan);
        return ZT_ESPEC;
    }
    *plan_p = plan;
    return ZT_OK;
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
                    "not found at build time); rebuild with the CUDA toolkit, or pass --cpu-only",
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
    }
    return json_pack("{s:s, s:s, s:s, s:s?, s:o, s:s?, s:f, s:b, s:b, s:s, s:i}",
                     "source", self->source, "format", self->format, "displayName",
                     self->display_name, "scaleTier", self->scale_tier, "pools", pools,
                     "baseOutputDirectory", self->base_output_dir, "timeoutSeconds",
                     self->timeout_s, "restartJobOnWorkerRestart",
                     self->restart_job_on_worker_restart, "disableRetries", self->disable_retries,
                     "tfConfigChief", self->tf_master ? "master" : "chief", "replicas",
                     zt_plan_replicas(self));
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
        fprintf(out, ", %d GB %s)\n    command:", p->disk_gb, p->disk_type);
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
    fprintf(out, "  scheduling: timeout %s, restartJobOnWorkerRestart %s, retries %s; "
            "TF_CONFIG names pool 0 \"%s\"\n",
            self->timeout_s > 0 ? "set" : "none",
            self->restart_job_on_worker_restart ? "true" : "false",
            self->disable_retries ? "off" : "on", self->tf_master ? "master" : "chief");
    if (self->timeout_s > 0)
        fprintf(out, "  timeout: %.0fs\n", self->timeout_s);
}
