/* zt_gpu: the built-in trainer's model on a CUDA device: cuBLAS for the
 * matrix products, small kernels for the gather, bias, ReLU, softmax
 * cross-entropy and the optimizer updates. The dataset is copied to the
 * device once; a step's batch is gathered there from an epoch permutation
 * uploaded once per epoch. Built only when the CUDA toolkit is found
 * (ZT_HAVE_CUDA); otherwise zt_cuda_devices() is 0 and zt_gpu_mlp_new fails
 * saying this build has no CUDA. */
#ifndef ZT_GPU_H
#define ZT_GPU_H
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* CUDA devices this process can use (0 without CUDA or without a device). */
int zt_cuda_devices(void);

typedef struct zt_gpu_mlp_t zt_gpu_mlp_t;

/* sizes as zt_mlp; the dataset (n examples of dim pixels, labels) is copied
 * to the device once. NULL with the reason in err. */
zt_gpu_mlp_t *zt_gpu_mlp_new(const int *sizes, int nsizes, int batch_cap, const uint8_t *x,
                             const uint8_t *y, int n, int dim, char *err, size_t errlen);
void zt_gpu_mlp_destroy(zt_gpu_mlp_t **self_p);
/* Parameters and gradients, in zt_mlp's flat layout. */
int zt_gpu_mlp_set_params(zt_gpu_mlp_t *self, const float *host);
int zt_gpu_mlp_get_params(zt_gpu_mlp_t *self, float *host);
int zt_gpu_mlp_get_grads(zt_gpu_mlp_t *self, float *host);
int zt_gpu_mlp_set_grads(zt_gpu_mlp_t *self, const float *host);
/* The epoch's order of example indices (uploaded once per epoch). */
int zt_gpu_mlp_set_order(zt_gpu_mlp_t *self, const int *order, int n);
/* Forward and backward on order[first .. first+B); returns the batch loss. */
float zt_gpu_mlp_train_batch(zt_gpu_mlp_t *self, int first, int B);
/* One optimizer step on the device (kind as zt_opt_kind_t). */
int zt_gpu_mlp_apply(zt_gpu_mlp_t *self, int kind, float lr, float momentum, float beta1, float beta2,
                     float eps);

#ifdef __cplusplus
}
#endif
#endif
