/* SPDX-License-Identifier: MIT */
/* [exec.bulk] with P3481's execution policies, and bulk_unchunked: what
 * each policy lets the pool do (EX_SEQ / EX_UNSEQ: one thread, index
 * order, no helper; EX_PAR / EX_PAR_UNSEQ: every index once, on several
 * workers), bulk_unchunked's one call per index, its errors, stop,
 * allocation failures, bad input, and the concurrent-progress rule.
 *
 * No timing assertions: a wait for another worker is bounded and fails
 * with a message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/owned_errors.h"
#include "compose/compose_fixtures.h"

static const ex_execution_policy sequenced[] = { EX_SEQ, EX_UNSEQ };
static const ex_execution_policy parallel[] = { EX_PAR, EX_PAR_UNSEQ };

/* ------------------------------------------------ the order of the calls */

/* Records each call in the order the calls began, and whether one began
 * while another was running (an overlap breaks EX_SEQ whatever the
 * timing: it is never asserted absent for EX_PAR). */
typedef struct order_rec {
    size_t shape;
    size_t *index;              /* index (chunked: begin) of the k-th call */
    size_t *end;                /* chunked: end of the k-th call */
    const void **thread;        /* thread of the k-th call */
    atomic_size_t calls;
    atomic_int inside;
    atomic_int overlaps;
    size_t fail_at, stop_at;    /* SIZE_MAX: never */
    ex_stop_source *stop;
} order_rec;

static void order_init(order_rec *o, size_t shape) {
    memset(o, 0, sizeof *o);
    o->shape = shape;
    size_t n = shape ? shape : 1;
    o->index = calloc(n, sizeof *o->index);
    o->end = calloc(n, sizeof *o->end);
    o->thread = calloc(n, sizeof *o->thread);
    cr_assert(o->index && o->end && o->thread);
    o->fail_at = SIZE_MAX;
    o->stop_at = SIZE_MAX;
}

static void order_fini(order_rec *o) {
    free(o->index);
    free(o->end);
    free(o->thread);
}

static ex_error order_note(order_rec *o, size_t begin, size_t end) {
    if (atomic_fetch_add(&o->inside, 1) != 0) atomic_fetch_add(&o->overlaps, 1);
    size_t k = atomic_fetch_add(&o->calls, 1);
    if (k < o->shape) {
        o->index[k] = begin;
        o->end[k] = end;
        o->thread[k] = test_thread_id();
    }
    for (volatile int spin = 0; spin < 50; spin++) {}  /* long enough for a second thread to overlap */
    atomic_fetch_sub(&o->inside, 1);
    if (begin <= o->stop_at && o->stop_at < end && o->stop) ex_stop_source_request_stop(o->stop);
    if (begin <= o->fail_at && o->fail_at < end) return ex_err(EX_EUSER + 11, "order_rec: failed here");
    return ex_ok();
}

static ex_error order_fn(void *ctx, size_t i, const ex_value *v, size_t n) {
    (void)v, (void)n;
    return order_note(ctx, i, i + 1);
}

static ex_error order_chunk_fn(void *ctx, size_t begin, size_t end, const ex_value *v, size_t n) {
    (void)v, (void)n;
    return order_note(ctx, begin, end);
}

/* The first `calls` calls were indices 0, 1, ... on one thread, never two
 * at once. */
static void expect_in_order_on_one_thread(order_rec *o, size_t calls, const char *what) {
    cr_assert_eq(atomic_load(&o->calls), calls, "%s: %zu calls, expected %zu", what, atomic_load(&o->calls), calls);
    cr_assert_eq(atomic_load(&o->overlaps), 0, "%s: two calls ran at once", what);
    for (size_t k = 0; k < calls; k++) {
        cr_assert_eq(o->index[k], k, "%s: call %zu was index %zu", what, k, o->index[k]);
        cr_assert_eq(o->thread[k], o->thread[0], "%s: index %zu ran on another thread than index 0", what, k);
    }
}

/* Chunked: the chunks came one at a time, in order, on one thread, and
 * cover [0, shape). */
static void expect_chunks_in_order_on_one_thread(order_rec *o, const char *what) {
    size_t calls = atomic_load(&o->calls);
    cr_assert_eq(atomic_load(&o->overlaps), 0, "%s: two chunks ran at once", what);
    size_t next = 0;
    for (size_t k = 0; k < calls; k++) {
        cr_assert_eq(o->index[k], next, "%s: chunk %zu began at %zu, expected %zu", what, k, o->index[k], next);
        cr_assert_gt(o->end[k], o->index[k], "%s: chunk %zu is empty", what, k);
        cr_assert_eq(o->thread[k], o->thread[0], "%s: chunk %zu ran on another thread", what, k);
        next = o->end[k];
    }
    cr_assert_eq(next, o->shape, "%s: the chunks end at %zu, not at the shape %zu", what, next, o->shape);
}

/* Runs s (consumed) on an arec of p to its end: one value completion, on
 * the thread that ran the calls. */
static void run_to_value_on_the_calls_thread(ex_pool *p, ex_sender *s, order_rec *o, const char *what) {
    arec ar;
    arec_init(&ar, p);
    arec_run_to_end(s, &ar);
    cr_assert_eq(atomic_load(&ar.values), 1, "%s: values %d errors %d (%s) stops %d", what, atomic_load(&ar.values),
                 atomic_load(&ar.errors), ar.err.msg ? ar.err.msg : "", atomic_load(&ar.stops));
    cr_assert_geq(ar.worker, 0, "%s: completed off the pool", what);
    if (atomic_load(&o->calls)) cr_assert_eq(ar.thread, o->thread[0], "%s: completed on another thread", what);
}

/* ========================================= EX_SEQ, EX_UNSEQ on the pool */

POOL_TEST(exec_bulk, seq_on_the_pool_runs_each_index_in_order_on_one_thread, 4) {
    static const size_t shapes[] = { 1, 2, 7, 1000, 100000 };
    for (size_t q = 0; q < 2; q++)
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
            char what[64];
            snprintf(what, sizeof what, "policy %d, shape %zu", (int)sequenced[q], shapes[k]);
            order_rec o;
            order_init(&o, shapes[k]);
            run_to_value_on_the_calls_thread(
                p, ex_bulk(ex_schedule(ex_pool_scheduler(p)), sequenced[q], shapes[k], order_fn, &o), &o, what);
            expect_in_order_on_one_thread(&o, shapes[k], what);
            order_fini(&o);
        }
}

POOL_TEST(exec_bulk, seq_on_the_pool_with_a_grain_and_from_the_environment, 4) {
    order_rec o;
    order_init(&o, 5000);
    run_to_value_on_the_calls_thread(
        p, ex_bulk_grain(ex_continues_on(ex_just(ex_int(1)), ex_pool_scheduler(p)), EX_SEQ, 5000, 3, order_fn, &o), &o,
        "grain 3");
    expect_in_order_on_one_thread(&o, 5000, "grain 3");
    order_fini(&o);

    /* The pool found through the receiver's environment (starts_on). */
    order_init(&o, 5000);
    ex_result r = ex_sync_wait(ex_starts_on(ex_pool_scheduler(p), ex_bulk(ex_just(), EX_SEQ, 5000, order_fn, &o)));
    expect_value_result(&r);
    expect_in_order_on_one_thread(&o, 5000, "starts_on");
    ex_result_destroy(&r);
    order_fini(&o);
}

POOL_TEST(exec_bulk, seq_chunked_on_the_pool_gives_chunks_in_order_on_one_thread, 4) {
    static const size_t grains[] = { 0, 1, 7, 100000 };
    for (size_t q = 0; q < 2; q++)
        for (size_t k = 0; k < sizeof grains / sizeof grains[0]; k++) {
            char what[64];
            snprintf(what, sizeof what, "policy %d, grain %zu", (int)sequenced[q], grains[k]);
            order_rec o;
            order_init(&o, 20000);
            run_to_value_on_the_calls_thread(p,
                                             ex_bulk_chunked(ex_schedule(ex_pool_scheduler(p)), sequenced[q], 20000,
                                                             grains[k], order_chunk_fn, &o),
                                             &o, what);
            expect_chunks_in_order_on_one_thread(&o, what);
            order_fini(&o);
        }
}

/* A sequenced bulk queues no helper: with every worker parked and the
 * caller lent to the pool, nothing wakes a worker, however large. */
Test(exec_bulk, seq_on_the_pool_wakes_no_worker) {
    ex_pool *p = test_pool_parked(2, 0);
    uint64_t woken0 = test_pool_workers_woken(p);
    for (size_t q = 0; q < 2; q++) {
        order_rec o;
        order_init(&o, 100000);  /* a parallel bulk this large wakes workers at its start */
        ex_result r = ex_sync_wait(ex_bulk(ex_schedule(ex_pool_scheduler(p)), sequenced[q], 100000, order_fn, &o));
        expect_value_result(&r);
        expect_in_order_on_one_thread(&o, 100000, "parked pool");
        ex_result_destroy(&r);
        order_fini(&o);
    }
    cr_assert_eq(ex_pool_shutdown(p).code, 0);
    cr_assert_eq(test_pool_workers_woken(p), woken0, "a sequenced bulk woke a worker");
    test_pool_free(p);
    expect_no_leaks();
}

POOL_TEST(exec_bulk, seq_error_on_the_pool_is_the_failing_index_and_nothing_after_runs, 4) {
    for (size_t q = 0; q < 2; q++) {
        order_rec o;
        order_init(&o, 10000);
        o.fail_at = 4321;
        ex_result r = ex_sync_wait(ex_bulk(ex_schedule(ex_pool_scheduler(p)), sequenced[q], 10000, order_fn, &o));
        expect_error(&r, EX_EUSER + 11);
        /* The default chunks hold several indices: the failing one ends its
         * chunk, and no later chunk starts. */
        cr_assert_eq(atomic_load(&o.calls), 4322, "indices after the failing one ran (%zu calls)",
                     atomic_load(&o.calls));
        expect_in_order_on_one_thread(&o, 4322, "seq error");
        ex_result_destroy(&r);
        order_fini(&o);
    }
}

/* ========================================= EX_PAR, EX_PAR_UNSEQ on the pool */

POOL_TEST(exec_bulk, par_on_the_pool_runs_every_index_once_on_several_workers, 2) {
    for (size_t q = 0; q < 2; q++) {
        par_ctx c;
        par_init(&c, p, 64);
        c.body = BODY_WAIT_OTHER_WORKER;  /* index 0 waits (bounded) until another agent ran an index */
        ex_result r = ex_sync_wait(ex_bulk_grain(ex_schedule(ex_pool_scheduler(p)), parallel[q], 64, 1, par_fn, &c));
        expect_value_result(&r);
        cr_assert_eq(atomic_load(&c.block_timed_out), 0, "policy %d: no other agent ran an index", (int)parallel[q]);
        par_expect_each_once(&c);
        ex_result_destroy(&r);
        par_fini(&c);

        par_init(&c, p, 100000);
        r = ex_sync_wait(ex_bulk(ex_schedule(ex_pool_scheduler(p)), parallel[q], 100000, par_fn, &c));
        expect_value_result(&r);
        par_expect_each_once(&c);
        cr_assert_eq(atomic_load(&c.off_pool), 0);
        ex_result_destroy(&r);
        par_fini(&c);
    }
}

/* ====================================================== bulk_unchunked */

static void run_unchunked_each_once(ex_pool *p, ex_execution_policy policy, size_t shape) {
    par_ctx c;
    par_init(&c, p, shape);
    ex_value v = ex_int(6);
    par_expect_values(&c, &v, 1);
    ex_result r = ex_sync_wait(
        ex_bulk_unchunked(ex_continues_on(ex_just(ex_int(6)), ex_pool_scheduler(p)), policy, shape, par_fn, &c));
    expect_value_result(&r);
    cr_assert_eq(r.n, 1, "the values are forwarded");
    cr_assert_eq(r.values[0].as.i, 6);
    par_expect_each_once(&c);
    cr_assert_eq(atomic_load(&c.bad_values), 0);
    cr_assert_eq(atomic_load(&c.off_pool), 0);
    ex_result_destroy(&r);
    par_fini(&c);
}

POOL_TEST(exec_bulk, unchunked_calls_f_once_per_index_shapes_0_1_and_large, 2) {
    static const size_t shapes[] = { 0, 1, 2, 3, 100000 };
    static const ex_execution_policy all[] = { EX_SEQ, EX_PAR, EX_PAR_UNSEQ, EX_UNSEQ };
    for (size_t q = 0; q < 4; q++)
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) run_unchunked_each_once(p, all[q], shapes[k]);
}

POOL_TEST(exec_bulk, unchunked_par_runs_indices_on_other_workers, 2) {
    for (size_t q = 0; q < 2; q++) {
        par_ctx c;
        par_init(&c, p, 8);
        c.body = BODY_WAIT_OTHER_WORKER;
        ex_result r = ex_sync_wait(ex_bulk_unchunked(ex_schedule(ex_pool_scheduler(p)), parallel[q], 8, par_fn, &c));
        expect_value_result(&r);
        cr_assert_eq(atomic_load(&c.block_timed_out), 0, "policy %d: no other agent ran an index", (int)parallel[q]);
        par_expect_each_once(&c);
        ex_result_destroy(&r);
        par_fini(&c);
    }
}

POOL_TEST(exec_bulk, unchunked_seq_runs_in_order_on_one_thread, 4) {
    for (size_t q = 0; q < 2; q++) {
        order_rec o;
        order_init(&o, 3000);
        run_to_value_on_the_calls_thread(
            p, ex_bulk_unchunked(ex_schedule(ex_pool_scheduler(p)), sequenced[q], 3000, order_fn, &o), &o,
            "unchunked seq");
        expect_in_order_on_one_thread(&o, 3000, "unchunked seq");
        order_fini(&o);
    }
}

/* An index is a chunk of its own: under EX_SEQ the failing index is the
 * last that runs, and a stop request is seen before the very next one. */
POOL_TEST(exec_bulk, unchunked_seq_error_and_stop_end_at_the_index, 2) {
    order_rec o;
    order_init(&o, 1000);
    o.fail_at = 17;
    ex_result r = ex_sync_wait(ex_bulk_unchunked(ex_schedule(ex_pool_scheduler(p)), EX_SEQ, 1000, order_fn, &o));
    expect_error(&r, EX_EUSER + 11);
    expect_in_order_on_one_thread(&o, 18, "unchunked error");
    ex_result_destroy(&r);
    order_fini(&o);

    order_init(&o, 1000);
    arec ar;
    arec_init_stoppable(&ar, p, false);
    o.stop_at = 17;
    o.stop = &ar.stop;
    arec_run_to_end(ex_bulk_unchunked(ex_schedule(ex_pool_scheduler(p)), EX_SEQ, 1000, order_fn, &o), &ar);
    cr_assert_eq(atomic_load(&ar.stops), 1, "values %d errors %d", atomic_load(&ar.values), atomic_load(&ar.errors));
    expect_in_order_on_one_thread(&o, 18, "unchunked stop");
    order_fini(&o);
}

POOL_TEST(exec_bulk, unchunked_par_error_and_stop_skip_what_has_not_started, 2) {
    par_ctx c;
    par_init(&c, p, 100000);
    c.fail_at = 0;
    c.fail_err = ex_err(EX_EUSER + 12, "index 0 failed");
    ex_result r = ex_sync_wait(ex_bulk_unchunked(ex_schedule(ex_pool_scheduler(p)), EX_PAR, 100000, par_fn, &c));
    expect_error(&r, EX_EUSER + 12);
    cr_assert_str_eq(r.error.msg, "index 0 failed");
    cr_assert_lt(atomic_load(&c.calls), 100000, "every index ran although index 0 failed");
    for (size_t i = 0; i < c.shape; i++) cr_assert_leq(atomic_load(&c.hits[i]), 1);
    ex_result_destroy(&r);
    par_fini(&c);

    par_init(&c, p, 100000);
    arec ar;
    arec_init_stoppable(&ar, p, false);
    c.stop_at = 10;
    c.stop = &ar.stop;
    arec_run_to_end(ex_bulk_unchunked(ex_schedule(ex_pool_scheduler(p)), EX_PAR, 100000, par_fn, &c), &ar);
    cr_assert_eq(atomic_load(&ar.stops), 1, "values %d errors %d", atomic_load(&ar.values), atomic_load(&ar.errors));
    cr_assert_eq(atomic_load(&c.hits[10]), 1);
    cr_assert_lt(atomic_load(&c.calls), 100000, "every index ran although stop was requested at index 10");
    par_fini(&c);

    /* Stop requested before the bulk starts: no index runs. */
    par_init(&c, p, 1000);
    arec_init_stoppable(&ar, p, true);
    arec_run_to_end(ex_bulk_unchunked(ex_schedule(ex_pool_scheduler(p)), EX_PAR, 1000, par_fn, &c), &ar);
    cr_assert_eq(atomic_load(&ar.stops), 1);
    cr_assert_eq(atomic_load(&c.calls), 0);
    par_fini(&c);
}

/* Every index fails with an error that owns a payload: one is the result,
 * every other is released, whatever the policy. */
static ex_error fail_owned(void *ctx, size_t i, const ex_value *v, size_t n) {
    (void)ctx, (void)v, (void)n;
    return owned_error((int)i);
}

Test(exec_bulk, unchunked_every_index_failing_keeps_one_error_and_releases_the_rest) {
    static const ex_execution_policy all[] = { EX_SEQ, EX_PAR, EX_PAR_UNSEQ, EX_UNSEQ };
    ex_pool *p = test_pool_new(2);
    owned_errors_reset();
    for (size_t q = 0; q < 4; q++) {
        ex_result r = ex_sync_wait(ex_bulk_unchunked(ex_schedule(ex_pool_scheduler(p)), all[q], 256, fail_owned, NULL));
        expect_error(&r, EX_EUSER + 1);
        int id = owned_error_id(r.error);
        cr_assert(id >= 0 && id < 256);
        if (all[q] == EX_SEQ || all[q] == EX_UNSEQ) cr_assert_eq(id, 0, "in index order, index 0 fails first");
        ex_result_destroy(&r);
    }
    /* The sequential loop (no resource) too. */
    ex_result r = ex_sync_wait(ex_bulk_unchunked(ex_just(), EX_PAR, 256, fail_owned, NULL));
    expect_error(&r, EX_EUSER + 1);
    cr_assert_eq(owned_error_id(r.error), 0);
    ex_result_destroy(&r);
    test_pool_free(p);
    expect_owned_all_released(atomic_load(&owned_made));
}

/* ------------------------------------------------- allocation failures */

POOL_TEST(exec_bulk, unchunked_helper_allocation_failure_still_completes, 6) {
    /* 5 helpers > EX_BULK_INLINE_HELPERS: the helper array is allocated;
     * failing it means fewer helpers, never another result. */
    par_ctx c;
    par_init(&c, p, 20000);
    ex_sender *s = ex_bulk_unchunked(ex_schedule(ex_pool_scheduler(p)), EX_PAR, 20000, par_fn, &c);
    long before = test_alloc_count();
    ex_result r = ex_sync_wait(ex_sender_retain(s));
    long during = test_alloc_count() - before;
    expect_value_result(&r);
    par_expect_each_once(&c);
    par_fini(&c);
    cr_assert_geq(during, 1, "a 6-thread pool's unchunked bulk allocates its helper array");
    long base_in_use = test_stats.in_use;
    for (long k = 1; k <= during; k++) {
        par_init(&c, p, 20000);
        test_alloc_fail_at(k);
        r = ex_sync_wait(ex_sender_retain(s));
        test_alloc_fail_at(0);
        expect_value_result(&r);
        par_expect_each_once(&c);
        par_fini(&c);
        cr_assert_eq(test_stats.in_use, base_in_use, "fail at %ld: %ld block(s) leaked", k,
                     test_stats.in_use - base_in_use);
    }
    ex_sender_release(s);
}

POOL_TEST(exec_bulk, unchunked_values_that_cannot_be_stored_fail_with_enomem, 2) {
    ex_value inner[2] = { ex_int(1), ex_int(2) };
    ex_tuple t = { 0, 2, inner };
    par_ctx c;
    par_init(&c, p, 100);
    ex_sender *s = ex_bulk_unchunked(ex_continues_on(ex_just(ex_tuple_value(&t)), ex_pool_scheduler(p)), EX_PAR, 100,
                                     par_fn, &c);
    int nomem = 0;
    bool clean = false;
    for (long k = 1; k <= 50 && !clean; k++) {
        long failed_before = test_stats.failed;
        test_alloc_fail_at(k);
        ex_result r = ex_sync_wait(ex_sender_retain(s));
        bool failed = test_stats.failed != failed_before;
        test_alloc_fail_at(0);
        if (r.disposition == EX_DISP_ERROR) {
            cr_assert_eq(r.error.code, EX_ENOMEM, "fail at %ld: %d (%s)", k, r.error.code, r.error.msg);
            cr_assert(failed);
            /* continues_on stores the tuple too: only the bulk's own names it. */
            if (strcmp(r.error.msg, "ex_bulk_unchunked(par_fn): out of memory copying tuple values") == 0) nomem++;
        } else {
            cr_assert_eq(r.disposition, EX_DISP_VALUE, "fail at %ld: disposition %d", k, r.disposition);
            clean = !failed;
        }
        ex_result_destroy(&r);
    }
    cr_assert(clean, "the sweep never reached a run without an injected failure");
    cr_assert_gt(nomem, 0, "no failure was the bulk's own, storing the tuple");
    ex_sender_release(s);
    par_fini(&c);
}

/* ---------------------------------------- without a resource: sequential */

Test(exec_bulk, unchunked_sequential_runs_each_index_in_order_with_the_values) {
    seq_ctx c;
    seq_init(&c);
    ex_result r = ex_sync_wait(ex_bulk_unchunked(ex_just(ex_int(4), ex_str("u")), EX_PAR, 9, seq_fn, &c));
    expect_value_result(&r);
    cr_assert_eq(r.n, 2);
    cr_assert_eq(c.calls, 9);
    for (size_t i = 0; i < 9; i++) {
        cr_assert_eq(c.order[i], i);
        cr_assert_eq(c.thread[i], test_thread_id());
        cr_assert_eq(c.v0[i].as.i, 4);
        cr_assert_str_eq(c.v1[i].as.s, "u");
    }
    ex_result_destroy(&r);

    seq_init(&c);
    r = ex_sync_wait(ex_bulk_unchunked(ex_just(), EX_SEQ, 0, seq_fn, &c));
    expect_value_result(&r);
    cr_assert_eq(c.calls, 0);
    ex_result_destroy(&r);

    seq_init(&c);
    c.fail_at = 2;
    c.fail_err = ex_err(EX_EUSER + 3, "two");
    r = ex_sync_wait(ex_bulk_unchunked(ex_schedule(ex_inline_scheduler()), EX_UNSEQ, 9, seq_fn, &c));
    expect_error(&r, EX_EUSER + 3);
    cr_assert_eq(c.calls, 3);
    ex_result_destroy(&r);
    expect_no_leaks();
}

/* Without a resource every policy is the same sequential loop. */
Test(exec_bulk, every_policy_without_a_resource_is_the_sequential_loop) {
    static const ex_execution_policy all[] = { EX_SEQ, EX_PAR, EX_PAR_UNSEQ, EX_UNSEQ };
    for (size_t q = 0; q < 4; q++) {
        seq_ctx c;
        seq_init(&c);
        ex_result r = ex_sync_wait(ex_bulk(ex_just(), all[q], 12, seq_fn, &c));
        expect_value_result(&r);
        cr_assert_eq(c.calls, 12);
        for (size_t i = 0; i < 12; i++) cr_assert_eq(c.order[i], i);
        ex_result_destroy(&r);
    }
    expect_no_leaks();
}

/* ------------------------------------------------------------ bad input */

Test(exec_bulk, an_invalid_policy_gives_an_invalid_sender) {
    static const int bad[] = { 4, 99, -1 };
    seq_ctx c;
    seq_init(&c);
    for (size_t k = 0; k < 3; k++) {
        ex_execution_policy pol = (ex_execution_policy)bad[k];
        expect_invalid_msg(ex_bulk(ex_just(), pol, 3, seq_fn, &c), EX_EINVAL, "ex_bulk(seq_fn): invalid execution policy");
        expect_invalid_msg(ex_bulk_grain(ex_just(), pol, 3, 1, seq_fn, &c), EX_EINVAL,
                           "ex_bulk_grain(seq_fn): invalid execution policy");
        expect_invalid_msg(ex_bulk_chunked(ex_just(), pol, 3, 1, chunk_fn, NULL), EX_EINVAL,
                           "ex_bulk_chunked(chunk_fn): invalid execution policy");
        expect_invalid_msg(ex_bulk_unchunked(ex_just(), pol, 3, seq_fn, &c), EX_EINVAL,
                           "ex_bulk_unchunked(seq_fn): invalid execution policy");
        expect_invalid_msg((ex_bulk_unchunked)(ex_just(ex_int(1)), pol, 3, seq_fn, &c), EX_EINVAL,
                           "ex_bulk_unchunked: invalid execution policy");
    }
    cr_assert_eq(c.calls, 0);
    expect_no_leaks();
}

Test(exec_bulk, unchunked_null_function_or_child_gives_an_invalid_sender) {
    seq_ctx c;
    seq_init(&c);
    expect_invalid_msg(ex_bulk_unchunked(ex_just(), EX_PAR, 3, NULL, &c), EX_EINVAL,
                       "ex_bulk_unchunked(NULL): NULL function");
    expect_invalid_msg(ex_bulk_unchunked_named(NULL, EX_SEQ, 3, seq_fn, &c, "rows"), EX_EINVAL,
                       "ex_bulk_unchunked(rows): NULL input sender");
    /* An invalid child's own error comes through. */
    expect_invalid(ex_bulk_unchunked(too_many_values(), EX_PAR, 3, seq_fn, &c), EX_EINVAL);
    cr_assert_eq(c.calls, 0);
    expect_no_leaks();
}

Test(exec_bulk, unchunked_names_its_stage) {
    seq_ctx c;
    seq_init(&c);
    c.fail_at = 1;
    c.fail_err.code = EX_EUSER + 1;  /* msg NULL */
    expect_sync_error_msg(ex_bulk_unchunked(ex_just(), EX_SEQ, 3, seq_fn, &c), EX_EUSER + 1,
                          "ex_bulk_unchunked(seq_fn): the function failed");
    expect_sync_error_msg(ex_bulk_unchunked_named(ex_just(), EX_PAR, 3, seq_fn, &c, "rows"), EX_EUSER + 1,
                          "ex_bulk_unchunked(rows): the function failed");
    expect_sync_error_msg((ex_bulk_unchunked)(ex_just(), EX_PAR, 3, seq_fn, &c), EX_EUSER + 1,
                          "ex_bulk_unchunked: the function failed");
    expect_no_leaks();
}
