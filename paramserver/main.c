/* ztrain-paramserver: thin main; the shard logic is zt_ps_server. */
#include "zt_ps_server.h"
#include "runtime/zt_role.h"
#include "ztrain/ztrain.h"
#include <czmq.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: ztrain-paramserver [--bind ENDPOINT] [--index I] [--servers N]\n"
                   "                          [--checkpoint-dir DIR] [--help]\n\n"
                   "A parameter-server shard. Under `ztrain run` everything comes from the\n"
                   "environment: it binds ZT_ADDRESS, is server ZT_INDEX of the parameter servers\n"
                   "listed in CLUSTER_SPEC (workerpool2), restores from the newest good checkpoint\n"
                   "in AIP_CHECKPOINT_DIR, registers with the coordinator and heartbeats. The\n"
                   "model layout, optimizer and mode (async, --sync, staleness bound) come from\n"
                   "the workers' configuration message. Without ZT_COORDINATOR it runs standalone\n"
                   "(benchmarks, tests) until SIGINT/SIGTERM.\n\n");
            zt_knobs_print(stdout);
            return 0;
        }
    zt_server_place_t place;
    zt_replica_t *rep = NULL;
    if (zt_server_start("paramserver", argc, argv, &place, &rep) != 0)
        return 1;
    zt_ps_server_opts_t opts = { place.bind, place.index, place.count, place.checkpoint_dir };
    zt_ps_server_t *srv = zt_ps_server_new(&opts);
    if (!srv) {
        zt_replica_destroy(&rep);
        return 1;
    }
    zt_info("serving on %s (server %d of %d)", place.bind, place.index, place.count);
    zt_ps_server_run(srv, zt_role_stop_requested, rep);
    zt_ps_server_destroy(&srv);
    zt_replica_destroy(&rep);
    zt_info("exiting");
    return 0;
}
