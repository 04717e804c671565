/* The studies' search in one process (coordinator/tune/zt_bo.h), no job
 * launched: how long choosing the next trial takes with n finished trials
 * in d dimensions (one and two objectives, with and without running
 * trials), and the regret of the search loop on Branin, Hartmann-6 and the mixed problem over
 * many seeds, quickly (bench/tune_bench.py measures the real thing: every
 * trial a job, against Optuna).
 *
 *   bo_bench --time [N D]          (default 100 trials, 10 dimensions)
 *   bo_bench PROBLEM [--seeds S] [--trials T] [--batch Q] [--init K]
 *            PROBLEM: branin, hartmann6 or mixed
 */
#include "tune/zt_bo.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double s_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double) t.tv_sec + (double) t.tv_nsec / 1e9;
}

static double s_branin(const double *u)
{
    double x = -5 + 15 * u[0], y = 15 * u[1];
    double a = y - 5.1 / (4 * M_PI * M_PI) * x * x + 5 / M_PI * x - 6;
    return a * a + 10 * (1 - 1 / (8 * M_PI)) * cos(x) + 10;
}

static double s_hartmann6(const double *x)
{
    static const double A[4][6] = { { 10, 3, 17, 3.5, 1.7, 8 }, { 0.05, 10, 17, 0.1, 8, 14 },
                                    { 3, 3.5, 1.7, 10, 17, 8 }, { 17, 8, 0.05, 10, 0.1, 14 } };
    static const double P[4][6] = { { 0.1312, 0.1696, 0.5569, 0.0124, 0.8283, 0.5886 },
                                    { 0.2329, 0.4135, 0.8307, 0.3736, 0.1004, 0.9991 },
                                    { 0.2348, 0.1451, 0.3522, 0.2883, 0.3047, 0.6650 },
                                    { 0.4047, 0.8828, 0.8732, 0.5743, 0.1091, 0.0381 } };
    static const double alpha[4] = { 1.0, 1.2, 3.0, 3.2 };
    double v = 0;
    for (int i = 0; i < 4; i++) {
        double e = 0;
        for (int j = 0; j < 6; j++)
            e += A[i][j] * (x[j] - P[i][j]) * (x[j] - P[i][j]);
        v -= alpha[i] * exp(-e);
    }
    return v;
}

/* bench/tune_objectives.py's mixed problem: lr on a log scale (1e-4 to
 * 0.1), dropout, 1 to 16 layers, one of four optimizers; minimum 0. */
static double s_mixed(const double *x)
{
    static const double penalty[4] = { 0.25, 0.0, 0.4, 0.15 }, best_lr[4] = { -1.5, -3.0, -2.5, -2.0 };
    int o = (int) x[3];
    double lg = -4 + 3 * x[0], layers = 1 + floor(x[2] * 15 + 0.5);
    return (lg - best_lr[o]) * (lg - best_lr[o]) / 2 + (x[1] - 0.3) * (x[1] - 0.3) +
           (layers - 6) * (layers - 6) / 100 + penalty[o];
}

static int s_cmp(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

/* Suggestion time at n observations in d dimensions (m objectives, np running). */
static void s_time(int n, int d, int m, int np)
{
    zt_bo_dim_t dims[ZT_BO_MAX_DIMS];
    for (int j = 0; j < d; j++)
        dims[j] = (zt_bo_dim_t) { ZT_BO_CONT, 0, NULL };
    uint64_t rng = 1;
    double *X = malloc(sizeof(double) * (size_t) n * d), *Y = malloc(sizeof(double) * (size_t) n * m);
    double *P = malloc(sizeof(double) * (size_t) (np + 1) * d), x[ZT_BO_MAX_DIMS];
    for (int i = 0; i < n; i++) {
        double r = 0;
        for (int j = 0; j < d; j++) {
            X[i * d + j] = zt_bo_rand(&rng);
            r += (X[i * d + j] - 0.3) * (X[i * d + j] - 0.3);
        }
        for (int k = 0; k < m; k++)
            Y[i * m + k] = -r - k * X[i * d];
    }
    for (int i = 0; i < np * d; i++)
        P[i] = zt_bo_rand(&rng);
    zt_bo_hyper_t hyper[ZT_BO_MAX_OBJ];
    memset(hyper, 0, sizeof hyper);
    zt_bo_problem_t p = { d, dims, n, X, Y, m, np, P, 1e-6, &rng, hyper, NULL, NULL, false };
    double t0 = s_now();
    zt_bo_suggest(&p, x); /* the first fit, from the default start */
    double t1 = s_now();
    zt_bo_suggest(&p, x); /* the next, from the last fit as well */
    double t2 = s_now();
    printf("  %3d trials, %2d dimensions, %d objective%s, %d running: %7.1f ms (first fit), %7.1f ms (next)\n", n, d,
           m, m > 1 ? "s" : "", np, (t1 - t0) * 1e3, (t2 - t1) * 1e3);
    free(X);
    free(Y);
    free(P);
}

static int s_corners, s_suggested;

/* The search loop on a problem as a study runs it: q trials at a time,
 * each new one chosen when one ends (the oldest), with the other q - 1
 * running; the first init random. */
static double s_run(int problem, uint64_t seed, int trials, int q, int init)
{
    static double layers[16];
    for (int k = 0; k < 16; k++)
        layers[k] = k / 15.0;
    int d = problem == 1 ? 6 : problem == 2 ? 4 : 2;
    zt_bo_dim_t dims[6];
    for (int j = 0; j < d; j++)
        dims[j] = (zt_bo_dim_t) { ZT_BO_CONT, 0, NULL };
    if (problem == 2) {
        dims[2] = (zt_bo_dim_t) { ZT_BO_DISC, 16, layers };
        dims[3] = (zt_bo_dim_t) { ZT_BO_CAT, 4, NULL };
    }
    double X[512 * 6], Y[512], best = INFINITY;
    zt_bo_hyper_t hyper[1];
    memset(hyper, 0, sizeof hyper);
    uint64_t rng = seed * 7919 + 17;
    for (int n = 0; n < trials; n++) {
        int ended = n - (q - 1) > 0 ? n - (q - 1) : 0;
        double *x = X + n * d;
        zt_bo_problem_t p = { d, dims, ended, X, Y, 1, n - ended, X + ended * d, 1e-6, &rng, hyper, NULL, NULL,
                              n == trials - 1 /* the last trial, as a study has it */ };
        if (n < init || !zt_bo_suggest(&p, x))
            for (int j = 0; j < d; j++) {
                int c = (int) (zt_bo_rand(&rng) * dims[j].n);
                x[j] = dims[j].kind == ZT_BO_CONT ? zt_bo_rand(&rng) : dims[j].kind == ZT_BO_CAT ? c : dims[j].at[c];
            }
        else {
            int edges = 0;
            for (int j = 0; j < d; j++)
                edges += x[j] == 0 || x[j] == 1;
            s_corners += edges == d;
            s_suggested++;
        }
        double v = problem == 1 ? s_hartmann6(x) : problem == 2 ? s_mixed(x) : s_branin(x);
        Y[n] = -v;
        best = v < best ? v : best;
    }
    return best - (problem == 1 ? -3.32237 : problem == 2 ? 0 : 0.397887);
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        printf("usage: bo_bench --time [N D] | bo_bench branin|hartmann6|mixed [--seeds S] [--trials T] [--batch Q] "
               "[--init K]\n");
        return argc < 2;
    }
    if (!strcmp(argv[1], "--time")) {
        int n = argc > 3 ? atoi(argv[2]) : 100, d = argc > 3 ? atoi(argv[3]) : 10;
        printf("choosing the next trial:\n");
        s_time(n, d, 1, 0);
        s_time(n, d, 1, 4);
        s_time(n, d, 2, 0);
        return 0;
    }
    int problem = !strcmp(argv[1], "hartmann6") ? 1 : !strcmp(argv[1], "mixed") ? 2 : !strcmp(argv[1], "branin") ? 0 : -1;
    if (problem < 0) {
        fprintf(stderr, "bo_bench: no problem named '%s' (branin, hartmann6, mixed)\n", argv[1]);
        return 2;
    }
    int seeds = 10, trials = problem == 1 ? 40 : problem == 2 ? 30 : 25, q = 1;
    int init = problem == 1 ? 10 : problem == 2 ? 8 : 5; /* as a study starts: twice the dimensions, 5 to 10 */
    for (int a = 2; a + 1 < argc; a += 2) {
        int v = atoi(argv[a + 1]);
        if (!strcmp(argv[a], "--seeds"))
            seeds = v;
        else if (!strcmp(argv[a], "--trials"))
            trials = v;
        else if (!strcmp(argv[a], "--batch"))
            q = v;
        else if (!strcmp(argv[a], "--init"))
            init = v;
    }
    double r[1000];
    seeds = seeds > 1000 ? 1000 : seeds;
    for (int s = 0; s < seeds; s++)
        r[s] = s_run(problem, (uint64_t) s + 1, trials > 512 ? 512 : trials, q, init);
    qsort(r, (size_t) seeds, sizeof r[0], s_cmp);
    int near = 0;
    for (int s = 0; s < seeds; s++)
        near += r[s] < 0.05;
    printf("%s, %d trials, %d at a time, %d seeds: regret median %.4f, q1 %.4f, q3 %.4f; within 0.05: %d%%\n", argv[1],
           trials, q, seeds, r[seeds / 2], r[seeds / 4], r[3 * seeds / 4], 100 * near / seeds);
    printf("  suggestions at a corner of the space: %d of %d\n", s_corners, s_suggested);
    return 0;
}
