/* A replica that floods its coordinator (the job's own program, so
 * registered): N metrics and N/10 checkpoint notices as fast as it can,
 * then a last metric "flood_done", and exit 0. The coordinator must keep
 * up without writing job.json for each (tests/integration/test_security.py).
 * With a second argument M, it then reports M metrics of distinct names
 * (job.json keeps at most 256 per replica).
 *   zt_flood N [M] */
#include "ztrain/ztrain.h"
#include "ztrain/zt_replica.h"
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
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
