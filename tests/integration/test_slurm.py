"""ztrain on a real Slurm cluster (scripts/slurm_cluster.py): slurmctld,
slurmd and munge from Debian on network-namespace hosts, each with its own
name, /dev/shm and /tmp, nothing added to this machine's own network, and
everything gone after `down`.

- SlurmCluster: the cluster itself, ordinary and heterogeneous jobs.
- Walkthrough: the Slurm guide's walkthrough, line by line as written.
- SlurmBackend: `ztrain run --backend slurm` inside an allocation: the
  environment names the nodes, the async and sync examples across hosts,
  a worker killed and restarted in place, scancel.
- SlurmSubmit: from a submit host outside any allocation: follow, detach,
  status, cancel, Ctrl-C, the pending reason, jobs that can never start,
  a study whose trials are Slurm jobs.
- SlurmLostNode: a node lost under a running job, with and without a job
  retry left.

Skips (77) without root or the packages."""
import atexit
import json
import os
import re
import shutil
import signal
import subprocess
import time
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
import slurm_cluster  # noqa: E402

import ztest  # noqa: E402
from ztest import BIN, alive, load_job, tmpdir as _tmpdir  # noqa: E402


_MADE = []  # folders made outside the test tree, removed at exit


def tmpdir(prefix):
    """A folder every test host sees: each has its own /tmp."""
    d = _tmpdir(prefix)
    if os.path.realpath(d).startswith("/tmp/"):
        os.rmdir(d)
        d = tempfile.mkdtemp(prefix=prefix, dir="/var/tmp")
        _MADE.append(d)
    return d


atexit.register(lambda: [shutil.rmtree(d, ignore_errors=True) for d in _MADE])


# The checkout and the binaries: every host sees them, even when they are
# under /tmp (which each host has its own of).
SHARED = [os.path.join(HERE, "..", ".."), os.path.abspath(BIN)]


def own_addresses():
    return subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True).stdout


class SlurmCluster(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.before = own_addresses()
        cls.c = slurm_cluster.Cluster(tmpdir("slurm-"), nodes=3, shared=SHARED)
        cls.c.up()

    @classmethod
    def tearDownClass(cls):
        cls.c.down()

    def test_steps_land_on_every_host(self):
        r = self.c.run("n1", ["srun", "-N3", "-l", "hostname"])
        self.assertEqual(sorted(l.split(": ")[1] for l in r.stdout.split("\n") if l), ["n1", "n2", "n3"])

    def test_heterogeneous_job(self):
        script = os.path.join(self.c.dir, "het.sh")
        with open(script, "w") as f:
            f.write("#!/bin/sh\n#SBATCH -N1 -n1 -c1 --mem=100\n#SBATCH hetjob\n#SBATCH -N2 -n2 -c1 --mem=100\n"
                    "srun --het-group=0 sh -c 'echo comp0 $(hostname)' &\n"
                    "srun --het-group=1 sh -c 'echo comp1 $(hostname)' &\nwait\n")
        out = os.path.join(self.c.dir, "het.out")
        self.c.run("n1", ["sbatch", "--wait", "--chdir", self.c.dir, "-o", out, script], timeout=60)
        lines = sorted(open(out).read().split())
        comps = sorted(open(out).read().strip().split("\n"))
        self.assertEqual(len(comps), 3, lines)
        self.assertEqual(sum(l.startswith("comp1") for l in comps), 2)
        self.assertEqual(len({l.split()[1] for l in comps if l.startswith("comp1")}), 2)  # two hosts

    def test_hosts_have_their_own_shm_and_tmp(self):
        self.c.run("n1", ["srun", "-w", "n1", "sh", "-c", "touch /dev/shm/zt-probe /tmp/zt-probe"])
        r = self.c.run("n1", ["srun", "-w", "n2", "sh", "-c", "ls /dev/shm /tmp"])
        self.assertNotIn("zt-probe", r.stdout)
        r = self.c.run("n1", ["srun", "-w", "n1", "sh", "-c", "ls /dev/shm /tmp"])
        self.assertEqual(r.stdout.count("zt-probe"), 2)
        self.assertFalse(os.path.exists("/dev/shm/zt-probe"))  # not this machine's either

    def test_nothing_on_this_machines_network(self):
        self.assertEqual(own_addresses(), self.before)

    def test_down_removes_everything(self):
        c = slurm_cluster.Cluster(tmpdir("slurm-down-"), nodes=2)
        c.prefix = self.c.prefix[:-1] + str((int(self.c.prefix[-1]) + 5) % 10)  # another cluster beside
        c.subnet = "10.79.%d" % ((int(self.c.subnet.split(".")[2]) + 1) % 250)
        c.port = self.c.port + 2
        c.up()
        pids = [p for h in c.hosts for p in c.pids(h)]
        self.assertGreaterEqual(len(pids), 3)
        c.down()
        names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        self.assertNotIn(c.prefix + "-", names)
        self.assertFalse([p for p in pids if alive(p)])

    def test_cluster_of_a_killed_owner_is_swept(self):
        # a run killed with SIGKILL never reaches its teardown: its cluster
        # (namespaces, daemons) is removed by the next one that starts
        prefix = self.c.prefix[:-1] + str((int(self.c.prefix[-1]) + 7) % 10)
        code = ("import sys, time; sys.path.insert(0, %r); import slurm_cluster as s; "
                "c = s.Cluster(%r, nodes=1); c.prefix = %r; c.subnet = '10.79.%d'; c.port = %d; c.up(); "
                "print('up', flush=True); time.sleep(600)"
                % (os.path.dirname(slurm_cluster.__file__), tmpdir("slurm-orphan-"), prefix,
                   (int(self.c.subnet.split(".")[2]) + 2) % 250, self.c.port + 4))
        owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        self.addCleanup(owner.kill)
        self.assertEqual(owner.stdout.readline().strip(), "up")
        spaces = ["%s-%s" % (prefix, h) for h in ("br", "ctl", "n1")]
        pids = [int(p) for n in spaces for p in subprocess.run(["ip", "netns", "pids", n], capture_output=True,
                                                                text=True).stdout.split()]
        self.assertGreaterEqual(len(pids), 2)  # slurmctld (and munged), slurmd
        owner.kill()
        owner.wait(timeout=30)
        self.assertEqual(slurm_cluster.sweep_stale(), [prefix])  # ours (self.c) stays: its owner lives
        names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        self.assertNotIn(prefix + "-", names)
        self.assertIn(self.c.prefix + "-", names)
        wait_gone = time.monotonic() + 10
        while [p for p in pids if alive(p)] and time.monotonic() < wait_gone:
            time.sleep(0.05)
        self.assertFalse([p for p in pids if alive(p)])


DUMP = ('{ env; echo "HOSTNAME_IS=$(hostname)"; } > "$ZT_JOB_DIR/.env-$ZT_POOL-$ZT_INDEX"; '
        'mv "$ZT_JOB_DIR/.env-$ZT_POOL-$ZT_INDEX" "$ZT_JOB_DIR/env-$ZT_POOL-$ZT_INDEX.txt"; ')
WAIT = ('for f in 1-0 1-1 2-0; do i=0; while [ ! -e "$ZT_JOB_DIR/env-$f.txt" ] && [ $i -lt 600 ]; do '
        'sleep 0.05; i=$((i+1)); done; done; ')


def sh_pool(script, n):
    return {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": n,
            "containerSpec": {"imageUri": "local", "command": ["sh", "-c", script]}}


class BatchJob:
    """A submitted batch job, waited for as a process is: its end polled in
    scontrol every 0.2 s (sbatch --wait sleeps 2, 8, then 32 s between
    looks), its exit code Slurm's."""

    FINAL = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED")

    def __init__(self, cluster, parsable):
        self.c, self.id, self.returncode = cluster, parsable.strip().split(";")[0], None

    def poll(self):
        if self.returncode is None:
            text = self.c.run("n1", ["scontrol", "-o", "show", "job", self.id], check=False).stdout
            state = re.search(r"\bJobState=(\S+)", text)
            code = re.search(r"\bExitCode=(\d+):(\d+)", text)
            if state and state.group(1) in self.FINAL and code:
                self.returncode = int(code.group(1)) or (128 + int(code.group(2)) if int(code.group(2)) else 0)
        return self.returncode

    def wait(self, timeout):
        deadline = time.monotonic() + timeout
        while self.poll() is None:
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired("slurm job %s" % self.id, timeout)
            time.sleep(0.2)
        return self.returncode

    def kill(self):
        self.c.run("n1", ["scancel", self.id], check=False)


class SlurmBackend(unittest.TestCase):
    """`ztrain run --backend slurm` inside a heterogeneous allocation (one
    component per pool): every replica a job step on its node, and the
    environment names the nodes."""

    @classmethod
    def setUpClass(cls):
        cls.c = slurm_cluster.Cluster(tmpdir("slurm-backend-"), nodes=5, shared=SHARED)  # a node per component
        cls.c.up()

    @classmethod
    def tearDownClass(cls):
        cls.c.down()

    def submit(self, pools, components=(), header=None, scheduling=None, doc=None, grace_ms=3000):
        """sbatch under header (or these components), followed in the
        background: (BatchJob, job dir, batch output). doc: the job file's
        whole document instead of a CustomJob of these pools; grace_ms: the
        coordinator's ZT_STOP_GRACE_MS."""
        d = tempfile.mkdtemp(prefix="job-", dir=self.c.dir)
        spec = os.path.join(d, "job.json")
        with open(spec, "w") as f:
            json.dump(doc or {"displayName": "on-slurm", "jobSpec": dict(
                {"workerPoolSpecs": pools}, **({"scheduling": scheduling} if scheduling else {}))}, f)
        job_dir = os.path.join(d, "job")
        script = os.path.join(d, "batch.sh")
        with open(script, "w") as f:
            f.write("#!/bin/sh\n" + (header or "#SBATCH hetjob\n".join("#SBATCH %s\n" % c for c in components)) +
                    "exec env ZT_HEARTBEAT_MS=300 ZT_STOP_GRACE_MS=%d %s run %s --backend slurm --job-dir %s\n"
                    % (grace_ms, os.path.join(os.path.abspath(BIN), "ztrain"), spec, job_dir))
        out = os.path.join(d, "batch.out")
        p = BatchJob(self.c, self.c.run("n1", ["sbatch", "--parsable", "--chdir", d, "-o", out, script]).stdout)
        self.addCleanup(lambda: p.poll() is None and p.kill())
        return p, job_dir, out

    def run_job(self, pools, components=(), header=None, scheduling=None, doc=None):
        """The job to its end: (its exit status, batch output, job dir)."""
        p, job_dir, out = self.submit(pools, components, header, scheduling, doc)
        rc = p.wait(timeout=180)
        with open(out) if os.path.exists(out) else open(os.devnull) as f:
            return rc, f.read(), job_dir

    def run_as_validated(self, d, doc):
        """doc (a whole job file) under the allocation `ztrain validate
        --backend slurm` prints for it, to its end: as run_job."""
        spec = os.path.join(d, "validate.json")
        with open(spec, "w") as f:
            json.dump(doc, f)
        r = subprocess.run([os.path.join(BIN, "ztrain"), "validate", spec, "--backend", "slurm",
                            "--partition", "main"], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        return self.run_job(None, header=r.stdout[r.stdout.index("#SBATCH --job-name"):], doc=doc)

    def test_environment_names_the_nodes(self):
        pools = [sh_pool(DUMP + WAIT, 1), sh_pool(DUMP + "sleep 30", 2), sh_pool(DUMP + "sleep 30", 1)]
        # the allocation `ztrain validate --backend slurm` prints for the job
        spec = os.path.join(self.c.dir, "validate.json")
        with open(spec, "w") as f:
            json.dump({"displayName": "on-slurm", "jobSpec": {"workerPoolSpecs": pools}}, f)
        r = subprocess.run([os.path.join(BIN, "ztrain"), "validate", spec, "--backend", "slurm",
                            "--partition", "main"], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        header = r.stdout[r.stdout.index("#SBATCH --job-name"):]
        self.assertEqual(header.count("#SBATCH hetjob"), 2)  # three components
        self.assertIn("# workerpool1: 2 x n1-standard-4\n#SBATCH --ntasks=2 --cpus-per-task=4 "
                      "--mem-per-cpu=3840M --partition=main\n", header)
        rc, out, job_dir = self.run_job(pools, header=header)  # as printed
        self.assertEqual(rc, 0, out[-3000:])
        job = json.load(open(os.path.join(job_dir, "job.json")))
        self.assertEqual(job["state"], "SUCCEEDED", out[-3000:])
        envs = {}
        for name in ("0-0", "1-0", "1-1", "2-0"):
            with open(os.path.join(job_dir, "env-%s.txt" % name)) as f:
                envs[name] = dict(l.split("=", 1) for l in f.read().splitlines() if "=" in l)
        specs = [json.loads(e["CLUSTER_SPEC"])["cluster"] for e in envs.values()]
        self.assertTrue(all(s == specs[0] for s in specs), specs)  # every replica sees the same cluster
        for name, e in envs.items():
            pool, index = name.split("-")
            addr = specs[0]["workerpool" + pool][int(index)]
            host, port = addr.split(":")
            self.assertIn(host, ("n1", "n2", "n3", "n4", "n5"))
            self.assertEqual(e["HOSTNAME_IS"], host, name)  # it runs where the cluster says
            self.assertEqual(e["ZT_HOST"], host)
            self.assertTrue(1024 < int(port) < 65536)
            # the interface that holds the node's address there (its veth)
            iface = "%s-%sb" % (self.c.prefix, host)
            self.assertEqual(e["SM_NETWORK_INTERFACE_NAME"], iface, name)
            self.assertEqual(json.loads(e["SM_TRAINING_ENV"])["network_interface_name"], iface)
        self.assertNotEqual(envs["1-0"]["HOSTNAME_IS"], envs["1-1"]["HOSTNAME_IS"])  # one task per node
        self.assertEqual(envs["1-0"]["MASTER_ADDR"], envs["0-0"]["HOSTNAME_IS"])
        self.assertEqual(envs["1-0"]["GROUP_WORLD_SIZE"], str(len({envs[n]["HOSTNAME_IS"]
                                                                   for n in ("0-0", "1-0", "1-1")})))
        self.assertEqual(len(set(v for s in specs[0].values() for v in s)), 4)  # addresses distinct

    def test_sagemaker_mpi_across_hosts(self):
        """distribution mpi: the primary's mpirun starts algo-2's ranks on
        algo-2's node, through its `ztrain-mpi host` (no SSH)."""
        d = tmpdir("sm-mpi-")
        os.makedirs(os.path.join(d, "code"))
        with open(os.path.join(d, "code", "train.py"), "w") as f:
            f.write("import json, os, socket\nfrom mpi4py import MPI\nc = MPI.COMM_WORLD\n"
                    "rows = c.gather([c.Get_rank(), os.environ['SM_CURRENT_HOST'], socket.gethostname()], root=0)\n"
                    "total = c.allreduce(c.Get_rank() + 1)\n"
                    "if c.Get_rank() == 0:\n"
                    "    json.dump({'rows': rows, 'total': total}, open(os.environ['SM_MODEL_DIR'] + '/m.json', 'w'))\n")
        doc = {"TrainingJobName": "mpi-on-slurm",
               "AlgorithmSpecification": {"TrainingImage": "pytorch-training:2.1", "TrainingInputMode": "File"},
               "HyperParameters": {"sagemaker_program": "\"train.py\"", "sagemaker_submit_directory": json.dumps(
                   os.path.join(d, "code")), "sagemaker_mpi_enabled": "true",
                   "sagemaker_mpi_num_of_processes_per_host": "2"},
               "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 2},
               "Environment": {"PATH": "/usr/bin:/bin"},  # Debian's python3, which has mpi4py
               "OutputDataConfig": {"S3OutputPath": os.path.join(d, "out"), "CompressionType": "NONE"}}
        rc, out, job_dir = self.run_as_validated(d, doc)
        self.assertEqual(rc, 0, out[-3000:])
        with open(os.path.join(job_dir, "opt-ml", "algo-1", "model", "m.json")) as f:
            m = json.load(f)
        self.assertEqual(m["total"], 10)
        nodes = {h: {n for _, host, n in m["rows"] if host == h} for h in ("algo-1", "algo-2")}
        self.assertEqual([len(v) for v in nodes.values()], [1, 1], m)
        self.assertNotEqual(nodes["algo-1"], nodes["algo-2"])  # algo-2's ranks ran on algo-2's node
        self.assertEqual(sorted(r[0] for r in m["rows"]), [0, 1, 2, 3])

    def test_sagemaker_toolkit_across_hosts(self):
        """SageMaker's training toolkit as the ContainerEntrypoint, its hosts
        on two nodes: on each, algo-1 and algo-2 resolve to the nodes their
        replicas run on, and the toolkit runs the script there."""
        import toolvenv
        try:
            entry = os.path.join(os.path.dirname(toolvenv.python(toolvenv.TOOLKIT, "sagemaker-toolkit-venv")),
                                 "train")
        except SystemExit:
            self.skipTest("PyPI cannot be reached for " + " ".join(toolvenv.TOOLKIT))
        import test_sagemaker
        d = tmpdir("sm-toolkit-")
        os.makedirs(os.path.join(d, "code"))
        os.makedirs(os.path.join(d, "data"))
        with open(os.path.join(d, "code", "train.py"), "w") as f:
            f.write(test_sagemaker.TOOLKIT_SCRIPT)
        for i in range(4):
            with open(os.path.join(d, "data", "part-%d.csv" % i), "w") as f:
                f.write("%d\n" % i)
        doc = {"TrainingJobName": "toolkit-on-slurm",
               "AlgorithmSpecification": {"TrainingImage": "pytorch-training:2.1", "TrainingInputMode": "File",
                                          "ContainerEntrypoint": [entry]},
               "HyperParameters": {"epochs": "2", "lr": "0.5", "sagemaker_program": "\"train.py\"",
                                   "sagemaker_submit_directory": json.dumps(os.path.join(d, "code"))},
               "InputDataConfig": [{"ChannelName": "training", "DataSource": {"S3DataSource": {
                   "S3Uri": os.path.join(d, "data"), "S3DataDistributionType": "ShardedByS3Key"}}}],
               "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 2},
               "OutputDataConfig": {"S3OutputPath": os.path.join(d, "out"), "CompressionType": "NONE"}}
        rc, out, job_dir = self.run_as_validated(d, doc)
        self.assertEqual(rc, 0, out[-3000:])
        recs = {}
        for h in ("algo-1", "algo-2"):
            base = os.path.join(job_dir, "opt-ml", h)
            with open(os.path.join(base, "output", "data", "seen.json")) as f:
                recs[h] = json.load(f)
            self.assertTrue(os.path.exists(os.path.join(base, "output", "success")), h)
        self.assertNotEqual(recs["algo-1"]["node"], recs["algo-2"]["node"])  # two nodes
        self.assertNotEqual(recs["algo-1"]["address"], recs["algo-2"]["address"])
        for h, rec in recs.items():  # on each node, each name is where its host runs
            self.assertEqual(rec["resolved"], {k: recs[k]["address"] for k in recs}, h)
            self.assertEqual(rec["args"], ["--epochs", "2", "--lr", "0.5"])
        self.assertEqual(sorted(recs["algo-1"]["files"] + recs["algo-2"]["files"]),
                         ["part-%d.csv" % i for i in range(4)])

    def test_processing_example_across_hosts(self):
        """The SageMaker Processing example on the cluster's nodes: each
        host's share of the files at /opt/ml/processing/input/data on its
        node, its resourceconfig.json naming it and every host, and every
        host's results in the uploaded output."""
        import test_processing
        d = tmpdir("processing-slurm-")
        out = os.path.join(d, "features")
        doc = test_processing.example(out)
        doc["ProcessingResources"]["ClusterConfig"]["InstanceType"] = "ml.m5.large"  # the nodes' size
        rc, text, job_dir = self.run_as_validated(d, doc)
        self.assertEqual(rc, 0, text[-3000:])
        j = load_job(job_dir)
        self.assertEqual(j["state"], "SUCCEEDED")
        self.assertGreater(len({r["host"] for r in j["replicas"]}), 1, j["replicas"])  # more than one node
        hosts = ["algo-1", "algo-2", "algo-3"]
        recs = {h: test_processing.load(os.path.join(out, h + ".json")) for h in hosts}
        for h in hosts:
            self.assertEqual((recs[h]["host"], recs[h]["hosts"]), (h, hosts))
        files = sorted(f for h in hosts for f in recs[h]["files"])
        self.assertEqual(files, sorted(os.listdir(test_processing.DATA)))
        self.assertEqual(sorted(os.listdir(out)), sorted([h + ".json" for h in hosts] + [f[:-3] + ".csv" for f in files]))

    def test_async_example_across_hosts(self):
        root = os.path.join(HERE, "..", "..")
        ex = json.load(open(os.path.join(root, "examples", "fashion-mnist-async.json")))
        pools = ex["jobSpec"]["workerPoolSpecs"]
        rc, out, job_dir = self.run_job(pools, ["-n1 -c1 --mem=100", "-N1 -n2 -c1 --mem=100",
                                                "-N1 -n2 -c1 --mem=100", "-n1 -c1 --mem=100"])
        self.assertEqual(rc, 0, out[-3000:])
        job = json.load(open(os.path.join(job_dir, "job.json")))
        self.assertEqual(job["state"], "SUCCEEDED", out[-3000:])
        self.assertGreaterEqual(job["metrics"]["workerpool0-0"]["accuracy"]["value"], 0.85)
        hosts = {r["name"]: r["host"] for r in job["replicas"]}
        self.assertEqual(len(set(hosts.values())), 4, hosts)  # one host per pool
        for name, host in hosts.items():
            self.assertIn("%s: started pid" % name, out)
            self.assertRegex(out, r"%s: started pid \d+ on %s" % (name, host))
        self.assertTrue(any(e["name"] == "eval_accuracy" for e in job["evaluations"]))  # across hosts

    def test_worker_killed_restarts_in_place(self):
        root = os.path.join(HERE, "..", "..")
        ex = json.load(open(os.path.join(root, "examples", "fashion-mnist-async.json")))
        pools = ex["jobSpec"]["workerPoolSpecs"][:3]
        for p in pools[:2]:
            p["containerSpec"]["args"] = [a for a in p["containerSpec"]["args"]
                                          if not a.startswith("--epochs")] + ["--epochs=2"]
        p, job_dir, out = self.submit(pools, ["-n1 -c1 --mem=100", "-N1 -n2 -c1 --mem=100",
                                              "-N1 -n2 -c1 --mem=100"])
        deadline = time.monotonic() + 120
        victim = None
        while victim is None and time.monotonic() < deadline:
            try:
                job = json.load(open(os.path.join(job_dir, "job.json")))
            except (OSError, ValueError):
                job = {}
            rep = [r for r in job.get("replicas", []) if r["name"] == "workerpool1-0"]
            if job.get("state") == "RUNNING" and rep:
                for pid in self.c.pids(rep[0]["host"]):
                    try:
                        env = open("/proc/%d/environ" % pid, "rb").read().split(b"\0")
                        cmd = open("/proc/%d/cmdline" % pid, "rb").read()
                    except OSError:
                        continue
                    if b"ztrain-worker" in cmd and b"ZT_POOL=1" in env and b"ZT_INDEX=0" in env \
                            and b"srun" not in cmd.split(b"\0")[0]:
                        victim = (pid, rep[0]["host"])
            time.sleep(0.2)
        self.assertIsNotNone(victim, "workerpool1-0 never ran")
        time.sleep(1)
        os.kill(victim[0], signal.SIGKILL)  # on its node
        p.wait(timeout=240)
        job = json.load(open(os.path.join(job_dir, "job.json")))
        text = open(out).read()
        self.assertEqual(job["state"], "SUCCEEDED", text[-3000:])
        rep = [r for r in job["replicas"] if r["name"] == "workerpool1-0"][0]
        self.assertEqual(rep["restarts"], 1, text[-3000:])
        self.assertEqual(rep["host"], victim[1])  # in place: the same node
        self.assertRegex(text, r"workerpool1-0: started pid \d+ on %s" % victim[1])

    def test_scancel_cancels_and_leaves_nothing(self):
        # a grace of 10 s: under the busy suite srun has taken 3.3 s to
        # report its cancelled step's end, past the usual 3 s
        p, job_dir, out = self.submit([sh_pool("sleep 300", 1), sh_pool("sleep 300", 2)],
                                      ["-n1 -c1 --mem=100", "-N2 -n2 --ntasks-per-node=1 -c1 --mem=100"],
                                      grace_ms=10000)
        deadline = time.monotonic() + 60
        job = {}
        while job.get("state") != "RUNNING" and time.monotonic() < deadline:
            try:
                job = json.load(open(os.path.join(job_dir, "job.json")))
            except (OSError, ValueError):
                pass
            time.sleep(0.2)
        self.assertEqual(job.get("state"), "RUNNING")
        hosts = {r["host"] for r in job["replicas"]}
        ids = self.c.run("n1", ["squeue", "-h", "-o", "%A"]).stdout.split()
        self.assertTrue(ids)
        self.c.run("n1", ["scancel", *sorted(set(ids))])
        p.wait(timeout=120)
        job = wait_job(job_dir, lambda j: j.get("state") == "CANCELLED", 40, "CANCELLED")
        # the steps' SIGTERM and the coordinator's are one stop: the grace holds, nobody is SIGKILLed
        with open(out) as f:
            text = f.read()
        self.assertNotIn("killing every replica now", text)
        self.assertNotIn("did not stop within the grace period", text)
        # nothing of the job on any of its hosts: only the daemons
        deadline = time.monotonic() + 30
        left = None
        while left != [] and time.monotonic() < deadline:
            left = []
            for h in hosts | {"n1"}:
                for pid in self.c.pids(h):
                    try:
                        comm = open("/proc/%d/comm" % pid).read().strip()
                    except OSError:
                        continue
                    if alive(pid) and comm not in ("slurmd", "munged", "slurmctld"):
                        left.append((h, comm))
            time.sleep(0.2)
        self.assertEqual(left, [])

    def test_stop_lets_replicas_save(self):
        """The job's end reaches each replica's step as SIGTERM, not the
        SIGKILL srun would make of it: a program that saves on SIGTERM
        does; one that ignores it is killed after the grace, on its node."""
        saver = ('trap \'echo "$ZT_POOL-$ZT_INDEX got SIGTERM on $(hostname), saving"; sleep 1; '
                 'echo "$ZT_POOL-$ZT_INDEX saved"; exit 0\' TERM; '
                 'echo "$ZT_POOL-$ZT_INDEX ready"; while :; do sleep 0.2; done')
        stubborn = 'trap "" TERM; echo "$ZT_POOL-$ZT_INDEX ignores SIGTERM"; sleep 300'
        rc, out, job_dir = self.run_job(
            [sh_pool("sleep 4; exit 0", 1), sh_pool(saver, 2), sh_pool(stubborn, 1)],
            ["-n1 -c1 --mem=100", "-N2 -n2 --ntasks-per-node=1 -c1 --mem=100", "-n1 -c1 --mem=100"])
        self.assertEqual(rc, 0, out[-3000:])
        job = read_job(job_dir)
        self.assertEqual(job["state"], "SUCCEEDED", out[-3000:])
        hosts = {r["name"]: r["host"] for r in job["replicas"]}
        for i in range(2):
            name = "workerpool1-%d" % i
            self.assertIn("1-%d ready" % i, out)
            self.assertRegex(out, r"%s\[\d+\]: 1-%d got SIGTERM on %s, saving" % (name, i, hosts[name]))
            self.assertRegex(out, r"%s\[\d+\]: 1-%d saved" % (name, i))
        self.assertIn("2-0 ignores SIGTERM", out)
        self.assertRegex(out, r"workerpool2-0 did not stop within the grace period: SIGKILL")
        self.assertEqual(leftovers(self.c, set(hosts.values()) | {"n1"}), [])

    def test_restart_job_on_worker_restart(self):
        """restartJobOnWorkerRestart: a worker's crash restarts every
        replica as a new step on its node; the primary, stopped with SIGTERM,
        says so, and its second start ends the job."""
        # the worker crashes once the primary's first start is under way
        # (on two loaded cores the crash's restart could otherwise stop the
        # primary before it wrote a line or set its trap)
        worker = ('if [ ! -e "$ZT_JOB_DIR/crashed" ]; then '
                  'while [ ! -e "$ZT_JOB_DIR/primary-ready" ]; do sleep 0.1; done; '
                  'touch "$ZT_JOB_DIR/crashed"; kill -9 $$; fi; sleep 300')
        primary = ('echo "start on $(hostname)" >> "$ZT_JOB_DIR/primary-starts"; '
                   'if [ $(wc -l < "$ZT_JOB_DIR/primary-starts") -ge 2 ]; then sleep 1; exit 0; fi; '
                   'trap \'echo "primary stopped by SIGTERM"; exit 0\' TERM; touch "$ZT_JOB_DIR/primary-ready"; '
                   'while :; do sleep 0.2; done')
        rc, out, job_dir = self.run_job([sh_pool(primary, 1), sh_pool(worker, 1)],
                                        ["-n1 -c1 --mem=100", "-n1 -c1 --mem=100"],
                                        scheduling={"restartJobOnWorkerRestart": True})
        self.assertEqual(rc, 0, out[-3000:])
        job = read_job(job_dir)
        self.assertEqual(job["state"], "SUCCEEDED", out[-3000:])
        self.assertEqual(job["incarnation"], 1)
        hosts = {r["name"]: r["host"] for r in job["replicas"]}
        with open(os.path.join(job_dir, "primary-starts")) as f:
            self.assertEqual(f.read().split("\n")[:2], ["start on %s" % hosts["workerpool0-0"]] * 2)  # in place
        self.assertRegex(out, r"workerpool0-0\[\d+\]: primary stopped by SIGTERM")
        self.assertEqual(len(re.findall(r"workerpool1-0: started pid \d+ on %s" % hosts["workerpool1-0"], out)), 2)

    def test_data_plane_is_tcp_between_hosts(self):
        """Each replica's data-plane connections, as its log names them:
        shared memory and ipc sockets only toward its own host."""
        # an ordinary allocation of two nodes, each pool laid over both: the
        # first worker and server share a node, the second pair the other
        with open(os.path.join(HERE, "..", "..", "examples", "fashion-mnist-async.json")) as f:
            pools = json.load(f)["jobSpec"]["workerPoolSpecs"][:3]
        for p in pools[:2]:
            p["containerSpec"]["args"] = [a for a in p["containerSpec"]["args"] if not a.startswith("--epochs")]
            p["containerSpec"]["args"] += ["--epochs=1"]
        pools[1]["replicaCount"] = pools[2]["replicaCount"] = 2
        rc, out, job_dir = self.run_job(pools, header="#SBATCH -N2 -n2 --ntasks-per-node=1 -c1 --mem=100\n")
        self.assertEqual(rc, 0, out[-3000:])
        job = read_job(job_dir)
        self.assertEqual(job["state"], "SUCCEEDED", out[-3000:])
        hosts = {r["name"]: r["host"] for r in job["replicas"]}
        links = re.findall(r" (workerpool\d-\d)\[\d+\]: data plane to ([\w.-]+):(\d+): (this|another) host", out)
        self.assertTrue(links, out[-3000:])
        for name, host, port, kind in links:
            self.assertEqual(kind == "this", host == hosts[name], (name, host, kind))
        self.assertEqual({k for _, _, _, k in links}, {"this", "another"}, links)  # both ways were taken


def job_spec(d, pools, name="on-slurm"):
    spec = os.path.join(d, "job.json")
    with open(spec, "w") as f:
        json.dump({"displayName": name, "jobSpec": {"workerPoolSpecs": pools}}, f)
    return spec


def read_job(job_dir):
    try:
        with open(os.path.join(job_dir, "job.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def wait_job(job_dir, pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = read_job(job_dir)
        if pred(job):
            return job
        time.sleep(0.2)
    raise AssertionError("timed out after %ss waiting for %s: %s" % (timeout, what, read_job(job_dir).get("state")))


def leftovers(c, hosts):
    """Processes of a job still on hosts: everything but the daemons."""
    deadline = time.monotonic() + 30
    left = None
    while left != [] and time.monotonic() < deadline:
        left = []
        for h in hosts:
            for pid in c.pids(h):
                try:
                    with open("/proc/%d/comm" % pid) as f:
                        comm = f.read().strip()
                except OSError:
                    continue
                if alive(pid) and comm not in ("slurmd", "munged", "slurmctld"):
                    left.append((h, comm))
        time.sleep(0.2)
    return left


ZTRAIN_BIN = os.path.join(os.path.abspath(BIN), "ztrain")
FAST_ENV = {"ZT_HEARTBEAT_MS": "300", "ZT_STOP_GRACE_MS": "3000"}


class Walkthrough(unittest.TestCase):
    """docs/slurm.md's walkthrough, line by line as written, on a cluster of
    its own (its folder swapped for a fresh one): the cluster comes up with
    the checkout shared, the sync example runs from the submit host across
    the nodes with bitwise-identical weights on every trainer, and `down`
    leaves nothing."""
    FOLDER = "/var/tmp/zt-cluster"

    def commands(self):
        with open(os.path.join(ROOT, "docs", "slurm.md")) as f:
            text = f.read()
        block = text.split("<!-- slurm-walkthrough", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
        lines = [l for l in block.split("\n") if l.strip()]
        self.assertTrue(lines[0].startswith("scripts/slurm_cluster.py up ") and "down" in lines[-1], lines)
        return lines

    def test_walkthrough(self):
        d = tmpdir("walkthrough-")
        written = self.commands()
        self.addCleanup(subprocess.run, ["python3", os.path.join(ROOT, "scripts", "slurm_cluster.py"), "down", d],
                        capture_output=True, timeout=60)
        env = dict(os.environ, PATH=os.path.dirname(sys.executable) + ":" + os.environ["PATH"])
        out = {}
        for w in written:
            # this run's folder, and this build's binaries where they are not build/bin
            line = w.replace(self.FOLDER, d).replace(" build/bin/", " %s/" % os.path.abspath(BIN))
            r = subprocess.run(["bash", "-c", line], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
            if r.returncode == 77 and " up " in line:
                raise unittest.SkipTest(r.stderr.strip())
            self.assertEqual(r.returncode, 0, "%s\n%s%s" % (line, r.stdout[-2000:], r.stderr[-3000:]))
            words = w.split()  # up, exec (sinfo), down, or the ztrain command
            out[words[words.index("build/bin/ztrain") + 1] if "build/bin/ztrain" in words else words[1]] = \
                r.stdout + r.stderr
        self.assertRegex(out["exec"], r"idle")  # sinfo: the nodes up
        self.assertIn("#SBATCH hetjob", out["validate"])
        self.assertIn("ztrain: job SUCCEEDED", out["run"])
        self.assertIn("SUCCEEDED", out["status"].split("\n")[0])
        job = read_job(os.path.join(d, "jobs", "sync"))
        hosts = {r["name"]: r["host"] for r in job["replicas"]}
        self.assertEqual(len(set(hosts.values())), 4, hosts)  # a node per pool
        # a line of `ztrain logs` is "NAME | TEXT": the name at the line's start (a
        # line before naming a replica at its end must not lend it the next one's)
        hashes = dict(re.findall(r"(?m)^(workerpool\d-\d) *\|.*params fnv1a ([0-9a-f]{16})", out["logs"]))
        self.assertEqual(sorted(hashes), ["workerpool0-0", "workerpool1-0", "workerpool1-1", "workerpool1-2"],
                         out["logs"][-2000:])
        self.assertEqual(len(set(hashes.values())), 1, hashes)  # bitwise-equal weights on every trainer
        spaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        with open(os.path.join(d, "cluster.json")) as f:
            prefix = json.load(f)["prefix"]
        self.assertNotIn(prefix + "-", spaces)  # down removed every host


class ClusterCase(unittest.TestCase):
    """Tests on a cluster of NODES nodes of their own, brought up once for
    the class; a test's jobs are cancelled after it, so that a failed one
    holds no node from the next."""
    NODES = 4
    GPUS = 0  # per node

    @classmethod
    def setUpClass(cls):
        cls.c = slurm_cluster.Cluster(tmpdir("slurm-%s-" % cls.__name__.lower()), nodes=cls.NODES, shared=SHARED,
                                      gpus=cls.GPUS)
        cls.c.up()

    @classmethod
    def tearDownClass(cls):
        cls.c.down()

    def tearDown(self):
        self.c.run("ctl", ["scancel", "--user=root"], check=False)


class SlurmSubmit(ClusterCase):
    """`ztrain run --backend slurm` from a submit host outside any
    allocation (the controller's host, which runs no slurmd): sbatch, the
    output followed, the exit code of the job; --detach, status, cancel,
    Ctrl-C; a spot job preempted, stopped and resumed; a study whose trials are Slurm jobs, 2 at a time; a pool with
    accelerators on nodes that have GPUs (stand-ins Slurm allocates)."""
    GPUS = 2

    def ztrain(self, *args, env=None, **kw):
        """ztrain on the submit host: Popen (text)."""
        e = dict(self.c.env(), **FAST_ENV)
        e.update(env or {})
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
        p = self.c.popen("ctl", [ZTRAIN_BIN, *args], env=e, text=True, **kw)
        self.addCleanup(lambda: p.poll() is None and p.kill())
        return p

    def finish(self, p, timeout=180):
        out, err = p.communicate(timeout=timeout)
        return p.returncode, out, err

    def test_the_relocatable_tarball_submits_and_runs(self):
        """`make wheel`'s tarball, unpacked in a folder every host sees:
        its ztrain submits the job, and the coordinator and the ztrain roles
        on the nodes are the tarball's (its own libraries, no build tree's)."""
        if not shutil.which("patchelf"):
            self.skipTest("patchelf is missing (scripts/deps.sh --test installs it)")
        d = tempfile.mkdtemp(prefix="tarball-", dir=self.c.dir)
        build = os.path.abspath(os.path.join(BIN, ".."))
        r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "wheel.py"), build, d + "/dist"],
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        tarball = [f for f in os.listdir(d + "/dist") if f.endswith(".tar.gz")][0]
        subprocess.run(["tar", "-xzf", os.path.join(d, "dist", tarball), "-C", d], check=True)
        zt = os.path.join(d, tarball[:-len("-linux-x86_64.tar.gz")], "bin", "ztrain")
        pool = lambda n, args: {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": n,
                                "containerSpec": {"imageUri": "ztrain-worker", "args": args}}
        spec = job_spec(d, [pool(1, ["--run-seconds=2"]), pool(1, ["--idle"])])
        e = dict(self.c.env(), **FAST_ENV)
        e.pop("LD_LIBRARY_PATH", None)
        p = self.c.popen("ctl", [zt, "run", spec, "--backend", "slurm", "--job-dir", d + "/job"], env=e, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(lambda: p.poll() is None and p.kill())
        rc, out, err = self.finish(p)
        self.assertEqual(rc, 0, err[-3000:])
        self.assertEqual(read_job(d + "/job")["state"], "SUCCEEDED")
        with open(d + "/job/slurm/batch.sh") as f:
            self.assertIn(zt, f.read())  # the coordinator on its node: the tarball's
        with open(d + "/job/replica-logs/workerpool1-0.log") as f:
            self.assertIn(os.path.dirname(zt) + "/ztrain-worker", f.read())

    def test_accelerators_are_the_nodes_gpus(self):
        """A pool with 2 accelerators: one replica per node, each step given
        the node's 2 GPUs by Slurm (which sets CUDA_VISIBLE_DEVICES); a pool
        without: none."""
        d = tempfile.mkdtemp(prefix="gpus-", dir=self.c.dir)
        dump = 'echo "$ZT_POOL-$ZT_INDEX on $(hostname): CVD=[$CUDA_VISIBLE_DEVICES] STEP_GPUS=[$SLURM_STEP_GPUS]"'
        gpu_pool = sh_pool(dump + "; sleep 30", 2)
        gpu_pool["machineSpec"].update(acceleratorType="NVIDIA_TESLA_T4", acceleratorCount=2)
        spec = job_spec(d, [sh_pool(dump + "; sleep 2", 1), gpu_pool])
        rc, out, err = self.finish(self.ztrain("run", spec, "--backend", "slurm", "--job-dir", d + "/job"))
        self.assertEqual(rc, 0, err[-3000:])
        with open(d + "/job/slurm/batch.sh") as f:
            self.assertIn("--ntasks-per-node=1 --gres=gpu:2", f.read())
        hosts = {r["name"]: r["host"] for r in read_job(d + "/job")["replicas"]}
        self.assertNotEqual(hosts["workerpool1-0"], hosts["workerpool1-1"])  # a replica per node
        for i in (0, 1):
            self.assertRegex(err, r"workerpool1-%d\[\d+\]: 1-%d on %s: CVD=\[0,1\] STEP_GPUS=\[0,1\]"
                             % (i, i, hosts["workerpool1-%d" % i]))
        self.assertRegex(err, r"workerpool0-0\[\d+\]: 0-0 on %s: CVD=\[\] STEP_GPUS=\[\]" % hosts["workerpool0-0"])

    def test_run_follows_the_job_and_exits_as_local(self):
        d = tempfile.mkdtemp(prefix="follow-", dir=self.c.dir)
        spec = job_spec(d, [sh_pool('echo "chief on $(hostname)"; sleep 1; exit ${CODE:-0}', 1),
                            sh_pool('echo "worker $ZT_INDEX on $(hostname)"; sleep 60', 2)])
        rc, out, err = self.finish(self.ztrain("run", spec, "--backend", "slurm", "--job-dir", d + "/ok"))
        self.assertEqual(rc, 0, err[-3000:])
        self.assertIn("submitted job 'on-slurm' as Slurm job", err)
        job = read_job(d + "/ok")
        self.assertEqual(job["state"], "SUCCEEDED")
        hosts = {r["name"]: r["host"] for r in job["replicas"]}
        # every replica's output, streamed from the allocation as it ran, from the host it ran on
        self.assertRegex(err, r"workerpool0-0\[\d+\]: chief on %s" % hosts["workerpool0-0"])
        for i in (0, 1):
            self.assertRegex(err, r"workerpool1-%d\[\d+\]: worker %d on %s" % (i, i, hosts["workerpool1-%d" % i]))
        self.assertIn("ztrain: job SUCCEEDED", err)
        self.assertTrue(job["slurmJobId"])
        with open(d + "/ok/slurm/batch.sh") as f:
            script = f.read()
        self.assertIn("#SBATCH hetjob", script)
        self.assertIn("#SBATCH --requeue", script)
        # a user error: exit 1, as with the local backend
        rc, out, err = self.finish(self.ztrain("run", spec, "--backend", "slurm", "--job-dir", d + "/bad",
                                               env={"CODE": "3"}))
        self.assertEqual(rc, 1, err[-3000:])
        job = read_job(d + "/bad")
        self.assertEqual(job["state"], "FAILED")
        self.assertIn("workerpool0-0 exited with status 3", job["error"]["message"])

    def test_cancel_while_queued(self):
        d = tempfile.mkdtemp(prefix="queued-", dir=self.c.dir)
        spec = job_spec(d, [sh_pool("sleep 300", 1)])
        self.c.run("ctl", ["scontrol", "update", "PartitionName=main", "State=DOWN"])
        self.addCleanup(lambda: self.c.run("ctl", ["scontrol", "update", "PartitionName=main", "State=UP"]))
        rc, out, err = self.finish(self.ztrain("run", spec, "--backend", "slurm", "--job-dir", d + "/job",
                                               "--detach"), timeout=60)
        self.assertEqual(rc, 0, err)
        rc, out, err = self.finish(self.ztrain("status", d + "/job"), timeout=60)
        self.assertEqual(rc, 0, out + err)
        self.assertIn("QUEUED", out)
        self.assertIn("PENDING", out)  # Slurm's state, and its reason
        rc, out, err = self.finish(self.ztrain("cancel", d + "/job"), timeout=60)
        self.assertEqual(rc, 0, err)
        rc, out, err = self.finish(self.ztrain("status", d + "/job"), timeout=60)
        self.assertEqual(rc, 3, out + err)
        self.assertIn("cancelled before the job started", out)

    def test_pending_reason_and_jobs_that_can_never_start(self):
        d = tempfile.mkdtemp(prefix="pending-", dir=self.c.dir)
        # more nodes than the partition has: refused before sbatch
        gpu_pool = sh_pool("sleep 1", 5)
        gpu_pool["machineSpec"].update(acceleratorType="NVIDIA_TESLA_T4", acceleratorCount=1)
        spec = job_spec(d, [sh_pool("sleep 1", 1), gpu_pool])
        rc, out, err = self.finish(self.ztrain("run", spec, "--backend", "slurm", "--job-dir", d + "/big"), timeout=60)
        self.assertEqual(rc, 1, err)
        self.assertIn("the job needs 6 nodes at the least", err)
        self.assertIn("partition main has %d" % self.NODES, err)
        self.assertFalse(os.path.exists(d + "/big/slurm/submission.json"))
        # over a limit of its partition: cancelled with the reason, not left waiting
        spec = job_spec(d, [sh_pool("sleep 1", 1)])
        self.c.run("ctl", ["scontrol", "update", "PartitionName=main", "MaxTime=1"])
        self.addCleanup(lambda: self.c.run("ctl", ["scontrol", "update", "PartitionName=main", "MaxTime=INFINITE"]))
        rc, out, err = self.finish(self.ztrain("run", spec, "--backend", "slurm", "--job-dir", d + "/long",
                                               "--time", "10"), timeout=60)
        self.assertEqual(rc, 1, err)
        self.assertRegex(err, r"Slurm job \d+ is PENDING \(\w+\): .*, so it can never start; cancelling it")
        self.c.run("ctl", ["scontrol", "update", "PartitionName=main", "MaxTime=INFINITE"])
        # pending for a reason that a wait can end: said while run follows
        self.c.run("ctl", ["scontrol", "update", "PartitionName=main", "State=DOWN"])
        self.addCleanup(lambda: self.c.run("ctl", ["scontrol", "update", "PartitionName=main", "State=UP"]))
        p = self.ztrain("run", spec, "--backend", "slurm", "--job-dir", d + "/down")
        said = ""
        deadline = time.monotonic() + 30
        while "is PENDING (PartitionDown): its partition is down" not in said and time.monotonic() < deadline:
            said += p.stderr.readline()
        self.assertIn("is PENDING (PartitionDown): its partition is down", said)
        p.send_signal(signal.SIGINT)
        rc, out, err = self.finish(p, timeout=60)
        self.assertEqual(rc, 3, said + err)

    def test_interrupt_cancels_the_job(self):
        d = tempfile.mkdtemp(prefix="interrupt-", dir=self.c.dir)
        spec = job_spec(d, [sh_pool("sleep 300", 1), sh_pool("sleep 300", 1)])
        p = self.ztrain("run", spec, "--backend", "slurm", "--job-dir", d + "/job")
        job = wait_job(d + "/job", lambda j: j.get("state") == "RUNNING", 60, "RUNNING")
        p.send_signal(signal.SIGINT)  # Ctrl-C
        rc, out, err = self.finish(p, timeout=120)
        self.assertEqual(rc, 3, err[-3000:])
        self.assertIn("cancelling Slurm job", err)
        self.assertEqual(read_job(d + "/job")["state"], "CANCELLED")
        self.assertEqual(leftovers(self.c, {r["host"] for r in job["replicas"]} | {"n1"}), [])

    def test_preempted_and_stopped_job_saves_and_resumes(self):
        """A spot job (scheduling.strategy SPOT) submitted --detach to the
        preemptible partition: a job of the main partition that needs its
        nodes preempts it. Every program gets SIGTERM, the chief saves the
        step it reached, job.json counts a preemption (no job retry), and
        Slurm's requeue resumes from that step, while status, logs -f and
        wait follow it from the submit host. Then a Slurm stop (ztrain
        cancel: scancel) saves too and leaves nothing on the nodes, and
        --resume in a new allocation finishes the job, its history kept."""
        d = tempfile.mkdtemp(prefix="spot-", dir=self.c.dir)
        pools = sync_pools(epochs=4)
        spec = job_spec(d, pools, name="spot")
        with open(spec) as f:
            doc = json.load(f)
        doc["jobSpec"]["scheduling"] = {"strategy": "SPOT"}
        with open(spec, "w") as f:
            json.dump(doc, f)
        job_dir = d + "/job"
        run = ["run", spec, "--backend", "slurm", "--partition", "spot", "--job-dir", job_dir]
        rc, out, err = self.finish(self.ztrain(*run, "--detach", "--time", "10"), timeout=60)
        self.assertEqual(rc, 0, err)
        slurm_id = out.strip()
        self.assertRegex(slurm_id, r"^\d+$")
        with open(job_dir + "/slurm/batch.sh") as f:
            script = f.read()
        self.assertIn("#SBATCH --time=10\n", script)
        self.assertIn(" --partition=spot", script)
        job = wait_job(job_dir, lambda j: j.get("state") == "RUNNING", 60, "RUNNING")
        rc, out, err = self.finish(self.ztrain("status", job_dir), timeout=60)
        self.assertEqual(rc, 0, err)
        self.assertIn("Slurm job %s: RUNNING" % slurm_id, out)
        # the directory of a job still running is not taken by another
        rc, out, err = self.finish(self.ztrain(*run, "--detach"), timeout=60)
        self.assertEqual(rc, 2, err)
        self.assertRegex(err, "still (running|RUNNING)")
        # logs -f and wait from the submit host follow the job through its directory, requeue included
        follow = self.ztrain("logs", "-f", job_dir)
        waiter = self.ztrain("wait", job_dir)
        wait_job(job_dir, lambda j: chief_step(j) >= 400, 150, "the chief at step 400")
        self.c.run("ctl", ["sbatch", "-p", "main", "-N%d" % self.NODES, "--exclusive", "-o", "/dev/null",
                           "--wrap", "sleep 1"])
        job = wait_job(job_dir, lambda j: j.get("events") and j.get("state") == "RUNNING", 150,
                       "RUNNING again after the preemption")
        with open(d + "/job/slurm/batch.out") as f:
            text = f.read()
        self.assertIn("DUE TO PREEMPTION", text)
        saved = re.findall(r"workerpool0-0\[\d+\]: stopping at step (\d+): "
                           r"(?:saving it|saved already,) to resume from", text)
        self.assertEqual(len(saved), 1, text[-4000:])
        self.assertRegex(text, r"the job is preempted \(not a failure, no job retry used\)")
        self.assertEqual(job["jobRetries"], 0)
        self.assertEqual([e["kind"] for e in job["events"]], ["preempted"], text[-6000:])
        self.assertIsNone(waiter.poll())  # a requeue is no end
        # the Slurm stop: scancel of the requeued run, once it trained past its resume
        job = wait_job(job_dir, lambda j: chief_step(j) >= int(saved[0]) + 100, 120, "the resumed chief training")
        at_stop = chief_step(job)
        hosts = {r["host"] for r in job["replicas"]}
        rc, out, err = self.finish(self.ztrain("cancel", job_dir), timeout=120)
        self.assertEqual(rc, 0, err)
        self.assertIn(": CANCELLED", out)
        job = read_job(job_dir)
        self.assertEqual(job["state"], "CANCELLED")
        self.assertEqual({r["state"] for r in job["replicas"]}, {"CANCELLED"})
        rc, out, err = self.finish(self.ztrain("status", job_dir), timeout=60)
        self.assertEqual(rc, 3, out + err)
        rc, out, err = self.finish(waiter, timeout=60)
        self.assertEqual(rc, 3, out + err)
        rc, out, err = self.finish(follow, timeout=60)
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"(?m)^coordinator\s*\| \S+ I coordinator/0\[\d+\]: job .*: RUNNING$")
        self.assertTrue(out.rstrip().endswith("CANCELLED"), out[-2000:])
        self.assertEqual(leftovers(self.c, hosts | {"n1"}), [])
        with open(d + "/job/slurm/batch.out") as f:
            text = f.read()
        stops = re.findall(r"workerpool0-0\[\d+\]: stopping at step (\d+): "
                           r"(?:saving it|saved already,) to resume from", text)
        # the cancel's stop saves its step too, or says it was saved already
        # (it landed on a step a periodic checkpoint had just saved): either
        # way the newest checkpoint is at or past where it stopped
        self.assertEqual(len(stops), 2, text[-4000:])
        resumed = re.findall(r"workerpool0-0\[\d+\]: resuming from \S+ at step (\d+)", text)
        self.assertEqual(resumed, saved, text[-4000:])  # the requeued run went on from the preemption's save
        self.assertGreaterEqual(max(c["step"] for c in job["checkpoints"]), at_stop)
        # --resume: a new allocation goes on from the stop's checkpoint, with the history
        rc, out, err = self.finish(self.ztrain(*run, "--resume"), timeout=240)
        self.assertEqual(rc, 0, err[-4000:])
        job = read_job(job_dir)
        self.assertEqual(job["state"], "SUCCEEDED", err[-4000:])
        with open(d + "/job/slurm/batch.out") as f:  # the new allocation's
            text = f.read()
        resumed = re.findall(r"workerpool0-0\[\d+\]: resuming from \S+ at step (\d+)", text)
        self.assertEqual(resumed, stops[1:], text[-4000:])
        self.assertEqual((job["jobRetries"], job["preemptions"]), (0, 1))
        # (a preemption's first notice may be taken for a cancel, CANCELLING, until Slurm says it requeued)
        self.assertEqual([t["state"] for t in job["transitions"] if t["state"] != "CANCELLING"],
                         ["QUEUED", "PENDING", "RUNNING", "QUEUED", "PENDING", "RUNNING", "CANCELLED",
                          "QUEUED", "PENDING", "RUNNING", "SUCCEEDED"])
        self.assertGreaterEqual(job["metrics"]["workerpool0-0"]["accuracy"]["value"], 0.85)

    def test_study_trials_are_slurm_jobs(self):
        d = tempfile.mkdtemp(prefix="study-", dir=self.c.dir)
        objective = os.path.join(HERE, "..", "..", "examples", "hypertune_objective.py")
        spec = os.path.join(d, "study.json")
        with open(spec, "w") as f:
            json.dump({"displayName": "slurm-study",
                       "studySpec": {"metrics": [{"metricId": "score", "goal": "MAXIMIZE"}],
                                     "parameters": [{"parameterId": "x", "doubleValueSpec":
                                                     {"minValue": 0, "maxValue": 1}}]},
                       "maxTrialCount": 4, "parallelTrialCount": 2,
                       "trialJobSpec": {"workerPoolSpecs": [{
                           "machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
                           "containerSpec": {"imageUri": "local",
                                             "command": ["python3", os.path.abspath(objective)]}}]}}, f)
        sd = os.path.join(d, "sd")
        rc, out, err = self.finish(self.ztrain("tune", spec, "--study-dir", sd, "--backend", "slurm",
                                               env={"OBJECTIVE_DELAY": "0.5"}), timeout=300)
        self.assertEqual(rc, 0, out[-2000:] + err[-3000:])
        with open(os.path.join(sd, "study.json")) as f:
            doc = json.load(f)
        self.assertEqual(doc["state"], "SUCCEEDED")
        self.assertEqual(len(doc["trials"]), 4)
        spans, ids = [], set()
        for t in doc["trials"]:
            self.assertEqual(t["state"], "SUCCEEDED", t)
            self.assertIsInstance(t["finalMeasurement"], float)  # the metric, read from the trial
            job = read_job(os.path.join(sd, "trial-%s" % t["id"]))
            ids.add(job["slurmJobId"])  # each trial its own Slurm job
            self.assertIn(job["replicas"][0]["host"], self.c.nodes)
            times = {x["state"]: x["time"] for x in job["transitions"]}
            spans.append((times["RUNNING"], times["SUCCEEDED"]))
        self.assertEqual(len(ids), 4)
        for a, _ in spans:  # never more than parallelTrialCount at once
            self.assertLessEqual(sum(1 for s, e in spans if s <= a < e), 2, spans)


def chief_step(job):
    """The newest step the chief reported in job.json (-1: none yet)."""
    ms = job.get("metrics", {}).get("workerpool0-0", {})
    return max([m.get("step", -1) for m in ms.values() if isinstance(m, dict)] + [-1])


def sync_pools(epochs):
    """The sync example on machines the test nodes hold: chief, 2 workers
    and a reducer, no evaluator."""
    with open(os.path.join(ROOT, "examples", "fashion-mnist-sync.json")) as f:
        pools = json.load(f)["jobSpec"]["workerPoolSpecs"][:3]
    for p in pools:
        p["machineSpec"]["machineType"] = "n1-standard-4"
    for p in pools[:2]:
        p["containerSpec"]["args"] = [a for a in p["containerSpec"]["args"]
                                      if not a.startswith("--epochs")] + ["--epochs=%d" % epochs]
    pools[1]["replicaCount"] = 2
    pools[2]["replicaCount"] = 1
    return pools


def async_pools(epochs, ps=1):
    """The async example: chief, 2 workers, ps parameter servers, on machine
    types the test nodes hold."""
    root = os.path.join(HERE, "..", "..")
    with open(os.path.join(root, "examples", "fashion-mnist-async.json")) as f:
        pools = json.load(f)["jobSpec"]["workerPoolSpecs"][:3]
    for p in pools[:2]:
        p["containerSpec"]["args"] = [a for a in p["containerSpec"]["args"]
                                      if not a.startswith("--epochs")] + ["--epochs=%d" % epochs]
    for p in pools:
        p["machineSpec"] = {"machineType": "n1-standard-4"}
    pools[2]["replicaCount"] = ps
    return pools


class SlurmLostNode(ClusterCase):
    """A node lost under a running job (its slurmd and every process on it
    SIGKILLed): the job's retry rules apply. With a retry left the job goes
    on in its allocation, requeued on the nodes left, from its checkpoints,
    and succeeds; with none it fails. Either way job.json and the log name
    the node."""
    NODES = 8  # 4 per job (5 for the elastic one), 4 to lose

    def lose_a_node(self, env, replica="workerpool1-1", epochs=18, pools=None, after=None):
        """epochs: a worker's node lost at the first checkpoint (step 400
        of 313 a epoch) is declared lost some 15 s later (its heartbeat,
        then Slurm's ping; longer on a loaded machine, and 6 epochs once
        ended first, when an epoch took twice as long as now), while the
        chief trains on: the job must still be running then (18 epochs
        take about 40 s on an idle machine); the coordinator's own
        node takes the job down with it, so its retry resumes from that
        first checkpoint."""
        d = tempfile.mkdtemp(prefix="lost-", dir=self.c.dir)
        spec = job_spec(d, pools or async_pools(epochs=epochs), name="lost-node")
        job_dir = d + "/job"
        e = dict(self.c.env(), ZT_HEARTBEAT_TIMEOUT_MS="4000", **env)
        p = self.c.popen("ctl", [ZTRAIN_BIN, "run", spec, "--backend", "slurm", "--job-dir", job_dir], env=e,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: p.poll() is None and p.kill())
        job = wait_job(job_dir, lambda j: j.get("state") == "RUNNING" and j.get("checkpoints"), 120,
                       "RUNNING with a checkpoint")
        hosts = {r["name"]: r["host"] for r in job["replicas"]}
        lost = hosts[replica]
        self.c.kill_host(lost)
        if after:
            after(job_dir)
        out, err = p.communicate(timeout=240)
        return p.returncode, err, read_job(job_dir), lost, job_dir

    def test_0_an_elastic_pool_goes_on_without_the_node_and_grows_back(self):
        """Pool 1 elastic, 2 to 3 workers, one per node: its node lost, the
        job goes on with 2 (no requeue, no retry); while every other node
        is taken (another job holds them) it stays at 2, and once one is
        free again it grows back to 3 on it, in an allocation of its own;
        the job succeeds."""
        pools = sync_pools(epochs=16)
        for p in pools[:2]:
            p["machineSpec"]["machineType"] = "n1-highcpu-8"  # a trainer per node
        pools[1]["replicaCount"] = 3
        pools[1]["elasticPolicy"] = {"minReplicaCount": 2, "maxReplicaCount": 3}
        seen = {}

        def capacity_returns(job_dir):
            idle = int(self.c.run("ctl", ["sinfo", "-h", "-t", "idle", "-o", "%D"]).stdout.split()[0])
            self.c.run("ctl", ["sbatch", "-N", str(idle), "-J", "holder", "--wrap", "sleep 600"])
            wait_job(job_dir, lambda j: (j.get("elastic") or {}).get("replicas") == 2 and
                     not j["elastic"]["changing"], 120, "the pool at 2")
            time.sleep(5)  # ZT_REGAIN_MS 1000: it asked, and no node was free
            seen["held"] = read_job(job_dir)["elastic"]
            self.c.run("ctl", ["scancel", "--name=holder"])

        rc, err, job, lost, job_dir = self.lose_a_node({"ZT_REGAIN_MS": "1000"}, pools=pools, after=capacity_returns)
        self.assertEqual(rc, 0, err[-4000:])
        self.assertEqual((job["state"], job["jobRetries"], job["incarnation"]), ("SUCCEEDED", 0, 0), err[-4000:])
        self.assertEqual([t["state"] for t in job["transitions"]], ["QUEUED", "PENDING", "RUNNING", "SUCCEEDED"])
        self.assertEqual(len(job["lostNodes"]), 1, job["lostNodes"])
        self.assertIn("node %s, with workerpool1-1" % lost, job["lostNodes"][0]["why"])
        self.assertIn("workerpool1-1 is lost for good", err)
        self.assertEqual((seen["held"]["replicas"], seen["held"]["awaitingCapacity"]), (2, 1))
        self.assertEqual([(c["from"], c["to"]) for c in job["elastic"]["changes"]], [(3, 2), (2, 3)])
        self.assertEqual((job["elastic"]["replicas"], job["elastic"]["awaitingCapacity"]), (3, 0))
        back = [r["host"] for r in job["replicas"] if r["name"] == "workerpool1-1"][0]
        self.assertNotEqual(back, lost)
        self.assertIn("capacity returned: workerpool1-1 gets a place on %s" % back, err)
        self.assertRegex(err, r"Slurm job \d+: a node of its own for workerpool1-1, on %s" % back)
        hashes = dict(re.findall(r"(workerpool\d-\d)\[\d+\]: params fnv1a ([0-9a-f]{16})", err))
        self.assertEqual(sorted(hashes), ["workerpool0-0", "workerpool1-0", "workerpool1-1", "workerpool1-2"],
                         err[-3000:])
        self.assertEqual(len(set(hashes.values())), 1, hashes)
        self.assertGreaterEqual(job["metrics"]["workerpool0-0"]["accuracy"]["value"], 0.85)
        # the node it was given is free again: its allocation ended with the job
        deadline = time.monotonic() + 30
        while back not in self.c.run("ctl", ["sinfo", "-h", "-t", "idle", "-N", "-o", "%N"]).stdout.split():
            self.assertLess(time.monotonic(), deadline, "%s still allocated after the job" % back)
            time.sleep(0.5)

    def test_1_retried_on_other_nodes(self):
        rc, err, job, lost, job_dir = self.lose_a_node({})
        self.assertEqual(rc, 0, err[-4000:])
        self.assertEqual(job["state"], "SUCCEEDED", err[-4000:])
        self.assertEqual(job["jobRetries"], 1)
        self.assertEqual(len(job["lostNodes"]), 1)
        self.assertIn("node %s is" % lost, job["lostNodes"][0]["why"])
        self.assertRegex(err, r"lost a node: node %s is (not responding|down).*job retry 1 of 3" % lost)
        self.assertNotIn(lost, {r["host"] for r in job["replicas"]})  # the retry ran elsewhere
        states = [t["state"] for t in job["transitions"]]
        self.assertEqual(states, ["QUEUED", "PENDING", "RUNNING", "QUEUED", "PENDING", "RUNNING", "SUCCEEDED"])
        self.assertIn("Slurm ran job %s again (requeue 1): job retry 1 of 3" % job["slurmJobId"], err)
        # the retry went on from the checkpoints, not from the start
        self.assertRegex(err, r"workerpool0-0\[\d+\]: resuming from \S+ at step [1-9]")
        self.assertGreaterEqual(job["metrics"]["workerpool0-0"]["accuracy"]["value"], 0.85)

    def test_2_no_retry_left_fails_naming_the_node(self):
        rc, err, job, lost, job_dir = self.lose_a_node({"ZT_MAX_JOB_RETRIES": "0"})
        self.assertEqual(rc, 1, err[-4000:])
        self.assertEqual(job["state"], "FAILED", err[-4000:])
        self.assertIn("node %s is" % lost, job["error"]["message"])
        self.assertIn("every job retry was used", job["error"]["message"])
        self.assertEqual(job["error"]["lostNode"], job["lostNodes"][0]["why"])
        # the allocation did not run the job again
        with open(os.path.join(job_dir, "slurm", "batch.out")) as f:
            self.assertEqual(f.read().count("control plane on"), 1)

    def test_3_the_coordinators_node_under_an_elastic_job(self):
        # the batch script runs on the chief's node: the coordinator goes
        # with it. Slurm requeues the job's leader alone (the other
        # components are --no-kill and stay); the new coordinator starts
        # every replica again from the checkpoints and the job succeeds
        pools = sync_pools(epochs=10)
        pools[1]["elasticPolicy"] = {"minReplicaCount": 1, "maxReplicaCount": 2}
        rc, err, job, lost, job_dir = self.lose_a_node({}, replica="workerpool0-0", pools=pools)
        self.assertEqual(rc, 0, err[-4000:])
        self.assertEqual(job["state"], "SUCCEEDED", err[-4000:])
        self.assertEqual(job["jobRetries"], 1)
        self.assertIn("Slurm ran job %s again (requeue 1): job retry 1 of 3" % job["slurmJobId"], err)
        self.assertIn("the allocation ended under the job while it was RUNNING", job["lostNodes"][0]["why"])
        self.assertNotIn(lost, {r["host"] for r in job["replicas"]})
        self.assertRegex(err, r"workerpool0-0\[\d+\]: resuming from \S+ at step [1-9]")
        hashes = dict(re.findall(r"(workerpool\d-\d)\[\d+\]: params fnv1a ([0-9a-f]{16})", err))
        self.assertEqual(len(hashes), 3, err[-3000:])
        self.assertEqual(len(set(hashes.values())), 1, hashes)
        self.assertGreaterEqual(job["metrics"]["workerpool0-0"]["accuracy"]["value"], 0.85)

if __name__ == "__main__":
    why = slurm_cluster.unavailable_reason()
    if why:
        print("skipped: " + why)
        sys.exit(77)
    ztest.main()
