/* zt_ar_tune: ZT_AUTOTUNE, the search for an all-reduce's fusion threshold
 * and cycle time during its first rounds. Private to lib/allreduce.
 *
 * Rank 0 leads: it times the rounds (end of one wait to the end of the
 * next), one sample of ZT_AUTOTUNE_STEPS_PER_SAMPLE rounds per setting,
 * the sample's median its time; the starting setting is sampled first,
 * then four spread over the space, then a Gaussian process (zt_gp) over
 * (log2 threshold, cycle time) suggests each next one. After
 * ZT_AUTOTUNE_SAMPLES the fastest sample's setting is kept.
 *
 * The leader's word (ZT_AR_TUNE_WORD floats, the others' zeros) is summed
 * with each round's tensors, so every worker learns a new setting at the
 * same round and forms the new layout after it (zt_allreduce.c). */
#ifndef ZT_AR_TUNE_H
#define ZT_AR_TUNE_H
#include <stdbool.h>
#include <stdint.h>

#define ZT_AR_TUNE_WORD 4   /* threshold (KiB), cycle time (ms), layout number, final (1) */

typedef struct zt_ar_tune_t zt_ar_tune_t;

/* The setting a word says: its layout number, 0 for none (a follower's
 * zeros alone). */
typedef struct {
    int64_t threshold;      /* bytes */
    int cycle_ms;
    int layout;
    bool final;             /* the search is over: this setting stays */
} zt_ar_tune_setting_t;

/* Whether ZT_AUTOTUNE (else HOROVOD_AUTOTUNE) asks for the search. */
bool zt_ar_tune_wanted(void);
/* The leader (rank 0) or a follower, starting under layout number
 * `layout` with threshold and cycle_ms, searching thresholds from floor
 * (at least 4 KiB) up. A leader that starts after layout 0 is a restarted
 * one that lost the samples: it keeps the setting in force and ends the
 * search at once. */
zt_ar_tune_t *zt_ar_tune_new(bool leader, int64_t threshold, int cycle_ms, int layout, int64_t floor);
void zt_ar_tune_destroy(zt_ar_tune_t **self_p);
/* This worker's word for the round about to start. */
void zt_ar_tune_word(zt_ar_tune_t *self, float *word);
/* A round ended at now_us (the leader times it; a decision goes into its
 * next word). */
void zt_ar_tune_round(zt_ar_tune_t *self, int64_t now_us);
/* The group's word after a round: the sum of every worker's, times
 * `scale` (the workers, when the round averaged). */
zt_ar_tune_setting_t zt_ar_tune_read(const float *word, float scale);
/* A new layout formed under s (the leader times it from its next round). */
void zt_ar_tune_formed(zt_ar_tune_t *self, const zt_ar_tune_setting_t *s);

#endif
