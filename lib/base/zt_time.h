/* zt_time: Time: monotonic clocks, wall-clock ISO 8601 text, durations. */
#ifndef ZT_TIME_H
#define ZT_TIME_H
#include <stdint.h>
#include <stddef.h>

/* Monotonic milliseconds and microseconds. */
int64_t zt_now_ms(void);
int64_t zt_now_us(void);
/* Wall-clock time as ISO 8601 UTC with milliseconds, into buf (>= 32). */
void zt_wall_iso(char *buf, size_t size);
/* The reverse: seconds since the epoch of such a time (2026-11-23T21:32:49.342Z); NaN when it is not one. */
double zt_iso_epoch(const char *iso);
/* Parses a protobuf Duration ("7200s", "1.5s") or "90m", "2h"; seconds or -1. */
double zt_parse_duration(const char *text);

#endif
