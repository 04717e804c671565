"""Supervision with real processes: environment of a 1+2+2+1 job, restart in
place after kill -9, user error fails the job, heartbeat loss, job retries,
timeout, SIGTERM leaves nothing behind, two jobs at once, garbage on the
control plane, `ztrain status` and `ztrain cancel`."""
import json
import os
import signal
import subprocess
import time
import unittest

import ztest  # noqa: E402
from ztest import BIN, Job, alive, descendants, load_job, tmpdir, wait_for, write, ztrain

FAST = {"ZT_STOP_GRACE_MS": "2000", "ZT_HEARTBEAT_MS": "200"}


def cmd_pool(script, n=1, machine="n1-standard-4"):
    return {"machineSpec": {"machineType": machine}, "replicaCount": n,
            "containerSpec": {"imageUri": "local", "command": ["sh", "-c", script]}}


def role_pool(image, n=1, args=None):
    p = {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": n,
         "containerSpec": {"imageUri": image}}
    if args:
        p["containerSpec"]["args"] = args
    return p


def spec(d, name, pools, **extra):
    s = {"displayName": name, "jobSpec": {"workerPoolSpecs": pools}}
    s["jobSpec"].update(extra)
    return write(d, name + ".json", json.dumps(s))


def replica(job, name):
    return [r for r in job["replicas"] if r["name"] == name][0]


# Waits (up to 30 s) until a file exists: `until_file PATH`.
UNTIL = 'until_file() { i=0; while [ ! -e "$1" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; }; '


class Supervision(unittest.TestCase):
    def setUp(self):
        self.d = tmpdir("sup-")
        self.job_dir = os.path.join(self.d, "job")

    def test_env_dump_job_succeeds(self):
        # Greet first, then make the env file appear atomically: the primary waits
        # for the files, so every greeting is out before the job can end.
        dump = ('echo "hello from $ZT_POOL/$ZT_INDEX"; env > "$ZT_JOB_DIR/.env-$ZT_POOL-$ZT_INDEX"; '
                'mv "$ZT_JOB_DIR/.env-$ZT_POOL-$ZT_INDEX" "$ZT_JOB_DIR/env-$ZT_POOL-$ZT_INDEX.txt"; ')
        primary = UNTIL + dump + ('for f in 1-0 1-1 2-0 2-1 3-0; do until_file "$ZT_JOB_DIR/env-$f.txt"; done; '
                                  'echo primary done')
        path = spec(self.d, "dump", [cmd_pool(primary), cmd_pool(dump + "sleep 30", 2),
                                     cmd_pool(dump + "sleep 30", 2), cmd_pool(dump + "exit 0")])
        job = Job(self, path, self.job_dir, env=FAST)
        self.assertEqual(job.wait(), 0, job.err)
        j = load_job(self.job_dir)
        self.assertEqual(j["state"], "SUCCEEDED")
        self.assertEqual([t["state"] for t in j["transitions"]],
                         ["QUEUED", "PENDING", "RUNNING", "SUCCEEDED"])
        self.assertEqual(len(j["replicas"]), 6)
        seen = set()
        for pool, n in enumerate([1, 2, 2, 1]):
            for i in range(n):
                env = dict(l.split("=", 1) for l in open(os.path.join(
                    self.job_dir, "env-%d-%d.txt" % (pool, i))).read().splitlines() if "=" in l)
                cs = json.loads(env["CLUSTER_SPEC"])
                self.assertEqual(cs["task"], {"type": "workerpool%d" % pool, "index": i})
                self.assertEqual(cs["cluster"]["workerpool%d" % pool][i],
                                 replica(j, "workerpool%d-%d" % (pool, i))["address"])
                self.assertEqual(json.loads(env["TF_CONFIG"])["task"]["index"], i)
                seen.add(cs["cluster"]["workerpool%d" % pool][i])
                self.assertTrue(os.path.exists(os.path.join(
                    self.job_dir, "config", "workerpool%d-%d" % (pool, i), "resourceconfig.json")))
                log = open(os.path.join(self.job_dir, "replica-logs", "workerpool%d-%d.log" % (pool, i))).read()
                self.assertIn("hello from %d/%d" % (pool, i), log)
                # a program's own line, in the one line format: time, replica, pid
                self.assertRegex(job.out, r"(?m)^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z I "
                                          r"workerpool%d-%d\[\d+\]: hello from %d/%d$" % (pool, i, pool, i))
        self.assertEqual(len(seen), 6)
        self.assertEqual(replica(j, "workerpool0-0")["exitStatus"], 0)
        self.assertEqual(replica(j, "workerpool3-0")["state"], "SUCCEEDED")
        self.assertEqual(replica(j, "workerpool1-0")["state"], "STOPPED")

    def test_kill9_restarts_in_place(self):
        worker = ('if [ ! -e "$ZT_JOB_DIR/crashed" ]; then echo "$CLUSTER_SPEC" > "$ZT_JOB_DIR/cs1"; '
                  'touch "$ZT_JOB_DIR/crashed"; kill -9 $$; fi; '
                  'echo "$CLUSTER_SPEC" > "$ZT_JOB_DIR/cs2"; touch "$ZT_JOB_DIR/second"; sleep 30')
        primary = UNTIL + 'until_file "$ZT_JOB_DIR/second"; echo ok'
        path = spec(self.d, "crash", [cmd_pool(primary), cmd_pool(worker)])
        job = Job(self, path, self.job_dir, env=FAST)
        self.assertEqual(job.wait(), 0, job.err)
        j = load_job(self.job_dir)
        self.assertEqual(j["state"], "SUCCEEDED")
        self.assertEqual(replica(j, "workerpool1-0")["restarts"], 1)
        self.assertEqual(j["jobRetries"], 0)
        # Same pool, index and address after the restart.
        cs1 = json.load(open(os.path.join(self.job_dir, "cs1")))
        cs2 = json.load(open(os.path.join(self.job_dir, "cs2")))
        self.assertEqual(cs1["cluster"], cs2["cluster"])
        self.assertEqual(cs2["task"], {"type": "workerpool1", "index": 0})
        self.assertIn("killed by signal 9", job.err)

    def test_user_error_fails_job(self):
        path = spec(self.d, "usererr", [cmd_pool("sleep 30"),
                                        cmd_pool('echo "loading data"; echo "bad flag --lr" >&2; exit 1')])
        job = Job(self, path, self.job_dir, env=FAST)
        self.assertEqual(job.wait(), 1)
        j = load_job(self.job_dir)
        self.assertEqual(j["state"], "FAILED")
        self.assertIn("workerpool1-0 exited with status 1", j["error"]["message"])
        self.assertEqual(j["error"]["replica"], "workerpool1-0")
        self.assertIn("bad flag --lr", j["error"]["logTail"])
        self.assertEqual(replica(j, "workerpool1-0")["restarts"], 0)
        self.assertIn("bad flag --lr", job.err)

    def test_crash_loop_retries_then_fails(self):
        path = spec(self.d, "loop", [cmd_pool("sleep 30"), cmd_pool("kill -9 $$")])
        env = dict(FAST, ZT_MAX_RESTARTS="1", ZT_MAX_JOB_RETRIES="2")
        job = Job(self, path, self.job_dir, env=env)
        self.assertEqual(job.wait(), 1, job.err)
        j = load_job(self.job_dir)
        self.assertEqual(j["state"], "FAILED")
        self.assertEqual(j["jobRetries"], 2)
        self.assertEqual(j["incarnation"], 2)
        self.assertIn("after 1 restarts", j["error"]["message"])
        states = [t["state"] for t in j["transitions"]]
        self.assertEqual(states.count("PENDING"), 3)
        # disableRetries: no job retries.
        path = spec(self.d, "noretry", [cmd_pool("sleep 30"), cmd_pool("kill -9 $$")],
                    scheduling={"disableRetries": True})
        job_dir = os.path.join(self.d, "job2")
        job = Job(self, path, job_dir, env=env)
        self.assertEqual(job.wait(), 1)
        j = load_job(job_dir)
        self.assertEqual(j["jobRetries"], 0)
        self.assertIn("retries disabled", j["error"]["message"])

    def test_exit_75_is_the_systems_failure(self):
        # exit 75 (ZT_EXIT_RETRY): restarted in place like a crash, not a user error
        worker = ('if [ ! -e "$ZT_JOB_DIR/tempfail" ]; then touch "$ZT_JOB_DIR/tempfail"; exit 75; fi; sleep 30')
        primary = UNTIL + 'until_file "$ZT_JOB_DIR/tempfail"; sleep 1; exit 0'
        path = spec(self.d, "tempfail", [cmd_pool(primary), cmd_pool(worker)])
        job = Job(self, path, self.job_dir, env=FAST)
        self.assertEqual(job.wait(), 0, job.err)
        self.assertIn("workerpool1-0 exited with status 75 (a failure of the system, not the program)", job.err)
        self.assertEqual(replica(load_job(self.job_dir), "workerpool1-0")["restarts"], 1)

    def test_registration_timeout_exits_75(self):
        # a role replica that cannot reach its coordinator says so and asks for a restart
        import socket
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]  # nobody listens there once closed
        env = dict(os.environ, ZT_COORDINATOR="tcp://127.0.0.1:%d" % port, ZT_POOL="1", ZT_INDEX="0",
                   ZT_INCARNATION="0", ZT_REGISTER_TIMEOUT_MS="500")
        for binary, args in (("ztrain-worker", ["--idle"]), ("ztrain-worker", ["--epochs=1"])):
            r = subprocess.run([os.path.join(BIN, binary), *args], env=env, capture_output=True, text=True,
                               timeout=60)
            self.assertEqual(r.returncode, 75, (binary, args, r.stderr[-2000:]))
            self.assertIn("could not register with the coordinator at tcp://127.0.0.1:%d within 500 ms" % port,
                          r.stderr)

    def test_restart_job_on_worker_restart(self):
        worker = ('if [ ! -e "$ZT_JOB_DIR/crashed" ]; then touch "$ZT_JOB_DIR/crashed"; kill -9 $$; fi; '
                  'sleep 30')
        primary = ('echo start >> "$ZT_JOB_DIR/primary-starts"; ' + UNTIL +
                   'until_file "$ZT_JOB_DIR/crashed"; sleep 0.5; '
                   '[ $(wc -l < "$ZT_JOB_DIR/primary-starts") -ge 2 ] && exit 0; sleep 30')
        path = spec(self.d, "rjow", [cmd_pool(primary), cmd_pool(worker)],
                    scheduling={"restartJobOnWorkerRestart": True})
        job = Job(self, path, self.job_dir, env=FAST)
        self.assertEqual(job.wait(), 0, job.err)
        self.assertEqual(open(os.path.join(self.job_dir, "primary-starts")).read().count("start"), 2)
        j = load_job(self.job_dir)
        self.assertEqual(j["incarnation"], 1)
        self.assertEqual(replica(j, "workerpool1-0")["restarts"], 1)

    def test_heartbeat_loss_is_a_crash(self):
        path = spec(self.d, "hb", [role_pool("ztrain-worker", args=["--run-seconds=10"]),
                                   role_pool("ztrain-worker", args=["--idle"])])
        env = dict(FAST, ZT_HEARTBEAT_TIMEOUT_MS="3000")
        job = Job(self, path, self.job_dir, env=env)
        wait_for(lambda: (load_job(self.job_dir) or {}).get("state") == "RUNNING", what="RUNNING")
        pid = replica(load_job(self.job_dir), "workerpool1-0")["pid"]
        os.kill(pid, signal.SIGSTOP)  # alive, but silent
        self.assertEqual(job.wait(), 0, job.err)
        j = load_job(self.job_dir)
        self.assertEqual(replica(j, "workerpool1-0")["restarts"], 1)
        self.assertRegex(job.err, r"workerpool1-0 sent no heartbeat for \d+ ms: killing it, to be handled as a crash")
        # its end is ztrain's own kill, said as such, not a crash of its own
        self.assertRegex(job.err, r"workerpool1-0 was killed by signal 9 \(\w+\): ztrain's own kill, as it sent no "
                                  r"heartbeat for \d+ ms \(handled as a crash\)")
        self.assertFalse(alive(pid))

    def test_timeout_cancels(self):
        path = spec(self.d, "timeout", [cmd_pool("sleep 60"), cmd_pool("sleep 60")],
                    scheduling={"timeout": "1.5s"})
        job = Job(self, path, self.job_dir, env=FAST)
        t0 = time.monotonic()
        self.assertEqual(job.wait(), 3)
        self.assertLess(time.monotonic() - t0, 30)
        j = load_job(self.job_dir)
        self.assertEqual([t["state"] for t in j["transitions"]][-2:], ["CANCELLING", "CANCELLED"])
        self.assertIn("scheduling.timeout", j["error"]["message"])
        for r in j["replicas"]:
            self.assertFalse(alive(r["pid"]) if r["pid"] else False)

    def test_kills_leave_nothing_behind(self):
        """A parameter server killed with SIGKILL mid-job, an evaluator that
        crashes (SIGSEGV), and a job.json.tmp.PID of a coordinator killed
        mid-write: after the job, its folder holds no temporary file and no
        evaluator scratch folder, and its ipc folder no socket file. The
        crash wrote its stack to the evaluator's log and still died of its
        signal."""
        ipc = os.path.join(self.d, "ipc")
        os.makedirs(self.job_dir, mode=0o700)
        dead = subprocess.Popen(["true"])
        dead.wait()
        stale = os.path.join(self.job_dir, "job.json.tmp.%d" % dead.pid)
        write(self.job_dir, os.path.basename(stale), "{")
        args = ["--hidden=64", "--epochs=3", "--checkpoint_steps=150", "--log_every=50"]
        path = spec(self.d, "leftovers", [role_pool("ztrain-worker", 1, args), role_pool("ztrain-worker", 1, args),
                                          role_pool("ztrain-paramserver"), role_pool("ztrain-evaluator")])
        job = Job(self, path, self.job_dir, env=dict(FAST, ZT_IPC_DIR=ipc))
        wait_for(lambda: not os.path.exists(stale), timeout=30, what="the stale job.json.tmp removed")

        def scored():
            return (load_job(self.job_dir) or {}).get("evaluations")
        wait_for(scored, timeout=120, what="an evaluation")
        j = load_job(self.job_dir)
        os.kill(replica(j, "workerpool2-0")["pid"], signal.SIGKILL)
        os.kill(replica(j, "workerpool3-0")["pid"], signal.SIGSEGV)
        self.assertEqual(job.wait(timeout=300), 0, job.err[-3000:])
        j = load_job(self.job_dir)
        self.assertEqual(replica(j, "workerpool3-0")["restarts"], 1)
        with open(os.path.join(self.job_dir, "replica-logs", "workerpool3-0.log"), errors="replace") as f:
            log = f.read()
        self.assertRegex(log, r"=== crashed: signal 11( in thread [^;]+)?; its stack:\n.*(ztrain-evaluator|libztrain)", log[-3000:])
        self.assertIn("workerpool3-0 was killed by signal 11", log)
        left = [n for n in os.listdir(self.job_dir) if n.startswith("evaluator-") or ".tmp." in n]
        self.assertEqual(left, [])
        self.assertEqual(os.listdir(ipc), [])

    def test_sigterm_leaves_no_descendant(self):
        # A grandchild in its own session escapes the process group: the
        # subreaper sweep must still find and kill it.
        primary = "setsid sleep 300 & sleep 300 & wait"
        path = spec(self.d, "term", [cmd_pool(primary), role_pool("ztrain-worker", 2, args=["--idle"]),
                                     role_pool("ztrain-paramserver")])
        job = Job(self, path, self.job_dir, env=FAST)
        wait_for(lambda: (load_job(self.job_dir) or {}).get("state") == "RUNNING", what="RUNNING")
        kids = wait_for(lambda: (lambda k: k if len(k) >= 6 else None)(descendants(job.proc.pid)),
                        what="replicas and their children")
        job.proc.send_signal(signal.SIGTERM)
        self.assertEqual(job.wait(), 3)
        j = load_job(self.job_dir)
        self.assertEqual(j["state"], "CANCELLED")
        self.assertIn("CANCELLING", [t["state"] for t in j["transitions"]])
        wait_for(lambda: not [k for k in kids if alive(k)], timeout=5, what="descendants gone")
        self.assertEqual(descendants(job.proc.pid), [])

    def test_two_jobs_at_once(self):
        path = spec(self.d, "twin", [role_pool("ztrain-worker", args=["--run-seconds=1"]),
                                     role_pool("ztrain-worker", 2, args=["--idle"]), role_pool("ztrain-paramserver", 2)])
        a = Job(self, path, os.path.join(self.d, "a"), env=FAST)
        b = Job(self, path, os.path.join(self.d, "b"), env=FAST)
        self.assertEqual(a.wait(), 0, a.err)
        self.assertEqual(b.wait(), 0, b.err)
        ja, jb = load_job(os.path.join(self.d, "a")), load_job(os.path.join(self.d, "b"))
        self.assertEqual((ja["state"], jb["state"]), ("SUCCEEDED", "SUCCEEDED"))
        self.assertNotEqual(ja["coordinator"], jb["coordinator"])
        addrs = [r["address"] for r in ja["replicas"] + jb["replicas"]]
        self.assertEqual(len(set(addrs)), len(addrs))

    def test_garbage_on_control_plane(self):
        path = spec(self.d, "garbage", [role_pool("ztrain-worker", args=["--run-seconds=3"]),
                                        role_pool("ztrain-worker", args=["--idle"])])
        job = Job(self, path, self.job_dir, env=FAST)
        wait_for(lambda: (load_job(self.job_dir) or {}).get("state") == "RUNNING", what="RUNNING")
        ep = load_job(self.job_dir)["coordinator"]
        # from a replica's keys (a broken replica): a stranger's would not
        # even reach the coordinator (test_security)
        keys = os.path.join(self.job_dir, "credentials", "workerpool1-0.key")
        subprocess.run([os.environ["ZT_CTL_GARBAGE"], ep], check=True, timeout=30,
                       env=dict(os.environ, ZT_CREDENTIALS=keys))
        self.assertEqual(job.wait(), 0, job.err)
        j = load_job(self.job_dir)
        drops = j["controlPlaneDrops"]
        self.assertGreaterEqual(drops["malformed"], 2)
        self.assertEqual(drops["badVersion"], 1)
        self.assertGreaterEqual(drops["unknownSender"], 1)
        self.assertEqual(j["state"], "SUCCEEDED")
        # a flood costs no log: at most a line per reason per 5 s, with the count
        self.assertGreaterEqual(drops["malformed"] + drops["badVersion"], 100)
        lines = [l for l in job.err.splitlines() if "refused a malformed control message" in l]
        self.assertTrue(1 <= len(lines) <= 2, lines)

    def test_status_command(self):
        path = spec(self.d, "status", [role_pool("ztrain-worker", args=["--run-seconds=0.5"])])
        job = Job(self, path, self.job_dir, env=FAST)
        self.assertEqual(job.wait(), 0, job.err)
        r = subprocess.run([os.path.join(os.environ["ZT_BIN"], "ztrain"), "status", "--job-dir",
                            self.job_dir], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0)
        self.assertIn("job status: SUCCEEDED", r.stdout)
        self.assertIn("workerpool0-0", r.stdout)

    def test_cancel_command(self):
        path = spec(self.d, "tocancel", [cmd_pool("sleep 300"), cmd_pool("sleep 300", 2)])
        job = Job(self, path, self.job_dir, env=FAST)
        wait_for(lambda: (load_job(self.job_dir) or {}).get("state") == "RUNNING", what="RUNNING")
        pids = [r["pid"] for r in load_job(self.job_dir)["replicas"]]
        r = ztrain("cancel", self.job_dir, env=FAST, timeout=60)  # the directory alone, as status takes it
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("job tocancel: CANCELLED", r.stdout)
        self.assertEqual(job.wait(timeout=60), 3, job.err)  # as Ctrl-C: run exits 3
        self.assertEqual(load_job(self.job_dir)["state"], "CANCELLED")
        self.assertEqual({r["state"] for r in load_job(self.job_dir)["replicas"]}, {"CANCELLED"})
        self.assertFalse([p for p in pids if alive(p)])
        r = ztrain("cancel", "--job-dir", self.job_dir, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("already ended CANCELLED; nothing to cancel", r.stdout)
        r = ztrain("cancel", self.d, timeout=60)  # no job there
        self.assertEqual(r.returncode, 2)
        self.assertIn("holds no job", r.stderr)


    def test_examples_run(self):
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
        for name, n in (("pytorch-style-job.json", 4), ("legacy-config.yaml", 8),
                        ("vertex-job.json", 6)):
            with self.subTest(name):
                job_dir = os.path.join(self.d, name)
                job = Job(self, os.path.join(root, "examples", name), job_dir, env=FAST, cwd=root)
                self.assertEqual(job.wait(), 0, job.err)
                j = load_job(job_dir)
                self.assertEqual(j["state"], "SUCCEEDED")
                self.assertEqual(len(j["replicas"]), n)
                if name.startswith("pytorch"):
                    self.assertIn("rendezvous complete: sum of ranks = 6 (expected 6)", job.out)
                    for r in (1, 2, 3):
                        self.assertIn("rank %d got sum 6 from rank 0" % r, job.out)
                    for r in (0, 1, 2, 3):  # torchrun's variables, one host: the node holds every rank
                        self.assertRegex(job.out, r"rank %d of 4 \(workerpool\d #\d\), local rank %d of 4 on node 0"
                                         % (r, r))


class JobDirReuse(unittest.TestCase):
    """A job directory that holds another job is refused, naming both; the
    same job is resumed; --overwrite starts afresh, --resume continues."""

    def setUp(self):
        self.d = tmpdir("reuse-")
        self.job_dir = os.path.join(self.d, "job")
        self.a = spec(self.d, "job-a", [cmd_pool("exit 0")])
        self.b = spec(self.d, "job-b", [cmd_pool("exit 0"), cmd_pool("sleep 30")])
        job = Job(self, self.a, self.job_dir, env=FAST)
        self.assertEqual(job.wait(), 0, job.err)
        # what a checkpointing job leaves behind
        self.ckpt = os.path.join(self.job_dir, "checkpoints", "ckpt-000000001200")
        os.makedirs(self.ckpt)
        write(self.ckpt, "manifest.json", "{}")

    def test_another_job_is_refused(self):
        job = Job(self, self.b, self.job_dir, env=FAST)
        self.assertEqual(job.wait(), 2, job.err)
        self.assertIn("holds another job: 'job-a' (SUCCEEDED", job.err)
        self.assertIn("not this one 'job-b'", job.err)
        self.assertIn("--overwrite", job.err)
        self.assertIn("--resume", job.err)
        self.assertIn("differ at ", job.err)
        self.assertEqual(load_job(self.job_dir)["name"], "job-a")  # untouched
        self.assertTrue(os.path.isdir(self.ckpt))

    def test_the_same_job_resumes(self):
        first = load_job(self.job_dir)
        job = Job(self, self.a, self.job_dir, env=FAST)
        self.assertEqual(job.wait(), 0, job.err)
        self.assertIn("resuming job 'job-a'", job.err)
        self.assertTrue(os.path.isdir(self.ckpt))
        # the job's record goes on: its creation, its first run's
        # transitions, then this run's, as the next incarnation
        j = load_job(self.job_dir)
        self.assertEqual(j["createTime"], first["createTime"])
        self.assertEqual(j["incarnation"], first["incarnation"] + 1)
        self.assertEqual(j["transitions"][:len(first["transitions"])], first["transitions"])
        self.assertEqual([t["state"] for t in j["transitions"]].count("SUCCEEDED"), 2)

    def test_overwrite_starts_afresh(self):
        job = Job(self, self.b, self.job_dir, "--overwrite", env=FAST)
        self.assertEqual(job.wait(), 0, job.err)
        self.assertEqual(load_job(self.job_dir)["name"], "job-b")
        self.assertFalse(os.path.exists(self.ckpt))

    def test_resume_continues(self):
        job = Job(self, self.b, self.job_dir, "--resume", env=FAST)
        self.assertEqual(job.wait(), 0, job.err)
        self.assertIn("--resume: continuing job 'job-a'", job.err)
        self.assertTrue(os.path.isdir(self.ckpt))


class Status(unittest.TestCase):
    """`ztrain status` exits as `ztrain run` did, and tells a job whose
    coordinator is gone from a running one."""

    def setUp(self):
        self.d = tmpdir("status-")
        self.job_dir = os.path.join(self.d, "job")

    def status(self, *extra):
        return ztrain("status", "--job-dir", self.job_dir, *extra)

    def test_exit_codes_follow_the_state(self):
        for script, rc, state in (("exit 0", 0, "SUCCEEDED"), ("exit 1", 1, "FAILED")):
            with self.subTest(state=state):
                job = Job(self, spec(self.d, "st", [cmd_pool(script)]), self.job_dir, "--overwrite", env=FAST)
                self.assertEqual(job.wait(), rc, job.err)
                s = self.status()
                self.assertEqual(s.returncode, rc, s.stdout)
                self.assertIn(": " + state, s.stdout)
                j = self.status("--json")
                self.assertEqual(j.returncode, rc)
                self.assertEqual(json.loads(j.stdout)["state"], state)
        job = Job(self, spec(self.d, "st", [cmd_pool("sleep 30")]), self.job_dir, "--overwrite", env=FAST)
        wait_for(lambda: (load_job(self.job_dir) or {}).get("state") == "RUNNING", what="RUNNING")
        self.assertEqual(self.status().returncode, 0)
        job.proc.send_signal(signal.SIGINT)
        self.assertEqual(job.wait(), 3)
        self.assertEqual(self.status().returncode, 3)

    def test_killed_coordinator_is_not_running(self):
        prog = cmd_pool('test -e "$ZT_JOB_DIR/go" && exit 0; sleep 60')
        job = Job(self, spec(self.d, "k", [prog]), self.job_dir, env=FAST)
        wait_for(lambda: (load_job(self.job_dir) or {}).get("state") == "RUNNING", what="RUNNING")
        s = self.status()
        self.assertEqual(s.returncode, 0, s.stdout)
        self.assertIn("job k: RUNNING\n", s.stdout)
        os.kill(job.proc.pid, signal.SIGKILL)
        job.proc.wait()
        s = self.status()
        self.assertEqual(s.returncode, 1, s.stdout)
        self.assertIn("job k: FAILED (recorded RUNNING, but the coordinator is gone)", s.stdout)
        self.assertIn("was killed or its machine restarted", s.stdout)
        doc = json.loads(self.status("--json").stdout)
        self.assertEqual((doc["state"], doc["recordedState"], doc["processGone"]), ("FAILED", "RUNNING", True))
        # and the same job may run there again: nothing runs there now
        write(self.job_dir, "go", "")
        job = Job(self, spec(self.d, "k", [prog]), self.job_dir, env=FAST)
        self.assertEqual(job.wait(), 0, job.err)
        self.assertIn("resuming job 'k'", job.err)


class LargeJob(unittest.TestCase):
    """A job of 256 replicas starts, is supervised while it starts (no
    replica taken for silent), and ends SUCCEEDED: idle placeholders, and
    16 of the built-in trainer among them."""

    def check(self, job, n):
        self.assertEqual(job.wait(timeout=240), 0, job.err[-3000:])
        j = load_job(job.job_dir)
        self.assertEqual(j["state"], "SUCCEEDED")
        self.assertEqual(len(j["replicas"]), n)
        self.assertNotIn("sent no heartbeat", job.err)
        self.assertNotIn("did not register", job.err)
        self.assertEqual([r["name"] for r in j["replicas"] if r["restarts"]], [])
        return j

    def test_256_idle(self):
        d = tmpdir("large-")
        path = spec(d, "idle", [role_pool("ztrain-worker", 1, ["--run-seconds=3"]),
                                role_pool("ztrain-worker", 255, ["--idle"])])
        # a heartbeat timeout of 2 s: any pause of the coordinator's while it
        # starts the others would be taken for silence
        job = Job(self, path, os.path.join(d, "job"), env=dict(FAST, ZT_HEARTBEAT_TIMEOUT_MS="2000"))
        j = self.check(job, 256)
        self.assertIn("RUNNING", [t["state"] for t in j["transitions"]])  # all 256 registered

    def test_256_with_16_training(self):
        d = tmpdir("large-")
        train = ["--hidden=64", "--epochs=2", "--max_steps=150", "--batch_size=64", "--log_every=1000"]
        path = spec(d, "mixed", [role_pool("ztrain-worker", 1, train), role_pool("ztrain-worker", 15, train),
                                 role_pool("ztrain-paramserver", 2), role_pool("ztrain-worker", 238, ["--idle"])])
        # pool 3 is the evaluators' place: idle, they score no final model,
        # and the job does not wait for them to (ZT_EVAL_FINAL_MS=0)
        job = Job(self, path, os.path.join(d, "job"), env=dict(FAST, ZT_EVAL_FINAL_MS="0"))
        j = self.check(job, 256)
        self.assertGreater(j["metrics"]["workerpool0-0"]["accuracy"]["value"], 0.6)


if __name__ == "__main__":
    ztest.main()
