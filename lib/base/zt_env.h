/* zt_env: the replica's environment contract. Every variable ztrain sets
 * for a replica is named once here; the coordinator's launch code writes
 * them by these names, and a replica reads them only through these calls.
 * The formats of the managed services' variables (CLUSTER_SPEC, TF_CONFIG,
 * ...) are written in coordinator/launch/zt_layout.c. */
#ifndef ZT_ENV_H
#define ZT_ENV_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ZT_ENV_LIST(X)                                                                    \
    X(CLUSTER_SPEC,     "CLUSTER_SPEC",     "the job's pools and this replica's task (JSON)") \
    X(TF_CONFIG,        "TF_CONFIG",        "TensorFlow's cluster and task (JSON; jobs of 2+ replicas)") \
    X(MASTER_ADDR,      "MASTER_ADDR",      "PyTorch: the host of rank 0")                \
    X(MASTER_PORT,      "MASTER_PORT",      "PyTorch: the port of rank 0")                \
    X(WORLD_SIZE,       "WORLD_SIZE",       "PyTorch: replicas of pools 0 and 1")         \
    X(RANK,             "RANK",             "PyTorch: this replica's rank (chief 0)")     \
    X(LOCAL_RANK,       "LOCAL_RANK",       "torchrun: this process among the job's on its host (rank order)") \
    X(LOCAL_WORLD_SIZE, "LOCAL_WORLD_SIZE", "torchrun: processes of pools 0 and 1 on this host") \
    X(GROUP_RANK,       "GROUP_RANK",       "torchrun: this host's rank among the job's hosts") \
    X(NODE_RANK,        "NODE_RANK",        "the same as GROUP_RANK (torchrun's --node-rank)") \
    X(GROUP_WORLD_SIZE, "GROUP_WORLD_SIZE", "torchrun: hosts with a process of pools 0 and 1") \
    X(PET_NNODES,       "PET_NNODES",       "SageMaker torch_distributed: torchrun's --nnodes, the job's hosts") \
    X(PET_NODE_RANK,    "PET_NODE_RANK",    "SageMaker torch_distributed: torchrun's --node-rank, this host's (algo-K: K-1)") \
    X(PET_NPROC_PER_NODE, "PET_NPROC_PER_NODE", "SageMaker torch_distributed: torchrun's --nproc-per-node, the host's GPUs (1 without)") \
    X(PET_MASTER_ADDR,  "PET_MASTER_ADDR",  "SageMaker torch_distributed: torchrun's --master-addr, algo-1's") \
    X(PET_MASTER_PORT,  "PET_MASTER_PORT",  "SageMaker torch_distributed: torchrun's --master-port") \
    X(JOB_ID,           "CLOUD_ML_JOB_ID",  "the job's ID: its directory's name (a trial's: the study folder's name, then trial-N)") \
    X(AIP_MODEL_DIR,    "AIP_MODEL_DIR",    "where the final model goes")                 \
    X(AIP_CHECKPOINT_DIR, "AIP_CHECKPOINT_DIR", "where checkpoints go")                   \
    X(AIP_TENSORBOARD_LOG_DIR, "AIP_TENSORBOARD_LOG_DIR", "TensorBoard's log folder (the program's; the built-in roles write their scalars there)")                \
    X(SM_HOSTS,         "SM_HOSTS",         "SageMaker: every replica's host name (JSON)") \
    X(SM_CURRENT_HOST,  "SM_CURRENT_HOST",  "SageMaker: this replica's host name")        \
    X(SM_RESOURCE_CONFIG, "SM_RESOURCE_CONFIG", "SageMaker: resourceconfig.json's text")  \
    X(SM_INPUT_DIR,     "SM_INPUT_DIR",     "SageMaker: <base>/input")                    \
    X(SM_INPUT_CONFIG_DIR, "SM_INPUT_CONFIG_DIR", "SageMaker: the replica's config folder (hyperparameters.json, resourceconfig.json, inputdataconfig.json)") \
    X(SM_INPUT_DATA_CONFIG, "SM_INPUT_DATA_CONFIG", "SageMaker: inputdataconfig.json's text") \
    X(SM_MODEL_DIR,     "SM_MODEL_DIR",     "SageMaker: <base>/model")                    \
    X(SM_OUTPUT_DIR,    "SM_OUTPUT_DIR",    "SageMaker: <base>/output")                   \
    X(SM_OUTPUT_DATA_DIR, "SM_OUTPUT_DATA_DIR", "SageMaker: <base>/output/data/<current host>") \
    X(SM_OUTPUT_INTERMEDIATE_DIR, "SM_OUTPUT_INTERMEDIATE_DIR", "SageMaker: <base>/output/intermediate") \
    X(SM_CHECKPOINT_DIR, "SM_CHECKPOINT_DIR", "SageMaker: <base>/sagemaker-checkpoints, /opt/ml/checkpoints' counterpart: kept across restarts, requeues and --resume") \
    X(SM_NUM_CPUS,      "SM_NUM_CPUS",      "SageMaker: the machine type's vCPUs")        \
    X(SM_NUM_GPUS,      "SM_NUM_GPUS",      "SageMaker: this replica's GPUs")             \
    X(SM_LOG_LEVEL,     "SM_LOG_LEVEL",     "SageMaker: 20 (Python's INFO)")              \
    X(SM_NETWORK_INTERFACE_NAME, "SM_NETWORK_INTERFACE_NAME", "SageMaker: the interface replicas talk over") \
    X(SM_CURRENT_INSTANCE_TYPE, "SM_CURRENT_INSTANCE_TYPE", "SageMaker: this host's instance type") \
    X(SM_CURRENT_INSTANCE_GROUP, "SM_CURRENT_INSTANCE_GROUP", "SageMaker: this host's instance group (homogeneousCluster without InstanceGroups)") \
    X(SM_CURRENT_INSTANCE_GROUP_HOSTS, "SM_CURRENT_INSTANCE_GROUP_HOSTS", "SageMaker: the hosts of this host's group (JSON)") \
    X(SM_INSTANCE_GROUPS, "SM_INSTANCE_GROUPS", "SageMaker: the instance groups' names (JSON)") \
    X(SM_INSTANCE_GROUPS_DICT, "SM_INSTANCE_GROUPS_DICT", "SageMaker: each group's name, instance type and hosts (JSON)") \
    X(SM_IS_HETERO,     "SM_IS_HETERO",     "SageMaker: whether the job has InstanceGroups (JSON true or false)") \
    X(SM_CHANNELS,      "SM_CHANNELS",      "SageMaker: the folders in <base>/input/data/ (JSON list)") \
    X(SM_CHANNEL_,      "SM_CHANNEL_",      "SageMaker: prefix; SM_CHANNEL_<NAME> is channel name's folder") \
    X(SM_HPS,           "SM_HPS",           "SageMaker: the program's --name value arguments (JSON)") \
    X(SM_HP_,           "SM_HP_",           "SageMaker: prefix; SM_HP_<NAME> is one hyperparameter") \
    X(SM_USER_ARGS,     "SM_USER_ARGS",     "SageMaker: the hyperparameters as arguments (JSON list)") \
    X(SM_USER_ENTRY_POINT, "SM_USER_ENTRY_POINT", "SageMaker: the program")              \
    X(SM_TRAINING_ENV,  "SM_TRAINING_ENV",  "SageMaker: all of the above as one JSON object") \
    X(SAGEMAKER_BASE_DIR, "SAGEMAKER_BASE_DIR", "SageMaker (a CreateTrainingJob's hosts): the host's /opt/ml, <job-dir>/opt-ml/algo-K, where the training toolkit finds input/config/*.json and writes output/") \
    X(CUDA_VISIBLE_DEVICES, "CUDA_VISIBLE_DEVICES", "this replica's GPUs")                \
    X(TRIAL_ID,         "CLOUD_ML_TRIAL_ID", "the trial of a study")                      \
    X(HP_METRIC_FILE,   "CLOUD_ML_HP_METRIC_FILE", "where cloudml-hypertune writes the trial's metric") \
    X(COORDINATOR,      "ZT_COORDINATOR",   "the chief's control-plane endpoint")         \
    X(POOL,             "ZT_POOL",          "this replica's pool (0-3)")                  \
    X(INDEX,            "ZT_INDEX",         "this replica's index in its pool")           \
    X(INCARNATION,      "ZT_INCARNATION",   "the job attempt, from 0")                    \
    X(ADDRESS,          "ZT_ADDRESS",       "this replica's host:port")                   \
    X(HOST,             "ZT_HOST",          "this replica's host (its identity, from the launch backend)") \
    X(HOSTS,            "ZT_HOSTS",         "every replica's host: {\"addr:port\": host} (JSON)") \
    X(REJOIN,           "ZT_REJOIN",        "1: a synchronous trainer restarted into its running group, which takes its state from a live peer") \
    X(GROUP,            "ZT_GROUP",         "a trainer of an elastic pool: the membership generation it starts in") \
    X(EPOCH_WORLD,      "ZT_EPOCH_WORLD",   "a trainer of an elastic pool: the trainers an epoch's steps are counted for (the pool's replicaCount and the chief), whatever the group's size is now") \
    X(CREDENTIALS,      "ZT_CREDENTIALS",   "this replica's credentials file (its CURVE keys; the file is readable by the job's user only)") \
    X(JOB_DIR,          "ZT_JOB_DIR",       "the job directory")                          \
    X(REDUCERS,         "ZT_REDUCERS",      "pool 2's host:port list when it holds reducers") \
    X(PARAMSERVERS,     "ZT_PARAMSERVERS",  "pool 2's host:port list when it holds parameter servers") \
    X(FRAME_LIMIT,      "ZT_FRAME_LIMIT",   "the largest data-plane frame any replica of the job may send (bytes): every data socket drops a connection that announces a larger one, before reading it") \
    X(PEER_CONNECTIONS, "ZT_PEER_CONNECTIONS", "the most TCP connections one address may hold to a replica's process (4 per replica of the job, plus 16): a handshake from an address past it is refused") \
    X(MPI_HOSTS,        "ZT_MPI_HOSTS",     "SageMaker distribution mpi: where each host's ztrain-mpi listens, {\"algo-1\": \"host:port\"} (JSON)") \
    X(PYTHONPATH,       "PYTHONPATH",       "the pool's pythonPackageSpec folder first")

typedef enum {
#define ZT_X_(id, name, help) ZT_ENV_##id,
    ZT_ENV_LIST(ZT_X_)
#undef ZT_X_
    ZT_ENV_COUNT_
} zt_env_t;

/* The variable's name ("ZT_INDEX"). */
const char *zt_env_name(zt_env_t var);
/* The variable whose key (its id in ZT_ENV_LIST: "INDEX") is key; -1 when
 * none is. */
int zt_env_lookup(const char *key);
/* Its value, or NULL when unset. */
const char *zt_env_get(zt_env_t var);
/* True with *out when set to a whole decimal number. */
bool zt_env_int(zt_env_t var, int64_t *out);
/* The number, or def when unset or not a number. */
int64_t zt_env_int_or(zt_env_t var, int64_t def);
/* A comma-separated host:port list (ZT_REDUCERS...): NULL-terminated, heap;
 * *n its length (0 when unset). */
char **zt_env_list(zt_env_t var, int *n);

/* The host:port list of pool N from CLUSTER_SPEC (NULL-terminated, heap);
 * *n its length. An absent pool or no CLUSTER_SPEC gives an empty list. */
char **zt_env_pool(int pool, int *n);
/* "workerpoolP-I on HOST at ADDR" for the replica at addr ("host:port", or
 * with tcp://) as CLUSTER_SPEC and ZT_HOSTS name it; addr itself when the
 * job's cluster does not name it. */
void zt_env_describe_addr(const char *addr, char *out, size_t size);
/* The name of the replica at addr ("host:port" or with tcp://) as
 * CLUSTER_SPEC places it ("workerpool2-0"): true with name filled, false
 * (name "") when the job's cluster names no replica there, or only a place
 * of pool 1 (whose places are its members' ranks, not replica indices). */
bool zt_env_replica_at(const char *addr, char *name, size_t size);
/* The same for training rank `rank`: pool 0's replicas, then pool 1's. */
void zt_env_describe_rank(int rank, char *out, size_t size);
/* Splits a comma-separated list like zt_env_pool. */
char **zt_env_split(const char *text, int *n);
void zt_env_free(char **list);

#endif
