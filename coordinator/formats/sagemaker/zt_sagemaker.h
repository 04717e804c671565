/* zt_sagemaker: a SageMaker CreateTrainingJob's hosts on this machine or
 * cluster. Each host algo-K has its own /opt/ml under the job directory
 * (<job-dir>/opt-ml/algo-K): input/data/<channel> holding links to its share
 * of the channel's files, model/ and output/. At the end the primary host's
 * model/ becomes model.tar.gz and every host's output/data output.tar.gz,
 * under S3OutputPath/<TrainingJobName>/output/, as SageMaker uploads them. */
#ifndef ZT_SAGEMAKER_H
#define ZT_SAGEMAKER_H
#include "launch/zt_layout.h"
#include "base/zt_util.h"
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* An instance group of ResourceConfig.InstanceGroups. */
typedef struct {
    char *name;              /* InstanceGroupName ("" when it was not one) */
    char *type;              /* InstanceType ("" when missing) */
    long long count;         /* InstanceCount */
    int pool;                /* its hosts' pool: 0 (and 1) for the first group, then 2, then 3 */
} zt_sm_group_t;

/* An InputDataConfig channel. */
typedef struct {
    char *name;              /* ChannelName */
    char *path;              /* its folder on this machine (a real path) */
    char *distribution;      /* FullyReplicated or ShardedByS3Key */
    char *content_type;      /* ContentType, "" when not given */
    char *record_wrapper;    /* RecordWrapperType */
    char **groups;           /* InstanceGroupNames: the groups whose hosts get it; NULL: every host */
    int ngroups;
    char *local;             /* a processing input's folder under the host's /opt/ml (its LocalPath less
                              * "/opt/ml/"); NULL: input/data/<name> */
} zt_sm_channel_t;

/* A processing job's output (ProcessingOutputConfig.Outputs[]). */
typedef struct {
    char *name;              /* OutputName */
    char *local;             /* its folder under the host's /opt/ml (LocalPath less "/opt/ml/") */
    char *dest;              /* S3Output.S3Uri: the folder here every host's files go to, absolute */
} zt_sm_output_t;

/* A CreateTrainingJob's own part of its plan (plan->own), typed. */
typedef struct {
    char *job_name;          /* TrainingJobName */
    zt_sm_group_t *groups;   /* ResourceConfig.InstanceGroups; none: one homogeneous cluster */
    int ngroups;
    bool mpi;                /* distribution mpi: the primary's mpirun runs every host's ranks */
    int mpi_processes_per_host;
    char *mpi_options;       /* sagemaker_mpi_custom_mpi_options, "" for none */
    bool data_parallel;      /* smdistributed's data parallelism: reducers in pool 2 */
    bool torch_distributed;  /* torchrun's variables (and, with GPUs, torchrun) */
    zt_sm_channel_t *channels;
    int nchannels;
    char *output_path;       /* OutputDataConfig.S3OutputPath, absolute; NULL when missing */
    bool compress;           /* CompressionType GZIP */
    char *checkpoint_path;   /* CheckpointConfig.S3Uri, absolute, or NULL */
    char *checkpoint_local_path; /* CheckpointConfig.LocalPath, or NULL */
    json_t *hyperparameters; /* HyperParameters: {name: "value"} */
    bool processing;         /* a CreateProcessingJob's (zt_processing.c): its inputs and outputs under
                              * each host's /opt/ml/processing, its config files in /opt/ml/config */
    zt_sm_output_t *outputs; /* ProcessingOutputConfig.Outputs */
    int noutputs;
} zt_sm_plan_t;

/* The plan's own part, or NULL for another format's plan. */
const zt_sm_plan_t *zt_sm_plan(const zt_plan_t *plan);
/* A new one, empty, made plan's own part. */
zt_sm_plan_t *zt_sm_plan_new(zt_plan_t *plan);

/* pool as the primary's hosts (its program, environment and machine), with
 * replicas of them; its own argv and env arrays are kept and filled. */
void zt_sm_copy_pool(zt_pool_t *pool, const zt_pool_t *primary, int replicas);

/* algo-K of replica (pool, index): K is its place in the placement (pool
 * order), as SM_HOSTS numbers them. */
void zt_sm_host(const zt_layout_t *layout, int pool, int index, char *out, size_t size);
/* Every host's name, algo-1 first: ["algo-1", ...] (SM_HOSTS). */
json_t *zt_sm_host_list(const zt_layout_t *layout);
/* Every host's name and where its replica runs: {"algo-1": "addr"}, or
 * with ports {"algo-1": "addr:port"}. */
json_t *zt_sm_host_places(const zt_layout_t *layout, bool ports);
/* Every host's name and the address its replica runs at: {"algo-1": addr,
 * ...}; NULL for the distribution mpi, whose hosts reach each other
 * through ztrain-mpi (ZT_MPI_HOSTS): Open MPI's mpirun takes a host whose
 * name resolves to an address of this machine for itself, and would start
 * every rank of a one-machine job on the primary. */
json_t *zt_sm_host_names(const zt_layout_t *layout);
/* The instance groups, SageMaker's way: [{instance_group_name,
 * instance_type, hosts}], ResourceConfig.InstanceGroups' in order (the
 * first is pools 0 and 1, the second pool 2, the third pool 3), or one
 * "homogeneousCluster" of every host; *mine (when not NULL) the index of
 * replica (pool, index)'s group. */
json_t *zt_sm_groups(const zt_layout_t *layout, int pool, int *mine);
/* Whether pool's replicas are SageMaker hosts: every pool's but the
 * reducers that stand in for smdistributed's servers. */
bool zt_sm_is_host(const zt_plan_t *plan, int pool);
/* Whether the job's distribution is mpi: the primary's mpirun runs every
 * host's processes (the other hosts run `ztrain-mpi host`). */
bool zt_sm_mpi(const zt_plan_t *plan);
/* Whether a SageMaker job waits for pool's programs to end: the hosts'
 * (not smdistributed's stand-in reducers), and with mpi the primary's
 * alone. The job succeeds when every one it waits for has. */
bool zt_sm_awaited(const zt_plan_t *plan, int pool);
/* A replica that is a SageMaker host. */
typedef struct {
    int pool, index;
} zt_sm_ref_t;
/* Every SageMaker host of the job, algo-1 first (heap; *n of them). */
zt_sm_ref_t *zt_sm_hosts(const zt_plan_t *plan, int *n);
/* <job-dir>/opt-ml/algo-K (heap). */
char *zt_sm_host_root(const zt_layout_t *layout, int pool, int index);
/* A CreateTrainingJob's own in SM_TRAINING_ENV e of replica (pool,
 * index): its host's folders, its channels and their input configs, the
 * checkpoint folder. Nothing for another format. */
void zt_sm_training_env(const zt_layout_t *layout, int pool, int index, json_t *e);
/* A channel's folder is walked without following a link out of it (a link
 * to a file inside it is taken as that file), at most this deep and with at
 * most this many files: past either, the job fails naming the channel. */
#define ZT_SM_CHANNEL_MAX_DEPTH 64
#define ZT_SM_CHANNEL_MAX_FILES 1000000
/* Makes the host's folders and its channels: every file of a
 * FullyReplicated channel, and of a ShardedByS3Key one the files whose
 * place in the sorted list is K-1 modulo the hosts (the shares are
 * disjoint and together every file), as links under input/data/<channel>
 * (a processing input's: under its LocalPath; a file given as the input
 * itself: a link of its name there). A processing job's hosts get
 * config/, output/ and each output's folder instead of training's.
 * Again for a restarted host: the same share. 0, or -1 with why. */
int zt_sm_prepare_host(const zt_layout_t *layout, int pool, int index, char *why, size_t len);
/* files ({name: JSON document}, taken) written into the host's
 * <job-dir>/opt-ml/algo-K/sub (made). 0, or -1 with why. */
int zt_sm_write_config(const zt_layout_t *layout, int pool, int index, const char *sub, json_t *files, char *why,
                       size_t len);
/* The folders a CreateTrainingJob writes or reads as its own (its output
 * folder S3OutputPath/<TrainingJobName>/output, CheckpointConfig.S3Uri, and
 * CheckpointConfig.LocalPath, which is only checked),
 * each held to the trusted-folder rule (zt_dir_open_trusted): made 0700
 * (ZT_DIR_MAKE, at run) or checked (ZT_DIR_CHECK, at validate). 0, or -1
 * with the field, the folder, its owner and mode in why. */
int zt_sm_folders(const zt_plan_t *plan, zt_dir_mode_t mode, char *why, size_t len);
/* The job's end: model.tar.gz (or, CompressionType NONE, model/ copied as
 * a tar) and output.tar.gz under outputPath/<jobName>/output/. 0, or -1
 * with why. */
int zt_sm_upload(const zt_layout_t *layout, char *why, size_t len);
/* The first host's output/failure text (what a failed program says of
 * its failure; a processing job's: output/message), trimmed, or NULL
 * (heap). */
char *zt_sm_failure(const zt_layout_t *layout);

#endif
