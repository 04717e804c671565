/* The ztrain CLI's command line: every command's synopsis and options
 * (--help), parsed into zt_cli_args_t. */
#include "cli/zt_cli_args.h"
#include "cli/zt_cli.h"
#include "launch/zt_layout.h"
#include "chief/zt_coord.h"
#include "plan/zt_cuda_probe.h"
#include "launch/zt_slurm.h"
#include "plan/zt_doc.h"
#include "tune/zt_study.h"
#include "base/zt_text.h"
#include "base/zt_util.h"
#include "base/zt_json.h"
#include "state/zt_ckpt.h"
#include "ztrain/ztrain.h"
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

/* Every command's synopsis: --help prints these lines, and the README's
 * CLI reference holds the same block (a test compares them). */
static const char *const s_synopsis[] = {
    "ztrain run FILE [--job-dir DIR] [--overwrite | --resume] [--backend NAME] [--cpu-only] [--trial ID]",
    "           [--tf-chief-name chief|master] [--allow-unknown-fields]",
    "           [--partition P] [--account A] [--qos Q] [--time T] [--detach] [--metrics-port N]",
    "           [overrides] [-- ARGS]",
    "ztrain validate FILE [--json] [--cpu-only] [--allow-unknown-fields] [--backend NAME]",
    "           [--partition P] [--account A] [--qos Q] [--time T] [overrides] [-- ARGS]",
    "ztrain env FILE --pool N --index I [--trial ID] [--job-dir DIR] [--backend NAME] [overrides]",
    "ztrain status [--job-dir] DIR [--json]",
    "ztrain status --study-dir DIR [--json]",
    "ztrain cancel [--job-dir] DIR",
    "ztrain scale [--job-dir] DIR --pool 1 --replicas K",
    "ztrain logs [--job-dir] DIR [--replica NAME] [-f]",
    "ztrain wait [--job-dir] DIR",
    "ztrain list [JOBS_DIR] [--json]",
    "ztrain tune STUDY.json [--study-dir DIR] [--overwrite] [--seed N] [--cpu-only] [--backend NAME]",
    "           [--allow-unknown-fields] [--suggest N]",
    "ztrain --version | --help",
    NULL,
};

/* The commands, for did-you-mean. */
const char *const zt_cli_commands[] = { "run", "validate", "env", "status", "cancel", "scale", "logs", "wait",
                                          "list", "tune", NULL };

static void s_usage(FILE *out, const char *prog)
{
    fprintf(out, "usage: %s COMMAND [options]\n\n"
                 "Runs training jobs written for Vertex AI, AI Platform or SageMaker on this\n"
                 "machine, or on a Slurm cluster.\n\nSynopsis:\n", prog);
    for (int i = 0; s_synopsis[i]; i++)
        fprintf(out, "  %s\n", s_synopsis[i]);
    fprintf(out,
        "\nCommands:\n"
        "  run       start the coordinator, which starts and supervises every replica;\n"
        "            exits 0 when the job SUCCEEDED, 1 FAILED, 2 invalid spec, 3 CANCELLED.\n"
        "            --backend slurm outside an allocation submits the job with sbatch\n"
        "            (the coordinator runs inside it) and follows it, streaming its output\n"
        "            and saying why it waits while Slurm keeps it pending, unless --detach;\n"
        "            Ctrl-C cancels it\n"
        "  validate  print the resolved plan, or every error (exit 2); with --backend slurm\n"
        "            also the #SBATCH lines of the allocation\n"
        "  env       print one replica's environment as KEY=VALUE lines; runs nothing. Its\n"
        "            paths are under --job-dir (default: the current directory)\n"
        "  status    show a queued, running or finished job, or study; exits as run or tune\n"
        "            did (a job whose coordinator is gone without an end is FAILED)\n"
        "  cancel    cancel a job (its coordinator on this machine, or its Slurm job) and\n"
        "            wait for it to end; exits 0 once it has ended, 1 when it cannot be\n"
        "            cancelled from here\n"
        "  scale     ask a running job for K replicas of its elastic workers' pool (its\n"
        "            elasticPolicy's bounds): the last ones leave, or new ones join and\n"
        "            take the model from the others, at a step every trainer agrees on;\n"
        "            exits 0 when the coordinator accepted the request\n"
        "  logs      print the job's logs (the coordinator's and every replica's, merged in\n"
        "            time order, each line after its replica's name), or one replica's; -f\n"
        "            follows them as they grow until the job ends\n"
        "  wait      wait for a job (or study) to end; exits as run (or tune) did\n"
        "  list      the jobs and studies in JOBS_DIR (default $ZT_JOBS_DIR): kind, name,\n"
        "            state, start, duration, directory; oldest first\n"
        "  tune      run a hyperparameter study: every trial is a whole job (ztrain run\n"
        "            --trial); exits 0 when it succeeded, 1 failed, 2 invalid spec, 3\n"
        "            cancelled; a study directory holding the same study resumes it\n"
        "            (--overwrite: start over); --suggest N prints the next N parameter sets\n"
        "            (after the trials the study directory holds) and starts no trial\n\n"
        "FILE is a Vertex CustomJobSpec or CustomJob (JSON), a legacy AI Platform\n"
        "config with trainingInput (YAML), or a SageMaker CreateTrainingJob or\n"
        "CreateProcessingJob request (JSON); tune also takes a Vertex HyperparameterTuningJob or a SageMaker\n"
        "CreateHyperParameterTuningJob request. It may be left out when\n"
        "--worker-pool-spec or legacy flags describe the job.\n\n"
        "Options:\n"
        "  --job-dir DIR        logs, job.json, outputs (run: default $ZT_JOBS_DIR/NAME-TIME-PID;\n"
        "                       env: default the current directory)\n"
        "  --backend NAME       where replicas are placed and started: local (default:\n"
        "                       $ZT_BACKEND, else local: every replica on this machine),\n"
        "                       or slurm (submitted to Slurm from outside an allocation;\n"
        "                       inside one, every replica a job step on its node)\n"
        "  --cpu-only           run without GPUs even when accelerators are asked for\n"
        "  --trial ID           run as trial ID of a study (task.trial, CLOUD_ML_TRIAL_ID)\n"
        "  --tf-chief-name chief|master   name of pool 0 in TF_CONFIG\n"
        "  --allow-unknown-fields  unknown spec fields are warnings, not errors (a spec\n"
        "                       written for a newer service)\n"
        "  --overwrite          run: start afresh in a job directory that holds another\n"
        "                       job; tune: start the study over instead of resuming it\n"
        "  --resume             run: continue the job in the directory (its checkpoints)\n"
        "                       even though its spec changed\n"
        "  --json               machine-readable output (validate, status, list)\n"
        "  --metrics-port N     run: the coordinator serves Prometheus metrics on\n"
        "                       http://$ZT_METRICS_ADDR:N/metrics (0: a port the system\n"
        "                       picks, logged and in job.json's metricsUrl; default: off)\n"
        "  --replica NAME       logs: only this replica's (workerpool1-0, coordinator)\n"
        "  -f, --follow         logs: follow the logs until the job ends\n"
        "  --partition P, --account A, --qos Q   the Slurm partition, account and QOS\n"
        "                       (--backend slurm; a job with scheduling.strategy SPOT\n"
        "                       names a preemptible partition or QOS here)\n"
        "  --time T             the Slurm time limit (minutes, HH:MM:SS, D-HH:MM...;\n"
        "                       default: scheduling.timeout, else the partition's)\n"
        "  --detach             run --backend slurm: submit, print the job id, return\n"
        "  --study-dir DIR      tune, status: the study's directory (tune: default\n"
        "                       $ZT_JOBS_DIR/study-TIME-PID)\n"
        "  --seed N             tune: the search's seed (default 1)\n"
        "  --pool N, --index I  env: the replica\n"
        "  --replicas K         scale: the replicas asked for\n"
        "  --version, --help\n\n%s\n", zt_plan_override_help());
    zt_knobs_print_for(out, ZT_FOR_COORD);
}

enum {
    O_JOB_DIR = 1, O_TRIAL, O_TF_CHIEF, O_POOL, O_INDEX, O_STUDY_DIR, O_SEED, O_SUGGEST, O_BACKEND, O_CPU_ONLY,
    O_JSON, O_ALLOW_UNKNOWN, O_OVERWRITE, O_RESUME, O_HELP, O_VERSION, O_PARTITION, O_ACCOUNT, O_TIME, O_DETACH,
    O_REPLICA, O_FOLLOW, O_METRICS_PORT, O_QOS, O_REPLICAS,
    O_OVERRIDE = 1000 /* past any short option */
};

/* One option of the CLI (getopt_long). */
static int s_on_option(zt_cli_args_t *a, int c, const char *name, const char *value)
{
    long long n;
    switch (c) {
    case O_JOB_DIR: a->job_dir = value; return 0;
    case O_STUDY_DIR: a->study_dir = value; return 0;
    case O_TRIAL: a->trial = value; return 0;
    case O_BACKEND: a->backend = value; return 0;
    case O_PARTITION:
    case O_ACCOUNT:
    case O_QOS:
        /* they go on #SBATCH lines, which a blank or newline would break */
        if (!*value || strspn(value, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.,") !=
                           strlen(value)) {
            fprintf(stderr, "ztrain: --%s: '%s': Slurm's names are letters, digits, '_', '-' and '.' (a comma "
                            "between several)\n", name, value);
            return -1;
        }
        *(c == O_PARTITION ? &a->partition : c == O_ACCOUNT ? &a->account : &a->qos) = value;
        return 0;
    case O_TIME:
        if (zt_slurm_time_problem(value)) {
            fprintf(stderr, "ztrain: --time: '%s': %s\n", value, zt_slurm_time_problem(value));
            return -1;
        }
        a->time = value;
        return 0;
    case O_DETACH: a->detach = true; return 0;
    case O_REPLICA: a->replica = value; return 0;
    case 'f': case O_FOLLOW: a->follow = true; return 0;
    case O_TF_CHIEF: a->tf_chief = value; return 0;
    case O_CPU_ONLY: a->cpu_only = true; return 0;
    case O_JSON: a->json = true; return 0;
    case O_ALLOW_UNKNOWN: a->allow_unknown = true; return 0;
    case O_OVERWRITE: a->overwrite = true; return 0;
    case O_RESUME: a->resume = true; return 0;
    case O_METRICS_PORT:
        if (!zt_parse_int(value, &n) || n < 0 || n > 65535) {
            fprintf(stderr, "ztrain: --metrics-port: '%s' is not a port (0-65535; 0: one the system picks)\n", value);
            return -1;
        }
        a->metrics_port = (int) n;
        return 0;
    case O_SEED: case O_SUGGEST: case O_POOL: case O_INDEX: case O_REPLICAS:
        if (!zt_parse_int(value, &n) || n < 0 || n > INT_MAX) {
            fprintf(stderr, "ztrain: --%s: '%s' is not a non-negative integer\n", name, value);
            return -1;
        }
        if (c == O_SEED) a->seed = n;
        else if (c == O_SUGGEST) a->suggest = (int) n;
        else if (c == O_POOL) a->pool = (int) n;
        else if (c == O_REPLICAS) a->replicas = (int) n;
        else a->index = (int) n;
        return 0;
    default: { /* an override flag, kept in command-line order */
        char *flag = zt_strdupf("--%s", name);
        json_array_append_new(a->flags, json_pack("[ss]", flag, value));
        free(flag);
        return 0;
    }
    }
}

/* An unknown option, with the nearest known one as a did-you-mean. */
static void s_unknown_option(const char *arg, const struct option *opts)
{
    const char *names[100];
    int n = 0;
    for (; opts[n].name && n < 99; n++)
        names[n] = opts[n].name;
    names[n] = NULL;
    char bare[128];
    snprintf(bare, sizeof bare, "%s", arg + strspn(arg, "-"));
    bare[strcspn(bare, "=")] = '\0';
    const char *near = zt_doc_nearest(bare, names);
    if (near)
        fprintf(stderr, "ztrain: unknown option %s; did you mean --%s? (see ztrain --help)\n", arg, near);
    else
        fprintf(stderr, "ztrain: unknown option %s (see ztrain --help)\n", arg);
}

/* The command line: COMMAND [FILE] and options anywhere (getopt_long, GNU
 * order), user arguments after "--". -1 (printed) on an unknown option, a
 * missing value or a stray argument. */
int zt_cli_parse(int argc, char **argv, const char *forced, zt_cli_args_t *a)
{
    memset(a, 0, sizeof *a);
    a->pool = a->index = a->metrics_port = a->replicas = -1;
    a->flags = json_array();
    a->command = forced;
    int cut = argc;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--")) {
            cut = i;
            a->user_args = argv + i + 1;
            a->n_user_args = argc - i - 1;
            break;
        }
    struct option opts[96] = {
        { "job-dir", required_argument, NULL, O_JOB_DIR }, { "trial", required_argument, NULL, O_TRIAL },
        { "tf-chief-name", required_argument, NULL, O_TF_CHIEF }, { "pool", required_argument, NULL, O_POOL },
        { "index", required_argument, NULL, O_INDEX }, { "study-dir", required_argument, NULL, O_STUDY_DIR },
        { "seed", required_argument, NULL, O_SEED }, { "suggest", required_argument, NULL, O_SUGGEST },
        { "backend", required_argument, NULL, O_BACKEND }, { "cpu-only", no_argument, NULL, O_CPU_ONLY },
        { "json", no_argument, NULL, O_JSON }, { "allow-unknown-fields", no_argument, NULL, O_ALLOW_UNKNOWN },
        { "overwrite", no_argument, NULL, O_OVERWRITE }, { "resume", no_argument, NULL, O_RESUME },
        { "help", no_argument, NULL, O_HELP }, { "version", no_argument, NULL, O_VERSION },
        { "partition", required_argument, NULL, O_PARTITION }, { "account", required_argument, NULL, O_ACCOUNT },
        { "time", required_argument, NULL, O_TIME }, { "detach", no_argument, NULL, O_DETACH },
        { "replica", required_argument, NULL, O_REPLICA }, { "follow", no_argument, NULL, O_FOLLOW },
        { "metrics-port", required_argument, NULL, O_METRICS_PORT }, { "qos", required_argument, NULL, O_QOS },
        { "replicas", required_argument, NULL, O_REPLICAS },
    };
    int n = 25;
    for (int i = 0; zt_plan_override_flag(i) && n < 95; i++)
        opts[n++] = (struct option) { zt_plan_override_flag(i) + 2, required_argument, NULL, O_OVERRIDE + i };
    opts[n] = (struct option) { NULL, 0, NULL, 0 };
    char **args = calloc((size_t) cut + 1, sizeof *args); /* getopt permutes: a copy */
    memcpy(args, argv, sizeof *args * (size_t) cut);
    optind = 1;
    opterr = 0;
    int c, idx, rc = 0;
    while (rc == 0 && (c = getopt_long(cut, args, "hf", opts, &idx)) != -1) {
        if (c == 'h' || c == O_HELP) {
            s_usage(stdout, "ztrain");
            exit(0);
        }
        if (c == O_VERSION) {
            printf("ztrain %s (CUDA backend: %s)\n", ZT_VERSION, zt_have_cuda_build() ? "yes" : "no");
            exit(0);
        }
        if (c == '?') {
            if (optopt)
                fprintf(stderr, "ztrain: %s needs a value (see ztrain --help)\n", args[optind - 1]);
            else
                s_unknown_option(args[optind - 1], opts);
            rc = -1;
            break;
        }
        rc = s_on_option(a, c, c == 'f' ? "follow" : opts[idx].name, optarg);
    }
    for (int i = optind; rc == 0 && i < cut; i++) {
        if (!a->command)
            a->command = args[i];
        else if (!a->file)
            a->file = args[i];
        else {
            fprintf(stderr, "ztrain: unexpected argument '%s' (user arguments go after --)\n", args[i]);
            rc = -1;
        }
    }
    free(args);
    if (rc == 0 && !a->command) {
        s_usage(stderr, "ztrain");
        rc = -1;
    }
    return rc;
}
