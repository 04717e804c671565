/* zt_coord: the coordinator's loop and its set-up: signals, reaping,
 * timers (heartbeats, registration, the grace period, the job's timeout),
 * the job's keys, the Prometheus endpoint. What the loop's events do is in
 * the files named in zt_coord_int.h. */
#include "chief/zt_coord_int.h"
#include "formats/zt_format.h"
#include "base/zt_util.h"
#include "wire/zt_auth.h"
#include "wire/zt_transport.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_knobs.h"
#include "ztrain/zt_log.h"
#include <czmq.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

static int s_sig_fd = -1;

static void s_on_signal(int sig)
{
    int saved = errno;
    unsigned char b = (unsigned char) sig;
    if (s_sig_fd >= 0 && write(s_sig_fd, &b, 1) < 0) {
    }
    errno = saved;
}

static void s_install_signals(zt_coord_t *self)
{
    if (pipe2(self->sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
        self->sig_pipe[0] = self->sig_pipe[1] = -1;
    s_sig_fd = self->sig_pipe[1];
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = s_on_signal;
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigaction(SIGCHLD, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

static int s_live(zt_coord_t *self)
{
    int n = 0;
    for (int i = 0; i < self->nreps; i++)
        n += self->reps[i].handle != NULL;
    return n;
}

static zt_crep_t *s_find(zt_coord_t *self, const zt_handle_t *h)
{
    for (int i = 0; i < self->nreps; i++)
        if (self->reps[i].handle == h)
            return &self->reps[i];
    return NULL;
}

static void s_reap_all(zt_coord_t *self)
{
    zt_handle_t *h;
    int status;
    while (self->backend->reap(self->backend, &h, &status) == 1) {
        zt_crep_t *r = s_find(self, h);
        if (r && r->registered) {
            /* what it sent just before it exited (a stop's checkpoint) has
             * left its socket (linger) but may not have reached the router's
             * queue yet: read until the router is quiet for 20 ms */
            zmq_pollitem_t it = { zsock_resolve(self->router), 0, ZMQ_POLLIN, 0 };
            for (int i = 0; i < 50 && zmq_poll(&it, 1, 20) > 0; i++)
                zt_coord_on_control(self);
        }
        if (r)
            zt_coord_replica_exited(self, r, status);
        else
            self->backend->release(self->backend, &h);
    }
}

static void s_timers(zt_coord_t *self)
{
    int64_t now = zt_now_ms();
    zt_coord_record_refusals_seen(self->rec, zt_auth_refused());
    if (zt_coord_record_due(self->rec, now, 1000))
        zt_coord_write_state(self);
    zt_coord_check_final_evaluation(self);
    if (zt_coord_elastic_tick(self))
        zt_coord_stop_all(self, ZT_AFTER_RESPAWN, ZT_JOB_FAILED);
    zt_coord_release_held_stops(self);
    zt_coord_judge_held(self, false);
    zt_coord_stop_tick(self, now);
    if (self->job_deadline && now >= self->job_deadline && self->state < ZT_JOB_SUCCEEDED) {
        char why[128];
        snprintf(why, sizeof why, "%s of %.0fs reached",
                 self->plan->timeout_field ? self->plan->timeout_field : "scheduling.timeout", self->plan->timeout_s);
        self->job_deadline = 0;
        zt_coord_cancel(self, why);
    }
    if (!self->stopping)
        zt_coord_check_silent(self);
}

/* The job's keys, made afresh for every run of the coordinator (before its
 * first socket, which is then a CURVE server): one file per replica in
 * <job-dir>/credentials, handed over by path (ZT_CREDENTIALS). */
static bool s_make_credentials(zt_coord_t *self)
{
    int n = zt_plan_replicas(self->plan), k = 0;
    char **names = calloc((size_t) n + 1, sizeof *names);
    for (int p = 0; p < ZT_POOLS; p++)
        for (int i = 0; self->plan->pools[p].present && i < self->plan->pools[p].replicas && k < n; i++) {
            names[k] = malloc(64);
            zt_layout_name(p, i, names[k++], 64);
        }
    zt_mkdir_p(self->layout.job_dir);
    char *dir = zt_strdupf("%s/credentials", self->layout.job_dir);
    int rc = zt_auth_make_job(dir, names, k);
    if (rc == ZT_OK && zt_auth_on())
        self->layout.credentials = dir;
    else
        free(dir);
    zt_strv_free(names);
    return rc == ZT_OK;
}

/* The Prometheus endpoint: on loopback unless ZT_METRICS_ADDR says
 * otherwise, which needs ZT_SECURITY=off: the endpoint authenticates no
 * one, so it leaves this machine only where the job's sockets do in the
 * clear. */
/* The bearer token of the job's /metrics (with security on): 32 random
 * bytes in hex, in <job-dir>/credentials/metrics.token (0600), which only
 * the job's user can read and a scrape config names. NULL on failure. */
static char *s_metrics_token(zt_coord_t *self)
{
    unsigned char raw[32];
    if (getrandom(raw, sizeof raw, 0) != (ssize_t) sizeof raw)
        return NULL;
    char *token = malloc(2 * sizeof raw + 1);
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(token + 2 * i, 3, "%02x", raw[i]);
    char *dir = zt_strdupf("%s/credentials", self->layout.job_dir);
    zt_mkdir_p(dir);
    free(self->metrics_token_file);
    self->metrics_token_file = zt_strdupf("%s/metrics.token", dir);
    free(dir);
    if (zt_write_file_private(self->metrics_token_file, token, strlen(token)) != ZT_OK) {
        zt_error("cannot write %s: %s", self->metrics_token_file, strerror(errno));
        free(token);
        return NULL;
    }
    return token;
}

static int s_start_metrics(zt_coord_t *self, int port)
{
    const char *addr = zt_knob_str(ZT_KNOB_METRICS_ADDR);
    if (strncmp(addr, "127.", 4) && zt_auth_on()) {
        zt_error("ZT_METRICS_ADDR=%s: metrics served beyond this machine are not authenticated; that needs "
                 "ZT_SECURITY=off (or serve them on 127.0.0.1 and let the scraper reach them through a tunnel)",
                 addr);
        return ZT_EINVAL;
    }
    char *token = zt_auth_on() ? s_metrics_token(self) : NULL; /* for the job's user only */
    if (zt_auth_on() && !token)
        return ZT_EIO;
    char err[512];
    self->prom = zt_prom_start(addr, port, token, err, sizeof err);
    if (!self->prom && port != 0) { /* a port taken is no reason to fail the job */
        zt_warn("--metrics-port %d: %s; serving on a port the system picks instead", port, err);
        self->prom = zt_prom_start(addr, 0, token, err, sizeof err);
    }
    free(token);
    if (!self->prom) {
        zt_error("--metrics-port %d: %s", port, err);
        return ZT_EIO;
    }
    zt_info("Prometheus metrics on http://%s:%d/metrics%s%s%s", addr, zt_prom_port(self->prom),
            self->metrics_token_file ? " (bearer token in " : "",
            self->metrics_token_file ? self->metrics_token_file : "", self->metrics_token_file ? ")" : "");
    if (self->metrics_token_file)
        zt_info("the token's file is for a scrape config: authorization: {credentials_file: %s}",
                self->metrics_token_file);
    return ZT_OK;
}

/* The control plane's ROUTER on the placement's control address, on a port
 * above the usual ephemeral ones when one is free; its endpoint becomes
 * the job's coordinator address. The transport learns the job's hosts
 * first: the port accepts connections from their addresses only. */
static bool s_bind_control(zt_coord_t *self)
{
    int port = -1;
    json_t *hosts = zt_layout_hosts(&self->layout);
    char *map = json_dumps(hosts, JSON_COMPACT);
    json_decref(hosts);
    zt_transport_set_hosts("", map); /* "": no replica's host is this process's own */
    free(map);
    const char *caddr = self->layout.placement.control_addr;
    char *ep = zt_strdupf("tcp://%s:*[49152-]", caddr);
    self->router = zt_sock_router(ZT_PLANE_CONTROL, ep, &port);
    free(ep);
    if (!self->router) {
        ep = zt_strdupf("tcp://%s:*", caddr);
        self->router = zt_sock_router(ZT_PLANE_CONTROL, ep, &port);
        free(ep);
    }
    if (!self->router) {
        zt_error("cannot bind the control plane on %s", caddr);
        return false;
    }
    self->layout.coordinator = zt_strdupf("tcp://%s:%d", caddr, port);
    return true;
}

zt_coord_t *zt_coord_new(zt_plan_t **plan_p, zt_backend_t **backend_p, const zt_coord_opts_t *opts)
{
    zt_coord_t *self = calloc(1, sizeof *self);
    self->el = zt_coord_elastic_new();
    self->log_fd = -1;
    self->plan = *plan_p;
    *plan_p = NULL;
    self->backend = *backend_p;
    *backend_p = NULL;
    self->opts = *opts;
    self->sig_pipe[0] = self->sig_pipe[1] = -1;
    self->rec = zt_coord_record_new();
    self->ctl = zt_coord_ctl_new();
    self->sv = zt_coord_supervisor_new();
    /* an elastic pool: a slot (a place, ports) for each replica it may grow to */
    zt_pool_t *p1 = &self->plan->pools[1];
    int elastic_start = p1->replicas;
    if (p1->present && p1->elastic_min && p1->elastic_max > p1->replicas)
        p1->replicas = p1->elastic_max;
    zt_placement_t placement;
    if (self->backend->place(self->backend, self->plan, opts->cpu_only, &placement) != ZT_OK ||
        zt_layout_init(&self->layout, self->plan, &placement, opts->job_dir, opts->trial) != ZT_OK) {
        zt_error("the %s backend cannot place the job", self->backend->name);
        zt_coord_destroy(&self);
        return NULL;
    }
    zt_coord_continue_earlier(self);
    if (!zt_coord_continue_requeued(self)) {
        zt_coord_destroy(&self);
        return NULL;
    }
    /* CZMQ must not take SIGINT/SIGTERM: the coordinator handles them. */
    zsys_handler_set(NULL);
    if (!s_make_credentials(self)) {
        zt_coord_destroy(&self);
        return NULL;
    }
    if (!s_bind_control(self)) {
        zt_coord_destroy(&self);
        return NULL;
    }
    self->nreps = zt_plan_replicas(self->plan);
    self->reps = calloc((size_t) self->nreps, sizeof *self->reps);
    for (int p = 0, n = 0; p < ZT_POOLS; p++)
        for (int i = 0; self->plan->pools[p].present && i < self->plan->pools[p].replicas; i++) {
            zt_crep_t *r = &self->reps[n++];
            r->pool = p;
            r->index = i;
            r->out_fd = -1;
            r->last_status = -1;
            zt_layout_name(p, i, r->name, sizeof r->name);
        }
    zt_coord_elastic_init(self, elastic_start);
    self->log_fd = zt_crep_open_logs(self->opts.job_dir, self->reps, self->nreps);
    if (opts->metrics_port >= 0 && s_start_metrics(self, opts->metrics_port) != ZT_OK) {
        zt_coord_destroy(&self);
        return NULL;
    }
    zt_format_make_folders(&self->layout); /* the output folders */
    s_install_signals(self);
    return self;
}

void zt_coord_destroy(zt_coord_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zt_coord_t *self = *self_p;
    if (self->backend) {
        self->backend->cleanup(self->backend);
        self->backend->destroy(&self->backend);
    }
    for (int i = 0; i < self->nreps; i++) {
        zt_crep_t *r = &self->reps[i];
        if (r->out_fd >= 0)
            close(r->out_fd);
        if (r->log)
            fclose(r->log);
        free(r->log_path);
        zframe_destroy(&r->identity);
    }
    free(self->reps);
    zt_prom_stop(&self->prom);
    if (self->log_fd >= 0) {
        zt_log_tee(-1);
        close(self->log_fd);
    }
    zt_sock_destroy(&self->router);
    zt_ipc_sweep(); /* what replicas killed with SIGKILL left behind */
    zt_layout_fini(&self->layout);
    zt_plan_destroy(&self->plan);
    zt_coord_record_destroy(&self->rec);
    zt_coord_elastic_destroy(&self->el);
    zt_coord_supervisor_destroy(&self->sv);
    zt_coord_ctl_destroy(&self->ctl);
    s_sig_fd = -1;
    if (self->sig_pipe[0] >= 0) {
        close(self->sig_pipe[0]);
        close(self->sig_pipe[1]);
    }
    free(self->metrics_token_file);
    free(self);
    *self_p = NULL;
}

/* The signals the handler queued: SIGTERM, SIGINT, SIGHUP end the job
 * (a cancel, a lost node, a preemption: the backend says which); SIGCHLD
 * only wakes the loop. */
static void s_on_signals(zt_coord_t *self)
{
    unsigned char sigs[64];
    ssize_t got = read(self->sig_pipe[0], sigs, sizeof sigs);
    for (ssize_t i = 0; i < got; i++)
        if (sigs[i] == SIGTERM && (self->state == ZT_JOB_CANCELLING || zt_coord_preempting(self))) {
            /* the stop under way, told again (Slurm signals the job
             * as its backend notices the end): the grace holds (a
             * second Ctrl-C is what kills at once), unless Slurm now
             * says that the cancel was a preemption */
            char why[1024];
            if (!zt_coord_preempting(self) && self->backend->ending &&
                self->backend->ending(self->backend, why, sizeof why) == ZT_END_REQUEUED)
                zt_coord_preempted(self, why);
            else
                zt_debug("SIGTERM again: the job is stopping already");
        }
        else if (sigs[i] != SIGCHLD) {
            char why[1024];
            /* the scheduler ends the allocation because a node failed, or the user cancels */
            int end = ZT_END_NONE;
            if (self->backend->node_lost && self->backend->node_lost(self->backend, NULL, why, sizeof why))
                zt_coord_node_lost(self, why);
            else if (self->backend->ending &&
                     (end = self->backend->ending(self->backend, why, sizeof why)) == ZT_END_REQUEUED)
                zt_coord_preempted(self, why);
            else {
                if (end == ZT_END_NONE)
                    snprintf(why, sizeof why, "received %s", strsignal(sigs[i]));
                zt_coord_cancel(self, why);
            }
        }
}

zt_job_state_t zt_coord_run(zt_coord_t *self)
{
    zt_coord_set_state(self, ZT_JOB_QUEUED);
    if (self->plan->timeout_s > 0)
        self->job_deadline = zt_now_ms() + (int64_t) (self->plan->timeout_s * 1000);
    zt_info("control plane on %s; job directory %s", self->layout.coordinator, self->layout.job_dir);
    zt_coord_spawn_all(self, zt_coord_on_control);
    zmq_pollitem_t *items = calloc((size_t) self->nreps + 2, sizeof *items);
    zt_crep_t **owners = calloc((size_t) self->nreps + 2, sizeof *owners);
    for (;;) {
        int n = 0;
        items[n++] = (zmq_pollitem_t) { zsock_resolve(self->router), 0, ZMQ_POLLIN, 0 };
        items[n++] = (zmq_pollitem_t) { NULL, self->sig_pipe[0], ZMQ_POLLIN, 0 };
        for (int i = 0; i < self->nreps; i++)
            if (self->reps[i].out_fd >= 0) {
                owners[n] = &self->reps[i];
                items[n++] = (zmq_pollitem_t) { NULL, self->reps[i].out_fd, ZMQ_POLLIN, 0 };
            }
        int rc = zmq_poll(items, n, 100);
        if (rc < 0 && errno != EINTR)
            break;
        if (items[1].revents & ZMQ_POLLIN)
            s_on_signals(self);
        for (int i = 2; i < n; i++)
            if (items[i].revents & (ZMQ_POLLIN | ZMQ_POLLERR))
                zt_crep_read_output(owners[i], self->opts.echo);
        /* what a replica said before it ended is read before its end is:
         * its last metrics (the chief's accuracy) are its, not a stranger's
         * words after its identity went (the queue is read without waiting) */
        zt_coord_on_control(self);
        s_reap_all(self);
        s_timers(self);
        if (self->stopping && s_live(self) == 0) {
            self->stopping = false;
            if (zt_coord_after_stop(self) == ZT_AFTER_RESPAWN) {
                self->backend->cleanup(self->backend);
                zt_info("starting the job again (incarnation %d)", self->layout.incarnation);
                zt_coord_spawn_all(self, zt_coord_on_control);
                continue;
            }
            break;
        }
    }
    free(items);
    free(owners);
    self->backend->cleanup(self->backend);
    for (int i = 0; i < self->nreps; i++) {
        zt_crep_read_output(&self->reps[i], self->opts.echo);
        if (self->reps[i].out_fd >= 0) { /* a left-over process held the pipe */
            close(self->reps[i].out_fd);
            self->reps[i].out_fd = -1;
        }
    }
    if (zt_coord_record_due(self->rec, zt_now_ms(), 0))
        zt_coord_write_state(self);
    zt_coord_set_state(self, zt_coord_format_end(self, zt_coord_final_state(self)));
    zt_coord_supervise_end(self);
    return self->state;
}
