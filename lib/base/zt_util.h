/* Small helpers shared by libztrain and the roles. */
#ifndef ZT_UTIL_H
#define ZT_UTIL_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The process is stopping: the coordinator sent SHUTDOWN (zt_stop_request),
 * or SIGTERM / SIGINT arrived. Every blocking wait of libztrain (parameter
 * servers, all-reduce) checks it at least every 100 ms and returns
 * ZT_ESHUTDOWN, so that a role exits promptly and cleanly. */
void zt_stop_request(void);
bool zt_stop_requested(void);
/* Whether a stop came, held or not (zt_stop_requested is false while held). */
bool zt_stop_came(void);
/* Holds the stop on the calling thread while it saves on its way out (a
 * checkpoint asked of the parameter servers): its waits do not give way to
 * the stop, so the caller bounds them (within ZT_STOP_GRACE_MS). Calls
 * nest: zt_stop_hold(true), then zt_stop_hold(false). */
void zt_stop_hold(bool hold);

/* Monotonic milliseconds and microseconds. */
int64_t zt_now_ms(void);
int64_t zt_now_us(void);
/* Wall-clock time as ISO 8601 UTC with milliseconds, into buf (>= 32). */
void zt_wall_iso(char *buf, size_t size);
/* The reverse: seconds since the epoch of such a time (2026-11-23T21:32:49.342Z); NaN when it is not one. */
double zt_iso_epoch(const char *iso);
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
struct sockaddr;
/* A socket address's host as text (IPv4, IPv6; an IPv4-mapped IPv6 address
 * as IPv4) into out; false (out "") for another family. */
bool zt_sockaddr_name(const struct sockaddr *a, char *out, size_t len);
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
/* Parses a protobuf Duration ("7200s", "1.5s") or "90m", "2h"; seconds or -1. */
double zt_parse_duration(const char *text);
/* Parses a whole decimal integer; false if text is not exactly one. */
bool zt_parse_int(const char *text, long long *out);
/* printf into a fresh heap string. */
char *zt_strdupf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Frees a NULL-terminated array of strings and the strings (NULL: nothing). */
void zt_strv_free(char **v);
/* A free TCP port on 127.0.0.1 from the kernel (bound, then released). */
int zt_ephemeral_port(void);
/* Stops a child process: SIGTERM, then SIGKILL if it has not exited within
 * grace_ms; reaps it. Its wait status, or -1. */
int zt_stop_child(pid_t pid, int grace_ms);
/* The same, but the bound socket is kept in *fd_p (close-on-exec) so that no
 * other bind(0) on this machine gets the port until it is closed. */
int zt_reserve_port(int *fd_p);
/* When process pid started (clock ticks after boot, /proc/PID/stat), or 0
 * when there is no such process. With the pid it names one process even
 * after the pid is reused. */
uint64_t zt_proc_start_time(pid_t pid);
/* True when the process recorded as (pid, start time) still runs here. */
bool zt_proc_alive(pid_t pid, uint64_t start_time);
/* Directory of the running executable (for finding sibling binaries). */
const char *zt_exe_dir(void);
/* Last up-to max_bytes of a file, starting at a line boundary; heap string. */
char *zt_file_tail(const char *path, size_t max_bytes);
/* What this process creates is its user's alone (umask 077: folders 0700,
 * files 0600): job folders, logs, job.json, checkpoints, the model.
 * `ztrain` and every role set it first; replicas inherit it. */
void zt_private_files(void);

#endif
