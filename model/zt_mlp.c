#include "zt_mlp.h"
#include <assert.h>
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct zt_mlp_t {
    int n;                          /* layer sizes count */
    int sizes[ZT_MLP_MAX_LAYERS + 1];
    int batch_cap;                  /* largest batch */
    int64_t nparams;                /* all parameters */
    int64_t off[2 * ZT_MLP_MAX_LAYERS]; /* tensor offsets */
    char names[2 * ZT_MLP_MAX_LAYERS][8];
    float *params;                  /* nparams */
    float *grads;                   /* nparams: own, or set_grads' */
    float *own_grads;               /* the model's own */
    float *act[ZT_MLP_MAX_LAYERS + 1];  /* activations per layer, batch_cap x size */
    float *delta[ZT_MLP_MAX_LAYERS + 1];/* their gradients */
};

zt_mlp_t *zt_mlp_new(const int *sizes, int n, int batch_cap)
{
    if (n < 2 || n > ZT_MLP_MAX_LAYERS + 1 || batch_cap < 1)
        return NULL;
    zt_mlp_t *self = calloc(1, sizeof *self);
    self->n = n;
    self->batch_cap = batch_cap;
    memcpy(self->sizes, sizes, (size_t) n * sizeof *sizes);
    int64_t at = 0;
    for (int l = 0; l + 1 < n; l++) {
        self->off[2 * l] = at;
        at += (int64_t) sizes[l] * sizes[l + 1];
        self->off[2 * l + 1] = at;
        at += sizes[l + 1];
        snprintf(self->names[2 * l], 8, "w%d", l);
        snprintf(self->names[2 * l + 1], 8, "b%d", l);
    }
    self->nparams = at;
    self->params = calloc((size_t) at, sizeof(float));
    self->grads = self->own_grads = calloc((size_t) at, sizeof(float));
    for (int l = 0; l < n; l++) {
        self->act[l] = calloc((size_t) batch_cap * (size_t) sizes[l], sizeof(float));
        self->delta[l] = calloc((size_t) batch_cap * (size_t) sizes[l], sizeof(float));
    }
    return self;
}

void zt_mlp_destroy(zt_mlp_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zt_mlp_t *self = *self_p;
    for (int l = 0; l < self->n; l++) {
        free(self->act[l]);
        free(self->delta[l]);
    }
    free(self->params);
    free(self->own_grads);
    free(self);
    *self_p = NULL;
}

int zt_mlp_tensors(zt_mlp_t *self) { return 2 * (self->n - 1); }
int64_t zt_mlp_tensor_offset(zt_mlp_t *self, int t) { return self->off[t]; }
const char *zt_mlp_tensor_name(zt_mlp_t *self, int t) { return self->names[t]; }
int64_t zt_mlp_nparams(zt_mlp_t *self) { return self->nparams; }
float *zt_mlp_params(zt_mlp_t *self) { return self->params; }
float *zt_mlp_grads(zt_mlp_t *self) { return self->grads; }
void zt_mlp_set_grads(zt_mlp_t *self, float *grads) { self->grads = grads ? grads : self->own_grads; }

void zt_mlp_tensor_shape(zt_mlp_t *self, int t, int *rows, int *cols)
{
    int l = t / 2;
    *rows = t % 2 ? 1 : self->sizes[l];
    *cols = self->sizes[l + 1];
}

int64_t zt_mlp_tensor_numel(zt_mlp_t *self, int t)
{
    int r, c;
    zt_mlp_tensor_shape(self, t, &r, &c);
    return (int64_t) r * c;
}

float zt_mlp_tensor_init_scale(zt_mlp_t *self, int t)
{
    if (t % 2)
        return 0.0f; /* biases start at zero */
    int l = t / 2;
    return sqrtf(6.0f / (float) (self->sizes[l] + self->sizes[l + 1])); /* Glorot uniform */
}

/* Forward pass of B examples; returns the logits' layer index. */
static void s_forward(zt_mlp_t *self, const uint8_t *x, int B)
{
    const int in = self->sizes[0];
    float *a0 = self->act[0];
    for (int64_t i = 0; i < (int64_t) B * in; i++)
        a0[i] = x[i] * (1.0f / 255.0f);
    for (int l = 0; l + 1 < self->n; l++) {
        int din = self->sizes[l], dout = self->sizes[l + 1];
        const float *W = self->params + self->off[2 * l], *b = self->params + self->off[2 * l + 1];
        float *out = self->act[l + 1];
        for (int r = 0; r < B; r++)
            memcpy(out + (int64_t) r * dout, b, (size_t) dout * sizeof(float));
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, dout, din, 1.0f, self->act[l], din,
                    W, dout, 1.0f, out, dout);
        if (l + 2 < self->n)
            for (int64_t i = 0; i < (int64_t) B * dout; i++)
                out[i] = out[i] > 0 ? out[i] : 0;
    }
}

/* Softmax in place on the logits; mean cross-entropy; correct count. */
static double s_softmax_ce(zt_mlp_t *self, const uint8_t *y, int B, int *correct)
{
    const int k = self->sizes[self->n - 1];
    float *z = self->act[self->n - 1];
    double loss = 0;
    int ok = 0;
    for (int r = 0; r < B; r++) {
        float *row = z + (int64_t) r * k;
        float mx = row[0];
        int arg = 0;
        for (int j = 1; j < k; j++)
            if (row[j] > mx) {
                mx = row[j];
                arg = j;
            }
        ok += arg == y[r];
        double sum = 0;
        for (int j = 0; j < k; j++) {
            row[j] = expf(row[j] - mx);
            sum += row[j];
        }
        for (int j = 0; j < k; j++)
            row[j] = (float) (row[j] / sum);
        loss -= log(row[y[r]] > 1e-30f ? row[y[r]] : 1e-30f);
    }
    if (correct)
        *correct = ok;
    return loss / B;
}

float zt_mlp_train_batch(zt_mlp_t *self, const uint8_t *x, const uint8_t *y, int B)
{
    assert(B <= self->batch_cap);
    s_forward(self, x, B);
    double loss = s_softmax_ce(self, y, B, NULL);
    const int L = self->n - 1, k = self->sizes[L];
    float *d = self->delta[L];
    const float inv = 1.0f / (float) B;
    for (int r = 0; r < B; r++)
        for (int j = 0; j < k; j++)
            d[(int64_t) r * k + j] = (self->act[L][(int64_t) r * k + j] - (j == y[r])) * inv;
    for (int l = L - 1; l >= 0; l--) {
        int din = self->sizes[l], dout = self->sizes[l + 1];
        float *dW = self->grads + self->off[2 * l], *db = self->grads + self->off[2 * l + 1];
        const float *W = self->params + self->off[2 * l];
        float *dz = self->delta[l + 1];
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, din, dout, B, 1.0f, self->act[l], din,
                    dz, dout, 0.0f, dW, dout);
        memset(db, 0, (size_t) dout * sizeof(float));
        for (int r = 0; r < B; r++)
            for (int j = 0; j < dout; j++)
                db[j] += dz[(int64_t) r * dout + j];
        if (l > 0) {
            float *da = self->delta[l];
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, din, dout, 1.0f, dz, dout, W, dout,
                        0.0f, da, din);
            const float *a = self->act[l];
            for (int64_t i = 0; i < (int64_t) B * din; i++)
                if (a[i] <= 0)
                    da[i] = 0;
        }
    }
    return (float) loss;
}

void zt_mlp_evaluate(zt_mlp_t *self, const uint8_t *x, const uint8_t *y, int n, double *loss,
                     double *accuracy)
{
    double total = 0;
    int correct = 0;
    for (int at = 0; at < n; at += self->batch_cap) {
        int B = n - at < self->batch_cap ? n - at : self->batch_cap;
        int ok;
        s_forward(self, x + (int64_t) at * self->sizes[0], B);
        total += s_softmax_ce(self, y + at, B, &ok) * B;
        correct += ok;
    }
    *loss = n ? total / n : 0;
    *accuracy = n ? (double) correct / n : 0;
}

void zt_mlp_selftest(void)
{
    /* Gradient check on a tiny net against central differences. */
    const int sizes[3] = { 6, 5, 3 };
    zt_mlp_t *m = zt_mlp_new(sizes, 3, 4);
    unsigned seed = 3;
    for (int64_t i = 0; i < m->nparams; i++)
        m->params[i] = (float) ((rand_r(&seed) % 2001) - 1000) / 2000.0f;
    uint8_t x[24], y[4] = { 0, 1, 2, 1 };
    for (int i = 0; i < 24; i++)
        x[i] = (uint8_t) (rand_r(&seed) % 256);
    zt_mlp_train_batch(m, x, y, 4);
    float *g = malloc((size_t) m->nparams * sizeof(float));
    memcpy(g, m->grads, (size_t) m->nparams * sizeof(float));
    for (int64_t i = 0; i < m->nparams; i++) {
        float keep = m->params[i], h = 1e-2f;
        m->params[i] = keep + h;
        double lp = zt_mlp_train_batch(m, x, y, 4);
        m->params[i] = keep - h;
        double lm = zt_mlp_train_batch(m, x, y, 4);
        m->params[i] = keep;
        double num = (lp - lm) / (2 * h);
        assert(fabs(num - g[i]) < 2e-3 + 2e-2 * fabs(num));
    }
    free(g);
    assert(zt_mlp_tensors(m) == 4 && zt_mlp_tensor_numel(m, 0) == 30 && zt_mlp_tensor_offset(m, 1) == 30);
    zt_mlp_destroy(&m);
}
