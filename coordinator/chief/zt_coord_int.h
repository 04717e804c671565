/* The coordinator's insides, shared by the files it is split into by
 * concern; nothing outside chief/zt_coord*.c includes this.
 *   zt_coord.c            the loop: signals, reaping, timers, set-up and tear-down
 *   zt_coord_supervise.c  what a replica's start or end does to the job
 *   zt_coord_ctl.c        the control plane's messages
 *   zt_coord_doc.c        the job document (job.json) and the job's state
 *   zt_coord_elastic.c    an elastic pool's membership changes (ztrain scale)
 * The record (zt_coord_record.h), one replica's start and its output
 * (zt_crep.h: zt_coord_spawn.c, zt_coord_output.c) see none of it. */
#ifndef ZT_COORD_INT_H
#define ZT_COORD_INT_H
#include "chief/zt_coord.h"
#include "chief/zt_prom.h"
#include "chief/zt_coord_record.h"
#include "chief/zt_crep.h"
#include "launch/zt_layout.h"
#include "base/zt_refusals.h"
#include "wire/zt_msg.h"
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

/* A replica's failing exit this soon after another's loss is that loss's
 * consequence (a peer's connection reset), not a user error (ms). */
#define ZT_INCIDENT_MS 10000
/* A failing exit (1-127) while peers run is judged this long after it, so
 * that a peer's loss reaped just after it is seen as its cause (ms). */
#define ZT_VERDICT_MS 1000


/* What the coordinator does once every replica has stopped. */
typedef enum { ZT_AFTER_NOTHING, ZT_AFTER_FINISH, ZT_AFTER_RESPAWN } zt_after_t;

/* Why a control message was dropped: each reason is logged apart, at most
 * once per 5 s (zt_refusals). */
typedef enum {
    ZT_DROP_UNKNOWN_SENDER,   /* well-formed, from no replica of the job */
    ZT_DROP_UNREGISTERED,     /* from a replica not registered, or from another identity */
    ZT_DROP_MALFORMED,        /* not a message: bad shape, magic, version, type or field */
    ZT_DROP_BAD_CHECKPOINT,   /* a CHECKPOINT whose name is not a checkpoint's */
    ZT_DROP_WRONG_IDENTITY,   /* a replica's keys, claiming to be another replica */
    ZT_DROP_METRIC_LIMIT,     /* a new metric name beyond ZT_COORD_MAX_METRIC_NAMES */
    ZT_DROP_BAD_LATENCY,      /* a LATENCY histogram that does not parse */
    ZT_DROP_REASONS
} zt_drop_t;

typedef struct zt_coord_elastic_t zt_coord_elastic_t;
typedef struct zt_coord_supervisor_t zt_coord_supervisor_t;
typedef struct zt_coord_ctl_t zt_coord_ctl_t;


struct zt_coord_t {
    zt_plan_t *plan;            /* the job */
    zt_layout_t layout;         /* placement, dirs */
    zt_backend_t *backend;      /* launches replicas */
    zt_coord_opts_t opts;       /* as given */
    zt_crep_t *reps;            /* every replica, pool order */
    int nreps;                  /* how many */
    zsock_t *router;            /* control plane */
    int log_fd;                 /* <job-dir>/replica-logs/coordinator.log: this log's copy, or -1 */
    zt_prom_t *prom;            /* the Prometheus endpoint (--metrics-port), or NULL */
    char *metrics_token_file;   /* its bearer token's file (security on), or NULL */
    zt_job_state_t state;       /* job state */
    zt_msg_t last_ckpt;         /* the newest CHECKPOINT notice, for late evaluators */
    zt_coord_record_t *rec;     /* the job's record (zt_coord_record.c): its history, error, retries, preemptions */
    bool stopping;              /* stopping every replica (how, and until when: supervision's) */
    int64_t job_deadline;       /* scheduling.timeout, 0 none */
    uint64_t seq;               /* our message sequence */
    int sig_pipe[2];            /* signal handler -> loop */
    zt_coord_supervisor_t *sv;  /* supervision's own state (zt_coord_supervise.c) */
    zt_coord_ctl_t *ctl;        /* the control plane's own state (zt_coord_ctl.c) */
    zt_coord_elastic_t *el;     /* an elastic pool 1's controller (zt_coord_elastic.c), its state its own */
};

/* The job format's end (zt_format_t's finish): a success writes its
 * outputs (SageMaker's model.tar.gz and output.tar.gz; a failure to is the
 * job's failure); a failure carries the program's own account of it in the
 * job's error (failureReason). */
zt_job_state_t zt_coord_format_end(zt_coord_t *self, zt_job_state_t final);

/* zt_coord_doc.c: job.json, written atomically; the state, told to every
 * registered replica; the job's error, with the replica's log tail. */
void zt_coord_write_state(zt_coord_t *self);
void zt_coord_set_state(zt_coord_t *self, zt_job_state_t state);
void zt_coord_set_error(zt_coord_t *self, zt_crep_t *r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A run of the same allocation again (Slurm requeued it after a lost node):
 * the job goes on as its next retry, with its history. false (logged) when
 * that job has ended already, so there is nothing to run. */
bool zt_coord_continue_requeued(zt_coord_t *self);
void zt_coord_continue_earlier(zt_coord_t *self);
/* Ends the wait for the final model's evaluation when it came, its
 * evaluators are gone, or ZT_EVAL_FINAL_MS passed (s_timers). */
void zt_coord_check_final_evaluation(zt_coord_t *self);

/* zt_coord_supervise.c */
/* Supervision's own state: its limits (ZT_MAX_RESTARTS, ZT_MAX_PREEMPTIONS),
 * the last incident and its echo, the wait for the final evaluation, and
 * how the allocation is to end. */
zt_coord_supervisor_t *zt_coord_supervisor_new(void);
void zt_coord_supervisor_destroy(zt_coord_supervisor_t **self_p);
/* Whether the allocation was preempted under the job (its stop is under way). */
bool zt_coord_preempting(const zt_coord_t *self);
/* At the job's very end: the allocation is given back to run the job again
 * (requeued after a lost node), or given up. */
void zt_coord_supervise_end(zt_coord_t *self);
/* The stop under way (zt_coord_stop_all): what follows once every replica
 * is down, and the job's state then; zt_coord_stop_tick kills whoever is
 * left past the grace (ZT_STOP_GRACE_MS). */
zt_after_t zt_coord_after_stop(const zt_coord_t *self);
zt_job_state_t zt_coord_final_state(const zt_coord_t *self);
void zt_coord_stop_tick(zt_coord_t *self, int64_t now);
/* Starts every replica, calling serve (the control plane's handler) now and
 * then between starts, so that the first replicas of a large job are not
 * taken for silent while the last are still being started. */
void zt_coord_spawn_all(zt_coord_t *self, void (*serve)(zt_coord_t *self));
void zt_coord_check_all_up(zt_coord_t *self);
void zt_coord_stop_all(zt_coord_t *self, zt_after_t after, zt_job_state_t final_state);
/* Sends the parameter servers' stop that zt_coord_stop_all held for the
 * chief's last save, once no chief runs or a quarter of the grace is left. */
void zt_coord_release_held_stops(zt_coord_t *self);
/* Judges the failing exits whose verdict was held (zt_coord_replica_exited):
 * those due, or every one when all. */
void zt_coord_judge_held(zt_coord_t *self, bool all);
void zt_coord_cancel(zt_coord_t *self, const char *why);
void zt_coord_node_lost(zt_coord_t *self, const char *why);
void zt_coord_preempted(zt_coord_t *self, const char *why);
void zt_coord_replica_exited(zt_coord_t *self, zt_crep_t *r, int status);
/* A trainer's heartbeat named step: a reducer restarted in place is no
 * longer fresh once the trainers' steps go past the first they named after
 * its restart (a round has gone through it). */
void zt_coord_settle_reducers(zt_coord_t *self, int64_t step);

/* zt_coord_elastic.c */
/* After the replicas are made: the members of generation 0. */
zt_coord_elastic_t *zt_coord_elastic_new(void);
void zt_coord_elastic_destroy(zt_coord_elastic_t **self_p);
/* start: pool 1's replicaCount, the members it starts with (its slots are
 * as many as it may grow to). */
void zt_coord_elastic_init(zt_coord_t *self, int start);
/* Whether a change of membership is under way. */
bool zt_coord_elastic_changing(const zt_coord_t *self);
/* Whether r is a member of the current generation (every replica of a job
 * without an elastic pool, and of pools other than 1, is). */
bool zt_coord_is_member(const zt_coord_t *self, const zt_crep_t *r);
/* From s_timers: a scale request, the change's deadline, the next change.
 * true: the change did not finish in time, and the group is to restart
 * together in its new membership (the caller stops every replica for it). */
bool zt_coord_elastic_tick(zt_coord_t *self);
/* REGROUPED (or a joiner's REJOINED) from r: it trains in generation group
 * from step. said_regrouped: REGROUPED, which also ends a joiner's rejoin
 * (a program that took the state its own way, a Python program's sync).
 * Returns the joiner that could not be started (the job fails), or NULL. */
zt_crep_t *zt_coord_elastic_regrouped(zt_coord_t *self, zt_crep_t *r, int64_t group, int64_t step,
                                      bool said_regrouped);
/* r, told to leave the group, exited (how): true, and it counts as gone. */
bool zt_coord_elastic_left(zt_coord_t *self, zt_crep_t *r, const char *how);
/* r, a member, is lost for good (why; node_gone: its node with it): when
 * the pool keeps its minReplicaCount and the others all train, the group
 * forms again without it, giving up the round in progress (true). */
bool zt_coord_elastic_lose(zt_coord_t *self, zt_crep_t *r, const char *why, bool node_gone);
/* r, a member, was preempted (how): the group goes on without it as above,
 * and it joins again by the next change (true). */
bool zt_coord_elastic_preempted(zt_coord_t *self, zt_crep_t *r, const char *how);
/* The job ends: a change still under way is recorded cut short, and none
 * is under way any more. */
void zt_coord_elastic_end(zt_coord_t *self);
/* The group restarts together: no change is under way any more. */
void zt_coord_elastic_restart(zt_coord_t *self);
/* job.json's "elastic" (NULL without an elastic pool). */
json_t *zt_coord_elastic_json(const zt_coord_t *self);

/* zt_coord_ctl.c: the control plane's own state: each reason's refusals
 * (logged at most once per 5 s), whether messages are still queued, the
 * heartbeat and registration times (ZT_HEARTBEAT_MS,
 * ZT_HEARTBEAT_TIMEOUT_MS, ZT_REGISTER_TIMEOUT_MS, read as it is made). */
zt_coord_ctl_t *zt_coord_ctl_new(void);
void zt_coord_ctl_destroy(zt_coord_ctl_t **self_p);
/* Every running replica silent past its time (no heartbeat since
 * ZT_HEARTBEAT_TIMEOUT_MS, or no registration within
 * ZT_REGISTER_TIMEOUT_MS) is killed, to be handled as a crash; judged only
 * with the control queue read to its end (a heartbeat may wait in it). */
void zt_coord_check_silent(zt_coord_t *self);
/* Serves the control messages waiting on the router. */
void zt_coord_on_control(zt_coord_t *self);

#endif
