"""Horovod's DistributedOptimizer: each gradient handed to ztrain's
collective from its accumulation hook, the averages waited for in step()."""
import contextlib

import torch

import ztrain as _zt
from ._collectives import Average, Sum
from ._hook import Compression, _Stream


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

    def _zt_reset(self):
        """Forgets a step given up in the middle (an elastic group that
        lost a member): nothing of it is waited for."""
        self._zt_stream.abandon()
        self._zt_stream.regions = 0
        self._zt_ready = [False] * len(self._zt_ready)
        self._zt_next = 0
        self._zt_synced = False

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
