"""GPU workers in real jobs (ctest label gpu; exits 77, skipped, without a
CUDA device or without CUDA in the build): the GPU example on a shortened
run, the replica's gradient sum going through reducers from pinned host
memory; a GPU chief against parameter servers; and a GPU chief killed with
SIGKILL, restarted, resuming parameters and optimizer state from its
checkpoint."""
import json
import os
import re
import signal
import sys
import unittest

import ztest  # noqa: E402
from ztest import Job, job_file, load_job, pool, tmpdir, wait_for, write

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
FAST = {"ZT_STOP_GRACE_MS": "3000", "ZT_HEARTBEAT_MS": "300"}
GPU = {"machineType": "a3-highgpu-1g", "acceleratorType": "NVIDIA_H100_80GB", "acceleratorCount": 1}


def gpu_pool(image, args):
    p = pool(image, 1, args)
    p["machineSpec"] = dict(GPU)
    return p


def chief_log(job_dir):
    with open(os.path.join(job_dir, "replica-logs", "workerpool0-0.log")) as f:
        return f.read()


class GpuJobs(unittest.TestCase):
    def setUp(self):
        self.d = tmpdir("gpujob-")
        self.job_dir = os.path.join(self.d, "job")

    def test_example_shortened_through_reducers(self):
        with open(os.path.join(ROOT, "examples", "fashion-mnist-gpu.json")) as f:
            ex = json.load(f)
        p = ex["jobSpec"]["workerPoolSpecs"][0]
        p["containerSpec"]["args"] = [a for a in p["containerSpec"]["args"]
                                      if not a.startswith(("--epochs", "--checkpoint_steps"))]
        p["containerSpec"]["args"] += ["--epochs=2", "--checkpoint_steps=400"]
        path = write(self.d, "short.json", json.dumps(ex))
        job = Job(self, path, self.job_dir, env=FAST)
        self.assertEqual(job.wait(timeout=300), 0, job.err[-3000:])
        j = load_job(self.job_dir)
        self.assertGreaterEqual(j["metrics"]["workerpool0-0"]["accuracy"]["value"], 0.82)
        log = chief_log(self.job_dir)
        self.assertIn("forward and backward on 1 GPU", log)
        self.assertIn("through reducers", log)
        evals = {e["step"] for e in j["evaluations"] if e["name"] == "eval_accuracy"}
        self.assertGreaterEqual(len(evals), 2)

    def test_gpu_chief_against_parameter_servers(self):
        args = ["--epochs=1", "--log_every=200", "--checkpoint_steps=300"]
        path = job_file(self.d, "gpups", [gpu_pool("ztrain-worker", args), {},
                                          pool("ztrain-paramserver", 2)])
        job = Job(self, path, self.job_dir, env=FAST)
        self.assertEqual(job.wait(timeout=300), 0, job.err[-3000:])
        j = load_job(self.job_dir)
        self.assertGreaterEqual(j["metrics"]["workerpool0-0"]["accuracy"]["value"], 0.80)
        log = chief_log(self.job_dir)
        self.assertIn("forward and backward on 1 GPU", log)
        self.assertIn("parameter servers", log)

    def test_gpu_chief_killed_resumes_from_checkpoint(self):
        # enough steps that the run resumed from the second checkpoint still
        # has thousands left on a fast GPU (an H100 trains 4 epochs in ~1 s)
        args = ["--epochs=20", "--log_every=100", "--checkpoint_steps=200"]
        path = job_file(self.d, "gpukill", [gpu_pool("ztrain-worker", args)])
        job = Job(self, path, self.job_dir, env=FAST)
        wait_for(lambda: len((load_job(self.job_dir) or {}).get("checkpoints", [])) >= 2,
                 timeout=200, step=0.02, what="two checkpoints")
        chief = [r for r in load_job(self.job_dir)["replicas"] if r["name"] == "workerpool0-0"][0]
        os.kill(chief["pid"], signal.SIGKILL)
        self.assertEqual(job.wait(timeout=300), 0, job.err[-3000:])
        j = load_job(self.job_dir)
        self.assertEqual([r for r in j["replicas"] if r["name"] == "workerpool0-0"][0]["restarts"], 1)
        log = chief_log(self.job_dir)
        self.assertRegex(log, r"resuming from \S+ at step \d+")
        self.assertGreaterEqual(j["metrics"]["workerpool0-0"]["accuracy"]["value"], 0.84)
        # the resumed run's loss carries on from where it was, not from 2.3
        first_after = re.split(r"resuming from", log)[-1]
        losses = [float(x) for x in re.findall(r"examples/s \d+ loss (\d+\.\d+)", first_after)]
        self.assertTrue(losses and losses[0] < 1.0, losses)


if __name__ == "__main__":
    if not any(re.fullmatch(r"nvidia\d+", d) for d in os.listdir("/dev")):
        print("no NVIDIA device: skipped")
        sys.exit(77)
    if os.environ.get("ZT_HAVE_CUDA", "ON") != "ON":
        print("this build has no CUDA: skipped")
        sys.exit(77)
    ztest.main()
