#include "base/zt_util.h"
#include "ztrain/ztrain.h"
#include <czmq.h>
#include <malloc.h>
#include <stdatomic.h>
#include "ztrain/zt_error.h"
#include <errno.h>
#include <dirent.h>
#include <math.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <ftw.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <signal.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

int64_t zt_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t zt_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void zt_wall_iso(char *buf, size_t size)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char base[32];
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, size, "%s.%03ldZ", base, ts.tv_nsec / 1000000);
}

double zt_iso_epoch(const char *iso)
{
    struct tm tm = { 0 };
    int ms = 0;
    if (!iso || sscanf(iso, "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                       &tm.tm_min, &tm.tm_sec, &ms) < 6)
        return NAN;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (double) timegm(&tm) + ms / 1000.0;
}

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

/* Whether folder st (at path) passes the trusted-folder rule: the leaf
 * must be this user's and closed to others; a folder above it this user's
 * or root's, and sticky when others can write to it. */
static bool s_dir_fits(const char *path, const struct stat *st, bool leaf, char *why, size_t why_size)
{
    uid_t me = geteuid();
    bool others_write = (st->st_mode & (S_IWGRP | S_IWOTH)) != 0;
    bool bad = leaf ? st->st_uid != me || others_write
                    : (st->st_uid != me && st->st_uid != 0) || (others_write && !(st->st_mode & S_ISVTX));
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

/* Long on purpose: one walk from the root, each step's check, make and
 * link case in the order the kernel sees them, with nothing between a
 * check and the descriptor it checked. */
int zt_dir_open_trusted(const char *path, zt_dir_mode_t mode, char *why, size_t why_size)
{
    /* todo: what is left to walk; cur: the real path of fd */
    char todo[PATH_MAX], cur[PATH_MAX] = "/", next_todo[PATH_MAX], name[NAME_MAX + 1];
    char cwd[PATH_MAX] = "";
    if (!*path || (path[0] != '/' && !getcwd(cwd, sizeof cwd)) ||
        snprintf(todo, sizeof todo, "%s/%s", cwd, path) >= (int) sizeof todo) {
        snprintf(why, why_size, "%s: %s", path, *path ? "the path is too long" : "an empty path");
        return -1;
    }
    int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC), links = 0;
    const char *at = todo;
    uid_t me = geteuid();
    struct stat st;
    for (;;) {
        while (*at == '/')
            at++;
        if (fd < 0 || fstat(fd, &st) != 0) {
            snprintf(why, why_size, "%s: %s", cur, strerror(errno));
            break;
        }
        if (!S_ISDIR(st.st_mode)) {
            snprintf(why, why_size, "%s: not a folder", cur);
            break;
        }
        /* each folder held to the rule before anything below it is opened or made */
        if (!s_dir_fits(cur, &st, !*at, why, why_size))
            break;
        if (!*at)
            return fd;
        size_t n = strcspn(at, "/");
        if (n > NAME_MAX) {
            snprintf(why, why_size, "%s: a name too long", path);
            break;
        }
        memcpy(name, at, n);
        name[n] = '\0';
        at += n;
        if (!strcmp(name, "."))
            continue;
        int next;
        if (!strcmp(name, "..")) {
            next = openat(fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
            char *slash = strrchr(cur, '/');
            slash == cur ? (void) (cur[1] = '\0') : (void) (*slash = '\0');
            close(fd);
            fd = next;
            continue;
        }
        next = openat(fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0 && errno == ENOENT && mode == ZT_DIR_CHECK) { /* the rest would be made here */
            close(fd);
            return ZT_DIR_CHECKED;
        }
        if (next < 0 && errno == ENOENT && mode == ZT_DIR_MAKE) {
            if (mkdirat(fd, name, 0700) != 0 && errno != EEXIST) {
                snprintf(why, why_size, "cannot make %s%s%s: %s", cur, cur[1] ? "/" : "", name, strerror(errno));
                break;
            }
            next = openat(fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        struct stat lst;
        if (next < 0 && (errno == ELOOP || errno == ENOTDIR) && fstatat(fd, name, &lst, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISLNK(lst.st_mode)) {
            /* a link in a folder that passed: followed when it is this
             * user's or root's (no one else can change where it points) */
            char target[PATH_MAX];
            ssize_t tn = readlinkat(fd, name, target, sizeof target - 1);
            s_path_join(cur, name, n);
            if (lst.st_uid != me && lst.st_uid != 0) {
                char owner[160];
                s_owner(lst.st_uid, owner, sizeof owner);
                snprintf(why, why_size, "%s is a link made by %s: ztrain follows no other user's link to a job's "
                         "folder", cur, owner);
                break;
            }
            if (tn <= 0 || ++links > 40 ||
                snprintf(next_todo, sizeof next_todo, "%.*s%s", (int) tn, target, at) >= (int) sizeof next_todo) {
                snprintf(why, why_size, "%s: %s", cur, tn <= 0 ? strerror(errno) : "too many links");
                break;
            }
            char *slash = strrchr(cur, '/');
            slash == cur ? (void) (cur[1] = '\0') : (void) (*slash = '\0');
            memcpy(todo, next_todo, sizeof todo);
            at = todo;
            if (target[0] == '/') { /* from the root again */
                close(fd);
                fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
                snprintf(cur, sizeof cur, "/");
            }
            continue;
        }
        if (next < 0 || !s_path_join(cur, name, n)) {
            snprintf(why, why_size, "%s%s%s: %s", cur, cur[1] ? "/" : "", name,
                     next >= 0 ? "the path is too long" : errno == ENOTDIR || errno == ELOOP ? "not a folder"
                                                                                             : strerror(errno));
            if (next >= 0)
                close(next);
            break;
        }
        close(fd);
        fd = next;
    }
    if (fd >= 0)
        close(fd);
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

/* Temporary file (created with mode, which a umask can only narrow; never
 * through a link), then rename; with sync, the file and its folder are
 * fsynced too. */
bool zt_sockaddr_name(const struct sockaddr *a, char *out, size_t len)
{
    out[0] = 0;
    if (a->sa_family == AF_INET)
        return inet_ntop(AF_INET, &((const struct sockaddr_in *) a)->sin_addr, out, (socklen_t) len) != NULL;
    if (a->sa_family != AF_INET6)
        return false;
    const struct in6_addr *v6 = &((const struct sockaddr_in6 *) a)->sin6_addr;
    return IN6_IS_ADDR_V4MAPPED(v6) ? inet_ntop(AF_INET, &v6->s6_addr[12], out, (socklen_t) len) != NULL
                                    : inet_ntop(AF_INET6, v6, out, (socklen_t) len) != NULL;
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

double zt_parse_duration(const char *text)
{
    if (!text || !*text)
        return -1;
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || v < 0)
        return -1;
    if (!strcmp(end, "s") || !*end) return v;
    if (!strcmp(end, "m"))           return v * 60;
    if (!strcmp(end, "h"))           return v * 3600;
    return -1;
}

bool zt_parse_int(const char *text, long long *out)
{
    if (!text || !*text)
        return false;
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || *end)
        return false;
    *out = v;
    return true;
}

char *zt_strdupf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    return s;
}

const char *zt_exe_dir(void)
{
    static char dir[PATH_MAX];
    if (!dir[0]) {
        char exe[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n <= 0)
            return ".";
        exe[n] = 0;
        snprintf(dir, sizeof dir, "%s", dirname(exe));
    }
    return dir;
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

int zt_ephemeral_port(void)
{
    int fd = -1, port = zt_reserve_port(&fd);
    if (fd >= 0)
        close(fd);
    return port;
}

/* The kernel's automatic port range (bind(0) and connect() both draw from
 * it), from /proc; 32768-60999 when unreadable. */
static void s_local_range(int *lo, int *hi)
{
    *lo = 32768;
    *hi = 60999;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        if (fscanf(f, "%d %d", lo, hi) != 2) {
            *lo = 32768;
            *hi = 60999;
        }
        fclose(f);
    }
}

int zt_reserve_port(int *fd_p)
{
    /* A port outside the kernel's automatic range: no connect() or bind(0)
     * anywhere on the machine is ever handed it, so once released it stays
     * free for the replica it was chosen for. */
    *fd_p = -1;
    int lo, hi, first, last;
    s_local_range(&lo, &hi);
    if (lo - 10000 >= 1024) {
        first = 10000;
        last = lo - 1;
    }
    else {
        first = hi + 1;
        last = 65535;
    }
    if (last - first < 100) { /* no room outside: let the kernel choose */
        first = 0;
        last = 0;
    }
    unsigned seed = (unsigned) (getpid() ^ zt_now_us());
    int span = last - first + 1, start = span > 1 ? (int) (rand_r(&seed) % (unsigned) span) : 0;
    for (int k = 0; k < 200; k++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return -1;
        struct sockaddr_in a = { .sin_family = AF_INET };
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons((uint16_t) (first ? first + (start + k) % span : 0));
        socklen_t len = sizeof a;
        if (bind(fd, (struct sockaddr *) &a, sizeof a) == 0 &&
            getsockname(fd, (struct sockaddr *) &a, &len) == 0) {
            *fd_p = fd;
            return ntohs(a.sin_port);
        }
        close(fd);
    }
    return -1;
}

const char *zt_version(void)
{
    return ZT_VERSION;
}

void zt_tune_malloc(void)
{
    mallopt(M_MMAP_THRESHOLD, 512 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

int zt_stop_child(pid_t pid, int grace_ms)
{
    int status;
    if (pid <= 0 || kill(pid, SIGTERM) < 0)
        return pid > 0 && waitpid(pid, &status, 0) == pid ? status : -1;
    for (int64_t end = zt_now_ms() + grace_ms; zt_now_ms() < end; usleep(5000))
        if (waitpid(pid, &status, WNOHANG) == pid)
            return status;
    kill(pid, SIGKILL);
    return waitpid(pid, &status, 0) == pid ? status : -1;
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

uint64_t zt_proc_start_time(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int) pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    if (!p || p[1] != ' ' || p[2] == 'Z')
        return 0;
    /* fields from 3 (state) on; the start time is field 22 */
    unsigned long long start = 0;
    int field = 2;
    for (char *save = NULL, *t = strtok_r(p + 1, " ", &save); t; t = strtok_r(NULL, " ", &save))
        if (++field == 22) {
            start = strtoull(t, NULL, 10);
            break;
        }
    return start;
}

bool zt_proc_alive(pid_t pid, uint64_t start_time)
{
    if (pid <= 0)
        return false;
    uint64_t now = zt_proc_start_time(pid);
    return now != 0 && (start_time == 0 || now == start_time);
}

static atomic_bool s_stop;
static _Thread_local int s_hold; /* zt_stop_hold: a save in progress on this thread */

void zt_stop_request(void)
{
    atomic_store(&s_stop, true);
}

bool zt_stop_came(void)
{
    return atomic_load(&s_stop) || zsys_interrupted;
}

bool zt_stop_requested(void)
{
    return s_hold <= 0 && zt_stop_came();
}

void zt_stop_hold(bool hold)
{
    s_hold += hold ? 1 : -1;
}

void zt_private_files(void)
{
    umask(077);
}

void zt_strv_free(char **v)
{
    for (char **p = v; p && *p; p++)
        free(*p);
    free(v);
}
