"""Elastic training for PyTorch, in the spirit of Horovod's hvd.elastic:
a trainer pool with an elasticPolicy grows and shrinks while the job runs
(`ztrain scale`, or a trainer lost for good), and the program goes on.

    import ztrain.torch as hvd

    state = hvd.elastic.TorchState(model, optimizer, epoch=0, batch=0)

    @hvd.elastic.run
    def train(state):
        while state.epoch < epochs:
            ...                      # shard the data by hvd.rank() and hvd.size()
            while state.batch < steps:
                ...                  # one step, with hvd.DistributedOptimizer
                state.batch += 1
                if state.batch % 10 == 0:
                    state.commit()   # the group may change here
            state.epoch, state.batch = state.epoch + 1, 0

    train(state)

The coordinator decides each change and tells every trainer. At a commit,
the trainers all-reduce the newest membership each knows of, so all of them
see a change at the same commit: the ones that leave exit 0; the others form
the new group (rank() and size() are then the new ones), take rank 0's
model, optimizer state and attributes (sync), and call the function again,
which goes on from the committed attributes. A trainer that joins starts
with that same sync. A member lost for good (or preempted) makes the others
give the step in progress up: they restore the last commit and go on the
same way without it. Outside an elastic pool, commit only saves.
"""
import copy
import functools
import sys

import torch

import ztrain as _zt
from ztrain import _native
from ztrain import _core
from . import _collectives, _hook

__all__ = ["State", "TorchState", "MembershipChanged", "run", "local_process_group"]


class MembershipChanged(Exception):
    """Raised by commit() when the group changes after it (Horovod's
    HostsUpdatedInterrupt); run() catches it."""


class State:
    """Attributes (plain values) that are committed, restored and synced.
    Subclasses add what they hold (TorchState: a model and an optimizer)."""

    def __init__(self, **kwargs):
        self._names = list(kwargs)
        for k, v in kwargs.items():
            setattr(self, k, v)
        self._commits = 0  # synced with the attributes: a joiner counts on from rank 0's
        self._saved = None
        self.save()

    def _attrs(self):
        return dict({k: getattr(self, k) for k in self._names}, _commits=self._commits)

    def save(self):
        self._saved = copy.deepcopy(self._attrs())

    def restore(self):
        for k, v in copy.deepcopy(self._saved).items():
            setattr(self, k, v)

    def sync(self):
        """Every trainer takes rank 0's attributes."""
        for k, v in _collectives.broadcast_object(self._attrs(), root_rank=0).items():
            setattr(self, k, v)

    def progress(self):
        """The step this state is at, for the job's record of membership
        changes: a `step` attribute when it has one, else the commits made."""
        step = getattr(self, "step", None)
        return int(step) if isinstance(step, int) else self._commits

    def commit(self):
        """Saves, then raises MembershipChanged when the group changes after
        this commit (every trainer of the group at the same commit). A DDP
        step given up since the last commit (a member lost) raises its
        error instead, before anything is saved: run() restores."""
        lost = _hook._default().abandoned
        if lost is not None:
            raise lost
        self._commits += 1
        self.save()
        if _changes():
            raise MembershipChanged()


class TorchState(State):
    """A model and its optimizer (either may be None), and attributes. The
    model may be a DistributedDataParallel one with ztrain.torch.reducer_hook
    registered, over a process group of this process alone (see
    local_process_group): ztrain's group does the sums, in an order of the
    model's own that joiners share whatever DDP's bucket layout."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        self.model, self.optimizer = model, optimizer
        if isinstance(model, torch.nn.parallel.DistributedDataParallel):
            _check_ddp(model)
            _hook._default().elastic = True
            _hook._default().order = _hook._FixedOrder(model.module.parameters())
        super().__init__(**kwargs)

    def save(self):
        super().save()
        self._saved_model = copy.deepcopy(self.model.state_dict()) if self.model is not None else None
        self._saved_optimizer = copy.deepcopy(self.optimizer.state_dict()) if self.optimizer is not None else None

    def restore(self):
        super().restore()
        if hasattr(self.optimizer, "_zt_reset"):  # a DistributedOptimizer's step given up
            self.optimizer._zt_reset()
        if self.model is not None:
            self.model.load_state_dict(self._saved_model)
        if self.optimizer is not None:
            self.optimizer.load_state_dict(self._saved_optimizer)

    def sync(self):
        if self.model is not None:
            _collectives.broadcast_parameters(self.model.state_dict(), root_rank=0)
        if self.optimizer is not None:
            _collectives.broadcast_optimizer_state(self.optimizer, root_rank=0)
        super().sync()


def local_process_group():
    """Makes torch.distributed's default process group one of this process
    alone (in memory, no network), for a DDP model in an elastic group:
    DDP's own group cannot change its size, ztrain's does the sums."""
    import torch.distributed as dist
    if not dist.is_initialized():
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)


def _check_ddp(model):
    try:
        j = _zt.init()
    except _zt.ZtrainError:  # not in a job: nothing changes
        return
    n = model.process_group.size() if getattr(model, "process_group", None) is not None else 1
    if j.group >= 0 and n != 1:
        raise ValueError("ztrain.torch.elastic: this DDP model's process group has %d processes; in an elastic "
                         "pool it must be this process alone, since its size cannot change: call "
                         "ztrain.torch.elastic.local_process_group() instead of init_process_group, and "
                         "register ztrain.torch.reducer_hook (ztrain's group does the sums)" % n)


def _changes():
    """Whether any trainer of the group knows of a newer membership: the
    newest generation each knows of, averaged over the group."""
    try:
        j = _zt.init()
    except _zt.ZtrainError:  # not in a job at all
        return False
    if j.group < 0:
        return False
    m = _core.membership(0)
    known = torch.tensor([float(m[0] if m else j.group)], dtype=torch.float32)
    _zt.allreduce(known, average=True)
    return (known.item() - j.group) * j.size > 0.5


def run(fn):
    """Runs fn(state, ...) in an elastic group (see the module's doc); a
    membership change at a commit re-forms the group, syncs the state from
    rank 0 and calls fn again. A trainer that leaves exits 0."""
    @functools.wraps(fn)
    def wrapper(state, *args, **kwargs):
        _zt.init()
        _core.replica()  # registered: the coordinator tells this trainer of changes
        state.sync()
        _core.regrouped(state.progress())
        timeout = _native.knob_int("ZT_ALLREDUCE_TIMEOUT_MS")
        while True:
            try:
                return fn(state, *args, **kwargs)
            except MembershipChanged:
                pass
            except _zt.ZtrainError as e:
                if e.code != _native.ZT_ECANCELLED:
                    raise
                # the group lost a member in mid-round: back to the last commit
                print("ztrain: the group lost a member: going on without it from the last commit", flush=True)
                state.restore()
            _hook._default()._reset()
            if _core.regroup(state.progress(), timeout) < 0:
                print("ztrain: left the group: its workers' pool was scaled down", flush=True)
                sys.exit(0)
            state.sync()
    return wrapper
