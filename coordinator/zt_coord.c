#include "zt_coord.h"
#include "zt_prom.h"
#include "base/zt_hist.h"
#include "launch/zt_clusterenv.h"
#include "runtime/zt_env.h"
#include "model/zt_ckpt.h"
#include "runtime/zt_role.h"
#include "wire/zt_auth.h"
#include "wire/zt_msg.h"
#include "wire/zt_transport.h"
#include "base/zt_util.h"
#include "base/zt_json.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_knobs.h"
#include "ztrain/zt_log.h"
#include <czmq.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

typedef enum {
    R_PENDING, R_STARTING, R_RUNNING, R_RESTARTING, R_SUCCEEDED, R_FAILED, R_STOPPED
} s_rstate_t;
static const char *const s_rstate_names[] = { "PENDING", "STARTING", "RUNNING", "RESTARTING",
                                              "SUCCEEDED", "FAILED", "STOPPED" };
static const char *const s_job_names[] = { "QUEUED", "PENDING", "RUNNING", "SUCCEEDED", "FAILED",
                                           "CANCELLING", "CANCELLED" };

const char *zt_job_state_name(zt_job_state_t s) { return s >= 0 && s < ZT_JOB_STATES ? s_job_names[s] : NULL; }
const char *zt_replica_state_name(int s) { return s >= 0 && s <= R_STOPPED ? s_rstate_names[s] : NULL; }

/* What one replica's messages can make job.json hold: metric names per
 * replica, and the newest checkpoints and evaluations kept. */
#define ZT_COORD_MAX_METRIC_NAMES 256
#define ZT_COORD_MAX_RECORDS 10000

typedef struct {
    int pool;                  /* workerPoolSpecs index */
    int index;                 /* replica index in the pool */
    char name[32];             /* workerpoolN-I */
    zt_handle_t *handle;       /* the backend's, NULL when not running */
    int out_fd;                /* its stdout+stderr, -1 when closed */
    char line[4096];           /* partial output line */
    size_t line_len;           /* bytes in line */
    FILE *log;                 /* <job-dir>/replica-logs/workerpoolN-I.log */
    char *log_path;            /* its path */
    s_rstate_t state;          /* replica state */
    int restarts;              /* in-place restarts in this incarnation */
    int total_restarts;        /* over the whole job */
    int last_status;           /* wait status of the last exit, -1 none */
    bool expect_register;      /* a ztrain role binary: it must register */
    bool registered;           /* registered in this run */
    bool killed_by_us;         /* we killed it (missed heartbeats or registration) */
    zframe_t *identity;        /* ROUTER identity once registered */
    int64_t started_ms;        /* when spawned */
    int64_t last_hb_ms;        /* last heartbeat */
    bool rejoining;            /* a sync trainer restarted into its running group, not yet back */
    int rejoins;               /* times it rejoined, over the whole job */
    int64_t lost_ms;           /* when it was lost (for the recovery time) */
} s_rep_t;

typedef enum { AFTER_NOTHING, AFTER_FINISH, AFTER_RESPAWN } s_after_t;

struct zt_coord_t {
    zt_plan_t *plan;            /* the job */
    zt_layout_t layout;         /* placement, dirs */
    zt_backend_t *backend;      /* launches replicas */
    zt_coord_opts_t opts;       /* as given */
    s_rep_t *reps;              /* every replica, pool order */
    int nreps;                  /* how many */
    zsock_t *router;            /* control plane */
    int log_fd;                 /* <job-dir>/replica-logs/coordinator.log: this log's copy, or -1 */
    zt_prom_t *prom;            /* the Prometheus endpoint (--metrics-port), or NULL */
    json_t *latency;            /* {kind: {replica: {le, counts, sum}}}: the replicas' histograms */
    zt_job_state_t state;       /* job state */
    json_t *transitions;        /* [{state, time}] */
    json_t *metrics;            /* latest metric per name */
    json_t *checkpoints;        /* [{step, name, time}] */
    json_t *evaluations;        /* [{step, name, value, replica, time}] from evaluators */
    zt_msg_t last_ckpt;         /* the newest CHECKPOINT notice, for late evaluators */
    json_t *error;              /* why the job failed or was cancelled */
    int job_retries;            /* whole-job retries so far */
    zt_refusals_t drop_log[6];  /* dropped messages by reason: logged at most once per 5 s each */
    bool stopping;              /* stopping every replica */
    s_after_t after_stop;       /* what to do once all are down */
    zt_job_state_t final_state; /* for AFTER_FINISH */
    int64_t kill_deadline;      /* SIGKILL whoever is left at this time */
    int64_t job_deadline;       /* scheduling.timeout, 0 none */
    int64_t hb_ms, hb_timeout_ms, register_timeout_ms, grace_ms;
    int max_restarts, max_job_retries;
    zt_msg_drops_t drops;       /* malformed control messages */
    bool control_backlog;       /* control messages are still queued: heartbeats may be among them */
    bool metrics_dirty;         /* metrics or checkpoint notices arrived since job.json was last written */
    int64_t state_writes;       /* job.json writes so far */
    int64_t state_written_ms;   /* when job.json was last written */
    uint64_t unknown_senders;   /* well-formed but from no replica of ours */
    uint64_t wrong_identity;    /* from a replica's connection, claiming to be another replica */
    uint64_t refusals_written;  /* the refusals job.json was last written with */
    uint64_t seq;               /* our message sequence */
    int sig_pipe[2];            /* signal handler -> loop */
    char *created;              /* createTime */
    json_t *lost_nodes;         /* [{time, why}]: nodes lost under the job */
    bool requeue, give_up;      /* at the end: the allocation runs the job again, or not */
};

/* ------------------------------------------------------------ signals */

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

/* ------------------------------------------------------------ job.json */

static void s_write_state(zt_coord_t *self)
{
    json_t *reps = json_array();
    for (int i = 0; i < self->nreps; i++) {
        s_rep_t *r = &self->reps[i];
        json_t *o = json_pack("{s:s, s:i, s:i, s:s, s:s, s:i, s:i, s:b, s:s}", "name", r->name,
                              "pool", r->pool, "index", r->index, "address", "",
                              "state", s_rstate_names[r->state], "pid",
                              (int) (r->handle ? self->backend->pid(self->backend, r->handle) : 0),
                              "restarts", r->total_restarts, "registered", r->registered,
                              "log", r->log_path ? r->log_path : "");
        const zt_place_t *pl = zt_layout_place(&self->layout, r->pool, r->index);
        json_object_set_new(o, "address", json_sprintf("%s:%d", pl->addr, pl->port));
        json_object_set_new(o, "host", json_string(pl->host));
        json_object_set_new(o, "rejoins", json_integer(r->rejoins));
        json_object_set_new(o, "rejoining", json_boolean(r->rejoining));
        if (r->last_status >= 0 && WIFEXITED(r->last_status))
            json_object_set_new(o, "exitStatus", json_integer(WEXITSTATUS(r->last_status)));
        else
            json_object_set_new(o, "exitStatus", json_null());
        if (r->last_status >= 0 && WIFSIGNALED(r->last_status))
            json_object_set_new(o, "signal", json_integer(WTERMSIG(r->last_status)));
        else
            json_object_set_new(o, "signal", json_null());
        json_array_append_new(reps, o);
    }
    json_t *doc = json_pack(
        "{s:s, s:s, s:i, s:s?, s:s, s:i, s:i, s:s, s:O, s:O, s:o, s:O, s:o, s:{s:I, s:I, s:I, s:I, s:I, s:I}}",
        "name", self->plan->display_name, "jobDir", self->layout.job_dir,
        "coordinatorPid", (int) getpid(), "coordinator", self->layout.coordinator,
        "state", s_job_names[self->state], "incarnation", self->layout.incarnation,
        "jobRetries", self->job_retries, "createTime", self->created,
        "transitions", self->transitions, "error", self->error ? self->error : json_null(),
        "replicas", reps, "metrics", self->metrics, "plan", zt_plan_to_json(self->plan),
        "controlPlaneDrops", "malformed", (json_int_t) self->drops.malformed,
        "badMagic", (json_int_t) self->drops.bad_magic,
        "badVersion", (json_int_t) self->drops.bad_version,
        "unknownType", (json_int_t) self->drops.unknown_type,
        "tooLong", (json_int_t) self->drops.too_long,
        "unknownSender", (json_int_t) self->unknown_senders);
    json_t *drops = json_object_get(doc, "controlPlaneDrops");
    json_object_set_new(drops, "wrongIdentity", json_integer((json_int_t) self->wrong_identity));
    json_object_set_new(drops, "unauthenticated", json_integer((json_int_t) zt_auth_refused()));
    json_object_set_new(doc, "security", json_string(zt_auth_on() ? "curve" : "off"));
    json_object_set_new(doc, "coordinatorProcess", zt_json_this_process());
    if (self->backend->allocation)
        json_object_set_new(doc, "slurmJobId", json_string(self->backend->allocation));
    if (json_array_size(self->lost_nodes))
        json_object_set(doc, "lostNodes", self->lost_nodes);
    self->metrics_dirty = false;
    self->state_written_ms = zt_now_ms();
    json_object_set_new(doc, "stateWrites", json_integer(++self->state_writes)); /* this one included */
    json_object_set(doc, "checkpoints", self->checkpoints);
    json_object_set(doc, "evaluations", self->evaluations);
    if (json_object_size(self->latency))
        json_object_set(doc, "latency", self->latency);
    if (self->prom) {
        json_object_set_new(doc, "metricsUrl", json_sprintf("http://%s:%d/metrics", zt_knob_str(ZT_KNOB_METRICS_ADDR),
                                                            zt_prom_port(self->prom)));
        zt_prom_update(self->prom, doc);
    }
    char *text = json_dumps(doc, JSON_INDENT(2));
    char *path = zt_strdupf("%s/job.json", self->layout.job_dir);
    if (zt_write_file_atomic(path, text, strlen(text)) != ZT_OK)
        zt_warn("cannot write %s: %s", path, strerror(errno));
    free(path);
    free(text);
    json_decref(doc);
}

static void s_set_state(zt_coord_t *self, zt_job_state_t state)
{
    if (self->state == state && json_array_size(self->transitions) > 0)
        return;
    self->state = state;
    char now[40];
    zt_wall_iso(now, sizeof now);
    json_array_append_new(self->transitions, json_pack("{s:s, s:s}", "state", s_job_names[state],
                                                       "time", now));
    zt_info("job %s: %s", self->plan->display_name, s_job_names[state]);
    s_write_state(self);
    /* Tell every registered replica. */
    zt_msg_t m = { .type = ZT_MSG_STATUS, .incarnation = self->layout.incarnation };
    zt_msg_set_str(m.u.STATUS.state, s_job_names[state]);
    m.u.STATUS.running = state == ZT_JOB_RUNNING;
    for (int i = 0; i < self->nreps; i++)
        if (self->reps[i].registered) {
            m.seq = self->seq++;
            zt_msg_send(self->router, self->reps[i].identity, &m);
        }
}

static void s_set_error(zt_coord_t *self, s_rep_t *r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void s_set_error(zt_coord_t *self, s_rep_t *r, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_decref(self->error);
    self->error = json_pack("{s:s}", "message", msg);
    if (r) {
        if (r->log)
            fflush(r->log);
        char *tail = zt_file_tail(r->log_path, 2000);
        json_object_set_new(self->error, "replica", json_string(r->name));
        json_object_set_new(self->error, "logTail", json_string(tail ? tail : ""));
        zt_error("%s; last lines of %s:\n%s", msg, r->log_path, tail ? tail : "");
        free(tail);
    }
    else
        zt_error("%s", msg);
}

/* ------------------------------------------------------------ output */

/* True when text starts as ztrain's log lines do ("2026-11-23T05:24:43.984Z "). */
static bool s_is_log_line(const char *t, size_t len)
{
    static const char pat[] = "dddd-dd-ddTdd:dd:dd.dddZ ";
    if (len < sizeof pat - 1)
        return false;
    for (size_t i = 0; i < sizeof pat - 1; i++)
        if (pat[i] == 'd' ? !isdigit((unsigned char) t[i]) : t[i] != pat[i])
            return false;
    return true;
}

/* One line of a replica's output, to its log and the console, in the one
 * line format: ztrain's own log lines as they are, a program's own lines
 * with the time, the replica and its pid in front. */
static void s_emit_line(zt_coord_t *self, s_rep_t *r, const char *text, size_t len)
{
    char buf[4400];
    int n = 0;
    if (!s_is_log_line(text, len))
        n = zt_log_prefix(buf, sizeof buf, 'I', r->name,
                          r->handle ? (long) self->backend->pid(self->backend, r->handle) : 0L);
    int m = snprintf(buf + n, sizeof buf - (size_t) n, "%.*s\n", (int) (len > 4096 ? 4096 : len), text);
    size_t total = (size_t) n + (size_t) (m < 0 ? 0 : m);
    if (total >= sizeof buf)
        total = sizeof buf - 1;
    if (r->log) {
        fwrite(buf, 1, total, r->log);
        fflush(r->log);
    }
    if (self->opts.echo && write(STDOUT_FILENO, buf, total) < 0) {
    }
}

/* Reads what is there; on EOF or error closes the fd. */
static void s_read_output(zt_coord_t *self, s_rep_t *r)
{
    for (;;) {
        if (r->out_fd < 0)
            return;
        ssize_t n = read(r->out_fd, r->line + r->line_len, sizeof r->line - r->line_len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) {
            if (r->line_len) {
                s_emit_line(self, r, r->line, r->line_len);
                r->line_len = 0;
            }
            close(r->out_fd);
            r->out_fd = -1;
            return;
        }
        r->line_len += (size_t) n;
        size_t start = 0;
        for (size_t i = 0; i < r->line_len; i++)
            if (r->line[i] == '\n') {
                s_emit_line(self, r, r->line + start, i - start);
                start = i + 1;
            }
        if (start == 0 && r->line_len == sizeof r->line) { /* a very long line */
            s_emit_line(self, r, r->line, r->line_len);
            start = r->line_len;
        }
        memmove(r->line, r->line + start, r->line_len - start);
        r->line_len -= start;
    }
}

/* ------------------------------------------------------------ replicas */

/* argv: the pool's command; a role binary is found next to ztrain itself. */
static char **s_argv(const zt_pool_t *pool)
{
    size_t argc = json_array_size(pool->argv);
    char **argv = calloc(argc + 1, sizeof *argv);
    for (size_t i = 0; i < argc; i++)
        argv[i] = strdup(json_string_value(json_array_get(pool->argv, i)));
    if (pool->role != ZT_ROLE_NONE) {
        free(argv[0]);
        argv[0] = zt_strdupf("%s/%s", zt_exe_dir(), zt_role_binary(pool->role));
    }
    return argv;
}

/* env: ours, with the replica's variables over it. */
static char **s_envp(json_t *vars)
{
    size_t n_inherit = 0;
    while (environ[n_inherit])
        n_inherit++;
    char **envp = calloc(n_inherit + json_array_size(vars) + 1, sizeof *envp);
    size_t ne = 0, k;
    json_t *v;
    for (size_t i = 0; i < n_inherit; i++) {
        bool overridden = false;
        json_array_foreach(vars, k, v) {
            const char *name = json_string_value(json_array_get(v, 0));
            size_t len = strlen(name);
            if (!strncmp(environ[i], name, len) && environ[i][len] == '=')
                overridden = true;
        }
        if (!overridden)
            envp[ne++] = strdup(environ[i]);
    }
    json_array_foreach(vars, k, v)
        envp[ne++] = zt_strdupf("%s=%s", json_string_value(json_array_get(v, 0)),
                                json_string_value(json_array_get(v, 1)));
    return envp;
}

static void s_strv_free(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

/* SageMaker's config files (hyperparameters.json, resourceconfig.json,
 * inputdataconfig.json) in the replica's config dir. */
static void s_write_config_files(zt_coord_t *self, s_rep_t *r)
{
    char *cfg = zt_replica_config_dir(&self->layout, r->pool, r->index);
    zt_mkdir_p(cfg);
    json_t *files = zt_replica_config_files(&self->layout, r->pool, r->index), *doc;
    const char *name;
    json_object_foreach(files, name, doc) {
        char *path = zt_strdupf("%s/%s", cfg, name);
        char *text = json_dumps(doc, JSON_COMPACT);
        if (zt_write_file_atomic(path, text, strlen(text)) != ZT_OK)
            zt_warn("%s: cannot write %s: %s", r->name, path, strerror(errno));
        free(text);
        free(path);
    }
    json_decref(files);
    free(cfg);
}

/* Starts (or restarts) a replica through the backend. */
static int s_spawn(zt_coord_t *self, s_rep_t *r)
{
    const zt_pool_t *pool = &self->plan->pools[r->pool];
    if (r->out_fd >= 0) { /* whatever the previous run left in the pipe */
        s_read_output(self, r);
        if (r->out_fd >= 0)
            close(r->out_fd);
        r->out_fd = -1;
    }
    r->line_len = 0;
    char **argv = s_argv(pool);
    json_t *vars = zt_replica_env(&self->layout, r->pool, r->index);
    if (r->rejoining)
        json_array_append_new(vars, json_pack("[ss]", zt_env_name(ZT_ENV_REJOIN), "1"));
    char **envp = s_envp(vars);
    json_decref(vars);
    s_write_config_files(self, r);
    if (r->log)
        fprintf(r->log, "=== ztrain: starting %s (incarnation %d, restart %d): %s\n", r->name,
                self->layout.incarnation, r->restarts, argv[0]);
    zt_launch_t req = { r->pool, r->index, zt_layout_ordinal(&self->layout, r->pool, r->index),
                        argv, envp, NULL, 0 };
    zt_handle_t *h = NULL;
    int fd = -1;
    int rc = self->backend->start(self->backend, &req, &h, &fd);
    s_strv_free(argv);
    s_strv_free(envp);
    if (rc != ZT_OK) {
        zt_error("%s: cannot start: %s", r->name, strerror(errno));
        return rc;
    }
    r->handle = h;
    r->out_fd = fd;
    r->registered = false;
    r->killed_by_us = false;
    zframe_destroy(&r->identity);
    r->started_ms = zt_now_ms();
    r->expect_register = pool->role != ZT_ROLE_NONE;
    r->state = r->expect_register ? R_STARTING : R_RUNNING;
    zt_info("%s: started pid %lld on %s", r->name, (long long) self->backend->pid(self->backend, h),
            zt_layout_place(&self->layout, r->pool, r->index)->host);
    return ZT_OK;
}

static void s_check_all_up(zt_coord_t *self)
{
    if (self->state != ZT_JOB_PENDING || self->stopping)
        return;
    for (int i = 0; i < self->nreps; i++)
        if (self->reps[i].state != R_RUNNING && self->reps[i].state != R_SUCCEEDED)
            return;
    s_set_state(self, ZT_JOB_RUNNING);
}

static void s_on_control(zt_coord_t *self);

/* Starts every replica. Registrations and heartbeats are served between
 * starts, so that the first replicas of a large job are not taken for
 * silent while the last are still being started. */
static void s_spawn_all(zt_coord_t *self)
{
    s_set_state(self, ZT_JOB_PENDING);
    int64_t served = zt_now_ms();
    for (int i = 0; i < self->nreps; i++) {
        if (zt_now_ms() - served >= 20) {
            s_on_control(self);
            served = zt_now_ms();
        }
        self->reps[i].restarts = 0;
        self->reps[i].rejoining = false;
        if (s_spawn(self, &self->reps[i]) != ZT_OK) {
            self->reps[i].state = R_FAILED;
            s_set_error(self, &self->reps[i], "%s could not be started", self->reps[i].name);
            self->final_state = ZT_JOB_FAILED;
            self->after_stop = AFTER_FINISH;
            self->stopping = true;
            self->kill_deadline = zt_now_ms() + self->grace_ms;
            for (int j = 0; j < i; j++)
                if (self->reps[j].handle)
                    self->backend->signal(self->backend, self->reps[j].handle, SIGTERM);
            return;
        }
    }
    s_write_state(self);
    s_check_all_up(self);
}

static int s_live(zt_coord_t *self)
{
    int n = 0;
    for (int i = 0; i < self->nreps; i++)
        n += self->reps[i].handle != NULL;
    return n;
}

/* Stops every live replica: SHUTDOWN, SIGTERM, then SIGKILL after the grace. */
static void s_stop_all(zt_coord_t *self, s_after_t after, zt_job_state_t final_state)
{
    if (self->stopping) {
        /* Already stopping: a finish wins over a respawn. */
        if (after == AFTER_FINISH) {
            self->after_stop = AFTER_FINISH;
            self->final_state = final_state;
        }
        return;
    }
    self->stopping = true;
    self->after_stop = after;
    self->final_state = final_state;
    self->kill_deadline = zt_now_ms() + self->grace_ms;
    zt_msg_t m = { .type = ZT_MSG_SHUTDOWN, .incarnation = self->layout.incarnation };
    zt_msg_set_str(m.u.SHUTDOWN.reason, after == AFTER_RESPAWN ? "restarting the job"
                                                                : "the job is ending");
    for (int i = 0; i < self->nreps; i++) {
        s_rep_t *r = &self->reps[i];
        if (!r->handle)
            continue;
        if (r->registered) {
            m.seq = self->seq++;
            zt_msg_send(self->router, r->identity, &m);
        }
        self->backend->signal(self->backend, r->handle, SIGTERM);
    }
}

static void s_cancel(zt_coord_t *self, const char *why)
{
    if (self->state == ZT_JOB_CANCELLING) {
        zt_warn("%s again: killing every replica now", why);
        self->kill_deadline = 0;
        return;
    }
    if (self->stopping && self->after_stop == AFTER_FINISH)
        return; /* already ending with a result */
    zt_info("%s: cancelling the job", why);
    json_decref(self->error);
    self->error = json_pack("{s:s}", "message", why);
    s_set_state(self, ZT_JOB_CANCELLING);
    self->stopping = false; /* a pending respawn is dropped */
    s_stop_all(self, AFTER_FINISH, ZT_JOB_CANCELLED);
}

/* A node under the job is lost: every replica stops, and the job is retried
 * by its allocation running it again on other nodes (Slurm requeues it), or,
 * with no job retry left, fails naming the node. */
static void s_node_lost(zt_coord_t *self, const char *why)
{
    if (self->requeue || self->give_up) {
        self->kill_deadline = 0; /* a second notice: now */
        return;
    }
    char now[40];
    zt_wall_iso(now, sizeof now);
    json_array_append_new(self->lost_nodes, json_pack("{s:s, s:s}", "time", now, "why", why));
    bool retry = !self->plan->disable_retries && self->job_retries < self->max_job_retries;
    char *msg;
    if (retry) {
        self->job_retries++;
        self->layout.incarnation++;
        self->requeue = true;
        msg = zt_strdupf("%s: the job is retried on other nodes (job retry %d of %d) once its allocation "
                         "runs again (Slurm requeues it)", why, self->job_retries, self->max_job_retries);
    }
    else {
        self->give_up = true;
        msg = zt_strdupf("%s, and %s: the job fails", why, self->plan->disable_retries ? "retries are disabled"
                                                                                        : "every job retry was used");
    }
    zt_error("lost a node: %s", msg);
    json_decref(self->error);
    self->error = json_pack("{s:s, s:s}", "message", msg, "lostNode", why);
    free(msg);
    self->stopping = false; /* whatever was under way (a respawn) gives way */
    s_stop_all(self, AFTER_FINISH, retry ? ZT_JOB_QUEUED : ZT_JOB_FAILED);
}

/* Whether r trains in lockstep with others: a training replica (pool 0 or
 * 1) of a job whose gradients are all-reduced, through reducers (pool 2 is
 * ztrain's reducer) or a ring between built-in trainers (no pool 2). One of
 * them restarted alone would come back at its checkpoint's step while the
 * others wait at theirs, so the group restarts together. A reducer keeps
 * the group going: restarted in place, it asks the workers again. */
static bool s_in_sync_group(const zt_coord_t *self, const s_rep_t *r)
{
    const zt_pool_t *p = self->plan->pools;
    if (r->pool > 1)
        return false;
    if (p[2].present)
        return p[2].role == ZT_ROLE_REDUCER;
    int trainers = (p[0].role == ZT_ROLE_WORKER ? p[0].replicas : 0) +
                   (p[1].present && p[1].role == ZT_ROLE_WORKER ? p[1].replicas : 0);
    return p[r->pool].role == ZT_ROLE_WORKER && trainers > 1;
}

/* Whether a lost trainer of a synchronous group can rejoin it in place,
 * taking the model from a live peer: the gradients go through reducers
 * (a ring broken mid-round cannot finish it), it was not itself rejoining,
 * and every other trainer is up and in the group. Otherwise the group
 * restarts together from the newest checkpoint. */
static bool s_can_rejoin(const zt_coord_t *self, const s_rep_t *r, char *why, size_t size)
{
    const zt_pool_t *p = self->plan->pools;
    if (!p[2].present || p[2].role != ZT_ROLE_REDUCER) {
        snprintf(why, size, "its gradients go round a ring between the trainers, which a lost one breaks");
        return false;
    }
    if (r->rejoining) {
        snprintf(why, size, "it was lost again before it had rejoined");
        return false;
    }
    for (int i = 0; i < self->nreps; i++) {
        const s_rep_t *o = &self->reps[i];
        if (o == r || o->pool > 1 || p[o->pool].role != ZT_ROLE_WORKER)
            continue;
        if (o->state != R_RUNNING || o->rejoining) {
            snprintf(why, size, "%s is not training either", o->name);
            return false;
        }
    }
    return true;
}

static void s_replica_exited(zt_coord_t *self, s_rep_t *r, int status)
{
    char lost[1024]; /* asked while the handle still names the replica's node */
    bool node_lost = !(WIFEXITED(status) && WEXITSTATUS(status) == 0) && !self->stopping &&
                     self->backend->node_lost && self->backend->node_lost(self->backend, r->handle, lost, sizeof lost);
    self->backend->release(self->backend, &r->handle);
    r->registered = false;
    zframe_destroy(&r->identity);
    r->last_status = status;
    s_read_output(self, r);
    if (node_lost) {
        r->state = R_FAILED;
        s_node_lost(self, lost);
        return;
    }
    char how[64];
    if (WIFEXITED(status))
        snprintf(how, sizeof how, "exited with status %d", WEXITSTATUS(status));
    else
        snprintf(how, sizeof how, "was killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    if (r->log)
        fprintf(r->log, "=== ztrain: %s %s\n", r->name, how);
    if (self->stopping) {
        zt_info("%s %s", r->name, how);
        r->state = WIFEXITED(status) && WEXITSTATUS(status) == 0 ? R_SUCCEEDED : R_STOPPED;
        s_write_state(self);
        return;
    }
    bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (ok) {
        zt_info("%s %s", r->name, how);
        r->state = R_SUCCEEDED;
        s_write_state(self);
        if (r->pool == 0) {
            zt_info("the primary replica finished: stopping the others");
            s_stop_all(self, AFTER_FINISH, ZT_JOB_SUCCEEDED);
        }
        else
            s_check_all_up(self);
        return;
    }
    bool system = WIFEXITED(status) && WEXITSTATUS(status) == ZT_EXIT_RETRY;
    bool crash = r->killed_by_us || WIFSIGNALED(status) || WEXITSTATUS(status) >= 128 || system;
    if (!crash) {
        r->state = R_FAILED;
        s_set_error(self, r, "%s %s (a user error: the job fails)", r->name, how);
        s_stop_all(self, AFTER_FINISH, ZT_JOB_FAILED);
        return;
    }
    zt_warn("%s %s (%s)", r->name, how, system ? "a failure of the system, not the program" : "a crash");
    if (r->restarts < self->max_restarts) {
        r->restarts++;
        r->total_restarts++;
        r->state = R_RESTARTING;
        bool sync = s_in_sync_group(self, r);
        char why[300] = "";
        bool rejoin = sync && !self->plan->restart_job_on_worker_restart && s_can_rejoin(self, r, why, sizeof why);
        if (self->plan->restart_job_on_worker_restart || (sync && !rejoin)) {
            if (sync && !self->plan->restart_job_on_worker_restart)
                zt_info("%s trains in step with the others (synchronous) and cannot rejoin them (%s): the group "
                        "restarts together from the newest checkpoint", r->name, why);
            else
                zt_info("restartJobOnWorkerRestart: restarting every replica");
            self->layout.incarnation++;
            s_stop_all(self, AFTER_RESPAWN, ZT_JOB_FAILED);
            return;
        }
        r->rejoining = rejoin;
        if (rejoin) {
            r->lost_ms = zt_now_ms();
            zt_info("%s trains in step with the others (synchronous): restarted in place, it takes the model "
                    "from a live peer while the others wait", r->name);
        }
        zt_info("%s: restart %d of %d, in place", r->name, r->restarts, self->max_restarts);
        if (s_spawn(self, r) != ZT_OK) {
            r->state = R_FAILED;
            s_set_error(self, r, "%s could not be restarted", r->name);
            s_stop_all(self, AFTER_FINISH, ZT_JOB_FAILED);
        }
        s_write_state(self);
        return;
    }
    if (!self->plan->disable_retries && self->job_retries < self->max_job_retries) {
        self->job_retries++;
        self->layout.incarnation++;
        r->state = R_RESTARTING;
        zt_warn("%s crashed %d times: retrying the whole job (retry %d of %d)", r->name,
                r->restarts + 1, self->job_retries, self->max_job_retries);
        s_stop_all(self, AFTER_RESPAWN, ZT_JOB_FAILED);
        return;
    }
    r->state = R_FAILED;
    s_set_error(self, r, "%s %s after %d restarts%s", r->name, how, r->restarts,
                self->plan->disable_retries ? " (retries disabled)"
                                            : " and every job retry was used");
    s_stop_all(self, AFTER_FINISH, ZT_JOB_FAILED);
}

static s_rep_t *s_find(zt_coord_t *self, const zt_handle_t *h)
{
    for (int i = 0; i < self->nreps; i++)
        if (self->reps[i].handle == h)
            return &self->reps[i];
    return NULL;
}

static s_rep_t *s_find_at(zt_coord_t *self, int pool, int index)
{
    for (int i = 0; i < self->nreps; i++)
        if (self->reps[i].pool == pool && self->reps[i].index == index)
            return &self->reps[i];
    return NULL;
}

static void s_reap_all(zt_coord_t *self)
{
    zt_handle_t *h;
    int status;
    while (self->backend->reap(self->backend, &h, &status) == 1) {
        s_rep_t *r = s_find(self, h);
        if (r)
            s_replica_exited(self, r, status);
        else
            self->backend->release(self->backend, &h);
    }
}

/* ------------------------------------------------------------ control plane */

/* REGISTER: a replica of this incarnation is welcomed, told the job's
 * state and (an evaluator) the last checkpoint; one of an older
 * incarnation is told to shut down. */
static void s_on_register(zt_coord_t *self, s_rep_t *r, zframe_t *id, const zt_msg_t *m)
{
    if (m->incarnation != self->layout.incarnation) {
        zt_msg_t s = { .type = ZT_MSG_SHUTDOWN, .incarnation = self->layout.incarnation, .seq = self->seq++ };
        zt_msg_set_str(s.u.SHUTDOWN.reason, "stale incarnation");
        zt_msg_send(self->router, id, &s);
        return;
    }
    zframe_destroy(&r->identity);
    r->identity = zframe_dup(id);
    r->registered = true;
    r->last_hb_ms = zt_now_ms();
    if (r->state == R_STARTING || r->state == R_RESTARTING)
        r->state = R_RUNNING;
    zt_info("%s registered (%s, pid %lld)", r->name, m->u.REGISTER.role, (long long) m->u.REGISTER.pid);
    zt_msg_t w = { .type = ZT_MSG_WELCOME, .incarnation = self->layout.incarnation, .seq = self->seq++ };
    w.u.WELCOME.heartbeat_ms = self->hb_ms;
    w.u.WELCOME.replicas = self->nreps;
    zt_msg_send(self->router, id, &w);
    zt_msg_t s = { .type = ZT_MSG_STATUS, .incarnation = self->layout.incarnation, .seq = self->seq++ };
    zt_msg_set_str(s.u.STATUS.state, s_job_names[self->state]);
    s.u.STATUS.running = self->state == ZT_JOB_RUNNING;
    zt_msg_send(self->router, id, &s);
    if (r->pool == 3 && self->last_ckpt.type == ZT_MSG_CHECKPOINT) {
        self->last_ckpt.seq = self->seq++;
        zt_msg_send(self->router, id, &self->last_ckpt);
    }
    s_write_state(self);
    s_check_all_up(self);
}

/* CHECKPOINT from the chief: recorded and passed on to every evaluator. */
static void s_on_checkpoint(zt_coord_t *self, s_rep_t *r, zt_msg_t *m)
{
    if (!zt_ckpt_name_ok(m->u.CHECKPOINT.name)) { /* it becomes a path on the evaluators */
        char what[200];
        snprintf(what, sizeof what, "a checkpoint notice from %s: '%.64s' is not a checkpoint's name "
                 "(checkpoints/ckpt-N or model/ckpt-N)", r->name, m->u.CHECKPOINT.name);
        zt_role_refused(&self->drop_log[3], NULL, NULL, what);
        return;
    }
    char now[40];
    zt_wall_iso(now, sizeof now);
    zt_info("checkpoint %s at step %lld (from %s)", m->u.CHECKPOINT.name, (long long) m->u.CHECKPOINT.step,
            r->name);
    if (json_array_size(self->checkpoints) >= ZT_COORD_MAX_RECORDS) /* the newest are kept */
        json_array_remove(self->checkpoints, 0);
    json_array_append_new(self->checkpoints, json_pack("{s:I, s:s, s:s}", "step",
                          (json_int_t) m->u.CHECKPOINT.step, "name", m->u.CHECKPOINT.name, "time", now));
    self->last_ckpt = *m;
    for (int k = 0; k < self->nreps; k++)
        if (self->reps[k].pool == 3 && self->reps[k].registered) {
            m->seq = self->seq++;
            zt_msg_send(self->router, self->reps[k].identity, m);
        }
    self->metrics_dirty = true; /* written within a second (s_timers): a flood costs no fsync each */
}

/* METRIC: an evaluator's result is an evaluation; anyone else's a metric
 * (and a sign of life). */
/* job.json's metrics: per replica, per name, the latest value and the
 * series of the newest ZT_METRIC_HISTORY [step, value] pairs. */
static void s_record_metric(zt_coord_t *self, s_rep_t *r, const char *name, double value, int64_t step)
{
    json_t *mine = json_object_get(self->metrics, r->name);
    if (!mine) {
        mine = json_object();
        json_object_set_new(self->metrics, r->name, mine);
    }
    json_t *entry = json_object_get(mine, name);
    if (!entry && json_object_size(mine) >= ZT_COORD_MAX_METRIC_NAMES) { /* a per-replica bound */
        char what[200];
        snprintf(what, sizeof what, "a metric '%.64s' from %s: it already reports %d metrics, the most "
                 "job.json keeps per replica", name, r->name, ZT_COORD_MAX_METRIC_NAMES);
        zt_role_refused(&self->drop_log[5], NULL, NULL, what);
        return;
    }
    if (!entry) {
        entry = json_pack("{s:[]}", "series");
        json_object_set_new(mine, name, entry);
    }
    char now[40];
    zt_wall_iso(now, sizeof now);
    json_object_set_new(entry, "value", json_real(value));
    json_object_set_new(entry, "step", json_integer((json_int_t) step));
    json_object_set_new(entry, "time", json_string(now));
    json_t *series = json_object_get(entry, "series");
    json_array_append_new(series, json_pack("[I, f]", (json_int_t) step, value));
    size_t keep = (size_t) zt_knob_int(ZT_KNOB_METRIC_HISTORY);
    while (json_array_size(series) > keep)
        json_array_remove(series, 0);
}

static void s_on_metric(zt_coord_t *self, s_rep_t *r, const zt_msg_t *m)
{
    if (r->pool == 3) {
        char now[40];
        zt_wall_iso(now, sizeof now);
        zt_info("evaluation by %s: %s = %.4f at step %lld", r->name, m->u.METRIC.name, m->u.METRIC.value,
                (long long) m->u.METRIC.step);
        if (json_array_size(self->evaluations) >= ZT_COORD_MAX_RECORDS)
            json_array_remove(self->evaluations, 0);
        json_array_append_new(self->evaluations, json_pack("{s:I, s:s, s:f, s:s, s:s}", "step",
                              (json_int_t) m->u.METRIC.step, "name", m->u.METRIC.name, "value",
                              m->u.METRIC.value, "replica", r->name, "time", now));
    }
    else {
        r->last_hb_ms = zt_now_ms();
        /* The replica's own progress line says it already; no echo here. */
        zt_debug("%s metric %s = %g (step %lld)", r->name, m->u.METRIC.name, m->u.METRIC.value,
                 (long long) m->u.METRIC.step);
        s_record_metric(self, r, m->u.METRIC.name, m->u.METRIC.value, m->u.METRIC.step);
        /* job.json holds every replica's series: rewritten once a second
         * for metrics (s_timers), not once per report */
        self->metrics_dirty = true;
        return;
    }
    s_write_state(self);
}

/* A replica's latency histogram (zt_hist): kept as job.json's
 * latency.<kind>.<replica>, which /metrics serves. A kind not known, counts
 * that do not parse or a sum that is not a finite number >= 0 are malformed. */
static void s_on_latency(zt_coord_t *self, s_rep_t *r, const zt_msg_t *m)
{
    uint64_t counts[ZT_HIST_NB + 1];
    double sum = m->u.LATENCY.sum;
    int kind = zt_hist_kind(m->u.LATENCY.kind);
    if (kind < 0 || zt_hist_parse(m->u.LATENCY.counts, counts) != 0 || !isfinite(sum) || sum < 0) {
        self->drops.malformed++;
        char what[200];
        snprintf(what, sizeof what, "latency histogram from %s: kind '%.32s', counts '%.64s'", r->name,
                 m->u.LATENCY.kind, m->u.LATENCY.counts);
        zt_role_refused(&self->drop_log[1], NULL, NULL, what);
        return;
    }
    json_t *le = json_array(), *c = json_array();
    for (int b = 0; b < ZT_HIST_NB; b++)
        json_array_append_new(le, json_real(zt_hist_bounds[b]));
    for (int b = 0; b <= ZT_HIST_NB; b++)
        json_array_append_new(c, json_integer((json_int_t) (counts[b] > INT64_MAX ? INT64_MAX : counts[b])));
    json_t *byrep = json_object_get(self->latency, zt_hist_name(kind));
    if (!byrep)
        json_object_set_new(self->latency, zt_hist_name(kind), byrep = json_object());
    json_object_set_new(byrep, r->name, json_pack("{s:o, s:o, s:f}", "le", le, "counts", c, "sum", sum));
    self->metrics_dirty = true;
}

/* One decoded control message from identity id, whose connection
 * authenticated as replica `who` (NULL on a plain socket). A replica speaks
 * only for itself: a message claiming another is refused. Only a running
 * replica may register, and only a registered one (from the identity it
 * registered with) may send anything else. */
static void s_on_message(zt_coord_t *self, zframe_t *id, const char *who, zt_msg_t *m)
{
    s_rep_t *r = s_find_at(self, m->pool, m->index);
    if (!r) {
        self->unknown_senders++;
        char what[160];
        snprintf(what, sizeof what, "%s from workerpool%d-%d: no such replica", zt_msg_type_name(m->type), m->pool,
                 m->index);
        zt_role_refused(&self->drop_log[0], NULL, NULL, what);
        return;
    }
    if (!r->handle) { /* sent before it ended (the job stopping, a restart): still queued */
        zt_debug("dropped %s from %s: it has ended", zt_msg_type_name(m->type), r->name);
        return;
    }
    if (zt_auth_on() && (!who || strcmp(who, r->name))) { /* its keys are another replica's */
        self->wrong_identity++;
        char what[200];
        snprintf(what, sizeof what, "%s claiming to be %s from a connection that authenticated as %s",
                 zt_msg_type_name(m->type), r->name, who && *who ? who : "no replica");
        zt_role_refused(&self->drop_log[4], NULL, NULL, what);
        return;
    }
    if (m->type == ZT_MSG_REGISTER) {
        s_on_register(self, r, id, m);
        return;
    }
    if (!r->registered || !zframe_eq(r->identity, id)) {
        self->unknown_senders++;
        char what[160];
        snprintf(what, sizeof what, "%s from %s: not registered (or from another identity)",
                 zt_msg_type_name(m->type), r->name);
        zt_role_refused(&self->drop_log[1], NULL, NULL, what);
        return;
    }
    switch (m->type) {
    case ZT_MSG_HEARTBEAT:
        r->last_hb_ms = zt_now_ms();
        break;
    case ZT_MSG_CHECKPOINT:
        s_on_checkpoint(self, r, m);
        break;
    case ZT_MSG_METRIC:
        s_on_metric(self, r, m);
        break;
    case ZT_MSG_LATENCY:
        s_on_latency(self, r, m);
        break;
    case ZT_MSG_DONE:
        zt_info("%s done: %s", r->name, m->u.DONE.reason);
        break;
    case ZT_MSG_REJOINED:
        if (r->rejoining) {
            r->rejoining = false;
            r->rejoins++;
            zt_info("%s rejoined the group at step %lld (round %lld), %lld ms after it was lost", r->name,
                    (long long) m->u.REJOINED.step, (long long) m->u.REJOINED.gen,
                    (long long) (zt_now_ms() - r->lost_ms));
            s_write_state(self);
        }
        break;
    default:
        zt_debug("ignored %s from %s", zt_msg_type_name(m->type), r->name);
    }
}

/* One received message: its body (data, size; well_formed false when the
 * message was not [identity, body]) from identity id, whose connection
 * authenticated as who. Undecodable input is counted and dropped. */
static void s_on_body(zt_coord_t *self, zframe_t *id, const void *data, size_t size, bool well_formed,
                      const char *who)
{
    zt_msg_t m;
    int rc = well_formed ? zt_msg_decode(data, size, &m, &self->drops) : ZT_EPROTO;
    if (rc == ZT_OK) {
        s_on_message(self, id, who, &m);
        return;
    }
    if (!well_formed)
        self->drops.malformed++;
    char what[200];
    snprintf(what, sizeof what, "a malformed control message (%s); drops so far: %llu malformed, "
             "%llu wrong version", zt_strerror(rc), (unsigned long long) self->drops.malformed,
             (unsigned long long) self->drops.bad_version);
    zt_role_refused(&self->drop_log[2], NULL, NULL, what);
}

/* Control messages waiting on the router: [identity, body] each; anything
 * else, or a body that does not decode, is counted and dropped. */
static void s_on_control(zt_coord_t *self)
{
    self->control_backlog = true; /* until the queue is seen empty */
    for (int budget = 0; budget < 256; budget++) {
        zmsg_t *zm = zmsg_recv_nowait(self->router);
        if (!zm) {
            self->control_backlog = false;
            return;
        }
        zframe_t *id = zmsg_pop(zm);
        zframe_t *body = zmsg_pop(zm);
        bool shape = body && zmsg_size(zm) == 0;
        s_on_body(self, id, shape ? zframe_data(body) : NULL, shape ? zframe_size(body) : 0, shape,
                  zt_auth_peer(body));
        zframe_destroy(&id);
        zframe_destroy(&body);
        zmsg_destroy(&zm);
    }
}

void zt_coord_start(zt_coord_t *self) { s_spawn_all(self); }

void zt_coord_handle(zt_coord_t *self, zframe_t *id, const void *body, size_t len, const char *who)
{
    s_on_body(self, id, body, len, true, who);
}

static void s_timers(zt_coord_t *self)
{
    int64_t now = zt_now_ms();
    uint64_t refused = zt_auth_refused() + self->wrong_identity + self->unknown_senders + self->drops.malformed;
    if (refused != self->refusals_written) { /* job.json counts them, within a second */
        self->refusals_written = refused;
        self->metrics_dirty = true;
    }
    if (self->metrics_dirty && now - self->state_written_ms >= 1000)
        s_write_state(self);
    if (self->stopping && self->kill_deadline <= now)
        for (int i = 0; i < self->nreps; i++)
            if (self->reps[i].handle) {
                zt_warn("%s did not stop within the grace period: SIGKILL", self->reps[i].name);
                self->backend->signal(self->backend, self->reps[i].handle, SIGKILL);
                self->kill_deadline = now + 1000;
            }
    if (self->job_deadline && now >= self->job_deadline && self->state < ZT_JOB_SUCCEEDED) {
        char why[128];
        snprintf(why, sizeof why, "scheduling.timeout of %.0fs reached", self->plan->timeout_s);
        self->job_deadline = 0;
        s_cancel(self, why);
    }
    /* silence is judged only with the control queue read to its end: a
     * heartbeat may still be waiting in it */
    if (self->stopping || self->control_backlog)
        return;
    for (int i = 0; i < self->nreps; i++) {
        s_rep_t *r = &self->reps[i];
        if (!r->handle || r->killed_by_us)
            continue;
        if (r->registered && now - r->last_hb_ms > self->hb_timeout_ms) {
            zt_warn("%s sent no heartbeat for %lld ms: treating it as crashed", r->name,
                    (long long) (now - r->last_hb_ms));
            r->killed_by_us = true;
            self->backend->signal(self->backend, r->handle, SIGKILL);
        }
        else if (!r->registered && r->expect_register &&
                 now - r->started_ms > self->register_timeout_ms) {
            zt_warn("%s did not register within %lld ms: treating it as crashed", r->name,
                    (long long) self->register_timeout_ms);
            r->killed_by_us = true;
            self->backend->signal(self->backend, r->handle, SIGKILL);
        }
    }
}

/* ------------------------------------------------------------ life */

/* A run of the same allocation again (Slurm requeued it after a lost node):
 * the job goes on as its next retry, with its history. false (logged) when
 * that job has ended already, so there is nothing to run. */
static bool s_continue_requeued(zt_coord_t *self)
{
    const char *restarts = getenv("SLURM_RESTART_COUNT");
    if (!self->backend->allocation || !restarts || atoi(restarts) <= 0)
        return true;
    char *path = zt_strdupf("%s/job.json", self->opts.job_dir);
    json_t *doc = json_load_file(path, 0, NULL);
    free(path);
    const char *id = json_string_value(json_object_get(doc, "slurmJobId"));
    if (!doc || !id || strcmp(id, self->backend->allocation)) {
        json_decref(doc);
        return true;
    }
    const char *st = json_string_value(json_object_get(doc, "state"));
    if (st && (!strcmp(st, "SUCCEEDED") || !strcmp(st, "FAILED") || !strcmp(st, "CANCELLED"))) {
        zt_error("Slurm ran job %s again (requeue %s), but the job ended %s already: nothing is run", id, restarts,
                 st);
        json_decref(doc);
        return false;
    }
    self->job_retries = (int) json_integer_value(json_object_get(doc, "jobRetries"));
    self->layout.incarnation = (int) json_integer_value(json_object_get(doc, "incarnation"));
    const char *keep[] = { "transitions", "checkpoints", "evaluations", "lostNodes", "metrics" };
    json_t **into[] = { &self->transitions, &self->checkpoints, &self->evaluations, &self->lost_nodes, &self->metrics };
    for (int i = 0; i < 5; i++) {
        json_t *v = json_object_get(doc, keep[i]);
        if (v && json_typeof(v) == json_typeof(*into[i])) {
            json_decref(*into[i]);
            *into[i] = json_incref(v);
        }
    }
    const char *created = json_string_value(json_object_get(doc, "createTime"));
    if (created) {
        free(self->created);
        self->created = strdup(created);
    }
    bool ok = true;
    if (st && strcmp(st, "QUEUED")) {
        /* the earlier run could not record a retry: its allocation was taken
         * from under it (the coordinator's own node lost) */
        char now[40], *why = zt_strdupf("the allocation ended under the job while it was %s (the coordinator's "
                                        "node lost?), and Slurm requeued it", st);
        zt_wall_iso(now, sizeof now);
        json_array_append_new(self->lost_nodes, json_pack("{s:s, s:s}", "time", now, "why", why));
        if (!self->plan->disable_retries && self->job_retries < self->max_job_retries) {
            self->job_retries++;
            self->layout.incarnation++;
            zt_warn("%s", why);
        }
        else {
            char *msg = zt_strdupf("%s, but no job retry is left: the job fails", why);
            zt_error("%s", msg);
            self->error = json_pack("{s:s, s:s}", "message", msg, "lostNode", why);
            free(msg);
            s_set_state(self, ZT_JOB_FAILED);
            ok = false;
        }
        free(why);
    }
    if (ok)
        zt_info("Slurm ran job %s again (requeue %s): job retry %d of %d, incarnation %d", id, restarts,
                self->job_retries, self->max_job_retries, self->layout.incarnation);
    json_decref(doc);
    return ok;
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
            zt_replica_name(p, i, names[k++], 64);
        }
    zt_mkdir_p(self->layout.job_dir);
    char *dir = zt_strdupf("%s/credentials", self->layout.job_dir);
    int rc = zt_auth_make_job(dir, names, k);
    if (rc == ZT_OK && zt_auth_on())
        self->layout.credentials = dir;
    else
        free(dir);
    s_strv_free(names);
    return rc == ZT_OK;
}

/* The Prometheus endpoint: on loopback unless ZT_METRICS_ADDR says
 * otherwise, which needs ZT_SECURITY=off: the endpoint authenticates no
 * one, so it leaves this machine only where the job's sockets do in the
 * clear. */
static int s_start_metrics(zt_coord_t *self, int port)
{
    const char *addr = zt_knob_str(ZT_KNOB_METRICS_ADDR);
    if (strncmp(addr, "127.", 4) && zt_auth_on()) {
        zt_error("ZT_METRICS_ADDR=%s: metrics served beyond this machine are not authenticated; that needs "
                 "ZT_SECURITY=off (or serve them on 127.0.0.1 and let the scraper reach them through a tunnel)",
                 addr);
        return ZT_EINVAL;
    }
    char err[512];
    if (!(self->prom = zt_prom_start(addr, port, err, sizeof err))) {
        zt_error("--metrics-port %d: %s", port, err);
        return ZT_EIO;
    }
    zt_info("Prometheus metrics on http://%s:%d/metrics", addr, zt_prom_port(self->prom));
    return ZT_OK;
}

zt_coord_t *zt_coord_new(zt_plan_t **plan_p, zt_backend_t **backend_p, const zt_coord_opts_t *opts)
{
    zt_coord_t *self = calloc(1, sizeof *self);
    self->log_fd = -1;
    self->latency = json_object();
    self->plan = *plan_p;
    *plan_p = NULL;
    self->backend = *backend_p;
    *backend_p = NULL;
    self->opts = *opts;
    self->sig_pipe[0] = self->sig_pipe[1] = -1;
    self->transitions = json_array();
    self->metrics = json_object();
    self->checkpoints = json_array();
    self->evaluations = json_array();
    self->lost_nodes = json_array();
    char now[40];
    zt_wall_iso(now, sizeof now);
    self->created = strdup(now);
    self->hb_ms = zt_knob_int(ZT_KNOB_HEARTBEAT_MS);
    self->hb_timeout_ms = zt_knob_int(ZT_KNOB_HEARTBEAT_TIMEOUT_MS);
    self->register_timeout_ms = zt_knob_int(ZT_KNOB_REGISTER_TIMEOUT_MS);
    self->grace_ms = zt_knob_int(ZT_KNOB_STOP_GRACE_MS);
    self->max_restarts = (int) zt_knob_int(ZT_KNOB_MAX_RESTARTS);
    self->max_job_retries = (int) zt_knob_int(ZT_KNOB_MAX_JOB_RETRIES);
    zt_placement_t placement;
    if (self->backend->place(self->backend, self->plan, opts->cpu_only, &placement) != ZT_OK ||
        zt_layout_init(&self->layout, self->plan, &placement, opts->job_dir, opts->trial) != ZT_OK) {
        zt_error("the %s backend cannot place the job", self->backend->name);
        zt_coord_destroy(&self);
        return NULL;
    }
    if (!s_continue_requeued(self)) {
        zt_coord_destroy(&self);
        return NULL;
    }
    /* CZMQ must not take SIGINT/SIGTERM: the coordinator handles them. */
    zsys_handler_set(NULL);
    if (!s_make_credentials(self)) {
        zt_coord_destroy(&self);
        return NULL;
    }
    int port = -1;
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
        zt_coord_destroy(&self);
        return NULL;
    }
    self->layout.coordinator = zt_strdupf("tcp://%s:%d", caddr, port);
    self->nreps = zt_plan_replicas(self->plan);
    self->reps = calloc((size_t) self->nreps, sizeof *self->reps);
    /* ztrain's own logs, apart from AIP_TENSORBOARD_LOG_DIR (<base>/logs/),
     * which belongs to the program: it may clear it. */
    char *logs = zt_strdupf("%s/replica-logs", opts->job_dir);
    zt_mkdir_p(logs);
    /* the coordinator's own lines too, for `ztrain logs` */
    char *clog = zt_strdupf("%s/coordinator.log", logs);
    int cfd = open(clog, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (cfd < 0)
        zt_warn("cannot open %s: %s", clog, strerror(errno));
    else
        self->log_fd = cfd, zt_log_tee(cfd);
    free(clog);
    if (opts->metrics_port >= 0 && s_start_metrics(self, opts->metrics_port) != ZT_OK) {
        free(logs);
        zt_coord_destroy(&self);
        return NULL;
    }
    int n = 0;
    for (int p = 0; p < ZT_POOLS; p++)
        for (int i = 0; self->plan->pools[p].present && i < self->plan->pools[p].replicas; i++) {
            s_rep_t *r = &self->reps[n++];
            r->pool = p;
            r->index = i;
            r->out_fd = -1;
            r->last_status = -1;
            zt_replica_name(p, i, r->name, sizeof r->name);
            r->log_path = zt_strdupf("%s/%s.log", logs, r->name);
            r->log = fopen(r->log_path, "ae");
            if (!r->log)
                zt_warn("cannot open %s: %s", r->log_path, strerror(errno));
        }
    free(logs);
    /* The output folders, and in a trial the metric file's (a program may
     * write CLOUD_ML_HP_METRIC_FILE without making its folder). */
    const char *sub[] = { "model", "checkpoints", "logs", "hypertune" };
    for (int i = 0; i < (self->layout.trial ? 4 : 3); i++) {
        char *d = zt_strdupf("%s/%s", self->layout.base_dir, sub[i]);
        zt_mkdir_p(d);
        free(d);
    }
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
        s_rep_t *r = &self->reps[i];
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
    zt_layout_fini(&self->layout);
    zt_plan_destroy(&self->plan);
    json_decref(self->transitions);
    json_decref(self->metrics);
    json_decref(self->checkpoints);
    json_decref(self->evaluations);
    json_decref(self->latency);
    json_decref(self->lost_nodes);
    json_decref(self->error);
    s_sig_fd = -1;
    if (self->sig_pipe[0] >= 0) {
        close(self->sig_pipe[0]);
        close(self->sig_pipe[1]);
    }
    free(self->created);
    free(self);
    *self_p = NULL;
}

zt_job_state_t zt_coord_run(zt_coord_t *self)
{
    s_set_state(self, ZT_JOB_QUEUED);
    if (self->plan->timeout_s > 0)
        self->job_deadline = zt_now_ms() + (int64_t) (self->plan->timeout_s * 1000);
    zt_info("control plane on %s; job directory %s", self->layout.coordinator, self->layout.job_dir);
    s_spawn_all(self);
    zmq_pollitem_t *items = calloc((size_t) self->nreps + 2, sizeof *items);
    s_rep_t **owners = calloc((size_t) self->nreps + 2, sizeof *owners);
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
        if (items[1].revents & ZMQ_POLLIN) {
            unsigned char sigs[64];
            ssize_t got = read(self->sig_pipe[0], sigs, sizeof sigs);
            for (ssize_t i = 0; i < got; i++)
                if (sigs[i] != SIGCHLD) {
                    char why[1024];
                    /* the scheduler ends the allocation because a node failed, or the user cancels */
                    if (self->backend->node_lost && self->backend->node_lost(self->backend, NULL, why, sizeof why))
                        s_node_lost(self, why);
                    else {
                        snprintf(why, sizeof why, "received %s", strsignal(sigs[i]));
                        s_cancel(self, why);
                    }
                }
        }
        for (int i = 2; i < n; i++)
            if (items[i].revents & (ZMQ_POLLIN | ZMQ_POLLERR))
                s_read_output(self, owners[i]);
        s_reap_all(self);
        if (items[0].revents & ZMQ_POLLIN)
            s_on_control(self);
        s_timers(self);
        if (self->stopping && s_live(self) == 0) {
            self->stopping = false;
            if (self->after_stop == AFTER_RESPAWN) {
                self->backend->cleanup(self->backend);
                zt_info("starting the job again (incarnation %d)", self->layout.incarnation);
                s_spawn_all(self);
                continue;
            }
            break;
        }
    }
    free(items);
    free(owners);
    self->backend->cleanup(self->backend);
    for (int i = 0; i < self->nreps; i++) {
        s_read_output(self, &self->reps[i]);
        if (self->reps[i].out_fd >= 0) { /* a left-over process held the pipe */
            close(self->reps[i].out_fd);
            self->reps[i].out_fd = -1;
        }
    }
    if (self->metrics_dirty)
        s_write_state(self);
    s_set_state(self, self->final_state);
    if (self->requeue && self->backend->requeue)
        self->backend->requeue(self->backend);
    if (self->give_up && self->backend->give_up)
        self->backend->give_up(self->backend);
    return self->state;
}
