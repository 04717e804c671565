/* ztrain: the command-line interface (run, validate, env, status). */
#include "cli/zt_cli.h"
#include <stddef.h>

int main(int argc, char **argv)
{
    return zt_cli_main(argc, argv, NULL);
}
