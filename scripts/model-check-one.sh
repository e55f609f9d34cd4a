#!/bin/sh
# SPDX-License-Identifier: MIT
# scripts/model-check-one.sh - one check of `make model-check` (mk/model.mk):
#
#   model-check-one.sh DIR NAME:MODEL:EXPECT:MODE:SWITCHES
#
# Builds pan for model/MODEL.pml with SWITCHES (comma-separated -D flags)
# in DIR/NAME, runs it and writes one line, "ok ..." or "FAILED ...", to
# DIR/NAME/verdict.  A "pass" check must finish its search with no error; a
# "fail" check is a deliberately broken variant and must find one.  Several
# run at once, so each keeps to its own directory and prints only its line.
# Settings come from the environment: SPIN, MODEL_CC, MODEL_OPT,
# MODEL_MEMLIM, MODEL_DEPTH (mk/model.mk passes them).
set -u
dir=$1
check=$2
name=$(echo "$check" | cut -d: -f1)
model=$(echo "$check" | cut -d: -f2)
expect=$(echo "$check" | cut -d: -f3)
mode=$(echo "$check" | cut -d: -f4)
defs=$(echo "$check" | cut -d: -f5 | tr ',' ' ')
d=$dir/$name
rm -rf "$d" && mkdir -p "$d" && cp "model/$model.pml" "$d/" || exit 1

# np: non-progress cycles under weak fairness; safety: assertions and
# invalid end states.  Broken variants stop at their first error: -O0
# builds faster than the search takes.
if [ "$mode" = np ]; then ccf="-DNP -DNFAIR=4"; runf="-l -f"; else ccf="-DSAFETY"; runf=""; fi
if [ "$expect" = pass ]; then opt=$MODEL_OPT; else opt=-O0; fi

verdict() {
    line=$(printf '%-27s %-6s %s' "$name" "$1" "$2")
    echo "$line" > "$d/verdict"
    echo "model-check: $line"
}

# shellcheck disable=SC2086  # defs, ccf and runf are lists of flags
if ! (cd "$d" && $SPIN $defs -a "$model.pml" > spin.log 2>&1 &&
      $MODEL_CC $opt -w $ccf -DCOLLAPSE -DMEMLIM="$MODEL_MEMLIM" -o pan pan.c > cc.log 2>&1); then
    verdict FAILED "failed to build (see $d/spin.log, $d/cc.log)"
    exit 0
fi
# shellcheck disable=SC2086
(cd "$d" && ./pan -m"$MODEL_DEPTH" $runf > pan.log 2>&1)

log=$d/pan.log
errors=$(sed -n 's/.*errors: \([0-9][0-9]*\).*/\1/p' "$log" | tail -n 1)
states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' "$log" | tail -n 1)
visited=$(sed -n 's/.*states, stored (\([0-9.e+]*\) visited).*/, \1 visited/p' "$log" | tail -n 1)
depth=$(sed -n 's/.*depth reached \([0-9][0-9]*\).*/\1/p' "$log" | tail -n 1)
secs=$(sed -n 's/^pan: elapsed time \([0-9.e+]*\) seconds.*/\1/p' "$log" | tail -n 1)
trail="trail: cd $d && spin -t -p $defs $model.pml"
what="$mode${defs:+ $defs}"

if [ -z "$errors" ]; then
    v=FAILED; why="pan printed no result (see $log)"
elif [ "$expect" = pass ]; then
    if [ "$errors" != 0 ]; then
        v=FAILED; why="errors: $errors: $(grep -m1 -E 'pan:1:|violated|cycle' "$log") ($trail)"
    elif grep -q -E 'Search not completed|max search depth too small|reached -DMEMLIM' "$log"; then
        v=FAILED; why="search not completed (see $log)"
    else
        v=ok; why="errors: 0"
    fi
elif [ "$errors" != 0 ]; then
    v=ok; why="error found as it must be: $(grep -m1 -E 'pan:1:' "$log" | sed 's/^pan:1: //') ($trail)"
else
    v=FAILED; why="a broken variant passed: the model cannot see this bug"
fi
verdict "$v" "$(printf '%s states%s, depth %s, %s s  [%s: %s]  %s' "$states" "$visited" "$depth" "$secs" "$model" "$what" "$why")"
