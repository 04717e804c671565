/* Copying a block into memory that is not in the cache.
 *
 * An ordinary copy reads every destination line into the cache before it
 * overwrites it (read for ownership). Non-temporal stores write the lines
 * whole, past the cache: measured on a 2-core virtual machine (Sapphire
 * Rapids), 16 MiB in 128 KiB pieces, 7.5 GB/s with memcpy against 16.6 GB/s
 * from uncached bytes, 12 against 20.5 from cached ones. The destination
 * then is not in the cache either: for large blocks (an all-reduce's sums
 * written into the callers' tensors, and the copy kept for a restarted
 * reducer), not for small ones read at once. */
#ifndef ZT_COPY_H
#define ZT_COPY_H
#include <stddef.h>

/* At least this many bytes are copied past the cache; fewer, by memcpy. */
#define ZT_COPY_COLD_MIN ((size_t) 4096)

/* memcpy(dst, src, n) (the blocks do not overlap), past the cache where the
 * processor can and n >= ZT_COPY_COLD_MIN. */
void zt_copy_cold(void *dst, const void *src, size_t n);
/* dst[i] = src[i] * scale for n floats, the same way past the cache (the
 * products those of an ordinary float multiplication). */
void zt_copy_cold_scaled(float *dst, const float *src, size_t n, float scale);
void zt_copy_selftest(void);

#endif
