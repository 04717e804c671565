#include "ztrain/zt_knobs.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_log.h"
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct { const char *env, *def, *check; unsigned roles; const char *help; } s_knob_t;
static const s_knob_t s_knobs[] = {
#define ZT_X_(id, env, def, check, roles, help) { env, def, check, roles, help },
    ZT_KNOBS(ZT_X_)
#undef ZT_X_
};

const char *zt_knob_str(zt_knob_t knob)
{
    const char *v = getenv(s_knobs[knob].env);
    return (v && *v) ? v : s_knobs[knob].def;
}

int zt_knob_is_set(zt_knob_t knob)
{
    const char *v = getenv(s_knobs[knob].env);
    return v && *v;
}

int zt_knob_find(const char *env)
{
    for (int i = 0; env && i < ZT_KNOB_COUNT_; i++)
        if (!strcmp(s_knobs[i].env, env))
            return i;
    return -1;
}

static bool s_whole(const char *v, long long *out)
{
    char *end;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (errno || end == v || *end || n < 0)
        return false;
    *out = n;
    return true;
}

static bool s_decimal(const char *v, double *out)
{
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || end == v || *end || !isfinite(d) || d < 0)
        return false;
    *out = d;
    return true;
}

/* Whether v is one of the words of a "a|b|int" check (case-insensitive). */
static bool s_choice(const char *check, const char *v)
{
    long long n;
    const char *w = check;
    while (*w) {
        size_t len = strcspn(w, "|");
        if (len == 3 && !strncmp(w, "int", 3) && s_whole(v, &n))
            return true;
        if (strlen(v) == len && !strncasecmp(w, v, len))
            return true;
        w += len + (w[len] == '|');
    }
    return false;
}

/* What a knob takes, in words. */
static const char *s_takes(const s_knob_t *k)
{
    return !strcmp(k->check, "int") ? "a whole number" : !strcmp(k->check, "num") ? "a number"
           : !strcmp(k->check, "ipv4") ? "an IPv4 address (127.0.0.1)" : k->check;
}

int zt_knob_check_value(zt_knob_t knob, const char *value, char *err, size_t len)
{
    const s_knob_t *k = &s_knobs[knob];
    long long n;
    double d;
    const char *why = NULL;
    if (!value || !*value || !strcmp(k->check, "path"))
        return ZT_OK;
    if (!strcmp(k->check, "int")) {
        if (!s_whole(value, &n))
            why = "not a whole number >= 0 (plain digits, no unit)";
    }
    else if (!strcmp(k->check, "num")) {
        if (!s_decimal(value, &d))
            why = "not a number >= 0 (no unit)";
    }
    else if (!strcmp(k->check, "ipv4")) {
        struct in_addr a;
        if (inet_pton(AF_INET, value, &a) != 1)
            why = "not an IPv4 address";
    }
    else if (!s_choice(k->check, value))
        why = "not one of the values it takes";
    if (!why)
        return ZT_OK;
    if (err && len)
        snprintf(err, len, "%s=%s: %s; it takes %s (%s)", k->env, value, why, s_takes(k), k->help);
    return ZT_EINVAL;
}

int zt_knobs_check(char *err, size_t len)
{
    for (int i = 0; i < ZT_KNOB_COUNT_; i++) {
        const char *v = getenv(s_knobs[i].env);
        if (v && *v && zt_knob_check_value((zt_knob_t) i, v, err, len) != ZT_OK)
            return ZT_EINVAL;
    }
    return ZT_OK;
}

int64_t zt_knob_int(zt_knob_t knob)
{
    const char *v = zt_knob_str(knob);
    long long n = 0;
    if (*v && !s_whole(v, &n)) {
        zt_error("%s=%s is not a whole number >= 0; using the default %s", s_knobs[knob].env, v,
                 *s_knobs[knob].def ? s_knobs[knob].def : "(unset)");
        n = strtoll(s_knobs[knob].def, NULL, 10);
    }
    return n;
}

double zt_knob_num(zt_knob_t knob)
{
    const char *v = zt_knob_str(knob);
    double d = 0;
    if (*v && !s_decimal(v, &d)) {
        zt_error("%s=%s is not a number >= 0; using the default %s", s_knobs[knob].env, v,
                 *s_knobs[knob].def ? s_knobs[knob].def : "(unset)");
        d = strtod(s_knobs[knob].def, NULL);
    }
    return d;
}

void zt_knobs_print_for(FILE *out, unsigned roles)
{
    fprintf(out, "Environment (knobs that apply here):\n");
    for (int i = 0; i < ZT_KNOB_COUNT_; i++)
        if (s_knobs[i].roles & roles)
            fprintf(out, "  %-24s default %-12s takes %s\n  %24s %s\n", s_knobs[i].env,
                    *s_knobs[i].def ? s_knobs[i].def : "(unset)", s_takes(&s_knobs[i]), "", s_knobs[i].help);
}

void zt_knobs_print(FILE *out)
{
    zt_knobs_print_for(out, ZT_FOR_ALL);
}
