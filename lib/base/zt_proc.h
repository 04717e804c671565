/* zt_proc: This process and its children: the stop every blocking wait of
 * libztrain polls, stopping a child, naming a process across pid reuse,
 * where the executable lies. */
#ifndef ZT_PROC_H
#define ZT_PROC_H
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* The process is stopping: the coordinator sent SHUTDOWN (zt_stop_request),
 * or SIGTERM / SIGINT arrived. Every blocking wait of libztrain (parameter
 * servers, all-reduce) checks it at least every 100 ms and returns
 * ZT_ESHUTDOWN, so that a role exits promptly and cleanly. */
void zt_stop_request(void);
bool zt_stop_requested(void);
/* Whether a stop came, held or not (zt_stop_requested is false while held). */
bool zt_stop_came(void);
/* Holds the stop on the calling thread while it saves on its way out (a
 * checkpoint asked of the parameter servers): its waits do not give way to
 * the stop, so the caller bounds them (within ZT_STOP_GRACE_MS). Calls
 * nest: zt_stop_hold(true), then zt_stop_hold(false). */
void zt_stop_hold(bool hold);
/* Stops a child process: SIGTERM, then SIGKILL if it has not exited within
 * grace_ms; reaps it. Its wait status, or -1. */
int zt_stop_child(pid_t pid, int grace_ms);
/* When process pid started (clock ticks after boot, /proc/PID/stat), or 0
 * when there is no such process. With the pid it names one process even
 * after the pid is reused. */
uint64_t zt_proc_start_time(pid_t pid);
/* True when the process recorded as (pid, start time) still runs here. */
bool zt_proc_alive(pid_t pid, uint64_t start_time);
/* Directory of the running executable (for finding sibling binaries). */
const char *zt_exe_dir(void);

#endif
