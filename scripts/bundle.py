#!/usr/bin/env python3
"""Makes a relocatable ztrain: every binary, libztrain, the manual pages, and
every shared library they need beyond glibc's own, carried inside and found
through run paths relative to each file ($ORIGIN), so the tree runs where it
is put, on a machine without any of ztrain's packages.

    python3 scripts/bundle.py BUILD_DIR OUT_DIR [--no-cuda]

BUILD_DIR is a configured and built CMake build folder; OUT_DIR (made
afresh) gets bin/, lib/ (lib/ztrain/ holds the CUDA module where the build
has one, unless --no-cuda), include/, share/man/; binaries are stripped. It prints the newest glibc symbol version
the tree needs (the oldest glibc it runs on): the wheel's platform tag is
made from it. The driver's libcuda is never carried (the machine's own).

Needs patchelf (Debian's package). `make wheel` runs this, then packs the
tree into the Python wheel (python/setup.py, ZTRAIN_BUNDLE) and a tarball."""
import os
import re
import shutil
import subprocess
import sys

# glibc's own libraries (and the dynamic loader), which every Linux has,
# and the GPU driver's, which the machine's driver provides.
SYSTEM = re.compile(r"^(ld-linux[\w.-]*|libc|libm|libmvec|libpthread|libdl|librt|libresolv|libutil|libanl|"
                    r"libnsl|libBrokenLocale|libthread_db|libnss_\w+|libcuda|libnvidia-\w+)\.so(\.\d+)*$")


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


def is_elf(path):
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def needed(path):
    """{soname: resolved path} of every library path needs (ldd: the
    transitive closure), and the names that resolve nowhere."""
    out, missing = {}, []
    for line in run(["ldd", path]).splitlines():
        m = re.match(r"^\s*(\S+) => (not found|(\S+) \(0x[0-9a-f]+\))", line)
        if not m:
            continue
        if m.group(2) == "not found":
            missing.append(m.group(1))
        else:
            out[m.group(1)] = m.group(3)
    return out, missing


def glibc_needed(path):
    versions = set()
    for v in re.findall(r"GLIBC_(\d+)\.(\d+)", run(["objdump", "-T", path])):
        versions.add((int(v[0]), int(v[1])))
    return max(versions) if versions else (2, 17)


def main():
    args = [a for a in sys.argv[1:] if a != "--no-cuda"]
    if len(args) != 2 or args[0] in ("-h", "--help"):
        sys.exit(__doc__)
    build, out = os.path.abspath(args[0]), os.path.abspath(args[1])
    if not shutil.which("patchelf"):
        sys.exit("bundle.py: patchelf is missing (apt-get install patchelf; scripts/deps.sh --wheel)")
    shutil.rmtree(out, ignore_errors=True)
    run(["cmake", "--install", build, "--prefix", out])
    lib = os.path.join(out, "lib")
    for gone in ("libztrain.a", "pkgconfig") + (("ztrain",) if "--no-cuda" in sys.argv else ()):
        p = os.path.join(lib, gone)  # a C program builds against an installed tree, not this one
        shutil.rmtree(p) if os.path.isdir(p) else (os.path.exists(p) and os.unlink(p))
    ours = []  # (path, run path relative to it)
    for d, rpath in ((os.path.join(out, "bin"), "$ORIGIN/../lib"), (lib, "$ORIGIN"),
                     (os.path.join(lib, "ztrain"), "$ORIGIN/..")):
        if os.path.isdir(d):
            for f in sorted(os.listdir(d)):
                p = os.path.join(d, f)
                if os.path.isfile(p) and not os.path.islink(p) and is_elf(p):
                    ours.append((p, rpath))
    carried, missing = {}, set()
    for p, _ in ours:
        libs, gone = needed(p)
        missing.update(n for n in gone if not SYSTEM.match(n) and not os.path.exists(os.path.join(lib, n)))
        for soname, where in libs.items():
            if not SYSTEM.match(soname) and not os.path.exists(os.path.join(lib, soname)):
                carried[soname] = os.path.realpath(where)
    if missing:
        sys.exit("bundle.py: unresolved libraries: %s" % ", ".join(sorted(missing)))
    for soname, src in sorted(carried.items()):
        dest = os.path.join(lib, soname)
        shutil.copyfile(src, dest)
        os.chmod(dest, 0o755)
        ours.append((dest, "$ORIGIN"))
    newest = (2, 17)
    for p, rpath in ours:
        if os.path.islink(p):
            continue
        os.chmod(p, os.stat(p).st_mode | 0o200)
        run(["strip", "--strip-unneeded", p])
        run(["patchelf", "--set-rpath", rpath, p])
        newest = max(newest, glibc_needed(p))
    # every file resolves inside the tree now: check it as a stranger would
    for p, _ in ours:
        libs, gone = needed(p)
        outside = sorted(s for s, w in libs.items() if not SYSTEM.match(s) and not w.startswith(out + "/"))
        if gone or outside:
            sys.exit("bundle.py: %s still needs %s" % (p, ", ".join(gone + outside)))
    print("glibc %d.%d" % newest)
    print("carried %d libraries: %s" % (len(carried), " ".join(sorted(carried))))


if __name__ == "__main__":
    main()
