"""The job's parameter servers through libztrain's client (zt_ps.h), for
any framework: named float32 tensors held on the servers, pushed gradients
and pulled values passed by address, checkpoints in ztrain's format
announced to the job's evaluators. ztrain.torch.ParameterServerOptimizer is
built on it."""
import ctypes

from . import _native
from ._native import ZtrainError

OPTIMIZERS = _native.OPTIMIZERS  # the parameter servers' table, from libztrain


def checkpoint_dir(final=False):
    """Where checkpoints go: AIP_CHECKPOINT_DIR (AIP_MODEL_DIR for the final
    model), "checkpoints" ("model") in the working directory when unset."""
    return _native.zt_job_checkpoint_dir(bool(final)).decode()


def latest_checkpoint(root=None):
    """(step, folder) of the newest good checkpoint under root, (0, None)
    when there is none."""
    path = ctypes.create_string_buffer(4096)
    step = _native.zt_ps_checkpoint_latest((root or checkpoint_dir()).encode(), path, len(path))
    return (step, path.value.decode()) if step else (0, None)


class Client:
    """A connection to every parameter server of the job.

    tensors: [(name, elements, init_scale)]: each is held on the servers,
    split across them, and starts uniform in [-init_scale, init_scale]
    (0: zeros) from the seed, the same on every worker. The servers'
    optimizer (sgd, momentum, adam, adagrad) applies the pushed gradients;
    sync averages the pushes of every worker for a step; max_staleness K
    holds a worker K steps ahead of the slowest."""

    def __init__(self, servers, rank, workers, tensors, optimizer="adam", lr=1e-3, momentum=0.9,
                 betas=(0.9, 0.999), eps=1e-7, seed=1, sync=False, max_staleness=None, timeout_ms=None):
        if optimizer not in OPTIMIZERS:
            raise ValueError("ztrain: optimizer %r: the parameter servers have %s" % (optimizer, ", ".join(OPTIMIZERS)))
        if not servers:
            raise ZtrainError(-8, "ztrain: this job has no parameter servers: give it a pool 2 of "
                                  "ztrain-paramserver replicas (workerpool2)")
        self.timeout_ms = int(timeout_ms if timeout_ms is not None else _native.knob_int("ZT_PS_TIMEOUT_MS"))
        arr = (ctypes.c_char_p * len(servers))(*[s.encode() for s in servers])
        self._c = _native.zt_ps_client_new(arr, len(servers), rank)
        if not self._c:
            raise ZtrainError(-3, "ztrain: cannot reach the parameter servers %s" % ", ".join(servers))
        self.names = []
        for name, numel, scale in tensors:
            if _native.zt_ps_declare(self._c, name.encode(), int(numel), float(scale)) < 0:
                self.close()
                raise ValueError("ztrain: tensor %r (%d elements) cannot be declared" % (name, numel))
            self.names.append(name)
        o = _native.PsOptions()
        _native.zt_ps_options_defaults(ctypes.byref(o))
        o.optimizer = optimizer.encode()
        o.learning_rate, o.momentum, (o.beta1, o.beta2), o.epsilon = lr, momentum, betas, eps
        o.seed, o.sync, o.workers = seed, int(bool(sync)), workers
        o.max_staleness = -1 if max_staleness is None else int(max_staleness)
        self._check(_native.zt_ps_connect(self._c, ctypes.byref(o), self.timeout_ms), "connect")

    def _check(self, rc, what):
        if rc:
            msg = _native.zt_ps_error(self._c) if self._c else None
            raise _native.error(rc, "ztrain: parameter servers, %s: %s" % (
                what, msg.decode() if msg else _native.zt_strerror(rc).decode()))

    def set_step(self, step):
        """The step about to run: pulls wait until the servers allow it."""
        _native.zt_ps_set_step(self._c, int(step))

    def pull(self, tensor, address):
        """Queues a pull of tensor i into the float32 memory at address."""
        self._check(_native.zt_ps_pull(self._c, tensor, address), "pull of %s" % self.names[tensor])

    def push(self, tensor, address, step):
        """Queues a push of the gradients at address (left untouched until wait())."""
        self._check(_native.zt_ps_push(self._c, tensor, address, int(step)), "push of %s" % self.names[tensor])

    def wait(self):
        """Completes every queued call; a server that restarted is re-sent
        what it lost. ZtrainTimeout names a server silent for the timeout."""
        self._check(_native.zt_ps_wait(self._c, self.timeout_ms), "wait")

    def checkpoint(self, step, model=None, final=False, keep=0, timeout_ms=None):
        """Writes the servers' model (values and optimizer state) as
        ROOT/ckpt-<step> and returns the folder. model: a JSON text
        recorded in the manifest (what the evaluator scores). timeout_ms:
        the wait for the servers (the client's by default)."""
        root = checkpoint_dir(final)
        path = ctypes.create_string_buffer(4096)
        wait = self.timeout_ms if timeout_ms is None else int(timeout_ms)
        self._check(_native.zt_ps_checkpoint(self._c, root.encode(), int(step), model.encode() if model else None,
                                             keep, path, len(path), wait), "checkpoint")
        return path.value.decode()

    def close(self):
        if self._c:
            p = ctypes.c_void_p(self._c)
            _native.zt_ps_client_destroy(ctypes.byref(p))
            self._c = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may be gone already
            pass
