#!/bin/sh
# SPDX-License-Identifier: MIT
# check-install.sh - make install into a scratch prefix, then build
# examples/hello_world.c against it the way a user would: with
# pkg-config cexec (the shared library, found through its soname) and
# with pkg-config cexec-static (no libcexec.so needed at run time); the
# flags carry no build-only define; make uninstall leaves nothing behind.
#
#   scripts/check-install.sh
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
CC=${CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

fail() { echo "check-install: $*" >&2; exit 1; }

make -C "$root" -s install PREFIX="$prefix" > "$tmp/install.log" 2>&1 || { cat "$tmp/install.log" >&2; fail "make install failed"; }
for f in include/cexec/cexec.h lib/libcexec.a lib/libcexec.so lib/pkgconfig/cexec.pc lib/pkgconfig/cexec-static.pc \
         share/doc/cexec/LICENSE share/doc/cexec/THIRD-PARTY-NOTICES; do
    [ -e "$prefix/$f" ] || fail "make install did not install $f"
done
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"

for pc in cexec cexec-static; do
    flags=$(pkg-config --cflags --libs "$pc") || fail "pkg-config $pc failed"
    case " $flags " in
        *" -D"*|*"-I$root"*|*build*) fail "pkg-config $pc leaks build flags: $flags" ;;
    esac
    # shellcheck disable=SC2086 # the flags are words
    $CC -std=c17 -Wall -Wextra -Werror -o "$tmp/hello-$pc" "$root/examples/hello_world.c" $flags ||
        fail "could not build a program with pkg-config $pc"
done

LD_LIBRARY_PATH="$prefix/lib" "$tmp/hello-cexec" > /dev/null || fail "the program linked with cexec.pc failed"
LD_LIBRARY_PATH="$prefix/lib" ldd "$tmp/hello-cexec" | grep -q 'libcexec\.so\.[0-9]' ||
    fail "cexec.pc did not link libcexec.so by its soname"
"$tmp/hello-cexec-static" > /dev/null || fail "the program linked with cexec-static.pc failed"
if ldd "$tmp/hello-cexec-static" | grep -q libcexec; then fail "cexec-static.pc linked libcexec.so"; fi

make -C "$root" -s uninstall PREFIX="$prefix" > "$tmp/uninstall.log" 2>&1 || { cat "$tmp/uninstall.log" >&2; fail "make uninstall failed"; }
left=$(find "$prefix" \( -type f -o -type l \) | sed "s|^$prefix/||")
[ -z "$left" ] || fail "make uninstall left: $left"
echo "check-install: installed, built and ran with cexec.pc (shared) and cexec-static.pc (static); uninstall left nothing"
