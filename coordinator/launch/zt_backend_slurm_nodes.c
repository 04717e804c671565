/* The Slurm backend's nodes over a job's life: a lost node found, dropped
 * from the allocation, and regained (an allocation of its own), the job
 * requeued or given up, and why the allocation ends. */
#include "launch/zt_backend_slurm_int.h"
#include "launch/zt_slurm.h"
#include "plan/zt_state.h"
#include "base/zt_util.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_log.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* A node is lost when Slurm marks it down or failed, or not responding
 * (the '*' sinfo appends to its state). */
int zt_slurm_be_node_lost(zt_backend_t *self, const zt_handle_t *h, char *why, size_t len)
{
    zt_slurm_be_t *ctx = self->ctx;
    char list[4096] = "";
    for (int i = 0; i < ctx->n; i++) {
        if (h && ctx->reps[i].handle != h)
            continue;
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", list[0] ? "," : "", ctx->reps[i].node);
    }
    if (!list[0])
        return 0;
    char *cmd = zt_strdupf("sinfo -h -N -n '%s' -o '%%N|%%T|%%E' 2>/dev/null", list);
    FILE *p = popen(cmd, "r");
    free(cmd);
    if (!p)
        return 0;
    char line[512];
    int lost = 0;
    why[0] = 0;
    while (fgets(line, sizeof line, p)) {
        line[strcspn(line, "\r\n")] = 0;
        char *state = strchr(line, '|'), *reason = state ? strchr(state + 1, '|') : NULL;
        if (!reason)
            continue;
        *state++ = 0;
        *reason++ = 0;
        size_t sl = strlen(state);
        bool gone = (sl && state[sl - 1] == '*') || !strncmp(state, "down", 4) || !strncmp(state, "fail", 4);
        if (gone && !strstr(why, line)) {
            bool down = !strncmp(state, "down", 4) || !strncmp(state, "fail", 4);
            snprintf(why + strlen(why), len - strlen(why), "%snode %s is %s (Slurm: %s%s%s)", lost ? "; " : "", line,
                     down ? "down" : "not responding", state, strcmp(reason, "none") ? ", " : "",
                     strcmp(reason, "none") ? reason : "");
            lost++;
        }
    }
    pclose(p);
    return lost > 0;
}

void zt_slurm_be_requeue(zt_backend_t *self)
{
    (void) self;
    const char *job = zt_slurm_job_id(-1);
    char said[512];
    if (!job || zt_slurm_be_allocation_ending()) /* Slurm requeues it itself (node failure) */
        return;
    zt_info("requeueing Slurm job %s: the job runs again on other nodes", job);
    char *argv[] = { "scontrol", "requeue", (char *) job, NULL };
    if (zt_slurm_command(argv, said, sizeof said) != 0)
        zt_warn("scontrol requeue %s: %s", job, said);
}

/* An elastic pool goes on without host: its component lets the node go
 * (scontrol update NodeList=the others), before Slurm sees it down and
 * ends the heterogeneous job's components that hold one node each. */
int zt_slurm_be_drop_node(zt_backend_t *self, const char *host, char *why, size_t len)
{
    zt_slurm_be_t *ctx = self->ctx;
    int comp = -1;
    for (int k = 0; k < ctx->n; k++)
        if (ctx->reps[k].alloc[0] && ctx->reps[k].node && !strcmp(ctx->reps[k].node, host)) {
            zt_info("Slurm job %s (%s's own node, %s) is let go", ctx->reps[k].alloc, ctx->reps[k].name, host);
            size_t dl = strlen(ctx->dropped);
            snprintf(ctx->dropped + dl, sizeof ctx->dropped - dl, "%s%s", dl ? "," : "", host);
            int rc = zt_slurm_cancel(ctx->reps[k].alloc, why, len);
            ctx->reps[k].alloc[0] = 0;
            return rc == 0 ? ZT_OK : ZT_EIO;
        }
    for (int k = 0; k < ctx->n && comp < 0; k++)
        if (ctx->reps[k].node && !strcmp(ctx->reps[k].node, host))
            comp = ctx->reps[k].comp;
    char list[4096] = "", jobs[512], *save = NULL, *id = NULL;
    for (int k = 0; k < ctx->n; k++) {
        const char *node = ctx->reps[k].node;
        if (ctx->reps[k].comp != comp || !node || !strcmp(node, host) || strstr(list, node))
            continue;
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", *list ? "," : "", node);
    }
    snprintf(jobs, sizeof jobs, "%s", ctx->jobs);
    id = strtok_r(jobs, ",", &save);
    for (int c = 0; id && c < (ctx->het ? comp : 0); c++)
        id = strtok_r(NULL, ",", &save);
    if (comp < 0 || !*list || !id) {
        snprintf(why, len, "node %s holds no replica of a component with other nodes", host);
        return ZT_EINVAL;
    }
    char job[64], nodes[4200];
    snprintf(job, sizeof job, "JobId=%s", id);
    snprintf(nodes, sizeof nodes, "NodeList=%s", list);
    char *argv[] = { "scontrol", "update", job, nodes, NULL };
    if (zt_slurm_command(argv, why, len) != 0)
        return ZT_EIO;
    size_t dl = strlen(ctx->dropped);
    snprintf(ctx->dropped + dl, sizeof ctx->dropped - dl, "%s%s", dl ? "," : "", host);
    zt_info("Slurm job %s lets node %s go: it runs on %s", id, host, list);
    return ZT_OK;
}

/* Whether node is in the comma-separated list. */
static bool s_listed(const char *list, const char *node)
{
    size_t n = strlen(node);
    for (const char *p = list; p && *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && !strncmp(p, node, n))
            return true;
        p += len + (p[len] == ',');
    }
    return false;
}

/* The idle nodes sinfo lists (in partition, when named), but for the ones
 * let go from the job (a lost node looks idle until Slurm marks it down). */
static long s_idle_nodes(const zt_slurm_be_t *ctx, const char *partition)
{
    char said[8192], opt[160] = "";
    if (partition)
        snprintf(opt, sizeof opt, "--partition=%s", partition);
    char *argv[] = { "sinfo", "-h", "-N", "-t", "idle", "-o", "%N", opt[0] ? opt : NULL, NULL };
    if (zt_slurm_command(argv, said, sizeof said) != 0)
        return 0;
    long n = 0;
    for (char *line = strtok(said, "\n"); line; line = strtok(NULL, "\n"))
        n += *line && !s_listed(ctx->dropped, line);
    return n;
}

/* Long on purpose: the allocation's options gathered, asked for, and its
 * node read, with one error path. A node for replica k again, whose node
 * was lost: an allocation of its own (salloc --no-shell) with its pool's
 * resources, partition, account and QOS, for at most the job's time left;
 * asked only while sinfo shows an idle node, so that salloc does not wait. */
int zt_slurm_be_regain(zt_backend_t *self, int k, zt_place_t *pl, char *why, size_t len)
{
    zt_slurm_be_t *ctx = self->ctx;
    if (k < 0 || k >= ctx->n) {
        snprintf(why, len, "no replica %d", k);
        return ZT_EINVAL;
    }
    zt_slurm_be_rep_t *r = &ctx->reps[k];
    char var[64], opt[4][160] = { "", "", "", "" }, cpus[48], mem[48], gres[32], name[80], said[2048];
    const char *v = zt_slurm_be_env_component("SLURM_JOB_PARTITION", ctx->het, r->comp, var, sizeof var);
    if (s_idle_nodes(ctx, v) <= 0) {
        snprintf(why, len, "no idle node in %s%s", v ? "partition " : "the cluster", v ? v : "");
        return ZT_ENOTFOUND;
    }
    int o = 0;
    if (v)
        snprintf(opt[o++], sizeof opt[0], "--partition=%s", v);
    if ((v = zt_slurm_be_env_component("SLURM_JOB_ACCOUNT", ctx->het, r->comp, var, sizeof var)))
        snprintf(opt[o++], sizeof opt[0], "--account=%s", v);
    if ((v = zt_slurm_be_env_component("SLURM_JOB_QOS", ctx->het, r->comp, var, sizeof var)))
        snprintf(opt[o++], sizeof opt[0], "--qos=%s", v);
    char *left_argv[] = { "squeue", "-h", "-j", (char *) zt_slurm_job_id(-1), "-o", "%L", NULL };
    if (zt_slurm_command(left_argv, said, sizeof said) == 0 && said[0] >= '0' && said[0] <= '9' &&
        !strchr(said, '\n'))
        snprintf(opt[o++], sizeof opt[0], "--time=%.100s", said);
    snprintf(cpus, sizeof cpus, "--cpus-per-task=%d", r->cpus);
    snprintf(mem, sizeof mem, "--mem-per-cpu=%lldM", r->mem_mb > 0 ? r->mem_mb : 1);
    snprintf(gres, sizeof gres, "--gres=gpu:%d", r->gpus);
    snprintf(name, sizeof name, "--job-name=%s", r->name);
    char exclude[1100];
    snprintf(exclude, sizeof exclude, "--exclude=%s", ctx->dropped);
    char *argv[16] = { "salloc", "--no-shell", "--immediate=3", "-N1", "-n1", cpus, mem, name };
    int a = 8;
    if (ctx->dropped[0])
        argv[a++] = exclude;
    if (r->gpus > 0)
        argv[a++] = gres;
    for (int i = 0; i < o; i++)
        argv[a++] = opt[i];
    long long id = 0;
    const char *granted = NULL;
    if (zt_slurm_command_apart(argv, said, sizeof said) != 0 ||
        !(granted = strstr(said, "Granted job allocation ")) || sscanf(granted + 23, "%lld", &id) != 1) {
        snprintf(why, len, "salloc: %s", said);
        return ZT_ENOTFOUND;
    }
    char idtext[32], node[256];
    snprintf(idtext, sizeof idtext, "%lld", id);
    char *node_argv[] = { "squeue", "-h", "-j", idtext, "-o", "%N", NULL };
    if (zt_slurm_command(node_argv, node, sizeof node) != 0 || !node[0] || strchr(node, ',') || strchr(node, '[')) {
        snprintf(why, len, "Slurm job %s was granted, but squeue names no one node of it: %s", idtext, node);
        zt_slurm_cancel(idtext, said, sizeof said);
        return ZT_EIO;
    }
    free(r->node);
    r->node = strdup(node);
    snprintf(r->alloc, sizeof r->alloc, "%s", idtext);
    size_t jl = strlen(ctx->jobs);
    snprintf(ctx->jobs + jl, sizeof ctx->jobs - jl, ",%s", idtext);
    snprintf(pl->host, sizeof pl->host, "%s", node);
    snprintf(pl->addr, sizeof pl->addr, "%s", node);
    pl->iface[0] = 0;
    zt_slurm_be_node_interfaces(ctx, k, pl, 1);
    zt_info("Slurm job %s: a node of its own for %s, on %s", idtext, r->name, node);
    return ZT_OK;
}

/* The nodes regained for replicas end with the job. */
void zt_slurm_be_release_regained(zt_slurm_be_t *ctx)
{
    char err[512];
    for (int i = 0; i < ctx->n; i++)
        if (ctx->reps[i].alloc[0]) {
            if (zt_slurm_cancel(ctx->reps[i].alloc, err, sizeof err) != 0)
                zt_warn("%s", err);
            ctx->reps[i].alloc[0] = 0;
        }
}

void zt_slurm_be_give_up(zt_backend_t *self)
{
    (void) self;
    const char *job = zt_slurm_job_id(-1);
    char err[512];
    if (!job || !zt_slurm_be_allocation_ending()) /* not requeued: it ends with this script */
        return;
    zt_info("cancelling Slurm's requeue of job %s: no job retry is left", job);
    if (zt_slurm_cancel(job, err, sizeof err) != 0)
        zt_warn("%s", err);
}

/* squeue's word on the allocation: a restart count above this run's
 * (SLURM_RESTART_COUNT) is a requeue already made, by a preemption or
 * `scontrol requeue`; a TimeLimit reason its time limit; any other state
 * than RUNNING a cancel. */
int zt_slurm_be_ending(zt_backend_t *self, char *why, size_t len)
{
    const char *job = zt_slurm_job_id(-1);
    char said[2048], state[64] = "", reason[128] = "";
    char *argv[] = { "squeue", "-h", "-j", (char *) job, "-O", "State:|,Reason:|,RestartCnt:", NULL };
    long restarts = 0;
    why[0] = 0;
    /* a requeue's count may show a moment after the steps were signalled:
     * an end that looks like a cancel is asked again, for about a second */
    for (int tries = 0; tries < 5; tries++) {
        if (tries)
            usleep(250 * 1000);
        if (!job || zt_slurm_command(argv, said, sizeof said) != 0)
            return ZT_END_NONE;
        said[strcspn(said, "\n")] = 0; /* a heterogeneous job: its first line is the job's */
        if (sscanf(said, "%63[^|]|%127[^|]|%ld", state, reason, &restarts) < 2)
            return ZT_END_NONE;
        if (restarts > self->requeues || !strcmp(reason, "TimeLimit") || !strcmp(state, "RUNNING"))
            break;
    }
    if (restarts > self->requeues) {
        snprintf(why, len, "Slurm requeued job %s (a preemption or scontrol requeue; its run %ld)", job,
                 restarts + 1);
        return ZT_END_REQUEUED;
    }
    if (!strcmp(reason, "TimeLimit")) {
        snprintf(why, len, "Slurm job %s reached its time limit", job);
        return ZT_END_TIME_LIMIT;
    }
    if (strcmp(state, "RUNNING")) {
        snprintf(why, len, "Slurm job %s was cancelled (scancel; it is %s)", job, state);
        return ZT_END_CANCELLED;
    }
    return ZT_END_NONE;
}

