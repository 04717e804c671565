#!/usr/bin/env python3
"""What authentication costs: the parameter-server and all-reduce
benchmarks run twice in the same run, with plain sockets (the peer) and
with CURVE on every socket as a job has it (--auth), over the same-host
transport (ipc:// and shared memory, the default) and over TCP alone
(ZT_DATA_IPC=off ZT_SHM=off: every byte encrypted, as between hosts).
Prints each figure both ways and the ratio job / plain (1.00: free):
"job" is security as a job has it, CURVE on the control plane and the
bulk between hosts sealed (ZT_BULK_SEAL: the parameter servers, the
reducers and the ring). Beside each, the CPU it cost: CPU-ns per byte
moved (parameter servers: pushed and pulled; all-reduce: per byte of the
tensor all-reduced, the workers and the reducers together). Over TCP, the
all-reduce through reducers is also set against the limit: bench/lean_ar, a
minimal plain-TCP reduction server with the same workers, reducers and size
(no library, no security); "/ lean" is ztrain's time and CPU as a multiple
of its; "/ sealed" the same against lean_ar --seal, that server with
the seal's cipher on every byte (the 3W+1 passes ztrain makes), the limit
of a sealed one. And over TCP, what sealing adds (sealed minus plain CPU
per byte) against what its passes cost at seal_bench's rate for 128 KiB
frames ("seal / pass": 1.00 is the cipher alone; lean_ar --seal's own,
beside it, is what the passes cost a server that adds nothing else) and
against as many AES-128-GCM passes ("seal / GCM"). Passes per byte: 2
for a parameter server's push or pull, 3W+1 through reducers, 4(W-1) on
the ring, W workers).

    python3 bench/auth_bench.py [build] [--quick]
"""
import benchargs  # bench/ is the script's own folder, first on sys.path
benchargs.check(__doc__, (), ('--quick',), 1)
import os
import re
import subprocess
import sys

BUILD = next((a for a in sys.argv[1:] if not a.startswith("--")), "build")
QUICK = "--quick" in sys.argv
CIPHER = os.environ.get("ZT_SEAL_CIPHER", "aegis128x2")
TRANSPORTS = [("same host: ipc:// + shared memory", {}),
              ("TCP only", {"ZT_DATA_IPC": "off", "ZT_SHM": "off"})]
ROW = re.compile(r"^(\d+ [KMG]iB)\s+(\d+)\s+(\d+) \|\s+([\d.]+) GB/s\s+\d+ ops/s \|\s+([\d.]+) GB/s\s+\d+ ops/s \|\s+([\d.]+)"
                 r".*\| ([\d.]+) CPU-ns/B")


def run(cmd, env):
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, env=dict(os.environ, **env))
    if out.returncode != 0:
        sys.exit("%s failed (%d): %s" % (" ".join(cmd), out.returncode, out.stderr[-2000:]))
    return out.stdout


def ps_rows(auth, env):
    cmd = [os.path.join(BUILD, "bench", "ps_bench"), os.path.join(BUILD, "bin", "ztrain-paramserver"), "--quick"]
    rows = {}
    for line in run(cmd + (["--auth"] if auth else []), env).splitlines():
        m = ROW.match(line)
        if m:
            rows[m.group(1, 2, 3)] = (float(m.group(4)), float(m.group(5)), float(m.group(6)), float(m.group(7)))
    return rows


def ar_time(n, r, size, auth, env):
    """Seconds and CPU-seconds per all-reduce."""
    cmd = [os.path.join(BUILD, "bench", "ar_bench"), os.path.join(BUILD, "bin", "ztrain-reducer"),
           "--only", str(n), str(r), str(size)] + (["--quick"] if QUICK else [])
    for line in run(cmd + (["--auth"] if auth else []), env).splitlines():
        p = line.split()
        if len(p) == 6 and p[0] == "ztrain":
            return float(p[4]), float(p[5])
    sys.exit("ar_bench printed no result for %d %d %d" % (n, r, size))


def lean_time(n, r, size, seal=False):
    """bench/lean_ar's seconds and CPU-seconds (workers and reducers) per all-reduce."""
    cmd = [os.path.join(BUILD, "bench", "lean_ar"), "--workers", str(n), "--reducers", str(r), "--bytes", str(size),
           "--iters", "10" if QUICK else "40"] + (["--seal"] if seal else [])
    m = re.search(r"ms ([0-9.]+) workers_cpu_s_per_gb [0-9.]+ job_cpu_s_per_gb ([0-9.]+)", run(cmd, {}))
    if not m:
        sys.exit("lean_ar printed no result for %d %d %d" % (n, r, size))
    return float(m.group(1)) / 1e3, float(m.group(2)) * size / 1e9


def pass_ns():
    """CPU-ns per byte of one pass (seal or open) at 128 KiB frames of the
    seal's cipher (ZT_SEAL_CIPHER) and of AES-128-GCM, as seal_bench
    measures them (its seal-then-open figures, halved)."""
    out = run([os.path.join(BUILD, "bench", "seal_bench"), "1"], {})
    m = re.search(r"^per pass at 128 KiB frames \(CPU-ns per byte\): aegis128x2 ([\d.]+) aes128gcm ([\d.]+)", out, re.M)
    if not m:
        sys.exit("seal_bench printed no per-pass figures:\n" + out[-1000:])
    aegis, gcm = float(m.group(1)), float(m.group(2))
    return (gcm if CIPHER == "aes128gcm" else aegis), gcm


def main():
    per_pass, gcm_pass = pass_ns()
    print("one pass of the seal's cipher (%s): %.3f CPU-ns per byte; of AES-128-GCM: %.3f"
          " (seal_bench, 128 KiB frames)" % (CIPHER, per_pass, gcm_pass))
    print("seal / pass: what sealing adds against its passes at that rate; seal / GCM: against as many"
          " AES-128-GCM passes\n")
    for label, env in TRANSPORTS:
        print("== parameter servers, %s ==" % label)
        plain, curve = ps_rows(False, env), ps_rows(True, env)
        tcp = "ZT_SHM" in env
        print("value   W  S | push GB/s plain    job  ratio | pull GB/s plain    job  ratio | push+ack us plain    job"
              " | CPU-ns/B plain    job" + (" | seal / pass  / GCM" if tcp else ""))
        for key in plain:
            if key not in curve:
                continue
            a, b = plain[key], curve[key]
            print("%-8s %2s %2s |       %6.2f %6.2f  %5.2f |       %6.2f %6.2f  %5.2f |        %6.0f %6.0f"
                  " |          %5.2f  %5.2f"
                  % (key + (a[0], b[0], b[0] / a[0] if a[0] else 0, a[1], b[1], b[1] / a[1] if a[1] else 0,
                            a[2], b[2], a[3], b[3])) + (" |        %4.2f  %4.2f" % (
                      (b[3] - a[3]) / (2 * per_pass), (b[3] - a[3]) / (2 * gcm_pass)) if tcp else ""))
        print("\n== all-reduce, 4 workers, %s ==" % label)
        print("reducers  bytes     | ms/op plain     job  | job / plain speed | CPU-ns/B plain    job" +
              (" | seal / pass  / GCM | lean ms CPU-ns/B | job / lean: time  CPU | sealed ms CPU-ns/B seal / pass |"
               " job / sealed: time  CPU" if tcp else ""))
        sizes = [1 << 20, 16 << 20] if QUICK else [64 << 10, 1 << 20, 16 << 20, 64 << 20]
        for r in (2, 0):
            for size in sizes:
                (a, ca), (b, cb) = ar_time(4, r, size, False, env), ar_time(4, r, size, True, env)
                line = "%-9s %-9d | %8.2f %8.2f  | %17.2f |          %5.2f  %5.2f" % (
                    r if r else "ring", size, a * 1e3, b * 1e3, a / b, ca * 1e9 / size, cb * 1e9 / size)
                if tcp:
                    passes = 3 * 4 + 1 if r else 4 * (4 - 1)
                    added = (cb - ca) * 1e9 / size
                    line += " |        %4.2f  %4.2f" % (added / (passes * per_pass), added / (passes * gcm_pass))
                if tcp and r:
                    lt, lc = lean_time(4, r, size)
                    line += " | %7.2f %8.2f |            %5.2f %5.2f" % (lt * 1e3, lc * 1e9 / size, b / lt, cb / lc)
                    st, sc = lean_time(4, r, size, True)
                    line += " |   %7.2f %8.2f       %4.2f |              %5.2f %5.2f" % (
                        st * 1e3, sc * 1e9 / size, (sc - lc) * 1e9 / size / (passes * per_pass), b / st, cb / sc)
                print(line)
        print()


if __name__ == "__main__":
    main()
