/* ztrain-mpi: thin main; see zt_mpi.h. */
#include "zt_mpi.h"
#include "base/zt_util.h"
#include "ztrain/zt_knobs.h"
#include "ztrain/zt_log.h"
#include <stdio.h>
#include <string.h>

static const char s_usage[] =
    "usage: ztrain-mpi launch [--processes-per-host N] [--mpi-options OPTIONS] -- PROGRAM [ARG...]\n"
    "       ztrain-mpi host\n"
    "       ztrain-mpi agent HOST COMMAND...\n\n"
    "SageMaker's `distribution mpi` on ztrain's hosts, without SSH. `ztrain run` of a\n"
    "CreateTrainingJob whose hyperparameters say sagemaker_mpi_enabled runs:\n"
    "  launch  on the primary host (algo-1): mpirun over every host in SM_HOSTS, N\n"
    "          processes (ranks) on each (default 1), SageMaker's MCA options, then\n"
    "          OPTIONS (sagemaker_mpi_custom_mpi_options, split as a shell would),\n"
    "          with `ztrain-mpi agent` as mpirun's remote shell;\n"
    "  host    on every other host: waits for the primary's mpirun and runs Open MPI's\n"
    "          daemon for it, so that the host's ranks run under the host's replica;\n"
    "          it takes commands from the primary replica only, over the job's\n"
    "          CURVE-secured control plane (ZT_ADDRESS), and needs the job's keys;\n"
    "  agent   mpirun's remote shell (plm_rsh_agent): runs COMMAND on HOST (this host\n"
    "          directly, another through its `ztrain-mpi host`, found in ZT_MPI_HOSTS);\n"
    "          exits with the command's status, or 255 when the host is unreachable.\n"
    "Every host's ranks share memory through their own folder, ZT_JOB_DIR/mpi/HOST.\n"
    "Open MPI's own traffic between the ranks is Open MPI's (not sealed by ztrain);\n"
    "on one machine it stays on loopback.\n";

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        FILE *out = argc < 2 ? stderr : stdout;
        fprintf(out, "%s\nOptions:\n  %-26s %s\n  %-26s %s\n\n", s_usage, "--help", "this text", "--version",
                "the version");
        if (argc >= 2)
            zt_knobs_print_for(out, ZT_FOR_WORKER);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("ztrain-mpi %s\n", ZT_VERSION);
        return 0;
    }
    zt_private_files();
    if (!strcmp(argv[1], "launch")) {
        zt_log_init("mpi-launch", -1);
        return zt_mpi_launch(argc - 2, argv + 2);
    }
    if (!strcmp(argv[1], "host") && argc == 2)
        return zt_mpi_host();
    if (!strcmp(argv[1], "agent") && argc >= 4) {
        zt_log_init("mpi-agent", -1);
        return zt_mpi_agent(argv[2], argc - 3, argv + 3);
    }
    fprintf(stderr, "ztrain-mpi: unknown use '%s' (see ztrain-mpi --help)\n", argv[1]);
    return 2;
}
