#!/usr/bin/env python3
"""An elastic Horovod-style PyTorch program (Fashion-MNIST, an MLP) under
ztrain: its workers' pool grows and shrinks while it trains (`ztrain scale
JOBDIR --pool 1 --replicas K`). Horovod's hvd.elastic shape: the state to
keep (model, optimizer, epoch, batch) in a TorchState, the loop in a
function wrapped by elastic.run, a commit every few steps. With --ddp the
model is a DistributedDataParallel one instead, summed through ztrain's
reducers by ztrain.torch.reducer_hook over a process group of its own
(DDP's group cannot change its size; ztrain's does).

    ztrain run examples/pytorch-elastic.json --job-dir /tmp/el &
    ztrain scale /tmp/el --pool 1 --replicas 1
"""
import argparse
import hashlib
import os

import torch
import torch.nn as nn

import ztrain.torch as hvd
from fashion_mnist import load


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch_size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.002)
    ap.add_argument("--commit_every", type=int, default=10)
    ap.add_argument("--ddp", action="store_true", help="DistributedDataParallel with ztrain's hook")
    ap.add_argument("--data_dir", default=os.environ.get("ZT_DATA_DIR", "/usr/share/datasets/fashion-mnist"))
    a = ap.parse_args()
    hvd.init()
    torch.set_num_threads(1)
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
    if a.ddp:
        hvd.elastic.local_process_group()
        model = nn.parallel.DistributedDataParallel(model)
        model.register_comm_hook(None, hvd.reducer_hook)
        optimizer = torch.optim.Adam(model.parameters(), lr=a.lr)
    else:
        optimizer = hvd.DistributedOptimizer(torch.optim.Adam(model.parameters(), lr=a.lr),
                                             named_parameters=model.named_parameters())
    x_all, y_all = load(a.data_dir, "train")
    # an epoch is the steps it takes at the size the job starts with, whatever the size is now
    steps = len(x_all) // (a.batch_size * hvd.size())
    state = hvd.elastic.TorchState(model, optimizer, epoch=0, batch=0)

    @hvd.elastic.run
    def train(state):
        while state.epoch < a.epochs:
            r, n = hvd.rank(), hvd.size()
            x, y = x_all[r::n], y_all[r::n]
            order = torch.randperm(len(x), generator=torch.Generator().manual_seed(state.epoch * 1000 + r))
            while state.batch < steps:
                at = state.batch * a.batch_size % (len(x) - a.batch_size)
                i = order[at:at + a.batch_size]
                optimizer.zero_grad()
                loss = nn.functional.cross_entropy(model(x[i]), y[i])
                loss.backward()
                optimizer.step()
                state.batch += 1
                if state.batch % a.commit_every == 0:
                    if r == 0 and state.batch % (10 * a.commit_every) == 0:
                        print("epoch %d step %d of %d: loss %.4f, %d trainers" % (
                            state.epoch + 1, state.batch, steps, loss.item(), n), flush=True)
                    state.commit()
            state.epoch, state.batch = state.epoch + 1, 0
            state.commit()

    train(state)
    h = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()
    print("rank %d: parameters sha256 %s" % (hvd.rank(), h), flush=True)
    if hvd.rank() == 0:
        tx, ty = load(a.data_dir, "t10k")
        with torch.no_grad():
            print("test accuracy %.4f" % (model(tx).argmax(1) == ty).float().mean().item(), flush=True)
    hvd.allreduce(torch.zeros(1))  # every rank has printed before the chief ends the job


if __name__ == "__main__":
    main()
