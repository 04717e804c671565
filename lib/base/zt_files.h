/* zt_files: Files and folders: the trusted-folder rule every folder ztrain
 * writes a job's files into obeys, atomic and private writes, reads,
 * removal. */
#ifndef ZT_FILES_H
#define ZT_FILES_H
#include <stdbool.h>
#include <stddef.h>

/* mkdir -p; 0 or ZT_ESYS. */
int zt_mkdir_p(const char *path);
/* Whether folder path (which must exist) is safe to write a job's files
 * into and to read them back from: it is this user's and no one else can
 * write to it, and every folder above it is this user's or root's, and one
 * that others can write to has the sticky bit (so that no one else can
 * rename or replace what is in it). ZT_OK, or ZT_EINVAL with the folder,
 * its owner and its mode named in why. */
int zt_dir_trusted(const char *path, char *why, size_t why_size);
/* The same rule, for a folder that may not exist yet (`validate`): the
 * folder if it exists, else the folders above it that do. Makes nothing. */
int zt_dir_fit(const char *path, char *why, size_t why_size);
/* Makes (0700) or takes folder path under that rule: the one way ztrain
 * makes a folder it will write a job's files into. */
int zt_mkdir_trusted(const char *path, char *why, size_t why_size);
typedef enum {
    ZT_DIR_TAKE,  /* the folder must exist */
    ZT_DIR_MAKE,  /* folders that do not exist are made, 0700 */
    ZT_DIR_CHECK, /* nothing is made: ZT_DIR_CHECKED where a folder is missing */
} zt_dir_mode_t;
#define ZT_DIR_CHECKED (-2)
/* The rule without a race: each folder from the root down opened below
 * the one above it (O_NOFOLLOW) and checked before anything below it is
 * opened or made; a link on the way is followed only when this user or
 * root made it (the walk goes on from its target). An O_PATH descriptor
 * of the folder (for openat, mkdirat, renameat), or -1 with why. */
int zt_dir_open_trusted(const char *path, zt_dir_mode_t mode, char *why, size_t why_size);
/* rm -rf path (not following symbolic links); 0, or ZT_ESYS when something
 * stayed. */
int zt_rm_tree(const char *path);
/* Removes what processes that are gone left in dir: the entries named
 * PREFIX<pid> whose pid is no process any more (rm -rf). */
void zt_remove_dead_pid_entries(const char *dir, const char *prefix);
/* A failed write's code from errno: ZT_ENOSPC for a full device or a
 * quota (ENOSPC, EDQUOT), else ZT_EIO. */
int zt_write_error(void);
/* Writes data to path atomically: temporary file, fsync, rename, fsync dir. */
int zt_write_file_atomic(const char *path, const void *data, size_t len);
/* The same, created 0600 (or narrower), without the fsyncs: for files made
 * again on every start, such as a job's keys. */
int zt_write_file_private(const char *path, const void *data, size_t len);
/* Reads a whole file (NUL-terminated); NULL with errno set on failure. */
char *zt_read_file(const char *path, size_t *len_p);
/* Last up-to max_bytes of a file, starting at a line boundary; heap string. */
char *zt_file_tail(const char *path, size_t max_bytes);
/* What this process creates is its user's alone (umask 077: folders 0700,
 * files 0600): job folders, logs, job.json, checkpoints, the model.
 * `ztrain` and every role set it first; replicas inherit it. */
void zt_private_files(void);

#endif
