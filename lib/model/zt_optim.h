/* zt_optim: the server-side optimizers (and the same step for local
 * training). State arrays live next to the values: momentum has v; Adam has
 * m, v and a per-element step count t; Adagrad has the accumulator. */
#ifndef ZT_OPTIM_H
#define ZT_OPTIM_H
#include <stdint.h>

typedef enum { ZT_OPT_SGD = 0, ZT_OPT_MOMENTUM, ZT_OPT_ADAM, ZT_OPT_ADAGRAD } zt_opt_kind_t;

typedef struct {
    zt_opt_kind_t kind;     /* which update */
    float lr;               /* learning rate */
    float momentum;         /* momentum: v = momentum * v + g */
    float beta1, beta2;     /* Adam */
    float eps;              /* Adam, Adagrad */
    float initial_accumulator; /* Adagrad */
} zt_opt_t;

/* Defaults: SGD lr 0.01, momentum 0.9, Adam 0.9/0.999/1e-7 (Keras), Adagrad accumulator 0.1. */
void zt_opt_defaults(zt_opt_t *opt);
/* Parses "sgd", "momentum", "adam", "adagrad"; -1 if unknown. */
int zt_opt_parse_kind(const char *name);
const char *zt_opt_kind_name(zt_opt_kind_t kind);
/* Number of float-sized state arrays besides the values (t is stored as float). */
int zt_opt_state_arrays(zt_opt_kind_t kind);
/* Fills state arrays for n fresh elements. */
void zt_opt_init_state(const zt_opt_t *opt, float **state, int64_t n);
/* Applies grads g (scaled by `scale`, e.g. 1/N for an average) to n values. */
void zt_opt_apply(const zt_opt_t *opt, float *w, float **state, const float *g, float scale,
                  int64_t n);
void zt_optim_selftest(void);

#endif
