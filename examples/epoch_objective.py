#!/usr/bin/env python3
"""A synthetic objective of SageMaker's shape for tuning jobs: it takes
-x, -y and --epochs (as SageMaker's training toolkit passes one-letter
hyperparameters; --x and --y too), and prints its metric once an epoch, which a
MetricDefinitions regex such as "score=([0-9.-]+)" reads:

    score(x, y) = 1 - (x - 0.3)^2 - (log10(y) + 2)^2 / 4   (best 1 at x=0.3, y=0.01)

Epoch e of E prints score - 0.5 (E - e) / E: every trial's curve rises
alike, so the ranking at any epoch is the final one."""
import argparse
import math
import os
import time

ap = argparse.ArgumentParser()
ap.add_argument("-x", "--x", type=float, default=0.5)
ap.add_argument("-y", "--y", type=float, default=0.1)
ap.add_argument("--epochs", type=int, default=9)
a, _ = ap.parse_known_args()
score = 1 - (a.x - 0.3) ** 2 - (math.log10(a.y) + 2) ** 2 / 4
for e in range(1, a.epochs + 1):
    time.sleep(float(os.environ.get("OBJECTIVE_DELAY", "0.05")))
    print("epoch %d: score=%.6f" % (e, score - 0.5 * (a.epochs - e) / a.epochs), flush=True)
