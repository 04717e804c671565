/* ztrain-paramserver: thin main; the shard logic is zt_ps_server. */
#include "zt_cluster.h"
#include "zt_ps_server.h"
#include "zt_util.h"
#include "ztrain/ztrain.h"
#include <czmq.h>
#include <stdlib.h>
#include <string.h>

static bool s_stop(void *arg)
{
    zt_replica_t *rep = arg;
    return zsys_interrupted || (rep && zt_replica_shutdown_requested(rep));
}

static void s_usage(void)
{
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
}

int main(int argc, char **argv)
{
    const char *addr = getenv("ZT_ADDRESS");
    char bind[256] = "";
    if (addr)
        snprintf(bind, sizeof bind, "tcp://%s", addr);
    int index = getenv("ZT_INDEX") ? atoi(getenv("ZT_INDEX")) : 0;
    int nservers = 0;
    zt_cluster_free(zt_cluster_pool(2, &nservers));
    const char *ckpt = getenv("AIP_CHECKPOINT_DIR");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            s_usage();
            return 0;
        }
        else if (!strcmp(a, "--bind") && v) { snprintf(bind, sizeof bind, "%s", v); i++; }
        else if (!strcmp(a, "--index") && v) { index = atoi(v); i++; }
        else if (!strcmp(a, "--servers") && v) { nservers = atoi(v); i++; }
        else if (!strcmp(a, "--checkpoint-dir") && v) { ckpt = v; i++; }
        /* anything else (user arguments) is ignored */
    }
    zt_log_init("paramserver", index);
    if (!bind[0] || nservers < 1 || index < 0 || index >= nservers) {
        zt_error("need a bind address (ZT_ADDRESS or --bind) and this server's place "
                 "(ZT_INDEX/--index of CLUSTER_SPEC's workerpool2 or --servers); got '%s', %d of %d",
                 bind, index, nservers);
        return 1;
    }
    zt_tune_malloc();
    zsys_init();
    zt_replica_t *rep = NULL;
    if (getenv("ZT_COORDINATOR") && !(rep = zt_replica_new("paramserver", 0)))
        return 1;
    zt_ps_server_opts_t opts = { bind, index, nservers, ckpt };
    zt_ps_server_t *srv = zt_ps_server_new(&opts);
    if (!srv) {
        zt_replica_destroy(&rep);
        return 1;
    }
    zt_info("serving on %s (server %d of %d)", bind, index, nservers);
    zt_ps_server_run(srv, NULL, s_stop, rep);
    zt_ps_server_destroy(&srv);
    zt_replica_destroy(&rep);
    zt_info("exiting");
    return 0;
}
