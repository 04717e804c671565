/* GPUs on this machine, without linking CUDA: ZT_GPU_COUNT, else the
 * /dev/nvidiaN device files. */
#ifndef ZT_CUDA_PROBE_H
#define ZT_CUDA_PROBE_H
#include <stdbool.h>
int zt_gpu_count(void);
/* Whether this build has the CUDA/NCCL backend. */
bool zt_have_cuda_build(void);
#endif
