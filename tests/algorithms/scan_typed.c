/* SPDX-License-Identifier: MIT */
/* algo_scan, typed scans: ex_inclusive_scan_f64/_i64 and
 * ex_exclusive_scan_f64/_i64 (cexec/algorithms.h) at every size around the
 * tile boundaries (16384 elements) and a large one, on every kind of
 * scheduler: inline, a run_loop driven by the test thread, a
 * single_thread_context and pools of 1, 2 and 4 workers.  int64 results
 * are exact (wrapping); double results are exact on integers, within the
 * documented bound on random data, and bit-identical whatever the
 * scheduler, the alignment, in place or not, and for outputs beyond the
 * last-level cache.  The algo_scan suite spans the scan_*.c files; its
 * TestSuite (timeout) is declared here once.  Nothing here asserts on
 * timing; every wait is bounded. */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "algorithms/exi_kernels.h"  /* exi_scan_*, exi_sum_*: white-box */
#include "algorithms/local_fixtures.h"

TEST_SUITE(algo_scan, 120);

static const int64_t i64_inits[] = { 0, -1, INT64_MAX, INT64_MIN, 0x0123456789abcdefll, -77 };

/* ============================================================ typed scans */

static ex_sender *scan_f64(ex_scheduler sch, bool excl, const double *in, double *out, size_t n, double init) {
    return excl ? ex_exclusive_scan_f64(sch, in, out, n, init) : ex_inclusive_scan_f64(sch, in, out, n);
}

/* Runs a typed scan on a; returns its completion value (the total). */
static int64_t run_scan_i64(algo_sched *a, bool excl, const int64_t *in, int64_t *out, size_t n, int64_t init) {
    return run_one_value(a, scan_i64(a->sch, excl, in, out, n, init), EX_T_INT, kind_name(excl)).as.i;
}

static double run_scan_f64(algo_sched *a, bool excl, const double *in, double *out, size_t n, double init) {
    return run_one_value(a, scan_f64(a->sch, excl, in, out, n, init), EX_T_DOUBLE, kind_name(excl)).as.d;
}

/* One int64 scan of n random values against the serial loop. */
static void check_i64(algo_sched *a, size_t n, bool excl, int64_t init, uint64_t seed) {
    int64_t *in = xmalloc(n * 8), *out = xmalloc(n * 8), *want = xmalloc(n * 8);
    fill_i64(in, n, seed);
    memset(out, SENTINEL_BYTE, n * 8);
    int64_t total_want = ref_scan_i64(in, want, n, excl, init);
    int64_t total = run_scan_i64(a, excl, in, out, n, init);
    size_t d = first_diff_i64(out, want, n);
    cr_assert_eq(d, SIZE_MAX, "%s %s n=%zu init=%lld: out[%zu] = %lld, serial loop %lld", a->name, kind_name(excl), n,
                 (long long)init, d, (long long)out[d], (long long)want[d]);
    cr_assert_eq(total, total_want, "%s %s n=%zu: total %lld, serial %lld", a->name, kind_name(excl), n,
                 (long long)total, (long long)total_want);
    if (!excl && n) cr_assert_eq(total, out[n - 1], "%s: inclusive total must equal out[n-1]", a->name);
    if (!n) cr_assert_eq(total, excl ? init : 0, "%s: the total of an empty scan", a->name);
    fill_i64(want, n, seed);
    cr_assert_eq(first_diff_i64(in, want, n), SIZE_MAX, "%s: the input was modified", a->name);
    free(in), free(out), free(want);
}

/* Integer-valued doubles: exact, equal to the serial loop. */
static void check_f64_int(algo_sched *a, size_t n, bool excl, double init, uint64_t seed) {
    double *in = xmalloc(n * 8), *out = xmalloc(n * 8), *want = xmalloc(n * 8);
    fill_f64_int(in, n, seed);
    double total_want = ref_scan_f64(in, want, n, excl, init);
    memset(out, SENTINEL_BYTE, n * 8);
    double total = run_scan_f64(a, excl, in, out, n, init);
    for (size_t i = 0; i < n; i++)
        cr_assert(out[i] == want[i], "%s %s n=%zu (integers): out[%zu] = %.17g, serial loop %.17g", a->name,
                  kind_name(excl), n, i, out[i], want[i]);
    cr_assert(total == total_want, "%s %s n=%zu: total %.17g, serial %.17g", a->name, kind_name(excl), n, total,
              total_want);
    if (!excl && n) cr_assert(same_bits(total, out[n - 1]), "%s: inclusive total must equal out[n-1]", a->name);
    free(in), free(out), free(want);
}

/* Random doubles of mixed signs and magnitudes: within the bound. */
static void check_f64_mixed(algo_sched *a, size_t n, bool excl, double init, uint64_t seed) {
    double *in = xmalloc(n * 8), *out = xmalloc(n * 8);
    fill_f64_mixed(in, n, seed);
    memset(out, SENTINEL_BYTE, n * 8);
    double total = run_scan_f64(a, excl, in, out, n, init);
    double ratio;
    size_t bad = check_f64_scan_bound(in, out, n, excl, init, total, &ratio);
    cr_assert_eq(bad, SIZE_MAX, "%s %s n=%zu: %s %zu is outside the documented bound (worst error/bound %.3g)", a->name,
                 kind_name(excl), n, bad == n ? "the total, at" : "element", bad, ratio);
    if (!excl && n) cr_assert(same_bits(total, out[n - 1]), "%s: inclusive total must equal out[n-1]", a->name);
    if (!n) cr_assert(same_bits(total, excl ? init : 0.0), "%s: the total of an empty scan", a->name);
    free(in), free(out);
}

static void i64_every_size(algo_sched *a) {
    for (size_t j = 0; j < algo_nsizes; j++) {
        size_t n = algo_sizes[j];
        check_i64(a, n, false, 0, 1000 + j);
        check_i64(a, n, true, i64_inits[j % (sizeof i64_inits / sizeof i64_inits[0])], 2000 + j);
    }
    check_i64(a, ALGO_HUGE, false, 0, 3000);
    check_i64(a, ALGO_HUGE, true, INT64_MAX - 5, 3001);
}

static void f64_every_size(algo_sched *a) {
    for (size_t j = 0; j < algo_nsizes; j++) {
        size_t n = algo_sizes[j];
        check_f64_int(a, n, false, 0, 4000 + j);
        check_f64_int(a, n, true, -37.0, 5000 + j);
        check_f64_mixed(a, n, false, 0, 6000 + j);
        check_f64_mixed(a, n, true, 12345.678, 7000 + j);
    }
    check_f64_int(a, ALGO_HUGE, false, 0, 8000);
    check_f64_int(a, ALGO_HUGE, true, 1e6, 8001);
    check_f64_mixed(a, ALGO_HUGE, false, 0, 8002);
    check_f64_mixed(a, ALGO_HUGE, true, -0.125, 8003);
}

TEST_EVERY_SCHEDULER(algo_scan, i64_every_size, i64_every_size)
TEST_EVERY_SCHEDULER(algo_scan, f64_every_size, f64_every_size)

static void i64_overflow_wraps_twos_complement_on(algo_sched *a) {
    /* INT64_MAX + 1 == INT64_MIN */
    int64_t in2[2] = { INT64_MAX, 1 }, out2[2];
    int64_t t = run_scan_i64(a, false, in2, out2, 2, 0);
    cr_assert_eq(out2[0], INT64_MAX);
    cr_assert_eq(out2[1], INT64_MIN, "%s: INT64_MAX + 1 gave %lld", a->name, (long long)out2[1]);
    cr_assert_eq(t, INT64_MIN);
    t = run_scan_i64(a, true, in2, out2, 2, INT64_MAX);
    cr_assert_eq(out2[0], INT64_MAX);
    cr_assert_eq(out2[1], -2, "%s: INT64_MAX + INT64_MAX wraps to -2", a->name);
    cr_assert_eq(t, -1);

    /* Many tiles of INT64_MAX / 3 and INT64_MIN: wraps inside tiles and in the chain. */
    size_t n = 5 * ALGO_TILE + 77;
    int64_t *in = xmalloc(n * 8), *out = xmalloc(n * 8), *want = xmalloc(n * 8);
    for (size_t i = 0; i < n; i++) in[i] = i % 3 == 2 ? INT64_MIN : INT64_MAX / 3 + (int64_t)i;
    for (int excl = 0; excl < 2; excl++) {
        int64_t tw = ref_scan_i64(in, want, n, excl, INT64_MAX);
        t = run_scan_i64(a, excl, in, out, n, INT64_MAX);
        size_t d = first_diff_i64(out, want, n);
        cr_assert_eq(d, SIZE_MAX, "%s %s: out[%zu] = %lld, want %lld", a->name, kind_name(excl), d,
                     (long long)out[d], (long long)want[d]);
        cr_assert_eq(t, tw);
    }
    free(in), free(out), free(want);
}

Test(algo_scan, i64_overflow_wraps_twos_complement) {
    for_kinds(2, (const as_kind[]){ AS_INLINE, AS_POOL4 }, i64_overflow_wraps_twos_complement_on);
}

static void empty_input_with_null_arrays_completes_with_the_documented_total_on(algo_sched *a) {
    double d = run_scan_f64(a, false, NULL, NULL, 0, 0);
    cr_assert(same_bits(d, 0.0), "%s: inclusive f64 of nothing is 0.0, got %g", a->name, d);
    d = run_scan_f64(a, true, NULL, NULL, 0, -2.5);
    cr_assert(same_bits(d, -2.5), "%s: exclusive f64 of nothing is init, got %g", a->name, d);
    cr_assert_eq(run_scan_i64(a, false, NULL, NULL, 0, 0), 0, "%s", a->name);
    cr_assert_eq(run_scan_i64(a, true, NULL, NULL, 0, INT64_MIN), INT64_MIN, "%s", a->name);
    ex_monoid m = { sizeof(m22), &m22_identity, m22_combine, NULL };
    m22 init = { 9, 9, 9, 9 };
    for (int excl = 0; excl < 2; excl++) {
        ex_sender *s = excl ? ex_exclusive_scan(a->sch, &m, NULL, NULL, 0, &init) : ex_inclusive_scan(a->sch, &m, NULL, NULL, 0);
        cr_assert_eq(ex_sender_status(s).code, 0, "%s: NULL arrays with n == 0 are fine", a->name);
        arec r;
        as_run_plain(a, s, &r);
        algo_expect_value(&r, 0, a->name);
        ex_sender_release(s);
    }
}

Test(algo_scan, empty_input_with_null_arrays_completes_with_the_documented_total) {
    for_each_kind(AS_INLINE, AS_POOL4, empty_input_with_null_arrays_completes_with_the_documented_total_on);
}

/* ============================================================ determinism */

static const size_t det_sizes[] = { 9, 16385, 3 * 16384 + 5, 37 * 16384 + 11, ALGO_HUGE };

Test(algo_scan, f64_results_are_bit_identical_on_every_scheduler) {
    static algo_sched a[AS_COUNT];
    as_init_each(a, AS_COUNT, NULL);
    for (size_t j = 0; j < sizeof det_sizes / sizeof det_sizes[0]; j++) {
        size_t n = det_sizes[j];
        double *in = xmalloc(n * 8), *ref = xmalloc(n * 8), *out = xmalloc(n * 8);
        fill_f64_mixed(in, n, 9000 + j);
        for (int excl = 0; excl < 2; excl++) {
            double init = excl ? 0.3 : 0;
            double rt = run_scan_f64(&a[AS_INLINE], excl, in, ref, n, init);
            for (int k = 1; k < AS_COUNT; k++) {
                int reps = a[k].pool && a[k].kind != AS_POOL1 ? 3 : 1;
                for (int rep = 0; rep < reps; rep++) {
                    memset(out, SENTINEL_BYTE, n * 8);
                    double t = run_scan_f64(&a[k], excl, in, out, n, init);
                    size_t d = first_diff_f64(out, ref, n);
                    cr_assert_eq(d, SIZE_MAX, "%s %s n=%zu run %d: out[%zu] = %a, inline gave %a", a[k].name,
                                 kind_name(excl), n, rep, d, out[d], ref[d]);
                    cr_assert(same_bits(t, rt), "%s %s n=%zu: total %a, inline %a", a[k].name, kind_name(excl), n, t,
                              rt);
                }
            }
        }
        free(in), free(ref), free(out);
    }
    as_fini_each(a, AS_COUNT);
    expect_no_leaks();
}

/* Neither the alignment of the arrays nor working in place changes a bit
 * (the kernels' order of operations depends only on the indices). */
Test(algo_scan, f64_bits_do_not_depend_on_alignment_or_in_place) {
    algo_sched a[2];
    as_init_each(a, 2, (const as_kind[]){ AS_INLINE, AS_POOL4 });
    static const size_t sizes[] = { 5, 17, 16385, 3 * 16384 + 5, ALGO_HUGE };
    for (size_t j = 0; j < sizeof sizes / sizeof sizes[0]; j++) {
        size_t n = sizes[j];
        double *in = xmalloc(n * 8), *ref = xmalloc(n * 8);
        double *ibuf = xmalloc((n + 1) * 8), *obuf = xmalloc((n + 1) * 8), *inplace = xmalloc(n * 8);
        fill_f64_mixed(in, n, 9500 + j);
        memcpy(ibuf + 1, in, n * 8);
        for (int excl = 0; excl < 2; excl++) {
            for (int s = 0; s < 2; s++) {
                double rt = run_scan_f64(&a[s], excl, in, ref, n, 1.5);
                /* input and output both 8 bytes off a 16-byte boundary */
                double t = run_scan_f64(&a[s], excl, ibuf + 1, obuf + 1, n, 1.5);
                size_t d = first_diff_f64(obuf + 1, ref, n);
                cr_assert_eq(d, SIZE_MAX, "%s %s n=%zu misaligned: out[%zu] %a vs %a", a[s].name, kind_name(excl), n,
                             d, obuf[1 + d], ref[d]);
                cr_assert(same_bits(t, rt));
                /* aligned input, misaligned output */
                t = run_scan_f64(&a[s], excl, in, obuf + 1, n, 1.5);
                cr_assert_eq(first_diff_f64(obuf + 1, ref, n), SIZE_MAX, "%s: misaligned output", a[s].name);
                cr_assert(same_bits(t, rt));
                /* in place */
                memcpy(inplace, in, n * 8);
                t = run_scan_f64(&a[s], excl, inplace, inplace, n, 1.5);
                d = first_diff_f64(inplace, ref, n);
                cr_assert_eq(d, SIZE_MAX, "%s %s n=%zu in place: out[%zu] %a vs %a", a[s].name, kind_name(excl), n, d,
                             inplace[d], ref[d]);
                cr_assert(same_bits(t, rt));
            }
        }
        free(in), free(ref), free(ibuf), free(obuf), free(inplace);
    }
    as_fini_each(a, 2);
    expect_no_leaks();
}

/* Typed scans of copies of seeded inputs in place, on each of nk
 * schedulers, both kinds, against the serial loop. */
typedef struct in_place_case {
    bool dbl;                    /* doubles (integer-valued), else int64 */
    const as_kind *kinds;
    size_t nk;
    const size_t *sizes;
    size_t ns;
    uint64_t seed;
    int64_t init;
} in_place_case;

static void check_in_place(algo_sched *a, const in_place_case *c, const void *orig, size_t n, bool excl) {
    void *buf = xmalloc(n * 8), *want = xmalloc(n * 8);
    memcpy(buf, orig, n * 8);
    if (c->dbl) {
        double *b = buf, *w = want, tw = ref_scan_f64(orig, w, n, excl, (double)c->init);
        double t = run_scan_f64(a, excl, b, b, n, (double)c->init);
        for (size_t i = 0; i < n; i++)
            cr_assert(b[i] == w[i], "%s %s n=%zu in place: out[%zu] = %g, want %g", a->name, kind_name(excl), n, i,
                      b[i], w[i]);
        cr_assert(t == tw);
    } else {
        int64_t *b = buf, *w = want, tw = ref_scan_i64(orig, w, n, excl, c->init);
        int64_t t = run_scan_i64(a, excl, b, b, n, c->init);
        size_t d = first_diff_i64(b, w, n);
        cr_assert_eq(d, SIZE_MAX, "%s %s n=%zu in place: out[%zu] = %lld, want %lld", a->name, kind_name(excl), n, d,
                     (long long)b[d], (long long)w[d]);
        cr_assert_eq(t, tw);
    }
    free(buf), free(want);
}

static void scans_in_place(const in_place_case *c) {
    algo_sched a[AS_COUNT];
    as_init_each(a, c->nk, c->kinds);
    for (size_t j = 0; j < c->ns; j++) {
        size_t n = c->sizes[j];
        void *orig = xmalloc(n * 8);
        if (c->dbl) fill_f64_int(orig, n, c->seed + j);
        else fill_i64(orig, n, c->seed + j);
        for (size_t s = 0; s < c->nk; s++)
            for (int excl = 0; excl < 2; excl++) check_in_place(&a[s], c, orig, n, excl);
        free(orig);
    }
    as_fini_each(a, c->nk);
    expect_no_leaks();
}

Test(algo_scan, i64_in_place) {
    static const as_kind kinds[] = { AS_INLINE, AS_POOL2, AS_POOL4 };
    static const size_t sizes[] = { 1, 9, 16384, 16385, 3 * 16384 + 5, ALGO_HUGE };
    in_place_case c = { false, kinds, 3, sizes, 6, 9700, 42 };
    scans_in_place(&c);
}

Test(algo_scan, f64_integers_in_place) {
    static const as_kind kinds[] = { AS_INLINE, AS_POOL4 };
    static const size_t sizes[] = { 1, 8, 16383, 3 * 16384 + 5 };
    in_place_case c = { true, kinds, 2, sizes, 4, 9800, 7 };
    scans_in_place(&c);
}

/* ====================================== outputs beyond the last-level cache */

/* Outputs at least as large as the last-level cache are written with
 * non-temporal stores (when 16-byte aligned): same results, same bits. */
Test(algo_scan, outputs_larger_than_the_last_level_cache) {
    long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (llc <= 0) llc = sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (llc <= 0) llc = 8L << 20;
    if (llc > (1L << 30)) llc = 1L << 30;  /* keep the test's memory bounded */
    size_t n = (size_t)llc / 8 + 2 * ALGO_TILE + 3;
    if (n < ALGO_HUGE) n = ALGO_HUGE;
    algo_sched a;
    as_init(&a, AS_POOL4);
    int64_t *in = xmalloc(n * 8), *out = xmalloc((n + 1) * 8), *want = xmalloc(n * 8);
    fill_i64(in, n, 17);
    for (int excl = 0; excl < 2; excl++) {
        int64_t tw = ref_scan_i64(in, want, n, excl, -1);
        int64_t t = run_scan_i64(&a, excl, in, out, n, -1);
        size_t d = first_diff_i64(out, want, n);
        cr_assert_eq(d, SIZE_MAX, "%s n=%zu: out[%zu]", kind_name(excl), n, d);
        cr_assert_eq(t, tw);
    }
    /* doubles: aligned (streamed) and misaligned (cached) outputs agree */
    double *din = (double *)(void *)in, *dout = (double *)(void *)out, *dref = (double *)(void *)want;
    fill_f64_mixed(din, n, 18);
    double t1 = run_scan_f64(&a, false, din, dref, n, 0);
    double t2 = run_scan_f64(&a, false, din, dout + 1, n, 0);
    size_t d = first_diff_f64(dout + 1, dref, n);
    cr_assert_eq(d, SIZE_MAX, "n=%zu: out[%zu] %a (misaligned) vs %a (aligned)", n, d, dout[d + 1], dref[d]);
    cr_assert(same_bits(t1, t2));
    /* in place */
    memcpy(dout, din, n * 8);
    t2 = run_scan_f64(&a, false, dout, dout, n, 0);
    cr_assert_eq(first_diff_f64(dout, dref, n), SIZE_MAX, "in place");
    cr_assert(same_bits(t1, t2));
    free(in), free(out), free(want);
    as_fini(&a);
    expect_no_leaks();
}

/* The scan kernel sums the next tile on the way (scan.c): that sum must be
 * the sum kernel's bits, and asking for it must change nothing in the
 * scan, streamed or not.  Next tiles of every length around the lag
 * (1024 elements), around 16 and of a whole tile; scans shorter and
 * longer than the lag. */
Test(algo_scan, scan_kernel_sums_the_next_tile_as_the_sum_kernel_does) {
    enum { CAP = 16384 + 40 };
    double *in = xmalloc(CAP * 8), *nx = xmalloc(CAP * 8), *o1 = xmalloc(CAP * 8), *o2 = xmalloc(CAP * 8);
    int64_t *iin = xmalloc(CAP * 8), *inx = xmalloc(CAP * 8), *io1 = xmalloc(CAP * 8), *io2 = xmalloc(CAP * 8);
    fill_f64_mixed(in, CAP, 11);
    fill_f64_mixed(nx, CAP, 12);
    fill_i64(iin, CAP, 13);
    fill_i64(inx, CAP, 14);
    static const size_t next_sizes[] = { 0, 1, 7, 8, 15, 16, 17, 33, 1023, 1024, 1025, 1039, 1040, 1041, 2047, 2049,
                                         4100, 16383, 16384, 16384 + 23 };
    static const size_t scan_sizes[] = { 0, 17, 1000, 1040, 1041, 16384, 16384 + 37 };
    for (size_t a = 0; a < sizeof scan_sizes / sizeof scan_sizes[0]; a++) {
        for (size_t b = 0; b < sizeof next_sizes / sizeof next_sizes[0]; b++) {
            size_t n = scan_sizes[a], nn = next_sizes[b];
            for (int mode = 0; mode < 4; mode++) {
                bool excl = mode & 1, stream = mode & 2;
                double sum = 0;
                double c1 = exi_scan_f64(in, o1, n, 0.5, excl, stream, nx, nn, NULL);
                double c2 = exi_scan_f64(in, o2, n, 0.5, excl, stream, nx, nn, &sum);
                exi_stream_fence();
                cr_assert(same_bits(c1, c2), "n=%zu next=%zu mode=%d: the total changed", n, nn, mode);
                cr_assert_eq(first_diff_bytes(o1, o2, n, 8), SIZE_MAX, "n=%zu next=%zu mode=%d: the output changed", n,
                             nn, mode);
                double want = exi_sum_f64(nx, nn, false);
                cr_assert(same_bits(sum, want), "n=%zu next=%zu mode=%d: next tile's sum %a, the sum kernel's %a", n,
                          nn, mode, sum, want);
                uint64_t usum = 0;
                uint64_t u1 = exi_scan_u64((uint64_t *)iin, (uint64_t *)io1, n, 5, excl, stream, (uint64_t *)inx, nn,
                                           NULL);
                uint64_t u2 = exi_scan_u64((uint64_t *)iin, (uint64_t *)io2, n, 5, excl, stream, (uint64_t *)inx, nn,
                                           &usum);
                exi_stream_fence();
                cr_assert_eq(u1, u2, "n=%zu next=%zu mode=%d: int total", n, nn, mode);
                cr_assert_eq(first_diff_bytes(io1, io2, n, 8), SIZE_MAX, "n=%zu next=%zu: int output", n, nn);
                cr_assert_eq(usum, exi_sum_u64((uint64_t *)inx, nn, false), "n=%zu next=%zu: int next sum", n, nn);
            }
        }
    }
    free(in), free(nx), free(o1), free(o2), free(iin), free(inx), free(io1), free(io2);
}
