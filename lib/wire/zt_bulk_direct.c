/* A bulk server's TCP port on the server's own thread (see zt_bulk_direct.h).
 *
 * One epoll set holds the listening socket and every connection (read
 * interest always, write interest while bytes wait to go); the caller polls
 * its descriptor, and zt_direct_recv takes one message from the connections
 * that were ready, in turn, so that one client's stream of pieces does not
 * keep the others waiting. */
#include "wire/zt_bulk_direct.h"
#include "wire/zt_guard.h"
#include "wire/zt_transport.h"
#include "base/zt_ports.h"
#include "base/zt_util.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_knobs.h"
#include "ztrain/zt_log.h"
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_CONNS 1024   /* connections at once; more are refused */
#define ACCEPTS 16       /* connections taken per turn */
#define ID_BYTES 6
#define LISTENER UINT64_MAX

typedef struct {
    zt_zmtp_t *end;
    uint32_t id;
    bool ready; /* the kernel said it has bytes (or it ended) */
    bool out;   /* write interest asked for */
    char addr[48];
} s_conn_t;

struct zt_direct_t {
    int lfd, ep, ready_fd; /* listener, epoll set, an eventfd always readable */
    int port, rule;
    int64_t handshake_ms;  /* ZT_HANDSHAKE_MS when it was made */
    zt_guard_t *guard;
    s_conn_t *c;
    int n, rr;
    int64_t paused_ms;     /* no descriptor was left to accept with: the listener rests until then */
    uint32_t next_id;
    zt_streams_t *streams;
};

/* ------------------------------------------------------------ listening */

/* endpoint's address (*, an IPv4 address or a name of one) and port (a
 * number or *: 0) into a; false when it is of another form. */
static bool s_address(const char *endpoint, struct sockaddr_in *a)
{
    if (strncmp(endpoint, "tcp://", 6))
        return false;
    const char *host = endpoint + 6, *colon = strrchr(host, ':');
    if (!colon || colon == host || *host == '[')
        return false;
    char name[256], *end = NULL;
    snprintf(name, sizeof name, "%.*s", (int) (colon - host), host);
    long port = strcmp(colon + 1, "*") ? strtol(colon + 1, &end, 10) : 0;
    if ((end && (*end || end == colon + 1)) || port < 0 || port > 65535)
        return false;
    *a = (struct sockaddr_in) { .sin_family = AF_INET, .sin_port = htons((uint16_t) port) };
    if (!strcmp(name, "*"))
        a->sin_addr.s_addr = htonl(INADDR_ANY);
    else if (inet_pton(AF_INET, name, &a->sin_addr) != 1) {
        struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *res = NULL;
        if (getaddrinfo(name, NULL, &hints, &res) != 0 || !res)
            return false;
        a->sin_addr = ((struct sockaddr_in *) res->ai_addr)->sin_addr;
        freeaddrinfo(res);
    }
    return true;
}

zt_direct_t *zt_direct_listen(const char *endpoint, int rule, int *port_p)
{
    struct sockaddr_in a;
    if (!s_address(endpoint, &a))
        return NULL;
    zt_direct_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    self->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    self->ep = epoll_create1(EPOLL_CLOEXEC);
    self->ready_fd = eventfd(1, EFD_CLOEXEC);
    self->rule = rule;
    self->handshake_ms = zt_knob_int(ZT_KNOB_HANDSHAKE_MS);
    int one = 1;
    socklen_t alen = sizeof a;
    bool ok = self->lfd >= 0 && self->ep >= 0 && self->ready_fd >= 0 &&
              setsockopt(self->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
              bind(self->lfd, (struct sockaddr *) &a, sizeof a) == 0 && listen(self->lfd, 128) == 0 &&
              getsockname(self->lfd, (struct sockaddr *) &a, &alen) == 0;
    struct epoll_event ev = { .events = EPOLLIN, .data.u64 = LISTENER };
    if (ok && epoll_ctl(self->ep, EPOLL_CTL_ADD, self->lfd, &ev) != 0)
        ok = false;
    if (!ok) {
        zt_error("cannot bind %s: %s", endpoint, strerror(errno));
        zt_direct_destroy(&self);
        return NULL;
    }
    self->port = ntohs(a.sin_port);
    self->guard = zt_guard_listen(self->port, rule == 1);
    if (port_p)
        *port_p = self->port;
    return self;
}

static void s_close(zt_direct_t *self, int i)
{
    s_conn_t *c = &self->c[i];
    if (self->streams) { /* its stream first: it sends on the end */
        uint8_t id[ID_BYTES] = { 0, 'z', (uint8_t) (c->id >> 24), (uint8_t) (c->id >> 16), (uint8_t) (c->id >> 8),
                                 (uint8_t) c->id };
        zt_streams_forget(self->streams, id, sizeof id);
    }
    epoll_ctl(self->ep, EPOLL_CTL_DEL, zt_zmtp_fd(c->end), NULL);
    zt_zmtp_destroy(&c->end);
    self->c[i] = self->c[--self->n];
    if (self->n == 0)
        free(self->c), self->c = NULL;
}

void zt_direct_destroy(zt_direct_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zt_direct_t *self = *self_p;
    while (self->n > 0)
        s_close(self, self->n - 1);
    zt_guard_unlisten(&self->guard);
    if (self->lfd >= 0)
        close(self->lfd);
    if (self->ep >= 0)
        close(self->ep);
    if (self->ready_fd >= 0)
        close(self->ready_fd);
    free(self);
    *self_p = NULL;
}

int zt_direct_count(const zt_direct_t *self) { return self->n; }

/* ------------------------------------------------------------ clients */

static s_conn_t *s_find(zt_direct_t *self, const void *id, size_t len)
{
    const uint8_t *p = id;
    if (len != ID_BYTES || p[0] != 0 || p[1] != 'z')
        return NULL;
    uint32_t v = (uint32_t) p[2] << 24 | (uint32_t) p[3] << 16 | (uint32_t) p[4] << 8 | p[5];
    for (int i = 0; i < self->n; i++)
        if (self->c[i].id == v)
            return &self->c[i];
    return NULL;
}

zt_zmtp_t *zt_direct_end(zt_direct_t *self, const void *id, size_t len)
{
    s_conn_t *c = s_find(self, id, len);
    return c ? c->end : NULL;
}

static zt_zmtp_t *s_end_of(void *arg, const void *id, size_t len) { return zt_direct_end(arg, id, len); }

void zt_direct_streams(zt_direct_t *self, zt_streams_t *streams)
{
    self->streams = streams;
    if (streams)
        zt_streams_set_ends(streams, s_end_of, self);
}

/* A connection that came: taken, or refused (counted and logged). */
static void s_take(zt_direct_t *self, int fd, const char *addr)
{
    char why[200] = "";
    if (self->rule == 1 && !zt_tcp_peer_allowed(addr))
        snprintf(why, sizeof why, "not from one of the job's hosts (closed before any handshake)");
    else if (self->n >= MAX_CONNS)
        snprintf(why, sizeof why, "this port holds %d connections, its most", MAX_CONNS);
    else
        zt_guard_admit(addr, why, sizeof why);
    s_conn_t *grown = why[0] ? NULL : realloc(self->c, (size_t) (self->n + 1) * sizeof *grown);
    if (!grown) {
        close(fd);
        if (self->guard)
            zt_guard_refuse(self->guard, addr, why[0] ? why : "out of memory");
        return;
    }
    self->c = grown;
    s_conn_t *c = &self->c[self->n];
    *c = (s_conn_t) { .id = ++self->next_id };
    snprintf(c->addr, sizeof c->addr, "%s", addr);
    struct epoll_event ev = { .events = EPOLLIN, .data.u64 = c->id };
    if (!(c->end = zt_zmtp_accept(fd, addr)))
        return;
    if (epoll_ctl(self->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
        zt_zmtp_destroy(&c->end);
        return;
    }
    self->n++;
    zt_debug("port %d: a connection from %s", self->port, addr);
}

static void s_accept(zt_direct_t *self)
{
    for (int k = 0; k < ACCEPTS; k++) {
        struct sockaddr_storage sa;
        socklen_t len = sizeof sa;
        int fd = accept4(self->lfd, (struct sockaddr *) &sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0 && (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)) {
            /* the connection waits in the kernel's queue: not polled for
             * a while, so that its readiness does not keep the server
             * spinning (said once per pause) */
            zt_warn("port %d: cannot accept a connection (%s); trying again in 100 ms", self->port, strerror(errno));
            epoll_ctl(self->ep, EPOLL_CTL_DEL, self->lfd, NULL);
            self->paused_ms = zt_now_ms() + 100;
        }
        if (fd < 0)
            return;
        char addr[48] = "";
        zt_sockaddr_name((struct sockaddr *) &sa, addr, sizeof addr);
        s_take(self, fd, addr);
    }
}

/* What the kernel says now: connections that came, bytes to read, room to
 * write (what waits is written at once). */
static void s_events(zt_direct_t *self)
{
    struct epoll_event evs[64];
    int k = epoll_wait(self->ep, evs, 64, 0);
    for (int i = 0; i < k; i++) {
        if (evs[i].data.u64 == LISTENER) {
            s_accept(self);
            continue;
        }
        s_conn_t *c = NULL;
        for (int j = 0; j < self->n && !c; j++)
            if (self->c[j].id == (uint32_t) evs[i].data.u64)
                c = &self->c[j];
        if (c && (evs[i].events & EPOLLOUT))
            zt_zmtp_flush(c->end);
        if (c && (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
            c->ready = true;
    }
}

int zt_direct_poll_fd(zt_direct_t *self)
{
    int64_t now = zt_now_ms(), limit = self->handshake_ms;
    bool waiting = false;
    if (self->paused_ms && now >= self->paused_ms) {
        struct epoll_event ev = { .events = EPOLLIN, .data.u64 = LISTENER };
        if (epoll_ctl(self->ep, EPOLL_CTL_ADD, self->lfd, &ev) == 0)
            self->paused_ms = 0;
    }
    for (int i = self->n - 1; i >= 0; i--) {
        s_conn_t *c = &self->c[i];
        bool up = zt_zmtp_connected(c->end), late = !zt_zmtp_greeted(c->end) && now - zt_zmtp_since(c->end) > limit;
        if (!up || late) {
            if (self->guard && (late || !zt_zmtp_greeted(c->end)))
                zt_guard_refuse(self->guard, c->addr, late ? "a handshake cut short, or not done within ZT_HANDSHAKE_MS"
                                                           : "a handshake that failed (not ZMTP with NULL)");
            if (!zt_zmtp_waiting(c->end)) {
                s_close(self, i);
                continue;
            }
        }
        bool out = zt_zmtp_pending(c->end);
        if (out != c->out) {
            struct epoll_event ev = { .events = EPOLLIN | (out ? EPOLLOUT : 0), .data.u64 = c->id };
            if (epoll_ctl(self->ep, EPOLL_CTL_MOD, zt_zmtp_fd(c->end), &ev) == 0)
                c->out = out;
        }
        waiting = waiting || c->ready || zt_zmtp_waiting(c->end);
    }
    return waiting ? self->ready_fd : self->ep;
}

int zt_direct_recv(zt_direct_t *self, zmq_msg_t *parts, int max)
{
    for (int pass = 0; pass < 2; pass++) {
        for (int k = 0; k < self->n; k++) {
            int i = (self->rr + k) % self->n;
            s_conn_t *c = &self->c[i];
            if (!c->ready && !zt_zmtp_waiting(c->end))
                continue;
            c->ready = false; /* still readable: the next s_events says so again */
            int got = zt_zmtp_connected(c->end) || zt_zmtp_waiting(c->end) ? zt_zmtp_recv(c->end, parts + 1, max - 1)
                                                                           : 0;
            if (got <= 0)
                continue;
            self->rr = i + 1;
            zmq_msg_init_size(&parts[0], ID_BYTES);
            uint8_t *id = zmq_msg_data(&parts[0]);
            id[0] = 0;
            id[1] = 'z';
            for (int b = 0; b < 4; b++)
                id[2 + b] = (uint8_t) (c->id >> (24 - 8 * b));
            return got + 1;
        }
        if (pass == 0)
            s_events(self);
    }
    return 0;
}
