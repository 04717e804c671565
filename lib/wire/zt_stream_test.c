/* zt_stream's selftest (zt_selftest runs it). */
#include "wire/zt_stream_internal.h"
#include "base/zt_util.h"
#include "ztrain/zt_error.h"
#include <assert.h>
#include <czmq.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Waits for one message on sock into parts; their count. */
static int s_wait(void *sock, zmq_msg_t *parts, int max)
{
    zmq_pollitem_t it = { sock, 0, ZMQ_POLLIN, 0 };
    for (int i = 0; i < 200; i++) {
        if (zmq_poll(&it, 1, 10) > 0)
            return zt_msg_recv_parts(sock, parts, max);
    }
    return 0;
}

/* A copy of n parts (to replay or tamper with). */
static void s_copy(zmq_msg_t *to, zmq_msg_t *from, int n)
{
    for (int i = 0; i < n; i++) {
        zmq_msg_init_size(&to[i], zmq_msg_size(&from[i]));
        memcpy(zmq_msg_data(&to[i]), zmq_msg_data(&from[i]), zmq_msg_size(&from[i]));
    }
}

/* Sealed once for two clients: each opens the same frames; a frame sealed
 * before a client joined, or sent it twice, is refused; a client cannot
 * seal under the server's one-to-many key. */
static void s_selftest_shared(void *ctx, void *r, zt_streams_t *srv, zt_stream_t *cl, void *d,
                              const zt_stream_cfg_t *cc, const zt_msg_t *mp, const float *x)
{
    zmq_msg_t p[8];
    int n;
    zt_msg_t m = *mp;
    void *d2 = zmq_socket(ctx, ZMQ_DEALER);
    assert(zmq_connect(d2, "inproc://zt-stream-selftest") == 0);
    zt_stream_cfg_t c2cfg = *cc;
    snprintf(c2cfg.self, sizeof c2cfg.self, "workerpool1-1");
    zt_stream_t *c2 = zt_stream_connect(&c2cfg, d2), *from2;
    zt_stream_shared_t early;
    zt_msg_t res = { .type = ZT_MSG_AR_RESULT, .pool = 2, .incarnation = 3 };
    res.u.AR_RESULT = (zt_msg_AR_RESULT_t) { .bucket = 1, .gen = 4, .offset = 0, .count = 16, .dtype = 0 };
    assert(zt_streams_seal_shared(srv, &res, x, 64, &early) == ZT_OK); /* before c2 is accepted */
    n = s_wait(r, p, 8);
    assert(n == 2 && zt_streams_recv(srv, p, &n, &from2) == ZT_OK && n == 0);
    n = s_wait(d2, p, 8);
    assert(n == 1 && zt_stream_recv(c2, p, &n) == ZT_OK && zt_stream_ready(c2));
    zt_stream_t *to1 = NULL, *to2 = NULL;
    for (int i = 0; i < zt_streams_count(srv); i++) {
        if (!strcmp(srv->s[i]->peer, "workerpool1-0"))
            to1 = srv->s[i];
        if (!strcmp(srv->s[i]->peer, "workerpool1-1"))
            to2 = srv->s[i];
    }
    assert(to1 && to2 && zt_streams_send_shared(srv, to2, &early) == ZT_OK);
    n = s_wait(d2, p, 8);
    assert(n == 3 && zt_stream_recv(c2, p, &n) == ZT_EPROTO && zt_stream_drops(c2)->replayed == 1);
    zt_stream_shared_close(&early);
    zt_stream_shared_t sh;
    assert(zt_streams_seal_shared(srv, &res, x, 64, &sh) == ZT_OK);
    for (int twice = 0; twice < 2; twice++) {
        assert(zt_streams_send_shared(srv, to1, &sh) == ZT_OK && zt_streams_send_shared(srv, to2, &sh) == ZT_OK);
        zt_stream_t *cls[2] = { cl, c2 };
        void *ds[2] = { d, d2 };
        for (int c = 0; c < 2; c++) {
            assert((n = s_wait(ds[c], p, 8)) == 3);
            int rc = zt_stream_recv(cls[c], p, &n);
            assert(twice ? rc == ZT_EPROTO && n == 0
                         : rc == ZT_OK && n == 2 && zmq_msg_size(&p[1]) == 64 && !memcmp(zmq_msg_data(&p[1]), x, 64));
            zt_msg_close_parts(p, n);
        }
    }
    zt_stream_shared_close(&sh);
    /* a client's frame marked as sealed under the one-to-many key */
    assert(zt_stream_send(cl, &m, x, 64) == ZT_OK);
    n = s_wait(r, p, 8);
    ((uint8_t *) zmq_msg_data(&p[2]))[0] |= 0x80;
    uint64_t bad = zt_streams_drops(srv)->bad_seal;
    assert(zt_streams_recv(srv, p, &n, &from2) == ZT_EPROTO && zt_streams_drops(srv)->bad_seal == bad + 1);
    zt_stream_destroy(&c2);
    zmq_close(d2);
}

/* An opening lost (the server took it and died, say): the client opens
 * again once it is stale, and only then; a ready stream never. */
static void s_selftest_stale(void *ctx, const zt_stream_cfg_t *cs, const zt_stream_cfg_t *cc)
{
    void *r = zmq_socket(ctx, ZMQ_ROUTER), *d = zmq_socket(ctx, ZMQ_DEALER);
    assert(zmq_bind(r, "inproc://zt-stream-stale") == 0 && zmq_connect(d, "inproc://zt-stream-stale") == 0);
    zt_streams_t *srv = zt_streams_new(cs, r);
    zt_stream_t *cl = zt_stream_connect(cc, d), *from;
    zmq_msg_t p[8];
    int n = s_wait(r, p, 8);
    assert(n == 2);
    zt_msg_close_parts(p, n); /* lost */
    zt_stream_reopen_stale(cl, 60000); /* not stale yet */
    zmq_pollitem_t it = { r, 0, ZMQ_POLLIN, 0 };
    assert(zmq_poll(&it, 1, 50) == 0);
    zt_stream_reopen_stale(cl, 0);
    n = s_wait(r, p, 8);
    assert(n == 2 && zt_streams_recv(srv, p, &n, &from) == ZT_OK);
    n = s_wait(d, p, 8);
    assert(n == 1 && zt_stream_recv(cl, p, &n) == ZT_OK && zt_stream_ready(cl));
    zt_stream_reopen_stale(cl, 0); /* ready: nothing */
    assert(zt_stream_ready(cl) && zmq_poll(&it, 1, 50) == 0);
    zt_stream_destroy(&cl);
    zt_streams_destroy(&srv);
    zmq_close(d);
    zmq_close(r);
}

/* A message of two payloads cut to one on the path (its second payload
 * and seal dropped): the first no longer opens; whole, it does. */
static void s_selftest_cut(void *d, zt_streams_t *srv, zt_stream_t *from, zt_stream_t *cl, const zt_msg_t *ack,
                           const float *x)
{
    const void *two[2] = { x, x + 16 };
    size_t sizes[2] = { 64, 64 };
    zmq_msg_t p[8], cut;
    assert(zt_streams_sendv(srv, from, ack, two, sizes, 2) == ZT_OK);
    int n = s_wait(d, p, 8);
    assert(n == 4 && zmq_msg_size(&p[1]) == 2 * SEAL_BYTES && zmq_msg_init_size(&cut, SEAL_BYTES) == 0);
    memcpy(zmq_msg_data(&cut), zmq_msg_data(&p[1]), SEAL_BYTES);
    zmq_msg_move(&p[1], &cut);
    zmq_msg_close(&cut);
    zmq_msg_close(&p[--n]); /* n 3 */
    uint64_t bad = zt_stream_drops(cl)->bad_seal;
    assert(zt_stream_recv(cl, p, &n) == ZT_EPROTO && n == 0 && zt_stream_drops(cl)->bad_seal == bad + 1);
    assert(zt_streams_sendv(srv, from, ack, two, sizes, 2) == ZT_OK && (n = s_wait(d, p, 8)) == 4);
    assert(zt_stream_recv(cl, p, &n) == ZT_OK && n == 3 && !memcmp(zmq_msg_data(&p[2]), x + 16, 64));
    zt_msg_close_parts(p, n);
}

/* A client's opening captured on the path and sent again: from the
 * client's own connection (the server answers, the client, already open,
 * takes no notice, and the stream's keys serve on both ways), and from an
 * attacker's connection (answered, never confirmed: nothing it sends
 * opens, and its stream is the first to go). */
static void s_selftest_replayed(void *ctx, void *r, zt_streams_t *srv, zt_stream_t *cl, void *d, const zt_msg_t *m,
                                const float *x)
{
    zmq_msg_t p[8], open1[2];
    zt_stream_t *from;
    assert(zt_stream_reopen(cl) == ZT_OK);
    int n = s_wait(r, p, 8);
    assert(n == 2);
    s_copy(open1, p, 2); /* [id][SEAL_OPEN] as it came */
    assert(zt_streams_recv(srv, p, &n, &from) == ZT_OK && n == 0);
    n = s_wait(d, p, 8);
    assert(n == 1 && zt_stream_recv(cl, p, &n) == ZT_OK && zt_stream_ready(cl));
    assert(zt_stream_send(cl, m, x, 64) == ZT_OK); /* confirms the new keys */
    n = s_wait(r, p, 8);
    assert(zt_streams_recv(srv, p, &n, &from) == ZT_OK && n == 3 && zt_streams_find(srv, &p[0]) == from);
    zt_msg_close_parts(p, n);
    /* on the client's own connection (its routing id): answered, ignored */
    n = 2;
    zmq_msg_t again[2];
    s_copy(again, open1, 2);
    assert(zt_streams_recv(srv, again, &n, &from) == ZT_OK && n == 0);
    n = s_wait(d, p, 8);
    assert(n == 1 && zt_stream_recv(cl, p, &n) == ZT_EPROTO && zt_stream_ready(cl));
    zt_msg_t ack = { .type = ZT_MSG_PS_ACK, .incarnation = 3 };
    assert(zt_stream_send(cl, m, x, 64) == ZT_OK);
    n = s_wait(r, p, 8);
    assert(zt_streams_recv(srv, p, &n, &from) == ZT_OK && n == 3 && !memcmp(zmq_msg_data(&p[2]), x, 64));
    zt_msg_close_parts(p, n);
    assert(zt_streams_send(srv, from, &ack, NULL, 0) == ZT_OK);
    n = s_wait(d, p, 8);
    assert(n == 2 && zt_stream_recv(cl, p, &n) == ZT_OK && n == 1);
    zt_msg_close_parts(p, n);
    /* from another connection: answered, but its stream never confirmed */
    void *d3 = zmq_socket(ctx, ZMQ_DEALER);
    assert(zmq_connect(d3, "inproc://zt-stream-selftest") == 0);
    int before = zt_streams_count(srv);
    zmq_send(d3, zmq_msg_data(&open1[1]), zmq_msg_size(&open1[1]), 0);
    n = s_wait(r, p, 8);
    zmq_msg_t attacker;
    zmq_msg_init_size(&attacker, zmq_msg_size(&p[0]));
    memcpy(zmq_msg_data(&attacker), zmq_msg_data(&p[0]), zmq_msg_size(&p[0]));
    assert(n == 2 && zt_streams_recv(srv, p, &n, &from) == ZT_OK && zt_streams_count(srv) == before + 1);
    assert(zt_streams_find(srv, &attacker) == NULL); /* no reply goes to it */
    n = s_wait(d3, p, 8);
    assert(n == 1);
    zt_msg_close_parts(p, n);
    char junk[SEAL_BYTES] = { 0 };
    zmq_send(d3, "h", 1, ZMQ_SNDMORE);
    zmq_send(d3, junk, sizeof junk, 0);
    n = s_wait(r, p, 8);
    assert(n == 3 && zt_streams_recv(srv, p, &n, &from) == ZT_EPROTO);
    zmq_msg_close(&attacker);
    zmq_close(d3);
    zt_msg_close_parts(open1, 2);
}

/* The server a client asks for: one by the name the client gave is
 * served; an opening meant for another server of the job is dropped, and
 * so is an answer from another server than the one asked for. */
static void s_selftest_misdirected(void *ctx, const zt_stream_cfg_t *cs, const zt_stream_cfg_t *cc)
{
    void *r = zmq_socket(ctx, ZMQ_ROUTER);
    assert(zmq_bind(r, "inproc://zt-stream-named") == 0);
    zt_streams_t *srv = zt_streams_new(cs, r); /* workerpool2-0 */
    const char *ask[3] = { "workerpool2-0", "workerpool2-1", "" };
    for (int k = 0; k < 3; k++) {
        void *d = zmq_socket(ctx, ZMQ_DEALER);
        assert(zmq_connect(d, "inproc://zt-stream-named") == 0);
        zt_stream_t *cl = zt_stream_connect_to(cc, d, ask[k]), *from;
        zmq_msg_t p[8];
        uint64_t bad = zt_streams_drops(srv)->bad_open;
        int n = s_wait(r, p, 8);
        int rc = zt_streams_recv(srv, p, &n, &from);
        assert(k == 1 ? rc == ZT_EPROTO && zt_streams_drops(srv)->bad_open == bad + 1 : rc == ZT_OK);
        if (k != 1) {
            n = s_wait(d, p, 8);
            assert(n == 1 && zt_stream_recv(cl, p, &n) == ZT_OK && zt_stream_ready(cl));
        }
        zt_stream_destroy(&cl);
        zmq_close(d);
    }
    /* a client that seals with the other cipher: refused, and told apart
     * from a forgery (said in the log); a forged proof is not */
    const char *mine = zt_seal_cipher_name();
    for (int k = 0; k < 2; k++) {
        void *d = zmq_socket(ctx, ZMQ_DEALER);
        assert(zmq_connect(d, "inproc://zt-stream-named") == 0);
        zt_seal_use_cipher(zt_seal_cipher_other());
        zt_stream_cfg_t forger = *cc;
        forger.secret[0] ^= (uint8_t) k; /* k = 1: another secret */
        zt_stream_t *cl = zt_stream_connect(&forger, d), *from;
        zt_seal_use_cipher(mine);
        zmq_msg_t p[8];
        uint64_t bad = zt_streams_drops(srv)->bad_open;
        srv->told_cipher_ms = 0;
        int n = s_wait(r, p, 8);
        assert(zt_streams_recv(srv, p, &n, &from) == ZT_EPROTO && zt_streams_drops(srv)->bad_open == bad + 1);
        assert(k == 0 ? srv->told_cipher_ms > 0 : srv->told_cipher_ms == 0);
        zt_stream_destroy(&cl);
        zmq_close(d);
    }
    /* the client asks for workerpool2-1 and an attacker on the path hands
     * its opening, rewritten, to workerpool2-0: the proof fails there; the
     * same client's opening, asking workerpool2-0, answered by a server
     * named otherwise, is refused at the client */
    zt_stream_cfg_t other = *cs;
    snprintf(other.self, sizeof other.self, "workerpool2-1");
    zt_streams_t *srv1 = zt_streams_new(&other, r);
    void *d = zmq_socket(ctx, ZMQ_DEALER);
    assert(zmq_connect(d, "inproc://zt-stream-named") == 0);
    zt_stream_t *cl = zt_stream_connect_to(cc, d, "workerpool2-0"), *from;
    zmq_msg_t p[8];
    int n = s_wait(r, p, 8);
    assert(n == 2 && zt_streams_recv(srv1, p, &n, &from) == ZT_EPROTO); /* meant for workerpool2-0 */
    /* the server's own check passed by an opening that names none */
    snprintf(cl->expect, sizeof cl->expect, "%s", "");
    assert(zt_stream_reopen(cl) == ZT_OK);
    snprintf(cl->expect, sizeof cl->expect, "%s", "workerpool2-0");
    n = s_wait(r, p, 8);
    assert(n == 2 && zt_streams_recv(srv1, p, &n, &from) == ZT_OK);
    uint64_t bad = zt_stream_drops(cl)->bad_open;
    n = s_wait(d, p, 8);
    assert(n == 1 && zt_stream_recv(cl, p, &n) == ZT_EPROTO && !zt_stream_ready(cl) &&
           zt_stream_drops(cl)->bad_open == bad + 1);
    zt_stream_destroy(&cl);
    zmq_close(d);
    zt_streams_destroy(&srv1);
    zt_streams_destroy(&srv);
    zmq_close(r);
}

/* Messages of three clients opened together on a team (a reducer's
 * batch): the openings in the batch itself, each client's messages in
 * order, a flipped bit and a replay among them dropped and counted, every
 * other message opened to its own bytes. */
static void s_selftest_many(void *ctx, const zt_stream_cfg_t *cs, const zt_stream_cfg_t *cc)
{
    void *r = zmq_socket(ctx, ZMQ_ROUTER), *d[3];
    assert(zmq_bind(r, "inproc://zt-stream-many") == 0);
    zt_streams_t *srv = zt_streams_new(cs, r);
    zt_stream_t *cl[3];
    zt_team_t *team = zt_team_new(2, NULL);
    zmq_msg_t p[24][4], copy[4];
    zt_streams_item_t it[24];
    int k = 0;
    for (int c = 0; c < 3; c++) {
        zt_stream_cfg_t cfg = *cc;
        snprintf(cfg.self, sizeof cfg.self, "workerpool1-%d", c);
        d[c] = zmq_socket(ctx, ZMQ_DEALER);
        assert(zmq_connect(d[c], "inproc://zt-stream-many") == 0 && (cl[c] = zt_stream_connect(&cfg, d[c])));
        it[k] = (zt_streams_item_t) { p[k], s_wait(r, p[k], 4) };
        assert(it[k++].n == 2);
    }
    zt_streams_open_many(srv, it, k, team);
    assert(zt_streams_count(srv) == 3);
    for (int c = 0; c < 3; c++) {
        assert(it[c].n == 0);
        int n = s_wait(d[c], p[0], 4);
        assert(n == 1 && zt_stream_recv(cl[c], p[0], &n) == ZT_OK && zt_stream_ready(cl[c]));
    }
    float x[64];
    zt_msg_t m = { .type = ZT_MSG_PS_PUSH, .pool = 1, .incarnation = 3 };
    for (k = 0; k < 18; k++) { /* client k % 3's (k / 3)-th: x[0] = k */
        for (int i = 0; i < 64; i++)
            x[i] = (float) (k * 100 + i);
        assert(zt_stream_send(cl[k % 3], &m, x, sizeof x) == ZT_OK);
        it[k] = (zt_streams_item_t) { p[k], s_wait(r, p[k], 4) };
        assert(it[k].n == 4);
        if (k == 3)
            s_copy(copy, p[k], 4);
    }
    ((uint8_t *) zmq_msg_data(&p[7][3]))[5] ^= 0x10; /* client 1's third, tampered with */
    it[k++] = (zt_streams_item_t) { p[18], 4 };      /* client 0's second, again */
    memcpy(p[18], copy, sizeof copy);
    uint64_t bad = zt_streams_drops(srv)->bad_seal, replayed = zt_streams_drops(srv)->replayed;
    zt_streams_open_many(srv, it, k, team);
    for (int i = 0; i < k; i++) {
        if (i == 7 || i == 18) {
            assert(it[i].n == ZT_EPROTO);
            continue;
        }
        assert(it[i].n == 3 && zmq_msg_size(&p[i][2]) == sizeof x);
        const float *y = zmq_msg_data(&p[i][2]);
        for (int j = 0; j < 64; j++)
            assert(y[j] == (float) (i * 100 + j));
        zt_msg_close_parts(p[i], 3);
    }
    assert(zt_streams_drops(srv)->bad_seal == bad + 1 && zt_streams_drops(srv)->replayed == replayed + 1);
    for (int c = 0; c < 3; c++) {
        zt_stream_destroy(&cl[c]);
        zmq_close(d[c]);
    }
    zt_team_destroy(&team);
    zt_streams_destroy(&srv);
    zmq_close(r);
}

/* The cases that make servers of their own. */
static void s_selftest_own_servers(void *ctx, const zt_stream_cfg_t *cs, const zt_stream_cfg_t *cc)
{
    s_selftest_stale(ctx, cs, cc);
    s_selftest_misdirected(ctx, cs, cc);
    s_selftest_many(ctx, cs, cc);
}

/* Long on purpose: one client and server through a whole life (opening,
 * messages, replays and flipped bits, strangers, the server's restart),
 * each step relying on the state the last left. */
void zt_stream_selftest(void)
{
    void *ctx = zmq_ctx_new();
    void *r = zmq_socket(ctx, ZMQ_ROUTER), *d = zmq_socket(ctx, ZMQ_DEALER);
    assert(zmq_bind(r, "inproc://zt-stream-selftest") == 0 && zmq_connect(d, "inproc://zt-stream-selftest") == 0);
    zt_stream_cfg_t cs = { .job = "j", .incarnation = 3 }, cc;
    assert(zt_seal_random(cs.secret, sizeof cs.secret) == ZT_OK);
    cc = cs;
    snprintf(cs.self, sizeof cs.self, "workerpool2-0");
    snprintf(cc.self, sizeof cc.self, "workerpool1-0");
    zt_streams_t *srv = zt_streams_new(&cs, r);
    zt_stream_t *cl = zt_stream_connect(&cc, d), *from;
    assert(cl && !zt_stream_ready(cl));
    zmq_msg_t p[8], keep[8];
    int n = s_wait(r, p, 8);
    assert(n == 2 && zt_streams_recv(srv, p, &n, &from) == ZT_OK && n == 0 && zt_streams_count(srv) == 1);
    n = s_wait(d, p, 8);
    assert(n == 1 && zt_stream_recv(cl, p, &n) == ZT_OK && n == 0 && zt_stream_ready(cl));
    assert(!strcmp(zt_stream_peer(cl), "workerpool2-0"));

    /* a push with 1 MiB of payload, and the reply */
    size_t len = 1 << 20;
    float *x = malloc(len);
    for (size_t i = 0; i < len / 4; i++)
        x[i] = (float) i * 0.5f;
    zt_msg_t m = { .type = ZT_MSG_PS_PUSH, .pool = 1, .incarnation = 3 };
    m.u.PS_PUSH = (zt_msg_PS_PUSH_t) { .req = 7, .offset = 0, .count = (int64_t) (len / 4), .step = 1 };
    assert(zt_stream_send(cl, &m, x, len) == ZT_OK);
    assert((n = s_wait(r, p, 8)) == 4);
    s_copy(keep, p, n); /* the sealed frames as they came */
    assert(zt_streams_recv(srv, p, &n, &from) == ZT_OK && n == 3 && from);
    zt_msg_t got;
    assert(zt_msg_decode(zmq_msg_data(&p[1]), zmq_msg_size(&p[1]), &got, NULL) == ZT_OK && got.u.PS_PUSH.req == 7);
    assert(zmq_msg_size(&p[2]) == len && !memcmp(zmq_msg_data(&p[2]), x, len));
    zt_msg_close_parts(p, n);
    zt_msg_t ack = { .type = ZT_MSG_PS_ACK, .incarnation = 3 };
    ack.u.PS_ACK.req = 7;
    assert(zt_streams_send(srv, from, &ack, NULL, 0) == ZT_OK);
    n = s_wait(d, p, 8);
    assert(n == 2 && zt_stream_recv(cl, p, &n) == ZT_OK && n == 1);
    assert(zt_msg_decode(zmq_msg_data(&p[0]), zmq_msg_size(&p[0]), &got, NULL) == ZT_OK &&
           got.type == ZT_MSG_PS_ACK && got.u.PS_ACK.req == 7);
    zmq_msg_close(&p[0]);

    /* the same frames again: a replay, dropped */
    n = 4;
    assert(zt_streams_recv(srv, keep, &n, &from) == ZT_EPROTO && n == 0 && zt_streams_drops(srv)->replayed == 1);
    /* a flipped bit in a payload, in a header: dropped */
    for (int where = 2; where >= 1; where--) {
        assert(zt_stream_send(cl, &m, x, len) == ZT_OK);
        assert((n = s_wait(r, p, 8)) == 4);
        ((uint8_t *) zmq_msg_data(&p[where]))[zmq_msg_size(&p[where]) / 2] ^= 0x04;
        assert(zt_streams_recv(srv, p, &n, &from) == ZT_EPROTO && n == 0);
    }
    assert(zt_streams_drops(srv)->bad_seal == 2);
    /* and the stream goes on */
    assert(zt_stream_send(cl, &m, x, len) == ZT_OK);
    n = s_wait(r, p, 8);
    assert(zt_streams_recv(srv, p, &n, &from) == ZT_OK && n == 3 && !memcmp(zmq_msg_data(&p[2]), x, len));
    zt_msg_close_parts(p, n);

    s_selftest_cut(d, srv, from, cl, &ack, x);
    /* another job's secret, another incarnation: the opening fails */
    for (int k = 0; k < 2; k++) {
        zt_stream_cfg_t other = cc;
        if (k == 0)
            other.secret[0] ^= 1;
        else
            other.incarnation = 2;
        void *d2 = zmq_socket(ctx, ZMQ_DEALER);
        assert(zmq_connect(d2, "inproc://zt-stream-selftest") == 0);
        zt_stream_t *c2 = zt_stream_connect(&other, d2);
        n = s_wait(r, p, 8);
        assert(n == 2 && zt_streams_recv(srv, p, &n, &from) == ZT_EPROTO);
        assert(zt_streams_drops(srv)->bad_open == (uint64_t) k + 1 && zt_streams_count(srv) == 1);
        /* its sealed-looking frames (made under its own unagreed keys) are
         * of no stream: dropped without a word */
        char junk[SEAL_BYTES] = { 0 };
        zmq_send(d2, "h", 1, ZMQ_SNDMORE);
        zmq_send(d2, junk, sizeof junk, 0);
        n = s_wait(r, p, 8);
        assert(n == 3 && zt_streams_recv(srv, p, &n, &from) == ZT_EPROTO);
        zmq_pollitem_t quiet = { d2, 0, ZMQ_POLLIN, 0 };
        assert(zmq_poll(&quiet, 1, 50) == 0);
        zt_stream_destroy(&c2);
        zmq_close(d2);
    }

    s_selftest_shared(ctx, r, srv, cl, d, &cc, &m, x);
    s_selftest_replayed(ctx, r, srv, cl, d, &m, x);
    s_selftest_own_servers(ctx, &cs, &cc);
    /* the server restarts (a new table): the client's next message is met
     * with silence; waiting on an answer, it hears nothing and opens again */
    zt_streams_destroy(&srv);
    srv = zt_streams_new(&cs, r);
    assert(zt_stream_send(cl, &m, x, 64) == ZT_OK);
    n = s_wait(r, p, 8);
    assert(zt_streams_recv(srv, p, &n, &from) == ZT_EPROTO && zt_streams_drops(srv)->no_stream == 1);
    zmq_pollitem_t quiet = { d, 0, ZMQ_POLLIN, 0 };
    assert(zmq_poll(&quiet, 1, 50) == 0);
    zt_stream_reopen_unheard(cl, 60000); /* heard from recently: nothing */
    assert(zt_stream_ready(cl));
    zt_stream_reopen_unheard(cl, 0);
    assert(!zt_stream_ready(cl)); /* opening again */
    n = s_wait(r, p, 8);
    assert(n == 2 && zt_streams_recv(srv, p, &n, &from) == ZT_OK);
    n = s_wait(d, p, 8);
    assert(n == 1 && zt_stream_recv(cl, p, &n) == ZT_OK && zt_stream_ready(cl));
    assert(zt_stream_send(cl, &m, x, 64) == ZT_OK);
    n = s_wait(r, p, 8);
    assert(zt_streams_recv(srv, p, &n, &from) == ZT_OK && n == 3 && !memcmp(zmq_msg_data(&p[2]), x, 64));
    zt_msg_close_parts(p, n);
    zt_msg_close_parts(keep, 4);
    free(x);
    zt_stream_destroy(&cl);
    zt_stream_destroy(&cl);
    zt_streams_destroy(&srv);
    zt_streams_destroy(&srv);
    zmq_close(d);
    zmq_close(r);
    zmq_ctx_term(ctx);
}
