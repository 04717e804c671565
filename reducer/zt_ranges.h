/* zt_ranges: a set of half-open ranges of elements, kept sorted and
 * merged: what of a bucket's chunk a reducer has received from one worker. */
#ifndef ZT_RANGES_H
#define ZT_RANGES_H
#include <stdbool.h>
#include <stdint.h>

typedef struct { int64_t a, b; } zt_iv_t;

typedef struct {
    zt_iv_t *iv;               /* merged received ranges, sorted */
    int n, cap;
    int64_t got;               /* elements received */
} zt_ranges_t;

/* The parts of [a, b) not in r (at most r->n + 1) into out, without
 * changing r; returns how many. */
int zt_ranges_missing(const zt_ranges_t *r, int64_t a, int64_t b, zt_iv_t *out);
/* Adds [a, b) to r; returns the parts that were not in it (at most r->n + 1)
 * in out. */
int zt_ranges_add(zt_ranges_t *r, int64_t a, int64_t b, zt_iv_t *out);
/* Whether r holds all of [a, b) (an empty range: yes). */
bool zt_ranges_cover(const zt_ranges_t *r, int64_t a, int64_t b);

#endif
