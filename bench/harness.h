/* SPDX-License-Identifier: MIT */
/* harness.h - the benchmark harness: warm-up, repeated runs, median / min /
 * max, ratios against baselines measured in the same run, CSV output. */
#ifndef CEXEC_BENCH_HARNESS_H
#define CEXEC_BENCH_HARNESS_H

#include <stdbool.h>
#include <stddef.h>

typedef void (*bench_fn)(void *arg);

typedef struct bench_row {
    char group[32];      /* "fib", "bulk", "scan" */
    char name[48];       /* what was measured, e.g. "fib(30) no cutoff" */
    char impl[32];       /* "cexec", "serial", "tbb", "openmp", "cexec-recycling-inline" */
    double size;         /* problem size (n, indices, elements) */
    int runs;
    double median_s, min_s, max_s;
    double metric;       /* derived figure, see unit */
    char unit[16];       /* "ms", "ns/index", "GB/s", "us/launch" */
} bench_row;

/* Runs fn(arg) `warmup` times unmeasured, then `runs` times measured, and
 * records a row.  metric_from_seconds turns the median into the metric. */
bench_row *bench_measure(const char *group, const char *name, const char *impl, double size, int warmup, int runs,
                         bench_fn fn, void *arg, double (*metric_from_seconds)(double s, double size),
                         const char *unit);

/* As bench_measure, with the warm-up repeated until it has lasted warm_s
 * seconds (at least once).  A core that sat idle before the measurement
 * runs slower for its first milliseconds (its clock, the hypervisor's
 * wake-up of the virtual CPU): one short warm-up run left that to the
 * measured runs of whichever implementation came first after an idle
 * stretch. */
bench_row *bench_measure_warm(const char *group, const char *name, const char *impl, double size, double warm_s,
                              int runs, bench_fn fn, void *arg, double (*metric_from_seconds)(double s, double size),
                              const char *unit);

/* Records a row measured by the caller's own loop (latency percentiles,
 * CPU over a window: figures bench_measure's timing of a whole fn cannot
 * give).  median_s / min_s / max_s are the row's times in seconds (the
 * ratio columns compare median_s with the baselines' median_s of the same
 * group and name, so give every implementation the same kind of figure),
 * runs is the number of samples they come from. */
bench_row *bench_record(const char *group, const char *name, const char *impl, double size, int runs, double median_s,
                        double min_s, double max_s, double metric, const char *unit);

/* The p-quantile (0 <= p <= 1, nearest rank) of n > 0 samples; sorts them. */
double bench_percentile(double *samples, size_t n, double p);

/* For benchmarks whose fn repeats the work `reps` times per sample: turns
 * the row's times into times per repetition and recomputes its metric. */
void bench_per_rep(bench_row *r, double reps, double (*metric_from_seconds)(double s, double size));

double bench_now(void);
void bench_progress(const char *fmt, ...);

/* Prints the table (median, min, max, metric, ratio to the baselines of
 * the same group+name) unless !print_table, and writes
 * <results_dir>/bench-<stamp>.csv with the machine description.  Returns
 * the CSV path (static storage). */
const char *bench_report(const char *results_dir, bool print_table);

/* The row recorded for group/name/impl, or NULL. */
const bench_row *bench_find(const char *group, const char *name, const char *impl);

#endif
