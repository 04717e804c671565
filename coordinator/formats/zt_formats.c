/* The job formats, registered (one line each), and what the CLI, the
 * chief and the study runner ask of them through the seam. */
#include "formats/zt_format.h"
#include "ztrain/zt_error.h"
#include "base/zt_util.h"
#include <stdio.h>
#include <assert.h>
#include <stdlib.h>
#include <string.h>

extern const zt_format_t zt_vertex_format, zt_legacy_format, zt_sagemaker_format, zt_processing_format;

/* In this order their views go into every replica's environment. */
const zt_format_t *const zt_formats[] = {
    &zt_vertex_format,
    &zt_legacy_format,
    &zt_sagemaker_format,
    &zt_processing_format,
    NULL
};

const zt_format_t *zt_format_of(const zt_plan_t *plan)
{
    for (int i = 0; zt_formats[i]; i++)
        if (plan->service && !strcmp(plan->service, zt_formats[i]->name))
            return zt_formats[i];
    return NULL;
}

int zt_format_load(const zt_plan_opts_t *opts, zt_plan_t **plan_p, zt_diag_t *diag)
{
    *plan_p = NULL;
    zt_doc_t *doc = NULL;
    int rc = ZT_OK;
    if (opts->text)
        rc = zt_doc_parse(opts->file ? opts->file : "study", opts->text, 0, &doc, diag);
    else if (opts->file)
        rc = zt_doc_load(opts->file, &doc, diag);
    else
        doc = zt_doc_new_empty("command line");
    if (rc != ZT_OK)
        return rc;
    zt_plan_t *plan = zt_plan_new(doc->source);
    zt_spec_ctx_t ctx = { doc, diag, plan, opts->allow_unknown_fields };
    const zt_format_t *f = NULL, *fallback = NULL;
    for (int i = 0; zt_formats[i] && !f; i++) {
        if (!zt_formats[i]->claims)
            fallback = zt_formats[i];
        else if (zt_formats[i]->claims(doc->root, opts))
            f = zt_formats[i];
    }
    (f ? f : fallback)->parse(&ctx, doc->root, opts);
    zt_plan_finish(plan, opts, diag);
    zt_doc_destroy(&doc);
    if (zt_diag_errors(diag) > 0) {
        zt_plan_destroy(&plan);
        return ZT_ESPEC;
    }
    *plan_p = plan;
    return ZT_OK;
}

json_t *zt_format_env(const zt_layout_t *layout, int pool, int index)
{
    json_t *env = zt_layout_env(layout, pool, index);
    char first[4096] = "";
    for (int i = 0; zt_formats[i]; i++) {
        const zt_format_view_t *v = &zt_formats[i]->view;
        if (v->env)
            v->env(env, layout, pool, index);
        const char *d = v->python_first ? v->python_first(layout, pool) : NULL;
        if (d)
            snprintf(first + strlen(first), sizeof first - strlen(first), "%s%s", first[0] ? ":" : "", d);
    }
    zt_layout_env_finish(env, layout, pool, index, first);
    return env;
}

void zt_format_make_folders(const zt_layout_t *layout)
{
    for (int i = 0; zt_formats[i]; i++)
        for (const char *const *f = zt_formats[i]->view.folders; f && *f; f++) {
            char *d = zt_strdupf("%s/%s", layout->base_dir, *f);
            zt_mkdir_p(d);
            free(d);
        }
    zt_layout_make_folders(layout);
}

int zt_format_folders(const zt_plan_t *plan, zt_dir_mode_t mode, char *why, size_t len)
{
    const zt_format_t *f = zt_format_of(plan);
    return f && f->folders ? f->folders(plan, mode, why, len) : 0;
}

const zt_format_t *zt_format_study_of(json_t *root)
{
    for (int i = 0; zt_formats[i]; i++)
        if (zt_formats[i]->is_study && zt_formats[i]->is_study(root))
            return zt_formats[i];
    return NULL;
}

const char *zt_format_runs_as_study(const char *file)
{
    zt_diag_t *diag = zt_diag_new();
    zt_doc_t *doc = NULL;
    const char *yes = NULL;
    if (file && zt_doc_load(file, &doc, diag) == ZT_OK)
        for (int i = 0; zt_formats[i] && !yes; i++)
            yes = zt_formats[i]->runs_as_study ? zt_formats[i]->runs_as_study(doc->root) : NULL;
    zt_doc_destroy(&doc);
    zt_diag_destroy(&diag);
    return yes;
}

/* ------------------------------------------------------------ selftest */

/* Every job's replicas get every format's view, in registration order:
 * Vertex's folders, then SageMaker's variables (its hosts, a
 * hyperparameter from the program's arguments). */
void zt_format_selftest(void)
{
    zt_plan_t *plan = zt_plan_new("selftest");
    plan->display_name = strdup("selftest");
    plan->job = json_object();
    for (int p = 0; p < 3; p++) {
        plan->pools[p].present = true;
        plan->pools[p].replicas = 1;
        json_array_extend(plan->pools[p].argv, json_pack("[s, s, s, s]", "python3", "t.py", "--lr", "0.5"));
    }
    zt_placement_t pl = { calloc(3, sizeof(zt_place_t)), 3, 7000, "127.0.0.1", NULL };
    for (int i = 0; i < 3; i++) {
        snprintf(pl.replicas[i].host, sizeof pl.replicas[i].host, "h%d", i);
        snprintf(pl.replicas[i].addr, sizeof pl.replicas[i].addr, "10.0.0.%d", i);
        pl.replicas[i].port = 6000 + i;
    }
    zt_layout_t lay;
    assert(zt_layout_init(&lay, plan, &pl, "/tmp/zt-selftest-job", NULL) == ZT_OK);
    json_t *env = zt_format_env(&lay, 2, 0);
    assert(!strcmp(zt_layout_env_value(env, "AIP_MODEL_DIR"), "/tmp/zt-selftest-job/model/"));
    assert(!strcmp(zt_layout_env_value(env, "SM_HP_LR"), "0.5"));
    assert(!strcmp(zt_layout_env_value(env, "SM_CURRENT_HOST"), "algo-3"));
    size_t aip = 0, sm = 0, i;
    json_t *e;
    json_array_foreach(env, i, e) {
        const char *name = json_string_value(json_array_get(e, 0));
        aip = !strncmp(name, "AIP_", 4) && !aip ? i + 1 : aip;
        sm = !strncmp(name, "SM_", 3) && !sm ? i + 1 : sm;
    }
    assert(aip && sm && aip < sm);
    json_decref(env);
    zt_layout_fini(&lay);
    zt_plan_destroy(&plan);
}
