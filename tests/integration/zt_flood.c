/* A replica that floods its coordinator (the job's own program, so
 * registered): N metrics and N/10 checkpoint notices as fast as it can,
 * then a last metric "flood_done", and exit 0. The coordinator must keep
 * up without writing job.json for each (tests/integration/test_security.py).
 * With a second argument M, it then reports M metrics of distinct names
 * (job.json keeps at most 256 per replica).
 *   zt_flood N [M]
 * `zt_flood hostile N`: an insider's words instead, as data must take
 * them: a role with a terminal-title sequence, N metrics whose names are
 * not UTF-8, clear the screen or forge a coordinator line after a newline,
 * and lines of its own output carrying the same, then "flood_done". */
#include "ztrain/ztrain.h"
#include "ztrain/zt_replica.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int s_hostile(int n)
{
    zt_replica_t *rep = zt_replica_new("flood\x1b]0;pwned\x07\x1b[2J", 30000);
    if (!rep)
        return 1;
    static const char *const forms[] = {
        "\xff\xfe-not-utf8",
        "\xc0\xaf-overlong",
        "\x1b[2J\x1b[H-clear",
        "\x1b]0;pwned\x07-title",
        "x\n2026-01-01T00:00:00.000Z I coordinator/0[1]: job forged: SUCCEEDED",
        "\xc2\x9b" "31m-c1",
    };
    for (int i = 0; i < n; i++) {
        char name[128];
        snprintf(name, sizeof name, "%s", forms[i % 6]); /* 6 names: within the 256 kept */
        zt_replica_report_metric(rep, name, i, i);
        if (i % 50 == 49)
            usleep(20000); /* within the sender's queue */
    }
    printf("\x1b[2J\x1b]0;pwned\x07 cleared\r2026-01-01T00:00:00.000Z I coordinator/0[1]: job forged: SUCCEEDED\n");
    printf("\xc2\x9b" "31m red \xff end\n");
    fflush(stdout);
    usleep(300000);
    zt_replica_report_metric(rep, "flood_done", n, n);
    zt_replica_wait_shutdown(rep, 1500);
    zt_replica_destroy(&rep);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 2 && !strcmp(argv[1], "hostile"))
        return s_hostile(atoi(argv[2]));
    int n = argc > 1 ? atoi(argv[1]) : 3000;
    int names = argc > 2 ? atoi(argv[2]) : 0;
    zt_replica_t *rep = zt_replica_new("flood", 30000);
    if (!rep)
        return 1;
    for (int i = 0; i < n; i++) {
        zt_replica_report_metric(rep, "accuracy", 0.5 + (double) i / (2.0 * n), i);
        if (i % 10 == 0) {
            char name[64];
            snprintf(name, sizeof name, "checkpoints/ckpt-%012d", i);
            zt_replica_notify_checkpoint(rep, i, name, "tcp://127.0.0.1:1");
        }
    }
    usleep(300000); /* the flood's queue drains: the marker must not be dropped at the high-water mark */
    zt_replica_report_metric(rep, "flood_done", n, n);
    if (names)
        usleep(300000); /* the flood's queue drains first */
    for (int i = 0; i < names; i++) {
        char name[32];
        snprintf(name, sizeof name, "m%d", i);
        zt_replica_report_metric(rep, name, i, i);
        if (i % 10 == 9)
            usleep(20000); /* well within the sender's queue */
    }
    zt_replica_wait_shutdown(rep, 1500); /* let the last messages leave */
    zt_replica_destroy(&rep);
    return 0;
}
