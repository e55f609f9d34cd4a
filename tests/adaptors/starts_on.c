/* SPDX-License-Identifier: MIT */
/* [exec.starts.on]: starts_on (suite exec_transfer, declared in on.c). */
#include <pthread.h>
#include <stdlib.h>

#include "adaptors/transfer_fixtures.h"

/* ------------------------------------------------------------- starts_on */

Test(exec_transfer, starts_on_runs_child_on_scheduler_thread) {
    ex_single_thread_context c;
    test_stc_init(&c);
    mark m = { .add = 1 };
    expect_sync_int(ex_starts_on(ex_single_thread_context_scheduler(&c), then_mark(ex_just(ex_int(41)), &m)), 42);
    cr_assert_eq(m.calls, 1);
    cr_assert(on_thread(m.tid, &c), "the child must run on the context's thread");
    cr_assert_not(pthread_equal(m.tid, pthread_self()));
    test_stc_destroy(&c);
    expect_no_leaks();
}

Test(exec_transfer, starts_on_child_env_get_scheduler_is_sch) {
    expect_child_env_scheduler_is_sch(ex_starts_on);
    expect_no_leaks();
}

Test(exec_transfer, starts_on_child_env_forwards_the_receiver_env) {
    /* JOIN-ENV(SCHED-ENV(sch), FWD-ENV(env)): forwarding keys from above pass. */
    static const ex_key fwd = { "test.transfer.fwd", true };
    expect_sync_int(
        ex_write_env(ex_starts_on(ex_inline_scheduler(), ex_read_env(&fwd, EX_T_INT)), &fwd, ex_int(5)), 5);
    expect_no_leaks();
}

Test(exec_transfer, starts_on_has_no_completion_scheduler_of_its_own) {
    ex_single_thread_context c;
    test_stc_init(&c);
    ex_sender *s = ex_starts_on(ex_single_thread_context_scheduler(&c), ex_just(ex_int(1)));
    cr_assert_eq(ex_sender_status(s).code, 0);
    ex_scheduler got;
    cr_assert_not(ex_get_completion_scheduler(s, &ex_key_completion_scheduler_value, &got));
    cr_assert_not(ex_get_completion_scheduler(s, &ex_key_completion_scheduler_error, &got));
    cr_assert_not(ex_get_completion_scheduler(s, &ex_key_completion_scheduler_stopped, &got));
    ex_sender_release(s);
    test_stc_destroy(&c);
    expect_no_leaks();
}

/* [exec.snd.general]: default-impls::get-attrs of a single-child sender is
 * FWD-ENV(get_env(child)); starts_on does not specialise get-attrs, so it
 * forwards the child's (forwarding) completion-scheduler queries. */
Test(exec_transfer, starts_on_attrs_forward_the_childs_attrs) {
    stc_pair two;
    stc_pair_init(&two);
    ex_sender *s = ex_starts_on(two.sa, ex_schedule(two.sb));
    expect_completion_scheduler(s, &ex_key_completion_scheduler_value, two.sb);
    expect_sync_values(s, 0);
    stc_pair_destroy(&two);
    expect_no_leaks();
}

Test(exec_transfer, starts_on_passes_error_and_stopped_through) {
    ex_single_thread_context c;
    ex_scheduler sch = test_stc_init(&c);
    ex_result r = ex_sync_wait(ex_starts_on(sch, ex_just_error(ex_err(EX_EUSER + 2, "child failed"))));
    expect_error(&r, EX_EUSER + 2);
    cr_assert_str_eq(r.error.msg, "child failed");
    ex_result r2 = ex_sync_wait(ex_starts_on(sch, ex_just_stopped()));
    expect_stopped(&r2);
    test_stc_destroy(&c);
    expect_no_leaks();
}

Test(exec_transfer, starts_on_stop_requested_completes_stopped_without_running_child) {
    ex_run_loop loop;
    test_loop_init(&loop);
    rec rc;
    rec_init_stop_requested(&rc);
    mark m = { .add = 0 };
    ex_sender *s = ex_starts_on(ex_run_loop_scheduler(&loop), then_mark(ex_just(ex_int(1)), &m));
    ex_operation *op = run_start(s, &rc);
    cr_assert_eq(rec_total(&rc), 0, "starts_on completes only after the schedule operation ran");
    cr_assert_eq(ex_run_loop_count(&loop), 1);
    test_loop_drain(&loop);
    rec_expect_stopped(&rc);
    cr_assert_eq(m.calls, 0, "the child must not start when scheduling completed stopped");
    run_destroy_release(op, s);
    test_loop_destroy(&loop);
    expect_no_leaks();
}
