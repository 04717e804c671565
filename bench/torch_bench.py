#!/usr/bin/env python3
"""PyTorch benchmark: one MLP (about 20M parameters with the default width)
trained by 4 trainer processes under `ztrain run`, in the same run:
  - each trainer alone (no communication: the compute under the same load),
  - DDP over gloo (the peer),
  - DDP with ztrain.torch.reducer_hook through 2 and through 4 reducers,
  - the Horovod-style DistributedOptimizer through 2 reducers.
Prints seconds per step (median), the communication per step (the step
less the compute alone) and each one's ratio against gloo.

    python3 bench/torch_bench.py [build/bin] [--python PY] [--width N] [--steps N]

PY must import ztrain and torch (a venv made by `pip install ./python`
with --system-site-packages on Debian's python3-torch)."""
import benchargs  # bench/ is the script's own folder, first on sys.path
benchargs.check(__doc__, ("--python", "--width", "--steps"), (), 1)
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = next((a for i, a in enumerate(sys.argv[1:], 1)
            if not a.startswith("--") and sys.argv[i - 1] not in ("--python", "--width", "--steps")), "build/bin")


def opt(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


PY, WIDTH, STEPS = opt("--python", "python3"), int(opt("--width", "4096")), int(opt("--steps", "6"))
REDUCTION_SERVER = "us-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest"


def run(mode, reducers):
    cmd = {"imageUri": "local", "command": [PY, os.path.join(HERE, "torch_bench_worker.py"), mode,
                                            str(WIDTH), str(STEPS)]}
    p = lambda n, c: {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": n, "containerSpec": c}
    pools = [p(1, cmd), p(3, cmd)] + ([p(reducers, {"imageUri": REDUCTION_SERVER})] if reducers else [])
    with tempfile.TemporaryDirectory() as d:
        spec = os.path.join(d, "job.json")
        with open(spec, "w") as f:
            json.dump({"displayName": "torch-bench", "jobSpec": {"workerPoolSpecs": pools}}, f)
        r = subprocess.run([os.path.join(BIN, "ztrain"), "run", spec, "--job-dir", os.path.join(d, "job")],
                           capture_output=True, text=True, timeout=900)
    m = re.search(r"bench: params (\d+) step_s ([0-9.]+)", r.stdout + r.stderr)
    if r.returncode != 0 or not m:
        sys.exit("%s: the job failed (exit %d):\n%s" % (mode, r.returncode, (r.stdout + r.stderr)[-3000:]))
    return int(m.group(1)), float(m.group(2))


def main():
    cases = [("alone (no communication)", "local", 0), ("DDP over gloo", "gloo", 0),
             ("DDP + ztrain hook, 2 reducers", "hook", 2), ("DDP + ztrain hook, 4 reducers", "hook", 4),
             ("Horovod-style optimizer, 2 reducers", "hvd", 2)]
    res = {}
    for label, mode, reducers in cases:
        res[label] = run(mode, reducers)
    params, compute = res[cases[0][0]]
    gloo = res[cases[1][0]][1]
    print("4 trainers, MLP of %d parameters (%.0f MB of float32 gradients), %d timed steps, loopback"
          % (params, params * 4 / 1e6, STEPS))
    print("%-38s %10s %12s %10s %10s" % ("", "s/step", "comm s/step", "step/gloo", "comm/gloo"))
    for label, _, _ in cases:
        s = res[label][1]
        comm = max(s - compute, 0.0)
        g = max(gloo - compute, 1e-9)
        print("%-38s %10.3f %12.3f %10.2f %10.2f" % (label, s, comm, s / gloo, comm / g if label != cases[0][0] else 0))
    print("communication's share of gloo's step: %.0f%%" % (100 * max(gloo - compute, 0) / gloo))


if __name__ == "__main__":
    main()
