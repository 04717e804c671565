/* zt_seal: the data plane's seal for bulk bytes between hosts.
 *
 * CURVE proves who a peer is and keeps the control plane private, but it
 * encrypts every frame with XSalsa20-Poly1305 plus a copy and an allocation
 * inside libzmq. Bulk tensors instead are sealed here with the job's
 * cipher (ZT_SEAL_CIPHER: AEGIS-128X2, zt_aegis, by default; or
 * AES-128-GCM, zt_gcm or OpenSSL's EVP), in the pass that copies them
 * anyway: from the caller's tensor into the send buffer, and from the
 * received frame into the reducer's slot or the caller's tensor.
 *
 * Keys. Each stream (one client connection to one server) has two keys, one
 * per direction, derived with HKDF-SHA256 from the job's secret (in the
 * 0600 credentials every replica of the job holds, never on the wire),
 * salted with a fresh random value from each end, exchanged when the stream
 * opens, and bound to the job, its incarnation and the two ends (the
 * binding text). So a key is never used on two streams, across reconnects,
 * restarts or rejoins, and one frame cannot be moved to another stream.
 *
 * Nonces. A frame's nonce is the direction and its number on the stream
 * (from 1, never reused); the receiver takes only numbers above the last it
 * opened, so a replayed or reordered frame fails. Every ZT_SEAL_REKEY_FRAMES
 * frames both ends move to the next key (HKDF of the last), far below either
 * cipher's volume limit for one key even at the largest frame.
 *
 * Associated data. The frame's header (kind, generation, step, bucket or
 * offset, rank, sequence) is authenticated with it, so a frame cannot be
 * replayed under another header either.
 *
 * A frame that fails opens nothing: the caller drops it, counts it, and
 * never sums, applies or answers it. */
#ifndef ZT_SEAL_H
#define ZT_SEAL_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ZT_SEAL_KEY_BYTES 32           /* a derived key; its first 16 bytes are the cipher's key */
#define ZT_SEAL_TAG_BYTES 16           /* the cipher's full tag (128 bits) */
#define ZT_SEAL_SALT_BYTES 16          /* each end's fresh value at a stream's opening */
#define ZT_SEAL_REKEY_FRAMES (1u << 20) /* frames per key: ~1 TiB at 1 MiB frames */

/* Which way a key seals (part of every nonce): client to server, or back,
 * or a server's one-to-many key (what it sends every client alike, sealed
 * once). */
typedef enum { ZT_SEAL_C2S = 1, ZT_SEAL_S2C = 2, ZT_SEAL_BCAST = 3 } zt_seal_dir_t;

/* One direction of one stream: its key, the frame numbers, an EVP context. */
typedef struct zt_seal_t zt_seal_t;

/* The two keys of a stream: HKDF-SHA256 of secret, salted with the client's
 * and the server's fresh values, bound to binding (the job, its
 * incarnation, the two ends). ZT_OK, or ZT_EIO when OpenSSL fails. */
int zt_seal_derive(const uint8_t secret[ZT_SEAL_KEY_BYTES], const uint8_t client_salt[ZT_SEAL_SALT_BYTES],
                   const uint8_t server_salt[ZT_SEAL_SALT_BYTES], const char *binding,
                   uint8_t c2s[ZT_SEAL_KEY_BYTES], uint8_t s2c[ZT_SEAL_KEY_BYTES]);

/* A sealer or opener for one direction of a stream (the key is copied);
 * NULL when OpenSSL cannot make a context. */
zt_seal_t *zt_seal_new(const uint8_t key[ZT_SEAL_KEY_BYTES], zt_seal_dir_t dir);
/* Wipes the key; safe on NULL and twice (NULLs the pointer). */
void zt_seal_destroy(zt_seal_t **self_p);

/* Seals one frame: len bytes of src encrypted into dst (dst may be src,
 * never a partial overlap), aad authenticated with them. *number is the
 * frame's number and tag its tag, both sent with it. ZT_OK, or ZT_EIO. */
int zt_seal_close(zt_seal_t *self, const void *aad, size_t aad_len, const void *src, void *dst, size_t len,
                  uint64_t *number, uint8_t tag[ZT_SEAL_TAG_BYTES]);

/* Opens one: number must be above the last frame opened (else ZT_EPROTO: a
 * replay, or a frame of an earlier key), src is decrypted into dst (may be
 * src) and the tag checked: ZT_EPROTO when it does not match, and then
 * dst holds nothing usable and must be thrown away. ZT_OK, ZT_EPROTO or
 * ZT_EIO. A failure does not advance the stream. */
int zt_seal_open(zt_seal_t *self, uint64_t number, const void *aad, size_t aad_len, const void *src, void *dst,
                 size_t len, const uint8_t tag[ZT_SEAL_TAG_BYTES]);

/* A fresh opener that joins a sender already at frame last: it takes only
 * frames above it (moving to that epoch's key). ZT_OK; ZT_EINVAL when it
 * opened frames already; ZT_EPROTO when last is absurdly far (2^40). */
int zt_seal_start_after(zt_seal_t *self, uint64_t last);

/* Frames sealed or opened so far, and the number of the last one. */
uint64_t zt_seal_frames(const zt_seal_t *self);
uint64_t zt_seal_last(const zt_seal_t *self);

/* HMAC-SHA256 of data under key: the proofs that a stream's opening comes
 * from the job (both ends hold its secret). */
void zt_seal_mac(const uint8_t key[ZT_SEAL_KEY_BYTES], const void *data, size_t len, uint8_t out[32]);
/* Whether two MACs are equal, in constant time. */
bool zt_seal_mac_equal(const uint8_t a[32], const uint8_t b[32]);
/* Keys, salts and proofs as text (job.keys, the opening's fields): n bytes
 * as 2n lowercase hex digits into out (2n + 1 bytes); and back, false
 * unless text is exactly 2n hex digits. */
void zt_seal_hex(const uint8_t *bytes, size_t n, char *out);
bool zt_seal_unhex(const char *text, uint8_t *out, size_t n);
/* Fresh random bytes (the salts, a job's secret). ZT_OK or ZT_EIO. */
int zt_seal_random(void *out, size_t len);
/* Frees what the crypto library keeps for this thread: a thread that may
 * have sealed or keyed calls it before it ends, so nothing of it is freed
 * after its owner has gone on (a detached thread's own end). */
void zt_seal_thread_done(void);

/* The bulk seal's cipher, the same for every replica of a job
 * (ZT_SEAL_CIPHER, read once): "aegis128x2" or "aes128gcm". Keys are bound
 * to it (zt_seal_derive), so frames of the other cipher never open; a
 * processor without AES-NI makes no AEGIS sealer (zt_seal_new says why
 * and returns NULL). zt_seal_use_cipher overrides the knob (tests and
 * benchmarks), before any key is made. */
const char *zt_seal_cipher_name(void);
/* The cipher this process does not seal with (the other name). */
const char *zt_seal_cipher_other(void);
void zt_seal_use_cipher(const char *name);

void zt_seal_selftest(void);
/* Whether new keys use zt_gcm (VAES, where the processor has it, unless
 * ZT_SEAL_VAES=off); zt_seal_use_vaes(0 or 1) overrides the knob, for
 * comparisons (a processor without VAES gets OpenSSL either way). */
bool zt_seal_vaes(void);
void zt_seal_use_vaes(int on);
/* Whether zt_gcm may use 512-bit registers: ZT_SEAL_VAES is not ymm. */
bool zt_seal_gcm_wide(void);

#endif
