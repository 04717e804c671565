"""The environment of every replica, field by field against the managed services'
formats (CLUSTER_SPEC, TF_CONFIG), PyTorch, AIP_*, CLOUD_ML_JOB_ID, SageMaker, GPUs;
Vertex's own SDK reading it in a real job."""
import json
import os
import unittest

import sys

import ztest  # noqa: E402
from ztest import Job, ztrain, tmpdir, write

SPEC = {
    "displayName": "env-job",
    "jobSpec": {
        "workerPoolSpecs": [
            {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
             "containerSpec": {"imageUri": "ztrain-worker"}},
            {"machineSpec": {"machineType": "n1-standard-4", "acceleratorType": "NVIDIA_TESLA_T4",
                             "acceleratorCount": 2}, "replicaCount": 2,
             "containerSpec": {"imageUri": "ztrain-worker",
                               "env": [{"name": "MY_VAR", "value": "w"},
                                       {"name": "AIP_MODEL_DIR", "value": "/custom/model"}]}},
            {"machineSpec": {"machineType": "n1-highmem-8"}, "replicaCount": 2,
             "containerSpec": {"imageUri": "ztrain-paramserver"}},
            {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
             "containerSpec": {"imageUri": "ztrain-evaluator"}},
        ],
        "baseOutputDirectory": {"outputUriPrefix": "file:///tmp/zt-env-base"},
    },
}
COUNTS = [1, 2, 2, 1]
TF_TYPES = ["chief", "worker", "ps", "evaluator"]


def env_of(path, pool, index, *extra):
    r = ztrain("env", path, "--pool", str(pool), "--index", str(index), "--cpu-only", *extra)
    assert r.returncode == 0, r.stderr
    out = {}
    for line in r.stdout.splitlines():
        k, _, v = line.partition("=")
        out[k] = v
    return out


class ReplicaEnv(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = tmpdir("env-")
        cls.path = write(cls.d, "job.json", json.dumps(SPEC))
        spec = dict(SPEC["jobSpec"])
        spec["useChiefInTfConfig"] = False
        cls.master_path = write(cls.d, "master.json", json.dumps(spec))

    def check(self, path, trial=None, chief="chief", job=None):
        extra = ["--trial", trial] if trial else []
        job = job if job is not None else SPEC["jobSpec"]
        for pool, n in enumerate(COUNTS):
            for index in range(n):
                with self.subTest(pool=pool, index=index, trial=trial, chief=chief):
                    e = env_of(path, pool, index, *extra)
                    cs = json.loads(e["CLUSTER_SPEC"])
                    self.assertEqual(set(cs), {"cluster", "environment", "task", "job"})
                    self.assertEqual(cs["environment"], "cloud")
                    self.assertEqual(sorted(cs["cluster"]),
                                     ["workerpool0", "workerpool1", "workerpool2", "workerpool3"])
                    addrs = []
                    for p, c in enumerate(COUNTS):
                        lst = cs["cluster"]["workerpool%d" % p]
                        self.assertEqual(len(lst), c)
                        for a in lst:
                            host, port = a.split(":")
                            self.assertEqual(host, "127.0.0.1")
                            self.assertTrue(0 < int(port) < 65536)
                        addrs += lst
                    self.assertEqual(len(set(addrs)), sum(COUNTS), "addresses must be distinct")
                    task = {"type": "workerpool%d" % pool, "index": index}
                    if trial:
                        task["trial"] = trial
                    self.assertEqual(cs["task"], task)
                    self.assertEqual(cs["job"], job)
                    tf = json.loads(e["TF_CONFIG"])
                    self.assertEqual(set(tf), {"cluster", "task", "environment", "job"})
                    self.assertEqual(tf["environment"], "cloud")
                    self.assertEqual(tf["cluster"], {chief: cs["cluster"]["workerpool0"],
                                                     "worker": cs["cluster"]["workerpool1"],
                                                     "ps": cs["cluster"]["workerpool2"]})
                    tf_task = {"type": chief if pool == 0 else TF_TYPES[pool], "index": index}
                    if trial:
                        tf_task["trial"] = trial
                    self.assertEqual(tf["task"], tf_task)
                    self.assertEqual(tf["job"], job)
                    if pool <= 1:
                        self.assertEqual(e["MASTER_ADDR"], "127.0.0.1")
                        self.assertNotEqual(e["MASTER_PORT"], cs["cluster"]["workerpool0"][0].split(":")[1])
                        self.assertEqual(e["WORLD_SIZE"], "3")
                        self.assertEqual(e["RANK"], str(0 if pool == 0 else 1 + index))
                    else:
                        for k in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK"):
                            self.assertNotIn(k, e)
                    base = "/tmp/zt-env-base" + ("/" + trial if trial else "")
                    if pool == 1:  # the pool's own env[] comes last and wins
                        self.assertEqual(e["AIP_MODEL_DIR"], "/custom/model")
                        self.assertEqual(e["MY_VAR"], "w")
                    else:
                        self.assertEqual(e["AIP_MODEL_DIR"], base + "/model/")
                        self.assertNotIn("MY_VAR", e)
                    self.assertEqual(e["AIP_CHECKPOINT_DIR"], base + "/checkpoints/")
                    self.assertEqual(e["AIP_TENSORBOARD_LOG_DIR"], base + "/logs/")
                    # SageMaker's output folders are a trial's own too; its input is the study's
                    self.assertEqual(e["SM_MODEL_DIR"], base + "/model")
                    self.assertEqual(e["SM_OUTPUT_DIR"], base + "/output")
                    self.assertEqual(e["SM_OUTPUT_INTERMEDIATE_DIR"], base + "/output/intermediate")
                    self.assertEqual(e["SM_INPUT_DIR"], "/tmp/zt-env-base/input")
                    hosts = json.loads(e["SM_HOSTS"])
                    self.assertEqual(hosts, ["algo-%d" % i for i in range(1, 7)])
                    me = "algo-%d" % (1 + sum(COUNTS[:pool]) + index)
                    self.assertEqual(e["SM_CURRENT_HOST"], me)
                    rc = json.loads(e["SM_RESOURCE_CONFIG"])
                    self.assertEqual(rc["current_host"], me)
                    self.assertEqual(rc["hosts"], hosts)
                    if trial:
                        self.assertEqual(e["CLOUD_ML_TRIAL_ID"], trial)
                    else:
                        self.assertNotIn("CLOUD_ML_TRIAL_ID", e)
                    self.assertEqual(e["ZT_POOL"], str(pool))
                    self.assertEqual(e["ZT_INDEX"], str(index))
                    keys = list(e)
                    self.assertLess(keys.index("CLUSTER_SPEC"), keys.index("TF_CONFIG"))
                    if pool == 1:
                        self.assertEqual(keys[-2:], ["MY_VAR", "AIP_MODEL_DIR"])

    def test_chief(self):
        self.check(self.path)

    def test_job_id(self):
        """CLOUD_ML_JOB_ID, as Vertex sets it on every job: the job
        directory's name; a trial's, its study folder's and its own."""
        for pool, n in enumerate(COUNTS):
            for index in range(n):
                e = env_of(self.path, pool, index, "--job-dir", os.path.join(self.d, "my-job-7"))
                self.assertEqual(e["CLOUD_ML_JOB_ID"], "my-job-7")
        e = env_of(self.path, 1, 1, "--trial", "3", "--job-dir", os.path.join(self.d, "study-a", "trial-3"))
        self.assertEqual(e["CLOUD_ML_JOB_ID"], "study-a-trial-3")

    def test_trial(self):
        self.check(self.path, trial="3")

    def test_master_by_spec(self):
        spec = dict(SPEC["jobSpec"])
        spec["useChiefInTfConfig"] = False
        self.check(self.master_path, chief="master", job=spec)

    def test_master_by_flag(self):
        r = ztrain("env", self.path, "--pool", "0", "--index", "0", "--cpu-only",
                   "--tf-chief-name", "master")
        self.assertEqual(r.returncode, 0, r.stderr)
        tf = [json.loads(l.split("=", 1)[1]) for l in r.stdout.splitlines() if l.startswith("TF_CONFIG=")][0]
        self.assertIn("master", tf["cluster"])
        self.assertNotIn("chief", tf["cluster"])
        self.assertEqual(tf["task"]["type"], "master")

    def test_gpus_each_their_own(self):
        r = ztrain("env", self.path, "--pool", "1", "--index", "1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("CUDA_VISIBLE_DEVICES=2,3\n", r.stdout)
        r = ztrain("env", self.path, "--pool", "1", "--index", "0")
        self.assertIn("CUDA_VISIBLE_DEVICES=0,1\n", r.stdout)
        r = ztrain("env", self.path, "--pool", "2", "--index", "0")
        self.assertIn("CUDA_VISIBLE_DEVICES=\n", r.stdout)
        self.assertEqual(env_of(self.path, 1, 1)["CUDA_VISIBLE_DEVICES"], "")  # --cpu-only

    def test_single_replica_has_no_tf_config(self):
        spec = {"workerPoolSpecs": [SPEC["jobSpec"]["workerPoolSpecs"][0]]}
        path = write(self.d, "single.json", json.dumps(spec))
        e = env_of(path, 0, 0)
        self.assertNotIn("TF_CONFIG", e)
        cs = json.loads(e["CLUSTER_SPEC"])
        self.assertEqual(cs["cluster"], {"workerpool0": cs["cluster"]["workerpool0"]})
        self.assertEqual(e["WORLD_SIZE"], "1")

    def test_legacy_yaml_env(self):
        path = write(self.d, "std.yaml", "trainingInput:\n  scaleTier: STANDARD_1\n"
                     "  runtimeVersion: '2.11'\n  jobDir: /tmp/zt-env-legacy\n")
        e = env_of(path, 2, 2)
        tf = json.loads(e["TF_CONFIG"])
        self.assertEqual(tf["task"], {"type": "ps", "index": 2})
        self.assertEqual(len(tf["cluster"]["worker"]), 4)
        self.assertIn("chief", tf["cluster"])  # runtime 2.1+ says chief
        self.assertEqual(json.loads(e["CLUSTER_SPEC"])["job"]["scaleTier"], "STANDARD_1")
        self.assertEqual(e["AIP_MODEL_DIR"], "/tmp/zt-env-legacy/model/")

    def test_host_identity(self):
        # The launch backend's placement names every replica's host; the data
        # plane uses shared memory and ipc:// only where the hosts are equal.
        import socket
        e = env_of(self.path, 1, 0)
        hosts = json.loads(e["ZT_HOSTS"])
        cs = json.loads(e["CLUSTER_SPEC"])["cluster"]
        every = [a for p in sorted(cs) for a in cs[p]]
        self.assertEqual(sorted(hosts), sorted(every))
        self.assertEqual(e["ZT_HOST"], socket.gethostname())
        self.assertEqual(set(hosts.values()), {e["ZT_HOST"]})
        self.assertEqual(hosts[e["ZT_ADDRESS"]], e["ZT_HOST"])

    def test_backend_choice(self):
        r = ztrain("env", self.path, "--pool", "0", "--index", "0", "--backend", "local")
        self.assertEqual(r.returncode, 0, r.stderr)
        for args, env in ((["--backend", "nomad"], {}), ([], {"ZT_BACKEND": "nope"})):
            with self.subTest(args=args, env=env):
                d = tmpdir("env-backend-")
                r = ztrain("run", self.path, "--job-dir", d, "--cpu-only", *args, env=env)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn("nomad" if args else "ZT_BACKEND=nope", r.stderr)
                self.assertIn("local", r.stderr)  # what there is
                self.assertIn("slurm", r.stderr)
                self.assertFalse(os.path.exists(os.path.join(d, "job.json")))
        # slurm outside an allocation: a clear error, nothing started
        d = tmpdir("env-backend-")
        r = ztrain("run", self.path, "--job-dir", d, "--cpu-only", "--backend", "slurm",
                   env={"SLURM_JOB_ID": ""})
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("the slurm backend runs inside a Slurm allocation", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(d, "job.json")))

    def test_validate_prints_the_slurm_allocation(self):
        spec = dict(SPEC["jobSpec"], scheduling={"timeout": "3601s"})
        path = write(self.d, "slurm.json", json.dumps(spec))
        r = ztrain("validate", path, "--backend", "slurm", "--partition", "gpu", "--account", "lab")
        self.assertEqual(r.returncode, 0, r.stderr)
        header = r.stdout[r.stdout.index("#SBATCH --job-name"):]
        self.assertIn("#SBATCH --time=61\n", header)  # minutes, rounded up
        self.assertEqual(header.count("#SBATCH hetjob"), 3)  # four pools, four components
        self.assertIn("# workerpool1: 2 x n1-standard-4\n#SBATCH --ntasks=2 --cpus-per-task=4 "
                      "--mem-per-cpu=3840M --ntasks-per-node=1 --gres=gpu:2 --partition=gpu --account=lab\n"
                      "# each replica a step: srun --het-group=1 --nodelist=NODE --job-name=workerpool1-INDEX "
                      "-N1 -n1 --overlap --mem=0 --export=ALL --quiet --kill-on-bad-exit=0 --gres=gpu:2 COMMAND\n",
                      header)
        self.assertIn("# workerpool2: 2 x n1-highmem-8\n#SBATCH --ntasks=2 --cpus-per-task=8 "
                      "--mem-per-cpu=6656M --partition=gpu --account=lab\n", header)
        r = ztrain("validate", path)  # the local backend: no allocation
        self.assertNotIn("#SBATCH", r.stdout)

    def test_bad_pool_and_index(self):
        r = ztrain("env", self.path, "--pool", "7", "--index", "0")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--pool 7: the job has no such pool", r.stderr)
        r = ztrain("env", self.path, "--pool", "1", "--index", "2")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--index 2: pool 1 has 2 replicas", r.stderr)


# A real program in every pool: it records what it was given, opens a server
# on its CLUSTER_SPEC port and, on the chief, another on MASTER_PORT (as a
# TensorFlow server and a torch store would), and clears its TensorBoard
# folder as many programs do. The chief waits for the others' records.
PROG = r"""
import json, os, shutil, socket, sys, time
pool, index = os.environ["ZT_POOL"], os.environ["ZT_INDEX"]
name = "workerpool%s-%s" % (pool, index)
print("contract-line-from", name, flush=True)
rec = {"argv": sys.argv[1:], "env": dict(os.environ), "files": {}}
cfg = os.environ["SM_INPUT_CONFIG_DIR"]
for f in ("hyperparameters.json", "resourceconfig.json", "inputdataconfig.json"):
    with open(os.path.join(cfg, f)) as fh:
        rec["files"][f] = json.load(fh)
cs = json.loads(os.environ["CLUSTER_SPEC"])
socks = []
def serve(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", int(port)))
    s.listen()
    socks.append(s)
serve(cs["cluster"]["workerpool" + pool][int(index)].split(":")[1])
if pool == "0":
    serve(os.environ["MASTER_PORT"])
    rec["bound_both"] = True
tb = os.environ["AIP_TENSORBOARD_LOG_DIR"]
shutil.rmtree(tb, ignore_errors=True)
os.makedirs(tb, exist_ok=True)
with open(os.path.join(tb, "events.out.tfevents.%s" % name), "w") as fh:
    fh.write("x")
out = os.path.join(os.environ["AIP_MODEL_DIR"], name + ".json")
with open(out + ".tmp", "w") as fh:
    json.dump(rec, fh)
os.rename(out + ".tmp", out)
if pool == "0":
    others = ["workerpool1-0", "workerpool1-1", "workerpool2-0"]
    deadline = time.time() + 60
    while time.time() < deadline and not all(
            os.path.exists(os.path.join(os.environ["AIP_MODEL_DIR"], o + ".json")) for o in others):
        time.sleep(0.1)
else:
    time.sleep(60)
"""


def user_pool(n, machine, args):
    return {"machineSpec": {"machineType": machine}, "replicaCount": n,
            "containerSpec": {"imageUri": "python", "command": [sys.executable, "prog.py"],
                              "args": args}}


class Contract(unittest.TestCase):
    """What a real program sees, run as a job: torchrun's variables, its own
    MASTER_PORT, SageMaker's toolkit variables and files, its TensorBoard
    folder apart from ztrain's logs."""

    @classmethod
    def setUpClass(cls):
        cls.d = tmpdir("contract-")
        write(cls.d, "prog.py", PROG)
        cls.base = os.path.join(cls.d, "out")
        os.makedirs(os.path.join(cls.base, "input", "data", "training"))
        os.makedirs(os.path.join(cls.base, "input", "data", "eval"))
        spec = {"displayName": "contract", "jobSpec": {
            "workerPoolSpecs": [user_pool(1, "n1-standard-4", ["--lr", "0.25", "--name=abc"]),
                                user_pool(2, "n1-standard-8", ["--lr", "0.5"]),
                                user_pool(1, "n1-highmem-2", ["--ps"])],
            "baseOutputDirectory": {"outputUriPrefix": cls.base},
            "scheduling": {"timeout": "120s"}}}
        path = write(cls.d, "job.json", json.dumps(spec))
        cls.job_dir = os.path.join(cls.d, "job")
        t = unittest.TestCase()
        job = Job(t, path, cls.job_dir, "--", "--extra", "7", cwd=cls.d)
        cls.rc = job.wait(timeout=120)
        cls.err = job.err
        t.doCleanups()
        cls.rec = {}
        for n in ("workerpool0-0", "workerpool1-0", "workerpool1-1", "workerpool2-0"):
            with open(os.path.join(cls.base, "model", n + ".json")) as f:
                cls.rec[n] = json.load(f)

    def test_job_succeeded(self):
        self.assertEqual(self.rc, 0, self.err)

    def test_torchrun_variables(self):
        for name, rank in (("workerpool0-0", 0), ("workerpool1-0", 1), ("workerpool1-1", 2)):
            e = self.rec[name]["env"]
            self.assertEqual(e["RANK"], str(rank))
            self.assertEqual(e["WORLD_SIZE"], "3")
            # One host: the node holds every rank.
            self.assertEqual(e["LOCAL_RANK"], str(rank), name)
            self.assertEqual(e["LOCAL_WORLD_SIZE"], "3")
            self.assertEqual(e["GROUP_RANK"], "0")
            self.assertEqual(e["NODE_RANK"], "0")
            self.assertEqual(e["GROUP_WORLD_SIZE"], "1")
        for k in ("LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK", "RANK"):
            self.assertNotIn(k, self.rec["workerpool2-0"]["env"])

    def test_master_port_is_its_own(self):
        e = self.rec["workerpool0-0"]["env"]
        chief = json.loads(e["CLUSTER_SPEC"])["cluster"]["workerpool0"][0]
        self.assertNotEqual(e["MASTER_PORT"], chief.split(":")[1])
        self.assertTrue(self.rec["workerpool0-0"].get("bound_both"))
        ports = [e["MASTER_PORT"]] + [a.split(":")[1] for p in json.loads(e["CLUSTER_SPEC"])["cluster"].values()
                                      for a in p]
        self.assertEqual(len(set(ports)), len(ports))
        for n in ("workerpool1-0", "workerpool1-1"):
            self.assertEqual(self.rec[n]["env"]["MASTER_PORT"], e["MASTER_PORT"])

    def test_user_args_reach_every_user_program(self):
        self.assertEqual(self.rec["workerpool0-0"]["argv"], ["--lr", "0.25", "--name=abc", "--extra", "7"])
        self.assertEqual(self.rec["workerpool2-0"]["argv"], ["--ps", "--extra", "7"])

    def test_tensorboard_apart_from_replica_logs(self):
        tb = self.rec["workerpool0-0"]["env"]["AIP_TENSORBOARD_LOG_DIR"]
        self.assertEqual(tb, os.path.join(self.base, "logs") + "/")
        logs = os.path.join(self.job_dir, "replica-logs")
        self.assertNotEqual(os.path.realpath(tb), os.path.realpath(logs))
        for n in self.rec:  # the program cleared its folder; ztrain's logs are whole
            with open(os.path.join(logs, n + ".log")) as f:
                self.assertIn("contract-line-from " + n, f.read())
        self.assertTrue(os.listdir(tb))

    def test_sagemaker(self):
        e = self.rec["workerpool0-0"]["env"]
        b = self.base
        self.assertEqual(e["SM_MODEL_DIR"], b + "/model")
        self.assertEqual(e["SM_OUTPUT_DIR"], b + "/output")
        self.assertEqual(e["SM_OUTPUT_DATA_DIR"], b + "/output/data/algo-1")
        self.assertEqual(e["SM_INPUT_DIR"], b + "/input")
        self.assertEqual(e["SM_CHECKPOINT_DIR"], b + "/sagemaker-checkpoints")
        self.assertTrue(os.path.isdir(e["SM_CHECKPOINT_DIR"]))
        self.assertEqual(e["SM_NUM_CPUS"], "4")
        self.assertEqual(e["SM_NUM_GPUS"], "0")
        self.assertEqual(self.rec["workerpool1-1"]["env"]["SM_NUM_CPUS"], "8")
        self.assertEqual(json.loads(e["SM_CHANNELS"]), ["eval", "training"])
        self.assertEqual(e["SM_CHANNEL_TRAINING"], b + "/input/data/training")
        self.assertEqual(e["SM_CHANNEL_EVAL"], b + "/input/data/eval")
        self.assertEqual(json.loads(e["SM_HPS"]), {"lr": 0.25, "name": "abc", "extra": 7})
        self.assertEqual(e["SM_HP_LR"], "0.25")
        self.assertEqual(e["SM_HP_NAME"], "abc")
        self.assertEqual(e["SM_HP_EXTRA"], "7")
        self.assertEqual(json.loads(e["SM_USER_ARGS"]), ["--extra", "7", "--lr", "0.25", "--name", "abc"])
        self.assertEqual(e["SM_USER_ENTRY_POINT"], "prog.py")
        te = json.loads(e["SM_TRAINING_ENV"])
        self.assertEqual(te["hyperparameters"], json.loads(e["SM_HPS"]))
        self.assertEqual(te["current_host"], "algo-1")
        self.assertEqual(te["hosts"], ["algo-1", "algo-2", "algo-3", "algo-4"])
        self.assertTrue(te["is_master"])
        self.assertEqual(te["channel_input_dirs"]["training"], e["SM_CHANNEL_TRAINING"])
        for k, var in (("model_dir", "SM_MODEL_DIR"), ("output_data_dir", "SM_OUTPUT_DATA_DIR"),
                       ("input_config_dir", "SM_INPUT_CONFIG_DIR"), ("num_cpus", "SM_NUM_CPUS")):
            self.assertEqual(str(te[k]), e[var], k)
        self.assertEqual(json.loads(e["SM_RESOURCE_CONFIG"]), te["resource_config"])
        self.assertFalse(json.loads(self.rec["workerpool1-0"]["env"]["SM_TRAINING_ENV"])["is_master"])
        f = self.rec["workerpool0-0"]["files"]
        self.assertEqual(f["hyperparameters.json"], {"lr": "0.25", "name": "abc", "extra": "7"})
        self.assertEqual(f["resourceconfig.json"]["current_host"], "algo-1")
        # smdistributed's stand-in is only on the path of a SageMaker job that asks for it
        for n in self.rec:
            self.assertNotIn("_shim", self.rec[n]["env"].get("PYTHONPATH", ""), n)
        self.assertEqual(f["resourceconfig.json"]["hosts"], te["hosts"])
        self.assertEqual(sorted(f["inputdataconfig.json"]), ["eval", "training"])
        self.assertEqual(f["inputdataconfig.json"]["training"]["TrainingInputMode"], "File")
        self.assertEqual(self.rec["workerpool2-0"]["files"]["resourceconfig.json"]["current_host"], "algo-4")


VERTEX_READER = r"""
import json, os, time
from google.cloud.aiplatform.training_utils import environment_variables as v
seen = {k: getattr(v, k) for k in ("cloud_ml_job_id", "cluster_spec", "tf_config", "model_dir",
                                   "checkpoint_dir", "tensorboard_log_dir")}
name = "%s-%s" % (v.cluster_spec["task"]["type"], v.cluster_spec["task"]["index"])
with open(os.path.join(v.model_dir, name + ".tmp"), "w") as f:
    json.dump(seen, f)
os.rename(os.path.join(v.model_dir, name + ".tmp"), os.path.join(v.model_dir, name + ".json"))
others = ["workerpool1-0", "workerpool1-1"]
while name == "workerpool0-0" and not all(os.path.exists(os.path.join(v.model_dir, o + ".json")) for o in others):
    time.sleep(0.1)  # the job ends with its chief: the workers' records first
"""


class VertexSdk(unittest.TestCase):
    """Vertex's own SDK (google-cloud-aiplatform from PyPI, in a venv of the
    test tools), its reader of the training environment
    (training_utils.environment_variables), in every replica of a real job:
    it finds the job's ID, its cluster, TF_CONFIG and the output folders."""

    def test_the_sdks_reader_finds_every_variable(self):
        import toolvenv
        try:
            py = toolvenv.python(["google-cloud-aiplatform==2.7.0"], "vertex-sdk-venv")
        except SystemExit:
            self.skipTest("PyPI cannot be reached for google-cloud-aiplatform")
        d = tmpdir("vertex-sdk-")
        prog = write(d, "reader.py", VERTEX_READER)
        pool = lambda n: {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": n,
                          "containerSpec": {"imageUri": "python", "command": [py, prog]}}
        base = os.path.join(d, "out")
        spec = {"displayName": "sdk", "jobSpec": {"workerPoolSpecs": [pool(1), pool(2)],
                                                  "baseOutputDirectory": {"outputUriPrefix": base}}}
        job = Job(self, write(d, "job.json", json.dumps(spec)), os.path.join(d, "sdk-job-1"))
        self.assertEqual(job.wait(timeout=120), 0, job.err[-3000:])
        names = sorted(os.listdir(os.path.join(base, "model")))
        self.assertEqual(names, ["workerpool0-0.json", "workerpool1-0.json", "workerpool1-1.json"])
        for n in names:
            with open(os.path.join(base, "model", n)) as f:
                seen = json.load(f)
            self.assertEqual(seen["cloud_ml_job_id"], "sdk-job-1", n)
            self.assertEqual(sorted(seen["cluster_spec"]["cluster"]), ["workerpool0", "workerpool1"])
            self.assertEqual(sorted(seen["tf_config"]["cluster"]), ["chief", "worker"])
            self.assertEqual((seen["model_dir"], seen["checkpoint_dir"], seen["tensorboard_log_dir"]),
                             (base + "/model/", base + "/checkpoints/", base + "/logs/"))


class LegacyJobDir(unittest.TestCase):
    def test_job_dir_is_an_argument(self):
        # AI Platform's sample trainers declare --job-dir as required.
        d = tmpdir("legacy-jobdir-")
        write(d, "task.py", "import argparse\np = argparse.ArgumentParser()\n"
              "p.add_argument('--job-dir', required=True)\np.add_argument('--steps', type=int)\n"
              "a = p.parse_args()\nopen(a.job_dir + '/seen', 'w').write('%s %d' % (a.job_dir, a.steps))\n")
        jd = os.path.join(d, "out")
        path = write(d, "config.yaml", "trainingInput:\n  scaleTier: BASIC\n  jobDir: %s\n"
                     "  masterConfig:\n    imageUri: python\n    containerCommand: [%s, %s/task.py]\n"
                     "  args: ['--steps=40']\n" % (jd, sys.executable, d))
        job = Job(self, path, os.path.join(d, "job"))
        self.assertEqual(job.wait(timeout=60), 0, job.err)
        with open(os.path.join(jd, "seen")) as f:
            self.assertEqual(f.read(), "%s 40" % jd)


if __name__ == "__main__":
    ztest.main()
