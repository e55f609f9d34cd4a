/* SPDX-License-Identifier: MIT */
/* [exec.then]: upon_error (suite exec_then, declared in then.c). */
#include "adaptors/callbacks.h"

/* ------------------------------------------------------------ upon_error */

Test(exec_then, upon_error_calls_fn_with_the_error) {
    seen sn = { 0 };
    static int payload;
    ex_sender *s = ex_upon_error(ex_just_error(ex_err_data(EX_EUSER + 7, "bad thing", &payload)), ue_code, &sn,
                                 EX_SIG(EX_T_INT));
    expect_sync_int(s, EX_EUSER + 7);
    cr_assert_eq(sn.calls, 1);
    cr_assert_eq(sn.err.code, EX_EUSER + 7);
    cr_assert_str_eq(sn.err.msg, "bad thing");
    cr_assert_eq(sn.err.data, &payload);
    expect_no_leaks();
}

Test(exec_then, upon_error_handles_an_error_from_then) {
    seen a = { 0 }, b = { 0 };
    ex_sender *s = ex_upon_error(ex_then(ex_just(ex_int(1)), fn_fail, &a, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)), ue_two,
                                 &b, EX_SIG(EX_T_STR, EX_T_INT));
    /* Two value signatures now: int from then, (str, int) from upon_error. */
    cr_assert_eq(ex_sender_sigs(s)->nvalues, 2);
    rec rc;
    rec_init(&rc);
    run_in_place(s, &rc);
    rec_expect_values(&rc, 2);
    cr_assert_eq(rc.v[0].type, EX_T_STR);
    cr_assert_str_eq(rc.v[0].as.s, fail_msg);
    cr_assert_eq(rc.v[1].as.i, EX_EUSER + 2);
    cr_assert_eq(b.err.data, &fail_payload);
    expect_no_leaks();
}

static ex_sender *upon_error_code(ex_sender *child, seen *sn) { return ex_upon_error(child, ue_code, sn, EX_SIG(EX_T_INT)); }

Test(exec_then, upon_error_passes_values_through_unchanged) {
    expect_values_pass(upon_error_code);
    expect_no_leaks();
}

Test(exec_then, upon_error_passes_stopped_through) {
    expect_stopped_passes(upon_error_code);
    expect_no_leaks();
}

Test(exec_then, upon_error_fn_not_called_before_start) {
    seen sn = { 0 };
    rec rc;
    rec_init(&rc);
    ex_sender *s = ex_upon_error(ex_just_error(ex_err(EX_EUSER, "e")), ue_code, &sn, EX_SIG(EX_T_INT));
    expect_called_only_at_start(s, &sn, &rc);
    rec_expect_value_int(&rc, EX_EUSER);
    expect_no_leaks();
}

Test(exec_then, upon_error_fn_error_becomes_set_error) {
    seen sn = { 0 };
    ex_result r = ex_sync_wait(ex_upon_error(ex_just_error(ex_err(EX_EUSER, "first")), ue_fail, &sn, EX_SIG0));
    expect_error(&r, EX_EUSER + 4);
    cr_assert_str_eq(r.error.msg, fail_msg);
    cr_assert_eq(sn.calls, 1);
    cr_assert_eq(sn.err.code, EX_EUSER);
    expect_no_leaks();
}

Test(exec_then, upon_error_no_output_and_several_outputs) {
    seen sn = { 0 };
    ex_result r = ex_sync_wait(ex_upon_error(ex_just_error(ex_err(EX_EUSER, "e")), ue_void, &sn, EX_SIG0));
    expect_value_arity(&r, 0);
    r = ex_sync_wait(ex_upon_error(ex_just_error(ex_err(EX_EUSER + 1, "two")), ue_two, &sn, EX_SIG(EX_T_STR, EX_T_INT)));
    expect_value_arity(&r, 2);
    cr_assert_str_eq(r.values[0].as.s, "two");
    cr_assert_eq(r.values[1].as.i, EX_EUSER + 1);
    cr_assert_eq(sn.calls, 2);
    expect_no_leaks();
}

Test(exec_then, upon_error_result_signatures) {
    seen sn = { 0 };
    ex_sender *s = ex_upon_error(ex_just_error(ex_err(EX_EUSER, "e")), ue_two, &sn, EX_SIG(EX_T_STR, EX_T_INT));
    expect_sigs(s, EX_SIG(EX_T_STR, EX_T_INT), EX_SIGS_STOPPED | EX_SIGS_DYNAMIC, 0);
    ex_sender_release(s);

    /* A child that never errors: fn is never called, signatures unchanged. */
    s = ex_upon_error(ex_just(ex_double(1.0)), ue_two, &sn, EX_SIG(EX_T_STR, EX_T_INT));
    expect_sigs(s, EX_SIG(EX_T_DOUBLE), 0xff, 0); /* just(double) neither errors nor stops */
    ex_sender_release(s);

    /* Stopped passes through. */
    s = ex_upon_error(ex_just_stopped(), ue_void, &sn, EX_SIG0);
    expect_no_value_sigs(s, EX_SIGS_STOPPED);
    ex_sender_release(s);
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}

Test(exec_then, upon_error_result_of_wrong_type_is_einval) {
    seen sn = { 0 };
    expect_sync_error(ex_upon_error(ex_just_error(ex_err(EX_EUSER, "e")), ue_wrong_type, &sn, EX_SIG(EX_T_INT)), EX_EINVAL);
    cr_assert_eq(sn.calls, 1);
    expect_no_leaks();
}
