/* SPDX-License-Identifier: MIT */
/* algo_scan, inclusive scans from an initial value: ex_inclusive_scan_init_f64,
 * _i64 and ex_inclusive_scan_init (cexec/algorithms.h) against the serial
 * loop started from init, at the tile boundaries, on every kind of
 * scheduler; their doubles bit-identical whatever the scheduler and
 * within the documented bound; empty inputs complete with init; bad
 * arguments name the builder (algo_scan suite, see scan_typed.c). */
#include <stdlib.h>
#include <string.h>

#include "algorithms/local_fixtures.h"

static const size_t init_sizes[] = { 0, 1, 7, 16383, 16384, 16385, 3 * 16384 + 5, ALGO_HUGE };
#define NSIZES (sizeof init_sizes / sizeof init_sizes[0])

/* The serial reference: out[i] = init + in[0] + ... + in[i]; returns the total. */
static double ref_scan_init_f64(const double *in, double *out, size_t n, double init) {
    double s = init;
    for (size_t i = 0; i < n; i++) out[i] = s += in[i];
    return s;
}

static int64_t ref_scan_init_i64(const int64_t *in, int64_t *out, size_t n, int64_t init) {
    uint64_t s = (uint64_t)init;
    for (size_t i = 0; i < n; i++) out[i] = (int64_t)(s += (uint64_t)in[i]);
    return (int64_t)s;
}

static void f64_integers_from_init(algo_sched *a) {
    for (size_t j = 0; j < NSIZES; j++) {
        size_t n = init_sizes[j];
        double *in = xmalloc(n * 8 + 8), *out = xmalloc(n * 8 + 8), *want = xmalloc(n * 8 + 8);
        fill_f64_int(in, n, 100 + j);
        double init = j % 2 ? -1234.0 : 1e9;
        double tw = ref_scan_init_f64(in, want, n, init);
        memset(out, SENTINEL_BYTE, n * 8);
        double t = run_one_value(a, ex_inclusive_scan_init_f64(a->sch, in, out, n, init), EX_T_DOUBLE, "init_f64").as.d;
        for (size_t i = 0; i < n; i++)
            cr_assert(out[i] == want[i], "%s n=%zu: out[%zu] = %.17g, serial %.17g", a->name, n, i, out[i], want[i]);
        cr_assert(t == tw, "%s n=%zu: total %.17g, serial %.17g", a->name, n, t, tw);
        if (n) cr_assert(same_bits(t, out[n - 1]), "%s: the total equals out[n-1]", a->name);
        free(in), free(out), free(want);
    }
}

static void i64_from_init(algo_sched *a) {
    static const int64_t inits[] = { 0, -1, INT64_MAX, INT64_MIN, 0x0123456789abcdefll };
    for (size_t j = 0; j < NSIZES; j++) {
        size_t n = init_sizes[j];
        int64_t *in = xmalloc(n * 8 + 8), *out = xmalloc(n * 8 + 8), *want = xmalloc(n * 8 + 8);
        fill_i64(in, n, 200 + j);
        int64_t init = inits[j % (sizeof inits / sizeof inits[0])];
        int64_t tw = ref_scan_init_i64(in, want, n, init);
        memset(out, SENTINEL_BYTE, n * 8);
        int64_t t = run_one_value(a, ex_inclusive_scan_init_i64(a->sch, in, out, n, init), EX_T_INT, "init_i64").as.i;
        size_t d = first_diff_i64(out, want, n);
        cr_assert_eq(d, SIZE_MAX, "%s n=%zu: out[%zu] = %lld, serial %lld", a->name, n, d, (long long)out[d],
                     (long long)want[d]);
        cr_assert_eq(t, tw, "%s n=%zu: total", a->name, n);
        free(in), free(out), free(want);
    }
}

/* m22 products from init: out[i] = init * in[0] * ... * in[i], the
 * exclusive serial fold shifted by one (its total is the last element). */
static void generic_from_init(algo_sched *a) {
    gcase g = gcase_m22();
    size_t gt = ALGO_GTILE(sizeof(m22));
    const size_t sizes[] = { 0, 1, 9, gt - 1, gt, gt + 1, 3 * gt + 5 };
    for (size_t j = 0; j < sizeof sizes / sizeof sizes[0]; j++) {
        size_t n = sizes[j];
        m22 *in = xmalloc((n + 1) * sizeof(m22)), *out = xmalloc((n + 1) * sizeof(m22));
        m22 *want = xmalloc((n + 1) * sizeof(m22));
        m22 init;
        fill_m22(in, n, 300 + j);
        fill_m22(&init, 1, 400 + j);
        ref_fold(&g.m, in, want, n, true, &init, &want[n]);
        memset(out, SENTINEL_BYTE, n * sizeof(m22));
        ex_sender *s = ex_inclusive_scan_init(a->sch, &g.m, in, out, n, &init);
        cr_assert_eq(ex_sender_status(s).code, 0, "%s", a->name);
        arec r;
        as_run_plain(a, s, &r);
        ex_sender_release(s);
        algo_expect_value(&r, 0, a->name);
        size_t d = first_diff_bytes(out, want + 1, n, sizeof(m22));
        cr_assert_eq(d, SIZE_MAX, "%s n=%zu: element %zu differs from init times the serial product", a->name, n, d);
        free(in), free(out), free(want);
    }
}

TEST_EVERY_SCHEDULER(algo_scan, init_f64_integers, f64_integers_from_init)
TEST_EVERY_SCHEDULER(algo_scan, init_i64, i64_from_init)
TEST_EVERY_SCHEDULER(algo_scan, init_generic, generic_from_init)

/* Random doubles: every scheduler gives the inline bits, and they are
 * within the documented bound (checked as the exclusive scan they equal
 * shifted by one: e[0] = init, e[i] = out[i-1]). */
Test(algo_scan, init_f64_bits_identical_and_within_the_bound) {
    static algo_sched a[AS_COUNT];
    as_init_each(a, AS_COUNT, NULL);
    const size_t sizes[] = { 9, 16385, 37 * 16384 + 11 };
    for (size_t j = 0; j < sizeof sizes / sizeof sizes[0]; j++) {
        size_t n = sizes[j];
        double *in = xmalloc(n * 8), *ref = xmalloc(n * 8), *out = xmalloc(n * 8), *e = xmalloc(n * 8);
        fill_f64_mixed(in, n, 500 + j);
        double init = 1234.5678;
        double rt = run_one_value(&a[AS_INLINE], ex_inclusive_scan_init_f64(a[AS_INLINE].sch, in, ref, n, init),
                                  EX_T_DOUBLE, "inline").as.d;
        e[0] = init;
        memcpy(e + 1, ref, (n - 1) * 8);
        double ratio;
        size_t bad = check_f64_scan_bound(in, e, n, true, init, rt, &ratio);
        cr_assert_eq(bad, SIZE_MAX, "n=%zu: element %zu outside the bound (error/bound %.3g)", n, bad, ratio);
        for (int k = 1; k < AS_COUNT; k++) {
            memset(out, SENTINEL_BYTE, n * 8);
            double t = run_one_value(&a[k], ex_inclusive_scan_init_f64(a[k].sch, in, out, n, init), EX_T_DOUBLE,
                                     a[k].name).as.d;
            size_t d = first_diff_f64(out, ref, n);
            cr_assert_eq(d, SIZE_MAX, "%s n=%zu: out[%zu] = %a, inline gave %a", a[k].name, n, d, out[d], ref[d]);
            cr_assert(same_bits(t, rt), "%s n=%zu: total %a, inline %a", a[k].name, n, t, rt);
        }
        free(in), free(ref), free(out), free(e);
    }
    as_fini_each(a, AS_COUNT);
    expect_no_leaks();
}

/* Starting from -0.0 gives the bits of the plain inclusive scan (whose
 * carry it is), and an empty scan completes with init itself. */
Test(algo_scan, init_minus_zero_is_the_plain_inclusive_scan_and_empty_gives_init) {
    algo_sched a;
    as_init(&a, AS_POOL2);
    size_t n = 5 * 16384 + 3;
    double *in = xmalloc(n * 8), *x = xmalloc(n * 8), *y = xmalloc(n * 8);
    fill_f64_mixed(in, n, 77);
    double tx = run_one_value(&a, ex_inclusive_scan_f64(a.sch, in, x, n), EX_T_DOUBLE, "plain").as.d;
    double ty = run_one_value(&a, ex_inclusive_scan_init_f64(a.sch, in, y, n, -0.0), EX_T_DOUBLE, "-0.0").as.d;
    cr_assert_eq(first_diff_f64(x, y, n), SIZE_MAX, "init -0.0 changed a bit");
    cr_assert(same_bits(tx, ty));
    double e = run_one_value(&a, ex_inclusive_scan_init_f64(a.sch, NULL, NULL, 0, 2.5), EX_T_DOUBLE, "empty").as.d;
    cr_assert(same_bits(e, 2.5), "empty f64: %g", e);
    int64_t ei = run_one_value(&a, ex_inclusive_scan_init_i64(a.sch, NULL, NULL, 0, -9), EX_T_INT, "empty").as.i;
    cr_assert_eq(ei, -9);
    free(in), free(x), free(y);
    as_fini(&a);
    expect_no_leaks();
}

Test(algo_scan, init_bad_arguments_give_einval_naming_the_builder) {
    static double d[8];
    static int64_t i[8];
    ex_scheduler bad = { NULL, NULL };
    ex_scheduler sch = ex_inline_scheduler();
    algo_expect_einval(ex_inclusive_scan_init_f64(bad, d, d, 4, 0), "ex_inclusive_scan_init_f64", "bad scheduler");
    algo_expect_einval(ex_inclusive_scan_init_f64(sch, NULL, d, 4, 0), "ex_inclusive_scan_init_f64", "NULL in");
    algo_expect_einval(ex_inclusive_scan_init_f64(sch, d, d + 1, 4, 0), "ex_inclusive_scan_init_f64", "overlap");
    algo_expect_einval(ex_inclusive_scan_init_i64(sch, i, NULL, 4, 0), "ex_inclusive_scan_init_i64", "NULL out");
    uint64_t zero = 0;
    ex_monoid m = { 8, &zero, sum_combine, NULL };
    algo_expect_einval(ex_inclusive_scan_init(sch, &m, i, i, 4, NULL), "ex_inclusive_scan_init", "NULL init");
    algo_expect_einval(ex_inclusive_scan_init(sch, NULL, i, i, 4, &zero), "ex_inclusive_scan_init", "NULL monoid");
    expect_no_leaks();
}
