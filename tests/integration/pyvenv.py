"""The Python package installed as a user would: `pip install ./python` into
a fresh virtual environment of Debian's python3 (whose python3-torch the
PyTorch tests use)."""
import os
import shutil
import subprocess

from ztest import tmpdir

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DEBIAN_PYTHON = "/usr/bin/python3"
BUILD = os.environ.get("ZT_BUILD", os.path.join(ROOT, "build"))


def has_torch():
    return subprocess.run([DEBIAN_PYTHON, "-c", "import torch"], capture_output=True).returncode == 0


def make(system_site=True, library=None, timeout=600):
    """A new venv with ztrain installed; returns (its python, its folder).
    library: a libztrain.so to bundle (ZTRAIN_LIBRARY), else pip builds it."""
    d = tmpdir("pyvenv-")
    args = [DEBIAN_PYTHON, "-m", "venv"] + (["--system-site-packages"] if system_site else []) + [d]
    subprocess.run(args, check=True, capture_output=True, timeout=120)
    env = dict(os.environ)
    env.pop("ZTRAIN_LIBRARY", None)
    if library:
        env["ZTRAIN_LIBRARY"] = library
    src = os.path.join(ROOT, "python")
    if library:  # a copy: pip builds in the source folder, and another test may build in the tree's
        src = shutil.copytree(src, os.path.join(d, "src"), ignore=shutil.ignore_patterns("build", "*.egg-info"))
    # No build isolation: Debian's setuptools builds it, nothing is fetched.
    r = subprocess.run([os.path.join(d, "bin", "pip"), "install", "-q", "--no-build-isolation", src],
                       capture_output=True, text=True, env=env, timeout=timeout)
    if r.returncode != 0:
        shutil.rmtree(d, ignore_errors=True)
        raise AssertionError("pip install ./python failed:\n" + r.stdout[-3000:] + r.stderr[-3000:])
    return os.path.join(d, "bin", "python"), d
