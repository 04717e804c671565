/* zt_bulk's selftests: a plain way and server, and sealed ways (with the
 * job's credentials loaded) over the router and the server's own port. */
#include "wire/zt_bulk.h"
#include "wire/zt_msg.h"
#include "base/zt_util.h"
#include "ztrain/zt_error.h"
#include <assert.h>
#include <czmq.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The next message for the caller within 2 s: its parts' count. */
static int s_test_server_take(zt_bulk_server_t *srv, zmq_msg_t *parts)
{
    for (int64_t end = zt_now_ms() + 2000; zt_now_ms() < end;) {
        zmq_pollitem_t it[2];
        zmq_poll(it, zt_bulk_server_items(srv, it), 100);
        int n = zt_bulk_server_recv(srv, parts, 8);
        if (n > 0)
            return n;
    }
    return 0;
}

static int s_test_client_take(zt_bulk_t *c, zmq_msg_t *parts)
{
    for (int64_t end = zt_now_ms() + 2000; zt_now_ms() < end;) {
        zmq_pollitem_t it = zt_bulk_item(c);
        zmq_poll(&it, 1, 100);
        int n = zt_bulk_recv(c, parts, 8);
        if (n > 0 && zt_bulk_open(c, parts, &n, NULL, 0) == ZT_OK && n > 0)
            return n;
    }
    return 0;
}

static bool s_test_is(zmq_msg_t *h, zt_msg_type_t type, int64_t count)
{
    zt_msg_t m;
    return zt_msg_decode(zmq_msg_data(h), zmq_msg_size(h), &m, NULL) == ZT_OK && m.type == type &&
           m.u.AR_PIECE.count == count;
}

/* A job that does not seal (no credentials here): plain both ways, a lent
 * payload counted until ZeroMQ lets it go, a copied one free to change at
 * once, replies of each kind. The sealed ways are the integration tests'
 * (a job's credentials). */
void zt_bulk_selftest(void)
{
    int port = 0;
    zt_bulk_server_t *srv = zt_bulk_bind(ZT_PLANE_DATA, "tcp://127.0.0.1:*", &port);
    assert(srv && port > 0 && !zt_bulk_server_seals(srv));
    zmq_msg_t parts[8];
    assert(zt_bulk_server_recv(srv, parts, 8) == ZT_ETIMEDOUT); /* none waits */
    char ep[64];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    zt_bulk_t *c = zt_bulk_connect(ZT_PLANE_DATA, ep, true);
    assert(c && !zt_bulk_sealed(c) && zt_bulk_ready(c) && !zt_bulk_unconnected(c) && zt_bulk_writable(c));
    assert(zt_bulk_wait_ready(c, 0) == ZT_OK);
    size_t n = (size_t) 1 << 20;
    uint8_t *x = malloc(n), *orig = malloc(n);
    for (size_t i = 0; i < n; i++)
        x[i] = orig[i] = (uint8_t) (i * 31 + 7);
    atomic_int lent = 0;
    zt_msg_t m = { .type = ZT_MSG_AR_PIECE };
    m.u.AR_PIECE.count = (int64_t) n;
    assert(zt_bulk_send(c, &m, x, n, &lent) == ZT_OK);
    m.u.AR_PIECE.count = 16;
    assert(zt_bulk_send(c, &m, x, 16, NULL) == ZT_OK && atomic_load(&lent) <= 1);
    m.u.AR_PIECE.count = 0;
    assert(zt_bulk_send(c, &m, NULL, 0, &lent) == ZT_OK); /* a header alone */
    int k = s_test_server_take(srv, parts);
    assert(k == 3 && s_test_is(&parts[1], ZT_MSG_AR_PIECE, (int64_t) n) && zmq_msg_size(&parts[2]) == n &&
           !memcmp(zmq_msg_data(&parts[2]), orig, n));
    zmq_msg_t id;
    zmq_msg_init(&id);
    zmq_msg_copy(&id, &parts[0]);
    zt_msg_close_parts(parts, k);
    for (int64_t end = zt_now_ms() + 2000; atomic_load(&lent) > 0 && zt_now_ms() < end;)
        zclock_sleep(1);
    assert(atomic_load(&lent) == 0); /* given back once sent */
    k = s_test_server_take(srv, parts);
    assert(k == 3 && s_test_is(&parts[1], ZT_MSG_AR_PIECE, 16) && zmq_msg_size(&parts[2]) == 16);
    zt_msg_close_parts(parts, k);
    k = s_test_server_take(srv, parts);
    assert(k == 2 && s_test_is(&parts[1], ZT_MSG_AR_PIECE, 0));
    zt_msg_close_parts(parts, k);
    assert(!zt_bulk_server_sealed_to(srv, &id));

    /* replies: copied (the bytes change at once), frames, shared (a pooled
     * copy) */
    m.u.AR_PIECE.count = 64;
    assert(zt_bulk_reply(srv, &id, &m, x, 64, NULL) == ZT_OK);
    memset(x, 0, 64);
    assert(zt_bulk_server_pool_copies(srv) == ZT_OK); /* copies pooled from here on */
    zmq_msg_t fr[2];
    zmq_msg_init_size(&fr[0], 3);
    memcpy(zmq_msg_data(&fr[0]), "abc", 3);
    zmq_msg_init_size(&fr[1], 5);
    memcpy(zmq_msg_data(&fr[1]), "defgh", 5);
    m.u.AR_PIECE.count = 2;
    assert(zt_bulk_reply_frames(srv, &id, &m, fr, 2) == ZT_OK);
    zt_bulk_shared_t sh = { 0 };
    m.u.AR_PIECE.count = 32;
    assert(zt_bulk_reply_shared(srv, &id, &m, orig, 32, NULL, &sh) == ZT_OK);
    zt_bulk_shared_close(&sh);
    k = s_test_client_take(c, parts);
    assert(k == 2 && s_test_is(&parts[0], ZT_MSG_AR_PIECE, 64) && zmq_msg_size(&parts[1]) == 64 &&
           !memcmp(zmq_msg_data(&parts[1]), orig, 64));
    zt_msg_close_parts(parts, k);
    k = s_test_client_take(c, parts);
    assert(k == 3 && s_test_is(&parts[0], ZT_MSG_AR_PIECE, 2) && zmq_msg_size(&parts[1]) == 3 &&
           !memcmp(zmq_msg_data(&parts[2]), "defgh", 5));
    zt_msg_close_parts(parts, k);
    k = s_test_client_take(c, parts);
    assert(k == 2 && s_test_is(&parts[0], ZT_MSG_AR_PIECE, 32) && !memcmp(zmq_msg_data(&parts[1]), orig, 32));
    zt_msg_close_parts(parts, k);
    for (int64_t end = zt_now_ms() + 2000; atomic_load(&lent) > 0 && zt_now_ms() < end;)
        zclock_sleep(1);
    assert(atomic_load(&lent) == 0 && zt_bulk_drops(c) == 0);
    zmq_msg_close(&id);
    zt_bulk_flush(c);
    zt_bulk_destroy(&c, 0);
    zt_bulk_server_destroy(&srv);
    assert(!c && !srv);
    free(x);
    free(orig);
}

static void *s_test_where(void *arg, const void *hdr, size_t hlen, size_t bytes)
{
    (void) hdr;
    (void) hlen;
    return bytes == 4096 ? arg : NULL;
}

/* Sealed ways, with a job's credentials loaded (zt_auth's selftest calls
 * it): loopback as between hosts (ZT_DATA_IPC=off). The stream opens; a
 * payload goes sealed (nothing lent) and opens straight into the place the
 * server names; a sum-like reply sealed once reaches the client and opens
 * into its landing place; a stranger's frames (no stream) are refused.
 * Tampered and replayed frames are the integration tests' (a relay run as
 * another user). */
static void s_test_sealed(bool direct)
{
    int port = 0;
    zt_bulk_server_t *srv = zt_bulk_bind_direct(ZT_PLANE_DATA, "tcp://127.0.0.1:*", &port, direct ? ZT_BULK_DIRECT_ALL : 0);
    zmq_pollitem_t it[2];
    assert(srv && zt_bulk_server_seals(srv) && zt_bulk_server_items(srv, it) == (direct ? 2 : 1));
    char ep[64];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    zt_bulk_t *c = zt_bulk_connect(ZT_PLANE_DATA, ep, false);
    assert(c && zt_bulk_sealed(c) && !zt_bulk_ready(c));
    zmq_msg_t parts[8];
    int opened = ZT_ETIMEDOUT; /* the opening, answered by the server itself: nothing for the caller */
    for (int64_t end = zt_now_ms() + 2000; opened == ZT_ETIMEDOUT && zt_now_ms() < end;) {
        zmq_poll(it, zt_bulk_server_items(srv, it), 100);
        opened = zt_bulk_server_recv(srv, parts, 8);
    }
    assert(opened == 0);
    for (int64_t end = zt_now_ms() + 2000; !zt_bulk_ready(c) && zt_now_ms() < end;) {
        zmq_pollitem_t ci = zt_bulk_item(c);
        zmq_poll(&ci, 1, 100);
        int n = zt_bulk_recv(c, parts, 8);
        if (n > 0 && zt_bulk_open(c, parts, &n, NULL, 0) == ZT_OK)
            zt_msg_close_parts(parts, n);
    }
    assert(zt_bulk_ready(c));
    uint8_t x[4096], land[4096];
    for (size_t i = 0; i < sizeof x; i++)
        x[i] = (uint8_t) (i * 13 + 1);
    atomic_int lent = 0;
    zt_msg_t m = { .type = ZT_MSG_AR_PIECE };
    m.u.AR_PIECE.count = 4096;
    assert(zt_bulk_send(c, &m, x, sizeof x, &lent) == ZT_OK && atomic_load(&lent) == 0); /* sealed: not lent */
    int k = 0;
    for (int64_t end = zt_now_ms() + 2000; k <= 0 && zt_now_ms() < end;) {
        zmq_poll(it, zt_bulk_server_items(srv, it), 100);
        k = zt_bulk_server_recv_into(srv, parts, 8, s_test_where, land);
    }
    assert(k == 3 && s_test_is(&parts[1], ZT_MSG_AR_PIECE, 4096) && zmq_msg_data(&parts[2]) == (void *) land &&
           !memcmp(land, x, sizeof x));
    zmq_msg_t id;
    zmq_msg_init(&id);
    zmq_msg_copy(&id, &parts[0]);
    zt_msg_close_parts(parts, k);
    assert(zt_bulk_server_sealed_to(srv, &id));
    zt_bulk_shared_t sh = { 0 };
    assert(zt_bulk_reply_shared(srv, &id, &m, x, sizeof x, NULL, &sh) == ZT_OK && sh.sh.made);
    zt_bulk_shared_close(&sh);
    memset(land, 0, sizeof land);
    k = 0;
    for (int64_t end = zt_now_ms() + 2000; k <= 0 && zt_now_ms() < end;) {
        zmq_pollitem_t ci = zt_bulk_item(c);
        zmq_poll(&ci, 1, 100);
        if ((k = zt_bulk_recv(c, parts, 8)) > 0)
            assert(zt_bulk_open(c, parts, &k, land, sizeof land) == ZT_OK);
    }
    assert(k == 2 && zmq_msg_data(&parts[1]) == (void *) land && !memcmp(land, x, sizeof x));
    zt_msg_close_parts(parts, k);

    /* refused: a stranger's frames on a bulk socket of its own (no stream) */
    zsock_t *d = zt_sock_dealer(ZT_PLANE_BULK, ep);
    assert(d);
    zsock_send(d, "sss", "header", "seal", "payload");
    int refused = 0;
    for (int64_t end = zt_now_ms() + 2000; !refused && zt_now_ms() < end;) {
        zmq_poll(it, zt_bulk_server_items(srv, it), 100);
        refused = zt_bulk_server_recv(srv, parts, 8) == ZT_EPROTO;
    }
    assert(refused);
    zt_sock_destroy(&d);
    zmq_msg_close(&id);
    zt_bulk_server_destroy(&srv); /* its clients still connected */
    zt_bulk_destroy(&c, 0);
}

void zt_bulk_selftest_sealed(void)
{
    const char *was = getenv("ZT_DATA_IPC");
    char *saved = was ? strdup(was) : NULL;
    setenv("ZT_DATA_IPC", "off", 1);
    s_test_sealed(false);
    const char *dwas = getenv("ZT_BULK_DIRECT");
    char *dsaved = dwas ? strdup(dwas) : NULL;
    setenv("ZT_BULK_DIRECT", "all", 1);
    s_test_sealed(true); /* the port served on this thread (zt_bulk_direct) */
    if (dsaved)
        setenv("ZT_BULK_DIRECT", dsaved, 1);
    else
        unsetenv("ZT_BULK_DIRECT");
    free(dsaved);
    if (saved)
        setenv("ZT_DATA_IPC", saved, 1);
    else
        unsetenv("ZT_DATA_IPC");
    free(saved);
}
