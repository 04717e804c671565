/* ztrain-evaluator: thin main; the logic is zt_evaluator. */
#include "zt_evaluator.h"
#include "model/zt_idx.h"
#include "runtime/zt_role.h"
#include "ztrain/ztrain.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    static const zt_role_info_t info = {
        "ztrain-evaluator", "evaluator",
        "Evaluator replica: pulls each new checkpoint from the chief over ZeroMQ and scores\n"
        "it on the Fashion-MNIST test set (--data_dir=DIR, --test_examples=N)." };
    zt_evaluator_opts_t o = { NULL, 0 };
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--idle") || !strncmp(argv[i], "--run-seconds=", 14) ||
            !strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            return zt_role_main(&info, argc, argv);
        if (!strncmp(argv[i], "--data_dir=", 11))
            o.data_dir = argv[i] + 11;
        else if (!strncmp(argv[i], "--test_examples=", 16))
            o.test_limit = atoi(argv[i] + 16);
    }
    return zt_evaluator_run(&o);
}
