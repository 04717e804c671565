/* Reading the cluster a replica was started in, from CLUSTER_SPEC. */
#ifndef ZT_CLUSTER_H
#define ZT_CLUSTER_H

/* The host:port list of pool N (NULL-terminated, heap); *n its length.
 * An absent pool or no CLUSTER_SPEC gives an empty list. */
char **zt_cluster_pool(int pool, int *n);
void zt_cluster_free(char **list);
/* Splits a comma-separated list (an environment variable) like zt_cluster_pool. */
char **zt_cluster_split(const char *text, int *n);
/* Makes large allocations reuse freed heap memory instead of fresh mmap'd
 * pages each time (ZeroMQ allocates each large message it receives). */
void zt_tune_malloc(void);

#endif
