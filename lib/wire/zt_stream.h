/* zt_stream: sealed messages on a data-plane socket (zt_seal's keys and
 * nonces put on the wire).
 *
 * A client (DEALER) opens a stream to its server (ROUTER): SEAL_OPEN with
 * its name, the name of the server it asks for (when the job's cluster
 * names the address it dialled), a fresh salt and a proof (HMAC under the
 * job's secret of all three); the server checks the proof and the name,
 * answers SEAL_ACCEPT with its own fresh salt (its nonce) and proof, and
 * both derive the stream's two keys (zt_seal_derive, bound to the job, its
 * incarnation, both names and both salts). A proof made under another
 * job's secret or another incarnation fails, and so does an opening meant
 * for another server or an answer from one: dropped and counted.
 *
 * The server holds the new keys as pending until the client's first
 * message sealed under them arrives (each unit's number carries the id of
 * its keys): only a client that saw this answer can make one. So an
 * opening captured and sent again, from another connection or on the
 * client's own, gets an answer and nothing more: the keys the stream has
 * serve on, and such never-confirmed streams are the first to go when the
 * table is full.
 *
 * A sealed message is [header][seal][payload]: the seal frame is the
 * frame's number (8 bytes, big-endian) and its GCM tag (16 bytes); the
 * header (msgpack, as on a plain socket) is the associated data and the
 * payload is encrypted. The sender seals from the caller's bytes into a
 * pooled send buffer (zt_bufpool: the copy a zero-copy send makes anyway);
 * the receiver opens the payload in place, in the received frame, and then
 * hands the caller [header][payload] as a plain socket would. A message
 * that fails (a bad tag, a replay, a frame of an old stream) is dropped,
 * counted and never handed on.
 *
 * What a server sends every client alike (a reducer's sum) it seals once,
 * under its one-to-many key: derived like a stream's from the job's secret,
 * a fresh salt of the server's and its name, handed to each client in the
 * acceptance (covered by its proof) with the number of the last frame
 * sealed under it, so a client takes only frames sealed after it joined.
 * Such a frame's number has its top bit set.
 *
 * A frame for a stream the server does not hold (it was restarted, or the
 * connection never opened one) is dropped without a word: nothing tells a
 * stranger what listens there. A client that hears nothing from its server
 * while it waits for an answer opens again (zt_stream_reopen_unheard); its
 * requests in flight are sent again by its own resend rules. */
#ifndef ZT_STREAM_H
#define ZT_STREAM_H
#include "wire/zt_seal.h"
#include "wire/zt_msg.h"
#include "wire/zt_transport.h"
#include "wire/zt_zmtp.h"
#include "base/zt_team.h"
#include <stdbool.h>
#include <stdint.h>
#include <zmq.h>

/* What both ends agree on: the job's secret, the job, its incarnation, and
 * this end's name (a replica's, "workerpool1-0"). */
typedef struct {
    uint8_t secret[ZT_SEAL_KEY_BYTES];
    char job[128];
    int64_t incarnation;
    char self[64];
} zt_stream_cfg_t;

/* This process's settings when it seals its bulk data (a secured job's
 * replica, ZT_BULK_SEAL on, a job with a seal secret): true with cfg
 * filled; false when its bulk sockets keep CURVE (or are plain). */
bool zt_stream_cfg_load(zt_stream_cfg_t *cfg);

/* Why messages were dropped; counted per stream and per server. */
typedef struct {
    uint64_t bad_open;    /* an opening whose proof failed (another job, incarnation, or forged) */
    uint64_t bad_seal;    /* a tag that did not match: a flipped bit, another key */
    uint64_t replayed;    /* a frame number not above the last opened */
    uint64_t no_stream;   /* a sealed frame of a stream this end does not hold */
    uint64_t malformed;   /* not a sealed message's shape */
} zt_stream_drops_t;

typedef struct zt_stream_t zt_stream_t;     /* one connection's two keys */
typedef struct zt_streams_t zt_streams_t;   /* a server's streams, by the client's routing id */

/* Client: a stream on dealer (a connected DEALER), opened at once (SEAL_OPEN
 * sent); it is ready once the server's SEAL_ACCEPT came through
 * zt_stream_recv. It asks for the replica the job's CLUSTER_SPEC places at
 * the address dealer dialled (any server of the job where none is named
 * there); zt_stream_connect_to asks for server by name ("": any). NULL
 * when it cannot be made. */
zt_stream_t *zt_stream_connect(const zt_stream_cfg_t *cfg, void *dealer);
zt_stream_t *zt_stream_connect_to(const zt_stream_cfg_t *cfg, void *dealer, const char *server);
/* The same on a ZMTP end of the caller's (zt_zmtp.h: no ZeroMQ socket
 * between this thread and the kernel) dialling endpoint; the caller keeps
 * zmtp and receives on it. A new connection opens the stream again by
 * itself, on the next send. */
zt_stream_t *zt_stream_connect_zmtp(const zt_stream_cfg_t *cfg, zt_zmtp_t *zmtp, const char *endpoint);
/* Each turn of a client's wait, for such a stream (nothing for others,
 * or NULL): what waits to go is written; without a connection, one is
 * made (at most every 50 ms) and the stream opened on it; item (may be
 * NULL), the stream's in the poll set, then asks for room to write while
 * bytes still wait. */
void zt_stream_tend(zt_stream_t *self, zmq_pollitem_t *item);
void zt_stream_destroy(zt_stream_t **self_p);
/* Whether the stream's keys are agreed (messages can be sent). */
bool zt_stream_ready(const zt_stream_t *self);
/* Opens again (a new salt): when the server seems to have restarted. */
int zt_stream_reopen(zt_stream_t *self);
/* Opens again when the stream is not ready and its last opening went out
 * ms or more ago: the opening (or its answer) was lost, say the server
 * restarted before it answered. Nothing else makes a client that cannot
 * send open again. */
void zt_stream_reopen_stale(zt_stream_t *self, int ms);
/* Opens again when the stream is ready but nothing of its server's has
 * opened for ms or more: for a client waiting on an answer (a server that
 * restarted, or dropped the stream, is silent). */
void zt_stream_reopen_unheard(zt_stream_t *self, int ms);
/* Until the stream's keys are agreed, receiving on its dealer and opening
 * again every second while unanswered: ZT_OK, or ZT_ETIMEDOUT. For a
 * client with nothing else to serve meanwhile. */
int zt_stream_wait_ready(zt_stream_t *self, int timeout_ms);
/* The name of the other end (the server's, once accepted). */
const char *zt_stream_peer(const zt_stream_t *self);
const zt_stream_drops_t *zt_stream_drops(const zt_stream_t *self);

/* Sends m sealed, with bytes of payload sealed from payload (none when
 * bytes is 0), on the client's dealer. ZT_OK; ZT_EAGAIN-like ZT_EPROTO
 * when the stream is not ready; ZT_EIO when the socket refuses. */
int zt_stream_send(zt_stream_t *self, const zt_msg_t *m, const void *payload, size_t bytes);
/* One received message of the client's dealer, in parts (np of them):
 * a SEAL_ACCEPT is taken here (returns 0 parts left: the
 * caller has nothing to do); a sealed message is opened in place and left
 * as [header][payload...] (*np lowered by one). ZT_OK when the caller has a
 * message or nothing to do, ZT_EPROTO when it was dropped (counted; the
 * parts are closed and *np is 0). */
int zt_stream_recv(zt_stream_t *self, zmq_msg_t *parts, int *np);
/* The same, but a message with one payload of exactly into_len bytes is
 * opened straight into into (no copy after), its payload part then
 * pointing there. The caller names a place whose bytes it can lose: a
 * frame that does not open may have written there. */
int zt_stream_recv_into(zt_stream_t *self, zmq_msg_t *parts, int *np, void *into, size_t into_len);

/* Server: the streams of router's clients. */
zt_streams_t *zt_streams_new(const zt_stream_cfg_t *cfg, void *router);
void zt_streams_destroy(zt_streams_t **self_p);
/* One received message of the router, parts[0] being the client's routing
 * id: an opening is answered here (0 parts left); a sealed message is
 * opened in place and left as [id][header][payload...], *from set to its
 * stream (for the reply). ZT_OK, or ZT_EPROTO when dropped (counted, not
 * answered; parts closed). */
int zt_streams_recv(zt_streams_t *self, zmq_msg_t *parts, int *np, zt_stream_t **from);
/* The same, but a message with one payload of exactly into_len bytes is
 * opened straight into into (as zt_stream_recv_into). */
int zt_streams_recv_into(zt_streams_t *self, zmq_msg_t *parts, int *np, zt_stream_t **from, void *into,
                         size_t into_len);
/* Sends m sealed to the client of stream to (from zt_streams_recv). */
int zt_streams_send(zt_streams_t *self, zt_stream_t *to, const zt_msg_t *m, const void *payload, size_t bytes);
/* The same with n payload frames (at most 8). */
int zt_streams_sendv(zt_streams_t *self, zt_stream_t *to, const zt_msg_t *m, const void *const *payloads,
                     const size_t *sizes, int n);
/* A message sealed once for any of a server's clients (the same frames
 * sent to each): zt_streams_seal_shared seals m with its payload (bytes of
 * it, at least one) under the server's one-to-many key; each
 * zt_streams_send_shared sends it to one client; zt_stream_shared_close
 * lets it go. ZT_OK, ZT_EIO. */
typedef struct {
    zmq_msg_t f[3]; /* header, seal, payload */
    bool made;
} zt_stream_shared_t;
int zt_streams_seal_shared(zt_streams_t *self, const zt_msg_t *m, const void *payload, size_t bytes,
                           zt_stream_shared_t *sh);
int zt_streams_send_shared(zt_streams_t *self, zt_stream_t *to, zt_stream_shared_t *sh);
void zt_stream_shared_close(zt_stream_shared_t *sh);
/* Messages a server received, to be opened together
 * (zt_streams_open_many). */
typedef struct {
    zmq_msg_t *parts; /* [id][header][seal][payload...] as received */
    int n;            /* their count; after: [id][header][payload...]'s, or ZT_EPROTO (closed) */
} zt_streams_item_t;
#define ZT_STREAMS_MANY 64 /* at most this many at once */
/* Opens items as zt_streams_recv would one after another, those of
 * different clients at once on team's threads (NULL: the caller's alone),
 * each client's in the order they came; an opening (SEAL_OPEN) is taken
 * once everything before it is open, by itself. */
void zt_streams_open_many(zt_streams_t *self, zt_streams_item_t *items, int count, zt_team_t *team);
/* The stream of a client by its routing id (a reply deferred); NULL when
 * it has none (any more), or none a message of the client's confirmed. */
zt_stream_t *zt_streams_find(zt_streams_t *self, zmq_msg_t *id);
const zt_stream_drops_t *zt_streams_drops(const zt_streams_t *self);
/* For a server whose TCP clients each have a connection of their own (zt_bulk's
 * direct end): end_of(arg, id, len) names the ZMTP end of the client of
 * routing id id, or NULL (one of the router's); a stream made for it sends
 * on that end. zt_streams_forget lets the stream of a connection that
 * ended go (before its end is destroyed). */
void zt_streams_set_ends(zt_streams_t *self, zt_zmtp_t *(*end_of)(void *, const void *, size_t), void *arg);
void zt_streams_forget(zt_streams_t *self, const void *id, size_t len);
/* Streams held (clients connected and opened, confirmed or not). */
int zt_streams_count(const zt_streams_t *self);


void zt_stream_selftest(void);

#endif
