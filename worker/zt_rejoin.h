/* zt_rejoin: a synchronous trainer restarted into its running group takes
 * the model from a live peer, so the others never roll back.
 *
 * Every trainer of a group all-reduced through reducers serves its state
 * on its own address (its CLUSTER_SPEC entry): the values and optimizer
 * state as they stand before the round it is waiting on, with that round's
 * step and all-reduce generation. It answers from inside its all-reduce
 * wait (zt_allreduce_watch), where nothing changes them. The restarted
 * trainer (started with ZT_REJOIN=1) asks its peers one at a time, takes
 * the first complete answer, and computes that very round's gradient: the
 * group's sums, and so everyone's weights, come out as if nobody had died. */
#ifndef ZT_REJOIN_H
#define ZT_REJOIN_H
#include "state/zt_optim.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    int64_t step;               /* the step being trained (its batch) */
    int64_t gen;                /* the all-reduce round it is */
    int64_t group;              /* the membership generation (0 outside an elastic pool) */
    int64_t total;              /* elements per array */
    int arrays;                 /* 1 (values) + the optimizer's state arrays */
    float *data[1 + ZT_OPT_MAX_STATE];
    /* the group's all-reduce layout (zt_allreduce_layout): autotune's */
    int layout;
    int64_t threshold;
    int cycle_ms;
    bool searching;
} zt_rejoin_state_t;

typedef struct zt_rejoin_t zt_rejoin_t;

/* Serves on endpoint ("host:port"). NULL, with a warning, when it cannot
 * bind: this trainer then cannot help a restarted peer (others can). */
zt_rejoin_t *zt_rejoin_serve(const char *endpoint);
void zt_rejoin_destroy(zt_rejoin_t **self_p);
/* The socket to watch (for zt_allreduce_watch). */
void *zt_rejoin_socket(zt_rejoin_t *self);
/* Answers every request waiting: get(arg, state) fills in the state (it
 * is called once, and only when a request is there); a request whose sizes
 * do not match it is refused with a warning. */
void zt_rejoin_answer(zt_rejoin_t *self, int (*get)(void *arg, zt_rejoin_state_t *state), void *arg);

/* Asks peers[i] (i != self_rank) in turn, from self_rank + 1 on, each for
 * up to timeout_ms, for its state; state->total, arrays, group and data
 * (arrays of total floats) say what is expected and where it goes. A peer
 * still in an earlier membership generation (a joiner came before the
 * group switched) is asked again, for up to timeout_ms in all. ZT_OK with
 * step and gen set, or ZT_ETIMEDOUT with the reason in why. */
int zt_rejoin_fetch(const char *const *peers, int npeers, int self_rank, int timeout_ms, zt_rejoin_state_t *state,
                    char *why, size_t why_size);

#endif
