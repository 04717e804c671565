/* zt_arlayout: how registered tensors become buckets, computed identically
 * by every worker and reducer from the tensor list and the threshold:
 * tensors in registration order, a new bucket when the next tensor would
 * pass the threshold or has another dtype (a tensor bigger than the
 * threshold is a bucket of its own). Chunk r of R of a bucket is the r-th
 * balanced, 16-element-aligned range (zt_shard_range). */
#ifndef ZT_ARLAYOUT_H
#define ZT_ARLAYOUT_H
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct {
    int first, last;       /* tensors [first, last] */
    int dtype;             /* zt_dtype_t */
    int64_t numel;         /* elements */
} zt_ar_bucket_t;

typedef struct {
    int ntensors;
    int64_t *numel;        /* per tensor */
    int *dtype;            /* per tensor */
    int *bucket;           /* per tensor */
    int64_t *offset;       /* per tensor: first element within its bucket */
    int nbuckets;
    zt_ar_bucket_t *buckets;
    int64_t threshold;     /* fusion threshold in bytes */
    int64_t piece_bytes;   /* the unit of sending and of streamed sums */
} zt_ar_layout_t;

/* The most tensors in a layout, and the most elements of one bucket (and
 * so of one tensor): 2^36, 256 GiB of float32, past any real model's
 * bucket; a layout from the network that asks for more is refused before
 * anything is allocated for it. */
#define ZT_AR_MAX_TENSORS (1 << 20)
#define ZT_AR_MAX_NUMEL ((int64_t) 1 << 36)
#define ZT_AR_MAX_PIECE_BYTES ((int64_t) 1 << 30)
/* Layouts one group may form in turn (ZT_AUTOTUNE forms one per setting it
 * tries): a message's group field (its incarnation) is the membership
 * generation times ZT_AR_LAYOUTS plus the layout's number, so a later
 * layout is a later group to the reducers and to the ring. */
#define ZT_AR_LAYOUTS 64
/* tensors: [{name, shape:[...], dtype}]; piece_bytes 4096 to 2^30 (the
 * workers' ZT_AR_PIECE_BYTES, carried to the reducers in the layout). ZT_EINVAL for
 * a malformed or oversized list (shapes: non-negative integers whose
 * product fits), ZT_ENOMEM. */
int zt_ar_layout_build(zt_ar_layout_t *self, json_t *tensors, int64_t threshold, int64_t piece_bytes);
void zt_ar_layout_free(zt_ar_layout_t *self);
size_t zt_dtype_size(int dtype);
/* Chunk r of R of bucket b (numel elements of es bytes): the balanced,
 * aligned ranges of zt_shard_range, except that a bucket under 64 KiB per
 * reducer goes whole to one reducer (b mod R), the others getting nothing:
 * cutting a small bucket only multiplies the messages. */
void zt_ar_chunk(int64_t numel, size_t es, int b, int R, int r, int64_t *lo, int64_t *hi);
/* All-reduce piece in bytes (ZT_AR_PIECE_BYTES, at least 4 KiB). */
int64_t zt_ar_piece_bytes(void);
const char *zt_dtype_name(int dtype);
/* dst[i] += src[i] for n elements of dtype (f16/bf16 through float32);
 * src may be unaligned. */
void zt_ar_add(void *dst, const void *src, int64_t n, int dtype);
/* out[i] = ((src[0][i] + src[1][i]) + src[2][i]) + ... for n float32 sources
 * of len elements (n >= 1), a pass per three added: the same sums, bit for
 * bit, as a copy of the first and zt_ar_add of each other in order. No
 * alignment needed; out may be none of the sources. */
void zt_ar_sum_f32(float *out, const float *const *src, int n, int64_t len);
/* Whether all n elements of dtype (ZT_F32, ZT_F16, ZT_BF16) are finite (no
 * NaN, no infinity): an OR over the exponent bits, vectorised, a fraction
 * of the pass that then adds or applies them. src needs no alignment. */
bool zt_all_finite(const void *src, int64_t n, int dtype);
/* Describes the first difference between two tensor lists into buf. */
void zt_ar_describe_mismatch(json_t *mine, int my_rank, json_t *theirs, int their_rank, char *buf,
                             size_t size);

#endif
