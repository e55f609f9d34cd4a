#!/bin/sh
# SPDX-License-Identifier: MIT
# check-commits.sh - commit subjects follow CONTRIBUTING.md: `area: short
# subject`, at most 72 characters, and a blank line before any body.
#
#   scripts/check-commits.sh [RANGE]       the commits in RANGE (default:
#                                          all since the rule was adopted)
#   scripts/check-commits.sh --hook FILE   one message, as a commit-msg hook
#                                          (CONTRIBUTING.md shows how)
# Merge commits are not checked.
set -eu

# The rule holds from issue 18 on; older commits are history.
SINCE=25bc5f9

check_message() {  # stdin: one message; $1: what to call it
    awk -v who="$1" '
        NR == 1 {
            if (length($0) > 72) { printf "%s: subject is %d characters (at most 72): %s\n", who, length($0), $0; bad = 1 }
            if ($0 !~ /^[a-z0-9_.\/, -]+: [^ ]/) { printf "%s: subject is not \"area: subject\": %s\n", who, $0; bad = 1 }
        }
        NR == 2 && $0 !~ /^[ \t]*$/ && $0 !~ /^#/ { printf "%s: no blank line after the subject\n", who; bad = 1 }
        END { exit bad }'
}

if [ "${1:-}" = "--hook" ]; then
    grep -v '^#' "$2" | check_message "commit message"
    exit $?
fi

range=${1:-$SINCE..HEAD}
if [ -z "${1:-}" ] && ! git cat-file -e "$SINCE^{commit}" 2>/dev/null; then
    echo "check-commits: $SINCE is not in this clone (shallow?); checking HEAD only"
    range="-1 HEAD"
fi
status=0
for c in $(git rev-list --no-merges $range); do
    git log -1 --format=%B "$c" | check_message "$(git log -1 --format=%h "$c")" || status=1
done
[ $status -eq 0 ] && echo "check-commits: every subject in $range is \"area: subject\", at most 72 characters"
exit $status
