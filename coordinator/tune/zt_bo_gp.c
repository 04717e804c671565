/* zt_bo's Gaussian process (zt_bo.h): the Matern-5/2 kernel over a length
 * scale per dimension (a category's distance is 0 or 1), the log
 * posterior of its hyperparameters with its gradient, the fit, and the
 * prediction with its gradient. Cholesky factors and solves by LAPACK. */
#include "tune/zt_bo.h"
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* LAPACK (OpenBLAS's), with the lengths of the character arguments that
 * Fortran passes unseen. */
extern void dpotrf_(const char *uplo, const int *n, double *a, const int *lda, int *info, size_t uplo_len);
extern void dpotri_(const char *uplo, const int *n, double *a, const int *lda, int *info, size_t uplo_len);
extern void dpotrs_(const char *uplo, const int *n, const int *nrhs, const double *a, const int *lda, double *b,
                    const int *ldb, int *info, size_t uplo_len);
extern void openblas_set_num_threads(int n);

struct zt_bo_gp {
    int d, n;
    const zt_bo_dim_t *dims;
    zt_bo_hyper_t h;
    double *X;                 /* n x d */
    double *L;                 /* n x n: K's Cholesky factor (lower, column-major) */
    double *alpha;             /* K^-1 (y - mean) */
    double mean;               /* the constant mean */
    double *work;              /* 3n: the prediction's */
};

/* Priors (logs, up to constants): lambda's mode at 1 (a length scale the
 * width of the range), the signal variance's at 1 (standardised values),
 * the noise's small. Each with its derivative in the log parameter. */
static double s_prior(const double *theta, int d, double *grad)
{
    double lp = 0;
    for (int j = 0; j < d; j++) {
        double l = exp(theta[j]);
        lp -= 0.1 / l + 0.1 * l;
        if (grad)
            grad[j] += 0.1 / l - 0.1 * l;
    }
    double s = exp(theta[d]), nz = exp(theta[d + 1]);
    lp += log(s) - s + 0.1 * log(nz) - 30 * nz; /* Gamma(2, 1), Gamma(1.1, 30) */
    if (grad) {
        grad[d] += 1 - s;
        grad[d + 1] += 0.1 - 30 * nz;
    }
    return lp;
}

/* The weighted squared distance between a and b. */
static double s_r2(const zt_bo_dim_t *dims, int d, const double *lambda, const double *a, const double *b)
{
    double r2 = 0;
    for (int j = 0; j < d; j++) {
        double dj = dims[j].kind == ZT_BO_CAT ? (a[j] != b[j]) : a[j] - b[j];
        r2 += lambda[j] * dj * dj;
    }
    return r2;
}

/* Matern 5/2 at squared distance r2 (signal variance s), and its
 * derivative in r2. */
static double s_matern(double r2, double s, double *dr2)
{
    double r = sqrt(r2), e = exp(-sqrt(5.0) * r);
    if (dr2)
        *dr2 = -5.0 / 6.0 * s * (1 + sqrt(5.0) * r) * e;
    return s * (1 + sqrt(5.0) * r + 5.0 / 3.0 * r2) * e;
}

static bool s_chol(double *K, int n)
{
    static bool once;
    if (!once) { /* the matrices are small: threads would only cost */
        openblas_set_num_threads(1);
        once = true;
    }
    int info = 0;
    dpotrf_("L", &n, K, &n, &info, 1);
    return info == 0;
}

static void s_solve(const double *L, int n, double *b)
{
    int one = 1, info = 0;
    dpotrs_("L", &n, &one, L, &n, b, &n, &info, 1);
}

/* K (the kernel plus the noise) at hyperparameters h; D its derivative in
 * r2 when not NULL. Column-major, both triangles. */
static void s_kernel_matrix(const zt_bo_dim_t *dims, int d, const double *X, int n, const zt_bo_hyper_t *h,
                            double *K, double *D)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j <= i; j++) {
            double dr2;
            double k = s_matern(s_r2(dims, d, h->lambda, X + i * d, X + j * d), h->scale, &dr2);
            K[i + (size_t) j * n] = K[j + (size_t) i * n] = k + (i == j ? h->noise : 0);
            if (D)
                D[i + (size_t) j * n] = D[j + (size_t) i * n] = dr2;
        }
}

/* alpha = K^-1 (y - m) with m the constant mean that fits y best given K
 * (generalised least squares: points close together count as fewer);
 * returns m. ones: n of scratch. */
static double s_alpha(const double *L, int n, const double *y, double *alpha, double *ones)
{
    memcpy(alpha, y, sizeof(double) * (size_t) n);
    s_solve(L, n, alpha);
    double num = 0, den = 0;
    for (int i = 0; i < n; i++)
        ones[i] = 1;
    s_solve(L, n, ones);
    for (int i = 0; i < n; i++) {
        num += alpha[i];
        den += ones[i];
    }
    double m = den > 0 ? num / den : 0;
    for (int i = 0; i < n; i++)
        alpha[i] -= m * ones[i];
    return m;
}

static void s_hyper(const double *theta, int d, zt_bo_hyper_t *h)
{
    for (int j = 0; j < d; j++)
        h->lambda[j] = exp(theta[j]);
    h->scale = exp(theta[d]);
    h->noise = exp(theta[d + 1]);
}

/* The gradient of the log likelihood, from W = alpha alpha' - K^-1. */
static void s_grad(const zt_bo_dim_t *dims, int d, const double *X, int n, const zt_bo_hyper_t *h, const double *K,
                   const double *D, const double *W, double *grad)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double w = 0.5 * W[i + (size_t) j * n];
            if (i == j)
                grad[d + 1] += w * h->noise;
            grad[d] += w * (K[i + (size_t) j * n] - (i == j ? h->noise : 0));
            if (i == j)
                continue;
            for (int l = 0; l < d; l++) {
                double dl = dims[l].kind == ZT_BO_CAT ? (X[i * d + l] != X[j * d + l]) : X[i * d + l] - X[j * d + l];
                grad[l] += w * D[i + (size_t) j * n] * h->lambda[l] * dl * dl;
            }
        }
}

double zt_bo_gp_log_post(const zt_bo_dim_t *dims, int d, const double *X, const double *y, int n,
                         const double *theta, double *grad)
{
    zt_bo_hyper_t h;
    s_hyper(theta, d, &h);
    size_t nn = (size_t) n * (size_t) n;
    double *K = malloc(sizeof(double) * nn * 3 + sizeof(double) * 2 * (size_t) n), *L = K + nn, *D = L + nn;
    double *alpha = D + nn, *ones = alpha + n;
    s_kernel_matrix(dims, d, X, n, &h, K, grad ? D : NULL);
    memcpy(L, K, sizeof(double) * nn);
    double lp = -INFINITY;
    if (s_chol(L, n)) {
        double m = s_alpha(L, n, y, alpha, ones); /* the gradient at the best mean is the gradient with it fixed */
        lp = -0.5 * n * log(2 * M_PI);
        for (int i = 0; i < n; i++)
            lp -= 0.5 * (y[i] - m) * alpha[i] + log(L[i + (size_t) i * n]);
        if (grad) {
            memset(grad, 0, sizeof(double) * (size_t) (d + 2));
            int info = 0;
            dpotri_("L", &n, L, &n, &info, 1); /* L now holds K^-1's lower triangle */
            for (int j = 0; j < n; j++)
                for (int i = j; i < n; i++) {
                    double w = alpha[i] * alpha[j] - L[i + (size_t) j * n];
                    L[i + (size_t) j * n] = L[j + (size_t) i * n] = w;
                }
            s_grad(dims, d, X, n, &h, K, D, L, grad);
        }
        lp += s_prior(theta, d, grad);
    }
    free(K);
    return lp;
}

/* ------------------------------------------------------------ fitting */

typedef struct {
    const zt_bo_dim_t *dims;
    int d, n;
    const double *X, *y;
} s_fit_t;

static double s_neg_log_post(void *ctx, const double *theta, double *grad)
{
    s_fit_t *f = ctx;
    double lp = zt_bo_gp_log_post(f->dims, f->d, f->X, f->y, f->n, theta, grad);
    for (int j = 0; j < f->d + 2; j++)
        grad[j] = isfinite(lp) ? -grad[j] : 0;
    return isfinite(lp) ? -lp : INFINITY;
}

bool zt_bo_gp_fit(const zt_bo_dim_t *dims, int d, const double *X, const double *y, int n, double noise_floor,
                  uint64_t *rng, zt_bo_hyper_t *h)
{
    double lo[ZT_BO_MAX_DIMS + 2], hi[ZT_BO_MAX_DIMS + 2], theta[ZT_BO_MAX_DIMS + 2], best[ZT_BO_MAX_DIMS + 2];
    for (int j = 0; j < d; j++) {
        lo[j] = log(1e-4);
        hi[j] = log(1e4);
    }
    lo[d] = log(1e-3);
    hi[d] = log(1e2);
    lo[d + 1] = log(noise_floor);
    hi[d + 1] = log(1.0) > lo[d + 1] ? log(1.0) : lo[d + 1];
    s_fit_t f = { dims, d, n, X, y };
    double best_v = INFINITY;
    for (int start = 0; start < 4; start++) {
        if (start == 1 && !(h->scale > 0))
            continue;
        for (int j = 0; j < d; j++) /* 0: the default; 1: the last fit; else random */
            theta[j] = start == 0 ? 0 : start == 1 ? log(h->lambda[j]) : log(0.1) + zt_bo_rand(rng) * log(100.0);
        theta[d] = start == 1 ? log(h->scale) : 0;
        theta[d + 1] = start == 1 ? log(h->noise) : log(noise_floor > 1e-2 ? noise_floor : 1e-2);
        double v = zt_bo_minimize(s_neg_log_post, &f, theta, lo, hi, d + 2, 200, 2.0);
        if (v < best_v) {
            best_v = v;
            memcpy(best, theta, sizeof best);
        }
    }
    if (!isfinite(best_v))
        return false;
    s_hyper(best, d, h);
    return true;
}

/* ------------------------------------------------------------ the model */

zt_bo_gp_t *zt_bo_gp_new(const zt_bo_dim_t *dims, int d, const double *X, const double *y, int n,
                         const zt_bo_hyper_t *h)
{
    zt_bo_gp_t *gp = calloc(1, sizeof *gp);
    size_t nn = (size_t) n * (size_t) n;
    *gp = (zt_bo_gp_t) { .d = d, .n = n, .dims = dims, .h = *h, .X = malloc(sizeof(double) * (size_t) n * (size_t) d),
                         .L = malloc(sizeof(double) * nn), .alpha = malloc(sizeof(double) * (size_t) n),
                         .work = malloc(sizeof(double) * 3 * (size_t) n) };
    memcpy(gp->X, X, sizeof(double) * (size_t) n * (size_t) d);
    s_kernel_matrix(dims, d, X, n, h, gp->L, NULL);
    if (!s_chol(gp->L, n)) {
        zt_bo_gp_free(&gp);
        return NULL;
    }
    gp->mean = s_alpha(gp->L, n, y, gp->alpha, gp->work);
    return gp;
}

void zt_bo_gp_free(zt_bo_gp_t **gp)
{
    if (!*gp)
        return;
    free((*gp)->X);
    free((*gp)->L);
    free((*gp)->alpha);
    free((*gp)->work);
    free(*gp);
    *gp = NULL;
}

void zt_bo_gp_predict(const zt_bo_gp_t *gp, const double *x, double *mu, double *var, double *dmu, double *dvar)
{
    int n = gp->n, d = gp->d;
    double *k = gp->work, *dk = gp->work + n; /* dk: the kernel's derivative in r2 */
    double m = gp->mean;
    for (int i = 0; i < n; i++) {
        k[i] = s_matern(s_r2(gp->dims, d, gp->h.lambda, x, gp->X + i * d), gp->h.scale, &dk[i]);
        m += k[i] * gp->alpha[i];
    }
    *mu = m;
    if (!var)
        return;
    double kc = 0, *c = gp->work + 2 * n;
    memcpy(c, k, sizeof(double) * (size_t) n);
    s_solve(gp->L, n, c);
    for (int i = 0; i < n; i++)
        kc += k[i] * c[i];
    *var = gp->h.scale - kc;
    bool floor = *var < 1e-12 * gp->h.scale;
    *var = floor ? 1e-12 * gp->h.scale : *var;
    if (dmu && dvar)
        for (int j = 0; j < d; j++) {
            dmu[j] = dvar[j] = 0;
            if (gp->dims[j].kind == ZT_BO_CAT)
                continue;
            for (int i = 0; i < n; i++) {
                double g = dk[i] * 2 * gp->h.lambda[j] * (x[j] - gp->X[i * d + j]);
                dmu[j] += g * gp->alpha[i];
                dvar[j] -= floor ? 0 : 2 * c[i] * g;
            }
        }
}
