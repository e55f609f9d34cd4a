#!/bin/sh
# SPDX-License-Identifier: MIT
# check-install.sh - make install and install-flavours into a scratch
# prefix, then build examples against it the way a user would: with
# pkg-config cexec (the shared library, found through its soname), with
# pkg-config cexec-static (no libcexec.so needed at run time), and with the
# flavours cexec-asan, cexec-tsan and cexec-valgrind (the programs must run
# clean under their tool); the flags carry no build-only define; make
# uninstall leaves nothing behind.  Also: Python's ctypes loads libcexec.so
# with dlopen and runs a scan (tests/install/scan.py); a program linked with
# cexec.pc or cexec-static.pc has its jemalloc arenas (tests/install/
# arenas.c); and the embedded jemalloc ignores the application's
# MALLOC_CONF, reading CEXEC_MCONF instead.
#
#   scripts/check-install.sh
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
CC=${CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

fail() { echo "check-install: $*" >&2; exit 1; }

make -C "$root" -s install install-flavours PREFIX="$prefix" > "$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log" >&2; fail "make install install-flavours failed"; }
for f in include/cexec/cexec.h lib/libcexec.a lib/libcexec.so lib/libcexec-jemalloc.so lib/pkgconfig/cexec.pc lib/pkgconfig/cexec-static.pc \
         lib/libcexec-asan.a lib/libcexec-tsan.a lib/libcexec-valgrind.a \
         lib/pkgconfig/cexec-asan.pc lib/pkgconfig/cexec-tsan.pc lib/pkgconfig/cexec-valgrind.pc \
         share/doc/cexec/LICENSE share/doc/cexec/THIRD-PARTY-NOTICES share/man/man3/cexec.3 share/man/man3/ex_pool_create.3; do
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

# dlopen: the shared library loads into a process that did not link it.
command -v python3 > /dev/null 2>&1 || fail "python3 not found (scripts/deps.sh ci installs it)"
python3 "$root/tests/install/scan.py" "$prefix/lib/libcexec.so" || fail "libcexec.so could not be used through dlopen"
# Where the process has static TLS to spare, the dlopened library finds its
# jemalloc arenas too.
got=$(GLIBC_TUNABLES=glibc.rtld.optional_static_tls=8192 LD_LIBRARY_PATH="$prefix/lib" \
      python3 "$root/tests/install/scan.py" "$prefix/lib/libcexec.so") || fail "dlopen with static TLS to spare failed"
case "$got" in *"jemalloc arenas"*) ;; *) fail "dlopened with static TLS to spare, no jemalloc arenas: $got" ;; esac

# Linked at start-up, shared or static, the jemalloc allocator has arenas.
for pc in cexec cexec-static; do
    # shellcheck disable=SC2046 # the flags are words
    $CC -std=c17 -Wall -Wextra -Werror -o "$tmp/arenas-$pc" "$root/tests/install/arenas.c" $(pkg-config --cflags --libs "$pc") ||
        fail "could not build arenas.c with pkg-config $pc"
    got=$(LD_LIBRARY_PATH="$prefix/lib" "$tmp/arenas-$pc") || fail "arenas.c failed with pkg-config $pc"
    [ "$got" = arenas ] || fail "linked with pkg-config $pc, the jemalloc allocator fell back to malloc"
    # The application's jemalloc options are not the library's.
    err=$(MALLOC_CONF=bogus:1 LD_LIBRARY_PATH="$prefix/lib" "$tmp/arenas-$pc" 2>&1 > /dev/null) || fail "arenas.c failed with MALLOC_CONF set"
    [ -z "$err" ] || fail "the embedded jemalloc read MALLOC_CONF ($pc): $err"
    err=$(CEXEC_MCONF=bogus:1 LD_LIBRARY_PATH="$prefix/lib" "$tmp/arenas-$pc" 2>&1 > /dev/null) || true
    case "$err" in *jemalloc*) ;; *) fail "the embedded jemalloc did not read CEXEC_MCONF ($pc)" ;; esac
done

# The flavours: a program with a pool, tasks and a scope, instrumented
# like the library; any sanitizer report fails it.
for pc in cexec-asan:$CC cexec-tsan:clang; do
    name=${pc%%:*}
    cc=${pc#*:}
    command -v "$cc" > /dev/null 2>&1 || fail "$cc not found for $name"
    for ex in spawn_scope task_pipeline; do
        # shellcheck disable=SC2046 # the flags are words
        $cc -std=c17 -Wall -Wextra -Werror -o "$tmp/$ex-$name" "$root/examples/$ex.c" $(pkg-config --cflags --libs "$name") ||
            fail "could not build $ex with pkg-config $name"
        ASAN_OPTIONS=abort_on_error=0 UBSAN_OPTIONS=halt_on_error=1 TSAN_OPTIONS=halt_on_error=1:exitcode=66 \
            "$tmp/$ex-$name" > "$tmp/$ex-$name.log" 2>&1 || { cat "$tmp/$ex-$name.log" >&2; fail "$ex failed under $name"; }
        if grep -q -E 'Sanitizer|runtime error' "$tmp/$ex-$name.log"; then
            cat "$tmp/$ex-$name.log" >&2
            fail "$ex reported under $name"
        fi
    done
done

# valgrind: memcheck errors and leaks fail it (--error-exitcode).
command -v valgrind > /dev/null 2>&1 || fail "valgrind not found for cexec-valgrind"
# shellcheck disable=SC2046 # the flags are words
$CC -std=c17 -Wall -Wextra -Werror -g -o "$tmp/spawn-vg" "$root/examples/spawn_scope.c" $(pkg-config --cflags --libs cexec-valgrind) ||
    fail "could not build with pkg-config cexec-valgrind"
valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect --fair-sched=yes \
    "$tmp/spawn-vg" > "$tmp/spawn-vg.log" 2>&1 || { cat "$tmp/spawn-vg.log" >&2; fail "spawn_scope failed under valgrind"; }

make -C "$root" -s uninstall PREFIX="$prefix" > "$tmp/uninstall.log" 2>&1 || { cat "$tmp/uninstall.log" >&2; fail "make uninstall failed"; }
left=$(find "$prefix" \( -type f -o -type l \) | sed "s|^$prefix/||")
[ -z "$left" ] || fail "make uninstall left: $left"
echo "check-install: installed; dlopen from Python ran a scan; built and ran with cexec.pc (shared) and cexec-static.pc (static), both with jemalloc arenas and deaf to MALLOC_CONF; cexec-asan.pc, cexec-tsan.pc and cexec-valgrind.pc clean under their tools; uninstall left nothing"
