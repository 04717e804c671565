/* TensorBoard event files: scalars, and the HParams plugin's experiment and
 * session records, written in TensorBoard's own format so that TensorBoard
 * (and any reader of its event files) shows them.
 *
 * A file is a sequence of records: the payload's length (uint64, little
 * endian), the length's masked CRC32C, the payload (a serialized Event), the
 * payload's masked CRC32C. The first Event names the format
 * ("brain.Event:2"). Records are encoded with protobuf-c (zt_tb.proto); the
 * CRC32C is computed here (Debian packages no C library for it).
 *
 * Every write is flushed, so that a TensorBoard reading the folder while a
 * job runs sees each point as it is written. Not thread-safe: one writer per
 * thread. */
#ifndef ZT_TB_H
#define ZT_TB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct zt_tb zt_tb_t;

/* Opens a new event file in dir (made, with its parents, when missing):
 * events.out.tfevents.<seconds>.<host>.<pid>.<n>. NULL on failure, with the
 * folder and the reason in err. */
zt_tb_t *zt_tb_open(const char *dir, char *err, size_t errlen);

/* The folder of run `run` under a log folder: base/run, with base's
 * trailing slashes dropped (AIP_TENSORBOARD_LOG_DIR ends with one). */
char *zt_tb_run_dir(const char *base, const char *run);

/* A built-in role's event file, in run `run` under AIP_TENSORBOARD_LOG_DIR:
 * NULL when the variable is unset or ZT_TENSORBOARD=off, and when the
 * folder cannot be written (then a warning: the role goes on without it). */
zt_tb_t *zt_tb_open_role_run(const char *run);

/* One scalar point. 0, or -1 when the file could not be written (the
 * first such failure is logged once; later writes are dropped). */
int zt_tb_scalar(zt_tb_t *self, const char *tag, double value, int64_t step);

/* Flushes and closes; *self becomes NULL. */
void zt_tb_close(zt_tb_t **self);

/* The path of the event file. */
const char *zt_tb_path(const zt_tb_t *self);

/* ---- HParams (hyperparameter studies) ---- */

typedef enum { ZT_TB_NUMBER, ZT_TB_STRING, ZT_TB_BOOL } zt_tb_kind_t;

/* A hyperparameter: its name, its kind and, for a session, its value; for
 * the experiment, its domain: [min, max] for numbers (when min < max), or
 * the discrete values (numbers or strings). */
typedef struct {
    const char *name;
    zt_tb_kind_t kind;
    double number;            /* the value (ZT_TB_NUMBER, ZT_TB_BOOL as 0/1) */
    const char *string;       /* the value (ZT_TB_STRING) */
    double min, max;          /* the experiment's interval */
    int ndiscrete;            /* the experiment's discrete values */
    const double *discrete_numbers;
    const char *const *discrete_strings;
} zt_tb_hparam_t;

typedef enum { ZT_TB_STATUS_UNKNOWN, ZT_TB_STATUS_SUCCESS, ZT_TB_STATUS_FAILURE, ZT_TB_STATUS_RUNNING } zt_tb_status_t;

/* The experiment (written once, in the folder above the sessions' runs):
 * its hyperparameters and the metric tags each session reports. */
int zt_tb_experiment(zt_tb_t *self, const char *name, const char *description, const zt_tb_hparam_t *hp,
                     int nhp, const char *const *metric_tags, int nmetrics, double created_secs);

/* A session (a trial, in its own run folder): its hyperparameter values. */
int zt_tb_session_start(zt_tb_t *self, const zt_tb_hparam_t *hp, int nhp, const char *group, double start_secs);

/* The session's end and status. */
int zt_tb_session_end(zt_tb_t *self, zt_tb_status_t status, double end_secs);

/* CRC32C (Castagnoli) of n bytes, and TensorBoard's masked form of it. */
uint32_t zt_tb_crc32c(const void *data, size_t n);
uint32_t zt_tb_masked_crc(const void *data, size_t n);

/* tmp: a folder for its files (removed after). */
void zt_tb_selftest(const char *tmp);

#endif
