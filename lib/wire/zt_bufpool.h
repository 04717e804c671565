/* zt_bufpool: reusable send buffers for zero-copy ZeroMQ messages. A buffer
 * is lent to a zmq_msg_t and comes back when ZeroMQ's I/O thread releases the
 * message, so steady-state sends allocate nothing (fresh pages cost about
 * 2.7 ms per MiB on these machines). */
#ifndef ZT_BUFPOOL_H
#define ZT_BUFPOOL_H
#include <stddef.h>
#include <zmq.h>

typedef struct zt_bufpool_t zt_bufpool_t;

zt_bufpool_t *zt_bufpool_new(void);
/* Waits (up to 5 s each) for lent buffers to come back, then frees
 * everything; a pool with a buffer still lent then is left allocated (its
 * release would write into it). */
void zt_bufpool_destroy(zt_bufpool_t **self_p);
/* Initialises msg with a pooled copy of data[0..size). 0 or -1. */
int zt_bufpool_msg(zt_bufpool_t *self, zmq_msg_t *msg, const void *data, size_t size);
/* The same, with fill(arg, buf) writing the size bytes into the buffer (the
 * one pass over them: a copy, or a seal). 0, or -1 (also when fill fails). */
int zt_bufpool_msg_with(zt_bufpool_t *self, zmq_msg_t *msg, size_t size, int (*fill)(void *arg, void *buf),
                        void *arg);
/* Buffers allocated so far (for tests: stays flat in steady state). */
int zt_bufpool_allocations(zt_bufpool_t *self);
/* Bytes the pool holds, lent or not. A buffer not lent for ZT_BUFPOOL_IDLE_MS
 * is freed by the next call that lends another, so a burst of large or many
 * messages does not keep its memory for the process's life. */
size_t zt_bufpool_bytes(zt_bufpool_t *self);
#define ZT_BUFPOOL_IDLE_MS 30000
/* Another idle time (ms) for this pool (tests). */
void zt_bufpool_set_idle_ms(zt_bufpool_t *self, int ms);

#endif
