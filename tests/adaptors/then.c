/* SPDX-License-Identifier: MIT */
/* [exec.then]: then. upon_error and upon_stopped are in their own files
 * (same suite). */
#include <string.h>

#include "adaptors/callbacks.h"

TEST_SUITE(exec_then, 10);

/* ------------------------------------------------------------------ then */

Test(exec_then, then_calls_fn_with_the_values_and_sends_its_result) {
    seen sn = { 0 };
    ex_sender *s = ex_then(ex_just(ex_int(3), ex_int(4)), fn_add, &sn, EX_SIG(EX_T_INT, EX_T_INT), EX_SIG(EX_T_INT));
    cr_assert_eq(ex_sender_status(s).code, 0);
    expect_sync_int(s, 7);
    expect_called_once_with(&sn, 2);
    cr_assert_eq(sn.in[0].type, EX_T_INT);
    cr_assert_eq(sn.in[0].as.i, 3);
    cr_assert_eq(sn.in[1].as.i, 4);
    expect_no_leaks();
}

Test(exec_then, then_runs_inline_where_the_child_completes) {
    seen sn = { 0 };
    rec rc;
    rec_init(&rc);
    run_in_place(ex_then(ex_just(ex_int(1), ex_int(1)), fn_add, &sn, EX_SIG(EX_T_INT, EX_T_INT), EX_SIG(EX_T_INT)), &rc);
    rec_expect_values(&rc, 1);
    cr_assert_eq(rc.v[0].as.i, 2);
    cr_assert_eq(sn.thread, test_thread_id());
    cr_assert_eq(rc.thread, test_thread_id());
    expect_no_leaks();
}

Test(exec_then, then_fn_not_called_before_start) {
    seen sn = { 0 };
    rec rc;
    rec_init(&rc);
    ex_sender *s = ex_then(ex_just(ex_int(5)), fn_twice, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    expect_called_only_at_start(s, &sn, &rc);
    rec_expect_value_int(&rc, 10);
    expect_no_leaks();
}

Test(exec_then, then_is_multi_shot) {
    seen sn = { 0 };
    ex_sender *s = ex_then(ex_just(ex_int(21)), fn_twice, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    for (int i = 0; i < 3; i++) {
        expect_sync_int(ex_sender_retain(s), 42);
    }
    cr_assert_eq(sn.calls, 3);
    ex_sender_release(s);
    expect_no_leaks();
}

static ex_sender *then_twice(ex_sender *child, seen *sn) {
    return ex_then(child, fn_twice, sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
}

Test(exec_then, then_passes_error_through_unchanged) {
    expect_error_passes(then_twice);
    expect_no_leaks();
}

Test(exec_then, then_passes_stopped_through) {
    expect_stopped_passes(then_twice);
    seen sn = { 0 };
    ex_result r = ex_sync_wait(then_twice(ex_just_stopped(), &sn));
    expect_stopped(&r);
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}

Test(exec_then, then_fn_error_becomes_set_error) {
    seen sn = { 0 };
    ex_result r = ex_sync_wait(ex_then(ex_just(ex_int(1)), fn_fail, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)));
    expect_error(&r, EX_EUSER + 2);
    cr_assert_str_eq(r.error.msg, fail_msg);
    cr_assert_eq(r.error.data, &fail_payload);
    cr_assert_eq(sn.calls, 1);
    expect_no_leaks();
}

Test(exec_then, then_fn_error_without_message_gets_one) {
    seen sn = { 0 };
    ex_result r = ex_sync_wait(ex_then(ex_just(ex_int(1)), fn_fail_nomsg, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)));
    expect_error(&r, EX_EUSER + 3); /* asserts msg != NULL */
    cr_assert_eq(sn.calls, 1);
    expect_no_leaks();
}

Test(exec_then, then_no_output_values) {
    seen sn = { 0 };
    ex_sender *s = ex_then(ex_just(ex_int(9)), fn_void, &sn, EX_SIG(EX_T_INT), EX_SIG0);
    const ex_sigs *sg = ex_sender_sigs(s);
    cr_assert_eq(sg->nvalues, 1);
    cr_assert_eq(sg->values[0].arity, 0);
    ex_result r = ex_sync_wait(s);
    expect_value_arity(&r, 0);
    expect_called_once_with(&sn, 1);
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(exec_then, then_no_input_values) {
    seen sn = { 0 };
    expect_sync_int(ex_then(ex_just(), fn_count, &sn, EX_SIG0, EX_SIG(EX_T_INT)), 0);
    expect_called_once_with(&sn, 0);
    expect_no_leaks();
}

Test(exec_then, then_several_output_values) {
    seen sn = { 0 };
    ex_sender *s = ex_then(ex_just(ex_int(5)), fn_three, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT, EX_T_DOUBLE, EX_T_STR));
    ex_result r = ex_sync_wait(s);
    expect_values_text(&r, "int 6; double 2.5; str \"tag\"");
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(exec_then, then_chained) {
    seen a = { 0 }, b = { 0 };
    ex_sender *s = ex_then(ex_then(ex_just(ex_int(3)), fn_twice, &a, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)), fn_twice, &b,
                           EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    expect_sync_int(s, 12);
    cr_assert_eq(a.calls, 1);
    cr_assert_eq(b.calls, 1);
    cr_assert_eq(b.in[0].as.i, 6);
    expect_no_leaks();
}

Test(exec_then, then_result_signatures) {
    seen sn = { 0 };
    /* The child's value signature is replaced by fn's output. */
    ex_sender *s = ex_then(ex_just(ex_int(5)), fn_three, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT, EX_T_DOUBLE, EX_T_STR));
    /* just never stops, neither does then over it; fn may fail */
    expect_sigs(s, EX_SIG(EX_T_INT, EX_T_DOUBLE, EX_T_STR), EX_SIGS_STOPPED | EX_SIGS_DYNAMIC | EX_SIGS_ERROR,
                EX_SIGS_ERROR);
    ex_sender_release(s);

    /* A child that cannot send values: fn is never called, no value signature. */
    s = ex_then(ex_just_error(ex_err(EX_EUSER, "e")), fn_twice, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    cr_assert_eq(ex_sender_status(s).code, 0);
    expect_no_value_sigs(s, EX_SIGS_ERROR);
    ex_sender_release(s);

    s = ex_then(ex_just_stopped(), fn_twice, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    expect_no_value_sigs(s, EX_SIGS_STOPPED); /* stopped passes through; fn is never called */
    ex_sender_release(s);
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}

Test(exec_then, then_keeps_stopped_signature_of_the_child) {
    ex_run_loop loop;
    test_loop_init(&loop);
    seen sn = { 0 };
    ex_sender *s = ex_then(ex_schedule(ex_run_loop_scheduler(&loop)), fn_count, &sn, EX_SIG0, EX_SIG(EX_T_INT));
    expect_sigs(s, EX_SIG(EX_T_INT), EX_SIGS_STOPPED, EX_SIGS_STOPPED); /* run_loop schedule may complete stopped */
    ex_sender_release(s);
    test_loop_destroy(&loop);
    expect_no_leaks();
}

Test(exec_then, then_input_arity_mismatch_is_invalid) {
    seen sn = { 0 };
    ex_sender *s = ex_then(ex_just(ex_int(1), ex_int(2)), fn_twice, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    expect_invalid(s, EX_EINVAL);
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}

Test(exec_then, then_input_type_mismatch_is_invalid) {
    seen sn = { 0 };
    ex_sender *s = ex_then(ex_just(ex_str("x")), fn_twice, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    expect_invalid(s, EX_EINVAL);
    /* Too few values is a mismatch as well. */
    s = ex_then(ex_just(), fn_twice, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    expect_invalid_status(s, EX_EINVAL);
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}

Test(exec_then, then_any_type_input_accepts_every_type) {
    seen sn = { 0 };
    expect_sync_int(ex_then(ex_just(ex_str("s")), fn_count, &sn, EX_SIG_ANY1, EX_SIG(EX_T_INT)), 1);
    cr_assert_eq(sn.in[0].type, EX_T_STR);
    expect_sync_int(ex_then(ex_just(ex_double(0.5)), fn_count, &sn, EX_SIG_ANY1, EX_SIG(EX_T_INT)), 1);
    cr_assert_eq(sn.in[0].type, EX_T_DOUBLE);
    cr_assert_eq(sn.calls, 2);
    expect_no_leaks();
}

Test(exec_then, then_variadic_input_accepts_any_arity) {
    seen sn = { 0 };
    expect_sync_int(ex_then(ex_just(), fn_count, &sn, EX_SIG_VARIADIC, EX_SIG(EX_T_INT)), 0);
    expect_sync_int(ex_then(ex_just(ex_int(1)), fn_count, &sn, EX_SIG_VARIADIC, EX_SIG(EX_T_INT)), 1);
    expect_sync_int(
        ex_then(ex_just(ex_int(1), ex_str("a"), ex_double(2.0)), fn_count, &sn, EX_SIG_VARIADIC, EX_SIG(EX_T_INT)), 3);
    cr_assert_eq(sn.in[1].type, EX_T_STR);
    cr_assert_str_eq(sn.in[1].as.s, "a");
    ex_value v[EX_MAX_ARITY];
    for (int i = 0; i < EX_MAX_ARITY; i++) v[i] = ex_int(i);
    expect_sync_int(ex_then(ex_just_n(v, EX_MAX_ARITY), fn_count, &sn, EX_SIG_VARIADIC, EX_SIG(EX_T_INT)), EX_MAX_ARITY);
    cr_assert_eq(sn.in[EX_MAX_ARITY - 1].as.i, EX_MAX_ARITY - 1);
    cr_assert_eq(sn.calls, 4);
    expect_no_leaks();
}

Test(exec_then, then_runtime_arity_mismatch_with_dynamic_child) {
    seen sn = { 0 };
    /* let_value's signatures are known only at run time: the check happens
     * when the values arrive. */
    ex_sender *child = ex_let_value(ex_just(ex_int(1)), let_pair, NULL, EX_SIG(EX_T_INT));
    cr_assert_neq(ex_sender_sigs(child)->flags & EX_SIGS_DYNAMIC, 0);
    ex_sender *s = ex_then(child, fn_twice, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    cr_assert_eq(ex_sender_status(s).code, 0, "cannot be rejected at build time");
    expect_sync_error(s, EX_EINVAL);
    cr_assert_eq(sn.calls, 0, "fn must not see values that do not match its input");
    expect_no_leaks();
}

Test(exec_then, then_runtime_type_mismatch_with_dynamic_child) {
    seen sn = { 0 };
    ex_sender *s = ex_then(ex_let_value(ex_just(ex_int(1)), let_str, NULL, EX_SIG(EX_T_INT)), fn_twice, &sn,
                           EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    cr_assert_eq(ex_sender_status(s).code, 0);
    expect_sync_error(s, EX_EINVAL);
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}

static const ex_key any_key = { "test.then.any_key", true };

Test(exec_then, then_checks_types_at_run_time_when_the_child_declares_any) {
    /* read_env of a user key declares one value of any type: compatible with
     * fn's int input at build time, so the type is checked when it arrives. */
    seen sn = { 0 };
    ex_sender *s = ex_then(ex_write_env(ex_read_env(&any_key, EX_T_ANY), &any_key, ex_str("a string")), fn_twice, &sn,
                           EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    cr_assert_eq(ex_sender_status(s).code, 0);
    expect_sync_error(s, EX_EINVAL);
    cr_assert_eq(sn.calls, 0);
    expect_sync_int(ex_then(ex_write_env(ex_read_env(&any_key, EX_T_ANY), &any_key, ex_int(4)), fn_twice, &sn,
                             EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)), 8);
    cr_assert_eq(sn.calls, 1);
    expect_no_leaks();
}

Test(exec_then, then_dynamic_child_with_matching_values_works) {
    seen sn = { 0 };
    ex_sender *s = ex_then(ex_let_value(ex_just(ex_int(8)), let_same, NULL, EX_SIG(EX_T_INT)), fn_twice, &sn,
                           EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    const ex_sigs *sg = ex_sender_sigs(s);
    cr_assert_eq(sg->nvalues, 1, "then's output is known even when its input is not");
    cr_assert_eq(sg->values[0].types[0], EX_T_INT);
    expect_sync_int(s, 16);
    cr_assert_eq(sn.calls, 1);
    /* Variadic input with a dynamic child: no check, fn sees the pair. */
    expect_sync_int(ex_then(ex_let_value(ex_just(ex_int(1)), let_pair, NULL, EX_SIG(EX_T_INT)), fn_count, &sn,
                             EX_SIG_VARIADIC, EX_SIG(EX_T_INT)), 2);
    expect_no_leaks();
}

Test(exec_then, then_result_of_wrong_type_is_einval) {
    seen sn = { 0 };
    expect_sync_error(ex_then(ex_just(ex_int(1)), fn_wrong_type, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)), EX_EINVAL);
    cr_assert_eq(sn.calls, 1);
    expect_no_leaks();
}

Test(exec_then, then_any_output_left_unset_is_einval) {
    /* Declared output "one datum of any type", but fn writes nothing: the
     * datum has no type of its own. */
    seen sn = { 0 };
    expect_sync_error(ex_then(ex_just(ex_int(1)), fn_void, &sn, EX_SIG(EX_T_INT), EX_SIG_ANY1), EX_EINVAL);
    cr_assert_eq(sn.calls, 1);
    /* Written: the datum keeps its own type. */
    expect_sync_int(ex_then(ex_just(ex_int(1)), fn_twice, &sn, EX_SIG(EX_T_INT), EX_SIG_ANY1), 2);
    expect_no_leaks();
}

static ex_error ue_writes_two(void *ctx, ex_error e, ex_value *out) {
    (void)ctx, (void)e;
    out[0] = ex_int(1);
    out[1] = ex_int(2);
    return ex_ok();
}

Test(exec_then, a_result_written_past_the_declared_output_is_einval) {
    ex_result r = ex_sync_wait(ex_then(ex_just(ex_int(1)), fn_writes_two, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)));
    expect_error(&r, EX_EINVAL);
    cr_assert(strstr(r.error.msg, "more results"), "%s", r.error.msg);
    ex_result_destroy(&r);
    expect_sync_error(ex_upon_error(ex_just_error(ex_err(EX_EUSER, "x")), ue_writes_two, NULL, EX_SIG(EX_T_INT)), EX_EINVAL);
    /* Declared two: both are sent. */
    expect_sync_values(ex_then(ex_just(ex_int(1)), fn_writes_two, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT, EX_T_INT)), 2);
    expect_no_leaks();
}

/* Signature errors name the types on both sides. */
Test(exec_then, signature_errors_name_the_types) {
    seen sn = { 0 };
    ex_sender *s = ex_then(ex_just(ex_int(1), ex_str("x")), fn_add, &sn, EX_SIG(EX_T_INT, EX_T_INT), EX_SIG(EX_T_INT));
    ex_error e = ex_sender_status(s);
    cr_assert_eq(e.code, EX_EINVAL);
    cr_assert_str_eq(e.msg, "ex_then(fn_add): the input sender sends (int, str); the function takes (int, int)");
    ex_sender_release(s);
    ex_result r = ex_sync_wait(ex_then(ex_just(ex_int(1)), fn_wrong_type, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)));
    expect_error(&r, EX_EINVAL);
    cr_assert(strstr(r.error.msg, "do not match its declared output (int)"), "%s", r.error.msg);
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(exec_then, then_output_arity_too_large_is_invalid) {
    seen sn = { 0 };
    ex_sig big = EX_SIG0;
    big.arity = EX_MAX_ARITY + 1;
    ex_sender *s = ex_then(ex_just(ex_int(1)), fn_twice, &sn, EX_SIG(EX_T_INT), big);
    expect_invalid_status(s, EX_EINVAL);
    expect_no_leaks();
}

Test(exec_then, null_child_or_function_is_invalid) {
    seen sn = { 0 };
    ex_sender *s = ex_then(NULL, fn_twice, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    expect_invalid(s, EX_EINVAL);

    s = ex_then(ex_just(ex_int(1)), NULL, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    expect_invalid(s, EX_EINVAL);

    s = ex_upon_error(NULL, ue_code, &sn, EX_SIG(EX_T_INT));
    expect_invalid_status(s, EX_EINVAL);
    s = ex_upon_error(ex_just_error(ex_err(EX_EUSER, "e")), NULL, &sn, EX_SIG(EX_T_INT));
    expect_invalid(s, EX_EINVAL);

    s = ex_upon_stopped(NULL, us_42, &sn, EX_SIG(EX_T_INT));
    expect_invalid_status(s, EX_EINVAL);
    s = ex_upon_stopped(ex_just_stopped(), NULL, &sn, EX_SIG(EX_T_INT));
    expect_invalid(s, EX_EINVAL);
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}

Test(exec_then, invalid_child_status_propagates) {
    seen sn = { 0 };
    ex_value v[EX_MAX_ARITY + 1];
    for (int i = 0; i <= EX_MAX_ARITY; i++) v[i] = ex_int(i);
    ex_sender *s = ex_then(ex_just_n(v, EX_MAX_ARITY + 1), fn_count, &sn, EX_SIG_VARIADIC, EX_SIG(EX_T_INT));
    expect_invalid_status(s, EX_EINVAL);
    s = ex_upon_error(ex_just_n(v, EX_MAX_ARITY + 1), ue_code, &sn, EX_SIG(EX_T_INT));
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL, "an invalid child is not an error completion to handle");
    expect_sync_error(s, EX_EINVAL);
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}

static ex_scheduler sched_attr(const ex_sender *s, const ex_key *key, bool *found) {
    ex_scheduler out = { 0, 0 };
    *found = ex_get_completion_scheduler(s, key, &out);
    return out;
}

Test(exec_then, completion_scheduler_is_forwarded_from_the_child) {
    ex_run_loop loop;
    ex_scheduler sch = test_loop_init(&loop);
    seen sn = { 0 };
    ex_sender *s = ex_then(ex_schedule(sch), fn_count, &sn, EX_SIG0, EX_SIG(EX_T_INT));
    bool found;
    ex_scheduler got = sched_attr(s, &ex_key_completion_scheduler_value, &found);
    cr_assert(found, "then over schedule(run_loop) must answer get_completion_scheduler<set_value>");
    cr_assert(ex_scheduler_equal(got, sch));
    got = sched_attr(s, &ex_key_completion_scheduler_stopped, &found);
    cr_assert(found);
    cr_assert(ex_scheduler_equal(got, sch));

    /* And the value is indeed produced on the loop. */
    rec rc;
    rec_init(&rc);
    ex_operation *op = run_start(s, &rc);
    cr_assert_eq(rec_total(&rc), 0, "schedule on a run_loop completes when the loop runs");
    test_loop_drain(&loop);
    cr_assert_eq(rc.values, 1);
    cr_assert_eq(rc.v[0].type, EX_T_INT);
    cr_assert_eq(rc.v[0].as.i, 0);
    cr_assert_eq(sn.calls, 1);
    run_destroy_release(op, s);

    /* upon_error and upon_stopped forward the child's attributes too. */
    s = ex_upon_stopped(ex_schedule(sch), us_void, &sn, EX_SIG0);
    got = sched_attr(s, &ex_key_completion_scheduler_value, &found);
    cr_assert(found);
    cr_assert(ex_scheduler_equal(got, sch));
    ex_sender_release(s);
    s = ex_upon_error(ex_schedule(sch), ue_void, &sn, EX_SIG0);
    got = sched_attr(s, &ex_key_completion_scheduler_value, &found);
    cr_assert(found);
    cr_assert(ex_scheduler_equal(got, sch));
    ex_sender_release(s);

    /* A child without a completion scheduler: none. */
    s = ex_then(ex_just(), fn_count, &sn, EX_SIG0, EX_SIG(EX_T_INT));
    (void)sched_attr(s, &ex_key_completion_scheduler_value, &found);
    cr_assert_not(found);
    ex_sender_release(s);
    test_loop_destroy(&loop);
    expect_no_leaks();
}

Test(exec_then, out_of_memory_while_building) {
    seen sn = { 0 };
    for (int kind = 0; kind < 3; kind++) {
        ex_sender *child = kind == 0 ? ex_just(ex_int(1)) : kind == 1 ? ex_just_error(ex_err(EX_EUSER, "e")) : ex_just_stopped();
        test_alloc_fail_next(); /* the adaptor's own allocation */
        ex_sender *s = kind == 0   ? ex_then(child, fn_twice, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT))
                       : kind == 1 ? ex_upon_error(child, ue_code, &sn, EX_SIG(EX_T_INT))
                                   : ex_upon_stopped(child, us_42, &sn, EX_SIG(EX_T_INT));
        expect_built_enomem(s);
    }
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}
