/* zt_hist: this process's data-plane latency histograms (one per kind:
 * each all-reduce wait, each parameter-server round), in fixed buckets
 * known to every replica and the coordinator. The replica's control-plane
 * thread sends them to the coordinator (LATENCY messages), which serves
 * them to Prometheus. Thread-safe. */
#ifndef ZT_HIST_H
#define ZT_HIST_H
#include <stddef.h>
#include <stdint.h>

#define ZT_HIST_NB 16 /* bounds; counts have one more: beyond the largest */

/* Upper bounds in seconds, increasing: 100 us .. 10 s. */
extern const double zt_hist_bounds[ZT_HIST_NB];

typedef enum { ZT_HIST_ALLREDUCE, ZT_HIST_PS, ZT_HIST_KINDS } zt_hist_kind_t;

/* "allreduce", "ps"; NULL for no kind. */
const char *zt_hist_name(zt_hist_kind_t kind);
/* The kind named name, or -1. */
int zt_hist_kind(const char *name);

void zt_hist_observe(zt_hist_kind_t kind, double seconds);

/* kind's counts (ZT_HIST_NB + 1, each bucket's own) and sum; returns how
 * many were observed in all. */
uint64_t zt_hist_read(zt_hist_kind_t kind, uint64_t counts[ZT_HIST_NB + 1], double *sum);

/* counts as "c0,c1,...": 0, or -1 when buf is too small. */
int zt_hist_format(const uint64_t counts[ZT_HIST_NB + 1], char *buf, size_t size);
/* The reverse: 0, or -1 unless text is exactly ZT_HIST_NB + 1 whole numbers. */
int zt_hist_parse(const char *text, uint64_t counts[ZT_HIST_NB + 1]);

void zt_hist_selftest(void);

#endif
