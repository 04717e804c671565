"""The DDP communication hook: each bucket of gradients streamed into
ztrain's collective as DDP hands it over, CUDA buckets staged through pinned
host memory while the backward pass goes on."""
import collections

import torch

import ztrain as _zt
from ztrain import _core
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
        return _core.collective()

    def _hand(self, t):
        if t.dtype != torch.float32:
            raise TypeError("ztrain.torch: gradients must be float32, not %s" % t.dtype)
        if not t.is_contiguous():
            raise ValueError("ztrain.torch: a gradient that is not contiguous")
        c = self._coll()
        with _core.lock:
            _core.check(_native.zt_coll_add(c, t.data_ptr(), t.numel(), self.average, -1), "all-reduce")
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
            with _core.lock:
                _core.check(_native.zt_coll_finish(c, -1), "all-reduce")
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

class _FixedOrder:
    """An elastic group's order for the DDP hook: the model's parameters,
    last first (the order backward makes them ready). Every trainer hands
    its gradients to the collective in this order, whatever DDP's bucket
    layout: a trainer that has just joined has DDP's first layout (the
    construction order) while the members have the layout DDP rebuilt after
    their first iteration, and the sums must still line up element by
    element. Gradients go through one flat host copy of the model."""

    def __init__(self, params):
        ps = [p for p in params if p.requires_grad][::-1]
        self.index = {id(p): i for i, p in enumerate(ps)}
        self.offs = [0]
        for p in ps:
            self.offs.append(self.offs[-1] + p.numel())
        self.flat = torch.zeros(self.offs[-1], dtype=torch.float32)
        self.reset()

    def reset(self):
        self.ready = [False] * len(self.index)
        self.next = 0       # the first parameter not handed over yet
        self.back = []      # (bucket buffer, start in it, parameter index) to copy the sums back to

    def add(self, stream, bucket):
        buf, at = bucket.buffer(), 0
        for p in bucket.parameters():
            i = self.index.get(id(p))
            if i is None:
                raise ValueError("ztrain.torch: a DDP bucket holds a parameter of another model than the "
                                 "elastic TorchState's (one DDP model per process in an elastic group)")
            n = self.offs[i + 1] - self.offs[i]
            self.flat[self.offs[i]:self.offs[i + 1]].copy_(buf[at:at + n])
            self.back.append((buf, at, i))
            self.ready[i] = True
            at += n
        start = self.next
        while self.next < len(self.ready) and self.ready[self.next]:
            self.next += 1
        if self.next > start:
            stream._hand(self.flat[self.offs[start]:self.offs[self.next]])

    def finish(self, stream):
        if self.next != len(self.ready):
            raise ValueError("ztrain.torch: DDP's buckets of this step did not hold every parameter of the "
                             "elastic TorchState's model (%d of %d)" % (self.next, len(self.ready)))
        stream.finish()
        for buf, at, i in self.back:
            buf[at:at + self.offs[i + 1] - self.offs[i]].copy_(self.flat[self.offs[i]:self.offs[i + 1]])
        self.reset()


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
        self.order = None           # _FixedOrder in an elastic group
        self.elastic = False        # a step that loses a member is given up, not raised
        self.abandoned = None       # the ZtrainError of a step the elastic group gave up

    def _reset(self):
        """After an elastic group's change: nothing of the earlier group's step is kept."""
        self.stream.abandon()
        self.stream.regions = 0
        self.pending, self._sizes, self.abandoned = [], [], None
        if self.order is not None:
            self.order.reset()


_default_state = None


def _default():
    global _default_state
    if _default_state is None:
        _default_state = ReducerHookState()
    return _default_state


def _step(state, bucket, buf):
    """Hands one bucket over; the last one completes the step."""
    if state.abandoned is not None:
        pass                        # the elastic group gave this step up: the loop restores at its commit
    elif state.order is not None:
        state.order.add(state.stream, bucket)
    else:
        state.stream.add(buf, bucket.index())
    state._sizes.append(buf.numel())
    if bucket.is_last():
        if state.abandoned is None:
            if state.order is not None:
                state.order.finish(state.stream)
            else:
                state.stream.finish()
        if len(state.layouts) < 4:
            state.layouts.append(tuple(state._sizes))
        state._sizes = []
        state.iterations += 1
        return True
    return False


def reducer_hook(state, bucket):
    """A DistributedDataParallel comm hook: each gradient bucket is averaged
    over the trainers through the job's reducers (or a ring when there are
    none) instead of DDP's process group. Register it with
    model.register_comm_hook(None, ztrain.torch.reducer_hook). Buckets are
    streamed as DDP makes them ready, whatever their layout (DDP rebuilds
    them after the first iteration); the last one completes the step.
    In an elastic group (ztrain.torch.elastic) a step that loses a member
    is given up without an error inside DDP: the elastic loop restores the
    last commit at the next one."""
    if not isinstance(state, ReducerHookState):
        state = _default()
    if not _zt.is_initialized():
        _zt.init()
    buf = bucket.buffer()
    fut = torch.futures.Future()
    state.pending.append((fut, buf))
    try:
        if _step(state, bucket, buf):
            done, state.pending = state.pending, []
            for f, b in done:
                f.set_result(b)
    except BaseException as e:
        state.stream.abandon()
        if state.elastic and isinstance(e, _zt.ZtrainError) and e.code == _native.ZT_ECANCELLED:
            # a member lost in mid-step: DDP must still finish its backward
            # pass (an error raised here leaves its reducer unfinished)
            state.abandoned = e
            if bucket.is_last():
                done, state.pending, state._sizes = state.pending, [], []
                for f, b in done:
                    f.set_result(b)
            return fut
        done, state.pending, state._sizes = state.pending, [], []
        for f, _ in done:
            if not f.done():
                f.set_exception(e)
        raise
    return fut


# ------------------------------------------------------------------ Horovod's optimizer
