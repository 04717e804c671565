/* zt_blas: OpenBLAS set up for a replica that trains or scores on the CPU.
 *
 * OpenBLAS picks its kernels for the processor when it loads. A release
 * that does not know the processor (Debian 12's 0.3.21 on Sapphire Rapids)
 * falls back to its oldest x86-64 kernels (Prescott, SSE3), which run the
 * built-in model's matrix products at half the speed or less. Where that
 * happened and the processor has AVX-512 or AVX2 with FMA, zt_blas_init
 * names the matching kernels in OPENBLAS_CORETYPE and executes the program
 * again (the same process, before it has done anything else). A value the
 * user set is kept as it is. */
#ifndef ZT_BLAS_H
#define ZT_BLAS_H

/* Call first in main. Returns only when nothing needs to change or the
 * program could not be executed again (then it runs on the kernels it has);
 * leaves OpenBLAS on one thread. */
void zt_blas_init(char **argv);
/* Logs the kernels zt_blas_init chose for this process, if it chose any.
 * Call once the log is set up. */
void zt_blas_say(void);

#endif
