/* The unit-test runner: one suite per module, each the module's own
 * selftest. `zt_selftest` runs them all; `zt_selftest NAME...` runs those
 * named; `zt_selftest --list` names them. Exit 0 when all ran (a failing
 * assertion aborts). */
#include "spec/zt_diag.h"
#include "spec/zt_machines.h"
#include "wire/zt_msg.h"
#include "wire/zt_transport.h"
#include "base/zt_shard.h"
#include "model/zt_optim.h"
#include "model/zt_ckpt.h"
#include "model/zt_mlp.h"
#include "wire/zt_spin.h"
#include "wire/zt_shm.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void s_ckpt(void)
{
    const char *tmp = getenv("TMPDIR");
    zt_ckpt_selftest(tmp && *tmp ? tmp : "/tmp");
}

static void s_shm(void)
{
    zt_shm_selftest();
    if (!zt_shm_enabled())
        puts("  (shared memory off: ZT_SHM=off or no /dev/shm)");
}

#define TEST_ENTRY(name, fn) { name, fn },
static const struct {
    const char *name;
    void (*run)(void);
} s_tests[] = {
    TEST_ENTRY("diag", zt_diag_selftest)
    TEST_ENTRY("machines", zt_machines_selftest)
    TEST_ENTRY("msg", zt_msg_selftest)
    TEST_ENTRY("transport", zt_transport_selftest)
    TEST_ENTRY("shard", zt_shard_selftest)
    TEST_ENTRY("optim", zt_optim_selftest)
    TEST_ENTRY("ckpt", s_ckpt)
    TEST_ENTRY("mlp", zt_mlp_selftest)
    TEST_ENTRY("spin", zt_spin_selftest)
    TEST_ENTRY("shm", s_shm)
};
#define NTESTS ((int) (sizeof s_tests / sizeof s_tests[0]))

int main(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "--list") || !strcmp(argv[1], "--help"))) {
        if (!strcmp(argv[1], "--help"))
            printf("usage: zt_selftest [--list] [NAME...]\n\nunit suites:\n");
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
