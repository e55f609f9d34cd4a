#!/bin/sh
# SPDX-License-Identifier: MIT
# check-symbols.sh - the shared library exports the public API and nothing
# else (docs/abi.md): every defined dynamic symbol is an ex_* name, one of
# the internals src/libcexec.map lists for the inline allocator, or the
# version node; every symbol carries the version node CEXEC_<ABI>; and every
# function a public header declares is exported.
#
#   scripts/check-symbols.sh [--self-test] LIBCEXEC_SO ABI
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
ALLOWED_INTERNAL="exi_recycling_allocate_call exi_recycling_deallocate_call exi_recycle_last"

# Functions declared by the public headers (not static inline); not
# cexec/mpi.h's and cexec/mpi_algorithms.h's, which live in the optional
# libcexec_mpi.a (docs/mpi.md).
declared() {
    ls "$root"/include/cexec/*.h | grep -v -e '/cexec/mpi\.h$' -e '/cexec/mpi_algorithms\.h$' | xargs grep -hoE '^[A-Za-z_][A-Za-z0-9_ *]*[ *]ex_[a-z0-9_]+\(' |
        grep -v '^static' | sed -E 's/.*[ *](ex_[a-z0-9_]+)\($/\1/' | sort -u
}

# $1: "nm -D --defined-only" output (NAME@@VERSION in column 3), $2: ABI.
# Prints each problem; returns 1 if there was one.
check() {
    bad=0
    node="CEXEC_$2"
    names=$(printf '%s\n' "$1" | awk 'NF >= 3 { print $3 }')
    for s in $names; do
        name=${s%%@*}
        version=${s##*@}
        [ "$name" = "$node" ] && continue
        case "$name" in
            ex_*) ;;
            *)
                case " $ALLOWED_INTERNAL " in
                    *" $name "*) ;;
                    *) echo "check-symbols: exported but not public: $name" >&2; bad=1 ;;
                esac
                ;;
        esac
        if [ "$version" != "$node" ]; then
            echo "check-symbols: $name has version '$version', not $node" >&2
            bad=1
        fi
    done
    exported=$(printf '%s\n' "$names" | sed 's/@.*//' | sort -u)
    for f in $(declared); do
        if ! printf '%s\n' "$exported" | grep -qx "$f"; then
            echo "check-symbols: declared in a public header but not exported: $f" >&2
            bad=1
        fi
    done
    return $bad
}

if [ "${1:-}" = "--self-test" ]; then
    good=$(for f in $(declared); do echo "0000000000001000 T $f@@CEXEC_0"; done)
    check "$good" 0 || { echo "check-symbols: self-test FAILED (a clean export list was refused)" >&2; exit 1; }
    if check "$good
0000000000002000 T exi_pool_submit@@CEXEC_0" 0 2>/dev/null; then
        echo "check-symbols: self-test FAILED (an internal export passed)" >&2; exit 1
    fi
    if check "$(printf '%s\n' "$good" | sed 1d)" 0 2>/dev/null; then
        echo "check-symbols: self-test FAILED (a missing public function passed)" >&2; exit 1
    fi
    if check "$(printf '%s\n' "$good" | sed 's/@@CEXEC_0$//')" 0 2>/dev/null; then
        echo "check-symbols: self-test FAILED (unversioned symbols passed)" >&2; exit 1
    fi
    echo "check-symbols: self-test passed"
    exit 0
fi

so=${1:?usage: scripts/check-symbols.sh [--self-test] LIBCEXEC_SO ABI}
abi=${2:?usage: scripts/check-symbols.sh [--self-test] LIBCEXEC_SO ABI}
check "$(nm -D --defined-only "$so")" "$abi"
echo "check-symbols: $(declared | wc -l) public functions exported from $(basename "$so"), nothing internal, all at CEXEC_$abi"
