/* zt_cmdline: the command line of a ztrain binary: its own flags (each in
 * both spellings, --checkpoint-dir and --checkpoint_dir), --help (usage,
 * the flags, then the knobs that apply to the binary) and --version. */
#ifndef ZT_CMDLINE_H
#define ZT_CMDLINE_H

/* One command-line flag of a binary. */
typedef struct {
    const char *name;         /* "checkpoint-dir": "--checkpoint_dir" is accepted too */
    int has_arg;              /* no_argument, required_argument, optional_argument */
    int id;                   /* what the callback is told */
    const char *arg;          /* its argument in --help ("DIR"), or NULL */
    const char *help;         /* one line */
} zt_flag_t;

/* Parses argv with getopt_long over flags (ended by a NULL name) plus
 * --help and --version: on(id, value, ctx) for each flag given, in order
 * (0: fine; else the parse fails). An unknown flag, a missing argument or a
 * stray argument is an error naming it. Returns 0 to go on, 1 when --help
 * or --version was printed (exit 0), 2 on an error (printed; exit 2).
 * --help prints usage, the binary's own flags, then only the knobs that
 * apply to knob_roles. */
int zt_cmdline_parse(const char *binary, const char *usage, unsigned knob_roles, const zt_flag_t *flags,
                     int argc, char **argv, int (*on)(int id, const char *value, void *ctx), void *ctx);

#endif
