#include "zt_compute.h"
#include "base/zt_env.h"
#include "ztrain/ztrain.h"
#include <stdlib.h>
#include <string.h>

/* One model per visible GPU, grouped; NULL after logging why. */
static zt_gpu_group_t *s_gpu_group(const int *sizes, int nsizes, int cap, const zt_dataset_t *d,
                                   const char *device)
{
    char err[512] = "";
    int ndev = zt_cuda_devices(), want = ndev > 0 ? ndev : 1;
    zt_gpu_mlp_t *models[64] = { 0 };
    int made = 0;
    zt_gpu_group_t *g = NULL;
    for (; made < want && made < 64; made++)
        if (!(models[made] = zt_gpu_mlp_new_on(made, sizes, nsizes, cap, d->x, d->y, d->n, d->dim, err,
                                               sizeof err)))
            break;
    if (made == want)
        g = zt_gpu_group_new(models, made, err, sizeof err);
    if (!g) {
        for (int i = 0; i < made; i++)
            zt_gpu_mlp_destroy(&models[i]);
        zt_error("--device=%s: %s", device, err);
        return NULL;
    }
    const char *cvd = zt_env_get(ZT_ENV_CUDA_VISIBLE_DEVICES);
    zt_info("forward and backward on %d GPU%s (CUDA_VISIBLE_DEVICES=%s), NCCL between them", made,
            made == 1 ? "" : "s", cvd ? cvd : "");
    return g;
}

int zt_compute_init(zt_compute_t *c, const int *sizes, int nsizes, int batch, const zt_dataset_t *data,
                    const char *device)
{
    memset(c, 0, sizeof *c);
    c->data = data;
    int cap = batch < 256 ? 256 : batch;
    c->mlp = zt_mlp_new(sizes, nsizes, cap);
    c->bx = malloc((size_t) batch * (size_t) data->dim);
    c->by = malloc((size_t) batch);
    const char *cvd = zt_env_get(ZT_ENV_CUDA_VISIBLE_DEVICES);
    bool want_gpu = !strcmp(device, "cuda") ||
                    (!strcmp(device, "auto") && cvd && *cvd && zt_cuda_devices() > 0);
    if (!want_gpu)
        return 0;
    if (!(c->gpu = s_gpu_group(sizes, nsizes, cap, data, device)))
        return -1;
    /* the host side of the exchange: page-locked, so that the copies run
     * at full speed and overlap the network */
    size_t bytes = sizeof(float) * (size_t) zt_mlp_nparams(c->mlp);
    zt_gpu_pin(zt_mlp_params(c->mlp), bytes);
    zt_gpu_pin(zt_mlp_grads(c->mlp), bytes);
    return 0;
}

void zt_compute_fini(zt_compute_t *c)
{
    if (c->gpu) {
        zt_gpu_group_destroy(&c->gpu);
        zt_gpu_unpin(zt_mlp_params(c->mlp));
        zt_gpu_unpin(zt_mlp_grads(c->mlp));
    }
    zt_mlp_destroy(&c->mlp);
    free(c->bx);
    free(c->by);
    c->bx = c->by = NULL;
}

int zt_compute_epoch(zt_compute_t *c, const int *order, int n)
{
    return c->gpu ? zt_gpu_group_set_order(c->gpu, order, n) : 0;
}

int zt_compute_step(zt_compute_t *c, const int *order, int first, int B, bool to_host, float *loss)
{
    *loss = 0;
    if (c->gpu) /* a GPU gathers its batch itself; the loss stays there until taken */
        return zt_gpu_group_step(c->gpu, first, B, to_host ? zt_mlp_grads(c->mlp) : NULL);
    const zt_dataset_t *d = c->data;
    for (int k = 0; k < B; k++) {
        int idx = order[first + k];
        memcpy(c->bx + (size_t) k * d->dim, d->x + (size_t) idx * d->dim, (size_t) d->dim);
        c->by[k] = d->y[idx];
    }
    *loss = zt_mlp_train_batch(c->mlp, c->bx, c->by, B);
    return 0;
}

int zt_compute_wait_tensor(zt_compute_t *c, int t)
{
    /* tensors go weights, bias per layer: a layer lands with its bias */
    return c->gpu && t % 2 == 1 ? zt_gpu_group_wait_layer(c->gpu, t / 2) : 0;
}

double zt_compute_take_loss(zt_compute_t *c, double sum)
{
    return c->gpu ? zt_gpu_group_take_loss(c->gpu) : sum;
}

int zt_compute_upload(zt_compute_t *c, const zt_opt_t *opt, float *const *state)
{
    if (!c->gpu)
        return 0;
    if (zt_gpu_group_set_params(c->gpu, zt_mlp_params(c->mlp)))
        return -1;
    return opt ? zt_gpu_group_set_state(c->gpu, opt, (const float *const *) state) : 0;
}

int zt_compute_download(zt_compute_t *c, const zt_opt_t *opt, float *const *state)
{
    if (!c->gpu)
        return 0;
    if (zt_gpu_group_get_params(c->gpu, zt_mlp_params(c->mlp)))
        return -1;
    return opt ? zt_gpu_group_get_state(c->gpu, opt, state) : 0;
}

int zt_compute_apply(zt_compute_t *c, const zt_opt_t *opt, float **state, bool from_host)
{
    if (c->gpu) /* the optimizer step stays on the devices */
        return zt_gpu_group_apply(c->gpu, from_host ? zt_mlp_grads(c->mlp) : NULL, opt);
    zt_opt_apply(opt, zt_mlp_params(c->mlp), state, zt_mlp_grads(c->mlp), 1.0f, zt_mlp_nparams(c->mlp));
    return 0;
}
