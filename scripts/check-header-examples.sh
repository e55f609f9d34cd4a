#!/bin/sh
# SPDX-License-Identifier: MIT
# check-header-examples.sh - every code example in a public header is a
# verbatim excerpt of a program in examples/ (which CI compiles and runs).
#
# In a header comment an example is announced by a line ending in
# "(examples/NAME.c):"; the lines after it indented by four or more spaces
# are the excerpt, up to the next line of prose; blank lines separate
# excerpts of the same program.  Each excerpt's lines (leading and trailing blanks
# ignored) must appear one after the other in examples/NAME.c.  An
# indented line that looks like code (ends in ';', '{' or '}') with no
# announcement is an unchecked example, and fails too.
#
#   scripts/check-header-examples.sh [--self-test]
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)

# Prints "FILE:LINE<TAB>EXAMPLE<TAB>TEXT" for each excerpt line, and
# "FILE:LINE<TAB>-<TAB>TEXT" for an unannounced code-like line.
extract() {
    awk '
        FNR == 1 { ex = ""; inblock = 0 }
        match($0, /\(examples\/[A-Za-z0-9_]+\.c\):[ \t]*$/) {
            ex = substr($0, RSTART + 1, RLENGTH - 1); sub(/\):.*/, "", ex); inblock = 0; next
        }
        /^ \*/ {
            text = substr($0, 3)
            if (text ~ /^     /) {                  # " *" then 4+ spaces of indentation
                if (ex != "") { inblock = 1; printf "%s:%d\t%s\t%s\n", FILENAME, FNR, ex, text }
                else if (text ~ /[;{}][ \t]*(\/\/.*)?$/ && text ~ /[(=]|^[ \t]*}/) printf "%s:%d\t-\t%s\n", FILENAME, FNR, text
                next
            }
            if (text ~ /^[ \t]*$/) next  # blank lines: the example goes on (a new excerpt)
            ex = ""; inblock = 0; next
        }
        { ex = ""; inblock = 0 }
    ' "$@"
}

# The same records for a Markdown guide: a fenced block whose opening
# fence follows a line ending in "(examples/NAME.c):" (blank lines
# between allowed) is an excerpt; blank lines inside it separate excerpts.
# A guide may also quote a test that make test runs ("(tests/DIR/NAME.c):",
# docs/testing.md: the tests of a user's code are its examples).
extract_md() {
    awk '
        match($0, /\((examples|tests)\/[A-Za-z0-9_\/]+\.c\):[ \t]*$/) {
            ex = substr($0, RSTART + 1, RLENGTH - 1); sub(/\):.*/, "", ex); next
        }
        /^```/ {
            if (inblock) { inblock = 0; ex = ""; next }
            if (ex != "") inblock = 1
            next
        }
        inblock { if ($0 !~ /^[ \t]*$/) printf "%s:%d\t%s\t%s\n", FILENAME, FNR, ex, $0; next }
        /^[ \t]*$/ { next }
        { ex = "" }
    ' "$@"
}

check() {  # $1: the include folder, $2: the repository root (examples/), $3...: Markdown guides
    inc=$1 rt=$2
    shift 2
    { extract "$inc"/*.h "$inc"/*/*.h 2>/dev/null; [ $# -eq 0 ] || extract_md "$@"; } | awk -F '\t' -v root="$rt" '
        function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }
        function load(f,   line, n) {
            if (f in loaded) return loaded[f]
            n = 0
            while ((getline line < (root "/" f)) > 0) file[f, ++n] = trim(line)
            close(root "/" f)
            loaded[f] = n
            return n
        }
        function flush(   n, i, j, ok) {
            if (nb == 0) return
            n = load(bex)
            if (n == 0) { printf "%s: %s does not exist or is empty\n", bwhere, bex; bad = 1; nb = 0; return }
            for (i = 1; i + nb - 1 <= n; i++) {
                ok = 1
                for (j = 1; j <= nb; j++) if (file[bex, i + j - 1] != blk[j]) { ok = 0; break }
                if (ok) { nb = 0; return }
            }
            printf "%s: this example is not an excerpt of %s (first line: %s)\n", bwhere, bex, blk[1]; bad = 1
            nb = 0
        }
        {
            split($1, w, ":"); line = w[2] + 0
            if ($2 == "-") { flush(); printf "%s: code in a comment with no (examples/NAME.c): announcement\n", $1; bad = 1; next }
            if (nb > 0 && (w[1] != bfile || line != bline + 1 || $2 != bex)) flush()
            if (nb == 0) { bfile = w[1]; bwhere = $1; bex = $2 }
            blk[++nb] = trim($3); bline = line
        }
        END { flush(); exit bad }'
}

if [ "${1:-}" = "--self-test" ]; then
    t=$(mktemp -d)
    trap 'rm -rf "$t"' EXIT
    mkdir -p "$t/include" "$t/examples"
    printf 'int f(void) {\n    return 1;\n}\n' > "$t/examples/ok.c"
    printf '/* Example (examples/ok.c):\n *\n *     int f(void) {\n *         return 1;\n *     }\n */\n' > "$t/include/a.h"
    check "$t/include" "$t" >/dev/null || { echo "check-header-examples: self-test: a true excerpt failed"; exit 1; }
    printf '/* Example (examples/ok.c):\n *\n *     int f(void) {\n *         return 2;\n *     }\n */\n' > "$t/include/a.h"
    if check "$t/include" "$t" >/dev/null; then echo "check-header-examples: self-test: a wrong excerpt passed"; exit 1; fi
    printf '/* Use it so:\n *\n *     f(1, 2);\n */\n' > "$t/include/a.h"
    if check "$t/include" "$t" >/dev/null; then echo "check-header-examples: self-test: an unannounced example passed"; exit 1; fi
    printf '/* none */\n' > "$t/include/a.h"
    printf 'See (examples/ok.c):\n\n```c\nint f(void) {\n    return 1;\n}\n```\n' > "$t/guide.md"
    check "$t/include" "$t" "$t/guide.md" >/dev/null || { echo "check-header-examples: self-test: a true guide excerpt failed"; exit 1; }
    printf 'See (examples/ok.c):\n\n```c\nint f(void) {\n    return 3;\n}\n```\n' > "$t/guide.md"
    if check "$t/include" "$t" "$t/guide.md" >/dev/null; then echo "check-header-examples: self-test: a wrong guide excerpt passed"; exit 1; fi
    mkdir -p "$t/tests/x"
    cp "$t/examples/ok.c" "$t/tests/x/ok.c"
    printf 'See (tests/x/ok.c):\n\n```c\nint f(void) {\n    return 1;\n}\n```\n' > "$t/guide.md"
    check "$t/include" "$t" "$t/guide.md" >/dev/null || { echo "check-header-examples: self-test: a true test excerpt failed"; exit 1; }
    printf 'See (tests/x/ok.c):\n\n```c\nint f(void) {\n    return 4;\n}\n```\n' > "$t/guide.md"
    if check "$t/include" "$t" "$t/guide.md" >/dev/null; then echo "check-header-examples: self-test: a wrong test excerpt passed"; exit 1; fi
    echo "check-header-examples: self-test passed"
    exit 0
fi
check "$root/include/cexec" "$root" "$root/docs/guide.md" "$root/docs/testing.md" &&
    echo "check-header-examples: every example in a header, docs/guide.md or docs/testing.md is an excerpt of examples/ or tests/"
