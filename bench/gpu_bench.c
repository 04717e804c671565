/* GPU figures (run on a machine with a CUDA device; exits 77 without one):
 * host<->device staging bandwidth, pageable and pinned; NCCL all-reduce time
 * over every visible GPU (one rank with one GPU); and the built-in MLP's
 * examples/s on the GPU against the CPU path, same model and batch.
 * bench/gpu_torch_bench.py measures the same model in PyTorch on the GPU.
 *
 *   build/bench/gpu_bench [batch]
 */
#include "zt_gpu.h"
#include "zt_mlp.h"
#include "state/zt_optim.h"
#include "base/zt_util.h"
#include <cblas.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double s_copy_gbs(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind)
{
    cudaMemcpy(dst, src, bytes, kind);
    int64_t t0 = zt_now_us();
    for (int i = 0; i < 10; i++)
        cudaMemcpy(dst, src, bytes, kind);
    cudaDeviceSynchronize();
    return (double) bytes * 10 / ((double) (zt_now_us() - t0) / 1e6) / 1e9;
}

/* Long on purpose: a script of measurements (staging bandwidth, NCCL, the
 * MLP step on the GPU against the CPU, the replica step), each printing its
 * figure right after timing it, read top to bottom as its output is. */
/* Host-to-device and back, 256 MiB, from pageable and pinned memory. */
static void s_staging(void)
{
    size_t bytes = 256u << 20;
    void *dev, *pinned, *pageable = malloc(bytes);
    memset(pageable, 1, bytes);
    cudaMalloc(&dev, bytes);
    cudaMallocHost(&pinned, bytes);
    memset(pinned, 1, bytes);
    printf("staging 256 MiB: host->device pageable %.1f GB/s, pinned %.1f GB/s; device->host pageable "
           "%.1f GB/s, pinned %.1f GB/s\n", s_copy_gbs(dev, pageable, bytes, cudaMemcpyHostToDevice),
           s_copy_gbs(dev, pinned, bytes, cudaMemcpyHostToDevice),
           s_copy_gbs(pageable, dev, bytes, cudaMemcpyDeviceToHost),
           s_copy_gbs(pinned, dev, bytes, cudaMemcpyDeviceToHost));
    cudaFree(dev);
    cudaFreeHost(pinned);
    free(pageable);
}

/* The CPU path's training speed (one core, OpenBLAS): examples/s. */
static double s_cpu_eps(zt_mlp_t *cpu, const uint8_t *x, const uint8_t *y, int n, int B)
{
    openblas_set_num_threads(1);
    uint8_t *bx = malloc((size_t) B * 784), *by = malloc((size_t) B);
    int cpu_steps = 300;
    int64_t t0 = zt_now_us();
    for (int s = 0; s < cpu_steps; s++) {
        memcpy(bx, x + (size_t) ((s * B) % (n - B)) * 784, (size_t) B * 784);
        memcpy(by, y + (s * B) % (n - B), (size_t) B);
        zt_mlp_train_batch(cpu, bx, by, B);
    }
    double cpu_eps = (double) cpu_steps * B / ((double) (zt_now_us() - t0) / 1e6);
    free(bx);
    free(by);
    return cpu_eps;
}

/* Long on purpose: the cases in the order they print, each a few lines of
 * set-up and one timed loop over the same model and data. */
int main(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: gpu_bench [BATCH]\n\nThe built-in MLP's training step on the GPU (examples/s) against the\n"
               "CPU path, at batch BATCH (default 64); bench/gpu_torch_bench.py is the PyTorch peer.\n");
        return 0;
    }
    char *end = NULL;
    long b = argc > 1 ? strtol(argv[1], &end, 10) : 64;
    if (argc > 2 || (argc > 1 && (*end || b < 1 || b > 65536))) {
        fprintf(stderr, "gpu_bench: BATCH must be one whole number from 1 to 65536 (--help)\n");
        return 2;
    }
    int B = (int) b;
    int ndev = zt_cuda_devices();
    if (ndev == 0) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    struct cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    printf("device 0: %s, %d visible\n", prop.name, ndev);
    s_staging();
    /* the MLP, synthetic data of Fashion-MNIST's shape */
    const int sizes[4] = { 784, 256, 128, 10 }, n = 60000;
    uint8_t *x = malloc((size_t) n * 784), *y = malloc((size_t) n);
    unsigned seed = 1;
    for (size_t i = 0; i < (size_t) n * 784; i++)
        x[i] = (uint8_t) (rand_r(&seed) & 255);
    for (int i = 0; i < n; i++)
        y[i] = (uint8_t) (rand_r(&seed) % 10);
    char err[256];
    zt_gpu_mlp_t *models[16];
    for (int d = 0; d < ndev && d < 16; d++)
        models[d] = zt_gpu_mlp_new_on(d, sizes, 4, B, x, y, n, 784, err, sizeof err);
    zt_gpu_group_t *g = zt_gpu_group_new(models, ndev < 16 ? ndev : 16, err, sizeof err);
    if (!g) {
        printf("%s\n", err);
        return 1;
    }
    zt_gpu_mlp_t *m0 = zt_gpu_group_mlp(g, 0);
    zt_mlp_t *cpu = zt_mlp_new(sizes, 4, B);
    zt_gpu_mlp_set_params(m0, zt_mlp_params(cpu));
    int *order = malloc(sizeof(int) * (size_t) n);
    for (int i = 0; i < n; i++)
        order[i] = i;
    zt_gpu_mlp_set_order(m0, order, n);
    /* NCCL all-reduce of the model's gradients (235,146 floats) */
    for (int i = 0; i < 5; i++)
        zt_gpu_group_allreduce_grads(g);
    int64_t t0 = zt_now_us();
    for (int i = 0; i < 100; i++)
        zt_gpu_group_allreduce_grads(g);
    printf("NCCL all-reduce of 0.94 MB over %d rank%s: %.1f us\n", zt_gpu_group_size(g),
           zt_gpu_group_size(g) == 1 ? "" : "s", (double) (zt_now_us() - t0) / 100);
    int steps = 2000;
    zt_opt_t adam;
    zt_opt_defaults(&adam);
    adam.kind = ZT_OPT_ADAM;
    adam.lr = 0.001f;
    t0 = zt_now_us();
    for (int s = 0; s < steps; s++) {
        zt_gpu_mlp_train_batch(m0, (s * B) % (n - B), B);
        zt_gpu_mlp_apply(m0, &adam);
    }
    double gpu_eps = (double) steps * B / ((double) (zt_now_us() - t0) / 1e6);
    double cpu_eps = s_cpu_eps(cpu, x, y, n, B);
    printf("MLP 784-256-128-10, batch %d, Adam: GPU %.0f examples/s, CPU (1 core, OpenBLAS) %.0f "
           "examples/s: %.1fx\n", B, gpu_eps, cpu_eps, gpu_eps / cpu_eps);
    /* The trainer's replica step (group API): alone (NCCL in place), and
     * with the gradient sum staged layer by layer into pinned host memory
     * and the update coming back from it, as for reducers or parameter
     * servers (the network left out). */
    size_t nbytes = sizeof(float) * (size_t) zt_mlp_nparams(cpu);
    float *host = malloc(nbytes);
    memset(host, 0, nbytes);
    zt_gpu_pin(host, nbytes);
    zt_gpu_group_set_order(g, order, n);
    for (int pass = 0; pass < 2; pass++) {
        float *h = pass ? host : NULL;
        t0 = zt_now_us();
        for (int s = 0; s < steps; s++) {
            zt_gpu_group_step(g, (s * B) % (n - B), B, h);
            for (int l = 2; h && l >= 0; l--)
                zt_gpu_group_wait_layer(g, l);
            zt_gpu_group_apply(g, h, &adam);
        }
        double us = (double) (zt_now_us() - t0) / steps;
        printf("replica step, %s: %.1f us (%.0f examples/s)\n",
               pass ? "gradients staged through pinned host memory and back" : "alone on the GPUs", us,
               B / us * 1e6);
    }
    zt_gpu_group_take_loss(g);
    zt_gpu_unpin(host);
    free(host);
    zt_gpu_group_destroy(&g);
    zt_mlp_destroy(&cpu);
    return 0;
}
