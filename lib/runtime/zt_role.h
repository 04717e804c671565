/* zt_role: the life of a role binary that has no work of its own yet:
 * parse flags, register, heartbeat, optionally wait for RUNNING and do
 * --run-seconds of placeholder work, then exit cleanly on shutdown. */
#ifndef ZT_ROLE_H
#define ZT_ROLE_H
#include <stdbool.h>
#include "ztrain/zt_replica.h"

typedef struct {
    const char *binary;       /* "ztrain-worker" */
    const char *role;         /* "worker" */
} zt_role_info_t;

/* One command-line flag of a binary. */
typedef struct {
    const char *name;         /* "checkpoint-dir": "--checkpoint_dir" is accepted too */
    int has_arg;              /* no_argument, required_argument, optional_argument */
    int id;                   /* what the callback is told */
    const char *arg;          /* its argument in --help ("DIR"), or NULL */
    const char *help;         /* one line */
} zt_flag_t;

/* Parses argv with getopt_long over flags (ended by a NULL name) plus
 * --help and --version: on(id, value, ctx) for each flag given, in order
 * (0: fine; else the parse fails). An unknown flag, a missing argument or a
 * stray argument is an error naming it. Returns 0 to go on, 1 when --help
 * or --version was printed (exit 0), 2 on an error (printed; exit 2).
 * --help prints usage, the binary's own flags, then only the knobs that
 * apply to knob_roles. */
int zt_role_parse(const char *binary, const char *usage, unsigned knob_roles, const zt_flag_t *flags,
                  int argc, char **argv, int (*on)(int id, const char *value, void *ctx), void *ctx);

/* The placeholder replica's flags (--idle, --run-seconds, --exit-code), for
 * a binary's own flag table; ids from ZT_ROLE_FLAG_ID on. */
#define ZT_ROLE_FLAG_ID 1000
#define ZT_ROLE_FLAGS                                                                                   \
    { "idle", 0, ZT_ROLE_FLAG_ID, NULL, "register, then wait for the end of the job (no work)" },     \
    { "run-seconds", 1, ZT_ROLE_FLAG_ID + 1, "S", "register, wait for RUNNING, work S seconds, exit" }, \
    { "exit-code", 1, ZT_ROLE_FLAG_ID + 2, "N", "status to exit with after --run-seconds (default 0)" }
typedef struct {
    bool placeholder;         /* --idle or --run-seconds given */
    double run_seconds;       /* -1: until the job ends */
    int exit_code;
} zt_role_opts_t;
/* Takes one of ZT_ROLE_FLAGS into o: 0, or -1 (printed) for a bad value;
 * 1 when id is not one of them. */
int zt_role_flag(const char *binary, int id, const char *value, zt_role_opts_t *o);
/* The placeholder replica: register, heartbeat, --run-seconds of "work". */
int zt_role_main(const zt_role_info_t *info, const zt_role_opts_t *o);

/* Where a server replica of pool 2 (parameter server, reducer) sits: from
 * the environment `ztrain run` sets (ZT_ADDRESS, ZT_INDEX, CLUSTER_SPEC's
 * workerpool2, AIP_CHECKPOINT_DIR), overridden by --bind, --index, --servers,
 * --checkpoint-dir; other arguments are ignored. */
typedef struct {
    char bind[256];              /* tcp://host:port */
    int index;                   /* this server */
    int count;                   /* servers in the pool */
    const char *checkpoint_dir;  /* may be NULL */
} zt_server_place_t;

/* The place from the environment, then the command line (--bind, --index,
 * --servers, and --checkpoint-dir when with_ckpt). Returns as
 * zt_role_parse. */
int zt_server_place(const char *binary, const char *usage, unsigned knob_roles, bool with_ckpt, int argc,
                    char **argv, zt_server_place_t *out);
/* The start of a pool-2 server main, its place parsed: logging as role,
 * the knobs, the place complete, heap tuning, and registration with the
 * coordinator when ZT_COORDINATOR is set (*rep_p, else NULL). 0, or -1 with
 * the reason logged. */
int zt_server_start(const char *role, const zt_server_place_t *place, zt_replica_t **rep_p);
/* zt_private_files, zt_log_init, and the replica's name (workerpoolN-I)
 * on every line when the coordinator started this process (ZT_POOL,
 * ZT_INDEX). */
void zt_role_log_init(const char *role, int index);
/* Checks the knobs set in the environment; logs the first bad one and
 * returns false. Every role binary calls it before its work. */
bool zt_role_knobs_ok(void);
/* Messages refused or dropped, of one kind (non-finite gradients, a
 * malformed message, ...): zt_role_refused counts one and logs "refused
 * WHAT" at most once per 5 s with the count since (so a flood costs no
 * log), and reports the total to the coordinator as metric `metric` at
 * most once a second (rep or metric may be NULL: no report). */
typedef struct {
    int64_t total, unlogged, logged_ms, reported, reported_ms;
} zt_refusals_t;
void zt_role_refused(zt_refusals_t *r, zt_replica_t *rep, const char *metric, const char *what);
/* Reports a total not reported yet, once a second has passed: servers call
 * it from their loops, so the last of a burst reaches job.json too. */
void zt_role_refusals_flush(zt_refusals_t *r, zt_replica_t *rep, const char *metric);
/* True on SIGINT/SIGTERM or when the coordinator asked replica (may be NULL) to stop. */
bool zt_role_stop_requested(void *replica);

#endif
