/* zt_cuda_check: checks of CUDA, cuBLAS and NCCL calls in the style of
 * NCCL's NCCLCHECKGOTO. The call's result goes into `res` (a variable of the
 * library's result type, so the caller can still look at it); on failure
 * the call's text and the library's reason are kept for zt_gpu_last_error()
 * and control goes to `label`, where the function undoes what it did. */
#ifndef ZT_CUDA_CHECK_H
#define ZT_CUDA_CHECK_H

/* Keeps "call: why" as this thread's last GPU error. */
void zt_gpu_fail(const char *call, const char *why);

#define ZT_CUDA_CHECK(call, res, label) do {                          \
        (res) = (call);                                               \
        if ((res) != cudaSuccess) {                                   \
            zt_gpu_fail(#call, cudaGetErrorString(res));              \
            goto label;                                               \
        }                                                             \
    } while (0)

#define ZT_NCCL_CHECK(call, res, label) do {                          \
        (res) = (call);                                               \
        if ((res) != ncclSuccess) {                                   \
            zt_gpu_fail(#call, ncclGetErrorString(res));              \
            goto label;                                               \
        }                                                             \
    } while (0)

#define ZT_BLAS_CHECK(call, res, label) do {                          \
        (res) = (call);                                               \
        if ((res) != CUBLAS_STATUS_SUCCESS) {                         \
            zt_gpu_fail(#call, "cuBLAS failed");                      \
            goto label;                                               \
        }                                                             \
    } while (0)

#endif
