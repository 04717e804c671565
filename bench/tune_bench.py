#!/usr/bin/env python3
"""Search quality: Bayesian optimisation against random search in `ztrain
tune`, over 10 seeds at 20 trials each, on the synthetic two-parameter
objective of examples/hypertune_objective.py (every trial a real job that
reports through the hypertune file); and Optuna's default sampler (TPE) on
the same objective and budget when Optuna is installed (pip install optuna).
Prints every seed's best and the median best of each method.

    python3 bench/tune_bench.py [build/bin] [--seeds N] [--trials N]
"""
import benchargs  # bench/ is the script's own folder, first on sys.path
benchargs.check(__doc__, ('--seeds', '--trials'), (), 1)
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

BIN = next((a for a in sys.argv[1:] if not a.startswith("--") and not a.isdigit()), "build/bin")
SEEDS = int(sys.argv[sys.argv.index("--seeds") + 1]) if "--seeds" in sys.argv else 10
TRIALS = int(sys.argv[sys.argv.index("--trials") + 1]) if "--trials" in sys.argv else 20
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OBJ = os.path.join(ROOT, "examples", "hypertune_objective.py")


def score(x, y):
    return 1 - (x - 0.3) ** 2 - (math.log10(y) + 2) ** 2 / 4


def ztrain_best(algorithm, seed, d):
    spec = {"studySpec": {"metrics": [{"metricId": "score", "goal": "MAXIMIZE"}],
                          "parameters": [
                              {"parameterId": "x", "doubleValueSpec": {"minValue": 0, "maxValue": 1}},
                              {"parameterId": "y", "doubleValueSpec": {"minValue": 0.0001, "maxValue": 1},
                               "scaleType": "UNIT_LOG_SCALE"}]},
            "maxTrialCount": TRIALS, "parallelTrialCount": 1,
            "trialJobSpec": {"workerPoolSpecs": [{"machineSpec": {"machineType": "n1-standard-4"},
                                                  "replicaCount": 1, "containerSpec": {
                                                      "imageUri": "local", "command": ["python3", OBJ]}}]}}
    if algorithm:
        spec["studySpec"]["algorithm"] = algorithm
    path = os.path.join(d, "study-%s-%d.json" % (algorithm or "bayes", seed))
    json.dump(spec, open(path, "w"))
    sd = path[:-5]
    subprocess.run([os.path.join(BIN, "ztrain"), "tune", path, "--study-dir", sd, "--seed", str(seed)],
                   capture_output=True, env=dict(os.environ, OBJECTIVE_STEPS="1"), check=True)
    return json.load(open(os.path.join(sd, "study.json")))["bestTrial"]["finalMeasurement"]


def optuna_best(seed):
    import optuna
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    st = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=seed))
    st.optimize(lambda t: score(t.suggest_float("x", 0, 1), t.suggest_float("y", 1e-4, 1, log=True)),
                n_trials=TRIALS)
    return st.best_value


def main():
    try:
        import optuna  # noqa: F401
        have_optuna = True
    except ImportError:
        have_optuna = False
        print("Optuna not installed (pip install optuna): no Optuna peer")
    d = tempfile.mkdtemp(prefix="ztrain-tune-bench-")
    rows = {"random": [], "bayesian": [], "optuna-tpe": []}
    print("best score after %d trials (maximum 1.0), per seed:" % TRIALS)
    print("%5s %10s %10s %12s" % ("seed", "random", "bayesian", "optuna-tpe"))
    for seed in range(1, SEEDS + 1):
        r = ztrain_best("RANDOM_SEARCH", seed, d)
        b = ztrain_best(None, seed, d)
        o = optuna_best(seed) if have_optuna else float("nan")
        rows["random"].append(r)
        rows["bayesian"].append(b)
        rows["optuna-tpe"].append(o)
        print("%5d %10.4f %10.4f %12.4f" % (seed, r, b, o))
        sys.stdout.flush()
    print("\nmedian best: random %.4f, bayesian %.4f%s" % (
        statistics.median(rows["random"]), statistics.median(rows["bayesian"]),
        ", optuna-tpe %.4f" % statistics.median(rows["optuna-tpe"]) if have_optuna else ""))
    wins = sum(b > r for b, r in zip(rows["bayesian"], rows["random"]))
    print("bayesian beat random on %d of %d seeds" % (wins, SEEDS))


if __name__ == "__main__":
    main()
