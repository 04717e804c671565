/* Part of test_allreduce: groups whose membership changes (a worker
 * leaves, another joins, through the same reducers), the pages a steady
 * all-reduce touches, and tensors large enough to fill the kernel's
 * buffers. */
#include "ztrain/ztrain.h"
#include "ztrain/zt_allreduce.h"
#include "test_allreduce.h"
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

/* ------------------------------------------------------------ membership */

/* A member of membership generation `group`: rank of N. */
static zt_allreduce_t *s_member(int rank, int N, int64_t group, int64_t n)
{
    const char *reds[2] = { t_red_eps[0], t_red_eps[1] }, *peers[4] = { "unused", "unused", "unused", "unused" };
    zt_allreduce_opts_t o = { rank, N, reds, 2, peers, 1 << 26, 5, group, 0, 0 };
    zt_allreduce_t *ar = zt_allreduce_new(&o);
    int64_t shape[1] = { n };
    assert(ar && zt_allreduce_register(ar, "g", shape, 1, ZT_F32) == 0);
    if (zt_allreduce_commit(ar, 20000) != ZT_OK) {
        fprintf(stderr, "group %lld rank %d: %s\n", (long long) group, rank, zt_allreduce_error(ar));
        abort();
    }
    return ar;
}

/* What rank contributes in a round of a group, and the sum over N ranks. */
static float s_member_value(int rank, int64_t group, int round) { return (float) ((rank + 1) * (round + 1) + 100 * group); }

static void s_member_rounds(zt_allreduce_t *ar, int rank, int N, int64_t group, int64_t n)
{
    float *g = malloc((size_t) n * sizeof(float));
    for (int round = 0; round < 2; round++) {
        for (int64_t i = 0; i < n; i++)
            g[i] = s_member_value(rank, group, round);
        assert(zt_allreduce_submit(ar, 0, g) == ZT_OK);
        if (zt_allreduce_wait(ar, false, 20000) != ZT_OK) {
            fprintf(stderr, "group %lld rank %d round %d: %s\n", (long long) group, rank, round,
                    zt_allreduce_error(ar));
            abort();
        }
        float want = 0;
        for (int k = 0; k < N; k++)
            want += s_member_value(k, group, round);
        for (int64_t i = 0; i < n; i++)
            if (g[i] != want) {
                fprintf(stderr, "group %lld rank %d round %d: g[%lld] = %g, want %g\n", (long long) group, rank,
                        round, (long long) i, g[i], want);
                abort();
            }
    }
    free(g);
}

/* Generation 2's last rounds: after two, the parent restarts reducer 0 in
 * place (it holds no layout and must take generation 2 from the first
 * worker that speaks), and two more go through it. */
static void s_member_last(zt_allreduce_t *ar, int rank, int64_t n, int *done2, int *go)
{
    char c;
    s_member_rounds(ar, rank, 3, 2, n);
    assert(write(done2[1], "d", 1) == 1);
    assert(read(go[0], &c, 1) == 1);
    s_member_rounds(ar, rank, 3, 2, n);
    zt_allreduce_destroy(&ar);
}

/* A group that shrinks and grows through the same two reducers: 3 workers
 * (membership generation 0), then 2 (1: worker 2 left), then 3 again (2: a
 * new worker 2 joined). The one that left sends a round of generation 0
 * after the others formed generation 1: the reducers drop it (its wait
 * fails) and the new group's sums are exact. Then a reducer of generation
 * 2, restarted in place, serves it again. */
void t_membership_changes(void)
{
    const int64_t n = 100003;
    t_start_reducer(0, 2);
    t_start_reducer(1, 2);
    int formed[2], stale[2][2], done1[2], done2[2], go[2];
    assert(pipe(formed) == 0 && pipe(stale[0]) == 0 && pipe(stale[1]) == 0 && pipe(done1) == 0 &&
           pipe(done2) == 0 && pipe(go) == 0);
    char c;
    pid_t pids[4];
    for (int rank = 0; rank < 2; rank++)
        if ((pids[rank] = fork()) == 0) {
            alarm(60);
            zt_log_init("test_allreduce", rank);
            zt_allreduce_t *ar = s_member(rank, 3, 0, n);
            s_member_rounds(ar, rank, 3, 0, n);
            zt_allreduce_destroy(&ar);
            ar = s_member(rank, 2, 1, n);
            if (rank == 0)
                assert(write(formed[1], "f", 1) == 1);
            assert(read(stale[rank][0], &c, 1) == 1); /* the leaver's round is out */
            s_member_rounds(ar, rank, 2, 1, n);
            zt_allreduce_destroy(&ar);
            assert(write(done1[1], "d", 1) == 1);
            s_member_last(s_member(rank, 3, 2, n), rank, n, done2, go);
            exit(0);
        }
    if ((pids[2] = fork()) == 0) { /* leaves after generation 0 */
        alarm(60);
        zt_log_init("test_allreduce", 2);
        zt_allreduce_t *ar = s_member(2, 3, 0, n);
        s_member_rounds(ar, 2, 3, 0, n);
        assert(read(formed[0], &c, 1) == 1);
        float *g = malloc((size_t) n * sizeof(float));
        for (int64_t i = 0; i < n; i++)
            g[i] = 1e6f;
        assert(zt_allreduce_submit(ar, 0, g) == ZT_OK);
        int rc = zt_allreduce_wait(ar, false, 1500);
        for (int k = 0; k < 2; k++)
            assert(write(stale[k][1], "s", 1) == 1);
        if (rc == ZT_OK) {
            fprintf(stderr, "the worker that left got a sum of its stale round: g[0] = %g\n", g[0]);
            exit(1);
        }
        exit(0);
    }
    assert(read(done1[0], &c, 1) == 1 && read(done1[0], &c, 1) == 1); /* generation 1 is over */
    if ((pids[3] = fork()) == 0) { /* joins as generation 2's worker 2 */
        alarm(60);
        zt_log_init("test_allreduce", 3);
        s_member_last(s_member(2, 3, 2, n), 2, n, done2, go);
        exit(0);
    }
    for (int i = 0; i < 3; i++) /* generation 2's first rounds are done */
        assert(read(done2[0], &c, 1) == 1);
    t_restart_reducer(0, 2);
    assert(write(go[1], "ggg", 3) == 3);
    int failed = 0;
    for (int i = 0; i < 4; i++) {
        int st;
        waitpid(pids[i], &st, 0);
        failed += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    printf("a group of 3 shrinks to 2 and grows to 3 through the same reducers, a stale round dropped, a "
           "reducer restarted in generation 2: %s\n",
           failed ? "FAILED" : "ok");
    fflush(stdout);
    assert(!failed);
    int *fds[] = { formed, stale[0], stale[1], done1, done2, go };
    for (int i = 0; i < 6; i++) {
        close(fds[i][0]);
        close(fds[i][1]);
    }
    t_stop_reducers(2);
}

/* With ZT_MALLOC_KEEP_BYTES, rounds of a pair of workers: minor page faults over rounds 4..12 of
 * `pages` pages each. What the library receives each round (frames from
 * ZeroMQ, each a fresh block) must reuse the same memory: glibc by default
 * gives freed heap tops back to the kernel and faults them in again. */
static long s_steady_faults(int rank, int64_t n)
{
    zt_allreduce_t *ar = t_pair_worker(rank, n);
    float *g = malloc((size_t) n * sizeof(float));
    long before = 0;
    for (int round = 0; round < 12; round++) {
        if (round == 4) {
            struct rusage ru;
            getrusage(RUSAGE_SELF, &ru);
            before = ru.ru_minflt;
        }
        t_pair_round_in(ar, rank, n, g);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    free(g);
    zt_allreduce_destroy(&ar);
    return ru.ru_minflt - before;
}

void t_steady_memory(void)
{
    const int64_t n = 1 << 20; /* 4 MiB: 1024 pages a round */
    t_start_reducer(0, 1);
    pid_t w0 = fork();
    if (w0 == 0) {
        alarm(60);
        zt_log_init("test_allreduce", 0);
        long faults = s_steady_faults(0, n);
        if (faults >= 512)
            fprintf(stderr, "worker 0: 8 rounds of 4 MiB faulted in %ld pages\n", faults);
        exit(faults < 512 ? 0 : 1);
    }
    long faults = s_steady_faults(1, n);
    int st;
    waitpid(w0, &st, 0);
    bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0 && faults < 512;
    printf("8 rounds of 4 MiB fault in %ld pages (worker 1; both under 512): %s\n", faults, ok ? "ok" : "FAILED");
    fflush(stdout);
    assert(ok);
    t_stop_reducers(1);
}

/* ------------------------------------------------------------ large */

/* Rounds of one tensor of n floats by N workers through R reducers (0:
 * the ring), exact: with 16 MiB the kernel's buffers fill, so a worker's
 * bytes wait in its ends' queues while it waits for its peers (which wait
 * on it in turn: the ring). */
static int s_large_worker(int w, int N, int R, const void *np)
{
    int64_t n = *(const int64_t *) np;
    alarm(60);
    zt_log_init("test_allreduce", w);
    const char *reds[4], *peers[8];
    t_ends(N, R, reds, peers);
    zt_allreduce_opts_t o = { w, N, R ? reds : NULL, R, peers, 1 << 26, 5, 0, 0, 0 };
    zt_allreduce_t *ar = zt_allreduce_new(&o);
    int64_t shape[1] = { n };
    float *g = malloc((size_t) n * sizeof(float));
    if (!ar || !g || zt_allreduce_register(ar, "g", shape, 1, ZT_F32) != 0 || zt_allreduce_commit(ar, 20000) != ZT_OK)
        return 1;
    for (int round = 0; round < 2; round++) {
        for (int64_t i = 0; i < n; i++)
            g[i] = (float) ((w + 1) * ((i + round) % 7 + 1));
        if (zt_allreduce_submit(ar, 0, g) != ZT_OK || zt_allreduce_wait(ar, false, 30000) != ZT_OK) {
            fprintf(stderr, "worker %d: %s\n", w, zt_allreduce_error(ar));
            return 1;
        }
        for (int64_t i = 0; i < n; i++)
            if (g[i] != (float) (N * (N + 1) / 2 * ((i + round) % 7 + 1)))
                return 1;
    }
    free(g);
    zt_allreduce_destroy(&ar);
    return 0;
}

void t_large(int N, int R, int64_t n)
{
    int failed = t_run_workers(N, R, "large", s_large_worker, &n);
    printf("%d workers, %lld floats, %s: %s\n", N, (long long) n, R ? "through reducers" : "the ring",
           failed ? "FAILED" : "ok");
    fflush(stdout);
    assert(!failed);
}

/* ------------------------------------------------------------ orders */

#define ORDERS_NT 5

/* ORDERS_NT tensors of n floats, each a bucket of its own under a send window
 * of one piece per reducer (across buckets, to a reducer over TCP), which
 * each worker submits in an order of its own with pauses between: every
 * round still completes, exact, and without a stall. */
static int s_orders_worker(int w, int N, int R, const void *np)
{
    int64_t n = *(const int64_t *) np;
    alarm(60);
    zt_log_init("test_allreduce", w);
    setenv("ZT_AR_PIECE_BYTES", "4096", 1);
    setenv("ZT_AR_WINDOW_BYTES", "8192", 1);
    setenv("ZT_AR_LOCAL_WINDOW_BYTES", "4096", 1);
    const char *reds[4], *peers[8];
    t_ends(N, R, reds, peers);
    zt_allreduce_opts_t o = { w, N, reds, R, peers, 4096, 5, 0, 0, 0 };
    zt_allreduce_t *ar = zt_allreduce_new(&o);
    float *g[ORDERS_NT];
    int64_t shape[1] = { n };
    for (int t = 0; t < ORDERS_NT; t++) {
        char name[8] = { 't', (char) ('0' + t), 0 };
        g[t] = malloc((size_t) n * sizeof(float));
        if (!ar || !g[t] || zt_allreduce_register(ar, name, shape, 1, ZT_F32) != t)
            return 1;
    }
    if (zt_allreduce_commit(ar, 20000) != ZT_OK)
        return 1;
    for (int round = 0; round < 3; round++) {
        for (int j = 0; j < ORDERS_NT; j++) { /* worker w: rotated by w, odd ones backwards */
            int t = (w % 2 ? ORDERS_NT - 1 - j : j) + w + round;
            t %= ORDERS_NT;
            for (int64_t i = 0; i < n; i++)
                g[t][i] = (float) ((w + 1) * ((i + t + round) % 5 + 1));
            if (zt_allreduce_submit(ar, t, g[t]) != ZT_OK)
                return 1;
            usleep(2000);
        }
        if (zt_allreduce_wait(ar, false, 30000) != ZT_OK) {
            fprintf(stderr, "worker %d round %d: %s\n", w, round, zt_allreduce_error(ar));
            return 1;
        }
        for (int t = 0; t < ORDERS_NT; t++)
            for (int64_t i = 0; i < n; i++)
                if (g[t][i] != (float) (N * (N + 1) / 2 * ((i + t + round) % 5 + 1))) {
                    fprintf(stderr, "worker %d round %d: t%d[%lld] = %g\n", w, round, t, (long long) i, g[t][i]);
                    return 1;
                }
    }
    /* no round waited on a window full of another bucket's pieces: a wait
     * that did would heal only by the pieces sent again after 2 s (a stall
     * each; one is allowed for a machine that paused us) */
    uint64_t stalls = zt_allreduce_stalls(ar);
    if (stalls > 1)
        fprintf(stderr, "worker %d: %llu stalls\n", w, (unsigned long long) stalls);
    for (int t = 0; t < ORDERS_NT; t++)
        free(g[t]);
    zt_allreduce_destroy(&ar);
    return stalls > 1;
}

void t_orders(int N, int R, int64_t n)
{
    int failed = t_run_workers(N, R, "orders", s_orders_worker, &n);
    printf("%d workers, %d tensors of %lld floats submitted in different orders under one window: %s\n", N,
           ORDERS_NT, (long long) n, failed ? "FAILED" : "ok");
    fflush(stdout);
    assert(!failed);
}
