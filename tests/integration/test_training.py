"""Asynchronous parameter-server training end to end, on real processes:
the example job on a shortened run, a parameter server killed with SIGKILL
mid-training (restarted, restores its shard, the job succeeds), a chief
killed mid-training (resumes from the newest checkpoint), checkpoints that
verify, and a clear error when the dataset is missing."""
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
import unittest
import zlib

import ztest  # noqa: E402
from ztest import BIN, Job, alive, job_file, load_job, pool, tmpdir, wait_for, write

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
FAST = {"ZT_STOP_GRACE_MS": "3000", "ZT_HEARTBEAT_MS": "300"}


def job_spec(d, name, trainer_args, workers=2, servers=2, evaluators=1):
    return job_file(d, name, [pool("ztrain-worker", 1, trainer_args),
                              pool("ztrain-worker", workers, trainer_args) if workers else {},
                              pool("ztrain-paramserver", servers) if servers else {},
                              pool("ztrain-evaluator", evaluators) if evaluators else {}])


def read_text(path):
    with open(path) as f:
        return f.read()


def metric(job, name):
    return job["metrics"]["workerpool0-0"][name]["value"]  # the chief's


def verify_checkpoint(path):
    """Re-checks a checkpoint directory the way a reader must: manifest, sizes, CRC32."""
    man = json.load(open(os.path.join(path, "manifest.json")))
    total = 0
    for f in man["files"]:
        data = open(os.path.join(path, f["file"]), "rb").read()
        assert len(data) == f["bytes"], f
        assert zlib.crc32(data) == f["crc32"], f
        total += f["count"]
    assert total == sum(t["numel"] for t in man["tensors"])
    return man


def replica(job, name):
    return [r for r in job["replicas"] if r["name"] == name][0]


SHORT = ["--hidden=128", "--epochs=1", "--batch_size=64", "--log_every=100"]


class Training(unittest.TestCase):
    def setUp(self):
        self.d = tmpdir("train-")
        self.job_dir = os.path.join(self.d, "job")

    def test_example_job_shortened(self):
        ex = json.load(open(os.path.join(ROOT, "examples", "fashion-mnist-async.json")))
        for p in ex["jobSpec"]["workerPoolSpecs"][:2]:
            p["containerSpec"]["args"] = [a for a in p["containerSpec"]["args"]
                                          if not a.startswith(("--epochs", "--checkpoint_steps"))]
            p["containerSpec"]["args"] += ["--epochs=1", "--checkpoint_steps=100"]
        path = write(self.d, "short.json", json.dumps(ex))
        job = Job(self, path, self.job_dir, env=dict(FAST, ZT_METRIC_HISTORY="5"))
        self.assertEqual(job.wait(timeout=400), 0, job.err[-3000:])
        j = load_job(self.job_dir)
        self.assertEqual(j["state"], "SUCCEEDED")
        # One epoch of asynchronous updates: 0.84-0.85 alone here, 0.80 seen on
        # two loaded cores (staler pushes); a model that did not learn scores 0.1.
        self.assertGreaterEqual(metric(j, "accuracy"), 0.75)
        # Every replica's own series (bounded by ZT_METRIC_HISTORY, newest kept)
        # and its latest value, not one value from whoever reported last.
        self.assertEqual(sorted(j["metrics"]), ["workerpool0-0", "workerpool1-0", "workerpool1-1"])
        for name, per in j["metrics"].items():
            loss = per["loss"]
            self.assertTrue(0 < len(loss["series"]) <= 5, (name, loss))
            self.assertEqual(loss["series"][-1], [loss["step"], loss["value"]])
            steps = [s for s, _ in loss["series"]]
            self.assertEqual(steps, sorted(steps))
        evals = [e for e in j["evaluations"] if e["name"] == "eval_accuracy"]
        self.assertGreaterEqual(len({e["step"] for e in evals}), 2, j["evaluations"])
        self.assertTrue(all(0.5 < e["value"] <= 1 for e in evals))
        self.assertGreaterEqual(len(j["checkpoints"]), 2)
        self.assertIn("final test accuracy", job.out)
        # One line format everywhere; progress lines say step / total, % and ETA.
        progress = [l for l in job.out.splitlines() if "examples/s" in l]
        self.assertGreaterEqual(len(progress), 3)  # one per training replica at least
        for line in progress:
            self.assertRegex(line, r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z I (chief|worker)/\d "
                                   r"workerpool[01]-\d\[\d+\]: step \d+/\d+ \(\d+%, ETA \d+m\d\ds\) "
                                   r"epoch \d examples/s \d+ loss \d+\.\d+")
        for line in job.err.splitlines():  # the coordinator's own lines
            if not line.startswith("ztrain: job"):
                self.assertRegex(line, r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z [EWID] coordinator/0\[\d+\]: ")
        self.assertNotIn(" metric loss = ", job.err)  # no echo of each progress line
        self.assertRegex(job.err.splitlines()[-1], r"^ztrain: job SUCCEEDED after \d+\.\d s")
        model = os.path.join(self.job_dir, "model")
        final = [n for n in os.listdir(model) if n.startswith("ckpt-")]
        self.assertEqual(len(final), 1)
        man = verify_checkpoint(os.path.join(model, final[0]))
        self.assertEqual(man["model"]["sizes"], [784, 256, 128, 10])
        self.assertEqual([t["name"] for t in man["tensors"]], ["w0", "b0", "w1", "b1", "w2", "b2"])
        self.assertEqual(man["tensors"][0]["shape"], [784, 256])
        ck = os.path.join(self.job_dir, "checkpoints")
        for n in os.listdir(ck):
            self.assertFalse(n.startswith("."), "a temporary checkpoint was left behind")
            verify_checkpoint(os.path.join(ck, n))
        r = subprocess.run([os.path.join(BIN, "ztrain"), "status", "--job-dir", self.job_dir],
                           capture_output=True, text=True, timeout=30)
        self.assertIn("latest evaluation: eval_", r.stdout)

    def test_paramserver_killed_restores(self):
        path = job_spec(self.d, "pskill", SHORT + ["--epochs=2", "--checkpoint_steps=100"],
                        workers=1, evaluators=0)
        job = Job(self, path, self.job_dir, env=FAST)
        wait_for(lambda: len((load_job(self.job_dir) or {}).get("checkpoints", [])) >= 2,
                 timeout=200, what="two checkpoints")
        victim = replica(load_job(self.job_dir), "workerpool2-1")["pid"]
        os.kill(victim, signal.SIGKILL)
        self.assertEqual(job.wait(timeout=400), 0, job.err[-3000:])
        j = load_job(self.job_dir)
        self.assertEqual(j["state"], "SUCCEEDED")
        self.assertEqual(replica(j, "workerpool2-1")["restarts"], 1)
        log = open(os.path.join(self.job_dir, "replica-logs", "workerpool2-1.log")).read()
        self.assertIn("restored elements", log)
        self.assertGreaterEqual(metric(j, "accuracy"), 0.80)

    def test_paramserver_snapshot_on_a_full_disk(self):
        # the servers' snapshot folder becomes a disk with room for one
        # snapshot of server 1 and no more: each later write fails, is
        # warned with its reason and counted, and never taken as written;
        # server 1 killed then restores the snapshot it has, saying its age
        path = job_spec(self.d, "psfull", SHORT + ["--epochs=2", "--checkpoint_steps=100000"], workers=1,
                        evaluators=0)
        job = Job(self, path, self.job_dir, env=dict(FAST, ZT_PS_SNAPSHOT_MS="200"))
        snaps = os.path.join(self.job_dir, "ps-snapshots")
        mine = os.path.join(snaps, "server-1-of-2.snap")
        wait_for(lambda: os.path.exists(mine) and os.path.getsize(mine) > 0, timeout=200, what="a snapshot")
        saved = os.path.join(self.d, "saved.snap")
        shutil.copy2(mine, saved)
        size = os.path.getsize(saved)
        room = (size * 3 // 2 + 4095) // 4096 * 4096
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%d,mode=0755" % room, "tmpfs", snaps], check=True)
        self.addCleanup(subprocess.run, ["umount", "-l", snaps])
        shutil.copy2(saved, mine)
        log_path = os.path.join(self.job_dir, "replica-logs", "workerpool2-1.log")
        wait_for(lambda: "No space left on device" in read_text(log_path), timeout=60, what="a failed write")
        victim = replica(load_job(self.job_dir), "workerpool2-1")["pid"]
        os.kill(victim, signal.SIGKILL)
        self.assertEqual(job.wait(timeout=400), 0, job.err[-3000:])
        j = load_job(self.job_dir)
        self.assertEqual(j["state"], "SUCCEEDED")
        self.assertGreaterEqual(j["metrics"]["workerpool2-1"]["snapshot_failures"]["value"], 1)
        log = read_text(log_path)
        self.assertRegex(log, r"the shard snapshot \S+server-1-of-2\.snap\.tmp: cannot write it: No space left on "
                              r"device \(\d+ failed writes in all; the last one written holds version \d+ of \d+\)")
        m = re.search(r"from the shard snapshot \S+server-1-of-2\.snap \((\d+) updates, written ([\d.]+) s ago", log)
        self.assertTrue(m, log[-3000:])
        self.assertEqual(os.path.getsize(mine), size)  # the one snapshot, whole

    def test_evaluator_preempted_scores_nothing_twice(self):
        # the evaluator stopped (SIGTERM) after a score: its successor is
        # not handed the checkpoint it scored, only newer ones (6 epochs: the
        # training goes on well past the second score on a fast machine too)
        path = job_spec(self.d, "evalstop", SHORT + ["--epochs=6", "--checkpoint_steps=300"], workers=1,
                        evaluators=1)
        job = Job(self, path, self.job_dir, env=FAST)
        wait_for(lambda: len((load_job(self.job_dir) or {}).get("evaluations", [])) >= 2, timeout=200,
                 what="an evaluation")
        evaluator = replica(load_job(self.job_dir), "workerpool3-0")["pid"]
        os.kill(evaluator, signal.SIGTERM)
        self.assertEqual(job.wait(timeout=400), 0, job.err[-3000:])
        j = load_job(self.job_dir)
        self.assertEqual(replica(j, "workerpool3-0")["preemptions"], 1)
        seen = [(e["step"], e["name"]) for e in j["evaluations"]]
        self.assertEqual(len(seen), len(set(seen)), seen)
        self.assertGreater(len({s for s, _ in seen}), 1, seen)  # and it went on scoring

    def test_coordinator_killed_then_resumed_says_so(self):
        # the coordinator (ztrain run) killed mid-run: --resume carries the
        # job on, and its history says how the earlier run ended, the step
        # it goes on from and the steps trained again
        path = job_spec(self.d, "coordkill", SHORT + ["--epochs=2", "--checkpoint_steps=100"], workers=1,
                        evaluators=0)
        job = Job(self, path, self.job_dir, env=FAST)
        wait_for(lambda: len((load_job(self.job_dir) or {}).get("checkpoints", [])) >= 2, timeout=200,
                 what="two checkpoints")
        j = load_job(self.job_dir)
        pids = [r["pid"] for r in j["replicas"] if r["pid"]]
        os.kill(j["coordinatorProcess"]["pid"], signal.SIGKILL)
        job.wait(timeout=60)
        wait_for(lambda: not any(alive(p) for p in pids), timeout=60, what="the replicas gone")
        again = Job(self, path, self.job_dir, "--resume", env=FAST)
        self.assertEqual(again.wait(timeout=400), 0, again.err[-3000:])
        j = load_job(self.job_dir)
        self.assertEqual(j["state"], "SUCCEEDED")
        ev = [e for e in j["events"] if e["kind"] == "resumed"]
        self.assertEqual(len(ev), 1, j["events"])
        self.assertIn("its coordinator was lost while the job was RUNNING", ev[0]["earlierEnd"])
        self.assertGreaterEqual(ev[0]["fromStep"], 100)
        self.assertEqual(ev[0]["stepsTrainedAgain"], max(0, ev[0]["earlierStep"] - ev[0]["fromStep"]))
        self.assertIn("steps are trained again", again.err)
        r = subprocess.run([os.path.join(BIN, "ztrain"), "status", "--job-dir", self.job_dir], capture_output=True,
                           text=True, timeout=30)
        self.assertRegex(r.stdout, r"resumed at \S+: the earlier run: its coordinator was lost")

    def test_async_worker_restarted_goes_on_from_its_own_step(self):
        # an async worker killed (SIGKILL), then its successor stopped from
        # outside (SIGTERM, a preemption): each successor goes on from the
        # step its predecessor reached (its own position file), not from
        # the chief's checkpoint (there is none here): no batch twice
        path = job_spec(self.d, "posw", SHORT + ["--epochs=8", "--checkpoint_steps=100000", "--log_every=50"],
                        workers=1, evaluators=0)
        job = Job(self, path, self.job_dir, env=FAST)
        log_path = os.path.join(self.job_dir, "replica-logs", "workerpool1-0.log")

        def steps(text):
            return [int(x) for x in re.findall(r" step (\d+)/\d+ ", text)]

        wait_for(lambda: os.path.exists(log_path) and max(steps(read_text(log_path)) or [0]) >= 300, timeout=200,
                 what="the worker at step 300")
        first = replica(load_job(self.job_dir), "workerpool1-0")["pid"]
        os.kill(first, signal.SIGKILL)
        second = wait_for(lambda: (lambda p: p if p and p != first else None)(
            replica(load_job(self.job_dir), "workerpool1-0")["pid"]), timeout=60, what="the successor")
        wait_for(lambda: len(re.findall(r"resuming from \S+ at step", read_text(log_path))) >= 1, timeout=60,
                 what="the successor's resume")
        wait_for(lambda: max(steps(read_text(log_path).split("resuming from")[-1]) or [0]) > 0, timeout=60,
                 what="the successor training")
        os.kill(second, signal.SIGTERM)
        self.assertEqual(job.wait(timeout=400), 0, job.err[-3000:])
        text = read_text(log_path)
        resumes = [(m.group(1), int(m.group(2))) for m in
                   re.finditer(r"resuming from (\S+) at step (\d+) \(this trainer's own position", text)]
        self.assertEqual(len(resumes), 2, text[-3000:])
        self.assertTrue(all(p.endswith("trainers/rank-1.pos") for p, _ in resumes), resumes)
        # after the kill: at or past the last step it logged (50 a line),
        # read once the job is over: a fast worker's last lines may still
        # be on their way into the log when it is killed
        reached = max(steps(text.split("resuming from")[0]))
        self.assertGreaterEqual(resumes[0][1], reached)
        self.assertLess(resumes[0][1], reached + 50)
        # after the preemption: exactly where it stopped, each run's steps
        # going on from the one before
        stopped = re.search(r"stopping at step (\d+): \S+rank-1\.pos keeps it", text)
        self.assertTrue(stopped, text[-3000:])
        self.assertEqual(resumes[1][1], int(stopped.group(1)))
        self.assertGreater(min(steps(text.split("resuming from")[2])), resumes[1][1])
        j = load_job(self.job_dir)
        self.assertEqual(replica(j, "workerpool1-0")["restarts"], 1)
        self.assertEqual(replica(j, "workerpool1-0")["preemptions"], 1)

    def test_chief_killed_resumes(self):
        path = job_spec(self.d, "chiefkill", SHORT + ["--epochs=2", "--checkpoint_steps=100"],
                        workers=1, evaluators=0)
        job = Job(self, path, self.job_dir, env=FAST)
        wait_for(lambda: len((load_job(self.job_dir) or {}).get("checkpoints", [])) >= 2,
                 timeout=200, what="two checkpoints")
        os.kill(replica(load_job(self.job_dir), "workerpool0-0")["pid"], signal.SIGKILL)
        self.assertEqual(job.wait(timeout=400), 0, job.err[-3000:])
        j = load_job(self.job_dir)
        self.assertEqual(replica(j, "workerpool0-0")["restarts"], 1)
        log = open(os.path.join(self.job_dir, "replica-logs", "workerpool0-0.log")).read()
        m = re.search(r"resuming from \S+ at step (\d+)", log)
        self.assertTrue(m, log[-3000:])
        # the restarted chief goes on from there: no step and no checkpoint
        # below it again
        after = log[m.end():]
        steps = [int(x) for x in re.findall(r" step (\d+)/\d+ ", after)]
        ckpts = [int(x) for x in re.findall(r"written \(step (\d+)\)", after)]
        self.assertTrue(steps, after[-3000:])
        self.assertGreater(min(steps + ckpts), int(m.group(1)), after[-3000:])
        self.assertGreaterEqual(metric(j, "accuracy"), 0.80)

    def test_missing_dataset_is_a_clear_error(self):
        r = subprocess.run([os.path.join(BIN, "ztrain-worker"), "--data_dir=/nonexistent/fm"],
                           capture_output=True, text=True, timeout=60,
                           env={k: v for k, v in os.environ.items() if not k.startswith("ZT_")})
        self.assertEqual(r.returncode, 1)
        self.assertIn("/nonexistent/fm/train-images-idx3-ubyte.gz", r.stderr)
        self.assertIn("dataset-fashion-mnist", r.stderr)
        r = subprocess.run([os.path.join(BIN, "ztrain-worker"), "--learning_rate=fast"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--learning_rate=fast: expected a number", r.stderr)


class CleanEnd(unittest.TestCase):
    """A job that ends, normally or by Ctrl-C, async or sync, leaves no
    shared-memory region and no ipc socket file of its own, and every role
    stops on SHUTDOWN within the grace period (nobody is SIGKILLed)."""

    def run_job(self, example, epochs, interrupt_after=None):
        d = tmpdir("clean-")
        ipc = os.path.join(d, "ipc")
        ex = json.load(open(os.path.join(ROOT, "examples", example)))
        for p in ex["jobSpec"]["workerPoolSpecs"][:2]:
            p["containerSpec"]["args"] = [a for a in p["containerSpec"]["args"]
                                          if not a.startswith("--epochs")] + ["--epochs=%d" % epochs]
        path = write(d, "job.json", json.dumps(ex))
        job = Job(self, path, os.path.join(d, "job"), env=dict(FAST, ZT_IPC_DIR=ipc, ZT_STOP_GRACE_MS="8000"))
        if interrupt_after is not None:
            wait_for(lambda: (load_job(job.job_dir) or {}).get("state") == "RUNNING", timeout=60,
                     what="RUNNING")
            wait_for(lambda: os.path.exists(ipc) and os.listdir(ipc), timeout=30, what="data-plane sockets")
            time.sleep(interrupt_after)
            job.proc.send_signal(signal.SIGINT)
        rc = job.wait(timeout=300)
        pids = set(int(p) for p in re.findall(r"started pid (\d+)", job.err))
        self.assertTrue(pids, job.err[-2000:])
        left = [f for f in os.listdir("/dev/shm") if f.startswith("ztrain-") and
                any(("-%d-" % p) in f for p in pids)]
        self.assertEqual(left, [], "shared memory left behind")
        self.assertEqual(os.listdir(ipc) if os.path.exists(ipc) else [], [], "ipc socket files left behind")
        self.assertNotIn("did not stop within the grace period", job.err)
        return rc, job

    def test_async_normal_end(self):
        rc, job = self.run_job("fashion-mnist-async.json", 1)
        self.assertEqual(rc, 0, job.err[-2000:])

    def test_async_ctrl_c(self):
        for after in (0.0, 1.0):
            with self.subTest(after=after):
                rc, job = self.run_job("fashion-mnist-async.json", 50, interrupt_after=after)
                self.assertEqual(rc, 3, job.err[-2000:])

    def test_sync_ctrl_c(self):
        for after in (0.0, 1.0):
            with self.subTest(after=after):
                rc, job = self.run_job("fashion-mnist-sync.json", 50, interrupt_after=after)
                self.assertEqual(rc, 3, job.err[-2000:])


class PsFaults(unittest.TestCase):
    """kill -9 of each parameter server at a random moment, in five runs
    (both servers in each run, each at its own moment): every run ends
    SUCCEEDED, each restarted server goes on from its shard snapshot (or a
    newer checkpoint), and the accuracy stays with an undisturbed run's
    (median within two points: async training itself varies by about a
    point from run to run, undisturbed runs included, and the medians of 3
    and of 5 such runs were seen 1.75 points apart on a loaded machine)."""
    # 4 epochs: with 3, a quick run had ended before its second server's kill
    # (each kill up to 1.5 s after that server's first snapshot)
    ARGS = ["--hidden=128", "--epochs=4", "--batch_size=64", "--log_every=100", "--checkpoint_steps=300"]
    VICTIMS = ("workerpool2-0", "workerpool2-1")

    def run_job(self, seed=None):
        d = tmpdir("psfault-")
        path = job_spec(d, "ps", self.ARGS, workers=2, servers=2, evaluators=0)
        job = Job(self, path, os.path.join(d, "job"), env=FAST)
        victims = self.VICTIMS if seed is not None else ()
        rng = random.Random(seed)
        for victim in sorted(victims, key=lambda v: rng.random()):
            # Kill only once the server holds trained state: its first
            # snapshot is on disk (a server killed before any training has
            # nothing to restore, and a loaded machine can take seconds to
            # get there).
            index = int(victim.rsplit("-", 1)[1])
            snap = os.path.join(job.job_dir, "ps-snapshots", "server-%d-of-2.snap" % index)
            wait_for(lambda: os.path.exists(snap), timeout=120, what="the first shard snapshot")
            time.sleep(rng.uniform(0.0, 1.5))
            pid = replica(load_job(job.job_dir), victim)["pid"]
            self.assertGreater(pid, 0, "the job ended before the kill")
            os.kill(pid, signal.SIGKILL)
        self.assertEqual(job.wait(timeout=300), 0, job.err[-3000:])
        j = load_job(job.job_dir)
        self.assertEqual(j["state"], "SUCCEEDED")
        for victim in victims:
            self.assertEqual(replica(j, victim)["restarts"], 1)
            with open(os.path.join(job.job_dir, "replica-logs", victim + ".log")) as f:
                self.assertRegex(f.read(), r"restored elements \[\d+, \d+\) from ")
        return metric(j, "accuracy")

    def test_each_server_killed_five_times(self):
        calm = statistics.median(self.run_job() for _ in range(3))
        accs = [self.run_job(seed) for seed in range(5)]
        sys.stderr.write("\n  %s killed: accuracy %s (undisturbed median %.4f)\n" % (" and ".join(self.VICTIMS), accs, calm))
        self.assertLessEqual(abs(statistics.median(accs) - calm), 0.02, (accs, calm))
        # any single run within 12 points. The restore itself is proven
        # above (the log's restored range); a server killed late leaves
        # the final model with less time to settle, and on a loaded
        # machine (the suite's other tests alongside) one run of five has
        # come in 5.5 and once 9.5 points low with the median within 0.2
        self.assertGreater(min(accs), calm - 0.12, (accs, calm))


CUDA_LIBS = re.compile(r"lib(cuda|cudart|cublas|cublasLt|nccl|ztgpu)\b[^/\n]*\.so")
HAVE_CUDA = "CUDA backend: yes" in subprocess.run([os.path.join(BIN, "ztrain"), "--version"],
                                                  capture_output=True, text=True).stdout


def rss_mb(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1)) / 1024.0


class FullDisk(unittest.TestCase):
    def test_no_space_is_named_at_the_first_checkpoint(self):
        """The job's output folder (baseOutputDirectory) on a full file
        system (a 512 KiB tmpfs): the chief's first periodic checkpoint
        already fails and says why (no space), not "input/output error";
        the coordinator says so at once, job.json keeps it as an event and
        `ztrain status` warns."""
        d = tmpdir("fulldisk-")
        small = os.path.join(d, "small")
        os.mkdir(small)
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k,mode=0700", "tmpfs", small],
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            self.skipTest("cannot mount a tmpfs: " + r.stderr)
        self.addCleanup(subprocess.run, ["umount", "-l", small], timeout=30)
        args = ["--hidden=64", "--epochs=1", "--checkpoint_steps=100", "--log_every=100"]
        spec = {"displayName": "full", "jobSpec": {
            "workerPoolSpecs": [pool("ztrain-worker", 1, args)],
            "baseOutputDirectory": {"outputUriPrefix": os.path.join(small, "out")}}}
        job_dir = os.path.join(d, "job")
        job = Job(self, write(d, "full.json", json.dumps(spec)), job_dir)
        job.wait(timeout=300)
        text = job.out + job.err
        self.assertRegex(text, r"cannot write the checkpoint of step 100 under \S+: no space left on the device")
        self.assertRegex(text, r"workerpool0-0 cannot write checkpoints: the checkpoint of step 100 failed: no space "
                               r"left on the device")
        self.assertNotIn("input/output error", text)
        events = [e for e in load_job(job_dir)["events"] if e["kind"] == "checkpointFailed"]
        self.assertEqual(events[0]["step"], 100)
        self.assertIn("no space left", events[0]["error"])
        st = subprocess.run([os.path.join(BIN, "ztrain"), "status", job_dir], capture_output=True, text=True,
                            timeout=60)
        self.assertRegex(st.stdout, r"warning: workerpool0-0 cannot write checkpoints: the checkpoint of step \d+ "
                                    r"failed at \S+: no space left on the device")


    def full_job(self, size, args, name):
        d = tmpdir("fulldisk-")
        small = os.path.join(d, "small")
        os.mkdir(small)
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%s,mode=0700" % size, "tmpfs", small],
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            self.skipTest("cannot mount a tmpfs: " + r.stderr)
        self.addCleanup(subprocess.run, ["umount", "-l", small], timeout=30)
        spec = {"displayName": name, "jobSpec": {
            "workerPoolSpecs": [pool("ztrain-worker", 1, args)],
            "baseOutputDirectory": {"outputUriPrefix": os.path.join(small, "out")}}}
        job_dir = os.path.join(d, "job")
        job = Job(self, write(d, name + ".json", json.dumps(spec)), job_dir)
        job.wait(timeout=300)
        return job, job_dir, os.path.join(small, "out")

    def test_final_model_makes_room(self):
        """Room for two of the chief's checkpoints and a half: the third and
        later ones fail (said, kept as events), and the final model, which
        does not fit either, removes the oldest checkpoint kept and is
        written: the job SUCCEEDS."""
        args = ["--hidden=64", "--epochs=1", "--checkpoint_steps=100", "--keep_checkpoints=2", "--log_every=100"]
        job, job_dir, out = self.full_job("1600k", args, "room")
        j = load_job(job_dir)
        self.assertEqual(j["state"], "SUCCEEDED", job.err[-3000:])
        self.assertTrue([e for e in j["events"] if e["kind"] == "checkpointFailed"], j["events"])
        self.assertRegex(job.out + job.err, r"no room for the final model under \S+: removed the oldest checkpoint "
                                            r"kept, \S+/ckpt-0*100, and trying again")
        self.assertTrue(os.listdir(os.path.join(out, "model")))
        self.assertLess(len(os.listdir(os.path.join(out, "checkpoints"))), 2)  # as many removed as it took

    def test_final_model_that_cannot_fit_fails_naming_the_disk(self):
        """No room even for one checkpoint (512 KiB): every save fails, and
        the final model too, with no checkpoint to remove: the job FAILS
        as the system's failure, naming the disk, never "a user error"."""
        args = ["--hidden=64", "--epochs=1", "--checkpoint_steps=100", "--log_every=100"]
        job, job_dir, out = self.full_job("512k", args, "full2")
        j = load_job(job_dir)
        self.assertEqual(j["state"], "FAILED")
        self.assertIn("its disk is full: a failure of the system, not the program", j["error"]["message"])
        self.assertNotIn("a user error", job.err)
        self.assertRegex(job.out + job.err, r"the final model cannot be written under \S+: its disk is full, with no "
                                            r"checkpoint left to remove")


def openblas_corename():
    """The kernels OpenBLAS picks for this processor on its own."""
    import ctypes
    import ctypes.util
    lib = ctypes.CDLL(ctypes.util.find_library("openblas") or "libopenblas.so.0")
    lib.openblas_get_corename.restype = ctypes.c_char_p
    return lib.openblas_get_corename().decode()


class BlasKernels(unittest.TestCase):
    """Where OpenBLAS does not know the processor (it falls back to its SSE3
    kernels, "Prescott") a trainer and an evaluator run it again on the
    newest kernels the processor has, and say so; a value the user set for
    OPENBLAS_CORETYPE is kept."""

    def run_job(self, d, name, env):
        path = job_spec(d, name, SHORT + ["--epochs=1"], workers=0, servers=0, evaluators=1)
        job = Job(self, path, os.path.join(d, name), env=dict(FAST, OPENBLAS_VERBOSE="2", **env))
        self.assertEqual(job.wait(timeout=120), 0, job.err[-2000:])
        logs = os.path.join(d, name, "replica-logs")
        return [read_text(os.path.join(logs, f)) for f in ("workerpool0-0.log", "workerpool3-0.log")]

    def test_kernels_for_the_processor(self):
        d = tmpdir("blas-")
        own = openblas_corename()
        with open("/proc/cpuinfo") as f:
            flags = set(re.search(r"^flags\s*:(.*)$", f.read(), re.M).group(1).split())
        want = ("SkylakeX" if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags
                else "Haswell" if {"avx2", "fma"} <= flags else None)
        for log in self.run_job(d, "own", {}):  # the trainer's, then the evaluator's
            kernels = re.findall(r"Core: (\w+)", log)
            chosen = re.findall(r"running its (\w+) kernels \(OPENBLAS_CORETYPE\)", log)
            if own != "Prescott":
                self.assertEqual((kernels, chosen), ([own], []), log[-2000:])
            elif want:  # the first load's fallback, then the program run again
                self.assertEqual((kernels, chosen), (["Prescott", want], [want]), log[-2000:])
            else:
                self.assertEqual((kernels, chosen), (["Prescott"], []), log[-2000:])
        # the user's choice stands, and nothing is said
        for log in self.run_job(d, "users", {"OPENBLAS_CORETYPE": "Sandybridge"}):
            self.assertEqual(re.findall(r"Core: (\w+)", log), ["Sandybridge"], log[-2000:])
            self.assertNotIn("OPENBLAS_CORETYPE", log)


class CudaOnDemand(unittest.TestCase):
    """CUDA, cuBLAS and NCCL are mapped only by a process that uses a GPU:
    the trainer loads its CUDA module when a replica trains on one."""

    def test_binaries_do_not_link_cuda(self):
        for b in sorted(os.listdir(BIN)):
            r = subprocess.run(["ldd", os.path.join(BIN, b)], capture_output=True, text=True)
            self.assertNotRegex(r.stdout, CUDA_LIBS, b)

    def sample(self, job, names):
        """Each running replica's maps and RSS while the job runs."""
        wait_for(lambda: (load_job(job.job_dir) or {}).get("state") == "RUNNING", timeout=60, what="RUNNING")
        time.sleep(0.5)  # training, or idling, for a while
        seen, reps = {}, load_job(job.job_dir)["replicas"]
        for r in reps:
            if r["name"] in names and r.get("pid"):
                with open("/proc/%d/maps" % r["pid"]) as f:
                    seen[r["name"]] = (f.read(), rss_mb(r["pid"]))
        self.assertEqual(set(seen), set(names), reps)
        return seen

    def test_cpu_replicas_map_no_cuda(self):
        d = tmpdir("cuda-")
        # placeholders and a parameter server: no CUDA, under 20 MB each
        path = job_file(d, "idle", [pool("ztrain-worker", 1, ["--run-seconds=4"]),
                                    pool("ztrain-worker", 3, ["--idle"]), pool("ztrain-paramserver", 1)])
        job = Job(self, path, os.path.join(d, "idle-job"), env=FAST)
        names = ["workerpool1-%d" % i for i in range(3)] + ["workerpool2-0"]
        for name, (maps, rss) in self.sample(job, names).items():
            self.assertNotRegex(maps, CUDA_LIBS, name)
            if name.startswith("workerpool1"):
                self.assertLess(rss, 20, name)
        self.assertEqual(job.wait(), 0, job.err[-2000:])
        # trainers on the CPU (CUDA_VISIBLE_DEVICES empty): no CUDA either
        path = job_spec(d, "cpu", SHORT + ["--epochs=3", "--device=auto"], workers=1, servers=1, evaluators=0)
        job = Job(self, path, os.path.join(d, "cpu-job"), env=FAST)
        for name, (maps, rss) in self.sample(job, ["workerpool0-0", "workerpool1-0"]).items():
            self.assertNotRegex(maps, CUDA_LIBS, name)
        self.assertEqual(job.wait(timeout=120), 0, job.err[-2000:])

    def test_missing_cuda_module_is_a_clear_error(self):
        d = tmpdir("cuda-")
        path = job_spec(d, "gpu", SHORT + ["--device=cuda"], workers=0, servers=0, evaluators=0)
        job = Job(self, path, os.path.join(d, "job"), "--cpu-only",
                  env=dict(FAST, ZT_GPU_MODULE=os.path.join(d, "no-such-module.so")))
        self.assertEqual(job.wait(), 1, job.err[-2000:])
        if HAVE_CUDA:
            self.assertIn("--device=cuda: cannot load ztrain's CUDA module: %s" % os.path.join(d, "no-such-module.so"),
                          job.err)
            self.assertIn("run with --cpu-only", job.err)
        else:
            self.assertIn("--device=cuda: this ztrain was built without CUDA", job.err)


if __name__ == "__main__":
    ztest.main()
