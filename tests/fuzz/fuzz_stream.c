/* libFuzzer target: the sealed framing (zt_stream) on both ends. A server's
 * table and a client's stream, agreed once over inproc sockets, are fed
 * records of: a client's real sealed message with fuzzed bytes flipped
 * (header, seal frame or payload) or its frames dropped, reordered or
 * replayed; openings with fuzzed names, salts and proofs; raw parts of any
 * shape; and, on the client's side, fuzzed accepts, resets and sealed
 * replies. Nothing may crash, leak or open what was not sealed as sent.
 *   make fuzz   (clang), then build-fuzz/bin/fuzz_stream -max_total_time=600
 * Input: records, as fuzz_input.h reads them. */
#include "wire/zt_stream.h"
#include "fuzz_input.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_log.h"
#include <assert.h>
#include <czmq.h>

static void *s_ctx, *s_router, *s_dealer;
static zt_streams_t *s_srv;
static zt_stream_t *s_cl;

static int s_wait(void *sock, zmq_msg_t *parts, int max)
{
    zmq_pollitem_t it = { sock, 0, ZMQ_POLLIN, 0 };
    return zmq_poll(&it, 1, 1000) > 0 ? zt_msg_recv_parts(sock, parts, max) : 0;
}

static void s_setup(void)
{
    zt_log_init("fuzz_stream", 0);
    zt_log_set_level(ZT_LOG_ERROR);
    s_ctx = zmq_ctx_new();
    s_router = zmq_socket(s_ctx, ZMQ_ROUTER);
    s_dealer = zmq_socket(s_ctx, ZMQ_DEALER);
    zmq_bind(s_router, "inproc://fuzz-stream");
    zmq_connect(s_dealer, "inproc://fuzz-stream");
    zt_stream_cfg_t cfg = { .job = "fuzz", .incarnation = 1 };
    memset(cfg.secret, 7, sizeof cfg.secret);
    snprintf(cfg.self, sizeof cfg.self, "workerpool2-0");
    s_srv = zt_streams_new(&cfg, s_router);
    snprintf(cfg.self, sizeof cfg.self, "workerpool1-0");
    s_cl = zt_stream_connect(&cfg, s_dealer);
}

/* The client's handshake again, when a record broke it. */
static void s_reagree(void)
{
    zmq_msg_t p[8];
    zt_stream_t *from;
    for (int round = 0; round < 3 && !zt_stream_ready(s_cl); round++) {
        zt_stream_reopen(s_cl);
        int n = s_wait(s_router, p, 8);
        if (n)
            zt_streams_recv(s_srv, p, &n, &from);
        n = s_wait(s_dealer, p, 8);
        if (n)
            zt_stream_recv(s_cl, p, &n);
    }
}

static void s_close(zmq_msg_t *p, int n)
{
    for (int i = 0; i < n; i++)
        zmq_msg_close(&p[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!s_ctx)
        s_setup();
    s_in_t in = { data, size };
    for (int rec = 0; rec < 32 && in.n; rec++) {
        s_reagree();
        uint8_t sel = s_byte(&in);
        zmq_msg_t p[8];
        zt_stream_t *from;
        int n;
        switch (sel % 4) {
        case 0: { /* a real sealed message, then one byte of it flipped */
            zt_msg_t m = { .type = ZT_MSG_PS_PUSH, .pool = 1, .incarnation = 1 };
            m.u.PS_PUSH = (zt_msg_PS_PUSH_t) { .req = rec, .offset = s_int(&in), .count = s_int(&in) };
            const void *payload = NULL;
            size_t plen = 0;
            s_take_payload(&in, &payload, &plen);
            if (zt_stream_send(s_cl, &m, payload, plen) != ZT_OK || !(n = s_wait(s_router, p, 8)))
                break;
            if (n < 3) {
                s_close(p, n);
                break;
            }
            int part = 1 + s_byte(&in) % (n - 1);
            size_t at = zmq_msg_size(&p[part]) ? s_byte(&in) % zmq_msg_size(&p[part]) : 0;
            uint8_t flip = s_byte(&in);
            if (zmq_msg_size(&p[part]))
                ((uint8_t *) zmq_msg_data(&p[part]))[at] ^= flip;
            int rc = zt_streams_recv(s_srv, p, &n, &from);
            assert(flip == 0 || rc != ZT_OK); /* an altered frame never opens */
            s_close(p, n);
            break;
        }
        case 1: { /* an opening with fuzzed fields */
            zt_msg_t m = { .type = ZT_MSG_SEAL_OPEN, .incarnation = s_int(&in) };
            for (int f = 0; f < 3; f++) {
                char *field = f == 0 ? m.u.SEAL_OPEN.name : f == 1 ? m.u.SEAL_OPEN.salt : m.u.SEAL_OPEN.mac;
                size_t len = s_byte(&in) % 70;
                for (size_t i = 0; i < len && in.n; i++)
                    field[i] = (char) ("0123456789abcdefx"[s_byte(&in) % 17]);
            }
            zframe_t *h = zt_msg_encode(&m);
            zmq_msg_init_size(&p[0], 5);
            memcpy(zmq_msg_data(&p[0]), "fuzz0", 5);
            zmq_msg_init_size(&p[1], zframe_size(h));
            memcpy(zmq_msg_data(&p[1]), zframe_data(h), zframe_size(h));
            zframe_destroy(&h);
            n = 2;
            zt_streams_recv(s_srv, p, &n, &from);
            s_close(p, n);
            break;
        }
        case 2: /* raw parts of any shape, to the server and to the client */
        case 3: {
            n = 1 + s_byte(&in) % 6;
            for (int i = 0; i < n; i++) {
                const void *payload = NULL;
                size_t plen = 0;
                s_take_payload(&in, &payload, &plen);
                if (i == 1 && (sel & 0x10)) /* a frame the size of a seal unit */
                    plen = plen > 24 ? 24 : plen;
                zmq_msg_init_size(&p[i], plen);
                memcpy(zmq_msg_data(&p[i]), payload, plen);
            }
            if (sel % 4 == 2)
                zt_streams_recv(s_srv, p, &n, &from);
            else
                zt_stream_recv(s_cl, p, &n);
            s_close(p, n);
            break;
        }
        }
        /* whatever the server answered (accepts, resets) reaches the client */
        while ((n = zt_msg_recv_parts(s_dealer, p, 8)) > 0)
            if (zt_stream_recv(s_cl, p, &n) == ZT_OK)
                s_close(p, n);
    }
    return 0;
}
