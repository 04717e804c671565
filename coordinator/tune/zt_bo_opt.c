/* zt_bo's numerics (zt_bo.h): the generator, the log expected improvement
 * of a standard normal, a bounded L-BFGS, and the hypervolume. */
#include "tune/zt_bo.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

double zt_bo_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL); /* splitmix64 */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double) (z >> 11) * 0x1.0p-53;
}

/* ------------------------------------------------------------ log EI */

/* exp(x^2) erfc(x) for x >= 0, without overflow. */
static double s_erfcx(double x)
{
    if (x < 26)
        return exp(x * x) * erfc(x);
    double r = 1 / (x * x);
    return (1 - r / 2 + 3 * r * r / 4 - 15 * r * r * r / 8 + 105 * r * r * r * r / 16) / (x * sqrt(M_PI));
}

static const double S_LOG_SQRT_2PI = 0.91893853320467274178;

/* log Phi(z). */
static double s_log_cdf(double z)
{
    if (z > -5)
        return log(0.5 * erfc(-z / M_SQRT2));
    return log(0.5 * s_erfcx(-z / M_SQRT2)) - z * z / 2;
}

double zt_bo_log_h(double z, double *dz)
{
    double lh;
    if (z > -1) {
        lh = log(exp(-z * z / 2 - S_LOG_SQRT_2PI) + z * 0.5 * erfc(-z / M_SQRT2));
    } else if (z > -1e3) {
        /* h = phi(z) (1 - |z| Phi(z) / phi(z)), the ratio by erfcx */
        double t = -z * sqrt(M_PI / 2) * s_erfcx(-z / M_SQRT2);
        lh = -z * z / 2 - S_LOG_SQRT_2PI + log1p(-t);
    } else {
        lh = -z * z / 2 - S_LOG_SQRT_2PI - 2 * log(-z) + log1p(-3 / (z * z));
    }
    if (dz) /* h'(z) = Phi(z) */
        *dz = exp(s_log_cdf(z) - lh);
    return lh;
}

/* ------------------------------------------------------------ L-BFGS */

#define S_MEM 8
#define S_MAXD 64

static void s_project(double *x, const double *lo, const double *hi, int d)
{
    for (int i = 0; i < d; i++)
        x[i] = x[i] < lo[i] ? lo[i] : x[i] > hi[i] ? hi[i] : x[i];
}

/* Whether coordinate i sits on a bound that the gradient pushes against. */
static bool s_pinned(double x, double g, double lo, double hi)
{
    return (x <= lo && g > 0) || (x >= hi && g < 0);
}

/* The L-BFGS direction -H g over the free coordinates (two loops). */
static void s_direction(const double *g, const bool *free_, int d, double S[][S_MAXD], double Y[][S_MAXD],
                        const double *rho, int mem, int head, double *p)
{
    double a[S_MEM];
    for (int i = 0; i < d; i++)
        p[i] = free_[i] ? -g[i] : 0;
    for (int k = 0; k < mem; k++) {
        int j = (head - 1 - k + S_MEM) % S_MEM;
        double s = 0;
        for (int i = 0; i < d; i++)
            s += free_[i] ? S[j][i] * p[i] : 0;
        a[k] = rho[j] * s;
        for (int i = 0; i < d; i++)
            p[i] -= free_[i] ? a[k] * Y[j][i] : 0;
    }
    if (mem > 0) {
        int j = (head - 1 + S_MEM) % S_MEM;
        double sy = 0, yy = 0;
        for (int i = 0; i < d; i++)
            if (free_[i]) {
                sy += S[j][i] * Y[j][i];
                yy += Y[j][i] * Y[j][i];
            }
        double gamma = yy > 0 && sy > 0 ? sy / yy : 1;
        for (int i = 0; i < d; i++)
            p[i] *= gamma;
    }
    for (int k = mem - 1; k >= 0; k--) {
        int j = (head - 1 - k + S_MEM) % S_MEM;
        double s = 0;
        for (int i = 0; i < d; i++)
            s += free_[i] ? Y[j][i] * p[i] : 0;
        double b = rho[j] * s;
        for (int i = 0; i < d; i++)
            p[i] += free_[i] ? (a[k] - b) * S[j][i] : 0;
    }
}

double zt_bo_minimize(zt_bo_fn_t f, void *ctx, double *x, const double *lo, const double *hi, int d, int max_iter,
                      double max_step)
{
    if (d < 1 || d > S_MAXD)
        return f(ctx, x, (double[S_MAXD]) { 0 });
    double S[S_MEM][S_MAXD], Y[S_MEM][S_MAXD], rho[S_MEM];
    double g[S_MAXD], gn[S_MAXD], p[S_MAXD], xn[S_MAXD];
    bool free_[S_MAXD];
    int mem = 0, head = 0;
    s_project(x, lo, hi, d);
    double fx = f(ctx, x, g);
    if (!isfinite(fx))
        return fx;
    for (int it = 0; it < max_iter; it++) {
        double pg = 0;
        for (int i = 0; i < d; i++) {
            free_[i] = !s_pinned(x[i], g[i], lo[i], hi[i]);
            pg = free_[i] && fabs(g[i]) > pg ? fabs(g[i]) : pg;
        }
        if (pg < 1e-7)
            break;
        s_direction(g, free_, d, S, Y, rho, mem, head, p);
        double slope = 0;
        for (int i = 0; i < d; i++)
            slope += g[i] * p[i];
        if (!(slope < 0)) { /* not downhill: forget the curvature, go down the gradient */
            mem = 0;
            for (int i = 0; i < d; i++)
                p[i] = free_[i] ? -g[i] : 0;
        }
        double t = 1, fn = fx, longest = 0;
        for (int i = 0; i < d; i++)
            longest = fabs(p[i]) > longest ? fabs(p[i]) : longest;
        if (longest > max_step) /* a local search: no leap across the box */
            t = max_step / longest;
        bool moved = false;
        for (int ls = 0; ls < 30 && !moved; ls++, t /= 2) { /* backtracking along the projected path */
            double dec = 0;
            for (int i = 0; i < d; i++)
                xn[i] = x[i] + t * p[i];
            s_project(xn, lo, hi, d);
            for (int i = 0; i < d; i++)
                dec += g[i] * (xn[i] - x[i]);
            if (dec >= 0)
                continue;
            fn = f(ctx, xn, gn);
            moved = isfinite(fn) && fn <= fx + 1e-4 * dec;
        }
        if (!moved)
            break;
        double sy = 0;
        for (int i = 0; i < d; i++) {
            S[head][i] = xn[i] - x[i];
            Y[head][i] = gn[i] - g[i];
            sy += S[head][i] * Y[head][i];
        }
        if (sy > 1e-12) {
            rho[head] = 1 / sy;
            head = (head + 1) % S_MEM;
            mem = mem < S_MEM ? mem + 1 : S_MEM;
        } else { /* negative curvature (the search ensures only descent): start the memory afresh */
            mem = 0;
            head = 0;
        }
        double change = fx - fn;
        memcpy(x, xn, sizeof(double) * (size_t) d);
        memcpy(g, gn, sizeof(double) * (size_t) d);
        fx = fn;
        if (change <= 1e-10 * (fabs(fx) + 1e-10))
            break;
    }
    return fx;
}

/* ------------------------------------------------------------ hypervolume */

/* The hypervolume of n points (rows of m, all inside ref) by slicing the
 * last objective; *budget counts the work down (negative: give up). */
static double s_hv(const double *Y, int n, int m, const double *ref, long *budget)
{
    if (n == 0 || *budget < 0)
        return 0;
    if (m == 1) {
        double lo = ref[0];
        for (int i = 0; i < n; i++)
            lo = Y[i] < lo ? Y[i] : lo;
        return ref[0] - lo;
    }
    *budget -= (long) n * n;
    int *ord = malloc(sizeof(int) * (size_t) n);
    for (int i = 0; i < n; i++)
        ord[i] = i;
    for (int i = 1; i < n; i++) /* ascending in the last objective (insertion sort: fronts are small) */
        for (int j = i; j > 0 && Y[ord[j] * m + m - 1] < Y[ord[j - 1] * m + m - 1]; j--) {
            int t = ord[j];
            ord[j] = ord[j - 1];
            ord[j - 1] = t;
        }
    double *sub = malloc(sizeof(double) * (size_t) n * (size_t) (m - 1)), vol = 0;
    for (int k = 0; k < n; k++) {
        memcpy(sub + (size_t) k * (size_t) (m - 1), Y + (size_t) ord[k] * (size_t) m, sizeof(double) * (size_t) (m - 1));
        double top = k + 1 < n ? Y[ord[k + 1] * m + m - 1] : ref[m - 1];
        double depth = top - Y[ord[k] * m + m - 1];
        if (depth > 0)
            vol += depth * s_hv(sub, k + 1, m - 1, ref, budget);
    }
    free(sub);
    free(ord);
    return vol;
}

double zt_bo_hypervolume(const double *Y, int n, int m, const double *ref)
{
    double *in = malloc(sizeof(double) * (size_t) (n > 0 ? n : 1) * (size_t) m);
    int k = 0;
    for (int i = 0; i < n; i++) {
        bool inside = true;
        for (int j = 0; j < m; j++)
            inside = inside && Y[i * m + j] < ref[j];
        if (inside)
            memcpy(in + (size_t) k++ * (size_t) m, Y + (size_t) i * (size_t) m, sizeof(double) * (size_t) m);
    }
    long budget = 20000000;
    double v = s_hv(in, k, m, ref, &budget);
    free(in);
    return budget < 0 ? NAN : v;
}
