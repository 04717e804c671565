/* zt_gcm: AES-128-GCM on 256-bit vector registers (VAES and VPCLMULQDQ:
 * two blocks per instruction), for processors that have them (AMD Zen 3
 * and later, Intel Ice Lake and later), and on 512-bit ones (four blocks
 * per instruction) where AVX-512 is there too: the OpenSSL of Debian 12
 * uses them only with AVX-512, and otherwise encrypts one block per
 * instruction. The
 * standard's GCM bit for bit, with a 96-bit IV: the seal's self-test checks
 * it against OpenSSL on random keys, IVs, headers and lengths. Private to
 * lib/wire; zt_seal uses it where zt_gcm_supported. */
#ifndef ZT_GCM_H
#define ZT_GCM_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint8_t rk[11][32]; /* the AES-128 round keys, each twice (both lanes) */
    uint8_t hp[8][32];  /* GHASH's key powers by block pair: H^16 H^15 | ... | H^2 H^1, byte-reversed */
    uint8_t hk[8][32];  /* the same, each lane's two halves xored (Karatsuba's middle product) */
    uint8_t hq[8][64];  /* by quad, for 512-bit registers: H^32 H^31 H^30 H^29 | ... | H^4 .. H^1 */
} zt_gcm_key_t;

/* Whether this processor and its OS run zt_gcm (AVX2, AES-NI, PCLMUL,
 * VAES, VPCLMULQDQ). */
bool zt_gcm_supported(void);
/* Whether it also runs on 512-bit registers (AVX-512 F, BW and VL, zmm
 * state saved by the OS): four blocks per instruction, 32 per loop. */
bool zt_gcm_wide_supported(void);
/* Whether zt_gcm_crypt uses 512-bit registers where it can (the default)
 * or 256-bit ones only: the same bytes either way. */
void zt_gcm_use_wide(bool on);
void zt_gcm_init(zt_gcm_key_t *k, const uint8_t key[16]);
/* Encrypts (enc) or decrypts len bytes from src to dst (the same buffer
 * allowed) under iv, authenticating aad and the ciphertext: tag gets the
 * tag of what was sealed, or of what was opened (the caller compares that
 * with the one received, in constant time). */
void zt_gcm_crypt(const zt_gcm_key_t *k, bool enc, const uint8_t iv[12], const void *aad, size_t aad_len,
                  const void *src, void *dst, size_t len, uint8_t tag[16]);

#endif
