/* zt_aegis: AEGIS-128X2, the bulk seal's cipher by default (ZT_SEAL_CIPHER).
 *
 * AEGIS-128L (a CAESAR finalist for high-performance use, specified with
 * its parallel modes by the IRTF's CFRG) is an authenticated cipher built
 * from the AES round alone: a 1024-bit state of eight AES blocks, each 32
 * bytes of message cost eight AES rounds and a few XORs, with no separate
 * hash. AEGIS-128X2 runs two such states, each in one half of a 256-bit
 * register, told apart by a context byte, their tags XORed: one VAES
 * instruction moves both. Against AES-128-GCM on the same core (ten AES
 * rounds per 16 bytes plus GHASH) that is 2.7x the bytes per second
 * where the processor has VAES; on AES-NI alone, 3x OpenSSL's GCM (both
 * paths here give the same bytes).
 *
 * 128-bit key, 128-bit nonce, 128-bit tag. As with GCM, a nonce must never
 * be used twice under one key (zt_seal's frame numbers see to it), and an
 * open that fails leaves nothing usable in dst (zt_aegis_crypt still
 * writes it; zt_seal wipes it). Private to lib/wire; zt_seal uses it. The
 * self-test checks the standard's known answers for AEGIS-128L (one state)
 * and AEGIS-128X2, and both paths against each other. */
#ifndef ZT_AEGIS_H
#define ZT_AEGIS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Whether this processor runs it (AES-NI, SSE4.1). */
bool zt_aegis_supported(void);
/* Whether it also has VAES with AVX2 (both states in one register). */
bool zt_aegis_vaes_supported(void);
/* Whether full blocks go through VAES where the processor has it (the
 * default) or AES-NI only: the same bytes either way. */
void zt_aegis_use_vaes(bool on);

/* Seals (enc) or opens len bytes of src into dst (the same buffer allowed,
 * never a partial overlap) under key and nonce, authenticating aad with
 * them: tag gets the tag of what was sealed, or of what was opened (the
 * caller compares that with the one received, in constant time). lanes is
 * 2 (AEGIS-128X2) or 1 (AEGIS-128L: the known answers). */
void zt_aegis_crypt(int lanes, bool enc, const uint8_t key[16], const uint8_t nonce[16], const void *aad,
                    size_t aad_len, const void *src, void *dst, size_t len, uint8_t tag[16]);

void zt_aegis_selftest(void);

#endif
