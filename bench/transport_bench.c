/* transport_bench: what moving bulk bytes between two processes costs, by
 * transport, for the choice of the bulk transport: plain TCP sockets or
 * ZeroMQ, each in the clear and sealed (zt_seal, AES-128-GCM). One sender
 * process streams TOTAL bytes to one receiver process over loopback TCP in
 * units of UNIT bytes, and the receiver puts every unit where it is used (a
 * destination buffer the size of the tensor):
 *   tcp          send(); recv() straight into place
 *   tcp-sealed   seal into a staging buffer, send it with its number and
 *                tag; recv into a staging buffer, open into place
 *   zmq          a PUSH socket's zero-copy frame; the PULL side's frame
 *                copied into place (what the all-reduce does with a sum)
 *   zmq-sealed   sealed into a frame; the frame opened into place
 * Prints GB/s (wall) and CPU-ns per byte (sender and receiver together,
 * ZeroMQ's I/O threads included), one line each:
 *   tcp        unit 131072  GB/s 2.41  CPU-ns/B 0.71
 *
 *   transport_bench [--total BYTES] [--unit BYTES] [--only NAME] */
#include "wire/zt_seal.h"
#define BENCH_PROG "transport_bench"
#include "bench_sock.h"
#include <arpa/inet.h>
#include <malloc.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

static int64_t TOTAL = 1LL << 30, UNIT = 128 << 10, SPAN = 16 << 20; /* SPAN: the destination tensor */
static uint8_t KEY[ZT_SEAL_KEY_BYTES];

typedef struct { uint64_t number; uint8_t tag[ZT_SEAL_TAG_BYTES]; } s_head_t;

static const uint8_t AAD[32] = "bucket 3 gen 9 offset 0";

/* ------------------------------------------------------------------ tcp */

static void s_tcp_send(int fd, bool sealed)
{
    char *src = malloc((size_t) SPAN), *wire = malloc((size_t) UNIT);
    memset(src, 1, (size_t) SPAN);
    zt_seal_t *tx = sealed ? zt_seal_new(KEY, ZT_SEAL_C2S) : NULL;
    for (int64_t at = 0; at < TOTAL; at += UNIT) {
        const char *from = src + at % SPAN;
        if (!sealed) {
            send_all(fd, from, (size_t) UNIT);
            continue;
        }
        s_head_t h;
        if (zt_seal_close(tx, AAD, sizeof AAD, from, wire, (size_t) UNIT, &h.number, h.tag) != 0)
            die("seal");
        send_all(fd, &h, sizeof h);
        send_all(fd, wire, (size_t) UNIT);
    }
    zt_seal_destroy(&tx);
}

static void s_tcp_recv(int fd, bool sealed)
{
    char *dst = malloc((size_t) SPAN), *wire = malloc((size_t) UNIT);
    zt_seal_t *rx = sealed ? zt_seal_new(KEY, ZT_SEAL_C2S) : NULL;
    for (int64_t at = 0; at < TOTAL; at += UNIT) {
        char *to = dst + at % SPAN;
        if (!sealed) {
            recv_all(fd, to, (size_t) UNIT);
            continue;
        }
        s_head_t h;
        recv_all(fd, &h, sizeof h);
        recv_all(fd, wire, (size_t) UNIT);
        if (zt_seal_open(rx, h.number, AAD, sizeof AAD, wire, to, (size_t) UNIT, h.tag) != 0)
            die("open");
    }
    zt_seal_destroy(&rx);
}

/* ------------------------------------------------------------------ zmq */

static void s_free(void *data, void *hint)
{
    (void) hint;
    free(data);
}

static void s_noop(void *data, void *hint)
{
    (void) data;
    (void) hint;
}

static void s_zmq_send(const char *ep, bool sealed)
{
    void *ctx = zmq_ctx_new(), *s = zmq_socket(ctx, ZMQ_PUSH);
    int hwm = 64;
    zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof hwm);
    if (zmq_connect(s, ep) != 0)
        die("zmq_connect");
    char *src = malloc((size_t) SPAN);
    memset(src, 1, (size_t) SPAN);
    zt_seal_t *tx = sealed ? zt_seal_new(KEY, ZT_SEAL_C2S) : NULL;
    for (int64_t at = 0; at < TOTAL; at += UNIT) {
        char *from = src + at % SPAN;
        zmq_msg_t m;
        if (!sealed) /* zero-copy from the tensor (the tensor stays unchanged here) */
            zmq_msg_init_data(&m, from, (size_t) UNIT, s_noop, NULL);
        else {
            char *wire = malloc((size_t) UNIT + sizeof(s_head_t));
            s_head_t h;
            if (zt_seal_close(tx, AAD, sizeof AAD, from, wire + sizeof h, (size_t) UNIT, &h.number, h.tag) != 0)
                die("seal");
            memcpy(wire, &h, sizeof h);
            zmq_msg_init_data(&m, wire, (size_t) UNIT + sizeof h, s_free, NULL);
        }
        if (zmq_msg_send(&m, s, 0) < 0)
            die("zmq_msg_send");
    }
    zt_seal_destroy(&tx);
    int linger = -1;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    zmq_close(s);
    zmq_ctx_term(ctx); /* waits for every frame to go out */
}

static void s_zmq_recv(void *s, bool sealed)
{
    char *dst = malloc((size_t) SPAN);
    zt_seal_t *rx = sealed ? zt_seal_new(KEY, ZT_SEAL_C2S) : NULL;
    for (int64_t at = 0; at < TOTAL; at += UNIT) {
        char *to = dst + at % SPAN;
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, s, 0) < 0)
            die("zmq_msg_recv");
        const char *p = zmq_msg_data(&m);
        if (!sealed)
            memcpy(to, p, (size_t) UNIT);
        else {
            s_head_t h;
            memcpy(&h, p, sizeof h);
            if (zt_seal_open(rx, h.number, AAD, sizeof AAD, p + sizeof h, to, (size_t) UNIT, h.tag) != 0)
                die("open");
        }
        zmq_msg_close(&m);
    }
    zt_seal_destroy(&rx);
}

/* ----------------------------------------------------------------- main */

/* One transport: the receiver here, the sender forked; GB/s and CPU-ns/B. */
static void s_run(const char *name)
{
    bool sealed = strstr(name, "sealed") != NULL, zmq = !strncmp(name, "zmq", 3);
    int pipes[2], lfd = -1, port = 0;
    if (pipe(pipes) != 0)
        die("pipe");
    void *ctx = NULL, *pull = NULL;
    char ep[64];
    if (zmq) {
        ctx = zmq_ctx_new();
        pull = zmq_socket(ctx, ZMQ_PULL);
        int hwm = 64;
        zmq_setsockopt(pull, ZMQ_RCVHWM, &hwm, sizeof hwm);
        if (zmq_bind(pull, "tcp://127.0.0.1:*") != 0)
            die("zmq_bind");
        size_t len = sizeof ep;
        zmq_getsockopt(pull, ZMQ_LAST_ENDPOINT, ep, &len);
    }
    else
        lfd = listen_loopback(1, &port);
    double w0 = bench_wall(), c0 = bench_self_cpu();
    pid_t pid = fork();
    if (pid == 0) {
        double c = bench_self_cpu();
        if (zmq)
            s_zmq_send(ep, sealed);
        else {
            int fd = connect_loopback(port);
            s_tcp_send(fd, sealed);
            close(fd);
        }
        c = bench_self_cpu() - c;
        if (write(pipes[1], &c, sizeof c) != sizeof c)
            die("write");
        _exit(0);
    }
    if (zmq)
        s_zmq_recv(pull, sealed);
    else {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0)
            die("accept");
        s_tcp_recv(fd, sealed);
        close(fd);
        close(lfd);
    }
    double w = bench_wall() - w0, c = bench_self_cpu() - c0, sc;
    if (read(pipes[0], &sc, sizeof sc) != sizeof sc)
        die("the sender's report");
    int status;
    waitpid(pid, &status, 0);
    if (zmq) {
        zmq_close(pull);
        zmq_ctx_term(ctx);
    }
    close(pipes[0]);
    close(pipes[1]);
    printf("%-11s unit %-8lld GB/s %5.2f  CPU-ns/B %5.2f\n", name, (long long) UNIT, (double) TOTAL / w / 1e9,
           (c + sc) * 1e9 / (double) TOTAL);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : "0";
        if (!strcmp(argv[i], "--total") && ++i)
            TOTAL = atoll(v);
        else if (!strcmp(argv[i], "--unit") && ++i)
            UNIT = atoll(v);
        else if (!strcmp(argv[i], "--only") && ++i)
            only = v;
        else {
            fprintf(stderr, "usage: transport_bench [--total BYTES] [--unit BYTES] [--only NAME]\n"
                            "bulk bytes between two processes over loopback TCP: plain sockets and ZeroMQ,\n"
                            "in the clear and sealed; GB/s and CPU-ns per byte (both ends)\n");
            return strcmp(argv[i], "--help") ? 2 : 0;
        }
    }
    if (UNIT < 64 || UNIT > SPAN || SPAN % UNIT || TOTAL < UNIT) {
        fprintf(stderr, "transport_bench: a unit of 64 bytes to 16 MiB dividing 16 MiB, a total of one unit or more\n");
        return 2;
    }
    TOTAL -= TOTAL % UNIT;
    /* sealed frames are allocated per unit and freed by ZeroMQ's thread:
     * kept on the heap, not mapped and faulted in afresh each time (the
     * library's own frames come from a pool) */
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    zt_seal_random(KEY, sizeof KEY);
    const char *names[] = { "tcp", "tcp-sealed", "zmq", "zmq-sealed" };
    for (int i = 0; i < 4; i++)
        if (!only || !strcmp(only, names[i]))
            s_run(names[i]);
    return 0;
}
