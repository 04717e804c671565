#ifndef ZT_CLI_H
#define ZT_CLI_H
/* Runs the ztrain CLI; command forces a subcommand (ztrain-coordinator: "run"). */
int zt_cli_main(int argc, char **argv, const char *command);

#include <jansson.h>
#include <stdbool.h>

/* The job (job.json, or a Slurm submission not started yet) or study
 * (study.json) in dir, as `ztrain status --json` shows it: FAILED when its
 * process is gone or its Slurm allocation ended without recording an end.
 * *kind: "job" or "study". NULL when dir holds neither (a job.json or
 * study.json without a state is a spec of that name, not a record). */
json_t *zt_cli_load(const char *dir, const char **kind);

/* ztrain status (exits as `ztrain run` would, 0 while the job runs; 2 when
 * there is nothing to read) and ztrain cancel (zt_cli_status.c). */
int zt_cli_status(const char *job_dir, const char *study_dir, bool json);
int zt_cli_cancel(const char *dir);
/* The state in dir/job.json as written (NULL: none yet), into buf. */
const char *zt_cli_job_state(const char *dir, char *buf, size_t size);

/* ztrain scale DIR --pool N --replicas K (zt_cli_scale.c): asks the job's
 * coordinator to scale its elastic pool N to K replicas and prints its
 * answer; 0 accepted, 1 refused or no answer, 2 a usage error. */
int zt_cli_scale(const char *dir, int pool, int replicas);

/* ztrain logs, list, wait (zt_cli_watch.c). */
int zt_cli_logs(const char *dir, const char *replica, bool follow);
int zt_cli_list(const char *jobs_dir, bool json);
int zt_cli_wait(const char *dir);

#endif
