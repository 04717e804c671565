#include "zt_evaluator.h"
#include "zt_blas.h"
#include "state/zt_ckpt.h"
#include "tboard/zt_tb.h"
#include "base/zt_env.h"
#include "runtime/zt_process.h"
#include "wire/zt_transport.h"
#include "runtime/zt_fileserver.h"
#include "zt_idx.h"
#include "zt_mlp.h"
#include "base/zt_util.h"
#include "ztrain/ztrain.h"
#include <czmq.h>
#include <errno.h>
#include <libgen.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void s_rm_dir(const char *dir)
{
    zdir_t *d = zdir_new(dir, NULL);
    if (d) {
        zdir_remove(d, true);
        zdir_destroy(&d);
    }
}

/* A checkpoint whose weights are stored out x in (PyTorch's Linear):
 * each is transposed into the model's in x out. */
static void s_weights_to_in_out(zt_mlp_t *mlp)
{
    for (int t = 0; t < zt_mlp_tensors(mlp); t += 2) {
        int rows, cols; /* in x out */
        zt_mlp_tensor_shape(mlp, t, &rows, &cols);
        float *w = zt_mlp_params(mlp) + zt_mlp_tensor_offset(mlp, t);
        float *copy = malloc(sizeof(float) * (size_t) rows * (size_t) cols);
        memcpy(copy, w, sizeof(float) * (size_t) rows * (size_t) cols);
        for (int o = 0; o < cols; o++)
            for (int i = 0; i < rows; i++)
                w[(size_t) i * (size_t) cols + (size_t) o] = copy[(size_t) o * (size_t) rows + (size_t) i];
        free(copy);
    }
}

/* How long one chunk of a checkpoint may take to come from the chief's
 * file server (its own thread answers at once): past FETCH_PROMPT_MS the
 * chief may have gone, and the evaluator reads the checkpoint where it
 * lies when it can; else it asks again, waiting FETCH_WAIT_MS. */
#define FETCH_PROMPT_MS 3000
#define FETCH_WAIT_MS 30000

/* The checkpoint folder `name` names ("model/ckpt-N", "checkpoints/ckpt-N")
 * where this replica sees the job's output folders, when it is there and
 * a folder of the user's closed to others (this host, or a shared file
 * system): the chief that served it may have ended (the job's final model). */
static char *s_local_checkpoint(const char *name)
{
    const char *slash = strchr(name, '/');
    if (!slash)
        return NULL;
    bool final = !strncmp(name, "model/", 6);
    const char *root = zt_job_checkpoint_dir(final);
    char why[256];
    char *dir = root ? zt_strdupf("%s/%s", root, slash + 1) : NULL;
    if (dir && zt_dir_trusted(dir, why, sizeof why) != ZT_OK) {
        free(dir);
        dir = NULL;
    }
    return dir;
}

/* Fetches checkpoint `name`'s files from the file server at `address` into
 * folder local, each chunk answered within wait_ms. */
static int s_fetch(const char *address, const char *name, const char *local, int wait_ms, char *err, size_t errlen)
{
    /* as the file server's socket is (zt_fileserver.h): sealed from another host */
    zt_bulk_t *way = zt_bulk_connect(ZT_PLANE_CONTROL, address, false);
    if (!way) {
        snprintf(err, errlen, "cannot connect to %s", address);
        return ZT_EIO;
    }
    zt_mkdir_p(local);
    char *rman = zt_strdupf("%s/manifest.json", name), *lman = zt_strdupf("%s/manifest.json", local);
    int rc = zt_file_fetch(way, rman, lman, wait_ms, err, errlen);
    json_t *man = rc == ZT_OK ? json_load_file(lman, 0, NULL) : NULL;
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(man, "files"), i, f) {
        const char *fn = json_string_value(json_object_get(f, "file"));
        if (!fn || strchr(fn, '/')) {
            rc = ZT_EPROTO;
            break;
        }
        char *rp = zt_strdupf("%s/%s", name, fn), *lp = zt_strdupf("%s/%s", local, fn);
        rc = zt_file_fetch(way, rp, lp, wait_ms, err, errlen);
        free(rp);
        free(lp);
        if (rc != ZT_OK)
            break;
    }
    json_decref(man);
    zt_bulk_destroy(&way, 0);
    free(rman);
    free(lman);
    return rc;
}

/* Fetches checkpoint `name` from `address` into scratch; a server that
 * does not answer promptly may be gone (the chief ended, having announced
 * the final model), so the checkpoint is read where this replica sees it
 * when it can, else fetched again with time to spare. Evaluates it. */
static int s_evaluate(const char *address, const char *name, int64_t step, const char *scratch,
                      zt_dataset_t *test, zt_replica_t *rep, zt_tb_t *tb)
{
    char err[512];
    char *copy = strdup(name);
    char *local = zt_strdupf("%s/%s", scratch, basename(copy));
    free(copy);
    int rc = s_fetch(address, name, local, FETCH_PROMPT_MS, err, sizeof err);
    char *here = rc != ZT_OK ? s_local_checkpoint(name) : NULL;
    if (here) {
        zt_info("checkpoint %s: %s; reading it from %s", name, err, here);
        s_rm_dir(local);
        free(local);
        local = here;
        rc = ZT_OK;
    }
    else if (rc != ZT_OK)
        rc = s_fetch(address, name, local, FETCH_WAIT_MS, err, sizeof err);
    if (rc != ZT_OK) {
        zt_warn("cannot fetch checkpoint %s: %s", name, err);
        s_rm_dir(local);
        free(local);
        return rc;
    }
    json_t *man = zt_ckpt_open(local, err, sizeof err), *v;
    size_t i;
    if (!man) {
        zt_warn("checkpoint %s is corrupt: %s; skipped", name, err);
        if (!here)
            s_rm_dir(local);
        free(local);
        return ZT_EIO;
    }
    json_t *model = json_object_get(man, "model");
    json_t *jsizes = json_object_get(model, "sizes");
    const char *layout = json_string_value(json_object_get(model, "layout"));
    bool out_in = layout && !strcmp(layout, "out-in");
    int sizes[9], n = 0;
    json_array_foreach(jsizes, i, v)
        if (n < 9)
            sizes[n++] = (int) json_integer_value(v);
    zt_mlp_t *mlp = n >= 2 && sizes[0] == test->dim && (!layout || out_in) ? zt_mlp_new(sizes, n, 500) : NULL;
    if (!mlp || zt_ckpt_read_range(local, man, 0, 0, zt_mlp_nparams(mlp), zt_mlp_params(mlp)) != ZT_OK) {
        zt_warn("checkpoint %s does not hold a model this evaluator knows", name);
        rc = ZT_EPROTO;
    }
    else {
        if (out_in)
            s_weights_to_in_out(mlp);
        double loss, acc;
        zt_mlp_evaluate(mlp, test->x, test->y, test->n, &loss, &acc);
        zt_info("checkpoint %s (step %lld): test accuracy %.4f loss %.4f", name, (long long) step, acc,
               loss);
        fflush(stdout);
        zt_tb_scalar(tb, "accuracy", acc, step);
        zt_tb_scalar(tb, "loss", loss, step);
        if (rep) {
            zt_replica_report_metric(rep, "eval_accuracy", acc, step);
            zt_replica_report_metric(rep, "eval_loss", loss, step);
        }
    }
    zt_mlp_destroy(&mlp);
    json_decref(man);
    if (!here)
        s_rm_dir(local); /* the fetched copy, never the job's own checkpoint */
    free(local);
    return rc;
}

int zt_evaluator_run(const zt_evaluator_opts_t *o)
{
    int index = (int) zt_env_int_or(ZT_ENV_INDEX, 0);
    zt_process_log_init("evaluator", index);
    if (!zt_process_knobs_ok())
        return 1;
    zt_blas_say();
    zsys_init();
    const char *dir = o->data_dir ? o->data_dir : zt_dataset_default_dir();
    zt_dataset_t test;
    char err[512];
    if (zt_dataset_load(dir, "t10k", o->test_limit, &test, err, sizeof err) != ZT_OK) {
        zt_error("%s", err);
        return 1;
    }
    zt_replica_t *rep = zt_replica_new("evaluator", 0);
    if (!rep) {
        zt_dataset_free(&test);
        return 1;
    }
    /* its scratch folder: in the job's folder (its own, named by its pid so
     * that a killed predecessor's is found and removed); standalone, a
     * fresh one of a random name (mkdtemp, 0700) in a folder that passes
     * the trusted-folder rule, never one somebody made first */
    const char *jd = zt_env_get(ZT_ENV_JOB_DIR), *tmp = getenv("TMPDIR");
    tmp = tmp && *tmp ? tmp : "/tmp";
    char *scratch = jd ? zt_strdupf("%s/evaluator-%d.%d", jd, index, (int) getpid())
                       : zt_strdupf("%s/ztrain-evaluator-%d.XXXXXX", tmp, index), why[1024] = "";
    if (jd) {
        char *mine = zt_strdupf("evaluator-%d.", index); /* what this evaluator's killed predecessors left */
        zt_remove_dead_pid_entries(jd, mine);
        free(mine);
    }
    if (zt_dir_fit(scratch, why, sizeof why) != ZT_OK || (jd ? mkdir(scratch, 0700) != 0 : !mkdtemp(scratch))) {
        zt_error("cannot make a scratch folder %s: %s", scratch, why[0] ? why : strerror(errno));
        free(scratch);
        zt_replica_destroy(&rep);
        zt_dataset_free(&test);
        return 1;
    }
    /* TensorBoard: the evaluations under <AIP_TENSORBOARD_LOG_DIR>/eval (eval-I for evaluator I > 0) */
    char run[32] = "eval";
    if (index)
        snprintf(run, sizeof run, "eval-%d", index);
    zt_tb_t *tb = zt_tb_open_role_run(run);
    int evaluated = 0;
    for (;;) {
        int64_t step;
        char name[256], address[256];
        int rc = zt_replica_next_checkpoint(rep, &step, name, sizeof name, address, sizeof address, 500);
        if (rc == ZT_ESHUTDOWN)
            break;
        if (rc == ZT_OK && !zt_ckpt_name_ok(name)) { /* a path only when it is a checkpoint's name */
            zt_warn("ignored a checkpoint notice naming '%.64s'", name);
            continue;
        }
        if (rc == ZT_OK && s_evaluate(address, name, step, scratch, &test, rep, tb) == ZT_OK)
            evaluated++;
    }
    zt_info("evaluated %d checkpoint%s", evaluated, evaluated == 1 ? "" : "s");
    s_rm_dir(scratch);
    free(scratch);
    zt_tb_close(&tb);
    int status = zt_process_exit(rep, 0); /* a stop ztrain did not announce: restarted */
    zt_replica_destroy(&rep);
    zt_dataset_free(&test);
    return status;
}
