/* Unit selftests of libztrain's classes. */
#include "zt_diag.h"
#include "zt_machines.h"
#include "zt_msg.h"
#include "zt_shard.h"
#include "zt_optim.h"
#include "zt_ckpt.h"
#include "zt_mlp.h"
#include "zt_spin.h"
#include "zt_shm.h"
#include <stdlib.h>
#include <stdio.h>

int main(void)
{
    zt_diag_selftest();
    puts("zt_diag: ok");
    zt_machines_selftest();
    puts("zt_machines: ok");
    zt_msg_selftest();
    puts("zt_msg: ok");
    zt_shard_selftest();
    puts("zt_shard: ok");
    zt_optim_selftest();
    puts("zt_optim: ok");
    const char *tmp = getenv("TMPDIR");
    zt_ckpt_selftest(tmp && *tmp ? tmp : "/tmp");
    puts("zt_ckpt: ok");
    zt_mlp_selftest();
    puts("zt_mlp: ok");
    zt_spin_selftest();
    puts("zt_spin: ok");
    zt_shm_selftest();
    puts(zt_shm_enabled() ? "zt_shm: ok" : "zt_shm: off (ZT_SHM=off or no /dev/shm)");
    return 0;
}
