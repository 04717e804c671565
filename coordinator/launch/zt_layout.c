#include "launch/zt_layout.h"
#include "base/zt_env.h"
#include "wire/zt_auth.h"
#include "wire/zt_transport.h"
#include "base/zt_util.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_knobs.h"
#include <arpa/inet.h>
#include <assert.h>
#include <ctype.h>
#include <dirent.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const char *const s_tf_types[ZT_POOLS] = { "chief", "worker", "ps", "evaluator" };

void zt_layout_name(int pool, int index, char *buf, size_t size)
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
    self->group = -1;
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
    free(self->credentials);
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

void zt_layout_move(zt_layout_t *self, int pool, int index, const zt_place_t *pl)
{
    self->placement.replicas[zt_layout_ordinal(self, pool, index)] = *pl;
}

int zt_layout_dense(const zt_layout_t *self, int pool, int index)
{
    if (pool != 1 || !self->member)
        return index;
    if (!self->member[index])
        return -1;
    int dense = 0;
    for (int i = 0; i < index; i++)
        dense += self->member[i];
    return dense;
}

/* Pool 1's replica of dense index d (the inverse of zt_layout_dense). */
static int s_sparse(const zt_layout_t *self, int d)
{
    if (!self->member)
        return d;
    for (int i = 0; i < self->plan->pools[1].replicas; i++)
        if (self->member[i] && d-- == 0)
            return i;
    return 0;
}

json_t *zt_layout_pool_addresses(const zt_layout_t *self, int pool)
{
    json_t *list = json_array();
    for (int i = 0; self->plan->pools[pool].present && i < self->plan->pools[pool].replicas; i++) {
        if (zt_layout_dense(self, pool, i) < 0)
            continue;
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

json_t *zt_layout_cluster_spec(const zt_layout_t *self, int pool, int index)
{
    json_t *cluster = json_object();
    for (int p = 0; p < ZT_POOLS; p++)
        if (self->plan->pools[p].present) {
            char key[16];
            snprintf(key, sizeof key, "workerpool%d", p);
            json_object_set_new(cluster, key, zt_layout_pool_addresses(self, p));
        }
    char type[16];
    snprintf(type, sizeof type, "workerpool%d", pool);
    return json_pack("{s:o, s:s, s:o, s:O}", "cluster", cluster, "environment", "cloud", "task",
                     s_task(self, type, zt_layout_dense(self, pool, index)), "job", self->plan->job);
}

json_t *zt_layout_tf_config(const zt_layout_t *self, int pool, int index)
{
    if (zt_plan_replicas(self->plan) <= 1)
        return NULL;
    const char *chief = self->plan->tf_master ? "master" : "chief";
    json_t *cluster = json_object();
    for (int p = 0; p < 3; p++) /* evaluators are never part of the cluster */
        if (self->plan->pools[p].present)
            json_object_set_new(cluster, p == 0 ? chief : s_tf_types[p], zt_layout_pool_addresses(self, p));
    const char *type = pool == 0 ? chief : s_tf_types[pool];
    return json_pack("{s:o, s:o, s:s, s:O}", "cluster", cluster, "task",
                     s_task(self, type, zt_layout_dense(self, pool, index)), "environment", "cloud", "job",
                     self->plan->job);
}

void zt_layout_make_folders(const zt_layout_t *self)
{
    if (self->trial) {
        char *d = zt_strdupf("%s/hypertune", self->base_dir);
        zt_mkdir_p(d);
        free(d);
    }
}

char *zt_layout_hp_metric_file(const char *base_dir, int pool, int index)
{
    return zt_strdupf("%s/hypertune/%s-%d.metric", base_dir, pool == 0 ? "chief" : "worker", index);
}

char *zt_layout_config_dir(const zt_layout_t *self, int pool, int index)
{
    char name[32];
    zt_layout_name(pool, index, name, sizeof name);
    return zt_strdupf("%s/config/%s", self->job_dir, name);
}

void zt_layout_put(json_t *env, const char *name, const char *value)
{
    json_array_append_new(env, json_pack("[ss]", name, value));
}

void zt_layout_put_json(json_t *env, const char *name, json_t *value)
{
    char *text = json_dumps(value, JSON_COMPACT);
    zt_layout_put(env, name, text);
    free(text);
    json_decref(value);
}

json_t *zt_layout_hosts(const zt_layout_t *self)
{
    json_t *map = json_object();
    for (int i = 0; i < self->placement.n; i++) {
        const zt_place_t *pl = &self->placement.replicas[i];
        char key[300];
        snprintf(key, sizeof key, "%s:%d", pl->addr, pl->port);
        json_object_set_new(map, key, json_string(pl->host));
    }
    /* port 0: no replica's endpoint, a host the job's ports accept */
    const char *spare = self->placement.spare_hosts;
    for (size_t len; spare && *spare; spare += len + (spare[len] == ',')) {
        len = strcspn(spare, ",");
        char key[300], host[256];
        snprintf(host, sizeof host, "%.*s", (int) len, spare);
        snprintf(key, sizeof key, "%s:0", host);
        if (*host)
            json_object_set_new(map, key, json_string(host));
    }
    return map;
}

static void s_put_int(json_t *env, zt_env_t var, long long v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", v);
    zt_layout_put(env, zt_env_name(var), buf);
}

/* torchrun's view of where rank r runs: the node is the host. Nodes are
 * numbered in order of their first rank, processes on a node in rank order,
 * so RANK = the ranks of earlier nodes + LOCAL_RANK when ranks are placed
 * host by host, as every backend places them. */
typedef struct {
    int local_rank;         /* LOCAL_RANK: this process among its host's */
    int local_world;        /* LOCAL_WORLD_SIZE: processes of the job on its host */
    int node_rank;          /* GROUP_RANK / NODE_RANK: its host's rank */
    int nodes;              /* GROUP_WORLD_SIZE: hosts with a rank on them */
} s_node_t;

static const zt_place_t *s_rank_place(const zt_layout_t *self, int rank)
{
    return rank == 0 ? zt_layout_place(self, 0, 0) : zt_layout_place(self, 1, s_sparse(self, rank - 1));
}

static s_node_t s_node_of(const zt_layout_t *self, int rank, int world)
{
    s_node_t n = { 0, 0, 0, 0 };
    const char *mine = s_rank_place(self, rank)->host;
    const char **hosts = calloc((size_t) world, sizeof *hosts); /* in order of their first rank */
    for (int r = 0; r < world; r++) {
        const char *h = s_rank_place(self, r)->host;
        int node = 0;
        while (node < n.nodes && strcmp(hosts[node], h))
            node++;
        if (node == n.nodes)
            hosts[n.nodes++] = h;
        if (!strcmp(h, mine)) {
            n.node_rank = node;
            n.local_world++;
            n.local_rank += r < rank;
        }
    }
    free(hosts);
    return n;
}

/* The frameworks' view: CLUSTER_SPEC, TF_CONFIG, and torch.distributed's
 * (MASTER_*, WORLD_SIZE, RANK, and torchrun's per-node variables) for the
 * chief and workers. MASTER_PORT is a port of its own on the chief's host,
 * apart from its CLUSTER_SPEC port, so a program can open both. */
static void s_env_frameworks(json_t *env, const zt_layout_t *self, int pool, int index)
{
    const zt_plan_t *plan = self->plan;
    zt_layout_put_json(env, zt_env_name(ZT_ENV_CLUSTER_SPEC), zt_layout_cluster_spec(self, pool, index));
    json_t *tf = zt_layout_tf_config(self, pool, index);
    if (tf)
        zt_layout_put_json(env, zt_env_name(ZT_ENV_TF_CONFIG), tf);
    if (pool > 1 || plan->launcher == ZT_LAUNCH_MPI) /* mpi: each rank's are Open MPI's (OMPI_COMM_WORLD_*) */
        return;
    int world = 1;
    for (int i = 0; plan->pools[1].present && i < plan->pools[1].replicas; i++)
        world += zt_layout_dense(self, 1, i) >= 0;
    int rank = pool == 0 ? 0 : 1 + zt_layout_dense(self, 1, index);
    s_node_t node = s_node_of(self, rank, world);
    zt_layout_put(env, zt_env_name(ZT_ENV_MASTER_ADDR), zt_layout_place(self, 0, 0)->addr);
    s_put_int(env, ZT_ENV_MASTER_PORT, self->placement.master_port);
    s_put_int(env, ZT_ENV_WORLD_SIZE, world);
    s_put_int(env, ZT_ENV_RANK, rank);
    s_put_int(env, ZT_ENV_LOCAL_RANK, node.local_rank);
    s_put_int(env, ZT_ENV_LOCAL_WORLD_SIZE, node.local_world);
    s_put_int(env, ZT_ENV_GROUP_RANK, node.node_rank);
    s_put_int(env, ZT_ENV_NODE_RANK, node.node_rank);
    s_put_int(env, ZT_ENV_GROUP_WORLD_SIZE, node.nodes);
    if (plan->launcher == ZT_LAUNCH_TORCHRUN) { /* torchrun's own: one node per host */
        const zt_place_t *me = zt_layout_place(self, pool, index);
        s_put_int(env, ZT_ENV_PET_NNODES, world);
        s_put_int(env, ZT_ENV_PET_NODE_RANK, rank);
        s_put_int(env, ZT_ENV_PET_NPROC_PER_NODE, me->ngpus > 1 ? me->ngpus : 1);
        zt_layout_put(env, zt_env_name(ZT_ENV_PET_MASTER_ADDR), zt_layout_place(self, 0, 0)->addr);
        s_put_int(env, ZT_ENV_PET_MASTER_PORT, self->placement.master_port);
    }
}

/* The job's ZT_PEER_CONNECTIONS: 4 for each replica the job may have (an
 * elastic pool's most), plus 16: what the job's own processes on one host
 * could hold to one process, and little for anyone else. */
static int64_t s_job_peer_connections(const zt_plan_t *plan)
{
    int64_t n = 0;
    for (int p = 0; p < ZT_POOLS; p++)
        if (plan->pools[p].present)
            n += plan->pools[p].elastic_max > plan->pools[p].replicas ? plan->pools[p].elastic_max
                                                                      : plan->pools[p].replicas;
    return 4 * n + 16;
}

/* The job's ZT_FRAME_LIMIT: over every pool, its parameter-server chunk and
 * all-reduce piece (its own env's, else what every replica inherits). */
static int64_t s_job_frame_limit(const zt_plan_t *plan)
{
    int64_t best = 0;
    for (int p = 0; p < ZT_POOLS; p++) {
        int64_t chunk = zt_frame_bytes(), piece = zt_knob_int(ZT_KNOB_AR_PIECE_BYTES);
        size_t k;
        json_t *e;
        json_array_foreach(plan->pools[p].present ? plan->pools[p].env : NULL, k, e) {
            long long v;
            int knob = zt_knob_find(json_string_value(json_array_get(e, 0)));
            if (!zt_parse_int(json_string_value(json_array_get(e, 1)), &v) || v < 0)
                continue;
            if (knob == ZT_KNOB_PS_CHUNK_BYTES)
                chunk = v;
            else if (knob == ZT_KNOB_AR_PIECE_BYTES)
                piece = v;
        }
        int64_t lim = zt_frame_limit_for(chunk, piece);
        best = lim > best ? lim : best;
    }
    return best;
}

/* For programs that link libztrain: the coordinator, who this replica is,
 * where it listens, its host and every replica's (shared memory and ipc://
 * only between replicas on one host), and what pool 2 is for the built-in
 * trainer (reducers or parameter servers). */
static void s_env_ztrain(json_t *env, const zt_layout_t *self, int pool, int index)
{
    const zt_place_t *me = zt_layout_place(self, pool, index);
    if (self->coordinator)
        zt_layout_put(env, zt_env_name(ZT_ENV_COORDINATOR), self->coordinator);
    s_put_int(env, ZT_ENV_POOL, pool);
    s_put_int(env, ZT_ENV_INDEX, index);
    s_put_int(env, ZT_ENV_INCARNATION, self->incarnation);
    char addr[300];
    snprintf(addr, sizeof addr, "%s:%d", me->addr, me->port);
    zt_layout_put(env, zt_env_name(ZT_ENV_ADDRESS), addr);
    zt_layout_put(env, zt_env_name(ZT_ENV_HOST), me->host);
    zt_layout_put_json(env, zt_env_name(ZT_ENV_HOSTS), zt_layout_hosts(self));
    zt_layout_put(env, zt_env_name(ZT_ENV_JOB_DIR), self->job_dir);
    s_put_int(env, ZT_ENV_FRAME_LIMIT, s_job_frame_limit(self->plan));
    s_put_int(env, ZT_ENV_PEER_CONNECTIONS, s_job_peer_connections(self->plan));
    if (self->group >= 0 && pool <= 1) {
        s_put_int(env, ZT_ENV_GROUP, self->group);
        s_put_int(env, ZT_ENV_EPOCH_WORLD, self->epoch_world);
    }
    if (self->credentials) { /* the path only: the keys stay in the file */
        char name[64];
        zt_layout_name(pool, index, name, sizeof name);
        char *file = zt_auth_file(self->credentials, name);
        zt_layout_put(env, zt_env_name(ZT_ENV_CREDENTIALS), file);
        free(file);
    }
    zt_role_t r2 = self->plan->pools[2].present ? self->plan->pools[2].role : ZT_ROLE_NONE;
    if (pool > 1 || (r2 != ZT_ROLE_REDUCER && r2 != ZT_ROLE_PARAMSERVER))
        return;
    json_t *addrs = zt_layout_pool_addresses(self, 2);
    char list[8192] = "";
    size_t i;
    json_t *a;
    json_array_foreach(addrs, i, a)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? "," : "", json_string_value(a));
    json_decref(addrs);
    zt_layout_put(env, zt_env_name(r2 == ZT_ROLE_REDUCER ? ZT_ENV_REDUCERS : ZT_ENV_PARAMSERVERS), list);
}

/* The pool's PYTHONPATH (first; then the pool's packages; then what was
 * set), then its own env[] last: it replaces what ztrain set. */
static void s_env_pool(json_t *env, const zt_layout_t *self, int pool, const char *first)
{
    const zt_pool_t *pp = &self->plan->pools[pool];
    const char *old = zt_env_get(ZT_ENV_PYTHONPATH);
    first = first ? first : "";
    if (first[0] || pp->python_path) {
        char *d = zt_strdupf("%s%s%s%s%s", first, first[0] && pp->python_path ? ":" : "",
                             pp->python_path ? pp->python_path : "", old && *old ? ":" : "", old ? old : "");
        zt_layout_put(env, zt_env_name(ZT_ENV_PYTHONPATH), d);
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

json_t *zt_layout_env(const zt_layout_t *self, int pool, int index)
{
    json_t *env = json_array();
    s_env_frameworks(env, self, pool, index);
    return env;
}

void zt_layout_env_finish(json_t *env, const zt_layout_t *self, int pool, int index, const char *python_first)
{
    /* GPUs: each replica sees only its own; none when it asked for none. */
    char buf[256] = "";
    const zt_place_t *me = zt_layout_place(self, pool, index);
    for (int g = 0; g < me->ngpus; g++)
        snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%d", g ? "," : "", me->first_gpu + g);
    zt_layout_put(env, zt_env_name(ZT_ENV_CUDA_VISIBLE_DEVICES), buf);
    if (self->trial) { /* cloudml-hypertune's metric file */
        zt_layout_put(env, zt_env_name(ZT_ENV_TRIAL_ID), self->trial);
        char *d = zt_layout_hp_metric_file(self->base_dir, pool, index);
        zt_layout_put(env, zt_env_name(ZT_ENV_HP_METRIC_FILE), d);
        free(d);
    }
    s_env_ztrain(env, self, pool, index);
    s_env_pool(env, self, pool, python_first);
}

const char *zt_layout_env_value(json_t *env, const char *name)
{
    size_t i;
    json_t *e;
    json_array_foreach(env, i, e)
        if (!strcmp(json_string_value(json_array_get(e, 0)), name))
            return json_string_value(json_array_get(e, 1));
    return NULL;
}

/* ------------------------------------------------------------ selftest */

/* torchrun's per-node variables on a placement over two hosts: the chief
 * and worker 0 on host a, workers 1 and 2 on host b. */
void zt_layout_selftest(void)
{
    zt_plan_t plan;
    memset(&plan, 0, sizeof plan);
    plan.display_name = "selftest";
    plan.job = json_object();
    for (int p = 0; p < 3; p++) {
        plan.pools[p].present = true;
        plan.pools[p].replicas = p == 0 ? 1 : p == 1 ? 3 : 1;
        plan.pools[p].argv = json_pack("[s, s, s, s]", "python3", "t.py", "--lr", "0.5");
        plan.pools[p].env = json_array();
    }
    zt_placement_t pl = { calloc(5, sizeof(zt_place_t)), 5, 7000, "127.0.0.1", NULL };
    const char *hosts[5] = { "a", "a", "b", "b", "a" };
    for (int i = 0; i < 5; i++) {
        snprintf(pl.replicas[i].host, sizeof pl.replicas[i].host, "%s", hosts[i]);
        snprintf(pl.replicas[i].addr, sizeof pl.replicas[i].addr, "10.0.0.%d", i);
        pl.replicas[i].port = 6000 + i;
    }
    zt_layout_t lay;
    assert(zt_layout_init(&lay, &plan, &pl, "/tmp/zt-selftest-job", NULL) == ZT_OK);
    /* rank: local rank, local world, node */
    const int want[4][3] = { { 0, 2, 0 }, { 1, 2, 0 }, { 0, 2, 1 }, { 1, 2, 1 } };
    for (int rank = 0; rank < 4; rank++) {
        json_t *env = zt_layout_env(&lay, rank ? 1 : 0, rank ? rank - 1 : 0);
        char buf[3][16];
        for (int k = 0; k < 3; k++)
            snprintf(buf[k], sizeof buf[k], "%d", want[rank][k]);
        assert(!strcmp(zt_layout_env_value(env, "LOCAL_RANK"), buf[0]));
        assert(!strcmp(zt_layout_env_value(env, "LOCAL_WORLD_SIZE"), buf[1]));
        assert(!strcmp(zt_layout_env_value(env, "GROUP_RANK"), buf[2]));
        assert(!strcmp(zt_layout_env_value(env, "NODE_RANK"), buf[2]));
        assert(!strcmp(zt_layout_env_value(env, "GROUP_WORLD_SIZE"), "2"));
        assert(!strcmp(zt_layout_env_value(env, "MASTER_ADDR"), "10.0.0.0"));
        assert(!strcmp(zt_layout_env_value(env, "MASTER_PORT"), "7000"));
        json_decref(env);
    }
    json_t *ps = zt_layout_env(&lay, 2, 0); /* not a rank: no torch variables */
    assert(!zt_layout_env_value(ps, "LOCAL_RANK") && !zt_layout_env_value(ps, "RANK"));
    json_decref(ps);
    zt_layout_fini(&lay);
    for (int p = 0; p < 3; p++) {
        json_decref(plan.pools[p].argv);
        json_decref(plan.pools[p].env);
    }
    json_decref(plan.job);
}
