/* zt_trainer: the built-in trainer. Softmax regression or an MLP on
 * Fashion-MNIST; each worker trains on its own disjoint shard of the
 * training set (reshuffled every epoch), against the parameter servers of
 * workerpool2 (asynchronous by default) or alone when there are none. The
 * chief (rank 0) also checkpoints every N steps or seconds, serves the
 * checkpoints to evaluators, and at the end writes the final model and its
 * test accuracy. */
#ifndef ZT_TRAINER_H
#define ZT_TRAINER_H
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include "runtime/zt_placeholder.h"

typedef struct {
    float learning_rate;       /* --learning_rate (0.001) */
    int batch_size;            /* --batch_size (64) */
    int hidden[7];             /* --hidden=256,128 ("" or 0: softmax regression) */
    int nhidden;
    int epochs;                /* --epochs (5) */
    char optimizer[16];        /* --optimizer (adam) */
    uint64_t seed;             /* --seed (1) */
    int64_t max_steps;         /* --max_steps (0: no limit) */
    int checkpoint_steps;      /* --checkpoint_steps (500; 0 off) */
    double checkpoint_secs;    /* --checkpoint_secs (0 off) */
    int keep_checkpoints;      /* --keep_checkpoints (5) */
    const char *data_dir;      /* --data_dir */
    int log_every;             /* --log_every (100) */
    bool sync;                 /* --sync: average every worker's step on the servers */
    int max_staleness;         /* --max_staleness (-1: unbounded) */
    int train_limit;           /* --train_examples (0: all 60000) */
    int test_limit;            /* --test_examples (0: all 10000) */
    bool lr_linear;            /* --lr_scaling=linear: lr x workers (synchronous modes) */
    int warmup_steps;          /* --warmup_steps: ramp to the scaled lr (100) */
    char device[8];            /* --device: auto (a GPU when the replica has one), cpu, cuda */
} zt_train_opts_t;

void zt_train_opts_defaults(zt_train_opts_t *o);
/* Parses the command line (getopt_long: --name=value or --name value, with
 * - or _): the trainer's flags into o, the placeholder replica's (--idle,
 * --run-seconds) into role. 0 to go on, 1 when --help or --version was
 * printed, 2 on an unknown flag or a bad value (printed). */
int zt_train_opts_parse(zt_train_opts_t *o, zt_placeholder_opts_t *role, int argc, char **argv);
/* Trains; 0 on success (exit status of the replica). */
int zt_trainer_run(const zt_train_opts_t *o);

#endif
