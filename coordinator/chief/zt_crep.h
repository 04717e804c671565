/* zt_crep: one replica as the chief supervises it, and what is done to it
 * alone: starting it through the backend with its argv, environment and
 * config files (zt_coord_spawn.c), and its output, line by line, to its
 * log and the console (zt_coord_output.c). Neither sees the rest of the
 * chief. */
#ifndef ZT_CREP_H
#define ZT_CREP_H
#include "launch/zt_backend.h"
#include "launch/zt_layout.h"
#include "plan/zt_state.h"
#include <czmq.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* One replica, as the coordinator supervises it. */
typedef struct {
    int pool;                  /* workerPoolSpecs index */
    int index;                 /* replica index in the pool */
    char name[32];             /* workerpoolN-I */
    zt_handle_t *handle;       /* the backend's, NULL when not running */
    long pid;                  /* its process's (the backend's word for it), while handle is set */
    int out_fd;                /* its stdout+stderr, -1 when closed */
    char line[4096];           /* partial output line */
    size_t line_len;           /* bytes in line */
    FILE *log;                 /* <job-dir>/replica-logs/workerpoolN-I.log */
    char *log_path;            /* its path */
    zt_rep_state_t state;      /* replica state */
    int restarts;              /* in-place restarts in this incarnation */
    int total_restarts;        /* over the whole job */
    int preemptions;           /* stopped by signals ztrain did not send, restarted uncounted */
    int last_status;           /* wait status of the last exit, -1 none */
    bool expect_register;      /* a ztrain role binary: it must register */
    bool registered;           /* registered in this run */
    bool killed_by_us;         /* we killed it (missed heartbeats or registration) */
    char killed_why[96];       /* why ("sent no heartbeat for 3000 ms") */
    bool stop_held;            /* a parameter server whose stop waits for the chief's last save */
    int64_t held_until;        /* a failing exit's verdict held until then (a peer's loss may follow it) */
    int64_t held_exit_ms;      /* when it exited */
    int held_status;
    char held_how[64];
    zframe_t *identity;        /* ROUTER identity once registered */
    int64_t started_ms;        /* when spawned */
    int64_t last_hb_ms;        /* last heartbeat */
    bool rejoining;            /* a sync trainer restarted into its running group, not yet back */
    int rejoins;               /* times it rejoined, over the whole job */
    int64_t lost_ms;           /* when it was lost (for the recovery time) */
    int64_t hb_step;           /* the step its last heartbeat named */
    bool fresh;                /* a reducer restarted in place that no round has yet gone through */
    int64_t settle_step;       /* fresh: the trainers' step that shows a round has (-1: not yet known) */
    bool leaving;              /* elastic: told to leave the group, not yet exited */
    bool regrouped;            /* elastic: trains in the membership generation being changed to */
    bool joining;              /* elastic: joins once the members that stay have switched */
} zt_crep_t;

/* zt_coord_spawn.c: starts (or restarts) r through backend, laid out by
 * layout; what the previous run left unread goes to its log first (echo:
 * the console too). ZT_OK, else the job cannot run it. */
int zt_crep_spawn(zt_crep_t *r, const zt_layout_t *layout, zt_backend_t *backend, bool echo);

/* zt_coord_output.c */
/* Opens <job-dir>/replica-logs/: every replica's log, and the coordinator's
 * own log's copy, whose fd it returns (-1: none; a failure is a warning:
 * the job runs without it). */
int zt_crep_open_logs(const char *job_dir, zt_crep_t *reps, int n);
/* Reads what r wrote, to its log (and the console with echo); on EOF or
 * error closes its fd. */
void zt_crep_read_output(zt_crep_t *r, bool echo);

#endif
