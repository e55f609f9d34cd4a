/* SPDX-License-Identifier: MIT */
/* [exec.let]: let_value, and what all three let adaptors share (the
 * lifetime of the datums, threads).  Also: let_env.c (the scheduler in the
 * inner environment), let_failures.c (bad input, out of memory),
 * let_nesting.c, let_error_stopped.c. */
#include <pthread.h>
#include <string.h>

#include "adaptors/callbacks.h"

TEST_SUITE(exec_let, 10);

/* ------------------------------------------------------------- let_value */

Test(exec_let, let_value_calls_fn_with_the_values) {
    seen sn = { 0 };
    ex_sender *s = ex_let_value(ex_just(ex_int(4), ex_str("a")), lv_times10, &sn, EX_SIG(EX_T_INT, EX_T_STR));
    cr_assert_eq(ex_sender_status(s).code, 0);
    expect_sync_int(s, 40);
    expect_called_once_with(&sn, 2);
    cr_assert_eq(sn.in[0].type, EX_T_INT);
    cr_assert_eq(sn.in[0].as.i, 4);
    cr_assert_eq(sn.in[1].type, EX_T_STR);
    cr_assert_str_eq(sn.in[1].as.s, "a");
    expect_no_leaks();
}

Test(exec_let, let_value_fn_not_called_before_start) {
    seen sn = { 0 };
    rec rc;
    rec_init(&rc);
    ex_sender *s = ex_let_value(ex_just(ex_int(2)), lv_times10, &sn, EX_SIG(EX_T_INT));
    expect_called_only_at_start(s, &sn, &rc);
    rec_expect_value_int(&rc, 20);
    expect_no_leaks();
}

Test(exec_let, let_value_result_is_the_returned_senders_values) {
    seen sn = { 0 };
    sn.ret = ex_just(ex_double(1.5), ex_str("x"), ex_uint(3));
    ex_result r = ex_sync_wait(ex_let_value(ex_just(), lv_ret, &sn, EX_SIG0));
    expect_value_arity(&r, 3);
    cr_assert_float_eq(r.values[0].as.d, 1.5, 0);
    cr_assert_str_eq(r.values[1].as.s, "x");
    cr_assert_eq(r.values[2].as.u, 3u);
    expect_called_once_with(&sn, 0);
    ex_result_destroy(&r);
    ex_sender_release(sn.ret);
    expect_no_leaks();
}

Test(exec_let, let_value_result_is_the_returned_senders_error) {
    seen sn = { 0 };
    static int payload;
    sn.ret = ex_just_error(ex_err_data(EX_EUSER + 11, "inner failed", &payload));
    ex_result r = ex_sync_wait(ex_let_value(ex_just(ex_int(1)), lv_ret, &sn, EX_SIG(EX_T_INT)));
    expect_error(&r, EX_EUSER + 11);
    cr_assert_str_eq(r.error.msg, "inner failed");
    cr_assert_eq(r.error.data, &payload);
    cr_assert_eq(sn.calls, 1);
    ex_sender_release(sn.ret);
    expect_no_leaks();
}

Test(exec_let, let_value_result_is_the_returned_senders_stopped) {
    seen sn = { 0 };
    sn.ret = ex_just_stopped();
    rec rc;
    rec_init(&rc);
    run_in_place(ex_let_value(ex_just(ex_int(1)), lv_ret, &sn, EX_SIG(EX_T_INT)), &rc);
    cr_assert_eq(rc.stops, 1);
    cr_assert_eq(sn.calls, 1);
    ex_sender_release(sn.ret);
    expect_no_leaks();
}

static ex_sender *let_value_times10(ex_sender *child, seen *sn) { return ex_let_value(child, lv_times10, sn, EX_SIG(EX_T_INT)); }

Test(exec_let, let_value_passes_error_through) {
    expect_error_passes(let_value_times10);
    expect_no_leaks();
}

Test(exec_let, let_value_passes_stopped_through) {
    expect_stopped_passes(let_value_times10);
    expect_no_leaks();
}

Test(exec_let, let_value_is_multi_shot) {
    seen sn = { 0 };
    ex_sender *s = ex_let_value(ex_just(ex_int(6)), lv_times10, &sn, EX_SIG(EX_T_INT));
    for (int i = 0; i < 3; i++) {
        expect_sync_int(ex_sender_retain(s), 60);
    }
    cr_assert_eq(sn.calls, 3);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_let, let_value_input_signature_mismatch_is_invalid) {
    seen sn = { 0 };
    ex_sender *s = ex_let_value(ex_just(ex_int(1), ex_int(2)), lv_times10, &sn, EX_SIG(EX_T_INT));
    expect_invalid(s, EX_EINVAL);
    s = ex_let_value(ex_just(ex_str("s")), lv_times10, &sn, EX_SIG(EX_T_INT));
    expect_invalid(s, EX_EINVAL);
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}

Test(exec_let, let_value_runtime_input_mismatch_is_einval) {
    /* The child's signatures are dynamic (another let_value), so the check
     * happens when the values arrive. */
    seen a = { 0 }, b = { 0 };
    a.ret = ex_just(ex_str("not an int"));
    ex_sender *s = ex_let_value(ex_let_value(ex_just(), lv_ret, &a, EX_SIG0), lv_times10, &b, EX_SIG(EX_T_INT));
    cr_assert_eq(ex_sender_status(s).code, 0);
    expect_sync_error(s, EX_EINVAL);
    cr_assert_eq(a.calls, 1);
    cr_assert_eq(b.calls, 0);
    ex_sender_release(a.ret);
    expect_no_leaks();
}

Test(exec_let, let_value_variadic_input_accepts_any_arity) {
    seen sn = { 0 };
    expect_sync_int(ex_let_value(ex_just(), lv_count, &sn, EX_SIG_VARIADIC), 0);
    expect_sync_int(ex_let_value(ex_just(ex_int(1), ex_bool(false), ex_str("z")), lv_count, &sn, EX_SIG_VARIADIC), 3);
    cr_assert_eq(sn.in[2].type, EX_T_STR);
    cr_assert_str_eq(sn.in[2].as.s, "z");
    cr_assert_eq(sn.calls, 2);
    expect_no_leaks();
}

Test(exec_let, result_signatures_are_dynamic) {
    seen sn = { 0 };
    ex_sender *s = ex_let_value(ex_just(ex_int(1)), lv_times10, &sn, EX_SIG(EX_T_INT));
    cr_assert_neq(ex_sender_sigs(s)->flags & EX_SIGS_DYNAMIC, 0);
    ex_sender_release(s);
    s = ex_let_error(ex_just_error(ex_err(EX_EUSER, "e")), le_code, &sn);
    cr_assert_neq(ex_sender_sigs(s)->flags & EX_SIGS_DYNAMIC, 0);
    ex_sender_release(s);
    s = ex_let_stopped(ex_just_stopped(), ls_seven, &sn);
    cr_assert_neq(ex_sender_sigs(s)->flags & EX_SIGS_DYNAMIC, 0);
    ex_sender_release(s);

    /* When fn can never be called, the child's signatures are the result's. */
    s = ex_let_error(ex_just(ex_double(2.0)), le_code, &sn);
    const ex_sigs *sg = ex_sender_sigs(s);
    cr_assert_eq(sg->flags & EX_SIGS_DYNAMIC, 0);
    cr_assert_eq(sg->flags & EX_SIGS_ERROR, 0);
    cr_assert_eq(sg->nvalues, 1);
    cr_assert_eq(sg->values[0].types[0], EX_T_DOUBLE);
    ex_sender_release(s);
    s = ex_let_stopped(ex_just(ex_int(1)), ls_seven, &sn);
    cr_assert_eq(ex_sender_sigs(s)->flags & (EX_SIGS_DYNAMIC | EX_SIGS_STOPPED), 0);
    ex_sender_release(s);
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}

/* --------------------------------------------------- lifetime of the datums */

typedef struct lifetime_ctx {
    ex_scheduler sch;           /* the other thread */
    ex_value tuple_elems[2];    /* storage the child's tuple points into */
    ex_tuple tuple;
    int let_calls, read_calls;
    pthread_t reader_thread;
    const ex_value *in_ptr;
} lifetime_ctx;

/* Child: int x -> (int x, tuple(int 100, int 200)) from a stack array. */
static ex_error make_values(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)n;
    lifetime_ctx *lc = ctx;
    lc->tuple_elems[0] = ex_int(100);
    lc->tuple_elems[1] = ex_int(200);
    lc->tuple.index = 0;
    lc->tuple.n = 2;
    lc->tuple.v = lc->tuple_elems;
    out[0] = in[0];
    out[1] = ex_tuple_value(&lc->tuple);
    return ex_ok();
}

/* Runs on the other thread, long after fn returned: reads through the
 * pointers fn handed out. */
static ex_error read_pointed(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)n;
    lifetime_ctx *lc = ctx;
    lc->read_calls++;
    lc->reader_thread = pthread_self();
    const ex_value *a = in[0].as.p, *b = in[1].as.p;
    if (a->type != EX_T_INT || b->type != EX_T_TUPLE || b->as.tuple->n != 2)
        return ex_err(EX_EUSER + 50, "stored datums were clobbered");
    out[0] = ex_int(a->as.i + b->as.tuple->v[0].as.i + b->as.tuple->v[1].as.i);
    return ex_ok();
}

static ex_sender *lv_async_reader(void *ctx, const ex_value *in, size_t n) {
    (void)n;
    lifetime_ctx *lc = ctx;
    lc->let_calls++;
    lc->in_ptr = in;
    /* The producer's tuple storage is gone from now on: let must have
     * copied the tuple contents. */
    lc->tuple_elems[0] = ex_str("clobbered");
    lc->tuple_elems[1] = ex_str("clobbered");
    lc->tuple.n = 0;
    return ex_then(ex_continues_on(ex_just(ex_ptr((void *)&in[0]), ex_ptr((void *)&in[1])), lc->sch), read_pointed, lc,
                   EX_SIG(EX_T_PTR, EX_T_PTR), EX_SIG(EX_T_INT));
}

Test(exec_let, datums_live_until_the_returned_sender_completes) {
    ex_single_thread_context stc;
    lifetime_ctx lc;
    memset(&lc, 0, sizeof lc);
    lc.sch = test_stc_init(&stc);
    ex_sender *child = ex_then(ex_just(ex_int(5)), make_values, &lc, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT, EX_T_TUPLE));
    ex_sender *s = ex_let_value(child, lv_async_reader, &lc, EX_SIG(EX_T_INT, EX_T_TUPLE));
    cr_assert_eq(ex_sender_status(s).code, 0);
    expect_sync_int(s, 5 + 100 + 200);
    cr_assert_eq(lc.let_calls, 1);
    cr_assert_eq(lc.read_calls, 1);
    cr_assert(pthread_equal(lc.reader_thread, ex_single_thread_context_thread_id(&stc)), "the read ran on the other thread");
    test_stc_destroy(&stc);
    expect_no_leaks();
}

/* let_value over a just takes the just's values at connect and calls fn
 * at start without a child operation; the values are still checked
 * against fn's signature then, as a child's completion would be. */
Test(exec_let, let_value_over_just_checks_the_values_at_start) {
    seen sn = { 0 };
    ex_value untyped = { .type = EX_T_ANY };  /* compatible with int at build time, matches nothing at run time */
    ex_sender *s = ex_let_value(ex_just(untyped), lv_times10, &sn, EX_SIG(EX_T_INT));
    cr_assert_eq(ex_sender_status(s).code, 0);
    expect_sync_error(s, EX_EINVAL);
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}

/* -------------------------------------------------- let_value_borrowed */

/* fn lends its sender: the let connects it, and neither retains nor
 * releases it, however often it runs. */
Test(exec_let, let_value_borrowed_runs_the_lent_sender_and_leaves_it_to_the_lender) {
    seen sn = { 0 };
    sn.ret = ex_just(ex_int(7), ex_str("lent"));
    ex_sender *s = ex_let_value_borrowed(ex_just(ex_int(2)), lv_lend, &sn, EX_SIG(EX_T_INT));
    cr_assert_eq(ex_sender_status(s).code, 0);
    for (int run = 0; run < 3; run++) {
        ex_result r = ex_sync_wait(ex_sender_retain(s));
        expect_values_text(&r, "int 7; str \"lent\"");
        ex_result_destroy(&r);
        cr_assert_eq(sn.ret->refs, 1, "the let retained or released a sender it was lent");
    }
    cr_assert_eq(sn.calls, 3);
    cr_assert_eq(sn.in[0].as.i, 2);
    ex_sender_release(s);
    ex_sender_release(sn.ret);
    expect_no_leaks();
}

/* -------------------------------------------------- across threads */

typedef struct thread_ctx {
    ex_scheduler sch;
    pthread_t where;
    int calls;
} thread_ctx;

static ex_error note_thread(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)n;
    thread_ctx *tc = ctx;
    tc->calls++;
    tc->where = pthread_self();
    out[0] = ex_int(in[0].as.i + 1);
    return ex_ok();
}

static ex_sender *lv_elsewhere(void *ctx, const ex_value *in, size_t n) {
    (void)n;
    thread_ctx *tc = ctx;
    return ex_then(ex_continues_on(ex_just(in[0]), tc->sch), note_thread, tc, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
}

static ex_sender *le_elsewhere(void *ctx, ex_error err) {
    thread_ctx *tc = ctx;
    tc->calls++;
    return ex_continues_on(ex_just_error(ex_err(err.code + 1, "from the other thread")), tc->sch);
}

Test(exec_let, inside_sync_wait_inner_sender_completes_on_another_thread) {
    ex_single_thread_context stc;
    thread_ctx tc;
    memset(&tc, 0, sizeof tc);
    tc.sch = test_stc_init(&stc);
    expect_sync_int(ex_let_value(ex_just(ex_int(41)), lv_elsewhere, &tc, EX_SIG(EX_T_INT)), 42);
    cr_assert_eq(tc.calls, 1);
    cr_assert(pthread_equal(tc.where, ex_single_thread_context_thread_id(&stc)));
    cr_assert_not(pthread_equal(tc.where, pthread_self()));

    ex_result r = ex_sync_wait(ex_let_error(ex_just_error(ex_err(EX_EUSER, "e")), le_elsewhere, &tc));
    expect_error(&r, EX_EUSER + 1);
    cr_assert_str_eq(r.error.msg, "from the other thread");
    cr_assert_eq(tc.calls, 2);
    test_stc_destroy(&stc);
    expect_no_leaks();
}
