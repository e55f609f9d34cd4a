/* SPDX-License-Identifier: MIT */
/* contexts.c - see contexts.h. */
#include "common/contexts.h"

static void expect_ok(ex_error e, const char *what) {
    cr_assert_eq(e.code, 0, "%s: %d (%s)", what, e.code, e.msg ? e.msg : "");
}

ex_scheduler test_loop_init(ex_run_loop *loop) {
    expect_ok(ex_run_loop_init(loop), "ex_run_loop_init");
    return ex_run_loop_scheduler(loop);
}

void test_loop_drain(ex_run_loop *loop) {
    ex_run_loop_finish(loop);
    expect_ok(ex_run_loop_run(loop), "ex_run_loop_run");
}

void test_loop_destroy(ex_run_loop *loop) { expect_ok(ex_run_loop_destroy(loop), "ex_run_loop_destroy"); }

ex_scheduler test_stc_init(ex_single_thread_context *c) {
    expect_ok(ex_single_thread_context_init(c), "ex_single_thread_context_init");
    return ex_single_thread_context_scheduler(c);
}

void test_stc_destroy(ex_single_thread_context *c) {
    expect_ok(ex_single_thread_context_destroy(c), "ex_single_thread_context_destroy");
}
