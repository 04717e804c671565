/* zt_coord_record: the job's record, what job.json keeps of its history
 * beside the replicas' states (transitions, metrics, checkpoints,
 * evaluations, events, latency, lost nodes, the creation time), bounded
 * against what replicas send, and when it is next due to be written. Its
 * state is its own; the chief records into it and the job document
 * (zt_coord_doc.c) writes it out. */
#ifndef ZT_COORD_RECORD_H
#define ZT_COORD_RECORD_H
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "wire/zt_msg.h"

/* What one replica's messages can make job.json hold: metric names per
 * replica, and the newest checkpoints and evaluations kept. */
#define ZT_COORD_MAX_METRIC_NAMES 256
#define ZT_COORD_MAX_RECORDS 10000

typedef struct zt_coord_record_t zt_coord_record_t;
zt_coord_record_t *zt_coord_record_new(void);
void zt_coord_record_destroy(zt_coord_record_t **self_p);
/* An earlier run's record (its job.json, doc) carried on: transitions,
 * checkpoints, evaluations, lost nodes, metrics, events, the creation
 * time, the job retries and preemptions. */
void zt_coord_record_take(zt_coord_record_t *self, json_t *doc);
const char *zt_coord_record_created(const zt_coord_record_t *self);
void zt_coord_record_transition(zt_coord_record_t *self, const char *state);
size_t zt_coord_record_transitions(const zt_coord_record_t *self);
/* An event of kind, now, with fields (taken: {replica, why...}). */
void zt_coord_record_event(zt_coord_record_t *self, const char *kind, json_t *fields);
void zt_coord_record_lost_node(zt_coord_record_t *self, const char *why);
void zt_coord_record_checkpoint(zt_coord_record_t *self, int64_t step, const char *name);
/* The newest checkpoint's step, 0 for none. */
int64_t zt_coord_record_last_checkpoint(const zt_coord_record_t *self);
void zt_coord_record_evaluation(zt_coord_record_t *self, const char *replica, const char *name, double value,
                                int64_t step);
/* Whether replica (NULL: any evaluator) scored the checkpoint of step. */
bool zt_coord_record_evaluated(const zt_coord_record_t *self, int64_t step, const char *replica);
/* The replica's metric name: its latest value and the series of the
 * newest ZT_METRIC_HISTORY [step, value] pairs. ZT_RECORD_KEPT; or, not
 * kept, ZT_RECORD_TOO_MANY (a new name past the bound), ZT_RECORD_NOT_A_KEY
 * (a name that is no JSON key) or ZT_RECORD_NO_MEMORY. */
typedef enum { ZT_RECORD_KEPT, ZT_RECORD_TOO_MANY, ZT_RECORD_NOT_A_KEY, ZT_RECORD_NO_MEMORY } zt_record_rc_t;
zt_record_rc_t zt_coord_record_metric(zt_coord_record_t *self, const char *replica, const char *name, double value,
                                      int64_t step);
/* The newest step among replica's metrics, -1 for none. */
int64_t zt_coord_record_step_of(const zt_coord_record_t *self, const char *replica);
/* The replica's latency histogram of kind (hist taken: {le, counts, sum}). */
void zt_coord_record_latency(zt_coord_record_t *self, const char *kind, const char *replica, json_t *hist);
/* The control plane's refusals, job.json's controlPlaneDrops: malformed
 * messages by kind (the decoder counts into zt_coord_record_drops), and
 * well-formed ones from no replica of the job or under another replica's
 * name. zt_coord_record_refusals: their sum, to tell a change. */
typedef enum { ZT_RECORD_UNKNOWN_SENDER, ZT_RECORD_WRONG_IDENTITY, ZT_RECORD_MALFORMED } zt_record_refusal_t;
void zt_coord_record_refused(zt_coord_record_t *self, zt_record_refusal_t what);
zt_msg_drops_t *zt_coord_record_drops(zt_coord_record_t *self);
uint64_t zt_coord_record_refusals(const zt_coord_record_t *self);
/* Something job.json shows changed (an elastic membership). */
void zt_coord_record_changed(zt_coord_record_t *self);
/* The refusals counted elsewhere (the CURVE handshakes') beside the
 * record's own: a change of their sum makes job.json due. */
void zt_coord_record_refusals_seen(zt_coord_record_t *self, uint64_t elsewhere);
/* Whether it changed and every_ms passed since it was last written. */
bool zt_coord_record_due(const zt_coord_record_t *self, int64_t now_ms, int64_t every_ms);
/* The job's error, job.json's "error" (why it failed or was cancelled):
 * error taken, NULL clearing it; zt_coord_record_error: borrowed, to add
 * to, or NULL. */
void zt_coord_record_set_error(zt_coord_record_t *self, json_t *error);
json_t *zt_coord_record_error(zt_coord_record_t *self);
/* Whole-job retries, at most ZT_MAX_JOB_RETRIES (read as the record is
 * made): zt_coord_record_retry uses one when retries are not disabled and
 * one is left (true). */
bool zt_coord_record_retry(zt_coord_record_t *self, bool disabled);
int zt_coord_record_retries(const zt_coord_record_t *self);
int zt_coord_record_max_retries(const zt_coord_record_t *self);
/* The job's preemptions, every replica's and the whole job's (a Slurm
 * preemption): one more, and how many so far. */
void zt_coord_record_preempted(zt_coord_record_t *self);
int zt_coord_record_preemptions(const zt_coord_record_t *self);
/* Its keys into job.json's doc, as written now. */
void zt_coord_record_into(zt_coord_record_t *self, json_t *doc);

#endif
