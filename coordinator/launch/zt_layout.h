/* zt_layout: where every replica of a job is (its host, address, ports,
 * GPUs, folders), and from that the environment every replica gets, in exactly the forms
 * the frameworks set: CLUSTER_SPEC and TF_CONFIG, PyTorch's
 * MASTER_ADDR/MASTER_PORT/WORLD_SIZE/RANK (and torchrun's); then, after the
 * services' views (the job formats': zt_format_env puts them between),
 * CUDA_VISIBLE_DEVICES, the hypertune metric file, ZT_* for programs that link
 * libztrain, and the pool's own env[] last. */
#ifndef ZT_LAYOUT_H
#define ZT_LAYOUT_H
#include <jansson.h>
#include <stdbool.h>
#include "launch/zt_backend.h"
#include "plan/zt_jobspec.h"

typedef struct zt_layout_s zt_layout_t;

struct zt_layout_s {
    const zt_plan_t *plan;            /* the job */
    char *job_dir;                    /* logs, job.json, config */
    char *base_dir;                   /* base output directory (plan's, or job_dir) */
    char *trial;                      /* trial id, or NULL outside a study */
    char *coordinator;                /* control-plane endpoint, tcp://ADDR:P */
    char *credentials;                /* the folder of the replicas' key files (NULL: unsecured) */
    int incarnation;                  /* job attempt, from 0 */
    zt_placement_t placement;         /* where every replica runs (the backend's choice) */
    int first[ZT_POOLS];              /* ordinal of replica 0 of each pool in the placement */
    /* An elastic pool 1: which of its replicas are members of the current
     * membership generation `group` (NULL: every replica, no generation,
     * group -1). The frameworks' variables (CLUSTER_SPEC, TF_CONFIG,
     * WORLD_SIZE, RANK) name the members only, densely numbered. */
    const bool *member;
    int64_t group;
    int epoch_world;                  /* the trainers an epoch is counted for: the chief and pool 1's start */
};

/* Lays out the job on the backend's placement (taken over). base_dir
 * defaults to job_dir. */
int zt_layout_init(zt_layout_t *self, const zt_plan_t *plan, zt_placement_t *placement_p,
                   const char *job_dir, const char *trial);
void zt_layout_fini(zt_layout_t *self);
/* The place of replica (pool, index), and its ordinal in the placement. */
const zt_place_t *zt_layout_place(const zt_layout_t *self, int pool, int index);
/* The replica moves to place pl (an elastic slot given a new node). */
void zt_layout_move(zt_layout_t *self, int pool, int index, const zt_place_t *pl);
int zt_layout_ordinal(const zt_layout_t *self, int pool, int index);

/* The replica's index among its pool's members (pool 1 of an elastic
 * job: the members below it), -1 when it is not a member. */
int zt_layout_dense(const zt_layout_t *self, int pool, int index);

/* "workerpoolN-I" */
void zt_layout_name(int pool, int index, char *buf, size_t size);
/* The host:port list of a pool. */
/* {"addr:port": host} for every replica (ZT_HOSTS). */
json_t *zt_layout_hosts(const zt_layout_t *self);
json_t *zt_layout_pool_addresses(const zt_layout_t *self, int pool);
json_t *zt_layout_cluster_spec(const zt_layout_t *self, int pool, int index);
/* NULL when the job has a single replica (the service sets none then). */
json_t *zt_layout_tf_config(const zt_layout_t *self, int pool, int index);
/* The frameworks' variables of one replica, in order: [[name, value], ...]. */
json_t *zt_layout_env(const zt_layout_t *self, int pool, int index);
/* The rest of its environment, after the services' views: its GPUs, the
 * hypertune metric file, ZT_*, PYTHONPATH (python_first, when not NULL,
 * first), and the pool's own env[] last. */
void zt_layout_env_finish(json_t *env, const zt_layout_t *self, int pool, int index, const char *python_first);
/* The value of name in a replica's environment (env: [name, value]
 * pairs), or NULL. */
const char *zt_layout_env_value(json_t *env, const char *name);
/* Appends [name, value] to a replica's environment (env: such pairs); the
 * _json form writes value compact and takes its reference. */
void zt_layout_put(json_t *env, const char *name, const char *value);
void zt_layout_put_json(json_t *env, const char *name, json_t *value);
/* In a trial, makes the hypertune metric file's folder (a program may write
 * CLOUD_ML_HP_METRIC_FILE without making its folder). */
void zt_layout_make_folders(const zt_layout_t *self);
/* The replica's config directory (SageMaker's config files live there). */
char *zt_layout_config_dir(const zt_layout_t *self, int pool, int index);
/* The hypertune metric file of replica (pool, index) of a trial whose base
 * output folder is base_dir (CLOUD_ML_HP_METRIC_FILE; a study reads the
 * primary's). Heap. */
char *zt_layout_hp_metric_file(const char *base_dir, int pool, int index);

/* torchrun's variables over a placement of two hosts; aborts on failure. */
void zt_layout_selftest(void);

#endif
