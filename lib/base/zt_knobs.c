#include "ztrain/zt_knobs.h"
#include "ztrain/zt_log.h"
#include <stdlib.h>
#include <errno.h>

typedef struct { const char *env, *def, *help; } s_knob_t;
static const s_knob_t s_knobs[] = {
#define ZT_X_(id, env, def, help) { env, def, help },
    ZT_KNOBS(ZT_X_)
#undef ZT_X_
};

const char *zt_knob_str(zt_knob_t knob)
{
    const char *v = getenv(s_knobs[knob].env);
    return (v && *v) ? v : s_knobs[knob].def;
}

int64_t zt_knob_int(zt_knob_t knob)
{
    const char *v = zt_knob_str(knob);
    char *end;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (errno || end == v || *end) {
        zt_warn("%s=%s is not an integer; using the default %s",
                s_knobs[knob].env, v, s_knobs[knob].def);
        n = strtoll(s_knobs[knob].def, NULL, 10);
    }
    return n;
}

void zt_knobs_print(FILE *out)
{
    fprintf(out, "Environment (knobs):\n");
    for (int i = 0; i < ZT_KNOB_COUNT_; i++)
        fprintf(out, "  %-24s default %-12s\n  %24s %s\n", s_knobs[i].env, s_knobs[i].def, "", s_knobs[i].help);
}
