"""Horovod's collectives for PyTorch tensors: init, rank, size, the
all-reduce and broadcasts of tensors, parameters, optimizer state and
objects, over ztrain's collective (reducers, or a ring between trainers)."""
import torch

import ztrain as _zt
from . import _plain

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
    """root_rank's obj on every trainer: tensors and plain values only (None,
    bool, int, float, str, list, tuple, dict), sent in ztrain's own format
    (_plain), never pickled: a peer's bytes can make nothing else. An object
    that is not plain raises ValueError on every rank alike."""
    data, refused = b"", None
    if _zt.rank() == root_rank:
        try:
            data = _plain.dumps(obj)
        except ValueError as e:
            refused = e
    n = torch.tensor([len(data)], dtype=torch.int64)  # 0: the root refused it
    _zt.broadcast(n, root=root_rank)
    if int(n.item()) == 0:
        raise ValueError("ztrain.torch.broadcast_object: only tensors and plain values are sent (%s)"
                         % (refused or "rank %d's object was not one" % root_rank))
    buf = torch.zeros(int(n.item()), dtype=torch.uint8)
    if _zt.rank() == root_rank:
        buf.copy_(torch.frombuffer(bytearray(data), dtype=torch.uint8))
    _zt.broadcast(buf, root=root_rank)
    if _zt.rank() == root_rank:
        return obj
    try:
        return _plain.loads(buf.numpy().tobytes())
    except ValueError as e:
        raise ValueError("ztrain.torch.broadcast_object: not an object in ztrain's format: %s" % e) from None


def broadcast_optimizer_state(optimizer, root_rank=0):
    """Gives every trainer root_rank's optimizer state (its state_dict:
    tensors and plain types, sent as broadcast_object sends)."""
    state = broadcast_object(optimizer.state_dict(), root_rank)
    if _zt.rank() != root_rank:
        optimizer.load_state_dict(state)
