/* Unit selftests of libztrain's classes. */
#include "zt_diag.h"
#include "zt_machines.h"
#include "zt_msg.h"
#include <stdio.h>

int main(void)
{
    zt_diag_selftest();
    puts("zt_diag: ok");
    zt_machines_selftest();
    puts("zt_machines: ok");
    zt_msg_selftest();
    puts("zt_msg: ok");
    return 0;
}
