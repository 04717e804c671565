"""Hyperparameter studies (`ztrain tune`), on real trial jobs: validation,
grid covers exactly the grid, random respects bounds and log scales, median
stopping stops a clearly bad trial, parallelTrialCount is never exceeded, a
failing trial is counted and the study goes on (and fails past
maxFailedTrialCount), Ctrl-C stops every trial, status reads the results."""
import csv
import io
import json
import math
import os
import re
import shutil
import signal
import subprocess
import time
import unittest

import ztest  # noqa: E402
from ztest import ZTRAIN, descendants, tmpdir, wait_for, write, ztrain

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
OBJECTIVE = os.path.join(ROOT, "examples", "hypertune_objective.py")


def study(params, algorithm=None, max_trials=6, parallel=1, extra=None, command=None, **fields):
    spec = {"displayName": "t", "studySpec": {"metrics": [{"metricId": "score", "goal": "MAXIMIZE"}],
                                               "parameters": params},
            "maxTrialCount": max_trials, "parallelTrialCount": parallel,
            "trialJobSpec": {"workerPoolSpecs": [{
                "machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
                "containerSpec": {"imageUri": "local",
                                  "command": command or ["python3", OBJECTIVE]}}]}}
    if algorithm:
        spec["studySpec"]["algorithm"] = algorithm
    spec["studySpec"].update(extra or {})
    spec.update(fields)
    return json.dumps(spec)


X = {"parameterId": "x", "doubleValueSpec": {"minValue": 0, "maxValue": 1}}
Y = {"parameterId": "y", "doubleValueSpec": {"minValue": 0.0001, "maxValue": 1}, "scaleType": "UNIT_LOG_SCALE"}


class Tune(unittest.TestCase):
    def setUp(self):
        self.d = tmpdir("tune-")

    def tune(self, text, *args, env=None, timeout=120):
        path = write(self.d, "study.json", text)
        sd = os.path.join(self.d, "sd")
        r = ztrain("tune", path, "--study-dir", sd, *args, env=env, timeout=timeout)
        doc = None
        if os.path.exists(os.path.join(sd, "study.json")):
            doc = json.load(open(os.path.join(sd, "study.json")))
        return r, doc, sd

    def test_invalid_studies(self):
        cases = [
            (json.dumps({"maxTrialCount": 3}), "studySpec: required"),
            (study([X]).replace('"MAXIMIZE"', '"BIGGER"'),
             'studySpec.metrics[0].goal = "BIGGER": expected MAXIMIZE or MINIMIZE'),
            (study([{"parameterId": "x", "doubleValueSpec": {"minValue": 2, "maxValue": 1}}]),
             "studySpec.parameters[0].doubleValueSpec.maxValue = 1: must be greater than minValue (2)"),
            (study([{"parameterId": "y", "doubleValueSpec": {"minValue": 0, "maxValue": 1},
                     "scaleType": "UNIT_LOG_SCALE"}]), "a log scale needs minValue > 0"),
            (study([X], "GRID_SEARCH"), "GRID_SEARCH needs integer, categorical or discrete parameters; "
                                        "'x' is a doubleValueSpec"),
            (study([X, {"parameterId": "x", "integerValueSpec": {"minValue": 1, "maxValue": 3}}]),
             'studySpec.parameters[1].parameterId = "x": duplicate parameterId'),
            (study([{"parameterId": "c", "categoricalValueSpec": {"values": []}}]),
             "studySpec.parameters[0].categoricalValueSpec.values = []: required: a non-empty list"),
            (study([X], max_trials=0), "maxTrialCount = 0: required: a whole number"),
            (study([X], max_trials=2, parallel=5), "parallelTrialCount = 5: must be at most maxTrialCount (2)"),
            (study([X], "SIMULATED_ANNEALING"), 'studySpec.algorithm = "SIMULATED_ANNEALING": expected'),
            (study([X]).replace('"replicaCount": 1', '"replicaCount": 2'),
             "trialJobSpec.workerPoolSpecs[0].replicaCount = 2: the primary pool must have exactly 1"),
            (study([X]).replace('"parallelTrialCount"', '"paralelTrialCount"'),
             'paralelTrialCount: unknown field; did you mean "parallelTrialCount"?'),
            (study([X]).replace('"metricId"', '"metricID"'),
             'studySpec.metrics[0].metricID: unknown field; did you mean "metricId"?'),
            (study([X]).replace('"replicaCount": 1', '"replicaCount": 1, "replicaCont": 1'),
             'trialJobSpec.workerPoolSpecs[0].replicaCont: unknown field; did you mean "replicaCount"?'),
        ]
        for text, want in cases:
            with self.subTest(want):
                r, _, sd = self.tune(text)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(want, r.stderr)
                self.assertIn("nothing was started", r.stderr)
                self.assertFalse(os.path.exists(os.path.join(sd, "trial-1")))

    def test_grid_covers_exactly_the_grid(self):
        params = [{"parameterId": "n", "integerValueSpec": {"minValue": 1, "maxValue": 3}},
                  {"parameterId": "opt", "categoricalValueSpec": {"values": ["sgd", "adam"]}},
                  {"parameterId": "lr", "discreteValueSpec": {"values": [0.1, 0.01]},
                   "conditionalParameterSpecs": [{"parentDiscreteValues": {"values": [0.1]},
                                                  "parameterSpec": {"parameterId": "mom",
                                                                    "discreteValueSpec": {"values": [0.5, 0.9]}}}]}]
        path = write(self.d, "grid.json", study(params, "GRID_SEARCH", max_trials=100))
        r = ztrain("tune", path, "--study-dir", os.path.join(self.d, "g"), "--suggest", "1000")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.d, "g", "trial-job.json")))  # suggests, starts nothing
        got = json.loads(r.stdout)
        want = []
        for n in (1, 2, 3):
            for o in ("sgd", "adam"):
                for lr in (0.01, 0.1):
                    for mom in ((0.5, 0.9) if lr == 0.1 else (None,)):
                        p = {"n": n, "opt": o, "lr": lr}
                        if mom is not None:
                            p["mom"] = mom
                        want.append(p)
        key = lambda p: json.dumps(p, sort_keys=True)
        self.assertEqual(len(got), len(want))  # 3 x 2 x (1 + 2) = 18, no more
        self.assertEqual(sorted(map(key, got)), sorted(map(key, want)))

    def test_random_bounds_and_scales(self):
        params = [X, Y, {"parameterId": "k", "integerValueSpec": {"minValue": -3, "maxValue": 4}},
                  {"parameterId": "r", "doubleValueSpec": {"minValue": 1, "maxValue": 1000},
                   "scaleType": "UNIT_REVERSE_LOG_SCALE"}]
        path = write(self.d, "rnd.json", study(params, "RANDOM_SEARCH", max_trials=2000))
        r = ztrain("tune", path, "--study-dir", os.path.join(self.d, "r"), "--suggest", "2000", "--seed", "7")
        self.assertEqual(r.returncode, 0, r.stderr)
        got = json.loads(r.stdout)
        self.assertEqual(len(got), 2000)
        xs, ys, ks, rs = ([p[k] for p in got] for k in "xykr")
        self.assertTrue(all(0 <= v <= 1 for v in xs))
        self.assertTrue(all(0.0001 <= v <= 1 for v in ys))
        self.assertTrue(all(isinstance(v, int) and -3 <= v <= 4 for v in ks))
        self.assertEqual(set(ks), set(range(-3, 5)))
        self.assertTrue(all(1 <= v <= 1000 for v in rs))
        frac = lambda vals, cut: sum(v < cut for v in vals) / len(vals)
        self.assertAlmostEqual(frac(xs, 0.5), 0.5, delta=0.05)            # linear
        self.assertAlmostEqual(frac(ys, 0.01), 0.5, delta=0.05)           # log: geometric middle
        self.assertLess(frac(ys, 0.5), 0.95)
        self.assertAlmostEqual(frac(rs, 1000 + 1 - math.sqrt(1000)), 0.5, delta=0.05)  # reverse log
        # seeded: the same seed, the same suggestions
        r2 = ztrain("tune", path, "--study-dir", os.path.join(self.d, "r2"), "--suggest", "2000", "--seed", "7")
        self.assertEqual(r.stdout, r2.stdout)

    def assertRefused(self, r, *wants):
        """Exit 2 (nothing started), each message in stderr."""
        self.assertEqual(r.returncode, 2, r.stderr)
        for want in wants:
            self.assertIn(want, r.stderr)

    def test_study_runs_trials_as_jobs(self):
        r, doc, sd = self.tune(study([X, Y], max_trials=5, parallel=2))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(doc["state"], "SUCCEEDED")
        self.assertEqual(len(doc["trials"]), 5)
        for t in doc["trials"]:
            self.assertEqual(t["state"], "SUCCEEDED")
            self.assertEqual(len(t["measurements"]), 3)  # every intermediate report
            x, y = t["parameters"]["x"], t["parameters"]["y"]
            want = 1 - (x - 0.3) ** 2 - (math.log10(y) + 2) ** 2 / 4
            self.assertAlmostEqual(t["finalMeasurement"], want, places=5)  # LAST: the step-3 value
            job = json.load(open(os.path.join(t["jobDir"], "job.json")))
            self.assertEqual(job["state"], "SUCCEEDED")
            log = open(os.path.join(t["jobDir"], "replica-logs", "workerpool0-0.log")).read()
            self.assertIn("x=%g y=%g" % (x, y), log)  # parameters arrived as --name=value
        best = max(doc["trials"], key=lambda t: t["finalMeasurement"])
        self.assertEqual(doc["bestTrial"]["id"], best["id"])
        self.assertIn("study SUCCEEDED: best trial %s" % best["id"], r.stdout)
        csv = open(os.path.join(sd, "trials.csv")).read().splitlines()
        self.assertEqual(csv[0], "trial,state,x,y,score,measurements")
        self.assertEqual(len(csv), 6)
        s = ztrain("status", "--study-dir", sd)
        self.assertIn("best: trial %s" % best["id"], s.stdout)
        self.assertEqual(ztrain("status", sd).stdout, s.stdout)  # a study's folder as DIR: its study

    def test_legacy_hyperparameters_run_as_a_study(self):
        # AI Platform's config with a hyperparameters block: `ztrain run`
        # runs its study (gcloud ai-platform jobs submit training did),
        # 4 trials of the built-in trainer, 2 at a time, a log-scaled rate
        sd = os.path.join(self.d, "legacy")
        r = ztrain("run", os.path.join(ROOT, "examples", "legacy-hptuning.yaml"), "--job-dir", sd, timeout=240)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("it runs as a study of its trials", r.stderr)
        doc = json.load(open(os.path.join(sd, "study.json")))
        self.assertEqual((doc["state"], len(doc["trials"])), ("SUCCEEDED", 4))
        for t in doc["trials"]:
            self.assertEqual(t["state"], "SUCCEEDED")
            self.assertTrue(1e-4 <= t["parameters"]["learning_rate"] <= 1e-2, t["parameters"])
            plan = json.load(open(os.path.join(t["jobDir"], "job.json")))["plan"]
            self.assertEqual(plan["format"], "trainingInput")  # each trial the legacy job itself
            self.assertIn("--learning_rate=%.8g" % t["parameters"]["learning_rate"], plan["pools"][0]["command"])
            self.assertGreater(t["finalMeasurement"], 0.7)  # the built-in trainer's accuracy
        best = max(doc["trials"], key=lambda t: t["finalMeasurement"])
        self.assertEqual(doc["bestTrial"]["id"], best["id"])
        self.assertIn("study SUCCEEDED: best trial %s: accuracy = " % best["id"], r.stdout)
        # the block's own mistakes, named at its fields before anything starts
        bad = write(self.d, "bad.yaml", "trainingInput:\n  scaleTier: BASIC\n  hyperparameters:\n"
                    "    maxTrials: 2\n    algorithm: ANNEALING\n    params:\n"
                    "      - parameterName: lr\n        type: BOOLEAN\n"
                    "      - parameterName: opt\n        type: CATEGORICAL\n")
        self.assertRefused(ztrain("run", bad, "--job-dir", os.path.join(self.d, "bad")),
                           "bad.yaml:3:3: error: trainingInput.hyperparameters.goal: required: MAXIMIZE or MINIMIZE",
                           "trainingInput.hyperparameters.algorithm = \"ANNEALING\": ALGORITHM_UNSPECIFIED",
                           "trainingInput.hyperparameters.params[0].type = \"BOOLEAN\": required: DOUBLE, INTEGER",
                           "trainingInput.hyperparameters.params[1].categoricalValues: required for type CATEGORICAL")

    def check_curve_stopping(self, rule):
        # 12 trials, 2 at a time, each reporting 8 steps of a curve that
        # rises by the same amount in every trial: a trial that cannot beat
        # the best so far is stopped early, and the best trial never is
        spec = study([X, Y], algorithm="RANDOM_SEARCH", max_trials=12, parallel=2, extra=rule)
        r, doc, _ = self.tune(spec, env={"OBJECTIVE_STEPS": "8", "OBJECTIVE_DELAY": "0.12"}, timeout=240)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(len(doc["trials"]), 12)
        stopped = [t for t in doc["trials"] if t["state"] == "STOPPED"]
        self.assertGreaterEqual(len(stopped), 4, [(t["id"], t["state"]) for t in doc["trials"]])
        for t in stopped:
            self.assertLess(len(t["measurements"]), 8)  # stopped before its end
        def score(t):
            x, y = t["parameters"]["x"], t["parameters"]["y"]
            return 1 - (x - 0.3) ** 2 - (math.log10(y) + 2) ** 2 / 4
        truly_best = max(doc["trials"], key=score)
        self.assertEqual(doc["bestTrial"]["id"], truly_best["id"])  # the best was not lost
        self.assertEqual(truly_best["state"], "SUCCEEDED")
        self.assertIn("STOPPING:", r.stdout)
        return r

    def test_decay_curve_stopping(self):
        r = self.check_curve_stopping({"decayCurveStoppingSpec": {}})
        self.assertRegex(r.stdout, r"forecast \S+ at its end \(the most \d+ completed trials gained after that step\)")

    def test_convex_stopping(self):
        r = self.check_curve_stopping({"convexAutomatedStoppingSpec": {"maxStepCount": "8", "minMeasurementCount": "2"}})
        self.assertRegex(r.stdout, r"rising at most \S+ a step, reaches \S+ by step 8")

    def test_study_stopping_config(self):
        # grid order is ascending: x = 0.3 (the best) first, then worse and
        # worse: after 2 trials without progress the study starts no more
        xs = {"parameterId": "x", "discreteValueSpec": {"values": [0.3, 0.4, 0.5, 0.6, 0.7, 0.8]}}
        spec = study([xs], algorithm="GRID_SEARCH", max_trials=6,
                     extra={"studyStoppingConfig": {"maxNumTrialsNoProgress": 2, "maxNumTrials": 5}})
        r, doc, _ = self.tune(spec)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual([t["parameters"]["x"] for t in doc["trials"]], [0.3, 0.4, 0.5])
        self.assertIn("study STOPPING: 2 trials ended without bettering the best (maxNumTrialsNoProgress 2)",
                      r.stdout)
        self.assertEqual(doc["bestTrial"]["parameters"]["x"], 0.3)
        # the fields a study acts on are checked; one rule at most
        bad = study([X], extra={"medianAutomatedStoppingSpec": {}, "decayCurveStoppingSpec": {},
                                "observationNoise": "LOUD",
                                "studyStoppingConfig": {"maxDurationNoProgress": "soon",
                                                        "maximumRuntimeConstraint": {"endTime": "2030-01-01T00:00:00Z"}}})
        self.assertRefused(self.tune(bad)[0], "studySpec: one early-stopping rule at most",
                           'studySpec.observationNoise = "LOUD": LOW or HIGH',
                           'studySpec.studyStoppingConfig.maxDurationNoProgress = "soon": expected a duration',
                           "studySpec.studyStoppingConfig.maximumRuntimeConstraint = \"2030-01-01T00:00:00Z\": "
                           "give maxDuration")

    def sagemaker_tuning(self, strategy, env=None, top=None, **cfg):
        """A CreateHyperParameterTuningJob of 12 trials, at most 2 at once,
        over examples/epoch_objective.py (its metric printed each epoch);
        top: more of the request's own fields."""
        req = {"HyperParameterTuningJobName": "hb-" + strategy.lower(),
               "HyperParameterTuningJobConfig": dict({
                   "Strategy": strategy,
                   "HyperParameterTuningJobObjective": {"Type": "Maximize", "MetricName": "score"},
                   "ResourceLimits": {"MaxNumberOfTrainingJobs": 12, "MaxParallelTrainingJobs": 2},
                   "ParameterRanges": {"ContinuousParameterRanges": [
                       {"Name": "x", "MinValue": "0", "MaxValue": "1", "ScalingType": "Linear"},
                       {"Name": "y", "MinValue": "0.0001", "MaxValue": "1", "ScalingType": "Logarithmic"}]}}, **cfg),
               "TrainingJobDefinition": {
                   "AlgorithmSpecification": {"TrainingImage": "local", "TrainingInputMode": "File",
                                              "MetricDefinitions": [{"Name": "score", "Regex": "score=(-?[0-9.]+)"}]},
                   "StaticHyperParameters": {"epochs": "27", "sagemaker_program": "\"epoch_objective.py\"",
                                             "sagemaker_submit_directory": json.dumps(os.path.join(ROOT, "examples"))},
                   "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 1},
                   "OutputDataConfig": {"S3OutputPath": os.path.join(self.d, "out")},
                   "StoppingCondition": {"MaxRuntimeInSeconds": 600}}}
        req.update(top or {})
        path = write(self.d, strategy + ".json", json.dumps(req))
        sd = os.path.join(self.d, strategy)
        r = ztrain("tune", path, "--study-dir", sd, env=env, timeout=240)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(os.path.join(sd, "study.json")) as f:
            return r, json.load(f)

    def test_sagemaker_hyperband_against_random(self):
        # an epoch of 0.1 s: a stopped trial runs on for a poll (0.1 s) at most
        r, hb = self.sagemaker_tuning("Hyperband", env={"OBJECTIVE_DELAY": "0.1"}, StrategyConfig={
            "HyperbandStrategyConfig": {"MinResource": 1, "MaxResource": 27}})
        _, rnd = self.sagemaker_tuning("Random")
        self.assertEqual((len(hb["trials"]), len(rnd["trials"])), (12, 12))
        epochs = sum(len(t["measurements"]) for t in hb["trials"])
        self.assertLessEqual(epochs, 12 * 27 // 2, [(t["id"], len(t["measurements"])) for t in hb["trials"]])
        self.assertEqual(sum(len(t["measurements"]) for t in rnd["trials"]), 12 * 27)  # the regex read every epoch
        stopped = [t for t in hb["trials"] if len(t["measurements"]) < 27]
        self.assertGreaterEqual(len(stopped), 4)
        self.assertRegex(r.stdout, r"at rung (1|3|9), \d+ of the \d+ trials that reached it did better")
        best_hb, best_rnd = hb["bestTrial"]["finalMeasurement"], rnd["bestTrial"]["finalMeasurement"]
        self.assertGreaterEqual(best_hb, best_rnd - 0.02 * abs(best_rnd))  # within 2% of random search's
        # WarmStartConfig: a Bayesian job of 4 trials from the random one's
        # study (its directory): the 12 results are the GP's first
        # observations, so its very first trials are the GP's suggestions
        parent = os.path.join(self.d, "Random")
        r, warm = self.sagemaker_tuning("Bayesian", top={"WarmStartConfig": {
            "ParentHyperParameterTuningJobs": [{"HyperParameterTuningJobName": parent}],
            "WarmStartType": "IdenticalDataAndAlgorithm"}},
            ResourceLimits={"MaxNumberOfTrainingJobs": 4, "MaxParallelTrainingJobs": 2})
        self.assertIn("warm start: 12 of the 12 finished trials of %s are the search's first observations"
                      % os.path.realpath(parent), r.stdout + r.stderr)
        self.assertEqual(warm["warmStart"], {"type": "IdenticalDataAndAlgorithm", "parents": [
            {"studyDir": os.path.realpath(parent), "finishedTrials": 12, "observations": 12}]})
        self.assertEqual(len(warm["trials"]), 4)
        self.assertGreaterEqual(warm["bestTrial"]["finalMeasurement"], best_rnd - 0.05 * abs(best_rnd))
        # a type it does not know, a parent that is no study: named
        req = json.load(open(os.path.join(self.d, "Bayesian.json")))
        for wtype, name, want in (("Nearby", parent, 'WarmStartConfig.WarmStartType = "Nearby": required: '
                                   'IdenticalDataAndAlgorithm or TransferLearning'),
                                  ("TransferLearning", "no-such-job", 'WarmStartConfig.ParentHyperParameter'
                                   'TuningJobs[0].HyperParameterTuningJobName = "no-such-job": no earlier study')):
            req["WarmStartConfig"] = {"ParentHyperParameterTuningJobs": [{"HyperParameterTuningJobName": name}],
                                      "WarmStartType": wtype}
            r = ztrain("tune", write(self.d, "w.json", json.dumps(req)), "--study-dir", os.path.join(self.d, "w"))
            self.assertRefused(r, want)
        req["WarmStartConfig"]["ParentHyperParameterTuningJobs"][0]["HyperParameterTuningJobName"] = parent
        req["HyperParameterTuningJobConfig"]["HyperParameterTuningJobObjective"]["Type"] = "Minimize"
        r = ztrain("tune", write(self.d, "w.json", json.dumps(req)), "--study-dir", os.path.join(self.d, "w"))
        self.assertRefused(r, "%s: its study MAXIMIZE score, this one MINIMIZE score: a warm start needs the same "
                              "objective" % os.path.realpath(parent))

    def test_several_metrics_pareto_front(self):
        # maximize score, minimize cost = x + y: over a grid of x (y fixed at
        # 0.1), x = 0.3 has the best score and every smaller x a lower cost,
        # so x <= 0.3 is the front and every x above it is dominated by 0.3
        xs = {"parameterId": "x", "discreteValueSpec": {"values": [0.0, 0.1, 0.2, 0.3, 0.5, 0.7]}}
        spec = json.loads(study([xs], algorithm="GRID_SEARCH", max_trials=6, parallel=2))
        spec["studySpec"]["metrics"].append({"metricId": "cost", "goal": "MINIMIZE"})
        r, doc, sd = self.tune(json.dumps(spec), env={"OBJECTIVE_COST": "1"})
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertNotIn("warning", r.stderr)
        by_x = {t["parameters"]["x"]: t for t in doc["trials"]}
        for x, t in by_x.items():
            self.assertAlmostEqual(t["finalMeasurements"]["cost"], x + 0.1, places=6)
            self.assertAlmostEqual(t["finalMeasurements"]["score"], t["finalMeasurement"], places=9)
        self.assertEqual(sorted(doc["paretoFront"], key=int),
                         sorted((by_x[x]["id"] for x in (0.0, 0.1, 0.2, 0.3)), key=int))
        # the hypervolume the front dominates, both minimised (-score, cost), against the worst of each
        pts = sorted((-t["finalMeasurement"], t["finalMeasurements"]["cost"]) for t in doc["trials"])
        ref = (max(p[0] for p in pts), max(p[1] for p in pts))
        hv, low = 0.0, ref[1]
        for f1, f2 in pts:
            if f2 < low:
                hv, low = hv + (ref[0] - f1) * (low - f2), f2
        self.assertGreater(hv, 0.01)
        self.assertAlmostEqual(doc["hypervolume"]["value"], hv, places=9)
        self.assertEqual(sorted(doc["hypervolume"]["reference"]), ["cost", "score"])
        self.assertAlmostEqual(doc["hypervolume"]["reference"]["score"], -ref[0], places=9)
        self.assertAlmostEqual(doc["hypervolume"]["reference"]["cost"], ref[1], places=9)
        with open(os.path.join(sd, "trials.csv")) as f:
            rows = list(csv.reader(f))
        self.assertEqual(rows[0], ["trial", "state", "x", "score", "cost", "measurements"])
        self.assertEqual(len(rows), 7)

    def test_bayesian_two_metrics_parallel(self):
        # the default search on two metrics (score up, cost = x + y down), a
        # category among the parameters, two trials at a time: every trial
        # distinct and valid, the front and its hypervolume recorded, and
        # each choice logged (debug) with what the model learned
        opt = {"parameterId": "opt", "categoricalValueSpec": {"values": ["adam", "sgd", "rmsprop"]}}
        spec = json.loads(study([X, Y, opt], max_trials=14, parallel=2))
        spec["studySpec"]["metrics"].append({"metricId": "cost", "goal": "MINIMIZE"})
        r, doc, sd = self.tune(json.dumps(spec), "--seed", "3",
                               env={"OBJECTIVE_COST": "1", "OBJECTIVE_STEPS": "1", "ZT_LOG_LEVEL": "debug"})
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(doc["algorithm"], "BAYESIAN")
        trials = doc["trials"]
        self.assertEqual([t["state"] for t in trials], ["SUCCEEDED"] * 14)
        seen = set()
        for t in trials:
            p = t["parameters"]
            self.assertIn(p["opt"], ("adam", "sgd", "rmsprop"))
            self.assertTrue(0 <= p["x"] <= 1 and 0.0001 <= p["y"] <= 1, p)
            key = (p["x"], p["y"], p["opt"])
            self.assertNotIn(key, seen)
            seen.add(key)
        chosen = re.findall(r"search: (\d+) observations, (\d+) running: length scales (\S+) (\S+) (\S+),", r.stderr)
        self.assertGreaterEqual(len(chosen), 14 - 6)  # all but the 6 random ones
        self.assertTrue(any(int(running) == 1 for _, running, *_ in chosen), chosen)  # the other trial ran
        self.assertTrue(doc["paretoFront"])
        pts = sorted((-t["finalMeasurement"], t["finalMeasurements"]["cost"]) for t in trials)
        ref = (max(p[0] for p in pts), max(p[1] for p in pts))
        hv, low = 0.0, ref[1]
        for f1, f2 in pts:
            if f2 < low:
                hv, low = hv + (ref[0] - f1) * (low - f2), f2
        self.assertAlmostEqual(doc["hypervolume"]["value"], hv, places=9)
        st = ztrain("status", sd)  # the front and its hypervolume, as status shows them
        self.assertIn("Pareto front: trial%s %s; hypervolume %.6g" % (
            "s" if len(doc["paretoFront"]) > 1 else "", ", ".join(doc["paretoFront"]), hv), st.stdout)

    def test_a_long_study_keeps_the_model_small(self):
        # a study directory with 450 finished trials (one real, the rest
        # copies of it at other points): the next suggestions model 400 of
        # them (the best and the latest)
        r, doc, sd = self.tune(study([X, Y], max_trials=1), env={"OBJECTIVE_STEPS": "1"})
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        one = doc["trials"][0]
        doc["trials"] = []
        for i in range(450):
            t = json.loads(json.dumps(one))
            x, y = (i * 0.618) % 1, 10 ** (-4 * ((i * 0.382) % 1))
            t["id"], t["parameters"] = str(i + 1), {"x": round(x, 6), "y": float("%.6g" % y)}
            t["scaledParameters"] = [round(x, 6), 1 + math.log10(y) / 4]
            t["finalMeasurement"] = 1 - (x - 0.3) ** 2
            doc["trials"].append(t)
        spec = study([X, Y], max_trials=460)
        doc["spec"] = json.loads(spec)  # as if this study had run them
        with open(os.path.join(sd, "study.json"), "w") as f:
            json.dump(doc, f)
        r = ztrain("tune", write(self.d, "long.json", spec), "--study-dir", sd, "--suggest", "2",
                   env={"ZT_LOG_LEVEL": "debug"}, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertRegex(r.stderr, r"search: 400 observations, 0 running")
        got = json.loads(r.stdout)
        self.assertEqual(len(got), 2)
        for p in got:
            self.assertTrue(0 <= p["x"] <= 1 and 0.0001 <= p["y"] <= 1, p)
        # a record that is not JSON is not taken over (nor overwritten)
        with open(os.path.join(sd, "study.json"), "a") as f:
            f.write("garbage")
        r = ztrain("tune", write(self.d, "long.json", spec), "--study-dir", sd, "--suggest", "1")
        self.assertRefused(r, "%s:1:" % os.path.join(sd, "study.json"),
                           "error: cannot be read as a study's record (end of file expected")
        with open(os.path.join(sd, "study.json")) as f:
            self.assertTrue(f.read().endswith("garbage"))

    def test_parameters_reach_every_user_program(self):
        # A single-program trial with a parameter-server pool: the program in
        # pool 2 declares the same required flag as the chief's.
        ps = os.path.join(self.d, "ps.py")
        write(self.d, "ps.py", "import argparse, time\np = argparse.ArgumentParser()\n"
              "p.add_argument('--x', type=float, required=True)\np.parse_known_args()\ntime.sleep(60)\n")
        spec = json.loads(study([X], max_trials=2))
        spec["trialJobSpec"]["workerPoolSpecs"] += [
            {}, {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
                 "containerSpec": {"imageUri": "local", "command": ["python3", ps]}}]
        r, doc, _ = self.tune(json.dumps(spec), env={"OBJECTIVE_DELAY": "0.3"})
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual([t["state"] for t in doc["trials"]], ["SUCCEEDED"] * 2)

    def test_median_stopping_stops_a_bad_trial(self):
        # grid order is ascending: 0 (0.91), 0.29 (0.9999), 0.3 (1.0, best so far), 9 (awful)
        params = [{"parameterId": "x", "discreteValueSpec": {"values": [0, 0.29, 0.3, 9]}}]
        r, doc, _ = self.tune(study(params, "GRID_SEARCH", max_trials=4,
                                    extra={"medianAutomatedStoppingSpec": {}}),
                              env={"OBJECTIVE_STEPS": "6", "OBJECTIVE_DELAY": "0.4"}, timeout=200)
        self.assertEqual(r.returncode, 0, r.stderr)
        states = {t["parameters"]["x"]: t for t in doc["trials"]}
        self.assertEqual([states[x]["state"] for x in (0, 0.29, 0.3)], ["SUCCEEDED"] * 3)
        bad = states[9]
        self.assertEqual(bad["state"], "STOPPED")
        self.assertLess(len(bad["measurements"]), 6)  # it did not run to the end
        self.assertNotEqual(doc["bestTrial"]["parameters"]["x"], 9)

    def test_parallel_limit_and_failures(self):
        log = os.path.join(self.d, "spans.log")
        cmd = ["sh", "-c", 'echo "start $(date +%s.%N)" >> ' + log + '; python3 ' + OBJECTIVE +
               ' "$@"; rc=$?; echo "end $(date +%s.%N)" >> ' + log + '; exit $rc', "sh"]
        params = [{"parameterId": "x", "discreteValueSpec": {"values": [0.1, 0.2, 0.3, 0.4]}},
                  {"parameterId": "fail", "integerValueSpec": {"minValue": 0, "maxValue": 1}}]
        r, doc, _ = self.tune(study(params, "GRID_SEARCH", max_trials=8, parallel=3, command=cmd,
                                    maxFailedTrialCount=4),
                              env={"OBJECTIVE_DELAY": "0.2"}, timeout=200)
        self.assertEqual(r.returncode, 0, r.stderr)
        events = sorted((float(t), kind) for kind, t in (l.split() for l in open(log)))
        running = peak = 0
        for _, kind in events:
            running += 1 if kind == "start" else -1
            peak = max(peak, running)
        self.assertLessEqual(peak, 3)
        self.assertGreaterEqual(peak, 2)
        failed = [t for t in doc["trials"] if t["state"] == "FAILED"]
        self.assertEqual(len(failed), 4)
        self.assertTrue(all(t["parameters"]["fail"] == 1 for t in failed))
        self.assertEqual(doc["failedTrials"], 4)
        self.assertEqual(len(doc["trials"]), 8)  # the study went on
        self.assertEqual(doc["state"], "SUCCEEDED")
        # past maxFailedTrialCount the study fails
        r, doc, _ = self.tune(study(params, "GRID_SEARCH", max_trials=8, parallel=1,
                                    maxFailedTrialCount=1), "--overwrite")
        self.assertEqual(r.returncode, 1)
        self.assertEqual(doc["state"], "FAILED")
        self.assertEqual(doc["failedTrials"], 2)

    def test_example_studies_validate(self):
        for name in sorted(os.listdir(os.path.join(ROOT, "examples"))):
            if "study" in name and name.endswith(".json"):
                with self.subTest(name):
                    r = ztrain("tune", os.path.join(ROOT, "examples", name), "--study-dir",
                               os.path.join(self.d, name), "--suggest", "3")
                    self.assertEqual(r.returncode, 0, r.stderr)
                    self.assertEqual(len(json.loads(r.stdout)), 3)

    def test_table_on_a_terminal_lines_otherwise(self):
        path = write(self.d, "tty.json", study([X, Y], max_trials=3, parallel=1))
        r = ztrain("tune", path, "--study-dir", os.path.join(self.d, "plain"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("\033[", r.stdout)  # not a terminal: plain lines
        self.assertIn("trial 1 ACTIVE x=", r.stdout)
        self.assertRegex(r.stdout, r"trial 3 SUCCEEDED score=")
        if not shutil.which("script"):
            self.skipTest("no script(1) to give the study a terminal")
        out = subprocess.run(["script", "-qec", "%s tune %s --study-dir %s" % (
            ZTRAIN, path, os.path.join(self.d, "tty")), "/dev/null"], capture_output=True, text=True,
            timeout=120, env=dict(os.environ, OBJECTIVE_DELAY="0.4")).stdout
        self.assertGreaterEqual(out.count("\033[H\033[J"), 2)  # redrawn in place
        self.assertIn("trial  state      latest       final        parameters", out)
        self.assertNotIn("trial 1 ACTIVE x=", out)

    def test_ctrl_c_stops_every_trial(self):
        path = write(self.d, "slow.json", study([X, Y], max_trials=4, parallel=2))
        p = subprocess.Popen([ZTRAIN, "tune", path, "--study-dir", os.path.join(self.d, "c")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=dict(os.environ, OBJECTIVE_STEPS="100", OBJECTIVE_DELAY="0.5"),
                             start_new_session=True)
        self.addCleanup(lambda: p.poll() is None and os.killpg(p.pid, signal.SIGKILL))
        kids = wait_for(lambda: (lambda k: k if len(k) >= 4 else None)(descendants(p.pid)),
                        what="two trials running")
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 3, err)
        doc = json.load(open(os.path.join(self.d, "c", "study.json")))
        self.assertEqual(doc["state"], "CANCELLED")
        wait_for(lambda: not descendants(p.pid), timeout=5, what="no trial left")


def shell_pool(script, n=1):
    return {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": n,
            "containerSpec": {"imageUri": "local", "command": ["sh", "-c", script, "sh"]}}


class Measurements(unittest.TestCase):
    """Where a trial's measurements come from, and what a trial that
    measured nothing is."""

    def setUp(self):
        self.d = tmpdir("meas-")

    def run_study(self, pools, params=None, max_trials=1, metric="score"):
        spec = json.loads(study(params or [X], max_trials=max_trials))
        spec["studySpec"]["metrics"][0]["metricId"] = metric
        spec["trialJobSpec"]["workerPoolSpecs"] = pools
        path = write(self.d, "s.json", json.dumps(spec))
        sd = os.path.join(self.d, "sd")
        r = ztrain("tune", path, "--study-dir", sd, timeout=120)
        return r, json.load(open(os.path.join(sd, "study.json")))

    def test_shell_program_writes_the_metric_file(self):
        # The metric file's folder exists before the trial starts.
        r, doc = self.run_study([shell_pool('echo "{\\"score\\": 0.75}" > "$CLOUD_ML_HP_METRIC_FILE"')])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(doc["trials"][0]["state"], "SUCCEEDED")
        self.assertEqual(doc["trials"][0]["finalMeasurement"], 0.75)

    def test_only_the_primary_replica_counts(self):
        chief = ('until [ -e "$AIP_MODEL_DIR/worker-done" ]; do sleep 0.05; done; '
                 'echo "{\\"score\\": 0.25, \\"global_step\\": \\"1\\"}" > "$CLOUD_ML_HP_METRIC_FILE"')
        worker = ('echo "{\\"score\\": 0.99, \\"global_step\\": \\"9\\"}" > "$CLOUD_ML_HP_METRIC_FILE"; '
                  'mkdir -p "$AIP_MODEL_DIR"; touch "$AIP_MODEL_DIR/worker-done"; sleep 30')
        r, doc = self.run_study([shell_pool(chief), shell_pool(worker, 2)])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        t = doc["trials"][0]
        self.assertEqual(t["state"], "SUCCEEDED")
        self.assertEqual(t["finalMeasurement"], 0.25)
        self.assertEqual(t["measurements"], [[1.0, 0.25]])  # nothing of the workers'

    def test_no_measurement_is_infeasible(self):
        r, doc = self.run_study([shell_pool('echo "{\\"accuracy\\": 0.5, \\"loss\\": 1}" > '
                                            '"$CLOUD_ML_HP_METRIC_FILE"')], max_trials=2)
        for t in doc["trials"]:
            self.assertEqual(t["state"], "INFEASIBLE")
            self.assertIn("reported no 'score'", t["message"])
            self.assertIn("accuracy, loss", t["message"])
        self.assertEqual(doc["failedTrials"], 0)
        self.assertIn("INFEASIBLE: workerpool0-0 reported no 'score'", r.stdout)
        self.assertEqual(r.returncode, 1)  # no trial succeeded


class StudyLife(unittest.TestCase):
    """Ctrl-C, a closed pipe, a killed study, resuming, CSV."""

    def setUp(self):
        self.d = tmpdir("life-")
        self.sd = os.path.join(self.d, "sd")

    def start(self, text, *args, env=None):
        path = write(self.d, "s.json", text)
        p = subprocess.Popen([ZTRAIN, "tune", path, "--study-dir", self.sd, *args],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=dict(os.environ, **(env or {})), start_new_session=True)
        self.addCleanup(lambda: p.poll() is None and os.killpg(p.pid, signal.SIGKILL))
        return p

    def doc(self):
        try:
            return json.load(open(os.path.join(self.sd, "study.json")))
        except (OSError, ValueError):
            return None

    def states(self):
        d = self.doc()
        return [t["state"] for t in d["trials"]] if d else []

    GRID = [{"parameterId": "x", "discreteValueSpec": {"values": [0.1, 0.2, 0.3, 0.4]}}]

    def test_ctrl_c_cancels_and_resume_goes_on(self):
        text = study(self.GRID, "GRID_SEARCH", max_trials=4)
        p = self.start(text, env={"OBJECTIVE_STEPS": "4", "OBJECTIVE_DELAY": "0.5"})
        wait_for(lambda: self.states()[:2] == ["SUCCEEDED", "ACTIVE"], timeout=60, what="trial 2 running")
        p.send_signal(signal.SIGINT)
        p.communicate(timeout=60)
        self.assertEqual(p.returncode, 3)
        doc = self.doc()
        self.assertEqual(doc["state"], "CANCELLED")
        self.assertEqual(self.states(), ["SUCCEEDED", "CANCELLED"])
        self.assertEqual(doc["failedTrials"], 0)  # not failures
        first = doc["trials"][0]
        s = ztrain("status", "--study-dir", self.sd)
        self.assertEqual(s.returncode, 3, s.stdout)
        # The same study again: trial 1 kept, the rest of the grid runs.
        r = ztrain("tune", os.path.join(self.d, "s.json"), "--study-dir", self.sd, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        doc = self.doc()
        self.assertEqual(doc["trials"][0], first | {"scaledParameters": doc["trials"][0]["scaledParameters"]})
        self.assertEqual([t["id"] for t in doc["trials"]], ["1", "3", "4", "5"])
        self.assertEqual(sorted(t["parameters"]["x"] for t in doc["trials"]), [0.1, 0.2, 0.3, 0.4])
        self.assertEqual(self.states(), ["SUCCEEDED"] * 4)
        self.assertFalse(os.path.exists(os.path.join(self.sd, "trial-2")))
        # A different study in the same folder is refused; --overwrite starts over.
        other = study(self.GRID, "GRID_SEARCH", max_trials=2)
        path = write(self.d, "other.json", other)
        r = ztrain("tune", path, "--study-dir", self.sd)
        self.assertEqual(r.returncode, 2)
        self.assertIn("holds the results of another study", r.stderr)
        self.assertIn("maxTrialCount: 2 vs 4", r.stderr)
        r = ztrain("tune", path, "--study-dir", self.sd, "--overwrite", timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual([t["id"] for t in self.doc()["trials"]], ["1", "2"])
        self.assertFalse(os.path.exists(os.path.join(self.sd, "trial-5")))

    def test_head_does_not_kill_the_study(self):
        path = write(self.d, "s.json", study(self.GRID, "GRID_SEARCH", max_trials=4))
        r = subprocess.run(["sh", "-c", '"$0" tune "$1" --study-dir "$2" | head -1', ZTRAIN, path, self.sd],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.stdout.count("\n"), 1)
        wait_for(lambda: self.doc() and self.doc()["state"] != "RUNNING", timeout=60, what="the study's end")
        self.assertEqual(self.doc()["state"], "SUCCEEDED")
        self.assertEqual(self.states(), ["SUCCEEDED"] * 4)

    def test_status_of_a_killed_study(self):
        p = self.start(study(self.GRID, "GRID_SEARCH", max_trials=4),
                       env={"OBJECTIVE_STEPS": "100", "OBJECTIVE_DELAY": "0.5"})
        wait_for(lambda: self.states() == ["ACTIVE"], timeout=60, what="a trial running")
        s = ztrain("status", "--study-dir", self.sd)
        self.assertEqual(s.returncode, 0, s.stdout)
        self.assertIn(": RUNNING", s.stdout)
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        s = ztrain("status", "--study-dir", self.sd)
        self.assertEqual(s.returncode, 1, s.stdout)
        self.assertIn("FAILED (recorded RUNNING, but `ztrain tune` is gone)", s.stdout)
        j = ztrain("status", "--study-dir", self.sd, "--json")
        self.assertEqual(j.returncode, 1)
        doc = json.loads(j.stdout)
        self.assertEqual((doc["state"], doc["recordedState"], doc["processGone"]), ("FAILED", "RUNNING", True))

    def test_trials_csv_is_rfc4180(self):
        params = [{"parameterId": "c", "categoricalValueSpec": {"values": ["a,b", 'say "hi"']}}]
        r = ztrain("tune", write(self.d, "c.json", study(params, "GRID_SEARCH", max_trials=2)),
                   "--study-dir", self.sd, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(self.sd, "trials.csv"), newline="") as f:
            rows = list(csv.reader(f))
        self.assertEqual(rows[0], ["trial", "state", "c", "score", "measurements"])
        self.assertEqual(sorted(row[2] for row in rows[1:]), ['a,b', 'say "hi"'])
        self.assertTrue(all(len(row) == 5 for row in rows))


if __name__ == "__main__":
    ztest.main()
