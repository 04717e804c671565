/* zt_sm_env: what a replica of a job sees SageMaker's way (every job's
 * replicas do: a script written for SageMaker runs unchanged): the SM_*
 * variables, each a field of SM_TRAINING_ENV, and the toolkit's
 * config files. */
#include "formats/sagemaker/zt_sm_env.h"
#include "launch/zt_layout.h"
#include "formats/sagemaker/zt_sagemaker.h"
#include "launch/zt_slurm.h"
#include "ztrain/zt_log.h"
#include "base/zt_env.h"
#include "wire/zt_auth.h"
#include "wire/zt_transport.h"
#include "base/zt_util.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_knobs.h"
#include <arpa/inet.h>
#include <assert.h>
#include <ctype.h>
#include <dirent.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

void zt_sm_args_hps(json_t *into, const char *const *args, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *a = args[i];
        if (strncmp(a, "--", 2) || !a[2] || a[2] == '=')
            continue;
        const char *eq = strchr(a, '=');
        char *name = eq ? strndup(a + 2, (size_t) (eq - a - 2)) : strdup(a + 2);
        if (eq)
            json_object_set_new(into, name, json_string(eq + 1));
        else if (i + 1 < n && strncmp(args[i + 1], "--", 2))
            json_object_set_new(into, name, json_string(args[++i]));
        free(name);
    }
}

/* The program's hyperparameters, {name: "value"} (hyperparameters.json's
 * form: every value a string): a CreateTrainingJob's own (and a trial's
 * tuned values), but sagemaker_*; another job's program's "--name=value"
 * and "--name value" arguments (a bare "--flag" is not one). */
static json_t *s_hyperparameters(const zt_layout_t *self, int pool)
{
    const zt_sm_plan_t *sm = zt_sm_plan(self->plan);
    json_t *hps = json_object();
    if (sm) {
        const char *k;
        json_t *v;
        json_object_foreach(sm->hyperparameters, k, v)
            if (strncmp(k, "sagemaker_", 10) && json_is_string(v))
                json_object_set(hps, k, v);
        return hps;
    }
    json_t *argv = self->plan->pools[pool].argv;
    size_t n = json_array_size(argv);
    const char **args = calloc(n + 1, sizeof *args);
    for (size_t i = 1; i < n; i++) /* the program's arguments, not the program */
        args[i - 1] = json_string_value(json_array_get(argv, i));
    zt_sm_args_hps(hps, args, n ? n - 1 : 0);
    free(args);
    return hps;
}

/* A value as the toolkit reads it: JSON where it parses ("256" is 256),
 * else the string. */
static json_t *s_sm_decode(const char *text)
{
    json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
    return v ? v : json_string(text);
}

/* The fewest digits that give back every real number in v (Python's repr
 * of 0.1 is 0.1; jansson's default, 17 digits, would say 0.10000000000000001). */
static int s_sm_digits(const json_t *v)
{
    int most = 1;
    if (json_is_real(v)) {
        double x = json_real_value(v);
        char buf[40];
        for (most = 1; most < 17; most++) {
            snprintf(buf, sizeof buf, "%.*g", most, x);
            if (strtod(buf, NULL) == x)
                break;
        }
    }
    const char *k;
    json_t *e;
    size_t i;
    if (json_is_object(v))
        json_object_foreach((json_t *) v, k, e) {
            int d = s_sm_digits(e);
            most = d > most ? d : most;
        }
    if (json_is_array(v))
        json_array_foreach(v, i, e) {
            int d = s_sm_digits(e);
            most = d > most ? d : most;
        }
    return most;
}

/* Environment-variable text as the toolkit writes it: strings as they are,
 * everything else compact JSON with sorted keys. */
static char *s_sm_text(const json_t *v)
{
    if (json_is_string(v))
        return strdup(json_string_value(v));
    return json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY | JSON_REAL_PRECISION(s_sm_digits(v)));
}

static void s_put_sm(json_t *env, const char *name, json_t *value)
{
    char *text = s_sm_text(value);
    zt_layout_put(env, name, text);
    free(text);
    json_decref(value);
}

/* The program SageMaker would call the entry point: the script of
 * "python3 train.py ...", the module of "python3 -m pkg.task ...", else the
 * command itself. */
static const char *s_sm_entry_point(json_t *argv)
{
    const char *a0 = json_string_value(json_array_get(argv, 0));
    const char *a1 = json_string_value(json_array_get(argv, 1));
    if (!a0)
        return "";
    const char *base = strrchr(a0, '/') ? strrchr(a0, '/') + 1 : a0;
    if (strncmp(base, "python", 6) || !a1)
        return a0;
    if (!strcmp(a1, "-m") && json_array_size(argv) > 2)
        return json_string_value(json_array_get(argv, 2));
    return a1[0] == '-' ? a0 : a1;
}

static int s_strcmp_p(const void *a, const void *b)
{
    return strcmp(*(const char *const *) a, *(const char *const *) b);
}

/* name = prefix + KEY in upper case (SM_HP_BATCH-SIZE, SM_CHANNEL_TRAINING). */
static void s_put_upper(json_t *env, const char *prefix, const char *key, const char *value)
{
    char *name = zt_strdupf("%s%s", prefix, key);
    for (char *c = name + strlen(prefix); *c; c++)
        *c = (char) toupper((unsigned char) *c);
    zt_layout_put(env, name, value);
    free(name);
}

/* The job's data channels: the folders in <base>/input/data/, where
 * SageMaker mounts them (sorted; a trial sees its study's). */
static json_t *s_sm_channels(const zt_layout_t *self)
{
    const char *base = self->plan->base_output_dir ? self->plan->base_output_dir : self->job_dir;
    char *root = zt_strdupf("%s/input/data", base);
    json_t *dirs = json_object();
    struct dirent **list = NULL;
    int n = scandir(root, &list, NULL, alphasort);
    for (int i = 0; i < n; i++) {
        char *path = zt_strdupf("%s/%s", root, list[i]->d_name);
        struct stat st;
        if (list[i]->d_name[0] != '.' && stat(path, &st) == 0 && S_ISDIR(st.st_mode))
            json_object_set_new(dirs, list[i]->d_name, json_string(path));
        free(path);
        free(list[i]);
    }
    free(list);
    free(root);
    return dirs;
}

/* The instance groups in SM_TRAINING_ENV e and its resource_config, as
 * the training toolkit of a heterogeneous cluster gives them. */
static void s_sm_groups(const zt_layout_t *self, int pool, json_t *e)
{
    int mine = 0;
    json_t *groups = zt_sm_groups(self, pool, &mine), *names = json_array(), *dict = json_object(), *g;
    size_t i;
    json_array_foreach(groups, i, g) {
        json_array_append(names, json_object_get(g, "instance_group_name"));
        json_object_set(dict, json_string_value(json_object_get(g, "instance_group_name")), g);
    }
    json_t *me = json_array_get(groups, (size_t) mine), *rc = json_object_get(e, "resource_config");
    const char *type = self->plan->pools[pool].machine.name;
    json_object_set_new(e, "current_instance_type", json_string(type));
    json_object_set(e, "current_instance_group", json_object_get(me, "instance_group_name"));
    json_object_set(e, "current_instance_group_hosts", json_object_get(me, "hosts"));
    json_object_set_new(e, "instance_groups", names);
    json_object_set_new(e, "instance_groups_dict", dict);
    json_object_set_new(e, "is_hetero", json_boolean(zt_sm_plan(self->plan) && zt_sm_plan(self->plan)->ngroups));
    json_object_set_new(rc, "current_instance_type", json_string(type));
    json_object_set(rc, "current_group_name", json_object_get(me, "instance_group_name"));
    json_object_set_new(rc, "instance_groups", groups);
}

/* What SageMaker's training toolkit sees of one replica, as its
 * SM_TRAINING_ENV: every SM_* variable and config file is taken from it. */
static json_t *s_sm_training_env(const zt_layout_t *self, int pool, int index)
{
    const zt_plan_t *plan = self->plan;
    json_t *hosts = zt_sm_host_list(self);
    char current[64];
    zt_sm_host(self, pool, index, current, sizeof current);
    /* the input (channels) is the job's, a trial's study's; the model and
     * output folders are the trial's own, as AIP_MODEL_DIR is */
    const char *base = plan->base_output_dir ? plan->base_output_dir : self->job_dir, *out = self->base_dir;
    json_t *hps = s_hyperparameters(self, pool), *decoded = json_object(), *args = json_array();
    const char *k;
    json_t *v, *channels = s_sm_channels(self), *data_config = json_object();
    json_object_foreach(hps, k, v)
        json_object_set_new(decoded, k, s_sm_decode(json_string_value(v)));
    /* SM_USER_ARGS: the toolkit's to_cmd_args, sorted by name. */
    const char **keys = calloc(json_object_size(hps) + 1, sizeof *keys);
    size_t nk = 0;
    json_object_foreach(hps, k, v)
        keys[nk++] = k;
    qsort(keys, nk, sizeof *keys, s_strcmp_p);
    for (size_t i = 0; i < nk; i++) {
        json_array_append_new(args, json_sprintf(strlen(keys[i]) > 1 ? "--%s" : "-%s", keys[i]));
        json_array_append(args, json_object_get(hps, keys[i]));
    }
    free(keys);
    json_object_foreach(channels, k, v)
        json_object_set_new(data_config, k, json_pack("{s:s, s:s, s:s}", "TrainingInputMode", "File",
                                                      "S3DistributionType", "FullyReplicated",
                                                      "RecordWrapperType", "None"));
    json_decref(hps);
    char *cfg = zt_layout_config_dir(self, pool, index);
    const zt_place_t *me = zt_layout_place(self, pool, index);
    json_t *e = json_pack("{s:o, s:s, s:O, s:o, s:s, s:o, s:s+, s:b, s:s, s:i, s:O, s:s+, s:s, s:i,"
                          " s:i, s:s++, s:s+, s:s+, s:{s:s, s:O, s:s}, s:o, s:s}",
                          "channel_input_dirs", channels, "current_host", current, "hosts", hosts,
                          "hyperparameters", decoded, "input_config_dir", cfg,
                          "input_data_config", data_config, "input_dir", base, "/input",
                          "is_master", pool == 0 && index == 0, "job_name", plan->display_name, "log_level", 20,
                          "master_hostname", json_array_get(hosts, 0), "model_dir", out, "/model",
                          "network_interface_name", me->iface[0] ? me->iface : "lo",
                          "num_cpus", plan->pools[pool].machine.vcpus,
                          "num_gpus", me->ngpus, "output_data_dir", out, "/output/data/", current,
                          "output_dir", out, "/output", "output_intermediate_dir", out, "/output/intermediate",
                          "resource_config", "current_host", current, "hosts", hosts,
                          "network_interface_name", me->iface[0] ? me->iface : "lo", "user_args", args,
                          "user_entry_point",
                          s_sm_entry_point(plan->pools[pool].argv));
    s_sm_groups(self, pool, e);
    /* /opt/ml/checkpoints: one folder of the job's, as CheckpointConfig's
     * S3Uri is, there again for every restart, requeue and --resume */
    json_object_set_new(e, "checkpoint_dir", json_sprintf("%s/sagemaker-checkpoints", self->base_dir)); /* a trial's own */
    zt_sm_training_env(self, pool, index, e); /* a CreateTrainingJob's hosts have their own /opt/ml */
    json_decref(hosts);
    free(cfg);
    return e;
}

/* SageMaker's variables, every one a field of SM_TRAINING_ENV: hosts
 * algo-1..algo-N in pool order, the job's directories, the replica's CPUs
 * and GPUs, its channels and hyperparameters. */
void zt_sm_env(json_t *env, const zt_layout_t *self, int pool, int index)
{
    json_t *e = s_sm_training_env(self, pool, index);
    static const struct { zt_env_t var; const char *field; } s_fields[] = {
        { ZT_ENV_SM_HOSTS, "hosts" },
        { ZT_ENV_SM_CURRENT_HOST, "current_host" },
        { ZT_ENV_SM_RESOURCE_CONFIG, "resource_config" },
        { ZT_ENV_SM_INPUT_DIR, "input_dir" },
        { ZT_ENV_SM_INPUT_CONFIG_DIR, "input_config_dir" },
        { ZT_ENV_SM_INPUT_DATA_CONFIG, "input_data_config" },
        { ZT_ENV_SM_MODEL_DIR, "model_dir" },
        { ZT_ENV_SM_OUTPUT_DIR, "output_dir" },
        { ZT_ENV_SM_OUTPUT_DATA_DIR, "output_data_dir" },
        { ZT_ENV_SM_OUTPUT_INTERMEDIATE_DIR, "output_intermediate_dir" },
        { ZT_ENV_SM_CHECKPOINT_DIR, "checkpoint_dir" },
        { ZT_ENV_SM_NUM_CPUS, "num_cpus" },
        { ZT_ENV_SM_NUM_GPUS, "num_gpus" },
        { ZT_ENV_SM_LOG_LEVEL, "log_level" },
        { ZT_ENV_SM_NETWORK_INTERFACE_NAME, "network_interface_name" },
        { ZT_ENV_SM_CURRENT_INSTANCE_TYPE, "current_instance_type" },
        { ZT_ENV_SM_CURRENT_INSTANCE_GROUP, "current_instance_group" },
        { ZT_ENV_SM_CURRENT_INSTANCE_GROUP_HOSTS, "current_instance_group_hosts" },
        { ZT_ENV_SM_INSTANCE_GROUPS, "instance_groups" },
        { ZT_ENV_SM_INSTANCE_GROUPS_DICT, "instance_groups_dict" },
        { ZT_ENV_SM_IS_HETERO, "is_hetero" },
        { ZT_ENV_SM_HPS, "hyperparameters" },
        { ZT_ENV_SM_USER_ARGS, "user_args" },
        { ZT_ENV_SM_USER_ENTRY_POINT, "user_entry_point" },
    };
    for (size_t i = 0; i < sizeof s_fields / sizeof *s_fields; i++)
        s_put_sm(env, zt_env_name(s_fields[i].var), json_incref(json_object_get(e, s_fields[i].field)));
    json_t *channels = json_object_get(e, "channel_input_dirs"), *names = json_array(), *v;
    const char *k;
    json_object_foreach(channels, k, v)
        json_array_append_new(names, json_string(k));
    s_put_sm(env, zt_env_name(ZT_ENV_SM_CHANNELS), names); /* sorted: jansson keeps insertion order */
    json_object_foreach(channels, k, v)
        s_put_upper(env, zt_env_name(ZT_ENV_SM_CHANNEL_), k, json_string_value(v));
    json_object_foreach(json_object_get(e, "hyperparameters"), k, v) {
        char *text = s_sm_text(v);
        s_put_upper(env, zt_env_name(ZT_ENV_SM_HP_), k, text);
        free(text);
    }
    s_put_sm(env, zt_env_name(ZT_ENV_SM_TRAINING_ENV), e);
    if (zt_sm_plan(self->plan) && zt_sm_is_host(self->plan, pool)) { /* the training toolkit's /opt/ml */
        char *root = zt_sm_host_root(self, pool, index);
        zt_layout_put(env, zt_env_name(ZT_ENV_SAGEMAKER_BASE_DIR), root);
        free(root);
    }
    if (zt_sm_mpi(self->plan)) /* where each host's ztrain-mpi listens */
        zt_layout_put_json(env, zt_env_name(ZT_ENV_MPI_HOSTS), zt_sm_host_places(self, true));
}

json_t *zt_sm_config_files(const zt_layout_t *self, int pool, int index)
{
    json_t *e = s_sm_training_env(self, pool, index);
    json_t *sm_hps = zt_sm_plan(self->plan) ? zt_sm_plan(self->plan)->hyperparameters : NULL;
    json_t *files = json_pack("{s:o, s:O, s:O}", "hyperparameters.json",
                              sm_hps ? json_deep_copy(sm_hps) : s_hyperparameters(self, pool), "resourceconfig.json",
                              json_object_get(e, "resource_config"), "inputdataconfig.json",
                              json_object_get(e, "input_data_config"));
    json_decref(e);
    return files;
}

const char *zt_sm_shim_dir(const zt_layout_t *self, int pool)
{
    static char dir[1024];
    static bool looked;
    const zt_plan_t *plan = self->plan;
    if (!zt_sm_plan(plan) || !zt_sm_plan(plan)->data_parallel ||
        !zt_sm_is_host(plan, pool))
        return NULL;
    if (!looked) {
        looked = true;
        /* found, not imported: ztrain's package need not load its library here */
        const char *py;
        zt_pool_python(&plan->pools[pool], &py);
        char *argv[] = { (char *) py, "-c",
                         "import importlib.util as u, os; s = u.find_spec('ztrain'); "
                         "print(os.path.join(os.path.dirname(s.origin), '_shim') if s else '')", NULL };
        char out[1024];
        int rc = zt_slurm_command(argv, out, sizeof out);
        struct stat st;
        if (rc == 0 && *out && stat(out, &st) == 0 && S_ISDIR(st.st_mode))
            snprintf(dir, sizeof dir, "%s", out);
        else
            zt_warn("distribution smdistributed: %s finds no ztrain Python package (%s), so the hosts' "
                    "`import smdistributed` has nothing to import: install it there (pip install ztrain's "
                    "python/ folder)", argv[0], rc == 0 ? "no ztrain" : out);
    }
    return *dir ? dir : NULL;
}
