/* zt_stream's keys: what both ends of a stream agree on and how (the
 * proofs of an opening and its acceptance, the stream's two keys, a
 * server's one-to-many key), and this process's settings for them. */
#include "wire/zt_stream_internal.h"
#include "wire/zt_auth.h"
#include "base/zt_env.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_knobs.h"
#include "ztrain/zt_log.h"
#include "base/zt_time.h"
#include <stdio.h>
#include <string.h>

/* The proof of an opening (what is "open") or of its acceptance. */
void zt_stream_proof_as(const zt_stream_cfg_t *cfg, const char *cipher, const char *what, const char *client,
                        const char *server, const char *csalt, const char *ssalt, uint8_t mac[32])
{
    char text[1024];
    int n = snprintf(text, sizeof text, "%s|%s|%s|%lld|%s|%s|%s|%s", what, cipher, cfg->job,
                     (long long) cfg->incarnation, client, server, csalt, ssalt);
    zt_seal_mac(cfg->secret, text, n > 0 && (size_t) n < sizeof text ? (size_t) n : 0, mac);
}

void zt_stream_proof(const zt_stream_cfg_t *cfg, const char *what, const char *client, const char *server,
                     const char *csalt, const char *ssalt, uint8_t mac[32])
{
    zt_stream_proof_as(cfg, zt_seal_cipher_name(), what, client, server, csalt, ssalt, mac);
}

/* Both keys of a stream, into *tx and *rx (what they held let go); the
 * client seals c2s, the server s2c. */
int zt_stream_agree(const zt_stream_cfg_t *cfg, bool client, const char *cname, const char *sname,
                     const uint8_t *csalt, const uint8_t *ssalt, zt_seal_t **tx, zt_seal_t **rx)
{
    char binding[512];
    uint8_t c2s[ZT_SEAL_KEY_BYTES], s2c[ZT_SEAL_KEY_BYTES];
    snprintf(binding, sizeof binding, "%s|%lld|%s|%s", cfg->job, (long long) cfg->incarnation, cname, sname);
    int rc = zt_seal_derive(cfg->secret, csalt, ssalt, binding, c2s, s2c);
    zt_seal_destroy(tx);
    zt_seal_destroy(rx);
    if (rc == ZT_OK) {
        *tx = zt_seal_new(client ? c2s : s2c, client ? ZT_SEAL_C2S : ZT_SEAL_S2C);
        *rx = zt_seal_new(client ? s2c : c2s, client ? ZT_SEAL_S2C : ZT_SEAL_C2S);
        rc = *tx && *rx ? ZT_OK : ZT_ENOMEM;
    }
    memset(c2s, 0, sizeof c2s);
    memset(s2c, 0, sizeof s2c);
    return rc;
}

/* The one-to-many key of server sname under salt: its sealer or opener. */
zt_seal_t *zt_stream_shared_key(const zt_stream_cfg_t *cfg, const char *sname, const uint8_t *salt)
{
    char binding[512];
    uint8_t k[ZT_SEAL_KEY_BYTES], unused[ZT_SEAL_KEY_BYTES];
    snprintf(binding, sizeof binding, "one-to-many|%s|%lld|%s", cfg->job, (long long) cfg->incarnation, sname);
    zt_seal_t *s = zt_seal_derive(cfg->secret, salt, salt, binding, k, unused) == ZT_OK
                       ? zt_seal_new(k, ZT_SEAL_BCAST) : NULL;
    memset(k, 0, sizeof k);
    memset(unused, 0, sizeof unused);
    return s;
}

/* What the acceptance's proof covers besides the salts' pair: the
 * one-to-many key's salt and its last frame. */
void zt_stream_accept_extra(const char *ssalt, const char *bsalt, int64_t blast, char *out, size_t size)
{
    snprintf(out, size, "%s|%s|%lld", ssalt, bsalt, (long long) blast);
}

/* The id of a stream's keys: from the server's salt (the server draws
 * another while it equals the id of the keys it holds). */
uint32_t zt_stream_kid(const uint8_t *ssalt)
{
    return ((uint32_t) ssalt[0] << 16 | (uint32_t) ssalt[1] << 8 | ssalt[2]) & KID_MASK;
}

bool zt_stream_cfg_load(zt_stream_cfg_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    if (strcmp(zt_knob_str(ZT_KNOB_BULK_SEAL), "on") || !zt_auth_seal_secret(cfg->secret, cfg->self, sizeof cfg->self))
        return false;
    snprintf(cfg->job, sizeof cfg->job, "ztrain");
    cfg->incarnation = zt_env_int_or(ZT_ENV_INCARNATION, 0);
    return true;
}

/* An opening whose proof fails under this process's cipher but holds
 * under the other: a replica of this job that seals with another
 * ZT_SEAL_CIPHER. Said (once a minute), since nothing else would. */
void zt_stream_other_cipher(const zt_stream_cfg_t *cfg, int64_t *told_ms, const zt_msg_SEAL_OPEN_t *o,
                            const uint8_t mac[32])
{
    int64_t now = zt_now_ms();
    if (now - *told_ms < 60000)
        return; /* said within the minute: no second proof for a pile of openings */
    const char *mine = zt_seal_cipher_name(), *other = zt_seal_cipher_other();
    uint8_t want[32];
    zt_stream_proof_as(cfg, other, "open", o->name, o->server, o->salt, "", want);
    if (zt_seal_mac_equal(mac, want)) {
        *told_ms = now;
        zt_error("%s seals its bulk bytes with %s, this replica (%s) with %s: refused; ZT_SEAL_CIPHER must be the "
                 "same for every replica of a job",
                 o->name, other, cfg->self, mine);
    }
}
