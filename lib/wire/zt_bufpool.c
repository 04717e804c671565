#include "wire/zt_bufpool.h"
#include "base/zt_time.h"
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SLOTS 64

typedef struct {
    void *buf;              /* the memory */
    size_t cap;             /* its size */
    atomic_int busy;        /* lent to a message */
    int64_t lent_ms;        /* when it was last lent */
} s_slot_t;

struct zt_bufpool_t {
    s_slot_t slots[SLOTS];  /* fixed: the I/O thread holds pointers to slots */
    int allocations;        /* how many times a buffer was (re)allocated */
    int idle_ms;            /* a buffer not lent this long is freed */
};

zt_bufpool_t *zt_bufpool_new(void)
{
    zt_bufpool_t *self = calloc(1, sizeof(zt_bufpool_t));
    if (self)
        self->idle_ms = ZT_BUFPOOL_IDLE_MS;
    return self;
}

void zt_bufpool_set_idle_ms(zt_bufpool_t *self, int ms) { self->idle_ms = ms; }

void zt_bufpool_destroy(zt_bufpool_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zt_bufpool_t *self = *self_p;
    bool held = false;
    for (int i = 0; i < SLOTS; i++) {
        for (int w = 0; w < 5000 && atomic_load(&self->slots[i].busy); w++)
            usleep(1000);
        if (!atomic_load(&self->slots[i].busy))
            free(self->slots[i].buf);
        else
            held = true;
    }
    /* A buffer ZeroMQ still holds (a socket left open, a peer that never
     * read) would be given back into freed memory: the pool is left to the
     * process's end instead. */
    if (!held)
        free(self);
    *self_p = NULL;
}

static void s_release(void *data, void *hint)
{
    (void) data;
    atomic_store(&((s_slot_t *) hint)->busy, 0);
}

int zt_bufpool_msg_with(zt_bufpool_t *self, zmq_msg_t *msg, size_t size, int (*fill)(void *arg, void *buf),
                        void *arg)
{
    s_slot_t *best = NULL, *any = NULL;
    int64_t now = zt_now_ms();
    for (int i = 0; i < SLOTS; i++) {
        s_slot_t *s = &self->slots[i];
        if (atomic_load(&s->busy))
            continue;
        if (s->cap >= size && (!best || s->cap < best->cap))
            best = s;
        if (!any || s->cap > any->cap)
            any = s;
    }
    if (!best && any) { /* grow the largest free buffer */
        void *nb = realloc(any->buf, size ? size : 1);
        if (nb) {
            any->buf = nb;
            any->cap = size;
            best = any;
            self->allocations++;
        }
    }
    /* the others a burst left, unlent since: freed (not the one lent now,
     * however long it waited) */
    for (int i = 0; i < SLOTS; i++) {
        s_slot_t *s = &self->slots[i];
        if (s != best && s->buf && now - s->lent_ms >= self->idle_ms && !atomic_load(&s->busy)) {
            free(s->buf);
            s->buf = NULL;
            s->cap = 0;
        }
    }
    if (!best) { /* every slot lent: a message of its own */
        if (zmq_msg_init_size(msg, size) != 0)
            return -1;
        if (fill(arg, zmq_msg_data(msg)) != 0) {
            zmq_msg_close(msg);
            return -1;
        }
        return 0;
    }
    atomic_store(&best->busy, 1);
    best->lent_ms = now;
    if (fill(arg, best->buf) != 0 || zmq_msg_init_data(msg, best->buf, size, s_release, best) != 0) {
        atomic_store(&best->busy, 0);
        return -1;
    }
    return 0;
}

typedef struct {
    const void *data;
    size_t size;
} s_copy_t;

static int s_copy(void *arg, void *buf)
{
    s_copy_t *c = arg;
    if (c->size)
        memcpy(buf, c->data, c->size);
    return 0;
}

int zt_bufpool_msg(zt_bufpool_t *self, zmq_msg_t *msg, const void *data, size_t size)
{
    s_copy_t c = { data, size };
    return zt_bufpool_msg_with(self, msg, size, s_copy, &c);
}

int zt_bufpool_allocations(zt_bufpool_t *self)
{
    return self->allocations;
}

size_t zt_bufpool_bytes(zt_bufpool_t *self)
{
    size_t n = 0;
    for (int i = 0; i < SLOTS; i++)
        n += self->slots[i].cap; /* written only by the caller's thread */
    return n;
}
