/* A DEALER's end of ZMTP 3.0 with the NULL mechanism (the protocol a bulk
 * ROUTER speaks), on a socket of the caller's thread (what waits to go:
 * zt_zmtp_out.c). See zt_zmtp.h.
 *
 * The wire: a 64-byte greeting each way (signature 0xFF ... 0x7F, version
 * 3.0, mechanism "NULL", as-server 0), then a READY command each way (its
 * properties: Socket-Type), then frames: a flags byte (1 MORE, 2 a size of
 * 8 bytes, 4 a command), the size (1 or 8 bytes, big-endian), the bytes. */
#include "wire/zt_zmtp_internal.h"
#include "wire/zt_transport.h"
#include "base/zt_util.h"
#include "base/zt_ports.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_knobs.h"
#include "ztrain/zt_log.h"
#include <assert.h>
#include <czmq.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#define RECONNECT_MS 50
#define CONNECT_WAIT_MS 200   /* a connect not done by then is tried again later */
#define IN_BYTES (64 << 10)   /* the buffer headers and small frames are read into */
#define DIRECT_BYTES (8 << 10) /* a frame this large is read straight into its place */
#define HEAD_BYTES 1024       /* a read into in[] while large frames come (zt_zmtp_pump) */

/* ------------------------------------------------------------ connection */

static void s_down(zt_zmtp_t *self, const char *why)
{
    if (self->up)
        zt_debug("%s: connection closed (%s)", self->endpoint, why);
    self->up = false;
    if (self->server) { /* an accepted end is not made again: its descriptor goes */
        close(self->fd);
        self->fd = -1;
    }
    else
        dup2(self->idle_fd, self->fd); /* the old connection's descriptor goes with it */
    self->a = self->b = 0;
    zt_zmtp_out_drop(self); /* lost, as a DEALER's queue to a server that went away */
    for (int i = 0; i < self->cur.n; i++)
        zmq_msg_close(&self->cur.parts[i]);
    self->cur.n = 0;
    if (self->in_body)
        zmq_msg_close(&self->body);
    self->in_body = self->dropping = false;
}

/* Reads exactly n bytes (blocking, within ms): for the handshake only. */
static bool s_read_exact(int fd, uint8_t *to, size_t n, int64_t deadline)
{
    for (size_t got = 0; got < n;) {
        ssize_t r = recv(fd, to + got, n - got, 0);
        if (r > 0) {
            got += (size_t) r;
            continue;
        }
        if (r == 0 || (errno != EAGAIN && errno != EINTR))
            return false;
        int64_t left = deadline - zt_now_ms();
        if (left <= 0 || zt_wait_fd(fd, POLLIN, (int) left) <= 0)
            return false;
    }
    return true;
}

/* This end's greeting and READY (Socket-Type DEALER or ROUTER) on a fresh
 * connection, whose buffer takes their 90 bytes at once. */
static bool s_greet(int fd, bool router)
{
    uint8_t out[64 + 2 + 64] = { 0xFF, 0, 0, 0, 0, 0, 0, 0, 0, 0x7F, 3, 0, 'N', 'U', 'L', 'L' };
    /* READY: command, short; its name, then Socket-Type */
    static const char ready[] = "\x05READY\x0bSocket-Type\x00\x00\x00\x06";
    size_t rlen = sizeof ready - 1;
    out[64] = 0x04;
    out[65] = (uint8_t) (rlen + 6);
    memcpy(out + 66, ready, rlen);
    memcpy(out + 66 + rlen, router ? "ROUTER" : "DEALER", 6);
    return send(fd, out, 66 + rlen + 6, MSG_NOSIGNAL) == (ssize_t) (66 + rlen + 6);
}

/* The greeting and READY both ways on a connected fd (non-blocking). */
static bool s_handshake(int fd, int ms)
{
    if (!s_greet(fd, false))
        return false;
    int64_t deadline = zt_now_ms() + ms;
    uint8_t g[64], h[9];
    if (!s_read_exact(fd, g, 64, deadline) || g[0] != 0xFF || g[9] != 0x7F || g[10] < 3 ||
        memcmp(g + 12, "NULL\0", 5))
        return false;
    if (!s_read_exact(fd, h, 2, deadline) || !(h[0] & 0x04))
        return false;
    uint64_t len = h[1];
    if (h[0] & 0x02) {
        if (!s_read_exact(fd, h + 2, 7, deadline))
            return false;
        len = h[1];
        for (int i = 2; i < 9; i++)
            len = len << 8 | h[i];
    }
    uint8_t body[512];
    if (len < 6 || len > sizeof body || !s_read_exact(fd, body, (size_t) len, deadline))
        return false;
    return body[0] == 5 && !memcmp(body + 1, "READY", 5); /* an ERROR: the guard refused us */
}

static int s_connect_one(zt_zmtp_t *self)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *ai = NULL;
    if (getaddrinfo(self->host, self->port, &hints, &ai) != 0 || !ai)
        return -1;
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    bool ok = fd >= 0;
    if (ok && connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        ok = errno == EINPROGRESS && zt_wait_fd(fd, POLLOUT, CONNECT_WAIT_MS) > 0;
        int err = 0;
        socklen_t el = sizeof err;
        ok = ok && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0;
    }
    freeaddrinfo(ai);
    int one = 1;
    if (ok)
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (ok && !s_handshake(fd, (int) zt_knob_int(ZT_KNOB_HANDSHAKE_MS)))
        ok = false;
    if (!ok && fd >= 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

bool zt_zmtp_poke(zt_zmtp_t *self)
{
    if (!self || self->up || self->server || zt_now_ms() - self->tried_ms < RECONNECT_MS)
        return false;
    self->tried_ms = zt_now_ms();
    int fd = s_connect_one(self);
    if (fd < 0)
        return false;
    dup2(fd, self->fd);
    close(fd);
    self->up = true;
    zt_debug("%s: connected", self->endpoint);
    return true;
}

/* An end with its buffers and its two eventfds, no descriptor yet. */
static zt_zmtp_t *s_make(bool client)
{
    zt_zmtp_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    self->fd = -1;
    /* an accepted end needs neither (its server polls an epoll set): one
     * descriptor a connection */
    self->idle_fd = client ? eventfd(0, EFD_CLOEXEC) : -1;
    self->ready_fd = client ? eventfd(1, EFD_CLOEXEC) : -1;
    self->in = malloc(IN_BYTES);
    self->limit = zt_frame_limit();
    self->tried_ms = -RECONNECT_MS;
    if ((client && (self->idle_fd < 0 || self->ready_fd < 0)) || !self->in)
        zt_zmtp_destroy(&self);
    return self;
}

zt_zmtp_t *zt_zmtp_new(const char *endpoint)
{
    if (!endpoint || (strstr(endpoint, "://") && strncmp(endpoint, "tcp://", 6)))
        return NULL;
    const char *hp = strncmp(endpoint, "tcp://", 6) ? endpoint : endpoint + 6, *colon = strrchr(hp, ':');
    if (!colon || colon == hp || (size_t) (colon - hp) >= 256 || strlen(colon + 1) >= 16)
        return NULL;
    zt_zmtp_t *self = s_make(true);
    if (!self)
        return NULL;
    self->greet = 2;
    snprintf(self->endpoint, sizeof self->endpoint, "tcp://%s", hp);
    size_t hl = (size_t) (colon - hp);
    if (hp[0] == '[' && hl >= 2 && hp[hl - 1] == ']') { /* [v6] */
        hp++;
        hl -= 2;
    }
    memcpy(self->host, hp, hl);
    snprintf(self->port, sizeof self->port, "%s", colon + 1);
    self->fd = fcntl(self->idle_fd, F_DUPFD_CLOEXEC, 0);
    if (self->fd < 0)
        zt_zmtp_destroy(&self);
    return self;
}

zt_zmtp_t *zt_zmtp_accept(int fd, const char *peer)
{
    zt_zmtp_t *self = s_make(false);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (!self || !s_greet(fd, true)) {
        zt_zmtp_destroy(&self);
        close(fd);
        return NULL;
    }
    snprintf(self->endpoint, sizeof self->endpoint, "tcp://%s", peer);
    self->fd = fd;
    self->up = self->server = true;
    self->since_ms = zt_now_ms();
    return self;
}

bool zt_zmtp_greeted(const zt_zmtp_t *self) { return self->greet == 2; }
int64_t zt_zmtp_since(const zt_zmtp_t *self) { return self->since_ms; }
bool zt_zmtp_waiting(const zt_zmtp_t *self) { return self->ndone > 0; }

void zt_zmtp_destroy(zt_zmtp_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zt_zmtp_t *self = *self_p;
    if (self->fd >= 0)
        s_down(self, "closed");
    for (int i = 0; i < self->ndone; i++) {
        s_msg_t *m = &self->done[(self->done_first + i) % self->done_cap];
        for (int j = 0; j < m->n; j++)
            zmq_msg_close(&m->parts[j]);
    }
    free(self->done);
    free(self->q);
    zt_bufpool_destroy(&self->pool); /* after what waited (zt_zmtp_down): none is lent now */
    if (self->fd >= 0)
        close(self->fd);
    if (self->idle_fd >= 0)
        close(self->idle_fd);
    if (self->ready_fd >= 0)
        close(self->ready_fd);
    free(self->in);
    free(self);
    *self_p = NULL;
}

int zt_zmtp_fd(const zt_zmtp_t *self) { return self->fd; }
const char *zt_zmtp_endpoint(const zt_zmtp_t *self) { return self->endpoint; }
int zt_zmtp_poll_fd(const zt_zmtp_t *self) { return self->ndone > 0 ? self->ready_fd : self->fd; }
bool zt_zmtp_connected(const zt_zmtp_t *self) { return self && self->up; }

/* ------------------------------------------------------------ receiving */

/* Writes what waits without waiting. false: the connection broke. */
static bool s_flush(zt_zmtp_t *self)
{
    const char *why = self->up ? zt_zmtp_out_write(self) : NULL;
    if (why)
        s_down(self, why);
    return !why;
}

/* A frame is whole: part of the message (or a command, let go). */
static void s_frame_done(zt_zmtp_t *self, zmq_msg_t *f, bool more, bool cmd)
{
    if (cmd) { /* commands (we speak ZMTP 3.0: no heartbeats) are let go */
        if (self->greet == 1 && zmq_msg_size(f) >= 6 && !memcmp(zmq_msg_data(f), "\x05READY", 6))
            self->greet = 2;
        zmq_msg_close(f);
        return;
    }
    if (self->greet < 2) { /* a message before the client's READY: not ZMTP */
        zmq_msg_close(f);
        self->dropping = true;
        self->bad = true;
        return;
    }
    if (!self->dropping && self->cur.n < MAX_PARTS) {
        zmq_msg_init(&self->cur.parts[self->cur.n]);
        zmq_msg_move(&self->cur.parts[self->cur.n++], f);
    }
    else
        self->dropping = true;
    zmq_msg_close(f);
    if (more)
        return;
    if (self->dropping) {
        for (int i = 0; i < self->cur.n; i++)
            zmq_msg_close(&self->cur.parts[i]);
        self->cur.n = 0;
        self->dropping = false;
        return;
    }
    if (self->ndone == self->done_cap) {
        int cap = self->done_cap ? 2 * self->done_cap : 8;
        s_msg_t *d = malloc((size_t) cap * sizeof *d);
        for (int i = 0; i < self->ndone; i++)
            d[i] = self->done[(self->done_first + i) % self->done_cap];
        free(self->done);
        self->done = d;
        self->done_cap = cap;
        self->done_first = 0;
    }
    self->done[(self->done_first + self->ndone++) % self->done_cap] = self->cur;
    self->cur.n = 0;
}

/* Parses what in[] holds into frames; a large frame's body is set up to be
 * read into its place. false: not ZMTP, or a frame past the limit. */
static bool s_parse(zt_zmtp_t *self)
{
    if (self->greet == 0 && self->b - self->a >= 64) { /* a server end: the client's greeting */
        const uint8_t *g = self->in + self->a;
        if (g[0] != 0xFF || g[9] != 0x7F || g[10] < 3 || memcmp(g + 12, "NULL\0", 5))
            return false;
        self->a += 64;
        self->greet = 1;
    }
    while (self->greet > 0 && !self->bad && !self->in_body && self->b - self->a >= 2) {
        const uint8_t *p = self->in + self->a;
        uint8_t flags = p[0];
        size_t hl = flags & 0x02 ? 9 : 2;
        if (flags & 0xF8)
            return false;
        if (self->b - self->a < hl)
            break;
        uint64_t len = p[1];
        for (size_t i = 2; i < hl; i++)
            len = len << 8 | p[i];
        if (len > (uint64_t) self->limit || (self->greet < 2 && len > 512))
            return false; /* past the limit, or a stranger's large frame before its READY */
        bool more = flags & 0x01, cmd = flags & 0x04;
        size_t have = self->b - self->a - hl;
        if (len <= DIRECT_BYTES || len <= have) { /* whole in the buffer (or it will be) */
            if (have < len)
                break;
            zmq_msg_t f;
            zmq_msg_init_size(&f, (size_t) len);
            memcpy(zmq_msg_data(&f), p + hl, (size_t) len);
            self->a += hl + (size_t) len;
            s_frame_done(self, &f, more, cmd);
            continue;
        }
        /* large: read straight into a frame of its own, what the buffer has first */
        if (zmq_msg_init_size(&self->body, (size_t) len) != 0)
            return false;
        memcpy(zmq_msg_data(&self->body), p + hl, have);
        self->body_len = (size_t) len;
        self->body_have = have;
        self->body_more = more;
        self->body_cmd = cmd;
        self->in_body = true;
        self->bodies = true;
        self->a = self->b = 0;
    }
    if (self->bad)
        return false;
    if (self->a == self->b)
        self->a = self->b = 0;
    else if (self->a > IN_BYTES / 2) { /* room for the rest of a header */
        memmove(self->in, self->in + self->a, self->b - self->a);
        self->b -= self->a;
        self->a = 0;
    }
    return true;
}

/* Reads what the socket has now (never waits). false: the connection
 * broke (it is closed). */
static bool s_pump(zt_zmtp_t *self)
{
    for (int rounds = 0; self->up && rounds < 64; rounds++) {
        ssize_t r;
        if (self->in_body) {
            r = recv(self->fd, (char *) zmq_msg_data(&self->body) + self->body_have,
                     self->body_len - self->body_have, MSG_DONTWAIT);
            if (r > 0 && (self->body_have += (size_t) r) == self->body_len) {
                self->in_body = false;
                s_frame_done(self, &self->body, self->body_more, self->body_cmd);
                if (!s_parse(self)) {
                    s_down(self, "not ZMTP, or a frame past the limit");
                    return false;
                }
            }
        }
        else {
            /* While large frames come, a read stops short of the next
             * one's bytes, which then go straight to their place (read
             * into in[], each would be copied there): a message that
             * completes with no large frame reads in full again. */
            size_t room = IN_BYTES - self->b;
            int ndone = self->ndone;
            r = recv(self->fd, self->in + self->b, self->bodies && room > HEAD_BYTES ? HEAD_BYTES : room,
                     MSG_DONTWAIT);
            if (r > 0) {
                self->b += (size_t) r;
                if (!s_parse(self)) {
                    s_down(self, "not ZMTP, or a frame past the limit");
                    return false;
                }
                if (!self->in_body && self->ndone > ndone)
                    self->bodies = false;
            }
        }
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            s_down(self, r == 0 ? "the peer closed it" : strerror(errno));
            return false;
        }
        if (r < 0 || self->ndone > 0)
            break;
    }
    return true;
}

int zt_zmtp_recv(zt_zmtp_t *self, zmq_msg_t *parts, int max)
{
    if (self->up && self->nq > 0)
        s_flush(self);
    if (self->ndone == 0 && self->up)
        s_pump(self);
    while (self->ndone > 0) {
        s_msg_t *m = &self->done[self->done_first];
        self->done_first = (self->done_first + 1) % self->done_cap;
        self->ndone--;
        if (m->n > max) { /* more parts than the caller takes: dropped */
            for (int i = 0; i < m->n; i++)
                zmq_msg_close(&m->parts[i]);
            continue;
        }
        for (int i = 0; i < m->n; i++) {
            zmq_msg_init(&parts[i]);
            zmq_msg_move(&parts[i], &m->parts[i]);
            zmq_msg_close(&m->parts[i]);
        }
        return m->n;
    }
    return 0;
}

/* ------------------------------------------------------------ sending */

/* Until at most keep bytes wait, reading what comes meanwhile (so that
 * neither end waits on the other). false: the connection broke. */
static bool s_drain_to(zt_zmtp_t *self, size_t keep)
{
    while (self->up && self->out > keep) {
        if (!s_flush(self))
            return false;
        if (self->out <= keep)
            break;
        if (zt_stop_requested()) {
            s_down(self, "stopping");
            return false;
        }
        int ev = zt_wait_fd(self->fd, POLLOUT | POLLIN, 100);
        if (ev > 0 && (ev & (POLLIN | POLLHUP | POLLERR)) && !s_pump(self))
            return false;
    }
    return self->up;
}

bool zt_zmtp_pending(const zt_zmtp_t *self) { return self && self->up && self->nq > 0; }

short zt_zmtp_events(const zt_zmtp_t *self)
{
    return (short) (ZMQ_POLLIN | (zt_zmtp_pending(self) ? ZMQ_POLLOUT : 0));
}

int zt_zmtp_sendv(zt_zmtp_t *self, const struct iovec *frames, zmq_msg_t *const *owners, int n)
{
    if (!self->up || n < 1 || n > MAX_PARTS)
        return ZT_EIO;
    struct iovec iov[2 * MAX_PARTS];
    zmq_msg_t *own[2 * MAX_PARTS];
    uint8_t hdr[MAX_PARTS][9];
    int ni = 0;
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        uint64_t len = frames[i].iov_len;
        uint8_t more = i + 1 < n ? 0x01 : 0;
        size_t hl;
        if (len < 256) {
            hdr[i][0] = more;
            hdr[i][1] = (uint8_t) len;
            hl = 2;
        }
        else {
            hdr[i][0] = more | 0x02;
            for (int j = 0; j < 8; j++)
                hdr[i][1 + j] = (uint8_t) (len >> (56 - 8 * j));
            hl = 9;
        }
        own[ni] = NULL;
        iov[ni++] = (struct iovec) { hdr[i], hl };
        if (len) {
            own[ni] = owners ? owners[i] : NULL;
            iov[ni++] = frames[i];
        }
        total += hl + len;
    }
    /* what waits goes first; past OUT_MAX the caller waits for the peer */
    if (!s_flush(self) || !s_drain_to(self, OUT_MAX))
        return ZT_EIO;
    struct iovec *v = iov;
    zmq_msg_t **o = own;
    if (self->nq == 0) { /* nothing waits: straight from the caller's bytes */
        self->quiet_since = zt_now_ms();
        struct msghdr mh = { .msg_iov = v, .msg_iovlen = (size_t) ni };
        ssize_t w = sendmsg(self->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            s_down(self, strerror(errno));
            return ZT_EIO;
        }
        for (size_t left = w > 0 ? (size_t) w : 0; left > 0;) {
            if (left >= v->iov_len) {
                left -= v->iov_len;
                v++, o++;
                ni--;
            }
            else {
                v->iov_base = (char *) v->iov_base + left;
                v->iov_len -= left;
                left = 0;
            }
        }
        total = 0;
        for (int i = 0; i < ni; i++)
            total += v[i].iov_len;
    }
    /* the rest waits, written as the peer takes it (zt_zmtp_recv,
     * zt_zmtp_flush, the next send), so the caller goes on to its others */
    if (total > 0 && !zt_zmtp_out_queue(self, v, o, ni)) {
        s_down(self, "out of memory");
        return ZT_EIO;
    }
    return ZT_OK;
}

bool zt_zmtp_flush(zt_zmtp_t *self) { return !self || !self->up || s_flush(self); }

bool zt_zmtp_drain(zt_zmtp_t *self) { return !self || !self->up || s_drain_to(self, 0); }

void zt_zmtp_set_limit(zt_zmtp_t *self, int64_t limit) { self->limit = limit; }
