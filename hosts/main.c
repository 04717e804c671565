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
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_NAMES 4096
#define MAX_HOSTS_FILE (4 << 20) /* the machine's /etc/hosts, read whole */

static const char s_usage[] =
    "usage: ztrain-hosts [--host NAME=ADDRESS]... [--] PROGRAM [ARG...]\n\n"
    "Runs PROGRAM with each NAME resolving to ADDRESS (an IPv4 or IPv6 address,\n"
    "or a host name resolved here first), as a SageMaker container resolves the\n"
    "job's hosts algo-1..N. PROGRAM gets a mount namespace of its own (and a user\n"
    "namespace mapping only the same user and group, when not run as root) where\n"
    "/etc/hosts is the machine's file plus one line per NAME. The machine's file\n"
    "is not changed; nothing is left behind. PROGRAM replaces this process (same\n"
    "pid, signals, exit status). When no namespace can be made here (unprivileged\n"
    "user namespaces turned off), it says so and runs PROGRAM without the names.\n"
    "`ztrain run` starts each host of a CreateTrainingJob this way.\n";

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
 * not root), in which file is /etc/hosts. false with why. */
static bool s_enter(const char *file, char *why, size_t len)
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
    if (mount(file, "/etc/hosts", NULL, MS_BIND, NULL) != 0) {
        snprintf(why, len, "bind-mounting over /etc/hosts: %s", strerror(errno));
        return false;
    }
    return true;
}

/* Long on purpose: the arguments, checked one by one with a message each,
 * then the namespace and the exec, in the order they happen. */
int main(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("%s\nOptions:\n  %-26s %s\n  %-26s %s\n  %-26s %s\n", s_usage, "--host NAME=ADDRESS",
               "a name to resolve (repeated)", "--help", "this text", "--version", "the version");
        return 0;
    }
    if (argc >= 2 && !strcmp(argv[1], "--version")) {
        printf("ztrain-hosts %s\n", ZT_VERSION);
        return 0;
    }
    static char *lines[MAX_NAMES];
    int n = 0, a = 1;
    for (; a < argc; a++) {
        const char *arg = argv[a], *spec = NULL;
        if (!strcmp(arg, "--")) {
            a++;
            break;
        }
        if (!strncmp(arg, "--host=", 7))
            spec = arg + 7;
        else if (!strcmp(arg, "--host") && a + 1 < argc)
            spec = argv[++a];
        else if (!strcmp(arg, "--host")) {
            fprintf(stderr, "ztrain-hosts: --host needs NAME=ADDRESS\n");
            return 2;
        }
        else if (arg[0] == '-') {
            fprintf(stderr, "ztrain-hosts: unknown option '%s' (see ztrain-hosts --help)\n", arg);
            return 2;
        }
        else
            break;
        const char *eq = strchr(spec, '=');
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
        if (n == MAX_NAMES) {
            fprintf(stderr, "ztrain-hosts: more than %d names\n", MAX_NAMES);
            return 2;
        }
        if (asprintf(&lines[n++], "%s %.*s\n", addr, (int) (eq - spec), spec) < 0)
            return 1;
    }
    if (a >= argc) {
        fprintf(stderr, "%s", s_usage);
        return 2;
    }
    if (n > 0) {
        char file[4096], why[512];
        if (!s_make_file(lines, n, file, sizeof file))
            fprintf(stderr, "ztrain-hosts: cannot write the job's hosts file (%s): %s; %s runs without the "
                    "job's host names\n", file, strerror(errno), argv[a]);
        else {
            if (!s_enter(file, why, sizeof why))
                fprintf(stderr, "ztrain-hosts: %s; %s runs without the job's host names\n", why, argv[a]);
            unlink(file); /* the mount holds it; nothing is left when the namespace ends */
        }
    }
    for (int i = 0; i < n; i++)
        free(lines[i]);
    execvp(argv[a], argv + a);
    fprintf(stderr, "ztrain-hosts: cannot execute '%s': %s\n", argv[a], strerror(errno));
    return 127;
}
