/* seal_bench: the data plane's seal (zt_seal) with each of its ciphers
 * (ZT_SEAL_CIPHER): AEGIS-128X2 (zt_aegis, on VAES where the processor
 * has it, and on AES-NI alone) and AES-128-GCM (zt_gcm's four blocks per
 * instruction where the processor has VAES and AVX-512, two with VAES
 * alone, and OpenSSL's), against the cipher CURVE puts on every ZeroMQ
 * frame (libsodium's XSalsa20-Poly1305, crypto_secretbox), in the same
 * run, on one core: sealing then opening frames of the data plane's
 * sizes, each from one buffer into another (the copy the seal replaces).
 * Prints GB/s and CPU-nanoseconds per byte for each, and the ratios of the
 * default cipher's to GCM's and to CURVE's. CURVE also copies and
 * allocates each frame inside libzmq; that cost is not counted here, so
 * the ratio is the least the seal saves.
 *
 * Then the ceiling: this core's AES round instructions alone, in 8
 * independent chains (enough to cover their latency; more spill out of the
 * 16 vector registers), as AES-128 bytes per
 * second (10 rounds a block), with AES-NI and, where the processor has it,
 * VAES (two blocks per instruction; four on 512-bit registers where the
 * processor has AVX-512). No AES-GCM on this core can beat
 * that: GCM's speed is printed as a share of it (GHASH takes the
 * rest, on the same units). AEGIS needs 0.8 AES rounds a block where
 * AES-128 needs 10, so it is not bound by that ceiling.
 *
 *   seal_bench [seconds per case, default 1]
 */
#include "wire/zt_aegis.h"
#include "wire/zt_gcm.h"
#include "wire/zt_seal.h"
#include <immintrin.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double s_cpu(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double) t.tv_sec + (double) t.tv_nsec / 1e9;
}

static double s_wall(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double) t.tv_sec + (double) t.tv_nsec / 1e9;
}

typedef struct {
    double gbs;       /* bytes sealed and opened per second, GB/s (each byte counted once) */
    double ns_per_b;  /* CPU-ns per byte, sealing plus opening */
} s_fig_t;

/* Frames of len bytes sealed from src into wire and opened from there into
 * dst; with span > 0, src and dst walk span bytes, a frame further each
 * time (what a worker does: it seals from its gradients and opens into its
 * tensor, neither in the cache), wire staying in the cache. */

static s_fig_t s_seal_span(size_t len, double secs, unsigned char *src, unsigned char *wire, unsigned char *dst,
                           size_t span)
{
    uint8_t key[32], tag[16], hdr[48] = "bucket 3 gen 9 offset 0 count 262144";
    zt_seal_random(key, sizeof key);
    zt_seal_t *tx = zt_seal_new(key, ZT_SEAL_C2S), *rx = zt_seal_new(key, ZT_SEAL_C2S);
    double w0 = s_wall(), c0 = s_cpu();
    uint64_t n = 0, k;
    while (s_wall() - w0 < secs) {
        size_t at = span ? n * len % (span - span % len) : 0;
        if (zt_seal_close(tx, hdr, sizeof hdr, src + at, wire, len, &k, tag) != 0 ||
            zt_seal_open(rx, k, hdr, sizeof hdr, wire, dst + at, len, tag) != 0) {
            fprintf(stderr, "seal_bench: a frame did not open\n");
            exit(1);
        }
        n++;
    }
    double w = s_wall() - w0, c = s_cpu() - c0;
    zt_seal_destroy(&tx);
    zt_seal_destroy(&rx);
    return (s_fig_t) { (double) n * (double) len / w / 1e9, c * 1e9 / ((double) n * (double) len) };
}

static s_fig_t s_secretbox(size_t len, double secs, unsigned char *src, unsigned char *wire, unsigned char *dst)
{
    unsigned char key[crypto_secretbox_KEYBYTES], nonce[crypto_secretbox_NONCEBYTES] = { 0 };
    randombytes_buf(key, sizeof key);
    double w0 = s_wall(), c0 = s_cpu();
    uint64_t n = 0;
    while (s_wall() - w0 < secs) {
        sodium_increment(nonce, sizeof nonce);
        crypto_secretbox_easy(wire, src, len, nonce, key);
        if (crypto_secretbox_open_easy(dst, wire, len + crypto_secretbox_MACBYTES, nonce, key) != 0) {
            fprintf(stderr, "seal_bench: a secretbox did not open\n");
            exit(1);
        }
        n++;
    }
    double w = s_wall() - w0, c = s_cpu() - c0;
    return (s_fig_t) { (double) n * (double) len / w / 1e9, c * 1e9 / ((double) n * (double) len) };
}

#define CHAINS 8

/* AES-128 GB/s of n rounds run in CHAINS chains of 128-bit blocks. */
__attribute__((target("aes"))) static double s_peak_aesni(double secs)
{
    __m128i x[CHAINS], k = _mm_set1_epi32(0x5a5a1234);
    for (int i = 0; i < CHAINS; i++)
        x[i] = _mm_set1_epi32(i);
    double w0 = s_wall();
    uint64_t rounds = 0;
    while (s_wall() - w0 < secs) {
        for (int r = 0; r < 10000; r++) {
#pragma GCC unroll 16
            for (int i = 0; i < CHAINS; i++) /* unrolled: the chains stay in registers */
                x[i] = _mm_aesenc_si128(x[i], k);
        }
        rounds += 10000 * CHAINS;
    }
    double w = s_wall() - w0;
    __m128i sum = x[0];
    for (int i = 1; i < CHAINS; i++)
        sum = _mm_xor_si128(sum, x[i]);
    volatile int sink = _mm_cvtsi128_si32(sum);
    (void) sink;
    return (double) rounds / 10.0 * 16.0 / w / 1e9;
}

/* The same with VAES, as many blocks per instruction as the register
 * holds: two on 256-bit registers, four on 512-bit ones. */
#define ZT_PEAK_VAES_(name, tgt, vec, set1, aesenc, xor, low, blocks)                                          \
    __attribute__((target(tgt))) static double name(double secs)                                               \
    {                                                                                                             \
        vec x[CHAINS], k = set1(0x5a5a1234);                                                                      \
        for (int i = 0; i < CHAINS; i++)                                                                          \
            x[i] = set1(i);                                                                                       \
        double w0 = s_wall();                                                                                     \
        uint64_t rounds = 0;                                                                                      \
        while (s_wall() - w0 < secs) {                                                                            \
            for (int r = 0; r < 10000; r++) {                                                                     \
                _Pragma("GCC unroll 16") for (int i = 0; i < CHAINS; i++) x[i] = aesenc(x[i], k);                \
            }                                                                                                     \
            rounds += blocks * 10000 * CHAINS;                                                                    \
        }                                                                                                         \
        double w = s_wall() - w0;                                                                                 \
        vec sum = x[0];                                                                                           \
        for (int i = 1; i < CHAINS; i++)                                                                          \
            sum = xor(sum, x[i]);                                                                                 \
        volatile int sink = low(sum);                                                                             \
        (void) sink;                                                                                              \
        return (double) rounds / 10.0 * 16.0 / w / 1e9;                                                           \
    }

__attribute__((target("avx2"))) static inline int s_low256(__m256i v) { return _mm256_extract_epi32(v, 0); }

ZT_PEAK_VAES_(s_peak_vaes, "avx2,vaes", __m256i, _mm256_set1_epi32, _mm256_aesenc_epi128, _mm256_xor_si256,
              s_low256, 2)
ZT_PEAK_VAES_(s_peak_vaes512, "avx512f,vaes", __m512i, _mm512_set1_epi32, _mm512_aesenc_epi128, _mm512_xor_si512,
              _mm512_cvtsi512_si32, 4)

/* One column: cipher ("aegis128x2" or "aes128gcm"), VAES or not, and
 * for GCM 512-bit registers or not. */
typedef struct {
    const char *title, *cipher;
    int vaes;
    bool wide;
} s_col_t;

/* One row: each column's figure for frames of len bytes (s_seal_span),
 * printed and kept in f. */
static void s_row(const s_col_t *cols, int nc, size_t len, double secs, unsigned char *src, unsigned char *wire,
                  unsigned char *dst, size_t span, s_fig_t *f)
{
    for (int c = 0; c < nc; c++) {
        zt_seal_use_cipher(cols[c].cipher);
        zt_seal_use_vaes(cols[c].vaes);
        zt_gcm_use_wide(cols[c].wide);
        f[c] = s_seal_span(len, secs, src, wire, dst, span);
        char fa[40];
        snprintf(fa, sizeof fa, "%5.2f GB/s %5.3f ns/B", f[c].gbs, f[c].ns_per_b);
        printf(" %-24s", fa);
    }
    zt_gcm_use_wide(true);
}

/* 128 KiB frames sealed from and opened into memory out of the cache. */
static void s_far_row(const s_col_t *cols, int nc, double secs, unsigned char *wire)
{
    size_t span = (size_t) 256 << 20;
    unsigned char *csrc = malloc(span), *cdst = malloc(span);
    if (csrc && cdst) {
        s_fig_t f[6];
        memset(csrc, 7, span);
        memset(cdst, 0, span);
        printf("%-8s", "128K far");
        s_row(cols, nc, (size_t) 128 << 10, secs, csrc, wire, cdst, span, f);
        printf("\n(128K far: sealed from and opened into 256 MiB out of the cache, the frame in it)\n");
    }
    free(csrc);
    free(cdst);
}

int main(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 1.0;
    if (secs <= 0 || sodium_init() < 0) {
        fprintf(stderr, "usage: seal_bench [seconds per case > 0]\n");
        return 2;
    }
    size_t sizes[] = { 4096, 128 * 1024, 1024 * 1024 };
    unsigned char *src = malloc(sizes[2]), *wire = malloc(sizes[2] + 64), *dst = malloc(sizes[2]);
    for (size_t i = 0; i < sizes[2]; i++)
        src[i] = (unsigned char) (i * 2654435761u >> 13);
    zt_seal_use_cipher("aes128gcm");
    bool vaes = zt_seal_vaes(), wide = vaes && zt_gcm_wide_supported() && zt_seal_gcm_wide();
    bool aegis = zt_aegis_supported(), aegis_vaes = zt_aegis_vaes_supported();
    s_col_t cols[6];
    int nc = 0;
    if (aegis) {
        cols[nc++] = (s_col_t) { aegis_vaes ? "AEGIS-128X2 (VAES)" : "AEGIS-128X2 (AES-NI)", "aegis128x2", 1, true };
        if (aegis_vaes)
            cols[nc++] = (s_col_t) { "AEGIS-128X2 (AES-NI)", "aegis128x2", 0, true };
    }
    int gcm = nc;
    if (vaes)
        cols[nc++] = (s_col_t) { wide ? "GCM (VAES, 512-bit)" : "GCM (VAES)", "aes128gcm", 1, true };
    if (wide)
        cols[nc++] = (s_col_t) { "GCM (VAES, 256-bit)", "aes128gcm", 1, false };
    cols[nc++] = (s_col_t) { "GCM (OpenSSL)", "aes128gcm", 0, true };
    printf("seal then open, one core, each byte counted once (GB/s; CPU-ns per byte)\n%-8s", "frame");
    for (int c = 0; c < nc; c++)
        printf(" %-24s", cols[c].title);
    printf(" %-24s %s\n", "CURVE's XSalsa20-Poly1305", "first / GCM's best, / CURVE");
    s_fig_t big = { 0, 0 }, big_gcm = { 0, 0 };
    for (int i = 0; i < 3; i++) {
        s_fig_t f[6];
        printf("%-8zu", sizes[i]);
        s_row(cols, nc, sizes[i], secs, src, wire, dst, 0, f);
        s_fig_t b = s_secretbox(sizes[i], secs, src, wire, dst);
        char fb[40];
        snprintf(fb, sizeof fb, "%5.2f GB/s %5.3f ns/B", b.gbs, b.ns_per_b);
        printf(" %-24s %.2fx, %.2fx\n", fb, f[0].gbs / f[gcm].gbs, f[0].gbs / b.gbs);
        if (i == 1) {
            big = f[0];
            big_gcm = f[gcm];
        }
    }
    s_far_row(cols, nc, secs, wire);
    zt_seal_use_cipher(NULL);
    /* for bench/auth_bench.py: one pass of each cipher as zt_seal runs it by default */
    printf("per pass at 128 KiB frames (CPU-ns per byte): aegis128x2 %.4f aes128gcm %.4f\n",
           aegis ? big.ns_per_b / 2 : 0.0, big_gcm.ns_per_b / 2);
    __builtin_cpu_init();
    if (__builtin_cpu_supports("aes")) {
        double ni = s_peak_aesni(secs), va = 0;
        printf("\nAES-128 ceiling of one core (AES rounds alone): AES-NI %.2f GB/s", ni);
        if (__builtin_cpu_supports("vaes") && __builtin_cpu_supports("avx2"))
            printf(", VAES %.2f GB/s", va = s_peak_vaes(secs));
        else
            printf(", no VAES here");
        if (wide)
            printf(", VAES on 512-bit registers %.2f GB/s", va = s_peak_vaes512(secs));
        /* a byte is sealed once and opened once: 2 passes */
        double top = vaes && va > 0 ? va : ni;
        printf("\nGCM, 128 KiB frames: %.2f GB/s per pass = %.0f%% of the %s ceiling\n", 2 * big_gcm.gbs,
               100.0 * 2 * big_gcm.gbs / top, wide ? "512-bit VAES" : vaes && va > 0 ? "VAES" : "AES-NI");
        if (aegis)
            printf("%s, 128 KiB frames: %.2f GB/s per pass, %.3f CPU-ns per byte a pass\n", cols[0].title,
                   2 * big.gbs, big.ns_per_b / 2);
    }
    free(src);
    free(wire);
    free(dst);
    return 0;
}
