#include "base/zt_copy.h"
#include <assert.h>
#include <immintrin.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* AVX-512F, with the operating system saving its registers (libgcc's
 * check, as target_clones makes). */
static bool s_avx512(void) { return __builtin_cpu_supports("avx512f"); }

__attribute__((target("avx512f"))) static void s_stream(char *d, const char *s, size_t n)
{
    size_t head = (64 - ((uintptr_t) d & 63)) & 63; /* up to d's first whole line */
    memcpy(d, s, head);
    d += head, s += head, n -= head;
    for (; n >= 256; d += 256, s += 256, n -= 256) {
        __m512i a = _mm512_loadu_si512(s), b = _mm512_loadu_si512(s + 64), c = _mm512_loadu_si512(s + 128),
                e = _mm512_loadu_si512(s + 192);
        _mm512_stream_si512((void *) d, a);
        _mm512_stream_si512((void *) (d + 64), b);
        _mm512_stream_si512((void *) (d + 128), c);
        _mm512_stream_si512((void *) (d + 192), e);
    }
    for (; n >= 64; d += 64, s += 64, n -= 64)
        _mm512_stream_si512((void *) d, _mm512_loadu_si512(s));
    _mm_sfence(); /* ordered before whatever the caller does next */
    memcpy(d, s, n);
}

__attribute__((target("avx512f"))) static void s_stream_scaled(float *d, const float *s, size_t n, float scale)
{
    for (; n && ((uintptr_t) d & 63); d++, s++, n--) /* up to d's first whole line */
        *d = *s * scale;
    __m512 k = _mm512_set1_ps(scale);
    for (; n >= 16; d += 16, s += 16, n -= 16)
        _mm512_stream_ps(d, _mm512_mul_ps(_mm512_loadu_ps(s), k));
    _mm_sfence();
    for (; n; d++, s++, n--)
        *d = *s * scale;
}

void zt_copy_cold_scaled(float *dst, const float *src, size_t n, float scale)
{
    if (n * sizeof(float) >= ZT_COPY_COLD_MIN && s_avx512() && !((uintptr_t) dst & 3))
        s_stream_scaled(dst, src, n, scale);
    else
        for (size_t i = 0; i < n; i++)
            dst[i] = src[i] * scale;
}

void zt_copy_cold(void *dst, const void *src, size_t n)
{
    if (n >= ZT_COPY_COLD_MIN && s_avx512())
        s_stream(dst, src, n);
    else
        memcpy(dst, src, n);
}

void zt_copy_selftest(void)
{
    size_t max = ZT_COPY_COLD_MIN + 300;
    char *src = malloc(max + 64), *dst = malloc(max + 128);
    assert(src && dst);
    for (size_t i = 0; i < max + 64; i++)
        src[i] = (char) (i * 131 + 7);
    /* every alignment of both ends, on both sides of the threshold; the
     * bytes around the destination untouched */
    size_t sizes[] = { 0, 1, 63, 64, 200, ZT_COPY_COLD_MIN - 1, ZT_COPY_COLD_MIN, ZT_COPY_COLD_MIN + 1, max };
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
        for (int so = 0; so < 64; so += 13)
            for (int dof = 0; dof < 64; dof += 7) {
                size_t n = sizes[k];
                memset(dst, 0x5a, max + 128);
                zt_copy_cold(dst + dof + 32, src + so, n);
                assert(memcmp(dst + dof + 32, src + so, n) == 0);
                for (size_t i = 0; i < (size_t) dof + 32; i++)
                    assert(dst[i] == 0x5a);
                for (size_t i = dof + 32 + n; i < max + 128; i++)
                    assert(dst[i] == 0x5a);
            }
    /* scaled: the products of plain multiplications, bit for bit */
    float *fs = malloc(max + 64), *fd = malloc(max + 128);
    assert(fs && fd);
    size_t nf = max / sizeof(float);
    for (size_t i = 0; i < nf; i++)
        fs[i] = (float) (i * 7919 % 1000) / 7.0f - 50.0f;
    for (int dof = 0; dof < 16; dof += 5) {
        memset(fd, 0, max + 128);
        zt_copy_cold_scaled(fd + dof, fs, nf, 0.25f / 3.0f);
        for (size_t i = 0; i < nf; i++) {
            float want = fs[i] * (0.25f / 3.0f);
            assert(memcmp(&fd[dof + i], &want, sizeof want) == 0);
        }
        for (int i = 0; i < dof; i++)
            assert(fd[i] == 0.0f);
        assert(fd[dof + nf] == 0.0f);
    }
    free(fs);
    free(fd);
    free(src);
    free(dst);
}
