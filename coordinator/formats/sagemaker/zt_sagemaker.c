#include "formats/sagemaker/zt_sagemaker.h"
#include "formats/sagemaker/zt_tar.h"
#include "base/zt_util.h"
#include "base/zt_json.h"
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include "ztrain/zt_log.h"
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
    return !(zt_sm_plan(plan) && pool == 2 && zt_sm_plan(plan)->data_parallel);
}

bool zt_sm_mpi(const zt_plan_t *plan)
{
    return zt_sm_plan(plan) && zt_sm_plan(plan)->mpi;
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

json_t *zt_sm_host_places(const zt_layout_t *layout, bool ports)
{
    json_t *out = json_object();
    int n;
    zt_sm_ref_t *h = zt_sm_hosts(layout->plan, &n);
    for (int k = 0; k < n; k++) {
        char host[32];
        zt_sm_host(layout, h[k].pool, h[k].index, host, sizeof host);
        const zt_place_t *at = zt_layout_place(layout, h[k].pool, h[k].index);
        json_object_set_new(out, host, ports ? json_sprintf("%s:%d", at->addr, at->port) : json_string(at->addr));
    }
    free(h);
    return out;
}

json_t *zt_sm_host_list(const zt_layout_t *layout)
{
    json_t *places = zt_sm_host_places(layout, false), *hosts = json_array(), *v;
    const char *name;
    json_object_foreach(places, name, v) /* in the hosts' order: jansson keeps an object's keys in order */
        json_array_append_new(hosts, json_string(name));
    json_decref(places);
    return hosts;
}

json_t *zt_sm_host_names(const zt_layout_t *layout)
{
    if (zt_sm_mpi(layout->plan)) /* mpirun would take a name of this machine for itself (see the header) */
        return NULL;
    return zt_sm_host_places(layout, false);
}

/* The group index of a host of pool: 0 for pools 0 and 1. */
static int s_group_of(const zt_sm_plan_t *sm, int pool)
{
    for (int i = 0; sm && i < sm->ngroups; i++)
        if (sm->groups[i].pool == pool)
            return i;
    return 0;
}

json_t *zt_sm_groups(const zt_layout_t *layout, int pool, int *mine)
{
    const zt_plan_t *plan = layout->plan;
    const zt_sm_plan_t *sm = zt_sm_plan(plan);
    bool given = sm && sm->ngroups;
    json_t *out = json_array();
    if (!given)
        json_array_append_new(out, json_pack("{s:s, s:s, s:[]}", "instance_group_name", "homogeneousCluster",
                                             "instance_type", plan->pools[0].machine.name, "hosts"));
    for (int i = 0; given && i < sm->ngroups; i++)
        json_array_append_new(out, json_pack("{s:s, s:s, s:[]}", "instance_group_name", sm->groups[i].name,
                                             "instance_type", sm->groups[i].type, "hosts"));
    int n;
    zt_sm_ref_t *h = zt_sm_hosts(plan, &n);
    for (int k = 0; k < n; k++) {
        char host[32];
        zt_sm_host(layout, h[k].pool, h[k].index, host, sizeof host);
        json_t *grp = json_array_get(out, (size_t) s_group_of(sm, h[k].pool));
        json_array_append_new(json_object_get(grp, "hosts"), json_string(host));
    }
    free(h);
    if (mine)
        *mine = s_group_of(sm, pool);
    return out;
}

/* Whether hosts of pool get channel ch: every host, or those of the
 * groups it names (InstanceGroupNames). */
static bool s_gets(const zt_layout_t *layout, int pool, const zt_sm_channel_t *ch)
{
    const zt_sm_plan_t *sm = zt_sm_plan(layout->plan);
    if (!ch->groups)
        return true;
    const char *mine = sm->ngroups ? sm->groups[s_group_of(sm, pool)].name : NULL;
    for (int i = 0; i < ch->ngroups; i++)
        if (mine && !strcmp(ch->groups[i], mine))
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
    const zt_sm_plan_t *sm = zt_sm_plan(layout->plan);
    if (!sm)
        return;
    char *root = zt_sm_host_root(layout, pool, index);
    static const char *const dirs[][2] = { { "input_dir", "input" }, { "input_config_dir", "input/config" },
        { "model_dir", "model" },
        { "output_dir", "output" }, { "output_data_dir", "output/data" },
        { "output_intermediate_dir", "output/intermediate" } };
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++)
        json_object_set_new(e, dirs[i][0], json_sprintf("%s/%s", root, dirs[i][1]));
    json_t *channels = json_object(), *config = json_object();
    for (int i = 0; i < sm->nchannels; i++) {
        const zt_sm_channel_t *ch = &sm->channels[i];
        if (!s_gets(layout, pool, ch)) /* not for this host's instance group */
            continue;
        json_object_set_new(channels, ch->name, ch->local ? json_sprintf("/opt/ml/%s", ch->local) /* as the host sees it */
                                                          : json_sprintf("%s/input/data/%s", root, ch->name));
        json_t *c = json_pack("{s:s, s:s, s:s}", "TrainingInputMode", "File", "S3DistributionType",
                              ch->distribution, "RecordWrapperType", ch->record_wrapper);
        if (*ch->content_type)
            json_object_set_new(c, "ContentType", json_string(ch->content_type));
        json_object_set_new(config, ch->name, c);
    }
    json_object_set_new(e, "channel_input_dirs", channels);
    json_object_set_new(e, "input_data_config", config);
    if (sm->checkpoint_path) /* CheckpointConfig.S3Uri: one folder every host shares */
        json_object_set_new(e, "checkpoint_dir", json_string(sm->checkpoint_path));
    free(root);
}

/* A channel's walk: its folder's real path, what was found, and what was
 * said of it. */
typedef struct {
    const char *chan, *root; /* the channel's name, its folder's real path */
    json_t *out;             /* [[name, target], ...] */
    bool open_warned;
    char *why;
    size_t len;
} s_walk_t;

static int s_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *) a, *(char *const *) b);
}

/* Whether real path p is root or under it. */
static bool s_under(const char *p, const char *root)
{
    size_t n = strlen(root);
    return !strncmp(p, root, n) && (p[n] == '/' || !p[n] || !strcmp(root, "/"));
}

/* A link at root/rel (rel's folder is dir, under the channel): a file's
 * real path when it stays inside the channel (added), else skipped with a
 * warning; a link to a folder is not walked (its files, inside the channel,
 * are listed under their own names), and one back to a folder above it is a
 * loop: an error. 0 or -1. */
static int s_walk_link(s_walk_t *w, const char *dir, const char *rel)
{
    char *at = zt_strdupf("%s/%s", w->root, rel), real[PATH_MAX];
    struct stat st;
    int rc = 0;
    if (!realpath(at, real) || stat(real, &st) != 0)
        zt_warn("channel %s: %s is a link to nothing that can be read: left out", w->chan, at);
    else if (!s_under(real, w->root))
        zt_warn("channel %s: %s is a link to %s, outside the channel's folder %s: not followed, left out", w->chan,
                at, real, w->root);
    else if (S_ISDIR(st.st_mode) && s_under(dir, real)) {
        snprintf(w->why, w->len, "channel %s: %s is a link to %s, a folder above it: a loop (S3 has no links; "
                 "remove it or point it elsewhere)", w->chan, at, real);
        rc = -1;
    }
    else if (S_ISDIR(st.st_mode))
        zt_warn("channel %s: %s is a link to a folder inside the channel: not walked (its files are listed "
                "under their own names)", w->chan, at);
    else if (S_ISREG(st.st_mode))
        json_array_append_new(w->out, json_pack("[s,s]", rel, real));
    free(at);
    return rc;
}

/* Every regular file under folder fd (rel below the channel's folder, at
 * depth), as [name, real path] with names relative to the channel's
 * folder, sorted as S3 lists a prefix's keys. No link is followed but to a
 * file inside the channel; depth and count are bounded. 0, or -1 with why. */
static int s_walk(s_walk_t *w, int fd, const char *rel, int depth)
{
    struct stat st;
    if (!w->open_warned && fstat(fd, &st) == 0 && (st.st_mode & S_IWOTH)) { /* said once a walk */
        w->open_warned = true;
        zt_warn("channel %s: %s%s%s can be written by any user (mode %04o): anyone may add to the job's input",
                w->chan, w->root, *rel ? "/" : "", rel, (unsigned) (st.st_mode & 07777));
    }
    DIR *d = fdopendir(fd);
    if (!d) {
        snprintf(w->why, w->len, "channel %s: cannot list %s/%s: %s", w->chan, w->root, rel, strerror(errno));
        close(fd);
        return -1;
    }
    size_t n = 0, cap = 64;
    char **names = malloc(cap * sizeof *names);
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (n == cap)
            names = realloc(names, (cap *= 2) * sizeof *names);
        names[n++] = strdup(e->d_name);
    }
    qsort(names, n, sizeof *names, s_cmp);
    char *here = zt_strdupf("%s%s%s", w->root, *rel ? "/" : "", rel);
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        char *name = zt_strdupf("%s%s%s", rel, *rel ? "/" : "", names[i]);
        if (rc == 0 && json_array_size(w->out) >= ZT_SM_CHANNEL_MAX_FILES) {
            snprintf(w->why, w->len, "channel %s: more than %d files under %s", w->chan, ZT_SM_CHANNEL_MAX_FILES,
                     w->root);
            rc = -1;
        }
        if (rc != 0 || fstatat(dirfd(d), names[i], &st, AT_SYMLINK_NOFOLLOW) != 0)
            ;
        else if (S_ISLNK(st.st_mode))
            rc = s_walk_link(w, here, name);
        else if (S_ISREG(st.st_mode)) {
            char *real = zt_strdupf("%s/%s", w->root, name);
            json_array_append_new(w->out, json_pack("[s,s]", name, real));
            free(real);
        }
        else if (S_ISDIR(st.st_mode) && depth + 1 > ZT_SM_CHANNEL_MAX_DEPTH) {
            snprintf(w->why, w->len, "channel %s: %s/%s is more than %d folders deep", w->chan, w->root, name,
                     ZT_SM_CHANNEL_MAX_DEPTH);
            rc = -1;
        }
        else if (S_ISDIR(st.st_mode)) {
            int sub = openat(dirfd(d), names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            rc = sub < 0 ? 0 : s_walk(w, sub, name, depth + 1);
        }
        free(name);
        free(names[i]);
    }
    free(names);
    free(here);
    closedir(d);
    return rc;
}

/* Channel chan's files under folder src: [[name, real path], ...] (heap),
 * or NULL with why. */
static json_t *s_channel_files(const char *chan, const char *src, char *why, size_t len)
{
    char real[PATH_MAX];
    int fd = realpath(src, real) ? open(real, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
    if (fd < 0) {
        snprintf(why, len, "channel %s: cannot open %s: %s", chan, src, strerror(errno));
        return NULL;
    }
    s_walk_t w = { chan, real, json_array(), false, why, len };
    if (s_walk(&w, fd, "", 0) == 0)
        return w.out;
    json_decref(w.out);
    return NULL;
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

/* root/sub made; 0, or -1 with why. */
static int s_mkdir_in(const char *root, const char *sub, char *why, size_t len)
{
    char *p = zt_strdupf("%s/%s", root, sub);
    int rc = zt_mkdir_p(p);
    if (rc != 0)
        snprintf(why, len, "cannot make %s: %s", p, strerror(errno));
    free(p);
    return rc ? -1 : 0;
}

int zt_sm_prepare_host(const zt_layout_t *layout, int pool, int index, char *why, size_t len)
{
    const zt_sm_plan_t *sm = zt_sm_plan(layout->plan);
    if (!sm || !zt_sm_is_host(layout->plan, pool))
        return 0;
    char *root = zt_sm_host_root(layout, pool, index);
    int rc = 0, n;
    zt_sm_ref_t *h = zt_sm_hosts(layout->plan, &n);
    static const char *const training[] = { "model", "output/data", "output/intermediate", "input/data",
                                            "input/config", NULL },
                             *const processing[] = { "config", "output", NULL };
    const char *const *dirs = sm->processing ? processing : training;
    for (int d = 0; rc == 0 && dirs[d]; d++)
        rc = s_mkdir_in(root, dirs[d], why, len);
    for (int o = 0; rc == 0 && o < sm->noutputs; o++) /* a processing job's outputs */
        rc = s_mkdir_in(root, sm->outputs[o].local, why, len);
    for (int i = 0; i < sm->nchannels; i++) {
        const zt_sm_channel_t *ch = &sm->channels[i];
        const char *name = ch->name, *src = ch->path;
        if (!s_gets(layout, pool, ch))
            continue;
        /* a share among the hosts that get the channel: this one's place among them */
        int hosts = 0, k = 0;
        for (int x = 0; x < n; x++)
            if (s_gets(layout, h[x].pool, ch)) {
                k += zt_layout_ordinal(layout, h[x].pool, h[x].index) < zt_layout_ordinal(layout, pool, index);
                hosts++;
            }
        bool sharded = !strcmp(ch->distribution, "ShardedByS3Key");
        char *dir = ch->local ? zt_strdupf("%s/%s", root, ch->local) : zt_strdupf("%s/input/data/%s", root, name);
        if (rc == 0 && (rc = zt_mkdir_p(dir)) != 0)
            snprintf(why, len, "cannot make %s: %s", dir, strerror(errno));
        why[0] = '\0';
        struct stat st;
        json_t *files = rc != 0 ? NULL : stat(src, &st) == 0 && !S_ISDIR(st.st_mode) /* one file */
                        ? json_pack("[[s, s]]", strrchr(src, '/') + 1, src) : s_channel_files(name, src, why, len), *f;
        if (rc == 0 && !files)
            rc = -1;
        size_t j;
        json_array_foreach(files, j, f) {
            if (rc != 0 || (sharded && (int) (j % (size_t) hosts) != k))
                continue;
            rc = s_link(dir, json_string_value(json_array_get(f, 0)), json_string_value(json_array_get(f, 1)), why,
                        len);
        }
        json_decref(files);
        free(dir);
    }
    free(h);
    free(root);
    return rc;
}

int zt_sm_write_config(const zt_layout_t *layout, int pool, int index, const char *sub, json_t *files, char *why,
                       size_t len)
{
    char *root = zt_sm_host_root(layout, pool, index), *dir = zt_strdupf("%s/%s", root, sub);
    int rc = zt_json_write_files(dir, files, why, len);
    json_decref(files);
    free(dir);
    free(root);
    return rc;
}

/* S3OutputPath/<TrainingJobName>/output (heap), or NULL. */
static char *s_output_dir(const zt_plan_t *plan)
{
    const zt_sm_plan_t *sm = zt_sm_plan(plan);
    return sm && sm->output_path ? zt_strdupf("%s/%s/output", sm->output_path, sm->job_name) : NULL;
}

int zt_sm_folders(const zt_plan_t *plan, zt_dir_mode_t mode, char *why, size_t len)
{
    char *out = s_output_dir(plan), sub[1024];
    const zt_sm_plan_t *sm = zt_sm_plan(plan);
    const char *ck = sm ? sm->checkpoint_path : NULL, *local = sm ? sm->checkpoint_local_path : NULL;
    const char *dirs[3] = { out, ck, local };
    const char *fields[3] = { "OutputDataConfig.S3OutputPath", "CheckpointConfig.S3Uri", "CheckpointConfig.LocalPath" };
    int rc = 0;
    for (int i = 0; i < 3 && rc == 0; i++) { /* LocalPath: checked where it is, never made */
        int fd = dirs[i] ? zt_dir_open_trusted(dirs[i], i == 2 ? ZT_DIR_CHECK : mode, sub, sizeof sub)
                         : ZT_DIR_CHECKED;
        if (fd >= 0)
            close(fd);
        else if (fd != ZT_DIR_CHECKED) {
            snprintf(why, len, "%s: %s", fields[i], sub);
            rc = -1;
        }
    }
    free(out);
    return rc;
}

int zt_sm_upload(const zt_layout_t *layout, char *why, size_t len)
{
    char *out = s_output_dir(layout->plan), sub[1024];
    if (!out)
        return 0;
    bool gz = zt_sm_plan(layout->plan)->compress;
    /* held to the rule again, and written through this descriptor alone */
    int at = zt_dir_open_trusted(out, ZT_DIR_MAKE, sub, sizeof sub);
    free(out);
    if (at < 0) {
        snprintf(why, len, "OutputDataConfig.S3OutputPath: %s", sub);
        return -1;
    }
    /* the primary host's model/; every host's output/data, each under its host's name */
    char *root = zt_sm_host_root(layout, 0, 0), *model = zt_strdupf("%s/model", root);
    const char *top = "";
    int k;
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
    int rc = zt_tar_folders((const char *const *) &model, &top, 1, at, gz ? "model.tar.gz" : "model.tar", gz, why,
                            len);
    if (rc == 0)
        rc = zt_tar_folders((const char *const *) dirs, (const char *const *) names, k, at,
                            gz ? "output.tar.gz" : "output.tar", gz, why, len);
    close(at);
    for (int i = 0; i < k; i++) {
        free(dirs[i]);
        free(names[i]);
    }
    free(dirs);
    free(names);
    free(model);
    free(root);
    return rc;
}

char *zt_sm_failure(const zt_layout_t *layout)
{
    for (int p = 0; zt_sm_plan(layout->plan) && p < ZT_POOLS; p++)
        for (int i = 0; layout->plan->pools[p].present && i < layout->plan->pools[p].replicas; i++) {
            char *root = zt_sm_host_root(layout, p, i);
            char *path = zt_strdupf("%s/output/%s", root, zt_sm_plan(layout->plan)->processing ? "message" : "failure");
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
