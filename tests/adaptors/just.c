/* SPDX-License-Identifier: MIT */
/* [exec.just], [exec.read.env]: just, just_error, just_stopped, read_env. */
#include <stdio.h>

#include "common/helpers.h"

TEST_SUITE(exec_just, 10);

Test(exec_just, just_no_values) {
    ex_result r = ex_sync_wait(ex_just());
    expect_value_arity(&r, 0);
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(exec_just, just_several_values_in_order) {
    int x = 0;
    ex_sender *s = ex_just(ex_int(-3), ex_uint(7), ex_double(1.5), ex_ptr(&x), ex_str("hi"), ex_bool(true));
    /* just never errors or stops */
    expect_sigs(s, EX_SIG(EX_T_INT, EX_T_UINT, EX_T_DOUBLE, EX_T_PTR, EX_T_STR, EX_T_BOOL), 0xff, 0);
    ex_result r = ex_sync_wait(s);
    char want[128];
    snprintf(want, sizeof want, "int -3; uint 7; double 1.5; ptr %p; str \"hi\"; bool true", (void *)&x);
    expect_values_text(&r, want);
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(exec_just, just_completes_inline_in_start) {
    rec rc;
    rec_init(&rc);
    ex_sender *s = ex_just(ex_int(1));
    _Alignas(max_align_t) unsigned char buf[256];
    ex_operation *op;
    cr_assert_eq(ex_connect(s, rec_receiver(&rc), buf, sizeof buf, &op).code, 0);
    cr_assert_eq(rec_total(&rc), 0, "connect must not start work");
    ex_start(op);
    cr_assert_eq(rc.values, 1);
    cr_assert_eq(rc.thread, test_thread_id());
    ex_operation_destroy(op);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_just, just_is_multi_shot) {
    ex_sender *s = ex_just(ex_int(9));
    for (int i = 0; i < 3; i++) {
        expect_sync_int(ex_sender_retain(s), 9);
    }
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_just, just_copies_tuples_deeply) {
    ex_value inner[2] = { ex_int(1), ex_int(2) };
    ex_tuple t = { 3, 2, inner };
    ex_sender *s = ex_just(ex_tuple_value(&t));
    inner[0] = ex_int(100); /* the sender holds its own copy */
    ex_result r = ex_sync_wait(s);
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_eq(r.values[0].type, EX_T_TUPLE);
    cr_assert_eq(r.values[0].as.tuple->index, 3);
    cr_assert_eq(r.values[0].as.tuple->v[0].as.i, 1);
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(exec_just, just_rejects_too_many_values) {
    ex_value v[EX_MAX_ARITY + 1];
    for (int i = 0; i <= EX_MAX_ARITY; i++) v[i] = ex_int(i);
    ex_sender *s = ex_just_n(v, EX_MAX_ARITY + 1);
    expect_invalid(s, EX_EINVAL);
    expect_no_leaks();
}

Test(exec_just, just_error_completes_with_error) {
    static int payload;
    ex_sender *s = ex_just_error(ex_err_data(EX_EUSER + 1, "boom", &payload));
    cr_assert_eq(ex_sender_status(s).code, 0, "a just_error sender is well-formed");
    cr_assert_eq(ex_sender_sigs(s)->flags, EX_SIGS_ERROR);
    cr_assert_eq(ex_sender_sigs(s)->nvalues, 0);
    ex_result r = ex_sync_wait(s);
    expect_error(&r, EX_EUSER + 1);
    cr_assert_str_eq(r.error.msg, "boom");
    cr_assert_eq(r.error.data, &payload);
    expect_no_leaks();
}

Test(exec_just, just_error_with_ok_code_is_einval) {
    expect_sync_error(ex_just_error(ex_ok()), EX_EINVAL);
    expect_no_leaks();
}

Test(exec_just, just_stopped_completes_stopped) {
    ex_sender *s = ex_just_stopped();
    cr_assert_eq(ex_sender_sigs(s)->flags, EX_SIGS_STOPPED);
    ex_result r = ex_sync_wait(s);
    expect_stopped(&r);
    expect_no_leaks();
}

Test(exec_just, just_out_of_memory_gives_enomem_sender) {
    test_alloc_fail_at(1);
    ex_sender *s = ex_just(ex_int(1));
    expect_invalid(s, EX_ENOMEM);
    expect_no_leaks();
}

/* ------------------------------------------------------------- read_env */

Test(exec_just, read_env_get_scheduler_in_sync_wait_is_the_run_loop) {
    ex_result r = ex_sync_wait(ex_read_env(&ex_key_get_scheduler, EX_T_SCHED));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_eq(r.values[0].type, EX_T_SCHED);
    cr_assert_str_eq(r.values[0].as.sched.vt->name, "run_loop");
    ex_result r2 = ex_sync_wait(ex_read_env(&ex_key_get_delegation_scheduler, EX_T_SCHED));
    cr_assert_eq(r2.disposition, EX_DISP_VALUE);
    cr_assert_str_eq(r2.values[0].as.sched.vt->name, "run_loop");
    expect_no_leaks();
}

Test(exec_just, read_env_stop_token_defaults_to_never) {
    ex_result r = ex_sync_wait(ex_read_env(&ex_key_get_stop_token, EX_T_TOKEN));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_not(ex_stop_token_stop_possible(r.values[0].as.token));
    expect_no_leaks();
}

Test(exec_just, read_env_allocator_defaults_to_default) {
    ex_result r = ex_sync_wait(ex_read_env(&ex_key_get_allocator, EX_T_ALLOC));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_eq(r.values[0].as.alloc, &test_allocator);
    expect_no_leaks();
}

static const ex_key user_key = { "test.user_key", true };

Test(exec_just, read_env_user_key) {
    expect_sync_int(ex_write_env(ex_read_env(&user_key, EX_T_ANY), &user_key, ex_int(77)), 77);
    expect_no_leaks();
}

Test(exec_just, read_env_missing_key_is_einval) {
    expect_sync_error(ex_read_env(&user_key, EX_T_INT), EX_EINVAL);
    expect_no_leaks();
}

Test(exec_just, read_env_wrong_type_is_einval) {
    expect_sync_error(ex_write_env(ex_read_env(&user_key, EX_T_DOUBLE), &user_key, ex_int(1)), EX_EINVAL);
    expect_no_leaks();
}

Test(exec_just, read_env_null_key_is_invalid) {
    ex_sender *s = ex_read_env(NULL, EX_T_ANY);
    expect_invalid_status(s, EX_EINVAL);
    expect_no_leaks();
}
