/* zt_gpu_api: zt_gpu.h's functions as one table, the only thing the CUDA
 * module exports. The trainer links the loader (zt_gpu_load.c), which
 * implements zt_gpu.h by dlopen-ing the module on first use, so that only a
 * process that uses a GPU maps CUDA, cuBLAS and NCCL. */
#ifndef ZT_GPU_API_H
#define ZT_GPU_API_H
#include "zt_gpu.h"

/* Forwarded as they are; FAIL is what the loader returns without the module.
 * X(RETURN, NAME, PARAMETERS, ARGUMENTS, FAIL) */
#define ZT_GPU_API_PLAIN(X)                                                                          \
    X(int, zt_gpu_mlp_set_params, (zt_gpu_mlp_t *s, const float *h), (s, h), -1)                      \
    X(int, zt_gpu_mlp_get_params, (zt_gpu_mlp_t *s, float *h), (s, h), -1)                            \
    X(int, zt_gpu_mlp_get_grads, (zt_gpu_mlp_t *s, float *h), (s, h), -1)                             \
    X(int, zt_gpu_mlp_set_grads, (zt_gpu_mlp_t *s, const float *h), (s, h), -1)                       \
    X(int, zt_gpu_mlp_set_order, (zt_gpu_mlp_t *s, const int *o, int n), (s, o, n), -1)               \
    X(float, zt_gpu_mlp_train_batch, (zt_gpu_mlp_t *s, int f, int b), (s, f, b), -1)                  \
    X(int, zt_gpu_mlp_apply, (zt_gpu_mlp_t *s, const zt_opt_t *o), (s, o), -1)                        \
    X(int, zt_gpu_mlp_get_state, (zt_gpu_mlp_t *s, const zt_opt_t *o, float *const *h), (s, o, h), -1) \
    X(int, zt_gpu_mlp_set_state, (zt_gpu_mlp_t *s, const zt_opt_t *o, const float *const *h), (s, o, h), -1) \
    X(int, zt_gpu_pin, (void *h, size_t b), (h, b), -1)                                               \
    X(int, zt_gpu_group_size, (zt_gpu_group_t *g), (g), 0)                                            \
    X(zt_gpu_mlp_t *, zt_gpu_group_mlp, (zt_gpu_group_t *g, int i), (g, i), NULL)                     \
    X(int, zt_gpu_group_set_order, (zt_gpu_group_t *g, const int *o, int n), (g, o, n), -1)           \
    X(int, zt_gpu_group_step, (zt_gpu_group_t *g, int f, int b, float *h), (g, f, b, h), -1)          \
    X(int, zt_gpu_group_wait_layer, (zt_gpu_group_t *g, int l), (g, l), -1)                           \
    X(int, zt_gpu_group_apply, (zt_gpu_group_t *g, const float *h, const zt_opt_t *o), (g, h, o), -1) \
    X(int, zt_gpu_group_set_params, (zt_gpu_group_t *g, const float *h), (g, h), -1)                  \
    X(int, zt_gpu_group_get_params, (zt_gpu_group_t *g, float *h), (g, h), -1)                        \
    X(int, zt_gpu_group_get_state, (zt_gpu_group_t *g, const zt_opt_t *o, float *const *h), (g, o, h), -1) \
    X(int, zt_gpu_group_set_state, (zt_gpu_group_t *g, const zt_opt_t *o, const float *const *h), (g, o, h), -1) \
    X(float, zt_gpu_group_take_loss, (zt_gpu_group_t *g), (g), -1)                                    \
    X(int, zt_gpu_group_allreduce_grads, (zt_gpu_group_t *g), (g), -1)                                \
    X(int, zt_gpu_group_allreduce, (zt_gpu_group_t *g, float **b, size_t c), (g, b, c), -1)

/* Forwarded by hand (they report why the module is missing, or return
 * nothing). X(RETURN, NAME, PARAMETERS) */
#define ZT_GPU_API_SPECIAL(X)                                                                        \
    X(int, zt_cuda_devices, (void))                                                                   \
    X(const char *, zt_gpu_last_error, (void))                                                        \
    X(zt_gpu_mlp_t *, zt_gpu_mlp_new_on, (int device, const int *sizes, int nsizes, int batch_cap,    \
                                          const uint8_t *x, const uint8_t *y, int n, int dim,         \
                                          char *err, size_t errlen))                                  \
    X(void, zt_gpu_mlp_destroy, (zt_gpu_mlp_t **s))                                                   \
    X(void, zt_gpu_unpin, (void *h))                                                                  \
    X(zt_gpu_group_t *, zt_gpu_group_new, (zt_gpu_mlp_t **m, int n, char *err, size_t errlen))        \
    X(void, zt_gpu_group_destroy, (zt_gpu_group_t **g))

typedef struct {
    int version; /* ZT_GPU_API_VERSION: a module from another build is refused */
#define ZT_GPU_API_FIELD(ret, name, params, ...) ret(*name) params;
    ZT_GPU_API_PLAIN(ZT_GPU_API_FIELD)
    ZT_GPU_API_SPECIAL(ZT_GPU_API_FIELD)
#undef ZT_GPU_API_FIELD
} zt_gpu_api_t;

/* Bumped with any change to the table. */
#define ZT_GPU_API_VERSION 1
/* The module's one exported function, returning its table. */
#define ZT_GPU_MODULE_ENTRY "zt_gpu_module_api"
typedef const zt_gpu_api_t *(*zt_gpu_module_entry_t)(void);

#endif
