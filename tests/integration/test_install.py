"""libztrain as a library: `cmake --install` into a temporary prefix, then a
small C program and a small C++ program built with nothing but
`pkg-config --cflags --libs ztrain` run against it: two processes doing a
ring all-reduce (C with C, C++ with C++, and C with C++), and a push and
pull against the installed ztrain-paramserver; `man ztrain run` and every
other manual page from the installed prefix. And the Python package as a
newcomer installs it: `pip install ./python` into a fresh venv, which
builds libztrain by itself."""
import os
import re
import shutil
import socket
import subprocess
import unittest

import pyvenv
import ztest  # noqa: E402
from ztest import tmpdir

BUILD = os.environ.get("ZT_BUILD", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "install")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Install(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.prefix = tmpdir("install-")
        r = subprocess.run(["cmake", "--install", BUILD, "--prefix", cls.prefix],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        # as the README says: PKG_CONFIG_PATH to build, and nothing to run (no
        # LD_LIBRARY_PATH: ztrain.pc gives the program a run path)
        cls.env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(cls.prefix, "lib", "pkgconfig"), ZT_LOG_LEVEL="warn")
        cls.env.pop("LD_LIBRARY_PATH", None)
        cls.exe = {}
        for lang, cc, src, pc in (("c", "cc", "example.c", "ztrain"), ("c++", "c++", "example.cpp", "ztrain"),
                                  ("c-static", "cc", "example.c", "ztrain-static")):
            flags = subprocess.run(["pkg-config", "--cflags", "--libs", pc], capture_output=True,
                                   text=True, env=cls.env, check=True).stdout.split()
            out = os.path.join(cls.prefix, "example-" + lang)
            r = subprocess.run([cc, "-Wall", "-Werror", os.path.join(SRC, src), "-o", out] + flags,
                               capture_output=True, text=True, env=cls.env, timeout=120)
            assert r.returncode == 0, "%s %s: %s" % (cc, src, r.stderr)
            cls.exe[lang] = out

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.prefix, ignore_errors=True)

    def test_man_pages(self):
        """`man ztrain run` (and every page) from the installed share/man."""
        env = dict(os.environ, MANPATH=os.path.join(self.prefix, "share", "man"), MANWIDTH="100", MANPAGER="cat",
                   PAGER="cat")
        for words, says in ((["ztrain", "run"], "ztrain run FILE"), (["ztrain"], "ztrain tune STUDY.json"),
                            (["ztrain", "tune"], "--study-dir DIR"), (["ztrain-worker"], "--learning_rate"),
                            (["ztrain-hosts"], "--host NAME=ADDRESS")):
            r = subprocess.run(["man", *words], capture_output=True, text=True, env=env, timeout=60)
            self.assertEqual(r.returncode, 0, " ".join(words) + ": " + r.stderr)
            self.assertIn(says, r.stdout.replace("\u2010", "-"), " ".join(words))

    def test_layout(self):
        p = self.prefix
        for f in ("bin/ztrain", "bin/ztrain-worker", "bin/ztrain-paramserver", "bin/ztrain-reducer",
                  "bin/ztrain-hosts", "share/man/man1/ztrain-run.1",
                  "bin/ztrain-evaluator", "bin/ztrain-coordinator", "lib/libztrain.a",
                  "lib/libztrain.so", "lib/pkgconfig/ztrain.pc", "include/ztrain/ztrain.h"):
            self.assertTrue(os.path.exists(os.path.join(p, f)), f)
        # Only the public API is installed: no private header of lib/.
        self.assertEqual(sorted(os.listdir(os.path.join(p, "include"))), ["ztrain"])
        for h in os.listdir(os.path.join(p, "include", "ztrain")):
            with open(os.path.join(p, "include", "ztrain", h)) as f:
                self.assertIn('extern "C"', f.read(), h)
        # The shared library was linked against the installed one, not the
        # build's, and is found with no LD_LIBRARY_PATH (the run path).
        ldd = subprocess.run(["ldd", self.exe["c"]], capture_output=True, text=True, env=self.env).stdout
        self.assertNotIn("not found", ldd)
        found = re.search(r"libztrain\.so\.\d+ => (\S+)", ldd)
        self.assertTrue(found, ldd)
        self.assertEqual(os.path.dirname(os.path.realpath(found.group(1))), os.path.realpath(os.path.join(p, "lib")))
        # ztrain-static.pc links libztrain.a into the program.
        ldd = subprocess.run(["ldd", self.exe["c-static"]], capture_output=True, text=True, env=self.env).stdout
        self.assertNotIn("libztrain", ldd)
        self.assertIn("libczmq", ldd)

    def run_ring(self, a, b):
        """Ranks 0 (program a) and 1 (program b) of a ring; their exit codes and outputs."""
        eps = ["tcp://127.0.0.1:%d" % free_port() for _ in range(2)]
        procs = [subprocess.Popen([self.exe[lang], "ring", str(r)] + eps, env=self.env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for r, lang in enumerate((a, b))]
        try:
            outs = [p.communicate(timeout=60) for p in procs]
        finally:
            for p in procs:
                p.kill()
                p.wait()
        return procs, outs

    def ring(self, a, b):
        procs, outs = self.run_ring(a, b)
        for p, (out, err) in zip(procs, outs):
            self.assertEqual(p.returncode, 0, err)
            self.assertIn("ok (libztrain ", out)

    def test_ring_c(self):
        self.ring("c", "c")

    def test_ring_cxx(self):
        self.ring("c++", "c++")

    def test_ring_static(self):
        self.ring("c-static", "c")

    def test_ring_mixed_fails_on_shape(self):
        # The C program registers 1000 floats, the C++ one 4096: commit names the mismatch.
        procs, outs = self.run_ring("c", "c++")
        self.assertTrue(all(p.returncode != 0 for p in procs), outs)
        self.assertTrue(any("1000" in err and "4096" in err for _, err in outs), outs)

    def ps(self, lang):
        ep = "tcp://127.0.0.1:%d" % free_port()
        srv = subprocess.Popen([os.path.join(self.prefix, "bin", "ztrain-paramserver"), "--bind", ep,
                                "--index", "0", "--servers", "1"], env=self.env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            r = subprocess.run([self.exe[lang], "ps", ep], capture_output=True, text=True,
                               env=self.env, timeout=60)
        finally:
            srv.terminate()  # a clean exit unlinks its shared memory and ipc twin
            try:
                srv.wait(timeout=10)
            except subprocess.TimeoutExpired:
                srv.kill()
                srv.wait()
        self.assertEqual(srv.returncode, 0)
        self.assertFalse([f for f in os.listdir("/dev/shm") if f.startswith("ztrain-psv-%d-" % srv.pid)])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("ok (libztrain ", r.stdout)

    def test_ps_c(self):
        self.ps("c")

    def test_ps_cxx(self):
        self.ps("c++")


class Configure(unittest.TestCase):
    """A second configure of the same build folder changes no compile or link
    flag, so `make test` after `make demo` rebuilds nothing."""

    def test_second_configure_changes_nothing(self):
        top = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
        b = tmpdir("configure-")
        self.addCleanup(shutil.rmtree, b, True)

        def flags():
            out = {}
            for root, _, files in os.walk(b):
                for f in files:
                    if f in ("flags.make", "link.txt"):
                        with open(os.path.join(root, f)) as fh:
                            out[os.path.relpath(os.path.join(root, f), b)] = fh.read()
            return out

        runs = []
        for _ in range(2):
            r = subprocess.run(["cmake", "-S", top, "-B", b, "-DCMAKE_BUILD_TYPE=RelWithDebInfo"],
                               capture_output=True, text=True, timeout=240)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            runs.append(flags())
        self.assertGreater(len(runs[0]), 10)
        for name in runs[0]:
            self.assertEqual(runs[0][name], runs[1].get(name), name)


class PythonPackage(unittest.TestCase):
    def test_pip_install_builds_the_library(self):
        py, d = pyvenv.make()  # no ZTRAIN_LIBRARY: pip builds it from this tree
        self.addCleanup(shutil.rmtree, d, True)
        code = ("import ztrain, sys\n"
                "print(ztrain.version(), ztrain.__file__)\n"
                "try:\n    ztrain.init()\n"
                "except ztrain.ZtrainError as e:\n    print('refused', e.code, e)\n")
        env = {k: v for k, v in os.environ.items() if k not in ("CLUSTER_SPEC", "ZT_POOL", "ZT_INDEX")}
        r = subprocess.run([py, "-c", code], capture_output=True, text=True, timeout=60, cwd=d, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(os.path.join(d, "lib"), r.stdout)            # the venv's copy, not the tree's
        self.assertRegex(r.stdout, r"^\d+\.\d+\.\d+ ")
        self.assertIn("refused -8 ztrain.init(): not a replica of a ztrain job", r.stdout)
        libs = [os.path.join(dp, f) for dp, _, fs in os.walk(d) for f in fs if f == "libztrain.so"]
        self.assertEqual(len(libs), 1, libs)
        # smdistributed's stand-in ships inside ztrain's package (the
        # coordinator puts it on the path of the jobs that ask for it), never
        # as a package of that name that would shadow AWS's own
        r = subprocess.run([py, "-c", "import smdistributed"], capture_output=True, text=True, timeout=60, cwd=d,
                           env=env)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("No module named 'smdistributed'", r.stderr)
        shims = [os.path.join(dp, f) for dp, _, fs in os.walk(d) for f in fs if f == "torch_smddp.py"]
        self.assertEqual([os.path.relpath(p, d).split(os.sep)[-6:] for p in shims],
                         [["ztrain", "_shim", "smdistributed", "dataparallel", "torch", "torch_smddp.py"]])


if __name__ == "__main__":
    ztest.main()
