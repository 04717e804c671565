#!/usr/bin/env python3
"""Compares what two builds of ztrain give the replicas of the example jobs:
`ztrain env` of every replica of a Vertex, a legacy, a SageMaker, an async
and a reducer job, from OLD and NEW, ports and per-run secrets masked. For
a change that should not change any replica's environment (a refactor of
the job formats or the launch code): build the earlier commit elsewhere
(`git worktree add`), then

    python3 scripts/env_compare.py OLD/bin/ztrain build/bin/ztrain

Prints "same" or the lines that differ per replica; exits 1 on any
difference."""
import os
import re
import subprocess
import sys

if len(sys.argv) != 3 or sys.argv[1] in ("-h", "--help"):
    sys.exit(__doc__)
old, new = sys.argv[1], sys.argv[2]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
files = ["examples/vertex-job.json", "examples/legacy-config.yaml", "examples/sagemaker-pytorch-ddp.json",
         "examples/fashion-mnist-async.json", "examples/pytorch-reducer.json"]
SECRET = re.compile(r"^(ZT_\w*(KEY|SECRET|TOKEN|INCARNATION|RUN|SEAL)\w*|ZT_JOB_ID)=")
def env(binary, f, p, i):
    r = subprocess.run([binary, "env", f, "--pool", str(p), "--index", str(i), "--job-dir", os.path.join("/tmp", "env-compare-%d" % os.getpid())],
                       capture_output=True, text=True, cwd=ROOT)
    lines = []
    for l in (r.stdout + "\n" + r.stderr).splitlines():
        l = re.sub(r"(?<=[:=\"])\d{4,5}\b", "PORT", l)
        if SECRET.match(l):
            l = l.split("=")[0] + "=<masked>"
        lines.append(l)
    return r.returncode, lines
diffs = 0
for f in files:
    for p in range(4):
        for i in range(2):
            a, b = env(old, f, p, i), env(new, f, p, i)
            if a != b:
                diffs += 1
                print("DIFF", f, p, i, "rc", a[0], b[0])
                sa, sb = set(a[1]), set(b[1])
                for l in sorted(sa - sb)[:6]: print("  - " + l[:200])
                for l in sorted(sb - sa)[:6]: print("  + " + l[:200])
            elif a[0] == 0:
                print("same", f, p, i, len(a[1]), "lines")
print("differences:", diffs)
sys.exit(1 if diffs else 0)
