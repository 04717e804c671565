#!/usr/bin/env python3
"""`make wheel`: one self-contained Python wheel, and the same tree as a
relocatable tarball, from a build.

    python3 scripts/wheel.py BUILD_DIR OUT_DIR [--cuda]

The tree (scripts/bundle.py) holds every binary, libztrain, the manual
pages and every library they need beyond glibc's; the wheel carries it as
ztrain/_dist (the `ztrain` command runs its bin/ztrain; `import ztrain`
loads its libztrain), tagged manylinux_2_NN_x86_64 for the glibc the tree
needs. The tarball unpacks anywhere: ztrain-VERSION/bin/ztrain runs there.
Without --cuda the GPU module is left out (it would carry CUDA's own
libraries, hundreds of MiB); with it, the machine needs NVIDIA's driver."""
import base64
import glob
import hashlib
import os
import re
import subprocess
import sys
import tarfile
import tomllib
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write_wheel(tree, out, plat):
    """The wheel, written as the format says (PEP 427): python/ztrain's
    modules, the tree as ztrain/_dist (links as files, modes kept), and
    its metadata, with the `ztrain` command as a console entry point."""
    with open(os.path.join(ROOT, "python", "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    name, version = project["name"], project["version"]
    info = "%s-%s.dist-info" % (name, version)
    files = []  # (name in the wheel, path or bytes, mode)
    pkg = os.path.join(ROOT, "python", "ztrain")
    for d, dirs, fs in os.walk(pkg):
        dirs[:] = sorted(x for x in dirs if x not in ("__pycache__", "_lib", "_dist"))
        for f in sorted(fs):
            if f.endswith(".py"):
                p = os.path.join(d, f)
                files.append((os.path.relpath(p, os.path.dirname(pkg)), p, 0o644))
    for d, dirs, fs in os.walk(tree):
        dirs.sort()
        for f in sorted(fs):
            p = os.path.join(d, f)
            mode = 0o755 if os.access(p, os.X_OK) else 0o644
            files.append(("ztrain/_dist/" + os.path.relpath(p, tree), os.path.realpath(p), mode))
    meta = "Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: %s\nRequires-Python: %s\n" % (
        name, version, project["description"], project["requires-python"])
    for extra, reqs in project.get("optional-dependencies", {}).items():
        meta += "Provides-Extra: %s\n" % extra + "".join(
            'Requires-Dist: %s ; extra == "%s"\n' % (r, extra) for r in reqs)
    scripts = "[console_scripts]\n" + "".join("%s = %s\n" % kv for kv in project["scripts"].items())
    tag = "py3-none-" + plat
    wheel_txt = "Wheel-Version: 1.0\nGenerator: ztrain scripts/wheel.py\nRoot-Is-Purelib: false\nTag: %s\n" % tag
    files += [(info + "/METADATA", meta.encode(), 0o644), (info + "/WHEEL", wheel_txt.encode(), 0o644),
              (info + "/entry_points.txt", scripts.encode(), 0o644)]
    path = os.path.join(out, "%s-%s-%s.whl" % (name, version, tag))
    record = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for arc, src, mode in files:
            data = src if isinstance(src, bytes) else open(src, "rb").read()
            zi = zipfile.ZipInfo(arc, date_time=(2026, 1, 1, 0, 0, 0))
            zi.external_attr = (0o100000 | mode) << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append("%s,sha256=%s,%d" % (arc, digest, len(data)))
        record.append(info + "/RECORD,,")
        z.writestr(info + "/RECORD", "\n".join(record) + "\n")
    return path


def main():
    args = [a for a in sys.argv[1:] if a != "--cuda"]
    if len(args) != 2 or args[0] in ("-h", "--help"):
        sys.exit(__doc__)
    build, out = (os.path.abspath(a) for a in args)
    cuda = "--cuda" in sys.argv
    tree = os.path.join(build, "wheel-tree")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "bundle.py"), build, tree] +
                       ([] if cuda else ["--no-cuda"]), capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(r.stderr or r.stdout)
    major, minor = map(int, re.search(r"glibc (\d+)\.(\d+)", r.stdout).groups())
    with open(os.path.join(ROOT, "python", "pyproject.toml"), "rb") as f:
        version = tomllib.load(f)["project"]["version"]
    os.makedirs(out, exist_ok=True)
    for old in glob.glob(os.path.join(out, "ztrain-*")):
        os.unlink(old)
    plat = "manylinux_%d_%d_x86_64" % (major, minor)
    wheel = write_wheel(tree, out, plat)
    tarball = os.path.join(out, "ztrain-%s-linux-x86_64.tar.gz" % version)
    with tarfile.open(tarball, "w:gz") as t:
        t.add(tree, arcname="ztrain-%s" % version)
    print("wheel:   %s (%.1f MiB)" % (wheel, os.path.getsize(wheel) / 2**20))
    print("tarball: %s (%.1f MiB)" % (tarball, os.path.getsize(tarball) / 2**20))
    print("needs glibc %d.%d or newer (x86_64 Linux); %s" % (major, minor, r.stdout.splitlines()[-1]))


if __name__ == "__main__":
    main()
