/* SPDX-License-Identifier: MIT */
/* [exec.bulk] on a pool: the pool's parallel customisation (dynamic
 * chunks, first error / stop request skip what has not started, helper
 * items beyond EX_BULK_INLINE_HELPERS from the environment's allocator),
 * the environment-scheduler path, allocation failures.
 *
 * Nothing here asserts on timing: spins only make a body long, and every
 * wait for asynchronous work is bounded so a lost completion fails with a
 * message. */
#include <stdlib.h>
#include <string.h>

#include "compose/compose_fixtures.h"

static int popcount_u(unsigned m) { return __builtin_popcount(m); }


/* ------------------------------------- what ran after the bulk (a then) */

typedef struct after {
    ex_pool *pool;
    int calls;
    int worker;
    size_t n;
    ex_value v[EX_MAX_ARITY];
    int64_t tuple_sum;        /* sum of the int elements of a tuple v[0] */
    uint32_t tuple_n;
} after;

static ex_error after_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    after *a = ctx;
    a->calls++;
    a->worker = ex_pool_current_worker(a->pool);
    a->n = n;
    for (size_t i = 0; i < n && i < EX_MAX_ARITY; i++) a->v[i] = in[i];
    if (n >= 1 && in[0].type == EX_T_TUPLE) {
        const ex_tuple *t = in[0].as.tuple;
        a->tuple_n = t->n;
        for (uint32_t k = 0; k < t->n; k++)
            if (t->v[k].type == EX_T_INT) a->tuple_sum += t->v[k].as.i;
    }
    out[0] = ex_int(a->worker);
    return ex_ok();
}

static void after_init(after *a, ex_pool *p) {
    memset(a, 0, sizeof *a);
    a->pool = p;
    a->worker = -2;
}

static ex_sender *then_after(ex_sender *s, after *a) {
    return ex_then(s, after_fn, a, EX_SIG_VARIADIC, EX_SIG(EX_T_INT));
}

/* The then after the bulk ran on a pool worker with the one int v. */
static void expect_after_int(const after *a, int64_t v) {
    cr_assert_eq(a->n, 1);
    cr_assert_eq(a->v[0].as.i, v);
    cr_assert_geq(a->worker, 0, "the bulk did not complete on a pool worker");
}

/* ============================================================== on a pool */

static void run_parallel_schedule(ex_pool *p, size_t shape, size_t grain) {
    par_ctx c;
    par_init(&c, p, shape);
    after a;
    after_init(&a, p);
    ex_sender *b = grain ? ex_bulk_grain(ex_schedule(ex_pool_scheduler(p)), EX_PAR, shape, grain, par_fn, &c)
                         : ex_bulk(ex_schedule(ex_pool_scheduler(p)), EX_PAR, shape, par_fn, &c);
    ex_result r = ex_sync_wait(then_after(b, &a));
    expect_value_result(&r);
    cr_assert_eq(a.calls, 1);
    cr_assert_geq(a.worker, 0, "shape %zu grain %zu: the bulk did not complete on a pool worker", shape, grain);
    cr_assert_eq(a.n, 0);
    par_expect_each_once(&c);
    cr_assert_eq(atomic_load(&c.bad_values), 0);
    cr_assert_eq(atomic_load(&c.off_pool), 0, "indices ran outside the pool");
    ex_result_destroy(&r);
    par_fini(&c);
}

POOL_TEST(exec_bulk, pool_runs_every_index_once_large_shape, 2) {
    run_parallel_schedule(p, 100000, 0);
}

POOL_TEST(exec_bulk, pool_runs_every_index_once_small_shapes, 2) {
    static const size_t shapes[] = { 1, 2, 3, 7 };
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        run_parallel_schedule(p, shapes[k], 0);
        run_parallel_schedule(p, shapes[k], 1);
    }
}

POOL_TEST(exec_bulk, pool_shape_zero_completes_with_the_values, 2) {
    par_ctx c;
    par_init(&c, p, 0);
    after a;
    after_init(&a, p);
    ex_result r = ex_sync_wait(then_after(
        ex_bulk(ex_continues_on(ex_just(ex_int(11)), ex_pool_scheduler(p)), EX_PAR, 0, par_fn, &c), &a));
    expect_value_result(&r);
    cr_assert_eq(atomic_load(&c.calls), 0);
    expect_after_int(&a, 11);
    ex_result_destroy(&r);
    par_fini(&c);
}

POOL_TEST(exec_bulk, pool_continues_on_forwards_the_values, 2) {
    par_ctx c;
    par_init(&c, p, 5000);
    ex_value vals[3] = { ex_int(-5), ex_str("vals"), ex_double(0.25) };
    par_expect_values(&c, vals, 3);
    after a;
    after_init(&a, p);
    ex_result r = ex_sync_wait(then_after(
        ex_bulk(ex_continues_on(ex_just(vals[0], vals[1], vals[2]), ex_pool_scheduler(p)), EX_PAR, 5000, par_fn, &c), &a));
    expect_value_result(&r);
    par_expect_each_once(&c);
    cr_assert_eq(atomic_load(&c.bad_values), 0, "f did not see the child's values");
    cr_assert_eq(atomic_load(&c.off_pool), 0);
    cr_assert_eq(a.calls, 1);
    cr_assert_geq(a.worker, 0, "the completion runs on a pool worker");
    cr_assert_eq(a.n, 3, "the values are forwarded");
    cr_assert_eq(a.v[0].as.i, -5);
    cr_assert_str_eq(a.v[1].as.s, "vals");
    cr_assert_float_eq(a.v[2].as.d, 0.25, 0);
    ex_result_destroy(&r);
    par_fini(&c);
}

POOL_TEST(exec_bulk, pool_grain_one_and_grain_larger_than_shape, 2) {
    run_parallel_schedule(p, 3000, 1);
    run_parallel_schedule(p, 10, 100);
    run_parallel_schedule(p, 1000, 1000);
    run_parallel_schedule(p, 1001, 1000);
}

POOL_TEST(exec_bulk, pool_chunked_chunks_are_disjoint_and_cover_the_shape, 2) {
    static const size_t cases[][2] = { { 10000, 64 }, { 10000, 0 }, { 1, 1 }, { 7, 3 }, { 1000, 1 } };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        chunk_ctx c;
        chunk_init(&c, cases[k][0], cases[k][1]);
        after a;
        after_init(&a, p);
        ex_result r = ex_sync_wait(then_after(
            ex_bulk_chunked(ex_schedule(ex_pool_scheduler(p)), EX_PAR, cases[k][0], cases[k][1], chunk_fn, &c), &a));
        expect_value_result(&r);
        chunk_expect_cover(&c);
        if (cases[k][1])
            cr_assert_geq(atomic_load(&c.chunks), (long)((cases[k][0] + cases[k][1] - 1) / cases[k][1]),
                          "chunks are at most `grain` long");
        cr_assert_geq(a.worker, 0);
        ex_result_destroy(&r);
        free(c.hits);
    }
}

POOL_TEST(exec_bulk, pool_chunked_grain_larger_than_shape_is_one_chunk, 2) {
    chunk_ctx c;
    chunk_init(&c, 50, 0);
    ex_result r = ex_sync_wait(ex_bulk_chunked(ex_schedule(ex_pool_scheduler(p)), EX_PAR, 50, 1000, chunk_fn, &c));
    expect_value_result(&r);
    cr_assert_eq(atomic_load(&c.chunks), 1, "a grain above the shape gives one chunk");
    cr_assert_eq(atomic_load(&c.first_begin), 0);
    cr_assert_eq(atomic_load(&c.first_end), 50);
    chunk_expect_cover(&c);
    ex_result_destroy(&r);
    free(c.hits);
}

POOL_TEST(exec_bulk, pool_uneven_body_uses_both_workers, 2) {
    par_ctx c;
    par_init(&c, p, 4000);
    c.body = BODY_GROWING;  /* 2us at index 0 up to ~42us at the end: ~90ms in all */
    ex_result r = ex_sync_wait(ex_bulk(ex_schedule(ex_pool_scheduler(p)), EX_PAR, 4000, par_fn, &c));
    expect_value_result(&r);
    par_expect_each_once(&c);
    unsigned m = atomic_load(&c.workers);
    cr_assert_geq(popcount_u(m), 2, "only worker mask %#x ran indices of a long uneven bulk on a 2-thread pool", m);
    ex_result_destroy(&r);
    par_fini(&c);
}

POOL_TEST(exec_bulk, pool_one_very_slow_index_does_not_hold_back_the_rest, 2) {
    /* Index 0 blocks its agent until every index outside its own chunk has
     * run: that only finishes (before the bounded wait gives up) if the
     * remaining chunks are taken dynamically by the other worker rather than
     * split up front. */
    for (size_t grain = 1; grain <= 4; grain *= 2) {
        par_ctx c;
        par_init(&c, p, 64);
        c.body = BODY_BLOCK_FIRST;
        c.block_index = 0;
        c.block_until = (long)(64 - grain + 1);  /* index 0 itself and every other chunk */
        ex_result r = ex_sync_wait(ex_bulk_grain(ex_schedule(ex_pool_scheduler(p)), EX_PAR, 64, grain, par_fn, &c));
        expect_value_result(&r);
        cr_assert_eq(atomic_load(&c.block_timed_out), 0,
                     "grain %zu: the other chunks did not all run while index 0 was slow (%ld of 64 ran by the end)",
                     grain, atomic_load(&c.calls));
        par_expect_each_once(&c);
        cr_assert_eq(popcount_u(atomic_load(&c.workers)), 2);
        ex_result_destroy(&r);
        par_fini(&c);
    }
}

POOL_TEST(exec_bulk, pool_first_error_stops_chunks_not_yet_started, 2) {
    static int payload;
    par_ctx c;
    par_init(&c, p, 100000);
    c.fail_at = 0;
    c.fail_err = ex_err_data(EX_EUSER + 9, "index 0 failed", &payload);
    after a;
    after_init(&a, p);
    ex_result r = ex_sync_wait(then_after(ex_bulk_grain(ex_schedule(ex_pool_scheduler(p)), EX_PAR, 100000, 1, par_fn, &c), &a));
    expect_error(&r, EX_EUSER + 9);
    cr_assert_str_eq(r.error.msg, "index 0 failed");
    cr_assert_eq(r.error.data, &payload);
    cr_assert_eq(a.calls, 0, "the then after a failed bulk must not run");
    cr_assert_eq(atomic_load(&c.hits[0]), 1);
    long ran = atomic_load(&c.calls);
    cr_assert_lt(ran, 100000, "every index ran although index 0 failed");
    for (size_t i = 0; i < c.shape; i++) cr_assert_leq(atomic_load(&c.hits[i]), 1);
    par_fini(&c);
}

POOL_TEST(exec_bulk, pool_error_in_a_late_index_is_the_result, 2) {
    par_ctx c;
    par_init(&c, p, 2000);
    c.fail_at = 1999;
    c.fail_err = ex_err(EX_EUSER + 3, "last index failed");
    ex_result r = ex_sync_wait(ex_bulk(ex_schedule(ex_pool_scheduler(p)), EX_PAR, 2000, par_fn, &c));
    expect_error(&r, EX_EUSER + 3);
    cr_assert_eq(atomic_load(&c.hits[1999]), 1);
    par_fini(&c);
}

POOL_TEST(exec_bulk, pool_error_with_a_grain_is_the_result, 2) {
    par_ctx c;
    par_init(&c, p, 1000);
    c.fail_at = 0;
    c.fail_err = ex_err(EX_EUSER + 4, "grain failed");
    ex_result r = ex_sync_wait(ex_bulk_grain(ex_schedule(ex_pool_scheduler(p)), EX_PAR, 1000, 10, par_fn, &c));
    expect_error(&r, EX_EUSER + 4);
    cr_assert_str_eq(r.error.msg, "grain failed");
    for (size_t i = 0; i < c.shape; i++) cr_assert_leq(atomic_load(&c.hits[i]), 1);
    par_fini(&c);
}

/* Runs s on an arec whose stop token is stopped already (its environment
 * naming the pool as scheduler if env_sched): s completes stopped and no
 * index of c runs. */
static void expect_stopped_before_any_index(ex_pool *p, par_ctx *c, ex_sender *s, bool env_sched) {
    arec ar;
    arec_init_stoppable(&ar, p, true);
    if (env_sched) arec_with_scheduler(&ar, ex_pool_scheduler(p));
    arec_run_to_end(s, &ar);
    cr_assert_eq(atomic_load(&ar.stops), 1, "values %d errors %d", atomic_load(&ar.values), atomic_load(&ar.errors));
    cr_assert_eq(atomic_load(&c->calls), 0, "no index may run once stop was requested");
}

POOL_TEST(exec_bulk, pool_stop_requested_before_start_completes_stopped, 2) {
    par_ctx c;
    par_init(&c, p, 1000);
    /* The environment's scheduler is the pool: the bulk of just runs on it,
     * and sees the receiver's stop token already stopped. */
    expect_stopped_before_any_index(p, &c, ex_bulk(ex_just(ex_int(1)), EX_PAR, 1000, par_fn, &c), true);
    /* Child scheduled on the pool with stop already requested. */
    expect_stopped_before_any_index(p, &c, ex_bulk(ex_schedule(ex_pool_scheduler(p)), EX_PAR, 1000, par_fn, &c), false);
    par_fini(&c);
}

POOL_TEST(exec_bulk, pool_stop_requested_during_the_bulk_completes_stopped, 2) {
    par_ctx c;
    par_init(&c, p, 100000);
    arec ar;
    arec_init_stoppable(&ar, p, false);
    c.stop_at = 10;
    c.stop = &ar.stop;
    ex_sender *s = ex_bulk_grain(ex_schedule(ex_pool_scheduler(p)), EX_PAR, 100000, 1, par_fn, &c);
    arec_run_to_end(s, &ar);
    cr_assert_eq(atomic_load(&ar.stops), 1, "expected set_stopped: values %d errors %d", atomic_load(&ar.values),
                 atomic_load(&ar.errors));
    cr_assert_geq(ar.worker, 0, "completes on a worker");
    long ran = atomic_load(&c.calls);
    cr_assert_geq(ran, 1);
    cr_assert_eq(atomic_load(&c.hits[10]), 1);
    cr_assert_lt(ran, 100000, "every index ran although stop was requested at index 10");
    par_fini(&c);
}

POOL_TEST(exec_bulk, pool_stop_via_write_env_in_sync_wait, 2) {
    ex_stop_source src;
    ex_stop_source_init(&src);
    par_ctx c;
    par_init(&c, p, 50000);
    c.stop_at = 3;
    c.stop = &src;
    ex_result r = ex_sync_wait(ex_write_env(ex_bulk_grain(ex_schedule(ex_pool_scheduler(p)), EX_PAR, 50000, 1, par_fn, &c),
                                            &ex_key_get_stop_token, ex_token_value(ex_stop_source_token(&src))));
    cr_assert_eq(r.disposition, EX_DISP_STOPPED, "disposition %d", r.disposition);
    cr_assert_lt(atomic_load(&c.calls), 50000);
    par_fini(&c);
}

POOL_TEST(exec_bulk, env_scheduler_path_runs_in_parallel, 2) {
    par_ctx c;
    par_init(&c, p, 64);
    c.body = BODY_WAIT_OTHER_WORKER;  /* index 0 waits until another worker ran an index */
    ex_value v = ex_int(3);
    par_expect_values(&c, &v, 1);
    after a;
    after_init(&a, p);
    ex_result r = ex_sync_wait(
        then_after(ex_starts_on(ex_pool_scheduler(p), ex_bulk(ex_just(ex_int(3)), EX_PAR, 64, par_fn, &c)), &a));
    expect_value_result(&r);
    cr_assert_eq(atomic_load(&c.block_timed_out), 0, "no second worker ran an index (worker mask %#x)",
                 atomic_load(&c.workers));
    par_expect_each_once(&c);
    cr_assert_geq(popcount_u(atomic_load(&c.workers)), 2);
    cr_assert_eq(atomic_load(&c.bad_values), 0);
    expect_after_int(&a, 3);
    ex_result_destroy(&r);
    par_fini(&c);
}

POOL_TEST(exec_bulk, env_scheduler_from_the_receiver_on_the_main_thread, 2) {
    par_ctx c;
    par_init(&c, p, 20000);
    arec ar;
    arec_init(&ar, p);
    arec_with_scheduler(&ar, ex_pool_scheduler(p));
    c.body = BODY_WAIT_OTHER_WORKER;  /* index 0 waits until a pool worker ran an index */
    ex_sender *s = ex_bulk(ex_just(ex_int(8)), EX_PAR, 20000, par_fn, &c);
    ex_value v = ex_int(8);
    par_expect_values(&c, &v, 1);
    ex_operation *op = arec_run_start(s, &ar);
    arec_wait_done(&ar);
    cr_assert_eq(atomic_load(&ar.values), 1);
    cr_assert_eq(ar.n, 1);
    cr_assert_eq(ar.v[0].as.i, 8);
    par_expect_each_once(&c);
    cr_assert_eq(atomic_load(&c.bad_values), 0);
    cr_assert_eq(atomic_load(&c.block_timed_out), 0, "no pool worker took part in the bulk");
    cr_assert_gt(atomic_load(&c.workers), 0u, "the pool's workers took part");
    ex_operation_free(op);
    ex_sender_release(s);
    par_fini(&c);
}

POOL_TEST(exec_bulk, pool_with_more_helpers_than_inline_allocates_them, 6) {  /* 5 helpers > EX_BULK_INLINE_HELPERS */
    par_ctx c;
    par_init(&c, p, 100000);
    ex_sender *s = ex_bulk(ex_schedule(ex_pool_scheduler(p)), EX_PAR, 100000, par_fn, &c);
    long before = test_alloc_count();
    ex_result r = ex_sync_wait(s);
    long during = test_alloc_count() - before;
    expect_value_result(&r);
    par_expect_each_once(&c);
    cr_assert_geq(during, 1, "the helper array was not allocated from the environment's allocator");
    ex_result_destroy(&r);
    par_fini(&c);

    /* Several runs back to back: nothing accumulates. */
    for (int k = 0; k < 20; k++) {
        par_init(&c, p, 5000);
        r = ex_sync_wait(ex_bulk_grain(ex_schedule(ex_pool_scheduler(p)), EX_PAR, 5000, 7, par_fn, &c));
        expect_value_result(&r);
        par_expect_each_once(&c);
        par_fini(&c);
    }
}

POOL_TEST(exec_bulk, pool_helper_allocation_failure_still_completes, 6) {
    /* Count the allocations a run makes, then fail each in turn: the run
     * must still complete correctly (the helper array failing means fewer
     * helpers, never a different result). */
    par_ctx c;
    par_init(&c, p, 50000);
    ex_sender *s = ex_bulk(ex_schedule(ex_pool_scheduler(p)), EX_PAR, 50000, par_fn, &c);
    long before = test_alloc_count();
    ex_result r = ex_sync_wait(ex_sender_retain(s));
    long during = test_alloc_count() - before;
    expect_value_result(&r);
    par_expect_each_once(&c);
    par_fini(&c);
    cr_assert_geq(during, 1, "a 6-thread pool bulk allocates its helper array");
    long base_in_use = test_stats.in_use;  /* the pool and the sender */
    for (long k = 1; k <= during; k++) {
        par_init(&c, p, 50000);
        long failed_before = test_stats.failed;
        test_alloc_fail_at(k);
        r = ex_sync_wait(ex_sender_retain(s));
        test_alloc_fail_at(0);
        cr_assert_eq(test_stats.failed, failed_before + 1, "allocation %ld of the run was not made", k);
        expect_value_result(&r);
        par_expect_each_once(&c);
        cr_assert_eq(atomic_load(&c.off_pool), 0);
        par_fini(&c);
        cr_assert_eq(test_stats.in_use, base_in_use, "fail at %ld: %ld block(s) leaked", k,
                     test_stats.in_use - base_in_use);
    }
    ex_sender_release(s);
}

POOL_TEST(exec_bulk, pool_stores_tuple_values_for_the_parallel_run, 2) {
    ex_value src[3] = { ex_int(10), ex_int(20), ex_int(12) };
    ex_value want[3] = { ex_int(10), ex_int(20), ex_int(12) };
    ex_tuple ts = { 2, 3, src }, tw = { 2, 3, want };
    par_ctx c;
    par_init(&c, p, 3000);
    ex_value expect[2] = { ex_tuple_value(&tw), ex_int(5) };
    par_expect_values(&c, expect, 2);
    after a;
    after_init(&a, p);
    ex_sender *s = then_after(
        ex_bulk(ex_continues_on(ex_just(ex_tuple_value(&ts), ex_int(5)), ex_pool_scheduler(p)), EX_PAR, 3000, par_fn, &c), &a);
    src[0] = ex_int(-1);  /* the sender owns a deep copy */
    ex_result r = ex_sync_wait(s);
    expect_value_result(&r);
    par_expect_each_once(&c);
    cr_assert_eq(atomic_load(&c.bad_values), 0, "f did not see the tuple");
    cr_assert_eq(a.n, 2);
    cr_assert_eq(a.tuple_n, 3);
    cr_assert_eq(a.tuple_sum, 42);
    cr_assert_eq(a.v[1].as.i, 5);
    cr_assert_geq(a.worker, 0);
    ex_result_destroy(&r);
    par_fini(&c);
}

static void oom_sweep(unsigned threads) {
    ex_pool *p = test_pool_new(threads);
    ex_value inner[2] = { ex_int(40), ex_int(2) };
    ex_tuple t = { 0, 2, inner };
    bool clean_run = false;
    int nomem = 0;
    long base_in_use = test_stats.in_use;  /* the pool */
    for (long k = 1; k <= 200 && !clean_run; k++) {
        par_ctx c;
        par_init(&c, p, 2000);
        after a;
        after_init(&a, p);
        long failed_before = test_stats.failed;
        test_alloc_fail_at(k);
        ex_sender *s = then_after(
            ex_bulk(ex_continues_on(ex_just(ex_tuple_value(&t), ex_str("x")), ex_pool_scheduler(p)), EX_PAR, 2000, par_fn, &c),
            &a);
        ex_result r = ex_sync_wait(s);
        bool failed = test_stats.failed != failed_before;
        test_alloc_fail_at(0);
        if (r.disposition == EX_DISP_ERROR) {
            cr_assert_eq(r.error.code, EX_ENOMEM, "fail at %ld: error %d (%s)", k, r.error.code,
                         r.error.msg ? r.error.msg : "");
            cr_assert(failed, "fail at %ld: ENOMEM without a failed allocation", k);
            cr_assert_not_null(r.error.msg);
            nomem++;
        } else {
            cr_assert_eq(r.disposition, EX_DISP_VALUE, "fail at %ld: disposition %d", k, r.disposition);
            par_expect_each_once(&c);
            cr_assert_eq(a.n, 2);
            cr_assert_eq(a.tuple_sum, 42);
            cr_assert_str_eq(a.v[1].as.s, "x");
            clean_run = !failed;
        }
        ex_result_destroy(&r);
        par_fini(&c);
        cr_assert_eq(test_stats.in_use, base_in_use, "fail at %ld: %ld block(s) leaked", k,
                     test_stats.in_use - base_in_use);
    }
    cr_assert(clean_run, "the sweep never reached a run without an injected failure");
    cr_assert_gt(nomem, 0, "no injected failure gave EX_ENOMEM");
    test_pool_free(p);
}

Test(exec_bulk, oom_sweep_over_a_pool_bulk_pipeline) {
    oom_sweep(2);
    expect_no_leaks();
}

Test(exec_bulk, oom_sweep_with_allocated_helpers) {
    oom_sweep(6);
    expect_no_leaks();
}

/* ------------------------------------------- wake-ups (lazy, by cost) */

/* Runs `runs` bulks of `shape` indices from main, lent to a pool whose
 * workers are parked, and returns the wake-ups counted once the workers
 * are joined (exact: shutdown's own wake-up claims no idle bit).  Every
 * index runs once; a parked worker runs none unless one was woken. */
static uint64_t wakes_of_small_bulks(size_t shape, int runs) {
    ex_pool *p = test_pool_parked(2, 0);
    uint64_t woken0 = test_pool_workers_woken(p);
    unsigned worker_mask = 0;
    for (int k = 0; k < runs; k++) {
        par_ctx c;
        par_init(&c, p, shape);
        ex_result r = ex_sync_wait(ex_bulk(ex_schedule(ex_pool_scheduler(p)), EX_PAR, shape, par_fn, &c));
        expect_value_result(&r);
        par_expect_each_once(&c);
        worker_mask |= (unsigned)atomic_load(&c.workers) & ~(~0u << ex_pool_size(p));
        ex_result_destroy(&r);
        par_fini(&c);
    }
    cr_assert_eq(ex_pool_shutdown(p).code, 0);
    uint64_t wakes = test_pool_workers_woken(p) - woken0;
    cr_assert(wakes > 0 || worker_mask == 0, "no worker was woken, yet workers %#x ran indices", worker_mask);
    test_pool_free(p);
    expect_no_leaks();
    return wakes;
}

/* One chunk: nothing to share, never a wake-up. */
Test(exec_bulk, a_one_index_bulk_from_a_lent_caller_wakes_nobody) {
    cr_assert_eq(wakes_of_small_bulks(1, 10), 0u);
}

/* shape = workers: the helper goes quietly to the caller's deque, and a
 * parked worker is woken only when the caller's first chunk says the rest
 * is worth it.  With an empty body it is not, on a plain build; under
 * valgrind even an empty chunk can take longer than a wake-up, so the
 * count of wake-ups is not asserted (that would be a timing assertion):
 * wakes_of_small_bulks checks what holds either way. */
Test(exec_bulk, small_bulk_from_a_lent_caller_runs_where_the_wakes_allow) {
    uint64_t wakes = wakes_of_small_bulks(2, 10);
    cr_assert_leq(wakes, 10u, "more wake-ups than bulks: %llu", (unsigned long long)wakes);
}

static ex_error slow_index(void *ctx, size_t i, const ex_value *v, size_t n) {
    (void)i, (void)v, (void)n;
    double end = test_now_s() + 0.002;
    while (test_now_s() < end) {}
    atomic_fetch_add((atomic_int *)ctx, 1);
    return ex_ok();
}

Test(exec_bulk, long_bulk_from_a_lent_caller_wakes_a_parked_worker) {
    ex_pool *p = test_pool_parked(2, 0);
    uint64_t woken0 = test_pool_workers_woken(p);
    atomic_int calls = 0;
    /* 8 chunks of 2 ms: after the first, the rest is worth a wake-up. */
    ex_result r = ex_sync_wait(ex_bulk(ex_schedule(ex_pool_scheduler(p)), EX_PAR, 8, slow_index, &calls));
    expect_value_result(&r);
    cr_assert_eq(atomic_load(&calls), 8);
    double end = test_now_s() + TEST_WAIT_LIMIT_S;
    while (test_pool_workers_woken(p) == woken0 && test_now_s() < end) test_sleep_ms(1);
    cr_assert_gt(test_pool_workers_woken(p), woken0, "16 ms of chunks woke no parked worker");
    ex_result_destroy(&r);
    test_pool_free(p);
    expect_no_leaks();
}
