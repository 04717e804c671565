/* An elastic workers' pool (workerPoolSpecs[1].elasticPolicy): the chief
 * decides every change of its membership, one at a time.
 *
 * A change is a new membership generation (layout.group): the members, in
 * pool order after the chief, are ranked densely. The coordinator tells
 * every running trainer its rank in it (MEMBERSHIP; -1 to those that
 * leave) and starts the replicas that join, which take the model from a
 * member (the rejoin path). The trainers switch together at a step
 * boundary that they agree on through their all-reduce; each says
 * REGROUPED (a joiner, started once the others have, REJOINED). The change
 * is done when every member has and every leaver has exited; a change that does not finish within
 * ZT_SCALE_TIMEOUT_MS restarts the group together in its new membership
 * from the newest checkpoint, so no change can hang the job.
 *
 * A change is asked for by `ztrain scale`, which leaves a request file in
 * the job directory (its owner must be the coordinator's user). */
#include "chief/zt_coord_int.h"
#include "base/zt_util.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_knobs.h"
#include "ztrain/zt_log.h"
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define S_REQUEST_MAX 4096 /* a request file longer than this is not one */
#define S_ANSWERS 32        /* answers kept in job.json */
#define S_REQUESTS 16       /* request files taken at a time */

/* The controller's state: pool 1's members and slots, the change under
 * way, the scale requests and what they were answered. member is NULL
 * without an elastic pool. */
struct zt_coord_elastic_t {
    bool *member;               /* its replicas in the current membership generation (layout.group) */
    bool *slot_gone;            /* its slots whose node was lost: nobody joins there again */
    int scale_target;           /* the members asked for */
    int awaiting;               /* members lost with their nodes, wanted back when capacity returns */
    int64_t regain_next_ms;     /* when the backend is next asked for capacity */
    bool changing;              /* a change of membership is under way */
    int change_from;            /* the members before it */
    int64_t change_t0, change_deadline, change_step; /* when it began, must end, and the step it took effect */
    int64_t scale_polled_ms;    /* the request file was last looked for */
    json_t *scale_changes;      /* [{time, from, to, group, step, ms}] */
    json_t *scale_answers;      /* the newest requests' answers, oldest first */
};

zt_coord_elastic_t *zt_coord_elastic_new(void) { return calloc(1, sizeof(zt_coord_elastic_t)); }

void zt_coord_elastic_destroy(zt_coord_elastic_t **self_p)
{
    zt_coord_elastic_t *self = self_p ? *self_p : NULL;
    if (!self)
        return;
    json_decref(self->scale_changes);
    json_decref(self->scale_answers);
    free(self->member);
    free(self->slot_gone);
    free(self);
    *self_p = NULL;
}

bool zt_coord_elastic_changing(const zt_coord_t *self) { return self->el->changing; }

void zt_coord_elastic_init(zt_coord_t *self, int start)
{
    const zt_pool_t *p = &self->plan->pools[1];
    if (!p->present || !p->elastic_min)
        return;
    self->el->member = calloc((size_t) p->replicas, sizeof *self->el->member);
    self->el->slot_gone = calloc((size_t) p->replicas, sizeof *self->el->slot_gone);
    for (int i = 0; i < p->replicas; i++)
        self->el->member[i] = i < start;
    self->el->scale_target = start;
    self->layout.member = self->el->member;
    self->layout.group = 0;
    self->layout.epoch_world = 1 + start;
    self->el->scale_changes = json_array();
}

bool zt_coord_is_member(const zt_coord_t *self, const zt_crep_t *r)
{
    return r->pool != 1 || !self->el->member || self->el->member[r->index];
}

static int s_members(const zt_coord_t *self)
{
    int n = 0;
    for (int i = 0; i < self->plan->pools[1].replicas; i++)
        n += self->el->member[i];
    return n;
}

/* A trainer's place in the current generation: rank (-1: not a member) and world. */
static int s_rank(const zt_coord_t *self, const zt_crep_t *r)
{
    if (r->pool == 0)
        return 0;
    return self->el->member[r->index] ? 1 + zt_layout_dense(&self->layout, 1, r->index) : -1;
}

static void s_tell(zt_coord_t *self, zt_crep_t *r, int rank, int world, bool abandon)
{
    zt_msg_t m = { .type = ZT_MSG_MEMBERSHIP, .incarnation = self->layout.incarnation, .seq = self->seq++ };
    m.u.MEMBERSHIP = (zt_msg_MEMBERSHIP_t) { self->layout.group, rank, world, abandon };
    zt_msg_send(self->router, r->identity, &m);
}

/* Whether every member trains now (registered, not rejoining): a change
 * starts only from a whole group. */
static bool s_settled(const zt_coord_t *self)
{
    for (int i = 0; i < self->nreps; i++) {
        const zt_crep_t *r = &self->reps[i];
        if (r->pool <= 1 && zt_coord_is_member(self, r) &&
            (r->state != ZT_REP_RUNNING || !r->registered || r->rejoining))
            return false;
    }
    return true;
}

/* A member whose program does not speak the control plane (not a ztrain
 * role, never registered): no change can reach it. */
static const zt_crep_t *s_silent(const zt_coord_t *self)
{
    for (int i = 0; i < self->nreps; i++) {
        const zt_crep_t *r = &self->reps[i];
        if (r->pool <= 1 && zt_coord_is_member(self, r) && r->state == ZT_REP_RUNNING && !r->expect_register &&
            !r->registered)
            return r;
    }
    return NULL;
}

/* Starts the change to scale_target members: lost (a member lost for
 * good) goes, and the round in progress is given up; else the last ones
 * leave, or the first free slots (not on a lost node) join. */
static void s_begin(zt_coord_t *self, zt_crep_t *lost)
{
    int n = self->plan->pools[1].replicas;
    bool *was = calloc((size_t) (n > 0 ? n : 1), sizeof *was);
    memcpy(was, self->el->member, (size_t) n * sizeof *was);
    if (lost)
        self->el->member[lost->index] = false;
    int have = s_members(self);
    for (int i = n - 1; i >= 0 && have > self->el->scale_target; i--)
        if (self->el->member[i]) {
            self->el->member[i] = false;
            have--;
        }
    for (int i = 0; i < n && have < self->el->scale_target; i++)
        if (!self->el->member[i] && !self->el->slot_gone[i]) {
            self->el->member[i] = true;
            have++;
        }
    self->layout.group++;
    self->el->changing = true;
    self->el->change_from = 0;
    for (int i = 0; i < n; i++)
        self->el->change_from += was[i];
    self->el->change_t0 = zt_now_ms();
    self->el->change_deadline = self->el->change_t0 + zt_knob_int(ZT_KNOB_SCALE_TIMEOUT_MS);
    int world = 1 + have;
    zt_info("scaling workerpool1 from %d to %d replicas: membership generation %lld, %d trainers",
            self->el->change_from, have, (long long) self->layout.group, world);
    for (int i = 0; i < self->nreps; i++) {
        zt_crep_t *r = &self->reps[i];
        if (r->pool > 1)
            continue;
        r->regrouped = false;
        bool now = zt_coord_is_member(self, r), before = r->pool == 0 || was[r->index];
        if (r == lost)
            continue;
        if (before) {
            r->leaving = !now;
            s_tell(self, r, now ? s_rank(self, r) : -1, world, lost != NULL);
            continue;
        }
        r->joining = now; /* started once the members have switched (s_start_joiners) */
    }
    free(was);
    zt_coord_record_changed(self->rec); /* job.json within a second */
}

/* The joiners start once every member that stays has switched to the new
 * generation: the first hello of a generation resets the reducers, so a
 * joiner's must not come while members still train in the earlier one. */
static zt_crep_t *s_start_joiners(zt_coord_t *self)
{
    for (int i = 0; i < self->nreps; i++) {
        const zt_crep_t *r = &self->reps[i];
        if (r->pool <= 1 && zt_coord_is_member(self, r) && !r->joining && !r->regrouped)
            return NULL;
    }
    int world = 1 + s_members(self);
    for (int i = 0; i < self->nreps; i++) {
        zt_crep_t *r = &self->reps[i];
        if (!r->joining)
            continue;
        r->joining = false;
        r->rejoining = true; /* it takes the model from a member (ZT_REJOIN) */
        r->lost_ms = zt_now_ms();
        r->restarts = 0;
        zt_info("%s joins the group as rank %d of %d", r->name, s_rank(self, r), world);
        if (zt_crep_spawn(r, &self->layout, self->backend, self->opts.echo) != ZT_OK) {
            r->state = ZT_REP_FAILED;
            return r;
        }
    }
    zt_coord_record_changed(self->rec); /* job.json within a second */
    return NULL;
}

/* A change in elastic.changes: done (cut NULL), or cut short (how: the
 * group restarted together in its new membership). */
static void s_record_change(zt_coord_t *self, const char *cut)
{
    char when[40];
    zt_wall_iso(when, sizeof when);
    if (json_array_size(self->el->scale_changes) >= ZT_COORD_MAX_RECORDS)
        json_array_remove(self->el->scale_changes, 0);
    json_t *c = json_pack("{s:s, s:i, s:i, s:I, s:I, s:I}", "time", when, "from", self->el->change_from, "to",
                          s_members(self), "group", (json_int_t) self->layout.group, "step",
                          (json_int_t) self->el->change_step, "ms", (json_int_t) (zt_now_ms() - self->el->change_t0));
    if (cut)
        json_object_set_new(c, "cutShort", json_string(cut));
    json_array_append_new(self->el->scale_changes, c);
    zt_coord_record_changed(self->rec); /* job.json within a second */
}

/* The change is done once every member trains in the new generation and
 * every leaver is gone. */
static void s_check_done(zt_coord_t *self)
{
    if (!self->el->changing)
        return;
    for (int i = 0; i < self->nreps; i++) {
        const zt_crep_t *r = &self->reps[i];
        if (r->pool <= 1 && ((zt_coord_is_member(self, r) && !r->regrouped) || (r->leaving && r->handle)))
            return;
    }
    self->el->changing = false;
    int64_t ms = zt_now_ms() - self->el->change_t0;
    zt_info("workerpool1 runs %d replicas now (membership generation %lld), %lld ms after the change began",
            s_members(self), (long long) self->layout.group, (long long) ms);
    s_record_change(self, NULL);
}

zt_crep_t *zt_coord_elastic_regrouped(zt_coord_t *self, zt_crep_t *r, int64_t group, int64_t step,
                                      bool said_regrouped)
{
    if (!self->el->member || !self->el->changing || group != self->layout.group || !zt_coord_is_member(self, r))
        return NULL;
    if (said_regrouped && r->rejoining) {
        r->rejoining = false;
        r->rejoins++;
    }
    if (!r->regrouped)
        zt_info("%s trains in membership generation %lld as rank %d from step %lld", r->name, (long long) group,
                s_rank(self, r), (long long) step);
    r->regrouped = true;
    if (step > self->el->change_step)
        self->el->change_step = step;
    zt_crep_t *failed = s_start_joiners(self);
    if (!failed)
        s_check_done(self);
    return failed;
}

bool zt_coord_elastic_left(zt_coord_t *self, zt_crep_t *r, const char *how)
{
    if (!r->leaving)
        return false;
    r->leaving = false;
    r->state = ZT_REP_STOPPED;
    zt_info("%s left the group (%s)", r->name, how);
    s_check_done(self);
    zt_coord_record_changed(self->rec); /* job.json within a second */
    return true;
}

void zt_coord_elastic_end(zt_coord_t *self)
{
    if (!self->el->changing)
        return;
    s_record_change(self, "the job ended first");
    self->el->changing = false;
}

void zt_coord_elastic_restart(zt_coord_t *self)
{
    if (self->el->changing) /* a change a failure cut short: its group restarts together, in the new membership */
        s_record_change(self, "the group restarted together from the newest checkpoint");
    self->el->changing = false;
    for (int i = 0; i < self->nreps; i++) {
        self->reps[i].leaving = self->reps[i].joining = false;
        if (!zt_coord_is_member(self, &self->reps[i]) && self->reps[i].state != ZT_REP_PENDING &&
            self->reps[i].state != ZT_REP_FAILED)
            self->reps[i].state = ZT_REP_STOPPED;
    }
}

/* The answer to the last request, in job.json for `ztrain scale` to print. */
static void s_answer(zt_coord_t *self, const char *id, int replicas, bool accepted, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void s_answer(zt_coord_t *self, const char *id, int replicas, bool accepted, const char *fmt, ...)
{
    char msg[512], when[40];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    zt_wall_iso(when, sizeof when);
    if (accepted)
        zt_info("ztrain scale: %s", msg);
    else
        zt_warn("ztrain scale: %s", msg);
    if (!self->el->scale_answers)
        self->el->scale_answers = json_array();
    if (json_array_size(self->el->scale_answers) >= S_ANSWERS)
        json_array_remove(self->el->scale_answers, 0);
    json_array_append_new(self->el->scale_answers, json_pack("{s:s, s:s, s:i, s:b, s:s}", "id", id, "time", when,
                                                         "replicas", replicas, "accepted", accepted, "message", msg));
    zt_coord_record_changed(self->rec); /* job.json within a second */
}

static int s_by_name(const void *a, const void *b) { return strcmp(*(char *const *) a, *(char *const *) b); }

/* The request files there are, each its own client's, oldest id first
 * (ids begin with the time), taken in turn, one accepted change at a time
 * (so that each is made, and recorded). */
static void s_take_request(zt_coord_t *self, const char *name);
static void s_take_requests(zt_coord_t *self)
{
    DIR *d = opendir(self->layout.job_dir);
    char *names[S_REQUESTS];
    int n = 0;
    struct dirent *e;
    while (d && n < S_REQUESTS && (e = readdir(d))) {
        /* a finished request's name only: "...json.tmp.PID" is one being
         * written (taken and removed, its client's rename would fail) */
        size_t len = strlen(e->d_name);
        if (!strncmp(e->d_name, ZT_SCALE_REQUEST_PREFIX, strlen(ZT_SCALE_REQUEST_PREFIX)) && len > 5 &&
            !strcmp(e->d_name + len - 5, ".json"))
            names[n++] = strdup(e->d_name);
    }
    if (d)
        closedir(d);
    qsort(names, (size_t) n, sizeof *names, s_by_name);
    /* one change at a time: a request waits (its file stays) while a
     * change is under way, or one was accepted in this round */
    int target = self->el->scale_target;
    for (int i = 0; i < n; i++) {
        if (!self->el->changing && self->el->scale_target == target)
            s_take_request(self, names[i]);
        free(names[i]);
    }
}

/* One request file: read, removed, checked, answered. */
static void s_take_request(zt_coord_t *self, const char *name)
{
    char *path = zt_strdupf("%s/%s", self->layout.job_dir, name);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        free(path);
        return;
    }
    struct stat st;
    char text[S_REQUEST_MAX + 1];
    ssize_t n = -1;
    bool owned = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid();
    if (owned)
        n = read(fd, text, sizeof text - 1);
    close(fd);
    unlink(path);
    free(path);
    if (!owned || n < 0 || n >= S_REQUEST_MAX) {
        zt_warn("ztrain scale: ignored a request file in the job directory that is not a regular file of "
                "this user's, or is over %d bytes", S_REQUEST_MAX);
        return;
    }
    text[n] = '\0';
    json_t *req = json_loads(text, 0, NULL);
    const char *id = json_string_value(json_object_get(req, "id"));
    json_t *pj = json_object_get(req, "pool"), *kj = json_object_get(req, "replicas");
    const zt_pool_t *p = &self->plan->pools[1];
    char idc[64];
    snprintf(idc, sizeof idc, "%s", id ? id : "");
    if (!json_is_integer(pj) || !json_is_integer(kj))
        s_answer(self, idc, -1, false, "a request without an integer pool and replicas: ignored");
    else if (json_integer_value(pj) != 1 || !self->el->member)
        s_answer(self, idc, (int) json_integer_value(kj), false, "workerpool%lld is not elastic (only "
                 "workerPoolSpecs[1] with an elasticPolicy is)", (long long) json_integer_value(pj));
    else if (json_integer_value(kj) < p->elastic_min || json_integer_value(kj) > p->elastic_max)
        s_answer(self, idc, (int) json_integer_value(kj), false, "%lld replicas: outside the pool's "
                 "elasticPolicy, %d to %d", (long long) json_integer_value(kj), p->elastic_min, p->elastic_max);
    else if (self->state >= ZT_JOB_SUCCEEDED || self->stopping)
        s_answer(self, idc, (int) json_integer_value(kj), false, "the job is ending");
    else if (s_silent(self))
        s_answer(self, idc, (int) json_integer_value(kj), false, "%s has not registered with the coordinator, "
                 "so it cannot be told of a new membership (its program must link libztrain: the built-in "
                 "trainer, or ztrain.torch.elastic.run)", s_silent(self)->name);
    else {
        self->el->scale_target = (int) json_integer_value(kj);
        self->el->awaiting = 0; /* the user's count replaces the one capacity returning would restore */
        s_answer(self, idc, self->el->scale_target, true, "workerpool1 to %d replicas (now %d%s)", self->el->scale_target,
                 s_members(self), self->el->changing ? ", after the change under way" : "");
    }
    json_decref(req);
}

/* Capacity returned (asked of the backend every few seconds): a slot
 * whose node was lost gets a place again and the pool grows back by it. */
static void s_regain(zt_coord_t *self, int64_t now)
{
    self->el->regain_next_ms = now + zt_knob_int(ZT_KNOB_REGAIN_MS);
    int n = self->plan->pools[1].replicas, i = 0;
    while (i < n && !self->el->slot_gone[i])
        i++;
    if (i == n || !self->backend->regain) {
        self->el->awaiting = 0;
        return;
    }
    zt_place_t pl = *zt_layout_place(&self->layout, 1, i);
    char why[512];
    if (self->backend->regain(self->backend, zt_layout_ordinal(&self->layout, 1, i), &pl, why, sizeof why) != ZT_OK) {
        zt_debug("no capacity yet for workerpool1-%d: %s", i, why);
        return;
    }
    zt_layout_move(&self->layout, 1, i, &pl);
    self->el->slot_gone[i] = false;
    self->el->awaiting--;
    self->el->scale_target = s_members(self) + 1;
    zt_info("capacity returned: workerpool1-%d gets a place on %s; workerpool1 grows back to %d replicas", i,
            pl.host, self->el->scale_target);
    s_begin(self, NULL);
}

bool zt_coord_elastic_tick(zt_coord_t *self)
{
    if (!self->el->member)
        return false;
    int64_t now = zt_now_ms();
    if (now - self->el->scale_polled_ms >= 200) {
        self->el->scale_polled_ms = now;
        s_take_requests(self);
    }
    if (self->stopping || self->state != ZT_JOB_RUNNING)
        return false;
    if (self->el->changing && now >= self->el->change_deadline) {
        zt_warn("the change to membership generation %lld did not finish within %lld ms (ZT_SCALE_TIMEOUT_MS): "
                "the group restarts together in it, from the newest checkpoint", (long long) self->layout.group,
                (long long) zt_knob_int(ZT_KNOB_SCALE_TIMEOUT_MS));
        self->layout.incarnation++;
        return true;
    }
    if (!self->el->changing && self->el->scale_target != s_members(self) && s_settled(self))
        s_begin(self, NULL);
    else if (!self->el->changing && self->el->awaiting > 0 && now >= self->el->regain_next_ms && s_settled(self))
        s_regain(self, now);
    return false;
}

/* Whether the group can go on without member r (why it is gone): it is a
 * member of an elastic pool, no change is under way, at least
 * minReplicaCount stay, and every other member trains. */
static bool s_can_go_on_without(zt_coord_t *self, zt_crep_t *r, const char *why)
{
    if (!self->el->member || r->pool != 1 || !self->el->member[r->index] || self->el->changing || self->stopping ||
        self->state != ZT_JOB_RUNNING)
        return false;
    int lo = self->plan->pools[1].elastic_min;
    if (s_members(self) - 1 < lo) {
        zt_warn("%s is gone (%s); the pool would fall below its minReplicaCount (%d): it does not shrink",
                r->name, why, lo);
        return false;
    }
    self->el->member[r->index] = false; /* is every other member training? */
    bool settled = s_settled(self);
    self->el->member[r->index] = true;
    return settled;
}

bool zt_coord_elastic_preempted(zt_coord_t *self, zt_crep_t *r, const char *how)
{
    if (!s_can_go_on_without(self, r, how))
        return false;
    int left = s_members(self) - 1;
    zt_info("%s was preempted: workerpool1 goes on with the %d others (the round in progress is given up and "
            "trained again without it), and it joins again as soon as that change is done", r->name, left);
    r->state = ZT_REP_RESTARTING;
    self->el->scale_target = left;
    s_begin(self, r);
    self->el->scale_target = left + 1; /* the next change: it comes back */
    return true;
}

bool zt_coord_elastic_lose(zt_coord_t *self, zt_crep_t *r, const char *why, bool node_gone)
{
    if (!s_can_go_on_without(self, r, why))
        return false;
    int left = s_members(self) - 1;
    zt_warn("%s is lost for good (%s): workerpool1 goes on with the %d others; the round in progress is given up "
            "and trained again without it", r->name, why, left);
    r->state = ZT_REP_FAILED;
    self->el->slot_gone[r->index] = node_gone;
    char err[512];
    const char *host = zt_layout_place(&self->layout, r->pool, r->index)->host;
    if (node_gone && self->backend->drop_node && self->backend->drop_node(self->backend, host, err, sizeof err))
        zt_warn("cannot let node %s go from the allocation: %s", host, err);
    if (node_gone) { /* job.json's lostNodes, as a node lost under any job */
        char *lost = zt_strdupf("node %s, with %s: %s; workerpool1 went on without it", host, r->name, why);
        zt_coord_record_lost_node(self->rec, lost);
        free(lost);
    }
    self->el->scale_target = left;
    if (node_gone && self->backend->regain) {
        self->el->awaiting++; /* back when capacity returns */
        self->el->regain_next_ms = zt_now_ms() + zt_knob_int(ZT_KNOB_REGAIN_MS);
    }
    s_begin(self, r);
    return true;
}

json_t *zt_coord_elastic_json(const zt_coord_t *self)
{
    if (!self->el->member)
        return NULL;
    const zt_pool_t *p = &self->plan->pools[1];
    json_t *o = json_pack("{s:i, s:i, s:i, s:i, s:i, s:I, s:b, s:O}", "pool", 1, "minReplicaCount", p->elastic_min,
                          "maxReplicaCount", p->elastic_max, "replicas", s_members(self), "target",
                          self->el->scale_target, "group", (json_int_t) self->layout.group, "changing", self->el->changing,
                          "changes", self->el->scale_changes);
    json_object_set_new(o, "awaitingCapacity", json_integer(self->el->awaiting));
    size_t n = json_array_size(self->el->scale_answers);
    if (n) {
        json_object_set(o, "requests", self->el->scale_answers);
        json_object_set(o, "lastRequest", json_array_get(self->el->scale_answers, n - 1));
    }
    return o;
}
