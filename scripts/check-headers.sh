#!/bin/sh
# SPDX-License-Identifier: MIT
# check-headers.sh - every public header compiles on its own, as C17 and
# as C++17 and C++20, without a warning (-Wall -Wextra -pedantic -Werror);
# then tests/cxx/macros.cpp (the public macros used from C++), tests/cxx/names.cpp
# (stage names from C++: the _named builders, no naming macros),
# tests/cxx/hpp.cpp, tests/cxx/hpp_time.cpp and tests/cxx/hpp_scope.cpp (the
# optional C++ handles of cexec/cexec.hpp, which must compile on its own
# too; its time, timeout and race wrappers; its scope and parallel
# scheduler wrappers) and tests/cxx/domain.cpp (a domain built in C++) are
# built against the library with each C++ compiler found and run.
#
#   scripts/check-headers.sh [--self-test] BUILD_DIR
#
# <cexec/mpi.h> and <cexec/mpi_algorithms.h> (the optional MPI component)
# are compiled with the include flags of mpicc (MPICC) where it is found,
# and skipped where it is not.
# CC, CXX (default g++), and CXX2 (default clang++, skipped if absent) name
# the compilers; SAN and LIBS are passed to the C++ link (a sanitizer build
# of the library needs its runtime).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
CC=${CC:-cc}
CXX=${CXX:-g++}
CXX2=${CXX2:-clang++}
SAN=${SAN:-}
LIBS=${LIBS:--lck -lm -ldl}
STRICT="-Wall -Wextra -pedantic -Werror"
tmp=$(mktemp -d)
# MPI's include flags, from its compiler wrapper (MPICH and Open MPI both
# answer -show); empty without MPI.
MPI_INC=""
if command -v "${MPICC:-mpicc}" > /dev/null 2>&1; then
    MPI_INC=$("${MPICC:-mpicc}" -show 2> /dev/null | tr ' ' '\n' | grep '^-I' | tr '\n' ' ' || true)
    [ -n "$MPI_INC" ] || MPI_INC=" "
fi
trap 'rm -rf "$tmp"' EXIT

# $1: include folder.  Prints one line per header that fails, returns 1 if any did.
headers_alone() {
    bad=0
    for h in "$1"/cexec/*.h; do
        name=cexec/$(basename "$h")
        extra=""
        if [ "$name" = cexec/mpi.h ] || [ "$name" = cexec/mpi_algorithms.h ]; then
            # The optional MPI component's header needs <mpi.h>: checked
            # with MPI's include flags where mpicc is found, else skipped.
            [ -n "$MPI_INC" ] || { echo "check-headers: $name skipped (no mpicc)"; continue; }
            extra=$MPI_INC
        fi
        printf '#include <%s>\n' "$name" > "$tmp/alone.c"
        cp "$tmp/alone.c" "$tmp/alone.cpp"
        if ! $CC -std=c17 $STRICT -fsyntax-only -I"$1" $extra "$tmp/alone.c" 2> "$tmp/err"; then
            echo "check-headers: $name does not compile on its own as C17:" >&2; head -n 5 "$tmp/err" >&2; bad=1
        fi
        for std in c++17 c++20; do
            if ! $CXX -std=$std $STRICT -fsyntax-only -I"$1" $extra "$tmp/alone.cpp" 2> "$tmp/err"; then
                echo "check-headers: $name does not compile on its own as $std ($CXX):" >&2; head -n 5 "$tmp/err" >&2; bad=1
            fi
        done
    done
    return $bad
}

if [ "${1:-}" = "--self-test" ]; then
    # A header that uses what it does not include must be caught.
    mkdir -p "$tmp/inc/cexec"
    printf '#include <stdint.h>\nstatic inline int64_t f(void) { return (int64_t)EX_OK; }\n' > "$tmp/inc/cexec/broken.h"
    if headers_alone "$tmp/inc" 2>/dev/null; then
        echo "check-headers: self-test FAILED (a header that is not self-contained passed)" >&2
        exit 1
    fi
    echo "check-headers: self-test passed"
    exit 0
fi

build=${1:?usage: scripts/check-headers.sh [--self-test] BUILD_DIR}
headers_alone "$root/include"
n=$(ls "$root"/include/cexec/*.h | wc -l)
echo "check-headers: $n public headers compile on their own as C17, C++17 and C++20"

for cxx in "$CXX" "$CXX2"; do
    command -v "$cxx" > /dev/null 2>&1 || { echo "check-headers: $cxx not found, skipped"; continue; }
    for std in c++17 c++20; do
        printf '#include <cexec/cexec.hpp>\n' > "$tmp/hpp_alone.cpp"
        $cxx -std=$std $STRICT -fsyntax-only -I"$root/include" "$tmp/hpp_alone.cpp" ||
            { echo "check-headers: cexec/cexec.hpp does not compile on its own as $std ($cxx)" >&2; exit 1; }
        for prog in macros names hpp hpp_time hpp_scope domain; do
            out="$tmp/$prog-$(basename "$cxx")-$std"
            $cxx -std=$std $STRICT $SAN -pthread -I"$root/include" -o "$out" "$root/tests/cxx/$prog.cpp" \
                "$build/libcexec.a" $SAN -pthread $LIBS
            printf '%s -std=%s: ' "$(basename "$cxx")" "$std"
            "$out"
        done
    done
done
