/* Without the CUDA toolkit: no devices, and a clear error. */
#include "zt_gpu.h"
#include <stdio.h>

int zt_cuda_devices(void) { return 0; }

zt_gpu_mlp_t *zt_gpu_mlp_new(const int *sizes, int nsizes, int batch_cap, const uint8_t *x,
                             const uint8_t *y, int n, int dim, char *err, size_t errlen)
{
    (void) sizes; (void) nsizes; (void) batch_cap; (void) x; (void) y; (void) n; (void) dim;
    snprintf(err, errlen, "this ztrain was built without CUDA (the toolkit was not found at build "
             "time); rebuild with the CUDA toolkit (ZT_WITH_CUDA=ON) or run with --cpu-only");
    return NULL;
}
void zt_gpu_mlp_destroy(zt_gpu_mlp_t **self_p) { (void) self_p; }
int zt_gpu_mlp_set_params(zt_gpu_mlp_t *s, const float *h) { (void) s; (void) h; return -1; }
int zt_gpu_mlp_get_params(zt_gpu_mlp_t *s, float *h) { (void) s; (void) h; return -1; }
int zt_gpu_mlp_get_grads(zt_gpu_mlp_t *s, float *h) { (void) s; (void) h; return -1; }
int zt_gpu_mlp_set_grads(zt_gpu_mlp_t *s, const float *h) { (void) s; (void) h; return -1; }
int zt_gpu_mlp_set_order(zt_gpu_mlp_t *s, const int *o, int n) { (void) s; (void) o; (void) n; return -1; }
float zt_gpu_mlp_train_batch(zt_gpu_mlp_t *s, int f, int b) { (void) s; (void) f; (void) b; return -1; }
int zt_gpu_mlp_apply(zt_gpu_mlp_t *s, const zt_opt_t *o) { (void) s; (void) o; return -1; }
const char *zt_gpu_last_error(void) { return "this ztrain was built without CUDA"; }

zt_gpu_mlp_t *zt_gpu_mlp_new_on(int device, const int *sizes, int nsizes, int batch_cap,
                                const uint8_t *x, const uint8_t *y, int n, int dim, char *err,
                                size_t errlen)
{
    (void) device;
    return zt_gpu_mlp_new(sizes, nsizes, batch_cap, x, y, n, dim, err, errlen);
}
zt_gpu_group_t *zt_gpu_group_new(zt_gpu_mlp_t **m, int n, char *err, size_t errlen)
{
    (void) m; (void) n;
    snprintf(err, errlen, "this ztrain was built without CUDA and NCCL");
    return NULL;
}
void zt_gpu_group_destroy(zt_gpu_group_t **g) { (void) g; }
int zt_gpu_group_size(zt_gpu_group_t *g) { (void) g; return 0; }
zt_gpu_mlp_t *zt_gpu_group_mlp(zt_gpu_group_t *g, int i) { (void) g; (void) i; return NULL; }
int zt_gpu_group_allreduce_grads(zt_gpu_group_t *g) { (void) g; return -1; }
int zt_gpu_group_allreduce(zt_gpu_group_t *g, float **b, size_t c) { (void) g; (void) b; (void) c; return -1; }
int zt_gpu_mlp_get_state(zt_gpu_mlp_t *s, const zt_opt_t *o, float *const *h) { (void) s; (void) o; (void) h; return -1; }
int zt_gpu_mlp_set_state(zt_gpu_mlp_t *s, const zt_opt_t *o, const float *const *h) { (void) s; (void) o; (void) h; return -1; }
int zt_gpu_pin(void *h, size_t b) { (void) h; (void) b; return -1; }
void zt_gpu_unpin(void *h) { (void) h; }
int zt_gpu_group_set_order(zt_gpu_group_t *g, const int *o, int n) { (void) g; (void) o; (void) n; return -1; }
int zt_gpu_group_step(zt_gpu_group_t *g, int f, int b, float *h) { (void) g; (void) f; (void) b; (void) h; return -1; }
int zt_gpu_group_wait_layer(zt_gpu_group_t *g, int l) { (void) g; (void) l; return -1; }
int zt_gpu_group_apply(zt_gpu_group_t *g, const float *h, const zt_opt_t *o) { (void) g; (void) h; (void) o; return -1; }
int zt_gpu_group_set_params(zt_gpu_group_t *g, const float *h) { (void) g; (void) h; return -1; }
int zt_gpu_group_get_params(zt_gpu_group_t *g, float *h) { (void) g; (void) h; return -1; }
int zt_gpu_group_get_state(zt_gpu_group_t *g, const zt_opt_t *o, float *const *h) { (void) g; (void) o; (void) h; return -1; }
int zt_gpu_group_set_state(zt_gpu_group_t *g, const zt_opt_t *o, const float *const *h) { (void) g; (void) o; (void) h; return -1; }
float zt_gpu_group_take_loss(zt_gpu_group_t *g) { (void) g; return -1; }
