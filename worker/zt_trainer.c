#include "zt_trainer.h"
#include "zt_exchange.h"
#include "zt_position.h"
#include "state/zt_ckpt.h"
#include "tboard/zt_tb.h"
#include "base/zt_env.h"
#include "runtime/zt_cmdline.h"
#include "runtime/zt_process.h"
#include "base/zt_util.h"
#include "ztrain/ztrain.h"
#include "zt_blas.h"
#include <czmq.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void zt_train_opts_defaults(zt_train_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->learning_rate = 0.001f;
    o->batch_size = 64;
    o->hidden[0] = 256;
    o->hidden[1] = 128;
    o->nhidden = 2;
    o->epochs = 5;
    snprintf(o->optimizer, sizeof o->optimizer, "adam");
    o->seed = 1;
    o->checkpoint_steps = 500;
    o->keep_checkpoints = 5;
    o->log_every = 100;
    o->max_staleness = -1;
    o->warmup_steps = 100;
    snprintf(o->device, sizeof o->device, "auto");
}

enum {
    T_LR = 1, T_BATCH, T_EPOCHS, T_SEED, T_MAX_STEPS, T_CKPT_STEPS, T_CKPT_SECS, T_KEEP, T_LOG_EVERY,
    T_STALENESS, T_TRAIN_EX, T_TEST_EX, T_WARMUP, T_NUMBERS_, /* numbers above, in s_numbers' order */
    T_LR_SCALING, T_DATA_DIR, T_DEVICE, T_OPTIMIZER, T_HIDDEN, T_SYNC, T_JOB_DIR
};

/* The numeric flags' ranges, by id - T_LR. */
static const struct { const char *name; double lo, hi; } s_numbers[] = {
    { "learning_rate", 1e-9, 100 }, { "batch_size", 1, 65536 }, { "epochs", 1, 100000 }, { "seed", 0, 1e18 },
    { "max_steps", 0, 1e15 }, { "checkpoint_steps", 0, 1e9 }, { "checkpoint_secs", 0, 1e9 },
    { "keep_checkpoints", 0, 1e6 }, { "log_every", 1, 1e9 }, { "max_staleness", -1, 1e9 },
    { "train_examples", 0, 1e9 }, { "test_examples", 0, 1e9 }, { "warmup_steps", 0, 1e9 },
};

static const zt_flag_t s_flags[] = {
    { "learning_rate", 1, T_LR, "F", "learning rate (0.001); --lr too" },
    { "lr", 1, T_LR, "F", "the same" },
    { "batch_size", 1, T_BATCH, "N", "examples per step and worker (64)" },
    { "hidden", 1, T_HIDDEN, "N,N,..", "hidden layers (256,128; \"\" or 0: softmax regression)" },
    { "epochs", 1, T_EPOCHS, "N", "passes over each worker's shard (5)" },
    { "optimizer", 1, T_OPTIMIZER, "NAME", "adam (the optimizer table's names)" },
    { "seed", 1, T_SEED, "N", "initialisation and shuffling (1)" },
    { "max_steps", 1, T_MAX_STEPS, "N", "stop after N steps (0: no limit)" },
    { "checkpoint_steps", 1, T_CKPT_STEPS, "N", "the chief checkpoints every N steps (500; 0: off)" },
    { "checkpoint_secs", 1, T_CKPT_SECS, "S", "... and every S seconds (0: off)" },
    { "keep_checkpoints", 1, T_KEEP, "N", "checkpoints kept (5)" },
    { "log_every", 1, T_LOG_EVERY, "N", "a progress line every N steps (100)" },
    { "sync", 2, T_SYNC, "true|false", "average the pushes of every worker per step" },
    { "max_staleness", 1, T_STALENESS, "K", "a worker K steps ahead of the slowest waits (-1: unbounded)" },
    { "train_examples", 1, T_TRAIN_EX, "N", "use the first N training examples (0: all)" },
    { "test_examples", 1, T_TEST_EX, "N", "use the first N test examples (0: all)" },
    { "lr_scaling", 1, T_LR_SCALING, "linear|none", "synchronous modes: learning rate x workers" },
    { "warmup_steps", 1, T_WARMUP, "N", "steps of linear warmup to the scaled rate (100)" },
    { "device", 1, T_DEVICE, "auto|cpu|cuda", "auto: the GPU when the replica has one" },
    { "data_dir", 1, T_DATA_DIR, "DIR", "Fashion-MNIST's folder (default $ZT_DATA_DIR)" },
    { "job_dir", 1, T_JOB_DIR, "DIR", "accepted and unused (AI Platform passes it)" },
    ZT_PLACEHOLDER_FLAGS,
    { NULL, 0, 0, NULL, NULL },
};

static const char s_usage[] =
    "usage: ztrain-worker [options]\n\n"
    "Worker replica: the built-in Fashion-MNIST trainer (softmax regression or an MLP)\n"
    "against the job's parameter servers or reducers, or alone. Started by `ztrain run`,\n"
    "which sets RANK, WORLD_SIZE, CLUSTER_SPEC and ZT_*; flags take --name=value or\n"
    "--name value, with - or _ in names, as the managed services pass hyperparameters.\n";

typedef struct {
    zt_train_opts_t *o;
    zt_placeholder_opts_t *role;
} s_parse_t;

/* Long on purpose: one case per flag of s_flags, each checked where it is read. */
static int s_on_flag(int id, const char *v, void *ctx)
{
    s_parse_t *p = ctx;
    zt_train_opts_t *o = p->o;
    if (id >= T_LR && id < T_NUMBERS_) {
        char *end;
        double d = strtod(v, &end);
        const char *name = s_numbers[id - T_LR].name;
        if (end == v || *end || d < s_numbers[id - T_LR].lo || d > s_numbers[id - T_LR].hi) {
            fprintf(stderr, "ztrain-worker: --%s=%s: expected a number in [%g, %g]\n", name, v,
                    s_numbers[id - T_LR].lo, s_numbers[id - T_LR].hi);
            return -1;
        }
        switch (id) {
        case T_LR: o->learning_rate = (float) d; break;
        case T_BATCH: o->batch_size = (int) d; break;
        case T_EPOCHS: o->epochs = (int) d; break;
        case T_SEED: o->seed = (uint64_t) d; break;
        case T_MAX_STEPS: o->max_steps = (int64_t) d; break;
        case T_CKPT_STEPS: o->checkpoint_steps = (int) d; break;
        case T_CKPT_SECS: o->checkpoint_secs = d; break;
        case T_KEEP: o->keep_checkpoints = (int) d; break;
        case T_LOG_EVERY: o->log_every = (int) d; break;
        case T_STALENESS: o->max_staleness = (int) d; break;
        case T_TRAIN_EX: o->train_limit = (int) d; break;
        case T_TEST_EX: o->test_limit = (int) d; break;
        default: o->warmup_steps = (int) d; break;
        }
        return 0;
    }
    switch (id) {
    case T_SYNC:
        if (v && strcasecmp(v, "true") && strcasecmp(v, "false")) {
            fprintf(stderr, "ztrain-worker: --sync=%s: expected true or false\n", v);
            return -1;
        }
        o->sync = !v || !strcasecmp(v, "true");
        return 0;
    case T_LR_SCALING:
        if (strcmp(v, "linear") && strcmp(v, "none")) {
            fprintf(stderr, "ztrain-worker: --lr_scaling=%s: expected linear or none\n", v);
            return -1;
        }
        o->lr_linear = !strcmp(v, "linear");
        return 0;
    case T_DATA_DIR:
        o->data_dir = v;
        return 0;
    case T_JOB_DIR:
        return 0;
    case T_DEVICE:
        if (strcmp(v, "auto") && strcmp(v, "cpu") && strcmp(v, "cuda")) {
            fprintf(stderr, "ztrain-worker: --device=%s: expected auto, cpu or cuda\n", v);
            return -1;
        }
        snprintf(o->device, sizeof o->device, "%s", v);
        return 0;
    case T_OPTIMIZER:
        if (zt_opt_parse_kind(v) < 0) {
            fprintf(stderr, "ztrain-worker: --optimizer=%s: expected one of %s\n", v, zt_opt_names());
            return -1;
        }
        snprintf(o->optimizer, sizeof o->optimizer, "%s", v);
        return 0;
    case T_HIDDEN: {
        o->nhidden = 0;
        char buf[128];
        snprintf(buf, sizeof buf, "%s", v);
        char *save = NULL, *end;
        for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            double d = strtod(t, &end);
            if (end == t || *end || d < 0 || d > 65536) {
                fprintf(stderr, "ztrain-worker: --hidden=%s: expected sizes such as 256,128\n", v);
                return -1;
            }
            if (d > 0 && o->nhidden < 7)
                o->hidden[o->nhidden++] = (int) d;
        }
        return 0;
    }
    default:
        return zt_placeholder_flag("ztrain-worker", id, v, p->role) < 0 ? -1 : 0;
    }
}

int zt_train_opts_parse(zt_train_opts_t *o, zt_placeholder_opts_t *role, int argc, char **argv)
{
    s_parse_t p = { o, role };
    return zt_cmdline_parse("ztrain-worker", s_usage, ZT_FOR_WORKER, s_flags, argc, argv, s_on_flag, &p);
}

/* ------------------------------------------------------------ the run */

typedef struct {
    const zt_train_opts_t *o;
    zt_replica_t *rep;          /* control plane, NULL when standalone */
    int rank, world;            /* among training replicas */
    zt_dataset_t train, test;   /* test: the chief's */
    int *mine, nmine;           /* this worker's shard of the training set */
    int steps_per_epoch, smallest;
    int epoch_world;            /* the trainers an epoch's steps are counted for (WORLD_SIZE; an elastic
                                 * pool's: ZT_EPOCH_WORLD, its starting size, whatever it is now) */
    bool left;                  /* an elastic pool's trainer that left the group */
    zt_compute_t compute;       /* CPU or the replica's GPUs */
    zt_exchange_t *x;           /* local, allreduce or ps */
    zt_position_t *pos;         /* asynchronous parameter servers: this trainer's own next step */
    const char *ckpt_dir, *model_dir; /* AIP_CHECKPOINT_DIR, AIP_MODEL_DIR */
    int64_t last_ckpt_ms;
    int64_t ckpt_step;         /* the step of the newest checkpoint written (-1: none) */
    /* the progress window, logged every log_every steps */
    int64_t win_ms, win_examples;
    int64_t t0_ms, step0;       /* when and at which step training began here (for the ETA) */
    double win_loss;
    int win_n;
    zt_tb_t *tb;                /* TensorBoard scalars (ZT_TENSORBOARD), or NULL */
} s_run_t;

static json_t *s_tensors_json(zt_mlp_t *mlp)
{
    json_t *t = json_array();
    for (int i = 0; i < zt_mlp_tensors(mlp); i++) {
        int r, c;
        zt_mlp_tensor_shape(mlp, i, &r, &c);
        json_array_append_new(t, json_pack("{s:s, s:[ii], s:I, s:I}", "name", zt_mlp_tensor_name(mlp, i),
                              "shape", r, c, "offset", (json_int_t) zt_mlp_tensor_offset(mlp, i),
                              "numel", (json_int_t) zt_mlp_tensor_numel(mlp, i)));
    }
    return t;
}

/* Snapshot of the whole model (servers or here), written as a checkpoint. */
static int s_checkpoint(s_run_t *r, const char *root, int64_t step, int keep)
{
    zt_ps_shard_t *shards;
    int n;
    json_t *config;
    int rc = zt_exchange_snapshot(r->x, step, &shards, &n, &config);
    if (rc != ZT_OK) {
        zt_warn("checkpoint at step %lld skipped: the model could not be gathered (%s)", (long long) step,
                zt_strerror(rc));
        zt_replica_report_checkpoint_error(r->rep, step, rc); /* an event in job.json, a line in ztrain status */
        return rc;
    }
    json_t *tensors = s_tensors_json(r->compute.mlp);
    json_t *sizes = json_array();
    json_array_append_new(sizes, json_integer(784));
    for (int i = 0; i < r->o->nhidden; i++)
        json_array_append_new(sizes, json_integer(r->o->hidden[i]));
    json_array_append_new(sizes, json_integer(10));
    json_t *extra = json_pack("{s:{s:s, s:o}}", "model", "kind", "mlp", "sizes", sizes);
    char *path = NULL;
    rc = zt_ckpt_write(root, step, config, tensors, extra, shards, n, keep, &path);
    if (rc == ZT_OK) {
        zt_info("checkpoint %s written (step %lld)", path, (long long) step);
        if (r->rep) /* the chief serves its checkpoints to evaluators */
            zt_replica_announce_checkpoint(r->rep, step, path);
    }
    else {
        zt_warn("cannot write the checkpoint of step %lld under %s: %s", (long long) step, root, zt_strerror(rc));
        if (r->rep)
            zt_replica_report_checkpoint_error(r->rep, step, rc);
    }
    free(path);
    json_decref(tensors);
    json_decref(extra);
    zt_exchange_snapshot_free(r->x, shards, n, config);
    return rc;
}

static unsigned s_shuffle_seed(uint64_t seed, int rank, int epoch)
{
    return (unsigned) (seed * 1000003u + (unsigned) rank * 7919u + (unsigned) epoch * 104729u);
}

/* This trainer's disjoint shard of the training set for its rank and the
 * group's size, in the order before any epoch's shuffle. */
static void s_shard(s_run_t *r)
{
    free(r->mine);
    r->nmine = 0;
    r->mine = malloc(sizeof(int) * (size_t) (r->train.n / r->world + 1));
    for (int i = r->rank; i < r->train.n; i += r->world)
        r->mine[r->nmine++] = i;
    r->smallest = r->train.n / r->world;
}

/* Data: this worker's disjoint shard of the training set (and the chief's
 * test set). Every worker runs the same number of steps (sync modes wait
 * for all): shards differ by at most one example; the larger ones drop it. */
static int s_load_data(s_run_t *r)
{
    const zt_train_opts_t *o = r->o;
    const char *dir = o->data_dir ? o->data_dir : zt_dataset_default_dir();
    char err[512];
    if (zt_dataset_load(dir, "train", o->train_limit, &r->train, err, sizeof err) != ZT_OK ||
        (r->rank == 0 && zt_dataset_load(dir, "t10k", o->test_limit, &r->test, err, sizeof err) != ZT_OK)) {
        zt_error("%s", err);
        return -1;
    }
    /* the same on every trainer, a joiner of a grown elastic group included */
    r->epoch_world = (int) zt_env_int_or(ZT_ENV_EPOCH_WORLD, r->world);
    r->steps_per_epoch = r->epoch_world < 1 ? 0 : (r->train.n / r->epoch_world + o->batch_size - 1) / o->batch_size;
    if (r->steps_per_epoch < 1 || r->train.n / r->world < 1) {
        zt_error("%d training examples cannot feed %d workers", r->train.n, r->epoch_world);
        return -1;
    }
    s_shard(r);
    return 0;
}

/* The model, where it runs, and how its gradients are exchanged. */
static int s_make_model(s_run_t *r)
{
    const zt_train_opts_t *o = r->o;
    int sizes[9] = { r->train.dim };
    int ns = 1;
    for (int i = 0; i < o->nhidden; i++)
        sizes[ns++] = o->hidden[i];
    sizes[ns++] = 10;
    if (zt_compute_init(&r->compute, sizes, ns, o->batch_size, &r->train, o->device))
        return -1;
    int rc;
    if ((r->x = zt_exchange_new(&r->compute, o, r->rep, r->rank, r->world, &rc)))
        return 0;
    return rc == ZT_ESHUTDOWN ? 1 : -1; /* asked to stop while connecting or rejoining: no failure */
}

/* A restarted job continues from the newest good checkpoint; a trainer
 * that rejoined its group, from the step the group is at. */
static int64_t s_resume(s_run_t *r)
{
    int64_t at, gen;
    if (zt_exchange_rejoined(r->x, &at, &gen))
        return at;
    if (zt_exchange_async_ps(r->x))
        r->pos = zt_position_open(r->rank);
    json_t *man = NULL;
    char *latest = zt_ckpt_latest(r->ckpt_dir, &man);
    int64_t own = zt_position_get(r->pos);
    /* restarted in place: the servers kept every push it made (the chief's
     * checkpoint counts the chief's steps: the chief's own position goes
     * before it only when it is past it) */
    if (own > 0 && (r->rank != 0 || !latest || own > json_integer_value(json_object_get(man, "step")))) {
        zt_info("resuming from %s at step %lld (this trainer's own position; the parameter servers kept theirs)",
                zt_position_path(r->pos), (long long) own);
        json_decref(man);
        free(latest);
        return own;
    }
    if (!latest)
        return 0;
    int64_t step = zt_exchange_resume(r->x, latest, man, json_integer_value(json_object_get(man, "step")));
    if (step)
        zt_info("resuming from %s at step %lld", latest, (long long) step);
    json_decref(man);
    free(latest);
    return step;
}

/* The progress line and metrics, every log_every steps. */
static void s_log_window(s_run_t *r, int64_t step, int epoch, int B, float loss)
{
    r->win_examples += B;
    r->win_loss += loss;
    r->win_n++;
    if (step % r->o->log_every != 0)
        return;
    int64_t now = zt_now_ms(), step_us, exchange_us;
    double mean = zt_compute_take_loss(&r->compute, r->win_loss) / r->win_n;
    double eps = r->win_examples * 1000.0 / (double) (now - r->win_ms > 0 ? now - r->win_ms : 1);
    zt_exchange_take_times(r->x, &step_us, &exchange_us);
    /* step / total, %, and the ETA at the rate since training began here */
    int64_t total = (int64_t) r->steps_per_epoch * r->o->epochs;
    if (r->o->max_steps > 0 && r->o->max_steps < total)
        total = r->o->max_steps;
    double rate = (double) (step - r->step0) / ((double) (now - r->t0_ms > 0 ? now - r->t0_ms : 1) / 1000.0);
    int64_t eta = rate > 0 ? (int64_t) ((double) (total - step) / rate + 0.5) : 0;
    zt_info("step %lld/%lld (%d%%, ETA %lldm%02llds) epoch %d examples/s %.0f loss %.4f (per step: compute "
            "%.2f ms, exchange %.2f ms)", (long long) step, (long long) total,
            (int) (100 * step / (total > 0 ? total : 1)), (long long) (eta / 60), (long long) (eta % 60), epoch + 1,
            eps, mean, (double) (step_us - exchange_us) / 1000.0 / r->win_n, (double) exchange_us / 1000.0 / r->win_n);
    if (r->rep) {
        zt_replica_report_metric(r->rep, "loss", mean, step);
        zt_replica_report_metric(r->rep, "examples_per_sec", eps, step);
    }
    if (r->tb) {
        zt_tb_scalar(r->tb, "loss", mean, step);
        zt_tb_scalar(r->tb, "examples_per_sec", eps, step);
        zt_tb_scalar(r->tb, "step_compute_ms", (double) (step_us - exchange_us) / 1000.0 / r->win_n, step);
        zt_tb_scalar(r->tb, "step_exchange_ms", (double) exchange_us / 1000.0 / r->win_n, step);
        zt_tb_scalar(r->tb, "learning_rate", zt_exchange_learning_rate(r->x, step), step);
    }
    r->win_ms = now;
    r->win_examples = 0;
    r->win_loss = 0;
    r->win_n = 0;
}

/* The chief checkpoints every checkpoint_steps steps or checkpoint_secs seconds. */
static void s_maybe_checkpoint(s_run_t *r, int64_t step)
{
    const zt_train_opts_t *o = r->o;
    int64_t now = zt_now_ms();
    if (r->rank != 0 || !((o->checkpoint_steps > 0 && step % o->checkpoint_steps == 0) ||
                          (o->checkpoint_secs > 0 && now - r->last_ckpt_ms >= o->checkpoint_secs * 1000)))
        return;
    if (s_checkpoint(r, r->ckpt_dir, step, o->keep_checkpoints) == ZT_OK)
        r->ckpt_step = step;
    r->last_ckpt_ms = now;
}

static bool s_stopping(s_run_t *r, int64_t step)
{
    return (r->o->max_steps && step >= r->o->max_steps) || zt_stop_requested();
}

/* Epoch `epoch`'s shuffle of this replica's examples, applied to the order
 * the epoch before left (Fisher-Yates, the same for a given epoch). */
static void s_shuffle(s_run_t *r, int epoch)
{
    unsigned seed = s_shuffle_seed(r->o->seed, r->rank, epoch);
    for (int i = r->nmine - 1; i > 0; i--) {
        int j = (int) (rand_r(&seed) % (unsigned) (i + 1));
        int tmp = r->mine[i];
        r->mine[i] = r->mine[j];
        r->mine[j] = tmp;
    }
}

/* An elastic pool's group changes its membership after this step (every
 * trainer saw it in the same round): this trainer leaves it (1), or trains
 * on as its new rank, on that rank's shard, in the epoch's order (0); -1
 * on a failure. */
static int s_regroup(s_run_t *r, int64_t step, int epoch)
{
    int rank, world;
    int rc = zt_exchange_regroup(r->x, step, &rank, &world);
    if (rc != ZT_OK)
        return rc == ZT_ESHUTDOWN ? 1 : -1;
    if (rank < 0) {
        zt_info("left the group after step %lld: its workers' pool was scaled down", (long long) step);
        r->left = true;
        return 1;
    }
    r->rank = rank;
    r->world = world;
    s_shard(r);
    for (int e = 0; e <= epoch; e++) /* the order this epoch has on the new shard */
        s_shuffle(r, e);
    zt_compute_epoch(&r->compute, r->mine, r->nmine);
    return 0;
}

/* The step loop: every epoch reshuffles this worker's shard; every step
 * goes through the exchange. Returns the steps done (an exchange that the
 * job's stop interrupted, ZT_ESHUTDOWN, is no failure), or -1 on a failure. */
static int64_t s_train(s_run_t *r, int64_t step)
{
    int rc;
    const zt_train_opts_t *o = r->o;
    r->win_ms = r->last_ckpt_ms = r->t0_ms = zt_now_ms();
    r->step0 = step;
    /* resumed from a checkpoint: the earlier epochs' shuffles first, so that
     * the run goes on with the very order it had (each epoch shuffles the
     * one before) */
    for (int epoch = 0; epoch < (int) (step / r->steps_per_epoch) && epoch < o->epochs; epoch++)
        s_shuffle(r, epoch);
    for (int epoch = (int) (step / r->steps_per_epoch); epoch < o->epochs; epoch++) {
        s_shuffle(r, epoch);
        zt_compute_epoch(&r->compute, r->mine, r->nmine);
        for (int b = (int) (step % r->steps_per_epoch); b < r->steps_per_epoch; b++) {
            /* a shard smaller than an epoch's steps (an elastic group grown
             * past its starting size) is gone through again */
            int first = (int) ((int64_t) b * o->batch_size % r->smallest);
            int B = r->smallest - first < o->batch_size ? r->smallest - first : o->batch_size;
            float loss;
            if ((rc = zt_exchange_step(r->x, r->mine, first, B, step, &loss)) != ZT_OK) {
                /* a round given up (the group lost a member): this step again, in the new group */
                if (rc == ZT_ECANCELLED && (rc = s_regroup(r, step, epoch)) == 0) {
                    b--;
                    continue;
                }
                return rc == ZT_ESHUTDOWN || rc > 0 ? step : -1; /* stopping: an interrupted exchange is no failure */
            }
            step++;
            zt_position_set(r->pos, step);
            s_log_window(r, step, epoch, B, loss);
            s_maybe_checkpoint(r, step);
            if (s_stopping(r, step))
                return step;
            if (zt_exchange_change_due(r->x) && (rc = s_regroup(r, step, epoch)) != 0)
                return rc > 0 ? step : -1;
        }
    }
    return step;
}

/* After training: the model's hash (identical replicas, identical hashes)
 * and, from the chief, the final model and its test accuracy. */
static int s_finish(s_run_t *r, int64_t step, double secs)
{
    if (r->left) {
        zt_info("trained %lld steps in %.1f s, then left the group", (long long) step, secs);
        return 0;
    }
    bool stopped = zt_stop_requested(), final = r->rank == 0 && !stopped;
    if (stopped && r->rank == 0 && step > r->step0 && step != r->ckpt_step) {
        /* a stop (a preemption, a cancel, the job's end): the step reached is
         * saved, so that a restart or --resume continues from it */
        zt_info("stopping at step %lld: saving it to resume from", (long long) step);
        zt_stop_hold(true); /* the servers' snapshot is asked for, within the grace */
        if (s_checkpoint(r, r->ckpt_dir, step, r->o->keep_checkpoints) == ZT_OK)
            r->ckpt_step = step;
        zt_stop_hold(false);
    }
    else if (stopped && r->pos)
        zt_info("stopping at step %lld: %s keeps it for the replica in this one's place", (long long) step,
                zt_position_path(r->pos));
    else if (stopped && r->rank == 0 && step > r->step0) /* the stop came on a step just saved */
        zt_info("stopping at step %lld: saved already, to resume from", (long long) step);
    zt_exchange_finish(r->x, final);
    zt_mlp_t *mlp = r->compute.mlp;
    if (zt_exchange_holds_model(r->x)) {
        uint64_t h = 1469598103934665603ull;
        const unsigned char *pb = (const unsigned char *) zt_mlp_params(mlp);
        for (size_t i = 0; i < (size_t) zt_mlp_nparams(mlp) * sizeof(float); i++)
            h = (h ^ pb[i]) * 1099511628211ull;
        zt_info("params fnv1a %016llx after step %lld", (unsigned long long) h, (long long) step);
    }
    zt_info("trained %lld steps in %.1f s", (long long) step, secs);
    if (!final)
        return 0;
    /* the final model: when the disk is full, the checkpoints kept make room,
     * oldest first (the final model supersedes them) */
    int rc;
    char gone[64];
    while ((rc = s_checkpoint(r, r->model_dir, step, 1)) == ZT_ENOSPC &&
           zt_ckpt_remove_oldest(r->ckpt_dir, gone, sizeof gone))
        zt_warn("no room for the final model under %s: removed the oldest checkpoint kept, %s/%s, and trying again",
                r->model_dir, r->ckpt_dir, gone);
    if (rc == ZT_ENOSPC) {
        zt_error("the final model cannot be written under %s: its disk is full, with no checkpoint left to remove",
                 r->model_dir);
        return -2;
    }
    if (rc != ZT_OK)
        return -1;
    double tl, ta;
    zt_mlp_evaluate(mlp, r->test.x, r->test.y, r->test.n, &tl, &ta);
    zt_info("final test accuracy %.4f loss %.4f (%d examples, step %lld, %.1f s)", ta, tl, r->test.n,
           (long long) step, secs);
    fflush(stdout);
    zt_tb_scalar(r->tb, "accuracy", ta, step);
    zt_tb_scalar(r->tb, "test_loss", tl, step);
    if (r->rep) {
        zt_replica_report_metric(r->rep, "accuracy", ta, step);
        zt_replica_report_metric(r->rep, "test_loss", tl, step);
        zclock_sleep(100); /* let the metrics leave before we exit */
    }
    return 0;
}

/* TensorBoard's event file: the chief's run is train, the others'
 * train-workerpoolP-I with ZT_TENSORBOARD=all. */
static void s_open_tensorboard(s_run_t *r)
{
    char name[64] = "train";
    if (r->rank != 0) {
        if (strcmp(zt_knob_str(ZT_KNOB_TENSORBOARD), "all"))
            return;
        snprintf(name, sizeof name, "train-workerpool%lld-%lld", (long long) zt_env_int_or(ZT_ENV_POOL, 1),
                 (long long) zt_env_int_or(ZT_ENV_INDEX, r->rank - 1));
    }
    r->tb = zt_tb_open_role_run(name);
}

/* The replica's identity, logging, knobs and control plane. */
static int s_start(s_run_t *r)
{
    r->rank = (int) zt_env_int_or(ZT_ENV_RANK, 0);
    r->world = (int) zt_env_int_or(ZT_ENV_WORLD_SIZE, 1);
    if (r->world < 1 || r->rank < 0 || r->rank >= r->world) {
        zt_error("RANK=%d and WORLD_SIZE=%d do not fit", r->rank, r->world);
        return -1;
    }
    zt_process_log_init(r->rank == 0 ? "chief" : "worker", r->rank);
    if (!zt_process_knobs_ok())
        return -1;
    zt_blas_say();
    zt_tune_malloc();
    zsys_init();
    r->ckpt_dir = zt_job_checkpoint_dir(false);
    r->model_dir = zt_job_checkpoint_dir(true);
    if (zt_env_get(ZT_ENV_COORDINATOR) && !(r->rep = zt_replica_new(r->rank == 0 ? "chief" : "worker", 0)))
        return -1;
    s_open_tensorboard(r);
    return 0;
}

static void s_stop(s_run_t *r)
{
    zt_position_close(&r->pos);
    zt_exchange_destroy(&r->x);
    zt_compute_fini(&r->compute);
    zt_dataset_free(&r->train);
    zt_dataset_free(&r->test);
    free(r->mine);
    zt_tb_close(&r->tb);
    zt_replica_destroy(&r->rep);
}

int zt_trainer_run(const zt_train_opts_t *o)
{
    s_run_t r = { .o = o, .ckpt_step = -1 };
    int rc = 1, made = 0;
    if (s_start(&r) || s_load_data(&r) || (made = s_make_model(&r)) != 0) {
        rc = made > 0 ? 0 : 1;
        goto out;
    }
    int64_t step = s_resume(&r), t0 = zt_now_ms();
    int brc = zt_exchange_begin(r.x, step);
    if (brc != ZT_OK) {
        rc = brc == ZT_ESHUTDOWN ? 0 : 1; /* asked to stop while connecting */
        goto out;
    }
    int64_t gen;
    if (zt_exchange_rejoined(r.x, &step, &gen)) {
        zt_info("rejoined the group at step %lld (round %lld)", (long long) step, (long long) gen);
        if (r.rep)
            zt_replica_notify_rejoined(r.rep, step, gen);
    }
    if ((step = s_train(&r, step)) < 0)
        goto out;
    int frc = s_finish(&r, step, (double) (zt_now_ms() - t0) / 1000.0);
    rc = frc == 0 ? 0 : frc == -2 ? ZT_EXIT_DISK : 1;
out:
    rc = zt_process_exit(r.rep, rc); /* a stop ztrain did not announce: a preemption */
    s_stop(&r);
    return rc;
}
