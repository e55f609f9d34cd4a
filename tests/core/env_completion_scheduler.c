/* SPDX-License-Identifier: MIT */
/* [exec.queries]: get_completion_scheduler (suite exec_env, declared in env.c). */
#include "core/env_fixtures.h"

/* ------------------------------------------------ completion schedulers */

Test(exec_env, schedule_has_value_and_stopped_completion_scheduler) {
    ex_run_loop loop;
    ex_scheduler sch = test_loop_init(&loop);
    ex_sender *s = ex_schedule(sch);
    ex_scheduler got = ex_inline_scheduler();
    cr_assert(ex_get_completion_scheduler(s, &ex_key_completion_scheduler_value, &got));
    cr_assert(ex_scheduler_equal(got, sch));
    got = ex_inline_scheduler();
    cr_assert(ex_get_completion_scheduler(s, &ex_key_completion_scheduler_stopped, &got));
    cr_assert(ex_scheduler_equal(got, sch));
    cr_assert_not(ex_get_completion_scheduler(s, &ex_key_completion_scheduler_error, &got));
    ex_value v;
    cr_assert(ex_env_query(ex_sender_attrs(s), &ex_key_completion_scheduler_value, &v));
    cr_assert_eq(v.type, EX_T_SCHED);
    cr_assert_not(ex_env_query(ex_sender_attrs(s), &ex_key_get_scheduler, &v), "attrs are not an environment");
    ex_sender_release(s);
    test_loop_destroy(&loop);
    expect_no_leaks();
}

static ex_error void_to_int(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)in, (void)n;
    out[0] = ex_int(1);
    return ex_ok();
}

Test(exec_env, then_forwards_childs_completion_scheduler) {
    ex_run_loop loop;
    ex_scheduler sch = test_loop_init(&loop);
    ex_sender *s = ex_then(ex_schedule(sch), void_to_int, NULL, EX_SIG0, EX_SIG(EX_T_INT));
    ex_scheduler got = ex_inline_scheduler();
    cr_assert(ex_get_completion_scheduler(s, &ex_key_completion_scheduler_value, &got));
    cr_assert(ex_scheduler_equal(got, sch));
    ex_sender *w = ex_write_env(s, &fwd_key, ex_int(0));
    got = ex_inline_scheduler();
    cr_assert(ex_get_completion_scheduler(w, &ex_key_completion_scheduler_value, &got), "write_env forwards too");
    cr_assert(ex_scheduler_equal(got, sch));
    ex_sender_release(w);
    test_loop_destroy(&loop);
    expect_no_leaks();
}

Test(exec_env, just_has_no_completion_scheduler) {
    ex_sender *ss[] = { ex_just(ex_int(1)), ex_just_error(ex_err(EX_EUSER, "e")), ex_just_stopped(),
                        ex_read_env(&fwd_key, EX_T_ANY) };
    for (size_t i = 0; i < sizeof ss / sizeof ss[0]; i++) {
        ex_scheduler got;
        cr_assert_not(ex_get_completion_scheduler(ss[i], &ex_key_completion_scheduler_value, &got), "sender %zu", i);
        cr_assert_not(ex_get_completion_scheduler(ss[i], &ex_key_completion_scheduler_error, &got), "sender %zu", i);
        cr_assert_not(ex_get_completion_scheduler(ss[i], &ex_key_completion_scheduler_stopped, &got), "sender %zu", i);
        cr_assert_null(ex_sender_attrs(ss[i]).node);
        ex_sender_release(ss[i]);
    }
    expect_no_leaks();
}

static ex_sender *let_read_sched(void *ctx, const ex_value *in, size_t n) {
    (void)ctx, (void)in, (void)n;
    return ex_read_env(&ex_key_get_scheduler, EX_T_SCHED);
}

Test(exec_env, let_value_function_sender_env_has_childs_completion_scheduler) {
    ex_single_thread_context c;
    ex_scheduler sch = test_stc_init(&c);
    expect_sync_sched(ex_let_value(ex_schedule(sch), let_read_sched, NULL, EX_SIG0), sch);
    test_stc_destroy(&c);
    expect_no_leaks();
}

Test(exec_env, write_env_stop_token_reaches_scheduler_through_continues_on) {
    ex_single_thread_context c;
    test_stc_init(&c);
    ex_stop_source src;
    ex_stop_source_init(&src);
    ex_stop_source_request_stop(&src);
    ex_result r = ex_sync_wait(ex_write_env(ex_continues_on(ex_just(ex_int(1)), ex_single_thread_context_scheduler(&c)),
                                            &ex_key_get_stop_token, ex_token_value(ex_stop_source_token(&src))));
    cr_assert_eq(r.disposition, EX_DISP_STOPPED, "disposition %d", r.disposition);
    test_stc_destroy(&c);
    expect_no_leaks();
}
