/* ztrain: a replica's link to its coordinator (control plane).
 * A program that links libztrain calls zt_replica_new() at start: it reads
 * ZT_COORDINATOR, ZT_POOL, ZT_INDEX, ZT_INCARNATION from the environment,
 * registers, and heartbeats from a background thread so that long work in
 * the caller never delays a heartbeat. */
#ifndef ZT_REPLICA_H
#define ZT_REPLICA_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zt_replica_t zt_replica_t;

/* Registers with the coordinator named by the environment. role is printed
 * by the coordinator ("worker", "paramserver"...). Returns NULL and logs
 * why when the environment is incomplete or registration times out. */
zt_replica_t *zt_replica_new(const char *role, int timeout_ms);
void zt_replica_destroy(zt_replica_t **self_p);

int zt_replica_pool(zt_replica_t *self);
int zt_replica_index(zt_replica_t *self);

/* Reports a metric (name, value, step) to the coordinator. */
int zt_replica_report_metric(zt_replica_t *self, const char *name, double value, int64_t step);

/* The metric name that carries a failed checkpoint (its value the ZT_E*
 * code): the coordinator records it as an event, not a metric. */
#define ZT_METRIC_CHECKPOINT_ERROR "checkpoint_error"
/* Tells the coordinator that the checkpoint of step could not be written
 * (code: a ZT_E* code, ZT_ENOSPC for a full disk): job.json's events and
 * `ztrain status` say so at once, not at the job's end. */
int zt_replica_report_checkpoint_error(zt_replica_t *self, int64_t step, int code);

/* True once the coordinator has told this replica to shut down. */
bool zt_replica_shutdown_requested(zt_replica_t *self);

/* The status a program that stopped (SIGTERM, SIGINT or the coordinator's
 * SHUTDOWN) exits with: 0 when the coordinator asked (the job is ending),
 * ZT_EXIT_STOPPED when a signal came that the coordinator did not announce
 * (a preemption: the job restarts the replica, which resumes; self may be
 * NULL, a program that never registered). -1 when no stop came. */
int zt_replica_stop_status(zt_replica_t *self);

/* A program that saves on its way out of a stop (a checkpoint asked of the
 * parameter servers) holds the stop meanwhile: hold true, then false (calls
 * nest; per thread). While held, libztrain's waits on this thread do not
 * end at once with ZT_ESHUTDOWN but run to their own timeout, which the
 * caller keeps within the grace before SIGKILL (ZT_STOP_GRACE_MS, or the
 * cluster's KillWait under Slurm). */
void zt_replica_hold_stop(bool hold);

/* Blocks until the coordinator asks for shutdown, SIGTERM/SIGINT arrives,
 * or timeout_ms passes (-1: no timeout). Returns 0 on shutdown/signal,
 * ZT_ETIMEDOUT on timeout. */
int zt_replica_wait_shutdown(zt_replica_t *self, int timeout_ms);

/* Tells the coordinator a checkpoint is complete: its step, its name
 * ("checkpoints/ckpt-..."), and the endpoint that serves its files. The
 * coordinator records it and passes it on to the evaluators. */
int zt_replica_notify_checkpoint(zt_replica_t *self, int64_t step, const char *name,
                                 const char *address);
/* Announces checkpoint folder dir (ROOT/ckpt-N, ROOT being AIP_CHECKPOINT_DIR
 * or AIP_MODEL_DIR, "checkpoints" and "model" when unset) at step, and
 * serves both folders' files to the evaluators from a file server of this
 * replica, started on the first call. 0, ZT_EINVAL for a folder elsewhere,
 * or ZT_EIO. */
int zt_replica_announce_checkpoint(zt_replica_t *self, int64_t step, const char *dir);
/* Tells the coordinator a synchronous trainer restarted into its running
 * group has the group's state and trains again, at step (all-reduce round
 * gen): it counts as back, and a later loss is again recovered in place. */
int zt_replica_notify_rejoined(zt_replica_t *self, int64_t step, int64_t gen);
/* A trainer of an elastic pool: the newest membership the coordinator
 * decided, once it is newer than generation `after`: its generation, this
 * trainer's rank in it (-1: it leaves the group) and the group's size.
 * Waits up to timeout_ms (0: just looks; -1: forever). 0, ZT_ETIMEDOUT, or
 * ZT_ESHUTDOWN. */
int zt_replica_membership(zt_replica_t *self, int64_t after, int timeout_ms, int64_t *group, int *rank,
                          int *world);
/* Whether a membership newer than generation `group` came that gives up
 * the round in progress (a member was lost and will never send its part). */
bool zt_replica_round_abandoned(zt_replica_t *self, int64_t group);
/* A collective (zt_collective.h) of membership generation `group`: its
 * round in progress is given up (ZT_ECANCELLED) when the coordinator says
 * the group goes on without a lost member. For one collective at a time. */
struct zt_coll_t;
void zt_replica_follow(zt_replica_t *self, struct zt_coll_t *coll, int64_t group);
/* Tells the coordinator this trainer trains in generation `group` as
 * `rank` from `step` on: the change is done once every member has said so. */
int zt_replica_notify_regrouped(zt_replica_t *self, int64_t group, int rank, int64_t step);
/* The newest checkpoint announced and not yet taken; waits up to timeout_ms
 * (-1: forever). 0, ZT_ETIMEDOUT, or ZT_ESHUTDOWN. */
int zt_replica_next_checkpoint(zt_replica_t *self, int64_t *step, char *name, size_t name_size,
                               char *address, size_t address_size, int timeout_ms);

/* Blocks until the coordinator reports the job RUNNING (every replica up).
 * 0, ZT_ETIMEDOUT, or ZT_ESHUTDOWN when asked to stop first. */
int zt_replica_wait_running(zt_replica_t *self, int timeout_ms);

#ifdef __cplusplus
}
#endif
#endif
