/* zt_ps_server: one parameter-server shard. It owns a contiguous range of
 * the model's flat key space, applies pushed gradients at once with its
 * optimizer (or, in sync mode, averages the pushes of all workers for a step
 * and applies them once), answers pulls (deferring those that would break
 * the staleness bound), snapshots its shard on request, and at start restores
 * from the newest good checkpoint, or from its own snapshot file when that is
 * newer: in async training a restarted server then loses at most
 * snapshot_ms of updates, not everything since the checkpoint. */
#ifndef ZT_PS_SERVER_H
#define ZT_PS_SERVER_H
#include <stdbool.h>
#include <stdint.h>

#include "ztrain/zt_replica.h"
#include <zmq.h>

typedef struct {
    const char *bind;          /* tcp://127.0.0.1:PORT */
    int index;                 /* this server */
    int servers;               /* how many */
    const char *checkpoint_dir;/* restore from here at start (may be NULL) */
    const char *snapshot_path; /* async: the shard's snapshot file, written every
                                * snapshot_ms while it changes and restored at
                                * start when newer than the checkpoint (NULL: none) */
    int snapshot_ms;
    zt_replica_t *replica;     /* reports refusals to the coordinator (NULL: none) */
} zt_ps_server_opts_t;

typedef struct zt_ps_server_t zt_ps_server_t;

zt_ps_server_t *zt_ps_server_new(const zt_ps_server_opts_t *opts);
void zt_ps_server_destroy(zt_ps_server_t **self_p);
/* Serves until should_stop(arg) is true (checked every 100 ms). */
int zt_ps_server_run(zt_ps_server_t *self, bool (*should_stop)(void *), void *arg);
/* One request as the loop receives it: [identity, header, payload?]
 * (the caller closes the parts); replies go out on the server's socket.
 * The loop's own step, public for the handler fuzzer. */
void zt_ps_server_handle(zt_ps_server_t *self, zmq_msg_t *parts, int n);
/* Step of the checkpoint restored at start, or -1. */
int64_t zt_ps_server_restored_step(zt_ps_server_t *self);

#endif
