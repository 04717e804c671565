/* zt_held: the pieces one worker sent of a reducer's chunk of a bucket,
 * held by reference (a frame's reference, or a pinned mapping of the
 * worker's shared memory) until every worker's piece of their block has
 * come; then each block is summed in rank order, so a job's sums are the
 * same every run whatever order the pieces arrived in. */
#ifndef ZT_HELD_H
#define ZT_HELD_H
#include <stdbool.h>
#include <stdint.h>
#include <zmq.h>

typedef struct zt_held_piece_t zt_held_piece_t;

typedef struct {
    zt_held_piece_t **p;       /* disjoint, sorted by first element */
    int n, cap;
    zt_held_piece_t *spare;    /* nodes let go, reused */
} zt_held_t;

/* Holds elements [a, b) of a piece (bytes of them); src is element a, in
 * payload's data (of which a reference is taken, or, when [a, b) is less
 * than half of it, a copy), or, payload NULL, in a peer's shared memory
 * (whose mapping is pinned until the piece is let go). [a, b) must not
 * overlap what h holds. ZT_OK or ZT_ENOMEM. */
int zt_held_add(zt_held_t *h, int64_t a, int64_t b, const char *src, size_t bytes, zmq_msg_t *payload);
/* Elements [a, e) of the sum of held[0..n) in that order into out (element
 * a, of dtype): held[0]'s copied, the others added in float32. Every one
 * must hold all of [a, e). */
void zt_held_sum(const zt_held_t *held, int n, int64_t a, int64_t e, int dtype, void *out);
/* Lets go of every piece of h that overlaps [a, e) and of which done(arg,
 * first, end) says it is no longer needed (every block it touches summed). */
void zt_held_release(zt_held_t *h, int64_t a, int64_t e, bool (*done)(void *arg, int64_t pa, int64_t pb),
                     void *arg);
/* Lets go of every piece (the memory of h, its nodes too, stays for the
 * next round). */
void zt_held_clear(zt_held_t *h);
void zt_held_free(zt_held_t *h);
/* Elements held. */
int64_t zt_held_count(const zt_held_t *h);

void zt_held_selftest(void);

#endif
