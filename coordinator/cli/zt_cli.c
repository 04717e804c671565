#include "cli/zt_cli.h"
#include "cli/zt_cli_args.h"
#include "launch/zt_layout.h"
#include "chief/zt_coord.h"
#include "plan/zt_cuda_probe.h"
#include "formats/zt_format.h"
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

/* Whether the job runs on this machine's GPUs (not a cluster's nodes). */
static bool s_gpus_here(const zt_cli_args_t *a)
{
    return strcmp(a->backend ? a->backend : zt_knob_str(ZT_KNOB_BACKEND), "slurm") != 0;
}

static zt_plan_t *s_load(zt_cli_args_t *a, zt_diag_t *diag, bool check_gpus)
{
    if (!a->file && json_array_size(a->flags) == 0) {
        fprintf(stderr, "ztrain %s: give a job file, or --worker-pool-spec flags\n", a->command);
        return NULL;
    }
    zt_plan_opts_t opts = { a->file, a->flags, a->user_args, a->n_user_args, a->tf_chief, NULL,
                            a->allow_unknown, NULL };
    zt_plan_t *plan = NULL;
    zt_format_load(&opts, &plan, diag);
    if (plan && check_gpus)
        zt_plan_check_gpus(plan, zt_gpu_count(), a->cpu_only, diag);
    zt_diag_print(diag, stderr);
    if (plan && zt_diag_errors(diag) > 0)
        zt_plan_destroy(&plan);
    if (!plan)
        fprintf(stderr, "ztrain: %d error%s; nothing was started\n", zt_diag_errors(diag),
                zt_diag_errors(diag) == 1 ? "" : "s");
    return plan;
}

/* $ZT_JOBS_DIR/NAME-YYYYmmdd-HHMMSS-PID. NAME is the displayName made a
 * safe folder name: letters, digits, '.', '_' and '-' kept (at most 64,
 * no leading '.'), anything else '_', so that no name leaves the jobs
 * folder ("../../x" is "_._.._x") or hides in it. */
static char *s_default_dir(const char *display_name)
{
    char name[65];
    size_t n = 0;
    for (const char *c = display_name ? display_name : ""; *c && n < sizeof name - 1; c++) {
        bool ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                  *c == '_' || *c == '-' || (*c == '.' && n > 0);
        name[n++] = ok ? *c : '_';
    }
    name[n] = '\0';
    if (!n)
        snprintf(name, sizeof name, "job");
    char stamp[32];
    time_t t = time(NULL);
    struct tm tm;
    localtime_r(&t, &tm);
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    return zt_strdupf("%s/%s-%s-%d", zt_knob_str(ZT_KNOB_JOBS_DIR), name, stamp, (int) getpid());
}

static char *s_job_dir(zt_cli_args_t *a, const zt_plan_t *plan)
{
    char *dir;
    if (a->job_dir)
        dir = strdup(a->job_dir);
    else
        dir = s_default_dir(plan->display_name);
    char why[1024];
    if (zt_mkdir_trusted(dir, why, sizeof why) != ZT_OK) { /* before anything in it is read */
        fprintf(stderr, "ztrain: the job directory: %s\n", why);
        free(dir);
        return NULL;
    }
    char real[PATH_MAX];
    if (realpath(dir, real)) {
        free(dir);
        dir = strdup(real);
    }
    return dir;
}

/* A non-terminal job.json whose coordinator still lives means the directory is in use. */
static bool s_dir_in_use(const char *dir, json_t *doc)
{
    const char *state = json_string_value(json_object_get(doc, "state"));
    json_t *rec = json_object_get(doc, "coordinatorProcess");
    int pid = (int) json_integer_value(rec ? json_object_get(rec, "pid") : json_object_get(doc, "coordinatorPid"));
    /* a record names the process exactly; without one (an older job.json), its pid */
    int alive = rec ? zt_json_process_alive(rec) : pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
    const char *alloc = json_string_value(json_object_get(doc, "slurmJobId"));
    if (alloc && zt_slurm_job_id(-1) && !strcmp(alloc, zt_slurm_job_id(-1)))
        return false; /* this allocation's earlier run: Slurm requeued it */
    bool busy = state && !zt_state_final(state) && alive != 0 && pid != getpid();
    if (busy)
        fprintf(stderr, "ztrain: %s is the directory of a job still running (coordinator "
                        "pid %d); choose another --job-dir\n", dir, pid);
    return busy;
}

/* Removes what a job left in dir (job.json, its logs and config, its
 * checkpoints under base), so that the next one starts afresh. */
static void s_clear_job(const char *dir, const zt_plan_t *plan)
{
    char *p = zt_strdupf("%s/job.json", dir);
    unlink(p);
    free(p);
    const char *sub[] = { "replica-logs", "config", "slurm", "ps-snapshots" };
    for (int i = 0; i < 4; i++) {
        p = zt_strdupf("%s/%s", dir, sub[i]);
        zt_rm_tree(p);
        free(p);
    }
    p = zt_strdupf("%s/checkpoints", plan->base_output_dir ? plan->base_output_dir : dir);
    int n = zt_ckpt_remove_all(p);
    if (n > 0)
        zt_info("--overwrite: removed %d checkpoint%s of the earlier job from %s", n, n == 1 ? "" : "s", p);
    free(p);
}

/* A job directory may hold a job already: the same one (the same resolved
 * spec, recorded in job.json) is resumed from its checkpoints; another one
 * is refused unless --overwrite (start afresh) or --resume (continue it). */
static bool s_dir_ok(zt_cli_args_t *a, const char *dir, const zt_plan_t *plan)
{
    char *id = zt_slurm_job_id(-1) ? NULL : zt_slurm_submitted_id(dir), sstate[256], reason[256];
    if (id && zt_slurm_query(id, sstate, sizeof sstate, reason, sizeof reason) > 0 && !zt_slurm_state_final(sstate)) {
        fprintf(stderr, "ztrain: %s is the directory of Slurm job %s, still %s; choose another --job-dir, or "
                        "cancel it first (ztrain cancel %s)\n", dir, id, sstate, dir);
        free(id);
        return false;
    }
    free(id);
    char *path = zt_strdupf("%s/job.json", dir);
    json_t *doc = json_load_file(path, 0, NULL);
    free(path);
    if (!doc)
        return true;
    bool ok = !s_dir_in_use(dir, doc);
    json_t *mine = zt_plan_to_json(plan), *theirs = json_object_get(doc, "plan");
    char diff[400];
    if (ok && zt_json_diff(mine, theirs, diff, sizeof diff)) {
        const char *name = json_string_value(json_object_get(doc, "name"));
        const char *state = json_string_value(json_object_get(doc, "state"));
        const char *src = json_string_value(json_object_get(theirs, "source"));
        if (a->overwrite)
            s_clear_job(dir, plan);
        else if (a->resume)
            zt_warn("--resume: continuing job '%s' in %s with a different spec (%s)", name ? name : "?", dir,
                    diff);
        else {
            fprintf(stderr,
                    "ztrain: %s holds another job: '%s' (%s, from %s), not this one '%s' (from %s); they "
                    "differ at %s (the new job's vs the earlier one's). Its checkpoints would be restored "
                    "into this job. Give --overwrite to start afresh there (its job.json, logs and "
                    "checkpoints are removed), --resume to continue it with this spec, or another "
                    "--job-dir.\n",
                    dir, name ? name : "?", state ? state : "?", src ? src : "?", plan->display_name,
                    plan->source, diff);
            ok = false;
        }
    }
    else if (ok && a->overwrite)
        s_clear_job(dir, plan);
    else if (ok) {
        const char *state = json_string_value(json_object_get(doc, "state"));
        zt_info("resuming job '%s' in %s (recorded %s there): the same spec, so its checkpoints are restored; "
                "--overwrite starts afresh", plan->display_name, dir, state ? state : "started");
    }
    json_decref(mine);
    json_decref(doc);
    return ok;
}

/* The last line of `ztrain run`: the end state, how long, and what the
 * primary replica last reported (its metrics in job.json). */
static void s_print_end(zt_job_state_t st, const char *dir, int64_t ms)
{
    char *path = zt_strdupf("%s/job.json", dir), metrics[512] = "";
    json_t *doc = json_load_file(path, 0, NULL);
    json_t *primary = json_object_get(json_object_get(doc, "metrics"), "workerpool0-0"), *m;
    const char *name;
    json_object_foreach(primary, name, m)
    {
        double v = json_number_value(json_object_get(m, "value"));
        /* 16562, not 1.656e+04: a figure reads whole from 10^4 to 10^15 */
        snprintf(metrics + strlen(metrics), sizeof metrics - strlen(metrics), fabs(v) >= 1e4 && fabs(v) < 1e15
                 ? "%s%s %.0f" : "%s%s %.4g", metrics[0] ? ", " : "; workerpool0-0: ", zt_text_safe(name, 0), v);
    }
    fprintf(stderr, "ztrain: job %s after %.1f s%s (%s)\n", zt_job_state_name(st), (double) ms / 1000.0,
            metrics, path);
    json_decref(doc);
    free(path);
}

/* The `ztrain run` that the batch script runs inside the allocation: this
 * one's arguments, the spec copied beside the script (the submit host's
 * file may change or be out of the nodes' sight), the job directory
 * absolute. Heap, NULL-terminated. */
static char **s_inner_argv(const zt_cli_args_t *a, const char *dir, char *err, size_t errlen)
{
    char **v = calloc((size_t) (32 + 2 * json_array_size(a->flags) + (size_t) a->n_user_args), sizeof *v);
    int n = 0;
    v[n++] = zt_strdupf("%s/ztrain", zt_exe_dir());
    v[n++] = strdup("run");
    if (a->file) {
        size_t len;
        char *text = zt_read_file(a->file, &len);
        const char *base = strrchr(a->file, '/') ? strrchr(a->file, '/') + 1 : a->file;
        char *sdir = zt_strdupf("%s/slurm", dir), *copy = zt_strdupf("%s/%s", sdir, base);
        int made = zt_mkdir_p(sdir);
        free(sdir);
        if (!text || made != ZT_OK || zt_write_file_atomic(copy, text, len) != ZT_OK) {
            snprintf(err, errlen, "cannot copy %s to %s: %s", a->file, copy, strerror(errno));
            free(text);
            free(copy);
            for (int i = 0; i < n; i++)
                free(v[i]);
            free(v);
            return NULL;
        }
        free(text);
        v[n++] = copy;
    }
    v[n++] = strdup("--job-dir");
    v[n++] = strdup(dir);
    v[n++] = strdup("--backend");
    v[n++] = strdup("slurm");
    if (a->trial)
        v[n++] = zt_strdupf("--trial=%s", a->trial);
    if (a->tf_chief)
        v[n++] = zt_strdupf("--tf-chief-name=%s", a->tf_chief);
    if (a->cpu_only)
        v[n++] = strdup("--cpu-only");
    if (a->allow_unknown)
        v[n++] = strdup("--allow-unknown-fields");
    if (a->resume)
        v[n++] = strdup("--resume");
    if (a->metrics_port >= 0)
        v[n++] = zt_strdupf("--metrics-port=%d", a->metrics_port);
    size_t i;
    json_t *f;
    json_array_foreach(a->flags, i, f)
        v[n++] = zt_strdupf("%s=%s", json_string_value(json_array_get(f, 0)), json_string_value(json_array_get(f, 1)));
    if (a->n_user_args > 0) {
        v[n++] = strdup("--");
        for (int k = 0; k < a->n_user_args; k++)
            v[n++] = strdup(a->user_args[k]);
    }
    v[n] = NULL;
    return v;
}

/* run --backend slurm outside an allocation: submit, then follow (or not). */
static int s_submit_slurm(zt_cli_args_t *a, const zt_plan_t *plan, const char *dir)
{
    char err[4096], id[64];
    char **argv = s_inner_argv(a, dir, err, sizeof err);
    zt_slurm_alloc_t alloc = { a->partition, a->account, a->qos, a->time };
    if (plan->spot && !a->partition && !a->qos)
        fprintf(stderr, "ztrain: warning: scheduling.strategy asks for spot capacity, but no --partition or --qos "
                        "names a preemptible one: the job goes to Slurm's default partition\n");
    int rc = argv ? zt_slurm_submit(plan, &alloc, dir, argv, id, sizeof id, err, sizeof err) : -1;
    for (int i = 0; argv && argv[i]; i++)
        free(argv[i]);
    free(argv);
    if (rc != 0) {
        fprintf(stderr, "ztrain: the job was not submitted: %s\n", err);
        return ZT_CLI_FAILED;
    }
    if (a->detach) {
        printf("%s\n", id);
        fprintf(stderr, "ztrain: submitted job '%s' as Slurm job %s; job directory %s\n"
                        "  follow:  ztrain status %s   (its output: %s/slurm/batch.out)\n"
                        "  cancel:  ztrain cancel %s\n", plan->display_name, id, dir, dir, dir, dir);
        return ZT_CLI_OK;
    }
    fprintf(stderr, "ztrain: submitted job '%s' as Slurm job %s; following its output (Ctrl-C cancels "
                    "the job; ztrain run --detach returns at once)\n", plan->display_name, id);
    const char *end = zt_slurm_follow(dir, id, 0, stderr);
    char buf[64];
    const char *st = zt_cli_job_state(dir, buf, sizeof buf);
    if (!end[0]) {
        fprintf(stderr, "ztrain: stopped following Slurm job %s, which is being cancelled (ztrain status %s)\n",
                id, dir);
        return ZT_CLI_CANCELLED;
    }
    if (zt_state_final(st))
        return zt_state_exit_code(st);
    if (!strcmp(end, "UNSCHEDULABLE"))
        return ZT_CLI_FAILED; /* said why while following */
    if (!strcmp(end, "CANCELLED")) {
        fprintf(stderr, "ztrain: Slurm job %s was cancelled%s\n", id, st ? "" : " before the job started");
        return ZT_CLI_CANCELLED;
    }
    fprintf(stderr, "ztrain: Slurm job %s ended %s %s; see %s/slurm/batch.out\n", id, end,
            st ? "while the job was still running (its coordinator was killed)" : "before ztrain's coordinator "
            "started", dir);
    return ZT_CLI_FAILED;
}

static int s_cmd_tune(zt_cli_args_t *a);

/* A job file its service ran as a tuning job (a legacy config with
 * trainingInput.hyperparameters, as gcloud did): `run` runs its study, in
 * --job-dir. why: what makes it one. */
static int s_run_as_study(zt_cli_args_t *a, const char *why)
{
    if (json_array_size(a->flags) || a->n_user_args || a->trial || a->resume) {
        fprintf(stderr, "ztrain run: %s is a study (%s): override flags, -- ARGS, --trial and --resume do not "
                        "apply to it (run it again in the same --job-dir to go on with it)\n", a->file, why);
        return ZT_CLI_USAGE;
    }
    a->study_dir = a->job_dir;
    fprintf(stderr, "ztrain: %s: it runs as a study of its trials (%s)\n", a->file, why);
    return s_cmd_tune(a);
}

static int s_cmd_run(zt_cli_args_t *a)
{
    const char *study = a->file ? zt_format_runs_as_study(a->file) : NULL;
    if (study)
        return s_run_as_study(a, study);
    zt_diag_t *diag = zt_diag_new();
    zt_plan_t *plan = s_load(a, diag, s_gpus_here(a));
    zt_diag_destroy(&diag);
    if (!plan)
        return ZT_CLI_USAGE;
    if (a->overwrite && a->resume) {
        fprintf(stderr, "ztrain run: --overwrite and --resume exclude each other\n");
        zt_plan_destroy(&plan);
        return ZT_CLI_USAGE;
    }
    if (plan->base_output_dir && plan->base_output_dir[0] != '/') {
        char real[PATH_MAX];
        if (getcwd(real, sizeof real)) {
            char *abs = zt_strdupf("%s/%s", real, plan->base_output_dir);
            free(plan->base_output_dir);
            plan->base_output_dir = abs;
        }
    }
    char *dir = s_job_dir(a, plan), why_base[1024];
    if (dir && plan->base_output_dir && zt_mkdir_trusted(plan->base_output_dir, why_base, sizeof why_base) != ZT_OK) {
        fprintf(stderr, "ztrain: baseOutputDirectory: %s\n", why_base);
        free(dir);
        dir = NULL;
    }
    if (dir && zt_format_folders(plan, ZT_DIR_MAKE, why_base, sizeof why_base) != 0) { /* before the job starts */
        fprintf(stderr, "ztrain: %s\n", why_base);
        free(dir);
        dir = NULL;
    }
    if (!dir || !s_dir_ok(a, dir, plan)) {
        free(dir);
        zt_plan_destroy(&plan);
        return ZT_CLI_USAGE;
    }
    if (a->cpu_only && zt_plan_check_gpus(plan, 1 << 30, true, NULL) > 0)
        zt_warn("--cpu-only: running without GPUs although the job asks for accelerators");
    if (!s_gpus_here(a) && !zt_slurm_job_id(-1)) { /* outside an allocation: make one */
        int rc = s_submit_slurm(a, plan, dir);
        free(dir);
        zt_plan_destroy(&plan);
        return rc;
    }
    if ((a->detach || a->time) && s_gpus_here(a))
        zt_warn("--detach and --time apply to --backend slurm only; ignored");
    char why[256];
    zt_backend_t *backend = zt_backend_new(a->backend, why, sizeof why);
    if (!backend) {
        fprintf(stderr, "ztrain: --backend: %s\n", why);
        free(dir);
        zt_plan_destroy(&plan);
        return ZT_CLI_USAGE;
    }
    zt_coord_opts_t opts = { dir, a->trial, a->cpu_only, true, a->metrics_port };
    zt_coord_t *coord = zt_coord_new(&plan, &backend, &opts);
    if (!coord) {
        if (backend)
            backend->destroy(&backend);
        zt_plan_destroy(&plan);
        free(dir);
        return ZT_CLI_FAILED;
    }
    int64_t t0 = zt_now_ms();
    zt_job_state_t st = zt_coord_run(coord);
    zt_coord_destroy(&coord);
    s_print_end(st, dir, zt_now_ms() - t0);
    free(dir);
    return zt_state_exit_code(zt_job_state_name(st));
}

static int s_cmd_validate(zt_cli_args_t *a)
{
    zt_diag_t *diag = zt_diag_new();
    zt_plan_t *plan = s_load(a, diag, s_gpus_here(a));
    zt_diag_destroy(&diag);
    if (!plan)
        return ZT_CLI_USAGE;
    char why[1024];
    if (zt_format_folders(plan, ZT_DIR_CHECK, why, sizeof why) != 0) {
        fprintf(stderr, "ztrain validate: %s\n", why);
        zt_plan_destroy(&plan);
        return ZT_CLI_USAGE;
    }
    if (!strcasecmp(zt_knob_str(ZT_KNOB_SECURITY), "off")) /* as loudly as run says it */
        fprintf(stderr, "ztrain validate: ZT_SECURITY=off: the job's sockets would be neither authenticated nor "
                        "encrypted; anyone who can reach its ports could read its model and pose as its "
                        "replicas (for benchmarks only)\n");
    if (a->json) {
        json_t *j = zt_plan_to_json(plan);
        char *t = json_dumps(j, JSON_INDENT(2));
        printf("%s\n", t);
        free(t);
        json_decref(j);
    }
    else
        zt_plan_print(plan, stdout);
    const char *backend = a->backend ? a->backend : zt_knob_str(ZT_KNOB_BACKEND);
    if (!a->json && !strcmp(backend, "slurm")) { /* what the allocation would be */
        zt_slurm_alloc_t alloc = { a->partition, a->account, a->qos, a->time };
        char *h = zt_slurm_sbatch_header(plan, &alloc, NULL);
        printf("\nSlurm allocation (sbatch), one heterogeneous component per pool, and the srun\n"
               "step of each replica:\n%s", h);
        free(h);
    }
    zt_plan_destroy(&plan);
    return ZT_CLI_OK;
}

static int s_cmd_env(zt_cli_args_t *a)
{
    zt_diag_t *diag = zt_diag_new();
    zt_plan_t *plan = s_load(a, diag, false);
    zt_diag_destroy(&diag);
    if (!plan)
        return ZT_CLI_USAGE;
    int rc = ZT_CLI_USAGE;
    if (a->pool < 0 || a->pool >= ZT_POOLS || !plan->pools[a->pool].present)
        fprintf(stderr, "ztrain env: --pool %d: the job has no such pool (pools present:%s%s%s%s)\n",
                a->pool, plan->pools[0].present ? " 0" : "", plan->pools[1].present ? " 1" : "",
                plan->pools[2].present ? " 2" : "", plan->pools[3].present ? " 3" : "");
    else if (a->index < 0 || a->index >= plan->pools[a->pool].replicas)
        fprintf(stderr, "ztrain env: --index %d: pool %d has %d replica%s\n", a->index, a->pool,
                plan->pools[a->pool].replicas, plan->pools[a->pool].replicas == 1 ? "" : "s");
    else {
        char cwd[PATH_MAX];
        const char *dir = a->job_dir ? a->job_dir : getcwd(cwd, sizeof cwd);
        zt_layout_t layout = { 0 };
        zt_placement_t placement;
        char why[256];
        zt_backend_t *backend = zt_backend_new(a->backend, why, sizeof why);
        if (!backend)
            fprintf(stderr, "ztrain env: --backend: %s\n", why);
        else if (backend->place(backend, plan, a->cpu_only, &placement) == ZT_OK &&
                 zt_layout_init(&layout, plan, &placement, dir ? dir : ".", a->trial) == ZT_OK) {
            json_t *env = zt_format_env(&layout, a->pool, a->index);
            size_t i;
            json_t *v;
            json_array_foreach(env, i, v)
                printf("%s=%s\n", json_string_value(json_array_get(v, 0)),
                       json_string_value(json_array_get(v, 1)));
            json_decref(env);
            rc = ZT_CLI_OK;
        }
        zt_layout_fini(&layout);
        if (backend)
            backend->destroy(&backend);
    }
    zt_plan_destroy(&plan);
    return rc;
}

static int s_cmd_tune(zt_cli_args_t *a)
{
    if (!a->file) {
        fprintf(stderr, "ztrain tune: give a study file (a HyperparameterTuningJob spec)\n");
        return ZT_CLI_USAGE;
    }
    char *dir = a->study_dir ? strdup(a->study_dir) : s_default_dir("study");
    char *me = zt_strdupf("%s/ztrain", zt_exe_dir());
    zt_study_opts_t o = { a->file, dir, me, (uint64_t) (a->seed ? a->seed : 1), a->cpu_only, a->backend,
                          a->allow_unknown, a->overwrite };
    zt_diag_t *diag = zt_diag_new();
    zt_study_t *study = zt_study_new(&o, diag);
    zt_diag_print(diag, stderr);
    int rc;
    if (!study) {
        fprintf(stderr, "ztrain: %d error%s; nothing was started\n", zt_diag_errors(diag),
                zt_diag_errors(diag) == 1 ? "" : "s");
        rc = ZT_CLI_USAGE;
    }
    else if (a->suggest > 0) {
        char *text = zt_study_suggest_json(study, a->suggest);
        printf("%s\n", text);
        free(text);
        rc = ZT_CLI_OK;
    }
    else
        rc = zt_study_run(study);
    zt_study_destroy(&study);
    zt_diag_destroy(&diag);
    free(me);
    free(dir);
    return rc;
}

int zt_cli_main(int argc, char **argv, const char *command)
{
    zt_private_files(); /* the job's folder, logs and checkpoints are the user's alone */
    zt_log_init("coordinator", 0);
    zt_cli_args_t a;
    if (zt_cli_parse(argc, argv, command, &a) < 0) {
        json_decref(a.flags);
        return ZT_CLI_USAGE;
    }
    int rc;
    char why[512];
    bool takes_dir = !strcmp(a.command, "status") || !strcmp(a.command, "cancel") || !strcmp(a.command, "logs") ||
                     !strcmp(a.command, "wait") || !strcmp(a.command, "scale");
    if (takes_dir && !a.job_dir && !a.study_dir && a.file) {
        a.job_dir = a.file; /* ztrain status DIR */
        a.file = NULL;
    }
    if (strcmp(a.command, "status") && zt_knobs_check(why, sizeof why) != ZT_OK) {
        fprintf(stderr, "ztrain: %s\n", why);
        json_decref(a.flags);
        return ZT_CLI_USAGE;
    }
    if (a.backend && !zt_backend_known(a.backend, why, sizeof why)) { /* every command refuses it alike */
        fprintf(stderr, "ztrain %s: --backend: %s\n", a.command, why);
        json_decref(a.flags);
        return ZT_CLI_USAGE;
    }
    if (!strcmp(a.command, "run"))
        rc = s_cmd_run(&a);
    else if (!strcmp(a.command, "validate"))
        rc = s_cmd_validate(&a);
    else if (!strcmp(a.command, "env"))
        rc = s_cmd_env(&a);
    else if (!strcmp(a.command, "status"))
        rc = zt_cli_status(a.job_dir, a.study_dir, a.json);
    else if (!strcmp(a.command, "cancel"))
        rc = zt_cli_cancel(a.job_dir);
    else if (!strcmp(a.command, "scale"))
        rc = zt_cli_scale(a.job_dir, a.pool, a.replicas);
    else if (!strcmp(a.command, "tune"))
        rc = s_cmd_tune(&a);
    else if (!strcmp(a.command, "list"))
        rc = zt_cli_list(a.file, a.json);
    else if ((!strcmp(a.command, "logs") || !strcmp(a.command, "wait")) && !(a.job_dir || a.study_dir)) {
        fprintf(stderr, "ztrain %s: give the job directory (ztrain %s DIR)\n", a.command, a.command);
        rc = ZT_CLI_USAGE;
    }
    else if (!strcmp(a.command, "logs"))
        rc = zt_cli_logs(a.job_dir, a.replica, a.follow);
    else if (!strcmp(a.command, "wait"))
        rc = zt_cli_wait(a.job_dir ? a.job_dir : a.study_dir);
    else {
        const char *near = zt_doc_nearest(a.command, zt_cli_commands);
        fprintf(stderr, "ztrain: unknown command '%s'%s%s%s (run, validate, env, status, cancel, scale, logs, "
                        "wait, list, tune; see --help)\n", a.command, near ? "; did you mean '" : "", near ? near : "",
                near ? "'?" : "");
        rc = ZT_CLI_USAGE;
    }
    json_decref(a.flags);
    return rc;
}
