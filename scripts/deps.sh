#!/bin/sh
# SPDX-License-Identifier: MIT
# Installs the Debian 12 packages one purpose of cexec needs.  Idempotent
# and quick when everything is present: it calls apt-get only for packages
# dpkg does not report as installed.  Run as root to install; as any other
# user it succeeds when the packages are present and otherwise prints the
# exact command to run.
#
#   scripts/deps.sh [--check] [PURPOSE...]
#
#   build      building and installing the library (the default): a C
#              compiler, make, libck-dev, libjemalloc-dev
#   test       make test: build + Criterion and a C++ compiler (the public
#              headers are compiled as C++ too)
#   clang      make check-clang, test-tsan, fuzz-ci: clang and its runtimes
#   valgrind   make valgrind
#   cross      make test-aarch64: the aarch64 cross compiler and qemu-user
#   model      make model-check: spin
#   mpi        make mpi, mpi-test: MPICH (mpicc, mpiexec)
#   bench      make bench / demo: test + oneTBB, Boost.Fiber, libuv (the timer
#              group's baseline), gnuplot
#   ci         every purpose above, and python3 for the dlopen check (.ci/run)
#   --bench    the same as bench (older spelling)
#   --check    exit 1, printing what is missing, without installing
#   --help     this text
set -eu

pkgs_for() {
    case "$1" in
        build) echo "gcc make libc6-dev libck-dev libjemalloc-dev" ;;
        test) echo "$(pkgs_for build) g++ libcriterion-dev" ;;
        clang) echo "clang libclang-rt-14-dev" ;;
        valgrind) echo "valgrind" ;;
        cross) echo "gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user" ;;
        model) echo "spin" ;;
        mpi) echo "mpich libmpich-dev" ;;
        bench) echo "$(pkgs_for test) libtbb-dev libboost-fiber-dev libuv1-dev gnuplot-nox" ;;
        ci) echo "$(pkgs_for bench) $(pkgs_for clang) $(pkgs_for valgrind) $(pkgs_for cross) $(pkgs_for model) $(pkgs_for mpi) pkg-config python3" ;;
        *) return 1 ;;
    esac
}

PKGS=""
CHECK_ONLY=
for arg in "$@"; do
    case "$arg" in
        --check) CHECK_ONLY=1 ;;
        -h | --help) sed -n '3,/^set -eu/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
        --bench) PKGS="$PKGS $(pkgs_for bench)" ;;
        *)
            if ! more=$(pkgs_for "$arg"); then
                echo "scripts/deps.sh: unknown purpose '$arg' (build test clang valgrind cross model mpi bench ci)" >&2
                exit 2
            fi
            PKGS="$PKGS $more"
            ;;
    esac
done
[ -n "$PKGS" ] || PKGS=$(pkgs_for build)

# Not Debian: nothing to ask.  Let the compiler say what is missing.
if ! command -v dpkg-query >/dev/null 2>&1; then
    exit 0
fi

missing=""
for p in $PKGS; do
    case " $missing " in *" $p "*) continue ;; esac
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
