#!/bin/sh
# SPDX-License-Identifier: MIT
# check-nonroot.sh - the library builds and installs for a user who is not
# root and has only the build packages (scripts/deps.sh build): `make` and
# `make install` ask for nothing else and need no privilege.
#
# A scratch copy of the tracked files is built by an unprivileged user
# (nobody, through setpriv, when this runs as root; else the caller), with
# a dpkg-query on PATH that reports only the build packages as installed:
# a target that asked for a test, benchmark or CI package would stop with
# deps.sh's "missing packages" and fail the check.
#
#   scripts/check-nonroot.sh
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail() { echo "check-nonroot: $*" >&2; exit 1; }

build_pkgs=$(sh -c '. /dev/stdin; pkgs_for build' <<EOF
$(sed -n '/^pkgs_for()/,/^}/p' "$root/scripts/deps.sh")
EOF
)
[ -n "$build_pkgs" ] || fail "could not read the build purpose's packages from scripts/deps.sh"

# Only the build packages are "installed".
mkdir -p "$tmp/bin" "$tmp/src" "$tmp/prefix"
cat > "$tmp/bin/dpkg-query" <<EOF
#!/bin/sh
# check-nonroot's stand-in: $build_pkgs
for last; do :; done
case " $build_pkgs " in
    *" \$last "*) printf 'install ok installed' ;;
    *) echo "dpkg-query: no packages found matching \$last" >&2; exit 1 ;;
esac
EOF
chmod 755 "$tmp/bin/dpkg-query"

(cd "$root" && git ls-files -z | xargs -0 tar cf - 2>/dev/null) | tar xf - -C "$tmp/src" ||
    fail "could not copy the tracked files"

run_as_user() {
    if [ "$(id -u)" -eq 0 ]; then
        chown -R 65534:65534 "$tmp"
        chmod 755 "$tmp"
        setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$tmp" PATH="$tmp/bin:$PATH" "$@"
    else
        env PATH="$tmp/bin:$PATH" "$@"
    fi
}

who=$( [ "$(id -u)" -eq 0 ] && echo nobody || id -un )
run_as_user sh -c "cd '$tmp/src' && make -j2 > '$tmp/make.log' 2>&1" ||
    { tail -20 "$tmp/make.log" >&2; fail "make as $who with only the build packages failed"; }
run_as_user sh -c "cd '$tmp/src' && make install PREFIX='$tmp/prefix' > '$tmp/install.log' 2>&1" ||
    { tail -20 "$tmp/install.log" >&2; fail "make install as $who with only the build packages failed"; }
for f in lib/libcexec.a lib/libcexec.so include/cexec/cexec.h lib/pkgconfig/cexec.pc; do
    [ -e "$tmp/prefix/$f" ] || fail "make install did not install $f"
done
# The stand-in really answers: a test package is reported missing.
run_as_user sh -c "cd '$tmp/src' && scripts/deps.sh --check test" > /dev/null 2>&1 &&
    fail "the dpkg-query stand-in reported the test packages installed: the check proves nothing"
echo "check-nonroot: make and make install as $who with only the build packages ($build_pkgs): ok"
