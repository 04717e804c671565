#!/bin/sh
# Install what ztrain needs from Debian's archive, only what is missing.
# Non-interactive; safe to run repeatedly. Used by `make demo` and `make test`.
set -eu
PKGS="build-essential cmake pkg-config libzmq3-dev libczmq-dev libmsgpack-dev
      libjansson-dev libyaml-dev libssl-dev zlib1g-dev libopenblas-dev libprotobuf-c-dev protobuf-c-compiler
      libmicrohttpd-dev dataset-fashion-mnist
      python3 procps iproute2 util-linux slurmctld slurmd slurm-client munge
      python3-venv python3-setuptools python3-wheel python3-pip python3-numpy python3-torch"
# --test: also the real tools the tests watch jobs with, valgrind, which
# the security tests run the coordinator under, and Open MPI with mpi4py,
# which SageMaker's distribution mpi runs, man (the manual pages read back),
# Python's headers (SageMaker's training toolkit from PyPI builds a C
# extension), and patchelf and debootstrap, which make the self-contained
# wheel and the minimal Debian root it is tested in (make test).
[ "${1:-}" = "--test" ] && PKGS="$PKGS prometheus chromium valgrind openmpi-bin python3-mpi4py man-db python3-dev
      patchelf debootstrap"
# --wheel: patchelf, which gives the wheel's files their relative run paths.
[ "${1:-}" = "--wheel" ] && PKGS="$PKGS patchelf"
# --bench: also the peers the benchmarks compare against.
[ "${1:-}" = "--bench" ] && PKGS="$PKGS openmpi-bin libopenmpi-dev"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' \
        || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "deps: installing:$missing"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# Packages with a service (prometheus) are installed, not started: the tests
# start their own on loopback ports. Debian's policy-rc.d says so while
# apt runs, unless the machine has one already.
policy=""
if [ ! -e /usr/sbin/policy-rc.d ]; then
    policy=/usr/sbin/policy-rc.d
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
    $SUDO chmod 755 "$policy"
fi
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing || { [ -z "$policy" ] || $SUDO rm -f "$policy"; exit 1; }
[ -z "$policy" ] || $SUDO rm -f "$policy"
if [ "${1:-}" = "--bench" ]; then
    python3 -c "import optuna" 2>/dev/null || python3 -m pip install -q optuna || true
fi
