/* SPDX-License-Identifier: MIT */
/* algos.c - the parallel-algorithm benchmarks: inclusive scan and reduce of
 * doubles from 1e3 to 1e8 elements (cexec, serial C, oneTBB, OpenMP), the
 * machine's memory-copy bandwidth they are measured against, and the
 * `make demo` table.
 *
 * Every implementation runs on the same buffers in the same run; results
 * are checked against a serial scan after the timed runs (the inputs are
 * small integers, so every implementation must match it exactly).  Small
 * sizes repeat the work inside a sample (about 4e7 elements per sample,
 * 1.5-2 ms of a parallel reduction: a sample spans the host's short
 * interruptions instead of being hit or missed by them whole, which made
 * medians of 0.4 ms samples swing by 30 %); the figures are per
 * repetition. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "baselines.h"
#include "bench.h"
#include "harness.h"

/* From examples/inclusive_scan.c (P2300 §1.3.2), built without main. */
typedef struct scan_ctx { const double *input; double *output; size_t size, tile_size; } scan_ctx;
ex_sender *async_inclusive_scan(ex_scheduler sch, scan_ctx *ctx, double *partials, double init, size_t *tile_count);

static double *in, *out, *expect;
static size_t cap;

/* Inputs: small integers, so every sum is exact and every correct
 * implementation gives the same bits. */
static void buffers(size_t n) {
    if (n <= cap) return;
    free(in), free(out), free(expect);
    in = malloc(n * sizeof *in), out = malloc(n * sizeof *out), expect = malloc(n * sizeof *expect);
    must(in && out && expect, "algorithms: out of memory for the buffers");
    unsigned seed = 1;
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        in[i] = (double)((seed >> 16) % 10);
    }
    memset(out, 0, n * sizeof *out);
    serial_inclusive_scan(in, expect, n);
    cap = n;
}

static size_t reps_for(size_t n) { return n >= 10000000 ? 1 : 40000000 / n; }

static double scan_gbs(double s, double n) { return n * 2 * sizeof(double) / s / 1e9; }
static double read_gbs(double s, double n) { return n * sizeof(double) / s / 1e9; }

typedef struct algo_arg {
    size_t n, reps;
    ex_sender *s;
    double sum;  /* reduce result of the last repetition */
} algo_arg;

static void check_scan(size_t n, const char *impl) {
    for (size_t i = 0; i < n; i++)
        if (out[i] != expect[i]) {
            fprintf(stderr, "bench: %s scan of %zu: wrong element %zu (%g, expected %g)\n", impl, n, i, out[i],
                    expect[i]);
            exit(1);
        }
    memset(out, 0, n * sizeof *out);
}

static void check_sum(const algo_arg *a, const char *impl) {
    double want = a->n ? expect[a->n - 1] : 0;
    if (a->sum != want) {
        fprintf(stderr, "bench: %s reduce of %zu: %g, expected %g\n", impl, a->n, a->sum, want);
        exit(1);
    }
}

static void run_cexec(void *p) {
    algo_arg *a = p;
    for (size_t k = 0; k < a->reps; k++) {
        ex_result r = ex_sync_wait(ex_sender_retain(a->s));
        must(r.disposition == EX_DISP_VALUE, r.disposition == EX_DISP_ERROR ? r.error.msg : "stopped");
        a->sum = r.values[0].as.d;
        ex_result_destroy(&r);
    }
}

static void scan_serial(void *p) { algo_arg *a = p; for (size_t k = 0; k < a->reps; k++) serial_inclusive_scan(in, out, a->n); }
static void scan_tbb(void *p) { algo_arg *a = p; for (size_t k = 0; k < a->reps; k++) tbb_inclusive_scan(in, out, a->n); }
static void scan_omp(void *p) { algo_arg *a = p; for (size_t k = 0; k < a->reps; k++) omp_inclusive_scan(in, out, a->n); }
static void red_serial(void *p) { algo_arg *a = p; for (size_t k = 0; k < a->reps; k++) a->sum = serial_reduce(in, a->n); }
static void red_tbb(void *p) { algo_arg *a = p; for (size_t k = 0; k < a->reps; k++) a->sum = tbb_reduce(in, a->n); }
static void red_omp(void *p) { algo_arg *a = p; for (size_t k = 0; k < a->reps; k++) a->sum = omp_reduce(in, a->n); }

/* The P2300 §1.3.2 pipeline from examples/inclusive_scan.c. */
static void scan_p2300(void *p) {
    algo_arg *a = p;
    size_t tiles = 4 * (size_t)workers;
    double *partials = malloc((tiles + 1) * sizeof *partials);
    must(partials != NULL, "p2300 scan: out of memory");
    for (size_t k = 0; k < a->reps; k++) {
        scan_ctx c = { in, out, a->n, 0 };
        ex_result r = ex_sync_wait(async_inclusive_scan(sched, &c, partials, 0.0, &tiles));
        must(r.disposition == EX_DISP_VALUE, "p2300 scan failed");
        ex_result_destroy(&r);
    }
    free(partials);
}

/* Warm-up of each implementation at each size: the one after the serial
 * loop found the pool's second core idle for 100 ms and ran its first
 * 2-3 ms at half speed (a trace of the reduction of 1e6 doubles: both
 * participants, on both CPUs, 55-70 us instead of 34), one warm-up run
 * of 1.5 ms did not cover it. */
#define WARM_S 0.02

static void measure(const char *group, const char *name, const char *impl, algo_arg *a, bench_fn fn,
                    double (*metric)(double, double)) {
    bench_row *r = bench_measure_warm(group, name, impl, (double)a->n, WARM_S, runs, fn, a, metric, "GB/s");
    bench_per_rep(r, (double)a->reps, metric);
}

static void scan_at(size_t n, bool with_p2300) {
    buffers(n);
    char name[48];
    snprintf(name, sizeof name, "inclusive scan %.0e doubles", (double)n);
    algo_arg a = { n, reps_for(n), NULL, 0 };
    measure("scan", name, "serial", &a, scan_serial, scan_gbs);
    check_scan(n, "serial");
    a.s = ex_inclusive_scan_f64(sched, in, out, n);
    measure("scan", name, "cexec", &a, run_cexec, scan_gbs);
    check_scan(n, "cexec");
    ex_sender_release(a.s);
    a.s = NULL;
    measure("scan", name, "tbb", &a, scan_tbb, scan_gbs);
    check_scan(n, "tbb");
    measure("scan", name, "openmp", &a, scan_omp, scan_gbs);
    check_scan(n, "openmp");
    if (with_p2300) {
        measure("scan", name, "cexec-p2300", &a, scan_p2300, scan_gbs);
        check_scan(n, "cexec-p2300");
    }
}

static void reduce_at(size_t n) {
    buffers(n);
    char name[48];
    snprintf(name, sizeof name, "reduce %.0e doubles", (double)n);
    algo_arg a = { n, reps_for(n), NULL, 0 };
    measure("reduce", name, "serial", &a, red_serial, read_gbs);
    check_sum(&a, "serial");
    a.s = ex_reduce_f64(sched, in, n, 0.0);
    measure("reduce", name, "cexec", &a, run_cexec, read_gbs);
    check_sum(&a, "cexec");
    ex_sender_release(a.s);
    a.s = NULL;
    measure("reduce", name, "tbb", &a, red_tbb, read_gbs);
    check_sum(&a, "tbb");
    measure("reduce", name, "openmp", &a, red_omp, read_gbs);
    check_sum(&a, "openmp");
}

/* --------------------------------------------------- memory bandwidth */

typedef struct copy_part { const double *src; double *dst; size_t n; bool stream; } copy_part;

static void *copy_main(void *p) {
    copy_part *c = p;
#if defined(__x86_64__)
    if (c->stream && ((uintptr_t)c->dst & 15) == 0) {
        size_t i = 0;
        for (; i + 2 <= c->n; i += 2) _mm_stream_pd(c->dst + i, _mm_loadu_pd(c->src + i));
        for (; i < c->n; i++) c->dst[i] = c->src[i];
        _mm_sfence();
        return NULL;
    }
#endif
    memcpy(c->dst, c->src, c->n * sizeof *c->dst);
    return NULL;
}

typedef struct copy_arg { size_t n; bool stream; } copy_arg;

/* Each of `workers` threads copies its slice. */
static void copy_run(void *p) {
    copy_arg *a = p;
    pthread_t t[64];
    copy_part parts[64];
    unsigned k = workers < 64 ? workers : 64;
    for (unsigned i = 0; i < k; i++) {
        size_t lo = a->n * i / k, hi = a->n * (i + 1) / k;
        parts[i] = (copy_part){ in + lo, out + lo, hi - lo, a->stream };
        must(!pthread_create(&t[i], NULL, copy_main, &parts[i]), "copy: cannot start a thread");
    }
    for (unsigned i = 0; i < k; i++) pthread_join(t[i], NULL);
}

static double copy_gbs;
static size_t copy_n;

double bench_copy_bandwidth(void) {
    if (copy_gbs > 0) return copy_gbs;
    size_t n = cap >= 100000000 ? cap : 100000000;
    buffers(n);
    char name[48];
    snprintf(name, sizeof name, "copy %.0e doubles", (double)n);
    copy_arg m = { n, false }, st = { n, true };
    double a = bench_measure("memory", name, "memcpy", (double)n, 1, runs, copy_run, &m, scan_gbs, "GB/s")->metric;
    double b = bench_measure("memory", name, "stream-copy", (double)n, 1, runs, copy_run, &st, scan_gbs, "GB/s")->metric;
    memset(out, 0, n * sizeof *out);
    copy_n = n;
    copy_gbs = a > b ? a : b;
    return copy_gbs;
}

/* The largest scan against the copy, in pairs: a stream copy of the same
 * n elements, then cexec's scan, `runs` times.  Both halves of a pair see
 * the host's memory in the same period (its bandwidth changes between
 * periods: a copy of 1e8 doubles took 16.5-17.8 ms in some and 27.6-32.8
 * in others), which one copy row measured apart from the scan row does
 * not promise.  The row's figure is the median of the pairs' copy time
 * over scan time, in % (100: as fast as the copy); its times are the
 * scan's. */
static void scan_copy_pairs(size_t n) {
    double ratio[64], scan_s[64];
    int k = runs < 64 ? runs : 64;
    ex_sender *s = ex_inclusive_scan_f64(sched, in, out, n);
    must(ex_sender_status(s).code == 0, "scan against copy: cannot build the scan");
    copy_arg c = { n, true };
    algo_arg a = { n, 1, s, 0 };
    copy_run(&c), run_cexec(&a);  /* warm-up */
    for (int i = 0; i < k; i++) {
        double t0 = bench_now();
        copy_run(&c);
        double t1 = bench_now();
        run_cexec(&a);
        double t2 = bench_now();
        scan_s[i] = t2 - t1;
        ratio[i] = 100 * (t1 - t0) / (t2 - t1);
    }
    check_scan(n, "cexec (against copy)");
    ex_sender_release(s);
    double med_ratio = bench_percentile(ratio, (size_t)k, 0.5), med_s = bench_percentile(scan_s, (size_t)k, 0.5);
    char name[64];
    snprintf(name, sizeof name, "scan %.0e doubles against a copy, in pairs", (double)n);
    /* (bench_percentile sorted scan_s: its ends are the min and the max) */
    bench_record("scan", name, "cexec", (double)n, k, med_s, scan_s[0], scan_s[k - 1], med_ratio, "% of copy");
    printf("scan of %.0e doubles against a stream copy of the same size, %d pair%s: median %.0f %% of the copy's "
           "speed\n", (double)n, k, k == 1 ? "" : "s", med_ratio);
}

/* ------------------------------------------------------------- groups */

static void summary(const char *group, const char *what, double limit, const char *limit_name, double max_size) {
    printf("\n%s (GB/s, median of %d runs; %s = %.1f GB/s)\n", what, runs, limit_name, limit);
    printf("%12s %9s %9s %9s %9s   %8s %8s %9s\n", "elements", "serial", "cexec", "tbb", "openmp", "x serial", "x tbb",
           "of limit");
    for (double n = 1e3; n <= max_size * 1.001; n *= 10) {
        char name[48];
        snprintf(name, sizeof name, "%s %.0e doubles", !strcmp(group, "scan") ? "inclusive scan" : "reduce", n);
        const bench_row *s = bench_find(group, name, "serial"), *c = bench_find(group, name, "cexec"),
                        *t = bench_find(group, name, "tbb"), *o = bench_find(group, name, "openmp");
        if (!s || !c || !t || !o) continue;
        printf("%12.0e %9.2f %9.2f %9.2f %9.2f   %7.2fx %7.2fx %8.0f%%\n", n, s->metric, c->metric, t->metric,
               o->metric, s->median_s / c->median_s, t->median_s / c->median_s, 100 * c->metric / limit);
    }
}

/* The copy bandwidth is measured right before the largest scan, which is
 * compared with it: the host's memory bandwidth changes from one period
 * to the next (a copy of 1e8 doubles took 16.5-17.8 ms in some and
 * 27.6-32.8 in others), and measured before the smaller sizes it was
 * 20 s older than that scan. */
void bench_scan(double max_size) {
    double copy = 0;
    for (double n = 1e3; n <= max_size * 1.001; n *= 10) {
        bool largest = n * 1.001 >= max_size;
        if (largest) copy = bench_copy_bandwidth();
        scan_at((size_t)n, largest);
        if (largest) scan_copy_pairs((size_t)n);
    }
    summary("scan", "inclusive scan of doubles", copy, "memory-copy bandwidth (one read + one write pass)", max_size);
}

void bench_reduce(double max_size) {
    double copy = bench_copy_bandwidth();
    for (double n = 1e3; n <= max_size * 1.001; n *= 10) reduce_at((size_t)n);
    /* A reduction makes one read pass; the copy bandwidth (read + write) is
     * given as the reference, not as its limit. */
    summary("reduce", "reduce of doubles", copy, "memory-copy bandwidth, for reference", max_size);
}

void bench_demo(double n) {
    double copy = bench_copy_bandwidth();
    scan_at((size_t)n, false);
    char name[48];
    snprintf(name, sizeof name, "inclusive scan %.0e doubles", n);
    printf("\ninclusive scan of %.0e doubles on %u workers (oneTBB and OpenMP use as many), median of %d runs\n", n,
           workers, runs);
    printf("machine memory-copy bandwidth: %.1f GB/s (best of memcpy and a streaming copy on %u threads)\n\n", copy,
           workers);
    printf("%-10s %10s %9s %9s %9s %16s\n", "impl", "time", "GB/s", "x serial", "x tbb", "of copy bandwidth");
    const bench_row *s = bench_find("scan", name, "serial"), *t = bench_find("scan", name, "tbb");
    static const char *const impls[] = { "serial", "cexec", "tbb", "openmp" };
    for (int i = 0; i < 4; i++) {
        const bench_row *r = bench_find("scan", name, impls[i]);
        if (!r) continue;
        printf("%-10s %8.2fms %9.2f %8.2fx %8.2fx %15.0f%%\n", impls[i], r->median_s * 1e3, r->metric,
               s->median_s / r->median_s, t->median_s / r->median_s, 100 * r->metric / copy);
    }
    printf("\nGB/s counts 16 bytes per element (one read, one write).  The full suite: make bench.\n");
}
