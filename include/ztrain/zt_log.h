/* ztrain: logging. One line format everywhere:
 *   2026-11-23T05:24:43.984Z I worker/1 workerpool1-0[19535]: message
 * the date and time (ISO 8601, UTC, milliseconds), the level (E W I D), the
 * role and its index, the replica (when the process is one) and the pid.
 * The coordinator writes a program's own output lines in the same form. */
#ifndef ZT_LOG_H
#define ZT_LOG_H
#include <stdarg.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { ZT_LOG_ERROR = 0, ZT_LOG_WARN, ZT_LOG_INFO, ZT_LOG_DEBUG } zt_log_level_t;

/* Sets the role name and index printed on every line; reads ZT_LOG_LEVEL. */
void zt_log_init(const char *role, int index);
void zt_log_set_level(zt_log_level_t level);
/* Sets the replica name printed after role/index ("workerpool1-0"). */
void zt_log_set_replica(const char *name);
/* Every line also to fd (a log file; -1: none). */
void zt_log_tee(int fd);
/* The start of a line in this format for who (e.g. "workerpool0-0") and
 * pid, into buf: "<time> <level> <who>[<pid>]: ". Its length. */
int zt_log_prefix(char *buf, size_t size, char level, const char *who, long pid);
extern zt_log_level_t zt_log_level_;
void zt_log_write(zt_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define ZT_LOG(lvl, ...) \
    do { if ((lvl) <= zt_log_level_) zt_log_write((lvl), __VA_ARGS__); } while (0)
#define zt_error(...) ZT_LOG(ZT_LOG_ERROR, __VA_ARGS__)
#define zt_warn(...)  ZT_LOG(ZT_LOG_WARN, __VA_ARGS__)
#define zt_info(...)  ZT_LOG(ZT_LOG_INFO, __VA_ARGS__)
#define zt_debug(...) ZT_LOG(ZT_LOG_DEBUG, __VA_ARGS__)

#ifdef __cplusplus
}
#endif
#endif
