#include "formats/sagemaker/zt_tar.h"
#include "base/zt_util.h"
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

typedef struct {
    gzFile out;
    char *why;
    size_t len;
} s_tar_t;

static int s_fail(s_tar_t *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int s_fail(s_tar_t *t, const char *fmt, ...)
{
    if (!t->why[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(t->why, t->len, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int s_write(s_tar_t *t, const void *buf, size_t n)
{
    return n == 0 || gzwrite(t->out, buf, (unsigned) n) == (int) n ? 0 : s_fail(t, "cannot write the archive");
}

/* One ustar header: name (split into prefix/name at a '/' past 100
 * characters), mode, size, mtime, type ('0' file, '5' folder). */
static int s_header(s_tar_t *t, const char *name, const struct stat *st, char type)
{
    unsigned char h[512] = { 0 };
    size_t n = strlen(name);
    const char *cut = NULL;
    if (n > 100)
        for (const char *p = name + n - 1; p > name; p--)
            if (*p == '/' && (size_t) (p - name) <= 155 && strlen(p + 1) <= 100 && p[1]) {
                cut = p;
                break;
            }
    if (n > 100 && !cut)
        return s_fail(t, "%s: a name too long for a tar archive", name);
    if (cut) {
        memcpy(h + 345, name, (size_t) (cut - name));
        memcpy(h, cut + 1, strlen(cut + 1));
    }
    else
        memcpy(h, name, n);
    if (st->st_size > 077777777777LL)
        return s_fail(t, "%s: over 8 GiB, more than a ustar archive holds", name);
    snprintf((char *) h + 100, 8, "%07o", (unsigned) (st->st_mode & 0777));
    snprintf((char *) h + 108, 8, "%07o", 0u);
    snprintf((char *) h + 116, 8, "%07o", 0u);
    snprintf((char *) h + 124, 12, "%011llo", type == '0' ? (unsigned long long) st->st_size : 0ULL);
    snprintf((char *) h + 136, 12, "%011llo", (unsigned long long) st->st_mtime);
    h[156] = (unsigned char) type;
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += h[i];
    snprintf((char *) h + 148, 8, "%06o", sum);
    h[155] = ' ';
    return s_write(t, h, sizeof h);
}

static int s_file(s_tar_t *t, const char *path, const char *name, const struct stat *st)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return s_fail(t, "cannot read %s: %s", path, strerror(errno));
    int rc = s_header(t, name, st, '0');
    char buf[65536];
    long long left = st->st_size;
    while (rc == 0 && left > 0) {
        ssize_t got = read(fd, buf, sizeof buf);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) { /* shorter than it was: a file still being written */
            rc = s_fail(t, "%s changed while it was archived", path);
            break;
        }
        got = got > left ? (ssize_t) left : got;
        rc = s_write(t, buf, (size_t) got);
        left -= got;
    }
    close(fd);
    static const char zeros[512];
    return rc ? rc : s_write(t, zeros, (size_t) ((512 - st->st_size % 512) % 512));
}

static int s_walk(s_tar_t *t, const char *dir, const char *rel)
{
    struct dirent **list = NULL;
    int n = scandir(dir, &list, NULL, alphasort), rc = 0;
    if (n < 0)
        return s_fail(t, "cannot list %s: %s", dir, strerror(errno));
    for (int i = 0; i < n; i++) {
        const char *e = list[i]->d_name;
        if (rc == 0 && strcmp(e, ".") && strcmp(e, "..")) {
            char *path = zt_strdupf("%s/%s", dir, e), *name = zt_strdupf("%s%s", rel, e);
            struct stat st;
            if (lstat(path, &st) != 0)
                rc = s_fail(t, "cannot read %s: %s", path, strerror(errno));
            else if (S_ISDIR(st.st_mode)) {
                char *sub = zt_strdupf("%s/", name);
                rc = s_header(t, sub, &st, '5');
                if (rc == 0)
                    rc = s_walk(t, path, sub);
                free(sub);
            }
            else if (S_ISREG(st.st_mode))
                rc = s_file(t, path, name, &st);
            free(path);
            free(name);
        }
        free(list[i]);
    }
    free(list);
    return rc;
}

int zt_tar_folders(const char *const *dirs, const char *const *names, int n, int at, const char *path, bool gzip,
                   char *why, size_t len)
{
    why[0] = 0;
    /* a fresh name of its own in the folder, never through a link, never
     * an existing file; renamed into place when whole */
    char tmp[512];
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < 16; tries++) {
        unsigned char r[6];
        if (getrandom(r, sizeof r, 0) != (ssize_t) sizeof r)
            break;
        if (snprintf(tmp, sizeof tmp, ".%s.tmp-%02x%02x%02x%02x%02x%02x", path, r[0], r[1], r[2], r[3], r[4], r[5]) >=
            (int) sizeof tmp)
            break;
        fd = openat(at, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    s_tar_t t = { fd >= 0 ? gzdopen(fd, gzip ? "wb6" : "wbT") : NULL, why, len };
    int rc = 0;
    if (!t.out) {
        snprintf(why, len, "cannot write %s: %s", path, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlinkat(at, tmp, 0);
        }
        return -1;
    }
    static const char end[1024];
    for (int i = 0; i < n && rc == 0; i++) {
        struct stat st;
        if (names[i][0] && stat(dirs[i], &st) != 0)
            continue;
        char *rel = names[i][0] ? zt_strdupf("%s/", names[i]) : strdup("");
        if (rel[0])
            rc = s_header(&t, rel, &st, '5');
        if (rc == 0)
            rc = s_walk(&t, dirs[i], rel);
        free(rel);
    }
    if (rc == 0)
        rc = s_write(&t, end, sizeof end);
    if (gzclose(t.out) != Z_OK && rc == 0)
        rc = s_fail(&t, "cannot write %s", path);
    if (rc == 0 && renameat(at, tmp, at, path) != 0)
        rc = s_fail(&t, "cannot write %s: %s", path, strerror(errno));
    if (rc != 0)
        unlinkat(at, tmp, 0);
    return rc;
}

/* ------------------------------------------------------------ selftest */

void zt_tar_selftest(void)
{
    char dir[] = "/tmp/zt-tar-XXXXXX", why[256];
    assert(mkdtemp(dir));
    char *sub = zt_strdupf("%s/in/a", dir), *f1 = zt_strdupf("%s/in/a/x.txt", dir);
    char *f2 = zt_strdupf("%s/in/b.bin", dir), *in = zt_strdupf("%s/in", dir);
    char *out = zt_strdupf("%s/out.tar", dir), *link = zt_strdupf("%s/in/l", dir);
    assert(zt_mkdir_p(sub) == 0);
    FILE *f = fopen(f1, "w");
    fputs("hello\n", f);
    fclose(f);
    f = fopen(f2, "w");
    for (int i = 0; i < 700; i++)
        fputc(i & 0xff, f);
    fclose(f);
    assert(symlink("/etc/passwd", link) == 0);
    const char *top = "";
    int at = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert(zt_tar_folders((const char *const *) &in, &top, 1, at, "out.tar", false, why, sizeof why) == 0);
    struct stat st;
    assert(stat(out, &st) == 0);
    /* a/ (header), a/x.txt (header + 1 block), b.bin (header + 2 blocks), the end */
    assert(st.st_size == 512 * (1 + 2 + 3 + 2));
    f = fopen(out, "rb");
    unsigned char h[512];
    assert(fread(h, 1, 512, f) == 512 && !strcmp((char *) h, "a/") && h[156] == '5');
    assert(fread(h, 1, 512, f) == 512 && !strcmp((char *) h, "a/x.txt") && h[156] == '0');
    assert(!memcmp(h + 257, "ustar", 6) && !strcmp((char *) h + 124, "00000000006"));
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += i >= 148 && i < 156 ? ' ' : h[i];
    assert(strtoul((char *) h + 148, NULL, 8) == sum);
    fclose(f);
    const char *none = "/nonexistent-zt";
    assert(zt_tar_folders(&none, &top, 1, at, "out.tar", true, why, sizeof why) == -1 && strstr(why, "cannot list"));
    assert(stat(out, &st) == 0); /* the earlier archive is left as it was, and no temporary file */
    DIR *dd = opendir(dir);
    int entries = 0;
    for (struct dirent *e; (e = readdir(dd));)
        entries += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(dd);
    assert(entries == 2); /* in/, out.tar */
    close(at);
    char *cmd = zt_strdupf("rm -rf '%s'", dir);
    assert(system(cmd) == 0);
    free(cmd);
    free(sub);
    free(f1);
    free(f2);
    free(in);
    free(out);
    free(link);
}
