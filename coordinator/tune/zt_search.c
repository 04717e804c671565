/* A study's search: parameter values from scaled coordinates, grid and
 * random search, and Bayesian optimisation (zt_bo: Gaussian processes with
 * the expected improvement, or the expected hypervolume improvement over
 * several metrics), seeded. */
#include "tune/zt_study_int.h"
#include "tune/zt_bo.h"
#include "base/zt_util.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_log.h"
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------ values */

/* A discrete parameter's value i in [0, 1]: where the number lies between
 * the least and the greatest (on a log scale when asked and all are
 * positive), so that neighbours are near. */
static double s_disc_unit(const s_param_t *p, size_t i)
{
    size_t n = json_array_size(p->values);
    double a = json_number_value(json_array_get(p->values, 0)), b = json_number_value(json_array_get(p->values, n - 1));
    double v = json_number_value(json_array_get(p->values, i));
    if (n < 2 || b <= a)
        return 0.5;
    if (p->scale == SC_LOG && a > 0)
        return (log(v) - log(a)) / (log(b) - log(a));
    return (v - a) / (b - a);
}

static double s_to_value(const s_param_t *p, double u)
{
    u = u < 0 ? 0 : u > 1 ? 1 : u;
    if (p->kind == P_CAT) {
        size_t n = json_array_size(p->values);
        size_t i = (size_t) (u * (double) n);
        return (double) (i >= n ? n - 1 : i);
    }
    if (p->kind == P_DISC) { /* the nearest value */
        size_t best = 0, n = json_array_size(p->values);
        for (size_t i = 1; i < n; i++)
            if (fabs(s_disc_unit(p, i) - u) < fabs(s_disc_unit(p, best) - u))
                best = i;
        return (double) best;
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

/* Whether a value (the string str, or else the number num) is one of the
 * values that the list when names. */
static bool s_when_lists(const json_t *when, const char *str, double num)
{
    size_t k;
    json_t *w;
    json_array_foreach(when, k, w) {
        double a;
        if (str ? json_is_string(w) && !strcmp(json_string_value(w), str) : zt_study_num(w, &a) && a == num)
            return true;
    }
    return false;
}

/* Whether the list when names the value v. */
static bool s_when_names(const json_t *when, json_t *v)
{
    double num;
    if (json_is_string(v))
        return s_when_lists(when, json_string_value(v), 0);
    return zt_study_num(v, &num) && s_when_lists(when, NULL, num);
}

/* Whether p is active given the values chosen so far. */
static bool s_active(zt_study_t *s, int i, json_t *params)
{
    const s_param_t *p = &s->p[i];
    if (p->parent < 0)
        return true;
    json_t *pv = json_object_get(params, s->p[p->parent].name);
    return pv && s_active(s, p->parent, params) && s_when_names(p->when, pv);
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

/* A number's coordinate in a double or integer parameter's range. */
static double s_unit_num(const s_param_t *p, double x)
{
    if (p->max <= p->min)
        return 0.5;
    if (p->scale == SC_LOG)
        return (log(x) - log(p->min)) / (log(p->max) - log(p->min));
    if (p->scale == SC_RLOG)
        return 1 - (log(p->max + p->min - x) - log(p->min)) / (log(p->max) - log(p->min));
    return (x - p->min) / (p->max - p->min);
}

static double s_unit_of(const s_param_t *p, json_t *v)
{
    if (p->kind == P_CAT || p->kind == P_DISC) {
        size_t n = json_array_size(p->values), i;
        json_t *x;
        json_array_foreach(p->values, i, x)
            if (json_equal(x, v) || (json_is_number(x) && json_is_number(v) &&
                                     json_number_value(x) == json_number_value(v)))
                return p->kind == P_CAT ? ((double) i + 0.5) / (double) n : s_disc_unit(p, i);
        return 0.5;
    }
    return s_unit_num(p, json_number_value(v));
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

/* A random coordinate for p: uniform over a range, every value of a list
 * as likely as any other. */
static double s_random_unit(zt_study_t *s, const s_param_t *p)
{
    if (p->kind != P_CAT && p->kind != P_DISC)
        return s_rand01(s);
    size_t n = json_array_size(p->values), i = (size_t) (s_rand01(s) * (double) n);
    i = i >= n ? n - 1 : i;
    return p->kind == P_CAT ? ((double) i + 0.5) / (double) n : s_disc_unit(p, i);
}

/* The parameters as zt_bo's dimensions: a double is continuous, an
 * integer (of up to 256 values) or a discrete list discrete at its values'
 * coordinates (in at, which the caller frees), a category categorical. */
static void s_dims(zt_study_t *s, zt_bo_dim_t *dims, double **at)
{
    size_t total = 0;
    for (int i = 0; i < s->np; i++)
        total += s->p[i].kind == P_INT ? (size_t) (s->p[i].max - s->p[i].min) + 1 : json_array_size(s->p[i].values);
    double *a = *at = malloc(sizeof(double) * (total + 1));
    for (int i = 0; i < s->np; i++) {
        const s_param_t *p = &s->p[i];
        int n = p->kind == P_INT ? (int) (p->max - p->min) + 1 : (int) json_array_size(p->values);
        dims[i] = (zt_bo_dim_t) { ZT_BO_CONT, 0, NULL };
        if (p->kind == P_CAT)
            dims[i] = (zt_bo_dim_t) { ZT_BO_CAT, n, NULL };
        else if (p->kind == P_DISC || (p->kind == P_INT && n <= 256)) {
            for (int k = 0; k < n; k++)
                a[k] = p->kind == P_DISC ? s_disc_unit(p, (size_t) k) : s_unit_num(p, p->min + k);
            dims[i] = (zt_bo_dim_t) { ZT_BO_DISC, n, a };
            a += n;
        }
    }
}

/* A trial's coordinates as zt_bo's: a category by its index. */
static void s_bo_point(zt_study_t *s, const zt_bo_dim_t *dims, const double *u, double *x)
{
    for (int i = 0; i < s->np; i++) {
        int c = (int) (u[i] * dims[i].n);
        x[i] = dims[i].kind == ZT_BO_CAT ? (c >= dims[i].n ? dims[i].n - 1 : c) : u[i];
    }
}

/* Whether parent value xp (in zt_bo's coordinates) is one that makes
 * parameter i active. */
static bool s_when_has(const zt_study_t *s, int i, double xp)
{
    const s_param_t *pp = &s->p[s->p[i].parent];
    size_t n = json_array_size(pp->values), k = 0;
    if (pp->kind == P_CAT)
        return s_when_names(s->p[i].when, json_array_get(pp->values, (size_t) xp < n ? (size_t) xp : n - 1));
    if (pp->kind != P_DISC)
        return s_when_lists(s->p[i].when, NULL, s_to_value(pp, xp));
    for (size_t j = 1; j < n; j++) /* the nearest value */
        k = fabs(s_disc_unit(pp, j) - xp) < fabs(s_disc_unit(pp, k) - xp) ? j : k;
    return s_when_names(s->p[i].when, json_array_get(pp->values, k));
}

/* zt_bo's fix: x as the study records it, every parameter that its
 * parent's value leaves inactive at the placeholder (s_params_from_u's 0.5). */
static void s_bo_fix(const void *ctx, double *x)
{
    const zt_study_t *s = ctx;
    bool active[MAX_PARAMS];
    for (int i = 0; i < s->np; i++) {
        int par = s->p[i].parent;
        active[i] = par < 0 || (active[par] && s_when_has(s, i, x[par]));
        if (!active[i])
            x[i] = s->p[i].kind == P_CAT ? (double) (size_t) (0.5 * (double) json_array_size(s->p[i].values)) : 0.5;
    }
}

/* Whether trial t has a value for every metric the search steers by
 * (into y, higher is better). */
static bool s_observed(zt_study_t *s, const s_trial_t *t, int m, double *y)
{
    if (!t->has_final || !zt_state_succeeded(t->state))
        return false;
    y[0] = s->maximize ? t->final : -t->final;
    for (int k = 0; k + 1 < m; k++) {
        if (!t->extra_has[k])
            return false;
        y[k + 1] = s->extra_max[k] ? t->extra_final[k] : -t->extra_final[k];
    }
    for (int k = 0; k < m; k++) /* a metric of NaN or infinity tells the model nothing */
        if (!isfinite(y[k]))
            return false;
    return true;
}

/* Past S_MAX_OBS observations (rows of X and Y), the model keeps the
 * S_MAX_OBS / 2 best by the first metric and the most recent of the
 * rest: its cost grows with the cube of their number. Returns how many. */
#define S_MAX_OBS 400
static int s_thin(int n, int d, int m, double *X, double *Y)
{
    if (n <= S_MAX_OBS)
        return n;
    int *order = malloc(sizeof(int) * (size_t) n);
    bool *keep = calloc((size_t) n, sizeof(bool));
    for (int i = 0; i < n; i++)
        order[i] = i;
    for (int i = 0; i < S_MAX_OBS / 2; i++) /* a partial selection sort: the best half-quota first */
        for (int j = i + 1; j < n; j++)
            if (Y[(size_t) order[j] * m] > Y[(size_t) order[i] * m]) {
                int t = order[i];
                order[i] = order[j];
                order[j] = t;
            }
    for (int i = 0; i < S_MAX_OBS / 2; i++)
        keep[order[i]] = true;
    for (int i = n - 1, kept = S_MAX_OBS / 2; i >= 0 && kept < S_MAX_OBS; i--) /* rows are oldest first */
        if (!keep[i]) {
            keep[i] = true;
            kept++;
        }
    int k = 0;
    for (int i = 0; i < n; i++)
        if (keep[i]) {
            memmove(X + (size_t) k * d, X + (size_t) i * d, sizeof(double) * (size_t) d);
            memmove(Y + (size_t) k * m, Y + (size_t) i * m, sizeof(double) * (size_t) m);
            k++;
        }
    free(order);
    free(keep);
    return k;
}

/* Bayesian optimisation (zt_bo): the GPs over a warm start's priors and
 * the finished trials (every metric), the running ones pending. false with
 * fewer than two results, or when no model can be fitted. */
static bool s_bayes(zt_study_t *s, double *u_out)
{
    int d = s->np, m = 1 + s->nextra, n = 0, np = 0, rows = s->nt + s->nprior + 1;
    zt_bo_dim_t dims[MAX_PARAMS];
    double *at, x[MAX_PARAMS];
    s_dims(s, dims, &at);
    double *X = malloc(sizeof(double) * (size_t) rows * (size_t) d), *Y = malloc(sizeof(double) * (size_t) rows * (size_t) m);
    double *P = malloc(sizeof(double) * (size_t) rows * (size_t) d);
    for (int i = 0; i < s->nprior && m == 1; i++) { /* a warm start's: the first metric only */
        s_bo_point(s, dims, s->prior_u + (size_t) i * MAX_PARAMS, X + (size_t) n * d);
        Y[n++] = s->maximize ? s->prior_y[i] : -s->prior_y[i];
    }
    for (int i = 0; i < s->nt; i++) {
        if (s_observed(s, &s->t[i], m, Y + (size_t) n * m))
            s_bo_point(s, dims, s->t[i].u, X + (size_t) n++ * d);
        else if (!strcmp(s->t[i].state, "ACTIVE"))
            s_bo_point(s, dims, s->t[i].u, P + (size_t) np++ * d);
    }
    n = s_thin(n, d, m, X, Y);
    if (!s->bo_rng)
        s->bo_rng = (uint64_t) rand_r(&s->rng) << 32 | (uint64_t) rand_r(&s->rng);
    zt_bo_problem_t bp = { d, dims, n, X, Y, m, np, P, s->gp_noise, &s->bo_rng, s->bo_hyper, NULL, s,
                           s->nt == s->max_trials - 1 /* the study's last trial */ };
    for (int i = 0; i < d; i++)
        bp.fix = s->p[i].parent >= 0 ? s_bo_fix : bp.fix;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    bool ok = zt_bo_suggest(&bp, x);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (ok && zt_log_level_ >= ZT_LOG_DEBUG) { /* what the model learned, and what it cost */
        char ls[MAX_PARAMS * 12] = "";
        for (int i = 0, o = 0; i < d && o < (int) sizeof ls - 12; i++)
            o += snprintf(ls + o, sizeof ls - (size_t) o, " %.3g", 1 / sqrt(s->bo_hyper[0].lambda[i]));
        zt_debug("search: %d observations, %d running: length scales%s, signal %.3g, noise %.3g; %.0f ms", n, np, ls,
                 s->bo_hyper[0].scale, s->bo_hyper[0].noise,
                 (double) (t1.tv_sec - t0.tv_sec) * 1e3 + (double) (t1.tv_nsec - t0.tv_nsec) / 1e6);
    }
    for (int i = 0; i < d && ok; i++)
        u_out[i] = dims[i].kind == ZT_BO_CAT ? (x[i] + 0.5) / dims[i].n : x[i];
    free(X);
    free(Y);
    free(P);
    free(at);
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
    /* random trials first: twice the dimensions, 5 to 10 */
    int n_init = 2 * s->np < 5 ? 5 : 2 * s->np > 10 ? 10 : 2 * s->np;
    int done = s->nprior + s->nt; /* a warm start's observations count; running trials too (a parallel
                                   * study's later ones are chosen knowing they run) */
    if (s->algo == A_BAYES && done >= n_init && s_bayes(s, u)) {
        json_t *params = s_params_from_u(s, u);
        for (int i = 0; i < s->np; i++) { /* the coordinates of the values it names (an integer's, rounded) */
            json_t *v = json_object_get(params, s->p[i].name);
            u[i] = v ? s_unit_of(&s->p[i], v) : u[i];
        }
        return params;
    }
    for (int i = 0; i < s->np; i++)
        u[i] = s_random_unit(s, &s->p[i]);
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
