/* zt_bulk: the one bulk transport (see zt_bulk.h). */
#include "wire/zt_bulk.h"
#include "wire/zt_auth.h"
#include "wire/zt_bulk_direct.h"
#include "wire/zt_bufpool.h"
#include "base/zt_util.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_knobs.h"
#include "ztrain/zt_log.h"
#include <assert.h>
#include <stdlib.h>
#include <string.h>

struct zt_bulk_t {
    zsock_t *sock;      /* DEALER, or NULL on a direct end */
    zt_zmtp_t *zmtp;    /* the direct end of the caller's thread, or NULL */
    zt_stream_t *st;    /* the sealed stream, or NULL: plain */
    uint64_t drops;
    bool was_up, lost;  /* a plain direct end: connected once; a message lost since */
    bool fresh;         /* ... connected again after a loss, not told yet (zt_bulk_tend) */
};

struct zt_bulk_server_t {
    zsock_t *router;
    zt_streams_t *streams; /* a sealing job's TCP clients' streams, or NULL */
    zt_bufpool_t *pool;    /* plain copies (zt_bulk_server_pool_copies), or NULL: fresh ones */
    zt_team_t *team;       /* opens sealed messages with the caller (zt_bulk_server_threads), or NULL */
    zt_direct_t *direct;   /* the TCP port on the caller's thread (zt_bulk_bind_direct), or NULL */
    bool turn;             /* whose message is taken first: the router's or the direct end's */
};

/* ------------------------------------------------------------ client */

/* How far ZT_BULK_DIRECT goes: 0 (off), ZT_BULK_DIRECT_ON or _ALL. */
static int s_direct_level(void)
{
    const char *knob = zt_knob_str(ZT_KNOB_BULK_DIRECT);
    return !strcmp(knob, "all") ? ZT_BULK_DIRECT_ALL : !strcmp(knob, "on") ? ZT_BULK_DIRECT_ON : 0;
}

zt_bulk_t *zt_bulk_connect(zt_plane_t plane, const char *endpoint, bool direct)
{
    zt_bulk_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    zt_stream_cfg_t cfg;
    /* a sealing job's sockets are bulk ones (no CURVE); a peer on this host
     * comes over the ipc twin, in the clear */
    bool sealing = zt_stream_cfg_load(&cfg), remote = !zt_data_is_local(endpoint), seal = sealing && remote;
    /* a plain job's server on another host speaks ZMTP's NULL mechanism
     * too (no CURVE: security off): the same end, without the seal */
    bool plain = !sealing && remote && zt_auth_plain();
    if ((seal || plain) && direct && s_direct_level() >= ZT_BULK_DIRECT_ON) {
        /* no ZeroMQ I/O thread between this thread and the kernel (zt_zmtp.h) */
        if ((self->zmtp = zt_zmtp_new(endpoint)) && seal &&
            !(self->st = zt_stream_connect_zmtp(&cfg, self->zmtp, endpoint)))
            zt_zmtp_destroy(&self->zmtp);
        if (self->zmtp)
            zt_data_say_route(seal ? ZT_PLANE_BULK : plane, endpoint, ", on this thread (ZT_BULK_DIRECT)");
    }
    else if ((self->sock = zt_sock_dealer(sealing ? ZT_PLANE_BULK : plane, endpoint)) && seal &&
             !(self->st = zt_stream_connect(&cfg, zsock_resolve(self->sock))))
        zt_sock_destroy(&self->sock); /* a sealing job's bytes to another host go sealed or not at all */
    memset(cfg.secret, 0, sizeof cfg.secret);
    if (!self->sock && !self->zmtp)
        zt_bulk_destroy(&self, 0);
    return self;
}

void zt_bulk_destroy(zt_bulk_t **self_p, int linger_ms)
{
    if (!self_p || !*self_p)
        return;
    zt_bulk_t *self = *self_p;
    if (self->sock)
        zsock_set_linger(self->sock, linger_ms);
    /* the socket first: what it still holds is dropped (or sent), which
     * gives the stream's and the way's pooled buffers back */
    zt_sock_destroy(&self->sock);
    zt_zmtp_destroy(&self->zmtp);
    zt_stream_destroy(&self->st);
    free(self);
    *self_p = NULL;
}

bool zt_bulk_sealed(const zt_bulk_t *self) { return self && self->st; }
/* A plain direct end: connected (a connection tried now when there is
 * none); a new one after a loss is to be told (zt_bulk_tend). */
static bool s_plain_up(zt_bulk_t *self)
{
    if (zt_zmtp_poke(self->zmtp)) {
        self->fresh = self->fresh || self->was_up || self->lost;
        self->was_up = true;
        self->lost = false;
    }
    return zt_zmtp_connected(self->zmtp);
}

bool zt_bulk_ready(zt_bulk_t *self)
{
    if (self && !self->st && self->zmtp) { /* plain on this thread: once connected */
        bool up = s_plain_up(self);
        self->lost = self->lost || !up; /* the caller holds its message back: told when connected */
        return up;
    }
    return self && (!self->st || zt_stream_ready(self->st));
}
const char *zt_bulk_unopened(const zt_bulk_t *self)
{
    return self && self->st && !zt_stream_ready(self->st)
               ? "; its sealed stream is not open (a server of another job, or one that seals with another "
                 "ZT_SEAL_CIPHER: its log says which)"
               : "";
}
bool zt_bulk_unconnected(const zt_bulk_t *self) { return self && self->zmtp && !zt_zmtp_connected(self->zmtp); }
uint64_t zt_bulk_drops(const zt_bulk_t *self) { return self ? self->drops : 0; }

bool zt_bulk_writable(zt_bulk_t *self)
{
    return self->zmtp || (zsock_events(self->sock) & ZMQ_POLLOUT);
}

void zt_bulk_revive(zt_bulk_t *self, int stale_ms, int unheard_ms)
{
    if (!self || !self->st)
        return;
    if (stale_ms > 0)
        zt_stream_reopen_stale(self->st, stale_ms);
    if (unheard_ms > 0)
        zt_stream_reopen_unheard(self->st, unheard_ms);
}

int zt_bulk_wait_ready(zt_bulk_t *self, int timeout_ms)
{
    return self->st ? zt_stream_wait_ready(self->st, timeout_ms) : ZT_OK;
}

zmq_pollitem_t zt_bulk_item(zt_bulk_t *self)
{
    if (self->zmtp)
        return (zmq_pollitem_t) { NULL, zt_zmtp_poll_fd(self->zmtp), zt_zmtp_events(self->zmtp), 0 };
    return (zmq_pollitem_t) { zsock_resolve(self->sock), 0, ZMQ_POLLIN, 0 };
}

bool zt_bulk_tend(zt_bulk_t *self, zmq_pollitem_t *item)
{
    if (!self)
        return false;
    if (self->st) {
        zt_stream_tend(self->st, item);
        return false;
    }
    if (!self->zmtp)
        return false;
    /* a plain direct end: what waits, then the connection made again */
    zt_zmtp_flush(self->zmtp);
    s_plain_up(self);
    if (item) {
        item->fd = zt_zmtp_poll_fd(self->zmtp);
        item->events = zt_zmtp_events(self->zmtp);
    }
    bool fresh = self->fresh;
    self->fresh = false;
    return fresh;
}

void zt_bulk_flush(zt_bulk_t *self)
{
    if (self && self->zmtp)
        zt_zmtp_drain(self->zmtp);
}

static void s_release(void *data, void *hint)
{
    (void) data;
    atomic_fetch_sub((atomic_int *) hint, 1);
}

/* The payload frame of a plain message: bytes lent (counted in lent), a
 * pooled copy, or (no pool) a copy of its own. 0, or -1. */
static int s_payload(zt_bufpool_t *pool, zmq_msg_t *pm, const void *payload, size_t bytes, atomic_int *lent)
{
    if (lent && bytes) {
        atomic_fetch_add(lent, 1);
        return zmq_msg_init_data(pm, (void *) payload, bytes, s_release, lent);
    }
    if (pool)
        return zt_bufpool_msg(pool, pm, payload, bytes);
    if (zmq_msg_init_size(pm, bytes) != 0)
        return -1;
    if (bytes)
        memcpy(zmq_msg_data(pm), payload, bytes);
    return 0;
}

/* A plain message on a ZMTP end (a client's, or a server's client's):
 * the header and n frames in one writev, frame i waiting by reference
 * when owners (NULL: none) has owners[i], else copied if the kernel does
 * not take it at once. ZT_OK, or ZT_EIO: no connection, or it broke (lost, as on a
 * DEALER whose server went away: the callers' resend rules send it again). */
static int s_plain_sendv(zt_zmtp_t *end, const zt_msg_t *m, const struct iovec *frames, zmq_msg_t *const *owners,
                         int n)
{
    zframe_t *h = zt_msg_encode(m);
    if (!h || n > 8) {
        zframe_destroy(&h);
        return ZT_EIO;
    }
    struct iovec f[9] = { { zframe_data(h), zframe_size(h) } };
    zmq_msg_t *own[9] = { NULL };
    for (int i = 0; i < n; i++) {
        f[1 + i] = frames[i];
        own[1 + i] = owners ? owners[i] : NULL;
    }
    int rc = zt_zmtp_sendv(end, f, own, 1 + n);
    zframe_destroy(&h);
    return rc;
}

/* A plain message on this thread's direct end, copied if it waits:
 * nothing is lent. (Lent bytes waiting by reference would keep a caller
 * that waits for its lent counter without writing this end's queue, as the
 * ring does for the block it sends, from ever getting them back.) */
static int s_send_plain_zmtp(zt_bulk_t *self, const zt_msg_t *m, const void *payload, size_t bytes)
{
    s_plain_up(self);
    int rc = s_plain_sendv(self->zmtp, m, &(struct iovec) { (void *) payload, bytes }, NULL, payload ? 1 : 0);
    if (rc == ZT_EIO)
        self->lost = true;
    return rc == ZT_EIO ? ZT_OK : rc;
}

int zt_bulk_send(zt_bulk_t *self, const zt_msg_t *m, const void *payload, size_t bytes, atomic_int *lent)
{
    if (self->st) /* sealed from the caller's bytes into the send buffer: nothing is lent */
        return zt_stream_send(self->st, m, payload, payload ? bytes : 0);
    if (self->zmtp)
        return s_send_plain_zmtp(self, m, payload, bytes);
    zmq_msg_t pm; /* made first: a header never goes out without the payload it announces */
    if (payload && s_payload(NULL, &pm, payload, bytes, lent) != 0)
        return ZT_ENOMEM;
    zframe_t *h = zt_msg_encode(m);
    int rc = h && zframe_send(&h, self->sock, payload ? ZFRAME_MORE : 0) == 0 ? ZT_OK : ZT_EIO;
    zframe_destroy(&h);
    if (payload && (rc != ZT_OK || zmq_msg_send(&pm, zsock_resolve(self->sock), 0) < 0)) {
        zmq_msg_close(&pm); /* a lent payload is given back */
        rc = ZT_EIO;
    }
    return rc;
}

int zt_bulk_recv(zt_bulk_t *self, zmq_msg_t *parts, int max)
{
    return self->zmtp ? zt_zmtp_recv(self->zmtp, parts, max) : zt_msg_recv_parts(zsock_resolve(self->sock), parts, max);
}

int zt_bulk_open(zt_bulk_t *self, zmq_msg_t *parts, int *np, void *into, size_t into_len)
{
    if (!self->st || *np == 0)
        return ZT_OK;
    int rc = into ? zt_stream_recv_into(self->st, parts, np, into, into_len) : zt_stream_recv(self->st, parts, np);
    if (rc != ZT_OK)
        self->drops++;
    return rc;
}

/* ------------------------------------------------------------ server */

/* The server: a router at endpoint, or with direct (a sealing job's TCP
 * endpoint, its peers on other hosts) the port served on the caller's
 * thread and a router at its twin. */
static zt_bulk_server_t *s_bind(zt_plane_t plane, const char *endpoint, int *port_p, zt_bulk_direct_t from)
{
    zt_bulk_server_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    zt_stream_cfg_t cfg;
    bool seal = zt_stream_cfg_load(&cfg), plain = !seal && zt_auth_plain(); /* plain: ZMTP's NULL mechanism */
    zt_plane_t as = seal ? ZT_PLANE_BULK : plane;
    int port = 0;
    int rule = (seal || plain) && from && s_direct_level() >= (int) from ? zt_tcp_peer_rule() : -1; /* -1: held, or not asked */
    if (rule >= 0 && (self->direct = zt_direct_listen(endpoint, rule, &port))) {
        char actual[300];
        snprintf(actual, sizeof actual, "%.*s:%d", (int) (strrchr(endpoint, ':') - endpoint), endpoint, port);
        if (port_p)
            *port_p = port;
        self->router = zt_sock_router_twin(as, actual);
        zt_data_say_route(as, actual, ", served on this thread (ZT_BULK_DIRECT)");
    }
    else
        self->router = zt_sock_router(as, endpoint, port_p);
    if (self->router && seal && !(self->streams = zt_streams_new(&cfg, zsock_resolve(self->router))))
        zt_error("%s: cannot hold sealed streams", endpoint);
    memset(cfg.secret, 0, sizeof cfg.secret);
    if (self->direct)
        zt_direct_streams(self->direct, self->streams);
    if (!self->router || (seal && !self->streams))
        zt_bulk_server_destroy(&self);
    return self;
}

zt_bulk_server_t *zt_bulk_bind(zt_plane_t plane, const char *endpoint, int *port_p)
{
    return s_bind(plane, endpoint, port_p, 0);
}

zt_bulk_server_t *zt_bulk_bind_direct(zt_plane_t plane, const char *endpoint, int *port_p, zt_bulk_direct_t from)
{
    return s_bind(plane, endpoint, port_p, from);
}

void zt_bulk_server_destroy(zt_bulk_server_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zt_bulk_server_t *self = *self_p;
    zt_team_destroy(&self->team);
    zt_direct_destroy(&self->direct); /* its connections let their streams go */
    zt_streams_destroy(&self->streams);
    zt_sock_destroy(&self->router);
    zt_bufpool_destroy(&self->pool);
    free(self);
    *self_p = NULL;
}

void *zt_bulk_server_socket(zt_bulk_server_t *self) { return zsock_resolve(self->router); }

int zt_bulk_server_items(zt_bulk_server_t *self, zmq_pollitem_t *items)
{
    items[0] = (zmq_pollitem_t) { zsock_resolve(self->router), 0, ZMQ_POLLIN, 0 };
    if (!self->direct)
        return 1;
    items[1] = (zmq_pollitem_t) { NULL, zt_direct_poll_fd(self->direct), ZMQ_POLLIN, 0 };
    return 2;
}

/* One message of the router's or the direct end's, in turns: its parts'
 * count, 0 when none waits. */
static int s_take(zt_bulk_server_t *self, zmq_msg_t *parts, int max)
{
    if (!self->direct)
        return zt_msg_recv_parts(zsock_resolve(self->router), parts, max);
    for (int k = 0; k < 2; k++) {
        self->turn = !self->turn;
        int n = self->turn ? zt_direct_recv(self->direct, parts, max)
                           : zt_msg_recv_parts(zsock_resolve(self->router), parts, max);
        if (n > 0)
            return n;
    }
    return 0;
}
bool zt_bulk_server_seals(const zt_bulk_server_t *self) { return self->streams; }

int zt_bulk_server_pool_copies(zt_bulk_server_t *self)
{
    if (!self->pool && !(self->pool = zt_bufpool_new()))
        return ZT_ENOMEM;
    return ZT_OK;
}

int zt_bulk_server_recv(zt_bulk_server_t *self, zmq_msg_t *parts, int max)
{
    return zt_bulk_server_recv_into(self, parts, max, NULL, NULL);
}

/* Whether n received parts came over a sealed stream: a job that seals,
 * and not this host's peer over the ipc twin. */
static bool s_sealed_in(const zt_bulk_server_t *self, zmq_msg_t *parts, int n)
{
    return self->streams && !(n >= 2 && zt_frame_over_ipc(&parts[1]));
}

int zt_bulk_server_recv_into(zt_bulk_server_t *self, zmq_msg_t *parts, int max,
                             void *(*where)(void *arg, const void *hdr, size_t hlen, size_t bytes), void *arg)
{
    int n = s_take(self, parts, max);
    if (n == 0)
        return ZT_ETIMEDOUT;
    if (!s_sealed_in(self, parts, n))
        return n; /* this host's peer, or a job that does not seal */
    /* [id][header][seal][payload]: the header travels in the clear */
    size_t bytes = n == 4 ? zmq_msg_size(&parts[3]) : 0;
    void *into = where && n == 4 ? where(arg, zmq_msg_data(&parts[1]), zmq_msg_size(&parts[1]), bytes) : NULL;
    zt_stream_t *from;
    return zt_streams_recv_into(self->streams, parts, &n, &from, into, into ? bytes : 0) == ZT_OK ? n : ZT_EPROTO;
}

int zt_bulk_server_threads(zt_bulk_server_t *self, int threads)
{
    zt_team_destroy(&self->team);
    if (threads > 1 && self->streams && !(self->team = zt_team_new(threads - 1, zt_seal_thread_done)))
        return ZT_ENOMEM;
    return ZT_OK;
}

int zt_bulk_server_recv_many(zt_bulk_server_t *self, zt_bulk_in_t *in, int max)
{
    if (!self->team)
        max = 1;
    if (max > ZT_BULK_MANY)
        max = ZT_BULK_MANY;
    zt_streams_item_t items[ZT_BULK_MANY];
    int got = 0, sealed = 0;
    for (; got < max; got++) {
        zt_bulk_in_t *m = &in[got];
        if ((m->n = s_take(self, m->parts, 4)) == 0)
            break;
        if (s_sealed_in(self, m->parts, m->n))
            items[sealed++] = (zt_streams_item_t) { m->parts, m->n };
    }
    if (sealed)
        zt_streams_open_many(self->streams, items, sealed, self->team);
    for (int i = 0, j = 0; i < got && j < sealed; i++)
        if (in[i].parts == items[j].parts)
            in[i].n = items[j++].n;
    return got;
}

bool zt_bulk_server_sealed_to(zt_bulk_server_t *self, zmq_msg_t *id)
{
    return self->streams && zt_streams_find(self->streams, id);
}

/* A plain job's client on the server's own port (zt_direct): its end, or
 * NULL (the router's, or a sealing job's). */
static zt_zmtp_t *s_plain_end(zt_bulk_server_t *self, zmq_msg_t *id)
{
    return self->direct && !self->streams ? zt_direct_end(self->direct, zmq_msg_data(id), zmq_msg_size(id)) : NULL;
}

int zt_bulk_reply(zt_bulk_server_t *self, zmq_msg_t *id, const zt_msg_t *m, const void *payload, size_t bytes,
                  atomic_int *lent)
{
    zt_stream_t *to = self->streams ? zt_streams_find(self->streams, id) : NULL;
    if (to) /* sealed from the caller's bytes into the send buffer */
        return zt_streams_send(self->streams, to, m, payload, payload ? bytes : 0);
    zt_zmtp_t *end = s_plain_end(self, id);
    if (end) { /* on the client's own connection, from the caller's bytes (copied if they wait) */
        int rc = s_plain_sendv(end, m, &(struct iovec) { (void *) payload, bytes }, NULL, payload ? 1 : 0);
        return rc == ZT_EIO ? ZT_OK : rc; /* a client gone: it asks again */
    }
    zmq_msg_t pm;
    if (payload && s_payload(self->pool, &pm, payload, bytes, lent) != 0)
        return ZT_ENOMEM;
    return zt_msg_send_routed(zsock_resolve(self->router), id, m, &pm, payload ? 1 : 0);
}

int zt_bulk_reply_frames(zt_bulk_server_t *self, zmq_msg_t *id, const zt_msg_t *m, zmq_msg_t *frames, int n)
{
    zt_stream_t *to = self->streams ? zt_streams_find(self->streams, id) : NULL;
    zt_zmtp_t *end = to ? NULL : s_plain_end(self, id);
    if (end) {
        struct iovec f[8];
        zmq_msg_t *own[8];
        for (int i = 0; i < n && i < 8; i++) {
            f[i] = (struct iovec) { zmq_msg_data(&frames[i]), zmq_msg_size(&frames[i]) };
            own[i] = &frames[i];
        }
        int rc = n <= 8 ? s_plain_sendv(end, m, f, own, n) : ZT_EINVAL;
        zt_msg_close_parts(frames, n);
        return rc == ZT_EIO ? ZT_OK : rc;
    }
    if (!to)
        return zt_msg_send_routed(zsock_resolve(self->router), id, m, frames, n);
    const void *p[8];
    size_t sz[8];
    for (int i = 0; i < n && i < 8; i++) {
        p[i] = zmq_msg_data(&frames[i]);
        sz[i] = zmq_msg_size(&frames[i]);
    }
    int rc = n <= 8 ? zt_streams_sendv(self->streams, to, m, p, sz, n) : ZT_EINVAL;
    zt_msg_close_parts(frames, n);
    return rc;
}

int zt_bulk_reply_shared(zt_bulk_server_t *self, zmq_msg_t *id, const zt_msg_t *m, const void *payload,
                         size_t bytes, atomic_int *lent, zt_bulk_shared_t *shared)
{
    zt_stream_t *to = self->streams && payload && bytes ? zt_streams_find(self->streams, id) : NULL;
    if (!to)
        return zt_bulk_reply(self, id, m, payload, bytes, lent);
    if (!shared->sh.made && zt_streams_seal_shared(self->streams, m, payload, bytes, &shared->sh) != ZT_OK)
        return ZT_EIO;
    return zt_streams_send_shared(self->streams, to, &shared->sh);
}

void zt_bulk_shared_close(zt_bulk_shared_t *shared) { zt_stream_shared_close(&shared->sh); }
