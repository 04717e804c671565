/* ztrain-reducer: thin main; the reduction logic is zt_reducer. */
#include "zt_reducer.h"
#include "runtime/zt_process.h"
#include "runtime/zt_server.h"
#include "ztrain/ztrain.h"
#include "ztrain/zt_knobs.h"
#include <czmq.h>
#include <stdlib.h>
#include <unistd.h>

static const char s_usage[] =
    "usage: ztrain-reducer [--bind ENDPOINT] [--index I] [--servers N]\n\n"
    "A Reduction Server replica: reducer I of N sums chunk I of every gradient bucket\n"
    "over all workers and sends the sum back. Under `ztrain run` everything comes from\n"
    "the environment: it binds ZT_ADDRESS, is reducer ZT_INDEX of those listed in\n"
    "CLUSTER_SPEC (workerpool2), registers with the coordinator and heartbeats. The\n"
    "bucket layout comes from the workers. Without ZT_COORDINATOR it runs standalone\n"
    "(benchmarks, tests) until SIGINT/SIGTERM.\n";

int main(int argc, char **argv)
{
    zt_server_place_t place;
    int rc = zt_server_place("ztrain-reducer", s_usage, ZT_FOR_REDUCER, false, argc, argv, &place);
    if (rc != 0)
        return rc == 1 ? 0 : 2;
    /* before the first socket: a host with cores to spare moves the
     * workers' bytes on several I/O threads */
    if (!getenv("ZSYS_IO_THREADS"))
        zsys_set_io_threads((size_t) zt_reducer_threads(zt_knob_int(ZT_KNOB_REDUCER_IO_THREADS)));
    zt_replica_t *rep = NULL;
    if (zt_server_start("reducer", &place, &rep) != 0)
        return zt_exit_status(1);
    zt_reducer_opts_t opts = { place.bind, place.index, place.count, rep };
    zt_reducer_t *srv = zt_reducer_new(&opts);
    if (!srv) {
        zt_replica_destroy(&rep);
        return 1;
    }
    zt_info("reducing on %s (reducer %d of %d)", place.bind, place.index, place.count);
    zt_reducer_run(srv, zt_process_stop_requested, rep);
    zt_reducer_destroy(&srv);
    int status = zt_process_exit(rep, 0);
    zt_replica_destroy(&rep);
    zt_info("exiting");
    return status;
}
