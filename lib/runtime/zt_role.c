#include "runtime/zt_role.h"
#include "ztrain/ztrain.h"
#include "base/zt_util.h"
#include "runtime/zt_env.h"
#include <czmq.h>
#include <stdlib.h>
#include <string.h>

static void s_usage(const zt_role_info_t *info, FILE *out)
{
    fprintf(out,
            "usage: %s [--idle | --run-seconds=S] [--exit-code=N] [--help] [USER ARGS...]\n"
            "%s\n\n"
            "Started by `ztrain run` (the coordinator), which sets ZT_COORDINATOR, ZT_POOL,\n"
            "ZT_INDEX and ZT_INCARNATION. The replica registers, heartbeats, and exits 0 when\n"
            "the coordinator ends the job or on SIGTERM.\n\n"
            "  --run-seconds=S  wait until the job is RUNNING, work S seconds, then exit\n"
            "                   with --exit-code (default: run until the job ends)\n"
            "  --exit-code=N    status to exit with after --run-seconds (default 0)\n"
            "Unknown --name=value arguments (hyperparameters) are accepted and ignored.\n\n",
            info->binary, info->summary);
    zt_knobs_print(out);
}

int zt_role_main(const zt_role_info_t *info, int argc, char **argv)
{
    double run_seconds = -1;
    int exit_code = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            s_usage(info, stdout);
            return 0;
        }
        if (!strncmp(a, "--run-seconds=", 14)) {
            char *end;
            run_seconds = strtod(a + 14, &end);
            if (*end || run_seconds < 0) {
                fprintf(stderr, "%s: --run-seconds: '%s' is not a number of seconds\n",
                        info->binary, a + 14);
                return 2;
            }
        }
        else if (!strcmp(a, "--idle"))
            run_seconds = -1;
        else if (!strncmp(a, "--exit-code=", 12))
            exit_code = atoi(a + 12);
    }
    zt_log_init(info->role, (int) zt_env_int_or(ZT_ENV_INDEX, -1));
    if (!zt_role_knobs_ok())
        return 1;
    zt_replica_t *rep = zt_replica_new(info->role, 0);
    if (!rep)
        return 1;
    zt_info("registered (pool %d, index %d)", zt_replica_pool(rep), zt_replica_index(rep));
    int rc = 0;
    if (run_seconds >= 0) {
        if (zt_replica_wait_running(rep, -1) == ZT_OK) {
            zt_info("job is RUNNING; working for %.1f s", run_seconds);
            if (zt_replica_wait_shutdown(rep, (int) (run_seconds * 1000)) == ZT_ETIMEDOUT)
                rc = exit_code;
        }
    }
    else
        zt_replica_wait_shutdown(rep, -1);
    zt_info("exiting with status %d", rc);
    zt_replica_destroy(&rep);
    return rc;
}

int zt_server_place(int argc, char **argv, zt_server_place_t *out)
{
    memset(out, 0, sizeof *out);
    const char *addr = zt_env_get(ZT_ENV_ADDRESS);
    if (addr)
        snprintf(out->bind, sizeof out->bind, "tcp://%s", addr);
    out->index = (int) zt_env_int_or(ZT_ENV_INDEX, 0);
    zt_env_free(zt_env_pool(2, &out->count));
    out->checkpoint_dir = zt_env_get(ZT_ENV_AIP_CHECKPOINT_DIR);
    for (int i = 1; i + 1 < argc; i++) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "--bind"))
            snprintf(out->bind, sizeof out->bind, "%s", v);
        else if (!strcmp(a, "--index"))
            out->index = atoi(v);
        else if (!strcmp(a, "--servers"))
            out->count = atoi(v);
        else if (!strcmp(a, "--checkpoint-dir"))
            out->checkpoint_dir = v;
        else
            continue;
        i++;
    }
    if (!out->bind[0] || out->count < 1 || out->index < 0 || out->index >= out->count) {
        zt_error("need a bind address (ZT_ADDRESS or --bind) and this server's place (ZT_INDEX or "
                 "--index, of CLUSTER_SPEC's workerpool2 or --servers); got '%s', %d of %d",
                 out->bind, out->index, out->count);
        return -1;
    }
    return 0;
}

bool zt_role_knobs_ok(void)
{
    char why[512];
    if (zt_knobs_check(why, sizeof why) == ZT_OK)
        return true;
    zt_error("%s", why);
    return false;
}

bool zt_role_stop_requested(void *replica)
{
    return zsys_interrupted || (replica && zt_replica_shutdown_requested(replica));
}

int zt_server_start(const char *role, int argc, char **argv, zt_server_place_t *place,
                    zt_replica_t **rep_p)
{
    *rep_p = NULL;
    zt_log_init(role, (int) zt_env_int_or(ZT_ENV_INDEX, 0));
    if (!zt_role_knobs_ok())
        return -1;
    if (zt_server_place(argc, argv, place) != 0)
        return -1;
    zt_log_init(role, place->index);
    zt_tune_malloc();
    zsys_init();
    if (zt_env_get(ZT_ENV_COORDINATOR) && !(*rep_p = zt_replica_new(role, 0)))
        return -1;
    return 0;
}
