#!/usr/bin/env python3
"""Where the Reduction Server's advantage shows: every worker and reducer on
its own host with a bandwidth-limited link. The benchmark makes the hosts
itself (network namespaces on a bridge that has a namespace of its own, as
has mpirun: nothing is added to the machine's own network; veth pairs, a `tc tbf` rate limit on
both directions of every link), runs ztrain's reducers, ztrain's ring and
Open MPI over TCP across them, prints time per operation, algorithm bandwidth
and the ratios, and removes everything again. Needs root. ztrain runs as
jobs run ("job": the bulk between hosts sealed, keys made for the run) and
with plain sockets ("plain"), each printed.

With --slurm, the hosts are a real Slurm cluster instead (scripts/slurm_cluster.py,
the same namespaces, the same rate limit on every host's link), and what runs
is the sync example itself, submitted with `ztrain run --backend slurm`: the
job's examples/s through --reducers reducers (one host each) against the ring
(no reducer pool), --workers workers in all (the chief among them). Each
runs twice: as jobs run (CURVE on the control plane, the bulk between hosts sealed)
and with ZT_SECURITY=off, for what authentication costs on these links.

    sudo python3 bench/netns_bench.py [build] [--rate 1gbit] [--workers 4] [--reducers 4]
                                      [--queue 20ms] [--mtu 1500] [--slurm]

NETNS_BENCH_MIB (a comma list, default 16,64) picks the sizes without --slurm.
"""
import benchargs  # bench/ is the script's own folder, first on sys.path
benchargs.check(__doc__, ('--rate', '--workers', '--reducers', '--queue', '--mtu'), ('--slurm',), 1)
import atexit
import os
import shutil
import subprocess
import sys
import time

BUILD = next((a for a in sys.argv[1:] if not a.startswith("--") and not a[0].isdigit()
              and a not in ("1gbit",)), "build")


def opt(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


RATE = opt("--rate", "1gbit")
MTU = opt("--mtu", "1500")
LATENCY = opt("--queue", "20ms")  # tbf queue: longer queues delay the other direction's ACKs
N = int(opt("--workers", "4"))
R = int(opt("--reducers", "4"))
HOSTS = N + R
SIZES = [int(x) << 20 for x in os.environ.get("NETNS_BENCH_MIB", "16,64").split(",")]
HERE = os.path.dirname(os.path.abspath(__file__))


def sh(*cmd, check=True):
    return subprocess.run(cmd, check=check, capture_output=True, text=True)


def ip_of(h):
    return "10.77.0.%d" % (10 + h)


BRIDGE_NS = "zt-br"    # the bridge lives in a namespace of its own
MPIRUN_NS = "zt-mpi"   # so does mpirun (its PMIx server at 10.77.0.1)


def teardown():
    # Deleting a namespace deletes the veth ends in it, and with them their peers.
    for h in range(16):
        sh("ip", "netns", "del", "zt-h%d" % h, check=False)
    sh("ip", "netns", "del", MPIRUN_NS, check=False)
    sh("ip", "netns", "del", BRIDGE_NS, check=False)


def add_host(ns, ifname, peer, addr, limit):
    """A host namespace joined to the bridge by a veth pair; limit: tc tbf on
    both directions of the link."""
    sh("ip", "netns", "add", ns)
    sh("ip", "link", "add", peer, "type", "veth", "peer", "name", ifname)
    sh("ip", "link", "set", ifname, "netns", ns)
    sh("ip", "link", "set", peer, "netns", BRIDGE_NS)
    sh("ip", "netns", "exec", BRIDGE_NS, "ip", "link", "set", peer, "mtu", MTU)
    sh("ip", "netns", "exec", BRIDGE_NS, "ip", "link", "set", peer, "master", "ztbr0")
    sh("ip", "netns", "exec", BRIDGE_NS, "ip", "link", "set", peer, "up")
    sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
    sh("ip", "netns", "exec", ns, "ip", "addr", "add", addr + "/24", "dev", ifname)
    sh("ip", "netns", "exec", ns, "ip", "link", "set", ifname, "mtu", MTU, "up")
    if limit:  # the link's rate, both ways: out of the host, and into it
        sh("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", ifname, "root", "tbf",
           "rate", RATE, "burst", "512kb", "latency", LATENCY)
        sh("ip", "netns", "exec", BRIDGE_NS, "tc", "qdisc", "add", "dev", peer, "root", "tbf",
           "rate", RATE, "burst", "512kb", "latency", LATENCY)


def setup():
    """Nothing is added to the machine's own network namespace."""
    teardown()
    sh("ip", "netns", "add", BRIDGE_NS)
    sh("ip", "netns", "exec", BRIDGE_NS, "ip", "link", "add", "ztbr0", "type", "bridge")
    sh("ip", "netns", "exec", BRIDGE_NS, "ip", "link", "set", "ztbr0", "up")
    add_host(MPIRUN_NS, "zt-em", "zt-vm", "10.77.0.1", False)
    for h in range(HOSTS):
        add_host("zt-h%d" % h, "zt-e%d" % h, "zt-v%d" % h, ip_of(h), True)


def iters_for(size):
    return 3 if size >= (64 << 20) else 5


def run_ztrain(size, reducers, keys=None):
    """Seconds per all-reduce; keys: a job's credentials (as jobs run), or plain sockets."""
    env = dict(os.environ, ZT_LOG_LEVEL="warn")
    if keys:
        env["ZT_CREDENTIALS"] = keys
    else:
        env.pop("ZT_CREDENTIALS", None)
    procs = []
    reds = []
    for r in range(reducers):
        ep = "tcp://%s:7000" % ip_of(N + r)
        reds.append(ep)
        procs.append(subprocess.Popen(["ip", "netns", "exec", "zt-h%d" % (N + r),
                                       os.path.join(BUILD, "bin", "ztrain-reducer"), "--bind", ep,
                                       "--index", str(r), "--servers", str(reducers)],
                                      env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    peers = ",".join("tcp://%s:7100" % ip_of(w) for w in range(N))
    workers = [subprocess.Popen(["ip", "netns", "exec", "zt-h%d" % w,
                                 os.path.join(BUILD, "bench", "ar_bench"), "-", "--one", str(w), str(N),
                                 str(size), str(iters_for(size)), ",".join(reds) or "-",
                                 peers if not reducers else "-"],
                                env=env, stdout=subprocess.PIPE,
                                text=True) for w in range(N)]
    times = []
    try:
        for p in workers:
            out, _ = p.communicate(timeout=600)
            last = out.strip().splitlines()[-1] if out.strip() else ""
            try:
                times.append(float(last))
            except ValueError:
                raise RuntimeError("ar_bench in its namespace ended without its time (exit %s): %r"
                                   % (p.returncode, last[-200:])) from None
    finally:  # no worker or reducer outlives the case, whatever happened
        for p in workers + procs:
            if p.poll() is None:
                p.terminate()
        for p in workers + procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    return max(times)


def run_mpi():
    if not (shutil.which("mpicc") and shutil.which("mpirun")):
        return {}
    exe = os.path.join(BUILD, "bench", "mpi_allreduce")
    subprocess.run(["mpicc", "-O2", "-o", exe, os.path.join(HERE, "mpi_allreduce.c")], check=True)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               PMIX_MCA_ptl_tcp_if_include="10.77.0.0/24", PMIX_MCA_ptl_tcp_disable_ipv6_family="1")
    # mpirun in its own namespace on the bridge; each rank moves to its host's.
    out = subprocess.run(["ip", "netns", "exec", MPIRUN_NS,
                          "mpirun", "--oversubscribe", "-np", str(N), "--mca", "btl", "tcp,self",
                          "--mca", "btl_tcp_if_include", "10.77.0.0/24", "--mca", "pml", "ob1",
                          "--mca", "oob_tcp_if_include", "10.77.0.0/24",
                          os.path.join(HERE, "netns_wrap.sh"), exe, "mpi-tcp", "0.05"],
                         capture_output=True, text=True, env=env, timeout=1200).stdout
    res = {}
    for l in out.splitlines():
        p = l.split()
        if len(p) == 5 and p[0] == "mpi-tcp":
            res[int(p[3])] = float(p[4])
    return res


def slurm_main():
    """The sync example on a Slurm cluster of rate-limited hosts: reducers
    against the ring, in examples/s of the whole job."""
    import json
    import netns_cluster
    root = os.path.realpath(os.path.join(HERE, ".."))
    build = os.path.realpath(BUILD)
    c, d = netns_cluster.start(N + R, RATE, LATENCY, shared=[root, build])
    if not c:
        print("netns_bench --slurm: %s" % d)
        return 2
    with open(os.path.join(root, "examples", "fashion-mnist-sync.json")) as f:
        ex = json.load(f)
    pools = ex["jobSpec"]["workerPoolSpecs"][:3]
    for p in pools[:2]:
        p["containerSpec"]["args"] = [a for a in p["containerSpec"]["args"]
                                      if not a.startswith(("--epochs", "--checkpoint_steps"))]
        p["containerSpec"]["args"] += ["--epochs=1", "--checkpoint_steps=100000"]
    pools[1]["replicaCount"] = N - 1
    pools[2]["replicaCount"] = R
    for p in pools:
        p["machineSpec"] = {"machineType": "n1-standard-8"}
    print("sync example on Slurm: %d workers (the chief among them), %d reducers, one host each, every "
          "link %s both ways (tc tbf, %s queue), MTU 1500" % (N, R, RATE, LATENCY))
    res = {}
    for who, ps in (("ring", pools[:2]), ("reducers %d" % R, pools)):
        for security in ("on", "off"):
            ex["jobSpec"]["workerPoolSpecs"] = ps
            name = "%s-%s" % (who.replace(" ", "-"), security)
            spec = os.path.join(d, "%s.json" % name)
            with open(spec, "w") as f:
                json.dump(ex, f)
            job_dir = os.path.join(d, name)
            r = subprocess.run(c.argv("ctl", [os.path.join(build, "bin", "ztrain"), "run", spec, "--backend",
                                              "slurm", "--job-dir", job_dir]),
                               env=dict(c.env(), ZT_SECURITY=security), capture_output=True, text=True,
                               timeout=1200)
            with open(os.path.join(job_dir, "job.json")) as f:
                job = json.load(f)
            if r.returncode != 0 or job["state"] != "SUCCEEDED":
                print("%s: the job ended %s\n%s" % (name, job["state"], r.stderr[-3000:]))
                return 1
            per = job["metrics"]["workerpool0-0"]["examples_per_sec"]["value"]
            res[(who, security)] = per * N
            hosts = {x["host"] for x in job["replicas"]}
            print("%-12s %-13s %9.0f examples/s (%d replicas on %d hosts)%s" % (
                who, "job" if security == "on" else "ZT_SECURITY=off", res[(who, security)],
                len(job["replicas"]), len(hosts),
                "   %.2fx the ring" % (res[(who, security)] / res[("ring", security)]) if who != "ring"
                else "") + ("   job / off: %.2f" % (res[(who, "on")] / res[(who, "off")]) if security == "off"
                            else ""))
            sys.stdout.flush()
    return 0


def main():
    if os.geteuid() != 0:
        print("netns_bench needs root (network namespaces, tc)")
        return 2
    if "--slurm" in sys.argv:
        return slurm_main()
    atexit.register(teardown)
    setup()
    print("%d workers, %d reducers, one host each, every link %s both ways (tc tbf, %s queue), "
          "MTU %s, frames of %s bytes" % (N, R, RATE, LATENCY, MTU,
                                          os.environ.get("ZT_PS_CHUNK_BYTES", "1048576")))
    mpi = run_mpi()
    keys_dir = "/tmp/zt-netns-keys-%d" % os.getpid()
    atexit.register(lambda: shutil.rmtree(keys_dir, ignore_errors=True))
    subprocess.run([os.path.join(BUILD, "bench", "ar_bench"), "--keys", keys_dir], check=True)
    keys = os.path.join(keys_dir, "bench.key")
    print("\n%-8s %-22s %11s %10s   %s" % ("size", "who", "time", "algbw", "ratio"))
    for size in SIZES:
        label = "%d MiB" % (size >> 20)
        t = {}
        for how, k in (("job", keys), ("plain", None)):
            t[("ring", how)] = run_ztrain(size, 0, k)
            t[("reducers", how)] = run_ztrain(size, R, k)
        rows = [("ring, job", t[("ring", "job")]), ("ring, plain", t[("ring", "plain")]),
                ("reducers %d, job" % R, t[("reducers", "job")]), ("reducers %d, plain" % R, t[("reducers", "plain")])]
        rows += [("mpi-tcp", mpi[size])] if size in mpi else []
        for who, s in rows:
            ratio = ""
            if who.startswith("reducers"):
                how = who.rsplit(" ", 1)[1]
                ratio = "%.2fx the ring's algbw (%s)" % (t[("ring", how)] / s, how)
                if size in mpi:
                    ratio += ", %.2fx Open MPI's" % (mpi[size] / s)
            if who.endswith(", plain"):
                ratio += "%sjob / plain %.2f" % (", " if ratio else "", s / t[(who.split()[0].rstrip(","), "job")])
            print("%-8s %-22s %8.1f ms %7.3f GB/s   %s" % (label, who, s * 1e3, size / s / 1e9, ratio))
            label = ""
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
