/* zt_reducer: one Reduction Server replica. Reducer r of R owns chunk r of
 * every bucket: it sums the pieces all N workers send for it (float32;
 * float16 and bfloat16 summed in float32) as they arrive, and when every
 * worker has contributed it streams the sum back to each of them. Pieces can
 * come in any cut and again (a worker resends what was not answered): each
 * worker's received ranges are tracked, so nothing is counted twice. */
#ifndef ZT_REDUCER_H
#define ZT_REDUCER_H
#include <stdbool.h>

#include "ztrain/zt_replica.h"
#include <zmq.h>

typedef struct {
    const char *bind;          /* tcp://127.0.0.1:PORT */
    int index;                 /* r */
    int reducers;              /* R */
    zt_replica_t *replica;     /* reports refusals to the coordinator (NULL: none) */
} zt_reducer_opts_t;

typedef struct zt_reducer_t zt_reducer_t;

/* A reducer's thread count from a knob's value: itself, or (0 and below)
 * one per 4 cores of the host, 1 to 4 (ZT_REDUCER_IO_THREADS,
 * ZT_REDUCER_THREADS). */
int zt_reducer_threads(int64_t knob);
zt_reducer_t *zt_reducer_new(const zt_reducer_opts_t *opts);
void zt_reducer_destroy(zt_reducer_t **self_p);
int zt_reducer_run(zt_reducer_t *self, bool (*should_stop)(void *), void *arg);
/* One message as the loop receives it: [identity, header, payload?] (the
 * caller closes the parts). The loop's own step, public for the handler
 * fuzzer. */
void zt_reducer_handle(zt_reducer_t *self, zmq_msg_t *parts, int n);

#endif
