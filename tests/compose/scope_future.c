/* SPDX-License-Identifier: MIT */
/* Counting scopes (cexec/scope.h), ex_spawn_future: the future completes
 * with its work's result wherever that completed, a future released or
 * never started stops its work, stop requests of the consumer and of the
 * scope reach the work, and refusals and allocation failures.
 *
 * Nothing here asserts on timing: sleeps only give threads a chance to
 * reach a point, and every wait for asynchronous work is bounded so a lost
 * completion fails with a message instead of hanging. */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "compose/compose_fixtures.h"

/* =========================================================== spawn_future */

/* spawn_future(stop_waiter(st)) into s, once its work runs. */
static ex_sender *running_stop_waiter_future(stopper *st, ex_pool *p, any_scope *s) {
    stopper_init(st, p);
    ex_sender *f = ex_spawn_future(stop_waiter(st), sc_token(s));
    cr_assert_eq(ex_sender_status(f).code, 0);
    EXPECT_INT_REACHES(&st->started, 1);
    return f;
}

SCOPE_TEST(future_of_completed_work_completes_inline_with_its_value, 0) {
    ex_sender *f = ex_spawn_future(ex_just(ex_int(42), ex_str("answer")), sc_token(s));
    cr_assert_eq(ex_sender_status(f).code, 0);
    rec rc;
    rec_init(&rc);
    inline_run buf;
    ex_operation *op = connect_inline(&buf, f, &rc);
    ex_start(op);
    cr_assert_eq(rc.values, 1, "%s: a late consumer completes inside start", scope_kind_name(s));
    cr_assert_eq(rc.thread, test_thread_id());
    cr_assert_eq(rc.n, 2);
    cr_assert_eq(rc.v[0].as.i, 42);
    cr_assert_str_eq(rc.v[1].as.s, "answer");
    ex_operation_destroy(op);
    ex_sender_release(f);
    sc_join_ok(s);
}

SCOPE_TEST(future_started_before_completion_gets_the_value_on_the_worker, 2) {
    work_gate g;
    work_gate_init(&g, p, 7);
    ex_sender *f = ex_spawn_future(work_gated(&g, ex_pool_scheduler(p)), sc_token(s));
    cr_assert_eq(ex_sender_status(f).code, 0);
    work_gate_wait_entered(&g, 1);
    arec fr, jr;
    arec_init(&fr, p);
    arec_init(&jr, p);
    arec_with_scheduler(&jr, ex_inline_scheduler());
    ex_operation *fop = arec_run_start(f, &fr);
    ex_sender *j = sc_join(s);
    ex_operation *jop = arec_run_start(j, &jr);
    test_sleep_ms(20);
    cr_assert_eq(atomic_load(&fr.total), 0, "the future completed before its work");
    cr_assert_eq(atomic_load(&jr.total), 0, "the join completed before the future's work");
    work_gate_open(&g);
    arec_wait_done(&fr);
    cr_assert_eq(atomic_load(&fr.values), 1);
    cr_assert_eq(fr.n, 1);
    cr_assert_eq(fr.v[0].as.i, 7);
    cr_assert_eq(fr.thread, g.thread, "the future completes where its work completed");
    arec_wait_done(&jr);
    cr_assert_eq(atomic_load(&jr.values), 1);
    ex_operation_free(fop);
    ex_operation_free(jop);
    ex_sender_release(f);
    ex_sender_release(j);
}

SCOPE_TEST(future_delivers_error_and_stopped, 0) {
    static int payload;
    ex_result r = ex_sync_wait(
        ex_spawn_future(ex_just_error(ex_err_data(EX_EUSER + 6, "future failed", &payload)), sc_token(s)));
    expect_error(&r, EX_EUSER + 6);
    cr_assert_str_eq(r.error.msg, "future failed");
    cr_assert_eq(r.error.data, &payload);
    r = ex_sync_wait(ex_spawn_future(ex_just_stopped(), sc_token(s)));
    cr_assert_eq(r.disposition, EX_DISP_STOPPED);
    rec rc;
    rec_init(&rc);
    join_run jrun = join_start_rec(s, &rc);
    cr_assert_eq(rec_total(&rc), 1, "%s: the join completes once the futures' work completed", scope_kind_name(s));
    join_run_free(&jrun);
}

SIMPLE_SCOPE_TEST(future_keeps_tuple_values, 0) {
    ex_value inner[2] = { ex_int(3), ex_str("t") };
    ex_tuple t = { 1, 2, inner };
    ex_sender *f = ex_spawn_future(ex_just(ex_tuple_value(&t)), sc_token(s));
    inner[0] = ex_int(-3);
    ex_result r = ex_sync_wait(f);
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_eq(r.values[0].type, EX_T_TUPLE);
    cr_assert_eq(r.values[0].as.tuple->n, 2);
    cr_assert_eq(r.values[0].as.tuple->v[0].as.i, 3);
    cr_assert_str_eq(r.values[0].as.tuple->v[1].as.s, "t");
    ex_result_destroy(&r);
    sc_join_ok(s);
}

COUNTING_SCOPE_TEST(future_connected_twice_is_einval, 0) {
    ex_sender *f = ex_spawn_future(ex_just(ex_int(1)), sc_token(s));
    rec r1, r2;
    rec_init(&r1);
    rec_init(&r2);
    inline_run b1;
    _Alignas(max_align_t) unsigned char b2[256];
    ex_operation *o1 = connect_inline(&b1, f, &r1), *o2 = NULL;
    ex_error e = ex_connect(f, rec_receiver(&r2), b2, sizeof b2, &o2);
    cr_assert_eq(e.code, EX_EINVAL, "second connect: %d", e.code);
    cr_assert_not_null(e.msg);
    ex_start(o1);
    cr_assert_eq(r1.values, 1);
    cr_assert_eq(r1.v[0].as.i, 1);
    cr_assert_eq(rec_total(&r2), 0);
    ex_operation_destroy(o1);
    ex_sender_release(f);
    sc_join_ok(s);
}

SCOPE_TEST(releasing_the_future_without_starting_it_stops_the_work, 2) {
    stopper st;
    ex_sender *f = running_stop_waiter_future(&st, p, s);
    ex_sender_release(f);
    EXPECT_INT_REACHES(&st.finished, 1);
    cr_assert_eq(atomic_load(&st.no_token), 0, "the future's work has a stop token");
    cr_assert_eq(atomic_load(&st.observed), 1, "%s: releasing an unstarted future did not request stop",
                 scope_kind_name(s));
    sc_join_ok(s);
}

SIMPLE_SCOPE_TEST(future_connected_but_never_started_stops_the_work, 2) {
    stopper st;
    ex_sender *f = running_stop_waiter_future(&st, p, s);
    rec rc;
    rec_init(&rc);
    inline_run buf;
    ex_operation *op = connect_inline(&buf, f, &rc);
    ex_operation_destroy(op);
    ex_sender_release(f);
    EXPECT_INT_REACHES(&st.finished, 1);
    cr_assert_eq(atomic_load(&st.observed), 1, "nobody will consume the result: stop must be requested");
    cr_assert_eq(rec_total(&rc), 0);
    sc_join_ok(s);
}

SCOPE_TEST(stop_on_the_future_consumer_stops_the_work, 2) {
    bool before = s->counting;
    stopper st;
    ex_sender *f = running_stop_waiter_future(&st, p, s);
    arec fr;
    arec_init_stoppable(&fr, p, before);
    ex_operation *op = arec_run_start(f, &fr);
    if (!before) {
        test_sleep_ms(10);
        cr_assert_eq(atomic_load(&fr.total), 0);
        ex_stop_source_request_stop(&fr.stop);
    }
    arec_wait_done(&fr);
    cr_assert_eq(atomic_load(&st.observed), 1, "the consumer's stop request did not reach the work (%s)",
                 before ? "requested before start" : "requested while waiting");
    cr_assert_eq(atomic_load(&fr.values), 1, "the future completes with the work's result");
    cr_assert_eq(fr.v[0].type, EX_T_BOOL);
    cr_assert(fr.v[0].as.b);
    ex_operation_free(op);
    ex_sender_release(f);
    sc_join_ok(s);
}

COUNTING_SCOPE_TEST(counting_scope_request_stop_reaches_future_work, 2) {
    stopper st;
    ex_sender *f = running_stop_waiter_future(&st, p, s);
    arec fr;
    arec_init(&fr, p);
    ex_operation *op = arec_run_start(f, &fr);
    ex_counting_scope_request_stop(&s->full);
    arec_wait_done(&fr);
    cr_assert_eq(atomic_load(&st.observed), 1, "the scope's stop request did not reach the future's work");
    cr_assert_eq(atomic_load(&fr.values), 1);
    cr_assert(fr.v[0].as.b);
    ex_operation_free(op);
    ex_sender_release(f);
    sc_join_ok(s);
}

/* Work that signals it started, waits for the gate, and reports whether
 * its stop token was stopped by then. */
typedef struct tgate {
    atomic_int open, started;
} tgate;

static ex_error tgate_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    tgate *g = ctx;
    (void)n;
    atomic_fetch_add(&g->started, 1);
    (void)wait_int_reaches(&g->open, 1);
    out[0] = ex_bool(ex_stop_token_stop_requested(in[0].as.token));
    return ex_ok();
}

static ex_sender *return_future(void *ctx, const ex_value *in, size_t n) {
    (void)in, (void)n;
    ex_sender **f = ctx;
    ex_sender *out = *f;
    *f = NULL;
    return out;
}

SIMPLE_SCOPE_TEST(future_consumed_through_let_value_is_not_stopped, 2) {
    /* let_value connects the sender its function returns, releases it, and
     * starts the operation: the future is consumed, so its work must not be
     * asked to stop. */
    tgate g;
    memset(&g, 0, sizeof g);
    ex_sender *f = ex_spawn_future(
        ex_starts_on(ex_pool_scheduler(p), ex_then(ex_read_env(&ex_key_get_stop_token, EX_T_TOKEN), tgate_fn, &g,
                                                   EX_SIG(EX_T_TOKEN), EX_SIG(EX_T_BOOL))),
        sc_token(s));
    EXPECT_INT_REACHES(&g.started, 1);
    arec r;
    arec_init(&r, p);
    ex_sender *outer = ex_let_value(ex_just(), return_future, &f, EX_SIG0);
    ex_operation *op = arec_run_start(outer, &r);
    cr_assert_null(f, "the let_value function ran inside start");
    atomic_store(&g.open, 1);
    arec_wait_done(&r);
    cr_assert_eq(atomic_load(&r.values), 1, "the consumed future completed with values %d errors %d stops %d",
                 atomic_load(&r.values), atomic_load(&r.errors), atomic_load(&r.stops));
    cr_assert_eq(r.v[0].type, EX_T_BOOL);
    cr_assert_not(r.v[0].as.b, "stop was requested on the work of a future that is being consumed");
    ex_operation_free(op);
    ex_sender_release(outer);
    sc_join_ok(s);
}

SCOPE_TEST(spawn_future_into_a_closed_scope_completes_with_eshutdown, 0) {
    sc_close(s);
    atomic_int counter = 0;
    ex_result r = ex_sync_wait(ex_spawn_future(inline_inc(&counter), sc_token(s)));
    expect_error(&r, EX_ESHUTDOWN);
    cr_assert_eq(atomic_load(&counter), 0, "a refused sender must not run");
    sc_join_ok(s);
}

COUNTING_SCOPE_TEST(spawn_future_of_null_or_invalid_is_einval, 0) {
    ex_result r = ex_sync_wait(ex_spawn_future(NULL, sc_token(s)));
    expect_error(&r, EX_EINVAL);
    r = ex_sync_wait(ex_spawn_future(too_many_values(), sc_token(s)));
    expect_error(&r, EX_EINVAL);
    atomic_int counter = 0;
    ex_scope_token none = { NULL };
    r = ex_sync_wait(ex_spawn_future(inline_inc(&counter), none));
    expect_error(&r, EX_EINVAL);
    cr_assert_eq(atomic_load(&counter), 0);
    expect_nothing_associated(s, "a refused spawn_future");
}

SCOPE_TEST(spawn_future_oom_sweep, 0) {
    bool clean = false;
    int nomem = 0;
    for (long n = 1; n <= 100 && !clean; n++) {
        ex_value inner[2] = { ex_int(40), ex_int(2) };
        ex_tuple t = { 0, 2, inner };
        long failed_before = test_stats.failed;
        test_alloc_fail_at(n);
        ex_sender *f = ex_spawn_future(ex_just(ex_tuple_value(&t)), sc_token(s));
        ex_result r = ex_sync_wait(f);
        test_alloc_fail_at(0);
        bool failed = test_stats.failed != failed_before;
        if (r.disposition == EX_DISP_ERROR) {
            cr_assert_eq(r.error.code, EX_ENOMEM, "fail at %ld: %d (%s)", n, r.error.code,
                         r.error.msg ? r.error.msg : "");
            cr_assert(failed);
            nomem++;
        } else {
            cr_assert_eq(r.disposition, EX_DISP_VALUE, "fail at %ld: disposition %d", n, r.disposition);
            cr_assert_eq(r.values[0].as.tuple->v[0].as.i + r.values[0].as.tuple->v[1].as.i, 42);
            clean = !failed;
        }
        ex_result_destroy(&r);
        cr_assert_eq(test_stats.in_use, 0, "fail at %ld: %ld block(s) leaked", n, test_stats.in_use);
    }
    cr_assert(clean);
    cr_assert_gt(nomem, 0);
    sc_join_ok(s);
}
