#!/usr/bin/env python3
"""Watching jobs with the real tools: the built-in trainer's and the
evaluator's TensorBoard scalars read back by TensorBoard's own reader and
compared with job.json; a study's trials in TensorBoard's HParams
dashboard, asked for by the dashboard's own requests to a real
`tensorboard` server. TensorBoard comes from PyPI, in a venv the test makes
in the build folder (toolvenv.py)."""
import base64
import functools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

import ztest  # noqa: E402
from ztest import ZTRAIN, Job, load_job, tmpdir, wait_for, write, ztrain

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
TOOLS = None  # the tools venv's python, made in main()


def scalars(logdir):
    """{run: {tag: [[step, value], ...]}}, as TensorBoard's EventAccumulator reads them."""
    r = subprocess.run([TOOLS, os.path.join(HERE, "tb_read.py"), "scalars", logdir],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise AssertionError("TensorBoard's reader failed:\n" + r.stderr[-3000:])
    return json.loads(r.stdout)


def async_job(d, epochs=2, evaluator=True):
    """The async example, shorter."""
    with open(os.path.join(ROOT, "examples", "fashion-mnist-async.json")) as f:
        ex = json.load(f)
    pools = ex["jobSpec"]["workerPoolSpecs"]
    for p in pools[:2]:
        p["containerSpec"]["args"] = [a for a in p["containerSpec"]["args"]
                                      if not a.startswith("--epochs")] + ["--epochs=%d" % epochs]
    if not evaluator:
        del pools[3]
    return write(d, "job.json", json.dumps(ex))


X = {"parameterId": "x", "doubleValueSpec": {"minValue": 0, "maxValue": 1}}
OPT = {"parameterId": "opt", "categoricalValueSpec": {"values": ["adam", "sgd"]}}


def run_study(test, prefix, params, trials, cost=False):
    """A study of the synthetic objective (metric score, and with cost a
    second one, cost to minimize); its directory."""
    d = tmpdir(prefix)
    metrics = [{"metricId": "score", "goal": "MAXIMIZE"}] + ([{"metricId": "cost", "goal": "MINIMIZE"}] if cost else [])
    spec = {"displayName": "t", "studySpec": {"metrics": metrics,
                                               "parameters": params},
            "maxTrialCount": trials, "parallelTrialCount": 2,
            "trialJobSpec": {"workerPoolSpecs": [{
                "machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
                "containerSpec": {"imageUri": "local",
                                  "command": ["python3", os.path.join(ROOT, "examples", "hypertune_objective.py")]}}]}}
    sd = os.path.join(d, "study")
    r = subprocess.run([ZTRAIN, "tune", write(d, "study.json", json.dumps(spec)), "--study-dir", sd],
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, **({"OBJECTIVE_COST": "1"} if cost else {})))
    test.assertEqual(r.returncode, 0, r.stderr[-3000:])
    return sd


class TrainingScalars(unittest.TestCase):
    """The async example with its evaluator: the chief's scalars under
    logs/train, the evaluations under logs/eval, as job.json has them."""

    @classmethod
    def setUpClass(cls):
        cls.d = tmpdir("watch-")
        cls.job_dir = os.path.join(cls.d, "job")
        p = subprocess.run([ZTRAIN, "run", async_job(cls.d), "--job-dir", cls.job_dir],
                           capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            raise AssertionError("the job failed:\n" + p.stderr[-3000:])
        cls.job = load_job(cls.job_dir)
        cls.tb = scalars(os.path.join(cls.job_dir, "logs"))

    def test_only_the_chief_and_the_evaluator_write(self):
        self.assertEqual(sorted(self.tb), ["eval", "train"])

    def test_the_chiefs_scalars_are_job_jsons(self):
        train = self.tb["train"]
        for tag in ("loss", "examples_per_sec", "step_compute_ms", "step_exchange_ms", "learning_rate",
                    "accuracy", "test_loss"):
            self.assertIn(tag, train)
        chief = self.job["metrics"]["workerpool0-0"]
        for tag in ("loss", "examples_per_sec"):
            want = chief[tag]["series"]
            self.assertEqual([s for s, _ in train[tag]], [s for s, _ in want], tag)
            for (_, got), (_, v) in zip(train[tag], want):
                self.assertAlmostEqual(got, v, delta=1e-5 * max(1.0, abs(v)))
        self.assertEqual(train["accuracy"][-1][0], chief["accuracy"]["step"])
        self.assertAlmostEqual(train["accuracy"][-1][1], chief["accuracy"]["value"], places=5)
        # every progress line's step, log_every apart; the Adam rate as given
        steps = [s for s, _ in train["loss"]]
        self.assertEqual(steps, list(range(200, 200 * len(steps) + 1, 200)))
        self.assertTrue(all(abs(v - 0.001) < 1e-9 for _, v in train["learning_rate"]))
        self.assertTrue(all(v > 0 for _, v in train["step_compute_ms"]))

    def test_the_evaluations_are_job_jsons(self):
        ev = self.tb["eval"]
        want = {}
        for e in self.job["evaluations"]:
            want.setdefault(e["name"], []).append([e["step"], e["value"]])
        self.assertTrue(want.get("eval_accuracy"), self.job["evaluations"])
        for tag, name in (("accuracy", "eval_accuracy"), ("loss", "eval_loss")):
            self.assertEqual([s for s, _ in ev[tag]], [s for s, _ in want[name]])
            for (_, got), (_, v) in zip(ev[tag], want[name]):
                self.assertAlmostEqual(got, v, places=5)


class WhoWrites(unittest.TestCase):
    """ZT_TENSORBOARD: every trainer with all, none with off; a log folder
    that cannot be written is a warning and the job still succeeds."""

    def run_job(self, env, epochs=1):
        d = tmpdir("watch-who-")
        job_dir = os.path.join(d, "job")
        job = Job(self, async_job(d, epochs=epochs, evaluator=False), job_dir, env=env)
        self.assertEqual(job.wait(timeout=300), 0, job.err[-3000:])
        return job, job_dir

    def test_all(self):
        job, job_dir = self.run_job({"ZT_TENSORBOARD": "all"})
        tb = scalars(os.path.join(job_dir, "logs"))
        self.assertEqual(sorted(tb), ["train", "train-workerpool1-0", "train-workerpool1-1"])
        want = load_job(job_dir)["metrics"]["workerpool1-1"]["loss"]["series"]
        self.assertEqual([s for s, _ in tb["train-workerpool1-1"]["loss"]], [s for s, _ in want])

    def test_off(self):
        job, job_dir = self.run_job({"ZT_TENSORBOARD": "off"})
        found = [f for _, _, fs in os.walk(job_dir) for f in fs if f.startswith("events.out.tfevents.")]
        self.assertEqual(found, [])

    def test_unwritable_folder_is_a_warning(self):
        d = tmpdir("watch-ro-")
        job_dir = os.path.join(d, "job")
        os.makedirs(job_dir)
        write(job_dir, "logs", "a file where the folder would be\n")
        job = Job(self, async_job(d, epochs=1, evaluator=False), job_dir)
        self.assertEqual(job.wait(timeout=300), 0, job.err[-3000:])
        with open(os.path.join(job_dir, "replica-logs", "workerpool0-0.log")) as f:
            log = f.read()
        self.assertRegex(log, r"W chief/0 .*TensorBoard log folder \S+/logs/train: cannot make it: .*: no "
                              r"TensorBoard scalars \(ZT_TENSORBOARD=off turns them off\)")


class CommandLine(unittest.TestCase):
    """ztrain logs -f follows a running job to its end; ztrain cancel ends
    one CANCELLED and ztrain wait then exits 3; ztrain list shows both."""

    def setUp(self):
        self.jobs = tmpdir("watch-cli-")

    def start(self, name, epochs):
        d = os.path.join(self.jobs, name)
        os.makedirs(d)
        return Job(self, async_job(d, epochs=epochs, evaluator=False), os.path.join(d, "job"))

    def test_logs_follow_wait_cancel_list(self):
        job = self.start("a", epochs=3)
        job_dir = os.path.join(self.jobs, "a", "job")
        wait_job = lambda pred: wait_for(lambda: pred((load_job(job_dir) or {}).get("state")), 60, what="state")
        wait_job(lambda s: s == "RUNNING")
        follow = subprocess.Popen([ZTRAIN, "logs", "-f", job_dir], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True)
        self.addCleanup(lambda: follow.poll() is None and follow.kill())
        out, err = follow.communicate(timeout=300)  # returns by itself, when the job has ended
        self.assertEqual(follow.returncode, 0, err)
        self.assertEqual(job.wait(timeout=60), 0, job.err[-3000:])
        self.assertTrue(out.rstrip().endswith("ztrain logs: job fashion-mnist-async SUCCEEDED"), out[-2000:])
        # every replica's lines and the coordinator's, each after its name, in time order
        for who in ("coordinator", "workerpool0-0", "workerpool1-1", "workerpool2-0"):
            self.assertRegex(out, r"(?m)^%s\s*\| " % who)
        self.assertRegex(out, r"workerpool0-0\s*\| \S+ I chief/0 workerpool0-0\[\d+\]: final test accuracy")
        stamps = re.findall(r"(?m)^\S+\s*\| (\d{4}-\d\d-\d\dT\S+Z) ", out)
        self.assertGreater(len(stamps), 20)
        self.assertEqual(stamps, sorted(stamps))
        # the follower saw what the files hold, once
        one = subprocess.run([ZTRAIN, "logs", job_dir, "--replica", "workerpool0-0"], capture_output=True,
                             text=True, timeout=60)
        with open(os.path.join(job_dir, "replica-logs", "workerpool0-0.log")) as f:
            self.assertEqual(one.stdout, f.read())
        self.assertEqual(out.count("final test accuracy"), 1)
        r = subprocess.run([ZTRAIN, "wait", job_dir], capture_output=True, text=True, timeout=60)
        self.assertEqual((r.returncode, r.stdout), (0, "job fashion-mnist-async: SUCCEEDED\n"))

        # a second job, cancelled while it runs; wait exits 3 for it
        job_b = self.start("b", epochs=50)
        b_dir = os.path.join(self.jobs, "b", "job")
        wait_for(lambda: (load_job(b_dir) or {}).get("state") == "RUNNING", 60, what="RUNNING")
        waiter = subprocess.Popen([ZTRAIN, "wait", b_dir], stdout=subprocess.PIPE, text=True)
        self.addCleanup(lambda: waiter.poll() is None and waiter.kill())
        time.sleep(1)
        self.assertIsNone(waiter.poll())  # still waiting: the job runs
        r = subprocess.run([ZTRAIN, "cancel", b_dir], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(job_b.wait(timeout=60), 3)
        out, _ = waiter.communicate(timeout=60)
        self.assertEqual(waiter.returncode, 3, out)
        self.assertTrue(out.startswith("job fashion-mnist-async: CANCELLED"), out)

        r = subprocess.run([ZTRAIN, "list", self.jobs + "/a", "--json"], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = json.loads(r.stdout)
        self.assertEqual([(x["kind"], x["state"], x["dir"]) for x in rows],
                         [("job", "SUCCEEDED", job_dir)])
        self.assertGreater(rows[0]["seconds"], 0)
        r = subprocess.run([ZTRAIN, "list", self.jobs + "/b"], capture_output=True, text=True, timeout=60)
        self.assertRegex(r.stdout, r"(?m)^job\s+fashion-mnist-async\s+CANCELLED\s+\d{4}-\S+Z\s+\d+s\s+%s$"
                         % re.escape(b_dir))

    def test_bad_use(self):
        r = subprocess.run([ZTRAIN, "logs", self.jobs], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2)
        self.assertIn("%s holds no job" % self.jobs, r.stderr)
        # a job spec named job.json is not a job
        spec_dir = os.path.join(self.jobs, "spec")
        os.makedirs(spec_dir)
        write(spec_dir, "job.json", json.dumps({"displayName": "x", "jobSpec": {}}))
        r = subprocess.run([ZTRAIN, "wait", spec_dir], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2, r.stdout)
        self.assertIn("%s holds no job or study (no job.json or study.json that ztrain wrote" % spec_dir, r.stderr)
        r = subprocess.run([ZTRAIN, "wait"], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2)
        self.assertIn("ztrain wait: give the job directory", r.stderr)
        r = subprocess.run([ZTRAIN, "list", os.path.join(self.jobs, "none")], capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 2)
        self.assertIn("none: No such file or directory", r.stderr)


def http(url, method="GET", data=None, token=None):
    """(status, body) of one request (with the bearer token, when given)."""
    req = urllib.request.Request(url, method=method, data=data,
                                 headers={"Authorization": "Bearer " + token} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=30) as f:
            return f.status, f.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


class Prometheus(unittest.TestCase):
    """`ztrain run --metrics-port 0`: the coordinator's /metrics, accepted
    by `promtool check metrics`, scraped by a real Prometheus server (a
    temporary config on a loopback port) whose query API then holds the
    job's step and loss series while it runs. Bad requests and garbage get
    an answer, not a crash; a non-loopback address needs security off."""

    def test_scraped_while_the_job_runs(self):
        prom, promtool = shutil.which("prometheus"), shutil.which("promtool")
        self.assertTrue(prom and promtool, "Debian's prometheus is not installed (scripts/deps.sh installs it)")
        d = tmpdir("watch-prom-")
        job_dir = os.path.join(d, "job")
        job = Job(self, async_job(d, epochs=8, evaluator=True), job_dir, "--metrics-port", "0")
        url = wait_for(lambda: (load_job(job_dir) or {}).get("metricsUrl"), 60, what="metricsUrl")
        self.assertRegex(url, r"^http://127\.0\.0\.1:\d+/metrics$")
        # the job's user's only: the token's file is 0600 beside the credentials
        token_file = load_job(job_dir)["metricsTokenFile"]
        self.assertEqual(token_file, os.path.join(job_dir, "credentials", "metrics.token"))
        self.assertEqual(os.stat(token_file).st_mode & 0o777, 0o600)
        with open(token_file) as f:
            token = f.read().strip()
        self.assertEqual(len(token), 64)
        self.assertEqual(http(url)[0], 401)                  # a stranger's scrape
        self.assertEqual(http(url, token="0" * 64)[0], 401)  # a guess
        get = functools.partial(http, token=token)
        wait_for(lambda: "ztrain_replica_loss{" in get(url)[1], 60, what="a loss in /metrics")
        status, text = get(url)
        self.assertEqual(status, 200)
        r = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr + text)
        self.assertIn('ztrain_job_state{state="RUNNING"} 1', text)
        self.assertIn('ztrain_replicas{pool="workerpool2",state="RUNNING"} 2', text)
        self.assertRegex(text, r'ztrain_replica_restarts_total\{replica="workerpool1-0",pool="workerpool1"\} 0')
        self.assertIn('ztrain_control_plane_dropped_messages_total{reason="malformed"} 0', text)
        # the replicas' parameter-server latency, a histogram from each trainer
        # (each trainer reports its own at its own pace: wait for both)
        wait_for(lambda: all(re.search(r'ztrain_ps_seconds_count\{replica="%s"\} [1-9]' % r, get(url)[1])
                             for r in ("workerpool0-0", "workerpool1-1")), 30,
                 what="the chief's and workerpool1-1's parameter-server histograms")
        text = get(url)[1]
        self.assertIn("# TYPE ztrain_ps_seconds histogram", text)
        self.assertRegex(text, r'ztrain_ps_seconds_bucket\{replica="workerpool1-1",le="0.001"\} \d+')
        self.assertRegex(text, r'ztrain_ps_seconds_bucket\{replica="workerpool1-1",le="\+Inf"\} [1-9]')
        r = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        # not /metrics, not GET, garbage: answers, and the endpoint still serves
        self.assertEqual(get(url.replace("/metrics", "/nope"))[0], 404)
        self.assertEqual(get(url, "POST", b"x")[0], 405)
        host, port = url[len("http://"):].split("/")[0].split(":")
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(os.urandom(4096) + b"\r\n\r\n")
            s.recv(4096)
        self.assertEqual(get(url)[0], 200)

        ui = free_port()
        cfg = write(d, "prometheus.yml", "global:\n  scrape_interval: 1s\nscrape_configs:\n"
                                         "  - job_name: ztrain\n    authorization:\n"
                                         "      credentials_file: %s\n    static_configs:\n"
                                         "      - targets: ['%s:%s']\n" % (token_file, host, port))
        r = subprocess.run([promtool, "check", "config", cfg], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(os.path.join(d, "prometheus.log"), "w") as log:
            p = subprocess.Popen([prom, "--config.file", cfg, "--storage.tsdb.path", os.path.join(d, "tsdb"),
                                  "--web.listen-address", "127.0.0.1:%d" % ui], stdout=log, stderr=log,
                                 start_new_session=True)
        self.addCleanup(lambda: (p.poll() is None and os.killpg(p.pid, signal.SIGKILL), p.wait()))

        def query(expr):
            try:
                st, body = http("http://127.0.0.1:%d/api/v1/query?query=%s" % (ui, urllib.parse.quote(expr)))
            except urllib.error.URLError:  # not listening yet
                self.assertIsNone(p.poll(), "prometheus exited; see %s/prometheus.log" % d)
                return []
            return json.loads(body)["data"]["result"] if st == 200 else []

        def grown():
            if (load_job(job_dir) or {}).get("state") != "RUNNING":
                raise AssertionError("the job ended before Prometheus saw it grow")
            res = query('max_over_time(ztrain_replica_step{replica="workerpool0-0"}[5m]) - '
                        'min_over_time(ztrain_replica_step{replica="workerpool0-0"}[5m])')
            return res and float(res[0]["value"][1]) > 0
        wait_for(grown, 120, step=0.5, what="Prometheus to scrape the chief's step twice")
        loss = query('ztrain_replica_loss{replica="workerpool0-0"}')
        self.assertEqual(len(loss), 1, loss)
        self.assertEqual(loss[0]["metric"]["job"], "ztrain")  # the scrape job's label, not overwritten
        self.assertGreater(float(loss[0]["value"][1]), 0)
        self.assertEqual(float(query('ztrain_job_state{state="RUNNING"}')[0]["value"][1]), 1)
        # seen: the rest of its training would add nothing (the suite's time)
        self.assertEqual(ztrain("cancel", job_dir).returncode, 0)
        self.assertEqual(job.wait(timeout=120), 3, job.err[-3000:])
        self.assertIn("Prometheus metrics on %s (bearer token in %s)" % (url, token_file), job.err)

    def test_allreduce_latency(self):
        d = tmpdir("watch-prom-sync-")
        with open(os.path.join(ROOT, "examples", "fashion-mnist-sync.json")) as f:
            ex = json.load(f)
        for p in ex["jobSpec"]["workerPoolSpecs"][:2]:
            p["containerSpec"]["args"] = [a for a in p["containerSpec"]["args"]
                                          if not a.startswith("--epochs")] + ["--epochs=1"]
        job_dir = os.path.join(d, "job")
        job = Job(self, write(d, "job.json", json.dumps(ex)), job_dir, "--metrics-port", "0")
        url = wait_for(lambda: (load_job(job_dir) or {}).get("metricsUrl"), 60, what="metricsUrl")
        with open(load_job(job_dir)["metricsTokenFile"]) as f:
            token = f.read().strip()
        m = wait_for(lambda: re.search(r'ztrain_allreduce_seconds_count\{replica="workerpool0-0"\} (\d+)',
                                       http(url, token=token)[1]), 60, what="the chief's all-reduce histogram")
        self.assertGreater(int(m.group(1)), 0)
        self.assertEqual(job.wait(timeout=300), 0, job.err[-3000:])
        # job.json keeps the last one: every wait counted, each in a bucket
        h = load_job(job_dir)["latency"]["allreduce"]["workerpool0-0"]
        self.assertEqual(len(h["counts"]), len(h["le"]) + 1)
        self.assertGreater(sum(h["counts"]), 50)
        self.assertGreater(h["sum"], 0)

    def test_beyond_loopback_needs_security_off(self):
        d = tmpdir("watch-prom-addr-")
        job = Job(self, async_job(d, epochs=1, evaluator=False), os.path.join(d, "job"), "--metrics-port", "0",
                  env={"ZT_METRICS_ADDR": "0.0.0.0"})
        self.assertEqual(job.wait(timeout=60), 1)
        self.assertIn("ZT_METRICS_ADDR=0.0.0.0: metrics served beyond this machine are not authenticated; that "
                      "needs ZT_SECURITY=off", job.err)
        r = subprocess.run([ZTRAIN, "run", "x.json", "--metrics-port", "70000"], capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--metrics-port: '70000' is not a port", r.stderr)
        # a port that is taken: a warning and another port, not a failed job
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen(1)
            port = taken.getsockname()[1]
            d2 = tmpdir("watch-prom-taken-")
            job = Job(self, async_job(d2, epochs=1, evaluator=False), os.path.join(d2, "job"), "--metrics-port",
                      str(port))
            self.assertEqual(job.wait(timeout=120), 0, job.err[-3000:])
        self.assertIn("--metrics-port %d: cannot serve metrics on 127.0.0.1:%d" % (port, port), job.err)
        self.assertIn("serving on a port the system picks instead", job.err)
        url = load_job(os.path.join(d2, "job"))["metricsUrl"]
        self.assertNotEqual(url, "http://127.0.0.1:%d/metrics" % port)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class StudyHParams(unittest.TestCase):
    """A study of four trials (a number, a category, a discrete value) in
    TensorBoard's HParams dashboard: a real `tensorboard` serves the
    study's folder; the dashboard's own requests list the experiment's
    parameters and every trial with its values, status and both metrics."""

    def test_every_trial_in_the_dashboard(self):
        sd = run_study(self, "watch-study-", [X, OPT, {"parameterId": "n", "discreteValueSpec": {"values": [32, 64]}}], 4,
                       cost=True)
        with open(os.path.join(sd, "study.json")) as f:
            study = json.load(f)
        port = free_port()
        tb = subprocess.Popen([os.path.join(os.path.dirname(TOOLS), "tensorboard"), "--logdir",
                               os.path.join(sd, "tensorboard"), "--host", "127.0.0.1", "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        self.addCleanup(lambda: (tb.poll() is None and os.killpg(tb.pid, signal.SIGKILL), tb.wait()))

        def post(path, body):
            req = urllib.request.Request("http://127.0.0.1:%d/data/plugin/hparams/%s" % (port, path),
                                         data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=30) as f:
                return json.load(f)

        deadline = time.monotonic() + 60
        while True:
            try:
                exp = post("experiment", {"experimentName": ""})
                break
            except OSError:
                if time.monotonic() > deadline or tb.poll() is not None:
                    raise
                time.sleep(0.5)
        infos = {h["name"]: h for h in exp["hparamInfos"]}
        self.assertEqual(sorted(infos), ["n", "opt", "x"])
        self.assertEqual(infos["opt"]["domainDiscrete"], ["adam", "sgd"])
        self.assertEqual(infos["n"]["domainDiscrete"], [32, 64])
        self.assertEqual(infos["x"]["domainInterval"], {"minValue": 0, "maxValue": 1})
        # every metric, and the study's hypervolume as each trial ended
        self.assertEqual([m["name"]["tag"] for m in exp["metricInfos"]], ["score", "cost", "hypervolume"])
        groups = post("session_groups", {
            "experimentName": "", "startIndex": 0, "sliceSize": 100, "colParams": [],
            "allowedStatuses": ["STATUS_UNKNOWN", "STATUS_SUCCESS", "STATUS_FAILURE", "STATUS_RUNNING"]})
        got = {g["name"]: g for g in groups["sessionGroups"]}
        self.assertEqual(sorted(got), ["trial-%s" % t["id"] for t in study["trials"]])
        hvs = []
        for t in study["trials"]:
            g = got["trial-%s" % t["id"]]
            self.assertEqual(g["hparams"], t["parameters"])
            self.assertEqual(g["sessions"][0]["status"], "STATUS_SUCCESS")
            values = {v["name"]["tag"]: v["value"] for v in g["metricValues"]}
            self.assertAlmostEqual(values["score"], t["finalMeasurement"], places=5)
            self.assertAlmostEqual(values["cost"], t["finalMeasurements"]["cost"], places=5)
            hvs.append(values["hypervolume"])
        self.assertTrue(any(abs(v - study["hypervolume"]["value"]) < 1e-5 for v in hvs),  # the last trial's
                        (hvs, study["hypervolume"]))


def netlog_responses(path):
    """{url: body bytes} of every response a Chromium NetLog (captured with
    --net-log-capture-mode=Everything) holds: what the page asked for."""
    with open(path) as f:
        log = json.load(f)
    types = {v: k for k, v in log["constants"]["logEventTypes"].items()}
    url, body = {}, {}
    for e in log["events"]:
        src, t, p = e["source"]["id"], types.get(e["type"]), e.get("params", {})
        if t == "URL_REQUEST_START_JOB" and "url" in p:
            url[src] = p["url"]
        elif t == "URL_REQUEST_JOB_FILTERED_BYTES_READ" and "bytes" in p:
            body[src] = body.get(src, b"") + base64.b64decode(p["bytes"])
    return {url[s]: b for s, b in body.items() if s in url}


class Browser(unittest.TestCase):
    """TensorBoard's dashboards in Debian's headless Chromium: the scalars
    of a job and the HParams view of a study, each page's own data
    requests (Chromium's NetLog) holding the runs, tags and trials, and a
    screenshot of each kept in <build>/test-artifacts/."""

    def setUp(self):
        self.chromium = shutil.which("chromium")
        self.assertTrue(self.chromium, "Debian's chromium is not installed (scripts/deps.sh installs it)")
        self.art = os.path.join(os.environ.get("ZT_BUILD", os.path.join(ROOT, "build")), "test-artifacts")
        os.makedirs(self.art, exist_ok=True)

    def serve(self, logdir):
        port = free_port()
        tb = subprocess.Popen([os.path.join(os.path.dirname(TOOLS), "tensorboard"), "--logdir", logdir, "--host",
                               "127.0.0.1", "--port", str(port)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
        self.addCleanup(lambda: (tb.poll() is None and os.killpg(tb.pid, signal.SIGKILL), tb.wait()))
        wait_for(lambda: self._up(port, tb), 60, step=0.3, what="tensorboard to listen")
        return port

    def _up(self, port, tb):
        self.assertIsNone(tb.poll(), "tensorboard exited")
        try:
            return http("http://127.0.0.1:%d/data/plugins_listing" % port)[0] == 200
        except OSError:
            return False

    def browse(self, port, fragment, shot):
        """Loads the dashboard; returns what the page fetched ({url: body})."""
        d = tmpdir("watch-chromium-")
        net = os.path.join(d, "net.json")
        png = os.path.join(self.art, shot)
        # forceSVG: TensorBoard's charts as SVG, which a GPU-less headless browser draws
        r = subprocess.run([self.chromium, "--headless=new", "--no-sandbox", "--disable-gpu",
                            "--user-data-dir=" + os.path.join(d, "profile"), "--window-size=1280,860",
                            "--virtual-time-budget=20000", "--log-net-log=" + net,
                            "--net-log-capture-mode=Everything", "--screenshot=" + png,
                            "http://127.0.0.1:%d/?forceSVG=true#%s" % (port, fragment)],
                           capture_output=True, text=True, timeout=180)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        with open(png, "rb") as f:
            head = f.read(8)
        self.assertEqual(head, b"\x89PNG\r\n\x1a\n")
        self.assertGreater(os.path.getsize(png), 20000)  # a page drawn, not a blank one
        return netlog_responses(net)

    def test_scalars_dashboard(self):
        d = tmpdir("watch-browser-")
        job_dir = os.path.join(d, "job")
        job = Job(self, async_job(d, epochs=2), job_dir)
        self.assertEqual(job.wait(timeout=300), 0, job.err[-3000:])
        got = self.browse(self.serve(os.path.join(job_dir, "logs")), "timeseries", "tensorboard-scalars.png")
        tags = [b for u, b in got.items() if u.endswith("/data/plugin/timeseries/tags")]
        self.assertTrue(tags, sorted(got))
        scalars = json.loads(tags[0])["scalars"]["runTagInfo"]
        self.assertEqual(sorted(scalars), ["eval", "train"])
        self.assertEqual(sorted(scalars["eval"]), ["accuracy", "loss"])
        for tag in ("loss", "examples_per_sec", "step_compute_ms", "step_exchange_ms", "learning_rate", "accuracy"):
            self.assertIn(tag, scalars["train"])
        # the cards' points were fetched (which cards the page fetches first,
        # and so which runs they hold, varies: the cards in view, at least)
        fetched = [s for u, b in got.items() if u.endswith("/data/plugin/timeseries/timeSeries")
                   for s in json.loads(b)]
        self.assertTrue(fetched, sorted(got))
        self.assertEqual({s["plugin"] for s in fetched}, {"scalars"})
        runs = {run for s in fetched for run, points in s["runToSeries"].items() if points}
        self.assertTrue(runs and runs <= {"eval", "train"}, runs)
        self.assertTrue({s["tag"] for s in fetched} <= set(scalars["train"]) | set(scalars["eval"]))

    def test_hparams_dashboard(self):
        sd = run_study(self, "watch-browser-study-", [X, OPT], 5)
        got = self.browse(self.serve(os.path.join(sd, "tensorboard")), "hparams", "tensorboard-hparams.png")
        groups = [b for u, b in got.items() if u.endswith("/data/plugin/hparams/session_groups")]
        self.assertTrue(groups, sorted(got))
        names = set()
        for b in groups:
            names |= {g["name"] for g in json.loads(b)["sessionGroups"]}
        self.assertEqual(names, {"trial-%d" % i for i in range(1, 6)})
        exp = [b for u, b in got.items() if u.endswith("/data/plugin/hparams/experiment")]
        self.assertEqual(sorted(h["name"] for h in json.loads(exp[0])["hparamInfos"]), ["opt", "x"])


if __name__ == "__main__":
    import toolvenv
    TOOLS = toolvenv.python()
    ztest.main()
