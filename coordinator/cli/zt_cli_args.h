/* The ztrain CLI's command line (zt_cli_args.c), for its commands
 * (zt_cli.c). */
#ifndef ZT_CLI_ARGS_H
#define ZT_CLI_ARGS_H
#include <jansson.h>
#include <stdbool.h>

typedef struct {
    const char *command;       /* run, validate, env, status, cancel, logs, wait, list, tune */
    const char *file;          /* job file */
    const char *job_dir;       /* --job-dir */
    const char *trial;         /* --trial */
    const char *tf_chief;      /* --tf-chief-name */
    const char *backend;       /* --backend (else ZT_BACKEND) */
    int pool, index;           /* env, scale: --pool; env: --index */
    int replicas;              /* scale: --replicas */
    const char *study_dir;     /* tune, status: --study-dir */
    long long seed;            /* tune: --seed */
    int suggest;               /* tune: --suggest N (print, run nothing) */
    bool cpu_only, json;       /* --cpu-only, --json */
    bool allow_unknown;        /* --allow-unknown-fields */
    bool overwrite, resume;    /* --overwrite, --resume: a directory holding another job or study */
    const char *partition;     /* --partition (slurm) */
    const char *account;       /* --account (slurm) */
    const char *qos;           /* --qos (slurm) */
    const char *time;          /* --time (slurm) */
    bool detach;               /* --detach (slurm): submit and return */
    const char *replica;       /* logs: --replica */
    int metrics_port;          /* run: --metrics-port (-1: off) */
    bool follow;               /* logs: -f, --follow */
    json_t *flags;             /* override flags in order */
    char **user_args;          /* after -- */
    int n_user_args;
} zt_cli_args_t;

/* Every command's name (for "did you mean"), NULL-terminated. */
extern const char *const zt_cli_commands[];
/* Parses the command line into a (its flags: a JSON array the caller
 * lets go); forced names the command (ztrain-coordinator: "run").
 * --help and --version print and exit. -1 after saying why, else 0. */
int zt_cli_parse(int argc, char **argv, const char *forced, zt_cli_args_t *a);

#endif
