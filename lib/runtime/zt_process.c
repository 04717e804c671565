#include "runtime/zt_process.h"
#include "base/zt_env.h"
#include "base/zt_util.h"
#include "wire/zt_transport.h"
#include "ztrain/ztrain.h"
#include <execinfo.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* A crash (a bad access, an abort: the C library's on a corrupted heap)
 * writes its stack to the replica's log, then ends the process by the same
 * signal as before (the handler is reset), so supervision sees the same
 * death. Only async-signal-safe calls: write, backtrace (loaded at init),
 * backtrace_symbols_fd. Static functions show as the binary's offsets:
 * `addr2line -f -e BINARY OFFSET` names them. */
static void s_say(const char *s, size_t n)
{
    ssize_t w = write(2, s, n);
    (void) w; /* nothing more to be done about a log that cannot be written */
}

static void s_on_crash(int sig)
{
    static const char a[] = "\n=== crashed: signal ", b[] = "; its stack:\n", t[] = " in thread ";
    char num[2] = { (char) ('0' + sig / 10 % 10), (char) ('0' + sig % 10) }, name[17] = "";
    s_say(a, sizeof a - 1);
    s_say(sig < 10 ? num + 1 : num, sig < 10 ? 1 : 2);
    if (prctl(PR_GET_NAME, name) == 0 && name[0]) { /* ZeroMQ's and OpenBLAS's threads have names */
        s_say(t, sizeof t - 1);
        s_say(name, strnlen(name, 16));
    }
    s_say(b, sizeof b - 1);
    void *frames[64];
    int k = backtrace(frames, 64);
    backtrace_symbols_fd(frames, k, 2);
    raise(sig);
}

static void s_crash_report(void)
{
    void *warm[1];
    backtrace(warm, 1); /* loads libgcc's unwinder now, not in the handler */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = s_on_crash;
    sa.sa_flags = (int) SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    static const int sigs[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT };
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaction(sigs[i], &sa, NULL);
}

void zt_process_log_init(const char *role, int index)
{
    zt_private_files();
    zt_log_init(role, index);
    s_crash_report();
    int64_t pool, idx;
    if (zt_env_int(ZT_ENV_POOL, &pool) && zt_env_int(ZT_ENV_INDEX, &idx)) {
        char name[48];
        snprintf(name, sizeof name, "workerpool%lld-%lld", (long long) pool, (long long) idx);
        zt_log_set_replica(name);
    }
}

bool zt_process_knobs_ok(void)
{
    char why[512];
    if (zt_knobs_check(why, sizeof why) == ZT_OK)
        return true;
    zt_error("%s", why);
    return false;
}

void zt_process_refused(zt_refusals_t *r, zt_replica_t *rep, const char *metric, const char *what)
{
    zt_refusals_count(r, what, zt_now_ms());
    zt_process_refusals_flush(r, rep, metric);
}

void zt_process_refusals_flush(zt_refusals_t *r, zt_replica_t *rep, const char *metric)
{
    int64_t total;
    if (rep && metric && zt_refusals_due(r, zt_now_ms(), &total))
        zt_replica_report_metric(rep, metric, (double) total, 0);
}

bool zt_process_stop_requested(void *replica)
{
    (void) replica; /* SHUTDOWN sets the process-wide stop */
    return zt_stop_requested();
}

int zt_process_exit(zt_replica_t *rep, int rc)
{
    /* the coordinator's SHUTDOWN goes out just before its SIGTERM, and may
     * be read after the signal has woken us: a moment for it */
    for (int i = 0; i < 50 && rc == 0 && rep && zt_replica_stop_status(rep) == ZT_EXIT_STOPPED; i++)
        usleep(10000);
    if (rc == 0 && rep && zt_replica_stop_status(rep) == ZT_EXIT_STOPPED) { /* a job's replica only */
        zt_info("stopped by a signal the coordinator did not send: exiting with status %d (a preemption: ztrain "
                "restarts this replica, which resumes)", ZT_EXIT_STOPPED);
        return ZT_EXIT_STOPPED;
    }
    return zt_exit_status(rc);
}

