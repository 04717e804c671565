/* ztrain: what a training program started by `ztrain run` learns from its
 * environment: its rank among the trainers (pool 0, then pool 1), its
 * place on its host, and the job's reducers or parameter servers. Every
 * variable is read by libztrain's one environment reader; a program (or a
 * binding such as the Python package) asks here instead of parsing them. */
#ifndef ZT_JOB_H
#define ZT_JOB_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    char name[64];          /* "workerpool1-0" */
    int pool, index;        /* this replica */
    int rank, size;         /* among the trainers: pool 0's replicas, then pool 1's */
    int local_rank, local_size; /* among the trainers on this host */
    char **reducers;        /* pool 2's host:port list when it holds reducers (NULL-terminated) */
    int nreducers;
    char **paramservers;    /* pool 2's host:port list when it holds parameter servers */
    int nparamservers;
    char **peers;           /* every trainer's host:port, by rank (the ring's endpoints) */
    int npeers;
    int64_t group;          /* an elastic pool's membership generation (ZT_GROUP), -1 outside one */
} zt_job_t;

/* Fills job from the environment: 0; ZT_ENOTFOUND when this process was
 * not started by `ztrain run` (the variables are absent); ZT_ESPEC when
 * they are there but do not fit (the reason in why). */
int zt_job_read(zt_job_t *job, char *why, size_t why_size);
void zt_job_free(zt_job_t *job);

/* The name of one variable of a replica's environment by its key
 * ("HP_METRIC_FILE" gives "CLOUD_ML_HP_METRIC_FILE", "COORDINATOR"
 * "ZT_COORDINATOR"), or NULL for a key that is not one: bindings read the
 * environment by the names given here. */
const char *zt_job_env_name(const char *key);

/* Where this replica's checkpoints go: AIP_CHECKPOINT_DIR, or for the
 * final model AIP_MODEL_DIR; "checkpoints" and "model" in the working
 * directory when unset; a trailing slash dropped. Restarted parameter
 * servers restore from the first, and evaluators are served both. */
const char *zt_job_checkpoint_dir(bool final_model);

#ifdef __cplusplus
}
#endif
#endif
