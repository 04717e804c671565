/* zt_json: what two JSON documents disagree on, said so that a person can
 * act on it ("optimizer.lr: 0.01 here, 0.1 there"). */
#ifndef ZT_JSON_H
#define ZT_JSON_H
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* False when a and b are equal. Otherwise true, with the first difference
 * (object keys in sorted order) in out as "PATH: A vs B", each value
 * compact and cut to a readable length; PATH is "a.b[2]", or "(the whole
 * document)". */
bool zt_json_diff(const json_t *a, const json_t *b, char *out, size_t len);

/* Aborts unless zt_json_diff names the right field and values. */
void zt_json_selftest(void);

#endif
