"""The self-contained wheel (`make wheel`: scripts/wheel.py) where none of
ztrain's packages are: a minimal Debian root made for the test with
debootstrap (python3 and its venv module, nothing of ztrain's), kept in the
build folder for the next run (`make clean` removes it). Inside it, in a
mount and pid namespace of the test's own (nothing of it outlives the test),
as a user who is not root:

- `pip install` of the wheel into a fresh venv, with no index;
- every binary and library in the installed wheel finds every library it
  needs inside the wheel, or is glibc's;
- `ztrain run examples/fashion-mnist-sync.json` SUCCEEDS (Fashion-MNIST
  copied in, as a user downloads it), its replicas started from the wheel;
- `import ztrain` loads the carried libztrain, and an all-reduce of a job
  of two Python replicas through it gives the sum;
- `ztrain validate --backend slurm` prints the job's allocation;
- the tarball, unpacked elsewhere, runs the same way.

Skips (77) without root, debootstrap or patchelf (scripts/deps.sh --test
installs them), or when Debian's archive cannot be reached."""
import fcntl
import glob
import json
import os
import shutil
import subprocess
import sys
import unittest

import ztest  # noqa: E402
from ztest import BIN

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
BUILD = os.path.abspath(os.environ.get("ZT_BUILD", os.path.join(BIN, "..")))
CHROOT = os.path.join(BUILD, "wheel-root")
STAMP = "debootstrap bookworm minbase python3 python3-venv"
USER = 54322
DATA = "/usr/share/datasets/fashion-mnist"


def skip(why):
    print("skipped: " + why)
    sys.exit(77)


def debian_root():
    """The minimal root, made once (under a lock) and kept."""
    with open(CHROOT + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            with open(os.path.join(CHROOT, "ztrain-root")) as f:
                if f.read() == STAMP:
                    return
        except FileNotFoundError:
            pass
        shutil.rmtree(CHROOT, ignore_errors=True)
        r = subprocess.run(["debootstrap", "--variant=minbase", "--include=python3,python3-venv", "bookworm",
                            CHROOT, "http://deb.debian.org/debian"], capture_output=True, text=True, timeout=900)
        if r.returncode != 0:
            shutil.rmtree(CHROOT, ignore_errors=True)
            if "Failure trying to run" not in r.stderr and ("resolve" in r.stderr or "download" in r.stderr.lower()):
                skip("Debian's archive cannot be reached:\n" + r.stderr[-1500:])
            raise RuntimeError("debootstrap failed:\n" + r.stdout[-2000:] + r.stderr[-2000:])
        with open(os.path.join(CHROOT, "etc", "passwd"), "a") as f:
            f.write("builder:x:%d:%d::/home/builder:/bin/sh\n" % (USER, USER))
        with open(os.path.join(CHROOT, "ztrain-root"), "w") as f:
            f.write(STAMP)


# Runs inside the root as the user: every check, each failing loudly.
INSIDE = r"""
set -eu
cd /home/builder
python3 -m venv venv
venv/bin/pip install -q --no-index --disable-pip-version-check /in/ztrain-*.whl
dist=$(echo venv/lib/python3*/site-packages/ztrain/_dist)
python3 /in/check_libs.py "$dist"
venv/bin/ztrain --version | grep -q "CUDA backend: no"    # made without WHEEL_CUDA=1: no module, and it says so
PATH=/home/builder/venv/bin:$PATH ZT_DATA_DIR=/in/data ztrain run /in/examples/fashion-mnist-sync.json \
    --job-dir /home/builder/job -- --epochs=1 --train_examples=6000 --test_examples=1000
grep -q '"state": *"SUCCEEDED"' /home/builder/job/job.json
grep -q "$dist/bin/ztrain-worker" /home/builder/job/replica-logs/workerpool0-0.log
venv/bin/ztrain run /in/ring-job.json --job-dir /home/builder/ring >ring.out 2>&1 || { cat ring.out; exit 1; }
test "$(grep -c 'the sum through the carried libztrain' ring.out)" = 2
ztrain_validate=$(venv/bin/ztrain validate /in/examples/fashion-mnist-sync.json --backend slurm --partition main)
echo "$ztrain_validate" | grep -q "#SBATCH --job-name"
mkdir t && tar -xzf /in/ztrain-*-linux-x86_64.tar.gz -C t
python3 /in/check_libs.py t/ztrain-*
t/ztrain-*/bin/ztrain validate /in/examples/fashion-mnist-sync.json >/dev/null
echo ALL-OK
"""

CHECK_LIBS = r"""
import os, subprocess, sys
top = os.path.realpath(sys.argv[1])
GLIBC = ("linux-vdso", "libc.so", "libm.so", "libpthread.so", "libdl.so", "librt.so", "libresolv.so",
         "ld-linux", "libutil.so", "libmvec.so", "libanl.so")
n = 0
for d, _, fs in os.walk(top):
    for f in fs:
        p = os.path.join(d, f)
        with open(p, "rb") as fh:
            if fh.read(4) != b"\x7fELF":
                continue
        n += 1
        for line in subprocess.run(["ldd", p], capture_output=True, text=True).stdout.splitlines():
            name = line.split()[0]
            where = line.split("=>")[1].split("(")[0].strip() if "=>" in line else ""
            if "not found" in line:
                sys.exit("%s: %s not found" % (p, name))
            if where and not os.path.realpath(where).startswith(top + "/") and not name.startswith(GLIBC):
                sys.exit("%s: %s from outside the wheel (%s)" % (p, name, where))
assert n >= 9, n  # the binaries and libztrain at least
print("libraries: %d files resolve inside %s or glibc" % (n, top))
"""

RING = r"""
import array
import ztrain, ztrain._native as n
assert "/_dist/lib/" in n.lib._name, n.lib._name  # the wheel's own libztrain
ztrain.init()
x = array.array("f", [ztrain.rank() + 1.0] * 1000)
ztrain.allreduce(x)
assert all(v == 3.0 for v in x), x[:4]
print("rank %d: the sum through the carried libztrain" % ztrain.rank())
"""

RING_JOB = json.dumps({"displayName": "ring", "jobSpec": {"workerPoolSpecs": [
    {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
     "containerSpec": {"imageUri": "python", "command": ["/home/builder/venv/bin/python", "/in/ring.py"]}}] * 2}})


class Wheel(unittest.TestCase):
    def test_the_wheel_where_ztrains_packages_are_not(self):
        if os.geteuid() != 0:
            skip("needs root (debootstrap, chroot)")
        for tool in ("debootstrap", "patchelf", "unshare", "chroot"):
            if not shutil.which(tool):
                skip("%s is missing (scripts/deps.sh --test installs it)" % tool)
        if not os.path.isdir(DATA):
            skip("no Fashion-MNIST at " + DATA)
        out = os.path.join(BUILD, "dist")
        r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "wheel.py"), BUILD, out],
                           capture_output=True, text=True, timeout=600)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertRegex(r.stdout, r"needs glibc 2\.\d+ or newer")
        debian_root()
        inbox = os.path.join(CHROOT, "in")
        shutil.rmtree(inbox, ignore_errors=True)
        shutil.rmtree(os.path.join(CHROOT, "home", "builder"), ignore_errors=True)
        os.makedirs(os.path.join(CHROOT, "home", "builder"))
        os.chown(os.path.join(CHROOT, "home", "builder"), USER, USER)
        os.chmod(os.path.join(CHROOT, "home", "builder"), 0o700)
        os.makedirs(os.path.join(inbox, "examples"))
        for f in glob.glob(os.path.join(out, "ztrain-*")):
            shutil.copy(f, inbox)
        shutil.copy(os.path.join(ROOT, "examples", "fashion-mnist-sync.json"), os.path.join(inbox, "examples"))
        shutil.copytree(DATA, os.path.join(inbox, "data"))
        for name, text in (("inside.sh", INSIDE), ("check_libs.py", CHECK_LIBS), ("ring.py", RING),
                           ("ring-job.json", RING_JOB)):
            with open(os.path.join(inbox, name), "w") as f:
                f.write(text)
        self.addCleanup(shutil.rmtree, inbox, True)
        self.addCleanup(shutil.rmtree, os.path.join(CHROOT, "home", "builder"), True)
        setup = ("mount -t proc proc {r}/proc && mount --rbind /dev {r}/dev && "
                 "mount -t tmpfs -o mode=1777 tmpfs {r}/dev/shm && mount -t tmpfs -o mode=1777 tmpfs {r}/tmp && "
                 "exec chroot {r} setpriv --reuid={u} --regid={u} --clear-groups "
                 "env -i HOME=/home/builder PATH=/usr/bin:/bin sh /in/inside.sh").format(r=CHROOT, u=USER)
        p = subprocess.run(["unshare", "--mount", "--pid", "--fork", "--propagation", "private", "sh", "-c", setup],
                           capture_output=True, text=True, timeout=600)
        self.assertEqual(p.returncode, 0, p.stdout[-4000:] + p.stderr[-4000:])
        print(p.stdout[-1000:])
        self.assertIn("ALL-OK", p.stdout)
        self.assertIn("libraries:", p.stdout)


if __name__ == "__main__":
    ztest.main()
