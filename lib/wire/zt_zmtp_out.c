/* What a zt_zmtp end sent that the kernel did not take at once: a queue in
 * order, by reference where the caller's frame is a message (no copy),
 * written as the peer takes it. See zt_zmtp_internal.h. */
#include "wire/zt_zmtp_internal.h"
#include "base/zt_util.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

void zt_zmtp_out_drop(zt_zmtp_t *self)
{
    for (; self->nq > 0; self->nq--, self->q0 = (self->q0 + 1) % self->qcap)
        zmq_msg_close(&self->q[self->q0].m);
    self->out = 0;
}

const char *zt_zmtp_out_write(zt_zmtp_t *self)
{
    while (self->up && self->nq > 0) {
        struct iovec v[OUT_IOV];
        int nv = 0;
        for (; nv < self->nq && nv < OUT_IOV; nv++) {
            s_seg_t *g = &self->q[(self->q0 + nv) % self->qcap];
            v[nv] = (struct iovec) { (char *) zmq_msg_data(&g->m) + g->off, zmq_msg_size(&g->m) - g->off };
        }
        struct msghdr mh = { .msg_iov = v, .msg_iovlen = (size_t) nv };
        ssize_t w = sendmsg(self->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            self->quiet_since = zt_now_ms();
            self->out -= (size_t) w;
            for (size_t left = (size_t) w; left > 0;) {
                s_seg_t *g = &self->q[self->q0];
                size_t has = zmq_msg_size(&g->m) - g->off;
                if (left < has) {
                    g->off += left;
                    break;
                }
                left -= has;
                zmq_msg_close(&g->m);
                self->q0 = (self->q0 + 1) % self->qcap;
                self->nq--;
            }
            continue;
        }
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            return zt_now_ms() - self->quiet_since > SEND_WAIT_MS ? "nothing taken for too long" : NULL;
        }
        return w < 0 ? strerror(errno) : "refused";
    }
    return NULL;
}

/* Adds m to what waits (taken over). false: no memory. */
static bool s_push(zt_zmtp_t *self, zmq_msg_t *m, size_t off)
{
    if (self->nq == self->qcap) {
        int cap = self->qcap ? 2 * self->qcap : 64;
        s_seg_t *q = malloc((size_t) cap * sizeof *q);
        if (!q)
            return false;
        for (int i = 0; i < self->nq; i++)
            q[i] = self->q[(self->q0 + i) % self->qcap];
        free(self->q);
        self->q = q, self->q0 = 0, self->qcap = cap;
    }
    s_seg_t *g = &self->q[(self->q0 + self->nq++) % self->qcap];
    zmq_msg_init(&g->m);
    zmq_msg_move(&g->m, m);
    g->off = off;
    self->out += zmq_msg_size(&g->m) - off;
    return true;
}

bool zt_zmtp_out_queue(zt_zmtp_t *self, const struct iovec *v, zmq_msg_t *const *own, int n)
{
    for (int i = 0; i < n;) {
        const char *at = v[i].iov_base, *data = own[i] ? zmq_msg_data(own[i]) : NULL;
        if (own[i] && at >= data && at + v[i].iov_len == data + zmq_msg_size(own[i])) {
            zmq_msg_t m;
            zmq_msg_init(&m);
            if (zmq_msg_copy(&m, own[i]) != 0 || !s_push(self, &m, (size_t) (at - data))) {
                zmq_msg_close(&m);
                return false;
            }
            i++;
            continue;
        }
        int j = i;
        size_t add = 0;
        for (; j < n && !own[j]; j++)
            add += v[j].iov_len;
        if (j == i) /* not the end of its owner's bytes: copied */
            add = v[j++].iov_len;
        zmq_msg_t m;
        if (zmq_msg_init_size(&m, add) != 0)
            return false;
        for (size_t put = 0; i < j; put += v[i].iov_len, i++)
            memcpy((char *) zmq_msg_data(&m) + put, v[i].iov_base, v[i].iov_len);
        if (!s_push(self, &m, 0)) {
            zmq_msg_close(&m);
            return false;
        }
    }
    return true;
}

int zt_zmtp_msg_with(zt_zmtp_t *self, zmq_msg_t *msg, size_t size, int (*fill)(void *arg, void *buf), void *arg)
{
    if (!self->pool && !(self->pool = zt_bufpool_new()))
        return -1;
    return zt_bufpool_msg_with(self->pool, msg, size, fill, arg);
}

