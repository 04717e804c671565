#include "zt_position.h"
#include "base/zt_env.h"
#include "base/zt_util.h"
#include "ztrain/zt_log.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define POS_MAGIC 0x7a74706f73000001LL /* "ztpos", version 1 */

struct zt_position_t {
    volatile int64_t *map; /* magic, incarnation, next step */
    int64_t incarnation;
    int64_t found;         /* what the predecessor left (-1: nothing of this incarnation) */
    char *path;
};

zt_position_t *zt_position_open(int rank)
{
    const char *job = zt_env_get(ZT_ENV_JOB_DIR);
    if (!job || !*job)
        return NULL;
    char *dir = zt_strdupf("%s/trainers", job);
    zt_position_t *self = calloc(1, sizeof *self);
    self->path = zt_strdupf("%s/rank-%d.pos", dir, rank);
    self->incarnation = zt_env_int_or(ZT_ENV_INCARNATION, 0);
    self->found = -1;
    int fd = -1;
    struct stat st;
    if ((mkdir(dir, 0700) == 0 || errno == EEXIST) &&
        (fd = open(self->path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600)) >= 0 && fstat(fd, &st) == 0 &&
        S_ISREG(st.st_mode) && st.st_uid == geteuid() && (st.st_size == 24 || ftruncate(fd, 24) == 0)) {
        void *m = mmap(NULL, 24, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        self->map = m == MAP_FAILED ? NULL : m;
    }
    if (fd >= 0)
        close(fd);
    free(dir);
    if (!self->map) {
        zt_warn("%s: cannot keep this trainer's position there (%s): a restart goes on from the newest checkpoint",
                self->path, strerror(errno));
        zt_position_close(&self);
        return NULL;
    }
    if (self->map[0] == POS_MAGIC && self->map[1] == self->incarnation && self->map[2] >= 0)
        self->found = self->map[2];
    else
        self->map[2] = -1; /* another incarnation's, or none: nothing for a successor until the first step */
    self->map[1] = self->incarnation;
    self->map[0] = POS_MAGIC;
    return self;
}

int64_t zt_position_get(const zt_position_t *self) { return self ? self->found : -1; }
const char *zt_position_path(const zt_position_t *self) { return self ? self->path : ""; }

void zt_position_set(zt_position_t *self, int64_t next)
{
    if (self)
        self->map[2] = next;
}

void zt_position_close(zt_position_t **self_p)
{
    zt_position_t *self = self_p ? *self_p : NULL;
    if (!self)
        return;
    if (self->map)
        munmap((void *) self->map, 24);
    free(self->path);
    free(self);
    *self_p = NULL;
}
