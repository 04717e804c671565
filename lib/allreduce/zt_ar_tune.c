/* ZT_AUTOTUNE: the fusion threshold and cycle time searched during an
 * all-reduce's first rounds (zt_ar_tune.h). */
#include "allreduce/zt_ar_tune.h"
#include "allreduce/zt_arlayout.h"
#include "base/zt_gp.h"
#include "ztrain/zt_knobs.h"
#include "ztrain/zt_log.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SAMPLES (ZT_AR_LAYOUTS - 4) /* a layout each, and the last one */
#define LOG2_MIN 12                     /* thresholds from 4 KiB (or the floor) ... */
#define LOG2_MAX 26                     /* ... to 64 MiB, on a log scale */
#define CYCLE_MIN 1                     /* cycle times from 1 ms ... */
#define CYCLE_SPAN 24                   /* ... to 25 ms */
#define NOISE 0.05                      /* the GP's noise variance: timings on shared machines */
#define DESIGN 4                        /* spread samples after the starting one */

struct zt_ar_tune_t {
    bool leader;
    double lo;                  /* log2 of the smallest threshold searched */
    int per_sample, max_samples;
    zt_ar_tune_setting_t cur;   /* the layout in force */
    zt_ar_tune_setting_t next;  /* the leader's word: cur until it decides */
    int skip;                   /* rounds not timed: the warmup */
    int64_t last_us;            /* the last round's end; 0: none under this layout */
    double *times;              /* this sample's round times (s) */
    int ntimes;
    int n;                      /* samples taken */
    double X[MAX_SAMPLES * 2], y[MAX_SAMPLES], secs[MAX_SAMPLES];
    zt_ar_tune_setting_t tried[MAX_SAMPLES];
    FILE *log;                  /* ZT_AUTOTUNE_LOG */
    unsigned rng;
};

/* The first of two knobs that is set, else def. */
static int64_t s_knob2(zt_knob_t a, zt_knob_t b, int64_t def)
{
    return zt_knob_is_set(a) ? zt_knob_int(a) : zt_knob_is_set(b) ? zt_knob_int(b) : def;
}

bool zt_ar_tune_wanted(void)
{
    return s_knob2(ZT_KNOB_AUTOTUNE, ZT_KNOB_HOROVOD_AUTOTUNE, 0) == 1;
}

static void s_size(int64_t bytes, char *buf, size_t size)
{
    if (bytes >= (1 << 20) && bytes % (1 << 20) == 0)
        snprintf(buf, size, "%lld MiB", (long long) (bytes >> 20));
    else if (bytes >= (1 << 20))
        snprintf(buf, size, "%.1f MiB", (double) bytes / (1 << 20));
    else
        snprintf(buf, size, "%lld KiB", (long long) (bytes >> 10));
}

static void s_to_u(const zt_ar_tune_t *self, const zt_ar_tune_setting_t *s, double *u)
{
    double a = (log2((double) (s->threshold > 0 ? s->threshold : 1)) - self->lo) / (LOG2_MAX - self->lo);
    double b = (double) (s->cycle_ms - CYCLE_MIN) / CYCLE_SPAN;
    u[0] = a < 0 ? 0 : a > 1 ? 1 : a;
    u[1] = b < 0 ? 0 : b > 1 ? 1 : b;
}

static zt_ar_tune_setting_t s_from_u(const zt_ar_tune_t *self, const double *u)
{
    int64_t th = ((int64_t) llround(exp2(self->lo + (LOG2_MAX - self->lo) * u[0]) / 1024.0)) << 10;
    return (zt_ar_tune_setting_t) { th, (int) lround(CYCLE_MIN + CYCLE_SPAN * u[1]), 0, false };
}

static double s_rand01(void *arg)
{
    return (double) (rand_r(arg) % 1000000) / 1000000.0 + 0.0000005;
}

zt_ar_tune_t *zt_ar_tune_new(bool leader, int64_t threshold, int cycle_ms, int layout, int64_t floor)
{
    zt_ar_tune_t *self = calloc(1, sizeof *self);
    self->leader = leader;
    self->lo = floor > 0 ? ceil(log2((double) floor)) : LOG2_MIN;
    self->lo = self->lo < LOG2_MIN ? LOG2_MIN : self->lo > LOG2_MAX - 1 ? LOG2_MAX - 1 : self->lo;
    self->per_sample = (int) s_knob2(ZT_KNOB_AUTOTUNE_STEPS_PER_SAMPLE, ZT_KNOB_HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE, 10);
    self->per_sample = self->per_sample < 1 ? 1 : self->per_sample;
    int64_t n = s_knob2(ZT_KNOB_AUTOTUNE_SAMPLES, ZT_KNOB_HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES, 20);
    if (leader && n > MAX_SAMPLES)
        zt_warn("autotune: %lld samples asked for, %d taken (ZT_AUTOTUNE_SAMPLES)", (long long) n, MAX_SAMPLES);
    self->max_samples = n < 1 ? 1 : n > MAX_SAMPLES ? MAX_SAMPLES : (int) n;
    self->skip = (int) s_knob2(ZT_KNOB_AUTOTUNE_WARMUP_SAMPLES, ZT_KNOB_HOROVOD_AUTOTUNE_WARMUP_SAMPLES, 3) *
                 self->per_sample;
    self->times = calloc((size_t) self->per_sample, sizeof(double));
    self->cur = self->next = (zt_ar_tune_setting_t) { threshold, cycle_ms, layout, false };
    self->rng = 12345;
    if (!leader)
        return self;
    if (layout > 0) { /* restarted: the samples are lost; the setting in force stays */
        zt_warn("autotune: rank 0 restarted during the search: the setting in force (layout %d) is kept", layout);
        self->next = (zt_ar_tune_setting_t) { threshold, cycle_ms, layout + 1, true };
        return self;
    }
    const char *path = zt_knob_is_set(ZT_KNOB_AUTOTUNE_LOG) ? zt_knob_str(ZT_KNOB_AUTOTUNE_LOG)
                       : zt_knob_is_set(ZT_KNOB_HOROVOD_AUTOTUNE_LOG) ? zt_knob_str(ZT_KNOB_HOROVOD_AUTOTUNE_LOG)
                                                                     : NULL;
    if (path && !(self->log = fopen(path, "we")))
        zt_warn("autotune: cannot write %s (ZT_AUTOTUNE_LOG): %m", path);
    if (self->log)
        fprintf(self->log, "sample,fusion_threshold_bytes,cycle_time_ms,seconds_per_round,chosen\n");
    char th[32], lo[32];
    s_size(threshold, th, sizeof th);
    s_size((int64_t) exp2(self->lo), lo, sizeof lo);
    zt_info("autotune: searching the fusion threshold (%s to 64 MiB) and cycle time (1 to 25 ms) in %d "
            "samples of %d rounds, from %s and %d ms", lo, self->max_samples, self->per_sample, th, cycle_ms);
    return self;
}

void zt_ar_tune_destroy(zt_ar_tune_t **self_p)
{
    zt_ar_tune_t *self = *self_p;
    if (!self)
        return;
    if (self->log)
        fclose(self->log);
    free(self->times);
    free(self);
    *self_p = NULL;
}

void zt_ar_tune_word(zt_ar_tune_t *self, float *w)
{
    memset(w, 0, ZT_AR_TUNE_WORD * sizeof(float));
    if (!self->leader)
        return;
    w[0] = (float) (self->next.threshold >> 10);
    w[1] = (float) self->next.cycle_ms;
    w[2] = (float) self->next.layout;
    w[3] = self->next.final ? 1.0f : 0.0f;
}

zt_ar_tune_setting_t zt_ar_tune_read(const float *w, float scale)
{
    zt_ar_tune_setting_t s = { 0, 0, 0, false };
    for (int i = 0; i < ZT_AR_TUNE_WORD; i++)
        if (!isfinite(w[i] * scale) || w[i] * scale < 0 || w[i] * scale > 1e7f)
            return s; /* not a word a leader says: no change */
    s.threshold = (int64_t) lrintf(w[0] * scale) << 10;
    s.cycle_ms = (int) lrintf(w[1] * scale);
    s.layout = (int) lrintf(w[2] * scale);
    s.final = lrintf(w[3] * scale) != 0;
    if (s.threshold < 1024 || s.layout >= ZT_AR_LAYOUTS)
        s.layout = 0;
    return s;
}

void zt_ar_tune_formed(zt_ar_tune_t *self, const zt_ar_tune_setting_t *s)
{
    self->cur = self->next = *s;
    self->last_us = 0;
    self->ntimes = 0;
}

static int s_cmp(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

/* The setting to sample after the n taken: spread ones first, then the
 * Gaussian process's (random where it cannot say). */
static zt_ar_tune_setting_t s_suggest(zt_ar_tune_t *self)
{
    static const double design[DESIGN][2] = { { 0.0, 0.2 }, { 0.35, 0.6 }, { 0.65, 0.2 }, { 1.0, 0.6 } };
    double u[2];
    if (self->n <= DESIGN)
        return s_from_u(self, design[self->n - 1]);
    zt_gp_t gp = { 2, self->n, self->n, self->X, self->y, NOISE };
    if (!zt_gp_suggest(&gp, s_rand01, &self->rng, u)) {
        u[0] = s_rand01(&self->rng);
        u[1] = s_rand01(&self->rng);
    }
    return s_from_u(self, u);
}

/* Every sample is in: the fastest stays, and why is said. */
static void s_choose(zt_ar_tune_t *self)
{
    int best = 0, worst = 0;
    for (int i = 1; i < self->n; i++) {
        best = self->secs[i] < self->secs[best] ? i : best;
        worst = self->secs[i] > self->secs[worst] ? i : worst;
    }
    zt_ar_tune_setting_t *b = &self->tried[best];
    char bt[32], st[32], wt[32];
    s_size(b->threshold, bt, sizeof bt);
    s_size(self->tried[0].threshold, st, sizeof st);
    s_size(self->tried[worst].threshold, wt, sizeof wt);
    zt_info("autotune: chose fusion threshold %s and cycle time %d ms: %.3f ms a round, the fastest of %d "
            "samples (the starting %s and %d ms took %.3f ms, %.0f%% longer; the slowest, %s and %d ms, %.3f ms)",
            bt, b->cycle_ms, self->secs[best] * 1e3, self->n, st, self->tried[0].cycle_ms, self->secs[0] * 1e3,
            (self->secs[0] / self->secs[best] - 1) * 100, wt, self->tried[worst].cycle_ms,
            self->secs[worst] * 1e3);
    if (self->log) {
        fprintf(self->log, "chosen,%lld,%d,%.9f,1\n", (long long) b->threshold, b->cycle_ms, self->secs[best]);
        fflush(self->log);
    }
    self->next = (zt_ar_tune_setting_t) { b->threshold, b->cycle_ms, self->cur.layout + 1, true };
}

void zt_ar_tune_round(zt_ar_tune_t *self, int64_t now_us)
{
    int64_t dt = self->last_us ? now_us - self->last_us : -1;
    self->last_us = now_us;
    /* a new layout's first round holds its forming; a decided leader waits for the group to switch */
    if (!self->leader || self->next.layout != self->cur.layout || dt < 0)
        return;
    if (self->skip > 0) {
        self->skip--;
        return;
    }
    self->times[self->ntimes++] = (double) dt / 1e6;
    if (self->ntimes < self->per_sample)
        return;
    qsort(self->times, (size_t) self->ntimes, sizeof(double), s_cmp);
    double med = self->times[self->ntimes / 2];
    int i = self->n++;
    self->tried[i] = self->cur;
    self->secs[i] = med;
    self->y[i] = -log(med > 1e-9 ? med : 1e-9);
    s_to_u(self, &self->cur, self->X + 2 * i);
    char th[32];
    s_size(self->cur.threshold, th, sizeof th);
    zt_info("autotune: sample %d of %d: fusion threshold %s, cycle time %d ms: %.3f ms a round (median of %d)",
            self->n, self->max_samples, th, self->cur.cycle_ms, med * 1e3, self->ntimes);
    if (self->log) {
        fprintf(self->log, "%d,%lld,%d,%.9f,0\n", self->n, (long long) self->cur.threshold, self->cur.cycle_ms, med);
        fflush(self->log);
    }
    self->ntimes = 0;
    if (self->n >= self->max_samples) {
        s_choose(self);
        return;
    }
    self->next = s_suggest(self);
    self->next.layout = self->cur.layout + 1;
}
