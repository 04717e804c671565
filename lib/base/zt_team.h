/* A team: a few threads that run one batch of independent tasks at once
 * with the caller (fork and join), for work a loop hands out a batch at a
 * time (a reducer's sealed pieces, opened by client). The caller takes
 * tasks too, so a batch never waits for a helper to wake: helpers that
 * wake late find nothing left. */
#ifndef ZT_TEAM_H
#define ZT_TEAM_H

typedef struct zt_team_t zt_team_t;

/* A team of `threads` helpers besides the caller (NULL when none can be
 * started, or threads < 1). at_end (or NULL): what each helper runs as it
 * ends (a library's per-thread state let go). */
zt_team_t *zt_team_new(int threads, void (*at_end)(void));
void zt_team_destroy(zt_team_t **self_p);
/* Runs fn(arg, 0 .. ntasks-1), each once, on the caller's thread and the
 * helpers; returns when every one has returned. self NULL: all on the
 * caller's thread. */
void zt_team_run(zt_team_t *self, int ntasks, void (*fn)(void *arg, int task), void *arg);
/* Helpers (0 for NULL). */
int zt_team_helpers(const zt_team_t *self);
void zt_team_selftest(void);

#endif
