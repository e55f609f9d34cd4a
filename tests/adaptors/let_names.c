/* SPDX-License-Identifier: MIT */
/* Stage names and types in the messages of let_value, let_value_borrowed,
 * let_error and let_stopped (let.h): through the C macros (the fn
 * argument's spelling), the _named forms, and the functions (no name). */
#include "adaptors/callbacks.h"

TEST_SUITE(let_names, 10);

Test(let_names, an_input_signature_mismatch_names_the_stage_and_the_types) {
    seen sn = { 0 };
    expect_invalid_msg(ex_let_value(ex_just(ex_str("x"), ex_int(1)), lv_times10, &sn, EX_SIG(EX_T_INT)), EX_EINVAL,
                       "ex_let_value(lv_times10): the input sender sends (str, int); the function takes (int)");
    expect_invalid_msg(ex_let_value_named(ex_just(ex_str("x")), lv_times10, &sn, EX_SIG(EX_T_INT), "scale"), EX_EINVAL,
                       "ex_let_value(scale): the input sender sends (str); the function takes (int)");
    expect_invalid_msg((ex_let_value)(ex_just(ex_str("x")), lv_times10, &sn, EX_SIG(EX_T_INT)), EX_EINVAL,
                       "ex_let_value: the input sender sends (str); the function takes (int)");
    expect_invalid_msg(ex_let_value_borrowed(ex_just(ex_double(1.0)), lv_lend, &sn, EX_SIG(EX_T_INT)), EX_EINVAL,
                       "ex_let_value_borrowed(lv_lend): the input sender sends (double); the function takes (int)");
    expect_invalid_msg(ex_let_value_borrowed_named(ex_just(ex_double(1.0)), lv_lend, &sn, EX_SIG(EX_T_INT), "step"),
                       EX_EINVAL, "ex_let_value_borrowed(step): the input sender sends (double); the function takes (int)");
    expect_invalid_msg((ex_let_value_borrowed)(ex_just(ex_double(1.0)), lv_lend, &sn, EX_SIG(EX_T_INT)), EX_EINVAL,
                       "ex_let_value_borrowed: the input sender sends (double); the function takes (int)");
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}

/* The child's values known only at run time (another let): checked as
 * they arrive. */
Test(let_names, values_that_arrive_mismatched_name_the_stage_and_the_types) {
    seen sn = { 0 };
    expect_sync_error_msg(ex_let_value(ex_let_value(ex_just(), let_str, NULL, EX_SIG0), lv_times10, &sn, EX_SIG(EX_T_INT)),
                          EX_EINVAL, "ex_let_value(lv_times10): the child sent (str); the function takes (int)");
    expect_sync_error_msg(ex_let_value_named(ex_let_value(ex_just(), let_str, NULL, EX_SIG0), lv_times10, &sn,
                                             EX_SIG(EX_T_INT), "scale"),
                          EX_EINVAL, "ex_let_value(scale): the child sent (str); the function takes (int)");
    expect_sync_error_msg((ex_let_value)(ex_let_value(ex_just(), let_str, NULL, EX_SIG0), lv_times10, &sn, EX_SIG(EX_T_INT)),
                          EX_EINVAL, "ex_let_value: the child sent (str); the function takes (int)");
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}

Test(let_names, a_function_returning_null_is_named) {
    seen sn = { 0 };
    expect_sync_error_msg(ex_let_value(ex_just(ex_int(1)), lv_null, &sn, EX_SIG(EX_T_INT)), EX_EINVAL,
                          "ex_let_value(lv_null): the function returned NULL");
    expect_sync_error_msg(ex_let_value_borrowed(ex_just(ex_int(1)), lv_null, &sn, EX_SIG(EX_T_INT)), EX_EINVAL,
                          "ex_let_value_borrowed(lv_null): the function returned NULL");
    expect_sync_error_msg(ex_let_error(ex_just_error(ex_err(EX_EUSER, "e")), le_null, &sn), EX_EINVAL,
                          "ex_let_error(le_null): the function returned NULL");
    expect_sync_error_msg(ex_let_error_named(ex_just_error(ex_err(EX_EUSER, "e")), le_null, &sn, "retry"), EX_EINVAL,
                          "ex_let_error(retry): the function returned NULL");
    expect_sync_error_msg((ex_let_error)(ex_just_error(ex_err(EX_EUSER, "e")), le_null, &sn), EX_EINVAL,
                          "ex_let_error: the function returned NULL");
    expect_sync_error_msg(ex_let_stopped(ex_just_stopped(), ls_null, &sn), EX_EINVAL,
                          "ex_let_stopped(ls_null): the function returned NULL");
    expect_sync_error_msg(ex_let_stopped_named(ex_just_stopped(), ls_null, &sn, "resume"), EX_EINVAL,
                          "ex_let_stopped(resume): the function returned NULL");
    expect_sync_error_msg((ex_let_stopped)(ex_just_stopped(), ls_null, &sn), EX_EINVAL,
                          "ex_let_stopped: the function returned NULL");
    cr_assert_eq(sn.calls, 8);
    expect_no_leaks();
}

Test(let_names, argument_errors_name_the_stage) {
    seen sn = { 0 };
    expect_invalid_msg(ex_let_value(NULL, lv_times10, &sn, EX_SIG(EX_T_INT)), EX_EINVAL,
                       "ex_let_value(lv_times10): NULL input sender");
    expect_invalid_msg(ex_let_error_named(ex_just_error(ex_err(EX_EUSER, "e")), NULL, &sn, "retry"), EX_EINVAL,
                       "ex_let_error(retry): NULL function");
    expect_invalid_msg((ex_let_stopped)(NULL, ls_seven, &sn), EX_EINVAL, "ex_let_stopped: NULL input sender");
    expect_no_leaks();
}

Test(let_names, out_of_memory_is_named) {
    seen sn = { 0 };
    sn.ret = ex_just(ex_int(9)); /* prebuilt: the only allocation while running is the inner operation */
    run_with_failing_allocation_msg(ex_let_value(ex_just(ex_int(1)), lv_ret, &sn, EX_SIG(EX_T_INT)),
                                    "ex_let_value(lv_ret): out of memory for the operation of the function's sender");
    run_with_failing_allocation_msg(ex_let_error_named(ex_just_error(ex_err(EX_EUSER, "e")), le_ret, &sn, "retry"),
                                    "ex_let_error(retry): out of memory for the operation of the function's sender");
    run_with_failing_allocation_msg((ex_let_stopped)(ex_just_stopped(), ls_ret, &sn),
                                    "ex_let_stopped: out of memory for the operation of the function's sender");
    ex_sender_release(sn.ret);
    /* Storing the child's datums. */
    ex_value elems[2] = { ex_int(1), ex_int(2) };
    ex_tuple t = { 0, 2, elems };
    run_with_failing_allocation_msg(ex_let_value(ex_just(ex_tuple_value(&t)), lv_count, &sn, EX_SIG(EX_T_TUPLE)),
                                    "ex_let_value(lv_count): out of memory copying tuple values");
    expect_no_leaks();
}

/* The function's sender checked against what the receiver accepts. */
Test(let_names, a_sender_the_receiver_refuses_is_named) {
    rec rc;
    rec_init(&rc);
    ex_sigs ints = ex_sigs_none();
    cr_assert(ex_sigs_add_value(&ints, EX_SIG(EX_T_INT)));
    ints.flags = EX_SIGS_ERROR | EX_SIGS_STOPPED;
    rc.vt.accepts = &ints;
    run_in_place(ex_let_value(ex_just(), let_str, NULL, EX_SIG0), &rc);
    rec_expect_error(&rc, EX_EINVAL);
    cr_assert_str_eq(rc.err.msg, "ex_let_value(let_str): the sender has a value signature the receiver does not accept");
    expect_no_leaks();
}
