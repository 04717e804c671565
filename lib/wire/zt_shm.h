/* zt_shm: shared memory between replicas on one host.
 *
 * Over the ipc:// twins every byte is still copied twice by the kernel (into
 * the socket, out of it), and on two cores those copies are most of a
 * same-host all-reduce. A region is a memfd that its owner maps and writes,
 * its size sealed (nobody, the owner included, can shrink it); a peer on
 * the same host is told a region's name and an offset in a message header
 * instead of receiving the bytes, opens the region through the owner's
 * descriptor (/proc/PID/fd: the kernel lets only the same user in), maps it
 * once (read only) and reads the bytes in place. A region that is not
 * sealed, or not a live process's of this user, is refused, so a peer can
 * never cause a SIGBUS. The owner's protocol says when the bytes may change
 * (see zt_allreduce.c and zt_reducer.c); nothing here locks.
 *
 * Regions are named ztrain-<tag>-<pid>-<n>; they live no longer than their
 * owner's descriptor, so nothing is left behind, even after SIGKILL.
 * ZT_SHM=off turns all of this off. */
#ifndef ZT_SHM_H
#define ZT_SHM_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    char name[64];   /* ztrain-<tag>-<pid>-<n> */
    char *base;      /* mapped read-write */
    size_t size;
    int fd;          /* the memfd, open while the region lives */
} zt_shm_region_t;

/* Whether shared memory is on (ZT_SHM=auto and /dev/shm writable). */
bool zt_shm_enabled(void);
/* A new region of size bytes (zero-filled), or NULL when off or it cannot
 * be made (logged). */
zt_shm_region_t *zt_shm_create(const char *tag, size_t size);
/* Unmaps and unlinks. */
void zt_shm_destroy(zt_shm_region_t **self_p);
/* Offset of p inside the region, or -1 when p is not in it. */
int64_t zt_shm_offset(const zt_shm_region_t *self, const void *p, size_t len);
/* A peer's bytes [off, off + len) of region name, mapped read-only on first
 * use and kept; NULL (the reason in err) when name is not a ztrain region,
 * cannot be opened, or the range is outside it. Mappings of regions whose
 * owner has exited are dropped when a new one is mapped. */
const void *zt_shm_peer(const char *name, int64_t off, int64_t len, char *err, size_t errsize);
/* by 1: the mapping holding p (a zt_shm_peer result) stays mapped even once
 * its owner has exited, for a reader that keeps pointers into it; by -1:
 * that reader is done with it (pins count). */
void zt_shm_peer_pin(const void *p, int by);
/* The want bytes a message carries: in the peer's region shm at off when shm
 * is set, else in its frame (NULL, 0 when it has none), which must hold
 * exactly want. NULL, the reason in why, when neither does. */
const void *zt_shm_payload(const char *shm, int64_t off, int64_t want, const void *frame, size_t frame_size,
                           char *why, size_t whysize);

void zt_shm_selftest(void);

#endif
