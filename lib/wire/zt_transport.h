/* zt_transport: every ZeroMQ socket ztrain makes, control plane and data
 * plane, comes from here. It is the one place for socket options (high-water
 * marks, linger, reconnection), for the same-host ipc:// twins of the data
 * plane, for the largest data frame, and for the job's credentials (zt_auth:
 * in a job, every socket is a CURVE socket). */
#ifndef ZT_TRANSPORT_H
#define ZT_TRANSPORT_H
#include <czmq.h>
#include <stdbool.h>
#include <stdint.h>

typedef enum {
    ZT_PLANE_CONTROL, /* small messages: registration, heartbeats, files */
    ZT_PLANE_DATA,    /* tensors: parameter servers, reducers, the ring */
    ZT_PLANE_BULK     /* tensors whose messages are sealed (zt_stream) between
                       * hosts: the data plane's options without CURVE; a
                       * server takes only sealed messages from a TCP peer */
} zt_plane_t;

/* A ROUTER bound to endpoint (a full ZeroMQ endpoint; "tcp://host:*" picks
 * a port, written to *port_p when port_p is not NULL). Control plane: no
 * linger. Data plane: high-water marks for bulk transfers, no linger, and
 * also bound to the endpoint's ipc:// twin when it is a loopback or wildcard
 * TCP address (ZT_DATA_IPC). NULL with the reason logged. */
zsock_t *zt_sock_router(zt_plane_t plane, const char *endpoint, int *port_p);
/* A router bound only at the same-host twin of actual ("tcp://h:PORT"),
 * for a server that serves the TCP port itself (zt_bulk's direct end);
 * bound to nothing when there is no twin. NULL when the twin cannot be
 * bound (said). */
zsock_t *zt_sock_router_twin(zt_plane_t plane, const char *actual);
/* Which peers a TCP server of this process takes, decided as
 * zt_sock_router decides its filter: -1 none at all (a job on one host: the
 * port is held), 0 any address, 1 the job's hosts' only
 * (zt_tcp_peer_allowed). */
int zt_tcp_peer_rule(void);
/* addr as zt_sockaddr_name names an IPv4 peer ("10.0.0.2"). */
bool zt_tcp_peer_allowed(const char *addr);
/* A DEALER connected to endpoint ("host:port" or a full ZeroMQ endpoint).
 * Control plane: lingers 200 ms so that a last message goes out. Data plane:
 * the router's high-water marks, no linger, quick reconnection (a restarted
 * server is found again), and a loopback endpoint through its ipc:// twin.
 * NULL if it cannot. */
zsock_t *zt_sock_dealer(zt_plane_t plane, const char *endpoint);
/* Logs which way data to endpoint goes (at info the first time for a
 * plane and endpoint), how added ("": a DEALER's way). */
void zt_data_say_route(zt_plane_t plane, const char *endpoint, const char *how);

/* Closes a socket made here (NULLs *sock_p; safe on NULL). A router's ipc
 * files (an ipc:// endpoint, a twin) are removed with it. */
void zt_sock_destroy(zsock_t **sock_p);

/* The ipc:// twin of a TCP endpoint on this host, or false when it has none
 * or ZT_DATA_IPC is off. This host is decided by host identity: the launch
 * backend's placement (ZT_HOST, ZT_HOSTS) when the endpoint is in it, else a
 * loopback address (and, to bind, a wildcard). */
bool zt_data_ipc_twin(const char *endpoint, bool bind, char *out, size_t len);
/* The folder of the ipc:// twins: ZT_IPC_DIR, else /tmp/ztrain-ipc-UID,
 * made 0700 when missing. NULL (said once, as a warning) when it is not
 * this user's own private directory (another user's, writable by others,
 * a symbolic link): then no twin is used and same-host data goes over
 * loopback TCP, so nobody else can put a socket where replicas connect. */
const char *zt_ipc_dir(void);
/* Removes the twins in the ipc folder that nobody listens on any more
 * (their servers were killed with SIGKILL): the coordinator does it when
 * its job ends, every process before its first twin. */
void zt_ipc_sweep(void);
/* Whether a client connecting to endpoint reaches a server on this host
 * (ipc://, inproc://, or a loopback address with its twin): then the two
 * may share memory (zt_shm). */
bool zt_data_is_local(const char *endpoint);
/* Largest data-plane payload frame in bytes (ZT_PS_CHUNK_BYTES, at least
 * 4 KiB): parameter-server pushes and pulls, ring all-reduce blocks. */
int64_t zt_frame_bytes(void);

/* The largest frame a replica whose parameter-server chunk is chunk bytes
 * and whose all-reduce piece is piece bytes sends on the data plane: the
 * larger of the two or 16 MiB (a layout's JSON, a header), plus 64 KiB. */
int64_t zt_frame_limit_for(int64_t chunk, int64_t piece);
/* Every data-plane and bulk socket's ZMQ_MAXMSGSIZE: ZT_FRAME_LIMIT (the
 * job's, from its coordinator, over every pool's settings), else this
 * process's own zt_frame_limit_for. A peer that announces a larger frame is
 * disconnected before a byte of it is buffered: a stranger's 4 GiB frame
 * costs a sealed server nothing. */
int64_t zt_frame_limit(void);

/* Whether a received frame came over an ipc:// connection (a peer on this
 * host, through the user's private ipc folder), not TCP. */
bool zt_frame_over_ipc(zmq_msg_t *frame);

/* Replaces the placement read from ZT_HOST and ZT_HOSTS (tests). */
void zt_transport_set_hosts(const char *me, const char *map_json);
void zt_transport_selftest(void);

#endif
