/* zt_auth: who may connect to a job's sockets.
 *
 * A job started by `ztrain run` is closed to everyone but its own replicas.
 * Its coordinator makes fresh CURVE keys when it starts: one server key pair
 * that every replica's servers use, and one client key pair per replica.
 * They go in files only the job's user can read (the folder 0700, the files
 * 0600), never in the environment or on a command line: a replica is told
 * only the path of its own file (ZT_CREDENTIALS).
 *
 * A process holding credentials makes every socket a CURVE socket (the
 * transport calls zt_auth_apply): its servers accept a connection only from
 * a client whose public key is one of the job's replicas' (a ZAP handler in
 * the process says which replica it is), and its clients know the servers'
 * public key, so they cannot be pointed at an impostor either. Every frame
 * is encrypted. A received frame carries the name of the replica it came
 * from (zt_auth_peer), which the coordinator holds against the replica a
 * message claims to be.
 *
 * ZT_SECURITY=off turns all of it off (benchmarks only; said loudly). A
 * process with no credentials (a program run outside `ztrain run`, a test
 * of the library) makes plain sockets, as a library without a job must. */
#ifndef ZT_AUTH_H
#define ZT_AUTH_H
#include <czmq.h>
#include <stdbool.h>
#include <stdint.h>

/* The ZAP domain of a secured job's bulk servers (NULL mechanism: their
 * messages are sealed): the handler only counts their connections per
 * address (zt_guard_admit). */
#define ZT_AUTH_BULK_DOMAIN "ztrain-bulk"

/* The job side (the coordinator). Makes the job's keys in dir (created
 * 0700): dir/job.keys (the server pair and every replica's public key) and
 * dir/NAME.key (replica NAME's own pair), all 0600; then this process uses
 * them, as a server. 0, or a ZT_E* code with the reason logged. */
int zt_auth_make_job(const char *dir, char *const *names, int n);
/* The same files, without using them here: for a program that hands them
 * to processes it starts (the benchmarks). */
int zt_auth_write_job(const char *dir, char *const *names, int n);
/* The credentials file of replica name in dir (heap). */
char *zt_auth_file(const char *dir, const char *name);
/* Loads a replica's credentials file (NAME.key, with job.keys beside it)
 * into this process. 0, or a ZT_E* code with the file, the field and the
 * reason logged. Done by itself from ZT_CREDENTIALS on the first socket. */
int zt_auth_load(const char *path);
/* Whether this process's sockets are authenticated. */
bool zt_auth_on(void);
/* Whether they are plain by choice: not authenticated, and no credentials
 * named that failed to load (a replica of a secured job never goes plain:
 * zt_auth_apply). */
bool zt_auth_plain(void);
/* Makes a fresh socket a CURVE server (or client) with this process's keys;
 * does nothing when zt_auth_on() is false. 0, or a ZT_E* code when the
 * credentials named by ZT_CREDENTIALS cannot be used (logged): a replica
 * of a secured job never falls back to a plain socket. */
int zt_auth_apply(zsock_t *sock, bool server);
/* The job's secret for the data plane's seal (job.keys's sealSecret) and
 * this replica's name ("coordinator" for the coordinator); false when this
 * process is not authenticated or its job has no such secret. */
bool zt_auth_seal_secret(uint8_t secret[32], char *name, size_t name_size);
/* The replica a received frame's connection authenticated as ("workerpool1-0",
 * or "" for a replica-less peer), or NULL on a plain socket. */
const char *zt_auth_peer(zframe_t *frame);
/* Connections this process's servers refused: the client's key is not one
 * of the job's (the ZAP handler), or zt_guard's (an address that is not
 * one of the job's hosts, a handshake that failed before ZAP was asked). */
uint64_t zt_auth_refused(void);
void zt_auth_selftest(void);

#endif
