#!/usr/bin/env python3
"""PyTorch benchmark: one MLP (about 20M parameters with the default width)
trained by 4 trainer processes under `ztrain run`, in the same run:
  - each trainer alone (no communication: the compute under the same load),
  - DDP over gloo (the peer),
  - DDP with ztrain.torch.reducer_hook through 2 and through 4 reducers,
  - the Horovod-style DistributedOptimizer through 2 reducers.
  - the all-reduce alone: gloo's dist.all_reduce and ztrain.allreduce,
    and beside them the limit: bench/lean_ar (a minimal plain-TCP reduction
    server written for the benchmark, no library, no security, no
    recovery) with the same trainers, reducers and size.
Prints seconds per step (median), the communication per step (the step
less the compute alone), each one's ratio against gloo, and how busy the
machine's CPUs were over the timed steps; then the CPU-seconds per GB
all-reduced, of the 4 trainers and of the whole job (every process on the
machine over rank 0's timed steps), each less the compute alone's, against
gloo's.

ztrain's bytes are authenticated and encrypted as a job has them (CURVE on
the control sockets, AES-GCM on the bulk ones) unless ZT_SECURITY=off is
set for the run; gloo's neither authenticates nor encrypts, so
ZT_SECURITY=off is the like-for-like comparison of the data planes and the
default shows what security costs on top.

With --slurm (root), every trainer and reducer is a host of its own: a real
Slurm cluster on network namespaces (scripts/slurm_cluster.py) with every
link limited to RATE both ways (tc tbf, as bench/netns_bench.py), the jobs
submitted with `ztrain run --backend slurm`.

    python3 bench/torch_bench.py [build/bin] [--python PY] [--width N] [--steps N]
                                 [--slurm] [--rate 1gbit] [--queue 20ms] [--only MODES]
                                 [--ar-mib M] [--ar-reducers R] [--tcp] [--repeat N]

--only runs a subset (comma-separated modes: gloo, hook, hvd, ar-gloo,
ar-ztrain, ar-lean, ar-lean-sealed; the compute alone runs unless every
mode named is an ar- one; ar-lean runs with ar-ztrain, on one machine,
unless --only omits it while naming others, and so does ar-lean-sealed
when ztrain's security is on: lean_ar --seal, the same server with
the seal's cipher (ZT_SEAL_CIPHER) on every byte both ways, the limit of
a sealed one).
--ar-mib sets the all-reduce alone's size (default: the model's gradients),
--ar-reducers its reducers (default 4). --tcp sends ztrain's bulk bytes over
TCP on one machine too (ZT_DATA_IPC=off ZT_SHM=off), as between hosts. The
all-reduce of 16 MiB by 4 trainers through 2 reducers, over TCP:

    python3 bench/torch_bench.py build/bin --only ar-gloo,ar-ztrain --ar-mib 16 \
        --ar-reducers 2 --steps 48 --tcp

--repeat runs every case N times, the cases taking turns (so that a busy
spell of a shared machine falls on all of them), and prints the median of
each figure; then, for each case against its peer, the ratios of the CPU
per GB taken round by round (each against the peer's of the same round):
their median and their range.

PY must import ztrain and torch (a venv made by `pip install ./python`
with --system-site-packages on Debian's python3-torch). Without --python,
such a venv is made for the run (with the build's libztrain.so) and
removed after it."""
import benchargs  # bench/ is the script's own folder, first on sys.path
VALUED = ("--python", "--width", "--steps", "--rate", "--queue", "--only", "--ar-mib", "--ar-reducers", "--repeat")
benchargs.check(__doc__, VALUED, ("--slurm", "--tcp"), 1)
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = next((a for i, a in enumerate(sys.argv[1:], 1)
            if not a.startswith("--") and sys.argv[i - 1] not in VALUED),
           "build/bin")


def opt(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


PY, WIDTH, STEPS = opt("--python", None), int(opt("--width", "4096")), int(opt("--steps", "6"))
RATE, QUEUE = opt("--rate", "1gbit"), opt("--queue", "20ms")
AR_NUMEL = int(float(opt("--ar-mib", "0")) * (1 << 20)) // 4  # float32 elements; 0: the model's
AR_REDUCERS = int(opt("--ar-reducers", "4"))
REPEAT = max(int(opt("--repeat", "1")), 1)
REDUCTION_SERVER = "us-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest"
CLUSTER, SCRATCH = None, None  # --slurm: the cluster and a folder every host sees


def run(mode, reducers):
    cmd = {"imageUri": "local", "command": [PY, os.path.join(HERE, "torch_bench_worker.py"), mode,
                                            str(WIDTH), str(STEPS), str(AR_NUMEL)]}
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
        if "--tcp" in sys.argv:  # as between hosts: no ipc sockets, no shared memory
            env.update(ZT_DATA_IPC="off", ZT_SHM="off")
        if CLUSTER:
            argv = CLUSTER.argv("ctl", argv + ["--backend", "slurm"])
        r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)
    out = r.stdout + r.stderr
    m = re.search(r"bench: params (\d+) step_s ([0-9.]+) cpu_busy ([0-9.]+) machine_cpu_s ([0-9.]+)", out)
    ranks = {int(k): float(v) for k, v in re.findall(r"bench: rank (\d+) cpu_s ([0-9.]+)", out)}
    # the compute alone has no barrier at its end: the job stops the other
    # trainers once the chief is done, maybe before they print; each
    # computes the same, so their CPU is 4 times the mean of those printed
    if r.returncode != 0 or not m or not ranks or (mode != "local" and len(ranks) != 4):
        sys.exit("%s: the job failed (exit %d):\n%s" % (mode, r.returncode, out[-3000:]))
    trainers = sum(ranks.values()) * 4 / len(ranks)
    return int(m.group(1)), float(m.group(2)), float(m.group(3)), trainers, float(m.group(4))


def run_lean(reducers, seal=False):
    """bench/lean_ar's all-reduce: 4 workers, the reducers and size of
    ar-ztrain, STEPS timed rounds (sealed with seal); shaped as run()'s
    result."""
    lean = os.path.realpath(os.path.join(BIN, "..", "bench", "lean_ar"))
    numel = AR_NUMEL or by_model_numel()
    r = subprocess.run([lean, "--workers", "4", "--reducers", str(reducers), "--bytes", str(numel * 4),
                        "--iters", str(max(STEPS, 5))] + (["--seal"] if seal else []),
                       capture_output=True, text=True, timeout=600)
    m = re.search(r"ms ([0-9.]+) workers_cpu_s_per_gb ([0-9.]+) job_cpu_s_per_gb ([0-9.]+)", r.stdout)
    if r.returncode != 0 or not m:
        sys.exit("lean_ar failed (exit %d): %s" % (r.returncode, (r.stdout + r.stderr)[-2000:]))
    gb = numel * 4 * STEPS / 1e9
    return numel, float(m.group(1)) / 1e3, float("nan"), float(m.group(2)) * gb, float(m.group(3)) * gb


def by_model_numel():
    """The default model's parameters (the all-reduce alone's size when
    --ar-mib is not given), as the trainers print them."""
    return run("local", 0)[0]


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
             ("all-reduce alone: gloo", "ar-gloo", 0),
             ("all-reduce alone: ztrain, %d reducers" % AR_REDUCERS, "ar-ztrain", AR_REDUCERS),
             ("all-reduce alone: lean_ar, %d reducers" % AR_REDUCERS, "ar-lean", AR_REDUCERS),
             ("all-reduce alone: lean_ar --seal, %d r." % AR_REDUCERS, "ar-lean-sealed", AR_REDUCERS)]
    only = opt("--only", None)
    sealing = os.environ.get("ZT_SECURITY") != "off"
    if CLUSTER:  # the lean reference runs on one machine only
        cases = [c for c in cases if not c[1].startswith("ar-lean")]
    if not sealing:
        cases = [c for c in cases if c[1] != "ar-lean-sealed"]
    if only:
        named = only.split(",")
        for lean_mode in ("ar-lean", "ar-lean-sealed"):
            if "ar-ztrain" in named and lean_mode not in named:
                named.append(lean_mode)
        keep_local = any(not m.startswith("ar-") for m in named)
        cases = [c for c in cases if c[1] in named or (c[1] == "local" and keep_local)]
    rounds = []
    for _ in range(REPEAT):  # the cases take turns
        rounds.append({label: run_lean(reducers, mode == "ar-lean-sealed") if mode.startswith("ar-lean")
                       else run(mode, reducers) for label, mode, reducers in cases})
    res = {label: tuple(median([r[label][i] for r in rounds]) for i in range(5)) for label, _, _ in cases}
    by_mode = {m: res[l] for l, m, _ in cases}
    params = by_mode["local"][0] if "local" in by_mode else 0
    compute = by_mode["local"][1] if "local" in by_mode else 0.0
    security = "plain (ZT_SECURITY=off)" if os.environ.get("ZT_SECURITY") == "off" else "security on"
    print("4 trainers, %d timed steps, %s%s, ztrain's sockets %s%s" % (
        STEPS, where, ", ztrain's bulk over TCP" if "--tcp" in sys.argv else "", security,
        ", the median of %d rounds" % REPEAT if REPEAT > 1 else ""))
    if params:
        print("the model: an MLP of %d parameters (%.0f MB of float32 gradients)" % (params, params * 4 / 1e6))
    lean = by_mode.get("ar-lean", (0, None))[1]
    print("%-38s %10s %12s %10s %10s %9s %10s" % ("", "s/step", "comm s/step", "step/gloo", "comm/gloo", "CPU busy",
                                                  "/ lean"))
    for label, mode, _ in cases:
        s, busy = res[label][1], "%8.0f%%" % (100 * res[label][2]) if res[label][2] == res[label][2] else "-"
        raw = mode.startswith("ar-")  # no model: the step is all communication
        peer = by_mode.get("ar-gloo" if raw else "gloo", (0, None))[1]
        comm, peer_comm = (s, peer) if raw else (max(s - compute, 0.0), max((peer or 0) - compute, 1e-9))
        to_lean = "%10.2f" % (s / lean) if raw and lean and not mode.startswith("ar-lean") else ""
        if mode == "local" or not peer:
            print("%-38s %10.3f %12.3f %10s %10s %9s %s" % (label, s, comm, "", "", busy, to_lean))
        else:
            print("%-38s %10.3f %12.3f %10.2f %10.2f %9s %s" % (label, s, comm, s / peer, comm / peer_comm, busy,
                                                              to_lean))
    print("CPU busy: the machine's %d cores over the timed steps (every host of a namespace cluster "
          "shares them)" % os.cpu_count())
    if "gloo" in by_mode and "local" in by_mode:
        gloo = by_mode["gloo"][1]
        print("communication's share of gloo's step: %.0f%%" % (100 * max(gloo - compute, 0) / gloo))
    cpu_table(cases, res, by_mode)
    if REPEAT > 1:
        round_ratios(cases, rounds)
    return 0


def median(xs):
    xs = sorted(x for x in xs if x == x) or [float("nan")]
    return (xs[(len(xs) - 1) // 2] + xs[len(xs) // 2]) / 2


def round_ratios(cases, rounds):
    """Each case's CPU per GB against its peer's of the same round (gloo's,
    and lean_ar's for the all-reduce alone): the median and the range."""
    by = lambda r, mode: next((r[l] for l, m, _ in cases if m == mode), None)
    print("\nround by round, CPU per GB against the same round's (median, lowest-highest of %d rounds)" % len(rounds))
    for label, mode, _ in cases:
        if mode in ("local", "gloo", "ar-gloo", "ar-lean", "ar-lean-sealed"):
            continue
        for peer_mode in (("ar-gloo", "ar-lean", "ar-lean-sealed") if mode.startswith("ar-") else ("gloo",)):
            ratios = [[], []]
            for r in rounds:
                peer, me, local = by(r, peer_mode), r[label], by(r, "local")
                if not peer:
                    continue
                pn, mn = peer[0] * 4 * STEPS, me[0] * 4 * STEPS
                for i, k in enumerate((3, 4)):
                    less = local[k] if local and not mode.startswith("ar-") else 0.0
                    peer_less = local[k] if local and not peer_mode.startswith("ar-") else 0.0
                    ratios[i].append(max(me[k] - less, 0.0) / mn / max(max(peer[k] - peer_less, 0.0) / pn, 1e-12))
            if ratios[0]:
                print("%-38s / %-11s trainers %.2f (%.2f-%.2f)  whole job %.2f (%.2f-%.2f)" % (
                    label, peer_mode.replace("ar-", "").replace("lean-sealed", "lean --seal"), median(ratios[0]), min(ratios[0]), max(ratios[0]),
                    median(ratios[1]), min(ratios[1]), max(ratios[1])))


def cpu_table(cases, res, by_mode):
    """CPU-seconds per GB all-reduced, of the trainers and of the whole job,
    less the compute alone's (scaled to the same steps), against gloo's."""
    local = by_mode.get("local")
    print("\nCPU-seconds per GB all-reduced (less the compute alone's; the job: every process on the machine)")
    print("%-38s %10s %10s %12s %10s %10s %10s" % ("", "trainers", "/ gloo's", "whole job", "/ gloo's",
                                                  "trainers", "whole job"))
    print("%-38s %10s %10s %12s %10s %10s %10s" % ("", "", "", "", "", "/ lean's", "/ lean's"))
    per_gb = {}
    lean = None
    if "ar-lean" in by_mode:
        n, _, _, trainers, job = by_mode["ar-lean"]
        lean = (trainers / (n * 4 * STEPS / 1e9), job / (n * 4 * STEPS / 1e9))
    for label, mode, _ in cases:
        if mode == "local":
            continue
        n, _, _, trainers, job = res[label]
        if not mode.startswith("ar-") and local:
            trainers, job = max(trainers - local[3], 0.0), max(job - local[4], 0.0)
        gb = n * 4 * STEPS / 1e9
        per_gb[mode] = (trainers / gb, job / gb)
        peer = per_gb.get("ar-gloo" if mode.startswith("ar-") else "gloo")
        to_lean = ("%10.2f %10.2f" % (trainers / gb / max(lean[0], 1e-9), job / gb / max(lean[1], 1e-9))
                   if lean and mode.startswith("ar-") and mode != "ar-lean" else "")
        if peer and mode not in ("gloo", "ar-gloo"):
            print("%-38s %10.3f %10.2f %12.3f %10.2f %s" % (label, trainers / gb, trainers / gb / max(peer[0], 1e-9),
                                                            job / gb, job / gb / max(peer[1], 1e-9), to_lean))
        else:
            print("%-38s %10.3f %10s %12.3f %10s %s" % (label, trainers / gb, "", job / gb, "", to_lean))


if __name__ == "__main__":
    sys.exit(main())
