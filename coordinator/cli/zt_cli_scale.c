/* ztrain scale: asks a running job's coordinator for a new size of its
 * elastic workers' pool, and prints the coordinator's answer. */
#include "cli/zt_cli.h"
#include "chief/zt_coord.h"
#include "base/zt_json.h"
#include "base/zt_text.h"
#include "base/zt_util.h"
#include "ztrain/ztrain.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* How long the coordinator gets to answer (it looks every 200 ms; a
 * request waits while a change is under way). */
#define S_ANSWER_MS 60000

static json_t *s_load(const char *dir)
{
    char *path = zt_strdupf("%s/job.json", dir);
    json_t *doc = json_load_file(path, 0, NULL);
    free(path);
    return doc;
}

int zt_cli_scale(const char *dir, int pool, int replicas)
{
    if (!dir || pool < 0 || replicas < 0) {
        fprintf(stderr, "ztrain scale: give the job directory, --pool N and --replicas K (ztrain scale DIR --pool 1 "
                        "--replicas K)\n");
        return ZT_CLI_USAGE;
    }
    json_t *doc = s_load(dir);
    const char *name = json_string_value(json_object_get(doc, "name"));
    const char *st = json_string_value(json_object_get(doc, "state"));
    json_t *el = json_object_get(doc, "elastic");
    int rc = ZT_CLI_FAILED;
    if (!doc) {
        fprintf(stderr, "ztrain scale: %s holds no running job (no job.json)\n", dir);
        json_decref(doc);
        return ZT_CLI_USAGE;
    }
    long long lo = json_integer_value(json_object_get(el, "minReplicaCount"));
    long long hi = json_integer_value(json_object_get(el, "maxReplicaCount"));
    if (zt_state_final(st))
        fprintf(stderr, "ztrain scale: job %s already ended %s\n", zt_text_safe(name ? name : dir, 0),
                zt_text_safe(st, 1));
    else if (!el || pool != json_integer_value(json_object_get(el, "pool")))
        fprintf(stderr, "ztrain scale: workerpool%d of job %s is not elastic: give workerPoolSpecs[1] an "
                        "elasticPolicy {minReplicaCount, maxReplicaCount} to scale it\n", pool,
                zt_text_safe(name ? name : dir, 0));
    else if (replicas < lo || replicas > hi)
        fprintf(stderr, "ztrain scale: --replicas %d: outside workerpool%d's elasticPolicy, %lld to %lld\n",
                replicas, pool, lo, hi);
    else if (zt_json_process_alive(json_object_get(doc, "coordinatorProcess")) != 1)
        fprintf(stderr, "ztrain scale: the job's coordinator is not running on this machine (ztrain status %s)\n",
                dir);
    else
        rc = ZT_CLI_OK;
    json_decref(doc);
    if (rc != ZT_CLI_OK)
        return rc;
    /* a file of this request's own (its id: the wall time first, so the
     * coordinator takes requests in the order they were made) */
    char id[64];
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    snprintf(id, sizeof id, "%013lld-%d", (long long) now.tv_sec * 1000 + now.tv_nsec / 1000000, (int) getpid());
    char *path = zt_strdupf("%s/%s%s.json", dir, ZT_SCALE_REQUEST_PREFIX, id);
    json_t *req = json_pack("{s:s, s:i, s:i}", "id", id, "pool", pool, "replicas", replicas);
    char *text = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    if (zt_write_file_private(path, text, strlen(text)) != ZT_OK) {
        fprintf(stderr, "ztrain scale: cannot write %s: %s\n", path, strerror(errno));
        free(text);
        free(path);
        return ZT_CLI_FAILED;
    }
    free(text);
    rc = ZT_CLI_FAILED;
    for (int64_t end = zt_now_ms() + S_ANSWER_MS; zt_now_ms() < end; usleep(100000)) {
        doc = s_load(dir);
        json_t *answers = json_object_get(json_object_get(doc, "elastic"), "requests"), *ans = NULL, *a;
        size_t k;
        json_array_foreach(answers, k, a) {
            const char *aid = json_string_value(json_object_get(a, "id"));
            if (aid && !strcmp(aid, id))
                ans = a;
        }
        if (ans) {
            const char *msg = json_string_value(json_object_get(ans, "message"));
            bool ok = json_is_true(json_object_get(ans, "accepted"));
            fprintf(ok ? stdout : stderr, "%s%s\n", ok ? "" : "ztrain scale: refused: ", zt_text_safe(msg, 0));
            rc = ok ? ZT_CLI_OK : ZT_CLI_FAILED;
            json_decref(doc);
            free(path);
            return rc;
        }
        json_decref(doc);
    }
    unlink(path); /* not taken: nothing is left for it to find later */
    free(path);
    fprintf(stderr, "ztrain scale: the coordinator did not answer within %d s (ztrain status %s)\n",
            S_ANSWER_MS / 1000, dir);
    return rc;
}
