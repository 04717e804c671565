#include "wire/zt_seal.h"
#include "wire/zt_gcm.h"
#include "wire/zt_aegis.h"
#include "ztrain/zt_log.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_knobs.h"
#include <assert.h>
#include <limits.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>

struct zt_seal_t {
    uint8_t key[ZT_SEAL_KEY_BYTES]; /* the key of the current epoch */
    EVP_CIPHER_CTX *ctx;            /* keyed for key, encrypting or decrypting (OpenSSL) */
    zt_gcm_key_t gk;                /* or keyed for zt_gcm */
    bool vaes;                      /* keyed for zt_gcm */
    bool aegis;                     /* AEGIS-128X2 (zt_aegis) under the key's first 16 bytes, not GCM */
    int mode;                       /* 0 not keyed yet, 1 sealing, 2 opening */
    zt_seal_dir_t dir;              /* in every nonce */
    uint64_t last;                  /* the last frame number sealed or opened */
    uint64_t epoch;                 /* (number - 1) / ZT_SEAL_REKEY_FRAMES of key */
    uint64_t frames;                /* frames sealed or opened */
};

/* HKDF-SHA256 (RFC 5869). ZT_OK or ZT_EIO. */
/* OpenSSL without its exit handler: at exit it frees its per-thread state
 * while a thread that used it may still be ending (a CZMQ actor's thread
 * runs on after zactor_destroy returns) and freeing the same: a double
 * free at the process's end, seen now and then in the chief (its file
 * server's thread keys its streams). The process's end frees it all. */
__attribute__((constructor)) static void s_openssl_no_atexit(void)
{
    OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, NULL);
}

void zt_seal_thread_done(void) { OPENSSL_thread_stop(); }

static int s_hkdf(const uint8_t *ikm, size_t ikm_len, const uint8_t *salt, size_t salt_len, const void *info,
                  size_t info_len, uint8_t *out, size_t out_len)
{
    EVP_PKEY_CTX *p = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, NULL);
    size_t n = out_len;
    int ok = p && EVP_PKEY_derive_init(p) > 0 && EVP_PKEY_CTX_set_hkdf_md(p, EVP_sha256()) > 0 &&
             (!salt_len || EVP_PKEY_CTX_set1_hkdf_salt(p, salt, (int) salt_len) > 0) &&
             EVP_PKEY_CTX_set1_hkdf_key(p, ikm, (int) ikm_len) > 0 &&
             (!info_len || EVP_PKEY_CTX_add1_hkdf_info(p, info, (int) info_len) > 0) &&
             EVP_PKEY_derive(p, out, &n) > 0 && n == out_len;
    EVP_PKEY_CTX_free(p);
    return ok ? ZT_OK : ZT_EIO;
}

int zt_seal_derive(const uint8_t secret[ZT_SEAL_KEY_BYTES], const uint8_t client_salt[ZT_SEAL_SALT_BYTES],
                   const uint8_t server_salt[ZT_SEAL_SALT_BYTES], const char *binding,
                   uint8_t c2s[ZT_SEAL_KEY_BYTES], uint8_t s2c[ZT_SEAL_KEY_BYTES])
{
    uint8_t salt[2 * ZT_SEAL_SALT_BYTES], okm[2 * ZT_SEAL_KEY_BYTES];
    memcpy(salt, client_salt, ZT_SEAL_SALT_BYTES);
    memcpy(salt + ZT_SEAL_SALT_BYTES, server_salt, ZT_SEAL_SALT_BYTES);
    char info[1024];
    int n = snprintf(info, sizeof info, "ztrain seal v2|%s|%s", zt_seal_cipher_name(), binding ? binding : "");
    if (n < 0 || (size_t) n >= sizeof info)
        return ZT_EINVAL;
    int rc = s_hkdf(secret, ZT_SEAL_KEY_BYTES, salt, sizeof salt, info, (size_t) n, okm, sizeof okm);
    if (rc == ZT_OK) {
        memcpy(c2s, okm, ZT_SEAL_KEY_BYTES);
        memcpy(s2c, okm + ZT_SEAL_KEY_BYTES, ZT_SEAL_KEY_BYTES);
    }
    OPENSSL_cleanse(okm, sizeof okm);
    return rc;
}

/* The next epoch's key: HKDF of this one. */
static int s_next_key(const uint8_t key[ZT_SEAL_KEY_BYTES], uint8_t next[ZT_SEAL_KEY_BYTES])
{
    static const char info[] = "ztrain seal rekey";
    return s_hkdf(key, ZT_SEAL_KEY_BYTES, NULL, 0, info, sizeof info - 1, next, ZT_SEAL_KEY_BYTES);
}

/* The process's cipher (ZT_SEAL_CIPHER, read once): 2 AEGIS-128X2, 1
 * AES-128-GCM, -1 not read yet. */
static int s_cipher = -1;

static bool s_aegis_on(void)
{
    if (s_cipher < 0)
        s_cipher = strcmp(zt_knob_str(ZT_KNOB_SEAL_CIPHER), "aes128gcm") ? 2 : 1;
    return s_cipher == 2;
}

const char *zt_seal_cipher_name(void) { return s_aegis_on() ? "aegis128x2" : "aes128gcm"; }

const char *zt_seal_cipher_other(void) { return s_aegis_on() ? "aes128gcm" : "aegis128x2"; }

void zt_seal_use_cipher(const char *name) { s_cipher = name && !strcmp(name, "aes128gcm") ? 1 : 2; }

zt_seal_t *zt_seal_new(const uint8_t key[ZT_SEAL_KEY_BYTES], zt_seal_dir_t dir)
{
    if (s_aegis_on() && !zt_aegis_supported()) {
        static bool told;
        if (!told)
            zt_error("ZT_SEAL_CIPHER=aegis128x2 needs the processor's AES instructions (AES-NI), which this one "
                     "lacks: run the whole job with ZT_SEAL_CIPHER=aes128gcm");
        told = true;
        return NULL;
    }
    zt_seal_t *self = calloc(1, sizeof *self);
    if (!self || !(self->ctx = EVP_CIPHER_CTX_new())) {
        free(self);
        return NULL;
    }
    memcpy(self->key, key, ZT_SEAL_KEY_BYTES);
    self->dir = dir;
    self->aegis = s_aegis_on();
    return self;
}

void zt_seal_destroy(zt_seal_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zt_seal_t *self = *self_p;
    EVP_CIPHER_CTX_free(self->ctx);
    OPENSSL_cleanse(self, sizeof *self);
    free(self);
    *self_p = NULL;
}

int zt_seal_start_after(zt_seal_t *self, uint64_t last)
{
    if (self->frames || self->last)
        return ZT_EINVAL;
    if (last >> 40)
        return ZT_EPROTO;
    uint64_t e = last / ZT_SEAL_REKEY_FRAMES; /* frame last + 1's */
    while (self->epoch < e) {
        uint8_t next[ZT_SEAL_KEY_BYTES];
        int rc = s_next_key(self->key, next);
        memcpy(self->key, next, sizeof next);
        OPENSSL_cleanse(next, sizeof next);
        if (rc != ZT_OK)
            return rc;
        self->epoch++;
    }
    self->mode = 0; /* keyed again at the next frame */
    self->last = last;
    return ZT_OK;
}

uint64_t zt_seal_frames(const zt_seal_t *self) { return self ? self->frames : 0; }
uint64_t zt_seal_last(const zt_seal_t *self) { return self ? self->last : 0; }

/* zt_gcm where the processor runs it, unless ZT_SEAL_VAES=off; -1: not
 * decided yet. The same bytes on the wire either way. */
static int s_use_vaes = -1;

void zt_seal_use_vaes(int on)
{
    s_use_vaes = on;
    zt_aegis_use_vaes(on > 0);
}

bool zt_seal_vaes(void)
{
    if (s_use_vaes < 0) {
        s_use_vaes = strcmp(zt_knob_str(ZT_KNOB_SEAL_VAES), "off") != 0;
        zt_gcm_use_wide(zt_seal_gcm_wide());
        zt_aegis_use_vaes(s_use_vaes > 0);
    }
    return s_use_vaes > 0 && zt_gcm_supported();
}

bool zt_seal_gcm_wide(void) { return strcmp(zt_knob_str(ZT_KNOB_SEAL_VAES), "ymm") != 0; }

/* Keys the context for key (a new key, or the first use). */
static int s_key(zt_seal_t *self, int mode, const uint8_t key[ZT_SEAL_KEY_BYTES])
{
    /* AES-128 (its key the first 16 bytes): 10 rounds to AES-256's 14, 1.2x
     * the speed here, and far from any attack (TLS 1.3's first suite);
     * AEGIS-128X2 keys itself at each frame (no schedule to keep) */
    bool vaes = zt_seal_vaes(); /* reads ZT_SEAL_VAES, which both ciphers follow */
    if (self->aegis) {
        self->mode = mode;
        return ZT_OK;
    }
    if ((self->vaes = vaes)) {
        zt_gcm_init(&self->gk, key);
        self->mode = mode;
        return ZT_OK;
    }
    int ok = mode == 1 ? EVP_EncryptInit_ex(self->ctx, EVP_aes_128_gcm(), NULL, key, NULL)
                       : EVP_DecryptInit_ex(self->ctx, EVP_aes_128_gcm(), NULL, key, NULL);
    self->mode = ok > 0 ? mode : 0;
    return ok > 0 ? ZT_OK : ZT_EIO;
}

static void s_nonce(const zt_seal_t *self, uint64_t number, uint8_t iv[12])
{
    uint32_t d = (uint32_t) self->dir;
    for (int i = 0; i < 4; i++)
        iv[i] = (uint8_t) (d >> (24 - 8 * i));
    for (int i = 0; i < 8; i++)
        iv[4 + i] = (uint8_t) (number >> (56 - 8 * i));
}

/* AES-128-GCM over len bytes (any length: OpenSSL takes int pieces). */
static int s_update(EVP_CIPHER_CTX *ctx, bool enc, uint8_t *out, const uint8_t *in, size_t len)
{
    while (len > 0) {
        int piece = len > (size_t) (INT_MAX / 2) ? INT_MAX / 2 : (int) len, n = 0;
        if ((enc ? EVP_EncryptUpdate(ctx, out, &n, in, piece) : EVP_DecryptUpdate(ctx, out, &n, in, piece)) <= 0 ||
            n != piece)
            return ZT_EIO;
        out += piece;
        in += piece;
        len -= (size_t) piece;
    }
    return ZT_OK;
}

/* One GCM operation with a given IV on a keyed context: the core that the
 * known-answer tests check. For opening, tag is read; for sealing, written. */
static int s_gcm(zt_seal_t *self, bool enc, const uint8_t iv[12], const void *aad, size_t aad_len,
                 const void *src, void *dst, size_t len, uint8_t tag[ZT_SEAL_TAG_BYTES])
{
    if (self->vaes) {
        uint8_t got[ZT_SEAL_TAG_BYTES];
        zt_gcm_crypt(&self->gk, enc, iv, aad, aad_len, src, dst, len, enc ? tag : got);
        return enc || CRYPTO_memcmp(got, tag, ZT_SEAL_TAG_BYTES) == 0 ? ZT_OK : ZT_EPROTO;
    }
    EVP_CIPHER_CTX *ctx = self->ctx;
    int n = 0;
    if ((enc ? EVP_EncryptInit_ex(ctx, NULL, NULL, NULL, iv) : EVP_DecryptInit_ex(ctx, NULL, NULL, NULL, iv)) <= 0)
        return ZT_EIO;
    if (aad_len > 0 && (aad_len > INT_MAX || (enc ? EVP_EncryptUpdate(ctx, NULL, &n, aad, (int) aad_len)
                                                  : EVP_DecryptUpdate(ctx, NULL, &n, aad, (int) aad_len)) <= 0))
        return ZT_EIO;
    if (s_update(ctx, enc, dst, src, len) != ZT_OK)
        return ZT_EIO;
    uint8_t end[16];
    if (enc)
        return EVP_EncryptFinal_ex(ctx, end, &n) > 0 &&
                       EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, ZT_SEAL_TAG_BYTES, tag) > 0
                   ? ZT_OK
                   : ZT_EIO;
    if (EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, ZT_SEAL_TAG_BYTES, tag) <= 0)
        return ZT_EIO;
    return EVP_DecryptFinal_ex(ctx, end, &n) > 0 ? ZT_OK : ZT_EPROTO;
}

/* One frame under the stream's cipher, its nonce the direction and number
 * (AEGIS's 16 bytes: the same 12, then zeros). For opening, tag is read;
 * for sealing, written. */
static int s_aead(zt_seal_t *self, bool enc, uint64_t number, const void *aad, size_t aad_len, const void *src,
                  void *dst, size_t len, uint8_t tag[ZT_SEAL_TAG_BYTES])
{
    uint8_t iv[16] = { 0 }, got[ZT_SEAL_TAG_BYTES];
    s_nonce(self, number, iv);
    if (!self->aegis)
        return s_gcm(self, enc, iv, aad, aad_len, src, dst, len, tag);
    zt_aegis_crypt(2, enc, self->key, iv, aad, aad_len, src, dst, len, enc ? tag : got);
    return enc || CRYPTO_memcmp(got, tag, ZT_SEAL_TAG_BYTES) == 0 ? ZT_OK : ZT_EPROTO;
}

/* Moves self to the key of frame number's epoch (forward only, at most one
 * epoch past the current: a frame further ahead is refused, so a forged
 * number costs no derivations). *old keeps the key to go back to. */
static int s_epoch(zt_seal_t *self, uint64_t number, int mode, uint8_t old[ZT_SEAL_KEY_BYTES], bool *moved)
{
    uint64_t e = (number - 1) / ZT_SEAL_REKEY_FRAMES;
    *moved = false;
    if (e == self->epoch)
        return self->mode == mode ? ZT_OK : s_key(self, mode, self->key);
    if (e != self->epoch + 1)
        return ZT_EPROTO;
    memcpy(old, self->key, ZT_SEAL_KEY_BYTES);
    if (s_next_key(old, self->key) != ZT_OK)
        return ZT_EIO;
    *moved = true;
    self->epoch = e;
    return s_key(self, mode, self->key);
}

int zt_seal_close(zt_seal_t *self, const void *aad, size_t aad_len, const void *src, void *dst, size_t len,
                  uint64_t *number, uint8_t tag[ZT_SEAL_TAG_BYTES])
{
    if (self->last == UINT64_MAX)
        return ZT_EIO; /* never: 2^64 frames */
    uint64_t k = self->last + 1;
    uint8_t old[ZT_SEAL_KEY_BYTES];
    bool moved;
    int rc = s_epoch(self, k, 1, old, &moved);
    OPENSSL_cleanse(old, sizeof old);
    if (rc != ZT_OK)
        return rc;
    if ((rc = s_aead(self, true, k, aad, aad_len, src, dst, len, tag)) != ZT_OK)
        return rc;
    self->last = k;
    self->frames++;
    *number = k;
    return ZT_OK;
}

int zt_seal_open(zt_seal_t *self, uint64_t number, const void *aad, size_t aad_len, const void *src, void *dst,
                 size_t len, const uint8_t tag[ZT_SEAL_TAG_BYTES])
{
    if (number <= self->last)
        return ZT_EPROTO; /* a replay, or reordered */
    uint8_t old[ZT_SEAL_KEY_BYTES], t[ZT_SEAL_TAG_BYTES];
    uint64_t was = self->epoch;
    bool moved;
    int rc = s_epoch(self, number, 2, old, &moved);
    if (rc == ZT_OK) {
        memcpy(t, tag, sizeof t);
        rc = s_aead(self, false, number, aad, aad_len, src, dst, len, t);
        if (rc == ZT_EPROTO && dst && len)
            memset(dst, 0, len); /* nothing unproven is left to read */
    }
    if (rc != ZT_OK && moved) { /* a failure does not advance the stream */
        memcpy(self->key, old, ZT_SEAL_KEY_BYTES);
        self->epoch = was;
        self->mode = 0;
    }
    OPENSSL_cleanse(old, sizeof old);
    if (rc != ZT_OK)
        return rc;
    self->last = number;
    self->frames++;
    return ZT_OK;
}

void zt_seal_mac(const uint8_t key[ZT_SEAL_KEY_BYTES], const void *data, size_t len, uint8_t out[32])
{
    unsigned int n = 32;
    if (!HMAC(EVP_sha256(), key, ZT_SEAL_KEY_BYTES, data, len, out, &n))
        memset(out, 0, 32); /* matches no real MAC of the peer's */
}

bool zt_seal_mac_equal(const uint8_t a[32], const uint8_t b[32])
{
    return CRYPTO_memcmp(a, b, 32) == 0;
}

void zt_seal_hex(const uint8_t *bytes, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[bytes[i] >> 4];
        out[2 * i + 1] = digits[bytes[i] & 15];
    }
    out[2 * n] = 0;
}

static int s_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

bool zt_seal_unhex(const char *text, uint8_t *out, size_t n)
{
    if (!text || strlen(text) != 2 * n)
        return false;
    for (size_t i = 0; i < n; i++) {
        int hi = s_digit(text[2 * i]), lo = s_digit(text[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        out[i] = (uint8_t) (hi << 4 | lo);
    }
    return true;
}

int zt_seal_random(void *out, size_t len)
{
    return len <= INT_MAX && RAND_bytes(out, (int) len) == 1 ? ZT_OK : ZT_EIO;
}

/* ------------------------------------------------------------ selftest */

static void s_hex(const char *hex, uint8_t *out)
{
    bool ok = zt_seal_unhex(hex, out, strlen(hex) / 2);
    assert(ok);
    (void) ok;
}

/* A late opener joins the sender where it is (another epoch): frames
 * sealed before it joined are refused, the next one opens. */
static void s_selftest_late(zt_seal_t *tx, const uint8_t c2s[ZT_SEAL_KEY_BYTES], const uint8_t *hdr, size_t hlen,
                            const uint8_t *plain, uint8_t *buf, uint8_t *out)
{
    uint8_t t[ZT_SEAL_TAG_BYTES];
    uint64_t k1, k2 = zt_seal_last(tx);
    zt_seal_t *late = zt_seal_new(c2s, ZT_SEAL_C2S);
    assert(late && zt_seal_start_after(late, k2) == ZT_OK && late->epoch == 1);
    assert(zt_seal_start_after(late, 1) == ZT_EINVAL); /* joined once */
    assert(zt_seal_close(tx, hdr, hlen, plain, buf, 64, &k1, t) == ZT_OK);
    assert(zt_seal_open(late, k1, hdr, hlen, buf, out, 64, t) == ZT_OK && !memcmp(out, plain, 64));
    assert(zt_seal_open(late, k1, hdr, hlen, buf, out, 64, t) == ZT_EPROTO);
    zt_seal_destroy(&late);
    late = zt_seal_new(c2s, ZT_SEAL_C2S);
    assert(zt_seal_start_after(late, (uint64_t) 1 << 41) == ZT_EPROTO);
    zt_seal_destroy(&late);
}

/* zt_gcm against OpenSSL, bit for bit: random keys, IVs and headers, every
 * length up to 1100 bytes (each tail of the 16- and 32-block loops, none,
 * one and two of each) and longer ones, out of place and in place, sealing
 * and opening. */
static void s_selftest_vaes(void)
{
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    size_t cap = 8192;
    uint8_t *plain = malloc(cap), *c1 = malloc(cap), *c2 = malloc(cap), *back = malloc(cap);
    uint8_t key[16], iv[12], aad[80], t1[16], t2[16], t3[16];
    for (int i = 0; i < 1400; i++) {
        uint8_t r[4];
        assert(zt_seal_random(key, 16) == ZT_OK && zt_seal_random(iv, 12) == ZT_OK &&
               zt_seal_random(aad, sizeof aad) == ZT_OK && zt_seal_random(r, 4) == ZT_OK);
        size_t len = i < 1100 ? (size_t) i : ((size_t) r[0] << 5 | r[1]) % cap, alen = r[2] % sizeof aad;
        assert(zt_seal_random(plain, len + 1) == ZT_OK);
        zt_gcm_key_t gk;
        zt_gcm_init(&gk, key);
        zt_gcm_crypt(&gk, true, iv, aad, alen, plain, c1, len, t1);
        int n = 0;
        assert(EVP_EncryptInit_ex(ctx, EVP_aes_128_gcm(), NULL, key, iv) > 0 &&
               (!alen || EVP_EncryptUpdate(ctx, NULL, &n, aad, (int) alen) > 0) &&
               s_update(ctx, true, c2, plain, len) == ZT_OK && EVP_EncryptFinal_ex(ctx, back, &n) > 0 &&
               EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, t2) > 0);
        assert(memcmp(c1, c2, len) == 0 && memcmp(t1, t2, 16) == 0);
        zt_gcm_crypt(&gk, false, iv, aad, alen, c1, back, len, t3);
        assert(memcmp(back, plain, len) == 0 && memcmp(t3, t1, 16) == 0);
        memcpy(back, c1, len); /* opened in place */
        zt_gcm_crypt(&gk, false, iv, aad, alen, back, back, len, t3);
        assert(memcmp(back, plain, len) == 0 && memcmp(t3, t1, 16) == 0);
        memcpy(back, plain, len); /* sealed in place */
        zt_gcm_crypt(&gk, true, iv, aad, alen, back, back, len, t3);
        assert(memcmp(back, c1, len) == 0 && memcmp(t3, t1, 16) == 0);
    }
    EVP_CIPHER_CTX_free(ctx);
    free(plain);
    free(c1);
    free(c2);
    free(back);
}

/* Long on purpose: the known answers, then one stream's story (tamper,
 * replay, loss, rekey) read top to bottom, each step relying on the last. */
static void s_selftest_once(void)
{
    /* RFC 5869, test case 1 */
    uint8_t ikm[22], salt[13], info[10], okm[42], want[42];
    memset(ikm, 0x0b, sizeof ikm);
    for (int i = 0; i < 13; i++)
        salt[i] = (uint8_t) i;
    for (int i = 0; i < 10; i++)
        info[i] = (uint8_t) (0xf0 + i);
    s_hex("3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865", want);
    assert(s_hkdf(ikm, sizeof ikm, salt, sizeof salt, info, sizeof info, okm, sizeof okm) == ZT_OK);
    assert(memcmp(okm, want, sizeof okm) == 0);

    /* AES-128-GCM, the GCM specification's test cases 1 and 2 (zero key
     * and IV; no plaintext, then one zero block) */
    uint8_t zero[32] = { 0 }, iv[12] = { 0 }, tag[16], wtag[16], ct[16], wct[16];
    zt_seal_t *s = zt_seal_new(zero, ZT_SEAL_C2S);
    assert(s);
    s->aegis = false; /* GCM's known answers, whatever the stream's cipher */
    assert(s_key(s, 1, zero) == ZT_OK);
    assert(s_gcm(s, true, iv, NULL, 0, NULL, ct, 0, tag) == ZT_OK);
    s_hex("58e2fccefa7e3061367f1d57a4e7455a", wtag);
    assert(memcmp(tag, wtag, 16) == 0);
    assert(s_gcm(s, true, iv, NULL, 0, zero, ct, 16, tag) == ZT_OK);
    s_hex("0388dace60b6a392f328c2b971b2fe78", wct);
    s_hex("ab6e47d42cec13bdf53a67b21257bddf", wtag);
    assert(memcmp(ct, wct, 16) == 0 && memcmp(tag, wtag, 16) == 0);
    zt_seal_destroy(&s);
    zt_seal_destroy(&s);

    /* A stream: both ends derive the same keys; another binding, other keys */
    uint8_t secret[32], cs[16], ss[16], c2s[32], s2c[32], c2s2[32], s2c2[32];
    assert(zt_seal_random(secret, sizeof secret) == ZT_OK && zt_seal_random(cs, 16) == ZT_OK &&
           zt_seal_random(ss, 16) == ZT_OK);
    assert(zt_seal_derive(secret, cs, ss, "job j|1|workerpool1-0|tcp://h:1", c2s, s2c) == ZT_OK);
    assert(memcmp(c2s, s2c, 32) != 0);
    assert(zt_seal_derive(secret, cs, ss, "job j|1|workerpool1-0|tcp://h:1", c2s2, s2c2) == ZT_OK);
    assert(memcmp(c2s, c2s2, 32) == 0 && memcmp(s2c, s2c2, 32) == 0);
    assert(zt_seal_derive(secret, cs, ss, "job j|2|workerpool1-0|tcp://h:1", c2s2, s2c2) == ZT_OK);
    assert(memcmp(c2s, c2s2, 32) != 0);

    zt_seal_t *tx = zt_seal_new(c2s, ZT_SEAL_C2S), *rx = zt_seal_new(c2s, ZT_SEAL_C2S);
    zt_seal_t *wrong = zt_seal_new(c2s, ZT_SEAL_S2C); /* the same key the other way */
    size_t len = 4096 * 3 + 5;
    uint8_t *plain = malloc(len), *buf = malloc(len), *out = malloc(len), hdr[24] = "a frame's header", t[16];
    for (size_t i = 0; i < len; i++)
        plain[i] = (uint8_t) (i * 131 + 7);
    uint64_t k1, k2;
    /* out of place, then in place; both open */
    assert(zt_seal_close(tx, hdr, sizeof hdr, plain, buf, len, &k1, t) == ZT_OK && k1 == 1);
    assert(memcmp(buf, plain, len) != 0);
    assert(zt_seal_open(wrong, k1, hdr, sizeof hdr, buf, out, len, t) == ZT_EPROTO);
    assert(zt_seal_open(rx, k1, hdr, sizeof hdr, buf, out, len, t) == ZT_OK && memcmp(out, plain, len) == 0);
    assert(zt_seal_open(rx, k1, hdr, sizeof hdr, buf, out, len, t) == ZT_EPROTO); /* replayed */
    memcpy(buf, plain, len);
    assert(zt_seal_close(tx, hdr, sizeof hdr, buf, buf, len, &k2, t) == ZT_OK && k2 == 2);
    /* one flipped bit anywhere (payload, header, tag) fails and advances nothing */
    buf[len / 2] ^= 0x10;
    assert(zt_seal_open(rx, k2, hdr, sizeof hdr, buf, out, len, t) == ZT_EPROTO);
    buf[len / 2] ^= 0x10;
    hdr[3] ^= 1;
    assert(zt_seal_open(rx, k2, hdr, sizeof hdr, buf, out, len, t) == ZT_EPROTO);
    hdr[3] ^= 1;
    t[15] ^= 0x80;
    assert(zt_seal_open(rx, k2, hdr, sizeof hdr, buf, out, len, t) == ZT_EPROTO);
    t[15] ^= 0x80;
    assert(zt_seal_open(rx, k2, hdr, sizeof hdr, buf, buf, len, t) == ZT_OK && memcmp(buf, plain, len) == 0);
    /* a header-only frame (no payload): its tag covers the header */
    assert(zt_seal_close(tx, hdr, sizeof hdr, NULL, NULL, 0, &k1, t) == ZT_OK && k1 == 3);
    hdr[0] ^= 1;
    assert(zt_seal_open(rx, k1, hdr, sizeof hdr, NULL, NULL, 0, t) == ZT_EPROTO);
    hdr[0] ^= 1;
    assert(zt_seal_open(rx, k1, hdr, sizeof hdr, NULL, NULL, 0, t) == ZT_OK);
    /* a lost frame is no failure: the next one opens */
    assert(zt_seal_close(tx, hdr, sizeof hdr, plain, buf, 64, &k1, t) == ZT_OK);
    assert(zt_seal_close(tx, hdr, sizeof hdr, plain, buf, 64, &k2, t) == ZT_OK && k2 == 5);
    assert(zt_seal_open(rx, k2, hdr, sizeof hdr, buf, out, 64, t) == ZT_OK && memcmp(out, plain, 64) == 0);
    assert(zt_seal_frames(rx) == 4 && zt_seal_frames(tx) == 5);
    /* rekeying: both ends move to the next key at the boundary; a forged
     * frame of the next epoch leaves the opener where it was; a frame two
     * epochs ahead is refused outright */
    tx->last = rx->last = ZT_SEAL_REKEY_FRAMES - 1;
    assert(zt_seal_close(tx, hdr, sizeof hdr, plain, buf, 64, &k1, t) == ZT_OK && k1 == ZT_SEAL_REKEY_FRAMES);
    assert(zt_seal_open(rx, k1, hdr, sizeof hdr, buf, out, 64, t) == ZT_OK);
    assert(zt_seal_close(tx, hdr, sizeof hdr, plain, buf, 64, &k2, t) == ZT_OK && tx->epoch == 1);
    uint8_t bad[16];
    memcpy(bad, t, 16);
    bad[0] ^= 1;
    assert(zt_seal_open(rx, k2, hdr, sizeof hdr, buf, out, 64, bad) == ZT_EPROTO && rx->epoch == 0);
    assert(zt_seal_open(rx, k2, hdr, sizeof hdr, buf, out, 64, t) == ZT_OK && rx->epoch == 1);
    assert(memcmp(out, plain, 64) == 0 && memcmp(tx->key, c2s, 32) != 0);
    assert(zt_seal_open(rx, k2 + 2 * (uint64_t) ZT_SEAL_REKEY_FRAMES, hdr, sizeof hdr, buf, out, 64, t) ==
           ZT_EPROTO);
    s_selftest_late(tx, c2s, hdr, sizeof hdr, plain, buf, out);
    /* text forms */
    char text[9];
    uint8_t back[4], raw[4] = { 0x00, 0x9f, 0xa0, 0xff };
    zt_seal_hex(raw, 4, text);
    assert(!strcmp(text, "009fa0ff") && zt_seal_unhex(text, back, 4) && !memcmp(back, raw, 4));
    assert(!zt_seal_unhex("009fa0f", back, 4) && !zt_seal_unhex("009fa0fg", back, 4) && !zt_seal_unhex(NULL, back, 4));
    /* the opening's proof */
    uint8_t m1[32], m2[32];
    zt_seal_mac(secret, "hello", 5, m1);
    zt_seal_mac(secret, "hello", 5, m2);
    assert(zt_seal_mac_equal(m1, m2));
    zt_seal_mac(secret, "hellp", 5, m2);
    assert(!zt_seal_mac_equal(m1, m2));
    free(plain);
    free(buf);
    free(out);
    zt_seal_destroy(&tx);
    zt_seal_destroy(&rx);
    zt_seal_destroy(&wrong);
}

/* The known answers and the stream's story with OpenSSL, then with zt_gcm
 * where the processor has it, which is first checked against OpenSSL. */
void zt_seal_selftest(void)
{
    int was = s_use_vaes, cipher = s_cipher;
    zt_aegis_selftest();
    zt_seal_use_cipher("aegis128x2"); /* AEGIS-128X2 on AES-NI, then VAES */
    assert(!strcmp(zt_seal_cipher_name(), "aegis128x2"));
    for (int v = 0; v < 2 && zt_aegis_supported(); v++) {
        zt_seal_use_vaes(v);
        s_selftest_once();
    }
    zt_seal_use_cipher("aes128gcm");
    assert(!strcmp(zt_seal_cipher_name(), "aes128gcm"));
    /* keys are bound to the cipher: the same inputs, other keys */
    uint8_t sec[32] = { 1 }, salt[16] = { 2 }, g1[32], g2[32], a1[32], a2[32];
    assert(zt_seal_derive(sec, salt, salt, "b", g1, g2) == ZT_OK);
    zt_seal_use_cipher("aegis128x2");
    assert(zt_seal_derive(sec, salt, salt, "b", a1, a2) == ZT_OK && memcmp(g1, a1, 32) && memcmp(g2, a2, 32));
    zt_seal_use_cipher("aes128gcm");
    zt_seal_use_vaes(0);
    s_selftest_once();
    if (zt_gcm_supported()) {
        zt_gcm_use_wide(false);
        s_selftest_vaes();
        zt_seal_use_vaes(1);
        s_selftest_once();
        zt_gcm_use_wide(true);
        if (zt_gcm_wide_supported()) {
            s_selftest_vaes();
            s_selftest_once();
        }
        zt_gcm_use_wide(zt_seal_gcm_wide());
    }
    s_use_vaes = was;
    zt_aegis_use_vaes(was != 0);
    s_cipher = cipher;
}
