/* CPU per byte for the C benchmarks: what the benchmark's children (the
 * servers and workers it started and waited for) spent, user and system. */
#ifndef BENCH_CPU_H
#define BENCH_CPU_H
#include <sys/resource.h>

/* CPU-seconds of every child waited for so far. */
static inline double s_bench_children_cpu(void)
{
    struct rusage ru;
    getrusage(RUSAGE_CHILDREN, &ru);
    return (double) (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double) (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}
#endif
