/* The local backend: every replica on this machine. Placement: host this
 * machine, address 127.0.0.1, ports the kernel hands out (each kept bound,
 * not listening, until its replica starts, so two jobs started at the same
 * moment never collide), GPUs in pool order. Each replica is a child process
 * in its own process group, killed with the coordinator (PR_SET_PDEATHSIG);
 * the coordinator is a subreaper, so whatever a replica leaves behind comes
 * back to it and is killed at cleanup. */
#include "launch/zt_backend.h"
#include "base/zt_util.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_knobs.h"
#include "ztrain/zt_log.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

struct zt_handle_t {
    pid_t pid;          /* the replica's process (and process group) */
    zt_handle_t *next;  /* live handles */
};

typedef struct {
    pid_t *groups;      /* every process group started, for cleanup */
    int n;              /* how many */
    int cap;            /* allocated */
    int *reserved;      /* per placed replica: its port's reservation socket, or -1 */
    int nreserved;      /* how many placed */
    int master_reserved; /* the chief's MASTER_PORT reservation, or -1 */
    zt_handle_t *live;  /* started and not yet reaped */
} s_local_t;

static void s_unreserve(s_local_t *ctx)
{
    for (int i = 0; i < ctx->nreserved; i++)
        if (ctx->reserved[i] >= 0)
            close(ctx->reserved[i]);
    free(ctx->reserved);
    ctx->reserved = NULL;
    ctx->nreserved = 0;
    if (ctx->master_reserved >= 0)
        close(ctx->master_reserved);
    ctx->master_reserved = -1;
}

static int s_place(zt_backend_t *self, const zt_plan_t *plan, bool cpu_only, zt_placement_t *out)
{
    s_local_t *ctx = self->ctx;
    memset(out, 0, sizeof *out);
    s_unreserve(ctx); /* a new placement replaces an older one */
    int n = zt_plan_replicas(plan);
    out->replicas = calloc((size_t) n, sizeof *out->replicas);
    ctx->reserved = malloc(sizeof(int) * (size_t) (n ? n : 1));
    if (!out->replicas || !ctx->reserved) {
        free(out->replicas);
        out->replicas = NULL;
        return ZT_ENOMEM;
    }
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    snprintf(out->control_addr, sizeof out->control_addr, "127.0.0.1");
    int gpu = 0, k = 0;
    for (int p = 0; p < ZT_POOLS; p++) {
        const zt_pool_t *pool = &plan->pools[p];
        for (int i = 0; pool->present && i < pool->replicas; i++, k++) {
            zt_place_t *pl = &out->replicas[k];
            snprintf(pl->host, sizeof pl->host, "%s", host);
            snprintf(pl->addr, sizeof pl->addr, "127.0.0.1");
            pl->first_gpu = gpu;
            pl->ngpus = cpu_only ? 0 : pool->accel_count;
            gpu += pool->accel_count;
            ctx->reserved[k] = -1;
            ctx->nreserved = k + 1;
            if ((pl->port = zt_reserve_port(&ctx->reserved[k])) < 0) {
                zt_error("cannot reserve a port for workerpool%d-%d: %s", p, i, strerror(errno));
                zt_placement_fini(out);
                s_unreserve(ctx);
                return ZT_ESYS;
            }
        }
    }
    out->n = k;
    if ((out->master_port = zt_reserve_port(&ctx->master_reserved)) < 0) {
        zt_error("cannot reserve a port for MASTER_PORT: %s", strerror(errno));
        zt_placement_fini(out);
        s_unreserve(ctx);
        return ZT_ESYS;
    }
    return ZT_OK;
}

/* Long on purpose: fork and exec. The child's part must stay one straight
 * sequence of async-signal-safe calls (process group, death signal, output
 * to the pipe and the log, exec), next to the parent's bookkeeping it
 * mirrors. */
static int s_start(zt_backend_t *self, const zt_launch_t *req, zt_handle_t **handle_p, int *out_fd)
{
    s_local_t *ctx = self->ctx;
    int pfd[2], sync[2];
    *handle_p = NULL;
    *out_fd = -1;
    /* The replica binds its port now. */
    if (req->ordinal >= 0 && req->ordinal < ctx->nreserved && ctx->reserved[req->ordinal] >= 0) {
        close(ctx->reserved[req->ordinal]);
        ctx->reserved[req->ordinal] = -1;
    }
    if (req->ordinal == 0 && ctx->master_reserved >= 0) { /* the chief: its MASTER_PORT too */
        close(ctx->master_reserved);
        ctx->master_reserved = -1;
    }
    zt_handle_t *h = calloc(1, sizeof *h);
    if (!h)
        return ZT_ENOMEM;
    if (req->log_path) {
        pfd[1] = open(req->log_path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
        pfd[0] = -1;
        if (pfd[1] < 0) {
            free(h);
            return ZT_ESYS;
        }
    }
    else if (pipe2(pfd, O_CLOEXEC) < 0) {
        free(h);
        return ZT_ESYS;
    }
    /* sync: the child's end closes at exec (O_CLOEXEC); until then the child
     * holds copies of all our descriptors, other replicas' port reservations
     * included, so we do not go on before it has exec'd. */
    if (pipe2(sync, O_CLOEXEC) < 0) {
        if (pfd[0] >= 0)
            close(pfd[0]);
        close(pfd[1]);
        free(h);
        return ZT_ESYS;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        if (pfd[0] >= 0)
            close(pfd[0]);
        close(pfd[1]);
        close(sync[0]);
        close(sync[1]);
        free(h);
        return ZT_ESYS;
    }
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, req->death_signal > 0 ? req->death_signal : SIGKILL);
        if (getppid() != parent)
            _exit(137);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        for (int s = 1; s < NSIG; s++)
            if (s != SIGKILL && s != SIGSTOP)
                signal(s, SIG_DFL);
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0)
            dup2(devnull, 0);
        dup2(pfd[1], 1);
        dup2(pfd[1], 2);
        /* Nothing else of the coordinator's leaks into the replica. */
        for (int fd = 3; fd < 1024; fd++)
            if (fd != sync[1])
                close(fd);
        execvpe(req->argv[0], req->argv, req->envp);
        dprintf(2, "ztrain: cannot execute '%s': %s\n", req->argv[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid); /* also here, so the group exists before we signal it */
    close(pfd[1]);
    close(sync[1]);
    char b;
    while (read(sync[0], &b, 1) < 0 && errno == EINTR)
        ; /* EOF: the child has exec'd (or exited) */
    close(sync[0]);
    if (pfd[0] >= 0)
        fcntl(pfd[0], F_SETFL, fcntl(pfd[0], F_GETFL) | O_NONBLOCK);
    if (ctx->n == ctx->cap) {
        int cap = ctx->cap ? ctx->cap * 2 : 16;
        pid_t *g = realloc(ctx->groups, (size_t) cap * sizeof *g);
        if (g) {
            ctx->groups = g;
            ctx->cap = cap;
        }
    }
    if (ctx->n < ctx->cap)
        ctx->groups[ctx->n++] = pid;
    h->pid = pid;
    h->next = ctx->live;
    ctx->live = h;
    *handle_p = h;
    *out_fd = pfd[0];
    return ZT_OK;
}

static int s_signal(zt_backend_t *self, zt_handle_t *h, int sig)
{
    (void) self;
    if (!h || h->pid <= 0)
        return ZT_EINVAL;
    if (kill(-h->pid, sig) < 0 && kill(h->pid, sig) < 0)
        return errno == ESRCH ? ZT_ENOTFOUND : ZT_ESYS;
    return ZT_OK;
}

/* Ids that are no replica of ours (their orphans, reparented to us) are
 * collected and passed over. */
static int s_reap(zt_backend_t *self, zt_handle_t **handle_p, int *status)
{
    s_local_t *ctx = self->ctx;
    pid_t p;
    while ((p = waitpid(-1, status, WNOHANG)) > 0)
        for (zt_handle_t **at = &ctx->live; *at; at = &(*at)->next)
            if ((*at)->pid == p) {
                *handle_p = *at;
                *at = (*at)->next;
                (*handle_p)->next = NULL;
                return 1;
            }
    return 0;
}

static void s_release(zt_backend_t *self, zt_handle_t **handle_p)
{
    s_local_t *ctx = self->ctx;
    if (!handle_p || !*handle_p)
        return;
    for (zt_handle_t **at = &ctx->live; *at; at = &(*at)->next)
        if (*at == *handle_p) {
            *at = (*at)->next; /* given back before it ended: forget it */
            break;
        }
    free(*handle_p);
    *handle_p = NULL;
}

static int64_t s_pid(zt_backend_t *self, const zt_handle_t *h)
{
    (void) self;
    return h ? h->pid : 0;
}

/* Our children now: replicas' orphans are reparented to us (subreaper). */
static int s_children(pid_t *out, int max)
{
    int n = 0;
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    struct dirent *e;
    pid_t me = getpid();
    while ((e = readdir(d)) && n < max) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 0)
            continue;
        char path[64], buf[512];
        snprintf(path, sizeof path, "/proc/%ld/stat", pid);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[len] = 0;
        char *rp = strrchr(buf, ')'); /* comm may contain spaces */
        int ppid;
        char state;
        if (rp && sscanf(rp + 1, " %c %d", &state, &ppid) == 2 && ppid == me)
            out[n++] = (pid_t) pid;
    }
    closedir(d);
    return n;
}

static void s_cleanup(zt_backend_t *self)
{
    s_local_t *ctx = self->ctx;
    for (int i = 0; i < ctx->n; i++)
        kill(-ctx->groups[i], SIGKILL);
    for (int round = 0; round < 50; round++) {
        pid_t kids[256];
        int n = s_children(kids, 256);
        int status;
        while (waitpid(-1, &status, WNOHANG) > 0)
            ;
        if (n == 0)
            break;
        for (int i = 0; i < n; i++) {
            zt_debug("killing left-over process %d", (int) kids[i]);
            kill(kids[i], SIGKILL);
        }
        usleep(20000);
    }
}

static void s_destroy(zt_backend_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    s_local_t *ctx = (*self_p)->ctx;
    s_unreserve(ctx);
    while (ctx->live) {
        zt_handle_t *h = ctx->live;
        ctx->live = h->next;
        free(h);
    }
    free(ctx->groups);
    free(ctx);
    free(*self_p);
    *self_p = NULL;
}

zt_backend_t *zt_backend_local_new(void)
{
    zt_backend_t *self = calloc(1, sizeof *self);
    s_local_t *ctx = calloc(1, sizeof *ctx);
    if (!self || !ctx) {
        free(self);
        free(ctx);
        return NULL;
    }
    ctx->master_reserved = -1;
    /* Orphans of replicas come back to us, so cleanup can find them. */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    self->name = "local";
    self->ctx = ctx;
    self->place = s_place;
    self->start = s_start;
    self->signal = s_signal;
    self->reap = s_reap;
    self->release = s_release;
    self->pid = s_pid;
    self->cleanup = s_cleanup;
    self->destroy = s_destroy;
    return self;
}
