/* zt_ar_internal: what the all-reduce client's three parts share: the API
 * and fusion buckets (zt_allreduce.c), the reducer transport
 * (zt_ar_reducers.c) and the ring between workers (zt_ar_ring.c). Private
 * to lib/allreduce. */
#ifndef ZT_AR_INTERNAL_H
#define ZT_AR_INTERNAL_H
#include "ztrain/zt_allreduce.h"
#include "allreduce/zt_arlayout.h"
#include "allreduce/zt_ar_tune.h"
#include "wire/zt_msg.h"
#include "wire/zt_transport.h"
#include "base/zt_shard.h"
#include "wire/zt_spin.h"
#include "wire/zt_shm.h"
#include "wire/zt_bulk.h"
#include "base/zt_util.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_knobs.h"
#include "ztrain/zt_log.h"
#include <czmq.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define PIECE_BYTES self->layout.piece_bytes
#define RESEND_MS 2000
/* A reducer's stream silent this long while a round waits on it is opened
 * again (a reducer that restarted drops what it holds no stream of). */
#define UNHEARD_MS (3 * RESEND_MS)
#define MAX_PENDING 4096
#define ZT_AR_ERRLEN 1024

typedef struct {
    char name[64];              /* tensor name */
    int64_t shape[8];
    int ndims;
    int dtype;
    void *data;                 /* caller's buffer this round */
    bool submitted, sent;       /* this round */
    int64_t landed;             /* elements of this round's sum written into data as they came */
    float scale;                /* the factor those are written with (zt_ar_submit_scaled), else 1 */
} zt_ar_tensor_t;

typedef struct {
    char *buf;                  /* packed contributions, then the results */
    char *last;                 /* the previous round's result (a restarted reducer may ask) */
    int64_t last_gen;           /* its generation, -1 none */
    size_t es;                  /* element size */
    int64_t gen;                /* rounds completed */
    bool active;                /* has submissions this round */
    int nsubmitted;
    int64_t oldest_ms;          /* first submitted-unsent tensor */
    int64_t *lo, *hi;           /* per reducer chunk */
    bool **piece_done;          /* per reducer: result pieces received */
    int *npieces;
    atomic_int lent;            /* zero-copy frames ZeroMQ still holds */
    bool windowed;              /* one large tensor: pieces go out under the send window */
    bool in_shm;                /* buf and last live in the shared region: every tensor is packed */
    int64_t *wnext, *wend;      /* per reducer: next element to send, end of what to send */
    int64_t *wfly;              /* per reducer: bytes sent whose sums have not come back */
} zt_ar_state_t;

typedef struct zt_ar_idle_t zt_ar_idle_t;
typedef struct zt_ar_lanes_t zt_ar_lanes_t;

typedef struct {                /* elements [a, b) of bucket bi, handed out */
    int bi;
    int64_t a, b;
} zt_ar_run_t;

typedef struct {
    zt_msg_t msg;               /* a ring message received early */
    zmq_msg_t payload;
} zt_ar_pending_t;

struct zt_allreduce_t {
    int rank, workers, R;
    int64_t group;              /* membership generation (opts.group), in every message */
    char **reducer_addrs;
    zt_bulk_t **red;            /* per reducer: the way to it (sealed to another host in a sealing job) */
    uint64_t seal_drops;        /* sums that did not open (counted, dropped) */
    uint64_t stalls;            /* waits that sent pieces again after RESEND_MS without a
                                 * sum (zt_allreduce_stalls; lanes add atomically) */
    char **peer_addrs;
    zt_bulk_server_t *ring_in;  /* from the previous worker */
    zt_bulk_t *ring_out;        /* to the next worker */
    zt_ar_tensor_t *t;
    int nt, tcap;
    bool committed;
    zt_ar_layout_t layout;
    zt_ar_state_t *b;
    json_t *tensors_json;
    char *layout_text;
    int64_t threshold;
    int cycle_ms;
    int64_t *window;            /* per reducer: send window in bytes; 0: none */
    bool *red_local;            /* per reducer: on this host (ipc://) */
    zt_shm_region_t *shm;       /* the buckets' buffers, read in place by local reducers */
    int64_t req;
    uint64_t seq;
    zt_ar_pending_t *pending;
    int npending;
    struct {                    /* the ring block awaited now, when it may open where it goes */
        int bucket, step;
        int64_t lo, hi;
        bool on;
    } ring_land;
    zt_spin_t spin;             /* busy-poll budget while waiting for sums */
    bool averaging;             /* the wait in progress averages (every sum written on over workers) */
    int64_t rounds;             /* waits completed (zt_allreduce_generation) */
    void *watch;                /* zt_allreduce_watch: a socket served while waiting */
    void (*watch_fn)(void *);
    void *watch_arg;
    bool (*abandon_fn)(void *);  /* zt_allreduce_abandon_when: the round in progress is given up */
    void *abandon_arg;
    zt_ar_idle_t *idle;         /* reducers: serves them between rounds (zt_ar_idle.c) */
    zt_ar_lanes_t *lanes;       /* reducers: threads that move the bytes (zt_ar_lanes.c), or NULL */
    int64_t group_base;         /* the membership generation times ZT_AR_LAYOUTS; group is
                                 * it plus layout_no */
    int layout_no;              /* the layout in force (zt_allreduce_layout) */
    zt_ar_tune_t *tune;         /* ZT_AUTOTUNE while it searches, else NULL */
    int tune_id;                /* then: its word's tensor (the last registered) */
    float tune_word[ZT_AR_TUNE_WORD];
    zt_ar_tune_setting_t reform; /* the layout to form as the next round starts (layout 0: none) */
    int reform_timeout_ms;      /* the last wait's timeout, for that forming */
    int reform_rc;              /* a forming that failed: every call fails with it */
    bool committed_once;        /* the first layout formed: later ones serve the watch while forming */
    char err[ZT_AR_ERRLEN];
};

/* Reducer r's way is open again (a sealed stream's keys agreed, a plain
 * direct end connected after a loss): our hello and what it lacks of the
 * round, again. */
void zt_ar_reopened(zt_allreduce_t *self, int r);

/* Each turn of a wait on the reducers (items[0..n) theirs): what waits to
 * go written, a broken connection made again (zt_bulk_tend). */
static inline void zt_ar_tend_reducers(zt_allreduce_t *self, zmq_pollitem_t *items, int n)
{
    for (int r = 0; r < self->R; r++)
        if (zt_bulk_tend(self->red[r], r < n ? &items[r] : NULL))
            zt_ar_reopened(self, r);
}

/* zt_allreduce_submit of a tensor whose sum is wanted times scale
 * (zt_collective's averages): written on with it as it comes where it can
 * be, which zt_ar_landed tells after the wait; else the caller scales. */
int zt_ar_submit_scaled(zt_allreduce_t *self, int tensor, void *data, float scale);
/* Whether tensor t holds its whole sum (times its scale) already. */
static inline bool zt_ar_landed(const zt_allreduce_t *self, int t)
{
    return self->t[t].landed == self->layout.numel[t];
}

/* Tensors this large are sent straight from the caller's buffer instead of
 * being packed into the bucket (packing only pays for small ones). */
#define DIRECT_BYTES (64 << 10)
static inline bool zt_ar_direct(const zt_ar_state_t *k, int64_t numel)
{
    return !k->in_shm && (int64_t) k->es * numel >= DIRECT_BYTES;
}

/* Whether any bucket has submissions this round (a round is under way). */
static inline bool zt_ar_any_active(const zt_allreduce_t *self)
{
    for (int bi = 0; self->b && bi < self->layout.nbuckets; bi++)
        if (self->b[bi].active)
            return true;
    return false;
}

/* The tensors [*first, *last] of tensor's bucket under the layout in
 * force; true when some are submitted this round and others are not (the
 * bucket goes out only once all are in: zt_coll pads such a bucket with
 * zeros when its round ends). */
static inline bool zt_ar_bucket_partial(const zt_allreduce_t *self, int tensor, int *first, int *last)
{
    if (!self->committed || !self->b || tensor < 0 || tensor >= self->nt)
        return false;
    int bi = self->layout.bucket[tensor];
    *first = self->layout.buckets[bi].first;
    *last = self->layout.buckets[bi].last;
    return self->b[bi].active && self->b[bi].nsubmitted < *last - *first + 1;
}

/* Until ZeroMQ has let go of every frame lent from k's buffer, or the
 * process is stopping: a frame queued for a reducer that is gone for good
 * (the job's stop) is never let go, and the round that follows returns
 * ZT_ESHUTDOWN itself. */
static inline void zt_ar_wait_lent(zt_ar_state_t *k)
{
    while (atomic_load(&k->lent) > 0 && !zt_stop_requested())
        zclock_sleep(0);
}

/* Sends m, stamped as this worker's, with an optional payload on the way
 * to; with lend a plain payload is lent (counted in lend->lent until
 * ZeroMQ lets it go), a sealed one sealed from the caller's bytes
 * (zt_bulk_send). A sealed way not open yet sends nothing (ZT_EPROTO): the
 * reducers' messages go again once it is, and the ring waits for it first. */
int zt_ar_send(zt_allreduce_t *self, zt_bulk_t *to, zt_msg_t *m, void *payload, size_t bytes,
               zt_ar_state_t *lend);

/* Reducers: the layout to each, a bucket's pieces out, the sums back. */
int zt_ar_commit_reducers(zt_allreduce_t *self, int timeout_ms);
void zt_ar_flush(zt_allreduce_t *self, int bi);
int zt_ar_wait_reducers(zt_allreduce_t *self, int timeout_ms);
/* Their parts, for the lanes: elements [a, b) of bucket bi to reducer r
 * (only_reducer; -1: every reducer), in pieces; again: all of it now,
 * else a windowed bucket's under its window. */
void zt_ar_send_range(zt_allreduce_t *self, int bi, int64_t a, int64_t b, int only_reducer, bool again);
/* Reducer r's replies while item says some wait: ZT_OK or the error that
 * ends the wait (its text in zt_ar_errbuf); *moved when a bucket moved. */
int zt_ar_serve_reducer(zt_allreduce_t *self, int r, const zmq_pollitem_t *item, bool *moved);
/* What reducer r lacks of this round, sent again. */
void zt_ar_resend(zt_allreduce_t *self, int r);
/* Whether every sum of reducer r's chunks of this round's buckets came. */
bool zt_ar_chunks_done(zt_allreduce_t *self, int r);
/* ZT_ETIMEDOUT naming the first sum that did not come, or ZT_OK. */
int zt_ar_timed_out(zt_allreduce_t *self, int timeout_ms);

/* Lanes (zt_ar_lanes.c): ZT_AR_THREADS threads, each moving the bytes of
 * every n-th reducer while a round is under way. zt_ar_lanes_start after
 * the commit (none when fewer than 2 would serve); zt_ar_lanes_post hands a
 * flushed range to them (false: no lanes, the caller sends it);
 * zt_ar_lanes_wait is zt_ar_wait_reducers with lanes; zt_ar_lanes_forget
 * parks them and drops what they sent (a round given up for good);
 * zt_ar_lanes_stop before the ways close. */
int zt_ar_lanes_start(zt_allreduce_t *self);
bool zt_ar_lanes_post(zt_allreduce_t *self, int bi, int64_t a, int64_t b);
int zt_ar_lanes_wait(zt_allreduce_t *self, int timeout_ms);
void zt_ar_lanes_forget(zt_allreduce_t *self);
void zt_ar_lanes_stop(zt_allreduce_t *self);
/* On a lane's thread: what it sent this round (*n runs); else NULL. */
const zt_ar_run_t *zt_ar_lane_runs(int *n);
/* Whether a sum may be written on into its caller's tensor as it comes
 * (s_land): not on a lane before the caller's wait, which brings the
 * factor (an average or not) the sum is written on with. */
bool zt_ar_may_land(void);
/* Where this thread's error text goes: its lane's, else self->err. */
char *zt_ar_errbuf(zt_allreduce_t *self);

/* Between rounds (reducers only): zt_ar_idle_start after the commit; every
 * call into the library between zt_ar_idle_enter and zt_ar_idle_leave (the
 * thread gives the sockets back first); zt_ar_idle_stop before they close.
 * The thread tells each reducer the worker is there (zt_ar_present) and
 * serves one message at a time (zt_ar_serve_idle: false when none waits). */
int zt_ar_idle_start(zt_allreduce_t *self);
void zt_ar_idle_enter(zt_allreduce_t *self);
void zt_ar_idle_leave(zt_allreduce_t *self);
void zt_ar_idle_stop(zt_allreduce_t *self);
void zt_ar_present(zt_allreduce_t *self, int r);
bool zt_ar_serve_idle(zt_allreduce_t *self, int r);

/* Ring: the neighbours connected, then reduce-scatter and all-gather. */
int zt_ar_commit_ring(zt_allreduce_t *self, int timeout_ms);
int zt_ar_wait_ring(zt_allreduce_t *self, int timeout_ms);

#endif
