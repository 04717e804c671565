/* zt_zmtp's selftest: a DEALER's end against real ROUTERs. */
#include "wire/zt_zmtp.h"
#include "wire/zt_transport.h"
#include "base/zt_util.h"
#include "base/zt_ports.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_knobs.h"
#include <assert.h>
#include <czmq.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------ selftest */

static char s_buf[100000];

/* Waits up to 2 s for one message on z. */
static int s_test_recv(zt_zmtp_t *z, zmq_msg_t *parts, int max)
{
    for (int i = 0; i < 200; i++) {
        int n = zt_zmtp_recv(z, parts, max);
        if (n)
            return n;
        zt_wait_fd(zt_zmtp_fd(z), POLLIN, 10);
    }
    return 0;
}

/* r bound below the ephemeral range, so that no outgoing connection of
 * another process takes its port while the server is away (it comes back
 * on the same port): the port. */
static int s_test_bind(zsock_t *r)
{
    int port = -1;
    unsigned seed = (unsigned) getpid() ^ (unsigned) zt_now_ms();
    for (int i = 0; i < 100 && port < 0; i++)
        port = zsock_bind(r, "tcp://127.0.0.1:%d", 20000 + (int) ((unsigned) rand_r(&seed) % 12000));
    assert(port > 0);
    return port;
}

/* Three small messages in one read: one taken, the poll descriptor still
 * reads as ready for the others, with no new byte on the socket. */
static void s_test_together(zt_zmtp_t *z, zsock_t *r, zframe_t *id)
{
    for (int i = 0; i < 3; i++) {
        zframe_send(&id, r, ZFRAME_MORE | ZFRAME_REUSE);
        zsock_send(r, "s", "small");
    }
    usleep(50 * 1000); /* all three in the kernel's buffer */
    zmq_msg_t parts[2];
    assert(s_test_recv(z, parts, 2) == 1);
    zmq_msg_close(&parts[0]);
    assert(zt_wait_fd(zt_zmtp_poll_fd(z), POLLIN, 0) > 0);
    for (int i = 0; i < 2; i++) {
        assert(zt_zmtp_recv(z, parts, 2) == 1 && zmq_msg_size(&parts[0]) == 5);
        zmq_msg_close(&parts[0]);
    }
    assert(zt_zmtp_poll_fd(z) == zt_zmtp_fd(z) && zt_wait_fd(zt_zmtp_poll_fd(z), POLLIN, 0) == 0);
}

static int s_test_fill(void *arg, void *buf)
{
    memset(buf, *(int *) arg, 100000);
    return 0;
}

/* A server that reads nothing for a while: sends go on without waiting
 * (the rest waits, copied from the caller's bytes, or held by reference
 * to the end's own buffers, which are not lent again meanwhile), then all
 * of it arrives whole and in order. */
static void s_test_backlog(zt_zmtp_t *z, zsock_t *r, char *big)
{
    enum { SZ = 100000 };
    int N = 0; /* until the kernel's buffers (and the server's one message) are full, and some more */
    for (int more = 0; N < 2000 && more < 3; N++) {
        more += zt_zmtp_pending(z);
        int c = 'a' + N % 26;
        if (N % 2) { /* the body from a buffer of the end's, closed at once */
            zmq_msg_t body;
            assert(zt_zmtp_msg_with(z, &body, SZ, s_test_fill, &c) == 0);
            struct iovec m[2] = { { &N, sizeof N }, { zmq_msg_data(&body), SZ } };
            zmq_msg_t *own[2] = { NULL, &body };
            assert(zt_zmtp_sendv(z, m, own, 2) == ZT_OK);
            zmq_msg_close(&body);
            continue;
        }
        memset(big, c, SZ);
        struct iovec m[2] = { { &N, sizeof N }, { big, SZ } };
        assert(zt_zmtp_sendv(z, m, NULL, 2) == ZT_OK);
        memset(big, '?', SZ); /* what waits of it is a copy */
    }
    assert(zt_zmtp_pending(z) && (zt_zmtp_events(z) & ZMQ_POLLOUT));
    for (int i = 0; i < N; i++) {
        zmq_pollitem_t it = { zsock_resolve(r), 0, ZMQ_POLLIN, 0 };
        while (zmq_poll(&it, 1, 10) <= 0)
            assert(zt_zmtp_flush(z));
        zmsg_t *one = zmsg_recv(r);
        assert(one && zmsg_size(one) == 3);
        zframe_t *oid = zmsg_pop(one), *no = zmsg_pop(one), *body = zmsg_pop(one);
        assert(zframe_size(no) == sizeof i && *(int *) zframe_data(no) == i && zframe_size(body) == SZ);
        for (int k = 0; k < SZ; k++)
            assert(((char *) zframe_data(body))[k] == 'a' + i % 26);
        zframe_destroy(&oid);
        zframe_destroy(&no);
        zframe_destroy(&body);
        zmsg_destroy(&one);
    }
    assert(zt_zmtp_flush(z) && !zt_zmtp_pending(z));
}

/* Against a ROUTER of libzmq's: the handshake, messages both ways (a large
 * frame read straight into a frame of its own, one of more parts than taken
 * dropped), a frame past the limit ending the connection, a connection
 * made again to a server that came back on the same port. */
void zt_zmtp_selftest(void)
{
    zsock_t *r = zsock_new(ZMQ_ROUTER);
    zsock_set_rcvhwm(r, 1); /* its I/O thread stops reading when one message waits */
    int port = s_test_bind(r);
    char ep[64];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    assert(!zt_zmtp_new("ipc:///tmp/x") && !zt_zmtp_new("tcp://nohost") && !zt_zmtp_new("nohost"));
    zt_zmtp_t *bare = zt_zmtp_new("localhost:5555"); /* host:port, as CLUSTER_SPEC has them */
    assert(bare && !strcmp(zt_zmtp_endpoint(bare), "tcp://localhost:5555"));
    zt_zmtp_destroy(&bare);
    zt_zmtp_t *z = zt_zmtp_new(ep);
    assert(z && !zt_zmtp_connected(z));
    struct iovec f[2] = { { "hello", 5 }, { s_buf, 300 } };
    assert(zt_zmtp_sendv(z, f, NULL, 2) == ZT_EIO); /* no connection yet */
    assert(zt_zmtp_poke(z) && zt_zmtp_connected(z) && !zt_zmtp_poke(z)); /* once */
    memset(s_buf, 7, 300);
    assert(zt_zmtp_sendv(z, f, NULL, 2) == ZT_OK);
    zmsg_t *got = zmsg_recv(r);
    assert(got && zmsg_size(got) == 3);
    zframe_t *id = zmsg_pop(got), *a = zmsg_pop(got), *b = zmsg_pop(got);
    assert(zframe_streq(a, "hello") && zframe_size(b) == 300 && ((char *) zframe_data(b))[299] == 7);
    zframe_destroy(&a);
    zframe_destroy(&b);
    zmsg_destroy(&got);
    /* back: a small frame, then a large one, into a frame of its own */
    char *big = malloc(sizeof s_buf);
    for (size_t i = 0; i < sizeof s_buf; i++)
        big[i] = (char) (i * 31);
    zframe_send(&id, r, ZFRAME_MORE | ZFRAME_REUSE);
    zsock_send(r, "sb", "head", big, sizeof s_buf);
    /* a message of 3 parts where the caller takes 2: dropped, the next kept */
    zframe_send(&id, r, ZFRAME_MORE | ZFRAME_REUSE);
    zsock_send(r, "sss", "x", "y", "z");
    zframe_send(&id, r, ZFRAME_MORE | ZFRAME_REUSE);
    zsock_send(r, "s", "after");
    zmq_msg_t parts[2];
    assert(s_test_recv(z, parts, 2) == 2); /* the large frame read straight into one of its own */
    assert(zmq_msg_size(&parts[0]) == 4 && zmq_msg_size(&parts[1]) == sizeof s_buf &&
           !memcmp(zmq_msg_data(&parts[1]), big, sizeof s_buf));
    zmq_msg_close(&parts[0]);
    zmq_msg_close(&parts[1]);
    assert(s_test_recv(z, parts, 2) == 1 && zmq_msg_size(&parts[0]) == 5 &&
           !memcmp(zmq_msg_data(&parts[0]), "after", 5));
    zmq_msg_close(&parts[0]);
    s_test_together(z, r, id);
    s_test_backlog(z, r, big);
    /* a frame past the limit: the connection goes, nothing is handed on */
    zt_zmtp_set_limit(z, 1000);
    zframe_send(&id, r, ZFRAME_MORE | ZFRAME_REUSE);
    zsock_send(r, "b", big, (size_t) 5000);
    for (int i = 0; i < 200 && zt_zmtp_connected(z); i++) {
        assert(zt_zmtp_recv(z, parts, 2) == 0);
        zt_wait_fd(zt_zmtp_fd(z), POLLIN, 10);
    }
    assert(!zt_zmtp_connected(z) && zt_wait_fd(zt_zmtp_fd(z), POLLIN, 0) == 0); /* reads as nothing now */
    zt_zmtp_set_limit(z, zt_frame_limit());
    /* the server goes and comes back on the same port: connected again */
    zframe_destroy(&id);
    zsock_destroy(&r);
    usleep(60 * 1000);
    assert(!zt_zmtp_poke(z));
    r = zsock_new(ZMQ_ROUTER);
    assert(zsock_bind(r, "%s", ep) == port);
    bool again = false;
    for (int i = 0; i < 100 && !again; i++) {
        usleep(20 * 1000);
        again = zt_zmtp_poke(z);
    }
    assert(again && zt_zmtp_connected(z));
    struct iovec one = { "again", 5 };
    assert(zt_zmtp_sendv(z, &one, NULL, 1) == ZT_OK);
    got = zmsg_recv(r);
    assert(got && zmsg_size(got) == 2);
    zmsg_destroy(&got);
    free(big);
    zt_zmtp_destroy(&z);
    zsock_destroy(&r);
}
