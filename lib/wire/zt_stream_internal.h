/* zt_stream's insides, for zt_stream.c and its selftest only. */
#ifndef ZT_STREAM_INTERNAL_H
#define ZT_STREAM_INTERNAL_H
#include "wire/zt_stream.h"
#include "wire/zt_bufpool.h"
#include "wire/zt_zmtp.h"

#define SEAL_BYTES (8 + ZT_SEAL_TAG_BYTES) /* a sealed unit's number and tag */
/* A unit's 8-byte number: the frame's number proper in the low 40 bits
 * (zt_seal's numbers stay below 2^40), the id of the keys it was sealed
 * under in bits 40-61 (a server holding a stream's keys and the keys of a
 * newer opening tells them apart by it), and the top bit when it was sealed
 * under the server's one-to-many key. */
#define NUMBER_MASK (((uint64_t) 1 << 40) - 1)
#define KID_SHIFT 40
#define KID_MASK 0x3FFFFFu
#define SHARED_BIT ((uint64_t) 1 << 63)
#define MAX_PAYLOADS 8                     /* payload frames of one sealed message */
#define MAX_STREAMS 4096                   /* a server's table; unconfirmed ones go first, then the oldest */

struct zt_stream_t {
    zt_stream_cfg_t cfg;         /* the job's secret, names, incarnation */
    void *sock;                  /* the client's DEALER (NULL on a server's stream, or with zmtp) */
    zt_zmtp_t *zmtp;             /* or the client's ZMTP end (zt_stream_connect_zmtp) */
    uint8_t id[256];             /* a server's stream: the client's routing id */
    size_t id_len;
    char peer[ZT_MSG_STR_MAX];   /* the other end's name */
    char expect[ZT_MSG_STR_MAX]; /* a client's: the server it asks for ("": any of the job's) */
    uint8_t salt[ZT_SEAL_SALT_BYTES]; /* the client's salt of the opening in flight */
    zt_seal_t *tx, *rx;          /* this end's sealer and opener, once agreed (a server's: confirmed) */
    uint32_t kid;                /* their id */
    /* a server's stream: the keys of the latest opening, until the client's
     * first message sealed under them confirms it (the client it names saw
     * this answer); a replayed opening never gets that far */
    zt_seal_t *ptx, *prx;
    uint32_t pkid;
    char ppeer[ZT_MSG_STR_MAX];
    zt_seal_t *brx;              /* a client's opener of its server's one-to-many key */
    zt_bufpool_t *pool;          /* sealed payloads go from here, zero-copy */
    int64_t used;                /* a server's stream: when it last opened a message (for eviction) */
    int64_t opened_ms;           /* a client's: when its last opening went out */
    int64_t heard_ms;            /* a client's: when its server's answer or message last opened */
    zt_stream_drops_t drops;     /* a client's (a server's streams count in the table's) */
};

struct zt_streams_t {
    zt_stream_cfg_t cfg;
    void *router;
    zt_stream_t **s;             /* by routing id */
    int n;
    int64_t clock;               /* orders the streams' use */
    zt_stream_drops_t drops;
    uint8_t bsalt[ZT_SEAL_SALT_BYTES]; /* the one-to-many key's salt */
    zt_seal_t *btx;              /* its sealer */
    zt_bufpool_t *pool;          /* what it seals goes from here */
    zt_zmtp_t *(*end_of)(void *, const void *, size_t); /* a client's own connection (zt_streams_set_ends) */
    void *end_arg;
    int64_t told_cipher_ms;      /* when an opening of another cipher was last said */
};

/* zt_stream_keys.c. The proof of an opening (what is "open") or of its
 * acceptance. */
void zt_stream_proof(const zt_stream_cfg_t *cfg, const char *what, const char *client, const char *server,
                     const char *csalt, const char *ssalt, uint8_t mac[32]);
/* The same proof as a process sealing with cipher would make it: the
 * proof covers the cipher, so an opening from a replica that seals with
 * another fails, and this tells such a one from a forgery. */
void zt_stream_proof_as(const zt_stream_cfg_t *cfg, const char *cipher, const char *what, const char *client,
                        const char *server, const char *csalt, const char *ssalt, uint8_t mac[32]);
/* Called when an opening's proof fails: if it holds under the other
 * cipher (a replica of this job with another ZT_SEAL_CIPHER), says so,
 * at most once a minute (*told_ms: when it last did). */
void zt_stream_other_cipher(const zt_stream_cfg_t *cfg, int64_t *told_ms, const zt_msg_SEAL_OPEN_t *o,
                            const uint8_t mac[32]);
/* Both keys of a stream, into *tx and *rx (what they held let go); the
 * client seals c2s, the server s2c. */
int zt_stream_agree(const zt_stream_cfg_t *cfg, bool client, const char *cname, const char *sname,
                    const uint8_t *csalt, const uint8_t *ssalt, zt_seal_t **tx, zt_seal_t **rx);
/* The one-to-many key of server sname under salt: its sealer or opener. */
zt_seal_t *zt_stream_shared_key(const zt_stream_cfg_t *cfg, const char *sname, const uint8_t *salt);
/* What the acceptance's proof covers besides the salts' pair: the
 * one-to-many key's salt and its last frame. */
void zt_stream_accept_extra(const char *ssalt, const char *bsalt, int64_t blast, char *out, size_t size);
/* The id of a stream's keys: from the server's salt (the server draws
 * another while it equals the id of the keys it holds). */
uint32_t zt_stream_kid(const uint8_t *ssalt);

/* zt_stream.c, for zt_stream_many.c. Opens [header][seal][payload...] in
 * place (into: where a message of one payload of exactly into_len bytes
 * opens instead, or NULL), then drops the seal frame; a failure is counted
 * in *drops. */
int zt_stream_open_parts(zt_stream_t *s, zt_stream_drops_t *drops, zmq_msg_t *parts, int *np, void *into,
                         size_t into_len);
/* The stream of routing id id; confirmed: only one whose keys a message of
 * the client's confirmed. */
zt_stream_t *zt_streams_lookup(zt_streams_t *self, zmq_msg_t *id, bool confirmed);
/* Closes parts[0 .. *np-1]; *np = 0. */
void zt_stream_close_parts(zmq_msg_t *parts, int *np);

#endif
