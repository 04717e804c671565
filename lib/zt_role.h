/* zt_role: the life of a role binary that has no work of its own yet:
 * parse flags, register, heartbeat, optionally wait for RUNNING and do
 * --run-seconds of placeholder work, then exit cleanly on shutdown. */
#ifndef ZT_ROLE_H
#define ZT_ROLE_H

typedef struct {
    const char *binary;       /* "ztrain-worker" */
    const char *role;         /* "worker" */
    const char *summary;      /* one line for --help */
} zt_role_info_t;

int zt_role_main(const zt_role_info_t *info, int argc, char **argv);

#endif
