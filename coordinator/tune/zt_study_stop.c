/* Early stopping by learning curve (Vertex's decayCurveStoppingSpec and
 * convexAutomatedStoppingSpec) and the study's own stop
 * (studyStoppingConfig). Each rule stops a trial only when even an
 * optimistic forecast of its final value is worse than the best final
 * value so far, so the best trial is never the one stopped. */
#include "tune/zt_study_int.h"
#include "base/zt_util.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

/* How much better a is than b in the study's direction. */
static double s_gain(const zt_study_t *s, double a, double b)
{
    return s->maximize ? a - b : b - a;
}

/* The trial's measurement at the highest step <= step (false: none). */
static bool s_at(const s_trial_t *t, double step, double *value, double *at)
{
    bool have = false;
    size_t i;
    json_t *m;
    json_array_foreach(t->meas, i, m) {
        double st = json_real_value(json_array_get(m, 0));
        if (st <= step && (!have || st >= *at)) {
            *at = st;
            *value = json_real_value(json_array_get(m, 1));
            have = true;
        }
    }
    return have;
}

/* The best final value of the completed trials, and how many there are. */
static int s_best_final(const zt_study_t *s, double *best)
{
    int n = 0;
    for (int k = 0; k < s->nt; k++)
        if (!strcmp(s->t[k].state, "SUCCEEDED") && s->t[k].has_final && (!n++ || s_gain(s, s->t[k].final, *best) > 0))
            *best = s->t[k].final;
    return n;
}

/* Decay curve: the trial at its latest step k is forecast to gain, by its
 * end, the most any completed trial gained after its own step k. */
static bool s_decay(const zt_study_t *s, const s_trial_t *t, char *why, size_t len)
{
    double k = -INFINITY, v = 0, best = 0;
    if (!s_at(t, INFINITY, &v, &k) || s_best_final(s, &best) < 2)
        return false;
    double gain = 0;
    int seen = 0;
    for (int j = 0; j < s->nt; j++) {
        const s_trial_t *o = &s->t[j];
        double vj = 0, at = 0;
        if (o == t || strcmp(o->state, "SUCCEEDED") || !o->has_final || !s_at(o, k, &vj, &at))
            continue;
        double g = s_gain(s, o->final, vj);
        gain = !seen++ || g > gain ? g : gain;
    }
    if (seen < 2)
        return false;
    double forecast = s->maximize ? v + fmax(gain, 0) : v - fmax(gain, 0);
    if (s_gain(s, best, forecast) <= 0)
        return false;
    snprintf(why, len, "%.4g at step %g, forecast %.4g at its end (the most %d completed trials gained after that "
             "step), is worse than the best %.4g", v, k, forecast, seen, best);
    return true;
}

/* Convex: a learning curve that flattens lies below its tangent, so the
 * line through the last two measurements, carried to maxStepCount (or the
 * longest completed trial's last step), bounds the final value. */
static bool s_convex(const zt_study_t *s, const s_trial_t *t, char *why, size_t len)
{
    size_t n = json_array_size(t->meas);
    double best = 0;
    if ((int) n < (s->convex_min_meas > 2 ? s->convex_min_meas : 2) || s_best_final(s, &best) < 1)
        return false;
    double k = -INFINITY, v = 0, kp = 0, vp = 0;
    s_at(t, INFINITY, &v, &k);
    if (k < s->convex_min_step || !s_at(t, nextafter(k, -INFINITY), &vp, &kp))
        return false;
    double horizon = s->convex_max_step;
    if (horizon <= 0) /* no maxStepCount: the longest completed trial's last step */
        for (int j = 0; j < s->nt; j++) {
            double lv = 0, ls = 0;
            if (!strcmp(s->t[j].state, "SUCCEEDED") && s_at(&s->t[j], INFINITY, &lv, &ls) && ls > horizon)
                horizon = ls;
        }
    if (horizon <= k)
        return false;
    double slope = fmax(s_gain(s, v, vp) / (k - kp), 0);
    double forecast = s->maximize ? v + slope * (horizon - k) : v - slope * (horizon - k);
    if (s_gain(s, best, forecast) <= 0)
        return false;
    snprintf(why, len, "%.4g at step %g, rising at most %.4g a step, reaches %.4g by step %g, worse than the "
             "best %.4g", v, k, slope, forecast, horizon, best);
    return true;
}

/* Hyperband (asynchronous successive halving): at each rung, MinResource
 * x 3^i steps, a trial goes on only among the best third of the trials
 * that reached that rung (all of them while fewer than three have); at
 * MaxResource it is done. */
static bool s_hyperband(const zt_study_t *s, s_trial_t *t, char *why, size_t len)
{
    double k = -INFINITY, v = 0;
    if (!s_at(t, INFINITY, &v, &k))
        return false;
    if (k >= (double) s->hb_max) {
        snprintf(why, len, "it reached MaxResource (%lld)", s->hb_max);
        return true;
    }
    double rung = (double) s->hb_min;
    for (int i = 0; i < t->hb_rungs; i++)
        rung *= 3;
    if (k < rung || rung > (double) s->hb_max)
        return false;
    t->hb_rungs++; /* judged once at each rung, when it gets there */
    double mine = 0, at = 0, other = 0;
    s_at(t, rung, &mine, &at);
    int reached = 0, better = 0;
    for (int j = 0; j < s->nt; j++) {
        double ov = 0, oat = 0, last = 0;
        if (&s->t[j] == t || !s_at(&s->t[j], INFINITY, &other, &last) || last < rung || !s_at(&s->t[j], rung, &ov, &oat))
            continue;
        reached++;
        better += s_gain(s, ov, mine) > 0;
    }
    if (reached + 1 < 3 || better < (reached + 1 + 2) / 3)
        return false;
    snprintf(why, len, "at rung %g, %d of the %d trials that reached it did better (the best third goes on)", rung,
             better, reached + 1);
    return true;
}

bool zt_study_curve_stop(zt_study_t *s, s_trial_t *t, char *why, size_t len)
{
    return (s->decay_stop && s_decay(s, t, why, len)) || (s->convex_stop && s_convex(s, t, why, len)) ||
           (s->hyperband && s_hyperband(s, t, why, len));
}

bool zt_study_done(zt_study_t *s, int64_t now_ms, char *why, size_t len)
{
    int done = 0;
    for (int k = 0; k < s->nt; k++)
        done += !s->t[k].run;
    /* the best so far, and when and at which trial it last improved */
    double best = 0;
    int n = 0;
    for (int k = 0; k < s->nt; k++) {
        const s_trial_t *t = &s->t[k];
        if (!t->run && !strcmp(t->state, "SUCCEEDED") && t->has_final && (!n++ || s_gain(s, t->final, best) > 0)) {
            best = t->final;
            if (s->best_at_trial < t->id) {
                s->best_at_trial = t->id;
                s->best_at_ms = now_ms;
            }
        }
    }
    if (!s->best_at_ms)
        s->best_at_ms = s->started_ms;
    if (done < s->stop_min_trials || now_ms - s->started_ms < s->stop_min_ms)
        return false;
    int since = 0;
    for (int k = 0; k < s->nt; k++)
        since += !s->t[k].run && s->t[k].id > s->best_at_trial;
    if (s->stop_max_ms > 0 && now_ms - s->started_ms >= s->stop_max_ms)
        snprintf(why, len, "it ran for its maximumRuntimeConstraint (%lld s)", (long long) (s->stop_max_ms / 1000));
    else if (s->stop_no_progress_trials > 0 && since >= s->stop_no_progress_trials)
        snprintf(why, len, "%d trials ended without bettering the best (maxNumTrialsNoProgress %d)", since,
                 s->stop_no_progress_trials);
    else if (s->stop_no_progress_ms > 0 && n && now_ms - s->best_at_ms >= s->stop_no_progress_ms)
        snprintf(why, len, "the best has not improved for %lld s (maxDurationNoProgress)",
                 (long long) ((now_ms - s->best_at_ms) / 1000));
    else
        return false;
    return true;
}
