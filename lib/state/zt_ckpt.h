/* zt_ckpt: checkpoints. A checkpoint is a directory ROOT/ckpt-<step> holding
 * one file per parameter-server shard (its arrays, float32 little-endian,
 * values first, then optimizer state) and manifest.json (step, the model
 * config, tensors with shapes, and per file its range, arrays, size and
 * CRC32). It is written under a temporary name, fsynced and renamed, so a
 * reader sees a whole checkpoint or none; a corrupt one is detected and
 * skipped for the previous good one. */
#ifndef ZT_CKPT_H
#define ZT_CKPT_H
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include "ztrain/zt_ps.h"

/* Writes shards as ROOT/ckpt-<step>. config: the PS config (JSON object);
 * tensors: [{name, shape, offset, numel}]; extra: more manifest fields (may
 * be NULL). *path_p receives the directory. Keeps the newest `keep` (0: all). */
int zt_ckpt_write(const char *root, int64_t step, json_t *config, json_t *tensors, json_t *extra,
                  const zt_ps_shard_t *shards, int nshards, int keep, char **path_p);
/* Opens and verifies a checkpoint directory; the manifest or NULL (why in err). */
json_t *zt_ckpt_open(const char *dir, char *err, size_t errlen);
/* The newest good checkpoint under root (warning about each bad one), or NULL. */
char *zt_ckpt_latest(const char *root, json_t **manifest_p);
/* Reads array `array` (0 = values) of global elements [lo, hi) into dst. */
int zt_ckpt_read_range(const char *dir, json_t *manifest, int array, int64_t lo, int64_t hi,
                       float *dst);
/* Removes every checkpoint under root (ckpt-* and unfinished .ckpt-*);
 * how many, or -1 when root cannot be read. Nothing else is touched. */
int zt_ckpt_remove_all(const char *root);
/* Removes the oldest checkpoint under root (to make room); its name in
 * name (size bytes). 1 when one was removed, 0 when there is none. */
int zt_ckpt_remove_oldest(const char *root, char *name, size_t size);
/* Whether name is a checkpoint's name as replicas announce it:
 * "checkpoints/ckpt-N" or "model/ckpt-N", N 1 to 20 digits. Names come from
 * the network and become paths: nothing else (no other '/', no "..") is
 * ever used. */
bool zt_ckpt_name_ok(const char *name);
void zt_ckpt_selftest(const char *tmpdir);

#endif
