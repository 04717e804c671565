/* ztrain-worker: thin main. With --idle or --run-seconds it is a placeholder
 * replica (register, heartbeat, exit); otherwise the built-in trainer. */
#include "zt_blas.h"
#include "runtime/zt_placeholder.h"
#include "zt_trainer.h"
#include "ztrain/zt_error.h"

int main(int argc, char **argv)
{
    static const zt_placeholder_info_t info = { "ztrain-worker", "worker" };
    zt_blas_init(argv);
    zt_train_opts_t o;
    zt_train_opts_defaults(&o);
    zt_placeholder_opts_t role = { false, -1, 0 };
    int rc = zt_train_opts_parse(&o, &role, argc, argv);
    if (rc != 0)
        return rc == 1 ? 0 : 2;
    if (role.placeholder)
        return zt_exit_status(zt_placeholder_main(&info, &role));
    return zt_exit_status(zt_trainer_run(&o));
}
