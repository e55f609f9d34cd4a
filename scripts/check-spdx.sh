#!/bin/sh
# SPDX-License-Identifier: MIT
# check-spdx.sh - every file of the project carries its licence tag,
# "SPDX-License-Identifier: MIT", in its first three lines.  Data is
# exempt: benchmark results (*.csv), images, the fuzzing corpus, and the
# licence texts themselves.
#
#   scripts/check-spdx.sh [--self-test]
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
TAG="SPDX-License-Identifier: MIT"

# Files to check under $1: tracked ones in a git checkout, else all.
files() {
    if git -C "$1" rev-parse --is-inside-work-tree > /dev/null 2>&1; then
        git -C "$1" ls-files
    else
        (cd "$1" && find . -type f ! -path './.git/*' ! -path './build*' | sed 's|^\./||')
    fi | grep -v -E '\.(csv|png)$|^fuzz/corpus/|^LICENSE$|^THIRD-PARTY-NOTICES$'
}

# Prints each file under $1 without the tag; returns 1 if there is one.
check() {
    bad=0
    for f in $(files "$1"); do
        [ -f "$1/$f" ] || continue  # deleted in the work tree
        if ! head -n 3 "$1/$f" | grep -q "$TAG"; then
            echo "check-spdx: $f has no '$TAG' in its first three lines" >&2
            bad=1
        fi
    done
    return $bad
}

if [ "${1:-}" = "--self-test" ]; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    printf '/* %s */\nint x;\n' "$TAG" > "$tmp/tagged.c"
    check "$tmp" || { echo "check-spdx: self-test FAILED (a tagged file was refused)" >&2; exit 1; }
    printf 'int y;\n' > "$tmp/untagged.c"
    if check "$tmp" 2>/dev/null; then
        echo "check-spdx: self-test FAILED (an untagged file passed)" >&2
        exit 1
    fi
    echo "check-spdx: self-test passed"
    exit 0
fi

check "$root"
echo "check-spdx: every file carries $TAG"
