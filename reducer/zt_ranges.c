/* zt_ranges: see zt_ranges.h. */
#include "zt_ranges.h"
#include <stdlib.h>
#include <string.h>

/* The parts of [a, b) not in r (at most r->n + 1), without changing r. */
int zt_ranges_missing(const zt_ranges_t *r, int64_t a, int64_t b, zt_iv_t *out)
{
    int nout = 0;
    int64_t at = a;
    for (int i = 0; i < r->n && at < b; i++) {
        if (r->iv[i].b <= at)
            continue;
        if (r->iv[i].a >= b)
            break;
        if (r->iv[i].a > at)
            out[nout++] = (zt_iv_t) { at, r->iv[i].a };
        at = r->iv[i].b;
    }
    if (at < b)
        out[nout++] = (zt_iv_t) { at, b };
    return nout;
}

/* Adds [a, b) to r; returns the uncovered parts in out (at most n+1). */
int zt_ranges_add(zt_ranges_t *r, int64_t a, int64_t b, zt_iv_t *out)
{
    int nout = zt_ranges_missing(r, a, b, out);
    for (int k = 0; k < nout; k++)
        r->got += out[k].b - out[k].a;
    /* insert [a, b) and merge */
    if (r->n + 1 > r->cap) {
        r->cap = r->cap ? r->cap * 2 : 8;
        r->iv = realloc(r->iv, (size_t) r->cap * sizeof *r->iv);
    }
    int pos = 0;
    while (pos < r->n && r->iv[pos].a < a)
        pos++;
    memmove(r->iv + pos + 1, r->iv + pos, (size_t) (r->n - pos) * sizeof *r->iv);
    r->iv[pos] = (zt_iv_t) { a, b };
    r->n++;
    int w = 0;
    for (int i = 0; i < r->n; i++) {
        if (w > 0 && r->iv[i].a <= r->iv[w - 1].b) {
            if (r->iv[i].b > r->iv[w - 1].b)
                r->iv[w - 1].b = r->iv[i].b;
        }
        else
            r->iv[w++] = r->iv[i];
    }
    r->n = w;
    return nout;
}

bool zt_ranges_cover(const zt_ranges_t *r, int64_t a, int64_t b)
{
    for (int i = 0; i < r->n; i++)
        if (r->iv[i].a <= a && r->iv[i].b >= b)
            return true;
    return a >= b;
}
