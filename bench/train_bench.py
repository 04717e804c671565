#!/usr/bin/env python3
"""Training benchmark: the built-in MLP on Fashion-MNIST, asynchronous
parameter-server training with 1, 2 and 4 training replicas (chief + workers)
against 2 parameter servers, synchronous training with 1, 2 and 4 replicas
through 2 reducers, and one worker alone (no servers) as the peer, all in the
same run. Prints examples/s (all replicas together) and the
seconds from RUNNING to the first checkpoint the evaluator scores >= 0.85.

    python3 bench/train_bench.py [build/bin] [--epochs N]
"""
import benchargs  # bench/ is the script's own folder, first on sys.path
benchargs.check(__doc__, ('--epochs',), (), 1)
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from datetime import datetime

BIN = next((a for a in sys.argv[1:] if not a.startswith("--")), "build/bin")
EPOCHS = 3
if "--epochs" in sys.argv:
    EPOCHS = int(sys.argv[sys.argv.index("--epochs") + 1])
ARGS = ["--hidden=256,128", "--epochs=%d" % EPOCHS, "--batch_size=64", "--learning_rate=0.001",
        "--checkpoint_steps=100", "--log_every=100"]


def pool(image, n, args=None):
    p = {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": n,
         "containerSpec": {"imageUri": image}}
    if args:
        p["containerSpec"]["args"] = args
    return p


def iso(t):
    return datetime.strptime(t, "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()


def run(name, replicas, servers, reducers=0):
    pools = [pool("ztrain-worker", 1, ARGS),
             pool("ztrain-worker", replicas - 1, ARGS) if replicas > 1 else {},
             pool("ztrain-paramserver", servers) if servers else
             (pool("ztrain-reducer", reducers) if reducers else {}),
             pool("ztrain-evaluator", 1)]
    d = tempfile.mkdtemp(prefix="ztrain-bench-")
    spec = os.path.join(d, "job.json")
    json.dump({"displayName": name, "jobSpec": {"workerPoolSpecs": pools}}, open(spec, "w"))
    t0 = time.monotonic()
    r = subprocess.run([os.path.join(BIN, "ztrain"), "run", spec, "--job-dir", os.path.join(d, "job")],
                       capture_output=True, text=True)  # info level: the trainers' examples/s lines
    wall = time.monotonic() - t0
    job = json.load(open(os.path.join(d, "job", "job.json")))
    if r.returncode != 0:
        print(name, "FAILED", job.get("error"))
        return None
    running = iso([t for t in job["transitions"] if t["state"] == "RUNNING"][0]["time"])
    hit = [e for e in job["evaluations"] if e["name"] == "eval_accuracy" and e["value"] >= 0.85]
    t85 = min(iso(e["time"]) for e in hit) - running if hit else float("nan")
    eps = 0.0
    for rep in range(replicas):
        log = os.path.join(d, "job", "replica-logs", "workerpool%d-%d.log" % ((0, 0) if rep == 0 else (1, rep - 1)))
        rates = [float(x) for x in re.findall(r"examples/s (\d+)", open(log).read())]
        if rates:
            eps += sum(rates) / len(rates)
    acc = job["metrics"]["workerpool0-0"]["accuracy"]["value"]
    return eps, t85, acc, wall


def main():
    print("Fashion-MNIST MLP 784-256-128-10, Adam 0.001, batch 64, %d epochs over the data;" % EPOCHS)
    print("every run has an evaluator scoring each 100-step checkpoint. 2 cores.\n")
    print("%-34s %12s %14s %10s %8s" % ("configuration", "examples/s", "s to 0.85", "final acc", "wall s"))
    base = None
    for name, reps, servers, reducers in (("1 worker alone (no servers)", 1, 0, 0),
                                          ("async, 1 worker + 2 PS", 1, 2, 0),
                                          ("async, 2 workers + 2 PS", 2, 2, 0),
                                          ("async, 4 workers + 2 PS", 4, 2, 0),
                                          ("sync, 1 worker + 2 reducers", 1, 0, 2),
                                          ("sync, 2 workers + 2 reducers", 2, 0, 2),
                                          ("sync, 4 workers + 2 reducers", 4, 0, 2)):
        res = run(name.split(",")[0].replace(" ", "-"), reps, servers, reducers)
        if not res:
            continue
        eps, t85, acc, wall = res
        if base is None:
            base = eps
        print("%-34s %12.0f %14.1f %10.4f %8.1f   (%.2fx the lone worker's examples/s)" %
              (name, eps, t85, acc, wall, eps / base))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
