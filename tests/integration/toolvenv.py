"""The test tools from PyPI, each set in a virtual environment of Debian's
python3 in the build folder, made on first use and kept for the next run
(`make clean` removes it), under a lock, so that tests running at once share
it: TensorBoard (its own reader and server), and SageMaker's training
toolkit (sagemaker-training, the entry point of SageMaker's framework
containers)."""
import fcntl
import os
import shutil
import subprocess
import sys

BUILD = os.environ.get("ZT_BUILD", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build"))
# Pinned: the versions the tests were written against.
PACKAGES = ["tensorboard==2.21.0"]
TOOLKIT = ["sagemaker-training==5.1.4"]
# What pip says when it cannot reach PyPI at all (then the test skips, 77).
OFFLINE = ("Failed to establish a new connection", "Temporary failure in name resolution",
           "Network is unreachable", "No matching distribution found")


def python(packages=PACKAGES, name="test-tools-venv"):
    """The venv's python (build/NAME), made when missing or when its
    packages changed; exits 77 (a skip) when PyPI cannot be reached."""
    VENV = os.path.join(BUILD, name)
    stamp = os.path.join(VENV, "ztrain-packages")
    os.makedirs(BUILD, exist_ok=True)
    with open(os.path.join(BUILD, "." + name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            with open(stamp) as f:
                if f.read() == " ".join(packages):
                    return os.path.join(VENV, "bin", "python")
        except FileNotFoundError:
            pass
        shutil.rmtree(VENV, ignore_errors=True)
        subprocess.run(["/usr/bin/python3", "-m", "venv", VENV], check=True, capture_output=True, timeout=120)
        r = subprocess.run([os.path.join(VENV, "bin", "pip"), "install", "-q", "--disable-pip-version-check",
                            *packages], capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            shutil.rmtree(VENV, ignore_errors=True)
            if any(s in r.stderr for s in OFFLINE):
                print("skipped: PyPI cannot be reached for %s:\n%s" % (" ".join(packages), r.stderr[-1500:]))
                sys.exit(77)
            raise RuntimeError("pip install %s failed:\n%s" % (" ".join(packages), r.stderr[-3000:]))
        with open(stamp, "w") as f:
            f.write(" ".join(packages))
        return os.path.join(VENV, "bin", "python")
