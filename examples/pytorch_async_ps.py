#!/usr/bin/env python3
"""A PyTorch program (Fashion-MNIST, the same MLP as pytorch_ddp.py) trained
asynchronously against the job's parameter servers: each worker pushes its
gradients and pulls fresh values at every step, without waiting for the
others. The chief checkpoints the servers' model in ztrain's format, and the
job's evaluator scores each checkpoint as it is announced.

    ztrain run examples/pytorch-async-ps.json
"""
import argparse
import os
import time

import torch
import torch.nn as nn

import ztrain
import ztrain.torch
from fashion_mnist import load


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch_size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.001)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--checkpoint_steps", type=int, default=200)
    ap.add_argument("--data_dir", default=os.environ.get("ZT_DATA_DIR", "/usr/share/datasets/fashion-mnist"))
    a = ap.parse_args()
    torch.set_num_threads(1)
    job = ztrain.init()
    model = nn.Sequential(nn.Linear(784, a.hidden), nn.ReLU(), nn.Linear(a.hidden, 128), nn.ReLU(),
                          nn.Linear(128, 10))
    opt = ztrain.torch.ParameterServerOptimizer(model, optimizer="adam", lr=a.lr,
                                                checkpoint_steps=a.checkpoint_steps)
    x, y = load(a.data_dir, "train")
    x, y = x[job.rank::job.size], y[job.rank::job.size]
    steps = len(x) // a.batch_size
    total = a.epochs * steps
    if opt.resumed_step:
        print("resuming at step %d of %d" % (opt.resumed_step, total), flush=True)
    g = torch.Generator().manual_seed(job.rank)
    start = time.time()
    while opt.steps < total:
        epoch, s = divmod(opt.steps, steps)
        order = torch.randperm(len(x), generator=g)
        for s in range(s, steps):
            i = order[s * a.batch_size:(s + 1) * a.batch_size]
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x[i]), y[i])
            loss.backward()
            opt.step()
        print("epoch %d: loss %.4f (%.1f s)" % (epoch + 1, loss.item(), time.time() - start), flush=True)
    if job.rank == 0:
        tx, ty = load(a.data_dir, "t10k")
        with torch.no_grad():
            acc = (model(tx).argmax(1) == ty).float().mean().item()
        print("test accuracy %.4f" % acc, flush=True)
        print("final model %s" % opt.checkpoint(final=True), flush=True)
        ztrain.report_metric("accuracy", acc, step=opt.steps)


if __name__ == "__main__":
    main()
