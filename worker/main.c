/* ztrain-worker: thin main. With --idle or --run-seconds it is a placeholder
 * replica (register, heartbeat, exit); otherwise the built-in trainer. */
#include "runtime/zt_role.h"
#include "zt_trainer.h"
#include "ztrain/ztrain.h"
#include <string.h>

int main(int argc, char **argv)
{
    static const zt_role_info_t info = {
        "ztrain-worker", "worker",
        "Worker replica: the built-in Fashion-MNIST trainer (softmax regression or MLP)\n"
        "against the job's parameter servers, or alone. --idle: register and wait for the\n"
        "end of the job; --run-seconds=S: placeholder work." };
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--idle") || !strncmp(argv[i], "--run-seconds=", 14))
            return zt_role_main(&info, argc, argv);
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            zt_role_main(&info, argc, argv);
            zt_train_usage(stdout);
            return 0;
        }
    }
    zt_train_opts_t o;
    zt_train_opts_defaults(&o);
    if (zt_train_opts_parse(&o, argc, argv) != 0)
        return 2;
    return zt_trainer_run(&o);
}
