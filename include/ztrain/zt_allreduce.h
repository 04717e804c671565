/* ztrain: all-reduce for synchronous data-parallel training.
 *
 * Register every gradient tensor once, in the same order on every worker;
 * commit (the workers agree on names, shapes and dtypes, or fail with an
 * error naming the tensor and both shapes); then each step hand each tensor
 * over when its gradient is ready and wait for the result, which replaces
 * the tensor's contents (sum or average over workers).
 *
 * Tensors are packed in registration order into buckets of at most the
 * fusion threshold, identically on every worker. A bucket is sent when all
 * its tensors are ready, or what is ready of it after the cycle time. With
 * reducers (a Reduction Server) each bucket is cut into R chunks, chunk r
 * going to reducer r, which sums it over all workers and sends the sum back:
 * each worker sends and receives its bytes once. Without reducers the same
 * calls run a ring all-reduce between the workers.
 *
 * Knobs, highest precedence first: the fusion threshold is ZT_FUSION_THRESHOLD
 * (bytes), else HOROVOD_FUSION_THRESHOLD (bytes), else ZT_BUCKET_CAP_MB
 * (bucket_cap_mb, MiB), else 1 MiB; the cycle time is ZT_CYCLE_TIME_MS,
 * else HOROVOD_CYCLE_TIME (ms), else 5 ms.
 *
 * With ZT_AUTOTUNE=1 (or HOROVOD_AUTOTUNE=1) the group searches both during
 * its first rounds: rank 0 times samples of rounds under settings that a
 * Gaussian process suggests, the group forms a new layout for each, and
 * the fastest stays (the search and its choice are logged). Every worker
 * must set it alike, and submit every tensor each round (a new layout may
 * join tensors another round leaves out into one bucket). */
#ifndef ZT_ALLREDUCE_H
#define ZT_ALLREDUCE_H
#include <stdbool.h>
#include <stdint.h>
#include "zt_half.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { ZT_F32 = 0, ZT_F16 = 1, ZT_BF16 = 2 } zt_dtype_t;

typedef struct zt_allreduce_t zt_allreduce_t;

typedef struct {
    int rank;                   /* this worker, 0..workers-1 */
    int workers;                /* how many take part */
    const char *const *reducers;/* reducer endpoints ("host:port"), or NULL */
    int nreducers;              /* 0: ring between the workers */
    const char *const *peers;   /* ring: every worker's endpoint, by rank */
    int64_t fusion_threshold;   /* bytes; 0: from the knobs */
    int cycle_time_ms;          /* -1: from the knobs */
    int64_t group;              /* the membership generation (0 first): an elastic
                                 * group that grows or shrinks forms again under a
                                 * higher one, with its new workers count and ranks;
                                 * the reducers then drop the earlier group's state
                                 * and every message of an earlier group is dropped */
    int layout;                 /* the layout to join: 0, or a running group's
                                 * (zt_allreduce_layout), for a worker restarted into it */
    int autotune;               /* 0: ZT_AUTOTUNE (else HOROVOD_AUTOTUNE) decides;
                                 * 1: search; -1: never (an elastic group, whose
                                 * members come and go; a caller that does not
                                 * submit every tensor each round); 2: as 0, the
                                 * thresholds searched from the starting one up
                                 * (zt_coll, whose tensors are slots of that size) */
} zt_allreduce_opts_t;

zt_allreduce_t *zt_allreduce_new(const zt_allreduce_opts_t *opts);
void zt_allreduce_destroy(zt_allreduce_t **self_p);

/* Registers a tensor; returns its id (0, 1, ...). Before commit only. */
int zt_allreduce_register(zt_allreduce_t *self, const char *name, const int64_t *shape, int ndims,
                          zt_dtype_t dtype);
/* Agrees on the tensors with every worker (and reducer). ZT_ESPEC with the
 * mismatch in zt_allreduce_error, or ZT_ETIMEDOUT naming who is missing. */
int zt_allreduce_commit(zt_allreduce_t *self, int timeout_ms);
/* Hands a tensor over (its gradient is ready). The buffer must stay valid
 * and unmodified until wait returns; the result is written into it. */
int zt_allreduce_submit(zt_allreduce_t *self, int tensor, void *data);
/* Where to write tensor's gradient this round so that submit and wait copy
 * nothing: pass this pointer to submit, and the result is there after wait.
 * It lies in the all-reduce's own buffers (in shared memory with a reducer
 * on this host), so it changes from round to round: ask again each round,
 * before writing. After wait, read the result there, but do not write to
 * it: it is kept for a reducer that restarts during the next round. NULL
 * before commit or for a bad id. */
void *zt_allreduce_buffer(zt_allreduce_t *self, int tensor);
/* Completes every submitted tensor; average divides the sums by workers. */
int zt_allreduce_wait(zt_allreduce_t *self, bool average, int timeout_ms);
/* Rounds completed (waits that succeeded), counted from the generation
 * set below, else from 0 at commit. Every worker of a group is at the same
 * round; a worker that submits every tensor each round is at that round in
 * every bucket. */
int64_t zt_allreduce_generation(zt_allreduce_t *self);
/* A worker restarted into a running group starts at the group's round (as
 * a live peer reports it), not 0: after commit, before the first submit.
 * ZT_EINVAL otherwise. */
int zt_allreduce_set_generation(zt_allreduce_t *self, int64_t gen);
/* While a wait blocks (with reducers), also watch the ZeroMQ socket
 * `socket` and call fn(arg) each time it is readable: a worker answers a
 * restarted peer from inside the round that peer holds up. NULL: none.
 * Also while autotune forms a new layout as a round starts (it waits for
 * every worker's hello): zt_allreduce_in_round then says false. */
void zt_allreduce_watch(zt_allreduce_t *self, void *socket, void (*fn)(void *arg), void *arg);
/* While a wait blocks (with reducers), also ask fn(arg) every 50 ms or so:
 * when it says true, the wait gives the round up and returns ZT_ECANCELLED
 * (an elastic group whose lost member will never send its part forms again
 * without it; the all-reduce is then destroyed). NULL: never. */
void zt_allreduce_abandon_when(zt_allreduce_t *self, bool (*fn)(void *arg), void *arg);
const char *zt_allreduce_error(zt_allreduce_t *self);
int zt_allreduce_buckets(zt_allreduce_t *self);
/* How often a wait heard no sum from a reducer for 2 s and sent that
 * reducer its pieces again (a reducer restarted or a connection lost; in
 * a healthy group, none): over the all-reduce's life. */
uint64_t zt_allreduce_stalls(zt_allreduce_t *self);
/* The layout in force: its number (0 first; ZT_AUTOTUNE forms one for each
 * setting it tries and one when it is done), and, where not NULL, its
 * fusion threshold and cycle time, and whether the search goes on. A
 * caller that relies on where zt_allreduce_buffer puts tensors must look
 * again when the number changes (it changes inside a wait). */
int zt_allreduce_layout(zt_allreduce_t *self, int64_t *threshold, int *cycle_ms, bool *searching);
/* Whether a round is under way (something submitted, not yet waited for). */
bool zt_allreduce_in_round(zt_allreduce_t *self);
/* Whether ZT_AUTOTUNE (else HOROVOD_AUTOTUNE) asks for the search: a caller
 * that cannot have it (opts.autotune -1) says so. */
bool zt_allreduce_autotune_asked(void);
int64_t zt_allreduce_threshold(zt_allreduce_t *self);

#ifdef __cplusplus
}
#endif
#endif
