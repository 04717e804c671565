/* ztrain-paramserver: thin main; the role's logic lives in libztrain/paramserver. */
#include "zt_role.h"

int main(int argc, char **argv)
{
    static const zt_role_info_t info = {
        "ztrain-paramserver", "paramserver",
        "Parameter-server replica: holds model shards (the shard logic arrives with issue 3)." };
    return zt_role_main(&info, argc, argv);
}
