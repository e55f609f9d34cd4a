/* SPDX-License-Identifier: MIT */
/* algo_reduce: ex_reduce_f64, ex_reduce_i64 and the generic ex_reduce
 * (cexec/algorithms.h) on every kind of scheduler, at every size around
 * the tile boundaries and a large one.  int64 exact (wrapping), doubles
 * exact on integers, within the documented bound otherwise and
 * bit-identical on every scheduler; generic results equal the serial fold
 * of a non-commutative monoid.  No timing assertions; waits are bounded. */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "algorithms/exi_kernels.h"  /* exi_sum_f64, exi_sum_u64: white-box */
#include "algorithms/local_fixtures.h"

TEST_SUITE(algo_reduce, 120);

static int64_t run_reduce_i64(algo_sched *a, const int64_t *in, size_t n, int64_t init) {
    return run_one_value(a, ex_reduce_i64(a->sch, in, n, init), EX_T_INT, "ex_reduce_i64").as.i;
}

static double run_reduce_f64(algo_sched *a, const double *in, size_t n, double init) {
    return run_one_value(a, ex_reduce_f64(a->sch, in, n, init), EX_T_DOUBLE, "ex_reduce_f64").as.d;
}

/* ex_reduce completes with set_value(ptr result). */
static void run_greduce(algo_sched *a, const ex_monoid *m, const void *in, size_t n, void *result) {
    ex_value v = run_one_value(a, ex_reduce(a->sch, m, in, n, result), EX_T_PTR, "ex_reduce");
    cr_assert_eq(v.as.p, result, "%s: the value is the result pointer", a->name);
}

/* ================================================================== typed */

static const int64_t inits[] = { 0, 1, -1, INT64_MAX, INT64_MIN, 0x7edcba9876543210ll };

static void i64_every_size(algo_sched *a) {
    for (size_t j = 0; j <= algo_nsizes; j++) {
        size_t n = j < algo_nsizes ? algo_sizes[j] : ALGO_HUGE;
        int64_t *in = xmalloc(n * 8);
        fill_i64(in, n, 100 + j);
        for (size_t q = 0; q < sizeof inits / sizeof inits[0]; q += j < algo_nsizes ? 1 : 2) {
            int64_t got = run_reduce_i64(a, in, n, inits[q]), want = ref_sum_i64(in, n, inits[q]);
            cr_assert_eq(got, want, "%s n=%zu init=%lld: %lld, serial loop %lld", a->name, n, (long long)inits[q],
                         (long long)got, (long long)want);
        }
        free(in);
    }
}

static void f64_every_size(algo_sched *a) {
    for (size_t j = 0; j <= algo_nsizes; j++) {
        size_t n = j < algo_nsizes ? algo_sizes[j] : ALGO_HUGE;
        double *in = xmalloc(n * 8);
        fill_f64_int(in, n, 200 + j);
        static const double dinit[] = { 0.0, -3.0, 1e12 };
        for (int q = 0; q < 3; q++) {
            double got = run_reduce_f64(a, in, n, dinit[q]), want = ref_sum_f64(in, n, dinit[q]);
            cr_assert(got == want, "%s n=%zu (integers): %.17g, serial loop %.17g", a->name, n, got, want);
        }
        fill_f64_mixed(in, n, 300 + j);
        static const double minit[] = { 0.0, 7.25e3, -1e-3 };
        for (int q = 0; q < 3; q++) {
            double got = run_reduce_f64(a, in, n, minit[q]), ratio;
            cr_assert(check_f64_sum_bound(in, n, minit[q], got, &ratio),
                      "%s n=%zu init=%g: %.17g is outside the documented bound (error/bound %.3g)", a->name, n, minit[q],
                      got, ratio);
        }
        free(in);
    }
}

TEST_EVERY_SCHEDULER(algo_reduce, i64_every_size, i64_every_size)
TEST_EVERY_SCHEDULER(algo_reduce, f64_every_size, f64_every_size)

static void i64_overflow_wraps_twos_complement_on(algo_sched *a) {
    int64_t one = 1;
    cr_assert_eq(run_reduce_i64(a, &one, 1, INT64_MAX), INT64_MIN, "%s: INT64_MAX + 1", a->name);
    int64_t two[2] = { INT64_MIN, -1 };
    cr_assert_eq(run_reduce_i64(a, two, 2, 0), INT64_MAX, "%s: INT64_MIN - 1", a->name);
    size_t n = 9 * ALGO_TILE + 1;
    int64_t *in = xmalloc(n * 8);
    for (size_t i = 0; i < n; i++) in[i] = INT64_MAX;
    /* n * INT64_MAX = n * (2^63 - 1) == -n (mod 2^64) for odd n: 2^63 * odd == 2^63 */
    int64_t want = ref_sum_i64(in, n, 0);
    cr_assert_eq(want, (int64_t)(((uint64_t)1 << 63) - (uint64_t)n), "the reference itself");
    cr_assert_eq(run_reduce_i64(a, in, n, 0), want, "%s: many INT64_MAX", a->name);
    free(in);
}

Test(algo_reduce, i64_overflow_wraps_twos_complement) {
    for_kinds(2, (const as_kind[]){ AS_INLINE, AS_POOL4 }, i64_overflow_wraps_twos_complement_on);
}

static void empty_input_gives_init_or_the_identity_on(algo_sched *a) {
    cr_assert(same_bits(run_reduce_f64(a, NULL, 0, -0.5), -0.5), "%s", a->name);
    cr_assert(same_bits(run_reduce_f64(a, NULL, 0, 0.0), 0.0), "%s", a->name);
    cr_assert_eq(run_reduce_i64(a, NULL, 0, -12345), -12345, "%s", a->name);
    ex_monoid m = { sizeof(m22), &m22_identity, m22_combine, NULL };
    m22 res;
    memset(&res, 0x5a, sizeof res);
    run_greduce(a, &m, NULL, 0, &res);
    cr_assert_eq(memcmp(&res, &m22_identity, sizeof res), 0, "%s: the result of nothing is the identity", a->name);
}

Test(algo_reduce, empty_input_gives_init_or_the_identity) {
    for_each_kind(AS_INLINE, AS_POOL4, empty_input_gives_init_or_the_identity_on);
}

/* ============================================================ determinism */

Test(algo_reduce, f64_results_are_bit_identical_on_every_scheduler) {
    static algo_sched a[AS_COUNT];
    as_init_each(a, AS_COUNT, NULL);
    /* 42 and 64 tiles: one slot a tile; 65 and ALGO_HUGE: the chain (reduce.c) */
    static const size_t sizes[] = { 15, 16385, 3 * 16384 + 5, 41 * 16384 + 9, 64 * 16384, 64 * 16384 + 1, ALGO_HUGE };
    for (size_t j = 0; j < sizeof sizes / sizeof sizes[0]; j++) {
        size_t n = sizes[j];
        double *in = xmalloc((n + 1) * 8);
        fill_f64_mixed(in, n, 400 + j);
        double ref = run_reduce_f64(&a[AS_INLINE], in, n, 0.1);
        for (int k = 1; k < AS_COUNT; k++) {
            for (int rep = 0; rep < (a[k].pool ? 3 : 1); rep++) {
                double got = run_reduce_f64(&a[k], in, n, 0.1);
                cr_assert(same_bits(got, ref), "%s n=%zu run %d: %a, inline gave %a", a[k].name, n, rep, got, ref);
            }
        }
        /* nor does the alignment of the input */
        memmove(in + 1, in, n * 8);
        for (int k = 0; k < AS_COUNT; k += 5) {
            double got = run_reduce_f64(&a[k], in + 1, n, 0.1);
            cr_assert(same_bits(got, ref), "%s n=%zu misaligned input: %a, aligned %a", a[k].name, n, got, ref);
        }
        free(in);
    }
    as_fini_each(a, AS_COUNT);
    expect_no_leaks();
}

/* ================================================================ generic */

static void check_greduce(algo_sched *a, const gcase *g, size_t n, uint64_t seed) {
    size_t sz = g->m.size;
    unsigned char *in = xmalloc(n * sz);
    unsigned char want[EX_MONOID_MAX_SIZE], *got = xmalloc(sz);
    g->fill(in, n, seed);
    memset(got, SENTINEL_BYTE, sz);
    ref_fold(&g->m, in, NULL, n, false, NULL, want);
    run_greduce(a, &g->m, in, n, got);
    cr_assert_eq(memcmp(got, want, sz), 0, "%s %s n=%zu: differs from the serial fold", a->name, g->name, n);
    free(in), free(got);
}

static void generic_every_size(algo_sched *a) {
    gcase g = gcase_m22();
    size_t gt = ALGO_GTILE(sizeof(m22));
    const size_t sizes[] = { 0, 1, 7, 8, 9, 15, 16, 17, gt - 1, gt, gt + 1, 3 * gt + 5, 40 * gt + 1 };
    for (size_t j = 0; j < sizeof sizes / sizeof sizes[0]; j++) check_greduce(a, &g, sizes[j], 500 + j);
    g = gcase_aff200();
    gt = ALGO_GTILE(sizeof(aff200));
    const size_t s200[] = { 1, 3, gt - 1, gt, gt + 1, 3 * gt + 5 };
    for (size_t j = 0; j < sizeof s200 / sizeof s200[0]; j++) check_greduce(a, &g, s200[j], 600 + j);
    g = gcase_aff8();
    gt = ALGO_GTILE(1);
    const size_t s1[] = { 1, 31, gt - 1, gt, gt + 1, 3 * gt + 5 };
    for (size_t j = 0; j < sizeof s1 / sizeof s1[0]; j++) check_greduce(a, &g, s1[j], 700 + j);
    g = gcase_big4k();
    gt = ALGO_GTILE(sizeof(big4k));
    const size_t s4[] = { 1, gt - 1, gt, gt + 1, 5 * gt + 3 };
    for (size_t j = 0; j < sizeof s4 / sizeof s4[0]; j++) check_greduce(a, &g, s4[j], 800 + j);
}

TEST_EVERY_SCHEDULER(algo_reduce, generic_every_size, generic_every_size)

static void generic_builder_copies_the_monoid_and_identity_on(algo_sched *a) {
    size_t n = 6 * ALGO_GTILE(sizeof(m22)) + 2;
    m22 *in = xmalloc(n * sizeof(m22)), want, got;
    fill_m22(in, n, 17);
    m22 id = m22_identity;
    ex_monoid m = { sizeof(m22), &id, m22_combine, NULL };
    ex_sender *s = ex_reduce(a->sch, &m, in, n, &got);
    cr_assert_eq(ex_sender_status(s).code, 0);
    memset(&m, 0, sizeof m);
    memset(&id, 0x33, sizeof id);
    arec r;
    as_run_plain(a, s, &r);
    algo_expect_value(&r, 1, "copied monoid");
    ex_monoid mref = { sizeof(m22), &m22_identity, m22_combine, NULL };
    ref_fold(&mref, in, NULL, n, false, NULL, &want);
    cr_assert_eq(memcmp(&got, &want, sizeof got), 0);
    ex_sender_release(s);
    free(in);
}

/* The sum kernel's documented order (exi_kernels.h): element i into lane
 * i % 16, a partial block padded with -0.0, then the fixed combination. */
static double documented_sum_f64(const double *in, size_t n) {
    double lane[16];
    for (int l = 0; l < 16; l++) lane[l] = -0.0;
    size_t padded = (n + 15) / 16 * 16;
    for (size_t i = 0; i < padded; i++) lane[i % 16] += i < n ? in[i] : -0.0;
    double t[4];
    for (int l = 0; l < 4; l++) t[l] = (lane[l] + lane[l + 4]) + (lane[l + 8] + lane[l + 12]);
    return (t[0] + t[2]) + (t[1] + t[3]);
}

/* With and without the prefetching loop (which switches to the plain one
 * 1 KiB before the end), every element is summed once, in the same lanes:
 * sizes around that switch, around 16 and at tile sizes. */
Test(algo_reduce, sum_kernel_gives_the_documented_bits_with_and_without_prefetch) {
    size_t cap = 16384 + 300;
    double *in = xmalloc(cap * 8);
    uint64_t *u = xmalloc(cap * 8);
    fill_f64_mixed(in, cap, 77);
    for (size_t i = 0; i < cap; i++) u[i] = (uint64_t)i * 0x9e3779b97f4a7c15u;
    for (size_t n = 0; n <= cap; n += n < 400 ? 1 : n < 16384 - 40 ? 997 : 1) {
        double want = documented_sum_f64(in, n);
        uint64_t uwant = 0;
        for (size_t i = 0; i < n; i++) uwant += u[i];
        for (int pf = 0; pf < 2; pf++) {
            double got = exi_sum_f64(in, n, pf);
            cr_assert(same_bits(got, want), "n=%zu prefetch=%d: %a, documented order %a", n, pf, got, want);
            cr_assert_eq(exi_sum_u64(u, n, pf), uwant, "n=%zu prefetch=%d: u64 sum", n, pf);
        }
    }
    free(u);
    free(in);
}

Test(algo_reduce, generic_builder_copies_the_monoid_and_identity) {
    with_scheduler(AS_POOL4, generic_builder_copies_the_monoid_and_identity_on);
}

/* ============================================================ allocations */

/* The expected results of a typed run. */
typedef struct sums {
    int64_t i;
    double d;
} sums;

static void check_sum_i64(const arec *r, void *ctx) { cr_assert_eq(r->v[0].as.i, ((sums *)ctx)->i); }
static void check_sum_f64(const arec *r, void *ctx) { cr_assert(r->v[0].as.d == ((sums *)ctx)->d); }

static void typed_runs_allocate_nothing(algo_sched *a) {
    static const size_t sizes[] = { 0, 17, 16384, 5 * 16384 + 1 };
    for (size_t j = 0; j < sizeof sizes / sizeof sizes[0]; j++) {
        size_t n = sizes[j];
        int64_t *in = xmalloc(n * 8);
        double *din = xmalloc(n * 8);
        fill_i64(in, n, 900 + j);
        fill_f64_int(din, n, 950 + j);
        ex_sender *s[2] = { ex_reduce_i64(a->sch, in, n, 3), ex_reduce_f64(a->sch, din, n, 3) };
        sums want = { ref_sum_i64(in, n, 3), ref_sum_f64(din, n, 3) };
        expect_runs_allocate_nothing(a, s[0], 1, check_sum_i64, &want);
        expect_runs_allocate_nothing(a, s[1], 1, check_sum_f64, &want);
        ex_sender_release(s[0]);
        ex_sender_release(s[1]);
        free(in), free(din);
    }
}

Test(algo_reduce, typed_runs_allocate_nothing_inline) { with_scheduler(AS_INLINE, typed_runs_allocate_nothing); }
Test(algo_reduce, typed_runs_allocate_nothing_pool2) { with_scheduler(AS_POOL2, typed_runs_allocate_nothing); }
Test(algo_reduce, typed_runs_allocate_nothing_pool4) { with_scheduler(AS_POOL4, typed_runs_allocate_nothing); }

/* The generic form allocates one scratch block per run, at connect; a
 * failure there is EX_ENOMEM from connect. */
Test(algo_reduce, generic_allocates_its_scratch_at_connect) {
    algo_sched a[2];
    as_init_each(a, 2, (const as_kind[]){ AS_INLINE, AS_POOL4 });
    size_t n = 4 * ALGO_GTILE(sizeof(m22)) + 1;
    m22 *in = xmalloc(n * sizeof(m22)), want, got;
    fill_m22(in, n, 23);
    ex_monoid m = { sizeof(m22), &m22_identity, m22_combine, NULL };
    ref_fold(&m, in, NULL, n, false, NULL, &want);
    for (int s = 0; s < 2; s++) {
        ex_sender *snd = ex_reduce(a[s].sch, &m, in, n, &got);
        size_t size;
        void *storage = op_storage_new(snd, &size);
        arec r;
        arec_init(&r, a[s].pool);
        long before = test_alloc_count();
        long in_use = test_stats.in_use;
        ex_operation *op = NULL;
        cr_assert_eq(ex_connect(snd, arec_receiver(&r), storage, size, &op).code, 0);
        cr_assert_eq(test_alloc_count() - before, 1, "%s: connect allocates the scratch", a[s].name);
        ex_start(op);
        cr_assert(algo_wait(&r, NULL, 30.0));
        algo_expect_value(&r, 1, a[s].name);
        cr_assert_eq(memcmp(&got, &want, sizeof got), 0);
        ex_operation_destroy(op);
        cr_assert_eq(test_alloc_count() - before, 1, "%s: one allocation per run", a[s].name);
        cr_assert_eq(test_stats.in_use, in_use, "%s: destroying the operation frees the scratch", a[s].name);

        arec_init(&r, a[s].pool);
        test_alloc_fail_at(1);
        ex_error e = ex_connect(snd, arec_receiver(&r), storage, size, &op);
        test_alloc_fail_at(0);
        cr_assert_eq(e.code, EX_ENOMEM, "%s: %d", a[s].name, e.code);
        cr_assert_eq(atomic_load(&r.total), 0);
        cr_assert_eq(test_stats.in_use, in_use);
        free(storage);
        ex_sender_release(snd);
    }
    free(in);
    as_fini_each(a, 2);
    expect_no_leaks();
}

typedef struct reduce_oom {
    algo_sched a;
    aff200 *in, want;
    size_t n;
    ex_monoid m;
} reduce_oom;

static int reduce_oom_run(void *ctx, long k) {
    aff200 got;
    memset(&got, 0, sizeof got);
    reduce_oom *c = ctx;
    arec r;
    arec_init(&r, c->a.pool);
    int code = run_connected(&c->a, ex_reduce(c->a.sch, &c->m, c->in, c->n, &got), &r);
    if (code) return code;
    algo_expect_value(&r, 1, c->a.name);
    cr_assert_eq(memcmp(&got, &c->want, sizeof got), 0, "%s k=%ld: wrong result", c->a.name, k);
    return 0;
}

static void oom_sweep(as_kind kind) {
    reduce_oom c;
    as_init(&c.a, kind);
    c.n = 5 * ALGO_GTILE(sizeof(aff200)) + 7;
    c.in = xmalloc(c.n * sizeof(aff200));
    fill_aff200(c.in, c.n, 29);
    c.m = (ex_monoid){ sizeof(aff200), &aff200_identity, aff200_combine, NULL };
    ref_fold(&c.m, c.in, NULL, c.n, false, NULL, &c.want);
    cr_assert_gt(algo_oom_sweep(reduce_oom_run, &c, 300, c.a.name), 0);
    free(c.in);
    as_fini(&c.a);
}

Test(algo_reduce, oom_sweep_generic) {
    for (int k = 0; k < AS_COUNT; k++) oom_sweep((as_kind)k);
    expect_no_leaks();
}

/* =================================================================== stop */

static void stop_requested_before_start_completes_stopped_on(algo_sched *a) {
    static const size_t sizes[] = { 0, 3, 4 * 16384 + 1 };
    for (size_t j = 0; j < 3; j++) {
        size_t n = sizes[j];
        int64_t *in = xmalloc(n * 8);
        fill_i64(in, n, 31);
        sum_ctx c = { SUM_MAGIC, 0, 0 };
        uint64_t zero = 0, result = 77;
        ex_monoid m = { 8, &zero, sum_combine, &c };
        ex_sender *s[3] = { ex_reduce_i64(a->sch, in, n, 0), ex_reduce_f64(a->sch, (const double *)in, n, 0),
                            ex_reduce(a->sch, &m, in, n, &result) };
        for (int b = 0; b < 3; b++) {
            expect_stopped_before_start(a, s[b], b, n);
            ex_sender_release(s[b]);
        }
        cr_assert_eq(atomic_load(&c.calls), 0, "%s: combine ran although stopped before start", a->name);
        cr_assert_eq(result, 77u, "%s: the result was written although stopped", a->name);
        free(in);
    }
}

Test(algo_reduce, stop_requested_before_start_completes_stopped) {
    for_each_kind(AS_INLINE, AS_POOL4, stop_requested_before_start_completes_stopped_on);
}

static void stop_requested_during_a_reduction_completes_stopped_on(algo_sched *a) {
    bool external = a->pool != NULL;
    size_t n = 12 * ALGO_TILE + 1;
    uint64_t *in = xmalloc(n * 8);
    for (size_t i = 0; i < n; i++) in[i] = i;
    in[5] = ALGO_STOP_MARK;
    arec r;
    arec_init(&r, a->pool);
    arec_with_stop(&r);
    algo_stop_ctx c;
    algo_stop_ctx_init(&c, &r.stop, external);
    uint64_t zero = 0, result = 1234;
    ex_monoid m = { 8, &zero, algo_stop_combine, &c };
    ex_sender *s = ex_reduce(a->sch, &m, in, n, &result);
    pthread_t th;
    if (external) cr_assert_eq(pthread_create(&th, NULL, algo_stopper_main, &c), 0);
    as_run(a, s, &r);
    if (external) pthread_join(th, NULL);
    cr_assert_eq(atomic_load(&c.timed_out), 0);
    cr_assert_eq(atomic_load(&r.stops), 1, "%s: values %d errors %d", a->name, atomic_load(&r.values),
                 atomic_load(&r.errors));
    cr_assert_eq(result, 1234u, "%s: a stopped reduction wrote its result", a->name);
    cr_assert_lt(atomic_load(&c.calls), (long)n, "%s: every element was combined although stopped", a->name);
    ex_sender_release(s);
    free(in);
}

Test(algo_reduce, stop_requested_during_a_reduction_completes_stopped) {
    for_each_kind(AS_INLINE, AS_POOL4, stop_requested_during_a_reduction_completes_stopped_on);
}

/* ===================================================== completion thread */

static void completes_on_a_pool_worker_on(algo_sched *a) {
    static const size_t sizes[] = { 0, 2, 16384, 6 * 16384 + 3 };
    for (size_t j = 0; j < 4; j++) {
        size_t n = sizes[j];
        int64_t *in = xmalloc(n * 8);
        fill_i64(in, n, 37);
        uint64_t zero = 0, result;
        ex_monoid m = { 8, &zero, sum_combine, NULL };
        ex_sender *s[3] = { ex_reduce_i64(a->sch, in, n, 0), ex_reduce_f64(a->sch, (const double *)in, n, 0),
                            ex_reduce(a->sch, &m, in, n, &result) };
        for (int b = 0; b < 3; b++) {
            arec r;
            as_run_plain(a, s[b], &r);
            algo_expect_value(&r, 1, a->name);
            cr_assert_geq(r.worker, 0, "%s builder %d n=%zu: not on a worker", a->name, b, n);
            ex_sender_release(s[b]);
        }
        cr_assert_eq((int64_t)result, ref_sum_i64(in, n, 0));
        free(in);
    }
}

Test(algo_reduce, completes_on_a_pool_worker) {
    for_each_kind(AS_POOL1, AS_POOL4, completes_on_a_pool_worker_on);
}

/* ======================================================= argument errors */

static int64_t arr[64];

Test(algo_reduce, bad_arguments_give_einval_naming_the_builder) {
    ex_scheduler bad = { NULL, NULL };
    ex_scheduler sch = ex_inline_scheduler();
    algo_expect_einval(ex_reduce_f64(bad, (double *)arr, 4, 0), "ex_reduce_f64", "invalid scheduler");
    algo_expect_einval(ex_reduce_f64(sch, NULL, 4, 0), "ex_reduce_f64", "NULL in");
    algo_expect_einval(ex_reduce_f64(sch, (double *)arr, SIZE_MAX / 8 + 1, 0), "ex_reduce_f64", "overflow");
    algo_expect_einval(ex_reduce_i64(bad, arr, 4, 0), "ex_reduce_i64", "invalid scheduler");
    algo_expect_einval(ex_reduce_i64(sch, NULL, 1, 0), "ex_reduce_i64", "NULL in");
    algo_expect_einval(ex_reduce_i64(sch, arr, SIZE_MAX / 4, 0), "ex_reduce_i64", "overflow");
    uint64_t zero = 0, result;
    static unsigned char big[EX_MONOID_MAX_SIZE + 1];
    ex_monoid good = { 8, &zero, sum_combine, NULL };
    ex_monoid bads[4] = { { 8, &zero, NULL, NULL },
                          { 8, NULL, sum_combine, NULL },
                          { 0, &zero, sum_combine, NULL },
                          { EX_MONOID_MAX_SIZE + 1, big, sum_combine, NULL } };
    algo_expect_einval(ex_reduce(bad, &good, arr, 4, &result), "ex_reduce", "invalid scheduler");
    algo_expect_einval(ex_reduce(sch, NULL, arr, 4, &result), "ex_reduce", "NULL monoid");
    for (int b = 0; b < 4; b++) algo_expect_einval(ex_reduce(sch, &bads[b], arr, 4, &result), "ex_reduce", "bad monoid");
    algo_expect_einval(ex_reduce(sch, &good, NULL, 4, &result), "ex_reduce", "NULL in");
    algo_expect_einval(ex_reduce(sch, &good, arr, 4, NULL), "ex_reduce", "NULL result");
    algo_expect_einval(ex_reduce(sch, &good, arr, SIZE_MAX / 8 + 1, &result), "ex_reduce", "overflow");
    /* NULL input with n == 0 is fine */
    ex_sender *s = ex_reduce_i64(sch, NULL, 0, 5);
    cr_assert_eq(ex_sender_status(s).code, 0);
    ex_sender_release(s);
    s = ex_reduce(sch, &good, NULL, 0, &result);
    cr_assert_eq(ex_sender_status(s).code, 0);
    ex_sender_release(s);
    expect_no_leaks();
}

/* ==================================================== multi-shot, shutdown */

static void sender_is_multi_shot_on(algo_sched *a) {
    size_t n = 5 * ALGO_TILE + 5;
    int64_t *in = xmalloc(n * 8);
    fill_i64(in, n, 41);
    int64_t want = ref_sum_i64(in, n, 9);
    ex_sender *s = ex_reduce_i64(a->sch, in, n, 9);
    expect_concurrent_runs_int(a, s, 4, want);
    for (int k = 0; k < 3; k++) {
        arec rr;
        as_run_plain(a, s, &rr);
        cr_assert_eq(rr.v[0].as.i, want);
    }
    ex_sender_release(s);
    free(in);
}

Test(algo_reduce, sender_is_multi_shot) { with_scheduler(AS_POOL2, sender_is_multi_shot_on); }

Test(algo_reduce, pool_shut_down_completes_with_eshutdown_or_stopped) {
    size_t n = 8 * ALGO_TILE + 1;
    int64_t *in = xmalloc(n * 8);
    fill_i64(in, n, 43);
    int64_t want = ref_sum_i64(in, n, 0);
    for (unsigned threads = 1; threads <= 4; threads *= 2) {
        /* shut down before start */
        ex_pool *p = algo_pool_new(threads);
        ex_sender *s = ex_reduce_i64(ex_pool_scheduler(p), in, n, 0);
        cr_assert_eq(ex_pool_shutdown(p).code, 0);
        expect_run_after_shutdown(p, s, "reduce");
        ex_sender_release(s);
        test_pool_free(p);

        /* shut down while it runs */
        p = algo_pool_new(threads);
        s = ex_reduce_i64(ex_pool_scheduler(p), in, n, 0);
        arec r;
        ex_operation *op = start_then_shut_down(p, s, &r, "reduce");
        if (atomic_load(&r.values)) cr_assert_eq(r.v[0].as.i, want);
        ex_operation_free(op);
        ex_sender_release(s);
        test_pool_free(p);
    }
    free(in);
    expect_no_leaks();
}
