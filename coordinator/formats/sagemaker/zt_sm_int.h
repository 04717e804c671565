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
