#!/usr/bin/env python3
"""An ordinary PyTorch DDP program (Fashion-MNIST, an MLP) that sends its
gradients through ztrain's reducers: the one ztrain line is marked below.
Without it, the same program all-reduces over gloo.

    ztrain run examples/pytorch-reducer.json

Every trainer reads its shard of the training set; the chief scores the
test set at the end, prints the parameters' SHA-256 (equal on every rank),
and reports the accuracy for studies (cloudml-hypertune's file)."""
import argparse
import hashlib
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn

import ztrain
import ztrain.torch
from fashion_mnist import load


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch_size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.001)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--data_dir", default=os.environ.get("ZT_DATA_DIR", "/usr/share/datasets/fashion-mnist"))
    a = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")  # MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE come from ztrain
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(784, a.hidden), nn.ReLU(), nn.Linear(a.hidden, 128), nn.ReLU(),
                          nn.Linear(128, 10))
    model = nn.parallel.DistributedDataParallel(model)
    model.register_comm_hook(None, ztrain.torch.reducer_hook)  # <- the ztrain line
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    x, y = load(a.data_dir, "train")
    x, y = x[rank::world], y[rank::world]
    steps = len(x) // a.batch_size
    g = torch.Generator().manual_seed(rank)
    start = time.time()
    for epoch in range(a.epochs):
        order = torch.randperm(len(x), generator=g)
        for s in range(steps):
            i = order[s * a.batch_size:(s + 1) * a.batch_size]
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x[i]), y[i])
            loss.backward()
            opt.step()
        print("epoch %d: loss %.4f (%.1f s)" % (epoch + 1, loss.item(), time.time() - start), flush=True)
    h = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()
    print("rank %d: parameters sha256 %s" % (rank, h), flush=True)
    if rank == 0:
        tx, ty = load(a.data_dir, "t10k")
        with torch.no_grad():
            acc = (model.module(tx).argmax(1) == ty).float().mean().item()
        print("test accuracy %.4f" % acc, flush=True)
        ztrain.report_metric("accuracy", acc, step=a.epochs * steps)
    dist.barrier()  # the chief ends the job: every rank has printed first


if __name__ == "__main__":
    main()
