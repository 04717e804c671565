/* `ztrain-mpi host`: a SageMaker host of an mpi job other than the primary.
 * It registers with the coordinator, listens at ZT_ADDRESS on the job's
 * control plane, and runs the commands the primary's agent sends (Open
 * MPI's daemon, which starts this host's ranks) as its own children:
 * under its process group (the job's stop reaches them), with their parent's
 * death their own (PR_SET_PDEATHSIG), and killed when their agent falls
 * silent. A command from any other replica is refused and counted. */
#include "zt_mpi.h"
#include "base/zt_env.h"
#include "base/zt_refusals.h"
#include "base/zt_util.h"
#include "runtime/zt_process.h"
#include "wire/zt_auth.h"
#include "wire/zt_msg.h"
#include "wire/zt_transport.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_knobs.h"
#include "ztrain/zt_log.h"
#include "ztrain/zt_replica.h"
#include <czmq.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_RUNNING 16
#define KILL_GRACE_MS 3000

/* One command running for an agent. */
typedef struct {
    pid_t pid;           /* 0: a free slot */
    int64_t req;
    zframe_t *agent;     /* its agent's routing id */
    int64_t heard;       /* when its agent last spoke */
    int64_t kill_at;     /* SIGKILL after a SIGTERM (0: none sent) */
} s_run_t;

typedef struct {
    zsock_t *router;
    s_run_t runs[MAX_RUNNING];
    zt_refusals_t refused;
    zt_replica_t *rep;
    const char *host;    /* SM_CURRENT_HOST */
    int64_t hb_ms;
} s_host_t;

/* ------------------------------------------------------------ a daemon's variables */

static const char *const s_names[ZT_MPI_HOST_VARS] = { "OMPI_MCA_btl_vader_backing_directory", "PMIX_MCA_gds",
                                                        "OMPI_MCA_rtc_hwloc_vmhole" };

char **zt_mpi_host_vars(const char *host)
{
    char **vars = calloc(ZT_MPI_HOST_VARS + 1, sizeof *vars);
    int n = 0;
    const char *job = zt_env_get(ZT_ENV_JOB_DIR);
    if (job && host && *host && !strchr(host, '/')) {
        char *dir = zt_strdupf("%s/mpi/%s", job, host);
        if (zt_mkdir_p(dir) == 0 && chmod(dir, 0700) == 0)
            vars[n++] = zt_strdupf("%s=%s", s_names[0], dir);
        free(dir);
    }
    vars[n++] = zt_strdupf("%s=hash", s_names[1]);
    vars[n++] = zt_strdupf("%s=none", s_names[2]);
    return vars;
}

bool zt_mpi_host_var_named(const char *s)
{
    for (int i = 0; i < ZT_MPI_HOST_VARS; i++) {
        size_t len = strlen(s_names[i]);
        if (!strncmp(s, s_names[i], len) && s[len] == '=')
            return true;
    }
    return false;
}

/* ------------------------------------------------------------ serving */

static void s_answer(s_host_t *self, zframe_t *agent, int64_t req, int64_t status, const char *reason)
{
    zt_msg_t m = { .type = ZT_MSG_MPI_EXITED };
    m.u.MPI_EXITED.req = req;
    m.u.MPI_EXITED.status = status;
    zt_msg_set_str(m.u.MPI_EXITED.reason, reason ? reason : "");
    zt_msg_send(self->router, agent, &m);
}

static void s_heartbeat(s_host_t *self, zframe_t *agent)
{
    zt_msg_t m = { .type = ZT_MSG_HEARTBEAT };
    zt_msg_send(self->router, agent, &m);
}

/* The command in a child of ours, dying with us (PR_SET_PDEATHSIG), under
 * this host's variables (zt_mpi_host_vars). Everything the child needs is made
 * before the fork: this process has threads (ZeroMQ's, the heartbeat's),
 * so the child only execs. */
static pid_t s_spawn(s_host_t *self, const char *command)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **envp = calloc(n + ZT_MPI_HOST_VARS + 1, sizeof *envp), **vars = zt_mpi_host_vars(self->host);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!zt_mpi_host_var_named(environ[i]))
            envp[k++] = environ[i];
    for (int i = 0; vars[i]; i++)
        envp[k++] = vars[i];
    char *argv[] = { "sh", "-c", (char *) command, NULL };
    pid_t parent = getpid(), pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        execve("/bin/sh", argv, envp);
        _exit(127);
    }
    free(envp);
    for (int i = 0; vars[i]; i++)
        free(vars[i]);
    free(vars);
    return pid;
}

/* One message from an agent: [id][header][command]. */
static void s_receive(s_host_t *self)
{
    zmsg_t *msg = zmsg_recv(self->router);
    zframe_t *id = msg ? zmsg_pop(msg) : NULL, *head = msg ? zmsg_pop(msg) : NULL, *cmd = msg ? zmsg_pop(msg) : NULL;
    zt_msg_t m;
    if (!id || !head || zt_msg_decode(zframe_data(head), zframe_size(head), &m, NULL) != ZT_OK)
        goto done;
    int64_t now = zt_now_ms();
    if (m.type == ZT_MSG_HEARTBEAT) {
        for (int i = 0; i < MAX_RUNNING; i++)
            if (self->runs[i].pid && zframe_eq(self->runs[i].agent, id))
                self->runs[i].heard = now;
        goto done;
    }
    if (m.type != ZT_MSG_MPI_EXEC)
        goto done;
    const char *peer = zt_auth_peer(head);
    if (!peer || strcmp(peer, ZT_MPI_PRIMARY)) {
        char what[160];
        snprintf(what, sizeof what, "a command from %s: only the primary host (%s) starts processes here",
                 peer && *peer ? peer : "a peer without the job's keys", ZT_MPI_PRIMARY);
        zt_process_refused(&self->refused, self->rep, "mpi_refused", what);
        s_answer(self, id, m.u.MPI_EXEC.req, -1, "only the job's primary host starts processes on its hosts");
        goto done;
    }
    size_t len = cmd ? zframe_size(cmd) : 0;
    int slot = -1;
    for (int i = 0; i < MAX_RUNNING && slot < 0; i++)
        if (!self->runs[i].pid)
            slot = i;
    const char *why = !len || len >= ZT_MPI_COMMAND_MAX ? "no command, or one over 64 KiB"
                      : memchr(zframe_data(cmd), 0, len) ? "a command with a NUL byte"
                      : slot < 0                          ? "too many commands running here"
                                                          : NULL;
    if (why) {
        zt_warn("refused the primary's command: %s", why);
        s_answer(self, id, m.u.MPI_EXEC.req, -1, why);
        goto done;
    }
    char *command = strndup((const char *) zframe_data(cmd), len);
    pid_t pid = s_spawn(self, command);
    if (pid < 0) {
        s_answer(self, id, m.u.MPI_EXEC.req, -1, "fork failed");
        free(command);
        goto done;
    }
    zt_info("running for %s (pid %d): %.200s%s", peer, (int) pid, command, len > 200 ? "..." : "");
    free(command);
    self->runs[slot] = (s_run_t) { .pid = pid, .req = m.u.MPI_EXEC.req, .agent = zframe_dup(id), .heard = now };
    s_heartbeat(self, id); /* started: the agent hears us from now on */
done:
    zframe_destroy(&id);
    zframe_destroy(&head);
    zframe_destroy(&cmd);
    zmsg_destroy(&msg);
}

/* Reaps ended commands (answered), heartbeats the running ones' agents,
 * and ends those whose agent fell silent. */
static void s_tend(s_host_t *self, bool beat)
{
    int64_t now = zt_now_ms();
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
        for (int i = 0; i < MAX_RUNNING; i++)
            if (self->runs[i].pid == pid) {
                s_run_t *r = &self->runs[i];
                int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
                zt_info("pid %d ended with status %d", (int) pid, code);
                s_answer(self, r->agent, r->req, code, "");
                zframe_destroy(&r->agent);
                *r = (s_run_t) { 0 };
            }
    for (int i = 0; i < MAX_RUNNING; i++) {
        s_run_t *r = &self->runs[i];
        if (!r->pid)
            continue;
        if (beat)
            s_heartbeat(self, r->agent);
        if (!r->kill_at && now - r->heard > 10 * self->hb_ms) {
            zt_warn("the agent of pid %d silent for %lld s: ending its command", (int) r->pid,
                    (long long) (now - r->heard) / 1000);
            kill(r->pid, SIGTERM);
            r->kill_at = now + KILL_GRACE_MS;
        }
        else if (r->kill_at && now > r->kill_at)
            kill(r->pid, SIGKILL);
    }
}

/* The job stops: every command ended (SIGTERM, then SIGKILL). */
static void s_end_all(s_host_t *self)
{
    int left = 0;
    for (int i = 0; i < MAX_RUNNING; i++)
        if (self->runs[i].pid) {
            kill(self->runs[i].pid, SIGTERM);
            left++;
        }
    int64_t until = zt_now_ms() + KILL_GRACE_MS;
    while (left && zt_now_ms() < until) {
        pid_t pid = waitpid(-1, NULL, WNOHANG);
        for (int i = 0; pid > 0 && i < MAX_RUNNING; i++)
            if (self->runs[i].pid == pid) {
                self->runs[i].pid = 0;
                left--;
            }
        if (pid <= 0)
            usleep(20000);
    }
    for (int i = 0; i < MAX_RUNNING; i++) {
        if (self->runs[i].pid) {
            kill(self->runs[i].pid, SIGKILL);
            waitpid(self->runs[i].pid, NULL, 0);
        }
        zframe_destroy(&self->runs[i].agent);
    }
}

int zt_mpi_host(void)
{
    zt_process_log_init("mpi-host", (int) zt_env_int_or(ZT_ENV_INDEX, -1));
    if (!zt_process_knobs_ok())
        return 2;
    s_host_t self = { .host = zt_env_get(ZT_ENV_SM_CURRENT_HOST), .hb_ms = zt_knob_int(ZT_KNOB_HEARTBEAT_MS) };
    const char *addr = zt_env_get(ZT_ENV_ADDRESS);
    if (!addr || !self.host || !zt_env_get(ZT_ENV_COORDINATOR)) {
        zt_error("host: run by `ztrain run` as a SageMaker job's host (%s, %s and %s unset)", zt_env_name(ZT_ENV_ADDRESS),
                 zt_env_name(ZT_ENV_SM_CURRENT_HOST), zt_env_name(ZT_ENV_COORDINATOR));
        return 2;
    }
    char *endpoint = zt_strdupf("tcp://%s", addr);
    self.router = zt_sock_router(ZT_PLANE_CONTROL, endpoint, NULL);
    free(endpoint);
    if (!self.router)
        return 1;
    if (!zt_auth_on()) { /* nobody may start processes here without the job's keys */
        zt_error("host: the job has no credentials (%s; ZT_SECURITY=off?): distribution mpi starts processes on "
                 "its hosts only for the job's primary replica, which only the job's keys can tell",
                 zt_env_name(ZT_ENV_CREDENTIALS));
        zt_sock_destroy(&self.router);
        return 2;
    }
    self.rep = zt_replica_new("mpi-host", 0);
    if (!self.rep) {
        zt_sock_destroy(&self.router);
        return 1;
    }
    zt_info("host %s: waiting at %s for the primary's mpirun", self.host, addr);
    zpoller_t *poller = zpoller_new(self.router, NULL);
    int64_t beat = zt_now_ms();
    while (!zt_process_stop_requested(self.rep)) {
        if (zpoller_wait(poller, 100))
            s_receive(&self);
        bool due = zt_now_ms() - beat >= self.hb_ms;
        if (due)
            beat = zt_now_ms();
        s_tend(&self, due);
        zt_process_refusals_flush(&self.refused, self.rep, "mpi_refused");
    }
    s_end_all(&self);
    zpoller_destroy(&poller);
    zt_sock_destroy(&self.router);
    int status = zt_process_exit(self.rep, 0);
    zt_replica_destroy(&self.rep);
    return status;
}
