#include "plan/zt_state.h"
#include "ztrain/zt_error.h"
#include <signal.h>
#include <string.h>
#include <sys/wait.h>

static const char *const s_job_names[ZT_JOB_STATES] = { "QUEUED", "PENDING", "RUNNING", "SUCCEEDED", "FAILED",
                                                         "CANCELLING", "CANCELLED" };
static const char *const s_rep_names[ZT_REP_STATES] = { "PENDING", "STARTING", "RUNNING", "RESTARTING",
                                                        "SUCCEEDED", "FAILED", "STOPPED", "CANCELLED" };

const char *zt_job_state_name(zt_job_state_t s) { return s >= 0 && s < ZT_JOB_STATES ? s_job_names[s] : NULL; }

const char *zt_replica_state_name(int s) { return s >= 0 && s < ZT_REP_STATES ? s_rep_names[s] : NULL; }

bool zt_job_state_parse(const char *name, zt_job_state_t *out)
{
    for (int i = 0; name && i < ZT_JOB_STATES; i++)
        if (!strcmp(name, s_job_names[i])) {
            *out = (zt_job_state_t) i;
            return true;
        }
    return false;
}

/* The final states: a job's, a study's, and a trial's own two. */
static const char *const s_final[] = { "SUCCEEDED", "FAILED", "CANCELLED", "STOPPED", "INFEASIBLE" };

const char *zt_state_known(const char *name)
{
    for (int i = 0; name && i < ZT_JOB_STATES; i++)
        if (!strcmp(name, s_job_names[i]))
            return s_job_names[i];
    for (int i = 0; name && i < ZT_REP_STATES; i++)
        if (!strcmp(name, s_rep_names[i]))
            return s_rep_names[i];
    for (size_t i = 0; name && i < sizeof s_final / sizeof *s_final; i++)
        if (!strcmp(name, s_final[i]))
            return s_final[i];
    return NULL;
}

bool zt_state_final(const char *name)
{
    for (size_t i = 0; name && i < sizeof s_final / sizeof *s_final; i++)
        if (!strcmp(name, s_final[i]))
            return true;
    return false;
}

bool zt_state_succeeded(const char *name)
{
    return name && (!strcmp(name, "SUCCEEDED") || !strcmp(name, "STOPPED"));
}

int zt_state_exit_code(const char *name)
{
    if (name && !strcmp(name, "SUCCEEDED"))
        return ZT_CLI_OK;
    if (name && !strcmp(name, "CANCELLED"))
        return ZT_CLI_CANCELLED;
    return ZT_CLI_FAILED;
}

bool zt_wait_status_stopped(int status)
{
    return (WIFSIGNALED(status) && (WTERMSIG(status) == SIGTERM || WTERMSIG(status) == SIGINT)) ||
           (WIFEXITED(status) && (WEXITSTATUS(status) == ZT_EXIT_STOPPED || WEXITSTATUS(status) == 130));
}
