/* ztrain: every tunable, declared once with its environment variable,
 * default and meaning. --help prints this table; the README lists it. */
#ifndef ZT_KNOBS_H
#define ZT_KNOBS_H
#include <stdio.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ZT_KNOBS(X)                                                              \
    X(HEARTBEAT_MS,        "ZT_HEARTBEAT_MS",        "1000",                      \
      "interval between a replica's heartbeats to the coordinator (ms)")          \
    X(HEARTBEAT_TIMEOUT_MS,"ZT_HEARTBEAT_TIMEOUT_MS","10000",                     \
      "a registered replica silent this long is treated as crashed (ms)")         \
    X(REGISTER_TIMEOUT_MS, "ZT_REGISTER_TIMEOUT_MS", "30000",                     \
      "a ztrain role replica must register within this time of starting (ms)")    \
    X(MAX_RESTARTS,        "ZT_MAX_RESTARTS",        "5",                         \
      "in-place restarts of one crashed replica before the job is retried")       \
    X(MAX_JOB_RETRIES,     "ZT_MAX_JOB_RETRIES",     "3",                         \
      "whole-job retries after a replica exhausts its restarts")                  \
    X(STOP_GRACE_MS,       "ZT_STOP_GRACE_MS",       "5000",                      \
      "time between SIGTERM and SIGKILL when stopping a replica (ms)")            \
    X(MAX_REPLICAS,        "ZT_MAX_REPLICAS",        "256",                       \
      "largest replicaCount accepted for one pool on this machine")               \
    X(GPU_COUNT,           "ZT_GPU_COUNT",           "auto",                      \
      "GPUs on this machine (auto: count /dev/nvidiaN)")                          \
    X(JOBS_DIR,            "ZT_JOBS_DIR",            "ztrain-jobs",               \
      "where a job's directory is made when --job-dir is not given")              \
    X(PS_CHUNK_BYTES,      "ZT_PS_CHUNK_BYTES",      "1048576",                   \
      "largest payload frame of a parameter-server push or pull (bytes)")         \
    X(PS_TIMEOUT_MS,       "ZT_PS_TIMEOUT_MS",       "120000",                    \
      "a parameter server silent this long fails the worker's call (ms)")         \
    X(FUSION_THRESHOLD,    "ZT_FUSION_THRESHOLD",    "",                          \
      "all-reduce bucket size in bytes (else HOROVOD_FUSION_THRESHOLD, else ZT_BUCKET_CAP_MB, else 1 MiB)") \
    X(BUCKET_CAP_MB,       "ZT_BUCKET_CAP_MB",       "",                          \
      "bucket_cap_mb: all-reduce bucket size in MiB (PyTorch DDP's name)")        \
    X(CYCLE_TIME_MS,       "ZT_CYCLE_TIME_MS",       "",                          \
      "flush a partly ready bucket after this long (else HOROVOD_CYCLE_TIME, else 5)") \
    X(COLLECTIVE_WARN_MS,  "ZT_COLLECTIVE_WARN_MS",  "10000",                     \
      "a bucket waiting this long logs which workers have not contributed (ms)")  \
    X(AR_PIECE_BYTES,      "ZT_AR_PIECE_BYTES",      "131072",                    \
      "all-reduce piece: what a worker sends at a time and a reducer sums and streams back (bytes)") \
    X(AR_WINDOW_BYTES,     "ZT_AR_WINDOW_BYTES",     "524288",                    \
      "bytes of one large tensor a worker has out per reducer over the network before sums come back (0: no limit)") \
    X(AR_LOCAL_WINDOW_BYTES,"ZT_AR_LOCAL_WINDOW_BYTES","2097152",                  \
      "the same for a reducer on this host (reached over ipc://)") \
    X(DATA_IPC,            "ZT_DATA_IPC",            "auto",                      \
      "auto: data-plane sockets on this host (loopback) also go over ipc://; off: TCP only") \
    X(SHM,                 "ZT_SHM",                 "auto",                      \
      "auto: all-reduce and parameter-server payloads between replicas on this host go through /dev/shm; off: over the sockets") \
    X(IPC_DIR,             "ZT_IPC_DIR",             "/tmp/ztrain-ipc",           \
      "where the ipc:// twins of loopback data-plane endpoints live (ztrain-PORT.sock)") \
    X(SPIN_US,             "ZT_SPIN_US",             "200",                       \
      "a client waiting for a reply polls this long before sleeping (us, adaptive; 0: never)") \
    X(DATA_DIR,            "ZT_DATA_DIR",            "/usr/share/datasets/fashion-mnist", \
      "where the trainer and evaluator find Fashion-MNIST (gzipped IDX files)")   \
    X(LOG_LEVEL,           "ZT_LOG_LEVEL",           "info",                      \
      "error, warn, info or debug")

typedef enum {
#define ZT_X_(id, env, def, help) ZT_KNOB_##id,
    ZT_KNOBS(ZT_X_)
#undef ZT_X_
    ZT_KNOB_COUNT_
} zt_knob_t;

/* The knob's value: its environment variable when set, else the default. */
const char *zt_knob_str(zt_knob_t knob);
/* As an integer; a malformed value logs a warning and gives the default. */
int64_t zt_knob_int(zt_knob_t knob);
/* Prints every knob: variable, default, meaning. */
void zt_knobs_print(FILE *out);

#ifdef __cplusplus
}
#endif
#endif
