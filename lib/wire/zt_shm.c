#include "wire/zt_shm.h"
#include "ztrain/zt_knobs.h"
#include "ztrain/zt_log.h"
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_PEER_MAPS 256
#define SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

bool zt_shm_enabled(void)
{
    static int on = -1;
    if (on < 0) {
        int fd = strcmp(zt_knob_str(ZT_KNOB_SHM), "off") ? memfd_create("ztrain-probe", MFD_CLOEXEC | MFD_ALLOW_SEALING) : -1;
        on = fd >= 0;
        if (fd >= 0)
            close(fd);
    }
    return on == 1;
}

/* The owner's pid in ztrain-<tag>-<pid>-<n>, or -1. */
static long s_name_pid(const char *name)
{
    if (strncmp(name, "ztrain-", 7) || strchr(name, '/'))
        return -1;
    const char *last = strrchr(name, '-');
    if (!last || last == name)
        return -1;
    const char *p = last - 1;
    while (p > name && *p != '-')
        p--;
    if (*p != '-')
        return -1;
    char *end;
    long pid = strtol(p + 1, &end, 10);
    if (end != last || pid <= 0 || !last[1])
        return -1;
    for (const char *d = last + 1; *d; d++) /* the serial */
        if (*d < '0' || *d > '9')
            return -1;
    return pid;
}

static bool s_pid_gone(long pid)
{
    return kill((pid_t) pid, 0) < 0 && errno == ESRCH;
}

zt_shm_region_t *zt_shm_create(const char *tag, size_t size)
{
    static atomic_int serial;
    if (!zt_shm_enabled() || size == 0)
        return NULL;
    /* at most half the machine's memory, as /dev/shm allows by default:
     * reserving more would push the machine out of memory, not fail */
    uint64_t half = (uint64_t) sysconf(_SC_PHYS_PAGES) * (uint64_t) sysconf(_SC_PAGESIZE) / 2;
    if (size > half) {
        zt_warn("shared memory for %s: %zu bytes is more than half this machine's memory; sending over the "
                "socket instead", tag, size);
        return NULL;
    }
    zt_shm_region_t *self = calloc(1, sizeof *self);
    snprintf(self->name, sizeof self->name, "ztrain-%s-%d-%d", tag, (int) getpid(),
             atomic_fetch_add(&serial, 1));
    int fd = memfd_create(self->name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    /* Reserve the pages now (an overcommitted machine would otherwise fail
     * at the first write), then seal the size: no process, this one
     * included, can shrink the region under a peer that maps it. */
    int err = fd < 0 ? errno : ftruncate(fd, (off_t) size) != 0 ? errno : posix_fallocate(fd, 0, (off_t) size);
    if (!err && fcntl(fd, F_ADD_SEALS, SEALS) != 0)
        err = errno;
    if (err) {
        zt_warn("shared memory %s (%zu bytes): %s; sending over the socket instead", self->name, size, strerror(err));
        if (fd >= 0)
            close(fd);
        free(self);
        return NULL;
    }
    self->base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (self->base == MAP_FAILED) {
        zt_warn("shared memory %s: mmap: %s; sending over the socket instead", self->name, strerror(errno));
        close(fd);
        free(self);
        return NULL;
    }
    self->fd = fd; /* kept open: peers find the region through it (/proc/PID/fd) */
    self->size = size;
    return self;
}

void zt_shm_destroy(zt_shm_region_t **self_p)
{
    zt_shm_region_t *self = *self_p;
    if (!self)
        return;
    munmap(self->base, self->size);
    close(self->fd);
    free(self);
    *self_p = NULL;
}

int64_t zt_shm_offset(const zt_shm_region_t *self, const void *p, size_t len)
{
    if (!self || (const char *) p < self->base || (const char *) p + len > self->base + self->size)
        return -1;
    return (const char *) p - self->base;
}

typedef struct { char name[64]; const char *base; size_t size; long pid; int fd; int pins; } s_map_t;
static s_map_t s_maps[MAX_PEER_MAPS];
static int s_nmaps;
static pthread_mutex_t s_maps_lock = PTHREAD_MUTEX_INITIALIZER;

/* Whether /proc/pid/fd/fd is still the memfd called name. */
static bool s_is_region(long pid, int fd, const char *name)
{
    char link[64], target[128], want[96];
    snprintf(link, sizeof link, "/proc/%ld/fd/%d", pid, fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n < 0)
        return false;
    target[n] = 0;
    snprintf(want, sizeof want, "/memfd:%s (deleted)", name);
    return !strcmp(target, want);
}

/* The descriptor number of process pid's region name, or -1. */
static int s_find_region(long pid, const char *name)
{
    char dir[48];
    snprintf(dir, sizeof dir, "/proc/%ld/fd", pid);
    DIR *d = opendir(dir);
    int found = -1;
    struct dirent *e;
    while (d && found < 0 && (e = readdir(d))) {
        char *end;
        long fd = strtol(e->d_name, &end, 10);
        if (end != e->d_name && !*end && fd >= 0 && fd < INT32_MAX && s_is_region(pid, (int) fd, name))
            found = (int) fd;
    }
    if (d)
        closedir(d);
    return found;
}

const void *zt_shm_peer(const char *name, int64_t off, int64_t len, char *err, size_t errsize)
{
    long pid = s_name_pid(name);
    if (pid < 0 || strlen(name) >= sizeof s_maps[0].name) {
        snprintf(err, errsize, "'%.64s' is not a ztrain shared-memory region", name);
        return NULL;
    }
    pthread_mutex_lock(&s_maps_lock);
    s_map_t *m = NULL;
    for (int i = 0; i < s_nmaps && !m; i++)
        if (!strcmp(s_maps[i].name, name))
            m = &s_maps[i];
    if (!m) {
        for (int i = 0; i < s_nmaps;) { /* drop the regions of owners that are gone, or destroyed */
            if (!s_maps[i].pins &&
                (s_pid_gone(s_maps[i].pid) || !s_is_region(s_maps[i].pid, s_maps[i].fd, s_maps[i].name))) {
                munmap((void *) s_maps[i].base, s_maps[i].size);
                s_maps[i] = s_maps[--s_nmaps];
            }
            else
                i++;
        }
        /* The region is a sealed memfd of process pid, reached through its
         * descriptor: no file anyone else could plant, link or truncate.
         * Only a process of this user may open it (the kernel checks), and
         * only one whose size cannot shrink is mapped: a peer can never
         * cause a SIGBUS here. */
        int at = s_find_region(pid, name), fd = -1;
        char path[64];
        snprintf(path, sizeof path, "/proc/%ld/fd/%d", pid, at);
        if (at >= 0)
            fd = open(path, O_RDONLY | O_CLOEXEC);
        struct stat st;
        bool stat_ok = fd >= 0 && fstat(fd, &st) == 0;
        int seals = fd >= 0 ? fcntl(fd, F_GET_SEALS) : -1;
        const char *bad = at < 0 ? "no such region of that process (it must be a live process's own, of this user)"
                          : fd < 0 ? strerror(errno)
                          : !stat_ok ? strerror(errno)
                          : !S_ISREG(st.st_mode) ? "not a plain file, refused"
                          : st.st_uid != geteuid() ? "owned by another user, refused"
                          : seals < 0 || (seals & F_SEAL_SHRINK) == 0 ? "not sealed against shrinking, refused"
                          : st.st_size <= 0 ? "empty"
                          : s_nmaps == MAX_PEER_MAPS ? "too many regions" : NULL;
        if (bad) {
            snprintf(err, errsize, "shared memory %s: %s", name, bad);
            if (fd >= 0)
                close(fd);
            pthread_mutex_unlock(&s_maps_lock);
            return NULL;
        }
        void *base = mmap(NULL, (size_t) st.st_size, PROT_READ, MAP_SHARED, fd, 0);
        close(fd);
        if (base == MAP_FAILED) {
            snprintf(err, errsize, "shared memory %s: mmap: %s", name, strerror(errno));
            pthread_mutex_unlock(&s_maps_lock);
            return NULL;
        }
        m = &s_maps[s_nmaps++];
        snprintf(m->name, sizeof m->name, "%s", name);
        m->base = base;
        m->size = (size_t) st.st_size;
        m->pid = pid;
        m->fd = at;
        m->pins = 0;
    }
    const char *p = NULL;
    if (off >= 0 && len >= 0 && (uint64_t) off + (uint64_t) len <= m->size)
        p = m->base + off;
    else
        snprintf(err, errsize, "shared memory %s: bytes [%lld, %lld) are outside its %zu", name,
                 (long long) off, (long long) (off + len), m->size);
    pthread_mutex_unlock(&s_maps_lock);
    return p;
}

void zt_shm_peer_pin(const void *p, int by)
{
    pthread_mutex_lock(&s_maps_lock);
    for (int i = 0; i < s_nmaps; i++)
        if ((const char *) p >= s_maps[i].base && (const char *) p < s_maps[i].base + s_maps[i].size) {
            s_maps[i].pins += by;
            break;
        }
    pthread_mutex_unlock(&s_maps_lock);
}

const void *zt_shm_payload(const char *shm, int64_t off, int64_t want, const void *frame, size_t frame_size,
                           char *why, size_t whysize)
{
    if (want < 0) {
        snprintf(why, whysize, "a payload of %lld bytes", (long long) want);
        return NULL;
    }
    if (shm && shm[0])
        return zt_shm_peer(shm, off, want, why, whysize);
    if (frame_size != (size_t) want) {
        snprintf(why, whysize, "a payload of %zu bytes where %lld were expected", frame_size, (long long) want);
        return NULL;
    }
    return frame ? frame : ""; /* nothing to read, but not an error */
}

void zt_shm_selftest(void)
{
    if (!zt_shm_enabled())
        return;
    char err[256];
    zt_shm_region_t *r = zt_shm_create("selftest", 1 << 20);
    assert(r && r->size == 1 << 20);
    assert(s_name_pid(r->name) == getpid());
    /* more than half the memory: refused at once (no reservation that would exhaust it) */
    assert(!zt_shm_create("selftest", (size_t) 1 << 44));
    strcpy(r->base + 4096, "hello");
    assert(zt_shm_offset(r, r->base + 4096, 6) == 4096);
    assert(zt_shm_offset(r, r->base + (1 << 20) - 2, 6) == -1);
    const char *p = zt_shm_peer(r->name, 4096, 6, err, sizeof err);
    assert(p && !strcmp(p, "hello"));
    strcpy(r->base + 4096, "again"); /* the same pages: seen at once */
    assert(!strcmp(p, "again"));
    /* garbage from the network: never a crash, always a reason */
    assert(!zt_shm_peer(r->name, (1 << 20) - 2, 6, err, sizeof err) && strstr(err, "outside"));
    assert(!zt_shm_peer(r->name, -1, 6, err, sizeof err));
    assert(!zt_shm_peer("../etc/passwd", 0, 6, err, sizeof err) && strstr(err, "not a ztrain"));
    assert(!zt_shm_peer("ztrain-x-1-", 0, 6, err, sizeof err) && strstr(err, "not a ztrain"));
    assert(!zt_shm_peer("ztrain-x-1-2a", 0, 6, err, sizeof err) && strstr(err, "not a ztrain"));
    assert(!zt_shm_peer("ztrain-none-999999999-0", 0, 6, err, sizeof err) && strstr(err, "no such region"));
    /* a plain file in /dev/shm named like a region of this process is not one */
    char planted[128];
    snprintf(planted, sizeof planted, "/dev/shm/ztrain-selftest-%d-77", (int) getpid());
    int pf = open(planted, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (pf >= 0) {
        assert(ftruncate(pf, 4096) == 0);
        close(pf);
        assert(!zt_shm_peer(planted + 9, 0, 6, err, sizeof err) && strstr(err, "no such region"));
        unlink(planted);
    }
    /* nobody can shrink a region (its owner neither): no SIGBUS for peers */
    char own[64];
    snprintf(own, sizeof own, "/proc/self/fd/%d", r->fd);
    int again = open(own, O_RDWR | O_CLOEXEC);
    assert(again >= 0 && ftruncate(again, 0) != 0 && errno == EPERM);
    assert(ftruncate(r->fd, 4096) != 0 && errno == EPERM);
    close(again);
    /* a payload: from the region when named, else the frame of the right size */
    assert(zt_shm_payload(r->name, 4096, 6, "framed", 6, err, sizeof err) == p);
    assert(!strcmp(zt_shm_payload("", 0, 6, "framed", 6, err, sizeof err), "framed"));
    assert(!zt_shm_payload("", 0, 6, "frame", 5, err, sizeof err) && strstr(err, "5 bytes where 6"));
    assert(zt_shm_payload(NULL, 0, 0, NULL, 0, err, sizeof err));
    assert(!zt_shm_payload("", 0, -4, NULL, 0, err, sizeof err));
    /* a pinned mapping outlives its region's end, for a reader that holds it */
    zt_shm_region_t *r2 = zt_shm_create("selftest", 4096);
    const char *q = zt_shm_peer(r2->name, 0, 6, err, sizeof err);
    assert(q);
    strcpy(r2->base, "kept");
    zt_shm_peer_pin(q, 1);
    zt_shm_destroy(&r2);
    zt_shm_region_t *r3 = zt_shm_create("selftest", 4096); /* a new one: the sweep runs */
    assert(zt_shm_peer(r3->name, 0, 1, err, sizeof err) && !strcmp(q, "kept"));
    zt_shm_peer_pin(q, -1);
    zt_shm_destroy(&r3);
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", r->fd);
    zt_shm_destroy(&r);
    assert(!r && access(path, F_OK) != 0);
}
