/* SPDX-License-Identifier: MIT */
/* algo_loops, for_each_index: ex_for_each_index (cexec/algorithms.h) on
 * every kind of scheduler: every index is visited exactly once, in ranges
 * of the grain; the first error of the function is the result and stops
 * further ranges; stop requests; completion on the scheduler's agents;
 * argument checks; no allocation per run (also of ex_transform_f64).  The
 * algo_loops suite spans for_each.c and transform.c; its TestSuite
 * (timeout) is declared here once.  No timing assertions. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "algorithms/local_fixtures.h"

TEST_SUITE(algo_loops, 120);

/* ========================================================= for_each_index */

typedef struct fe_ctx {
    size_t n, grain;
    ex_pool *pool;
    const void *expect_thread;     /* every range on this thread, if set */
    const void *avoid_thread;      /* no range on this thread, if set */
    atomic_uchar *hits;
    atomic_long ranges, indices;
    atomic_int bad_range, off_pool, wrong_thread, twice;
    size_t fail_at;                /* the range containing it fails (SIZE_MAX: never) */
    ex_error fail_err;
    size_t stop_at;                /* the range containing it requests stop */
    ex_stop_source *stop;
} fe_ctx;

static void fe_init(fe_ctx *c, size_t n, size_t grain, ex_pool *p) {
    memset(c, 0, sizeof *c);
    c->n = n;
    c->grain = grain;
    c->pool = p;
    c->hits = xmalloc(n ? n : 1);
    for (size_t i = 0; i < n; i++) atomic_init(&c->hits[i], 0);
    c->fail_at = c->stop_at = SIZE_MAX;
}

static void fe_fini(fe_ctx *c) { free((void *)c->hits); }

static ex_error fe_fn(void *ctx, size_t begin, size_t end) {
    fe_ctx *c = ctx;
    atomic_fetch_add(&c->ranges, 1);
    if (begin >= end || end > c->n) {
        atomic_store(&c->bad_range, 1);
        return ex_ok();
    }
    if (c->grain && (begin % c->grain != 0 || (end - begin != c->grain && end != c->n)))
        atomic_store(&c->bad_range, 1);
    if (c->pool && ex_pool_current_worker(c->pool) < 0) atomic_store(&c->off_pool, 1);
    if (c->expect_thread && test_thread_id() != c->expect_thread) atomic_store(&c->wrong_thread, 1);
    if (c->avoid_thread && test_thread_id() == c->avoid_thread) atomic_store(&c->wrong_thread, 1);
    for (size_t i = begin; i < end; i++)
        if (atomic_fetch_add_explicit(&c->hits[i], 1, memory_order_relaxed)) atomic_store(&c->twice, 1);
    atomic_fetch_add(&c->indices, (long)(end - begin));
    if (c->stop_at >= begin && c->stop_at < end) ex_stop_source_request_stop(c->stop);
    if (c->fail_at >= begin && c->fail_at < end) return c->fail_err;
    return ex_ok();
}

static void fe_expect_each_once(fe_ctx *c, const char *what) {
    cr_assert_eq(atomic_load(&c->bad_range), 0, "%s n=%zu grain %zu: a range was empty, past n or not of the grain",
                 what, c->n, c->grain);
    cr_assert_eq(atomic_load(&c->twice), 0, "%s n=%zu grain %zu: an index was visited twice", what, c->n, c->grain);
    for (size_t i = 0; i < c->n; i++)
        cr_assert_eq(atomic_load(&c->hits[i]), 1, "%s n=%zu grain %zu: index %zu visited %d times", what, c->n, c->grain,
                     i, atomic_load(&c->hits[i]));
    cr_assert_eq(atomic_load(&c->indices), (long)c->n);
    if (c->grain)
        cr_assert_eq(atomic_load(&c->ranges), (long)((c->n + c->grain - 1) / c->grain), "%s: ranges of the grain", what);
    cr_assert_eq(atomic_load(&c->off_pool), 0, "%s: a range ran outside the pool", what);
    cr_assert_eq(atomic_load(&c->wrong_thread), 0, "%s: a range ran on the wrong thread", what);
}

static void run_fe(algo_sched *a, fe_ctx *c, arec *r) {
    ex_sender *s = ex_for_each_index(a->sch, c->n, c->grain, fe_fn, c);
    cr_assert_eq(ex_sender_status(s).code, 0, "%s: %s", a->name, ex_sender_status(s).msg ? ex_sender_status(s).msg : "");
    as_run(a, s, r);
    ex_sender_release(s);
}

static void fe_every_size(algo_sched *a) {
    for (size_t j = 0; j <= algo_nsizes; j++) {
        size_t n = j < algo_nsizes ? algo_sizes[j] : ALGO_HUGE;
        size_t grains[] = { 0, 1, 7, n / 3 + 1, n + 5 };
        for (size_t g = 0; g < sizeof grains / sizeof grains[0]; g++) {
            fe_ctx c;
            fe_init(&c, n, grains[g], a->pool);
            if (a->kind == AS_INLINE || a->kind == AS_RUN_LOOP) c.expect_thread = test_thread_id();
            if (a->kind == AS_STC) c.avoid_thread = test_thread_id();
            arec r;
            arec_init(&r, a->pool);
            run_fe(a, &c, &r);
            algo_expect_value(&r, 0, a->name);
            fe_expect_each_once(&c, a->name);
            if (grains[g] > n && n) cr_assert_eq(atomic_load(&c.ranges), 1, "a grain above n is one range");
            if (a->pool) cr_assert_geq(r.worker, 0, "%s: completes on a worker", a->name);
            fe_fini(&c);
        }
    }
}

TEST_EVERY_SCHEDULER(algo_loops, for_each_every_size_and_grain, fe_every_size)

static void for_each_default_grain_gives_several_ranges_on_a_pool_on(algo_sched *a) {
    fe_ctx c;
    fe_init(&c, 100000, 0, a->pool);
    arec r;
    arec_init(&r, a->pool);
    run_fe(a, &c, &r);
    algo_expect_value(&r, 0, a->name);
    fe_expect_each_once(&c, a->name);
    long ranges = atomic_load(&c.ranges);
    cr_assert_geq(ranges, 4, "the default grain must give every worker something (%ld ranges)", ranges);
    cr_assert_leq(ranges, 100000);
    fe_fini(&c);
}

Test(algo_loops, for_each_default_grain_gives_several_ranges_on_a_pool) {
    with_scheduler(AS_POOL4, for_each_default_grain_gives_several_ranges_on_a_pool_on);
}

static void fe_error(algo_sched *a) {
    static int payload;
    bool serial = a->kind == AS_INLINE || a->kind == AS_RUN_LOOP || a->kind == AS_STC || a->kind == AS_POOL1;
    /* an early range fails */
    fe_ctx c;
    fe_init(&c, 200000, 1, a->pool);
    c.fail_at = 10;
    c.fail_err = ex_err_data(EX_EUSER + 42, "range ten failed", &payload);
    arec r;
    arec_init(&r, a->pool);
    run_fe(a, &c, &r);
    cr_assert_eq(atomic_load(&r.errors), 1, "%s: expected set_error, values %d stops %d", a->name,
                 atomic_load(&r.values), atomic_load(&r.stops));
    cr_assert_eq(r.err.code, EX_EUSER + 42);
    cr_assert_str_eq(r.err.msg, "range ten failed");
    cr_assert_eq(r.err.data, &payload);
    cr_assert_eq(atomic_load(&c.hits[10]), 1);
    cr_assert_eq(atomic_load(&c.twice), 0);
    if (serial)
        cr_assert_eq(atomic_load(&c.ranges), 11, "%s: one agent: no range starts after the failing one (%ld ran)",
                     a->name, atomic_load(&c.ranges));
    else
        cr_assert_lt(atomic_load(&c.ranges), 200000, "%s: every range ran although range 10 failed", a->name);
    fe_fini(&c);

    /* the last range fails; an error without a message gets one */
    fe_init(&c, 1000, 7, a->pool);
    c.fail_at = 999;
    c.fail_err.code = EX_EUSER + 1;
    arec_init(&r, a->pool);
    run_fe(a, &c, &r);
    cr_assert_eq(atomic_load(&r.errors), 1, "%s", a->name);
    cr_assert_eq(r.err.code, EX_EUSER + 1);
    cr_assert_not_null(r.err.msg, "an error without a message gets one");
    cr_assert_eq(atomic_load(&c.twice), 0);
    fe_fini(&c);

    /* the first range fails */
    fe_init(&c, 5000, 3, a->pool);
    c.fail_at = 0;
    c.fail_err = ex_err(EX_EUSER + 7, "first");
    arec_init(&r, a->pool);
    run_fe(a, &c, &r);
    cr_assert_eq(atomic_load(&r.errors), 1);
    cr_assert_eq(r.err.code, EX_EUSER + 7);
    fe_fini(&c);
}

TEST_EVERY_SCHEDULER(algo_loops, for_each_error, fe_error)

/* An error from every range at once, on a pool: one of them is the result. */
static ex_error always_fail(void *ctx, size_t begin, size_t end) {
    atomic_fetch_add((atomic_long *)ctx, (long)(end - begin));
    return ex_err(EX_EUSER + (int)(begin % 5), "every range fails");
}

static void for_each_every_range_failing_completes_once_with_one_of_the_errors_on(algo_sched *a) {
    for (int rep = 0; rep < 20; rep++) {
        atomic_long ran = 0;
        ex_sender *s = ex_for_each_index(a->sch, 10000, 1, always_fail, &ran);
        arec r;
        as_run_plain(a, s, &r);
        cr_assert_eq(atomic_load(&r.errors), 1);
        cr_assert(r.err.code >= EX_EUSER && r.err.code < EX_EUSER + 5);
        cr_assert_str_eq(r.err.msg, "every range fails");
        cr_assert_lt(atomic_load(&ran), 10000);
        ex_sender_release(s);
    }
}

Test(algo_loops, for_each_every_range_failing_completes_once_with_one_of_the_errors) {
    with_scheduler(AS_POOL4, for_each_every_range_failing_completes_once_with_one_of_the_errors_on);
}

static void fe_stop(algo_sched *a) {
    bool serial = a->kind == AS_INLINE || a->kind == AS_RUN_LOOP || a->kind == AS_STC || a->kind == AS_POOL1;
    /* requested from inside the body */
    fe_ctx c;
    fe_init(&c, 100000, 1, a->pool);
    arec r;
    arec_init(&r, a->pool);
    arec_with_stop(&r);
    c.stop_at = 20;
    c.stop = &r.stop;
    run_fe(a, &c, &r);
    cr_assert_eq(atomic_load(&r.stops), 1, "%s: a stop requested in the body completes set_stopped (values %d errors %d)",
                 a->name, atomic_load(&r.values), atomic_load(&r.errors));
    cr_assert_eq(atomic_load(&c.twice), 0);
    if (serial)
        cr_assert_eq(atomic_load(&c.ranges), 21, "%s: no range starts after the stop request (%ld ran)", a->name,
                     atomic_load(&c.ranges));
    else
        cr_assert_lt(atomic_load(&c.ranges), 100000, "%s: every range ran although stopped", a->name);
    fe_fini(&c);

    /* requested before start: nothing runs */
    static const size_t sizes[] = { 0, 1, 1000 };
    for (int j = 0; j < 3; j++) {
        fe_init(&c, sizes[j], 0, a->pool);
        arec_init(&r, a->pool);
        arec_with_stop(&r);
        ex_stop_source_request_stop(&r.stop);
        run_fe(a, &c, &r);
        cr_assert_eq(atomic_load(&r.stops), 1, "%s n=%zu: stopped before start", a->name, sizes[j]);
        cr_assert_eq(atomic_load(&c.ranges), 0, "%s: a range ran although stop was requested before start", a->name);
        fe_fini(&c);
    }
}

TEST_EVERY_SCHEDULER(algo_loops, for_each_stop, fe_stop)

/* Range 0 blocks (bounded) until another thread requested stop: the
 * common stop-during-a-run combine, met with its mark in range 0. */
static ex_error ext_body(void *ctx, size_t begin, size_t end) {
    (void)end;
    uint64_t acc = 0, x = begin == 0 ? ALGO_STOP_MARK : 0;
    algo_stop_combine(ctx, &acc, &x);
    return ex_ok();
}

static void for_each_stop_from_another_thread_on_a_pool_on(algo_sched *a) {
    arec r;
    arec_init(&r, a->pool);
    arec_with_stop(&r);
    algo_stop_ctx e;
    algo_stop_ctx_init(&e, &r.stop, true);
    /* The other workers may run many short ranges while range 0 blocks,
     * but not a million of them before the stop request. */
    ex_sender *s = ex_for_each_index(a->sch, 1000000, 1, ext_body, &e);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, algo_stopper_main, &e), 0);
    as_run(a, s, &r);
    pthread_join(th, NULL);
    cr_assert_eq(atomic_load(&e.timed_out), 0);
    cr_assert_eq(atomic_load(&r.stops), 1, "%s: values %d errors %d", a->name, atomic_load(&r.values),
                 atomic_load(&r.errors));
    cr_assert_geq(r.worker, 0);
    ex_sender_release(s);
}

Test(algo_loops, for_each_stop_from_another_thread_on_a_pool) {
    for_each_kind(AS_POOL1, AS_POOL4, for_each_stop_from_another_thread_on_a_pool_on);
}

/* A body that runs a reduction on the same pool and waits for it (the wait
 * runs the pool's work instead of blocking the worker). */
typedef struct nest_ctx {
    ex_pool *pool;
    const int64_t *data;
    size_t len;
    int64_t want;
    atomic_int bad;
} nest_ctx;

static ex_error nest_body(void *ctx, size_t begin, size_t end) {
    nest_ctx *c = ctx;
    for (size_t i = begin; i < end; i++) {
        ex_result r = ex_sync_wait(ex_reduce_i64(ex_pool_scheduler(c->pool), c->data, c->len, (int64_t)i));
        if (r.disposition != EX_DISP_VALUE || r.values[0].as.i != (int64_t)((uint64_t)c->want + i))
            atomic_store(&c->bad, 1);
        ex_result_destroy(&r);
    }
    return ex_ok();
}

static void for_each_body_can_wait_for_a_reduction_on_the_same_pool_on(algo_sched *a) {
    nest_ctx c = { .pool = a->pool, .len = 3 * ALGO_TILE + 1 };
    int64_t *data = xmalloc(c.len * 8);
    fill_i64(data, c.len, 5);
    c.data = data;
    c.want = ref_sum_i64(data, c.len, 0);
    ex_sender *s = ex_for_each_index(a->sch, 24, 1, nest_body, &c);
    arec r;
    as_run_plain(a, s, &r);
    algo_expect_value(&r, 0, a->name);
    cr_assert_eq(atomic_load(&c.bad), 0, "%s: a nested reduction gave a wrong result", a->name);
    ex_sender_release(s);
    free(data);
}

Test(algo_loops, for_each_body_can_wait_for_a_reduction_on_the_same_pool) {
    for_each_kind(AS_POOL1, AS_POOL4, for_each_body_can_wait_for_a_reduction_on_the_same_pool_on);
}

static void for_each_sender_is_multi_shot_on(algo_sched *a) {
    fe_ctx c;
    fe_init(&c, 3000, 10, a->pool);
    ex_sender *s = ex_for_each_index(a->sch, 3000, 10, fe_fn, &c);
    for (int rep = 0; rep < 3; rep++) {
        arec r;
        as_run_plain(a, s, &r);
        algo_expect_value(&r, 0, "reuse");
        cr_assert_eq(atomic_load(&c.indices), 3000L * (rep + 1));
    }
    for (size_t i = 0; i < 3000; i++) cr_assert_eq(atomic_load(&c.hits[i]), 3);
    ex_sender_release(s);
    fe_fini(&c);
}

Test(algo_loops, for_each_sender_is_multi_shot) { with_scheduler(AS_POOL2, for_each_sender_is_multi_shot_on); }

static ex_error nop_body(void *ctx, size_t b, size_t e) {
    (void)b, (void)e;
    atomic_fetch_add((atomic_long *)ctx, 1);
    return ex_ok();
}

Test(algo_loops, for_each_bad_arguments_give_einval) {
    ex_scheduler bad = { NULL, NULL };
    algo_expect_einval(ex_for_each_index(bad, 10, 0, nop_body, NULL), "ex_for_each_index", "invalid scheduler");
    algo_expect_einval(ex_for_each_index(ex_inline_scheduler(), 10, 0, NULL, NULL), "ex_for_each_index", "NULL fn");
    algo_expect_einval(ex_for_each_index(ex_inline_scheduler(), 0, 1, NULL, NULL), "ex_for_each_index", "NULL fn, n 0");
    expect_no_leaks();
}

/* for_each and transform allocate nothing per run. */
static double twice_plus_one(void *ctx, double x) {
    (void)ctx;
    return 2 * x + 1;
}

static void loops_allocate_nothing(algo_sched *a) {
    size_t n = 50000;
    double *in = xmalloc(n * 8), *out = xmalloc(n * 8);
    fill_f64_int(in, n, 3);
    atomic_long calls = 0;
    ex_sender *s[2] = { ex_for_each_index(a->sch, n, 0, nop_body, &calls),
                        ex_transform_f64(a->sch, in, out, n, twice_plus_one, NULL) };
    for (int b = 0; b < 2; b++) {
        expect_runs_allocate_nothing(a, s[b], 0, NULL, NULL);
        ex_sender_release(s[b]);
    }
    for (size_t i = 0; i < n; i++) cr_assert(out[i] == 2 * in[i] + 1);
    free(in), free(out);
}

Test(algo_loops, for_each_and_transform_allocate_nothing_per_run_inline) {
    with_scheduler(AS_INLINE, loops_allocate_nothing);
}
Test(algo_loops, for_each_and_transform_allocate_nothing_per_run_pool4) {
    with_scheduler(AS_POOL4, loops_allocate_nothing);
}

/* Building can run out of memory: EX_ENOMEM, or the exact result. */
typedef struct loops_oom {
    algo_sched *a;
    const double *in;
    double *out;
    size_t n;
    bool for_each;
} loops_oom;

static int loops_oom_run(void *ctx, long k) {
    loops_oom *c = ctx;
    fe_ctx fe;
    fe_init(&fe, c->n, 0, c->a->pool);
    ex_result r = ex_sync_wait(c->for_each ? ex_for_each_index(c->a->sch, c->n, 0, fe_fn, &fe)
                                           : ex_transform_f64(c->a->sch, c->in, c->out, c->n, twice_plus_one, NULL));
    int code = r.disposition == EX_DISP_ERROR ? r.error.code : 0;
    if (!code) {
        cr_assert_eq(r.disposition, EX_DISP_VALUE);
        if (c->for_each) fe_expect_each_once(&fe, "oom sweep");
        else
            for (size_t i = 0; i < c->n; i++) cr_assert(c->out[i] == 2 * c->in[i] + 1, "k=%ld: out[%zu]", k, i);
    }
    ex_result_destroy(&r);
    fe_fini(&fe);
    return code;
}

static void oom_sweep_on(algo_sched *a) {
    size_t n = 20000;
    double *in = xmalloc(n * 8), *out = xmalloc(n * 8);
    fill_f64_int(in, n, 77);
    loops_oom c = { a, in, out, n, false };
    algo_oom_sweep(loops_oom_run, &c, 100, "ex_transform_f64");
    c.for_each = true;
    algo_oom_sweep(loops_oom_run, &c, 100, "ex_for_each_index");
    free(in), free(out);
}

Test(algo_loops, oom_sweep) { with_scheduler(AS_POOL2, oom_sweep_on); }

Test(algo_loops, for_each_on_a_shut_down_pool_completes_with_eshutdown_or_stopped) {
    for (unsigned threads = 1; threads <= 4; threads *= 2) {
        ex_pool *p = algo_pool_new(threads);
        atomic_long calls = 0;
        ex_sender *s = ex_for_each_index(ex_pool_scheduler(p), 100000, 0, nop_body, &calls);
        cr_assert_eq(ex_pool_shutdown(p).code, 0);
        expect_run_after_shutdown(p, s, "for_each after shutdown");
        cr_assert_eq(atomic_load(&calls), 0);

        /* shut down while ranges run */
        ex_pool *q = algo_pool_new(threads);
        ex_sender *s2 = ex_for_each_index(ex_pool_scheduler(q), 1000000, 1, nop_body, &calls);
        arec r;
        ex_operation_free(start_then_shut_down(q, s2, &r, "for_each"));
        ex_sender_release(s2);
        test_pool_free(q);
        ex_sender_release(s);
        test_pool_free(p);
    }
    expect_no_leaks();
}

typedef struct span_ctx {
    size_t n, covered, next;
    long calls, bad, out_of_order;
    size_t bad_begin, bad_end;
} span_ctx;

static ex_error span_fn(void *ctx, size_t begin, size_t end) {
    span_ctx *c = ctx;
    c->calls++;
    if (begin >= end || end > c->n) {
        if (!c->bad) c->bad_begin = begin, c->bad_end = end;
        c->bad++;
        return ex_ok();
    }
    if (begin != c->next) c->out_of_order++;
    c->next = end;
    c->covered += end - begin;
    return ex_ok();
}

Test(algo_loops, for_each_index_near_size_max_gives_ranges_inside_n) {
    static const size_t grains[] = { 0, ((size_t)1 << 63) + 1, SIZE_MAX / 3 };
    for (size_t j = 0; j < sizeof grains / sizeof grains[0]; j++) {
        span_ctx c = { .n = SIZE_MAX };
        ex_sender *s = ex_for_each_index(ex_inline_scheduler(), SIZE_MAX, grains[j], span_fn, &c);
        cr_assert_eq(ex_sender_status(s).code, 0);
        ex_result r = ex_sync_wait(s);
        cr_assert_eq(r.disposition, EX_DISP_VALUE);
        cr_expect_eq(c.bad, 0, "grain %zu: %ld range(s) outside [0, SIZE_MAX), first [%zu, %zu)", grains[j], c.bad,
                     c.bad_begin, c.bad_end);
        cr_expect_eq(c.out_of_order, 0);
        cr_expect_eq(c.covered, (size_t)SIZE_MAX, "grain %zu: the ranges cover %zu of SIZE_MAX indices", grains[j],
                     c.covered);
    }
    expect_no_leaks();
}

/* Every worker of a pool takes part: range 0 waits until a range ran on
 * another worker. */
typedef struct par_ctx {
    ex_pool *pool;
    atomic_uint workers;
    atomic_int timed_out;
} par_ctx;

static ex_error par_body(void *ctx, size_t begin, size_t end) {
    (void)end;
    par_ctx *c = ctx;
    int w = ex_pool_current_worker(c->pool);
    unsigned me = w >= 0 ? 1u << w : 0;
    atomic_fetch_or(&c->workers, me);
    if (begin == 0) {
        double stop_at = test_now_s() + 10;
        while (!(atomic_load(&c->workers) & ~me) && test_now_s() < stop_at) sched_yield();
        if (!(atomic_load(&c->workers) & ~me)) atomic_store(&c->timed_out, 1);
    }
    return ex_ok();
}

static void for_each_runs_on_several_workers_of_a_pool_on(algo_sched *a) {
    par_ctx c = { .pool = a->pool };
    ex_sender *s = ex_for_each_index(a->sch, 256, 1, par_body, &c);
    arec r;
    as_run_plain(a, s, &r);
    algo_expect_value(&r, 0, a->name);
    cr_assert_eq(atomic_load(&c.timed_out), 0, "%s: no other worker ran a range while range 0 waited", a->name);
    cr_assert_geq(__builtin_popcount(atomic_load(&c.workers)), 2);
    ex_sender_release(s);
}

Test(algo_loops, for_each_runs_on_several_workers_of_a_pool) {
    for_each_kind(AS_POOL2, AS_POOL4, for_each_runs_on_several_workers_of_a_pool_on);
}
