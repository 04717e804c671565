/* Starting one replica: its argv (a role binary found next to ztrain),
 * its environment (ours under the replica's variables), SageMaker's config
 * files, and the backend's start. */
#include "chief/zt_crep.h"
#include "formats/zt_format.h"
#include "base/zt_json.h"
#include "base/zt_env.h"
#include "base/zt_util.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_log.h"
#include <czmq.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* argv: the pool's command; a role binary, or another ztrain binary named
 * bare (ztrain-mpi), is found next to ztrain itself. When the job's format
 * names its hosts (SageMaker's algo-K) or shows the replica folders at its
 * service's paths (SageMaker Processing's /opt/ml), the command runs under
 * ztrain-hosts, which gives it its own /etc/hosts with those names and
 * those folders where its programs look. */
static char **s_argv(const zt_layout_t *layout, const zt_pool_t *pool, int index)
{
    const zt_format_t *f = zt_format_of(layout->plan);
    json_t *names = f && f->host_names ? f->host_names(layout) : NULL;
    json_t *binds = f && f->binds ? f->binds(layout, (int) (pool - layout->plan->pools), index) : NULL;
    size_t nn = json_object_size(names), nb = json_object_size(binds), argc = json_array_size(pool->argv), k = 0;
    char **argv = calloc(argc + 2 * (nn + nb) + 3, sizeof *argv);
    if (nn + nb) {
        const char *name;
        json_t *v;
        argv[k++] = zt_strdupf("%s/ztrain-hosts", zt_exe_dir());
        json_object_foreach(names, name, v) {
            argv[k++] = strdup("--host");
            argv[k++] = zt_strdupf("%s=%s", name, json_string_value(v));
        }
        json_object_foreach(binds, name, v) {
            argv[k++] = strdup("--bind");
            argv[k++] = zt_strdupf("%s=%s", name, json_string_value(v));
        }
        argv[k++] = strdup("--");
    }
    json_decref(names);
    json_decref(binds);
    char **cmd = argv + k; /* the command's own part */
    for (size_t i = 0; i < argc; i++)
        cmd[i] = strdup(json_string_value(json_array_get(pool->argv, i)));
    char *ours = NULL;
    if (pool->role != ZT_ROLE_NONE)
        ours = zt_strdupf("%s/%s", zt_exe_dir(), zt_role_binary(pool->role));
    else if (argc && !strncmp(cmd[0], "ztrain-", 7) && !strchr(cmd[0], '/')) {
        ours = zt_strdupf("%s/%s", zt_exe_dir(), cmd[0]);
        if (access(ours, X_OK) != 0) { /* a program of the user's, on PATH */
            free(ours);
            ours = NULL;
        }
    }
    if (ours) {
        free(cmd[0]);
        cmd[0] = ours;
    }
    return argv;
}

/* env: ours, with the replica's variables over it. */
static char **s_envp(json_t *vars)
{
    size_t n_inherit = 0;
    while (environ[n_inherit])
        n_inherit++;
    char **envp = calloc(n_inherit + json_array_size(vars) + 1, sizeof *envp);
    size_t ne = 0, k;
    json_t *v;
    for (size_t i = 0; i < n_inherit; i++) {
        bool overridden = false;
        json_array_foreach(vars, k, v) {
            const char *name = json_string_value(json_array_get(v, 0));
            size_t len = strlen(name);
            if (!strncmp(environ[i], name, len) && environ[i][len] == '=')
                overridden = true;
        }
        if (!overridden)
            envp[ne++] = strdup(environ[i]);
    }
    json_array_foreach(vars, k, v)
        envp[ne++] = zt_strdupf("%s=%s", json_string_value(json_array_get(v, 0)),
                                json_string_value(json_array_get(v, 1)));
    return envp;
}

/* The job format's data for the replica's host (SageMaker's channels:
 * ZT_EINVAL, said in its log, when they cannot be made), and every
 * format's config files (SageMaker's hyperparameters.json,
 * resourceconfig.json, inputdataconfig.json) in the replica's config dir. */
static int s_write_config_files(const zt_layout_t *layout, zt_crep_t *r)
{
    char why[1024];
    const zt_format_t *f = zt_format_of(layout->plan);
    if (f && f->prepare && f->prepare(layout, r->pool, r->index, why, sizeof why) != 0) {
        zt_error("%s: its %s folders: %s", r->name, f->name, why);
        if (r->log)
            fprintf(r->log, "=== ztrain: %s not started: its %s folders: %s\n", r->name, f->name, why);
        return ZT_EINVAL;
    }
    char *cfg = zt_layout_config_dir(layout, r->pool, r->index);
    zt_mkdir_p(cfg);
    json_t *files = json_object();
    for (int i = 0; zt_formats[i]; i++) {
        json_t *its = zt_formats[i]->config_files ? zt_formats[i]->config_files(layout, r->pool, r->index)
                                                  : NULL;
        json_object_update(files, its);
        json_decref(its);
    }
    if (zt_json_write_files(cfg, files, why, sizeof why) != 0)
        zt_warn("%s: %s", r->name, why);
    json_decref(files);
    free(cfg);
    return ZT_OK;
}

/* Starts (or restarts) a replica through the backend. */
int zt_crep_spawn(zt_crep_t *r, const zt_layout_t *layout, zt_backend_t *backend, bool echo)
{
    const zt_pool_t *pool = &layout->plan->pools[r->pool];
    if (r->out_fd >= 0) { /* whatever the previous run left in the pipe */
        zt_crep_read_output(r, echo);
        if (r->out_fd >= 0)
            close(r->out_fd);
        r->out_fd = -1;
    }
    r->line_len = 0;
    char **argv = s_argv(layout, pool, r->index);
    json_t *vars = zt_format_env(layout, r->pool, r->index);
    if (r->rejoining)
        json_array_append_new(vars, json_pack("[ss]", zt_env_name(ZT_ENV_REJOIN), "1"));
    char **envp = s_envp(vars);
    json_decref(vars);
    if (s_write_config_files(layout, r) != ZT_OK) {
        zt_strv_free(argv);
        zt_strv_free(envp);
        return ZT_EINVAL;
    }
    if (r->log) { /* the command, each argument as one word (quoted when it has a space) */
        fprintf(r->log, "=== ztrain: starting %s (incarnation %d, restart %d):", r->name,
                layout->incarnation, r->restarts);
        for (int i = 0; argv[i]; i++)
            fprintf(r->log, strpbrk(argv[i], " \t'") || !argv[i][0] ? " '%s'" : " %s", argv[i]);
        fputc('\n', r->log);
    }
    zt_launch_t req = { r->pool, r->index, zt_layout_ordinal(layout, r->pool, r->index),
                        argv, envp, NULL, 0 };
    zt_handle_t *h = NULL;
    int fd = -1;
    int rc = backend->start(backend, &req, &h, &fd);
    zt_strv_free(argv);
    zt_strv_free(envp);
    if (rc != ZT_OK) {
        zt_error("%s: cannot start: %s", r->name, strerror(errno));
        return rc;
    }
    r->handle = h;
    r->pid = (long) backend->pid(backend, h);
    r->out_fd = fd;
    r->registered = false;
    r->killed_by_us = false;
    r->stop_held = false;
    r->held_until = 0;
    zframe_destroy(&r->identity);
    r->started_ms = zt_now_ms();
    r->expect_register = pool->role != ZT_ROLE_NONE;
    r->state = r->expect_register ? ZT_REP_STARTING : ZT_REP_RUNNING;
    zt_info("%s: started pid %ld on %s", r->name, r->pid,
            zt_layout_place(layout, r->pool, r->index)->host);
    return ZT_OK;
}
