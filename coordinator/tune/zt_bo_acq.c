/* zt_bo's next point (zt_bo.h): the models fitted to the standardised
 * observations, the running trials added at the models' mean, and the
 * acquisition (log EI, or log EHVI for two objectives; the model's mean
 * for a study's last trial) maximised over the mixed space from many
 * starts. */
#include "tune/zt_bo.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define S_CANDIDATES 2048
#define S_STARTS 10
#define S_ENUM 64 /* a discrete dimension with up to this many choices is searched whole */

typedef struct {
    const zt_bo_problem_t *p;
    int m;                     /* objectives modelled: 1 (EI) or 2 (EHVI) */
    zt_bo_gp_t *gp[2];
    double best;               /* EI: the best standardised value, the running trials' means among them */
    int nbox;                  /* EHVI: the region no point dominates, as boxes (minimising -y) */
    double *lo, *hi;           /* nbox x 2 */
    double *terms;             /* nbox: the log terms of one EHVI */
    int ibest;                 /* the best observation (EI), or -1 */
    bool exploit;              /* the study's last trial: the mean, not EI (p->last) */
    int ncont, cont[ZT_BO_MAX_DIMS]; /* the continuous dimensions */
    double *x;                 /* the point a continuous search moves */
} s_acq_t;

/* log(1 - exp(a)) for a < 0. */
static double s_log1mexp(double a)
{
    return a > -M_LN2 ? log(-expm1(a)) : log1p(-exp(a));
}

static double s_log_ei(s_acq_t *a, const double *x, double *grad)
{
    double mu, var, dmu[ZT_BO_MAX_DIMS], dvar[ZT_BO_MAX_DIMS], dh;
    zt_bo_gp_predict(a->gp[0], x, &mu, &var, grad ? dmu : NULL, grad ? dvar : NULL);
    double sd = sqrt(var), z = (mu - a->best) / sd;
    double v = log(sd) + zt_bo_log_h(z, grad ? &dh : NULL);
    for (int j = 0; j < a->p->d && grad; j++) {
        double dsd = dvar[j] / (2 * sd);
        grad[j] = dsd / sd + dh * (dmu[j] - z * dsd) / sd;
    }
    return v;
}

static double s_log_ehvi_at(s_acq_t *a, const double *x)
{
    double mu[2], sd[2];
    for (int j = 0; j < 2; j++) {
        double var;
        zt_bo_gp_predict(a->gp[j], x, &mu[j], &var, NULL, NULL);
        mu[j] = -mu[j]; /* minimising */
        sd[j] = sqrt(var);
    }
    double *t = a->terms;
    double top = -INFINITY;
    for (int k = 0; k < a->nbox; k++) { /* E[(u - Y)+] - E[(l - Y)+] per objective, the product per box */
        double s = 0;
        for (int j = 0; j < 2 && isfinite(s); j++) {
            double lu = zt_bo_log_h((a->hi[k * 2 + j] - mu[j]) / sd[j], NULL);
            double e = lu;
            if (isfinite(a->lo[k * 2 + j])) {
                double ll = zt_bo_log_h((a->lo[k * 2 + j] - mu[j]) / sd[j], NULL);
                e = ll < lu ? lu + s_log1mexp(ll - lu) : -INFINITY;
            }
            s += log(sd[j]) + e;
        }
        t[k] = s;
        top = s > top ? s : top;
    }
    double sum = 0;
    for (int k = 0; k < a->nbox && isfinite(top); k++)
        sum += exp(t[k] - top);
    return isfinite(top) ? top + log(sum) : -1e300;
}

/* The acquisition at x; its gradient over the continuous dimensions in
 * grad when not NULL (EHVI's by differences). */
static double s_acq_at(s_acq_t *a, const double *x, double *grad)
{
    if (a->exploit) { /* the model's mean */
        double mu, var, dvar[ZT_BO_MAX_DIMS];
        zt_bo_gp_predict(a->gp[0], x, &mu, &var, grad, grad ? dvar : NULL);
        return mu;
    }
    if (a->m == 1)
        return s_log_ei(a, x, grad);
    double v = s_log_ehvi_at(a, x);
    if (grad) {
        double xh[ZT_BO_MAX_DIMS];
        memcpy(xh, x, sizeof(double) * (size_t) a->p->d);
        for (int c = 0; c < a->ncont; c++) {
            int j = a->cont[c];
            double h = x[j] + 1e-6 <= 1 ? 1e-6 : -1e-6;
            xh[j] = x[j] + h;
            grad[j] = (s_log_ehvi_at(a, xh) - v) / h;
            xh[j] = x[j];
        }
    }
    return v;
}

/* The acquisition at x as the study would record it (p->fix: a parameter
 * its parent leaves inactive at its placeholder, which is where the model
 * will see the trial); such a dimension's gradient is 0. */
static double s_acq(s_acq_t *a, const double *x, double *grad)
{
    if (!a->p->fix)
        return s_acq_at(a, x, grad);
    double xf[ZT_BO_MAX_DIMS];
    memcpy(xf, x, sizeof(double) * (size_t) a->p->d);
    a->p->fix(a->p->fix_ctx, xf);
    double v = s_acq_at(a, xf, grad);
    for (int j = 0; j < a->p->d && grad; j++)
        grad[j] = xf[j] == x[j] ? grad[j] : 0;
    return v;
}

/* -acq over the continuous dimensions (the others as a->x has them). */
static double s_neg_acq_cont(void *ctx, const double *xc, double *gc)
{
    s_acq_t *a = ctx;
    double g[ZT_BO_MAX_DIMS];
    for (int c = 0; c < a->ncont; c++)
        a->x[a->cont[c]] = xc[c];
    double v = s_acq(a, a->x, g);
    for (int c = 0; c < a->ncont; c++)
        gc[c] = isfinite(v) ? -g[a->cont[c]] : 0;
    return isfinite(v) ? -v : INFINITY;
}

/* A discrete or categorical dimension set to its best choice (all of
 * them, or the nearest S_ENUM of a long list). */
static bool s_best_choice(s_acq_t *a, double *x, int j, double *v)
{
    const zt_bo_dim_t *dm = &a->p->dims[j];
    double keep = x[j], best = keep;
    int from = 0, to = dm->n;
    if (dm->kind == ZT_BO_DISC && dm->n > S_ENUM) {
        int at = 0;
        while (at + 1 < dm->n && dm->at[at + 1] <= keep)
            at++;
        from = at - S_ENUM / 2 > 0 ? at - S_ENUM / 2 : 0;
        to = from + S_ENUM < dm->n ? from + S_ENUM : dm->n;
    }
    bool better = false;
    for (int c = from; c < to; c++) {
        x[j] = dm->kind == ZT_BO_CAT ? c : dm->at[c];
        if (x[j] == keep)
            continue;
        double w = s_acq(a, x, NULL);
        if (w > *v + 1e-12) {
            *v = w;
            best = x[j];
            better = true;
        }
    }
    x[j] = best;
    return better;
}

/* From x: the continuous dimensions by L-BFGS, each other one by its best
 * choice, in turns until neither moves. */
static double s_local(s_acq_t *a, double *x, double v)
{
    double xc[ZT_BO_MAX_DIMS], lo[ZT_BO_MAX_DIMS], hi[ZT_BO_MAX_DIMS];
    for (int round = 0; round < 4; round++) {
        if (a->ncont > 0) {
            a->x = x;
            for (int c = 0; c < a->ncont; c++) {
                xc[c] = x[a->cont[c]];
                lo[c] = 0;
                hi[c] = 1;
            }
            zt_bo_minimize(s_neg_acq_cont, a, xc, lo, hi, a->ncont, 60, 0.1);
            for (int c = 0; c < a->ncont; c++)
                x[a->cont[c]] = xc[c];
            v = s_acq(a, x, NULL);
        }
        bool moved = false;
        for (int j = 0; j < a->p->d; j++)
            if (a->p->dims[j].kind != ZT_BO_CONT)
                moved |= s_best_choice(a, x, j, &v);
        if (!moved || a->ncont == 0)
            break;
    }
    return v;
}

static void s_random_point(const zt_bo_problem_t *p, double *x)
{
    for (int j = 0; j < p->d; j++) {
        const zt_bo_dim_t *dm = &p->dims[j];
        int c = (int) (zt_bo_rand(p->rng) * dm->n);
        x[j] = dm->kind == ZT_BO_CONT ? zt_bo_rand(p->rng) : dm->kind == ZT_BO_CAT ? c : dm->at[c];
    }
}

/* The acquisition's maximiser: local searches from the S_STARTS best of
 * the random candidates and from the best observation. */
static void s_maximise(s_acq_t *a, double *out)
{
    const zt_bo_problem_t *p = a->p;
    int d = p->d, nc = S_CANDIDATES;
    double *C = malloc(sizeof(double) * (size_t) nc * (size_t) d), *v = malloc(sizeof(double) * (size_t) nc);
    for (int i = 0; i < nc; i++) {
        s_random_point(p, C + (size_t) i * d);
        v[i] = s_acq(a, C + (size_t) i * d, NULL);
    }
    double best_v = -INFINITY, x[ZT_BO_MAX_DIMS];
    for (int s = 0; s <= S_STARTS; s++) {
        int at = -1;
        for (int i = 0; i < nc && s < S_STARTS; i++)
            at = v[i] > -INFINITY && (at < 0 || v[i] > v[at]) ? i : at;
        if (at >= 0) {
            memcpy(x, C + (size_t) at * d, sizeof(double) * (size_t) d);
            v[at] = -INFINITY;
        } else if (s == S_STARTS && a->ibest >= 0) /* the best observation */
            memcpy(x, p->X + (size_t) a->ibest * d, sizeof(double) * (size_t) d);
        else
            continue;
        double w = s_local(a, x, s_acq(a, x, NULL));
        if (w > best_v || best_v == -INFINITY) {
            best_v = w;
            memcpy(out, x, sizeof(double) * (size_t) d);
        }
    }
    free(C);
    free(v);
}

/* ------------------------------------------------------------ models */

/* Standardised column j of Y (n rows of m), signs kept (higher is better). */
static void s_standardise(const double *Y, int n, int m, int j, double *y)
{
    double mean = 0, var = 0;
    for (int i = 0; i < n; i++)
        mean += Y[i * m + j] / n;
    for (int i = 0; i < n; i++)
        var += (Y[i * m + j] - mean) * (Y[i * m + j] - mean) / n;
    double sd = var > 1e-24 ? sqrt(var) : 1;
    for (int i = 0; i < n; i++)
        y[i] = (Y[i * m + j] - mean) / sd;
}

/* Several objectives beyond two: one random augmented Chebyshev
 * scalarisation of them (each scaled to [0, 1], higher is better; the
 * weighted least, plus a twentieth of the weighted sum so that a point
 * better in one and no worse in the others scores higher), as one. */
static void s_scalarise(const zt_bo_problem_t *p, double *y)
{
    double w[ZT_BO_MAX_OBJ], sum = 0;
    for (int j = 0; j < p->m; j++)
        sum += w[j] = -log(1 - zt_bo_rand(p->rng)); /* a uniform point of the simplex */
    double *total = calloc((size_t) p->n, sizeof(double));
    for (int i = 0; i < p->n; i++)
        y[i] = INFINITY;
    for (int j = 0; j < p->m; j++) {
        double lo = INFINITY, hi = -INFINITY;
        for (int i = 0; i < p->n; i++) {
            lo = p->Y[i * p->m + j] < lo ? p->Y[i * p->m + j] : lo;
            hi = p->Y[i * p->m + j] > hi ? p->Y[i * p->m + j] : hi;
        }
        for (int i = 0; i < p->n; i++) {
            double f = w[j] / sum * (hi > lo ? (p->Y[i * p->m + j] - lo) / (hi - lo) : 0.5);
            y[i] = f < y[i] ? f : y[i];
            total[i] += f;
        }
    }
    for (int i = 0; i < p->n; i++)
        y[i] += 0.05 * total[i];
    free(total);
}

/* The GP over the observations and, when rows > 0, the running trials
 * at the values vals (rows x npend). */
static zt_bo_gp_t *s_with(const zt_bo_problem_t *p, const double *y, const double *vals, int j)
{
    int n = p->n + p->npend;
    double *X = malloc(sizeof(double) * (size_t) n * (size_t) p->d), *yy = malloc(sizeof(double) * (size_t) n);
    memcpy(X, p->X, sizeof(double) * (size_t) p->n * (size_t) p->d);
    memcpy(X + (size_t) p->n * p->d, p->P, sizeof(double) * (size_t) p->npend * (size_t) p->d);
    memcpy(yy, y, sizeof(double) * (size_t) p->n);
    memcpy(yy + p->n, vals, sizeof(double) * (size_t) p->npend);
    zt_bo_gp_t *gp = zt_bo_gp_new(p->dims, p->d, X, yy, n, &p->hyper[j]);
    free(X);
    free(yy);
    return gp;
}

/* Model j fitted to the observations y, with the running trials counted
 * at its mean there (their means in pend), and the best value, theirs
 * included: no gain is expected from repeating a running trial. NULL when
 * it cannot be fitted. */
static zt_bo_gp_t *s_model(const zt_bo_problem_t *p, const double *y, int j, double *pend, double *best)
{
    if (!zt_bo_gp_fit(p->dims, p->d, p->X, y, p->n, p->noise_floor, p->rng, &p->hyper[j]))
        return NULL;
    zt_bo_gp_t *gp = zt_bo_gp_new(p->dims, p->d, p->X, y, p->n, &p->hyper[j]);
    *best = -INFINITY;
    for (int i = 0; i < p->n; i++)
        *best = y[i] > *best ? y[i] : *best;
    if (!gp || p->npend == 0)
        return gp;
    for (int i = 0; i < p->npend; i++) {
        zt_bo_gp_predict(gp, p->P + (size_t) i * p->d, &pend[i], NULL, NULL, NULL);
        *best = pend[i] > *best ? pend[i] : *best;
    }
    zt_bo_gp_free(&gp);
    return s_with(p, y, pend, j);
}

/* EHVI's boxes: the region that none of the n points (minimising F, n x 2)
 * dominates, below the reference point. */
static void s_boxes(s_acq_t *a, const double *F, int n)
{
    double ref[2];
    for (int j = 0; j < 2; j++) {
        double lo = INFINITY, hi = -INFINITY;
        for (int i = 0; i < n; i++) {
            lo = F[i * 2 + j] < lo ? F[i * 2 + j] : lo;
            hi = F[i * 2 + j] > hi ? F[i * 2 + j] : hi;
        }
        ref[j] = hi + 0.1 * (hi - lo > 0 ? hi - lo : 1);
    }
    int *front = malloc(sizeof(int) * (size_t) n), k = 0;
    for (int i = 0; i < n; i++) {
        bool dominated = false;
        for (int o = 0; o < n && !dominated; o++)
            dominated = o != i && F[o * 2] <= F[i * 2] && F[o * 2 + 1] <= F[i * 2 + 1] &&
                        (F[o * 2] < F[i * 2] || F[o * 2 + 1] < F[i * 2 + 1] || o < i);
        if (!dominated)
            front[k++] = i;
    }
    for (int i = 1; i < k; i++) /* ascending in the first objective, so descending in the second */
        for (int j = i; j > 0 && F[front[j] * 2] < F[front[j - 1] * 2]; j--) {
            int t = front[j];
            front[j] = front[j - 1];
            front[j - 1] = t;
        }
    a->nbox = k + 1;
    a->lo = malloc(sizeof(double) * 2 * (size_t) a->nbox);
    a->hi = malloc(sizeof(double) * 2 * (size_t) a->nbox);
    a->terms = malloc(sizeof(double) * (size_t) a->nbox);
    for (int b = 0; b <= k; b++) { /* between front points b-1 and b in the first objective */
        a->lo[b * 2] = b == 0 ? -INFINITY : F[front[b - 1] * 2];
        a->hi[b * 2] = b == k ? ref[0] : F[front[b] * 2];
        a->lo[b * 2 + 1] = -INFINITY;
        a->hi[b * 2 + 1] = b == 0 ? ref[1] : F[front[b - 1] * 2 + 1];
    }
    free(front);
}

bool zt_bo_suggest(const zt_bo_problem_t *p, double *x)
{
    if (p->n < 2 || p->d < 1 || p->d > ZT_BO_MAX_DIMS || p->m < 1 || p->m > ZT_BO_MAX_OBJ)
        return false;
    s_acq_t a = { .p = p, .m = p->m == 2 ? 2 : 1, .ibest = -1, .exploit = p->last && p->m == 1 };
    for (int j = 0; j < p->d; j++)
        if (p->dims[j].kind == ZT_BO_CONT)
            a.cont[a.ncont++] = j;
    int n = p->n, np = p->npend;
    double *y = malloc(sizeof(double) * (size_t) n * 2), *pend = malloc(sizeof(double) * (size_t) (np + 1) * 2);
    double *F = malloc(sizeof(double) * (size_t) (n + np) * 2);
    bool ok = true;
    if (a.m == 1) {
        if (p->m > 2)
            s_scalarise(p, y);
        s_standardise(p->m > 2 ? y : p->Y, n, p->m > 2 ? 1 : p->m, 0, y);
        for (int i = 0; i < n; i++)
            a.ibest = a.ibest < 0 || y[i] > y[a.ibest] ? i : a.ibest;
        ok = (a.gp[0] = s_model(p, y, 0, pend, &a.best)) != NULL;
    } else {
        for (int j = 0; j < 2 && ok; j++) {
            s_standardise(p->Y, n, 2, j, y);
            double best;
            ok = (a.gp[j] = s_model(p, y, j, pend, &best)) != NULL;
            for (int i = 0; i < n + np && ok; i++) /* the observations, and the running trials at the mean */
                F[i * 2 + j] = -(i < n ? y[i] : pend[i - n]);
        }
        if (ok)
            s_boxes(&a, F, n + np);
    }
    if (ok)
        s_maximise(&a, x);
    if (ok && p->fix)
        p->fix(p->fix_ctx, x);
    for (int j = 0; j < 2; j++)
        zt_bo_gp_free(&a.gp[j]);
    free(a.lo);
    free(a.hi);
    free(a.terms);
    free(y);
    free(pend);
    free(F);
    return ok;
}
