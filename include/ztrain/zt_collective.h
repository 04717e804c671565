/* ztrain: collectives of any size over one fixed all-reduce group.
 *
 * zt_allreduce.h needs every tensor declared before the group commits, and
 * a Reduction Server keeps one layout for the life of a job. A collective
 * (zt_coll) commits a layout that does not depend on the model: a small
 * agreement tensor and K slots of the fusion threshold each (K is
 * ZT_COLL_ROUND_BYTES / threshold). Any data then streams through the slots:
 * a slot is sent when it is full, and when all K are in flight the round
 * completes and the next begins. This is what the Python package binds: its
 * allreduce and broadcast, its DDP comm hook and its DistributedOptimizer.
 *
 * zt_coll_allreduce and zt_coll_broadcast first agree on the call with every
 * worker (what, how many elements, which root); a mismatch fails the call on
 * every worker alike, naming each worker's call, and the group goes on.
 * zt_coll_add / zt_coll_finish stream regions of one step without that
 * agreement, for callers whose regions are the same everywhere by
 * construction (DDP buckets, a model's gradients in a fixed order).
 *
 * Every call is made from one thread at a time. Data is float32 (sums);
 * a broadcast moves any bytes. */
#ifndef ZT_COLLECTIVE_H
#define ZT_COLLECTIVE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "zt_allreduce.h"
#include "zt_job.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zt_coll_t zt_coll_t;

/* Makes the group and commits it (every worker calls this); NULL with the
 * reason in why when it cannot. opts as zt_allreduce_new; timeout_ms < 0:
 * ZT_ALLREDUCE_TIMEOUT_MS. */
zt_coll_t *zt_coll_new(const zt_allreduce_opts_t *opts, int timeout_ms, char *why, size_t why_size);
void zt_coll_destroy(zt_coll_t **self_p);

int zt_coll_rank(zt_coll_t *self);
int zt_coll_size(zt_coll_t *self);
/* Bytes a slot holds (the fusion threshold) and slots per round. */
int64_t zt_coll_slot_bytes(zt_coll_t *self);
int zt_coll_slots(zt_coll_t *self);
/* Rounds completed since the group committed (agreements included). */
int64_t zt_coll_rounds(zt_coll_t *self);
/* The all-reduce's layout (zt_allreduce_layout): with ZT_AUTOTUNE (or
 * HOROVOD_AUTOTUNE) the search runs over the collective's first rounds,
 * through fusion thresholds from the slot size up (a bucket then joins
 * slots; a round's part-filled bucket is padded with zeros). */
int zt_coll_layout(zt_coll_t *self, int64_t *threshold, int *cycle_ms, bool *searching);

/* Sums n floats over every worker, in place (average: divided by the
 * workers). ZT_EINVAL when the workers' calls differ (zt_coll_error says
 * how); ZT_ETIMEDOUT or ZT_EIO when a peer is gone. */
int zt_coll_allreduce(zt_coll_t *self, float *data, int64_t n, bool average, int timeout_ms);
/* Copies root's bytes to every worker, bit for bit. */
int zt_coll_broadcast(zt_coll_t *self, void *data, int64_t bytes, int root, int timeout_ms);

/* Streams n floats into this step's all-reduce: full slots are sent at
 * once. The region must stay valid until the round that holds its end
 * completes (at the latest, zt_coll_finish); its sum (or average) is
 * written back into it. A call may complete a round and block for it. */
int zt_coll_add(zt_coll_t *self, float *data, int64_t n, bool average, int timeout_ms);
/* Sends what is left and completes the step: every region added is
 * summed when it returns 0. */
int zt_coll_finish(zt_coll_t *self, int timeout_ms);
/* Regions added and not yet finished. */
int zt_coll_pending(zt_coll_t *self);

/* A round that fn(arg) says to give up fails with ZT_ECANCELLED (an
 * elastic group that lost a member; see zt_allreduce_abandon_when). The
 * collective is then broken: make the group's next one. */
void zt_coll_abandon_when(zt_coll_t *self, bool (*fn)(void *arg), void *arg);

/* The last failure, for people. */
const char *zt_coll_error(zt_coll_t *self);

/* The job's all-reduce group for the trainers: through its reducers, else a
 * ring between the trainers (each binds its own host:port). Every trainer
 * calls it; NULL with the reason in why. */
zt_coll_t *zt_job_collective(const zt_job_t *job, int timeout_ms, char *why, size_t why_size);

#ifdef __cplusplus
}
#endif
#endif
