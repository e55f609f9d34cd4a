/* SPDX-License-Identifier: MIT */
/* Counting scopes (cexec/scope.h), ex_associate ([exec.associate], P3149):
 * when the association is taken (building the sender), who owns it (the
 * sender, then the first operation connected; later connects take their
 * own), when it ends (the sender's release, the operation's destroy,
 * started or not), what runs on a closed scope (nothing: set_stopped),
 * stop, errors, signatures and allocation failures.
 *
 * Everything here runs on the test's thread (test_gate, until_stopped,
 * inline work), and the joins use the inline scheduler: a join completes
 * right where the last association ends, so "the join is still waiting"
 * is a plain check, not a timing. */
#include <string.h>

#include "compose/compose_fixtures.h"

/* A join started now, expected to wait. */
static join_run join_waiting(any_scope *s, rec *jr) {
    rec_init(jr);
    join_run j = join_start_rec(s, jr);
    cr_assert_eq(rec_total(jr), 0, "%s: the join completed with work associated", scope_kind_name(s));
    return j;
}

static void expect_join_waits(any_scope *s, const rec *jr, const char *why) {
    cr_assert_eq(rec_total(jr), 0, "%s: the join completed %s", scope_kind_name(s), why);
}

static void expect_join_done(any_scope *s, const rec *jr, const char *after) {
    cr_assert_eq(jr->values, 1, "%s: the join did not complete after %s (%d completions)", scope_kind_name(s), after,
                 rec_total(jr));
}

/* ======================================================== open scope */

SCOPE_TEST(associate_runs_its_sender_and_the_join_waits_for_the_operation, 0) {
    test_gate g;
    test_gate_init(&g);
    ex_sender *a = ex_associate(test_gate_sender(&g), sc_token(s));
    cr_assert_eq(ex_sender_status(a).code, 0);
    rec jr, rc;
    join_run j = join_waiting(s, &jr);
    rec_init(&rc);
    ex_operation *op = run_start(a, &rc);
    cr_assert(test_gate_wait_started(&g), "%s: the associated sender did not start", scope_kind_name(s));
    ex_sender_release(a);  /* its association went to the operation */
    expect_join_waits(s, &jr, "while the operation runs");
    test_gate_open(&g, 5);
    rec_expect_value_int(&rc, 5);
    expect_join_waits(s, &jr, "once the operation completed: it ends its association when destroyed");
    run_destroy(op);
    expect_join_done(s, &jr, "the operation was destroyed");
    join_run_free(&j);
}

SCOPE_TEST(associate_sender_released_unconnected_ends_its_association, 0) {
    atomic_int counter = 0;
    rec jr;
    ex_sender *a = ex_associate(inline_inc(&counter), sc_token(s));
    join_run j = join_waiting(s, &jr);
    ex_sender_release(a);
    expect_join_done(s, &jr, "the associate sender was released unconnected");
    cr_assert_eq(atomic_load(&counter), 0);
    join_run_free(&j);
}

SCOPE_TEST(associate_operation_destroyed_unstarted_ends_its_association, 0) {
    atomic_int counter = 0;
    ex_sender *a = ex_associate(inline_inc(&counter), sc_token(s));
    rec rc, jr;
    rec_init(&rc);
    ex_operation *op = NULL;
    cr_assert_eq(ex_connect_alloc(a, rec_receiver(&rc), &op).code, 0);
    ex_sender_release(a);
    join_run j = join_waiting(s, &jr);
    run_destroy(op);
    expect_join_done(s, &jr, "the connected operation was destroyed unstarted");
    cr_assert_eq(rec_total(&rc), 0);
    cr_assert_eq(atomic_load(&counter), 0, "the unstarted operation ran its sender");
    join_run_free(&j);
}

SCOPE_TEST(associate_sender_holds_its_association_until_connected_or_released, 0) {
    atomic_int counter = 0;
    ex_sender *a = ex_associate(inline_inc(&counter), sc_token(s));
    rec jr;
    join_run j = join_waiting(s, &jr);
    rec rc;
    rec_init(&rc);
    inline_run ir;
    run_inline(&ir, a, &rc);
    rec_expect_values(&rc, 0);
    expect_join_waits(s, &jr, "while the completed operation still exists");
    ex_operation_destroy(ir.op);
    expect_join_done(s, &jr, "the only operation was destroyed (the sender's association was taken over)");
    ex_sender_release(a);
    cr_assert_eq(atomic_load(&counter), 1);
    join_run_free(&j);
}

SCOPE_TEST(each_connect_of_an_associate_sender_holds_an_association, 0) {
    atomic_int counter = 0;
    ex_sender *a = ex_associate(inline_inc(&counter), sc_token(s));
    enum { N = 3 };
    rec rc[N];
    ex_operation *op[N];
    for (int i = 0; i < N; i++) {
        rec_init(&rc[i]);
        op[i] = run_start(a, &rc[i]);
        rec_expect_values(&rc[i], 0);
    }
    ex_sender_release(a);
    rec jr;
    join_run j = join_waiting(s, &jr);
    for (int i = 0; i < N - 1; i++) {
        run_destroy(op[i]);
        expect_join_waits(s, &jr, "with an operation left");
    }
    run_destroy(op[N - 1]);
    expect_join_done(s, &jr, "every operation was destroyed");
    cr_assert_eq(atomic_load(&counter), N);
    join_run_free(&j);
}

/* ====================================================== closed scope */

SCOPE_TEST(associate_on_a_closed_scope_completes_stopped_without_running, 0) {
    atomic_int counter = 0;
    sc_close(s);
    ex_sender *w = ex_sender_retain(inline_inc(&counter));
    ex_sender *a = ex_associate(w, sc_token(s));
    cr_assert_eq(ex_sender_status(a).code, 0, "an unassociated associate sender is a valid sender");
    cr_assert_eq(w->refs, 1, "%s: the sender that will never run was not released when associate failed",
                 scope_kind_name(s));
    ex_sender_release(w);
    rec rc;
    rec_init(&rc);
    inline_run ir;
    run_inline(&ir, a, &rc);
    rec_expect_stopped(&rc);
    ex_operation_destroy(ir.op);
    ex_result r = ex_sync_wait(a);
    expect_stopped(&r);
    cr_assert_eq(atomic_load(&counter), 0);
    expect_nothing_associated(s, "an associate sender of a closed scope");
}

SCOPE_TEST(associate_after_the_join_completed_is_stopped, 0) {
    atomic_int counter = 0;
    sc_join_ok(s);
    ex_result r = ex_sync_wait(ex_associate(inline_inc(&counter), sc_token(s)));
    expect_stopped(&r);
    cr_assert_eq(atomic_load(&counter), 0);
}

SCOPE_TEST(first_connect_runs_after_close_later_connects_are_stopped, 0) {
    atomic_int counter = 0;
    ex_sender *a = ex_associate(inline_inc(&counter), sc_token(s));
    sc_close(s);
    rec first, second;
    rec_init(&first);
    rec_init(&second);
    ex_operation *op1 = run_start(a, &first);
    rec_expect_values(&first, 0);
    cr_assert_eq(atomic_load(&counter), 1, "%s: the association taken when the sender was built was not used",
                 scope_kind_name(s));
    ex_operation *op2 = run_start(a, &second);
    rec_expect_stopped(&second);
    cr_assert_eq(atomic_load(&counter), 1, "a connect without an association ran the sender");
    rec jr;
    join_run j = join_waiting(s, &jr);
    run_destroy(op2);
    expect_join_waits(s, &jr, "with the first operation alive");
    run_destroy(op1);
    expect_join_done(s, &jr, "both operations were destroyed");
    ex_sender_release(a);
    join_run_free(&j);
}

/* ============================================================== stop */

COUNTING_SCOPE_TEST(counting_scope_request_stop_reaches_associated_work, 0) {
    rec rc;
    rec_init(&rc);  /* no stop token of its own: only the scope's reaches the work */
    ex_operation *op = run_start_released(ex_associate(until_stopped(), sc_token(s)), &rc);
    cr_assert_eq(rec_total(&rc), 0);
    ex_counting_scope_request_stop(&s->full);
    rec_expect_stopped(&rc);
    run_destroy(op);
}

SCOPE_TEST(receivers_stop_token_reaches_associated_work, 0) {
    rec rc;
    rec_init(&rc);
    rec_with_stop(&rc);
    ex_operation *op = run_start_released(ex_associate(until_stopped(), sc_token(s)), &rc);
    cr_assert_eq(rec_total(&rc), 0);
    ex_stop_source_request_stop(&rc.stop);
    rec_expect_stopped(&rc);
    run_destroy(op);
}

SIMPLE_SCOPE_TEST(simple_scope_associate_passes_the_receivers_token, 0) {
    ex_stop_token seen = ex_never_stop_token();
    rec rc;
    rec_init(&rc);
    rec_with_stop(&rc);
    inline_run ir;
    ex_sender *a = ex_associate(stop_probe(&seen), sc_token(s));
    run_inline(&ir, a, &rc);
    rec_expect_value_int(&rc, STOP_PROBE_POSSIBLE);
    cr_assert(ex_stop_token_equal(seen, ex_stop_source_token(&rc.stop)), "a simple scope's wrap changes nothing");
    ex_operation_destroy(ir.op);
    ex_sender_release(a);
}

/* ===================================================== errors, sigs */

SCOPE_TEST(associated_work_errors_go_to_the_receiver_not_the_scope, 0) {
    ex_result r = ex_sync_wait(ex_associate(ex_just_error(ex_err(EX_EUSER + 4, "assoc failed")), sc_token(s)));
    expect_error(&r, EX_EUSER + 4);
    cr_assert_str_eq(r.error.msg, "assoc failed");
    ex_result_destroy(&r);
    sc_join_ok(s);  /* set_value(): the scope kept no error */
}

SCOPE_TEST(associate_values_pass_through, 0) {
    ex_result r = ex_sync_wait(ex_associate(ex_just(ex_int(3), ex_str("three")), sc_token(s)));
    expect_values_text(&r, "int 3; str \"three\"");
    ex_result_destroy(&r);
}

SCOPE_TEST(associate_adds_set_stopped_to_its_senders_signatures, 0) {
    ex_sender *a = ex_associate(ex_just(ex_int(1)), sc_token(s));
    const ex_sigs *sigs = ex_sender_sigs(a);
    cr_assert(sigs->flags & EX_SIGS_STOPPED);
    cr_assert_eq(sigs->nvalues, 1);
    sc_close(s);
    ex_sender *b = ex_associate(ex_just(ex_int(1)), sc_token(s));
    cr_assert_eq(ex_sender_sigs(b)->flags, sigs->flags, "the signatures do not depend on the association");
    cr_assert_eq(ex_sender_sigs(b)->nvalues, 1);
    ex_sender_release(a);
    ex_sender_release(b);
}

SCOPE_TEST(associate_refuses_bad_input_and_associates_nothing, 0) {
    expect_invalid(ex_associate(NULL, sc_token(s)), EX_EINVAL);
    ex_scope_token none = { NULL };
    expect_invalid(ex_associate(ex_just(), none), EX_EINVAL);
    expect_invalid(ex_associate(too_many_values(), sc_token(s)), EX_EINVAL);
    expect_nothing_associated(s, "a refused associate");
}

SCOPE_TEST(associate_oom_sweep, 0) {
    atomic_int counter = 0;
    bool clean = false;
    int built = 0;
    for (long n = 1; n <= 10 && !clean; n++) {
        any_scope fresh;  /* expect_nothing_associated joins (and so closes) it */
        sc_init(&fresh, s->counting);
        ex_sender *w = inline_inc(&counter);
        long failed_before = test_stats.failed;
        test_alloc_fail_at(n);
        ex_sender *a = ex_associate(w, sc_token(&fresh));
        test_alloc_fail_at(0);
        bool failed = test_stats.failed != failed_before;
        if (ex_sender_status(a).code) {
            cr_assert(failed, "fail at %ld: invalid without an injected failure", n);
            cr_assert_eq(ex_sender_status(a).code, EX_ENOMEM, "fail at %ld", n);
            ex_sender_release(a);
        } else {
            clean = !failed;
            built++;
            ex_result r = ex_sync_wait(a);
            cr_assert_eq(r.disposition, EX_DISP_VALUE, "fail at %ld: disposition %d", n, r.disposition);
            ex_result_destroy(&r);
        }
        expect_nothing_associated(&fresh, "an associate that ran out of memory, or ran");
        sc_destroy_ok(&fresh);
    }
    cr_assert(clean, "never built an associate sender without an injected failure");
    cr_assert_eq(atomic_load(&counter), built);
}

/* ================================================= token operations */

SCOPE_TEST(scope_token_wrap_links_a_counting_scopes_stop, 0) {
    ex_stop_token seen = ex_never_stop_token();
    ex_sender *w = ex_scope_token_wrap(sc_token(s), stop_probe(&seen));
    rec rc;
    rec_init(&rc);
    inline_run ir;
    run_inline(&ir, w, &rc);
    if (s->counting) {
        rec_expect_value_int(&rc, STOP_PROBE_POSSIBLE);
        ex_counting_scope_request_stop(&s->full);
        cr_assert(ex_stop_token_stop_requested(seen), "without a token of the receiver the work sees the scope's");
    } else {
        rec_expect_value_int(&rc, 0);
    }
    ex_operation_destroy(ir.op);
    ex_sender_release(w);
    ex_scope_token none = { NULL };
    expect_invalid(ex_scope_token_wrap(none, ex_just()), EX_EINVAL);
}
