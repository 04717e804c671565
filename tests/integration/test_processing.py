"""SageMaker's CreateProcessingJob request as a job format. The example
(examples/sagemaker-processing.json: Fashion-MNIST features on 3 hosts) runs
unchanged but for its output folder: each host reads its share of the files
(ShardedByS3Key; disjoint, together every file) and writes at the literal
/opt/ml/processing/... paths, /opt/ml/config/resourceconfig.json names the
host and all hosts, and the output folder holds every host's results; the
machine's own /opt/ml is untouched. A host whose script fails fails the job
with its /opt/ml/output/message, and nothing is uploaded; a job past
MaxRuntimeInSeconds is stopped; `validate` names what cannot be acted on
with its field and line. (Strangers' folders: test_security's
ProcessingFolders; across Slurm hosts: test_slurm.)"""
import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest

import ztest  # noqa: F401,E402
from ztest import BIN, Job, alive, load_job, tmpdir, wait_for, write, ztrain

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLE = os.path.join(ROOT, "examples", "sagemaker-processing.json")
DATA = "/usr/share/datasets/fashion-mnist"


def load(path):
    with open(path) as f:
        return json.load(f)


def example(out):
    """The example, its code by absolute path and its output in out."""
    with open(EXAMPLE) as f:
        req = json.load(f)
    req["ProcessingInputs"][1]["S3Input"]["S3Uri"] = os.path.join(ROOT, "examples", "processing", "featurize.py")
    req["ProcessingOutputConfig"]["Outputs"][0]["S3Output"]["S3Uri"] = "file://" + out
    return req


# A processing script: what it saw where SageMaker puts it; on the host
# named by --fail, a failure with its message in /opt/ml/output/message.
SCRIPT = r'''
import json, os, sys, time
a = dict(zip(sys.argv[1::2], sys.argv[2::2]))
rc = json.load(open("/opt/ml/config/resourceconfig.json"))
job = json.load(open("/opt/ml/config/processingjobconfig.json"))
me = rc["current_host"]
if a.get("--sleep"):
    time.sleep(float(a["--sleep"]))
if a.get("--fail") == me:
    open("/opt/ml/output/message", "w").write("no rows in %s's share\n" % me)
    sys.exit(3)
out = "/opt/ml/processing/output/seen"
files = sorted(os.listdir("/opt/ml/processing/input/rows"))
json.dump({"host": me, "hosts": rc["hosts"], "files": files, "name": job["ProcessingJobName"],
           "arn": job["ProcessingJobArn"], "env": os.environ.get("MODE")}, open(os.path.join(out, me + ".json"), "w"))
os.makedirs(os.path.join(out, "nested", me))
open(os.path.join(out, "nested", me, "part.txt"), "w").write("".join(
    open(os.path.join("/opt/ml/processing/input/rows", f)).read() for f in files))
'''


class ProcessingJob(unittest.TestCase):
    def setUp(self):
        self.d = tmpdir("processing-")
        write(self.d, "script.py", SCRIPT)
        os.makedirs(os.path.join(self.d, "rows"))
        for i in range(7):
            write(os.path.join(self.d, "rows"), "part-%d.csv" % i, "%d\n" % i)

    def request(self, args=(), count=2, **over):
        r = {"ProcessingJobName": "rows-1",
             "RoleArn": "arn:aws:iam::123456789012:role/Processing",
             "AppSpecification": {"ImageUri": "sklearn:1.2", "ContainerEntrypoint": ["python3", "/opt/ml/processing/input/code/script.py"],
                                  "ContainerArguments": list(args)},
             "Environment": {"MODE": "test"},
             "ProcessingResources": {"ClusterConfig": {"InstanceCount": count, "InstanceType": "ml.m5.large",
                                                       "VolumeSizeInGB": 10}},
             "ProcessingInputs": [
                 {"InputName": "rows", "S3Input": {"S3Uri": os.path.join(self.d, "rows"), "LocalPath": "/opt/ml/processing/input/rows",
                                                   "S3DataType": "S3Prefix", "S3InputMode": "File",
                                                   "S3DataDistributionType": "ShardedByS3Key"}},
                 {"InputName": "code", "S3Input": {"S3Uri": "file://" + os.path.join(self.d, "script.py"),
                                                   "LocalPath": "/opt/ml/processing/input/code"}}],
             "ProcessingOutputConfig": {"Outputs": [
                 {"OutputName": "seen", "S3Output": {"S3Uri": os.path.join(self.d, "out"),
                                                     "LocalPath": "/opt/ml/processing/output/seen",
                                                     "S3UploadMode": "EndOfJob"}}]},
             "StoppingCondition": {"MaxRuntimeInSeconds": 120}}
        r.update(over)
        return r

    def run_job(self, req, timeout=120):
        job = Job(self, write(self.d, "job.json", json.dumps(req, indent=2)), os.path.join(self.d, "job"))
        return job, job.wait(timeout=timeout)

    def test_the_example_shards_every_file_once(self):
        out = os.path.join(self.d, "features")
        had = os.path.exists("/opt/ml")
        job, rc = self.run_job(example(out))
        self.assertEqual(rc, 0, job.err[-3000:])
        self.assertEqual(load_job(job.job_dir)["state"], "SUCCEEDED")
        hosts = ["algo-1", "algo-2", "algo-3"]
        recs = {}
        for h in hosts:
            with open(os.path.join(out, h + ".json")) as f:
                recs[h] = json.load(f)
        files = [f for h in hosts for f in recs[h]["files"]]
        self.assertEqual(sorted(files), sorted(os.listdir(DATA)))  # every file, each once
        for h in hosts:
            self.assertEqual(recs[h]["host"], h)
            self.assertEqual(recs[h]["hosts"], hosts)
            self.assertTrue(recs[h]["files"], h)
        # every host's results: a CSV per input file, read back
        for f in files:
            with open(os.path.join(out, f[:-3] + ".csv")) as fh:
                rows = fh.read().splitlines()
            self.assertEqual(len(rows) - 1, 10 if "labels" in f else
                             {"t10k": 10000, "train": 60000}[f.split("-")[0]], f)
        with open(os.path.join(out, "train-labels-idx1-ubyte.csv")) as fh:
            self.assertEqual([r.split(",")[1] for r in fh.read().splitlines()[1:]], ["6000"] * 10)
        self.assertEqual(os.path.exists("/opt/ml"), had)  # the machine's own /opt/ml: as it was
        self.assertEqual(os.stat(out).st_mode & 0o777, 0o700)
        self.assertEqual(os.stat(os.path.join(out, "algo-1.json")).st_mode & 0o777, 0o600)

    def test_inputs_outputs_and_config_files(self):
        job, rc = self.run_job(self.request())
        self.assertEqual(rc, 0, job.err[-3000:])
        out = os.path.join(self.d, "out")
        recs = {h: load(os.path.join(out, h + ".json")) for h in ("algo-1", "algo-2")}
        self.assertEqual(recs["algo-1"]["files"], ["part-0.csv", "part-2.csv", "part-4.csv", "part-6.csv"])
        self.assertEqual(recs["algo-2"]["files"], ["part-1.csv", "part-3.csv", "part-5.csv"])
        for h, r in recs.items():
            self.assertEqual((r["host"], r["hosts"], r["name"], r["env"]), (h, ["algo-1", "algo-2"], "rows-1", "test"))
            self.assertTrue(r["arn"].endswith(":processing-job/rows-1"), r["arn"])
        with open(os.path.join(out, "nested", "algo-2", "part.txt")) as f:
            self.assertEqual(f.read(), "1\n3\n5\n")
        self.assertEqual(sorted(os.listdir(out)), ["algo-1.json", "algo-2.json", "nested"])  # no staging left

    def test_a_failing_host_fails_the_job_with_its_message(self):
        job, rc = self.run_job(self.request(args=["--fail", "algo-2"]))
        self.assertEqual(rc, 1, job.err[-3000:])
        j = load_job(job.job_dir)
        self.assertEqual(j["state"], "FAILED")
        self.assertEqual(j["error"]["failureReason"], "no rows in algo-2's share")
        self.assertFalse(os.path.exists(os.path.join(self.d, "out", "algo-1.json")))  # nothing uploaded
        st = ztrain("status", job.job_dir)
        self.assertIn("no rows in algo-2's share", st.stdout + st.stderr)
        self.assertRegex(st.stdout, r"\n  from \S+\.json \(CreateProcessingJob\)\n")  # which request, which format

    def test_max_runtime_stops_the_job(self):
        req = self.request(args=["--sleep", "60"], StoppingCondition={"MaxRuntimeInSeconds": 2})
        t0 = time.monotonic()
        job, rc = self.run_job(req, timeout=60)
        self.assertNotEqual(rc, 0)
        self.assertLess(time.monotonic() - t0, 40)
        j = load_job(job.job_dir)
        self.assertEqual(j["state"], "CANCELLED", j)  # SageMaker's Stopped (MaxRuntimeExceeded)
        self.assertEqual(j["error"]["message"], "StoppingCondition.MaxRuntimeInSeconds of 2s reached")
        self.assertFalse(os.path.exists(os.path.join(self.d, "out", "algo-1.json")))

    def test_a_killed_host_restarts_afresh(self):
        """A host killed mid-run (kill -9) is restarted in place, as a crashed
        replica of any job is, on the same share and with its outputs'
        folders emptied, as a fresh container's are: the upload holds the
        second run's files only."""
        write(self.d, "script.py", "import json, os, sys, time\n"
              "me = json.load(open('/opt/ml/config/resourceconfig.json'))['current_host']\n"
              "out = '/opt/ml/processing/output/seen'\n"
              "open(os.path.join(out, me + '.runs'), 'a').write(str(os.getpid()) + '\\n')\n"
              "time.sleep(float(sys.argv[2]) if me == 'algo-2' else 0)\n"
              "json.dump(sorted(os.listdir('/opt/ml/processing/input/rows')), open(os.path.join(out, me + '.json'), 'w'))\n")
        job = Job(self, write(self.d, "job.json", json.dumps(self.request(args=["--sleep", "3"]))),
                  os.path.join(self.d, "job"))
        wait_for(lambda: os.path.exists(os.path.join(job.job_dir, "opt-ml", "algo-2", "processing", "output", "seen",
                                                     "algo-2.runs")), what="algo-2 running")
        first = [r["pid"] for r in load_job(job.job_dir)["replicas"] if r["name"] == "workerpool1-0"][0]
        os.kill(first, 9)
        self.assertEqual(job.wait(timeout=60), 0, job.err[-3000:])
        j = load_job(job.job_dir)
        self.assertEqual(j["state"], "SUCCEEDED")
        self.assertEqual([r["restarts"] for r in j["replicas"]], [0, 1])
        out = os.path.join(self.d, "out")
        with open(os.path.join(out, "algo-2.runs")) as f:
            self.assertEqual(len(f.read().split()), 1)  # the run before left nothing
        self.assertEqual(load(os.path.join(out, "algo-2.json")), ["part-1.csv", "part-3.csv", "part-5.csv"])

    def test_status_logs_and_cancel(self):
        """The hosts under `ztrain status`, `logs` and `cancel` as any job's:
        cancelled, every host's program ends and nothing is uploaded."""
        job = Job(self, write(self.d, "job.json", json.dumps(self.request(args=["--sleep", "300"]))),
                  os.path.join(self.d, "job"))
        wait_for(lambda: (load_job(job.job_dir) or {}).get("state") == "RUNNING", what="RUNNING")
        pids = [r["pid"] for r in load_job(job.job_dir)["replicas"]]
        st = ztrain("status", job.job_dir)
        self.assertEqual(st.returncode, 0, st.stderr)
        self.assertIn("job rows-1: RUNNING", st.stdout)
        r = ztrain("cancel", job.job_dir, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(job.wait(timeout=60), 3, job.err[-2000:])
        self.assertEqual(load_job(job.job_dir)["state"], "CANCELLED")
        self.assertFalse([p for p in pids if alive(p)])
        self.assertEqual(os.listdir(os.path.join(self.d, "out")), [])  # made at the start, empty: nothing uploaded
        logs = ztrain("logs", job.job_dir)
        self.assertEqual(logs.returncode, 0, logs.stderr)
        self.assertIn("workerpool1-0", logs.stdout)

    def test_a_user_not_root_runs_it(self):
        """Not root, each host's /opt/ml is made in a user namespace of that
        user alone: the example runs the same."""
        if os.geteuid() != 0:
            self.skipTest("needs root to run as another user")
        uid = 50000 + os.getpid() % 10000  # no such user: nothing to make or remove
        ipc = "/tmp/ztrain-ipc-%d" % uid  # but its job makes the user's private ipc folder
        if not os.path.exists(ipc):
            self.addCleanup(shutil.rmtree, ipc, True)
        d = tempfile.mkdtemp(prefix="processing-user-", dir="/tmp")
        self.addCleanup(shutil.rmtree, d, True)
        req = write(d, "req.json", json.dumps(example(os.path.join(d, "out"))))
        os.chown(req, uid, uid)
        os.chown(d, uid, uid)
        os.chmod(d, 0o700)
        r = subprocess.run(["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups",
                            os.path.join(BIN, "ztrain"), "run", req, "--job-dir", os.path.join(d, "job")],
                           capture_output=True, text=True, timeout=120, cwd="/", env=dict(os.environ, HOME=d))
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        self.assertEqual(sorted(f for f in os.listdir(os.path.join(d, "out")) if f.endswith(".json")),
                         ["algo-1.json", "algo-2.json", "algo-3.json"])
        self.assertEqual(os.stat(os.path.join(d, "out", "algo-1.json")).st_uid, uid)

    def test_validate_names_field_line_and_reason(self):
        req = self.request()
        req["ProcessingInputs"][0]["S3Input"]["LocalPath"] = "/data/rows"
        req["ProcessingInputs"][1]["S3Input"]["S3InputMode"] = "Pipe"
        req["ProcessingInputs"].append({"InputName": "athena", "DatasetDefinition": {"AthenaDatasetDefinition": {}}})
        req["ProcessingOutputConfig"]["Outputs"][0]["S3Output"]["S3UploadMode"] = "Continuous"
        req["ProcessingOutputConfig"]["Outputs"].append(
            {"OutputName": "seen", "S3Output": {"S3Uri": self.d + "/o2", "LocalPath": "/opt/ml/processing/output/seen/x"}})
        req["ProcessingResources"]["ClusterConfig"]["InstanceType"] = "ml.nope"
        path = write(self.d, "bad.json", json.dumps(req, indent=2))
        r = ztrain("validate", path)
        self.assertEqual(r.returncode, 2, r.stderr)
        for want in (r"ProcessingInputs\[0\].S3Input.LocalPath = \"/data/rows\": a folder under /opt/ml/processing/",
                     r"ProcessingInputs\[1\].S3Input.S3InputMode = \"Pipe\": only File here",
                     r"ProcessingInputs\[2\].DatasetDefinition: not here",
                     r"Outputs\[0\].S3Output.S3UploadMode = \"Continuous\": only EndOfJob here",
                     r"Outputs\[1\].OutputName = \"seen\": a second one of this name",
                     r"Outputs\[1\].S3Output.LocalPath = \"/opt/ml/processing/output/seen/x\": the same folder as, "
                     r"or within, ProcessingOutputConfig.Outputs\[0\].S3Output's",
                     r"ClusterConfig.InstanceType = \"ml.nope\": unknown SageMaker instance type"):
            self.assertRegex(r.stderr, r"bad\.json:\d+:\d+: error: (Processing\w+\.)?" + want)
        self.assertIn("warning: RoleArn: ignored", r.stderr)


if __name__ == "__main__":
    ztest.main()
