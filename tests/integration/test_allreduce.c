/* All-reduce against real ztrain-reducer processes (and the ring), workers
 * in separate processes: exact sums of integer-valued floats for several N
 * and R, odd sizes, an empty tensor, float16 and bfloat16, fused, unfused
 * and cycle-time flushes, averaging, a shape mismatch that fails with the
 * naming error instead of hanging, a reducer killed mid-job, and a round
 * averaged in place whose exact sum a restarted reducer asks for again, a
 * reducer restarted between the workers' hellos, a worker that has a sum
 * another missed handing it to the restarted reducer while busy elsewhere. The
 * reducers are on this host, so payloads go through shared memory unless
 * ZT_SHM=off (ctest runs both, and a third over TCP with the job's keys:
 * everything sealed); forged shared-memory references are refused.
 * Collectives (zt_coll) over the same reducers and the ring: calls larger
 * than a round, broadcasts bit for bit, streamed steps, calls that differ.
 * Autotune through reducers and the ring: exact sums under every layout. */
#include "ztrain/ztrain.h"
#include "ztrain/zt_allreduce.h"
#include "ztrain/zt_collective.h"
#include "test_sealed.h"
#include "test_allreduce.h"
#include "wire/zt_msg.h"
#include "wire/zt_shm.h"
#include "base/zt_util.h"
#include <assert.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define NT 6
static const char *s_names[NT] = { "a", "b", "c", "d", "e", "f" };
static const int64_t s_shapes[NT][2] = { { 7, 1 }, { 0, 1 }, { 1001, 1 }, { 3, 5 }, { 33, 1 }, { 100003, 1 } };
static const int s_dtypes[NT] = { ZT_F32, ZT_F32, ZT_F32, ZT_F16, ZT_BF16, ZT_F32 };
static char s_dir[200];
static const char *s_bin;
char t_red_eps[4][256];
static pid_t s_red_pids[4];

/* ZT_TEST_SEALED=1 (ctest's allreduce_sealed, with ZT_DATA_IPC=off): the
 * reducers and the ring over TCP with the job's keys, so every piece, sum
 * and block is sealed (the sums of large tensors open straight into the
 * bucket); the cases that speak to a reducer in plain messages or through
 * shared memory are left to the plain runs. */
static bool s_sealed;
/* ZT_TEST_TCP=1 (ctest's allreduce_lanes_plain, with ZT_DATA_IPC=off): the
 * same over TCP in the clear, as a job with security off runs between
 * hosts (the workers' ends on their own threads). */
static bool s_tcp;
char t_peer_eps[8][256];

void t_ends(int N, int R, const char **reds, const char **peers)
{
    for (int r = 0; r < R; r++)
        reds[r] = t_red_eps[r];
    for (int p = 0; p < N; p++)
        peers[p] = t_peer_eps[p];
}

static void s_endpoint(char *ep, size_t size, const char *name)
{
    if (s_sealed || s_tcp)
        snprintf(ep, size, "tcp://127.0.0.1:%d", zt_ephemeral_port());
    else
        snprintf(ep, size, "ipc://%s/%s", s_dir, name);
}

/* The ring's addresses for workers 0..n-1, before they fork. */
void t_peers(int n, const char *tag)
{
    for (int p = 0; p < n; p++) {
        char name[32];
        snprintf(name, sizeof name, "%s%d", tag, p);
        s_endpoint(t_peer_eps[p], sizeof t_peer_eps[p], name);
    }
}

static void s_spawn_reducer(int r, int R)
{
    char idx[16], cnt[16];
    snprintf(idx, sizeof idx, "%d", r);
    snprintf(cnt, sizeof cnt, "%d", R);
    if ((s_red_pids[r] = fork()) == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed assertion leaves no reducer behind */
        unsetenv("ZT_COORDINATOR");
        execl(s_bin, s_bin, "--bind", t_red_eps[r], "--index", idx, "--servers", cnt, (char *) NULL);
        _exit(127);
    }
}

void t_start_reducer(int r, int R)
{
    char name[16];
    snprintf(name, sizeof name, "red%d", r);
    s_endpoint(t_red_eps[r], sizeof t_red_eps[r], name);
    s_spawn_reducer(r, R);
}

/* As the coordinator would: killed, and started again in place. */
void t_restart_reducer(int r, int R)
{
    kill(s_red_pids[r], SIGKILL);
    waitpid(s_red_pids[r], NULL, 0);
    s_spawn_reducer(r, R);
}

void t_stop_reducers(int R)
{
    for (int r = 0; r < R; r++) {
        zt_stop_child(s_red_pids[r], 5000); /* cleanly: it unlinks its regions and twin */
    }
}

static int64_t s_numel(int t) { return s_shapes[t][0] * s_shapes[t][1]; }

static double s_value(int w, int t, int64_t i, int round) { return (double) ((i % 5) + 1 + t + round) * (w + 1); }

static void s_fill(void *buf, int t, int w, int round)
{
    for (int64_t i = 0; i < s_numel(t); i++) {
        float v = (float) s_value(w, t, i, round);
        if (s_dtypes[t] == ZT_F32)
            ((float *) buf)[i] = v;
        else
            ((uint16_t *) buf)[i] = s_dtypes[t] == ZT_F16 ? zt_f32_to_f16(v) : zt_f32_to_bf16(v);
    }
}

static double s_get(void *buf, int t, int64_t i)
{
    if (s_dtypes[t] == ZT_F32)
        return ((float *) buf)[i];
    uint16_t h = ((uint16_t *) buf)[i];
    return s_dtypes[t] == ZT_F16 ? zt_f16_to_f32(h) : zt_bf16_to_f32(h);
}

/* mismatch: 1 a tensor's shape on worker 1, 2 its ZT_AR_PIECE_BYTES. window:
 * 4 KiB pieces under a 4 KiB send window, so that every piece of the large
 * tensor waits for the sum before it. */
/* autotune: ZT_AUTOTUNE=1 with 6 samples of 2 rounds, over 40 rounds, every
 * third averaged: exact sums under each layout it forms, and the last one
 * its choice. */
typedef struct { int N, R; int64_t threshold; int cycle_ms; int sleep_us; int mismatch; int kill_after;
                 bool window, inplace, autotune; } s_case_t;

/* One worker process; exits 0 when every result was exact. Long on
 * purpose: one worker's script of all-reduce calls and checks, which every
 * worker process runs in the same order (the group's calls must match), so
 * it reads as one sequence. */
static int s_worker(const s_case_t *c, int w)
{
    alarm(60);
    zt_log_init("test_allreduce", w);
    const char *reds[4], *peers[8];
    t_ends(c->N, c->R, reds, peers);
    if (c->window) {
        setenv("ZT_AR_PIECE_BYTES", "4096", 1);
        setenv("ZT_AR_LOCAL_WINDOW_BYTES", "4096", 1);
    }
    if (c->mismatch == 2 && w == 1)
        setenv("ZT_AR_PIECE_BYTES", "8192", 1);
    if (c->autotune) {
        setenv("ZT_AUTOTUNE", "1", 1);
        setenv("ZT_AUTOTUNE_SAMPLES", "6", 1);
        setenv("ZT_AUTOTUNE_STEPS_PER_SAMPLE", "2", 1);
        setenv("ZT_AUTOTUNE_WARMUP_SAMPLES", "0", 1);
    }
    zt_allreduce_opts_t o = { w, c->N, c->R ? reds : NULL, c->R, peers, c->threshold, c->cycle_ms, 0, 0, 0 };
    zt_allreduce_t *ar = zt_allreduce_new(&o);
    assert(ar);
    for (int t = 0; t < NT; t++) {
        int64_t shape[2] = { s_shapes[t][0], s_shapes[t][1] };
        if (c->mismatch == 1 && w == 1 && t == 2)
            shape[0] = 1000;
        assert(zt_allreduce_register(ar, s_names[t], shape, 2, s_dtypes[t]) == t);
    }
    int rc = zt_allreduce_commit(ar, 20000);
    if (c->mismatch) {
        /* Every worker fails, naming the tensor, both shapes and both workers
         * (or the two piece sizes and the knob). */
        const char *e = zt_allreduce_error(ar);
        bool named = c->mismatch == 1 ? strstr(e, "tensor 'c' is [") && strstr(e, "[1000, 1] float32 on worker 1") &&
                                            strstr(e, "[1001, 1] float32 on worker ")
                                      : strstr(e, "pieces of ") && strstr(e, " 8192 ") && strstr(e, " 131072 ") &&
                                            strstr(e, "ZT_AR_PIECE_BYTES");
        if (rc != ZT_ESPEC || !named) {
            fprintf(stderr, "worker %d: rc %d, error '%s'\n", w, rc, zt_allreduce_error(ar));
            return 1;
        }
        zt_allreduce_destroy(&ar);
        return 0;
    }
    if (rc != ZT_OK) {
        fprintf(stderr, "worker %d: commit: %s\n", w, zt_allreduce_error(ar));
        return 1;
    }
    void *bufs[NT], *own[NT];
    for (int t = 0; t < NT; t++)
        bufs[t] = own[t] = malloc((size_t) s_numel(t) * 4 + 4);
    int rounds = c->autotune ? 40 : 3;
    for (int round = 0; round < rounds; round++) {
        if (c->kill_after && round == c->kill_after && w == 0) {
            /* worker 0 tells the parent to replace reducer 0, then carries on */
            FILE *f = fopen(strcat(strcpy((char[300]) { 0 }, s_dir), "/kill"), "w");
            fclose(f);
        }
        for (int t = NT - 1; t >= 0; t--) { /* backward order, like gradients */
            if (c->inplace) /* written where the all-reduce keeps it: no copies */
                assert((bufs[t] = zt_allreduce_buffer(ar, t)));
            s_fill(bufs[t], t, w, round);
            assert(zt_allreduce_submit(ar, t, bufs[t]) == ZT_OK);
            if (c->sleep_us)
                usleep((useconds_t) c->sleep_us);
        }
        bool avg = round % 3 == 2;
        if ((rc = zt_allreduce_wait(ar, avg, 30000)) != ZT_OK) {
            fprintf(stderr, "worker %d round %d: %s\n", w, round, zt_allreduce_error(ar));
            return 1;
        }
        for (int t = 0; t < NT; t++)
            for (int64_t i = 0; i < s_numel(t); i++) {
                double want = 0;
                for (int k = 0; k < c->N; k++)
                    want += s_value(k, t, i, round);
                if (avg)
                    want /= c->N;
                double got = s_get(bufs[t], t, i);
                double tol = avg ? (s_dtypes[t] == ZT_F32 ? 1e-5 * want : 0.02 * want) : 0;
                if (got < want - tol || got > want + tol) {
                    fprintf(stderr, "worker %d round %d tensor %s[%lld]: %g, want %g\n", w, round,
                            s_names[t], (long long) i, got, want);
                    return 1;
                }
            }
    }
    bool searching = true;
    int64_t th = 0;
    int layout = zt_allreduce_layout(ar, &th, NULL, &searching);
    if (c->autotune && (searching || layout != 6 || th < 4096 || th > (64 << 20))) {
        fprintf(stderr, "worker %d: autotune %s at layout %d, threshold %lld\n", w,
                searching ? "still searching" : "done", layout, (long long) th);
        return 1;
    }
    for (int t = 0; t < NT; t++)
        free(own[t]);
    zt_allreduce_destroy(&ar);
    return 0;
}

static void s_run(const s_case_t *c)
{
    for (int r = 0; r < c->R; r++)
        t_start_reducer(r, c->R);
    t_peers(c->N, "peer");
    char kill_path[300];
    snprintf(kill_path, sizeof kill_path, "%s/kill", s_dir);
    unlink(kill_path);
    pid_t pids[8];
    for (int w = 0; w < c->N; w++)
        if ((pids[w] = fork()) == 0)
            exit(s_worker(c, w)); /* exit, not _exit: ZeroMQ delivers what is queued */
    int failed = 0, left = c->N;
    bool killed = false;
    while (left > 0) {
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p > 0) {
            bool mine = false;
            for (int w = 0; w < c->N; w++)
                mine = mine || pids[w] == p;
            if (mine) {
                left--;
                failed += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
            }
            continue;
        }
        if (c->kill_after && !killed && access(kill_path, F_OK) == 0) {
            t_restart_reducer(0, c->R);
            killed = true;
        }
        usleep(2000);
    }
    t_stop_reducers(c->R);
    printf("N=%d R=%d threshold=%lld cycle=%d%s%s%s%s%s: %s\n", c->N, c->R, (long long) c->threshold,
           c->cycle_ms, c->mismatch ? " mismatch" : "", c->kill_after ? " reducer-killed" : "",
           c->window ? " 4 KiB window" : "", c->inplace ? " in place" : "", c->autotune ? " autotune" : "",
           failed ? "FAILED" : "ok");
    fflush(stdout);
    assert(!failed);
}

/* ------------------------------------------------------------ zt_coll */

/* The collective calls every worker makes in the same order: calls much
 * larger than a round, a broadcast of odd length carrying NaN bit
 * patterns, regions streamed with add/finish across slot and round
 * boundaries. 0, or 1 with what went wrong said. */
static int s_coll_script(zt_coll_t *c, int w, int N)
{
    /* 10007 floats: 3 rounds of 4 slots of 1024, the last slot partial */
    int64_t n = 10007;
    float *x = malloc(sizeof(float) * (size_t) n);
    for (int64_t i = 0; i < n; i++)
        x[i] = (float) ((i % 7) + 1) * (float) (w + 1);
    int64_t r0 = zt_coll_rounds(c);
    if (zt_coll_allreduce(c, x, n, false, 20000) != ZT_OK) {
        fprintf(stderr, "coll worker %d: allreduce: %s\n", w, zt_coll_error(c));
        return 1;
    }
    for (int64_t i = 0; i < n; i++)
        if (x[i] != (float) ((i % 7) + 1) * (float) (N * (N + 1) / 2)) {
            fprintf(stderr, "coll worker %d: x[%lld] = %g\n", w, (long long) i, x[i]);
            return 1;
        }
    if (zt_coll_rounds(c) - r0 < 3) {
        fprintf(stderr, "coll worker %d: %lld rounds for 10007 floats\n", w, (long long) (zt_coll_rounds(c) - r0));
        return 1;
    }
    /* a broadcast of 9999 bytes from the last worker: bit for bit, NaN patterns included */
    unsigned char b[9999];
    for (size_t i = 0; i < sizeof b; i++)
        b[i] = w == N - 1 ? (unsigned char) (i % 3 ? 0xff : i * 31) : 0;
    if (zt_coll_broadcast(c, b, sizeof b, N - 1, 20000) != ZT_OK) {
        fprintf(stderr, "coll worker %d: broadcast: %s\n", w, zt_coll_error(c));
        return 1;
    }
    for (size_t i = 0; i < sizeof b; i++)
        if (b[i] != (unsigned char) (i % 3 ? 0xff : i * 31)) {
            fprintf(stderr, "coll worker %d: b[%zu] = %d\n", w, i, b[i]);
            return 1;
        }
    /* a step streamed region by region, averaged, over slot and round edges */
    static const int64_t sizes[5] = { 3, 1500, 1024, 5000, 1 };
    float *regions[5];
    for (int k = 0; k < 5; k++) {
        regions[k] = malloc(sizeof(float) * (size_t) sizes[k]);
        for (int64_t i = 0; i < sizes[k]; i++)
            regions[k][i] = (float) (k + 1) * (float) (w + 1) * (float) N;
        if (zt_coll_add(c, regions[k], sizes[k], true, 20000) != ZT_OK) {
            fprintf(stderr, "coll worker %d: add %d: %s\n", w, k, zt_coll_error(c));
            return 1;
        }
    }
    if (zt_coll_finish(c, 20000) != ZT_OK || zt_coll_pending(c) != 0) {
        fprintf(stderr, "coll worker %d: finish: %s\n", w, zt_coll_error(c));
        return 1;
    }
    for (int k = 0; k < 5; k++) {
        for (int64_t i = 0; i < sizes[k]; i++)
            if (regions[k][i] != (float) (k + 1) * (float) (N * (N + 1) / 2)) {
                fprintf(stderr, "coll worker %d: region %d[%lld] = %g\n", w, k, (long long) i, regions[k][i]);
                return 1;
            }
        free(regions[k]);
    }
    free(x);
    return 0;
}

/* One worker of a collective group of slots of 4 KiB, 4 to a round: the
 * script (s_coll_script), then calls that differ between workers. With
 * autotune (6 samples of 2 rounds) the script runs until the search is
 * over, every result exact under every layout, some of which join slots. */
static int s_coll_worker(int w, int N, int R, const void *autotune_p)
{
    bool autotune = *(const bool *) autotune_p;
    alarm(60);
    zt_log_init("test_coll", w);
    setenv("ZT_FUSION_THRESHOLD", "4096", 1);
    setenv("ZT_COLL_ROUND_BYTES", "16384", 1);
    if (autotune) {
        setenv("ZT_AUTOTUNE", "1", 1);
        setenv("ZT_AUTOTUNE_SAMPLES", "6", 1);
        setenv("ZT_AUTOTUNE_STEPS_PER_SAMPLE", "2", 1);
        setenv("ZT_AUTOTUNE_WARMUP_SAMPLES", "0", 1);
    }
    const char *reds[4], *peers[8];
    t_ends(N, R, reds, peers);
    zt_allreduce_opts_t o = { w, N, R ? reds : NULL, R, peers, 0, 5, 0, 0, 0 };
    char why[512];
    zt_coll_t *c = zt_coll_new(&o, 20000, why, sizeof why);
    if (!c) {
        fprintf(stderr, "coll worker %d: %s\n", w, why);
        return 1;
    }
    if (zt_coll_slot_bytes(c) != 4096 || zt_coll_slots(c) != 4) {
        fprintf(stderr, "coll worker %d: slots of %lld bytes, %d a round\n", w, (long long) zt_coll_slot_bytes(c),
                zt_coll_slots(c));
        return 1;
    }
    int64_t th = 0;
    int cycle = 0, layout = 0, joined = 0;
    bool searching = autotune;
    for (int rep = 0; rep == 0 || (autotune && searching && rep < 40); rep++) {
        if (s_coll_script(c, w, N) != 0)
            return 1;
        layout = zt_coll_layout(c, &th, &cycle, &searching);
        joined += th > 4096;
    }
    if (autotune && (searching || layout != 6 || th < 4096 || th > (64 << 20) || !joined)) {
        fprintf(stderr, "coll worker %d: autotune %s at layout %d, threshold %lld (%d joining slots)\n", w,
                searching ? "still searching" : "done", layout, (long long) th, joined);
        return 1;
    }
    /* calls that differ: refused on every worker alike, nothing written, and the group goes on */
    if (N > 1) {
        float y[200];
        for (int i = 0; i < 200; i++)
            y[i] = 1;
        int rc = zt_coll_allreduce(c, y, 100 + w, false, 20000);
        const char *e = zt_coll_error(c);
        if (rc != ZT_EINVAL || !strstr(e, "the workers' calls differ: rank 0: allreduce of 100 floats; "
                                          "rank 1: allreduce of 101 floats") || y[0] != 1) {
            fprintf(stderr, "coll worker %d: a mismatch gave %d, '%s'\n", w, rc, e);
            return 1;
        }
        rc = zt_coll_broadcast(c, y, 8, w % 2, 20000);
        if (rc != ZT_EINVAL || !strstr(zt_coll_error(c), "broadcast")) {
            fprintf(stderr, "coll worker %d: roots that differ gave %d, '%s'\n", w, rc, zt_coll_error(c));
            return 1;
        }
        if (zt_coll_allreduce(c, y, 200, true, 20000) != ZT_OK || y[199] != 1) {
            fprintf(stderr, "coll worker %d: after a mismatch: %s\n", w, zt_coll_error(c));
            return 1;
        }
    }
    zt_coll_destroy(&c);
    return 0;
}

int t_run_workers(int N, int R, const char *tag, int (*worker)(int w, int N, int R, const void *arg), const void *arg)
{
    for (int r = 0; r < R; r++)
        t_start_reducer(r, R);
    t_peers(N, tag);
    pid_t pids[8];
    for (int w = 0; w < N; w++)
        if ((pids[w] = fork()) == 0)
            exit(worker(w, N, R, arg)); /* exit, not _exit: ZeroMQ delivers what is queued */
    int failed = 0;
    for (int w = 0; w < N; w++) {
        int st;
        waitpid(pids[w], &st, 0);
        failed += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    t_stop_reducers(R);
    return failed;
}

static void s_coll_run(int N, int R, bool autotune)
{
    int failed = t_run_workers(N, R, "cpeer", s_coll_worker, &autotune);
    printf("collective N=%d R=%d%s: %s\n", N, R, autotune ? " autotune" : "", failed ? "FAILED" : "ok");
    fflush(stdout);
    assert(!failed);
}

/* The scripted reducer of s_resend_is_the_sum: answers the worker's hello,
 * sends twice each piece as the sum (as if a second worker sent the same),
 * and on round 1's first piece asks for round 0's sum again, as a reducer
 * restarted mid-broadcast asks a worker that got it. 0 when the worker sent
 * back the sum (not the average it computed from it in place). */
static int s_scripted_reducer(const char *ep, int64_t n)
{
    alarm(60);
    zsock_t *router = zsock_new_router(ep);
    assert(router);
    void *zs = zsock_resolve(router);
    zmq_pollitem_t item = { zs, 0, ZMQ_POLLIN, 0 };
    zsock_set_linger(router, 5000); /* round 1's sums go out before it closes */
    float *sum = calloc((size_t) n, sizeof(float));
    int64_t seen = 0, sent1 = 0;
    bool asked = false;
    while (seen < n || sent1 < n) {
        if (zmq_poll(&item, 1, 20000) <= 0)
            return 2;
        zmq_msg_t parts[3];
        int np = zt_msg_recv_parts(zs, parts, 3);
        zt_msg_t m, r = { .pool = 2, .index = 0 };
        assert(np >= 2 && zt_msg_decode(zmq_msg_data(&parts[1]), zmq_msg_size(&parts[1]), &m, NULL) == ZT_OK);
        if (m.type == ZT_MSG_AR_HELLO) {
            r.type = ZT_MSG_AR_READY;
            r.u.AR_READY = (zt_msg_AR_READY_t) { .req = m.u.AR_HELLO.req, .buckets = 1 };
            zt_msg_send_routed(zs, &parts[0], &r, NULL, 0);
        }
        else if (m.type == ZT_MSG_AR_PIECE && m.u.AR_PIECE.gen == 1 && !asked) {
            r.type = ZT_MSG_AR_RESEND;
            r.u.AR_RESEND = (zt_msg_AR_RESEND_t) { .bucket = 0, .gen = 0 };
            zt_msg_send_routed(zs, &parts[0], &r, NULL, 0);
            asked = true; /* the piece itself is taken again from the worker's resend */
        }
        else if (m.type == ZT_MSG_AR_PIECE) {
            const zt_msg_AR_PIECE_t *p = &m.u.AR_PIECE;
            char why[300];
            const float *src = zt_shm_payload(p->shm, p->shm_off, p->count * 4, np > 2 ? zmq_msg_data(&parts[2]) : NULL,
                                              np > 2 ? zmq_msg_size(&parts[2]) : 0, why, sizeof why);
            assert(src && p->offset >= 0 && p->offset + p->count <= n);
            zmq_msg_t pm;
            zmq_msg_init_size(&pm, (size_t) p->count * 4);
            for (int64_t i = 0; i < p->count; i++) {
                ((float *) zmq_msg_data(&pm))[i] = 2 * src[i];
                if (p->gen == 0)
                    sum[p->offset + i] = 2 * src[i];
            }
            r.type = ZT_MSG_AR_RESULT;
            r.u.AR_RESULT = (zt_msg_AR_RESULT_t) { .bucket = 0, .gen = p->gen, .offset = p->offset, .count = p->count,
                                                   .dtype = ZT_F32 };
            zt_msg_send_routed(zs, &parts[0], &r, &pm, 1);
            sent1 += p->gen == 1 ? p->count : 0;
        }
        else if (m.type == ZT_MSG_AR_RESULT && m.u.AR_RESULT.gen == 0) {
            const zt_msg_AR_RESULT_t *p = &m.u.AR_RESULT;
            assert(np > 2 && zmq_msg_size(&parts[2]) == (size_t) p->count * 4 && p->offset + p->count <= n);
            const float *got = zmq_msg_data(&parts[2]);
            for (int64_t i = 0; i < p->count; i++)
                if (memcmp(&got[i], &sum[p->offset + i], 4)) {
                    fprintf(stderr, "round 0's sum sent again: [%lld] = %g, want %g\n",
                            (long long) (p->offset + i), got[i], sum[p->offset + i]);
                    return 1;
                }
            seen += p->count;
        }
        zt_msg_close_parts(parts, np);
    }
    zsock_destroy(&router);
    free(sum);
    return 0;
}

/* A worker that averaged a round in place (gradients written into
 * zt_allreduce_buffer) still holds that round's exact sum for a reducer that
 * asks for it again; sent the average instead, the worker that missed the
 * sum would go on with other weights than the rest. */
static void s_resend_is_the_sum(void)
{
    char ep[256];
    snprintf(ep, sizeof ep, "ipc://%s/scripted", s_dir);
    const int64_t n = 5000;
    pid_t red = fork();
    if (red == 0)
        exit(s_scripted_reducer(ep, n)); /* exit, not _exit: ZeroMQ delivers what is queued */
    pid_t wk = fork();
    if (wk == 0) {
        alarm(60);
        zt_log_init("test_allreduce", 0);
        const char *reds[1] = { ep }, *peers[2] = { "unused", "unused" };
        zt_allreduce_opts_t o = { 0, 2, reds, 1, peers, 1 << 26, 5, 0, 0, 0 };
        zt_allreduce_t *ar = zt_allreduce_new(&o);
        int64_t shape[1] = { n };
        assert(ar && zt_allreduce_register(ar, "g", shape, 1, ZT_F32) == 0);
        assert(zt_allreduce_commit(ar, 20000) == ZT_OK);
        for (int round = 0; round < 2; round++) {
            float *g = zt_allreduce_buffer(ar, 0);
            for (int64_t i = 0; i < n; i++)
                g[i] = (float) (i % 7 + 1 + round) / 3.0f;
            assert(zt_allreduce_submit(ar, 0, g) == ZT_OK);
            if (zt_allreduce_wait(ar, true, 30000) != ZT_OK) {
                fprintf(stderr, "round %d: %s\n", round, zt_allreduce_error(ar));
                exit(1);
            }
            for (int64_t i = 0; i < n; i++) /* twice g, halved: g */
                assert(g[i] == (float) (i % 7 + 1 + round) / 3.0f);
        }
        zt_allreduce_destroy(&ar);
        exit(0);
    }
    int st_red, st_wk;
    waitpid(red, &st_red, 0);
    waitpid(wk, &st_wk, 0);
    bool ok = WIFEXITED(st_red) && WEXITSTATUS(st_red) == 0 && WIFEXITED(st_wk) && WEXITSTATUS(st_wk) == 0;
    printf("a round averaged in place, its sum asked for again: %s\n", ok ? "ok" : "FAILED");
    fflush(stdout);
    assert(ok);
}

/* One message to the reducer and its answer's type and text. */
static int s_ask(zsock_t *sock, const zt_msg_t *m, const char *payload, size_t bytes, char *text, size_t size)
{
    zframe_t *h = zt_msg_encode(m);
    assert(zframe_send(&h, sock, payload ? ZFRAME_MORE : 0) == 0);
    if (payload) {
        zframe_t *p = zframe_new(payload, bytes);
        assert(zframe_send(&p, sock, 0) == 0);
    }
    zmsg_t *reply = zmsg_recv(sock);
    assert(reply);
    zframe_t *rh = zmsg_first(reply);
    zt_msg_t r;
    assert(zt_msg_decode(zframe_data(rh), zframe_size(rh), &r, NULL) == ZT_OK);
    snprintf(text, size, "%s", r.type == ZT_MSG_AR_ERROR ? r.u.AR_ERROR.text : "");
    zmsg_destroy(&reply);
    return r.type;
}

/* One worker of one, through reducer 0, with one tensor of 2^16 floats. */
static zt_allreduce_t *s_lone_worker(void)
{
    const char *reds[1] = { t_red_eps[0] }, *peers[1] = { "unused" };
    zt_allreduce_opts_t o = { 0, 1, reds, 1, peers, 1 << 26, 5, 0, 0, 0 };
    zt_allreduce_t *ar = zt_allreduce_new(&o);
    int64_t shape[1] = { 1 << 16 };
    assert(ar && zt_allreduce_register(ar, "g", shape, 1, ZT_F32) == 0);
    assert(zt_allreduce_commit(ar, 20000) == ZT_OK);
    return ar;
}

/* The reducer still sums what the lone worker sends (values i % mod); the
 * worker is destroyed. */
static void s_still_sums(zt_allreduce_t **ar, int mod)
{
    float *g = malloc(sizeof(float) << 16);
    for (int i = 0; i < 1 << 16; i++)
        g[i] = (float) (i % mod);
    assert(zt_allreduce_submit(*ar, 0, g) == ZT_OK);
    assert(zt_allreduce_wait(*ar, false, 30000) == ZT_OK);
    for (int i = 0; i < 1 << 16; i++)
        assert(g[i] == (float) (i % mod));
    free(g);
    zt_allreduce_destroy(ar);
}

/* A reducer handed pieces that name shared memory it must not or cannot
 * map answers with an error saying why, and goes on summing. */
static void s_forged_references(void)
{
    t_start_reducer(0, 1);
    zt_log_init("test_allreduce", 0);
    zt_allreduce_t *ar = s_lone_worker();
    zsock_t *forger = zsock_new_dealer(t_red_eps[0]);
    zsock_set_rcvtimeo(forger, 10000);
    const char *names[3] = { "../../etc/passwd", "ztrain-ar-999999999-0", "ztrain-ar-1-" };
    const char *why[3] = { "not a ztrain", "no such region", "not a ztrain" };
    for (int i = 0; i < 3; i++) {
        zt_msg_t m = { .type = ZT_MSG_AR_PIECE, .pool = 1, .index = 0 };
        m.u.AR_PIECE = (zt_msg_AR_PIECE_t) { .bucket = 0, .gen = 0, .offset = 0, .count = 16, .dtype = ZT_F32 };
        zt_msg_set_str(m.u.AR_PIECE.shm, names[i]);
        char text[ZT_MSG_STR_MAX];
        int type = s_ask(forger, &m, NULL, 0, text, sizeof text);
        if (type != ZT_MSG_AR_ERROR || !strstr(text, why[i])) {
            fprintf(stderr, "forged '%s': got %s '%s'\n", names[i], zt_msg_type_name(type), text);
            abort();
        }
    }
    zsock_destroy(&forger);
    /* the reducer still sums (the forger took worker 0's identity: a resend
     * after RESEND_MS finds the reducer again) */
    s_still_sums(&ar, 7);
    t_stop_reducers(1);
    printf("forged shared-memory references: refused, reducer still sums: ok\n");
}

/* Ranges and sizes from the network that overflow: a layout of 2^40
 * elements, a piece whose offset + count overflows. Each is refused with a
 * reason; the reducer neither crashes nor stops summing. */
static void s_hostile_ranges(void)
{
    t_start_reducer(0, 1);
    zsock_t *evil = zsock_new_dealer(t_red_eps[0]);
    zsock_set_rcvtimeo(evil, 10000);
    char text[ZT_MSG_STR_MAX];
    const char *huge[2] = { "{\"tensors\": [{\"name\": \"g\", \"shape\": [1099511627776], \"dtype\": 0}], "
                            "\"threshold\": 1048576, \"piece_bytes\": 131072}",
                            "{\"tensors\": [{\"name\": \"g\", \"shape\": [4294967296, 4294967297], \"dtype\": 0}], "
                            "\"threshold\": 1048576, \"piece_bytes\": 131072}" };
    for (int i = 0; i < 2; i++) {
        zt_msg_t m = { .type = ZT_MSG_AR_HELLO, .pool = 1, .index = 0 };
        m.u.AR_HELLO = (zt_msg_AR_HELLO_t) { .req = 1, .workers = 1 };
        assert(s_ask(evil, &m, huge[i], strlen(huge[i]), text, sizeof text) == ZT_MSG_AR_ERROR);
        assert(strstr(text, "layout refused"));
    }
    zsock_destroy(&evil);
    /* the real worker configures it; then pieces with wild ranges */
    zt_allreduce_t *ar = s_lone_worker();
    evil = zsock_new_dealer(t_red_eps[0]);
    zsock_set_rcvtimeo(evil, 10000);
    const int64_t wild[3][2] = { { INT64_MAX - 2, 4 }, { 1, INT64_MAX }, { (int64_t) 1 << 62, ((int64_t) 1 << 62) + 1 } };
    float four = 1.0f;
    for (int i = 0; i < 3; i++) {
        zt_msg_t m = { .type = ZT_MSG_AR_PIECE, .pool = 1, .index = 0 };
        m.u.AR_PIECE = (zt_msg_AR_PIECE_t) { .bucket = 0, .gen = 0, .offset = wild[i][0], .count = wild[i][1],
                                             .dtype = ZT_F32 };
        assert(s_ask(evil, &m, (const char *) &four, sizeof four, text, sizeof text) == ZT_MSG_AR_ERROR);
        assert(strstr(text, "outside this reducer's chunk"));
    }
    zsock_destroy(&evil);
    s_still_sums(&ar, 5);
    t_stop_reducers(1);
    printf("hostile layouts and piece ranges: refused with the reason, reducer still sums: ok\n");
}

/* One worker of two with one tensor of n floats, its group formed. */
zt_allreduce_t *t_pair_worker(int rank, int64_t n)
{
    const char *reds[1] = { t_red_eps[0] }, *peers[2] = { "unused", "unused" };
    zt_allreduce_opts_t o = { rank, 2, reds, 1, peers, 1 << 26, 5, 0, 0, 0 };
    zt_allreduce_t *ar = zt_allreduce_new(&o);
    int64_t shape[1] = { n };
    assert(ar && zt_allreduce_register(ar, "g", shape, 1, ZT_F32) == 0);
    if (zt_allreduce_commit(ar, 20000) != ZT_OK) {
        fprintf(stderr, "worker %d: %s\n", rank, zt_allreduce_error(ar));
        abort();
    }
    return ar;
}

void t_pair_round_in(zt_allreduce_t *ar, int rank, int64_t n, float *g)
{
    for (int64_t i = 0; i < n; i++)
        g[i] = (float) (rank + 1);
    assert(zt_allreduce_submit(ar, 0, g) == ZT_OK);
    if (zt_allreduce_wait(ar, false, 30000) != ZT_OK) {
        fprintf(stderr, "worker %d: %s\n", rank, zt_allreduce_error(ar));
        abort();
    }
    for (int64_t i = 0; i < n; i++)
        assert(g[i] == 3.0f);
}

static void s_pair_round(zt_allreduce_t *ar, int rank, int64_t n)
{
    float *g = malloc((size_t) n * sizeof(float));
    t_pair_round_in(ar, rank, n, g);
    free(g);
}

/* A reducer restarted between two workers' hellos: worker 1 forms the group
 * again (it lost the READY, or restarted too) and its hello reaches the new
 * reducer first; worker 0, which formed the group with the old one, sends
 * its pieces unaware. The new reducer must ask worker 0 for its hello
 * instead of summing its pieces: else the group's READY waits for a hello
 * that never comes, and the round for pieces that never come. */
static void s_restart_between_hellos(void)
{
    const int64_t n = 1 << 12;
    t_start_reducer(0, 1);
    int up[2], down[2];
    assert(pipe(up) == 0 && pipe(down) == 0);
    char c;
    pid_t w0 = fork();
    if (w0 == 0) {
        alarm(60);
        zt_log_init("test_allreduce", 0);
        zt_allreduce_t *ar = t_pair_worker(0, n);
        assert(write(up[1], "c", 1) == 1);
        assert(read(down[0], &c, 1) == 1); /* the reducer is new, worker 1 forming the group again */
        usleep(1000 * 1000);
        s_pair_round(ar, 0, n);
        zt_allreduce_destroy(&ar);
        exit(0);
    }
    zt_allreduce_t *ar = t_pair_worker(1, n);
    assert(read(up[0], &c, 1) == 1);
    t_restart_reducer(0, 1);
    zt_allreduce_destroy(&ar);
    assert(write(down[1], "g", 1) == 1);
    ar = t_pair_worker(1, n);
    s_pair_round(ar, 1, n);
    zt_allreduce_destroy(&ar);
    int st;
    waitpid(w0, &st, 0);
    bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    printf("a reducer restarted between the workers' hellos asks the summing one for its hello: %s\n",
           ok ? "ok" : "FAILED");
    fflush(stdout);
    assert(ok);
    for (int i = 0; i < 2; i++) {
        close(up[i]);
        close(down[i]);
    }
    t_stop_reducers(1);
}

/* A reducer killed in mid-broadcast: worker 1 has the round's sum, worker 0
 * has not (set_generation takes it back a round) and waits for the new
 * reducer's, which needs worker 1's copy. Worker 1 meanwhile is busy outside
 * the library, in something that waits for worker 0 (here a pipe; in a
 * PyTorch job the bucket order DDP broadcasts over gloo in the next forward
 * pass): only its thread between rounds can tell the new reducer it is there
 * and hand over the sum. Then both go on with the next round, and worker 0
 * exits without destroying its all-reduce, its thread serving: cleanly.
 * n elements: a small tensor is packed in the bucket; a large one is sent
 * from the caller's buffer (freed since the round), in two pieces, and the
 * sum handed over is the bucket's copy of what came for it. */
static void s_ahead_worker_busy(int64_t n)
{
    t_start_reducer(0, 1);
    int up[2], down[2];
    assert(pipe(up) == 0 && pipe(down) == 0);
    char c;
    pid_t w0 = fork();
    if (w0 == 0) {
        alarm(60);
        zt_log_init("test_allreduce", 0);
        zt_allreduce_t *ar = t_pair_worker(0, n);
        s_pair_round(ar, 0, n);
        assert(zt_allreduce_set_generation(ar, 0) == ZT_OK); /* as if the sum never came */
        assert(write(up[1], "r", 1) == 1);
        assert(read(down[0], &c, 1) == 1); /* the reducer is new */
        s_pair_round(ar, 0, n); /* the sum can only come from worker 1's copy */
        assert(write(up[1], "d", 1) == 1);
        s_pair_round(ar, 0, n);
        usleep(500 * 1000); /* the thread holds the sockets now */
        exit(0); /* never destroyed: the thread is stopped at exit, before the sockets close */
    }
    close(up[1]); /* worker 0's end: a read sees its exit */
    close(down[0]);
    zt_allreduce_t *ar = t_pair_worker(1, n);
    s_pair_round(ar, 1, n);
    assert(read(up[0], &c, 1) == 1);
    t_restart_reducer(0, 1);
    assert(write(down[1], "g", 1) == 1);
    bool ok = read(up[0], &c, 1) == 1; /* busy until worker 0 has its sum */
    if (ok)
        s_pair_round(ar, 1, n);
    zt_allreduce_destroy(&ar);
    int st;
    waitpid(w0, &st, 0);
    ok = ok && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    printf("a worker busy between rounds hands a restarted reducer the sum another worker missed (%lld floats): %s\n",
           (long long) n, ok ? "ok" : "FAILED");
    fflush(stdout);
    assert(ok);
    close(up[0]);
    close(down[1]);
    t_stop_reducers(1);
}

int main(int argc, char **argv)
{
    s_bin = argc > 1 ? argv[1] : "ztrain-reducer";
    setenv("ZT_MALLOC_KEEP_BYTES", "268435456", 0); /* kept heaps (t_steady_memory); a value given wins */
    snprintf(s_dir, sizeof s_dir, "/tmp/zt-test-ar-%d", (int) getpid());
    mkdir(s_dir, 0755);
    s_sealed = test_sealed_setup(s_dir); /* keys as a job's: every process finds them */
    s_tcp = getenv("ZT_TEST_TCP") && !strcmp(getenv("ZT_TEST_TCP"), "1");
    const s_case_t cases[] = {
        { 1, 1, 1 << 26, 5, 0, 0, 0, false, false, false },    { 2, 1, 1 << 26, 5, 0, 0, 0, false, false, false },
        { 2, 2, 1 << 26, 5, 0, 0, 0, false, false, false },    { 3, 2, 1 << 26, 5, 0, 0, 0, false, false, false },
        { 4, 3, 1 << 26, 5, 0, 0, 0, false, false, false },    { 4, 4, 1, 5, 0, 0, 0, false, false, false },        /* unfused */
        { 3, 2, 4096, 5, 0, 0, 0, false, false, false },       /* several fused buckets */
        { 2, 2, 1 << 26, 1, 3000, 0, 0, false, false, false }, /* cycle time flushes partial buckets */
        { 2, 0, 1 << 26, 5, 0, 0, 0, false, false, false },    { 3, 0, 1 << 26, 5, 0, 0, 0, false, false, false },  /* the ring */
        { 4, 0, 4096, 5, 0, 0, 0, false, false, false },       { 1, 0, 1 << 26, 5, 0, 0, 0, false, false, false },
        { 2, 1, 1 << 26, 5, 0, 1, 0, false, false, false },    { 3, 0, 1 << 26, 5, 0, 1, 0, false, false, false },  /* mismatches */
        { 2, 1, 1 << 26, 5, 0, 0, 1, false, false, false },    /* reducer killed and replaced */
        { 3, 2, 4096, 5, 0, 0, 0, true, false, false }, /* the send window binding at every piece */
        { 2, 1, 4096, 5, 0, 0, 1, true, false, false }, /* ... and a reducer killed under it */
        { 2, 1, 1 << 26, 5, 0, 2, 0, false, false, false },    /* piece sizes differ */
        { 3, 2, 4096, 5, 0, 0, 0, false, true, false },  /* gradients written into zt_allreduce_buffer */
        { 3, 2, 1 << 26, 5, 0, 0, 0, false, true, false }, { 3, 0, 4096, 5, 0, 0, 0, false, true, false },
        { 3, 2, 0, -1, 0, 0, 0, false, false, true }, /* autotune through reducers, ... */
        { 3, 2, 0, -1, 0, 0, 0, false, true, true }, { 3, 0, 0, -1, 0, 0, 0, false, false, true }, /* the ring */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        s_run(&cases[i]);
    s_coll_run(3, 2, false);
    s_coll_run(2, 0, false);
    s_coll_run(1, 1, false);
    s_coll_run(3, 2, true);
    s_coll_run(2, 0, true);
    if (!s_sealed) { /* a scripted reducer, shared memory, plain messages */
        s_resend_is_the_sum();
        s_forged_references();
        s_hostile_ranges();
    }
    t_large(4, 0, 1 << 22);
    t_large(4, 2, 1 << 22);
    t_orders(3, 2, 20000);
    s_restart_between_hellos();
    s_ahead_worker_busy(1 << 12);
    s_ahead_worker_busy(1 << 19);
    t_steady_memory();
    t_membership_changes();

    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", s_dir);
    return system(cmd) == 0 ? 0 : 1;
}
