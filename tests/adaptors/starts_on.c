/* SPDX-License-Identifier: MIT */
/* [exec.starts.on]: starts_on (suite exec_transfer, declared in on.c). */
#include <pthread.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

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

/* ----------------------------------- starts_on inside work on its scheduler */

/* A fork's starts_on(pool, x) inside work already on that pool gives its
 * child the environment above, forwarded, instead of a node of its own
 * (exi_env_is_sched_env); the child must not be able to tell. */

static bool same_sched(ex_scheduler a, ex_scheduler b) { return a.vt == b.vt && a.self == b.self; }

Test(exec_transfer, starts_on_under_its_own_scheduler_reads_the_same_environment) {
    ex_pool *p = test_pool_new(2);
    ex_scheduler ps = ex_pool_scheduler(p);
    seen_env beside, inner;
    /* inner: starts_on(pool) under the when_all, on the pool (the shortcut);
     * beside: the when_all's other child, which reads the same node. */
    expect_sync_values(ex_starts_on(ps, ex_when_all(ex_starts_on(ps, env_recorder(&inner)), env_recorder(&beside))), 0);
    cr_expect(same_sched(inner.sch, ps), "get_scheduler is the pool");
    cr_expect(same_sched(beside.sch, ps));
    cr_expect_eq(inner.alloc, beside.alloc, "the allocator the when_all gives its children");
    cr_expect_eq(inner.domain, ex_scheduler_domain(ps), "get_domain is the pool's");
    cr_expect(inner.stop_possible, "the when_all's stop token reaches the child");
    test_pool_free(p);
    expect_no_leaks();
}

static const ex_domain other_domain = { "other", NULL, NULL, NULL, NULL };

Test(exec_transfer, starts_on_under_a_domain_named_by_key_names_its_schedulers) {
    ex_pool *p = test_pool_new(2);
    ex_scheduler ps = ex_pool_scheduler(p);
    seen_env inner;
    /* A get_domain written between the two starts_on: SCHED-ENV(pool)
     * answers get_domain with the pool's, not with the one above. */
    ex_sender *w = ex_when_all(ex_starts_on(ps, env_recorder(&inner)), ex_just());
    expect_sync_values(ex_starts_on(ps, ex_write_env(w, &ex_key_get_domain, ex_domain_value(&other_domain))), 0);
    cr_expect_eq(inner.domain, ex_scheduler_domain(ps), "SCHED-ENV's domain, not the one written above");
    cr_expect(same_sched(inner.sch, ps));
    test_pool_free(p);
    expect_no_leaks();
}

Test(exec_transfer, starts_on_under_another_pool_names_its_own) {
    ex_pool *p = test_pool_new(1), *q = test_pool_new(1);
    ex_scheduler ps = ex_pool_scheduler(p), qs = ex_pool_scheduler(q);
    seen_env inner;
    expect_sync_values(ex_starts_on(ps, ex_when_all(ex_starts_on(qs, env_recorder(&inner)), ex_just())), 0);
    cr_expect(same_sched(inner.sch, qs), "get_scheduler is the pool it moved to");
    test_pool_free(p);
    test_pool_free(q);
    expect_no_leaks();
}
