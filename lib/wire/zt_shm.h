/* zt_shm: shared memory between replicas on one host.
 *
 * Over the ipc:// twins every byte is still copied twice by the kernel (into
 * the socket, out of it), and on two cores those copies are most of a
 * same-host all-reduce. A region is a file in /dev/shm that its owner maps
 * and writes; a peer on the same host is told a region's name and an offset
 * in a message header instead of receiving the bytes, maps the region once
 * (read only) and reads them in place. The owner's protocol says when the
 * bytes may change (see zt_allreduce.c and zt_reducer.c); nothing here locks.
 *
 * Regions are named ztrain-<tag>-<pid>-<n>, unlinked by their owner when
 * destroyed; creating one first removes those of processes that are gone
 * (killed with SIGKILL). ZT_SHM=off turns all of this off. */
#ifndef ZT_SHM_H
#define ZT_SHM_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    char name[64];   /* ztrain-<tag>-<pid>-<n> */
    char *base;      /* mapped read-write */
    size_t size;
} zt_shm_region_t;

/* Whether shared memory is on (ZT_SHM=auto and /dev/shm writable). */
bool zt_shm_enabled(void);
/* A new region of size bytes (zero-filled), or NULL when off or it cannot
 * be made (logged). */
zt_shm_region_t *zt_shm_create(const char *tag, size_t size);
/* Removes the regions of processes that are gone (killed with SIGKILL);
 * zt_shm_create does it once per process. */
void zt_shm_sweep(void);
/* Unmaps and unlinks. */
void zt_shm_destroy(zt_shm_region_t **self_p);
/* Offset of p inside the region, or -1 when p is not in it. */
int64_t zt_shm_offset(const zt_shm_region_t *self, const void *p, size_t len);
/* A peer's bytes [off, off + len) of region name, mapped read-only on first
 * use and kept; NULL (the reason in err) when name is not a ztrain region,
 * cannot be opened, or the range is outside it. Mappings of regions whose
 * owner has exited are dropped when a new one is mapped. */
const void *zt_shm_peer(const char *name, int64_t off, int64_t len, char *err, size_t errsize);
/* The want bytes a message carries: in the peer's region shm at off when shm
 * is set, else in its frame (NULL, 0 when it has none), which must hold
 * exactly want. NULL, the reason in why, when neither does. */
const void *zt_shm_payload(const char *shm, int64_t off, int64_t want, const void *frame, size_t frame_size,
                           char *why, size_t whysize);

void zt_shm_selftest(void);

#endif
