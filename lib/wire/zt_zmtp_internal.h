/* zt_zmtp's insides, shared by the end (zt_zmtp.c) and its
 * queue of what waits to go (zt_zmtp_out.c). Not for other files. */
#ifndef ZT_ZMTP_INTERNAL_H
#define ZT_ZMTP_INTERNAL_H
#include "wire/zt_zmtp.h"
#include "wire/zt_bufpool.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#define MAX_PARTS 16
#define SEND_WAIT_MS 30000    /* a peer that takes nothing for this long is taken for gone */
#define OUT_MAX (8 << 20)     /* bytes a connection keeps waiting to go before a send waits */
#define OUT_IOV 64            /* pieces of what waits written by one sendmsg */

/* Bytes that wait to go: a message's, from off on (the caller's frame,
 * shared by reference, or a copy of bytes the caller keeps). */
typedef struct {
    zmq_msg_t m;
    size_t off;
} s_seg_t;

typedef struct {
    zmq_msg_t parts[MAX_PARTS];
    int n;
} s_msg_t;

struct zt_zmtp_t {
    char endpoint[300];
    char host[256], port[16];
    int fd;                 /* the descriptor callers poll: the connection, or idle_fd's twin */
    int idle_fd;            /* an eventfd never written: reads as nothing */
    int ready_fd;           /* an eventfd never read: always readable (polled while messages wait) */
    bool up;                /* a connection is on fd */
    int64_t tried_ms;       /* the last connect */
    bool server;            /* an accepted end (zt_zmtp_accept): never connects again */
    int greet;              /* a server end: 0 the client's greeting awaited, 1 its READY, 2 done */
    int64_t since_ms;       /* when it was accepted */
    uint8_t *in;            /* received bytes not yet parsed: in[a, b) */
    size_t a, b;
    int64_t limit;          /* the largest frame taken */
    /* the message being received */
    s_msg_t cur;
    bool dropping;          /* it has more parts than the caller takes: read and let go */
    bool bad;               /* a server end's client broke the protocol */
    /* a large frame being read into its place */
    zmq_msg_t body;
    size_t body_len, body_have;
    bool in_body, body_more, body_cmd;
    bool bodies;            /* large frames are coming: reads into in[] stop at HEAD_BYTES */
    /* what was sent that the kernel did not take yet: q[q0 ..] (nq of
     * them, out bytes in all), in order */
    s_seg_t *q;
    int q0, nq, qcap;
    size_t out;
    zt_bufpool_t *pool;     /* buffers callers fill to send by reference (zt_zmtp_msg_with) */
    int64_t quiet_since;    /* when the peer last took a byte, or the first send waited */
    /* messages complete, not yet taken (read while a send waited) */
    s_msg_t *done;
    int ndone, done_cap, done_first;
};

/* Writes what waits, as far as the kernel takes it now (never waits):
 * NULL, or why the connection broke (the caller closes it). */
const char *zt_zmtp_out_write(zt_zmtp_t *self);
/* Queues what v[0..n) holds after what waits: a part that is the end of
 * its owner's bytes (own[i], or NULL) by reference, the others copied
 * together. false: no memory. */
bool zt_zmtp_out_queue(zt_zmtp_t *self, const struct iovec *v, zmq_msg_t *const *own, int n);
/* Lets what waits go (the connection is gone). */
void zt_zmtp_out_drop(zt_zmtp_t *self);

#endif
