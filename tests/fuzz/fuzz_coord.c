/* libFuzzer target: a coordinator's control-plane handler driven by
 * sequences of messages that decode (REGISTER, HEARTBEAT, METRIC,
 * CHECKPOINT, DONE, REJOINED and foreign types) with fuzzed senders,
 * incarnations, steps, names and values, each as if from a connection that
 * authenticated as a fuzzed replica (or none), plus bodies that do not
 * decode. The job is real: its coordinator made its keys and started its
 * four replicas (`sleep`), so every message reaches the handler's full
 * path. It must refuse what is not the sender's to say, never crash, hang
 * or grow without bound. Names are one of a few, raw bytes, or (the
 * UTF-8-aware mode) pieces that pass or just fail the decoder's UTF-8
 * check: multi-byte characters, terminal escapes, C1 controls, newlines,
 * overlong forms, lone surrogates, quotes and format directives, so that
 * the handler's escaping and JSON paths see hostile text that decodes.
 *   make fuzz   (clang), then build-fuzz/bin/fuzz_coord -max_total_time=600
 * Input: records, as fuzz_input.h reads them. */
#include "chief/zt_coord.h"
#include "plan/zt_diag.h"
#include "formats/zt_format.h"
#include "fuzz_input.h"
#include "ztrain/zt_log.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static zt_coord_t *s_coord;

static void s_setup(void)
{
    zt_log_init("fuzz_coord", 0);
    zt_log_set_level(ZT_LOG_ERROR);
    char dir[96], spec[128]; /* the job folder goes with the fuzzer (its replicas die with it) */
    snprintf(dir, sizeof dir, "%s/job", s_fuzz_dir("coord"));
    snprintf(spec, sizeof spec, "%s/job-spec.json", s_fuzz_dir_path());
    FILE *f = fopen(spec, "w");
    if (!f)
        abort();
    fputs("{\"displayName\": \"fuzz\", \"jobSpec\": {\"workerPoolSpecs\": [", f);
    for (int p = 0; p < 4; p++)
        fprintf(f, "%s{\"machineSpec\": {\"machineType\": \"n1-standard-4\"}, \"replicaCount\": 1, "
                "\"containerSpec\": {\"imageUri\": \"local\", \"command\": [\"sleep\", \"3600\"]}}", p ? ", " : "");
    fputs("]}}", f);
    fclose(f);
    zt_diag_t *diag = zt_diag_new();
    json_t *flags = json_array();
    zt_plan_opts_t o = { spec, flags, NULL, 0, NULL, NULL };
    zt_plan_t *plan = NULL;
    char why[256];
    zt_backend_t *backend = zt_backend_new("local", why, sizeof why);
    if (zt_format_load(&o, &plan, diag) != 0 || !plan || !backend)
        abort();
    zt_coord_opts_t co = { dir, NULL, true, false };
    s_coord = zt_coord_new(&plan, &backend, &co);
    if (!s_coord)
        abort();
    zt_coord_start(s_coord);
    json_decref(flags);
    zt_diag_destroy(&diag);
    unlink(spec);
}

/* Long on purpose: one switch that builds each kind of control message
 * from the fuzzer's bytes, so that a crashing input maps to one case. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!s_coord)
        s_setup();
    static const char *who[] = { "workerpool0-0", "workerpool1-0", "workerpool2-0", "workerpool3-0", "", "other" };
    static const char *names[] = { "checkpoints/ckpt-1", "model/ckpt-2", "..", "checkpoints/../x", "/etc/passwd",
                                   "accuracy", "loss", "" };
    s_in_t in = { data, size };
    zframe_t *id = zframe_new("\0fuzz", 5);
    for (int rec = 0; rec < 32 && in.n; rec++) {
        uint8_t sel = s_byte(&in);
        zt_msg_t m = { .pool = s_byte(&in) % 5, .index = (int) (s_byte(&in) % 3) - (sel & 1) };
        m.incarnation = (sel & 0x40) ? s_int(&in) : 0;
        m.seq = (uint64_t) s_int(&in);
        const char *name = names[s_byte(&in) % 8];
        char raw[64];
        uint8_t k = (sel & 0x80) ? s_byte(&in) : 0;
        if ((sel & 0x80) && !(k & 0x80)) { /* a name of fuzzed bytes */
            size_t len = k % 23;
            for (size_t i = 0; i < len; i++)
                raw[i] = (char) (s_byte(&in) | 1);
            raw[len] = 0;
            name = raw;
        }
        else if (sel & 0x80) { /* UTF-8-aware: hostile pieces, most of them valid UTF-8 */
            static const char *pieces[] = { "\x1b[2J", "\x1b]0;t\x07", "\n", "\r", "\xc2\x9b", "\xc3\xa9",
                                            "\xe2\x80\xae", "\xf0\x9f\x98\x80", "\xed\xa0\x80", "\xc0\xaf",
                                            "\xf4\x90\x80\x80", "\xff", "\"", "\\", "%s%n", "a" };
            size_t len = 0;
            raw[0] = 0;
            for (int i = 0; i < 1 + k % 6; i++) {
                const char *piece = pieces[s_byte(&in) % 16];
                size_t pl = strlen(piece);
                if (len + pl >= sizeof raw)
                    break;
                memcpy(raw + len, piece, pl + 1);
                len += pl;
            }
            name = raw;
        }
        switch ((sel >> 1) % 8) {
        case 0:
            m.type = ZT_MSG_REGISTER;
            zt_msg_set_str(m.u.REGISTER.role, name);
            m.u.REGISTER.pid = s_int(&in);
            break;
        case 1:
            m.type = ZT_MSG_HEARTBEAT;
            m.u.HEARTBEAT.step = s_int(&in);
            break;
        case 2: {
            m.type = ZT_MSG_METRIC;
            zt_msg_set_str(m.u.METRIC.name, name);
            int64_t v = s_int(&in);
            memcpy(&m.u.METRIC.value, &v, sizeof v); /* any double: NaN, infinities, denormals */
            m.u.METRIC.step = s_int(&in);
            break;
        }
        case 3:
            m.type = ZT_MSG_CHECKPOINT;
            m.u.CHECKPOINT.step = s_int(&in);
            zt_msg_set_str(m.u.CHECKPOINT.name, name);
            zt_msg_set_str(m.u.CHECKPOINT.address, "127.0.0.1:1");
            break;
        case 4:
            m.type = ZT_MSG_DONE;
            m.u.DONE.exit_code = s_int(&in);
            zt_msg_set_str(m.u.DONE.reason, name);
            break;
        case 5:
            m.type = ZT_MSG_REJOINED;
            m.u.REJOINED.step = s_int(&in);
            m.u.REJOINED.gen = s_int(&in);
            break;
        case 6:
            if (sel & 0x20) { /* a latency histogram: known or fuzzed kind and counts */
                m.type = ZT_MSG_LATENCY;
                zt_msg_set_str(m.u.LATENCY.kind, (sel & 0x10) ? "ps" : name);
                zt_msg_set_str(m.u.LATENCY.counts, (sel & 0x08) ? "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16" : name);
                int64_t v = s_int(&in);
                memcpy(&m.u.LATENCY.sum, &v, sizeof v);
                break;
            }
            m.type = (zt_msg_type_t) (s_byte(&in) % 48); /* any other type */
            break;
        default: { /* bytes that are not a message */
            const void *payload = NULL;
            size_t plen = 0;
            s_take_payload(&in, &payload, &plen);
            zt_coord_handle(s_coord, id, payload, plen, who[s_byte(&in) % 6]);
            continue;
        }
        }
        zframe_t *h = zt_msg_encode(&m);
        if (!h)
            continue;
        uint8_t w = s_byte(&in);
        zt_coord_handle(s_coord, id, zframe_data(h), zframe_size(h), w % 7 == 6 ? NULL : who[w % 7 % 6]);
        zframe_destroy(&h);
    }
    zframe_destroy(&id);
    return 0;
}
