/* zt_gpu: the built-in trainer's model on a CUDA device: cuBLAS for the
 * matrix products, small kernels for the gather, bias, ReLU, softmax
 * cross-entropy and the optimizer updates. The dataset is copied to the
 * device once; a step's batch is gathered there from an epoch permutation
 * uploaded once per epoch. Built only when the CUDA toolkit is found
 * (ZT_HAVE_CUDA); otherwise zt_cuda_devices() is 0 and zt_gpu_mlp_new fails
 * saying this build has no CUDA. */
#ifndef ZT_GPU_H
#define ZT_GPU_H
#include "state/zt_optim.h"
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* CUDA devices this process can use (0 without CUDA or without a device). */
int zt_cuda_devices(void);
/* Why the last call on this thread that returned -1 or NULL failed: the
 * CUDA, cuBLAS or NCCL call and the library's reason. */
const char *zt_gpu_last_error(void);

typedef struct zt_gpu_mlp_t zt_gpu_mlp_t;

/* sizes as zt_mlp; the dataset (n examples of dim pixels, labels) is copied
 * to the device once. NULL with the reason in err. */
zt_gpu_mlp_t *zt_gpu_mlp_new(const int *sizes, int nsizes, int batch_cap, const uint8_t *x,
                             const uint8_t *y, int n, int dim, char *err, size_t errlen);
/* The same on device `device` (0 .. zt_cuda_devices()-1). */
zt_gpu_mlp_t *zt_gpu_mlp_new_on(int device, const int *sizes, int nsizes, int batch_cap,
                                const uint8_t *x, const uint8_t *y, int n, int dim, char *err,
                                size_t errlen);
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
/* One optimizer step on the device (any row of the optimizer table). */
int zt_gpu_mlp_apply(zt_gpu_mlp_t *self, const zt_opt_t *opt);

/* Optimizer state in zt_optim's layout (the table's state arrays; Adam's
 * step count is its last), for checkpoints. */
int zt_gpu_mlp_get_state(zt_gpu_mlp_t *self, const zt_opt_t *opt, float *const *host);
int zt_gpu_mlp_set_state(zt_gpu_mlp_t *self, const zt_opt_t *opt, const float *const *host);

/* Page-locks a host buffer (cudaHostRegister) so that copies to and from it
 * run at full speed and asynchronously; undone by zt_gpu_unpin. */
int zt_gpu_pin(void *host, size_t bytes);
void zt_gpu_unpin(void *host);

/* Data parallelism inside a replica: one model per GPU, gradients summed
 * across them with NCCL (one communicator, a rank per device; with one GPU
 * the same code runs with a single rank). */
typedef struct zt_gpu_group_t zt_gpu_group_t;
/* Takes the models over (one per device, in device order). */
zt_gpu_group_t *zt_gpu_group_new(zt_gpu_mlp_t **mlps, int n, char *err, size_t errlen);
void zt_gpu_group_destroy(zt_gpu_group_t **self_p);
int zt_gpu_group_size(zt_gpu_group_t *self);
zt_gpu_mlp_t *zt_gpu_group_mlp(zt_gpu_group_t *self, int i);
int zt_gpu_group_set_order(zt_gpu_group_t *self, const int *order, int n);
/* Enqueues one step on order[first .. first+B), the batch split between the
 * devices. Going down the layers, each layer's gradients are summed with
 * NCCL as soon as they exist: with host (pinned, zt_mlp's flat layout) they
 * are reduced onto device 0 and copied into host on a copy stream, layer by
 * layer (zt_gpu_group_wait_layer says when one has landed), for the replica's
 * exchange with reducers or parameter servers; without host they are
 * all-reduced in place. Returns at once. */
int zt_gpu_group_step(zt_gpu_group_t *self, int first, int B, float *host);
/* Waits until layer `layer`'s gradients (weights and bias) are in host. */
int zt_gpu_group_wait_layer(zt_gpu_group_t *self, int layer);
/* One optimizer step on every device, with the gradients from host (pinned;
 * up to device 0 and NCCL-broadcast from there), or those of the last step
 * when host is NULL. Waits for the devices. */
int zt_gpu_group_apply(zt_gpu_group_t *self, const float *host, const zt_opt_t *opt);
/* Parameters to every device (up to device 0, NCCL broadcast), and back. */
int zt_gpu_group_set_params(zt_gpu_group_t *self, const float *host);
int zt_gpu_group_get_params(zt_gpu_group_t *self, float *host);
int zt_gpu_group_get_state(zt_gpu_group_t *self, const zt_opt_t *opt, float *const *host);
int zt_gpu_group_set_state(zt_gpu_group_t *self, const zt_opt_t *opt, const float *const *host);
/* The sum of the batch losses since last taken (a step's loss is its
 * batch mean); waits for the devices. */
float zt_gpu_group_take_loss(zt_gpu_group_t *self);
/* Sums every device's gradients in place (ncclAllReduce). */
int zt_gpu_group_allreduce_grads(zt_gpu_group_t *self);
/* Sum of float buffers, one per device, in place (benchmarks). */
int zt_gpu_group_allreduce(zt_gpu_group_t *self, float **bufs, size_t count);

#ifdef __cplusplus
}
#endif
#endif
