/* zt_msg: the control-plane messages. Each type is declared once below (its
 * fields in ZT_MSG_<TYPE>); the enum, the structs, the names, the encoder,
 * the decoder and the validator all come from these lists.
 *
 * Wire format (one ZeroMQ frame, msgpack):
 *   [magic, major, type, pool, index, incarnation, seq, [field, ...]]
 * A decoder never trusts the network: anything malformed returns an error,
 * is counted by reason, and is dropped by the caller. */
#ifndef ZT_MSG_H
#define ZT_MSG_H
#include <stddef.h>
#include <stdint.h>
#include <czmq.h>

#define ZT_MSG_MAGIC 0x5a54    /* "ZT" */
#define ZT_PROTO_MAJOR 1
#define ZT_MSG_STR_MAX 256     /* longest string field, NUL included */
#define ZT_MSG_MAX_BYTES 4096  /* longest control-plane frame accepted */

/* Fields: F(T, kind, name); kinds I int64, D double, S string. */
#define ZT_MSG_REGISTER(F, T)  F(T, S, role) F(T, I, pid) F(T, S, address)
#define ZT_MSG_WELCOME(F, T)   F(T, I, heartbeat_ms) F(T, I, replicas)
#define ZT_MSG_HEARTBEAT(F, T) F(T, I, step)
#define ZT_MSG_STATUS(F, T)    F(T, S, state) F(T, I, running)
#define ZT_MSG_METRIC(F, T)    F(T, S, name) F(T, D, value) F(T, I, step)
#define ZT_MSG_DONE(F, T)      F(T, I, exit_code) F(T, S, reason)
#define ZT_MSG_SHUTDOWN(F, T)  F(T, S, reason)
#define ZT_MSG_CHECKPOINT(F, T) F(T, I, step) F(T, S, name) F(T, S, address)
/* A synchronous trainer restarted into its running group has its peers'
 * state and trains again (at step, all-reduce generation gen). */
#define ZT_MSG_REJOINED(F, T)  F(T, I, step) F(T, I, gen)
/* The coordinator to a trainer of an elastic pool: the membership
 * generation `group` is decided, in which this trainer is `rank` of
 * `world` (rank -1: it leaves the group). Trainers switch together at a
 * step boundary (see docs/ARCHITECTURE.md, "Elastic groups"); abandon 1:
 * a member was lost, so the round in progress can never finish and is
 * given up, and its step is trained again in the new group. */
#define ZT_MSG_MEMBERSHIP(F, T) F(T, I, group) F(T, I, rank) F(T, I, world) F(T, I, abandon)
/* A trainer to the coordinator: it trains in generation `group` as `rank`,
 * from `step` on. */
#define ZT_MSG_REGROUPED(F, T) F(T, I, group) F(T, I, rank) F(T, I, step)
/* A replica's data-plane latency histogram of one kind (zt_hist: "allreduce",
 * "ps"): its sum of seconds and its counts as "c0,c1,...", one per bucket of
 * zt_hist_bounds and one beyond, since the replica started. */
#define ZT_MSG_LATENCY(F, T)   F(T, S, kind) F(T, D, sum) F(T, S, counts)
/* Data plane (worker <-> parameter server, evaluator <-> chief). The tensor
 * bytes travel as raw frames after this header, never inside msgpack. */
#define ZT_MSG_PS_CONFIG(F, T) F(T, I, req) F(T, I, total) F(T, I, hash)      /* + config JSON */
/* shm_ok: the worker is on the server's host and reads values from its
 * shared memory; shm: empty, the floats follow as a frame, else the zt_shm
 * region holding them at byte shm_off. */
#define ZT_MSG_PS_PULL(F, T)   F(T, I, req) F(T, I, offset) F(T, I, count) F(T, I, step) F(T, I, shm_ok)
#define ZT_MSG_PS_PUSH(F, T)   F(T, I, req) F(T, I, offset) F(T, I, count) F(T, I, step) \
                               F(T, S, shm) F(T, I, shm_off)                  /* + grads */
#define ZT_MSG_PS_VALUES(F, T) F(T, I, req) F(T, I, offset) F(T, I, count) F(T, I, version) \
                               F(T, S, shm) F(T, I, shm_off)                  /* + values */
#define ZT_MSG_PS_ACK(F, T)    F(T, I, req) F(T, I, version)
#define ZT_MSG_PS_ERROR(F, T)  F(T, I, req) F(T, I, code) F(T, S, text)
#define ZT_MSG_PS_SNAPSHOT(F, T) F(T, I, req) F(T, I, step)
/* Reply: one raw frame per state array (values first), then the config JSON. */
#define ZT_MSG_PS_SHARD(F, T)  F(T, I, req) F(T, I, offset) F(T, I, count) F(T, I, version) \
                               F(T, I, arrays)
/* All-reduce (worker <-> reducer, worker <-> worker in the ring). shm_ok: the
 * worker is on the reducer's host and reads sums from its shared memory.
 * shm: empty, the elements follow as a frame; else the zt_shm region holding
 * them at byte shm_off. */
#define ZT_MSG_AR_HELLO(F, T)  F(T, I, req) F(T, I, workers) F(T, I, hash) \
                               F(T, I, shm_ok)                                /* + layout JSON */
#define ZT_MSG_AR_READY(F, T)  F(T, I, req) F(T, I, buckets)
#define ZT_MSG_AR_ERROR(F, T)  F(T, I, req) F(T, I, code) F(T, S, text)
#define ZT_MSG_AR_PIECE(F, T)  F(T, I, bucket) F(T, I, gen) F(T, I, offset) F(T, I, count) \
                               F(T, I, dtype) F(T, I, step) F(T, S, shm) F(T, I, shm_off) /* + elements */
#define ZT_MSG_AR_RESULT(F, T) F(T, I, bucket) F(T, I, gen) F(T, I, offset) F(T, I, count) \
                               F(T, I, dtype) F(T, S, shm) F(T, I, shm_off)   /* + elements */
#define ZT_MSG_AR_RESEND(F, T) F(T, I, bucket) F(T, I, gen)  /* "send me the result of gen again" */
/* A worker between rounds, still there: a restarted reducer learns its
 * address and can ask it for a sum it holds (AR_RESEND). */
#define ZT_MSG_AR_IDLE(F, T)   F(T, I, rounds)
/* Rejoin (a restarted trainer <-> a live peer): the peer's values and
 * optimizer state as they stand before the round it waits on, in order:
 * array 0 the values, then each state array, each cut into frames of at
 * most ZT_PS_CHUNK_BYTES; step and gen say where the group is. group: the
 * membership generation asked for; a peer in another one answers count 0
 * with its own (the asker tries again: it came early). */
#define ZT_MSG_REJOIN_ASK(F, T) F(T, I, req) F(T, I, total) F(T, I, arrays) F(T, I, group)
#define ZT_MSG_REJOIN_STATE(F, T) F(T, I, req) F(T, I, step) F(T, I, gen) F(T, I, total) \
                               F(T, I, arrays) F(T, I, array) F(T, I, offset) F(T, I, count) \
                               F(T, I, group) F(T, I, layout) F(T, I, threshold) F(T, I, cycle_ms) \
                               F(T, I, searching) /* + floats; layout..searching: the group's all-reduce layout */
/* A sealed stream's opening (zt_stream): the client's name, the server it
 * asks for ("": any of the job's), its fresh salt and its proof (hex), then
 * the server's, with the salt of its one-to-many key and the number of the
 * last frame sealed under it. (Wire id 50 is retired: it was a plain "open
 * again" the server sent any connection it held no stream of.) */
#define ZT_MSG_SEAL_OPEN(F, T)   F(T, S, name) F(T, S, server) F(T, S, salt) F(T, S, mac)
#define ZT_MSG_SEAL_ACCEPT(F, T) F(T, S, name) F(T, S, salt) F(T, S, mac) F(T, S, bsalt) F(T, I, blast)
/* SageMaker's distribution mpi (ztrain-mpi): mpirun's remote shell. The
 * primary host's agent asks another host's `ztrain-mpi host` to run a
 * command as req (a shell command line, the raw frame after the header);
 * the host answers MPI_EXITED when it has ended (status: its exit code, or
 * 128 + the signal that ended it; -1 refused, reason says why). Both send
 * HEARTBEAT while it runs; either side gone ends it. */
#define ZT_MSG_MPI_EXEC(F, T)   F(T, I, req)                                  /* + command */
#define ZT_MSG_MPI_EXITED(F, T) F(T, I, req) F(T, I, status) F(T, S, reason)
#define ZT_MSG_FILE_GET(F, T)  F(T, I, req) F(T, S, path) F(T, I, offset) F(T, I, length)
#define ZT_MSG_FILE_DATA(F, T) F(T, I, req) F(T, I, offset) F(T, I, size) F(T, I, code) /* + bytes */

/* X(TYPE, wire id, name) */
#define ZT_MSG_LIST(X)                  \
    X(REGISTER,  1, "register")         \
    X(WELCOME,   2, "welcome")          \
    X(HEARTBEAT, 3, "heartbeat")        \
    X(STATUS,    4, "status")           \
    X(METRIC,    5, "metric")           \
    X(DONE,      6, "done")             \
    X(SHUTDOWN,  7, "shutdown")         \
    X(CHECKPOINT, 8, "checkpoint")      \
    X(REJOINED,  9, "rejoined")         \
    X(LATENCY,  10, "latency")          \
    X(MEMBERSHIP, 11, "membership")     \
    X(REGROUPED, 12, "regrouped")       \
    X(PS_CONFIG, 20, "ps_config")       \
    X(PS_PULL,   21, "ps_pull")         \
    X(PS_PUSH,   22, "ps_push")         \
    X(PS_VALUES, 23, "ps_values")       \
    X(PS_ACK,    24, "ps_ack")          \
    X(PS_ERROR,  25, "ps_error")        \
    X(PS_SNAPSHOT, 26, "ps_snapshot")   \
    X(PS_SHARD,  27, "ps_shard")        \
    X(AR_HELLO,  40, "ar_hello")        \
    X(AR_READY,  41, "ar_ready")        \
    X(AR_ERROR,  42, "ar_error")        \
    X(AR_PIECE,  43, "ar_piece")        \
    X(AR_RESULT, 44, "ar_result")       \
    X(AR_RESEND, 45, "ar_resend")       \
    X(REJOIN_ASK, 46, "rejoin_ask")     \
    X(REJOIN_STATE, 47, "rejoin_state") \
    X(SEAL_OPEN, 48, "seal_open")       \
    X(SEAL_ACCEPT, 49, "seal_accept")   \
    X(AR_IDLE,   51, "ar_idle")         \
    X(MPI_EXEC,  52, "mpi_exec")        \
    X(MPI_EXITED, 53, "mpi_exited")     \
    X(FILE_GET,  30, "file_get")        \
    X(FILE_DATA, 31, "file_data")

typedef enum {
    ZT_MSG_NONE_ = 0,
#define ZT_X_(T, id, name) ZT_MSG_##T = id,
    ZT_MSG_LIST(ZT_X_)
#undef ZT_X_
    ZT_MSG_LIMIT_ = 64           /* every wire id is below this */
} zt_msg_type_t;

#define ZT_F_I(n) int64_t n;
#define ZT_F_D(n) double n;
#define ZT_F_S(n) char n[ZT_MSG_STR_MAX];
#define ZT_F_DECL_(T, kind, n) ZT_F_##kind(n)
#define ZT_X_(T, id, name) typedef struct { ZT_MSG_##T(ZT_F_DECL_, _) } zt_msg_##T##_t;
ZT_MSG_LIST(ZT_X_)
#undef ZT_X_

typedef struct {
    zt_msg_type_t type;      /* which body is valid */
    int pool;                /* sender's pool (0..3; the coordinator says 0) */
    int index;               /* sender's index in its pool */
    int64_t incarnation;     /* job attempt the sender belongs to */
    uint64_t seq;            /* sender's sequence number */
    union {
#define ZT_X_(T, id, name) zt_msg_##T##_t T;
        ZT_MSG_LIST(ZT_X_)
#undef ZT_X_
    } u;
} zt_msg_t;

/* Why decoding failed; counted. */
typedef struct {
    uint64_t malformed;      /* not msgpack, wrong shape or field kinds */
    uint64_t bad_magic;      /* not a ztrain message */
    uint64_t bad_version;    /* another protocol major version */
    uint64_t unknown_type;   /* type id not in the list */
    uint64_t too_long;       /* frame or string over the limits */
} zt_msg_drops_t;

const char *zt_msg_type_name(int type);
/* Encodes into a fresh zframe; NULL on failure (a string over the limit). */
zframe_t *zt_msg_encode(const zt_msg_t *msg);
/* Error codes carried by PS_ERROR and FILE_DATA. */
enum { ZT_PS_NOT_CONFIGURED = 1, ZT_PS_BAD_RANGE = 2, ZT_PS_CONFIG_MISMATCH = 3,
       ZT_PS_BAD_PAYLOAD = 4, ZT_FILE_NOT_FOUND = 5, ZT_FILE_DENIED = 6 };

/* Decodes and validates; 0, ZT_EPROTO or ZT_EVERSION. drops may be NULL. */
int zt_msg_decode(const void *data, size_t size, zt_msg_t *msg, zt_msg_drops_t *drops);
/* Sends msg on sock, after identity when given (ROUTER); 0 or error. */
int zt_msg_send(zsock_t *sock, zframe_t *identity, const zt_msg_t *msg);
/* Receives every frame of one multipart message, without blocking, into
 * parts (the first max; extra frames are dropped). Returns how many were
 * stored, 0 when nothing was waiting. The caller closes them. */
int zt_msg_recv_parts(void *socket, zmq_msg_t *parts, int max);
/* Sends [identity][header][payload...] on a ROUTER; the payload messages are
 * consumed (sent or closed). */
int zt_msg_send_routed(void *router, zmq_msg_t *identity, const zt_msg_t *msg, zmq_msg_t *payload,
                       int npayload);
/* Closes n parts. */
void zt_msg_close_parts(zmq_msg_t *parts, int n);
/* Copies s into a string field, truncating. */
void zt_msg_set_str(char *field, const char *s);
void zt_msg_selftest(void);

#endif
