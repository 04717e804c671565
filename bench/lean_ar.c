/* lean_ar: the limit a Reduction Server's transport can reach on this
 * machine, as a reference beside ztrain's and gloo's figures. A minimal
 * plain-TCP reduction server and its workers, written for the benchmark
 * only: W worker processes and R reducer processes over loopback TCP; each
 * worker-reducer pair has one connection and a thread at each end; a worker
 * sends reducer r its r-th chunk of the tensor and receives the chunk's sum
 * straight back into the tensor; the reducer receives each worker's chunk
 * straight into an input slot, sums the slots in rank order with all its
 * threads (each a share of the chunk) and sends the sum to every worker.
 * No library, no framing beyond the bytes, no authentication, no
 * encryption, no recovery: what is left is the kernel's copies and the sum.
 *
 * --seal adds the seal and nothing else: the cipher ztrain's sealed
 * streams use (ZT_SEAL_CIPHER: AEGIS-128X2 by default, zt_aegis; or
 * AES-128-GCM, zt_gcm) in units of 128 KiB, each with its own IV
 * and tag, four units at a time (sealed into a buffer that stays in the
 * cache, sent, received into one, opened out of it). A worker seals its
 * chunk from the tensor and opens the sum it gets back straight into the
 * tensor; a reducer opens each worker's chunk into its slot, and its
 * threads seal the sum once (each its share of the units) before each
 * sends it. 3W + 1 passes per tensor byte, as
 * through ztrain's reducers (13 with 4 workers); a tag that does not match
 * stops the run. So lean_ar --seal is the limit of a sealed reduction
 * server: the kernel's copies, the sum and the cipher's passes.
 *
 * Prints one line: the median time per all-reduce and the CPU-seconds per
 * GB all-reduced of the workers and of the whole job (workers and
 * reducers), over the timed iterations:
 *   lean workers 4 reducers 4 bytes 16777216 ms 5.612 workers_cpu_s_per_gb 1.61 job_cpu_s_per_gb 4.02
 *
 *   lean_ar [--workers W] [--reducers R] [--bytes B] [--iters N] [--warmup K] */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define BENCH_PROG "lean_ar"
#include "bench_sock.h"
#include "wire/zt_aegis.h"
#include "wire/zt_gcm.h"
#include "wire/zt_seal.h"
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_PEERS 64

static int W = 4, R = 4, ITERS = 40, WARMUP = 5;
static int64_t BYTES = 16 << 20;
static bool SEAL;
static zt_gcm_key_t KEY;
static uint8_t RAW_KEY[16] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };
static bool AEGIS; /* ZT_SEAL_CIPHER=aegis128x2 (the default) */

#define UNIT ((size_t) 128 << 10)
#define TAG 16
#define BATCH 4 /* units sealed, sent, received and opened at a time (in the cache) */

/* The plaintext bytes of units [u, v) of n bytes. */
static size_t batch_bytes(size_t n, size_t u, size_t v) { return (n < v * UNIT ? n : v * UNIT) - u * UNIT; }

/* Sealed size of n plaintext bytes: each unit followed by its tag. */
static size_t sealed_len(size_t n) { return n + (n + UNIT - 1) / UNIT * TAG; }

/* Seals (enc) or opens units [u0, u1) of the n bytes at plain, whose
 * sealed form is at sealed (unit u0's first byte); each unit's IV is (who, it, unit), who naming
 * the sender and the chunk (a worker's rank << 8 | the reducer; a
 * reducer's sum 0x10000 + its index), so no IV is used twice under the
 * one key. Opening checks every tag. */
static void seal_units(bool enc, uint32_t who, int it, void *plain, uint8_t *sealed, size_t n, size_t u0, size_t u1)
{
    for (size_t u = u0; u < u1; u++) {
        size_t off = u * UNIT, len = n - off < UNIT ? n - off : UNIT;
        uint8_t iv[16] = { 0 }, tag[16], *c = sealed + (u - u0) * (UNIT + TAG);
        uint32_t f[3] = { who, (uint32_t) it, (uint32_t) u };
        memcpy(iv, f, sizeof f);
        uint8_t *from = enc ? (uint8_t *) plain + off : c, *to = enc ? c : (uint8_t *) plain + off;
        if (AEGIS)
            zt_aegis_crypt(2, enc, RAW_KEY, iv, NULL, 0, from, to, len, tag);
        else
            zt_gcm_crypt(&KEY, enc, iv, NULL, 0, from, to, len, tag);
        if (enc)
            memcpy(c + len, tag, TAG);
        else if (memcmp(tag, c + len, TAG)) {
            fprintf(stderr, "lean_ar: a tag does not match (sender %u, round %d, unit %zu)\n", who, it, u);
            exit(1);
        }
    }
}

/* Reducer r's chunk of n elements: [lo, hi). */
static void chunk(int64_t n, int r, int64_t *lo, int64_t *hi)
{
    *lo = n * r / R;
    *hi = n * (r + 1) / R;
}

/* ---------------------------------------------------------- reducer */

typedef struct {
    int w, fd, r;
    float **slot, *sum;
    uint8_t **sealed_in, *sealed_sum; /* --seal: each worker's batch as it came, the sum sealed once */
    int64_t count;
    pthread_barrier_t *got, *summed, *sealed;
} red_thread_t;

static void *red_thread(void *arg)
{
    red_thread_t *t = arg;
    int64_t a = t->count * t->w / W, e = t->count * (t->w + 1) / W; /* this thread's share of the sum */
    size_t n = (size_t) t->count * sizeof(float), units = (n + UNIT - 1) / UNIT;
    for (int it = 0; it < WARMUP + ITERS; it++) {
        for (size_t u = 0; SEAL && u < units; u += BATCH) { /* a batch into the cache, opened into the slot */
            size_t v = u + BATCH < units ? u + BATCH : units;
            recv_all(t->fd, t->sealed_in[t->w], sealed_len(batch_bytes(n, u, v)));
            seal_units(false, (uint32_t) t->w << 8 | (uint32_t) t->r, it, t->slot[t->w], t->sealed_in[t->w], n, u, v);
        }
        if (!SEAL)
            recv_all(t->fd, t->slot[t->w], n);
        pthread_barrier_wait(t->got);
        memcpy(t->sum + a, t->slot[0] + a, (size_t) (e - a) * sizeof(float));
        for (int w = 1; w < W; w++) {
            const float *s = t->slot[w];
            for (int64_t i = a; i < e; i++)
                t->sum[i] += s[i];
        }
        pthread_barrier_wait(t->summed);
        if (SEAL) { /* the sum sealed once, each thread its share of the units */
            size_t u0 = units * (size_t) t->w / W;
            seal_units(true, 0x10000u + (uint32_t) t->r, it, t->sum, t->sealed_sum + u0 * (UNIT + TAG), n, u0,
                       units * (size_t) (t->w + 1) / W);
            pthread_barrier_wait(t->sealed);
            send_all(t->fd, t->sealed_sum, sealed_len(n));
        }
        else
            send_all(t->fd, t->sum, n);
    }
    return NULL;
}

static void reducer(int r, int lfd, int report)
{
    int64_t lo, hi;
    chunk(BYTES / 4, r, &lo, &hi);
    int64_t count = hi - lo;
    float *slot[MAX_PEERS], *sum = malloc((size_t) count * sizeof(float) + 1);
    size_t sl = sealed_len((size_t) count * sizeof(float)) + 1;
    uint8_t *sealed_in[MAX_PEERS], *sealed_sum = SEAL ? malloc(sl) : NULL;
    int fd[MAX_PEERS];
    for (int w = 0; w < W; w++) {
        slot[w] = malloc((size_t) count * sizeof(float) + 1);
        memset(slot[w], 0, (size_t) count * sizeof(float));
        sealed_in[w] = SEAL ? calloc(1, BATCH * (UNIT + TAG)) : NULL;
    }
    for (int i = 0; i < W; i++) { /* each worker says its rank first */
        int c = accept(lfd, NULL, NULL), one = 1, rank;
        if (c < 0)
            die("accept");
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        recv_all(c, &rank, sizeof rank);
        fd[rank] = c;
    }
    pthread_barrier_t got, summed, sealed;
    pthread_barrier_init(&got, NULL, (unsigned) W);
    pthread_barrier_init(&summed, NULL, (unsigned) W);
    pthread_barrier_init(&sealed, NULL, (unsigned) W);
    red_thread_t t[MAX_PEERS];
    pthread_t th[MAX_PEERS];
    for (int w = 0; w < W; w++) {
        t[w] = (red_thread_t) { w, fd[w], r, slot, sum, sealed_in, sealed_sum, count, &got, &summed, &sealed };
        pthread_create(&th[w], NULL, red_thread, &t[w]);
    }
    /* the CPU of the timed iterations: from the workers' word that the
     * warm-up is over (a byte from worker 0) would cost a round trip; the
     * warm-up's share is taken out by proportion instead */
    double c0 = bench_self_cpu();
    for (int w = 0; w < W; w++)
        pthread_join(th[w], NULL);
    double spent = (bench_self_cpu() - c0) * ITERS / (WARMUP + ITERS);
    if (write(report, &spent, sizeof spent) != sizeof spent)
        die("report");
    exit(0);
}

/* ----------------------------------------------------------- worker */

typedef struct {
    int r, fd, rank;
    float *x;
    uint8_t *out, *in; /* --seal: the chunk sealed, the sum as it came */
    pthread_barrier_t *start, *done;
} wk_thread_t;

static void *wk_thread(void *arg)
{
    wk_thread_t *t = arg;
    int64_t lo, hi;
    chunk(BYTES / 4, t->r, &lo, &hi);
    size_t n = (size_t) (hi - lo) * sizeof(float), units = (n + UNIT - 1) / UNIT;
    for (int it = 0; it < WARMUP + ITERS; it++) {
        pthread_barrier_wait(t->start);
        if (SEAL) { /* a batch at a time, sealed or opened in the cache */
            for (size_t u = 0; u < units; u += BATCH) {
                size_t v = u + BATCH < units ? u + BATCH : units;
                seal_units(true, (uint32_t) t->rank << 8 | (uint32_t) t->r, it, t->x + lo, t->out, n, u, v);
                send_all(t->fd, t->out, sealed_len(batch_bytes(n, u, v)));
            }
            for (size_t u = 0; u < units; u += BATCH) {
                size_t v = u + BATCH < units ? u + BATCH : units;
                recv_all(t->fd, t->in, sealed_len(batch_bytes(n, u, v)));
                seal_units(false, 0x10000u + (uint32_t) t->r, it, t->x + lo, t->in, n, u, v);
            }
        }
        else {
            send_all(t->fd, t->x + lo, n);
            recv_all(t->fd, t->x + lo, n);
        }
        pthread_barrier_wait(t->done);
    }
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

static void worker(int rank, const int *ports, int report)
{
    int64_t n = BYTES / 4;
    float *x = malloc((size_t) n * sizeof(float) + 1);
    wk_thread_t t[MAX_PEERS];
    pthread_t th[MAX_PEERS];
    pthread_barrier_t start, done;
    pthread_barrier_init(&start, NULL, (unsigned) R + 1);
    pthread_barrier_init(&done, NULL, (unsigned) R + 1);
    for (int r = 0; r < R; r++) {
        int fd = connect_loopback(ports[r]);
        send_all(fd, &rank, sizeof rank);
        int64_t lo, hi;
        chunk(n, r, &lo, &hi);
        size_t sl = BATCH * (UNIT + TAG);
        t[r] = (wk_thread_t) { r, fd, rank, x, SEAL ? calloc(1, sl) : NULL, SEAL ? calloc(1, sl) : NULL, &start, &done };
        pthread_create(&th[r], NULL, wk_thread, &t[r]);
    }
    double *ms = calloc((size_t) ITERS, sizeof *ms), c0 = 0;
    for (int64_t i = 0; i < n; i++) /* the first round's sum is checked; later rounds sum its result */
        x[i] = (float) (rank + 1);
    for (int it = 0; it < WARMUP + ITERS; it++) {
        if (it == WARMUP)
            c0 = bench_self_cpu();
        double s = bench_wall();
        pthread_barrier_wait(&start);
        pthread_barrier_wait(&done);
        if (it >= WARMUP)
            ms[it - WARMUP] = (bench_wall() - s) * 1e3;
        float want = (float) W * (float) (W + 1) / 2;
        if (it == 0 && (x[0] != want || x[n - 1] != want)) {
            fprintf(stderr, "lean_ar: worker %d: sum %g, not %g\n", rank, x[0], want);
            exit(1);
        }
    }
    double spent = bench_self_cpu() - c0;
    for (int r = 0; r < R; r++)
        pthread_join(th[r], NULL);
    qsort(ms, (size_t) ITERS, sizeof *ms, cmp_double);
    double out[2] = { spent, ms[ITERS / 2] };
    if (write(report, out, sizeof out) != sizeof out)
        die("report");
    exit(0);
}

/* ------------------------------------------------------------- main */

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(argv[i], "--workers") && ++i)
            W = atoi(v);
        else if (!strcmp(argv[i], "--reducers") && ++i)
            R = atoi(v);
        else if (!strcmp(argv[i], "--bytes") && ++i)
            BYTES = atoll(v);
        else if (!strcmp(argv[i], "--iters") && ++i)
            ITERS = atoi(v);
        else if (!strcmp(argv[i], "--warmup") && ++i)
            WARMUP = atoi(v);
        else if (!strcmp(argv[i], "--seal"))
            SEAL = true;
        else {
            fprintf(stderr, "usage: lean_ar [--workers W] [--reducers R] [--bytes B] [--iters N] [--warmup K] [--seal]\n"
                            "the all-reduce through a minimal plain-TCP reduction server: the reference limit\n"
                            "  --seal  the seal's cipher (ZT_SEAL_CIPHER) on every byte both ways, as ztrain seals\n"
                            "          (13 passes with 4 workers)\n");
            return strcmp(argv[i], "--help") ? 2 : 0;
        }
    }
    if (W < 1 || W > MAX_PEERS || R < 1 || R > MAX_PEERS || BYTES < 4 * R || ITERS < 1 || WARMUP < 0) {
        fprintf(stderr, "lean_ar: 1-%d workers and reducers, at least 4 bytes a reducer, 1 iteration or more\n",
                MAX_PEERS);
        return 2;
    }
    BYTES &= ~(int64_t) 3;
    AEGIS = strcmp(zt_seal_cipher_name(), "aes128gcm") != 0;
    if (SEAL && (AEGIS ? !zt_aegis_supported() : !zt_gcm_supported())) {
        fprintf(stderr, "lean_ar: --seal needs %s, which this processor lacks\n",
                AEGIS ? "AES-NI (zt_aegis)" : "VAES and VPCLMULQDQ (zt_gcm)");
        return 2;
    }
    zt_gcm_init(&KEY, RAW_KEY);
    int ports[MAX_PEERS], lfd[MAX_PEERS], pipes[2];
    if (pipe(pipes) != 0)
        die("pipe");
    for (int r = 0; r < R; r++)
        lfd[r] = listen_loopback(MAX_PEERS, &ports[r]);
    int red_pipe[2], wk_pipe[2];
    if (pipe(red_pipe) != 0 || pipe(wk_pipe) != 0)
        die("pipe");
    for (int r = 0; r < R; r++)
        if (fork() == 0)
            reducer(r, lfd[r], red_pipe[1]);
    for (int w = 0; w < W; w++)
        if (fork() == 0)
            worker(w, ports, wk_pipe[1]);
    double red_cpu = 0, wk_cpu = 0, ms = 0;
    for (int r = 0; r < R; r++) {
        double c;
        if (read(red_pipe[0], &c, sizeof c) != sizeof c)
            die("a reducer's report");
        red_cpu += c;
    }
    for (int w = 0; w < W; w++) {
        double c[2];
        if (read(wk_pipe[0], c, sizeof c) != sizeof c)
            die("a worker's report");
        wk_cpu += c[0];
        ms = c[1] > ms ? c[1] : ms; /* the slowest worker's median */
    }
    int status, bad = 0;
    while (wait(&status) > 0)
        bad |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    double gb = (double) BYTES * ITERS / 1e9;
    printf("lean%s workers %d reducers %d bytes %lld ms %.3f workers_cpu_s_per_gb %.2f job_cpu_s_per_gb %.2f\n", SEAL ? "-sealed" : "", W, R,
           (long long) BYTES, ms, wk_cpu / gb, (wk_cpu + red_cpu) / gb);
    return bad;
}
