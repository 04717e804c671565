/* zt_zmtp: a DEALER's end (or, accepted, a ROUTER's) of a ZeroMQ connection (ZMTP 3, the NULL
 * mechanism) on a TCP socket of the caller's thread: for a sealed stream's
 * bulk bytes to a server on another host, without a ZeroMQ I/O thread
 * between the caller and the kernel.
 *
 * The server is an ordinary ROUTER (a bulk socket: its handshake asks the
 * job's guard); only this end changes. A message goes out with one writev
 * of every frame's header and bytes, in the caller's thread, as soon as the
 * call is made: no hand-off to another thread and no wake-up of one (what
 * the kernel does not take at once waits in the connection's queue). A
 * message comes in with reads into a small buffer for headers and small
 * frames; a large frame's bytes are read straight into a frame of its own.
 *
 * The connection is made by zt_zmtp_poke (the caller's, before it sends)
 * and made again after it breaks, at most every RECONNECT_MS; what is sent
 * while there is none is lost (ZT_EIO), as the callers' resend rules
 * expect. zt_zmtp_fd stays the same descriptor for the object's life (the
 * connection is moved onto it); it reads as nothing while there is no
 * connection. A poll set takes zt_zmtp_poll_fd each turn. A frame larger than
 * zt_frame_limit, or anything that is not ZMTP, ends the connection. */
#ifndef ZT_ZMTP_H
#define ZT_ZMTP_H
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>
#include <zmq.h>

typedef struct zt_zmtp_t zt_zmtp_t;

/* An end for endpoint ("tcp://host:port", or "host:port"); NULL when it
 * is not a TCP endpoint. Nothing is connected yet. */
zt_zmtp_t *zt_zmtp_new(const char *endpoint);
void zt_zmtp_destroy(zt_zmtp_t **self_p);
/* A ROUTER's end of a connection a server accepted (fd: non-blocking,
 * owned from now on; peer: its address, for messages): this end's greeting
 * and READY go at once; the client's are read as its bytes come (a server
 * polls, never waits on one client), and anything else before them (or a
 * frame over 512 bytes) ends it. Never connects again: once down
 * (!zt_zmtp_connected) it is for zt_zmtp_destroy. NULL (fd closed) when the
 * greeting cannot go. */
zt_zmtp_t *zt_zmtp_accept(int fd, const char *peer);
/* An accepted end: whether the client's greeting and READY came, and when
 * it was accepted (a server ends one not greeted in time). */
bool zt_zmtp_greeted(const zt_zmtp_t *self);
int64_t zt_zmtp_since(const zt_zmtp_t *self);
/* Whether messages read already wait for zt_zmtp_recv (the socket may have
 * nothing new). */
bool zt_zmtp_waiting(const zt_zmtp_t *self);
/* The endpoint it dials, as tcp://host:port (an accepted end: its peer's). */
const char *zt_zmtp_endpoint(const zt_zmtp_t *self);
/* The connection's descriptor (the same for the object's life). */
int zt_zmtp_fd(const zt_zmtp_t *self);
/* The descriptor to poll this turn (socket NULL; events: zt_zmtp_events):
 * zt_zmtp_fd, or one that is always readable while messages that came
 * together wait in the end's buffer for zt_zmtp_recv (the socket then has
 * nothing new, and a poll of it would sleep on them). */
int zt_zmtp_poll_fd(const zt_zmtp_t *self);
/* Connects when there is no connection and the last try is RECONNECT_MS
 * old. true when a new connection was just made (what the server held of
 * the last one is gone: a stream opens again). */
bool zt_zmtp_poke(zt_zmtp_t *self);
bool zt_zmtp_connected(const zt_zmtp_t *self);
/* Sends a message of n frames (at most 16), straight from the caller's
 * bytes as far as the kernel takes them now; the rest waits for the peer
 * (zt_zmtp_pending), so the caller goes on to its other servers: frame i
 * by reference when owners (NULL: none) has owners[i], the message whose
 * bytes it is (made by zt_zmtp_msg_with, or a frame shared by several
 * ends; the caller still closes it), else copied. Only with more than
 * OUT_MAX bytes waiting does it wait, reading meanwhile what comes (kept
 * for zt_zmtp_recv). ZT_OK, or ZT_EIO when there is no connection or it
 * broke. */
int zt_zmtp_sendv(zt_zmtp_t *self, const struct iovec *frames, zmq_msg_t *const *owners, int n);
/* A message of size bytes that fill(arg, buf) writes (a seal, a copy): a
 * buffer of this end's, reused once what waits of it is written (so that a
 * message sent from it costs no fresh pages and no copy). 0, or -1. */
int zt_zmtp_msg_with(zt_zmtp_t *self, zmq_msg_t *msg, size_t size, int (*fill)(void *arg, void *buf), void *arg);
/* Whether bytes wait to go; then the caller polls for ZMQ_POLLOUT too
 * (zt_zmtp_events) and calls zt_zmtp_flush when it comes (zt_zmtp_recv
 * and zt_stream_tend write what waits as well). */
bool zt_zmtp_pending(const zt_zmtp_t *self);
short zt_zmtp_events(const zt_zmtp_t *self);
/* Writes what waits without waiting; false when the connection broke. */
bool zt_zmtp_flush(zt_zmtp_t *self);
/* Writes everything that waits, reading what comes meanwhile (kept for
 * zt_zmtp_recv): for a sender whose peer waits on its last message while
 * it has nothing more to send or receive on this end (the ring's last
 * block). false when the connection broke (or the peer took nothing for
 * SEND_WAIT_MS). */
bool zt_zmtp_drain(zt_zmtp_t *self);
/* One message that has come, in parts (at most max; a message of more is
 * dropped): the number of parts, 0 when none is complete now (it does not
 * wait). */
int zt_zmtp_recv(zt_zmtp_t *self, zmq_msg_t *parts, int max);

/* The largest frame this end takes (zt_frame_limit when made): for tests. */
void zt_zmtp_set_limit(zt_zmtp_t *self, int64_t limit);

void zt_zmtp_selftest(void);

#endif
