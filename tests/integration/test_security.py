"""Attacks on a running job by a stranger: another local user, made by this
test (useradd) and removed after it, who knows only the job's endpoints and
runs tests/integration/zt_attack.c's attacks. Each attack must get nothing:
the job's sockets do not answer a stranger at all (CURVE, keys only the
job's user can read), not even one who has learnt the server key, and the
job ends SUCCEEDED as it would have. Skipped (77) where users cannot be
made.

The same attacks are then made by an insider holding a replica's keys (as
a compromised replica would): the hardened handlers refuse every message
with a reason, and a replica cannot speak for another.

Also: a displayName cannot place the job folder outside ZT_JOBS_DIR."""
import glob
import json
import os
import pwd
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import threading
import time
import unittest
import urllib.request

import ztest  # noqa: E402
from ztest import BIN, Job, job_file, load_job, pool, tmpdir, wait_for, write

ATTACK = os.environ.get("ZT_ATTACK", os.path.join(BIN, "..", "tests", "zt_attack"))
FAST = {"ZT_STOP_GRACE_MS": "3000", "ZT_HEARTBEAT_MS": "300"}
QUICK = {"ZT_ATTACK_WAIT_MS": "2000"}  # for an attack that must get no answer at all


class Stranger:
    """A local user without the job's rights, for the length of the tests."""

    def __init__(self):
        # users an earlier run made and could not remove (killed at its timeout)
        with open("/etc/passwd") as f:
            entries = f.read().splitlines()
        for entry in entries:
            m = re.match(r"ztx(\d+):", entry)
            if m and not os.path.exists("/proc/%s" % m.group(1)):
                subprocess.run(["userdel", "ztx" + m.group(1)], capture_output=True, timeout=30)
        # and the planted "regions" of such a run (its cleanups never ran)
        for name in os.listdir("/dev/shm"):
            m = re.match(r"ztrain-evil-(\d+)-\d+$", name)
            if m and not os.path.exists("/proc/%s" % m.group(1)):
                os.unlink(os.path.join("/dev/shm", name))
        self.name = "ztx%d" % os.getpid()
        subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", self.name],
                       check=True, capture_output=True, timeout=30)

    def sh(self, command):
        return subprocess.run(["runuser", "-u", self.name, "--", "sh", "-c", command], capture_output=True,
                              text=True, timeout=60)

    def run(self, *args, timeout=120):
        """An attack that must get nothing: no answer within 2 s is taken as none."""
        return subprocess.run(["runuser", "-u", self.name, "--", "env", "ZT_ATTACK_WAIT_MS=2000", ATTACK] + list(args),
                              capture_output=True, text=True, timeout=timeout)

    def remove(self):
        subprocess.run(["userdel", self.name], capture_output=True, timeout=30)


STRANGER = None


def setUpModule():
    global STRANGER
    STRANGER = Stranger()


def tearDownModule():
    if STRANGER:
        STRANGER.remove()


def replica(job, name):
    return [r for r in job["replicas"] if r["name"] == name][0]


def hashes(out):
    return dict(re.findall(r" (workerpool\d-\d)\[\d+\]: params fnv1a ([0-9a-f]{16})", out))


def tcp(address):
    return "tcp://" + address


def insider(job_dir, name, *args, extra_env=None):
    """zt_attack with replica name's credentials (as root, the job's user)."""
    env = dict(os.environ, ZT_CREDENTIALS=os.path.join(job_dir, "credentials", name + ".key"), **(extra_env or {}))
    return subprocess.run([ATTACK] + list(args), env=env, capture_output=True, text=True, timeout=120)


class StrangerAttacks(unittest.TestCase):
    def start(self, pools, name):
        d = tmpdir("sec-")
        job_dir = os.path.join(d, "job")
        job = Job(self, job_file(d, name, pools), job_dir, env=FAST)
        wait_for(lambda: (load_job(job_dir) or {}).get("state") == "RUNNING", timeout=120, what="RUNNING")
        return job, job_dir

    def wait_training(self, job_dir):
        """Until the chief logs a step (the servers are configured)."""
        def stepped():
            with open(os.path.join(job_dir, "replica-logs", "workerpool0-0.log")) as f:
                return re.search(r"workerpool0-0\[\d+\]: step \d+/", f.read())
        wait_for(stepped, timeout=120, what="training")

    def attack_all(self, run, *runs):
        """Every attack at once, each by run(*args): their results, in order."""
        out = [None] * len(runs)

        def one(i):
            out[i] = run(*runs[i])
        threads = [threading.Thread(target=one, args=(i,)) for i in range(len(runs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return out

    def assertAllRefused(self, res):
        self.assertEqual(res.returncode, 0, res.stdout[-2000:] + res.stderr[-1000:])
        self.assertRegex(res.stdout, r"refused [1-9]\d*, accepted 0, unanswered 0")

    def both(self, job_dir, *attacks):
        """Each attack at once by the stranger, who must get nothing, and by
        an insider with workerpool1-0's keys: the insider's results."""
        runs = [(STRANGER.run, a) for a in attacks] + [(lambda *a: insider(job_dir, "workerpool1-0", *a), a)
                                                       for a in attacks]
        out = self.attack_all(lambda run, a: run(*a), *runs)
        for res in out[:len(attacks)]:
            self.assertNothing(res)
        return out[len(attacks):]

    def assertNothing(self, res):
        """Not one answer, not one stray message: the socket never talked."""
        self.assertEqual(res.returncode, 3, res.stdout[-2000:] + res.stderr[-1000:])
        self.assertRegex(res.stdout, r"refused 0, accepted 0, unanswered [1-9]\d*; other messages received 0")

    def test_parameter_server_ranges(self):
        # a pull of 2^63-1 elements, pushes at 2^62 with a 4-byte frame,
        # every 0.3 s for 3 s, to both servers: each refused, no crash, no
        # restart, and the job trains on to SUCCEEDED
        args = ["--hidden=64", "--epochs=6", "--log_every=100"]
        job, job_dir = self.start([pool("ztrain-worker", 1, args), pool("ztrain-worker", 1, args),
                                   pool("ztrain-paramserver", 2)], "psattack")
        self.wait_training(job_dir)
        servers = [replica(load_job(job_dir), "workerpool2-%d" % i) for i in range(2)]
        for res in self.both(job_dir, *[("ps-ranges", tcp(s["address"]), "5") for s in servers]):
            self.assertAllRefused(res)
        # nor can the stranger take the model (a snapshot of each shard) or
        # configure a server with a model of its own
        for s in servers:
            self.assertNothing(STRANGER.run("ps-steal", tcp(s["address"])))
        self.assertEqual(job.wait(timeout=300), 0, job.err[-3000:])
        j = load_job(job_dir)
        self.assertEqual(j["state"], "SUCCEEDED")
        for s in servers:
            self.assertEqual(replica(j, s["name"])["restarts"], 0)
        self.assertGreater(j["metrics"]["workerpool0-0"]["accuracy"]["value"], 0.75)

    def test_reducer_ranges(self):
        # pieces whose offset + count overflows, to both reducers of a sync
        # job: each refused, no reducer restarts, equal weights at the end
        args = ["--hidden=64", "--epochs=5", "--log_every=100"]
        job, job_dir = self.start([pool("ztrain-worker", 1, args), pool("ztrain-worker", 1, args),
                                   pool("ztrain-reducer", 2)], "redattack")
        self.wait_training(job_dir)  # the workers have given the reducers their layout
        reducers = [replica(load_job(job_dir), "workerpool2-%d" % i) for i in range(2)]
        # also another layout announced to a reducer of the running group:
        # refused to its sender alone (it used to fail every worker with
        # "mismatch")
        out = self.both(job_dir, *[("reducer-pieces", tcp(r["address"]), "5") for r in reducers],
                        ("reducer-layout", tcp(reducers[0]["address"])))
        for res in out:
            self.assertAllRefused(res)
        self.assertIn("not the running group's", out[2].stdout)
        self.assertEqual(job.wait(timeout=300), 0, job.err[-3000:])
        j = load_job(job_dir)
        for r in reducers:
            self.assertEqual(replica(j, r["name"])["restarts"], 0)
        h = hashes(job.out)
        self.assertEqual(len(h), 2, job.out[-2000:])
        self.assertEqual(len(set(h.values())), 1, h)

    def test_parameter_server_nan(self):
        # NaN and infinite gradients pushed to a server of a running async
        # job: refused, counted in job.json, and the model is not poisoned
        args = ["--hidden=64", "--epochs=6", "--log_every=100"]
        job, job_dir = self.start([pool("ztrain-worker", 1, args), pool("ztrain-worker", 1, args),
                                   pool("ztrain-paramserver", 2)], "psnan")
        self.wait_training(job_dir)
        server = replica(load_job(job_dir), "workerpool2-0")
        res, = self.both(job_dir, ("ps-nan", tcp(server["address"]), "5"))
        self.assertAllRefused(res)
        self.assertEqual(res.stdout.count("non-finite gradients (NaN or infinity) refused"), 10, res.stdout)
        self.assertEqual(job.wait(timeout=300), 0, job.err[-3000:])
        j = load_job(job_dir)
        self.assertEqual(j["metrics"]["workerpool2-0"]["nonfinite_refused"]["value"], 10)
        self.assertGreater(j["metrics"]["workerpool0-0"]["accuracy"]["value"], 0.75)
        self.assertRegex(job.out, r"workerpool2-0\[\d+\]: refused a push of non-finite gradients")

    def test_reducer_nan(self):
        # NaN and infinite pieces to a reducer of a running sync job: refused,
        # counted, and the workers' weights stay equal and finite
        args = ["--hidden=64", "--epochs=5", "--log_every=100"]
        job, job_dir = self.start([pool("ztrain-worker", 1, args), pool("ztrain-worker", 1, args),
                                   pool("ztrain-reducer", 2)], "rednan")
        self.wait_training(job_dir)
        red = replica(load_job(job_dir), "workerpool2-0")
        for res in self.both(job_dir, ("reducer-nan", tcp(red["address"]), "5")):
            self.assertAllRefused(res)
        self.assertEqual(job.wait(timeout=300), 0, job.err[-3000:])
        j = load_job(job_dir)
        self.assertEqual(j["metrics"]["workerpool2-0"]["nonfinite_refused"]["value"], 10)
        self.assertGreater(j["metrics"]["workerpool0-0"]["accuracy"]["value"], 0.75)
        h = hashes(job.out)
        self.assertEqual(len(set(h.values())), 1, h)

    def test_shared_memory_of_strangers(self):
        # the stranger makes "regions" in /dev/shm named as regions are: a
        # link to /etc/shadow (which the root-run server could read) and a
        # plain file of its own; pushes that say their bytes lie there are
        # refused (a region is a live process's sealed memfd, never a file
        # anyone can plant), and the server maps neither. 24 epochs: the
        # job must still run while its regions are listed (6 ended first once)
        args = ["--hidden=64", "--epochs=24", "--log_every=100"]
        job, job_dir = self.start([pool("ztrain-worker", 1, args), pool("ztrain-worker", 1, args),
                                   pool("ztrain-paramserver", 2)], "shmattack")
        self.wait_training(job_dir)
        link, own = "ztrain-evil-%d-1" % os.getpid(), "ztrain-evil-%d-2" % os.getpid()
        made = STRANGER.sh("ln -s /etc/shadow /dev/shm/%s && head -c 65536 /dev/zero > /dev/shm/%s" % (link, own))
        self.assertEqual(made.returncode, 0, made.stderr)
        self.addCleanup(lambda: [os.unlink("/dev/shm/" + n) for n in (link, own) if os.path.lexists("/dev/shm/" + n)])
        server = replica(load_job(job_dir), "workerpool2-0")
        res, = self.both(job_dir, ("ps-shm", tcp(server["address"]), link, own))
        self.assertAllRefused(res)
        self.assertEqual(res.stdout.count("no such region of that process"), 2, res.stdout)
        with open("/proc/%d/maps" % server["pid"]) as f:
            maps = f.read()
        self.assertNotIn("ztrain-evil", maps)
        self.assertNotIn("/etc/shadow", maps)
        # the job's own regions are sealed memfds, in no folder: the
        # stranger cannot open them, and nobody (the job's own user
        # included) can shrink one under the processes mapping it (a SIGBUS)
        self.assertEqual([n for n in os.listdir("/dev/shm") if n.startswith("ztrain-") and "evil" not in n], [])
        regions = []
        for r in load_job(job_dir)["replicas"]:
            fds = "/proc/%d/fd" % r["pid"]
            for fd in os.listdir(fds):
                try:
                    if os.readlink(os.path.join(fds, fd)).startswith("/memfd:ztrain-"):
                        regions.append(os.path.join(fds, fd))
                except OSError:
                    pass
        self.assertGreaterEqual(len(regions), 3, regions)  # both workers' and the servers'
        checked = 0
        for path in regions[:4]:
            res = STRANGER.sh("cat %s > /dev/null" % path)
            self.assertNotEqual(res.returncode, 0, path)
            try:
                fd = os.open(path, os.O_RDWR)
            except FileNotFoundError:  # its process let the region go meanwhile (a step's end)
                continue
            try:
                self.assertIn("Permission denied", res.stderr)
                with self.assertRaises(PermissionError):
                    os.ftruncate(fd, 0)
                checked += 1
            finally:
                os.close(fd)
        self.assertGreater(checked, 0, regions)
        self.assertEqual(job.wait(timeout=300), 0, job.err[-3000:])

    def test_reducer_layout_too_large(self):
        # a fresh reducer (no job has configured it) told of a tensor of 2^40
        # elements, and of one whose shape's product overflows: refused
        d = tmpdir("sec-")
        port = __import__("socket").socket()
        port.bind(("127.0.0.1", 0))
        ep = "tcp://127.0.0.1:%d" % port.getsockname()[1]
        port.close()
        env = dict(os.environ, ZT_IPC_DIR=os.path.join(d, "ipc"))
        red = subprocess.Popen([os.path.join(BIN, "ztrain-reducer"), "--bind", ep, "--index", "0", "--servers", "1"], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            res = STRANGER.run("reducer-layout", ep)
            self.assertAllRefused(res)
            self.assertIn("layout refused", res.stdout)
            self.assertIsNone(red.poll(), "the reducer died")
        finally:
            red.terminate()
            red.wait(timeout=30)


class SealedBulk(unittest.TestCase):
    def test_stranger_on_a_sealed_parameter_server(self):
        # ZT_DATA_IPC=off: the servers' TCP ports are served and open to any
        # address, as between hosts, and the workers' bulk there is sealed
        # (no CURVE). A stranger's plain pushes of NaN, its snapshot request
        # and its configuration get nothing: refused, counted, never applied.
        # The evaluator fetches the chief's checkpoints from its file server
        # over a sealed stream too
        # long enough to outlast the attacks on a fast machine too
        args = ["--hidden=64", "--epochs=48", "--log_every=100", "--checkpoint_steps=200"]
        d = tmpdir("sec-")
        job_dir = os.path.join(d, "job")
        job = Job(self, job_file(d, "sealed", [pool("ztrain-worker", 1, args), pool("ztrain-worker", 1, args),
                                               pool("ztrain-paramserver", 1), pool("ztrain-evaluator", 1)]), job_dir,
                  env=dict(FAST, ZT_DATA_IPC="off"))
        wait_for(lambda: (load_job(job_dir) or {}).get("state") == "RUNNING", timeout=120, what="RUNNING")
        StrangerAttacks.wait_training(self, job_dir)
        server = replica(load_job(job_dir), "workerpool2-0")
        for attack in (("ps-nan", tcp(server["address"]), "3"), ("ps-steal", tcp(server["address"]))):
            res = STRANGER.run(*attack)
            self.assertRegex(res.stdout, r"accepted 0,", res.stdout[-2000:] + res.stderr[-1000:])
            self.assertNotIn("accepted (", res.stdout)
        # frames of 1 GiB (sent whole) and 4 GiB (half sent, the connection
        # held) before any authentication: refused as announced, the
        # server's memory as it was
        host, port = server["address"].rsplit(":", 1)
        before = rss_kib(server["pid"])
        for size, send, hold in ((1 << 30, 1 << 30, 0), (4 << 30, 2 << 30, 3)):
            res = subprocess.run(["runuser", "-u", STRANGER.name, "--", "/usr/bin/python3", "-c", BIG_FRAME, host, port,
                                  str(size), str(send), str(hold), str(server["pid"])],
                                 capture_output=True, text=True, timeout=120)
            self.assertEqual(res.returncode, 0, res.stderr[-2000:])
            sent, peak = (int(x) for x in res.stdout.split())
            self.assertLess(sent, 256 << 20, res.stdout)  # dropped at the header, not read to the end
            self.assertLess(max(peak, rss_kib(server["pid"])) - before, 64 << 10, (before, res.stdout))
        # 60 connections at once from the stranger's address (the job's
        # own): past ZT_PEER_CONNECTIONS (4 per replica + 16 = 32 in all,
        # the workers' own among them) each handshake is refused
        res = subprocess.run(["runuser", "-u", STRANGER.name, "--", "/usr/bin/python3", "-c", MANY_CONNECTIONS, host,
                              port, "60", "2"], capture_output=True, text=True, timeout=120)
        self.assertEqual(res.returncode, 0, res.stderr[-2000:])
        admitted, refused = (int(x) for x in res.stdout.split())
        self.assertLessEqual(admitted, 32, res.stdout)
        self.assertGreaterEqual(refused, 28, res.stdout)
        self.assertIsNone(job.proc.poll(), "the job ended before the attacks did: make it longer")
        self.assertEqual(job.wait(timeout=300), 0, job.err[-3000:])
        self.assertIn("more than ZT_PEER_CONNECTIONS=32 allows", job.out + job.err)
        j = load_job(job_dir)
        self.assertGreaterEqual(j["metrics"]["workerpool2-0"]["seal_refused"]["value"], 1)
        self.assertNotIn("nonfinite_refused", j["metrics"]["workerpool2-0"])  # never opened, never applied
        self.assertEqual(replica(j, "workerpool2-0")["restarts"], 0)
        self.assertGreater(j["metrics"]["workerpool0-0"]["accuracy"]["value"], 0.75)
        self.assertRegex(job.out, r"workerpool1-0\[\d+\]: data plane to \S+: this host, over loopback tcp, sealed")
        self.assertTrue([e for e in j["evaluations"] if e["name"] == "eval_accuracy"], j["evaluations"])
        # fetched, sealed: every periodic checkpoint (the final model may be
        # asked for as the chief exits, and is then read from the job's folder)
        self.assertNotRegex(job.out + job.err, r"cannot fetch checkpoint|checkpoints/ckpt-\d+: .*; reading it from")
        self.assertRegex(job.out + job.err, r"workerpool3-0\[\d+\]: data plane to \S+: this host, over loopback "
                         r"tcp, sealed")
        # one evaluation per checkpoint, each fetched afresh, said once per address
        evals = [e for e in j["evaluations"] if e["name"] == "eval_accuracy"]
        said = re.findall(r"workerpool3-0\[\d+\]: data plane to (\S+):", job.out + job.err)
        self.assertTrue(said and len(said) == len(set(said)), (len(evals), said))


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1))


# A stranger's ZeroMQ peer (ZMTP 3, NULL security) announcing one frame of
# SIZE bytes and sending SEND of them, then holding the connection HOLD s;
# prints the bytes the server took and the server's peak RSS meanwhile (KiB,
# read from /proc, which any user may)
BIG_FRAME = r"""
import re, socket, struct, sys, time
host, port, size, send, hold, pid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), \
    float(sys.argv[5]), int(sys.argv[6])
def rss():
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1))
s = socket.create_connection((host, port))
s.sendall(b"\xff" + b"\0" * 8 + b"\x7f" + b"\x03\x00" + b"NULL".ljust(20, b"\0") + b"\0" + b"\0" * 31)
ready = b"\x05READY" + b"\x0bSocket-Type" + struct.pack(">I", 6) + b"DEALER"
s.sendall(b"\x04" + bytes([len(ready)]) + ready + b"\x02" + struct.pack(">Q", size))
sent, peak, block = 0, rss(), b"\0" * (1 << 20)
try:
    while sent < send:
        sent += s.send(block)
        if sent % (64 << 20) < (1 << 20):
            peak = max(peak, rss())
except OSError:
    pass
end = time.monotonic() + hold
while time.monotonic() < end:
    peak = max(peak, rss())
    time.sleep(0.1)
print(sent, peak)
"""

# A stranger's N ZeroMQ peers (ZMTP 3, NULL security) opened at once and
# held HOLD s; prints how many the server admitted (its READY) and refused
# (its ERROR, or the connection closed)
MANY_CONNECTIONS = r"""
import socket, struct, sys, time
host, port, n, hold = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
ready = b"\x05READY" + b"\x0bSocket-Type" + struct.pack(">I", 6) + b"DEALER"
hello = b"\xff" + b"\0" * 8 + b"\x7f" + b"\x03\x00" + b"NULL".ljust(20, b"\0") + b"\0" + b"\0" * 31 + \
    b"\x04" + bytes([len(ready)]) + ready
def take(s, k):
    b = b""
    while len(b) < k:
        c = s.recv(k - len(b))
        if not c:
            raise EOFError
        b += c
    return b
socks = []
for _ in range(n):
    s = socket.create_connection((host, port))
    s.settimeout(10)
    s.sendall(hello)
    socks.append(s)
admitted = refused = 0
for s in socks:
    try:
        take(s, 64)
        flags = take(s, 1)[0]
        size = struct.unpack(">Q", take(s, 8))[0] if flags & 2 else take(s, 1)[0]
        body = take(s, size)
        if body[1:1 + body[0]] == b"READY":
            admitted += 1
        else:
            refused += 1
    except (OSError, EOFError):
        refused += 1
time.sleep(hold)
print(admitted, refused)
"""

RELAY = os.environ.get("ZT_RELAY", os.path.join(BIN, "..", "tests", "zt_relay"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SealedBulkTampering(unittest.TestCase):
    def test_man_in_the_middle_and_foreign_keys(self):
        """A sync job over TCP (as between hosts) whose worker workerpool1-0
        reaches its reducer through a relay run by the stranger, who flips
        one bit in two of the worker's pieces, replays two more, flips
        one bit in two of the reducer's sums, and sends the worker's stream
        opening again on its connection and from one of its own; beside it, the stranger opens
        a stream under a secret of its own (another job's keys) and sends
        plain NaN pieces and a layout, and an insider opens one under
        another incarnation. None of it is ever summed or used: the
        tampered and replayed frames and the plain messages are dropped and
        counted, the openings get no answer, the worker sends again what
        went unanswered, and the job ends SUCCEEDED with equal weights.
        The reducer opens its workers' pieces on 2 threads
        (ZT_REDUCER_THREADS), as it does on a host of 8 cores or more, and
        serves its port on its own thread (ZT_BULK_DIRECT=all)."""
        args = ["--hidden=64", "--epochs=24", "--log_every=100"]
        d = tmpdir("sec-")
        os.chmod(d, 0o755)
        job_dir = os.path.join(d, "job")
        port = free_port()
        relay = subprocess.Popen(["runuser", "-u", STRANGER.name, "--", RELAY, str(port), "2", "2", "2", "1"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.addCleanup(lambda: relay.poll() is None and relay.kill())
        self.assertIn("listening", relay.stdout.readline())
        # workerpool1-0 is the built-in worker with its reducer's address
        # replaced by the relay's
        through = {"imageUri": "local", "command": ["sh", "-c", 'ZT_REDUCERS=127.0.0.1:%d exec "$0" "$@"' % port,
                                                    os.path.join(BIN, "ztrain-worker")], "args": args}
        spec = job_file(d, "tamper", [pool("ztrain-worker", 1, args),
                                      {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
                                       "containerSpec": through},
                                      pool("ztrain-reducer", 1)])
        job = Job(self, spec, job_dir, env=dict(FAST, ZT_DATA_IPC="off", ZT_REDUCER_THREADS="2", ZT_BULK_DIRECT="all"))
        wait_for(lambda: (load_job(job_dir) or {}).get("state") == "RUNNING", timeout=120, what="RUNNING")
        red = replica(load_job(job_dir), "workerpool2-0")
        relay.stdin.write(red["address"] + "\n")
        relay.stdin.flush()
        StrangerAttacks.wait_training(self, job_dir)
        # every attack at once (a job on two busy cores must outlast them)
        stranger, layout, foreign, other = StrangerAttacks.attack_all(
            self,
            lambda run, *a: run(*a),
            (STRANGER.run, "reducer-nan", tcp(red["address"]), "3"),
            (STRANGER.run, "reducer-layout", tcp(red["address"])),
            (STRANGER.run, "seal-open", tcp(red["address"])),
            (lambda *a: insider(job_dir, "workerpool1-0", *a, extra_env={"ZT_ATTACK_INCARNATION": "7",
                                                                          "ZT_ATTACK_WAIT_MS": "2000"}),
             "seal-open", tcp(red["address"])))
        for res in (stranger, layout):
            self.assertRegex(res.stdout, r"accepted 0,", res.stdout[-2000:] + res.stderr[-1000:])
        self.assertRegex(foreign.stdout, r"accepted 0, unanswered 1", foreign.stdout + foreign.stderr)
        self.assertRegex(other.stdout, r"accepted 0, unanswered 1", other.stdout + other.stderr)
        self.assertIsNone(job.proc.poll(), "the job ended before the attacks did: make it longer")
        self.assertEqual(job.wait(timeout=300), 0, job.err[-3000:])
        relay.stdin.close()
        out = relay.stdout.read()
        relay.wait(timeout=30)
        self.assertIn("flipped 2 up, replayed 2 up, flipped 2 down", out)
        # the worker's opening sent again on its connection and beside it:
        # the second is answered (and can do nothing), the first re-keys
        # nothing; the worker's messages open on, as the weights say
        self.assertRegex(out, r"opening replayed 2 times, [1-9]\d* frames answered beside")
        j = load_job(job_dir)
        # 2 flipped + 2 replayed pieces, 2 foreign openings, the plain
        # messages: each refused and counted, none opened, none summed
        self.assertGreaterEqual(j["metrics"]["workerpool2-0"]["seal_refused"]["value"], 7,
                                [l for l in (job.out + job.err).splitlines() if "workerpool2-0" in l][-20:])
        self.assertNotIn("nonfinite_refused", j["metrics"]["workerpool2-0"])
        self.assertEqual(sum(r["restarts"] for r in j["replicas"]), 0,
                         [l for l in (job.out + job.err).splitlines() if re.search(" [EW] |exit|restart", l)][-30:])
        self.assertRegex(job.out, r"workerpool1-0\[\d+\]: data plane to \S+: this host, over loopback tcp, sealed")
        self.assertRegex(job.out + job.err, r"workerpool2-0\[\d+\]: 2 threads open the workers' sealed pieces")
        self.assertRegex(job.out + job.err, r"workerpool2-0\[\d+\]: data plane to \S+: .*served on this thread")
        self.assertRegex(job.out + job.err, r"workerpool1-0\[\d+\]: .*reducer 0 \(127\.0\.0\.1:%d\): a message that "
                                            r"is not sealed under this job's keys was dropped" % port)
        h = hashes(job.out)
        self.assertEqual(len(h), 2, job.out[-2000:])
        self.assertEqual(len(set(h.values())), 1, h)
        self.assertGreater(j["metrics"]["workerpool0-0"]["accuracy"]["value"], 0.75)


class EvaluatorScratch(unittest.TestCase):
    def test_scratch_never_in_a_strangers_folder(self):
        """An evaluator with no job folder (ZT_JOB_DIR unset, as when run by
        hand) makes its scratch folder under TMPDIR. The stranger's folder
        there (0777, with folders planted at the names an evaluator used to
        take) is refused, naming it, and nothing is written in it; under a
        sticky folder of root's (as /tmp) its folder has a random name, and
        is gone at the end, the checkpoints scored."""
        args = ["--hidden=64", "--epochs=2", "--log_every=100", "--checkpoint_steps=200"]
        d = tmpdir("sec-")
        theirs = "/tmp/ztx-eval-%d" % os.getpid()
        sticky = os.path.join(d, "sticky")
        os.makedirs(sticky)
        os.chmod(d, 0o755)
        os.chmod(sticky, 0o1777)
        self.addCleanup(lambda: STRANGER.sh("rm -rf %s" % theirs))
        res = STRANGER.sh("umask 0; mkdir -m 0777 %s && for p in $(seq 1 400); do mkdir -m 0777 %s/evaluator-0.$p; done"
                          % (theirs, theirs))
        self.assertEqual(res.returncode, 0, res.stderr)
        planted = sorted(os.listdir(theirs))
        for tmp, ok in ((theirs, False), (sticky, True)):
            evaluator = {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
                         "containerSpec": {"imageUri": "local", "command": [
                             "sh", "-c", 'unset ZT_JOB_DIR; TMPDIR=%s exec "$0" "$@"' % tmp,
                             os.path.join(BIN, "ztrain-evaluator")]}}
            job_dir = os.path.join(d, "job-%s" % ok)
            job = Job(self, job_file(d, "scratch-%s" % ok, [pool("ztrain-worker", 1, args), {}, {}, evaluator],
                                     restartJobOnWorkerRestart=False), job_dir, env=FAST)
            job.wait(timeout=300)
            with open(os.path.join(job_dir, "replica-logs", "workerpool3-0.log")) as f:
                log = f.read()
            if not ok:
                self.assertRegex(log, r"cannot make a scratch folder %s/ztrain-evaluator-0\.XXXXXX: %s belongs to user "
                                 r"%s \(uid \d+\) and has mode 0777" % (re.escape(theirs), re.escape(theirs),
                                                                       STRANGER.name))
                self.assertEqual(sorted(os.listdir(theirs)), planted)
            else:
                self.assertNotIn("cannot make a scratch folder", log)
                j = load_job(job_dir)
                self.assertEqual(j["state"], "SUCCEEDED", job.err[-2000:])
                self.assertTrue([e for e in j["evaluations"] if e["name"] == "eval_accuracy"], j["evaluations"])
                self.assertEqual(os.listdir(sticky), [])


class Impostors(unittest.TestCase):
    def test_keys_decide_who_speaks(self):
        """Three would-be impostors at one running job:
        - the stranger, who has even learnt the job's server key, comes
          with a key pair of its own: the coordinator and a parameter
          server, whose job is on one host and so has no TCP peer, never
          answer its connection, and say whose it was; REGISTER as the
          chief gets no WELCOME;
        - an insider with workerpool1-0's keys registers as the chief and
          reports accuracy 0.999: refused (its keys name it), counted, and
          the chief is neither displaced nor killed for "no heartbeat";
        - nobody finds a key in a replica's environment or command line."""
        args = ["--hidden=64", "--epochs=60", "--log_every=100"]  # outlasts the attacks on a fast machine too
        d = tmpdir("sec-")
        job_dir = os.path.join(d, "job")
        job = Job(self, job_file(d, "impostor", [pool("ztrain-worker", 1, args), pool("ztrain-worker", 1, args),
                                                 pool("ztrain-paramserver", 1)]), job_dir, env=FAST)
        wait_for(lambda: (load_job(job_dir) or {}).get("state") == "RUNNING", timeout=120, what="RUNNING")
        j = load_job(job_dir)
        self.assertEqual(j["security"], "curve")
        creds = os.path.join(job_dir, "credentials")
        with open(os.path.join(creds, "job.keys")) as f:
            keys = json.load(f)
        server_key = keys["serverPublic"]
        # no key in any replica's environment or command line: only the path
        secrets = [keys["serverSecret"]]
        for name in os.listdir(creds):
            if name.endswith(".key"):
                with open(os.path.join(creds, name)) as f:
                    secrets.append(json.load(f)["secret"])
        seen = 0
        for r in j["replicas"]:
            for what in ("environ", "cmdline"):
                with open("/proc/%d/%s" % (r["pid"], what), "rb") as f:
                    text = f.read().decode(errors="replace")
                for k in secrets:
                    self.assertNotIn(k, text, "%s's %s" % (r["name"], what))
            with open("/proc/%d/environ" % r["pid"], "rb") as f:
                self.assertIn(("ZT_CREDENTIALS=%s/%s.key" % (creds, r["name"])).encode(), f.read())
            seen += 1
        self.assertEqual(seen, 3)
        coordinator = j["coordinator"]
        res = insider(job_dir, "workerpool1-0", "register", coordinator, "0", "0", extra_env=QUICK)
        self.assertEqual(res.returncode, 3, res.stdout + res.stderr)
        # with the chief's own keys, from new connections, again and again
        # (each would have displaced it, got it killed as silent and used up
        # a restart): no WELCOME while the chief heartbeats and lives
        chief_pid = replica(j, "workerpool0-0")["pid"]
        for _ in range(3):
            res = insider(job_dir, "workerpool0-0", "register", coordinator, "0", "0", extra_env=QUICK)
            self.assertEqual(res.returncode, 3, res.stdout + res.stderr)
        ps = replica(j, "workerpool2-0")
        for args_ in (("register", coordinator, "0", "0"), ("ps-ranges", tcp(ps["address"]), "1")):
            res = STRANGER.sh(" ".join(shlex.quote(a) for a in ("env", "ZT_ATTACK_SERVERKEY=" + server_key,
                                                                 "ZT_ATTACK_WAIT_MS=2000", ATTACK) + args_))
            self.assertEqual(res.returncode, 3, res.stdout + res.stderr)
            self.assertRegex(res.stdout, r"refused 0, accepted 0, unanswered [1-9]")
        self.assertIsNone(job.proc.poll(), "the job ended before the attacks did: make it longer")
        self.assertEqual(job.wait(timeout=300), 0, job.err[-3000:])
        j = load_job(job_dir)
        self.assertEqual(j["state"], "SUCCEEDED")
        self.assertEqual(replica(j, "workerpool0-0")["restarts"], 0)
        self.assertGreaterEqual(j["controlPlaneDrops"]["unauthenticated"], 1)
        self.assertGreaterEqual(j["controlPlaneDrops"]["wrongIdentity"], 2)  # its REGISTER and its metric
        self.assertLess(j["metrics"]["workerpool0-0"]["accuracy"]["value"], 0.99)
        self.assertGreater(j["metrics"]["workerpool0-0"]["accuracy"]["value"], 0.75)
        text = job.out + job.err
        # a job on one host serves no TCP connection: the stranger's is held
        # unanswered, then closed, and the log names whose it was
        held = (r"refused a connection to port \d+ from 127\.0\.0\.1 \(user %s, uid \d+\): this job has no TCP peer"
                % STRANGER.name)
        self.assertRegex(text, r"coordinator/0\[\d+\]: " + held)
        self.assertRegex(text, r"workerpool2-0\[\d+\]: " + held)
        self.assertRegex(text, r"refused register claiming to be workerpool0-0 from a connection that authenticated "
                               r"as workerpool1-0")
        self.assertTrue(re.search(r"REGISTER as workerpool0-0 from a new connection while workerpool0-0 runs "
                                  r"\(pid %d" % chief_pid, text), text[-2000:])


def listening_ports(pid):
    """The TCP ports process pid listens on (its sockets in /proc/net/tcp)."""
    inodes = set()
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    ports = []
    with open("/proc/%d/net/tcp" % pid) as f:
        for line in f.read().splitlines()[1:]:
            cols = line.split()
            if cols[3] == "0A" and cols[9] in inodes:  # LISTEN
                ports.append(int(cols[1].split(":")[1], 16))
    return ports


class HandshakeStorm(unittest.TestCase):
    def test_storm_of_strangers_handshakes(self):
        """The stranger storms every TCP port of a running synchronous job
        (chief, worker, reducer, coordinator) with CURVE handshakes: 40
        sockets per port with keys of its own, reconnecting every 10 ms. A
        job on one host has no TCP peer, so no port serves the storm: the
        kernel holds its connections unanswered. The job trains to its usual
        accuracy, the refusals are counted, and the log names the stranger.
        (bench/storm_bench.py measures the speed under the storm.)"""
        args = ["--hidden=64", "--epochs=3", "--batch_size=64", "--log_every=100"]
        d = tmpdir("sec-")
        job_dir = os.path.join(d, "job")
        job = Job(self, job_file(d, "storm", [pool("ztrain-worker", 1, args), pool("ztrain-worker", 1, args),
                                              pool("ztrain-reducer", 1)]), job_dir, env=FAST)
        wait_for(lambda: (load_job(job_dir) or {}).get("state") == "RUNNING", timeout=120, what="RUNNING")
        j = load_job(job_dir)
        pids = [r["pid"] for r in j["replicas"]] + [j["coordinatorProcess"]["pid"]]
        ports = []

        def all_bound():  # each replica's port, and the coordinator's
            ports[:] = sorted({p for pid in pids for p in listening_ports(pid)})
            return len(ports) >= 4
        wait_for(all_bound, timeout=120, what="every replica's port")
        storm = subprocess.Popen(["runuser", "-u", STRANGER.name, "--", ATTACK, "storm", "6"] +
                                 ["tcp://127.0.0.1:%d" % p for p in ports],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: storm.poll() is None and storm.kill())
        self.assertEqual(job.wait(timeout=300), 0, job.err[-3000:])
        out, err = storm.communicate(timeout=60)
        self.assertEqual(storm.returncode, 0, out + err)
        self.assertIn("storm: %d sockets on %d endpoints" % (40 * len(ports), len(ports)), out)
        j = load_job(job_dir)
        self.assertEqual(j["state"], "SUCCEEDED")
        self.assertGreater(j["metrics"]["workerpool0-0"]["accuracy"]["value"], 0.75)
        self.assertGreaterEqual(j["controlPlaneDrops"]["unauthenticated"], 1)
        text = job.out + job.err
        for who in ("coordinator/0", "workerpool0-0", "workerpool2-0"):
            self.assertRegex(text, r"%s\[\d+\]: refused a connection to port \d+ from 127\.0\.0\.1 \(user %s, "
                                   r"uid \d+\): this job has no TCP peer" % (re.escape(who), STRANGER.name))


HOLDER = r"""
import socket, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
held = []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port), timeout=2)
    s.sendall(b"GET /metrics HTTP/1.1\r\n")  # a request never finished
    held.append(s)
time.sleep(1.5)
def alive(s):
    s.setblocking(False)
    try:
        return s.recv(1) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False
print("open after 1.5 s:", sum(alive(s) for s in held), flush=True)
t0, open_ = time.monotonic(), list(held)
while open_ and time.monotonic() - t0 < 20:  # trickle a byte a second into each
    for s in list(open_):
        try:
            s.sendall(b"X")
        except OSError:
            open_.remove(s)
            continue
        if not alive(s):
            open_.remove(s)
    time.sleep(1)
print("open after trickling %.1f s: %d" % (time.monotonic() - t0, len(open_)), flush=True)
"""


class MetricsHolders(unittest.TestCase):
    def test_strangers_connections_do_not_starve_scrapes(self):
        """The stranger opens 64 connections to /metrics (the server's
        limit) and trickles a byte a second into each to keep them: it gets
        8, the rest are closed at once and logged with its uid, the job's
        own scrape with the token is answered meanwhile, and each of the 8
        is cut at its 10 s deadline however it trickles."""
        d = tmpdir("sec-")
        job_dir = os.path.join(d, "job")
        args = ["--hidden=64", "--epochs=40", "--log_every=200"]
        job = Job(self, job_file(d, "holders", [pool("ztrain-worker", 1, args)]), job_dir, "--metrics-port", "0",
                  env=FAST)
        url = wait_for(lambda: (load_job(job_dir) or {}).get("metricsUrl"), 60, what="metricsUrl")
        port = int(re.search(r":(\d+)/metrics$", url).group(1))
        with open(load_job(job_dir)["metricsTokenFile"]) as f:
            token = f.read().strip()
        holder = subprocess.Popen(["runuser", "-u", STRANGER.name, "--", "/usr/bin/python3", "-c", HOLDER, str(port),
                                   "64"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: holder.poll() is None and holder.kill())
        time.sleep(2)
        t0 = time.monotonic()
        req = urllib.request.Request(url, headers={"Authorization": "Bearer " + token})
        with urllib.request.urlopen(req, timeout=5) as f:
            self.assertEqual(f.status, 200)
            self.assertIn("ztrain_job_state", f.read().decode())
        self.assertLess(time.monotonic() - t0, 5)
        out, err = holder.communicate(timeout=60)
        self.assertEqual(holder.returncode, 0, out + err)
        self.assertRegex(out, r"open after 1\.5 s: [1-8]\n")
        m = re.search(r"open after trickling ([\d.]+) s: (\d+)", out)
        self.assertTrue(m, out)
        self.assertEqual(int(m.group(2)), 0, out)
        self.assertLess(float(m.group(1)), 14, out)  # cut at 10 s from their start, not kept alive by bytes
        self.assertIsNone(job.proc.poll(), "the job ended before the holder did: make it longer")
        job.proc.send_signal(signal.SIGTERM)  # a cancel: the job's processes end and clean up
        job.wait(timeout=120)
        with open(os.path.join(job_dir, "replica-logs", "coordinator.log"), errors="replace") as f:
            log = f.read()
        uid = pwd.getpwnam(STRANGER.name).pw_uid
        self.assertRegex(log, r"refused a /metrics connection from uid %d: it holds 8 already" % uid)


class FileServer(unittest.TestCase):
    def test_links_in_served_folders_serve_nothing(self):
        # links planted in the chief's checkpoint folder (to /etc/shadow, to
        # a folder outside) are not followed: the stranger asking the chief's
        # file server for them is refused, as for ".." and absolute paths
        # (the evaluators' fetches of plain files are tested with the sync
        # example)
        args = ["--hidden=32", "--epochs=300", "--train_examples=3000", "--checkpoint_steps=20"]  # stopped below
        d = tmpdir("sec-")
        job_dir = os.path.join(d, "job")
        job = Job(self, job_file(d, "links", [pool("ztrain-worker", 1, args), pool("ztrain-worker", 1, args),
                                              pool("ztrain-paramserver", 1)]), job_dir, env=FAST)
        ck = os.path.join(job_dir, "checkpoints")
        # announced, not only written: the chief's file server starts with its first announcement
        wait_for(lambda: (load_job(job_dir) or {}).get("checkpoints"), timeout=120, what="a checkpoint announced")
        os.symlink("/etc/shadow", os.path.join(ck, "shadow"))
        outside = os.path.join(d, "outside")
        os.makedirs(outside)
        write(outside, "secret.txt", "secret")
        os.symlink(outside, os.path.join(ck, "out"))
        chief = replica(load_job(job_dir), "workerpool0-0")
        ports = listening_ports(chief["pid"])
        self.assertEqual(len(ports), 1, ports)  # its file server
        ep = "tcp://127.0.0.1:%d" % ports[0]
        paths = ("checkpoints/shadow", "checkpoints/out/secret.txt", "checkpoints/../job.json", "/etc/passwd")
        out = [None, None]
        stranger = threading.Thread(target=lambda: out.__setitem__(0, STRANGER.run("file-get", ep, *paths)))
        stranger.start()
        res = insider(job_dir, "workerpool1-0", "file-get", ep, *paths)
        stranger.join()
        self.assertEqual(out[0].returncode, 3, out[0].stdout + out[0].stderr)
        self.assertIn("refused 0, accepted 0, unanswered 4", out[0].stdout)
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
        self.assertEqual(res.stdout.count("refused: denied"), 4, res.stdout)
        job.proc.terminate()
        job.wait(timeout=120)


class SquattedIpcFolder(unittest.TestCase):
    def test_strangers_ipc_folder_is_not_used(self):
        # the stranger makes the ipc folder first (as on a fresh host), open
        # to all: the job's servers bind no socket there (the stranger could
        # replace them), say why, and the job trains over loopback TCP
        squat = "/tmp/ztx-squat-%d" % os.getpid()
        made = STRANGER.sh("mkdir -m 0777 %s" % squat)
        self.assertEqual(made.returncode, 0, made.stderr)
        self.addCleanup(shutil.rmtree, squat, True)
        args = ["--hidden=64", "--epochs=1", "--train_examples=10000", "--log_every=100"]
        d = tmpdir("sec-")
        job_dir = os.path.join(d, "job")
        job = Job(self, job_file(d, "squat", [pool("ztrain-worker", 1, args), pool("ztrain-worker", 1, args),
                                              pool("ztrain-paramserver", 2)]), job_dir,
                  env=dict(FAST, ZT_IPC_DIR=squat))
        self.assertEqual(job.wait(timeout=300), 0, job.err[-3000:])
        self.assertEqual(os.listdir(squat), [])
        text = job.out + job.err
        self.assertRegex(text, r"the ipc folder %s \(ZT_IPC_DIR\) is owned by uid \d+, not by this user \(uid 0\): "
                               r"it is not used" % re.escape(squat))
        self.assertIn("this host, over loopback tcp", text)
        self.assertNotIn("over an ipc socket", text)

    def test_default_ipc_folder_is_private(self):
        # without ZT_IPC_DIR: /tmp/ztrain-ipc-UID, this user's, mode 0700
        args = ["--hidden=32", "--epochs=1", "--train_examples=3000"]
        d = tmpdir("sec-")
        env = dict(FAST)
        job = Job(self, job_file(d, "private", [pool("ztrain-worker", 1, args), pool("ztrain-worker", 1, args),
                                                pool("ztrain-paramserver", 1)]),
                  os.path.join(d, "job"), env=env)
        self.assertEqual(job.wait(timeout=300), 0, job.err[-3000:])
        self.assertIn("over an ipc socket", job.out)
        st = os.stat("/tmp/ztrain-ipc-%d" % os.geteuid())
        self.assertEqual((st.st_uid, st.st_mode & 0o777), (os.geteuid(), 0o700))


class SquattedFolders(unittest.TestCase):
    """A stranger makes the job's folder first, open to all, with a planted
    checkpoint to resume from and links where the logs go (or the jobs
    folder, the study folder, the base output folder): ztrain refuses it,
    naming its owner and mode, reads nothing from it and writes nothing
    into it or through it."""

    def setUp(self):
        # /tmp's kind of folder, where both users may make folders of their own
        self.shared = "/tmp/ztx-shared-%d" % os.getpid()
        os.makedirs(self.shared)
        os.chmod(self.shared, 0o1777)
        self.addCleanup(shutil.rmtree, self.shared, True)
        self.victim = os.path.join(tmpdir("sec-"), "victims-file")
        write(os.path.dirname(self.victim), "victims-file", "mine\n")

    def squat(self, name):
        """The stranger's folder, mode 0777, holding a planted checkpoint and
        links in place of the logs."""
        d = os.path.join(self.shared, name)
        ckpt = os.path.join(d, "checkpoints", "ckpt-000000001200")
        res = STRANGER.sh("umask 0; mkdir -p -m 0777 %s %s/replica-logs && echo '{}' > %s/manifest.json && "
                          "ln -s %s %s/replica-logs/workerpool0-0.log && ln -s %s %s/replica-logs/coordinator.log"
                          % (ckpt, d, ckpt, self.victim, d, self.victim, d))
        self.assertEqual(res.returncode, 0, res.stderr)
        return d

    def assertUntouched(self, d):
        self.assertFalse(os.path.exists(os.path.join(d, "job.json")))
        self.assertFalse(os.path.exists(os.path.join(d, "credentials")))
        with open(self.victim) as f:
            self.assertEqual(f.read(), "mine\n")

    def spec(self, **extra):
        d = tmpdir("sec-")
        job = {"displayName": "squat", "jobSpec": dict({"workerPoolSpecs": [
            {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
             "containerSpec": {"imageUri": "local", "command": ["sh", "-c", "exit 0"]}}]}, **extra)}
        return write(d, "squat.json", json.dumps(job))

    def ztrain(self, *args, env=None):
        return subprocess.run([os.path.join(BIN, "ztrain")] + list(args), capture_output=True, text=True,
                              timeout=120, env=dict(os.environ, **FAST, **(env or {})))

    def test_job_dir(self):
        d = self.squat("job")
        r = self.ztrain("run", self.spec(), "--job-dir", d)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertRegex(r.stderr, r"the job directory: %s belongs to user %s \(uid \d+\) and has mode 0777"
                         % (re.escape(d), STRANGER.name))
        self.assertNotIn("resuming", r.stderr)
        self.assertUntouched(d)

    def test_jobs_dir(self):
        d = self.squat("jobs")
        r = self.ztrain("run", self.spec(), env={"ZT_JOBS_DIR": d})
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertRegex(r.stderr, r"%s belongs to user %s" % (re.escape(d), STRANGER.name))
        self.assertEqual(sorted(os.listdir(d)), ["checkpoints", "replica-logs"])  # no job folder made in it

    def test_base_output_dir(self):
        d = self.squat("base")
        r = self.ztrain("run", self.spec(baseOutputDirectory={"outputUriPrefix": d}), "--job-dir",
                        os.path.join(tmpdir("sec-"), "job"))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertRegex(r.stderr, r"baseOutputDirectory: %s belongs to user %s" % (re.escape(d), STRANGER.name))
        self.assertUntouched(d)

    def test_study_dir(self):
        d = self.squat("study")
        study = write(tmpdir("sec-"), "study.json", json.dumps({
            "displayName": "squat-study", "studySpec": {
                "metrics": [{"metricId": "accuracy", "goal": "MAXIMIZE"}],
                "parameters": [{"parameterId": "lr", "doubleValueSpec": {"minValue": 0.1, "maxValue": 1}}]},
            "maxTrialCount": 1, "parallelTrialCount": 1,
            "trialJobSpec": {"workerPoolSpecs": [{"machineSpec": {"machineType": "n1-standard-4"},
                                                  "replicaCount": 1,
                                                  "containerSpec": {"imageUri": "local",
                                                                    "command": ["sh", "-c", "exit 0"]}}]}}))
        r = self.ztrain("tune", study, "--study-dir", d)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertRegex(r.stderr, r"the study directory: %s belongs to user %s" % (re.escape(d), STRANGER.name))
        self.assertFalse(os.path.exists(os.path.join(d, "study.json")))

    def test_planted_slurm_submission_is_not_acted_on(self):
        # a submission record planted in a folder: cancel must not scancel
        # the job id the stranger chose
        d = os.path.join(self.shared, "sub")
        res = STRANGER.sh("umask 0; mkdir -p -m 0777 %s/slurm && echo '{\"slurmJobId\": \"4242\"}' > "
                          "%s/slurm/submission.json" % (d, d))
        self.assertEqual(res.returncode, 0, res.stderr)
        r = self.ztrain("cancel", d)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("submission.json is not a record of this user's: ignored", r.stderr)
        self.assertNotIn("scancel", r.stderr)
        self.assertNotIn("4242", r.stdout + r.stderr)

    def test_own_folder_in_the_same_place_is_used(self):
        d = os.path.join(self.shared, "mine")
        os.makedirs(d, mode=0o700)
        r = self.ztrain("run", self.spec(), "--job-dir", d)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertEqual(load_job(d)["state"], "SUCCEEDED")
        st = os.stat(os.path.join(d, "replica-logs", "workerpool0-0.log"))
        self.assertEqual(st.st_mode & 0o777, 0o600)


SM_PROGRAM = r"""
import json, os
seen = {}
for ch in json.loads(os.environ["SM_CHANNELS"]):
    d = os.environ["SM_CHANNEL_" + ch.upper()]
    seen[ch] = {}
    for r, _, fs in os.walk(d):
        for f in fs:
            with open(os.path.join(r, f)) as fh:
                seen[ch][os.path.relpath(os.path.join(r, f), d)] = fh.read()
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], "seen.json"), "w") as f:
    json.dump(seen, f)
with open(os.path.join(os.environ["SM_MODEL_DIR"], "model.json"), "w") as f:
    f.write('{"weights": [1, 2, 3]}')
"""


def shared_dataset(shared):
    """A dataset folder anyone may add to (mode 1777) under shared: part-0.csv
    and sub/part-1.csv, the user's own. Its path."""
    data = os.path.join(shared, "data")
    os.makedirs(os.path.join(data, "sub"))
    os.chmod(data, 0o1777)
    write(data, "part-0.csv", "zero\n")
    write(os.path.join(data, "sub"), "part-1.csv", "one\n")
    return data


class SageMakerFolders(unittest.TestCase):
    """A CreateTrainingJob's own folders (S3OutputPath, CheckpointConfig's S3Uri
    and LocalPath) held to the trusted-folder rule, and its channels walked without
    following a stranger's links out of them."""

    def setUp(self):
        self.shared = "/tmp/ztx-sm-%d" % os.getpid()
        os.makedirs(self.shared)
        os.chmod(self.shared, 0o1777)
        self.addCleanup(shutil.rmtree, self.shared, True)
        self.d = tmpdir("sec-sm-")
        os.makedirs(os.path.join(self.d, "code"))
        write(os.path.join(self.d, "code"), "train.py", SM_PROGRAM)
        self.mine = os.path.join(self.d, "mine")  # a folder of the victim's, closed to others
        os.makedirs(self.mine, mode=0o700)
        self.victim = write(self.mine, "victims-file", "mine\n")
        os.chmod(self.victim, 0o600)

    def request(self, out, ck=None, data=None, local=None):
        data = data or os.path.join(self.d, "data")
        os.makedirs(data, exist_ok=True)
        r = {"TrainingJobName": "sm-sec",
             "AlgorithmSpecification": {"TrainingImage": "local", "TrainingInputMode": "File"},
             "HyperParameters": {"sagemaker_program": '"train.py"',
                                 "sagemaker_submit_directory": json.dumps(os.path.join(self.d, "code"))},
             "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1},
             "InputDataConfig": [{"ChannelName": "training", "DataSource": {"S3DataSource": {
                 "S3Uri": data, "S3DataDistributionType": "FullyReplicated"}}}],
             "OutputDataConfig": {"S3OutputPath": out},
             "StoppingCondition": {"MaxRuntimeInSeconds": 120}}
        if ck:
            r["CheckpointConfig"] = {"S3Uri": ck}
        if local:
            r["CheckpointConfig"]["LocalPath"] = local
        return write(self.d, "request.json", json.dumps(r))

    def ztrain(self, *args):
        return subprocess.run([os.path.join(BIN, "ztrain")] + list(args), capture_output=True, text=True,
                              timeout=120, env=dict(os.environ, **FAST))

    def assertRefused(self, req, pattern):
        """validate and run both refuse, before anything starts."""
        for cmd in (["validate", req], ["run", req, "--job-dir", os.path.join(self.d, "job")]):
            r = self.ztrain(*cmd)
            self.assertEqual(r.returncode, 2, r.stderr[-2000:])
            self.assertRegex(r.stderr, pattern)
        self.assertIsNone(load_job(os.path.join(self.d, "job")))
        with open(self.victim) as f:
            self.assertEqual(f.read(), "mine\n")
        self.assertEqual(os.listdir(self.mine), ["victims-file"])

    def test_squatted_output_path(self):
        # the stranger makes <S3OutputPath>/<job>/output first, open to all,
        # with links at the archive's names and at temporary names
        out = os.path.join(self.shared, "out")
        o = os.path.join(out, "sm-sec", "output")
        res = STRANGER.sh("umask 0; mkdir -p -m 0777 %s && ln -s %s %s/model.tar.gz && ln -s %s %s/model.tar.gz.tmp-1"
                          % (o, self.victim, o, self.victim, o))
        self.assertEqual(res.returncode, 0, res.stderr)
        planted = sorted(os.listdir(o))
        self.assertRefused(self.request(out), r"OutputDataConfig.S3OutputPath: %s belongs to user %s \(uid \d+\) "
                           r"and has mode 0777" % (re.escape(out), STRANGER.name))
        self.assertEqual(sorted(os.listdir(o)), planted)

    def test_strangers_link_as_output_path(self):
        # a link the stranger planted where the output folder is to be made,
        # to a folder of the victim's: not followed
        out = os.path.join(self.shared, "out-link")
        self.assertEqual(STRANGER.sh("ln -s %s %s" % (self.mine, out)).returncode, 0)
        self.assertRefused(self.request(out), r"OutputDataConfig.S3OutputPath: %s is a link made by user %s "
                           % (re.escape(out), STRANGER.name))

    def test_squatted_checkpoint_folder(self):
        # the stranger's folder with a checkpoint for the program to resume from
        ck = os.path.join(self.shared, "ckpt")
        res = STRANGER.sh("umask 0; mkdir -m 0777 %s && echo evil > %s/model.pt" % (ck, ck))
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertRefused(self.request(os.path.join(self.d, "out"), ck=ck),
                           r"CheckpointConfig.S3Uri: %s belongs to user %s \(uid \d+\) and has mode 0777"
                           % (re.escape(ck), STRANGER.name))
        # the same folder as the local checkpoint path (a program that
        # writes there would resume from it): refused too; a folder of the
        # victim's is taken, with a word that ztrain does not sync it
        own = os.path.join(self.d, "own-ckpt")
        self.assertRefused(self.request(os.path.join(self.d, "out"), ck=own, local=ck),
                           r"CheckpointConfig.LocalPath: %s belongs to user %s \(uid \d+\) and has mode 0777"
                           % (re.escape(ck), STRANGER.name))
        r = self.ztrain("validate", self.request(os.path.join(self.d, "out"), ck=own, local=self.mine))
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertIn("CheckpointConfig.LocalPath", r.stdout + r.stderr)
        self.assertIn("not synced to S3Uri", r.stdout + r.stderr)

    def test_channel_links_and_own_folders(self):
        # a shared dataset folder (anyone may add to it): the stranger links
        # a file of the victim's into it, and an in-channel alias; the job's
        # own output and checkpoint folders are made in the same shared place
        data = shared_dataset(self.shared)
        res = STRANGER.sh("ln -s %s %s/leak.csv && ln -s part-0.csv %s/alias.csv && ln -s %s %s/outside"
                          % (self.victim, data, data, self.mine, data))
        self.assertEqual(res.returncode, 0, res.stderr)
        out, ck = os.path.join(self.shared, "own-out"), os.path.join(self.shared, "own-ckpt")
        job = Job(self, self.request(out, ck=ck, data=data), os.path.join(self.d, "job"), env=FAST)
        self.assertEqual(job.wait(timeout=120), 0, job.err[-3000:])
        self.assertEqual(load_job(job.job_dir)["state"], "SUCCEEDED")
        with tarfile.open(os.path.join(out, "sm-sec", "output", "output.tar.gz")) as t:
            seen = json.load(t.extractfile("algo-1/seen.json"))["training"]
        self.assertEqual(seen, {"part-0.csv": "zero\n", "sub/part-1.csv": "one\n", "alias.csv": "zero\n"})
        with open(os.path.join(job.job_dir, "replica-logs", "coordinator.log")) as f:
            log = f.read() + job.err
        self.assertIn("%s/leak.csv is a link to %s, outside the channel's folder" % (data, self.victim), log)
        self.assertIn("%s/outside is a link to %s, outside the channel's folder" % (data, self.mine), log)
        self.assertIn("channel training: %s can be written by any user (mode 1777)" % data, log)
        self.assertIn("any user can write to this folder (mode 1777)", job.err)  # said before it starts
        for folder in (out, os.path.join(out, "sm-sec"), os.path.join(out, "sm-sec", "output"), ck):
            self.assertEqual(os.stat(folder).st_mode & 0o777, 0o700, folder)
        model = os.path.join(out, "sm-sec", "output", "model.tar.gz")
        self.assertEqual(os.stat(model).st_mode & 0o777, 0o600)
        self.assertEqual(sorted(os.listdir(os.path.dirname(model))), ["model.tar.gz", "output.tar.gz"])
        self.assertIn("Permission denied", STRANGER.sh("cat %s" % model).stderr)

    def test_channel_link_loop(self):
        # two links back to the channel's own folder: the job fails at once,
        # naming the loop, instead of walking forever
        data = os.path.join(self.shared, "loop")
        res = STRANGER.sh("umask 0; mkdir -m 0777 %s && echo x > %s/part-0.csv && ln -s . %s/a && ln -s . %s/b"
                          % (data, data, data, data))
        self.assertEqual(res.returncode, 0, res.stderr)
        t0 = time.monotonic()
        job = Job(self, self.request(os.path.join(self.d, "out"), data=data), os.path.join(self.d, "job"), env=FAST)
        self.assertEqual(job.wait(timeout=60), 1, job.err[-3000:])
        self.assertLess(time.monotonic() - t0, 30)
        j = load_job(job.job_dir)
        self.assertEqual(j["state"], "FAILED")
        self.assertIn("channel training: %s/a is a link to %s, a folder above it: a loop" % (data, data),
                      j["error"]["logTail"])


PROCESSING_PROGRAM = r"""
import os
src, out = "/opt/ml/processing/input/data", "/opt/ml/processing/output/copy"
for root, _, files in os.walk(src):
    for f in files:
        rel = os.path.relpath(os.path.join(root, f), src).replace("/", "_")
        with open(os.path.join(root, f)) as i, open(os.path.join(out, rel), "w") as o:
            o.write(i.read())
os.symlink(os.environ["VICTIM"], os.path.join(out, "victim-link"))  # a link in the output: left out
"""


class ProcessingFolders(unittest.TestCase):
    """A CreateProcessingJob's output folders held to the trusted-folder rule
    as a training job's are, its inputs walked without following a
    stranger's links out of them, and links in a host's output left out of
    the upload."""
    ztrain = SageMakerFolders.ztrain
    assertRefused = SageMakerFolders.assertRefused

    def setUp(self):
        SageMakerFolders.setUp(self)
        write(self.d, "process.py", PROCESSING_PROGRAM)

    def request(self, out, data=None):
        data = data or os.path.join(self.d, "data")
        os.makedirs(data, exist_ok=True)
        r = {"ProcessingJobName": "pj-sec",
             "AppSpecification": {"ImageUri": "local", "ContainerEntrypoint": ["python3", os.path.join(self.d, "process.py")]},
             "Environment": {"VICTIM": self.victim},
             "ProcessingResources": {"ClusterConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 1}},
             "ProcessingInputs": [{"InputName": "data", "S3Input": {"S3Uri": data,
                                                                    "LocalPath": "/opt/ml/processing/input/data"}}],
             "ProcessingOutputConfig": {"Outputs": [{"OutputName": "copy", "S3Output": {
                 "S3Uri": out, "LocalPath": "/opt/ml/processing/output/copy", "S3UploadMode": "EndOfJob"}}]},
             "StoppingCondition": {"MaxRuntimeInSeconds": 120}}
        return write(self.d, "request.json", json.dumps(r))

    def test_squatted_output_folder(self):
        out = os.path.join(self.shared, "out")
        res = STRANGER.sh("umask 0; mkdir -m 0777 %s && ln -s %s %s/part-0.csv" % (out, self.victim, out))
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertRefused(self.request(out), r"ProcessingOutputConfig.Outputs\[0\].S3Output.S3Uri: %s belongs to "
                           r"user %s \(uid \d+\) and has mode 0777" % (re.escape(out), STRANGER.name))
        self.assertEqual(os.listdir(out), ["part-0.csv"])

    def test_strangers_link_as_output_folder(self):
        out = os.path.join(self.shared, "out-link")
        self.assertEqual(STRANGER.sh("ln -s %s %s" % (self.mine, out)).returncode, 0)
        self.assertRefused(self.request(out), r"ProcessingOutputConfig.Outputs\[0\].S3Output.S3Uri: %s is a link "
                           r"made by user %s " % (re.escape(out), STRANGER.name))

    def test_input_links_and_output_links(self):
        data = shared_dataset(self.shared)
        res = STRANGER.sh("ln -s %s %s/leak.csv && ln -s %s %s/outside" % (self.victim, data, self.mine, data))
        self.assertEqual(res.returncode, 0, res.stderr)
        out = os.path.join(self.shared, "own-out")
        job = Job(self, self.request(out, data=data), os.path.join(self.d, "job"), env=FAST)
        self.assertEqual(job.wait(timeout=120), 0, job.err[-3000:])
        self.assertEqual(sorted(os.listdir(out)), ["part-0.csv", "sub_part-1.csv"])
        with open(os.path.join(job.job_dir, "replica-logs", "coordinator.log")) as f:
            log = f.read() + job.err
        self.assertIn("%s/leak.csv is a link to %s, outside the channel's folder" % (data, self.victim), log)
        self.assertIn("victim-link: not a file (a link?): left out of the output", log)
        self.assertEqual(os.stat(out).st_mode & 0o777, 0o700)
        self.assertIn("Permission denied", STRANGER.sh("cat %s/part-0.csv" % out).stderr)


class PrivateOutputs(unittest.TestCase):
    def test_stranger_reads_nothing(self):
        # a job under a folder anyone may enter: every folder it makes is
        # 0700 and every file 0600, and the stranger can read none of them
        # (job.json, the logs, a checkpoint, the model)
        top = "/tmp/ztx-jobs-%d" % os.getpid()
        os.makedirs(top)
        os.chmod(top, 0o755)
        self.addCleanup(shutil.rmtree, top, True)
        job_dir = os.path.join(top, "job")
        args = ["--hidden=32", "--epochs=1", "--train_examples=6000", "--checkpoint_steps=20"]
        d = tmpdir("sec-")
        job = Job(self, job_file(d, "private", [pool("ztrain-worker", 1, args), pool("ztrain-worker", 1, args),
                                                pool("ztrain-paramserver", 2)]), job_dir, env=FAST)
        self.assertEqual(job.wait(timeout=300), 0, job.err[-3000:])
        seen = 0
        for root, dirs, files in os.walk(job_dir):
            for name in dirs + files:
                mode = os.lstat(os.path.join(root, name)).st_mode & 0o777
                self.assertEqual(mode & 0o077, 0, "%s is mode %03o" % (os.path.join(root, name), mode))
                seen += 1
        self.assertEqual(os.stat(job_dir).st_mode & 0o777, 0o700)
        self.assertGreater(seen, 10)
        ckpt = sorted(os.listdir(os.path.join(job_dir, "checkpoints")))[-1]
        for path in ("job.json", "replica-logs/workerpool0-0.log", "checkpoints/%s/manifest.json" % ckpt,
                     "model"):
            res = STRANGER.sh("cat %s/%s || ls %s/%s" % (job_dir, path, job_dir, path))
            self.assertNotEqual(res.returncode, 0, path)
            self.assertIn("Permission denied", res.stderr, path)


class Flood(unittest.TestCase):
    def test_metric_and_checkpoint_flood_is_coalesced(self):
        # 3,000 metrics and 300 checkpoint notices as fast as a replica can
        # send them: what arrives is recorded, but job.json is written about
        # once a second, not once each
        flood = os.environ.get("ZT_FLOOD", os.path.join(BIN, "..", "tests", "zt_flood"))
        d = tmpdir("sec-")
        job_dir = os.path.join(d, "job")
        job = Job(self, job_file(d, "flood", [{"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
                                               "containerSpec": {"imageUri": "local", "command": [flood, "3000",
                                                                                                  "400"]}}]),
                  job_dir, env=FAST)
        self.assertEqual(job.wait(timeout=120), 0, job.err[-3000:])
        j = load_job(job_dir)
        self.assertEqual(j["metrics"]["workerpool0-0"]["flood_done"]["value"], 3000)
        # every notice the coordinator took is in job.json (a loaded machine
        # may drop some at the sender's full queue: ZeroMQ's high-water mark)
        taken = re.findall(r"checkpoint checkpoints/ckpt-\d+ at step \d+ \(from workerpool0-0\)", job.err)
        self.assertGreater(len(taken), 10)
        self.assertEqual(len(j["checkpoints"]), len(taken))
        self.assertLess(j["stateWrites"], 40, j["stateWrites"])
        # then 400 metric names: 256 names in all kept, the rest refused (a
        # bound on what one replica can make job.json hold), said once or twice
        mine = j["metrics"]["workerpool0-0"]
        self.assertEqual(len(mine), 256, sorted(mine))
        for name in ("accuracy", "flood_done"):
            self.assertIn(name, mine)
        self.assertEqual(len([m for m in mine if m.startswith("m")]), 254)
        lines = [l for l in job.err.splitlines() if "it already reports 256 metrics" in l]
        self.assertTrue(1 <= len(lines) <= 3, lines)


class EvaluatorFlood(unittest.TestCase):
    def test_evaluations_are_written_once_a_second(self):
        # an evaluator's results used to cost a job.json write (an fsync, a
        # Prometheus rendering) each: 2000 of them now cost a few
        flood = os.environ.get("ZT_FLOOD", os.path.join(BIN, "..", "tests", "zt_flood"))
        d = tmpdir("sec-")
        job_dir = os.path.join(d, "job")
        sleeper = {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
                   "containerSpec": {"imageUri": "local", "command": ["sh", "-c", "sleep 6"]}}
        evaluator = {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
                     "containerSpec": {"imageUri": "local", "command": [flood, "2000"]}}
        job = Job(self, job_file(d, "eval-flood", [sleeper, {}, {}, evaluator]), job_dir, env=FAST)
        self.assertEqual(job.wait(timeout=120), 0, job.err[-3000:])
        j = load_job(job_dir)
        taken = len(re.findall(r"evaluation by workerpool3-0: accuracy = ", job.err))
        self.assertGreater(taken, 100)
        self.assertEqual(len([e for e in j["evaluations"] if e["name"] == "accuracy"]), taken)
        self.assertLess(j["stateWrites"], 40, j["stateWrites"])

    def test_security_off_is_said(self):
        spec = job_file(tmpdir("sec-"), "off", [pool("ztrain-worker", 1, ["--idle"])])
        r = subprocess.run([os.path.join(BIN, "ztrain"), "validate", spec], capture_output=True, text=True,
                           timeout=60, env=dict(os.environ, ZT_SECURITY="off"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("ZT_SECURITY=off: the job's sockets would be neither authenticated nor encrypted", r.stderr)
        r = subprocess.run([os.path.join(BIN, "ztrain"), "validate", spec], capture_output=True, text=True,
                           timeout=60)
        self.assertNotIn("ZT_SECURITY=off", r.stderr)


class HostileStrings(unittest.TestCase):
    """An insider's strings are data: 1000 metric names that are not UTF-8,
    clear the screen, retitle the terminal or forge a coordinator line after
    a newline, a role and program output that carry the same. The
    coordinator runs under valgrind: not one invalid read or write; no raw
    ESC (or other control byte) reaches a log file, status, logs or list;
    the only SUCCEEDED line is the coordinator's own."""

    def test_insider_strings_are_data(self):
        valgrind = shutil.which("valgrind")
        self.assertTrue(valgrind, "valgrind is not installed (scripts/deps.sh --test installs it)")
        flood = os.environ.get("ZT_FLOOD", os.path.join(BIN, "..", "tests", "zt_flood"))
        d = tmpdir("sec-")
        job_dir = os.path.join(d, "job")
        spec = job_file(d, "hostile", [{"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
                                        "containerSpec": {"imageUri": "local", "command": [flood, "hostile", "1000"]}}])
        env = dict(os.environ, ZT_REGISTER_TIMEOUT_MS="60000", ZT_HEARTBEAT_TIMEOUT_MS="60000", **FAST)
        r = subprocess.run([valgrind, "-q", "--error-exitcode=99", "--trace-children=no",
                            os.path.join(BIN, "ztrain"), "run", spec, "--job-dir", job_dir],
                           capture_output=True, text=True, errors="replace", timeout=600, env=env)
        self.assertNotIn("Invalid", r.stderr)
        self.assertEqual(r.returncode, 0, r.stderr[-4000:])  # 99: valgrind found errors
        job = load_job(job_dir)
        self.assertEqual(job["state"], "SUCCEEDED")
        self.assertEqual(job["metrics"]["workerpool0-0"]["flood_done"]["value"], 1000)
        self.assertGreater(job["controlPlaneDrops"]["malformed"], 100)  # the names that are not UTF-8
        control = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]")
        texts = {"console": r.stderr.encode(errors="replace")}
        for path in glob.glob(os.path.join(job_dir, "replica-logs", "*.log")):
            with open(path, "rb") as f:
                texts[os.path.basename(path)] = f.read()
        for cmd in (["status", job_dir], ["logs", job_dir], ["list", d]):
            out = subprocess.run([os.path.join(BIN, "ztrain")] + cmd, capture_output=True, timeout=60)
            texts[cmd[0]] = out.stdout + out.stderr
        for what, text in texts.items():
            self.assertIsNone(control.search(text.replace(b"\n", b"").replace(b"\t", b"")), what)
        self.assertIn(b"\\x1b[2J", texts["coordinator.log"])  # shown, escaped
        self.assertIn(b"\\x1b]0;pwned", texts["workerpool0-0.log"])  # the program's own line
        logs = texts["logs"].decode(errors="replace").splitlines()
        forged = [l for l in logs if re.search(r"^\S+\s*\| 2026-01-01T00:00:00.000Z .*SUCCEEDED", l)]
        self.assertEqual(forged, [])  # no line of its own: the forged text stays inside another line
        self.assertEqual(len([l for l in logs if re.search(r"coordinator/0\[\d+\]: job hostile: SUCCEEDED$", l)]),
                         1)


class JobsFolder(unittest.TestCase):
    def test_display_name_stays_in_jobs_dir(self):
        d = tmpdir("sec-")
        jobs = os.path.join(d, "jobs")
        name = "../../../escaped-%d" % os.getpid()
        spec = write(d, "esc.json", json.dumps({"displayName": name, "jobSpec": {"workerPoolSpecs": [
            {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
             "containerSpec": {"imageUri": "local", "command": ["sh", "-c", "exit 0"]}}]}}))
        res = subprocess.run([os.path.join(BIN, "ztrain"), "run", spec], capture_output=True, text=True,
                             timeout=120, env=dict(os.environ, ZT_JOBS_DIR=jobs, **FAST))
        self.assertEqual(res.returncode, 0, res.stderr[-2000:])
        made = os.listdir(jobs)
        self.assertEqual(len(made), 1, made)
        self.assertTrue(made[0].startswith("_._.._.._escaped-%d-" % os.getpid()), made)
        self.assertEqual(load_job(os.path.join(jobs, made[0]))["state"], "SUCCEEDED")
        for where in (d, os.path.dirname(d), "/", os.path.dirname(os.path.dirname(d))):
            self.assertEqual(glob.glob(os.path.join(where, "escaped-%d*" % os.getpid())), [], where)
        shutil.rmtree(jobs, ignore_errors=True)


if __name__ == "__main__":
    if os.geteuid() != 0 or not shutil.which("useradd") or not shutil.which("runuser"):
        print("skipped: the stranger's attacks need root to make a user (useradd, runuser)")
        sys.exit(77)
    ztest.main()
