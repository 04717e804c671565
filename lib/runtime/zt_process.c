#include "runtime/zt_process.h"
#include "base/zt_env.h"
#include "base/zt_util.h"
#include "wire/zt_transport.h"
#include "ztrain/ztrain.h"
#include <stdio.h>
#include <unistd.h>

void zt_process_log_init(const char *role, int index)
{
    zt_private_files();
    zt_log_init(role, index);
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

