#!/bin/sh
# SPDX-License-Identifier: MIT
# Turns a bench CSV (bench/results/bench-*.csv, written by `make bench`)
# into PNG plots with gnuplot:
#   <out>/speedup.png   each implementation's speed relative to oneTBB (TBB time / time)
#   <out>/launch.png    bulk launch latency per implementation (us per launch)
#   <out>/scan.png      inclusive scan throughput (GB/s) against size, 1e3..1e8
#   <out>/reduce.png    reduce throughput (GB/s) against size
#   (the memory-copy bandwidth measured in the same run is drawn on both)
#   <out>/latency.png   pool round trip (us) after each idle gap, p50 and p99, per implementation
# Usage: scripts/plot.sh [results.csv] [out_dir]   (defaults: newest CSV, docs/img)
set -eu
csv=${1:-$(ls -t bench/results/bench-*.csv 2>/dev/null | head -n 1)}
out=${2:-docs/img}
[ -n "$csv" ] && [ -f "$csv" ] || { echo "plot.sh: no results CSV (run make bench)" >&2; exit 1; }
command -v gnuplot >/dev/null || { echo "plot.sh: gnuplot is not installed (scripts/deps.sh --bench)" >&2; exit 1; }
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# speedup.dat: one row per benchmark, one column per implementation (vs_tbb).
impls="serial cexec cexec-ch cexec-p2300 openmp tbb"
awk -F, -v impls="$impls" '
    /^#/ || $1 == "group" { next }
    ($1 == "scan" || $1 == "reduce") && $4 + 0 < 1e8 { next }
    $1 == "pool" && ($2 ~ /^round trip/ || $10 == "ms/s") { next }   # latency.png; idle CPU is no speed
    $12 != "" { key = $2; if (!(key in seen)) { seen[key] = 1; order[++n] = key } v[key, $3] = $12 }
    END {
        m = split(impls, im, " ")
        printf "benchmark"; for (j = 1; j <= m; j++) printf "\t%s", im[j]; printf "\n"
        for (i = 1; i <= n; i++) {
            printf "\"%s\"", order[i]
            for (j = 1; j <= m; j++) printf "\t%s", ((order[i], im[j]) in v) ? v[order[i], im[j]] : "-"
            printf "\n"
        }
    }' "$csv" > "$tmp/speedup.dat"

awk -F, '/^#/ || $1 == "group" { next } $10 == "us/launch" { printf "%s\t%s\n", $3, $9 }' "$csv" > "$tmp/launch.dat"
machine=$(sed -n 's/^# cpu: *//p' "$csv" | head -n 1)
cpus=$(sed -n 's/^# online cpus: *//p' "$csv" | head -n 1)

gnuplot <<GP
set terminal pngcairo noenhanced size 1200,560 font "sans,10"
set output "$out/speedup.png"
set title "Speed relative to oneTBB (TBB median time / median time, same run) - $machine, $cpus CPUs - $(basename "$csv")"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.9 border -1
set boxwidth 0.9
set datafile missing "-"
set ylabel "TBB time / time (higher is better, TBB = 1)"
set xtics rotate by -20 scale 0
set key outside right top
set grid ytics
set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lc rgb "#888888"
set logscale y 2
set yrange [*:*]
plot "$tmp/speedup.dat" using 2:xtic(1) title columnheader(2) lc rgb "#999999", \
     "" using 3 title columnheader(3) lc rgb "#1f77b4", \
     "" using 4 title columnheader(4) lc rgb "#6baed6", \
     "" using 5 title columnheader(5) lc rgb "#9ecae1", \
     "" using 6 title columnheader(6) lc rgb "#2ca02c", \
     "" using 7 title columnheader(7) lc rgb "#ff7f0e"
GP

if [ -s "$tmp/launch.dat" ]; then
gnuplot <<GP
set terminal pngcairo noenhanced size 600,400 font "sans,10"
set output "$out/launch.png"
set title "bulk launch latency, shape = workers (lower is better)"
set style fill solid 0.9 border -1
set boxwidth 0.6
set ylabel "microseconds per launch"
set yrange [0:*]
set grid ytics
plot "$tmp/launch.dat" using 0:2:xtic(1) with boxes notitle lc rgb "#1f77b4"
GP
fi
# Throughput against size: one data file per group and implementation.
copy=$(awk -F, '/^#/ || $1 == "group" { next } $1 == "memory" && $9 > best { best = $9 } END { print best + 0 }' "$csv")
sweeps=""
for g in scan reduce; do
    plot=""
    for impl in serial cexec tbb openmp; do
        awk -F, -v g="$g" -v i="$impl" '/^#/ || $1 == "group" { next } $1 == g && $3 == i && $10 == "GB/s" { print $4 "\t" $9 }' \
            "$csv" | sort -g > "$tmp/$g-$impl.dat"
        [ -s "$tmp/$g-$impl.dat" ] && plot="$plot${plot:+, }\"$tmp/$g-$impl.dat\" using 1:2 with linespoints lw 2 title \"$impl\""
    done
    [ -n "$plot" ] || continue
    [ "$copy" != 0 ] && plot="$plot, $copy with lines dt 2 lc rgb \"#888888\" title \"memory-copy bandwidth ($(printf %.1f "$copy") GB/s)\""
    unit="GB/s read + written"
    [ "$g" = reduce ] && unit="GB/s read"
    gnuplot <<GP
set terminal pngcairo noenhanced size 800,500 font "sans,10"
set output "$out/$g.png"
set title "$g of doubles: throughput against size - $machine, $cpus CPUs - $(basename "$csv")"
set logscale x 10
set format x "%.0e"
set xlabel "elements"
set ylabel "$unit (higher is better)"
set yrange [0:*]
set grid
set key outside bottom center horizontal
set xrange [500:2e8]
plot $plot
GP
    sweeps="$sweeps $out/$g.png"
done

# Pool round trips: rows "round trip (<gap> idle) p50|p99", size = the gap in
# us.  One data file per implementation: gap index, gap label, p50, p99.
latency=""
awk -F, '/^#/ || $1 == "group" { next } $1 == "pool" && $2 ~ /^round trip/ { print $4 }' "$csv" | sort -g | uniq \
    > "$tmp/gaps"
if [ -s "$tmp/gaps" ]; then
    plot=""
    color=1
    for impl in cexec tbb tbb-enqueue openmp; do
        awk -F, -v i="$impl" -v gaps="$tmp/gaps" '
            BEGIN { while ((getline g < gaps) > 0) idx[g] = n++ }
            /^#/ || $1 == "group" { next }
            $1 == "pool" && $3 == i && $2 ~ /^round trip/ {
                label = $2; sub(/^round trip \(/, "", label); sub(/ idle\).*/, "", label)
                gap[$4] = label
                if ($2 ~ /p50$/) p50[$4] = $9; else p99[$4] = $9
            }
            END { for (g in gap) print idx[g] "\t" gap[g] "\t" p50[g] "\t" p99[g] }' "$csv" | sort -n > "$tmp/lat-$impl.dat"
        if [ -s "$tmp/lat-$impl.dat" ]; then
            f="$tmp/lat-$impl.dat"
            plot="$plot${plot:+, }\"$f\" using 1:3:xtic(2) with linespoints lw 2 lc $color pt 7 title \"$impl p50\""
            plot="$plot, \"$f\" using 1:4 with linespoints lw 1 dt 2 lc $color pt 6 title \"$impl p99\""
        fi
        color=$((color + 1))
    done
    gnuplot <<GP
set terminal pngcairo noenhanced size 800,500 font "sans,10"
set output "$out/latency.png"
set title "pool round trip after an idle gap (p50 solid, p99 dashed; lower is better) - $machine, $cpus CPUs - $(basename "$csv")"
set logscale y 10
set xlabel "idle gap before the round trip"
set ylabel "microseconds"
set xrange [-0.3:$(($(wc -l < "$tmp/gaps") - 1)).3]
set grid
set key outside bottom center horizontal
plot $plot
GP
    latency=" $out/latency.png"
fi

echo "wrote $out/speedup.png$( [ -s "$tmp/launch.dat" ] && echo " $out/launch.png")$sweeps$latency"
