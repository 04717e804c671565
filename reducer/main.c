/* ztrain-reducer: thin main; the role's logic lives in libztrain/reducer. */
#include "zt_role.h"

int main(int argc, char **argv)
{
    static const zt_role_info_t info = {
        "ztrain-reducer", "reducer",
        "Reduction-server replica: sums gradient buckets (the reduction logic arrives with issue 4)." };
    return zt_role_main(&info, argc, argv);
}
