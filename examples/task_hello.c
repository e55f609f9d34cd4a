/* SPDX-License-Identifier: MIT */
/* task_hello.c - P3552's hello world in C: a task is a C function on its
 * own stack; sync_wait runs it (on sync_wait's run loop, the task's
 * scheduler) and returns its value. */
#include <stdio.h>

#include <cexec/cexec.h>

static ex_task_result hello(ex_task *t, void *arg) {
    (void)arg;
    printf("Hello, world!\n");
    // An await that completes inline: no stack switch.
    ex_await_result r = ex_await(t, ex_just(ex_int(41)));
    if (r.status != EX_AWAIT_VALUE) return ex_task_void();
    return ex_task_i64(r.v[0].as.i + 1);
}

int main(void) {
    ex_result r = ex_sync_wait(ex_task_create(hello, NULL, NULL));
    int status = 0;
    if (r.disposition == EX_DISP_VALUE && r.n == 1 && r.values[0].as.i == 42) {
        printf("task_hello: the task returned %lld\n", (long long)r.values[0].as.i);
    } else {
        fprintf(stderr, "task_hello: failed: %s\n", r.disposition == EX_DISP_ERROR ? r.error.msg : "stopped");
        status = 1;
    }
    ex_result_destroy(&r);
    return status;
}
