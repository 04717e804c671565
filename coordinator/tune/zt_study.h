/* zt_study: hyperparameter tuning. A study (Vertex HyperparameterTuningJob
 * style) runs many trials of one job: each trial is a whole job run by the
 * same supervision code (a `ztrain run --trial ID`, started through the
 * launch interface like any replica), its parameters
 * appended to the args of pools 0 and 1 as --name=value. Search is grid,
 * random or Bayesian (Gaussian-process regression with expected improvement
 * over the scaled parameter space), seeded. Measurements come from the
 * cloudml-hypertune metric file each trial writes, or from libztrain's metric
 * reports; median early stopping uses them. Everything is written to
 * <study-dir>/study.json and trials.csv. */
#ifndef ZT_STUDY_H
#define ZT_STUDY_H
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include "plan/zt_diag.h"

typedef struct zt_study_t zt_study_t;

typedef struct {
    const char *file;          /* study spec */
    const char *study_dir;     /* where trials and results go (made) */
    const char *ztrain;        /* the ztrain binary that runs each trial */
    uint64_t seed;             /* search seed */
    bool cpu_only;             /* passed to every trial */
    const char *backend;       /* --backend of every trial, NULL: ZT_BACKEND */
    bool allow_unknown_fields; /* unknown fields are warnings (and so in every trial) */
    bool overwrite;            /* start over in a study directory that holds results */
} zt_study_opts_t;

/* Loads and validates; NULL with the problems in diag. */
zt_study_t *zt_study_new(const zt_study_opts_t *opts, zt_diag_t *diag);
void zt_study_destroy(zt_study_t **self_p);
/* Runs the study to its end; 0 when it succeeded (at least one trial did). */
int zt_study_run(zt_study_t *self);
/* Proposes up to n parameter sets without running anything (tests). */
char *zt_study_suggest_json(zt_study_t *self, int n);
/* Prints a study's study.json (doc) as a table. */
void zt_study_print(const char *study_dir, json_t *doc);

#endif
