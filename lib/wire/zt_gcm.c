/* AES-128-GCM, sixteen blocks at a time in eight 256-bit registers:
 * counter mode with VAES in eight independent chains (enough to cover the
 * instruction's latency), stitched round by round with GHASH (VPCLMULQDQ)
 * of sixteen blocks against H^16..H^1, reduced once per sixteen (the
 * products of a sum are summed first: shift and reduction are linear).
 * Sealing hashes the previous sixteen ciphertext blocks while encrypting
 * the next; opening hashes the sixteen it decrypts, read before any is
 * written (so in place works). GHASH works on byte-reversed blocks, where
 * a carry-less product is the field's product shifted by one bit (Gueron
 * and Kounavis, "Intel Carry-Less Multiplication Instruction and its Usage
 * for Computing the GCM Mode", whose shift and reduction s_reduce
 * follows). Every vector function carries its own target: nothing here
 * runs unless zt_gcm_supported. */
#include "wire/zt_gcm.h"
#include <cpuid.h>
#include <immintrin.h>
#include <string.h>

#define TARGET __attribute__((target("avx2,aes,pclmul,vaes,vpclmulqdq")))
#define TARGET512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,aes,pclmul,vaes,vpclmulqdq")))

/* CPUID (leaf 1: AES-NI, PCLMULQDQ, AVX, OSXSAVE; leaf 7: AVX2, VAES,
 * VPCLMULQDQ) and XGETBV (the OS saves the vector registers). */
bool zt_gcm_supported(void)
{
    static int known = -1;
    if (known >= 0)
        return known;
    unsigned a, b, c, d;
    bool ok = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 25)) && (c & (1u << 1)) && (c & (1u << 27)) &&
              (c & (1u << 28));
    if (ok) {
        unsigned lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        ok = (lo & 6) == 6 && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 5)) && (c & (1u << 9)) &&
             (c & (1u << 10));
    }
    known = ok;
    return ok;
}

/* CPUID leaf 7 (AVX-512 F, BW, VL) and XCR0's opmask and zmm state. */
bool zt_gcm_wide_supported(void)
{
    static int known = -1;
    if (known >= 0)
        return known;
    unsigned a, b, c, d, lo, hi;
    bool ok = zt_gcm_supported() && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 16)) &&
              (b & (1u << 30)) && (b & (1u << 31));
    if (ok) {
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        ok = (lo & 0xe6) == 0xe6;
    }
    known = ok;
    return ok;
}

static bool s_wide = true;

void zt_gcm_use_wide(bool on) { s_wide = on; }

#define REV_BYTES 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0

TARGET static inline __m128i s_rev(__m128i x) { return _mm_shuffle_epi8(x, _mm_setr_epi8(REV_BYTES)); }

/* [hi:lo], the 256-bit carry-less product of byte-reversed field elements,
 * shifted left one bit and reduced modulo x^128 + x^7 + x^2 + x + 1. */
TARGET static inline __m128i s_reduce(__m128i lo, __m128i hi)
{
    __m128i a = _mm_srli_epi32(lo, 31), b = _mm_srli_epi32(hi, 31);
    lo = _mm_slli_epi32(lo, 1);
    hi = _mm_slli_epi32(hi, 1);
    __m128i c = _mm_srli_si128(a, 12);
    b = _mm_slli_si128(b, 4);
    a = _mm_slli_si128(a, 4);
    lo = _mm_or_si128(lo, a);
    hi = _mm_or_si128(_mm_or_si128(hi, b), c);
    a = _mm_xor_si128(_mm_xor_si128(_mm_slli_epi32(lo, 31), _mm_slli_epi32(lo, 30)), _mm_slli_epi32(lo, 25));
    b = _mm_srli_si128(a, 4);
    lo = _mm_xor_si128(lo, _mm_slli_si128(a, 12));
    c = _mm_xor_si128(_mm_xor_si128(_mm_srli_epi32(lo, 1), _mm_srli_epi32(lo, 2)), _mm_srli_epi32(lo, 7));
    lo = _mm_xor_si128(lo, _mm_xor_si128(c, b));
    return _mm_xor_si128(hi, lo);
}

TARGET static inline __m128i s_gfmul(__m128i a, __m128i b)
{
    __m128i lo = _mm_clmulepi64_si128(a, b, 0x00), hi = _mm_clmulepi64_si128(a, b, 0x11);
    __m128i mid = _mm_xor_si128(_mm_clmulepi64_si128(a, b, 0x10), _mm_clmulepi64_si128(a, b, 0x01));
    return s_reduce(_mm_xor_si128(lo, _mm_slli_si128(mid, 8)), _mm_xor_si128(hi, _mm_srli_si128(mid, 8)));
}

TARGET static inline __m128i s_aes(const __m128i *rk, __m128i x)
{
    x = _mm_xor_si128(x, rk[0]);
#pragma GCC unroll 9
    for (int i = 1; i < 10; i++)
        x = _mm_aesenc_si128(x, rk[i]);
    return _mm_aesenclast_si128(x, rk[10]);
}

TARGET static inline __m128i s_expand(__m128i k, __m128i t)
{
    t = _mm_shuffle_epi32(t, 0xff);
    k = _mm_xor_si128(k, _mm_slli_si128(k, 4));
    k = _mm_xor_si128(k, _mm_slli_si128(k, 4));
    k = _mm_xor_si128(k, _mm_slli_si128(k, 4));
    return _mm_xor_si128(k, t);
}

TARGET static void s_round_keys(const zt_gcm_key_t *key, __m128i rk[11])
{
    for (int i = 0; i < 11; i++)
        rk[i] = _mm_loadu_si128((const __m128i *) key->rk[i]);
}

TARGET void zt_gcm_init(zt_gcm_key_t *key, const uint8_t raw[16])
{
    __m128i rk[11];
    rk[0] = _mm_loadu_si128((const __m128i *) raw);
#define ZT_GCM_ROUND_(i, rcon) rk[i] = s_expand(rk[i - 1], _mm_aeskeygenassist_si128(rk[i - 1], rcon))
    ZT_GCM_ROUND_(1, 0x01);
    ZT_GCM_ROUND_(2, 0x02);
    ZT_GCM_ROUND_(3, 0x04);
    ZT_GCM_ROUND_(4, 0x08);
    ZT_GCM_ROUND_(5, 0x10);
    ZT_GCM_ROUND_(6, 0x20);
    ZT_GCM_ROUND_(7, 0x40);
    ZT_GCM_ROUND_(8, 0x80);
    ZT_GCM_ROUND_(9, 0x1b);
    ZT_GCM_ROUND_(10, 0x36);
#undef ZT_GCM_ROUND_
    for (int i = 0; i < 11; i++)
        _mm256_storeu_si256((__m256i *) key->rk[i], _mm256_broadcastsi128_si256(rk[i]));
    __m128i h = s_rev(s_aes(rk, _mm_setzero_si128())), pw[32];
    pw[0] = h; /* pw[i] = H^(i+1) */
    for (int i = 1; i < 32; i++)
        pw[i] = s_gfmul(pw[i - 1], h);
    for (int q = 0; q < 8; q++) /* lane l of quad q multiplies block 4q + l of 32 */
        for (int l = 0; l < 4; l++)
            _mm_storeu_si128((__m128i *) (key->hq[q] + 16 * l), pw[31 - 4 * q - l]);
    for (int j = 0; j < 8; j++) { /* lane 0 multiplies the earlier block of the pair */
        __m256i p = _mm256_set_m128i(pw[14 - 2 * j], pw[15 - 2 * j]);
        _mm256_storeu_si256((__m256i *) key->hp[j], p);
        _mm256_storeu_si256((__m256i *) key->hk[j], _mm256_xor_si256(p, _mm256_shuffle_epi32(p, 0x4e)));
    }
}

/* GHASH of n bytes (the last block zero-padded) into y, a block at a time. */
TARGET static __m128i s_ghash_bytes(__m128i y, __m128i h, const uint8_t *p, size_t n)
{
    for (; n >= 16; p += 16, n -= 16)
        y = s_gfmul(_mm_xor_si128(y, s_rev(_mm_loadu_si128((const __m128i *) p))), h);
    if (n) {
        uint8_t last[16] = { 0 };
        memcpy(last, p, n);
        y = s_gfmul(_mm_xor_si128(y, s_rev(_mm_loadu_si128((const __m128i *) last))), h);
    }
    return y;
}

/* Block pair j of the sixteen at g into the unreduced sums (y joins the
 * first): three carry-less products a pair (Karatsuba), the middle one
 * made whole in s_fold. */
TARGET static inline void s_mul_pair(const zt_gcm_key_t *key, const uint8_t *g, int j, __m128i y, __m256i *lo,
                                     __m256i *hi, __m256i *mid)
{
    __m256i x = _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *) (g + 32 * j)),
                                    _mm256_broadcastsi128_si256(_mm_setr_epi8(REV_BYTES)));
    if (j == 0)
        x = _mm256_xor_si256(x, _mm256_zextsi128_si256(y));
    __m256i h = _mm256_loadu_si256((const __m256i *) key->hp[j]), hk = _mm256_loadu_si256((const __m256i *) key->hk[j]);
    *lo = _mm256_xor_si256(*lo, _mm256_clmulepi64_epi128(x, h, 0x00));
    *hi = _mm256_xor_si256(*hi, _mm256_clmulepi64_epi128(x, h, 0x11));
    *mid = _mm256_xor_si256(*mid, _mm256_clmulepi64_epi128(_mm256_xor_si256(x, _mm256_shuffle_epi32(x, 0x4e)), hk, 0x00));
}

TARGET static inline __m128i s_fold(__m256i lo, __m256i hi, __m256i mid)
{
    __m128i l = _mm_xor_si128(_mm256_castsi256_si128(lo), _mm256_extracti128_si256(lo, 1));
    __m128i h = _mm_xor_si128(_mm256_castsi256_si128(hi), _mm256_extracti128_si256(hi, 1));
    __m128i m = _mm_xor_si128(_mm256_castsi256_si128(mid), _mm256_extracti128_si256(mid, 1));
    m = _mm_xor_si128(m, _mm_xor_si128(l, h)); /* Karatsuba: (a0+a1)(b0+b1) - a0b0 - a1b1 */
    return s_reduce(_mm_xor_si128(l, _mm_slli_si128(m, 8)), _mm_xor_si128(h, _mm_srli_si128(m, 8)));
}

/* GHASH of the sixteen blocks at g into y. */
TARGET static __m128i s_ghash16(const zt_gcm_key_t *key, const uint8_t *g, __m128i y)
{
    __m256i lo = _mm256_setzero_si256(), hi = lo, mid = lo;
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++)
        s_mul_pair(key, g, j, y, &lo, &hi, &mid);
    return s_fold(lo, hi, mid);
}

/* Sixteen blocks: src ^ AES(counters) to dst, stitched with the GHASH of
 * the sixteen blocks at g into y (g NULL: none). ctr: the next two
 * counters, byte-reversed (a 32-bit add is GCM's increment). */
TARGET static inline __m128i s_sixteen(const zt_gcm_key_t *key, __m256i *ctr, const uint8_t *src, uint8_t *dst,
                                       const uint8_t *g, __m128i y)
{
    const __m256i rev = _mm256_broadcastsi128_si256(_mm_setr_epi8(REV_BYTES)),
                  two = _mm256_setr_epi32(2, 0, 0, 0, 2, 0, 0, 0);
    __m256i b[8], k = _mm256_loadu_si256((const __m256i *) key->rk[0]);
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) { /* every loop unrolled: b stays in registers */
        b[j] = _mm256_xor_si256(_mm256_shuffle_epi8(*ctr, rev), k);
        *ctr = _mm256_add_epi32(*ctr, two);
    }
    __m256i lo = _mm256_setzero_si256(), hi = lo, mid = lo;
#pragma GCC unroll 9
    for (int r = 1; r < 10; r++) {
        k = _mm256_loadu_si256((const __m256i *) key->rk[r]);
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
            b[j] = _mm256_aesenc_epi128(b[j], k);
        if (g && r <= 8)
            s_mul_pair(key, g, r - 1, y, &lo, &hi, &mid);
    }
    k = _mm256_loadu_si256((const __m256i *) key->rk[10]);
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++)
        _mm256_storeu_si256((__m256i *) (dst + 32 * j),
                            _mm256_xor_si256(_mm256_loadu_si256((const __m256i *) (src + 32 * j)),
                                             _mm256_aesenclast_epi128(b[j], k)));
    return g ? s_fold(lo, hi, mid) : y;
}

/* ------------------------------------------------------------ 512-bit registers */

/* Quad q of the 32 blocks at g into the unreduced sums (y joins the
 * first block): four carry-less products a block, no Karatsuba (its
 * shuffles would cost more than the product they save). */
TARGET512 static inline void s_mul_quad(const zt_gcm_key_t *key, const uint8_t *g, int q, __m128i y, __m512i *lo,
                                        __m512i *hi, __m512i *mid)
{
    __m512i x = _mm512_shuffle_epi8(_mm512_loadu_si512((const void *) (g + 64 * q)),
                                    _mm512_broadcast_i32x4(_mm_setr_epi8(REV_BYTES)));
    if (q == 0)
        x = _mm512_xor_si512(x, _mm512_zextsi128_si512(y));
    __m512i h = _mm512_loadu_si512((const void *) key->hq[q]);
    *lo = _mm512_xor_si512(*lo, _mm512_clmulepi64_epi128(x, h, 0x00));
    *hi = _mm512_xor_si512(*hi, _mm512_clmulepi64_epi128(x, h, 0x11));
    *mid = _mm512_ternarylogic_epi64(*mid, _mm512_clmulepi64_epi128(x, h, 0x01),
                                     _mm512_clmulepi64_epi128(x, h, 0x10), 0x96);
}

TARGET512 static inline __m128i s_lanes(__m512i v)
{
    __m256i h = _mm256_xor_si256(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
    return _mm_xor_si128(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

TARGET512 static inline __m128i s_fold512(__m512i lo, __m512i hi, __m512i mid)
{
    __m128i l = s_lanes(lo), h = s_lanes(hi), m = s_lanes(mid);
    return s_reduce(_mm_xor_si128(l, _mm_slli_si128(m, 8)), _mm_xor_si128(h, _mm_srli_si128(m, 8)));
}

/* GHASH of the 32 blocks at g into y. */
TARGET512 static __m128i s_ghash32(const zt_gcm_key_t *key, const uint8_t *g, __m128i y)
{
    __m512i lo = _mm512_setzero_si512(), hi = lo, mid = lo;
#pragma GCC unroll 8
    for (int q = 0; q < 8; q++)
        s_mul_quad(key, g, q, y, &lo, &hi, &mid);
    return s_fold512(lo, hi, mid);
}

/* 32 blocks: src ^ AES(counters) to dst in eight chains of four, stitched
 * with the GHASH of the 32 blocks at g into y (g NULL: none). ctr: the
 * next four counters, byte-reversed. */
TARGET512 static inline __m128i s_thirtytwo(const zt_gcm_key_t *key, const __m512i rk[11], __m512i *ctr,
                                            const uint8_t *src, uint8_t *dst, const uint8_t *g, __m128i y)
{
    const __m512i rev = _mm512_broadcast_i32x4(_mm_setr_epi8(REV_BYTES)), four = _mm512_set4_epi32(0, 0, 0, 4);
    __m512i b[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) {
        b[j] = _mm512_xor_si512(_mm512_shuffle_epi8(*ctr, rev), rk[0]);
        *ctr = _mm512_add_epi32(*ctr, four);
    }
    __m512i lo = _mm512_setzero_si512(), hi = lo, mid = lo;
#pragma GCC unroll 9
    for (int r = 1; r < 10; r++) {
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
            b[j] = _mm512_aesenc_epi128(b[j], rk[r]);
        if (g && r <= 8)
            s_mul_quad(key, g, r - 1, y, &lo, &hi, &mid);
    }
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++)
        _mm512_storeu_si512((void *) (dst + 64 * j),
                            _mm512_xor_si512(_mm512_loadu_si512((const void *) (src + 64 * j)),
                                             _mm512_aesenclast_epi128(b[j], rk[10])));
    return g ? s_fold512(lo, hi, mid) : y;
}

/* The whole groups of 32 blocks of n bytes (sealing hashes one group
 * behind, opening the group it decrypts); *c: the last counter used,
 * byte-reversed; returns the bytes done. */
TARGET512 static size_t s_wide_loop(const zt_gcm_key_t *key, bool enc, const uint8_t *s, uint8_t *d, size_t n,
                                    __m128i *c, __m128i *y)
{
    __m512i rk[11];
    for (int i = 0; i < 11; i++)
        rk[i] = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *) key->rk[i]));
    __m512i ctr = _mm512_add_epi32(_mm512_broadcast_i32x4(*c), _mm512_set_epi32(0, 0, 0, 4, 0, 0, 0, 3, 0, 0, 0, 2,
                                                                                  0, 0, 0, 1));
    const uint8_t *behind = NULL;
    size_t done = 0;
    for (; n - done >= 512; done += 512) {
        *y = s_thirtytwo(key, rk, &ctr, s + done, d + done, enc ? behind : s + done, *y);
        behind = d + done;
    }
    if (enc && behind)
        *y = s_ghash32(key, behind, *y);
    *c = _mm_sub_epi32(_mm512_castsi512_si128(ctr), _mm_setr_epi32(1, 0, 0, 0));
    return done;
}

/* Long for the loops (sealing hashes one group behind, opening the group
 * it decrypts: 32 blocks at a time on 512-bit registers, then 16) and the
 * tail, each short. */
TARGET void zt_gcm_crypt(const zt_gcm_key_t *key, bool enc, const uint8_t iv[12], const void *aad, size_t aad_len,
                         const void *src, void *dst, size_t len, uint8_t tag[16])
{
    __m128i rk[11];
    s_round_keys(key, rk);
    __m128i h1 = _mm256_extracti128_si256(_mm256_loadu_si256((const __m256i *) key->hp[7]), 1);
    uint8_t j0b[16];
    memcpy(j0b, iv, 12);
    j0b[12] = j0b[13] = j0b[14] = 0;
    j0b[15] = 1;
    __m128i j0 = _mm_loadu_si128((const __m128i *) j0b), c = s_rev(j0); /* c: the last counter used */
    __m128i y = s_ghash_bytes(_mm_setzero_si128(), h1, aad, aad_len);
    const uint8_t *s = src;
    uint8_t *d = dst;
    size_t n = len;
    if (n >= 512 && s_wide && zt_gcm_wide_supported()) {
        size_t done = s_wide_loop(key, enc, s, d, n, &c, &y);
        s += done;
        d += done;
        n -= done;
    }
    if (n >= 256) {
        __m256i ctr = _mm256_set_m128i(_mm_add_epi32(c, _mm_setr_epi32(2, 0, 0, 0)),
                                       _mm_add_epi32(c, _mm_setr_epi32(1, 0, 0, 0)));
        const uint8_t *behind = NULL; /* sealing: the last sixteen sealed, not hashed yet */
        for (; n >= 256; s += 256, d += 256, n -= 256) {
            y = s_sixteen(key, &ctr, s, d, enc ? behind : s, y);
            behind = d;
        }
        if (enc)
            y = s_ghash16(key, behind, y);
        c = _mm_sub_epi32(_mm256_castsi256_si128(ctr), _mm_setr_epi32(1, 0, 0, 0));
    }
    while (n > 0) { /* what is left, a block at a time, the last one partial */
        c = _mm_add_epi32(c, _mm_setr_epi32(1, 0, 0, 0));
        uint8_t in[16] = { 0 }, out[16];
        size_t m = n < 16 ? n : 16;
        memcpy(in, s, m);
        _mm_storeu_si128((__m128i *) out, _mm_xor_si128(_mm_loadu_si128((const __m128i *) in), s_aes(rk, s_rev(c))));
        memcpy(d, out, m);
        y = s_ghash_bytes(y, h1, enc ? out : in, m);
        s += m;
        d += m;
        n -= m;
    }
    __m128i lens = _mm_set_epi64x((long long) ((uint64_t) aad_len * 8), (long long) ((uint64_t) len * 8));
    y = s_gfmul(_mm_xor_si128(y, lens), h1);
    _mm_storeu_si128((__m128i *) tag, _mm_xor_si128(s_rev(y), s_aes(rk, j0)));
}
