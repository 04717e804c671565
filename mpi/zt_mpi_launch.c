/* `ztrain-mpi launch`: the primary host's mpirun, as SageMaker's launcher
 * builds it (every host, processes per host, its MCA options, then the
 * user's), with `ztrain-mpi agent` as the remote shell. */
#include "zt_mpi.h"
#include "base/zt_env.h"
#include "base/zt_util.h"
#include "ztrain/zt_log.h"
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Splits text into words as a shell would quote them ('...', "...", \x),
 * appended to out from *n; false on an unclosed quote. */
static bool s_split(const char *text, char **out, int max, int *n)
{
    const char *p = text;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == '\n')
            p++;
        if (!*p)
            break;
        char *word = malloc(strlen(p) + 1), *w = word;
        char quote = 0;
        for (; *p && (quote || (*p != ' ' && *p != '\t' && *p != '\n')); p++) {
            if (quote && *p == quote)
                quote = 0;
            else if (!quote && (*p == '\'' || *p == '"'))
                quote = *p;
            else if (*p == '\\' && quote != '\'' && p[1])
                *w++ = *++p;
            else
                *w++ = *p;
        }
        *w = 0;
        if (quote || *n >= max) {
            free(word);
            return false;
        }
        out[(*n)++] = word;
    }
    return true;
}

/* mpirun's path on PATH, or NULL. */
static char *s_which(const char *name)
{
    const char *path = getenv("PATH");
    char *copy = strdup(path ? path : "/usr/bin:/bin"), *save = NULL;
    for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
        char *full = zt_strdupf("%s/%s", *dir ? dir : ".", name);
        if (access(full, X_OK) == 0) {
            free(copy);
            return full;
        }
        free(full);
    }
    free(copy);
    return NULL;
}

/* Whether argv runs a Python script (python* FILE ...) whose interpreter
 * has mpi4py: it then runs under `python -m mpi4py`, which turns a rank's
 * uncaught exception or sys.exit(N) into MPI_Abort, so that the other
 * ranks do not wait for it for ever. */
static bool s_python_script(char **argv)
{
    const char *base = strrchr(argv[0], '/');
    base = base ? base + 1 : argv[0];
    if (strncmp(base, "python", 6) || !argv[1] || argv[1][0] == '-')
        return false;
    char *check = zt_strdupf("'%s' -c 'import mpi4py' >/dev/null 2>&1", argv[0]);
    bool has = !strchr(argv[0], '\'') && system(check) == 0;
    free(check);
    if (!has)
        zt_warn("%s has no mpi4py: the program runs as it is, and a rank that fails without MPI_Abort may leave "
                "the others waiting (Debian: apt-get install python3-mpi4py)", argv[0]);
    return has;
}

/* launch's own arguments, up to "--": the index of "--" (the program
 * follows), or -1 (said). */
static int s_args(int argc, char **argv, long *per_host, const char **options)
{
    int i = 0;
    for (; i < argc && strcmp(argv[i], "--"); i++) {
        char *end = NULL;
        if (!strcmp(argv[i], "--processes-per-host") && i + 1 < argc) {
            *per_host = strtol(argv[++i], &end, 10);
            if (*end || *per_host < 1 || *per_host > 1024) {
                zt_error("--processes-per-host '%s': a whole number from 1 to 1024", argv[i]);
                return -1;
            }
        }
        else if (!strcmp(argv[i], "--mpi-options") && i + 1 < argc)
            *options = argv[++i];
        else {
            zt_error("launch: unknown argument '%s' (see ztrain-mpi --help)", argv[i]);
            return -1;
        }
    }
    if (i + 1 >= argc) {
        zt_error("launch: no program after '--' (see ztrain-mpi --help)");
        return -1;
    }
    return i;
}

int zt_mpi_launch(int argc, char **argv)
{
    long per_host = 1;
    const char *options = "";
    int i = s_args(argc, argv, &per_host, &options);
    if (i < 0)
        return 2;
    const char *hosts_text = zt_env_get(ZT_ENV_SM_HOSTS);
    json_t *hosts = hosts_text ? json_loads(hosts_text, 0, NULL) : NULL;
    if (!json_is_array(hosts) || json_array_size(hosts) == 0) {
        zt_error("launch: %s is '%s', not a list of hosts: run under `ztrain run` of a SageMaker job",
                 zt_env_name(ZT_ENV_SM_HOSTS), hosts_text ? hosts_text : "");
        json_decref(hosts);
        return 2;
    }
    char *mpirun = s_which("mpirun");
    if (!mpirun) {
        zt_error("distribution mpi: Open MPI's mpirun is not on this host's PATH (Debian: apt-get install "
                 "openmpi-bin python3-mpi4py)");
        json_decref(hosts);
        return 127;
    }
    size_t nh = json_array_size(hosts), k;
    json_t *h;
    char *list = strdup("");
    json_array_foreach(hosts, k, h) {
        char *next = zt_strdupf("%s%s%s:%ld", list, k ? "," : "", json_string_value(h), per_host);
        free(list);
        list = next;
    }
    char np[32];
    snprintf(np, sizeof np, "%ld", per_host * (long) nh);
    char *agent = zt_strdupf("%s/ztrain-mpi agent", zt_exe_dir());
    enum { MAX = 256 };
    char **av = calloc(MAX + (size_t) argc, sizeof *av);
    int n = 0;
    const char *fixed[] = { mpirun, "--host", list, "-np", np, "--allow-run-as-root", "--leave-session-attached",
                            "--tag-output", "-bind-to", "none", "-map-by", "slot",
                            "--mca", "plm", "rsh", "--mca", "ras", "^slurm,gridengine", /* ztrain's hosts, not
                                                                                 * the allocation's tasks */
                            "--mca", "plm_rsh_agent", agent, "--mca", "plm_rsh_no_tree_spawn", "1",
                            "--mca", "orte_abort_on_non_zero_status", "1", "--mca", "pml", "ob1",
                            "--mca", "btl", "^openib", NULL };
    for (int f = 0; fixed[f]; f++)
        av[n++] = (char *) fixed[f];
    /* one machine: the hosts talk over loopback, as ztrain's replicas do */
    const char *iface = zt_env_get(ZT_ENV_SM_NETWORK_INTERFACE_NAME);
    if (iface && !strcmp(iface, "lo")) {
        const char *lo[] = { "--mca", "btl_tcp_if_include", "lo", "--mca", "oob_tcp_if_include", "lo", NULL };
        for (int f = 0; lo[f]; f++)
            av[n++] = (char *) lo[f];
    }
    if (!s_split(options, av, MAX - 8, &n)) {
        zt_error("--mpi-options '%s': an unclosed quote", options);
        return 2;
    }
    int prog = n;
    for (int a = i + 1; a < argc; a++)
        av[n++] = argv[a];
    av[n] = NULL;
    if (s_python_script(av + prog)) { /* as SageMaker's launcher: an uncaught error in a rank aborts them all */
        memmove(av + prog + 3, av + prog + 1, (size_t) (n - prog) * sizeof *av);
        av[prog + 1] = "-m";
        av[prog + 2] = "mpi4py";
        n += 2;
    }
    char *line = zt_mpi_join(n, av);
    zt_info("distribution mpi: %s", line);
    free(line);
    /* (no folder of shared memory here: mpirun hands its OMPI_MCA_*
     * variables to every host's daemon; each agent sets its host's) */
    fflush(NULL);
    execv(mpirun, av);
    zt_error("cannot run %s: %m", mpirun);
    return 127;
}
