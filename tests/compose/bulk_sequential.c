/* SPDX-License-Identifier: MIT */
/* [exec.bulk]: ex_bulk, ex_bulk_grain, ex_bulk_chunked - the sequential
 * default of the wording: every index in order on the completing thread,
 * the child's values forwarded, errors and stopped, bad input, signatures. */
#include <stdlib.h>
#include <string.h>

#include "compose/compose_fixtures.h"

TEST_SUITE(exec_bulk, 20);

/* ======================================================= sequential default */

Test(exec_bulk, sequential_runs_every_index_in_order_with_the_childs_values) {
    seq_ctx c;
    seq_init(&c);
    rec rc;
    rec_init(&rc);
    inline_run ir;
    ex_sender *s = ex_bulk(ex_just(ex_int(7), ex_str("seven")), EX_PAR, 10, seq_fn, &c);
    cr_assert_eq(ex_sender_status(s).code, 0);
    run_inline(&ir, s, &rc);
    cr_assert_eq(rec_total(&rc), 1, "a bulk of just completes inside start");
    cr_assert_eq(rc.values, 1);
    cr_assert_eq(rc.thread, test_thread_id());
    cr_assert_eq(c.calls, 10);
    for (size_t i = 0; i < 10; i++) {
        cr_assert_eq(c.order[i], i, "call %zu got index %zu", i, c.order[i]);
        cr_assert_eq(c.thread[i], test_thread_id(), "index %zu ran on another thread", i);
        cr_assert_eq(c.n[i], 2);
        cr_assert_eq(c.v0[i].type, EX_T_INT);
        cr_assert_eq(c.v0[i].as.i, 7);
        cr_assert_eq(c.v1[i].type, EX_T_STR);
        cr_assert_str_eq(c.v1[i].as.s, "seven");
    }
    cr_assert_eq(rc.n, 2, "the child's values are forwarded");
    cr_assert_eq(rc.v[0].as.i, 7);
    cr_assert_str_eq(rc.v[1].as.s, "seven");
    ex_operation_destroy(ir.op);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_bulk, sequential_without_values_passes_none) {
    seq_ctx c;
    seq_init(&c);
    ex_result r = ex_sync_wait(ex_bulk(ex_just(), EX_PAR, 5, seq_fn, &c));
    expect_value_result(&r);
    cr_assert_eq(r.n, 0);
    cr_assert_eq(c.calls, 5);
    for (size_t i = 0; i < 5; i++) {
        cr_assert_eq(c.order[i], i);
        cr_assert_eq(c.n[i], 0);
    }
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(exec_bulk, sequential_on_the_inline_scheduler) {
    seq_ctx c;
    seq_init(&c);
    rec rc;
    rec_init(&rc);
    inline_run ir;
    ex_sender *s = ex_bulk(ex_schedule(ex_inline_scheduler()), EX_PAR, 6, seq_fn, &c);
    run_inline(&ir, s, &rc);
    cr_assert_eq(rc.values, 1);
    cr_assert_eq(rc.n, 0);
    cr_assert_eq(c.calls, 6);
    for (size_t i = 0; i < 6; i++) {
        cr_assert_eq(c.order[i], i);
        cr_assert_eq(c.thread[i], test_thread_id());
    }
    ex_operation_destroy(ir.op);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_bulk, shape_zero_never_calls_f_and_forwards_the_values) {
    seq_ctx c;
    seq_init(&c);
    ex_result r = ex_sync_wait(ex_bulk(ex_just(ex_int(3), ex_double(2.5)), EX_PAR, 0, seq_fn, &c));
    expect_value_result(&r);
    cr_assert_eq(c.calls, 0);
    cr_assert_eq(r.n, 2);
    cr_assert_eq(r.values[0].as.i, 3);
    cr_assert_float_eq(r.values[1].as.d, 2.5, 0);
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(exec_bulk, sequential_error_stops_later_indices) {
    static int payload;
    seq_ctx c;
    seq_init(&c);
    c.fail_at = 3;
    c.fail_err = ex_err_data(EX_EUSER + 5, "index three failed", &payload);
    rec rc;
    rec_init(&rc);
    inline_run ir;
    ex_sender *s = ex_bulk(ex_just(ex_int(1)), EX_PAR, 10, seq_fn, &c);
    run_inline(&ir, s, &rc);
    cr_assert_eq(rc.errors, 1);
    cr_assert_eq(rc.values + rc.stops, 0);
    cr_assert_eq(rc.err.code, EX_EUSER + 5);
    cr_assert_str_eq(rc.err.msg, "index three failed");
    cr_assert_eq(rc.err.data, &payload);
    cr_assert_eq(c.calls, 4, "indices after the failing one must not run (ran %zu)", c.calls);
    for (size_t i = 0; i < 4; i++) cr_assert_eq(c.order[i], i);
    ex_operation_destroy(ir.op);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_bulk, error_without_message_gets_one) {
    seq_ctx c;
    seq_init(&c);
    c.fail_at = 0;
    c.fail_err.code = EX_EUSER + 1;  /* msg NULL */
    ex_result r = ex_sync_wait(ex_bulk(ex_just(), EX_PAR, 3, seq_fn, &c));
    expect_error(&r, EX_EUSER + 1);
    cr_assert_eq(c.calls, 1);
    expect_no_leaks();
}

Test(exec_bulk, child_error_passes_through_without_calling_f) {
    static int payload;
    seq_ctx c;
    seq_init(&c);
    ex_result r = ex_sync_wait(ex_bulk(ex_just_error(ex_err_data(EX_EUSER + 2, "child", &payload)), EX_PAR, 5, seq_fn, &c));
    expect_error(&r, EX_EUSER + 2);
    cr_assert_str_eq(r.error.msg, "child");
    cr_assert_eq(r.error.data, &payload);
    cr_assert_eq(c.calls, 0);
    expect_no_leaks();
}

Test(exec_bulk, child_stopped_passes_through_without_calling_f) {
    seq_ctx c;
    seq_init(&c);
    ex_result r = ex_sync_wait(ex_bulk(ex_just_stopped(), EX_PAR, 5, seq_fn, &c));
    cr_assert_eq(r.disposition, EX_DISP_STOPPED);
    cr_assert_eq(c.calls, 0);
    expect_no_leaks();
}

Test(exec_bulk, null_child_or_function_is_einval) {
    seq_ctx c;
    seq_init(&c);
    ex_sender *s[6];
    s[0] = ex_bulk(NULL, EX_PAR, 3, seq_fn, &c);
    s[1] = ex_bulk(ex_just(ex_int(1)), EX_PAR, 3, NULL, &c);
    s[2] = ex_bulk_grain(NULL, EX_PAR, 3, 1, seq_fn, &c);
    s[3] = ex_bulk_grain(ex_just(), EX_PAR, 3, 1, NULL, &c);
    s[4] = ex_bulk_chunked(NULL, EX_PAR, 3, 1, chunk_fn, &c);
    s[5] = ex_bulk_chunked(ex_just(), EX_PAR, 3, 1, NULL, &c);
    for (int i = 0; i < 6; i++) {
        expect_invalid(s[i], EX_EINVAL);
    }
    cr_assert_eq(c.calls, 0);
    expect_no_leaks();
}

Test(exec_bulk, invalid_child_is_reported_with_its_error) {
    seq_ctx c;
    seq_init(&c);
    ex_sender *s = ex_bulk(too_many_values(), EX_PAR, 3, seq_fn, &c);
    expect_invalid(s, EX_EINVAL);
    cr_assert_eq(c.calls, 0);
    expect_no_leaks();
}

Test(exec_bulk, signatures_are_the_childs_plus_error) {
    seq_ctx c;
    seq_init(&c);
    ex_sender *s = ex_bulk(ex_just(ex_int(1), ex_str("a")), EX_PAR, 3, seq_fn, &c);
    expect_sigs(s, EX_SIG(EX_T_INT, EX_T_STR), 0, 0);
    const ex_sigs *sg = ex_sender_sigs(s);
    cr_assert(sg->flags & EX_SIGS_ERROR, "f may fail: the bulk sender may complete with an error");
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_bulk, sender_is_multi_shot) {
    seq_ctx c;
    seq_init(&c);
    ex_sender *s = ex_bulk(ex_just(ex_int(4)), EX_PAR, 4, seq_fn, &c);
    for (int k = 0; k < 3; k++) {
        ex_result r = ex_sync_wait(ex_sender_retain(s));
        expect_value_int(&r, 4);
    }
    cr_assert_eq(c.calls, 12);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_bulk, sequential_chunked_covers_the_shape_once) {
    chunk_ctx c;
    chunk_init(&c, 100, 0);
    c.expect_thread = test_thread_id();
    ex_result r = ex_sync_wait(ex_bulk_chunked(ex_just(ex_int(1)), EX_PAR, 100, 7, chunk_fn, &c));
    expect_value_int(&r, 1);
    cr_assert_geq(atomic_load(&c.chunks), 1);
    chunk_expect_cover(&c);
    cr_assert_eq(atomic_load(&c.off_thread), 0, "the sequential loop runs on the completing thread");
    free(c.hits);
    expect_no_leaks();
}

Test(exec_bulk, sequential_chunked_shape_zero_is_not_called) {
    chunk_ctx c;
    chunk_init(&c, 0, 0);
    ex_result r = ex_sync_wait(ex_bulk_chunked(ex_just(ex_int(1)), EX_PAR, 0, 1, chunk_fn, &c));
    expect_value_int(&r, 1);
    cr_assert_eq(atomic_load(&c.chunks), 0);
    free(c.hits);
    expect_no_leaks();
}

