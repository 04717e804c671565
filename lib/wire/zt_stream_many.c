/* A server's messages opened together: those of different clients on a
 * team's threads at once (see zt_streams_open_many in zt_stream.h).
 *
 * What a stream holds (its openers, their last numbers, keys waiting for
 * confirmation) is touched by one thread at a time: all of one client's
 * messages of a batch go to one task, in the order they came. What the
 * table shares (its drop counts, its use clock) is written by the caller
 * alone, after the tasks. An opening (SEAL_OPEN: it may make, replace or
 * evict a stream) waits for everything before it and is taken alone, on
 * the caller's thread, as zt_streams_recv takes it. */
#include "wire/zt_stream_internal.h"
#include "ztrain/zt_error.h"

typedef struct {
    zt_streams_item_t *items;
    zt_stream_t *by[ZT_STREAMS_MANY];     /* each item's stream */
    int next[ZT_STREAMS_MANY];            /* the same stream's next item, or -1 */
    int first[ZT_STREAMS_MANY];           /* each task's (stream's) first item */
    zt_stream_drops_t drops[ZT_STREAMS_MANY]; /* each task's */
} s_many_t;

static void s_task(void *arg, int t)
{
    s_many_t *x = arg;
    for (int i = x->first[t]; i >= 0; i = x->next[i]) {
        zt_streams_item_t *it = &x->items[i];
        int left = it->n - 1;
        if (zt_stream_open_parts(x->by[i], &x->drops[t], it->parts + 1, &left, NULL, 0) == ZT_OK)
            it->n = left + 1;
        else {
            zt_stream_close_parts(it->parts, &it->n);
            it->n = ZT_EPROTO;
        }
    }
}

static void s_add(zt_stream_drops_t *to, const zt_stream_drops_t *d)
{
    to->bad_open += d->bad_open;
    to->bad_seal += d->bad_seal;
    to->replayed += d->replayed;
    to->no_stream += d->no_stream;
    to->malformed += d->malformed;
}

/* Opens items [a, b), every one a sealed message of a stream held (by[]). */
static void s_open_run(zt_streams_t *self, s_many_t *x, int a, int b, zt_team_t *team)
{
    int tasks = 0;
    int last[ZT_STREAMS_MANY]; /* each task's last item */
    for (int i = a; i < b; i++) {
        x->next[i] = -1;
        int t = 0;
        while (t < tasks && x->by[x->first[t]] != x->by[i])
            t++;
        if (t == tasks) {
            x->first[tasks] = i;
            x->drops[tasks++] = (zt_stream_drops_t) { 0 };
        }
        else
            x->next[last[t]] = i;
        last[t] = i;
    }
    zt_team_run(team, tasks, s_task, x);
    for (int t = 0; t < tasks; t++)
        s_add(&self->drops, &x->drops[t]);
    for (int i = a; i < b; i++)
        if (x->items[i].n > 0)
            x->by[i]->used = ++self->clock;
}

void zt_streams_open_many(zt_streams_t *self, zt_streams_item_t *items, int count, zt_team_t *team)
{
    s_many_t x;
    x.items = items;
    if (count > ZT_STREAMS_MANY)
        count = ZT_STREAMS_MANY;
    int run = 0; /* the first item of the run not opened yet */
    for (int i = 0; i < count; i++) {
        zt_streams_item_t *it = &items[i];
        if (it->n >= 3 && (x.by[i] = zt_streams_lookup(self, &it->parts[0], false)))
            continue; /* a sealed message of a stream held: opened with its run */
        s_open_run(self, &x, run, i, team);
        run = i + 1;
        zt_stream_t *from; /* an opening, one of no stream, or a malformed one: as ever */
        if (zt_streams_recv(self, it->parts, &it->n, &from) != ZT_OK)
            it->n = ZT_EPROTO;
    }
    s_open_run(self, &x, run, count, team);
}
