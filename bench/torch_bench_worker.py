#!/usr/bin/env python3
"""One trainer of bench/torch_bench.py (run by `ztrain run`): an MLP with
WIDTH-wide hidden layers on synthetic data, MODE one of
  local  no communication (the compute alone, under the same contention)
  gloo   DDP over gloo
  hook   DDP with ztrain.torch.reducer_hook
  hvd    ztrain.torch.DistributedOptimizer
  ar-gloo, ar-ztrain   no model: one all-reduce of the model's size per
         step, gloo's dist.all_reduce or ztrain.allreduce (the collective alone)
Rank 0 prints "bench: params N step_s S cpu_busy B machine_cpu_s C": the
median over the timed steps, how busy the machine's CPUs were over them
(0..1, from /proc/stat, which every host of a namespace cluster shares:
what the whole run used of the cores they all share) and those CPU-seconds.
Every rank prints "bench: rank R cpu_s C": its own process's CPU-seconds
(every thread's: ztrain's and gloo's included) over the timed steps.

    torch_bench_worker.py MODE WIDTH STEPS [NUMEL]

NUMEL sets the all-reduce's size in the ar- modes (default: the model's)."""
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn

mode, width, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
numel = int(sys.argv[4]) if len(sys.argv) > 4 else 0
torch.set_num_threads(1)
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(784, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                      nn.Linear(width, 1024), nn.ReLU(), nn.Linear(1024, 10))
rank = int(os.environ["RANK"])


def cpu_ticks():
    """(busy, total) jiffies of every CPU of the machine."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return sum(v) - v[3] - v[4], sum(v)


def report(n, times, t0, c0):
    """t0: cpu_ticks() and c0: time.process_time() when the timed steps began."""
    print("bench: rank %d cpu_s %.4f" % (rank, time.process_time() - c0), flush=True)
    if rank == 0:
        b, t = cpu_ticks()
        print("bench: params %d step_s %.4f cpu_busy %.3f machine_cpu_s %.3f" % (
            n, statistics.median(times[2:]), (b - t0[0]) / max(t - t0[1], 1),
            (b - t0[0]) / os.sysconf("SC_CLK_TCK")), flush=True)


if mode.startswith("ar-"):
    import ztrain
    if mode == "ar-gloo":
        dist.init_process_group("gloo")
    n = numel or sum(p.numel() for p in model.parameters())
    buf = torch.zeros(n)  # summed in place every step: ones would overflow to inf after ~60
    times = []
    for s in range(steps + 2):
        if s == 2:
            t0, c0 = cpu_ticks(), time.process_time()
        t = time.perf_counter()
        if mode == "ar-gloo":
            dist.all_reduce(buf)
        else:
            ztrain.allreduce(buf)
        times.append(time.perf_counter() - t)
    report(n, times, t0, c0)
    if mode == "ar-gloo":
        dist.barrier()
    else:
        ztrain.allreduce(torch.zeros(1))
    sys.exit(0)
if mode in ("gloo", "hook"):
    dist.init_process_group("gloo")
    model = nn.parallel.DistributedDataParallel(model)
    if mode == "hook":
        import ztrain.torch
        model.register_comm_hook(None, ztrain.torch.reducer_hook)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
if mode == "hvd":
    import ztrain.torch as hvd
    hvd.init()
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
x, y = torch.randn(64, 784), torch.randint(0, 10, (64,))
times = []
for s in range(steps + 2):
    if s == 2:
        t0, c0 = cpu_ticks(), time.process_time()
    t = time.perf_counter()
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    times.append(time.perf_counter() - t)
report(sum(p.numel() for p in model.parameters()), times, t0, c0)
if mode in ("gloo", "hook"):
    dist.barrier()
elif mode == "hvd":
    hvd.allreduce(torch.zeros(1))
