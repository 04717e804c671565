/* --auth for the C benchmarks: the processes a benchmark starts (servers,
 * workers) authenticate as a job's replicas do, with CURVE keys made for
 * the run (all processes share one replica's pair) and removed at exit. */
#ifndef BENCH_AUTH_H
#define BENCH_AUTH_H
#include "wire/zt_auth.h"
#include "base/zt_util.h"
#include "ztrain/zt_error.h"
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char s_bench_auth_dir[64];
static pid_t s_bench_auth_owner;

static void s_bench_auth_remove(void)
{
    if (getpid() != s_bench_auth_owner) /* a forked worker exiting: the keys stay */
        return;
    zt_rm_tree(s_bench_auth_dir);
}

/* Before any process is started: every one started after finds its keys
 * through ZT_CREDENTIALS. Exits on failure. */
static void s_bench_auth(void)
{
    snprintf(s_bench_auth_dir, sizeof s_bench_auth_dir, "/tmp/zt-bench-keys-%d", (int) getpid());
    char *names[] = { "bench" };
    if (zt_auth_write_job(s_bench_auth_dir, names, 1) != ZT_OK)
        exit(1);
    s_bench_auth_owner = getpid();
    atexit(s_bench_auth_remove);
    char path[128];
    snprintf(path, sizeof path, "%s/bench.key", s_bench_auth_dir);
    setenv("ZT_CREDENTIALS", path, 1);
}
#endif
