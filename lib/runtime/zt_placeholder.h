/* zt_placeholder: a replica with no work of its own, for testing
 * supervision with any role binary: register, heartbeat, optionally wait
 * for RUNNING and "work" --run-seconds, then exit with --exit-code. */
#ifndef ZT_PLACEHOLDER_H
#define ZT_PLACEHOLDER_H
#include <stdbool.h>

typedef struct {
    const char *binary;       /* "ztrain-worker" */
    const char *role;         /* "worker" */
} zt_placeholder_info_t;

/* The placeholder's flags (--idle, --run-seconds, --exit-code), for a
 * binary's own flag table; ids from ZT_PLACEHOLDER_FLAG_ID on. */
#define ZT_PLACEHOLDER_FLAG_ID 1000
#define ZT_PLACEHOLDER_FLAGS                                                                                   \
    { "idle", 0, ZT_PLACEHOLDER_FLAG_ID, NULL, "register, then wait for the end of the job (no work)" },     \
    { "run-seconds", 1, ZT_PLACEHOLDER_FLAG_ID + 1, "S", "register, wait for RUNNING, work S seconds, exit" }, \
    { "exit-code", 1, ZT_PLACEHOLDER_FLAG_ID + 2, "N", "status to exit with after --run-seconds (default 0)" }
typedef struct {
    bool placeholder;         /* --idle or --run-seconds given */
    double run_seconds;       /* -1: until the job ends */
    int exit_code;            /* the status after --run-seconds */
} zt_placeholder_opts_t;

/* Takes one of ZT_PLACEHOLDER_FLAGS into o: 0, or -1 (printed) for a bad
 * value; 1 when id is not one of them. */
int zt_placeholder_flag(const char *binary, int id, const char *value, zt_placeholder_opts_t *o);
/* Runs the placeholder replica; returns its exit status. */
int zt_placeholder_main(const zt_placeholder_info_t *info, const zt_placeholder_opts_t *o);

#endif
