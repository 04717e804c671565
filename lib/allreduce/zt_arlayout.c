#include "allreduce/zt_arlayout.h"
#include "ztrain/zt_allreduce.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_knobs.h"
#include "base/zt_shard.h"
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t zt_dtype_size(int dtype) { return dtype == ZT_F32 ? 4 : 2; }

void zt_ar_chunk(int64_t numel, size_t es, int b, int R, int r, int64_t *lo, int64_t *hi)
{
    if ((int64_t) es * numel < (int64_t) R * (64 << 10)) {
        bool mine = b % R == r;
        *lo = mine ? 0 : numel;
        *hi = numel;
        return;
    }
    zt_shard_range(numel, R, r, lo, hi);
}

int64_t zt_ar_piece_bytes(void)
{
    int64_t k = zt_knob_int(ZT_KNOB_AR_PIECE_BYTES);
    return k < 4096 ? 4096 : k > ZT_AR_MAX_PIECE_BYTES ? ZT_AR_MAX_PIECE_BYTES : k;
}

const char *zt_dtype_name(int dtype)
{
    return dtype == ZT_F32 ? "float32" : dtype == ZT_F16 ? "float16" : "bfloat16";
}

int zt_ar_layout_build(zt_ar_layout_t *self, json_t *tensors, int64_t threshold, int64_t piece_bytes)
{
    memset(self, 0, sizeof *self);
    if (piece_bytes < 4096 || piece_bytes > ZT_AR_MAX_PIECE_BYTES)
        return ZT_EINVAL;
    self->piece_bytes = piece_bytes;
    self->threshold = threshold;
    if (json_array_size(tensors) > ZT_AR_MAX_TENSORS || threshold <= 0)
        return ZT_EINVAL;
    int n = (int) json_array_size(tensors);
    self->ntensors = n;
    self->numel = calloc((size_t) n + 1, sizeof *self->numel);
    self->dtype = calloc((size_t) n + 1, sizeof *self->dtype);
    self->bucket = calloc((size_t) n + 1, sizeof *self->bucket);
    self->offset = calloc((size_t) n + 1, sizeof *self->offset);
    self->buckets = calloc((size_t) n + 1, sizeof *self->buckets);
    if (!self->numel || !self->dtype || !self->bucket || !self->offset || !self->buckets) {
        zt_ar_layout_free(self);
        return ZT_ENOMEM;
    }
    int64_t bytes = 0;
    for (int t = 0; t < n; t++) {
        json_t *j = json_array_get(tensors, (size_t) t);
        int64_t numel = 1;
        size_t i;
        json_t *d;
        bool ok = json_is_array(json_object_get(j, "shape"));
        json_array_foreach(json_object_get(j, "shape"), i, d) /* a layout may come from the network */
            ok = ok && json_is_integer(d) && json_integer_value(d) >= 0 &&
                 !__builtin_mul_overflow(numel, (int64_t) json_integer_value(d), &numel) &&
                 numel <= ZT_AR_MAX_NUMEL;
        int dtype = (int) json_integer_value(json_object_get(j, "dtype"));
        if (!ok || dtype < 0 || dtype > 2) {
            zt_ar_layout_free(self);
            return ZT_EINVAL;
        }
        self->numel[t] = numel;
        self->dtype[t] = dtype;
        int64_t tb = numel * (int64_t) zt_dtype_size(dtype);
        zt_ar_bucket_t *cur = self->nbuckets ? &self->buckets[self->nbuckets - 1] : NULL;
        if (!cur || cur->dtype != dtype || (bytes > 0 && bytes + tb > threshold)) {
            cur = &self->buckets[self->nbuckets++];
            cur->first = t;
            cur->dtype = dtype;
            bytes = 0;
        }
        self->bucket[t] = self->nbuckets - 1;
        self->offset[t] = cur->numel;
        cur->last = t;
        cur->numel += numel;
        if (cur->numel > ZT_AR_MAX_NUMEL) { /* a bucket past what any buffer here may hold */
            zt_ar_layout_free(self);
            return ZT_EINVAL;
        }
        bytes += tb;
    }
    return ZT_OK;
}

void zt_ar_layout_free(zt_ar_layout_t *self)
{
    free(self->numel);
    free(self->dtype);
    free(self->bucket);
    free(self->offset);
    free(self->buckets);
    memset(self, 0, sizeof *self);
}

__attribute__((optimize("O3")))
static void s_add_f32(float *restrict dst, const float *restrict src, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] += src[i];
}

void zt_ar_add(void *dst, const void *src, int64_t n, int dtype)
{
    if (dtype == ZT_F32) {
        if (((uintptr_t) src | (uintptr_t) dst) % 4 == 0)
            s_add_f32(dst, src, n);
        else
            for (int64_t i = 0; i < n; i++) {
                float a, b;
                memcpy(&a, (char *) dst + 4 * i, 4);
                memcpy(&b, (const char *) src + 4 * i, 4);
                a += b;
                memcpy((char *) dst + 4 * i, &a, 4);
            }
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        uint16_t a, b;
        memcpy(&a, (char *) dst + 2 * i, 2);
        memcpy(&b, (const char *) src + 2 * i, 2);
        uint16_t r = dtype == ZT_F16 ? zt_f32_to_f16(zt_f16_to_f32(a) + zt_f16_to_f32(b))
                                     : zt_f32_to_bf16(zt_bf16_to_f32(a) + zt_bf16_to_f32(b));
        memcpy((char *) dst + 2 * i, &r, 2);
    }
}

/* Built for the widest vectors the processor has (chosen when loaded).
 * Not with clang (the fuzzing build): its target_clones in C names the
 * chooser "NAME.ifunc", so other files' calls find no NAME. */
#if defined(__clang__)
#define S_CLONES
#else
#define S_CLONES __attribute__((target_clones("avx512f", "avx2", "default"), optimize("O3")))
#endif

typedef float __attribute__((may_alias, aligned(1))) s_f32_t;

/* Three sources added a pass to what the sum holds so far (the first
 * source, then out), each element's sum in a register. */
S_CLONES void zt_ar_sum_f32(float *out, const float *const *src, int n, int64_t len)
{
    s_f32_t *o = out;
    const s_f32_t *acc = src[0]; /* out from the second pass on */
    if (n == 1)
        for (int64_t j = 0; j < len; j++)
            o[j] = acc[j];
    for (int r = 1; r < n; r += 3, acc = o) {
        const s_f32_t *restrict a = src[r], *restrict b = src[r + 1 < n ? r + 1 : r],
                      *restrict c = src[r + 2 < n ? r + 2 : r];
        if (n - r == 1)
            for (int64_t j = 0; j < len; j++)
                o[j] = acc[j] + a[j];
        else if (n - r == 2)
            for (int64_t j = 0; j < len; j++)
                o[j] = (acc[j] + a[j]) + b[j];
        else
            for (int64_t j = 0; j < len; j++)
                o[j] = ((acc[j] + a[j]) + b[j]) + c[j];
    }
}

typedef uint32_t __attribute__((may_alias, aligned(1))) s_u32_t;
typedef uint16_t __attribute__((may_alias, aligned(1))) s_u16_t;

S_CLONES bool zt_all_finite(const void *src, int64_t n, int dtype)
{
    if (dtype == ZT_F32) {
        const s_u32_t *u = src;
        uint32_t bad = 0;
        for (int64_t i = 0; i < n; i++)
            bad |= (uint32_t) ((u[i] & 0x7f800000u) == 0x7f800000u);
        return !bad;
    }
    const s_u16_t *h = src;
    uint16_t mask = dtype == ZT_F16 ? 0x7c00 : 0x7f80, bad = 0;
    for (int64_t i = 0; i < n; i++)
        bad |= (uint16_t) ((h[i] & mask) == mask);
    return !bad;
}

static void s_shape(json_t *t, char *buf, size_t size)
{
    size_t len = (size_t) snprintf(buf, size, "[");
    size_t i;
    json_t *d;
    json_array_foreach(json_object_get(t, "shape"), i, d)
        len += (size_t) snprintf(buf + len, len < size ? size - len : 0, "%s%lld", i ? ", " : "",
                                 (long long) json_integer_value(d));
    snprintf(buf + len, len < size ? size - len : 0, "] %s",
             zt_dtype_name((int) json_integer_value(json_object_get(t, "dtype"))));
}

void zt_ar_describe_mismatch(json_t *mine, int my_rank, json_t *theirs, int their_rank, char *buf,
                             size_t size)
{
    size_t n = json_array_size(mine), m = json_array_size(theirs);
    for (size_t i = 0; i < n || i < m; i++) {
        json_t *a = json_array_get(mine, i), *b = json_array_get(theirs, i);
        char sa[160] = "(none)", sb[160] = "(none)";
        if (a)
            s_shape(a, sa, sizeof sa);
        if (b)
            s_shape(b, sb, sizeof sb);
        const char *na = a ? json_string_value(json_object_get(a, "name")) : NULL;
        const char *nb = b ? json_string_value(json_object_get(b, "name")) : NULL;
        if (!a || !b || strcmp(na, nb) || strcmp(sa, sb)) {
            if (a && b && !strcmp(na, nb))
                snprintf(buf, size, "tensor '%s' is %s on worker %d but %s on worker %d", na, sa,
                         my_rank, sb, their_rank);
            else
                snprintf(buf, size, "tensor #%zu is '%s' %s on worker %d but '%s' %s on worker %d", i,
                         na ? na : "(none)", sa, my_rank, nb ? nb : "(none)", sb, their_rank);
            return;
        }
    }
    snprintf(buf, size, "the workers' tensor lists differ (worker %d and worker %d)", my_rank,
             their_rank);
}
