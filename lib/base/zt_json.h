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

/* This process as a record for a state file: {"pid", "startTime", "host"},
 * so that a reader can tell a live owner from a dead one even after the
 * pid is reused. */
json_t *zt_json_this_process(void);
/* 1 when the process a record names still runs, 0 when it is gone, -1 when
 * that cannot be known from here (another host, no record). */
int zt_json_process_alive(const json_t *record);

/* Writes each document of files ({name: JSON}) compact to dir/name,
 * atomically. 0, or -1 at the first that cannot be written, with the
 * path and the reason in why. */
int zt_json_write_files(const char *dir, json_t *files, char *why, size_t len);

/* Aborts unless zt_json_diff names the right field and values. */
void zt_json_selftest(void);

#endif
