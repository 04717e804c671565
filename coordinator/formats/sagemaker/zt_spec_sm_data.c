/* A SageMaker CreateTrainingJob's data: InputDataConfig's channels (local
 * folders or files, each host's share), OutputDataConfig's path and
 * CheckpointConfig's folder. */
#include "formats/sagemaker/zt_sm_int.h"
#include "base/zt_util.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_knobs.h"
#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *zt_sm_absolute(char *path)
{
    char cwd[PATH_MAX];
    if (!path || path[0] == '/' || !getcwd(cwd, sizeof cwd))
        return path;
    char *abs = zt_strdupf("%s/%s", cwd, path);
    free(path);
    return abs;
}

const char *zt_sm_distribution(zt_spec_ctx_t *c, json_t *s3, const char *sp)
{
    const char *dist = zt_sf_str(c, s3, sp, "S3DataDistributionType", "FullyReplicated");
    if (strcmp(dist, "FullyReplicated") && strcmp(dist, "ShardedByS3Key")) {
        char *tp = zt_sf_path(sp, "S3DataDistributionType");
        json_t *tv = json_string(dist);
        ERR(c, tp, tv, "FullyReplicated (every host all files) or ShardedByS3Key (each host its share)");
        json_decref(tv);
        free(tp);
        dist = "FullyReplicated";
    }
    return dist;
}

/* S3DataSource.InstanceGroupNames: the groups whose hosts get channel ch
 * (each one of ResourceConfig.InstanceGroups) in its groups; none given:
 * every host (groups NULL). */
static void s_channel_groups(zt_spec_ctx_t *c, json_t *s3, const char *sp, zt_sm_channel_t *ch)
{
    json_t *names = json_object_get(s3, "InstanceGroupNames"), *v;
    if (!names)
        return;
    char *path = zt_sf_path(sp, "InstanceGroupNames");
    const zt_sm_plan_t *sm = zt_sm_plan(c->plan);
    size_t i;
    if (!json_is_array(names) || json_array_size(names) == 0)
        ERR(c, path, names, "a list of the instance groups whose hosts get the channel");
    ch->groups = calloc(json_array_size(names) + 1, sizeof *ch->groups);
    json_array_foreach(names, i, v) {
        bool known = false;
        for (int j = 0; j < sm->ngroups; j++)
            known = known || (json_is_string(v) && !strcmp(json_string_value(v), sm->groups[j].name));
        if (!known)
            ERR(c, path, v, "not a group of ResourceConfig.InstanceGroups%s", sm->ngroups ? "" : " (there are none)");
        else
            ch->groups[ch->ngroups++] = strdup(json_string_value(v));
    }
    free(path);
}

static void s_channel_free(zt_sm_channel_t *ch)
{
    for (int k = 0; k < ch->ngroups; k++)
        free(ch->groups[k]);
    free(ch->groups);
    memset(ch, 0, sizeof *ch);
}

/* Long on purpose: its fields in order, each checked where it is read.
 * One InputDataConfig channel: its name, its local folder (S3Uri as a
 * local path or file://, or a FileSystemDataSource's DirectoryPath) and
 * how it is spread over the hosts, into out; whether it is one. */
static bool s_channel(zt_spec_ctx_t *c, json_t *ch, const char *cp, json_t *seen, zt_sm_channel_t *out)
{
    static const char *const known[] = { "ChannelName", "DataSource", "ContentType", "CompressionType",
        "RecordWrapperType", "InputMode", "ShuffleConfig", NULL };
    zt_sf_unknown_fields(c, ch, cp, known);
    const char *name = zt_sf_str(c, ch, cp, "ChannelName", NULL);
    char *np = zt_sf_path(cp, "ChannelName");
    bool ok = name && *name && strlen(name) <= 64;
    for (const char *p = name; ok && *p; p++)
        ok = isalnum((unsigned char) *p) || *p == '.' || *p == '-' || *p == '_';
    json_t *nv = name ? json_string(name) : NULL;
    if (!ok)
        ERR(c, np, nv, name ? "a channel name is 1 to 64 letters, digits, '.', '-' or '_'" : "required");
    else if (json_object_get(seen, name))
        ERR(c, np, nv, "a second channel of this name");
    json_decref(nv);
    free(np);
    const char *mode = zt_sf_str(c, ch, cp, "InputMode", "File");
    if (strcmp(mode, "File")) {
        char *mp = zt_sf_path(cp, "InputMode");
        json_t *mv = json_string(mode);
        ERR(c, mp, mv, "only File mode here: the channel's files are on this machine's disk, so Pipe and "
            "FastFile (streams of S3 objects) have nothing to stream");
        json_decref(mv);
        free(mp);
    }
    const char *comp = zt_sf_str(c, ch, cp, "CompressionType", "None");
    if (strcmp(comp, "None")) {
        char *xp = zt_sf_path(cp, "CompressionType");
        ERR(c, xp, NULL, "only None: SageMaker decompresses only in Pipe mode");
        free(xp);
    }
    char *dp = zt_sf_path(cp, "DataSource");
    json_t *ds = zt_sf_obj(c, ch, cp, "DataSource");
    char *sp = zt_sf_path(dp, "S3DataSource"), *fp = zt_sf_path(dp, "FileSystemDataSource");
    json_t *s3 = ds ? zt_sf_obj(c, ds, dp, "S3DataSource") : NULL, *fs = ds ? zt_sf_obj(c, ds, dp, "FileSystemDataSource") : NULL;
    const char *uri = NULL, *dist = "FullyReplicated", *up = NULL;
    char *upath = NULL;
    if (s3) {
        static const char *const sknown[] = { "S3Uri", "S3DataType", "S3DataDistributionType", "AttributeNames",
            "InstanceGroupNames", "ModelAccessConfig", "HubAccessConfig", NULL };
        zt_sf_unknown_fields(c, s3, sp, sknown);
        uri = zt_sf_str(c, s3, sp, "S3Uri", NULL);
        up = upath = zt_sf_path(sp, "S3Uri");
        const char *type = zt_sf_str(c, s3, sp, "S3DataType", "S3Prefix");
        if (strcmp(type, "S3Prefix")) {
            char *tp = zt_sf_path(sp, "S3DataType");
            json_t *tv = json_string(type);
            ERR(c, tp, tv, "only S3Prefix here: every file under the folder (a manifest lists S3 objects)");
            json_decref(tv);
            free(tp);
        }
        s_channel_groups(c, s3, sp, out);
        dist = zt_sm_distribution(c, s3, sp);
    }
    else if (fs) {
        uri = zt_sf_str(c, fs, fp, "DirectoryPath", NULL);
        up = upath = zt_sf_path(fp, "DirectoryPath");
    }
    else
        ERR(c, dp, NULL, "required: S3DataSource (S3Uri: a local folder or file:// here) or FileSystemDataSource");
    char *local = uri ? zt_sf_local_path(c, up, uri) : NULL, real[PATH_MAX];
    struct stat st;
    bool made = false;
    if ((s3 || fs) && !uri)
        ERR(c, up, NULL, "required: the channel's folder (a local path or file:// here)");
    else if (local && (stat(local, &st) != 0 || !S_ISDIR(st.st_mode))) {
        json_t *v = json_string(uri);
        ERR(c, up, v, "no such folder on this machine");
        json_decref(v);
    }
    else if (local && ok) {
        if (st.st_mode & S_IWOTH) { /* said again, with what is left out, as each host's share is made */
            json_t *v = json_string(uri);
            WARN(c, up, v, "any user can write to this folder (mode %04o): anyone may add to the job's input "
                 "(links out of it are not followed)", (unsigned) (st.st_mode & 07777));
            json_decref(v);
        }
        out->name = strdup(name);
        out->path = strdup(realpath(local, real) ? real : local);
        out->distribution = strdup(dist);
        out->content_type = strdup(zt_sf_str(c, ch, cp, "ContentType", ""));
        out->record_wrapper = strdup(zt_sf_str(c, ch, cp, "RecordWrapperType", "None"));
        made = true;
    }
    if (!made)
        s_channel_free(out);
    free(local);
    free(upath);
    free(sp);
    free(fp);
    free(dp);
    return made;
}

/* InputDataConfig: every channel, into sm's channels. */
void zt_spec_sm_channels(zt_spec_ctx_t *c, json_t *root, zt_sm_plan_t *sm)
{
    json_t *seen = json_object(), *idc = json_object_get(root, "InputDataConfig");
    sm->channels = calloc(json_array_size(idc) + 1, sizeof *sm->channels);
    if (idc && !json_is_array(idc))
        ERR(c, "InputDataConfig", idc, "expected an array of channels");
    size_t i;
    json_t *ch;
    json_array_foreach(json_is_array(idc) ? idc : NULL, i, ch) {
        char *cp = zt_strdupf("InputDataConfig[%zu]", i);
        zt_sm_channel_t *one = &sm->channels[sm->nchannels];
        if (!json_is_object(ch))
            ERR(c, cp, ch, "expected a channel object");
        else if (s_channel(c, ch, cp, seen, one)) {
            json_object_set_new(seen, one->name, json_true());
            sm->nchannels++;
        }
        free(cp);
    }
    json_decref(seen);
}

/* OutputDataConfig, CheckpointConfig and StoppingCondition. */
void zt_spec_sm_outputs(zt_spec_ctx_t *c, json_t *root, zt_sm_plan_t *sm)
{
    zt_plan_t *plan = c->plan;
    json_t *odc = zt_sf_obj(c, root, "", "OutputDataConfig");
    const char *out = odc ? zt_sf_str(c, odc, "OutputDataConfig", "S3OutputPath", NULL) : NULL;
    if (!out)
        ERR(c, odc ? "OutputDataConfig.S3OutputPath" : "OutputDataConfig", NULL,
            "required: where model.tar.gz goes (a local folder or file:// here)");
    char *outp = out ? zt_sm_absolute(zt_sf_local_path(c, "OutputDataConfig.S3OutputPath", out)) : NULL;
    sm->output_path = outp;
    const char *gz = odc ? zt_sf_str(c, odc, "OutputDataConfig", "CompressionType", "GZIP") : "GZIP";
    if (strcmp(gz, "GZIP") && strcmp(gz, "NONE"))
        ERR(c, "OutputDataConfig.CompressionType", json_object_get(odc, "CompressionType"), "GZIP or NONE");
    sm->compress = !strcmp(gz, "GZIP");
    if (odc && json_object_get(odc, "KmsKeyId"))
        WARN(c, "OutputDataConfig.KmsKeyId", NULL, "ignored: the output is written as a file of yours (0600)");
    json_t *ck = zt_sf_obj(c, root, "", "CheckpointConfig");
    const char *cku = ck ? zt_sf_str(c, ck, "CheckpointConfig", "S3Uri", NULL) : NULL;
    if (ck && !cku)
        ERR(c, "CheckpointConfig.S3Uri", NULL, "required: the folder the checkpoints are kept in");
    sm->checkpoint_path = cku ? zt_sm_absolute(zt_sf_local_path(c, "CheckpointConfig.S3Uri", cku)) : NULL;
    const char *ckl = ck ? zt_sf_str(c, ck, "CheckpointConfig", "LocalPath", NULL) : NULL;
    if (ckl && ckl[0] != '/')
        ERR(c, "CheckpointConfig.LocalPath", json_object_get(ck, "LocalPath"), "an absolute path");
    else if (ckl) { /* held to the trusted-folder rule where it is (zt_sm_folders), never made */
        sm->checkpoint_local_path = strdup(ckl);
        WARN(c, "CheckpointConfig.LocalPath", NULL, "not synced to S3Uri: the program's checkpoint folder is "
             "CheckpointConfig.S3Uri itself (SM_CHECKPOINT_DIR); a program that writes to LocalPath keeps its "
             "files there only");
    }
    json_t *stop = zt_sf_obj(c, root, "", "StoppingCondition");
    plan->timeout_field = "StoppingCondition.MaxRuntimeInSeconds";
    if (stop) {
        plan->timeout_s = (double) zt_sf_int(c, stop, "StoppingCondition", "MaxRuntimeInSeconds", 86400, 1,
                                             2419200, "SageMaker's limit, 28 days", NULL);
        if (json_object_get(stop, "MaxWaitTimeInSeconds"))
            WARN(c, "StoppingCondition.MaxWaitTimeInSeconds", NULL, "nothing is waited for: the machines are yours");
        if (json_object_get(stop, "MaxPendingTimeInSeconds"))
            WARN(c, "StoppingCondition.MaxPendingTimeInSeconds", NULL, "nothing is waited for: the machines are yours");
    }
    else
        plan->timeout_s = 86400; /* SageMaker's default MaxRuntimeInSeconds */
}

