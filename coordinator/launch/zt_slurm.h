/* zt_slurm: a job submitted to Slurm from outside an allocation. `ztrain
 * run --backend slurm` writes a batch script (the job's #SBATCH lines, then
 * `ztrain run` itself, which inside the allocation becomes the coordinator
 * with the slurm backend), submits it with sbatch, and follows it: the
 * coordinator's output streamed from the batch output file, the end read
 * from job.json. Everything lives under <job-dir>/slurm/, on the filesystem
 * every node sees. */
#ifndef ZT_SLURM_H
#define ZT_SLURM_H
#include "plan/zt_jobspec.h"
#include <stdbool.h>
#include <stddef.h>

/* The allocation's options beyond the spec; NULL fields are left out. */
typedef struct {
    const char *partition;      /* --partition */
    const char *account;        /* --account */
    const char *qos;            /* --qos */
    const char *time;           /* --time, Slurm's format; NULL: scheduling.timeout */
} zt_slurm_alloc_t;

/* The #SBATCH lines of the job's allocation: the job-wide ones (name, time
 * limit, then extra, verbatim), and one heterogeneous component per present
 * pool, in pool order (its replicas as tasks, the machine type's vCPUs and
 * memory per task; with accelerators, one task per node and the
 * accelerators as --gres=gpu:N). Heap text. */
char *zt_slurm_sbatch_header(const zt_plan_t *plan, const zt_slurm_alloc_t *alloc, const char *extra);

/* The options every replica's step gets from srun, after its own
 * (--het-group=C, --nodelist=NODE, --job-name=workerpoolP-I, and
 * --gres=gpu:N with accelerators): one task on one node, sharing the
 * component's CPUs, the environment ztrain made. NULL-terminated. */
extern const char *const zt_slurm_step_options[];

/* The fewest nodes the job's allocation takes: a heterogeneous component
 * per pool, each on nodes of its own, and a node per replica of a pool
 * with accelerators. zt_slurm_submit refuses a job that its partition can
 * never hold. */
int zt_slurm_min_nodes(const zt_plan_t *plan);

/* NULL when text is a time limit as sbatch --time takes it ("90", "2:00:00",
 * "1-12"), else why not. */
const char *zt_slurm_time_problem(const char *text);

/* Writes <dir>/slurm/batch.sh (the header, the batch output into
 * <dir>/slurm/batch.out, the submit directory as the working directory,
 * requeue on node failure, and `exec run_argv...`), submits it, and records
 * <dir>/slurm/submission.json. 0 with the Slurm job id in jobid, or -1 with
 * the reason (sbatch's own words) in err. */
int zt_slurm_submit(const zt_plan_t *plan, const zt_slurm_alloc_t *alloc, const char *dir,
                    char *const *run_argv, char *jobid, size_t idlen, char *err, size_t errlen);

/* The Slurm job this process runs in (SLURM_JOB_ID as set, empty
 * included), or NULL outside an allocation. With component >= 0: that component's own job id in a
 * heterogeneous allocation (its steps belong to it; sbatch and salloc
 * spell the variable differently), or NULL when it is not named. The one
 * reader of these variables. */
const char *zt_slurm_job_id(int component);
/* How many times Slurm has requeued this allocation (SLURM_RESTART_COUNT;
 * 0 outside one or on its first run). */
long zt_slurm_restart_count(void);

/* The Slurm job id recorded in <dir>/slurm/submission.json, or NULL (heap);
 * NULL too (with a warning) when the file is not a plain file of this
 * user's that only this user can write. */
char *zt_slurm_submitted_id(const char *dir);

/* Asks Slurm for job id's state ("PENDING", "RUNNING", "COMPLETED", ...)
 * and reason. 1 when Slurm knows the job, 0 when it no longer does (it
 * ended a while ago), -1 when Slurm could not be asked (why in state). */
int zt_slurm_query(const char *id, char *state, size_t slen, char *reason, size_t rlen);

/* True for a state after which the job does not run again. */
bool zt_slurm_state_final(const char *state);

/* Runs a Slurm command (argv, PATH searched): its stdout and stderr
 * together into out, the last newline dropped. Its exit status, or -1 when
 * it could not run. */
int zt_slurm_command(char *const *argv, char *out, size_t size);
/* Whether environment entry "NAME=value" is one of this allocation's
 * SLURM_* variables (SLURM_CONF, the cluster's, is not). */
bool zt_slurm_allocation_var(const char *entry);
/* The same as a command run outside this job's allocation would be: none
 * of its SLURM_* variables (salloc then makes an allocation of its own). */
int zt_slurm_command_apart(char *const *argv, char *out, size_t size);
/* The same in two halves, so that several run at once: start (apart as
 * above), then finish (its output and exit status, as zt_slurm_command's).
 * A command that did not start finishes with -1. */
typedef struct { int pid; int fd; } zt_slurm_cmd_t;
void zt_slurm_command_start(char *const *argv, bool apart, zt_slurm_cmd_t *cmd);
int zt_slurm_command_finish(zt_slurm_cmd_t *cmd, char *out, size_t size);

/* scancel id: 0, or -1 with scancel's words in err. */
int zt_slurm_cancel(const char *id, char *err, size_t errlen);

/* Follows the submitted job until Slurm says it has ended: every new line
 * of <dir>/slurm/batch.out goes to out as it comes (from `from` bytes on).
 * SIGINT or SIGTERM cancels the job once (scancel) and goes on following;
 * a second one stops following. While Slurm keeps the job pending, its
 * reason is said when it changes and every minute; a reason no wait ends
 * (a partition limit the job is over) cancels it. Returns the Slurm state
 * it ended in (static text), "UNSCHEDULABLE" when it was cancelled for such
 * a reason, or "" when following was stopped. */
const char *zt_slurm_follow(const char *dir, const char *id, long from, FILE *out);

#endif
