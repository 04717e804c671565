/* ztrain: the whole public API of libztrain. A program includes this and
 * links with `pkg-config --cflags --libs ztrain`.
 *
 *   zt_error.h      error codes and zt_strerror
 *   zt_log.h        the one log format
 *   zt_knobs.h      every tunable, its variable and default
 *   zt_replica.h    a replica's link to its coordinator (control plane)
 *   zt_ps.h         the parameter-server client
 *   zt_allreduce.h  all-reduce through reducers or a ring
 *   zt_collective.h collectives of any size over one all-reduce group
 *   zt_job.h        a training program's rank, peers, reducers, servers
 *   zt_half.h       float16/bfloat16 conversions */
#ifndef ZTRAIN_H
#define ZTRAIN_H
#include "zt_error.h"
#include "zt_log.h"
#include "zt_knobs.h"
#include "zt_replica.h"
#include "zt_ps.h"
#include "zt_allreduce.h"
#include "zt_collective.h"
#include "zt_job.h"
#include "zt_half.h"

#ifdef __cplusplus
extern "C" {
#endif

/* libztrain's version ("MAJOR.MINOR.PATCH"). */
const char *zt_version(void);
/* Opt-in heap tuning for processes that move large tensors: large
 * allocations reuse freed heap memory instead of fresh mmap'd pages each
 * time (ZeroMQ allocates each large message it receives), and the heap is
 * not trimmed. This changes the whole process's malloc policy (mallopt), so
 * the library never calls it by itself; ztrain's own binaries do. */
void zt_tune_malloc(void);

#ifdef __cplusplus
}
#endif
#endif
