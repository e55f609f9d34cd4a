/* SPDX-License-Identifier: MIT */
/* harness.c - see harness.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "harness.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#define MAX_ROWS 512
#define MAX_RUNS 64

static bench_row rows[MAX_ROWS];
static int nrows;

double bench_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void bench_progress(const char *fmt, ...) {
    if (!isatty(STDERR_FILENO)) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "\r\033[K");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fflush(stderr);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The measured runs after the warm-up. */
static bench_row *measure_runs(const char *group, const char *name, const char *impl, double size, int runs,
                               bench_fn fn, void *arg, double (*metric_from_seconds)(double s, double size),
                               const char *unit) {
    if (runs > MAX_RUNS) runs = MAX_RUNS;
    double t[MAX_RUNS];
    for (int i = 0; i < runs; i++) {
        bench_progress("%s / %s / %s: run %d/%d", group, name, impl, i + 1, runs);
        double t0 = bench_now();
        fn(arg);
        t[i] = bench_now() - t0;
    }
    qsort(t, (size_t)runs, sizeof t[0], cmp_double);
    double median = runs % 2 ? t[runs / 2] : (t[runs / 2 - 1] + t[runs / 2]) / 2;
    bench_progress("");
    return bench_record(group, name, impl, size, runs, median, t[0], t[runs - 1], metric_from_seconds(median, size),
                        unit);
}

bench_row *bench_measure(const char *group, const char *name, const char *impl, double size, int warmup, int runs,
                         bench_fn fn, void *arg, double (*metric_from_seconds)(double s, double size),
                         const char *unit) {
    for (int i = 0; i < warmup; i++) {
        bench_progress("%s / %s / %s: warm-up %d/%d", group, name, impl, i + 1, warmup);
        fn(arg);
    }
    return measure_runs(group, name, impl, size, runs, fn, arg, metric_from_seconds, unit);
}

bench_row *bench_measure_warm(const char *group, const char *name, const char *impl, double size, double warm_s,
                              int runs, bench_fn fn, void *arg, double (*metric_from_seconds)(double s, double size),
                              const char *unit) {
    double t0 = bench_now();
    do {
        bench_progress("%s / %s / %s: warm-up", group, name, impl);
        fn(arg);
    } while (bench_now() - t0 < warm_s);
    return measure_runs(group, name, impl, size, runs, fn, arg, metric_from_seconds, unit);
}

bench_row *bench_record(const char *group, const char *name, const char *impl, double size, int runs, double median_s,
                        double min_s, double max_s, double metric, const char *unit) {
    if (nrows == MAX_ROWS) {
        fprintf(stderr, "bench: too many rows\n");
        exit(1);
    }
    bench_row *r = &rows[nrows++];
    memset(r, 0, sizeof *r);
    snprintf(r->group, sizeof r->group, "%s", group);
    snprintf(r->name, sizeof r->name, "%s", name);
    snprintf(r->impl, sizeof r->impl, "%s", impl);
    snprintf(r->unit, sizeof r->unit, "%s", unit);
    r->size = size;
    r->runs = runs;
    r->median_s = median_s;
    r->min_s = min_s;
    r->max_s = max_s;
    r->metric = metric;
    return r;
}

double bench_percentile(double *samples, size_t n, double p) {
    qsort(samples, n, sizeof samples[0], cmp_double);
    double rank = p * (double)n;  /* nearest rank: the ceil(p n)-th smallest */
    size_t k = (size_t)rank;
    if ((double)k < rank) k++;
    return samples[k ? (k > n ? n : k) - 1 : 0];
}

void bench_per_rep(bench_row *r, double reps, double (*metric_from_seconds)(double s, double size)) {
    r->median_s /= reps;
    r->min_s /= reps;
    r->max_s /= reps;
    r->metric = metric_from_seconds(r->median_s, r->size);
}

/* Median time of the same benchmark by another implementation, or 0. */
/* Writes s as one CSV field (RFC 4180): quoted when it holds a comma or a
 * quote, quotes doubled. */
static void csv_field(FILE *f, const char *s) {
    if (!strpbrk(s, ",\"")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static double baseline(const bench_row *r, const char *impl) {
    for (int i = 0; i < nrows; i++)
        if (!strcmp(rows[i].group, r->group) && !strcmp(rows[i].name, r->name) && !strcmp(rows[i].impl, impl))
            return rows[i].median_s;
    return 0;
}

const bench_row *bench_find(const char *group, const char *name, const char *impl) {
    for (int i = 0; i < nrows; i++)
        if (!strcmp(rows[i].group, group) && !strcmp(rows[i].name, name) && !strcmp(rows[i].impl, impl))
            return &rows[i];
    return NULL;
}

static void machine(FILE *f, const char *prefix) {
    struct utsname u;
    if (!uname(&u)) fprintf(f, "%skernel: %s %s %s\n", prefix, u.sysname, u.release, u.machine);
    fprintf(f, "%sonline cpus: %ld\n", prefix, sysconf(_SC_NPROCESSORS_ONLN));
    FILE *c = fopen("/proc/cpuinfo", "r");
    if (c) {
        char line[256];
        while (fgets(line, sizeof line, c))
            if (!strncmp(line, "model name", 10)) {
                char *v = strchr(line, ':');
                fprintf(f, "%scpu:%s", prefix, v ? v + 1 : line);
                break;
            }
        fclose(c);
    }
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    fprintf(f, "%smemory: %.1f GiB\n", prefix, (double)pages * (double)psize / (1024.0 * 1024 * 1024));
}

static const char *const bases[] = { "serial", "tbb", "openmp", "malloc", "libuv" };
enum { NB = 5 };

static void print_rows(void) {
    printf("\n%-8s %-30s %-22s %10s %10s %10s %12s   %8s %8s %8s %8s %8s\n", "group", "benchmark", "impl", "median",
           "min", "max", "metric", "xserial", "xtbb", "xopenmp", "xmalloc", "xlibuv");
    for (int i = 0; i < nrows; i++) {
        bench_row *r = &rows[i];
        printf("%-8s %-30s %-22s %9.3fms %9.3fms %9.3fms %8.3f %-9s", r->group, r->name, r->impl, r->median_s * 1e3,
               r->min_s * 1e3, r->max_s * 1e3, r->metric, r->unit);
        for (int b = 0; b < NB; b++) {
            double base = baseline(r, bases[b]);
            if (base > 0 && r->median_s > 0) printf(" %7.2fx", base / r->median_s);
            else printf(" %8s", "-");
        }
        printf("\n");
    }
    printf("xB = B's median time / this median time (above 1: faster than B). Median of the runs after warm-up.\n");
}

const char *bench_report(const char *results_dir, bool print_table) {
    if (print_table) print_rows();
    static char path[512];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    snprintf(path, sizeof path, "%s/bench-%s.csv", results_dir, stamp);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "bench: cannot write %s\n", path);
        return NULL;
    }
    machine(f, "# ");
    fprintf(f, "group,benchmark,impl,size,runs,median_s,min_s,max_s,metric,unit,vs_serial,vs_tbb,vs_openmp,vs_malloc,"
               "vs_libuv\n");
    for (int i = 0; i < nrows; i++) {
        bench_row *r = &rows[i];
        csv_field(f, r->group);
        fputc(',', f);
        csv_field(f, r->name);  /* names like "pair, same thread" need quotes */
        fputc(',', f);
        csv_field(f, r->impl);
        fprintf(f, ",%.0f,%d,%.9f,%.9f,%.9f,%.6f,", r->size, r->runs, r->median_s, r->min_s, r->max_s, r->metric);
        csv_field(f, r->unit);
        for (int b = 0; b < NB; b++) {
            double base = baseline(r, bases[b]);
            if (base > 0 && r->median_s > 0) fprintf(f, ",%.4f", base / r->median_s);
            else fprintf(f, ",");
        }
        fprintf(f, "\n");
    }
    fclose(f);
    printf("results: %s\n", path);
    machine(stdout, "machine ");
    return path;
}
