"""SageMaker's data-parallel library for PyTorch, as a training script of
SageMaker's uses it, run by ztrain:

    import smdistributed.dataparallel.torch.torch_smddp
    torch.distributed.init_process_group(backend="smddp")
    model = torch.nn.parallel.DistributedDataParallel(model)

Importing this registers the "smddp" backend. Its process group is gloo's
(broadcasts, barriers and any collective the script calls itself), and a
DistributedDataParallel made over it sends its gradients through ztrain's
reducers (ztrain.torch.reducer_hook), which stand in for smdistributed's
servers: a CreateTrainingJob with the estimator's distribution
smdistributed gets one reducer per host."""
import torch.distributed as dist
import torch.nn.parallel as _parallel

import ztrain.torch as _zt

BACKEND = "smddp"


def _create(store, rank, world_size, timeout):
    return dist.ProcessGroupGloo(store, rank, world_size, timeout)


if BACKEND.upper() not in dist.Backend._plugins:
    dist.Backend.register_backend(BACKEND, _create)

_ddp_init = _parallel.DistributedDataParallel.__init__


def _init(self, *args, **kwargs):
    _ddp_init(self, *args, **kwargs)
    if dist.get_backend(self.process_group) == BACKEND:
        self.register_comm_hook(None, _zt.reducer_hook)


if getattr(_parallel.DistributedDataParallel.__init__, "__name__", "") != "_init":
    _parallel.DistributedDataParallel.__init__ = _init
