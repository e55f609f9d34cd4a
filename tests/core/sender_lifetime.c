/* SPDX-License-Identifier: MIT */
/* [exec.snd]: sender lifetime and reuse, operation sizes (suite exec_sender, declared in sender.c). */
#include <stdlib.h>

#include "core/sender_fixtures.h"

/* --------------------------------------------------- lifetime and reuse */

Test(exec_sender, retain_release_counts) {
    long base = test_stats.in_use;
    ex_sender *s = ex_just(ex_int(4));
    cr_assert_eq(s->refs, 1u);
    cr_assert_eq(test_stats.in_use, base + 1);
    cr_assert_eq(ex_sender_retain(s), s);
    cr_assert_eq(s->refs, 2u);
    ex_sender_retain(s);
    cr_assert_eq(s->refs, 3u);
    ex_result r = ex_sync_wait(s); /* consumes one reference */
    expect_value_int(&r, 4);
    cr_assert_eq(s->refs, 2u);
    ex_result r2 = ex_sync_wait(s); /* the retained sender is still usable */
    expect_value_int(&r2, 4);
    cr_assert_eq(s->refs, 1u);
    cr_assert_eq(test_stats.in_use, base + 1, "still alive");
    ex_sender_release(s);
    cr_assert_eq(test_stats.in_use, base, "freed at the last release");
    cr_assert_null(ex_sender_retain(NULL));
    ex_sender_release(NULL);
    expect_no_leaks();
}

Test(exec_sender, adaptor_keeps_child_alive) {
    long base = test_stats.in_use;
    ex_sender *child = ex_just(ex_int(1));
    ex_sender_retain(child);
    counter c = { 0, 1 };
    ex_sender *s = then_count(child, &c); /* takes one reference */
    cr_assert_eq(child->refs, 2u);
    ex_sender_release(child); /* ours */
    cr_assert_eq(child->refs, 1u);
    expect_sync_int(s, 2);
    cr_assert_eq(test_stats.in_use, base);
    expect_no_leaks();
}

Test(exec_sender, static_senders_ignore_refcounting) {
    ex_sender *s = ex_just_stopped();
    cr_assert_eq(s->refs, 0u);
    for (int i = 0; i < 3; i++) ex_sender_retain(s);
    cr_assert_eq(s->refs, 0u);
    for (int i = 0; i < 5; i++) ex_sender_release(s);
    ex_result r = ex_sync_wait(s);
    expect_stopped(&r);
    expect_no_leaks();
}

Test(exec_sender, connect_does_not_start_work) {
    COUNTED_JUST_ONE(rc, c, s);
    cr_assert_eq(c.calls, 0, "building does not start work");
    big_buf buf;
    ex_operation *op;
    cr_assert_eq(ex_connect(s, rec_receiver(&rc), buf.b, sizeof buf.b, &op).code, 0);
    cr_assert_eq(c.calls, 0, "connect does not start work");
    cr_assert_eq(rec_total(&rc), 0);
    ex_start(op);
    cr_assert_eq(c.calls, 1);
    cr_assert_eq(rc.values, 1);
    ex_operation_destroy(op);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_sender, connect_schedule_does_not_enqueue) {
    ex_run_loop loop;
    test_loop_init(&loop);
    rec rc;
    rec_init(&rc);
    ex_sender *s = ex_schedule(ex_run_loop_scheduler(&loop));
    big_buf buf;
    ex_operation *op;
    cr_assert_eq(ex_connect(s, rec_receiver(&rc), buf.b, sizeof buf.b, &op).code, 0);
    cr_assert_eq(ex_run_loop_count(&loop), 0, "connect does not schedule");
    ex_start(op);
    cr_assert_eq(ex_run_loop_count(&loop), 1);
    cr_assert_eq(rec_total(&rc), 0);
    cr_assert(ex_run_loop_run_one(&loop));
    rec_expect_values(&rc, 0);
    ex_operation_destroy(op);
    ex_sender_release(s);
    test_loop_destroy(&loop);
    expect_no_leaks();
}

Test(exec_sender, one_sender_many_operations) {
    counter c = { 0, 10 };
    ex_sender *s = then_count(ex_just(ex_int(1)), &c);
    enum { N = 4 };
    rec rcs[N];
    big_buf bufs[N];
    ex_operation *ops[N];
    for (int i = 0; i < N; i++) {
        rec_init(&rcs[i]);
        cr_assert_eq(ex_connect(s, rec_receiver(&rcs[i]), bufs[i].b, sizeof bufs[i].b, &ops[i]).code, 0);
    }
    cr_assert_eq(c.calls, 0);
    for (int i = N - 1; i >= 0; i--) {
        ex_start(ops[i]);
        cr_assert_eq(rcs[i].values, 1);
        cr_assert_eq(rcs[i].v[0].as.i, 11);
    }
    for (int i = 0; i < N; i++) {
        cr_assert_eq(rec_total(&rcs[i]), 1, "operation %d completed exactly once", i);
        ex_operation_destroy(ops[i]);
    }
    cr_assert_eq(c.calls, N);
    for (int i = 0; i < 3; i++) {
        expect_sync_int(ex_sender_retain(s), 11);
    }
    ex_sender_release(s);
    expect_no_leaks();
}

/* Connects s into rc, releases s, then starts the operation: it must
 * complete with int want. */
static void expect_operation_outlives_sender(ex_sender *s, rec *rc, int64_t want) {
    ex_operation *op = run_start_released(s, rc);
    rec_expect_value_int(rc, want);
    run_destroy(op);
}

static ex_error tuple_sum(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx;
    if (n != 1 || in[0].type != EX_T_TUPLE) return ex_err(EX_EUSER, "tuple_sum: bad input");
    int64_t sum = 0;
    for (uint32_t i = 0; i < in[0].as.tuple->n; i++) sum += in[0].as.tuple->v[i].as.i;
    out[0] = ex_int(sum);
    return ex_ok();
}

Test(exec_sender, operation_outlives_the_sender) {
    /* Operation states never point back into their sender after connect. */
    rec rc;
    rec_init(&rc);
    ex_value inner[2] = { ex_int(8), ex_int(9) };
    ex_tuple t = { 0, 2, inner };
    ex_sender *s = ex_continues_on(
        ex_write_env(ex_then(ex_just(ex_tuple_value(&t)), tuple_sum, NULL, EX_SIG(EX_T_TUPLE), EX_SIG(EX_T_INT)),
                     &ex_key_get_scheduler, ex_sched_value(ex_inline_scheduler())),
        ex_inline_scheduler());
    expect_operation_outlives_sender(s, &rc, 17);
    expect_no_leaks();
}

static ex_sender *let_tuple(void *ctx, const ex_value *in, size_t n) {
    (void)in, (void)n;
    return ex_just(ex_tuple_value(ctx));
}

Test(exec_sender, operation_outlives_the_sender_let_value) {
    rec rc;
    rec_init(&rc);
    ex_value inner[2] = { ex_int(8), ex_int(9) };
    ex_tuple t = { 0, 2, inner };
    ex_sender *s = ex_then(ex_let_value(ex_just(ex_int(0)), let_tuple, &t, EX_SIG(EX_T_INT)), tuple_sum, NULL,
                           EX_SIG(EX_T_TUPLE), EX_SIG(EX_T_INT));
    expect_operation_outlives_sender(s, &rc, 17);
    expect_no_leaks();
}

Test(exec_sender, receiver_may_destroy_the_operation_in_its_completion) {
    counter c = { 0, 1 };
    ex_sender *ss[] = {
        then_count(ex_just(ex_int(1)), &c),
        ex_continues_on(then_count(ex_just(ex_int(1)), &c), ex_inline_scheduler()),
        ex_starts_on(ex_inline_scheduler(), then_count(ex_just(ex_int(1)), &c)),
        ex_write_env(then_count(ex_just(ex_int(1)), &c), &ex_key_get_scheduler, ex_sched_value(ex_inline_scheduler())),
        ex_into_variant(ex_just_error(ex_err(EX_EUSER, "e"))),
        ex_stopped_as_error(ex_just_stopped(), ex_err(EX_EUSER, "stopped")),
        ex_upon_stopped(ex_just_stopped(), NULL, NULL, EX_SIG0), /* invalid: NULL function */
    };
    for (size_t i = 0; i < sizeof ss / sizeof ss[0]; i++) {
        frees_op_rec sf;
        frees_op_rec_init(&sf);
        cr_assert_eq(ex_connect_alloc(ss[i], frees_op_rec_receiver(&sf), &sf.op).code, 0, "sender %zu", i);
        ex_start(sf.op);
        cr_assert_eq(rec_total(&sf.r), 1, "sender %zu completed once", i);
        if (i < 4) rec_expect_value_int(&sf.r, 2);
        else cr_assert_eq(sf.r.errors, 1);
        ex_sender_release(ss[i]);
    }
    expect_no_leaks();
}

/* ----------------------------------------------------- op size / layout */

Test(exec_sender, op_size_grows_with_nesting) {
    counter c = { 0, 1 };
    ex_sender *s0 = ex_just(ex_int(1));
    size_t z0 = ex_sender_op_size(s0);
    ex_sender *s1 = then_count(ex_sender_retain(s0), &c);
    size_t z1 = ex_sender_op_size(s1);
    ex_sender *s2 = then_count(ex_sender_retain(s1), &c);
    size_t z2 = ex_sender_op_size(s2);
    ex_sender *s3 = ex_continues_on(ex_sender_retain(s2), ex_inline_scheduler());
    size_t z3 = ex_sender_op_size(s3);
    cr_assert_geq(z0, sizeof(ex_operation));
    cr_assert_gt(z1, z0);
    cr_assert_gt(z2, z1);
    cr_assert_gt(z3, z2);
    ex_sender *ss[] = { s0, s1, s2, s3 };
    for (int i = 0; i < 4; i++) {
        size_t a = ex_sender_op_align(ss[i]);
        cr_assert_gt(a, 0);
        cr_assert_eq(a & (a - 1), 0, "sender %d: alignment %zu is a power of two", i, a);
    }
    cr_assert_eq(ex_sender_op_size(NULL), 0);
    expect_sync_int(s3, 3);
    ex_sender_release(s0);
    ex_sender_release(s1);
    ex_sender_release(s2);
    expect_no_leaks();
}
