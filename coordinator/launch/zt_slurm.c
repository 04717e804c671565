/* A job submitted to Slurm from outside an allocation: the batch script,
 * sbatch, following the job's output and state, scancel. */
#include "launch/zt_slurm.h"
#include "base/zt_json.h"
#include "base/zt_util.h"
#include "ztrain/zt_log.h"
#include "ztrain/zt_error.h"
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ------------------------------------------------------------ the allocation */

/* Slurm's job names: no spaces, nothing a shell or #SBATCH line would split. */
static void s_job_name(const char *name, char *out, size_t size)
{
    size_t i = 0;
    for (const char *p = name && *name ? name : "ztrain"; *p && i + 1 < size; p++)
        out[i++] = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                           *p == '.' || *p == '-' || *p == '_'
                       ? *p : '_';
    out[i] = 0;
}

const char *const zt_slurm_step_options[] = {
    "-N1", "-n1",
    "--overlap",            /* replicas share the component's CPUs with each other */
    "--mem=0",
    "--export=ALL",         /* the environment ztrain made for the replica */
    "--quiet",
    "--kill-on-bad-exit=0", /* a replica's end is supervision's to handle */
    NULL
};

char *zt_slurm_sbatch_header(const zt_plan_t *plan, const zt_slurm_alloc_t *alloc, const char *extra)
{
    char *text = NULL, name[128];
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    s_job_name(plan->display_name, name, sizeof name);
    fprintf(f, "#SBATCH --job-name=%s\n", name);
    if (alloc && alloc->time)
        fprintf(f, "#SBATCH --time=%s\n", alloc->time);
    else if (plan->timeout_s > 0) /* the time limit, in whole minutes, rounded up */
        fprintf(f, "#SBATCH --time=%lld\n", (long long) ((plan->timeout_s + 59) / 60));
    if (extra)
        fputs(extra, f);
    bool first = true;
    int c = 0, present = 0;
    for (int p = 0; p < ZT_POOLS; p++)
        present += plan->pools[p].present;
    for (int p = 0; p < ZT_POOLS; p++) {
        const zt_pool_t *pool = &plan->pools[p];
        if (!pool->present)
            continue;
        if (!first)
            fprintf(f, "#SBATCH hetjob\n");
        first = false;
        int cpus = pool->machine.vcpus > 0 ? pool->machine.vcpus : 1;
        long long mem_mb = (long long) (pool->machine.memory_gb * 1024.0 / cpus);
        fprintf(f, "# workerpool%d: %d x %s\n", p, pool->replicas, pool->machine.name);
        fprintf(f, "#SBATCH --ntasks=%d --cpus-per-task=%d --mem-per-cpu=%lldM", pool->replicas, cpus,
                mem_mb > 0 ? mem_mb : 1);
        if (pool->accel_count > 0) /* a replica per node, as a machine with its accelerators */
            fprintf(f, " --ntasks-per-node=1 --gres=gpu:%d", pool->accel_count);
        if (plan->pools[1].present && plan->pools[1].elastic_min) /* a lost node shrinks the pool, not the job */
            fprintf(f, " --no-kill");
        if (alloc && alloc->partition)
            fprintf(f, " --partition=%s", alloc->partition);
        if (alloc && alloc->account)
            fprintf(f, " --account=%s", alloc->account);
        if (alloc && alloc->qos)
            fprintf(f, " --qos=%s", alloc->qos);
        fprintf(f, "\n# each replica a step: srun");
        if (present > 1)
            fprintf(f, " --het-group=%d", c);
        fprintf(f, " --nodelist=NODE --job-name=workerpool%d-INDEX", p);
        for (int i = 0; zt_slurm_step_options[i]; i++)
            fprintf(f, " %s", zt_slurm_step_options[i]);
        if (pool->accel_count > 0)
            fprintf(f, " --gres=gpu:%d", pool->accel_count);
        fprintf(f, " COMMAND\n");
        c++;
    }
    fclose(f);
    return text;
}

const char *zt_slurm_time_problem(const char *text)
{
    if (!text || !*text)
        return "it is empty";
    int colons = 0, dashes = 0;
    for (const char *p = text; *p; p++) {
        if (*p == ':')
            colons++;
        else if (*p == '-')
            dashes++;
        else if (*p < '0' || *p > '9')
            return "Slurm's time limits are minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS";
    }
    if (colons > 2 || dashes > 1 || text[0] == '-' || text[0] == ':' || strstr(text, "::") ||
        text[strlen(text) - 1] == ':' || text[strlen(text) - 1] == '-')
        return "Slurm's time limits are minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS";
    return NULL;
}

/* ------------------------------------------------------------ commands */

static int s_command(char *const *argv, char *out, size_t size, bool apart);

int zt_slurm_command(char *const *argv, char *out, size_t size)
{
    return s_command(argv, out, size, false);
}

int zt_slurm_command_apart(char *const *argv, char *out, size_t size)
{
    return s_command(argv, out, size, true);
}

bool zt_slurm_allocation_var(const char *entry)
{
    return !strncmp(entry, "SLURM_", 6) && strncmp(entry, "SLURM_CONF=", 11);
}

/* Drops this job's SLURM_* variables (SLURM_CONF stays). */
static void s_leave_allocation(void)
{
    extern char **environ;
    for (bool again = true; again;) {
        again = false;
        for (char **e = environ; *e; e++)
            if (zt_slurm_allocation_var(*e)) {
                char name[256];
                snprintf(name, sizeof name, "%.*s", (int) strcspn(*e, "="), *e);
                unsetenv(name);
                again = true;
                break;
            }
    }
}

static int s_command(char *const *argv, char *out, size_t size, bool apart)
{
    zt_slurm_cmd_t cmd;
    zt_slurm_command_start(argv, apart, &cmd);
    return zt_slurm_command_finish(&cmd, out, size);
}

void zt_slurm_command_start(char *const *argv, bool apart, zt_slurm_cmd_t *cmd)
{
    int fds[2];
    *cmd = (zt_slurm_cmd_t) { -1, -1 };
    if (pipe(fds) < 0)
        return;
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return;
    }
    if (pid == 0) {
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        close(fds[0]);
        close(fds[1]);
        if (apart)
            s_leave_allocation();
        execvp(argv[0], argv);
        fprintf(stderr, "cannot run %s: %s", argv[0], strerror(errno));
        _exit(127);
    }
    close(fds[1]);
    *cmd = (zt_slurm_cmd_t) { (int) pid, fds[0] };
}

int zt_slurm_command_finish(zt_slurm_cmd_t *cmd, char *out, size_t size)
{
    out[0] = 0;
    if (cmd->pid < 0)
        return -1;
    int fd = cmd->fd;
    pid_t pid = (pid_t) cmd->pid;
    size_t len = 0;
    char buf[4096];
    ssize_t got;
    while ((got = read(fd, buf, sizeof buf)) != 0) {
        if (got < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        for (ssize_t i = 0; i < got && len + 1 < size; i++)
            out[len++] = buf[i];
    }
    out[len] = 0;
    close(fd);
    while (len > 0 && (out[len - 1] == '\n' || out[len - 1] == '\r'))
        out[--len] = 0;
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* 'text' for sh, with every ' escaped. */
static void s_quote(FILE *f, const char *text)
{
    fputc('\'', f);
    for (const char *p = text; *p; p++)
        if (*p == '\'')
            fputs("'\\''", f);
        else
            fputc(*p, f);
    fputc('\'', f);
}

/* #SBATCH lines cannot quote: a path for them has no blanks or quotes. */
static bool s_plain_path(const char *p)
{
    return !strpbrk(p, " \t\n\"'\\");
}

int zt_slurm_min_nodes(const zt_plan_t *plan)
{
    int n = 0;
    for (int p = 0; p < ZT_POOLS; p++)
        if (plan->pools[p].present)
            n += plan->pools[p].accel_count > 0 ? plan->pools[p].replicas : 1;
    return n;
}

/* Whether the partition (alloc's, else the default one) has the nodes the
 * job takes at the least: 1, or 0 with why in err; -1 when Slurm cannot be
 * asked (the submission then decides). */
static int s_partition_fits(const zt_plan_t *plan, const zt_slurm_alloc_t *alloc, char *err, size_t errlen)
{
    char said[8192];
    char *argv[] = { "sinfo", "-h", "-o", "%P %D", NULL };
    if (zt_slurm_command(argv, said, sizeof said) != 0)
        return -1;
    char part[256] = "";
    long nodes = 0;
    for (char *save = NULL, *l = strtok_r(said, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        char name[256];
        long n;
        if (sscanf(l, "%255s %ld", name, &n) != 2)
            continue;
        size_t len = strlen(name);
        bool dflt = len > 0 && name[len - 1] == '*';
        if (dflt)
            name[len - 1] = '\0';
        if (alloc && alloc->partition ? !strcmp(name, alloc->partition) : dflt) {
            snprintf(part, sizeof part, "%s", name);
            nodes += n; /* a line per state of its nodes */
        }
    }
    if (!part[0])
        return -1; /* no such partition, or no default: sbatch says which */
    int need = zt_slurm_min_nodes(plan);
    if (nodes >= need)
        return 1;
    snprintf(err, errlen, "the job needs %d node%s at the least (a heterogeneous component per pool, each on "
             "nodes of its own, and a node per replica in a pool with accelerators), and partition %s has %ld: "
             "it could never start, so it was not submitted", need, need == 1 ? "" : "s", part, nodes);
    return 0;
}

int zt_slurm_submit(const zt_plan_t *plan, const zt_slurm_alloc_t *alloc, const char *dir,
                    char *const *run_argv, char *jobid, size_t idlen, char *err, size_t errlen)
{
    char cwd[4096];
    if (!getcwd(cwd, sizeof cwd)) {
        snprintf(err, errlen, "cannot read the working directory: %s", strerror(errno));
        return -1;
    }
    if (!s_plain_path(dir) || !s_plain_path(cwd)) {
        snprintf(err, errlen, "the job directory (%s) and the working directory (%s) may not hold blanks, "
                 "quotes or backslashes: sbatch's #SBATCH lines cannot carry them", dir, cwd);
        return -1;
    }
    if (s_partition_fits(plan, alloc, err, errlen) == 0)
        return -1;
    char *sdir = zt_strdupf("%s/slurm", dir), *script = zt_strdupf("%s/batch.sh", sdir);
    char *output = zt_strdupf("%s/batch.out", sdir), *record = zt_strdupf("%s/submission.json", sdir);
    int rc = -1;
    zt_mkdir_p(sdir);
    unlink(output); /* a job directory used again: this job's output only */
    /* Requeue-able, an elastic job too: its lost worker's node is let go
     * from its component before Slurm sees it down (so nothing requeues),
     * and the chief's lost node requeues the leader alone (its other
     * components, --no-kill, stay) */
    char *extra = zt_strdupf("#SBATCH --output=%s --open-mode=append\n#SBATCH --chdir=%s\n#SBATCH --requeue\n",
                             output, cwd);
    char *header = zt_slurm_sbatch_header(plan, alloc, extra);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    fprintf(f, "#!/bin/sh\n%s# Written by `ztrain run --backend slurm`: inside the allocation, ztrain run is the\n"
               "# coordinator, and every replica a job step on its node.\nexec", header);
    for (int i = 0; run_argv[i]; i++) {
        fputc(' ', f);
        s_quote(f, run_argv[i]);
    }
    fputc('\n', f);
    fclose(f);
    if (zt_write_file_atomic(script, text, len) != ZT_OK || chmod(script, 0700) != 0) {
        snprintf(err, errlen, "cannot write %s: %s", script, strerror(errno));
        goto out;
    }
    char said[4096];
    char *argv[] = { "sbatch", "--parsable", script, NULL };
    int st = zt_slurm_command(argv, said, sizeof said);
    if (st != 0) {
        snprintf(err, errlen, "sbatch %s: %s", script,
                 st < 0 ? "cannot run sbatch (is Slurm's client installed and on PATH?)" : said);
        goto out;
    }
    /* --parsable: "ID" or "ID;CLUSTER", after any warnings */
    char *line = strrchr(said, '\n') ? strrchr(said, '\n') + 1 : said;
    line[strcspn(line, ";")] = 0;
    long long id;
    if (!zt_parse_int(line, &id) || id <= 0) {
        snprintf(err, errlen, "sbatch %s printed no job id: %s", script, said);
        goto out;
    }
    snprintf(jobid, idlen, "%lld", id);
    char now[40];
    zt_wall_iso(now, sizeof now);
    json_t *rec = json_pack("{s:s, s:s, s:s, s:s, s:o, s:b}", "slurmJobId", jobid, "submitted", now, "script",
                            script, "output", output, "submitter", zt_json_this_process(),
                            "cancelRequested", 0);
    char *js = json_dumps(rec, JSON_INDENT(2));
    zt_write_file_atomic(record, js, strlen(js));
    free(js);
    json_decref(rec);
    rc = 0;
out:
    free(text);
    free(header);
    free(extra);
    free(sdir);
    free(script);
    free(output);
    free(record);
    return rc;
}

const char *zt_slurm_job_id(int component)
{
    if (component < 0)
        return getenv("SLURM_JOB_ID");
    static const char *const spellings[] = { "SLURM_JOB_ID", "SLURM_JOBID" };
    for (int i = 0; i < 2; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s_HET_GROUP_%d", spellings[i], component);
        const char *id = getenv(name);
        if (id && *id)
            return id;
    }
    return NULL;
}

long zt_slurm_restart_count(void)
{
    const char *n = getenv("SLURM_RESTART_COUNT");
    long v = n ? strtol(n, NULL, 10) : 0;
    return v > 0 ? v : 0;
}

char *zt_slurm_submitted_id(const char *dir)
{
    char *path = zt_strdupf("%s/slurm/submission.json", dir);
    /* a record this user's submission wrote, and no one else's: a planted one
     * would have cancel scancel a job of a stranger's choosing */
    struct stat st;
    bool exists = lstat(path, &st) == 0;
    bool own = exists && S_ISREG(st.st_mode) && st.st_uid == geteuid() && !(st.st_mode & (S_IWGRP | S_IWOTH));
    if (exists && !own)
        zt_warn("%s is not a record of this user's: ignored", path);
    json_t *doc = own ? json_load_file(path, 0, NULL) : NULL;
    free(path);
    const char *id = json_string_value(json_object_get(doc, "slurmJobId"));
    char *out = id ? strdup(id) : NULL;
    json_decref(doc);
    return out;
}

int zt_slurm_query(const char *id, char *state, size_t slen, char *reason, size_t rlen)
{
    char said[2048];
    char *argv[] = { "squeue", "-h", "-j", (char *) id, "-o", "%T|%r", NULL };
    int st = zt_slurm_command(argv, said, sizeof said);
    state[0] = reason[0] = 0;
    if (st != 0) {
        if (strstr(said, "Invalid job id"))
            return 0;
        snprintf(state, slen, "%s", st < 0 ? "cannot run squeue" : said);
        return -1;
    }
    if (!said[0])
        return 0;
    said[strcspn(said, "\n")] = 0; /* a heterogeneous job: a line per component, the first is the job's */
    char *bar = strchr(said, '|');
    if (bar) {
        *bar = 0;
        snprintf(reason, rlen, "%s", bar + 1);
    }
    snprintf(state, slen, "%s", said);
    return 1;
}

bool zt_slurm_state_final(const char *s)
{
    const char *final[] = { "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "OUT_OF_MEMORY", "BOOT_FAIL",
                            "DEADLINE", "REVOKED", "SPECIAL_EXIT" };
    for (size_t i = 0; i < sizeof final / sizeof *final; i++)
        if (!strcmp(s, final[i]))
            return true;
    return false;
}

int zt_slurm_cancel(const char *id, char *err, size_t errlen)
{
    char said[400];
    char *argv[] = { "scancel", (char *) id, NULL };
    int st = zt_slurm_command(argv, said, sizeof said);
    if (st != 0) {
        snprintf(err, errlen, "scancel %s: %s", id, st < 0 ? "cannot run scancel" : said);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ following */

static volatile sig_atomic_t s_interrupts;

static void s_on_interrupt(int sig)
{
    (void) sig;
    s_interrupts++;
}

/* Copies what was added to path since *at to out. */
static void s_stream(const char *path, long *at, FILE *out)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    if (fseek(f, *at, SEEK_SET) == 0) {
        char buf[8192];
        size_t got;
        while ((got = fread(buf, 1, sizeof buf, f)) > 0) {
            fwrite(buf, 1, got, out);
            *at += (long) got;
        }
        fflush(out);
    }
    fclose(f);
}

/* Why Slurm keeps a job pending, for people; *never: the reason is one
 * that no wait ends (a limit of the partition the job is over). */
static const char *s_pending_hint(const char *reason, bool *never)
{
    static const struct { const char *reason, *hint; bool never; } s_reasons[] = {
        { "Resources", "waiting for nodes to free up", false },
        { "Priority", "jobs of higher priority go first", false },
        { "PartitionDown", "its partition is down", false },
        { "ReqNodeNotAvail", "nodes it needs are not available", false },
        { "BeginTime", "its start time has not come", false },
        { "Dependency", "waiting for the jobs it depends on", false },
        { "PartitionNodeLimit", "it asks for more nodes than its partition allows", true },
        { "PartitionTimeLimit", "its time limit is over its partition's", true },
        { "PartitionConfig", "its partition cannot take it", true },
        { "BadConstraints", "no node meets its constraints", true },
    };
    *never = false;
    for (size_t i = 0; i < sizeof s_reasons / sizeof *s_reasons; i++)
        if (!strcmp(reason, s_reasons[i].reason)) {
            *never = s_reasons[i].never;
            return s_reasons[i].hint;
        }
    return "";
}

/* While the job is pending: its reason when it changes, and again every
 * minute; a reason no wait ends cancels the job. True when it did. */
static bool s_report_pending(const char *id, const char *state, const char *reason, bool ran, char *last,
                             size_t last_size, int64_t *said_ms, FILE *out)
{
    int64_t now = zt_now_ms();
    bool never;
    const char *hint = s_pending_hint(reason, &never);
    if (ran && !never) /* pending again after it ran: requeued */
        hint = "requeued (a preemption, scontrol requeue or a lost node): it resumes from its checkpoints when "
               "Slurm runs it again";
    char key[512], err[512];
    snprintf(key, sizeof key, "%s (%s)", state, reason);
    if (never) {
        fprintf(out, "ztrain: Slurm job %s is %s: %s, so it can never start; cancelling it\n", id, key, hint);
        if (zt_slurm_cancel(id, err, sizeof err) != 0)
            fprintf(out, "ztrain: %s\n", err);
        return true;
    }
    if (strcmp(key, last) || now - *said_ms >= 60000) {
        fprintf(out, "ztrain: Slurm job %s is %s%s%s\n", id, key, *hint ? ": " : "", hint);
        snprintf(last, last_size, "%s", key);
        *said_ms = now;
    }
    return false;
}

const char *zt_slurm_follow(const char *dir, const char *id, long from, FILE *out)
{
    char pending[512] = "";
    int64_t pending_said = 0;
    bool unschedulable = false, ran = false;
    static char state[256];
    char *output = zt_strdupf("%s/slurm/batch.out", dir), reason[256], err[512];
    struct sigaction sa = { .sa_handler = s_on_interrupt }, old_int, old_term;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    s_interrupts = 0;
    int cancelled_at = 0;
    long at = from;
    int64_t last_ask = 0, lost_since = 0, gone_since = 0;
    const char *end = NULL;
    while (!end) {
        if (s_interrupts && !cancelled_at) {
            cancelled_at = s_interrupts;
            fprintf(out, "ztrain: cancelling Slurm job %s (interrupt again to stop following; the job "
                         "is cancelled either way)\n", id);
            if (zt_slurm_cancel(id, err, sizeof err) != 0)
                fprintf(out, "ztrain: %s\n", err);
        }
        else if (cancelled_at && s_interrupts > cancelled_at) {
            state[0] = 0;
            end = state;
            break;
        }
        s_stream(output, &at, out);
        int64_t now = zt_now_ms();
        if (now - last_ask >= 1000) {
            last_ask = now;
            int known = zt_slurm_query(id, state, sizeof state, reason, sizeof reason);
            if (known == 0) { /* Slurm has forgotten it: it ended a while ago (or never was) */
                gone_since = gone_since ? gone_since : now;
                if (now - gone_since >= 2000) { /* cancelled by us while pending: Slurm forgets it at once */
                    snprintf(state, sizeof state, "%s", cancelled_at ? "CANCELLED" : "ENDED");
                    end = state;
                }
            }
            else if (known > 0) {
                gone_since = 0;
                bool lost = !strcmp(state, "NODE_FAIL") || !strcmp(state, "PREEMPTED");
                /* a lost node or preemption requeues the job unless it cannot be */
                lost_since = lost ? (lost_since ? lost_since : now) : 0;
                if (zt_slurm_state_final(state) || (lost && now - lost_since >= 10000))
                    end = state;
                else if (!strcmp(state, "PENDING") && !unschedulable)
                    unschedulable = s_report_pending(id, state, reason, ran, pending, sizeof pending, &pending_said,
                                                     out);
                ran = ran || !strcmp(state, "RUNNING");
            }
        }
        if (!end)
            usleep(200 * 1000);
    }
    usleep(300 * 1000); /* the output's last writes */
    s_stream(output, &at, out);
    if (unschedulable && end[0])
        end = "UNSCHEDULABLE";
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    free(output);
    return end;
}
