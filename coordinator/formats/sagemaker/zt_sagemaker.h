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
#include <stdbool.h>
#include <stddef.h>

/* A CreateTrainingJob's own part of its plan, or NULL for another
 * format's: {jobName, channels [{name, path, distribution, contentType,
 * recordWrapperType, groups}], outputPath, compress, checkpointPath,
 * checkpointLocalPath, hyperparameters, instanceGroups, mpi
 * {processesPerHost, options}, dataParallel, torchDistributed}. */
json_t *zt_sm_plan(const zt_plan_t *plan);
extern const zt_plan_own_ops_t zt_sm_own_ops;

/* algo-K of replica (pool, index): K is its place in the placement (pool
 * order), as SM_HOSTS numbers them. */
void zt_sm_host(const zt_layout_t *layout, int pool, int index, char *out, size_t size);
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
 * disjoint and together every file), as links under input/data/<channel>.
 * Again for a restarted host: the same share. 0, or -1 with why. */
int zt_sm_prepare_host(const zt_layout_t *layout, int pool, int index, char *why, size_t len);
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
 * its failure), trimmed, or NULL (heap). */
char *zt_sm_failure(const zt_layout_t *layout);

#endif
