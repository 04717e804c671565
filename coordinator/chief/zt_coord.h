/* zt_coord: the chief. Starts every replica of a plan through a backend,
 * runs the control plane (ROUTER: register, heartbeat, metric, done),
 * supervises as the managed service does (restart in place, retry the job,
 * fail on a user error, succeed when pool 0 exits 0, cancel on timeout or
 * signal), and writes every state change atomically to <job-dir>/job.json. */
#ifndef ZT_COORD_H
#define ZT_COORD_H
#include <czmq.h>
#include <stdbool.h>
#include "launch/zt_backend.h"
#include "plan/zt_jobspec.h"
#include "plan/zt_state.h"

typedef struct {
    const char *job_dir;       /* absolute; made when missing */
    const char *trial;         /* trial id or NULL */
    bool cpu_only;             /* run without GPUs */
    bool echo;                 /* copy replica output to stdout */
    int metrics_port;          /* Prometheus /metrics on ZT_METRICS_ADDR (0: any port; -1: off) */
} zt_coord_opts_t;

typedef struct zt_coord_t zt_coord_t;

/* `ztrain scale` asks the coordinator for a new size of an elastic pool
 * with a file of its own in the job directory, named with this prefix and
 * its request's id ("scale-request-ID.json"): {"id", "pool", "replicas"}.
 * The coordinator takes every such file (only a regular file of its own
 * user's), oldest id first, removes it, and answers each in job.json's
 * elastic.requests (the newest 32; elastic.lastRequest the newest). */
#define ZT_SCALE_REQUEST_PREFIX "scale-request-"

/* Takes the plan (and the backend) over. */
zt_coord_t *zt_coord_new(zt_plan_t **plan_p, zt_backend_t **backend_p, const zt_coord_opts_t *opts);
void zt_coord_destroy(zt_coord_t **self_p);
/* Runs the job to its end; returns the final state. */
zt_job_state_t zt_coord_run(zt_coord_t *self);

/* For the coordinator's fuzzer (tests/fuzz/fuzz_coord.c): starts every
 * replica, as run does first, and hands one received message body to the
 * control-plane handler as if it came from identity id over a connection
 * that authenticated as replica who (NULL: a plain socket). */
void zt_coord_start(zt_coord_t *self);
void zt_coord_handle(zt_coord_t *self, zframe_t *id, const void *body, size_t len, const char *who);

#endif
