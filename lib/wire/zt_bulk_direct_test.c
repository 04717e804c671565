/* zt_bulk_direct's selftest: a port served on this thread, against both
 * kinds of client (a ZMTP end of ours, a ZeroMQ DEALER) and against raw
 * sockets that break the protocol. */
#include "wire/zt_bulk_direct.h"
#include "wire/zt_guard.h"
#include "wire/zt_msg.h"
#include "base/zt_util.h"
#include "ztrain/zt_error.h"
#include <arpa/inet.h>
#include <assert.h>
#include <czmq.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

/* The next message of the server's within 2 s: its parts' count (0: none). */
static int s_take(zt_direct_t *d, zmq_msg_t *parts, int max)
{
    for (int64_t end = zt_now_ms() + 2000; zt_now_ms() < end;) {
        zt_wait_fd(zt_direct_poll_fd(d), POLLIN, 10);
        int n = zt_direct_recv(d, parts, max);
        if (n > 0)
            return n;
    }
    return 0;
}

/* Until the server holds want connections (it closes the others), within 2 s. */
static bool s_count(zt_direct_t *d, int want)
{
    zmq_msg_t parts[4];
    for (int64_t end = zt_now_ms() + 2000; zt_now_ms() < end;) {
        zt_wait_fd(zt_direct_poll_fd(d), POLLIN, 10);
        int n = zt_direct_recv(d, parts, 4);
        assert(n == 0); /* nothing of theirs is ever a message */
        if (zt_direct_count(d) == want)
            return true;
    }
    return false;
}

/* The server's side of a handshake (it accepts as it polls), on a thread
 * of its own while this one connects. */
typedef struct {
    zt_direct_t *d;
    int want;
    bool ok;
} s_serve_t;

static void *s_serve(void *arg)
{
    s_serve_t *s = arg;
    s->ok = s_count(s->d, s->want);
    return NULL;
}

/* A raw TCP connection to port; with greet, a DEALER's greeting and READY
 * sent. */
static int s_raw(int port, bool greet)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t) port) };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert(fd >= 0 && connect(fd, (struct sockaddr *) &a, sizeof a) == 0);
    if (greet) {
        uint8_t g[64 + 2 + 28] = { 0xFF, 0, 0, 0, 0, 0, 0, 0, 0, 0x7F, 3, 0, 'N', 'U', 'L', 'L' };
        static const char ready[] = "\x05READY\x0bSocket-Type\x00\x00\x00\x06" "DEALER";
        g[64] = 0x04;
        g[65] = (uint8_t) (sizeof ready - 1);
        memcpy(g + 66, ready, sizeof ready - 1);
        assert(send(fd, g, 66 + sizeof ready - 1, 0) == (ssize_t) (66 + sizeof ready - 1));
    }
    return fd;
}

/* The two kinds of client: messages both ways, the bytes exact, a large
 * frame whole. */
static void s_test_clients(zt_direct_t *d, int port)
{
    char ep[64];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    zt_zmtp_t *z = zt_zmtp_new(ep);
    s_serve_t sv = { d, 1, false };
    pthread_t th;
    assert(z && pthread_create(&th, NULL, s_serve, &sv) == 0);
    bool up = zt_zmtp_poke(z) && zt_zmtp_connected(z); /* the server's READY came back */
    pthread_join(th, NULL);
    assert(up && sv.ok);
    size_t big = (size_t) 3 << 20;
    uint8_t *x = malloc(big);
    for (size_t i = 0; i < big; i++)
        x[i] = (uint8_t) (i * 7 + 3);
    struct iovec f[3] = { { "hdr", 3 }, { "seal", 4 }, { x, big } };
    assert(zt_zmtp_sendv(z, f, NULL, 3) == ZT_OK);
    zmq_msg_t parts[8];
    for (int64_t end = zt_now_ms() + 2000; zt_zmtp_pending(z) && zt_now_ms() < end;)
        zt_zmtp_drain(z);
    int n = s_take(d, parts, 8);
    assert(n == 4 && zmq_msg_size(&parts[0]) == 6 && zmq_msg_size(&parts[3]) == big &&
           !memcmp(zmq_msg_data(&parts[3]), x, big) && !memcmp(zmq_msg_data(&parts[2]), "seal", 4));
    zt_zmtp_t *back = zt_direct_end(d, zmq_msg_data(&parts[0]), zmq_msg_size(&parts[0]));
    assert(back && zt_zmtp_greeted(back));
    assert(zt_zmtp_sendv(back, f, NULL, 3) == ZT_OK);
    zt_msg_close_parts(parts, n);
    zmq_msg_t got[4];
    n = 0;
    for (int64_t end = zt_now_ms() + 2000; !n && zt_now_ms() < end;) {
        zt_zmtp_flush(back);
        zt_wait_fd(zt_zmtp_poll_fd(z), POLLIN, 10);
        n = zt_zmtp_recv(z, got, 4);
    }
    assert(n == 3 && zmq_msg_size(&got[2]) == big && !memcmp(zmq_msg_data(&got[2]), x, big));
    zt_msg_close_parts(got, n);

    /* a ZeroMQ DEALER (ZMTP 3.1, as a bulk socket of ZeroMQ speaks it) */
    zsock_t *dealer = zsock_new(ZMQ_DEALER);
    assert(dealer && zsock_connect(dealer, "%s", ep) == 0);
    zsock_send(dealer, "ss", "hello", "there");
    n = s_take(d, parts, 8);
    assert(n == 3 && zmq_msg_size(&parts[2]) == 5 && !memcmp(zmq_msg_data(&parts[2]), "there", 5));
    back = zt_direct_end(d, zmq_msg_data(&parts[0]), zmq_msg_size(&parts[0]));
    assert(back && zt_zmtp_sendv(back, f + 2, NULL, 1) == ZT_OK);
    zt_msg_close_parts(parts, n);
    zmsg_t *r = NULL;
    for (int64_t end = zt_now_ms() + 2000; !r && zt_now_ms() < end;) {
        zt_zmtp_flush(back);
        zsock_set_rcvtimeo(dealer, 10);
        r = zmsg_recv(dealer);
    }
    assert(r && zmsg_size(r) == 1 && zframe_size(zmsg_first(r)) == big &&
           !memcmp(zframe_data(zmsg_first(r)), x, big));
    zmsg_destroy(&r);
    assert(zt_direct_count(d) == 2);
    zsock_destroy(&dealer);
    zt_zmtp_destroy(&z);
    assert(s_count(d, 0)); /* both gone: their connections closed */
    free(x);
}

/* Strangers: garbage, a frame past the limit, a message before READY, a
 * peer gone mid-frame, a handshake never done: each closed, the refusals
 * counted, none a message. */
static void s_test_strangers(zt_direct_t *d, int port)
{
    uint64_t refused = zt_guard_refused();
    int fd = s_raw(port, false);
    const char junk[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n................................................";
    assert(send(fd, junk, sizeof junk, 0) == (ssize_t) sizeof junk);
    assert(s_count(d, 0));
    close(fd);
    assert(zt_guard_refused() == refused + 1);

    fd = s_raw(port, true); /* a frame of 2^40 bytes: past any limit */
    uint8_t huge[9] = { 0x02, 0, 0, 0, 1, 0, 0, 0, 0 };
    assert(send(fd, huge, sizeof huge, 0) == 9);
    assert(s_count(d, 0));
    close(fd);

    fd = s_raw(port, false); /* a greeting, then a message with no READY */
    uint8_t g[64 + 7] = { 0xFF, 0, 0, 0, 0, 0, 0, 0, 0, 0x7F, 3, 0, 'N', 'U', 'L', 'L' };
    memcpy(g + 64, "\x00\x05hello", 7);
    assert(send(fd, g, sizeof g, 0) == (ssize_t) sizeof g);
    assert(s_count(d, 0));
    close(fd);
    assert(zt_guard_refused() == refused + 2); /* a handshake that failed; the oversized frame came after it */

    fd = s_raw(port, true); /* gone mid-frame: 1000 of 1 MiB */
    uint8_t mid[9 + 1000] = { 0x02, 0, 0, 0, 0, 0, 0x10, 0, 0 };
    assert(send(fd, mid, sizeof mid, 0) == (ssize_t) sizeof mid);
    usleep(50 * 1000);
    close(fd);
    assert(s_count(d, 0));

    fd = s_raw(port, false); /* silent: closed after ZT_HANDSHAKE_MS */
    assert(s_count(d, 1) && s_count(d, 0));
    close(fd);
    assert(zt_guard_refused() == refused + 3);
}

/* Out of descriptors: the waiting connections stay in the kernel's queue,
 * the server does not spin on them (its descriptor reads as idle), and
 * takes them once descriptors are free again. */
static void s_test_no_fds(zt_direct_t *d, int port)
{
    int fds[3];
    for (int i = 0; i < 3; i++)
        fds[i] = s_raw(port, true);
    struct rlimit was;
    assert(getrlimit(RLIMIT_NOFILE, &was) == 0);
    int lowest = open("/dev/null", O_RDONLY); /* the next descriptor made would be this one */
    assert(lowest >= 0 && close(lowest) == 0);
    struct rlimit low = { (rlim_t) lowest, was.rlim_max };
    assert(setrlimit(RLIMIT_NOFILE, &low) == 0);
    zmq_msg_t parts[2];
    assert(zt_direct_recv(d, parts, 2) == 0 && zt_direct_count(d) == 0); /* cannot accept: paused */
    assert(zt_wait_fd(zt_direct_poll_fd(d), POLLIN, 50) == 0);          /* and not polled meanwhile */
    assert(setrlimit(RLIMIT_NOFILE, &was) == 0);
    usleep(120 * 1000);
    assert(s_count(d, 3));
    for (int i = 0; i < 3; i++)
        close(fds[i]);
    assert(s_count(d, 0));
}

void zt_direct_selftest(void)
{
    const char *was = getenv("ZT_HANDSHAKE_MS");
    char *saved = was ? strdup(was) : NULL;
    setenv("ZT_HANDSHAKE_MS", "300", 1);
    int port = 0;
    assert(!zt_direct_listen("ipc:///tmp/x", 0, &port) && !zt_direct_listen("tcp://[::1]:5", 0, &port));
    zt_direct_t *d = zt_direct_listen("tcp://127.0.0.1:*", 0, &port);
    assert(d && port > 0 && zt_direct_count(d) == 0);
    zmq_msg_t parts[4];
    assert(zt_direct_recv(d, parts, 4) == 0);
    s_test_clients(d, port);
    s_test_strangers(d, port);
    s_test_no_fds(d, port);
    zt_direct_destroy(&d);
    assert(!d);
    if (saved)
        setenv("ZT_HANDSHAKE_MS", saved, 1);
    else
        unsetenv("ZT_HANDSHAKE_MS");
    free(saved);
}
