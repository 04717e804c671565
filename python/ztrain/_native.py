"""libztrain through ctypes: the library bundled in the package (or the one
ZTRAIN_LIBRARY names), its prototypes, and its errors as exceptions. ctypes
releases the GIL during every call, so Python threads go on while the
library waits on the network."""
import ctypes
import os


class ZtrainError(RuntimeError):
    """A libztrain failure: .code is its ZT_E* code (negative), the message
    is the library's own."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class ZtrainTimeout(ZtrainError, TimeoutError):
    """A peer did not answer in time (ZT_ETIMEDOUT)."""


class ZtrainStopped(ZtrainError):
    """The job is stopping (ZT_ESHUTDOWN): the coordinator asked (the job
    ends), or a signal came (a preemption). A program may catch it to save;
    left uncaught it ends the program without a traceback (ztrain's
    excepthook), with status 0 or, for a preemption, 143."""


def _load():
    here = os.path.dirname(__file__)
    carried = os.path.join(here, "_dist", "lib", "libztrain.so")  # a wheel of `make wheel`
    path = os.environ.get("ZTRAIN_LIBRARY") or (carried if os.path.exists(carried) else
                                                os.path.join(here, "_lib", "libztrain.so"))
    try:
        return ctypes.CDLL(path)
    except OSError as e:
        raise ImportError("ztrain: cannot load libztrain (%s): %s" % (path, e)) from None


lib = _load()
c_char_pp = ctypes.POINTER(ctypes.c_char_p)


class JobStruct(ctypes.Structure):
    """zt_job_t (include/ztrain/zt_job.h)."""
    _fields_ = [("name", ctypes.c_char * 64), ("pool", ctypes.c_int), ("index", ctypes.c_int),
                ("rank", ctypes.c_int), ("size", ctypes.c_int),
                ("local_rank", ctypes.c_int), ("local_size", ctypes.c_int),
                ("reducers", c_char_pp), ("nreducers", ctypes.c_int),
                ("paramservers", c_char_pp), ("nparamservers", ctypes.c_int),
                ("peers", c_char_pp), ("npeers", ctypes.c_int), ("group", ctypes.c_int64)]


def _proto(name, res, *args):
    f = getattr(lib, name)
    f.restype = res
    f.argtypes = list(args)
    return f


V, I, I64, B, P, S = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_bool, ctypes.c_void_p, ctypes.c_char_p
zt_strerror = _proto("zt_strerror", S, I)
zt_version = _proto("zt_version", S)
zt_log_init = _proto("zt_log_init", None, S, I)
zt_log_set_replica = _proto("zt_log_set_replica", None, S)
zt_knobs_check = _proto("zt_knobs_check", I, ctypes.c_char_p, ctypes.c_size_t)
zt_job_read = _proto("zt_job_read", I, ctypes.POINTER(JobStruct), ctypes.c_char_p, ctypes.c_size_t)
zt_job_free = _proto("zt_job_free", None, ctypes.POINTER(JobStruct))
zt_job_collective = _proto("zt_job_collective", V, ctypes.POINTER(JobStruct), I, ctypes.c_char_p, ctypes.c_size_t)
zt_coll_destroy = _proto("zt_coll_destroy", None, ctypes.POINTER(V))
zt_coll_allreduce = _proto("zt_coll_allreduce", I, V, P, I64, B, I)
zt_coll_broadcast = _proto("zt_coll_broadcast", I, V, P, I64, I, I)
zt_coll_add = _proto("zt_coll_add", I, V, P, I64, B, I)
zt_coll_finish = _proto("zt_coll_finish", I, V, I)
zt_coll_error = _proto("zt_coll_error", S, V)
zt_coll_slot_bytes = _proto("zt_coll_slot_bytes", I64, V)
zt_coll_slots = _proto("zt_coll_slots", I, V)
zt_coll_rounds = _proto("zt_coll_rounds", I64, V)

F, D = ctypes.c_float, ctypes.c_double


class PsOptions(ctypes.Structure):
    """zt_ps_options_t (include/ztrain/zt_ps.h)."""
    _fields_ = [("optimizer", ctypes.c_char_p), ("learning_rate", F), ("momentum", F),
                ("beta1", F), ("beta2", F), ("epsilon", F), ("seed", ctypes.c_uint64),
                ("sync", I), ("workers", I), ("max_staleness", I)]


zt_ps_options_defaults = _proto("zt_ps_options_defaults", None, ctypes.POINTER(PsOptions))
zt_ps_client_new = _proto("zt_ps_client_new", V, c_char_pp, I, I)
zt_ps_client_destroy = _proto("zt_ps_client_destroy", None, ctypes.POINTER(V))
zt_ps_declare = _proto("zt_ps_declare", I, V, S, I64, F)
zt_ps_connect = _proto("zt_ps_connect", I, V, ctypes.POINTER(PsOptions), I)
zt_ps_set_step = _proto("zt_ps_set_step", None, V, I64)
zt_ps_pull = _proto("zt_ps_pull", I, V, I, P)
zt_ps_push = _proto("zt_ps_push", I, V, I, P, I64)
zt_ps_wait = _proto("zt_ps_wait", I, V, I)
zt_ps_error = _proto("zt_ps_error", S, V)
zt_ps_checkpoint = _proto("zt_ps_checkpoint", I, V, S, I64, S, I, ctypes.c_char_p, ctypes.c_size_t, I)
zt_ps_checkpoint_latest = _proto("zt_ps_checkpoint_latest", I64, S, ctypes.c_char_p, ctypes.c_size_t)
zt_replica_new = _proto("zt_replica_new", V, S, I)
zt_replica_destroy = _proto("zt_replica_destroy", None, ctypes.POINTER(V))
zt_replica_announce_checkpoint = _proto("zt_replica_announce_checkpoint", I, V, I64, S)
zt_replica_report_metric = _proto("zt_replica_report_metric", I, V, S, D, I64)
zt_replica_stop_status = _proto("zt_replica_stop_status", I, V)
zt_replica_hold_stop = _proto("zt_replica_hold_stop", None, B)
zt_replica_membership = _proto("zt_replica_membership", I, V, I64, I, ctypes.POINTER(I64), ctypes.POINTER(I),
                               ctypes.POINTER(I))
zt_replica_notify_regrouped = _proto("zt_replica_notify_regrouped", I, V, I64, I, I64)
zt_replica_follow = _proto("zt_replica_follow", None, V, V, I64)
# CZMQ's end of ZeroMQ (its atexit handler): sockets closed, what they still
# queue sent within their linger (a checkpoint's announcement among it).
zsys_shutdown = _proto("zsys_shutdown", None)
zt_replica_report_checkpoint_error = _proto("zt_replica_report_checkpoint_error", I, V, I64, I)
zt_job_checkpoint_dir = _proto("zt_job_checkpoint_dir", S, B)
zt_knob_find = _proto("zt_knob_find", I, S)
zt_knob_int = _proto("zt_knob_int", I64, I)
zt_error_name = _proto("zt_error_name", S, I)
zt_ps_optimizer = _proto("zt_ps_optimizer", S, I)
zt_job_env_name = _proto("zt_job_env_name", S, S)

# The library's own tables, not copies: its error codes by name, the
# parameter servers' optimizers, the names of the replica's variables.
ERRORS = {zt_error_name(c).decode(): c for c in range(0, -256, -1) if zt_error_name(c)}
ZT_ENOTFOUND = ERRORS["ZT_ENOTFOUND"]
ZT_ETIMEDOUT = ERRORS["ZT_ETIMEDOUT"]
ZT_ESHUTDOWN = ERRORS["ZT_ESHUTDOWN"]
ZT_ECANCELLED = ERRORS["ZT_ECANCELLED"]
OPTIMIZERS = tuple(zt_ps_optimizer(i).decode() for i in range(64) if zt_ps_optimizer(i))


def env_name(key):
    """The name of the replica's variable `key` ("HP_METRIC_FILE": the
    hypertune metric file's), as libztrain sets and reads it."""
    name = zt_job_env_name(key.encode())
    if not name:
        raise KeyError(key)
    return name.decode()


def env(key, default=None):
    """The value of the replica's variable `key` (see env_name)."""
    return os.environ.get(env_name(key), default)


def knob_int(env):
    """A knob's value (its default when unset), read by libztrain."""
    k = zt_knob_find(env.encode())
    if k < 0:
        raise KeyError(env)
    return zt_knob_int(k)


def error(code, message):
    """The exception for a ZT_E* code and the library's message."""
    text = message or zt_strerror(code).decode()
    cls = ZtrainTimeout if code == ZT_ETIMEDOUT else ZtrainStopped if code == ZT_ESHUTDOWN else ZtrainError
    return cls(code, text)


def strlist(ptr, n):
    return [ptr[i].decode() for i in range(n)]
