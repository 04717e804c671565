/* The reducer's buckets: made from the workers' agreed layout, reset for
 * a generation, let go; the reducer made and destroyed. */
#include "zt_reducer_int.h"
#include "base/zt_env.h"
#include "runtime/zt_process.h"
#include "zt_ranges.h"
#include "zt_held.h"
#include "allreduce/zt_arlayout.h"
#include "wire/zt_bufpool.h"
#include "wire/zt_msg.h"
#include "wire/zt_transport.h"
#include "base/zt_shard.h"
#include "wire/zt_shm.h"
#include "wire/zt_stream.h"
#include "base/zt_util.h"
#include "ztrain/zt_allreduce.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_knobs.h"
#include "ztrain/zt_log.h"
#include <czmq.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void s_free_buckets(zt_reducer_t *self)
{
    bool held = false; /* a sum ZeroMQ still holds: its buffer and the count it lowers stay */
    for (int b = 0; self->buckets && b < self->layout.nbuckets; b++) {
        s_bucket_t *k = &self->buckets[b];
        for (int w = 0; k->held && w < self->workers; w++)
            zt_held_free(&k->held[w]);
        free(k->held);
        for (int i = 0; i < 2; i++) {
            for (int w = 0; w < 5000 && atomic_load(&k->res_lent[i]) > 0; w++)
                zclock_sleep(1);
            bool lent = atomic_load(&k->res_lent[i]) > 0;
            held |= lent;
            if (!self->shm && !lent)
                free(k->res[i]);
        }
        free(k->want_got.iv);
        free(k->block_sent);
        for (int w = 0; k->from && w < self->workers; w++)
            free(k->from[w].iv);
        free(k->from);
    }
    if (!held)
        free(self->buckets);
    self->buckets = NULL;
    zt_shm_destroy(&self->shm);
    zt_ar_layout_free(&self->layout);
}

/* A new group (or layout): the buckets go, their shared sums stay a while
 * (old_shm). */
void zt_reducer_free_buckets_keep_sums(zt_reducer_t *self)
{
    zt_shm_destroy(&self->old_shm);
    zt_shm_region_t *keep = self->shm;
    self->shm = NULL;
    for (int b = 0; keep && self->buckets && b < self->layout.nbuckets; b++)
        for (int i = 0; i < 2; i++)
            self->buckets[b].res[i] = NULL; /* in the region: not freed one by one */
    s_free_buckets(self);
    self->old_shm = keep;
}

void zt_reducer_reset_bucket(zt_reducer_t *self, s_bucket_t *k)
{
    for (int w = 0; w < self->workers; w++) {
        zt_held_clear(&k->held[w]);
        k->from[w].n = 0;
        k->from[w].got = 0;
    }
    k->started_ms = 0;
    memset(k->block_sent, 0, (size_t) k->nblocks);
    k->blocks_sent = 0;
}

int zt_reducer_configure(zt_reducer_t *self, const char *text, int workers)
{
    json_t *cfg = json_loads(text, 0, NULL);
    json_t *tensors = json_object_get(cfg, "tensors");
    int64_t threshold = json_integer_value(json_object_get(cfg, "threshold"));
    int64_t piece = json_integer_value(json_object_get(cfg, "piece_bytes"));
    if (!cfg || !json_is_array(tensors) || threshold <= 0 || workers < 1 || workers > MAX_WORKERS) {
        json_decref(cfg);
        return ZT_EPROTO;
    }
    s_free_buckets(self);
    if (zt_ar_layout_build(&self->layout, tensors, threshold, piece) != ZT_OK) {
        json_decref(cfg);
        return ZT_EPROTO;
    }
    self->workers = workers;
    self->buckets = calloc((size_t) self->layout.nbuckets + 1, sizeof *self->buckets);
    /* The sums live in shared memory: workers on this host read them in place.
     * A sum of generation g is written only once every worker has sent its
     * piece of g, so after each has finished reading g - 1; two buffers (by
     * parity) cover a worker that asks for g - 1 again while others are at g. */
    size_t total = 0, need = 0;
    for (int b = 0; b < self->layout.nbuckets; b++) {
        int64_t lo, hi;
        size_t es = zt_dtype_size(self->layout.buckets[b].dtype);
        zt_ar_chunk(self->layout.buckets[b].numel, es, b, self->opts.reducers, self->opts.index, &lo, &hi);
        total += 2 * (((size_t) (hi - lo) * es + 1 + 63) & ~(size_t) 63);
        need += 2 * (size_t) (hi - lo) * es;
    }
    /* the layout came from the network: more than this machine's memory is refused */
    size_t phys = (size_t) sysconf(_SC_PHYS_PAGES) * (size_t) sysconf(_SC_PAGESIZE);
    if (!self->buckets || need > phys) {
        zt_warn("refused a layout that needs %.1f GB here (this machine has %.1f GB)", (double) need / 1e9,
                (double) phys / 1e9);
        s_free_buckets(self);
        json_decref(cfg);
        return ZT_ENOMEM;
    }
    self->shm = zt_shm_create("red", total);
    size_t at_shm = 0;
    for (int b = 0; b < self->layout.nbuckets; b++) {
        s_bucket_t *k = &self->buckets[b];
        zt_ar_chunk(self->layout.buckets[b].numel, zt_dtype_size(self->layout.buckets[b].dtype), b,
                    self->opts.reducers, self->opts.index, &k->lo, &k->hi);
        k->dtype = self->layout.buckets[b].dtype;
        k->held = calloc((size_t) workers, sizeof *k->held);
        for (int i = 0; i < 2; i++) {
            size_t bytes = (size_t) (k->hi - k->lo) * zt_dtype_size(k->dtype) + 1;
            if (self->shm) {
                k->res[i] = self->shm->base + at_shm;
                at_shm += (bytes + 63) & ~(size_t) 63;
            }
            else
                k->res[i] = malloc(bytes);
        }
        int64_t per = PIECE_BYTES / (int64_t) zt_dtype_size(k->dtype), n = k->hi - k->lo;
        k->nblocks = n == 0 ? 1 : (int) ((n + per - 1) / per);
        k->per = per;
        k->block_sent = calloc((size_t) k->nblocks, sizeof(bool));
        k->from = calloc((size_t) workers, sizeof *k->from);
        k->gen = -1;
        k->result_gen = -1;
        k->want_gen = -1;
        if (!k->held || !k->res[0] || !k->res[1] || !k->block_sent || !k->from) {
            zt_warn("out of memory for a layout of %d buckets", self->layout.nbuckets);
            s_free_buckets(self);
            json_decref(cfg);
            return ZT_ENOMEM;
        }
    }
    free(self->layout_text);
    self->layout_text = strdup(text);
    json_decref(self->first_tensors);
    self->first_tensors = json_incref(tensors);
    self->configured = true;
    json_decref(cfg);
    return ZT_OK;
}

int zt_reducer_threads(int64_t knob)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN) / 4;
    int64_t n = knob > 0 ? knob : cores < 1 ? 1 : cores > 4 ? 4 : cores;
    return (int) (n > 64 ? 64 : n);
}

zt_reducer_t *zt_reducer_new(const zt_reducer_opts_t *opts)
{
    zt_reducer_t *self = calloc(1, sizeof *self);
    self->opts = *opts;
    if (!(self->srv = zt_bulk_bind_direct(ZT_PLANE_DATA, opts->bind, NULL, ZT_BULK_DIRECT_ALL)) || zt_bulk_server_pool_copies(self->srv)) {
        zt_bulk_server_destroy(&self->srv);
        free(self);
        return NULL;
    }
    int th = zt_reducer_threads(zt_knob_int(ZT_KNOB_REDUCER_THREADS));
    if (th > 1 && zt_bulk_server_seals(self->srv)) {
        if (zt_bulk_server_threads(self->srv, th) != ZT_OK)
            zt_warn("cannot start %d threads to open sealed pieces: the reducer's own opens them", th);
        else
            zt_info("%d threads open the workers' sealed pieces (ZT_REDUCER_THREADS)", th);
    }
    self->warn_ms = zt_knob_int(ZT_KNOB_COLLECTIVE_WARN_MS);
    self->allow_nonfinite = zt_knob_int(ZT_KNOB_ALLOW_NONFINITE) != 0;
    return self;
}

void zt_reducer_destroy(zt_reducer_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zt_reducer_t *self = *self_p;
    for (int w = 0; w < MAX_WORKERS; w++)
        if (self->have_id[w])
            zmq_msg_close(&self->ids[w]);
    zt_bulk_server_destroy(&self->srv);
    s_free_buckets(self);
    zt_shm_destroy(&self->old_shm);
    json_decref(self->first_tensors);
    free(self->layout_text);
    free(self);
    *self_p = NULL;
}


