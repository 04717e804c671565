/* The Slurm backend's insides, shared by its replicas' steps
 * (zt_backend_slurm.c) and its nodes over the job's life
 * (zt_backend_slurm_nodes.c), and what both read of the allocation
 * (zt_backend_slurm_alloc.c). */
#ifndef ZT_BACKEND_SLURM_INT_H
#define ZT_BACKEND_SLURM_INT_H
#include "launch/zt_backend.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A replica's place in the allocation and its running step. */
typedef struct {
    char *node;                 /* its node (owned) */
    char name[32];              /* its step's name, the replica's */
    int comp;                   /* its component */
    int gpus;                   /* GPUs its step asks for */
    int cpus;                   /* CPUs of its machine type */
    long long mem_mb;           /* memory per CPU (MB) */
    char alloc[32];             /* an allocation of its own (a node regained), or "" */
    zt_handle_t *handle;        /* its running step (srun), or NULL */
    int64_t started_at;         /* when that step was started */
} zt_slurm_be_rep_t;

/* The backend's state (zt_backend_t's ctx). */
typedef struct {
    zt_backend_t *local;        /* starts, signals and reaps the srun processes */
    bool het;                   /* a heterogeneous allocation: one component per pool */
    int component[ZT_POOLS];    /* the component of each present pool */
    zt_slurm_be_rep_t *reps;              /* per ordinal */
    int n;
    /* scancel, the time limit or a preemption ends the steps before the
     * coordinator hears its own SIGTERM: their ends are held back until it
     * has, so that they are the job's stop, not crashes or a replica's own
     * preemption */
    struct { zt_handle_t *h; int status; int64_t until; } held[512];
    int nheld;
    int64_t ending_since;       /* when the allocation was seen ending (0: not) */
    char jobs[512];             /* the allocation's job ids, one per component ("9,10") */
    char steps[16384];          /* squeue's list of the allocation's steps: "ID NAME NODE" lines */
    int64_t steps_at;           /* when it was read (0: never) */
    pid_t signalling[64];       /* scancel --signal commands under way (0: free) */
    char dropped[1024];         /* nodes let go from the allocation ("n3,n7"): never asked for again */
} zt_slurm_be_t;

/* zt_backend_slurm_alloc.c. The value of Slurm's variable name for component c
 * (NAME_HET_GROUP_C in a heterogeneous allocation, else name), the name
 * used left in buf; NULL when unset. */
const char *zt_slurm_be_env_component(const char *name, bool het, int c, char *buf, size_t size);
/* The interfaces that hold the addresses of places[0..n) (replicas
 * first..first+n-1) on their nodes, for SM_NETWORK_INTERFACE_NAME. */
void zt_slurm_be_node_interfaces(zt_slurm_be_t *ctx, int first, zt_place_t *places, int n);
/* True when squeue says the allocation is no longer running (cancelled,
 * timed out, completing). No answer is not taken for an end. */
bool zt_slurm_be_allocation_ending(void);

/* zt_backend_slurm_nodes.c: zt_backend_t's node_lost, requeue, drop_node,
 * regain, give_up and ending (zt_backend.h says what each does); the
 * nodes regained let go with the backend. */
int zt_slurm_be_node_lost(zt_backend_t *self, const zt_handle_t *h, char *why, size_t len);
void zt_slurm_be_requeue(zt_backend_t *self);
int zt_slurm_be_drop_node(zt_backend_t *self, const char *host, char *why, size_t len);
int zt_slurm_be_regain(zt_backend_t *self, int k, zt_place_t *pl, char *why, size_t len);
void zt_slurm_be_give_up(zt_backend_t *self);
int zt_slurm_be_ending(zt_backend_t *self, char *why, size_t len);
void zt_slurm_be_release_regained(zt_slurm_be_t *ctx);

#endif
