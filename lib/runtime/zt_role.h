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
    const char *summary;      /* one line for --help */
} zt_role_info_t;

int zt_role_main(const zt_role_info_t *info, int argc, char **argv);

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

/* 0, or -1 (logged) when the place is incomplete. */
int zt_server_place(int argc, char **argv, zt_server_place_t *out);
/* The start of a pool-2 server main: logging as role, its place, heap
 * tuning, and registration with the coordinator when ZT_COORDINATOR is set
 * (*rep_p, else NULL). 0, or -1 with the reason logged. */
int zt_server_start(const char *role, int argc, char **argv, zt_server_place_t *place,
                    zt_replica_t **rep_p);
/* Checks the knobs set in the environment; logs the first bad one and
 * returns false. Every role binary calls it before its work. */
bool zt_role_knobs_ok(void);
/* True on SIGINT/SIGTERM or when the coordinator asked replica (may be NULL) to stop. */
bool zt_role_stop_requested(void *replica);

#endif
