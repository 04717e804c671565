#include "ztrain/zt_log.h"
#include "ztrain/zt_knobs.h"
#include "base/zt_text.h"
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

zt_log_level_t zt_log_level_ = ZT_LOG_INFO;
static char s_role[32] = "ztrain";
static int s_index = -1;
static char s_replica[48] = "";
static int s_tee = -1;

void zt_log_tee(int fd) { s_tee = fd; }

void zt_log_set_level(zt_log_level_t level) { zt_log_level_ = level; }

void zt_log_set_replica(const char *name)
{
    snprintf(s_replica, sizeof s_replica, "%s", name ? name : "");
}

int zt_log_prefix(char *buf, size_t size, char level, const char *who, long pid)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(buf, size, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %c %s[%ld]: ", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, level,
                     who, pid);
    return n < 0 ? 0 : n >= (int) size ? (int) size - 1 : n;
}

void zt_log_init(const char *role, int index)
{
    snprintf(s_role, sizeof s_role, "%s", role ? role : "ztrain");
    s_index = index;
    const char *lvl = zt_knob_str(ZT_KNOB_LOG_LEVEL);
    if (!strcasecmp(lvl, "error"))      zt_log_level_ = ZT_LOG_ERROR;
    else if (!strcasecmp(lvl, "warn"))  zt_log_level_ = ZT_LOG_WARN;
    else if (!strcasecmp(lvl, "debug")) zt_log_level_ = ZT_LOG_DEBUG;
    else                                zt_log_level_ = ZT_LOG_INFO;
}

void zt_log_write(zt_log_level_t level, const char *fmt, ...)
{
    static const char tag[] = "EWID";
    char line[4096], who[96], text[2048];
    snprintf(who, sizeof who, "%s/%d%s%s", s_role, s_index, s_replica[0] ? " " : "", s_replica);
    int n = zt_log_prefix(line, sizeof line, tag[level], who, (long) getpid());
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    /* What the message carries (a peer's name, a program's words) acts on
     * no terminal and starts no line: a control byte shows as \xNN, and a
     * newline goes on indented, so no line of its own looks like a log line. */
    size_t tl = m < 0 ? 0 : (size_t) m >= sizeof text ? sizeof text - 1 : (size_t) m;
    size_t len = (size_t) n + zt_text_escape(line + n, sizeof line - (size_t) n - 1, text, tl, "\n    ");
    line[len++] = '\n';
    /* One write per line so that lines from many processes do not mix. */
    ssize_t w = write(STDERR_FILENO, line, len);
    if (s_tee >= 0)
        w = write(s_tee, line, len);
    (void) w;
}
