#include "launch/zt_clusterenv.h"
#include "runtime/zt_env.h"
#include "base/zt_util.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_knobs.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const char *const s_tf_types[ZT_POOLS] = { "chief", "worker", "ps", "evaluator" };

void zt_replica_name(int pool, int index, char *buf, size_t size)
{
    snprintf(buf, size, "workerpool%d-%d", pool, index);
}

int zt_layout_init(zt_layout_t *self, const zt_plan_t *plan, zt_placement_t *placement_p,
                   const char *job_dir, const char *trial)
{
    memset(self, 0, sizeof *self);
    self->plan = plan;
    self->placement = *placement_p;
    memset(placement_p, 0, sizeof *placement_p);
    self->job_dir = strdup(job_dir);
    self->trial = trial ? strdup(trial) : NULL;
    const char *base = plan->base_output_dir ? plan->base_output_dir : job_dir;
    self->base_dir = trial ? zt_strdupf("%s/%s", base, trial) : strdup(base);
    int k = 0;
    for (int p = 0; p < ZT_POOLS; p++) {
        self->first[p] = k;
        k += plan->pools[p].present ? plan->pools[p].replicas : 0;
    }
    return k == self->placement.n ? ZT_OK : ZT_EINVAL;
}

void zt_layout_fini(zt_layout_t *self)
{
    zt_placement_fini(&self->placement);
    free(self->job_dir);
    free(self->base_dir);
    free(self->trial);
    free(self->coordinator);
    memset(self, 0, sizeof *self);
}

int zt_layout_ordinal(const zt_layout_t *self, int pool, int index)
{
    return self->first[pool] + index;
}

const zt_place_t *zt_layout_place(const zt_layout_t *self, int pool, int index)
{
    return &self->placement.replicas[zt_layout_ordinal(self, pool, index)];
}

json_t *zt_pool_addresses(const zt_layout_t *self, int pool)
{
    json_t *list = json_array();
    for (int i = 0; self->plan->pools[pool].present && i < self->plan->pools[pool].replicas; i++) {
        const zt_place_t *pl = zt_layout_place(self, pool, i);
        json_array_append_new(list, json_sprintf("%s:%d", pl->addr, pl->port));
    }
    return list;
}

static json_t *s_task(const zt_layout_t *self, const char *type, int index)
{
    json_t *task = json_pack("{s:s, s:i}", "type", type, "index", index);
    if (self->trial)
        json_object_set_new(task, "trial", json_string(self->trial));
    return task;
}

json_t *zt_cluster_spec(const zt_layout_t *self, int pool, int index)
{
    json_t *cluster = json_object();
    for (int p = 0; p < ZT_POOLS; p++)
        if (self->plan->pools[p].present) {
            char key[16];
            snprintf(key, sizeof key, "workerpool%d", p);
            json_object_set_new(cluster, key, zt_pool_addresses(self, p));
        }
    char type[16];
    snprintf(type, sizeof type, "workerpool%d", pool);
    return json_pack("{s:o, s:s, s:o, s:O}", "cluster", cluster, "environment", "cloud", "task",
                     s_task(self, type, index), "job", self->plan->job);
}

json_t *zt_tf_config(const zt_layout_t *self, int pool, int index)
{
    if (zt_plan_replicas(self->plan) <= 1)
        return NULL;
    const char *chief = self->plan->tf_master ? "master" : "chief";
    json_t *cluster = json_object();
    for (int p = 0; p < 3; p++) /* evaluators are never part of the cluster */
        if (self->plan->pools[p].present)
            json_object_set_new(cluster, p == 0 ? chief : s_tf_types[p], zt_pool_addresses(self, p));
    const char *type = pool == 0 ? chief : s_tf_types[pool];
    return json_pack("{s:o, s:o, s:s, s:O}", "cluster", cluster, "task", s_task(self, type, index),
                     "environment", "cloud", "job", self->plan->job);
}

char *zt_replica_config_dir(const zt_layout_t *self, int pool, int index)
{
    char name[32];
    zt_replica_name(pool, index, name, sizeof name);
    return zt_strdupf("%s/config/%s", self->job_dir, name);
}

static void s_put(json_t *env, const char *name, const char *value)
{
    json_array_append_new(env, json_pack("[ss]", name, value));
}

static void s_put_json(json_t *env, const char *name, json_t *value)
{
    char *text = json_dumps(value, JSON_COMPACT);
    s_put(env, name, text);
    free(text);
    json_decref(value);
}

/* {"addr:port": host} for every replica. */
static json_t *s_hosts(const zt_layout_t *self)
{
    json_t *map = json_object();
    for (int i = 0; i < self->placement.n; i++) {
        const zt_place_t *pl = &self->placement.replicas[i];
        char key[300];
        snprintf(key, sizeof key, "%s:%d", pl->addr, pl->port);
        json_object_set_new(map, key, json_string(pl->host));
    }
    return map;
}

static void s_put_int(json_t *env, zt_env_t var, long long v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", v);
    s_put(env, zt_env_name(var), buf);
}

static void s_put_dir(json_t *env, zt_env_t var, const char *base, const char *sub)
{
    char *d = zt_strdupf("%s/%s/", base, sub);
    s_put(env, zt_env_name(var), d);
    free(d);
}

/* The frameworks' view: CLUSTER_SPEC, TF_CONFIG, and torch.distributed's
 * MASTER_ADDR / MASTER_PORT / WORLD_SIZE / RANK for the chief and workers. */
static void s_env_frameworks(json_t *env, const zt_layout_t *self, int pool, int index)
{
    const zt_plan_t *plan = self->plan;
    s_put_json(env, zt_env_name(ZT_ENV_CLUSTER_SPEC), zt_cluster_spec(self, pool, index));
    json_t *tf = zt_tf_config(self, pool, index);
    if (tf)
        s_put_json(env, zt_env_name(ZT_ENV_TF_CONFIG), tf);
    if (pool > 1)
        return;
    s_put(env, zt_env_name(ZT_ENV_MASTER_ADDR), zt_layout_place(self, 0, 0)->addr);
    s_put_int(env, ZT_ENV_MASTER_PORT, zt_layout_place(self, 0, 0)->port);
    s_put_int(env, ZT_ENV_WORLD_SIZE, 1 + (plan->pools[1].present ? plan->pools[1].replicas : 0));
    s_put_int(env, ZT_ENV_RANK, pool == 0 ? 0 : 1 + index);
}

/* SageMaker: every replica is a host algo-1..algo-N, in pool order. */
static void s_env_sagemaker(json_t *env, const zt_layout_t *self, int pool, int index)
{
    const zt_plan_t *plan = self->plan;
    json_t *hosts = json_array();
    char current[64] = "", buf[64];
    int n = 0;
    for (int p = 0; p < ZT_POOLS; p++)
        for (int i = 0; plan->pools[p].present && i < plan->pools[p].replicas; i++) {
            snprintf(buf, sizeof buf, "algo-%d", ++n);
            json_array_append_new(hosts, json_string(buf));
            if (p == pool && i == index)
                snprintf(current, sizeof current, "%s", buf);
        }
    s_put_json(env, zt_env_name(ZT_ENV_SM_HOSTS), json_incref(hosts));
    s_put(env, zt_env_name(ZT_ENV_SM_CURRENT_HOST), current);
    s_put_json(env, zt_env_name(ZT_ENV_SM_RESOURCE_CONFIG), json_pack("{s:s, s:o, s:s}", "current_host",
                                                                      current, "hosts", hosts,
                                                                      "network_interface_name", "lo"));
    char *d = zt_replica_config_dir(self, pool, index);
    s_put(env, zt_env_name(ZT_ENV_SM_INPUT_CONFIG_DIR), d);
    free(d);
}

/* For programs that link libztrain: the coordinator, who this replica is,
 * where it listens, its host and every replica's (shared memory and ipc://
 * only between replicas on one host), and what pool 2 is for the built-in
 * trainer (reducers or parameter servers). */
static void s_env_ztrain(json_t *env, const zt_layout_t *self, int pool, int index)
{
    const zt_place_t *me = zt_layout_place(self, pool, index);
    if (self->coordinator)
        s_put(env, zt_env_name(ZT_ENV_COORDINATOR), self->coordinator);
    s_put_int(env, ZT_ENV_POOL, pool);
    s_put_int(env, ZT_ENV_INDEX, index);
    s_put_int(env, ZT_ENV_INCARNATION, self->incarnation);
    char addr[300];
    snprintf(addr, sizeof addr, "%s:%d", me->addr, me->port);
    s_put(env, zt_env_name(ZT_ENV_ADDRESS), addr);
    s_put(env, zt_env_name(ZT_ENV_HOST), me->host);
    s_put_json(env, zt_env_name(ZT_ENV_HOSTS), s_hosts(self));
    s_put(env, zt_env_name(ZT_ENV_JOB_DIR), self->job_dir);
    zt_role_t r2 = self->plan->pools[2].present ? self->plan->pools[2].role : ZT_ROLE_NONE;
    if (pool > 1 || (r2 != ZT_ROLE_REDUCER && r2 != ZT_ROLE_PARAMSERVER))
        return;
    json_t *addrs = zt_pool_addresses(self, 2);
    char list[8192] = "";
    size_t i;
    json_t *a;
    json_array_foreach(addrs, i, a)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? "," : "", json_string_value(a));
    json_decref(addrs);
    s_put(env, zt_env_name(r2 == ZT_ROLE_REDUCER ? ZT_ENV_REDUCERS : ZT_ENV_PARAMSERVERS), list);
}

/* The pool's PYTHONPATH, then its own env[] last: it replaces what ztrain set. */
static void s_env_pool(json_t *env, const zt_pool_t *pp)
{
    if (pp->python_path) {
        const char *old = zt_env_get(ZT_ENV_PYTHONPATH);
        char *d = old && *old ? zt_strdupf("%s:%s", pp->python_path, old) : strdup(pp->python_path);
        s_put(env, zt_env_name(ZT_ENV_PYTHONPATH), d);
        free(d);
    }
    size_t k;
    json_t *e;
    json_array_foreach(pp->env, k, e) {
        const char *name = json_string_value(json_array_get(e, 0));
        for (size_t j = json_array_size(env); j-- > 0;)
            if (!strcmp(name, json_string_value(json_array_get(json_array_get(env, j), 0))))
                json_array_remove(env, j);
        json_array_append(env, e);
    }
}

json_t *zt_replica_env(const zt_layout_t *self, int pool, int index)
{
    json_t *env = json_array();
    s_env_frameworks(env, self, pool, index);
    /* Vertex's output directories under the job's base output directory. */
    s_put_dir(env, ZT_ENV_AIP_MODEL_DIR, self->base_dir, "model");
    s_put_dir(env, ZT_ENV_AIP_CHECKPOINT_DIR, self->base_dir, "checkpoints");
    s_put_dir(env, ZT_ENV_AIP_TENSORBOARD_LOG_DIR, self->base_dir, "logs");
    s_env_sagemaker(env, self, pool, index);
    /* GPUs: each replica sees only its own; none when it asked for none. */
    char buf[256] = "";
    const zt_place_t *me = zt_layout_place(self, pool, index);
    for (int g = 0; g < me->ngpus; g++)
        snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%d", g ? "," : "", me->first_gpu + g);
    s_put(env, zt_env_name(ZT_ENV_CUDA_VISIBLE_DEVICES), buf);
    if (self->trial) { /* cloudml-hypertune's metric file */
        s_put(env, zt_env_name(ZT_ENV_TRIAL_ID), self->trial);
        char *d = zt_strdupf("%s/hypertune/%s-%d.metric", self->base_dir, pool == 0 ? "chief" : "worker", index);
        s_put(env, zt_env_name(ZT_ENV_HP_METRIC_FILE), d);
        free(d);
    }
    s_env_ztrain(env, self, pool, index);
    s_env_pool(env, &self->plan->pools[pool]);
    return env;
}
