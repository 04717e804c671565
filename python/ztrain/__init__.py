"""ztrain's data plane for Python programs started by `ztrain run`.

    import ztrain
    job = ztrain.init()              # rank, size, local rank, reducers, parameter servers
    ztrain.allreduce(x)              # sum over the trainers, in place (average=True: the mean)
    ztrain.broadcast(x, root=0)      # root's values everywhere, bit for bit
    ztrain.report_metric("accuracy", 0.91, step=100)   # for studies (cloudml-hypertune's file)
    ztrain.on_stop(save)             # save() runs when a stop (a preemption, a cancel) ends the program

x is a contiguous CPU torch tensor, a NumPy array or any writable buffer:
its memory is handed to libztrain as it is, never copied in Python. CUDA
tensors go through host memory. All-reduce takes float32; broadcast any
type. PyTorch users want ztrain.torch: the DDP comm hook, the Horovod-style
API and the parameter-server optimizer.
"""
from ._native import ZtrainError, ZtrainStopped, ZtrainTimeout
from ._core import (
    Job, init, is_initialized, rank, size, local_rank, local_size, job, allreduce, broadcast,
    report_metric, announce_checkpoint, report_checkpoint_error, shutdown, stop_status, stopping,
    preempted, on_stop, run_on_stop, version)

__all__ = ["Job", "init", "is_initialized", "rank", "size", "local_rank", "local_size", "job", "allreduce",
           "broadcast", "report_metric", "announce_checkpoint", "report_checkpoint_error", "shutdown", "stop_status",
           "stopping", "preempted", "on_stop", "run_on_stop", "ZtrainError",
           "ZtrainStopped", "ZtrainTimeout", "version"]
