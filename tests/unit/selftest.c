/* The unit-test runner: one suite per module, each the module's own
 * selftest. `zt_selftest` runs them all; `zt_selftest NAME...` runs those
 * named; `zt_selftest --list` names them. Exit 0 when all ran (a failing
 * assertion aborts). */
#include "launch/zt_layout.h"
#include "formats/zt_format.h"
#include "plan/zt_diag.h"
#include "plan/zt_machines.h"
#include "wire/zt_msg.h"
#include "wire/zt_transport.h"
#include "wire/zt_auth.h"
#include "wire/zt_seal.h"
#include "wire/zt_bulk.h"
#include "wire/zt_stream.h"
#include "wire/zt_zmtp.h"
#include "wire/zt_bulk_direct.h"
#include "base/zt_copy.h"
#include "base/zt_team.h"
#include "wire/zt_guard.h"
#include "base/zt_shard.h"
#include "base/zt_json.h"
#include "state/zt_optim.h"
#include "state/zt_ckpt.h"
#include "zt_mlp.h"
#include "wire/zt_spin.h"
#include "wire/zt_shm.h"
#include "tboard/zt_tb.h"
#include "chief/zt_prom.h"
#include "formats/sagemaker/zt_tar.h"
#include "base/zt_hist.h"
#include "ztrain/ztrain.h"
#include "zt_held.h"
#include "lib_suites.h"
#include "bo_suite.h"
#include <assert.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Knobs: read through the table; a bad value is an error naming the knob
 * and the value, and the library refuses to start on it. */
static void s_knobs(void)
{
    char why[512];
    setenv("HOROVOD_FUSION_THRESHOLD", "64MB", 1);
    assert(zt_knobs_check(why, sizeof why) == ZT_EINVAL);
    assert(strstr(why, "HOROVOD_FUSION_THRESHOLD=64MB: not a whole number"));
    const char *peers[1] = { "tcp://127.0.0.1:1" };
    zt_allreduce_opts_t o = { .rank = 0, .workers = 1, .peers = peers, .cycle_time_ms = -1 };
    zt_allreduce_t *ar = zt_allreduce_new(&o);
    assert(ar == NULL); /* it used to fall back to 1 MiB silently */
    setenv("HOROVOD_FUSION_THRESHOLD", "67108864", 1);
    assert(zt_knobs_check(why, sizeof why) == ZT_OK);
    ar = zt_allreduce_new(&o);
    assert(ar && zt_allreduce_threshold(ar) == 64 << 20);
    zt_allreduce_destroy(&ar);
    setenv("ZT_BUCKET_CAP_MB", "2.5", 1); /* lower precedence than Horovod's */
    unsetenv("HOROVOD_FUSION_THRESHOLD");
    ar = zt_allreduce_new(&o);
    assert(ar && zt_allreduce_threshold(ar) == (int64_t) (2.5 * 1024 * 1024));
    zt_allreduce_destroy(&ar);
    unsetenv("ZT_BUCKET_CAP_MB");
    assert(zt_knob_find("ZT_SHM") == ZT_KNOB_SHM && zt_knob_find("NOPE") == -1);
    assert(zt_knob_check_value(ZT_KNOB_SHM, "OFF", why, sizeof why) == ZT_OK);
    assert(zt_knob_check_value(ZT_KNOB_SHM, "on", why, sizeof why) == ZT_EINVAL);
    assert(zt_knob_check_value(ZT_KNOB_GPU_COUNT, "3", why, sizeof why) == ZT_OK);
    assert(zt_knob_check_value(ZT_KNOB_GPU_COUNT, "x", why, sizeof why) == ZT_EINVAL);
    assert(zt_knob_check_value(ZT_KNOB_BUCKET_CAP_MB, "1e2", why, sizeof why) == ZT_OK);
    assert(zt_knob_check_value(ZT_KNOB_HEARTBEAT_MS, "-1", why, sizeof why) == ZT_EINVAL);
}

static void s_ckpt(void)
{
    const char *tmp = getenv("TMPDIR");
    zt_ckpt_selftest(tmp && *tmp ? tmp : "/tmp");
}

static void s_tb(void)
{
    const char *tmp = getenv("TMPDIR");
    zt_tb_selftest(tmp && *tmp ? tmp : "/tmp");
}

static void s_shm(void)
{
    zt_shm_selftest();
    if (!zt_shm_enabled())
        puts("  (shared memory off: ZT_SHM=off or no /dev/shm)");
}

/* A job's credentials (zt_auth), then the bulk transport's sealed ways
 * under them: they stay loaded after the auth suite. */
static void s_auth_then_sealed(void)
{
    zt_auth_selftest();
    zt_bulk_selftest_sealed();
}

/* /metrics: a metric's name is its series' label as reported, so names that
 * would sanitise alike stay apart; label values are escaped. */
static void s_prom(void)
{
    json_t *job = json_pack("{s:s, s:s, s:{s:{s:{s:f, s:i}, s:{s:f, s:i}, s:{s:f, s:i}}}}", "name", "j", "state",
                            "RUNNING", "metrics", "workerpool0-0", "dup-x", "value", 1.0, "step", 1, "dup.x",
                            "value", 2.0, "step", 1, "q\"uote\nnl", "value", 3.0, "step", 1);
    char *text = zt_prom_render(job);
    assert(strstr(text, "ztrain_replica_metric{replica=\"workerpool0-0\",name=\"dup-x\"} 1\n"));
    assert(strstr(text, "ztrain_replica_metric{replica=\"workerpool0-0\",name=\"dup.x\"} 2\n"));
    assert(strstr(text, "name=\"q\\\"uote\\nnl\"} 3\n"));
    assert(strstr(text, "ztrain_job_state{state=\"RUNNING\"} 1\n"));
    free(text);
    json_decref(job);
}

#define TEST_ENTRY(name, fn) { name, fn },
static const struct {
    const char *name;
    void (*run)(void);
} s_tests[] = {
    TEST_ENTRY("knobs", s_knobs)
    TEST_ENTRY("prom", s_prom)
    TEST_ENTRY("tar", zt_tar_selftest)
    TEST_ENTRY("diag", zt_diag_selftest)
    TEST_ENTRY("json", zt_json_selftest)
    TEST_ENTRY("machines", zt_machines_selftest)
    TEST_ENTRY("layout", zt_layout_selftest)
    TEST_ENTRY("formats", zt_format_selftest)
    TEST_ENTRY("msg", zt_msg_selftest)
    TEST_ENTRY("transport", zt_transport_selftest)
    TEST_ENTRY("guard", zt_guard_selftest)
    TEST_ENTRY("shard", zt_shard_selftest)
    TEST_ENTRY("optim", zt_optim_selftest)
    TEST_ENTRY("ckpt", s_ckpt)
    TEST_ENTRY("mlp", zt_mlp_selftest)
    TEST_ENTRY("spin", zt_spin_selftest)
    TEST_ENTRY("copy", zt_copy_selftest)
    TEST_ENTRY("team", zt_team_selftest)
    TEST_ENTRY("shm", s_shm)
    TEST_ENTRY("tensorboard", s_tb)
    TEST_ENTRY("hist", zt_hist_selftest)
    TEST_ENTRY("bo", zt_suite_bo)
    TEST_ENTRY("error", zt_suite_error)
    TEST_ENTRY("half", zt_suite_half)
    TEST_ENTRY("log", zt_suite_log)
    TEST_ENTRY("refusals", zt_suite_refusals)
    TEST_ENTRY("text", zt_suite_text)
    TEST_ENTRY("util", zt_suite_util)
    TEST_ENTRY("env", zt_suite_env)
    TEST_ENTRY("idx", zt_suite_idx)
    TEST_ENTRY("bufpool", zt_suite_bufpool)
    TEST_ENTRY("cmdline", zt_suite_cmdline)
    TEST_ENTRY("placeholder", zt_suite_placeholder)
    TEST_ENTRY("server", zt_suite_server)
    TEST_ENTRY("process", zt_suite_process)
    TEST_ENTRY("job", zt_suite_job)
    TEST_ENTRY("fileserver", zt_suite_fileserver)
    TEST_ENTRY("replica", zt_suite_replica)
    TEST_ENTRY("ps_client", zt_suite_ps_client)
    TEST_ENTRY("arlayout", zt_suite_arlayout)
    TEST_ENTRY("allreduce", zt_suite_allreduce)
    TEST_ENTRY("held", zt_held_selftest)
    TEST_ENTRY("ar_reducers", zt_suite_ar_reducers)
    TEST_ENTRY("collective", zt_suite_collective)
    TEST_ENTRY("seal", zt_seal_selftest)
    TEST_ENTRY("bulk", zt_bulk_selftest)
    TEST_ENTRY("stream", zt_stream_selftest)
    TEST_ENTRY("zmtp", zt_zmtp_selftest)
    TEST_ENTRY("direct", zt_direct_selftest)
    TEST_ENTRY("auth", s_auth_then_sealed) /* last: it leaves this process's sockets CURVE sockets */
};
#define NTESTS ((int) (sizeof s_tests / sizeof s_tests[0]))

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--version")) {
        printf("zt_selftest %s\n", ZT_VERSION);
        return 0;
    }
    if (argc > 1 && (!strcmp(argv[1], "--list") || !strcmp(argv[1], "--help"))) {
        if (!strcmp(argv[1], "--help"))
            printf("usage: zt_selftest [--list | --version] [NAME...]\n\nunit suites:\n");
        for (int i = 0; i < NTESTS; i++)
            printf("%s\n", s_tests[i].name);
        return 0;
    }
    for (int a = 1; a < argc; a++) {
        bool known = false;
        for (int i = 0; i < NTESTS; i++)
            known |= !strcmp(argv[a], s_tests[i].name);
        if (!known) {
            fprintf(stderr, "zt_selftest: no suite named '%s' (--list names them)\n", argv[a]);
            return 2;
        }
    }
    for (int i = 0; i < NTESTS; i++) {
        bool wanted = argc == 1;
        for (int a = 1; a < argc; a++)
            wanted |= !strcmp(argv[a], s_tests[i].name);
        if (!wanted)
            continue;
        s_tests[i].run();
        printf("%s: ok\n", s_tests[i].name);
    }
    return 0;
}
