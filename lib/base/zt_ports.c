#include "base/zt_ports.h"
#include "base/zt_time.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

bool zt_sockaddr_name(const struct sockaddr *a, char *out, size_t len)
{
    out[0] = 0;
    if (a->sa_family == AF_INET)
        return inet_ntop(AF_INET, &((const struct sockaddr_in *) a)->sin_addr, out, (socklen_t) len) != NULL;
    if (a->sa_family != AF_INET6)
        return false;
    const struct in6_addr *v6 = &((const struct sockaddr_in6 *) a)->sin6_addr;
    return IN6_IS_ADDR_V4MAPPED(v6) ? inet_ntop(AF_INET, &v6->s6_addr[12], out, (socklen_t) len) != NULL
                                    : inet_ntop(AF_INET6, v6, out, (socklen_t) len) != NULL;
}

/* The ports this process handed out last: a port released at once is free
 * again, and two draws may land on the same one (two reducers of a test
 * given one port), so none of these is handed out twice. */
static pthread_mutex_t s_given_mu = PTHREAD_MUTEX_INITIALIZER;
static int s_given[64], s_ngiven;

int zt_ephemeral_port(void)
{
    int port = -1;
    pthread_mutex_lock(&s_given_mu);
    for (int tries = 0; tries < 16; tries++) {
        int fd = -1;
        port = zt_reserve_port(&fd);
        if (fd >= 0)
            close(fd);
        bool seen = false;
        for (int i = 0; i < s_ngiven && i < 64 && port > 0; i++)
            seen = seen || s_given[i] == port;
        if (!seen)
            break;
    }
    if (port > 0)
        s_given[s_ngiven++ % 64] = port;
    pthread_mutex_unlock(&s_given_mu);
    return port;
}

/* The kernel's automatic port range (bind(0) and connect() both draw from
 * it), from /proc; 32768-60999 when unreadable. */
static void s_local_range(int *lo, int *hi)
{
    *lo = 32768;
    *hi = 60999;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        if (fscanf(f, "%d %d", lo, hi) != 2) {
            *lo = 32768;
            *hi = 60999;
        }
        fclose(f);
    }
}

int zt_reserve_port(int *fd_p)
{
    /* A port outside the kernel's automatic range: no connect() or bind(0)
     * anywhere on the machine is ever handed it, so once released it stays
     * free for the replica it was chosen for. */
    *fd_p = -1;
    int lo, hi, first, last;
    s_local_range(&lo, &hi);
    if (lo - 10000 >= 1024) {
        first = 10000;
        last = lo - 1;
    }
    else {
        first = hi + 1;
        last = 65535;
    }
    if (last - first < 100) { /* no room outside: let the kernel choose */
        first = 0;
        last = 0;
    }
    unsigned seed = (unsigned) (getpid() ^ zt_now_us());
    int span = last - first + 1, start = span > 1 ? (int) (rand_r(&seed) % (unsigned) span) : 0;
    for (int k = 0; k < 200; k++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return -1;
        struct sockaddr_in a = { .sin_family = AF_INET };
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons((uint16_t) (first ? first + (start + k) % span : 0));
        socklen_t len = sizeof a;
        if (bind(fd, (struct sockaddr *) &a, sizeof a) == 0 &&
            getsockname(fd, (struct sockaddr *) &a, &len) == 0) {
            *fd_p = fd;
            return ntohs(a.sin_port);
        }
        close(fd);
    }
    return -1;
}

int zt_wait_fd(int fd, short events, int ms)
{
    struct pollfd p = { fd, events, 0 };
    int rc;
    do
        rc = poll(&p, 1, ms);
    while (rc < 0 && errno == EINTR);
    return rc > 0 ? p.revents : rc;
}
