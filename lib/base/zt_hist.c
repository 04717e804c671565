#include "base/zt_hist.h"
#include <assert.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const double zt_hist_bounds[ZT_HIST_NB] = { 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                            0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10 };

static const char *const s_names[ZT_HIST_KINDS] = { "allreduce", "ps" };

static pthread_mutex_t s_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t s_counts[ZT_HIST_KINDS][ZT_HIST_NB + 1];
static double s_sum[ZT_HIST_KINDS];

const char *zt_hist_name(zt_hist_kind_t kind)
{
    return kind >= 0 && kind < ZT_HIST_KINDS ? s_names[kind] : NULL;
}

int zt_hist_kind(const char *name)
{
    for (int k = 0; name && k < ZT_HIST_KINDS; k++)
        if (!strcmp(name, s_names[k]))
            return k;
    return -1;
}

void zt_hist_observe(zt_hist_kind_t kind, double seconds)
{
    if (kind < 0 || kind >= ZT_HIST_KINDS || !(seconds >= 0))
        return;
    int b = 0;
    while (b < ZT_HIST_NB && seconds > zt_hist_bounds[b])
        b++;
    pthread_mutex_lock(&s_mu);
    s_counts[kind][b]++;
    s_sum[kind] += seconds;
    pthread_mutex_unlock(&s_mu);
}

uint64_t zt_hist_read(zt_hist_kind_t kind, uint64_t counts[ZT_HIST_NB + 1], double *sum)
{
    uint64_t n = 0;
    pthread_mutex_lock(&s_mu);
    memcpy(counts, s_counts[kind], sizeof s_counts[kind]);
    *sum = s_sum[kind];
    pthread_mutex_unlock(&s_mu);
    for (int b = 0; b <= ZT_HIST_NB; b++)
        n += counts[b];
    return n;
}

int zt_hist_format(const uint64_t counts[ZT_HIST_NB + 1], char *buf, size_t size)
{
    size_t at = 0;
    for (int b = 0; b <= ZT_HIST_NB; b++) {
        int n = snprintf(buf + at, size - at, "%s%llu", b ? "," : "", (unsigned long long) counts[b]);
        if (n < 0 || (size_t) n >= size - at)
            return -1;
        at += (size_t) n;
    }
    return 0;
}

int zt_hist_parse(const char *text, uint64_t counts[ZT_HIST_NB + 1])
{
    const char *p = text;
    for (int b = 0; b <= ZT_HIST_NB; b++) {
        if (*p < '0' || *p > '9')
            return -1;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(p, &end, 10);
        if (errno || end == p || *end != (b < ZT_HIST_NB ? ',' : '\0'))
            return -1;
        counts[b] = v;
        p = end + (b < ZT_HIST_NB);
    }
    return 0;
}

void zt_hist_selftest(void)
{
    uint64_t c[ZT_HIST_NB + 1], d[ZT_HIST_NB + 1];
    double sum0, sum;
    uint64_t n0 = zt_hist_read(ZT_HIST_PS, c, &sum0);
    zt_hist_observe(ZT_HIST_PS, 0.0001);  /* on a bound: that bucket */
    zt_hist_observe(ZT_HIST_PS, 0.003);
    zt_hist_observe(ZT_HIST_PS, 99);      /* beyond the largest */
    zt_hist_observe(ZT_HIST_PS, NAN);     /* ignored */
    zt_hist_observe(ZT_HIST_PS, -1);      /* ignored */
    uint64_t n = zt_hist_read(ZT_HIST_PS, d, &sum);
    assert(n == n0 + 3 && d[0] == c[0] + 1 && d[5] == c[5] + 1 && d[ZT_HIST_NB] == c[ZT_HIST_NB] + 1);
    assert(fabs(sum - sum0 - 99.0031) < 1e-9);
    char text[512];
    assert(zt_hist_format(d, text, sizeof text) == 0);
    uint64_t e[ZT_HIST_NB + 1];
    assert(zt_hist_parse(text, e) == 0 && !memcmp(d, e, sizeof e));
    assert(zt_hist_format(d, text, 8) == -1);
    assert(zt_hist_parse("1,2,3", e) == -1);
    assert(zt_hist_parse("0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0", e) == -1); /* one too many */
    assert(zt_hist_parse("0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,-1", e) == -1);
    assert(zt_hist_parse("0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,99999999999999999999999", e) == -1);
    assert(zt_hist_parse("0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,7", e) == 0 && e[ZT_HIST_NB] == 7);
    assert(zt_hist_kind("ps") == ZT_HIST_PS && zt_hist_kind("x") == -1 && zt_hist_kind(NULL) == -1);
}
