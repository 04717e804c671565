/* The GPU path against the CPU path: the same model, data and steps give
 * the same loss, gradients and parameters within 1e-4 relative. Exits 77
 * (skipped) when there is no CUDA device, or the build has no CUDA. */
#include "zt_gpu.h"
#include "zt_mlp.h"
#include "state/zt_optim.h"
#include "base/zt_shard.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int s_close(const char *what, const float *a, const float *b, int64_t n, double tol)
{
    double worst = 0;
    int64_t at = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double) a[i] - b[i]) / (1e-3 + fabs((double) b[i]));
        if (d > worst) {
            worst = d;
            at = i;
        }
    }
    printf("%-24s worst relative difference %.2e at %lld (gpu %g, cpu %g)\n", what, worst, (long long) at,
           a[at], b[at]);
    return worst <= tol;
}

/* The fixture every case shares: the data, the CPU model and its
 * parameters, the order the batches are drawn in. */
static const int sizes[4] = { 784, 256, 128, 10 }, n = 2048, B = 128;
static uint8_t *x, *y, *bx, by[128];
static zt_mlp_t *cpu;
static float *p, *g, *gp;
static int64_t np;
static int *order;
static char err[256];

/* Batch `first` of the order into bx, by. */
static void s_batch(int first)
{
    for (int k = 0; k < B; k++) {
        memcpy(bx + (size_t) k * 784, x + (size_t) order[first + k] * 784, 784);
        by[k] = y[order[first + k]];
    }
}

static void s_fixture(void)
{
    x = malloc((size_t) n * 784);
    y = malloc((size_t) n);
    unsigned seed = 5;
    for (int i = 0; i < n * 784; i++)
        x[i] = (uint8_t) (rand_r(&seed) % 256);
    for (int i = 0; i < n; i++)
        y[i] = (uint8_t) (rand_r(&seed) % 10);
    cpu = zt_mlp_new(sizes, 4, B);
    np = zt_mlp_nparams(cpu);
    p = zt_mlp_params(cpu);
    for (int t = 0; t < zt_mlp_tensors(cpu); t++)
        for (int64_t i = zt_mlp_tensor_offset(cpu, t); i < zt_mlp_tensor_offset(cpu, t) + zt_mlp_tensor_numel(cpu, t); i++)
            p[i] = zt_init_uniform(1, i, zt_mlp_tensor_init_scale(cpu, t) + (t % 2 ? 0.05f : 0));
    order = malloc(sizeof(int) * (size_t) n);
    for (int i = 0; i < n; i++)
        order[i] = (i * 7) % n;
    bx = malloc((size_t) B * 784);
    g = malloc(sizeof(float) * (size_t) np);
    gp = malloc(sizeof(float) * (size_t) np);
}

/* 50 Adam steps on the device and on the CPU: the same first loss and
 * gradients, the same parameters after. Returns the device model, trained,
 * with its optimizer in *opt. */
static zt_gpu_mlp_t *s_case_train(int *ok, zt_opt_t *opt)
{
    zt_gpu_mlp_t *gpu = zt_gpu_mlp_new(sizes, 4, B, x, y, n, 784, err, sizeof err);
    if (!gpu) {
        printf("gpu: %s\n", err);
        *ok = 0;
        return NULL;
    }
    zt_gpu_mlp_set_params(gpu, p);
    zt_gpu_mlp_set_order(gpu, order, n);
    zt_opt_defaults(opt);
    opt->kind = ZT_OPT_ADAM;
    opt->lr = 0.001f;
    float *st[3];
    for (int a = 0; a < 3; a++)
        st[a] = calloc((size_t) np, sizeof(float));
    for (int step = 0; step < 50; step++) {
        int first = (step * B) % (n - B);
        s_batch(first);
        float lc = zt_mlp_train_batch(cpu, bx, by, B);
        float lg = zt_gpu_mlp_train_batch(gpu, first, B);
        if (step == 0) {
            printf("loss                     cpu %.6f gpu %.6f\n", lc, lg);
            *ok &= fabsf(lc - lg) <= 1e-4f * fabsf(lc);
            zt_gpu_mlp_get_grads(gpu, g);
            *ok &= s_close("gradients", g, zt_mlp_grads(cpu), np, 1e-3);
        }
        zt_opt_apply(opt, p, st, zt_mlp_grads(cpu), 1.0f, np);
        zt_gpu_mlp_apply(gpu, opt);
    }
    for (int a = 0; a < 3; a++)
        free(st[a]);
    zt_gpu_mlp_get_params(gpu, gp);
    *ok &= s_close("parameters after 50 steps", gp, p, np, 1e-3);
    return gpu;
}

/* Optimizer state round trip (checkpoints): a copy made from the state read
 * back takes the same next step, bitwise; and an optimizer that is not a
 * row of the table is refused, with the reason. */
static void s_case_state(zt_gpu_mlp_t *gpu, const zt_opt_t *opt, int *ok)
{
    float *gs[3], *p2 = malloc(sizeof(float) * (size_t) np), *p3 = malloc(sizeof(float) * (size_t) np);
    for (int a = 0; a < 3; a++)
        gs[a] = malloc(sizeof(float) * (size_t) np);
    zt_gpu_mlp_get_state(gpu, opt, gs);
    *ok &= gs[2][0] == 50.0f;
    zt_gpu_mlp_t *twin = zt_gpu_mlp_new(sizes, 4, B, x, y, n, 784, err, sizeof err);
    zt_gpu_mlp_set_params(twin, gp);
    zt_gpu_mlp_set_state(twin, opt, (const float *const *) gs);
    zt_gpu_mlp_set_order(twin, order, n);
    zt_gpu_mlp_train_batch(gpu, 0, B);
    zt_gpu_mlp_train_batch(twin, 0, B);
    zt_gpu_mlp_apply(gpu, opt);
    zt_gpu_mlp_apply(twin, opt);
    zt_gpu_mlp_get_params(gpu, p2);
    zt_gpu_mlp_get_params(twin, p3);
    int same = !memcmp(p2, p3, sizeof(float) * (size_t) np);
    printf("optimizer state round trip: %s\n", same ? "same next step" : "DIFFERENT");
    *ok &= same;
    zt_opt_t bad;
    zt_opt_defaults(&bad);
    bad.kind = ZT_OPT_COUNT;
    int refused = zt_gpu_mlp_apply(twin, &bad) == -1 && strstr(zt_gpu_last_error(), "optimizer");
    printf("unknown optimizer: %s (%s)\n", refused ? "refused" : "ACCEPTED", zt_gpu_last_error());
    *ok &= refused;
    zt_gpu_mlp_destroy(&twin);
    for (int a = 0; a < 3; a++)
        free(gs[a]);
    free(p2);
    free(p3);
}

/* Every row of the optimizer table: three steps on the device from the
 * same gradients land where the CPU update lands. */
static void s_case_optimizers(int *ok)
{
    float *p2 = malloc(sizeof(float) * (size_t) np), *p3 = malloc(sizeof(float) * (size_t) np);
    for (int k = 0; k < ZT_OPT_COUNT; k++) {
        zt_opt_t o;
        zt_opt_defaults(&o);
        o.kind = (zt_opt_kind_t) k;
        o.lr = 0.01f;
        o.initial_accumulator = 0.05f;
        zt_gpu_mlp_t *m = zt_gpu_mlp_new(sizes, 4, B, x, y, n, 784, err, sizeof err);
        zt_gpu_mlp_set_params(m, p);
        memcpy(p2, p, sizeof(float) * (size_t) np);
        float *ks[3];
        for (int a = 0; a < 3; a++)
            ks[a] = malloc(sizeof(float) * (size_t) np);
        zt_opt_init_state(&o, ks, np);
        for (int step = 0; step < 3; step++) {
            zt_gpu_mlp_set_grads(m, zt_mlp_grads(cpu));
            *ok &= zt_gpu_mlp_apply(m, &o) == 0;
            zt_opt_apply(&o, p2, ks, zt_mlp_grads(cpu), 1.0f, np);
        }
        zt_gpu_mlp_get_params(m, p3);
        char what[64];
        snprintf(what, sizeof what, "%s: 3 steps, CPU and GPU", zt_opt_kind_name(o.kind));
        *ok &= s_close(what, p3, p2, np, 1e-4);
        for (int a = 0; a < 3; a++)
            free(ks[a]);
        zt_gpu_mlp_destroy(&m);
    }
    free(p2);
    free(p3);
}

/* NCCL over every visible GPU (one rank with one GPU): device d's
 * gradients set to d + 1 everywhere sum to n(n+1)/2. Returns the group. */
static zt_gpu_group_t *s_case_nccl(int *ok)
{
    int ndev = zt_cuda_devices();
    zt_gpu_mlp_t *models[16];
    for (int d = 0; d < ndev && d < 16; d++) {
        models[d] = zt_gpu_mlp_new_on(d, sizes, 4, B, x, y, n, 784, err, sizeof err);
        for (int64_t i = 0; i < np; i++)
            g[i] = (float) (d + 1);
        zt_gpu_mlp_set_grads(models[d], g);
    }
    zt_gpu_group_t *group = zt_gpu_group_new(models, ndev < 16 ? ndev : 16, err, sizeof err);
    if (!group) {
        printf("nccl: %s\n", err);
        *ok = 0;
        return NULL;
    }
    zt_gpu_group_allreduce_grads(group);
    float want = (float) (ndev * (ndev + 1) / 2);
    int nccl_ok = 1;
    for (int d = 0; d < zt_gpu_group_size(group); d++) {
        zt_gpu_mlp_get_grads(zt_gpu_group_mlp(group, d), g);
        for (int64_t i = 0; i < np; i++)
            nccl_ok &= g[i] == want;
    }
    printf("nccl all-reduce over %d GPU%s: %s\n", ndev, ndev == 1 ? "" : "s", nccl_ok ? "ok" : "WRONG");
    *ok &= nccl_ok;
    return group;
}

/* The replica's step as the trainer runs it: the batch split over the
 * devices, each layer reduced with NCCL and staged into pinned host memory
 * layer by layer; the staged sum is the CPU's batch gradient, the loss
 * taken is the CPU's loss; then one SGD step from those host gradients on
 * every device. */
static void s_case_group_step(zt_gpu_group_t *group, int *ok)
{
    float *host = malloc(sizeof(float) * (size_t) np);
    *ok &= zt_gpu_pin(host, sizeof(float) * (size_t) np) == 0;
    for (int i = 0; i < np; i++)
        host[i] = NAN;
    zt_gpu_group_set_params(group, p);
    zt_gpu_group_set_order(group, order, n);
    int first = 3 * B;
    s_batch(first);
    float lc = zt_mlp_train_batch(cpu, bx, by, B);
    *ok &= zt_gpu_group_step(group, first, B, host) == 0;
    for (int l = 2; l >= 0; l--)
        *ok &= zt_gpu_group_wait_layer(group, l) == 0;
    float lg = zt_gpu_group_take_loss(group);
    printf("group step loss          cpu %.6f gpu %.6f\n", lc, lg);
    *ok &= fabsf(lc - lg) <= 1e-4f * fabsf(lc);
    *ok &= s_close("staged gradients", host, zt_mlp_grads(cpu), np, 1e-3);
    zt_opt_t sgd;
    zt_opt_defaults(&sgd);
    sgd.kind = ZT_OPT_SGD;
    sgd.lr = 0.5f;
    *ok &= zt_gpu_group_apply(group, host, &sgd) == 0;
    zt_opt_apply(&sgd, p, NULL, host, 1.0f, np);
    for (int d = 0; d < zt_gpu_group_size(group); d++) {
        zt_gpu_mlp_get_params(zt_gpu_group_mlp(group, d), gp);
        *ok &= s_close("params after group apply", gp, p, np, 1e-5);
    }
    zt_gpu_unpin(host);
    free(host);
}

int main(void)
{
    if (zt_cuda_devices() == 0) {
        printf("no CUDA device (or a build without CUDA): skipped\n");
        return 77;
    }
    s_fixture();
    int ok = 1;
    zt_opt_t opt;
    zt_gpu_mlp_t *gpu = s_case_train(&ok, &opt);
    if (!gpu)
        return 1;
    s_case_state(gpu, &opt, &ok);
    s_case_optimizers(&ok);
    zt_gpu_mlp_destroy(&gpu);
    zt_gpu_group_t *group = s_case_nccl(&ok);
    if (!group)
        return 1;
    s_case_group_step(group, &ok);
    zt_gpu_group_destroy(&group);
    zt_mlp_destroy(&cpu);
    printf("%s\n", ok ? "gpu matches cpu" : "GPU AND CPU DIFFER");
    return ok ? 0 : 1;
}
