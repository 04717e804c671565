"""The state and implementation behind the ztrain package (its front,
__init__.py, re-exports the public calls): this replica's Job, the link
to the coordinator, the collective, the stop. ztrain.torch uses the
internal calls here (check, lock, collective, replica, membership,
regroup, regrouped), never the package's private names."""
import atexit
import collections
import ctypes
import errno
import json
import os
import sys
import threading
import time

from . import _native
from ._native import ZtrainError, ZtrainStopped, ZtrainTimeout


Job = collections.namedtuple("Job", "name pool index rank size local_rank local_size reducers paramservers peers "
                                    "group")
Job.__doc__ = """This replica's place in its job: rank among the trainers (pool 0's
replicas, then pool 1's), its host-local rank, and pool 2's reducers or
parameter servers (host:port), and every trainer's host:port by rank (as
the job started); in an elastic pool, the membership generation it trains
in (rank and size are then this generation's), else -1."""

lock = threading.RLock()
_job = None
_coll = None            # the collective (zt_coll_t *), made at the first collective call
_rep = None             # the link to the coordinator (zt_replica_t *), 0 when it could not be made


def version():
    return _native.zt_version().decode()


def init():
    """Reads this replica's environment (set by `ztrain run`) and returns its
    Job. Raises ZtrainError outside a job. Calling it again returns the same."""
    global _job
    with lock:
        if _job:
            return _job
        why = ctypes.create_string_buffer(1024)
        if _native.zt_knobs_check(why, len(why)):
            raise ZtrainError(-1, "ztrain.init(): " + why.value.decode())
        js = _native.JobStruct()
        rc = _native.zt_job_read(ctypes.byref(js), why, len(why))
        if rc:
            raise ZtrainError(rc, "ztrain.init(): " + why.value.decode())
        try:
            _job = Job(js.name.decode(), js.pool, js.index, js.rank, js.size, js.local_rank, js.local_size,
                       _native.strlist(js.reducers, js.nreducers),
                       _native.strlist(js.paramservers, js.nparamservers),
                       _native.strlist(js.peers, js.npeers), js.group)
        finally:
            _native.zt_job_free(ctypes.byref(js))
        _native.zt_log_init(b"python", _job.index)
        _native.zt_log_set_replica(_job.name.encode())
        return _job


def is_initialized():
    return _job is not None


def job():
    """The Job of init(); ZtrainError before it."""
    if not _job:
        raise ZtrainError(-1, "ztrain: call ztrain.init() first")
    return _job


def rank():
    return job().rank


def size():
    return job().size


def local_rank():
    return job().local_rank


def local_size():
    return job().local_size


def collective():
    """The job's all-reduce group, made (and agreed with every trainer) on
    first use: through the reducers, else a ring between the trainers.
    init() is implied."""
    global _coll
    with lock:
        if _coll:
            return _coll
        j = init()
        js = _native.JobStruct()
        why = ctypes.create_string_buffer(1024)
        rc = _native.zt_job_read(ctypes.byref(js), why, len(why))
        if rc:
            raise ZtrainError(rc, why.value.decode())
        js.rank, js.size, js.group = j.rank, j.size, j.group  # an elastic group's, after a change
        try:
            c = _native.zt_job_collective(ctypes.byref(js), -1, why, len(why))
        finally:
            _native.zt_job_free(ctypes.byref(js))
        if not c:
            raise ZtrainError(-3, "ztrain: cannot form the all-reduce group of %d trainers (%s): %s" % (
                j.size, "%d reducers" % len(j.reducers) if j.reducers else "ring", why.value.decode()))
        _coll = c
        if j.group >= 0 and replica():  # an elastic group gives a round up when it loses a member
            _native.zt_replica_follow(_rep, c, j.group)
        return _coll


def replica():
    """This replica's link to the coordinator, registered on first use by
    what needs it (checkpoint notices); None outside `ztrain run` or when
    registration failed (logged). Heartbeats go from libztrain's own thread."""
    global _rep
    with lock:
        if _rep is None:
            _rep = 0
            if _native.env("COORDINATOR"):
                _rep = _native.zt_replica_new(b"chief" if job().rank == 0 else b"worker", 0) or 0
        return _rep or None


def membership(timeout_ms=0):
    """An elastic pool's trainer: (generation, rank, size) of the newest
    membership the coordinator decided, when it is newer than this
    trainer's; None when there is none (within timeout_ms)."""
    rep = replica()
    g, r, w = ctypes.c_int64(), ctypes.c_int(), ctypes.c_int()
    rc = _native.zt_replica_membership(rep, job().group, int(timeout_ms), ctypes.byref(g), ctypes.byref(r),
                                       ctypes.byref(w)) if rep else _native.ZT_ETIMEDOUT
    if rc == _native.ZT_ESHUTDOWN:
        raise _native.error(rc, "the job is stopping")
    return (g.value, r.value, w.value) if rc == 0 else None


def regroup(step, timeout_ms):
    """Switches this trainer to the newest membership (waiting up to
    timeout_ms for the coordinator's word): the earlier all-reduce group is
    left, the coordinator told, and the new group formed (its forming waits
    for every member, the joiners too). Returns the new rank, -1 when this
    trainer leaves."""
    global _job, _coll
    m = membership(timeout_ms)
    if m is None:
        raise ZtrainTimeout(_native.ZT_ETIMEDOUT, "the group changes its membership, but the coordinator's word "
                            "on it did not come within %d ms" % timeout_ms)
    g, r, w = m
    with lock:
        if _coll:
            p = ctypes.c_void_p(_coll)
            _native.zt_coll_destroy(ctypes.byref(p))
            _coll = None
        _native.zt_replica_notify_regrouped(_rep, g, r, int(step))
        _job = _job._replace(group=g, rank=max(r, 0), size=w)
    if r >= 0:
        collective()
    return r


def regrouped(step):
    """A trainer that joined an elastic group tells the coordinator it trains."""
    rep = replica()
    if rep and job().group >= 0:
        _native.zt_replica_notify_regrouped(rep, job().group, job().rank, int(step))


def announce_checkpoint(step, path):
    """Tells the job's evaluators (through the coordinator) that checkpoint
    folder path, in ztrain's format under AIP_CHECKPOINT_DIR or
    AIP_MODEL_DIR, holds step, and serves its files to them. False outside
    a job or when it cannot be announced (the reason is logged)."""
    rep = replica()
    return bool(rep) and _native.zt_replica_announce_checkpoint(rep, int(step), path.encode()) == 0


def report_checkpoint_error(step, error):
    """Tells the job that the checkpoint of step could not be written
    (error: a ZtrainError, or an OSError such as ENOSPC): job.json's events
    and `ztrain status` say so at once. False outside a job."""
    code = getattr(error, "code", None)
    if not isinstance(code, int) or code >= 0:
        full = isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT)
        code = _native.ERRORS["ZT_ENOSPC" if full else "ZT_EIO"]
    rep = replica()
    return bool(rep) and _native.zt_replica_report_checkpoint_error(rep, int(step), code) == 0


def check(rc, what):
    if rc:
        msg = _native.zt_coll_error(_coll)
        raise _native.error(rc, "%s: %s" % (what, msg.decode() if msg else _native.zt_strerror(rc).decode()))


def _raw(x, what, float32_only):
    """(address, elements, element size) of x's memory, which libztrain
    reads and writes in place. Raises for what cannot be passed so."""
    if type(x).__module__.split(".")[0] == "torch":
        if x.is_cuda:
            raise TypeError("%s: a CUDA tensor here (ztrain.allreduce and broadcast stage it)" % what)
        if not x.is_contiguous():
            raise ValueError("%s: the tensor is not contiguous (call .contiguous() first)" % what)
        if float32_only and str(x.dtype) != "torch.float32":
            raise TypeError("%s: float32 only, not %s" % (what, x.dtype))
        return x.data_ptr(), x.numel(), x.element_size()
    try:
        m = memoryview(x)
    except TypeError:
        raise TypeError("%s: needs a torch tensor, a NumPy array or a writable buffer, not %s" % (
            what, type(x).__name__)) from None
    if m.readonly:
        raise ValueError("%s: the buffer is read-only" % what)
    if not m.c_contiguous:
        raise ValueError("%s: the array is not contiguous" % what)
    if float32_only and (m.format not in ("f", "<f", "=f") or m.itemsize != 4):
        raise TypeError("%s: float32 only, not format %r" % (what, m.format))
    if m.nbytes == 0:
        return None, 0, m.itemsize
    addr = ctypes.addressof((ctypes.c_char * m.nbytes).from_buffer(m.cast("B")))
    return addr, m.nbytes // m.itemsize, m.itemsize


def _staged(x, fn):
    """Runs fn on a host copy of a CUDA tensor and copies the result back."""
    if type(x).__module__.split(".")[0] == "torch" and x.is_cuda:
        host = x.detach().to("cpu").contiguous()
        fn(host)
        x.copy_(host)
        return x
    return fn(x)


def allreduce(x, average=False):
    """Sums x (float32) over every trainer, in place, and returns it;
    average=True divides by the trainers. Every trainer calls it with the
    same number of elements, else all raise ZtrainError saying what each
    called."""
    def run(t):
        addr, n, _ = _raw(t, "ztrain.allreduce", True)
        c = collective()
        with lock:
            check(_native.zt_coll_allreduce(c, addr, n, bool(average), -1), "ztrain.allreduce")
        return t
    return _staged(x, run)


def broadcast(x, root=0):
    """Copies root's x to every trainer, in place, bit for bit; any type."""
    def run(t):
        addr, n, es = _raw(t, "ztrain.broadcast", False)
        c = collective()
        if not 0 <= root < size():
            raise ValueError("ztrain.broadcast: root %d is not a rank (0..%d)" % (root, size() - 1))
        with lock:
            check(_native.zt_coll_broadcast(c, addr, n * es, int(root), -1), "ztrain.broadcast")
        return t
    return _staged(x, run)


def report_metric(tag, value, step=None, checkpoint_path=""):
    """Reports a metric for a hyperparameter study in cloudml-hypertune's
    format (one JSON object per line: the tag's value, global_step, trial,
    timestamp) to CLOUD_ML_HP_METRIC_FILE, so a study reads it as it reads
    hypertune's. Outside a trial (the variable unset) it writes nothing and
    returns False."""
    value = float(value)
    if _rep:  # registered (a checkpointing chief): job.json shows it too
        _native.zt_replica_report_metric(_rep, tag.encode(), value, int(step or 0))
    path = _native.env("HP_METRIC_FILE")  # cloudml-hypertune's file, which `ztrain tune` reads
    if not path:
        return False
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    line = {"timestamp": time.time(), "trial": _native.env("TRIAL_ID", ""), tag: str(value),
            "global_step": str(int(step) if step is not None else 0), "checkpoint_path": checkpoint_path}
    with lock, open(path, "a") as f:
        f.write(json.dumps(line) + "\n")
    return True


def _coll_stats():
    """(slot bytes, slots per round, rounds done) of the collective: tests
    and benchmarks."""
    c = collective()
    return _native.zt_coll_slot_bytes(c), _native.zt_coll_slots(c), _native.zt_coll_rounds(c)


def shutdown():
    """Leaves the all-reduce group and the coordinator (at exit by itself)."""
    global _coll, _rep
    with lock:
        if _coll:
            p = ctypes.c_void_p(_coll)
            _native.zt_coll_destroy(ctypes.byref(p))
            _coll = None
        if _rep:
            p = ctypes.c_void_p(_rep)
            _native.zt_replica_destroy(ctypes.byref(p))
            _rep = 0


atexit.register(shutdown)


def stop_status():
    """The status to exit with once the job is stopping: 0 when the
    coordinator asked (the job ends), 143 when a signal came that it did not
    announce (a preemption: the job restarts this replica, which resumes);
    None when no stop came."""
    st = _native.zt_replica_stop_status(_rep or None)
    return None if st < 0 else st


def stopping():
    """True once a stop came: the job ends or is cancelled, or SIGTERM or
    SIGINT arrived (a spot machine's shutdown, an operator, a scheduler).
    ztrain's calls then raise ZtrainStopped; a loop may ask this at each
    step instead, save, and exit with stop_status()."""
    return stop_status() is not None


def preempted():
    """True when the stop that came is a preemption: a signal the job did
    not send. The program should save and exit with stop_status() (143):
    it is restarted, uncounted, and resumes from what it saved."""
    return stop_status() not in (None, 0)


_on_stop = []
_stopped = False


def on_stop(fn):
    """Registers fn() to save this program's state when a stop ends it.
    Each runs once, in the order registered, before a program stopped by an
    uncaught ZtrainStopped exits (or from run_on_stop()). While they run,
    ztrain's calls do not give way to the stop: each waits within its own
    bound, so fn may still ask the parameter servers for a checkpoint;
    keep it within the grace before SIGKILL (ZT_STOP_GRACE_MS). Returns fn,
    so it serves as a decorator."""
    if not callable(fn):
        raise TypeError("ztrain.on_stop: %r is not callable" % (fn,))
    _on_stop.append(fn)
    return fn


def run_on_stop():
    """Runs the on_stop callbacks, once: for a program that catches
    ZtrainStopped (or asks stopping()) and ends by itself."""
    global _stopped
    with lock:
        if _stopped:
            return
        _stopped = True
        todo = list(_on_stop)
    _native.zt_replica_hold_stop(True)
    try:
        for fn in todo:
            try:
                fn()
            except Exception as e:  # one failed save does not keep the others from running
                sys.stderr.write("ztrain: on_stop %s failed: %s: %s\n" % (
                    getattr(fn, "__qualname__", fn), type(e).__name__, e))
    finally:
        _native.zt_replica_hold_stop(False)


def _is_stop(value):
    """Whether an exception is ztrain's stop: a ZtrainStopped, one that a
    ZtrainStopped caused, or, once a stop came, the RuntimeError that
    PyTorch makes of one raised in a DDP comm hook ("ZtrainStopped: ...")."""
    seen = set()
    while value is not None and id(value) not in seen:
        if isinstance(value, ZtrainStopped):
            return True
        if isinstance(value, RuntimeError) and str(value).startswith(ZtrainStopped.__name__ + ":") and stopping():
            return True
        seen.add(id(value))
        value = value.__cause__ or value.__context__
    return False


def _excepthook(kind, value, tb, _previous=sys.excepthook):
    """An uncaught stop (_is_stop) ends the program quietly, with
    stop_status(), once the on_stop callbacks have saved."""
    if not _is_stop(value):
        return _previous(kind, value, tb)
    status = stop_status()
    try:
        run_on_stop()
        sys.stderr.write("ztrain: %s; exiting with status %d\n" % (str(value).split("\n")[0],
                                                                 0 if status is None else status))
        shutdown()
        # os._exit skips the atexit handlers, CZMQ's among them: without it
        # the control socket's last messages (the on_stop checkpoint's
        # announcement) could die queued with the process
        _native.zsys_shutdown()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0 if status is None else status)


sys.excepthook = _excepthook
