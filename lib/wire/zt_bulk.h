/* zt_bulk: the one way bulk bytes move between processes without shared
 * memory: parameter-server pushes and pulls, all-reduce pieces and sums, ring
 * blocks, the model sent to a rejoining replica, files.
 *
 * Callers hand it plaintext and get plaintext back; whether the bytes went
 * sealed is its business, decided once, when the way is made:
 * - in a job that seals its bulk data (zt_stream_cfg_load), a peer on
 *   another host is reached over a sealed stream (zt_stream: keys, nonces,
 *   replay and generation rules), on a bulk socket (no CURVE) or, with
 *   ZT_BULK_DIRECT on, on the caller's own thread (zt_zmtp); a server made
 *   by zt_bulk_bind_direct serves its TCP port on its own thread too
 *   (zt_bulk_direct: a parameter server's, and with ZT_BULK_DIRECT=all a
 *   reducer's);
 * - a peer on this host comes over the ipc:// twin, in the clear: only the
 *   user's own processes can reach the user's private ipc folder;
 * - any other job's sockets are the plane's (CURVE in a job); with
 *   security off (no CURVE) a peer on another host is reached plain on
 *   the same direct ends as a sealing job's, without the seal.
 *
 * A message is a header (zt_msg) and at most one payload on the way out
 * (several for a server's replies). A plain payload is lent to ZeroMQ when
 * the caller gives a counter (lent: raised now, lowered when ZeroMQ lets the
 * bytes go; the caller must not touch them until it is back), else copied
 * (into a pooled buffer on a server that asked for one:
 * zt_bulk_server_pool_copies). A sealed payload is sealed from the
 * caller's bytes into the send buffer: that pass is the copy, nothing is
 * lent.
 *
 * Received messages are handed on as [header][payload...] (a server's with
 * the client's routing id first). A sealed one is opened in place, or
 * straight into a place the caller names; one that does not open (a bad
 * tag, a replay, another job's, not sealed at all over TCP) is dropped and
 * counted, never handed on. */
#ifndef ZT_BULK_H
#define ZT_BULK_H
#include "wire/zt_stream.h"
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <zmq.h>

typedef struct zt_bulk_t zt_bulk_t;               /* a client's way to one server */
typedef struct zt_bulk_server_t zt_bulk_server_t; /* a server's socket and its clients' streams */

/* ------------------------------------------------------------ client */

/* A way to the server at endpoint ("host:port" or a full ZeroMQ endpoint)
 * of plane (ZT_PLANE_DATA, or ZT_PLANE_CONTROL for a server that shares the
 * control plane's keys). direct: a sealed way may run on the caller's thread
 * (ZT_BULK_DIRECT on): then the caller polls zt_bulk_item and calls
 * zt_bulk_tend each turn of its waits. NULL when it cannot be made. */
zt_bulk_t *zt_bulk_connect(zt_plane_t plane, const char *endpoint, bool direct);
/* Closes the way; what a ZeroMQ socket still holds goes within linger_ms
 * (0: dropped; a direct end's, zt_bulk_flush first). */
void zt_bulk_destroy(zt_bulk_t **self_p, int linger_ms);

/* Whether the bytes go sealed (a peer on another host, a sealing job). */
bool zt_bulk_sealed(const zt_bulk_t *self);
/* Whether messages can be sent: plain at once (on the caller's thread:
 * once connected, a connection tried now when there is none and the last
 * try is 50 ms old), sealed once the keys are agreed. */
bool zt_bulk_ready(zt_bulk_t *self);
/* Whether a send now would be taken without waiting (a ZeroMQ socket with
 * room; a direct end takes everything). */
bool zt_bulk_writable(zt_bulk_t *self);
/* For a client's timeout message: "" or why a sealed way may never have
 * been answered (its stream not open). */
const char *zt_bulk_unopened(const zt_bulk_t *self);
/* A direct end that has no connection (it is made again by zt_bulk_tend). */
bool zt_bulk_unconnected(const zt_bulk_t *self);

/* For a client waiting on its server: a sealed way opens again when its
 * opening went unanswered for stale_ms, or when it is open but nothing of
 * the server's has come for unheard_ms (a server that restarted is
 * silent: zt_stream_reopen_stale, zt_stream_reopen_unheard); 0: that rule
 * is not applied. Nothing on a plain way. */
void zt_bulk_revive(zt_bulk_t *self, int stale_ms, int unheard_ms);
/* For a client with nothing else to serve meanwhile: until a sealed way's
 * keys are agreed (opening again every second while unanswered), ZT_OK or
 * ZT_ETIMEDOUT; a plain way at once. */
int zt_bulk_wait_ready(zt_bulk_t *self, int timeout_ms);

/* What to poll for messages of the server. */
zmq_pollitem_t zt_bulk_item(zt_bulk_t *self);
/* Each turn of a wait (nothing on a ZeroMQ socket): a direct end writes
 * what waits and makes its connection again; item (may be NULL), this
 * way's in the poll set, then also asks for room to write. true, once,
 * when a plain direct end has a new connection after messages were lost
 * (sent while there was none, or on the one that broke): the caller sends
 * again what the server lacks now (a sealed way says so by becoming ready
 * again instead). */
bool zt_bulk_tend(zt_bulk_t *self, zmq_pollitem_t *item);

/* Until what a direct end has queued is in the kernel (a round's last
 * bytes, before the caller computes for long or exits); nothing on a
 * ZeroMQ socket, whose I/O thread writes on. A broken connection is left
 * to the peer to find. */
void zt_bulk_flush(zt_bulk_t *self);

/* Sends m, and bytes of payload when payload is not NULL. lent: see above
 * (NULL: copied). ZT_OK; ZT_EPROTO when a sealed way is not ready; ZT_EIO
 * when the socket refuses. */
int zt_bulk_send(zt_bulk_t *self, const zt_msg_t *m, const void *payload, size_t bytes, atomic_int *lent);

/* One received message's frames as they came (at most max; 0 when none
 * waits): [header][seal][payload] when sealed. The header is readable (it
 * travels in the clear, authenticated) before zt_bulk_open. */
int zt_bulk_recv(zt_bulk_t *self, zmq_msg_t *parts, int max);
/* Makes what zt_bulk_recv took a message for the caller: a stream's own
 * (the server's acceptance) is taken here (*np 0); a sealed message is
 * opened in place, or into into when it has one payload of exactly into_len
 * bytes (the payload part then points there; the caller names a place
 * whose bytes it can lose); a plain way's is left as it is. ZT_OK when the
 * caller has a message or nothing to do; ZT_EPROTO when it was dropped
 * (counted in zt_bulk_drops; parts closed, *np 0). */
int zt_bulk_open(zt_bulk_t *self, zmq_msg_t *parts, int *np, void *into, size_t into_len);
/* Messages dropped because they did not open. */
uint64_t zt_bulk_drops(const zt_bulk_t *self);

/* ------------------------------------------------------------ server */

/* A server bound at endpoint ("tcp://host:*" picks a port, written to
 * *port_p when not NULL) of plane; in a sealing job it opens its TCP
 * clients' sealed streams and takes nothing else from them. NULL when it
 * cannot be made (the reason logged). */
zt_bulk_server_t *zt_bulk_bind(zt_plane_t plane, const char *endpoint, int *port_p);
/* The same, but in a job that seals its bulk bytes, with ZT_BULK_DIRECT
 * at from or past it (on: a parameter server's; all: a reducer's too), a
 * TCP endpoint is served on the caller's thread: its clients' connections
 * accepted, read and written there, with no ZeroMQ I/O thread between
 * (zt_bulk_direct.h; the same host's clients still come over the ipc twin).
 * The caller then polls zt_bulk_server_items, made again every turn. */
typedef enum { ZT_BULK_DIRECT_ON = 1, ZT_BULK_DIRECT_ALL = 2 } zt_bulk_direct_t;
zt_bulk_server_t *zt_bulk_bind_direct(zt_plane_t plane, const char *endpoint, int *port_p, zt_bulk_direct_t from);
void zt_bulk_server_destroy(zt_bulk_server_t **self_p);
/* The socket, to poll (ZMQ_POLLIN), of a server made by zt_bulk_bind. */
void *zt_bulk_server_socket(zt_bulk_server_t *self);
/* What to poll this turn (ZMQ_POLLIN) for any server: 1 or 2 items into
 * items[2], their count. */
int zt_bulk_server_items(zt_bulk_server_t *self, zmq_pollitem_t *items);
/* Whether the server opens sealed streams (a sealing job). */
bool zt_bulk_server_seals(const zt_bulk_server_t *self);
/* Plain replies copied from then on go through a pool of send buffers
 * (zt_bufpool: nothing allocated per reply once it has grown, but up to 64
 * buffers kept): for a server that answers steadily (a reducer, a
 * parameter server), not one that answers now and then (rejoin, files).
 * ZT_OK, ZT_ENOMEM. */
int zt_bulk_server_pool_copies(zt_bulk_server_t *self);

/* One received message as [identity][header][payload...] (at most max
 * parts, max ≥ 4): the number of parts for the caller; 0 when it was the
 * transport's own (a stream's opening, answered here); ZT_EPROTO when it was
 * dropped (not sealed under this job's keys; parts closed, counted by the
 * caller); ZT_ETIMEDOUT when none waits. */
int zt_bulk_server_recv(zt_bulk_server_t *self, zmq_msg_t *parts, int max);
/* Messages received together (zt_bulk_server_recv_many). */
typedef struct {
    zmq_msg_t parts[4]; /* [identity][header][payload...] */
    int n;              /* as zt_bulk_server_recv returns: parts, 0, or ZT_EPROTO */
} zt_bulk_in_t;
#define ZT_BULK_MANY ZT_STREAMS_MANY
/* Threads that open a server's sealed messages (zt_bulk_server_recv_many):
 * the caller's and threads - 1 more. ZT_OK, ZT_ENOMEM. */
int zt_bulk_server_threads(zt_bulk_server_t *self, int threads);
/* The messages waiting now, at most max (and ZT_BULK_MANY; one when the
 * server opens on the caller's thread alone), each as zt_bulk_server_recv
 * hands one on: their count, 0 when none waits. Sealed ones of different
 * clients are opened at once on the server's threads, each client's in
 * order; the caller closes every in[i].n > 0 parts. */
int zt_bulk_server_recv_many(zt_bulk_server_t *self, zt_bulk_in_t *in, int max);
/* The same, but a sealed message of one payload is opened straight into
 * the place where(arg, header, header's bytes, payload's bytes) names for
 * it (NULL: in place; the payload part then points there). The caller
 * names a place whose bytes it can lose: a frame that does not open may
 * have written there. */
int zt_bulk_server_recv_into(zt_bulk_server_t *self, zmq_msg_t *parts, int max,
                             void *(*where)(void *arg, const void *hdr, size_t hlen, size_t bytes), void *arg);
/* Whether replies to the client of routing id go sealed (a stream of its
 * is open): a client on another host. */
bool zt_bulk_server_sealed_to(zt_bulk_server_t *self, zmq_msg_t *id);

/* Sends m, with bytes of payload when payload is not NULL, to the client of
 * routing id: sealed on its stream, else plain (lent: as zt_bulk_send): a
 * client of this host (ipc), or any in a job that does not seal. ZT_OK,
 * ZT_EIO. */
int zt_bulk_reply(zt_bulk_server_t *self, zmq_msg_t *id, const zt_msg_t *m, const void *payload, size_t bytes,
                  atomic_int *lent);
/* The same with n payload frames made by the caller (at most 8), which
 * are sent as they are, or sealed and closed. */
int zt_bulk_reply_frames(zt_bulk_server_t *self, zmq_msg_t *id, const zt_msg_t *m, zmq_msg_t *frames, int n);

/* One message to many clients: each zt_bulk_reply_shared sends m and the
 * payload to one client as zt_bulk_reply does, except that a sealed
 * client's copy is sealed once, under the server's one-to-many key, and the
 * same frames go to every sealed client; zt_bulk_shared_close lets them
 * go. m and the payload must be the same at every call. */
typedef struct {
    zt_stream_shared_t sh;
} zt_bulk_shared_t;
int zt_bulk_reply_shared(zt_bulk_server_t *self, zmq_msg_t *id, const zt_msg_t *m, const void *payload,
                         size_t bytes, atomic_int *lent, zt_bulk_shared_t *shared);
void zt_bulk_shared_close(zt_bulk_shared_t *shared);

void zt_bulk_selftest(void);
/* The sealed ways, once a job's credentials are loaded (after zt_auth's
 * selftest, whose credentials stay loaded). */
void zt_bulk_selftest_sealed(void);

#endif
