/* ztrain-paramserver: thin main; the shard logic is zt_ps_server. */
#include "zt_ps_server.h"
#include "runtime/zt_process.h"
#include "runtime/zt_server.h"
#include "ztrain/ztrain.h"
#include "base/zt_env.h"
#include "base/zt_util.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char s_usage[] =
    "usage: ztrain-paramserver [--bind ENDPOINT] [--index I] [--servers N] [--checkpoint-dir DIR]\n\n"
    "A parameter-server shard. Under `ztrain run` everything comes from the\n"
    "environment: it binds ZT_ADDRESS, is server ZT_INDEX of the parameter servers\n"
    "listed in CLUSTER_SPEC (workerpool2), restores from the newest good checkpoint\n"
    "in AIP_CHECKPOINT_DIR, registers with the coordinator and heartbeats. The\n"
    "model layout, optimizer and mode (async, --sync, staleness bound) come from\n"
    "the workers' configuration message. Without ZT_COORDINATOR it runs standalone\n"
    "(benchmarks, tests) until SIGINT/SIGTERM.\n";

int main(int argc, char **argv)
{
    zt_server_place_t place;
    int rc = zt_server_place("ztrain-paramserver", s_usage, ZT_FOR_PS, true, argc, argv, &place);
    if (rc != 0)
        return rc == 1 ? 0 : 2;
    zt_replica_t *rep = NULL;
    if (zt_server_start("paramserver", &place, &rep) != 0)
        return zt_exit_status(1);
    /* the shard's snapshot file, in the job directory (under `ztrain run`) */
    const char *job = zt_env_get(ZT_ENV_JOB_DIR);
    char *snap = NULL;
    int snap_ms = (int) zt_knob_int(ZT_KNOB_PS_SNAPSHOT_MS);
    if (job && *job && snap_ms > 0) {
        char *dir = zt_strdupf("%s/ps-snapshots", job);
        if (zt_mkdir_p(dir) == 0)
            snap = zt_strdupf("%s/server-%d-of-%d.snap", dir, place.index, place.count);
        else
            zt_warn("cannot make %s: %s; no shard snapshots", dir, strerror(errno));
        free(dir);
    }
    zt_ps_server_opts_t opts = { place.bind, place.index, place.count, place.checkpoint_dir, snap, snap_ms, rep };
    zt_ps_server_t *srv = zt_ps_server_new(&opts);
    if (!srv) {
        zt_replica_destroy(&rep);
        return 1;
    }
    zt_info("serving on %s (server %d of %d)", place.bind, place.index, place.count);
    zt_ps_server_run(srv, zt_process_stop_requested, rep);
    zt_ps_server_destroy(&srv);
    int status = zt_process_exit(rep, 0);
    zt_replica_destroy(&rep);
    free(snap);
    zt_info("exiting");
    return status;
}
