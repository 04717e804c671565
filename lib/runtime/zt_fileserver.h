/* zt_fileserver: serves files under named roots over ZeroMQ, in chunks
 * (FILE_GET -> FILE_DATA + bytes), so an evaluator can pull checkpoints
 * without a shared filesystem. Paths are "ROOTNAME/relative/path"; absolute
 * paths and ".." are refused, and a file is opened beneath its root without
 * following any symbolic link, and only when it is a plain file (a link
 * planted in a served folder serves nothing). Runs on its own thread. The endpoint may
 * ask for an ephemeral port ("tcp://127.0.0.1:*"). In a job that seals its
 * bulk data, another host's requests and answers go on sealed streams
 * (zt_stream), this host's over the ipc twin; else through CURVE. */
#ifndef ZT_FILESERVER_H
#define ZT_FILESERVER_H
#include "wire/zt_msg.h"
#include "wire/zt_bulk.h"
#include <czmq.h>
#include <stddef.h>
#include <stdint.h>

typedef struct zt_fileserver_t zt_fileserver_t;

/* roots: pairs {name, directory}, n of them. endpoint NULL: no socket and
 * no thread, only zt_fileserver_answer (the fuzzer). */
zt_fileserver_t *zt_fileserver_new(const char *endpoint, const char *const (*roots)[2], int n);
void zt_fileserver_destroy(zt_fileserver_t **self_p);
/* The endpoint it is bound to (a "*" port resolved), or NULL if binding failed. */
const char *zt_fileserver_endpoint(zt_fileserver_t *self);

/* The answer to one received message body: a FILE_DATA header in *reply and
 * that many bytes of the file in buf (at most 1 MiB), or -1 when the body is
 * not a FILE_GET (no answer). */
int64_t zt_fileserver_answer(zt_fileserver_t *self, const void *body, size_t len, zt_msg_t *reply, void *buf);
#define ZT_FILESERVER_CHUNK (1 << 20)

/* Fetches a whole file from a server into local path (written atomically),
 * on way (zt_bulk_connect of the control plane, not direct; a sealed way is
 * waited for here until open). 0 or a ZT_E* code; err says why. */
int zt_file_fetch(zt_bulk_t *way, const char *remote, const char *local, int timeout_ms, char *err,
                  size_t errlen);

#endif
