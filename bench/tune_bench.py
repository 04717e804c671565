#!/usr/bin/env python3
"""Search quality: `ztrain tune`'s default search (Bayesian) against
Optuna 5 (its GPSampler and its default TPE sampler) on the functions of
bench/tune_objectives.py, the same budgets and seeds in the same run. Every
ztrain trial is a real job that reports through the hypertune file; Optuna
calls the same functions in its own process.

  branin     25 trials, 8 seeds      regret: best found - the minimum
  hartmann6  40 trials, 6 seeds
  mixed      30 trials, 6 seeds      (log, linear, integer, a 4-way category)
  parallel   hartmann6 with 4 trials at a time (parallelTrialCount 4)
             against ztrain's one at a time
  zdt1       40 trials, 4 seeds      hypervolume of the front (2 objectives)

Prints each method's median, first and third quartiles, and the ratio of
ztrain's median to Optuna GPSampler's, with how far that ratio moves when
the seeds are drawn again with replacement (the 5th to 95th percentile of
2000 draws) and on how many seeds each did better. Optuna runs in a
virtual environment made on first use in build/optuna-venv (optuna 5.0.0,
scipy and a CPU torch from PyPI), or in the python that --optuna names.

    python3 bench/tune_bench.py [build/bin] [--only a,b,...] [--seeds N] [--optuna PYTHON] [--no-optuna]
"""
import sys
import benchargs  # bench/ is the script's own folder, first on sys.path
if sys.argv[1:2] != ["--optuna-child"]:  # the script itself, in Optuna's python
    benchargs.check(__doc__, ('--only', '--seeds', '--optuna'), ('--no-optuna',), 1)
import json
import os
import random
import statistics
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tune_objectives as tob  # noqa: E402

OBJ = os.path.join(HERE, "tune_objectives.py")
# name -> (problem, trials, seeds, parallel)
CASES = {"branin": ("branin", 25, 8, 1), "hartmann6": ("hartmann6", 40, 6, 1), "mixed": ("mixed", 30, 6, 1),
         "parallel": ("hartmann6", 40, 6, 4), "zdt1": ("zdt1", 40, 4, 1)}
OPTUNA_PACKAGES = ["optuna==5.0.0", "scipy", "torch"]


def arg(name, default=None):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def vertex_params(params):
    out = []
    for name, kind, lo, hi, log in params:
        if kind == "double":
            p = {"parameterId": name, "doubleValueSpec": {"minValue": lo, "maxValue": hi}}
            if log:
                p["scaleType"] = "UNIT_LOG_SCALE"
        elif kind == "int":
            p = {"parameterId": name, "integerValueSpec": {"minValue": str(lo), "maxValue": str(hi)}}
        else:
            p = {"parameterId": name, "categoricalValueSpec": {"values": lo}}
        out.append(p)
    return out


def ztrain_run(binary, problem, trials, parallel, seed, d):
    """The values of every finished trial of one study, and its seconds."""
    params = tob.PROBLEMS[problem][1]
    metrics = [{"metricId": m, "goal": "MINIMIZE"} for m in (("f1", "f2") if problem == "zdt1" else ("value",))]
    spec = {"studySpec": {"metrics": metrics, "parameters": vertex_params(params)},
            "maxTrialCount": trials, "parallelTrialCount": parallel,
            "trialJobSpec": {"workerPoolSpecs": [{"machineSpec": {"machineType": "n1-standard-4"},
                                                  "replicaCount": 1, "containerSpec": {
                                                      "imageUri": "local",
                                                      "command": [sys.executable, OBJ, "--problem=" + problem]}}]}}
    path = os.path.join(d, "%s-%d-%d.json" % (problem, parallel, seed))
    with open(path, "w") as f:
        json.dump(spec, f)
    sd = path[:-5]
    t0 = time.time()
    r = subprocess.run([os.path.join(binary, "ztrain"), "tune", path, "--study-dir", sd, "--seed", str(seed)],
                       capture_output=True, text=True)
    secs = time.time() - t0
    if r.returncode != 0:
        sys.exit("ztrain tune %s failed:\n%s" % (path, (r.stdout + r.stderr)[-3000:]))
    with open(os.path.join(sd, "study.json")) as f:
        doc = json.load(f)
    vals = []
    for t in doc["trials"]:
        if t["state"] != "SUCCEEDED":
            continue
        if problem == "zdt1":
            vals.append((t["finalMeasurements"]["f1"], t["finalMeasurements"]["f2"]))
        else:
            vals.append(t["finalMeasurement"])
    return vals, secs


def optuna_child():
    """In Optuna's python: one study, its values as JSON on stdout."""
    import optuna
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    problem, sampler, seed, trials = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    fn, params, _ = tob.PROBLEMS[problem]

    def objective(t):
        p = {}
        for name, kind, lo, hi, log in params:
            if kind == "double":
                p[name] = t.suggest_float(name, lo, hi, log=log)
            elif kind == "int":
                p[name] = t.suggest_int(name, lo, hi)
            else:
                p[name] = t.suggest_categorical(name, lo)
        return fn(p)

    smp = optuna.samplers.GPSampler(seed=seed) if sampler == "gp" else optuna.samplers.TPESampler(seed=seed)
    if problem == "zdt1":
        st = optuna.create_study(directions=["minimize", "minimize"], sampler=smp)
    else:
        st = optuna.create_study(direction="minimize", sampler=smp)
    st.optimize(objective, n_trials=trials)
    vals = [list(t.values) if problem == "zdt1" else t.value for t in st.trials if t.values]
    print(json.dumps(vals))


def optuna_python():
    if "--no-optuna" in sys.argv:
        return None
    if arg("--optuna"):
        return arg("--optuna")
    build = os.path.join(HERE, "..", "build")
    venv = os.path.join(build, "optuna-venv")
    py = os.path.join(venv, "bin", "python")
    stamp = os.path.join(venv, "ztrain-packages")
    if os.path.exists(stamp) and open(stamp).read() == " ".join(OPTUNA_PACKAGES):
        return py
    print("making %s (%s) ..." % (venv, " ".join(OPTUNA_PACKAGES)), flush=True)
    subprocess.run(["/usr/bin/python3", "-m", "venv", venv], check=True)
    r = subprocess.run([os.path.join(venv, "bin", "pip"), "install", "-q", *OPTUNA_PACKAGES])
    if r.returncode != 0:
        print("could not install Optuna: no Optuna peer")
        return None
    with open(stamp, "w") as f:
        f.write(" ".join(OPTUNA_PACKAGES))
    return py


def optuna_run(py, problem, sampler, seed, trials):
    r = subprocess.run([py, os.path.abspath(__file__), "--optuna-child", problem, sampler, str(seed), str(trials)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("Optuna (%s, %s, seed %d) failed:\n%s" % (problem, sampler, seed, r.stderr[-3000:]))
    return [tuple(v) if isinstance(v, list) else v for v in json.loads(r.stdout)]


def score(problem, vals):
    """Regret (lower is better), or for zdt1 the hypervolume (higher)."""
    if problem == "zdt1":
        return tob.hypervolume(vals)
    return min(vals) - tob.PROBLEMS[problem][2]


def quartiles(xs):
    xs = sorted(xs)
    if len(xs) < 2:
        return xs[0], xs[0], xs[0]
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], statistics.median(xs), q[2]


def ratio_interval(mine, peer, higher_better):
    """The ratio of the medians over seeds drawn again with replacement
    (the same seeds for both, 2000 draws, a fixed generator): its 5th and
    95th percentiles, and on how many seeds ztrain did better, as worse."""
    rng, n, ratios = random.Random(12345), len(mine), []
    for _ in range(2000):
        pick = [rng.randrange(n) for _ in range(n)]
        a, b = statistics.median(mine[i] for i in pick), statistics.median(peer[i] for i in pick)
        ratios.append(a / b if b > 0 else float("inf") if a > 0 else 1.0)
    ratios.sort()
    better = sum(1 for a, b in zip(mine, peer) if (a > b if higher_better else a < b))
    worse = sum(1 for a, b in zip(mine, peer) if (a < b if higher_better else a > b))
    return ratios[len(ratios) // 20], ratios[len(ratios) * 19 // 20], better, worse


def main():
    binary = next((a for a in sys.argv[1:] if not a.startswith("--") and
                   sys.argv[sys.argv.index(a) - 1] not in ("--only", "--seeds", "--optuna")), "build/bin")
    only = arg("--only", ",".join(CASES)).split(",")
    py = optuna_python()
    d = tempfile.mkdtemp(prefix="ztrain-tune-bench-")
    summary, launch = [], []
    for case in only:
        problem, trials, seeds, parallel = CASES[case]
        seeds = int(arg("--seeds", seeds))
        what = "hypervolume (higher is better)" if problem == "zdt1" else "regret (lower is better)"
        print("\n%s: %d trials, %d seeds, %d at a time; %s" % (case, trials, seeds, parallel, what), flush=True)
        methods = ["ztrain"] + (["ztrain-1-at-a-time"] if parallel > 1 else []) + \
                  (["optuna-gp", "optuna-tpe"] if py and parallel == 1 else [])
        res = {m: [] for m in methods}
        for seed in range(1, seeds + 1):
            row = []
            for m in methods:
                if m.startswith("ztrain"):
                    vals, secs = ztrain_run(binary, problem, trials, 1 if m != "ztrain" else parallel, seed, d)
                    launch.append(secs / trials * (parallel if m == "ztrain" else 1))
                else:
                    vals = optuna_run(py, problem, m[7:], seed, trials)
                res[m].append(score(problem, vals))
                row.append("%s %.4f" % (m, res[m][-1]))
            print("  seed %d: %s" % (seed, ", ".join(row)), flush=True)
        print("  %-20s %10s %10s %10s" % ("method", "median", "q1", "q3"))
        for m in methods:
            q1, med, q3 = quartiles(res[m])
            print("  %-20s %10.4f %10.4f %10.4f" % (m, med, q1, q3))
        ref = "optuna-gp" if "optuna-gp" in res else "ztrain-1-at-a-time" if parallel > 1 else None
        if ref:
            a, b = statistics.median(res["ztrain"]), statistics.median(res[ref])
            ratio = (a / b if b > 0 else float("inf")) if problem != "zdt1" else (a / b if b > 0 else float("nan"))
            lo, hi, better, worse = ratio_interval(res["ztrain"], res[ref], problem == "zdt1")
            print("  ztrain / %s: %.2fx (%s); over the seeds drawn again, 90%% of ratios in %.2f-%.2fx; "
                  "seed by seed, ztrain better on %d, worse on %d of %d" % (
                      ref, ratio, "higher is better" if problem == "zdt1" else "lower is better", lo, hi, better,
                      worse, len(res["ztrain"])))
            summary.append((case, ref, statistics.median(res["ztrain"]), statistics.median(res[ref]), ratio))
    print("\nsummary (medians):")
    for case, ref, a, b, ratio in summary:
        print("  %-10s ztrain %.4f  %s %.4f  ratio %.2fx" % (case, a, ref, b, ratio))
    if launch:
        print("a trial, launch to result: %.2f s median (its share of the study's wall time)"
              % statistics.median(launch))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--optuna-child":
        optuna_child()
    else:
        main()
