#!/usr/bin/env python3
"""A PyTorch trainer for the Python package's tests, run by `ztrain run` on
every trainer of a job. It writes what it found to OUT/result-RANK.json.

  ddp       two DDP copies of one model on the same data: one over gloo, one
            through ztrain.torch.reducer_hook; their parameters after STEPS
  hvd       ranks start different; broadcast_parameters; Horovod-style
            DistributedOptimizer against DDP over gloo
  mismatch  allreduce of different lengths on different ranks, then a good one
  ps        ranks start different; ParameterServerOptimizer, synchronous SGD:
            the servers' initial values, the first step's gradients and the
            values after it (OUT/ps-RANK.pt), every step's digest
  nops      ParameterServerOptimizer in a job without parameter servers
  preempt   DDP through reducer_hook; rank 0 saves on a stop (ztrain.on_stop)
            into OUT/saved.json, then blocks in a step rank 1 never joins
            (OUT/blocked says so); rank 1 and the restarted rank 0 report
            the save
  elastic_group  in an elastic pool, a DDP model over a process group of
            every trainer: ztrain.torch.elastic refuses it, naming why
"""
import argparse
import errno
import hashlib
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn

import ztrain
import ztrain.torch as hvd
from ztrain.torch import elastic


class Pwn:
    """What a hostile root would broadcast: unpickled, it runs a command."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, ("touch %s" % self.path,))


class Net(nn.Module):
    """Layers declared in another order than forward uses them, so DDP's
    rebuilt buckets (in the order gradients become ready) differ from its
    first ones (reverse declaration order)."""

    def __init__(self, width):
        super().__init__()
        self.out = nn.Linear(width, 10)
        self.inp = nn.Linear(64, width)
        self.mid = nn.Linear(width, width)

    def forward(self, x):
        return self.out(torch.relu(self.mid(torch.relu(self.inp(x)))))


def digest(model):
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def max_diff(a, b):
    return max(float((p - q).abs().max()) for p, q in zip(a.parameters(), b.parameters()))


def batches(rank, steps, batch=32):
    g = torch.Generator().manual_seed(1000 + rank)
    return [(torch.randn(batch, 64, generator=g), torch.randint(0, 10, (batch,), generator=g)) for _ in range(steps)]


def train(model, opt, data, delay=0.0):
    for x, y in data:
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        if delay:
            time.sleep(delay)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--delay", type=float, default=0.0)
    a = ap.parse_args()
    job = ztrain.init()
    res = {"rank": job.rank, "size": job.size, "reducers": len(job.reducers)}
    torch.manual_seed(7)
    saved = os.path.join(a.out, "saved.json")
    if a.mode in ("ddp", "hvd", "elastic_group") or (a.mode == "preempt" and not os.path.exists(saved)):
        dist.init_process_group("gloo", rank=job.rank, world_size=job.size)
    data = batches(job.rank, a.steps)
    if a.mode == "ddp":
        ref = Net(a.width)
        mine = Net(a.width)
        mine.load_state_dict(ref.state_dict())
        cap = 4 * a.width * a.width / 2 / 2 ** 20  # a few buckets
        ddp_ref = nn.parallel.DistributedDataParallel(ref, bucket_cap_mb=cap)
        ddp = nn.parallel.DistributedDataParallel(mine, bucket_cap_mb=cap)
        state = hvd.ReducerHookState()
        ddp.register_comm_hook(state, hvd.reducer_hook)
        train(ddp_ref, torch.optim.SGD(ddp_ref.parameters(), lr=0.05, momentum=0.9), data)
        train(ddp, torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9), data, a.delay)
        res.update(diff=max_diff(ref, mine), digest=digest(mine), layouts=state.layouts,
                   iterations=state.iterations, moved=max_diff(mine, Net(a.width)))
    elif a.mode == "hvd":
        torch.manual_seed(100 + job.rank)  # every rank starts elsewhere
        mine = Net(a.width)
        res["digest_before"] = digest(mine)
        hvd.broadcast_parameters(mine.state_dict(), root_rank=0)
        res["digest_after_broadcast"] = digest(mine)
        ref = Net(a.width)
        ref.load_state_dict(mine.state_dict())
        ddp_ref = nn.parallel.DistributedDataParallel(ref)
        opt = torch.optim.SGD(mine.parameters(), lr=0.05, momentum=0.9)
        hvd.broadcast_optimizer_state(opt, root_rank=0)
        opt = hvd.DistributedOptimizer(opt, named_parameters=mine.named_parameters())
        train(ddp_ref, torch.optim.SGD(ddp_ref.parameters(), lr=0.05, momentum=0.9), data)
        train(mine, opt, data)
        res.update(diff=max_diff(ref, mine), digest=digest(mine), is_sgd=isinstance(opt, torch.optim.SGD),
                   obj=hvd.broadcast_object({"from": job.rank}, root_rank=job.size - 1))
        # a pickled payload that would run a command where it is unpickled: refused on every rank
        pwned = os.path.join(os.environ.get("AIP_MODEL_DIR", "."), "pwned-%d" % job.rank)
        try:
            hvd.broadcast_object(Pwn(pwned), root_rank=0)
            res["refused"] = None
        except ValueError as e:
            res["refused"] = str(e)
        res["pwned"] = os.path.exists(pwned)
    elif a.mode == "mismatch":
        x = torch.ones(100 + job.rank)
        try:
            ztrain.allreduce(x)
            res["error"] = None
        except ztrain.ZtrainError as e:
            res["error"] = str(e)
        y = torch.full((1000,), float(job.rank + 1))
        ztrain.allreduce(y)  # the group goes on
        res["after"] = float(y[0])
        res["untouched"] = float(x.sum())
        try:
            ztrain.allreduce(torch.ones(3, dtype=torch.float64))
        except TypeError as e:
            res["dtype_error"] = str(e)
    elif a.mode == "ps":
        torch.manual_seed(100 + job.rank)  # the servers' values replace these
        model = Net(a.width)
        res["digest_own"] = digest(model)
        opt = hvd.ParameterServerOptimizer(model, optimizer="sgd", lr=0.1, sync=True)
        res["digest_init"] = digest(model)
        saved = {"init": [p.detach().clone() for p in model.parameters()]}
        digests = []
        for s, (x, y) in enumerate(data):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            if s == 0:
                saved["grads"] = [p.grad.clone() for p in model.parameters()]
            opt.step()
            if s == 0:
                saved["after"] = [p.detach().clone() for p in model.parameters()]
            digests.append(digest(model))
        torch.save(saved, os.path.join(a.out, "ps-%d.pt" % job.rank))
        res.update(digests=digests, steps=opt.steps, names=opt.names, resumed=opt.resumed_step)
    elif a.mode == "nops":
        try:
            hvd.ParameterServerOptimizer(Net(a.width))
            res["error"] = None
        except ztrain.ZtrainError as e:
            res["error"] = str(e)
        try:
            hvd.ParameterServerOptimizer(Net(a.width).double())
        except TypeError as e:
            res["dtype_error"] = str(e)
    elif a.mode == "preempt":
        if os.path.exists(saved):  # the job's next run: what the stop saved
            with open(saved) as f:
                res["saved"] = json.load(f)
            if job.rank == 0:  # a checkpoint that could not be written, said to the job
                res["reported"] = ztrain.report_checkpoint_error(7, OSError(errno.ENOSPC, "No space left on device"))
            mate = os.path.join(a.out, "result-1.json")
            for _ in range(600 if job.rank == 0 else 0):  # the chief's end ends the job: rank 1 first
                if os.path.exists(mate):
                    break
                time.sleep(0.05)
        else:
            model = Net(a.width)
            ddp = nn.parallel.DistributedDataParallel(model)
            ddp.register_comm_hook(None, hvd.reducer_hook)
            opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
            done = []

            def save():
                with open(saved + ".tmp", "w") as f:
                    json.dump({"step": len(done), "preempted": ztrain.preempted(), "stopping": ztrain.stopping()}, f)
                os.rename(saved + ".tmp", saved)
            if job.rank == 0:
                ztrain.on_stop(save)
            for batch in data[:3]:
                train(ddp, opt, [batch])
                done.append(1)
            if job.rank == 0:
                open(os.path.join(a.out, "blocked"), "w").close()
                train(ddp, opt, data[3:4])  # rank 1 never joins: held here until the stop
                sys.exit("a step without rank 1 returned")
            while not os.path.exists(saved):  # rank 1: until rank 0 has saved on its stop
                if ztrain.stopping():
                    sys.exit(ztrain.stop_status())
                time.sleep(0.05)
            with open(saved) as f:
                res["saved"] = json.load(f)
    elif a.mode == "elastic_group":
        res["group"] = job.group
        try:
            elastic.TorchState(model=nn.parallel.DistributedDataParallel(Net(a.width)))
            res["error"] = None
        except ValueError as e:
            res["error"] = str(e)
    else:
        sys.exit("unknown mode " + a.mode)
    with open(os.path.join(a.out, "result-%d.json" % job.rank), "w") as f:
        json.dump(res, f)


if __name__ == "__main__":
    main()
