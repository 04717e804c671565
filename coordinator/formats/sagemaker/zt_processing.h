/* zt_processing: what the SageMaker Processing format's files share
 * (formats/sagemaker/): its request's reader.
 * The plan's own part is SageMaker's (zt_sm_plan_t, processing set): its
 * hosts, inputs and outputs are a CreateTrainingJob's hosts and channels
 * placed under /opt/ml/processing. */
#ifndef ZT_PROCESSING_H
#define ZT_PROCESSING_H
#include "launch/zt_layout.h"
#include "plan/zt_spec_int.h"
#include <jansson.h>

/* A CreateProcessingJob request (root), into c->plan and its own part;
 * every problem in c's diag at its field. */
void zt_processing_parse(zt_spec_ctx_t *c, json_t *root);

#endif
