/* All-reduce on loopback: N workers (processes) through R reducers
 * (ztrain-reducer processes), or the ring (R = 0) on the same transport.
 * Prints time per operation, algorithm bandwidth (size / time) and bus
 * bandwidth (algbw * 2(n-1)/n), as nccl-tests define them, one line per
 * configuration, machine-readable ("ztrain N R bytes seconds").
 *
 *   bench/ar_bench REDUCER_BINARY [--quick] [--fusion]
 */
#include "bench_auth.h"
#include "bench_cpu.h"
#include "base/zt_util.h"
#include "ztrain/ztrain.h"
#include "ztrain/zt_allreduce.h"
#include "ztrain/zt_collective.h"
#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>


/* --inplace: gradients are written where zt_allreduce_buffer says, so that
 * submit and wait copy nothing (the API's zero-copy use). */
static bool s_inplace;
/* The cycle time: 0 (flush what is ready at every submit), or -1 (--autotune:
 * the default, ZT_CYCLE_TIME_MS else 5 ms). */
static int s_cycle_ms;
/* Rounds the autotune search took in this worker (before the timed ones). */
static int s_searched;
/* --coll: the workers stream their tensors through a collective (zt_coll,
 * as the Python package's DDP hook does) instead of registering them. */
static bool s_coll;

/* One step through a collective: every tensor added (the last first, as
 * backward passes make them), then finished. */
static void s_coll_step(zt_coll_t *c, float *data, int64_t n, int ntensors)
{
    if (ntensors == 1) { /* one call, its agreement included (ztrain.allreduce's) */
        if (zt_coll_allreduce(c, data, n, false, 120000) != ZT_OK) {
            fprintf(stderr, "allreduce: %s\n", zt_coll_error(c));
            exit(1);
        }
        return;
    }
    for (int t = ntensors - 1; t >= 0; t--)
        if (zt_coll_add(c, data + (int64_t) t * n, n, false, 120000) != ZT_OK) {
            fprintf(stderr, "add: %s\n", zt_coll_error(c));
            exit(1);
        }
    if (zt_coll_finish(c, 120000) != ZT_OK) {
        fprintf(stderr, "finish: %s\n", zt_coll_error(c));
        exit(1);
    }
}

/* Steps through a collective until autotune's search is over, then two
 * warm-up steps and iters timed. Seconds per step. */
static double s_coll_worker(zt_allreduce_opts_t *o, size_t bytes, int ntensors, int iters)
{
    char why[512];
    zt_coll_t *c = zt_coll_new(o, 60000, why, sizeof why);
    if (!c) {
        fprintf(stderr, "collective: %s\n", why);
        exit(1);
    }
    int64_t n = (int64_t) (bytes / 4);
    float *data = calloc((size_t) (n * ntensors), 4);
    bool searching = false;
    zt_coll_layout(c, NULL, NULL, &searching);
    int searched = 0;
    for (; searching; searched++) {
        s_coll_step(c, data, n, ntensors);
        zt_coll_layout(c, NULL, NULL, &searching);
    }
    int64_t t0 = 0;
    for (int i = 0; i < iters + 2; i++) {
        if (i == 2)
            t0 = zt_now_us();
        s_coll_step(c, data, n, ntensors);
    }
    s_searched = searched;
    int64_t th;
    int cy;
    zt_coll_layout(c, &th, &cy, NULL);
    if (o->rank == 0 && searched)
        printf("autotune N=%d R=%d (collective, slots of %lld bytes) chose fusion threshold %lld bytes, cycle time "
               "%d ms, after %d steps\n", o->workers, o->nreducers, (long long) zt_coll_slot_bytes(c),
               (long long) th, cy, searched);
    fflush(stdout);
    double sec = (double) (zt_now_us() - t0) / 1e6 / iters;
    free(data);
    zt_coll_destroy(&c);
    return sec;
}

/* ntensors tensors of `bytes` each; returns seconds per all-reduce of all of them. */
static double s_worker(int rank, int N, const char *const *reds, int R, const char *const *peers,
                       size_t bytes, int ntensors, int64_t threshold, int iters)
{
    bool sequential = threshold < 0; /* one by one: submit, wait, next */
    if (sequential)
        threshold = 1;
    zt_allreduce_opts_t o = { rank, N, reds, R, peers, threshold, s_cycle_ms, 0, 0, 0 };
    if (s_coll)
        return s_coll_worker(&o, bytes, ntensors, iters);
    zt_allreduce_t *ar = zt_allreduce_new(&o);
    int64_t n = (int64_t) (bytes / 4);
    float **bufs = calloc((size_t) ntensors, sizeof *bufs);
    for (int t = 0; t < ntensors; t++) {
        char name[32];
        snprintf(name, sizeof name, "t%d", t);
        zt_allreduce_register(ar, name, &n, 1, ZT_F32);
        bufs[t] = calloc((size_t) n + 1, 4);
    }
    if (zt_allreduce_commit(ar, 60000) != ZT_OK) {
        fprintf(stderr, "commit: %s\n", zt_allreduce_error(ar));
        exit(1);
    }
    /* ZT_AUTOTUNE: the search runs first; the rounds timed are the choice's */
    bool searching = zt_allreduce_layout(ar, NULL, NULL, NULL) >= 0 && getenv("ZT_AUTOTUNE");
    int searched = 0;
    for (; searching && searched < 100000; searched++) {
        for (int t = ntensors - 1; t >= 0; t--)
            zt_allreduce_submit(ar, t, s_inplace ? zt_allreduce_buffer(ar, t) : bufs[t]);
        if (zt_allreduce_wait(ar, false, 120000) != ZT_OK) {
            fprintf(stderr, "wait: %s\n", zt_allreduce_error(ar));
            exit(1);
        }
        zt_allreduce_layout(ar, NULL, NULL, &searching);
    }
    s_searched = searched;
    if (rank == 0 && searched) {
        int64_t th;
        int cy;
        zt_allreduce_layout(ar, &th, &cy, NULL);
        printf("autotune N=%d R=%d chose fusion threshold %lld bytes, cycle time %d ms, after %d rounds\n", N, R,
               (long long) th, cy, searched);
        fflush(stdout);
    }
    int64_t t0 = 0;
    for (int i = 0; i < iters + 2; i++) {
        if (i == 2)
            t0 = zt_now_us();
        for (int t = ntensors - 1; t >= 0; t--) {
            zt_allreduce_submit(ar, t, s_inplace ? zt_allreduce_buffer(ar, t) : bufs[t]);
            if (sequential && zt_allreduce_wait(ar, false, 120000) != ZT_OK) {
                fprintf(stderr, "wait: %s\n", zt_allreduce_error(ar));
                exit(1);
            }
        }
        if (zt_allreduce_wait(ar, false, 120000) != ZT_OK) {
            fprintf(stderr, "wait: %s\n", zt_allreduce_error(ar));
            exit(1);
        }
    }
    double s = (double) (zt_now_us() - t0) / 1e6 / iters;
    for (int t = 0; t < ntensors; t++)
        free(bufs[t]);
    free(bufs);
    zt_allreduce_destroy(&ar);
    return s;
}

/* Reducer r ('r') or worker w ('w') endpoint: ipc:// with AR_BENCH_IPC, else loopback TCP. */
static void s_endpoint(char *buf, size_t size, char who, int i)
{
    if (getenv("AR_BENCH_IPC"))
        snprintf(buf, size, "ipc:///tmp/ar-bench-%d-%c%d", (int) getpid(), who, i);
    else
        snprintf(buf, size, "tcp://127.0.0.1:%d", zt_ephemeral_port());
}

/* Seconds per all-reduce (the slowest worker's); *cpu_op (when not NULL):
 * the CPU-seconds the workers and reducers spent per all-reduce, the
 * start and the two warm-up rounds included. */
static double s_run(const char *redbin, int N, int R, size_t bytes, int ntensors, int64_t threshold,
                    double budget, double *cpu_op)
{
    double cpu0 = s_bench_children_cpu();
    char reps[4][64], peps[8][64];
    const char *reds[4], *peers[8];
    pid_t rp[4];
    for (int r = 0; r < R; r++) {
        s_endpoint(reps[r], sizeof reps[r], 'r', r);
        reds[r] = reps[r];
        char idx[16], cnt[16];
        snprintf(idx, sizeof idx, "%d", r);
        snprintf(cnt, sizeof cnt, "%d", R);
        if ((rp[r] = fork()) == 0) {
            setenv("ZT_LOG_LEVEL", "warn", 1);
            unsetenv("ZT_COORDINATOR");
            execl(redbin, redbin, "--bind", reps[r], "--index", idx, "--servers", cnt, (char *) NULL);
            _exit(127);
        }
    }
    for (int w = 0; w < N; w++) {
        s_endpoint(peps[w], sizeof peps[w], 'w', w);
        peers[w] = peps[w];
    }
    double total = (double) bytes * ntensors;
    int iters = (int) (budget * 1e9 / (total * N + 1e5));
    if (iters < 3)
        iters = 3;
    if (iters > 3000)
        iters = 3000;
    int res[2];
    if (pipe(res))
        exit(1);
    pid_t wp[8];
    for (int w = 0; w < N; w++)
        if ((wp[w] = fork()) == 0) {
            double s[2] = { s_worker(w, N, reds, R, peers, bytes, ntensors, threshold, iters), 0 };
            s[1] = s_searched;
            if (write(res[1], s, sizeof s) != sizeof s)
                _exit(1);
            exit(0);
        }
    close(res[1]); /* a worker that fails without a result ends the reads */
    double worst = 0, searched = 0;
    for (int w = 0; w < N; w++) {
        double s = 0;
        double got[2];
        if (read(res[0], got, sizeof got) != sizeof got) {
            fprintf(stderr, "ar_bench: a worker ended without its result (%d %d %zu)\n", N, R, bytes);
            for (int r = 0; r < R; r++)
                kill(rp[r], SIGTERM);
            exit(1);
        }
        s = got[0];
        searched = got[1] > searched ? got[1] : searched;
        worst = s > worst ? s : worst;
    }
    for (int w = 0; w < N; w++)
        waitpid(wp[w], NULL, 0);
    for (int r = 0; r < R; r++) {
        kill(rp[r], SIGTERM);
        waitpid(rp[r], NULL, 0);
    }
    close(res[0]);
    if (cpu_op)
        *cpu_op = (s_bench_children_cpu() - cpu0) / (iters + 2 + searched); /* per round, the search's included */
    return worst;
}

static void s_usage(FILE *out)
{
    fprintf(out,
            "usage: ar_bench [REDUCER] [--quick] [--inplace] [--fusion] [--autotune] [--auth] [--only N R BYTES]\n"
            "       ar_bench --keys DIR\n"
            "       ar_bench --one RANK N BYTES ITERS REDUCERS PEERS\n\n"
            "All-reduce time per operation for 2 and 4 workers through 0 (the ring), 1, 2 or 4\n"
            "reducers, 4 KiB to 64 MiB; prints 'ztrain N R BYTES SECONDS' lines (bench/\n"
            "allreduce_bench.py runs it beside Open MPI and gloo).\n\n"
            "  REDUCER        the ztrain-reducer binary (default build/bin/ztrain-reducer)\n"
            "  --quick        shorter runs, no 64 MiB\n"
            "  --inplace      workers write gradients into zt_allreduce_buffer (no copies)\n"
            "  --fusion       1000 tensors of 4 KiB: one by one against fusion thresholds\n"
            "  --autotune     1000 tensors of 4 KiB, 4 workers, 2 reducers: a sweep of fixed fusion\n"
            "                 thresholds, then ZT_AUTOTUNE's choice, timed after its search, with\n"
            "                 its ratio to the best fixed one\n"
            "  --coll         with --autotune: the tensors streamed through a collective (the Python\n"
            "                 package's DDP hook): fixed slot sizes, then autotune from 1 MiB slots;\n"
            "                 with --only, one zt_coll_allreduce a step (ztrain.allreduce's path:\n"
            "                 its agreement, then slots of ZT_FUSION_THRESHOLD, default 1 MiB)\n"
            "  --auth         reducers and workers are secured as in a job (CURVE control, sealed bulk)\n"
            "  --keys DIR     writes a job's keys to DIR (DIR/bench.key for ZT_CREDENTIALS) and exits:\n"
            "                 for runs started elsewhere (bench/netns_bench.py)\n"
            "  --only N R BYTES  one configuration\n"
            "  --one ...      one worker of a run started elsewhere (bench/netns_bench.py);\n"
            "                 REDUCERS and PEERS are comma lists or '-'\n");
}

/* --autotune: fixed thresholds against ZT_AUTOTUNE's choice, each with the
 * CPU-seconds per byte reduced (workers and reducers). */
static int s_autotune_sweep(const char *redbin, bool quick)
{
    const int N = 4, R = 2, nt = 1000;
    const double bytes = 4096.0 * nt, budget = quick ? 0.5 : 1.5;
    double best = 1e30, cpu;
    int64_t best_th = 0;
    s_cycle_ms = -1; /* the default, as a job runs */
    for (int64_t th = s_coll ? 16384 : 4096; th <= (s_coll ? 16 << 20 : 64 << 20); th *= 4) {
        double s = s_run(redbin, N, R, 4096, nt, th, budget, &cpu);
        printf("sweep N=%d R=%d fixed %s %9lld bytes (cycle time 5 ms) %8.3f ms a round %8.2f CPU-ns/B\n",
               N, R, s_coll ? "slot size" : "threshold", (long long) th,
               s * 1e3, cpu / bytes * 1e9);
        fflush(stdout);
        if (s < best) {
            best = s;
            best_th = th;
        }
    }
    setenv("ZT_AUTOTUNE", "1", 0);
    setenv("ZT_AUTOTUNE_WARMUP_SAMPLES", "1", 0);
    double s = s_run(redbin, N, R, 4096, nt, s_coll ? 1 << 20 : 0, budget, &cpu);
    printf("autotune N=%d R=%d after its search %8.3f ms a round %8.2f CPU-ns/B (a round's, the search's included): "
           "%.2fx the best fixed threshold's time (%lld bytes, %.3f ms)\n", N, R, s * 1e3, cpu / bytes * 1e9,
           s / best, (long long) best_th, best * 1e3);
    return 0;
}

/* Long on purpose: the flags, then each mode (--one, --fusion, --only, the
 * table) as one block that times and prints, so that what a printed line
 * measured is read in one place. */
/* --one RANK N BYTES ITERS REDUCERS PEERS (argv[i + 1..6]): one worker of a
 * run whose processes are started elsewhere (bench/netns_bench.py puts
 * each in its own network namespace). REDUCERS and PEERS are comma lists or
 * "-". */
static int s_one(char **argv, int i)
{
    int rank = atoi(argv[i + 1]), N = atoi(argv[i + 2]), iters = atoi(argv[i + 4]);
    size_t bytes = (size_t) atoll(argv[i + 3]);
    char *lists[2] = { strdup(argv[i + 5]), strdup(argv[i + 6]) };
    const char *items[2][64];
    int counts[2] = { 0, 0 };
    for (int l = 0; l < 2; l++) {
        char *save = NULL;
        for (char *t = strtok_r(lists[l], ",", &save); t && counts[l] < 64; t = strtok_r(NULL, ",", &save))
            if (strcmp(t, "-"))
                items[l][counts[l]++] = t;
    }
    double s = s_worker(rank, N, items[0], counts[0], items[1], bytes, 1, 64 << 20, iters);
    printf("%.9f\n", s);
    return 0;
}

/* --fusion: 1000 tensors of 4 KiB one by one (threshold 1 byte: every
 * tensor its own bucket) against fused at 1, 4, 16, 64 MiB. */
static int s_fusion(const char *redbin, bool quick)
{
    const int64_t th[6] = { -1, 1, 1 << 20, 4 << 20, 16 << 20, 64 << 20 };
    const char *what[6] = { "one by one (wait each)", "unfused, pipelined", "fused 1 MiB",
                            "fused 4 MiB", "fused 16 MiB", "fused 64 MiB" };
    for (int N = 2; N <= 4; N += 2)
        for (int R = 1; R <= 2; R++) {
            double base = 0;
            for (int i = 0; i < 6; i++) {
                double s = s_run(redbin, N, R, 4096, 1000, th[i], quick ? 0.3 : 1.0, NULL);
                if (i == 0)
                    base = s;
                printf("fusion N=%d R=%d %-24s %8.2f ms per 1000 tensors %8.0f tensors/s  "
                       "speedup %5.1fx\n", N, R, what[i], s * 1e3, 1000 / s, base / s);
                fflush(stdout);
            }
        }
    return 0;
}

int main(int argc, char **argv)
{
    const char *redbin = "build/bin/ztrain-reducer";
    bool quick = false, fusion = false, autotune = false;
    int only_n = 0, only_r = -1, one_at = 0;
    size_t only_size = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            s_usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--quick"))
            quick = true;
        else if (!strcmp(argv[i], "--fusion"))
            fusion = true;
        else if (!strcmp(argv[i], "--autotune"))
            autotune = true;
        else if (!strcmp(argv[i], "--inplace"))
            s_inplace = true;
        else if (!strcmp(argv[i], "--coll"))
            s_coll = true;
        else if (!strcmp(argv[i], "--auth"))
            s_bench_auth();
        else if (!strcmp(argv[i], "--keys") && i + 1 < argc) {
            char *names[] = { "bench" };
            return zt_auth_write_job(argv[i + 1], names, 1) == ZT_OK ? 0 : 1;
        }
        else if (!strcmp(argv[i], "--only") && i + 3 < argc) { /* --only N R BYTES */
            only_n = atoi(argv[i + 1]);
            only_r = atoi(argv[i + 2]);
            only_size = (size_t) atoll(argv[i + 3]);
            if (only_n < 1 || only_r < 0 || only_size < 4) {
                fprintf(stderr, "ar_bench: --only wants N >= 1 workers, R >= 0 reducers and BYTES >= 4\n");
                return 2;
            }
            i += 3;
        }
        else if (!strcmp(argv[i], "--one") && i + 6 < argc) {
            one_at = i;
            i += 6;
        }
        else if (argv[i][0] == '-' && argv[i][1]) { /* "-": no reducer binary (--one) */
            fprintf(stderr, "ar_bench: unknown option or missing values: '%s'\n", argv[i]);
            s_usage(stderr);
            return 2;
        }
        else
            redbin = argv[i];
    }
    if (!one_at && access(redbin, X_OK) != 0) {
        fprintf(stderr, "ar_bench: '%s' is not an executable ztrain-reducer: %s\n", redbin, strerror(errno));
        return 2;
    }
    zt_tune_malloc(); /* as ztrain's own binaries do */
    setenv("ZT_LOG_LEVEL", "warn", 1);
    zt_log_init("ar_bench", 0);
    if (one_at)
        return s_one(argv, one_at);
    if (autotune)
        return s_autotune_sweep(redbin, quick);
    if (fusion)
        return s_fusion(redbin, quick);
    if (only_n) {
        /* --coll: ztrain.allreduce's path, slots of ZT_FUSION_THRESHOLD */
        double cpu, s = s_run(redbin, only_n, only_r, only_size, 1, s_coll ? 0 : 64 << 20, quick ? 1.0 : 3.0, &cpu);
        /* the sixth field: CPU-seconds (workers and reducers) per all-reduce */
        printf("%s %d %d %zu %.9f %.9f\n", s_inplace ? "ztrain-ip" : "ztrain", only_n, only_r, only_size, s, cpu);
        return 0;
    }
    const size_t sizes[5] = { 4u << 10, 64u << 10, 1u << 20, 16u << 20, 64u << 20 };
    const int Ns[2] = { 2, 4 }, Rs[4] = { 0, 1, 2, 4 };
    for (int ni = 0; ni < 2; ni++)
        for (int si = 0; si < 5; si++)
            for (int ri = 0; ri < 4; ri++) {
                if ((quick && sizes[si] == (64u << 20)) || (s_inplace && Rs[ri] != 0 && Rs[ri] != 2))
                    continue;
                double s = s_run(redbin, Ns[ni], Rs[ri], sizes[si], 1, 64 << 20, quick ? 0.2 : 0.6, NULL);
                printf("%s %d %d %zu %.9f\n", s_inplace ? "ztrain-ip" : "ztrain", Ns[ni], Rs[ri], sizes[si], s);
                fflush(stdout);
            }
    return 0;
}
