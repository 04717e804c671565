/* ztrain: error codes. Runtime failures return one of these (negative);
 * zt_strerror() names it. assert() is only for programmer mistakes. */
#ifndef ZT_ERROR_H
#define ZT_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

#define ZT_ERRORS(X)                                                    \
    X(ZT_OK,         0,   "success")                                    \
    X(ZT_EINVAL,    -1,   "invalid argument")                           \
    X(ZT_ENOMEM,    -2,   "out of memory")                              \
    X(ZT_EIO,       -3,   "input/output error")                         \
    X(ZT_EPROTO,    -4,   "malformed or unexpected message")            \
    X(ZT_EVERSION,  -5,   "protocol version mismatch")                  \
    X(ZT_ETIMEDOUT, -6,   "timed out")                                  \
    X(ZT_ESPEC,     -7,   "invalid job spec")                           \
    X(ZT_ENOTFOUND, -8,   "not found")                                  \
    X(ZT_ESYS,      -9,   "system call failed")                         \
    X(ZT_ECANCELLED,-10,  "cancelled")                                  \
    X(ZT_ENODEV,    -11,  "no such device")                             \
    X(ZT_ESHUTDOWN, -12,  "the job is shutting down")                   \
    X(ZT_EDEVICE,   -13,  "the accelerator failed")                    \
    X(ZT_ENOSPC,    -14,  "no space left on the device (or over quota)")

typedef enum {
#define ZT_X_(name, code, text) name = code,
    ZT_ERRORS(ZT_X_)
#undef ZT_X_
} zt_err_t;

/* Text for an error code; never NULL. */
const char *zt_strerror(int err);
/* The code's name ("ZT_ETIMEDOUT"), or NULL for a number that is not one:
 * bindings (the Python package) take the codes from here. */
const char *zt_error_name(int err);

/* The exit status of a replica whose failure is the system's, not the
 * program's: it could not register with the coordinator, or a peer it
 * waits on is gone. The coordinator restarts it in place (or retries the
 * job) as after a crash, where an exit status of 1-127 is a user error that
 * fails the job. It is sysexits.h's EX_TEMPFAIL; any program may use it. */
#define ZT_EXIT_RETRY 75

/* The exit status of a replica that could not write what it must for want
 * of space on its disk (the built-in trainer's final model, after pruning
 * the checkpoints it kept): the system's failure, but not one a restart
 * mends. The coordinator fails the job, naming the disk, never "a user
 * error". sysexits.h's EX_IOERR. */
#define ZT_EXIT_DISK 74

/* The exit status of a replica stopped by a signal that ztrain did not send
 * (SIGTERM from a spot machine's shutdown, an operator, a scheduler): a
 * preemption, not an ending. It saved what it could first (the built-in
 * trainer's chief a checkpoint at the step it reached, a parameter server
 * its shard); the coordinator restarts it without counting a crash, and
 * it resumes. 128 + SIGTERM, as a shell reports a program SIGTERM ended;
 * a program that dies of SIGTERM or SIGINT is taken the same way. */
#define ZT_EXIT_STOPPED 143

/* Marks this process's failure as the system's (thread-safe). */
void zt_fail_retryable(void);
/* The status a failing program exits with: ZT_EXIT_RETRY when its failure
 * was marked the system's, else status as given (0 stays 0). */
int zt_exit_status(int status);

#ifdef __cplusplus
}
#endif
#endif
