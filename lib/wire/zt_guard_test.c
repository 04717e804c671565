/* zt_guard's selftest: its /proc rows' reader (zt_guard_selftest_rows,
 * beside it), then real sockets and another process: the filter, the
 * refusal count, a connection's source, the per-address limit. */
#include "wire/zt_guard.h"
#include "base/zt_util.h"
#include <arpa/inet.h>
#include <assert.h>
#include <czmq.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>


/* Another process that listened on a port and still holds a connection it
 * accepted there, the port then free to bind: returns its port, *child and
 * *hold (closing hold ends it) and our end of that connection *client. */
static int s_selftest_squatter(pid_t *child, int *hold, int *client)
{
    int up[2], down[2];
    assert(pipe(up) == 0 && pipe(down) == 0);
    *child = fork();
    assert(*child >= 0);
    if (*child == 0) {
        close(up[0]);
        close(down[1]);
        int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        struct sockaddr_in a = { .sin_family = AF_INET };
        socklen_t alen = sizeof a;
        inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
        if (setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) || bind(l, (struct sockaddr *) &a, alen) ||
            listen(l, 1) || getsockname(l, (struct sockaddr *) &a, &alen))
            _exit(1);
        int port = ntohs(a.sin_port);
        if (write(up[1], &port, sizeof port) != sizeof port)
            _exit(1);
        int c = accept(l, NULL, NULL);
        close(l);
        char x = 1;
        if (c < 0 || write(up[1], &x, 1) != 1)
            _exit(1);
        (void) !read(down[0], &x, 1); /* until the parent closes its end */
        _exit(0);
    }
    close(up[1]);
    close(down[0]);
    int port = 0, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert(read(up[0], &port, sizeof port) == sizeof port && port > 0 && fd >= 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t) port) };
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    char x;
    assert(connect(fd, (struct sockaddr *) &a, sizeof a) == 0 && read(up[0], &x, 1) == 1);
    close(up[0]);
    *client = fd;
    *hold = down[1];
    return port;
}

/* Connections counted by address while they live (another process's on
 * the same port not among them), and an address past ZT_PEER_CONNECTIONS
 * refused; a watch that ends takes its own away. */
static void s_selftest_counts(void)
{
    /* the port comes with another process's connection on it: not ours */
    pid_t child;
    int hold, client, status;
    int port = s_selftest_squatter(&child, &hold, &client);
    zsock_t *r = zsock_new(ZMQ_ROUTER);
    char *allow[] = { "127.0.0.1" };
    zt_guard_filter(r, allow, 1);
    assert(zsock_bind(r, "tcp://127.0.0.1:%d", port) == port);
    zt_guard_t *g = zt_guard_watch(r, port, true);
    assert(g && zt_guard_connections("127.0.0.1") == 0);
    close(client);
    close(hold);
    assert(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    int fds[3];
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t) port) };
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    for (int i = 0; i < 3; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert(fds[i] >= 0 && connect(fds[i], (struct sockaddr *) &a, sizeof a) == 0);
    }
    for (int i = 0; i < 300 && zt_guard_connections("127.0.0.1") < 3; i++)
        usleep(10000);
    assert(zt_guard_connections("127.0.0.1") == 3);
    close(fds[0]);
    for (int i = 0; i < 300 && zt_guard_connections("127.0.0.1") > 2; i++)
        usleep(10000);
    assert(zt_guard_connections("127.0.0.1") == 2);
    char why[200];
    setenv("ZT_PEER_CONNECTIONS", "2", 1);
    assert(zt_guard_admit("127.0.0.1", why, sizeof why) && zt_guard_admit("", why, sizeof why));
    setenv("ZT_PEER_CONNECTIONS", "1", 1);
    assert(!zt_guard_admit("127.0.0.1", why, sizeof why) && strstr(why, "ZT_PEER_CONNECTIONS=1"));
    assert(!zt_guard_admit("::ffff:127.0.0.1", why, sizeof why) && zt_guard_admit("10.9.9.9", why, sizeof why));
    unsetenv("ZT_PEER_CONNECTIONS");
    assert(zt_guard_connection_limit() == ZT_PEER_CONNECTIONS_DEFAULT);
    zt_guard_unwatch(r, &g);
    assert(zt_guard_connections("127.0.0.1") == 0);
    close(fds[1]);
    close(fds[2]);
    zsock_destroy(&r);
}

void zt_guard_selftest(void)
{
    zt_guard_selftest_rows();
    /* a router that accepts nobody: a connection from here is closed at
     * once, counted, and its source is this user's socket */
    zsock_t *r = zsock_new(ZMQ_ROUTER);
    zt_guard_filter(r, NULL, 0);
    int port = zsock_bind(r, "tcp://127.0.0.1:*");
    assert(port > 0);
    zt_guard_t *g = zt_guard_watch(r, port, true);
    assert(g);
    uint64_t before = zt_guard_refused();
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t) port) };
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    assert(fd >= 0 && connect(fd, (struct sockaddr *) &a, sizeof a) == 0);
    char c;
    assert(read(fd, &c, 1) <= 0); /* closed before any greeting */
    for (int i = 0; i < 200 && zt_guard_refused() == before; i++)
        usleep(10000);
    assert(zt_guard_refused() == before + 1);
    char src[160], want[64];
    zt_guard_source(port, src, sizeof src); /* our socket waits in CLOSE_WAIT until closed */
    snprintf(want, sizeof want, "uid %u)", (unsigned) geteuid());
    assert(!strncmp(src, "127.0.0.1 (", 11) && strstr(src, want));
    close(fd);
    /* an allowed address passes the filter: the handshake goes on (plain
     * here), and nothing is counted */
    zsock_t *open_r = zsock_new(ZMQ_ROUTER);
    char *allow[] = { "127.0.0.1" };
    zt_guard_filter(open_r, allow, 1);
    int port2 = zsock_bind(open_r, "tcp://127.0.0.1:*");
    assert(port2 > 0);
    zsock_t *d = zsock_new(ZMQ_DEALER);
    assert(zsock_connect(d, "tcp://127.0.0.1:%d", port2) == 0);
    zstr_send(d, "hello");
    zsock_set_rcvtimeo(open_r, 3000);
    zmsg_t *m = zmsg_recv(open_r);
    assert(m && zmsg_size(m) == 2);
    zmsg_destroy(&m);
    zsock_destroy(&d);
    zsock_destroy(&open_r);
    zt_guard_unwatch(r, &g);
    assert(!g);
    zt_guard_unwatch(r, &g); /* safe twice */
    zsock_destroy(&r);
    s_selftest_counts();
}
