/* seal_bench: the data plane's seal (zt_seal, AES-128-GCM through OpenSSL)
 * against the cipher CURVE puts on every ZeroMQ frame (libsodium's
 * XSalsa20-Poly1305, crypto_secretbox), in the same run, on one core:
 * sealing then opening frames of the data plane's sizes, each from one
 * buffer into another (the copy the seal replaces). Prints GB/s and
 * CPU-nanoseconds per byte for both, and their ratio. CURVE also copies and
 * allocates each frame inside libzmq; that cost is not counted here, so the
 * ratio is the least the seal saves.
 *
 *   seal_bench [seconds per case, default 1]
 */
#include "wire/zt_seal.h"
#include <sodium.h>
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

static s_fig_t s_seal(size_t len, double secs, unsigned char *src, unsigned char *wire, unsigned char *dst)
{
    uint8_t key[32], tag[16], hdr[48] = "bucket 3 gen 9 offset 0 count 262144";
    zt_seal_random(key, sizeof key);
    zt_seal_t *tx = zt_seal_new(key, ZT_SEAL_C2S), *rx = zt_seal_new(key, ZT_SEAL_C2S);
    double w0 = s_wall(), c0 = s_cpu();
    uint64_t n = 0, k;
    while (s_wall() - w0 < secs) {
        if (zt_seal_close(tx, hdr, sizeof hdr, src, wire, len, &k, tag) != 0 ||
            zt_seal_open(rx, k, hdr, sizeof hdr, wire, dst, len, tag) != 0) {
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
    printf("seal then open, one core, each byte counted once (GB/s; CPU-ns per byte)\n");
    printf("%-10s %-26s %-26s %s\n", "frame", "zt_seal AES-128-GCM", "CURVE's XSalsa20-Poly1305", "speed ratio");
    for (int i = 0; i < 3; i++) {
        s_fig_t a = s_seal(sizes[i], secs, src, wire, dst), b = s_secretbox(sizes[i], secs, src, wire, dst);
        char fa[40], fb[40];
        snprintf(fa, sizeof fa, "%6.2f GB/s %5.3f ns/B", a.gbs, a.ns_per_b);
        snprintf(fb, sizeof fb, "%6.2f GB/s %5.3f ns/B", b.gbs, b.ns_per_b);
        printf("%-10zu %-26s %-26s %.2fx\n", sizes[i], fa, fb, a.gbs / b.gbs);
    }
    free(src);
    free(wire);
    free(dst);
    return 0;
}
