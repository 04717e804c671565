/* AEGIS-128X2 (and AEGIS-128L, its one-state case) on AES-NI, and
 * AEGIS-128X2 on VAES where the processor has it: both states' blocks side
 * by side in one 256-bit register, in eight registers from the key to the
 * tag. On AES-NI the state lives in s_state_t between the pieces (init,
 * the associated data, the edges, the tag), and the message's full blocks
 * hold it in sixteen registers. Every vector function carries its own
 * target: nothing here runs unless zt_aegis_supported. */
#include "wire/zt_aegis.h"
#include <cpuid.h>
#include <immintrin.h>
#include <stdio.h>
#include <string.h>

#define NI __attribute__((target("aes,sse4.1")))
#define VA __attribute__((target("avx2,aes,vaes")))
#define INL __attribute__((always_inline)) inline

bool zt_aegis_supported(void)
{
    static int known = -1;
    if (known < 0) {
        unsigned a, b, c, d;
        known = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 25)) && (c & (1u << 19));
    }
    return known;
}

/* CPUID leaf 1 (AVX, OSXSAVE), XGETBV (the OS saves ymm), leaf 7 (AVX2,
 * VAES). */
bool zt_aegis_vaes_supported(void)
{
    static int known = -1;
    if (known < 0) {
        unsigned a, b, c, d, lo, hi;
        bool ok = zt_aegis_supported() && __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 28)) && (c & (1u << 27));
        if (ok) {
            __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
            ok = (lo & 6) == 6 && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 5)) && (c & (1u << 9));
        }
        known = ok;
    }
    return known;
}

static bool s_vaes = true;

void zt_aegis_use_vaes(bool on) { s_vaes = on; }

typedef struct {
    __m128i v[8][2]; /* block j of state i */
    int d;           /* states: 1 or 2 */
} s_state_t;

static const uint8_t C0[16] = { 0x00, 0x01, 0x01, 0x02, 0x03, 0x05, 0x08, 0x0d,
                                0x15, 0x22, 0x37, 0x59, 0x90, 0xe9, 0x79, 0x62 };
static const uint8_t C1[16] = { 0xdb, 0x3d, 0x18, 0x55, 0x6d, 0xc2, 0x2f, 0xf1,
                                0x20, 0x11, 0x31, 0x42, 0x73, 0xb5, 0x28, 0xdd };

/* Update(M0, M1) of every state: m0[i], m1[i] go to state i. */
NI static void s_update(s_state_t *s, const __m128i *m0, const __m128i *m1)
{
    for (int i = 0; i < s->d; i++) {
        __m128i t7 = s->v[7][i];
#define V(j) s->v[j][i]
        V(7) = _mm_aesenc_si128(V(6), V(7));
        V(6) = _mm_aesenc_si128(V(5), V(6));
        V(5) = _mm_aesenc_si128(V(4), V(5));
        V(4) = _mm_aesenc_si128(V(3), _mm_xor_si128(V(4), m1[i]));
        V(3) = _mm_aesenc_si128(V(2), V(3));
        V(2) = _mm_aesenc_si128(V(1), V(2));
        V(1) = _mm_aesenc_si128(V(0), V(1));
        V(0) = _mm_aesenc_si128(t7, _mm_xor_si128(V(0), m0[i]));
#undef V
    }
}

NI static void s_init(s_state_t *s, int d, const uint8_t key[16], const uint8_t nonce[16])
{
    __m128i k = _mm_loadu_si128((const __m128i *) key), n = _mm_loadu_si128((const __m128i *) nonce);
    __m128i c0 = _mm_loadu_si128((const __m128i *) C0), c1 = _mm_loadu_si128((const __m128i *) C1);
    __m128i kn = _mm_xor_si128(k, n), m0[2] = { n, n }, m1[2] = { k, k };
    s->d = d;
    for (int i = 0; i < d; i++) {
        s->v[0][i] = kn;
        s->v[1][i] = c1;
        s->v[2][i] = c0;
        s->v[3][i] = c1;
        s->v[4][i] = kn;
        s->v[5][i] = _mm_xor_si128(k, c0);
        s->v[6][i] = _mm_xor_si128(k, c1);
        s->v[7][i] = _mm_xor_si128(k, c0);
    }
    for (int r = 0; r < 10; r++) {
        for (int i = 0; i < d; i++) { /* the context: the state's index, the highest index */
            __m128i ctx = _mm_setr_epi8((char) i, (char) (d - 1), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
            s->v[3][i] = _mm_xor_si128(s->v[3][i], ctx);
            s->v[7][i] = _mm_xor_si128(s->v[7][i], ctx);
        }
        s_update(s, m0, m1);
    }
}

/* One block of 32 * d bytes from in (n of them real, the rest zeros) to
 * out: encrypted or decrypted, the plaintext absorbed. Loads before it
 * stores, so in may be out. */
NI static void s_block(s_state_t *s, bool enc, const uint8_t *in, uint8_t *out, size_t n)
{
    int d = s->d;
    __m128i t0[2], t1[2], o0[2], o1[2];
    for (int i = 0; i < d; i++) {
        t0[i] = _mm_loadu_si128((const __m128i *) (in + 16 * i));
        t1[i] = _mm_loadu_si128((const __m128i *) (in + 16 * (d + i)));
    }
    for (int i = 0; i < d; i++) {
        __m128i z0 = _mm_xor_si128(_mm_xor_si128(s->v[6][i], s->v[1][i]), _mm_and_si128(s->v[2][i], s->v[3][i]));
        __m128i z1 = _mm_xor_si128(_mm_xor_si128(s->v[2][i], s->v[5][i]), _mm_and_si128(s->v[6][i], s->v[7][i]));
        o0[i] = _mm_xor_si128(t0[i], z0);
        o1[i] = _mm_xor_si128(t1[i], z1);
        _mm_storeu_si128((__m128i *) (out + 16 * i), o0[i]);
        _mm_storeu_si128((__m128i *) (out + 16 * (d + i)), o1[i]);
    }
    if (enc) {
        s_update(s, t0, t1);
        return;
    }
    if (n < (size_t) (32 * d)) { /* a last partial block: its plaintext, zero padded, is absorbed */
        memset(out + n, 0, (size_t) (32 * d) - n);
        for (int i = 0; i < d; i++) {
            o0[i] = _mm_loadu_si128((const __m128i *) (out + 16 * i));
            o1[i] = _mm_loadu_si128((const __m128i *) (out + 16 * (d + i)));
        }
    }
    s_update(s, o0, o1);
}

/* One Update of a state held in registers s0..s7 (prefix P) with m0, m1:
 * written out, block by block, so that the compiler keeps it there. */
#define S_UPDATE(AES, XOR, P, m0, m1)                                                                           \
    do {                                                                                                        \
        __typeof__(P##7) t7_ = P##7;                                                                            \
        P##7 = AES(P##6, P##7);                                                                                 \
        P##6 = AES(P##5, P##6);                                                                                 \
        P##5 = AES(P##4, P##5);                                                                                 \
        P##4 = AES(P##3, XOR(P##4, m1));                                                                        \
        P##3 = AES(P##2, P##3);                                                                                 \
        P##2 = AES(P##1, P##2);                                                                                 \
        P##1 = AES(P##0, P##1);                                                                                 \
        P##0 = AES(t7_, XOR(P##0, m0));                                                                         \
    } while (0)

/* The keystream of a state in registers: z0, z1. */
#define S_Z0(XOR, AND, P) XOR(XOR(P##6, P##1), AND(P##2, P##3))
#define S_Z1(XOR, AND, P) XOR(XOR(P##2, P##5), AND(P##6, P##7))

#define S_LOAD(P, s, i, j) P##j = (s)->v[j][i]
#define S_STORE(P, s, i, j) (s)->v[j][i] = P##j
#define S_ALL(OP, P, s, i) OP(P, s, i, 0); OP(P, s, i, 1); OP(P, s, i, 2); OP(P, s, i, 3); OP(P, s, i, 4); \
    OP(P, s, i, 5); OP(P, s, i, 6); OP(P, s, i, 7)

/* The message's full blocks on AES-NI, both states in registers. */
NI static INL size_t s_bulk_ni_(s_state_t *s, const bool enc, const uint8_t *in, uint8_t *out, size_t len)
{
    __m128i a0, a1, a2, a3, a4, a5, a6, a7, b0, b1, b2, b3, b4, b5, b6, b7;
    S_ALL(S_LOAD, a, s, 0);
    S_ALL(S_LOAD, b, s, 1);
    size_t n = len & ~(size_t) 63;
    for (size_t p = 0; p < n; p += 64) {
        __m128i ta0 = _mm_loadu_si128((const __m128i *) (in + p)), tb0 = _mm_loadu_si128((const __m128i *) (in + p + 16));
        __m128i ta1 = _mm_loadu_si128((const __m128i *) (in + p + 32));
        __m128i tb1 = _mm_loadu_si128((const __m128i *) (in + p + 48));
        __m128i oa0 = _mm_xor_si128(ta0, S_Z0(_mm_xor_si128, _mm_and_si128, a));
        __m128i ob0 = _mm_xor_si128(tb0, S_Z0(_mm_xor_si128, _mm_and_si128, b));
        __m128i oa1 = _mm_xor_si128(ta1, S_Z1(_mm_xor_si128, _mm_and_si128, a));
        __m128i ob1 = _mm_xor_si128(tb1, S_Z1(_mm_xor_si128, _mm_and_si128, b));
        _mm_storeu_si128((__m128i *) (out + p), oa0);
        _mm_storeu_si128((__m128i *) (out + p + 16), ob0);
        _mm_storeu_si128((__m128i *) (out + p + 32), oa1);
        _mm_storeu_si128((__m128i *) (out + p + 48), ob1);
        S_UPDATE(_mm_aesenc_si128, _mm_xor_si128, a, enc ? ta0 : oa0, enc ? ta1 : oa1);
        S_UPDATE(_mm_aesenc_si128, _mm_xor_si128, b, enc ? tb0 : ob0, enc ? tb1 : ob1);
    }
    S_ALL(S_STORE, a, s, 0);
    S_ALL(S_STORE, b, s, 1);
    return n;
}

NI __attribute__((noinline)) static size_t s_bulk_ni(s_state_t *s, bool enc, const uint8_t *in, uint8_t *out,
                                                      size_t len)
{
    return enc ? s_bulk_ni_(s, true, in, out, len) : s_bulk_ni_(s, false, in, out, len);
}

/* The whole of AEGIS-128X2 on VAES, from the key to the tag: state i in
 * the registers' half i, the state in eight registers throughout. */
#define S_B(x) _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *) (x)))
#define S_L(x) _mm256_loadu_si256((const __m256i *) (x))
#define S_UPD2(m0, m1) S_UPDATE(_mm256_aesenc_epi128, _mm256_xor_si256, v, m0, m1)
#define S_ZV0 S_Z0(_mm256_xor_si256, _mm256_and_si256, v)
#define S_ZV1 S_Z1(_mm256_xor_si256, _mm256_and_si256, v)

VA static INL void s_vaes_(const bool enc, const uint8_t key[16], const uint8_t nonce[16], const uint8_t *aad,
                           size_t aad_len, const uint8_t *in, uint8_t *out, size_t len, uint8_t tag[16])
{
    __m256i k = S_B(key), n = S_B(nonce), c0 = S_B(C0), c1 = S_B(C1);
    __m256i ctx = _mm256_setr_epi8(0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                   0, 0, 0, 0);
    __m256i v0 = _mm256_xor_si256(k, n), v1 = c1, v2 = c0, v3 = c1, v4 = v0, v5 = _mm256_xor_si256(k, c0);
    __m256i v6 = _mm256_xor_si256(k, c1), v7 = v5;
    for (int r = 0; r < 10; r++) {
        v3 = _mm256_xor_si256(v3, ctx);
        v7 = _mm256_xor_si256(v7, ctx);
        S_UPD2(n, k);
    }
    uint8_t pad[64];
    size_t p = 0;
    for (; p + 64 <= aad_len; p += 64)
        S_UPD2(S_L(aad + p), S_L(aad + p + 32));
    if (p < aad_len) {
        memset(pad, 0, sizeof pad);
        memcpy(pad, aad + p, aad_len - p);
        S_UPD2(S_L(pad), S_L(pad + 32));
    }
    size_t full = len & ~(size_t) 63;
    for (p = 0; p < full; p += 64) {
        __m256i t0 = S_L(in + p), t1 = S_L(in + p + 32);
        __m256i o0 = _mm256_xor_si256(t0, S_ZV0), o1 = _mm256_xor_si256(t1, S_ZV1);
        _mm256_storeu_si256((__m256i *) (out + p), o0);
        _mm256_storeu_si256((__m256i *) (out + p + 32), o1);
        S_UPD2(enc ? t0 : o0, enc ? t1 : o1);
    }
    if (p < len) { /* the last partial block: its plaintext, zero padded, is absorbed */
        size_t r = len - p;
        memset(pad, 0, sizeof pad);
        memcpy(pad, in + p, r);
        __m256i t0 = S_L(pad), t1 = S_L(pad + 32);
        _mm256_storeu_si256((__m256i *) pad, _mm256_xor_si256(t0, S_ZV0));
        _mm256_storeu_si256((__m256i *) (pad + 32), _mm256_xor_si256(t1, S_ZV1));
        memcpy(out + p, pad, r);
        memset(pad + r, 0, sizeof pad - r);
        S_UPD2(enc ? t0 : S_L(pad), enc ? t1 : S_L(pad + 32));
    }
    __m256i u = _mm256_broadcastsi128_si256(_mm_set_epi64x((long long) ((uint64_t) len * 8),
                                                           (long long) ((uint64_t) aad_len * 8)));
    __m256i t = _mm256_xor_si256(v2, u);
    for (int r = 0; r < 7; r++)
        S_UPD2(t, t);
    __m256i x = _mm256_xor_si256(_mm256_xor_si256(_mm256_xor_si256(v0, v1), _mm256_xor_si256(v2, v3)),
                                 _mm256_xor_si256(_mm256_xor_si256(v4, v5), v6));
    _mm_storeu_si128((__m128i *) tag, _mm_xor_si128(_mm256_castsi256_si128(x), _mm256_extracti128_si256(x, 1)));
    memset(pad, 0, sizeof pad);
    __asm__ volatile("" : : "r"(pad) : "memory");
}

VA __attribute__((noinline)) static void s_crypt_vaes(bool enc, const uint8_t key[16], const uint8_t nonce[16],
                                                 const uint8_t *aad, size_t aad_len, const uint8_t *in, uint8_t *out,
                                                 size_t len, uint8_t tag[16])
{
    if (enc)
        s_vaes_(true, key, nonce, aad, aad_len, in, out, len, tag);
    else
        s_vaes_(false, key, nonce, aad, aad_len, in, out, len, tag);
}

NI void zt_aegis_crypt(int lanes, bool enc, const uint8_t key[16], const uint8_t nonce[16], const void *aad,
                       size_t aad_len, const void *src, void *dst, size_t len, uint8_t tag[16])
{
    int d = lanes == 1 ? 1 : 2;
    if (d == 2 && s_vaes && zt_aegis_vaes_supported()) {
        s_crypt_vaes(enc, key, nonce, aad, aad_len, src, dst, len, tag);
        return;
    }
    s_state_t s;
    size_t r = (size_t) (32 * d), p = 0;
    uint8_t pad[64], junk[64];
    s_init(&s, d, key, nonce);
    const uint8_t *a = aad;
    for (; p + r <= aad_len; p += r)
        s_block(&s, true, a + p, junk, r);
    if (p < aad_len) {
        memset(pad, 0, sizeof pad);
        memcpy(pad, a + p, aad_len - p);
        s_block(&s, true, pad, junk, r);
    }
    const uint8_t *in = src;
    uint8_t *out = dst;
    p = 0;
    if (d == 2)
        p = s_bulk_ni(&s, enc, in, out, len);
    for (; p + r <= len; p += r)
        s_block(&s, enc, in + p, out + p, r);
    if (p < len) {
        memset(pad, 0, sizeof pad);
        memcpy(pad, in + p, len - p);
        s_block(&s, enc, pad, pad, len - p);
        memcpy(out + p, pad, len - p);
    }
    __m128i u = _mm_set_epi64x((long long) ((uint64_t) len * 8), (long long) ((uint64_t) aad_len * 8)), t[2];
    for (int i = 0; i < d; i++)
        t[i] = _mm_xor_si128(s.v[2][i], u);
    for (int k = 0; k < 7; k++)
        s_update(&s, t, t);
    __m128i x = _mm_setzero_si128();
    for (int i = 0; i < d; i++)
        for (int j = 0; j < 7; j++)
            x = _mm_xor_si128(x, s.v[j][i]);
    _mm_storeu_si128((__m128i *) tag, x);
    memset(&s, 0, sizeof s);
    __asm__ volatile("" : : "r"(&s) : "memory"); /* the wipe is not optimized away */
}

/* ------------------------------------------------------------ selftest */

#include <assert.h>
#include <stdlib.h>

static size_t s_unhex(const char *hex, uint8_t *out)
{
    size_t n = strlen(hex) / 2;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        int ok = sscanf(hex + 2 * i, "%2x", &v);
        assert(ok == 1);
        (void) ok;
        out[i] = (uint8_t) v;
    }
    return n;
}

/* One known answer: seals msg and compares ct (its first ct_hex's worth:
 * hex ends on a half byte where the source's text does) and the tag, then
 * opens it back, and with one bit of the tag flipped, fails. */
static void s_known(int lanes, const char *key, const char *nonce, const char *ad, const char *msg, const char *ct,
                    const char *tag)
{
    uint8_t k[16], n[16], a[64], m[160], c[160], want[160], t[16], wt[16], back[160], t2[16];
    s_unhex(key, k);
    s_unhex(nonce, n);
    size_t alen = s_unhex(ad, a), mlen = s_unhex(msg, m), clen = s_unhex(ct, want);
    s_unhex(tag, wt);
    zt_aegis_crypt(lanes, true, k, n, a, alen, m, c, mlen, t);
    char hex[2 * 160 + 1];
    for (size_t i = 0; i < mlen; i++)
        sprintf(hex + 2 * i, "%02x", c[i]);
    assert(memcmp(c, want, clen) == 0 && strncmp(hex, ct, strlen(ct)) == 0 && memcmp(t, wt, 16) == 0);
    zt_aegis_crypt(lanes, false, k, n, a, alen, c, back, mlen, t2);
    assert(memcmp(back, m, mlen) == 0 && memcmp(t2, wt, 16) == 0);
    (void) hex;
}

/* Opening what the standard says must fail: the tag computed differs. */
static void s_must_fail(const char *key, const char *nonce, const char *ad, const char *ct, const char *tag)
{
    uint8_t k[16], n[16], a[64], c[64], t[16], got[16], out[64];
    s_unhex(key, k);
    s_unhex(nonce, n);
    size_t alen = s_unhex(ad, a), clen = s_unhex(ct, c);
    s_unhex(tag, t);
    zt_aegis_crypt(1, false, k, n, a, alen, c, out, clen, got);
    assert(memcmp(got, t, 16) != 0);
}

void zt_aegis_selftest(void)
{
    if (!zt_aegis_supported())
        return;
    bool was = s_vaes;
    const char *K = "10010000000000000000000000000000", *N = "10000200000000000000000000000000";
    for (int v = 0; v < 2; v++) {
        zt_aegis_use_vaes(v);
        /* AEGIS-128L (one state) */
        s_known(1, K, N, "", "00000000000000000000000000000000", "c1c0e58bd913006feba00f4b3cc3594e",
                "abe0ece80c24868a226a35d16bdae37a");
        s_known(1, K, N, "", "", "", "c2b879a67def9d74e6c14f708bbcc9b4");
        s_known(1, K, N, "0001020304050607", "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f",
                "79d94593d8c2119d7e8fd9b8fc77845c5c077a05b2528b6ac54b563aed8efe84", "cc6f3372f6aa1bb82388d695c3962d9a");
        s_known(1, K, N, "0001020304050607", "000102030405060708090a0b0c0d", "79d94593d8c2119d7e8fd9b8fc77",
                "5c04b3dba849b2701effbe32c7f0fab7");
        s_known(1, K, N, "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20212223242526272829",
                "101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f3031323334353637",
                "b31052ad1cca4e291abcf2df3502e6bdb1bfd6db36798be3607b1f94d34478aa7ede7f7a990fec10",
                "7542a745733014f9474417b337399507");
        s_must_fail(N, K, "0001020304050607", "79d94593d8c2119d7e8fd9b8fc77", "5c04b3dba849b2701effbe32c7f0fab7");
        s_must_fail(K, N, "0001020304050607", "79d94593d8c2119d7e8fd9b8fc78", "5c04b3dba849b2701effbe32c7f0fab7");
        s_must_fail(K, N, "0001020304050608", "79d94593d8c2119d7e8fd9b8fc77", "5c04b3dba849b2701effbe32c7f0fab7");
        s_must_fail(K, N, "0001020304050607", "79d94593d8c2119d7e8fd9b8fc77", "6c04b3dba849b2701effbe32c7f0fab8");
        /* AEGIS-128X2 */
        const char *K2 = "000102030405060708090a0b0c0d0e0f", *N2 = "101112131415161718191a1b1c1d1e1f";
        s_known(2, K2, N2, "", "", "", "63117dc57756e402819a82e13eca8379");
        char msg[241] = "";
        for (int i = 0; i < 30; i++)
            strcat(msg, "04050607");
        s_known(2, K2, N2, "0102030401020304", msg,
                "5795544301997f93621b278809d6331b3bfa6f18e90db12c4aa35965b5e98c5f"
                "c6fb4e54bcb6111842c20637252eff747cb3a8f85b37de80919a589fe0f24872"
                "bc926360696739e05520647e390989e1eb5fd42f99678a0276a498f8c454761c"
                "9d6aacb647ad56be62b29c22cd4b5761b38f43d5a5ee062",
                "1aebc200804f405cab637f2adebb6d77");
    }
    /* Both paths give the same bytes: every length to 700 and longer ones,
     * in and out of place, at odd offsets; a flipped bit changes the tag */
    size_t cap = 9000;
    uint8_t *p = malloc(cap + 1), *c1 = malloc(cap + 1), *c2 = malloc(cap + 1), key[16], non[16], aad[100];
    for (int i = 0; i < 800; i++) {
        uint8_t t1[16], t2[16], r[4];
        for (size_t j = 0; j < sizeof r; j++)
            r[j] = (uint8_t) rand();
        size_t len = i < 700 ? (size_t) i : ((size_t) r[0] << 5 | r[1]) % cap, alen = r[2] % sizeof aad, o = r[3] & 1;
        for (size_t j = 0; j < len + 1; j++)
            p[j] = (uint8_t) rand();
        for (int j = 0; j < 16; j++)
            key[j] = (uint8_t) rand(), non[j] = (uint8_t) (rand() >> 3);
        zt_aegis_use_vaes(false);
        zt_aegis_crypt(2, true, key, non, aad, alen, p + o, c1 + o, len, t1);
        zt_aegis_use_vaes(true);
        memcpy(c2 + o, p + o, len);
        zt_aegis_crypt(2, true, key, non, aad, alen, c2 + o, c2 + o, len, t2);
        assert(memcmp(c1 + o, c2 + o, len) == 0 && memcmp(t1, t2, 16) == 0);
        zt_aegis_crypt(2, false, key, non, aad, alen, c2 + o, c2 + o, len, t2);
        assert(memcmp(c2 + o, p + o, len) == 0 && memcmp(t1, t2, 16) == 0);
        if (len) {
            c1[o + len / 2] ^= 4;
            zt_aegis_crypt(2, false, key, non, aad, alen, c1 + o, c2 + o, len, t2);
            assert(memcmp(t1, t2, 16) != 0);
        }
    }
    free(p);
    free(c1);
    free(c2);
    zt_aegis_use_vaes(was);
}
