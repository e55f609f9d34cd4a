/* SPDX-License-Identifier: MIT */
/* [exec.let]: bad input and out of memory (suite exec_let, declared in let.c). */
#include "adaptors/callbacks.h"

/* ------------------------------------------------------------ bad input */

Test(exec_let, fn_returning_null_is_einval) {
    seen sn = { 0 };
    expect_sync_error(ex_let_value(ex_just(ex_int(1)), lv_null, &sn, EX_SIG(EX_T_INT)), EX_EINVAL);
    expect_sync_error(ex_let_error(ex_just_error(ex_err(EX_EUSER, "e")), le_null, &sn), EX_EINVAL);
    expect_sync_error(ex_let_stopped(ex_just_stopped(), ls_null, &sn), EX_EINVAL);
    cr_assert_eq(sn.calls, 3);
    expect_no_leaks();
}

Test(exec_let, null_child_or_function_is_invalid) {
    seen sn = { 0 };
    ex_sender *s = ex_let_value(NULL, lv_times10, &sn, EX_SIG(EX_T_INT));
    expect_invalid(s, EX_EINVAL);
    s = ex_let_value(ex_just(ex_int(1)), NULL, &sn, EX_SIG(EX_T_INT));
    expect_invalid(s, EX_EINVAL);
    s = ex_let_error(NULL, le_code, &sn);
    expect_invalid_status(s, EX_EINVAL);
    s = ex_let_error(ex_just_error(ex_err(EX_EUSER, "e")), NULL, &sn);
    expect_invalid_status(s, EX_EINVAL);
    s = ex_let_stopped(NULL, ls_seven, &sn);
    expect_invalid_status(s, EX_EINVAL);
    s = ex_let_stopped(ex_just_stopped(), NULL, &sn);
    expect_invalid(s, EX_EINVAL);
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}

Test(exec_let, returned_sender_that_fails_to_connect_completes_with_its_error) {
    /* ex_on needs get_scheduler in the environment to connect; the receiver
     * has none and just has no completion scheduler. */
    seen sn = { 0 };
    sn.ret = ex_on(ex_inline_scheduler(), ex_just(ex_int(1)));
    rec rc;
    rec_init(&rc);
    run_in_place(ex_let_value(ex_just(), lv_ret, &sn, EX_SIG0), &rc);
    rec_expect_error(&rc, EX_EINVAL);
    cr_assert_eq(sn.calls, 1);
    ex_sender_release(sn.ret);
    expect_no_leaks();
}

Test(exec_let, borrowed_fn_returning_null_or_null_function_is_einval) {
    seen sn = { 0 };
    expect_sync_error(ex_let_value_borrowed(ex_just(ex_int(1)), lv_null, &sn, EX_SIG(EX_T_INT)), EX_EINVAL);
    cr_assert_eq(sn.calls, 1);
    expect_invalid(ex_let_value_borrowed(ex_just(ex_int(1)), NULL, &sn, EX_SIG(EX_T_INT)), EX_EINVAL);
    expect_invalid(ex_let_value_borrowed(NULL, lv_lend, &sn, EX_SIG(EX_T_INT)), EX_EINVAL);
    expect_no_leaks();
}

/* A lent sender stays the lender's on every way out of the let: it fails
 * to connect, or its operation cannot be allocated. */
Test(exec_let, borrowed_sender_stays_the_lenders_when_it_fails_to_connect) {
    seen sn = { 0 };
    sn.ret = ex_on(ex_inline_scheduler(), ex_just(ex_int(1)));  /* no scheduler in the env: connect fails */
    rec rc;
    rec_init(&rc);
    run_in_place(ex_let_value_borrowed(ex_just(), lv_lend, &sn, EX_SIG0), &rc);
    rec_expect_error(&rc, EX_EINVAL);
    cr_assert_eq(sn.calls, 1);
    cr_assert_eq(sn.ret->refs, 1, "the let released a sender it was lent");
    ex_sender_release(sn.ret);
    expect_no_leaks();
}

Test(exec_let, borrowed_sender_stays_the_lenders_when_out_of_memory) {
    seen sn = { 0 }, tw = { 0 };
    /* (a then: a lent just would need no operation) */
    sn.ret = ex_then(ex_just(ex_int(9)), fn_twice, &tw, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    run_with_failing_allocation(ex_let_value_borrowed(ex_just(ex_int(1)), lv_lend, &sn, EX_SIG(EX_T_INT)));
    cr_assert_eq(sn.calls, 1);
    cr_assert_eq(sn.ret->refs, 1, "the let released a sender it was lent");
    ex_sender_release(sn.ret);
    expect_no_leaks();
}

/* ---------------------------------------------------------- allocation */

/* A lent just (no tuples) needs no operation: nothing is allocated to
 * run it; an owned one, or a lent sender of another kind, gets its
 * operation from the environment's allocator. */
Test(exec_let, borrowed_just_runs_without_an_inner_operation) {
    seen sn = { 0 };
    cnt_alloc env_allocator;
    cnt_alloc_init(&env_allocator);
    sn.ret = ex_just(ex_int(9));
    ex_sender *s = ex_write_env(ex_let_value_borrowed(ex_just(), lv_lend, &sn, EX_SIG0), &ex_key_get_allocator,
                                ex_alloc_value(&env_allocator.base));
    expect_sync_int(s, 9);
    cr_assert_eq(atomic_load(&env_allocator.allocs), 0, "a lent just was given an operation");
    s = ex_write_env(ex_let_value(ex_just(), lv_ret, &sn, EX_SIG0), &ex_key_get_allocator,
                     ex_alloc_value(&env_allocator.base));
    expect_sync_int(s, 9);
    cr_assert_eq(atomic_load(&env_allocator.allocs), 1, "an owned just has its operation");
    ex_sender_release(sn.ret);
    seen tw = { 0 };
    sn.ret = ex_then(ex_just(ex_int(4)), fn_twice, &tw, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    s = ex_write_env(ex_let_value_borrowed(ex_just(), lv_lend, &sn, EX_SIG0), &ex_key_get_allocator,
                     ex_alloc_value(&env_allocator.base));
    expect_sync_int(s, 8);
    cr_assert_eq(atomic_load(&env_allocator.allocs), 2, "a lent then has its operation");
    cnt_alloc_expect_balanced(&env_allocator, "the env's allocator");
    cr_assert_eq(sn.calls, 3);
    ex_sender_release(sn.ret);
    expect_no_leaks();
}

Test(exec_let, out_of_memory_while_building) {
    seen sn = { 0 };
    for (int kind = 0; kind < 3; kind++) {
        ex_sender *child = ex_just(ex_int(1));
        test_alloc_fail_next();
        ex_sender *s = kind == 0   ? ex_let_value(child, lv_times10, &sn, EX_SIG(EX_T_INT))
                       : kind == 1 ? ex_let_error(child, le_code, &sn)
                                   : ex_let_stopped(child, ls_seven, &sn);
        expect_built_enomem(s);
    }
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}

Test(exec_let, out_of_memory_for_the_inner_operation) {
    seen sn = { 0 };
    sn.ret = ex_just(ex_int(9)); /* prebuilt: the only allocation while running is the inner operation */
    run_with_failing_allocation(ex_let_value(ex_just(ex_int(1)), lv_ret, &sn, EX_SIG(EX_T_INT)));
    run_with_failing_allocation(ex_let_error(ex_just_error(ex_err(EX_EUSER, "e")), le_ret, &sn));
    run_with_failing_allocation(ex_let_stopped(ex_just_stopped(), ls_ret, &sn));
    cr_assert_eq(sn.calls, 3);
    /* The same senders run fine without the failure. */
    expect_sync_int(ex_let_value(ex_just(ex_int(1)), lv_ret, &sn, EX_SIG(EX_T_INT)), 9);
    ex_sender_release(sn.ret);
    expect_no_leaks();
}

Test(exec_let, out_of_memory_storing_tuple_datums) {
    seen sn = { 0 };
    ex_value elems[2] = { ex_int(1), ex_int(2) };
    ex_tuple t = { 0, 2, elems };
    run_with_failing_allocation(ex_let_value(ex_just(ex_tuple_value(&t)), lv_count, &sn, EX_SIG(EX_T_TUPLE)));
    cr_assert_eq(sn.calls, 0, "fn must not run without its datums");
    expect_no_leaks();
}

Test(exec_let, inner_operation_comes_from_the_environments_allocator) {
    seen sn = { 0 };
    sn.ret = ex_just(ex_int(9));
    ex_value elems[1] = { ex_int(3) };
    ex_tuple t = { 0, 1, elems };
    cnt_alloc env_allocator; /* a second counting allocator, handed to the operation through the env */
    cnt_alloc_init(&env_allocator);
    ex_sender *s = ex_write_env(ex_let_value(ex_just(ex_tuple_value(&t)), lv_ret, &sn, EX_SIG(EX_T_TUPLE)),
                                &ex_key_get_allocator, ex_alloc_value(&env_allocator.base));
    expect_sync_int(s, 9);
    expect_called_once_with(&sn, 1);
    cr_assert_eq(sn.in[0].type, EX_T_TUPLE); /* its storage is gone now: do not read through it */
    cr_assert_geq(atomic_load(&env_allocator.allocs), 2, "the stored tuple and the inner operation use the env's allocator");
    cnt_alloc_expect_balanced(&env_allocator, "the env's allocator");
    ex_sender_release(sn.ret);
    expect_no_leaks();
}
