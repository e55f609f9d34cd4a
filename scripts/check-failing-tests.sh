#!/bin/sh
# SPDX-License-Identifier: MIT
# check-failing-tests.sh - the tests that must fail do, each with its
# message.
#
#   scripts/check-failing-tests.sh BINARY SOURCE...
#   scripts/check-failing-tests.sh --self-test
#
# BINARY is a Criterion program whose tests are all declared, in SOURCE,
# as MUST_FAIL(name, "message") (tests/testing/failing/): tests of the
# assertions of <cexec/testing.h> that must fail.  It is run with TAP
# output; every test must be reported "not ok" with an assertion failure
# whose text contains its message (the test's description), not a pass,
# a crash or a timeout, and as many tests must run as SOURCE declares.
# Exits 1 and says which test did what otherwise.  `--self-test` checks
# that a pass, a crash, another message and a missing test are caught.
set -eu

# $1: the TAP output, $2: the number of tests declared.
check_tap() {
    awk -v declared="$2" '
        function finish() {
            if (name == "") return
            if (!asserted) {
                printf "check-failing-tests: %s did not fail an assertion (%s)\n", name, how
                bad = 1
            } else if (index(text, expect) == 0) {
                printf "check-failing-tests: %s failed with another message\n  expected: %s\n  printed:  %s\n", name, expect, text
                bad = 1
            }
            name = ""
        }
        /^ok / {
            finish(); ran++
            line = $0; sub(/^ok - /, "", line); sub(/ .*/, "", line)
            printf "check-failing-tests: %s passed; it must fail\n", line
            bad = 1; next
        }
        /^not ok / {
            finish(); ran++
            line = $0; sub(/^not ok - /, "", line)
            name = line; sub(/ .*/, "", name)
            how = substr(line, length(name) + 2)
            expect = how; sub(/ \([0-9.]+s\)$/, "", expect)
            text = ""; asserted = 0; failures = 0; next
        }
        name != "" && /^  failures:/ { failures = 1; next }
        name != "" && failures && /^  - / { asserted = 1; next }
        name != "" && failures && /^      / {
            t = $0; sub(/^ +/, "", t); sub(/^Assertion failed: /, "", t)
            text = text (text == "" ? "" : " | ") t; next
        }
        /^  \.\.\./ { failures = 0; next }
        END {
            finish()
            if (ran != declared) { printf "check-failing-tests: %d tests ran, %d declared\n", ran, declared; bad = 1 }
            if (!bad) printf "check-failing-tests: %d tests failed as they must, each with its message\n", ran
            exit bad
        }
    ' "$1"
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ "${1:-}" = "--self-test" ]; then
    good='TAP version 13
1..2
not ok - s::a the message (0.00s)
  ---
  assertions: 1
  failures:
  - f.c:1: |+
      Assertion failed: before the message after
  ...
not ok - s::b second (0.01s)
  ---
  assertions: 2
  failures:
  - f.c:2: |+
      Assertion failed: first
  - f.c:3: |+
      Assertion failed: the second one
  ...'
    printf '%s\n' "$good" > "$tmp/good"
    check_tap "$tmp/good" 2 > /dev/null || { echo "check-failing-tests: self-test FAILED (good output refused)"; exit 1; }
    # Each broken output must be refused, and for its own reason.
    for broken in pass crash message count; do
        case $broken in
            pass) sed 's/^not ok - s::b second (0.01s)$/ok - s::b second (0.01s)/' "$tmp/good" > "$tmp/t"
                n=2; why="s::b passed; it must fail" ;;
            crash) printf '%s\nnot ok - s::c unexpected signal after f.c:4\n' "$good" > "$tmp/t"
                n=3; why="s::c did not fail an assertion (unexpected signal after f.c:4)" ;;
            message) sed 's/the second one/the 2nd one/' "$tmp/good" > "$tmp/t"
                n=2; why="s::b failed with another message" ;;
            count) cp "$tmp/good" "$tmp/t"
                n=3; why="2 tests ran, 3 declared" ;;
        esac
        if check_tap "$tmp/t" $n > "$tmp/why"; then
            echo "check-failing-tests: self-test FAILED (a $broken passed)"; exit 1
        fi
        grep -qF "$why" "$tmp/why" || { echo "check-failing-tests: self-test FAILED (a $broken: $(cat "$tmp/why"))"; exit 1; }
    done
    echo "check-failing-tests: self-test passed"
    exit 0
fi

bin=${1:?usage: scripts/check-failing-tests.sh BINARY SOURCE...}
shift
declared=$(cat "$@" | grep -c '^MUST_FAIL(' || true)
[ "$declared" -gt 0 ] || { echo "check-failing-tests: no MUST_FAIL test in $*"; exit 1; }
if "$bin" --tap="$tmp/tap" --jobs 2 > "$tmp/out" 2>&1; then
    echo "check-failing-tests: $bin exited 0: its tests must fail"
    status=1
else
    status=0
fi
check_tap "$tmp/tap" "$declared" || status=1
if [ $status -ne 0 ] && [ -s "$tmp/out" ]; then echo "check-failing-tests: the run's output:"; cat "$tmp/out"; fi
exit $status
