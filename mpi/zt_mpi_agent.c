/* `ztrain-mpi agent HOST WORD...`: mpirun's remote shell. On the primary's
 * own host the command runs here; on another it runs under that host's
 * `ztrain-mpi host`, reached over the job's secured control plane. The
 * exit status is the command's, or 255 when the host cannot be reached or
 * falls silent (as ssh's). */
#include "zt_mpi.h"
#include "base/zt_env.h"
#include "base/zt_util.h"
#include "wire/zt_auth.h"
#include "wire/zt_msg.h"
#include "wire/zt_transport.h"
#include "ztrain/zt_knobs.h"
#include "ztrain/zt_log.h"
#include <czmq.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* How long a host may take to answer at first (its replica may still be
 * starting), in ms. */
#define FIRST_ANSWER_MS 60000

static volatile sig_atomic_t s_stop;
static void s_on_signal(int sig) { s_stop = sig; }

char *zt_mpi_join(int argc, char *const *argv)
{
    size_t len = 1;
    for (int i = 0; i < argc; i++)
        len += strlen(argv[i]) + 1;
    char *line = calloc(1, len);
    for (int i = 0; i < argc; i++) {
        if (i)
            strcat(line, " ");
        strcat(line, argv[i]);
    }
    return line;
}

/* Sends [header][command] (command NULL: the header alone). */
static int s_send(zsock_t *sock, const zt_msg_t *m, const char *command)
{
    zframe_t *f = zt_msg_encode(m);
    if (!f || zframe_send(&f, sock, command ? ZFRAME_MORE : 0) < 0) {
        zframe_destroy(&f);
        return -1;
    }
    if (!command)
        return 0;
    zframe_t *c = zframe_new(command, strlen(command));
    return zframe_send(&c, sock, 0) < 0 ? -1 : 0;
}

/* Waits for the host's answer to req, heartbeating; the exit status. */
static int s_wait(zsock_t *sock, const char *host, const char *addr, const zt_msg_t *hb)
{
    int64_t hb_ms = zt_knob_int(ZT_KNOB_HEARTBEAT_MS), silent_ms = 10 * hb_ms;
    int64_t start = zt_now_ms(), heard = 0, sent = start;
    zpoller_t *poller = zpoller_new(sock, NULL);
    int status = 255;
    while (!s_stop) {
        int64_t now = zt_now_ms();
        if (!heard && now - start > FIRST_ANSWER_MS) {
            zt_error("host %s (%s) did not answer in %d s: is its ztrain-mpi host running?", host, addr,
                     FIRST_ANSWER_MS / 1000);
            break;
        }
        if (heard && now - heard > silent_ms) {
            zt_error("host %s (%s) silent for %lld s: its command is taken as lost", host, addr,
                     (long long) (now - heard) / 1000);
            break;
        }
        if (now - sent >= hb_ms) {
            s_send(sock, hb, NULL);
            sent = now;
        }
        if (!zpoller_wait(poller, (int) (hb_ms < 200 ? hb_ms : 200)))
            continue;
        zframe_t *f = zframe_recv(sock);
        zt_msg_t m;
        int rc = f ? zt_msg_decode(zframe_data(f), zframe_size(f), &m, NULL) : -1;
        zframe_destroy(&f);
        while (zsock_rcvmore(sock)) { /* nothing else is expected */
            f = zframe_recv(sock);
            zframe_destroy(&f);
        }
        if (rc != 0)
            continue;
        heard = zt_now_ms();
        if (m.type == ZT_MSG_MPI_EXITED && m.u.MPI_EXITED.req == 1) {
            if (m.u.MPI_EXITED.status < 0)
                zt_error("host %s refused the command: %s", host, m.u.MPI_EXITED.reason);
            status = m.u.MPI_EXITED.status < 0 ? 255 : (int) m.u.MPI_EXITED.status;
            break;
        }
    }
    zpoller_destroy(&poller);
    return status;
}

int zt_mpi_agent(const char *host, int argc, char **argv)
{
    if (argc < 1) {
        zt_error("agent: no command for host %s", host);
        return 255;
    }
    char *command = zt_mpi_join(argc, argv);
    const char *me = zt_env_get(ZT_ENV_SM_CURRENT_HOST);
    if (me && !strcmp(me, host)) { /* this host: the daemon is a child of mpirun's agent, here */
        char **vars = zt_mpi_host_vars(host); /* no thread yet here: the environment is ours to change */
        for (int i = 0; vars[i]; i++)
            putenv(vars[i]);
        execl("/bin/sh", "sh", "-c", command, (char *) NULL);
        zt_error("cannot run /bin/sh: %m");
        return 255;
    }
    const char *text = zt_env_get(ZT_ENV_MPI_HOSTS);
    json_t *hosts = text ? json_loads(text, 0, NULL) : NULL;
    const char *addr = json_string_value(json_object_get(hosts, host));
    if (!addr) {
        zt_error("agent: no host '%s' in %s ('%s')", host, zt_env_name(ZT_ENV_MPI_HOSTS), text ? text : "");
        json_decref(hosts);
        free(command);
        return 255;
    }
    if (strlen(command) >= ZT_MPI_COMMAND_MAX) {
        zt_error("agent: a command of %zu bytes for %s (at most %d)", strlen(command), host, ZT_MPI_COMMAND_MAX - 1);
        json_decref(hosts);
        free(command);
        return 255;
    }
    zsock_t *sock = zt_sock_dealer(ZT_PLANE_CONTROL, addr);
    signal(SIGTERM, s_on_signal); /* after CZMQ's own, which the first socket installs */
    signal(SIGINT, s_on_signal);
    signal(SIGHUP, s_on_signal);
    int status = 255;
    if (!sock)
        zt_error("agent: cannot connect to host %s at %s", host, addr);
    else if (!zt_auth_on())
        zt_error("agent: no job credentials (%s): a host runs commands only for its job's primary replica",
                 zt_env_name(ZT_ENV_CREDENTIALS));
    else {
        zt_msg_t m = { .type = ZT_MSG_MPI_EXEC, .pool = (int) zt_env_int_or(ZT_ENV_POOL, 0),
                       .index = (int) zt_env_int_or(ZT_ENV_INDEX, 0),
                       .incarnation = zt_env_int_or(ZT_ENV_INCARNATION, 0) };
        m.u.MPI_EXEC.req = 1;
        zt_msg_t hb = m;
        hb.type = ZT_MSG_HEARTBEAT;
        if (s_send(sock, &m, command) == 0)
            status = s_wait(sock, host, addr, &hb);
    }
    zt_sock_destroy(&sock);
    json_decref(hosts);
    free(command);
    return status;
}
