/* Lanes: a worker's all-reduce bytes to and from its reducers moved by
 * threads of their own, so that the work of one round (sealing the pieces,
 * the kernel's sends, the receives, opening the sums and writing them on)
 * runs on several cores at once instead of one after another on the
 * caller's thread (and, even on 2 cores, each reducer's sums are taken as
 * they come, by a thread that waits on that reducer alone).
 *
 * Lane i serves reducers i, i + n, i + 2n, ... (n lanes: ZT_AR_THREADS).
 * A lane owns its reducers' ways while a round is under way: from the
 * first bucket the caller hands out (zt_ar_flush posts the ranges to every
 * lane; each sends its reducers' pieces of them) until the caller's wait
 * has every sum (each lane then reports itself done) or gives up (the
 * lanes are called back: parked). Between rounds they are parked and the
 * ways are the caller's (its commit, the idle thread of zt_ar_idle.c).
 * The mutex's hand-overs are the memory barriers ZeroMQ sockets need to
 * change threads. What lanes share is per reducer (its chunk's pieces,
 * window and way) or counted atomically (a tensor's landed elements, the
 * message numbers, the time of the last progress). */
#include "allreduce/zt_ar_internal.h"
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

typedef struct {
    zt_ar_lanes_t *L;
    int id;
    pthread_t th;
    bool started;
    int wake;                   /* eventfd: work posted, the wait begun, called back */
    zt_ar_run_t *todo;          /* posted, not sent yet (under L->mu) */
    int ntodo, captodo;
    zt_ar_run_t *taking;        /* the lane's own: swapped with todo to take it */
    int captaking;
    zt_ar_run_t *runs;          /* sent this round (the lane's own) */
    int nruns, capruns;
    zt_spin_t spin;
    bool running;               /* owns its ways (under L->mu) */
    bool done;                  /* finished this round (under L->mu) */
    bool finishing;             /* the caller waits (seen under L->mu): its wait's factor is known */
    int rc;                     /* the round's error, ZT_OK */
    char err[ZT_AR_ERRLEN];
} s_lane_t;

struct zt_ar_lanes_t {
    zt_allreduce_t *ar;
    zt_ar_lanes_t *next;        /* the process's lanes (s_at_exit) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int n;
    s_lane_t *lane;
    bool finishing;             /* the caller waits: nothing more will be posted */
    bool cancel;                /* give the ways back now */
    bool quit;
    int done_fd;                /* eventfd: a lane finished */
    _Atomic int64_t progress_ms; /* the last sum any lane took */
};

static __thread s_lane_t *tl_lane; /* the lane this thread is, if any */

/* Lanes a program left running at its exit (it never destroyed its
 * all-reduce) are called back before CZMQ's own exit handler (registered
 * earlier, so run later) closes the sockets they may be polling. */
static pthread_mutex_t s_all_mu = PTHREAD_MUTEX_INITIALIZER;
static zt_ar_lanes_t *s_all;
static void s_park(zt_ar_lanes_t *L, bool clear);

static void s_at_exit(void)
{
    pthread_mutex_lock(&s_all_mu);
    for (zt_ar_lanes_t *L = s_all; L; L = L->next) {
        pthread_mutex_lock(&L->mu);
        s_park(L, false);
        pthread_mutex_unlock(&L->mu);
    }
    pthread_mutex_unlock(&s_all_mu);
}

static void s_register_exit(void) { atexit(s_at_exit); }

const zt_ar_run_t *zt_ar_lane_runs(int *n)
{
    *n = tl_lane ? tl_lane->nruns : 0;
    return tl_lane ? tl_lane->runs : NULL;
}

bool zt_ar_may_land(void)
{
    return !tl_lane || tl_lane->finishing;
}

char *zt_ar_errbuf(zt_allreduce_t *self)
{
    return tl_lane ? tl_lane->err : self->err;
}

static void s_poke(int fd)
{
    uint64_t one = 1;
    if (write(fd, &one, sizeof one) < 0) {
        /* the counter is full: it is readable already */
    }
}

static void s_push(zt_ar_run_t **v, int *n, int *cap, zt_ar_run_t run)
{
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 16;
        *v = realloc(*v, (size_t) *cap * sizeof **v);
    }
    (*v)[(*n)++] = run;
}

/* Sends the posted ranges to this lane's reducers; false when called back. */
static bool s_take(s_lane_t *ln, bool *finishing)
{
    zt_ar_lanes_t *L = ln->L;
    int n = 0;
    pthread_mutex_lock(&L->mu);
    bool cancel = L->cancel || L->quit;
    *finishing = ln->finishing = L->finishing;
    if (!cancel && ln->ntodo) { /* the posted runs become the lane's; its old array takes the next */
        zt_ar_run_t *v = ln->taking;
        int cap = ln->captaking;
        ln->taking = ln->todo;
        ln->captaking = ln->captodo;
        ln->todo = v;
        ln->captodo = cap;
        n = ln->ntodo;
        ln->ntodo = 0;
    }
    pthread_mutex_unlock(&L->mu);
    for (int i = 0; i < n; i++) {
        zt_ar_run_t run = ln->taking[i];
        s_push(&ln->runs, &ln->nruns, &ln->capruns, run);
        for (int r = ln->id; r < L->ar->R; r += L->n)
            zt_ar_send_range(L->ar, run.bi, run.a, run.b, r, false);
    }
    return !cancel;
}

static bool s_mine_done(s_lane_t *ln)
{
    for (int r = ln->id; r < ln->L->ar->R; r += ln->L->n)
        if (!zt_ar_chunks_done(ln->L->ar, r))
            return false;
    return true;
}

/* One round: until this lane's reducers sent every sum of the round (once
 * the caller waits), an error, or the caller calls it back. */
static void s_round(s_lane_t *ln)
{
    zt_ar_lanes_t *L = ln->L;
    zt_allreduce_t *self = L->ar;
    zmq_pollitem_t items[65];
    int mine[64], n = 0;
    for (int r = ln->id; r < self->R && n < 64; r += L->n) {
        mine[n] = r;
        items[n++] = zt_bulk_item(self->red[r]);
    }
    items[n] = (zmq_pollitem_t) { NULL, ln->wake, ZMQ_POLLIN, 0 };
    ln->rc = ZT_OK;
    ln->err[0] = 0;
    int64_t resent = 0; /* when this lane last sent its reducers' pieces again */
    for (;;) {
        bool finishing;
        if (!s_take(ln, &finishing))
            return;
        if (finishing && s_mine_done(ln))
            return;
        int64_t now = zt_now_ms(), quiet = atomic_load(&L->progress_ms);
        if (now - (resent > quiet ? resent : quiet) >= RESEND_MS) { /* each lane its own reducers */
            resent = now;
            __atomic_add_fetch(&self->stalls, 1, __ATOMIC_RELAXED);
            for (int i = 0; i < n; i++) {
                zt_bulk_revive(self->red[mine[i]], RESEND_MS, UNHEARD_MS);
                zt_ar_resend(self, mine[i]);
            }
        }
        for (int i = 0; i < n; i++)
            if (zt_bulk_tend(self->red[mine[i]], &items[i]))
                zt_ar_reopened(self, mine[i]);
        if (zt_spin_poll(&ln->spin, items, n + 1, 50) <= 0)
            continue;
        if (items[n].revents & ZMQ_POLLIN) {
            uint64_t v;
            if (read(ln->wake, &v, sizeof v) < 0) {
                /* EAGAIN: taken already */
            }
        }
        for (int i = 0; i < n; i++) {
            bool moved = false;
            int rc = zt_ar_serve_reducer(self, mine[i], &items[i], &moved);
            if (moved)
                atomic_store(&L->progress_ms, zt_now_ms());
            if (rc != ZT_OK) {
                ln->rc = rc;
                return;
            }
        }
    }
}

static void *s_main(void *arg)
{
    s_lane_t *ln = arg;
    zt_ar_lanes_t *L = ln->L;
    tl_lane = ln;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL); /* signals are the caller's */
    pthread_mutex_lock(&L->mu);
    while (!L->quit) {
        if (!ln->running || ln->done) {
            pthread_cond_wait(&L->cv, &L->mu);
            continue;
        }
        pthread_mutex_unlock(&L->mu);
        s_round(ln);
        pthread_mutex_lock(&L->mu);
        ln->done = true;
        s_poke(L->done_fd);
        pthread_cond_broadcast(&L->cv);
    }
    pthread_mutex_unlock(&L->mu);
    return NULL;
}

/* How many lanes: ZT_AR_THREADS, or 0 (automatic) one per reducer, at most
 * 4 or one per 4 cores of the host if that is more; fewer than 2: none.
 * (Even on 2 cores lanes cost less than one thread: 16 MiB through 4
 * reducers, trainers' CPU per GB 0.85-0.94x of one thread's.) */
static int s_count(const zt_allreduce_t *self)
{
    int64_t n = zt_knob_int(ZT_KNOB_AR_THREADS);
    if (n <= 0) {
        bool remote = true;
        for (int r = 0; r < self->R; r++)
            remote = remote && !self->red_local[r];
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        n = !remote ? 1 : cores / 4 > 4 ? cores / 4 : 4;
    }
    if (n > self->R)
        n = self->R;
    return n > 64 ? 64 : (int) n;
}

int zt_ar_lanes_start(zt_allreduce_t *self)
{
    int n = s_count(self);
    if (n < 2 || self->lanes)
        return ZT_OK;
    zt_ar_lanes_t *L = calloc(1, sizeof *L);
    L->ar = self;
    L->n = n;
    L->lane = calloc((size_t) n, sizeof *L->lane);
    L->done_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    pthread_mutex_init(&L->mu, NULL);
    pthread_cond_init(&L->cv, NULL);
    atomic_store(&L->progress_ms, zt_now_ms());
    self->lanes = L;
    int rc = L->done_fd >= 0 ? ZT_OK : ZT_EIO;
    for (int i = 0; i < n && rc == ZT_OK; i++) {
        s_lane_t *ln = &L->lane[i];
        ln->L = L;
        ln->id = i;
        zt_spin_init(&ln->spin); /* the lanes wait at once: they share one budget (on 16 cores, 4 lanes
                                  * each polling 200 us: trainers 4.67 CPU-s/GB, 3.79 at 50 us, same time) */
        ln->spin.budget_us = ln->spin.max_us /= n;
        ln->wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        ln->started = ln->wake >= 0 && pthread_create(&ln->th, NULL, s_main, ln) == 0;
        if (!ln->started)
            rc = ZT_EIO;
    }
    if (rc == ZT_OK) {
        static pthread_once_t once = PTHREAD_ONCE_INIT;
        pthread_once(&once, s_register_exit);
        pthread_mutex_lock(&s_all_mu);
        L->next = s_all;
        s_all = L;
        pthread_mutex_unlock(&s_all_mu);
    }
    if (rc != ZT_OK)
        zt_ar_lanes_stop(self);
    else
        zt_info("all-reduce: %d threads move the bytes to and from %d reducers (ZT_AR_THREADS)", n, self->R);
    return rc;
}

/* Calls every lane back (with L->mu held): the ways are the caller's again.
 * clear: the round is over (every sum in, or the group formed again), so
 * what each lane sent is forgotten; else a wait that failed keeps it, for
 * the next wait to send again what went unanswered. */
static void s_park(zt_ar_lanes_t *L, bool clear)
{
    L->cancel = true;
    for (int i = 0; i < L->n; i++)
        if (L->lane[i].started)
            s_poke(L->lane[i].wake);
    for (;;) {
        bool busy = false;
        for (int i = 0; i < L->n; i++)
            busy = busy || (L->lane[i].running && !L->lane[i].done);
        if (!busy)
            break;
        pthread_cond_wait(&L->cv, &L->mu);
    }
    for (int i = 0; i < L->n; i++) {
        L->lane[i].running = L->lane[i].done = L->lane[i].finishing = false;
        if (clear)
            L->lane[i].ntodo = L->lane[i].nruns = 0;
    }
    L->cancel = L->finishing = false;
}

void zt_ar_lanes_stop(zt_allreduce_t *self)
{
    zt_ar_lanes_t *L = self->lanes;
    if (!L)
        return;
    pthread_mutex_lock(&s_all_mu);
    for (zt_ar_lanes_t **p = &s_all; *p; p = &(*p)->next)
        if (*p == L) {
            *p = L->next;
            break;
        }
    pthread_mutex_unlock(&s_all_mu);
    pthread_mutex_lock(&L->mu);
    s_park(L, true);
    L->quit = true;
    pthread_cond_broadcast(&L->cv);
    pthread_mutex_unlock(&L->mu);
    for (int i = 0; i < L->n; i++) {
        s_lane_t *ln = &L->lane[i];
        if (ln->started)
            pthread_join(ln->th, NULL);
        if (ln->wake >= 0)
            close(ln->wake);
        free(ln->todo);
        free(ln->taking);
        free(ln->runs);
    }
    if (L->done_fd >= 0)
        close(L->done_fd);
    pthread_cond_destroy(&L->cv);
    pthread_mutex_destroy(&L->mu);
    free(L->lane);
    free(L);
    self->lanes = NULL;
}

/* Starts every lane on the round (with L->mu held). */
static void s_run(zt_ar_lanes_t *L)
{
    for (int i = 0; i < L->n; i++) {
        s_lane_t *ln = &L->lane[i];
        if (!ln->running) {
            ln->running = true;
            ln->done = false;
        }
        s_poke(ln->wake);
    }
    pthread_cond_broadcast(&L->cv);
}

bool zt_ar_lanes_post(zt_allreduce_t *self, int bi, int64_t a, int64_t b)
{
    zt_ar_lanes_t *L = self->lanes;
    if (!L)
        return false;
    pthread_mutex_lock(&L->mu);
    for (int i = 0; i < L->n; i++)
        s_push(&L->lane[i].todo, &L->lane[i].ntodo, &L->lane[i].captodo,
               (zt_ar_run_t) { .bi = bi, .a = a, .b = b });
    s_run(L);
    pthread_mutex_unlock(&L->mu);
    return true;
}

/* Whether every lane has finished (with L->mu held): its error, if one
 * had one, in *rc and the caller's err. */
static bool s_all_done(zt_ar_lanes_t *L, int *rc)
{
    bool all = true;
    for (int i = 0; i < L->n; i++) {
        s_lane_t *ln = &L->lane[i];
        if (ln->done && ln->rc != ZT_OK && *rc == ZT_OK) {
            *rc = ln->rc;
            snprintf(L->ar->err, sizeof L->ar->err, "%s", ln->err);
        }
        all = all && ln->done;
    }
    return all || *rc != ZT_OK;
}

int zt_ar_lanes_wait(zt_allreduce_t *self, int timeout_ms)
{
    zt_ar_lanes_t *L = self->lanes;
    for (int bi = 0; bi < self->layout.nbuckets; bi++)
        if (self->b[bi].active)
            zt_ar_flush(self, bi);
    pthread_mutex_lock(&L->mu);
    L->finishing = true;
    s_run(L);
    pthread_mutex_unlock(&L->mu);
    int64_t deadline = zt_now_ms() + timeout_ms;
    zmq_pollitem_t items[2] = { { NULL, L->done_fd, ZMQ_POLLIN, 0 } };
    int ni = 1;
    if (self->watch) /* zt_allreduce_watch: served while we wait */
        items[ni++] = (zmq_pollitem_t) { self->watch, 0, ZMQ_POLLIN, 0 };
    int rc = ZT_OK;
    for (;;) {
        pthread_mutex_lock(&L->mu);
        bool done = s_all_done(L, &rc);
        pthread_mutex_unlock(&L->mu);
        if (done)
            break;
        if (zt_stop_requested()) {
            snprintf(self->err, sizeof self->err, "stopping with buckets unfinished");
            rc = ZT_ESHUTDOWN;
            break;
        }
        if (self->abandon_fn && self->abandon_fn(self->abandon_arg)) {
            snprintf(self->err, sizeof self->err, "the round was given up: the group forms again without a "
                     "member it lost");
            rc = ZT_ECANCELLED;
            break;
        }
        if (zt_now_ms() >= deadline) {
            pthread_mutex_lock(&L->mu);
            s_park(L, false);
            pthread_mutex_unlock(&L->mu);
            rc = zt_ar_timed_out(self, timeout_ms); /* ZT_OK: every sum came meanwhile */
            if (rc == ZT_OK)
                zt_ar_lanes_forget(self);
            return rc;
        }
        if (zmq_poll(items, ni, 50) <= 0)
            continue;
        if (items[0].revents & ZMQ_POLLIN) {
            uint64_t v;
            if (read(L->done_fd, &v, sizeof v) < 0) {
                /* EAGAIN: taken already */
            }
        }
        if (ni > 1 && (items[1].revents & ZMQ_POLLIN))
            self->watch_fn(self->watch_arg);
    }
    pthread_mutex_lock(&L->mu);
    s_park(L, rc == ZT_OK);
    pthread_mutex_unlock(&L->mu);
    return rc;
}

void zt_ar_lanes_forget(zt_allreduce_t *self)
{
    zt_ar_lanes_t *L = self->lanes;
    if (!L)
        return;
    pthread_mutex_lock(&L->mu);
    s_park(L, true);
    pthread_mutex_unlock(&L->mu);
}
