/* zt_sm_int: what the SageMaker format's parsers share: the
 * CreateTrainingJob request's reader (zt_spec_sagemaker.c), its data
 * (zt_spec_sm_data.c) and the tuning job's (zt_study_sagemaker.c). Private
 * to formats/sagemaker/. */
#ifndef ZT_SM_INT_H
#define ZT_SM_INT_H
#include "formats/sagemaker/zt_sagemaker.h"
#include "formats/zt_format.h"
#include "plan/zt_spec_int.h"
#include "plan/zt_doc.h"
#include <jansson.h>
#include <stdbool.h>

/* A SageMaker job's name (root's field key: TrainingJobName,
 * ProcessingJobName; 1 to 63 letters, digits and inner hyphens, an error
 * otherwise): the plan's display name and sm's job name (fallback when it
 * is missing). */
void zt_sm_job_name(zt_spec_ctx_t *c, json_t *root, const char *key, const char *fallback, zt_sm_plan_t *sm);
/* gcloud's override flags on a SageMaker request (a request's name, for
 * the message): --display-name applies, any other is an error. */
void zt_sm_apply_flags(zt_spec_ctx_t *c, const zt_plan_opts_t *opts, const char *request);
/* path (heap, taken) made absolute from the current folder (the chief
 * writes there at the end, from wherever it runs); NULL stays NULL. */
char *zt_sm_absolute(char *path);
/* An S3 source's S3DataDistributionType (sp its path): FullyReplicated
 * (the default) or ShardedByS3Key; an error otherwise. */
const char *zt_sm_distribution(zt_spec_ctx_t *c, json_t *s3, const char *sp);

/* A CreateTrainingJob request, into c->plan and its own part. */
void zt_sm_parse_request(zt_spec_ctx_t *c, json_t *root);
/* Its data: InputDataConfig's channels into sm's channels;
 * OutputDataConfig, CheckpointConfig and StoppingCondition. */
void zt_spec_sm_channels(zt_spec_ctx_t *c, json_t *root, zt_sm_plan_t *sm);
void zt_spec_sm_outputs(zt_spec_ctx_t *c, json_t *root, zt_sm_plan_t *sm);

/* A CreateHyperParameterTuningJob request (root has
 * HyperParameterTuningJobConfig), as the Vertex study the runner reads (a
 * new reference); its metric regex, Hyperband rungs and warm start in x. */
bool zt_study_is_sagemaker(json_t *root);
json_t *zt_study_from_sagemaker(zt_doc_t *doc, zt_diag_t *diag, bool allow, zt_study_extras_t *x);

#endif
