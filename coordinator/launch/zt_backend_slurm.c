/* The Slurm backend, inside an allocation: the coordinator runs in the
 * job's batch script (SLURM_JOB_ID is set), and every replica is a job step
 * on its node. Placement comes from the allocation: one heterogeneous
 * component per present pool, in pool order (or, in an ordinary
 * allocation, every pool on its nodes); a pool's replicas fill its nodes as
 * Slurm laid out the tasks. Host identity and address are the node's name;
 * ports come from a range chosen by the job id and its requeue count
 * (nothing can be reserved on another node). Starting a replica is the local backend starting
 * `srun --het-group=C --nodelist=NODE -N1 -n1 --overlap ... PROGRAM`:
 * srun is the local process that supervision signals, waits on and reaps,
 * and it forwards signals to the step. */
#include "launch/zt_backend.h"
#include "launch/zt_slurm.h"
#include "base/zt_util.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_log.h"
#include <arpa/inet.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    zt_backend_t *local;        /* starts, signals and reaps the srun processes */
    bool het;                   /* a heterogeneous allocation: one component per pool */
    int component[ZT_POOLS];    /* the component of each present pool */
    char **nodes;               /* per ordinal: its node (owned) */
    int *comp_of;               /* per ordinal: its component */
    zt_handle_t **handle_of;    /* per ordinal: its running step, or NULL */
    int n;
    /* scancel or the time limit ends the steps before the coordinator hears
     * its own SIGTERM: their ends are held back until it has, so that they
     * are a cancelled job's, not crashes */
    struct { zt_handle_t *h; int status; } held[512];
    int nheld;
    int64_t ending_since;       /* when the allocation was seen ending (0: not) */
} s_slurm_t;

/* The node names of a Slurm host list ("n[1-3],x"), through scontrol. */
static char **s_hostnames(const char *list, int *n)
{
    *n = 0;
    char *cmd = zt_strdupf("scontrol show hostnames '%s'", list);
    FILE *p = popen(cmd, "r");
    free(cmd);
    if (!p)
        return NULL;
    char **out = NULL, line[256];
    while (fgets(line, sizeof line, p)) {
        line[strcspn(line, "\r\n")] = 0;
        if (!*line)
            continue;
        out = realloc(out, sizeof *out * (size_t) (*n + 1));
        out[(*n)++] = strdup(line);
    }
    pclose(p);
    return out;
}

/* SLURM_TASKS_PER_NODE ("2(x3),1"): tasks of node i, for i < n. */
static void s_tasks_per_node(const char *text, int *tasks, int n)
{
    for (int i = 0; i < n; i++)
        tasks[i] = 1;
    int i = 0;
    for (const char *p = text; p && *p && i < n;) {
        char *end;
        long count = strtol(p, &end, 10), times = 1;
        if (end == p)
            break;
        if (!strncmp(end, "(x", 2))
            times = strtol(end + 2, &end, 10), end += *end == ')';
        for (long k = 0; k < times && i < n; k++)
            tasks[i++] = (int) count;
        p = *end == ',' ? end + 1 : end;
    }
}

static const char *s_env_component(const char *name, bool het, int c, char *buf, size_t size)
{
    if (het)
        snprintf(buf, size, "%s_HET_GROUP_%d", name, c);
    else
        snprintf(buf, size, "%s", name);
    return getenv(buf);
}

/* This node's IPv4 address, where the coordinator's control plane binds. */
static void s_own_address(char *out, size_t size)
{
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *res = NULL;
    snprintf(out, size, "%s", host);
    if (getaddrinfo(host, NULL, &hints, &res) == 0 && res) {
        inet_ntop(AF_INET, &((struct sockaddr_in *) res->ai_addr)->sin_addr, out, (socklen_t) size);
        freeaddrinfo(res);
    }
}

static void s_forget(s_slurm_t *ctx)
{
    for (int i = 0; i < ctx->n; i++)
        free(ctx->nodes[i]);
    free(ctx->nodes);
    free(ctx->comp_of);
    free(ctx->handle_of);
    ctx->nodes = NULL;
    ctx->comp_of = NULL;
    ctx->handle_of = NULL;
    ctx->n = 0;
}

/* Long on purpose: one pass over the pools, each reading its component's
 * nodes and tasks and laying its replicas on them, with one error path. */
static int s_place(zt_backend_t *self, const zt_plan_t *plan, bool cpu_only, zt_placement_t *out)
{
    s_slurm_t *ctx = self->ctx;
    memset(out, 0, sizeof *out);
    const char *job = getenv("SLURM_JOB_ID");
    if (!job || !*job) {
        zt_error("the slurm backend runs inside a Slurm allocation (no SLURM_JOB_ID here): submit the "
                 "job with sbatch, or use --backend local");
        return ZT_EINVAL;
    }
    ctx->het = getenv("SLURM_HET_SIZE") != NULL;
    s_forget(ctx);
    int n = zt_plan_replicas(plan), k = 0, c = 0;
    out->replicas = calloc((size_t) n, sizeof *out->replicas);
    ctx->nodes = calloc((size_t) n, sizeof *ctx->nodes);
    ctx->comp_of = calloc((size_t) n, sizeof *ctx->comp_of);
    ctx->handle_of = calloc((size_t) n, sizeof *ctx->handle_of);
    ctx->n = n;
    /* a requeued run of the allocation (after a lost node) takes other
     * ports: the earlier run's steps may still be ending on the nodes kept */
    const char *restarts = getenv("SLURM_RESTART_COUNT");
    long requeue = restarts ? strtol(restarts, NULL, 10) : 0;
    int base = 20000 + (int) ((strtol(job, NULL, 10) * 37 + requeue * 4001) % 40000);
    for (int p = 0; p < ZT_POOLS; p++) {
        const zt_pool_t *pool = &plan->pools[p];
        if (!pool->present)
            continue;
        ctx->component[p] = ctx->het ? c : 0;
        char name[64], tname[64];
        const char *list = s_env_component("SLURM_JOB_NODELIST", ctx->het, ctx->component[p], name, sizeof name);
        const char *tpn = s_env_component("SLURM_TASKS_PER_NODE", ctx->het, ctx->component[p], tname,
                                          sizeof tname);
        int nn = 0;
        char **nodes = list ? s_hostnames(list, &nn) : NULL;
        if (nn == 0) {
            zt_error("workerpool%d: no nodes for it in the allocation (%s unset or empty); a job of %s "
                     "pools needs a heterogeneous allocation with one component per pool, in order",
                     p, name, ctx->het ? "several" : "these");
            free(nodes);
            zt_placement_fini(out);
            return ZT_EINVAL;
        }
        int *tasks = calloc((size_t) nn, sizeof *tasks);
        s_tasks_per_node(tpn, tasks, nn);
        int node = 0, used = 0;
        for (int i = 0; i < pool->replicas; i++, k++) {
            zt_place_t *pl = &out->replicas[k];
            snprintf(pl->host, sizeof pl->host, "%s", nodes[node]);
            snprintf(pl->addr, sizeof pl->addr, "%s", nodes[node]);
            pl->port = base + k;
            pl->first_gpu = 0;
            pl->ngpus = cpu_only ? 0 : pool->accel_count;
            ctx->nodes[k] = strdup(nodes[node]);
            ctx->comp_of[k] = ctx->component[p];
            if (++used >= tasks[node]) { /* the node's tasks are taken: the next node */
                node = (node + 1) % nn;
                used = 0;
            }
        }
        for (int i = 0; i < nn; i++)
            free(nodes[i]);
        free(nodes);
        free(tasks);
        c++;
    }
    out->n = k;
    out->master_port = base + k;
    s_own_address(out->control_addr, sizeof out->control_addr);
    zt_info("slurm job %s: %d replicas on %d component%s, ports from %d", job, k, c, c == 1 ? "" : "s",
            base);
    return ZT_OK;
}

static int s_start(zt_backend_t *self, const zt_launch_t *req, zt_handle_t **handle_p, int *out_fd)
{
    s_slurm_t *ctx = self->ctx;
    if (req->ordinal < 0 || req->ordinal >= ctx->n) /* not a replica: run it here */
        return ctx->local->start(ctx->local, req, handle_p, out_fd);
    size_t argc = 0;
    while (req->argv[argc])
        argc++;
    char **argv = calloc(argc + 16, sizeof *argv);
    int a = 0;
    char het[32], nodelist[300], name[64];
    argv[a++] = "srun";
    if (ctx->het) {
        snprintf(het, sizeof het, "--het-group=%d", ctx->comp_of[req->ordinal]);
        argv[a++] = het;
    }
    snprintf(nodelist, sizeof nodelist, "--nodelist=%s", ctx->nodes[req->ordinal]);
    snprintf(name, sizeof name, "--job-name=workerpool%d-%d", req->pool, req->index);
    argv[a++] = nodelist;
    argv[a++] = name;
    argv[a++] = "-N1";
    argv[a++] = "-n1";
    argv[a++] = "--overlap";     /* replicas share the component's CPUs with each other */
    argv[a++] = "--mem=0";
    argv[a++] = "--export=ALL";  /* the environment ztrain made for the replica */
    argv[a++] = "--quiet";
    argv[a++] = "--kill-on-bad-exit=0";
    for (size_t i = 0; i < argc; i++)
        argv[a++] = req->argv[i];
    argv[a] = NULL;
    zt_launch_t step = *req;
    step.argv = argv;
    int rc = ctx->local->start(ctx->local, &step, handle_p, out_fd);
    free(argv);
    if (rc == ZT_OK)
        ctx->handle_of[req->ordinal] = *handle_p;
    return rc;
}

static int s_signal(zt_backend_t *self, zt_handle_t *h, int sig)
{
    s_slurm_t *ctx = self->ctx;
    return ctx->local->signal(ctx->local, h, sig);
}

/* True when squeue says the allocation is no longer running (cancelled,
 * timed out, completing). No answer is not taken for an end. */
static bool s_allocation_ending(void)
{
    char state[256], reason[256];
    return zt_slurm_query(getenv("SLURM_JOB_ID"), state, sizeof state, reason, sizeof reason) == 1 &&
           strcmp(state, "RUNNING");
}

static int s_reap(zt_backend_t *self, zt_handle_t **h, int *status)
{
    s_slurm_t *ctx = self->ctx;
    if (ctx->nheld > 0 && zt_now_ms() - ctx->ending_since > 200) { /* the coordinator knows by now */
        *h = ctx->held[0].h;
        *status = ctx->held[0].status;
        memmove(ctx->held, ctx->held + 1, sizeof ctx->held[0] * (size_t) --ctx->nheld);
        return 1;
    }
    int rc = ctx->local->reap(ctx->local, h, status);
    if (rc != 1)
        return rc;
    if (!ctx->ending_since && s_allocation_ending()) {
        ctx->ending_since = zt_now_ms();
        zt_warn("the Slurm allocation %s is ending (scancel or its time limit): the job is cancelled",
                getenv("SLURM_JOB_ID"));
        raise(SIGTERM); /* the coordinator's own path for a cancelled job */
    }
    if (ctx->ending_since && zt_now_ms() - ctx->ending_since <= 200 && ctx->nheld < 512) {
        ctx->held[ctx->nheld].h = *h;
        ctx->held[ctx->nheld++].status = *status;
        *h = NULL;
        return 0;
    }
    return 1;
}

static void s_release(zt_backend_t *self, zt_handle_t **h)
{
    s_slurm_t *ctx = self->ctx;
    for (int i = 0; *h && i < ctx->n; i++)
        if (ctx->handle_of[i] == *h)
            ctx->handle_of[i] = NULL;
    ctx->local->release(ctx->local, h);
}

/* A node is lost when Slurm marks it down or failed, or not responding
 * (the '*' sinfo appends to its state). */
static int s_node_lost(zt_backend_t *self, const zt_handle_t *h, char *why, size_t len)
{
    s_slurm_t *ctx = self->ctx;
    char list[4096] = "";
    for (int i = 0; i < ctx->n; i++) {
        if (h && ctx->handle_of[i] != h)
            continue;
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", list[0] ? "," : "", ctx->nodes[i]);
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

static void s_requeue(zt_backend_t *self)
{
    (void) self;
    char *job = getenv("SLURM_JOB_ID"), said[512];
    if (!job || s_allocation_ending()) /* Slurm requeues it itself (node failure) */
        return;
    zt_info("requeueing Slurm job %s: the job runs again on other nodes", job);
    char *argv[] = { "scontrol", "requeue", job, NULL };
    if (zt_slurm_command(argv, said, sizeof said) != 0)
        zt_warn("scontrol requeue %s: %s", job, said);
}

static void s_give_up(zt_backend_t *self)
{
    (void) self;
    char *job = getenv("SLURM_JOB_ID"), err[512];
    if (!job || !s_allocation_ending()) /* not requeued: it ends with this script */
        return;
    zt_info("cancelling Slurm's requeue of job %s: no job retry is left", job);
    if (zt_slurm_cancel(job, err, sizeof err) != 0)
        zt_warn("%s", err);
}

static int64_t s_pid(zt_backend_t *self, const zt_handle_t *h)
{
    s_slurm_t *ctx = self->ctx;
    return ctx->local->pid(ctx->local, h);
}

static void s_cleanup(zt_backend_t *self)
{
    s_slurm_t *ctx = self->ctx;
    ctx->local->cleanup(ctx->local);
}

static void s_destroy(zt_backend_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    s_slurm_t *ctx = (*self_p)->ctx;
    ctx->local->destroy(&ctx->local);
    s_forget(ctx);
    free(ctx);
    free(*self_p);
    *self_p = NULL;
}

zt_backend_t *zt_backend_slurm_new(void)
{
    zt_backend_t *self = calloc(1, sizeof *self);
    s_slurm_t *ctx = calloc(1, sizeof *ctx);
    if (!self || !ctx || !(ctx->local = zt_backend_local_new())) {
        free(self);
        free(ctx);
        return NULL;
    }
    self->name = "slurm";
    self->ctx = ctx;
    self->place = s_place;
    self->start = s_start;
    self->signal = s_signal;
    self->reap = s_reap;
    self->release = s_release;
    self->pid = s_pid;
    self->cleanup = s_cleanup;
    self->destroy = s_destroy;
    self->allocation = getenv("SLURM_JOB_ID");
    self->node_lost = s_node_lost;
    self->requeue = s_requeue;
    self->give_up = s_give_up;
    return self;
}
