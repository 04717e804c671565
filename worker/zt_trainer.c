#include "zt_trainer.h"
#include "model/zt_ckpt.h"
#include "runtime/zt_env.h"
#include "runtime/zt_role.h"
#include "runtime/zt_fileserver.h"
#include "zt_gpu.h"
#include "model/zt_idx.h"
#include "model/zt_mlp.h"
#include "model/zt_optim.h"
#include "base/zt_shard.h"
#include "base/zt_util.h"
#include "ztrain/ztrain.h"
#include "ztrain/zt_ps.h"
#include "ztrain/zt_allreduce.h"
#include <cblas.h>
#include <czmq.h>
#include <libgen.h>
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

void zt_train_usage(FILE *out)
{
    fprintf(out,
        "Built-in trainer flags (as the managed services pass hyperparameters):\n"
        "  --learning_rate=F     0.001       --batch_size=N        64\n"
        "  --hidden=N,N,...      256,128 (\"\" or 0: softmax regression)\n"
        "  --epochs=N            5           --optimizer=NAME      adam (one of %s)\n"
        "  --seed=N              1           --max_steps=N         0 (no limit)\n"
        "  --checkpoint_steps=N  500         --checkpoint_secs=S   0 (off)\n"
        "  --keep_checkpoints=N  5           --log_every=N         100\n"
        "  --sync                average the pushes of every worker per step\n"
        "  --max_staleness=K     a worker K steps ahead of the slowest waits (-1: unbounded)\n"
        "  --train_examples=N    use the first N training examples (0: all)\n"
        "  --test_examples=N     use the first N test examples (0: all)\n"
        "  --lr_scaling=linear   synchronous modes: learning rate x workers, after\n"
        "  --warmup_steps=N      100 steps of linear warmup from the base rate\n"
        "  --device=auto|cpu|cuda  auto: the GPU when the replica has one (CUDA_VISIBLE_DEVICES)\n"
        "  --data_dir=DIR        %s\n", zt_opt_names(), zt_dataset_default_dir());
}

static bool s_number(const char *name, const char *v, double lo, double hi, double *out)
{
    char *end;
    double d = strtod(v, &end);
    if (end == v || *end || d < lo || d > hi) {
        fprintf(stderr, "ztrain-worker: --%s=%s: expected a number in [%g, %g]\n", name, v, lo, hi);
        return false;
    }
    *out = d;
    return true;
}

int zt_train_opts_parse(zt_train_opts_t *o, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2))
            continue;
        char name[64];
        const char *eq = strchr(a, '=');
        const char *v = eq ? eq + 1 : NULL;
        snprintf(name, sizeof name, "%.*s", (int) (eq ? eq - a - 2 : (long) strlen(a) - 2), a + 2);
        for (char *p = name; *p; p++)
            if (*p == '-')
                *p = '_';
        if (!strcmp(name, "sync")) {
            o->sync = !v || strcasecmp(v, "false");
            continue;
        }
        if (!v && i + 1 < argc && strncmp(argv[i + 1], "--", 2))
            v = argv[++i];
        if (!v)
            v = "";
        double d;
        bool ok = true;
        if (!strcmp(name, "learning_rate") || !strcmp(name, "lr"))
            { if ((ok = s_number(name, v, 1e-9, 100, &d))) o->learning_rate = (float) d; }
        else if (!strcmp(name, "batch_size"))
            { if ((ok = s_number(name, v, 1, 65536, &d))) o->batch_size = (int) d; }
        else if (!strcmp(name, "epochs"))
            { if ((ok = s_number(name, v, 1, 100000, &d))) o->epochs = (int) d; }
        else if (!strcmp(name, "seed"))
            { if ((ok = s_number(name, v, 0, 1e18, &d))) o->seed = (uint64_t) d; }
        else if (!strcmp(name, "max_steps"))
            { if ((ok = s_number(name, v, 0, 1e15, &d))) o->max_steps = (int64_t) d; }
        else if (!strcmp(name, "checkpoint_steps"))
            { if ((ok = s_number(name, v, 0, 1e9, &d))) o->checkpoint_steps = (int) d; }
        else if (!strcmp(name, "checkpoint_secs"))
            { if ((ok = s_number(name, v, 0, 1e9, &d))) o->checkpoint_secs = d; }
        else if (!strcmp(name, "keep_checkpoints"))
            { if ((ok = s_number(name, v, 0, 1e6, &d))) o->keep_checkpoints = (int) d; }
        else if (!strcmp(name, "log_every"))
            { if ((ok = s_number(name, v, 1, 1e9, &d))) o->log_every = (int) d; }
        else if (!strcmp(name, "max_staleness"))
            { if ((ok = s_number(name, v, -1, 1e9, &d))) o->max_staleness = (int) d; }
        else if (!strcmp(name, "train_examples"))
            { if ((ok = s_number(name, v, 0, 1e9, &d))) o->train_limit = (int) d; }
        else if (!strcmp(name, "test_examples"))
            { if ((ok = s_number(name, v, 0, 1e9, &d))) o->test_limit = (int) d; }
        else if (!strcmp(name, "warmup_steps"))
            { if ((ok = s_number(name, v, 0, 1e9, &d))) o->warmup_steps = (int) d; }
        else if (!strcmp(name, "lr_scaling")) {
            if (!strcmp(v, "linear"))
                o->lr_linear = true;
            else if (strcmp(v, "none")) {
                fprintf(stderr, "ztrain-worker: --lr_scaling=%s: expected linear or none\n", v);
                ok = false;
            }
        }
        else if (!strcmp(name, "data_dir"))
            o->data_dir = v;
        else if (!strcmp(name, "device")) {
            if (strcmp(v, "auto") && strcmp(v, "cpu") && strcmp(v, "cuda")) {
                fprintf(stderr, "ztrain-worker: --device=%s: expected auto, cpu or cuda\n", v);
                ok = false;
            }
            snprintf(o->device, sizeof o->device, "%s", v);
        }
        else if (!strcmp(name, "optimizer")) {
            if (zt_opt_parse_kind(v) < 0) {
                fprintf(stderr, "ztrain-worker: --optimizer=%s: expected one of %s\n", v, zt_opt_names());
                ok = false;
            }
            snprintf(o->optimizer, sizeof o->optimizer, "%s", v);
        }
        else if (!strcmp(name, "hidden")) {
            o->nhidden = 0;
            char buf[128];
            snprintf(buf, sizeof buf, "%s", v);
            char *save = NULL;
            for (char *t = strtok_r(buf, ",", &save); t && ok; t = strtok_r(NULL, ",", &save)) {
                ok = s_number(name, t, 0, 65536, &d);
                if (ok && d > 0 && o->nhidden < 7)
                    o->hidden[o->nhidden++] = (int) d;
            }
        }
        else if (strcmp(name, "job_dir") && strcmp(name, "job-dir"))
            fprintf(stderr, "ztrain-worker: ignoring unknown flag --%s\n", name);
        if (!ok)
            return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ the run */

typedef struct {
    const zt_train_opts_t *o;
    zt_replica_t *rep;          /* control plane, NULL when standalone */
    int rank, world;            /* among training replicas */
    zt_mlp_t *mlp;              /* the model */
    zt_ps_client_t *ps;         /* parameter servers, or NULL: local */
    zt_allreduce_t *ar;         /* synchronous: reducers or ring, or NULL */
    bool ar_inplace;            /* the gradients are computed where the all-reduce keeps them */
    zt_gpu_group_t *gpu;        /* forward and backward on the replica's GPUs (NCCL), or NULL */
    zt_opt_t local_opt;         /* local training */
    float *local_state[3];
    char *ckpt_dir, *model_dir; /* AIP_CHECKPOINT_DIR, AIP_MODEL_DIR */
    char address[256];          /* the chief's file server */
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

/* Snapshot of the whole model (servers or local), written as a checkpoint. */
static int s_checkpoint(s_run_t *r, const char *root, const char *root_name, int64_t step, int keep)
{
    int n = r->ps ? zt_ps_servers(r->ps) : 1;
    zt_ps_shard_t *shards = calloc((size_t) n, sizeof *shards);
    json_t *config;
    int rc;
    if (r->ps) {
        rc = zt_ps_snapshot(r->ps, shards, 30000);
        if (rc != ZT_OK) {
            zt_warn("checkpoint at step %lld skipped: %s", (long long) step, zt_ps_error(r->ps));
            free(shards);
            return rc;
        }
        config = json_loads(zt_ps_config_json(r->ps), 0, NULL);
    }
    else {
        shards[0] = (zt_ps_shard_t) { 0, zt_mlp_nparams(r->mlp), step,
                                      1 + zt_opt_state_arrays(r->local_opt.kind),
                                      { zt_mlp_params(r->mlp), r->local_state[0], r->local_state[1],
                                        r->local_state[2] } };
        config = json_pack("{s:I, s:o}", "total", (json_int_t) zt_mlp_nparams(r->mlp), "optimizer",
                           zt_opt_to_json(&r->local_opt));
        rc = ZT_OK;
    }
    json_t *tensors = s_tensors_json(r->mlp);
    json_t *sizes = json_array();
    json_array_append_new(sizes, json_integer(784));
    for (int i = 0; i < r->o->nhidden; i++)
        json_array_append_new(sizes, json_integer(r->o->hidden[i]));
    json_array_append_new(sizes, json_integer(10));
    json_t *extra = json_pack("{s:{s:s, s:o}}", "model", "kind", "mlp", "sizes", sizes);
    char *path = NULL;
    rc = zt_ckpt_write(root, step, config, tensors, extra, shards, n, keep, &path);
    if (rc == ZT_OK) {
        char *copy = strdup(path);
        char *name = zt_strdupf("%s/%s", root_name, basename(copy));
        zt_info("checkpoint %s written (step %lld)", path, (long long) step);
        if (r->rep)
            zt_replica_notify_checkpoint(r->rep, step, name, r->address);
        free(name);
        free(copy);
    }
    else
        zt_warn("cannot write a checkpoint under %s: %s", root, zt_strerror(rc));
    free(path);
    json_decref(config);
    json_decref(tensors);
    json_decref(extra);
    if (r->ps)
        zt_ps_shards_free(shards, n);
    free(shards);
    return rc;
}

/* The replica's GPUs (one model each, identical parameters, the batch split
 * between them, NCCL between them; one rank with one GPU): parameters and
 * optimizer state down to the host before a checkpoint, and up after a
 * resume. */
static void s_gpu_down(s_run_t *r)
{
    zt_gpu_group_get_params(r->gpu, zt_mlp_params(r->mlp));
    if (!r->ps)
        zt_gpu_group_get_state(r->gpu, &r->local_opt, r->local_state);
}

static void s_gpu_up(s_run_t *r)
{
    zt_gpu_group_set_params(r->gpu, zt_mlp_params(r->mlp));
    if (!r->ps)
        zt_gpu_group_set_state(r->gpu, &r->local_opt, (const float *const *) r->local_state);
}

static int s_pull_all(s_run_t *r)
{
    for (int t = 0; t < zt_mlp_tensors(r->mlp); t++)
        zt_ps_pull(r->ps, t, zt_mlp_params(r->mlp) + zt_mlp_tensor_offset(r->mlp, t));
    return ZT_OK;
}

static unsigned s_shuffle_seed(uint64_t seed, int rank, int epoch)
{
    return (unsigned) (seed * 1000003u + (unsigned) rank * 7919u + (unsigned) epoch * 104729u);
}

int zt_trainer_run(const zt_train_opts_t *o)
{
    s_run_t r = { .o = o };
    int rc = 1;
    zt_dataset_t train = { 0 }, test = { 0 };
    uint8_t *bx = NULL, *by = NULL;
    int *mine = NULL;
    zt_fileserver_t *files = NULL;
    r.rank = (int) zt_env_int_or(ZT_ENV_RANK, 0);
    r.world = (int) zt_env_int_or(ZT_ENV_WORLD_SIZE, 1);
    if (r.world < 1 || r.rank < 0 || r.rank >= r.world) {
        zt_error("RANK=%d and WORLD_SIZE=%d do not fit", r.rank, r.world);
        return 1;
    }
    zt_log_init(r.rank == 0 ? "chief" : "worker", r.rank);
    if (!zt_role_knobs_ok())
        return 1;
    openblas_set_num_threads(1);
    zt_tune_malloc();
    zsys_init();
    const char *ck = zt_env_get(ZT_ENV_AIP_CHECKPOINT_DIR), *md = zt_env_get(ZT_ENV_AIP_MODEL_DIR);
    r.ckpt_dir = strdup(ck && *ck ? ck : "checkpoints");
    r.model_dir = strdup(md && *md ? md : "model");
    if (zt_env_get(ZT_ENV_COORDINATOR) && !(r.rep = zt_replica_new(r.rank == 0 ? "chief" : "worker", 0)))
        goto out;
    /* Data: this worker's disjoint shard of the training set. */
    const char *dir = o->data_dir ? o->data_dir : zt_dataset_default_dir();
    char err[512];
    if (zt_dataset_load(dir, "train", o->train_limit, &train, err, sizeof err) != ZT_OK ||
        (r.rank == 0 && zt_dataset_load(dir, "t10k", o->test_limit, &test, err, sizeof err) != ZT_OK)) {
        zt_error("%s", err);
        goto out;
    }
    int nmine = 0;
    mine = malloc(sizeof(int) * (size_t) (train.n / r.world + 1));
    for (int i = r.rank; i < train.n; i += r.world)
        mine[nmine++] = i;
    int sizes[9] = { train.dim };
    int ns = 1;
    for (int i = 0; i < o->nhidden; i++)
        sizes[ns++] = o->hidden[i];
    sizes[ns++] = 10;
    r.mlp = zt_mlp_new(sizes, ns, o->batch_size < 256 ? 256 : o->batch_size);
    /* The device: a GPU when asked (cuda), or when the replica was given one
     * (auto: CUDA_VISIBLE_DEVICES not empty) and this build has CUDA. */
    const char *cvd = zt_env_get(ZT_ENV_CUDA_VISIBLE_DEVICES);
    bool want_gpu = !strcmp(o->device, "cuda") ||
                    (!strcmp(o->device, "auto") && cvd && *cvd && zt_cuda_devices() > 0);
    if (want_gpu) {
        int ndev = zt_cuda_devices();
        zt_gpu_mlp_t *models[64] = { 0 };
        int made = 0;
        for (int d = 0; d < (ndev > 0 ? ndev : 1) && d < 64; d++, made++)
            if (!(models[d] = zt_gpu_mlp_new_on(d, sizes, ns, o->batch_size < 256 ? 256 : o->batch_size,
                                                train.x, train.y, train.n, train.dim, err, sizeof err)))
                break;
        if (made == (ndev > 0 ? ndev : 1))
            r.gpu = zt_gpu_group_new(models, made, err, sizeof err);
        if (!r.gpu) {
            for (int d = 0; d < made; d++)
                zt_gpu_mlp_destroy(&models[d]);
            zt_error("--device=%s: %s", o->device, err);
            goto out;
        }
        zt_info("forward and backward on %d GPU%s (CUDA_VISIBLE_DEVICES=%s), NCCL between them", made,
                made == 1 ? "" : "s", cvd ? cvd : "");
    }
    /* Where the model lives: parameter servers (ZT_PARAMSERVERS, or pool 2 of
     * CLUSTER_SPEC), or here, with gradients all-reduced through reducers
     * (ZT_REDUCERS) or a ring between the workers, or alone. */
    int nservers = 0, nreducers = 0;
    char **servers = NULL, **reducers = NULL;
    if (zt_env_get(ZT_ENV_REDUCERS))
        reducers = zt_env_list(ZT_ENV_REDUCERS, &nreducers);
    else if (zt_env_get(ZT_ENV_PARAMSERVERS))
        servers = zt_env_list(ZT_ENV_PARAMSERVERS, &nservers);
    else
        servers = zt_env_pool(2, &nservers);
    if (nservers > 0) {
        r.ps = zt_ps_client_new((const char *const *) servers, nservers, r.rank);
        for (int t = 0; r.ps && t < zt_mlp_tensors(r.mlp); t++)
            zt_ps_declare(r.ps, zt_mlp_tensor_name(r.mlp, t), zt_mlp_tensor_numel(r.mlp, t),
                          zt_mlp_tensor_init_scale(r.mlp, t));
        zt_ps_options_t po;
        zt_ps_options_defaults(&po);
        po.optimizer = o->optimizer;
        po.learning_rate = o->learning_rate;
        po.seed = o->seed;
        po.sync = o->sync;
        po.workers = r.world;
        po.max_staleness = o->max_staleness;
        if (!r.ps || zt_ps_connect(r.ps, &po, (int) zt_knob_int(ZT_KNOB_PS_TIMEOUT_MS)) != ZT_OK) {
            zt_error("parameter servers: %s", r.ps ? zt_ps_error(r.ps) : "cannot connect");
            zt_env_free(servers);
            zt_env_free(reducers);
            goto out;
        }
        zt_info("training against %d parameter server%s (%s%s), %lld parameters", nservers,
                nservers == 1 ? "" : "s", o->sync ? "sync" : "async",
                o->max_staleness >= 0 ? ", bounded staleness" : "",
                (long long) zt_mlp_nparams(r.mlp));
    }
    else {
        zt_opt_defaults(&r.local_opt);
        r.local_opt.kind = (zt_opt_kind_t) zt_opt_parse_kind(o->optimizer);
        r.local_opt.lr = o->learning_rate;
        for (int a = 0; a < zt_opt_state_arrays(r.local_opt.kind); a++)
            r.local_state[a] = malloc((size_t) zt_mlp_nparams(r.mlp) * sizeof(float));
        zt_opt_init_state(&r.local_opt, r.local_state, zt_mlp_nparams(r.mlp));
        float *p = zt_mlp_params(r.mlp);
        for (int t = 0; t < zt_mlp_tensors(r.mlp); t++) {
            int64_t off = zt_mlp_tensor_offset(r.mlp, t), n = zt_mlp_tensor_numel(r.mlp, t);
            float scale = zt_mlp_tensor_init_scale(r.mlp, t);
            for (int64_t i = off; i < off + n; i++)
                p[i] = scale != 0 ? zt_init_uniform(o->seed, i, scale) : 0.0f;
        }
        if (nreducers > 0 || r.world > 1) {
            int npeers = 0, nw = 0;
            char **p0 = zt_env_pool(0, &npeers), **p1 = zt_env_pool(1, &nw);
            const char *peers[1024];
            int np = 0;
            for (int i = 0; i < npeers && np < 1024; i++)
                peers[np++] = p0[i];
            for (int i = 0; i < nw && np < 1024; i++)
                peers[np++] = p1[i];
            zt_allreduce_opts_t ao = { r.rank, r.world, (const char *const *) reducers, nreducers,
                                       np == r.world ? peers : NULL, 0, -1 };
            r.ar = zt_allreduce_new(&ao);
            for (int t = 0; r.ar && t < zt_mlp_tensors(r.mlp); t++) {
                int rows, cols;
                zt_mlp_tensor_shape(r.mlp, t, &rows, &cols);
                int64_t shape[2] = { rows, cols };
                zt_allreduce_register(r.ar, zt_mlp_tensor_name(r.mlp, t), shape, 2, ZT_F32);
            }
            int rc2 = r.ar ? zt_allreduce_commit(r.ar, (int) zt_knob_int(ZT_KNOB_PS_TIMEOUT_MS)) : ZT_EINVAL;
            if (rc2 != ZT_OK)
                zt_error("all-reduce: %s", r.ar ? zt_allreduce_error(r.ar)
                                                : "cannot start (no reducers, and the workers' "
                                                  "addresses are not in CLUSTER_SPEC)");
            zt_env_free(p0);
            zt_env_free(p1);
            if (rc2 != ZT_OK) {
                zt_env_free(servers);
                zt_env_free(reducers);
                goto out;
            }
            /* One bucket laid out as the model (the default threshold holds
             * this MLP): backward writes straight into it, nothing is copied. */
            float *base = zt_allreduce_buffer(r.ar, 0);
            r.ar_inplace = base && !r.gpu;
            for (int t = 0; r.ar_inplace && t < zt_mlp_tensors(r.mlp); t++)
                r.ar_inplace = (float *) zt_allreduce_buffer(r.ar, t) == base + zt_mlp_tensor_offset(r.mlp, t);
            zt_info("synchronous training over %d workers, %s, %d bucket%s of up to %lld bytes, "
                    "%lld parameters%s", r.world, nreducers ? "through reducers" : "ring all-reduce",
                    zt_allreduce_buckets(r.ar), zt_allreduce_buckets(r.ar) == 1 ? "" : "s",
                    (long long) zt_allreduce_threshold(r.ar), (long long) zt_mlp_nparams(r.mlp),
                    r.ar_inplace ? ", gradients written in place" : "");
        }
        else
            zt_info("training alone (no parameter servers), %lld parameters",
                    (long long) zt_mlp_nparams(r.mlp));
    }
    zt_env_free(reducers);
    zt_env_free(servers);
    /* The chief serves its checkpoints to evaluators. */
    if (r.rank == 0 && r.rep) {
        const char *roots[2][2] = { { "checkpoints", r.ckpt_dir }, { "model", r.model_dir } };
        files = zt_fileserver_new("tcp://127.0.0.1:*", (const char *const (*)[2]) roots, 2);
        snprintf(r.address, sizeof r.address, "%s", zt_fileserver_endpoint(files) ?: "");
    }
    /* Resume: a restarted job continues from the newest good checkpoint. */
    /* Every worker runs the same number of steps (sync mode waits for all):
     * shards differ by at most one example; the larger ones drop it. */
    int smallest = train.n / r.world;
    int steps_per_epoch = (smallest + o->batch_size - 1) / o->batch_size;
    if (steps_per_epoch < 1) {
        zt_error("%d training examples cannot feed %d workers", train.n, r.world);
        goto done;
    }
    int64_t step = 0;
    json_t *man = NULL;
    char *latest = zt_ckpt_latest(r.ckpt_dir, &man);
    if (latest) {
        step = json_integer_value(json_object_get(man, "step"));
        if (!r.ps) {
            int rc3 = zt_ckpt_read_range(latest, man, 0, 0, zt_mlp_nparams(r.mlp), zt_mlp_params(r.mlp));
            for (int a = 0; rc3 == ZT_OK && a < zt_opt_state_arrays(r.local_opt.kind); a++)
                rc3 = zt_ckpt_read_range(latest, man, 1 + a, 0, zt_mlp_nparams(r.mlp), r.local_state[a]);
            if (rc3 != ZT_OK)
                step = 0;
        }
        if (step)
            zt_info("resuming from %s at step %lld", latest, (long long) step);
        json_decref(man);
        free(latest);
    }
    if (r.gpu) {
        /* the host side of the exchange: page-locked, so that the copies run
         * at full speed and overlap the network */
        zt_gpu_pin(zt_mlp_params(r.mlp), sizeof(float) * (size_t) zt_mlp_nparams(r.mlp));
        zt_gpu_pin(zt_mlp_grads(r.mlp), sizeof(float) * (size_t) zt_mlp_nparams(r.mlp));
        if (!r.ps)
            s_gpu_up(&r);
    }
    bx = malloc((size_t) o->batch_size * (size_t) train.dim);
    by = malloc((size_t) o->batch_size);
    int64_t t0 = zt_now_ms(), last_ckpt_ms = t0, win_ms = t0, win_examples = 0;
    int64_t win_step_us = 0, win_exchange_us = 0; /* where the window's steps went */
    double win_loss = 0;
    int win_n = 0;
    bool stop = false;
    if (r.ps) {
        zt_ps_set_step(r.ps, step);
        s_pull_all(&r);
        if (zt_ps_wait(r.ps, (int) zt_knob_int(ZT_KNOB_PS_TIMEOUT_MS)) != ZT_OK) {
            zt_error("%s", zt_ps_error(r.ps));
            goto done;
        }
    }
    for (int epoch = (int) (step / steps_per_epoch); epoch < o->epochs && !stop; epoch++) {
        unsigned seed = s_shuffle_seed(o->seed, r.rank, epoch);
        for (int i = nmine - 1; i > 0; i--) { /* Fisher-Yates, the same for a given epoch */
            int j = (int) (rand_r(&seed) % (unsigned) (i + 1));
            int tmp = mine[i];
            mine[i] = mine[j];
            mine[j] = tmp;
        }
        if (r.gpu)
            zt_gpu_group_set_order(r.gpu, mine, nmine);
        for (int b = (int) (step % steps_per_epoch); b < steps_per_epoch && !stop; b++) {
            int B = smallest - b * o->batch_size < o->batch_size ? smallest - b * o->batch_size
                                                                 : o->batch_size;
            for (int k = 0; !r.gpu && k < B; k++) { /* a GPU gathers its batch itself */
                int idx = mine[b * o->batch_size + k];
                memcpy(bx + (size_t) k * train.dim, train.x + (size_t) idx * train.dim, (size_t) train.dim);
                by[k] = train.y[idx];
            }
            float loss;
            int64_t c0 = zt_now_us();
            if (r.gpu) {
                /* the pulled values go up; the replica's gradient sum comes
                 * down layer by layer for the push or the all-reduce */
                if ((r.ps && zt_gpu_group_set_params(r.gpu, zt_mlp_params(r.mlp))) ||
                    zt_gpu_group_step(r.gpu, b * o->batch_size, B,
                                      r.ps || r.ar ? zt_mlp_grads(r.mlp) : NULL)) {
                    zt_error("GPU step %lld failed", (long long) step);
                    goto done;
                }
                loss = 0; /* the devices add it up; taken when logged */
            }
            else {
                if (r.ar_inplace) /* this round's buffer (they alternate) */
                    zt_mlp_set_grads(r.mlp, zt_allreduce_buffer(r.ar, 0));
                loss = zt_mlp_train_batch(r.mlp, bx, by, B);
            }
            int64_t c1 = zt_now_us();
            if (r.ps) {
                for (int t = zt_mlp_tensors(r.mlp) - 1; t >= 0; t--) { /* as backward makes them */
                    if (r.gpu && t % 2 == 1) /* a layer's bias, then its weights */
                        zt_gpu_group_wait_layer(r.gpu, t / 2);
                    zt_ps_push(r.ps, t, zt_mlp_grads(r.mlp) + zt_mlp_tensor_offset(r.mlp, t), step);
                }
                zt_ps_set_step(r.ps, step + 1);
                s_pull_all(&r); /* after our push on each server: it sees our update */
                if (zt_ps_wait(r.ps, (int) zt_knob_int(ZT_KNOB_PS_TIMEOUT_MS)) != ZT_OK) {
                    zt_error("%s", zt_ps_error(r.ps));
                    goto done;
                }
                win_exchange_us += zt_now_us() - c1;
            }
            else {
                if (r.ar) { /* synchronous: average the gradients over every worker */
                    for (int t = zt_mlp_tensors(r.mlp) - 1; t >= 0; t--) {
                        if (r.gpu && t % 2 == 1) /* sent while the next layer comes down */
                            zt_gpu_group_wait_layer(r.gpu, t / 2);
                        zt_allreduce_submit(r.ar, t, zt_mlp_grads(r.mlp) + zt_mlp_tensor_offset(r.mlp, t));
                    }
                    if (zt_allreduce_wait(r.ar, true, (int) zt_knob_int(ZT_KNOB_PS_TIMEOUT_MS)) != ZT_OK) {
                        zt_error("all-reduce: %s", zt_allreduce_error(r.ar));
                        goto done;
                    }
                    float lr = o->learning_rate;
                    if (o->lr_linear && r.world > 1) {
                        float target = lr * (float) r.world;
                        lr = o->warmup_steps > 0 && step < o->warmup_steps
                                 ? lr + (target - lr) * (float) step / (float) o->warmup_steps : target;
                    }
                    r.local_opt.lr = lr;
                }
                win_exchange_us += zt_now_us() - c1;
                if (r.gpu) { /* the optimizer step stays on the devices */
                    if (zt_gpu_group_apply(r.gpu, r.ar ? zt_mlp_grads(r.mlp) : NULL, &r.local_opt)) {
                        zt_error("GPU optimizer step %lld failed", (long long) step);
                        goto done;
                    }
                }
                else
                    zt_opt_apply(&r.local_opt, zt_mlp_params(r.mlp), r.local_state, zt_mlp_grads(r.mlp),
                                 1.0f, zt_mlp_nparams(r.mlp));
            }
            win_step_us += zt_now_us() - c0; /* compute = step - exchange */
            step++;
            win_examples += B;
            win_loss += loss;
            win_n++;
            if (step % o->log_every == 0) {
                int64_t now = zt_now_ms();
                if (r.gpu)
                    win_loss = zt_gpu_group_take_loss(r.gpu);
                double eps = win_examples * 1000.0 / (double) (now - win_ms > 0 ? now - win_ms : 1);
                printf("step %lld epoch %d examples/s %.0f loss %.4f (per step: compute %.2f ms, "
                       "exchange %.2f ms)\n", (long long) step, epoch + 1, eps, win_loss / win_n,
                       (double) (win_step_us - win_exchange_us) / 1000.0 / win_n,
                       (double) win_exchange_us / 1000.0 / win_n);
                fflush(stdout);
                if (r.rep) {
                    zt_replica_report_metric(r.rep, "loss", win_loss / win_n, step);
                    zt_replica_report_metric(r.rep, "examples_per_sec", eps, step);
                }
                win_ms = now;
                win_examples = 0;
                win_step_us = 0;
                win_exchange_us = 0;
                win_loss = 0;
                win_n = 0;
            }
            if (r.rank == 0) {
                int64_t now = zt_now_ms();
                if ((o->checkpoint_steps > 0 && step % o->checkpoint_steps == 0) ||
                    (o->checkpoint_secs > 0 && now - last_ckpt_ms >= o->checkpoint_secs * 1000)) {
                    if (r.gpu && !r.ps)
                        s_gpu_down(&r);
                    s_checkpoint(&r, r.ckpt_dir, "checkpoints", step, o->keep_checkpoints);
                    last_ckpt_ms = now;
                }
            }
            if ((o->max_steps && step >= o->max_steps) || zsys_interrupted ||
                (r.rep && zt_replica_shutdown_requested(r.rep)))
                stop = true;
        }
    }
    double secs = (double) (zt_now_ms() - t0) / 1000.0;
    if (r.gpu && !r.ps)
        s_gpu_down(&r);
    if (!r.ps) { /* identical replicas have identical hashes */
        uint64_t h = 1469598103934665603ull;
        const unsigned char *pb = (const unsigned char *) zt_mlp_params(r.mlp);
        for (size_t i = 0; i < (size_t) zt_mlp_nparams(r.mlp) * sizeof(float); i++)
            h = (h ^ pb[i]) * 1099511628211ull;
        printf("params fnv1a %016llx after step %lld\n", (unsigned long long) h, (long long) step);
        fflush(stdout);
    }
    zt_info("trained %lld steps in %.1f s", (long long) step, secs);
    if (r.rank == 0 && !zsys_interrupted && !(r.rep && zt_replica_shutdown_requested(r.rep))) {
        if (r.ps) { /* the final model, as the servers hold it */
            s_pull_all(&r);
            zt_ps_wait(r.ps, 60000);
        }
        if (s_checkpoint(&r, r.model_dir, "model", step, 1) != ZT_OK)
            goto done;
        double tl, ta;
        zt_mlp_evaluate(r.mlp, test.x, test.y, test.n, &tl, &ta);
        printf("final test accuracy %.4f loss %.4f (%d examples, step %lld, %.1f s)\n", ta, tl, test.n,
               (long long) step, secs);
        fflush(stdout);
        if (r.rep) {
            zt_replica_report_metric(r.rep, "accuracy", ta, step);
            zt_replica_report_metric(r.rep, "test_loss", tl, step);
            zclock_sleep(100); /* let the metrics leave before we exit */
        }
    }
    rc = 0;
done:
out:
    free(bx);
    free(by);
    free(mine);
    zt_fileserver_destroy(&files);
    zt_dataset_free(&train);
    zt_dataset_free(&test);
    if (r.mlp)
        zt_mlp_set_grads(r.mlp, NULL); /* not into the all-reduce's buffers any more */
    zt_allreduce_destroy(&r.ar);
    zt_ps_client_destroy(&r.ps);
    if (r.gpu) {
        zt_gpu_group_destroy(&r.gpu);
        zt_gpu_unpin(zt_mlp_params(r.mlp));
        zt_gpu_unpin(zt_mlp_grads(r.mlp));
    }
    zt_mlp_destroy(&r.mlp);
    for (int a = 0; a < 3; a++)
        free(r.local_state[a]);
    zt_replica_destroy(&r.rep);
    free(r.ckpt_dir);
    free(r.model_dir);
    return rc;
}
