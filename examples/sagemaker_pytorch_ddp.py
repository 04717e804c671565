#!/usr/bin/env python3
"""A PyTorch DDP training script of SageMaker's shape, unchanged from what
SageMaker's PyTorch containers run: the hosts and this host from SM_HOSTS
and SM_CURRENT_HOST, the data from SM_CHANNEL_TRAINING, the model saved to
SM_MODEL_DIR, hyperparameters as --name value. The extra "shards" channel
(ShardedByS3Key, examples/sagemaker-shards) shows each host its own share
of a folder's files.

    ztrain run examples/sagemaker-pytorch-ddp.json

A failure is written to /opt/ml/output/failure (SM_OUTPUT_DIR/failure),
where SageMaker takes the job's FailureReason from."""
import argparse
import hashlib
import json
import os
import sys
import traceback

import torch
import torch.distributed as dist
import torch.nn as nn

from fashion_mnist import load


def train(a):
    if a.backend == "smddp":  # SageMaker's data-parallel library (ztrain's stand-in: its reducers)
        import smdistributed.dataparallel.torch.torch_smddp  # noqa: F401
    hosts, me = a.hosts, a.current_host
    rank, world = hosts.index(me), len(hosts)
    os.environ["WORLD_SIZE"], os.environ["RANK"] = str(world), str(rank)
    dist.init_process_group(a.backend, rank=rank, world_size=world)  # MASTER_ADDR and MASTER_PORT from the environment
    torch.set_num_threads(1)
    torch.manual_seed(1)
    if a.shards_dir:
        mine = sorted(os.path.relpath(os.path.join(r, f), a.shards_dir)
                      for r, _, fs in os.walk(a.shards_dir) for f in fs)
        print("host %s shards: %s" % (me, ",".join(mine)), flush=True)
    model = nn.parallel.DistributedDataParallel(
        nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10)))
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    x, y = load(a.data_dir, "train")
    x, y = x[rank::world], y[rank::world]
    steps = len(x) // a.batch_size
    g = torch.Generator().manual_seed(rank)
    for epoch in range(a.epochs):
        order = torch.randperm(len(x), generator=g)
        for s in range(steps):
            i = order[s * a.batch_size:(s + 1) * a.batch_size]
            opt.zero_grad()
            nn.functional.cross_entropy(model(x[i]), y[i]).backward()
            opt.step()
        print("host %s epoch %d done" % (me, epoch + 1), flush=True)
    h = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()
    print("host %s: parameters sha256 %s" % (me, h), flush=True)
    if rank == 0:
        tx, ty = load(a.data_dir, "t10k")
        with torch.no_grad():
            print("test accuracy %.4f" % (model.module(tx).argmax(1) == ty).float().mean().item(), flush=True)
        torch.save(model.module.state_dict(), os.path.join(a.model_dir, "model.pth"))
    dist.barrier()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.001)
    ap.add_argument("--backend", default="gloo")
    ap.add_argument("--hosts", type=json.loads, default=os.environ.get("SM_HOSTS", "[]"))
    ap.add_argument("--current-host", default=os.environ.get("SM_CURRENT_HOST"))
    ap.add_argument("--model-dir", default=os.environ.get("SM_MODEL_DIR"))
    ap.add_argument("--data-dir", default=os.environ.get("SM_CHANNEL_TRAINING"))
    ap.add_argument("--shards-dir", default=os.environ.get("SM_CHANNEL_SHARDS"))
    a = ap.parse_args()
    try:
        train(a)
    except Exception as e:
        with open(os.path.join(os.environ.get("SM_OUTPUT_DIR", "/opt/ml/output"), "failure"), "w") as f:
            f.write("%s: %s" % (type(e).__name__, e))
        traceback.print_exc()
        sys.exit(1)


if __name__ == "__main__":
    main()
