/* libFuzzer target: a reducer driven by a sequence of messages that decode:
 * layouts (valid ones with fuzzed shapes, dtypes and worker counts, or
 * fuzzed text), pieces, workers' copies of sums and resend requests with
 * fuzzed buckets, generations, ranges, dtypes and payloads. It must refuse
 * what it cannot take and never crash, hang or leak.
 *   make fuzz   (clang), then build-fuzz/bin/fuzz_reducer -max_total_time=600
 * Input: records, as fuzz_input.h reads them. */
#include "zt_reducer.h"
#include "fuzz_input.h"
#include "ztrain/zt_log.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static zt_reducer_t *s_reducer;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!s_reducer) {
        setenv("ZT_SHM", "off", 1); /* no /dev/shm regions per layout */
        zt_log_init("fuzz_reducer", 0);
        zt_log_set_level(ZT_LOG_ERROR);
        zt_reducer_opts_t o = { "inproc://fuzz-reducer", 0, 1, NULL };
        s_reducer = zt_reducer_new(&o);
        if (!s_reducer)
            return 0;
    }
    s_in_t in = { data, size };
    for (int rec = 0; rec < 64 && in.n; rec++) {
        uint8_t sel = s_byte(&in);
        zt_msg_t m = { .pool = 1, .index = (int) (s_byte(&in) % 5) };
        char json[512];
        const void *payload = NULL;
        size_t plen = 0;
        switch (sel % 6) {
        case 0:
            m.type = ZT_MSG_AR_HELLO;
            m.u.AR_HELLO = (zt_msg_AR_HELLO_t) { .req = rec, .workers = s_int(&in), .hash = 0, .shm_ok = 0 };
            if (sel & 0x80) {
                snprintf(json, sizeof json, "{\"piece_bytes\": %lld, \"threshold\": %lld, \"tensors\": ["
                         "{\"name\": \"a\", \"shape\": [%lld, %lld], \"dtype\": %d}, "
                         "{\"name\": \"b\", \"shape\": [%lld], \"dtype\": %d}]}",
                         (long long) ((uint64_t) 4096 + 4 * (uint64_t) s_int(&in)), (long long) s_int(&in), (long long) s_int(&in),
                         (long long) s_int(&in), s_byte(&in) % 4, (long long) s_int(&in), s_byte(&in) % 4);
                payload = json;
                plen = strlen(json);
            }
            break;
        case 1:
        case 2:
            m.type = sel % 6 == 1 ? ZT_MSG_AR_PIECE : ZT_MSG_AR_RESULT;
            m.u.AR_PIECE = (zt_msg_AR_PIECE_t) { .bucket = s_int(&in), .gen = s_int(&in), .offset = s_int(&in),
                                                 .count = s_int(&in), .dtype = s_byte(&in) % 4, .step = 0 };
            break;
        case 3:
            m.type = ZT_MSG_AR_RESEND;
            m.u.AR_RESEND = (zt_msg_AR_RESEND_t) { s_int(&in), s_int(&in) };
            break;
        case 4:
            m.type = ZT_MSG_AR_IDLE;
            m.u.AR_IDLE.rounds = s_int(&in);
            break;
        default:
            m.type = ZT_MSG_PS_PULL; /* not a reducer's message */
            break;
        }
        s_take_payload(&in, &payload, &plen);
        zmq_msg_t parts[3];
        int np = s_parts(parts, &m, payload, plen, sel & 0x20);
        zt_reducer_handle(s_reducer, parts, np);
        for (int i = 0; i < np; i++)
            zmq_msg_close(&parts[i]);
    }
    return 0;
}
