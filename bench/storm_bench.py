#!/usr/bin/env python3
"""What a stranger's handshake storm costs a job: the synchronous example
(examples/fashion-mnist-sync.json: a chief, 3 workers, 2 reducers and an
evaluator, security on as jobs run) trains twice in the same run, alone
(the peer) and while a storm hits every TCP port of the job: 40 CURVE
sockets per port with keys of their own, reconnecting every 10 ms
(tests/zt_attack storm). Prints each run's time, the chief's median
examples/s, the job's CPU-seconds (and CPU-us per example trained) and the
storm's own CPU-seconds, then the ratio storm / alone (1.00: no cost).

    python3 bench/storm_bench.py [build] [--rounds N]
"""
import benchargs  # bench/ is the script's own folder, first on sys.path
benchargs.check(__doc__, ("--rounds",), (), 1)
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ARGS = [a for a in sys.argv[1:]]
ROUNDS = int(ARGS[ARGS.index("--rounds") + 1]) if "--rounds" in ARGS else 1
POS = [a for i, a in enumerate(ARGS) if not a.startswith("--") and (i == 0 or ARGS[i - 1] != "--rounds")]
BUILD = os.path.abspath(POS[0] if POS else "build")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPEC = os.path.join(ROOT, "examples", "fashion-mnist-sync.json")
EXAMPLES = 60000 * 5  # 5 epochs of Fashion-MNIST's training set


def listening_ports(pid):
    """The TCP ports process pid listens on."""
    inodes = set()
    try:
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
        with open("/proc/%d/net/tcp" % pid) as f:
            rows = f.read().splitlines()[1:]
    except OSError:
        return []
    return [int(c[1].split(":")[1], 16) for c in (r.split() for r in rows) if c[3] == "0A" and c[9] in inodes]


def cpu_seconds(ru):
    return ru.ru_utime + ru.ru_stime


def one(storm, work):
    job_dir = os.path.join(work, "storm" if storm else "alone")
    shutil.rmtree(job_dir, ignore_errors=True)
    t0 = time.monotonic()
    log = open(os.path.join(work, "run.log"), "w+")
    job = subprocess.Popen([os.path.join(BUILD, "bin", "ztrain"), "run", SPEC, "--job-dir", job_dir],
                           stdout=subprocess.DEVNULL, stderr=log)
    attack, ports = None, []
    if storm:
        deadline = time.monotonic() + 120
        while job.poll() is None and time.monotonic() < deadline:
            try:
                with open(os.path.join(job_dir, "job.json")) as f:
                    j = json.load(f)
                pids = [r["pid"] for r in j["replicas"] if r.get("pid")] + [j["coordinatorProcess"]["pid"]]
                ports = sorted({p for pid in pids for p in listening_ports(pid)})
                if len(ports) >= 7:  # 6 servers' and the coordinator's
                    break
            except (OSError, ValueError, KeyError, TypeError):
                pass
            time.sleep(0.05)
        attack = subprocess.Popen([os.path.join(BUILD, "tests", "zt_attack"), "storm", "600"] +
                                  ["tcp://127.0.0.1:%d" % p for p in ports], stdout=subprocess.DEVNULL)
    _, status, ru = os.wait4(job.pid, 0)
    job.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - t0
    log.seek(0)
    err = log.read()
    log.close()
    storm_cpu = 0.0
    if attack:
        attack.kill()
        _, _, aru = os.wait4(attack.pid, 0)
        attack.returncode = 0
        storm_cpu = cpu_seconds(aru)
    if job.returncode != 0:
        sys.exit("the job failed (%d): %s" % (job.returncode, err[-2000:]))
    with open(os.path.join(job_dir, "replica-logs", "workerpool0-0.log")) as f:
        eps = sorted(float(x) for x in re.findall(r"examples/s (\d+)", f.read()))
    return {"wall": wall, "eps": eps[len(eps) // 2] if eps else 0.0, "cpu": cpu_seconds(ru), "storm_cpu": storm_cpu,
            "ports": len(ports)}


def main():
    work = tempfile.mkdtemp(prefix="storm-bench-")
    try:
        print("round  run    | wall s  examples/s | job CPU s  CPU us/example | storm CPU s  ports")
        ratios = []
        for r in range(ROUNDS):
            alone, storm = one(False, work), one(True, work)
            for name, x in (("alone", alone), ("storm", storm)):
                print("%5d  %-6s | %6.1f  %10.0f | %9.1f  %14.1f | %11.2f  %5d" %
                      (r + 1, name, x["wall"], x["eps"], x["cpu"], 1e6 * x["cpu"] / EXAMPLES, x["storm_cpu"],
                       x["ports"]))
            ratios.append((storm["eps"] / alone["eps"] if alone["eps"] else 0.0, alone["wall"] / storm["wall"]))
        for r, (eps, wall) in enumerate(ratios):
            print("round %d: storm / alone: examples/s %.2fx, speed (1/time) %.2fx" % (r + 1, eps, wall))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
