/* GPUs on this machine, without linking CUDA: ZT_GPU_COUNT, else the
 * /dev/nvidiaN device files. */
#ifndef ZT_CUDA_PROBE_H
#define ZT_CUDA_PROBE_H
#include <stdbool.h>
int zt_gpu_count(void);
/* Whether this ztrain has the CUDA/NCCL backend: built with it, and its
 * module (libztgpu.so) where the trainer finds it, or ZT_GPU_MODULE set. */
bool zt_have_cuda_build(void);
#endif
