/* libFuzzer target: the chief's file server answering FILE_GET requests
 * whose paths are built from pieces that matter (its roots, "..", ".",
 * "/", a planted symbolic link, a FIFO, a folder, real files, raw bytes)
 * with fuzzed offsets and lengths, and bodies that are not FILE_GET. It
 * must serve only plain files beneath its roots, never past a link, never
 * block, and never read past the file or the chunk.
 *   make fuzz   (clang), then build-fuzz/bin/fuzz_fileserver -max_total_time=600
 * Input: records, as fuzz_input.h reads them. */
#include "runtime/zt_fileserver.h"
#include "fuzz_input.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_log.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static zt_fileserver_t *s_server;
static char *s_buf;
static char s_top[64];

/* <top>/ck/ckpt-1/manifest.json (300 bytes), <top>/ck/link -> /etc/passwd,
 * <top>/ck/fifo, <top>/ck/sub/, <top>/secret (outside every root),
 * <top>/model/model.bin (5000 bytes); roots "checkpoints" and "model". */
static void s_setup(void)
{
    zt_log_init("fuzz_fileserver", 0);
    zt_log_set_level(ZT_LOG_ERROR);
    snprintf(s_top, sizeof s_top, "%s", s_fuzz_dir("fs"));
    char p[256];
    const char *dirs[] = { "", "/ck", "/ck/ckpt-1", "/ck/sub", "/model" };
    for (int i = 0; i < 5; i++) {
        snprintf(p, sizeof p, "%s%s", s_top, dirs[i]);
        mkdir(p, 0700);
    }
    const struct { const char *name; int size; } files[] = { { "/ck/ckpt-1/manifest.json", 300 }, { "/secret", 10 },
                                                             { "/model/model.bin", 5000 } };
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s%s", s_top, files[i].name);
        FILE *f = fopen(p, "w");
        for (int k = 0; f && k < files[i].size; k++)
            fputc('a' + k % 26, f);
        if (f)
            fclose(f);
    }
    snprintf(p, sizeof p, "%s/ck/link", s_top);
    symlink("/etc/passwd", p);
    snprintf(p, sizeof p, "%s/ck/fifo", s_top);
    mkfifo(p, 0600);
    char ck[128], model[128];
    snprintf(ck, sizeof ck, "%s/ck", s_top);
    snprintf(model, sizeof model, "%s/model", s_top);
    const char *roots[2][2] = { { "checkpoints", ck }, { "model", model } };
    s_server = zt_fileserver_new(NULL, (const char *const (*)[2]) roots, 2);
    s_buf = malloc(ZT_FILESERVER_CHUNK);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!s_server)
        s_setup();
    static const char *pieces[] = { "checkpoints", "model", "..", ".", "", "ckpt-1", "manifest.json", "link",
                                    "fifo", "sub", "secret", "model.bin", "/", "checkpoints/../../secret" };
    const int npieces = (int) (sizeof pieces / sizeof pieces[0]);
    s_in_t in = { data, size };
    for (int rec = 0; rec < 32 && in.n; rec++) {
        uint8_t sel = s_byte(&in);
        zt_msg_t m = { .type = ZT_MSG_FILE_GET, .pool = 3 };
        m.u.FILE_GET.req = s_int(&in);
        m.u.FILE_GET.offset = s_int(&in);
        m.u.FILE_GET.length = s_int(&in);
        char path[sizeof m.u.FILE_GET.path] = "";
        bool risky = false; /* a link, a FIFO, "..", or outside the roots by name */
        for (int k = 0, parts = 1 + s_byte(&in) % 5; k < parts; k++) {
            uint8_t b = s_byte(&in);
            char piece[32];
            if (b % 16 < npieces)
                snprintf(piece, sizeof piece, "%s", pieces[b % 16]);
            else { /* raw bytes */
                size_t len = s_byte(&in) % 12;
                for (size_t i = 0; i < len; i++)
                    piece[i] = (char) (s_byte(&in) | 1); /* no NUL inside */
                piece[len] = 0;
            }
            risky |= strstr(piece, "..") || !strcmp(piece, "link") || !strcmp(piece, "fifo");
            size_t at = strlen(path);
            snprintf(path + at, sizeof path - at, "%s%s", k ? "/" : "", piece);
        }
        zt_msg_set_str(m.u.FILE_GET.path, path);
        if (sel % 8 == 7)
            m.type = (zt_msg_type_t) (sel % 48); /* something else */
        zframe_t *h = zt_msg_encode(&m);
        if (!h)
            continue;
        zt_msg_t r, back;
        /* a path that is not text (raw bytes) does not decode: no answer */
        bool text = zt_msg_decode(zframe_data(h), zframe_size(h), &back, NULL) == ZT_OK;
        int64_t n = zt_fileserver_answer(s_server, zframe_data(h), zframe_size(h), &r, s_buf);
        zframe_destroy(&h);
        if (m.type != ZT_MSG_FILE_GET || !text) {
            if (n != -1)
                abort(); /* only a FILE_GET that decodes is answered */
            continue;
        }
        if (n < 0 || n > ZT_FILESERVER_CHUNK || (r.u.FILE_DATA.code == 0 && n > r.u.FILE_DATA.size))
            abort();
        if (risky && strstr(path, "..") && r.u.FILE_DATA.code != ZT_FILE_DENIED)
            abort(); /* ".." anywhere is refused by name */
        if (r.u.FILE_DATA.code == 0 && (strstr(path, "link") || strstr(path, "fifo") || strstr(path, "secret")))
            abort(); /* served a link, a FIFO, or a file outside the roots */
        if (r.u.FILE_DATA.code == 0 && n > 0 && s_buf[0] != 'a' + (int) (m.u.FILE_GET.offset % 26))
            abort(); /* served bytes that are not the file's */
    }
    return 0;
}
