"""The Slurm test cluster itself (scripts/slurm_cluster.py): real slurmctld,
slurmd and munge from Debian on network-namespace hosts. It comes up,
schedules ordinary and heterogeneous jobs across hosts, each host has its
own name, /dev/shm and /tmp, nothing is added to this machine's own
network, and everything is gone after `down`. Skips (77) without root or
the packages."""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
import slurm_cluster  # noqa: E402

from ztest import alive, tmpdir as _tmpdir  # noqa: E402


def tmpdir(prefix):
    """A folder every test host sees: each has its own /tmp."""
    d = _tmpdir(prefix)
    if os.path.realpath(d).startswith("/tmp/"):
        os.rmdir(d)
        d = tempfile.mkdtemp(prefix=prefix, dir="/var/tmp")
    return d


def own_addresses():
    return subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True).stdout


class SlurmCluster(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.before = own_addresses()
        cls.c = slurm_cluster.Cluster(tmpdir("slurm-"), nodes=3)
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
        self.c.run("n1", ["sbatch", "--wait", "-o", out, script], timeout=60)
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


if __name__ == "__main__":
    why = slurm_cluster.unavailable_reason()
    if why:
        print("skipped: " + why)
        sys.exit(77)
    unittest.main(verbosity=2)
