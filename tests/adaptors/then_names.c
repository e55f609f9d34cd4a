/* SPDX-License-Identifier: MIT */
/* Stage names in the messages of then, upon_error and upon_stopped
 * (then.h): through the C macros (the fn argument's spelling), the _named
 * forms, and the functions themselves (no name). */
#include <string.h>

#include "adaptors/callbacks.h"

TEST_SUITE(then_names, 10);

/* (int) -> (int, str): the stage before the one that fails. */
static ex_error parse_request(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)n;
    out[0] = in[0];
    out[1] = ex_str("GET");
    return ex_ok();
}

/* A pipeline of four thens whose third refuses what the second sends:
 * the message says which of them it is, and with which types. */
Test(then_names, the_macro_names_the_failing_stage_of_a_pipeline) {
    seen sn = { 0 };
    ex_sender *s = ex_then(ex_just(ex_int(20)), fn_twice, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    s = ex_then(s, parse_request, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT, EX_T_STR));
    s = ex_then(s, fn_add, &sn, EX_SIG(EX_T_INT, EX_T_INT), EX_SIG(EX_T_INT));
    s = ex_then(s, fn_twice, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    expect_invalid_msg(s, EX_EINVAL, "ex_then(fn_add): the input sender sends (int, str); the function takes (int, int)");
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}

Test(then_names, the_named_form_and_the_function_name_the_stage_or_not) {
    seen sn = { 0 };
    expect_invalid_msg(ex_then_named(ex_just(ex_int(1), ex_str("x")), fn_add, &sn, EX_SIG(EX_T_INT, EX_T_INT),
                                     EX_SIG(EX_T_INT), "sum"),
                       EX_EINVAL, "ex_then(sum): the input sender sends (int, str); the function takes (int, int)");
    expect_invalid_msg((ex_then)(ex_just(ex_int(1), ex_str("x")), fn_add, &sn, EX_SIG(EX_T_INT, EX_T_INT), EX_SIG(EX_T_INT)),
                       EX_EINVAL, "ex_then: the input sender sends (int, str); the function takes (int, int)");
    expect_invalid_msg(ex_then_named(ex_just(ex_int(1), ex_str("x")), fn_add, &sn, EX_SIG(EX_T_INT, EX_T_INT),
                                     EX_SIG(EX_T_INT), NULL),
                       EX_EINVAL, "ex_then: the input sender sends (int, str); the function takes (int, int)");
    /* &ex_then is the function (the macro is function-like). */
    ex_sender *(*then_fn)(ex_sender *, ex_then_fn, void *, ex_sig, ex_sig) = &ex_then;
    expect_invalid_msg(then_fn(ex_just(ex_double(0.5)), fn_twice, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)), EX_EINVAL,
                       "ex_then: the input sender sends (double); the function takes (int)");
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}

#define PICKED_FN fn_add

/* The name is the argument's spelling: a cast or a macro shows as written;
 * a long one is cut. */
Test(then_names, the_name_is_the_spelling_of_the_fn_argument) {
    seen sn = { 0 };
    expect_invalid_msg(ex_then(ex_just(ex_str("x")), (ex_then_fn)fn_twice, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)),
                       EX_EINVAL, "ex_then((ex_then_fn)fn_twice): the input sender sends (str); the function takes (int)");
    expect_invalid_msg(ex_then(ex_just(ex_str("x")), PICKED_FN, &sn, EX_SIG(EX_T_INT, EX_T_INT), EX_SIG(EX_T_INT)),
                       EX_EINVAL, "ex_then(PICKED_FN): the input sender sends (str); the function takes (int, int)");
    expect_invalid_msg(ex_then_named(ex_just(ex_str("x")), fn_twice, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT),
                                     "a_name_much_longer_than_anyone_would_want_in_a_message_0123456789"),
                       EX_EINVAL,
                       "ex_then(a_name_much_longer_than_anyone_would_want_in_a_m...): the input sender sends (str); "
                       "the function takes (int)");
    expect_no_leaks();
}

Test(then_names, argument_errors_name_the_stage) {
    seen sn = { 0 };
    expect_invalid_msg(ex_then(NULL, fn_twice, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)), EX_EINVAL,
                       "ex_then(fn_twice): NULL input sender");
    expect_invalid_msg(ex_then_named(ex_just(ex_int(1)), NULL, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT), "step"),
                       EX_EINVAL, "ex_then(step): NULL function");
    expect_invalid_msg((ex_then)(ex_just(ex_int(1)), NULL, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)), EX_EINVAL,
                       "ex_then: NULL function");
    ex_sig big = EX_SIG0;
    big.arity = EX_MAX_ARITY + 1;
    expect_invalid_msg(ex_then(ex_just(ex_int(1)), fn_twice, &sn, EX_SIG(EX_T_INT), big), EX_EINVAL,
                       "ex_then(fn_twice): the output signature has 9 values; at most EX_MAX_ARITY (8) fit");
    /* An invalid child's own message goes through unchanged. */
    ex_sender *bad = ex_then(ex_just(ex_str("x")), fn_twice, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    expect_invalid_msg(ex_then_named(bad, fn_twice, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT), "outer"), EX_EINVAL,
                       "ex_then(fn_twice): the input sender sends (str); the function takes (int)");
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}

/* let_value's values are known only at run time: then checks them when
 * they arrive. */
Test(then_names, values_that_arrive_mismatched_name_the_stage) {
    seen sn = { 0 };
    expect_sync_error_msg(ex_then(ex_let_value(ex_just(), let_str, NULL, EX_SIG0), fn_add, &sn,
                                  EX_SIG(EX_T_INT, EX_T_INT), EX_SIG(EX_T_INT)),
                          EX_EINVAL, "ex_then(fn_add): the child sent (str); the function takes (int, int)");
    expect_sync_error_msg(ex_then_named(ex_let_value(ex_just(), let_str, NULL, EX_SIG0), fn_add, &sn,
                                        EX_SIG(EX_T_INT, EX_T_INT), EX_SIG(EX_T_INT), "sum"),
                          EX_EINVAL, "ex_then(sum): the child sent (str); the function takes (int, int)");
    expect_sync_error_msg((ex_then)(ex_let_value(ex_just(), let_str, NULL, EX_SIG0), fn_add, &sn,
                                    EX_SIG(EX_T_INT, EX_T_INT), EX_SIG(EX_T_INT)),
                          EX_EINVAL, "ex_then: the child sent (str); the function takes (int, int)");
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}

Test(then_names, results_that_break_the_declared_output_name_the_stage) {
    seen sn = { 0 };
    expect_sync_error_msg(ex_then(ex_just(ex_int(1)), fn_wrong_type, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)), EX_EINVAL,
                          "ex_then(fn_wrong_type): the function's results (double) do not match its declared output (int)");
    expect_sync_error_msg(ex_then_named(ex_just(ex_int(1)), fn_writes_two, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT), "pair"),
                          EX_EINVAL, "ex_then(pair): the function wrote more results than its declared output (int) has");
    expect_sync_error_msg((ex_then)(ex_just(ex_int(1)), fn_writes_two, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)), EX_EINVAL,
                          "ex_then: the function wrote more results than its declared output (int) has");
    /* An error without a message gets the stage's. */
    expect_sync_error_msg(ex_then(ex_just(ex_int(1)), fn_fail_nomsg, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)),
                          EX_EUSER + 3, "ex_then(fn_fail_nomsg): the function failed");
    expect_sync_error_msg((ex_then)(ex_just(ex_int(1)), fn_fail_nomsg, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)),
                          EX_EUSER + 3, "ex_then: the function failed");
    expect_no_leaks();
}

/* ------------------------------------------------------------ upon_error */

Test(then_names, upon_error_messages_name_the_stage) {
    seen sn = { 0 };
    expect_sync_error_msg(ex_upon_error(ex_just_error(ex_err(EX_EUSER, "x")), ue_wrong_type, &sn, EX_SIG(EX_T_INT)),
                          EX_EINVAL,
                          "ex_upon_error(ue_wrong_type): the function's results (str) do not match its declared output (int)");
    expect_sync_error_msg(ex_upon_error_named(ex_just_error(ex_err(EX_EUSER, "x")), ue_wrong_type, &sn, EX_SIG(EX_T_INT),
                                              "recover"),
                          EX_EINVAL, "ex_upon_error(recover): the function's results (str) do not match its declared output (int)");
    expect_sync_error_msg((ex_upon_error)(ex_just_error(ex_err(EX_EUSER, "x")), ue_wrong_type, &sn, EX_SIG(EX_T_INT)),
                          EX_EINVAL, "ex_upon_error: the function's results (str) do not match its declared output (int)");
    ex_sig big = EX_SIG0;
    big.arity = EX_MAX_ARITY + 1;
    expect_invalid_msg(ex_upon_error(ex_just_error(ex_err(EX_EUSER, "x")), ue_code, &sn, big), EX_EINVAL,
                       "ex_upon_error(ue_code): the output signature has 9 values; at most EX_MAX_ARITY (8) fit");
    expect_invalid_msg(ex_upon_error_named(NULL, ue_code, &sn, EX_SIG(EX_T_INT), "recover"), EX_EINVAL,
                       "ex_upon_error(recover): NULL input sender");
    expect_invalid_msg((ex_upon_error)(NULL, ue_code, &sn, EX_SIG(EX_T_INT)), EX_EINVAL, "ex_upon_error: NULL input sender");
    expect_no_leaks();
}

/* ---------------------------------------------------------- upon_stopped */

Test(then_names, upon_stopped_messages_name_the_stage) {
    seen sn = { 0 };
    expect_sync_error_msg(ex_upon_stopped(ex_just_stopped(), us_wrong_type, &sn, EX_SIG(EX_T_STR)), EX_EINVAL,
                          "ex_upon_stopped(us_wrong_type): the function's results (int) do not match its declared output (str)");
    expect_sync_error_msg(ex_upon_stopped_named(ex_just_stopped(), us_wrong_type, &sn, EX_SIG(EX_T_STR), "fallback"),
                          EX_EINVAL,
                          "ex_upon_stopped(fallback): the function's results (int) do not match its declared output (str)");
    expect_sync_error_msg((ex_upon_stopped)(ex_just_stopped(), us_wrong_type, &sn, EX_SIG(EX_T_STR)), EX_EINVAL,
                          "ex_upon_stopped: the function's results (int) do not match its declared output (str)");
    expect_invalid_msg(ex_upon_stopped(ex_just_stopped(), NULL, &sn, EX_SIG(EX_T_INT)), EX_EINVAL,
                       "ex_upon_stopped(NULL): NULL function");
    expect_no_leaks();
}
