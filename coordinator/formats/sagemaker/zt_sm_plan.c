/* A CreateTrainingJob's own part of its plan: what the plan keeps of the
 * request beyond the pools (zt_sagemaker.h: zt_sm_plan), how it is written
 * into the plan's JSON and printout, and freed. */
#include "formats/sagemaker/zt_sagemaker.h"
#include <stdio.h>

json_t *zt_sm_plan(const zt_plan_t *plan)
{
    return plan->own_ops == &zt_sm_own_ops ? plan->own : NULL;
}

static json_t *s_own_json(const void *own)
{
    return json_deep_copy(own);
}

static void s_own_print(const void *own, FILE *out)
{
    const char *sm_out = json_string_value(json_object_get(own, "outputPath"));
    if (sm_out)
        fprintf(out, "  model.tar.gz and output.tar.gz: %s/%s/output/\n", sm_out,
                json_string_value(json_object_get(own, "jobName")));
    size_t ci;
    json_t *ch;
    json_array_foreach(json_object_get(own, "channels"), ci, ch)
        fprintf(out, "  channel %s: %s (%s)\n", json_string_value(json_object_get(ch, "name")),
                json_string_value(json_object_get(ch, "path")), json_string_value(json_object_get(ch, "distribution")));
}

static void s_own_destroy(void *own)
{
    json_decref(own);
}

const zt_plan_own_ops_t zt_sm_own_ops = { "sagemaker", s_own_json, s_own_print, s_own_destroy };

