/* ztrain-coordinator: the chief; the same as `ztrain run`. */
#include "cli/zt_cli.h"

int main(int argc, char **argv)
{
    return zt_cli_main(argc, argv, "run");
}
