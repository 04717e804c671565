"""The environment of every replica, field by field against seed 000's
formats (CLUSTER_SPEC, TF_CONFIG), PyTorch, AIP_*, SageMaker, GPUs."""
import json
import os
import unittest

from ztest import ztrain, tmpdir, write

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
                        self.assertEqual(e["MASTER_PORT"], cs["cluster"]["workerpool0"][0].split(":")[1])
                        self.assertEqual(e["WORLD_SIZE"], "3")
                        self.assertEqual(e["RANK"], str(0 if pool == 0 else 1 + index))
                    else:
                        for k in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK"):
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
        for args, env in ((["--backend", "slurm"], {}), ([], {"ZT_BACKEND": "nope"})):
            with self.subTest(args=args, env=env):
                d = tmpdir("env-backend-")
                r = ztrain("run", self.path, "--job-dir", d, "--cpu-only", *args, env=env)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn("slurm" if args else "ZT_BACKEND=nope", r.stderr)
                self.assertIn("local", r.stderr)  # what there is
                self.assertFalse(os.path.exists(os.path.join(d, "job.json")))

    def test_bad_pool_and_index(self):
        r = ztrain("env", self.path, "--pool", "7", "--index", "0")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--pool 7: the job has no such pool", r.stderr)
        r = ztrain("env", self.path, "--pool", "1", "--index", "2")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--index 2: pool 1 has 2 replicas", r.stderr)


if __name__ == "__main__":
    unittest.main()
