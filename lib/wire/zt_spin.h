/* Waiting for a reply: a bounded, adaptive busy-poll before blocking.
 *
 * On the virtual machines this runs on, waking a halted vCPU costs about
 * 40 us, and a ZeroMQ round trip wakes one six times (application and I/O
 * threads at both ends): 120-160 us for 4 KiB. A client that polls for a short
 * while instead of sleeping sees a prompt reply without the wake-ups of its
 * own side (measured: 4 KiB round trip 130 -> 55 us). The budget adapts like
 * an adaptive mutex: it stays at ZT_SPIN_US while replies come back within it
 * and halves each time a wait outlasts it, down to zero, so a process that
 * waits long (a big transfer, a slow peer, more processes than cores) stops
 * burning CPU after a few waits and starts again when a reply is prompt. */
#ifndef ZT_SPIN_H
#define ZT_SPIN_H
#include <stdint.h>
#include <zmq.h>

typedef struct {
    int64_t max_us;    /* ZT_SPIN_US; 0: never spin */
    int64_t budget_us; /* spin before the next blocking wait */
} zt_spin_t;

/* Reads ZT_SPIN_US. */
void zt_spin_init(zt_spin_t *self);
/* zmq_poll with the same arguments and result, spinning first. */
int zt_spin_poll(zt_spin_t *self, zmq_pollitem_t *items, int n, long timeout_ms);
void zt_spin_selftest(void);

#endif
