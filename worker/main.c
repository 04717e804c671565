/* ztrain-worker: thin main; the role's logic lives in libztrain/worker. */
#include "zt_role.h"

int main(int argc, char **argv)
{
    static const zt_role_info_t info = {
        "ztrain-worker", "worker",
        "Worker replica: runs the training program (the built-in trainer arrives with issue 3)." };
    return zt_role_main(&info, argc, argv);
}
