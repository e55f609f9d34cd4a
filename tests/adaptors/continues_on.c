/* SPDX-License-Identifier: MIT */
/* [exec.continues.on], [exec.schedule.from]: continues_on, schedule_from (suite exec_transfer, declared in on.c). */
#include <pthread.h>
#include <stdlib.h>

#include "adaptors/transfer_fixtures.h"

/* ---------------------------------------------- continues_on / schedule_from */

Test(exec_transfer, continues_on_child_runs_where_started_completes_on_target) {
    ex_single_thread_context c;
    test_stc_init(&c);
    mark child = { .add = 1 }, after = { .add = 10 };
    ex_sender *s = then_mark(ex_continues_on(then_mark(ex_just(ex_int(1)), &child), ex_single_thread_context_scheduler(&c)), &after);
    expect_sync_int(s, 12);
    cr_assert_eq(child.calls, 1);
    cr_assert_eq(after.calls, 1);
    cr_assert(pthread_equal(child.tid, pthread_self()), "the child runs where continues_on was started");
    cr_assert(on_thread(after.tid, &c), "the completion happens on the target's thread");
    test_stc_destroy(&c);
    expect_no_leaks();
}

Test(exec_transfer, continues_on_between_two_contexts) {
    stc_pair two;
    stc_pair_init(&two);
    cr_assert_not(pthread_equal(ex_single_thread_context_thread_id(&two.a), ex_single_thread_context_thread_id(&two.b)));
    mark ma = { .add = 2 }, mb = { .add = 3 };
    ex_sender *s = ex_starts_on(two.sa,
                                ex_continues_on(then_mark(ex_just(ex_int(5)), &ma), two.sb));
    expect_sync_int(then_mark(s, &mb), 10);
    cr_assert(on_thread(ma.tid, &two.a));
    cr_assert(on_thread(mb.tid, &two.b));
    stc_pair_destroy(&two);
    expect_no_leaks();
}

Test(exec_transfer, continues_on_carries_several_values) {
    ex_single_thread_context c;
    test_stc_init(&c);
    int x = 0;
    static const char hello[] = "hello";
    ex_value inner[2] = { ex_int(7), ex_str(hello) };
    ex_tuple t = { 4, 2, inner };
    ex_sender *s = ex_continues_on(
        ex_just(ex_int(-9), ex_uint(3), ex_double(2.5), ex_ptr(&x), ex_str(hello), ex_bool(true), ex_tuple_value(&t)),
        ex_single_thread_context_scheduler(&c));
    const ex_sigs *sg = ex_sender_sigs(s);
    cr_assert_eq(sg->nvalues, 1);
    cr_assert_eq(sg->values[0].arity, 7);
    cr_assert_eq(sg->values[0].types[6], EX_T_TUPLE);
    ex_result r = ex_sync_wait(s);
    expect_value_arity(&r, 7);
    cr_assert_eq(r.values[0].as.i, -9);
    cr_assert_eq(r.values[1].as.u, 3u);
    cr_assert_float_eq(r.values[2].as.d, 2.5, 0);
    cr_assert_eq(r.values[3].as.p, &x);
    cr_assert_eq(r.values[4].as.s, hello);
    cr_assert_eq(r.values[5].type, EX_T_BOOL);
    cr_assert(r.values[5].as.b);
    cr_assert_eq(r.values[6].type, EX_T_TUPLE);
    const ex_tuple *rt = r.values[6].as.tuple;
    cr_assert_eq(rt->index, 4);
    cr_assert_eq(rt->n, 2);
    cr_assert_eq(rt->v[0].as.i, 7);
    cr_assert_eq(rt->v[1].as.s, hello);
    ex_result_destroy(&r);
    test_stc_destroy(&c);
    expect_no_leaks();
}

Test(exec_transfer, continues_on_value_completion_thread_with_several_values) {
    ex_single_thread_context c;
    test_stc_init(&c);
    mark m = { 0 };
    ex_sender *s = ex_then(ex_continues_on(ex_just(ex_int(1), ex_int(2), ex_int(3)), ex_single_thread_context_scheduler(&c)),
                           mark_count, &m, EX_SIG(EX_T_INT, EX_T_INT, EX_T_INT), EX_SIG(EX_T_INT));
    expect_sync_int(s, 3);
    cr_assert(on_thread(m.tid, &c));
    test_stc_destroy(&c);
    expect_no_leaks();
}

Test(exec_transfer, continues_on_carries_error_to_target) {
    ex_single_thread_context c;
    test_stc_init(&c);
    static int payload;
    ex_result r = ex_sync_wait(ex_continues_on(ex_just_error(ex_err_data(EX_EUSER + 7, "boom", &payload)),
                                               ex_single_thread_context_scheduler(&c)));
    expect_error(&r, EX_EUSER + 7);
    cr_assert_str_eq(r.error.msg, "boom");
    cr_assert_eq(r.error.data, &payload);

    mark m = { 0 };
    expect_sync_int(ex_upon_error(
        ex_continues_on(ex_just_error(ex_err(EX_EUSER + 8, "boom")), ex_single_thread_context_scheduler(&c)),
        mark_error, &m, EX_SIG(EX_T_INT)), EX_EUSER + 8);
    cr_assert(on_thread(m.tid, &c), "the error completion happens on the target's thread");
    test_stc_destroy(&c);
    expect_no_leaks();
}

Test(exec_transfer, continues_on_carries_stopped_to_target) {
    ex_single_thread_context c;
    test_stc_init(&c);
    ex_result r = ex_sync_wait(ex_continues_on(ex_just_stopped(), ex_single_thread_context_scheduler(&c)));
    expect_stopped(&r);
    mark m = { 0 };
    expect_sync_int(ex_upon_stopped(ex_continues_on(ex_just_stopped(), ex_single_thread_context_scheduler(&c)),
                                                mark_stopped, &m, EX_SIG(EX_T_INT)), -1);
    cr_assert(on_thread(m.tid, &c), "the stopped completion happens on the target's thread");
    test_stc_destroy(&c);
    expect_no_leaks();
}

Test(exec_transfer, continues_on_completion_scheduler_attrs_are_target) {
    stc_pair two;
    stc_pair_init(&two);
    ex_sender *s = ex_continues_on(ex_just(ex_int(1)), two.sb);
    ex_scheduler got;
    expect_completion_scheduler(s, &ex_key_completion_scheduler_value, two.sb);
    got = bad_sched;
    cr_assert(ex_get_completion_scheduler(s, &ex_key_completion_scheduler_stopped, &got));
    cr_assert(ex_scheduler_equal(got, two.sb));
    cr_assert_not(ex_get_completion_scheduler(s, &ex_key_completion_scheduler_error, &got),
                  "just has no error completion scheduler to forward");
    ex_sender_release(s);

    /* SCHED-ATTRS(sch) is joined before the child's attributes: sch wins. */
    s = ex_continues_on(ex_schedule(two.sa), two.sb);
    got = bad_sched;
    cr_assert(ex_get_completion_scheduler(s, &ex_key_completion_scheduler_value, &got));
    cr_assert(ex_scheduler_equal(got, two.sb));
    cr_assert_not(ex_scheduler_equal(got, two.sa));
    expect_sync_values(s, 0);
    stc_pair_destroy(&two);
    expect_no_leaks();
}

Test(exec_transfer, schedule_from_behaves_like_continues_on) {
    ex_single_thread_context c;
    ex_scheduler sch = test_stc_init(&c);
    mark child = { .add = 1 }, after = { .add = 1 };
    ex_sender *s = ex_schedule_from(sch, then_mark(ex_just(ex_int(40)), &child));
    expect_completion_scheduler(s, &ex_key_completion_scheduler_value, sch);
    expect_completion_scheduler(s, &ex_key_completion_scheduler_stopped, sch);
    expect_sync_int(then_mark(s, &after), 42);
    cr_assert(pthread_equal(child.tid, pthread_self()));
    cr_assert(on_thread(after.tid, &c));

    expect_sync_error(ex_schedule_from(sch, ex_just_error(ex_err(EX_EUSER, "e"))), EX_EUSER);
    ex_result r3 = ex_sync_wait(ex_schedule_from(sch, ex_just_stopped()));
    expect_stopped(&r3);
    ex_result r4 = ex_sync_wait(ex_schedule_from(sch, ex_just(ex_int(1), ex_str("two"))));
    expect_value_arity(&r4, 2);
    cr_assert_eq(r4.values[0].as.i, 1);
    cr_assert_str_eq(r4.values[1].as.s, "two");
    test_stc_destroy(&c);
    expect_no_leaks();
}

Test(exec_transfer, continues_on_run_loop_with_stop_requested_completes_stopped) {
    ex_run_loop loop;
    test_loop_init(&loop);
    rec rc;
    rec_init_stop_requested(&rc);
    mark child = { .add = 0 };
    ex_sender *s = ex_continues_on(then_mark(ex_just(ex_int(1)), &child), ex_run_loop_scheduler(&loop));
    ex_operation *op = run_start(s, &rc);
    cr_assert_eq(child.calls, 1, "the child runs where continues_on is started");
    cr_assert_eq(rec_total(&rc), 0, "the completion waits for the run loop");
    test_loop_drain(&loop);
    cr_assert_eq(rc.stops, 1, "schedule on a run_loop with stop requested completes stopped");
    cr_assert_eq(rec_total(&rc), 1);
    cr_assert_eq(rc.thread, test_thread_id());
    run_destroy_release(op, s);
    test_loop_destroy(&loop);
    expect_no_leaks();
}

Test(exec_transfer, continues_on_run_loop_without_stop_delivers_value) {
    ex_run_loop loop;
    test_loop_init(&loop);
    rec rc;
    rec_init(&rc);
    rec_with_stop(&rc); /* stop possible, never requested */
    ex_sender *s = ex_continues_on(ex_just(ex_int(6), ex_int(7)), ex_run_loop_scheduler(&loop));
    ex_operation *op = run_start(s, &rc);
    cr_assert_eq(rec_total(&rc), 0);
    cr_assert_eq(ex_run_loop_count(&loop), 1);
    cr_assert(ex_run_loop_run_one(&loop));
    rec_expect_values(&rc, 2);
    cr_assert_eq(rc.v[0].as.i, 6);
    cr_assert_eq(rc.v[1].as.i, 7);
    run_destroy_release(op, s);
    test_loop_destroy(&loop);
    expect_no_leaks();
}

Test(exec_transfer, transfer_children_see_the_receivers_stop_token) {
    /* Children get FWD-ENV(env): the forwarding get_stop_token passes. */
    ex_sender *ss[] = {
        ex_continues_on(ex_read_env(&ex_key_get_stop_token, EX_T_TOKEN), ex_inline_scheduler()),
        ex_schedule_from(ex_inline_scheduler(), ex_read_env(&ex_key_get_stop_token, EX_T_TOKEN)),
        ex_starts_on(ex_inline_scheduler(), ex_read_env(&ex_key_get_stop_token, EX_T_TOKEN)),
    };
    for (size_t i = 0; i < sizeof ss / sizeof ss[0]; i++) {
        rec rc;
        rec_init(&rc);
        rec_with_stop(&rc);
        ex_operation *op = run_start(ss[i], &rc);
        cr_assert_eq(rc.values, 1, "sender %zu", i);
        cr_assert_eq(rc.v[0].type, EX_T_TOKEN);
        cr_assert(ex_stop_token_equal(rc.v[0].as.token, ex_stop_source_token(&rc.stop)), "sender %zu", i);
        run_destroy(op);
        ex_sender_release(ss[i]);
    }
    expect_no_leaks();
}

/* ------------------------------------- error signature ([exec.schedule.from]) */

typedef ex_sender *(*hop_fn)(ex_sender *child, ex_scheduler sch);

static ex_sender *hop_schedule_from(ex_sender *child, ex_scheduler sch) { return ex_schedule_from(sch, child); }

static const struct {
    const char *name;
    hop_fn make;
} hops[] = { { "ex_continues_on", ex_continues_on }, { "ex_schedule_from", hop_schedule_from },
             { "ex_affine_on", ex_affine_on } };

/* set_value(int) and nothing else: no error, no stopped. */
static ex_sigs int_value_only(void) {
    ex_sigs only = ex_sigs_none();
    cr_assert(ex_sigs_add_value(&only, EX_SIG(EX_T_INT)));
    return only;
}

/* Copying flat values cannot fail and the inline scheduler's schedule
 * neither fails nor stops: the hop completes exactly as its child, so a
 * receiver that takes set_value(int) alone accepts it. */
Test(exec_transfer, hops_of_flat_values_on_a_scheduler_that_cannot_fail_declare_no_error) {
    ex_sigs only = int_value_only();
    for (size_t i = 0; i < sizeof hops / sizeof hops[0]; i++) {
        ex_sender *s = hops[i].make(ex_just(ex_int(1)), ex_inline_scheduler());
        rec rc;
        rec_init(&rc);
        rc.vt.accepts = &only;
        ex_operation *op;
        void *mem;
        ex_error e = connect_heap(s, &rc, &op, &mem);
        cr_assert_eq(e.code, 0, "%s: connect to a set_value(int) receiver: %d (%s)", hops[i].name, e.code,
                     e.msg ? e.msg : "");
        ex_start(op);
        rec_expect_values(&rc, 1);
        cr_assert_eq(rc.v[0].as.i, 1);
        ex_operation_destroy(op);
        free(mem);
        expect_sigs(s, EX_SIG(EX_T_INT), EX_SIGS_ERROR | EX_SIGS_STOPPED, 0);
        ex_sender_release(s);
    }
    expect_no_leaks();
}

/* Several flat value signatures (ints, strings, pointers: nothing deep). */
Test(exec_transfer, hops_of_several_flat_signatures_declare_no_error) {
    static int x;
    for (size_t i = 0; i < sizeof hops / sizeof hops[0]; i++) {
        ex_sender *s = hops[i].make(ex_just(ex_int(1), ex_str("two"), ex_ptr(&x), ex_double(4.0)), ex_inline_scheduler());
        cr_assert_eq(ex_sender_sigs(s)->flags & EX_SIGS_ERROR, 0, "%s", hops[i].name);
        ex_sender_release(s);
    }
    expect_no_leaks();
}

static void start_any_value(test_op *op) {
    ex_value v = ex_int(3);
    ex_set_value(op->r, &v, 1);
}

static ex_sender *lv_just_int(void *ctx, const ex_value *in, size_t n) {
    (void)ctx, (void)in, (void)n;
    return ex_just(ex_int(5));
}

/* Where keeping the values can fail, or the scheduling can, the error stays. */
Test(exec_transfer, hops_still_declare_an_error_when_something_can_fail) {
    ex_value elems[2] = { ex_int(1), ex_int(2) };
    ex_tuple t = { 0, 2, elems };
    ex_sigs any = ex_sigs_none();
    cr_assert(ex_sigs_add_value(&any, EX_SIG_ANY1));
    ex_single_thread_context c;
    ex_scheduler stc = test_stc_init(&c);
    for (size_t i = 0; i < sizeof hops / sizeof hops[0]; i++) {
        /* A tuple is copied deeply: an allocation. */
        ex_sender *s = hops[i].make(ex_just(ex_int(0), ex_tuple_value(&t)), ex_inline_scheduler());
        cr_assert_neq(ex_sender_sigs(s)->flags & EX_SIGS_ERROR, 0, "%s: tuple", hops[i].name);
        run_with_failing_allocation(s);
        /* A datum of any type may be a tuple. */
        s = hops[i].make(test_sender_new(start_any_value, NULL, &any), ex_inline_scheduler());
        cr_assert_neq(ex_sender_sigs(s)->flags & EX_SIGS_ERROR, 0, "%s: any", hops[i].name);
        expect_sync_int(s, 3);
        /* Values known only at run time. */
        s = hops[i].make(ex_let_value(ex_just(), lv_just_int, NULL, EX_SIG0), ex_inline_scheduler());
        cr_assert_neq(ex_sender_sigs(s)->flags & EX_SIGS_ERROR, 0, "%s: dynamic", hops[i].name);
        expect_sync_int(s, 5);
        /* The child's own error. */
        s = hops[i].make(ex_just_error(ex_err(EX_EUSER, "e")), ex_inline_scheduler());
        expect_no_value_sigs(s, EX_SIGS_ERROR);
        ex_sender_release(s);
        /* A scheduler whose schedule can fail (and stop): its flags. */
        s = hops[i].make(ex_just(ex_int(1)), stc);
        expect_sigs(s, EX_SIG(EX_T_INT), EX_SIGS_ERROR | EX_SIGS_STOPPED, EX_SIGS_ERROR | EX_SIGS_STOPPED);
        expect_sync_int(s, 1);
    }
    /* ex_on returns to a scheduler known only at connect. */
    ex_sender *s = ex_on(stc, ex_just(ex_int(1)));
    expect_sigs(s, EX_SIG(EX_T_INT), EX_SIGS_ERROR | EX_SIGS_STOPPED, EX_SIGS_ERROR | EX_SIGS_STOPPED);
    ex_sender_release(s);
    test_stc_destroy(&c);
    expect_no_leaks();
}
