/* The coordinator's Prometheus endpoint (see zt_prom.h). */
#include "chief/zt_prom.h"
#include "chief/zt_coord.h"
#include "base/zt_refusals.h"
#include "base/zt_util.h"
#include "wire/zt_guard.h"
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Who may hold the server's connections, and for how long: a stranger
 * opening many, or trickling bytes to keep them, cannot starve the job's
 * own scrapes. */
#define CONN_MAX 64        /* connections at once */
#define CONN_PER_CLIENT 8  /* of them one client's: a local user's, or a remote address's */
#define CONN_IDLE_S 5      /* a connection silent this long is closed */
#define CONN_LIFE_MS 10000 /* a connection's whole life, request and answer, however it trickles */

typedef struct {
    struct MHD_Connection *c; /* NULL: a free slot */
    int fd;
    int64_t start_ms;
    bool cut;                 /* shut down at its deadline */
    char client[64];          /* "uid N" or an address */
} s_conn_t;

struct zt_prom {
    struct MHD_Daemon *d;
    pthread_mutex_t mu;  /* text, conns, stopping */
    pthread_cond_t cv;
    char *text;       /* the latest rendering */
    int port;
    char *token;      /* the bearer token a scrape must carry, or NULL: none asked */
    s_conn_t conns[CONN_MAX];
    bool stopping;
    pthread_t watchdog;
    zt_refusals_t refused; /* the server's thread's */
    char admitted[64];     /* the client the accept policy just let in: its STARTED notice follows at once,
                              in the same thread, so the owner lookup is made once per connection */
};

/* Whether the request carries "Authorization: Bearer <token>" (compared in
 * time that does not depend on where it differs). */
static bool s_authorized(const zt_prom_t *self, struct MHD_Connection *c)
{
    if (!self->token)
        return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncmp(h, "Bearer ", 7))
        return false;
    h += 7;
    size_t n = strlen(self->token);
    if (strlen(h) != n)
        return false;
    unsigned diff = 0;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned) (h[i] ^ self->token[i]);
    return diff == 0;
}

/* ------------------------------------------------------------ rendering */

typedef struct {
    char *buf;
    size_t len, cap;
} s_out_t;

static void s_put(s_out_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void s_put(s_out_t *o, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(o->buf ? o->buf + o->len : NULL, o->cap - o->len, fmt, ap); /* NULL: none yet */
        va_end(ap);
        if (n >= 0 && (size_t) n < o->cap - o->len) {
            o->len += (size_t) n;
            return;
        }
        o->cap = o->cap * 2 + (size_t) (n > 0 ? n : 0) + 256;
        o->buf = realloc(o->buf, o->cap);
    }
}

/* A label value as the format wants it: backslash, quote and newline escaped. */
static const char *s_esc(const char *v, char *buf, size_t n)
{
    size_t k = 0;
    for (; v && *v && k + 3 < n; v++) {
        if (*v == '\\' || *v == '"')
            buf[k++] = '\\', buf[k++] = *v;
        else if (*v == '\n')
            buf[k++] = '\\', buf[k++] = 'n';
        else
            buf[k++] = *v;
    }
    buf[k] = '\0';
    return buf;
}

/* A sample value: Prometheus's spelling of the special ones. */
static void s_num(char *buf, size_t n, double v)
{
    if (isnan(v))
        snprintf(buf, n, "NaN");
    else if (isinf(v))
        snprintf(buf, n, v > 0 ? "+Inf" : "-Inf");
    else
        snprintf(buf, n, "%.17g", v);
}

static void s_head(s_out_t *o, const char *name, const char *type, const char *help)
{
    s_put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A metric of a replica that has a series of its own below. */
static bool s_named(const char *m)
{
    return !strcmp(m, "loss") || !strcmp(m, "examples_per_sec");
}

/* A metric name made of what Prometheus takes ([a-zA-Z0-9_]). */
static void s_metric_name(const char *m, char *buf, size_t n)
{
    size_t k = 0;
    for (; *m && k + 1 < n; m++)
        buf[k++] = (*m >= 'a' && *m <= 'z') || (*m >= 'A' && *m <= 'Z') || (*m >= '0' && *m <= '9') ? *m : '_';
    buf[k] = '\0';
}

/* The job: its name and folder, its state, when it started, its retries. */
static void s_render_job(s_out_t *o, json_t *job)
{
    char e1[512], e2[256], v[64];
    const char *jname = s_esc(json_string_value(json_object_get(job, "name")), e1, sizeof e1);
    const char *state = json_string_value(json_object_get(job, "state"));
    s_head(o, "ztrain_job_info", "gauge", "The job this coordinator runs: its name and directory (always 1).");
    s_put(o, "ztrain_job_info{name=\"%s\",job_dir=\"%s\"} 1\n", jname,
          s_esc(json_string_value(json_object_get(job, "jobDir")), e2, sizeof e2));
    s_head(o, "ztrain_job_state", "gauge", "The job's state: 1 for the one it is in, 0 for the others.");
    for (int i = 0; i < ZT_JOB_STATES; i++)
        s_put(o, "ztrain_job_state{state=\"%s\"} %d\n", zt_job_state_name((zt_job_state_t) i),
              state && !strcmp(state, zt_job_state_name((zt_job_state_t) i)));
    s_head(o, "ztrain_job_start_time_seconds", "gauge", "When the job was created (Unix time).");
    s_num(v, sizeof v, zt_iso_epoch(json_string_value(json_object_get(job, "createTime"))));
    s_put(o, "ztrain_job_start_time_seconds %s\n", v);
    s_head(o, "ztrain_job_retries_total", "counter", "Whole-job retries (its replicas started again).");
    s_put(o, "ztrain_job_retries_total %lld\n", (long long) json_integer_value(json_object_get(job, "jobRetries")));
}

/* Replicas by pool and state (the pools the job has); each one's restarts. */
static void s_render_replicas(s_out_t *o, json_t *reps)
{
    char e2[256];
    int counts[ZT_POOLS][ZT_REP_STATES] = { { 0 } };
    bool present[ZT_POOLS] = { false };
    size_t i;
    json_t *r;
    json_array_foreach(reps, i, r) {
        int pool = (int) json_integer_value(json_object_get(r, "pool"));
        const char *rs = json_string_value(json_object_get(r, "state"));
        if (pool < 0 || pool >= ZT_POOLS)
            continue;
        present[pool] = true;
        for (int k = 0; rs && k < ZT_REP_STATES; k++)
            counts[pool][k] += !strcmp(rs, zt_replica_state_name(k));
    }
    s_head(o, "ztrain_replicas", "gauge", "Replicas of each pool in each state.");
    for (int p = 0; p < ZT_POOLS; p++)
        for (int k = 0; present[p] && k < ZT_REP_STATES; k++)
            s_put(o, "ztrain_replicas{pool=\"workerpool%d\",state=\"%s\"} %d\n", p, zt_replica_state_name(k),
                  counts[p][k]);
    s_head(o, "ztrain_replica_restarts_total", "counter", "In-place restarts of each replica.");
    json_array_foreach(reps, i, r)
        s_put(o, "ztrain_replica_restarts_total{replica=\"%s\",pool=\"workerpool%lld\"} %lld\n",
              s_esc(json_string_value(json_object_get(r, "name")), e2, sizeof e2),
              (long long) json_integer_value(json_object_get(r, "pool")),
              (long long) json_integer_value(json_object_get(r, "restarts")));
    s_head(o, "ztrain_replica_preemptions_total", "counter",
           "Stops of each replica by signals ztrain did not send (restarted, not counted as crashes).");
    json_array_foreach(reps, i, r)
        s_put(o, "ztrain_replica_preemptions_total{replica=\"%s\",pool=\"workerpool%lld\"} %lld\n",
              s_esc(json_string_value(json_object_get(r, "name")), e2, sizeof e2),
              (long long) json_integer_value(json_object_get(r, "pool")),
              (long long) json_integer_value(json_object_get(r, "preemptions")));
}

/* One named metric of every replica that reported it, as series `series`. */
static void s_render_named(s_out_t *o, json_t *metrics, const char *metric, const char *series, const char *help)
{
    char e2[256], v[64];
    const char *rep;
    json_t *per, *mv;
    s_head(o, series, "gauge", help);
    json_object_foreach(metrics, rep, per)
        if ((mv = json_object_get(per, metric))) {
            s_num(v, sizeof v, json_number_value(json_object_get(mv, "value")));
            s_put(o, "%s{replica=\"%s\"} %s\n", series, s_esc(rep, e2, sizeof e2), v);
        }
}

/* What each replica reported: its step, loss, examples/s, and the rest. */
static void s_render_metrics(s_out_t *o, json_t *metrics)
{
    char e2[256], e3[256], v[64];
    const char *rep, *m;
    json_t *per, *mv;
    s_head(o, "ztrain_replica_step", "gauge", "The newest step a replica reported a metric at.");
    json_object_foreach(metrics, rep, per) {
        long long step = -1;
        json_object_foreach(per, m, mv) {
            long long s = json_integer_value(json_object_get(mv, "step"));
            step = s > step ? s : step;
        }
        if (step >= 0)
            s_put(o, "ztrain_replica_step{replica=\"%s\"} %lld\n", s_esc(rep, e2, sizeof e2), step);
    }
    s_render_named(o, metrics, "loss", "ztrain_replica_loss", "A replica's newest training loss.");
    s_render_named(o, metrics, "examples_per_sec", "ztrain_replica_examples_per_second",
                   "A replica's newest training throughput.");
    s_head(o, "ztrain_replica_metric", "gauge", "Every other metric a replica reported (accuracy, ...): its newest value.");
    json_object_foreach(metrics, rep, per)
        json_object_foreach(per, m, mv)
            if (!s_named(m)) { /* the name as reported, a label value: two names, two series */
                s_num(v, sizeof v, json_number_value(json_object_get(mv, "value")));
                s_put(o, "ztrain_replica_metric{replica=\"%s\",name=\"%s\"} %s\n",
                      s_esc(rep, e2, sizeof e2), s_esc(m, e3, sizeof e3), v);
            }
}

/* Checkpoints and evaluations: how many, and the newest of each. */
static void s_render_records(s_out_t *o, json_t *ck, json_t *evs)
{
    char e2[256], e3[256], v[64];
    s_head(o, "ztrain_checkpoints_total", "counter", "Checkpoints announced by the job's chief.");
    s_put(o, "ztrain_checkpoints_total %zu\n", json_array_size(ck));
    if (json_array_size(ck)) {
        s_head(o, "ztrain_checkpoint_step", "gauge", "The step of the newest checkpoint.");
        s_put(o, "ztrain_checkpoint_step %lld\n",
              (long long) json_integer_value(json_object_get(json_array_get(ck, json_array_size(ck) - 1), "step")));
    }
    s_head(o, "ztrain_evaluations_total", "counter", "Evaluator results (one per metric and checkpoint).");
    s_put(o, "ztrain_evaluations_total %zu\n", json_array_size(evs));
    json_t *last = json_object(); /* name -> newest evaluation */
    json_t *e;
    size_t i;
    const char *m;
    json_array_foreach(evs, i, e)
        json_object_set(last, json_string_value(json_object_get(e, "name")) ?: "?", e);
    s_head(o, "ztrain_evaluation", "gauge", "The newest value of each evaluator metric.");
    json_object_foreach(last, m, e) {
        s_num(v, sizeof v, json_number_value(json_object_get(e, "value")));
        s_put(o, "ztrain_evaluation{name=\"%s\",replica=\"%s\"} %s\n", s_esc(m, e2, sizeof e2),
              s_esc(json_string_value(json_object_get(e, "replica")), e3, sizeof e3), v);
    }
    s_head(o, "ztrain_evaluation_step", "gauge", "The checkpoint step of each evaluator metric's newest value.");
    json_object_foreach(last, m, e)
        s_put(o, "ztrain_evaluation_step{name=\"%s\",replica=\"%s\"} %lld\n",
              s_esc(m, e2, sizeof e2), s_esc(json_string_value(json_object_get(e, "replica")), e3, sizeof e3),
              (long long) json_integer_value(json_object_get(e, "step")));
    json_decref(last);
}

/* Control-plane messages the coordinator dropped, by reason. */
static void s_render_drops(s_out_t *o, json_t *drops)
{
    char e2[256];
    const char *why;
    json_t *mv;
    s_head(o, "ztrain_control_plane_dropped_messages_total", "counter",
           "Control-plane messages the coordinator refused: malformed, from unknown senders, ...");
    json_object_foreach(drops, why, mv)
        s_put(o, "ztrain_control_plane_dropped_messages_total{reason=\"%s\"} %lld\n",
              s_esc(why, e2, sizeof e2), (long long) json_integer_value(mv));
}

/* The replicas' data-plane latency histograms: ztrain_<kind>_seconds. */
static void s_render_latency(s_out_t *o, json_t *latency)
{
    char e2[256], e3[256], v[64];
    const char *kind, *rep;
    json_t *byrep, *h;
    json_object_foreach(latency, kind, byrep) {
        char name[300], help[160];
        s_metric_name(kind, e3, sizeof e3);
        snprintf(name, sizeof name, "ztrain_%s_seconds", e3);
        snprintf(help, sizeof help, "Each replica's %s latency (one per call, from the replica).", kind);
        s_head(o, name, "histogram", help);
        json_object_foreach(byrep, rep, h) {
            json_t *bounds = json_object_get(h, "le"), *counts = json_object_get(h, "counts");
            long long cum = 0;
            s_esc(rep, e2, sizeof e2);
            for (size_t b = 0; b < json_array_size(bounds) && b < json_array_size(counts); b++) {
                cum += json_integer_value(json_array_get(counts, b));
                s_num(v, sizeof v, json_number_value(json_array_get(bounds, b)));
                s_put(o, "%s_bucket{replica=\"%s\",le=\"%s\"} %lld\n", name, e2, v, cum);
            }
            cum += json_integer_value(json_array_get(counts, json_array_size(bounds)));
            s_put(o, "%s_bucket{replica=\"%s\",le=\"+Inf\"} %lld\n", name, e2, cum);
            s_num(v, sizeof v, json_number_value(json_object_get(h, "sum")));
            s_put(o, "%s_sum{replica=\"%s\"} %s\n", name, e2, v);
            s_put(o, "%s_count{replica=\"%s\"} %lld\n", name, e2, cum);
        }
    }
}

char *zt_prom_render(json_t *job)
{
    s_out_t o = { 0 };
    s_render_job(&o, job);
    s_render_replicas(&o, json_object_get(job, "replicas"));
    s_render_metrics(&o, json_object_get(job, "metrics"));
    s_render_records(&o, json_object_get(job, "checkpoints"), json_object_get(job, "evaluations"));
    s_render_drops(&o, json_object_get(job, "controlPlaneDrops"));
    s_render_latency(&o, json_object_get(job, "latency"));
    if (!o.buf)
        s_put(&o, "%s", "");
    return o.buf;
}

/* ------------------------------------------------------------ serving */

/* A client: the local user whose socket it is (so that every user of a
 * machine, all at 127.0.0.1, counts apart), else its address. */
static void s_client(const zt_prom_t *self, const struct sockaddr *a, char *out, size_t len)
{
    long uid = a ? zt_guard_owner(a, self->port) : -1;
    char addr[INET6_ADDRSTRLEN] = "?";
    if (a && !zt_sockaddr_name(a, addr, sizeof addr))
        snprintf(addr, sizeof addr, "?");
    if (uid >= 0)
        snprintf(out, len, "uid %ld", uid);
    else
        snprintf(out, len, "%s", addr);
}

static enum MHD_Result s_accept_policy(void *cls, const struct sockaddr *a, socklen_t alen)
{
    (void) alen;
    zt_prom_t *self = cls;
    char client[64];
    s_client(self, a, client, sizeof client);
    int held = 0;
    pthread_mutex_lock(&self->mu);
    for (int i = 0; i < CONN_MAX; i++)
        held += self->conns[i].c && !strcmp(self->conns[i].client, client);
    pthread_mutex_unlock(&self->mu);
    if (held < CONN_PER_CLIENT) {
        snprintf(self->admitted, sizeof self->admitted, "%s", client);
        return MHD_YES;
    }
    char what[160];
    snprintf(what, sizeof what, "a /metrics connection from %s: it holds %d already", client, held);
    zt_refusals_count(&self->refused, what, zt_now_ms());
    return MHD_NO;
}

static void s_notify(void *cls, struct MHD_Connection *c, void **socket_ctx, enum MHD_ConnectionNotificationCode code)
{
    (void) socket_ctx;
    zt_prom_t *self = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *fi = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        pthread_mutex_lock(&self->mu);
        for (int i = 0; i < CONN_MAX; i++)
            if (!self->conns[i].c) {
                self->conns[i] = (s_conn_t) { .c = c, .fd = fi ? fi->connect_fd : -1, .start_ms = zt_now_ms() };
                snprintf(self->conns[i].client, sizeof self->conns[i].client, "%s", self->admitted);
                break;
            }
        pthread_mutex_unlock(&self->mu);
    }
    else if (code == MHD_CONNECTION_NOTIFY_CLOSED) { /* before its socket is closed */
        pthread_mutex_lock(&self->mu);
        for (int i = 0; i < CONN_MAX; i++)
            if (self->conns[i].c == c)
                self->conns[i].c = NULL;
        pthread_mutex_unlock(&self->mu);
    }
}

/* Cuts a connection at CONN_LIFE_MS: shut down under the lock that its
 * CLOSED notice takes before its socket is closed, so the descriptor is
 * still the connection's; the server's thread then sees the end and
 * closes it as any other. */
static void *s_watchdog_main(void *arg)
{
    zt_prom_t *self = arg;
    pthread_mutex_lock(&self->mu);
    while (!self->stopping) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_nsec += 500 * 1000000L;
        t.tv_sec += t.tv_nsec / 1000000000L;
        t.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&self->cv, &self->mu, &t);
        int64_t now = zt_now_ms();
        for (int i = 0; i < CONN_MAX; i++) {
            s_conn_t *k = &self->conns[i];
            if (k->c && !k->cut && k->fd >= 0 && now - k->start_ms >= CONN_LIFE_MS) {
                shutdown(k->fd, SHUT_RDWR);
                k->cut = true;
            }
        }
    }
    pthread_mutex_unlock(&self->mu);
    return NULL;
}

static enum MHD_Result s_answer(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                const char *version, const char *upload, size_t *upload_size, void **ctx)
{
    (void) version, (void) upload, (void) upload_size, (void) ctx;
    zt_prom_t *self = cls;
    const char *body, *type = "text/plain; charset=utf-8";
    unsigned status = MHD_HTTP_OK;
    char *copy = NULL;
    if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
        status = MHD_HTTP_METHOD_NOT_ALLOWED;
        body = "only GET /metrics is served here\n";
    }
    else if (strcmp(url, "/metrics")) {
        status = MHD_HTTP_NOT_FOUND;
        body = "not found: the metrics are at /metrics\n";
    }
    else if (!s_authorized(self, c)) {
        status = MHD_HTTP_UNAUTHORIZED;
        body = "a scrape carries the job's bearer token (its file: job.json's metricsTokenFile)\n";
    }
    else {
        pthread_mutex_lock(&self->mu);
        copy = strdup(self->text ? self->text : "");
        pthread_mutex_unlock(&self->mu);
        body = copy;
        type = "text/plain; version=0.0.4; charset=utf-8";
    }
    struct MHD_Response *resp = copy ? MHD_create_response_from_buffer(strlen(copy), copy, MHD_RESPMEM_MUST_FREE)
                                     : MHD_create_response_from_buffer(strlen(body), (void *) body,
                                                                       MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    if (status == MHD_HTTP_UNAUTHORIZED)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"ztrain\"");
    enum MHD_Result rc = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    return rc;
}

zt_prom_t *zt_prom_start(const char *addr, int port, const char *token, char *err, size_t errlen)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t) port) };
    if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
        snprintf(err, errlen, "metrics address '%s': not an IPv4 address", addr);
        return NULL;
    }
    zt_prom_t *self = calloc(1, sizeof *self);
    pthread_mutex_init(&self->mu, NULL);
    pthread_cond_init(&self->cv, NULL);
    self->token = token ? strdup(token) : NULL;
    self->port = port;
    /* the port, known before the first connection (the owner lookup needs it) */
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    socklen_t salen = sizeof sa;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, (struct sockaddr *) &sa, sizeof sa) != 0 || listen(fd, 64) != 0 ||
        getsockname(fd, (struct sockaddr *) &sa, &salen) != 0) {
        snprintf(err, errlen, "cannot serve metrics on %s:%d: %s", addr, port, strerror(errno ? errno : EADDRINUSE));
        if (fd >= 0)
            close(fd);
        fd = -1;
    }
    else
        self->port = ntohs(sa.sin_port);
    self->d = fd < 0 ? NULL
                     : MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL, 0, s_accept_policy, self,
                                        s_answer, self, MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT,
                                        (unsigned) CONN_MAX, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned) CONN_IDLE_S,
                                        MHD_OPTION_NOTIFY_CONNECTION, s_notify, self, MHD_OPTION_END);
    if (self->d && pthread_create(&self->watchdog, NULL, s_watchdog_main, self) != 0) {
        MHD_stop_daemon(self->d);
        self->d = NULL;
        snprintf(err, errlen, "cannot serve metrics on %s:%d: %s", addr, port, strerror(errno));
    }
    else if (!self->d && fd >= 0) {
        snprintf(err, errlen, "cannot serve metrics on %s:%d: %s", addr, port, strerror(errno ? errno : EIO));
        close(fd);
    }
    if (!self->d) {
        pthread_cond_destroy(&self->cv);
        pthread_mutex_destroy(&self->mu);
        free(self->token);
        free(self);
        return NULL;
    }
    return self;
}

int zt_prom_port(const zt_prom_t *self)
{
    return self->port;
}

void zt_prom_update(zt_prom_t *self, json_t *job)
{
    if (!self)
        return;
    char *text = zt_prom_render(job);
    pthread_mutex_lock(&self->mu);
    char *old = self->text;
    self->text = text;
    pthread_mutex_unlock(&self->mu);
    free(old);
}

void zt_prom_stop(zt_prom_t **self_p)
{
    zt_prom_t *self = *self_p;
    if (!self)
        return;
    pthread_mutex_lock(&self->mu);
    self->stopping = true;
    pthread_cond_signal(&self->cv);
    pthread_mutex_unlock(&self->mu);
    pthread_join(self->watchdog, NULL);
    MHD_stop_daemon(self->d);
    pthread_cond_destroy(&self->cv);
    pthread_mutex_destroy(&self->mu);
    free(self->text);
    free(self->token);
    free(self);
    *self_p = NULL;
}
