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

#endif
