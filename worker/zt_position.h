/* zt_position: an asynchronous trainer's own place in its data, the next
 * step it trains, kept in a file of the job's (<job-dir>/trainers/
 * rank-R.pos, mapped: each step's store is a store to memory, and it
 * outlives a SIGKILL) where the replica restarted in its place finds it.
 * The parameter servers keep their state across such a restart, so the
 * successor goes on from this step, not from the chief's last checkpoint:
 * no batch is trained twice, none skipped. A position of another
 * incarnation (the whole job restarted, the servers from a checkpoint) is
 * not used. */
#ifndef ZT_POSITION_H
#define ZT_POSITION_H
#include <stdint.h>

typedef struct zt_position_t zt_position_t;

/* This rank's position file, made when missing; NULL (logged) when the
 * replica runs outside a job or the file cannot be had. */
zt_position_t *zt_position_open(int rank);
/* The next step the rank's predecessor of this incarnation reached; -1
 * when there is none. */
int64_t zt_position_get(const zt_position_t *self);
void zt_position_set(zt_position_t *self, int64_t next);
const char *zt_position_path(const zt_position_t *self);
void zt_position_close(zt_position_t **self_p);

#endif
