/* Between rounds: a worker that has its sums goes on to other work (its
 * forward pass, its own collectives over another library, its evaluation)
 * while a reducer restarted in mid-broadcast may still need that worker's
 * copy of a sum for a worker that missed it. If the worker that has it only
 * answers from inside zt_allreduce_wait, the two can wait on each other for
 * ever: the one without the sum in its wait, the one with it in a
 * collective that needs the first. So once the caller has been out of the
 * library for IDLE_MS with no bucket in flight, a thread takes the reducer
 * sockets: it tells each reducer the worker is there (AR_IDLE, so that a
 * restarted one learns its address) and serves what they ask (AR_RESEND).
 * Any call into the library takes the sockets back first. */
#include "allreduce/zt_ar_internal.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#define IDLE_MS 200     /* out of the library this long before the thread serves */
#define PRESENT_MS 1000 /* AR_IDLE to each reducer this often while idle */

struct zt_ar_idle_t {
    pthread_t thread;
    bool joined;        /* stopped at the process's exit (s_at_exit) */
    zt_ar_idle_t *next; /* the process's running threads */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int wake[2];        /* a byte here ends the thread's poll */
    bool in_call;       /* the caller holds the sockets */
    bool serving;       /* the thread holds the sockets */
    bool quit;
    int64_t left_ms;    /* when the caller last left the library */
    int64_t present_ms; /* when AR_IDLE last went out */
};

/* Every thread still running at exit is stopped before CZMQ's own exit
 * handler (registered earlier, so run later) closes the sockets it may be
 * polling: a program that never destroyed its all-reduce exits cleanly. */
static pthread_mutex_t s_all_mu = PTHREAD_MUTEX_INITIALIZER;
static zt_ar_idle_t *s_all;

/* Wakes the serving thread out of its poll (with id->mu held). */
static void s_wake(zt_ar_idle_t *id)
{
    if (id->serving && write(id->wake[1], "w", 1) < 0) {
        /* the pipe is full: a byte is there already */
    }
}

static void s_halt(zt_ar_idle_t *id)
{
    pthread_mutex_lock(&id->mu);
    id->quit = true;
    s_wake(id);
    pthread_cond_broadcast(&id->cv);
    pthread_mutex_unlock(&id->mu);
    if (!id->joined)
        pthread_join(id->thread, NULL);
    id->joined = true;
}

static void s_at_exit(void)
{
    pthread_mutex_lock(&s_all_mu);
    for (zt_ar_idle_t *id = s_all; id; id = id->next)
        s_halt(id);
    pthread_mutex_unlock(&s_all_mu);
}

static void s_deadline(struct timespec *ts, int64_t ms)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

/* The sockets are ours until a byte on wake: each reducer told we are here
 * every PRESENT_MS, what they send served. */
static void s_serve(zt_allreduce_t *self, zt_ar_idle_t *id)
{
    zmq_pollitem_t items[65];
    int n = self->R < 64 ? self->R : 64;
    for (int r = 0; r < n; r++)
        items[r] = zt_bulk_item(self->red[r]);
    items[n] = (zmq_pollitem_t) { NULL, id->wake[0], ZMQ_POLLIN, 0 };
    for (;;) {
        int64_t now = zt_now_ms();
        if (now - id->present_ms >= PRESENT_MS) {
            for (int r = 0; r < self->R; r++)
                zt_ar_present(self, r);
            id->present_ms = now;
        }
        int64_t left = id->present_ms + PRESENT_MS - now;
        zt_ar_tend_reducers(self, items, n);
        for (int r = 0; r < self->R; r++) /* a reducer's connection that broke is made again soon */
            if (zt_bulk_unconnected(self->red[r]) && left > 50)
                left = 50;
        if (zmq_poll(items, n + 1, left > 0 ? left : 0) < 0 && errno != EINTR)
            return;
        if (items[n].revents & ZMQ_POLLIN) {
            char drain[64];
            while (read(id->wake[0], drain, sizeof drain) > 0) {
            }
            return;
        }
        for (int r = 0; r < n; r++)
            for (int budget = 0; (items[r].revents & ZMQ_POLLIN) && budget < 64 && zt_ar_serve_idle(self, r);
                 budget++) {
            }
    }
}

static void *s_thread(void *arg)
{
    zt_allreduce_t *self = arg;
    zt_ar_idle_t *id = self->idle;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL); /* signals are the caller's */
    pthread_mutex_lock(&id->mu);
    while (!id->quit) {
        int64_t due = id->left_ms + IDLE_MS - zt_now_ms();
        if (id->in_call || due > 0 || zt_ar_any_active(self)) {
            struct timespec ts;
            s_deadline(&ts, due > 0 ? due : IDLE_MS);
            pthread_cond_timedwait(&id->cv, &id->mu, &ts);
            continue;
        }
        id->serving = true;
        pthread_mutex_unlock(&id->mu);
        s_serve(self, id);
        pthread_mutex_lock(&id->mu);
        id->serving = false;
        pthread_cond_broadcast(&id->cv);
    }
    pthread_mutex_unlock(&id->mu);
    return NULL;
}

static void s_register_exit(void) { atexit(s_at_exit); }

int zt_ar_idle_start(zt_allreduce_t *self)
{
    zt_ar_idle_t *id = calloc(1, sizeof *id);
    if (pipe(id->wake) != 0) {
        free(id);
        return ZT_EIO;
    }
    for (int i = 0; i < 2; i++)
        fcntl(id->wake[i], F_SETFL, O_NONBLOCK), fcntl(id->wake[i], F_SETFD, FD_CLOEXEC);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&id->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&id->mu, NULL);
    id->left_ms = zt_now_ms();
    self->idle = id;
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, s_register_exit);
    if (pthread_create(&id->thread, NULL, s_thread, self) != 0) {
        self->idle = NULL;
        pthread_cond_destroy(&id->cv);
        pthread_mutex_destroy(&id->mu);
        close(id->wake[0]);
        close(id->wake[1]);
        free(id);
        return ZT_EIO;
    }
    pthread_mutex_lock(&s_all_mu);
    id->next = s_all;
    s_all = id;
    pthread_mutex_unlock(&s_all_mu);
    return ZT_OK;
}

void zt_ar_idle_enter(zt_allreduce_t *self)
{
    zt_ar_idle_t *id = self->idle;
    if (!id)
        return;
    pthread_mutex_lock(&id->mu);
    id->in_call = true;
    s_wake(id);
    while (id->serving)
        pthread_cond_wait(&id->cv, &id->mu);
    pthread_mutex_unlock(&id->mu);
}

void zt_ar_idle_leave(zt_allreduce_t *self)
{
    zt_ar_idle_t *id = self->idle;
    if (!id)
        return;
    pthread_mutex_lock(&id->mu);
    id->in_call = false;
    id->left_ms = zt_now_ms();
    pthread_mutex_unlock(&id->mu);
}

void zt_ar_idle_stop(zt_allreduce_t *self)
{
    zt_ar_idle_t *id = self->idle;
    if (!id)
        return;
    pthread_mutex_lock(&s_all_mu);
    for (zt_ar_idle_t **p = &s_all; *p; p = &(*p)->next)
        if (*p == id) {
            *p = id->next;
            break;
        }
    s_halt(id);
    pthread_mutex_unlock(&s_all_mu);
    pthread_cond_destroy(&id->cv);
    pthread_mutex_destroy(&id->mu);
    close(id->wake[0]);
    close(id->wake[1]);
    free(id);
    self->idle = NULL;
}
