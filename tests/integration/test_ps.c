/* Parameter servers against real ztrain-paramserver processes on ipc://
 * (so pushes and pulls go through shared memory), or over loopback TCP
 * with ZT_DATA_IPC=off (frames on the sockets; with ZT_TEST_SEALED=1 too,
 * sealed under a job's keys, pulls opened straight into the caller's
 * tensors): exact SGD, momentum and Adam
 * results, sharding over 1..4 servers covers every element once, sync mode
 * averages, the staleness bound holds, snapshots match, a dead server is
 * named, a mismatched model is refused, forged shared-memory references are
 * refused with the reason. */
#include "ztrain/ztrain.h"
#include "ztrain/zt_ps.h"
#include "wire/zt_msg.h"
#include "test_sealed.h"
#include "wire/zt_shm.h"
#include "base/zt_util.h"
#include <assert.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char s_dir[256];
static const char *s_child_cipher; /* a server's ZT_SEAL_CIPHER of its own, its log in s_child_log */
static char s_child_log[300];
static pid_t s_pids[8];
static char s_eps[8][300];
static const char *s_ep_ptrs[8];

/* Starts server i of n at s_eps[i] (again, after a kill: the same endpoint). */
static void s_spawn(int i, int n, const char *bin)
{
    char idx[16], cnt[16];
    snprintf(idx, sizeof idx, "%d", i);
    snprintf(cnt, sizeof cnt, "%d", n);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed assertion leaves no server behind */
        unsetenv("ZT_COORDINATOR");
        unsetenv("AIP_CHECKPOINT_DIR");
        if (s_child_cipher && (setenv("ZT_SEAL_CIPHER", s_child_cipher, 1) || !freopen(s_child_log, "w", stderr)))
            _exit(126);
        execl(bin, bin, "--bind", s_eps[i], "--index", idx, "--servers", cnt, (char *) NULL);
        _exit(127);
    }
    s_pids[i] = pid;
}

static void s_start(int n, const char *bin)
{
    for (int i = 0; i < n; i++) {
        const char *ipc = getenv("ZT_DATA_IPC");
        if (ipc && !strcmp(ipc, "off"))
            snprintf(s_eps[i], sizeof s_eps[i], "tcp://127.0.0.1:%d", zt_ephemeral_port());
        else
            snprintf(s_eps[i], sizeof s_eps[i], "ipc://%s/ps%d", s_dir, i);
        s_ep_ptrs[i] = s_eps[i];
        s_spawn(i, n, bin);
    }
}

static void s_stop(int n)
{
    for (int i = 0; i < n; i++)
        if (s_pids[i] > 0) {
            zt_stop_child(s_pids[i], 5000); /* cleanly: it unlinks its regions and twin */
            s_pids[i] = 0;
        }
}

static zt_ps_client_t *s_client(int n, int rank, const char *opt, float lr, int sync, int workers,
                                int staleness, int *ids)
{
    zt_ps_client_t *c = zt_ps_client_new(s_ep_ptrs, n, rank);
    assert(c);
    ids[0] = zt_ps_declare(c, "a", 37, 0);
    ids[1] = zt_ps_declare(c, "b", 1000, 0);
    ids[2] = zt_ps_declare(c, "c", 5, 0.5f);
    zt_ps_options_t o;
    zt_ps_options_defaults(&o);
    o.optimizer = opt;
    o.learning_rate = lr;
    o.sync = sync;
    o.workers = workers;
    o.max_staleness = staleness;
    int rc = zt_ps_connect(c, &o, 10000);
    if (rc != ZT_OK)
        fprintf(stderr, "connect: %s\n", zt_ps_error(c));
    assert(rc == ZT_OK);
    return c;
}

static void s_push_all(zt_ps_client_t *c, const int *ids, float *const *g, int64_t step)
{
    for (int t = 0; t < 3; t++)
        assert(zt_ps_push(c, ids[t], g[t], step) == ZT_OK);
    assert(zt_ps_wait(c, 10000) == ZT_OK);
}

static void s_pull_all(zt_ps_client_t *c, const int *ids, float **w)
{
    for (int t = 0; t < 3; t++)
        assert(zt_ps_pull(c, ids[t], w[t]) == ZT_OK);
    assert(zt_ps_wait(c, 10000) == ZT_OK);
}

/* The model every case uses: tensors a, b, c of these sizes; a gradient g
 * distinct per element, and room for the weights pulled. */
static const int64_t sizes[3] = { 37, 1000, 5 };
static float *g[3], *w[3], *w0[3];
static int ids[3];
static const char *bin;

/* SGD over n servers: w = w0 - lr * g for every element exactly once; a
 * range push touches only its range; a snapshot equals what a pull sees. */
static zt_ps_client_t *s_case_sgd(int n)
{
    s_start(n, bin);
    zt_ps_client_t *c = s_client(n, 0, "sgd", 0.5f, 0, 1, -1, ids);
    s_pull_all(c, ids, w0);
    for (int64_t i = 0; i < 37; i++)
        assert(w0[0][i] == 0.0f);
    for (int64_t i = 0; i < 5; i++)
        assert(w0[2][i] != 0.0f && fabsf(w0[2][i]) <= 0.5f);
    s_push_all(c, ids, g, 0);
    s_pull_all(c, ids, w);
    for (int t = 0; t < 3; t++)
        for (int64_t i = 0; i < sizes[t]; i++)
            assert(w[t][i] == w0[t][i] - 0.5f * g[t][i]);
    /* A range push touches only its range. */
    assert(zt_ps_push_range(c, ids[1], 500, 10, g[1], 1) == ZT_OK);
    assert(zt_ps_wait(c, 10000) == ZT_OK);
    float part[12];
    assert(zt_ps_pull_range(c, ids[1], 499, 12, part) == ZT_OK && zt_ps_wait(c, 10000) == ZT_OK);
    assert(part[0] == w[1][499] && part[11] == w[1][510]);
    for (int i = 1; i <= 10; i++)
        assert(part[i] == w[1][499 + i] - 0.5f * g[1][i - 1]);
    /* Snapshot: values equal what a pull sees; SGD has no state arrays. */
    zt_ps_shard_t shards[4];
    assert(zt_ps_snapshot(c, shards, 10000) == ZT_OK);
    int64_t covered = 0;
    for (int s = 0; s < n; s++) {
        assert(shards[s].arrays == 1 && shards[s].offset == covered);
        covered += shards[s].count;
    }
    assert(covered == 37 + 1000 + 5);
    assert(shards[0].data[0][0] == w[0][0]);
    zt_ps_shards_free(shards, n);
    return c;
}

/* A checkpoint of the servers in ztrain's format: a file per server, the
 * model description recorded, found again as the newest. */
static void s_case_checkpoint(zt_ps_client_t *c, int n)
{
    char root[300], path[400], found[400];
    snprintf(root, sizeof root, "%s/ckpt-%d", s_dir, n);
    assert(zt_ps_checkpoint_latest(root, found, sizeof found) == 0 && !found[0]);
    assert(zt_ps_checkpoint(c, root, 7, "[1]", 0, path, sizeof path, 10000) == ZT_EINVAL);
    assert(strstr(zt_ps_error(c), "not a JSON object") && !path[0]);
    assert(zt_ps_checkpoint(c, root, 7, "{\"kind\": \"mlp\", \"sizes\": [3, 4]}", 0, path, sizeof path,
                            10000) == ZT_OK);
    assert(strstr(path, "/ckpt-000000000007"));
    assert(zt_ps_checkpoint_latest(root, found, sizeof found) == 7 && !strcmp(found, path));
    char mpath[450];
    snprintf(mpath, sizeof mpath, "%s/manifest.json", path);
    json_t *man = json_load_file(mpath, 0, NULL);
    assert(man && json_array_size(json_object_get(man, "files")) == (size_t) n);
    assert(!strcmp(json_string_value(json_object_get(json_object_get(man, "model"), "kind")), "mlp"));
    json_t *t1 = json_array_get(json_object_get(man, "tensors"), 1);
    assert(json_integer_value(json_object_get(t1, "offset")) == 37);
    assert(json_integer_value(json_object_get(t1, "numel")) == 1000);
    json_decref(man);
    zt_ps_client_t *idle = zt_ps_client_new(s_ep_ptrs, n, 1);
    zt_ps_declare(idle, "a", 37, 0);
    assert(zt_ps_checkpoint(idle, root, 8, NULL, 0, NULL, 0, 1000) == ZT_EINVAL);
    assert(strstr(zt_ps_error(idle), "not connected"));
    zt_ps_client_destroy(&idle);
}

/* Another worker with a different model, or the same model with a
 * different learning rate, is refused: the error names the field and both
 * values. */
static void s_case_mismatch(int n)
{
    zt_ps_client_t *bad = zt_ps_client_new(s_ep_ptrs, n, 1);
    zt_ps_declare(bad, "a", 37, 0);
    zt_ps_options_t o;
    zt_ps_options_defaults(&o);
    assert(zt_ps_connect(bad, &o, 5000) == ZT_EIO);
    assert(strstr(zt_ps_error(bad), "differs"));
    zt_ps_client_destroy(&bad);
    bad = zt_ps_client_new(s_ep_ptrs, n, 1);
    zt_ps_declare(bad, "a", 37, 0);
    zt_ps_declare(bad, "b", 1000, 0);
    zt_ps_declare(bad, "c", 5, 0.5f);
    o.optimizer = "sgd";
    o.learning_rate = 0.25f;
    assert(zt_ps_connect(bad, &o, 5000) == ZT_EIO);
    printf("  mismatch: %s\n", zt_ps_error(bad));
    assert(strstr(zt_ps_error(bad), "lr: 0.25 vs 0.5"));
    zt_ps_client_destroy(&bad);
}

/* Momentum and Adam over 2 servers, two steps, against a reference. */
static void s_case_optimizers(void)
{
    const char *opts[2] = { "momentum", "adam" };
    for (int k = 0; k < 2; k++) {
        s_start(2, bin);
        zt_ps_client_t *c = s_client(2, 0, opts[k], 0.1f, 0, 1, -1, ids);
        s_pull_all(c, ids, w0);
        s_push_all(c, ids, g, 0);
        s_push_all(c, ids, g, 1);
        s_pull_all(c, ids, w);
        for (int t = 0; t < 3; t++)
            for (int64_t i = 0; i < sizes[t]; i++) {
                double gi = g[t][i], ref;
                if (k == 0) /* v1 = g, v2 = 0.9 g + g */
                    ref = w0[t][i] - 0.1 * gi - 0.1 * (1.9 * gi);
                else { /* Adam with a constant gradient moves lr * 1 each step */
                    double m1 = 0.1 * gi, v1 = 0.001 * gi * gi;
                    double s1 = (m1 / 0.1) / (sqrt(v1 / 0.001) + 1e-7);
                    double m2 = 0.9 * m1 + 0.1 * gi, v2 = 0.999 * v1 + 0.001 * gi * gi;
                    double s2 = (m2 / (1 - 0.81)) / (sqrt(v2 / (1 - 0.999 * 0.999)) + 1e-7);
                    ref = w0[t][i] - 0.1 * s1 - 0.1 * s2;
                }
                assert(fabs(w[t][i] - ref) < 1e-5 * (1 + fabs(ref)));
            }
        zt_ps_shard_t shards[2];
        assert(zt_ps_snapshot(c, shards, 10000) == ZT_OK);
        assert(shards[0].arrays == (k == 0 ? 2 : 4));
        if (k == 1)
            assert(shards[0].data[3][0] == 2.0f); /* Adam's per-element step count */
        zt_ps_shards_free(shards, 2);
        zt_ps_client_destroy(&c);
        s_stop(2);
        printf("%s: ok\n", opts[k]);
    }
}

/* Sync mode: the pushes of both workers for a step are averaged once; a
 * pull for the next step waits for the slower worker. */
static void s_case_sync(void)
{
    s_start(2, bin);
    zt_ps_client_t *c0 = s_client(2, 0, "sgd", 1.0f, 1, 2, -1, ids);
    zt_ps_client_t *c1 = s_client(2, 1, "sgd", 1.0f, 1, 2, -1, ids);
    s_pull_all(c0, ids, w0);
    float *g1[3];
    for (int t = 0; t < 3; t++) {
        g1[t] = malloc(sizes[t] * sizeof(float));
        for (int64_t i = 0; i < sizes[t]; i++)
            g1[t][i] = 3.0f * g[t][i];
    }
    s_push_all(c0, ids, g, 0);
    zt_ps_set_step(c0, 1);
    assert(zt_ps_pull(c0, ids[1], w[1]) == ZT_OK);
    assert(zt_ps_wait(c0, 400) == ZT_ETIMEDOUT); /* worker 1 has not pushed step 0 */
    s_push_all(c1, ids, g1, 0);
    s_pull_all(c0, ids, w);
    for (int t = 0; t < 3; t++)
        for (int64_t i = 0; i < sizes[t]; i++)
            assert(fabsf(w[t][i] - (w0[t][i] - 2.0f * g[t][i])) < 1e-6f * (1 + fabsf(w[t][i])));
    zt_ps_client_destroy(&c0);
    zt_ps_client_destroy(&c1);
    s_stop(2);
    printf("sync mode: ok\n");
    for (int t = 0; t < 3; t++)
        free(g1[t]);
}

/* Staleness bound 1 with two workers: worker 0 may not run 2 steps ahead. */
static void s_case_staleness(void)
{
    zt_ps_client_t *c0, *c1;
    s_start(1, bin);
    c0 = s_client(1, 0, "sgd", 0.1f, 0, 2, 1, ids);
    c1 = s_client(1, 1, "sgd", 0.1f, 0, 2, 1, ids);
    s_push_all(c0, ids, g, 0);
    zt_ps_set_step(c0, 1);
    s_pull_all(c0, ids, w); /* 1 step ahead: allowed */
    s_push_all(c0, ids, g, 1);
    zt_ps_set_step(c0, 2);
    assert(zt_ps_pull(c0, ids[0], w[0]) == ZT_OK);
    assert(zt_ps_wait(c0, 400) == ZT_ETIMEDOUT); /* 2 ahead of worker 1: waits */
    s_push_all(c1, ids, g, 0);
    s_pull_all(c0, ids, w); /* now 1 ahead */
    zt_ps_client_destroy(&c0);
    zt_ps_client_destroy(&c1);
    s_stop(1);
    printf("staleness bound: ok\n");
}

/* A dead server is named. */
static void s_case_dead_server(void)
{
    zt_ps_client_t *c0;
    s_start(2, bin);
    c0 = s_client(2, 0, "sgd", 0.1f, 0, 1, -1, ids);
    kill(s_pids[1], SIGKILL);
    waitpid(s_pids[1], NULL, 0);
    s_pids[1] = 0;
    assert(zt_ps_push(c0, ids[1], g[1], 0) == ZT_OK); /* spans both servers */
    assert(zt_ps_wait(c0, 1000) == ZT_ETIMEDOUT);
    char want[400];
    snprintf(want, sizeof want, "parameter server 1 (%s) did not answer within 1000 ms", s_eps[1]);
    assert(strstr(zt_ps_error(c0), want));
    zt_ps_client_destroy(&c0);
    s_stop(2);
    printf("dead server named: ok\n");
}

/* Sealed: a server that seals with the other cipher (ZT_SEAL_CIPHER)
 * refuses the worker's streams, so nothing reaches it, and its log says
 * why, naming both ciphers. */
static void s_case_other_cipher(void)
{
    const char *mine = getenv("ZT_SEAL_CIPHER");
    const char *other = mine && !strcmp(mine, "aes128gcm") ? "aegis128x2" : "aes128gcm";
    s_child_cipher = other;
    snprintf(s_child_log, sizeof s_child_log, "%s/other-cipher.log", s_dir);
    s_start(1, bin);
    s_child_cipher = NULL;
    zt_ps_client_t *c = zt_ps_client_new(s_ep_ptrs, 1, 0);
    assert(c);
    zt_ps_declare(c, "a", 37, 0);
    zt_ps_options_t o;
    zt_ps_options_defaults(&o);
    assert(zt_ps_connect(c, &o, 2500) != ZT_OK);
    printf("a worker sealing with %s, its server with %s: %s\n", mine ? mine : "aegis128x2", other, zt_ps_error(c));
    assert(strstr(zt_ps_error(c), "its sealed stream is not open") && strstr(zt_ps_error(c), "ZT_SEAL_CIPHER"));
    zt_ps_client_destroy(&c);
    s_stop(1);
    char text[4096] = "";
    FILE *f = fopen(s_child_log, "r");
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[n] = 0;
    if (f)
        fclose(f);
    if (!strstr(text, "ZT_SEAL_CIPHER must be the same for every replica of a job")) {
        fprintf(stderr, "the server's log does not say why it refused:\n%s\n", text);
        abort();
    }
    printf("a server that seals with another cipher refuses, and says so: ok\n");
}

/* Async: a server killed with SIGKILL and started again goes on from its
 * shard snapshot (ZT_PS_SNAPSHOT_MS in the job directory), not afresh. */
static void s_case_snapshot_restart(void)
{
    zt_ps_client_t *c0;
    setenv("ZT_JOB_DIR", s_dir, 1);
    setenv("ZT_PS_SNAPSHOT_MS", "50", 1);
    s_start(2, bin);
    c0 = s_client(2, 0, "adam", 0.01f, 0, 1, -1, ids);
    s_push_all(c0, ids, g, 0);
    s_push_all(c0, ids, g, 1);
    s_pull_all(c0, ids, w0);
    usleep(400 * 1000); /* both servers have written their snapshots */
    kill(s_pids[1], SIGKILL);
    waitpid(s_pids[1], NULL, 0);
    s_spawn(1, 2, bin);
    s_pull_all(c0, ids, w); /* resent until the new server answers */
    for (int t = 0; t < 3; t++)
        for (int64_t i = 0; i < sizes[t]; i++)
            assert(w[t][i] == w0[t][i]); /* bitwise: the values (and Adam's state) it had */
    s_push_all(c0, ids, g, 2); /* and it goes on */
    zt_ps_client_destroy(&c0);
    s_stop(2);
    unsetenv("ZT_JOB_DIR");
    unsetenv("ZT_PS_SNAPSHOT_MS");
    printf("restarted server goes on from its shard snapshot: ok\n");
}

/* A push naming shared memory that is not a ztrain region, or one that
 * does not exist, is refused with the reason; ranges whose end overflows
 * are refused as outside the shard; the server carries on. The server is
 * left running for the next case. */
static void s_case_forged(void)
{
    zt_ps_client_t *c0;
    s_start(1, bin);
    c0 = s_client(1, 0, "sgd", 0.5f, 0, 1, -1, ids);
    zsock_t *forger = zsock_new_dealer(s_eps[0]);
    zsock_set_rcvtimeo(forger, 10000);
    const char *names[2] = { "../../etc/passwd", "ztrain-ps-999999999-0" };
    const char *why[2] = { "not a ztrain", "no such region" };
    for (int i = 0; i < 2; i++) {
        zt_msg_t m = { .type = ZT_MSG_PS_PUSH, .pool = 1, .index = 5 };
        m.u.PS_PUSH = (zt_msg_PS_PUSH_t) { .req = 7, .offset = 0, .count = 4 };
        zt_msg_set_str(m.u.PS_PUSH.shm, names[i]);
        zframe_t *h = zt_msg_encode(&m);
        assert(zframe_send(&h, forger, 0) == 0);
        zframe_t *rh = zframe_recv(forger);
        zt_msg_t r;
        assert(rh && zt_msg_decode(zframe_data(rh), zframe_size(rh), &r, NULL) == ZT_OK);
        if (r.type != ZT_MSG_PS_ERROR || r.u.PS_ERROR.req != 7 || !strstr(r.u.PS_ERROR.text, why[i])) {
            fprintf(stderr, "forged '%s': got %s '%s'\n", names[i], zt_msg_type_name(r.type),
                    r.type == ZT_MSG_PS_ERROR ? r.u.PS_ERROR.text : "");
            abort();
        }
        zframe_destroy(&rh);
    }
    /* Ranges whose end overflows: a pull of 2^63-1 elements from offset 1,
     * pushes at 2^62 (and near the top) with a 4-byte frame. Each is refused
     * as outside the shard; the server neither crashes nor reads or
     * allocates past it. */
    const int64_t wild[3][2] = { { 1, INT64_MAX }, { (int64_t) 1 << 62, ((int64_t) 1 << 62) + 1 },
                                 { INT64_MAX - 2, 4 } };
    for (int i = 0; i < 6; i++) {
        zt_msg_t m = { .type = i < 3 ? ZT_MSG_PS_PULL : ZT_MSG_PS_PUSH, .pool = 1, .index = 5 };
        if (i < 3)
            m.u.PS_PULL = (zt_msg_PS_PULL_t) { .req = 8, .offset = wild[i][0], .count = wild[i][1] };
        else
            m.u.PS_PUSH = (zt_msg_PS_PUSH_t) { .req = 8, .offset = wild[i - 3][0], .count = wild[i - 3][1] };
        zframe_t *h = zt_msg_encode(&m);
        assert(zframe_send(&h, forger, i < 3 ? 0 : ZFRAME_MORE) == 0);
        if (i >= 3) {
            float one = 1.0f;
            zframe_t *f = zframe_new(&one, sizeof one);
            assert(zframe_send(&f, forger, 0) == 0);
        }
        zframe_t *rh = zframe_recv(forger);
        zt_msg_t r;
        assert(rh && zt_msg_decode(zframe_data(rh), zframe_size(rh), &r, NULL) == ZT_OK);
        if (r.type != ZT_MSG_PS_ERROR || r.u.PS_ERROR.code != ZT_PS_BAD_RANGE) {
            fprintf(stderr, "%s [%lld, +%lld): got %s '%s'\n", i < 3 ? "pull" : "push", (long long) wild[i % 3][0],
                    (long long) wild[i % 3][1], zt_msg_type_name(r.type),
                    r.type == ZT_MSG_PS_ERROR ? r.u.PS_ERROR.text : "");
            abort();
        }
        zframe_destroy(&rh);
    }
    assert(waitpid(s_pids[0], NULL, WNOHANG) == 0); /* alive */
    zsock_destroy(&forger);
    s_push_all(c0, ids, g, 0);
    s_pull_all(c0, ids, w);
    for (int64_t i = 0; i < 37; i++)
        assert(w[0][i] == -0.5f * g[0][i]);
    zt_ps_client_destroy(&c0);
    printf("forged shared-memory references and overflowing ranges refused: ok\n");
}

/* Workers restarted again and again (a new identity each time) do not pile
 * up pull areas on the server: one per worker and two spare. */
static void s_case_pull_areas(void)
{
    const char *ipc = getenv("ZT_DATA_IPC");
    if (!(ipc && !strcmp(ipc, "off")) && zt_shm_enabled()) {
        for (int k = 0; k < 6; k++) {
            zt_ps_client_t *c = s_client(1, 0, "sgd", 0.5f, 0, 1, -1, ids);
            s_pull_all(c, ids, w);
            for (int64_t i = 0; i < 37; i++)
                assert(w[0][i] == -0.5f * g[0][i]);
            zt_ps_client_destroy(&c);
        }
        char cmd[200];
        snprintf(cmd, sizeof cmd, "ls -l /proc/%d/fd | grep -c 'memfd:ztrain-psv-'", (int) s_pids[0]);
        FILE *p = popen(cmd, "r");
        int areas = -1;
        assert(p && fscanf(p, "%d", &areas) == 1);
        pclose(p);
        if (areas < 1 || areas > 3) {
            fprintf(stderr, "%d pull areas on the server after 7 workers came and went\n", areas);
            abort();
        }
        printf("pull areas bounded (%d for 7 workers one after another): ok\n", areas);
    }
}

int main(int argc, char **argv)
{
    bin = argc > 1 ? argv[1] : "ztrain-paramserver";
    zt_log_init("test_ps", 0);
    snprintf(s_dir, sizeof s_dir, "/tmp/zt-test-ps-%d", (int) getpid());
    mkdir(s_dir, 0755);
    bool seal = test_sealed_setup(s_dir); /* ctest's ps_sealed: every push and pull sealed */
    for (int t = 0; t < 3; t++) {
        g[t] = malloc(sizes[t] * sizeof(float));
        w[t] = malloc(sizes[t] * sizeof(float));
        w0[t] = malloc(sizes[t] * sizeof(float));
        for (int64_t i = 0; i < sizes[t]; i++)
            g[t][i] = (float) (t * 10000 + i + 1) * 0.001f; /* distinct per element */
    }
    for (int n = 1; n <= 4; n++) {
        zt_ps_client_t *c = s_case_sgd(n);
        s_case_checkpoint(c, n);
        s_case_mismatch(n);
        zt_ps_client_destroy(&c);
        s_stop(n);
        printf("sgd, ranges, snapshot, mismatch over %d server%s: ok\n", n, n > 1 ? "s" : "");
    }
    s_case_optimizers();
    s_case_sync();
    s_case_staleness();
    s_case_dead_server();
    s_case_snapshot_restart();
    if (!seal) /* plain messages, which a sealed server drops */
        s_case_forged();
    else
        s_case_other_cipher();
    s_case_pull_areas();
    s_stop(1);
    for (int t = 0; t < 3; t++) {
        free(g[t]);
        free(w[t]);
        free(w0[t]);
    }
    char cmd[300]; /* and their ipc:// files */
    snprintf(cmd, sizeof cmd, "rm -rf %s", s_dir);
    return system(cmd) == 0 ? 0 : 1;
}
