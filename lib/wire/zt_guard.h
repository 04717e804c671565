/* zt_guard: who may reach a job's TCP ports, and the trace of those who
 * may not.
 *
 * A job's replicas on one host reach each other over ipc:// twins in a
 * folder only the job's user can enter (zt_transport), so a TCP port of a
 * job is for replicas on other hosts. Every TCP router zt_transport makes
 * in a job (its hosts known from the placement, ZT_HOSTS) therefore
 * accepts connections from those hosts' addresses only
 * (ZMQ_TCP_ACCEPT_FILTER); a job on one host accepts none. Anyone else's
 * connection is closed as it is accepted: before the ZeroMQ greeting, so
 * before any CURVE work on either side, and a stranger's handshake storm
 * costs the job an accept and a close per attempt.
 *
 * A router's handshakes are watched (a socket monitor): each connection
 * refused by address and each handshake that fails (a key that is not the
 * job's, garbage, a handshake not done within ZT_HANDSHAKE_MS) is counted
 * (zt_guard_refused) and logged at most once per 5 s per port with its
 * source: the address, and for a connection from this host the local user
 * whose socket it is (from /proc/net/tcp). */
#ifndef ZT_GUARD_H
#define ZT_GUARD_H
#include <czmq.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

/* Sets the accept filter of a router about to bind a TCP endpoint: only
 * the n IPv4 or IPv6 addresses in addrs may connect (n == 0: nobody). */
void zt_guard_filter(zsock_t *router, char *const *addrs, int n);
/* Starts watching a router bound to TCP port `port`. The handle is for
 * zt_guard_unwatch, which must come before the router is closed (NULL: not
 * watched; nothing to undo). */
typedef struct zt_guard_t zt_guard_t;
zt_guard_t *zt_guard_watch(zsock_t *router, int port, bool filtered);
void zt_guard_unwatch(zsock_t *router, zt_guard_t **guard_p);
/* The same for a server that accepts its TCP connections itself (not
 * through ZeroMQ: zt_bulk's direct end): its port counted as a watched
 * router's (zt_guard_connections), and each connection it refuses (not
 * from the job's hosts, over the admission limit, a handshake failed or
 * not done within ZT_HANDSHAKE_MS) counted and logged as the watch does,
 * by zt_guard_refuse (peer: its address, or NULL). */
zt_guard_t *zt_guard_listen(int port, bool filtered);
void zt_guard_refuse(zt_guard_t *g, const char *peer, const char *why);
void zt_guard_unlisten(zt_guard_t **guard_p);
/* A job on one host has no TCP peer at all, yet its ports are its
 * servers' names (the twins are named by them, CLUSTER_SPEC lists them).
 * So the port is held, not served: a socket bound to endpoint
 * ("tcp://ADDR:PORT", PORT a number, "*" or "*[LO-]"/"*[LO-HI]") that
 * listens with the smallest backlog and takes one waiting connection a
 * second, to count and log it (with its source) and close it. The kernel
 * drops the rest unanswered, so a storm of connections stalls in the
 * storm's own retries instead of costing the job an accept each. The
 * port in *port_p; NULL with the reason logged. */
typedef struct zt_hold_t zt_hold_t;
zt_hold_t *zt_guard_hold(const char *endpoint, int *port_p);
void zt_guard_release(zt_hold_t **hold_p);
/* Connections per peer address: zt_guard_connections counts the
 * established TCP connections from addr to the ports this process's
 * watched routers listen on (the kernel's table, at that moment);
 * zt_guard_admit (the ZAP handler asks it in every handshake, CURVE or a
 * bulk socket's NULL) refuses a connection from an address that then holds
 * more than zt_guard_connection_limit() (the job's ZT_PEER_CONNECTIONS;
 * 256 outside a job), with why filled. An address "" (not TCP) is always
 * admitted. Connections still in their handshake count too: a stranger's
 * pile can keep new connections from its own address out (for
 * ZT_HANDSHAKE_MS at a time), never take what was admitted. The kernel's
 * table is read only when the process holds more sockets than the limit
 * (fewer, and no address can be past it): a read walks every TCP socket
 * of the host's table, milliseconds each. */
bool zt_guard_admit(const char *addr, char *why, size_t len);
int zt_guard_connections(const char *addr);
int64_t zt_guard_connection_limit(void);
/* The limit where ZT_PEER_CONNECTIONS is unset (a server outside a job). */
#define ZT_PEER_CONNECTIONS_DEFAULT 256
/* Connections refused by this process's guards so far: by address, or a
 * handshake that failed before the ZAP handler was asked. */
uint64_t zt_guard_refused(void);
/* The source of connections to TCP port `port` that are not established:
 * the most frequent remote address among this host's sockets to it that
 * are connecting or closing, with the local user that owns the connecting
 * socket when it is on this host ("127.0.0.1 (user alice, uid 1001)"), or
 * "" when none is seen. */
void zt_guard_source(int port, char *out, size_t len);
/* The uid of the local user whose socket is the peer of a connection to
 * this host's port `port` (a peer on this host: its entry in
 * /proc/net/tcp{,6}), or -1 when it is not this host's or not seen. */
long zt_guard_owner(const struct sockaddr *peer, int port);
void zt_guard_selftest(void);
/* Its part on the reader of the kernel's socket rows (zt_guard.c). */
void zt_guard_selftest_rows(void);

#endif
