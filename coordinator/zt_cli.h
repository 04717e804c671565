#ifndef ZT_CLI_H
#define ZT_CLI_H
/* Runs the ztrain CLI; command forces a subcommand (ztrain-coordinator: "run"). */
int zt_cli_main(int argc, char **argv, const char *command);
#endif
