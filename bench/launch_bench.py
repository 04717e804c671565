#!/usr/bin/env python3
"""How fast a large job starts, and what an idle replica costs: a job of
N replicas (the primary a placeholder that runs --run-seconds, the other
N-1 `ztrain-worker --idle`) from `ztrain run` to RUNNING (every replica
registered), each replica's resident memory (RSS) while idle, and whether
the job ends SUCCEEDED with no replica killed for a missed heartbeat. The
peer, measured in the same run: the same N processes of the same binary
started and waited for by a plain spawner (`ztrain-worker --help`: exec,
run, exit, without a job to join), the floor that process creation
itself sets. Prints seconds, the ratio, and the RSS median and max.

    python3 bench/launch_bench.py [build] [--replicas 256] [--runs 3] [--run-seconds 10]
"""
import benchargs  # bench/ is the script's own folder, first on sys.path
benchargs.check(__doc__, ('--replicas', '--runs', '--run-seconds'), (), 1)
import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

args = sys.argv[1:]


def opt(name, default):
    return int(args[args.index(name) + 1]) if name in args else default


pos = [a for i, a in enumerate(args) if not a.startswith("--") and (i == 0 or not args[i - 1].startswith("--"))]
BUILD = os.path.abspath(pos[0] if pos else os.path.join(os.path.dirname(__file__), "..", "build"))
BIN = os.path.join(BUILD, "bin")
N, RUNS, SECONDS = opt("--replicas", 256), opt("--runs", 3), opt("--run-seconds", 10)


def rss_kb(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            return int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1))
    except (OSError, AttributeError):
        return None


def one_job(d):
    pools = [{"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
              "containerSpec": {"imageUri": "ztrain-worker", "args": ["--run-seconds=%d" % SECONDS]}},
             {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": N - 1,
              "containerSpec": {"imageUri": "ztrain-worker", "args": ["--idle"]}}]
    spec = os.path.join(d, "job.json")
    with open(spec, "w") as f:
        json.dump({"displayName": "launch", "jobSpec": {"workerPoolSpecs": pools}}, f)
    job_dir = os.path.join(d, "job")
    env = dict(os.environ, ZT_MAX_REPLICAS=str(max(N, 256)))
    log = open(os.path.join(d, "ztrain.err"), "w+")  # a file: a pipe nobody reads would fill up
    t0 = time.monotonic()
    p = subprocess.Popen([os.path.join(BIN, "ztrain"), "run", spec, "--job-dir", job_dir],
                         stdout=subprocess.DEVNULL, stderr=log, text=True, env=env)
    running, rss = None, []
    while p.poll() is None:
        try:
            with open(os.path.join(job_dir, "job.json")) as f:
                job = json.load(f)
        except (OSError, ValueError):
            job = {}
        if running is None and job.get("state") == "RUNNING":
            running = time.monotonic() - t0
            time.sleep(1)
            rss = [k for k in (rss_kb(r["pid"]) for r in job["replicas"][1:] if r.get("pid")) if k]
        time.sleep(0.02)
    log.seek(0)
    err = log.read()
    log.close()
    with open(os.path.join(job_dir, "job.json")) as f:
        job = json.load(f)
    kills = err.count("sent no heartbeat")
    return running, rss, job["state"], kills, err


def spawn_floor():
    t0 = time.monotonic()
    procs = [subprocess.Popen([os.path.join(BIN, "ztrain-worker"), "--help"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for _ in range(N)]
    for q in procs:
        q.wait()
    return time.monotonic() - t0


def main():
    print("launch_bench: %d replicas (1 primary + %d idle), %d runs, on %d CPUs" % (N, N - 1, RUNS, os.cpu_count()))
    starts, floors, all_rss = [], [], []
    for i in range(RUNS):
        d = tempfile.mkdtemp(prefix="launch-bench-")
        try:
            running, rss, state, kills, err = one_job(d)
        finally:
            shutil.rmtree(d, ignore_errors=True)
        floor = spawn_floor()
        floors.append(floor)
        if running is None:
            print("run %d: never RUNNING; ended %s\n%s" % (i + 1, state, err[-2000:]))
            return 1
        starts.append(running)
        all_rss += rss
        print("run %d: RUNNING after %.2f s (plain spawn of %d: %.2f s); ended %s; heartbeat kills %d; "
              "idle RSS median %.1f MB, max %.1f MB" % (i + 1, running, N, floor, state, kills,
                                                         statistics.median(rss) / 1024, max(rss) / 1024))
        if state != "SUCCEEDED" or kills:
            print(err[-2000:])
            return 1
    s, f = statistics.median(starts), statistics.median(floors)
    print("\nmedian: %d replicas RUNNING in %.2f s; plain spawn %.2f s; ratio %.1fx" % (N, s, f, s / f))
    print("idle replica RSS: median %.1f MB, max %.1f MB (%d samples)"
          % (statistics.median(all_rss) / 1024, max(all_rss) / 1024, len(all_rss)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
