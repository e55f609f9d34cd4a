/* algo_scan: ex_inclusive_scan_f64/_i64, ex_exclusive_scan_f64/_i64 and the
 * generic ex_inclusive_scan / ex_exclusive_scan (cexec/algorithms.h).
 *
 * Every size around the tile boundaries (16384 elements for the typed
 * forms, 128 KiB / element size for the generic ones) and a large one, on
 * every kind of scheduler: inline, a run_loop driven by the test thread, a
 * single_thread_context and pools of 1, 2 and 4 workers.  int64 results are
 * exact (wrapping); double results are exact on integers, within the
 * documented bound on random data, and bit-identical whatever the
 * scheduler.  Nothing here asserts on timing; every wait is bounded. */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/algo_helpers.h"

TEST_SUITE(algo_scan, 120);

#define T ALGO_TILE
#define SENTINEL_BYTE 0xa5

static const int64_t i64_inits[] = { 0, -1, INT64_MAX, INT64_MIN, 0x0123456789abcdefll, -77 };

/* ============================================================ typed scans */

static ex_sender *scan_i64(ex_scheduler sch, bool excl, const int64_t *in, int64_t *out, size_t n, int64_t init) {
    return excl ? ex_exclusive_scan_i64(sch, in, out, n, init) : ex_inclusive_scan_i64(sch, in, out, n);
}

static ex_sender *scan_f64(ex_scheduler sch, bool excl, const double *in, double *out, size_t n, double init) {
    return excl ? ex_exclusive_scan_f64(sch, in, out, n, init) : ex_inclusive_scan_f64(sch, in, out, n);
}

static const char *kind_name(bool excl) { return excl ? "exclusive" : "inclusive"; }

/* Runs an int64 scan on a; returns its completion value. */
static int64_t run_scan_i64(algo_sched *a, bool excl, const int64_t *in, int64_t *out, size_t n, int64_t init) {
    ex_sender *s = scan_i64(a->sch, excl, in, out, n, init);
    cr_assert_eq(ex_sender_status(s).code, 0, "%s %s n=%zu: %s", a->name, kind_name(excl), n,
                 ex_sender_status(s).msg ? ex_sender_status(s).msg : "");
    arec r;
    as_run_plain(a, s, &r);
    ex_sender_release(s);
    algo_expect_value(&r, 1, a->name);
    cr_assert_eq(r.v[0].type, EX_T_INT, "%s: the total is an EX_T_INT", a->name);
    return r.v[0].as.i;
}

static double run_scan_f64(algo_sched *a, bool excl, const double *in, double *out, size_t n, double init) {
    ex_sender *s = scan_f64(a->sch, excl, in, out, n, init);
    cr_assert_eq(ex_sender_status(s).code, 0, "%s %s n=%zu: %s", a->name, kind_name(excl), n,
                 ex_sender_status(s).msg ? ex_sender_status(s).msg : "");
    arec r;
    as_run_plain(a, s, &r);
    ex_sender_release(s);
    algo_expect_value(&r, 1, a->name);
    cr_assert_eq(r.v[0].type, EX_T_DOUBLE, "%s: the total is an EX_T_DOUBLE", a->name);
    return r.v[0].as.d;
}

static bool same_bits(double x, double y) { return memcmp(&x, &y, sizeof x) == 0; }

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
    memset(out, SENTINEL_BYTE, n * 8);
    double total_want = ref_scan_f64(in, want, n, excl, init);
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

static void i64_every_size(as_kind k) {
    algo_sched a;
    as_init(&a, k);
    for (size_t j = 0; j < algo_nsizes; j++) {
        size_t n = algo_sizes[j];
        check_i64(&a, n, false, 0, 1000 + j);
        check_i64(&a, n, true, i64_inits[j % (sizeof i64_inits / sizeof i64_inits[0])], 2000 + j);
    }
    check_i64(&a, ALGO_HUGE, false, 0, 3000);
    check_i64(&a, ALGO_HUGE, true, INT64_MAX - 5, 3001);
    as_fini(&a);
    expect_no_leaks();
}

static void f64_every_size(as_kind k) {
    algo_sched a;
    as_init(&a, k);
    for (size_t j = 0; j < algo_nsizes; j++) {
        size_t n = algo_sizes[j];
        check_f64_int(&a, n, false, 0, 4000 + j);
        check_f64_int(&a, n, true, -37.0, 5000 + j);
        check_f64_mixed(&a, n, false, 0, 6000 + j);
        check_f64_mixed(&a, n, true, 12345.678, 7000 + j);
    }
    check_f64_int(&a, ALGO_HUGE, false, 0, 8000);
    check_f64_int(&a, ALGO_HUGE, true, 1e6, 8001);
    check_f64_mixed(&a, ALGO_HUGE, false, 0, 8002);
    check_f64_mixed(&a, ALGO_HUGE, true, -0.125, 8003);
    as_fini(&a);
    expect_no_leaks();
}

Test(algo_scan, i64_every_size_inline) { i64_every_size(AS_INLINE); }
Test(algo_scan, i64_every_size_run_loop) { i64_every_size(AS_RUN_LOOP); }
Test(algo_scan, i64_every_size_single_thread_context) { i64_every_size(AS_STC); }
Test(algo_scan, i64_every_size_pool1) { i64_every_size(AS_POOL1); }
Test(algo_scan, i64_every_size_pool2) { i64_every_size(AS_POOL2); }
Test(algo_scan, i64_every_size_pool4) { i64_every_size(AS_POOL4); }
Test(algo_scan, f64_every_size_inline) { f64_every_size(AS_INLINE); }
Test(algo_scan, f64_every_size_run_loop) { f64_every_size(AS_RUN_LOOP); }
Test(algo_scan, f64_every_size_single_thread_context) { f64_every_size(AS_STC); }
Test(algo_scan, f64_every_size_pool1) { f64_every_size(AS_POOL1); }
Test(algo_scan, f64_every_size_pool2) { f64_every_size(AS_POOL2); }
Test(algo_scan, f64_every_size_pool4) { f64_every_size(AS_POOL4); }

Test(algo_scan, i64_overflow_wraps_twos_complement) {
    algo_sched a[2];
    as_init(&a[0], AS_INLINE);
    as_init(&a[1], AS_POOL4);
    for (int s = 0; s < 2; s++) {
        /* INT64_MAX + 1 == INT64_MIN */
        int64_t in2[2] = { INT64_MAX, 1 }, out2[2];
        int64_t t = run_scan_i64(&a[s], false, in2, out2, 2, 0);
        cr_assert_eq(out2[0], INT64_MAX);
        cr_assert_eq(out2[1], INT64_MIN, "%s: INT64_MAX + 1 gave %lld", a[s].name, (long long)out2[1]);
        cr_assert_eq(t, INT64_MIN);
        t = run_scan_i64(&a[s], true, in2, out2, 2, INT64_MAX);
        cr_assert_eq(out2[0], INT64_MAX);
        cr_assert_eq(out2[1], -2, "%s: INT64_MAX + INT64_MAX wraps to -2", a[s].name);
        cr_assert_eq(t, -1);

        /* Many tiles of INT64_MAX / 3 and INT64_MIN: wraps inside tiles and in the chain. */
        size_t n = 5 * T + 77;
        int64_t *in = xmalloc(n * 8), *out = xmalloc(n * 8), *want = xmalloc(n * 8);
        for (size_t i = 0; i < n; i++) in[i] = i % 3 == 2 ? INT64_MIN : INT64_MAX / 3 + (int64_t)i;
        for (int excl = 0; excl < 2; excl++) {
            int64_t tw = ref_scan_i64(in, want, n, excl, INT64_MAX);
            t = run_scan_i64(&a[s], excl, in, out, n, INT64_MAX);
            size_t d = first_diff_i64(out, want, n);
            cr_assert_eq(d, SIZE_MAX, "%s %s: out[%zu] = %lld, want %lld", a[s].name, kind_name(excl), d,
                         (long long)out[d], (long long)want[d]);
            cr_assert_eq(t, tw);
        }
        free(in), free(out), free(want);
    }
    as_fini(&a[0]);
    as_fini(&a[1]);
    expect_no_leaks();
}

Test(algo_scan, empty_input_with_null_arrays_completes_with_the_documented_total) {
    for (int k = 0; k < AS_COUNT; k++) {
        algo_sched a;
        as_init(&a, (as_kind)k);
        double d = run_scan_f64(&a, false, NULL, NULL, 0, 0);
        cr_assert(same_bits(d, 0.0), "%s: inclusive f64 of nothing is 0.0, got %g", a.name, d);
        d = run_scan_f64(&a, true, NULL, NULL, 0, -2.5);
        cr_assert(same_bits(d, -2.5), "%s: exclusive f64 of nothing is init, got %g", a.name, d);
        cr_assert_eq(run_scan_i64(&a, false, NULL, NULL, 0, 0), 0, "%s", a.name);
        cr_assert_eq(run_scan_i64(&a, true, NULL, NULL, 0, INT64_MIN), INT64_MIN, "%s", a.name);
        ex_monoid m = { sizeof(m22), &m22_identity, m22_combine, NULL };
        m22 init = { 9, 9, 9, 9 };
        for (int excl = 0; excl < 2; excl++) {
            ex_sender *s = excl ? ex_exclusive_scan(a.sch, &m, NULL, NULL, 0, &init) : ex_inclusive_scan(a.sch, &m, NULL, NULL, 0);
            cr_assert_eq(ex_sender_status(s).code, 0, "%s: NULL arrays with n == 0 are fine", a.name);
            arec r;
            as_run_plain(&a, s, &r);
            algo_expect_value(&r, 0, a.name);
            ex_sender_release(s);
        }
        as_fini(&a);
    }
    expect_no_leaks();
}

/* ============================================================ determinism */

static const size_t det_sizes[] = { 9, 16385, 3 * 16384 + 5, 37 * 16384 + 11, ALGO_HUGE };

Test(algo_scan, f64_results_are_bit_identical_on_every_scheduler) {
    static algo_sched a[AS_COUNT];
    for (int k = 0; k < AS_COUNT; k++) as_init(&a[k], (as_kind)k);
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
    for (int k = 0; k < AS_COUNT; k++) as_fini(&a[k]);
    expect_no_leaks();
}

/* Neither the alignment of the arrays nor working in place changes a bit
 * (the kernels' order of operations depends only on the indices). */
Test(algo_scan, f64_bits_do_not_depend_on_alignment_or_in_place) {
    algo_sched a[2];
    as_init(&a[0], AS_INLINE);
    as_init(&a[1], AS_POOL4);
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
    as_fini(&a[0]);
    as_fini(&a[1]);
    expect_no_leaks();
}

Test(algo_scan, i64_in_place) {
    algo_sched a[3];
    as_init(&a[0], AS_INLINE);
    as_init(&a[1], AS_POOL2);
    as_init(&a[2], AS_POOL4);
    static const size_t sizes[] = { 1, 9, 16384, 16385, 3 * 16384 + 5, ALGO_HUGE };
    for (size_t j = 0; j < sizeof sizes / sizeof sizes[0]; j++) {
        size_t n = sizes[j];
        int64_t *buf = xmalloc(n * 8), *want = xmalloc(n * 8), *orig = xmalloc(n * 8);
        fill_i64(orig, n, 9700 + j);
        for (int s = 0; s < 3; s++) {
            for (int excl = 0; excl < 2; excl++) {
                memcpy(buf, orig, n * 8);
                int64_t tw = ref_scan_i64(orig, want, n, excl, 42);
                int64_t t = run_scan_i64(&a[s], excl, buf, buf, n, 42);
                size_t d = first_diff_i64(buf, want, n);
                cr_assert_eq(d, SIZE_MAX, "%s %s n=%zu in place: out[%zu] = %lld, want %lld", a[s].name,
                             kind_name(excl), n, d, (long long)buf[d], (long long)want[d]);
                cr_assert_eq(t, tw);
            }
        }
        free(buf), free(want), free(orig);
    }
    for (int s = 0; s < 3; s++) as_fini(&a[s]);
    expect_no_leaks();
}

Test(algo_scan, f64_integers_in_place) {
    algo_sched a[2];
    as_init(&a[0], AS_INLINE);
    as_init(&a[1], AS_POOL4);
    static const size_t sizes[] = { 1, 8, 16383, 3 * 16384 + 5 };
    for (size_t j = 0; j < sizeof sizes / sizeof sizes[0]; j++) {
        size_t n = sizes[j];
        double *buf = xmalloc(n * 8), *want = xmalloc(n * 8), *orig = xmalloc(n * 8);
        fill_f64_int(orig, n, 9800 + j);
        for (int s = 0; s < 2; s++) {
            for (int excl = 0; excl < 2; excl++) {
                memcpy(buf, orig, n * 8);
                double tw = ref_scan_f64(orig, want, n, excl, 7);
                double t = run_scan_f64(&a[s], excl, buf, buf, n, 7);
                for (size_t i = 0; i < n; i++)
                    cr_assert(buf[i] == want[i], "%s %s n=%zu in place: out[%zu] = %g, want %g", a[s].name,
                              kind_name(excl), n, i, buf[i], want[i]);
                cr_assert(t == tw);
            }
        }
        free(buf), free(want), free(orig);
    }
    as_fini(&a[0]);
    as_fini(&a[1]);
    expect_no_leaks();
}

/* ========================================================= generic scans */

typedef struct gcase {
    ex_monoid m;
    void (*fill)(void *a, size_t n, uint64_t seed);
    const char *name;
} gcase;

static void fill_m22_v(void *a, size_t n, uint64_t seed) { fill_m22(a, n, seed); }
static void fill_aff200_v(void *a, size_t n, uint64_t seed) { fill_aff200(a, n, seed); }
static void fill_aff8_v(void *a, size_t n, uint64_t seed) { fill_aff8(a, n, seed); }
static void fill_big4k_v(void *a, size_t n, uint64_t seed) { fill_big4k(a, n, seed); }

static gcase gcase_m22(void) {
    gcase g = { { sizeof(m22), &m22_identity, m22_combine, NULL }, fill_m22_v, "2x2 matrix product" };
    return g;
}
static gcase gcase_aff200(void) {
    gcase g = { { sizeof(aff200), &aff200_identity, aff200_combine, NULL }, fill_aff200_v, "200-byte affine maps" };
    return g;
}
static gcase gcase_aff8(void) {
    gcase g = { { 1, &aff8_identity, aff8_combine, NULL }, fill_aff8_v, "1-byte affine maps" };
    return g;
}
static gcase gcase_big4k(void) {
    gcase g = { { sizeof(big4k), &big4k_identity, big4k_combine, NULL }, fill_big4k_v, "4096-byte elements" };
    return g;
}

static ex_sender *gscan(ex_scheduler sch, const ex_monoid *m, bool excl, const void *in, void *out, size_t n,
                        const void *init) {
    return excl ? ex_exclusive_scan(sch, m, in, out, n, init) : ex_inclusive_scan(sch, m, in, out, n);
}

static void run_gscan(algo_sched *a, const ex_monoid *m, bool excl, const void *in, void *out, size_t n,
                      const void *init) {
    ex_sender *s = gscan(a->sch, m, excl, in, out, n, init);
    cr_assert_eq(ex_sender_status(s).code, 0, "%s: %s", a->name, ex_sender_status(s).msg ? ex_sender_status(s).msg : "");
    arec r;
    as_run_plain(a, s, &r);
    ex_sender_release(s);
    algo_expect_value(&r, 0, a->name);
}

static size_t first_diff_bytes(const void *x, const void *y, size_t n, size_t sz) {
    for (size_t i = 0; i < n; i++)
        if (memcmp((const char *)x + i * sz, (const char *)y + i * sz, sz)) return i;
    return SIZE_MAX;
}

/* A generic scan of n random elements against the serial fold; in place
 * when asked. */
static void check_generic(algo_sched *a, const gcase *g, size_t n, bool excl, bool in_place, uint64_t seed) {
    size_t sz = g->m.size;
    unsigned char *in = xmalloc(n * sz), *out = xmalloc(n * sz), *want = xmalloc(n * sz);
    unsigned char init[EX_MONOID_MAX_SIZE];
    g->fill(in, n, seed);
    g->fill(init, 1, seed ^ 0xfeed);
    memset(out, SENTINEL_BYTE, n * sz);
    ref_fold(&g->m, in, want, n, excl, init, NULL);
    if (in_place) memcpy(out, in, n * sz);
    run_gscan(a, &g->m, excl, in_place ? out : in, out, n, init);
    size_t d = first_diff_bytes(out, want, n, sz);
    cr_assert_eq(d, SIZE_MAX, "%s %s %s n=%zu%s: element %zu differs from the serial fold", a->name, kind_name(excl),
                 g->name, n, in_place ? " in place" : "", d);
    free(in), free(out), free(want);
}

static void generic_every_size(as_kind k) {
    algo_sched a;
    as_init(&a, k);
    gcase g = gcase_m22();
    size_t gt = ALGO_GTILE(sizeof(m22));
    const size_t sizes[] = { 0, 1, 7, 8, 9, 15, 16, 17, gt - 1, gt, gt + 1, 3 * gt + 5, 20 * gt + 3 };
    for (size_t j = 0; j < sizeof sizes / sizeof sizes[0]; j++) {
        check_generic(&a, &g, sizes[j], false, false, 100 + j);
        check_generic(&a, &g, sizes[j], true, false, 200 + j);
    }
    g = gcase_aff200();
    gt = ALGO_GTILE(sizeof(aff200));
    const size_t s200[] = { 1, 2, gt - 1, gt, gt + 1, 3 * gt + 5 };
    for (size_t j = 0; j < sizeof s200 / sizeof s200[0]; j++) {
        check_generic(&a, &g, s200[j], false, false, 300 + j);
        check_generic(&a, &g, s200[j], true, false, 400 + j);
    }
    g = gcase_aff8();
    gt = ALGO_GTILE(1);
    const size_t s1[] = { 1, 17, gt - 1, gt, gt + 1, 3 * gt + 5 };
    for (size_t j = 0; j < sizeof s1 / sizeof s1[0]; j++) {
        check_generic(&a, &g, s1[j], false, false, 500 + j);
        check_generic(&a, &g, s1[j], true, false, 600 + j);
    }
    g = gcase_big4k();
    gt = ALGO_GTILE(sizeof(big4k));
    const size_t s4k[] = { 1, gt - 1, gt, gt + 1, 3 * gt + 5 };
    for (size_t j = 0; j < sizeof s4k / sizeof s4k[0]; j++) {
        check_generic(&a, &g, s4k[j], false, false, 700 + j);
        check_generic(&a, &g, s4k[j], true, false, 800 + j);
    }
    as_fini(&a);
    expect_no_leaks();
}

Test(algo_scan, generic_every_size_inline) { generic_every_size(AS_INLINE); }
Test(algo_scan, generic_every_size_run_loop) { generic_every_size(AS_RUN_LOOP); }
Test(algo_scan, generic_every_size_single_thread_context) { generic_every_size(AS_STC); }
Test(algo_scan, generic_every_size_pool1) { generic_every_size(AS_POOL1); }
Test(algo_scan, generic_every_size_pool2) { generic_every_size(AS_POOL2); }
Test(algo_scan, generic_every_size_pool4) { generic_every_size(AS_POOL4); }

Test(algo_scan, generic_in_place) {
    algo_sched a[3];
    as_init(&a[0], AS_INLINE);
    as_init(&a[1], AS_POOL2);
    as_init(&a[2], AS_POOL4);
    gcase gs[3] = { gcase_m22(), gcase_aff200(), gcase_aff8() };
    for (int s = 0; s < 3; s++) {
        for (int gi = 0; gi < 3; gi++) {
            size_t gt = ALGO_GTILE(gs[gi].m.size);
            const size_t sizes[] = { 1, 13, gt + 1, 4 * gt + 9 };
            for (size_t j = 0; j < 4; j++) {
                check_generic(&a[s], &gs[gi], sizes[j], false, true, 900 + j);
                check_generic(&a[s], &gs[gi], sizes[j], true, true, 950 + j);
            }
        }
    }
    for (int s = 0; s < 3; s++) as_fini(&a[s]);
    expect_no_leaks();
}

/* The builders copy the monoid and the identity and init bytes. */
Test(algo_scan, generic_builders_copy_the_monoid_identity_and_init) {
    algo_sched a;
    as_init(&a, AS_POOL2);
    size_t n = 3 * ALGO_GTILE(sizeof(m22)) + 7;
    m22 *in = xmalloc(n * sizeof(m22)), *out = xmalloc(n * sizeof(m22)), *want = xmalloc(n * sizeof(m22));
    fill_m22(in, n, 31);
    m22 id = m22_identity, init = { 2, 1, 1, 1 };
    ex_monoid m = { sizeof(m22), &id, m22_combine, NULL };
    ex_monoid mref = { sizeof(m22), &m22_identity, m22_combine, NULL };
    for (int excl = 0; excl < 2; excl++) {
        ex_monoid mm = m;
        m22 ii = init;
        ex_sender *s = gscan(a.sch, &mm, excl, in, out, n, &ii);
        cr_assert_eq(ex_sender_status(s).code, 0);
        memset(&mm, 0, sizeof mm);      /* the struct ... */
        memset(&id, 0x77, sizeof id);   /* ... the identity ... */
        memset(&ii, 0x55, sizeof ii);   /* ... and init may go away */
        arec r;
        as_run_plain(&a, s, &r);
        algo_expect_value(&r, 0, "copied monoid");
        ex_sender_release(s);
        ref_fold(&mref, in, want, n, excl, &init, NULL);
        cr_assert_eq(first_diff_bytes(out, want, n, sizeof(m22)), SIZE_MAX, "%s: the builder kept a pointer",
                     kind_name(excl));
        id = m22_identity;
    }
    free(in), free(out), free(want);
    as_fini(&a);
    expect_no_leaks();
}

/* combine gets the monoid's ctx. */
typedef struct sum_ctx {
    uint32_t magic;
    atomic_long calls;
    atomic_int bad_ctx;
} sum_ctx;

static void sum_combine(void *ctx, void *acc, const void *x) {
    sum_ctx *c = ctx;
    if (!c || c->magic != 0x5ca1ab1e) {
        if (c) atomic_store(&c->bad_ctx, 1);
        return;
    }
    atomic_fetch_add_explicit(&c->calls, 1, memory_order_relaxed);
    *(uint64_t *)acc += *(const uint64_t *)x;
}

Test(algo_scan, generic_combine_gets_the_ctx) {
    algo_sched a;
    as_init(&a, AS_POOL4);
    sum_ctx c = { 0x5ca1ab1e, 0, 0 };
    uint64_t zero = 0;
    ex_monoid m = { 8, &zero, sum_combine, &c };
    size_t n = 5 * T + 3;
    int64_t *in = xmalloc(n * 8), *out = xmalloc(n * 8), *want = xmalloc(n * 8);
    fill_i64(in, n, 77);
    ref_scan_i64(in, want, n, false, 0);
    run_gscan(&a, &m, false, in, out, n, NULL);
    cr_assert_eq(atomic_load(&c.bad_ctx), 0, "combine got another ctx");
    cr_assert_geq(atomic_load(&c.calls), (long)n, "combine ran %ld times for %zu elements", atomic_load(&c.calls), n);
    cr_assert_eq(first_diff_i64(out, want, n), SIZE_MAX);
    free(in), free(out), free(want);
    as_fini(&a);
    expect_no_leaks();
}

/* ============================================================ allocations */

/* The typed forms allocate nothing per run once the sender is built:
 * connect into caller storage, start, destroy. */
static void typed_runs_allocate_nothing(as_kind k) {
    algo_sched a;
    as_init(&a, k);
    static const size_t sizes[] = { 0, 9, 16385, 3 * 16384 + 5 };
    for (size_t j = 0; j < sizeof sizes / sizeof sizes[0]; j++) {
        size_t n = sizes[j];
        int64_t *in = xmalloc(n * 8), *out = xmalloc(n * 8), *want = xmalloc(n * 8);
        double *din = xmalloc(n * 8), *dout = xmalloc(n * 8);
        fill_i64(in, n, 1234 + j);
        fill_f64_int(din, n, 4321 + j);
        ex_sender *s[4] = { ex_inclusive_scan_i64(a.sch, in, out, n), ex_exclusive_scan_i64(a.sch, in, out, n, 5),
                            ex_inclusive_scan_f64(a.sch, din, dout, n), ex_exclusive_scan_f64(a.sch, din, dout, n, 5) };
        for (int b = 0; b < 4; b++) {
            cr_assert_eq(ex_sender_status(s[b]).code, 0);
            size_t size = ex_sender_op_size(s[b]), align = ex_sender_op_align(s[b]);
            void *storage = NULL;
            cr_assert_eq(posix_memalign(&storage, align < sizeof(void *) ? sizeof(void *) : align, size), 0);
            for (int run = 0; run < 3; run++) {
                arec r;
                arec_init(&r, a.pool);
                long before = test_alloc_count();
                ex_operation *op = NULL;
                ex_error e = ex_connect(s[b], arec_receiver(&r), storage, size, &op);
                cr_assert_eq(e.code, 0, "connect: %s", e.msg ? e.msg : "");
                ex_start(op);
                cr_assert(algo_wait(&r, NULL, 30.0), "%s: did not complete", a.name);
                ex_operation_destroy(op);
                long made = test_alloc_count() - before;
                cr_assert_eq(made, 0, "%s builder %d n=%zu run %d: %ld allocation(s) per run", a.name, b, n, run, made);
                algo_expect_value(&r, 1, a.name);
                if (b < 2) {
                    ref_scan_i64(in, want, n, b == 1, 5);
                    cr_assert_eq(first_diff_i64(out, want, n), SIZE_MAX);
                }
            }
            free(storage);
            ex_sender_release(s[b]);
        }
        free(in), free(out), free(want), free(din), free(dout);
    }
    as_fini(&a);
    expect_no_leaks();
}

Test(algo_scan, typed_runs_allocate_nothing_inline) { typed_runs_allocate_nothing(AS_INLINE); }
Test(algo_scan, typed_runs_allocate_nothing_pool2) { typed_runs_allocate_nothing(AS_POOL2); }
Test(algo_scan, typed_runs_allocate_nothing_pool4) { typed_runs_allocate_nothing(AS_POOL4); }

/* A counting allocator the receiver's environment names. */
typedef struct env_alloc {
    ex_allocator a;
    atomic_long allocs, frees, fail_next;
} env_alloc;

static void *ea_allocate(void *ctx, size_t size, size_t align) {
    env_alloc *e = ctx;
    atomic_fetch_add(&e->allocs, 1);
    if (atomic_exchange(&e->fail_next, 0)) return NULL;
    void *p = NULL;
    if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size ? size : 1)) return NULL;
    return p;
}

static void ea_deallocate(void *ctx, void *p, size_t size, size_t align) {
    (void)size, (void)align;
    env_alloc *e = ctx;
    atomic_fetch_add(&e->frees, 1);
    free(p);
}

/* The generic forms allocate their scratch at connect, from the
 * environment's allocator, and free it with the operation; a failed
 * allocation fails connect with EX_ENOMEM and leaves nothing behind. */
Test(algo_scan, generic_scratch_comes_from_the_environment_allocator_at_connect) {
    env_alloc ea;
    memset(&ea, 0, sizeof ea);
    ea.a.allocate = ea_allocate;
    ea.a.deallocate = ea_deallocate;
    ea.a.ctx = &ea;
    ea.a.name = "env-counting";
    algo_sched a[2];
    as_init(&a[0], AS_INLINE);
    as_init(&a[1], AS_POOL2);
    size_t n = 3 * ALGO_GTILE(sizeof(m22)) + 1;
    m22 *in = xmalloc(n * sizeof(m22)), *out = xmalloc(n * sizeof(m22)), *want = xmalloc(n * sizeof(m22));
    fill_m22(in, n, 99);
    ex_monoid m = { sizeof(m22), &m22_identity, m22_combine, NULL };
    for (int s = 0; s < 2; s++) {
        for (int excl = 0; excl < 2; excl++) {
            ex_sender *snd = gscan(a[s].sch, &m, excl, in, out, n, &m22_identity);
            size_t size = ex_sender_op_size(snd), align = ex_sender_op_align(snd);
            void *storage = NULL;
            cr_assert_eq(posix_memalign(&storage, align < sizeof(void *) ? sizeof(void *) : align, size), 0);
            arec r;
            arec_init(&r, a[s].pool);
            ex_env_pair_init(&r.pair, &ex_key_get_allocator, ex_alloc_value(&ea.a), ex_env_empty());
            r.has_env = true;
            long t0 = test_alloc_count();
            atomic_store(&ea.allocs, 0);
            atomic_store(&ea.frees, 0);
            ex_operation *op = NULL;
            ex_error e = ex_connect(snd, arec_receiver(&r), storage, size, &op);
            cr_assert_eq(e.code, 0);
            cr_assert_eq(atomic_load(&ea.allocs), 1, "%s: connect allocates the scratch (%ld allocations)", a[s].name,
                         atomic_load(&ea.allocs));
            ex_start(op);
            cr_assert(algo_wait(&r, NULL, 30.0));
            algo_expect_value(&r, 0, a[s].name);
            cr_assert_eq(atomic_load(&ea.frees), 0, "the scratch lives as long as the operation");
            ex_operation_destroy(op);
            cr_assert_eq(atomic_load(&ea.frees), 1, "destroying the operation frees the scratch");
            cr_assert_eq(atomic_load(&ea.allocs), 1, "%s: one allocation per run", a[s].name);
            cr_assert_eq(test_alloc_count(), t0, "nothing came from the default allocator");
            ref_fold(&m, in, want, n, excl, &m22_identity, NULL);
            cr_assert_eq(first_diff_bytes(out, want, n, sizeof(m22)), SIZE_MAX);

            /* The allocation fails: connect reports it, nothing completes. */
            arec_init(&r, a[s].pool);
            ex_env_pair_init(&r.pair, &ex_key_get_allocator, ex_alloc_value(&ea.a), ex_env_empty());
            r.has_env = true;
            atomic_store(&ea.allocs, 0);
            atomic_store(&ea.frees, 0);
            atomic_store(&ea.fail_next, 1);
            e = ex_connect(snd, arec_receiver(&r), storage, size, &op);
            cr_assert_eq(e.code, EX_ENOMEM, "%s: a failed scratch allocation gives EX_ENOMEM at connect, got %d",
                         a[s].name, e.code);
            cr_assert_not_null(e.msg);
            cr_assert_eq(atomic_load(&r.total), 0, "a failed connect completes nothing");
            cr_assert_eq(atomic_load(&ea.frees), 0);
            free(storage);
            ex_sender_release(snd);
        }
    }
    free(in), free(out), free(want);
    as_fini(&a[0]);
    as_fini(&a[1]);
    expect_no_leaks();
}

/* Fails allocation k = 1, 2, ... of a whole run (building the sender,
 * connecting, the scratch, a pool's helpers): each run ends with EX_ENOMEM
 * or with the exact result, and leaks nothing, until a run fails nothing. */
static void oom_sweep(as_kind kind, bool generic, bool excl) {
    algo_sched a;
    as_init(&a, kind);
    size_t n = generic ? 3 * ALGO_GTILE(sizeof(m22)) + 5 : 3 * T + 5;
    m22 *gin = xmalloc(n * sizeof(m22)), *gout = xmalloc(n * sizeof(m22)), *gwant = xmalloc(n * sizeof(m22));
    int64_t *in = xmalloc(n * 8), *out = xmalloc(n * 8), *want = xmalloc(n * 8);
    fill_m22(gin, n, 5);
    fill_i64(in, n, 6);
    ex_monoid m = { sizeof(m22), &m22_identity, m22_combine, NULL };
    m22 init = { 1, 2, 3, 4 };
    ref_fold(&m, gin, gwant, n, excl, &init, NULL);
    int64_t twant = ref_scan_i64(in, want, n, excl, -9);
    long base = test_stats.in_use;
    bool clean = false;
    int nomem = 0;
    long k;
    for (k = 1; k <= 300 && !clean; k++) {
        long failed_before = test_stats.failed;
        test_alloc_fail_at(k);
        ex_sender *s = generic ? gscan(a.sch, &m, excl, gin, gout, n, &init) : scan_i64(a.sch, excl, in, out, n, -9);
        arec r;
        arec_init(&r, a.pool);
        ex_operation *op = NULL;
        ex_error ce = ex_connect_alloc(s, arec_receiver(&r), &op);
        if (!ce.code) {
            ex_start(op);
            cr_assert(algo_wait(&r, kind == AS_RUN_LOOP ? &a.loop : NULL, 30.0), "%s k=%ld: no completion", a.name, k);
            ex_operation_free(op);
        }
        ex_sender_release(s);
        bool failed = test_stats.failed != failed_before;
        test_alloc_fail_at(0);
        if (ce.code || atomic_load(&r.errors)) {
            int code = ce.code ? ce.code : r.err.code;
            cr_assert_eq(code, EX_ENOMEM, "%s k=%ld: error %d (%s)", a.name, k, code,
                         ce.code ? ce.msg : r.err.msg ? r.err.msg : "");
            cr_assert(failed, "%s k=%ld: EX_ENOMEM without a failed allocation", a.name, k);
            nomem++;
        } else {
            algo_expect_value(&r, generic ? 0 : 1, a.name);
            if (generic) {
                cr_assert_eq(first_diff_bytes(gout, gwant, n, sizeof(m22)), SIZE_MAX, "%s k=%ld: wrong output", a.name,
                             k);
            } else {
                cr_assert_eq(first_diff_i64(out, want, n), SIZE_MAX, "%s k=%ld: wrong output", a.name, k);
                cr_assert_eq(r.v[0].as.i, twant);
            }
            clean = !failed;
        }
        cr_assert_eq(test_stats.in_use, base, "%s k=%ld: %ld block(s) leaked", a.name, k, test_stats.in_use - base);
    }
    cr_assert(clean, "%s: the sweep never reached a run without an injected failure", a.name);
    cr_assert_gt(nomem, 0, "%s: no injected failure gave EX_ENOMEM", a.name);
    free(gin), free(gout), free(gwant), free(in), free(out), free(want);
    as_fini(&a);
    expect_no_leaks();
}

Test(algo_scan, oom_sweep_generic_inline) {
    oom_sweep(AS_INLINE, true, false);
    oom_sweep(AS_INLINE, true, true);
}
Test(algo_scan, oom_sweep_generic_run_loop) { oom_sweep(AS_RUN_LOOP, true, true); }
Test(algo_scan, oom_sweep_generic_single_thread_context) { oom_sweep(AS_STC, true, false); }
Test(algo_scan, oom_sweep_generic_pools) {
    oom_sweep(AS_POOL1, true, true);
    oom_sweep(AS_POOL2, true, false);
    oom_sweep(AS_POOL4, true, true);
}
Test(algo_scan, oom_sweep_typed) {
    oom_sweep(AS_INLINE, false, false);
    oom_sweep(AS_POOL4, false, true);
}

/* A pool with more workers than inline bulk helpers: the helper array is
 * allocated; failing it costs workers, never the result. */
Test(algo_scan, oom_sweep_on_a_six_worker_pool) {
    ex_pool *p = algo_pool_new(6);
    size_t n = 12 * T + 5;
    int64_t *in = xmalloc(n * 8), *out = xmalloc(n * 8), *want = xmalloc(n * 8);
    fill_i64(in, n, 61);
    int64_t tw = ref_scan_i64(in, want, n, false, 0);
    long base = test_stats.in_use;
    bool clean = false;
    for (long k = 1; k <= 100 && !clean; k++) {
        long failed_before = test_stats.failed;
        test_alloc_fail_at(k);
        ex_result r = ex_sync_wait(ex_inclusive_scan_i64(ex_pool_scheduler(p), in, out, n));
        bool failed = test_stats.failed != failed_before;
        test_alloc_fail_at(0);
        if (r.disposition == EX_DISP_ERROR) {
            cr_assert_eq(r.error.code, EX_ENOMEM, "k=%ld: error %d (%s)", k, r.error.code, r.error.msg ? r.error.msg : "");
            cr_assert(failed);
        } else {
            cr_assert_eq(r.disposition, EX_DISP_VALUE, "k=%ld: disposition %d", k, r.disposition);
            cr_assert_eq(r.values[0].as.i, tw);
            cr_assert_eq(first_diff_i64(out, want, n), SIZE_MAX, "k=%ld: wrong output", k);
            clean = !failed;
        }
        ex_result_destroy(&r);
        cr_assert_eq(test_stats.in_use, base, "k=%ld: leaked", k);
    }
    cr_assert(clean);
    free(in), free(out), free(want);
    algo_pool_free(p);
    expect_no_leaks();
}

/* =================================================================== stop */

Test(algo_scan, stop_requested_before_start_completes_stopped) {
    for (int k = 0; k < AS_COUNT; k++) {
        algo_sched a;
        as_init(&a, (as_kind)k);
        static const size_t sizes[] = { 0, 5, 3 * 16384 + 5 };
        for (size_t j = 0; j < 3; j++) {
            size_t n = sizes[j];
            int64_t *in = xmalloc(n * 8), *out = xmalloc(n * 8);
            double *dout = xmalloc(n * 8);
            m22 *gout = xmalloc(n * sizeof(m22));
            fill_i64(in, n, 3);
            ex_monoid m = { 8, &(uint64_t){ 0 }, sum_combine, NULL };
            sum_ctx c = { 0x5ca1ab1e, 0, 0 };
            m.ctx = &c;
            ex_sender *s[6] = { ex_inclusive_scan_i64(a.sch, in, out, n), ex_exclusive_scan_i64(a.sch, in, out, n, 1),
                                ex_inclusive_scan_f64(a.sch, (const double *)in, dout, n),
                                ex_exclusive_scan_f64(a.sch, (const double *)in, dout, n, 1),
                                ex_inclusive_scan(a.sch, &m, in, gout, n),
                                ex_exclusive_scan(a.sch, &m, in, gout, n, &(uint64_t){ 0 }) };
            for (int b = 0; b < 6; b++) {
                cr_assert_eq(ex_sender_status(s[b]).code, 0);
                memset(out, SENTINEL_BYTE, n * 8);
                memset(dout, SENTINEL_BYTE, n * 8);
                memset(gout, SENTINEL_BYTE, n * sizeof(m22));
                arec r;
                arec_init(&r, a.pool);
                arec_with_stop(&r);
                ex_stop_source_request_stop(&r.stop);
                as_run(&a, s[b], &r);
                cr_assert_eq(atomic_load(&r.stops), 1, "%s builder %d n=%zu: values %d errors %d", a.name, b, n,
                             atomic_load(&r.values), atomic_load(&r.errors));
                for (size_t i = 0; i < n; i++) {
                    unsigned char *p = b < 2 ? (unsigned char *)&out[i] : b < 4 ? (unsigned char *)&dout[i]
                                                                              : (unsigned char *)gout + i * 8;
                    cr_assert_eq(p[0], SENTINEL_BYTE, "%s builder %d: element %zu written although stopped before start",
                                 a.name, b, i);
                }
                ex_sender_release(s[b]);
            }
            cr_assert_eq(atomic_load(&c.calls), 0, "%s: combine ran although stopped before start", a.name);
            free(in), free(out), free(dout), free(gout);
        }
        as_fini(&a);
    }
    expect_no_leaks();
}

static void stop_during_generic_scan(as_kind kind, bool excl) {
    algo_sched a;
    as_init(&a, kind);
    bool external = a.pool != NULL;
    size_t n = 10 * T + 3;  /* 8-byte elements: tiles of T; more tiles than participants */
    uint64_t *in = xmalloc(n * 8), *out = xmalloc(n * 8);
    for (size_t i = 0; i < n; i++) in[i] = i;
    in[100] = ALGO_STOP_MARK;
    memset(out, SENTINEL_BYTE, n * 8);
    arec r;
    arec_init(&r, a.pool);
    arec_with_stop(&r);
    algo_stop_ctx c;
    algo_stop_ctx_init(&c, &r.stop, external);
    uint64_t zero = 0;
    ex_monoid m = { 8, &zero, algo_stop_combine, &c };
    ex_sender *s = gscan(a.sch, &m, excl, in, out, n, &zero);
    cr_assert_eq(ex_sender_status(s).code, 0);
    pthread_t th;
    if (external) cr_assert_eq(pthread_create(&th, NULL, algo_stopper_main, &c), 0);
    as_run(&a, s, &r);
    if (external) pthread_join(th, NULL);
    cr_assert_eq(atomic_load(&c.timed_out), 0, "the stop request never came");
    cr_assert_eq(atomic_load(&r.stops), 1, "%s %s: a stop requested during the scan must complete set_stopped (values %d errors %d)",
                 a.name, kind_name(excl), atomic_load(&r.values), atomic_load(&r.errors));
    /* At most two tiles per participant (the current one and the one it
     * claimed ahead) were claimed before the stop: the last tile never ran,
     * and fewer combines ran than a full scan makes (one per element in
     * the tile sums but the last tile's, one per element in the scans). */
    unsigned char *last = (unsigned char *)&out[n - 1];
    cr_assert_eq(last[0], SENTINEL_BYTE, "%s: the last tile was written although stop was requested in tile 0", a.name);
    long full = (long)(2 * n - (n - 10 * T));
    cr_assert_lt(atomic_load(&c.calls), full, "%s: every element was combined although stopped", a.name);
    ex_sender_release(s);
    free(in), free(out);
    as_fini(&a);
}

Test(algo_scan, stop_requested_inside_a_generic_scan_completes_stopped) {
    for (int k = AS_INLINE; k <= AS_STC; k++) {
        stop_during_generic_scan((as_kind)k, false);
        stop_during_generic_scan((as_kind)k, true);
    }
    expect_no_leaks();
}

Test(algo_scan, stop_from_another_thread_during_a_pool_scan_completes_stopped) {
    for (int k = AS_POOL1; k <= AS_POOL4; k++) {
        stop_during_generic_scan((as_kind)k, false);
        stop_during_generic_scan((as_kind)k, true);
    }
    expect_no_leaks();
}

/* A typed scan racing a stop request from another thread: it completes
 * once, stopped or with the exact result. */
typedef struct racer { ex_stop_source *src; long delay_us; } racer;

static void *racer_main(void *p) {
    racer *rc = p;
    if (rc->delay_us) {
        struct timespec d = { 0, rc->delay_us * 1000 };
        nanosleep(&d, NULL);
    }
    ex_stop_source_request_stop(rc->src);
    return NULL;
}

Test(algo_scan, typed_scan_racing_a_stop_request_completes_once) {
    algo_sched a;
    as_init(&a, AS_POOL2);
    size_t n = ALGO_HUGE;
    int64_t *in = xmalloc(n * 8), *out = xmalloc(n * 8), *want = xmalloc(n * 8);
    fill_i64(in, n, 8);
    int64_t tw = ref_scan_i64(in, want, n, false, 0);
    int stopped = 0, valued = 0;
    for (int rep = 0; rep < 8; rep++) {
        ex_sender *s = ex_inclusive_scan_i64(a.sch, in, out, n);
        arec r;
        arec_init(&r, a.pool);
        arec_with_stop(&r);
        racer rc = { &r.stop, rep * 300 };
        pthread_t th;
        cr_assert_eq(pthread_create(&th, NULL, racer_main, &rc), 0);
        as_run(&a, s, &r);
        pthread_join(th, NULL);
        if (atomic_load(&r.stops)) {
            stopped++;
        } else {
            algo_expect_value(&r, 1, "racing stop");
            cr_assert_eq(r.v[0].as.i, tw);
            cr_assert_eq(first_diff_i64(out, want, n), SIZE_MAX);
            valued++;
        }
        cr_assert_geq(r.worker, 0, "completes on a worker");
        ex_sender_release(s);
    }
    cr_assert_eq(stopped + valued, 8);
    free(in), free(out), free(want);
    as_fini(&a);
    expect_no_leaks();
}

/* ===================================================== completion thread */

Test(algo_scan, completes_on_an_agent_of_the_scheduler) {
    for (int k = 0; k < AS_COUNT; k++) {
        algo_sched a;
        as_init(&a, (as_kind)k);
        static const size_t sizes[] = { 0, 1, 3 * 16384 + 5 };
        for (size_t j = 0; j < 3; j++) {
            size_t n = sizes[j];
            int64_t *in = xmalloc(n * 8), *out = xmalloc(n * 8);
            fill_i64(in, n, 11);
            ex_monoid m = { sizeof(int64_t), &(uint64_t){ 0 }, sum_combine, NULL };
            sum_ctx c = { 0x5ca1ab1e, 0, 0 };
            m.ctx = &c;
            ex_sender *s[3] = { ex_inclusive_scan_i64(a.sch, in, out, n),
                                ex_exclusive_scan_f64(a.sch, (const double *)in, (double *)out, n, 0),
                                ex_exclusive_scan(a.sch, &m, in, out, n, &(uint64_t){ 0 }) };
            for (int b = 0; b < 3; b++) {
                arec r;
                as_run_plain(&a, s[b], &r);
                cr_assert_eq(atomic_load(&r.values), 1);
                if (a.pool)
                    cr_assert_geq(r.worker, 0, "%s builder %d n=%zu: did not complete on a pool worker", a.name, b, n);
                else if (a.kind == AS_STC)
                    cr_assert_neq(r.thread, test_thread_id(), "%s: completes on the context's thread", a.name);
                else
                    cr_assert_eq(r.thread, test_thread_id(), "%s: completes on the thread that runs the loop", a.name);
                ex_sender_release(s[b]);
            }
            free(in), free(out);
        }
        as_fini(&a);
    }
    expect_no_leaks();
}

/* ======================================================= argument errors */

static int64_t ga[256], gb[256];

Test(algo_scan, bad_arguments_give_einval_naming_the_builder) {
    ex_scheduler bad = { NULL, NULL };
    ex_scheduler sch = ex_inline_scheduler();
    int64_t *i = ga, *o = gb;
    double *di = (double *)ga, *dout = (double *)gb;
    size_t huge_n = SIZE_MAX / 8 + 1;

    algo_expect_einval(ex_inclusive_scan_f64(bad, di, dout, 4), "ex_inclusive_scan_f64", "invalid scheduler");
    algo_expect_einval(ex_inclusive_scan_f64(sch, NULL, dout, 4), "ex_inclusive_scan_f64", "NULL in");
    algo_expect_einval(ex_inclusive_scan_f64(sch, di, NULL, 4), "ex_inclusive_scan_f64", "NULL out");
    algo_expect_einval(ex_inclusive_scan_f64(sch, di, di + 1, 4), "ex_inclusive_scan_f64", "out overlaps in");
    algo_expect_einval(ex_inclusive_scan_f64(sch, di + 3, di, 4), "ex_inclusive_scan_f64", "in overlaps out");
    algo_expect_einval(ex_inclusive_scan_f64(sch, di, dout, huge_n), "ex_inclusive_scan_f64", "n * 8 overflows");
    algo_expect_einval(ex_exclusive_scan_f64(bad, di, dout, 4, 0), "ex_exclusive_scan_f64", "invalid scheduler");
    algo_expect_einval(ex_exclusive_scan_f64(sch, NULL, dout, 1, 0), "ex_exclusive_scan_f64", "NULL in");
    algo_expect_einval(ex_exclusive_scan_f64(sch, di, NULL, 1, 0), "ex_exclusive_scan_f64", "NULL out");
    algo_expect_einval(ex_exclusive_scan_f64(sch, di + 1, di, 2, 0), "ex_exclusive_scan_f64", "overlap");
    algo_expect_einval(ex_inclusive_scan_i64(bad, i, o, 4), "ex_inclusive_scan_i64", "invalid scheduler");
    algo_expect_einval(ex_inclusive_scan_i64(sch, NULL, o, 4), "ex_inclusive_scan_i64", "NULL in");
    algo_expect_einval(ex_inclusive_scan_i64(sch, i, NULL, 4), "ex_inclusive_scan_i64", "NULL out");
    algo_expect_einval(ex_inclusive_scan_i64(sch, i, i + 2, 4), "ex_inclusive_scan_i64", "overlap");
    algo_expect_einval(ex_exclusive_scan_i64(bad, i, o, 4, 0), "ex_exclusive_scan_i64", "invalid scheduler");
    algo_expect_einval(ex_exclusive_scan_i64(sch, NULL, o, 4, 0), "ex_exclusive_scan_i64", "NULL in");
    algo_expect_einval(ex_exclusive_scan_i64(sch, i, NULL, 4, 0), "ex_exclusive_scan_i64", "NULL out");
    algo_expect_einval(ex_exclusive_scan_i64(sch, i + 63, i, 64, 0), "ex_exclusive_scan_i64", "overlap by one");

    uint64_t zero = 0;
    ex_monoid good = { 8, &zero, sum_combine, NULL };
    ex_monoid no_combine = { 8, &zero, NULL, NULL };
    ex_monoid no_identity = { 8, NULL, sum_combine, NULL };
    ex_monoid size0 = { 0, &zero, sum_combine, NULL };
    static unsigned char big_id[EX_MONOID_MAX_SIZE + 1];
    ex_monoid too_big = { EX_MONOID_MAX_SIZE + 1, big_id, sum_combine, NULL };
    const char *names[2] = { "ex_inclusive_scan", "ex_exclusive_scan" };
    for (int excl = 0; excl < 2; excl++) {
        const char *nm = names[excl];
        algo_expect_einval(gscan(bad, &good, excl, i, o, 4, &zero), nm, "invalid scheduler");
        algo_expect_einval(gscan(sch, NULL, excl, i, o, 4, &zero), nm, "NULL monoid");
        algo_expect_einval(gscan(sch, &no_combine, excl, i, o, 4, &zero), nm, "NULL combine");
        algo_expect_einval(gscan(sch, &no_identity, excl, i, o, 4, &zero), nm, "NULL identity");
        algo_expect_einval(gscan(sch, &size0, excl, i, o, 4, &zero), nm, "size 0");
        algo_expect_einval(gscan(sch, &too_big, excl, i, o, 4, &zero), nm, "size above EX_MONOID_MAX_SIZE");
        algo_expect_einval(gscan(sch, &good, excl, NULL, o, 4, &zero), nm, "NULL in");
        algo_expect_einval(gscan(sch, &good, excl, i, NULL, 4, &zero), nm, "NULL out");
        algo_expect_einval(gscan(sch, &good, excl, i, i + 1, 4, &zero), nm, "overlap");
        algo_expect_einval(gscan(sch, &good, excl, i, o, huge_n, &zero), nm, "n * size overflows");
    }
    algo_expect_einval(ex_exclusive_scan(sch, &good, i, o, 4, NULL), "ex_exclusive_scan", "NULL init");
    /* Size 1 and EX_MONOID_MAX_SIZE are fine. */
    static unsigned char max_id[EX_MONOID_MAX_SIZE];
    ex_monoid max_ok = { EX_MONOID_MAX_SIZE, max_id, sum_combine, NULL };
    ex_monoid one_ok = { 1, &aff8_identity, aff8_combine, NULL };
    ex_sender *s = ex_inclusive_scan(sch, &max_ok, NULL, NULL, 0);
    cr_assert_eq(ex_sender_status(s).code, 0, "EX_MONOID_MAX_SIZE is allowed");
    ex_sender_release(s);
    s = ex_exclusive_scan(sch, &one_ok, NULL, NULL, 0, &aff8_identity);
    cr_assert_eq(ex_sender_status(s).code, 0, "size 1 is allowed");
    ex_sender_release(s);
    /* Adjacent arrays do not overlap. */
    s = ex_inclusive_scan_i64(sch, i, i + 4, 4);
    cr_assert_eq(ex_sender_status(s).code, 0, "adjacent arrays are fine");
    ex_sender_release(s);
    s = ex_inclusive_scan_i64(sch, i + 4, i, 4);
    cr_assert_eq(ex_sender_status(s).code, 0, "adjacent arrays are fine");
    ex_sender_release(s);
    expect_no_leaks();
}

Test(algo_scan, signatures) {
    ex_scheduler sch = ex_inline_scheduler();
    ex_sender *s[3] = { ex_inclusive_scan_f64(sch, NULL, NULL, 0), ex_exclusive_scan_i64(sch, NULL, NULL, 0, 0), NULL };
    ex_monoid m = { 1, &aff8_identity, aff8_combine, NULL };
    s[2] = ex_inclusive_scan(sch, &m, NULL, NULL, 0);
    const ex_sigs *g = ex_sender_sigs(s[0]);
    cr_assert_eq(g->nvalues, 1);
    cr_assert_eq(g->values[0].arity, 1);
    cr_assert_eq(g->values[0].types[0], EX_T_DOUBLE);
    g = ex_sender_sigs(s[1]);
    cr_assert_eq(g->nvalues, 1);
    cr_assert_eq(g->values[0].arity, 1);
    cr_assert_eq(g->values[0].types[0], EX_T_INT);
    g = ex_sender_sigs(s[2]);
    cr_assert_eq(g->nvalues, 1);
    cr_assert_eq(g->values[0].arity, 0);
    for (int b = 0; b < 3; b++) {
        cr_assert(ex_sender_sigs(s[b])->flags & EX_SIGS_ERROR);
        cr_assert(ex_sender_sigs(s[b])->flags & EX_SIGS_STOPPED);
        ex_sender_release(s[b]);
    }
    expect_no_leaks();
}

/* ==================================================== multi-shot, shutdown */

Test(algo_scan, sender_is_multi_shot_and_concurrent_runs_write_the_same_output) {
    algo_sched a;
    as_init(&a, AS_POOL4);
    size_t n = 7 * T + 3;
    int64_t *in = xmalloc(n * 8), *out = xmalloc(n * 8), *want = xmalloc(n * 8);
    fill_i64(in, n, 12);
    int64_t tw = ref_scan_i64(in, want, n, true, 3);
    ex_sender *s = ex_exclusive_scan_i64(a.sch, in, out, n, 3);
    for (int rep = 0; rep < 3; rep++) {
        memset(out, 0, n * 8);
        arec r;
        as_run_plain(&a, s, &r);
        algo_expect_value(&r, 1, "sequential reuse");
        cr_assert_eq(r.v[0].as.i, tw);
        cr_assert_eq(first_diff_i64(out, want, n), SIZE_MAX, "run %d", rep);
    }
    /* Concurrent runs: each gets its own operation; the output is the same. */
    enum { RUNS = 3 };
    arec r[RUNS];
    ex_operation *op[RUNS];
    memset(out, 0, n * 8);
    for (int k = 0; k < RUNS; k++) {
        arec_init(&r[k], a.pool);
        cr_assert_eq(ex_connect_alloc(s, arec_receiver(&r[k]), &op[k]).code, 0);
    }
    for (int k = 0; k < RUNS; k++) ex_start(op[k]);
    for (int k = 0; k < RUNS; k++) {
        cr_assert(algo_wait(&r[k], NULL, 30.0));
        algo_expect_value(&r[k], 1, "concurrent run");
        cr_assert_eq(r[k].v[0].as.i, tw);
        ex_operation_free(op[k]);
    }
    cr_assert_eq(first_diff_i64(out, want, n), SIZE_MAX);
    ex_sender_release(s);
    free(in), free(out), free(want);
    as_fini(&a);
    expect_no_leaks();
}

/* Completes with EX_ESHUTDOWN or stopped once the pool shut down. */
static void expect_shutdown_result(const arec *r, const char *what) {
    cr_assert_eq(atomic_load(&r->total), 1);
    if (atomic_load(&r->errors))
        cr_assert_eq(r->err.code, EX_ESHUTDOWN, "%s: error %d (%s)", what, r->err.code, r->err.msg ? r->err.msg : "");
    else
        cr_assert_eq(atomic_load(&r->stops), 1, "%s: a scan on a shut-down pool completed with a value", what);
}

Test(algo_scan, pool_shut_down_before_start_completes_with_eshutdown_or_stopped) {
    for (unsigned threads = 1; threads <= 4; threads *= 2) {
        ex_pool *p = algo_pool_new(threads);
        ex_scheduler sch = ex_pool_scheduler(p);
        size_t n = 3 * T + 5;
        int64_t *in = xmalloc(n * 8), *out = xmalloc(n * 8);
        fill_i64(in, n, 13);
        uint64_t zero = 0;
        sum_ctx c = { 0x5ca1ab1e, 0, 0 };
        ex_monoid m = { 8, &zero, sum_combine, &c };
        ex_sender *s[4] = { ex_inclusive_scan_i64(sch, in, out, 5), ex_inclusive_scan_i64(sch, in, out, n),
                            ex_exclusive_scan_f64(sch, (double *)in, (double *)out, n, 0),
                            ex_inclusive_scan(sch, &m, in, out, n) };
        cr_assert_eq(ex_pool_shutdown(p).code, 0);
        for (int b = 0; b < 4; b++) {
            arec r;
            arec_init(&r, p);
            ex_operation *op = NULL;
            cr_assert_eq(ex_connect_alloc(s[b], arec_receiver(&r), &op).code, 0);
            ex_start(op);
            cr_assert(algo_wait(&r, NULL, 20.0), "pool(%u) builder %d: hangs after shutdown", threads, b);
            expect_shutdown_result(&r, "after shutdown");
            ex_operation_free(op);
            ex_sender_release(s[b]);
        }
        cr_assert_eq(atomic_load(&c.calls), 0);
        free(in), free(out);
        algo_pool_free(p);
    }
    expect_no_leaks();
}

Test(algo_scan, pool_shut_down_during_a_scan_never_hangs) {
    size_t n = ALGO_HUGE;
    int64_t *in = xmalloc(n * 8), *out = xmalloc(n * 8), *want = xmalloc(n * 8);
    fill_i64(in, n, 14);
    int64_t tw = ref_scan_i64(in, want, n, false, 0);
    for (int rep = 0; rep < 6; rep++) {
        ex_pool *p = algo_pool_new(rep % 2 ? 4 : 2);
        enum { OPS = 3 };
        arec r[OPS];
        ex_operation *op[OPS];
        ex_sender *s = ex_inclusive_scan_i64(ex_pool_scheduler(p), in, out, n);
        for (int k = 0; k < OPS; k++) {
            arec_init(&r[k], p);
            cr_assert_eq(ex_connect_alloc(s, arec_receiver(&r[k]), &op[k]).code, 0);
            ex_start(op[k]);
        }
        if (rep >= 2) {
            struct timespec d = { 0, (long)rep * 200000 };
            nanosleep(&d, NULL);
        }
        cr_assert_eq(ex_pool_shutdown(p).code, 0);
        for (int k = 0; k < OPS; k++) {
            cr_assert(algo_wait(&r[k], NULL, 20.0), "rep %d op %d: no completion after shutdown", rep, k);
            sched_yield();
            cr_assert_eq(atomic_load(&r[k].total), 1);
            if (atomic_load(&r[k].values)) cr_assert_eq(r[k].v[0].as.i, tw, "a run that finished has the right total");
            else expect_shutdown_result(&r[k], "during shutdown");
            ex_operation_free(op[k]);
        }
        ex_sender_release(s);
        algo_pool_free(p);
    }
    free(in), free(out), free(want);
    expect_no_leaks();
}

/* ============================================================ agents */

/* combine notes the threads it runs on; in tile 0 it can wait until
 * another thread combined something (tile 1's reduction runs before the
 * chain hand-over, so it can overlap tile 0). */
#define MAX_THREADS 16

typedef struct agent_ctx {
    atomic_uintptr_t threads[MAX_THREADS];
    atomic_int nthreads, overflow;
    const uint64_t *base;
    size_t wait_index;          /* the element whose combine waits (SIZE_MAX: none) */
    atomic_int waited, timed_out;
} agent_ctx;

static int agent_note(agent_ctx *c) {
    uintptr_t me = (uintptr_t)test_thread_id();
    int n = atomic_load(&c->nthreads);
    for (int i = 0; i < n && i < MAX_THREADS; i++)
        if (atomic_load(&c->threads[i]) == me) return n;
    int slot = atomic_fetch_add(&c->nthreads, 1);
    if (slot < MAX_THREADS) atomic_store(&c->threads[slot], me);
    else atomic_store(&c->overflow, 1);
    return slot + 1;
}

static bool other_thread_seen(agent_ctx *c) {
    uintptr_t me = (uintptr_t)test_thread_id();
    int n = atomic_load(&c->nthreads);
    for (int i = 0; i < n && i < MAX_THREADS; i++) {
        uintptr_t t = atomic_load(&c->threads[i]);
        if (t && t != me) return true;
    }
    return false;
}

static void agent_combine(void *ctx, void *acc, const void *x) {
    agent_ctx *c = ctx;
    agent_note(c);
    if ((const uint64_t *)x - c->base == (ptrdiff_t)c->wait_index && !atomic_exchange(&c->waited, 1)) {
        double end = algo_now() + 10;
        while (!other_thread_seen(c) && algo_now() < end) sched_yield();
        if (!other_thread_seen(c)) atomic_store(&c->timed_out, 1);
    }
    *(uint64_t *)acc += *(const uint64_t *)x;
}

Test(algo_scan, one_tile_runs_on_one_agent_of_a_pool) {
    algo_sched a;
    as_init(&a, AS_POOL4);
    static const size_t sizes[] = { 1, 100, 16384 };
    for (size_t j = 0; j < 3; j++) {
        size_t n = sizes[j];
        uint64_t *in = xmalloc(n * 8), *out = xmalloc(n * 8);
        for (size_t i = 0; i < n; i++) in[i] = i;
        for (int excl = 0; excl < 2; excl++) {
            agent_ctx c;
            memset(&c, 0, sizeof c);
            c.base = in;
            c.wait_index = SIZE_MAX;
            uint64_t zero = 0;
            ex_monoid m = { 8, &zero, agent_combine, &c };
            run_gscan(&a, &m, excl, in, out, n, &zero);
            cr_assert_eq(atomic_load(&c.nthreads), 1, "n=%zu (one tile): combine ran on %d threads", n,
                         atomic_load(&c.nthreads));
            cr_assert_eq(out[n - 1], excl ? (n - 1) * (n - 2) / 2 : n * (n - 1) / 2);
        }
        free(in), free(out);
    }
    as_fini(&a);
    expect_no_leaks();
}

Test(algo_scan, tiles_are_reduced_by_several_workers_at_once) {
    for (int k = AS_POOL2; k <= AS_POOL4; k++) {
        algo_sched a;
        as_init(&a, (as_kind)k);
        size_t n = 8 * T + 1;
        uint64_t *in = xmalloc(n * 8), *out = xmalloc(n * 8);
        for (size_t i = 0; i < n; i++) in[i] = i * 3;
        agent_ctx c;
        memset(&c, 0, sizeof c);
        c.base = in;
        c.wait_index = 0;  /* tile 0's first element waits for another worker */
        uint64_t zero = 0;
        ex_monoid m = { 8, &zero, agent_combine, &c };
        run_gscan(&a, &m, false, in, out, n, NULL);
        cr_assert_eq(atomic_load(&c.timed_out), 0, "%s: no other worker combined while tile 0 was being reduced", a.name);
        cr_assert_geq(atomic_load(&c.nthreads), 2, "%s", a.name);
        uint64_t s = 0;
        for (size_t i = 0; i < n; i++) {
            s += in[i];
            cr_assert_eq(out[i], s, "%s: out[%zu]", a.name, i);
        }
        free(in), free(out);
        as_fini(&a);
    }
    expect_no_leaks();
}

/* ========================================== a resource's own bulk hook */

/* An inline resource (schedule completes inside start) whose bulk hook
 * either runs the indices one after another from the last to the first,
 * or gives every index its own thread. */
typedef struct own_res {
    bool threads;
    atomic_int bulk_calls;
    size_t last_shape;
} own_res;

typedef struct own_op {
    ex_operation base;
    ex_receiver r;
} own_op;

static void own_start(ex_operation *op) {
    own_op *o = (own_op *)op;
    if (ex_stop_token_stop_requested(ex_get_stop_token(ex_receiver_env(o->r)))) ex_set_stopped(o->r);
    else ex_set_value(o->r, NULL, 0);
}
static const ex_operation_vtable own_op_vt = { own_start, NULL };

static ex_error own_connect(void *self, ex_receiver r, void *storage) {
    (void)self;
    own_op *o = storage;
    o->base.vt = &own_op_vt;
    o->r = r;
    return ex_ok();
}

typedef struct own_index { ex_bulk_job *job; size_t i; } own_index;

static void *own_index_main(void *p) {
    own_index *x = p;
    (void)ex_bulk_job_run(x->job, x->i, x->i + 1);
    return NULL;
}

static void own_bulk(void *self, ex_bulk_job *job) {
    own_res *res = self;
    atomic_fetch_add(&res->bulk_calls, 1);
    res->last_shape = job->shape;
    if (res->threads) {
        pthread_t th[64];
        own_index idx[64];
        size_t n = job->shape < 64 ? job->shape : 64;
        for (size_t i = 0; i < n; i++) {
            idx[i].job = job;
            idx[i].i = i;
            if (pthread_create(&th[i], NULL, own_index_main, &idx[i])) own_index_main(&idx[i]), th[i] = 0;
        }
        for (size_t i = 0; i < n; i++)
            if (th[i]) pthread_join(th[i], NULL);
        if (job->shape > n) (void)ex_bulk_job_run(job, n, job->shape);
    } else {
        for (size_t i = job->shape; i-- > 0;)
            if (!ex_bulk_job_run(job, i, i + 1)) break;
    }
    ex_bulk_job_done(job);
}

static const ex_scheduler_vtable own_vt = {
    .name = "own_bulk",
    .schedule_op_size = sizeof(own_op),
    .schedule_op_align = alignof(own_op),
    .schedule_flags = EX_SIGS_STOPPED,
    .connect_schedule = own_connect,
    .progress = EX_PROGRESS_PARALLEL,
    .equal = NULL,
    .post = NULL,
    .dispatch = NULL,
    .bulk = own_bulk,
};

Test(algo_scan, a_resources_own_bulk_hook_runs_the_participants) {
    for (int threads = 0; threads < 2; threads++) {
        own_res res;
        memset(&res, 0, sizeof res);
        res.threads = threads;
        ex_scheduler sch = { &own_vt, &res };
        size_t n = 9 * T + 5;
        int64_t *in = xmalloc(n * 8), *out = xmalloc(n * 8), *want = xmalloc(n * 8);
        fill_i64(in, n, 15);
        for (int excl = 0; excl < 2; excl++) {
            int64_t tw = ref_scan_i64(in, want, n, excl, 4);
            ex_result r = ex_sync_wait(scan_i64(sch, excl, in, out, n, 4));
            cr_assert_eq(r.disposition, EX_DISP_VALUE, "%s: disposition %d (%s)", threads ? "threads" : "reverse",
                         r.disposition, r.error.msg ? r.error.msg : "");
            cr_assert_eq(r.values[0].as.i, tw);
            cr_assert_eq(first_diff_i64(out, want, n), SIZE_MAX, "%s %s", threads ? "threads" : "reverse",
                         kind_name(excl));
            m22 *gin = xmalloc(n * sizeof(m22)), *gout = xmalloc(n * sizeof(m22)), *gwant = xmalloc(n * sizeof(m22));
            size_t gn = 5 * ALGO_GTILE(sizeof(m22)) + 3;
            fill_m22(gin, gn, 16);
            ex_monoid m = { sizeof(m22), &m22_identity, m22_combine, NULL };
            ref_fold(&m, gin, gwant, gn, excl, &m22_identity, NULL);
            r = ex_sync_wait(gscan(sch, &m, excl, gin, gout, gn, &m22_identity));
            cr_assert_eq(r.disposition, EX_DISP_VALUE);
            cr_assert_eq(first_diff_bytes(gout, gwant, gn, sizeof(m22)), SIZE_MAX, "generic on %s",
                         threads ? "threads" : "reverse");
            free(gin), free(gout), free(gwant);
        }
        cr_assert_gt(atomic_load(&res.bulk_calls), 0, "the resource's bulk hook was not used");
        cr_assert_geq(res.last_shape, 1);
        free(in), free(out), free(want);
    }
    expect_no_leaks();
}

/* ====================================== outputs beyond the last-level cache */

/* Outputs at least as large as the last-level cache are written with
 * non-temporal stores (when 16-byte aligned): same results, same bits. */
Test(algo_scan, outputs_larger_than_the_last_level_cache) {
    long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (llc <= 0) llc = sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (llc <= 0) llc = 8L << 20;
    if (llc > (1L << 30)) llc = 1L << 30;  /* keep the test's memory bounded */
    size_t n = (size_t)llc / 8 + 2 * T + 3;
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
