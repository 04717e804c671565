/* zt_compute: a replica's forward and backward passes and its optimizer
 * step, on the CPU (zt_mlp) or on the replica's GPUs (zt_gpu_group: one
 * model per GPU, the batch split between them, NCCL between them), behind
 * one set of calls. The host model always holds the parameters and the
 * gradients that the exchange (zt_exchange) sends and receives; on GPUs
 * they are staged through page-locked host memory. */
#ifndef ZT_COMPUTE_H
#define ZT_COMPUTE_H
#include "zt_idx.h"
#include "zt_mlp.h"
#include "state/zt_optim.h"
#include "zt_gpu.h"
#include <stdbool.h>

typedef struct {
    zt_mlp_t *mlp;              /* host parameters and gradients */
    zt_gpu_group_t *gpu;        /* the replica's GPUs, or NULL: the CPU */
    const zt_dataset_t *data;   /* the training set */
    uint8_t *bx, *by;           /* CPU: the batch, gathered */
} zt_compute_t;

/* The model (layer sizes) and where it runs: device "cpu", "cuda", or
 * "auto" (the GPUs when the replica was given some in CUDA_VISIBLE_DEVICES
 * and this build has CUDA). 0, or -1 after logging why. */
int zt_compute_init(zt_compute_t *c, const int *sizes, int nsizes, int batch, const zt_dataset_t *data,
                    const char *device);
void zt_compute_fini(zt_compute_t *c);

/* The epoch's order of example indices (a GPU keeps it on the device). */
int zt_compute_epoch(zt_compute_t *c, const int *order, int n);
/* Forward and backward on order[first .. first+B). With to_host the
 * gradient sum lands in the host model's gradients (from GPUs layer by
 * layer: see zt_compute_wait_tensor). *loss is the batch's loss on the CPU
 * and 0 on GPUs, which add it up themselves (zt_compute_take_loss). */
int zt_compute_step(zt_compute_t *c, const int *order, int first, int B, bool to_host, float *loss);
/* Waits until tensor t's gradients are in host memory (at once on the CPU). */
int zt_compute_wait_tensor(zt_compute_t *c, int t);
/* The loss summed since last taken: `sum` on the CPU (the caller adds the
 * batch losses), the devices' own sum on GPUs. */
double zt_compute_take_loss(zt_compute_t *c, double sum);

/* Host parameters up to the devices, and (with opt) the optimizer state. */
int zt_compute_upload(zt_compute_t *c, const zt_opt_t *opt, float *const *state);
/* Device parameters down to the host, and (with opt) the optimizer state. */
int zt_compute_download(zt_compute_t *c, const zt_opt_t *opt, float *const *state);
/* One optimizer step where the model runs. from_host: the gradients are
 * the host's (after an all-reduce); otherwise those the step left. */
int zt_compute_apply(zt_compute_t *c, const zt_opt_t *opt, float **state, bool from_host);

#endif
