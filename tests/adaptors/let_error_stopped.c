/* SPDX-License-Identifier: MIT */
/* [exec.let]: let_error and let_stopped (suite exec_let, declared in let.c). */
#include "adaptors/callbacks.h"

/* ------------------------------------------------------------- let_error */

Test(exec_let, let_error_gets_the_childs_error) {
    seen sn = { 0 };
    static int payload;
    ex_sender *s = ex_let_error(ex_just_error(ex_err_data(EX_EUSER + 3, "the datum", &payload)), le_code, &sn);
    rec rc;
    rec_init(&rc);
    run_in_place(s, &rc);
    rec_expect_values(&rc, 2);
    cr_assert_eq(rc.v[0].as.i, EX_EUSER + 3);
    cr_assert_str_eq(rc.v[1].as.s, "the datum");
    cr_assert_eq(sn.calls, 1);
    cr_assert_eq(sn.err.code, EX_EUSER + 3);
    cr_assert_str_eq(sn.err.msg, "the datum");
    cr_assert_eq(sn.err.data, &payload);
    expect_no_leaks();
}

static ex_error then_fail(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)in, (void)n, (void)out;
    return ex_err(EX_EUSER + 20, "then failed");
}

Test(exec_let, let_error_handles_an_error_from_an_adaptor) {
    seen sn = { 0 };
    ex_sender *s = ex_let_error(ex_then(ex_just(ex_int(1)), then_fail, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)),
                                le_code, &sn);
    ex_result r = ex_sync_wait_with_variant(s);
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_eq(r.values[0].type, EX_T_TUPLE);
    const ex_tuple *t = r.values[0].as.tuple;
    cr_assert_eq(t->n, 2);
    cr_assert_eq(t->v[0].as.i, EX_EUSER + 20);
    cr_assert_str_eq(t->v[1].as.s, "then failed");
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(exec_let, let_error_result_is_the_returned_senders_completion) {
    seen sn = { 0 };
    sn.ret = ex_just_error(ex_err(EX_EUSER + 30, "replacement"));
    ex_result r = ex_sync_wait(ex_let_error(ex_just_error(ex_err(EX_EUSER, "original")), le_ret, &sn));
    expect_error(&r, EX_EUSER + 30);
    cr_assert_str_eq(r.error.msg, "replacement");
    ex_sender_release(sn.ret);
    sn.ret = ex_just_stopped();
    r = ex_sync_wait(ex_let_error(ex_just_error(ex_err(EX_EUSER, "original")), le_ret, &sn));
    expect_stopped(&r);
    ex_sender_release(sn.ret);
    cr_assert_eq(sn.calls, 2);
    cr_assert_eq(sn.err.code, EX_EUSER);
    expect_no_leaks();
}

static ex_sender *let_error_code(ex_sender *child, seen *sn) { return ex_let_error(child, le_code, sn); }

Test(exec_let, let_error_passes_values_and_stopped_through) {
    expect_values_pass(let_error_code);
    expect_stopped_passes(let_error_code);
    expect_no_leaks();
}

/* ------------------------------------------------------------ let_stopped */

Test(exec_let, let_stopped_runs_the_returned_sender) {
    seen sn = { 0 };
    rec rc;
    rec_init(&rc);
    ex_sender *s = ex_let_stopped(ex_just_stopped(), ls_seven, &sn);
    expect_called_only_at_start(s, &sn, &rc);
    rec_expect_value_int(&rc, 7);
    sn.ret = ex_just_error(ex_err(EX_EUSER + 40, "after stop"));
    expect_sync_error(ex_let_stopped(ex_just_stopped(), ls_ret, &sn), EX_EUSER + 40);
    ex_sender_release(sn.ret);
    sn.ret = ex_just_stopped();
    ex_result r = ex_sync_wait(ex_let_stopped(ex_just_stopped(), ls_ret, &sn));
    expect_stopped(&r);
    ex_sender_release(sn.ret);
    cr_assert_eq(sn.calls, 3);
    expect_no_leaks();
}

static ex_sender *let_stopped_seven(ex_sender *child, seen *sn) { return ex_let_stopped(child, ls_seven, sn); }

Test(exec_let, let_stopped_passes_values_and_errors_through) {
    expect_values_pass(let_stopped_seven);
    expect_error_passes(let_stopped_seven);
    expect_no_leaks();
}
