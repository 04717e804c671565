/* libFuzzer target: what an evaluator takes from the network. A checkpoint
 * notice's name (zt_ckpt_name_ok: only checkpoints/ckpt-N or model/ckpt-N
 * may become a path), then the checkpoint it fetches from the chief: a
 * manifest (fuzzed text, or one whose files' checksums are right but whose
 * offsets, counts, arrays and sizes are fuzzed, as a broken or hostile
 * chief could send) and its data files, opened with zt_ckpt_open and read
 * into a model of 64 parameters with zt_ckpt_read_range, as s_evaluate
 * does. Nothing may be read or written outside the model, whatever the
 * manifest says.
 *   make fuzz   (clang), then build-fuzz/bin/fuzz_evaluator -max_total_time=600
 * Input: records, as fuzz_input.h reads them. */
#include "state/zt_ckpt.h"
#include "base/zt_util.h"
#include "fuzz_input.h"
#include "ztrain/zt_log.h"
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static char s_dir[64];

static void s_put(const char *name, const void *data, size_t len)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", s_dir, name);
    FILE *f = fopen(path, "wb");
    if (!f)
        abort();
    if (len)
        fwrite(data, 1, len, f);
    fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!s_dir[0]) {
        zt_log_init("fuzz_evaluator", 0);
        zt_log_set_level(ZT_LOG_ERROR);
        snprintf(s_dir, sizeof s_dir, "%s", s_fuzz_dir("eval"));
    }
    s_in_t in = { data, size };
    uint8_t sel = s_byte(&in);
    /* the notice's name: whatever passes must be one of the two forms */
    char name[48];
    size_t nl = s_byte(&in) % sizeof name;
    for (size_t i = 0; i < nl; i++)
        name[i] = (char) (s_byte(&in) | 1);
    name[nl] = 0;
    if (zt_ckpt_name_ok(name) && (strstr(name, "..") || (strncmp(name, "checkpoints/ckpt-", 17) &&
                                                           strncmp(name, "model/ckpt-", 11))))
        abort();
    /* the data files */
    int nfiles = 1 + s_byte(&in) % 3;
    json_t *files = json_array();
    for (int k = 0; k < nfiles; k++) {
        const void *bytes = NULL;
        size_t len = 0;
        s_take_payload(&in, &bytes, &len);
        char fname[32];
        snprintf(fname, sizeof fname, "shard-%d.bin", k);
        s_put(fname, bytes, len);
        json_t *arrays = json_array();
        for (int a = 0, na = s_byte(&in) % 4; a < na; a++)
            json_array_append_new(arrays, json_string("values"));
        uLong crc = crc32(crc32(0L, Z_NULL, 0), bytes ? (const Bytef *) bytes : (const Bytef *) "", (uInt) len);
        int64_t bytes_said = (sel & 2) ? s_int(&in) : (int64_t) len;
        json_array_append_new(files, json_pack("{s:s, s:I, s:I, s:I, s:o, s:I, s:I}", "file",
                                               (sel & 4) && k == 0 ? "../escape" : fname,
                                               "offset", (json_int_t) s_int(&in), "count", (json_int_t) s_int(&in),
                                               "version", (json_int_t) 0, "arrays", arrays,
                                               "bytes", (json_int_t) bytes_said, "crc32", (json_int_t) crc));
    }
    json_t *man = json_pack("{s:s, s:I, s:o, s:o}", "format", "ztrain-checkpoint-1", "step", (json_int_t) s_int(&in),
                            "config", json_object(), "files", files);
    if (sel & 1) { /* a manifest of fuzzed text instead */
        const void *text = NULL;
        size_t len = 0;
        s_take_payload(&in, &text, &len);
        s_put("manifest.json", text, len);
    }
    else {
        char *text = json_dumps(man, JSON_COMPACT);
        s_put("manifest.json", text, strlen(text));
        free(text);
    }
    json_decref(man);
    char err[256];
    json_t *opened = zt_ckpt_open(s_dir, err, sizeof err);
    if (opened) {
        /* a guard on each side of the model catches a write outside it */
        float model[64 + 2];
        model[0] = model[65] = 12345.0f;
        int64_t n = 1 + s_byte(&in) % 64;
        zt_ckpt_read_range(s_dir, opened, s_byte(&in) % 4, 0, n, model + 1);
        if (model[0] != 12345.0f || model[65] != 12345.0f)
            abort();
        json_decref(opened);
    }
    return 0;
}
