/* A study's search: parameter values from scaled coordinates, grid and
 * random search, and Bayesian optimisation (Gaussian-process regression
 * with expected improvement), seeded. */
#include "tune/zt_study_int.h"
#include "base/zt_gp.h"
#include "base/zt_util.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_log.h"
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ values */

static double s_to_value(const s_param_t *p, double u)
{
    u = u < 0 ? 0 : u > 1 ? 1 : u;
    if (p->kind == P_CAT || p->kind == P_DISC) {
        size_t n = json_array_size(p->values);
        size_t i = (size_t) (u * (double) n);
        return (double) (i >= n ? n - 1 : i);
    }
    double v;
    if (p->scale == SC_LOG)
        v = exp(log(p->min) + u * (log(p->max) - log(p->min)));
    else if (p->scale == SC_RLOG)
        v = p->max + p->min - exp(log(p->min) + (1 - u) * (log(p->max) - log(p->min)));
    else
        v = p->min + u * (p->max - p->min);
    if (p->kind == P_INT)
        v = floor(v + 0.5);
    return v < p->min ? p->min : v > p->max ? p->max : v;
}

static json_t *s_json_value(const s_param_t *p, double v)
{
    if (p->kind == P_CAT)
        return json_incref(json_array_get(p->values, (size_t) v));
    if (p->kind == P_DISC) { /* whole numbers stay whole: --hidden=64, not 64.0 */
        double d = json_number_value(json_array_get(p->values, (size_t) v));
        return d == floor(d) && fabs(d) < 1e15 ? json_integer((json_int_t) d) : json_real(d);
    }
    if (p->kind == P_INT)
        return json_integer((json_int_t) v);
    char buf[32]; /* 8 significant digits: what the trial gets as a flag, exactly */
    snprintf(buf, sizeof buf, "%.8g", v);
    return json_real(strtod(buf, NULL));
}

/* Whether p is active given the values chosen so far. */
static bool s_active(zt_study_t *s, int i, json_t *params)
{
    const s_param_t *p = &s->p[i];
    if (p->parent < 0)
        return true;
    json_t *pv = json_object_get(params, s->p[p->parent].name);
    if (!pv || !s_active(s, p->parent, params))
        return false;
    size_t k;
    json_t *w;
    json_array_foreach(p->when, k, w) {
        double a, b;
        if (json_is_string(w) && json_is_string(pv) && !strcmp(json_string_value(w), json_string_value(pv)))
            return true;
        if (zt_study_num(w, &a) && zt_study_num(pv, &b) && a == b)
            return true;
    }
    return false;
}

/* Parameters for coordinates u (in parameter order: parents first). */
static json_t *s_params_from_u(zt_study_t *s, double *u)
{
    json_t *params = json_object();
    for (int i = 0; i < s->np; i++) {
        if (!s_active(s, i, params)) {
            u[i] = 0.5;
            continue;
        }
        json_object_set_new(params, s->p[i].name, s_json_value(&s->p[i], s_to_value(&s->p[i], u[i])));
    }
    return params;
}

static double s_unit_of(const s_param_t *p, json_t *v)
{
    if (p->kind == P_CAT || p->kind == P_DISC) {
        size_t n = json_array_size(p->values), i;
        json_t *x;
        json_array_foreach(p->values, i, x)
            if (json_equal(x, v) || (json_is_number(x) && json_is_number(v) &&
                                     json_number_value(x) == json_number_value(v)))
                return ((double) i + 0.5) / (double) n;
        return 0.5;
    }
    double x = json_number_value(v);
    if (p->scale == SC_LOG)
        return (log(x) - log(p->min)) / (log(p->max) - log(p->min));
    if (p->scale == SC_RLOG)
        return 1 - (log(p->max + p->min - x) - log(p->min)) / (log(p->max) - log(p->min));
    return (x - p->min) / (p->max - p->min);
}

bool zt_search_unit(const s_param_t *p, json_t *v, double *u)
{
    if (p->kind == P_CAT || p->kind == P_DISC) {
        size_t i;
        json_t *x;
        json_array_foreach(p->values, i, x)
            if (json_equal(x, v) || (json_is_number(x) && json_is_number(v) &&
                                     json_number_value(x) == json_number_value(v))) {
                *u = s_unit_of(p, v);
                return true;
            }
        return false;
    }
    if (!json_is_number(v) || json_number_value(v) < p->min || json_number_value(v) > p->max)
        return false;
    *u = s_unit_of(p, v);
    return true;
}

static double s_rand01(zt_study_t *s)
{
    return (double) (rand_r(&s->rng) % 1000000) / 1000000.0 + 0.0000005;
}

/* Grid: every combination of the discrete parameters, children expanded
 * only where their parent's value makes them active. */
void zt_search_grid(zt_study_t *s, int i, json_t *params, json_t *out)
{
    if (json_array_size(out) >= MAX_TRIALS)
        return;
    if (i == s->np) {
        json_array_append_new(out, json_deep_copy(params));
        return;
    }
    if (!s_active(s, i, params)) {
        zt_search_grid(s, i + 1, params, out);
        return;
    }
    const s_param_t *p = &s->p[i];
    int n = p->kind == P_INT ? (int) (p->max - p->min) + 1 : (int) json_array_size(p->values);
    for (int k = 0; k < n; k++) {
        json_object_set_new(params, p->name, p->kind == P_INT ? json_integer((json_int_t) (p->min + k))
                                                              : s_json_value(p, (double) k));
        zt_search_grid(s, i + 1, params, out);
    }
    json_object_del(params, p->name);
}

/* ------------------------------------------------------------ Bayesian */

/* Bayesian optimisation (zt_gp): a Gaussian process over a warm start's
 * priors and the finished trials' scaled coordinates and (sign-corrected)
 * results, with the active trials pending. false with fewer than two
 * results, or when the kernel matrix cannot be factored. */
static double s_rand01_arg(void *s) { return s_rand01(s); }

static bool s_bayes(zt_study_t *s, double *u_out)
{
    int d = s->np, n = 0;
    double *X = malloc(sizeof(double) * (size_t) (s->nt + s->nprior + 1) * (size_t) d);
    double *y = malloc(sizeof(double) * (size_t) (s->nt + s->nprior + 1));
    for (int i = 0; i < s->nprior; i++) {
        memcpy(X + n * d, s->prior_u + (size_t) i * MAX_PARAMS, sizeof(double) * (size_t) d);
        y[n++] = s->maximize ? s->prior_y[i] : -s->prior_y[i];
    }
    for (int i = 0; i < s->nt; i++)
        if (s->t[i].has_final && zt_state_succeeded(s->t[i].state)) {
            memcpy(X + n * d, s->t[i].u, sizeof(double) * (size_t) d);
            y[n++] = s->maximize ? s->t[i].final : -s->t[i].final;
        }
    int nobs = n;
    for (int i = 0; i < s->nt; i++)
        if (!strcmp(s->t[i].state, "ACTIVE"))
            memcpy(X + n++ * d, s->t[i].u, sizeof(double) * (size_t) d);
    zt_gp_t gp = { d, nobs, n, X, y, s->gp_noise };
    bool ok = zt_gp_suggest(&gp, s_rand01_arg, s, u_out);
    free(X);
    free(y);
    return ok;
}

/* The next trial's parameters; NULL when the search space is used up. */
json_t *zt_search_suggest(zt_study_t *s, double *u)
{
    if (s->algo == A_GRID) { /* the first assignment no trial has had (a resumed study has some) */
        size_t g = 0;
        for (bool taken = true; taken && g < json_array_size(s->grid); g += taken) {
            taken = false;
            for (int i = 0; i < s->nt && !taken; i++)
                taken = json_equal(s->t[i].params, json_array_get(s->grid, g));
        }
        if (g >= json_array_size(s->grid))
            return NULL;
        json_t *params = json_deep_copy(json_array_get(s->grid, g));
        for (int i = 0; i < s->np; i++) {
            json_t *v = json_object_get(params, s->p[i].name);
            u[i] = v ? s_unit_of(&s->p[i], v) : 0.5;
        }
        return params;
    }
    int n_init = s->np + 1 > 3 ? s->np + 1 : 3;
    int done = s->nprior; /* a warm start's observations count */
    for (int i = 0; i < s->nt; i++)
        done += s->t[i].has_final;
    if (s->algo == A_BAYES && done >= n_init && s_bayes(s, u))
        return s_params_from_u(s, u);
    for (int i = 0; i < s->np; i++)
        u[i] = s_rand01(s);
    return s_params_from_u(s, u);
}

char *zt_study_suggest_json(zt_study_t *s, int n)
{
    json_t *out = json_array();
    for (int k = 0; k < n && s->nt < s->max_trials; k++) {
        s_trial_t *t = &s->t[s->nt];
        t->params = zt_search_suggest(s, t->u);
        if (!t->params)
            break;
        t->state = "SUCCEEDED";
        t->id = ++s->nt;
        json_array_append(out, t->params);
    }
    char *text = json_dumps(out, JSON_COMPACT | JSON_REAL_PRECISION(8));
    json_decref(out);
    return text;
}
