/* zt_exchange: what a training step does with its gradients, one interface
 * over the three ways a worker trains, so that the trainer's step loop has
 * no per-mode branches:
 *   local      alone: the optimizer step here;
 *   allreduce  synchronous: gradients averaged over every worker (through
 *              reducers, or a ring between the workers), then the same
 *              optimizer step on every worker;
 *   ps         the model lives on parameter servers: gradients pushed to
 *              them tensor by tensor as backward makes them, the new values
 *              pulled back.
 * The mode comes from the replica's environment (ZT_REDUCERS,
 * ZT_PARAMSERVERS, the parameter-server pool of CLUSTER_SPEC, WORLD_SIZE).
 * The compute below (zt_compute) runs on the CPU or the replica's GPUs. */
#ifndef ZT_EXCHANGE_H
#define ZT_EXCHANGE_H
#include "zt_compute.h"
#include "zt_trainer.h"
#include "ztrain/zt_ps.h"
#include "ztrain/zt_replica.h"
#include <jansson.h>

typedef struct zt_exchange_t zt_exchange_t;

/* Connects (servers, reducers or ring) as the environment says and, for a
 * model held here, initialises it from the seed. NULL after logging why,
 * with the failure's code in *rc_p (ZT_ESHUTDOWN: the job stopped while it
 * connected; ZT_ETIMEDOUT, ZT_EIO...: as the servers or the group said). */
zt_exchange_t *zt_exchange_new(zt_compute_t *c, const zt_train_opts_t *o, zt_replica_t *rep, int rank, int world,
                               int *rc_p);
void zt_exchange_destroy(zt_exchange_t **self_p);
/* "local", "allreduce" or "ps". */
const char *zt_exchange_mode(const zt_exchange_t *self);
/* True when this worker holds the model (local, allreduce); false when the
 * parameter servers do. */
bool zt_exchange_holds_model(const zt_exchange_t *self);

/* Whether this trainer was restarted into its running group (ZT_REJOIN)
 * and took the model from a live peer; then *step and *gen say where the
 * group is, and no checkpoint is read. */
/* The learning rate step is taken with: --lr_scaling's where the trainers
 * hold the model, the servers' (--learning_rate) with parameter servers. */
double zt_exchange_learning_rate(const zt_exchange_t *self, int64_t step);

bool zt_exchange_rejoined(const zt_exchange_t *self, int64_t *step, int64_t *gen);
/* Whether the model lives on parameter servers that apply each push as it
 * comes (asynchronous): a trainer's position is its own. */
bool zt_exchange_async_ps(const zt_exchange_t *self);

/* A trainer of an elastic pool (ZT_GROUP set) all-reduces, with each
 * step's gradients, the newest membership generation it was told of (rep):
 * every trainer sees the same sum, so all of them know at the same step
 * that the group changes after it. */
bool zt_exchange_change_due(const zt_exchange_t *self);
/* Then: switches to the newest membership (waits for the coordinator's
 * word, up to ZT_ALLREDUCE_TIMEOUT_MS): a new all-reduce with the group's
 * new count, this trainer's *rank of *world, trained from `step` on (the
 * coordinator is told as soon as the earlier all-reduce is gone, before
 * the new one's commit, which waits for the joiners); *rank -1 when it
 * leaves. */
int zt_exchange_regroup(zt_exchange_t *self, int64_t step, int *rank, int *world);
/* Resume from a checkpoint (dir, its manifest, its step): a model held here
 * reads its values and optimizer state; servers restore their own. Returns
 * the step to continue from (0 when the checkpoint cannot be read). */
int64_t zt_exchange_resume(zt_exchange_t *self, const char *dir, json_t *manifest, int64_t step);
/* Before the first step: the values where the compute needs them (pulled
 * from servers, or up to the GPUs). Every call below returns ZT_OK or the
 * failure's own code, logged: ZT_ESHUTDOWN when the job is stopping (logged
 * as information, not an error), ZT_ETIMEDOUT when a server or the group
 * did not answer in time, ZT_EDEVICE when the GPUs failed, ZT_ECANCELLED
 * when an elastic group gave the round up (it lost a member: regroup and
 * train the step again), ZT_EIO and the others as the parameter servers or
 * the all-reduce said. */
int zt_exchange_begin(zt_exchange_t *self, int64_t step);
/* One training step on order[first .. first+B): compute, exchange,
 * optimizer. *loss as zt_compute_step. */
int zt_exchange_step(zt_exchange_t *self, const int *order, int first, int B, int64_t step, float *loss);
/* Microseconds spent in steps and in their exchange since last taken. */
void zt_exchange_take_times(zt_exchange_t *self, int64_t *step_us, int64_t *exchange_us);

/* The whole model at `step` for a checkpoint: shards (values first, then optimizer
 * state) and the config to record. Free with zt_exchange_snapshot_free. */
int zt_exchange_snapshot(zt_exchange_t *self, int64_t step, zt_ps_shard_t **shards, int *nshards,
                         json_t **config);
void zt_exchange_snapshot_free(zt_exchange_t *self, zt_ps_shard_t *shards, int nshards, json_t *config);
/* After the last step: the final values in the host model (down from the
 * GPUs; from the servers when `pull`). */
int zt_exchange_finish(zt_exchange_t *self, bool pull);

#endif
