#!/usr/bin/env python3
"""PyTorch benchmark: one MLP (about 20M parameters with the default width)
trained by 4 trainer processes under `ztrain run`, in the same run:
  - each trainer alone (no communication: the compute under the same load),
  - DDP over gloo (the peer),
  - DDP with ztrain.torch.reducer_hook through 2 and through 4 reducers,
  - the Horovod-style DistributedOptimizer through 2 reducers.
Prints seconds per step (median), the communication per step (the step
less the compute alone), each one's ratio against gloo, and how busy the
machine's CPUs were over the timed steps.

Every socket of ztrain's is authenticated and encrypted (CURVE) unless
ZT_SECURITY=off is set for the run; gloo's neither authenticates nor
encrypts, so ZT_SECURITY=off is the like-for-like comparison of the data
planes and the default shows what security costs on top.

With --slurm (root), every trainer and reducer is a host of its own: a real
Slurm cluster on network namespaces (scripts/slurm_cluster.py) with every
link limited to RATE both ways (tc tbf, as bench/netns_bench.py), the jobs
submitted with `ztrain run --backend slurm`.

    python3 bench/torch_bench.py [build/bin] [--python PY] [--width N] [--steps N]
                                 [--slurm] [--rate 1gbit] [--queue 20ms] [--only MODES]

--only runs a subset (comma-separated modes: gloo, hook, hvd, ar-gloo,
ar-ztrain; the compute alone always runs).

PY must import ztrain and torch (a venv made by `pip install ./python`
with --system-site-packages on Debian's python3-torch). Without --python,
such a venv is made for the run (with the build's libztrain.so) and
removed after it."""
import benchargs  # bench/ is the script's own folder, first on sys.path
benchargs.check(__doc__, ("--python", "--width", "--steps", "--rate", "--queue", "--only"), ("--slurm",), 1)
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = next((a for i, a in enumerate(sys.argv[1:], 1)
            if not a.startswith("--") and sys.argv[i - 1] not in ("--python", "--width", "--steps", "--rate", "--queue", "--only")),
           "build/bin")


def opt(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


PY, WIDTH, STEPS = opt("--python", None), int(opt("--width", "4096")), int(opt("--steps", "6"))
RATE, QUEUE = opt("--rate", "1gbit"), opt("--queue", "20ms")
REDUCTION_SERVER = "us-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest"
CLUSTER, SCRATCH = None, None  # --slurm: the cluster and a folder every host sees


def run(mode, reducers):
    cmd = {"imageUri": "local", "command": [PY, os.path.join(HERE, "torch_bench_worker.py"), mode,
                                            str(WIDTH), str(STEPS)]}
    # on the cluster, every replica a whole node of 8 vCPUs: one per host, each with its own link
    machine = "n1-standard-8" if CLUSTER else "n1-standard-4"
    p = lambda n, c: {"machineSpec": {"machineType": machine}, "replicaCount": n, "containerSpec": c}
    pools = [p(1, cmd), p(3, cmd)] + ([p(reducers, {"imageUri": REDUCTION_SERVER})] if reducers else [])
    with tempfile.TemporaryDirectory(dir=SCRATCH) as d:
        spec = os.path.join(d, "job.json")
        with open(spec, "w") as f:
            json.dump({"displayName": "torch-bench", "jobSpec": {"workerPoolSpecs": pools}}, f)
        argv = [os.path.realpath(os.path.join(BIN, "ztrain")), "run", spec, "--job-dir", os.path.join(d, "job")]
        env = dict(CLUSTER.env() if CLUSTER else os.environ)
        if "ZT_SECURITY" in os.environ:  # off: plain sockets, as gloo's (which neither authenticates nor encrypts)
            env["ZT_SECURITY"] = os.environ["ZT_SECURITY"]
        if CLUSTER:
            argv = CLUSTER.argv("ctl", argv + ["--backend", "slurm"])
        r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)
    m = re.search(r"bench: params (\d+) step_s ([0-9.]+) cpu_busy ([0-9.]+)", r.stdout + r.stderr)
    if r.returncode != 0 or not m:
        sys.exit("%s: the job failed (exit %d):\n%s" % (mode, r.returncode, (r.stdout + r.stderr)[-3000:]))
    return int(m.group(1)), float(m.group(2)), float(m.group(3))


def venv():
    """A venv of Debian's python3 with ztrain installed, removed at exit."""
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
    import atexit
    import shutil
    import pyvenv
    if not pyvenv.has_torch():
        sys.exit("torch_bench: %s has no torch (Debian's python3-torch)" % pyvenv.DEBIAN_PYTHON)
    py, d = pyvenv.make(library=os.path.realpath(os.path.join(BIN, "..", "lib", "libztrain.so")))
    atexit.register(shutil.rmtree, d, True)
    return py


def main():
    global CLUSTER, SCRATCH, PY
    PY = PY or venv()
    where = "loopback"
    if "--slurm" in sys.argv:
        if os.geteuid() != 0:
            print("torch_bench --slurm needs root (network namespaces, tc)")
            return 2
        import netns_cluster
        venv_dir = os.path.dirname(os.path.dirname(os.path.abspath(PY))) if os.sep in PY else None
        shared = [os.path.join(HERE, ".."), os.path.join(BIN, "..")] + ([venv_dir] if venv_dir else [])
        CLUSTER, SCRATCH = netns_cluster.start(8, RATE, QUEUE, shared=shared)
        if not CLUSTER:
            print("torch_bench --slurm: %s" % SCRATCH)
            return 2
        where = "every trainer and reducer a Slurm host of its own, links %s both ways (tc tbf, %s queue)" % (
            RATE, QUEUE)
    cases = [("alone (no communication)", "local", 0), ("DDP over gloo", "gloo", 0),
             ("DDP + ztrain hook, 2 reducers", "hook", 2), ("DDP + ztrain hook, 4 reducers", "hook", 4),
             ("Horovod-style optimizer, 2 reducers", "hvd", 2),
             ("all-reduce alone: gloo", "ar-gloo", 0), ("all-reduce alone: ztrain, 4 reducers", "ar-ztrain", 4)]
    only = opt("--only", None)
    if only:
        cases = [c for c in cases if c[1] in only.split(",") or c[1] == "local"]
    res = {}
    for label, mode, reducers in cases:
        res[label] = run(mode, reducers)
    by_mode = {m: res[l][1] for l, m, _ in cases}
    params, compute = res[cases[0][0]][0], by_mode["local"]
    print("4 trainers, MLP of %d parameters (%.0f MB of float32 gradients), %d timed steps, %s, ztrain's "
          "sockets %s" % (params, params * 4 / 1e6, STEPS, where, "plain (ZT_SECURITY=off)"
                          if os.environ.get("ZT_SECURITY") == "off" else "CURVE"))
    print("%-38s %10s %12s %10s %10s %9s" % ("", "s/step", "comm s/step", "step/gloo", "comm/gloo", "CPU busy"))
    for label, mode, _ in cases:
        s, busy = res[label][1], "%8.0f%%" % (100 * res[label][2])
        raw = mode.startswith("ar-")  # no model: the step is all communication
        peer = by_mode.get("ar-gloo" if raw else "gloo")
        comm, peer_comm = (s, peer) if raw else (max(s - compute, 0.0), max((peer or 0) - compute, 1e-9))
        if mode == "local" or not peer:
            print("%-38s %10.3f %12.3f %10s %10s %s" % (label, s, comm, "", "", busy))
        else:
            print("%-38s %10.3f %12.3f %10.2f %10.2f %s" % (label, s, comm, s / peer, comm / peer_comm, busy))
    print("CPU busy: the machine's %d cores over the timed steps (every host of a namespace cluster "
          "shares them)" % os.cpu_count())
    if "gloo" in by_mode:
        gloo = by_mode["gloo"]
        print("communication's share of gloo's step: %.0f%%" % (100 * max(gloo - compute, 0) / gloo))
    return 0

if __name__ == "__main__":
    sys.exit(main())
