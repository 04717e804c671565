"""ztrain for PyTorch programs.

DDP through ztrain's reducers (or a ring between the trainers), one line:

    model = torch.nn.parallel.DistributedDataParallel(model)
    model.register_comm_hook(None, ztrain.torch.reducer_hook)

Horovod scripts, by changing their import to `import ztrain.torch as hvd`:
init, rank, size, local_rank, local_size, allreduce(_), broadcast(_),
broadcast_parameters, broadcast_optimizer_state, broadcast_object,
DistributedOptimizer, Compression.none, Average and Sum.

Parameter servers: ParameterServerOptimizer (see its doc).

Elastic pools: ztrain.torch.elastic (TorchState, run), as hvd.elastic.

Gradients are float32. CUDA tensors are staged through pinned host memory:
each bucket (or gradient) is copied down as soon as it is ready, while the
backward pass goes on, and handed to the network once the copy is done.
"""
from ztrain import ZtrainError, ZtrainTimeout

from ._collectives import (Average, Sum, allreduce, allreduce_, broadcast, broadcast_, broadcast_object,
                           broadcast_optimizer_state, broadcast_parameters, init, local_rank, local_size, rank,
                           size)
from ._hook import Compression, ReducerHookState, reducer_hook
from ._optimizer import DistributedOptimizer
from ._ps_optimizer import ParameterServerOptimizer
from . import elastic

__all__ = ["init", "rank", "size", "local_rank", "local_size", "allreduce", "allreduce_", "broadcast",
           "broadcast_", "broadcast_parameters", "broadcast_optimizer_state", "broadcast_object",
           "DistributedOptimizer", "Compression", "Average", "Sum", "reducer_hook", "ReducerHookState",
           "ParameterServerOptimizer", "elastic",
           "ZtrainError", "ZtrainTimeout"]
