#!/bin/sh
# Installs what cexec needs to build, test and benchmark on Debian 12.
# Idempotent and quick when everything is present: it only calls apt-get for
# packages dpkg does not report as installed.  Run as root to install; as any
# other user it prints the exact command to run.
#
#   scripts/deps.sh           build + test dependencies
#   scripts/deps.sh --bench   also the benchmark baselines and plotting (oneTBB, Boost.Fiber, gnuplot)
#   scripts/deps.sh --check   exit 1 (printing what is missing) without installing
set -eu

PKGS="build-essential pkg-config clang libclang-rt-14-dev libck-dev libcriterion-dev libjemalloc-dev valgrind"
# The aarch64 context switch is cross-compiled and run under qemu-user.
PKGS="$PKGS gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user"
# The pool's park/wake protocol is model-checked with spin (make model-check).
PKGS="$PKGS spin"
CHECK_ONLY=
for arg in "$@"; do
    case "$arg" in
        --bench) PKGS="$PKGS libtbb-dev libboost-fiber-dev gnuplot-nox" ;;
        --check) CHECK_ONLY=1 ;;
        *) echo "scripts/deps.sh: unknown option $arg" >&2; exit 2 ;;
    esac
done

missing=""
for p in $PKGS; do
    st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    case "$st" in
        *"install ok installed"*) ;;
        *) missing="$missing $p" ;;
    esac
done

if [ -z "$missing" ]; then
    exit 0
fi

if [ -n "$CHECK_ONLY" ]; then
    echo "cexec: missing packages:$missing" >&2
    exit 1
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "cexec: missing packages:$missing" >&2
    echo "cexec: install them with:" >&2
    echo "    sudo apt-get update && sudo apt-get install -y$missing" >&2
    exit 1
fi

echo "cexec: installing:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >&2
apt-get install -y -q --no-install-recommends $missing >&2
