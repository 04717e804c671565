#include "tune/zt_study.h"
#include "spec/zt_doc.h"
#include "spec/zt_jobspec.h"
#include "launch/zt_backend.h"

extern char **environ;
#include "base/zt_util.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_log.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_PARAMS 32
#define MAX_TRIALS 10000

typedef enum { P_DOUBLE, P_INT, P_CAT, P_DISC } s_kind_t;
typedef enum { SC_LINEAR, SC_LOG, SC_RLOG } s_scale_t;
typedef enum { A_BAYES, A_GRID, A_RANDOM } s_algo_t;

typedef struct {
    char name[64];             /* parameterId */
    s_kind_t kind;
    s_scale_t scale;
    double min, max;           /* double, integer */
    json_t *values;            /* categorical strings, discrete numbers (sorted) */
    int parent;                /* -1: top level */
    json_t *when;              /* parent values that make it active */
} s_param_t;

typedef struct {
    int id;                    /* 1, 2, ... */
    const char *state;         /* ACTIVE, SUCCEEDED, FAILED, STOPPING, STOPPED */
    json_t *params;            /* name -> value */
    double u[MAX_PARAMS];      /* scaled coordinates (0.5 when inactive) */
    zt_handle_t *run;          /* its `ztrain run`, NULL when done */
    char *job_dir, *base;      /* job directory, output base */
    json_t *meas;              /* [[step, value], ...] */
    double final;              /* the selected measurement */
    bool has_final;
    int exit_status;           /* of `ztrain run` */
    char started[40], ended[40];
    bool stop_requested;       /* median stopping */
} s_trial_t;

struct zt_study_t {
    zt_study_opts_t opts;
    char *dir;                 /* study directory (absolute) */
    char *trial_job;           /* <dir>/trial-job.json */
    char *base_output;         /* trialJobSpec's baseOutputDirectory, or NULL */
    char metric[128];          /* metricId */
    bool maximize;
    s_param_t p[MAX_PARAMS];
    int np;
    s_algo_t algo;
    bool select_best;          /* measurementSelectionType BEST */
    bool median_stop;          /* medianAutomatedStoppingSpec */
    int max_trials, parallel, max_failed;
    json_t *grid;              /* GRID_SEARCH: every assignment */
    s_trial_t *t;
    int nt;
    unsigned rng;              /* seeded */
    const char *state;         /* RUNNING, SUCCEEDED, FAILED, CANCELLED */
    int failed;
    bool tty;
    zt_backend_t *launcher;    /* starts each trial's `ztrain run` */
};

/* ------------------------------------------------------------ parsing */

typedef struct { zt_doc_t *doc; zt_diag_t *diag; zt_study_t *s; } s_ctx_t;
#define ERR(c, path, val, ...) zt_doc_report((c)->doc, (c)->diag, 1, (path), (val), __VA_ARGS__)
#define WARN(c, path, val, ...) zt_doc_report((c)->doc, (c)->diag, 0, (path), (val), __VA_ARGS__)

static void s_unknown(s_ctx_t *c, json_t *obj, const char *path, const char *const *known)
{
    zt_doc_warn_unknown(c->doc, c->diag, obj, path, known);
}

static bool s_num(json_t *v, double *out)
{
    if (json_is_number(v)) {
        *out = json_number_value(v);
        return true;
    }
    if (json_is_string(v)) { /* proto3 JSON writes int64 as strings */
        char *end;
        *out = strtod(json_string_value(v), &end);
        return end != json_string_value(v) && !*end;
    }
    return false;
}

static int s_cmp_json_num(const void *a, const void *b)
{
    double x = json_number_value(*(json_t *const *) a), y = json_number_value(*(json_t *const *) b);
    return x < y ? -1 : x > y;
}

static void s_parse_param(s_ctx_t *c, json_t *j, const char *path, int parent, json_t *when)
{
    zt_study_t *s = c->s;
    if (!json_is_object(j)) {
        ERR(c, path, j, "expected a parameter spec object");
        return;
    }
    if (s->np >= MAX_PARAMS) {
        ERR(c, path, NULL, "at most %d parameters", MAX_PARAMS);
        return;
    }
    static const char *const known[] = { "parameterId", "doubleValueSpec", "integerValueSpec",
        "categoricalValueSpec", "discreteValueSpec", "scaleType", "conditionalParameterSpecs", NULL };
    s_unknown(c, j, path, known);
    s_param_t *p = &s->p[s->np];
    memset(p, 0, sizeof *p);
    p->parent = parent;
    p->when = when ? json_incref(when) : NULL;
    const char *id = json_string_value(json_object_get(j, "parameterId"));
    char *ip = zt_strdupf("%s.parameterId", path);
    if (!id || !*id || strlen(id) >= sizeof p->name)
        ERR(c, ip, json_object_get(j, "parameterId"), "required: a name (it becomes --name=value)");
    else {
        for (int i = 0; i < s->np; i++)
            if (!strcmp(s->p[i].name, id))
                ERR(c, ip, json_object_get(j, "parameterId"), "duplicate parameterId");
        snprintf(p->name, sizeof p->name, "%s", id);
    }
    free(ip);
    static const char *const specs[4] = { "doubleValueSpec", "integerValueSpec",
                                          "categoricalValueSpec", "discreteValueSpec" };
    int nspec = 0, which = -1;
    for (int k = 0; k < 4; k++)
        if (json_object_get(j, specs[k])) {
            nspec++;
            which = k;
        }
    if (nspec != 1) {
        ERR(c, path, NULL, "give exactly one of doubleValueSpec, integerValueSpec, "
            "categoricalValueSpec, discreteValueSpec (%d given)", nspec);
        return;
    }
    p->kind = (s_kind_t) which;
    json_t *spec = json_object_get(j, specs[which]);
    char *sp = zt_strdupf("%s.%s", path, specs[which]);
    if (p->kind == P_DOUBLE || p->kind == P_INT) {
        char *mnp = zt_strdupf("%s.minValue", sp), *mxp = zt_strdupf("%s.maxValue", sp);
        json_t *mn = json_object_get(spec, "minValue"), *mx = json_object_get(spec, "maxValue");
        if (!s_num(mn, &p->min))
            ERR(c, mnp, mn, "required: a number");
        else if (!s_num(mx, &p->max))
            ERR(c, mxp, mx, "required: a number");
        else if (p->kind == P_DOUBLE ? p->min >= p->max : p->min > p->max)
            ERR(c, mxp, mx, "must be %s minValue (%g)", p->kind == P_DOUBLE ? "greater than" : "at least",
                p->min);
        else if (p->kind == P_INT && (p->min != floor(p->min) || p->max != floor(p->max)))
            ERR(c, sp, spec, "integerValueSpec bounds must be whole numbers");
        free(mnp);
        free(mxp);
    }
    else {
        json_t *vals = json_object_get(spec, "values");
        char *vp = zt_strdupf("%s.values", sp);
        if (!json_is_array(vals) || json_array_size(vals) == 0)
            ERR(c, vp, vals, "required: a non-empty list");
        else {
            p->values = json_array();
            size_t i;
            json_t *v;
            json_array_foreach(vals, i, v) {
                double d;
                if (p->kind == P_CAT && !json_is_string(v)) {
                    char *ep = zt_strdupf("%s[%zu]", vp, i);
                    ERR(c, ep, v, "categorical values are strings");
                    free(ep);
                }
                else if (p->kind == P_DISC && !s_num(v, &d)) {
                    char *ep = zt_strdupf("%s[%zu]", vp, i);
                    ERR(c, ep, v, "discrete values are numbers");
                    free(ep);
                }
                else
                    json_array_append_new(p->values, p->kind == P_CAT ? json_incref(v) : json_real(d));
            }
        }
        free(vp);
    }
    const char *scale = json_string_value(json_object_get(j, "scaleType"));
    char *scp = zt_strdupf("%s.scaleType", path);
    if (!scale || !strcmp(scale, "UNIT_LINEAR_SCALE") || !strcmp(scale, "SCALE_TYPE_UNSPECIFIED"))
        p->scale = SC_LINEAR;
    else if (!strcmp(scale, "UNIT_LOG_SCALE"))
        p->scale = SC_LOG;
    else if (!strcmp(scale, "UNIT_REVERSE_LOG_SCALE"))
        p->scale = SC_RLOG;
    else
        ERR(c, scp, json_object_get(j, "scaleType"),
            "expected UNIT_LINEAR_SCALE, UNIT_LOG_SCALE or UNIT_REVERSE_LOG_SCALE");
    if (p->scale != SC_LINEAR && (p->kind == P_DOUBLE || p->kind == P_INT) && p->min <= 0) {
        json_t *v = json_real(p->min);
        char *mnp = zt_strdupf("%s.minValue", sp);
        ERR(c, mnp, v, "a log scale needs minValue > 0");
        free(mnp);
        json_decref(v);
    }
    if (p->scale != SC_LINEAR && p->kind == P_CAT)
        WARN(c, scp, json_object_get(j, "scaleType"), "ignored for categorical parameters");
    free(scp);
    free(sp);
    int me = s->np++;
    /* sort discrete values ascending */
    if (p->kind == P_DISC && p->values) {
        size_t n = json_array_size(p->values);
        json_t **a = malloc(n * sizeof *a);
        for (size_t i = 0; i < n; i++)
            a[i] = json_incref(json_array_get(p->values, i));
        qsort(a, n, sizeof *a, s_cmp_json_num);
        json_array_clear(p->values);
        for (size_t i = 0; i < n; i++)
            json_array_append_new(p->values, a[i]);
        free(a);
    }
    json_t *conds = json_object_get(j, "conditionalParameterSpecs");
    size_t i;
    json_t *cs;
    json_array_foreach(conds, i, cs) {
        char *cp = zt_strdupf("%s.conditionalParameterSpecs[%zu]", path, i);
        static const char *const ck[] = { "parentDiscreteValues", "parentIntValues",
                                          "parentCategoricalValues", "parameterSpec", NULL };
        s_unknown(c, cs, cp, ck);
        json_t *w = json_object_get(json_object_get(cs, "parentDiscreteValues"), "values");
        if (!w) w = json_object_get(json_object_get(cs, "parentIntValues"), "values");
        if (!w) w = json_object_get(json_object_get(cs, "parentCategoricalValues"), "values");
        if (!json_is_array(w))
            ERR(c, cp, NULL, "give parentDiscreteValues, parentIntValues or parentCategoricalValues "
                "{values: [...]}");
        else {
            char *pp = zt_strdupf("%s.parameterSpec", cp);
            s_parse_param(c, json_object_get(cs, "parameterSpec"), pp, me, w);
            free(pp);
        }
        free(cp);
    }
}

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
        if (s_num(w, &a) && s_num(pv, &b) && a == b)
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

static double s_rand01(zt_study_t *s)
{
    return (double) (rand_r(&s->rng) % 1000000) / 1000000.0 + 0.0000005;
}

/* Grid: every combination of the discrete parameters, children expanded
 * only where their parent's value makes them active. */
static void s_grid_expand(zt_study_t *s, int i, json_t *params, json_t *out)
{
    if (json_array_size(out) >= MAX_TRIALS)
        return;
    if (i == s->np) {
        json_array_append_new(out, json_deep_copy(params));
        return;
    }
    if (!s_active(s, i, params)) {
        s_grid_expand(s, i + 1, params, out);
        return;
    }
    const s_param_t *p = &s->p[i];
    int n = p->kind == P_INT ? (int) (p->max - p->min) + 1 : (int) json_array_size(p->values);
    for (int k = 0; k < n; k++) {
        json_object_set_new(params, p->name, p->kind == P_INT ? json_integer((json_int_t) (p->min + k))
                                                              : s_json_value(p, (double) k));
        s_grid_expand(s, i + 1, params, out);
    }
    json_object_del(params, p->name);
}

/* ------------------------------------------------------------ Bayesian */

static double s_kernel(const double *a, const double *b, int d, double ls)
{
    double r = 0;
    for (int k = 0; k < d; k++)
        r += (a[k] - b[k]) * (a[k] - b[k]);
    return exp(-r / (2 * ls * ls));
}

/* Cholesky in place (lower); false if not positive definite. */
static bool s_chol(double *A, int n)
{
    for (int j = 0; j < n; j++) {
        double d = A[j * n + j];
        for (int k = 0; k < j; k++)
            d -= A[j * n + k] * A[j * n + k];
        if (d <= 0)
            return false;
        A[j * n + j] = sqrt(d);
        for (int i = j + 1; i < n; i++) {
            double v = A[i * n + j];
            for (int k = 0; k < j; k++)
                v -= A[i * n + k] * A[j * n + k];
            A[i * n + j] = v / A[j * n + j];
        }
    }
    return true;
}

static void s_solve_lower(const double *L, int n, const double *b, double *x)
{
    for (int i = 0; i < n; i++) {
        double v = b[i];
        for (int k = 0; k < i; k++)
            v -= L[i * n + k] * x[k];
        x[i] = v / L[i * n + i];
    }
}

static void s_solve_upper_t(const double *L, int n, const double *b, double *x)
{
    for (int i = n - 1; i >= 0; i--) {
        double v = b[i];
        for (int k = i + 1; k < n; k++)
            v -= L[k * n + i] * x[k];
        x[i] = v / L[i * n + i];
    }
}

/* Expected improvement maximised over random and local candidates.
 * Observations: completed trials; running ones count at the current mean
 * ("constant liar") so parallel suggestions spread out. */
static bool s_bayes(zt_study_t *s, double *u_out)
{
    int d = s->np, n = 0;
    double *X = malloc(sizeof(double) * (size_t) (s->nt + 1) * (size_t) d);
    double *y = malloc(sizeof(double) * (size_t) (s->nt + 1));
    for (int i = 0; i < s->nt; i++)
        if (s->t[i].has_final && (!strcmp(s->t[i].state, "SUCCEEDED") || !strcmp(s->t[i].state, "STOPPED"))) {
            memcpy(X + n * d, s->t[i].u, sizeof(double) * (size_t) d);
            y[n++] = s->maximize ? s->t[i].final : -s->t[i].final;
        }
    int nobs = n;
    if (nobs < 2) {
        free(X);
        free(y);
        return false;
    }
    double mean = 0, sd = 0;
    for (int i = 0; i < nobs; i++)
        mean += y[i] / nobs;
    for (int i = 0; i < nobs; i++)
        sd += (y[i] - mean) * (y[i] - mean) / nobs;
    sd = sqrt(sd) > 1e-12 ? sqrt(sd) : 1;
    for (int i = 0; i < s->nt; i++)
        if (!strcmp(s->t[i].state, "ACTIVE")) {
            memcpy(X + n * d, s->t[i].u, sizeof(double) * (size_t) d);
            y[n++] = mean;
        }
    double best = -INFINITY;
    for (int i = 0; i < n; i++) {
        y[i] = (y[i] - mean) / sd;
        if (i < nobs && y[i] > best)
            best = y[i];
    }
    /* length scale by marginal likelihood */
    const double scales[4] = { 0.1, 0.2, 0.35, 0.6 };
    double *K = malloc(sizeof(double) * (size_t) n * (size_t) n), *alpha = malloc(sizeof(double) * (size_t) n);
    double *tmp = malloc(sizeof(double) * (size_t) n), ls = 0.2, best_ll = -INFINITY;
    for (int li = 0; li < 4; li++) {
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                K[i * n + j] = s_kernel(X + i * d, X + j * d, d, scales[li]) + (i == j ? 1e-4 : 0);
        if (!s_chol(K, n))
            continue;
        s_solve_lower(K, n, y, tmp);
        double ll = 0;
        for (int i = 0; i < n; i++)
            ll -= 0.5 * tmp[i] * tmp[i] + log(K[i * n + i]);
        if (ll > best_ll) {
            best_ll = ll;
            ls = scales[li];
        }
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            K[i * n + j] = s_kernel(X + i * d, X + j * d, d, ls) + (i == j ? 1e-4 : 0);
    bool ok = s_chol(K, n);
    if (ok) {
        s_solve_lower(K, n, y, tmp);
        s_solve_upper_t(K, n, tmp, alpha);
        double cand[MAX_PARAMS], best_ei = -1, *ks = malloc(sizeof(double) * (size_t) n);
        double *v = malloc(sizeof(double) * (size_t) n);
        int best_i = 0;
        for (int i = 1; i < nobs; i++)
            if (y[i] > y[best_i])
                best_i = i;
        for (int c = 0; c < 3000; c++) {
            for (int k = 0; k < d; k++) {
                if (c % 3 == 0) { /* near the best so far */
                    double g = (s_rand01(s) - 0.5) * 0.2;
                    cand[k] = X[best_i * d + k] + g;
                    cand[k] = cand[k] < 0 ? 0 : cand[k] > 1 ? 1 : cand[k];
                }
                else
                    cand[k] = s_rand01(s);
            }
            double mu = 0;
            for (int i = 0; i < n; i++) {
                ks[i] = s_kernel(X + i * d, cand, d, ls);
                mu += ks[i] * alpha[i];
            }
            s_solve_lower(K, n, ks, v);
            double var = 1 + 1e-4;
            for (int i = 0; i < n; i++)
                var -= v[i] * v[i];
            double sigma = var > 1e-12 ? sqrt(var) : 1e-6;
            double z = (mu - best - 0.01) / sigma;
            double ei = (mu - best - 0.01) * 0.5 * erfc(-z / sqrt(2)) + sigma * exp(-0.5 * z * z) / sqrt(2 * M_PI);
            if (ei > best_ei) {
                best_ei = ei;
                memcpy(u_out, cand, sizeof(double) * (size_t) d);
            }
        }
        free(ks);
        free(v);
    }
    free(K);
    free(alpha);
    free(tmp);
    free(X);
    free(y);
    return ok;
}

/* The next trial's parameters; NULL when the search space is used up. */
static json_t *s_suggest(zt_study_t *s, double *u)
{
    if (s->algo == A_GRID) {
        if ((size_t) s->nt >= json_array_size(s->grid))
            return NULL;
        json_t *params = json_deep_copy(json_array_get(s->grid, (size_t) s->nt));
        for (int i = 0; i < s->np; i++) {
            json_t *v = json_object_get(params, s->p[i].name);
            u[i] = v ? s_unit_of(&s->p[i], v) : 0.5;
        }
        return params;
    }
    int n_init = s->np + 1 > 3 ? s->np + 1 : 3;
    int done = 0;
    for (int i = 0; i < s->nt; i++)
        done += s->t[i].has_final;
    if (s->algo == A_BAYES && done >= n_init && s_bayes(s, u))
        return s_params_from_u(s, u);
    for (int i = 0; i < s->np; i++)
        u[i] = s_rand01(s);
    return s_params_from_u(s, u);
}

/* ------------------------------------------------------------ load */

zt_study_t *zt_study_new(const zt_study_opts_t *opts, zt_diag_t *diag)
{
    zt_doc_t *doc = NULL;
    if (zt_doc_load(opts->file, &doc, diag) != ZT_OK)
        return NULL;
    zt_study_t *s = calloc(1, sizeof *s);
    s->opts = *opts;
    s->rng = (unsigned) (opts->seed ? opts->seed : 1);
    s->state = "RUNNING";
    s_ctx_t ctx = { doc, diag, s }, *c = &ctx;
    json_t *root = doc->root;
    static const char *const rk[] = { "displayName", "studySpec", "maxTrialCount", "parallelTrialCount",
        "maxFailedTrialCount", "trialJobSpec", "labels", "encryptionSpec", NULL };
    s_unknown(c, root, "", rk);
    json_t *ss = json_object_get(root, "studySpec");
    if (!json_is_object(ss))
        ERR(c, "studySpec", ss, "required: the metrics, parameters and algorithm");
    else {
        static const char *const sk[] = { "metrics", "parameters", "algorithm", "measurementSelectionType",
            "medianAutomatedStoppingSpec", "observationNoise", "decayCurveStoppingSpec",
            "convexAutomatedStoppingSpec", "studyStoppingConfig", NULL };
        s_unknown(c, ss, "studySpec", sk);
        json_t *ms = json_object_get(ss, "metrics");
        if (!json_is_array(ms) || json_array_size(ms) == 0)
            ERR(c, "studySpec.metrics", ms, "required: [{metricId, goal}]");
        else {
            if (json_array_size(ms) > 1)
                WARN(c, "studySpec.metrics", NULL, "only the first metric is optimised");
            json_t *m = json_array_get(ms, 0);
            const char *id = json_string_value(json_object_get(m, "metricId"));
            const char *goal = json_string_value(json_object_get(m, "goal"));
            if (!id || !*id || strlen(id) >= sizeof s->metric)
                ERR(c, "studySpec.metrics[0].metricId", json_object_get(m, "metricId"),
                    "required: the metric tag the trials report");
            else
                snprintf(s->metric, sizeof s->metric, "%s", id);
            if (!goal || (strcmp(goal, "MAXIMIZE") && strcmp(goal, "MINIMIZE")))
                ERR(c, "studySpec.metrics[0].goal", json_object_get(m, "goal"), "expected MAXIMIZE or MINIMIZE");
            else
                s->maximize = !strcmp(goal, "MAXIMIZE");
        }
        json_t *ps = json_object_get(ss, "parameters");
        if (!json_is_array(ps) || json_array_size(ps) == 0)
            ERR(c, "studySpec.parameters", ps, "required: at least one parameter");
        size_t i;
        json_t *pj;
        json_array_foreach(ps, i, pj) {
            char *pp = zt_strdupf("studySpec.parameters[%zu]", i);
            s_parse_param(c, pj, pp, -1, NULL);
            free(pp);
        }
        const char *algo = json_string_value(json_object_get(ss, "algorithm"));
        if (!algo || !strcmp(algo, "ALGORITHM_UNSPECIFIED"))
            s->algo = A_BAYES;
        else if (!strcmp(algo, "GRID_SEARCH"))
            s->algo = A_GRID;
        else if (!strcmp(algo, "RANDOM_SEARCH"))
            s->algo = A_RANDOM;
        else
            ERR(c, "studySpec.algorithm", json_object_get(ss, "algorithm"),
                "expected GRID_SEARCH, RANDOM_SEARCH, or unset (Bayesian optimisation)");
        if (s->algo == A_GRID)
            for (int k = 0; k < s->np; k++)
                if (s->p[k].kind == P_DOUBLE) {
                    json_t *v = json_string(s->p[k].name);
                    ERR(c, "studySpec.algorithm", json_object_get(ss, "algorithm"),
                        "GRID_SEARCH needs integer, categorical or discrete parameters; '%s' is a "
                        "doubleValueSpec", s->p[k].name);
                    json_decref(v);
                }
        const char *sel = json_string_value(json_object_get(ss, "measurementSelectionType"));
        if (sel && strcmp(sel, "LAST_MEASUREMENT") && strcmp(sel, "BEST_MEASUREMENT") &&
            strcmp(sel, "LAST") && strcmp(sel, "BEST") && strcmp(sel, "MEASUREMENT_SELECTION_TYPE_UNSPECIFIED"))
            ERR(c, "studySpec.measurementSelectionType", json_object_get(ss, "measurementSelectionType"),
                "expected LAST_MEASUREMENT or BEST_MEASUREMENT");
        s->select_best = sel && strstr(sel, "BEST");
        s->median_stop = json_is_object(json_object_get(ss, "medianAutomatedStoppingSpec"));
    }
    double v;
    json_t *mt = json_object_get(root, "maxTrialCount"), *pt = json_object_get(root, "parallelTrialCount"),
           *mf = json_object_get(root, "maxFailedTrialCount");
    if (!s_num(mt, &v) || v < 1 || v > MAX_TRIALS || v != floor(v))
        ERR(c, "maxTrialCount", mt, "required: a whole number from 1 to %d", MAX_TRIALS);
    else
        s->max_trials = (int) v;
    s->parallel = 1;
    if (pt && (!s_num(pt, &v) || v < 1 || v != floor(v)))
        ERR(c, "parallelTrialCount", pt, "expected a whole number >= 1");
    else if (pt)
        s->parallel = (int) v;
    if (s->max_trials && s->parallel > s->max_trials) {
        json_t *pv = json_integer(s->parallel);
        ERR(c, "parallelTrialCount", pv, "must be at most maxTrialCount (%d)", s->max_trials);
        json_decref(pv);
    }
    if (mf && (!s_num(mf, &v) || v < 0 || v != floor(v)))
        ERR(c, "maxFailedTrialCount", mf, "expected a whole number >= 0");
    /* 0 or unset: the service decides; ztrain allows half the trials to fail */
    s->max_failed = mf && v > 0 ? (int) v : (s->max_trials > 1 ? s->max_trials / 2 : 1);
    /* The trial job, checked like any job. */
    zt_plan_opts_t po = { opts->file, json_array(), NULL, 0, NULL, true, "trialJobSpec" };
    zt_plan_t *plan = NULL;
    zt_plan_load(&po, &plan, diag);
    json_decref(po.flags);
    if (plan) {
        if (plan->base_output_dir)
            s->base_output = strdup(plan->base_output_dir);
        zt_plan_destroy(&plan);
    }
    if (zt_diag_errors(diag) == 0) {
        if (zt_mkdir_p(opts->study_dir) != ZT_OK) {
            zt_diag_add(diag, true, opts->study_dir, 0, 0, NULL, NULL, "cannot make the study directory: %s",
                        strerror(errno));
        }
        else {
            char real[4096];
            s->dir = strdup(realpath(opts->study_dir, real) ? real : opts->study_dir);
            s->trial_job = zt_strdupf("%s/trial-job.json", s->dir);
            char *text = json_dumps(json_object_get(root, "trialJobSpec"), JSON_INDENT(2));
            zt_write_file_atomic(s->trial_job, text, strlen(text));
            free(text);
            if (s->algo == A_GRID) {
                s->grid = json_array();
                json_t *params = json_object();
                s_grid_expand(s, 0, params, s->grid);
                json_decref(params);
            }
        }
    }
    zt_doc_destroy(&doc);
    if (zt_diag_errors(diag) > 0) {
        zt_study_destroy(&s);
        return NULL;
    }
    s->t = calloc((size_t) s->max_trials, sizeof *s->t);
    s->tty = isatty(STDOUT_FILENO);
    s->launcher = zt_backend_local_new();
    return s;
}

void zt_study_destroy(zt_study_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zt_study_t *s = *self_p;
    for (int i = 0; i < s->np; i++) {
        json_decref(s->p[i].values);
        json_decref(s->p[i].when);
    }
    for (int i = 0; i < s->nt; i++) {
        json_decref(s->t[i].params);
        json_decref(s->t[i].meas);
        free(s->t[i].job_dir);
        free(s->t[i].base);
    }
    free(s->t);
    if (s->launcher) {
        s->launcher->cleanup(s->launcher);
        s->launcher->destroy(&s->launcher);
    }
    json_decref(s->grid);
    free(s->dir);
    free(s->trial_job);
    free(s->base_output);
    free(s);
    *self_p = NULL;
}

char *zt_study_suggest_json(zt_study_t *s, int n)
{
    json_t *out = json_array();
    for (int k = 0; k < n && s->nt < s->max_trials; k++) {
        s_trial_t *t = &s->t[s->nt];
        t->params = s_suggest(s, t->u);
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

/* ------------------------------------------------------------ running */

static volatile sig_atomic_t s_interrupted;
static void s_on_signal(int sig) { (void) sig; s_interrupted = 1; }

static bool s_better(zt_study_t *s, double a, double b)
{
    return s->maximize ? a > b : a < b;
}

static void s_add_meas(s_trial_t *t, double step, double value)
{
    size_t i;
    json_t *m;
    json_array_foreach(t->meas, i, m)
        if (json_real_value(json_array_get(m, 0)) == step && json_real_value(json_array_get(m, 1)) == value)
            return;
    json_array_append_new(t->meas, json_pack("[ff]", step, value));
}

/* Measurements: the hypertune metric files of the trial, and libztrain
 * metric reports (job.json metrics and evaluations). */
static void s_collect(zt_study_t *s, s_trial_t *t)
{
    char *hdir = zt_strdupf("%s/hypertune", t->base);
    DIR *d = opendir(hdir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char *path = zt_strdupf("%s/%s", hdir, e->d_name);
        char *text = zt_read_file(path, NULL);
        free(path);
        int line = 0;
        for (char *save = NULL, *l = text ? strtok_r(text, "\n", &save) : NULL; l; l = strtok_r(NULL, "\n", &save)) {
            json_t *j = json_loads(l, 0, NULL);
            double v, step;
            line++;
            if (j && s_num(json_object_get(j, s->metric), &v) && isfinite(v))
                s_add_meas(t, s_num(json_object_get(j, "global_step"), &step) ? step : line, v);
            json_decref(j);
        }
        free(text);
    }
    if (d)
        closedir(d);
    free(hdir);
    char *jp = zt_strdupf("%s/job.json", t->job_dir);
    json_t *job = json_load_file(jp, 0, NULL);
    free(jp);
    json_t *m = json_object_get(json_object_get(job, "metrics"), s->metric);
    if (m)
        s_add_meas(t, (double) json_integer_value(json_object_get(m, "step")),
                   json_number_value(json_object_get(m, "value")));
    size_t i;
    json_t *ev;
    json_array_foreach(json_object_get(job, "evaluations"), i, ev)
        if (!strcmp(json_string_value(json_object_get(ev, "name")) ?: "", s->metric))
            s_add_meas(t, (double) json_integer_value(json_object_get(ev, "step")),
                       json_number_value(json_object_get(ev, "value")));
    json_decref(job);
}

/* LAST: the measurement of the highest step; BEST: the best one. */
static bool s_select(zt_study_t *s, s_trial_t *t, double max_step, double *out)
{
    bool have = false;
    double best = 0, best_step = -INFINITY;
    size_t i;
    json_t *m;
    json_array_foreach(t->meas, i, m) {
        double step = json_real_value(json_array_get(m, 0)), v = json_real_value(json_array_get(m, 1));
        if (step > max_step)
            continue;
        if (s->select_best || max_step < INFINITY ? (!have || s_better(s, v, best)) : step >= best_step) {
            best = v;
            best_step = step;
        }
        have = true;
    }
    if (have)
        *out = best;
    return have;
}

static void s_param_args(s_trial_t *t, char **argv, int *argc)
{
    const char *key;
    json_t *v;
    json_object_foreach(t->params, key, v) {
        char *text = json_is_string(v) ? strdup(json_string_value(v)) : json_dumps(v, JSON_ENCODE_ANY | JSON_REAL_PRECISION(8));
        argv[(*argc)++] = zt_strdupf("--%s=%s", key, text);
        free(text);
    }
}

static char *s_params_text(s_trial_t *t)
{
    char buf[1024] = "";
    const char *key;
    json_t *v;
    json_object_foreach(t->params, key, v) {
        char *text = json_is_string(v) ? strdup(json_string_value(v)) : json_dumps(v, JSON_ENCODE_ANY | JSON_REAL_PRECISION(8));
        snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s=%s", buf[0] ? " " : "", key, text);
        free(text);
    }
    return strdup(buf);
}

static int s_start_trial(zt_study_t *s)
{
    s_trial_t *t = &s->t[s->nt];
    memset(t, 0, sizeof *t);
    t->params = s_suggest(s, t->u);
    if (!t->params)
        return ZT_ENOTFOUND;
    t->id = s->nt + 1;
    t->meas = json_array();
    t->state = "ACTIVE";
    t->job_dir = zt_strdupf("%s/trial-%d", s->dir, t->id);
    t->base = zt_strdupf("%s/%d", s->base_output ? s->base_output : t->job_dir, t->id);
    zt_wall_iso(t->started, sizeof t->started);
    char idbuf[16];
    snprintf(idbuf, sizeof idbuf, "%d", t->id);
    char *argv[MAX_PARAMS + 16];
    int argc = 0;
    argv[argc++] = strdup(s->opts.ztrain);
    argv[argc++] = strdup("run");
    argv[argc++] = strdup(s->trial_job);
    argv[argc++] = strdup("--job-dir");
    argv[argc++] = strdup(t->job_dir);
    argv[argc++] = strdup("--trial");
    argv[argc++] = strdup(idbuf);
    if (s->opts.cpu_only)
        argv[argc++] = strdup("--cpu-only");
    if (s->opts.backend) {
        argv[argc++] = strdup("--backend");
        argv[argc++] = strdup(s->opts.backend);
    }
    argv[argc++] = strdup("--");
    s_param_args(t, argv, &argc);
    argv[argc] = NULL;
    char *log = zt_strdupf("%s/trial-%d.log", s->dir, t->id);
    unlink(log);
    /* The trial's own coordinator is started the way a job's replicas are,
     * through the launch interface; its replicas go through opts.backend. */
    zt_launch_t req = { -1, t->id, -1, argv, environ, log, SIGTERM };
    int fd = -1;
    int rc = s->launcher ? s->launcher->start(s->launcher, &req, &t->run, &fd) : ZT_ESYS;
    for (int i = 0; i < argc; i++)
        free(argv[i]);
    free(log);
    s->nt++;
    if (rc != ZT_OK) { /* could not even start it: a failed trial */
        zt_error("trial %d: cannot start %s: %s", t->id, s->opts.ztrain, strerror(errno));
        t->state = "FAILED";
        zt_wall_iso(t->ended, sizeof t->ended);
        s->failed++;
        return ZT_ESYS;
    }
    char *pt = s_params_text(t);
    if (!s->tty)
        printf("trial %d ACTIVE %s\n", t->id, pt);
    free(pt);
    return ZT_OK;
}

static void s_write(zt_study_t *s)
{
    json_t *trials = json_array();
    int best = -1;
    for (int i = 0; i < s->nt; i++) {
        s_trial_t *t = &s->t[i];
        json_t *o = json_pack("{s:s, s:s, s:O, s:O, s:s, s:s, s:s}", "id", "", "state", t->state,
                              "parameters", t->params, "measurements", t->meas, "jobDir", t->job_dir,
                              "startTime", t->started, "endTime", t->ended);
        json_object_set_new(o, "id", json_sprintf("%d", t->id));
        json_object_set_new(o, "finalMeasurement", t->has_final ? json_real(t->final) : json_null());
        json_array_append_new(trials, o);
        if (t->has_final && (!strcmp(t->state, "SUCCEEDED") || !strcmp(t->state, "STOPPED")) &&
            (best < 0 || s_better(s, t->final, s->t[best].final)))
            best = i;
    }
    json_t *doc = json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:o}", "studyDir", s->dir, "state", s->state,
                            "metricId", s->metric, "goal", s->maximize ? "MAXIMIZE" : "MINIMIZE",
                            "maxTrialCount", s->max_trials, "parallelTrialCount", s->parallel,
                            "failedTrials", s->failed, "trials", trials);
    json_object_set_new(doc, "algorithm", json_string(s->algo == A_GRID ? "GRID_SEARCH" : s->algo == A_RANDOM
                                                                             ? "RANDOM_SEARCH" : "BAYESIAN"));
    if (best >= 0)
        json_object_set(doc, "bestTrial", json_array_get(trials, (size_t) best));
    else
        json_object_set_new(doc, "bestTrial", json_null());
    char *text = json_dumps(doc, JSON_INDENT(2));
    char *path = zt_strdupf("%s/study.json", s->dir);
    zt_write_file_atomic(path, text, strlen(text));
    free(path);
    free(text);
    /* trials.csv */
    char *csv = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&csv, &len);
    fprintf(f, "trial,state");
    for (int k = 0; k < s->np; k++)
        fprintf(f, ",%s", s->p[k].name);
    fprintf(f, ",%s,measurements\n", s->metric);
    for (int i = 0; i < s->nt; i++) {
        s_trial_t *t = &s->t[i];
        fprintf(f, "%d,%s", t->id, t->state);
        for (int k = 0; k < s->np; k++) {
            json_t *v = json_object_get(t->params, s->p[k].name);
            char *text2 = !v ? strdup("") : json_is_string(v) ? strdup(json_string_value(v))
                                                             : json_dumps(v, JSON_ENCODE_ANY | JSON_REAL_PRECISION(8));
            fprintf(f, ",%s", text2);
            free(text2);
        }
        if (t->has_final)
            fprintf(f, ",%.6g", t->final);
        else
            fprintf(f, ",");
        fprintf(f, ",%zu\n", json_array_size(t->meas));
    }
    fclose(f);
    path = zt_strdupf("%s/trials.csv", s->dir);
    zt_write_file_atomic(path, csv, len);
    free(path);
    free(csv);
    json_decref(doc);
}

static void s_table(zt_study_t *s)
{
    if (!s->tty)
        return;
    printf("\033[H\033[J"); /* redraw in place */
    printf("study %s: %s (%s %s, %d of %d trials)\n", s->dir, s->state, s->maximize ? "maximize" : "minimize",
           s->metric, s->nt, s->max_trials);
    printf("%-6s %-10s %-12s %-12s %s\n", "trial", "state", "latest", "final", "parameters");
    for (int i = 0; i < s->nt; i++) {
        s_trial_t *t = &s->t[i];
        char latest[32] = "-", fin[32] = "-";
        size_t n = json_array_size(t->meas);
        if (n)
            snprintf(latest, sizeof latest, "%.4g", json_real_value(json_array_get(json_array_get(t->meas, n - 1), 1)));
        if (t->has_final)
            snprintf(fin, sizeof fin, "%.4g", t->final);
        char *pt = s_params_text(t);
        printf("%-6d %-10s %-12s %-12s %s\n", t->id, t->state, latest, fin, pt);
        free(pt);
    }
    fflush(stdout);
}

/* Median stopping: an active trial whose best so far is worse than the
 * median of the completed trials' bests up to the same step. */
static void s_median_stop(zt_study_t *s, s_trial_t *t)
{
    size_t n = json_array_size(t->meas);
    if (!s->median_stop || t->stop_requested || n == 0)
        return;
    double step = -INFINITY;
    size_t i;
    json_t *m;
    json_array_foreach(t->meas, i, m)
        if (json_real_value(json_array_get(m, 0)) > step)
            step = json_real_value(json_array_get(m, 0));
    double mine = 0, others[MAX_TRIALS];
    int no = 0;
    bool saved = s->select_best;
    s->select_best = true;
    s_select(s, t, step, &mine);
    for (int k = 0; k < s->nt; k++)
        if (&s->t[k] != t && !strcmp(s->t[k].state, "SUCCEEDED") && s_select(s, &s->t[k], step, &others[no]))
            no++;
    s->select_best = saved;
    if (no < 2)
        return;
    for (int a = 1; a < no; a++) /* insertion sort */
        for (int b = a; b > 0 && others[b] < others[b - 1]; b--) {
            double x = others[b];
            others[b] = others[b - 1];
            others[b - 1] = x;
        }
    double median = no % 2 ? others[no / 2] : 0.5 * (others[no / 2 - 1] + others[no / 2]);
    if (s_better(s, median, mine)) {
        zt_info("trial %d: best %g so far is worse than the median %g of %d completed trials at step %g: "
                "stopping it", t->id, mine, median, no, step);
        if (!s->tty)
            printf("trial %d STOPPING: best %.4g < median %.4g at step %g\n", t->id, mine, median, step);
        t->stop_requested = true;
        t->state = "STOPPING";
        s->launcher->signal(s->launcher, t->run, SIGTERM);
    }
}

static void s_finish(zt_study_t *s, s_trial_t *t, int status)
{
    s->launcher->release(s->launcher, &t->run);
    t->exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    zt_wall_iso(t->ended, sizeof t->ended);
    s_collect(s, t);
    t->has_final = s_select(s, t, INFINITY, &t->final);
    if (t->stop_requested)
        t->state = "STOPPED";
    else if (t->exit_status == 0 && t->has_final)
        t->state = "SUCCEEDED";
    else {
        t->state = "FAILED";
        s->failed++;
    }
    if (!s->tty) {
        if (t->has_final)
            printf("trial %d %s %s=%.6g (%zu measurements)\n", t->id, t->state, s->metric, t->final,
                   json_array_size(t->meas));
        else
            printf("trial %d %s (exit status %d%s; see %s/trial-%d.log)\n", t->id, t->state, t->exit_status,
                   t->exit_status == 0 ? ", no measurement of the metric" : "", s->dir, t->id);
        fflush(stdout);
    }
}

int zt_study_run(zt_study_t *s)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = s_on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    bool exhausted = false, stopping = false;
    int64_t last_table = 0;
    s_write(s);
    for (;;) {
        int running = 0;
        for (int i = 0; i < s->nt; i++)
            running += s->t[i].run != NULL;
        if (s_interrupted && !stopping) {
            stopping = true;
            s->state = "CANCELLED";
            zt_info("interrupted: stopping every trial");
            for (int i = 0; i < s->nt; i++)
                if (s->t[i].run)
                    s->launcher->signal(s->launcher, s->t[i].run, SIGTERM);
        }
        while (!stopping && !exhausted && running < s->parallel && s->nt < s->max_trials) {
            if (s_start_trial(s) == ZT_ENOTFOUND) {
                exhausted = true;
                break;
            }
            running++;
            s_write(s);
        }
        if (running == 0 && (stopping || exhausted || s->nt >= s->max_trials))
            break;
        int status;
        zt_handle_t *h;
        while (s->launcher->reap(s->launcher, &h, &status) == 1)
            for (int i = 0; i < s->nt; i++)
                if (s->t[i].run == h) {
                    s_finish(s, &s->t[i], status);
                    if (s->failed > s->max_failed && !stopping) {
                        zt_error("%d trials failed (maxFailedTrialCount %d): the study fails", s->failed,
                                 s->max_failed);
                        stopping = true;
                        s->state = "FAILED";
                        for (int k = 0; k < s->nt; k++)
                            if (s->t[k].run)
                                s->launcher->signal(s->launcher, s->t[k].run, SIGTERM);
                    }
                    s_write(s);
                }
        for (int i = 0; i < s->nt; i++)
            if (s->t[i].run) {
                size_t before = json_array_size(s->t[i].meas);
                s_collect(s, &s->t[i]);
                if (json_array_size(s->t[i].meas) != before) {
                    s_median_stop(s, &s->t[i]);
                    s_write(s);
                }
            }
        if (zt_now_ms() - last_table > 1000) {
            s_table(s);
            last_table = zt_now_ms();
        }
        usleep(100000);
    }
    int ok = 0;
    for (int i = 0; i < s->nt; i++)
        ok += !strcmp(s->t[i].state, "SUCCEEDED") || !strcmp(s->t[i].state, "STOPPED");
    if (!strcmp(s->state, "RUNNING"))
        s->state = ok ? "SUCCEEDED" : "FAILED";
    s_write(s);
    s_table(s);
    char *path = zt_strdupf("%s/study.json", s->dir);
    json_t *doc = json_load_file(path, 0, NULL);
    free(path);
    json_t *best = json_object_get(doc, "bestTrial");
    if (json_is_object(best)) {
        char *pt = json_dumps(json_object_get(best, "parameters"), JSON_COMPACT | JSON_REAL_PRECISION(8));
        printf("study %s: best trial %s: %s = %.6g with %s\n", s->state,
               json_string_value(json_object_get(best, "id")), s->metric,
               json_number_value(json_object_get(best, "finalMeasurement")), pt);
        free(pt);
    }
    else
        printf("study %s: no trial succeeded\n", s->state);
    printf("results: %s/study.json, %s/trials.csv\n", s->dir, s->dir);
    json_decref(doc);
    return !strcmp(s->state, "SUCCEEDED") ? 0 : !strcmp(s->state, "CANCELLED") ? 3 : 1;
}

int zt_study_status(const char *study_dir, bool as_json)
{
    char *path = zt_strdupf("%s/study.json", study_dir);
    json_error_t err;
    json_t *doc = json_load_file(path, 0, &err);
    if (!doc) {
        fprintf(stderr, "ztrain status: %s: %s\n", path, err.text);
        free(path);
        return 2;
    }
    free(path);
    if (as_json) {
        char *t = json_dumps(doc, JSON_INDENT(2));
        printf("%s\n", t);
        free(t);
        json_decref(doc);
        return 0;
    }
    printf("study %s: %s, %s %s, %s\n", study_dir, json_string_value(json_object_get(doc, "state")),
           json_string_value(json_object_get(doc, "goal")), json_string_value(json_object_get(doc, "metricId")),
           json_string_value(json_object_get(doc, "algorithm")));
    printf("  %-6s %-10s %-12s %s\n", "trial", "state", "final", "parameters");
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(doc, "trials"), i, t) {
        char fin[32] = "-";
        if (json_is_number(json_object_get(t, "finalMeasurement")))
            snprintf(fin, sizeof fin, "%.6g", json_number_value(json_object_get(t, "finalMeasurement")));
        char *pt = json_dumps(json_object_get(t, "parameters"), JSON_COMPACT | JSON_REAL_PRECISION(8));
        printf("  %-6s %-10s %-12s %s\n", json_string_value(json_object_get(t, "id")),
               json_string_value(json_object_get(t, "state")), fin, pt);
        free(pt);
    }
    json_t *b = json_object_get(doc, "bestTrial");
    if (json_is_object(b))
        printf("  best: trial %s, %.6g\n", json_string_value(json_object_get(b, "id")),
               json_number_value(json_object_get(b, "finalMeasurement")));
    json_decref(doc);
    return 0;
}
