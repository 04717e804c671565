/* `ztrain logs`, `ztrain list`, `ztrain wait`: watching jobs from the
 * command line, on this machine or a Slurm cluster (the job directory is
 * what they read: job.json, replica-logs/). */
#include "cli/zt_cli.h"
#include "plan/zt_state.h"
#include "base/zt_text.h"
#include "base/zt_util.h"
#include "ztrain/ztrain.h"
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define POLL_MS 250
/* logs -f holds a line this long before it prints it, so that a line of
 * another replica stamped earlier, which reached its file a moment later
 * (the coordinator writes every replica's output as it reads it), still
 * comes before it */
#define HOLD_MS 1000

/* ------------------------------------------------------------ logs */

typedef struct {
    char *name;        /* workerpool0-0, coordinator */
    char *path;
    long off;          /* read up to here */
    char stamp[32];    /* the newest timestamp seen: lines without one sort with it */
} s_log_t;

typedef struct {
    char stamp[32];    /* ISO 8601 UTC: sorts as text */
    int file;
    long seq;
    char *text;
} s_line_t;

static int s_line_cmp(const void *pa, const void *pb)
{
    const s_line_t *a = pa, *b = pb;
    int c = strcmp(a->stamp, b->stamp);
    if (c)
        return c;
    return a->file != b->file ? a->file - b->file : (a->seq > b->seq) - (a->seq < b->seq);
}

/* A log line's own timestamp (ztrain's prefix), or NULL. */
static bool s_has_stamp(const char *line)
{
    return strlen(line) >= 24 && line[4] == '-' && line[10] == 'T' && line[23] == 'Z';
}

/* The log files of dir/replica-logs (or the one of replica), added to logs
 * when new. */
static void s_scan(const char *dir, const char *replica, s_log_t **logs, int *n)
{
    char *ld = zt_strdupf("%s/replica-logs", dir);
    DIR *d = opendir(ld);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".log"))
            continue;
        char *name = strndup(e->d_name, len - 4);
        bool known = replica && strcmp(name, replica);
        for (int i = 0; !known && i < *n; i++)
            known = !strcmp((*logs)[i].name, name);
        if (known) {
            free(name);
            continue;
        }
        *logs = realloc(*logs, sizeof **logs * (size_t) (*n + 1));
        (*logs)[(*n)++] = (s_log_t) { name, zt_strdupf("%s/%s", ld, e->d_name), 0, "" };
    }
    if (d)
        closedir(d);
    free(ld);
}

/* Lines read and not printed yet (logs -f). */
typedef struct {
    s_line_t *lines;
    size_t n, cap;
    long seq;
} s_pending_t;

/* What was appended to every log since the last call, whole lines only,
 * printed in time order (prefixed by the log's name when several): all of
 * it (hold false), or what is older than HOLD_MS, the rest kept for the
 * next call. */
static void s_drain(s_log_t *logs, int n, bool prefix, s_pending_t *p, bool hold)
{
    for (int i = 0; i < n; i++) {
        FILE *f = fopen(logs[i].path, "r");
        if (!f)
            continue;
        fseek(f, logs[i].off, SEEK_SET);
        char *line = NULL;
        size_t lcap = 0;
        ssize_t got;
        while ((got = getline(&line, &lcap, f)) > 0) {
            if (line[got - 1] != '\n')
                break; /* a line still being written: next time */
            logs[i].off += (long) got;
            if (s_has_stamp(line))
                snprintf(logs[i].stamp, sizeof logs[i].stamp, "%.24s", line);
            if (p->n == p->cap) {
                p->cap = p->cap ? 2 * p->cap : 256;
                p->lines = realloc(p->lines, p->cap * sizeof *p->lines);
            }
            p->lines[p->n] = (s_line_t) { "", i, p->seq++, strdup(line) };
            memcpy(p->lines[p->n].stamp, logs[i].stamp, sizeof p->lines[p->n].stamp);
            p->n++;
        }
        free(line);
        fclose(f);
    }
    qsort(p->lines, p->n, sizeof *p->lines, s_line_cmp);
    char cutoff[40] = "~"; /* after every stamp */
    if (hold) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        time_t t = ts.tv_sec - HOLD_MS / 1000;
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(cutoff, sizeof cutoff, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(cutoff + strlen(cutoff), sizeof cutoff - strlen(cutoff), ".%03ldZ", ts.tv_nsec / 1000000);
    }
    size_t k = 0;
    for (; k < p->n && strcmp(p->lines[k].stamp, cutoff) <= 0; k++) {
        if (prefix) /* the files' text as safe lines: a control byte shows as \xNN */
            printf("%-14s| ", zt_text_safe(logs[p->lines[k].file].name, 0));
        zt_text_print(stdout, p->lines[k].text);
        free(p->lines[k].text);
    }
    memmove(p->lines, p->lines + k, (p->n - k) * sizeof *p->lines);
    p->n -= k;
    fflush(stdout);
}

static volatile sig_atomic_t s_stop;
static void s_on_signal(int sig) { (void) sig; s_stop = 1; }

int zt_cli_logs(const char *dir, const char *replica, bool follow)
{
    const char *kind;
    json_t *doc = zt_cli_load(dir, &kind);
    if (!doc || !strcmp(kind, "study")) {
        fprintf(stderr, "ztrain logs: %s holds no job (no job.json that ztrain wrote%s)\n", dir,
                doc ? ": it is a study; its trials' logs are in trial-N/" : ", nothing submitted to Slurm");
        json_decref(doc);
        return 2;
    }
    s_log_t *logs = NULL;
    int n = 0;
    s_scan(dir, replica, &logs, &n);
    if (replica && n == 0 && !follow) {
        fprintf(stderr, "ztrain logs: %s/replica-logs has no log of replica '%s'", dir, replica);
        size_t i;
        json_t *r;
        json_array_foreach(json_object_get(doc, "replicas"), i, r)
            fprintf(stderr, "%s%s", i ? ", " : " (replicas: ", zt_text_safe(json_string_value(json_object_get(r, "name")), 0));
        fprintf(stderr, "%s\n", json_array_size(json_object_get(doc, "replicas")) ? ")" : "");
        json_decref(doc);
        return 2;
    }
    s_pending_t pending = { 0 };
    s_drain(logs, n, !replica, &pending, follow);
    if (follow) {
        struct sigaction sa = { .sa_handler = s_on_signal };
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        signal(SIGPIPE, SIG_IGN);
        bool ended = zt_state_final(json_string_value(json_object_get(doc, "state")));
        while (!ended && !s_stop && !ferror(stdout)) {
            usleep(POLL_MS * 1000);
            json_decref(doc);
            doc = zt_cli_load(dir, &kind);
            ended = doc && zt_state_final(json_string_value(json_object_get(doc, "state")));
            s_scan(dir, replica, &logs, &n);
            s_drain(logs, n, !replica, &pending, !ended); /* after the end too: what the last moments wrote */
        }
        s_drain(logs, n, !replica, &pending, false); /* what is held, when the job had ended or on Ctrl-C */
        if (ended)
            printf("ztrain logs: job %s %s\n", zt_text_safe(json_string_value(json_object_get(doc, "name")), 0),
                   zt_text_safe(json_string_value(json_object_get(doc, "state")), 1));
    }
    for (int i = 0; i < n; i++) {
        free(logs[i].name);
        free(logs[i].path);
    }
    free(logs);
    free(pending.lines);
    json_decref(doc);
    return 0;
}

/* ------------------------------------------------------------ wait */

int zt_cli_wait(const char *dir)
{
    const char *kind;
    json_t *doc = zt_cli_load(dir, &kind);
    if (!doc) {
        fprintf(stderr, "ztrain wait: %s holds no job or study (no job.json or study.json that ztrain wrote, "
                        "nothing submitted to Slurm)\n", dir);
        return 2;
    }
    struct sigaction sa = { .sa_handler = s_on_signal };
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    while (doc && !zt_state_final(json_string_value(json_object_get(doc, "state"))) && !s_stop) {
        usleep(POLL_MS * 1000);
        json_decref(doc);
        doc = zt_cli_load(dir, &kind);
    }
    if (s_stop) { /* the job goes on: only the waiting ends */
        json_decref(doc);
        return 130;
    }
    const char *state = json_string_value(json_object_get(doc, "state"));
    json_t *e = json_object_get(doc, "error");
    printf("%s %s: %s%s%s\n", kind, zt_text_safe(json_string_value(json_object_get(doc, "name")) ?: dir, 0),
           zt_text_safe(state, 1), json_is_object(e) ? ": " : "",
           json_is_object(e) ? zt_text_safe(json_string_value(json_object_get(e, "message")), 2) : "");
    int rc = zt_state_exit_code(state);
    json_decref(doc);
    return rc;
}

/* ------------------------------------------------------------ list */

static void s_duration(double secs, char *buf, size_t n)
{
    long s = secs < 0 ? 0 : (long) (secs + 0.5);
    if (s >= 3600)
        snprintf(buf, n, "%ldh%02ldm", s / 3600, s % 3600 / 60);
    else if (s >= 60)
        snprintf(buf, n, "%ldm%02lds", s / 60, s % 60);
    else
        snprintf(buf, n, "%lds", s);
}

/* One row: the job's or study's name, state, start and how long it ran (or has run). */
static json_t *s_row(const char *path, const char *kind, json_t *doc)
{
    const char *state = json_string_value(json_object_get(doc, "state"));
    const char *start = json_string_value(json_object_get(doc, "createTime")), *end = NULL;
    json_t *tr = json_object_get(doc, "transitions");
    const char *name = json_string_value(json_object_get(doc, "name"));
    if (!strcmp(kind, "study")) { /* from its trials: the first start, the last end */
        name = json_string_value(json_object_get(json_object_get(doc, "spec"), "displayName"));
        size_t i;
        json_t *t;
        json_array_foreach(json_object_get(doc, "trials"), i, t) {
            const char *a = json_string_value(json_object_get(t, "startTime"));
            const char *b = json_string_value(json_object_get(t, "endTime"));
            if (a && (!start || strcmp(a, start) < 0))
                start = a;
            if (b && (!end || strcmp(b, end) > 0))
                end = b;
        }
        if (!zt_state_final(state))
            end = NULL;
    }
    else if (json_array_size(tr)) {
        start = start ?: json_string_value(json_object_get(json_array_get(tr, 0), "time"));
        if (zt_state_final(state))
            end = json_string_value(json_object_get(json_array_get(tr, json_array_size(tr) - 1), "time"));
    }
    double t0 = zt_iso_epoch(start), t1 = end ? zt_iso_epoch(end) : (double) time(NULL);
    json_t *row = json_pack("{s:s, s:s, s:s, s:s}", "kind", kind, "name", name ? name : "-", "state",
                            state ? state : "?", "dir", path);
    if (start)
        json_object_set_new(row, "start", json_string(start));
    if (isfinite(t1 - t0))
        json_object_set_new(row, "seconds", json_real(t1 - t0));
    return row;
}

static int s_row_cmp(const void *pa, const void *pb)
{
    const char *a = json_string_value(json_object_get(*(json_t *const *) pa, "start"));
    const char *b = json_string_value(json_object_get(*(json_t *const *) pb, "start"));
    return strcmp(a ? a : "", b ? b : "");
}

int zt_cli_list(const char *jobs_dir, bool as_json)
{
    const char *top = jobs_dir ? jobs_dir : zt_knob_str(ZT_KNOB_JOBS_DIR);
    DIR *d = opendir(top);
    if (!d) {
        fprintf(stderr, "ztrain list: %s: %s%s\n", top, strerror(errno),
                jobs_dir ? "" : " (the jobs folder: ZT_JOBS_DIR, or give one: ztrain list DIR)");
        return 2;
    }
    json_t *rows = json_array();
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char *path = zt_strdupf("%s/%s", top, e->d_name);
        struct stat st;
        const char *kind;
        json_t *doc = stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? zt_cli_load(path, &kind) : NULL;
        if (doc)
            json_array_append_new(rows, s_row(path, kind, doc));
        json_decref(doc);
        free(path);
    }
    closedir(d);
    size_t n = json_array_size(rows);
    json_t **v = calloc(n + 1, sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = json_array_get(rows, i);
    qsort(v, n, sizeof *v, s_row_cmp);
    if (as_json) {
        json_t *sorted = json_array();
        for (size_t i = 0; i < n; i++)
            json_array_append(sorted, v[i]);
        char *t = json_dumps(sorted, JSON_INDENT(2));
        printf("%s\n", t);
        free(t);
        json_decref(sorted);
    }
    else if (n == 0)
        printf("no jobs or studies in %s\n", top);
    else {
        printf("%-5s  %-24s  %-10s  %-24s  %9s  %s\n", "KIND", "NAME", "STATE", "START", "DURATION", "DIRECTORY");
        for (size_t i = 0; i < n; i++) {
            char dur[32] = "-";
            json_t *secs = json_object_get(v[i], "seconds");
            if (secs)
                s_duration(json_real_value(secs), dur, sizeof dur);
            printf("%-5s  %-24s  %-10s  %-24s  %9s  ", zt_text_safe(json_string_value(json_object_get(v[i], "kind")), 0),
                   zt_text_safe(json_string_value(json_object_get(v[i], "name")), 1),
                   zt_text_safe(json_string_value(json_object_get(v[i], "state")), 2),
                   zt_text_safe(json_string_value(json_object_get(v[i], "start")) ?: "-", 3), dur);
            printf("%s\n", zt_text_safe(json_string_value(json_object_get(v[i], "dir")), 0));
        }
    }
    free(v);
    json_decref(rows);
    return 0;
}
