#!/usr/bin/env python3
"""A synthetic objective for studies, written the way a program using
Google's cloudml-hypertune library reports: one JSON object per line in
CLOUD_ML_HP_METRIC_FILE with the metric tag, its value, global_step and a
timestamp. It takes --x=, --y= (and ignores other flags), reports an
intermediate value at steps 1..STEPS and the final one at STEPS. With
OBJECTIVE_COST=1 each line also reports a second metric, cost = x + y.

    score(x, y) = 1 - (x - 0.3)^2 - (log10(y) + 2)^2 / 4      (best 1 at x=0.3, y=0.01)
"""
import json
import math
import os
import sys
import time

args = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
x = float(args.get("x", 0.5))
y = float(args.get("y", 0.1))
steps = int(args.get("steps", os.environ.get("OBJECTIVE_STEPS", "3")))
delay = float(os.environ.get("OBJECTIVE_DELAY", "0"))
if args.get("fail") == "1":
    print("failing on purpose", file=sys.stderr)
    sys.exit(1)
score = 1 - (x - 0.3) ** 2 - (math.log10(y) + 2) ** 2 / 4
path = os.environ.get("CLOUD_ML_HP_METRIC_FILE", "/tmp/hypertune/output.metric")
os.makedirs(os.path.dirname(path), exist_ok=True)
trial = json.loads(os.environ.get("TF_CONFIG", os.environ.get("CLUSTER_SPEC", "{}"))).get("task", {}).get("trial", "")
for step in range(1, steps + 1):
    value = score - 0.5 * (steps - step) / steps  # improves towards the final value
    with open(path, "a") as f:
        line = {"timestamp": time.time(), "trial": trial, "score": value, "global_step": str(step),
                "checkpoint_path": ""}
        if os.environ.get("OBJECTIVE_COST"):
            line["cost"] = x + y
        f.write(json.dumps(line) + "\n")
    time.sleep(delay)
print("x=%g y=%g score=%.6f" % (x, y, score))
