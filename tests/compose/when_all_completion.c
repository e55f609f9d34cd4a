/* SPDX-License-Identifier: MIT */
/* [exec.when.all]: where it completes (on the agent of the last child)
 * and on a pool.
 *
 * Nothing here asserts on timing: sleeps only give threads a chance to reach
 * a point, and every wait on asynchronous work is bounded so that a lost
 * completion or a missing stop request fails the test with a message
 * instead of hanging. */
#include <stdlib.h>
#include <string.h>

#include "compose/compose_fixtures.h"

/* ----------------------------------------------------- where it completes */

typedef struct last_ctx {
    ex_single_thread_context *stc[2];
    atomic_int ran[2];
    const void *tid[2];
    const void *final_tid;
    int waiter;             /* the child that makes sure it arrives last */
    atomic_int timed_out;
    int final_calls;
} last_ctx;

typedef struct last_child {
    last_ctx *lc;
    int idx;
} last_child;

static ex_error lc_child(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    last_child *c = ctx;
    last_ctx *lc = c->lc;
    (void)in, (void)n;
    lc->tid[c->idx] = test_thread_id();
    atomic_store(&lc->ran[c->idx], 1);
    if (c->idx == lc->waiter) {
        int other = 1 - c->idx;
        if (wait_int_reaches(&lc->ran[other], 1) < 1) {
            atomic_fetch_add(&lc->timed_out, 1);
        } else {
            /* The other child's item is running on its single-thread
             * context; an item queued there now runs after it returned,
             * i.e. after the other child arrived. */
            ex_result r = ex_sync_wait(ex_schedule(ex_single_thread_context_scheduler(lc->stc[other])));
            ex_result_destroy(&r);
        }
    }
    out[0] = ex_int(c->idx);
    return ex_ok();
}

static ex_error lc_final(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    last_ctx *lc = ctx;
    (void)n;
    lc->final_calls++;
    lc->final_tid = test_thread_id();
    out[0] = ex_int(in[0].as.i * 10 + in[1].as.i);
    return ex_ok();
}

static void run_last_on(int waiter) {
    ex_single_thread_context a, b;
    test_stc_init(&a);
    test_stc_init(&b);
    last_ctx lc;
    memset(&lc, 0, sizeof lc);
    lc.stc[0] = &a;
    lc.stc[1] = &b;
    lc.waiter = waiter;
    last_child c0 = { &lc, 0 }, c1 = { &lc, 1 };
    ex_sender *s = ex_then(ex_when_all(ex_then(ex_schedule(ex_single_thread_context_scheduler(&a)), lc_child, &c0, EX_SIG0,
                                               EX_SIG(EX_T_INT)),
                                       ex_then(ex_schedule(ex_single_thread_context_scheduler(&b)), lc_child, &c1, EX_SIG0,
                                               EX_SIG(EX_T_INT))),
                           lc_final, &lc, EX_SIG(EX_T_INT, EX_T_INT), EX_SIG(EX_T_INT));
    ex_result r = ex_sync_wait(s);
    cr_assert_eq(atomic_load(&lc.timed_out), 0);
    expect_value_int(&r, 1);
    cr_assert_eq(lc.final_calls, 1);
    cr_assert_neq(lc.tid[0], lc.tid[1], "the children ran on two threads");
    cr_assert_eq(lc.final_tid, lc.tid[waiter], "when_all must complete on the agent of the last child (%d)", waiter);
    cr_assert_neq(lc.final_tid, test_thread_id());
    test_stc_destroy(&a);
    test_stc_destroy(&b);
}

Test(exec_when_all, completes_on_the_agent_of_the_last_child) {
    run_last_on(1);
    run_last_on(0);
    expect_no_leaks();
}

static ex_error note_thread(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    *(const void **)ctx = test_thread_id();
    return ex_ok();
}

Test(exec_when_all, completes_on_the_other_thread_when_the_inline_child_is_first) {
    ex_single_thread_context stc;
    test_stc_init(&stc);
    const void *child_tid = NULL, *final_tid = NULL;
    ex_sender *s = ex_then(ex_when_all(ex_just(), ex_then(ex_schedule(ex_single_thread_context_scheduler(&stc)), note_thread,
                                                          &child_tid, EX_SIG0, EX_SIG0)),
                           note_thread, &final_tid, EX_SIG0, EX_SIG0);
    ex_result r = ex_sync_wait(s);
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_not_null(child_tid);
    cr_assert_neq(child_tid, test_thread_id());
    cr_assert_eq(final_tid, child_tid);
    test_stc_destroy(&stc);
    expect_no_leaks();
}

/* ------------------------------------------------------------ on a pool */

static ex_error make_str_b(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)in, (void)n;
    out[0] = ex_str("b");
    return ex_ok();
}

POOL_TEST(exec_when_all, on_a_two_thread_pool_1000_times, 2) {
    ex_scheduler sch = ex_pool_scheduler(p);
    for (int i = 0; i < 1000; i++) {
        ex_sender *s = ex_when_all(ex_then(ex_continues_on(ex_just(ex_int(i)), sch), add_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)),
                                   ex_then(ex_schedule(sch), make_str_b, NULL, EX_SIG0, EX_SIG(EX_T_STR)),
                                   ex_continues_on(ex_just(ex_double(i * 0.5), ex_int(-i)), sch), ex_just(ex_int(7)));
        ex_result r = ex_sync_wait(s);
        cr_assert_eq(r.disposition, EX_DISP_VALUE, "iteration %d: disposition %d (%s)", i, r.disposition,
                     r.error.msg ? r.error.msg : "");
        cr_assert_eq(r.n, 5, "iteration %d", i);
        cr_assert_eq(r.values[0].as.i, i + 1, "iteration %d", i);
        cr_assert_str_eq(r.values[1].as.s, "b", "iteration %d", i);
        cr_assert_float_eq(r.values[2].as.d, i * 0.5, 0, "iteration %d", i);
        cr_assert_eq(r.values[3].as.i, -i, "iteration %d", i);
        cr_assert_eq(r.values[4].as.i, 7, "iteration %d", i);
        ex_result_destroy(&r);
    }
}

POOL_TEST(exec_when_all, nested_when_alls_on_a_pool, 2) {
    ex_scheduler sch = ex_pool_scheduler(p);
    for (int i = 0; i < 200; i++) {
        ex_sender *inner1 = ex_when_all(ex_continues_on(ex_just(ex_int(1)), sch), ex_continues_on(ex_just(ex_int(2)), sch));
        ex_sender *inner2 = ex_when_all(ex_continues_on(ex_just(ex_int(3)), sch), ex_just(ex_int(4)));
        ex_result r = ex_sync_wait(ex_when_all(inner1, ex_starts_on(sch, inner2)));
        cr_assert_eq(r.disposition, EX_DISP_VALUE, "iteration %d", i);
        cr_assert_eq(r.n, 4);
        for (int k = 0; k < 4; k++) cr_assert_eq(r.values[k].as.i, k + 1, "iteration %d", i);
        ex_result_destroy(&r);
    }
}

