/* SPDX-License-Identifier: MIT */
/* [exec.connect], [exec.snd]: connect and its bad-input contract, receiver
 * acceptance, connect_alloc.  Also: sender_lifetime.c (lifetime, reuse,
 * operation sizes), sender_invalid.c (invalid senders), sender_depth.c
 * (authored senders, the depth of sender chains). */
#include <stdlib.h>

#include "core/sender_fixtures.h"

TEST_SUITE(exec_sender, 10);

/* ---------------------------------------------------------- bad input */

Test(exec_sender, connect_null_sender_is_einval) {
    rec rc;
    rec_init(&rc);
    big_buf buf;
    ex_operation *op = (ex_operation *)&buf;
    ex_error e = ex_connect(NULL, rec_receiver(&rc), buf.b, sizeof buf.b, &op);
    expect_connect_refused(e, op);
    cr_assert_eq(rec_total(&rc), 0);
    expect_no_leaks();
}

Test(exec_sender, connect_null_op_out_param_is_einval) {
    COUNTED_JUST_ONE(rc, c, s);
    big_buf buf;
    ex_error e = ex_connect(s, rec_receiver(&rc), buf.b, sizeof buf.b, NULL);
    expect_err(e, EX_EINVAL);
    cr_assert_eq(rec_total(&rc), 0);
    release_unstarted(s, &c);
    expect_no_leaks();
}

Test(exec_sender, connect_receiver_with_null_vtable_is_einval) {
    counter c = { 0, 1 };
    ex_sender *s = then_count(ex_just(ex_int(1)), &c);
    big_buf buf;
    ex_operation *op = (ex_operation *)&buf;
    ex_receiver r = { NULL, NULL };
    ex_error e = ex_connect(s, r, buf.b, sizeof buf.b, &op);
    expect_connect_refused(e, op);
    release_unstarted(s, &c);
    expect_no_leaks();
}

Test(exec_sender, connect_receiver_missing_a_completion_is_einval) {
    counter c = { 0, 1 };
    ex_sender *s = then_count(ex_just(ex_int(1)), &c);
    for (int which = 0; which < 3; which++) {
        rec rc;
        rec_init(&rc);
        if (which == 0) rc.vt.set_value = NULL;
        if (which == 1) rc.vt.set_error = NULL;
        if (which == 2) rc.vt.set_stopped = NULL;
        big_buf buf;
        ex_operation *op = (ex_operation *)&buf;
        ex_error e = ex_connect(s, rec_receiver(&rc), buf.b, sizeof buf.b, &op);
        cr_assert_eq(e.code, EX_EINVAL, "missing completion %d", which);
        cr_assert_not_null(e.msg);
        cr_assert_null(op);
        op = (ex_operation *)&buf;
        e = ex_connect_alloc(s, rec_receiver(&rc), &op);
        cr_assert_eq(e.code, EX_EINVAL, "ex_connect_alloc, missing completion %d", which);
        cr_assert_not_null(e.msg);
        cr_assert_null(op);
        cr_assert_eq(rec_total(&rc), 0);
    }
    release_unstarted(s, &c);
    expect_no_leaks();
}

Test(exec_sender, connect_storage_too_small_is_einval) {
    COUNTED_JUST_ONE(rc, c, s);
    size_t need = ex_sender_op_size(s);
    cr_assert_gt(need, 0);
    cr_assert_leq(need, BUF_SIZE);
    big_buf buf;
    ex_operation *op = (ex_operation *)&buf;
    ex_error e = ex_connect(s, rec_receiver(&rc), buf.b, need - 1, &op);
    expect_connect_refused(e, op);
    e = ex_connect(s, rec_receiver(&rc), buf.b, 0, &op);
    cr_assert_eq(e.code, EX_EINVAL);
    e = ex_connect(s, rec_receiver(&rc), NULL, need, &op);
    cr_assert_eq(e.code, EX_EINVAL, "NULL storage");
    cr_assert_null(op);
    cr_assert_eq(rec_total(&rc), 0);
    cr_assert_eq(c.calls, 0);
    /* exactly op_size is enough */
    e = ex_connect(s, rec_receiver(&rc), buf.b, need, &op);
    cr_assert_eq(e.code, 0);
    cr_assert_eq((void *)op, (void *)buf.b, "the operation is constructed in the storage given");
    ex_start(op);
    rec_expect_value_int(&rc, 2);
    ex_operation_destroy(op);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_sender, connect_misaligned_storage_is_einval) {
    COUNTED_JUST_ONE(rc, c, s);
    size_t align = ex_sender_op_align(s);
    cr_assert_gt(align, 1, "an operation holding pointers is aligned");
    cr_assert_eq(align & (align - 1), 0, "alignment is a power of two");
    big_buf buf;
    ex_operation *op = (ex_operation *)&buf;
    ex_error e = ex_connect(s, rec_receiver(&rc), buf.b + 1, BUF_SIZE, &op);
    expect_connect_refused(e, op);
    e = ex_connect(s, rec_receiver(&rc), buf.b + align / 2, BUF_SIZE, &op);
    cr_assert_eq(e.code, EX_EINVAL);
    cr_assert_eq(rec_total(&rc), 0);
    release_unstarted(s, &c);
    expect_no_leaks();
}

/* --------------------------------------------------- receiver acceptance */

static ex_error connect_with_accepts(ex_sender *s, const ex_sigs *accepts, rec *rc) {
    rec_init(rc);
    rc->vt.accepts = accepts;
    big_buf buf;
    ex_operation *op = (ex_operation *)&buf;
    ex_error e = ex_connect(s, rec_receiver(rc), buf.b, sizeof buf.b, &op);
    if (!e.code) {
        ex_start(op);
        ex_operation_destroy(op);
    } else {
        cr_assert_null(op);
    }
    ex_sender_release(s);
    return e;
}

Test(exec_sender, connect_checks_receiver_accepts) {
    rec rc;
    ex_sigs ints_only = ex_sigs_none();
    cr_assert(ex_sigs_add_value(&ints_only, EX_SIG(EX_T_INT)));

    ex_error e = connect_with_accepts(ex_just_stopped(), &ints_only, &rc);
    cr_assert_eq(e.code, EX_EINVAL, "set_stopped is not accepted");
    cr_assert_not_null(e.msg);
    cr_assert_eq(rec_total(&rc), 0);

    e = connect_with_accepts(ex_just_error(ex_err(EX_EUSER, "x")), &ints_only, &rc);
    cr_assert_eq(e.code, EX_EINVAL, "set_error is not accepted");
    cr_assert_not_null(e.msg);

    e = connect_with_accepts(ex_just(ex_double(1.0)), &ints_only, &rc);
    cr_assert_eq(e.code, EX_EINVAL, "set_value(double) is not accepted");
    cr_assert_not_null(e.msg);

    e = connect_with_accepts(ex_just(ex_int(1), ex_int(2)), &ints_only, &rc);
    cr_assert_eq(e.code, EX_EINVAL, "set_value(int, int) is not accepted");

    e = connect_with_accepts(ex_just(ex_int(5)), &ints_only, &rc);
    cr_assert_eq(e.code, 0, "set_value(int) is accepted: %s", e.msg ? e.msg : "");
    rec_expect_value_int(&rc, 5);

    /* a stoppable sender into a receiver that accepts stopped but not error */
    ex_sigs stopped_ok = ints_only;
    stopped_ok.flags = EX_SIGS_STOPPED;
    e = connect_with_accepts(ex_just_stopped(), &stopped_ok, &rc);
    cr_assert_eq(e.code, 0);
    cr_assert_eq(rc.stops, 1);
    e = connect_with_accepts(ex_just_error(ex_err(EX_EUSER, "x")), &stopped_ok, &rc);
    cr_assert_eq(e.code, EX_EINVAL);

    /* EX_T_ANY accepts every type */
    ex_sigs any1 = ex_sigs_none();
    ex_sigs_add_value(&any1, EX_SIG_ANY1);
    e = connect_with_accepts(ex_just(ex_str("s")), &any1, &rc);
    cr_assert_eq(e.code, 0);
    cr_assert_eq(rc.values, 1);
    expect_no_leaks();
}

Test(exec_sender, connect_accepts_rejects_adaptor_that_may_fail) {
    /* then may fail (its function returns an error): a receiver that accepts
     * no error cannot take it. */
    rec rc;
    counter c = { 0, 1 };
    ex_sigs ints_only = ex_sigs_none();
    ex_sigs_add_value(&ints_only, EX_SIG(EX_T_INT));
    ex_error e = connect_with_accepts(then_count(ex_just(ex_int(1)), &c), &ints_only, &rc);
    cr_assert_eq(e.code, EX_EINVAL);
    cr_assert_eq(c.calls, 0);
    ex_sigs with_error = ints_only;
    with_error.flags = EX_SIGS_ERROR;
    e = connect_with_accepts(then_count(ex_just(ex_int(1)), &c), &with_error, &rc);
    cr_assert_eq(e.code, 0);
    rec_expect_value_int(&rc, 2);
    expect_no_leaks();
}

/* ------------------------------------------------------- connect_alloc */

Test(exec_sender, connect_alloc_and_operation_free) {
    rec rc;
    rec_init(&rc);
    ex_sender *s = ex_just(ex_int(3));
    long before_allocs = test_stats.allocs, before_use = test_stats.in_use;
    ex_operation *op = NULL;
    ex_error e = ex_connect_alloc(s, rec_receiver(&rc), &op);
    cr_assert_eq(e.code, 0);
    cr_assert_not_null(op);
    cr_assert_eq(test_stats.allocs, before_allocs + 1, "one block for the operation");
    cr_assert_eq(test_stats.in_use, before_use + 1);
    cr_assert_eq((uintptr_t)op % ex_sender_op_align(s), 0);
    cr_assert_eq(rec_total(&rc), 0);
    ex_start(op);
    rec_expect_value_int(&rc, 3);
    ex_operation_free(op);
    cr_assert_eq(test_stats.in_use, before_use);
    ex_operation_free(NULL);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_sender, connect_alloc_unstarted_operation_can_be_freed) {
    rec rc;
    rec_init(&rc);
    counter c = { 0, 1 };
    ex_value inner[1] = { ex_int(1) };
    ex_tuple t = { 0, 1, inner };
    ex_sender *s = ex_then(ex_just(ex_tuple_value(&t)), count_add, &c, EX_SIG_VARIADIC, EX_SIG(EX_T_INT));
    ex_operation *op = NULL;
    cr_assert_eq(ex_connect_alloc(s, rec_receiver(&rc), &op).code, 0);
    ex_operation_free(op);
    cr_assert_eq(c.calls, 0);
    cr_assert_eq(rec_total(&rc), 0);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_sender, connect_alloc_bad_input_and_out_of_memory) {
    rec rc;
    rec_init(&rc);
    ex_operation *op = (ex_operation *)&rc;
    ex_error e = ex_connect_alloc(NULL, rec_receiver(&rc), &op);
    expect_connect_refused(e, op);
    ex_sender *s = ex_just(ex_int(1));
    e = ex_connect_alloc(s, rec_receiver(&rc), NULL);
    expect_err(e, EX_EINVAL);
    test_alloc_fail_next();
    op = (ex_operation *)&rc;
    expect_err(ex_connect_alloc(s, rec_receiver(&rc), &op), EX_ENOMEM);
    expect_injected_failure_hit();
    cr_assert_null(op);
    cr_assert_eq(rec_total(&rc), 0);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_sender, connect_alloc_failed_connect_frees_the_block) {
    /* ex_on into a receiver without a scheduler: connect fails after the
     * block was allocated; nothing may be left behind. */
    rec rc;
    rec_init(&rc);
    ex_sender *s = ex_on(ex_inline_scheduler(), ex_just(ex_int(1)));
    ex_operation *op = NULL;
    ex_error e = ex_connect_alloc(s, rec_receiver(&rc), &op);
    cr_assert_eq(e.code, EX_EINVAL);
    cr_assert_null(op);
    cr_assert_eq(rec_total(&rc), 0);
    ex_sender_release(s);
    expect_no_leaks();
}
