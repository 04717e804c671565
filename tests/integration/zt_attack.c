/* What a stranger can send to a job's sockets, knowing only their
 * endpoints: the security tests run it as another local user. Each attack
 * prints one line per message with the answer it got ("refused: ..." or
 * "accepted") and exits 0 when every message was refused, 1 otherwise
 * (3 when the target never answered).
 *
 *   zt_attack ps-ranges ENDPOINT ROUNDS     overflowing pulls and pushes
 *   zt_attack reducer-layout ENDPOINT       oversized layouts (to a fresh reducer)
 *   zt_attack reducer-pieces ENDPOINT ROUNDS  overflowing pieces
 *   zt_attack ps-nan ENDPOINT ROUNDS        NaN and infinite gradients at the shard's start
 *   zt_attack reducer-nan ENDPOINT ROUNDS   NaN pieces at the chunk's start
 *   zt_attack file-get ENDPOINT PATH...     files from a file server (the chief's)
 *   zt_attack ps-shm ENDPOINT REGION...     pushes whose bytes are "in" the named /dev/shm regions
 *   zt_attack register ENDPOINT POOL INDEX  REGISTER as that replica, then a metric accuracy=0.999
 *   zt_attack ps-steal ENDPOINT             a snapshot request (every value of the shard), then a
 *                                           configuration of another model (to make the workers fail)
 *   zt_attack seal-open ENDPOINT            opens a sealed stream to a bulk socket: with a replica's
 *                                           credentials the job's secret, else a secret of its own
 *                                           (another job's); ZT_ATTACK_INCARNATION: as that incarnation.
 *                                           Accepted, it sends a sealed NaN piece
 *   zt_attack storm SECONDS ENDPOINT...     a CURVE handshake storm: 40 sockets per endpoint with
 *                                           random keys, reconnecting every 10 ms, for SECONDS
 *
 * How it connects: with ZT_CREDENTIALS set (an insider holding a replica's
 * keys), as that replica, through ztrain's own transport; with
 * ZT_ATTACK_SERVERKEY (the job's server public key, leaked), as a CURVE
 * client with a key pair of its own; otherwise with a plain socket. A
 * target that does not answer the first message is given up (the rest
 * count as unanswered): a job's sockets do not talk to strangers. */
#include "wire/zt_msg.h"
#include "wire/zt_transport.h"
#include "wire/zt_stream.h"
#include "ztrain/zt_error.h"
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int s_refused, s_accepted, s_silent, s_leaked;
static bool s_deaf; /* the target never answered: nothing more is sent */

/* Sends header (+ payload) and waits for its answer. Other traffic that
 * reaches the stranger meanwhile (a sum meant for the worker whose index it
 * claimed) is counted as leaked, not taken for the answer. */
static void s_try(zsock_t *d, const char *what, const zt_msg_t *m, const void *payload, size_t bytes)
{
    if (s_deaf) {
        s_silent++;
        return;
    }
    zframe_t *h = zt_msg_encode(m);
    zframe_send(&h, d, payload ? ZFRAME_MORE : 0);
    if (payload) {
        zframe_t *p = zframe_new(payload, bytes);
        zframe_send(&p, d, 0);
    }
    for (;;) {
        zmsg_t *reply = zmsg_recv(d);
        if (!reply) {
            printf("%s: no answer\n", what);
            s_silent++;
            s_deaf = true;
            return;
        }
        zframe_t *rh = zmsg_first(reply);
        zt_msg_t r;
        int rc = zt_msg_decode(zframe_data(rh), zframe_size(rh), &r, NULL);
        if (rc == ZT_OK && (r.type == ZT_MSG_AR_RESULT || r.type == ZT_MSG_AR_RESEND)) {
            s_leaked++;
            zmsg_destroy(&reply);
            continue;
        }
        if (rc == ZT_OK && (r.type == ZT_MSG_PS_ERROR || r.type == ZT_MSG_AR_ERROR)) {
            printf("%s: refused: %s\n", what, r.type == ZT_MSG_PS_ERROR ? r.u.PS_ERROR.text : r.u.AR_ERROR.text);
            s_refused++;
        }
        else {
            printf("%s: accepted (%s)\n", what, rc == ZT_OK ? zt_msg_type_name(r.type) : "undecodable");
            s_accepted++;
        }
        zmsg_destroy(&reply);
        return;
    }
}

static void s_ps_ranges(zsock_t *d, int rounds)
{
    const int64_t wild[3][2] = { { 1, INT64_MAX }, { (int64_t) 1 << 62, ((int64_t) 1 << 62) + 1 },
                                 { INT64_MAX - 2, 4 } };
    float four = 1.0f;
    for (int k = 0; k < rounds; k++) {
        for (int i = 0; i < 3; i++) {
            zt_msg_t m = { .type = ZT_MSG_PS_PULL, .pool = 1, .index = 0 };
            m.u.PS_PULL = (zt_msg_PS_PULL_t) { .req = 1, .offset = wild[i][0], .count = wild[i][1] };
            s_try(d, "pull", &m, NULL, 0);
            m.type = ZT_MSG_PS_PUSH;
            m.u.PS_PUSH = (zt_msg_PS_PUSH_t) { .req = 2, .offset = wild[i][0], .count = wild[i][1] };
            s_try(d, "push", &m, &four, sizeof four);
        }
        zclock_sleep(300);
    }
}

static void s_reducer_layout(zsock_t *d)
{
    const char *huge[2] = { "{\"tensors\": [{\"name\": \"g\", \"shape\": [1099511627776], \"dtype\": 0}], "
                            "\"threshold\": 1048576, \"piece_bytes\": 131072}",
                            "{\"tensors\": [{\"name\": \"g\", \"shape\": [4294967296, 4294967297], \"dtype\": 0}], "
                            "\"threshold\": 1048576, \"piece_bytes\": 131072}" };
    for (int i = 0; i < 2; i++) {
        zt_msg_t m = { .type = ZT_MSG_AR_HELLO, .pool = 1, .index = 200 };
        m.u.AR_HELLO = (zt_msg_AR_HELLO_t) { .req = 1, .workers = 1 };
        s_try(d, "layout", &m, huge[i], strlen(huge[i]));
    }
}

static void s_reducer_pieces(zsock_t *d, int rounds)
{
    const int64_t wild[3][2] = { { INT64_MAX - 2, 4 }, { 1, INT64_MAX }, { (int64_t) 1 << 62, ((int64_t) 1 << 62) + 1 } };
    float four = 1.0f;
    for (int k = 0; k < rounds; k++) {
        for (int i = 0; i < 3; i++) {
            zt_msg_t m = { .type = ZT_MSG_AR_PIECE, .pool = 1, .index = 0 };
            m.u.AR_PIECE = (zt_msg_AR_PIECE_t) { .bucket = 0, .gen = 0, .offset = wild[i][0], .count = wild[i][1] };
            s_try(d, "piece", &m, &four, sizeof four);
        }
        zclock_sleep(300);
    }
}

/* 16 gradients, one of them NaN or infinite, at element 0 (the first
 * server's shard and the first reducer's chunk start there). */
static void s_nan(zsock_t *d, bool reducer, int rounds)
{
    float g[16];
    for (int k = 0; k < rounds; k++) {
        for (int v = 0; v < 2; v++) {
            for (int i = 0; i < 16; i++)
                g[i] = 0.5f;
            g[3 + v] = v ? __builtin_inff() : __builtin_nanf("");
            zt_msg_t m = { .pool = 1, .index = 0 };
            if (reducer) {
                m.type = ZT_MSG_AR_PIECE;
                m.u.AR_PIECE = (zt_msg_AR_PIECE_t) { .bucket = 0, .gen = 0, .offset = 0, .count = 16 };
            }
            else {
                m.type = ZT_MSG_PS_PUSH;
                m.u.PS_PUSH = (zt_msg_PS_PUSH_t) { .req = 3, .offset = 0, .count = 16 };
            }
            s_try(d, v ? "infinity" : "nan", &m, g, sizeof g);
        }
        zclock_sleep(200);
    }
}

/* FILE_GET of each path: refused (denied, not found) or served. */
static void s_file_get(zsock_t *d, char **paths, int n)
{
    for (int i = 0; i < n; i++) {
        zt_msg_t m = { .type = ZT_MSG_FILE_GET, .pool = 3, .index = 0 };
        m.u.FILE_GET = (zt_msg_FILE_GET_t) { .req = i + 1, .offset = 0, .length = 4096 };
        zt_msg_set_str(m.u.FILE_GET.path, paths[i]);
        zframe_t *h = zt_msg_encode(&m);
        if (s_deaf) {
            s_silent++;
            continue;
        }
        zframe_send(&h, d, 0);
        zmsg_t *reply = zmsg_recv(d);
        if (!reply) {
            printf("%s: no answer\n", paths[i]);
            s_silent++;
            s_deaf = true;
            continue;
        }
        zframe_t *rh = zmsg_first(reply);
        zt_msg_t r;
        if (zt_msg_decode(zframe_data(rh), zframe_size(rh), &r, NULL) == ZT_OK && r.type == ZT_MSG_FILE_DATA &&
            r.u.FILE_DATA.code != 0) {
            printf("%s: refused: %s\n", paths[i], r.u.FILE_DATA.code == ZT_FILE_DENIED ? "denied" : "not found");
            s_refused++;
        }
        else {
            printf("%s: served (%lld bytes)\n", paths[i], (long long) r.u.FILE_DATA.size);
            s_accepted++;
        }
        zmsg_destroy(&reply);
    }
}

/* A push of 4 values said to lie at offset 0 of each named region. */
static void s_ps_shm(zsock_t *d, char **names, int n)
{
    for (int i = 0; i < n; i++) {
        zt_msg_t m = { .type = ZT_MSG_PS_PUSH, .pool = 1, .index = 0 };
        m.u.PS_PUSH = (zt_msg_PS_PUSH_t) { .req = 4, .offset = 0, .count = 4 };
        zt_msg_set_str(m.u.PS_PUSH.shm, names[i]);
        s_try(d, names[i], &m, NULL, 0);
    }
}

/* What a stranger tried on a parameter server: take the model (a snapshot
 * of the shard) and configure it first with a model of its own. Any
 * answer at all counts as accepted here. */
static void s_ps_steal(zsock_t *d)
{
    zt_msg_t m = { .type = ZT_MSG_PS_SNAPSHOT, .pool = 0, .index = 0 };
    m.u.PS_SNAPSHOT = (zt_msg_PS_SNAPSHOT_t) { .req = 1, .step = 1 };
    s_try(d, "snapshot", &m, NULL, 0);
    const char *cfg = "{\"tensors\":[{\"name\":\"x\",\"numel\":4,\"offset\":0,\"scale\":0.5}],\"total\":4,"
                      "\"workers\":1,\"servers\":1,\"seed\":1,\"sync\":false,\"max_staleness\":-1,"
                      "\"optimizer\":{\"kind\":\"sgd\",\"lr\":0.1}}";
    m = (zt_msg_t) { .type = ZT_MSG_PS_CONFIG, .pool = 1, .index = 0 };
    m.u.PS_CONFIG = (zt_msg_PS_CONFIG_t) { .req = 2, .total = 4, .hash = 1 };
    s_try(d, "configure", &m, cfg, strlen(cfg));
}

/* REGISTER as replica pool-index, then a fake metric: WELCOME would be a
 * hijack (accepted); silence is what an impostor must get. */
static void s_register(zsock_t *d, int pool, int index)
{
    zt_msg_t m = { .type = ZT_MSG_REGISTER, .pool = pool, .index = index };
    zt_msg_set_str(m.u.REGISTER.role, "worker");
    m.u.REGISTER.pid = 1;
    zt_msg_set_str(m.u.REGISTER.address, "127.0.0.1:1");
    zframe_t *h = zt_msg_encode(&m);
    zframe_send(&h, d, 0);
    zt_msg_t f = { .type = ZT_MSG_METRIC, .pool = pool, .index = index };
    zt_msg_set_str(f.u.METRIC.name, "accuracy");
    f.u.METRIC.value = 0.999;
    h = zt_msg_encode(&f);
    zframe_send(&h, d, 0);
    zmsg_t *reply = zmsg_recv(d);
    if (!reply) {
        printf("register as workerpool%d-%d: no answer\n", pool, index);
        s_silent++;
        return;
    }
    zframe_t *rh = zmsg_first(reply);
    zt_msg_t r;
    int rc = zt_msg_decode(zframe_data(rh), zframe_size(rh), &r, NULL);
    printf("register as workerpool%d-%d: accepted (%s)\n", pool, index, rc == ZT_OK ? zt_msg_type_name(r.type) : "undecodable");
    s_accepted++;
    zmsg_destroy(&reply);
}

/* The stranger's socket: see the top of this file. An insider reaches a
 * parameter server, a reducer or a file server as a replica of its job does: a bulk
 * socket when the job seals its bulk data (over this host's ipc twin, plain), else CURVE. */
static zsock_t *s_connect(const char *endpoint, bool bulk)
{
    zt_stream_cfg_t cfg;
    if (getenv("ZT_CREDENTIALS"))
        return zt_sock_dealer(bulk && zt_stream_cfg_load(&cfg) ? ZT_PLANE_BULK : ZT_PLANE_CONTROL, endpoint);
    zsock_t *d = zsock_new(ZMQ_DEALER);
    const char *server_key = getenv("ZT_ATTACK_SERVERKEY");
    if (d && server_key) {
        char pub[41], sec[41];
        zmq_curve_keypair(pub, sec);
        zsock_set_curve_serverkey(d, server_key);
        zsock_set_curve_publickey(d, pub);
        zsock_set_curve_secretkey(d, sec);
    }
    if (d && zsock_connect(d, "%s", endpoint) != 0)
        zsock_destroy(&d);
    return d;
}

/* The storm: every socket a CURVE client with a key pair and a server key
 * of its own (a stranger knows neither the job's), so each connection is a
 * handshake the server must refuse; libzmq reconnects every 10 ms. */
static int s_storm(int seconds, char **endpoints, int n)
{
    enum { PER_ENDPOINT = 40 };
    zsock_t **socks = calloc((size_t) n * PER_ENDPOINT, sizeof *socks);
    if (!socks)
        return 2;
    int made = 0;
    for (int e = 0; e < n; e++)
        for (int i = 0; i < PER_ENDPOINT; i++) {
            char pub[41], sec[41], spub[41], ssec[41];
            zmq_curve_keypair(pub, sec);
            zmq_curve_keypair(spub, ssec);
            zsock_t *d = zsock_new(ZMQ_DEALER);
            if (!d)
                continue;
            zsock_set_curve_serverkey(d, spub);
            zsock_set_curve_publickey(d, pub);
            zsock_set_curve_secretkey(d, sec);
            zsock_set_reconnect_ivl(d, 10);
            zsock_set_reconnect_ivl_max(d, 10);
            zsock_set_linger(d, 0);
            if (zsock_connect(d, "%s", endpoints[e]) != 0) {
                zsock_destroy(&d);
                continue;
            }
            socks[made++] = d;
        }
    printf("storm: %d sockets on %d endpoints for %d s\n", made, n, seconds);
    fflush(stdout);
    zclock_sleep(seconds * 1000);
    for (int i = 0; i < made; i++)
        zsock_destroy(&socks[i]);
    free(socks);
    return made ? 0 : 2;
}

/* seal-open: a sealed stream's opening under the job's secret (an insider)
 * or another (a stranger's own), for this incarnation or another. Only the
 * job's secret and incarnation are answered; then a sealed NaN piece. */
static void s_seal_open(const char *endpoint)
{
    zt_stream_cfg_t cfg;
    if (!zt_stream_cfg_load(&cfg)) {
        memset(&cfg, 0, sizeof cfg);
        zt_seal_random(cfg.secret, sizeof cfg.secret);
        snprintf(cfg.job, sizeof cfg.job, "ztrain");
        snprintf(cfg.self, sizeof cfg.self, "workerpool1-0");
    }
    if (getenv("ZT_ATTACK_INCARNATION"))
        cfg.incarnation = atoll(getenv("ZT_ATTACK_INCARNATION"));
    zsock_t *d = zsock_new(ZMQ_DEALER);
    zsock_set_linger(d, 0);
    if (!d || zsock_connect(d, "%s", endpoint) != 0) {
        zsock_destroy(&d);
        s_silent++;
        return;
    }
    zt_stream_t *st = zt_stream_connect(&cfg, zsock_resolve(d));
    zmq_pollitem_t it = { zsock_resolve(d), 0, ZMQ_POLLIN, 0 };
    const char *wait = getenv("ZT_ATTACK_WAIT_MS");
    if (st && zmq_poll(&it, 1, wait ? atoi(wait) : 5000) > 0) {
        zmq_msg_t parts[4];
        int np = zt_msg_recv_parts(zsock_resolve(d), parts, 4);
        zt_stream_recv(st, parts, &np);
        zt_msg_close_parts(parts, np);
    }
    if (!zt_stream_ready(st)) {
        printf("open: no acceptance (incarnation %lld)\n", (long long) cfg.incarnation);
        s_silent++;
    }
    else {
        float g[16] = { __builtin_nanf("") };
        zt_msg_t m = { .type = ZT_MSG_AR_PIECE, .pool = 1, .index = 0 };
        m.u.AR_PIECE = (zt_msg_AR_PIECE_t) { .bucket = 0, .gen = 0, .offset = 0, .count = 16 };
        zt_stream_send(st, &m, g, sizeof g);
        printf("open: accepted (incarnation %lld)\n", (long long) cfg.incarnation);
        s_accepted++;
    }
    zt_stream_destroy(&st);
    zsock_destroy(&d);
}

int main(int argc, char **argv)
{
    if (argc > 3 && !strcmp(argv[1], "storm"))
        return s_storm(atoi(argv[2]), argv + 3, argc - 3);
    if (argc < 3) {
        fprintf(stderr, "usage: zt_attack ps-ranges ENDPOINT ROUNDS | reducer-layout ENDPOINT | "
                "reducer-pieces ENDPOINT ROUNDS\n");
        return 2;
    }
    if (!strcmp(argv[1], "seal-open")) {
        s_seal_open(argv[2]);
        printf("refused %d, accepted %d, unanswered %d; other messages received %d\n", s_refused, s_accepted,
               s_silent, s_leaked);
        return s_accepted ? 1 : s_silent ? 3 : 0;
    }
    /* a parameter server's, a reducer's or a file server's socket is a bulk
     * one in a sealing job */
    zsock_t *d = s_connect(argv[2], !strncmp(argv[1], "ps-", 3) || !strncmp(argv[1], "reducer-", 8) ||
                                        !strncmp(argv[1], "file-", 5));
    if (!d)
        return 2;
    const char *wait = getenv("ZT_ATTACK_WAIT_MS"); /* how long an answer may take */
    zsock_set_rcvtimeo(d, wait ? atoi(wait) : 5000);
    zsock_set_linger(d, 0);
    if (!strcmp(argv[1], "ps-ranges"))
        s_ps_ranges(d, argc > 3 ? atoi(argv[3]) : 1);
    else if (!strcmp(argv[1], "ps-nan") || !strcmp(argv[1], "reducer-nan"))
        s_nan(d, argv[1][0] == 'r', argc > 3 ? atoi(argv[3]) : 1);
    else if (!strcmp(argv[1], "ps-shm"))
        s_ps_shm(d, argv + 3, argc - 3);
    else if (!strcmp(argv[1], "file-get"))
        s_file_get(d, argv + 3, argc - 3);
    else if (!strcmp(argv[1], "reducer-layout"))
        s_reducer_layout(d);
    else if (!strcmp(argv[1], "ps-steal"))
        s_ps_steal(d);
    else if (!strcmp(argv[1], "register") && argc > 4)
        s_register(d, atoi(argv[3]), atoi(argv[4]));
    else if (!strcmp(argv[1], "reducer-pieces"))
        s_reducer_pieces(d, argc > 3 ? atoi(argv[3]) : 1);
    else {
        fprintf(stderr, "zt_attack: no attack '%s'\n", argv[1]);
        return 2;
    }
    zt_sock_destroy(&d);
    printf("refused %d, accepted %d, unanswered %d; other messages received %d\n", s_refused, s_accepted,
           s_silent, s_leaked);
    return s_accepted ? 1 : s_silent ? 3 : 0;
}
