/* zt_backend: how replicas are placed and launched. Supervision talks only
 * to this interface and holds no process id and no address of its own
 * making: a backend *places* every replica (its host, the address others
 * reach it at, its port, its GPUs) and the coordinator's control plane, then
 * *starts*, *signals* and *waits on* replicas through opaque handles. The
 * local backend forks processes on this machine; a cluster engine (Slurm) is
 * another implementation of the same calls. */
#ifndef ZT_BACKEND_H
#define ZT_BACKEND_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "plan/zt_jobspec.h"

/* Where one replica runs. */
typedef struct {
    char host[256];            /* host identity: two replicas share a host iff equal */
    char addr[256];            /* the address other replicas reach it at */
    int port;                  /* its port (ZT_ADDRESS, CLUSTER_SPEC) */
    int first_gpu;             /* first of its GPUs on its host */
    int ngpus;                 /* how many (0: none) */
    char iface[32];            /* the network interface of addr on its host
                                  (SM_NETWORK_INTERFACE_NAME); empty: "lo" */
} zt_place_t;

/* Where a whole job runs: every replica in pool order (pool 0 first), and
 * where the coordinator's control plane listens. */
typedef struct {
    zt_place_t *replicas;      /* plan order; zt_plan_replicas(plan) of them */
    int n;                     /* how many */
    int master_port;           /* a second port on the chief's host, for MASTER_PORT
                                  (torch's store), apart from its CLUSTER_SPEC port */
    char control_addr[256];    /* the coordinator binds tcp://control_addr:* */
    char *spare_hosts;         /* hosts a replica may be moved to later ("n6,n7": an elastic
                                  pool's regained nodes), heap, or NULL: the job's ports
                                  accept them too */
} zt_placement_t;

/* Frees what the placement holds (the placement's own: the registry and
 * every backend use it, so it is here, not in a file of theirs). */
static inline void zt_placement_fini(zt_placement_t *self)
{
    free(self->replicas);
    free(self->spare_hosts);
    memset(self, 0, sizeof *self);
}

/* One replica to start. */
typedef struct {
    int pool;                  /* pool of the replica */
    int index;                 /* index in the pool */
    int ordinal;               /* its place in the placement (plan order) */
    char *const *argv;         /* program and arguments (argv[0] searched in PATH) */
    char *const *envp;         /* the replica's whole environment */
    const char *log_path;      /* NULL: output through *out_fd; else appended to this file */
    int death_signal;          /* sent to it if its starter dies (0: SIGKILL) */
} zt_launch_t;

/* A started replica; the backend's own. */
typedef struct zt_handle_t zt_handle_t;

typedef struct zt_backend_t zt_backend_t;
struct zt_backend_t {
    const char *name;          /* "local" */
    void *ctx;                 /* the implementation's state */
    /* Places every replica of plan (cpu_only: no GPUs). 0 or a ZT_E* code
     * with the reason logged. Until each replica starts, its port is held
     * for it. */
    int (*place)(zt_backend_t *self, const zt_plan_t *plan, bool cpu_only, zt_placement_t *out);
    /* Starts a replica: *handle_p identifies it; *out_fd (or -1) yields its
     * stdout and stderr, non-blocking, unless req->log_path is given. 0 or a
     * ZT_E* code. */
    int (*start)(zt_backend_t *self, const zt_launch_t *req, zt_handle_t **handle_p, int *out_fd);
    /* Sends sig to the replica and everything it started. */
    int (*signal)(zt_backend_t *self, zt_handle_t *handle, int sig);
    /* Collects one ended replica without blocking: 1 with its handle and
     * wait status, 0 when none. The caller gives the handle back with
     * release once done with it. */
    int (*reap)(zt_backend_t *self, zt_handle_t **handle_p, int *status);
    void (*release)(zt_backend_t *self, zt_handle_t **handle_p);
    /* The replica's process id on its host, for job.json and logs. */
    int64_t (*pid)(zt_backend_t *self, const zt_handle_t *handle);
    /* Kills whatever any replica left behind (orphans, background jobs). */
    void (*cleanup)(zt_backend_t *self);
    void (*destroy)(zt_backend_t **self_p);
    /* Backends whose jobs run on nodes that can be lost (Slurm); NULL
     * elsewhere. The id of the allocation the job runs in. */
    const char *allocation;
    /* How many times the allocation has run the job again after a lost
     * node (Slurm's requeues); 0 on its first run. */
    long requeues;
    /* Whether the node of a replica (handle), or of any replica (NULL), is
     * lost: 1 with the node and the reason in why, else 0. */
    int (*node_lost)(zt_backend_t *self, const zt_handle_t *handle, char *why, size_t len);
    /* After a lost node, with a job retry left: the allocation runs the job
     * again on other nodes (requeued, unless the scheduler did so already). */
    void (*requeue)(zt_backend_t *self);
    /* After a lost node, with no retry left: the allocation does not run it
     * again (a requeue the scheduler made is cancelled). */
    void (*give_up)(zt_backend_t *self);
    /* An elastic pool goes on without the node `host`: the allocation lets
     * it go, so that the scheduler ends nothing more when it sees it down.
     * ZT_OK, or a code with the reason in why; NULL where nodes are not lost. */
    int (*drop_node)(zt_backend_t *self, const char *host, char *why, size_t len);
    /* Asked when the coordinator receives a stop signal: why the
     * allocation is ending under the job (ZT_END_*), with the reason for
     * people in why. */
    int (*ending)(zt_backend_t *self, char *why, size_t len);
    /* Capacity back for replica ordinal, whose node was lost: a place for
     * it now (pl, its earlier place on entry, is its new one; its step
     * runs there from then on), or ZT_ENOTFOUND with why when there is none
     * yet. NULL where capacity does not go away (one machine). */
    int (*regain)(zt_backend_t *self, int ordinal, zt_place_t *pl, char *why, size_t len);
};

/* Why an allocation ends under a running job. */
enum {
    ZT_END_NONE,        /* it is not ending: the signal came from elsewhere */
    ZT_END_CANCELLED,   /* cancelled (scancel) */
    ZT_END_TIME_LIMIT,  /* its time limit */
    ZT_END_REQUEUED,    /* preempted or requeued: the scheduler runs the job again */
};

/* The backends this ztrain has, for messages: "local". */
const char *zt_backend_names(void);
/* Whether name is one of them; else false with the reason in err. */
bool zt_backend_known(const char *name, char *err, size_t len);
/* The backend called name (NULL: ZT_BACKEND, default local); NULL with the
 * reason in err when there is none of that name. */
zt_backend_t *zt_backend_new(const char *name, char *err, size_t len);
zt_backend_t *zt_backend_local_new(void);
/* Inside a Slurm allocation: every replica a job step on its node. */
zt_backend_t *zt_backend_slurm_new(void);
#endif
