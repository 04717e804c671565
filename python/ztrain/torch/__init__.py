"""ztrain for PyTorch programs.

DDP through ztrain's reducers (or a ring between the trainers), one line:

    model = torch.nn.parallel.DistributedDataParallel(model)
    model.register_comm_hook(None, ztrain.torch.reducer_hook)

Horovod scripts, by changing their import to `import ztrain.torch as hvd`:
init, rank, size, local_rank, local_size, allreduce(_), broadcast(_),
broadcast_parameters, broadcast_optimizer_state, broadcast_object,
DistributedOptimizer, Compression.none, Average and Sum.

Parameter servers: ParameterServerOptimizer (see its doc).

Gradients are float32. CUDA tensors are staged through pinned host memory:
each bucket (or gradient) is copied down as soon as it is ready, while the
backward pass goes on, and handed to the network once the copy is done.
"""
import collections
import contextlib
import io
import json
import pickle

import torch

import ztrain as _zt
from ztrain import _native, ZtrainError, ZtrainTimeout

__all__ = ["init", "rank", "size", "local_rank", "local_size", "allreduce", "allreduce_", "broadcast",
           "broadcast_", "broadcast_parameters", "broadcast_optimizer_state", "broadcast_object",
           "DistributedOptimizer", "Compression", "Average", "Sum", "reducer_hook", "ReducerHookState",
           "ParameterServerOptimizer",
           "ZtrainError", "ZtrainTimeout"]

Average = "average"
Sum = "sum"


def init():
    """Horovod's hvd.init(): reads the job (ztrain.init())."""
    return _zt.init()


def rank():
    return _zt.rank()


def size():
    return _zt.size()


def local_rank():
    return _zt.local_rank()


def local_size():
    return _zt.local_size()


def _average(average, op):
    if average is not None and op is not None:
        raise ValueError("give average or op, not both")
    if op is not None and op not in (Average, Sum):
        raise ValueError("op %r: ztrain supports Average and Sum" % (op,))
    return (op or Average) == Average if average is None else bool(average)


def allreduce_(tensor, average=None, name=None, op=None):
    """Sums (or averages, the default) tensor over every trainer, in place."""
    with torch.no_grad():
        _zt.allreduce(tensor, average=_average(average, op))
    return tensor


def allreduce(tensor, average=None, name=None, op=None):
    """Like allreduce_, into a new tensor."""
    return allreduce_(tensor.detach().clone(), average=average, op=op)


def broadcast_(tensor, root_rank, name=None):
    with torch.no_grad():
        _zt.broadcast(tensor, root=root_rank)
    return tensor


def broadcast(tensor, root_rank, name=None):
    return broadcast_(tensor.detach().clone(), root_rank)


def broadcast_parameters(params, root_rank=0):
    """Makes every trainer's tensors equal to root_rank's, bit for bit:
    params is a state_dict, or (name, tensor) pairs such as
    model.named_parameters()."""
    items = sorted(params.items()) if isinstance(params, dict) else list(params)
    for name, p in items:
        if not torch.is_tensor(p):
            raise TypeError("broadcast_parameters: %s is a %s, not a tensor" % (name, type(p).__name__))
        with torch.no_grad():
            target = p.data if p.is_contiguous() else p.data.contiguous()
            _zt.broadcast(target, root=root_rank)
            if target.data_ptr() != p.data_ptr():
                p.data.copy_(target)


def broadcast_object(obj, root_rank=0, name=None):
    """root_rank's obj (pickled) on every trainer."""
    data = pickle.dumps(obj) if _zt.rank() == root_rank else b""
    n = torch.tensor([len(data)], dtype=torch.int64)
    _zt.broadcast(n, root=root_rank)
    buf = torch.zeros(int(n.item()), dtype=torch.uint8)
    if _zt.rank() == root_rank:
        buf.copy_(torch.frombuffer(bytearray(data), dtype=torch.uint8))
    _zt.broadcast(buf, root=root_rank)
    return obj if _zt.rank() == root_rank else pickle.loads(buf.numpy().tobytes())


def broadcast_optimizer_state(optimizer, root_rank=0):
    """Gives every trainer root_rank's optimizer state (its state_dict)."""
    out = io.BytesIO()
    torch.save(optimizer.state_dict(), out)
    state = broadcast_object(out.getvalue(), root_rank)
    if _zt.rank() != root_rank:
        optimizer.load_state_dict(torch.load(io.BytesIO(state)))


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

class _DistributedOptimizer(torch.optim.Optimizer):
    """Methods of the class DistributedOptimizer makes (a subclass of the
    wrapped optimizer's class, as Horovod does, so schedulers accept it)."""

    def __init__(self, params, named_parameters, op):
        super(self.__class__, self).__init__(params)
        self._zt_params = [p for g in self.param_groups for p in g["params"] if p.requires_grad]
        names = {id(p): n for n, p in (named_parameters or [])}
        self._zt_names = [names.get(id(p), "param.%d" % i) for i, p in enumerate(self._zt_params)]
        # a fixed order, the same on every trainer: backward makes the last layers' first
        self._zt_order = list(reversed(range(len(self._zt_params))))
        self._zt_pos = {i: k for k, i in enumerate(self._zt_order)}
        self._zt_ready = [False] * len(self._zt_params)
        self._zt_next = 0
        self._zt_stream = _Stream(average=op == Average)
        self._zt_synced = False
        self._zt_skip = False
        self._zt_accs = []
        for i, p in enumerate(self._zt_params):
            acc = p.expand_as(p).grad_fn.next_functions[0][0]
            acc.register_hook(self._zt_hook(i))
            self._zt_accs.append(acc)

    def _zt_hook(self, i):
        def hook(*_):
            self._zt_ready[self._zt_pos[i]] = True
            self._zt_advance()
        return hook

    def _zt_advance(self):
        order = self._zt_order
        while self._zt_next < len(order) and self._zt_ready[self._zt_next]:
            k = self._zt_next
            p = self._zt_params[order[k]]
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            self._zt_stream.add(p.grad, k)
            self._zt_next += 1

    def synchronize(self):
        """Completes the all-reduce of every gradient (step() does it)."""
        if not _zt.is_initialized():
            _zt.init()
        try:
            self._zt_ready = [True] * len(self._zt_ready)  # unused parameters contribute zeros
            self._zt_advance()
            self._zt_stream.finish()
        except BaseException:
            self._zt_stream.abandon()
            raise
        finally:
            self._zt_ready = [False] * len(self._zt_ready)
            self._zt_next = 0
        self._zt_synced = True

    @contextlib.contextmanager
    def skip_synchronize(self):
        self._zt_skip = True
        try:
            yield
        finally:
            self._zt_skip = False

    def step(self, closure=None):
        if not self._zt_synced and not self._zt_skip:
            self.synchronize()
        self._zt_synced = False
        return super(self.__class__, self).step(closure)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average):
    """Horovod's DistributedOptimizer: gradients are averaged (op=Sum:
    summed) over the trainers as backward makes them, through the job's
    reducers or a ring, and step() applies them."""
    Compression._check(compression)
    if backward_passes_per_step != 1:
        raise ValueError("ztrain.torch.DistributedOptimizer: backward_passes_per_step=%r is not supported (1 only)"
                         % (backward_passes_per_step,))
    if op not in (Average, Sum):
        raise ValueError("op %r: ztrain supports Average and Sum" % (op,))
    if named_parameters is not None:
        named_parameters = list(named_parameters)
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,), dict(_DistributedOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, op)


# ------------------------------------------------------------------ parameter servers

def _init_scale(shape):
    """The servers' initial range for a parameter of this shape: Glorot
    uniform for weights (fan_in x fan_out), zeros for biases and scalars."""
    if len(shape) < 2:
        return 0.0
    fan_in = 1
    for d in shape[1:]:
        fan_in *= d
    return (6.0 / (fan_in + shape[0])) ** 0.5


def _describe_mlp(module):
    """{"kind": "mlp", ...} for an nn.Sequential of Linear and ReLU layers
    ending with a Linear (the model ztrain's evaluator scores), else None."""
    if not isinstance(module, torch.nn.Sequential) or not len(module):
        return None
    sizes, expect_linear = [], True
    for layer in module:
        if isinstance(layer, torch.nn.Linear) and expect_linear and layer.bias is not None:
            if sizes and sizes[-1] != layer.in_features:
                return None
            sizes += [layer.in_features] if not sizes else []
            sizes.append(layer.out_features)
            expect_linear = False
        elif isinstance(layer, torch.nn.ReLU) and not expect_linear:
            expect_linear = True
        else:
            return None
    return None if expect_linear else {"kind": "mlp", "sizes": sizes, "layout": "out-in"}


class ParameterServerOptimizer(torch.optim.Optimizer):
    """Trains a model whose parameters live on the job's parameter servers.

        opt = ztrain.torch.ParameterServerOptimizer(model, optimizer="adam", lr=1e-3)
        for x, y in data:
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()          # push the gradients, pull the fresh values

    params: the model (an nn.Module), its named_parameters() or its
    parameters(). Every worker declares them in the same order. The
    servers hold each one split across them, start it from the seed
    (uniform Glorot for weights, zeros for biases: the model's own initial
    values are replaced, so every worker starts alike), and apply the
    pushed gradients with their own optimizer: "sgd", "momentum", "adam" or
    "adagrad" (lr, momentum, betas, eps).

    Asynchronous by default: each worker's push is applied as it arrives.
    sync=True averages the pushes of every worker for a step before the
    next pull; max_staleness=K lets a worker run at most K steps ahead of
    the slowest.

    Checkpoints: the chief (rank 0) writes the servers' model in ztrain's
    format every checkpoint_steps steps (and whenever checkpoint() is
    called) under AIP_CHECKPOINT_DIR, keeping the newest keep_checkpoints,
    and announces each to the job's evaluators, which score an
    nn.Sequential of Linear and ReLU layers. Restarted parameter servers
    restore their shards from the newest checkpoint (or a newer snapshot of
    their own); `resumed_step` is that checkpoint's step (0: none), where a
    restarted job's workers continue. `steps` counts the steps taken.

    A parameter server lost in mid-training (killed, its host lost) is
    restarted by ztrain; the calls in flight are sent again, and step()
    returns once it answers. ZtrainTimeout after ZT_PS_TIMEOUT_MS of
    silence."""

    def __init__(self, params, optimizer="adam", lr=1e-3, momentum=0.9, betas=(0.9, 0.999), eps=1e-7, seed=1,
                 sync=False, max_staleness=None, checkpoint_steps=0, keep_checkpoints=5):
        from ztrain import _ps
        model = params if isinstance(params, torch.nn.Module) else None
        items = list(params.named_parameters() if model is not None else params)
        pairs = [it if isinstance(it, tuple) else ("param.%d" % i, it) for i, it in enumerate(items)]
        pairs = [(n, p) for n, p in pairs if p.requires_grad]
        if not pairs:
            raise ValueError("ztrain.torch.ParameterServerOptimizer: no parameters that require gradients")
        for n, p in pairs:
            if p.dtype != torch.float32:
                raise TypeError("ztrain.torch.ParameterServerOptimizer: parameter %s is %s; the parameter "
                                "servers hold float32" % (n, p.dtype))
            if not p.is_contiguous():
                raise ValueError("ztrain.torch.ParameterServerOptimizer: parameter %s is not contiguous" % n)
        super().__init__([p for _, p in pairs], dict(lr=lr))
        self.names = [n for n, _ in pairs]
        self._zt_params = [p for _, p in pairs]
        described = _describe_mlp(model)
        self._zt_model = json.dumps(described) if described else None
        self._zt_sync = bool(sync) or max_staleness is not None
        self.checkpoint_steps, self.keep_checkpoints = int(checkpoint_steps), int(keep_checkpoints)
        j = _zt.init()
        self.rank = j.rank
        self._zt_client = _ps.Client(j.paramservers, j.rank, j.size,
                                     [(n, p.numel(), _init_scale(p.shape)) for n, p in pairs],
                                     optimizer=optimizer, lr=lr, momentum=momentum, betas=betas, eps=eps,
                                     seed=seed, sync=sync, max_staleness=max_staleness)
        # CUDA parameters go through pinned host copies; CPU ones are read and written in place
        self._zt_host = [torch.empty(p.shape, dtype=torch.float32, pin_memory=True) if p.is_cuda else None
                         for p in self._zt_params]
        self._zt_grads = [None] * len(self._zt_params)
        self.resumed_step, _ = _ps.latest_checkpoint()
        self.steps = self.resumed_step
        self._zt_pull(self.steps)

    def _zt_pull(self, step):
        c = self._zt_client
        c.set_step(step)
        for i, p in enumerate(self._zt_params):
            c.pull(i, (self._zt_host[i] if p.is_cuda else p).data_ptr())
        c.wait()
        for i, p in enumerate(self._zt_params):
            if p.is_cuda:
                with torch.no_grad():
                    p.copy_(self._zt_host[i], non_blocking=True)

    @torch.no_grad()
    def step(self, closure=None):
        """Pushes every gradient (parameters without one push zeros in sync
        and bounded-staleness modes, nothing when asynchronous), then pulls
        the servers' fresh values into the parameters."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        c = self._zt_client
        held = []
        for i, p in enumerate(self._zt_params):
            g = p.grad
            if g is None:
                if not self._zt_sync:
                    continue
                g = torch.zeros_like(p)
            if g.is_cuda:
                self._zt_host[i].copy_(g)  # synchronous: the host copy is whole before it is pushed
                g = self._zt_host[i]
            elif g.dtype != torch.float32 or not g.is_contiguous():
                g = g.to(torch.float32).contiguous()
            held.append(g)  # alive and untouched until the servers have it (wait)
            c.push(i, g.data_ptr(), self.steps)
        self._zt_pull(self.steps + 1)
        del held
        self.steps += 1
        if self.checkpoint_steps > 0 and self.steps % self.checkpoint_steps == 0:
            self.checkpoint()
        return loss

    def checkpoint(self, final=False):
        """On the chief: writes the servers' model at the current step as a
        checkpoint (final: AIP_MODEL_DIR, the newest one kept), announces it
        to the evaluators and returns its folder. None on other workers."""
        if self.rank != 0:
            return None
        path = self._zt_client.checkpoint(self.steps, self._zt_model, final=final,
                                          keep=1 if final else self.keep_checkpoints)
        _zt.announce_checkpoint(self.steps, path)
        return path

    def close(self):
        """Disconnects from the servers (at exit by itself)."""
        self._zt_client.close()
