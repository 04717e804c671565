/* ztrain-reducer: thin main; the reduction logic is zt_reducer. */
#include "zt_cluster.h"
#include "zt_reducer.h"
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
    printf("usage: ztrain-reducer [--bind ENDPOINT] [--index I] [--servers N] [--help]\n\n"
           "A Reduction Server replica: reducer I of N sums chunk I of every gradient bucket\n"
           "over all workers and sends the sum back. Under `ztrain run` everything comes from\n"
           "the environment: it binds ZT_ADDRESS, is reducer ZT_INDEX of those listed in\n"
           "CLUSTER_SPEC (workerpool2), registers with the coordinator and heartbeats. The\n"
           "bucket layout comes from the workers. Without ZT_COORDINATOR it runs standalone\n"
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
        /* anything else (user arguments) is ignored */
    }
    zt_log_init("reducer", index);
    if (!bind[0] || nservers < 1 || index < 0 || index >= nservers) {
        zt_error("need a bind address (ZT_ADDRESS or --bind) and this server's place "
                 "(ZT_INDEX/--index of CLUSTER_SPEC's workerpool2 or --servers); got '%s', %d of %d",
                 bind, index, nservers);
        return 1;
    }
    zt_tune_malloc();
    zsys_init();
    zt_replica_t *rep = NULL;
    if (getenv("ZT_COORDINATOR") && !(rep = zt_replica_new("reducer", 0)))
        return 1;
    zt_reducer_opts_t opts = { bind, index, nservers };
    zt_reducer_t *srv = zt_reducer_new(&opts);
    if (!srv) {
        zt_replica_destroy(&rep);
        return 1;
    }
    zt_info("reducing on %s (reducer %d of %d)", bind, index, nservers);
    zt_reducer_run(srv, s_stop, rep);
    zt_reducer_destroy(&srv);
    zt_replica_destroy(&rep);
    zt_info("exiting");
    return 0;
}
