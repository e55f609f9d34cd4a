#!/bin/sh
# SPDX-License-Identifier: MIT
# Renders a cexec pool trace (Chrome trace-event JSON written by
# CEXEC_TRACE=file.json) as a PNG timeline: one row per worker, green = run,
# orange = steal, grey = parked.  Needs gnuplot (scripts/deps.sh --bench).
#   scripts/trace_plot.sh trace.json trace.png [title]
# For interactive viewing open the JSON in https://ui.perfetto.dev or
# chrome://tracing instead.
set -eu
in=${1:?usage: trace_plot.sh trace.json out.png [title]}
out=${2:?usage: trace_plot.sh trace.json out.png [title]}
title=${3:-cexec pool trace}
command -v gnuplot >/dev/null || { echo "trace_plot.sh: gnuplot is not installed (scripts/deps.sh --bench)" >&2; exit 1; }
data=$(mktemp)
trap 'rm -f "$data"' EXIT
# One complete ("X") event per line: name, tid, ts and dur in microseconds.
sed -n 's/.*"name":"\([a-z]*\)".*"ph":"X".*"tid":\([0-9]*\),"ts":\([0-9.]*\),"dur":\([0-9.]*\).*/\1 \2 \3 \4/p' "$in" |
    awk '{ k = ($1 == "run") ? 1 : ($1 == "steal") ? 2 : 3; print $3 / 1000, $2, $4 / 1000, k }' > "$data"
[ -s "$data" ] || { echo "trace_plot.sh: no events in $in" >&2; exit 1; }
workers=$(awk 'BEGIN { m = 0 } { if ($2 > m) m = $2 } END { print m + 1 }' "$data")
gnuplot <<GP
set terminal pngcairo noenhanced size 1400,$((160 + 60 * workers)) font "sans,11"
set output "$out"
set title "$title"
set xlabel "time (ms)"
set ylabel "worker"
set yrange [-0.6:$workers - 0.4]
set ytics 1
set style fill solid 1.0 noborder
set key outside right top
plot "$data" using (\$4 == 3 ? \$1 + \$3 / 2 : 1/0):2:(\$3 / 2):(0.15) with boxxyerror lc rgb "#bbbbbb" title "parked", \
     "" using (\$4 == 1 ? \$1 + \$3 / 2 : 1/0):2:(\$3 / 2):(0.35) with boxxyerror lc rgb "#2e8b57" title "run", \
     "" using (\$4 == 2 ? \$1 + \$3 / 2 : 1/0):2:(\$3 / 2):(0.35) with boxxyerror lc rgb "#ff8c00" title "steal"
GP
echo "wrote $out"
