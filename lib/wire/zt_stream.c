#include "wire/zt_stream.h"
#include "wire/zt_bufpool.h"
#include "wire/zt_auth.h"
#include "base/zt_env.h"
#include "base/zt_util.h"
#include "ztrain/zt_knobs.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_log.h"
#include <assert.h>
#include <czmq.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEAL_BYTES (8 + ZT_SEAL_TAG_BYTES) /* a sealed unit's number and tag */
#define SHARED_BIT ((uint64_t) 1 << 63)    /* in a unit's number: sealed under the server's one-to-many key */
#define MAX_PAYLOADS 8                     /* payload frames of one sealed message */
#define MAX_STREAMS 4096                   /* a server's table; the oldest go first */

struct zt_stream_t {
    zt_stream_cfg_t cfg;         /* the job's secret, names, incarnation */
    void *sock;                  /* the client's DEALER (NULL on a server's stream) */
    uint8_t id[256];             /* a server's stream: the client's routing id */
    size_t id_len;
    char peer[ZT_MSG_STR_MAX];   /* the other end's name */
    uint8_t salt[ZT_SEAL_SALT_BYTES]; /* the client's salt of the opening in flight */
    zt_seal_t *tx, *rx;          /* this end's sealer and opener, once agreed */
    zt_seal_t *brx;              /* a client's opener of its server's one-to-many key */
    zt_bufpool_t *pool;          /* sealed payloads go from here, zero-copy */
    int64_t used;                /* a server's stream: when it last opened a message (for eviction) */
    int64_t opened_ms;           /* a client's: when its last opening went out */
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
};

/* ------------------------------------------------------------ helpers */

/* The proof of an opening (what is "open") or of its acceptance. */
static void s_proof(const zt_stream_cfg_t *cfg, const char *what, const char *client, const char *server,
                    const char *csalt, const char *ssalt, uint8_t mac[32])
{
    char text[1024];
    int n = snprintf(text, sizeof text, "%s|%s|%lld|%s|%s|%s|%s", what, cfg->job, (long long) cfg->incarnation, client,
                     server, csalt, ssalt);
    zt_seal_mac(cfg->secret, text, n > 0 && (size_t) n < sizeof text ? (size_t) n : 0, mac);
}

/* Both keys of a stream; the client seals c2s, the server s2c. */
static int s_agree(zt_stream_t *s, bool client, const char *cname, const char *sname, const uint8_t *csalt,
                   const uint8_t *ssalt)
{
    char binding[512];
    uint8_t c2s[ZT_SEAL_KEY_BYTES], s2c[ZT_SEAL_KEY_BYTES];
    snprintf(binding, sizeof binding, "%s|%lld|%s|%s", s->cfg.job, (long long) s->cfg.incarnation, cname, sname);
    int rc = zt_seal_derive(s->cfg.secret, csalt, ssalt, binding, c2s, s2c);
    if (rc == ZT_OK) {
        zt_seal_destroy(&s->tx);
        zt_seal_destroy(&s->rx);
        s->tx = zt_seal_new(client ? c2s : s2c, client ? ZT_SEAL_C2S : ZT_SEAL_S2C);
        s->rx = zt_seal_new(client ? s2c : c2s, client ? ZT_SEAL_S2C : ZT_SEAL_C2S);
        rc = s->tx && s->rx ? ZT_OK : ZT_ENOMEM;
    }
    memset(c2s, 0, sizeof c2s);
    memset(s2c, 0, sizeof s2c);
    return rc;
}

/* The one-to-many key of server sname under salt: its sealer or opener. */
static zt_seal_t *s_shared_key(const zt_stream_cfg_t *cfg, const char *sname, const uint8_t *salt)
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
static void s_accept_extra(const char *ssalt, const char *bsalt, int64_t blast, char *out, size_t size)
{
    snprintf(out, size, "%s|%s|%lld", ssalt, bsalt, (long long) blast);
}

static int s_send_plain(void *sock, const uint8_t *id, size_t id_len, const zt_msg_t *m)
{
    zframe_t *h = zt_msg_encode(m);
    if (!h)
        return ZT_EINVAL;
    int rc = ZT_OK;
    if (id && zmq_send(sock, id, id_len, ZMQ_SNDMORE) < 0)
        rc = ZT_EIO;
    if (rc == ZT_OK && zmq_send(sock, zframe_data(h), zframe_size(h), 0) < 0)
        rc = ZT_EIO;
    zframe_destroy(&h);
    return rc;
}

/* Seals payload i of a message into a pooled buffer. */
typedef struct {
    zt_seal_t *tx;
    const uint8_t *aad;
    size_t aad_len;
    const void *src;
    size_t len;
    uint8_t *unit; /* number and tag out */
} s_fill_t;

static void s_put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t) (v >> (56 - 8 * i));
}

static uint64_t s_get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

static int s_fill(void *arg, void *buf)
{
    s_fill_t *f = arg;
    uint64_t k;
    int rc = zt_seal_close(f->tx, f->aad, f->aad_len, f->src, buf, f->len, &k, f->unit + 8);
    s_put64(f->unit, k);
    return rc == ZT_OK ? 0 : -1;
}

/* The associated data of sealed unit i of n: the header, then i and n (a
 * message cut short, or with a unit added, does not open). */
static size_t s_aad(const uint8_t *hdr, size_t hlen, int i, int n, uint8_t *out)
{
    memcpy(out, hdr, hlen);
    out[hlen] = (uint8_t) i;
    out[hlen + 1] = (uint8_t) n;
    return hlen + 2;
}

/* [id][header][seal][payload...]: each payload sealed from the caller's
 * bytes into a pooled buffer (none: one unit over the header alone). */
static int s_send_sealed(zt_stream_t *s, void *sock, const zt_msg_t *m, const void *const *payloads,
                         const size_t *sizes, int n)
{
    if (!s->tx)
        return ZT_EPROTO;
    if (n < 0 || n > MAX_PAYLOADS)
        return ZT_EINVAL;
    zframe_t *h = zt_msg_encode(m);
    if (!h)
        return ZT_EINVAL;
    size_t hlen = zframe_size(h);
    uint8_t units[MAX_PAYLOADS * SEAL_BYTES], aad[ZT_MSG_MAX_BYTES + 2];
    zmq_msg_t pm[MAX_PAYLOADS];
    int made = 0, rc = hlen <= ZT_MSG_MAX_BYTES ? ZT_OK : ZT_EINVAL;
    for (int i = 0; rc == ZT_OK && i < (n ? n : 1); i++) {
        s_fill_t f = { s->tx, aad, s_aad(zframe_data(h), hlen, i, n ? n : 1, aad), n ? payloads[i] : NULL,
                       n ? sizes[i] : 0, units + i * SEAL_BYTES };
        if (!n)
            rc = s_fill(&f, NULL) == 0 ? ZT_OK : ZT_EIO;
        else if (zt_bufpool_msg_with(s->pool, &pm[made], sizes[i], s_fill, &f) == 0)
            made++;
        else
            rc = ZT_EIO;
    }
    if (rc == ZT_OK && s->id_len && zmq_send(sock, s->id, s->id_len, ZMQ_SNDMORE) < 0)
        rc = ZT_EIO;
    if (rc == ZT_OK && (zmq_send(sock, zframe_data(h), hlen, ZMQ_SNDMORE) < 0 ||
                        zmq_send(sock, units, (size_t) (n ? n : 1) * SEAL_BYTES, n ? ZMQ_SNDMORE : 0) < 0))
        rc = ZT_EIO;
    for (int i = 0; i < made; i++)
        if (rc != ZT_OK || zmq_msg_send(&pm[i], sock, i + 1 < made ? ZMQ_SNDMORE : 0) < 0) {
            zmq_msg_close(&pm[i]);
            rc = ZT_EIO;
        }
    zframe_destroy(&h);
    return rc;
}

/* Opens [header][seal][payload...] in place, then drops the seal frame;
 * a failure is counted in drops (the stream's, or its server's). */
/* into: where a message with one payload of exactly into_len bytes is
 * opened instead of in place (NULL: in place). */
static int s_open(zt_stream_t *s, zt_stream_drops_t *drops, zmq_msg_t *parts, int *np, void *into, size_t into_len)
{
    int n = *np - 2;
    size_t hlen = zmq_msg_size(&parts[0]);
    if (n < 0 || n > MAX_PAYLOADS || hlen > ZT_MSG_MAX_BYTES ||
        zmq_msg_size(&parts[1]) != (size_t) (n ? n : 1) * SEAL_BYTES) {
        drops->malformed++;
        return ZT_EPROTO;
    }
    if (!s->rx) {
        drops->no_stream++;
        return ZT_EPROTO;
    }
    const uint8_t *units = zmq_msg_data(&parts[1]);
    uint8_t aad[ZT_MSG_MAX_BYTES + 2];
    for (int i = 0; i < (n ? n : 1); i++) {
        size_t alen = s_aad(zmq_msg_data(&parts[0]), hlen, i, n ? n : 1, aad);
        void *p = n ? zmq_msg_data(&parts[2 + i]) : NULL;
        size_t len = n ? zmq_msg_size(&parts[2 + i]) : 0;
        uint64_t k = s_get64(units + i * SEAL_BYTES);
        zt_seal_t *rx = k & SHARED_BIT ? s->brx : s->rx; /* a server's stream has no brx */
        k &= ~SHARED_BIT;
        if (!rx) {
            drops->bad_seal++;
            return ZT_EPROTO;
        }
        zmq_msg_t own; /* a frame whose bytes other messages share (inproc) is opened into a buffer of its own */
        bool there = into && n == 1 && len == into_len && len > 0; /* straight into the caller's buffer */
        bool shared = n && (there || zmq_msg_get(&parts[2 + i], ZMQ_SHARED) == 1);
        if (there)
            zmq_msg_init_data(&own, into, len, NULL, NULL); /* the caller's: never freed here */
        else if (shared)
            zmq_msg_init_size(&own, len);
        if (shared)
            p = zmq_msg_data(&own);
        int rc = zt_seal_open(rx, k, aad, alen, n ? zmq_msg_data(&parts[2 + i]) : NULL, p, len,
                              units + i * SEAL_BYTES + 8);
        if (shared) { /* (the old content let go; closed with the parts on a failure) */
            zmq_msg_move(&parts[2 + i], &own);
            zmq_msg_close(&own);
        }
        if (rc != ZT_OK) {
            if (k <= zt_seal_last(rx))
                drops->replayed++;
            else
                drops->bad_seal++;
            return ZT_EPROTO;
        }
    }
    zmq_msg_close(&parts[1]);
    memmove(&parts[1], &parts[2], (size_t) n * sizeof parts[0]);
    (*np)--;
    return ZT_OK;
}

/* ------------------------------------------------------------ client */

int zt_stream_reopen(zt_stream_t *self)
{
    zt_seal_destroy(&self->tx);
    zt_seal_destroy(&self->rx);
    zt_seal_destroy(&self->brx);
    if (zt_seal_random(self->salt, sizeof self->salt) != ZT_OK)
        return ZT_EIO;
    zt_msg_t m = { .type = ZT_MSG_SEAL_OPEN, .incarnation = self->cfg.incarnation };
    char salt[2 * ZT_SEAL_SALT_BYTES + 1], mac[65];
    uint8_t proof[32];
    zt_seal_hex(self->salt, sizeof self->salt, salt);
    s_proof(&self->cfg, "open", self->cfg.self, "", salt, "", proof);
    zt_seal_hex(proof, sizeof proof, mac);
    zt_msg_set_str(m.u.SEAL_OPEN.name, self->cfg.self);
    zt_msg_set_str(m.u.SEAL_OPEN.salt, salt);
    zt_msg_set_str(m.u.SEAL_OPEN.mac, mac);
    self->opened_ms = zt_now_ms();
    return s_send_plain(self->sock, NULL, 0, &m);
}

void zt_stream_reopen_stale(zt_stream_t *self, int ms)
{
    if (self && !zt_stream_ready(self) && zt_now_ms() - self->opened_ms >= ms)
        zt_stream_reopen(self);
}

int zt_stream_wait_ready(zt_stream_t *self, int timeout_ms)
{
    int64_t deadline = zt_now_ms() + timeout_ms;
    zmq_pollitem_t it = { self->sock, 0, ZMQ_POLLIN, 0 };
    while (!zt_stream_ready(self)) {
        if (zt_now_ms() >= deadline)
            return ZT_ETIMEDOUT;
        zt_stream_reopen_stale(self, 1000);
        if (zmq_poll(&it, 1, 100) <= 0)
            continue;
        zmq_msg_t parts[3];
        int np = zt_msg_recv_parts(self->sock, parts, 3);
        if (np > 0 && zt_stream_recv(self, parts, &np) == ZT_OK)
            zt_msg_close_parts(parts, np); /* only the opening's answer is expected */
    }
    return ZT_OK;
}

zsock_t *zt_stream_dealer(zt_plane_t plane, const char *endpoint, zt_stream_t **st)
{
    zt_stream_cfg_t cfg;
    bool seal = zt_stream_cfg_load(&cfg);
    zsock_t *d = zt_sock_dealer(seal ? ZT_PLANE_BULK : plane, endpoint);
    *st = d && seal && !zt_data_is_local(endpoint) ? zt_stream_connect(&cfg, zsock_resolve(d)) : NULL;
    memset(cfg.secret, 0, sizeof cfg.secret);
    if (d && seal && !zt_data_is_local(endpoint) && !*st)
        zt_sock_destroy(&d);
    return d;
}

zsock_t *zt_stream_router(zt_plane_t plane, const char *endpoint, int *port_p, zt_streams_t **streams)
{
    zt_stream_cfg_t cfg;
    bool seal = zt_stream_cfg_load(&cfg);
    zsock_t *r = zt_sock_router(seal ? ZT_PLANE_BULK : plane, endpoint, port_p);
    *streams = r && seal ? zt_streams_new(&cfg, zsock_resolve(r)) : NULL;
    memset(cfg.secret, 0, sizeof cfg.secret);
    return r;
}

zt_stream_t *zt_stream_connect(const zt_stream_cfg_t *cfg, void *dealer)
{
    zt_stream_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    self->cfg = *cfg;
    self->sock = dealer;
    self->pool = zt_bufpool_new();
    if (!self->pool || zt_stream_reopen(self) != ZT_OK)
        zt_stream_destroy(&self);
    return self;
}

void zt_stream_destroy(zt_stream_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zt_stream_t *self = *self_p;
    zt_seal_destroy(&self->tx);
    zt_seal_destroy(&self->rx);
    zt_seal_destroy(&self->brx);
    zt_bufpool_destroy(&self->pool);
    memset(self->cfg.secret, 0, sizeof self->cfg.secret);
    free(self);
    *self_p = NULL;
}

bool zt_stream_ready(const zt_stream_t *self) { return self && self->tx && self->rx; }
const char *zt_stream_peer(const zt_stream_t *self) { return self->peer; }
const zt_stream_drops_t *zt_stream_drops(const zt_stream_t *self) { return &self->drops; }

int zt_stream_send(zt_stream_t *self, const zt_msg_t *m, const void *payload, size_t bytes)
{
    const void *p[1] = { payload };
    return s_send_sealed(self, self->sock, m, p, &bytes, bytes || payload ? 1 : 0);
}

static void s_close(zmq_msg_t *parts, int *np)
{
    for (int i = 0; i < *np; i++)
        zmq_msg_close(&parts[i]);
    *np = 0;
}

/* The server's answer to our opening. */
static int s_accepted(zt_stream_t *self, const zt_msg_SEAL_ACCEPT_t *a)
{
    char csalt[2 * ZT_SEAL_SALT_BYTES + 1], extra[3 * ZT_MSG_STR_MAX];
    uint8_t ssalt[ZT_SEAL_SALT_BYTES], bsalt[ZT_SEAL_SALT_BYTES], mac[32], want[32];
    zt_seal_hex(self->salt, sizeof self->salt, csalt);
    if (!zt_seal_unhex(a->salt, ssalt, sizeof ssalt) || !zt_seal_unhex(a->mac, mac, sizeof mac) ||
        !zt_seal_unhex(a->bsalt, bsalt, sizeof bsalt) || a->blast < 0) {
        self->drops.malformed++;
        return ZT_EPROTO;
    }
    s_accept_extra(a->salt, a->bsalt, a->blast, extra, sizeof extra);
    s_proof(&self->cfg, "accept", self->cfg.self, a->name, csalt, extra, want);
    if (!zt_seal_mac_equal(mac, want)) {
        self->drops.bad_open++;
        return ZT_EPROTO;
    }
    snprintf(self->peer, sizeof self->peer, "%s", a->name);
    int rc = s_agree(self, true, self->cfg.self, a->name, self->salt, ssalt);
    if (rc == ZT_OK && (!(self->brx = s_shared_key(&self->cfg, a->name, bsalt)) ||
                        zt_seal_start_after(self->brx, (uint64_t) a->blast) != ZT_OK)) {
        zt_seal_destroy(&self->tx); /* not ready */
        zt_seal_destroy(&self->rx);
        zt_seal_destroy(&self->brx);
        rc = ZT_EPROTO;
    }
    return rc;
}

int zt_stream_recv(zt_stream_t *self, zmq_msg_t *parts, int *np)
{
    return zt_stream_recv_into(self, parts, np, NULL, 0);
}

int zt_stream_recv_into(zt_stream_t *self, zmq_msg_t *parts, int *np, void *into, size_t into_len)
{
    int rc = ZT_OK;
    if (*np >= 2) {
        if ((rc = s_open(self, &self->drops, parts, np, into, into_len)) != ZT_OK)
            s_close(parts, np);
        return rc;
    }
    zt_msg_t m;
    if (*np != 1 || zt_msg_decode(zmq_msg_data(&parts[0]), zmq_msg_size(&parts[0]), &m, NULL) != ZT_OK) {
        self->drops.malformed++;
        rc = ZT_EPROTO;
    }
    else if (m.type == ZT_MSG_SEAL_ACCEPT)
        rc = zt_stream_ready(self) ? ZT_EPROTO : s_accepted(self, &m.u.SEAL_ACCEPT);
    else if (m.type == ZT_MSG_SEAL_RESET) {
        /* unauthenticated, so it only makes us open again: a stranger can
         * cost a round trip, never a key */
        zt_debug("the server holds no stream of ours (%s): opening again", m.u.SEAL_RESET.reason);
        rc = zt_stream_ready(self) ? zt_stream_reopen(self) : ZT_OK;
    }
    else {
        self->drops.malformed++; /* a plain message on a sealed stream */
        rc = ZT_EPROTO;
    }
    s_close(parts, np);
    return rc;
}

/* ------------------------------------------------------------ server */

zt_streams_t *zt_streams_new(const zt_stream_cfg_t *cfg, void *router)
{
    zt_streams_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    self->cfg = *cfg;
    self->router = router;
    if (zt_seal_random(self->bsalt, sizeof self->bsalt) != ZT_OK ||
        !(self->btx = s_shared_key(cfg, cfg->self, self->bsalt)) || !(self->pool = zt_bufpool_new()))
        zt_streams_destroy(&self);
    return self;
}

void zt_streams_destroy(zt_streams_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zt_streams_t *self = *self_p;
    for (int i = 0; i < self->n; i++)
        zt_stream_destroy(&self->s[i]);
    free(self->s);
    zt_seal_destroy(&self->btx);
    zt_bufpool_destroy(&self->pool);
    memset(self->cfg.secret, 0, sizeof self->cfg.secret);
    free(self);
    *self_p = NULL;
}

const zt_stream_drops_t *zt_streams_drops(const zt_streams_t *self) { return &self->drops; }
int zt_streams_count(const zt_streams_t *self) { return self->n; }

static zt_stream_t *s_find(zt_streams_t *self, zmq_msg_t *id)
{
    for (int i = 0; i < self->n; i++)
        if (self->s[i]->id_len == zmq_msg_size(id) && !memcmp(self->s[i]->id, zmq_msg_data(id), self->s[i]->id_len))
            return self->s[i];
    return NULL;
}

/* A client's opening: checked, answered, and its stream (re)made. */
static int s_on_open(zt_streams_t *self, zmq_msg_t *id, const zt_msg_t *m)
{
    const zt_msg_SEAL_OPEN_t *o = &m->u.SEAL_OPEN;
    uint8_t csalt[ZT_SEAL_SALT_BYTES], mac[32], want[32];
    if (zmq_msg_size(id) > sizeof self->s[0]->id || !zt_seal_unhex(o->salt, csalt, sizeof csalt) ||
        !zt_seal_unhex(o->mac, mac, sizeof mac)) {
        self->drops.malformed++;
        return ZT_EPROTO;
    }
    s_proof(&self->cfg, "open", o->name, "", o->salt, "", want);
    if (m->incarnation != self->cfg.incarnation || !zt_seal_mac_equal(mac, want)) {
        self->drops.bad_open++;
        return ZT_EPROTO;
    }
    zt_stream_t *s = s_find(self, id);
    if (!s) {
        if (self->n == MAX_STREAMS) { /* the least recently used goes */
            int old = 0;
            for (int i = 1; i < self->n; i++)
                if (self->s[i]->used < self->s[old]->used)
                    old = i;
            zt_stream_destroy(&self->s[old]);
            self->s[old] = self->s[--self->n];
        }
        zt_stream_t **grown = realloc(self->s, (size_t) (self->n + 1) * sizeof *grown);
        s = grown ? calloc(1, sizeof *s) : NULL;
        if (grown)
            self->s = grown;
        if (!s || !(s->pool = zt_bufpool_new())) {
            free(s);
            return ZT_ENOMEM;
        }
        s->cfg = self->cfg;
        s->id_len = zmq_msg_size(id);
        memcpy(s->id, zmq_msg_data(id), s->id_len);
        self->s[self->n++] = s;
    }
    s->used = ++self->clock;
    snprintf(s->peer, sizeof s->peer, "%s", o->name);
    uint8_t ssalt[ZT_SEAL_SALT_BYTES], proof[32];
    char shex[2 * ZT_SEAL_SALT_BYTES + 1], phex[65];
    if (zt_seal_random(ssalt, sizeof ssalt) != ZT_OK)
        return ZT_EIO;
    zt_seal_hex(ssalt, sizeof ssalt, shex);
    char bhex[2 * ZT_SEAL_SALT_BYTES + 1], extra[256];
    zt_seal_hex(self->bsalt, sizeof self->bsalt, bhex);
    int64_t blast = (int64_t) zt_seal_last(self->btx);
    s_accept_extra(shex, bhex, blast, extra, sizeof extra);
    s_proof(&self->cfg, "accept", o->name, self->cfg.self, o->salt, extra, proof);
    zt_seal_hex(proof, sizeof proof, phex);
    int rc = s_agree(s, false, o->name, self->cfg.self, csalt, ssalt);
    zt_msg_t a = { .type = ZT_MSG_SEAL_ACCEPT, .incarnation = self->cfg.incarnation };
    zt_msg_set_str(a.u.SEAL_ACCEPT.name, self->cfg.self);
    zt_msg_set_str(a.u.SEAL_ACCEPT.salt, shex);
    zt_msg_set_str(a.u.SEAL_ACCEPT.mac, phex);
    zt_msg_set_str(a.u.SEAL_ACCEPT.bsalt, bhex);
    a.u.SEAL_ACCEPT.blast = blast;
    return rc == ZT_OK ? s_send_plain(self->router, s->id, s->id_len, &a) : rc;
}

int zt_streams_recv(zt_streams_t *self, zmq_msg_t *parts, int *np, zt_stream_t **from)
{
    *from = NULL;
    int rc = ZT_OK;
    if (*np < 2) {
        self->drops.malformed++;
        s_close(parts, np);
        return ZT_EPROTO;
    }
    if (*np == 2) { /* [id][opening] */
        zt_msg_t m;
        if (zt_msg_decode(zmq_msg_data(&parts[1]), zmq_msg_size(&parts[1]), &m, NULL) != ZT_OK ||
            m.type != ZT_MSG_SEAL_OPEN) {
            self->drops.malformed++;
            rc = ZT_EPROTO;
        }
        else
            rc = s_on_open(self, &parts[0], &m);
        s_close(parts, np);
        return rc;
    }
    zt_stream_t *s = s_find(self, &parts[0]);
    if (!s) {
        self->drops.no_stream++;
        zt_msg_t r = { .type = ZT_MSG_SEAL_RESET, .incarnation = self->cfg.incarnation };
        zt_msg_set_str(r.u.SEAL_RESET.reason, "no stream of this connection here: open one");
        s_send_plain(self->router, zmq_msg_data(&parts[0]), zmq_msg_size(&parts[0]), &r);
        s_close(parts, np);
        return ZT_EPROTO;
    }
    int left = *np - 1;
    rc = s_open(s, &self->drops, parts + 1, &left, NULL, 0);
    if (rc != ZT_OK) {
        s_close(parts, np);
        return rc;
    }
    *np = left + 1;
    s->used = ++self->clock;
    *from = s;
    return ZT_OK;
}

int zt_streams_send(zt_streams_t *self, zt_stream_t *to, const zt_msg_t *m, const void *payload, size_t bytes)
{
    const void *p[1] = { payload };
    return s_send_sealed(to, self->router, m, p, &bytes, bytes || payload ? 1 : 0);
}

int zt_streams_sendv(zt_streams_t *self, zt_stream_t *to, const zt_msg_t *m, const void *const *payloads,
                     const size_t *sizes, int n)
{
    return s_send_sealed(to, self->router, m, payloads, sizes, n);
}

zt_stream_t *zt_streams_find(zt_streams_t *self, zmq_msg_t *id) { return s_find(self, id); }

int zt_streams_seal_shared(zt_streams_t *self, const zt_msg_t *m, const void *payload, size_t bytes,
                           zt_stream_shared_t *sh)
{
    sh->made = false;
    zframe_t *h = zt_msg_encode(m);
    if (!h || zframe_size(h) > ZT_MSG_MAX_BYTES) {
        zframe_destroy(&h);
        return ZT_EINVAL;
    }
    uint8_t aad[ZT_MSG_MAX_BYTES + 2], unit[SEAL_BYTES];
    s_fill_t f = { self->btx, aad, s_aad(zframe_data(h), zframe_size(h), 0, 1, aad), payload, bytes, unit };
    if (zt_bufpool_msg_with(self->pool, &sh->f[2], bytes, s_fill, &f) != 0) {
        zframe_destroy(&h);
        return ZT_EIO;
    }
    s_put64(unit, s_get64(unit) | SHARED_BIT);
    zmq_msg_init_size(&sh->f[0], zframe_size(h));
    memcpy(zmq_msg_data(&sh->f[0]), zframe_data(h), zframe_size(h));
    zmq_msg_init_size(&sh->f[1], sizeof unit);
    memcpy(zmq_msg_data(&sh->f[1]), unit, sizeof unit);
    zframe_destroy(&h);
    sh->made = true;
    return ZT_OK;
}

int zt_streams_send_shared(zt_streams_t *self, zt_stream_t *to, zt_stream_shared_t *sh)
{
    if (!sh->made || zmq_send(self->router, to->id, to->id_len, ZMQ_SNDMORE) < 0)
        return ZT_EIO;
    int rc = ZT_OK;
    for (int i = 0; i < 3; i++) {
        zmq_msg_t c;
        zmq_msg_init(&c);
        zmq_msg_copy(&c, &sh->f[i]); /* the payload's buffer is shared, not copied */
        if (zmq_msg_send(&c, self->router, i < 2 ? ZMQ_SNDMORE : 0) < 0) {
            zmq_msg_close(&c);
            rc = ZT_EIO;
        }
    }
    return rc;
}

void zt_stream_shared_close(zt_stream_shared_t *sh)
{
    if (!sh->made)
        return;
    for (int i = 0; i < 3; i++)
        zmq_msg_close(&sh->f[i]);
    sh->made = false;
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

/* ------------------------------------------------------------ selftest */

/* Waits for one message on sock into parts; their count. */
static int s_wait(void *sock, zmq_msg_t *parts, int max)
{
    zmq_pollitem_t it = { sock, 0, ZMQ_POLLIN, 0 };
    for (int i = 0; i < 200; i++) {
        if (zmq_poll(&it, 1, 10) > 0)
            return zt_msg_recv_parts(sock, parts, max);
    }
    return 0;
}

/* A copy of n parts (to replay or tamper with). */
static void s_copy(zmq_msg_t *to, zmq_msg_t *from, int n)
{
    for (int i = 0; i < n; i++) {
        zmq_msg_init_size(&to[i], zmq_msg_size(&from[i]));
        memcpy(zmq_msg_data(&to[i]), zmq_msg_data(&from[i]), zmq_msg_size(&from[i]));
    }
}

/* Sealed once for two clients: each opens the same frames; a frame sealed
 * before a client joined, or sent it twice, is refused; a client cannot
 * seal under the server's one-to-many key. */
static void s_selftest_shared(void *ctx, void *r, zt_streams_t *srv, zt_stream_t *cl, void *d,
                              const zt_stream_cfg_t *cc, const zt_msg_t *mp, const float *x)
{
    zmq_msg_t p[8];
    int n;
    zt_msg_t m = *mp;
    void *d2 = zmq_socket(ctx, ZMQ_DEALER);
    assert(zmq_connect(d2, "inproc://zt-stream-selftest") == 0);
    zt_stream_cfg_t c2cfg = *cc;
    snprintf(c2cfg.self, sizeof c2cfg.self, "workerpool1-1");
    zt_stream_t *c2 = zt_stream_connect(&c2cfg, d2), *from2;
    zt_stream_shared_t early;
    zt_msg_t res = { .type = ZT_MSG_AR_RESULT, .pool = 2, .incarnation = 3 };
    res.u.AR_RESULT = (zt_msg_AR_RESULT_t) { .bucket = 1, .gen = 4, .offset = 0, .count = 16, .dtype = 0 };
    assert(zt_streams_seal_shared(srv, &res, x, 64, &early) == ZT_OK); /* before c2 is accepted */
    n = s_wait(r, p, 8);
    assert(n == 2 && zt_streams_recv(srv, p, &n, &from2) == ZT_OK && n == 0);
    n = s_wait(d2, p, 8);
    assert(n == 1 && zt_stream_recv(c2, p, &n) == ZT_OK && zt_stream_ready(c2));
    zt_stream_t *to1 = NULL, *to2 = NULL;
    for (int i = 0; i < zt_streams_count(srv); i++) {
        if (!strcmp(srv->s[i]->peer, "workerpool1-0"))
            to1 = srv->s[i];
        if (!strcmp(srv->s[i]->peer, "workerpool1-1"))
            to2 = srv->s[i];
    }
    assert(to1 && to2 && zt_streams_send_shared(srv, to2, &early) == ZT_OK);
    n = s_wait(d2, p, 8);
    assert(n == 3 && zt_stream_recv(c2, p, &n) == ZT_EPROTO && zt_stream_drops(c2)->replayed == 1);
    zt_stream_shared_close(&early);
    zt_stream_shared_t sh;
    assert(zt_streams_seal_shared(srv, &res, x, 64, &sh) == ZT_OK);
    for (int twice = 0; twice < 2; twice++) {
        assert(zt_streams_send_shared(srv, to1, &sh) == ZT_OK && zt_streams_send_shared(srv, to2, &sh) == ZT_OK);
        zt_stream_t *cls[2] = { cl, c2 };
        void *ds[2] = { d, d2 };
        for (int c = 0; c < 2; c++) {
            assert((n = s_wait(ds[c], p, 8)) == 3);
            int rc = zt_stream_recv(cls[c], p, &n);
            assert(twice ? rc == ZT_EPROTO && n == 0
                         : rc == ZT_OK && n == 2 && zmq_msg_size(&p[1]) == 64 && !memcmp(zmq_msg_data(&p[1]), x, 64));
            zt_msg_close_parts(p, n);
        }
    }
    zt_stream_shared_close(&sh);
    /* a client's frame marked as sealed under the one-to-many key */
    assert(zt_stream_send(cl, &m, x, 64) == ZT_OK);
    n = s_wait(r, p, 8);
    ((uint8_t *) zmq_msg_data(&p[2]))[0] |= 0x80;
    uint64_t bad = zt_streams_drops(srv)->bad_seal;
    assert(zt_streams_recv(srv, p, &n, &from2) == ZT_EPROTO && zt_streams_drops(srv)->bad_seal == bad + 1);
    zt_stream_destroy(&c2);
    zmq_close(d2);
}

/* An opening lost (the server took it and died, say): the client opens
 * again once it is stale, and only then; a ready stream never. */
static void s_selftest_stale(void *ctx, const zt_stream_cfg_t *cs, const zt_stream_cfg_t *cc)
{
    void *r = zmq_socket(ctx, ZMQ_ROUTER), *d = zmq_socket(ctx, ZMQ_DEALER);
    assert(zmq_bind(r, "inproc://zt-stream-stale") == 0 && zmq_connect(d, "inproc://zt-stream-stale") == 0);
    zt_streams_t *srv = zt_streams_new(cs, r);
    zt_stream_t *cl = zt_stream_connect(cc, d), *from;
    zmq_msg_t p[8];
    int n = s_wait(r, p, 8);
    assert(n == 2);
    zt_msg_close_parts(p, n); /* lost */
    zt_stream_reopen_stale(cl, 60000); /* not stale yet */
    zmq_pollitem_t it = { r, 0, ZMQ_POLLIN, 0 };
    assert(zmq_poll(&it, 1, 50) == 0);
    zt_stream_reopen_stale(cl, 0);
    n = s_wait(r, p, 8);
    assert(n == 2 && zt_streams_recv(srv, p, &n, &from) == ZT_OK);
    n = s_wait(d, p, 8);
    assert(n == 1 && zt_stream_recv(cl, p, &n) == ZT_OK && zt_stream_ready(cl));
    zt_stream_reopen_stale(cl, 0); /* ready: nothing */
    assert(zt_stream_ready(cl) && zmq_poll(&it, 1, 50) == 0);
    zt_stream_destroy(&cl);
    zt_streams_destroy(&srv);
    zmq_close(d);
    zmq_close(r);
}

/* A message of two payloads cut to one on the path (its second payload
 * and seal dropped): the first no longer opens; whole, it does. */
static void s_selftest_cut(void *d, zt_streams_t *srv, zt_stream_t *from, zt_stream_t *cl, const zt_msg_t *ack,
                           const float *x)
{
    const void *two[2] = { x, x + 16 };
    size_t sizes[2] = { 64, 64 };
    zmq_msg_t p[8], cut;
    assert(zt_streams_sendv(srv, from, ack, two, sizes, 2) == ZT_OK);
    int n = s_wait(d, p, 8);
    assert(n == 4 && zmq_msg_size(&p[1]) == 2 * SEAL_BYTES && zmq_msg_init_size(&cut, SEAL_BYTES) == 0);
    memcpy(zmq_msg_data(&cut), zmq_msg_data(&p[1]), SEAL_BYTES);
    zmq_msg_move(&p[1], &cut);
    zmq_msg_close(&cut);
    zmq_msg_close(&p[--n]); /* n 3 */
    uint64_t bad = zt_stream_drops(cl)->bad_seal;
    assert(zt_stream_recv(cl, p, &n) == ZT_EPROTO && n == 0 && zt_stream_drops(cl)->bad_seal == bad + 1);
    assert(zt_streams_sendv(srv, from, ack, two, sizes, 2) == ZT_OK && (n = s_wait(d, p, 8)) == 4);
    assert(zt_stream_recv(cl, p, &n) == ZT_OK && n == 3 && !memcmp(zmq_msg_data(&p[2]), x + 16, 64));
    zt_msg_close_parts(p, n);
}

/* Long on purpose: one client and server through a whole life (opening,
 * messages, replays and flipped bits, strangers, the server's restart),
 * each step relying on the state the last left. */
void zt_stream_selftest(void)
{
    void *ctx = zmq_ctx_new();
    void *r = zmq_socket(ctx, ZMQ_ROUTER), *d = zmq_socket(ctx, ZMQ_DEALER);
    assert(zmq_bind(r, "inproc://zt-stream-selftest") == 0 && zmq_connect(d, "inproc://zt-stream-selftest") == 0);
    zt_stream_cfg_t cs = { .job = "j", .incarnation = 3 }, cc;
    assert(zt_seal_random(cs.secret, sizeof cs.secret) == ZT_OK);
    cc = cs;
    snprintf(cs.self, sizeof cs.self, "workerpool2-0");
    snprintf(cc.self, sizeof cc.self, "workerpool1-0");
    zt_streams_t *srv = zt_streams_new(&cs, r);
    zt_stream_t *cl = zt_stream_connect(&cc, d), *from;
    assert(cl && !zt_stream_ready(cl));
    zmq_msg_t p[8], keep[8];
    int n = s_wait(r, p, 8);
    assert(n == 2 && zt_streams_recv(srv, p, &n, &from) == ZT_OK && n == 0 && zt_streams_count(srv) == 1);
    n = s_wait(d, p, 8);
    assert(n == 1 && zt_stream_recv(cl, p, &n) == ZT_OK && n == 0 && zt_stream_ready(cl));
    assert(!strcmp(zt_stream_peer(cl), "workerpool2-0"));

    /* a push with 1 MiB of payload, and the reply */
    size_t len = 1 << 20;
    float *x = malloc(len);
    for (size_t i = 0; i < len / 4; i++)
        x[i] = (float) i * 0.5f;
    zt_msg_t m = { .type = ZT_MSG_PS_PUSH, .pool = 1, .incarnation = 3 };
    m.u.PS_PUSH = (zt_msg_PS_PUSH_t) { .req = 7, .offset = 0, .count = (int64_t) (len / 4), .step = 1 };
    assert(zt_stream_send(cl, &m, x, len) == ZT_OK);
    assert((n = s_wait(r, p, 8)) == 4);
    s_copy(keep, p, n); /* the sealed frames as they came */
    assert(zt_streams_recv(srv, p, &n, &from) == ZT_OK && n == 3 && from);
    zt_msg_t got;
    assert(zt_msg_decode(zmq_msg_data(&p[1]), zmq_msg_size(&p[1]), &got, NULL) == ZT_OK && got.u.PS_PUSH.req == 7);
    assert(zmq_msg_size(&p[2]) == len && !memcmp(zmq_msg_data(&p[2]), x, len));
    zt_msg_close_parts(p, n);
    zt_msg_t ack = { .type = ZT_MSG_PS_ACK, .incarnation = 3 };
    ack.u.PS_ACK.req = 7;
    assert(zt_streams_send(srv, from, &ack, NULL, 0) == ZT_OK);
    n = s_wait(d, p, 8);
    assert(n == 2 && zt_stream_recv(cl, p, &n) == ZT_OK && n == 1);
    assert(zt_msg_decode(zmq_msg_data(&p[0]), zmq_msg_size(&p[0]), &got, NULL) == ZT_OK &&
           got.type == ZT_MSG_PS_ACK && got.u.PS_ACK.req == 7);
    zmq_msg_close(&p[0]);

    /* the same frames again: a replay, dropped */
    n = 4;
    assert(zt_streams_recv(srv, keep, &n, &from) == ZT_EPROTO && n == 0 && zt_streams_drops(srv)->replayed == 1);
    /* a flipped bit in a payload, in a header: dropped */
    for (int where = 2; where >= 1; where--) {
        assert(zt_stream_send(cl, &m, x, len) == ZT_OK);
        assert((n = s_wait(r, p, 8)) == 4);
        ((uint8_t *) zmq_msg_data(&p[where]))[zmq_msg_size(&p[where]) / 2] ^= 0x04;
        assert(zt_streams_recv(srv, p, &n, &from) == ZT_EPROTO && n == 0);
    }
    assert(zt_streams_drops(srv)->bad_seal == 2);
    /* and the stream goes on */
    assert(zt_stream_send(cl, &m, x, len) == ZT_OK);
    n = s_wait(r, p, 8);
    assert(zt_streams_recv(srv, p, &n, &from) == ZT_OK && n == 3 && !memcmp(zmq_msg_data(&p[2]), x, len));
    zt_msg_close_parts(p, n);

    s_selftest_cut(d, srv, from, cl, &ack, x);
    /* another job's secret, another incarnation: the opening fails */
    for (int k = 0; k < 2; k++) {
        zt_stream_cfg_t other = cc;
        if (k == 0)
            other.secret[0] ^= 1;
        else
            other.incarnation = 2;
        void *d2 = zmq_socket(ctx, ZMQ_DEALER);
        assert(zmq_connect(d2, "inproc://zt-stream-selftest") == 0);
        zt_stream_t *c2 = zt_stream_connect(&other, d2);
        n = s_wait(r, p, 8);
        assert(n == 2 && zt_streams_recv(srv, p, &n, &from) == ZT_EPROTO);
        assert(zt_streams_drops(srv)->bad_open == (uint64_t) k + 1 && zt_streams_count(srv) == 1);
        /* its sealed-looking frames (made under its own unagreed keys) are
         * of no stream: answered with SEAL_RESET */
        char junk[SEAL_BYTES] = { 0 };
        zmq_send(d2, "h", 1, ZMQ_SNDMORE);
        zmq_send(d2, junk, sizeof junk, 0);
        n = s_wait(r, p, 8);
        assert(n == 3 && zt_streams_recv(srv, p, &n, &from) == ZT_EPROTO);
        n = s_wait(d2, p, 8);
        assert(n == 1 && zt_msg_decode(zmq_msg_data(&p[0]), zmq_msg_size(&p[0]), &got, NULL) == ZT_OK &&
               got.type == ZT_MSG_SEAL_RESET);
        zmq_msg_close(&p[0]);
        zt_stream_destroy(&c2);
        zmq_close(d2);
    }

    s_selftest_shared(ctx, r, srv, cl, d, &cc, &m, x);
    s_selftest_stale(ctx, &cs, &cc);
    /* the server restarts (a new table): the client's next message gets
     * SEAL_RESET, it opens again, and goes on */
    zt_streams_destroy(&srv);
    srv = zt_streams_new(&cs, r);
    assert(zt_stream_send(cl, &m, x, 64) == ZT_OK);
    n = s_wait(r, p, 8);
    assert(zt_streams_recv(srv, p, &n, &from) == ZT_EPROTO && zt_streams_drops(srv)->no_stream == 1);
    n = s_wait(d, p, 8);
    assert(n == 1 && zt_stream_recv(cl, p, &n) == ZT_OK && !zt_stream_ready(cl)); /* opening again */
    n = s_wait(r, p, 8);
    assert(n == 2 && zt_streams_recv(srv, p, &n, &from) == ZT_OK);
    n = s_wait(d, p, 8);
    assert(n == 1 && zt_stream_recv(cl, p, &n) == ZT_OK && zt_stream_ready(cl));
    assert(zt_stream_send(cl, &m, x, 64) == ZT_OK);
    n = s_wait(r, p, 8);
    assert(zt_streams_recv(srv, p, &n, &from) == ZT_OK && n == 3 && !memcmp(zmq_msg_data(&p[2]), x, 64));
    zt_msg_close_parts(p, n);
    zt_msg_close_parts(keep, 4);
    free(x);
    zt_stream_destroy(&cl);
    zt_stream_destroy(&cl);
    zt_streams_destroy(&srv);
    zt_streams_destroy(&srv);
    zmq_close(d);
    zmq_close(r);
    zmq_ctx_term(ctx);
}
