#!/usr/bin/env python3
"""All-reduce benchmark driver: ztrain's reducers (R = 1, 2, 4) and ring
(R = 0) against MPI_Allreduce from Debian's Open MPI (TCP and shared memory)
and PyTorch's gloo backend from Debian's python3-torch, each run here in the
same run when installed. Prints time per operation, algorithm bandwidth
(size / time) and bus bandwidth (algbw * 2(n-1)/n, as nccl-tests define it),
and the ratio of each peer's time to ztrain's (> 1: ztrain is faster).
Rows marked "in place" (i.p.) write the gradient where zt_allreduce_buffer
says, so that neither submit nor wait copies it; the others hand over their
own buffer.

    python3 bench/allreduce_bench.py [build] [--quick]
"""
import benchargs  # bench/ is the script's own folder, first on sys.path
benchargs.check(__doc__, (), ('--quick',), 1)
import os
import shutil
import socket
import subprocess
import sys

BUILD = next((a for a in sys.argv[1:] if not a.startswith("--")), "build")
QUICK = "--quick" in sys.argv
BUDGET = "0.2" if QUICK else "0.6"
HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = [4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20]


def lines(cmd, env=None):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800,
                             env=dict(os.environ, **(env or {}))).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        print("  (skipped %s: %s)" % (cmd[0], e))
        return []
    rows = []
    for l in out.splitlines():
        p = l.split()
        if len(p) == 5 and p[3].isdigit():
            rows.append((p[0], int(p[1]), int(p[2]), int(p[3]), float(p[4])))
    return rows


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def main():
    ar = [os.path.join(BUILD, "bench", "ar_bench"), os.path.join(BUILD, "bin", "ztrain-reducer")]
    rows = lines(ar + (["--quick"] if QUICK else []))
    rows += lines(ar + ["--inplace"] + (["--quick"] if QUICK else []))
    peers = []
    exe = os.path.join(BUILD, "bench", "mpi_allreduce")
    # mpirun and mpicc come with openmpi-bin (make test installs it), mpi.h with libopenmpi-dev
    if (shutil.which("mpicc") and shutil.which("mpirun") and
            subprocess.run(["mpicc", "-O2", "-o", exe, os.path.join(HERE, "mpi_allreduce.c")]).returncode == 0):
        env = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
        for n in (2, 4):
            rows += lines(["mpirun", "--oversubscribe", "-np", str(n), "--mca", "btl", "tcp,self",
                           "--mca", "btl_tcp_if_include", "lo", "--mca", "pml", "ob1", exe, "mpi-tcp",
                           BUDGET], env)
            rows += lines(["mpirun", "--oversubscribe", "-np", str(n), "--mca", "btl", "vader,self",
                           "--mca", "pml", "ob1", exe, "mpi-shm", BUDGET], env)
        peers += ["mpi-tcp", "mpi-shm"]
    else:
        print("Open MPI not installed (apt-get install openmpi-bin libopenmpi-dev): no MPI peer")
    if subprocess.run(["/usr/bin/python3", "-c", "import torch.distributed"], capture_output=True).returncode == 0:
        for n in (2, 4):
            rows += lines(["/usr/bin/python3", os.path.join(HERE, "gloo_allreduce.py"), str(n),
                           str(free_port()), BUDGET])
        peers.append("gloo")
    else:
        print("Debian's python3-torch not installed: no gloo peer")
    t = {(r[0], r[1], r[2], r[3]): r[4] for r in rows}
    print("\nall-reduce of float32 sums on loopback, %s; time per operation, algbw, busbw" %
          ("quick" if QUICK else "full"))
    for n in (2, 4):
        print("\nN = %d workers" % n)
        print("%-10s %-16s %10s %9s %9s   %s" % ("size", "who", "time", "algbw", "busbw",
                                                 "peer time / this time"))
        for size in SIZES:
            label = "%d KiB" % (size >> 10) if size < (1 << 20) else "%d MiB" % (size >> 20)
            for who, r in [("ring", 0), ("ring, in place", 0), ("reducers 1", 1), ("reducers 2", 2),
                           ("reducers 2, i.p.", 2), ("reducers 4", 4)] + [(p, 0) for p in peers]:
                key = (who if who in peers else "ztrain-ip" if "in place" in who or "i.p." in who
                       else "ztrain", n, r, size)
                if key not in t:
                    continue
                s = t[key]
                alg = size / s / 1e9
                bus = alg * 2 * (n - 1) / n
                ratio = ""
                if who not in peers:
                    ratio = "  ".join("%s %.2fx" % (p, t[(p, n, 0, size)] / s) for p in peers
                                      if (p, n, 0, size) in t)
                tm = "%.3f ms" % (s * 1e3) if s >= 1e-3 else "%.0f us" % (s * 1e6)
                print("%-10s %-16s %10s %6.2f GB/s %6.2f GB/s   %s" % (label, who, tm, alg, bus, ratio))
                label = ""


if __name__ == "__main__":
    main()
