#include "base/zt_files.h"
#include "base/zt_util.h"
#include "ztrain/zt_error.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int zt_mkdir_p(const char *path)
{
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s", path) >= (int) sizeof tmp)
        return ZT_EINVAL;
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
            return ZT_ESYS;
        *p = '/';
    }
    if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
        return ZT_ESYS;
    return ZT_OK;
}

/* "user alice (uid 1001)" */
static void s_owner(uid_t uid, char *out, size_t size)
{
    struct passwd pw, *res = NULL;
    char buf[1024];
    if (getpwuid_r(uid, &pw, buf, sizeof buf, &res) == 0 && res)
        snprintf(out, size, "user %s (uid %u)", res->pw_name, (unsigned) uid);
    else
        snprintf(out, size, "uid %u", (unsigned) uid);
}

/* Whether uid is root's: 0, or, in a user namespace that leaves root
 * unmapped (ztrain-hosts' for a SageMaker host run by a user who is not
 * root, a rootless container), the overflow uid the kernel shows there for
 * every owner outside the namespace: root's folders above a job's (/,
 * /tmp, /home) look so. Another unmapped owner looks the same, and the
 * rule cannot tell them apart there. */
static bool s_is_root(uid_t uid)
{
    static int unmapped = -1; /* whether root is unmapped here: -1 not read yet */
    static uid_t overflow = 65534;
    if (uid == 0)
        return true;
    if (unmapped < 0) {
        bool mapped = false;
        FILE *f = fopen("/proc/self/uid_map", "re");
        unsigned long inside, outside, count;
        while (f && fscanf(f, "%lu %lu %lu", &inside, &outside, &count) == 3)
            mapped = mapped || inside == 0;
        if (f)
            fclose(f);
        if ((f = fopen("/proc/sys/kernel/overflowuid", "re"))) {
            unsigned long v;
            if (fscanf(f, "%lu", &v) == 1)
                overflow = (uid_t) v;
            fclose(f);
        }
        unmapped = !mapped;
    }
    return unmapped && uid == overflow;
}

/* Whether folder st (at path) passes the trusted-folder rule: the leaf
 * must be this user's and closed to others; a folder above it this user's
 * or root's, and sticky when others can write to it. */
static bool s_dir_fits(const char *path, const struct stat *st, bool leaf, char *why, size_t why_size)
{
    uid_t me = geteuid();
    bool others_write = (st->st_mode & (S_IWGRP | S_IWOTH)) != 0;
    bool bad = leaf ? st->st_uid != me || others_write
                    : (st->st_uid != me && !s_is_root(st->st_uid)) || (others_write && !(st->st_mode & S_ISVTX));
    if (!bad)
        return true;
    char owner[160];
    s_owner(st->st_uid, owner, sizeof owner);
    snprintf(why, why_size, "%s belongs to %s and has mode %04o: ztrain writes a job's files only where "
             "no other user can write or replace them (a folder of your own that only you can write "
             "to, under folders of yours or root's)", path, owner, (unsigned) (st->st_mode & 07777));
    return false;
}

/* Appends "/name" to folder path cur (size PATH_MAX); false when too long. */
static bool s_path_join(char *cur, const char *name, size_t n)
{
    size_t len = strlen(cur);
    size_t sep = len > 1;
    if (len + sep + n >= PATH_MAX)
        return false;
    if (sep)
        cur[len++] = '/';
    memcpy(cur + len, name, n);
    cur[len + n] = '\0';
    return true;
}

/* Folder path cur (as s_path_join keeps it) up to its parent. */
static void s_path_up(char *cur)
{
    char *slash = strrchr(cur, '/');
    if (slash == cur)
        cur[1] = '\0';
    else if (slash)
        *slash = '\0';
}

/* A walk from the root: what is left to walk (todo, from at), the folder
 * reached (fd) and its real path (cur), the links followed so far. */
typedef struct {
    char todo[PATH_MAX], cur[PATH_MAX];
    const char *at;
    int fd, links;
} s_walk_t;

/* Entry name (n bytes) of the folder w reached, which is not a folder: when
 * it is a link made by this user (me) or root (no one else can change where
 * it points), the walk goes on from its target (1); another's link is
 * refused (-1, why said). 0 when it is no link (errno as it was). */
static int s_follow_link(s_walk_t *w, const char *name, size_t n, uid_t me, char *why, size_t why_size)
{
    int err = errno;
    struct stat lst;
    if (fstatat(w->fd, name, &lst, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISLNK(lst.st_mode)) {
        errno = err;
        return 0;
    }
    char target[PATH_MAX], next_todo[PATH_MAX];
    ssize_t tn = readlinkat(w->fd, name, target, sizeof target - 1);
    s_path_join(w->cur, name, n);
    if (lst.st_uid != me && !s_is_root(lst.st_uid)) {
        char owner[160];
        s_owner(lst.st_uid, owner, sizeof owner);
        snprintf(why, why_size, "%s is a link made by %s: ztrain follows no other user's link to a job's "
                 "folder", w->cur, owner);
        return -1;
    }
    if (tn <= 0 || ++w->links > 40 ||
        snprintf(next_todo, sizeof next_todo, "%.*s%s", (int) tn, target, w->at) >= (int) sizeof next_todo) {
        snprintf(why, why_size, "%s: %s", w->cur, tn <= 0 ? strerror(errno) : "too many links");
        return -1;
    }
    s_path_up(w->cur);
    memcpy(w->todo, next_todo, sizeof w->todo);
    w->at = w->todo;
    if (target[0] == '/') { /* from the root again */
        close(w->fd);
        w->fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        snprintf(w->cur, sizeof w->cur, "/");
    }
    return 1;
}

/* One walk from the root, each step's check, make and link case in the
 * order the kernel sees them, with nothing between a check and the
 * descriptor it checked. */
int zt_dir_open_trusted(const char *path, zt_dir_mode_t mode, char *why, size_t why_size)
{
    s_walk_t w = { .cur = "/", .links = 0 };
    char name[NAME_MAX + 1], cwd[PATH_MAX] = "";
    if (!*path || (path[0] != '/' && !getcwd(cwd, sizeof cwd)) ||
        snprintf(w.todo, sizeof w.todo, "%s/%s", cwd, path) >= (int) sizeof w.todo) {
        snprintf(why, why_size, "%s: %s", path, *path ? "the path is too long" : "an empty path");
        return -1;
    }
    w.fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    w.at = w.todo;
    uid_t me = geteuid();
    struct stat st;
    for (;;) {
        while (*w.at == '/')
            w.at++;
        if (w.fd < 0 || fstat(w.fd, &st) != 0) {
            snprintf(why, why_size, "%s: %s", w.cur, strerror(errno));
            break;
        }
        if (!S_ISDIR(st.st_mode)) {
            snprintf(why, why_size, "%s: not a folder", w.cur);
            break;
        }
        /* each folder held to the rule before anything below it is opened or made */
        if (!s_dir_fits(w.cur, &st, !*w.at, why, why_size))
            break;
        if (!*w.at)
            return w.fd;
        size_t n = strcspn(w.at, "/");
        if (n > NAME_MAX) {
            snprintf(why, why_size, "%s: a name too long", path);
            break;
        }
        memcpy(name, w.at, n);
        name[n] = '\0';
        w.at += n;
        if (!strcmp(name, "."))
            continue;
        int next;
        if (!strcmp(name, "..")) {
            next = openat(w.fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
            s_path_up(w.cur);
            close(w.fd);
            w.fd = next;
            continue;
        }
        next = openat(w.fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0 && errno == ENOENT && mode == ZT_DIR_CHECK) { /* the rest would be made here */
            close(w.fd);
            return ZT_DIR_CHECKED;
        }
        if (next < 0 && errno == ENOENT && mode == ZT_DIR_MAKE) {
            if (mkdirat(w.fd, name, 0700) != 0 && errno != EEXIST) {
                snprintf(why, why_size, "cannot make %s%s%s: %s", w.cur, w.cur[1] ? "/" : "", name,
                         strerror(errno));
                break;
            }
            next = openat(w.fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        if (next < 0 && (errno == ELOOP || errno == ENOTDIR)) {
            int followed = s_follow_link(&w, name, n, me, why, why_size);
            if (followed > 0)
                continue;
            if (followed < 0)
                break;
        }
        if (next < 0 || !s_path_join(w.cur, name, n)) {
            snprintf(why, why_size, "%s%s%s: %s", w.cur, w.cur[1] ? "/" : "", name,
                     next >= 0 ? "the path is too long" : errno == ENOTDIR || errno == ELOOP ? "not a folder"
                                                                                             : strerror(errno));
            if (next >= 0)
                close(next);
            break;
        }
        close(w.fd);
        w.fd = next;
    }
    if (w.fd >= 0)
        close(w.fd);
    return -1;
}

int zt_dir_trusted(const char *path, char *why, size_t why_size)
{
    int fd = zt_dir_open_trusted(path, ZT_DIR_TAKE, why, why_size);
    if (fd >= 0)
        close(fd);
    return fd >= 0 ? ZT_OK : ZT_EINVAL;
}

int zt_dir_fit(const char *path, char *why, size_t why_size)
{
    int fd = zt_dir_open_trusted(path, ZT_DIR_CHECK, why, why_size);
    if (fd >= 0)
        close(fd);
    return fd >= 0 || fd == ZT_DIR_CHECKED ? ZT_OK : ZT_EINVAL;
}

int zt_mkdir_trusted(const char *path, char *why, size_t why_size)
{
    int fd = zt_dir_open_trusted(path, ZT_DIR_MAKE, why, why_size);
    if (fd >= 0)
        close(fd);
    return fd >= 0 ? ZT_OK : ZT_EINVAL;
}

void zt_remove_dead_pid_entries(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    size_t n = strlen(prefix);
    while (d && (e = readdir(d))) {
        char *end;
        long pid = strncmp(e->d_name, prefix, n) ? 0 : strtol(e->d_name + n, &end, 10);
        if (pid <= 0 || *end || kill((pid_t) pid, 0) == 0 || errno != ESRCH)
            continue;
        char *path = zt_strdupf("%s/%s", dir, e->d_name);
        zt_rm_tree(path);
        free(path);
    }
    if (d)
        closedir(d);
}

int zt_write_error(void)
{
    return errno == ENOSPC || errno == EDQUOT ? ZT_ENOSPC : ZT_EIO;
}

/* Temporary file (created with mode, which a umask can only narrow; never
 * through a link), then rename; with sync, the file and its folder are
 * fsynced too. */
static int s_write_atomic(const char *path, const void *data, size_t len, mode_t mode, bool sync)
{
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int) getpid()) >= (int) sizeof tmp)
        return ZT_EINVAL;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0)
        return errno == ENOSPC || errno == EDQUOT ? ZT_ENOSPC : ZT_ESYS;
    const char *p = data;
    size_t left = len;
    while (left > 0) {
        ssize_t n = write(fd, p, left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int rc = n < 0 ? zt_write_error() : ZT_EIO;
            close(fd);
            unlink(tmp);
            return rc;
        }
        p += n;
        left -= (size_t) n;
    }
    if ((sync && fsync(fd) < 0) || close(fd) < 0) {
        int rc = zt_write_error();
        unlink(tmp);
        return rc;
    }
    if (rename(tmp, path) < 0) {
        unlink(tmp);
        return ZT_ESYS;
    }
    if (!sync)
        return ZT_OK;
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return ZT_OK;
}

int zt_write_file_atomic(const char *path, const void *data, size_t len)
{
    return s_write_atomic(path, data, len, 0644, true);
}

int zt_write_file_private(const char *path, const void *data, size_t len)
{
    return s_write_atomic(path, data, len, 0600, false);
}

char *zt_read_file(const char *path, size_t *len_p)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
        if (n == 0)
            break;
        if (cap - len - 1 == 0) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    int failed = ferror(f);
    fclose(f);
    if (!buf || failed) {
        free(buf);
        errno = EIO;
        return NULL;
    }
    buf[len] = 0;
    if (len_p)
        *len_p = len;
    return buf;
}

char *zt_file_tail(const char *path, size_t max_bytes)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return strdup("");
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    long start = size > (long) max_bytes ? size - (long) max_bytes : 0;
    fseek(f, start, SEEK_SET);
    char *buf = calloc(1, max_bytes + 1);
    size_t n = buf ? fread(buf, 1, max_bytes, f) : 0;
    fclose(f);
    if (!buf)
        return NULL;
    buf[n] = 0;
    char *p = buf;
    if (start > 0) {
        char *nl = strchr(buf, '\n');
        if (nl)
            p = nl + 1;
    }
    memmove(buf, p, strlen(p) + 1);
    return buf;
}

static int s_rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void) st;
    (void) ftw;
    return (flag == FTW_DP ? rmdir(path) : unlink(path)) == 0 || errno == ENOENT ? 0 : -1;
}

int zt_rm_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return errno == ENOENT ? ZT_OK : ZT_ESYS;
    return nftw(path, s_rm_one, 16, FTW_DEPTH | FTW_PHYS) == 0 ? ZT_OK : ZT_ESYS;
}

void zt_private_files(void)
{
    umask(077);
}
