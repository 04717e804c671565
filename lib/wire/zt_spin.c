#include "wire/zt_spin.h"
#include <assert.h>
#include <sched.h>
#include <stdlib.h>
#include "base/zt_util.h"
#include "ztrain/zt_knobs.h"

void zt_spin_init(zt_spin_t *self)
{
    int64_t us = zt_knob_int(ZT_KNOB_SPIN_US);
    self->max_us = us > 0 ? us : 0;
    self->budget_us = self->max_us;
}

int zt_spin_poll(zt_spin_t *self, zmq_pollitem_t *items, int n, long timeout_ms)
{
    int64_t t0 = zt_now_us();
    if (self->budget_us > 0 && timeout_ms != 0) {
        do {
            int rc = zmq_poll(items, n, 0);
            if (rc != 0)
                return rc; /* ready (or an error): the budget stays */
            sched_yield(); /* the core stays awake, but whatever else is runnable runs */
        } while (zt_now_us() - t0 < self->budget_us);
    }
    int rc = zmq_poll(items, n, timeout_ms);
    if (rc > 0 && zt_now_us() - t0 <= self->max_us)
        self->budget_us = self->max_us; /* spinning would have caught it */
    else
        self->budget_us = self->budget_us >= 16 ? self->budget_us / 2 : 0;
    return rc;
}

void zt_spin_selftest(void)
{
    void *ctx = zmq_ctx_new();
    void *a = zmq_socket(ctx, ZMQ_PAIR), *b = zmq_socket(ctx, ZMQ_PAIR);
    assert(zmq_bind(a, "inproc://zt-spin-selftest") == 0);
    assert(zmq_connect(b, "inproc://zt-spin-selftest") == 0);
    zmq_pollitem_t item = { a, 0, ZMQ_POLLIN, 0 };
    zt_spin_t s = { 100, 100 };
    /* Nothing to read: the wait outlasts the spin, the budget halves. */
    int64_t t0 = zt_now_us();
    assert(zt_spin_poll(&s, &item, 1, 5) == 0 && !(item.revents & ZMQ_POLLIN));
    assert(zt_now_us() - t0 >= 5000 && s.budget_us == 50);
    assert(zt_spin_poll(&s, &item, 1, 1) == 0 && s.budget_us == 25);
    assert(zt_spin_poll(&s, &item, 1, 1) == 0 && s.budget_us == 12);
    assert(zt_spin_poll(&s, &item, 1, 1) == 0 && s.budget_us == 0);
    /* A message already there: seen, and a reply within max_us (1 s here, so
     * that a loaded machine cannot fail the test) restores the budget. */
    s.max_us = 1000000;
    assert(zmq_send(b, "x", 1, 0) == 1);
    assert(zt_spin_poll(&s, &item, 1, 1000) == 1 && (item.revents & ZMQ_POLLIN));
    assert(s.budget_us == 1000000);
    char c;
    assert(zmq_recv(a, &c, 1, 0) == 1 && c == 'x');
    /* Caught while spinning: the budget stays. */
    assert(zmq_send(b, "y", 1, 0) == 1);
    assert(zt_spin_poll(&s, &item, 1, 1000) == 1 && s.budget_us == 1000000);
    assert(zmq_recv(a, &c, 1, 0) == 1 && c == 'y');
    /* ZT_SPIN_US=0: never spins, never grows. */
    setenv("ZT_SPIN_US", "0", 1);
    zt_spin_init(&s);
    assert(zmq_send(b, "z", 1, 0) == 1);
    assert(zt_spin_poll(&s, &item, 1, 1000) == 1 && s.max_us == 0 && s.budget_us == 0);
    unsetenv("ZT_SPIN_US");
    zt_spin_init(&s);
    assert(s.max_us == 200 && s.budget_us == 200);
    zmq_close(a);
    zmq_close(b);
    zmq_ctx_term(ctx);
}
