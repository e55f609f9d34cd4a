/* SPDX-License-Identifier: MIT */
/* The parallel scheduler at the end of a process (parallel_scheduler.h,
 * "At exit"): tests/exit/parallel_exit, built beside the test binary, runs
 * in a child process; the pool's trace file (CEXEC_TRACE), which only its
 * shutdown writes, tells whether the exit handler shut the pool down.  In
 * sanitizer builds the child checks for leaks at its exit
 * (leak_check_at_exit=1: LeakSanitizer fails its status). */
#include <errno.h>
#include <limits.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/helpers.h"

TestSuite(parallel_scheduler_exit, .timeout = 60);

/* build/exit/parallel_exit, beside this binary's build/tests/. */
static void exit_program(char *path, size_t size) {
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    cr_assert_gt(n, 0);
    self[n] = '\0';
    snprintf(path, size, "%s/../exit/parallel_exit", dirname(self));
    cr_assert_eq(access(path, X_OK), 0, "%s is missing: build it with make (it comes with the test binary)", path);
}

typedef struct outcome {
    int status;      /* waitpid's */
    bool traced;     /* the pool's trace was written: its shutdown ran */
} outcome;

/* Runs the program in `mode`, with a trace path of its own; fails the test
 * if it has not ended within TEST_WAIT_LIMIT_S (exit hung). */
static outcome run_mode(const char *mode) {
    char prog[PATH_MAX + 32];
    exit_program(prog, sizeof prog);
    char trace[] = "/tmp/cexec-parallel-exit-XXXXXX";
    int fd = mkstemp(trace);
    cr_assert_geq(fd, 0);
    close(fd);
    unlink(trace);  /* only the pool's shutdown makes it */
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        setenv("CEXEC_TRACE", trace, 1);
        setenv("ASAN_OPTIONS", "detect_leaks=1:leak_check_at_exit=1:exitcode=23", 1);
        execl(prog, "parallel_exit", mode, (char *)NULL);
        _exit(127);
    }
    outcome o = { 0, false };
    double until = test_now_s() + TEST_WAIT_LIMIT_S;
    pid_t got;
    while ((got = waitpid(pid, &o.status, WNOHANG)) == 0 && test_now_s() < until) test_sleep_ms(5);
    if (got == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &o.status, 0);
        unlink(trace);
        cr_assert_fail("parallel_exit %s did not end within %d s: exit hung", mode, (int)TEST_WAIT_LIMIT_S);
    }
    struct stat st;
    o.traced = stat(trace, &st) == 0 && st.st_size > 0;
    unlink(trace);
    return o;
}

static void expect_clean_exit(const char *mode, outcome o) {
    cr_assert(WIFEXITED(o.status), "parallel_exit %s was killed by signal %d", mode,
              WIFSIGNALED(o.status) ? WTERMSIG(o.status) : 0);
    cr_assert_eq(WEXITSTATUS(o.status), 0, "parallel_exit %s exited with %d (23: leaks at exit)", mode,
                 WEXITSTATUS(o.status));
}

Test(parallel_scheduler_exit, an_idle_pool_is_shut_down_at_exit) {
    outcome o = run_mode("idle");
    expect_clean_exit("idle", o);
    cr_assert(o.traced, "the exit handler shut the pool down (its trace is written then)");
}

Test(parallel_scheduler_exit, a_worker_that_never_returns_does_not_hold_up_exit) {
    outcome o = run_mode("busy");
    expect_clean_exit("busy", o);
    cr_assert(!o.traced, "a worker was inside an item: the shutdown gave up and wrote nothing");
}

Test(parallel_scheduler_exit, exit_called_by_an_item_of_the_pool_ends_the_process) {
    outcome o = run_mode("exit_in_item");
    expect_clean_exit("exit_in_item", o);
    cr_assert(!o.traced, "on its own worker the handler leaves the pool alone");
}

Test(parallel_scheduler_exit, an_explicit_shutdown_comes_first) {
    outcome o = run_mode("shutdown");
    expect_clean_exit("shutdown", o);
    cr_assert(o.traced);
}

Test(parallel_scheduler_exit, a_fork_child_is_refused_and_leaves_the_parents_pool_alone) {
    outcome o = run_mode("fork");
    expect_clean_exit("fork", o);
    cr_assert(o.traced, "the parent's own exit still shut its pool down");
}
