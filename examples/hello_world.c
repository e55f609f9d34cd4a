/* SPDX-License-Identifier: MIT */
/* hello_world.c - P2300 §1.3.1 in C: schedule on an execution resource,
 * chain two thens, and wait for the result.  The resource here is a
 * single_thread_context, one thread of its own; examples/fib.c and
 * examples/requests.c use the work-stealing pool. */
#include <stdio.h>

#include <cexec/cexec.h>

static ex_error say_hi(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)in, (void)n;
    printf("Hello world! Have an int.\n");
    out[0] = ex_int(13);
    return ex_ok();
}

static ex_error add_42(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)n;
    out[0] = ex_int(in[0].as.i + 42);
    return ex_ok();
}

int main(void) {
    ex_single_thread_context ctx;
    ex_error e = ex_single_thread_context_init(&ctx);
    if (e.code) {
        fprintf(stderr, "hello_world: %s\n", e.msg);
        return 1;
    }
    ex_scheduler sch = ex_single_thread_context_scheduler(&ctx);          /* 1 */

    ex_sender *begin = ex_schedule(sch);                                   /* 2 */
    ex_sender *hi = ex_then(begin, say_hi, NULL, EX_SIG0, EX_SIG(EX_T_INT)); /* 3 */
    ex_sender *add = ex_then(hi, add_42, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)); /* 4 */

    ex_result r = ex_sync_wait(add);                                       /* 5 */
    int status = 0;
    if (r.disposition == EX_DISP_VALUE) {
        printf("hello_world: got %lld\n", (long long)r.values[0].as.i);
    } else {
        fprintf(stderr, "hello_world: failed: %s\n", r.disposition == EX_DISP_ERROR ? r.error.msg : "stopped");
        status = 1;
    }
    ex_result_destroy(&r);
    (void)ex_single_thread_context_destroy(&ctx);
    return status;
}
