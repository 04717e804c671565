/* zt_ps_server's insides, shared by its request handling
 * (zt_ps_server.c) and its state (zt_ps_state.c). */
#ifndef ZT_PS_SERVER_INT_H
#define ZT_PS_SERVER_INT_H
#include "zt_ps_server.h"
#include "state/zt_optim.h"
#include "wire/zt_bulk.h"
#include "wire/zt_msg.h"
#include "wire/zt_shm.h"
#include "base/zt_refusals.h"
#include <stdbool.h>
#include <stdint.h>
#include <zmq.h>

#define MAX_WORKERS 1024
#define MAX_DEFERRED 4096
#define MAX_AREAS 64

/* A worker on this host pulls through its own area of shared memory: the
 * values of a range go to the range's place there, the reply says where.
 * The worker asks this way only while no other pull of its overlaps, and
 * reads before it asks again, so nothing it reads is overwritten. */
typedef struct {
    unsigned char id[256];     /* the worker's ZeroMQ identity */
    size_t idlen;
    zt_shm_region_t *region;   /* hi - lo floats */
    uint64_t used;             /* when last used (a counter), for eviction */
} s_area_t;
typedef struct {
    zmq_msg_t identity;        /* who asked */
    zt_msg_t msg;              /* the PULL */
} s_deferred_t;

struct zt_ps_server_t {
    zt_ps_server_opts_t opts;  /* as given */
    bool allow_nonfinite;      /* ZT_ALLOW_NONFINITE */
    zt_refusals_t nonfinite;   /* pushes refused for NaN or infinity */
    zt_refusals_t dropped;     /* malformed or foreign messages */
    zt_bulk_server_t *srv;     /* the clients' way in (sealed from another host in a sealing job) */
    zt_refusals_t unsealed;    /* TCP messages not sealed under the job's keys */
    bool configured;           /* layout and optimizer known */
    char *config_text;         /* the config JSON as received */
    int64_t hash;              /* its hash */
    int64_t total, lo, hi;     /* key space and our range */
    float *values;             /* hi - lo */
    float *state[ZT_OPT_MAX_STATE]; /* optimizer state */
    float *accum;              /* sync mode: sum of this step's pushes */
    zt_opt_t opt;              /* optimizer */
    bool sync;                 /* average pushes of all workers per step */
    int workers;               /* pushing workers */
    int max_staleness;         /* -1 unbounded */
    int64_t version;           /* updates applied (sync: steps applied) */
    int64_t pushed;            /* sync: elements pushed for the current step */
    int64_t progress[MAX_WORKERS]; /* per worker: steps pushed */
    s_deferred_t *deferred;    /* pulls waiting for the bound or the step */
    int ndeferred;
    int64_t restored_step;     /* checkpoint restored at start, -1 none */
    double restored_mtime;     /* its manifest's modification time */
    int64_t snap_version;      /* version written to the snapshot file last */
    int64_t snap_ms;           /* when it was last tried (written, or failed) */
    int64_t snap_failures;     /* writes that failed (a full disk...): never taken as written */
    int64_t snap_failed_said;  /* when the last failure was logged */
    int64_t snap_failed_sent;  /* the count last reported (snapshot_failures) */
    uint64_t seq;
    uint64_t drops;            /* malformed requests */
    float *scratch;            /* aligned copy of a misaligned payload, reused */
    size_t scratch_cap;        /* its size in bytes */
    s_area_t areas[MAX_AREAS]; /* pull replies through shared memory */
    int nareas;
    uint64_t area_clock;
};

/* zt_ps_state.c. Takes a config; allocates and (when init) initialises
 * our range. */
int zt_ps_configure(zt_ps_server_t *self, const char *text, bool init, char *err, size_t errlen);
/* The shard of the job checkpoint named by the options, when there is one. */
void zt_ps_restore(zt_ps_server_t *self);
/* The snapshot file: written (atomically), and read back at a start. */
void zt_ps_snapshot_write(zt_ps_server_t *self);
void zt_ps_snapshot_restore(zt_ps_server_t *self);
/* Lets the range, the state and the areas go. */
void zt_ps_free_state(zt_ps_server_t *self);

#endif
