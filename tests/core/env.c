/* SPDX-License-Identifier: MIT */
/* [exec.queries], [exec.fwd.env], write-env: environments, forwarding and
 * defaults.  Also: env_allocator.c (the allocator a running operation
 * uses), env_completion_scheduler.c, env_chains.c (env pairs, deep chains). */
#include "core/env_fixtures.h"

TEST_SUITE(exec_env, 10);

/* ----------------------------------------------------------- forwarding */

Test(exec_env, standard_keys_are_forwarding) {
    cr_assert(ex_key_get_scheduler.forwarding);
    cr_assert(ex_key_get_delegation_scheduler.forwarding);
    cr_assert(ex_key_get_stop_token.forwarding);
    cr_assert(ex_key_get_allocator.forwarding);
    cr_assert(ex_key_completion_scheduler_value.forwarding);
    cr_assert(ex_key_completion_scheduler_error.forwarding);
    cr_assert(ex_key_completion_scheduler_stopped.forwarding);
    expect_no_leaks();
}

Test(exec_env, fwd_env_answers_forwarding_keys_only) {
    ex_env_pair p;
    ex_env_pair_init(&p, &local_key, ex_int(1), ex_env_empty());
    p.key2 = &fwd_key;
    p.value2 = ex_int(2);
    ex_env e = ex_env_of_pair(&p);
    ex_value v;
    cr_assert(ex_env_query(e, &local_key, &v));
    cr_assert_eq(v.as.i, 1);
    cr_assert(ex_env_query(e, &fwd_key, &v));
    cr_assert_eq(v.as.i, 2);
    ex_env f = ex_env_forward(e);
    cr_assert_not(ex_env_query(f, &local_key, &v), "FWD-ENV must not answer a non-forwarding key");
    v = ex_int(0);
    cr_assert(ex_env_query(f, &fwd_key, &v));
    cr_assert_eq(v.as.i, 2);
    cr_assert_not(ex_env_query(e, &other_key, &v));
    cr_assert_not(ex_env_query(e, NULL, &v));
    cr_assert_not(ex_env_query(ex_env_empty(), &fwd_key, &v));
    expect_no_leaks();
}

Test(exec_env, fwd_env_filters_non_forwarding_keys_of_the_parent_chain) {
    ex_env_pair parent, child;
    ex_env_pair_init(&parent, &local_key, ex_int(1), ex_env_empty());
    /* A node added below a FWD-ENV sees only forwarding keys of what is above. */
    ex_env_pair_init(&child, &other_key, ex_int(3), ex_env_forward(ex_env_of_pair(&parent)));
    ex_value v;
    cr_assert(ex_env_query(ex_env_of_pair(&child), &other_key, &v));
    cr_assert_eq(v.as.i, 3);
    cr_assert_not(ex_env_query(ex_env_of_pair(&child), &local_key, &v));
    expect_no_leaks();
}

Test(exec_env, forwarding_user_key_passes_through_then) {
    expect_sync_int(
        ex_write_env(ex_then(ex_read_env(&fwd_key, EX_T_INT), plus1, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)), &fwd_key,
                     ex_int(41)), 42);
    expect_no_leaks();
}

Test(exec_env, standard_key_passes_through_adaptors) {
    /* get_scheduler from sync_wait reaches a read_env below then. */
    int calls = 0;
    ex_result r = ex_sync_wait(ex_then(ex_read_env(&ex_key_get_scheduler, EX_T_SCHED), identity1, &calls,
                                       EX_SIG(EX_T_SCHED), EX_SIG(EX_T_SCHED)));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_str_eq(r.values[0].as.sched.vt->name, "run_loop");
    cr_assert_eq(calls, 1);
    expect_no_leaks();
}

Test(exec_env, non_forwarding_key_does_not_pass_through_then) {
    int calls = 0;
    ex_sender *s = ex_write_env(ex_then(ex_read_env(&local_key, EX_T_ANY), identity1, &calls, EX_SIG_ANY1, EX_SIG_ANY1),
                                &local_key, ex_int(5));
    expect_sync_error(s, EX_EINVAL);
    cr_assert_eq(calls, 0);
    expect_no_leaks();
}

Test(exec_env, non_forwarding_key_does_not_pass_through_into_variant) {
    expect_sync_error(ex_write_env(ex_into_variant(ex_read_env(&local_key, EX_T_ANY)), &local_key, ex_int(5)), EX_EINVAL);
    expect_no_leaks();
}

Test(exec_env, non_forwarding_key_directly_under_write_env_is_found) {
    expect_sync_int(ex_write_env(ex_read_env(&local_key, EX_T_ANY), &local_key, ex_int(5)), 5);
    /* and under an adaptor when write_env is below it */
    int calls = 0;
    expect_sync_int(ex_then(ex_write_env(ex_read_env(&local_key, EX_T_ANY), &local_key, ex_int(6)), identity1,
                                        &calls, EX_SIG_ANY1, EX_SIG_ANY1), 6);
    cr_assert_eq(calls, 1);
    expect_no_leaks();
}

Test(exec_env, write_env_joins_the_unfiltered_receiver_env) {
    /* write-env's child env is JOIN-ENV(env, get_env(rcvr)): no FWD-ENV, so a
     * non-forwarding key of the receiver's own environment is visible. */
    rec rc;
    rec_init(&rc);
    ex_env_pair_init(&rc.pair, &local_key, ex_int(9), ex_env_empty());
    rc.env = ex_env_of_pair(&rc.pair);
    ex_sender *s = ex_write_env(ex_read_env(&local_key, EX_T_ANY), &other_key, ex_int(1));
    ex_operation *op = run_start(s, &rc);
    cr_assert_eq(rc.values, 1, "error: %s", rc.err.msg ? rc.err.msg : "");
    cr_assert_eq(rc.v[0].as.i, 9);
    run_destroy_release(op, s);
    expect_no_leaks();
}

Test(exec_env, nested_write_env_inner_wins) {
    expect_sync_int(ex_write_env(ex_write_env(ex_read_env(&fwd_key, EX_T_ANY), &fwd_key, ex_int(1)), &fwd_key,
                                            ex_int(2)), 1);
    /* The outer one still answers the keys the inner one does not know. */
    expect_sync_int(ex_write_env(ex_write_env(ex_read_env(&other_key, EX_T_ANY), &fwd_key, ex_int(1)),
                                             &other_key, ex_int(2)), 2);
    expect_no_leaks();
}

Test(exec_env, write_env_overrides_sync_waits_scheduler) {
    expect_sync_sched(ex_write_env(ex_read_env(&ex_key_get_scheduler, EX_T_SCHED), &ex_key_get_scheduler,
                                            ex_sched_value(ex_inline_scheduler())), ex_inline_scheduler());
    /* the delegation scheduler is still sync_wait's */
    ex_result r2 = ex_sync_wait(ex_write_env(ex_read_env(&ex_key_get_delegation_scheduler, EX_T_SCHED),
                                             &ex_key_get_scheduler, ex_sched_value(ex_inline_scheduler())));
    cr_assert_eq(r2.disposition, EX_DISP_VALUE);
    cr_assert_str_eq(r2.values[0].as.sched.vt->name, "run_loop");
    expect_no_leaks();
}

Test(exec_env, write_env_copies_tuple_values) {
    ex_value inner[2] = { ex_int(1), ex_int(2) };
    ex_tuple t = { 0, 2, inner };
    ex_sender *s = ex_write_env(ex_read_env(&fwd_key, EX_T_TUPLE), &fwd_key, ex_tuple_value(&t));
    inner[0] = ex_int(100);
    ex_result r = ex_sync_wait(ex_sender_retain(s));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_eq(r.values[0].as.tuple->n, 2);
    cr_assert_eq(r.values[0].as.tuple->v[0].as.i, 1, "write_env holds its own copy of the tuple");
    ex_result_destroy(&r);
    /* an operation can outlive the last sender reference */
    rec rc;
    rec_init(&rc);
    ex_operation *op = run_start_released(s, &rc);
    cr_assert_eq(rc.values, 1);
    cr_assert_eq(rc.v[0].as.tuple->v[1].as.i, 2);
    run_destroy(op);
    expect_no_leaks();
}

Test(exec_env, write_env_rejects_null_key_and_child) {
    ex_sender *s = ex_write_env(ex_just(ex_int(1)), NULL, ex_int(1));
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    cr_assert_not_null(ex_sender_status(s).msg);
    ex_sender_release(s);
    s = ex_write_env(NULL, &fwd_key, ex_int(1));
    expect_invalid(s, EX_EINVAL);
    expect_no_leaks();
}

Test(exec_env, write_env_keeps_the_childs_sigs) {
    ex_sender *s = ex_write_env(ex_just(ex_int(1), ex_double(2)), &fwd_key, ex_int(0));
    const ex_sigs *sg = ex_sender_sigs(s);
    cr_assert_eq(sg->nvalues, 1);
    cr_assert_eq(sg->values[0].arity, 2);
    cr_assert_eq(sg->values[0].types[1], EX_T_DOUBLE);
    cr_assert_eq(sg->flags, 0);
    ex_sender_release(s);
    expect_no_leaks();
}

/* --------------------------------------------------------------- defaults */

Test(exec_env, get_stop_token_defaults_to_never_stop) {
    ex_stop_token t = ex_get_stop_token(ex_env_empty());
    cr_assert_not(ex_stop_token_stop_possible(t));
    cr_assert_not(ex_stop_token_stop_requested(t));
    cr_assert(ex_stop_token_equal(t, ex_never_stop_token()));
    /* a value of another type under the key is not a stop token */
    ex_env_pair p;
    ex_env_pair_init(&p, &ex_key_get_stop_token, ex_int(3), ex_env_empty());
    cr_assert_not(ex_stop_token_stop_possible(ex_get_stop_token(ex_env_of_pair(&p))));
    expect_no_leaks();
}

Test(exec_env, get_stop_token_answers_the_env) {
    ex_stop_source src;
    ex_stop_source_init(&src);
    ex_env_pair p;
    ex_env_pair_init(&p, &ex_key_get_stop_token, ex_token_value(ex_stop_source_token(&src)), ex_env_empty());
    ex_stop_token t = ex_get_stop_token(ex_env_of_pair(&p));
    cr_assert(ex_stop_token_stop_possible(t));
    cr_assert(ex_stop_token_equal(t, ex_stop_source_token(&src)));
    cr_assert_not(ex_stop_token_stop_requested(t));
    ex_stop_source_request_stop(&src);
    cr_assert(ex_stop_token_stop_requested(t));
    /* forwarded through FWD-ENV */
    cr_assert(ex_stop_token_equal(ex_get_stop_token(ex_env_forward(ex_env_of_pair(&p))), t));
    expect_no_leaks();
}

Test(exec_env, read_env_stop_token_from_receiver) {
    rec rc;
    rec_init(&rc);
    rec_with_stop(&rc);
    ex_sender *s = ex_then(ex_read_env(&ex_key_get_stop_token, EX_T_TOKEN), identity1, NULL, EX_SIG(EX_T_TOKEN),
                           EX_SIG(EX_T_TOKEN));
    ex_operation *op = run_start(s, &rc);
    cr_assert_eq(rc.values, 1);
    cr_assert(ex_stop_token_equal(rc.v[0].as.token, ex_stop_source_token(&rc.stop)));
    run_destroy_release(op, s);
    expect_no_leaks();
}

Test(exec_env, get_allocator_defaults_to_default_allocator) {
    cr_assert_eq(ex_default_allocator(), &test_allocator);
    cr_assert_eq(ex_get_allocator(ex_env_empty()), &test_allocator);
    ex_env_pair p;
    ex_env_pair_init(&p, &ex_key_get_allocator, ex_alloc_value(NULL), ex_env_empty());
    cr_assert_eq(ex_get_allocator(ex_env_of_pair(&p)), &test_allocator, "a NULL allocator means the default");
    ex_env_pair_init(&p, &ex_key_get_allocator, ex_int(1), ex_env_empty());
    cr_assert_eq(ex_get_allocator(ex_env_of_pair(&p)), &test_allocator);
    ex_env_pair_init(&p, &ex_key_get_allocator, ex_alloc_value(ex_libc_allocator()), ex_env_empty());
    cr_assert_eq(ex_get_allocator(ex_env_of_pair(&p)), ex_libc_allocator());
    expect_no_leaks();
}

Test(exec_env, get_scheduler_has_no_default) {
    ex_scheduler s = ex_inline_scheduler();
    cr_assert_not(ex_get_scheduler(ex_env_empty(), &s));
    cr_assert_not(ex_get_delegation_scheduler(ex_env_empty(), &s));
    cr_assert(ex_scheduler_equal(s, ex_inline_scheduler()), "out is untouched when not answered");
    ex_env_pair p;
    ex_env_pair_init(&p, &ex_key_get_scheduler, ex_int(1), ex_env_empty());
    cr_assert_not(ex_get_scheduler(ex_env_of_pair(&p), &s), "a non-scheduler value is not a scheduler");
    expect_no_leaks();
}

Test(exec_env, sync_wait_env_has_never_stop_token_and_delegation_scheduler) {
    ex_result r = ex_sync_wait(ex_read_env(&ex_key_get_stop_token, EX_T_TOKEN));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_not(ex_stop_token_stop_possible(r.values[0].as.token));
    ex_result r2 = ex_sync_wait(ex_read_env(&ex_key_get_delegation_scheduler, EX_T_SCHED));
    cr_assert_eq(r2.disposition, EX_DISP_VALUE);
    cr_assert_str_eq(r2.values[0].as.sched.vt->name, "run_loop");
    expect_no_leaks();
}
