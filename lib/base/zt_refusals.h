/* zt_refusals: a counter of messages or connections refused for one
 * reason (non-finite gradients, a malformed message, a stranger's
 * handshake...), logged so that a flood costs no log: one line at most
 * every 5 s with the count since. Reporting the total to the coordinator is
 * the replica's business (zt_process_refused); this holds only the count. */
#ifndef ZT_REFUSALS_H
#define ZT_REFUSALS_H
#include <stdbool.h>
#include <stdint.h>

#define ZT_REFUSALS_LOG_MS 5000    /* at most one "refused" line this often */
#define ZT_REFUSALS_REPORT_MS 1000 /* at most one report of the total this often */

typedef struct {
    int64_t total;        /* refused in all */
    int64_t unlogged;     /* refused since the last line */
    int64_t logged_ms;    /* when the last line was written (0: never) */
    int64_t reported;     /* the total as last reported */
    int64_t reported_ms;  /* when it was reported (0: never) */
} zt_refusals_t;

/* Counts one refusal of `what` ("a connection from ...: bad key"), and logs
 * "refused WHAT" when no line was written for ZT_REFUSALS_LOG_MS. */
void zt_refusals_count(zt_refusals_t *r, const char *what, int64_t now_ms);
/* Whether the next zt_refusals_count will write a line (so that a costly
 * WHAT is made only then). */
bool zt_refusals_log_due(const zt_refusals_t *r, int64_t now_ms);
/* True with *total when the total changed since the last report and
 * ZT_REFUSALS_REPORT_MS have passed; the total is then taken as reported. */
bool zt_refusals_due(zt_refusals_t *r, int64_t now_ms, int64_t *total);

#endif
