/* zt_gp: one step of Bayesian optimisation for the all-reduce's autotune
 * (two knobs, in libztrain, which links no BLAS; the studies' search is
 * coordinator/tune/zt_bo.h). A Gaussian process (squared-exponential
 * kernel, the length scale of highest marginal likelihood among a few) is
 * fitted to points of the unit cube, and the candidate with the highest
 * expected improvement is suggested. */
#ifndef ZT_GP_H
#define ZT_GP_H
#include <stdbool.h>

#define ZT_GP_MAX_DIMS 32

typedef struct {
    int d;                  /* dimensions, 1..ZT_GP_MAX_DIMS */
    int nobs;               /* observed points: X's first nobs rows, with values y */
    int n;                  /* every point: rows nobs..n-1 are pending (running
                             * trials), counted at the observations' mean so that
                             * parallel suggestions spread out */
    const double *X;        /* n x d coordinates in [0, 1] */
    const double *y;        /* nobs values, higher is better */
    double noise;           /* the observations' noise variance (standardised) */
} zt_gp_t;

/* Writes to u (d coordinates) the candidate of highest expected
 * improvement among 3000, a third near the best observation and the rest
 * uniform, drawn with rand01(arg) (each in (0, 1)). false with fewer than
 * two observations, or when the kernel matrix cannot be factored. */
bool zt_gp_suggest(const zt_gp_t *gp, double (*rand01)(void *arg), void *arg, double *u);

#endif
