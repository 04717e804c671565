#!/usr/bin/env python3
"""A SageMaker Processing script, unchanged from what a processing
container runs: feature extraction over Fashion-MNIST's files, each host
its own share of them (ShardedByS3Key).

It opens SageMaker's literal paths, as processing scripts do:
  /opt/ml/config/resourceconfig.json   this host and all hosts
  /opt/ml/processing/input/data/       this host's share of the files
  /opt/ml/processing/output/features/  what it writes: per input file a
                                       CSV of features (images) or of
                                       counts (labels), and algo-K.json,
                                       what this host did
A failure is written to /opt/ml/output/message, where SageMaker takes the
job's FailureReason from.

    ztrain run examples/sagemaker-processing.json
"""
import argparse
import gzip
import json
import os
import struct
import sys
import traceback

DATA = "/opt/ml/processing/input/data"
OUT = "/opt/ml/processing/output/features"


def images(path, threshold, out):
    """Per image: its mean intensity and the share of its pixels at or above
    threshold ("ink"). Returns how many images."""
    with gzip.open(path, "rb") as f:
        magic, n, rows, cols = struct.unpack(">IIII", f.read(16))
        if magic != 2051:
            raise ValueError("%s: not an idx image file (magic %d)" % (path, magic))
        size = rows * cols
        ink = bytes(1 if v >= threshold else 0 for v in range(256))
        out.write("index,mean,ink\n")
        for i in range(n):
            img = f.read(size)
            out.write("%d,%.3f,%.4f\n" % (i, sum(img) / size, sum(img.translate(ink)) / size))
    return n


def labels(path, out):
    """How many of each label. Returns how many labels."""
    with gzip.open(path, "rb") as f:
        magic, n = struct.unpack(">II", f.read(8))
        if magic != 2049:
            raise ValueError("%s: not an idx label file (magic %d)" % (path, magic))
        data = f.read(n)
    out.write("label,count\n")
    for k in range(10):
        out.write("%d,%d\n" % (k, data.count(k)))
    return n


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threshold", type=int, default=128)
    a = p.parse_args()
    with open("/opt/ml/config/resourceconfig.json") as f:
        rc = json.load(f)
    me, hosts = rc["current_host"], rc["hosts"]
    mine = sorted(os.listdir(DATA))
    os.makedirs(OUT, exist_ok=True)
    done = {}
    for name in mine:
        stem = name[:-3] if name.endswith(".gz") else name
        with open(os.path.join(OUT, stem + ".csv"), "w") as out:
            kind = labels if "labels" in name else images
            done[name] = kind(os.path.join(DATA, name), out) if kind is labels else \
                images(os.path.join(DATA, name), a.threshold, out)
    with open(os.path.join(OUT, me + ".json"), "w") as f:
        json.dump({"host": me, "hosts": hosts, "files": done}, f, indent=1, sort_keys=True)
    print("%s of %d hosts: %s" % (me, len(hosts), ", ".join("%s (%d)" % kv for kv in sorted(done.items()))))


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # SageMaker's FailureReason comes from this file
        os.makedirs("/opt/ml/output", exist_ok=True)
        with open("/opt/ml/output/message", "w") as f:
            f.write("%s: %s\n" % (type(e).__name__, e))
        traceback.print_exc()
        sys.exit(1)
