/* Typed field readers for job specs, and the pool helpers both formats use. */
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

/* ---------------------------------------------------------------- helpers */


char *zt_sf_path(const char *base, const char *key)
{
    return zt_strdupf("%s%s%s", base, *base ? "." : "", key);
}

void zt_sf_unknown_fields(zt_spec_ctx_t *c, json_t *obj, const char *path, const char *const *known)
{
    zt_doc_check_unknown(c->doc, c->diag, obj, path, known, c->allow_unknown);
}

/* An object field: NULL when absent; an error when present but not an object. */
json_t *zt_sf_obj(zt_spec_ctx_t *c, json_t *parent, const char *path, const char *key)
{
    json_t *v = json_object_get(parent, key);
    if (!v || json_is_null(v))
        return NULL;
    if (!json_is_object(v)) {
        char *p = zt_sf_path(path, key);
        ERR(c, p, v, "expected an object");
        free(p);
        return NULL;
    }
    return v;
}

/* A string field; def when absent. */
const char *zt_sf_str(zt_spec_ctx_t *c, json_t *parent, const char *path, const char *key,
                         const char *def)
{
    json_t *v = json_object_get(parent, key);
    if (!v || json_is_null(v))
        return def;
    if (!json_is_string(v)) {
        char *p = zt_sf_path(path, key);
        ERR(c, p, v, "expected a string");
        free(p);
        return def;
    }
    return json_string_value(v);
}

/* An integer field (int64 fields may be strings in proto3 JSON); within
 * [min, max]; *present tells whether it was given. */
long long zt_sf_int(zt_spec_ctx_t *c, json_t *parent, const char *path, const char *key,
                       long long def, long long min, long long max, const char *why_max,
                       bool *present)
{
    json_t *v = json_object_get(parent, key);
    if (present)
        *present = v && !json_is_null(v);
    if (!v || json_is_null(v))
        return def;
    char *p = zt_sf_path(path, key);
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

bool zt_sf_bool(zt_spec_ctx_t *c, json_t *parent, const char *path, const char *key, bool def)
{
    json_t *v = json_object_get(parent, key);
    if (!v || json_is_null(v))
        return def;
    if (!json_is_boolean(v)) {
        char *p = zt_sf_path(path, key);
        ERR(c, p, v, "expected true or false");
        free(p);
        return def;
    }
    return json_is_true(v);
}

/* An array of strings, appended to out. */
void zt_sf_str_array(zt_spec_ctx_t *c, json_t *parent, const char *path, const char *key, json_t *out)
{
    json_t *v = json_object_get(parent, key);
    if (!v || json_is_null(v))
        return;
    char *p = zt_sf_path(path, key);
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

bool zt_sf_env_name_ok(const char *n)
{
    if (!n || !(isalpha((unsigned char) *n) || *n == '_'))
        return false;
    for (; *n; n++)
        if (!(isalnum((unsigned char) *n) || *n == '_'))
            return false;
    return true;
}

/* env[{name, value}] appended to out as [name, value] pairs. */
void zt_sf_env(zt_spec_ctx_t *c, json_t *parent, const char *path, json_t *out)
{
    json_t *v = json_object_get(parent, "env");
    if (!v || json_is_null(v))
        return;
    char *p = zt_sf_path(path, "env");
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
            else if (!zt_sf_env_name_ok(name)) {
                char *np = zt_sf_path(ip, "name");
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
                    char *vp = zt_sf_path(ip, "value");
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
char *zt_sf_local_path(zt_spec_ctx_t *c, const char *path, const char *uri)
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
zt_role_t zt_sf_pool_default_role(int pool)
{
    static const zt_role_t d[ZT_POOLS] = { ZT_ROLE_WORKER, ZT_ROLE_WORKER, ZT_ROLE_PARAMSERVER,
                                           ZT_ROLE_EVALUATOR };
    return d[pool];
}

zt_role_t zt_sf_image_role(const char *uri, int pool)
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
        return zt_sf_pool_default_role(pool);
    return ZT_ROLE_NONE;
}

bool zt_pool_python(const zt_pool_t *pool, const char **interp)
{
    const char *first = json_string_value(json_array_get(pool->argv, 0)), *base = first ? strrchr(first, '/') : NULL;
    base = base ? base + 1 : first;
    bool python = base && !strncmp(base, "python", 6);
    if (interp)
        *interp = python ? first : "python3";
    return python;
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
void zt_sf_check_machine(zt_spec_ctx_t *c, zt_pool_t *pool, const char *mt, const char *mt_path,
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

void zt_sf_pool_init(zt_pool_t *pool)
{
    memset(pool, 0, sizeof *pool);
    pool->argv = json_array();
    pool->env = json_array();
}

/* argv += python3 -m MODULE */
void zt_sf_python_module(zt_pool_t *pool, const char *module)
{
    json_t *cmd = json_pack("[sss]", "python3", "-m", module);
    json_array_extend(pool->argv, cmd);
    json_decref(cmd);
}

/* Adds packageUris as PYTHONPATH entries: local directories, .whl or .zip. */
void zt_sf_package_uris(zt_spec_ctx_t *c, zt_pool_t *pool, json_t *parent, const char *path,
                           const char *key)
{
    json_t *uris = json_array();
    zt_sf_str_array(c, parent, path, key, uris);
    size_t i;
    json_t *u;
    json_array_foreach(uris, i, u) {
        char *ip = zt_strdupf("%s.%s[%zu]", path, key, i);
        char *lp = zt_sf_local_path(c, ip, json_string_value(u));
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
