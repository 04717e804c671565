/* The studies' Bayesian optimisation (coordinator/tune/zt_bo.h): the
 * numerics against closed forms and finite differences, the fit on known
 * functions, categories without order, batches that spread, the
 * hypervolume. `zt_selftest bo`. */
#include "tune/zt_bo.h"
#include "bo_suite.h"
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double s_near(double a, double b, double tol)
{
    return fabs(a - b) <= tol * (1 + fabs(b));
}

/* log(phi + z Phi) against the direct formula where that is exact, finite
 * and increasing far into the tail, its derivative by differences. */
static void s_log_h(void)
{
    for (double z = -5; z <= 5; z += 0.25) {
        double direct = log(exp(-z * z / 2) / sqrt(2 * M_PI) + z * 0.5 * erfc(-z / sqrt(2)));
        double dz, h = zt_bo_log_h(z, &dz);
        assert(s_near(h, direct, 1e-9));
        double fd = (zt_bo_log_h(z + 1e-6, NULL) - zt_bo_log_h(z - 1e-6, NULL)) / 2e-6;
        assert(s_near(dz, fd, 1e-5));
    }
    double last = -INFINITY;
    for (double z = -1e5; z < 0; z = z * 0.9 + (z > -1 ? 0.1 : 0)) {
        double dz, h = zt_bo_log_h(z, &dz);
        assert(isfinite(h) && h > last && dz > 0 && isfinite(dz));
        last = h;
        if (z > -1e-3)
            break;
    }
    /* far in the tail, h(z) ~ phi(z) / z^2 */
    double z = -40, want = -z * z / 2 - 0.5 * log(2 * M_PI) - 2 * log(-z);
    assert(s_near(zt_bo_log_h(z, NULL), want, 1e-3));
}

static double s_rosen(void *ctx, const double *x, double *g)
{
    (void) ctx;
    double a = 1 - x[0], b = x[1] - x[0] * x[0];
    g[0] = -2 * a - 400 * x[0] * b;
    g[1] = 200 * b;
    return a * a + 100 * b * b;
}

static double s_bowl(void *ctx, const double *x, double *g)
{
    (void) ctx;
    double v = 0;
    for (int i = 0; i < 3; i++) {
        g[i] = 2 * (x[i] - 2.0 * i);
        v += (x[i] - 2.0 * i) * (x[i] - 2.0 * i);
    }
    return v;
}

/* The bounded L-BFGS: Rosenbrock's valley to its floor; a bowl whose
 * centre lies outside the box to the box's nearest corner. */
static void s_minimize(void)
{
    double x[2] = { -1.2, 1 }, lo[2] = { -2, -2 }, hi[2] = { 2, 2 };
    double v = zt_bo_minimize(s_rosen, NULL, x, lo, hi, 2, 500, 1e9);
    assert(v < 1e-8 && fabs(x[0] - 1) < 1e-3 && fabs(x[1] - 1) < 1e-3);
    double y[3] = { 0.5, 0.5, 0.5 }, lo3[3] = { -1, 0, 0 }, hi3[3] = { 1, 1, 1 };
    zt_bo_minimize(s_bowl, NULL, y, lo3, hi3, 3, 100, 0.1);
    assert(fabs(y[0]) < 1e-6 && y[1] == 1 && y[2] == 1);
}

static const zt_bo_dim_t S_MIXED[3] = { { ZT_BO_CONT, 0, NULL }, { ZT_BO_CAT, 4, NULL }, { ZT_BO_CONT, 0, NULL } };

/* The log posterior's gradient against central differences, on mixed
 * points (a category among them). */
static void s_gradients(void)
{
    uint64_t rng = 7;
    enum { N = 12, D = 3 };
    double X[N * D], y[N];
    for (int i = 0; i < N; i++) {
        X[i * D] = zt_bo_rand(&rng);
        X[i * D + 1] = (int) (zt_bo_rand(&rng) * 4);
        X[i * D + 2] = zt_bo_rand(&rng);
        y[i] = sin(5 * X[i * D]) + 0.3 * X[i * D + 1] - X[i * D + 2];
    }
    double theta[D + 2] = { log(2.0), log(0.5), log(3.0), log(1.3), log(0.01) }, g[D + 2], g2[D + 2];
    zt_bo_gp_log_post(S_MIXED, D, X, y, N, theta, g);
    for (int k = 0; k < D + 2; k++) {
        double t[D + 2];
        memcpy(t, theta, sizeof t);
        t[k] += 1e-5;
        double up = zt_bo_gp_log_post(S_MIXED, D, X, y, N, t, g2);
        t[k] -= 2e-5;
        double down = zt_bo_gp_log_post(S_MIXED, D, X, y, N, t, g2);
        assert(s_near(g[k], (up - down) / 2e-5, 1e-4));
    }
    /* the prediction's gradient (the category has none) */
    zt_bo_hyper_t h = { { 2, 0.5, 3 }, 1.3, 0.01 };
    zt_bo_gp_t *gp = zt_bo_gp_new(S_MIXED, D, X, y, N, &h);
    assert(gp);
    double x[D] = { 0.37, 2, 0.61 }, mu, var, dmu[D], dvar[D];
    zt_bo_gp_predict(gp, x, &mu, &var, dmu, dvar);
    assert(var > 0 && dmu[1] == 0 && dvar[1] == 0);
    for (int j = 0; j < D; j += 2) {
        double xp[D], mp, vp, mm, vm;
        memcpy(xp, x, sizeof xp);
        xp[j] += 1e-6;
        zt_bo_gp_predict(gp, xp, &mp, &vp, NULL, NULL);
        xp[j] -= 2e-6;
        zt_bo_gp_predict(gp, xp, &mm, &vm, NULL, NULL);
        assert(s_near(dmu[j], (mp - mm) / 2e-6, 1e-4) && s_near(dvar[j], (vp - vm) / 2e-6, 1e-4));
    }
    zt_bo_gp_free(&gp);
}

/* The fit on known functions: a smooth one of the first of three
 * dimensions is predicted well between its points, and the fitted length
 * scales say which dimension matters (ARD). */
static void s_fit(void)
{
    const zt_bo_dim_t dims[3] = { { ZT_BO_CONT, 0, NULL }, { ZT_BO_CONT, 0, NULL }, { ZT_BO_CONT, 0, NULL } };
    uint64_t rng = 11;
    enum { N = 30, D = 3 };
    double X[N * D], y[N];
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < D; j++)
            X[i * D + j] = zt_bo_rand(&rng);
        y[i] = sin(6 * X[i * D]);
    }
    zt_bo_hyper_t h = { { 0 }, 0, 0 };
    assert(zt_bo_gp_fit(dims, D, X, y, N, 1e-6, &rng, &h));
    assert(h.lambda[0] > 10 * h.lambda[1] && h.lambda[0] > 10 * h.lambda[2]);
    zt_bo_gp_t *gp = zt_bo_gp_new(dims, D, X, y, N, &h);
    double worst = 0;
    for (int k = 0; k < 50; k++) {
        double x[D] = { 0.1 + 0.8 * k / 49.0, zt_bo_rand(&rng), zt_bo_rand(&rng) }, mu, var;
        zt_bo_gp_predict(gp, x, &mu, &var, NULL, NULL);
        worst = fabs(mu - sin(6 * x[0])) > worst ? fabs(mu - sin(6 * x[0])) : worst;
    }
    assert(worst < 0.05);
    zt_bo_gp_free(&gp);
}

/* Categories have no order: with categories 0 and 2 seen alike, the
 * unseen 1 and 3 are predicted alike (an ordered axis would put 1 between
 * its neighbours). */
static void s_categories(void)
{
    const zt_bo_dim_t dims[1] = { { ZT_BO_CAT, 4, NULL } };
    double X[4] = { 0, 0, 2, 2 }, y[4] = { 1, 1.1, 1, 0.9 }, mu1, mu3, v1, v3;
    zt_bo_hyper_t h = { { 1 }, 1, 1e-4 };
    zt_bo_gp_t *gp = zt_bo_gp_new(dims, 1, X, y, 4, &h);
    zt_bo_gp_predict(gp, (double[]) { 1 }, &mu1, &v1, NULL, NULL);
    zt_bo_gp_predict(gp, (double[]) { 3 }, &mu3, &v3, NULL, NULL);
    assert(mu1 == mu3 && v1 == v3);
    zt_bo_gp_free(&gp);
}

static double s_branin(const double *u)
{
    double x = -5 + 15 * u[0], y = 15 * u[1];
    double a = y - 5.1 / (4 * M_PI * M_PI) * x * x + 5 / M_PI * x - 6;
    return a * a + 10 * (1 - 1 / (8 * M_PI)) * cos(x) + 10;
}

/* Suggestions: inside the space, discrete ones at a choice; several
 * pending ones spread the next one away from them. */
static void s_suggest(void)
{
    static const double at[5] = { 0, 0.25, 0.5, 0.75, 1 };
    const zt_bo_dim_t dims[3] = { { ZT_BO_CONT, 0, NULL }, { ZT_BO_CONT, 0, NULL }, { ZT_BO_DISC, 5, at } };
    uint64_t rng = 3;
    enum { N = 12, D = 3 };
    double X[(N + 8) * D], Y[N + 8];
    for (int i = 0; i < N; i++) {
        X[i * D] = zt_bo_rand(&rng);
        X[i * D + 1] = zt_bo_rand(&rng);
        X[i * D + 2] = at[i % 5];
        Y[i] = -s_branin(X + i * D) - X[i * D + 2];
    }
    zt_bo_hyper_t hyper[1] = { { { 0 }, 0, 0 } };
    zt_bo_problem_t p = { D, dims, N, X, Y, 1, 0, NULL, 1e-6, &rng, hyper, NULL, NULL, false };
    double x[D], P[4 * D];
    for (int k = 0; k < 4; k++) { /* a batch of four, each pending for the next */
        p.npend = k;
        p.P = P;
        assert(zt_bo_suggest(&p, x));
        assert(x[0] >= 0 && x[0] <= 1 && x[1] >= 0 && x[1] <= 1);
        assert(x[2] == 0 || x[2] == 0.25 || x[2] == 0.5 || x[2] == 0.75 || x[2] == 1);
        for (int o = 0; o < k; o++) {
            double dist = 0;
            for (int j = 0; j < D; j++)
                dist += (x[j] - P[o * D + j]) * (x[j] - P[o * D + j]);
            assert(sqrt(dist) > 0.02);
        }
        memcpy(P + k * D, x, sizeof x);
    }
    assert(hyper[0].scale > 0); /* the fit is kept: the next one starts there */
}

/* The hypervolume against sums of boxes; two objectives searched by EHVI. */
static void s_hypervolume(void)
{
    double F2[6] = { 0.2, 0.8, 0.5, 0.5, 0.8, 0.2 }, ref2[2] = { 1, 1 };
    /* the staircase: 0.8*0.2 + 0.5*0.3 + 0.2*0.3 */
    assert(s_near(zt_bo_hypervolume(F2, 3, 2, ref2), 0.16 + 0.15 + 0.06, 1e-12));
    double F3[6] = { 0, 0, 0.5, 0.5, 0.5, 0 }, ref3[3] = { 1, 1, 1 };
    /* [0,1]x[0,1]x[0.5,1] and [0.5,1]x[0.5,1]x[0,0.5]: 0.5 + 0.125 */
    assert(s_near(zt_bo_hypervolume(F3, 2, 3, ref3), 0.625, 1e-12));
    double outside[2] = { 2, 0 };
    assert(zt_bo_hypervolume(outside, 1, 2, ref2) == 0);

    const zt_bo_dim_t dims[2] = { { ZT_BO_CONT, 0, NULL }, { ZT_BO_CONT, 0, NULL } };
    uint64_t rng = 5;
    enum { N = 10 };
    double X[N * 2], Y[N * 2], x[2];
    for (int i = 0; i < N; i++) { /* maximise -x0 and -(1 - sqrt(x0)) - x1: the front at x1 = 0 */
        X[i * 2] = zt_bo_rand(&rng);
        X[i * 2 + 1] = zt_bo_rand(&rng);
        Y[i * 2] = -X[i * 2];
        Y[i * 2 + 1] = -(1 - sqrt(X[i * 2])) - X[i * 2 + 1];
    }
    zt_bo_hyper_t hyper[2] = { { { 0 }, 0, 0 }, { { 0 }, 0, 0 } };
    zt_bo_problem_t p = { 2, dims, N, X, Y, 2, 0, NULL, 1e-6, &rng, hyper, NULL, NULL, false };
    assert(zt_bo_suggest(&p, x));
    assert(x[0] >= 0 && x[0] <= 1 && x[1] >= 0 && x[1] < 0.5);
    assert(hyper[0].scale > 0 && hyper[1].scale > 0);
    double pend[2] = { x[0], x[1] }, x2[2]; /* that one running: the next goes elsewhere */
    p.npend = 1;
    p.P = pend;
    assert(zt_bo_suggest(&p, x2));
    assert(hypot(x2[0] - pend[0], x2[1] - pend[1]) > 0.02);
}

/* The constant mean by generalised least squares: a tight cluster of good
 * points counts as about one, so far from every point the model expects
 * the spread points' level, not the plain average. */
static void s_mean(void)
{
    const zt_bo_dim_t dims[1] = { { ZT_BO_CONT, 0, NULL } };
    double X[10] = { 0.5, 0.501, 0.502, 0.503, 0.504, 0.0, 0.1, 0.2, 0.8, 0.9 };
    double y[10] = { 2, 2, 2, 2, 2, 0, 0, 0, 0, 0 }, mu, var;
    zt_bo_hyper_t h = { { 1e4 }, 1, 1e-6 };
    zt_bo_gp_t *gp = zt_bo_gp_new(dims, 1, X, y, 10, &h);
    zt_bo_gp_predict(gp, (double[]) { 0.35 }, &mu, &var, NULL, NULL);
    assert(mu > 0 && mu < 0.5); /* the plain average is 1 */
    zt_bo_gp_predict(gp, (double[]) { 0.502 }, &mu, &var, NULL, NULL);
    assert(fabs(mu - 2) < 1e-3);
    zt_bo_gp_free(&gp);
}

/* A study's last trial goes where the model's mean is best (every point
 * of a fine grid has a lower mean), where EI would have gone elsewhere:
 * to the unexplored end of the line. */
static void s_last(void)
{
    const zt_bo_dim_t dims[1] = { { ZT_BO_CONT, 0, NULL } };
    double X[5] = { 0.05, 0.3, 0.45, 0.5, 0.6 }, Y[5], x[2][1];
    for (int i = 0; i < 5; i++)
        Y[i] = -(X[i] - 0.42) * (X[i] - 0.42);
    double mean_at[2];
    for (int last = 0; last < 2; last++) {
        uint64_t rng = 5;
        zt_bo_hyper_t hyper[1] = { { { 0 }, 0, 0 } };
        zt_bo_problem_t p = { 1, dims, 5, X, Y, 1, 0, NULL, 1e-6, &rng, hyper, NULL, NULL, last };
        assert(zt_bo_suggest(&p, x[last]));
        /* the model fitted, over the raw values: its mean orders points as
         * over the standardised ones */
        zt_bo_gp_t *gp = zt_bo_gp_new(dims, 1, X, Y, 5, &hyper[0]);
        double mu, var, top = -INFINITY;
        for (int g = 0; g <= 1000; g++) {
            zt_bo_gp_predict(gp, (double[]) { g / 1000.0 }, &mu, &var, NULL, NULL);
            top = mu > top ? mu : top;
        }
        zt_bo_gp_predict(gp, x[last], &mean_at[last], &var, NULL, NULL);
        zt_bo_gp_free(&gp);
        if (last)
            assert(mean_at[last] >= top - 1e-9 * fabs(top) - 1e-12);
    }
    assert(fabs(x[1][0] - 0.42) < 0.05);
    assert(fabs(x[0][0] - x[1][0]) > 1e-3 && mean_at[0] < mean_at[1]);
}

/* Three objectives: a random scalarisation of them, searched as one. */
static void s_three(void)
{
    const zt_bo_dim_t dims[2] = { { ZT_BO_CONT, 0, NULL }, { ZT_BO_CAT, 3, NULL } };
    uint64_t rng = 9;
    enum { N = 8 };
    double X[N * 2], Y[N * 3], x[2];
    for (int i = 0; i < N; i++) {
        X[i * 2] = zt_bo_rand(&rng);
        X[i * 2 + 1] = i % 3;
        Y[i * 3] = -X[i * 2];
        Y[i * 3 + 1] = X[i * 2] - X[i * 2 + 1];
        Y[i * 3 + 2] = -(X[i * 2] - 0.5) * (X[i * 2] - 0.5);
    }
    zt_bo_hyper_t hyper[3];
    memset(hyper, 0, sizeof hyper);
    zt_bo_problem_t p = { 2, dims, N, X, Y, 3, 0, NULL, 1e-6, &rng, hyper, NULL, NULL, false };
    assert(zt_bo_suggest(&p, x));
    assert(x[0] >= 0 && x[0] <= 1 && (x[1] == 0 || x[1] == 1 || x[1] == 2));
    assert(hyper[0].scale > 0 && hyper[1].scale == 0); /* one model, of the scalarisation */
    p.n = 1; /* too few to fit */
    assert(!zt_bo_suggest(&p, x));
}

/* A conditional parameter: dimension 1 counts only in category 0; in
 * category 1 the study records it at 0.5. */
static void s_fix_conditional(const void *ctx, double *x)
{
    (void) ctx;
    if (x[0] == 1)
        x[1] = 0.5;
}

/* The acquisition is judged where the trial would be recorded: category 1
 * (seen, at its placeholder) is not proposed again at some other value of
 * a parameter it ignores (where the model, taking the two categories for
 * alike, would hope for category 0's peak); that peak itself is. */
static void s_conditional(void)
{
    const zt_bo_dim_t dims[2] = { { ZT_BO_CAT, 2, NULL }, { ZT_BO_CONT, 0, NULL } };
    enum { N = 10 };
    double X[N * 2], Y[N], x[2];
    for (int i = 0; i < N; i++) {
        X[i * 2] = i < 6 ? 0 : 1;
        X[i * 2 + 1] = i < 6 ? 0.05 + 0.18 * i : 0.5;
        /* category 1 as good as 0 at 0.5: the two look alike to the model */
        Y[i] = -(X[i * 2 + 1] - 0.3) * (X[i * 2 + 1] - 0.3) - (i < 6 ? 0 : 0.001 * (i - 5));
    }
    uint64_t rng = 4;
    zt_bo_hyper_t hyper[1] = { { { 0 }, 0, 0 } };
    zt_bo_problem_t p = { 2, dims, N, X, Y, 1, 0, NULL, 1e-6, &rng, hyper, s_fix_conditional, NULL, false };
    assert(zt_bo_suggest(&p, x));
    assert(x[0] == 0 && fabs(x[1] - 0.3) < 0.15);
}

void zt_suite_bo(void)
{
    s_conditional();
    s_mean();
    s_last();
    s_three();
    s_log_h();
    s_minimize();
    s_gradients();
    s_fit();
    s_categories();
    s_suggest();
    s_hypervolume();
}
