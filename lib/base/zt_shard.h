/* zt_shard: how the model's elements are spread over parameter servers.
 * All tensors, in declaration order, form one flat key space of `total`
 * float32 elements. Server s of S owns one contiguous range; ranges are
 * balanced by bytes and aligned to 16 elements (64 bytes), so a large tensor
 * is split across servers and small ones are packed. Every replica computes
 * the same ranges from (total, S). */
#ifndef ZT_SHARD_H
#define ZT_SHARD_H
#include <stdint.h>

/* [*lo, *hi) of server s. */
void zt_shard_range(int64_t total, int servers, int s, int64_t *lo, int64_t *hi);
/* The server owning global element `at`. */
int zt_shard_owner(int64_t total, int servers, int64_t at);
void zt_shard_selftest(void);

/* Deterministic initial value of global element i (counter-based, so any
 * range can be computed on its own): uniform in [-scale, scale]. */
float zt_init_uniform(uint64_t seed, int64_t i, float scale);

#endif
