/* Parameter-server push/pull throughput on loopback: values of 4 KiB to
 * 64 MiB, 1/2/4 workers against 1/2 servers (real ztrain-paramserver
 * processes, real worker processes), plus raw loopback TCP measured in the
 * same run as the peer to compare with.
 *
 *   bench/ps_bench [path/to/ztrain-paramserver] [--quick]
 */
#include "bench_auth.h"
#include "bench_cpu.h"
#include "base/zt_util.h"
#include "ztrain/zt_knobs.h"
#include "ztrain/ztrain.h"
#include "ztrain/zt_ps.h"
#include <czmq.h>
#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>


typedef struct { double push_s, pull_s; int64_t iters; double lat_us[3]; } s_result_t;

static int s_cmp_d(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

/* One worker: pushes then pulls `bytes` of one tensor `iters` times. */
static s_result_t s_worker(const char *const *servers, int nservers, int rank, size_t bytes,
                           int64_t iters, int wfd_ready, int rfd_go)
{
    s_result_t r = { 0 };
    zt_ps_client_t *c = zt_ps_client_new(servers, nservers, rank);
    int64_t n = (int64_t) (bytes / sizeof(float));
    zt_ps_declare(c, "t", n, 0);
    zt_ps_options_t o;
    zt_ps_options_defaults(&o);
    o.optimizer = "sgd";
    o.learning_rate = 1e-6f;
    if (zt_ps_connect(c, &o, 30000) != ZT_OK) {
        fprintf(stderr, "connect: %s\n", zt_ps_error(c));
        exit(1);
    }
    float *buf = calloc((size_t) n, sizeof(float));
    for (int64_t i = 0; i < n; i++)
        buf[i] = 1e-3f;
    /* warm-up: the first large messages fault pages in everywhere */
    for (int k = 0; k < 2; k++) {
        zt_ps_push(c, 0, buf, 0);
        zt_ps_wait(c, 60000);
        zt_ps_pull(c, 0, buf);
        zt_ps_wait(c, 60000);
    }
    char b = 1;
    if (write(wfd_ready, &b, 1) != 1 || read(rfd_go, &b, 1) != 1)
        exit(1);
    double *lat = calloc((size_t) iters, sizeof(double));
    int64_t t0 = zt_now_us();
    for (int64_t i = 0; i < iters; i++) {
        int64_t a = zt_now_us();
        zt_ps_push(c, 0, buf, i);
        if (zt_ps_wait(c, 60000) != ZT_OK) {
            fprintf(stderr, "push: %s\n", zt_ps_error(c));
            exit(1);
        }
        lat[i] = (double) (zt_now_us() - a);
    }
    int64_t t1 = zt_now_us();
    for (int64_t i = 0; i < iters; i++) {
        zt_ps_pull(c, 0, buf);
        if (zt_ps_wait(c, 60000) != ZT_OK) {
            fprintf(stderr, "pull: %s\n", zt_ps_error(c));
            exit(1);
        }
    }
    int64_t t2 = zt_now_us();
    qsort(lat, (size_t) iters, sizeof *lat, s_cmp_d);
    r.push_s = (double) (t1 - t0) / 1e6;
    r.pull_s = (double) (t2 - t1) / 1e6;
    r.iters = iters;
    r.lat_us[0] = lat[iters / 2];
    r.lat_us[1] = lat[iters * 99 / 100];
    r.lat_us[2] = lat[0];
    free(lat);
    free(buf);
    zt_ps_client_destroy(&c);
    return r;
}

static double s_raw_gbs, s_zmq_us;

static void s_run(const char *psbin, int nservers, int nworkers, size_t bytes, double budget_s)
{
    char eps[4][64];
    const char *ptrs[4];
    pid_t spids[4];
    for (int s = 0; s < nservers; s++) {
        snprintf(eps[s], sizeof eps[s], "127.0.0.1:%d", zt_ephemeral_port());
        ptrs[s] = eps[s];
        char bind[80], idx[16], cnt[16];
        snprintf(bind, sizeof bind, "tcp://%s", eps[s]);
        snprintf(idx, sizeof idx, "%d", s);
        snprintf(cnt, sizeof cnt, "%d", nservers);
        if ((spids[s] = fork()) == 0) {
            unsetenv("ZT_COORDINATOR");
            unsetenv("AIP_CHECKPOINT_DIR");
            setenv("ZT_LOG_LEVEL", "warn", 1);
            execl(psbin, psbin, "--bind", bind, "--index", idx, "--servers", cnt, (char *) NULL);
            _exit(127);
        }
    }
    /* Enough iterations to fill the time budget at ~2 GB/s, bounded. */
    int64_t iters = (int64_t) (budget_s * 2e9 / (double) bytes / nworkers);
    if (iters < 5)
        iters = 5;
    if (iters > 4000)
        iters = 4000;
    int ready[2], go[2], res[2];
    if (pipe(ready) || pipe(go) || pipe(res))
        exit(1);
    double cpu0 = s_bench_children_cpu();
    pid_t wpids[4];
    for (int w = 0; w < nworkers; w++)
        if ((wpids[w] = fork()) == 0) {
            s_result_t r = s_worker(ptrs, nservers, w, bytes, iters, ready[1], go[0]);
            if (write(res[1], &r, sizeof r) != sizeof r)
                _exit(1);
            _exit(0);
        }
    char b;
    for (int w = 0; w < nworkers; w++)
        if (read(ready[0], &b, 1) != 1)
            exit(1);
    for (int w = 0; w < nworkers; w++)
        if (write(go[1], &b, 1) != 1)
            exit(1);
    double push_max = 0, pull_max = 0, p50 = 0, p99 = 0;
    for (int w = 0; w < nworkers; w++) {
        s_result_t r;
        if (read(res[0], &r, sizeof r) != sizeof r)
            exit(1);
        push_max = r.push_s > push_max ? r.push_s : push_max;
        pull_max = r.pull_s > pull_max ? r.pull_s : pull_max;
        p50 += r.lat_us[0] / nworkers;
        p99 = r.lat_us[1] > p99 ? r.lat_us[1] : p99;
    }
    for (int w = 0; w < nworkers; w++)
        waitpid(wpids[w], NULL, 0);
    for (int s = 0; s < nservers; s++) {
        kill(spids[s], SIGTERM);
        waitpid(spids[s], NULL, 0);
    }
    double cpu = s_bench_children_cpu() - cpu0;
    close(ready[0]); close(ready[1]); close(go[0]); close(go[1]); close(res[0]); close(res[1]);
    double total = (double) bytes * (double) iters * nworkers;
    char size[32];
    if (bytes >= (1 << 20))
        snprintf(size, sizeof size, "%zu MiB", bytes >> 20);
    else
        snprintf(size, sizeof size, "%zu KiB", bytes >> 10);
    double push = total / push_max / 1e9, pull = total / pull_max / 1e9;
    char ratio[64];
    if (bytes >= (1u << 20))
        snprintf(ratio, sizeof ratio, "%.2fx / %.2fx raw TCP", push / s_raw_gbs, pull / s_raw_gbs);
    else
        snprintf(ratio, sizeof ratio, "%.2fx bare zmq RTT", p50 / s_zmq_us);
    printf("%-7s %2d %2d | %6.2f GB/s %8.0f ops/s | %6.2f GB/s %8.0f ops/s | %7.0f %7.0f | %s | %.2f CPU-ns/B\n",
           size, nworkers, nservers, push, (double) iters * nworkers / push_max, pull,
           (double) iters * nworkers / pull_max, p50, p99, ratio, cpu * 1e9 / (2 * total));
    fflush(stdout);
}

/* Bare ZeroMQ: DEALER -> ROUTER echo in another process, 4 KiB frames. */
static double s_bare_zmq_rtt_us(int n)
{
    int port = zt_ephemeral_port();
    pid_t pid = fork();
    if (pid == 0) {
        zsock_t *r = zsock_new(ZMQ_ROUTER);
        zsock_bind(r, "tcp://127.0.0.1:%d", port);
        for (;;) {
            zmsg_t *m = zmsg_recv(r);
            if (!m)
                break;
            zmsg_send(&m, r);
        }
        _exit(0);
    }
    zsock_t *d = zsock_new(ZMQ_DEALER);
    zsock_connect(d, "tcp://127.0.0.1:%d", port);
    char b[4096] = { 0 };
    int64_t t0 = 0;
    for (int i = 0; i < n + 200; i++) {
        if (i == 200)
            t0 = zt_now_us();
        zframe_t *f = zframe_new(b, sizeof b);
        zframe_send(&f, d, 0);
        f = zframe_recv(d);
        zframe_destroy(&f);
    }
    double us = (double) (zt_now_us() - t0) / n;
    zsock_destroy(&d);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return us;
}

/* Raw loopback TCP: one sender, one receiver, 64 MiB messages in 1 MiB
 * syscalls (the fastest size measured here). */
/* One raw stream, loopback TCP (unix false) or a Unix-domain socket. */
static double s_raw_stream(bool unix_domain, size_t bytes, int reps)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t) zt_ephemeral_port()),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    struct sockaddr_un u = { .sun_family = AF_UNIX };
    snprintf(u.sun_path, sizeof u.sun_path, "/tmp/zt-psbench-%d.sock", (int) getpid());
    unlink(u.sun_path);
    struct sockaddr *addr = unix_domain ? (struct sockaddr *) &u : (struct sockaddr *) &a;
    socklen_t alen = unix_domain ? (socklen_t) sizeof u : (socklen_t) sizeof a;
    int family = unix_domain ? AF_UNIX : AF_INET;
    int ls = socket(family, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    bind(ls, addr, alen);
    listen(ls, 1);
    pid_t pid = fork();
    char *buf = malloc(bytes);
    memset(buf, 1, bytes);
    if (pid == 0) {
        int s = socket(family, SOCK_STREAM, 0);
        connect(s, addr, alen);
        for (int r = 0; r < reps + 1; r++)
            for (size_t off = 0; off < bytes;) {
                size_t want = bytes - off < (1u << 20) ? bytes - off : (1u << 20);
                ssize_t n = send(s, buf + off, want, 0);
                if (n <= 0)
                    _exit(1);
                off += (size_t) n;
            }
        _exit(0);
    }
    int c = accept(ls, NULL, NULL);
    int64_t t0 = 0;
    for (int r = 0; r < reps + 1; r++) {
        if (r == 1)
            t0 = zt_now_us();
        for (size_t off = 0; off < bytes;) {
            size_t want = bytes - off < (1u << 20) ? bytes - off : (1u << 20);
            ssize_t n = recv(c, buf + off, want, 0);
            if (n <= 0)
                break;
            off += (size_t) n;
        }
    }
    double gbs = (double) bytes * reps / ((double) (zt_now_us() - t0) / 1e6) / 1e9;
    waitpid(pid, NULL, 0);
    close(c);
    close(ls);
    if (unix_domain)
        unlink(u.sun_path);
    free(buf);
    return gbs;
}

int main(int argc, char **argv)
{
    const char *psbin = "build/bin/ztrain-paramserver";
    bool quick = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: ps_bench [--quick] [--auth] [PARAMSERVER]\n\n"
                   "Parameter-server push and pull bandwidth and 4 KiB push+ack latency, one to four\n"
                   "workers against one or two servers, with raw loopback TCP, a Unix-domain socket\n"
                   "and bare ZeroMQ measured in the same run as peers.\n\n"
                   "  PARAMSERVER  the ztrain-paramserver binary (default %s)\n"
                   "  --quick      fewer sizes and shorter runs\n"
                   "  --auth       servers and workers authenticate and encrypt (CURVE), as in a job\n", psbin);
            return 0;
        }
        if (!strcmp(argv[i], "--quick"))
            quick = true;
        else if (!strcmp(argv[i], "--auth"))
            s_bench_auth();
        else if (argv[i][0] == '-') {
            fprintf(stderr, "ps_bench: unknown option '%s' (--help lists them)\n", argv[i]);
            return 2;
        }
        else
            psbin = argv[i];
    }
    if (access(psbin, X_OK) != 0) {
        fprintf(stderr, "ps_bench: '%s' is not an executable ztrain-paramserver: %s\n", psbin,
                strerror(errno));
        return 2;
    }
    zt_tune_malloc(); /* as ztrain's own binaries do */
    setenv("ZT_LOG_LEVEL", "warn", 1);
    zt_log_init("bench", 0);
    s_raw_gbs = s_raw_stream(false, 64u << 20, quick ? 4 : 16);
    double uds = s_raw_stream(true, 64u << 20, quick ? 4 : 16);
    s_zmq_us = s_bare_zmq_rtt_us(quick ? 1000 : 5000);
    printf("peers, same run: raw loopback TCP one stream %.2f GB/s, Unix-domain socket %.2f GB/s; bare "
           "ZeroMQ 4 KiB round trip %.0f us\ndata plane: %s, %s\n\n", s_raw_gbs, uds, s_zmq_us,
           strcmp(zt_knob_str(ZT_KNOB_DATA_IPC), "auto") ? "TCP (ZT_DATA_IPC=off)"
                                                         : "ipc:// twins of the loopback endpoints (ZT_DATA_IPC=auto)",
           getenv("ZT_CREDENTIALS") ? "authenticated and encrypted (CURVE, --auth)" : "plain sockets");
    printf("value   W  S | push (+ack, applied)       | pull                       | push+ack us     | ratio (push / pull) | CPU per byte moved (workers + servers)\n");
    const size_t sizes[5] = { 4u << 10, 64u << 10, 1u << 20, 16u << 20, 64u << 20 };
    const int ws[3] = { 1, 2, 4 }, ss[2] = { 1, 2 };
    for (int si = 0; si < 5; si++)
        for (int s = 0; s < 2; s++)
            for (int w = 0; w < 3; w++) {
                if (quick && (ws[w] == 4 || sizes[si] == (64u << 20)))
                    continue;
                s_run(psbin, ss[s], ws[w], sizes[si], quick ? 0.3 : 1.0);
            }
    return 0;
}
