/* The job's record (zt_coord_record.h). */
#include "chief/zt_coord_record.h"
#include "base/zt_util.h"
#include "ztrain/zt_knobs.h"
#include <stdlib.h>
#include <string.h>

struct zt_coord_record_t {
    char *created;        /* createTime */
    json_t *transitions;  /* [{state, time}] */
    json_t *metrics;      /* {replica: {name: {value, step, time, series}}} */
    json_t *checkpoints;  /* [{step, name, time}] */
    json_t *evaluations;  /* [{step, name, value, replica, time}] from evaluators */
    json_t *events;       /* what a replica could not do, at once; losses, preemptions, resumes */
    json_t *latency;      /* {kind: {replica: {le, counts, sum}}} */
    json_t *lost_nodes;   /* [{time, why}] */
    zt_msg_drops_t drops; /* malformed control messages, by kind */
    uint64_t unknown_senders; /* well-formed but from no replica of the job */
    uint64_t wrong_identity;  /* from a replica's connection, claiming to be another replica */
    uint64_t refusals_written; /* every refusal's count, as job.json was last written */
    json_t *error;        /* why the job failed or was cancelled, or NULL */
    int retries;          /* whole-job retries so far */
    int max_retries;      /* ZT_MAX_JOB_RETRIES */
    int preemptions;      /* every replica's, and the whole job's */
    bool dirty;           /* changed since job.json was last written */
    int64_t writes;       /* job.json writes so far */
    int64_t written_ms;   /* when it was last written */
};

zt_coord_record_t *zt_coord_record_new(void)
{
    zt_coord_record_t *self = calloc(1, sizeof *self);
    char now[40];
    zt_wall_iso(now, sizeof now);
    self->created = strdup(now);
    self->transitions = json_array();
    self->metrics = json_object();
    self->checkpoints = json_array();
    self->evaluations = json_array();
    self->events = json_array();
    self->latency = json_object();
    self->lost_nodes = json_array();
    self->max_retries = (int) zt_knob_int(ZT_KNOB_MAX_JOB_RETRIES);
    return self;
}

void zt_coord_record_destroy(zt_coord_record_t **self_p)
{
    zt_coord_record_t *self = *self_p;
    if (!self)
        return;
    json_decref(self->transitions);
    json_decref(self->metrics);
    json_decref(self->checkpoints);
    json_decref(self->evaluations);
    json_decref(self->events);
    json_decref(self->latency);
    json_decref(self->lost_nodes);
    json_decref(self->error);
    free(self->created);
    free(self);
    *self_p = NULL;
}

void zt_coord_record_take(zt_coord_record_t *self, json_t *doc)
{
    const char *keep[] = { "transitions", "checkpoints", "evaluations", "lostNodes", "metrics", "events" };
    json_t **into[] = { &self->transitions, &self->checkpoints, &self->evaluations, &self->lost_nodes, &self->metrics,
                        &self->events };
    for (int i = 0; i < 6; i++) {
        json_t *v = json_object_get(doc, keep[i]);
        if (v && json_typeof(v) == json_typeof(*into[i])) {
            json_decref(*into[i]);
            *into[i] = json_incref(v);
        }
    }
    const char *created = json_string_value(json_object_get(doc, "createTime"));
    if (created) {
        free(self->created);
        self->created = strdup(created);
    }
    self->retries = (int) json_integer_value(json_object_get(doc, "jobRetries"));
    self->preemptions = (int) json_integer_value(json_object_get(doc, "preemptions"));
}

const char *zt_coord_record_created(const zt_coord_record_t *self)
{
    return self->created;
}

void zt_coord_record_transition(zt_coord_record_t *self, const char *state)
{
    char now[40];
    zt_wall_iso(now, sizeof now);
    json_array_append_new(self->transitions, json_pack("{s:s, s:s}", "state", state, "time", now));
    self->dirty = true;
}

size_t zt_coord_record_transitions(const zt_coord_record_t *self)
{
    return json_array_size(self->transitions);
}

/* Appends e (taken) to list, the newest ZT_COORD_MAX_RECORDS kept. */
static void s_append(zt_coord_record_t *self, json_t *list, json_t *e)
{
    if (json_array_size(list) >= ZT_COORD_MAX_RECORDS)
        json_array_remove(list, 0);
    json_array_append_new(list, e);
    self->dirty = true;
}

void zt_coord_record_event(zt_coord_record_t *self, const char *kind, json_t *fields)
{
    char now[40];
    zt_wall_iso(now, sizeof now);
    json_t *e = json_pack("{s:s, s:s}", "time", now, "kind", kind);
    json_object_update(e, fields);
    json_decref(fields);
    s_append(self, self->events, e);
}

void zt_coord_record_lost_node(zt_coord_record_t *self, const char *why)
{
    char now[40];
    zt_wall_iso(now, sizeof now);
    json_array_append_new(self->lost_nodes, json_pack("{s:s, s:s}", "time", now, "why", why));
    self->dirty = true;
}

void zt_coord_record_checkpoint(zt_coord_record_t *self, int64_t step, const char *name)
{
    char now[40];
    zt_wall_iso(now, sizeof now);
    s_append(self, self->checkpoints, json_pack("{s:I, s:s, s:s}", "step", (json_int_t) step, "name", name, "time",
                                                now));
}

int64_t zt_coord_record_last_checkpoint(const zt_coord_record_t *self)
{
    size_t n = json_array_size(self->checkpoints);
    return n ? json_integer_value(json_object_get(json_array_get(self->checkpoints, n - 1), "step")) : 0;
}

void zt_coord_record_evaluation(zt_coord_record_t *self, const char *replica, const char *name, double value,
                                int64_t step)
{
    char now[40];
    zt_wall_iso(now, sizeof now);
    s_append(self, self->evaluations, json_pack("{s:I, s:s, s:f, s:s, s:s}", "step", (json_int_t) step, "name", name,
                                                "value", value, "replica", replica, "time", now));
}

bool zt_coord_record_evaluated(const zt_coord_record_t *self, int64_t step, const char *replica)
{
    size_t i;
    json_t *e;
    json_array_foreach(self->evaluations, i, e) {
        const char *who = json_string_value(json_object_get(e, "replica"));
        if (json_integer_value(json_object_get(e, "step")) == step && (!replica || (who && !strcmp(who, replica))))
            return true;
    }
    return false;
}

zt_record_rc_t zt_coord_record_metric(zt_coord_record_t *self, const char *replica, const char *name, double value,
                                      int64_t step)
{
    json_t *mine = json_object_get(self->metrics, replica);
    if (!mine && json_object_set_new(self->metrics, replica, mine = json_object()) != 0)
        return ZT_RECORD_NO_MEMORY; /* jansson freed it */
    json_t *entry = json_object_get(mine, name);
    if (!entry && json_object_size(mine) >= ZT_COORD_MAX_METRIC_NAMES) /* a per-replica bound */
        return ZT_RECORD_TOO_MANY;
    /* jansson frees what it refuses (a key that is not UTF-8, say), so an
     * entry is used only once it is in */
    if (!entry && json_object_set_new(mine, name, entry = json_pack("{s:[]}", "series")) != 0)
        return ZT_RECORD_NOT_A_KEY;
    char now[40];
    zt_wall_iso(now, sizeof now);
    json_object_set_new(entry, "value", json_real(value));
    json_object_set_new(entry, "step", json_integer((json_int_t) step));
    json_object_set_new(entry, "time", json_string(now));
    json_t *series = json_object_get(entry, "series");
    json_array_append_new(series, json_pack("[I, f]", (json_int_t) step, value));
    size_t keep = (size_t) zt_knob_int(ZT_KNOB_METRIC_HISTORY);
    while (json_array_size(series) > keep)
        json_array_remove(series, 0);
    self->dirty = true;
    return ZT_RECORD_KEPT;
}

int64_t zt_coord_record_step_of(const zt_coord_record_t *self, const char *replica)
{
    int64_t best = -1;
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(self->metrics, replica), k, v) {
        int64_t st = json_integer_value(json_object_get(v, "step"));
        best = st > best ? st : best;
    }
    return best;
}

void zt_coord_record_latency(zt_coord_record_t *self, const char *kind, const char *replica, json_t *hist)
{
    json_t *byrep = json_object_get(self->latency, kind);
    if (!byrep && json_object_set_new(self->latency, kind, byrep = json_object()) != 0) {
        json_decref(hist); /* out of memory: jansson freed byrep */
        return;
    }
    json_object_set_new(byrep, replica, hist);
    self->dirty = true;
}

void zt_coord_record_refused(zt_coord_record_t *self, zt_record_refusal_t what)
{
    if (what == ZT_RECORD_UNKNOWN_SENDER)
        self->unknown_senders++;
    else if (what == ZT_RECORD_WRONG_IDENTITY)
        self->wrong_identity++;
    else
        self->drops.malformed++;
}

zt_msg_drops_t *zt_coord_record_drops(zt_coord_record_t *self)
{
    return &self->drops;
}

uint64_t zt_coord_record_refusals(const zt_coord_record_t *self)
{
    return self->wrong_identity + self->unknown_senders + self->drops.malformed;
}

void zt_coord_record_changed(zt_coord_record_t *self)
{
    self->dirty = true;
}

void zt_coord_record_refusals_seen(zt_coord_record_t *self, uint64_t elsewhere)
{
    uint64_t now = elsewhere + zt_coord_record_refusals(self);
    if (now != self->refusals_written) { /* job.json counts them, within a second */
        self->refusals_written = now;
        self->dirty = true;
    }
}

void zt_coord_record_set_error(zt_coord_record_t *self, json_t *error)
{
    json_decref(self->error);
    self->error = error;
}

json_t *zt_coord_record_error(zt_coord_record_t *self)
{
    return self->error;
}

bool zt_coord_record_retry(zt_coord_record_t *self, bool disabled)
{
    if (disabled || self->retries >= self->max_retries)
        return false;
    self->retries++;
    return true;
}

int zt_coord_record_retries(const zt_coord_record_t *self)
{
    return self->retries;
}

int zt_coord_record_max_retries(const zt_coord_record_t *self)
{
    return self->max_retries;
}

void zt_coord_record_preempted(zt_coord_record_t *self)
{
    self->preemptions++;
}

int zt_coord_record_preemptions(const zt_coord_record_t *self)
{
    return self->preemptions;
}

bool zt_coord_record_due(const zt_coord_record_t *self, int64_t now_ms, int64_t every_ms)
{
    return self->dirty && now_ms - self->written_ms >= every_ms;
}

void zt_coord_record_into(zt_coord_record_t *self, json_t *doc)
{
    json_object_set_new(doc, "createTime", json_string(self->created));
    json_object_set_new(doc, "jobRetries", json_integer(self->retries));
    json_object_set(doc, "error", self->error ? self->error : json_null());
    json_object_set_new(doc, "preemptions", json_integer(self->preemptions));
    json_object_set_new(doc, "controlPlaneDrops", json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "malformed",
        (json_int_t) self->drops.malformed, "badMagic", (json_int_t) self->drops.bad_magic, "badVersion",
        (json_int_t) self->drops.bad_version, "unknownType", (json_int_t) self->drops.unknown_type, "tooLong",
        (json_int_t) self->drops.too_long, "unknownSender", (json_int_t) self->unknown_senders, "wrongIdentity",
        (json_int_t) self->wrong_identity));
    json_object_set(doc, "transitions", self->transitions);
    json_object_set(doc, "metrics", self->metrics);
    json_object_set(doc, "events", self->events);
    if (json_array_size(self->lost_nodes))
        json_object_set(doc, "lostNodes", self->lost_nodes);
    self->dirty = false;
    self->written_ms = zt_now_ms();
    json_object_set_new(doc, "stateWrites", json_integer(++self->writes)); /* this one included */
    json_object_set(doc, "checkpoints", self->checkpoints);
    json_object_set(doc, "evaluations", self->evaluations);
    if (json_object_size(self->latency))
        json_object_set(doc, "latency", self->latency);
}
