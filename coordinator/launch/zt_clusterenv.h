/* zt_clusterenv: the environment every replica gets, in exactly the formats
 * of the managed services: CLUSTER_SPEC and TF_CONFIG (seed 000), PyTorch's
 * MASTER_ADDR/MASTER_PORT/WORLD_SIZE/RANK, AIP_*_DIR, SageMaker's SM_HOSTS,
 * SM_CURRENT_HOST and resourceconfig.json, CUDA_VISIBLE_DEVICES, then the
 * pool's own env[] last; plus ZT_* for programs that link libztrain. */
#ifndef ZT_CLUSTERENV_H
#define ZT_CLUSTERENV_H
#include <jansson.h>
#include <stdbool.h>
#include "spec/zt_jobspec.h"

typedef struct {
    const zt_plan_t *plan;            /* the job */
    char *job_dir;                    /* logs, job.json, config */
    char *base_dir;                   /* base output directory (plan's, or job_dir) */
    char *trial;                      /* trial id, or NULL outside a study */
    char *coordinator;                /* control-plane endpoint, tcp://127.0.0.1:P */
    int incarnation;                  /* job attempt, from 0 */
    bool cpu_only;                    /* run without GPUs */
    int ports[ZT_POOLS][1024];        /* each replica's port */
    int reserved[ZT_POOLS][1024];     /* its reservation socket until the replica starts, or -1 */
    int first_gpu[ZT_POOLS];          /* first device of replica 0 of each pool */
} zt_layout_t;

/* Chooses ports (ephemeral ports the kernel hands out, so two jobs started
 * at once never collide) and GPU ranges. base_dir defaults to job_dir. */
int zt_layout_init(zt_layout_t *self, const zt_plan_t *plan, const char *job_dir,
                   const char *trial);
void zt_layout_fini(zt_layout_t *self);
/* Releases a replica's port just before it starts (so that it can bind it). */
void zt_layout_release(zt_layout_t *self, int pool, int index);

/* "workerpoolN-I" */
void zt_replica_name(int pool, int index, char *buf, size_t size);
/* The host:port list of a pool. */
json_t *zt_pool_addresses(const zt_layout_t *self, int pool);
json_t *zt_cluster_spec(const zt_layout_t *self, int pool, int index);
/* NULL when the job has a single replica (the service sets none then). */
json_t *zt_tf_config(const zt_layout_t *self, int pool, int index);
/* The variables ztrain sets for one replica, in order: [[name, value], ...]. */
json_t *zt_replica_env(const zt_layout_t *self, int pool, int index);
/* The replica's config directory (resourceconfig.json lives there). */
char *zt_replica_config_dir(const zt_layout_t *self, int pool, int index);

#endif
