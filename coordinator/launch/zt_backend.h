/* zt_backend: how replicas are launched. Supervision talks only to this
 * interface; the local backend forks processes on this machine, and a
 * cluster engine (Slurm) is another implementation of the same calls. */
#ifndef ZT_BACKEND_H
#define ZT_BACKEND_H
#include <sys/types.h>

typedef struct {
    int pool;                  /* pool of the replica */
    int index;                 /* index in the pool */
    char *const *argv;         /* program and arguments (argv[0] searched in PATH) */
    char *const *envp;         /* the replica's whole environment */
} zt_launch_t;

typedef struct zt_backend_t zt_backend_t;
struct zt_backend_t {
    const char *name;          /* "local" */
    void *ctx;                 /* the implementation's state */
    /* Starts a replica: *pid_p identifies it, *out_fd (or -1) yields its
     * stdout and stderr, non-blocking. 0 or a ZT_E* code. */
    int (*start)(zt_backend_t *self, const zt_launch_t *req, pid_t *pid_p, int *out_fd);
    /* Sends sig to the replica and everything it started. */
    int (*kill)(zt_backend_t *self, pid_t pid, int sig);
    /* Collects one ended replica without blocking: 1 with pid and wait
     * status, 0 when none. Ids it never started may come back; ignore them. */
    int (*reap)(zt_backend_t *self, pid_t *pid, int *status);
    /* Kills whatever any replica left behind (orphans, background jobs). */
    void (*cleanup)(zt_backend_t *self);
    void (*destroy)(zt_backend_t **self_p);
};

zt_backend_t *zt_backend_local_new(void);

#endif
