#!/usr/bin/env python3
"""A real Slurm cluster on network-namespace hosts, from Debian's packages
(slurmctld, slurmd, slurm-client, munge), for ztrain's tests and benchmarks.

Every host is a network namespace joined by a veth pair to a bridge that
itself lives in a namespace: nothing is added to the machine's own network.
Each host has its own hostname, /etc/hosts, /dev/shm and /tmp (a UTS and a
mount namespace around its daemon), and runs its own slurmd; the controller
(slurmctld) and munge run in a namespace of their own. Config and state live
in one folder (not under /tmp, which every host has its own of), on
non-default ports. Everything made is removed by `down`, also after a
failure; a cluster whose owner was killed before it could (SIGKILL) is
removed by the next one that starts (`sweep_stale`). Needs root.

    scripts/slurm_cluster.py up DIR [--nodes N] [--cpus C] [--mem MB] [--gpus G] [--share PATH]...
        (defaults: 4 nodes of 32 CPUs and 128000 MB, which every example job
        fits; --gpus: each node claims G GPUs, stand-ins Slurm allocates as
        it would real ones; --share: a folder under /tmp, a checkout say,
        that every host must see although each has its own /tmp)
    scripts/slurm_cluster.py exec DIR HOST CMD...    (HOST: ctl, n1, n2, ...)
        CMD on that host, in the current directory: ctl is the submit host
        (it runs the controller and no slurmd), where sbatch and ztrain run
    scripts/slurm_cluster.py down DIR

As a module: Cluster(dir, nodes).up(), .run(host, cmd), .popen(host, cmd),
.down(); `with Cluster(...) as c:` tears down on the way out.
"""
import json
import os
import re
import shutil
import stat
import signal
import subprocess
import sys
import time

PACKAGES = {"slurmctld": "/usr/sbin/slurmctld", "slurmd": "/usr/sbin/slurmd", "munged": "/usr/sbin/munged",
            "sbatch": "/usr/bin/sbatch"}


class Unavailable(Exception):
    """The machine cannot host the cluster (no root, no packages, no
    namespaces): a reason to skip, not a failure."""


def _sh(*cmd, check=True, timeout=30):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(cmd), (r.stderr or r.stdout).strip()))
    return r


def unavailable_reason():
    """Why this machine cannot host the cluster, or None."""
    if os.geteuid() != 0:
        return "the Slurm test cluster needs root (network namespaces, mounts)"
    missing = [n for n, p in PACKAGES.items() if not os.path.exists(p)]
    if missing:
        return "not installed: %s (scripts/deps.sh installs slurmctld slurmd slurm-client munge)" % \
            ", ".join(missing)
    for tool in ("ip", "nsenter", "unshare"):
        if not shutil.which(tool):
            return "%s is missing" % tool
    return None


# Who made each cluster: /run/ztrain-slurm/PREFIX holds the owner's pid and
# start time (or, for a cluster made by `up` from the command line, which
# outlives its command, the cluster's folder). A cluster whose owner is gone
# (a test run killed with SIGKILL never reaches its teardown) is removed by
# the next one that starts.
REGISTRY = "/run/ztrain-slurm"
NS_NAME = re.compile(r"^(z\d+)-(br|ctl|n\d+)$")


def _start_time(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _owner_alive(entry):
    kind, _, value = entry.partition(" ")
    if kind == "folder":                      # made from the command line: lives while its folder does
        return os.path.exists(os.path.join(value, "cluster.json"))
    pid, _, started = value.partition(" ")
    return pid.isdigit() and _start_time(int(pid)) == started


def sweep_stale():
    """Removes the namespaces (and whatever still runs in them) of clusters
    whose owner is gone; names of this pattern made before the registry are
    removed when nothing runs in them. Returns the prefixes removed."""
    names = [l.split()[0] for l in _sh("ip", "netns", "list", check=False).stdout.splitlines() if l.strip()]
    by_prefix = {}
    for n in names:
        m = NS_NAME.match(n)
        if m:
            by_prefix.setdefault(m.group(1), []).append(n)
    removed = []
    for prefix, spaces in by_prefix.items():
        entry_path = os.path.join(REGISTRY, prefix)
        pids = [int(p) for n in spaces for p in _sh("ip", "netns", "pids", n, check=False).stdout.split()]
        try:
            with open(entry_path) as f:
                stale = not _owner_alive(f.read().strip())
        except FileNotFoundError:
            stale = not pids
        if not stale:
            continue
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for n in spaces:
            _sh("ip", "netns", "del", n, check=False)
        try:
            os.unlink(entry_path)
        except FileNotFoundError:
            pass
        removed.append(prefix)
    return removed


class Cluster:
    def __init__(self, folder, nodes=4, cpus=8, mem_mb=16000, shared=(), gpus=0):
        """shared: folders under /tmp that every host must still see (a
        checkout or build tree there): bound back over each host's own /tmp.
        gpus: GPUs each node claims (a GRES whose device files are stand-ins
        in the folder): Slurm allocates them, and sets a step's
        CUDA_VISIBLE_DEVICES, as on a GPU cluster."""
        self.dir = os.path.realpath(folder)
        self.shared = [os.path.realpath(p) for p in shared
                       if os.path.realpath(p).startswith("/tmp/") and os.path.isdir(p)]
        for private in ("/tmp", "/dev/shm"):  # every host has its own: they would not see the folder
            if self.dir == private or self.dir.startswith(private + "/"):
                raise ValueError("%s: the cluster's folder must be one every host sees, not under %s"
                                 % (self.dir, private))
        self.nodes = ["n%d" % (i + 1) for i in range(nodes)]
        self.cpus, self.mem, self.gpus = cpus, mem_mb, gpus
        tag = os.getpid() % 9000 + 1000           # unique per cluster on this machine
        self.prefix = "z%d" % tag                  # interface names stay under 15 characters
        self.subnet = "10.79.%d" % (tag % 200 + 20)
        self.port = 20000 + (tag % 4000) * 2       # slurmctld; slurmd on the next port
        self.daemons = {}                          # host -> Popen of its daemon wrapper
        self.conf = os.path.join(self.dir, "slurm.conf")

    # ------------------------------------------------------------ names
    def addr(self, host):
        return "%s.%d" % (self.subnet, 2 if host == "ctl" else 10 + int(host[1:]))

    def ns(self, host):
        return "%s-%s" % (self.prefix, host)

    @property
    def hosts(self):
        return ["ctl"] + self.nodes

    # ------------------------------------------------------------ files
    def _write_config(self):
        os.makedirs(os.path.join(self.dir, "log"), exist_ok=True)
        os.makedirs(os.path.join(self.dir, "state"), exist_ok=True)
        munge = os.path.join(self.dir, "munge")
        os.makedirs(munge, exist_ok=True)
        os.chmod(munge, 0o700)
        key = os.path.join(munge, "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o400)
        d = self.dir
        lines = [
            "ClusterName=ztrain-test",
            "SlurmctldHost=ctl(%s)" % self.addr("ctl"),
            "SlurmctldPort=%d" % self.port,
            "SlurmdPort=%d" % (self.port + 1),
            "AuthType=auth/munge",
            # cred_expire: also how long a requeued job waits before it runs again (120 s by default)
            "AuthInfo=socket=%s/munge/munge.socket.2,cred_expire=10" % d,
            "CredType=cred/munge",
            "SlurmUser=root",
            "SlurmdUser=root",
            "StateSaveLocation=%s/state" % d,
            "SlurmdSpoolDir=%s/spool-%%n" % d,
            "SlurmctldPidFile=%s/slurmctld.pid" % d,
            "SlurmdPidFile=%s/slurmd-%%n.pid" % d,
            "ProctrackType=proctrack/linuxproc",   # no cgroups
            "TaskPlugin=task/none",
            "SchedulerType=sched/backfill",       # heterogeneous jobs start only through backfill
            "SchedulerParameters=bf_interval=1",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core_Memory",
            "ReturnToService=2",
            "SlurmdParameters=config_overrides",  # nodes may claim more CPUs than the machine has
            "MpiDefault=none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "SlurmdTimeout=10",
            "SlurmctldLogFile=%s/log/slurmctld.log" % d,
            "SlurmdLogFile=%s/log/slurmd-%%n.log" % d,
        ]
        if self.gpus:
            lines.append("GresTypes=gpu")
            # stand-in device files (character devices like /dev/null) named as GPUs are
            devs = os.path.join(d, "dev")
            os.makedirs(devs, exist_ok=True)
            for i in range(self.gpus):
                path = os.path.join(devs, "gpu%d" % i)
                if not os.path.exists(path):
                    os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
            with open(os.path.join(d, "gres.conf"), "w") as f:
                f.write("AutoDetect=off\nName=gpu File=%s/gpu[0-%d]\n" % (devs, self.gpus - 1))
        for n in self.nodes:
            lines.append("NodeName=%s NodeAddr=%s CPUs=%d RealMemory=%d State=UNKNOWN%s"
                         % (n, self.addr(n), self.cpus, self.mem, " Gres=gpu:%d" % self.gpus if self.gpus else ""))
        # spot: the same nodes, preemptible; a job of main that needs them
        # requeues a spot job (SIGTERM to every step, KillWait to save)
        lines += ["PreemptType=preempt/partition_prio", "PreemptMode=REQUEUE", "KillWait=30",
                  "PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP PriorityTier=2",
                  "PartitionName=spot Nodes=ALL MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=REQUEUE"]
        with open(self.conf, "w") as f:
            f.write("\n".join(lines) + "\n")
        with open(os.path.join(self.dir, "hosts"), "w") as f:
            f.write("127.0.0.1 localhost\n")
            for h in self.hosts:
                f.write("%s %s\n" % (self.addr(h), h))
        with open(os.path.join(self.dir, "cluster.json"), "w") as f:
            json.dump({"prefix": self.prefix, "hosts": self.hosts, "nodes": self.nodes, "shared": self.shared}, f)

    # ------------------------------------------------------------ network
    def _make_network(self):
        br = self.ns("br")
        _sh("ip", "netns", "add", br)
        _sh("ip", "netns", "exec", br, "ip", "link", "add", "br0", "type", "bridge")
        _sh("ip", "netns", "exec", br, "ip", "link", "set", "br0", "up")
        for h in self.hosts:
            ns, a, b = self.ns(h), "%s-%sa" % (self.prefix, h), "%s-%sb" % (self.prefix, h)
            _sh("ip", "netns", "add", ns)
            _sh("ip", "link", "add", a, "type", "veth", "peer", "name", b)
            _sh("ip", "link", "set", a, "netns", br)
            _sh("ip", "link", "set", b, "netns", ns)
            _sh("ip", "netns", "exec", br, "ip", "link", "set", a, "master", "br0")
            _sh("ip", "netns", "exec", br, "ip", "link", "set", a, "up")
            _sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
            _sh("ip", "netns", "exec", ns, "ip", "addr", "add", self.addr(h) + "/24", "dev", b)
            _sh("ip", "netns", "exec", ns, "ip", "link", "set", b, "up")

    def _host_wrapper(self, host, command):
        """argv that runs command on host: its network, and a new UTS and
        mount namespace with its hostname, /etc/hosts, /dev/shm and /tmp."""
        keep, back = "", ""
        for i, p in enumerate(self.shared):  # parked outside /tmp, then bound back over the new one
            stash = os.path.join(self.dir, "shared-%d" % i)
            os.makedirs(stash, exist_ok=True)
            keep += "mount --bind '%s' '%s' && " % (p, stash)
            back += "mkdir -p '%s' && mount --bind '%s' '%s' && " % (p, stash, p)
        setup = ("hostname %s && mount --make-rprivate / && mount --bind %s/hosts /etc/hosts && %s"
                 "mount -t tmpfs tmpfs /dev/shm && mount -t tmpfs tmpfs /tmp && %sexec \"$@\""
                 % (host, self.dir, keep, back))
        return ["nsenter", "--net=/run/netns/%s" % self.ns(host), "unshare", "--uts", "--mount",
                "sh", "-c", setup, "sh", *command]

    def _start_daemon(self, host, command):
        log = open(os.path.join(self.dir, "log", "%s.out" % host), "ab")
        self.daemons[host] = subprocess.Popen(self._host_wrapper(host, command), stdout=log, stderr=log,
                                              start_new_session=True)
        log.close()

    # ------------------------------------------------------------ life
    def up(self, timeout=30):
        why = unavailable_reason()
        if why:
            raise Unavailable(why)
        os.makedirs(self.dir, exist_ok=True)
        sweep_stale()
        self._register("process %d %s" % (os.getpid(), _start_time(os.getpid())))
        self._write_config()
        try:
            self._make_network()
        except RuntimeError as e:
            self.down()
            raise Unavailable("cannot make network namespaces here: %s" % e)
        d = self.dir
        self._start_daemon("ctl", ["sh", "-c", "munged -F --force -S %s/munge/munge.socket.2 "
                                   "--key-file=%s/munge/munge.key --pid-file=%s/munge/munged.pid "
                                   "--log-file=%s/log/munged.log & exec slurmctld -D -i -f %s"
                                   % (d, d, d, d, self.conf)])
        for n in self.nodes:
            os.makedirs(os.path.join(d, "spool-%s" % n), exist_ok=True)
            self._start_daemon(n, ["slurmd", "-D", "-f", self.conf, "-N", n])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r = self.run(self.nodes[0], ["sinfo", "-h", "-o", "%t %D"], check=False)
            states = dict(reversed(l.split()) for l in r.stdout.split("\n") if l.strip()) if r.returncode == 0 else {}
            if sum(int(k) for k, v in states.items() if v == "idle") == len(self.nodes):
                return self
            time.sleep(0.2)
        logs = ""
        for f in ("slurmctld.log", "munged.log"):
            p = os.path.join(d, "log", f)
            if os.path.exists(p):
                logs += "\n--- %s\n%s" % (f, open(p).read()[-2000:])
        self.down()
        raise RuntimeError("the Slurm test cluster did not come up within %ds%s" % (timeout, logs))

    def env(self):
        return dict(os.environ, SLURM_CONF=self.conf)

    def argv(self, host, cmd, cwd=None):
        """cmd on host, in the namespaces of that host's daemon (its /dev/shm,
        /tmp), in folder cwd (default: the host's /)."""
        inner = self._daemon_pid(host)
        if inner and os.path.exists("/proc/%d" % inner):
            return ["nsenter", "--target", str(inner), "--net", "--uts", "--mount"] + \
                (["--wd=%s" % cwd] if cwd else []) + list(cmd)
        return self._host_wrapper(host, ["sh", "-c", 'cd "$0" && exec "$@"', cwd, *cmd] if cwd else cmd)

    def _daemon_pid(self, host):
        """The daemon (the wrapper execs into it), or from its pid file."""
        p = self.daemons.get(host)
        if p:
            return p.pid
        try:
            name = "slurmctld.pid" if host == "ctl" else "slurmd-%s.pid" % host
            return int(open(os.path.join(self.dir, name)).read().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def run(self, host, cmd, check=True, timeout=60, **kw):
        r = subprocess.run(self.argv(host, cmd), capture_output=True, text=True, timeout=timeout,
                           env=kw.pop("env", self.env()), **kw)
        if check and r.returncode != 0:
            raise RuntimeError("on %s: %s: %s" % (host, " ".join(cmd), r.stderr.strip()))
        return r

    def popen(self, host, cmd, **kw):
        kw.setdefault("env", self.env())
        return subprocess.Popen(self.argv(host, cmd), **kw)

    def pids(self, host):
        r = _sh("ip", "netns", "pids", self.ns(host), check=False)
        return [int(p) for p in r.stdout.split()]

    def kill_host(self, host):
        """The host is lost: its slurmd and everything running on it, SIGKILL."""
        for pid in self.pids(host):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def _register(self, owner):
        os.makedirs(REGISTRY, exist_ok=True)
        with open(os.path.join(REGISTRY, self.prefix), "w") as f:
            f.write(owner)

    def down(self):
        """Stops everything this cluster started and removes its namespaces."""
        for h in reversed(self.hosts + ["br"]):
            for pid in self.pids(h):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for p in self.daemons.values():
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        self.daemons = {}
        deadline = time.monotonic() + 5
        for h in self.hosts + ["br"]:
            while _sh("ip", "netns", "pids", self.ns(h), check=False).stdout.split() and \
                    time.monotonic() < deadline:
                time.sleep(0.05)
            _sh("ip", "netns", "del", self.ns(h), check=False)
        try:
            os.unlink(os.path.join(REGISTRY, self.prefix))
        except FileNotFoundError:
            pass

    def __enter__(self):
        return self.up()

    def __exit__(self, *exc):
        self.down()


# What `up` makes from the command line: sized so that every example job
# fits (a pool per heterogeneous component, each on nodes of its own; the
# sync example's 3 workers of n1-standard-8 on one node).
CLI_NODES, CLI_CPUS, CLI_MEM_MB = 4, 32, 128000


def _parser():
    import argparse
    p = argparse.ArgumentParser(prog="slurm_cluster.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="bring a cluster up in DIR (needs root)")
    up.add_argument("dir", metavar="DIR", help="the cluster's folder (config, state, logs); not under /tmp")
    up.add_argument("--nodes", type=int, default=CLI_NODES, help="compute nodes n1..nN (default %d)" % CLI_NODES)
    up.add_argument("--cpus", type=int, default=CLI_CPUS, help="CPUs each node claims (default %d)" % CLI_CPUS)
    up.add_argument("--mem", type=int, default=CLI_MEM_MB, help="MB each node claims (default %d)" % CLI_MEM_MB)
    up.add_argument("--gpus", type=int, default=0, help="GPUs each node claims (stand-ins; default 0)")
    up.add_argument("--share", action="append", default=[], metavar="PATH",
                    help="a folder under /tmp every host must see (a checkout there); repeatable")
    ex = sub.add_parser("exec", help="run a command on a host of the cluster, in the current directory")
    ex.add_argument("dir", metavar="DIR")
    ex.add_argument("host", metavar="HOST", help="ctl (the submit host) or a node, n1, n2, ...")
    ex.add_argument("cmd", metavar="CMD", nargs=argparse.REMAINDER)
    down = sub.add_parser("down", help="stop the cluster in DIR and remove everything it made")
    down.add_argument("dir", metavar="DIR")
    return p


def _load(folder):
    try:
        with open(os.path.join(folder, "cluster.json")) as f:
            info = json.load(f)
    except OSError:
        sys.exit("slurm_cluster: %s holds no cluster (no cluster.json; `up` makes one)" % folder)
    c = Cluster(folder, nodes=len(info["nodes"]), shared=info.get("shared", []))
    c.prefix = info["prefix"]
    return c


def main(argv):
    a = _parser().parse_args(argv[1:])
    if a.command == "up":
        try:
            c = Cluster(a.dir, nodes=a.nodes, cpus=a.cpus, mem_mb=a.mem, gpus=a.gpus, shared=a.share)
            c.up()
        except ValueError as e:
            print("slurm_cluster: %s" % e, file=sys.stderr)
            return 2
        except Unavailable as e:
            print("slurm_cluster: %s" % e, file=sys.stderr)
            return 77
        for p in c.daemons.values():  # the daemons outlive this command; `down` removes them
            p.returncode = 0
        c._register("folder %s" % c.dir)
        print("up: hosts %s (%d nodes of %d CPUs and %d MB%s)\n"
              "submit from its submit host, in this directory:  %s exec %s ctl COMMAND\n"
              "remove it:  %s down %s" % (" ".join(c.hosts), a.nodes, a.cpus, a.mem,
                                          ", %d GPUs each" % a.gpus if a.gpus else "", argv[0], c.dir, argv[0], c.dir))
        return 0
    c = _load(a.dir)
    if a.command == "down":
        c.down()
        return 0
    if a.host not in c.hosts:
        print("slurm_cluster: no host %r (this cluster has %s)" % (a.host, " ".join(c.hosts)), file=sys.stderr)
        return 2
    if not a.cmd:
        print("slurm_cluster: exec: give the command to run", file=sys.stderr)
        return 2
    return subprocess.call(c.argv(a.host, a.cmd, cwd=os.getcwd()), env=c.env())


if __name__ == "__main__":
    sys.exit(main(sys.argv))
