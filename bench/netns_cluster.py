"""A Slurm cluster of rate-limited hosts for the benchmarks: the real
cluster of scripts/slurm_cluster.py (a network namespace per host on a
bridge), with a `tc tbf` limit of RATE on both directions of every host's
link. Needs root; removed again at exit."""
import atexit
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def start(nodes, rate, queue, shared=()):
    """(cluster, scratch folder), or (None, why) when no cluster can be made."""
    sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
    import slurm_cluster
    why = slurm_cluster.unavailable_reason()
    if why:
        return None, why
    d = tempfile.mkdtemp(prefix="netns-bench-slurm-", dir="/var/tmp")
    atexit.register(lambda: shutil.rmtree(d, ignore_errors=True))
    # every task a whole node (8 vCPUs of a node of 8): one replica per host
    c = slurm_cluster.Cluster(os.path.join(d, "cluster"), nodes=nodes, cpus=8, mem_mb=32000, shared=shared)
    c.up()
    atexit.register(c.down)
    for h in c.nodes:  # the link's rate, both ways
        ns, a, b = c.ns(h), "%s-%sa" % (c.prefix, h), "%s-%sb" % (c.prefix, h)
        for where, dev in ((ns, b), (c.ns("br"), a)):
            subprocess.run(["ip", "netns", "exec", where, "tc", "qdisc", "add", "dev", dev, "root", "tbf",
                            "rate", rate, "burst", "512kb", "latency", queue], check=True, capture_output=True)
    return c, d
