/* Helpers of the benchmarks that move bytes over plain sockets themselves
 * (lean_ar, transport_bench): whole sends and receives, the clocks. Define
 * BENCH_PROG (the program's name, for messages) before including it. */
#ifndef BENCH_SOCK_H
#define BENCH_SOCK_H
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

/* Says what failed, with errno's reason, and exits 1. */
static inline void bench_die(const char *prog, const char *what)
{
    fprintf(stderr, "%s: %s: %s\n", prog, what, strerror(errno));
    exit(1);
}

static inline double bench_wall(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double) t.tv_sec + (double) t.tv_nsec / 1e9;
}

/* CPU-seconds of this process, every thread, user and system. */
static inline double bench_self_cpu(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double) (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double) (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* All n bytes, or -1 (errno set). */
static inline int bench_send_all(int fd, const void *p, size_t n)
{
    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p = (const char *) p + k;
        n -= (size_t) k;
    }
    return 0;
}

/* All n bytes, or -1 (errno set; 0 at an early end). */
static inline int bench_recv_all(int fd, void *p, size_t n)
{
    while (n) {
        ssize_t k = recv(fd, p, n, MSG_WAITALL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            if (k == 0)
                errno = 0;
            return -1;
        }
        p = (char *) p + k;
        n -= (size_t) k;
    }
    return 0;
}

/* The program's own: a failure ends it, named. */
static inline void die(const char *what);

/* A socket listening on an ephemeral loopback port (in *port). */
static inline int listen_loopback(int backlog, int *port)
{
    struct sockaddr_in a = { .sin_family = AF_INET };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *) &a, sizeof a) != 0 || listen(fd, backlog) != 0 ||
        getsockname(fd, (struct sockaddr *) &a, &len) != 0)
        die("listen");
    *port = ntohs(a.sin_port);
    return fd;
}

/* A connection to a loopback port, without Nagle's delay. */
static inline int connect_loopback(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t) port) };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *) &a, sizeof a) != 0)
        die("connect");
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static inline void die(const char *what)
{
    bench_die(BENCH_PROG, what);
}

static inline void send_all(int fd, const void *p, size_t n)
{
    if (bench_send_all(fd, p, n) != 0)
        die("send");
}

static inline void recv_all(int fd, void *p, size_t n)
{
    if (bench_recv_all(fd, p, n) != 0)
        die("recv");
}
#endif
