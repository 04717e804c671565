/* ztrain-hosts: runs a program where the host names of its job resolve as
 * the service's own network resolves them (SageMaker's algo-1..N), without
 * changing the machine.
 *
 * How: the program gets a mount namespace of its own (and a user namespace
 * with the same user and group when not run as root), in which /etc/hosts
 * is the machine's file with a line for each name added, bind-mounted over
 * the machine's. This is what a container runtime does for the containers
 * SageMaker runs: each has its own /etc/hosts. Every resolver reads it the
 * same way (glibc's files source, Python's socket.gethostbyname, a
 * program's own), nothing is intercepted, and the machine's file, its
 * other processes and its other jobs see nothing of it. The namespace ends
 * with the program's last process; the file behind the mount is unlinked
 * before the program starts, so nothing is left behind.
 *
 * With --bind DST=SRC the program also sees the folder SRC at DST (a
 * SageMaker Processing host's own /opt/ml, holding its inputs, outputs and
 * config files where its script opens them), again in its namespace only.
 * Where DST does not exist, a tmpfs covers its deepest existing folder
 * above, in which that folder's entries are bound again from the folder
 * itself (so nothing of it is hidden) and the missing folders are made.
 *
 * The program runs in this process (exec): its pid, signals, exit status
 * and parent are the launcher's. When a namespace cannot be made (a kernel
 * with unprivileged user namespaces turned off, or a container that
 * forbids mounts), it says why and runs the program without the names. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <limits.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_NAMES 4096
#define MAX_BINDS 16
#define MAX_HOSTS_FILE (4 << 20) /* the machine's /etc/hosts, read whole */

static const char s_usage[] =
    "usage: ztrain-hosts [--host NAME=ADDRESS]... [--bind DST=SRC]... [--] PROGRAM [ARG...]\n\n"
    "Runs PROGRAM with each NAME resolving to ADDRESS (an IPv4 or IPv6 address,\n"
    "or a host name resolved here first), as a SageMaker container resolves the\n"
    "job's hosts algo-1..N. PROGRAM gets a mount namespace of its own (and a user\n"
    "namespace mapping only the same user and group, when not run as root) where\n"
    "/etc/hosts is the machine's file plus one line per NAME. The machine's file\n"
    "is not changed; nothing is left behind. PROGRAM replaces this process (same\n"
    "pid, signals, exit status). When no namespace can be made here (unprivileged\n"
    "user namespaces turned off), it says so and runs PROGRAM without the names.\n"
    "Each --bind shows the folder SRC at the absolute path DST (made where it is\n"
    "missing, in the namespace only); a --bind that cannot be made is an error\n"
    "(exit 126), since PROGRAM would not find its files.\n"
    "`ztrain run` starts each host of a SageMaker job this way.\n";

/* A host name as /etc/hosts takes it: letters, digits, '-', '.', '_'. */
static bool s_name_ok(const char *s, size_t n)
{
    if (n == 0 || n > 253)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!(s[i] == '-' || s[i] == '.' || s[i] == '_' || (s[i] >= '0' && s[i] <= '9') ||
              ((s[i] | 32) >= 'a' && (s[i] | 32) <= 'z')))
            return false;
    return true;
}

/* address as text, or the first address name resolves to here. */
static bool s_address(const char *name, char *out, size_t size)
{
    unsigned char buf[sizeof(struct in6_addr)];
    if (inet_pton(AF_INET, name, buf) == 1 || inet_pton(AF_INET6, name, buf) == 1) {
        snprintf(out, size, "%s", name);
        return true;
    }
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res = NULL;
    if (getaddrinfo(name, NULL, &hints, &res) != 0 || !res)
        return false;
    bool ok = getnameinfo(res->ai_addr, res->ai_addrlen, out, (socklen_t) size, NULL, 0, NI_NUMERICHOST) == 0;
    freeaddrinfo(res);
    return ok;
}

static bool s_write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t) w;
    }
    return true;
}

static bool s_write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    bool ok = s_write_all(fd, text, strlen(text));
    close(fd);
    return ok;
}

/* The machine's /etc/hosts and the added lines, in a new file (its path in
 * path): NULL-free text, or false with errno. */
static bool s_make_file(char *const *lines, int n, char *path, size_t size)
{
    const char *dir = getenv("TMPDIR");
    snprintf(path, size, "%s/ztrain-hosts-XXXXXX", dir && *dir == '/' ? dir : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0)
        return false;
    fchmod(fd, 0644);
    bool ok = true;
    int in = open("/etc/hosts", O_RDONLY | O_CLOEXEC);
    if (in >= 0) {
        char buf[65536];
        size_t total = 0;
        ssize_t r;
        while (ok && (r = read(in, buf, sizeof buf)) > 0 && total < MAX_HOSTS_FILE) {
            ok = s_write_all(fd, buf, (size_t) r);
            total += (size_t) r;
        }
        close(in);
        ok = ok && s_write_all(fd, "\n# added by ztrain-hosts for this job\n", 38);
    }
    for (int i = 0; ok && i < n; i++)
        ok = s_write_all(fd, lines[i], strlen(lines[i]));
    if (close(fd) != 0)
        ok = false;
    if (!ok)
        unlink(path);
    return ok;
}

/* A mount namespace of our own (and a user namespace as the same user when
 * not root), its mounts private. false with why. */
static bool s_enter(char *why, size_t len)
{
    uid_t uid = geteuid();
    gid_t gid = getegid();
    int flags = CLONE_NEWNS | (uid != 0 ? CLONE_NEWUSER : 0);
    if (unshare(flags) != 0) {
        snprintf(why, len, "unshare(%s): %s%s", uid != 0 ? "user and mount namespaces" : "a mount namespace",
                 strerror(errno), uid != 0 && (errno == EPERM || errno == ENOSPC)
                 ? " (unprivileged user namespaces are off: sysctl kernel.unprivileged_userns_clone=1, "
                   "user.max_user_namespaces > 0)" : "");
        return false;
    }
    if (uid != 0) {
        char map[64];
        snprintf(map, sizeof map, "%u %u 1\n", (unsigned) uid, (unsigned) uid);
        bool ok = s_write_file("/proc/self/setgroups", "deny") && s_write_file("/proc/self/uid_map", map);
        snprintf(map, sizeof map, "%u %u 1\n", (unsigned) gid, (unsigned) gid);
        if (!ok || !s_write_file("/proc/self/gid_map", map)) {
            snprintf(why, len, "mapping user %u in the new user namespace: %s", (unsigned) uid, strerror(errno));
            return false;
        }
    }
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) { /* nothing of ours reaches the machine */
        snprintf(why, len, "making the mounts private: %s", strerror(errno));
        return false;
    }
    return true;
}

/* One entry name of the folder open as old, shown again at dir/name on the
 * tmpfs over dir: a link copied, anything else bound from where it is. */
static bool s_rebind(int old, const char *dir, const char *name, char *why, size_t len)
{
    char at[PATH_MAX], from[PATH_MAX], target[PATH_MAX];
    struct stat st;
    snprintf(at, sizeof at, "%s/%s", dir, name);
    snprintf(from, sizeof from, "/proc/self/fd/%d/%s", old, name);
    if (fstatat(old, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return true; /* gone meanwhile */
    bool ok;
    if (S_ISLNK(st.st_mode)) {
        ssize_t n = readlinkat(old, name, target, sizeof target - 1);
        target[n > 0 ? n : 0] = 0;
        ok = n > 0 && symlink(target, at) == 0;
    } else {
        int fd = S_ISDIR(st.st_mode) ? mkdir(at, 0700) : open(at, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        ok = fd >= 0 && (S_ISDIR(st.st_mode) || close(fd) == 0);
        ok = ok && mount(from, at, NULL, MS_BIND | MS_REC, NULL) == 0;
    }
    if (!ok)
        snprintf(why, len, "showing %s again over the tmpfs: %s", at, strerror(errno));
    return ok;
}

/* A tmpfs over dir (mode its mode), every entry of dir shown again on it:
 * a folder where new folders can be made without touching the machine's.
 * false with why. */
static bool s_cover(const char *dir, mode_t mode, char *why, size_t len)
{
    int old = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    char opts[32];
    snprintf(opts, sizeof opts, "mode=%04o", (unsigned) (mode & 07777));
    if (old < 0 || mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV, opts) != 0) {
        snprintf(why, len, "a tmpfs over %s: %s", dir, strerror(errno));
        if (old >= 0)
            close(old);
        return false;
    }
    int fd = dup(old);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    bool ok = d != NULL;
    if (!d)
        snprintf(why, len, "reading %s: %s", dir, strerror(errno));
    struct dirent *e;
    while (ok && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            ok = s_rebind(old, dir, e->d_name, why, len);
    if (d)
        closedir(d);
    close(old);
    return ok;
}

/* The folder src shown at dst (absolute; made where missing, on a tmpfs
 * over its deepest existing folder). false with why. */
static bool s_bind(const char *dst, const char *src, char *why, size_t len)
{
    struct stat st;
    bool there = stat(src, &st) == 0;
    if (!there || !S_ISDIR(st.st_mode)) {
        snprintf(why, len, "--bind %s=%s: %s", dst, src, there ? "not a folder" : strerror(errno));
        return false;
    }
    char above[PATH_MAX];
    snprintf(above, sizeof above, "%s", dst);
    while (stat(above, &st) != 0) {
        char *slash = strrchr(above, '/');
        slash[slash == above] = 0; /* "/x" -> "/" */
    }
    if (strcmp(above, dst)) { /* dst is missing: made on a tmpfs over the folder above it */
        if (!S_ISDIR(st.st_mode) || !strcmp(above, "/")) {
            snprintf(why, len, "--bind %s: %s", dst, !strcmp(above, "/") ? "no folder above it but / to make it in"
                     : "a file stands where a folder above it would be");
            return false;
        }
        if (!s_cover(above, st.st_mode, why, len))
            return false;
        for (char *p = strchr((char *) dst + strlen(above) + 1, '/'); ; p = strchr(p + 1, '/')) {
            char part[PATH_MAX];
            snprintf(part, sizeof part, "%.*s", p ? (int) (p - dst) : (int) strlen(dst), dst);
            if (mkdir(part, 0755) != 0 && errno != EEXIST) {
                snprintf(why, len, "making %s: %s", part, strerror(errno));
                return false;
            }
            if (!p)
                break;
        }
    }
    if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) != 0) {
        snprintf(why, len, "binding %s at %s: %s", src, dst, strerror(errno));
        return false;
    }
    return true;
}

/* What the command line asks: the hosts file's lines and the binds, and
 * where the program's arguments start (*a), or an exit status (>= 0) with
 * what was wrong said. */
static int s_args(int argc, char **argv, char **lines, int *n, char **binds, int *nb, int *a)
{
    for (*a = 1; *a < argc; (*a)++) {
        const char *arg = argv[*a], *spec = NULL;
        bool bind = !strncmp(arg, "--bind", 6);
        if (!strcmp(arg, "--")) {
            (*a)++;
            break;
        }
        if (!strncmp(arg, "--host=", 7) || !strncmp(arg, "--bind=", 7))
            spec = arg + 7;
        else if ((!strcmp(arg, "--host") || !strcmp(arg, "--bind")) && *a + 1 < argc)
            spec = argv[++(*a)];
        else if (!strcmp(arg, "--host") || !strcmp(arg, "--bind")) {
            fprintf(stderr, "ztrain-hosts: %s needs %s\n", arg, bind ? "DST=SRC" : "NAME=ADDRESS");
            return 2;
        }
        else if (arg[0] == '-') {
            fprintf(stderr, "ztrain-hosts: unknown option '%s' (see ztrain-hosts --help)\n", arg);
            return 2;
        }
        else
            break;
        const char *eq = strchr(spec, '=');
        if (bind) {
            if (!eq || spec[0] != '/' || eq[1] == 0 || eq - spec >= PATH_MAX || *nb == MAX_BINDS) {
                fprintf(stderr, "ztrain-hosts: --bind '%s': DST=SRC with DST an absolute path (at most %d binds)\n",
                        spec, MAX_BINDS);
                return 2;
            }
            binds[(*nb)++] = (char *) spec;
            continue;
        }
        char addr[INET6_ADDRSTRLEN + 1];
        if (!eq || !s_name_ok(spec, (size_t) (eq - spec))) {
            fprintf(stderr, "ztrain-hosts: --host '%s': NAME=ADDRESS with NAME a host name (letters, digits, "
                    "'-', '.', '_')\n", spec);
            return 2;
        }
        if (!s_address(eq + 1, addr, sizeof addr)) {
            fprintf(stderr, "ztrain-hosts: --host '%s': '%s' is no address and does not resolve here\n", spec,
                    eq + 1);
            return 2;
        }
        if (*n == MAX_NAMES) {
            fprintf(stderr, "ztrain-hosts: more than %d names\n", MAX_NAMES);
            return 2;
        }
        if (asprintf(&lines[(*n)++], "%s %.*s\n", addr, (int) (eq - spec), spec) < 0)
            return 1;
    }
    if (*a >= argc) {
        fprintf(stderr, "%s", s_usage);
        return 2;
    }
    return -1;
}

/* The namespace with the names and the binds in it: 0, or 126 when a bind
 * could not be made (said). Names that cannot be added are said, and the
 * program runs without them. */
static int s_setup(char **lines, int n, char **binds, int nb, const char *program)
{
    char file[4096], why[PATH_MAX + 512] = "";
    bool made = n > 0 && s_make_file(lines, n, file, sizeof file);
    if (n > 0 && !made)
        fprintf(stderr, "ztrain-hosts: cannot write the job's hosts file (%s): %s; %s runs without the "
                "job's host names\n", file, strerror(errno), program);
    bool in = (made || nb > 0) && s_enter(why, sizeof why);
    bool named = made && in && mount(file, "/etc/hosts", NULL, MS_BIND, NULL) == 0;
    if (made && in && !named)
        snprintf(why, sizeof why, "bind-mounting over /etc/hosts: %s", strerror(errno));
    if (made && !named && (in || nb == 0)) /* with binds and no namespace, the binds' error says it */
        fprintf(stderr, "ztrain-hosts: %s; %s runs without the job's host names\n", why, program);
    if (made)
        unlink(file); /* the mount holds it; nothing is left when the namespace ends */
    for (int i = 0; i < nb; i++) {
        char *eq = strchr(binds[i], '=');
        *eq = 0;
        bool ok = in && s_bind(binds[i], eq + 1, why, sizeof why);
        *eq = '=';
        if (!ok) {
            fprintf(stderr, "ztrain-hosts: %s; %s not started: it would not find its files\n", why, program);
            return 126;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("%s\nOptions:\n  %-26s %s\n  %-26s %s\n  %-26s %s\n  %-26s %s\n", s_usage, "--host NAME=ADDRESS",
               "a name to resolve (repeated)", "--bind DST=SRC", "the folder SRC seen at DST (repeated)",
               "--help", "this text", "--version", "the version");
        return 0;
    }
    if (argc >= 2 && !strcmp(argv[1], "--version")) {
        printf("ztrain-hosts %s\n", ZT_VERSION);
        return 0;
    }
    static char *lines[MAX_NAMES], *binds[MAX_BINDS];
    int n = 0, nb = 0, a = 1;
    int rc = s_args(argc, argv, lines, &n, binds, &nb, &a);
    if (rc < 0 && (n > 0 || nb > 0))
        rc = s_setup(lines, n, binds, nb, argv[a]) ? 126 : -1;
    for (int i = 0; i < n; i++)
        free(lines[i]);
    if (rc >= 0)
        return rc;
    execvp(argv[a], argv + a);
    fprintf(stderr, "ztrain-hosts: cannot execute '%s': %s\n", argv[a], strerror(errno));
    return 127;
}
