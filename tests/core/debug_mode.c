/* SPDX-License-Identifier: MIT */
/* Debug mode (cexec/debug.h): each ownership mistake aborts with a message
 * naming the builder and the call (death tests, and one that reads the
 * message); correct use in debug mode runs as usual and, once debug mode
 * is off again, leaves nothing allocated; CEXEC_DEBUG=1 turns it on. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/helpers.h"

TEST_SUITE(cexec_debug, 30);

static ex_error plus_one(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)n;
    out[0] = ex_int(in[0].as.i + 1);
    return ex_ok();
}

static ex_sender *then_plus_one(ex_sender *s) { return ex_then(s, plus_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)); }

Test(cexec_debug, a_sender_released_twice_aborts, .signal = SIGABRT) {
    ex_debug_set(true);
    ex_sender *s = ex_just(ex_int(1));
    ex_sender_release(s);
    ex_sender_release(s);
}

Test(cexec_debug, a_sender_used_after_a_builder_took_it_aborts, .signal = SIGABRT) {
    ex_debug_set(true);
    ex_sender *s = ex_just(ex_int(1));
    ex_result r = ex_sync_wait(then_plus_one(s));  /* took s, and released it */
    ex_result_destroy(&r);
    ex_sender *again = then_plus_one(s);  /* s is gone */
    (void)again;
}

Test(cexec_debug, a_sender_given_to_two_builders_without_retain_aborts, .signal = SIGABRT) {
    ex_debug_set(true);
    ex_sender *s = ex_just(ex_int(1));
    ex_sender *a = then_plus_one(s);
    ex_sender *b = then_plus_one(s);  /* needs ex_sender_retain(s) */
    ex_sender_release(a);
    ex_sender_release(b);  /* the second release of s */
}

Test(cexec_debug, a_released_sender_given_to_sync_wait_aborts, .signal = SIGABRT) {
    ex_debug_set(true);
    ex_sender *s = ex_just();
    ex_sender_release(s);
    (void)ex_sync_wait(s);
}

static ex_task_result returns_one(ex_task *t, void *arg) {
    (void)t, (void)arg;
    return ex_task_i64(1);
}

/* Awaits ex_await_all of the released task arg and a fresh one. */
static ex_task_result awaits_released(ex_task *t, void *arg) {
    ex_await_result r = ex_await_all(t, (ex_sender *)arg, ex_task_create(returns_one, NULL, NULL));
    return r.status == EX_AWAIT_VALUE ? ex_task_i64(2) : ex_task_void();
}

Test(cexec_debug, a_released_task_given_to_ex_await_all_aborts, .signal = SIGABRT) {
    ex_debug_set(true);
    ex_sender *gone = ex_task_create(returns_one, NULL, NULL);
    ex_sender_release(gone);
    ex_result r = ex_sync_wait(ex_task_create(awaits_released, gone, NULL));
    ex_result_destroy(&r);
}

/* s connected to rr (initialised here) with ex_connect_alloc. */
static ex_operation *connected(ex_sender *s, rec *rr) {
    rec_init(rr);
    ex_operation *op = NULL;
    cr_assert_eq(ex_connect_alloc(s, rec_receiver(rr), &op).code, 0);
    return op;
}

Test(cexec_debug, an_operation_started_twice_aborts, .signal = SIGABRT) {
    ex_debug_set(true);
    rec rr;
    ex_operation *op = connected(ex_just(ex_int(1)), &rr);
    ex_start(op);
    ex_start(op);
}

Test(cexec_debug, destroying_a_running_operation_aborts, .signal = SIGABRT) {
    ex_debug_set(true);
    ex_run_loop loop;
    cr_assert_eq(ex_run_loop_init(&loop).code, 0);
    rec rr;
    ex_operation *op = connected(ex_schedule(ex_run_loop_scheduler(&loop)), &rr);
    ex_start(op);          /* queued on the loop: running, not completed */
    ex_operation_free(op);
}

/* The message names the call and the builder: read from a child. */
Test(cexec_debug, the_message_names_the_call_and_the_builder) {
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        dup2(fds[1], 2);
        ex_debug_set(true);
        ex_sender *s = ex_just(ex_int(1));
        ex_sender *a = then_plus_one(s);
        ex_sender_release(a);
        ex_sender *b = ex_then(s, plus_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
        (void)b;
        _exit(0);
    }
    close(fds[1]);
    char buf[1024] = { 0 };
    size_t got = 0;
    ssize_t k;
    while (got < sizeof buf - 1 && (k = read(fds[0], buf + got, sizeof buf - 1 - got)) > 0) got += (size_t)k;
    close(fds[0]);
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "the child was not aborted");
    cr_assert(strstr(buf, "cexec debug: ex_then:"), "no call named: %s", buf);
    cr_assert(strstr(buf, "built by ex_just"), "no builder named: %s", buf);
}

/* Correct use in debug mode: everything runs and completes as usual, and
 * turning it off frees what it kept. */
Test(cexec_debug, correct_use_runs_and_nothing_is_left_afterwards) {
    cr_assert_not(ex_debug_set(true));
    cr_assert(ex_debug_enabled());
    ex_pool *pool;
    cr_assert_eq(ex_pool_create(NULL, &pool).code, 0);
    ex_sender *s = ex_just(ex_int(41));
    ex_sender *twice = ex_when_all(ex_starts_on(ex_pool_scheduler(pool), then_plus_one(ex_sender_retain(s))),
                                   then_plus_one(s));
    ex_result r = ex_sync_wait(twice);
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_eq(r.values[0].as.i + r.values[1].as.i, 84);
    ex_result_destroy(&r);
    rec rr;
    ex_sender *j = ex_just(ex_int(7));
    ex_operation *op = connected(j, &rr);
    ex_start(op);
    rec_expect_value_int(&rr, 7);
    ex_operation_free(op);  /* completed: fine */
    ex_sender_release(j);
    cr_assert_eq(ex_pool_destroy(pool).code, 0);
    cr_assert(ex_debug_set(false));
    expect_no_leaks();
}

/* CEXEC_DEBUG=1 at start-up: this test binary run again with it, on a
 * test that checks ex_debug_enabled. */
Test(cexec_debug, the_environment_variable_turns_it_on) {
    if (getenv("CEXEC_DEBUG_CHILD")) {
        cr_assert(ex_debug_enabled(), "CEXEC_DEBUG=1 did not turn debug mode on");
        return;
    }
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        setenv("CEXEC_DEBUG", "1", 1);
        setenv("CEXEC_DEBUG_CHILD", "1", 1);
        unsetenv("BXFI_MAP");  /* a fresh runner, not this test's worker */
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) dup2(devnull, 1), dup2(devnull, 2);
        execl("/proc/self/exe", "cexec_tests", "--filter", "cexec_debug/the_environment_variable_turns_it_on", (char *)NULL);
        _exit(127);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the run with CEXEC_DEBUG=1 failed (status %d)", status);
    cr_assert_not(ex_debug_enabled(), "debug mode is on without CEXEC_DEBUG");
}
