/* Gaussian-process regression with expected improvement (zt_gp.h). */
#include "base/zt_gp.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

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

/* The points and their standardised values (pending ones at the mean). */
typedef struct {
    int d, n, nobs;
    const double *X;
    double *y;                  /* n */
    double best;                /* the best standardised observation */
    int best_i;                 /* and its point */
    double noise;
} s_data_t;

static bool s_data(const zt_gp_t *gp, s_data_t *g)
{
    if (gp->nobs < 2 || gp->d < 1 || gp->d > ZT_GP_MAX_DIMS || gp->n < gp->nobs)
        return false;
    int nobs = gp->nobs, n = gp->n;
    double mean = 0, sd = 0;
    for (int i = 0; i < nobs; i++)
        mean += gp->y[i] / nobs;
    for (int i = 0; i < nobs; i++)
        sd += (gp->y[i] - mean) * (gp->y[i] - mean) / nobs;
    sd = sqrt(sd) > 1e-12 ? sqrt(sd) : 1;
    double *y = malloc(sizeof(double) * (size_t) n);
    double best = -INFINITY;
    for (int i = 0; i < n; i++) {
        y[i] = i < nobs ? (gp->y[i] - mean) / sd : 0;
        if (i < nobs && y[i] > best)
            best = y[i];
    }
    int best_i = 0;
    for (int i = 1; i < nobs; i++)
        if (y[i] > y[best_i])
            best_i = i;
    *g = (s_data_t) { gp->d, n, nobs, gp->X, y, best, best_i, gp->noise };
    return true;
}

/* K = the kernel matrix at length scale ls (plus the noise), Cholesky-factored in place. */
static bool s_factor(const s_data_t *g, double ls, double *K)
{
    for (int i = 0; i < g->n; i++)
        for (int j = 0; j < g->n; j++)
            K[i * g->n + j] = s_kernel(g->X + i * g->d, g->X + j * g->d, g->d, ls) + (i == j ? g->noise : 0);
    return s_chol(K, g->n);
}

/* The length scale with the highest marginal likelihood among a few. */
static double s_length_scale(const s_data_t *g, double *K, double *tmp)
{
    const double scales[4] = { 0.1, 0.2, 0.35, 0.6 };
    double ls = 0.2, best_ll = -INFINITY;
    for (int li = 0; li < 4; li++) {
        if (!s_factor(g, scales[li], K))
            continue;
        s_solve_lower(K, g->n, g->y, tmp);
        double ll = 0;
        for (int i = 0; i < g->n; i++)
            ll -= 0.5 * tmp[i] * tmp[i] + log(K[i * g->n + i]);
        if (ll > best_ll) {
            best_ll = ll;
            ls = scales[li];
        }
    }
    return ls;
}

/* Expected improvement at a candidate, from the factored K and alpha. */
static double s_ei(const s_data_t *g, const double *K, const double *alpha, double ls, const double *cand,
                   double *ks, double *v)
{
    double mu = 0;
    for (int i = 0; i < g->n; i++) {
        ks[i] = s_kernel(g->X + i * g->d, cand, g->d, ls);
        mu += ks[i] * alpha[i];
    }
    s_solve_lower(K, g->n, ks, v);
    double var = 1 + g->noise;
    for (int i = 0; i < g->n; i++)
        var -= v[i] * v[i];
    double sigma = var > 1e-12 ? sqrt(var) : 1e-6;
    double z = (mu - g->best - 0.01) / sigma;
    return (mu - g->best - 0.01) * 0.5 * erfc(-z / sqrt(2)) + sigma * exp(-0.5 * z * z) / sqrt(2 * M_PI);
}

bool zt_gp_suggest(const zt_gp_t *gp, double (*rand01)(void *arg), void *arg, double *u)
{
    s_data_t g;
    if (!s_data(gp, &g))
        return false;
    int n = g.n, d = g.d;
    double *K = malloc(sizeof(double) * (size_t) n * (size_t) n), *alpha = malloc(sizeof(double) * (size_t) n);
    double *tmp = malloc(sizeof(double) * (size_t) n), *ks = malloc(sizeof(double) * (size_t) n);
    double *v = malloc(sizeof(double) * (size_t) n);
    double ls = s_length_scale(&g, K, tmp);
    bool ok = s_factor(&g, ls, K);
    if (ok) {
        s_solve_lower(K, n, g.y, tmp);
        s_solve_upper_t(K, n, tmp, alpha);
        double cand[ZT_GP_MAX_DIMS], best_ei = -1;
        for (int c = 0; c < 3000; c++) {
            for (int k = 0; k < d; k++) {
                if (c % 3 == 0) { /* near the best so far */
                    double jitter = (rand01(arg) - 0.5) * 0.2;
                    cand[k] = g.X[g.best_i * d + k] + jitter;
                    cand[k] = cand[k] < 0 ? 0 : cand[k] > 1 ? 1 : cand[k];
                }
                else
                    cand[k] = rand01(arg);
            }
            double ei = s_ei(&g, K, alpha, ls, cand, ks, v);
            if (ei > best_ei) {
                best_ei = ei;
                memcpy(u, cand, sizeof(double) * (size_t) d);
            }
        }
    }
    free(ks);
    free(v);
    free(K);
    free(alpha);
    free(tmp);
    free(g.y);
    return ok;
}
