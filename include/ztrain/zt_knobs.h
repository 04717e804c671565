/* ztrain: every tunable, declared once with its environment variable,
 * default, the values it takes and its meaning. --help prints this table;
 * the README lists it. Values: "int" a whole number >= 0; "num" a decimal
 * number >= 0; "a|b" one of those words ("auto|int": auto or a whole
 * number); "path" any text. An empty default means unset. */
#ifndef ZT_KNOBS_H
#define ZT_KNOBS_H
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Which binaries a knob applies to (their --help lists it). */
#define ZT_FOR_COORD    1u  /* ztrain and ztrain-coordinator */
#define ZT_FOR_WORKER   2u  /* ztrain-worker, and programs that link libztrain */
#define ZT_FOR_PS       4u  /* ztrain-paramserver */
#define ZT_FOR_REDUCER  8u  /* ztrain-reducer */
#define ZT_FOR_EVAL    16u  /* ztrain-evaluator */
#define ZT_FOR_ALL     31u

/* X(ID, VARIABLE, DEFAULT, VALUES, APPLIES TO, MEANING) */
#define ZT_KNOBS(X)                                                              \
    X(HEARTBEAT_MS,        "ZT_HEARTBEAT_MS",        "1000", "int", ZT_FOR_ALL,                      \
      "interval between a replica's heartbeats to the coordinator (ms)")          \
    X(HEARTBEAT_TIMEOUT_MS,"ZT_HEARTBEAT_TIMEOUT_MS","10000", "int", ZT_FOR_COORD,                     \
      "a registered replica silent this long is treated as crashed (ms)")         \
    X(SCALE_TIMEOUT_MS,    "ZT_SCALE_TIMEOUT_MS",    "120000", "int", ZT_FOR_COORD,                    \
      "an elastic pool's change of membership (ztrain scale) that has not finished after this long restarts the group together in its new membership, from the newest checkpoint (ms)") \
    X(REGAIN_MS,           "ZT_REGAIN_MS",           "10000", "int", ZT_FOR_COORD,                     \
      "an elastic pool shrunk by a lost node asks the cluster for a node again this often, and grows back when it gets one (ms)") \
    X(REGISTER_TIMEOUT_MS, "ZT_REGISTER_TIMEOUT_MS", "30000", "int", ZT_FOR_COORD,                     \
      "a ztrain role replica must register within this time of starting (ms)")    \
    X(MAX_RESTARTS,        "ZT_MAX_RESTARTS",        "5", "int", ZT_FOR_COORD,                         \
      "in-place restarts of one crashed replica before the job is retried")       \
    X(EVAL_FINAL_MS,       "ZT_EVAL_FINAL_MS",       "30000", "int", ZT_FOR_COORD,                      \
      "when the primary replica finishes with its final model announced, running evaluators get this long to score it before the job ends (ms; 0: no wait)") \
    X(MAX_PREEMPTIONS,     "ZT_MAX_PREEMPTIONS",     "100", "int", ZT_FOR_COORD,                        \
      "a replica stopped by signals ztrain did not send (SIGTERM or SIGINT: a preemption) is restarted without counting a crash this many times; after that such a stop counts as a crash") \
    X(MAX_JOB_RETRIES,     "ZT_MAX_JOB_RETRIES",     "3", "int", ZT_FOR_COORD,                         \
      "whole-job retries after a replica exhausts its restarts")                  \
    X(STOP_GRACE_MS,       "ZT_STOP_GRACE_MS",       "5000", "int", ZT_FOR_COORD | ZT_FOR_WORKER,      \
      "time between SIGTERM and SIGKILL when stopping a replica (ms); a trainer saving on a stop waits at most half of it for the parameter servers") \
    X(MAX_REPLICAS,        "ZT_MAX_REPLICAS",        "256", "int", ZT_FOR_COORD,                       \
      "largest replicaCount accepted for one pool on this machine")               \
    X(GPU_COUNT,           "ZT_GPU_COUNT",           "auto", "auto|int", ZT_FOR_COORD|ZT_FOR_WORKER,                      \
      "GPUs on this machine (auto: count /dev/nvidiaN)")                          \
    X(GPU_MODULE,          "ZT_GPU_MODULE",          "", "path", ZT_FOR_WORKER,                         \
      "the CUDA module a GPU trainer loads (empty: lib/ztrain/libztgpu.so beside the binaries' bin/)") \
    X(BACKEND,             "ZT_BACKEND",             "local", "local|slurm", ZT_FOR_COORD,                    \
      "where `ztrain run` places and starts replicas (--backend wins)")           \
    X(METRIC_HISTORY,      "ZT_METRIC_HISTORY",      "100", "int", ZT_FOR_COORD,                       \
      "job.json keeps this many of each replica's newest values of each metric (its series)") \
    X(METRICS_ADDR,        "ZT_METRICS_ADDR",        "127.0.0.1", "ipv4", ZT_FOR_COORD,               \
      "the address `ztrain run --metrics-port` serves Prometheus metrics on; one other than loopback needs ZT_SECURITY=off (the endpoint has no authentication)") \
    X(JOBS_DIR,            "ZT_JOBS_DIR",            "ztrain-jobs", "path", ZT_FOR_COORD,               \
      "where a job's directory is made when --job-dir is not given")              \
    X(PS_CHUNK_BYTES,      "ZT_PS_CHUNK_BYTES",      "1048576", "int", ZT_FOR_WORKER|ZT_FOR_PS,                   \
      "largest payload frame of a parameter-server push or pull (bytes)")         \
    X(PS_SNAPSHOT_MS,      "ZT_PS_SNAPSHOT_MS",      "500", "int", ZT_FOR_PS,                           \
      "async: a parameter server writes its shard to <job-dir>/ps-snapshots this often while it changes, and a restarted one goes on from it (ms; 0: off)") \
    X(PS_TIMEOUT_MS,       "ZT_PS_TIMEOUT_MS",       "120000", "int", ZT_FOR_WORKER,                    \
      "a parameter server silent this long fails the worker's call (ms)")         \
    X(ALLREDUCE_TIMEOUT_MS,"ZT_ALLREDUCE_TIMEOUT_MS","120000", "int", ZT_FOR_WORKER,                    \
      "an all-reduce step that waits this long for a peer fails the worker, as the system's failure (ms)") \
    X(REJOIN_TIMEOUT_MS,   "ZT_REJOIN_TIMEOUT_MS",   "10000", "int", ZT_FOR_WORKER,                     \
      "a restarted synchronous trainer waits this long for each live peer's state before trying the next (ms); none answers: the group restarts from the newest checkpoint") \
    X(ALLOW_NONFINITE,     "ZT_ALLOW_NONFINITE",     "0", "int", ZT_FOR_PS|ZT_FOR_REDUCER,             \
      "1: parameter servers and reducers take NaN or infinite gradients; 0: they refuse them (the push or piece is not applied, the sender is told why and named in the log, and the count is the server's nonfinite_refused metric in job.json)") \
    X(FUSION_THRESHOLD,    "ZT_FUSION_THRESHOLD",    "", "int", ZT_FOR_WORKER,                          \
      "all-reduce bucket size in bytes (else HOROVOD_FUSION_THRESHOLD, else ZT_BUCKET_CAP_MB, else 1 MiB)") \
    X(HOROVOD_FUSION_THRESHOLD, "HOROVOD_FUSION_THRESHOLD", "", "int", ZT_FOR_WORKER,                 \
      "Horovod's name for the all-reduce bucket size in bytes")                   \
    X(BUCKET_CAP_MB,       "ZT_BUCKET_CAP_MB",       "", "num", ZT_FOR_WORKER,                          \
      "bucket_cap_mb: all-reduce bucket size in MiB (PyTorch DDP's name)")        \
    X(CYCLE_TIME_MS,       "ZT_CYCLE_TIME_MS",       "", "num", ZT_FOR_WORKER,                          \
      "flush a partly ready bucket after this long (else HOROVOD_CYCLE_TIME, else 5)") \
    X(HOROVOD_CYCLE_TIME,  "HOROVOD_CYCLE_TIME",     "", "num", ZT_FOR_WORKER,                   \
      "Horovod's name for the cycle time (ms)")                                   \
    X(AUTOTUNE,            "ZT_AUTOTUNE",            "", "0|1", ZT_FOR_WORKER,                          \
      "1: a synchronous all-reduce searches its fusion threshold and cycle time during its first rounds (a Gaussian process over timed samples of rounds, led by rank 0), keeps the fastest and logs what it chose and why (else HOROVOD_AUTOTUNE, else 0); every worker must agree. Not in an elastic pool") \
    X(HOROVOD_AUTOTUNE,    "HOROVOD_AUTOTUNE",       "", "0|1", ZT_FOR_WORKER,                          \
      "Horovod's name for ZT_AUTOTUNE")                                           \
    X(AUTOTUNE_STEPS_PER_SAMPLE, "ZT_AUTOTUNE_STEPS_PER_SAMPLE", "", "int", ZT_FOR_WORKER,            \
      "autotune: rounds timed per sample, their median its time (else HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE, else 10)") \
    X(HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE, "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "", "int", ZT_FOR_WORKER, \
      "Horovod's name for ZT_AUTOTUNE_STEPS_PER_SAMPLE")                          \
    X(AUTOTUNE_SAMPLES,    "ZT_AUTOTUNE_SAMPLES",    "", "int", ZT_FOR_WORKER,                          \
      "autotune: settings tried, the starting one first, at most 60 (else HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES, else 20)") \
    X(HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES, "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "", "int", ZT_FOR_WORKER, \
      "Horovod's name for ZT_AUTOTUNE_SAMPLES")                                   \
    X(AUTOTUNE_WARMUP_SAMPLES, "ZT_AUTOTUNE_WARMUP_SAMPLES", "", "int", ZT_FOR_WORKER,                \
      "autotune: samples' worth of rounds run untimed before the first (else HOROVOD_AUTOTUNE_WARMUP_SAMPLES, else 3)") \
    X(HOROVOD_AUTOTUNE_WARMUP_SAMPLES, "HOROVOD_AUTOTUNE_WARMUP_SAMPLES", "", "int", ZT_FOR_WORKER,   \
      "Horovod's name for ZT_AUTOTUNE_WARMUP_SAMPLES")                            \
    X(AUTOTUNE_LOG,        "ZT_AUTOTUNE_LOG",        "", "path", ZT_FOR_WORKER,                         \
      "autotune: rank 0 writes each sample to this CSV file (sample, fusion_threshold_bytes, cycle_time_ms, seconds_per_round, chosen) (else HOROVOD_AUTOTUNE_LOG)") \
    X(HOROVOD_AUTOTUNE_LOG, "HOROVOD_AUTOTUNE_LOG",  "", "path", ZT_FOR_WORKER,                         \
      "Horovod's name for ZT_AUTOTUNE_LOG")                                       \
    X(COLL_ROUND_BYTES,    "ZT_COLL_ROUND_BYTES",    "67108864", "int", ZT_FOR_WORKER,                   \
      "what one round of a collective (zt_coll: the Python package's allreduce, broadcast, DDP hook and DistributedOptimizer) stages, in buckets of the fusion threshold; more data takes more rounds (bytes)") \
    X(REDUCER_IO_THREADS,  "ZT_REDUCER_IO_THREADS",  "0", "int", ZT_FOR_REDUCER,                        \
      "ZeroMQ I/O threads of a reducer, among which its workers' connections are spread (0: one per 4 cores of the host, 1 to 4; ZSYS_IO_THREADS, when set, wins)") \
    X(REDUCER_THREADS,     "ZT_REDUCER_THREADS",     "0", "int", ZT_FOR_REDUCER,                        \
      "threads that open a reducer's sealed pieces, different workers' at once, each worker's in order (0: one per 4 cores of the host, 1 to 4; 1: the reducer's own thread alone)") \
    X(COLLECTIVE_WARN_MS,  "ZT_COLLECTIVE_WARN_MS",  "10000", "int", ZT_FOR_REDUCER,                     \
      "a bucket waiting this long logs which workers have not contributed (ms)")  \
    X(AR_PIECE_BYTES,      "ZT_AR_PIECE_BYTES",      "131072", "int", ZT_FOR_WORKER,                    \
      "all-reduce piece: what a worker sends at a time and a reducer sums and streams back (bytes)") \
    X(AR_WINDOW_BYTES,     "ZT_AR_WINDOW_BYTES",     "1048576", "int", ZT_FOR_WORKER,                   \
      "bytes of one-tensor buckets a worker has out to the reducers on other hosts before sums come back, in all: each such reducer gets an equal share, at least one piece, over every bucket of the round (its lowest unfinished bucket may always send its share) (0: no limit)") \
    X(AR_THREADS,          "ZT_AR_THREADS",          "0", "int", ZT_FOR_WORKER,                         \
      "threads that move a worker's all-reduce bytes to and from its reducers while a round is under way, each serving every n-th reducer: sealing, sending, receiving, opening and writing the sums on run on that many cores at once (0: when every reducer is on another host, one per reducer, at most 4 or one per 4 cores of the host if that is more; below 2: the caller's thread does it all)") \
    X(AR_LOCAL_WINDOW_BYTES,"ZT_AR_LOCAL_WINDOW_BYTES","2097152", "int", ZT_FOR_WORKER,                  \
      "bytes of one large tensor a worker has out per reducer on this host (reached over ipc://) before sums come back") \
    X(SECURITY,            "ZT_SECURITY",            "on", "on|off", ZT_FOR_ALL,                                      \
      "on: every socket of a job started by ztrain run is authenticated and encrypted (CURVE keys made for each job, in files only its user can read; only the job's replicas may connect, each as itself); off: for benchmarks only, no authentication and no encryption, so anyone who can reach the job's ports can read its model and pose as its replicas") \
    X(BULK_SEAL,           "ZT_BULK_SEAL",           "on", "on|off", ZT_FOR_ALL,                                      \
      "on: in a secured job, bulk data between hosts (parameter servers' pushes and pulls, all-reduce pieces and sums through reducers, ring blocks, checkpoint files fetched by evaluators) is sealed (ZT_SEAL_CIPHER) under keys of the job's own (each stream's, fresh) instead of CURVE, which keeps the control plane; off: CURVE on those sockets too (for comparison)") \
    X(BULK_DIRECT,         "ZT_BULK_DIRECT",         "on", "on|all|off", ZT_FOR_ALL,                                  \
      "on: sealed bulk bytes between hosts move on the thread that uses them, straight between the kernel and the tensors (the ZeroMQ protocol on TCP sockets of their own): a client's (all-reduce pieces and sums through reducers, ring blocks to the next worker, parameter-server pushes and pulls: a fifth less of the trainers' CPU per byte), and a parameter server accepts its workers' connections and reads and writes them on its own thread (16 MiB pushes and pulls over TCP 1.5-2.5x as fast on 2 cores); all: reducers too (on 2 cores, a 16 MiB all-reduce through 4 reducers over TCP: about 11% less CPU, in C and as a PyTorch job; none saved through 2; 10-15% slower over slow links, so not the default); off: through ZeroMQ sockets and their I/O threads (a few percent faster over slow links: 8 workers and 8 reducers on 300 Mbit/s links, 1.73x the ring at 16 MiB against 1.60-1.70x)") \
    X(SEAL_CIPHER,         "ZT_SEAL_CIPHER",         "aegis128x2", "aegis128x2|aes128gcm", ZT_FOR_ALL,    \
      "the bulk seal's authenticated cipher, the same for every replica of a job (a replica that seals with another is refused at the stream's opening, and says so): aegis128x2 (AEGIS-128X2, built from the AES round alone: 2.7x AES-128-GCM's bytes per second on a core with VAES, and on AES-NI alone 1.25x GCM on VAES, 3x OpenSSL's GCM; needs AES-NI) or aes128gcm (AES-128-GCM, TLS 1.3's first suite)") \
    X(SEAL_VAES,           "ZT_SEAL_VAES",           "auto", "auto|ymm|off", ZT_FOR_ALL,                  \
      "auto: the bulk seal's AES-128-GCM (ZT_SEAL_CIPHER=aes128gcm) runs four blocks per instruction (VAES and VPCLMULQDQ on 512-bit registers) where the processor has AVX-512, two (256-bit registers) where it has only VAES; ymm: two at most; off: OpenSSL's always, and AEGIS-128X2 on AES-NI alone instead of VAES (the same bytes on the wire either way; ymm and off for comparison)") \
    X(MALLOC_KEEP_BYTES,   "ZT_MALLOC_KEEP_BYTES",   "0", "int", ZT_FOR_ALL,                             \
      "free memory each malloc heap of a process with a data plane keeps for reuse (glibc's M_TRIM_THRESHOLD; blocks up to 32 MiB then come from the heaps, M_MMAP_THRESHOLD), so the frames ZeroMQ receives reuse pages instead of faulting fresh ones in, e.g. 268435456; 0 (the default), or malloc settings of your own in GLIBC_TUNABLES or MALLOC_*_: glibc's defaults (bytes)") \
    X(DATA_IPC,            "ZT_DATA_IPC",            "auto", "auto|off", ZT_FOR_ALL,                      \
      "auto: a job's sockets between processes on one host go over ipc:// twins of their TCP ports (control and data plane), and a job's TCP ports then accept only its other hosts; off: TCP only, open to any address (as between hosts; for benchmarks)") \
    X(HANDSHAKE_MS,        "ZT_HANDSHAKE_MS",        "10000", "int", ZT_FOR_ALL,                         \
      "a connection whose ZeroMQ/CURVE handshake is not done within this long is closed, counted and logged (ms)") \
    X(SHM,                 "ZT_SHM",                 "auto", "auto|off", ZT_FOR_WORKER|ZT_FOR_PS|ZT_FOR_REDUCER,                      \
      "auto: all-reduce and parameter-server payloads between replicas on this host go through shared memory (sealed memfds); off: over the sockets") \
    X(IPC_DIR,             "ZT_IPC_DIR",             "", "path", ZT_FOR_ALL,           \
      "where the ipc:// twins of a job's same-host endpoints live (ztrain-PORT.sock); empty: /tmp/ztrain-ipc-UID. It must be this user's, mode 0700 (made so when missing); otherwise it is not used and same-host data goes over TCP") \
    X(SPIN_US,             "ZT_SPIN_US",             "200", "int", ZT_FOR_WORKER,                       \
      "a client waiting for a reply polls this long before sleeping (us, adaptive; 0: never; an all-reduce's n threads (ZT_AR_THREADS) wait at once, each 1/n of it)") \
    X(TENSORBOARD,         "ZT_TENSORBOARD",         "chief", "chief|all|off", ZT_FOR_WORKER|ZT_FOR_EVAL,         \
      "which built-in trainers write TensorBoard scalars under AIP_TENSORBOARD_LOG_DIR (the chief to train/, the others to train-<replica>/ with all; the evaluator to eval/ unless off)") \
    X(DATA_DIR,            "ZT_DATA_DIR",            "/usr/share/datasets/fashion-mnist", "path", ZT_FOR_WORKER|ZT_FOR_EVAL, \
      "where the trainer and evaluator find Fashion-MNIST (gzipped IDX files)")   \
    X(LOG_LEVEL,           "ZT_LOG_LEVEL",           "info", "error|warn|info|debug", ZT_FOR_ALL,                      \
      "error, warn, info or debug")

typedef enum {
#define ZT_X_(id, env, def, check, roles, help) ZT_KNOB_##id,
    ZT_KNOBS(ZT_X_)
#undef ZT_X_
    ZT_KNOB_COUNT_
} zt_knob_t;

/* The knob's value: its environment variable when set, else the default. */
const char *zt_knob_str(zt_knob_t knob);
/* True when its environment variable is set (and not empty). */
int zt_knob_is_set(zt_knob_t knob);
/* As a whole number; 0 when unset without a default. A malformed value is
 * logged as an error and gives the default: check the knobs first. */
int64_t zt_knob_int(zt_knob_t knob);
/* As a decimal number, the same way. */
double zt_knob_num(zt_knob_t knob);
/* The knob named by its environment variable ("ZT_SHM"), or -1. */
int zt_knob_find(const char *env);
/* Whether value is one the knob takes: 0, or ZT_EINVAL with
 * "NAME=VALUE: why" in err. */
int zt_knob_check_value(zt_knob_t knob, const char *value, char *err, size_t len);
/* Checks every knob set in the environment: 0, or ZT_EINVAL with the first
 * bad one named in err ("HOROVOD_FUSION_THRESHOLD=64MB: not a whole number
 * of ..."). ztrain's binaries call it first and stop on an error. */
int zt_knobs_check(char *err, size_t len);
/* Prints every knob: variable, default, meaning. */
void zt_knobs_print(FILE *out);
/* Prints the knobs that apply to one of roles (ZT_FOR_* bits). */
void zt_knobs_print_for(FILE *out, unsigned roles);

#ifdef __cplusplus
}
#endif
#endif
