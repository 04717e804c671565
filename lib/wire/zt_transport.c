#include "wire/zt_transport.h"
#include "wire/zt_auth.h"
#include "wire/zt_guard.h"
#include "ztrain/zt_knobs.h"
#include "ztrain/zt_log.h"
#include "base/zt_env.h"
#include "base/zt_util.h"
#include <jansson.h>
#include <malloc.h>
#include <pthread.h>
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <sys/un.h>
#include <unistd.h>

int64_t zt_frame_bytes(void)
{
    static int64_t v;
    if (!v) {
        int64_t k = zt_knob_int(ZT_KNOB_PS_CHUNK_BYTES);
        v = k < 4096 ? 4096 : k;
    }
    return v;
}

int64_t zt_frame_limit_for(int64_t chunk, int64_t piece)
{
    int64_t big = chunk > piece ? chunk : piece;
    return (big > ((int64_t) 16 << 20) ? big : ((int64_t) 16 << 20)) + 65536;
}

int64_t zt_frame_limit(void)
{
    static int64_t v;
    if (!v) {
        long long job = 0;
        const char *given = zt_env_get(ZT_ENV_FRAME_LIMIT);
        if (given && zt_parse_int(given, &job) && job >= (1 << 20))
            v = job;
        else
            v = zt_frame_limit_for(zt_frame_bytes(), zt_knob_int(ZT_KNOB_AR_PIECE_BYTES));
    }
    return v;
}

/* Host identity from the launch backend's placement: ZT_HOST is this
 * replica's host, ZT_HOSTS every replica's ({"addr:port": host}). */
static json_t *s_hosts;
static const char *s_me;
static pthread_once_t s_hosts_once = PTHREAD_ONCE_INIT;

static void s_set_hosts(const char *me, const char *map)
{
    static char mine[256];
    json_decref(s_hosts);
    snprintf(mine, sizeof mine, "%s", me ? me : "");
    s_me = mine;
    s_hosts = me && map ? json_loads(map, 0, NULL) : NULL;
    if (!json_is_object(s_hosts)) {
        json_decref(s_hosts);
        s_hosts = NULL;
    }
}

static void s_load_hosts(void)
{
    s_set_hosts(zt_env_get(ZT_ENV_HOST), zt_env_get(ZT_ENV_HOSTS));
}

static bool s_allowed_decided;
static pthread_mutex_t s_allowed_lock = PTHREAD_MUTEX_INITIALIZER;

void zt_transport_set_hosts(const char *me, const char *map)
{
    pthread_once(&s_hosts_once, s_load_hosts);
    pthread_mutex_lock(&s_allowed_lock);
    s_set_hosts(me, map);
    s_allowed_decided = false; /* the next router decides its filter again */
    pthread_mutex_unlock(&s_allowed_lock);
}

/* 1: the replica at host:port runs on this host; 0: on another; -1: the
 * placement does not say (a program started outside `ztrain run`). */
static int s_same_host(const char *hostport)
{
    pthread_once(&s_hosts_once, s_load_hosts);
    const char *h = s_hosts ? json_string_value(json_object_get(s_hosts, hostport)) : NULL;
    return h ? !strcmp(h, s_me) : -1;
}

/* Same-host data plane. Loopback TCP costs a full TCP stack per byte; a
 * Unix-domain socket moves bulk data about 1.3x faster here (bench/ps_bench
 * prints both). So a server on this host also binds an ipc:// twin named by
 * its port, and a client connects to the twin of an endpoint on its own
 * host (see s_same_host). Ports are unique per host (they are bound), so the
 * names are too; ZT_DATA_IPC=off keeps everything on TCP. */
static char s_ipc_dir[200];
static bool s_ipc_ok;
static pthread_once_t s_ipc_once = PTHREAD_ONCE_INIT;

static void s_check_ipc_dir(void)
{
    const char *k = zt_knob_str(ZT_KNOB_IPC_DIR);
    if (k && *k)
        snprintf(s_ipc_dir, sizeof s_ipc_dir, "%s", k);
    else
        snprintf(s_ipc_dir, sizeof s_ipc_dir, "/tmp/ztrain-ipc-%u", (unsigned) geteuid());
    char why[200] = "";
    struct stat st;
    if (mkdir(s_ipc_dir, 0700) != 0 && errno != EEXIST)
        snprintf(why, sizeof why, "cannot be made (%s)", strerror(errno));
    else if (lstat(s_ipc_dir, &st) != 0 || !S_ISDIR(st.st_mode))
        snprintf(why, sizeof why, "not a directory (a symbolic link?)");
    else if (st.st_uid != geteuid())
        snprintf(why, sizeof why, "owned by uid %u, not by this user (uid %u)", (unsigned) st.st_uid,
                 (unsigned) geteuid());
    else if (st.st_mode & 022)
        snprintf(why, sizeof why, "writable by others (mode %03o)", (unsigned) (st.st_mode & 0777));
    if (why[0])
        zt_warn("the ipc folder %s (ZT_IPC_DIR) is %s: it is not used, and same-host data goes over loopback "
                "TCP; make it a folder of this user's with mode 0700, or set ZT_IPC_DIR to one", s_ipc_dir, why);
    s_ipc_ok = !why[0];
}

const char *zt_ipc_dir(void)
{
    pthread_once(&s_ipc_once, s_check_ipc_dir);
    return s_ipc_ok ? s_ipc_dir : NULL;
}

/* Whether a TCP endpoint is on this host; its port in *port_p. */
static bool s_here(const char *endpoint, bool bind, long *port_p)
{
    const char *a = !strncmp(endpoint, "tcp://", 6) ? endpoint + 6 : strstr(endpoint, "://") ? NULL : endpoint;
    const char *colon = a ? strrchr(a, ':') : NULL;
    if (!colon)
        return false;
    size_t hl = (size_t) (colon - a);
    /* The placement decides: a server twins its endpoint, and a client uses
     * the twin, when the placement puts that endpoint on this host. Without
     * a placement (a program started outside `ztrain run`) a loopback
     * address is this host; a server also twins a wildcard endpoint. */
    int same = s_same_host(a);
    bool local = same == 1 ||
                 (same < 0 && ((hl >= 4 && !strncmp(a, "127.", 4)) || (hl == 9 && !strncmp(a, "localhost", 9)))) ||
                 (bind && ((hl == 1 && a[0] == '*') || (hl == 7 && !strncmp(a, "0.0.0.0", 7))));
    char *end;
    long port = strtol(colon + 1, &end, 10);
    *port_p = port;
    return local && !*end && port > 0 && port <= 65535;
}

bool zt_data_ipc_twin(const char *endpoint, bool bind, char *out, size_t len)
{
    long port;
    if (strcmp(zt_knob_str(ZT_KNOB_DATA_IPC), "auto") || !s_here(endpoint, bind, &port) || !zt_ipc_dir())
        return false;
    int n = snprintf(out, len, "ipc://%s/ztrain-%ld.sock", zt_ipc_dir(), port);
    return n > 0 && (size_t) n < len && n - 6 < 100; /* sun_path holds 108 bytes */
}

bool zt_data_is_local(const char *endpoint)
{
    char twin[256];
    return !strncmp(endpoint, "ipc://", 6) || !strncmp(endpoint, "inproc://", 9) ||
           zt_data_ipc_twin(endpoint, false, twin, sizeof twin);
}

/* ZeroMQ receives each large frame into a block it mallocs in its I/O
 * thread, and the caller frees it. With glibc's defaults the arena's free
 * top then goes back to the kernel (madvise), and the next frames fault
 * every page in again: about 20,000 faults a second, a tenth of a trainer's
 * CPU, at 16 MiB all-reduces over TCP. Kept heaps reuse the same pages. */
static void s_keep_heaps(void)
{
    int64_t keep = zt_knob_int(ZT_KNOB_MALLOC_KEEP_BYTES);
    const char *t = getenv("GLIBC_TUNABLES");
    if (keep <= 0 || (t && strstr(t, "glibc.malloc.")) || getenv("MALLOC_TRIM_THRESHOLD_") ||
        getenv("MALLOC_MMAP_THRESHOLD_") || getenv("MALLOC_TOP_PAD_"))
        return; /* glibc's own behaviour, or the user's settings */
    if (keep > INT32_MAX)
        keep = INT32_MAX;
    if (!mallopt(M_MMAP_THRESHOLD, 32 << 20) || !mallopt(M_TRIM_THRESHOLD, (int) keep))
        zt_warn("ZT_MALLOC_KEEP_BYTES=%lld: glibc refused the malloc settings; received frames may fault "
                "fresh pages in", (long long) keep);
}

/* The one constructor: every socket's options by plane. */
static zsock_t *s_socket(int type, zt_plane_t plane)
{
    zsock_t *s = zsock_new(type);
    if (!s)
        return NULL;
    if (plane != ZT_PLANE_BULK && zt_auth_apply(s, type == ZMQ_ROUTER) != 0) { /* a secured job's replica never goes plain */
        zsock_destroy(&s);
        return NULL;
    }
    if (plane == ZT_PLANE_BULK && type == ZMQ_ROUTER && zt_auth_on())
        zsock_set_zap_domain(s, ZT_AUTH_BULK_DOMAIN); /* asked per handshake: connections per address */
    zsock_set_handshake_ivl(s, (int) zt_knob_int(ZT_KNOB_HANDSHAKE_MS));
    if (plane != ZT_PLANE_CONTROL) {
        static pthread_once_t keep_once = PTHREAD_ONCE_INIT;
        pthread_once(&keep_once, s_keep_heaps);
        zsock_set_sndhwm(s, 100000);
        zsock_set_rcvhwm(s, 100000);
        zsock_set_maxmsgsize(s, (int) (zt_frame_limit() > INT32_MAX ? INT32_MAX : zt_frame_limit()));
        zsock_set_linger(s, 0);
        if (type == ZMQ_DEALER)
            zsock_set_reconnect_ivl(s, 50);
    }
    else
        zsock_set_linger(s, type == ZMQ_DEALER ? 200 : 0);
    return s;
}

/* Removes the twins in dir that nobody listens on any more (their servers
 * were killed with SIGKILL): a connect to them is refused. A twin younger
 * than min_age_s seconds is left alone: a server binds its file before it
 * listens on it, and a process starting beside it (every replica of a job
 * sweeps when it first binds) must not take that moment for a dead one's
 * file; a stale young file costs nothing (its port's next server replaces
 * it). */
static void s_sweep_ipc_dir(const char *dir, int min_age_s)
{
    time_t now = time(NULL);
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (strncmp(e->d_name, "ztrain-", 7) || n < 12 || strcmp(e->d_name + n - 5, ".sock"))
            continue;
        struct sockaddr_un a = { .sun_family = AF_UNIX };
        struct stat st;
        if (snprintf(a.sun_path, sizeof a.sun_path, "%s/%s", dir, e->d_name) >= (int) sizeof a.sun_path ||
            lstat(a.sun_path, &st) != 0 || now - st.st_ctime < min_age_s)
            continue;
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            break;
        if (connect(fd, (struct sockaddr *) &a, sizeof a) < 0 && errno == ECONNREFUSED)
            unlink(a.sun_path);
        close(fd);
    }
    closedir(d);
}

void zt_ipc_sweep(void)
{
    if (zt_ipc_dir())
        s_sweep_ipc_dir(zt_ipc_dir(), 5);
}

/* The ipc:// files bound by routers made here, so that closing one removes
 * them: libzmq leaves the file behind (seen with 4.3.4, even after an
 * explicit unbind), and a server that exits cleanly must leave no socket
 * file. A few servers per process at most. */
#define MAX_BOUND 16
static struct {
    zsock_t *sock;
    char path[2][160];
    zt_guard_t *guard;
    zt_hold_t *hold;
} s_bound[MAX_BOUND];
static pthread_mutex_t s_bound_lock = PTHREAD_MUTEX_INITIALIZER;

static void s_remember(zsock_t *sock, int k, const char *endpoint, zt_guard_t *guard, zt_hold_t *hold)
{
    if (strncmp(endpoint, "ipc://", 6) && !guard && !hold)
        return;
    pthread_mutex_lock(&s_bound_lock);
    int at = -1;
    for (int i = 0; i < MAX_BOUND && at < 0; i++)
        if (s_bound[i].sock == sock)
            at = i;
    for (int i = 0; i < MAX_BOUND && at < 0; i++)
        if (!s_bound[i].sock)
            at = i;
    if (at >= 0) {
        s_bound[at].sock = sock;
        if (!strncmp(endpoint, "ipc://", 6))
            snprintf(s_bound[at].path[k], sizeof s_bound[at].path[k], "%s", endpoint + 6);
        if (guard)
            s_bound[at].guard = guard;
        if (hold)
            s_bound[at].hold = hold;
    }
    pthread_mutex_unlock(&s_bound_lock);
    if (at < 0) {
        zt_guard_unwatch(sock, &guard);
        zt_guard_release(&hold);
    }
}

void zt_sock_destroy(zsock_t **sock_p)
{
    if (!sock_p || !*sock_p)
        return;
    char paths[2][160] = { "", "" };
    zt_guard_t *guard = NULL;
    zt_hold_t *hold = NULL;
    pthread_mutex_lock(&s_bound_lock);
    for (int i = 0; i < MAX_BOUND; i++)
        if (s_bound[i].sock == *sock_p) {
            memcpy(paths, s_bound[i].path, sizeof paths);
            guard = s_bound[i].guard;
            hold = s_bound[i].hold;
            memset(&s_bound[i], 0, sizeof s_bound[i]);
        }
    pthread_mutex_unlock(&s_bound_lock);
    zt_guard_unwatch(*sock_p, &guard);
    zsock_destroy(sock_p);
    zt_guard_release(&hold);
    for (int k = 0; k < 2; k++)
        if (paths[k][0])
            unlink(paths[k]);
}

/* libzmq binds to an address or an interface, not a host name: a host
 * name ("tcp://n2:7000", as a cluster names its nodes) is resolved to its
 * IPv4 address first. Anything else is left as it is. */
static const char *s_bindable(const char *endpoint, char *buf, size_t size)
{
    if (strncmp(endpoint, "tcp://", 6))
        return endpoint;
    const char *host = endpoint + 6, *colon = strrchr(host, ':');
    if (!colon || colon == host || *host == '*' || *host == '[')
        return endpoint;
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int) (colon - host), host);
    struct in_addr ip;
    if (inet_pton(AF_INET, name, &ip) == 1)
        return endpoint;
    struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *res = NULL;
    if (getaddrinfo(name, NULL, &hints, &res) != 0 || !res)
        return endpoint; /* perhaps an interface name: libzmq decides */
    char addr[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &((struct sockaddr_in *) res->ai_addr)->sin_addr, addr, sizeof addr);
    freeaddrinfo(res);
    snprintf(buf, size, "tcp://%s%s", addr, colon);
    return buf;
}

/* The addresses that may reach this process's TCP ports: the job's hosts'
 * (from the placement), loopback excepted, since peers on this host that
 * reach a port by a loopback address come over its twin. So a job on one
 * host accepts no TCP connection at all. Decided at the first router (and
 * again after zt_transport_set_hosts); s_nallowed < 0: no filter (no
 * placement, twins off, or a host that does not resolve, said). */
static char *s_allowed[256];
static int s_nallowed = -1;

static void s_add_allowed(const char *host)
{
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res = NULL;
    if (getaddrinfo(host, NULL, &hints, &res) != 0 || !res) {
        zt_warn("the job's host %s does not resolve: this process's TCP ports accept any address", host);
        s_nallowed = -1;
        return;
    }
    for (struct addrinfo *ai = res; ai && s_nallowed >= 0; ai = ai->ai_next) {
        char addr[INET6_ADDRSTRLEN];
        if (!zt_sockaddr_name(ai->ai_addr, addr, sizeof addr) || !strncmp(addr, "127.", 4) || !strcmp(addr, "::1"))
            continue;
        bool have = false;
        for (int i = 0; i < s_nallowed && !have; i++)
            have = !strcmp(s_allowed[i], addr);
        if (!have && s_nallowed < (int) (sizeof s_allowed / sizeof *s_allowed))
            s_allowed[s_nallowed++] = strdup(addr);
    }
    freeaddrinfo(res);
}

static void s_decide_allowed(void)
{
    for (int i = 0; i < s_nallowed; i++)
        free(s_allowed[i]);
    s_nallowed = -1;
    pthread_once(&s_hosts_once, s_load_hosts);
    if (!s_hosts || strcmp(zt_knob_str(ZT_KNOB_DATA_IPC), "auto") || !zt_ipc_dir())
        return;
    s_nallowed = 0;
    const char *key;
    json_t *host;
    json_object_foreach(s_hosts, key, host) {
        const char *colon = strrchr(key, ':');
        if (!colon || !json_is_string(host))
            continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int) (colon - key), key);
        s_add_allowed(name);
        if (s_nallowed < 0)
            return;
    }
}

/* The endpoint with its port ("tcp://h:*" bound to 41000: "tcp://h:41000"). */
static void s_with_port(const char *endpoint, int port, char *out, size_t len)
{
    const char *colon = strrchr(endpoint, ':');
    if (!colon || colon - endpoint < 6)
        snprintf(out, len, "%s", endpoint);
    else
        snprintf(out, len, "%.*s:%d", (int) (colon - endpoint), endpoint, port);
}

/* Binds router at the same-host twin of actual: clients on this host will
 * connect there, so failing is fatal (said). */
static bool s_bind_twin(zsock_t *router, const char *twin, const char *actual)
{
    static bool swept;
    if (!swept) {
        swept = true;
        s_sweep_ipc_dir(zt_ipc_dir(), 5);
    }
    if (zsock_bind(router, "%s", twin) < 0) {
        zt_error("cannot bind %s (the same-host twin of %s): %s; set ZT_IPC_DIR to a writable "
                 "directory, or ZT_DATA_IPC=off for TCP only", twin, actual, zmq_strerror(zmq_errno()));
        return false;
    }
    s_remember(router, 1, twin, NULL, NULL);
    return true;
}

/* Long by its comment: the TCP bind (filtered and watched in a job), then
 * the same-host twin, each step's failure undone and said. */
zsock_t *zt_sock_router(zt_plane_t plane, const char *endpoint, int *port_p)
{
    zsock_t *router = s_socket(ZMQ_ROUTER, plane);
    if (!router)
        return NULL;
    char twin[160], resolved[300], actual[300];
    bool tcp = !strncmp(endpoint, "tcp://", 6);
    pthread_mutex_lock(&s_allowed_lock);
    if (!s_allowed_decided)
        s_decide_allowed();
    s_allowed_decided = true;
    bool filtered = tcp && s_nallowed >= 0, held = filtered && s_nallowed == 0;
    if (filtered && !held)
        zt_guard_filter(router, s_allowed, s_nallowed);
    pthread_mutex_unlock(&s_allowed_lock);
    /* no TCP peer at all (a job on one host): the port is held, not bound */
    zt_hold_t *hold = NULL;
    int port = -1;
    if (held)
        hold = zt_guard_hold(s_bindable(endpoint, resolved, sizeof resolved), &port);
    else
        port = zsock_bind(router, "%s", s_bindable(endpoint, resolved, sizeof resolved));
    if (port < 0) {
        zt_error("cannot bind %s: %s", endpoint, held ? "see above" : zmq_strerror(zmq_errno()));
        zsock_destroy(&router);
        return NULL;
    }
    if (port_p)
        *port_p = port;
    zt_guard_t *guard = tcp && !held && (filtered || zt_auth_on()) ? zt_guard_watch(router, port, filtered) : NULL;
    s_remember(router, 0, endpoint, guard, hold);
    s_with_port(endpoint, port, actual, sizeof actual);
    bool twinned = tcp && zt_data_ipc_twin(actual, true, twin, sizeof twin);
    if (held && !twinned) {
        zt_error("%s: this job's peers reach a port on this host over its ipc twin, and %s has none", endpoint, actual);
        zt_sock_destroy(&router);
    }
    else if (twinned && !s_bind_twin(router, twin, actual))
        zt_sock_destroy(&router);
    return router;
}

zsock_t *zt_sock_router_twin(zt_plane_t plane, const char *actual)
{
    zsock_t *router = s_socket(ZMQ_ROUTER, plane);
    char twin[160];
    if (router && zt_data_ipc_twin(actual, true, twin, sizeof twin) && !s_bind_twin(router, twin, actual))
        zt_sock_destroy(&router);
    return router;
}

int zt_tcp_peer_rule(void)
{
    pthread_mutex_lock(&s_allowed_lock);
    if (!s_allowed_decided)
        s_decide_allowed();
    s_allowed_decided = true;
    int rule = s_nallowed < 0 ? 0 : s_nallowed == 0 ? -1 : 1;
    pthread_mutex_unlock(&s_allowed_lock);
    return rule;
}

bool zt_tcp_peer_allowed(const char *addr)
{
    pthread_mutex_lock(&s_allowed_lock);
    bool ok = s_nallowed < 0;
    for (int i = 0; i < s_nallowed && !ok; i++)
        ok = !strcmp(s_allowed[i], addr);
    pthread_mutex_unlock(&s_allowed_lock);
    return ok;
}

bool zt_frame_over_ipc(zmq_msg_t *frame)
{
    /* libzmq names an ipc peer by its credentials ("localhost:UID:GID:PID")
     * and a TCP peer by its numeric address */
    const char *peer = zmq_msg_gets(frame, "Peer-Address");
    return peer && !strncmp(peer, "localhost:", 10);
}

/* Whether this process has not yet said which transport endpoint gets on
 * plane: a client that connects again and again (an evaluator fetching
 * each checkpoint) says it once. */
static bool s_first_time(zt_plane_t plane, const char *endpoint)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static uint64_t seen[256];
    static int nseen;
    uint64_t h = 1469598103934665603ull ^ (uint64_t) plane; /* FNV-1a */
    for (const char *c = endpoint; *c; c++)
        h = (h ^ (uint8_t) *c) * 1099511628211ull;
    bool first = true;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < nseen && first; i++)
        first = seen[i] != h;
    if (first && nseen < 256)
        seen[nseen++] = h;
    pthread_mutex_unlock(&mu);
    return first;
}

zsock_t *zt_sock_dealer(zt_plane_t plane, const char *endpoint)
{
    zsock_t *d = s_socket(ZMQ_DEALER, plane);
    if (!d)
        return NULL;
    char twin[160];
    bool twinned = zt_data_ipc_twin(endpoint, false, twin, sizeof twin);
    int rc = twinned ? zsock_connect(d, "%s", twin)
             : strstr(endpoint, "://")                              ? zsock_connect(d, "%s", endpoint)
                                                                    : zsock_connect(d, "tcp://%s", endpoint);
    if (rc != 0)
        zsock_destroy(&d);
    else if (plane != ZT_PLANE_CONTROL)
        zt_data_say_route(plane, endpoint, "");
    return d;
}

void zt_data_say_route(zt_plane_t plane, const char *endpoint, const char *how)
{
    long port;
    zt_log_level_t level = s_first_time(plane, endpoint) ? ZT_LOG_INFO : ZT_LOG_DEBUG;
    ZT_LOG(level, "data plane to %s: %s%s", endpoint,
           zt_data_is_local(endpoint) ? "this host, over an ipc socket (shared memory allowed)"
           : s_here(endpoint, false, &port) ? (plane == ZT_PLANE_BULK ? "this host, over loopback tcp, sealed (ZT_DATA_IPC=off or no usable ZT_IPC_DIR)" : "this host, over loopback tcp (ZT_DATA_IPC=off or no usable ZT_IPC_DIR)")
           : plane == ZT_PLANE_BULK ? "another host, over tcp, sealed (AES-128-GCM)"
                                    : "another host, over tcp", how);
}

/* In a job on one host (a placement of loopback addresses) a router's TCP
 * port refuses every connection, before any greeting: its peers, control
 * plane too, come over the twin. */
static void s_selftest_one_host(void)
{
    zt_transport_set_hosts("nodeA", "{\"127.0.0.1:5555\": \"nodeA\"}");
    int cport = 0;
    zsock_t *srv = zt_sock_router(ZT_PLANE_CONTROL, "tcp://127.0.0.1:*", &cport);
    assert(srv && cport > 0);
    char ep[64];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", cport);
    zsock_t *mine = zt_sock_dealer(ZT_PLANE_CONTROL, ep);
    assert(mine && zstr_send(mine, "over the twin") == 0);
    zsock_set_rcvtimeo(srv, 3000);
    zmsg_t *m = zmsg_recv(srv);
    assert(m && zmsg_size(m) == 2);
    zmsg_destroy(&m);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t) cport) };
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    assert(fd >= 0 && connect(fd, (struct sockaddr *) &a, sizeof a) == 0);
    char c;
    assert(read(fd, &c, 1) <= 0); /* held, taken by the guard and closed: no greeting */
    close(fd);
    zt_sock_destroy(&mine);
    zt_sock_destroy(&srv);
    zt_transport_set_hosts(NULL, NULL);
}

void zt_transport_selftest(void)
{
    char t[160];
    /* a host name binds (libzmq alone refuses one: "No such device") */
    int port = -1;
    zsock_t *named = zt_sock_router(ZT_PLANE_CONTROL, "tcp://localhost:*", &port);
    assert(named && port > 0);
    zt_sock_destroy(&named);
    const char *dir = zt_ipc_dir();
    char want[160];
    snprintf(want, sizeof want, "ipc://%s/ztrain-5555.sock", dir);
    bool on = !strcmp(zt_knob_str(ZT_KNOB_DATA_IPC), "auto");
    assert(zt_data_ipc_twin("127.0.0.1:5555", false, t, sizeof t) == on);
    assert(!on || !strcmp(t, want));
    assert(zt_data_ipc_twin("tcp://127.0.0.1:5555", true, t, sizeof t) == on);
    assert(zt_data_ipc_twin("localhost:5555", false, t, sizeof t) == on);
    assert(zt_data_ipc_twin("tcp://*:5555", true, t, sizeof t) == on);
    assert(!zt_data_ipc_twin("tcp://*:5555", false, t, sizeof t));       /* nobody connects to "*" */
    assert(!zt_data_ipc_twin("10.0.0.2:5555", false, t, sizeof t));      /* another host */
    assert(!zt_data_ipc_twin("tcp://10.0.0.2:5555", true, t, sizeof t));
    assert(!zt_data_ipc_twin("ipc:///tmp/x.sock", false, t, sizeof t));  /* already not TCP */
    assert(!zt_data_ipc_twin("127.0.0.1:0x15", false, t, sizeof t));     /* not a port */
    assert(!zt_data_ipc_twin("127.0.0.1:70000", false, t, sizeof t));
    assert(!zt_data_ipc_twin("127.0.0.1", false, t, sizeof t));
    /* With a placement, host identity decides, whatever the address says. */
    zt_transport_set_hosts("nodeA", "{\"10.0.0.2:5555\": \"nodeA\", \"127.0.0.1:6666\": \"nodeB\"}");
    assert(zt_data_ipc_twin("10.0.0.2:5555", false, t, sizeof t) == on);  /* placed here */
    assert(zt_data_ipc_twin("tcp://10.0.0.2:5555", true, t, sizeof t) == on);
    assert(zt_data_is_local("10.0.0.2:5555") == on);
    assert(!zt_data_ipc_twin("127.0.0.1:6666", false, t, sizeof t));      /* loopback, another host */
    assert(!zt_data_is_local("127.0.0.1:6666"));
    assert(zt_data_ipc_twin("127.0.0.1:7777", false, t, sizeof t) == on); /* not placed: loopback rule */
    zt_transport_set_hosts(NULL, NULL);
    assert(!zt_data_ipc_twin("10.0.0.2:5555", false, t, sizeof t));
    /* A server's twin goes with it. */
    if (on) {
        char ep[64], path[160];
        snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", zt_ephemeral_port());
        zsock_t *srv = zt_sock_router(ZT_PLANE_DATA, ep, NULL);
        assert(srv && zt_data_ipc_twin(ep, true, t, sizeof t));
        snprintf(path, sizeof path, "%s", t + 6);
        assert(access(path, F_OK) == 0);
        zt_sock_destroy(&srv);
        assert(!srv && access(path, F_OK) != 0);
        zt_sock_destroy(&srv); /* safe twice */
    }
    if (on)
        s_selftest_one_host();
    /* The sweep removes twins nobody listens on, and nothing else. */
    char d[48], paths[3][96]; /* well under sun_path's 108 */
    snprintf(d, sizeof d, "/tmp/zt-ipc-sweep-%d", (int) getpid());
    assert(mkdir(d, 0700) == 0);
    const char *names[3] = { "ztrain-1.sock", "ztrain-2.sock", "other.sock" };
    int fds[3];
    for (int i = 0; i < 3; i++) {
        struct sockaddr_un a = { .sun_family = AF_UNIX };
        snprintf(paths[i], sizeof paths[i], "%s/%s", d, names[i]);
        memcpy(a.sun_path, paths[i], strlen(paths[i]) + 1); /* 96 < 108 */
        fds[i] = socket(AF_UNIX, SOCK_STREAM, 0);
        assert(fds[i] >= 0 && bind(fds[i], (struct sockaddr *) &a, sizeof a) == 0);
        if (i == 1)
            assert(listen(fds[i], 4) == 0); /* alive */
        else
            close(fds[i]);                  /* its server is gone; the file stays */
    }
    s_sweep_ipc_dir(d, 60);
    assert(access(paths[0], F_OK) == 0);    /* stale, but young: kept (a server between bind and listen) */
    s_sweep_ipc_dir(d, 0);
    assert(access(paths[0], F_OK) != 0);    /* stale twin: removed */
    assert(access(paths[1], F_OK) == 0);    /* live: kept */
    assert(access(paths[2], F_OK) == 0);    /* not ours: kept */
    close(fds[1]);
    for (int i = 0; i < 3; i++)
        unlink(paths[i]);
    rmdir(d);
}
