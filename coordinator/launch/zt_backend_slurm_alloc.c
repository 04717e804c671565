/* What the Slurm backend reads of its allocation, for placing replicas
 * (zt_backend_slurm.c) and for its nodes over the job's life
 * (zt_backend_slurm_nodes.c): a component's variables, the network
 * interface of each node, and whether the allocation is ending. */
#include "launch/zt_backend_slurm_int.h"
#include "launch/zt_slurm.h"
#include "ztrain/zt_log.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *zt_slurm_be_env_component(const char *name, bool het, int c, char *buf, size_t size)
{
    if (het)
        snprintf(buf, size, "%s_HET_GROUP_%d", name, c);
    else
        snprintf(buf, size, "%s", name);
    return getenv(buf);
}

/* The interfaces that hold the addresses of places[0..n) (replicas
 * first..first+n-1) on their nodes (as each node resolves its own name),
 * for SM_NETWORK_INTERFACE_NAME: one step per node, all at once. A node
 * that does not say gets SageMaker's own default, eth0. */
void zt_slurm_be_node_interfaces(zt_slurm_be_t *ctx, int first, zt_place_t *places, int n)
{
    static const char script[] =
        "a=$(getent ahostsv4 \"$0\" | awk 'NR==1{print $1}'); PATH=$PATH:/usr/sbin:/sbin "
        "ip -o -4 addr show | awk -v a=\"$a\" '{split($4,p,\"/\"); if (p[1]==a) {print $2; exit}}'";
    zt_slurm_cmd_t *cmd = calloc((size_t) n, sizeof *cmd);
    int *of = calloc((size_t) n, sizeof *of); /* the place whose probe answers for place i */
    for (int i = 0; i < n; i++) {
        of[i] = i;
        for (int j = 0; j < i && of[i] == i; j++)
            if (!strcmp(places[j].host, places[i].host))
                of[i] = j;
        if (of[i] != i)
            continue;
        const zt_slurm_be_rep_t *r = &ctx->reps[first + i];
        char job[48], nodelist[300];
        char *argv[16] = { "srun", nodelist, "-N1", "-n1", "--overlap", "--mem=0", "--quiet",
                           "--job-name=ztrain-probe", "sh", "-c", (char *) script, r->node, NULL, NULL };
        if (r->alloc[0] || ctx->het) { /* the step's job: a regained node's own, or the component's */
            memmove(argv + 2, argv + 1, 12 * sizeof *argv);
            argv[1] = job;
            if (r->alloc[0])
                snprintf(job, sizeof job, "--jobid=%s", r->alloc);
            else
                snprintf(job, sizeof job, "--het-group=%d", r->comp);
        }
        snprintf(nodelist, sizeof nodelist, "--nodelist=%s", r->node);
        zt_slurm_command_start(argv, r->alloc[0] != 0, &cmd[i]);
    }
    for (int i = 0; i < n; i++) {
        if (of[i] != i) {
            snprintf(places[i].iface, sizeof places[i].iface, "%s", places[of[i]].iface);
            continue;
        }
        char said[256];
        int rc = zt_slurm_command_finish(&cmd[i], said, sizeof said);
        said[strcspn(said, "\r\n")] = 0;
        bool ok = rc == 0 && said[0] && strlen(said) < sizeof places[i].iface;
        for (const char *c = said; ok && *c; c++)
            ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                 strchr("._@-", *c);
        if (!ok)
            zt_warn("node %s: its network interface is unknown (%s): SM_NETWORK_INTERFACE_NAME is eth0",
                    ctx->reps[first + i].node, said[0] ? said : "the probe said nothing");
        snprintf(places[i].iface, sizeof places[i].iface, "%s", ok ? said : "eth0");
    }
    free(cmd);
    free(of);
}

/* True when squeue says the allocation is no longer running (cancelled,
 * timed out, completing). No answer is not taken for an end. */
bool zt_slurm_be_allocation_ending(void)
{
    char state[256], reason[256];
    return zt_slurm_query(zt_slurm_job_id(-1), state, sizeof state, reason, sizeof reason) == 1 &&
           strcmp(state, "RUNNING");
}
