/* zt_mlp: softmax regression and multi-layer perceptrons (ReLU, softmax
 * cross-entropy) on OpenBLAS. Parameters are one flat float array, tensors
 * in order W0 [in x out], b0 [out], W1, b1, ... (the parameter servers' key
 * space uses the same order). */
#ifndef ZT_MLP_H
#define ZT_MLP_H
#include <stdint.h>

#define ZT_MLP_MAX_LAYERS 8

typedef struct zt_mlp_t zt_mlp_t;

/* sizes: input, hidden..., classes (n >= 2: n = 2 is softmax regression). */
zt_mlp_t *zt_mlp_new(const int *sizes, int n, int batch_cap);
void zt_mlp_destroy(zt_mlp_t **self_p);
int zt_mlp_tensors(zt_mlp_t *self);                 /* 2 per layer */
int64_t zt_mlp_tensor_offset(zt_mlp_t *self, int t);
int64_t zt_mlp_tensor_numel(zt_mlp_t *self, int t);
/* Name ("w0", "b0"...), shape rows x cols (b: 1 x out) and initial scale. */
const char *zt_mlp_tensor_name(zt_mlp_t *self, int t);
void zt_mlp_tensor_shape(zt_mlp_t *self, int t, int *rows, int *cols);
float zt_mlp_tensor_init_scale(zt_mlp_t *self, int t);
int64_t zt_mlp_nparams(zt_mlp_t *self);
float *zt_mlp_params(zt_mlp_t *self);
float *zt_mlp_grads(zt_mlp_t *self);
/* Where the next train_batch writes its gradients (nparams floats, laid out
 * as the parameters); NULL: the model's own array again. */
void zt_mlp_set_grads(zt_mlp_t *self, float *grads);
/* Loss of a batch of B examples (pixels 0..255) and gradients of the mean loss. */
float zt_mlp_train_batch(zt_mlp_t *self, const uint8_t *x, const uint8_t *y, int B);
/* Mean loss and accuracy over n examples. */
void zt_mlp_evaluate(zt_mlp_t *self, const uint8_t *x, const uint8_t *y, int n, double *loss,
                     double *accuracy);
void zt_mlp_selftest(void);

#endif
