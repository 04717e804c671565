/* zt_state: the states of a job, a replica, a study and a trial, and what
 * follows from them: which are final, and the exit status of the commands
 * that wait for one (`ztrain run`, `tune`, `wait`). The CLI, the
 * coordinator, Prometheus and studies all ask here; a state is compared as
 * a string nowhere else. */
#ifndef ZT_STATE_H
#define ZT_STATE_H
#include <stdbool.h>

/* A job's states, in the order a job goes through them. */
typedef enum {
    ZT_JOB_QUEUED, ZT_JOB_PENDING, ZT_JOB_RUNNING, ZT_JOB_SUCCEEDED, ZT_JOB_FAILED,
    ZT_JOB_CANCELLING, ZT_JOB_CANCELLED, ZT_JOB_STATES
} zt_job_state_t;

/* A replica's states (job.json's replicas[].state). */
typedef enum {
    ZT_REP_PENDING, ZT_REP_STARTING, ZT_REP_RUNNING, ZT_REP_RESTARTING, ZT_REP_SUCCEEDED, ZT_REP_FAILED,
    ZT_REP_STOPPED, ZT_REP_CANCELLED, ZT_REP_STATES
} zt_rep_state_t;

/* The exit status of `ztrain run`, `tune`, `wait` and the other commands. */
enum { ZT_CLI_OK = 0, ZT_CLI_FAILED = 1, ZT_CLI_USAGE = 2, ZT_CLI_CANCELLED = 3 };

/* "RUNNING"; NULL out of range. */
const char *zt_job_state_name(zt_job_state_t state);
/* A replica's state by number, from 0 (PENDING) until NULL. */
const char *zt_replica_state_name(int state);
/* The job state of that name: true with *out. */
bool zt_job_state_parse(const char *name, zt_job_state_t *out);

/* The static name of the job, replica, study or trial state spelled
 * `name` (one read from a file, say), or NULL when there is none. */
const char *zt_state_known(const char *name);
/* Whether a job, a study or a trial in state `name` has ended: SUCCEEDED,
 * FAILED, CANCELLED, and a trial's STOPPED (early) and INFEASIBLE. NULL is
 * not final. */
bool zt_state_final(const char *name);
/* Whether it ended with a result that counts: SUCCEEDED, or a trial
 * STOPPED early (its measurements are kept). */
bool zt_state_succeeded(const char *name);
/* Whether a process's wait status is a stop by a signal: killed by
 * SIGTERM or SIGINT, or exiting with the status a program that caught one
 * exits with (ZT_EXIT_STOPPED, 143, or 130). */
bool zt_wait_status_stopped(int status);
/* The exit status for a final state: ZT_CLI_OK for SUCCEEDED, ZT_CLI_CANCELLED
 * for CANCELLED, ZT_CLI_FAILED for any other. */
int zt_state_exit_code(const char *name);

#endif
