/* The replicas' output: every line to the replica's log under
 * <job-dir>/replica-logs and, with --echo, the console, in ztrain's one
 * line format. */
#include "chief/zt_crep.h"
#include "base/zt_text.h"
#include "base/zt_util.h"
#include "ztrain/zt_log.h"
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
 * line format, escaped: ztrain's own log lines as they are, a program's own lines
 * with the time, the replica and its pid in front. */
static void s_emit_line(zt_crep_t *r, bool echo, const char *text, size_t len)
{
    char buf[4 * 4096 + 256];
    size_t n = 0;
    if (!s_is_log_line(text, len))
        n = (size_t) zt_log_prefix(buf, sizeof buf, 'I', r->name,
                                   r->handle ? r->pid : 0L);
    /* the program's bytes, escaped: no control sequence reaches the
     * console or the log (a line is one line: it was split at newlines) */
    size_t total = n + zt_text_escape(buf + n, sizeof buf - n - 1, text, len > 4096 ? 4096 : len, NULL);
    buf[total++] = '\n';
    if (r->log) {
        fwrite(buf, 1, total, r->log);
        fflush(r->log);
    }
    if (echo && write(STDOUT_FILENO, buf, total) < 0) {
    }
}

/* Reads what is there; on EOF or error closes the fd. */
void zt_crep_read_output(zt_crep_t *r, bool echo)
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
                s_emit_line(r, echo, r->line, r->line_len);
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
                s_emit_line(r, echo, r->line + start, i - start);
                start = i + 1;
            }
        if (start == 0 && r->line_len == sizeof r->line) { /* a very long line */
            s_emit_line(r, echo, r->line, r->line_len);
            start = r->line_len;
        }
        memmove(r->line, r->line + start, r->line_len - start);
        r->line_len -= start;
    }
}

int zt_crep_open_logs(const char *job_dir, zt_crep_t *reps, int n)
{
    /* ztrain's own logs, apart from AIP_TENSORBOARD_LOG_DIR (<base>/logs/),
     * which belongs to the program: it may clear it. */
    char *logs = zt_strdupf("%s/replica-logs", job_dir);
    zt_mkdir_p(logs);
    /* the coordinator's own lines too, for `ztrain logs` */
    char *clog = zt_strdupf("%s/coordinator.log", logs);
    int cfd = open(clog, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600); /* never through a link */
    if (cfd < 0)
        zt_warn("cannot open %s: %s", clog, strerror(errno));
    else
        zt_log_tee(cfd);
    free(clog);
    for (int i = 0; i < n; i++) {
        zt_crep_t *r = &reps[i];
        r->log_path = zt_strdupf("%s/%s.log", logs, r->name);
        int fd = open(r->log_path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
        r->log = fd >= 0 ? fdopen(fd, "a") : NULL;
        if (fd >= 0 && !r->log)
            close(fd);
        if (!r->log)
            zt_warn("cannot open %s: %s", r->log_path, strerror(errno));
    }
    free(logs);
    return cfd;
}
