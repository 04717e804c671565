/* A training program's view of its job, from the environment contract
 * (zt_env): rank, host-local rank, reducers, parameter servers, ring peers. */
#include "ztrain/zt_job.h"
#include "ztrain/zt_error.h"
#include "base/zt_env.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A whole number from var in [lo, hi], or ZT_ESPEC naming it. */
static int s_int(zt_env_t var, int64_t lo, int64_t hi, int *out, char *why, size_t why_size)
{
    int64_t v;
    if (!zt_env_int(var, &v) || v < lo || v > hi) {
        const char *text = zt_env_get(var);
        snprintf(why, why_size, "%s=%s: not a whole number in [%lld, %lld]", zt_env_name(var),
                 text ? text : "(unset)", (long long) lo, (long long) hi);
        return ZT_ESPEC;
    }
    *out = (int) v;
    return ZT_OK;
}

int zt_job_read(zt_job_t *job, char *why, size_t why_size)
{
    memset(job, 0, sizeof *job);
    if (!zt_env_get(ZT_ENV_CLUSTER_SPEC) || !zt_env_get(ZT_ENV_POOL) || !zt_env_get(ZT_ENV_INDEX)) {
        snprintf(why, why_size, "not a replica of a ztrain job (%s, %s and %s are not set: start the "
                 "program with `ztrain run`)", zt_env_name(ZT_ENV_CLUSTER_SPEC), zt_env_name(ZT_ENV_POOL),
                 zt_env_name(ZT_ENV_INDEX));
        return ZT_ENOTFOUND;
    }
    int rc = s_int(ZT_ENV_POOL, 0, 3, &job->pool, why, why_size);
    if (rc == ZT_OK) rc = s_int(ZT_ENV_INDEX, 0, 1 << 20, &job->index, why, why_size);
    if (rc != ZT_OK)
        return rc;
    snprintf(job->name, sizeof job->name, "workerpool%d-%d", job->pool, job->index);
    if (job->pool > 1) {
        snprintf(why, why_size, "%s is in pool %d, which does not train (pools 0 and 1 do)", job->name, job->pool);
        return ZT_ESPEC;
    }
    if (rc == ZT_OK) rc = s_int(ZT_ENV_WORLD_SIZE, 1, 1 << 20, &job->size, why, why_size);
    if (rc == ZT_OK) rc = s_int(ZT_ENV_RANK, 0, job->size - 1, &job->rank, why, why_size);
    if (rc != ZT_OK)
        return rc;
    job->group = zt_env_int_or(ZT_ENV_GROUP, -1);
    job->local_rank = (int) zt_env_int_or(ZT_ENV_LOCAL_RANK, 0);
    job->local_size = (int) zt_env_int_or(ZT_ENV_LOCAL_WORLD_SIZE, 1);
    job->reducers = zt_env_list(ZT_ENV_REDUCERS, &job->nreducers);
    job->paramservers = zt_env_list(ZT_ENV_PARAMSERVERS, &job->nparamservers);
    int n0 = 0, n1 = 0;
    char **p0 = zt_env_pool(0, &n0), **p1 = zt_env_pool(1, &n1);
    job->peers = calloc((size_t) (n0 + n1) + 1, sizeof(char *));
    for (int i = 0; i < n0; i++)
        job->peers[job->npeers++] = strdup(p0[i]);
    for (int i = 0; i < n1; i++)
        job->peers[job->npeers++] = strdup(p1[i]);
    zt_env_free(p0);
    zt_env_free(p1);
    if (job->npeers != job->size) {
        snprintf(why, why_size, "%s names %d trainers in pools 0 and 1, %s=%d", zt_env_name(ZT_ENV_CLUSTER_SPEC),
                 job->npeers, zt_env_name(ZT_ENV_WORLD_SIZE), job->size);
        zt_job_free(job);
        return ZT_ESPEC;
    }
    return ZT_OK;
}

void zt_job_free(zt_job_t *job)
{
    zt_env_free(job->reducers);
    zt_env_free(job->paramservers);
    zt_env_free(job->peers);
    job->reducers = job->paramservers = job->peers = NULL;
    job->nreducers = job->nparamservers = job->npeers = 0;
}

const char *zt_job_env_name(const char *key)
{
    int var = zt_env_lookup(key);
    return var < 0 ? NULL : zt_env_name((zt_env_t) var);
}

const char *zt_job_checkpoint_dir(bool final_model)
{
    /* without the trailing slash the variables carry (as Vertex's do), so
     * that paths made from it read dir/ckpt-..., not dir//ckpt-... */
    static __thread char buf[2][4096];
    const char *d = zt_env_get(final_model ? ZT_ENV_AIP_MODEL_DIR : ZT_ENV_AIP_CHECKPOINT_DIR);
    if (!d || !*d)
        return final_model ? "model" : "checkpoints";
    size_t n = strlen(d);
    while (n > 1 && d[n - 1] == '/')
        n--;
    if (n == strlen(d) || n >= sizeof buf[0])
        return d;
    memcpy(buf[final_model], d, n);
    buf[final_model][n] = '\0';
    return buf[final_model];
}
