#include "wire/zt_guard.h"
#include "ztrain/zt_log.h"
#include "base/zt_refusals.h"
#include "base/zt_util.h"
#include "base/zt_env.h"
#include <arpa/inet.h>
#include <assert.h>
#include <dirent.h>
#include <limits.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define NEVER "255.255.255.255" /* no connection comes from it: a filter that refuses all */
#define IPC_PEER "(ipc)"        /* a connection over the ipc:// twin: this user's own */

static atomic_uint_fast64_t s_refused;
static atomic_int s_seq;

uint64_t zt_guard_refused(void) { return (uint64_t) atomic_load(&s_refused); }

void zt_guard_filter(zsock_t *router, char *const *addrs, int n)
{
    if (n == 0)
        zsock_set_tcp_accept_filter(router, NEVER);
    for (int i = 0; i < n; i++)
        zsock_set_tcp_accept_filter(router, addrs[i]);
}

/* ------------------------------------------------------------ /proc/net/tcp */

/* An address as /proc/net/tcp{,6} writes it (hex words in host order). */
static bool s_hex_addr(const char *hex, size_t len, char *out, size_t size)
{
    struct sockaddr_in6 a6 = { .sin6_family = AF_INET6 };
    struct sockaddr_in a4 = { .sin_family = AF_INET };
    if (len == 8) {
        a4.sin_addr.s_addr = (uint32_t) strtoul(hex, NULL, 16);
        return zt_sockaddr_name((struct sockaddr *) &a4, out, size);
    }
    if (len != 32)
        return false;
    for (int w = 0; w < 4; w++) {
        char word[9];
        memcpy(word, hex + 8 * w, 8);
        word[8] = 0;
        uint32_t v = (uint32_t) strtoul(word, NULL, 16);
        memcpy(&a6.sin6_addr.s6_addr[4 * w], &v, 4);
    }
    return zt_sockaddr_name((struct sockaddr *) &a6, out, size);
}

/* One socket of this host's TCP tables (not a listener). */
typedef struct {
    char local[64], remote[64]; /* addresses */
    int lport, rport;
    unsigned st;                /* 0x01 established, ... */
    long uid;                   /* its owner; -1: not known (TIME_WAIT, no socket) */
    unsigned long inode;        /* its socket's; 0: none */
} s_row_t;

/* One line of /proc/net/tcp{,6} into r; false for a listener or what is
 * not a row. */
static bool s_parse_row(const char *line, s_row_t *r)
{
    char local[40], remote[40];
    r->inode = 0;
    if (sscanf(line, " %*d: %39s %39s %x %*s %*s %*s %ld %*d %lu", local, remote, &r->st, &r->uid, &r->inode) != 5)
        return false;
    if (r->st == 0x06 || r->inode == 0) /* TIME_WAIT, or no socket behind it: the kernel's row, uid 0 */
        r->uid = -1;                 /* whose it was is not known */
    char *lp = strchr(local, ':'), *rp = strchr(remote, ':');
    if (!lp || !rp || r->st == 0x0A || !s_hex_addr(local, (size_t) (lp - local), r->local, sizeof r->local) ||
        !s_hex_addr(remote, (size_t) (rp - remote), r->remote, sizeof r->remote))
        return false;
    r->lport = (int) strtol(lp + 1, NULL, 16);
    r->rport = (int) strtol(rp + 1, NULL, 16);
    return true;
}

/* Calls fn for every socket of /proc/net/tcp and /proc/net/tcp6 but the
 * listeners; fn returns false to stop. */
static void s_each_row(bool (*fn)(const s_row_t *, void *), void *ctx)
{
    static const char *const tables[] = { "/proc/net/tcp", "/proc/net/tcp6" };
    bool go = true;
    for (int t = 0; t < 2 && go; t++) {
        FILE *f = fopen(tables[t], "re");
        char line[512];
        while (f && go && fgets(line, sizeof line, f)) {
            s_row_t r;
            if (s_parse_row(line, &r))
                go = fn(&r, ctx);
        }
        if (f)
            fclose(f);
    }
}

typedef struct {
    char addr[64];
    long uid; /* -1: not known (a socket of another host, or one closing) */
    int count;
} s_seen_t;

typedef struct {
    int port;
    uid_t me;
    s_seen_t seen[32];
    int n;
} s_sources_t;

static void s_tally(s_sources_t *c, const char *addr, long uid)
{
    for (int i = 0; i < c->n; i++)
        if (c->seen[i].uid == uid && !strcmp(c->seen[i].addr, addr)) {
            c->seen[i].count++;
            return;
        }
    if (c->n < (int) (sizeof c->seen / sizeof *c->seen)) {
        snprintf(c->seen[c->n].addr, sizeof c->seen[c->n].addr, "%s", addr);
        c->seen[c->n].uid = uid;
        c->seen[c->n++].count = 1;
    }
}

/* A socket of this host connecting to the port (its owner is known), or
 * this side of a connection to the port that is closing. Our own
 * established connections are the job's, not a source. */
static bool s_source_row(const s_row_t *r, void *ctx)
{
    s_sources_t *c = ctx;
    if (r->rport == c->port && !(r->st == 0x01 && r->uid == (long) c->me))
        s_tally(c, r->local, r->uid);
    else if (r->lport == c->port && r->st != 0x01)
        s_tally(c, r->remote, -1);
    return true;
}

static void s_describe(const char *addr, long uid, char *out, size_t len)
{
    if (uid < 0) {
        snprintf(out, len, "%s", addr);
        return;
    }
    struct passwd pw, *res = NULL;
    char buf[1024];
    if (getpwuid_r((uid_t) uid, &pw, buf, sizeof buf, &res) == 0 && res)
        snprintf(out, len, "%s (user %s, uid %ld)", addr, res->pw_name, uid);
    else
        snprintf(out, len, "%s (uid %ld)", addr, uid);
}

void zt_guard_source(int port, char *out, size_t len)
{
    s_sources_t c = { .port = port, .me = geteuid() };
    s_each_row(s_source_row, &c);
    int best = -1;
    for (int i = 0; i < c.n; i++) /* an owner known beats a count */
        if (best < 0 || (c.seen[i].uid >= 0) > (c.seen[best].uid >= 0) ||
            ((c.seen[i].uid >= 0) == (c.seen[best].uid >= 0) && c.seen[i].count > c.seen[best].count))
            best = i;
    if (best < 0) {
        snprintf(out, len, "%s", "");
        return;
    }
    s_describe(c.seen[best].addr, c.seen[best].uid, out, len);
}

/* ------------------------------------------------------------ connections per address */

/* The TCP ports this process's routers listen on (their watches'), and the
 * connections to them counted from the kernel's own table when a handshake
 * asks: the count holds at that moment, whatever a watch's thread has
 * still to read. */
static pthread_mutex_t s_ports_lock = PTHREAD_MUTEX_INITIALIZER;
static int s_ports[64];
static int s_nports;

static void s_port(int port, bool add)
{
    pthread_mutex_lock(&s_ports_lock);
    if (add && s_nports < (int) (sizeof s_ports / sizeof *s_ports))
        s_ports[s_nports++] = port;
    for (int i = 0; !add && i < s_nports; i++)
        if (s_ports[i] == port) {
            s_ports[i] = s_ports[--s_nports];
            break;
        }
    pthread_mutex_unlock(&s_ports_lock);
}

typedef struct {
    const char *addr;
    int ports[64], nports;
    unsigned long *inodes; /* the established sockets on those ports, from addr */
    size_t n, cap;
} s_conns_t;

static bool s_conn_row(const s_row_t *r, void *ctx)
{
    s_conns_t *c = ctx;
    if (r->st != 0x01 || r->inode == 0 || strcmp(r->remote, c->addr))
        return true;
    for (int i = 0; i < c->nports; i++)
        if (r->lport == c->ports[i]) {
            if (c->n == c->cap) {
                size_t cap = c->cap ? 2 * c->cap : 64;
                unsigned long *grown = realloc(c->inodes, cap * sizeof *grown);
                if (!grown)
                    return false;
                c->inodes = grown;
                c->cap = cap;
            }
            c->inodes[c->n++] = r->inode;
            break;
        }
    return true;
}

static int s_inode_cmp(const void *a, const void *b)
{
    unsigned long x = *(const unsigned long *) a, y = *(const unsigned long *) b;
    return (x > y) - (x < y);
}

/* How many of the sockets are this process's own, its fd table read
 * once. A port bound here may still carry another process's established
 * connections (one that listened on it before and kept what it accepted,
 * or whose outgoing connection took it as its own port): those are not
 * connections to our routers. */
static int s_count_mine(unsigned long *inodes, size_t n)
{
    qsort(inodes, n, sizeof *inodes, s_inode_cmp);
    DIR *d = opendir("/proc/self/fd");
    int mine = 0;
    char link[64], path[300];
    for (struct dirent *e; d && (e = readdir(d));) {
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t len = readlink(path, link, sizeof link - 1);
        unsigned long inode;
        if (len <= 0)
            continue;
        link[len] = 0;
        if (sscanf(link, "socket:[%lu]", &inode) == 1 && bsearch(&inode, inodes, n, sizeof *inodes, s_inode_cmp))
            mine++;
    }
    if (d)
        closedir(d);
    return mine;
}

int zt_guard_connections(const char *addr)
{
    s_conns_t c = { .addr = addr };
    pthread_mutex_lock(&s_ports_lock);
    memcpy(c.ports, s_ports, sizeof s_ports);
    c.nports = s_nports;
    pthread_mutex_unlock(&s_ports_lock);
    if (c.nports > 0)
        s_each_row(s_conn_row, &c);
    int n = c.n ? s_count_mine(c.inodes, c.n) : 0;
    free(c.inodes);
    return n;
}

int64_t zt_guard_connection_limit(void)
{
    int64_t v;
    return zt_env_int(ZT_ENV_PEER_CONNECTIONS, &v) && v > 0 ? v : ZT_PEER_CONNECTIONS_DEFAULT;
}

/* The sockets this process holds: a bound on the connections any one
 * address holds to it, read from /proc/self/fd alone (the count by
 * address walks the kernel's whole table of TCP sockets, milliseconds a
 * read where it is large). INT_MAX when it cannot be read. */
static int s_my_sockets(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return INT_MAX;
    int n = 0;
    char link[64], path[300];
    for (struct dirent *e; (e = readdir(d));) {
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t got = readlink(path, link, sizeof link - 1);
        n += got > 7 && !strncmp(link, "socket:", 7);
    }
    closedir(d);
    return n;
}

bool zt_guard_admit(const char *addr, char *why, size_t len)
{
    if (!strncmp(addr, "::ffff:", 7) && strchr(addr + 7, '.'))
        addr += 7; /* an IPv4 peer of an IPv6 socket, as the watch names it */
    if (!*addr)
        return true; /* not TCP: the ipc twin, this user's own */
    int64_t limit = zt_guard_connection_limit();
    if (s_my_sockets() <= limit)
        return true; /* no address can hold more than the process has */
    int n = zt_guard_connections(addr); /* this one among them */
    bool ok = n <= limit;
    if (!ok)
        snprintf(why, len, "%s holds %d connections to this process, more than %s=%lld allows", addr, n,
                 zt_env_name(ZT_ENV_PEER_CONNECTIONS), (long long) limit);
    return ok;
}

/* ------------------------------------------------------------ the watch */

typedef struct {
    int fd;
    char addr[48]; /* its peer's address, IPC_PEER for the twin's */
} s_conn_t;

struct zt_guard_t {
    pthread_t thread;
    void *pair; /* the monitor's other end (the thread's) */
    int port;
    bool filtered;
    char endpoint[48];
    s_conn_t *conns; /* accepted connections not yet ended (the thread's) */
    int nconns;
    zt_refusals_t log; /* a listener's (zt_guard_listen) */
};

/* A connection accepted (its peer named) or ended (its entry gone, its
 * address in ended). */
static void s_conn_add(zt_guard_t *g, int fd, const char *addr)
{
    s_conn_t *grown = realloc(g->conns, (size_t) (g->nconns + 1) * sizeof *grown);
    if (!grown)
        return;
    g->conns = grown;
    g->conns[g->nconns] = (s_conn_t) { .fd = fd };
    snprintf(g->conns[g->nconns++].addr, sizeof g->conns[0].addr, "%s", addr);
}

static void s_conn_end(zt_guard_t *g, int fd, char *ended, size_t len)
{
    if (ended)
        ended[0] = 0;
    for (int i = 0; i < g->nconns; i++)
        if (g->conns[i].fd == fd) {
            if (ended)
                snprintf(ended, len, "%s", g->conns[i].addr);
            g->conns[i] = g->conns[--g->nconns];
            return;
        }
}

/* One refusal: counted, and logged (with its source, looked up only then)
 * at most once per 5 s. peer: the connection's address, when known. */
static void s_refuse(zt_guard_t *g, zt_refusals_t *log, const char *peer, const char *why)
{
    atomic_fetch_add(&s_refused, 1);
    int64_t now = zt_now_ms();
    if (!zt_refusals_log_due(log, now)) {
        zt_refusals_count(log, "", now);
        return;
    }
    char source[160] = "";
    zt_guard_source(g->port, source, sizeof source);
    if (peer && *peer && strncmp(source, peer, strlen(peer)))
        snprintf(source, sizeof source, "%s", peer); /* the scan saw someone else: the peer it is */
    char what[320];
    snprintf(what, sizeof what, "a connection to port %d from %s: %s", g->port, source[0] ? source : "an unseen address",
             why);
    zt_refusals_count(log, what, now);
}

static void s_peer_name(int fd, char *out, size_t len)
{
    struct sockaddr_storage a;
    socklen_t alen = sizeof a;
    out[0] = 0;
    if (getpeername(fd, (struct sockaddr *) &a, &alen) != 0)
        return;
    if (a.ss_family == AF_UNIX)
        snprintf(out, len, "%s", IPC_PEER);
    else
        zt_sockaddr_name((struct sockaddr *) &a, out, len);
}

/* The monitor's events, in the order the I/O thread made them: ACCEPTED
 * (the descriptor: its peer is noted at once), then for a failed handshake
 * HANDSHAKE_FAILED_* and DISCONNECTED (the same descriptor); a connection
 * the filter refused is one ACCEPT_FAILED. A handshake the ZAP handler
 * refused (HANDSHAKE_FAILED_AUTH) is zt_auth's to count. The thread ends at
 * MONITOR_STOPPED (zt_guard_unwatch) or when the context ends. */
static void *s_watch_main(void *arg)
{
    zt_guard_t *g = arg;
    zt_refusals_t log = { 0 };
    const char *failed = NULL;
    for (;;) {
        zmq_msg_t ev, ep;
        zmq_msg_init(&ev);
        if (zmq_msg_recv(&ev, g->pair, 0) < 0) {
            zmq_msg_close(&ev);
            if (zmq_errno() == ETERM)
                break;
            continue;
        }
        zmq_msg_init(&ep);
        zmq_msg_recv(&ep, g->pair, 0);
        uint16_t event = 0;
        uint32_t value = 0;
        if (zmq_msg_size(&ev) >= 6) {
            memcpy(&event, zmq_msg_data(&ev), 2);
            memcpy(&value, (char *) zmq_msg_data(&ev) + 2, 4);
        }
        zmq_msg_close(&ev);
        zmq_msg_close(&ep);
        if (event == ZMQ_EVENT_MONITOR_STOPPED)
            break;
        if (event == ZMQ_EVENT_ACCEPTED) {
            char peer[48];
            s_peer_name((int) value, peer, sizeof peer);
            s_conn_end(g, (int) value, NULL, 0); /* (an end not seen: its descriptor taken again) */
            s_conn_add(g, (int) value, peer);
        }
        else if (event == ZMQ_EVENT_ACCEPT_FAILED && g->filtered)
            s_refuse(g, &log, NULL, "not from one of the job's hosts (closed before any handshake)");
        else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL)
            failed = "a handshake that failed (not the job's keys, or not CURVE)";
        else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)
            failed = "a handshake cut short, or not done within ZT_HANDSHAKE_MS";
        else if (event == ZMQ_EVENT_DISCONNECTED) {
            char peer[48];
            s_conn_end(g, (int) value, peer, sizeof peer);
            /* a probe of the twin (zt_transport's sweep of dead ones) is no stranger's */
            if (failed && strcmp(peer, IPC_PEER))
                s_refuse(g, &log, peer, failed);
            failed = NULL;
        }
    }
    while (g->nconns > 0)
        s_conn_end(g, g->conns[0].fd, NULL, 0);
    free(g->conns);
    zmq_close(g->pair);
    return NULL;
}

zt_guard_t *zt_guard_watch(zsock_t *router, int port, bool filtered)
{
    zt_guard_t *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->port = port;
    g->filtered = filtered;
    snprintf(g->endpoint, sizeof g->endpoint, "inproc://zt-guard-%d-%d", (int) getpid(), atomic_fetch_add(&s_seq, 1));
    int events = ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_ACCEPT_FAILED | ZMQ_EVENT_DISCONNECTED |
                 ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                 ZMQ_EVENT_MONITOR_STOPPED;
    if (zmq_socket_monitor(zsock_resolve(router), g->endpoint, events) != 0 ||
        !(g->pair = zmq_socket(zsys_init(), ZMQ_PAIR)) || zmq_connect(g->pair, g->endpoint) != 0 ||
        pthread_create(&g->thread, NULL, s_watch_main, g) != 0) {
        zt_warn("port %d: refused connections will not be logged (%s)", port, zmq_strerror(zmq_errno()));
        zmq_socket_monitor(zsock_resolve(router), NULL, 0);
        if (g->pair)
            zmq_close(g->pair);
        free(g);
        return NULL;
    }
    s_port(port, true);
    return g;
}

void zt_guard_unwatch(zsock_t *router, zt_guard_t **guard_p)
{
    zt_guard_t *g = guard_p ? *guard_p : NULL;
    if (!g)
        return;
    *guard_p = NULL;
    s_port(g->port, false);
    if (router)
        zmq_socket_monitor(zsock_resolve(router), NULL, 0); /* sends MONITOR_STOPPED */
    pthread_join(g->thread, NULL);
    free(g);
}

/* ------------------------------------------------------------ listeners */

zt_guard_t *zt_guard_listen(int port, bool filtered)
{
    zt_guard_t *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->port = port;
    g->filtered = filtered;
    s_port(port, true);
    return g;
}

void zt_guard_refuse(zt_guard_t *g, const char *peer, const char *why) { s_refuse(g, &g->log, peer, why); }

void zt_guard_unlisten(zt_guard_t **guard_p)
{
    if (!guard_p || !*guard_p)
        return;
    s_port((*guard_p)->port, false);
    free(*guard_p);
    *guard_p = NULL;
}

/* ------------------------------------------------------------ held ports */

struct zt_hold_t {
    pthread_t thread;
    int fd;      /* the listener */
    int stop_fd; /* an eventfd: zt_guard_release */
    int port;
};

typedef struct {
    int peer_port, port;
    long uid;
} s_owner_t;

static bool s_owner_row(const s_row_t *r, void *ctx)
{
    s_owner_t *o = ctx;
    if (r->lport == o->peer_port && r->rport == o->port)
        o->uid = r->uid;
    return o->uid < 0;
}

/* By the connecting socket's entry in /proc/net/tcp{,6}: local port = the
 * peer's, remote port = ours. */
long zt_guard_owner(const struct sockaddr *peer, int port)
{
    if (peer->sa_family != AF_INET && peer->sa_family != AF_INET6)
        return -1;
    s_owner_t o = { ntohs(peer->sa_family == AF_INET ? ((const struct sockaddr_in *) peer)->sin_port
                                                     : ((const struct sockaddr_in6 *) peer)->sin6_port),
                    port, -1 };
    s_each_row(s_owner_row, &o);
    return o.uid;
}

static void *s_hold_main(void *arg)
{
    zt_hold_t *h = arg;
    zt_refusals_t log = { 0 };
    int64_t last = 0;
    for (;;) {
        struct pollfd p[2] = { { .fd = h->stop_fd, .events = POLLIN }, { .fd = h->fd, .events = POLLIN } };
        int64_t wait = last ? 1000 - (zt_now_ms() - last) : 0; /* one a second */
        if (poll(p, wait > 0 ? 1 : 2, wait > 0 ? (int) wait : -1) < 0 && errno != EINTR)
            break;
        if (p[0].revents)
            break;
        if (wait > 0 || !(p[1].revents & POLLIN))
            continue;
        struct sockaddr_storage peer;
        socklen_t plen = sizeof peer;
        int c = accept4(h->fd, (struct sockaddr *) &peer, &plen, SOCK_CLOEXEC);
        last = zt_now_ms();
        if (c < 0)
            continue;
        atomic_fetch_add(&s_refused, 1);
        if (zt_refusals_log_due(&log, last)) {
            char addr[64], source[160], what[320];
            if (!zt_sockaddr_name((struct sockaddr *) &peer, addr, sizeof addr))
                snprintf(addr, sizeof addr, "?");
            s_describe(addr, zt_guard_owner((struct sockaddr *) &peer, h->port), source, sizeof source);
            snprintf(what, sizeof what, "a connection to port %d from %s: this job has no TCP peer (its replicas "
                     "are on one host); the port is held, not served", h->port, source);
            zt_refusals_count(&log, what, last);
        }
        else
            zt_refusals_count(&log, "", last);
        close(c);
    }
    return NULL;
}

/* Binds fd to addr, port spec ("5555", "*", "*[LO-]", "*[LO-HI]"). */
static int s_hold_bind(int fd, struct sockaddr_storage *a, socklen_t alen, const char *spec)
{
    int lo = 0, hi = 0;
    if (spec[0] != '*')
        lo = hi = atoi(spec);
    else if (spec[1] == '[') {
        lo = atoi(spec + 2);
        const char *dash = strchr(spec, '-');
        hi = dash && dash[1] != ']' ? atoi(dash + 1) : 65535;
    }
    for (int port = lo; port <= hi; port++) {
        if (a->ss_family == AF_INET)
            ((struct sockaddr_in *) a)->sin_port = htons((uint16_t) port);
        else
            ((struct sockaddr_in6 *) a)->sin6_port = htons((uint16_t) port);
        if (bind(fd, (struct sockaddr *) a, alen) == 0)
            return 0;
        if (errno != EADDRINUSE)
            return -1;
    }
    return -1;
}

zt_hold_t *zt_guard_hold(const char *endpoint, int *port_p)
{
    const char *host = !strncmp(endpoint, "tcp://", 6) ? endpoint + 6 : endpoint;
    const char *colon = strrchr(host, ':');
    if (!colon) {
        zt_error("cannot hold %s: not a TCP endpoint", endpoint);
        return NULL;
    }
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int) (colon - host), host);
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE }, *res = NULL;
    int gai = getaddrinfo(strcmp(name, "*") ? name : NULL, "0", &hints, &res);
    if (gai != 0 || !res) {
        zt_error("cannot hold %s: %s", endpoint, gai_strerror(gai));
        return NULL;
    }
    zt_hold_t *h = calloc(1, sizeof *h);
    if (!h) {
        freeaddrinfo(res);
        return NULL;
    }
    struct sockaddr_storage a;
    socklen_t alen = (socklen_t) res->ai_addrlen;
    memcpy(&a, res->ai_addr, res->ai_addrlen);
    int family = res->ai_family, one = 1;
    freeaddrinfo(res);
    h->fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    h->stop_fd = eventfd(0, EFD_CLOEXEC);
    if (h->fd < 0 || h->stop_fd < 0 || setsockopt(h->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        s_hold_bind(h->fd, &a, alen, colon + 1) != 0 || listen(h->fd, 0) != 0 ||
        getsockname(h->fd, (struct sockaddr *) &a, &alen) != 0) {
        zt_error("cannot hold %s: %s", endpoint, strerror(errno));
        goto fail;
    }
    h->port = ntohs(family == AF_INET ? ((struct sockaddr_in *) &a)->sin_port
                                      : ((struct sockaddr_in6 *) &a)->sin6_port);
    if (pthread_create(&h->thread, NULL, s_hold_main, h) != 0) {
        zt_error("cannot hold %s: %s", endpoint, strerror(errno));
        goto fail;
    }
    *port_p = h->port;
    return h;
fail:
    if (h->fd >= 0)
        close(h->fd);
    if (h->stop_fd >= 0)
        close(h->stop_fd);
    free(h);
    return NULL;
}

void zt_guard_release(zt_hold_t **hold_p)
{
    zt_hold_t *h = hold_p ? *hold_p : NULL;
    if (!h)
        return;
    *hold_p = NULL;
    uint64_t one = 1;
    if (write(h->stop_fd, &one, sizeof one) != (ssize_t) sizeof one)
        zt_warn("port %d: cannot stop its guard", h->port);
    pthread_join(h->thread, NULL);
    close(h->fd);
    close(h->stop_fd);
    free(h);
}

/* ------------------------------------------------------------ selftest */

void zt_guard_selftest_rows(void)
{
    /* a connection's row, and rows whose uid 0 is the kernel's: TIME_WAIT, no inode */
    s_row_t row;
    assert(s_parse_row("   3: 0100007F:9C40 0100007F:0050 01 00000000:00000000 00:00000000 00000000  1001        0 "
                       "4242 1 0000000000000000 20 4 30 10 -1", &row) && row.uid == 1001 && row.lport == 0x9C40 &&
           row.rport == 0x50 && !strcmp(row.local, "127.0.0.1"));
    assert(s_parse_row("   4: 0100007F:9C41 0100007F:0050 06 00000000:00000000 03:00000F7E 00000000     0        0 "
                       "0 3 0000000000000000", &row) && row.uid == -1);
    assert(s_parse_row("   5: 0100007F:9C42 0100007F:0050 01 00000000:00000000 00:00000000 00000000     0        0 "
                       "0 1 0000000000000000 20 4 30 10 -1", &row) && row.uid == -1);
    assert(!s_parse_row("   6: 00000000:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 "
                        "77 1 0000000000000000 100 0 0 10 0", &row)); /* a listener */
}
