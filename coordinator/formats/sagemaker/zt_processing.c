/* SageMaker Processing behind the seam (formats/zt_format.h): a
 * CreateProcessingJob request (zt_spec_processing.c) run as SageMaker runs
 * it. Host algo-K sees its own <job-dir>/opt-ml/algo-K at /opt/ml, in a
 * mount namespace of its own (the chief starts it under ztrain-hosts
 * --bind): its share of each input at the input's LocalPath under
 * /opt/ml/processing, each output's folder there, and
 * /opt/ml/config/{resourceconfig,processingjobconfig}.json. Nothing of the
 * machine's own /opt/ml changes. The job ends when every host's program
 * has; then every host's files of each output go to the output's S3Uri
 * folder, once, each file whole. */
#include "formats/zt_format.h"
#include "formats/sagemaker/zt_processing.h"
#include "formats/sagemaker/zt_sm_int.h"
#include "base/zt_json.h"
#include "base/zt_util.h"
#include "ztrain/zt_log.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define S_MAX_DEPTH 64 /* an output's folders, at most this deep */

static bool s_claims(json_t *root, const zt_plan_opts_t *opts)
{
    json_t *holder = opts->spec_key ? json_object_get(root, opts->spec_key) : root;
    return json_is_object(holder) && (json_object_get(holder, "ProcessingResources") ||
                                      json_object_get(holder, "ProcessingJobName"));
}

/* The override flags are gcloud's: none but --display-name applies. */
static void s_parse(zt_spec_ctx_t *c, json_t *root, const zt_plan_opts_t *opts)
{
    json_t *holder = opts->spec_key ? json_object_get(root, opts->spec_key) : root;
    c->plan->format = strdup("CreateProcessingJob");
    c->plan->service = "sagemaker-processing";
    zt_processing_parse(c, holder);
    zt_sm_apply_flags(c, opts, "CreateProcessingJob");
}

/* Host (pool, index)'s /opt/ml/config files: {"resourceconfig.json":
 * {current_host, hosts}, "processingjobconfig.json": the request with its
 * ProcessingJobArn}. */
static json_t *s_config_files(const zt_layout_t *layout, int pool, int index)
{
    char host[32];
    zt_sm_host(layout, pool, index, host, sizeof host);
    json_t *hosts = zt_sm_host_list(layout);
    json_t *job = json_deep_copy(layout->plan->job);
    json_object_set_new(job, "ProcessingJobArn", json_sprintf("arn:aws:sagemaker:local:000000000000:processing-job/%s",
                                                              zt_sm_plan(layout->plan)->job_name));
    return json_pack("{s:{s:s, s:o}, s:o}", "resourceconfig.json", "current_host", host, "hosts", hosts,
                     "processingjobconfig.json", job);
}

/* A host's inputs and folders (zt_sm_prepare_host), and its config files
 * in its /opt/ml/config. A restarted host starts as a fresh container
 * would: its outputs' folders and /opt/ml/output emptied of what the run
 * before left. */
static int s_prepare(const zt_layout_t *layout, int pool, int index, char *why, size_t len)
{
    const zt_sm_plan_t *sm = zt_sm_plan(layout->plan);
    char *root = zt_sm_host_root(layout, pool, index);
    for (int o = -1; o < sm->noutputs; o++) {
        char *dir = zt_strdupf("%s/%s", root, o < 0 ? "output" : sm->outputs[o].local);
        zt_rm_tree(dir);
        free(dir);
    }
    free(root);
    if (zt_sm_prepare_host(layout, pool, index, why, len) != 0)
        return -1;
    return zt_sm_write_config(layout, pool, index, "config", s_config_files(layout, pool, index), why,
                              len);
}

static json_t *s_binds(const zt_layout_t *layout, int pool, int index)
{
    char *root = zt_sm_host_root(layout, pool, index);
    json_t *b = json_pack("{s:s}", "/opt/ml", root);
    free(root);
    return b;
}

/* Every output's S3Uri, held to the trusted-folder rule. */
static int s_folders(const zt_plan_t *plan, zt_dir_mode_t mode, char *why, size_t len)
{
    const zt_sm_plan_t *sm = zt_sm_plan(plan);
    for (int i = 0; sm && i < sm->noutputs; i++) {
        char sub[1024];
        int fd = zt_dir_open_trusted(sm->outputs[i].dest, mode, sub, sizeof sub);
        if (fd >= 0)
            close(fd);
        else if (fd != ZT_DIR_CHECKED) {
            snprintf(why, len, "ProcessingOutputConfig.Outputs[%d].S3Output.S3Uri: %s", i, sub);
            return -1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------ the upload */

static int s_fail(char *why, size_t len, const char *what, const char *where, const char *name)
{
    snprintf(why, len, "%s %s/%s: %s", what, where, name, strerror(errno));
    return -1;
}

/* File name of the folder open as src, copied whole into the folder open
 * as dst (over a file of that name). */
static int s_copy_file(int src, int dst, const char *where, const char *name, char *why, size_t len)
{
    int in = openat(src, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC), rc = 0;
    int out = in < 0 ? -1 : openat(dst, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (in < 0 || out < 0)
        rc = s_fail(why, len, in < 0 ? "cannot read" : "cannot write", where, name);
    char buf[1 << 16];
    ssize_t r;
    while (rc == 0 && (r = read(in, buf, sizeof buf)) != 0) {
        for (ssize_t off = 0, w; rc == 0 && r > 0 && off < r; off += w)
            if ((w = write(out, buf + off, (size_t) (r - off))) < 0)
                rc = s_fail(why, len, "cannot write", where, name);
        if (r < 0 && errno != EINTR)
            rc = s_fail(why, len, "cannot read", where, name);
    }
    if (out >= 0 && close(out) != 0 && rc == 0)
        rc = s_fail(why, len, "cannot write", where, name);
    if (in >= 0)
        close(in);
    return rc;
}

/* A folder name in dst, made (0700) or the one there, open; -1 with why. */
static int s_subdir(int dst, const char *where, const char *name, char *why, size_t len)
{
    int fd = mkdirat(dst, name, 0700) == 0 || errno == EEXIST
             ? openat(dst, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
    if (fd < 0)
        s_fail(why, len, "cannot make", where, name);
    return fd;
}

/* The folder open as src into the folder open as dst: folders merged,
 * files copied whole (copy) or renamed into place (move, which empties
 * src). Links and other kinds are left out, said (a program's output is
 * its files). where names src. 0, or -1 with why. */
static int s_tree(int src, int dst, const char *where, bool move, int depth, char *why, size_t len)
{
    int fd = dup(src);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d || depth > S_MAX_DEPTH) {
        snprintf(why, len, "%s: %s", where, d ? "folders too deep" : strerror(errno));
        if (d)
            closedir(d);
        return -1;
    }
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d))) {
        struct stat st;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
            fstatat(src, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            int s2 = openat(src, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            int d2 = s2 < 0 ? -1 : s_subdir(dst, where, e->d_name, why, len);
            char *sub = zt_strdupf("%s/%s", where, e->d_name);
            rc = s2 < 0 ? s_fail(why, len, "cannot read", where, e->d_name)
                 : d2 < 0 ? -1 : s_tree(s2, d2, sub, move, depth + 1, why, len);
            if (rc == 0 && move && unlinkat(src, e->d_name, AT_REMOVEDIR) != 0)
                rc = s_fail(why, len, "cannot remove", where, e->d_name);
            free(sub);
            if (s2 >= 0)
                close(s2);
            if (d2 >= 0)
                close(d2);
        } else if (move) {
            if (renameat(src, e->d_name, dst, e->d_name) != 0)
                rc = s_fail(why, len, "cannot move", where, e->d_name);
        } else if (S_ISREG(st.st_mode))
            rc = s_copy_file(src, dst, where, e->d_name, why, len);
        else
            zt_warn("%s/%s: not a file (a link?): left out of the output", where, e->d_name);
    }
    closedir(d);
    return rc;
}

/* Output o: every host's files into a fresh staging folder in its
 * destination, then moved into place, so that a failed upload leaves
 * nothing half-written. 0, or -1 with why. */
static int s_upload_one(const zt_layout_t *layout, int o, char *why, size_t len)
{
    const zt_sm_output_t *out = &zt_sm_plan(layout->plan)->outputs[o];
    char sub[1024];
    int at = zt_dir_open_trusted(out->dest, ZT_DIR_MAKE, sub, sizeof sub); /* held to the rule again */
    if (at < 0) {
        snprintf(why, len, "ProcessingOutputConfig.Outputs[%d].S3Output.S3Uri: %s", o, sub);
        return -1;
    }
    char *stage_name = zt_strdupf(".ztrain-upload-%s", out->name), *stage_path = zt_strdupf("%s/%s", out->dest,
                                                                                            stage_name);
    zt_rm_tree(stage_path); /* a crashed upload's */
    int stage = s_subdir(at, out->dest, stage_name, why, len), rc = stage < 0 ? -1 : 0, n;
    zt_sm_ref_t *h = zt_sm_hosts(layout->plan, &n);
    for (int k = 0; rc == 0 && k < n; k++) {
        char *root = zt_sm_host_root(layout, h[k].pool, h[k].index), *dir = zt_strdupf("%s/%s", root, out->local);
        int src = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (src < 0) {
            snprintf(why, len, "output %s: %s: %s", out->name, dir, strerror(errno));
            rc = -1;
        } else {
            rc = s_tree(src, stage, dir, false, 0, why, len);
            close(src);
        }
        free(dir);
        free(root);
    }
    free(h);
    if (rc == 0)
        rc = s_tree(stage, at, stage_path, true, 0, why, len);
    if (stage >= 0)
        close(stage);
    zt_rm_tree(stage_path);
    close(at);
    free(stage_name);
    free(stage_path);
    return rc;
}

static int s_finish(const zt_layout_t *layout, bool succeeded, char **failure, char *why, size_t len)
{
    int rc = 0;
    for (int o = 0; succeeded && rc == 0 && o < zt_sm_plan(layout->plan)->noutputs; o++)
        rc = s_upload_one(layout, o, why, len);
    *failure = !succeeded || rc != 0 ? zt_sm_failure(layout) : NULL;
    return rc;
}

const zt_format_t zt_processing_format = {
    .name = "sagemaker-processing",
    .claims = s_claims,
    .parse = s_parse,
    .folders = s_folders,
    .prepare = s_prepare,
    .host_name = zt_sm_host,
    .host_names = zt_sm_host_names,
    .binds = s_binds,
    .awaited = zt_sm_awaited,
    .finish = s_finish,
    .failure_from = "the program's /opt/ml/output/message",
};
