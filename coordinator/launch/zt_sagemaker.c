#include "launch/zt_sagemaker.h"
#include "zt_tar.h"
#include "base/zt_util.h"
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void zt_sm_host(const zt_layout_t *layout, int pool, int index, char *out, size_t size)
{
    snprintf(out, size, "algo-%d", zt_layout_ordinal(layout, pool, index) + 1);
}

bool zt_sm_is_host(const zt_plan_t *plan, int pool)
{
    return !(plan->sagemaker && pool == 2 && json_is_true(json_object_get(plan->sagemaker, "dataParallel")));
}

bool zt_sm_mpi(const zt_plan_t *plan)
{
    return plan->sagemaker && json_object_get(plan->sagemaker, "mpi");
}

bool zt_sm_awaited(const zt_plan_t *plan, int pool)
{
    return zt_sm_is_host(plan, pool) && !(zt_sm_mpi(plan) && pool > 0);
}

zt_sm_ref_t *zt_sm_hosts(const zt_plan_t *plan, int *n)
{
    zt_sm_ref_t *out = calloc((size_t) zt_plan_replicas(plan) + 1, sizeof *out);
    *n = 0;
    for (int p = 0; p < ZT_POOLS; p++)
        for (int r = 0; plan->pools[p].present && zt_sm_is_host(plan, p) && r < plan->pools[p].replicas; r++)
            out[(*n)++] = (zt_sm_ref_t) { p, r };
    return out;
}

/* The group index of a host of pool: 0 for pools 0 and 1. */
static int s_group_of(const json_t *groups, int pool)
{
    size_t i;
    json_t *g;
    json_array_foreach(groups, i, g)
        if (json_integer_value(json_object_get(g, "pool")) == pool)
            return (int) i;
    return 0;
}

json_t *zt_sm_groups(const zt_layout_t *layout, int pool, int *mine)
{
    const zt_plan_t *plan = layout->plan;
    const json_t *given = plan->sagemaker ? json_object_get(plan->sagemaker, "instanceGroups") : NULL;
    json_t *out = json_array();
    if (!given)
        json_array_append_new(out, json_pack("{s:s, s:s, s:[]}", "instance_group_name", "homogeneousCluster",
                                             "instance_type", plan->pools[0].machine.name, "hosts"));
    size_t i;
    json_t *g;
    json_array_foreach(given, i, g)
        json_array_append_new(out, json_pack("{s:O, s:O, s:[]}", "instance_group_name", json_object_get(g, "name"),
                                             "instance_type", json_object_get(g, "type"), "hosts"));
    int n;
    zt_sm_ref_t *h = zt_sm_hosts(plan, &n);
    for (int k = 0; k < n; k++) {
        char host[32];
        zt_sm_host(layout, h[k].pool, h[k].index, host, sizeof host);
        json_t *grp = json_array_get(out, given ? (size_t) s_group_of(given, h[k].pool) : 0);
        json_array_append_new(json_object_get(grp, "hosts"), json_string(host));
    }
    free(h);
    if (mine)
        *mine = given ? s_group_of(given, pool) : 0;
    return out;
}

/* Whether hosts of pool get channel ch: every host, or those of the
 * groups it names (InstanceGroupNames). */
static bool s_gets(const zt_layout_t *layout, int pool, const json_t *ch)
{
    const json_t *only = json_object_get(ch, "groups"), *given = json_object_get(layout->plan->sagemaker,
                                                                                 "instanceGroups");
    if (!only)
        return true;
    const char *mine = json_string_value(json_object_get(json_array_get(given, (size_t) s_group_of(given, pool)),
                                                         "name"));
    size_t i;
    json_t *v;
    json_array_foreach(only, i, v)
        if (mine && !strcmp(json_string_value(v), mine))
            return true;
    return false;
}

char *zt_sm_host_root(const zt_layout_t *layout, int pool, int index)
{
    char host[32];
    zt_sm_host(layout, pool, index, host, sizeof host);
    return zt_strdupf("%s/opt-ml/%s", layout->job_dir, host);
}

void zt_sm_training_env(const zt_layout_t *layout, int pool, int index, json_t *e)
{
    const json_t *sm = layout->plan->sagemaker;
    if (!sm)
        return;
    char *root = zt_sm_host_root(layout, pool, index);
    static const char *const dirs[][2] = { { "input_dir", "input" }, { "model_dir", "model" },
        { "output_dir", "output" }, { "output_data_dir", "output/data" },
        { "output_intermediate_dir", "output/intermediate" } };
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++)
        json_object_set_new(e, dirs[i][0], json_sprintf("%s/%s", root, dirs[i][1]));
    json_t *channels = json_object(), *config = json_object(), *ch;
    size_t i;
    json_array_foreach(json_object_get(sm, "channels"), i, ch) {
        const char *name = json_string_value(json_object_get(ch, "name"));
        if (!s_gets(layout, pool, ch)) /* not for this host's instance group */
            continue;
        json_object_set_new(channels, name, json_sprintf("%s/input/data/%s", root, name));
        json_t *c = json_pack("{s:s, s:O, s:O}", "TrainingInputMode", "File", "S3DistributionType",
                              json_object_get(ch, "distribution"), "RecordWrapperType",
                              json_object_get(ch, "recordWrapperType"));
        const char *ct = json_string_value(json_object_get(ch, "contentType"));
        if (ct && *ct)
            json_object_set_new(c, "ContentType", json_string(ct));
        json_object_set_new(config, name, c);
    }
    json_object_set_new(e, "channel_input_dirs", channels);
    json_object_set_new(e, "input_data_config", config);
    if (json_object_get(sm, "checkpointPath")) /* CheckpointConfig.S3Uri: one folder every host shares */
        json_object_set(e, "checkpoint_dir", json_object_get(sm, "checkpointPath"));
    free(root);
}

/* Every regular file under dir, as paths relative to it, sorted (as S3
 * lists a prefix's keys). */
static void s_files(const char *dir, const char *rel, json_t *out)
{
    struct dirent **list = NULL;
    int n = scandir(dir, &list, NULL, alphasort);
    for (int i = 0; i < n; i++) {
        const char *e = list[i]->d_name;
        if (strcmp(e, ".") && strcmp(e, "..")) {
            char *path = zt_strdupf("%s/%s", dir, e), *name = zt_strdupf("%s%s%s", rel, *rel ? "/" : "", e);
            struct stat st;
            if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
                s_files(path, name, out);
            else if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
                json_array_append_new(out, json_string(name));
            free(path);
            free(name);
        }
        free(list[i]);
    }
    free(list);
}

/* A link at root/rel to target, its folders made. */
static int s_link(const char *root, const char *rel, const char *target, char *why, size_t len)
{
    char *at = zt_strdupf("%s/%s", root, rel), *slash = strrchr(at, '/');
    *slash = 0;
    int rc = zt_mkdir_p(at);
    *slash = '/';
    if (rc == 0 && symlink(target, at) != 0 && errno != EEXIST)
        rc = -1;
    if (rc != 0)
        snprintf(why, len, "cannot make %s: %s", at, strerror(errno));
    free(at);
    return rc ? -1 : 0;
}

int zt_sm_prepare_host(const zt_layout_t *layout, int pool, int index, char *why, size_t len)
{
    const json_t *sm = layout->plan->sagemaker;
    if (!sm || !zt_sm_is_host(layout->plan, pool))
        return 0;
    char *root = zt_sm_host_root(layout, pool, index);
    int rc = 0, n;
    zt_sm_ref_t *h = zt_sm_hosts(layout->plan, &n);
    static const char *const dirs[] = { "model", "output/data", "output/intermediate", "input/data" };
    for (size_t d = 0; d < sizeof dirs / sizeof *dirs && rc == 0; d++) {
        char *p = zt_strdupf("%s/%s", root, dirs[d]);
        if ((rc = zt_mkdir_p(p)) != 0)
            snprintf(why, len, "cannot make %s: %s", p, strerror(errno));
        free(p);
    }
    size_t i;
    json_t *ch;
    json_array_foreach(json_object_get(sm, "channels"), i, ch) {
        const char *name = json_string_value(json_object_get(ch, "name"));
        const char *src = json_string_value(json_object_get(ch, "path"));
        if (!s_gets(layout, pool, ch))
            continue;
        /* a share among the hosts that get the channel: this one's place among them */
        int hosts = 0, k = 0;
        for (int x = 0; x < n; x++)
            if (s_gets(layout, h[x].pool, ch)) {
                k += zt_layout_ordinal(layout, h[x].pool, h[x].index) < zt_layout_ordinal(layout, pool, index);
                hosts++;
            }
        bool sharded = !strcmp(json_string_value(json_object_get(ch, "distribution")), "ShardedByS3Key");
        char *dir = zt_strdupf("%s/input/data/%s", root, name);
        if (rc == 0 && (rc = zt_mkdir_p(dir)) != 0)
            snprintf(why, len, "cannot make %s: %s", dir, strerror(errno));
        json_t *files = json_array(), *f;
        s_files(src, "", files);
        size_t j;
        json_array_foreach(files, j, f) {
            if (rc != 0 || (sharded && (int) (j % (size_t) hosts) != k))
                continue;
            char *target = zt_strdupf("%s/%s", src, json_string_value(f));
            rc = s_link(dir, json_string_value(f), target, why, len);
            free(target);
        }
        json_decref(files);
        free(dir);
    }
    free(h);
    free(root);
    return rc;
}

int zt_sm_upload(const zt_layout_t *layout, char *why, size_t len)
{
    const json_t *sm = layout->plan->sagemaker;
    if (!sm || !json_object_get(sm, "outputPath"))
        return 0;
    bool gz = json_is_true(json_object_get(sm, "compress"));
    char *out = zt_strdupf("%s/%s/output", json_string_value(json_object_get(sm, "outputPath")),
                           json_string_value(json_object_get(sm, "jobName")));
    int rc = zt_mkdir_p(out), k;
    if (rc != 0)
        snprintf(why, len, "cannot make %s: %s", out, strerror(errno));
    /* the primary host's model/; every host's output/data, each under its host's name */
    char *root = zt_sm_host_root(layout, 0, 0), *model = zt_strdupf("%s/model", root), *top = "";
    zt_sm_ref_t *h = zt_sm_hosts(layout->plan, &k);
    char **dirs = calloc((size_t) k + 1, sizeof *dirs), **names = calloc((size_t) k + 1, sizeof *names);
    for (int i = 0; i < k; i++) {
        char *hr = zt_sm_host_root(layout, h[i].pool, h[i].index), host[32];
        zt_sm_host(layout, h[i].pool, h[i].index, host, sizeof host);
        dirs[i] = zt_strdupf("%s/output/data", hr);
        names[i] = strdup(host);
        free(hr);
    }
    free(h);
    char *mpath = zt_strdupf("%s/%s", out, gz ? "model.tar.gz" : "model.tar");
    char *opath = zt_strdupf("%s/%s", out, gz ? "output.tar.gz" : "output.tar");
    if (rc == 0)
        rc = zt_tar_folders((const char *const *) &model, (const char *const *) &top, 1, mpath, gz, why, len);
    if (rc == 0)
        rc = zt_tar_folders((const char *const *) dirs, (const char *const *) names, k, opath, gz, why, len);
    for (int i = 0; i < k; i++) {
        free(dirs[i]);
        free(names[i]);
    }
    free(dirs);
    free(names);
    free(mpath);
    free(opath);
    free(model);
    free(root);
    free(out);
    return rc;
}

char *zt_sm_failure(const zt_layout_t *layout)
{
    for (int p = 0; layout->plan->sagemaker && p < ZT_POOLS; p++)
        for (int i = 0; layout->plan->pools[p].present && i < layout->plan->pools[p].replicas; i++) {
            char *root = zt_sm_host_root(layout, p, i), *path = zt_strdupf("%s/output/failure", root);
            size_t n = 0;
            char *text = zt_read_file(path, &n);
            free(root);
            free(path);
            if (text && n > 4000) /* a page of it */
                text[n = 4000] = 0;
            if (text) {
                while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == ' '))
                    text[--n] = 0;
                if (n > 0)
                    return text;
            }
            free(text);
        }
    return NULL;
}
