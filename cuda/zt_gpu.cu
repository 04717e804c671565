/* The trainer's MLP on a CUDA device. Row-major tensors as in zt_mlp; cuBLAS
 * is column-major, so C = A * W (row-major) is computed as C^T = W^T * A^T. */
#include "zt_gpu.h"
#include "zt_cuda_check.h"
#include <cublas_v2.h>
#include <nccl.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LAYERS 9

struct zt_gpu_mlp_t {
    int n;                      /* layer sizes */
    int sizes[MAX_LAYERS];
    int batch_cap;
    int64_t off[2 * MAX_LAYERS];/* tensor offsets (W0, b0, W1, b1, ...) */
    int64_t nparams;
    cublasHandle_t blas;
    cudaStream_t stream;
    float *params, *grads;      /* nparams each */
    float *state[3];            /* optimizer state, allocated on first use */
    float *act[MAX_LAYERS];     /* batch_cap x size */
    float *delta[MAX_LAYERS];
    uint8_t *x, *y;             /* the dataset, on the device */
    int n_examples, dim;
    int *order;                 /* the epoch's permutation */
    float *loss;                /* one float: the sum of batch losses since last taken */
    float step;                 /* Adam's step count (uniform here) */
    int device;                 /* which GPU */
};

/* This thread's last GPU error (zt_cuda_check.h). */
static thread_local char s_last_error[320];

void zt_gpu_fail(const char *call, const char *why)
{
    snprintf(s_last_error, sizeof s_last_error, "%s: %s", call, why);
}

extern "C" const char *zt_gpu_last_error(void) { return s_last_error[0] ? s_last_error : "no error"; }

static void s_fail(const char *what, const char *why) { zt_gpu_fail(what, why); }

extern "C" int zt_cuda_devices(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess)
        return 0;
    return n;
}

__global__ void k_gather(const uint8_t *x, const uint8_t *y, const int *order, int first, int B, int dim,
                         float *out, uint8_t *labels)
{
    int r = blockIdx.y;
    int idx = order[first + r];
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < dim; j += blockDim.x * gridDim.x)
        out[(size_t) r * dim + j] = x[(size_t) idx * dim + j] * (1.0f / 255.0f);
    if (blockIdx.x == 0 && threadIdx.x == 0)
        labels[r] = y[idx];
}

__global__ void k_bias_act(float *out, const float *b, int B, int cols, int relu)
{
    size_t i = (size_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t) B * cols)
        return;
    float v = out[i] + b[i % cols];
    out[i] = relu && v < 0 ? 0 : v;
}

/* One row per thread: softmax, cross-entropy, dZ = (p - onehot) / denom,
 * where denom is the whole batch (a device's share is part of it). */
__global__ void k_softmax_ce(const float *z, const uint8_t *labels, int B, int k, float denom, float *dz,
                             float *loss)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= B)
        return;
    const float *row = z + (size_t) r * k;
    float mx = row[0];
    for (int j = 1; j < k; j++)
        mx = fmaxf(mx, row[j]);
    float sum = 0;
    for (int j = 0; j < k; j++)
        sum += expf(row[j] - mx);
    int y = labels[r];
    for (int j = 0; j < k; j++) {
        float p = expf(row[j] - mx) / sum;
        dz[(size_t) r * k + j] = (p - (j == y)) / denom;
    }
    float py = expf(row[y] - mx) / sum;
    atomicAdd(loss, -logf(fmaxf(py, 1e-30f)) / denom);
}

__global__ void k_colsum(const float *dz, int B, int cols, float *db)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= cols)
        return;
    float s = 0;
    for (int r = 0; r < B; r++)
        s += dz[(size_t) r * cols + j];
    db[j] = s;
}

__global__ void k_relu_back(float *da, const float *a, size_t n)
{
    size_t i = (size_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && a[i] <= 0)
        da[i] = 0;
}

/* The GPU update of each row of the optimizer table (zt_optim.h). The host
 * launches it only for a row of the table (s_state_alloc), so there is no default. */
__global__ void k_opt(zt_opt_t o, float *w, float *s0, float *s1, const float *g, size_t n, float t)
{
    size_t i = (size_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float gi = g[i];
    switch (o.kind) {
    case ZT_OPT_SGD:
        w[i] -= o.lr * gi;
        break;
    case ZT_OPT_MOMENTUM:
        s0[i] = o.momentum * s0[i] + gi;
        w[i] -= o.lr * s0[i];
        break;
    case ZT_OPT_ADAM: {
        s0[i] = o.beta1 * s0[i] + (1 - o.beta1) * gi;
        s1[i] = o.beta2 * s1[i] + (1 - o.beta2) * gi * gi;
        float mh = s0[i] / (1 - powf(o.beta1, t)), vh = s1[i] / (1 - powf(o.beta2, t));
        w[i] -= o.lr * mh / (sqrtf(vh) + o.eps);
        break;
    }
    case ZT_OPT_ADAGRAD:
        s0[i] += gi * gi;
        w[i] -= o.lr * gi / (sqrtf(s0[i]) + o.eps);
        break;
    case ZT_OPT_COUNT:
        break;
    }
}

extern "C" zt_gpu_mlp_t *zt_gpu_mlp_new(const int *sizes, int nsizes, int batch_cap, const uint8_t *x,
                                        const uint8_t *y, int n, int dim, char *err, size_t errlen)
{
    return zt_gpu_mlp_new_on(0, sizes, nsizes, batch_cap, x, y, n, dim, err, errlen);
}

extern "C" zt_gpu_mlp_t *zt_gpu_mlp_new_on(int device, const int *sizes, int nsizes, int batch_cap,
                                           const uint8_t *x, const uint8_t *y, int n, int dim, char *err,
                                           size_t errlen)
{
    if (nsizes < 2 || nsizes > MAX_LAYERS || sizes[0] != dim) {
        snprintf(err, errlen, "unsupported model shape");
        return NULL;
    }
    if (zt_cuda_devices() <= device) {
        snprintf(err, errlen, "no CUDA device is visible (CUDA_VISIBLE_DEVICES='%s')",
                 getenv("CUDA_VISIBLE_DEVICES") ? getenv("CUDA_VISIBLE_DEVICES") : "(unset)");
        return NULL;
    }
    zt_gpu_mlp_t *self = (zt_gpu_mlp_t *) calloc(1, sizeof *self);
    cudaError_t e;
    cublasStatus_t be;
    self->device = device;
    self->n = nsizes;
    self->batch_cap = batch_cap;
    memcpy(self->sizes, sizes, sizeof(int) * (size_t) nsizes);
    int64_t at = 0;
    for (int l = 0; l + 1 < nsizes; l++) {
        self->off[2 * l] = at;
        at += (int64_t) sizes[l] * sizes[l + 1];
        self->off[2 * l + 1] = at;
        at += sizes[l + 1];
    }
    self->nparams = at;
    self->n_examples = n;
    self->dim = dim;
    ZT_CUDA_CHECK(cudaSetDevice(device), e, fail);
    ZT_CUDA_CHECK(cudaStreamCreate(&self->stream), e, fail);
    ZT_BLAS_CHECK(cublasCreate(&self->blas), be, fail);
    cublasSetStream(self->blas, self->stream);
    ZT_CUDA_CHECK(cudaMalloc(&self->params, sizeof(float) * (size_t) at), e, fail);
    ZT_CUDA_CHECK(cudaMalloc(&self->grads, sizeof(float) * (size_t) at), e, fail);
    for (int l = 0; l < nsizes; l++) {
        ZT_CUDA_CHECK(cudaMalloc(&self->act[l], sizeof(float) * (size_t) batch_cap * sizes[l]), e, fail);
        ZT_CUDA_CHECK(cudaMalloc(&self->delta[l], sizeof(float) * (size_t) batch_cap * sizes[l]), e, fail);
    }
    ZT_CUDA_CHECK(cudaMalloc(&self->x, (size_t) n * dim), e, fail);
    ZT_CUDA_CHECK(cudaMalloc(&self->y, (size_t) n), e, fail);
    ZT_CUDA_CHECK(cudaMalloc(&self->order, sizeof(int) * (size_t) n), e, fail);
    ZT_CUDA_CHECK(cudaMalloc(&self->loss, sizeof(float)), e, fail);
    ZT_CUDA_CHECK(cudaMemset(self->loss, 0, sizeof(float)), e, fail);
    ZT_CUDA_CHECK(cudaMemcpy(self->x, x, (size_t) n * dim, cudaMemcpyHostToDevice), e, fail);
    ZT_CUDA_CHECK(cudaMemcpy(self->y, y, (size_t) n, cudaMemcpyHostToDevice), e, fail);
    return self;
fail:
    snprintf(err, errlen, "%s", zt_gpu_last_error());
    zt_gpu_mlp_destroy(&self);
    return NULL;
}

extern "C" void zt_gpu_mlp_destroy(zt_gpu_mlp_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zt_gpu_mlp_t *self = *self_p;
    cudaSetDevice(self->device);
    cudaFree(self->params);
    cudaFree(self->grads);
    for (int a = 0; a < 3; a++)
        cudaFree(self->state[a]);
    for (int l = 0; l < self->n; l++) {
        cudaFree(self->act[l]);
        cudaFree(self->delta[l]);
    }
    cudaFree(self->x);
    cudaFree(self->y);
    cudaFree(self->order);
    cudaFree(self->loss);
    if (self->blas)
        cublasDestroy(self->blas);
    if (self->stream)
        cudaStreamDestroy(self->stream);
    free(self);
    *self_p = NULL;
}

static int s_copy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t st)
{
    cudaError_t e;
    ZT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, st), e, fail);
    ZT_CUDA_CHECK(cudaStreamSynchronize(st), e, fail);
    return 0;
fail:
    return -1;
}

extern "C" int zt_gpu_mlp_set_params(zt_gpu_mlp_t *s, const float *h)
{
    cudaSetDevice(s->device);
    return s_copy(s->params, h, sizeof(float) * (size_t) s->nparams, cudaMemcpyHostToDevice, s->stream);
}
extern "C" int zt_gpu_mlp_get_params(zt_gpu_mlp_t *s, float *h)
{
    cudaSetDevice(s->device);
    return s_copy(h, s->params, sizeof(float) * (size_t) s->nparams, cudaMemcpyDeviceToHost, s->stream);
}
extern "C" int zt_gpu_mlp_get_grads(zt_gpu_mlp_t *s, float *h)
{
    cudaSetDevice(s->device);
    return s_copy(h, s->grads, sizeof(float) * (size_t) s->nparams, cudaMemcpyDeviceToHost, s->stream);
}
extern "C" int zt_gpu_mlp_set_grads(zt_gpu_mlp_t *s, const float *h)
{
    cudaSetDevice(s->device);
    return s_copy(s->grads, h, sizeof(float) * (size_t) s->nparams, cudaMemcpyHostToDevice, s->stream);
}
extern "C" int zt_gpu_mlp_set_order(zt_gpu_mlp_t *s, const int *order, int n)
{
    cudaSetDevice(s->device);
    if (n > s->n_examples)
        return -1;
    return s_copy(s->order, order, sizeof(int) * (size_t) n, cudaMemcpyHostToDevice, s->stream);
}

/* Enqueues the forward pass on order[first .. first+B) and the loss
 * gradient (divided by denom, the whole batch this share belongs to); the
 * loss is added to the device's accumulator. */
static void s_forward(zt_gpu_mlp_t *s, int first, int B, float denom)
{
    cudaSetDevice(s->device);
    const float one = 1, zero = 0;
    uint8_t *labels = (uint8_t *) s->delta[0]; /* the input layer's delta is unused: labels live there */
    dim3 g((unsigned) ((s->dim + 255) / 256), (unsigned) B);
    k_gather<<<g, 256, 0, s->stream>>>(s->x, s->y, s->order, first, B, s->dim, s->act[0], labels);
    for (int l = 0; l + 1 < s->n; l++) {
        int din = s->sizes[l], dout = s->sizes[l + 1];
        /* act[l+1] (B x dout) = act[l] (B x din) * W (din x dout): C^T = W^T A^T */
        cublasSgemm(s->blas, CUBLAS_OP_N, CUBLAS_OP_N, dout, B, din, &one, s->params + s->off[2 * l], dout,
                    s->act[l], din, &zero, s->act[l + 1], dout);
        size_t cnt = (size_t) B * dout;
        k_bias_act<<<(unsigned) ((cnt + 255) / 256), 256, 0, s->stream>>>(
            s->act[l + 1], s->params + s->off[2 * l + 1], B, dout, l + 2 < s->n);
    }
    int L = s->n - 1, k = s->sizes[L];
    k_softmax_ce<<<(unsigned) ((B + 127) / 128), 128, 0, s->stream>>>(s->act[L], labels, B, k, denom,
                                                                      s->delta[L], s->loss);
}

/* Enqueues layer l's backward step: its weight and bias gradients, and the
 * gradient flowing into layer l (none for the input). */
static void s_backward_layer(zt_gpu_mlp_t *s, int l, int B)
{
    cudaSetDevice(s->device);
    const float one = 1, zero = 0;
    int din = s->sizes[l], dout = s->sizes[l + 1];
    float *dz = s->delta[l + 1];
    /* dW (din x dout) = act[l]^T dz: dW^T = dz^T act[l] */
    cublasSgemm(s->blas, CUBLAS_OP_N, CUBLAS_OP_T, dout, din, B, &one, dz, dout, s->act[l], din, &zero,
                s->grads + s->off[2 * l], dout);
    k_colsum<<<(unsigned) ((dout + 127) / 128), 128, 0, s->stream>>>(dz, B, dout, s->grads + s->off[2 * l + 1]);
    if (l > 0) {
        /* da (B x din) = dz (B x dout) W^T: da^T = W dz^T */
        cublasSgemm(s->blas, CUBLAS_OP_T, CUBLAS_OP_N, din, B, dout, &one, s->params + s->off[2 * l], dout, dz,
                    dout, &zero, s->delta[l], din);
        size_t cnt = (size_t) B * din;
        k_relu_back<<<(unsigned) ((cnt + 255) / 256), 256, 0, s->stream>>>(s->delta[l], s->act[l], cnt);
    }
}

/* Layer l's parameters (weights then bias) are contiguous. */
static int64_t s_layer_off(const zt_gpu_mlp_t *s, int l) { return s->off[2 * l]; }
static int64_t s_layer_count(const zt_gpu_mlp_t *s, int l)
{
    return (int64_t) s->sizes[l] * s->sizes[l + 1] + s->sizes[l + 1];
}

/* Reads and resets the loss accumulator (synchronises the stream). */
static float s_take_loss(zt_gpu_mlp_t *s)
{
    cudaSetDevice(s->device);
    float loss = -1;
    cudaError_t e;
    ZT_CUDA_CHECK(cudaMemcpyAsync(&loss, s->loss, sizeof loss, cudaMemcpyDeviceToHost, s->stream), e, fail);
    ZT_CUDA_CHECK(cudaMemsetAsync(s->loss, 0, sizeof(float), s->stream), e, fail);
    ZT_CUDA_CHECK(cudaStreamSynchronize(s->stream), e, fail);
    return loss;
fail:
    return -1;
}

extern "C" float zt_gpu_mlp_train_batch(zt_gpu_mlp_t *s, int first, int B)
{
    if (B > s->batch_cap || B < 1)
        return -1;
    if (s_take_loss(s) < 0) /* starts from zero */
        return -1;
    s_forward(s, first, B, (float) B);
    for (int l = s->n - 2; l >= 0; l--)
        s_backward_layer(s, l, B);
    return s_take_loss(s);
}

/* Optimizer state in zt_optim's layout (the table's state arrays). The
 * last array of a row with a step count (Adam) is kept here as one number,
 * s->step, since every element of a replica's model takes every step; the
 * others live on the device. */
static int s_device_arrays(zt_opt_kind_t kind)
{
    return zt_opt_state_arrays(kind) - (zt_opt_has_step(kind) ? 1 : 0);
}

static int s_state_alloc(zt_gpu_mlp_t *s, const zt_opt_t *o)
{
    if ((unsigned) o->kind >= ZT_OPT_COUNT) {
        s_fail("optimizer", "not a row of the optimizer table");
        return -1;
    }
    size_t n = (size_t) s->nparams;
    float *h = NULL;
    cudaError_t e = cudaSuccess;
    for (int a = 0; a < s_device_arrays(o->kind); a++) {
        if (s->state[a])
            continue;
        ZT_CUDA_CHECK(cudaMalloc(&s->state[a], sizeof(float) * n), e, fail);
        if (o->kind == ZT_OPT_ADAGRAD) { /* the accumulator starts where the options say */
            if (!h && !(h = (float *) malloc(sizeof(float) * n))) {
                s_fail("optimizer state", "out of host memory");
                return -1;
            }
            for (size_t i = 0; i < n; i++)
                h[i] = o->initial_accumulator;
            if (s_copy(s->state[a], h, sizeof(float) * n, cudaMemcpyHostToDevice, s->stream))
                goto fail;
        }
        else
            ZT_CUDA_CHECK(cudaMemsetAsync(s->state[a], 0, sizeof(float) * n, s->stream), e, fail);
    }
    free(h);
    return 0;
fail:
    free(h);
    return -1;
}

extern "C" int zt_gpu_mlp_get_state(zt_gpu_mlp_t *s, const zt_opt_t *o, float *const *host)
{
    cudaSetDevice(s->device);
    if (s_state_alloc(s, o))
        return -1;
    size_t n = (size_t) s->nparams;
    for (int a = 0; a < s_device_arrays(o->kind); a++)
        if (s_copy(host[a], s->state[a], sizeof(float) * n, cudaMemcpyDeviceToHost, s->stream))
            return -1;
    if (zt_opt_has_step(o->kind))
        for (size_t i = 0; i < n; i++)
            host[zt_opt_state_arrays(o->kind) - 1][i] = s->step;
    return 0;
}

extern "C" int zt_gpu_mlp_set_state(zt_gpu_mlp_t *s, const zt_opt_t *o, const float *const *host)
{
    cudaSetDevice(s->device);
    if (s_state_alloc(s, o))
        return -1;
    size_t n = (size_t) s->nparams;
    for (int a = 0; a < s_device_arrays(o->kind); a++)
        if (s_copy(s->state[a], host[a], sizeof(float) * n, cudaMemcpyHostToDevice, s->stream))
            return -1;
    if (zt_opt_has_step(o->kind))
        s->step = n ? host[zt_opt_state_arrays(o->kind) - 1][0] : 0;
    return 0;
}

static int s_apply_enqueue(zt_gpu_mlp_t *s, const zt_opt_t *o)
{
    size_t n = (size_t) s->nparams;
    cudaError_t e;
    s->step += 1;
    k_opt<<<(unsigned) ((n + 255) / 256), 256, 0, s->stream>>>(*o, s->params, s->state[0], s->state[1],
                                                               s->grads, n, s->step);
    ZT_CUDA_CHECK(cudaGetLastError(), e, fail);
    return 0;
fail:
    return -1;
}

extern "C" int zt_gpu_mlp_apply(zt_gpu_mlp_t *s, const zt_opt_t *o)
{
    cudaError_t e;
    cudaSetDevice(s->device);
    if (s_state_alloc(s, o) || s_apply_enqueue(s, o))
        return -1;
    ZT_CUDA_CHECK(cudaStreamSynchronize(s->stream), e, fail);
    return 0;
fail:
    return -1;
}

extern "C" int zt_gpu_pin(void *host, size_t bytes)
{
    cudaError_t e;
    ZT_CUDA_CHECK(cudaHostRegister(host, bytes, cudaHostRegisterDefault), e, fail);
    return 0;
fail:
    return -1;
}

extern "C" void zt_gpu_unpin(void *host)
{
    cudaHostUnregister(host);
}

/* ------------------------------------------------------------ NCCL */

struct zt_gpu_group_t {
    int n;                      /* devices (ranks) */
    zt_gpu_mlp_t **mlp;         /* one model per device */
    ncclComm_t *comm;           /* one communicator per device */
    cudaStream_t copy;          /* device 0: gradients down to the host */
    cudaEvent_t reduced[MAX_LAYERS], down[MAX_LAYERS]; /* per layer, device 0 */
    int dev0;                   /* device 0's CUDA ordinal */
};


extern "C" zt_gpu_group_t *zt_gpu_group_new(zt_gpu_mlp_t **mlps, int n, char *err, size_t errlen)
{
    if (n < 1 || n > 64) {
        snprintf(err, errlen, "%d GPUs: between 1 and 64 supported", n);
        return NULL;
    }
    zt_gpu_group_t *g = (zt_gpu_group_t *) calloc(1, sizeof *g);
    g->n = n;
    g->mlp = (zt_gpu_mlp_t **) calloc((size_t) n, sizeof *g->mlp);
    int *devs = (int *) malloc(sizeof(int) * (size_t) n);
    for (int i = 0; i < n; i++) {
        g->mlp[i] = mlps[i];
        devs[i] = mlps[i]->device;
    }
    g->dev0 = devs[0];
    g->comm = (ncclComm_t *) calloc((size_t) n, sizeof *g->comm);
    ncclResult_t r;
    cudaError_t e;
    ZT_NCCL_CHECK(ncclCommInitAll(g->comm, n, devs), r, no_comm);
    free(devs);
    cudaSetDevice(g->mlp[0]->device);
    ZT_CUDA_CHECK(cudaStreamCreateWithFlags(&g->copy, cudaStreamNonBlocking), e, fail);
    for (int l = 0; l + 1 < g->mlp[0]->n; l++) {
        ZT_CUDA_CHECK(cudaEventCreateWithFlags(&g->reduced[l], cudaEventDisableTiming), e, fail);
        ZT_CUDA_CHECK(cudaEventCreateWithFlags(&g->down[l], cudaEventDisableTiming), e, fail);
    }
    return g;
no_comm:
    free(devs);
    free(g->comm);
    g->comm = NULL;
fail: /* the models stay the caller's */
    snprintf(err, errlen, "%d GPUs: %s", n, zt_gpu_last_error());
    for (int i = 0; i < n; i++)
        g->mlp[i] = NULL;
    zt_gpu_group_destroy(&g);
    return NULL;
}

extern "C" void zt_gpu_group_destroy(zt_gpu_group_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zt_gpu_group_t *g = *self_p;
    if (g->copy || g->reduced[0]) {
        cudaSetDevice(g->dev0);
        for (int l = 0; l < MAX_LAYERS; l++) {
            if (g->reduced[l])
                cudaEventDestroy(g->reduced[l]);
            if (g->down[l])
                cudaEventDestroy(g->down[l]);
        }
        if (g->copy)
            cudaStreamDestroy(g->copy);
    }
    for (int i = 0; g->comm && i < g->n; i++)
        ncclCommDestroy(g->comm[i]);
    for (int i = 0; i < g->n; i++)
        zt_gpu_mlp_destroy(&g->mlp[i]);
    free(g->comm);
    free(g->mlp);
    free(g);
    *self_p = NULL;
}

extern "C" int zt_gpu_group_size(zt_gpu_group_t *g) { return g->n; }
extern "C" zt_gpu_mlp_t *zt_gpu_group_mlp(zt_gpu_group_t *g, int i) { return g->mlp[i]; }

extern "C" int zt_gpu_group_allreduce(zt_gpu_group_t *g, float **bufs, size_t count)
{
    ncclResult_t r;
    cudaError_t e;
    ZT_NCCL_CHECK(ncclGroupStart(), r, fail);
    for (int i = 0; i < g->n; i++)
        ncclAllReduce(bufs[i], bufs[i], count, ncclFloat, ncclSum, g->comm[i], g->mlp[i]->stream);
    ZT_NCCL_CHECK(ncclGroupEnd(), r, fail);
    for (int i = 0; i < g->n; i++) {
        cudaSetDevice(g->mlp[i]->device);
        ZT_CUDA_CHECK(cudaStreamSynchronize(g->mlp[i]->stream), e, fail);
    }
    return 0;
fail:
    return -1;
}

extern "C" int zt_gpu_group_allreduce_grads(zt_gpu_group_t *g)
{
    float *bufs[64];
    for (int i = 0; i < g->n; i++)
        bufs[i] = g->mlp[i]->grads;
    return zt_gpu_group_allreduce(g, bufs, (size_t) g->mlp[0]->nparams);
}

extern "C" int zt_gpu_group_set_order(zt_gpu_group_t *g, const int *order, int n)
{
    for (int d = 0; d < g->n; d++)
        if (zt_gpu_mlp_set_order(g->mlp[d], order, n))
            return -1;
    return 0;
}

/* One step's forward and backward, enqueued (nothing waits here). The batch
 * is split between the devices; going down the layers, as soon as a layer's
 * gradients exist on every device they are summed with NCCL: reduced onto
 * device 0 and copied from there into `host` (pinned) on a copy stream, or
 * all-reduced in place when host is NULL. The copies of one layer overlap
 * the backward pass of the next and, on the host side, the network: see
 * zt_gpu_group_wait_layer. */
extern "C" int zt_gpu_group_step(zt_gpu_group_t *g, int first, int B, float *host)
{
    zt_gpu_mlp_t *m0 = g->mlp[0];
    cudaError_t e;
    ncclResult_t r;
    if (B < 1 || B > m0->batch_cap * g->n) {
        s_fail("step", "the batch is empty or larger than the devices hold");
        return -1;
    }
    int at = first, shares[64];
    for (int d = 0; d < g->n; d++) {
        shares[d] = B / g->n + (d < B % g->n);
        if (shares[d] > g->mlp[d]->batch_cap) {
            s_fail("step", "a device's share is larger than its batch");
            return -1;
        }
        if (shares[d] > 0)
            s_forward(g->mlp[d], at, shares[d], (float) B);
        at += shares[d];
    }
    for (int l = m0->n - 2; l >= 0; l--) {
        int64_t off = s_layer_off(m0, l), cnt = s_layer_count(m0, l);
        for (int d = 0; d < g->n; d++) {
            if (shares[d] > 0)
                s_backward_layer(g->mlp[d], l, shares[d]);
            else
                ZT_CUDA_CHECK(cudaMemsetAsync(g->mlp[d]->grads + off, 0, sizeof(float) * (size_t) cnt,
                                              g->mlp[d]->stream), e, fail);
        }
        ZT_NCCL_CHECK(ncclGroupStart(), r, fail);
        for (int d = 0; d < g->n; d++) {
            float *p = g->mlp[d]->grads + off;
            if (host)
                ncclReduce(p, p, (size_t) cnt, ncclFloat, ncclSum, 0, g->comm[d], g->mlp[d]->stream);
            else
                ncclAllReduce(p, p, (size_t) cnt, ncclFloat, ncclSum, g->comm[d], g->mlp[d]->stream);
        }
        ZT_NCCL_CHECK(ncclGroupEnd(), r, fail);
        if (host) {
            cudaSetDevice(m0->device);
            ZT_CUDA_CHECK(cudaEventRecord(g->reduced[l], m0->stream), e, fail);
            ZT_CUDA_CHECK(cudaStreamWaitEvent(g->copy, g->reduced[l], 0), e, fail);
            ZT_CUDA_CHECK(cudaMemcpyAsync(host + off, m0->grads + off, sizeof(float) * (size_t) cnt,
                                          cudaMemcpyDeviceToHost, g->copy), e, fail);
            ZT_CUDA_CHECK(cudaEventRecord(g->down[l], g->copy), e, fail);
        }
    }
    return 0;
fail:
    return -1;
}

extern "C" int zt_gpu_group_wait_layer(zt_gpu_group_t *g, int layer)
{
    cudaError_t e;
    if (layer < 0 || layer + 1 >= g->mlp[0]->n) {
        s_fail("wait_layer", "no such layer");
        return -1;
    }
    cudaSetDevice(g->mlp[0]->device);
    ZT_CUDA_CHECK(cudaEventSynchronize(g->down[layer]), e, fail);
    return 0;
fail:
    return -1;
}

/* host (pinned) -> device 0 -> every device by NCCL broadcast. */
static int s_up(zt_gpu_group_t *g, bool params, const float *host)
{
    zt_gpu_mlp_t *m0 = g->mlp[0];
    size_t n = (size_t) m0->nparams;
    cudaError_t e;
    ncclResult_t r;
    cudaSetDevice(m0->device);
    float *dst0 = params ? m0->params : m0->grads;
    ZT_CUDA_CHECK(cudaMemcpyAsync(dst0, host, sizeof(float) * n, cudaMemcpyHostToDevice, m0->stream), e, fail);
    if (g->n == 1)
        return 0;
    ZT_NCCL_CHECK(ncclGroupStart(), r, fail);
    for (int d = 0; d < g->n; d++) {
        float *p = params ? g->mlp[d]->params : g->mlp[d]->grads;
        ncclBroadcast(p, p, n, ncclFloat, 0, g->comm[d], g->mlp[d]->stream);
    }
    ZT_NCCL_CHECK(ncclGroupEnd(), r, fail);
    return 0;
fail:
    return -1;
}

static int s_sync_all(zt_gpu_group_t *g)
{
    cudaError_t e;
    for (int d = 0; d < g->n; d++) {
        cudaSetDevice(g->mlp[d]->device);
        ZT_CUDA_CHECK(cudaStreamSynchronize(g->mlp[d]->stream), e, fail);
    }
    return 0;
fail:
    return -1;
}

extern "C" int zt_gpu_group_apply(zt_gpu_group_t *g, const float *host, const zt_opt_t *o)
{
    if (host && s_up(g, false, host))
        return -1;
    for (int d = 0; d < g->n; d++) {
        cudaSetDevice(g->mlp[d]->device);
        if (s_state_alloc(g->mlp[d], o) || s_apply_enqueue(g->mlp[d], o))
            return -1;
    }
    return s_sync_all(g);
}

extern "C" int zt_gpu_group_set_params(zt_gpu_group_t *g, const float *host)
{
    if (s_up(g, true, host))
        return -1;
    return s_sync_all(g);
}

extern "C" int zt_gpu_group_get_params(zt_gpu_group_t *g, float *host)
{
    return zt_gpu_mlp_get_params(g->mlp[0], host);
}

extern "C" int zt_gpu_group_get_state(zt_gpu_group_t *g, const zt_opt_t *o, float *const *host)
{
    return zt_gpu_mlp_get_state(g->mlp[0], o, host);
}

extern "C" int zt_gpu_group_set_state(zt_gpu_group_t *g, const zt_opt_t *o, const float *const *host)
{
    for (int d = 0; d < g->n; d++)
        if (zt_gpu_mlp_set_state(g->mlp[d], o, host))
            return -1;
    return 0;
}

extern "C" float zt_gpu_group_take_loss(zt_gpu_group_t *g)
{
    float sum = 0;
    for (int d = 0; d < g->n; d++) {
        float l = s_take_loss(g->mlp[d]);
        if (l < 0)
            return -1;
        sum += l;
    }
    return sum;
}

/* The module's one exported symbol: the table the loader (zt_gpu_load.c)
 * calls through. Everything else here is hidden. */
#include "zt_gpu_api.h"
extern "C" __attribute__((visibility("default"))) const zt_gpu_api_t *zt_gpu_module_api(void)
{
    static zt_gpu_api_t t;
    t.version = ZT_GPU_API_VERSION;
#define ZT_GPU_API_SET(ret, name, ...) t.name = name;
    ZT_GPU_API_PLAIN(ZT_GPU_API_SET)
    ZT_GPU_API_SPECIAL(ZT_GPU_API_SET)
#undef ZT_GPU_API_SET
    return &t;
}
