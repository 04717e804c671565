#include "base/zt_time.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int64_t zt_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t zt_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void zt_wall_iso(char *buf, size_t size)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char base[32];
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, size, "%s.%03ldZ", base, ts.tv_nsec / 1000000);
}

double zt_iso_epoch(const char *iso)
{
    struct tm tm = { 0 };
    int ms = 0;
    if (!iso || sscanf(iso, "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                       &tm.tm_min, &tm.tm_sec, &ms) < 6)
        return NAN;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (double) timegm(&tm) + ms / 1000.0;
}

double zt_parse_duration(const char *text)
{
    if (!text || !*text)
        return -1;
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || v < 0)
        return -1;
    if (!strcmp(end, "s") || !*end) return v;
    if (!strcmp(end, "m"))           return v * 60;
    if (!strcmp(end, "h"))           return v * 3600;
    return -1;
}
