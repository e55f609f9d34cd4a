/* SPDX-License-Identifier: MIT */
/* ex_stop_when: a trigger's completion (any) stops the sender, the
 * sender's completion stops the trigger, the result is the sender's once
 * both completed (values kept until then), the trigger's results are
 * discarded, outer stop reaches both, signatures, bad input.
 *
 * Nothing asserts on timing; every wait on asynchronous work is bounded. */
#include <string.h>

#include "compose/compose_fixtures.h"

TEST_SUITE(exec_stop_when, 20);

/* Starts s inline on rc (connect_inline + start). */
static ex_operation *start_inline(inline_run *ir, ex_sender *s, rec *rc) {
    run_inline(ir, s, rc);
    return ir->op;
}

static void finish_inline(inline_run *ir, ex_sender *s) {
    ex_operation_destroy(ir->op);
    ex_sender_release(s);
}

/* ----------------------------------------------------------- the rules */

Test(exec_stop_when, the_senders_completion_stops_the_trigger) {
    /* The trigger only ends when asked to stop. */
    expect_sync_int(ex_stop_when(ex_just(ex_int(1)), until_stopped()), 1);
    ex_result r = ex_sync_wait(ex_stop_when(ex_just_error(ex_err(EX_EUSER + 1, "its error")), until_stopped()));
    expect_error(&r, EX_EUSER + 1);
    r = ex_sync_wait(ex_stop_when(ex_just_stopped(), until_stopped()));
    expect_stopped(&r);
    expect_no_leaks();
}

Test(exec_stop_when, the_triggers_completion_of_any_kind_stops_the_sender) {
    ex_sender *triggers[3] = { ex_just(ex_int(5)), ex_just_error(ex_err(EX_EUSER + 2, "trigger failed")), ex_just_stopped() };
    for (int i = 0; i < 3; i++) {
        ex_result r = ex_sync_wait(ex_stop_when(until_stopped(), triggers[i]));
        expect_stopped(&r);  /* the sender's completion; the trigger's is discarded */
    }
    expect_no_leaks();
}

/* let_value function: the probe, run once the gate opened. */
static ex_sender *probe_after(void *ctx, const ex_value *in, size_t n) {
    (void)in, (void)n;
    return stop_probe(ctx);
}

Test(exec_stop_when, the_sender_sees_the_triggers_stop_request) {
    /* The trigger completes inside start; the sender waits on a gate, then
     * probes its token. */
    ex_stop_token seen;
    test_gate g;
    test_gate_init(&g);
    rec rc;
    rec_init(&rc);
    ex_sender *s = ex_stop_when(ex_let_value(test_gate_sender(&g), probe_after, &seen, EX_SIG(EX_T_INT)), ex_just());
    ex_operation *op = run_start(s, &rc);
    cr_assert_eq(rec_total(&rc), 0);
    test_gate_open(&g, 0);
    rec_expect_value_int(&rc, STOP_PROBE_POSSIBLE | STOP_PROBE_REQUESTED);
    run_destroy_release(op, s);
    expect_no_leaks();
}

Test(exec_stop_when, the_trigger_may_complete_later_and_the_value_waits) {
    /* The gate ignores stop: the result waits for it; the sender's tuple,
     * whose producer is gone by then, survives. */
    test_gate g;
    test_gate_init(&g);
    ex_value items[2] = { ex_int(1), ex_str("one") };
    ex_tuple t = { 0, 2, items };
    rec rc;
    rec_init(&rc);
    inline_run ir;
    ex_sender *s = ex_stop_when(ex_just(ex_tuple_value(&t), ex_int(2)), test_gate_sender(&g));
    start_inline(&ir, s, &rc);
    cr_assert_eq(rec_total(&rc), 0, "completed before the trigger did");
    test_gate_open(&g, 9);
    cr_assert_eq(rc.values, 1);
    cr_assert_str_eq(rc.text, "tuple#0(int 1, str \"one\"); int 2");
    finish_inline(&ir, s);
    expect_no_leaks();
}

Test(exec_stop_when, a_trigger_that_never_completes_by_itself) {
    /* A schedule on a run loop nobody runs yet: the stop request from the
     * sender's completion is seen when the loop runs it. */
    ex_run_loop loop;
    ex_scheduler sch = test_loop_init(&loop);
    rec rc;
    rec_init(&rc);
    inline_run ir;
    ex_sender *s = ex_stop_when(ex_just(ex_int(3)), ex_schedule(sch));
    start_inline(&ir, s, &rc);
    cr_assert_eq(rec_total(&rc), 0);
    test_loop_drain(&loop);
    rec_expect_value_int(&rc, 3);
    finish_inline(&ir, s);
    test_loop_destroy(&loop);
    expect_no_leaks();
}

/* ------------------------------------------------------ stop from outside */

Test(exec_stop_when, outer_stop_reaches_both) {
    rec rc;
    rec_init(&rc);
    rec_with_stop(&rc);
    inline_run ir;
    ex_sender *s = ex_stop_when(until_stopped(), until_stopped());
    start_inline(&ir, s, &rc);
    cr_assert_eq(rec_total(&rc), 0);
    cr_assert(ex_stop_source_request_stop(&rc.stop));
    rec_expect_stopped(&rc);
    finish_inline(&ir, s);
    expect_no_leaks();
}

Test(exec_stop_when, outer_stop_before_start_starts_both_with_their_token_stopped) {
    ex_stop_token seen_sender, seen_trigger;
    rec rc;
    rec_init_stop_requested(&rc);
    inline_run ir;
    ex_sender *s = ex_stop_when(stop_probe(&seen_sender), stop_probe(&seen_trigger));
    start_inline(&ir, s, &rc);
    /* The sender decides: the probe completes with its flags. */
    rec_expect_value_int(&rc, STOP_PROBE_POSSIBLE | STOP_PROBE_REQUESTED);
    cr_assert(ex_stop_token_stop_requested(seen_trigger));
    finish_inline(&ir, s);
    expect_no_leaks();
}

/* ----------------------------------------------------------- on a pool */

POOL_TEST(exec_stop_when, a_pool_trigger_stops_a_pool_sender, 2) {
    ex_scheduler sch = ex_pool_scheduler(p);
    for (int round = 0; round < 10; round++) {
        spin_ctx sc;
        spin_init(&sc);
        ex_result r = ex_sync_wait(ex_stop_when(spinner(sch, &sc), ex_starts_on(sch, ex_just())));
        expect_stopped(&r);
        cr_assert_eq(atomic_load(&sc.timed_out), 0, "round %d: the sender got no stop request", round);
        /* and the other way round: the sender ends a spinning trigger */
        spin_init(&sc);
        r = ex_sync_wait(ex_stop_when(ex_starts_on(sch, ex_just(ex_int(round))), spinner(sch, &sc)));
        expect_value_int(&r, round);
        cr_assert_eq(atomic_load(&sc.timed_out), 0, "round %d: the trigger got no stop request", round);
    }
}

/* ------------------------------------------------------------ building */

Test(exec_stop_when, signatures_are_the_senders) {
    ex_sender *s = ex_stop_when(ex_just(ex_int(1)), ex_just_error(ex_err(EX_EUSER, "trigger")));
    expect_sigs(s, EX_SIG(EX_T_INT), 0xff, 0);  /* neither the trigger's error nor a stopped */
    ex_sender_release(s);
    ex_value items[1] = { ex_int(1) };
    ex_tuple t = { 0, 1, items };
    s = ex_stop_when(ex_just(ex_tuple_value(&t)), until_stopped());
    expect_sigs(s, EX_SIG(EX_T_TUPLE), 0xff, EX_SIGS_ERROR);  /* keeping the tuple may fail */
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_stop_when, bad_input_is_einval_and_releases_the_other) {
    ex_sender *s = ex_stop_when(NULL, ex_just());
    expect_invalid_status(s, EX_EINVAL);
    s = ex_stop_when(ex_just(), NULL);
    cr_assert_str_eq(ex_sender_status(s).msg, "ex_stop_when: NULL trigger sender");
    expect_invalid(s, EX_EINVAL);
    ex_sender *a = ex_just(), *b = ex_just();
    test_alloc_fail_next();
    expect_built_enomem(ex_stop_when(a, b));
    expect_no_leaks();
}
