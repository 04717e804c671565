#include "zt_blas.h"
#include "ztrain/zt_log.h"
#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define S_CORETYPE "OPENBLAS_CORETYPE"
/* Set beside S_CORETYPE, so that the program run again knows it chose. */
#define S_CHOSEN "ZTRAIN_BLAS_CHOSEN"

static const char *s_chosen;

/* The kernels this processor can run, newest first; NULL for none newer
 * than the fallback. */
static const char *s_kernels(void)
{
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return "Haswell";
    return NULL;
}

void zt_blas_init(char **argv)
{
    openblas_set_num_threads(1);
    const char *chosen = getenv(S_CHOSEN);
    if (chosen) {
        const char *now = getenv(S_CORETYPE);
        s_chosen = now && !strcmp(now, chosen) ? chosen : NULL;
        unsetenv(S_CHOSEN); /* not for the programs this one starts */
        return;
    }
    const char *kernels = s_kernels();
    if (getenv(S_CORETYPE) || !kernels || strcmp(openblas_get_corename(), "Prescott") != 0)
        return;
    if (setenv(S_CORETYPE, kernels, 1) != 0 || setenv(S_CHOSEN, kernels, 1) != 0)
        return;
    execv("/proc/self/exe", argv);
    unsetenv(S_CORETYPE); /* could not: run on as we are */
    unsetenv(S_CHOSEN);
}

void zt_blas_say(void)
{
    if (s_chosen)
        zt_info("OpenBLAS does not know this processor: running its %s kernels (OPENBLAS_CORETYPE)", s_chosen);
}
