/* zt_study_int: what the study's three parts share: the spec and its
 * checks (zt_study_spec.c), the search (zt_search.c: grid, random,
 * Bayesian) and the trial runner (zt_study.c). Private to tune/. */
#ifndef ZT_STUDY_INT_H
#define ZT_STUDY_INT_H
#include "tune/zt_study.h"
#include "launch/zt_backend.h"
#include "plan/zt_state.h"
#include "plan/zt_doc.h"
#include "tune/zt_bo.h"
#include <jansson.h>
#include <regex.h>

#define ZT_STUDY_MAX_METRICS 8 /* metrics beside the first */
#include <stdbool.h>

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
    const char *state;         /* ACTIVE, SUCCEEDED, FAILED, INFEASIBLE, STOPPING, STOPPED, CANCELLED */
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
    bool cancelled;            /* stopped by the study (Ctrl-C, or the study failed) */
    char *message;             /* why it is INFEASIBLE or FAILED, or NULL */
    struct zt_tb *tb;          /* its TensorBoard run while it runs (zt_study_tb.c) */
    size_t tb_meas;            /* measurements written there */
    int hb_rungs;              /* Hyperband: the rungs it has passed */
    double extra_final[ZT_STUDY_MAX_METRICS]; /* the other metrics' last values */
    bool extra_has[ZT_STUDY_MAX_METRICS];
} s_trial_t;

struct zt_study_t {
    zt_study_opts_t opts;
    char *dir;                 /* study directory (absolute) */
    char *trial_job;           /* <dir>/trial-job.json */
    char *base_output;         /* trialJobSpec's baseOutputDirectory, or NULL */
    char metric[128];          /* metricId: the one the search optimises */
    bool maximize;
    char extra[ZT_STUDY_MAX_METRICS][128]; /* the other metrics: reported, and in the Pareto front */
    bool extra_max[ZT_STUDY_MAX_METRICS];
    int nextra;
    s_param_t p[MAX_PARAMS];
    int np;
    s_algo_t algo;
    bool select_best;          /* measurementSelectionType BEST */
    bool median_stop;          /* medianAutomatedStoppingSpec */
    bool decay_stop;           /* decayCurveStoppingSpec */
    bool convex_stop;          /* convexAutomatedStoppingSpec, with: */
    int convex_min_meas;       /*   minMeasurementCount */
    double convex_min_step, convex_max_step; /* minStepCount, maxStepCount (0: the longest completed trial's) */
    double gp_noise;           /* observationNoise: the GPs' least noise variance (1e-6 LOW, 1e-2 HIGH) */
    zt_bo_hyper_t bo_hyper[ZT_BO_MAX_OBJ]; /* the GPs' last fits: the next fit's starts */
    uint64_t bo_rng;           /* the search's generator (seeded from rng) */
    /* studyStoppingConfig: no stop before stop_min_trials ended and
     * stop_min_ms passed; a stop at stop_max_ms, after
     * stop_no_progress_trials trials or stop_no_progress_ms without a
     * better best; stop_asap stops the running trials too (0: unset) */
    int stop_min_trials, stop_no_progress_trials;
    int64_t stop_min_ms, stop_max_ms, stop_no_progress_ms;
    bool stop_asap;
    bool hyperband;            /* SageMaker's Hyperband: trials stopped at rungs of MinResource x 3^i */
    long long hb_min, hb_max;  /* MinResource, MaxResource (steps: the program's epochs) */
    regex_t metric_re;         /* SageMaker's MetricDefinitions: the objective in the primary's output */
    bool has_metric_re;
    char *job_text;            /* a converted study's trial job document (JSON), or NULL: the file's */
    int best_at_trial;         /* the trial that last bettered the best */
    int64_t best_at_ms, started_ms; /* when it ended, and when the study began */
    int max_trials, parallel, max_failed;
    json_t *grid;              /* GRID_SEARCH: every assignment */
    json_t *spec;              /* the study file as given, recorded in study.json */
    s_trial_t *t;
    int nt;
    int next_id;               /* the last trial id given (a resumed study goes on from it) */
    unsigned rng;              /* seeded */
    const char *state;         /* RUNNING, SUCCEEDED, FAILED, CANCELLED */
    int failed;
    bool tty;
    zt_backend_t *launcher;    /* starts each trial's `ztrain run` */
    bool tb_warned;            /* the TensorBoard folder could not be written (said once) */
    /* WarmStartConfig (zt_study_warm.c): the parents as named, and their
     * finished trials in this study's coordinates (MAX_PARAMS a row) with
     * their results: the search's first observations */
    char *warm[5];
    int nwarm;
    bool warm_transfer;        /* TransferLearning, else IdenticalDataAndAlgorithm */
    double *prior_u, *prior_y;
    int nprior;
    json_t *warm_record;       /* study.json's warmStart */
};

static inline bool zt_study_num(json_t *v, double *out)
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

/* Takes over the study directory before anything is written there: with
 * --overwrite, clears an earlier study's results; else an earlier run of
 * the same study (same spec) is resumed: its finished trials are kept and
 * the search goes on from them. A different study there is an error in
 * diag. */
void zt_study_adopt_dir(zt_study_t *s, zt_diag_t *diag);

/* The next parameter set (and its scaled coordinates u): the grid's next
 * assignment, a random point, or the Bayesian suggestion. NULL when the
 * grid is exhausted. */
json_t *zt_search_suggest(zt_study_t *s, double *u);
/* Every assignment of parameters i.. onto params, appended to out. */
void zt_search_grid(zt_study_t *s, int i, json_t *params, json_t *out);
/* A value's scaled coordinate for parameter p: false when it is not one
 * of p's (outside its range, or not among its values). */
bool zt_search_unit(const s_param_t *p, json_t *v, double *u);
/* After the directory is adopted: the parents' trials as priors, or why
 * not in diag. */
void zt_study_warm_start(zt_study_t *s, zt_diag_t *diag);

/* The study in TensorBoard's HParams dashboard, <dir>/tensorboard
 * (zt_study_tb.c): the experiment once, each trial's start, its new
 * measurements, its end. */
void zt_study_tb_experiment(zt_study_t *s);
void zt_study_tb_start(zt_study_t *s, s_trial_t *t);
void zt_study_tb_measure(zt_study_t *s, s_trial_t *t);
void zt_study_tb_end(zt_study_t *s, s_trial_t *t);

/* zt_study_stop.c: whether running trial t is to stop by its learning
 * curve (decay curve, convex), why in why; and whether the study is done by
 * its studyStoppingConfig (no new trials; why in why). */
bool zt_study_curve_stop(zt_study_t *s, s_trial_t *t, char *why, size_t len);
bool zt_study_done(zt_study_t *s, int64_t now_ms, char *why, size_t len);

/* zt_study_record.c. Whether a is better than b for the study's goal. */
bool zt_study_better(zt_study_t *s, double a, double b);
/* A parameter's value as text: a string as it is, a number in 8 digits
 * (heap). */
char *zt_study_value_text(json_t *v);
/* The hypervolume of the finished trials' metrics (every one minimised,
 * the worst value of each the reference point, written to ref in each
 * metric's own terms); NaN with no such trial. */
double zt_study_hypervolume(zt_study_t *s, double *ref);
/* study.json and trials.csv written (atomically) from
 * the study as it stands. */
void zt_study_write(zt_study_t *s);

#endif
