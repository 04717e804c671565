"""Builds the wheel with libztrain inside it (ztrain/_lib/libztrain.so).

Where the library comes from, first found:
  1. ZTRAIN_LIBRARY: the path of a libztrain.so already built;
  2. the source tree this folder sits in: CMake builds the library alone
     (target ztrain_shared, no CUDA) in build/libztrain here;
  3. an installed libztrain (pkg-config ztrain).
Building needs Debian's packages; `make deps` (scripts/deps.sh) installs them.
"""
import os
import shutil
import subprocess
import sys

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _fail(msg):
    sys.exit("ztrain: cannot get libztrain: " + msg)


def _from_tree():
    if not os.path.exists(os.path.join(ROOT, "lib", "CMakeLists.txt")):
        return None
    build = os.path.join(HERE, "build", "libztrain")
    for cmd in (["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release", "-DZT_WITH_CUDA=OFF"],
                ["cmake", "--build", build, "--target", "ztrain_shared", "-j", str(os.cpu_count() or 2)]):
        try:
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL if "-S" in cmd else None)
        except FileNotFoundError:
            _fail("cmake is not installed (make deps installs what ztrain needs)")
        except subprocess.CalledProcessError as e:
            _fail("%s failed (exit %d); make deps installs the packages ztrain needs" % (" ".join(cmd), e.returncode))
    return os.path.join(build, "lib", "libztrain.so")


def _installed():
    try:
        libdir = subprocess.run(["pkg-config", "--variable=libdir", "ztrain"], check=True,
                                capture_output=True, text=True).stdout.strip()
    except (FileNotFoundError, subprocess.CalledProcessError):
        return None
    path = os.path.join(libdir, "libztrain.so")
    return path if os.path.exists(path) else None


def find_library():
    path = os.environ.get("ZTRAIN_LIBRARY")
    if path:
        if not os.path.isfile(path):
            _fail("ZTRAIN_LIBRARY=%s: no such file" % path)
        return path
    path = _from_tree() or _installed()
    if not path:
        _fail("not in a ztrain source tree, ZTRAIN_LIBRARY is not set, and pkg-config finds no ztrain")
    return path


class BuildWithLibrary(build_py):
    def run(self):
        # the staging folder afresh: what an earlier build copied there (a
        # package that has since left the source) would ride in the wheel
        shutil.rmtree(self.build_lib, ignore_errors=True)
        super().run()
        src = os.path.realpath(find_library())
        dest = os.path.join(self.build_lib, "ztrain", "_lib")
        os.makedirs(dest, exist_ok=True)
        shutil.copyfile(src, os.path.join(dest, "libztrain.so"))


class BinaryDistribution(Distribution):
    def has_ext_modules(self):  # the wheel holds a native library: tag it for this platform
        return True


setup(cmdclass={"build_py": BuildWithLibrary}, distclass=BinaryDistribution)
