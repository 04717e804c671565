/* zt_spec_int: what the formats' parsers share: the context, the typed
 * field readers that report a problem with its path and value
 * (zt_spec_fields.c), and gcloud's override flags (zt_jobspec.c). For
 * plan/ and the parsers under formats/. */
#ifndef ZT_SPEC_INT_H
#define ZT_SPEC_INT_H
#include "plan/zt_jobspec.h"
#include "plan/zt_doc.h"
#include <jansson.h>
#include <stdbool.h>

typedef struct {
    zt_doc_t *doc;       /* the document (positions, origins) */
    zt_diag_t *diag;     /* where problems go */
    zt_plan_t *plan;     /* what is being built */
    bool allow_unknown;  /* unknown fields are warnings (--allow-unknown-fields) */
} zt_spec_ctx_t;

#define ERR(c, path, val, ...)  zt_doc_report((c)->doc, (c)->diag, 1, (path), (val), __VA_ARGS__)
#define WARN(c, path, val, ...) zt_doc_report((c)->doc, (c)->diag, 0, (path), (val), __VA_ARGS__)

/* "base.key" (or "key" at the top), to free. */
char *zt_sf_path(const char *base, const char *key);

/* An error (a warning with --allow-unknown-fields) for every field of obj
 * not in known (NULL-terminated). */
void zt_sf_unknown_fields(zt_spec_ctx_t *c, json_t *obj, const char *path, const char *const *known);

/* An object field: NULL when absent; an error when present but not an object. */
json_t *zt_sf_obj(zt_spec_ctx_t *c, json_t *parent, const char *path, const char *key);

/* A string field; def when absent. */
const char *zt_sf_str(zt_spec_ctx_t *c, json_t *parent, const char *path, const char *key,
                      const char *def);

/* An integer field (int64 fields may be strings in proto3 JSON); within
 * [min, max]; *present tells whether it was given. */
long long zt_sf_int(zt_spec_ctx_t *c, json_t *parent, const char *path, const char *key,
                    long long def, long long min, long long max, const char *why_max,
                    bool *present);

/* A boolean field; def when absent. */
bool zt_sf_bool(zt_spec_ctx_t *c, json_t *parent, const char *path, const char *key, bool def);

/* An array of strings, appended to out. */
void zt_sf_str_array(zt_spec_ctx_t *c, json_t *parent, const char *path, const char *key, json_t *out);

/* A valid environment variable name. */
bool zt_sf_env_name_ok(const char *n);

/* env[{name, value}] appended to out as [name, value] pairs. */
void zt_sf_env(zt_spec_ctx_t *c, json_t *parent, const char *path, json_t *out);

/* "file:///x" -> "/x"; gs:// and other remote schemes are refused. */
char *zt_sf_local_path(zt_spec_ctx_t *c, const char *path, const char *uri);

/* The role a pool's replicas take by default: chief, worker, server, evaluator. */
zt_role_t zt_sf_pool_default_role(int pool);

/* The ztrain role an image URI names: ".../ztrain-worker:tag" -> WORKER; the
 * Vertex Reduction Server image -> REDUCER; "ztrain" -> the pool's default. */
zt_role_t zt_sf_image_role(const char *uri, int pool);

/* Machine type, accelerator type and count, checked against the tables. */
void zt_sf_check_machine(zt_spec_ctx_t *c, zt_pool_t *pool, const char *mt, const char *mt_path,
                         const char *acc, const char *acc_path, long long count,
                         bool count_given, const char *count_path);

/* A pool's defaults before its fields are read. */
void zt_sf_pool_init(zt_pool_t *pool);

/* argv += python3 -m MODULE */
void zt_sf_python_module(zt_pool_t *pool, const char *module);

/* Adds packageUris as PYTHONPATH entries: local directories, .whl or .zip. */
void zt_sf_package_uris(zt_spec_ctx_t *c, zt_pool_t *pool, json_t *parent, const char *path,
                        const char *key);

/* gcloud's override flags (opts->flags) applied to the document spec (its
 * fields under prefix): --worker-pool-spec and --display-name (a CustomJob's),
 * or, training_input, the flags of a trainingInput config (each flag of the
 * other kind is an error). */
void zt_sf_apply_flags(zt_spec_ctx_t *c, json_t *spec, const char *prefix, bool training_input, json_t *flags);
/* Whether flags hold one of a trainingInput config's (beyond --worker-pool-spec and --display-name). */
bool zt_sf_training_input_flags(json_t *flags);

#endif
