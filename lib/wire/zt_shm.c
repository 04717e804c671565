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

#define SHM_DIR "/dev/shm"
#define MAX_PEER_MAPS 256

bool zt_shm_enabled(void)
{
    static int on = -1;
    if (on < 0)
        on = strcmp(zt_knob_str(ZT_KNOB_SHM), "off") != 0 && access(SHM_DIR, W_OK) == 0;
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

void zt_shm_sweep(void)
{
    DIR *d = opendir(SHM_DIR);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        long pid = s_name_pid(e->d_name);
        if (pid > 0 && s_pid_gone(pid)) {
            char path[300];
            snprintf(path, sizeof path, SHM_DIR "/%s", e->d_name);
            if (unlink(path) == 0)
                zt_debug("removed %s, left by process %ld", path, pid);
        }
    }
    closedir(d);
}

zt_shm_region_t *zt_shm_create(const char *tag, size_t size)
{
    static atomic_int serial;
    static atomic_bool swept;
    if (!zt_shm_enabled() || size == 0)
        return NULL;
    if (!atomic_exchange(&swept, true))
        zt_shm_sweep();
    zt_shm_region_t *self = calloc(1, sizeof *self);
    snprintf(self->name, sizeof self->name, "ztrain-%s-%d-%d", tag, (int) getpid(),
             atomic_fetch_add(&serial, 1));
    char path[128];
    snprintf(path, sizeof path, SHM_DIR "/%s", self->name);
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    /* Reserve the pages now: a sparse file in a full /dev/shm (containers
     * often give it 64 MiB) would be a SIGBUS at the first write instead. */
    int err = fd < 0 ? errno : posix_fallocate(fd, 0, (off_t) size);
    if (err) {
        zt_warn("shared memory %s (%zu bytes): %s; sending over the socket instead", path, size,
                strerror(err));
        if (fd >= 0) {
            close(fd);
            unlink(path);
        }
        free(self);
        return NULL;
    }
    self->base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (self->base == MAP_FAILED) {
        zt_warn("shared memory %s: mmap: %s; sending over the socket instead", path, strerror(errno));
        unlink(path);
        free(self);
        return NULL;
    }
    self->size = size;
    return self;
}

void zt_shm_destroy(zt_shm_region_t **self_p)
{
    zt_shm_region_t *self = *self_p;
    if (!self)
        return;
    char path[128];
    snprintf(path, sizeof path, SHM_DIR "/%s", self->name);
    unlink(path);
    munmap(self->base, self->size);
    free(self);
    *self_p = NULL;
}

int64_t zt_shm_offset(const zt_shm_region_t *self, const void *p, size_t len)
{
    if (!self || (const char *) p < self->base || (const char *) p + len > self->base + self->size)
        return -1;
    return (const char *) p - self->base;
}

typedef struct { char name[64]; const char *base; size_t size; long pid; } s_map_t;
static s_map_t s_maps[MAX_PEER_MAPS];
static int s_nmaps;
static pthread_mutex_t s_maps_lock = PTHREAD_MUTEX_INITIALIZER;

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
        for (int i = 0; i < s_nmaps;) { /* drop the regions of owners that are gone, or unlinked */
            char p[128];
            snprintf(p, sizeof p, SHM_DIR "/%s", s_maps[i].name);
            if (s_pid_gone(s_maps[i].pid) || access(p, F_OK) != 0) {
                munmap((void *) s_maps[i].base, s_maps[i].size);
                s_maps[i] = s_maps[--s_nmaps];
            }
            else
                i++;
        }
        char path[128];
        snprintf(path, sizeof path, SHM_DIR "/%s", name);
        /* never through a link, only a plain file of this user's: another
         * user's file (or a link to one this process may read) is refused */
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        struct stat st;
        bool stat_ok = fd >= 0 && fstat(fd, &st) == 0;
        const char *bad = fd < 0 ? (errno == ELOOP ? "a symbolic link, refused" : strerror(errno))
                          : !stat_ok ? strerror(errno)
                          : !S_ISREG(st.st_mode) ? "not a plain file, refused"
                          : st.st_uid != geteuid() ? "owned by another user, refused"
                          : st.st_size <= 0 ? "empty"
                          : s_nmaps == MAX_PEER_MAPS ? "too many regions" : NULL;
        if (bad) {
            snprintf(err, errsize, "shared memory %s: %s", path, bad);
            if (fd >= 0)
                close(fd);
            pthread_mutex_unlock(&s_maps_lock);
            return NULL;
        }
        void *base = mmap(NULL, (size_t) st.st_size, PROT_READ, MAP_SHARED, fd, 0);
        close(fd);
        if (base == MAP_FAILED) {
            snprintf(err, errsize, "shared memory %s: mmap: %s", path, strerror(errno));
            pthread_mutex_unlock(&s_maps_lock);
            return NULL;
        }
        m = &s_maps[s_nmaps++];
        snprintf(m->name, sizeof m->name, "%s", name);
        m->base = base;
        m->size = (size_t) st.st_size;
        m->pid = pid;
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
    /* more than /dev/shm can hold: refused at once (no SIGBUS later) */
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
    assert(!zt_shm_peer("ztrain-none-999999999-0", 0, 6, err, sizeof err) && strstr(err, "/dev/shm/"));
    /* a payload: from the region when named, else the frame of the right size */
    assert(zt_shm_payload(r->name, 4096, 6, "framed", 6, err, sizeof err) == p);
    assert(!strcmp(zt_shm_payload("", 0, 6, "framed", 6, err, sizeof err), "framed"));
    assert(!zt_shm_payload("", 0, 6, "frame", 5, err, sizeof err) && strstr(err, "5 bytes where 6"));
    assert(zt_shm_payload(NULL, 0, 0, NULL, 0, err, sizeof err));
    assert(!zt_shm_payload("", 0, -4, NULL, 0, err, sizeof err));
    /* a region left by a process that is gone is swept by the next creator */
    char stale[128];
    snprintf(stale, sizeof stale, SHM_DIR "/ztrain-selftest-%d-0", 999999999);
    int fd = open(stale, O_RDWR | O_CREAT, 0600);
    assert(fd >= 0);
    close(fd);
    zt_shm_sweep();
    assert(access(stale, F_OK) != 0);
    char path[128];
    snprintf(path, sizeof path, SHM_DIR "/%s", r->name);
    zt_shm_destroy(&r);
    assert(!r && access(path, F_OK) != 0);
}
