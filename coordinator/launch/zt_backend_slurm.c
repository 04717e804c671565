/* The Slurm backend, inside an allocation: the coordinator runs in the
 * job's batch script (SLURM_JOB_ID is set), and every replica is a job step
 * on its node. Placement comes from the allocation: one heterogeneous
 * component per present pool, in pool order (or, in an ordinary
 * allocation, every pool on its nodes); a pool's replicas fill its nodes as
 * Slurm laid out the tasks. Host identity and address are the node's name;
 * ports come from a range chosen by the job id and its requeue count
 * (nothing can be reserved on another node). Starting a replica is the local backend starting
 * `srun --het-group=C --nodelist=NODE -N1 -n1 --overlap ... PROGRAM`:
 * srun is the local process that supervision waits on and reaps. A SIGTERM
 * for a replica goes to its step through Slurm (scancel --signal=TERM), so
 * that the program gets it and may save: srun itself would turn a SIGTERM
 * into SIGKILL for the step's tasks. SIGKILL goes to the step the same way,
 * and to srun. */
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

/* The nodes of the partition of component c (sinfo), comma-separated, or
 * NULL when sinfo says none. */
static char *s_partition_nodes(int c)
{
    char var[64], said[16384], opt[160] = "";
    const char *part = zt_slurm_be_env_component("SLURM_JOB_PARTITION", getenv("SLURM_HET_SIZE") != NULL, c, var, sizeof var);
    if (part)
        snprintf(opt, sizeof opt, "--partition=%s", part);
    char *argv[] = { "sinfo", "-h", "-N", "-o", "%N", opt[0] ? opt : NULL, NULL };
    if (zt_slurm_command(argv, said, sizeof said) != 0 || !said[0])
        return NULL;
    for (char *p = said; *p; p++)
        if (*p == '\n')
            *p = ',';
    return strdup(said);
}

static void s_forget(zt_slurm_be_t *ctx)
{
    for (int i = 0; i < ctx->n; i++)
        free(ctx->reps[i].node);
    free(ctx->reps);
    ctx->reps = NULL;
    ctx->n = 0;
}

/* Long on purpose: one pass over the pools, each reading its component's
 * nodes and tasks and laying its replicas on them, with one error path. */
static int s_place(zt_backend_t *self, const zt_plan_t *plan, bool cpu_only, zt_placement_t *out)
{
    zt_slurm_be_t *ctx = self->ctx;
    memset(out, 0, sizeof *out);
    const char *job = zt_slurm_job_id(-1);
    if (!job || !*job) {
        zt_error("the slurm backend runs inside a Slurm allocation (no SLURM_JOB_ID here): submit the "
                 "job with sbatch, or use --backend local");
        return ZT_EINVAL;
    }
    ctx->het = getenv("SLURM_HET_SIZE") != NULL;
    s_forget(ctx);
    int n = zt_plan_replicas(plan), k = 0, c = 0;
    out->replicas = calloc((size_t) n, sizeof *out->replicas);
    ctx->reps = calloc((size_t) n, sizeof *ctx->reps);
    ctx->jobs[0] = 0;
    ctx->n = n;
    /* a requeued run of the allocation (after a lost node) takes other
     * ports: the earlier run's steps may still be ending on the nodes kept */
    long requeue = zt_slurm_restart_count();
    int base = 20000 + (int) ((strtol(job, NULL, 10) * 37 + requeue * 4001) % 40000);
    for (int p = 0; p < ZT_POOLS; p++) {
        const zt_pool_t *pool = &plan->pools[p];
        if (!pool->present)
            continue;
        ctx->component[p] = ctx->het ? c : 0;
        char name[64], tname[64];
        const char *list = zt_slurm_be_env_component("SLURM_JOB_NODELIST", ctx->het, ctx->component[p], name, sizeof name);
        const char *tpn = zt_slurm_be_env_component("SLURM_TASKS_PER_NODE", ctx->het, ctx->component[p], tname,
                                          sizeof tname);
        /* the component's own job id, which its steps belong to */
        const char *jid = ctx->het ? zt_slurm_job_id(ctx->component[p]) : NULL;
        size_t jl = strlen(ctx->jobs);
        if (ctx->het || !jl)
            snprintf(ctx->jobs + jl, sizeof ctx->jobs - jl, "%s%s", jl ? "," : "", jid ? jid : job);
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
            zt_slurm_be_rep_t *r = &ctx->reps[k];
            r->node = strdup(nodes[node]);
            snprintf(r->name, sizeof r->name, "workerpool%d-%d", p, i);
            r->comp = ctx->component[p];
            r->gpus = pl->ngpus;
            r->cpus = pool->machine.vcpus > 0 ? pool->machine.vcpus : 1;
            r->mem_mb = (long long) (pool->machine.memory_gb * 1024.0 / r->cpus);
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
    zt_slurm_be_node_interfaces(ctx, 0, out->replicas, k);
    out->master_port = base + k;
    s_own_address(out->control_addr, sizeof out->control_addr);
    if (plan->pools[1].present && plan->pools[1].elastic_min) /* where a lost member may get a node again */
        out->spare_hosts = s_partition_nodes(ctx->component[1]);
    zt_info("slurm job %s: %d replicas on %d component%s, ports from %d", job, k, c, c == 1 ? "" : "s",
            base);
    return ZT_OK;
}

static int s_start(zt_backend_t *self, const zt_launch_t *req, zt_handle_t **handle_p, int *out_fd)
{
    zt_slurm_be_t *ctx = self->ctx;
    if (req->ordinal < 0 || req->ordinal >= ctx->n) /* not a replica: run it here */
        return ctx->local->start(ctx->local, req, handle_p, out_fd);
    size_t argc = 0;
    while (req->argv[argc])
        argc++;
    char **argv = calloc(argc + 32, sizeof *argv);
    int a = 0;
    char het[48], nodelist[300], name[80];
    argv[a++] = "srun";
    if (ctx->reps[req->ordinal].alloc[0]) { /* a node regained: its own allocation */
        snprintf(het, sizeof het, "--jobid=%s", ctx->reps[req->ordinal].alloc);
        argv[a++] = het;
    }
    else if (ctx->het) {
        snprintf(het, sizeof het, "--het-group=%d", ctx->reps[req->ordinal].comp);
        argv[a++] = het;
    }
    snprintf(nodelist, sizeof nodelist, "--nodelist=%s", ctx->reps[req->ordinal].node);
    snprintf(name, sizeof name, "--job-name=%s", ctx->reps[req->ordinal].name);
    argv[a++] = nodelist;
    argv[a++] = name;
    for (int i = 0; zt_slurm_step_options[i]; i++)
        argv[a++] = (char *) zt_slurm_step_options[i];
    char gres[32];
    if (ctx->reps[req->ordinal].gpus > 0) { /* the step gets its node's GPUs; Slurm names them */
        snprintf(gres, sizeof gres, "--gres=gpu:%d", ctx->reps[req->ordinal].gpus);
        argv[a++] = gres;
    }
    for (size_t i = 0; i < argc; i++)
        argv[a++] = req->argv[i];
    argv[a] = NULL;
    zt_launch_t step = *req;
    step.argv = argv;
    char **envp = NULL;
    if (ctx->reps[req->ordinal].alloc[0]) { /* srun takes the job from SLURM_*: none of this allocation's */
        size_t n = 0, k = 0;
        while (req->envp[n])
            n++;
        envp = calloc(n + 1, sizeof *envp);
        for (size_t i = 0; i < n; i++)
            if (!zt_slurm_allocation_var(req->envp[i]))
                envp[k++] = req->envp[i];
        step.envp = envp;
    }
    int rc = ctx->local->start(ctx->local, &step, handle_p, out_fd);
    free(envp);
    free(argv);
    if (rc == ZT_OK) {
        ctx->reps[req->ordinal].handle = *handle_p;
        ctx->reps[req->ordinal].started_at = zt_now_ms();
    }
    return rc;
}

/* The Slurm id ("10.0") of the step running replica ordinal i, found by
 * its name and node among the allocation's steps (squeue's list, read
 * again when asked to); false when Slurm does not list it (yet). */
static bool s_step_of(zt_slurm_be_t *ctx, int i, bool reread, char *out, size_t size)
{
    if (reread) {
        char *argv[] = { "squeue", "-h", "-s", "-j", ctx->jobs, "-o", "%i %j %N", NULL };
        if (zt_slurm_command(argv, ctx->steps, sizeof ctx->steps) != 0)
            ctx->steps[0] = 0;
        ctx->steps_at = zt_now_ms();
    }
    bool found = false;
    long best = -1;
    for (char *line = ctx->steps; *line;) {
        size_t len = strcspn(line, "\n");
        char id[64], name[128], node[256];
        char *end = line + len;
        char saved = *end;
        *end = 0;
        if (sscanf(line, "%63s %127s %255s", id, name, node) == 3 && !strcmp(name, ctx->reps[i].name) &&
            !strcmp(node, ctx->reps[i].node)) {
            const char *dot = strchr(id, '.');
            long step = dot ? strtol(dot + 1, NULL, 10) : -1;
            if (step > best) { /* a restarted replica's step is the newest */
                best = step;
                snprintf(out, size, "%s", id);
                found = true;
            }
        }
        *end = saved;
        line = saved ? end + 1 : end;
    }
    return found;
}

/* Runs argv without waiting for it: a signal through Slurm for a step on a
 * node that stopped answering takes scancel Slurm's MessageTimeout, and
 * the coordinator's loop must not wait on that. The local backend's reap
 * collects it, as it collects every child that is no replica. */
static void s_run_detached(zt_slurm_be_t *ctx, char *const *argv)
{
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open("/dev/null", O_RDWR);
        if (fd >= 0) {
            dup2(fd, 0);
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execvp(argv[0], argv);
        _exit(127);
    }
    if (pid < 0)
        zt_debug("cannot run %s: %s", argv[0], strerror(errno));
    for (int i = 0; i < 64; i++) /* the ones done since (or reaped as no replica's) */
        if (ctx->signalling[i] && waitpid(ctx->signalling[i], NULL, WNOHANG) != 0)
            ctx->signalling[i] = 0;
    for (int i = 0; pid > 0 && i < 64; i++)
        if (!ctx->signalling[i]) {
            ctx->signalling[i] = pid;
            break;
        }
}

/* Waits (up to 3 s in all) for the signals under way to reach Slurm: the
 * batch step's end would kill a scancel still running, and a step it was
 * to SIGKILL would live on until Slurm's KillWait. */
static void s_await_signals(zt_slurm_be_t *ctx)
{
    int64_t deadline = zt_now_ms() + 3000;
    for (int i = 0; i < 64; i++) {
        while (ctx->signalling[i] && zt_now_ms() < deadline) {
            pid_t got = waitpid(ctx->signalling[i], NULL, WNOHANG);
            if (got == ctx->signalling[i] || (got < 0 && errno == ECHILD)) /* ended (perhaps reaped already) */
                ctx->signalling[i] = 0;
            else
                usleep(10 * 1000);
        }
        ctx->signalling[i] = 0;
    }
}

static int s_signal(zt_backend_t *self, zt_handle_t *h, int sig)
{
    zt_slurm_be_t *ctx = self->ctx;
    for (int k = 0; k < ctx->nheld; k++)
        if (ctx->held[k].h == h) /* ended already, its end held back: its pid is no longer its */
            return ZT_OK;
    int i = 0;
    while (i < ctx->n && (!h || ctx->reps[i].handle != h))
        i++;
    char step[64], signame[16];
    /* a batch of SIGTERMs (the job stopping) shares one listing, when it
     * was read since the replica's step started */
    bool listed = i < ctx->n && ctx->steps_at > ctx->reps[i].started_at && zt_now_ms() - ctx->steps_at < 1000;
    if ((sig == SIGTERM || sig == SIGKILL) && i < ctx->n &&
        ((listed && s_step_of(ctx, i, false, step, sizeof step)) || s_step_of(ctx, i, true, step, sizeof step))) {
        snprintf(signame, sizeof signame, "--signal=%d", sig);
        char *argv[] = { "scancel", signame, step, NULL };
        /* Slurm 22.05 signals a step of a component of several nodes yet
         * fails ("Invalid job id specified") for the nodes without it: its
         * word is not trusted either way, so not waited for. If it was not
         * delivered, the grace's SIGKILL still ends the replica. */
        s_run_detached(ctx, argv);
        if (sig == SIGTERM)
            return ZT_OK;
        /* SIGKILL: the program on its node, which srun's own death would
         * leave to Slurm's KillWait at the job's end, and srun here */
    }
    return ctx->local->signal(ctx->local, h, sig);
}

static int s_reap(zt_backend_t *self, zt_handle_t **h, int *status)
{
    zt_slurm_be_t *ctx = self->ctx;
    int64_t now = zt_now_ms();
    if (ctx->nheld > 0 && now >= ctx->held[0].until) { /* the coordinator knows by now */
        *h = ctx->held[0].h;
        *status = ctx->held[0].status;
        memmove(ctx->held, ctx->held + 1, sizeof ctx->held[0] * (size_t) --ctx->nheld);
        return 1;
    }
    int rc = ctx->local->reap(ctx->local, h, status);
    if (rc != 1)
        return rc;
    if (!ctx->ending_since && zt_slurm_be_allocation_ending()) {
        ctx->ending_since = now;
        zt_warn("the Slurm allocation %s is ending (scancel, its time limit or a preemption)", zt_slurm_job_id(-1));
        raise(SIGTERM); /* the coordinator's own path, which asks why (zt_slurm_be_ending) */
    }
    /* held: every end while the allocation ends, and a stop by signal for
     * a second, as Slurm may signal the steps before squeue says why and
     * before the coordinator's own SIGTERM */
    int64_t until = ctx->ending_since && now - ctx->ending_since <= 200 ? ctx->ending_since + 200
                    : zt_wait_status_stopped(*status)                   ? now + 1000
                                                                        : 0;
    if (until && ctx->nheld < 512) {
        ctx->held[ctx->nheld].h = *h;
        ctx->held[ctx->nheld].status = *status;
        ctx->held[ctx->nheld++].until = until;
        *h = NULL;
        return 0;
    }
    return 1;
}

static void s_release(zt_backend_t *self, zt_handle_t **h)
{
    zt_slurm_be_t *ctx = self->ctx;
    for (int i = 0; *h && i < ctx->n; i++)
        if (ctx->reps[i].handle == *h)
            ctx->reps[i].handle = NULL;
    ctx->local->release(ctx->local, h);
}

static int64_t s_pid(zt_backend_t *self, const zt_handle_t *h)
{
    zt_slurm_be_t *ctx = self->ctx;
    return ctx->local->pid(ctx->local, h);
}

static void s_cleanup(zt_backend_t *self)
{
    zt_slurm_be_t *ctx = self->ctx;
    s_await_signals(ctx);
    ctx->local->cleanup(ctx->local);
}

static void s_destroy(zt_backend_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zt_slurm_be_t *ctx = (*self_p)->ctx;
    zt_slurm_be_release_regained(ctx);
    ctx->local->destroy(&ctx->local);
    s_forget(ctx);
    free(ctx);
    free(*self_p);
    *self_p = NULL;
}

zt_backend_t *zt_backend_slurm_new(void)
{
    zt_backend_t *self = calloc(1, sizeof *self);
    zt_slurm_be_t *ctx = calloc(1, sizeof *ctx);
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
    self->allocation = zt_slurm_job_id(-1);
    self->requeues = zt_slurm_restart_count();
    self->node_lost = zt_slurm_be_node_lost;
    self->requeue = zt_slurm_be_requeue;
    self->give_up = zt_slurm_be_give_up;
    self->drop_node = zt_slurm_be_drop_node;
    self->ending = zt_slurm_be_ending;
    self->regain = zt_slurm_be_regain;
    return self;
}
