#include "wire/zt_stream_internal.h"
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

/* ------------------------------------------------------------ helpers */

/* m alone, in the clear: on zmtp when given (no connection: ZT_EIO), else
 * on sock (to routing id id, when not NULL). */
static int s_send_plain(void *sock, zt_zmtp_t *zmtp, const uint8_t *id, size_t id_len, const zt_msg_t *m)
{
    zframe_t *h = zt_msg_encode(m);
    if (!h)
        return ZT_EINVAL;
    int rc = ZT_OK;
    if (zmtp)
        rc = zt_zmtp_sendv(zmtp, &(struct iovec) { zframe_data(h), zframe_size(h) }, NULL, 1);
    else if ((id && zmq_send(sock, id, id_len, ZMQ_SNDMORE) < 0) ||
             zmq_send(sock, zframe_data(h), zframe_size(h), 0) < 0)
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
    uint32_t kid;  /* the keys' id, put in the number */
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
    s_put64(f->unit, (k & NUMBER_MASK) | (uint64_t) f->kid << KID_SHIFT);
    return rc == ZT_OK && k <= NUMBER_MASK ? 0 : -1;
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

/* A client on a ZMTP end: a new connection (the first, or one after the
 * last broke) opens the stream again first: the server held the last
 * connection's. true when it did (the keys are not agreed yet). */
static bool s_fresh(zt_stream_t *s)
{
    return s && s->zmtp && zt_zmtp_poke(s->zmtp) && zt_stream_reopen(s) == ZT_OK;
}

void zt_stream_tend(zt_stream_t *self, zmq_pollitem_t *item)
{
    if (!self || !self->zmtp)
        return;
    zt_zmtp_flush(self->zmtp);
    s_fresh(self);
    if (item) {
        item->fd = zt_zmtp_poll_fd(self->zmtp);
        item->events = zt_zmtp_events(self->zmtp);
    }
}

/* The same message on a ZMTP end: each payload sealed into a buffer of
 * the end's (what the kernel does not take at once waits there, not in a
 * copy), then every frame written at once. */
static int s_send_sealed_zmtp(zt_stream_t *s, const uint8_t *hdr, size_t hlen, const void *const *payloads,
                              const size_t *sizes, int n)
{
    uint8_t units[MAX_PAYLOADS * SEAL_BYTES], aad[ZT_MSG_MAX_BYTES + 2];
    zmq_msg_t pm[MAX_PAYLOADS];
    struct iovec f[2 + MAX_PAYLOADS] = { { (void *) hdr, hlen }, { units, (size_t) (n ? n : 1) * SEAL_BYTES } };
    zmq_msg_t *own[2 + MAX_PAYLOADS] = { NULL, NULL }; /* the header and seal: copied only if they wait */
    int made = 0, rc = ZT_OK;
    for (int i = 0; rc == ZT_OK && i < (n ? n : 1); i++) {
        s_fill_t fl = { s->tx, aad, s_aad(hdr, hlen, i, n ? n : 1, aad), n ? payloads[i] : NULL, n ? sizes[i] : 0,
                        s->kid, units + i * SEAL_BYTES };
        if (!n)
            rc = s_fill(&fl, NULL) == 0 ? ZT_OK : ZT_EIO;
        else if (zt_zmtp_msg_with(s->zmtp, &pm[made], sizes[i], s_fill, &fl) == 0) {
            f[2 + made] = (struct iovec) { zmq_msg_data(&pm[made]), sizes[i] };
            own[2 + made] = &pm[made];
            made++;
        }
        else
            rc = ZT_EIO;
    }
    /* no connection, or it broke: lost, as on a DEALER whose server went
     * away; the callers' resend rules send it again on the next one */
    if (rc == ZT_OK && (rc = zt_zmtp_sendv(s->zmtp, f, own, 2 + n)) == ZT_EIO)
        rc = ZT_OK;
    for (int i = 0; i < made; i++)
        zmq_msg_close(&pm[i]);
    return rc;
}

/* [id][header][seal][payload...]: each payload sealed from the caller's
 * bytes into a pooled buffer (none: one unit over the header alone). */
static int s_send_sealed(zt_stream_t *s, void *sock, const zt_msg_t *m, const void *const *payloads,
                         const size_t *sizes, int n)
{
    s_fresh(s);
    if (!s->tx)
        return ZT_EPROTO;
    if (n < 0 || n > MAX_PAYLOADS)
        return ZT_EINVAL;
    zframe_t *h = zt_msg_encode(m);
    if (!h)
        return ZT_EINVAL;
    size_t hlen = zframe_size(h);
    if (s->zmtp) {
        int rc = hlen <= ZT_MSG_MAX_BYTES ? s_send_sealed_zmtp(s, zframe_data(h), hlen, payloads, sizes, n)
                                          : ZT_EINVAL;
        zframe_destroy(&h);
        return rc;
    }
    uint8_t units[MAX_PAYLOADS * SEAL_BYTES], aad[ZT_MSG_MAX_BYTES + 2];
    zmq_msg_t pm[MAX_PAYLOADS];
    int made = 0, rc = hlen <= ZT_MSG_MAX_BYTES ? ZT_OK : ZT_EINVAL;
    for (int i = 0; rc == ZT_OK && i < (n ? n : 1); i++) {
        s_fill_t f = { s->tx, aad, s_aad(zframe_data(h), hlen, i, n ? n : 1, aad), n ? payloads[i] : NULL,
                       n ? sizes[i] : 0, s->kid, units + i * SEAL_BYTES };
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
int zt_stream_open_parts(zt_stream_t *s, zt_stream_drops_t *drops, zmq_msg_t *parts, int *np, void *into,
                         size_t into_len)
{
    int n = *np - 2;
    size_t hlen = zmq_msg_size(&parts[0]);
    if (n < 0 || n > MAX_PAYLOADS || hlen > ZT_MSG_MAX_BYTES ||
        zmq_msg_size(&parts[1]) != (size_t) (n ? n : 1) * SEAL_BYTES) {
        drops->malformed++;
        return ZT_EPROTO;
    }
    if (!s->rx && !s->prx) {
        drops->no_stream++;
        return ZT_EPROTO;
    }
    const uint8_t *units = zmq_msg_data(&parts[1]);
    uint8_t aad[ZT_MSG_MAX_BYTES + 2];
    bool confirms = false; /* sealed under a server's pending keys */
    for (int i = 0; i < (n ? n : 1); i++) {
        size_t alen = s_aad(zmq_msg_data(&parts[0]), hlen, i, n ? n : 1, aad);
        void *p = n ? zmq_msg_data(&parts[2 + i]) : NULL;
        size_t len = n ? zmq_msg_size(&parts[2 + i]) : 0;
        uint64_t u = s_get64(units + i * SEAL_BYTES), k = u & NUMBER_MASK;
        bool newer = !(u & SHARED_BIT) && s->prx && (uint32_t) (u >> KID_SHIFT & KID_MASK) == s->pkid;
        zt_seal_t *rx = u & SHARED_BIT ? s->brx : newer ? s->prx : s->rx; /* a server's stream has no brx */
        confirms |= newer;
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
    if (confirms) { /* the client took our answer to its latest opening: its keys from now on */
        zt_seal_destroy(&s->tx);
        zt_seal_destroy(&s->rx);
        s->tx = s->ptx;
        s->rx = s->prx;
        s->ptx = s->prx = NULL;
        s->kid = s->pkid;
        snprintf(s->peer, sizeof s->peer, "%s", s->ppeer);
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
    zt_stream_proof(&self->cfg, "open", self->cfg.self, self->expect, salt, "", proof);
    zt_seal_hex(proof, sizeof proof, mac);
    zt_msg_set_str(m.u.SEAL_OPEN.name, self->cfg.self);
    zt_msg_set_str(m.u.SEAL_OPEN.server, self->expect);
    zt_msg_set_str(m.u.SEAL_OPEN.salt, salt);
    zt_msg_set_str(m.u.SEAL_OPEN.mac, mac);
    self->opened_ms = zt_now_ms();
    zt_zmtp_poke(self->zmtp);
    int rc = s_send_plain(self->sock, self->zmtp, NULL, 0, &m);
    return rc == ZT_EIO && self->zmtp ? ZT_OK : rc; /* no connection yet: opened again when one is made */
}

void zt_stream_reopen_stale(zt_stream_t *self, int ms)
{
    if (self && !zt_stream_ready(self) && zt_now_ms() - self->opened_ms >= ms)
        zt_stream_reopen(self);
}

void zt_stream_reopen_unheard(zt_stream_t *self, int ms)
{
    if (self && zt_stream_ready(self) && zt_now_ms() - self->heard_ms >= ms) {
        zt_debug("nothing from %s for %d ms: opening the stream again (it may have restarted)", self->peer, ms);
        zt_stream_reopen(self);
    }
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

zt_stream_t *zt_stream_connect(const zt_stream_cfg_t *cfg, void *dealer)
{
    char ep[300] = "", name[64] = "";
    size_t len = sizeof ep;
    if (zmq_getsockopt(dealer, ZMQ_LAST_ENDPOINT, ep, &len) == 0)
        zt_env_replica_at(ep, name, sizeof name);
    return zt_stream_connect_to(cfg, dealer, name);
}

/* A client's stream on dealer (its sends go from a pool of buffers) or on
 * zmtp (from a staging buffer of its own), opened at once. */
static zt_stream_t *s_client_open(const zt_stream_cfg_t *cfg, void *dealer, zt_zmtp_t *zmtp, const char *server)
{
    zt_stream_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    self->cfg = *cfg;
    self->sock = dealer;
    self->zmtp = zmtp;
    snprintf(self->expect, sizeof self->expect, "%s", server ? server : "");
    if ((dealer && !(self->pool = zt_bufpool_new())) || zt_stream_reopen(self) != ZT_OK)
        zt_stream_destroy(&self);
    return self;
}

zt_stream_t *zt_stream_connect_zmtp(const zt_stream_cfg_t *cfg, zt_zmtp_t *zmtp, const char *endpoint)
{
    char name[64] = "";
    zt_env_replica_at(endpoint, name, sizeof name);
    return s_client_open(cfg, NULL, zmtp, name);
}

zt_stream_t *zt_stream_connect_to(const zt_stream_cfg_t *cfg, void *dealer, const char *server)
{
    return s_client_open(cfg, dealer, NULL, server);
}

void zt_stream_destroy(zt_stream_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zt_stream_t *self = *self_p;
    zt_seal_destroy(&self->tx);
    zt_seal_destroy(&self->rx);
    zt_seal_destroy(&self->ptx);
    zt_seal_destroy(&self->prx);
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

void zt_stream_close_parts(zmq_msg_t *parts, int *np)
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
    zt_stream_accept_extra(a->salt, a->bsalt, a->blast, extra, sizeof extra);
    zt_stream_proof(&self->cfg, "accept", self->cfg.self, a->name, csalt, extra, want);
    if (!zt_seal_mac_equal(mac, want) || (self->expect[0] && strcmp(a->name, self->expect))) {
        self->drops.bad_open++; /* forged, or another server of the job than the one asked for */
        return ZT_EPROTO;
    }
    snprintf(self->peer, sizeof self->peer, "%s", a->name);
    self->kid = zt_stream_kid(ssalt);
    self->heard_ms = zt_now_ms();
    int rc = zt_stream_agree(&self->cfg, true, self->cfg.self, a->name, self->salt, ssalt, &self->tx, &self->rx);
    if (rc == ZT_OK && (!(self->brx = zt_stream_shared_key(&self->cfg, a->name, bsalt)) ||
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
        if ((rc = zt_stream_open_parts(self, &self->drops, parts, np, into, into_len)) != ZT_OK)
            zt_stream_close_parts(parts, np);
        else
            self->heard_ms = zt_now_ms();
        return rc;
    }
    zt_msg_t m;
    if (*np != 1 || zt_msg_decode(zmq_msg_data(&parts[0]), zmq_msg_size(&parts[0]), &m, NULL) != ZT_OK) {
        self->drops.malformed++;
        rc = ZT_EPROTO;
    }
    else if (m.type == ZT_MSG_SEAL_ACCEPT) /* (ready: the answer to an opening replayed on the path) */
        rc = zt_stream_ready(self) ? ZT_EPROTO : s_accepted(self, &m.u.SEAL_ACCEPT);
    else {
        self->drops.malformed++; /* a plain message on a sealed stream */
        rc = ZT_EPROTO;
    }
    zt_stream_close_parts(parts, np);
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
        !(self->btx = zt_stream_shared_key(cfg, cfg->self, self->bsalt)) || !(self->pool = zt_bufpool_new()))
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


/* The stream of routing id id; confirmed: only one whose keys a message
 * of the client's confirmed. */
zt_stream_t *zt_streams_lookup(zt_streams_t *self, zmq_msg_t *id, bool confirmed)
{
    for (int i = 0; i < self->n; i++)
        if (self->s[i]->id_len == zmq_msg_size(id) && !memcmp(self->s[i]->id, zmq_msg_data(id), self->s[i]->id_len))
            return !confirmed || self->s[i]->tx ? self->s[i] : NULL;
    return NULL;
}

/* A stream for routing id id, made when there is none: when the table is
 * full, one that was never confirmed goes first, else the least recently
 * used (so a stranger's replayed openings push out only each other). */
static zt_stream_t *s_find_or_make(zt_streams_t *self, zmq_msg_t *id)
{
    zt_stream_t *s = zt_streams_lookup(self, id, false);
    if (s)
        return s;
    if (self->n == MAX_STREAMS) {
        int old = 0;
        for (int i = 1; i < self->n; i++)
            if ((!self->s[i]->tx && self->s[old]->tx) ||
                (!self->s[i]->tx == !self->s[old]->tx && self->s[i]->used < self->s[old]->used))
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
        return NULL;
    }
    s->cfg = self->cfg;
    s->id_len = zmq_msg_size(id);
    memcpy(s->id, zmq_msg_data(id), s->id_len);
    s->zmtp = self->end_of ? self->end_of(self->end_arg, s->id, s->id_len) : NULL;
    self->s[self->n++] = s;
    return s;
}

/* A client's opening: checked and answered; its keys are the stream's
 * pending ones until the client's first message under them (the keys it
 * holds, if any, serve until then). */
static int s_on_open(zt_streams_t *self, zmq_msg_t *id, const zt_msg_t *m)
{
    const zt_msg_SEAL_OPEN_t *o = &m->u.SEAL_OPEN;
    uint8_t csalt[ZT_SEAL_SALT_BYTES], mac[32], want[32];
    if (zmq_msg_size(id) > sizeof self->s[0]->id || !zt_seal_unhex(o->salt, csalt, sizeof csalt) ||
        !zt_seal_unhex(o->mac, mac, sizeof mac)) {
        self->drops.malformed++;
        return ZT_EPROTO;
    }
    zt_stream_proof(&self->cfg, "open", o->name, o->server, o->salt, "", want);
    if (m->incarnation != self->cfg.incarnation || !zt_seal_mac_equal(mac, want) ||
        (o->server[0] && strcmp(o->server, self->cfg.self))) {
        self->drops.bad_open++; /* forged, or meant for another server of the job */
        zt_stream_other_cipher(&self->cfg, &self->told_cipher_ms, o, mac);
        return ZT_EPROTO;
    }
    zt_stream_t *s = s_find_or_make(self, id);
    if (!s)
        return ZT_ENOMEM;
    s->used = ++self->clock;
    uint8_t ssalt[ZT_SEAL_SALT_BYTES], proof[32];
    char shex[2 * ZT_SEAL_SALT_BYTES + 1], phex[65];
    do {
        if (zt_seal_random(ssalt, sizeof ssalt) != ZT_OK)
            return ZT_EIO;
    } while (s->tx && zt_stream_kid(ssalt) == s->kid);
    zt_seal_hex(ssalt, sizeof ssalt, shex);
    char bhex[2 * ZT_SEAL_SALT_BYTES + 1], extra[256];
    zt_seal_hex(self->bsalt, sizeof self->bsalt, bhex);
    int64_t blast = (int64_t) zt_seal_last(self->btx);
    zt_stream_accept_extra(shex, bhex, blast, extra, sizeof extra);
    zt_stream_proof(&self->cfg, "accept", o->name, self->cfg.self, o->salt, extra, proof);
    zt_seal_hex(proof, sizeof proof, phex);
    int rc = zt_stream_agree(&self->cfg, false, o->name, self->cfg.self, csalt, ssalt, &s->ptx, &s->prx);
    s->pkid = zt_stream_kid(ssalt);
    snprintf(s->ppeer, sizeof s->ppeer, "%s", o->name);
    if (!s->tx) /* a new stream: named now (its messages still wait for the confirmation) */
        snprintf(s->peer, sizeof s->peer, "%s", o->name);
    zt_msg_t a = { .type = ZT_MSG_SEAL_ACCEPT, .incarnation = self->cfg.incarnation };
    zt_msg_set_str(a.u.SEAL_ACCEPT.name, self->cfg.self);
    zt_msg_set_str(a.u.SEAL_ACCEPT.salt, shex);
    zt_msg_set_str(a.u.SEAL_ACCEPT.mac, phex);
    zt_msg_set_str(a.u.SEAL_ACCEPT.bsalt, bhex);
    a.u.SEAL_ACCEPT.blast = blast;
    return rc == ZT_OK ? s_send_plain(self->router, s->zmtp, s->id, s->id_len, &a) : rc;
}

int zt_streams_recv(zt_streams_t *self, zmq_msg_t *parts, int *np, zt_stream_t **from)
{
    return zt_streams_recv_into(self, parts, np, from, NULL, 0);
}

int zt_streams_recv_into(zt_streams_t *self, zmq_msg_t *parts, int *np, zt_stream_t **from, void *into,
                         size_t into_len)
{
    *from = NULL;
    int rc = ZT_OK;
    if (*np < 2) {
        self->drops.malformed++;
        zt_stream_close_parts(parts, np);
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
        zt_stream_close_parts(parts, np);
        return rc;
    }
    zt_stream_t *s = zt_streams_lookup(self, &parts[0], false);
    if (!s) { /* not a word to whoever it is: a client that restarted us finds out by our silence */
        self->drops.no_stream++;
        zt_stream_close_parts(parts, np);
        return ZT_EPROTO;
    }
    int left = *np - 1;
    rc = zt_stream_open_parts(s, &self->drops, parts + 1, &left, into, into_len);
    if (rc != ZT_OK) {
        zt_stream_close_parts(parts, np);
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

zt_stream_t *zt_streams_find(zt_streams_t *self, zmq_msg_t *id) { return zt_streams_lookup(self, id, true); }

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
    s_fill_t f = { self->btx, aad, s_aad(zframe_data(h), zframe_size(h), 0, 1, aad), payload, bytes, 0, unit };
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
    if (sh->made && to->zmtp) { /* written straight from the shared frames */
        struct iovec f[3];
        zmq_msg_t *own[3];
        for (int i = 0; i < 3; i++) {
            f[i] = (struct iovec) { zmq_msg_data(&sh->f[i]), zmq_msg_size(&sh->f[i]) };
            own[i] = &sh->f[i];
        }
        zt_zmtp_sendv(to->zmtp, f, own, 3); /* a broken connection: lost, its server closes it */
        return ZT_OK;
    }
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

void zt_streams_set_ends(zt_streams_t *self, zt_zmtp_t *(*end_of)(void *, const void *, size_t), void *arg)
{
    self->end_of = end_of;
    self->end_arg = arg;
}

void zt_streams_forget(zt_streams_t *self, const void *id, size_t len)
{
    for (int i = 0; i < self->n; i++)
        if (self->s[i]->id_len == len && !memcmp(self->s[i]->id, id, len)) {
            zt_stream_destroy(&self->s[i]);
            self->s[i] = self->s[--self->n];
            return;
        }
}

void zt_stream_shared_close(zt_stream_shared_t *sh)
{
    if (!sh->made)
        return;
    for (int i = 0; i < 3; i++)
        zmq_msg_close(&sh->f[i]);
    sh->made = false;
}
