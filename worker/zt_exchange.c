#include "zt_exchange.h"
#include "zt_rejoin.h"
#include "state/zt_ckpt.h"
#include "base/zt_env.h"
#include "base/zt_shard.h"
#include "base/zt_util.h"
#include "ztrain/ztrain.h"
#include "ztrain/zt_allreduce.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A failed exchange is an error, unless the job is stopping (rc is
 * ZT_ESHUTDOWN: SHUTDOWN or SIGTERM interrupted the wait), when it is just
 * how the step ended. Returns rc, unchanged, for the caller to pass up. */
static int s_failed(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int s_failed(int rc, const char *fmt, ...)
{
    char text[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (rc == ZT_ESHUTDOWN)
        zt_info("%s", text);
    else
        zt_error("%s", text);
    return rc;
}

/* What each mode does around the compute. Every hook may be NULL. */
typedef struct {
    const char *name;
    bool holds_model;                           /* values and optimizer state live here */
    bool grads_to_host;                         /* GPUs bring the gradient sum down for the network */
    int (*before)(zt_exchange_t *, int64_t step);   /* before forward and backward */
    int (*exchange)(zt_exchange_t *, int64_t step); /* the network: timed as the exchange */
    int (*apply)(zt_exchange_t *, int64_t step);    /* the optimizer step, when here */
} s_ops_t;

struct zt_exchange_t {
    const s_ops_t *ops;
    zt_compute_t *c;
    const zt_train_opts_t *o;
    int rank, world;
    int timeout_ms;             /* ZT_PS_TIMEOUT_MS */
    int ar_timeout_ms;          /* ZT_ALLREDUCE_TIMEOUT_MS */
    zt_ps_client_t *ps;         /* ps */
    zt_allreduce_t *ar;         /* allreduce */
    bool ar_inplace;            /* backward writes straight into the all-reduce's bucket */
    int ar_layout;              /* the all-reduce's layout ar_inplace was decided for */
    zt_opt_t opt;               /* local, allreduce */
    float *state[ZT_OPT_MAX_STATE];
    int64_t step_us, exchange_us;
    int64_t cur_step;           /* allreduce: the step whose round is being waited on */
    zt_rejoin_t *rejoin;        /* allreduce with reducers: serves restarted peers */
    bool rejoined;              /* this trainer took the model from a peer */
    int64_t rejoin_step, rejoin_gen;
    char **reducers;            /* allreduce: ZT_REDUCERS */
    int nreducers;
    /* an elastic pool's trainer (ZT_GROUP) */
    bool elastic;
    int64_t group;              /* the membership generation it trains in (0 outside an elastic pool) */
    zt_replica_t *rep;          /* where the coordinator's memberships come */
    float agree;                /* the newest generation known here; after the round, the group's mean */
    bool change_due;            /* the last round showed a newer generation */
};

/* ------------------------------------------------------------ the modes */

static int s_apply_here(zt_exchange_t *x, int64_t step)
{
    if (zt_compute_apply(x->c, &x->opt, x->state, x->ar != NULL)) {
        zt_error("optimizer step %lld failed: %s", (long long) step,
                 x->c->gpu ? zt_gpu_last_error() : "on the CPU");
        return x->c->gpu ? ZT_EDEVICE : ZT_EINVAL;
    }
    return ZT_OK;
}

static void s_ar_ready(zt_exchange_t *x);

static int s_ar_before(zt_exchange_t *x, int64_t step)
{
    (void) step;
    if (zt_allreduce_layout(x->ar, NULL, NULL, NULL) != x->ar_layout) { /* autotune formed another */
        /* the earlier layout's buffers go as the new one forms: backward
         * must not write there (its own gradients unless in place again) */
        zt_mlp_set_grads(x->c->mlp, NULL);
        s_ar_ready(x);
    }
    if (x->ar_inplace) /* this round's buffer (they alternate) */
        zt_mlp_set_grads(x->c->mlp, zt_allreduce_buffer(x->ar, 0));
    return ZT_OK;
}

/* The learning rate for a step: with --lr_scaling=linear, the base rate
 * times the workers, reached by a linear warmup. */
static float s_scaled_lr(const zt_train_opts_t *o, int world, int64_t step)
{
    float lr = o->learning_rate;
    if (!o->lr_linear || world <= 1)
        return lr;
    float target = lr * (float) world;
    return o->warmup_steps > 0 && step < o->warmup_steps
               ? lr + (target - lr) * (float) step / (float) o->warmup_steps : target;
}

double zt_exchange_learning_rate(const zt_exchange_t *x, int64_t step)
{
    return x->ops->holds_model ? s_scaled_lr(x->o, x->world, step) : x->o->learning_rate;
}

/* Synchronous: average the gradients over every worker, each tensor sent
 * as soon as it is in host memory (from GPUs while the next layer comes down). */
static int s_ar_exchange(zt_exchange_t *x, int64_t step)
{
    zt_mlp_t *mlp = x->c->mlp;
    for (int t = zt_mlp_tensors(mlp) - 1; t >= 0; t--) {
        zt_compute_wait_tensor(x->c, t);
        zt_allreduce_submit(x->ar, t, zt_mlp_grads(mlp) + zt_mlp_tensor_offset(mlp, t));
    }
    if (x->elastic) { /* the newest generation known here, averaged with the others' */
        int64_t g = x->group;
        int rank, world;
        if (x->rep)
            zt_replica_membership(x->rep, x->group, 0, &g, &rank, &world);
        x->agree = (float) g;
        zt_allreduce_submit(x->ar, zt_mlp_tensors(mlp), &x->agree);
    }
    x->cur_step = step;
    int rc = zt_allreduce_wait(x->ar, true, x->ar_timeout_ms);
    if (rc == ZT_ECANCELLED) {
        zt_info("step %lld: %s", (long long) step, zt_allreduce_error(x->ar));
        return rc;
    }
    if (rc != ZT_OK)
        return s_failed(rc, "all-reduce: %s", zt_allreduce_error(x->ar));
    /* how many trainers know of a later generation: any, and all switch after this step */
    if (x->elastic && ((double) x->agree - (double) x->group) * x->world > 0.5)
        x->change_due = true;
    x->opt.lr = s_scaled_lr(x->o, x->world, step);
    return ZT_OK;
}

static int s_pull_all(zt_exchange_t *x)
{
    zt_mlp_t *mlp = x->c->mlp;
    for (int t = 0; t < zt_mlp_tensors(mlp); t++)
        zt_ps_pull(x->ps, t, zt_mlp_params(mlp) + zt_mlp_tensor_offset(mlp, t));
    return ZT_OK;
}

static int s_ps_before(zt_exchange_t *x, int64_t step)
{
    if (zt_compute_upload(x->c, NULL, NULL)) { /* the pulled values go up */
        zt_error("step %lld: parameters to the GPUs: %s", (long long) step, zt_gpu_last_error());
        return ZT_EDEVICE;
    }
    return ZT_OK;
}

/* Push each tensor as backward makes it, then pull the new values: each
 * server sees our push before our pull. */
static int s_ps_exchange(zt_exchange_t *x, int64_t step)
{
    zt_mlp_t *mlp = x->c->mlp;
    for (int t = zt_mlp_tensors(mlp) - 1; t >= 0; t--) {
        zt_compute_wait_tensor(x->c, t);
        zt_ps_push(x->ps, t, zt_mlp_grads(mlp) + zt_mlp_tensor_offset(mlp, t), step);
    }
    zt_ps_set_step(x->ps, step + 1);
    s_pull_all(x);
    int rc = zt_ps_wait(x->ps, x->timeout_ms);
    return rc == ZT_OK ? ZT_OK : s_failed(rc, "%s", zt_ps_error(x->ps));
}

static const s_ops_t s_local = { "local", true, false, NULL, NULL, s_apply_here };
static const s_ops_t s_allreduce = { "allreduce", true, true, s_ar_before, s_ar_exchange, s_apply_here };
static const s_ops_t s_ps = { "ps", false, true, s_ps_before, s_ps_exchange, NULL };

/* ------------------------------------------------------------ set-up */

static int s_connect_ps(zt_exchange_t *x, char **servers, int nservers)
{
    zt_mlp_t *mlp = x->c->mlp;
    const zt_train_opts_t *o = x->o;
    x->ps = zt_ps_client_new((const char *const *) servers, nservers, x->rank);
    for (int t = 0; x->ps && t < zt_mlp_tensors(mlp); t++)
        zt_ps_declare(x->ps, zt_mlp_tensor_name(mlp, t), zt_mlp_tensor_numel(mlp, t),
                      zt_mlp_tensor_init_scale(mlp, t));
    zt_ps_options_t po;
    zt_ps_options_defaults(&po);
    po.optimizer = o->optimizer;
    po.learning_rate = o->learning_rate;
    po.seed = o->seed;
    po.sync = o->sync;
    po.workers = x->world;
    po.max_staleness = o->max_staleness;
    int rc = x->ps ? zt_ps_connect(x->ps, &po, x->timeout_ms) : ZT_EINVAL;
    if (rc != ZT_OK)
        return s_failed(rc, "parameter servers: %s", x->ps ? zt_ps_error(x->ps) : "cannot connect");
    zt_info("training against %d parameter server%s (%s%s), %lld parameters", nservers,
            nservers == 1 ? "" : "s", o->sync ? "sync" : "async",
            o->max_staleness >= 0 ? ", bounded staleness" : "", (long long) zt_mlp_nparams(mlp));
    return ZT_OK;
}

/* The model held here: its optimizer, its state and its seeded values. */
static void s_hold_model(zt_exchange_t *x)
{
    zt_mlp_t *mlp = x->c->mlp;
    int64_t n = zt_mlp_nparams(mlp);
    zt_opt_defaults(&x->opt);
    x->opt.kind = (zt_opt_kind_t) zt_opt_parse_kind(x->o->optimizer);
    x->opt.lr = x->o->learning_rate;
    for (int a = 0; a < zt_opt_state_arrays(x->opt.kind); a++)
        x->state[a] = malloc((size_t) n * sizeof(float));
    zt_opt_init_state(&x->opt, x->state, n);
    float *p = zt_mlp_params(mlp);
    for (int t = 0; t < zt_mlp_tensors(mlp); t++) {
        int64_t off = zt_mlp_tensor_offset(mlp, t), cnt = zt_mlp_tensor_numel(mlp, t);
        float scale = zt_mlp_tensor_init_scale(mlp, t);
        for (int64_t i = off; i < off + cnt; i++)
            p[i] = scale != 0 ? zt_init_uniform(x->o->seed, i, scale) : 0.0f;
    }
}

/* The ring's endpoints by rank: the chief's pool, then the workers'. NULL
 * when CLUSTER_SPEC does not name every worker. */
static const char **s_ring_peers(int world, char ***p0, char ***p1)
{
    int n0 = 0, n1 = 0;
    *p0 = zt_env_pool(0, &n0);
    *p1 = zt_env_pool(1, &n1);
    if (n0 + n1 != world)
        return NULL;
    const char **peers = calloc((size_t) world, sizeof *peers);
    for (int i = 0; i < n0; i++)
        peers[i] = (*p0)[i];
    for (int i = 0; i < n1; i++)
        peers[n0 + i] = (*p1)[i];
    return peers;
}

/* The model as it stands inside the wait for round gen (step cur_step):
 * nothing changes it there. */
static int s_rejoin_state(void *arg, zt_rejoin_state_t *st)
{
    zt_exchange_t *x = arg;
    if (zt_compute_download(x->c, &x->opt, x->state)) {
        zt_warn("cannot copy the model down from the GPUs: %s", zt_gpu_last_error());
        return -1;
    }
    /* inside the wait for step cur_step's round, or (autotune forming a
     * layout) before the next step's: that step, that round */
    int64_t step = zt_allreduce_in_round(x->ar) ? x->cur_step : x->cur_step + 1;
    *st = (zt_rejoin_state_t) { step, zt_allreduce_generation(x->ar), x->group, zt_mlp_nparams(x->c->mlp),
                                1 + zt_opt_state_arrays(x->opt.kind), { zt_mlp_params(x->c->mlp) }, 0, 0, 0, false };
    st->layout = zt_allreduce_layout(x->ar, &st->threshold, &st->cycle_ms, &st->searching);
    for (int a = 1; a < st->arrays; a++)
        st->data[a] = x->state[a - 1];
    return 0;
}

static void s_rejoin_asked(void *arg)
{
    zt_exchange_t *x = arg;
    zt_rejoin_answer(x->rejoin, s_rejoin_state, x);
}

/* With reducers: serve the model to a restarted peer while waiting, and,
 * restarted into the running group (ZT_REJOIN=1), take it from one, with
 * the group's all-reduce layout (st->layout > 0 after autotune's first).
 * Before this trainer's all-reduce is formed. */
static int s_rejoin_fetch(zt_exchange_t *x, const char **peers, zt_rejoin_state_t *st)
{
    const char *flag = zt_env_get(ZT_ENV_REJOIN);
    bool rejoin = flag && !strcmp(flag, "1");
    if (!peers || x->world < 2) {
        if (!rejoin)
            return ZT_OK;
        zt_fail_retryable();
        zt_error("cannot rejoin the group: CLUSTER_SPEC does not name every trainer");
        return ZT_EINVAL;
    }
    x->rejoin = zt_rejoin_serve(peers[x->rank]);
    if (!rejoin)
        return ZT_OK;
    *st = (zt_rejoin_state_t) { .group = x->group, .total = zt_mlp_nparams(x->c->mlp),
                                .arrays = 1 + zt_opt_state_arrays(x->opt.kind), .data = { zt_mlp_params(x->c->mlp) } };
    for (int a = 1; a < st->arrays; a++)
        st->data[a] = x->state[a - 1];
    char why[1024];
    int rc = zt_rejoin_fetch(peers, x->world, x->rank, (int) zt_knob_int(ZT_KNOB_REJOIN_TIMEOUT_MS), st, why,
                             sizeof why);
    if (rc != ZT_OK) {
        if (rc != ZT_ESHUTDOWN)
            zt_fail_retryable(); /* the coordinator restarts the group from the newest checkpoint */
        return s_failed(rc, "cannot rejoin the group: %s", why);
    }
    x->rejoined = true;
    x->rejoin_step = st->step;
    x->rejoin_gen = st->gen;
    return ZT_OK;
}

static bool s_round_abandoned(void *arg)
{
    zt_exchange_t *x = arg;
    return zt_replica_round_abandoned(x->rep, x->group);
}

/* The all-reduce of this trainer's group (rank of world, membership
 * generation group): the model's tensors and, in an elastic pool, the
 * agreement on the next generation after them, and a round given up when
 * the group loses a member. */
static int s_new_ar(zt_exchange_t *x, const char **peers, const zt_rejoin_state_t *joined)
{
    zt_mlp_t *mlp = x->c->mlp;
    zt_allreduce_opts_t ao = { x->rank, x->world, (const char *const *) x->reducers, x->nreducers, peers, 0, -1,
                               x->group, 0, x->elastic ? -1 : 0 };
    if (joined) { /* the running group's layout */
        ao.fusion_threshold = joined->threshold;
        ao.cycle_time_ms = joined->cycle_ms;
        ao.layout = joined->layout;
        ao.autotune = joined->searching ? 1 : -1;
    }
    x->ar = zt_allreduce_new(&ao);
    for (int t = 0; x->ar && t < zt_mlp_tensors(mlp); t++) {
        int rows, cols;
        zt_mlp_tensor_shape(mlp, t, &rows, &cols);
        int64_t shape[2] = { rows, cols };
        zt_allreduce_register(x->ar, zt_mlp_tensor_name(mlp, t), shape, 2, ZT_F32);
    }
    int64_t one = 1;
    if (x->ar && x->elastic) {
        zt_allreduce_register(x->ar, "ztrain/membership", &one, 1, ZT_F32);
        zt_allreduce_abandon_when(x->ar, s_round_abandoned, x);
    }
    return x->ar ? zt_allreduce_commit(x->ar, x->ar_timeout_ms) : ZT_EINVAL;
}

/* Whether backward can write straight into the all-reduce's bucket, logged. */
static void s_ar_ready(zt_exchange_t *x)
{
    zt_mlp_t *mlp = x->c->mlp;
    int nreducers = x->nreducers;
    /* One bucket laid out as the model (the default threshold holds this
     * MLP): backward writes straight into it, nothing is copied. */
    float *base = zt_allreduce_buffer(x->ar, 0);
    x->ar_inplace = base && !x->c->gpu;
    bool searching;
    x->ar_layout = zt_allreduce_layout(x->ar, NULL, NULL, &searching);
    for (int t = 0; x->ar_inplace && t < zt_mlp_tensors(mlp); t++)
        x->ar_inplace = (float *) zt_allreduce_buffer(x->ar, t) == base + zt_mlp_tensor_offset(mlp, t);
    /* autotune's layouts while it searches: at debug level (its samples say what they try) */
    ZT_LOG(searching && x->ar_layout > 0 ? ZT_LOG_DEBUG : ZT_LOG_INFO,
           "synchronous training over %d workers, %s, %d bucket%s of up to %lld bytes, "
            "%lld parameters%s", x->world, nreducers ? "through reducers" : "ring all-reduce",
            zt_allreduce_buckets(x->ar), zt_allreduce_buckets(x->ar) == 1 ? "" : "s",
            (long long) zt_allreduce_threshold(x->ar), (long long) zt_mlp_nparams(mlp),
            x->ar_inplace ? ", gradients written in place" : "");
}

static int s_connect_ar(zt_exchange_t *x)
{
    char **p0, **p1;
    const char **peers = s_ring_peers(x->world, &p0, &p1);
    /* A trainer restarted into its running group takes the model first,
     * with the group's all-reduce layout (autotune's); an elastic group's
     * joiner forms the new generation's all-reduce first, since its members
     * serve the model only from inside that generation's first round. */
    zt_rejoin_state_t st;
    bool model_first = !x->elastic;
    int rc = x->nreducers > 0 && model_first ? s_rejoin_fetch(x, peers, &st) : ZT_OK; /* logs its own failure */
    if (rc == ZT_OK) {
        rc = s_new_ar(x, peers, x->rejoined ? &st : NULL);
        if (rc != ZT_OK)
            s_failed(rc, "all-reduce: %s", x->ar ? zt_allreduce_error(x->ar)
                                                  : "cannot start (no reducers, and the workers' "
                                                    "addresses are not in CLUSTER_SPEC)");
    }
    if (rc == ZT_OK && x->nreducers > 0 && !model_first)
        rc = s_rejoin_fetch(x, peers, &st);
    if (rc == ZT_OK && x->rejoin)
        zt_allreduce_watch(x->ar, zt_rejoin_socket(x->rejoin), s_rejoin_asked, x);
    if (rc == ZT_OK && x->rejoined && (rc = zt_allreduce_set_generation(x->ar, st.gen)) != ZT_OK) {
        zt_fail_retryable();
        s_failed(rc, "cannot rejoin the group: round %lld does not fit its all-reduce", (long long) st.gen);
    }
    free(peers);
    zt_env_free(p0);
    zt_env_free(p1);
    if (rc != ZT_OK)
        return rc;
    s_ar_ready(x);
    return ZT_OK;
}

bool zt_exchange_change_due(const zt_exchange_t *x) { return x->change_due; }

int zt_exchange_regroup(zt_exchange_t *x, int64_t step, int *rank, int *world)
{
    int64_t g;
    x->change_due = false;
    int rc = x->rep ? zt_replica_membership(x->rep, x->group, x->ar_timeout_ms, &g, rank, world) : ZT_EINVAL;
    if (rc != ZT_OK) {
        if (rc == ZT_ETIMEDOUT)
            zt_fail_retryable(); /* the coordinator restarts the group */
        return s_failed(rc, "the group changes its membership after this step, but the coordinator's word on "
                        "it did not come: %s", zt_strerror(rc));
    }
    x->group = g;
    if (*rank < 0)
        return ZT_OK;
    zt_mlp_set_grads(x->c->mlp, NULL); /* not into the old all-reduce's buffers */
    zt_allreduce_destroy(&x->ar);
    /* nothing more of the earlier generation comes from here: the joiners
     * may start (the commit below waits for them) */
    zt_replica_notify_regrouped(x->rep, g, *rank, step); /* x->rep is there: it told us g */
    x->rank = *rank;
    x->world = *world;
    if ((rc = s_new_ar(x, NULL, NULL)) != ZT_OK)
        return s_failed(rc, "all-reduce of membership generation %lld: %s", (long long) g,
                        x->ar ? zt_allreduce_error(x->ar) : "cannot start");
    if (x->rejoin)
        zt_allreduce_watch(x->ar, zt_rejoin_socket(x->rejoin), s_rejoin_asked, x);
    zt_info("membership generation %lld: rank %d of %d", (long long) g, *rank, *world);
    s_ar_ready(x);
    return ZT_OK;
}

zt_exchange_t *zt_exchange_new(zt_compute_t *c, const zt_train_opts_t *o, zt_replica_t *rep, int rank, int world,
                               int *rc_p)
{
    zt_exchange_t *x = calloc(1, sizeof *x);
    *x = (zt_exchange_t) { .c = c, .o = o, .rep = rep, .rank = rank, .world = world,
                           .timeout_ms = (int) zt_knob_int(ZT_KNOB_PS_TIMEOUT_MS),
                           .ar_timeout_ms = (int) zt_knob_int(ZT_KNOB_ALLREDUCE_TIMEOUT_MS) };
    /* Where the model lives: parameter servers (ZT_PARAMSERVERS, or pool 2
     * of CLUSTER_SPEC), or here, with gradients all-reduced through
     * reducers (ZT_REDUCERS) or a ring between the workers, or alone. */
    int nservers = 0, rc = ZT_OK;
    char **servers = NULL;
    if (zt_env_get(ZT_ENV_REDUCERS))
        x->reducers = zt_env_list(ZT_ENV_REDUCERS, &x->nreducers);
    else if (zt_env_get(ZT_ENV_PARAMSERVERS))
        servers = zt_env_list(ZT_ENV_PARAMSERVERS, &nservers);
    else
        servers = zt_env_pool(2, &nservers);
    if (nservers > 0) {
        x->ops = &s_ps;
        rc = s_connect_ps(x, servers, nservers);
    }
    else {
        s_hold_model(x);
        x->ops = x->nreducers > 0 || world > 1 ? &s_allreduce : &s_local;
        int64_t g;
        if (x->ops == &s_allreduce && x->nreducers > 0 && zt_env_int(ZT_ENV_GROUP, &g) && g >= 0) {
            x->elastic = true; /* an elastic pool's trainer */
            x->group = g;
            if (zt_allreduce_autotune_asked() && rank == 0)
                zt_warn("ZT_AUTOTUNE is not used in an elastic pool (its members come and go): the fusion "
                        "threshold and cycle time stay as set");
        }
        if (x->ops == &s_allreduce)
            rc = s_connect_ar(x);
        else
            zt_info("training alone (no parameter servers), %lld parameters",
                    (long long) zt_mlp_nparams(c->mlp));
    }
    zt_env_free(servers);
    if (rc != ZT_OK)
        zt_exchange_destroy(&x);
    *rc_p = rc;
    return x;
}

void zt_exchange_destroy(zt_exchange_t **self_p)
{
    zt_exchange_t *x = *self_p;
    if (!x)
        return;
    if (x->c->mlp)
        zt_mlp_set_grads(x->c->mlp, NULL); /* not into the all-reduce's buffers any more */
    zt_allreduce_destroy(&x->ar);
    zt_rejoin_destroy(&x->rejoin);
    zt_ps_client_destroy(&x->ps);
    zt_env_free(x->reducers);
    for (int a = 0; a < ZT_OPT_MAX_STATE; a++)
        free(x->state[a]);
    free(x);
    *self_p = NULL;
}

const char *zt_exchange_mode(const zt_exchange_t *x) { return x->ops->name; }
bool zt_exchange_holds_model(const zt_exchange_t *x) { return x->ops->holds_model; }

/* ------------------------------------------------------------ training */

bool zt_exchange_rejoined(const zt_exchange_t *x, int64_t *step, int64_t *gen)
{
    if (!x->rejoined)
        return false; /* step and gen untouched: the caller's resume point stands */
    *step = x->rejoin_step;
    *gen = x->rejoin_gen;
    return true;
}

bool zt_exchange_async_ps(const zt_exchange_t *x) { return x->ops == &s_ps && !x->o->sync; }

int64_t zt_exchange_resume(zt_exchange_t *x, const char *dir, json_t *man, int64_t step)
{
    if (!x->ops->holds_model)
        return step; /* the servers restored their shards themselves */
    zt_mlp_t *mlp = x->c->mlp;
    int64_t n = zt_mlp_nparams(mlp);
    int rc = zt_ckpt_read_range(dir, man, 0, 0, n, zt_mlp_params(mlp));
    for (int a = 0; rc == ZT_OK && a < zt_opt_state_arrays(x->opt.kind); a++)
        rc = zt_ckpt_read_range(dir, man, 1 + a, 0, n, x->state[a]);
    return rc == ZT_OK ? step : 0;
}

int zt_exchange_begin(zt_exchange_t *x, int64_t step)
{
    if (x->ops->holds_model) {
        if (zt_compute_upload(x->c, &x->opt, x->state)) {
            zt_error("model to the GPUs: %s", zt_gpu_last_error());
            return ZT_EDEVICE;
        }
        return ZT_OK;
    }
    zt_ps_set_step(x->ps, step);
    s_pull_all(x);
    int rc = zt_ps_wait(x->ps, x->timeout_ms);
    return rc == ZT_OK ? ZT_OK : s_failed(rc, "%s", zt_ps_error(x->ps));
}

int zt_exchange_step(zt_exchange_t *x, const int *order, int first, int B, int64_t step, float *loss)
{
    int64_t c0 = zt_now_us();
    int rc = x->ops->before ? x->ops->before(x, step) : ZT_OK;
    if (rc != ZT_OK)
        return rc;
    if (zt_compute_step(x->c, order, first, B, x->ops->grads_to_host, loss)) {
        zt_error("step %lld failed: %s", (long long) step, zt_gpu_last_error());
        return ZT_EDEVICE;
    }
    int64_t c1 = zt_now_us();
    if (x->ops->exchange && (rc = x->ops->exchange(x, step)) != ZT_OK)
        return rc;
    x->exchange_us += zt_now_us() - c1;
    if (x->ops->apply && (rc = x->ops->apply(x, step)) != ZT_OK)
        return rc;
    x->step_us += zt_now_us() - c0; /* compute = step - exchange */
    return ZT_OK;
}

void zt_exchange_take_times(zt_exchange_t *x, int64_t *step_us, int64_t *exchange_us)
{
    *step_us = x->step_us;
    *exchange_us = x->exchange_us;
    x->step_us = x->exchange_us = 0;
}

/* ------------------------------------------------------------ snapshots */

int zt_exchange_snapshot(zt_exchange_t *x, int64_t step, zt_ps_shard_t **shards_p, int *nshards,
                         json_t **config)
{
    zt_mlp_t *mlp = x->c->mlp;
    int n = x->ps ? zt_ps_servers(x->ps) : 1;
    zt_ps_shard_t *shards = calloc((size_t) n, sizeof *shards);
    *shards_p = NULL;
    *nshards = 0;
    *config = NULL;
    if (x->ps) {
        /* on a stop, the save fits the grace before SIGKILL: half of it */
        int64_t grace = zt_knob_int(ZT_KNOB_STOP_GRACE_MS) / 2;
        int rc = zt_ps_snapshot(x->ps, shards, zt_stop_came() && grace < 30000 ? (int) grace : 30000);
        if (rc != ZT_OK) {
            zt_warn("cannot snapshot the parameter servers: %s", zt_ps_error(x->ps));
            free(shards);
            return rc;
        }
        *config = json_loads(zt_ps_config_json(x->ps), 0, NULL);
    }
    else {
        if (zt_compute_download(x->c, &x->opt, x->state)) {
            zt_warn("cannot copy the model down from the GPUs: %s", zt_gpu_last_error());
            free(shards);
            return ZT_EDEVICE;
        }
        shards[0] = (zt_ps_shard_t) { 0, zt_mlp_nparams(mlp), step, 1 + zt_opt_state_arrays(x->opt.kind),
                                      { zt_mlp_params(mlp), x->state[0], x->state[1], x->state[2] } };
        *config = json_pack("{s:I, s:o}", "total", (json_int_t) zt_mlp_nparams(mlp), "optimizer",
                            zt_opt_to_json(&x->opt));
    }
    *shards_p = shards;
    *nshards = n;
    return ZT_OK;
}

void zt_exchange_snapshot_free(zt_exchange_t *x, zt_ps_shard_t *shards, int nshards, json_t *config)
{
    if (x->ps && shards)
        zt_ps_shards_free(shards, nshards);
    free(shards);
    json_decref(config);
}

int zt_exchange_finish(zt_exchange_t *x, bool pull)
{
    if (x->ops->holds_model)
        return zt_compute_download(x->c, &x->opt, x->state) ? ZT_EDEVICE : ZT_OK;
    if (!pull)
        return ZT_OK;
    s_pull_all(x); /* the final model, as the servers hold it */
    return zt_ps_wait(x->ps, 60000);
}
