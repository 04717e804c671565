/* ztrain-evaluator: thin main; the logic is zt_evaluator. */
#include "zt_evaluator.h"
#include "base/zt_util.h"
#include "zt_blas.h"
#include "runtime/zt_cmdline.h"
#include "runtime/zt_placeholder.h"
#include "ztrain/ztrain.h"
#include <getopt.h>
#include <stdio.h>

static const char s_usage[] =
    "usage: ztrain-evaluator [--data-dir DIR] [--test-examples N] [--idle | --run-seconds S]\n\n"
    "Evaluator replica: pulls each new checkpoint from the chief over ZeroMQ and scores it\n"
    "on the Fashion-MNIST test set, reporting eval_accuracy and eval_loss to the\n"
    "coordinator. Started by `ztrain run`, which sets ZT_COORDINATOR, ZT_POOL, ZT_INDEX\n"
    "and CLUSTER_SPEC; it exits 0 when the coordinator ends the job or on SIGTERM.\n";

enum { F_DATA_DIR = 1, F_TEST_EXAMPLES };

typedef struct {
    zt_evaluator_opts_t eval;
    zt_placeholder_opts_t role;
} s_opts_t;

static int s_on_flag(int id, const char *v, void *ctx)
{
    s_opts_t *o = ctx;
    long long n;
    if (id == F_DATA_DIR)
        o->eval.data_dir = v;
    else if (id == F_TEST_EXAMPLES) {
        if (!zt_parse_int(v, &n) || n < 0 || n > 1 << 30) {
            fprintf(stderr, "ztrain-evaluator: --test-examples: '%s' is not a whole number\n", v);
            return -1;
        }
        o->eval.test_limit = (int) n;
    }
    else
        return zt_placeholder_flag("ztrain-evaluator", id, v, &o->role);
    return 0;
}

int main(int argc, char **argv)
{
    static const zt_placeholder_info_t info = { "ztrain-evaluator", "evaluator" };
    zt_blas_init(argv);
    static const zt_flag_t flags[] = {
        { "data-dir", required_argument, F_DATA_DIR, "DIR", "Fashion-MNIST's folder (default $ZT_DATA_DIR)" },
        { "test-examples", required_argument, F_TEST_EXAMPLES, "N", "score the first N test examples (0: all)" },
        ZT_PLACEHOLDER_FLAGS,
        { NULL, 0, 0, NULL, NULL },
    };
    s_opts_t o = { { NULL, 0 }, { false, -1, 0 } };
    int rc = zt_cmdline_parse("ztrain-evaluator", s_usage, ZT_FOR_EVAL, flags, argc, argv, s_on_flag, &o);
    if (rc != 0)
        return rc == 1 ? 0 : 2;
    if (o.role.placeholder)
        return zt_exit_status(zt_placeholder_main(&info, &o.role));
    return zt_exit_status(zt_evaluator_run(&o.eval));
}
