#!/usr/bin/env python3
"""The search benchmark's test functions, and the trial program that
reports one of them the way a program using cloudml-hypertune does (a JSON
line in CLOUD_ML_HP_METRIC_FILE). Each is minimised.

    python3 tune_objectives.py --problem=NAME --PARAM=VALUE ...

  branin     x1 in [-5, 10], x2 in [0, 15]; minimum 0.397887
  hartmann6  x1..x6 in [0, 1]; minimum -3.32237
  mixed      lr in [1e-4, 0.1] (log), dropout in [0, 1], layers 1..16,
             optimizer sgd|adam|rmsprop|adagrad; minimum 0 (adam, lr 1e-3,
             dropout 0.3, 6 layers)
  zdt1       x1..x4 in [0, 1]; two objectives f1, f2 (the front:
             f2 = 1 - sqrt(f1), hypervolume 0.8767 against (1.1, 1.1))
"""
import json
import math
import os
import sys
import time

H6_A = [[10, 3, 17, 3.5, 1.7, 8], [0.05, 10, 17, 0.1, 8, 14], [3, 3.5, 1.7, 10, 17, 8], [17, 8, 0.05, 10, 0.1, 14]]
H6_P = [[0.1312, 0.1696, 0.5569, 0.0124, 0.8283, 0.5886], [0.2329, 0.4135, 0.8307, 0.3736, 0.1004, 0.9991],
        [0.2348, 0.1451, 0.3522, 0.2883, 0.3047, 0.6650], [0.4047, 0.8828, 0.8732, 0.5743, 0.1091, 0.0381]]
H6_ALPHA = [1.0, 1.2, 3.0, 3.2]
OPTIMIZERS = ["sgd", "adam", "rmsprop", "adagrad"]
# per optimizer: its penalty and its best log10(lr); adam is best, and
# neither of its neighbours in the list is second best
MIXED_PENALTY = {"sgd": 0.25, "adam": 0.0, "rmsprop": 0.4, "adagrad": 0.15}
MIXED_LR = {"sgd": -1.5, "adam": -3.0, "rmsprop": -2.5, "adagrad": -2.0}


def branin(p):
    x, y = p["x1"], p["x2"]
    a = y - 5.1 / (4 * math.pi ** 2) * x * x + 5 / math.pi * x - 6
    return a * a + 10 * (1 - 1 / (8 * math.pi)) * math.cos(x) + 10


def hartmann6(p):
    x = [p["x%d" % (i + 1)] for i in range(6)]
    return -sum(H6_ALPHA[i] * math.exp(-sum(H6_A[i][j] * (x[j] - H6_P[i][j]) ** 2 for j in range(6)))
                for i in range(4))


def mixed(p):
    o = p["optimizer"]
    return ((math.log10(p["lr"]) - MIXED_LR[o]) ** 2 / 2 + (p["dropout"] - 0.3) ** 2
            + ((p["layers"] - 6) / 10) ** 2 + MIXED_PENALTY[o])


def zdt1(p):
    x = [p["x%d" % (i + 1)] for i in range(4)]
    g = 1 + 9 * sum(x[1:]) / 3
    return x[0], g * (1 - math.sqrt(x[0] / g))


# name -> (function, its parameters as (name, kind, low, high or choices, log), the optimum)
PROBLEMS = {
    "branin": (branin, [("x1", "double", -5, 10, False), ("x2", "double", 0, 15, False)], 0.397887),
    "hartmann6": (hartmann6, [("x%d" % i, "double", 0, 1, False) for i in range(1, 7)], -3.32237),
    "mixed": (mixed, [("lr", "double", 1e-4, 0.1, True), ("dropout", "double", 0, 1, False),
                      ("layers", "int", 1, 16, False), ("optimizer", "cat", OPTIMIZERS, None, False)], 0.0),
    "zdt1": (zdt1, [("x%d" % i, "double", 0, 1, False) for i in range(1, 5)], None),
}


def hypervolume(points, ref=(1.1, 1.1)):
    """The hypervolume two minimised objectives' points dominate within ref."""
    pts = sorted(p for p in points if p[0] < ref[0] and p[1] < ref[1])
    hv, best2 = 0.0, ref[1]
    for f1, f2 in pts:
        if f2 < best2:
            hv += (ref[0] - f1) * (best2 - f2)
            best2 = f2
    return hv


def main():
    args = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
    fn, params, _ = PROBLEMS[args.pop("problem")]
    p = {}
    for name, kind, *_ in params:
        p[name] = args[name] if kind == "cat" else int(args[name]) if kind == "int" else float(args[name])
    value = fn(p)
    line = {"timestamp": time.time(), "global_step": "1", "checkpoint_path": ""}
    if isinstance(value, tuple):
        line["f1"], line["f2"] = value
    else:
        line["value"] = value
    path = os.environ.get("CLOUD_ML_HP_METRIC_FILE", "/tmp/hypertune/output.metric")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a") as f:
        f.write(json.dumps(line) + "\n")


if __name__ == "__main__":
    main()
