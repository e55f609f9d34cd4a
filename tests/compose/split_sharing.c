/* SPDX-License-Identifier: MIT */
/* [exec.split]: one shared run of a sender for many consumers - the child
 * runs once, consumers arriving before, during and after it, errors and
 * stopped reaching every consumer.
 *
 * Nothing here asserts on timing: sleeps only give threads a chance to reach
 * a point, and every wait on asynchronous work is bounded so that a lost
 * completion or a missing stop request fails the test with a message
 * instead of hanging. */
#include <stdlib.h>
#include <string.h>

#include "compose/compose_fixtures.h"

TEST_SUITE(exec_split, 20);

/* ==================================================== the child runs once */

Test(exec_split, signatures_are_the_childs_plus_error_and_stopped) {
    ex_sender *s = ex_split(ex_just(ex_int(1), ex_str("x")));
    cr_assert_eq(ex_sender_status(s).code, 0);
    expect_sigs(s, EX_SIG(EX_T_INT, EX_T_STR), 0, 0);
    const ex_sigs *sg = ex_sender_sigs(s);
    cr_assert_neq(sg->flags & EX_SIGS_ERROR, 0);
    cr_assert_neq(sg->flags & EX_SIGS_STOPPED, 0);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_split, child_is_not_started_before_a_consumer_starts) {
    call_counter c;
    memset(&c, 0, sizeof c);
    ex_sender *s = ex_split(ex_then(ex_just(), count_seven, &c, EX_SIG0, EX_SIG(EX_T_INT)));
    cr_assert_eq(atomic_load(&c.calls), 0);
    rec rc;
    rec_init(&rc);
    inline_run buf;
    ex_operation *op = connect_inline(&buf, s, &rc);
    cr_assert_eq(atomic_load(&c.calls), 0, "connect must not start the shared work");
    cr_assert_eq(rec_total(&rc), 0);
    ex_start(op);
    cr_assert_eq(atomic_load(&c.calls), 1);
    cr_assert_eq(rc.values, 1);
    cr_assert_eq(rc.v[0].as.i, 7);
    ex_operation_destroy(op);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_split, child_runs_once_for_a_when_all_of_three_consumers_and_later_sync_waits) {
    call_counter c;
    ex_sender *sp = ex_split(counted_int(&c, 7));
    ex_result r = ex_sync_wait(ex_when_all(ex_sender_retain(sp), ex_sender_retain(sp), ex_sender_retain(sp)));
    cr_assert_eq(r.disposition, EX_DISP_VALUE, "disposition %d (%s)", r.disposition, r.error.msg ? r.error.msg : "");
    cr_assert_eq(r.n, 3);
    for (int i = 0; i < 3; i++) cr_assert_eq(r.values[i].as.i, 7);
    ex_result_destroy(&r);
    cr_assert_eq(atomic_load(&c.calls), 1, "the child must run once for all consumers");
    for (int i = 0; i < 5; i++) {
        r = ex_sync_wait(ex_sender_retain(sp));
        expect_value_int(&r, 7);
    }
    cr_assert_eq(atomic_load(&c.calls), 1, "later consumers get the stored result");
    ex_sender_release(sp);
    expect_no_leaks();
}

POOL_TEST(exec_split, child_on_a_pool_runs_once_for_a_when_all_of_consumers, 2) {
    call_counter c;
    ex_sender *sp = ex_split(counted_seven_on(&c, ex_pool_scheduler(p)));
    ex_result r = ex_sync_wait(ex_when_all(ex_sender_retain(sp), ex_sender_retain(sp), ex_sender_retain(sp)));
    cr_assert_eq(r.disposition, EX_DISP_VALUE, "disposition %d (%s)", r.disposition, r.error.msg ? r.error.msg : "");
    for (int i = 0; i < 3; i++) cr_assert_eq(r.values[i].as.i, 7);
    ex_result_destroy(&r);
    r = ex_sync_wait(sp);
    expect_value_int(&r, 7);
    cr_assert_eq(atomic_load(&c.calls), 1);
}

/* ------------------------------------------ consumers before and after */

POOL_TEST(exec_split, consumers_arriving_while_the_child_runs_complete_where_it_completes, 2) {
    work_gate g;
    work_gate_init(&g, NULL, 7);
    ex_sender *sp = ex_split(work_gated(&g, ex_pool_scheduler(p)));
    enum { N = 4 };
    trec a[N];
    ex_operation *op[N];
    connect_consumers(sp, a, op, N);
    ex_start(op[0]);
    work_gate_wait_entered(&g, 1);
    for (int i = 1; i < N; i++) ex_start(op[i]);
    test_sleep_ms(5); /* give a wrong implementation the chance to complete early */
    for (int i = 0; i < N; i++) cr_assert_eq(atomic_load(&a[i].done), 0, "consumer %d completed before the child", i);
    work_gate_open(&g);
    for (int i = 0; i < N; i++) trec_wait_done(&a[i]);
    cr_assert_eq(atomic_load(&g.timed_out), 0);
    cr_assert_eq(atomic_load(&g.entered), 1, "the child ran once");
    for (int i = 0; i < N; i++) {
        rec_expect_value_int(&a[i].r, 7);
        cr_assert_eq(a[i].r.thread, g.thread, "consumer %d must complete on the agent where the child completed", i);
    }
    cr_assert_neq(g.thread, test_thread_id());

    /* A late consumer completes inside start, on the caller's thread. */
    trec late;
    trec_init(&late);
    ex_operation *lop = trec_run_start(sp, &late);
    cr_assert_eq(atomic_load(&late.done), 1, "a consumer started after completion completes inside start");
    cr_assert_eq(late.r.values, 1);
    cr_assert_eq(late.r.v[0].as.i, 7);
    cr_assert_eq(late.r.thread, test_thread_id());
    cr_assert_eq(atomic_load(&g.entered), 1);
    ex_operation_free(lop);
    for (int i = 0; i < N; i++) ex_operation_free(op[i]);
    ex_sender_release(sp);
}

typedef struct late_ctx {
    ex_sender *sp;
    trec a;
    ex_operation *op;
    const void *starter_tid;
    int connect_code;
} late_ctx;

/* Runs on another thread: starts a late consumer there. */
static ex_error start_late_here(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    late_ctx *lc = ctx;
    (void)in, (void)n, (void)out;
    lc->starter_tid = test_thread_id();
    lc->connect_code = ex_connect_alloc(lc->sp, trec_receiver(&lc->a), &lc->op).code;
    if (lc->connect_code == 0) ex_start(lc->op);
    return ex_ok();
}

Test(exec_split, late_consumers_complete_inline_on_the_starting_thread) {
    ex_single_thread_context stc, other;
    test_stc_init(&stc);
    test_stc_init(&other);
    call_counter c;
    ex_sender *sp = ex_split(counted_seven_on(&c, ex_single_thread_context_scheduler(&stc)));
    ex_result r = ex_sync_wait(ex_sender_retain(sp));
    expect_value_int(&r, 7);
    cr_assert_neq(c.tid, test_thread_id(), "the child completed on the context's thread");

    /* Late consumer on this thread. */
    rec rc;
    rec_init(&rc);
    inline_run buf;
    ex_operation *op = connect_inline(&buf, sp, &rc);
    ex_start(op);
    cr_assert_eq(rc.values, 1, "completed inside start");
    cr_assert_eq(rc.v[0].as.i, 7);
    cr_assert_eq(rc.thread, test_thread_id());
    ex_operation_destroy(op);

    /* Late consumer started on a third thread completes there. */
    late_ctx lc;
    memset(&lc, 0, sizeof lc);
    lc.sp = sp;
    trec_init(&lc.a);
    r = ex_sync_wait(ex_then(ex_schedule(ex_single_thread_context_scheduler(&other)), start_late_here, &lc, EX_SIG0, EX_SIG0));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_eq(lc.connect_code, 0);
    cr_assert_eq(atomic_load(&lc.a.done), 1, "completed inside start on the other thread");
    cr_assert_eq(lc.a.r.values, 1);
    cr_assert_eq(lc.a.r.thread, lc.starter_tid);
    cr_assert_neq(lc.starter_tid, c.tid);
    cr_assert_neq(lc.starter_tid, test_thread_id());
    ex_operation_free(lc.op);
    cr_assert_eq(atomic_load(&c.calls), 1);
    ex_sender_release(sp);
    test_stc_destroy(&stc);
    test_stc_destroy(&other);
    expect_no_leaks();
}

/* ------------------------------------------------------- errors, stopped */

Test(exec_split, error_reaches_every_consumer) {
    static int payload;
    call_counter c;
    memset(&c, 0, sizeof c);
    ex_sender *sp = ex_split(ex_then(ex_just_error(ex_err_data(EX_EUSER + 5, "shared failure", &payload)), count_pass, &c,
                                     EX_SIG_VARIADIC, EX_SIG0));
    ex_result r = ex_sync_wait(ex_when_all(ex_sender_retain(sp), ex_sender_retain(sp)));
    expect_error(&r, EX_EUSER + 5);
    cr_assert_str_eq(r.error.msg, "shared failure");
    cr_assert_eq(r.error.data, &payload);
    for (int i = 0; i < 3; i++) {
        rec rc;
        rec_init(&rc);
        inline_run buf;
        ex_operation *op = connect_inline(&buf, sp, &rc);
        ex_start(op);
        rec_expect_error(&rc, EX_EUSER + 5);
        cr_assert_str_eq(rc.err.msg, "shared failure");
        cr_assert_eq(rc.err.data, &payload);
        ex_operation_destroy(op);
    }
    cr_assert_eq(atomic_load(&c.calls), 0);
    ex_sender_release(sp);
    expect_no_leaks();
}

static ex_error fail_on_thread(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    atomic_fetch_add((atomic_int *)ctx, 1);
    return ex_err(EX_EUSER + 6, "failed on the pool");
}

POOL_TEST(exec_split, asynchronous_error_reaches_every_waiting_consumer, 2) {
    atomic_int calls;
    atomic_init(&calls, 0);
    ex_sender *sp = ex_split(ex_then(ex_schedule(ex_pool_scheduler(p)), fail_on_thread, &calls, EX_SIG0, EX_SIG0));
    enum { N = 3 };
    trec a[N];
    ex_operation *op[N];
    connect_consumers(sp, a, op, N);
    for (int i = 0; i < N; i++) ex_start(op[i]);
    for (int i = 0; i < N; i++) {
        trec_wait_done(&a[i]);
        cr_assert_eq(a[i].r.errors, 1, "consumer %d", i);
        cr_assert_eq(a[i].r.err.code, EX_EUSER + 6);
        cr_assert_str_eq(a[i].r.err.msg, "failed on the pool");
    }
    cr_assert_eq(atomic_load(&calls), 1);
    for (int i = 0; i < N; i++) ex_operation_free(op[i]);
    ex_sender_release(sp);
}

Test(exec_split, stopped_reaches_every_consumer) {
    ex_sender *sp = ex_split(ex_just_stopped());
    ex_result r = ex_sync_wait(ex_when_all(ex_sender_retain(sp), ex_sender_retain(sp), ex_sender_retain(sp)));
    cr_assert_eq(r.disposition, EX_DISP_STOPPED);
    for (int i = 0; i < 3; i++) {
        r = ex_sync_wait(ex_sender_retain(sp));
        cr_assert_eq(r.disposition, EX_DISP_STOPPED, "consumer %d", i);
    }
    ex_sender_release(sp);
    expect_no_leaks();
}

