#include "wire/zt_auth.h"
#include "wire/zt_seal.h"
#include "wire/zt_guard.h"
#include "wire/zt_transport.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_knobs.h"
#include "ztrain/zt_log.h"
#include "base/zt_env.h"
#include "base/zt_refusals.h"
#include "base/zt_util.h"
#include <jansson.h>
#include <pthread.h>
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define KEY_LEN 40 /* a Z85 key: 32 bytes in 40 characters */

typedef struct {
    uint8_t key[32];
    char name[64];
} s_peer_t;

/* This process's credentials: set once (by the coordinator making the
 * job's, or from the replica's file), read by every socket after. */
static struct {
    bool on;                          /* sockets are CURVE sockets */
    bool failed;                      /* ZT_CREDENTIALS named unusable credentials */
    char server_public[KEY_LEN + 1], server_secret[KEY_LEN + 1];
    char public_key[KEY_LEN + 1], secret_key[KEY_LEN + 1]; /* "" : a server only (the coordinator) */
    char name[64];                    /* this replica's ("" : the coordinator) */
    uint8_t seal[32];                 /* the job's secret for the data plane's seal (zt_stream) */
    bool have_seal;                   /* job.keys holds one */
    s_peer_t *peers;                  /* who may connect */
    int npeers;
    bool zap_started;
} s_auth;
static pthread_mutex_t s_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t s_once = PTHREAD_ONCE_INIT;
static atomic_uint_fast64_t s_refused;

uint64_t zt_auth_refused(void) { return (uint64_t) atomic_load(&s_refused) + zt_guard_refused(); }

static void s_init_once(void);

bool zt_auth_on(void)
{
    s_init_once();
    return s_auth.on;
}

bool zt_auth_plain(void)
{
    s_init_once();
    return !s_auth.on && !s_auth.failed;
}

/* ------------------------------------------------------------ ZAP handler */

static bool s_frame_is(zmq_msg_t *m, const char *text)
{
    size_t n = strlen(text);
    return zmq_msg_size(m) == n && !memcmp(zmq_msg_data(m), text, n);
}

static void s_send_str(void *sock, const char *text, bool more)
{
    zmq_send(sock, text, strlen(text), more ? ZMQ_SNDMORE : 0);
}

/* One connection refused: counted (read by other threads), and logged
 * through zt_refusals_count (at most once per 5 s); only the ZAP thread
 * calls it. */
static void s_note_refusal(zmq_msg_t *address, const char *why)
{
    static zt_refusals_t log;
    atomic_fetch_add(&s_refused, 1);
    char what[300];
    snprintf(what, sizeof what, "a connection from %.*s: %s",
             (int) (zmq_msg_size(address) < 64 ? zmq_msg_size(address) : 64), (const char *) zmq_msg_data(address),
             why);
    zt_refusals_count(&log, what, zt_now_ms());
}

/* ZAP (RFC 27): libzmq asks, for each CURVE handshake on this process's
 * servers, whether the client's public key may connect; the answer names
 * the replica, which every frame from that connection then carries as its
 * User-Id. The thread ends when the context is terminated (ETERM). */
static void *s_zap_main(void *arg)
{
    void *sock = arg;
    for (;;) {
        zmq_msg_t f[7]; /* version, request id, domain, address, routing id, mechanism, key */
        int n = 0, more = 1, rc = 0;
        while (more) {
            zmq_msg_t m;
            zmq_msg_init(&m);
            rc = zmq_msg_recv(&m, sock, 0);
            if (rc < 0) {
                zmq_msg_close(&m);
                break;
            }
            more = zmq_msg_more(&m);
            if (n < 7) {
                zmq_msg_init(&f[n]);
                zmq_msg_move(&f[n++], &m);
            }
            zmq_msg_close(&m);
        }
        if (rc < 0) {
            for (int i = 0; i < n; i++)
                zmq_msg_close(&f[i]);
            if (zmq_errno() == ETERM)
                break;
            continue;
        }
        const char *status = "400", *text = "not one of the job's keys", *user = "";
        char addr[64] = "", why[200];
        if (n > 3 && zmq_msg_size(&f[3]) < sizeof addr)
            memcpy(addr, zmq_msg_data(&f[3]), zmq_msg_size(&f[3]));
        if (n < 6 || !s_frame_is(&f[0], "1.0"))
            text = "a malformed ZAP request";
        else if (s_frame_is(&f[2], ZT_AUTH_BULK_DOMAIN) && s_frame_is(&f[5], "NULL")) {
            status = "200"; /* a bulk socket: its messages are sealed; only the count is asked here */
            text = "OK";
        }
        else if (!s_frame_is(&f[5], "CURVE"))
            text = "not a CURVE handshake";
        else if (n >= 7 && zmq_msg_size(&f[6]) == 32) {
            for (int i = 0; i < s_auth.npeers; i++)
                if (!memcmp(s_auth.peers[i].key, zmq_msg_data(&f[6]), 32)) {
                    status = "200";
                    text = "OK";
                    user = s_auth.peers[i].name;
                    break;
                }
        }
        if (!strcmp(status, "200") && !zt_guard_admit(addr, why, sizeof why)) {
            status = "400";
            text = why;
            user = "";
        }
        if (strcmp(status, "200"))
            s_note_refusal(n > 3 ? &f[3] : &f[0], text);
        s_send_str(sock, "1.0", true);
        zmq_send(sock, n > 1 ? zmq_msg_data(&f[1]) : "", n > 1 ? zmq_msg_size(&f[1]) : 0, ZMQ_SNDMORE);
        s_send_str(sock, status, true);
        s_send_str(sock, text, true);
        s_send_str(sock, user, true);
        s_send_str(sock, "", false);
        for (int i = 0; i < n; i++)
            zmq_msg_close(&f[i]);
    }
    zmq_close(sock);
    return NULL;
}

/* Binds the ZAP handler before any server socket exists: libzmq lets a
 * CURVE client in unchecked when no handler is bound. */
static int s_start_zap(void)
{
    if (s_auth.zap_started)
        return ZT_OK;
    void *ctx = zsys_init();
    void *sock = ctx ? zmq_socket(ctx, ZMQ_REP) : NULL;
    int linger = 0;
    if (!sock || zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger) != 0 || zmq_bind(sock, ZAP_ENDPOINT) != 0) {
        zt_error("cannot start the handler that checks who connects (%s): %s", ZAP_ENDPOINT, zmq_strerror(zmq_errno()));
        if (sock)
            zmq_close(sock);
        return ZT_ESYS;
    }
    pthread_t t;
    if (pthread_create(&t, NULL, s_zap_main, sock) != 0) { /* the socket moves to the thread (a full fence) */
        zmq_close(sock);
        zt_error("cannot start the handler that checks who connects: %s", strerror(errno));
        return ZT_ESYS;
    }
    pthread_detach(t);
    s_auth.zap_started = true;
    return ZT_OK;
}

/* ------------------------------------------------------------ key files */

static bool s_key_ok(const char *z85)
{
    uint8_t raw[32];
    return z85 && strlen(z85) == KEY_LEN && zmq_z85_decode(raw, z85) != NULL;
}

/* A folder only this user may use: made 0700, or an existing one of this
 * user's (not a link) set to 0700. */
static int s_private_dir(const char *dir)
{
    struct stat st;
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        zt_error("cannot make the credentials folder %s: %s", dir, strerror(errno));
        return ZT_ESYS;
    }
    if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
        zt_error("the credentials folder %s is not a folder of this user's (a link, or another user's)", dir);
        return ZT_EINVAL;
    }
    return chmod(dir, 0700) == 0 ? ZT_OK : ZT_ESYS;
}

/* Writes doc to path, 0600 (zt_write_file_private: no fsync, the keys are
 * made again whenever a job starts). */
static int s_write_private(const char *path, json_t *doc)
{
    char *text = json_dumps(doc, JSON_COMPACT);
    int rc = text ? zt_write_file_private(path, text, strlen(text)) : ZT_ENOMEM;
    if (rc != ZT_OK)
        zt_error("cannot write %s: %s", path, strerror(errno));
    free(text);
    return rc;
}

/* Reads a JSON object from a file of this user's that nobody else can read
 * or write; NULL with the reason logged. */
static json_t *s_read_private(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    if (fd < 0) {
        zt_error("cannot read the credentials file %s: %s", path, strerror(errno));
        return NULL;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077)) {
        zt_error("the credentials file %s is not a private file of this user's (mode %03o, owner uid %u): "
                 "it must be mode 0600 and this user's", path, (unsigned) (st.st_mode & 0777), (unsigned) st.st_uid);
        close(fd);
        return NULL;
    }
    json_error_t err;
    json_t *doc = json_loadfd(fd, 0, &err);
    close(fd);
    if (!json_is_object(doc)) {
        zt_error("the credentials file %s: %s", path, doc ? "not a JSON object" : err.text);
        json_decref(doc);
        return NULL;
    }
    return doc;
}

static const char *s_key_field(json_t *doc, const char *path, const char *field)
{
    const char *v = json_string_value(json_object_get(doc, field));
    if (!s_key_ok(v))
        zt_error("the credentials file %s: field '%s' is %s, not a %d-character Z85 CURVE key", path, field,
                 v ? "malformed" : "missing", KEY_LEN);
    return s_key_ok(v) ? v : NULL;
}

/* Installs the job's keys (job.keys's object) and this process's own pair
 * (NULL: a server only). */
static int s_install(json_t *job, const char *job_path, const char *pub, const char *sec, const char *self_name)
{
    const char *sp = s_key_field(job, job_path, "serverPublic"), *ss = s_key_field(job, job_path, "serverSecret");
    const char *seal = json_string_value(json_object_get(job, "sealSecret"));
    uint8_t sealb[32];
    bool have_seal = zt_seal_unhex(seal, sealb, sizeof sealb);
    if (seal && !have_seal) {
        zt_error("the credentials file %s: field 'sealSecret' is not 64 hexadecimal digits", job_path);
        return ZT_EINVAL;
    }
    json_t *reps = json_object_get(job, "replicas");
    if (!sp || !ss)
        return ZT_EINVAL;
    if (!json_is_object(reps)) {
        zt_error("the credentials file %s: field 'replicas' is not an object of name: public key", job_path);
        return ZT_EINVAL;
    }
    s_peer_t *peers = calloc(json_object_size(reps) + 1, sizeof *peers);
    int n = 0;
    const char *name;
    json_t *v;
    json_object_foreach(reps, name, v) {
        const char *k = json_string_value(v);
        if (!s_key_ok(k) || strlen(name) >= sizeof peers[0].name) {
            zt_error("the credentials file %s: replicas.%s is not a %d-character Z85 CURVE key", job_path, name, KEY_LEN);
            free(peers);
            return ZT_EINVAL;
        }
        zmq_z85_decode(peers[n].key, k);
        snprintf(peers[n++].name, sizeof peers[0].name, "%s", name);
    }
    pthread_mutex_lock(&s_lock);
    free(s_auth.peers);
    s_auth.peers = peers;
    s_auth.npeers = n;
    snprintf(s_auth.server_public, sizeof s_auth.server_public, "%s", sp);
    snprintf(s_auth.server_secret, sizeof s_auth.server_secret, "%s", ss);
    snprintf(s_auth.public_key, sizeof s_auth.public_key, "%s", pub ? pub : "");
    snprintf(s_auth.secret_key, sizeof s_auth.secret_key, "%s", sec ? sec : "");
    snprintf(s_auth.name, sizeof s_auth.name, "%s", self_name ? self_name : "");
    s_auth.have_seal = have_seal;
    if (have_seal)
        memcpy(s_auth.seal, sealb, sizeof sealb);
    int rc = s_start_zap();
    s_auth.on = rc == ZT_OK;
    s_auth.failed = rc != ZT_OK;
    pthread_mutex_unlock(&s_lock);
    return rc;
}

char *zt_auth_file(const char *dir, const char *name) { return zt_strdupf("%s/%s.key", dir, name); }

static bool s_security_off(void) { return !strcmp(zt_knob_str(ZT_KNOB_SECURITY), "off"); }

/* Writes the job's files; *job (when not NULL) gets job.keys's object. */
static int s_write_job(const char *dir, char *const *names, int n, json_t **job_out)
{
    if (!zmq_has("curve")) {
        zt_error("this libzmq has no CURVE security (built without libsodium): jobs cannot be authenticated; "
                 "install a libzmq with CURVE, or set ZT_SECURITY=off (benchmarks only)");
        return ZT_EINVAL;
    }
    int rc = s_private_dir(dir);
    char sp[KEY_LEN + 1], ss[KEY_LEN + 1];
    if (rc == ZT_OK && zmq_curve_keypair(sp, ss) != 0)
        rc = ZT_ESYS;
    uint8_t seal[32];
    char seal_hex[65];
    if (rc == ZT_OK && zt_seal_random(seal, sizeof seal) != ZT_OK)
        rc = ZT_ESYS;
    zt_seal_hex(seal, sizeof seal, seal_hex);
    json_t *job = json_pack("{s:s, s:s, s:s, s:{}}", "serverPublic", sp, "serverSecret", ss, "sealSecret", seal_hex,
                            "replicas");
    json_t *reps = json_object_get(job, "replicas");
    for (int i = 0; rc == ZT_OK && i < n; i++) {
        char pub[KEY_LEN + 1], sec[KEY_LEN + 1];
        if (zmq_curve_keypair(pub, sec) != 0) {
            rc = ZT_ESYS;
            break;
        }
        json_object_set_new(reps, names[i], json_string(pub));
        json_t *mine = json_pack("{s:s, s:s, s:s}", "name", names[i], "public", pub, "secret", sec);
        char *path = zt_auth_file(dir, names[i]);
        rc = s_write_private(path, mine);
        free(path);
        json_decref(mine);
    }
    char *job_path = zt_strdupf("%s/job.keys", dir);
    if (rc == ZT_OK)
        rc = s_write_private(job_path, job);
    free(job_path);
    if (rc != ZT_OK)
        zt_error("cannot make the job's credentials in %s", dir);
    if (rc == ZT_OK && job_out)
        *job_out = job;
    else
        json_decref(job);
    return rc;
}

int zt_auth_write_job(const char *dir, char *const *names, int n) { return s_write_job(dir, names, n, NULL); }

int zt_auth_make_job(const char *dir, char *const *names, int n)
{
    if (s_security_off()) {
        zt_auth_on(); /* says so, loudly */
        return ZT_OK;
    }
    json_t *job = NULL;
    int rc = s_write_job(dir, names, n, &job);
    if (rc == ZT_OK) {
        char *job_path = zt_strdupf("%s/job.keys", dir);
        rc = s_install(job, job_path, NULL, NULL, NULL);
        free(job_path);
    }
    json_decref(job);
    return rc;
}

int zt_auth_load(const char *path)
{
    json_t *mine = s_read_private(path);
    if (!mine)
        return ZT_EINVAL;
    const char *pub = s_key_field(mine, path, "public"), *sec = s_key_field(mine, path, "secret");
    char *dir = strdup(path), *slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;
    char *job_path = slash ? zt_strdupf("%s/job.keys", dir) : strdup("job.keys");
    json_t *job = pub && sec ? s_read_private(job_path) : NULL;
    int rc = job ? s_install(job, job_path, pub, sec, json_string_value(json_object_get(mine, "name"))) : ZT_EINVAL;
    json_decref(job);
    json_decref(mine);
    free(job_path);
    free(dir);
    return rc;
}

/* Once per process, before its first socket: ZT_SECURITY, then the
 * credentials named by ZT_CREDENTIALS (unless some are installed). */
static void s_init(void)
{
    if (s_security_off()) {
        zt_warn("ZT_SECURITY=off: this process's sockets are neither authenticated nor encrypted; anyone who "
                "can reach the job's ports can read its model, send it gradients and pose as its replicas. "
                "For benchmarks only");
        return;
    }
    const char *path = zt_env_get(ZT_ENV_CREDENTIALS);
    if (s_auth.on || !path || !*path)
        return;
    if (zt_auth_load(path) != ZT_OK) {
        s_auth.failed = true;
        zt_error("%s=%s: this replica cannot authenticate, so it makes no socket", zt_env_name(ZT_ENV_CREDENTIALS), path);
    }
}

static void s_init_once(void) { pthread_once(&s_once, s_init); }

int zt_auth_apply(zsock_t *sock, bool server)
{
    s_init_once();
    if (s_auth.failed)
        return ZT_EINVAL;
    if (!s_auth.on)
        return ZT_OK;
    if (server) {
        zsock_set_zap_domain(sock, "ztrain");
        zsock_set_curve_server(sock, 1);
        zsock_set_curve_secretkey(sock, s_auth.server_secret);
        return ZT_OK;
    }
    if (!s_auth.public_key[0]) {
        zt_error("this process holds the job's server key only: it cannot connect as a replica");
        return ZT_EINVAL;
    }
    zsock_set_curve_serverkey(sock, s_auth.server_public);
    zsock_set_curve_publickey(sock, s_auth.public_key);
    zsock_set_curve_secretkey(sock, s_auth.secret_key);
    return ZT_OK;
}

bool zt_auth_seal_secret(uint8_t secret[32], char *name, size_t name_size)
{
    s_init_once();
    if (!s_auth.on || !s_auth.have_seal)
        return false;
    memcpy(secret, s_auth.seal, 32);
    snprintf(name, name_size, "%s", s_auth.name[0] ? s_auth.name : "coordinator");
    return true;
}

const char *zt_auth_peer(zframe_t *frame)
{
    return s_auth.on && frame ? zframe_meta(frame, "User-Id") : NULL;
}

void zt_auth_selftest(void)
{
    /* made 0600 in a 0700 folder; loaded back; the loaded keys work */
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/zt-auth-test-%d", (int) getpid());
    char *names[] = { "workerpool0-0", "workerpool1-0" };
    assert(zt_auth_make_job(dir, names, 2) == ZT_OK && zt_auth_on());
    struct stat st;
    assert(stat(dir, &st) == 0 && (st.st_mode & 0777) == 0700);
    char *f0 = zt_auth_file(dir, names[0]);
    assert(stat(f0, &st) == 0 && (st.st_mode & 0777) == 0600);
    assert(zt_auth_load(f0) == ZT_OK && s_auth.public_key[0] && s_auth.npeers == 2);
    /* a file others may read is refused, naming it */
    chmod(f0, 0644);
    assert(zt_auth_load(f0) != ZT_OK);
    chmod(f0, 0600);
    assert(zt_auth_load(f0) == ZT_OK);
    free(f0);
    /* a replica's message arrives with its name; a plain client and a
     * client with a key pair of its own (even knowing the server key) get
     * nowhere, and the second is counted */
    int port = 0;
    zsock_t *srv = zt_sock_router(ZT_PLANE_CONTROL, "tcp://127.0.0.1:*", &port);
    assert(srv && port > 0);
    zsock_set_rcvtimeo(srv, 3000);
    char ep[64];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    zsock_t *mine = zt_sock_dealer(ZT_PLANE_CONTROL, ep);
    assert(mine && zstr_send(mine, "hello") == 0);
    zmsg_t *got = zmsg_recv(srv);
    assert(got && zmsg_size(got) == 2);
    zframe_t *body = zmsg_last(got);
    assert(zt_auth_peer(body) && !strcmp(zt_auth_peer(body), "workerpool0-0"));
    zmsg_destroy(&got);
    uint64_t refused = zt_auth_refused();
    char pub[KEY_LEN + 1], sec[KEY_LEN + 1];
    zmq_curve_keypair(pub, sec);
    zsock_t *plain = zsock_new(ZMQ_DEALER), *stranger = zsock_new(ZMQ_DEALER);
    zsock_set_curve_serverkey(stranger, s_auth.server_public);
    zsock_set_curve_publickey(stranger, pub);
    zsock_set_curve_secretkey(stranger, sec);
    assert(zsock_connect(plain, "%s", ep) == 0 && zsock_connect(stranger, "%s", ep) == 0);
    zstr_send(plain, "let me in");
    zstr_send(stranger, "let me in");
    zsock_set_rcvtimeo(srv, 700);
    assert(zmsg_recv(srv) == NULL);
    for (int i = 0; i < 100 && zt_auth_refused() == refused; i++)
        zclock_sleep(20);
    assert(zt_auth_refused() > refused);
    zsock_set_linger(plain, 0);
    zsock_set_linger(stranger, 0);
    zsock_destroy(&plain);
    zsock_destroy(&stranger);
    zt_sock_destroy(&mine);
    zt_sock_destroy(&srv);
    assert(zt_rm_tree(dir) == ZT_OK);
}
