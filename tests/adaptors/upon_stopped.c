/* SPDX-License-Identifier: MIT */
/* [exec.then]: upon_stopped (suite exec_then, declared in then.c). */
#include "adaptors/callbacks.h"

/* ---------------------------------------------------------- upon_stopped */

Test(exec_then, upon_stopped_calls_fn_and_sends_its_result) {
    seen sn = { 0 };
    rec rc;
    rec_init(&rc);
    run_in_place(ex_upon_stopped(ex_just_stopped(), us_42, &sn, EX_SIG(EX_T_INT)), &rc);
    rec_expect_value_int(&rc, 42);
    cr_assert_eq(sn.calls, 1);
    cr_assert_eq(sn.thread, test_thread_id());
    expect_no_leaks();
}

Test(exec_then, upon_stopped_of_a_stopped_schedule) {
    /* schedule on a run_loop whose receiver asked to stop completes stopped;
     * upon_stopped turns it into a value, on the loop. */
    ex_run_loop loop;
    test_loop_init(&loop);
    seen sn = { 0 };
    rec rc;
    rec_init(&rc);
    rec_with_stop(&rc);
    ex_sender *s = ex_upon_stopped(ex_schedule(ex_run_loop_scheduler(&loop)), us_42, &sn, EX_SIG(EX_T_INT));
    ex_operation *op = run_start(s, &rc);
    ex_stop_source_request_stop(&rc.stop);
    cr_assert_eq(sn.calls, 0);
    test_loop_drain(&loop);
    cr_assert_eq(rc.values, 1);
    cr_assert_eq(rec_total(&rc), 1);
    cr_assert_eq(rc.v[0].as.i, 42);
    cr_assert_eq(sn.calls, 1);
    run_destroy_release(op, s);
    test_loop_destroy(&loop);
    expect_no_leaks();
}

static ex_sender *upon_stopped_42(ex_sender *child, seen *sn) { return ex_upon_stopped(child, us_42, sn, EX_SIG(EX_T_INT)); }

Test(exec_then, upon_stopped_passes_values_and_errors_through) {
    expect_values_pass(upon_stopped_42);
    expect_error_passes(upon_stopped_42);
    expect_no_leaks();
}

Test(exec_then, upon_stopped_fn_not_called_before_start) {
    seen sn = { 0 };
    rec rc;
    rec_init(&rc);
    ex_sender *s = ex_upon_stopped(ex_just_stopped(), us_42, &sn, EX_SIG(EX_T_INT));
    expect_called_only_at_start(s, &sn, &rc);
    cr_assert_eq(rc.values, 1);
    expect_no_leaks();
}

Test(exec_then, upon_stopped_fn_error_becomes_set_error) {
    seen sn = { 0 };
    ex_result r = ex_sync_wait(ex_upon_stopped(ex_just_stopped(), us_fail, &sn, EX_SIG(EX_T_INT)));
    expect_error(&r, EX_EUSER + 5);
    cr_assert_str_eq(r.error.msg, fail_msg);
    cr_assert_eq(sn.calls, 1);
    expect_no_leaks();
}

Test(exec_then, upon_stopped_no_output_and_several_outputs) {
    seen sn = { 0 };
    ex_result r = ex_sync_wait(ex_upon_stopped(ex_just_stopped(), us_void, &sn, EX_SIG0));
    expect_value_arity(&r, 0);
    r = ex_sync_wait(ex_upon_stopped(ex_just_stopped(), us_two, &sn, EX_SIG(EX_T_BOOL, EX_T_UINT)));
    expect_value_arity(&r, 2);
    cr_assert_eq(r.values[0].type, EX_T_BOOL);
    cr_assert(r.values[0].as.b);
    cr_assert_eq(r.values[1].type, EX_T_UINT);
    cr_assert_eq(r.values[1].as.u, 7u);
    cr_assert_eq(sn.calls, 2);
    expect_no_leaks();
}

Test(exec_then, upon_stopped_result_signatures) {
    seen sn = { 0 };
    ex_sender *s = ex_upon_stopped(ex_just_stopped(), us_two, &sn, EX_SIG(EX_T_BOOL, EX_T_UINT));
    /* upon_stopped consumes the stopped channel */
    expect_sigs(s, EX_SIG(EX_T_BOOL, EX_T_UINT), EX_SIGS_STOPPED | EX_SIGS_DYNAMIC, 0);
    ex_sender_release(s);

    /* Child that never stops: unchanged. */
    s = ex_upon_stopped(ex_just(ex_int(1)), us_two, &sn, EX_SIG(EX_T_BOOL, EX_T_UINT));
    expect_sigs(s, EX_SIG(EX_T_INT), 0xff, 0);
    ex_sender_release(s);

    /* Child with a value and stopped: both value signatures. */
    ex_run_loop loop;
    test_loop_init(&loop);
    s = ex_upon_stopped(ex_schedule(ex_run_loop_scheduler(&loop)), us_42, &sn, EX_SIG(EX_T_INT));
    const ex_sigs *sg = ex_sender_sigs(s);
    cr_assert_eq(sg->nvalues, 2);
    cr_assert(sigs_have(sg, EX_SIG0) && sigs_have(sg, EX_SIG(EX_T_INT)));
    cr_assert_eq(sg->flags & EX_SIGS_STOPPED, 0);
    ex_sender_release(s);
    test_loop_destroy(&loop);
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}

Test(exec_then, upon_stopped_result_of_wrong_type_is_einval) {
    seen sn = { 0 };
    expect_sync_error(ex_upon_stopped(ex_just_stopped(), us_wrong_type, &sn, EX_SIG(EX_T_STR)), EX_EINVAL);
    cr_assert_eq(sn.calls, 1);
    expect_no_leaks();
}
