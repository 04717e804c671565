/* libFuzzer target: a parameter server driven by a sequence of messages
 * that decode (not only raw bytes): configurations (a valid one with a
 * fuzzed size and optimizer, or fuzzed JSON), pulls, pushes and snapshot
 * requests with fuzzed ranges, steps and payloads, and other types. The
 * server must refuse what it cannot serve and never crash, hang or leak.
 *   make fuzz   (clang), then build-fuzz/bin/fuzz_ps -max_total_time=600
 *
 * Input: records of [selector byte][field bytes...]; each int64 field takes
 * a byte that picks a small value, a boundary (0, -1, INT64_MAX, 2^62,
 * INT64_MIN) or 8 raw bytes; the rest of a record (up to 64 bytes) is its
 * payload. */
#include "zt_ps_server.h"
#include "wire/zt_msg.h"
#include "ztrain/zt_log.h"
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    const uint8_t *p;
    size_t n;
} s_in_t;

static uint8_t s_byte(s_in_t *in)
{
    if (!in->n)
        return 0;
    in->n--;
    return *in->p++;
}

static int64_t s_int(s_in_t *in)
{
    uint8_t k = s_byte(in);
    switch (k % 8) {
    case 0: return 0;
    case 1: return -1;
    case 2: return INT64_MAX;
    case 3: return (int64_t) 1 << 62;
    case 4: return INT64_MIN;
    case 5: {
        uint64_t v = 0;
        for (int i = 0; i < 8; i++)
            v = (v << 8) | s_byte(in);
        return (int64_t) v;
    }
    default: return s_byte(in) + 256 * (k & 1); /* small: within a small model */
    }
}

static zt_ps_server_t *s_server;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!s_server) {
        zt_log_init("fuzz_ps", 0);
        zt_log_set_level(ZT_LOG_ERROR);
        zt_ps_server_opts_t o = { "inproc://fuzz-ps", 0, 1, NULL, NULL, 0, NULL };
        s_server = zt_ps_server_new(&o);
        if (!s_server)
            return 0;
    }
    s_in_t in = { data, size };
    for (int rec = 0; rec < 64 && in.n; rec++) {
        uint8_t sel = s_byte(&in);
        zt_msg_t m = { .pool = 1, .index = (int) (s_byte(&in) % 4) };
        char json[512];
        const void *payload = NULL;
        size_t plen = 0;
        switch (sel % 6) {
        case 0: { /* a configuration: valid with a fuzzed size, or fuzzed text */
            m.type = ZT_MSG_PS_CONFIG;
            int64_t total = s_int(&in);
            const char *opts[] = { "sgd", "momentum", "adam", "adagrad" };
            if (sel & 0x80) {
                snprintf(json, sizeof json, "{\"max_staleness\":%d,\"optimizer\":{\"kind\":\"%s\",\"lr\":0.1},"
                         "\"seed\":1,\"servers\":1,\"sync\":%s,\"tensors\":[{\"name\":\"a\",\"numel\":%lld,"
                         "\"offset\":%lld,\"scale\":0.5}],\"total\":%lld,\"workers\":%d}",
                         (int) (s_byte(&in) % 3) - 1, opts[s_byte(&in) % 4], (sel & 0x40) ? "true" : "false",
                         (long long) s_int(&in), (long long) s_int(&in), (long long) total, s_byte(&in) % 4);
                payload = json;
                plen = strlen(json);
            }
            m.u.PS_CONFIG = (zt_msg_PS_CONFIG_t) { .req = rec, .total = total, .hash = s_int(&in) };
            break;
        }
        case 1:
            m.type = ZT_MSG_PS_PULL;
            m.u.PS_PULL = (zt_msg_PS_PULL_t) { rec, s_int(&in), s_int(&in), s_int(&in), s_byte(&in) & 1 };
            break;
        case 2:
            m.type = ZT_MSG_PS_PUSH;
            m.u.PS_PUSH = (zt_msg_PS_PUSH_t) { .req = rec, .offset = s_int(&in), .count = s_int(&in),
                                               .step = s_int(&in) };
            if (s_byte(&in) & 1)
                snprintf(m.u.PS_PUSH.shm, sizeof m.u.PS_PUSH.shm, "ztrain-ps-%d-0", (int) s_byte(&in));
            m.u.PS_PUSH.shm_off = s_int(&in);
            break;
        case 3:
            m.type = ZT_MSG_PS_SNAPSHOT;
            m.u.PS_SNAPSHOT = (zt_msg_PS_SNAPSHOT_t) { rec, s_int(&in) };
            break;
        case 4:
            m.type = ZT_MSG_AR_PIECE; /* not a parameter-server request */
            break;
        default:
            m.type = ZT_MSG_FILE_GET;
            break;
        }
        if (!payload) {
            plen = in.n < 64 ? in.n : s_byte(&in) % 65;
            if (plen > in.n)
                plen = in.n;
            payload = in.p;
            in.p += plen;
            in.n -= plen;
        }
        zframe_t *h = zt_msg_encode(&m);
        if (!h)
            continue;
        zmq_msg_t parts[3];
        zmq_msg_init_size(&parts[0], 5);
        memcpy(zmq_msg_data(&parts[0]), "\0fuzz", 5);
        zmq_msg_init_size(&parts[1], zframe_size(h));
        memcpy(zmq_msg_data(&parts[1]), zframe_data(h), zframe_size(h));
        zframe_destroy(&h);
        int np = 2;
        if (plen || (sel & 0x20)) {
            zmq_msg_init_size(&parts[2], plen);
            memcpy(zmq_msg_data(&parts[2]), payload, plen);
            np = 3;
        }
        zt_ps_server_handle(s_server, parts, np);
        for (int i = 0; i < np; i++)
            zmq_msg_close(&parts[i]);
    }
    return 0;
}
