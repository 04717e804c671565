#!/usr/bin/env python3
"""How fast a large job starts, and what an idle replica costs: a job of
N replicas (the primary a placeholder that runs --run-seconds, the other
N-1 `ztrain-worker --idle`) from `ztrain run` to RUNNING (every replica
registered), each replica's resident memory (RSS) while idle, and whether
the job ends SUCCEEDED with no replica killed for a missed heartbeat. With
--training K, K of the replicas train instead (the built-in trainer, async,
for --epochs, against 2 parameter servers), and the rest idle in the
evaluator pool. The
peer, measured in the same run: the same N processes of the same binary
started and waited for by a plain spawner (`ztrain-worker --help`: exec,
run, exit, without a job to join), the floor that process creation
itself sets. Prints seconds, the ratio, and the RSS median and max. With
--jobs J, J such jobs start at once (each run): every one must end
SUCCEEDED with no heartbeat kill, and no two may share a port.

    python3 bench/launch_bench.py [build] [--replicas 256] [--runs 3] [--run-seconds 10]
                                  [--training K] [--epochs 1] [--jobs 1]
"""
import benchargs  # bench/ is the script's own folder, first on sys.path
benchargs.check(__doc__, ('--replicas', '--runs', '--run-seconds', '--training', '--epochs', '--jobs'), (), 1)
import datetime  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

args = sys.argv[1:]


def opt(name, default):
    return int(args[args.index(name) + 1]) if name in args else default


pos = [a for i, a in enumerate(args) if not a.startswith("--") and (i == 0 or not args[i - 1].startswith("--"))]
BUILD = os.path.abspath(pos[0] if pos else os.path.join(os.path.dirname(__file__), "..", "build"))
BIN = os.path.join(BUILD, "bin")
N, RUNS, SECONDS = opt("--replicas", 256), opt("--runs", 3), opt("--run-seconds", 10)
TRAINING, EPOCHS, JOBS = opt("--training", 0), opt("--epochs", 1), opt("--jobs", 1)


def rss_kb(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            return int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1))
    except (OSError, AttributeError):
        return None


def pool(n, image, args=()):
    return {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": n,
            "containerSpec": {"imageUri": image, "args": list(args)}}


def pools():
    if not TRAINING:
        return [pool(1, "ztrain-worker", ["--run-seconds=%d" % SECONDS]), pool(N - 1, "ztrain-worker", ["--idle"])]
    train = ["--hidden=64", "--epochs=%d" % EPOCHS, "--batch_size=64", "--log_every=1000", "--optimizer=adam"]
    return [pool(1, "ztrain-worker", train), pool(TRAINING - 1, "ztrain-worker", train),
            pool(2, "ztrain-paramserver"), pool(N - TRAINING - 2, "ztrain-worker", ["--idle"])]


def one_job(d):
    spec = os.path.join(d, "job.json")
    with open(spec, "w") as f:
        json.dump({"displayName": "launch", "jobSpec": {"workerPoolSpecs": pools()}}, f)
    job_dir = os.path.join(d, "job")
    env = dict(os.environ, ZT_MAX_REPLICAS=str(max(N, 256)))
    log = open(os.path.join(d, "ztrain.err"), "w+")  # a file: a pipe nobody reads would fill up
    p = subprocess.Popen([os.path.join(BIN, "ztrain"), "run", spec, "--job-dir", job_dir],
                         stdout=subprocess.DEVNULL, stderr=log, text=True, env=env)
    seen, rss = False, []
    while p.poll() is None:
        try:
            with open(os.path.join(job_dir, "job.json")) as f:
                job = json.load(f)
        except (OSError, ValueError):
            job = {}
        if not seen and job.get("state") == "RUNNING":
            seen = True
            time.sleep(1)
            idle = job["replicas"][TRAINING + 2 if TRAINING else 1:]
            rss = [k for k in (rss_kb(r["pid"]) for r in idle if r.get("pid")) if k]
        time.sleep(0.02)
    log.seek(0)
    err = log.read()
    log.close()
    with open(os.path.join(job_dir, "job.json")) as f:
        job = json.load(f)
    kills = err.count("sent no heartbeat")
    starts = re.findall(r"^(\S+) I coordinator\S*: workerpool\d-\d+: started pid", err, re.M)
    span = stamp(starts[-1]) - stamp(starts[0]) if starts else None
    # from QUEUED (written as `ztrain run` starts) to RUNNING, by the job's own clock
    at = {t["state"]: t["time"] for t in job["transitions"]}
    running = stamp(at["RUNNING"]) - stamp(at["QUEUED"]) if "RUNNING" in at and "QUEUED" in at else None
    ports = [r["address"] for r in job["replicas"]]
    return running, span, rss, job["state"], kills, err, ports


def stamp(iso):
    return datetime.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def spawn_floor():
    t0 = time.monotonic()
    procs = [subprocess.Popen([os.path.join(BIN, "ztrain-worker"), "--help"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for _ in range(N)]
    for q in procs:
        q.wait()
    return time.monotonic() - t0


def main():
    what = ("%d training, 2 parameter servers, %d idle" % (TRAINING, N - TRAINING - 2) if TRAINING
            else "1 primary + %d idle" % (N - 1))
    print("launch_bench: %d replicas (%s), %d runs, on %d CPUs" % (N, what, RUNS, os.cpu_count()))
    starts, floors, all_rss = [], [], []
    if JOBS > 1:
        print("%d jobs at once each run" % JOBS)
    for i in range(RUNS):
        dirs = [tempfile.mkdtemp(prefix="launch-bench-") for _ in range(JOBS)]
        results = [None] * JOBS

        def run(j):
            results[j] = one_job(dirs[j])
        threads = [threading.Thread(target=run, args=(j,)) for j in range(JOBS)]
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            for d in dirs:
                shutil.rmtree(d, ignore_errors=True)
        floor = spawn_floor()
        floors.append(floor)
        seen_ports = {}
        for j, (running, span, rss, state, kills, err, ports) in enumerate(results):
            name = "run %d%s" % (i + 1, " job %d" % (j + 1) if JOBS > 1 else "")
            if running is None and not (TRAINING and state == "SUCCEEDED"):
                print("%s: never RUNNING; ended %s\n%s" % (name, state, err[-2000:]))
                return 1
            starts.append(running if running is not None else span)
            all_rss += rss or [0]
            print("%s: all %d started in %.2f s, %s (plain spawn of %d: %.2f s); ended %s; heartbeat kills %d; "
                  "idle RSS median %.1f MB, max %.1f MB"
                  % (name, N, span, "RUNNING after %.2f s" % running if running is not None else
                     "the primary finished before the last registered", N, floor, state, kills,
                     statistics.median(rss or [0]) / 1024, max(rss or [0]) / 1024))
            if state != "SUCCEEDED" or kills:
                print(err[-2000:])
                return 1
            for port in ports:
                if port in seen_ports:
                    print("%s: %s is also job %d's" % (name, port, seen_ports[port] + 1))
                    return 1
                seen_ports[port] = j
        if JOBS > 1:
            print("run %d: %d jobs, %d replicas, no port shared" % (i + 1, JOBS, len(seen_ports)))
    s, f = statistics.median(starts), statistics.median(floors)
    print("\nmedian: %d replicas RUNNING in %.2f s; plain spawn %.2f s; ratio %.1fx" % (N, s, f, s / f))
    print("idle replica RSS: median %.1f MB, max %.1f MB (%d samples)"
          % (statistics.median(all_rss) / 1024, max(all_rss) / 1024, len(all_rss)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
