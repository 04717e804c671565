/* zt_format: the seam between a job format and the rest of the chief. A
 * format (formats/vertex, formats/legacy, formats/sagemaker: one folder
 * each) reads its service's job file into the plan, with its own part typed
 * (plan->own), gives every replica of every job its service's view (a
 * program written for any of the services runs unchanged: Vertex's AIP_*
 * folders, SageMaker's SM_* and config files), and acts for its own jobs:
 * their folders, a host's data before it starts, the job's end, and a
 * tuning job turned into a study. The CLI, the chief and the study runner
 * reach a format only through this table (zt_formats.c registers them);
 * adding one touches its own folder and the one line there. */
#ifndef ZT_FORMAT_H
#define ZT_FORMAT_H
#include "launch/zt_layout.h"
#include "plan/zt_jobspec.h"
#include "plan/zt_spec_int.h"
#include "plan/zt_doc.h"
#include "base/zt_files.h"
#include <jansson.h>
#include <regex.h>
#include <stdbool.h>

/* What a service's tuning job says beyond the study document the runner
 * reads (Vertex's HyperparameterTuningJob form). */
typedef struct {
    regex_t metric_re;       /* the objective in the primary's output (has_metric_re; its group 1 the value) */
    bool has_metric_re;
    bool hyperband;          /* Hyperband: trials stopped at rungs of hb_min x 3^i, up to hb_max (epochs) */
    long long hb_min, hb_max;
    char *warm[5];           /* a warm start's parents, as named (earlier studies' folders or names) */
    int nwarm;
    bool warm_transfer;      /* their data or algorithm differs (TransferLearning) */
} zt_study_extras_t;

/* A managed service's view of a replica, which every job's replicas get
 * (a program written for the service runs unchanged): its variables,
 * appended to env, the folder the pool's PYTHONPATH takes first (NULL:
 * none), and the folders under the base output folder its programs find
 * made. Any may be NULL. */
typedef struct {
    void (*env)(json_t *env, const zt_layout_t *layout, int pool, int index);
    const char *(*python_first)(const zt_layout_t *layout, int pool);
    const char *const *folders;       /* NULL-terminated */
} zt_format_view_t;

typedef struct {
    const char *name;   /* its folder, and plan->service of the plans it makes */
    /* Whether the document (root; a study's: its trial job, opts->spec_key) is one of its jobs.
     * NULL: the format takes what no other claims (one format, Vertex's, does). */
    bool (*claims)(json_t *root, const zt_plan_opts_t *opts);
    /* Reads it into c->plan: plan->service (its name), format, pools, display name, the job as
     * given, its own part. */
    void (*parse)(zt_spec_ctx_t *c, json_t *root, const zt_plan_opts_t *opts);

    /* Every job's replicas: the service's view (fields may be NULL). */
    zt_format_view_t view;
    /* The files its programs read in a replica's config folder: {name: JSON document}, or NULL. */
    json_t *(*config_files)(const zt_layout_t *layout, int pool, int index);

    /* Its own jobs only; NULL: nothing to do. */
    /* The folders the job writes or reads as its own, held to the trusted-folder rule: made
     * (ZT_DIR_MAKE, at run) or checked (ZT_DIR_CHECK). 0, or -1 with why. */
    int (*folders)(const zt_plan_t *plan, zt_dir_mode_t mode, char *why, size_t len);
    /* Before replica (pool, index) starts, again at a restart: its host's data. 0, or -1 with why. */
    int (*prepare)(const zt_layout_t *layout, int pool, int index, char *why, size_t len);
    /* The service's name for the replica's host ("algo-2"), in out. */
    void (*host_name)(const zt_layout_t *layout, int pool, int index, char *out, size_t size);
    /* The names the service's hosts resolve to within the job ({name: address}; NULL: none),
     * which every replica finds in its own /etc/hosts (the chief starts it under ztrain-hosts). */
    json_t *(*host_names)(const zt_layout_t *layout);
    /* Folders replica (pool, index) sees at the paths its service's programs open ({path seen:
     * folder here}; NULL: none), in its own mount namespace (the chief starts it under
     * ztrain-hosts --bind): SageMaker Processing's /opt/ml. */
    json_t *(*binds)(const zt_layout_t *layout, int pool, int index);
    /* Whether the job ends when pool's replicas have all succeeded (NULL: when the primary has). */
    bool (*awaited)(const zt_plan_t *plan, int pool);
    /* The job's end: its outputs written (succeeded), or the program's own account of its failure
     * (*failure, heap, or NULL), which failure_from names. 0, or -1 with why when the outputs
     * could not be written. */
    int (*finish)(const zt_layout_t *layout, bool succeeded, char **failure, char *why, size_t len);
    const char *failure_from;

    /* Studies: whether root is the service's tuning job, and that job as the Vertex study
     * document the runner reads (a new reference; problems reported at its own fields), what
     * that form cannot say in x (zeroed by the caller). */
    bool (*is_study)(json_t *root);
    json_t *(*study)(zt_doc_t *doc, zt_diag_t *diag, bool allow, zt_study_extras_t *x);
    /* Whether `ztrain run FILE` runs FILE (its root) as a study of its trials: NULL, or why
     * (static text: the field that makes it one, and who ran it so). */
    const char *(*runs_as_study)(json_t *root);
} zt_format_t;

/* The formats, in registration order (NULL-terminated): the order of
 * their views in a replica's environment. */
extern const zt_format_t *const zt_formats[];
/* The format that made plan. */
const zt_format_t *zt_format_of(const zt_plan_t *plan);
/* Reads the job file (or the override flags alone) into a plan: the
 * format that claims it parses it. ZT_OK, or ZT_ESPEC/ZT_EIO with every
 * problem in diag. */
int zt_format_load(const zt_plan_opts_t *opts, zt_plan_t **plan_p, zt_diag_t *diag);
/* Replica (pool, index)'s whole environment, in order: the frameworks'
 * (zt_layout_env), every format's view in registration order, then the rest
 * (zt_layout_env_finish: GPUs, hypertune, ZT_*, PYTHONPATH with the views'
 * folders first, the pool's env[] last). [[name, value], ...]. */
json_t *zt_format_env(const zt_layout_t *layout, int pool, int index);
/* The folders every view names under the base output folder, and a trial's
 * hypertune folder (zt_layout_make_folders). */
void zt_format_make_folders(const zt_layout_t *layout);
/* The format's folders of plan (see folders above): 0, or -1 with why. */
int zt_format_folders(const zt_plan_t *plan, zt_dir_mode_t mode, char *why, size_t len);
/* The format whose tuning job root is, or NULL. */
const zt_format_t *zt_format_study_of(json_t *root);
/* Whether `ztrain run file` runs it as a study (a readable file a format
 * says so of): NULL, or why (static). */
const char *zt_format_runs_as_study(const char *file);

/* Every format's view in a replica's environment; aborts on failure. */
void zt_format_selftest(void);

#endif
