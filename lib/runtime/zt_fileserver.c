#include "runtime/zt_fileserver.h"
#include "wire/zt_msg.h"
#include "wire/zt_transport.h"
#include "base/zt_util.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_log.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define CHUNK ZT_FILESERVER_CHUNK

struct zt_fileserver_t {
    zactor_t *actor;        /* serves on its own thread */
    char *endpoint;         /* where, as asked */
    char bound[256];        /* where, resolved */
    char *roots[8][2];      /* name, directory */
    int nroots;
};

/* "root/rel": the root's directory and rel, or false if refused. */
static bool s_resolve(zt_fileserver_t *self, const char *path, const char **dir, const char **rel)
{
    if (path[0] == '/' || strstr(path, ".."))
        return false;
    for (int i = 0; i < self->nroots; i++) {
        size_t n = strlen(self->roots[i][0]);
        if (!strncmp(path, self->roots[i][0], n) && path[n] == '/' && path[n + 1]) {
            *dir = self->roots[i][1];
            *rel = path + n + 1;
            return true;
        }
    }
    return false;
}

/* Opens rel beneath dir, following no symbolic link on the way (openat2
 * with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS; on a kernel without it, one
 * component at a time with O_NOFOLLOW), and only a regular file. -1 with
 * errno: ELOOP for a link, EXDEV for an escape, EISDIR/EINVAL for not a
 * plain file. */
static int s_open_beneath(const char *dir, const char *rel)
{
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    /* O_NONBLOCK: a FIFO planted in a served folder must not block the
     * server in open(); it is refused below as not a plain file */
    if (dfd < 0)
        return -1;
    struct open_how how = { .flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK,
                            .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
    int fd = (int) syscall(SYS_openat2, dfd, rel, &how, sizeof how);
    if (fd < 0 && errno == ENOSYS) { /* before Linux 5.6 */
        char *copy = strdup(rel), *save = NULL, *next;
        int at = dup(dfd);
        char *part = strtok_r(copy, "/", &save);
        while (part && at >= 0) {
            next = strtok_r(NULL, "/", &save);
            int f = openat(at, part, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | (next ? O_DIRECTORY : 0));
            close(at);
            at = f;
            part = next;
        }
        free(copy);
        fd = at;
    }
    int saved = errno;
    close(dfd);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
        close(fd);
        fd = -1;
        saved = EINVAL;
    }
    errno = saved;
    return fd;
}

int64_t zt_fileserver_answer(zt_fileserver_t *self, const void *body, size_t len, zt_msg_t *r, void *buf)
{
    zt_msg_t m;
    if (zt_msg_decode(body, len, &m, NULL) != ZT_OK || m.type != ZT_MSG_FILE_GET)
        return -1;
    *r = (zt_msg_t) { .type = ZT_MSG_FILE_DATA };
    r->u.FILE_DATA.req = m.u.FILE_GET.req;
    r->u.FILE_DATA.offset = m.u.FILE_GET.offset;
    const char *dir = NULL, *rel = NULL;
    bool named = s_resolve(self, m.u.FILE_GET.path, &dir, &rel);
    int fd = named ? s_open_beneath(dir, rel) : -1;
    ssize_t n = 0;
    if (!named || (fd < 0 && errno != ENOENT && errno != ENOTDIR))
        r->u.FILE_DATA.code = ZT_FILE_DENIED; /* a link, an escape, not a plain file */
    else if (fd < 0)
        r->u.FILE_DATA.code = ZT_FILE_NOT_FOUND;
    else {
        struct stat st;
        fstat(fd, &st);
        r->u.FILE_DATA.size = st.st_size;
        int64_t want = m.u.FILE_GET.length > CHUNK || m.u.FILE_GET.length <= 0 ? CHUNK : m.u.FILE_GET.length;
        n = m.u.FILE_GET.offset >= 0 ? pread(fd, buf, (size_t) want, (off_t) m.u.FILE_GET.offset) : -1;
        if (n < 0)
            n = 0;
    }
    if (fd >= 0)
        close(fd);
    return (int64_t) n;
}

static void s_actor(zsock_t *pipe, void *arg)
{
    zt_fileserver_t *self = arg;
    int port = -1;
    zsock_t *router = zt_sock_router(ZT_PLANE_CONTROL, self->endpoint, &port);
    int ok = router != NULL;
    if (ok) {
        snprintf(self->bound, sizeof self->bound, "%s", self->endpoint);
        char *star = strrchr(self->bound, '*');
        if (star)
            snprintf(star, sizeof self->bound - (size_t) (star - self->bound), "%d", port);
    }
    zsock_signal(pipe, 0);
    if (!ok)
        zt_warn("file server cannot bind %s", self->endpoint);
    zpoller_t *poller = zpoller_new(pipe, ok ? router : NULL, NULL);
    zpoller_set_nonstop(poller, true);
    char *buf = malloc(CHUNK);
    for (;;) {
        void *which = zpoller_wait(poller, -1);
        if (which == pipe || !which)
            break;
        zmsg_t *zm = zmsg_recv(router);
        zframe_t *id = zmsg_pop(zm), *body = zmsg_pop(zm);
        zt_msg_t r;
        int64_t n = body ? zt_fileserver_answer(self, zframe_data(body), zframe_size(body), &r, buf) : -1;
        if (n >= 0) {
            zframe_t *h = zt_msg_encode(&r);
            zframe_send(&id, router, ZFRAME_MORE);
            zframe_send(&h, router, ZFRAME_MORE);
            zframe_t *data = zframe_new(buf, (size_t) n);
            zframe_send(&data, router, 0);
        }
        zframe_destroy(&id);
        zframe_destroy(&body);
        zmsg_destroy(&zm);
    }
    free(buf);
    zpoller_destroy(&poller);
    zt_sock_destroy(&router);
}

zt_fileserver_t *zt_fileserver_new(const char *endpoint, const char *const (*roots)[2], int n)
{
    zt_fileserver_t *self = calloc(1, sizeof *self);
    self->endpoint = endpoint ? strdup(endpoint) : NULL;
    for (int i = 0; i < n && i < 8; i++) {
        self->roots[i][0] = strdup(roots[i][0]);
        self->roots[i][1] = strdup(roots[i][1]);
        self->nroots++;
    }
    if (endpoint)
        self->actor = zactor_new(s_actor, self);
    return self;
}

const char *zt_fileserver_endpoint(zt_fileserver_t *self)
{
    return self->bound[0] ? self->bound : NULL;
}

void zt_fileserver_destroy(zt_fileserver_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zt_fileserver_t *self = *self_p;
    zactor_destroy(&self->actor);
    for (int i = 0; i < self->nroots; i++) {
        free(self->roots[i][0]);
        free(self->roots[i][1]);
    }
    free(self->endpoint);
    free(self);
    *self_p = NULL;
}

int zt_file_fetch(zsock_t *dealer, const char *remote, const char *local, int timeout_ms,
                  char *err, size_t errlen)
{
    char *data = NULL;
    int64_t size = -1, got = 0, req = 0;
    int rc = ZT_OK;
    while (size < 0 || got < size) {
        zt_msg_t m = { .type = ZT_MSG_FILE_GET, .pool = 3 };
        m.u.FILE_GET.req = ++req;
        zt_msg_set_str(m.u.FILE_GET.path, remote);
        m.u.FILE_GET.offset = got;
        m.u.FILE_GET.length = CHUNK;
        if (zt_msg_send(dealer, NULL, &m) != 0) { /* ZMQ_IMMEDIATE, and no server to take it */
            snprintf(err, errlen, "%s: the file server is not there (its replica ended?)", remote);
            rc = ZT_EIO;
            break;
        }
        zsock_set_rcvtimeo(dealer, timeout_ms);
        zmsg_t *reply = NULL;
        zt_msg_t r;
        for (;;) { /* skip late replies to earlier requests */
            zmsg_destroy(&reply);
            reply = zmsg_recv(dealer);
            if (!reply)
                break;
            zframe_t *h = zmsg_first(reply);
            if (h && zt_msg_decode(zframe_data(h), zframe_size(h), &r, NULL) == ZT_OK &&
                r.type == ZT_MSG_FILE_DATA && r.u.FILE_DATA.req == req)
                break;
        }
        if (!reply) {
            snprintf(err, errlen, "%s: no answer within %d ms", remote, timeout_ms);
            rc = ZT_ETIMEDOUT;
            break;
        }
        zframe_t *payload = zmsg_next(reply);
        if (r.u.FILE_DATA.code) {
            snprintf(err, errlen, "%s: %s", remote, r.u.FILE_DATA.code == ZT_FILE_DENIED
                     ? "refused" : "not found");
            zmsg_destroy(&reply);
            rc = ZT_ENOTFOUND;
            break;
        }
        if (size < 0) {
            size = r.u.FILE_DATA.size;
            if (size < 0 || size > ((int64_t) 1 << 34)) {
                snprintf(err, errlen, "%s: implausible size", remote);
                zmsg_destroy(&reply);
                rc = ZT_EPROTO;
                break;
            }
            data = malloc((size_t) size + 1);
        }
        size_t n = payload ? zframe_size(payload) : 0;
        if (n == 0 && got < size) {
            snprintf(err, errlen, "%s: the file shrank while being read", remote);
            zmsg_destroy(&reply);
            rc = ZT_EIO;
            break;
        }
        if ((int64_t) n > size - got)
            n = (size_t) (size - got);
        memcpy(data + got, zframe_data(payload), n);
        got += (int64_t) n;
        zmsg_destroy(&reply);
    }
    if (rc == ZT_OK && zt_write_file_atomic(local, data ? data : "", (size_t) got) != ZT_OK) {
        snprintf(err, errlen, "%s: cannot write %s: %s", remote, local, strerror(errno));
        rc = ZT_EIO;
    }
    free(data);
    return rc;
}
