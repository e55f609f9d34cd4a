#!/bin/sh
# SPDX-License-Identifier: MIT
# check-layers.sh - the layers of src/ point down only.
#
#   scripts/check-layers.sh [OBJDIR]
#
# src/ has one folder per layer, lowest first (src/README.md):
LAYERS="base allocators core resources adaptors compose task algorithms testing mpi"
# A file may include internal headers of its own layer and of the layers
# below it, always as "layer/exi_name.h".  With OBJDIR (the build's obj/
# folder) the objects are checked too: no object calls up into a higher
# layer, and no two objects call each other in a cycle.
# A concept split over several files that share a private header is one
# unit: calls between its files are not cycles.  UNITS lists them, each
# as unit=file,file,... (objects named layer/file).
UNITS="resources/pool=pool,pool_bulk,pool_poll,pool_timers"
# Exits 1 and prints each offending line; `--self-test` checks that a
# tree with an upward include fails.
set -eu

rank() {
    r=0
    for l in $LAYERS; do
        [ "$l" = "$1" ] && { echo $r; return; }
        r=$((r + 1))
    done
    echo -1
}

check_includes() {  # $1: the src folder
    bad=0
    for dir in "$1"/*/; do
        layer=$(basename "$dir")
        me=$(rank "$layer")
        if [ "$me" -lt 0 ]; then
            echo "check-layers: $dir is not a layer (add it to LAYERS and src/README.md)"
            bad=1
            continue
        fi
        for f in "$dir"*.c "$dir"*.h; do
            [ -e "$f" ] || continue
            # Every local include: "layer/exi_name.h" and not above us.
            grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" | while IFS= read -r line; do
                target=$(printf '%s\n' "$line" | sed 's/.*include[[:space:]]*"\([^"]*\)".*/\1/')
                case "$target" in
                    */*) ;;
                    *) echo "$f:${line%%:*}: \"$target\": name the layer (\"layer/$target\")"; echo BAD; continue ;;
                esac
                to=$(rank "${target%%/*}")
                if [ "$to" -lt 0 ]; then
                    echo "$f:${line%%:*}: \"$target\": not a layer of src/"; echo BAD
                elif [ "$to" -gt "$me" ]; then
                    echo "$f:${line%%:*}: $layer/ includes \"$target\", a layer above it"; echo BAD
                fi
            done
        done
    done | { out=$(cat); [ -z "$out" ] && exit 0; printf '%s\n' "$out" | grep -v '^BAD$'; exit 1; } || bad=1
    return $bad
}

check_objects() {  # $1: the obj folder (obj/layer/name.o)
    command -v nm >/dev/null || { echo "check-layers: nm not found, objects not checked"; return 0; }
    for o in "$1"/*/*.o; do
        [ -e "$o" ] || continue
        layer=$(basename "$(dirname "$o")")
        nm "$o" | awk -v o="$layer/$(basename "$o" .o)" '$1 == "U" { print "U", o, $2 } NF == 3 && $2 ~ /^[TDBRVWG]$/ { print "D", o, $3 }'
    done | awk -v layers="$LAYERS" -v units="$UNITS" '
        BEGIN {
            n = split(layers, l, " "); for (i = 1; i <= n; i++) rank[l[i]] = i
            k = split(units, us, " ")
            for (i = 1; i <= k; i++) {
                split(us[i], kv, "="); split(kv[1], lf, "/"); m2 = split(kv[2], fs, ",")
                for (j = 1; j <= m2; j++) unit[lf[1] "/" fs[j]] = kv[1]
            }
        }
        $1 == "D" { def[$3] = $2; next }
        { use[++m] = $2 " " $3 }
        END {
            bad = 0
            for (i = 1; i <= m; i++) {
                split(use[i], u, " ")
                d = def[u[2]]
                if (d == "" || d == u[1]) continue
                split(u[1], a, "/"); split(d, b, "/")
                if (rank[b[1]] > rank[a[1]]) { printf "%s calls %s in %s, a layer above it\n", u[1], u[2], d; bad = 1 }
                ua = (u[1] in unit) ? unit[u[1]] : u[1]; ud = (d in unit) ? unit[d] : d
                if (ua != ud) edge[ua " " ud] = 1
            }
            for (e in edge) {
                split(e, p, " ")
                if ((p[2] " " p[1]) in edge && p[1] < p[2]) { printf "%s and %s call each other\n", p[1], p[2]; bad = 1 }
            }
            exit bad
        }'
}

self_test() {
    t=$(mktemp -d)
    trap 'rm -rf "$t"' EXIT
    mkdir -p "$t/src/base" "$t/src/core"
    printf '#include "core/exi_value.h"\n' > "$t/src/base/up.c"
    printf '#include "base/exi_atomic.h"\n' > "$t/src/core/down.c"
    if check_includes "$t/src" >/dev/null; then echo "check-layers: self-test: an upward include passed"; exit 1; fi
    rm "$t/src/base/up.c"
    printf '#include "exi_atomic.h"\n' > "$t/src/core/flat.c"
    if check_includes "$t/src" >/dev/null; then echo "check-layers: self-test: an include without its layer passed"; exit 1; fi
    rm "$t/src/core/flat.c"
    check_includes "$t/src" || { echo "check-layers: self-test: a downward include failed"; exit 1; }
    echo "check-layers: self-test passed"
}

root=$(cd "$(dirname "$0")/.." && pwd)
if [ "${1:-}" = "--self-test" ]; then self_test; exit 0; fi
status=0
check_includes "$root/src" || status=1
if [ -n "${1:-}" ]; then check_objects "$1" || status=1; fi
[ $status -eq 0 ] && echo "check-layers: every include and call points down ($(echo $LAYERS | tr ' ' '<'))"
exit $status
