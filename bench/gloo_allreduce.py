#!/usr/bin/python3
"""The gloo peer: torch.distributed all_reduce (gloo backend, TCP loopback)
of float32 sums, same sizes; prints "gloo N 0 BYTES SECONDS" per size.
Needs Debian's python3-torch (run with /usr/bin/python3)."""
import benchargs  # bench/ is the script's own folder, first on sys.path
benchargs.check(__doc__, (), (), 3)
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

SIZES = [4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20]


def run(rank, n, port, budget, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=n)
    for size in SIZES:
        t = torch.zeros(size // 4, dtype=torch.float32)
        iters = max(3, min(3000, int(budget * 1e9 / (size * n + 1e5))))
        for _ in range(2):
            dist.all_reduce(t)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(t)
        s = torch.tensor([(time.perf_counter() - t0) / iters], dtype=torch.float64)
        dist.all_reduce(s, op=dist.ReduceOp.MAX)
        if rank == 0:
            out.put("gloo %d 0 %d %.9f" % (n, size, s.item()))
    dist.destroy_process_group()


if __name__ == "__main__":
    n = int(sys.argv[1])
    port = int(sys.argv[2])
    budget = float(sys.argv[3]) if len(sys.argv) > 3 else 0.6
    q = mp.get_context("spawn").SimpleQueue()
    mp.spawn(run, args=(n, port, budget, q), nprocs=n, join=True)
    while not q.empty():
        print(q.get())
