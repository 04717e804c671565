"""Elastic training on real processes: the sync example with an elastic
workers' pool scaled down and up while it trains (ztrain scale), a second
change asked for during a change, a request below the pool's minimum, a
joiner killed with SIGKILL while it joins, and members lost for good (their
restarts used up) or preempted: the pool shrinks without them (a preempted
one joins again), and not below its minimum. Every wait is bounded, and the final trainers' weights are equal
bit for bit."""
import json
import os
import re
import signal
import time
import unittest
from concurrent.futures import ThreadPoolExecutor

import ztest  # noqa: E402
from ztest import Job, job_file, load_job, pool, tmpdir, wait_for, write, ztrain

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
FAST = {"ZT_STOP_GRACE_MS": "3000", "ZT_HEARTBEAT_MS": "300"}
STEP = re.compile(r"\]: step (\d+)/(\d+) ")
HASH = re.compile(r"params fnv1a ([0-9a-f]{16}) after step (\d+)")


def log(job_dir, name):
    try:
        with open(os.path.join(job_dir, "replica-logs", name + ".log")) as f:
            return f.read()
    except FileNotFoundError:
        return ""


def chief_step(job_dir):
    steps = STEP.findall(log(job_dir, "workerpool0-0"))
    return int(steps[-1][0]) if steps else 0


def replica(job, name):
    return [r for r in job["replicas"] if r["name"] == name][0]


def elastic(job_dir):
    return (load_job(job_dir) or {}).get("elastic") or {}


def example(d, epochs, extra=(), lo=1, start=3):
    """The sync example, its workers' pool elastic (lo to 3, starting with
    start), no evaluator."""
    with open(os.path.join(ROOT, "examples", "fashion-mnist-sync.json")) as f:
        ex = json.load(f)
    pools = ex["jobSpec"]["workerPoolSpecs"][:3]
    for p in pools[:2]:
        args = [a for a in p["containerSpec"]["args"] if not a.startswith("--epochs")]
        p["containerSpec"]["args"] = args + ["--epochs=%d" % epochs, *extra]
    pools[1]["elasticPolicy"] = {"minReplicaCount": lo, "maxReplicaCount": 3}
    pools[1]["replicaCount"] = start
    ex["jobSpec"]["workerPoolSpecs"] = pools
    return write(d, "elastic.json", json.dumps(ex))


def scale(job_dir, k):
    return ztrain("scale", job_dir, "--pool", "1", "--replicas", str(k), timeout=60)


class Elastic(unittest.TestCase):
    def setUp(self):
        self.d = tmpdir("elastic-")
        self.job_dir = os.path.join(self.d, "job")

    def assert_equal_final_weights(self, names, steps):
        finals = {}
        for n in names:
            h = HASH.findall(log(self.job_dir, n))
            self.assertTrue(h, "%s printed no params hash:\n%s" % (n, log(self.job_dir, n)[-2000:]))
            finals[n] = h[-1]
        self.assertEqual({s for _, s in finals.values()}, {str(steps)}, finals)
        self.assertEqual(len({h for h, _ in finals.values()}), 1, finals)  # bitwise equal

    def test_scale_down_then_up_while_training(self):
        # 10 epochs of half the training set (the suite's time), from 2
        # workers: the third joins beyond the size epochs are counted for
        job = Job(self, example(self.d, 10, ["--train_examples=30000"], start=2), self.job_dir, env=FAST)
        wait_for(lambda: chief_step(self.job_dir) >= 400, timeout=240, what="the chief at step 400")
        r = scale(self.job_dir, 1)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("workerpool1 to 1 replicas", r.stdout)
        t0 = time.monotonic()
        wait_for(lambda: elastic(self.job_dir).get("replicas") == 1 and not elastic(self.job_dir)["changing"],
                 timeout=20, what="pool 1 at one replica")
        self.assertLess(time.monotonic() - t0, 20)
        j = load_job(self.job_dir)
        self.assertEqual([replica(j, n)["state"] for n in ("workerpool1-1", "workerpool1-2")], ["STOPPED", "PENDING"])
        self.assertIn("left the group after step", log(self.job_dir, "workerpool1-1"))
        at = chief_step(self.job_dir)
        wait_for(lambda: chief_step(self.job_dir) >= at + 200, timeout=120, what="the chief training on")
        # 1 -> 2, and 3 asked for while that change is under way: taken after it
        # two requests at once (each its own file): both answered, in order
        with ThreadPoolExecutor(2) as ex:
            f2 = ex.submit(scale, self.job_dir, 2)
            # the second once the first's file is there (their ids, led by
            # the time, then order them), its answer not yet given
            wait_for(lambda: f2.done() or [n for n in os.listdir(self.job_dir) if n.startswith("scale-request-")],
                     timeout=60, step=0.005, what="the first request's file")
            f3 = ex.submit(scale, self.job_dir, 3)
            r2, r3 = f2.result(), f3.result()
        self.assertEqual((r2.returncode, r3.returncode), (0, 0), r2.stderr + r3.stderr)
        self.assertEqual([a["replicas"] for a in elastic(self.job_dir)["requests"]][-2:], [2, 3])
        t0 = time.monotonic()
        wait_for(lambda: elastic(self.job_dir).get("replicas") == 3 and not elastic(self.job_dir)["changing"],
                 timeout=30, what="pool 1 at three replicas again")
        self.assertLess(time.monotonic() - t0, 30)
        self.assertEqual(job.wait(timeout=400), 0, job.err[-3000:])
        j = load_job(self.job_dir)
        self.assertEqual((j["state"], j["incarnation"], j["jobRetries"]), ("SUCCEEDED", 0, 0))
        self.assertGreaterEqual(j["metrics"]["workerpool0-0"]["accuracy"]["value"], 0.85)
        changes = j["elastic"]["changes"]
        self.assertEqual([(c["from"], c["to"]) for c in changes], [(2, 1), (1, 2), (2, 3)], changes)
        self.assertEqual([c["group"] for c in changes], [1, 2, 3])
        self.assertTrue(all(c["ms"] < 20000 for c in changes), changes)
        self.assertTrue(all(r["restarts"] == 0 for r in j["replicas"]), j["replicas"])
        for n in ("workerpool1-1", "workerpool1-2"):  # joined: took the model from a member
            self.assertIn("took the model from", log(self.job_dir, n))
        self.assertIn("workerpool1-2 joins the group as rank 3 of 4", log(self.job_dir, "coordinator"))
        self.assert_equal_final_weights(["workerpool0-0", "workerpool1-0", "workerpool1-1", "workerpool1-2"],
                                        j["checkpoints"][-1]["step"])

    def test_bounds_and_a_joiner_killed_while_it_joins(self):
        job = Job(self, example(self.d, 10, ["--train_examples=30000", "--checkpoint_steps=100"]),
                  self.job_dir, env=FAST)
        wait_for(lambda: chief_step(self.job_dir) >= 200, timeout=240, what="the chief at step 200")
        # below the minimum: the CLI refuses, and so does the coordinator itself
        r = scale(self.job_dir, 0)
        self.assertEqual(r.returncode, 1)
        self.assertIn("outside workerpool1's elasticPolicy, 1 to 3", r.stderr)
        write(self.job_dir, "scale-request-t1.json", json.dumps({"id": "t1", "pool": 1, "replicas": 9}))
        wait_for(lambda: elastic(self.job_dir).get("lastRequest", {}).get("id") == "t1", timeout=10,
                 what="the coordinator's answer")
        ans = elastic(self.job_dir)["lastRequest"]
        self.assertFalse(ans["accepted"])
        self.assertIn("outside the pool's elasticPolicy, 1 to 3", ans["message"])
        self.assertFalse(os.path.exists(os.path.join(self.job_dir, "scale-request-t1.json")))
        r = scale(self.job_dir, 1)
        self.assertEqual(r.returncode, 0, r.stderr)
        wait_for(lambda: elastic(self.job_dir).get("replicas") == 1 and not elastic(self.job_dir)["changing"],
                 timeout=20, what="pool 1 at one replica")
        # a joiner lost while it joins: the group restarts together in its
        # new membership from the newest checkpoint, nobody waits for it
        old = replica(load_job(self.job_dir), "workerpool1-2")["pid"]
        self.assertEqual(scale(self.job_dir, 3).returncode, 0)
        pid = wait_for(lambda: (lambda p: p if p and p != old else None)(
            replica(load_job(self.job_dir) or {"replicas": [{"name": "workerpool1-2", "pid": 0}]},
                    "workerpool1-2")["pid"]), timeout=20, step=0.01, what="the joiner's pid")
        os.kill(pid, signal.SIGKILL)
        self.assertEqual(job.wait(timeout=400), 0, job.err[-3000:])
        j = load_job(self.job_dir)
        self.assertEqual(j["state"], "SUCCEEDED")
        self.assertEqual(j["elastic"]["replicas"], 3)
        self.assertGreaterEqual(j["incarnation"], 1, "the group restarted together")
        # the change the kill cut short is in the history too, with its step
        cut = [c for c in j["elastic"]["changes"] if c.get("cutShort")]
        self.assertTrue(cut and cut[-1]["from"] == 1 and cut[-1]["to"] == 3 and cut[-1]["step"] > 0,
                        j["elastic"]["changes"])
        self.assertIn("signal 9", log(self.job_dir, "workerpool1-2"))
        self.assert_equal_final_weights(["workerpool0-0", "workerpool1-0", "workerpool1-1", "workerpool1-2"],
                                        j["checkpoints"][-1]["step"])


    def test_members_preempted_and_lost_for_good(self):
        job = Job(self, example(self.d, 8, ["--train_examples=30000", "--checkpoint_steps=100"], lo=2),
                  self.job_dir, env=dict(FAST, ZT_MAX_RESTARTS="0"))
        wait_for(lambda: chief_step(self.job_dir) >= 200, timeout=240, what="the chief at step 200")
        # a preemption (a SIGTERM ztrain did not send): the others go on
        # without it at once, and it joins again as a grow
        os.kill(replica(load_job(self.job_dir), "workerpool1-1")["pid"], signal.SIGTERM)
        wait_for(lambda: len(elastic(self.job_dir).get("changes", [])) == 2 and not elastic(self.job_dir)["changing"],
                 timeout=30, what="a shrink and a grow")
        j = load_job(self.job_dir)
        self.assertEqual([(c["from"], c["to"]) for c in j["elastic"]["changes"]], [(3, 2), (2, 3)])
        self.assertEqual((replica(j, "workerpool1-1")["preemptions"], replica(j, "workerpool1-1")["restarts"]), (1, 0))
        self.assertIn("took the model from", log(self.job_dir, "workerpool1-1"))
        at = chief_step(self.job_dir)
        wait_for(lambda: chief_step(self.job_dir) >= at + 100, timeout=120, what="the chief training on")
        os.kill(replica(load_job(self.job_dir), "workerpool1-1")["pid"], signal.SIGKILL)
        # the others give the round up and go on without it: no restart
        wait_for(lambda: len(elastic(self.job_dir).get("changes", [])) == 3 and not elastic(self.job_dir)["changing"],
                 timeout=20, what="pool 1 at two replicas")
        j = load_job(self.job_dir)
        self.assertEqual(j["elastic"]["replicas"], 2)
        self.assertEqual((j["incarnation"], replica(j, "workerpool1-1")["state"]), (0, "FAILED"))
        self.assertIn("the round was given up", log(self.job_dir, "workerpool1-0"))
        at = chief_step(self.job_dir)
        wait_for(lambda: chief_step(self.job_dir) >= at + 100, timeout=120, what="the chief training on")
        # one more would leave 1, below minReplicaCount 2: the group restarts
        # together from the newest checkpoint instead (a job retry), and ends
        os.kill(replica(load_job(self.job_dir), "workerpool1-2")["pid"], signal.SIGKILL)
        self.assertEqual(job.wait(timeout=400), 0, job.err[-3000:])
        j = load_job(self.job_dir)
        self.assertEqual((j["state"], j["incarnation"], j["jobRetries"]), ("SUCCEEDED", 1, 1))
        self.assertEqual(j["elastic"]["replicas"], 2)
        self.assertIn("below its minReplicaCount (2): it does not shrink", log(self.job_dir, "coordinator"))
        self.assert_equal_final_weights(["workerpool0-0", "workerpool1-0", "workerpool1-2"],
                                        j["checkpoints"][-1]["step"])


    def test_a_program_that_cannot_be_told_is_not_scaled(self):
        sleeper = {"imageUri": "local", "command": ["sleep", "60"]}
        pools = [pool("local", 1), pool("local", 2), pool("ztrain-reducer", 1)]
        pools[0]["containerSpec"] = pools[1]["containerSpec"] = sleeper
        pools[1]["elasticPolicy"] = {"minReplicaCount": 1, "maxReplicaCount": 2}
        job = Job(self, job_file(self.d, "sleepers", pools), self.job_dir, env=FAST)
        wait_for(lambda: (load_job(self.job_dir) or {}).get("state") == "RUNNING", timeout=60, what="RUNNING")
        r = scale(self.job_dir, 1)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertRegex(r.stderr, r"refused: workerpool\d-0 has not registered with the coordinator, so it cannot "
                                   r"be told of a new membership")
        self.assertEqual(elastic(self.job_dir)["replicas"], 2)
        self.assertEqual(ztrain("cancel", self.job_dir).returncode, 0)
        self.assertEqual(job.wait(timeout=60), 3)


if __name__ == "__main__":
    ztest.main()
