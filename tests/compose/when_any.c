/* SPDX-License-Identifier: MIT */
/* ex_when_any: the first completion wins on each channel, the others are
 * asked to stop and awaited, values and tuples survive until the race
 * completes, stop from outside, signatures, allocation failures, bad
 * input, nesting with when_all, children on a pool.
 *
 * Nothing asserts on timing; every wait on asynchronous work is bounded. */
#include <string.h>

#include "compose/compose_fixtures.h"

TEST_SUITE(exec_when_any, 20);

/* ------------------------------------------------------------ winners */

Test(exec_when_any, the_first_value_wins_and_the_others_see_stop) {
    ex_stop_token seen;
    rec rc;
    rec_init(&rc);
    inline_run ir;
    /* just completes inside its start: the probe, started after it, finds
     * its token stopped. */
    ex_sender *s = ex_when_any(ex_just(ex_int(1)), stop_probe(&seen));
    run_inline(&ir, s, &rc);
    rec_expect_value_int(&rc, 1);
    cr_assert(ex_stop_token_stop_requested(seen), "the loser's token must be stopped");
    ex_operation_destroy(ir.op);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_when_any, the_first_error_wins) {
    static int payload;
    ex_result r = ex_sync_wait(ex_when_any(ex_just_error(ex_err_data(EX_EUSER + 1, "first", &payload)), ex_just(ex_int(2)),
                                           ex_just_error(ex_err(EX_EUSER + 2, "second"))));
    expect_error(&r, EX_EUSER + 1);
    cr_assert_str_eq(r.error.msg, "first");
    cr_assert_eq(r.error.data, &payload);
    expect_no_leaks();
}

Test(exec_when_any, the_first_stopped_wins) {
    ex_result r = ex_sync_wait(ex_when_any(ex_just_stopped(), ex_just(ex_int(2)), ex_just_error(ex_err(EX_EUSER, "x"))));
    expect_stopped(&r);
    expect_no_leaks();
}

Test(exec_when_any, a_later_child_wins_over_one_that_waits_for_stop) {
    /* until_stopped waits; just(5) wins; the stop request then ends it. */
    ex_result r = ex_sync_wait(ex_when_any(until_stopped(), until_stopped(), ex_just(ex_int(5), ex_str("five"))));
    expect_values_text(&r, "int 5; str \"five\"");
    r = ex_sync_wait(ex_when_any(until_stopped(), ex_just_error(ex_err(EX_EUSER + 3, "late"))));
    expect_error(&r, EX_EUSER + 3);
    expect_no_leaks();
}

Test(exec_when_any, one_child_gives_its_completion) {
    expect_sync_int(ex_when_any(ex_just(ex_int(9))), 9);
    expect_sync_values(ex_when_any(ex_just()), 0);
    expect_sync_error(ex_when_any(ex_just_error(ex_err(EX_EUSER + 4, "only"))), EX_EUSER + 4);
    expect_no_leaks();
}

/* ------------------------------------------------ waiting for the losers */

/* then function: set_value(tuple(10, "ten")) pointing into ctx. */
typedef struct tuple_src {
    ex_value items[2];
    ex_tuple t;
} tuple_src;

static ex_error make_tuple(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    tuple_src *ts = ctx;
    ts->items[0] = ex_int(10);
    ts->items[1] = ex_str("ten");
    ts->t = (ex_tuple){ 0, 2, ts->items };
    out[0] = ex_tuple_value(&ts->t);
    return ex_ok();
}

static ex_sender *tuple_child(tuple_src *ts) { return ex_then(ex_just(), make_tuple, ts, EX_SIG0, EX_SIG(EX_T_TUPLE)); }

Test(exec_when_any, the_result_waits_for_every_loser_and_its_values_survive) {
    /* The gate ignores stop requests: the race must wait for it. */
    tuple_src ts;
    memset(&ts, 0, sizeof ts);
    test_gate g;
    test_gate_init(&g);
    rec rc;
    rec_init(&rc);
    inline_run ir;
    ex_sender *s = ex_when_any(tuple_child(&ts), ex_just(ex_int(3), ex_str("three")), test_gate_sender(&g));
    run_inline(&ir, s, &rc);
    cr_assert(test_gate_wait_started(&g));
    cr_assert_eq(rec_total(&rc), 0, "completed before its last child did");
    memset(&ts, 0x5a, sizeof ts);  /* the winner's producer is gone */
    test_gate_open(&g, 4);
    cr_assert_eq(rc.values, 1, "values %d errors %d stops %d", rc.values, rc.errors, rc.stops);
    cr_assert_str_eq(rc.text, "tuple#0(int 10, str \"ten\")");
    ex_operation_destroy(ir.op);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_when_any, a_kept_error_waits_for_the_losers_too) {
    static int payload;
    test_gate g;
    test_gate_init(&g);
    rec rc;
    rec_init(&rc);
    inline_run ir;
    ex_sender *s = ex_when_any(ex_just_error(ex_err_data(EX_EUSER + 5, "kept", &payload)), test_gate_sender(&g));
    run_inline(&ir, s, &rc);
    cr_assert_eq(rec_total(&rc), 0);
    test_gate_open(&g, 1);
    rec_expect_error(&rc, EX_EUSER + 5);
    cr_assert_str_eq(rc.err.msg, "kept");
    cr_assert_eq(rc.err.data, &payload);
    ex_operation_destroy(ir.op);
    ex_sender_release(s);
    expect_no_leaks();
}

/* A child whose receiver frees the race inside the completion: the race
 * touches nothing afterwards (ASan), whichever child arrives last. */
Test(exec_when_any, the_receiver_may_free_the_operation_in_its_completion) {
    test_gate g;
    test_gate_init(&g);
    frees_op_rec f;
    frees_op_rec_init(&f);
    ex_sender *s = ex_when_any(ex_just(ex_int(1)), test_gate_sender(&g));
    cr_assert_eq(ex_connect_alloc(s, frees_op_rec_receiver(&f), &f.op).code, 0);
    ex_start(f.op);
    test_gate_open(&g, 2);
    rec_expect_value_int(&f.r, 1);
    ex_sender_release(s);
    expect_no_leaks();
}

/* ------------------------------------------------------ stop from outside */

Test(exec_when_any, outer_stop_reaches_every_child) {
    rec rc;
    rec_init(&rc);
    rec_with_stop(&rc);
    inline_run ir;
    ex_sender *s = ex_when_any(until_stopped(), until_stopped(), until_stopped());
    run_inline(&ir, s, &rc);
    cr_assert_eq(rec_total(&rc), 0);
    cr_assert(ex_stop_source_request_stop(&rc.stop));
    rec_expect_stopped(&rc);
    ex_operation_destroy(ir.op);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_when_any, outer_stop_then_the_first_completion_still_wins) {
    /* Both gates ignore the stop request: the first to complete wins,
     * with a value. */
    test_gate g1, g2;
    test_gate_init(&g1);
    test_gate_init(&g2);
    rec rc;
    rec_init(&rc);
    rec_with_stop(&rc);
    inline_run ir;
    ex_sender *s = ex_when_any(test_gate_sender(&g1), test_gate_sender(&g2));
    run_inline(&ir, s, &rc);
    cr_assert(ex_stop_source_request_stop(&rc.stop));
    cr_assert_eq(rec_total(&rc), 0);
    test_gate_open(&g2, 22);
    cr_assert_eq(rec_total(&rc), 0);
    test_gate_open(&g1, 11);
    rec_expect_value_int(&rc, 22);
    ex_operation_destroy(ir.op);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_when_any, stop_before_start_starts_no_child) {
    call_counter calls;
    memset(&calls, 0, sizeof calls);
    rec rc;
    rec_init_stop_requested(&rc);
    inline_run ir;
    ex_sender *s = ex_when_any(counted_int(&calls, 1), counted_int(&calls, 2));
    run_inline(&ir, s, &rc);
    rec_expect_stopped(&rc);
    cr_assert_eq(atomic_load(&calls.calls), 0, "a child ran");
    ex_operation_destroy(ir.op);
    ex_sender_release(s);
    expect_no_leaks();
}

/* ------------------------------------------------------------ signatures */

Test(exec_when_any, signatures_are_the_union_of_the_childrens) {
    ex_sender *s = ex_when_any(ex_just(ex_int(1)), ex_just(ex_int(2)), ex_just(ex_str("x"), ex_double(1.0)));
    const ex_sigs *sg = ex_sender_sigs(s);
    cr_assert_eq(sg->nvalues, 2, "duplicates once");
    cr_assert(sigs_have(sg, EX_SIG(EX_T_INT)));
    cr_assert(sigs_have(sg, EX_SIG(EX_T_STR, EX_T_DOUBLE)));
    cr_assert_eq(sg->flags, EX_SIGS_STOPPED, "no child fails, nothing to copy that may fail");
    ex_sender_release(s);

    s = ex_when_any(ex_just(ex_int(1)), ex_just_error(ex_err(EX_EUSER, "e")));
    expect_sigs(s, EX_SIG(EX_T_INT), 0xff, EX_SIGS_ERROR | EX_SIGS_STOPPED);
    ex_sender_release(s);

    tuple_src ts;
    s = ex_when_any(tuple_child(&ts));
    expect_sigs(s, EX_SIG(EX_T_TUPLE), 0xff, EX_SIGS_ERROR | EX_SIGS_STOPPED);  /* the copy may fail */
    ex_sender_release(s);

    s = ex_when_any(until_stopped());
    expect_no_value_sigs(s, EX_SIGS_STOPPED);
    ex_sender_release(s);
    expect_no_leaks();
}

/* Runs s inline on a fresh rec and checks its values' text. */
static void expect_inline_text(ex_sender *s, const char *want) {
    rec rc;
    rec_init(&rc);
    inline_run ir;
    run_inline(&ir, s, &rc);
    cr_assert_eq(rc.values, 1, "values %d errors %d stops %d", rc.values, rc.errors, rc.stops);
    cr_assert_str_eq(rc.text, want);
    ex_operation_destroy(ir.op);
    ex_sender_release(s);
}

Test(exec_when_any, children_of_different_signatures_either_wins) {
    expect_inline_text(ex_when_any(ex_just(ex_str("a"), ex_int(1)), ex_just(ex_double(2.0))), "str \"a\"; int 1");
    expect_inline_text(ex_when_any(until_stopped(), ex_just(ex_double(2.5)), ex_just(ex_int(1))), "double 2.5");
    expect_no_leaks();
}

/* A child that sends more values than its signature says. */
static void send_three(test_op *o) {
    ex_value v[3] = { ex_int(1), ex_int(2), ex_int(3) };
    ex_set_value(o->r, v, 3);
}

Test(exec_when_any, a_child_over_its_signature_is_einval) {
    ex_sigs one = ex_sigs_none();
    ex_sigs_add_value(&one, EX_SIG(EX_T_INT));
    ex_result r = ex_sync_wait(ex_when_any(test_sender_new(send_three, NULL, &one)));
    expect_error(&r, EX_EINVAL);
    cr_assert_not_null(r.error.msg);
    expect_no_leaks();
}

/* ------------------------------------------------ allocation and input */

Test(exec_when_any, failing_to_keep_a_tuple_is_enomem) {
    ex_fault_allocator fa;
    ex_fault_allocator_init(&fa, NULL);
    tuple_src ts;
    ex_sender *s = ex_write_env(ex_when_any(tuple_child(&ts), until_stopped()), &ex_key_get_allocator,
                                ex_alloc_value(ex_fault_allocator_get(&fa)));
    ex_fault_allocator_fail_nth(&fa, 1);  /* the tuple copy: the only allocation through it */
    ex_result r = ex_sync_wait(s);
    expect_error(&r, EX_ENOMEM);
    cr_assert_not_null(r.error.msg);
    expect_no_leaks();
}

Test(exec_when_any, every_allocation_failing_in_turn_gives_enomem_or_the_value) {
    long hits = 0;
    for (long k = 1; k <= 50; k++) {
        tuple_src ts;
        test_alloc_reset();
        test_alloc_fail_at(k);
        ex_result r = ex_sync_wait(ex_when_any(until_stopped(), tuple_child(&ts), until_stopped()));
        long failed = test_stats.failed;
        test_alloc_reset();
        if (r.disposition == EX_DISP_ERROR) {
            cr_assert_eq(r.error.code, EX_ENOMEM, "k=%ld: %s", k, r.error.msg ? r.error.msg : "");
            cr_assert_eq(failed, 1, "k=%ld: EX_ENOMEM without a failed allocation", k);
            hits++;
        } else {
            cr_assert_eq(r.disposition, EX_DISP_VALUE, "k=%ld", k);
            cr_assert_eq(r.values[0].as.tuple->v[0].as.i, 10);
            ex_result_destroy(&r);
            if (!failed) break;  /* past the last allocation */
        }
    }
    cr_assert_geq(hits, 3, "senders and the tuple copy allocate: each failure must be seen");
    expect_no_leaks();
}

Test(exec_when_any, building_out_of_memory_is_enomem) {
    ex_sender *a = ex_just(ex_int(1)), *b = ex_just(ex_int(2));
    test_alloc_fail_next();
    expect_built_enomem(ex_when_any(a, b));
    expect_no_leaks();
}

Test(exec_when_any, bad_input_is_einval_and_releases_the_others) {
    expect_invalid(ex_when_any(ex_just(ex_int(1)), NULL, ex_just(ex_int(2))), EX_EINVAL);
    ex_sender *s = ex_when_any(ex_just(ex_int(1)), NULL);
    cr_assert_str_eq(ex_sender_status(s).msg, "ex_when_any: NULL input sender");
    ex_sender_release(s);
    expect_invalid(ex_when_any_n(NULL, 1), EX_EINVAL);
    ex_sender *one = ex_just();
    expect_invalid(ex_when_any_n(&one, 0), EX_EINVAL);
    ex_sender_release(one);
    /* An invalid child: its error. */
    expect_invalid(ex_when_any(ex_just(ex_int(1)), too_many_values()), EX_EINVAL);
    expect_no_leaks();
}

/* --------------------------------------------------------------- nesting */

POOL_TEST(exec_when_any, nested_in_when_all_and_around_it, 2) {
    ex_scheduler sch = ex_pool_scheduler(p);
    spin_ctx sc;
    spin_init(&sc);
    /* when_all of races: each race's winner is the quick child. */
    ex_result r = ex_sync_wait(ex_when_all(ex_when_any(spinner(sch, &sc), ex_starts_on(sch, ex_just(ex_int(1)))),
                                           ex_when_any(ex_starts_on(sch, ex_just(ex_int(2))), spinner(sch, &sc))));
    expect_values_text(&r, "int 1; int 2");
    cr_assert_eq(atomic_load(&sc.timed_out), 0, "a spinner got no stop request");
    /* A race of when_alls: the one that can finish wins, the other's
     * spinner is stopped (when_all then completes stopped, and loses). */
    spin_init(&sc);
    r = ex_sync_wait(ex_when_any(ex_when_all(spinner(sch, &sc), ex_starts_on(sch, ex_just(ex_int(3)))),
                                 ex_when_all(ex_starts_on(sch, ex_just(ex_int(4))), ex_starts_on(sch, ex_just(ex_int(5))))));
    expect_values_text(&r, "int 4; int 5");
    cr_assert_eq(atomic_load(&sc.timed_out), 0);
    cr_assert_eq(atomic_load(&sc.saw_stop), atomic_load(&sc.entered));
    /* A race inside a race. */
    spin_init(&sc);
    r = ex_sync_wait(ex_when_any(spinner(sch, &sc), ex_when_any(spinner(sch, &sc), ex_starts_on(sch, ex_just(ex_int(6))))));
    expect_value_int(&r, 6);
    cr_assert_eq(atomic_load(&sc.timed_out), 0);
}

POOL_TEST(exec_when_any, pool_children_that_wait_for_stop_are_stopped, 3) {
    ex_scheduler sch = ex_pool_scheduler(p);
    for (int round = 0; round < 20; round++) {
        spin_ctx sc;
        spin_init(&sc);
        ex_result r = ex_sync_wait(ex_when_any(spinner(sch, &sc), ex_starts_on(sch, ex_just(ex_int(round))), spinner(sch, &sc)));
        expect_value_int(&r, round);
        /* A spinner that ran saw the stop; one stopped before it ran never
         * entered. */
        cr_assert_eq(atomic_load(&sc.timed_out), 0, "round %d: a spinner got no stop request", round);
        cr_assert_eq(atomic_load(&sc.not_possible), 0, "round %d: the children's token must be stoppable", round);
        cr_assert_eq(atomic_load(&sc.saw_stop), atomic_load(&sc.entered), "round %d", round);
    }
}
