/* zt_optim: the optimizers, as one table. The parameter servers, local and
 * all-reduce training on the CPU, the GPU path and the checkpoints all read
 * it. State arrays live next to the values: momentum has v; Adam has m, v
 * and a per-element step count t (stored as float); Adagrad has the
 * accumulator.
 *
 * Adding an optimizer: a row in ZT_OPTIMIZERS, its CPU update in
 * zt_optim.c (s_table), its GPU update in cuda/zt_gpu.cu (k_opt), and its
 * hyperparameters (if new) in zt_opt_t and its JSON. Names in messages and
 * --help come from the table. */
#ifndef ZT_OPTIM_H
#define ZT_OPTIM_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*   id        name        state arrays  last array is the step count */
#define ZT_OPTIMIZERS(X)                    \
    X(SGD,      "sgd",      0,           false) \
    X(MOMENTUM, "momentum", 1,           false) \
    X(ADAM,     "adam",     3,           true)  \
    X(ADAGRAD,  "adagrad",  1,           false)

typedef enum {
#define ZT_OPT_ENUM_(id, name, arrays, step) ZT_OPT_##id,
    ZT_OPTIMIZERS(ZT_OPT_ENUM_)
#undef ZT_OPT_ENUM_
    ZT_OPT_COUNT
} zt_opt_kind_t;

#define ZT_OPT_MAX_STATE 3 /* the most state arrays of any row */

typedef struct {
    zt_opt_kind_t kind;     /* which update */
    float lr;               /* learning rate */
    float momentum;         /* momentum: v = momentum * v + g */
    float beta1, beta2;     /* Adam */
    float eps;              /* Adam, Adagrad */
    float initial_accumulator; /* Adagrad: the accumulator's first value */
} zt_opt_t;

/* Defaults: SGD lr 0.01, momentum 0.9, Adam 0.9/0.999/1e-7 (Keras), Adagrad accumulator 0.1. */
void zt_opt_defaults(zt_opt_t *opt);
/* A row's id from its name; -1 if unknown. */
int zt_opt_parse_kind(const char *name);
/* Name of a row ("?" out of range). */
const char *zt_opt_kind_name(zt_opt_kind_t kind);
/* Every name, "sgd, momentum, adam, adagrad", for messages and --help. */
const char *zt_opt_names(void);
/* Number of float-sized state arrays besides the values (0 out of range). */
int zt_opt_state_arrays(zt_opt_kind_t kind);
/* Whether the last state array is a per-element step count (Adam). */
bool zt_opt_has_step(zt_opt_kind_t kind);
/* Fills state arrays for n fresh elements. */
void zt_opt_init_state(const zt_opt_t *opt, float **state, int64_t n);
/* Applies grads g (scaled by `scale`, e.g. 1/N for an average) to n values. */
void zt_opt_apply(const zt_opt_t *opt, float *w, float **state, const float *g, float scale,
                  int64_t n);

/* The optimizer as JSON (an object: kind and every hyperparameter), as
 * workers send it to parameter servers and checkpoints record it. Returns a
 * new reference (jansson's json_t). */
struct json_t;
struct json_t *zt_opt_to_json(const zt_opt_t *opt);
/* Reads zt_opt_to_json's object; hyperparameters it lacks keep their
 * defaults. -1 with the reason in err when the kind is missing or unknown or
 * a value is not a number. */
int zt_opt_from_json(zt_opt_t *opt, const struct json_t *obj, char *err, size_t errlen);

void zt_optim_selftest(void);

#ifdef __cplusplus
}
#endif
#endif
