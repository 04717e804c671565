/* zt_process: what every role binary's process does around its work: its
 * log (the replica's name on every line), its knobs checked, refusals
 * reported to the coordinator, and the stop test its loops poll. */
#ifndef ZT_PROCESS_H
#define ZT_PROCESS_H
#include <stdbool.h>
#include "base/zt_refusals.h"
#include "wire/zt_bulk.h"
#include "ztrain/zt_replica.h"

/* zt_private_files, zt_log_init, and the replica's name (workerpoolN-I)
 * on every line when the coordinator started this process (ZT_POOL,
 * ZT_INDEX). A crash (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT: the C
 * library's abort on a corrupted heap too) then writes its stack to the
 * log before the process dies of it. */
void zt_process_log_init(const char *role, int index);
/* Checks the knobs set in the environment; logs the first bad one and
 * returns false. Every role binary calls it before its work. */
bool zt_process_knobs_ok(void);
/* Counts and logs one refusal (zt_refusals_count), and reports the total
 * to the coordinator as metric `metric` at most once a second (rep or
 * metric may be NULL: no report). */
void zt_process_refused(zt_refusals_t *r, zt_replica_t *rep, const char *metric, const char *what);
/* Reports a total not reported yet, once a second has passed: servers call
 * it from their loops, so the last of a burst reaches job.json too. */
void zt_process_refusals_flush(zt_refusals_t *r, zt_replica_t *rep, const char *metric);
/* What a bulk server refused (zt_bulk_server_recv's ZT_EPROTO), counted as
 * `seal_refused`. */
#define ZT_PROCESS_UNSEALED                                                                                \
    "a message over TCP that is not sealed under this job's keys (not yet opened after a restart, or "   \
    "altered, replayed or forged)"
/* True on SIGINT/SIGTERM or when the coordinator asked the replica to stop
 * (the argument, unused, is the loop's context). */
bool zt_process_stop_requested(void *replica);
/* The exit status of a role whose work returned rc: ZT_EXIT_STOPPED (said)
 * when it is a job's replica (rep) and stopped on a signal the coordinator
 * did not announce (no SHUTDOWN came before it), else zt_exit_status(rc):
 * a server run by hand ends on SIGTERM with 0. */
int zt_process_exit(zt_replica_t *rep, int rc);

#endif
