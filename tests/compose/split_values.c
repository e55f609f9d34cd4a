/* SPDX-License-Identifier: MIT */
/* [exec.split]: the values kept for consumers (tuples copied deeply), bad
 * input, reference counting, races of consumers, allocation failures.
 *
 * Nothing here asserts on timing: sleeps only give threads a chance to reach
 * a point, and every wait on asynchronous work is bounded so that a lost
 * completion or a missing stop request fails the test with a message
 * instead of hanging. */
#include <stdlib.h>
#include <string.h>

#include "compose/compose_fixtures.h"

/* ----------------------------------------------------------------- tuples */

typedef struct tuple_src {
    ex_value inner_elems[1];
    ex_tuple inner;
    ex_value elems[3];
    ex_tuple t;
    int calls;
} tuple_src;

/* set_value() -> set_value(tuple#4(int 100, str "s", tuple#1(int 5)), int 9)
 * pointing into ctx storage. */
static ex_error make_tuple(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    tuple_src *ts = ctx;
    (void)in, (void)n;
    ts->calls++;
    ts->inner_elems[0] = ex_int(5);
    ts->inner.index = 1;
    ts->inner.n = 1;
    ts->inner.v = ts->inner_elems;
    ts->elems[0] = ex_int(100);
    ts->elems[1] = ex_str("s");
    ts->elems[2] = ex_tuple_value(&ts->inner);
    ts->t.index = 4;
    ts->t.n = 3;
    ts->t.v = ts->elems;
    out[0] = ex_tuple_value(&ts->t);
    out[1] = ex_int(9);
    return ex_ok();
}

static void clobber(tuple_src *ts) {
    ts->inner_elems[0] = ex_str("clobbered");
    ts->inner.n = 0;
    ts->elems[0] = ex_str("clobbered");
    ts->elems[1] = ex_int(-1);
    ts->elems[2] = ex_int(-2);
    ts->t.n = 0;
    ts->t.index = 77;
}

static void expect_tuple_intact(const rec *rc, int who) {
    cr_assert_eq(rc->values, 1, "consumer %d: values %d errors %d (%s)", who, rc->values, rc->errors,
                 rc->err.msg ? rc->err.msg : "");
    cr_assert_eq(rc->n, 2);
    cr_assert_eq(rc->v[0].type, EX_T_TUPLE);
    cr_assert_eq(rc->v[1].as.i, 9);
    const ex_tuple *t = rc->v[0].as.tuple;
    cr_assert_eq(t->index, 4, "consumer %d", who);
    cr_assert_eq(t->n, 3, "consumer %d", who);
    cr_assert_eq(t->v[0].type, EX_T_INT);
    cr_assert_eq(t->v[0].as.i, 100);
    cr_assert_str_eq(t->v[1].as.s, "s");
    cr_assert_eq(t->v[2].type, EX_T_TUPLE);
    cr_assert_eq(t->v[2].as.tuple->index, 1);
    cr_assert_eq(t->v[2].as.tuple->n, 1);
    cr_assert_eq(t->v[2].as.tuple->v[0].as.i, 5, "consumer %d: the nested tuple was not copied deeply", who);
}

Test(exec_split, tuple_values_are_deep_copied_once_and_lent_to_every_consumer) {
    tuple_src ts;
    memset(&ts, 0, sizeof ts);
    ex_sender *sp = ex_split(ex_then(ex_just(), make_tuple, &ts, EX_SIG0, EX_SIG(EX_T_TUPLE, EX_T_INT)));
    enum { N = 3 };
    rec rc[N];
    _Alignas(max_align_t) unsigned char buf[N][512];
    ex_operation *op[N];
    for (int i = 0; i < N; i++) {
        rec_init(&rc[i]);
        cr_assert_eq(ex_connect(sp, rec_receiver(&rc[i]), buf[i], sizeof buf[i], &op[i]).code, 0);
    }
    long before = test_alloc_count();
    ex_start(op[0]);
    cr_assert_eq(test_alloc_count() - before, 1, "the result's tuples are copied into one block");
    clobber(&ts); /* the producer's storage is gone */
    ex_start(op[1]);
    ex_start(op[2]);
    cr_assert_eq(test_alloc_count() - before, 1, "late consumers borrow the stored copy: no more allocations");
    cr_assert_eq(ts.calls, 1);
    for (int i = 0; i < N; i++) expect_tuple_intact(&rc[i], i);
    cr_assert_neq(rc[0].v[0].as.tuple, &ts.t, "the consumers must not see the producer's tuple");
    cr_assert_eq(rc[1].v[0].as.tuple, rc[0].v[0].as.tuple, "every consumer borrows the same stored copy");
    cr_assert_eq(rc[2].v[0].as.tuple, rc[0].v[0].as.tuple);
    for (int i = 0; i < N; i++) ex_operation_destroy(op[i]);
    ex_sender_release(sp);
    expect_no_leaks();
}

Test(exec_split, tuple_values_survive_through_sync_wait_and_when_all) {
    tuple_src ts;
    memset(&ts, 0, sizeof ts);
    ex_sender *sp = ex_split(ex_then(ex_just(), make_tuple, &ts, EX_SIG0, EX_SIG(EX_T_TUPLE, EX_T_INT)));
    ex_result r = ex_sync_wait(ex_when_all(ex_sender_retain(sp), ex_into_variant(ex_sender_retain(sp))));
    cr_assert_eq(r.disposition, EX_DISP_VALUE, "disposition %d (%s)", r.disposition, r.error.msg ? r.error.msg : "");
    clobber(&ts);
    cr_assert_eq(r.n, 3);
    cr_assert_eq(r.values[0].as.tuple->v[0].as.i, 100);
    cr_assert_eq(r.values[0].as.tuple->v[2].as.tuple->v[0].as.i, 5);
    cr_assert_eq(r.values[1].as.i, 9);
    cr_assert_eq(r.values[2].as.tuple->n, 2);
    cr_assert_eq(r.values[2].as.tuple->v[0].as.tuple->v[0].as.i, 100);
    ex_result_destroy(&r);
    r = ex_sync_wait(sp);
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_eq(r.values[0].as.tuple->v[2].as.tuple->v[0].as.i, 5);
    ex_result_destroy(&r);
    cr_assert_eq(ts.calls, 1);
    expect_no_leaks();
}

Test(exec_split, failing_to_store_tuple_values_is_enomem_for_every_consumer) {
    tuple_src ts;
    memset(&ts, 0, sizeof ts);
    ex_sender *sp = ex_split(ex_then(ex_just(), make_tuple, &ts, EX_SIG0, EX_SIG(EX_T_TUPLE, EX_T_INT)));
    rec rc[2];
    _Alignas(max_align_t) unsigned char buf[2][512];
    ex_operation *op[2];
    for (int i = 0; i < 2; i++) {
        rec_init(&rc[i]);
        cr_assert_eq(ex_connect(sp, rec_receiver(&rc[i]), buf[i], sizeof buf[i], &op[i]).code, 0);
    }
    test_alloc_reset();
    test_alloc_fail_at(1);
    ex_start(op[0]);
    cr_assert_eq(test_stats.failed, 1, "storing the tuple is the allocation");
    test_alloc_reset();
    ex_start(op[1]);
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(rc[i].errors, 1, "consumer %d: values %d errors %d stops %d", i, rc[i].values, rc[i].errors, rc[i].stops);
        cr_assert_eq(rc[i].err.code, EX_ENOMEM);
        cr_assert_not_null(rc[i].err.msg);
    }
    cr_assert_eq(ts.calls, 1);
    for (int i = 0; i < 2; i++) ex_operation_destroy(op[i]);
    ex_sender_release(sp);
    expect_no_leaks();
}


/* ------------------------------------------------------------ bad input */

Test(exec_split, null_or_invalid_child_is_invalid) {
    ex_sender *s = ex_split(NULL);
    expect_invalid(s, EX_EINVAL);
    s = ex_split(too_many_values());
    expect_invalid(s, EX_EINVAL);
    test_alloc_fail_at(1);
    ex_sender *oom = ex_just(ex_int(1));
    test_alloc_reset();
    cr_assert_eq(ex_sender_status(oom).code, EX_ENOMEM);
    s = ex_split(oom);
    cr_assert_eq(ex_sender_status(s).code, EX_ENOMEM, "an invalid child's error is kept");
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_split, child_environment_is_split_env_with_only_the_shared_stop_token) {
    rec rc;
    rec_init(&rc);
    rec_with_stop(&rc);
    ex_sender *sp = ex_split(ex_read_env(&ex_key_get_stop_token, EX_T_TOKEN));
    ex_operation *op = run_start(sp, &rc);
    cr_assert_eq(rc.values, 1);
    cr_assert_eq(rc.v[0].type, EX_T_TOKEN);
    cr_assert(ex_stop_token_stop_possible(rc.v[0].as.token), "the child gets split's in-place stop token");
    cr_assert_not(ex_stop_token_equal(rc.v[0].as.token, ex_stop_source_token(&rc.stop)),
                  "not the first consumer's token");
    run_destroy(op);
    ex_sender_release(sp);

    /* The consumer's environment is not the child's: a user key is unknown. */
    static const ex_key user_key = { "test.split.user_key", true };
    ex_result r = ex_sync_wait(ex_write_env(ex_split(ex_read_env(&user_key, EX_T_ANY)), &user_key, ex_int(1)));
    expect_error(&r, EX_EINVAL);
    expect_no_leaks();
}

Test(exec_split, child_that_cannot_connect_to_split_env_is_invalid) {
    /* ex_on needs get_scheduler in its environment; split-env has none. */
    ex_sender *s = ex_split(ex_on(ex_inline_scheduler(), ex_just(ex_int(1))));
    expect_invalid(s, EX_EINVAL);
    expect_no_leaks();
}

POOL_TEST(exec_split, stop_from_one_consumer_racing_with_completion_gives_every_consumer_the_same_result, 2) {
    enum { N = 3 };
    int values = 0;
    for (int it = 0; it < 300; it++) {
        call_counter c;
        memset(&c, 0, sizeof c);
        ex_sender *sp = ex_split(ex_then(ex_continues_on(ex_just(), ex_pool_scheduler(p)), count_seven, &c, EX_SIG0, EX_SIG(EX_T_INT)));
        trec a[N];
        ex_operation *op[N];
        connect_consumers(sp, a, op, N);
        rec_with_stop(&a[0].r);
        ex_sender_release(sp);
        for (int i = 0; i < N; i++) ex_start(op[i]);
        if (it % 4 != 3) ex_stop_source_request_stop(&a[0].r.stop);
        for (int i = 0; i < N; i++) trec_wait_done(&a[i]);
        for (int i = 0; i < N; i++) {
            cr_assert_eq(rec_total(&a[i].r), 1, "iteration %d consumer %d", it, i);
            cr_assert_eq(a[i].r.errors, 0, "iteration %d consumer %d", it, i);
            cr_assert_eq(a[i].r.values, a[0].r.values, "iteration %d: consumers %d and 0 got different results", it, i);
            if (a[i].r.values) cr_assert_eq(a[i].r.v[0].as.i, 7);
        }
        values += a[0].r.values;
        cr_assert_leq(atomic_load(&c.calls), 1);
        for (int i = 0; i < N; i++) ex_operation_free(op[i]);
        ex_stop_source_request_stop(&a[0].r.stop);
    }
    cr_assert_geq(values, 1, "the iterations without a stop request complete with values");
}

/* ---------------------------------------------------------- ref counting */

Test(exec_split, releasing_the_sender_while_consumers_are_connected_is_safe) {
    ex_single_thread_context stc;
    test_stc_init(&stc);
    work_gate g;
    work_gate_init(&g, NULL, 7);
    ex_sender *sp = ex_split(work_gated(&g, ex_single_thread_context_scheduler(&stc)));
    trec a1, a2, a3;
    trec_init(&a1);
    trec_init(&a2);
    trec_init(&a3);
    ex_operation *o1 = NULL, *o2 = NULL, *o3 = NULL;
    cr_assert_eq(ex_connect_alloc(sp, trec_receiver(&a1), &o1).code, 0);
    cr_assert_eq(ex_connect_alloc(sp, trec_receiver(&a2), &o2).code, 0);
    cr_assert_eq(ex_connect_alloc(sp, trec_receiver(&a3), &o3).code, 0);
    ex_sender_release(sp); /* the consumers keep the shared state alive */
    sp = NULL;
    ex_start(o1);
    work_gate_wait_entered(&g, 1);
    ex_start(o2);
    ex_operation_free(o3); /* connected, never started, destroyed while the work runs */
    work_gate_open(&g);
    trec_wait_done(&a1);
    trec_wait_done(&a2);
    cr_assert_eq(a1.r.values, 1);
    cr_assert_eq(a1.r.v[0].as.i, 7);
    cr_assert_eq(a2.r.values, 1);
    cr_assert_eq(a2.r.v[0].as.i, 7);
    cr_assert_eq(rec_total(&a3.r), 0, "a consumer never started never completes");
    cr_assert_eq(atomic_load(&g.entered), 1);
    ex_operation_free(o2);
    ex_operation_free(o1); /* the last reference: frees the shared state */
    test_stc_destroy(&stc);
    expect_no_leaks();
}

POOL_TEST(exec_split, releasing_everything_but_a_running_consumer, 2) {
    /* The only reference left is the running consumer's; it is destroyed
     * right after it completes, on this thread, while the child's thread
     * may still be unwinding. */
    for (int i = 0; i < 200; i++) {
        call_counter c;
        ex_sender *sp = ex_split(counted_seven_on(&c, ex_pool_scheduler(p)));
        trec a;
        trec_init(&a);
        ex_operation *op = NULL;
        cr_assert_eq(ex_connect_alloc(sp, trec_receiver(&a), &op).code, 0);
        ex_sender_release(sp);
        ex_start(op);
        trec_wait_done(&a);
        cr_assert_eq(a.r.values, 1, "iteration %d", i);
        cr_assert_eq(a.r.v[0].as.i, 7);
        ex_operation_free(op);
    }
}

Test(exec_split, consumer_connected_but_never_started_then_destroyed) {
    call_counter c;
    ex_sender *sp = ex_split(counted_int(&c, 2));
    rec rc;
    rec_init(&rc);
    inline_run buf;
    ex_operation *op = connect_inline(&buf, sp, &rc);
    ex_operation_destroy(op);
    cr_assert_eq(atomic_load(&c.calls), 0);
    cr_assert_eq(rec_total(&rc), 0);
    /* The sender still works afterwards. */
    ex_result r = ex_sync_wait(ex_sender_retain(sp));
    expect_value_int(&r, 2);
    /* Never started, destroyed after the sender is released. */
    rec_init(&rc);
    op = connect_inline(&buf, sp, &rc);
    ex_sender_release(sp);
    ex_operation_destroy(op); /* the last reference */
    cr_assert_eq(rec_total(&rc), 0);
    cr_assert_eq(atomic_load(&c.calls), 1);
    expect_no_leaks();
}

Test(exec_split, sender_released_without_any_consumer) {
    call_counter c;
    ex_sender_release(ex_split(counted_int(&c, 2)));
    cr_assert_eq(atomic_load(&c.calls), 0);
    expect_no_leaks();
}


/* ---------------------------------------------------------------- races */

POOL_TEST(exec_split, consumers_racing_with_completion_on_a_pool, 2) {
    enum { N = 4 };
    for (int it = 0; it < 300; it++) {
        call_counter c;
        ex_sender *sp = ex_split(counted_seven_on(&c, ex_pool_scheduler(p)));
        trec a[N];
        ex_operation *op[N];
        connect_consumers(sp, a, op, N);
        ex_sender_release(sp);
        for (int i = 0; i < N; i++) ex_start(op[i]); /* the child may complete at any point in here */
        for (int i = 0; i < N; i++) {
            trec_wait_done(&a[i]);
            cr_assert_eq(a[i].r.values, 1, "iteration %d consumer %d", it, i);
            cr_assert_eq(rec_total(&a[i].r), 1);
            cr_assert_eq(a[i].r.v[0].as.i, 7);
        }
        cr_assert_eq(atomic_load(&c.calls), 1, "iteration %d", it);
        for (int i = 0; i < N; i++) ex_operation_free(op[i]);
    }
}

POOL_TEST(exec_split, consumers_started_concurrently_on_pool_workers, 2) {
    ex_scheduler sch = ex_pool_scheduler(p);
    tuple_src ts;
    for (int it = 0; it < 200; it++) {
        memset(&ts, 0, sizeof ts);
        ex_sender *sp = ex_split(ex_then(ex_just(), make_tuple, &ts, EX_SIG0, EX_SIG(EX_T_TUPLE, EX_T_INT)));
        ex_result r = ex_sync_wait(ex_when_all(ex_starts_on(sch, ex_sender_retain(sp)), ex_starts_on(sch, ex_sender_retain(sp)),
                                               ex_starts_on(sch, ex_sender_retain(sp))));
        ex_sender_release(sp);
        cr_assert_eq(r.disposition, EX_DISP_VALUE, "iteration %d: disposition %d (%s)", it, r.disposition,
                     r.error.msg ? r.error.msg : "");
        cr_assert_eq(r.n, 6);
        for (int k = 0; k < 3; k++) {
            cr_assert_eq(r.values[2 * k].as.tuple->v[0].as.i, 100, "iteration %d", it);
            cr_assert_eq(r.values[2 * k].as.tuple->v[2].as.tuple->v[0].as.i, 5);
            cr_assert_eq(r.values[2 * k + 1].as.i, 9);
        }
        ex_result_destroy(&r);
        cr_assert_eq(ts.calls, 1, "iteration %d", it);
    }
}


/* ---------------------------------------------------------- OOM sweep */

#define MAX_K 400

static ex_sender *build_split_pipeline(tuple_src *ts) {
    ex_sender *sp = ex_split(ex_then(ex_just(), make_tuple, ts, EX_SIG0, EX_SIG(EX_T_TUPLE, EX_T_INT)));
    ex_sender *num = ex_split(ex_just(ex_int(11)));
    ex_sender *s = ex_when_all(ex_sender_retain(sp), ex_into_variant(ex_sender_retain(sp)), ex_sender_retain(num),
                               ex_sender_retain(num));
    ex_sender_release(sp);
    ex_sender_release(num);
    return s;
}

static void check_split_pipeline(const ex_result *r) {
    cr_assert_eq(r->n, 5);
    cr_assert_eq(r->values[0].as.tuple->v[0].as.i, 100);
    cr_assert_eq(r->values[0].as.tuple->v[2].as.tuple->v[0].as.i, 5);
    cr_assert_eq(r->values[1].as.i, 9);
    cr_assert_eq(r->values[2].as.tuple->n, 2);
    cr_assert_eq(r->values[2].as.tuple->v[0].as.tuple->v[1].type, EX_T_STR);
    cr_assert_eq(r->values[3].as.i, 11);
    cr_assert_eq(r->values[4].as.i, 11);
}

Test(exec_split, out_of_memory_sweep) {
    tuple_src ts;
    long hits = 0, k;
    for (k = 1; k <= MAX_K; k++) {
        memset(&ts, 0, sizeof ts);
        test_alloc_reset();
        test_alloc_fail_at(k);
        ex_sender *s = build_split_pipeline(&ts);
        ex_result r = ex_sync_wait(s);
        long failed = test_stats.failed;
        if (r.disposition == EX_DISP_ERROR && r.error.code == EX_ENOMEM) {
            cr_assert_eq(failed, 1, "k=%ld: EX_ENOMEM without a failed allocation", k);
            cr_assert_not_null(r.error.msg);
        } else {
            cr_assert_eq(r.disposition, EX_DISP_VALUE, "k=%ld: expected EX_ENOMEM or the value, got %d (%d: %s)", k,
                         r.disposition, r.error.code, r.error.msg ? r.error.msg : "");
            check_split_pipeline(&r);
        }
        cr_assert_leq(ts.calls, 1, "k=%ld: the shared child ran %d times", k, ts.calls);
        ex_result_destroy(&r);
        cr_assert_eq(test_stats.in_use, 0, "k=%ld: leaked %ld block(s)", k, test_stats.in_use);
        if (failed == 0) break;
        hits++;
    }
    cr_assert_leq(k, MAX_K, "never reached a run without failures");
    cr_assert_gt(hits, 3, "too few runs hit an allocation failure");
    test_alloc_reset();
    expect_no_leaks();
}

Test(exec_split, out_of_memory_sweep_with_separately_run_consumers) {
    /* The split sender is built once; each k fails one allocation while
     * several consumers run one after another through sync_wait. */
    long hits = 0, k;
    for (k = 1; k <= MAX_K; k++) {
        tuple_src ts;
        memset(&ts, 0, sizeof ts);
        test_alloc_reset();
        test_alloc_fail_at(k);
        ex_sender *sp = ex_split(ex_then(ex_just(), make_tuple, &ts, EX_SIG0, EX_SIG(EX_T_TUPLE, EX_T_INT)));
        bool enomem_seen = false;
        for (int c = 0; c < 3; c++) {
            ex_result r = ex_sync_wait(ex_sender_retain(sp));
            if (r.disposition == EX_DISP_ERROR && r.error.code == EX_ENOMEM) {
                enomem_seen = true;
            } else {
                cr_assert_eq(r.disposition, EX_DISP_VALUE, "k=%ld consumer %d: got %d (%d: %s)", k, c, r.disposition,
                             r.error.code, r.error.msg ? r.error.msg : "");
                cr_assert_eq(r.values[0].as.tuple->v[2].as.tuple->v[0].as.i, 5);
                cr_assert_eq(r.values[1].as.i, 9);
            }
            ex_result_destroy(&r);
        }
        ex_sender_release(sp);
        long failed = test_stats.failed;
        if (enomem_seen) cr_assert_eq(failed, 1, "k=%ld: EX_ENOMEM without a failed allocation", k);
        cr_assert_leq(ts.calls, 1);
        cr_assert_eq(test_stats.in_use, 0, "k=%ld: leaked %ld block(s)", k, test_stats.in_use);
        if (failed == 0) break;
        hits++;
    }
    cr_assert_leq(k, MAX_K);
    cr_assert_gt(hits, 2);
    test_alloc_reset();
    expect_no_leaks();
}
