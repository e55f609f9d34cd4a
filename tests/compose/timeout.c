/* SPDX-License-Identifier: MIT */
/* ex_timeout: the timer fires (the child is asked to stop and waited for,
 * the result is EX_ETIMEDOUT with a message naming it), the child
 * completes first (value, error, stopped pass through, the timer is gone),
 * a late value wins, stop from outside, zero duration, a timer that cannot
 * be armed, owned errors, allocation failures, bad input, signatures, on a
 * run loop, a pool and a single-thread context.
 *
 * The timers of most tests are on a run loop the test drives itself, so
 * which of the two completes first is the test's choice.  Nothing asserts
 * on timing; every wait is bounded. */
#include <string.h>

#include "common/owned_errors.h"
#include "common/schedulers.h"
#include "compose/compose_fixtures.h"

TEST_SUITE(exec_timeout, 30);

#define HOUR (3600 * EX_NS_PER_S)

/* ------------------------------------------------- a child the test steers */

/* What the child does when stop is requested on its token. */
enum { ON_STOP_NOTE, ON_STOP_STOPPED, ON_STOP_ERROR, ON_STOP_TUPLE };

typedef struct steered {
    _Atomic(test_op *) op;  /* started and not completed */
    atomic_int stop_seen;
    int on_stop;            /* ON_STOP_* */
    ex_value items[2];      /* ON_STOP_TUPLE's values, alive only inside the completion */
    ex_tuple t;
} steered;

static void steered_init(steered *c, int on_stop) {
    memset(c, 0, sizeof *c);
    c->on_stop = on_stop;
}

/* Completes the child's operation if nobody did: kind 'v' value(int v),
 * 'e' owned_error(v), 's' stopped, 't' value(tuple(int v, "t")). */
static void steered_complete(steered *c, test_op *o, char kind, int64_t v) {
    switch (kind) {
    case 'v': {
        ex_value x = ex_int(v);
        ex_set_value(o->r, &x, 1);
        break;
    }
    case 'e': ex_set_error(o->r, owned_error((int)v)); break;
    case 't': {
        c->items[0] = ex_int(v);
        c->items[1] = ex_str("t");
        c->t = (ex_tuple){ 0, 2, c->items };
        ex_value x = ex_tuple_value(&c->t);
        ex_set_value(o->r, &x, 1);
        memset(c->items, 0, sizeof c->items);  /* the values were borrowed: gone now */
        break;
    }
    default: ex_set_stopped(o->r); break;
    }
}

static void steered_on_stop(ex_stop_callback *cb) {
    test_op *o = (test_op *)(void *)((char *)cb - offsetof(test_op, cb));
    steered *c = o->ctx;
    atomic_fetch_add(&c->stop_seen, 1);
    if (c->on_stop == ON_STOP_NOTE) return;
    test_op *mine = o;
    if (!atomic_compare_exchange_strong(&c->op, &mine, NULL)) return;
    ex_stop_callback_deregister(&o->cb);  /* inside the callback: returns at once */
    steered_complete(c, o, c->on_stop == ON_STOP_ERROR ? 'e' : c->on_stop == ON_STOP_TUPLE ? 't' : 's', 7);
}

static void steered_start(test_op *o) {
    steered *c = o->ctx;
    atomic_store(&c->op, o);
    ex_stop_callback_register(&o->cb, ex_get_stop_token(ex_receiver_env(o->r)), steered_on_stop);
}

/* value(int) (and value(tuple) for ON_STOP_TUPLE), error, stopped. */
static ex_sender *steered_sender(steered *c) {
    ex_sigs sigs = { 1, EX_SIGS_ERROR | EX_SIGS_STOPPED, { EX_SIG(EX_T_INT), EX_SIG(EX_T_TUPLE) } };
    if (c->on_stop == ON_STOP_TUPLE) sigs.nvalues = 2;
    return test_sender_new(steered_start, c, &sigs);
}

/* The test completes the child (it must still be running). */
static void steered_finish(steered *c, char kind, int64_t v) {
    test_op *o = atomic_exchange(&c->op, NULL);
    cr_assert_not_null(o, "the child completed already");
    ex_stop_callback_deregister(&o->cb);
    steered_complete(c, o, kind, v);
}

/* ------------------------------------------------------------- helpers */

/* Runs loop's due timers and items until r completed (bounded). */
static void drive_until_done(ex_run_loop *loop, const rec *r) {
    double limit = test_now_s() + TEST_WAIT_LIMIT_S;
    while (rec_total(r) == 0) {
        cr_assert_lt(test_now_s(), limit, "timed out waiting for the completion");
        if (!ex_run_loop_run_one(loop)) test_nap_us(50);
    }
}

/* Runs loop's due timers and items until the child saw stop (bounded). */
static void drive_until_stop_seen(ex_run_loop *loop, steered *c) {
    double limit = test_now_s() + TEST_WAIT_LIMIT_S;
    while (atomic_load(&c->stop_seen) == 0) {
        cr_assert_lt(test_now_s(), limit, "timed out waiting for the timer");
        if (!ex_run_loop_run_one(loop)) test_nap_us(50);
    }
}

/* rec's error is EX_ETIMEDOUT with message msg (owned unless static);
 * released. */
static void rec_expect_timeout(rec *r, const char *msg) {
    rec_expect_error(r, EX_ETIMEDOUT);
    cr_assert_str_eq(r->err.msg, msg);
    ex_error_release(r->err);
    r->err = ex_ok();
}

/* then function: int in -> int in + 1. */
static ex_error plus_one(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)n;
    out[0] = ex_int(in[0].as.i + 1);
    return ex_ok();
}

/* A connected and started timeout on a run loop's timer. */
typedef struct on_loop {
    ex_run_loop loop;
    ex_scheduler sch;
    ex_operation *op;
    ex_sender *s;
    rec rc;
} on_loop;

static void on_loop_init(on_loop *l) {
    l->sch = test_loop_init(&l->loop);
    rec_init(&l->rc);
}

static void on_loop_start(on_loop *l, ex_sender *s) {
    l->s = s;
    l->op = run_start(s, &l->rc);
}

/* Frees the operation and destroys the loop: ex_run_loop_destroy is
 * EX_EBUSY while a timer is armed, so its EX_OK says the timer is gone. */
static void on_loop_end(on_loop *l) {
    run_destroy_release(l->op, l->s);
    test_loop_destroy(&l->loop);
}

/* ======================================================= the timer fires */

Test(exec_timeout, the_timer_stops_the_child_waits_for_it_and_gives_etimedout) {
    on_loop l;
    on_loop_init(&l);
    steered c;
    steered_init(&c, ON_STOP_NOTE);
    on_loop_start(&l, ex_timeout(ex_then(steered_sender(&c), plus_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)), l.sch,
                                 EX_NS_PER_MS));
    drive_until_stop_seen(&l.loop, &c);
    cr_assert_eq(rec_total(&l.rc), 0, "completed before the child did");
    steered_finish(&c, 's', 0);
    rec_expect_timeout(&l.rc, "ex_timeout: ex_then(plus_one) did not complete within 1 ms");
    on_loop_end(&l);
    expect_no_leaks();
}

Test(exec_timeout, a_child_that_stops_inside_the_request_gives_etimedout) {
    on_loop l;
    on_loop_init(&l);
    on_loop_start(&l, ex_timeout(until_stopped(), l.sch, 1500 * EX_NS_PER_US));
    drive_until_done(&l.loop, &l.rc);
    rec_expect_timeout(&l.rc, "ex_timeout: test.sender did not complete within 1.5 ms");
    on_loop_end(&l);
    expect_no_leaks();
}

Test(exec_timeout, the_child_s_error_after_the_deadline_is_released_for_etimedout) {
    owned_errors_reset();
    on_loop l;
    on_loop_init(&l);
    steered c;
    steered_init(&c, ON_STOP_ERROR);  /* the stop becomes an error, as stopped_as_error does */
    on_loop_start(&l, ex_timeout(steered_sender(&c), l.sch, 2 * EX_NS_PER_US));
    drive_until_done(&l.loop, &l.rc);
    rec_expect_timeout(&l.rc, "ex_timeout: test.sender did not complete within 2 us");
    on_loop_end(&l);
    expect_owned_all_released(1);
}

Test(exec_timeout, a_late_value_wins) {
    /* The child ignores the stop and completes with a value afterwards. */
    on_loop l;
    on_loop_init(&l);
    steered c;
    steered_init(&c, ON_STOP_NOTE);
    on_loop_start(&l, ex_timeout(steered_sender(&c), l.sch, 0));
    drive_until_stop_seen(&l.loop, &c);
    steered_finish(&c, 'v', 41);
    rec_expect_value_int(&l.rc, 41);
    on_loop_end(&l);
    expect_no_leaks();
}

Test(exec_timeout, a_value_inside_the_timers_request_is_kept_until_the_timer_is_done) {
    /* The child completes with a tuple inside the stop request the firing
     * timer makes: the timer has not arrived yet, so the tuple is copied
     * (its source is gone when the completion returns). */
    on_loop l;
    on_loop_init(&l);
    steered c;
    steered_init(&c, ON_STOP_TUPLE);
    on_loop_start(&l, ex_timeout(steered_sender(&c), l.sch, 0));
    drive_until_done(&l.loop, &l.rc);
    rec_expect_values(&l.rc, 1);
    cr_assert_str_eq(l.rc.text, "tuple#0(int 7, str \"t\")");
    on_loop_end(&l);
    expect_no_leaks();
}

Test(exec_timeout, no_memory_to_keep_the_value_gives_enomem) {
    on_loop l;
    on_loop_init(&l);
    steered c;
    steered_init(&c, ON_STOP_TUPLE);
    on_loop_start(&l, ex_timeout(steered_sender(&c), l.sch, 0));
    test_alloc_fail_next();  /* the tuple's copy, the first allocation from here */
    drive_until_done(&l.loop, &l.rc);
    expect_injected_failure_hit();
    rec_expect_error(&l.rc, EX_ENOMEM);
    on_loop_end(&l);
    expect_no_leaks();
}

Test(exec_timeout, no_memory_for_the_message_keeps_etimedout) {
    on_loop l;
    on_loop_init(&l);
    on_loop_start(&l, ex_timeout(until_stopped(), l.sch, 0));
    test_alloc_fail_next();  /* the message's box */
    drive_until_done(&l.loop, &l.rc);
    expect_injected_failure_hit();
    rec_expect_error(&l.rc, EX_ETIMEDOUT);
    cr_assert(!ex_error_is_owned(l.rc.err));
    cr_assert_str_eq(l.rc.err.msg, "ex_timeout: the operation did not complete within its time limit");
    on_loop_end(&l);
    expect_no_leaks();
}

Test(exec_timeout, the_message_names_stages_and_builders) {
    struct {
        ex_sender *child;
        int64_t ns;
        const char *msg;
    } valid[] = {
        { ex_when_all(until_stopped(), until_stopped()), 999, "ex_timeout: ex_when_all did not complete within 999 ns" },
        { ex_bulk_chunked(ex_when_all(until_stopped()), EX_PAR, 4, 1, chunk_fn, NULL),
          1001 * EX_NS_PER_US, "ex_timeout: ex_bulk_chunked(chunk_fn) did not complete within 1.001 ms" },
        { ex_then(until_stopped(), plus_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)), 0,
          "ex_timeout: ex_then(plus_one) did not complete within 0 ns" },
        { ex_then_named(until_stopped(), plus_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT), NULL), 0,
          "ex_timeout: ex_then did not complete within 0 ns" },
    };
    for (size_t i = 0; i < sizeof valid / sizeof valid[0]; i++) {
        on_loop l;
        on_loop_init(&l);
        on_loop_start(&l, ex_timeout(valid[i].child, l.sch, valid[i].ns));
        drive_until_done(&l.loop, &l.rc);
        rec_expect_timeout(&l.rc, valid[i].msg);
        on_loop_end(&l);
    }
    expect_no_leaks();
}

/* ================================================ the child completes first */

Test(exec_timeout, a_value_passes_through_and_the_timer_is_gone) {
    on_loop l;
    on_loop_init(&l);
    on_loop_start(&l, ex_timeout(ex_just(ex_int(5), ex_str("five")), l.sch, HOUR));
    cr_assert_eq(l.rc.values, 1, "just completes inside start");
    cr_assert_str_eq(l.rc.text, "int 5; str \"five\"");
    on_loop_end(&l);  /* EX_OK: no timer armed */
    expect_no_leaks();
}

Test(exec_timeout, an_error_passes_through_as_given) {
    owned_errors_reset();
    on_loop l;
    on_loop_init(&l);
    on_loop_start(&l, ex_timeout(ex_just_error(owned_error(3)), l.sch, HOUR));
    rec_expect_error(&l.rc, EX_EUSER + 1);
    cr_assert_eq(owned_error_id(l.rc.err), 3);
    ex_error_release(l.rc.err);
    on_loop_end(&l);
    expect_owned_all_released(1);
}

Test(exec_timeout, stopped_passes_through) {
    on_loop l;
    on_loop_init(&l);
    on_loop_start(&l, ex_timeout(ex_just_stopped(), l.sch, HOUR));
    rec_expect_stopped(&l.rc);
    on_loop_end(&l);
    expect_no_leaks();
}

Test(exec_timeout, a_child_completing_later_cancels_the_timer) {
    on_loop l;
    on_loop_init(&l);
    steered c;
    steered_init(&c, ON_STOP_NOTE);
    on_loop_start(&l, ex_timeout(steered_sender(&c), l.sch, HOUR));
    cr_assert_eq(rec_total(&l.rc), 0);
    steered_finish(&c, 'v', 12);
    rec_expect_value_int(&l.rc, 12);
    cr_assert_eq(atomic_load(&c.stop_seen), 0, "the child completed by itself");
    on_loop_end(&l);
    expect_no_leaks();
}

/* ====================================================== stop from outside */

Test(exec_timeout, an_outer_stop_reaches_the_child_and_the_timer) {
    on_loop l;
    on_loop_init(&l);
    rec_with_stop(&l.rc);
    steered c;
    steered_init(&c, ON_STOP_STOPPED);
    on_loop_start(&l, ex_timeout(steered_sender(&c), l.sch, HOUR));
    cr_assert(ex_stop_source_request_stop(&l.rc.stop));
    rec_expect_stopped(&l.rc);  /* the child's completion: not a timeout */
    cr_assert_eq(atomic_load(&c.stop_seen), 1);
    on_loop_end(&l);
    expect_no_leaks();
}

Test(exec_timeout, an_outer_stop_before_start_starts_both_stopped) {
    on_loop l;
    on_loop_init(&l);
    rec_init_stop_requested(&l.rc);
    ex_stop_token seen;
    on_loop_start(&l, ex_timeout(stop_probe(&seen), l.sch, HOUR));
    rec_expect_value_int(&l.rc, STOP_PROBE_POSSIBLE | STOP_PROBE_REQUESTED);
    on_loop_end(&l);
    expect_no_leaks();
}

Test(exec_timeout, an_outer_stop_after_the_timer_fired_still_gives_etimedout) {
    on_loop l;
    on_loop_init(&l);
    rec_with_stop(&l.rc);
    steered c;
    steered_init(&c, ON_STOP_NOTE);
    on_loop_start(&l, ex_timeout(steered_sender(&c), l.sch, 0));
    drive_until_stop_seen(&l.loop, &c);
    cr_assert(ex_stop_source_request_stop(&l.rc.stop));
    steered_finish(&c, 's', 0);
    rec_expect_timeout(&l.rc, "ex_timeout: test.sender did not complete within 0 ns");
    on_loop_end(&l);
    expect_no_leaks();
}

/* ============================================= a timer that cannot be armed */

/* A scheduler whose timers fail at start with owned_error(9) (a refusal). */
typedef struct failing_timer_op {
    ex_operation base;
    ex_receiver r;
} failing_timer_op;

static void failing_timer_start(ex_operation *op) { ex_set_error(((failing_timer_op *)op)->r, owned_error(9)); }
static const ex_operation_vtable failing_timer_vt = { failing_timer_start, NULL };

static ex_error failing_connect_at(void *self, ex_timer_when when, ex_receiver r, void *storage) {
    (void)self, (void)when;
    failing_timer_op *o = storage;
    o->base.vt = &failing_timer_vt;
    o->r = r;
    return ex_ok();
}

static const ex_scheduler_vtable failing_timer_sched_vt = {
    .name = "test.failing-timer",
    .schedule_op_size = sizeof(test_schedule_op),
    .schedule_op_align = alignof(test_schedule_op),
    .connect_schedule = test_connect_schedule_inline,
    .timer_op_size = sizeof(failing_timer_op),
    .timer_op_align = alignof(failing_timer_op),
    .connect_schedule_at = failing_connect_at,
};

Test(exec_timeout, a_timer_that_fails_stops_the_child_and_gives_its_error) {
    owned_errors_reset();
    ex_scheduler sch = { &failing_timer_sched_vt, NULL };
    ex_result r = ex_sync_wait(ex_timeout(until_stopped(), sch, HOUR));
    expect_error(&r, EX_EUSER + 1);
    cr_assert_eq(owned_error_id(r.error), 9);
    ex_result_destroy(&r);
    /* A value still wins, and the timer's error is released. */
    expect_sync_int(ex_timeout(ex_just(ex_int(2)), sch, HOUR), 2);
    expect_owned_all_released(2);
}

Test(exec_timeout, a_context_shut_down_refuses_the_timer_eshutdown) {
    ex_single_thread_context ctx;
    ex_scheduler sch = test_stc_init(&ctx);
    test_stc_destroy(&ctx);
    ex_result r = ex_sync_wait(ex_timeout(until_stopped(), sch, EX_NS_PER_MS));
    expect_error(&r, EX_ESHUTDOWN);
    ex_result_destroy(&r);
    expect_no_leaks();
}

/* ================================================================ building */

Test(exec_timeout, signatures_are_the_childs_plus_error) {
    ex_run_loop loop;
    ex_scheduler sch = test_loop_init(&loop);
    ex_sender *s = ex_timeout(ex_just(ex_int(1)), sch, HOUR);
    expect_sigs(s, EX_SIG(EX_T_INT), 0xff, EX_SIGS_ERROR);  /* no stopped: only the child's passes */
    ex_sender_release(s);
    s = ex_timeout(until_stopped(), sch, HOUR);
    expect_no_value_sigs(s, EX_SIGS_ERROR | EX_SIGS_STOPPED);
    ex_sender_release(s);
    test_loop_destroy(&loop);
    expect_no_leaks();
}

Test(exec_timeout, bad_input_gives_invalid_senders_and_releases_the_child) {
    ex_run_loop loop;
    ex_scheduler sch = test_loop_init(&loop);
    ex_scheduler none = { NULL, NULL };
    expect_invalid_msg(ex_timeout(NULL, sch, 1), EX_EINVAL, "ex_timeout: NULL input sender");
    expect_invalid_msg(ex_timeout(ex_just(), none, 1), EX_EINVAL, "ex_timeout: invalid scheduler handle");
    expect_invalid_msg(ex_timeout(ex_just(), ex_inline_scheduler(), 1), EX_ENOTSUP,
                       "ex_timeout: the scheduler has no clock (no connect_schedule_at)");
    expect_invalid_msg(ex_timeout(ex_just(), sch, -1), EX_EINVAL, "ex_timeout: negative duration");
    expect_invalid_msg(ex_timeout(ex_just(), sch, INT64_MAX), EX_EINVAL, "ex_timeout: the duration overflows the clock");
    expect_invalid(ex_timeout(too_many_values(), sch, 1), EX_EINVAL);  /* the child's own error */
    test_loop_destroy(&loop);
    expect_no_leaks();
}

Test(exec_timeout, allocation_failures_give_enomem) {
    ex_run_loop loop;
    ex_scheduler sch = test_loop_init(&loop);
    ex_sender *child = ex_just(ex_int(1));
    test_alloc_fail_next();
    expect_built_enomem(ex_timeout(child, sch, HOUR));
    /* The operation from the environment's allocator. */
    ex_sender *s = ex_timeout(ex_just(ex_int(1)), sch, HOUR);
    rec rc;
    rec_init(&rc);
    ex_operation *op = NULL;
    test_alloc_fail_next();
    cr_assert_eq(ex_connect_alloc(s, rec_receiver(&rc), &op).code, EX_ENOMEM);
    expect_injected_failure_hit();
    cr_assert_null(op);
    ex_sender_release(s);
    test_loop_destroy(&loop);
    expect_no_leaks();
}

/* ====================================================== pools and contexts */

POOL_TEST(exec_timeout, on_a_pool_the_timer_stops_a_spinning_child, 2) {
    ex_scheduler sch = ex_pool_scheduler(p);
    for (int round = 0; round < 5; round++) {
        spin_ctx sc;
        spin_init(&sc);
        ex_result r = ex_sync_wait(ex_timeout(spinner(sch, &sc), sch, EX_NS_PER_MS));
        expect_error(&r, EX_ETIMEDOUT);
        cr_assert_str_eq(r.error.msg, "ex_timeout: ex_let_value(lv_spin_until_stop) did not complete within 1 ms");
        ex_result_destroy(&r);
        /* On a loaded machine the timer may fire before the spinner is
         * scheduled: it then never starts (its schedule sees the stop). */
        cr_assert_eq(atomic_load(&sc.saw_stop), atomic_load(&sc.entered), "round %d: the child saw no stop", round);
        cr_assert_eq(atomic_load(&sc.timed_out), 0);
    }
}

POOL_TEST(exec_timeout, on_a_pool_the_childs_completion_passes_through, 2) {
    ex_scheduler sch = ex_pool_scheduler(p);
    owned_errors_reset();
    for (int round = 0; round < 20; round++) {
        expect_sync_int(ex_timeout(ex_starts_on(sch, ex_just(ex_int(round))), sch, HOUR), round);
        ex_result r = ex_sync_wait(ex_timeout(ex_starts_on(sch, ex_just_error(owned_error(round))), sch, HOUR));
        expect_error(&r, EX_EUSER + 1);
        cr_assert_eq(owned_error_id(r.error), round);
        ex_result_destroy(&r);
        r = ex_sync_wait(ex_timeout(ex_starts_on(sch, ex_just_stopped()), sch, HOUR));
        expect_stopped(&r);
    }
    cr_assert_eq(atomic_load(&owned_destroyed), 20);
}

POOL_TEST(exec_timeout, a_pool_shut_down_with_the_timer_pending_gives_stopped, 2) {
    /* The pending timer completes stopped: the child is stopped, and its
     * completion (stopped) is the result, not a timeout. */
    trec t;
    trec_init(&t);
    ex_sender *s = ex_timeout(until_stopped(), ex_pool_scheduler(p), HOUR);
    ex_operation *op = trec_run_start(s, &t);
    cr_assert_eq(ex_pool_shutdown(p).code, EX_OK);
    trec_wait_done(&t);
    cr_assert_eq(t.r.stops, 1, "values %d, errors %d (%d)", t.r.values, t.r.errors, t.r.err.code);
    ex_operation_free(op);
    ex_sender_release(s);
}

/* A child that works inside its own start until its token is stopped
 * (bounded), then completes stopped. */
static void work_in_start(test_op *o) {
    ex_stop_token tok = ex_get_stop_token(ex_receiver_env(o->r));
    double limit = test_now_s() + TEST_WAIT_LIMIT_S;
    while (!ex_stop_token_stop_requested(tok) && test_now_s() < limit) test_nap_us(20);
    *(bool *)o->ctx = ex_stop_token_stop_requested(tok);
    ex_set_stopped(o->r);
}

POOL_TEST(exec_timeout, a_child_working_inside_its_start_is_timed_out_too, 2) {
    /* The timer is armed before the child starts: a worker fires it while
     * the child still runs on the test's thread. */
    bool saw_stop = false;
    ex_sigs sigs = { 0, EX_SIGS_STOPPED, { { 0, { 0 } } } };
    ex_result r = ex_sync_wait(ex_timeout(test_sender_new(work_in_start, &saw_stop, &sigs), ex_pool_scheduler(p),
                                          100 * EX_NS_PER_US));
    expect_error(&r, EX_ETIMEDOUT);
    ex_result_destroy(&r);
    cr_assert(saw_stop, "the child never saw the stop request");
}

Test(exec_timeout, on_a_single_thread_context) {
    ex_single_thread_context ctx;
    ex_scheduler sch = test_stc_init(&ctx);
    ex_result r = ex_sync_wait(ex_timeout(until_stopped(), sch, 200 * EX_NS_PER_US));
    expect_error(&r, EX_ETIMEDOUT);
    cr_assert_str_eq(r.error.msg, "ex_timeout: test.sender did not complete within 200 us");
    ex_result_destroy(&r);
    expect_sync_int(ex_timeout(ex_starts_on(sch, ex_just(ex_int(8))), sch, HOUR), 8);
    test_stc_destroy(&ctx);
    expect_no_leaks();
}
