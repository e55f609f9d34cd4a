/* SPDX-License-Identifier: MIT */
/* [exec.let]: the scheduler and the rest of the inner environment (suite exec_let, declared in let.c). */
#include "adaptors/callbacks.h"

/* ------------------------------------------------------ scheduler in the env */

/* let over schedule(loop), with a function reading get_scheduler: starts
 * it into rc (then requests stop on rc's source when asked), runs the
 * loop, and checks fn ran only then and read the loop's scheduler. */
static void expect_loop_scheduler_inside(ex_sender *(*let)(ex_sender *child, seen *sn), rec *rc, bool stop) {
    ex_run_loop loop;
    ex_scheduler sch = test_loop_init(&loop);
    seen sn = { 0 };
    ex_sender *s = let(ex_schedule(sch), &sn);
    ex_operation *op = run_start(s, rc);
    if (stop) ex_stop_source_request_stop(&rc->stop); /* the schedule completes stopped */
    cr_assert_eq(sn.calls, 0);
    test_loop_drain(&loop);
    cr_assert_eq(sn.calls, 1);
    rec_expect_sched(rc, sch);
    run_destroy_release(op, s);
    test_loop_destroy(&loop);
}

static ex_sender *let_value_reading(ex_sender *child, seen *sn) { return ex_let_value(child, lv_read_sched, sn, EX_SIG0); }
static ex_sender *let_stopped_reading(ex_sender *child, seen *sn) { return ex_let_stopped(child, ls_read_sched, sn); }

Test(exec_let, inner_env_get_scheduler_is_the_childs_value_completion_scheduler) {
    rec rc;
    rec_init(&rc);
    /* The receiver's own scheduler is a different one: the let-env wins. */
    rec_with_scheduler(&rc, ex_inline_scheduler());
    expect_loop_scheduler_inside(let_value_reading, &rc, false);
    expect_no_leaks();
}

Test(exec_let, inner_env_get_scheduler_with_a_receiver_without_scheduler) {
    rec rc;
    rec_init(&rc); /* empty env: without let-env read_env would fail */
    expect_loop_scheduler_inside(let_value_reading, &rc, false);
    expect_no_leaks();
}

Test(exec_let, inner_env_get_scheduler_in_sync_wait_is_the_childs_scheduler) {
    ex_single_thread_context stc;
    ex_scheduler sch = test_stc_init(&stc);
    seen sn = { 0 };
    expect_sync_sched(ex_let_value(ex_schedule(sch), lv_read_sched, &sn, EX_SIG0), sch);
    cr_assert_eq(sn.calls, 1);
    test_stc_destroy(&stc);
    expect_no_leaks();
}

Test(exec_let, let_stopped_inner_env_get_scheduler_is_the_stopped_completion_scheduler) {
    rec rc;
    rec_init(&rc);
    rec_with_stop(&rc);
    expect_loop_scheduler_inside(let_stopped_reading, &rc, true);
    expect_no_leaks();
}

Test(exec_let, inner_env_forwards_the_receivers_env_without_completion_scheduler) {
    seen sn = { 0 };
    rec rc;
    rec_init(&rc);
    rec_with_stop(&rc);
    rec_with_scheduler(&rc, ex_inline_scheduler());
    /* just has no completion scheduler: FWD-ENV(env) answers. */
    run_in_place(ex_let_value(ex_just(), lv_read_sched, &sn, EX_SIG0), &rc);
    rec_expect_sched(&rc, ex_inline_scheduler());
    rec_init(&rc);
    rec_with_stop(&rc);
    rec_with_scheduler(&rc, ex_inline_scheduler());
    run_in_place(ex_let_error(ex_just_error(ex_err(EX_EUSER, "e")), le_read_sched, &sn), &rc);
    rec_expect_sched(&rc, ex_inline_scheduler());
    rec_init(&rc);
    rec_with_stop(&rc);
    run_in_place(ex_let_value(ex_just(), lv_read_token, &sn, EX_SIG0), &rc);
    cr_assert_eq(rc.values, 1);
    cr_assert_eq(rc.v[0].type, EX_T_TOKEN);
    cr_assert(ex_stop_token_equal(rc.v[0].as.token, ex_stop_source_token(&rc.stop)), "the stop token is forwarded");
    cr_assert_eq(sn.calls, 3);
    expect_no_leaks();
}
