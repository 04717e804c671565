/* What the handler fuzzers share: reading fuzz input as fields, and a
 * decoded message made into the parts a server's loop receives.
 *
 * Input: records of [selector byte][field bytes...]; each int64 field takes
 * a byte that picks a small value, a boundary (0, -1, INT64_MAX, 2^62,
 * INT64_MIN) or 8 raw bytes; the rest of a record (up to 64 bytes) is its
 * payload. */
#ifndef FUZZ_INPUT_H
#define FUZZ_INPUT_H
#include "wire/zt_msg.h"
#include "base/zt_util.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    const uint8_t *p;
    size_t n;
} s_in_t;

static inline uint8_t s_byte(s_in_t *in)
{
    if (!in->n)
        return 0;
    in->n--;
    return *in->p++;
}

static inline int64_t s_int(s_in_t *in)
{
    uint8_t k = s_byte(in);
    switch (k % 8) {
    case 0: return 0;
    case 1: return -1;
    case 2: return INT64_MAX;
    case 3: return (int64_t) 1 << 62;
    case 4: return INT64_MIN;
    case 5: {
        uint64_t v = 0;
        for (int i = 0; i < 8; i++)
            v = (v << 8) | s_byte(in);
        return (int64_t) v;
    }
    default: return s_byte(in) + 256 * (k & 1); /* small: within a small model */
    }
}

/* The record's payload: given (payload set), or the next up to 64 bytes. */
static inline void s_take_payload(s_in_t *in, const void **payload, size_t *plen)
{
    if (*payload)
        return;
    *plen = in->n < 64 ? in->n : s_byte(in) % 65;
    if (*plen > in->n)
        *plen = in->n;
    *payload = in->p;
    in->p += *plen;
    in->n -= *plen;
}

/* [identity, header, payload?] as a server's loop receives them; how many
 * parts (the caller closes them); 0 when m does not encode. */
static inline int s_parts(zmq_msg_t *parts, const zt_msg_t *m, const void *payload, size_t plen, bool frame)
{
    zframe_t *h = zt_msg_encode(m);
    if (!h)
        return 0;
    zmq_msg_init_size(&parts[0], 5);
    memcpy(zmq_msg_data(&parts[0]), "\0fuzz", 5);
    zmq_msg_init_size(&parts[1], zframe_size(h));
    memcpy(zmq_msg_data(&parts[1]), zframe_data(h), zframe_size(h));
    zframe_destroy(&h);
    if (!plen && !frame)
        return 2;
    zmq_msg_init_size(&parts[2], plen);
    if (plen)
        memcpy(zmq_msg_data(&parts[2]), payload, plen);
    return 3;
}

/* A scratch folder of the fuzzer's, /tmp/zt-fuzz-TAG-PID, made 0700 and
 * removed (with what is in it) when the fuzzer exits. */
static inline char *s_fuzz_dir_path(void)
{
    static char path[64];
    return path;
}

static inline void s_fuzz_dir_remove(void)
{
    if (zt_rm_tree(s_fuzz_dir_path()) != 0)
        fprintf(stderr, "could not remove %s\n", s_fuzz_dir_path());
}

static inline const char *s_fuzz_dir(const char *tag)
{
    snprintf(s_fuzz_dir_path(), 64, "/tmp/zt-fuzz-%s-%d", tag, (int) getpid());
    mkdir(s_fuzz_dir_path(), 0700);
    atexit(s_fuzz_dir_remove);
    return s_fuzz_dir_path();
}

#endif
