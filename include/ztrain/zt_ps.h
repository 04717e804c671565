/* ztrain: the parameter-server client. A training program declares its
 * tensors (float32) once, connects, then pulls values and pushes gradients
 * of whole tensors or ranges against every shard in parallel. Calls are
 * non-blocking; zt_ps_wait() completes them. Gradients are sent without
 * copying: do not modify a pushed buffer before zt_ps_wait() returns. */
#ifndef ZT_PS_H
#define ZT_PS_H
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zt_ps_client_t zt_ps_client_t;

typedef struct {
    const char *optimizer;   /* "sgd", "momentum", "adam", "adagrad" */
    float learning_rate;
    float momentum;          /* momentum */
    float beta1, beta2;      /* adam */
    float epsilon;           /* adam, adagrad */
    uint64_t seed;           /* initial values: identical everywhere for one seed */
    int sync;                /* 1: the pushes of all workers for a step are averaged */
    int workers;             /* pushing workers (sync mode, staleness) */
    int max_staleness;       /* -1: unbounded; K: a worker K steps ahead waits */
} zt_ps_options_t;

/* Defaults: adam, lr 0.001, momentum 0.9, betas 0.9/0.999, eps 1e-7, seed 1, async. */
void zt_ps_options_defaults(zt_ps_options_t *opt);
/* The server-side optimizers by index from 0 ("sgd", "momentum", ...), NULL
 * past the last: what zt_ps_options_t.optimizer takes. */
const char *zt_ps_optimizer(int index);

/* servers: "host:port" (or a full ZeroMQ endpoint) of each parameter server, in pool order. */
zt_ps_client_t *zt_ps_client_new(const char *const *servers, int nservers, int worker_rank);
void zt_ps_client_destroy(zt_ps_client_t **self_p);

/* Declares a tensor of numel floats, initialised uniform in [-scale, scale]
 * (0: zeros). Returns its id (0, 1, ...). Before zt_ps_connect only. */
int zt_ps_declare(zt_ps_client_t *self, const char *name, int64_t numel, float init_scale);
/* Sends the model layout and optimizer to every server; waits for them. */
int zt_ps_connect(zt_ps_client_t *self, const zt_ps_options_t *opt, int timeout_ms);

/* The training step about to run: pulls wait until the servers allow it
 * (sync mode: every worker pushed step-1; staleness bound K: the slowest
 * worker has pushed step-K). Pushes carry their own step. */
void zt_ps_set_step(zt_ps_client_t *self, int64_t step);

int zt_ps_pull(zt_ps_client_t *self, int tensor, float *dst);
int zt_ps_pull_range(zt_ps_client_t *self, int tensor, int64_t offset, int64_t count, float *dst);
int zt_ps_push(zt_ps_client_t *self, int tensor, const float *grads, int64_t step);
int zt_ps_push_range(zt_ps_client_t *self, int tensor, int64_t offset, int64_t count,
                     const float *grads, int64_t step);
/* Completes every outstanding call; ZT_ETIMEDOUT names the server that did
 * not answer (zt_ps_error). Lost requests are re-sent, and a server that
 * restarted without state is configured again. */
int zt_ps_wait(zt_ps_client_t *self, int timeout_ms);
const char *zt_ps_error(zt_ps_client_t *self);

int zt_ps_tensors(zt_ps_client_t *self);
const char *zt_ps_tensor_name(zt_ps_client_t *self, int tensor);
int64_t zt_ps_tensor_numel(zt_ps_client_t *self, int tensor);
int64_t zt_ps_total(zt_ps_client_t *self);
int zt_ps_servers(zt_ps_client_t *self);
/* The JSON text sent to servers (layout, optimizer, seed). */
const char *zt_ps_config_json(zt_ps_client_t *self);

/* A consistent copy of every shard: values and optimizer state. */
typedef struct {
    int64_t offset, count;   /* the server's range */
    int64_t version;         /* updates applied */
    int arrays;              /* values + state arrays */
    float *data[4];          /* each count floats */
} zt_ps_shard_t;
int zt_ps_snapshot(zt_ps_client_t *self, zt_ps_shard_t *shards, int timeout_ms);
void zt_ps_shards_free(zt_ps_shard_t *shards, int n);

/* Writes the servers' model as checkpoint ROOT/ckpt-<step> in ztrain's
 * format, as the built-in trainer does: a consistent snapshot of every
 * shard (values and optimizer state), one file per server and a manifest,
 * written under a temporary name, fsynced and renamed, so a reader sees a
 * whole checkpoint or none. Parameter servers started with this ROOT as
 * their checkpoint folder restore from it. model_json: NULL, or a JSON
 * object recorded as the manifest's "model" (the evaluator scores
 * {"kind": "mlp", "sizes": [784, ..., 10]}, with "layout": "out-in" when
 * each weight is stored out x in, as PyTorch's Linear does). keep: the
 * newest checkpoints kept (0: all). path receives the directory. A step
 * already saved is not written again. 0, or a ZT_E* code (zt_ps_error). */
int zt_ps_checkpoint(zt_ps_client_t *self, const char *root, int64_t step, const char *model_json, int keep,
                     char *path, size_t path_size, int timeout_ms);
/* The step of the newest good checkpoint under root (its directory in
 * path), or 0 when there is none. Corrupt ones are skipped with a warning. */
int64_t zt_ps_checkpoint_latest(const char *root, char *path, size_t path_size);

#ifdef __cplusplus
}
#endif
#endif
