#include "state/zt_optim.h"
#include <assert.h>
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

void zt_opt_defaults(zt_opt_t *opt)
{
    *opt = (zt_opt_t) { ZT_OPT_SGD, 0.01f, 0.9f, 0.9f, 0.999f, 1e-7f, 0.1f };
}

/* One Adam element; d1, d2 are the bias corrections 1 - beta^t. The
 * hyperparameters come as values, not through the table's pointer, so that
 * the compiler need not reload them after every store (w, m, v may alias
 * *opt as far as it knows) and can vectorise the loops that call this:
 * vector sqrt and division are correctly rounded, so the results are
 * bitwise those of the scalar loop. */
__attribute__((optimize("O3"), always_inline))
static inline void s_adam(float *w, float *m, float *v, float *t, float gi, float ti, float d1, float d2,
                          float b1, float b2, float lr, float eps)
{
    *t = ti;
    *m = b1 * *m + (1.0f - b1) * gi;
    *v = b2 * *v + (1.0f - b2) * gi * gi;
    *w -= lr * (*m / d1) / (sqrtf(*v / d2) + eps);
}

#define O3 __attribute__((optimize("O3")))

O3 static void s_sgd(const zt_opt_t *opt, float *restrict w, float **state, const float *restrict g,
                     float scale, int64_t n)
{
    (void) state;
    const float k = opt->lr * scale;
    for (int64_t i = 0; i < n; i++)
        w[i] -= k * g[i];
}

O3 static void s_momentum(const zt_opt_t *opt, float *restrict w, float **state, const float *restrict g,
                          float scale, int64_t n)
{
    float *restrict v = state[0];
    const float mu = opt->momentum, lr = opt->lr;
    for (int64_t i = 0; i < n; i++) {
        v[i] = mu * v[i] + scale * g[i];
        w[i] -= lr * v[i];
    }
}

/* Step counts are per element (a server's elements may have seen different
 * numbers of pushes) but nearly always equal within a block: the bias
 * corrections are then computed once per block rather than two powf per
 * element, with bitwise the same results. */
O3 static void s_adam_all(const zt_opt_t *opt, float *restrict w, float **state, const float *restrict g,
                          float scale, int64_t n)
{
    float *restrict m = state[0], *restrict v = state[1], *restrict t = state[2];
    const float b1 = opt->beta1, b2 = opt->beta2, lr = opt->lr, eps = opt->eps;
    for (int64_t at = 0; at < n; at += 1024) {
        int64_t end = n - at < 1024 ? n : at + 1024;
        const float t0 = t[at];
        bool uniform = true;
        for (int64_t i = at; i < end; i++)
            uniform &= t[i] == t0;
        if (uniform) {
            const float ti = t0 + 1.0f, d1 = 1.0f - powf(b1, ti), d2 = 1.0f - powf(b2, ti);
            for (int64_t i = at; i < end; i++)
                s_adam(&w[i], &m[i], &v[i], &t[i], scale * g[i], ti, d1, d2, b1, b2, lr, eps);
        }
        else
            for (int64_t i = at; i < end; i++) {
                const float ti = t[i] + 1.0f;
                s_adam(&w[i], &m[i], &v[i], &t[i], scale * g[i], ti, 1.0f - powf(b1, ti), 1.0f - powf(b2, ti),
                       b1, b2, lr, eps);
            }
    }
}

O3 static void s_adagrad(const zt_opt_t *opt, float *restrict w, float **state, const float *restrict g,
                         float scale, int64_t n)
{
    float *restrict acc = state[0];
    const float eps = opt->eps, lr = opt->lr;
    for (int64_t i = 0; i < n; i++) {
        float gi = scale * g[i];
        acc[i] += gi * gi;
        w[i] -= lr * gi / (sqrtf(acc[i]) + eps);
    }
}

typedef void (*s_update_fn)(const zt_opt_t *, float *, float **, const float *, float, int64_t);

/* The table's rows (ZT_OPTIMIZERS), and each one's CPU update by id. */
static const struct {
    const char *name;
    int arrays;
    bool step;
} s_table[ZT_OPT_COUNT] = {
#define ZT_OPT_ROW_(id, nm, arr, st) [ZT_OPT_##id] = { nm, arr, st },
    ZT_OPTIMIZERS(ZT_OPT_ROW_)
#undef ZT_OPT_ROW_
};

static const s_update_fn s_update[ZT_OPT_COUNT] = {
    [ZT_OPT_SGD] = s_sgd,
    [ZT_OPT_MOMENTUM] = s_momentum,
    [ZT_OPT_ADAM] = s_adam_all,
    [ZT_OPT_ADAGRAD] = s_adagrad,
};

static bool s_valid(zt_opt_kind_t kind) { return (unsigned) kind < ZT_OPT_COUNT; }

int zt_opt_parse_kind(const char *name)
{
    for (int i = 0; name && i < ZT_OPT_COUNT; i++)
        if (!strcmp(name, s_table[i].name))
            return i;
    return -1;
}

const char *zt_opt_kind_name(zt_opt_kind_t kind) { return s_valid(kind) ? s_table[kind].name : "?"; }

const char *zt_opt_names(void)
{
    static char names[128];
    if (!names[0]) {
        size_t at = 0;
        for (int i = 0; i < ZT_OPT_COUNT; i++)
            at += (size_t) snprintf(names + at, sizeof names - at, "%s%s", i ? ", " : "", s_table[i].name);
    }
    return names;
}

int zt_opt_state_arrays(zt_opt_kind_t kind) { return s_valid(kind) ? s_table[kind].arrays : 0; }

bool zt_opt_has_step(zt_opt_kind_t kind) { return s_valid(kind) && s_table[kind].step; }

void zt_opt_init_state(const zt_opt_t *opt, float **state, int64_t n)
{
    for (int a = 0; a < zt_opt_state_arrays(opt->kind); a++) {
        float v = opt->kind == ZT_OPT_ADAGRAD ? opt->initial_accumulator : 0.0f;
        for (int64_t i = 0; i < n; i++)
            state[a][i] = v;
    }
}

void zt_opt_apply(const zt_opt_t *opt, float *w, float **state, const float *g, float scale, int64_t n)
{
    if (s_valid(opt->kind))
        s_update[opt->kind](opt, w, state, g, scale, n);
}

/* Hyperparameters by JSON key. */
static const struct {
    const char *key;
    size_t off;
} s_hyper[] = {
    { "lr", offsetof(zt_opt_t, lr) },
    { "momentum", offsetof(zt_opt_t, momentum) },
    { "beta1", offsetof(zt_opt_t, beta1) },
    { "beta2", offsetof(zt_opt_t, beta2) },
    { "eps", offsetof(zt_opt_t, eps) },
    { "initial_accumulator", offsetof(zt_opt_t, initial_accumulator) },
};
#define NHYPER (sizeof s_hyper / sizeof s_hyper[0])

json_t *zt_opt_to_json(const zt_opt_t *opt)
{
    json_t *o = json_pack("{s:s}", "kind", zt_opt_kind_name(opt->kind));
    for (size_t i = 0; i < NHYPER; i++)
        json_object_set_new(o, s_hyper[i].key,
                            json_real((double) *(const float *) ((const char *) opt + s_hyper[i].off)));
    return o;
}

int zt_opt_from_json(zt_opt_t *opt, const json_t *obj, char *err, size_t errlen)
{
    zt_opt_defaults(opt);
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    int k = zt_opt_parse_kind(kind);
    if (!json_is_object(obj) || k < 0) {
        snprintf(err, errlen, "optimizer kind '%s': expected one of %s", kind ? kind : "(missing)",
                 zt_opt_names());
        return -1;
    }
    opt->kind = (zt_opt_kind_t) k;
    for (size_t i = 0; i < NHYPER; i++) {
        json_t *v = json_object_get(obj, s_hyper[i].key);
        if (!v)
            continue;
        if (!json_is_number(v)) {
            snprintf(err, errlen, "optimizer %s: not a number", s_hyper[i].key);
            return -1;
        }
        *(float *) ((char *) opt + s_hyper[i].off) = (float) json_number_value(v);
    }
    return 0;
}

void zt_optim_selftest(void)
{
    zt_opt_t o;
    zt_opt_defaults(&o);
    float w[2] = { 1.0f, -2.0f }, g[2] = { 0.5f, -1.0f };
    o.lr = 0.1f;
    zt_opt_apply(&o, w, NULL, g, 1.0f, 2);
    assert(fabsf(w[0] - 0.95f) < 1e-7f && fabsf(w[1] + 1.9f) < 1e-6f);
    /* Adam's first step moves every element by lr * sign(g) (up to eps). */
    o.kind = ZT_OPT_ADAM;
    o.lr = 0.01f;
    float m[2], v[2], t[2], *st[3] = { m, v, t };
    zt_opt_init_state(&o, st, 2);
    w[0] = 1.0f;
    w[1] = -2.0f;
    zt_opt_apply(&o, w, st, g, 1.0f, 2);
    assert(fabsf(w[0] - 0.99f) < 1e-6f && fabsf(w[1] + 1.99f) < 1e-6f && t[0] == 1.0f);
    assert(zt_opt_parse_kind("adam") == ZT_OPT_ADAM && zt_opt_parse_kind("rmsprop") == -1);
    for (int k = 0; k < ZT_OPT_COUNT; k++) /* every row has its CPU update */
        assert(s_update[k] && zt_opt_state_arrays((zt_opt_kind_t) k) <= ZT_OPT_MAX_STATE);
    /* The table: names, state arrays and the step count agree with the rows. */
    assert(!strcmp(zt_opt_names(), "sgd, momentum, adam, adagrad"));
    assert(zt_opt_state_arrays(ZT_OPT_ADAM) == 3 && zt_opt_has_step(ZT_OPT_ADAM));
    assert(zt_opt_state_arrays(ZT_OPT_SGD) == 0 && !zt_opt_has_step(ZT_OPT_MOMENTUM));
    assert(zt_opt_state_arrays((zt_opt_kind_t) 99) == 0 && !strcmp(zt_opt_kind_name((zt_opt_kind_t) 99), "?"));
    /* Adagrad's accumulator starts where the options say. */
    o.kind = ZT_OPT_ADAGRAD;
    o.initial_accumulator = 0.25f;
    zt_opt_init_state(&o, st, 2);
    assert(m[0] == 0.25f && m[1] == 0.25f);
    /* JSON round trip keeps every hyperparameter; bad input names the field. */
    o.lr = 0.125f;
    o.momentum = 0.5f;
    json_t *j = zt_opt_to_json(&o);
    zt_opt_t back;
    char err[160];
    assert(zt_opt_from_json(&back, j, err, sizeof err) == 0);
    assert(!memcmp(&back, &o, sizeof o));
    json_object_set_new(j, "kind", json_string("rmsprop"));
    assert(zt_opt_from_json(&back, j, err, sizeof err) == -1 && strstr(err, "rmsprop") && strstr(err, "adagrad"));
    json_object_set_new(j, "kind", json_string("sgd"));
    json_object_set_new(j, "beta2", json_string("high"));
    assert(zt_opt_from_json(&back, j, err, sizeof err) == -1 && strstr(err, "beta2"));
    json_decref(j);
}
