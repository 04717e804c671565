#include "runtime/zt_placeholder.h"
#include "runtime/zt_process.h"
#include "base/zt_env.h"
#include "ztrain/ztrain.h"
#include <stdio.h>
#include <stdlib.h>

int zt_placeholder_flag(const char *binary, int id, const char *value, zt_placeholder_opts_t *o)
{
    char *end;
    switch (id - ZT_PLACEHOLDER_FLAG_ID) {
    case 0:
        o->placeholder = true;
        o->run_seconds = -1;
        return 0;
    case 1:
        o->placeholder = true;
        o->run_seconds = strtod(value, &end);
        if (*end || !*value || o->run_seconds < 0) {
            fprintf(stderr, "%s: --run-seconds: '%s' is not a number of seconds\n", binary, value);
            return -1;
        }
        return 0;
    case 2:
        o->exit_code = (int) strtol(value, &end, 10);
        if (*end || !*value || o->exit_code < 0 || o->exit_code > 255) {
            fprintf(stderr, "%s: --exit-code: '%s' is not a status from 0 to 255\n", binary, value);
            return -1;
        }
        return 0;
    default:
        return 1;
    }
}

int zt_placeholder_main(const zt_placeholder_info_t *info, const zt_placeholder_opts_t *o)
{
    zt_process_log_init(info->role, (int) zt_env_int_or(ZT_ENV_INDEX, -1));
    if (!zt_process_knobs_ok())
        return 1;
    zt_replica_t *rep = zt_replica_new(info->role, 0);
    if (!rep)
        return 1;
    zt_info("registered (pool %d, index %d)", zt_replica_pool(rep), zt_replica_index(rep));
    int rc = 0;
    if (o->run_seconds >= 0) {
        if (zt_replica_wait_running(rep, -1) == ZT_OK) {
            zt_info("job is RUNNING; working for %.1f s", o->run_seconds);
            if (zt_replica_wait_shutdown(rep, (int) (o->run_seconds * 1000)) == ZT_ETIMEDOUT)
                rc = o->exit_code;
        }
    }
    else
        zt_replica_wait_shutdown(rep, -1);
    zt_info("exiting with status %d", rc);
    zt_replica_destroy(&rep);
    return rc;
}
