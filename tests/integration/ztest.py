"""Helpers for ztrain's integration tests: run the real binaries, poll with a
deadline, and always clean up what a test started."""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

BIN = os.environ.get("ZT_BIN", os.path.join(os.path.dirname(__file__), "..", "..", "build", "bin"))
ZTRAIN = os.path.join(BIN, "ztrain")
TMP_ROOT = os.environ.get("ZT_TEST_TMP", tempfile.gettempdir())


def ztrain(*args, env=None, timeout=60):
    """Runs ztrain to completion; returns CompletedProcess (text)."""
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([ZTRAIN, *args], capture_output=True, text=True, env=e, timeout=timeout)


_MADE = []  # this process's tmpdir()s, removed when every test passed (main)


def tmpdir(prefix):
    os.makedirs(TMP_ROOT, exist_ok=True)
    d = tempfile.mkdtemp(prefix=prefix, dir=TMP_ROOT)
    _MADE.append(d)
    return d


def _remove_made(stream):
    """Removes this process's tmpdir()s (none holding a mount point: a
    test that failed to unmount keeps its folder, and says so)."""
    with open("/proc/self/mounts") as f:
        mounts = [line.split()[1] for line in f]
    for d in _MADE:
        inside = [m for m in mounts if m == d or m.startswith(d + "/")]
        if inside:
            stream.writeln("kept %s: %s is mounted there" % (d, inside[0]))
            continue
        shutil.rmtree(d, ignore_errors=True)


def write(dirname, name, text):
    path = os.path.join(dirname, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def wait_for(pred, timeout=30, step=0.05, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(step)
    raise AssertionError("timed out after %ss waiting for %s" % (timeout, what))


def load_job(job_dir):
    try:
        with open(os.path.join(job_dir, "job.json")) as f:
            return json.load(f)
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def descendants(pid):
    """Every live process whose ancestry (by /proc PPid) reaches pid."""
    parent = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                s = f.read()
            fields = s[s.rindex(")") + 2:].split()
            if fields[0] == "Z":
                continue
            parent[int(d)] = int(fields[1])
        except (OSError, ValueError):
            pass
    out = []
    for p in parent:
        q = p
        while q in parent and q > 1:
            q = parent[q]
            if q == pid:
                out.append(p)
                break
    return out


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            s = f.read()
        return s[s.rindex(")") + 2] != "Z"
    except OSError:
        return False


class Job:
    """A `ztrain run` in the background, killed at cleanup if still running."""

    def __init__(self, test, spec_path, job_dir, *extra, env=None, cwd=None):
        e = dict(os.environ)
        e.update(env or {})
        self.job_dir = job_dir
        self.proc = subprocess.Popen([ZTRAIN, "run", spec_path, "--job-dir", job_dir, *extra],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=e, cwd=cwd, start_new_session=True)
        test.addCleanup(self.kill)

    def wait(self, timeout=90):
        out, err = self.proc.communicate(timeout=timeout)
        self.out, self.err = out, err
        return self.proc.returncode

    def kill(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()


def pool(image, n, args=None, machine="n1-standard-4"):
    """A worker pool running a ztrain role image (or any image with args)."""
    p = {"machineSpec": {"machineType": machine}, "replicaCount": n,
         "containerSpec": {"imageUri": image}}
    if args:
        p["containerSpec"]["args"] = args
    return p


def job_file(d, name, pools, **scheduling):
    """Writes a CustomJob with these pools; returns its path."""
    spec = {"workerPoolSpecs": pools, "scheduling": dict({"timeout": "600s"}, **scheduling)}
    return write(d, name + ".json", json.dumps({"displayName": name, "jobSpec": spec}))


class _TimedResult(unittest.TextTestResult):
    """Prints each test's wall time after its verdict, and the slowest at
    the end, so a suite that grows slow shows where."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.times = []  # (seconds, test id)

    def startTest(self, test):
        self._started = time.monotonic()
        super().startTest(test)

    def stopTest(self, test):
        took = time.monotonic() - self._started
        self.times.append((took, test.id()))
        self.stream.writeln("    (%.1f s)" % took)
        super().stopTest(test)


class _TimedRunner(unittest.TextTestRunner):
    resultclass = _TimedResult

    def run(self, test):
        result = super().run(test)
        slow = sorted(result.times, reverse=True)[:5]
        if slow:
            self.stream.writeln("slowest: " + ", ".join("%s %.0f s" % (t.rsplit(".", 1)[-1], s) for s, t in slow))
        # what the tests made goes when all passed; a failure's stays to be read
        # (ZT_TEST_KEEP=1 keeps it always)
        if result.wasSuccessful() and not os.environ.get("ZT_TEST_KEEP"):
            _remove_made(self.stream)
        elif _MADE:
            self.stream.writeln("test folders kept under %s" % TMP_ROOT)
        return result


def main():
    """unittest.main, verbose, with each test's time."""
    unittest.main(testRunner=_TimedRunner, verbosity=2)
