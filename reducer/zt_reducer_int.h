/* zt_reducer's insides, shared by its message handling (zt_reducer.c)
 * and its buckets' state (zt_reducer_state.c). */
#ifndef ZT_REDUCER_INT_H
#define ZT_REDUCER_INT_H
#include "zt_reducer.h"
#include "zt_ranges.h"
#include "zt_held.h"
#include "allreduce/zt_arlayout.h"
#include "base/zt_refusals.h"
#include "wire/zt_bulk.h"
#include "wire/zt_msg.h"
#include "wire/zt_shm.h"
#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <zmq.h>

#define MAX_WORKERS 256
#define PIECE_BYTES self->layout.piece_bytes

typedef struct {
    int64_t lo, hi;            /* our chunk of the bucket */
    int dtype;
    zt_held_t *held;           /* per worker: its pieces of this generation, by reference
                                * until their blocks are summed (in rank order) */
    zt_ranges_t *from;          /* per worker: what of the chunk it sent (held or summed) */
    int64_t gen;               /* generation being summed, -1 unknown */
    int64_t started_ms;        /* first piece of this generation */
    int64_t warned_ms;         /* last "still waiting" log */
    void *res[2];              /* sums by generation parity, in the payload dtype */
    atomic_int res_lent[2];    /* zero-copy frames of each that ZeroMQ still holds */
    int64_t result_gen;        /* its generation, -1 none */
    bool *block_sent;          /* this generation: result block j already sent */
    int nblocks;               /* blocks of PIECE_BYTES in the chunk (1 if empty) */
    int64_t per;               /* elements of a block */
    int blocks_sent;
    int64_t want_gen;          /* restarted: the older sum being fetched from a worker, -1 */
    zt_ranges_t want_got;       /* what of it has arrived */
    int64_t asked_ms;          /* when we last asked */
    int64_t probed_ms;         /* when we last asked the silent workers (s_probe_ahead) */
} s_bucket_t;

struct zt_reducer_t {
    zt_reducer_opts_t opts;
    bool allow_nonfinite;      /* ZT_ALLOW_NONFINITE */
    zt_refusals_t nonfinite;   /* pieces refused for NaN or infinity */
    zt_refusals_t dropped;     /* malformed messages */
    zt_refusals_t unsealed;    /* TCP messages not sealed under the job's keys */
    zt_refusals_t stale;       /* messages of an earlier group (membership generation) */
    int64_t group;             /* the group's membership generation: a hello of a higher
                                * one (an elastic group grown or shrunk) starts it afresh */
    zt_bulk_server_t *srv;     /* the workers' way in (sealed from another host in a sealing job) */
    char *layout_text;         /* the agreed tensor list JSON */
    int64_t hash;
    int workers;               /* N */
    zt_ar_layout_t layout;
    s_bucket_t *buckets;
    bool configured;           /* layout known */
    bool ready_sent;           /* every worker said hello, same layout */
    bool failed;               /* a mismatch was found */
    char failure[ZT_MSG_STR_MAX];
    zmq_msg_t ids[MAX_WORKERS];/* each worker's identity, once known */
    bool have_id[MAX_WORKERS];
    bool said_hello[MAX_WORKERS];
    int64_t hello_req[MAX_WORKERS];
    int64_t asked_ms[MAX_WORKERS]; /* when each was last told to say hello (NOT_CONFIGURED) */
    json_t *first_tensors;     /* tensors of the first hello, for mismatch messages */
    int first_rank;
    uint64_t seq;
    int64_t warn_ms;           /* ZT_COLLECTIVE_WARN_MS */
    bool local[MAX_WORKERS];   /* worker on this host: reads sums from shm in place */
    zt_shm_region_t *shm;      /* the sums (res) of every bucket, when shared */
    zt_shm_region_t *old_shm;  /* the earlier group's (or layout's), kept until every worker
                                * of the new one said hello: a slower worker may still be
                                * reading its last round's sums there */
};

/* zt_reducer_state.c. Takes the agreed layout (text) of workers workers:
 * the buckets made for it. */
int zt_reducer_configure(zt_reducer_t *self, const char *text, int workers);
/* Bucket k's pieces held and received let go, nothing of it sent: for
 * its next generation. */
void zt_reducer_reset_bucket(zt_reducer_t *self, s_bucket_t *k);
/* A new group (or layout): the buckets go, their shared sums stay a while
 * (old_shm: a slower worker may still read its last round's sums). */
void zt_reducer_free_buckets_keep_sums(zt_reducer_t *self);

#endif
