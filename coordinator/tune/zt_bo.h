/* zt_bo: the studies' Bayesian optimisation.
 *
 * A Gaussian process per objective (zt_bo_gp.c): a Matern-5/2 kernel with
 * a length scale per dimension, categories compared by equality (no order),
 * a constant mean by generalised least squares (a cluster of points near
 * the best counts as few, so unexplored corners do not look promising),
 * its signal and noise variances, all fitted by the highest posterior
 * (the marginal likelihood times weak priors) from several starts with a
 * bounded L-BFGS (zt_bo_opt.c), Cholesky factors from LAPACK.
 *
 * The next point (zt_bo_acq.c) maximises the log expected improvement (one
 * objective; the log expected hypervolume improvement for two; random
 * Chebyshev scalarisations for more), from many starts: L-BFGS over the
 * continuous dimensions, every choice of a discrete or categorical one.
 * A study's last trial (one objective) goes where the model's mean is
 * best instead: it is the study's final answer, not a probe.
 * Running trials count at the models' mean there (the kriging believer),
 * the best so far among them, so a batch spreads out.
 *
 * Coordinates: a continuous or discrete dimension is in [0, 1] (a discrete
 * one only at its choices); a categorical one is the category's index. */
#ifndef ZT_BO_H
#define ZT_BO_H
#include <stdbool.h>
#include <stdint.h>

#define ZT_BO_MAX_DIMS 32
#define ZT_BO_MAX_OBJ 9

typedef enum { ZT_BO_CONT, ZT_BO_DISC, ZT_BO_CAT } zt_bo_kind_t;

typedef struct {
    zt_bo_kind_t kind;
    int n;                     /* DISC: choices, CAT: categories */
    const double *at;          /* DISC: the choices' coordinates, ascending */
} zt_bo_dim_t;

/* The kernel's hyperparameters. */
typedef struct {
    double lambda[ZT_BO_MAX_DIMS]; /* inverse squared length scales */
    double scale;              /* signal variance; 0: not fitted yet */
    double noise;              /* noise variance */
} zt_bo_hyper_t;

typedef struct zt_bo_gp zt_bo_gp_t;

/* The GP over n points X (n x d) with values y (standardised by the
 * caller) at hyperparameters h; NULL when K cannot be factored. */
zt_bo_gp_t *zt_bo_gp_new(const zt_bo_dim_t *dims, int d, const double *X, const double *y, int n,
                         const zt_bo_hyper_t *h);
void zt_bo_gp_free(zt_bo_gp_t **gp);
/* The fitted hyperparameters: the highest log posterior from the default
 * start, h's (when h->scale > 0) and a few random ones; written to h.
 * noise_floor: the least noise variance (a deterministic objective's is
 * tiny). false when no start could be factored. */
bool zt_bo_gp_fit(const zt_bo_dim_t *dims, int d, const double *X, const double *y, int n, double noise_floor,
                  uint64_t *rng, zt_bo_hyper_t *h);
/* The log posterior (up to a constant) at log-hyperparameters theta
 * (d log lambdas, log scale, log noise) and its gradient (d + 2). */
double zt_bo_gp_log_post(const zt_bo_dim_t *dims, int d, const double *X, const double *y, int n,
                         const double *theta, double *grad);
/* The latent mean and variance at x; their gradients (d, zero for a
 * categorical dimension) when dmu and dvar are not NULL. */
void zt_bo_gp_predict(const zt_bo_gp_t *gp, const double *x, double *mu, double *var, double *dmu, double *dvar);

/* log(phi(z) + z Phi(z)): the log of the expected improvement of a
 * standard normal over -z, accurate far into the tail; its derivative in
 * *dz when not NULL. */
double zt_bo_log_h(double z, double *dz);

/* Minimises f over the box [lo, hi] (d <= 64) from x (written with the
 * minimiser) by L-BFGS with projected steps, none moving a coordinate by
 * more than max_step; f returns the value and writes the gradient.
 * Returns the minimum. */
typedef double (*zt_bo_fn_t)(void *ctx, const double *x, double *grad);
double zt_bo_minimize(zt_bo_fn_t f, void *ctx, double *x, const double *lo, const double *hi, int d, int max_iter,
                      double max_step);

/* A uniform double in [0, 1) from the generator's state. */
double zt_bo_rand(uint64_t *state);

typedef struct {
    int d;
    const zt_bo_dim_t *dims;
    int n;                     /* observations: X (n x d), Y (n x m), higher is better */
    const double *X, *Y;
    int m;                     /* objectives, 1..ZT_BO_MAX_OBJ */
    int npend;                 /* running trials: P (npend x d) */
    const double *P;
    double noise_floor;
    uint64_t *rng;
    zt_bo_hyper_t *hyper;      /* m: the last fits (in: starts, out: this fit) */
    /* NULL, or makes x the point that would be recorded for it (a
     * conditional parameter that x leaves inactive at its placeholder):
     * the acquisition is judged there, and the suggestion is such a point. */
    void (*fix)(const void *ctx, double *x);
    const void *fix_ctx;
    bool last;                 /* the study's last trial: with one objective it goes where
                                * the model's mean is best (nothing after it can use what
                                * a trial elsewhere would teach), not where EI is */
} zt_bo_problem_t;

/* The next point, in x (d). false with fewer than two observations or
 * when no model could be fitted. */
bool zt_bo_suggest(const zt_bo_problem_t *p, double *x);

/* The hypervolume that the n points Y (n x m, lower is better) dominate
 * within the reference point ref; NaN when that would take too long (many
 * objectives and a large front). */
double zt_bo_hypervolume(const double *Y, int n, int m, const double *ref);

#endif
