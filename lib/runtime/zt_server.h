/* zt_server: where a server replica of pool 2 (parameter server, reducer)
 * sits and how its main starts: from the environment `ztrain run` sets
 * (ZT_ADDRESS, ZT_INDEX, CLUSTER_SPEC's workerpool2, AIP_CHECKPOINT_DIR),
 * overridden by --bind, --index, --servers, --checkpoint-dir. */
#ifndef ZT_SERVER_H
#define ZT_SERVER_H
#include <stdbool.h>
#include "ztrain/zt_replica.h"

typedef struct {
    char bind[256];              /* tcp://host:port */
    int index;                   /* this server */
    int count;                   /* servers in the pool */
    const char *checkpoint_dir;  /* may be NULL */
} zt_server_place_t;

/* The place from the environment, then the command line (--bind, --index,
 * --servers, and --checkpoint-dir when with_ckpt). Returns as
 * zt_cmdline_parse. */
int zt_server_place(const char *binary, const char *usage, unsigned knob_roles, bool with_ckpt, int argc,
                    char **argv, zt_server_place_t *out);
/* The start of a pool-2 server main, its place parsed: logging as role,
 * the knobs, the place complete, heap tuning, and registration with the
 * coordinator when ZT_COORDINATOR is set (*rep_p, else NULL). 0, or -1 with
 * the reason logged. */
int zt_server_start(const char *role, const zt_server_place_t *place, zt_replica_t **rep_p);

#endif
