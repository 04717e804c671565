/* zt_jobspec: the plan a job file resolves into, whatever its format (the
 * formats read their files into it: formats/zt_format.h): four positional
 * pools, each with its machine, accelerators, replica count, program and
 * environment, the job's scheduling, and the format's own part, typed and
 * its own to read. Also the parts the formats share: the gcloud-style
 * override flags, and (zt_spec_int.h) the field readers that report every
 * problem to a zt_diag with the file or flag, the field path, the value and
 * the rule. */
#ifndef ZT_JOBSPEC_H
#define ZT_JOBSPEC_H
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include "plan/zt_diag.h"
#include "plan/zt_machines.h"

#define ZT_POOLS 4

typedef enum {
    ZT_ROLE_NONE = 0, ZT_ROLE_WORKER, ZT_ROLE_PARAMSERVER, ZT_ROLE_REDUCER, ZT_ROLE_EVALUATOR
} zt_role_t;

typedef struct {
    bool present;            /* pool has replicas */
    int replicas;            /* replicaCount */
    zt_machine_t machine;    /* machine type and its resources */
    char accel_type[48];     /* canonical accelerator type, "" for none */
    int accel_count;         /* accelerators per replica */
    char disk_type[32];      /* boot disk type */
    int disk_gb;             /* boot disk size */
    char *image_uri;         /* container image (not pulled locally) */
    zt_role_t role;          /* built-in role binary, or NONE for a user program */
    json_t *argv;            /* the command: array of strings */
    json_t *env;             /* pool env[]: array of [name, value] */
    char *python_path;       /* from packageUris, prepended to PYTHONPATH */
    int elastic_min;         /* elasticPolicy.minReplicaCount (0: the pool is not elastic) */
    int elastic_max;         /* elasticPolicy.maxReplicaCount */
} zt_pool_t;

/* How the programs of pools 0 and 1 start on each host. */
typedef enum {
    ZT_LAUNCH_DIRECT = 0,    /* one process per replica, the program itself */
    ZT_LAUNCH_TORCHRUN,      /* under torchrun, one node per replica (it sets torchrun's PET_*) */
    ZT_LAUNCH_MPI            /* the primary's mpirun starts every host's ranks (OMPI_COMM_WORLD_*) */
} zt_launcher_t;

/* A format's own part of its plans: how the plan writes it (its object under
 * key in zt_plan_to_json, its lines in zt_plan_print) and frees it. */
typedef struct {
    const char *key;
    json_t *(*to_json)(const void *own);
    void (*print)(const void *own, FILE *out);
    void (*destroy)(void *own);
} zt_plan_own_ops_t;

typedef struct {
    char *source;            /* the file, or "command line" */
    const char *service;     /* the format that made it (its folder under formats/; static) */
    char *format;            /* "CustomJobSpec", "CustomJob", "trainingInput" or "CreateTrainingJob" */
    char *display_name;      /* job name */
    char *scale_tier;        /* legacy only */
    zt_pool_t pools[ZT_POOLS];
    char *base_output_dir;   /* NULL: the job directory */
    double timeout_s;        /* scheduling.timeout; 0 = none */
    const char *timeout_field; /* the field that set it, as the format names it (static; NULL: scheduling.timeout) */
    bool restart_job_on_worker_restart;
    bool disable_retries;
    bool spot;               /* scheduling.strategy SPOT or LOW_COST: preemptible capacity */
    bool tf_master;          /* TF_CONFIG says "master" instead of "chief" */
    json_t *job;             /* the job spec as given, for CLUSTER_SPEC "job" */
    zt_launcher_t launcher;  /* how pools 0 and 1 start */
    void *own;               /* the format's own part (its type), or NULL */
    const zt_plan_own_ops_t *own_ops;
} zt_plan_t;

typedef struct {
    const char *file;        /* may be NULL when --worker-pool-spec gives the pools */
    json_t *flags;           /* [["--flag", "value"], ...] in command-line order */
    char **user_args;        /* everything after "--" */
    int n_user_args;
    const char *tf_chief_name; /* "chief" or "master" to override, or NULL */
    const char *spec_key;    /* the CustomJobSpec is root[spec_key] (a study's
                                "trialJobSpec"), or NULL for the whole file */
    bool allow_unknown_fields; /* unknown fields are warnings, not errors */
    const char *text;        /* the document itself (JSON; file names it in messages), or NULL: read file */
} zt_plan_opts_t;

/* The i-th override flag ("--worker-pool-spec"), from 0; NULL past the last. */
const char *zt_plan_override_flag(int i);
/* The list of override flags for --help. */
const char *zt_plan_override_help(void);

/* A plan with its pools' defaults, from the document doc (its source). */
zt_plan_t *zt_plan_new(const char *source);
/* What every format's plan takes last: --tf-chief-name, and the arguments
 * after "--" appended to the programs that take them. */
void zt_plan_finish(zt_plan_t *self, const zt_plan_opts_t *opts, zt_diag_t *diag);
void zt_plan_destroy(zt_plan_t **self_p);
/* Accelerators asked for against those found (gpus_found); an error unless
 * cpu_only. Returns the total asked. */
int zt_plan_check_gpus(zt_plan_t *self, int gpus_found, bool cpu_only, zt_diag_t *diag);
/* Total replicas over all pools. */
int zt_plan_replicas(const zt_plan_t *self);
/* Role names: the pool's role in TF_CONFIG terms and the binary name. */
const char *zt_role_binary(zt_role_t role);
/* Whether pool's program is a Python interpreter's (its first word's name
 * starts with "python"); *interp (may be NULL): that word, else python3
 * from PATH: the interpreter the pool's Python runs under. */
bool zt_pool_python(const zt_pool_t *pool, const char **interp);
/* The resolved plan as JSON (what `ztrain validate --json` prints). */
json_t *zt_plan_to_json(const zt_plan_t *self);
void zt_plan_print(const zt_plan_t *self, FILE *out);

#endif
