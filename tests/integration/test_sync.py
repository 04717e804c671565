"""Synchronous data-parallel training, on real processes: the sync example
(reducers) on a shortened run, every replica's weights bitwise equal, a
reducer killed with SIGKILL and restarted while the job still succeeds, the
ring when there are no reducers, and a worker with another model failing the
job with the naming error instead of hanging."""
import datetime
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
import unittest

import ztest  # noqa: E402
from ztest import Job, alive, job_file, load_job, pool, tmpdir, wait_for, write, ztrain

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
FAST = {"ZT_STOP_GRACE_MS": "3000", "ZT_HEARTBEAT_MS": "300"}


def hashes(out):
    return dict(re.findall(r" (workerpool\d-\d)\[\d+\]: params fnv1a ([0-9a-f]{16})", out))


def read(job_dir, log):
    with open(os.path.join(job_dir, "replica-logs", log)) as f:
        return f.read()


def replica(job, name):
    return [r for r in job["replicas"] if r["name"] == name][0]


def spec(d, name, args, workers, reducers, evaluators=0, worker_args=None):
    return job_file(d, name, [pool("ztrain-worker", 1, args),
                              pool("ztrain-worker", workers, worker_args or args),
                              pool("ztrain-reducer", reducers) if reducers else {},
                              pool("ztrain-evaluator", evaluators) if evaluators else {}])


class Sync(unittest.TestCase):
    def setUp(self):
        self.d = tmpdir("sync-")
        self.job_dir = os.path.join(self.d, "job")

    def run_short_example(self, job_dir):
        with open(os.path.join(ROOT, "examples", "fashion-mnist-sync.json")) as f:
            ex = json.load(f)
        for p in ex["jobSpec"]["workerPoolSpecs"][:2]:
            p["containerSpec"]["args"] = [a for a in p["containerSpec"]["args"]
                                          if not a.startswith(("--epochs", "--checkpoint_steps"))]
            p["containerSpec"]["args"] += ["--epochs=1", "--checkpoint_steps=80"]
        path = write(self.d, "short.json", json.dumps(ex))
        job = Job(self, path, job_dir, env=FAST)
        self.assertEqual(job.wait(timeout=400), 0, job.err[-3000:])
        h = hashes(job.out)
        self.assertEqual(len(h), 4, job.out[-2000:])
        self.assertEqual(len(set(h.values())), 1, h)  # bitwise identical weights
        return job, h

    def test_example_shortened_identical_weights(self):
        job, h = self.run_short_example(self.job_dir)
        j = load_job(self.job_dir)
        self.assertGreaterEqual(j["metrics"]["workerpool0-0"]["accuracy"]["value"], 0.80)
        evals = {e["step"] for e in j["evaluations"] if e["name"] == "eval_accuracy"}
        self.assertGreaterEqual(len(evals), 2)
        self.assertIn("through reducers", read(self.job_dir, "workerpool1-2.log"))
        # Run again: the reducers add each block's pieces in rank order, not
        # as they arrive, so an undisturbed run ends with the same weights
        # bit for bit (arrival order differs from run to run).
        _, again = self.run_short_example(os.path.join(self.d, "again"))
        self.assertEqual(set(again.values()), set(h.values()))

    def test_reducer_killed_job_succeeds(self):
        args = ["--hidden=128", "--epochs=2", "--train_examples=20000", "--checkpoint_steps=50",
                "--log_every=50"]
        path = spec(self.d, "redkill", args, workers=2, reducers=2)
        job = Job(self, path, self.job_dir, env=FAST)
        wait_for(lambda: len((load_job(self.job_dir) or {}).get("checkpoints", [])) >= 1,
                 timeout=200, what="a checkpoint")
        os.kill(replica(load_job(self.job_dir), "workerpool2-1")["pid"], signal.SIGKILL)
        self.assertEqual(job.wait(timeout=400), 0, job.err[-3000:])
        j = load_job(self.job_dir)
        self.assertEqual(j["state"], "SUCCEEDED")
        self.assertEqual(replica(j, "workerpool2-1")["restarts"], 1)
        h = hashes(job.out)
        self.assertEqual(len(h), 3)
        self.assertEqual(len(set(h.values())), 1, h)  # the restart cost no worker its equality

    def test_ring_without_reducers(self):
        args = ["--hidden=64", "--epochs=1", "--train_examples=9000", "--log_every=50",
                "--lr_scaling=linear", "--warmup_steps=20"]
        path = spec(self.d, "ring", args, workers=2, reducers=0)
        job = Job(self, path, self.job_dir, env=FAST)
        self.assertEqual(job.wait(timeout=300), 0, job.err[-3000:])
        h = hashes(job.out)
        self.assertEqual(len(h), 3)
        self.assertEqual(len(set(h.values())), 1, h)
        self.assertIn("ring all-reduce", read(self.job_dir, "workerpool0-0.log"))

    def test_model_mismatch_fails_with_names(self):
        args = ["--hidden=64", "--epochs=1", "--train_examples=3000"]
        path = spec(self.d, "mismatch", args, workers=1, reducers=1,
                    worker_args=["--hidden=32", "--epochs=1", "--train_examples=3000"])
        job = Job(self, path, self.job_dir, env=FAST)
        self.assertEqual(job.wait(timeout=200), 1)
        j = load_job(self.job_dir)
        self.assertEqual(j["state"], "FAILED")
        self.assertRegex(j["error"]["logTail"],
                         r"tensor 'w0' is \[784, (64|32)\] float32 on worker \d but \[784, (32|64)\] "
                         r"float32 on worker \d")


def recovery_ms(text):
    """From each death the coordinator saw to the group stepping again (for
    the note): a rejoin's time as the coordinator logs it, else the first
    progress or resume line of a trainer after the death."""
    rejoins = [int(ms) for ms in re.findall(r"rejoined the group at step \d+ \(round \d+\), (\d+) ms after", text)]
    if rejoins:
        return rejoins
    stamp = lambda line: datetime.datetime.fromisoformat(line.split()[0].replace("Z", "+00:00")).timestamp()
    lines = sorted(line for line in text.splitlines() if line.startswith("20"))
    out = []
    for i, line in enumerate(lines):
        if "was killed by signal 9" in line:
            for later in lines[i + 1:]:
                if re.search(r"workerpool[01]-\d\[\d+\]: (step \d+|resuming from)", later) and \
                        later.startswith("20"):
                    out.append(int((stamp(later) - stamp(line)) * 1000))
                    break
    return out


def accuracy(job):
    return job["metrics"]["workerpool0-0"]["accuracy"]["value"]


class SyncFaults(unittest.TestCase):
    """kill -9 of each synchronous role (the chief, a worker, a reducer),
    five times each at random moments of training: the job ends SUCCEEDED
    with every worker's weights bitwise equal and the accuracy within a
    point of an undisturbed run. A lost trainer is restarted in place and
    rejoins the running group with a live peer's model (the others wait,
    nobody rolls back); a lost reducer is restarted in place and asks the
    workers again. Two trainers lost at once, or one lost again before it
    rejoined: the group restarts together from the newest checkpoint."""
    ARGS = ["--hidden=128", "--epochs=5", "--checkpoint_steps=100", "--log_every=100"]

    @classmethod
    def setUpClass(cls):
        d = tmpdir("syncfault-")
        job = Job(cls, spec(d, "calm", cls.ARGS, workers=2, reducers=2), os.path.join(d, "job"), env=FAST)
        assert job.wait(timeout=300) == 0, job.err[-3000:]
        cls.calm = accuracy(load_job(os.path.join(d, "job")))

    @classmethod
    def addCleanup(cls, fn, *a):  # Job registers its cleanup; a class-level job ends in setUpClass
        pass

    def run_with_kills(self, victims, kills=5, seed=0, workers=2, args=None, upto=13, env=None, schedule=None):
        """Kills the victims at `kills` random points of training (hundreds
        of the chief's steps up to upto hundreds, so the same on a fast or a
        slow machine), each time once they are back from the kill before.
        schedule: [(point, victims), ...] instead."""
        rng = random.Random(seed)
        schedule = schedule or [(p, victims) for p in sorted(rng.sample(range(2, upto + 1), kills))]
        kills = len(schedule)
        d = tmpdir("syncfault-")
        job_dir = os.path.join(d, "job")
        job = Job(self, spec(d, "faults", args or self.ARGS, workers=workers, reducers=2), job_dir,
                  env=dict(FAST, **(env or {})))
        done = 0
        for point, victims in schedule:
            wait_for(lambda: chief_step(job_dir) >= point * 100 or job.proc.poll() is not None,
                     timeout=300, what="step %d" % (point * 100))
            time.sleep(rng.uniform(0, 0.15))
            j = load_job(job_dir) or {}
            pids = [replica(j, v)["pid"] for v in victims]
            if job.proc.poll() is not None or not all(p > 0 for p in pids):
                break
            for pid in pids:
                os.kill(pid, signal.SIGKILL)
            done += 1
            wait_for(lambda: job.proc.poll() is not None or back(load_job(job_dir), victims, pids),
                     timeout=300, what="the victims back")
        self.assertEqual(job.wait(timeout=400), 0, job.err[-3000:])
        self.assertEqual(done, kills, "the job ended before every kill")
        j = load_job(job_dir)
        self.assertEqual(j["state"], "SUCCEEDED")
        h = hashes(job.out)
        self.assertEqual(len(h), 1 + workers, job.out[-2000:])
        self.assertEqual(len(set(h.values())), 1, h)  # bitwise equal on every worker
        rec = recovery_ms(job.err + "\n" + job.out)
        sys.stderr.write("\n  %s: accuracy %.4f (undisturbed %.4f); recovery ms %s\n"
                         % ("+".join(victims), accuracy(j), self.calm, rec))
        return j, job

    def assertRejoinedEveryTime(self, j, job, victim, kills=5):
        self.assertNotIn("the group restarts together", job.err)
        self.assertEqual(replica(j, victim)["rejoins"], kills)
        self.assertEqual(len(re.findall(r"%s rejoined the group at step \d+" % victim, job.err)), kills)
        self.assertLessEqual(abs(accuracy(j) - self.calm), 0.01, (accuracy(j), self.calm))

    def test_chief_killed_five_times(self):
        j, job = self.run_with_kills(["workerpool0-0"], seed=1)
        self.assertRejoinedEveryTime(j, job, "workerpool0-0")
        self.assertEqual(replica(j, "workerpool0-0")["restarts"], 5)

    def test_worker_killed_five_times(self):
        j, job = self.run_with_kills(["workerpool1-1"], seed=2)
        self.assertRejoinedEveryTime(j, job, "workerpool1-1")
        self.assertEqual(replica(j, "workerpool1-1")["restarts"], 5)

    def test_reducer_killed_five_times(self):
        j, job = self.run_with_kills(["workerpool2-0"], seed=3)
        self.assertEqual(replica(j, "workerpool2-0")["restarts"], 5)
        self.assertNotIn("the group restarts together", job.err)  # in place
        self.assertLessEqual(abs(accuracy(j) - self.calm), 0.01, (accuracy(j), self.calm))

    PAIR_ARGS = ["--hidden=64", "--epochs=8", "--train_examples=30000", "--checkpoint_steps=100", "--log_every=100"]
    _pair_calm = None

    def pair_calm(self):
        """The weights of an undisturbed run of the chief and one worker
        (PAIR_ARGS, 2 reducers), run once for the tests that compare."""
        if SyncFaults._pair_calm is None:
            d = tmpdir("syncfault-")
            calm = Job(self, spec(d, "calm2", self.PAIR_ARGS, workers=1, reducers=2), os.path.join(d, "job"), env=FAST)
            self.assertEqual(calm.wait(timeout=300), 0, calm.err[-3000:])
            SyncFaults._pair_calm = set(hashes(calm.out).values())
            self.assertEqual(len(SyncFaults._pair_calm), 1, calm.out[-2000:])
        return SyncFaults._pair_calm

    def test_rejoin_loses_nothing(self):
        # chief + one worker: two addends sum the same in any order, so the
        # run is deterministic and a rejoin must give bitwise the weights
        # of an undisturbed run. The worker's rejoins go over TCP, as
        # between hosts: it asks the chief for the model on a sealed stream
        # (the chief's rejoin socket is a bulk one), and opens its streams
        # to the reducers again
        args = self.PAIR_ARGS
        want = self.pair_calm()
        for seed, victim, env in ((5, "workerpool1-0", {"ZT_DATA_IPC": "off"}), (6, "workerpool0-0", None)):
            j, job = self.run_with_kills([victim], kills=3, seed=seed, workers=1, args=args, upto=15, env=env)
            self.assertEqual(set(hashes(job.out).values()), want, "a rejoin changed the weights")
            self.assertEqual(replica(j, victim)["rejoins"], 3)
            if env:
                said = job.out + job.err
                self.assertEqual(len(re.findall(r"workerpool1-0\[\d+\]: took the model from ", said)), 3, said[-3000:])
                self.assertEqual(len(re.findall(r"sent the model to a restarted peer: .*, sealed", said)), 3)

    def test_autotune_rejoins_take_the_groups_layout(self):
        # ZT_AUTOTUNE: 20 settings of 25 rounds each (steps 0 to about 530:
        # the chief's kill at step 200 lands in it even when job.json's
        # step lags the chief by a progress line or more)
        # through the same reducers. A worker killed during the search
        # rejoins with the layout in force and goes on searching; the
        # chief (the search's leader) killed during it ends the search with
        # that layout; a worker killed after it takes the chosen one. Two
        # addends sum alike in any bucket layout: the weights are bitwise
        # an undisturbed run's without autotune
        args, want = self.PAIR_ARGS, self.pair_calm()
        csv = os.path.join(tmpdir("syncfault-"), "autotune.csv")
        env = {"ZT_AUTOTUNE": "1", "ZT_AUTOTUNE_SAMPLES": "20", "ZT_AUTOTUNE_STEPS_PER_SAMPLE": "25",
               "ZT_AUTOTUNE_WARMUP_SAMPLES": "0", "HOROVOD_AUTOTUNE_LOG": csv}
        j, job = self.run_with_kills(None, workers=1, args=args, env=env, schedule=[
            (1, ["workerpool1-0"]), (2, ["workerpool0-0"]), (7, ["workerpool1-0"])])
        self.assertEqual(set(hashes(job.out).values()), want, "a layout changed the weights")
        self.assertNotIn("the group restarts together", job.err)
        self.assertEqual((replica(j, "workerpool1-0")["rejoins"], replica(j, "workerpool0-0")["rejoins"]), (2, 1))
        chief = read(job.job_dir, "workerpool0-0.log")
        self.assertRegex(chief, r"autotune: sample 1 of 20: fusion threshold 1 MiB, cycle time 5 ms: ")
        self.assertIn("autotune: rank 0 restarted during the search: the setting in force", chief)
        with open(csv) as f:
            rows = f.read().splitlines()
        self.assertEqual(rows[0], "sample,fusion_threshold_bytes,cycle_time_ms,seconds_per_round,chosen")
        self.assertGreaterEqual(len(rows), 3, rows)  # samples before the leader's restart

    def test_rejoin_during_a_stalled_round(self):
        # a worker held (SIGSTOP) stalls the round; another one killed then
        # asks the held one first (no answer within ZT_REJOIN_TIMEOUT_MS),
        # then the chief, which serves it from inside the stalled round:
        # it rejoins while the round is still held, with no group restart
        d = tmpdir("syncfault-")
        job_dir = os.path.join(d, "job")
        args = ["--hidden=64", "--epochs=4", "--train_examples=30000", "--checkpoint_steps=100", "--log_every=100"]
        job = Job(self, spec(d, "stalled", args, workers=2, reducers=2), job_dir,
                  env=dict(FAST, ZT_REJOIN_TIMEOUT_MS="1500"))
        wait_for(lambda: chief_step(job_dir) >= 300, timeout=300, what="step 300")
        j = load_job(job_dir)
        held, lost = replica(j, "workerpool1-1")["pid"], replica(j, "workerpool1-0")["pid"]
        os.kill(held, signal.SIGSTOP)
        try:
            time.sleep(0.3)
            os.kill(lost, signal.SIGKILL)
            wait_for(lambda: replica(load_job(job_dir), "workerpool1-0").get("rejoins") == 1, timeout=8,
                     what="the rejoin while the round is held")
        finally:
            os.kill(held, signal.SIGCONT)
        self.assertEqual(job.wait(timeout=300), 0, job.err[-3000:])
        self.assertNotIn("the group restarts together", job.err)
        log = read(job_dir, "workerpool1-0.log")
        self.assertRegex(log, r"cannot take the model from workerpool1-1 .*no complete answer")
        self.assertRegex(log, r"took the model from workerpool0-0 ")
        self.assertEqual(len(set(hashes(job.out).values())), 1, hashes(job.out))

    def while_rejoining(self, name, act):
        """workerpool1-1 killed at step 300 while the chief and the other
        worker are stopped (SIGSTOP: they cannot answer it); act(job_dir,
        pid) is done to its successor, which is rejoining, before they go
        on. The job, once it has ended."""
        d = tmpdir("syncfault-")
        job_dir = os.path.join(d, "job")
        env = dict(FAST, ZT_REJOIN_TIMEOUT_MS="60000")
        job = Job(self, spec(d, name, self.ARGS, workers=2, reducers=2), job_dir, env=env)
        wait_for(lambda: chief_step(job_dir) >= 300, timeout=300, what="step 300")
        j = load_job(job_dir)
        first = replica(j, "workerpool1-1")["pid"]
        others = [replica(j, v)["pid"] for v in ("workerpool0-0", "workerpool1-0")]
        self.assertTrue(first > 0 and all(p > 0 for p in others), j["replicas"])
        for pid in others:
            os.kill(pid, signal.SIGSTOP)
        os.kill(first, signal.SIGKILL)
        try:
            wait_for(lambda: replica(load_job(job_dir), "workerpool1-1")["pid"] not in (0, first) and
                     replica(load_job(job_dir), "workerpool1-1")["rejoining"], timeout=60, what="the rejoin")
            act(job_dir, replica(load_job(job_dir), "workerpool1-1")["pid"])
        finally:
            for pid in others:
                os.kill(pid, signal.SIGCONT)
        self.assertEqual(job.wait(timeout=400), 0, job.err[-3000:])
        return job

    def test_killed_while_rejoining(self):
        # the restarted worker is killed again before it has the model: the
        # group restarts from the newest checkpoint instead
        job = self.while_rejoining("twice", lambda job_dir, pid: os.kill(pid, signal.SIGKILL))
        self.assertRegex(job.err, r"workerpool1-1 trains in step with the others \(synchronous\) and cannot "
                                  r"rejoin them \(it was lost again before it had rejoined\): the group restarts "
                                  r"together from the newest checkpoint")
        h = hashes(job.out)
        self.assertEqual(len(set(h.values())), 1, h)

    def test_stopped_while_rejoining(self):
        # the restarted worker is preempted (SIGTERM) before it has the
        # model: it ends as stopped, not as failed, and is restarted in
        # place as any preempted replica
        def preempt(job_dir, pid):
            # asking its (stopped) peers: it has connected to one (its own
            # log's part: before the restart's banner is written, the whole
            # log is the first process's, which connected long ago)
            def asking():
                log = read(job_dir, "workerpool1-1.log")
                return "restart 1)" in log and "data plane to" in log.split("restart 1)")[-1]
            wait_for(asking, timeout=60, what="the rejoiner asking")
            os.kill(pid, signal.SIGTERM)
            wait_for(lambda: replica(load_job(job_dir), "workerpool1-1")["preemptions"] == 1, timeout=60,
                     what="the preemption")

        job = self.while_rejoining("stoprejoin", preempt)
        j = load_job(job.job_dir)
        self.assertEqual(j["state"], "SUCCEEDED")
        self.assertEqual(replica(j, "workerpool1-1")["preemptions"], 1)
        log = read(job.job_dir, "workerpool1-1.log")
        self.assertRegex(log, r"I \S+ workerpool1-1\[\d+\]: cannot rejoin the group: .*stopping")
        self.assertNotRegex(log, r"E \S+ workerpool1-1\[\d+\]: cannot rejoin the group")
        self.assertNotIn("a user error", job.err)

    def test_silent_worker_is_named_and_retried(self):
        # a worker stopped (SIGSTOP: alive, silent): the reducers' stall
        # warnings name it, the others' waits time out naming the reducer,
        # exit 75 (the system's failure) and the group restarts; the job succeeds
        d = tmpdir("syncfault-")
        job_dir = os.path.join(d, "job")
        env = dict(FAST, ZT_ALLREDUCE_TIMEOUT_MS="2000", ZT_COLLECTIVE_WARN_MS="500",
                   ZT_HEARTBEAT_TIMEOUT_MS="60000")
        job = Job(self, spec(d, "silent", self.ARGS, workers=2, reducers=2), job_dir, env=env)
        wait_for(lambda: len((load_job(job_dir) or {}).get("checkpoints", [])) >= 1, timeout=120,
                 what="a checkpoint")
        victim = replica(load_job(job_dir), "workerpool1-1")["pid"]
        os.kill(victim, signal.SIGSTOP)
        self.addCleanup(lambda: alive(victim) and os.kill(victim, signal.SIGKILL))
        self.assertEqual(job.wait(timeout=300), 0, job.err[-3000:])
        text = job.err + job.out
        self.assertRegex(text, r"has waited \d+ ms for workerpool1-1 on \S+ at 127\.0\.0\.1:\d+ \(rank 2\)")
        self.assertRegex(text, r"reducer \d \(workerpool2-\d on \S+ at 127\.0\.0\.1:\d+\) sent no sum within "
                               r"2000 ms \(ZT_ALLREDUCE_TIMEOUT_MS\)")
        self.assertRegex(text, r"workerpool[01]-\d exited with status 75 \(a failure of the system, not the program\)")
        self.assertIn("the group restarts together", text)
        h = hashes(job.out)
        self.assertEqual(len(set(h.values())), 1, h)

    def test_two_workers_at_once(self):
        j, job = self.run_with_kills(["workerpool1-0", "workerpool1-1"], kills=2, seed=4)
        self.assertIn("cannot rejoin them (workerpool1-", job.err)
        self.assertIn("the group restarts together from the newest checkpoint", job.err)
        self.assertLessEqual(abs(accuracy(j) - self.calm), 0.01, (accuracy(j), self.calm))

    def test_worker_and_reducer_at_once(self):
        # the rejoiner's round needs the reducer that is being restarted: the
        # group restarts together at once, instead of the pair waiting for
        # each other until the all-reduce timeout (ZT_ALLREDUCE_TIMEOUT_MS)
        j, job = self.run_with_kills(["workerpool1-1", "workerpool2-0"], kills=1, seed=7)
        self.assertRegex(job.err, r"(reducer workerpool2-0 is being restarted too|workerpool2-0 lost while "
                                  r"workerpool1-1 is rejoining the group)")
        self.assertIn("the group restarts together from the newest checkpoint", job.err)
        self.assertNotIn("ZT_ALLREDUCE_TIMEOUT_MS", job.out + job.err)  # nobody waited out the timeout
        self.assertLessEqual(abs(accuracy(j) - self.calm), 0.01, (accuracy(j), self.calm))

    def test_ring_restarts_the_group(self):
        # without reducers a lost trainer breaks the ring mid-round: the group restarts
        args = ["--hidden=64", "--epochs=6", "--train_examples=9000", "--checkpoint_steps=50", "--log_every=50"]
        d = tmpdir("syncfault-")
        job_dir = os.path.join(d, "job")
        job = Job(self, spec(d, "ring", args, workers=2, reducers=0), job_dir, env=FAST)
        wait_for(lambda: chief_step(job_dir) >= 100, timeout=300, what="step 100")
        pid = replica(load_job(job_dir), "workerpool1-0")["pid"]
        self.assertGreater(pid, 0)
        os.kill(pid, signal.SIGKILL)
        self.assertEqual(job.wait(timeout=300), 0, job.err[-3000:])
        self.assertIn("cannot rejoin them (its gradients go round a ring", job.err)
        h = hashes(job.out)
        self.assertEqual(len(set(h.values())), 1, h)


class Preemption(unittest.TestCase):
    """SIGTERM from outside ztrain (a spot machine's shutdown, an operator,
    a scheduler) is a preemption, not the end of the work: the replica saves
    what it holds (the chief a checkpoint at the step it reached, a
    parameter server its shard), exits with status 143, and is restarted
    without counting a crash; the job trains to its end."""
    # sixteen epochs (about 7500 steps): each preemption lands while the
    # job still trains even when the test, under a busy suite, acts seconds
    # after the step it waits for (three ended first once), and when a
    # quiet moment trains at 0.6 ms a step (six epochs once ended in 1.6 s,
    # before the first signal)
    ARGS = ["--hidden=64", "--epochs=16", "--checkpoint_steps=100000", "--log_every=100"]

    def test_chief_and_reducer_preempted(self):
        d = tmpdir("preempt-")
        job_dir = os.path.join(d, "job")
        job = Job(self, spec(d, "preempt", self.ARGS, workers=1, reducers=1), job_dir, env=FAST)
        wait_for(lambda: chief_step(job_dir) >= 300, timeout=300, what="step 300")
        chief = replica(load_job(job_dir), "workerpool0-0")["pid"]
        os.kill(chief, signal.SIGTERM)
        wait_for(lambda: back(load_job(job_dir), ["workerpool0-0"], [chief]), timeout=120, what="the chief back")
        reducer = replica(load_job(job_dir), "workerpool2-0")["pid"]
        os.kill(reducer, signal.SIGTERM)
        self.assertEqual(job.wait(timeout=400), 0, job.err[-3000:])
        j = load_job(job_dir)
        self.assertEqual(j["state"], "SUCCEEDED")
        self.assertEqual(j["preemptions"], 2)
        self.assertIn("preemptions 2", ztrain("status", job_dir).stdout)
        for name in ("workerpool0-0", "workerpool2-0"):
            self.assertEqual(replica(j, name)["preemptions"], 1, name)
            self.assertEqual(replica(j, name)["restarts"], 0, name + job.err[-4000:])  # not counted as crashes
            self.assertRegex(job.err, r"%s exited with status 143: a signal ztrain did not send, so a preemption"
                             % name)
        chief_log = read(job_dir, "workerpool0-0.log")
        saved = re.search(r"stopping at step (\d+): (?:saving it|saved already,) to resume from", chief_log)
        self.assertTrue(saved, chief_log[-3000:])
        step = int(saved.group(1))
        self.assertGreaterEqual(step, 300)
        self.assertRegex(chief_log, r"checkpoint \S*ckpt-0*%d written \(step %d\)" % (step, step))
        self.assertIn("exiting with status 143", chief_log)
        self.assertGreaterEqual(accuracy(j), 0.8)
        h = hashes(job.out)
        self.assertEqual(len(set(h.values())), 1, h)

    def test_parameter_server_preempted(self):
        # asynchronous: the server saves its shard on SIGTERM, and the one
        # that takes its place starts from it; no wait for the workers'
        # timeout (ZT_PS_TIMEOUT_MS, 120 s) and no lost model
        d = tmpdir("preempt-")
        job_dir = os.path.join(d, "job")
        job = Job(self, job_file(d, "preempt-ps", [pool("ztrain-worker", 1, self.ARGS),
                                                   pool("ztrain-worker", 1, self.ARGS),
                                                   pool("ztrain-paramserver", 1)]), job_dir, env=FAST)
        wait_for(lambda: chief_step(job_dir) >= 300, timeout=300, what="step 300")
        ps = replica(load_job(job_dir), "workerpool2-0")["pid"]
        os.kill(ps, signal.SIGTERM)
        wait_for(lambda: back(load_job(job_dir), ["workerpool2-0"], [ps]), timeout=60, what="the server back")
        # then the chief: it asks the servers for the model at the step it
        # reached (the stop held while it saves), and resumes from there
        step = chief_step(job_dir)
        wait_for(lambda: chief_step(job_dir) >= step + 100, timeout=60, what="the chief going on")
        chief = replica(load_job(job_dir), "workerpool0-0")["pid"]
        os.kill(chief, signal.SIGTERM)
        self.assertEqual(job.wait(timeout=100), 0, job.err[-3000:])
        j = load_job(job_dir)
        for name in ("workerpool2-0", "workerpool0-0"):
            self.assertEqual(replica(j, name)["preemptions"], 1, name)
            self.assertEqual(replica(j, name)["restarts"], 0, name)
        ps_log = read(job_dir, "workerpool2-0.log")
        self.assertIn("exiting with status 143", ps_log)
        self.assertRegex(ps_log, r"restored elements \[0, \d+\) from the shard snapshot")
        chief_log = read(job_dir, "workerpool0-0.log")
        saved = re.search(r"stopping at step (\d+): (?:saving it|saved already,) to resume from", chief_log)
        self.assertTrue(saved, chief_log[-3000:])
        n = int(saved.group(1))
        self.assertRegex(chief_log, r"checkpoint \S*ckpt-0*%d written \(step %d\)" % (n, n))
        self.assertRegex(chief_log, r"resuming from \S*ckpt-0*%d at step %d" % (n, n))
        self.assertGreaterEqual(accuracy(j), 0.8)


class CancelSaves(unittest.TestCase):
    def test_cancel_then_resume_continues_from_the_stop(self):
        """SIGTERM to `ztrain run` (a cancel) mid-training: the chief saves
        the step it reached, so the newest checkpoint is at or after it, and
        `--resume` starts from there and trains to the end."""
        d = tmpdir("cancel-")
        job_dir = os.path.join(d, "job")
        # long enough (about 18,000 steps) that the stop, sent once job.json
        # shows step 500 (it is written once a second), comes mid-training
        # on a fast machine too
        args = ["--hidden=64", "--epochs=40", "--checkpoint_steps=100000", "--log_every=100"]
        path = spec(d, "cancelled", args, workers=1, reducers=1)
        job = Job(self, path, job_dir, env=FAST)
        wait_for(lambda: chief_step(job_dir) >= 500, timeout=300, what="step 500")
        reached = chief_step(job_dir)
        job.proc.send_signal(signal.SIGTERM)
        self.assertEqual(job.wait(timeout=120), 3, job.err[-3000:])  # CANCELLED
        j = load_job(job_dir)
        self.assertEqual(j["state"], "CANCELLED")
        saved = re.search(r"stopping at step (\d+): (?:saving it|saved already,) to resume from",
                          read(job_dir, "workerpool0-0.log"))
        self.assertTrue(saved, read(job_dir, "workerpool0-0.log")[-3000:])
        step = int(saved.group(1))
        self.assertGreaterEqual(step, reached)
        ckpts = sorted(n for n in os.listdir(os.path.join(job_dir, "checkpoints")) if n.startswith("ckpt-"))
        self.assertEqual(int(ckpts[-1][5:]), step)
        again = Job(self, path, job_dir, "--resume", env=FAST)
        self.assertEqual(again.wait(timeout=300), 0, again.err[-3000:])
        log = read(job_dir, "workerpool0-0.log")
        self.assertRegex(log, r"resuming from \S*ckpt-0*%d at step %d" % (step, step))
        after = log[log.index("resuming from"):]
        first = re.search(r" step (\d+)/\d+ ", after)
        self.assertTrue(first and int(first.group(1)) > step, after[:2000])
        j = load_job(job_dir)
        self.assertEqual(j["state"], "SUCCEEDED")
        self.assertGreaterEqual(accuracy(j), 0.8)


    def test_cancel_async_saves_with_its_servers_up(self):
        """The same stop of an asynchronous job on a busy machine (two
        processes spinning beside it): the parameter servers stop only once
        the chief has gathered its last save from them, so the save is
        written at the chief's step and `--resume` goes on from it."""
        d = tmpdir("cancel-")
        job_dir = os.path.join(d, "job")
        args = ["--hidden=64", "--epochs=4", "--checkpoint_steps=100000", "--log_every=100"]
        path = job_file(d, "cancelled-async", [pool("ztrain-worker", 1, args), pool("ztrain-worker", 1, args),
                                               pool("ztrain-paramserver", 2)])
        job = Job(self, path, job_dir, env=FAST)
        wait_for(lambda: chief_step(job_dir) >= 500, timeout=300, what="step 500")
        busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
        try:
            job.proc.send_signal(signal.SIGTERM)
            self.assertEqual(job.wait(timeout=120), 3, job.err[-3000:])  # CANCELLED
        finally:
            for b in busy:
                b.kill()
                b.wait()
        chief = read(job_dir, "workerpool0-0.log")
        saved = re.search(r"stopping at step (\d+): (?:saving it|saved already,) to resume from", chief)
        self.assertTrue(saved, chief[-3000:])
        step = int(saved.group(1))
        self.assertRegex(chief, r"checkpoint \S*ckpt-0*%d written \(step %d\)" % (step, step))
        self.assertNotIn("skipped", chief)
        ends = [l for l in job.err.splitlines() if re.search(r"workerpool[02]-\d (exited|was killed)", l)]
        self.assertIn("workerpool0-0", ends[0], ends)  # the chief first, then its servers
        again = Job(self, path, job_dir, "--resume", env=FAST)
        self.assertEqual(again.wait(timeout=300), 0, again.err[-3000:])
        self.assertRegex(read(job_dir, "workerpool0-0.log"), r"resuming from \S*ckpt-0*%d at step %d" % (step, step))
        self.assertEqual(load_job(job_dir)["state"], "SUCCEEDED")


class FinalEvaluation(unittest.TestCase):
    def test_final_model_is_scored_before_the_end(self):
        """The chief's last act is the final model: the evaluator scores it
        before the job ends (read where it lies once the chief, its file
        server, is gone), with no timeout waiting on the chief."""
        d = tmpdir("final-eval-")
        job_dir = os.path.join(d, "job")
        args = ["--hidden=64", "--epochs=3", "--checkpoint_steps=300", "--log_every=100"]
        job = Job(self, spec(d, "final-eval", args, workers=1, reducers=1, evaluators=1), job_dir, env=FAST)
        # the evaluator held back (SIGSTOP) until the chief has ended
        wait_for(lambda: chief_step(job_dir) >= 1200, timeout=300, what="step 1200")
        evaluator = replica(load_job(job_dir), "workerpool3-0")["pid"]
        chief = replica(load_job(job_dir), "workerpool0-0")["pid"]
        os.kill(evaluator, signal.SIGSTOP)
        try:
            wait_for(lambda: not alive(chief), timeout=60, what="the chief's end")
        finally:
            os.kill(evaluator, signal.SIGCONT)
        self.assertEqual(job.wait(timeout=300), 0, job.err[-3000:])
        j = load_job(job_dir)
        final = [c for c in j["checkpoints"] if c["name"].startswith("model/")]
        self.assertEqual(len(final), 1, j["checkpoints"])
        scored = {e["step"] for e in j["evaluations"] if e["name"] == "eval_accuracy"}
        self.assertIn(final[0]["step"], scored, j["evaluations"])
        self.assertNotIn("cannot fetch", job.out + job.err)
        self.assertNotIn("not scored within", job.out + job.err)
        self.assertRegex(job.err, r"the evaluators have up to \d+ ms to score its final model")
        self.assertRegex(job.out + job.err, r"checkpoint model/ckpt-0*%d: .*; reading it from " % final[0]["step"])


def chief_step(job_dir):
    """The chief's newest progress line's step (its log, every --log_every
    steps), 0 before any."""
    try:
        with open(os.path.join(job_dir, "replica-logs", "workerpool0-0.log")) as f:
            steps = re.findall(r" step (\d+)/\d+ ", f.read())
    except FileNotFoundError:
        return 0
    return int(steps[-1]) if steps else 0


def back(job, victims, old_pids):
    """Every victim started again (another pid), registered and training."""
    for v, old in zip(victims, old_pids):
        r = replica(job or {"replicas": [{"name": v, "pid": 0}]}, v)
        if r.get("pid", 0) in (0, old) or r.get("state") != "RUNNING" or r.get("rejoining"):
            return False
    return True


if __name__ == "__main__":
    ztest.main()
