/* SPDX-License-Identifier: MIT */
/* Counting scopes (cexec/scope.h), joining: join of an empty or busy scope,
 * joins waiting together, spawn while a join waits, closed scopes, destroy,
 * and the association primitives - C++26 simple_counting_scope /
 * counting_scope with the documented deviations (spawning into a closed
 * scope is EX_ESHUTDOWN).
 *
 * Nothing here asserts on timing: sleeps only give threads a chance to
 * reach a point, and every wait for asynchronous work is bounded so a lost
 * completion fails with a message instead of hanging. */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "compose/compose_fixtures.h"

TEST_SUITE(exec_scope, 20);

/* Reads the counter at the moment the join completes. */
typedef struct join_seen {
    atomic_int *counter;
    int seen, calls;
} join_seen;

static ex_error join_seen_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    join_seen *j = ctx;
    (void)in, (void)n;
    j->calls++;
    j->seen = atomic_load(j->counter);
    out[0] = ex_int(j->seen);
    return ex_ok();
}


/* =================================================================== join */

/* A join that does not wait completes inline, without scheduling onto its
 * receiver's scheduler (a run loop nobody runs here). */
SCOPE_TEST(join_with_nothing_spawned_completes_inline, 0) {
    ex_run_loop loop;
    rec rc;
    rec_init(&rc);
    rec_with_scheduler(&rc, test_loop_init(&loop));
    ex_sender *j = sc_join(s);
    cr_assert_eq(ex_sender_status(j).code, 0);
    inline_run buf;
    ex_operation *op = connect_inline(&buf, j, &rc);
    cr_assert_eq(rec_total(&rc), 0, "connect must not start the join");
    ex_start(op);
    cr_assert_eq(rc.values, 1, "%s: join of an empty scope completes inside start", scope_kind_name(s));
    cr_assert_eq(rec_total(&rc), 1);
    cr_assert_eq(rc.n, 0);
    cr_assert_eq(rc.thread, test_thread_id());
    cr_assert_eq(ex_run_loop_count(&loop), 0, "%s: a join that did not wait scheduled a hop", scope_kind_name(s));
    ex_operation_destroy(op);
    ex_sender_release(j);
    test_loop_destroy(&loop);
}

SCOPE_TEST(join_sender_may_be_connected_many_times, 0) {
    ex_sender *j = sc_join(s);
    for (int i = 0; i < 3; i++) {
        ex_result r = ex_sync_wait(ex_sender_retain(j));
        cr_assert_eq(r.disposition, EX_DISP_VALUE);
    }
    ex_sender_release(j);
}

SCOPE_TEST(spawn_many_then_join_waits_for_all, 2) {
    atomic_int counter = 0;
    enum { N = 1000 };
    for (int i = 0; i < N; i++) {
        ex_error e = ex_spawn(pool_inc(p, &counter), sc_token(s));
        cr_assert_eq(e.code, 0, "spawn %d: %s", i, e.msg ? e.msg : "");
    }
    join_seen js = { &counter, -1, 0 };
    ex_result r = ex_sync_wait(ex_then(sc_join(s), join_seen_fn, &js, EX_SIG0, EX_SIG(EX_T_INT)));
    cr_assert_eq(r.disposition, EX_DISP_VALUE, "%s: disposition %d", scope_kind_name(s), r.disposition);
    cr_assert_eq(js.calls, 1);
    cr_assert_eq(js.seen, N, "%s: the join completed when %d of %d spawned operations had run", scope_kind_name(s),
                 js.seen, N);
    ex_result_destroy(&r);
}

/* The inline scheduler as the receiver's: the hop runs where the last
 * association ended. */
SCOPE_TEST(join_on_the_inline_scheduler_completes_on_the_last_works_worker, 2) {
    work_gate g;
    work_gate_init(&g, p, 7);
    cr_assert_eq(ex_spawn(work_gated(&g, ex_pool_scheduler(p)), sc_token(s)).code, 0);
    work_gate_wait_entered(&g, 1);
    arec jr;
    arec_init(&jr, p);
    arec_with_scheduler(&jr, ex_inline_scheduler());
    ex_sender *j = sc_join(s);
    ex_operation *op = arec_run_start(j, &jr);
    test_sleep_ms(20);
    cr_assert_eq(atomic_load(&jr.total), 0, "%s: join completed while spawned work was running", scope_kind_name(s));
    ex_error e = sc_destroy(s);
    cr_assert_eq(e.code, EX_EBUSY, "%s: destroy with a waiting join and outstanding work: %d", scope_kind_name(s),
                 e.code);
    cr_assert_not_null(e.msg);
    work_gate_open(&g);
    arec_wait_done(&jr);
    cr_assert_eq(atomic_load(&jr.values), 1);
    cr_assert_geq(jr.worker, 0, "%s: the join completes on the worker that ran the last work", scope_kind_name(s));
    cr_assert_eq(jr.thread, g.thread, "%s: the join completed on another thread than the last work",
                 scope_kind_name(s));
    ex_operation_free(op);
    ex_sender_release(j);
}

SCOPE_TEST(two_waiting_joins_both_complete, 2) {
    work_gate g;
    work_gate_init(&g, p, 7);
    cr_assert_eq(ex_spawn(work_gated(&g, ex_pool_scheduler(p)), sc_token(s)).code, 0);
    arec j1, j2;
    arec_init(&j1, p);
    arec_with_scheduler(&j1, ex_inline_scheduler());
    arec_init(&j2, p);
    arec_with_scheduler(&j2, ex_inline_scheduler());
    ex_sender *j = sc_join(s);
    ex_operation *o1 = arec_run_start(j, &j1);
    ex_operation *o2 = arec_run_start(j, &j2);
    cr_assert_eq(atomic_load(&j1.total) + atomic_load(&j2.total), 0);
    work_gate_open(&g);
    arec_wait_done(&j1);
    arec_wait_done(&j2);
    cr_assert_eq(atomic_load(&j1.values) + atomic_load(&j2.values), 2);
    ex_operation_free(o1);
    ex_operation_free(o2);
    ex_sender_release(j);
}

SCOPE_TEST(spawn_while_a_join_waits_is_accepted_and_awaited, 2) {
    work_gate g1, g2;
    work_gate_init(&g1, p, 7);
    work_gate_init(&g2, p, 7);
    cr_assert_eq(ex_spawn(work_gated(&g1, ex_pool_scheduler(p)), sc_token(s)).code, 0);
    arec jr;
    arec_init(&jr, p);
    arec_with_scheduler(&jr, ex_inline_scheduler());
    ex_sender *j = sc_join(s);
    ex_operation *op = arec_run_start(j, &jr);
    /* The scope is joining but not closed: new work is still associated. */
    ex_error e = ex_spawn(work_gated(&g2, ex_pool_scheduler(p)), sc_token(s));
    cr_assert_eq(e.code, 0, "%s: spawn while joining: %d (%s)", scope_kind_name(s), e.code, e.msg ? e.msg : "");
    work_gate_open(&g1);
    EXPECT_INT_REACHES(&g1.finished, 1);
    test_sleep_ms(20);
    cr_assert_eq(atomic_load(&jr.total), 0, "%s: join completed while the second work was outstanding",
                 scope_kind_name(s));
    work_gate_open(&g2);
    arec_wait_done(&jr);
    cr_assert_eq(atomic_load(&jr.values), 1);
    cr_assert_eq(atomic_load(&g2.finished), 1);
    ex_operation_free(op);
    ex_sender_release(j);
}

/* ============================================================ closed scope */

SCOPE_TEST(spawn_after_close_is_eshutdown_and_releases_the_sender, 0) {
    sc_close(s);
    atomic_int counter = 0;
    ex_error e = ex_spawn(inline_inc(&counter), sc_token(s));
    cr_assert_eq(e.code, EX_ESHUTDOWN, "%s: spawn after close: %d", scope_kind_name(s), e.code);
    cr_assert_not_null(e.msg);
    cr_assert_eq(atomic_load(&counter), 0, "a refused sender must not run");
    cr_assert_not(ex_scope_token_try_associate(sc_token(s)));
    sc_join_ok(s);
}

SCOPE_TEST(spawn_after_a_completed_join_is_eshutdown, 0) {
    atomic_int counter = 0;
    cr_assert_eq(ex_spawn(inline_inc(&counter), sc_token(s)).code, 0);
    cr_assert_eq(atomic_load(&counter), 1);
    sc_join_ok(s);
    ex_error e = ex_spawn(inline_inc(&counter), sc_token(s));
    cr_assert_eq(e.code, EX_ESHUTDOWN, "%s: spawn after join: %d", scope_kind_name(s), e.code);
    cr_assert_not_null(e.msg);
    cr_assert_eq(atomic_load(&counter), 1);
}

SCOPE_TEST(spawn_of_null_or_invalid_sender_is_einval, 1) {
    atomic_int counter = 0;
    ex_error e = ex_spawn(NULL, sc_token(s));
    cr_assert_eq(e.code, EX_EINVAL);
    cr_assert_not_null(e.msg);
    e = ex_spawn(too_many_values(), sc_token(s));
    cr_assert_eq(e.code, EX_EINVAL, "invalid sender: %d", e.code);
    cr_assert_not_null(e.msg);
    ex_scope_token none = { NULL };
    e = ex_spawn(inline_inc(&counter), none);
    cr_assert_eq(e.code, EX_EINVAL, "NULL scope token: %d", e.code);
    /* Connect failure: ex_on needs a scheduler in the environment. */
    e = ex_spawn(ex_on(ex_pool_scheduler(p), inline_inc(&counter)), sc_token(s));
    cr_assert_eq(e.code, EX_EINVAL, "connect failure: %d", e.code);
    cr_assert_not_null(e.msg);
    cr_assert_eq(atomic_load(&counter), 0);
    /* Nothing stayed associated. */
    expect_nothing_associated(s, "a refused spawn");
}

/* =============================================================== destroy */

SCOPE_TEST(destroy_with_outstanding_work_is_ebusy_then_ok_after_join, 2) {
    work_gate g;
    work_gate_init(&g, p, 7);
    cr_assert_eq(ex_spawn(work_gated(&g, ex_pool_scheduler(p)), sc_token(s)).code, 0);
    ex_error e = sc_destroy(s);
    cr_assert_eq(e.code, EX_EBUSY, "%s: destroy with outstanding work: %d", scope_kind_name(s), e.code);
    cr_assert_not_null(e.msg);
    work_gate_open(&g);
    sc_join_ok(s);
}

SCOPE_TEST(destroy_of_an_unused_scope_is_ok, 0) {
    /* the scope the test makes and destroys is the test */
}

/* ====================================================== association */

SCOPE_TEST(try_associate_keeps_join_pending_until_disassociated, 0) {
    ex_scope_token t = sc_token(s);
    cr_assert(ex_scope_token_try_associate(t));
    cr_assert(ex_scope_token_try_associate(t));
    arec jr;
    arec_init(&jr, NULL);
    arec_with_scheduler(&jr, ex_inline_scheduler());
    ex_sender *j = sc_join(s);
    ex_operation *op = arec_run_start(j, &jr);
    cr_assert_eq(atomic_load(&jr.total), 0, "%s: join completed with associations left", scope_kind_name(s));
    cr_assert_eq(sc_destroy(s).code, EX_EBUSY);
    ex_scope_token_disassociate(t);
    cr_assert_eq(atomic_load(&jr.total), 0, "%s: join completed with one association left", scope_kind_name(s));
    ex_scope_token_disassociate(t);
    cr_assert_eq(atomic_load(&jr.total), 1, "%s: the last disassociation completes the join", scope_kind_name(s));
    cr_assert_eq(atomic_load(&jr.values), 1);
    cr_assert_eq(jr.thread, test_thread_id(), "the join completes on the agent of the last disassociation");
    cr_assert_not(ex_scope_token_try_associate(t), "a joined scope is closed");
    ex_operation_free(op);
    ex_sender_release(j);
}

SCOPE_TEST(try_associate_fails_when_closed_or_without_a_scope, 0) {
    cr_assert(ex_scope_token_try_associate(sc_token(s)));
    sc_close(s);
    cr_assert_not(ex_scope_token_try_associate(sc_token(s)));
    /* Closing does not drop existing associations. */
    rec rc;
    rec_init(&rc);
    join_run jrun = join_start_rec(s, &rc);
    cr_assert_eq(rec_total(&rc), 0);
    ex_scope_token_disassociate(sc_token(s));
    cr_assert_eq(rc.values, 1);
    join_run_free(&jrun);
    ex_scope_token none = { NULL };
    cr_assert_not(ex_scope_token_try_associate(none));
}

/* A NULL scope is an error, not a crash, in every scope function. */
Test(exec_scope, null_scopes_are_errors) {
    expect_err(ex_counting_scope_init(NULL), EX_EINVAL);
    expect_err(ex_simple_counting_scope_init(NULL), EX_EINVAL);
    expect_invalid(ex_counting_scope_join(NULL), EX_EINVAL);
    expect_invalid(ex_simple_counting_scope_join(NULL), EX_EINVAL);
    expect_err(ex_counting_scope_destroy(NULL), EX_EINVAL);
    expect_err(ex_simple_counting_scope_destroy(NULL), EX_EINVAL);
    ex_counting_scope_close(NULL);
    ex_simple_counting_scope_close(NULL);
    ex_counting_scope_request_stop(NULL);
    ex_scope_token t = ex_counting_scope_token(NULL);
    cr_assert_null(t.scope);
    cr_assert_null(ex_simple_counting_scope_token(NULL).scope);
    cr_assert_not(ex_scope_token_try_associate(t));
    ex_scope_token_disassociate(t);
    expect_err(ex_spawn(ex_just(), t), EX_EINVAL);
    expect_invalid(ex_spawn_future(ex_just(), t), EX_EINVAL);
    expect_no_leaks();
}
