/* zt_team: fork and join over a few threads (see zt_team.h). */
#include "base/zt_team.h"
#include <assert.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

struct zt_team_t {
    pthread_mutex_t mu;
    pthread_cond_t go, idle;
    pthread_t *th;
    int n;               /* helpers started */
    unsigned long batch; /* the batch's number (under mu) */
    int active;          /* helpers inside the batch (under mu) */
    bool quit;
    void (*fn)(void *, int);
    void *arg;
    int ntasks;
    atomic_int next;     /* the next task to take */
    void (*at_end)(void);
};

/* Takes tasks of the batch until none is left. */
static void s_work(zt_team_t *self)
{
    for (;;) {
        int t = atomic_fetch_add(&self->next, 1);
        if (t >= self->ntasks)
            return;
        self->fn(self->arg, t);
    }
}

static void *s_main(void *arg)
{
    zt_team_t *self = arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL); /* signals are the caller's */
    pthread_mutex_lock(&self->mu);
    unsigned long seen = self->batch;
    for (;;) {
        /* a batch it has not joined, still open (ntasks: 0 once closed) */
        while ((self->batch == seen || self->ntasks == 0) && !self->quit)
            pthread_cond_wait(&self->go, &self->mu);
        if (self->quit)
            break;
        seen = self->batch;
        self->active++;
        pthread_mutex_unlock(&self->mu);
        s_work(self);
        pthread_mutex_lock(&self->mu);
        if (--self->active == 0)
            pthread_cond_signal(&self->idle);
    }
    pthread_mutex_unlock(&self->mu);
    if (self->at_end)
        self->at_end();
    return NULL;
}

zt_team_t *zt_team_new(int threads, void (*at_end)(void))
{
    if (threads < 1)
        return NULL;
    zt_team_t *self = calloc(1, sizeof *self);
    if (!self || !(self->th = calloc((size_t) threads, sizeof *self->th))) {
        free(self);
        return NULL;
    }
    self->at_end = at_end;
    pthread_mutex_init(&self->mu, NULL);
    pthread_cond_init(&self->go, NULL);
    pthread_cond_init(&self->idle, NULL);
    while (self->n < threads && pthread_create(&self->th[self->n], NULL, s_main, self) == 0)
        self->n++;
    if (self->n == 0)
        zt_team_destroy(&self);
    return self;
}

void zt_team_destroy(zt_team_t **self_p)
{
    zt_team_t *self = self_p ? *self_p : NULL;
    if (!self)
        return;
    pthread_mutex_lock(&self->mu);
    self->quit = true;
    pthread_cond_broadcast(&self->go);
    pthread_mutex_unlock(&self->mu);
    for (int i = 0; i < self->n; i++)
        pthread_join(self->th[i], NULL);
    pthread_cond_destroy(&self->go);
    pthread_cond_destroy(&self->idle);
    pthread_mutex_destroy(&self->mu);
    free(self->th);
    free(self);
    *self_p = NULL;
}

int zt_team_helpers(const zt_team_t *self) { return self ? self->n : 0; }

void zt_team_run(zt_team_t *self, int ntasks, void (*fn)(void *arg, int task), void *arg)
{
    if (!self || ntasks < 2) {
        for (int t = 0; t < ntasks; t++)
            fn(arg, t);
        return;
    }
    pthread_mutex_lock(&self->mu);
    self->fn = fn;
    self->arg = arg;
    self->ntasks = ntasks;
    atomic_store(&self->next, 0);
    self->batch++;
    pthread_cond_broadcast(&self->go);
    pthread_mutex_unlock(&self->mu);
    s_work(self);
    /* every task is taken; those a helper took are done once it leaves.
     * The batch closes (ntasks 0) with no helper inside, and a helper joins
     * only an open one, under mu: so none is still taking tasks when the
     * next batch sets `next` back to 0 */
    pthread_mutex_lock(&self->mu);
    while (self->active > 0)
        pthread_cond_wait(&self->idle, &self->mu);
    self->ntasks = 0;
    pthread_mutex_unlock(&self->mu);
}

/* ------------------------------------------------------------ selftest */

typedef struct {
    atomic_int runs[64];
    atomic_int elsewhere; /* tasks run on a helper */
    pthread_t caller;
    bool slow;
} s_test_t;

static void s_test_task(void *arg, int t)
{
    s_test_t *x = arg;
    if (x->slow) {
        struct timespec ts = { 0, 200000 };
        nanosleep(&ts, NULL);
    }
    if (!pthread_equal(pthread_self(), x->caller))
        atomic_fetch_add(&x->elsewhere, 1);
    atomic_fetch_add(&x->runs[t], 1);
}

void zt_team_selftest(void)
{
    assert(zt_team_new(0, NULL) == NULL && zt_team_helpers(NULL) == 0);
    s_test_t x = { .caller = pthread_self() };
    zt_team_run(NULL, 5, s_test_task, &x); /* no team: the caller alone */
    for (int t = 0; t < 5; t++)
        assert(atomic_load(&x.runs[t]) == 1);
    zt_team_t *team = zt_team_new(3, NULL);
    assert(team && zt_team_helpers(team) == 3);
    for (int round = 0; round < 2000; round++) { /* every task once per batch, batch after batch */
        s_test_t y = { .caller = pthread_self() };
        int n = 1 + round % 64;
        zt_team_run(team, n, s_test_task, &y);
        for (int t = 0; t < 64; t++)
            assert(atomic_load(&y.runs[t]) == (t < n));
    }
    /* tasks that take a while: the helpers take some (within 50 batches,
     * however loaded the machine) */
    s_test_t z = { .caller = pthread_self(), .slow = true };
    for (int round = 0; round < 50 && atomic_load(&z.elsewhere) == 0; round++)
        zt_team_run(team, 8, s_test_task, &z);
    assert(atomic_load(&z.elsewhere) > 0);
    zt_team_destroy(&team);
    assert(team == NULL);
    zt_team_destroy(&team);
}
