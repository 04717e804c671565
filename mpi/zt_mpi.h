/* ztrain-mpi: SageMaker's `distribution mpi` on ztrain's hosts.
 *
 * SageMaker's launcher runs mpirun on the primary host (algo-1), which
 * starts Open MPI's daemon (orted) on every host over SSH, each daemon then
 * starting that host's ranks. ztrain runs no SSH. Instead:
 *   - the primary runs `ztrain-mpi launch`, which builds SageMaker's mpirun
 *     command from the replica's variables and runs it, with
 *     `ztrain-mpi agent` as mpirun's remote shell (plm_rsh_agent);
 *   - every other host runs `ztrain-mpi host`: a replica that waits for the
 *     primary's agent and runs the daemon's command line it is sent, as its
 *     own child, so that the ranks live under their host's replica (its
 *     variables, folders, GPUs, and supervision);
 *   - the agent reaches a host over a control-plane socket of the job
 *     (CURVE, the job's keys): a host takes commands from the primary
 *     replica only, and from no process without the job's credentials.
 * Agent and host heartbeat while the command runs; either side silent ends
 * it (the daemon is killed, or the agent exits 255 as ssh does).
 * ZT_MPI_HOSTS says where each host's `ztrain-mpi host` listens. */
#ifndef ZT_MPI_H
#define ZT_MPI_H
#include <stdbool.h>

/* The replica allowed to start processes on the other hosts. */
#define ZT_MPI_PRIMARY "workerpool0-0"
/* Longest command a host takes (Open MPI's daemon line is about 1 KiB). */
#define ZT_MPI_COMMAND_MAX 65536

/* `ztrain-mpi launch [--processes-per-host N] [--mpi-options S] -- PROGRAM
 * [ARG...]`: execs mpirun; returns only on an error (its exit status). */
int zt_mpi_launch(int argc, char **argv);
/* `ztrain-mpi host`: serves until the job stops it; the exit status. */
int zt_mpi_host(void);
/* `ztrain-mpi agent HOST WORD...` (mpirun's remote shell): runs the words,
 * joined as a shell command line, on HOST; the command's exit status. */
int zt_mpi_agent(const char *host, int argc, char **argv);
/* argv's words as one line, space between them, as ssh joins a command
 * (heap). */
char *zt_mpi_join(int argc, char *const *argv);
/* The variables to run host's daemon under, "NAME=value" each (a heap
 * array of heap strings, NULL-terminated; ZT_MPI_HOST_VARS of them). On
 * one machine every host has the same system name, and Open MPI names
 * what its daemons and ranks share on a node by that name: two hosts'
 * daemons would share (and corrupt) each other's. So each host gets
 *   - its own folder for the shared memory between its ranks,
 *     ZT_JOB_DIR/mpi/HOST (made 0700; none when it cannot be made);
 *   - PMIx's key-value store in each process (gds hash), not in files
 *     that every daemon on the node shares;
 *   - no topology shared through a fixed mapping (rtc_hwloc_vmhole none),
 *     which two daemons on one machine were seen to crash in. */
#define ZT_MPI_HOST_VARS 3
char **zt_mpi_host_vars(const char *host);
/* Whether s ("NAME=value") sets one of zt_mpi_host_vars's names. */
bool zt_mpi_host_var_named(const char *s);

#endif
