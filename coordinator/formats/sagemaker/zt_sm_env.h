/* zt_sm_env: what a replica of a job sees SageMaker's way: hosts
 * algo-1..algo-N in pool order, the job's directories, the replica's CPUs
 * and GPUs, its channels and hyperparameters, in SM_* variables (each a
 * field of SM_TRAINING_ENV) and in the files SageMaker's toolkit reads. */
#ifndef ZT_SM_ENV_H
#define ZT_SM_ENV_H
#include "launch/zt_layout.h"
#include <jansson.h>

/* Appends replica (pool, index)'s SageMaker variables to env ([name,
 * value] pairs, as zt_layout_env's). */
void zt_sm_env(json_t *env, const zt_layout_t *layout, int pool, int index);
/* The files SageMaker's toolkit reads in the replica's config directory:
 * {"hyperparameters.json": {...}, "resourceconfig.json": {...},
 *  "inputdataconfig.json": {...}}. */
json_t *zt_sm_config_files(const zt_layout_t *layout, int pool, int index);

/* The "--name=value" and "--name value" arguments among args (a bare
 * "--flag" is not one) into into, {name: "value"}: hyperparameters, as
 * SageMaker's hyperparameters.json holds them. */
void zt_sm_args_hps(json_t *into, const char *const *args, size_t n);

/* For a job that asks for smdistributed's data parallelism and a pool of
 * its hosts: the folder that holds ztrain's stand-in for smdistributed's
 * package (ztrain's own Python package's _shim), which their PYTHONPATH
 * takes first, so that the program's `import smdistributed...` finds it.
 * Found once, with the interpreter the hosts' program runs under, without
 * importing ztrain; NULL for other jobs and pools, or when that Python has
 * no ztrain (said once in the log). No other job's program sees it. */
const char *zt_sm_shim_dir(const zt_layout_t *layout, int pool);

#endif
