#include "runtime/zt_server.h"
#include "runtime/zt_cmdline.h"
#include "runtime/zt_process.h"
#include "base/zt_env.h"
#include "base/zt_util.h"
#include "ztrain/ztrain.h"
#include <czmq.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

enum { S_BIND = 1, S_INDEX, S_SERVERS, S_CKPT };

static int s_on_server_flag(int id, const char *v, void *ctx)
{
    zt_server_place_t *out = ctx;
    long long n;
    switch (id) {
    case S_BIND:
        snprintf(out->bind, sizeof out->bind, "%s", v);
        return 0;
    case S_INDEX:
    case S_SERVERS:
        if (!zt_parse_int(v, &n) || n < 0 || n > 1 << 20) {
            fprintf(stderr, "--%s: '%s' is not a whole number\n", id == S_INDEX ? "index" : "servers", v);
            return -1;
        }
        *(id == S_INDEX ? &out->index : &out->count) = (int) n;
        return 0;
    default:
        out->checkpoint_dir = v;
        return 0;
    }
}

int zt_server_place(const char *binary, const char *usage, unsigned knob_roles, bool with_ckpt, int argc,
                    char **argv, zt_server_place_t *out)
{
    memset(out, 0, sizeof *out);
    const char *addr = zt_env_get(ZT_ENV_ADDRESS);
    if (addr)
        snprintf(out->bind, sizeof out->bind, "tcp://%s", addr);
    out->index = (int) zt_env_int_or(ZT_ENV_INDEX, 0);
    zt_env_free(zt_env_pool(2, &out->count));
    out->checkpoint_dir = zt_env_get(ZT_ENV_AIP_CHECKPOINT_DIR);
    const zt_flag_t flags[] = {
        { "bind", required_argument, S_BIND, "ENDPOINT", "where to listen (default tcp://$ZT_ADDRESS)" },
        { "index", required_argument, S_INDEX, "I", "this server's index (default $ZT_INDEX)" },
        { "servers", required_argument, S_SERVERS, "N", "servers in the pool (default: CLUSTER_SPEC's workerpool2)" },
        { with_ckpt ? "checkpoint-dir" : NULL, required_argument, S_CKPT, "DIR",
          "restore from the newest good checkpoint here (default $AIP_CHECKPOINT_DIR)" },
        { NULL, 0, 0, NULL, NULL },
    };
    return zt_cmdline_parse(binary, usage, knob_roles, flags, argc, argv, s_on_server_flag, out);
}

int zt_server_start(const char *role, const zt_server_place_t *place, zt_replica_t **rep_p)
{
    *rep_p = NULL;
    zt_process_log_init(role, place->index);
    if (!zt_process_knobs_ok())
        return -1;
    if (!place->bind[0] || place->count < 1 || place->index < 0 || place->index >= place->count) {
        zt_error("need a bind address (ZT_ADDRESS or --bind) and this server's place (ZT_INDEX or --index, "
                 "of CLUSTER_SPEC's workerpool2 or --servers); got '%s', %d of %d", place->bind, place->index,
                 place->count);
        return -1;
    }
    zt_tune_malloc();
    zsys_init();
    if (zt_env_get(ZT_ENV_COORDINATOR) && !(*rep_p = zt_replica_new(role, 0)))
        return -1;
    return 0;
}
