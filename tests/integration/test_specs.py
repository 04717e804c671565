"""Job spec validation: every invalid spec names the file (or flag), the field
path, the value and the rule, exits 2 and starts nothing; every scale tier and
the seeds' examples are accepted."""
import json
import os
import subprocess
import unittest

import ztest  # noqa: E402
from ztest import BIN, ztrain, tmpdir, write

# A build without CUDA refuses GPU jobs unless --cpu-only (tested below).
HAVE_CUDA = "CUDA backend: yes" in ztrain("--version").stdout
GPU_OK = [] if HAVE_CUDA else ["--cpu-only"]

POOL0 = {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
         "containerSpec": {"imageUri": "ztrain-worker"}}


def vertex(*pools, **extra):
    spec = {"workerPoolSpecs": list(pools)}
    spec.update(extra)
    return json.dumps(spec, indent=2)


def pool(**kw):
    p = json.loads(json.dumps(POOL0))
    for k, v in kw.items():
        if k == "machineSpec":
            p["machineSpec"].update(v)
        else:
            p[k] = v
    return p


# The Reduction Server's pool (an elastic pool needs it).
RS = {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 2,
      "containerSpec": {"imageUri": "ztrain-reducer"}}


def without(d, *keys):
    d = json.loads(json.dumps(d))
    for k in keys:
        d.pop(k)
    return d


# (name, ext, text, extra args, [expected substrings in stderr])
INVALID = [
    ("malformed-json", "json", '{\n  "workerPoolSpecs": [\n    {,\n  ]\n}\n', [],
     ["bad.json:3:", "malformed JSON"]),
    ("root-array", "json", "[1, 2]", [], ["the document must be an object"]),
    ("no-pools", "json", '{"baseOutputDirectory": {"outputUriPrefix": "/tmp/x"}}', [],
     ["workerPoolSpecs: required"]),
    ("pools-not-list", "json", '{"workerPoolSpecs": {"a": 1}}', [],
     ['workerPoolSpecs = {"a": 1}: expected a list of worker pool specs']),
    ("pools-empty", "json", '{"workerPoolSpecs": []}', [],
     ["workerPoolSpecs = []: at least the primary pool"]),
    ("pool0-missing", "json", vertex({}, pool()), [],
     ["workerPoolSpecs[0] = {}: the primary pool is required"]),
    ("pool0-two-replicas", "json", vertex(pool(replicaCount=2)), [],
     ["workerPoolSpecs[0].replicaCount = 2: the primary pool must have exactly 1 replica"]),
    ("replicas-zero", "json", vertex(pool(), pool(replicaCount=0)), [],
     ["workerPoolSpecs[1].replicaCount = 0: must be at least 1"]),
    ("replicas-negative", "json", vertex(pool(), pool(replicaCount=-3)), [],
     ["workerPoolSpecs[1].replicaCount = -3: must be at least 1"]),
    ("replicas-absurd", "json", vertex(pool(), pool(replicaCount=100000)), [],
     ["workerPoolSpecs[1].replicaCount = 100000: must be at most 256"]),
    ("replicas-not-int", "json", vertex(pool(), pool(replicaCount="two")), [],
     ['workerPoolSpecs[1].replicaCount = "two": expected an integer']),
    ("unknown-machine", "json", vertex(pool(machineSpec={"machineType": "n1-mega-7"})), [],
     ['workerPoolSpecs[0].machineSpec.machineType = "n1-mega-7": unknown machine type']),
    ("machine-missing", "json", vertex(pool(), pool(machineSpec={"machineType": None})), [],
     ["workerPoolSpecs[1].machineSpec.machineType: required"]),
    ("unknown-accelerator", "json",
     vertex(pool(machineSpec={"acceleratorType": "NVIDIA_TESLA_Z9", "acceleratorCount": 1})), [],
     ['workerPoolSpecs[0].machineSpec.acceleratorType = "NVIDIA_TESLA_Z9": unknown accelerator']),
    ("three-t4", "json", vertex(pool(), pool(machineSpec={
        "acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": 3})), [],
     ["workerPoolSpecs[1].machineSpec.acceleratorCount = 3: NVIDIA_TESLA_T4 on n1-standard-4 "
      "allows 1, 2, 4"]),
    ("a100-on-n1", "json", vertex(pool(machineSpec={
        "machineType": "n1-standard-8", "acceleratorType": "NVIDIA_TESLA_A100",
        "acceleratorCount": 1})), [],
     ['acceleratorType = "NVIDIA_TESLA_A100": NVIDIA_TESLA_A100 cannot be attached to n1-standard-8']),
    ("v100-on-a2", "json", vertex(pool(machineSpec={
        "machineType": "a2-highgpu-1g", "acceleratorType": "NVIDIA_TESLA_V100",
        "acceleratorCount": 1})), [],
     ["NVIDIA_TESLA_V100 cannot be attached to a2-highgpu-1g"]),
    ("a3-without-its-gpus", "json", vertex(pool(machineSpec={"machineType": "a3-highgpu-2g"})), [],
     ["workerPoolSpecs[0].machineSpec.acceleratorType: machine type a3-highgpu-2g comes with 2 x "
      "NVIDIA_H100_80GB: set acceleratorType NVIDIA_H100_80GB and acceleratorCount 2"]),
    ("a100-wrong-count", "json", vertex(pool(machineSpec={
        "machineType": "a2-highgpu-2g", "acceleratorType": "NVIDIA_TESLA_A100",
        "acceleratorCount": 4})), [],
     ["acceleratorCount = 4: NVIDIA_TESLA_A100 on a2-highgpu-2g allows 2"]),
    ("accel-count-negative", "json", vertex(pool(machineSpec={
        "acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": -1})), [],
     ["workerPoolSpecs[0].machineSpec.acceleratorCount = -1: must be at least 0"]),
    ("accel-count-absurd", "json", vertex(pool(machineSpec={
        "acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": 64})), [],
     ["acceleratorCount = 64: must be at most 16"]),
    ("count-without-type", "json", vertex(pool(machineSpec={"acceleratorCount": 2})), [],
     ["acceleratorCount = 2: an accelerator count needs an accelerator type"]),
    ("five-pools", "json", vertex(pool(), pool(), pool(), pool(), pool()), [],
     ["workerPoolSpecs: at most 4 pools"]),
    ("both-programs", "json", vertex(pool(pythonPackageSpec={"pythonModule": "t.task"})), [],
     ["workerPoolSpecs[0].pythonPackageSpec: give containerSpec or pythonPackageSpec, not both"]),
    ("no-program", "json", vertex(without(POOL0, "containerSpec")), [],
     ["workerPoolSpecs[0]: give containerSpec"]),
    ("image-without-command", "json",
     vertex(pool(containerSpec={"imageUri": "gcr.io/me/trainer:v1"})), [],
     ["workerPoolSpecs[0].containerSpec.command: required: image 'gcr.io/me/trainer:v1' is not pulled"]),
    ("command-not-list", "json",
     vertex(pool(containerSpec={"imageUri": "x", "command": "python3 train.py"})), [],
     ['workerPoolSpecs[0].containerSpec.command = "python3 train.py": expected a list of strings']),
    ("env-bad-name", "json", vertex(pool(containerSpec={
        "imageUri": "ztrain-worker", "env": [{"name": "1BAD", "value": "x"}]})), [],
     ['workerPoolSpecs[0].containerSpec.env[0].name = "1BAD": an environment variable name']),
    ("env-not-list", "json", vertex(pool(containerSpec={
        "imageUri": "ztrain-worker", "env": {"A": "1"}})), [],
     ["workerPoolSpecs[0].containerSpec.env = {\"A\": \"1\"}: expected a list of {name, value}"]),
    ("python-no-module", "json", vertex(without(POOL0, "containerSpec") | {
        "pythonPackageSpec": {"executorImageUri": "x", "packageUris": []}}), [],
     ["workerPoolSpecs[0].pythonPackageSpec.pythonModule: required"]),
    ("package-missing", "json", vertex(without(POOL0, "containerSpec") | {
        "pythonPackageSpec": {"pythonModule": "t.task", "packageUris": ["/nonexistent/pkg"]}}), [],
     ['workerPoolSpecs[0].pythonPackageSpec.packageUris[0] = "/nonexistent/pkg": no such file']),
    ("gcs-output", "json", vertex(pool(), baseOutputDirectory={"outputUriPrefix": "gs://b/x"}), [],
     ['baseOutputDirectory.outputUriPrefix = "gs://b/x": only local paths and file:// URIs']),
    ("bad-timeout", "json", vertex(pool(), scheduling={"timeout": "soon"}), [],
     ['scheduling.timeout = "soon": expected a positive duration']),
    ("bad-bool", "json", vertex(pool(), scheduling={"restartJobOnWorkerRestart": "yes"}), [],
     ['scheduling.restartJobOnWorkerRestart = "yes": expected true or false']),
    ("small-disk", "json", vertex(pool(diskSpec={"bootDiskSizeGb": 5})), [],
     ["workerPoolSpecs[0].diskSpec.bootDiskSizeGb = 5: must be at least 10"]),
    ("bad-disk-type", "json", vertex(pool(diskSpec={"bootDiskType": "floppy"})), [],
     ['workerPoolSpecs[0].diskSpec.bootDiskType = "floppy": expected pd-ssd']),
    ("elastic-chief", "json", vertex(pool(elasticPolicy={"minReplicaCount": 1, "maxReplicaCount": 2})), [],
     ["workerPoolSpecs[0].elasticPolicy = {", "only the workers' pool (workerPoolSpecs[1]) can be elastic"]),
    ("elastic-max-below-min", "json", vertex(pool(), pool(replicaCount=2, elasticPolicy={
        "minReplicaCount": 3, "maxReplicaCount": 2}), RS), [],
     ["workerPoolSpecs[1].elasticPolicy.maxReplicaCount = 2: below minReplicaCount (3)"]),
    ("elastic-count-outside", "json", vertex(pool(), pool(replicaCount=5, elasticPolicy={
        "minReplicaCount": 1, "maxReplicaCount": 3}), RS), [],
     ["workerPoolSpecs[1].replicaCount = 5: outside the pool's elasticPolicy, 1 to 3 replicas"]),
    ("elastic-min-zero", "json", vertex(pool(), pool(elasticPolicy={
        "minReplicaCount": 0, "maxReplicaCount": 3}), RS), [],
     ["workerPoolSpecs[1].elasticPolicy.minReplicaCount = 0: must be at least 1"]),
    ("elastic-half", "json", vertex(pool(), pool(elasticPolicy={"maxReplicaCount": 3}), RS), [],
     ["workerPoolSpecs[1].elasticPolicy = {", "expected both minReplicaCount and maxReplicaCount"]),
    ("elastic-unknown-field", "json", vertex(pool(), pool(elasticPolicy={
        "minReplicaCount": 1, "maxReplicaCount": 3, "maxRestarts": 2}), RS), [],
     ["workerPoolSpecs[1].elasticPolicy.maxRestarts"]),
    ("elastic-without-reducers", "json", vertex(pool(), pool(elasticPolicy={
        "minReplicaCount": 1, "maxReplicaCount": 3})), [],
     ["workerPoolSpecs[1].elasticPolicy = {", "an elastic pool trains through reducers",
      "workerPoolSpecs[2] must be the Reduction Server"]),
    ("wrapped-path", "json", json.dumps({"displayName": "w", "jobSpec": json.loads(
        vertex(pool(replicaCount=3)))}), [],
     ["jobSpec.workerPoolSpecs[0].replicaCount = 3: the primary pool must have exactly 1"]),
    ("duplicate-key-json", "json", '{"workerPoolSpecs": [], "workerPoolSpecs": []}', [],
     ["malformed JSON: duplicate object key"]),
    ("gpus-not-present", "json", vertex(pool(machineSpec={
        "acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": 2})), [],
     ["2 GPUs asked for (workerpool0: 1 x 2 NVIDIA_TESLA_T4) but " +
      ("0 found on this machine" if HAVE_CUDA else "this ztrain was built without CUDA"), "--cpu-only"]),
    ("flag-bad-replicas", "json", vertex(pool(), pool()),
     ["--worker-pool-spec=machine-type=n1-standard-4",
      "--worker-pool-spec=replica-count=-1"],
     ["command line (--worker-pool-spec #2 replica-count): error: "
      "workerPoolSpecs[1].replicaCount = -1: must be at least 1"]),
    ("flag-bad-key", "json", vertex(pool()), ["--worker-pool-spec=colour=blue"],
     ["'colour' is not KEY=VALUE with a known key"]),
    ("flag-three-t4", "json", vertex(pool()),
     ["--worker-pool-spec=accelerator-type=nvidia-tesla-t4,accelerator-count=3"],
     ["command line (--worker-pool-spec #1 accelerator-count)",
      "acceleratorCount = 3: NVIDIA_TESLA_T4 on n1-standard-4 allows 1, 2, 4"]),
    ("legacy-flag-on-vertex", "json", vertex(pool()), ["--worker-count=3"],
     ["--worker-count applies to a legacy trainingInput config"]),
    # Legacy AI Platform config.yaml
    ("malformed-yaml", "yaml", "trainingInput:\n  scaleTier: CUSTOM\n masterType: x\n", [],
     ["bad.yaml:3:", "malformed YAML"]),
    ("unknown-tier", "yaml", "trainingInput:\n  scaleTier: HUGE\n", [],
     ['trainingInput.scaleTier = "HUGE": unknown scale tier (known: BASIC, STANDARD_1']),
    ("custom-no-master", "yaml", "trainingInput:\n  scaleTier: CUSTOM\n  workerCount: 0\n", [],
     ["trainingInput.masterType: required when scaleTier is CUSTOM"]),
    ("custom-no-worker-type", "yaml",
     "trainingInput:\n  scaleTier: CUSTOM\n  masterType: n1-standard-4\n  workerCount: 2\n", [],
     ["trainingInput.workerType: required when workerCount is 2"]),
    ("negative-workers", "yaml", "trainingInput:\n  scaleTier: CUSTOM\n  masterType: n1-standard-4\n"
     "  workerType: n1-standard-4\n  workerCount: -1\n", [],
     ["bad.yaml:5:", "trainingInput.workerCount = -1: must be at least 0"]),
    ("yaml-three-t4", "yaml", "trainingInput:\n  scaleTier: CUSTOM\n  masterType: n1-highcpu-16\n"
     "  masterConfig:\n    acceleratorConfig:\n      count: 3\n      type: NVIDIA_TESLA_T4\n", [],
     ["bad.yaml:6:", "trainingInput.masterConfig.acceleratorConfig.count = 3: NVIDIA_TESLA_T4 on "
      "n1-highcpu-16 allows 1, 2, 4"]),
    ("legacy-gpu-plus-accel", "yaml", "trainingInput:\n  scaleTier: CUSTOM\n"
     "  masterType: complex_model_m_gpu\n  masterConfig:\n    acceleratorConfig:\n"
     "      count: 1\n      type: NVIDIA_TESLA_T4\n", [],
     ["machine type complex_model_m_gpu already includes 4 x NVIDIA_TESLA_K80"]),
    ("yaml-unknown-machine", "yaml", "trainingInput:\n  scaleTier: CUSTOM\n  masterType: huge_model\n",
     [], ['trainingInput.masterType = "huge_model": unknown machine type']),
    ("yaml-count-without-type", "yaml", "trainingInput:\n  scaleTier: CUSTOM\n"
     "  masterType: n1-standard-4\n  masterConfig:\n    acceleratorConfig:\n      count: 1\n", [],
     ["trainingInput.masterConfig.acceleratorConfig.type: required with acceleratorConfig.count"]),
    ("yaml-unknown-accel", "yaml", "trainingInput:\n  scaleTier: CUSTOM\n"
     "  masterType: n1-standard-4\n  masterConfig:\n    acceleratorConfig:\n      count: 1\n"
     "      type: TPU_V3\n", [],
     ['trainingInput.masterConfig.acceleratorConfig.type = "TPU_V3": unknown accelerator type']),
    ("training-input-list", "yaml", "trainingInput:\n  - a\n  - b\n", [],
     ['trainingInput = ["a", "b"]: expected an object']),
    ("yaml-gcs-jobdir", "yaml", "trainingInput:\n  jobDir: gs://bucket/job\n", [],
     ['trainingInput.jobDir = "gs://bucket/job": only local paths']),
    ("yaml-duplicate", "yaml", "trainingInput:\n  scaleTier: BASIC\n  scaleTier: CUSTOM\n", [],
     ["trainingInput.scaleTier: duplicate key"]),
    ("yaml-pool-spec-flag", "yaml", "trainingInput:\n  scaleTier: BASIC\n",
     ["--worker-pool-spec=replica-count=2"], ["--worker-pool-spec applies to a Vertex CustomJobSpec"]),
    ("yaml-flag-not-int", "yaml", "trainingInput:\n  scaleTier: CUSTOM\n  masterType: n1-standard-4\n",
     ["--worker-count=abc", "--worker-machine-type=n1-standard-4"],
     ['command line (--worker-count): error: trainingInput.workerCount = "abc": expected an integer']),
    ("yaml-basic-gpu-absent", "yaml", "trainingInput:\n  scaleTier: BASIC_GPU\n", [],
     ["1 GPU asked for (workerpool0: 1 x 1 NVIDIA_TESLA_K80) but " +
      ("0 found" if HAVE_CUDA else "this ztrain was built without CUDA")]),
    ("yaml-flag-accel", "yaml", "trainingInput:\n  scaleTier: CUSTOM\n  masterType: n1-standard-4\n",
     ["--master-accelerator=count=3,type=nvidia-tesla-t4"],
     ["command line (--master-accelerator)",
      "trainingInput.masterConfig.acceleratorConfig.count = 3: NVIDIA_TESLA_T4 on n1-standard-4"]),
    ("env-knob-bad", "json",
     vertex(pool(containerSpec={"imageUri": "x", "command": ["true"],
                                "env": [{"name": "HOROVOD_FUSION_THRESHOLD", "value": "64MB"}]})), [],
     ['workerPoolSpecs[0].containerSpec.env[0].value = "64MB": HOROVOD_FUSION_THRESHOLD=64MB: '
      "not a whole number"]),
    ("env-knob-choice", "json",
     vertex(pool(containerSpec={"imageUri": "x", "command": ["true"],
                                "env": [{"name": "ZT_SHM", "value": "on"}]})), [],
     ['workerPoolSpecs[0].containerSpec.env[0].value = "on": ZT_SHM=on: not one of the values',
      "auto|off"]),
]


class InvalidSpecs(unittest.TestCase):
    def test_invalid_specs(self):
        self.assertGreaterEqual(len(INVALID), 30)
        d = tmpdir("specs-")
        for name, ext, text, args, expected in INVALID:
            with self.subTest(name):
                path = write(d, "bad." + ext, text)
                r = ztrain("validate", path, *args, env={"ZT_GPU_COUNT": "0"})
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn("nothing was started", r.stderr)
                self.assertEqual(r.stdout, "")
                for e in expected:
                    self.assertIn(e, r.stderr)
                if not args:
                    self.assertIn(path, r.stderr)

    def test_run_refuses_invalid_and_starts_nothing(self):
        d = tmpdir("specs-run-")
        path = write(d, "bad.json", vertex(pool(replicaCount=2)))
        job_dir = os.path.join(d, "job")
        r = ztrain("run", path, "--job-dir", job_dir)
        self.assertEqual(r.returncode, 2)
        self.assertIn("workerPoolSpecs[0].replicaCount = 2", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(job_dir, "job.json")))

    def test_bad_knob_in_environment(self):
        # A knob with a value it does not take stops ztrain before anything starts,
        # naming the variable and the value; it used to fall back to the default silently.
        d = tmpdir("specs-knob-")
        path = write(d, "ok.json", vertex(pool(containerSpec={"imageUri": "x", "command": ["true"]})))
        job_dir = os.path.join(d, "job")
        for var, value, why in (("HOROVOD_FUSION_THRESHOLD", "64MB", "not a whole number"),
                                ("ZT_BUCKET_CAP_MB", "lots", "not a number"),
                                ("ZT_HEARTBEAT_MS", "-5", "not a whole number"),
                                ("ZT_DATA_IPC", "maybe", "auto|off")):
            with self.subTest(var):
                for cmd in (["run", path, "--job-dir", job_dir], ["validate", path]):
                    r = ztrain(*cmd, env={var: value})
                    self.assertEqual(r.returncode, 2, r.stderr)
                    self.assertIn("%s=%s: " % (var, value), r.stderr)
                    self.assertIn(why, r.stderr)
                    self.assertFalse(os.path.exists(os.path.join(job_dir, "job.json")))
        # Each role binary refuses it too, before any work.
        import subprocess
        from ztest import BIN
        for b in ("ztrain-reducer", "ztrain-paramserver", "ztrain-worker", "ztrain-evaluator"):
            with self.subTest(b):
                r = subprocess.run([os.path.join(BIN, b)], capture_output=True, text=True, timeout=30,
                                   env=dict(os.environ, HOROVOD_CYCLE_TIME="5ms"))
                self.assertNotEqual(r.returncode, 0)
                self.assertIn("HOROVOD_CYCLE_TIME=5ms: not a number", r.stderr + r.stdout)
        # Good values pass.
        r = ztrain("validate", path, env={"HOROVOD_FUSION_THRESHOLD": "67108864",
                                          "ZT_BUCKET_CAP_MB": "25.5", "ZT_SHM": "OFF"})
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_unknown_fields_are_errors(self):
        # A typo used to be a warning, and the pool silently ran 1 replica, not 2.
        d = tmpdir("specs-unknown-")
        p = pool()
        del p["replicaCount"]
        p["replicaCont"] = 2
        path = write(d, "typo.json", vertex(pool(), p, colour="blue"))
        r = ztrain("validate", path)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertRegex(r.stderr, r"typo.json:\d+:\d+: error: workerPoolSpecs\[1\].replicaCont: unknown field; "
                                   r'did you mean "replicaCount"\?')
        self.assertIn("error: colour: unknown field (known here: workerPoolSpecs, ", r.stderr)
        self.assertIn("--allow-unknown-fields", r.stderr)
        self.assertIn("nothing was started", r.stderr)
        y = write(d, "typo.yaml", "trainingInput:\n  scaleTier: BASIC\n  jobdir: /tmp/x\n")
        r = ztrain("validate", y)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn('typo.yaml:3:3: error: trainingInput.jobdir: unknown field; did you mean "jobDir"?', r.stderr)
        # A spec written for a newer service: warnings, and it runs.
        r = ztrain("validate", path, "--allow-unknown-fields")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("warning: workerPoolSpecs[1].replicaCont: unknown field, ignored", r.stderr)
        r = ztrain("validate", y, "--allow-unknown-fields")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_scheduling_strategy_is_said_not_ignored(self):
        d = tmpdir("specs-spot-")
        path = write(d, "spot.json", vertex(pool(), scheduling={"strategy": "SPOT", "maxWaitDuration": "3600s"}))
        r = ztrain("validate", path)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stderr, r'warning: scheduling\.strategy = "SPOT": .*handled as a preemption')
        self.assertRegex(r.stderr, r'warning: scheduling\.maxWaitDuration = "3600s": not acted on')
        self.assertIn("retries on, spot;", r.stdout)
        # on Slurm: the preemptible QOS the user names goes on every component's line
        r = ztrain("validate", path, "--backend", "slurm", "--qos", "spot-qos", "--partition", "spot")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(" --partition=spot --qos=spot-qos\n", r.stdout)
        r = ztrain("validate", path, "--backend", "slurm", "--qos", "spot\n#SBATCH --uid=0")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--qos: 'spot\n#SBATCH --uid=0': Slurm's names are letters, digits", r.stderr)
        bad = write(d, "cheap.json", vertex(pool(), scheduling={"strategy": "CHEAP"}))
        r = ztrain("validate", bad)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertRegex(r.stderr, r'error: scheduling\.strategy = "CHEAP": expected one of .*SPOT')

    def test_cpu_only_accepts_missing_gpus(self):
        d = tmpdir("specs-cpu-")
        path = write(d, "gpu.json", vertex(pool(machineSpec={
            "acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": 2})))
        r = ztrain("validate", path, "--cpu-only", env={"ZT_GPU_COUNT": "0"})
        self.assertEqual(r.returncode, 0, r.stderr)
        r = ztrain("validate", path, *GPU_OK, env={"ZT_GPU_COUNT": "2"})
        self.assertEqual(r.returncode, 0, r.stderr)
        if not HAVE_CUDA:
            r = ztrain("validate", path, env={"ZT_GPU_COUNT": "2"})
            self.assertEqual(r.returncode, 2)
            self.assertIn("this ztrain was built without CUDA", r.stderr)


def plan(path, *args, env=None):
    r = ztrain("validate", "--json", path, *args, env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def counts(p):
    return [x["replicaCount"] if x else 0 for x in p["pools"]]


class ValidSpecs(unittest.TestCase):
    def setUp(self):
        self.d = tmpdir("specs-ok-")

    def test_scale_tiers(self):
        want = {"BASIC": ([1, 0, 0, 0], "n1-standard-4", None),
                "STANDARD_1": ([1, 4, 3, 0], "n1-highcpu-8", "n1-standard-4"),
                "PREMIUM_1": ([1, 19, 11, 0], "n1-highcpu-16", "n1-highmem-8"),
                "BASIC_GPU": ([1, 0, 0, 0], "standard_gpu", None)}
        for tier, (c, master, ps) in want.items():
            with self.subTest(tier):
                path = write(self.d, tier + ".yaml", "trainingInput:\n  scaleTier: %s\n" % tier)
                p = plan(path, *GPU_OK, env={"ZT_GPU_COUNT": "1"})
                self.assertEqual(p["scaleTier"], tier)
                self.assertEqual(counts(p), c)
                self.assertEqual(p["pools"][0]["machineType"], master)
                if ps:
                    self.assertEqual(p["pools"][2]["machineType"], ps)
                    self.assertEqual(p["pools"][2]["role"], "ztrain-paramserver")
                if tier == "BASIC_GPU":
                    self.assertEqual(p["pools"][0]["acceleratorType"], "NVIDIA_TESLA_K80")
                    self.assertEqual(p["pools"][0]["acceleratorCount"], 1)
        path = write(self.d, "custom.yaml", """trainingInput:
  scaleTier: CUSTOM
  masterType: n1-highcpu-16
  masterConfig:
    acceleratorConfig:
      count: 4
      type: NVIDIA_TESLA_T4
  workerCount: 9
  workerType: n1-highcpu-16
  workerConfig:
    acceleratorConfig:
      count: 4
      type: NVIDIA_TESLA_T4
  parameterServerCount: 3
  parameterServerType: n1-highmem-8
  evaluatorCount: 1
  evaluatorType: n1-standard-4
  pythonModule: trainer.task
  args: ["--epochs", "3"]
""")
        p = plan(path, "--cpu-only")
        self.assertEqual(counts(p), [1, 9, 3, 1])
        self.assertEqual(p["pools"][1]["acceleratorCount"], 4)
        self.assertEqual(p["pools"][0]["command"], ["python3", "-m", "trainer.task", "--epochs", "3"])
        # AI Platform runs the package on every replica, evaluators included.
        self.assertEqual(p["pools"][3]["command"][:3], ["python3", "-m", "trainer.task"])
        self.assertEqual(p["tfConfigChief"], "master")  # AI Platform default before 2.1

    def test_legacy_gpu_machine_types(self):
        path = write(self.d, "k80.yaml", "trainingInput:\n  scaleTier: CUSTOM\n"
                     "  masterType: complex_model_m_gpu\n  workerCount: 9\n"
                     "  workerType: complex_model_m_gpu\n  parameterServerCount: 3\n"
                     "  parameterServerType: large_model\n")
        p = plan(path, "--cpu-only")
        self.assertEqual(counts(p), [1, 9, 3, 0])
        self.assertEqual(p["pools"][1]["acceleratorType"], "NVIDIA_TESLA_K80")
        self.assertEqual(p["pools"][1]["acceleratorCount"], 4)
        self.assertEqual(p["pools"][2]["computeType"], "n1-highmem-8")

    def test_vertex_accepted_combinations(self):
        path = write(self.d, "v100.json", vertex(
            pool(machineSpec={"machineType": "n1-highmem-96", "acceleratorType": "NVIDIA_TESLA_V100",
                              "acceleratorCount": 8}),
            pool(machineSpec={"machineType": "a2-highgpu-4g", "acceleratorType": "NVIDIA_TESLA_A100",
                              "acceleratorCount": 4}, replicaCount="2"),
            pool(containerSpec={"imageUri":
                 "us-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest"},
                 machineSpec={"machineType": "n1-highcpu-16"}, replicaCount=4),
            {}))
        p = plan(path, "--cpu-only")
        self.assertEqual(counts(p), [1, 2, 4, 0])
        self.assertEqual(p["pools"][2]["role"], "ztrain-reducer")
        self.assertEqual(p["pools"][0]["acceleratorCount"], 8)

    def test_elastic_pool_is_planned(self):
        path = write(self.d, "elastic.json", vertex(pool(), pool(replicaCount=2, elasticPolicy={
            "minReplicaCount": 1, "maxReplicaCount": "3"}), RS))
        p = plan(path)
        self.assertEqual(p["pools"][1]["elasticPolicy"], {"minReplicaCount": 1, "maxReplicaCount": 3})
        self.assertNotIn("elasticPolicy", p["pools"][0])
        r = ztrain("validate", path)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("elastic: 1 to 3 replicas", r.stdout)
        self.assertNotIn("elasticPolicy", r.stderr)  # acted on: no warning

    def test_overrides_win_and_user_args(self):
        path = write(self.d, "o.json", json.dumps({"displayName": "wrapped", "jobSpec": json.loads(
            vertex(pool(), pool(replicaCount=2)))}))
        p = plan(path, "--worker-pool-spec=machine-type=n1-standard-8",
                 "--worker-pool-spec=replica-count=5,machine-type=n1-highcpu-16",
                 "--", "--learning_rate=0.1")
        self.assertEqual(p["format"], "CustomJob")
        self.assertEqual(p["displayName"], "wrapped")
        self.assertEqual(counts(p), [1, 5, 0, 0])
        self.assertEqual(p["pools"][0]["machineType"], "n1-standard-8")
        self.assertEqual(p["pools"][1]["machineType"], "n1-highcpu-16")
        self.assertEqual(p["pools"][1]["command"], ["ztrain-worker", "--learning_rate=0.1"])
        y = write(self.d, "o.yaml", "trainingInput:\n  scaleTier: STANDARD_1\n")
        p = plan(y, "--scale-tier", "custom", "--master-machine-type", "n1-standard-8",
                 "--worker-count=2", "--worker-machine-type=n1-standard-4")
        self.assertEqual(p["scaleTier"], "CUSTOM")
        self.assertEqual(counts(p), [1, 2, 0, 0])

    def test_user_args_reach_which_pools(self):
        pools = [pool(), pool(), pool(containerSpec={"imageUri": "x", "command": ["ps-program"]}),
                 pool(containerSpec={"imageUri": "ztrain-evaluator"})]
        path = write(self.d, "args.json", vertex(*pools))
        p = plan(path, "--", "--lr=0.1")
        self.assertEqual([("--lr=0.1" in (x["command"] if x else [])) for x in p["pools"]],
                         [True, True, True, False])  # user program of pool 2: yes; evaluator role: no
        p = plan(path, "--trial", "3", "--", "--lr=0.1")  # a trial's parameters: the same pools
        self.assertEqual([("--lr=0.1" in (x["command"] if x else [])) for x in p["pools"]],
                         [True, True, True, False])

    def test_flags_only_job(self):
        r = ztrain("validate", "--json", "--worker-pool-spec=machine-type=n1-standard-4,"
                   "replica-count=1,container-image-uri=ztrain-worker",
                   "--worker-pool-spec=machine-type=n1-standard-4,replica-count=3,"
                   "container-image-uri=ztrain-worker")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(counts(json.loads(r.stdout)), [1, 3, 0, 0])

    def test_python_package_spec(self):
        pkg = os.path.join(self.d, "pkg")
        os.makedirs(pkg)
        path = write(self.d, "py.json", vertex(without(POOL0, "containerSpec") | {
            "pythonPackageSpec": {"executorImageUri": "us-docker.pkg.dev/x/pytorch:1",
                                  "packageUris": ["file://" + pkg], "pythonModule": "trainer.task",
                                  "args": ["--epochs=2"], "env": [{"name": "A", "value": "1"}]}}))
        p = plan(path)
        self.assertEqual(p["pools"][0]["command"], ["python3", "-m", "trainer.task", "--epochs=2"])
        self.assertEqual(p["pools"][0]["pythonPath"], pkg)
        self.assertEqual(p["pools"][0]["env"], {"A": "1"})

    def test_examples_validate(self):
        # from the repository's root, as the README runs them (their local
        # paths, such as a SageMaker request's file://examples, are from there)
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
        ex = os.path.join(root, "examples")
        for name in sorted(os.listdir(ex)):
            if name.endswith((".json", ".yaml")) and "study" not in name:  # studies: test_tune
                with self.subTest(name):
                    r = subprocess.run([os.path.join(BIN, "ztrain"), "validate", os.path.join(ex, name), "--cpu-only"],
                                       capture_output=True, text=True, cwd=root, timeout=60)
                    self.assertEqual(r.returncode, 0, r.stderr)


class Binaries(unittest.TestCase):
    """Every binary: --version, --help with its own flags first and only the
    knobs that apply to it, and an unknown flag is an error that starts
    nothing (ztrain-worker used to warn, train for 43 s and leave 22 MB)."""

    BINARIES = ("ztrain", "ztrain-coordinator", "ztrain-worker", "ztrain-paramserver", "ztrain-reducer",
                "ztrain-evaluator")
    # a knob that applies, and one that does not
    KNOBS = {"ztrain": ("ZT_MAX_RESTARTS", "ZT_AR_PIECE_BYTES"),
             "ztrain-coordinator": ("ZT_STOP_GRACE_MS", "ZT_SPIN_US"),
             "ztrain-worker": ("HOROVOD_FUSION_THRESHOLD", "ZT_MAX_RESTARTS"),
             "ztrain-paramserver": ("ZT_PS_CHUNK_BYTES", "HOROVOD_FUSION_THRESHOLD"),
             "ztrain-reducer": ("ZT_COLLECTIVE_WARN_MS", "ZT_PS_TIMEOUT_MS"),
             "ztrain-evaluator": ("ZT_DATA_DIR", "ZT_SHM")}
    FLAG = {"ztrain": "--job-dir", "ztrain-coordinator": "--job-dir", "ztrain-worker": "--learning_rate",
            "ztrain-paramserver": "--checkpoint-dir", "ztrain-reducer": "--bind",
            "ztrain-evaluator": "--test-examples"}

    def run_bin(self, name, *args):
        cwd = tmpdir("bin-")
        r = subprocess.run([os.path.join(BIN, name), *args], capture_output=True, text=True, timeout=30,
                           cwd=cwd, env=dict(os.environ, ZT_DATA_DIR=cwd))
        return r, os.listdir(cwd)

    def test_version(self):
        for b in self.BINARIES:
            with self.subTest(b):
                r, left = self.run_bin(b, "--version")
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertRegex(r.stdout, r"^ztrain[-a-z]* \d+\.\d+\.\d+")
                self.assertEqual(left, [])

    def test_unknown_flags_are_errors(self):
        for b in self.BINARIES:
            for bad in ("--no-such-flag", "--no-such-flag=1"):
                with self.subTest(b=b, bad=bad):
                    r, left = self.run_bin(b, *(["run"] if b == "ztrain" else []), bad)
                    self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                    self.assertIn("unknown option --no-such-flag", r.stderr)
                    self.assertEqual(left, [])
        r, _ = self.run_bin("ztrain-worker", "--epochs=lots")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--epochs=lots: expected a number", r.stderr)
        r, _ = self.run_bin("ztrain-worker", "--epochs")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--epochs needs a value", r.stderr)

    def test_help_own_flags_then_its_knobs(self):
        for b in self.BINARIES:
            with self.subTest(b):
                r, _ = self.run_bin(b, "--help")
                self.assertEqual(r.returncode, 0, r.stderr)
                out = r.stdout
                self.assertIn(self.FLAG[b], out)
                self.assertIn("Environment", out)
                self.assertLess(out.index(self.FLAG[b]), out.index("Environment"))
                yes, no = self.KNOBS[b]
                self.assertIn(yes, out)
                self.assertNotIn(no, out)


if __name__ == "__main__":
    ztest.main()
