/* zt_bulk_direct: a bulk server's TCP port served on the server's own
 * thread: its clients' connections accepted here, each a ZMTP end of its
 * own (zt_zmtp_accept), read and written by the thread that polls the
 * server, with no ZeroMQ I/O thread and no hand-off between the kernel and
 * the caller. For zt_bulk's servers in a job that seals its bulk bytes,
 * or one with security off (ZT_BULK_DIRECT on: a parameter server's; all:
 * a reducer's too); the
 * same host's clients still come over the ipc twin, a ROUTER beside it.
 *
 * Who may connect is what zt_sock_router's port allows (zt_guard): the job's
 * hosts only when the job's placement names them (zt_tcp_peer_rule), at
 * most the admission limit per address (zt_guard_admit), a handshake done
 * within ZT_HANDSHAKE_MS; every refusal counted and logged (zt_guard_refuse).
 * A client's frames are bounded (zt_frame_limit) before any is read; a
 * client that breaks the protocol is closed.
 *
 * A client is named by a routing id of 6 bytes (0, 'z', then a number
 * never used again), as ZeroMQ's router names its (5 bytes): the two
 * never meet. */
#ifndef ZT_BULK_DIRECT_H
#define ZT_BULK_DIRECT_H
#include "wire/zt_stream.h"
#include "wire/zt_zmtp.h"
#include <stdbool.h>
#include <zmq.h>

typedef struct zt_direct_t zt_direct_t;

/* Listens at endpoint ("tcp://HOST:PORT", PORT a number or "*"; HOST an
 * IPv4 address, a name of one, or "*"), its port in *port_p. rule: as
 * zt_tcp_peer_rule (0 any address, 1 the job's hosts'). NULL when the
 * endpoint is of another form (the caller binds a router instead) or
 * cannot be bound (said). */
zt_direct_t *zt_direct_listen(const char *endpoint, int rule, int *port_p);
void zt_direct_destroy(zt_direct_t **self_p);
/* The streams of its clients (NULL: none): their sealed replies go on the
 * clients' own connections, and a connection that ends lets its stream go. */
void zt_direct_streams(zt_direct_t *self, zt_streams_t *streams);
/* The descriptor to poll (ZMQ_POLLIN) this turn, after the turn's care:
 * connections that ended or are overdue in their handshake closed, the
 * writes that wait asked to be woken for. Always readable while messages
 * that came wait to be taken. */
int zt_direct_poll_fd(zt_direct_t *self);
/* One client's message as [id][frames...] (at most max parts, max ≥ 2):
 * the number of parts, 0 when none is whole now (it does not wait). New
 * connections are taken here. */
int zt_direct_recv(zt_direct_t *self, zmq_msg_t *parts, int max);
/* Connections open (greeted or not). */
int zt_direct_count(const zt_direct_t *self);
/* The end of the client of routing id id (to write to it), or NULL. */
zt_zmtp_t *zt_direct_end(zt_direct_t *self, const void *id, size_t len);

void zt_direct_selftest(void);

#endif
