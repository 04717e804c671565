#include "runtime/zt_role.h"
#include "ztrain/ztrain.h"
#include "base/zt_util.h"
#include "runtime/zt_env.h"
#include <czmq.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "--name" in both spellings: with hyphens and with underscores. */
static int s_build_longopts(const zt_flag_t *flags, struct option *out, char names[][64], int max)
{
    int n = 0;
    for (int i = 0; flags[i].name && n + 3 < max && i < 64; i++) {
        out[n++] = (struct option) { flags[i].name, flags[i].has_arg, NULL, flags[i].id };
        snprintf(names[i], 64, "%s", flags[i].name);
        bool changed = false;
        for (char *c = names[i]; *c; c++)
            if (*c == '-' || *c == '_') {
                *c = *c == '-' ? '_' : '-';
                changed = true;
            }
        if (changed)
            out[n++] = (struct option) { names[i], flags[i].has_arg, NULL, flags[i].id };
    }
    out[n++] = (struct option) { "help", no_argument, NULL, 'h' };
    out[n++] = (struct option) { "version", no_argument, NULL, 'V' };
    out[n] = (struct option) { NULL, 0, NULL, 0 };
    return n;
}

static void s_print_flags(FILE *out, const zt_flag_t *flags)
{
    fprintf(out, "Options:\n");
    for (int i = 0; flags[i].name; i++) {
        char left[64];
        snprintf(left, sizeof left, "--%s%s%s%s", flags[i].name, flags[i].arg ? (flags[i].has_arg == 2 ? "[=" : " ") : "",
                 flags[i].arg ? flags[i].arg : "", flags[i].arg && flags[i].has_arg == 2 ? "]" : "");
        fprintf(out, "  %-26s %s\n", left, flags[i].help);
    }
    fprintf(out, "  %-26s %s\n  %-26s %s\n\n", "--help", "this text", "--version", "the version");
}

int zt_role_parse(const char *binary, const char *usage, unsigned knob_roles, const zt_flag_t *flags,
                  int argc, char **argv, int (*on)(int id, const char *value, void *ctx), void *ctx)
{
    struct option longopts[128];
    char names[64][64];
    s_build_longopts(flags, longopts, names, 128);
    optind = 1;
    opterr = 0;
    int c, idx = 0;
    while ((c = getopt_long(argc, argv, "+h", longopts, &idx)) != -1) {
        if (c == 'h') {
            printf("%s\n", usage);
            s_print_flags(stdout, flags);
            zt_knobs_print_for(stdout, knob_roles);
            return 1;
        }
        if (c == 'V') {
            printf("%s %s\n", binary, ZT_VERSION);
            return 1;
        }
        if (c == '?') { /* optopt: a known flag without its value; 0: an unknown one */
            const char *bad = argv[optind - 1];
            if (optopt)
                fprintf(stderr, "%s: %s needs a value (see %s --help)\n", binary, bad, binary);
            else
                fprintf(stderr, "%s: unknown option %s (see %s --help)\n", binary, bad, binary);
            return 2;
        }
        if (on(c, optarg, ctx) != 0)
            return 2;
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s' (see %s --help)\n", binary, argv[optind], binary);
        return 2;
    }
    return 0;
}

int zt_role_flag(const char *binary, int id, const char *value, zt_role_opts_t *o)
{
    char *end;
    switch (id - ZT_ROLE_FLAG_ID) {
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

int zt_role_main(const zt_role_info_t *info, const zt_role_opts_t *o)
{
    zt_role_log_init(info->role, (int) zt_env_int_or(ZT_ENV_INDEX, -1));
    if (!zt_role_knobs_ok())
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
    return zt_role_parse(binary, usage, knob_roles, flags, argc, argv, s_on_server_flag, out);
}

void zt_role_log_init(const char *role, int index)
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

bool zt_role_knobs_ok(void)
{
    char why[512];
    if (zt_knobs_check(why, sizeof why) == ZT_OK)
        return true;
    zt_error("%s", why);
    return false;
}

void zt_role_refused(zt_refusals_t *r, zt_replica_t *rep, const char *metric, const char *what)
{
    int64_t now = zt_now_ms();
    r->total++;
    r->unlogged++;
    if (!r->logged_ms || now - r->logged_ms >= 5000) {
        zt_warn("refused %s (%lld such since the last line, %lld in all)", what, (long long) r->unlogged,
                (long long) r->total);
        r->unlogged = 0;
        r->logged_ms = now;
    }
    zt_role_refusals_flush(r, rep, metric);
}

void zt_role_refusals_flush(zt_refusals_t *r, zt_replica_t *rep, const char *metric)
{
    int64_t now = zt_now_ms();
    if (rep && metric && r->total != r->reported && (!r->reported_ms || now - r->reported_ms >= 1000)) {
        zt_replica_report_metric(rep, metric, (double) r->total, 0);
        r->reported = r->total;
        r->reported_ms = now;
    }
}

bool zt_role_stop_requested(void *replica)
{
    (void) replica; /* SHUTDOWN sets the process-wide stop */
    return zt_stop_requested();
}

int zt_server_start(const char *role, const zt_server_place_t *place, zt_replica_t **rep_p)
{
    *rep_p = NULL;
    zt_role_log_init(role, place->index);
    if (!zt_role_knobs_ok())
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
