/* The local backend: each replica is a child process in its own process
 * group, killed with the coordinator (PR_SET_PDEATHSIG); the coordinator is
 * a subreaper, so whatever a replica leaves behind comes back to it and is
 * killed at cleanup. */
#include "launch/zt_backend.h"
#include "ztrain/zt_error.h"
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

typedef struct {
    pid_t *groups;      /* every process group started, for cleanup */
    int n;              /* how many */
    int cap;            /* allocated */
} s_local_t;

static int s_start(zt_backend_t *self, const zt_launch_t *req, pid_t *pid_p, int *out_fd)
{
    s_local_t *ctx = self->ctx;
    int pfd[2], sync[2];
    if (pipe2(pfd, O_CLOEXEC) < 0)
        return ZT_ESYS;
    /* sync: the child's end closes at exec (O_CLOEXEC); until then the child
     * holds copies of all our descriptors, other replicas' port reservations
     * included, so we do not go on before it has exec'd. */
    if (pipe2(sync, O_CLOEXEC) < 0) {
        close(pfd[0]);
        close(pfd[1]);
        return ZT_ESYS;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        close(pfd[0]);
        close(pfd[1]);
        close(sync[0]);
        close(sync[1]);
        return ZT_ESYS;
    }
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
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
    *pid_p = pid;
    *out_fd = pfd[0];
    return ZT_OK;
}

static int s_kill(zt_backend_t *self, pid_t pid, int sig)
{
    (void) self;
    if (pid <= 0)
        return ZT_EINVAL;
    if (kill(-pid, sig) < 0 && kill(pid, sig) < 0)
        return errno == ESRCH ? ZT_ENOTFOUND : ZT_ESYS;
    return ZT_OK;
}

static int s_reap(zt_backend_t *self, pid_t *pid, int *status)
{
    (void) self;
    pid_t p = waitpid(-1, status, WNOHANG);
    if (p <= 0)
        return 0;
    *pid = p;
    return 1;
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
    /* Orphans of replicas come back to us, so cleanup can find them. */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    self->name = "local";
    self->ctx = ctx;
    self->start = s_start;
    self->kill = s_kill;
    self->reap = s_reap;
    self->cleanup = s_cleanup;
    self->destroy = s_destroy;
    return self;
}
