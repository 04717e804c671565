/* A CreateTrainingJob's own part of its plan (zt_sm_plan_t): made by the
 * parser, read by the rest of the format, written into the plan's JSON
 * (its "sagemaker" object) and printout, and freed with the plan. */
#include "formats/sagemaker/zt_sagemaker.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const zt_plan_own_ops_t s_ops;

const zt_sm_plan_t *zt_sm_plan(const zt_plan_t *plan)
{
    return plan->own_ops == &s_ops ? plan->own : NULL;
}

static json_t *s_groups_json(const zt_sm_plan_t *sm)
{
    json_t *list = json_array();
    for (int i = 0; i < sm->ngroups; i++)
        json_array_append_new(list, json_pack("{s:s, s:s, s:I, s:i}", "name", sm->groups[i].name, "type",
                                              sm->groups[i].type, "count", (json_int_t) sm->groups[i].count,
                                              "pool", sm->groups[i].pool));
    return list;
}

static json_t *s_channels_json(const zt_sm_plan_t *sm)
{
    json_t *list = json_array();
    for (int i = 0; i < sm->nchannels; i++) {
        const zt_sm_channel_t *ch = &sm->channels[i];
        json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s}", "name", ch->name, "path", ch->path, "distribution",
                              ch->distribution, "contentType", ch->content_type, "recordWrapperType",
                              ch->record_wrapper);
        if (ch->local)
            json_object_set_new(o, "localPath", json_sprintf("/opt/ml/%s", ch->local));
        if (ch->groups) {
            json_t *g = json_array();
            for (int k = 0; k < ch->ngroups; k++)
                json_array_append_new(g, json_string(ch->groups[k]));
            json_object_set_new(o, "groups", g);
        }
        json_array_append_new(list, o);
    }
    return list;
}

/* {jobName, instanceGroups, mpi | dataParallel, torchDistributed, channels,
 * outputPath, compress, checkpointPath, checkpointLocalPath, hyperparameters},
 * each only when it holds something. */
static json_t *s_json(const void *own)
{
    const zt_sm_plan_t *sm = own;
    json_t *o = json_pack("{s:s}", "jobName", sm->job_name);
    if (sm->ngroups)
        json_object_set_new(o, "instanceGroups", s_groups_json(sm));
    if (sm->mpi)
        json_object_set_new(o, "mpi", json_pack("{s:i, s:s}", "processesPerHost", sm->mpi_processes_per_host,
                                                "options", sm->mpi_options));
    if (sm->data_parallel)
        json_object_set_new(o, "dataParallel", json_true());
    if (sm->torch_distributed)
        json_object_set_new(o, "torchDistributed", json_true());
    json_object_set_new(o, "channels", s_channels_json(sm));
    if (sm->output_path)
        json_object_set_new(o, "outputPath", json_string(sm->output_path));
    json_object_set_new(o, "compress", json_boolean(sm->compress));
    if (sm->checkpoint_path)
        json_object_set_new(o, "checkpointPath", json_string(sm->checkpoint_path));
    if (sm->checkpoint_local_path)
        json_object_set_new(o, "checkpointLocalPath", json_string(sm->checkpoint_local_path));
    json_object_set(o, "hyperparameters", sm->hyperparameters);
    if (sm->processing) {
        json_t *outs = json_array();
        for (int i = 0; i < sm->noutputs; i++)
            json_array_append_new(outs, json_pack("{s:s, s:s+, s:s}", "name", sm->outputs[i].name, "localPath",
                                                  "/opt/ml/", sm->outputs[i].local, "destination", sm->outputs[i].dest));
        json_object_set_new(o, "processing", json_pack("{s:o}", "outputs", outs));
    }
    return o;
}

static void s_print(const void *own, FILE *out)
{
    const zt_sm_plan_t *sm = own;
    if (sm->output_path)
        fprintf(out, "  model.tar.gz and output.tar.gz: %s/%s/output/\n", sm->output_path, sm->job_name);
    for (int i = 0; i < sm->nchannels; i++)
        fprintf(out, "  %s %s: %s (%s)%s%s\n", sm->processing ? "input" : "channel", sm->channels[i].name,
                sm->channels[i].path, sm->channels[i].distribution, sm->channels[i].local ? " at /opt/ml/" : "",
                sm->channels[i].local ? sm->channels[i].local : "");
    for (int i = 0; i < sm->noutputs; i++)
        fprintf(out, "  output %s: /opt/ml/%s to %s\n", sm->outputs[i].name, sm->outputs[i].local,
                sm->outputs[i].dest);
}

static void s_destroy(void *own)
{
    zt_sm_plan_t *sm = own;
    for (int i = 0; i < sm->ngroups; i++) {
        free(sm->groups[i].name);
        free(sm->groups[i].type);
    }
    for (int i = 0; i < sm->nchannels; i++) {
        zt_sm_channel_t *ch = &sm->channels[i];
        free(ch->name);
        free(ch->path);
        free(ch->distribution);
        free(ch->content_type);
        free(ch->record_wrapper);
        for (int k = 0; k < ch->ngroups; k++)
            free(ch->groups[k]);
        free(ch->groups);
        free(ch->local);
    }
    for (int i = 0; i < sm->noutputs; i++) {
        free(sm->outputs[i].name);
        free(sm->outputs[i].local);
        free(sm->outputs[i].dest);
    }
    free(sm->outputs);
    free(sm->groups);
    free(sm->channels);
    free(sm->job_name);
    free(sm->mpi_options);
    free(sm->output_path);
    free(sm->checkpoint_path);
    free(sm->checkpoint_local_path);
    json_decref(sm->hyperparameters);
    free(sm);
}

static const zt_plan_own_ops_t s_ops = { "sagemaker", s_json, s_print, s_destroy };

zt_sm_plan_t *zt_sm_plan_new(zt_plan_t *plan)
{
    zt_sm_plan_t *sm = calloc(1, sizeof *sm);
    sm->job_name = strdup("");
    sm->hyperparameters = json_object();
    plan->own = sm;
    plan->own_ops = &s_ops;
    return sm;
}
