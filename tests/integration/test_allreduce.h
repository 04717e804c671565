/* test_allreduce's parts shared between its files. */
#ifndef TEST_ALLREDUCE_H
#define TEST_ALLREDUCE_H
#include "ztrain/zt_allreduce.h"
#include <stdint.h>

/* Reducer r's endpoint, once started. */
extern char t_red_eps[4][256];
/* Worker p's ring endpoint (t_peers). */
extern char t_peer_eps[8][256];
/* The reducers' endpoints (R of t_red_eps) and the ring's (N of t_peer_eps) as a worker's options take them. */
void t_ends(int N, int R, const char **reds, const char **peers);
/* The ring's addresses for workers 0..n-1 (tag: a name of the case), before they fork. */
void t_peers(int n, const char *tag);
/* Starts R reducers, forks N workers (ring addresses named by tag), each
 * exiting with worker(w, N, R, arg), and stops the reducers once all have
 * exited: how many failed. */
int t_run_workers(int N, int R, const char *tag, int (*worker)(int w, int N, int R, const void *arg), const void *arg);
/* Starts reducer r of R (its endpoint in t_red_eps[r]). */
void t_start_reducer(int r, int R);
/* Kills reducer r of R (SIGKILL) and starts it again in place. */
void t_restart_reducer(int r, int R);
/* Stops reducers 0..R-1 cleanly. */
void t_stop_reducers(int R);
/* Worker rank of a pair through reducer 0, committed to one tensor "g" of n floats. */
zt_allreduce_t *t_pair_worker(int rank, int64_t n);
/* One round of the pair in g (n floats): every element is rank + 1, the sum 3. */
void t_pair_round_in(zt_allreduce_t *ar, int rank, int64_t n, float *g);

/* test_allreduce_groups.c */
void t_membership_changes(void);
void t_steady_memory(void);
/* Two rounds of n floats by N workers through R reducers (0: the ring), exact. */
void t_large(int N, int R, int64_t n);
/* Rounds of several tensors, a bucket each under a tight send window, which
 * each worker submits in its own order: exact. */
void t_orders(int N, int R, int64_t n);

#endif
