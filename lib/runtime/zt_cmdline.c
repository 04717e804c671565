#include "runtime/zt_cmdline.h"
#include "ztrain/zt_knobs.h"
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>

/* "--name" in both spellings: with hyphens and with underscores. */
static int s_build_longopts(const zt_flag_t *flags, struct option *out, char names[][64], int max)
{
    int n = 0;
    for (int i = 0; flags[i].name && n + 3 < max && i < 64; i++) {
        out[n++] = (struct option) { flags[i].name, flags[i].has_arg, NULL, flags[i].id };
        snprintf(names[i], 64, "%s", flags[i].name);
        bool changed = false;
        for (char *c = names[i]; *c; c++)
            if (*c == '-' || *c == '_') {
                *c = *c == '-' ? '_' : '-';
                changed = true;
            }
        if (changed)
            out[n++] = (struct option) { names[i], flags[i].has_arg, NULL, flags[i].id };
    }
    out[n++] = (struct option) { "help", no_argument, NULL, 'h' };
    out[n++] = (struct option) { "version", no_argument, NULL, 'V' };
    out[n] = (struct option) { NULL, 0, NULL, 0 };
    return n;
}

static void s_print_flags(FILE *out, const zt_flag_t *flags)
{
    fprintf(out, "Options:\n");
    for (int i = 0; flags[i].name; i++) {
        char left[64];
        snprintf(left, sizeof left, "--%s%s%s%s", flags[i].name, flags[i].arg ? (flags[i].has_arg == 2 ? "[=" : " ") : "",
                 flags[i].arg ? flags[i].arg : "", flags[i].arg && flags[i].has_arg == 2 ? "]" : "");
        fprintf(out, "  %-26s %s\n", left, flags[i].help);
    }
    fprintf(out, "  %-26s %s\n  %-26s %s\n\n", "--help", "this text", "--version", "the version");
}

int zt_cmdline_parse(const char *binary, const char *usage, unsigned knob_roles, const zt_flag_t *flags,
                  int argc, char **argv, int (*on)(int id, const char *value, void *ctx), void *ctx)
{
    struct option longopts[128];
    char names[64][64];
    s_build_longopts(flags, longopts, names, 128);
    optind = 1;
    opterr = 0;
    int c, idx = 0;
    while ((c = getopt_long(argc, argv, "+h", longopts, &idx)) != -1) {
        if (c == 'h') {
            printf("%s\n", usage);
            s_print_flags(stdout, flags);
            zt_knobs_print_for(stdout, knob_roles);
            return 1;
        }
        if (c == 'V') {
            printf("%s %s\n", binary, ZT_VERSION);
            return 1;
        }
        if (c == '?') { /* optopt: a known flag without its value; 0: an unknown one */
            const char *bad = argv[optind - 1];
            if (optopt)
                fprintf(stderr, "%s: %s needs a value (see %s --help)\n", binary, bad, binary);
            else
                fprintf(stderr, "%s: unknown option %s (see %s --help)\n", binary, bad, binary);
            return 2;
        }
        if (on(c, optarg, ctx) != 0)
            return 2;
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s' (see %s --help)\n", binary, argv[optind], binary);
        return 2;
    }
    return 0;
}

