#include "runtime/zt_fileserver.h"
#include "runtime/zt_process.h"
#include "wire/zt_msg.h"
#include "wire/zt_bulk.h"
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

/* One request: [id][header] (opened when it came sealed), answered with
 * FILE_DATA and the bytes, sealed on the stream it came on. */
static void s_serve(zt_fileserver_t *self, zt_bulk_server_t *srv, zt_refusals_t *refused, char *buf)
{
    zmq_msg_t parts[4]; /* id, header, seal, payload */
    int n = zt_bulk_server_recv(srv, parts, 4);
    if (n == ZT_EPROTO)
        zt_process_refused(refused, NULL, "seal_refused", ZT_PROCESS_UNSEALED);
    if (n <= 0)
        return; /* nothing, a stream's opening answered, or dropped (counted) */
    zt_msg_t r;
    int64_t got = n >= 2 ? zt_fileserver_answer(self, zmq_msg_data(&parts[1]), zmq_msg_size(&parts[1]), &r, buf) : -1;
    if (got >= 0) /* sealed to another host's client, else a copy (buf is reused) */
        zt_bulk_reply(srv, &parts[0], &r, buf, (size_t) got, NULL);
    zt_msg_close_parts(parts, n);
}

/* The server's thread. In a job that seals its bulk data the socket is a
 * bulk one (no CURVE): another host's evaluator opens a sealed stream, this
 * host's comes over the ipc twin; else a CURVE socket of the control plane. */
static void s_actor(zsock_t *pipe, void *arg)
{
    zt_fileserver_t *self = arg;
    int port = -1;
    zt_bulk_server_t *srv = zt_bulk_bind(ZT_PLANE_CONTROL, self->endpoint, &port);
    int ok = srv != NULL;
    if (ok) {
        snprintf(self->bound, sizeof self->bound, "%s", self->endpoint);
        char *star = strrchr(self->bound, '*');
        if (star)
            snprintf(star, sizeof self->bound - (size_t) (star - self->bound), "%d", port);
    }
    zsock_signal(pipe, 0);
    if (!ok)
        zt_warn("file server cannot bind %s", self->endpoint);
    zpoller_t *poller = zpoller_new(pipe, ok ? zt_bulk_server_socket(srv) : NULL, NULL);
    zpoller_set_nonstop(poller, true);
    char *buf = malloc(CHUNK);
    zt_refusals_t refused = { 0 };
    for (;;) {
        void *which = zpoller_wait(poller, -1);
        if (which == pipe || !which)
            break;
        s_serve(self, srv, &refused, buf);
    }
    free(buf);
    zpoller_destroy(&poller);
    zt_bulk_server_destroy(&srv);
    zt_seal_thread_done(); /* this thread keyed its streams: its crypto state goes before zactor_destroy returns */
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

/* The answer to request req within timeout_ms: parts [header][payload?]
 * (*np of them, opened when sealed), its header in *r; late answers to
 * earlier requests and what does not open are skipped. */
static int s_answer(zt_bulk_t *way, int64_t req, int timeout_ms, zmq_msg_t *parts, int *np, zt_msg_t *r)
{
    int64_t deadline = zt_now_ms() + timeout_ms;
    zmq_pollitem_t it = zt_bulk_item(way);
    for (;;) {
        int64_t left = deadline - zt_now_ms();
        if (left <= 0 || zmq_poll(&it, 1, (long) left) <= 0)
            return ZT_ETIMEDOUT;
        *np = zt_bulk_recv(way, parts, 3); /* header, seal, payload */
        if (zt_bulk_open(way, parts, np, NULL, 0) != ZT_OK)
            continue; /* dropped (counted) */
        if (*np > 0 && zt_msg_decode(zmq_msg_data(&parts[0]), zmq_msg_size(&parts[0]), r, NULL) == ZT_OK &&
            r->type == ZT_MSG_FILE_DATA && r->u.FILE_DATA.req == req)
            return ZT_OK;
        zt_msg_close_parts(parts, *np);
    }
}

int zt_file_fetch(zt_bulk_t *way, const char *remote, const char *local, int timeout_ms, char *err, size_t errlen)
{
    char *data = NULL;
    int64_t size = -1, got = 0, req = 0;
    int rc = zt_bulk_wait_ready(way, timeout_ms);
    if (rc != ZT_OK)
        snprintf(err, errlen, "%s: the file server did not open a sealed stream within %d ms", remote, timeout_ms);
    while (rc == ZT_OK && (size < 0 || got < size)) {
        zt_msg_t m = { .type = ZT_MSG_FILE_GET, .pool = 3 };
        m.u.FILE_GET.req = ++req;
        zt_msg_set_str(m.u.FILE_GET.path, remote);
        m.u.FILE_GET.offset = got;
        m.u.FILE_GET.length = CHUNK;
        /* ZMQ_IMMEDIATE: an error when no server is there to take it */
        if (zt_bulk_send(way, &m, NULL, 0, NULL) != ZT_OK) {
            snprintf(err, errlen, "%s: the file server is not there (its replica ended?)", remote);
            rc = ZT_EIO;
            break;
        }
        zmq_msg_t parts[3];
        int np = 0;
        zt_msg_t r;
        if (s_answer(way, req, timeout_ms, parts, &np, &r) != ZT_OK) {
            snprintf(err, errlen, "%s: no answer within %d ms", remote, timeout_ms);
            rc = ZT_ETIMEDOUT;
            break;
        }
        size_t n = np > 1 ? zmq_msg_size(&parts[1]) : 0;
        if (r.u.FILE_DATA.code) {
            snprintf(err, errlen, "%s: %s", remote, r.u.FILE_DATA.code == ZT_FILE_DENIED ? "refused" : "not found");
            rc = ZT_ENOTFOUND;
        }
        else if (size < 0 && (r.u.FILE_DATA.size < 0 || r.u.FILE_DATA.size > ((int64_t) 1 << 34))) {
            snprintf(err, errlen, "%s: implausible size", remote);
            rc = ZT_EPROTO;
        }
        else if (n == 0 && got < (size < 0 ? r.u.FILE_DATA.size : size)) {
            snprintf(err, errlen, "%s: the file shrank while being read", remote);
            rc = ZT_EIO;
        }
        else {
            if (size < 0) {
                size = r.u.FILE_DATA.size;
                data = malloc((size_t) size + 1);
            }
            if ((int64_t) n > size - got)
                n = (size_t) (size - got);
            if (n)
                memcpy(data + got, zmq_msg_data(&parts[1]), n);
            got += (int64_t) n;
        }
        zt_msg_close_parts(parts, np);
    }
    if (rc == ZT_OK && zt_write_file_atomic(local, data ? data : "", (size_t) got) != ZT_OK) {
        snprintf(err, errlen, "%s: cannot write %s: %s", remote, local, strerror(errno));
        rc = ZT_EIO;
    }
    free(data);
    return rc;
}
