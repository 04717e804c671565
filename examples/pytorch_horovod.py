#!/usr/bin/env python3
"""A Horovod PyTorch program (Fashion-MNIST, an MLP) run under ztrain: the
only change from Horovod is the import line. Gradients go through the job's
reducers (or a ring between the trainers when it has none).

    ztrain run examples/pytorch-horovod.json
"""
import argparse
import hashlib
import os

import torch
import torch.nn as nn

import ztrain.torch as hvd  # was: import horovod.torch as hvd
from fashion_mnist import load


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch_size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.001)
    ap.add_argument("--data_dir", default=os.environ.get("ZT_DATA_DIR", "/usr/share/datasets/fashion-mnist"))
    a = ap.parse_args()
    hvd.init()
    torch.set_num_threads(1)
    torch.manual_seed(hvd.rank())  # different on every rank: broadcast_parameters makes them equal
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
    optimizer = torch.optim.Adam(model.parameters(), lr=a.lr * hvd.size())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    x, y = load(a.data_dir, "train")
    x, y = x[hvd.rank()::hvd.size()], y[hvd.rank()::hvd.size()]
    g = torch.Generator().manual_seed(hvd.rank())
    for epoch in range(a.epochs):
        order = torch.randperm(len(x), generator=g)
        for s in range(len(x) // a.batch_size):
            i = order[s * a.batch_size:(s + 1) * a.batch_size]
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x[i]), y[i])
            loss.backward()
            optimizer.step()
        print("epoch %d: loss %.4f" % (epoch + 1, loss.item()), flush=True)
    h = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()
    print("rank %d: parameters sha256 %s" % (hvd.rank(), h), flush=True)
    if hvd.rank() == 0:
        tx, ty = load(a.data_dir, "t10k")
        with torch.no_grad():
            print("test accuracy %.4f" % (model(tx).argmax(1) == ty).float().mean().item(), flush=True)
    hvd.allreduce(torch.zeros(1))  # every rank has printed before the chief ends the job


if __name__ == "__main__":
    main()
