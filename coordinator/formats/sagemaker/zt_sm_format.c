/* The SageMaker format behind the seam (formats/zt_format.h): a
 * CreateTrainingJob request read into the plan, its own part, SageMaker's
 * view of every job's replicas, and its own jobs' folders, hosts and end. */
#include "formats/zt_format.h"
#include "formats/sagemaker/zt_sm_int.h"
#include "formats/sagemaker/zt_sm_env.h"
#include "base/zt_json.h"
#include "base/zt_util.h"
#include "ztrain/zt_error.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ the request */

static bool s_claims(json_t *root, const zt_plan_opts_t *opts)
{
    json_t *holder = opts->spec_key ? json_object_get(root, opts->spec_key) : root;
    return json_is_object(holder) && json_object_get(holder, "AlgorithmSpecification");
}

/* The override flags are gcloud's: none but --display-name applies. */
static void s_parse(zt_spec_ctx_t *c, json_t *root, const zt_plan_opts_t *opts)
{
    json_t *holder = opts->spec_key ? json_object_get(root, opts->spec_key) : root;
    c->plan->format = strdup("CreateTrainingJob");
    c->plan->service = "sagemaker";
    zt_sm_parse_request(c, holder);
    /* "--name=value" or "--name value" after "--" (a trial's tuned values):
     * hyperparameters of the job, in hyperparameters.json as SageMaker's
     * tuning jobs give them, and still arguments of the program */
    zt_sm_plan_t *sm = (zt_sm_plan_t *) zt_sm_plan(c->plan);
    if (sm)
        zt_sm_args_hps(sm->hyperparameters, (const char *const *) opts->user_args, (size_t) opts->n_user_args);
    zt_sm_apply_flags(c, opts, "CreateTrainingJob");
}

/* ------------------------------------------------------------ its jobs */

/* A host's data (its channels' folders), and its config files in its own
 * <base>/input/config, where SageMaker writes them and its training
 * toolkit reads them (SAGEMAKER_BASE_DIR is the host's base). */
static int s_prepare(const zt_layout_t *layout, int pool, int index, char *why, size_t len)
{
    if (zt_sm_prepare_host(layout, pool, index, why, len) != 0)
        return -1;
    if (!zt_sm_is_host(layout->plan, pool))
        return 0;
    return zt_sm_write_config(layout, pool, index, "input/config", zt_sm_config_files(layout, pool, index), why,
                              len);
}

static int s_finish(const zt_layout_t *layout, bool succeeded, char **failure, char *why, size_t len)
{
    int rc = succeeded ? zt_sm_upload(layout, why, len) : 0;
    *failure = !succeeded || rc != 0 ? zt_sm_failure(layout) : NULL;
    return rc;
}

/* SM_CHECKPOINT_DIR's, made before any replica starts (zt_sm_env.c) */
static const char *const s_folders[] = { "sagemaker-checkpoints", NULL };

const zt_format_t zt_sagemaker_format = {
    .name = "sagemaker",
    .claims = s_claims,
    .parse = s_parse,
    .view = { zt_sm_env, zt_sm_shim_dir, s_folders },
    .config_files = zt_sm_config_files,
    .folders = zt_sm_folders,
    .prepare = s_prepare,
    .host_name = zt_sm_host,
    .host_names = zt_sm_host_names,
    .awaited = zt_sm_awaited,
    .finish = s_finish,
    .failure_from = "the program's output/failure",
    .is_study = zt_study_is_sagemaker,
    .study = zt_study_from_sagemaker,
};
