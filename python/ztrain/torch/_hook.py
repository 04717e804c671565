"""The DDP communication hook: each bucket of gradients streamed into
ztrain's collective as DDP hands it over, CUDA buckets staged through pinned
host memory while the backward pass goes on."""
import collections

import torch

import ztrain as _zt
from ztrain import _native


class Compression:
    """Horovod's gradient compression: only none is supported."""
    none = None

    @staticmethod
    def _check(c):
        if c is not None:
            raise ValueError("ztrain.torch: gradient compression %r is not supported (use Compression.none)" % (c,))


# ------------------------------------------------------------------ streams

class _Stream:
    """One step's regions, handed to the collective in a fixed order; CUDA
    ones are copied to pinned host memory first (asynchronously) and handed
    over once their copy has finished, the order kept."""

    def __init__(self, average):
        self.average = average
        self.staged = collections.deque()   # (host tensor, event) copied down, not yet handed over
        self.back = []                      # (device tensor, host tensor) to copy up after the step
        self.pinned = {}
        self.regions = 0

    def _coll(self):
        return _zt._collective()

    def _hand(self, t):
        if t.dtype != torch.float32:
            raise TypeError("ztrain.torch: gradients must be float32, not %s" % t.dtype)
        if not t.is_contiguous():
            raise ValueError("ztrain.torch: a gradient that is not contiguous")
        c = self._coll()
        with _zt._lock:
            _zt._check(_native.zt_coll_add(c, t.data_ptr(), t.numel(), self.average, -1), "all-reduce")
        self.regions += 1

    def _drain(self, block):
        while self.staged and (block or self.staged[0][1].query()):
            host, ev = self.staged.popleft()
            ev.synchronize()
            self._hand(host)

    def add(self, t, key):
        if t.is_cuda:
            host = self.pinned.get(key)
            if host is None or host.numel() != t.numel() or host.dtype != t.dtype:
                host = torch.empty(t.numel(), dtype=t.dtype, pin_memory=True)
                self.pinned[key] = host
            host.copy_(t.reshape(-1), non_blocking=True)
            ev = torch.cuda.Event()
            ev.record()
            self.staged.append((host, ev))
            self.back.append((t, host))
            self._drain(block=False)
        else:
            self._drain(block=True)
            self._hand(t)

    def finish(self):
        try:
            self._drain(block=True)
            c = self._coll()
            with _zt._lock:
                _zt._check(_native.zt_coll_finish(c, -1), "all-reduce")
            for dev, host in self.back:
                dev.copy_(host.view_as(dev), non_blocking=True)
        finally:
            self.staged.clear()
            self.back = []
            self.regions = 0

    def abandon(self):
        self.staged.clear()
        self.back = []


# ------------------------------------------------------------------ DDP

class ReducerHookState:
    """What reducer_hook keeps between calls. One is made for you when the
    hook is registered with state None; make your own to look inside
    (iterations done, the bucket sizes DDP used in the first iterations)."""

    def __init__(self):
        self.stream = _Stream(average=True)
        self.pending = []           # (future, bucket buffer) of this iteration
        self.iterations = 0
        self.layouts = []           # bucket sizes (elements) of the first iterations
        self._sizes = []


_default_state = None


def reducer_hook(state, bucket):
    """A DistributedDataParallel comm hook: each gradient bucket is averaged
    over the trainers through the job's reducers (or a ring when there are
    none) instead of DDP's process group. Register it with
    model.register_comm_hook(None, ztrain.torch.reducer_hook). Buckets are
    streamed as DDP makes them ready, whatever their layout (DDP rebuilds
    them after the first iteration); the last one completes the step."""
    global _default_state
    if not isinstance(state, ReducerHookState):
        if _default_state is None:
            _default_state = ReducerHookState()
        state = _default_state
    if not _zt.is_initialized():
        _zt.init()
    buf = bucket.buffer()
    fut = torch.futures.Future()
    state.pending.append((fut, buf))
    try:
        state.stream.add(buf, bucket.index())
        state._sizes.append(buf.numel())
        if bucket.is_last():
            state.stream.finish()
            done, state.pending = state.pending, []
            if len(state.layouts) < 4:
                state.layouts.append(tuple(state._sizes))
            state._sizes = []
            state.iterations += 1
            for f, b in done:
                f.set_result(b)
    except BaseException as e:
        state.stream.abandon()
        done, state.pending, state._sizes = state.pending, [], []
        for f, _ in done:
            if not f.done():
                f.set_exception(e)
        raise
    return fut


# ------------------------------------------------------------------ Horovod's optimizer
