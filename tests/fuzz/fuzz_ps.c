/* libFuzzer target: a parameter server driven by a sequence of messages
 * that decode (not only raw bytes): configurations (a valid one with a
 * fuzzed size and optimizer, or fuzzed JSON), pulls, pushes and snapshot
 * requests with fuzzed ranges, steps and payloads, and other types. The
 * server must refuse what it cannot serve and never crash, hang or leak.
 *   make fuzz   (clang), then build-fuzz/bin/fuzz_ps -max_total_time=600
 * Input: records, as fuzz_input.h reads them. */
#include "zt_ps_server.h"
#include "fuzz_input.h"
#include "ztrain/zt_log.h"
#include <stdint.h>
#include <stdio.h>
#include <string.h>

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
        s_take_payload(&in, &payload, &plen);
        zmq_msg_t parts[3];
        int np = s_parts(parts, &m, payload, plen, sel & 0x20);
        zt_ps_server_handle(s_server, parts, np);
        for (int i = 0; i < np; i++)
            zmq_msg_close(&parts[i]);
    }
    return 0;
}
