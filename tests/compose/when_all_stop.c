/* SPDX-License-Identifier: MIT */
/* [exec.when.all]: errors, stopped and stop tokens - the first error or
 * stopped child requests stop of the others, the receiver's stop request
 * reaches every child.
 *
 * Nothing here asserts on timing: sleeps only give threads a chance to reach
 * a point, and every wait on asynchronous work is bounded so that a lost
 * completion or a missing stop request fails the test with a message
 * instead of hanging. */
#include <stdlib.h>
#include <string.h>

#include "compose/compose_fixtures.h"

/* A child that runs on a scheduler, waits (bounded) until `want` spinners
 * are spinning, then completes with an error, stopped or a value. */
typedef enum trig_kind { TRIG_ERROR, TRIG_STOPPED, TRIG_VALUE } trig_kind;

typedef struct trigger_ctx {
    spin_ctx *sc;
    int want;
    trig_kind kind;
    atomic_int calls;
    atomic_int timed_out;
} trigger_ctx;

static int first_payload;

static ex_sender *lv_trigger(void *ctx, const ex_value *in, size_t n) {
    trigger_ctx *tc = ctx;
    (void)in, (void)n;
    atomic_fetch_add(&tc->calls, 1);
    if (wait_int_reaches(&tc->sc->entered, tc->want) < tc->want) atomic_fetch_add(&tc->timed_out, 1);
    switch (tc->kind) {
    case TRIG_ERROR: return ex_just_error(ex_err_data(EX_EUSER + 1, "first error", &first_payload));
    case TRIG_STOPPED: return ex_just_stopped();
    default: return ex_just(ex_int(5));
    }
}

static ex_sender *trigger(ex_scheduler sch, trigger_ctx *tc, spin_ctx *sc, int want, trig_kind kind) {
    memset(tc, 0, sizeof *tc);
    tc->sc = sc;
    tc->want = want;
    tc->kind = kind;
    atomic_init(&tc->calls, 0);
    atomic_init(&tc->timed_out, 0);
    return ex_let_value(ex_starts_on(sch, ex_just()), lv_trigger, tc, EX_SIG0);
}

/* ---------------------------------------------------------- errors, stopped */

Test(exec_when_all, error_child_gives_its_error) {
    static int payload;
    ex_result r = ex_sync_wait(ex_when_all(ex_just(ex_int(1)), ex_just_error(ex_err_data(EX_EUSER + 3, "boom", &payload)),
                                           ex_just(ex_int(2))));
    expect_error(&r, EX_EUSER + 3);
    cr_assert_str_eq(r.error.msg, "boom");
    cr_assert_eq(r.error.data, &payload);
    expect_no_leaks();
}

Test(exec_when_all, first_error_wins_inline) {
    static int p1, p2;
    ex_result r = ex_sync_wait(ex_when_all(ex_just_error(ex_err_data(EX_EUSER + 1, "first", &p1)),
                                           ex_just_error(ex_err_data(EX_EUSER + 2, "second", &p2))));
    expect_error(&r, EX_EUSER + 1);
    cr_assert_str_eq(r.error.msg, "first");
    cr_assert_eq(r.error.data, &p1);
    expect_no_leaks();
}

Test(exec_when_all, stopped_child_gives_stopped) {
    ex_result r = ex_sync_wait(ex_when_all(ex_just(ex_int(1)), ex_just_stopped(), ex_just(ex_int(2))));
    cr_assert_eq(r.disposition, EX_DISP_STOPPED);
    expect_no_leaks();
}

Test(exec_when_all, an_error_wins_over_stopped_in_either_order) {
    ex_result r = ex_sync_wait(ex_when_all(ex_just_stopped(), ex_just_error(ex_err(EX_EUSER + 4, "after stop"))));
    expect_error(&r, EX_EUSER + 4);
    r = ex_sync_wait(ex_when_all(ex_just_error(ex_err(EX_EUSER + 5, "before stop")), ex_just_stopped()));
    expect_error(&r, EX_EUSER + 5);
    expect_no_leaks();
}

POOL_TEST(exec_when_all, first_error_wins_and_running_siblings_get_a_stop_request, 3) {
    ex_scheduler sch = ex_pool_scheduler(p);
    spin_ctx sc;
    spin_init(&sc);
    sc.late_error = true; /* after the stop they fail too: that error must lose */
    trigger_ctx tc;
    ex_sender *trig = trigger(sch, &tc, &sc, 2, TRIG_ERROR);
    ex_result r = ex_sync_wait(ex_when_all(spinner(sch, &sc), spinner(sch, &sc), trig));
    cr_assert_eq(atomic_load(&tc.timed_out), 0, "the spinners never started");
    cr_assert_eq(atomic_load(&sc.timed_out), 0, "the running siblings got no stop request after the error");
    cr_assert_eq(atomic_load(&sc.not_possible), 0, "the children's stop token must be stoppable");
    cr_assert_eq(atomic_load(&sc.entered), 2);
    cr_assert_eq(atomic_load(&sc.saw_stop), 2);
    expect_error(&r, EX_EUSER + 1);
    cr_assert_str_eq(r.error.msg, "first error");
    cr_assert_eq(r.error.data, &first_payload);
}

POOL_TEST(exec_when_all, stopped_child_stops_running_siblings, 3) {
    ex_scheduler sch = ex_pool_scheduler(p);
    spin_ctx sc;
    spin_init(&sc);
    trigger_ctx tc;
    ex_sender *trig = trigger(sch, &tc, &sc, 2, TRIG_STOPPED);
    ex_result r = ex_sync_wait(ex_when_all(spinner(sch, &sc), trig, spinner(sch, &sc)));
    cr_assert_eq(atomic_load(&tc.timed_out), 0, "the spinners never started");
    cr_assert_eq(atomic_load(&sc.timed_out), 0, "the running siblings got no stop request after set_stopped");
    cr_assert_eq(atomic_load(&sc.saw_stop), 2);
    cr_assert_eq(r.disposition, EX_DISP_STOPPED, "disposition %d (%s)", r.disposition, r.error.msg ? r.error.msg : "");
}

POOL_TEST(exec_when_all, error_after_a_stopped_child_still_wins, 2) {
    /* A sibling stops first; a spinner then fails after seeing the stop:
     * the error replaces the stopped disposition. */
    ex_scheduler sch = ex_pool_scheduler(p);
    spin_ctx sc;
    spin_init(&sc);
    sc.late_error = true;
    trigger_ctx tc;
    ex_sender *trig = trigger(sch, &tc, &sc, 1, TRIG_STOPPED);
    ex_result r = ex_sync_wait(ex_when_all(spinner(sch, &sc), trig));
    cr_assert_eq(atomic_load(&sc.timed_out), 0, "the spinner got no stop request");
    cr_assert_eq(atomic_load(&sc.saw_stop), 1);
    expect_error(&r, EX_EUSER + 2);
}

/* ------------------------------------------------------------- stop tokens */

/* A rec whose stop token is stopped already. */
static void rec_init_stopped(rec *r) {
    rec_init(r);
    rec_with_stop(r);
    ex_stop_source_request_stop(&r->stop);
}

Test(exec_when_all, stop_requested_before_start_starts_no_child) {
    call_counter calls;
    memset(&calls, 0, sizeof calls);
    rec rc;
    rec_init_stopped(&rc);
    ex_sender *s = ex_when_all(ex_then(ex_just(ex_int(1)), count_pass, &calls, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)),
                               ex_then(ex_just(), count_pass, &calls, EX_SIG0, EX_SIG0));
    ex_operation *op = run_start(s, &rc);
    rec_expect_stopped(&rc);
    cr_assert_eq(rc.thread, test_thread_id(), "completes inside start");
    cr_assert_eq(atomic_load(&calls.calls), 0, "no child may be started");
    run_destroy(op);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_when_all, stop_requested_before_start_on_a_pool_starts_no_child) {
    ex_pool *p = test_pool_new(2);
    call_counter calls;
    memset(&calls, 0, sizeof calls);
    rec rc;
    rec_init_stopped(&rc);
    ex_scheduler sch = ex_pool_scheduler(p);
    ex_sender *s = ex_when_all(ex_then(ex_schedule(sch), count_pass, &calls, EX_SIG0, EX_SIG0),
                               ex_then(ex_schedule(sch), count_pass, &calls, EX_SIG0, EX_SIG0));
    ex_operation *op = run_start(s, &rc);
    cr_assert_eq(rc.stops, 1, "stopped inside start");
    run_destroy(op);
    ex_sender_release(s);
    test_pool_free(p);
    cr_assert_eq(atomic_load(&calls.calls), 0, "no child may be started");
    expect_no_leaks();
}

/* Starts s, whose `spinners` children spin on p until they see a stop
 * request, requests stop on the receiver's token once they all spin, and
 * checks that each of them saw it and that s completed stopped.  Takes s. */
static void expect_spinners_stopped(ex_pool *p, ex_sender *s, spin_ctx *sc, int spinners) {
    trec a;
    trec_init(&a);
    rec_with_stop(&a.r);
    ex_operation *op = trec_run_start(s, &a);
    cr_assert_geq(wait_int_reaches(&sc->entered, spinners), spinners, "the children did not start");
    cr_assert_eq(atomic_load(&a.done), 0, "completed before the stop request");
    cr_assert(ex_stop_source_request_stop(&a.r.stop));
    trec_wait_done(&a);
    cr_assert_eq(atomic_load(&sc->timed_out), 0, "a child did not see the receiver's stop request");
    cr_assert_eq(atomic_load(&sc->saw_stop), spinners);
    rec_expect_stopped(&a.r);
    ex_operation_free(op);
    ex_sender_release(s);
    test_pool_free(p);
    expect_no_leaks();
}

Test(exec_when_all, stop_requested_from_outside_while_running_completes_stopped) {
    ex_pool *p = test_pool_new(2);
    ex_scheduler sch = ex_pool_scheduler(p);
    spin_ctx sc;
    spin_init(&sc);
    expect_spinners_stopped(p, ex_when_all(spinner(sch, &sc), spinner(sch, &sc)), &sc, 2);
}

POOL_TEST(exec_when_all, stop_request_ignored_by_the_children_still_gives_their_values, 2) {
    /* [exec.when.all]: complete() looks only at the disposition, which only
     * the children's completions change. */
    ex_scheduler sch = ex_pool_scheduler(p);
    work_gate g;
    work_gate_init(&g, p, 3);
    trec a;
    trec_init(&a);
    rec_with_stop(&a.r);
    ex_sender *s = ex_when_all(work_gated(&g, sch), ex_just(ex_int(4)));
    ex_operation *op = trec_run_start(s, &a);
    work_gate_wait_entered(&g, 1);
    ex_stop_source_request_stop(&a.r.stop);
    work_gate_open(&g);
    trec_wait_done(&a);
    cr_assert_eq(atomic_load(&g.timed_out), 0);
    cr_assert_eq(a.r.values, 1, "values %d errors %d stops %d", a.r.values, a.r.errors, a.r.stops);
    cr_assert_eq(a.r.n, 2);
    cr_assert_eq(a.r.v[0].as.i, 3);
    cr_assert_eq(a.r.v[1].as.i, 4);
    ex_operation_free(op);
    ex_sender_release(s);
}

POOL_TEST(exec_when_all, stop_racing_with_completion_on_a_pool, 2) {
    /* The stop request arrives at any point while the children run: the
     * result is either the values or stopped, exactly once, and the stop
     * callback on the receiver's token is gone before the completion. */
    ex_scheduler sch = ex_pool_scheduler(p);
    int values = 0, stops = 0;
    for (int i = 0; i < 500; i++) {
        trec a;
        trec_init(&a);
        rec_with_stop(&a.r);
        ex_sender *s = ex_when_all(ex_then(ex_continues_on(ex_just(ex_int(i)), sch), add_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)),
                                   ex_continues_on(ex_just(ex_int(-i)), sch));
        ex_operation *op = NULL;
        cr_assert_eq(ex_connect_alloc(s, trec_receiver(&a), &op).code, 0);
        ex_sender_release(s);
        ex_start(op);
        if (i % 3 != 2) ex_stop_source_request_stop(&a.r.stop);
        trec_wait_done(&a);
        cr_assert_eq(rec_total(&a.r), 1, "iteration %d", i);
        cr_assert_eq(a.r.errors, 0, "iteration %d: error %d (%s)", i, a.r.err.code, a.r.err.msg ? a.r.err.msg : "");
        if (a.r.values) {
            values++;
            cr_assert_eq(a.r.n, 2);
            cr_assert_eq(a.r.v[0].as.i, i + 1, "iteration %d", i);
            cr_assert_eq(a.r.v[1].as.i, -i, "iteration %d", i);
        } else {
            stops++;
        }
        ex_operation_free(op);
        /* Requesting again after the operation is freed must be harmless. */
        ex_stop_source_request_stop(&a.r.stop);
    }
    cr_assert_geq(values, 1, "the iterations without a stop request complete with values");
    (void)stops;
}

static const ex_key user_key = { "test.when_all.user_key", true };

Test(exec_when_all, children_see_own_stop_token_and_the_forwarded_env) {
    rec rc;
    rec_init(&rc);
    rec_with_stop(&rc);
    ex_sender *s = ex_write_env(ex_when_all(ex_read_env(&ex_key_get_stop_token, EX_T_TOKEN), ex_read_env(&user_key, EX_T_ANY)),
                                &user_key, ex_int(42));
    ex_operation *op = run_start(s, &rc);
    cr_assert_eq(rc.values, 1, "errors %d (%s)", rc.errors, rc.err.msg ? rc.err.msg : "");
    cr_assert_eq(rc.n, 2);
    cr_assert_eq(rc.v[0].type, EX_T_TOKEN);
    cr_assert(ex_stop_token_stop_possible(rc.v[0].as.token), "the children's token is when_all's own in-place token");
    cr_assert_not(ex_stop_token_equal(rc.v[0].as.token, ex_stop_source_token(&rc.stop)),
                  "the children must not get the receiver's token itself");
    cr_assert_eq(rc.v[1].as.i, 42, "the receiver's environment is forwarded");
    run_destroy(op);
    ex_sender_release(s);
    /* The operation is gone: a stop request must not reach freed state. */
    ex_stop_source_request_stop(&rc.stop);
    expect_no_leaks();
}


/* ------------------------------------ nested when_alls: stop linked on demand */

/* A when_all below another registers nothing on the parent's source at
 * its start (src/core/exi_lazy_stop.h); these check that nothing is lost
 * for a token read through unlinked sources, for a callback registered
 * deep below, and for a start after the parent stopped. */

Test(exec_when_all, children_of_nested_when_alls_see_an_outside_stop_by_polling) {
    ex_pool *p = test_pool_new(2);
    ex_scheduler sch = ex_pool_scheduler(p);
    spin_ctx sc;
    spin_init(&sc);
    expect_spinners_stopped(p, ex_when_all(ex_when_all(spinner(sch, &sc)), ex_when_all(ex_when_all(spinner(sch, &sc)))),
                            &sc, 2);
}

/* A child that registers a callback on its token, says so, and waits
 * (bounded) for the callback to run. */
typedef struct registering {
    ex_stop_callback cb;  /* first: the callback is the struct */
    atomic_int registered, fired;
} registering;

static void registering_fired(ex_stop_callback *cb) { atomic_store(&((registering *)(void *)cb)->fired, 1); }

static ex_error register_and_wait(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)n, (void)out;
    registering *rg = ctx;
    (void)ex_stop_callback_register(&rg->cb, in[0].as.token, registering_fired);
    atomic_store(&rg->registered, 1);
    (void)wait_int_reaches(&rg->fired, 1);
    ex_stop_callback_deregister(&rg->cb);
    return ex_ok();
}

Test(exec_when_all, a_callback_three_when_alls_down_is_reached_by_an_outside_stop) {
    /* The registration links each when_all's source to the one above;
     * without that the outside request stops at the outermost when_all
     * and the callback never runs (the child's bounded wait gives up). */
    ex_pool *p = test_pool_new(2);
    ex_scheduler sch = ex_pool_scheduler(p);
    registering rg;
    memset(&rg, 0, sizeof rg);
    atomic_init(&rg.registered, 0);
    atomic_init(&rg.fired, 0);
    trec a;
    trec_init(&a);
    rec_with_stop(&a.r);
    ex_sender *leaf = ex_then(ex_starts_on(sch, ex_read_env(&ex_key_get_stop_token, EX_T_TOKEN)), register_and_wait, &rg,
                              EX_SIG(EX_T_TOKEN), EX_SIG0);
    ex_sender *s = ex_when_all(ex_just(ex_int(1)), ex_when_all(ex_when_all(leaf)));
    ex_operation *op = trec_run_start(s, &a);
    cr_assert_eq(wait_int_reaches(&rg.registered, 1), 1, "the child did not register");
    cr_assert(ex_stop_source_request_stop(&a.r.stop));
    trec_wait_done(&a);
    cr_assert_eq(atomic_load(&rg.fired), 1, "the request did not reach a callback three when_alls down");
    cr_assert_eq(a.r.values, 1, "the children completed with values: values %d errors %d stops %d", a.r.values,
                 a.r.errors, a.r.stops);
    ex_operation_free(op);
    ex_sender_release(s);
    test_pool_free(p);
    expect_no_leaks();
}

static ex_sender *lv_inner_when_all(void *ctx, const ex_value *in, size_t n) {
    (void)in, (void)n;
    return ex_when_all(ex_then(ex_just(), count_pass, ctx, EX_SIG0, EX_SIG0));
}

Test(exec_when_all, a_when_all_started_after_its_parent_stopped_starts_no_child) {
    /* The first child fails inline, which requests stop on the outer
     * when_all's source; the second then builds and starts a when_all
     * below it, whose start check must find that stop. */
    call_counter calls;
    memset(&calls, 0, sizeof calls);
    rec rc;
    rec_init(&rc);
    rec_with_stop(&rc);
    ex_sender *s = ex_when_all(ex_just_error(ex_err(EX_EUSER, "first")),
                               ex_let_value(ex_just(), lv_inner_when_all, &calls, EX_SIG0));
    ex_operation *op = run_start(s, &rc);
    cr_assert_eq(rc.errors, 1, "values %d errors %d stops %d", rc.values, rc.errors, rc.stops);
    cr_assert_eq(rc.err.code, EX_EUSER);
    cr_assert_eq(atomic_load(&calls.calls), 0, "the inner when_all started a child after its parent stopped");
    run_destroy(op);
    ex_sender_release(s);
    expect_no_leaks();
}
