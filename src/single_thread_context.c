/* single_thread_context.c - P2300 §1.6.2: a run_loop and the thread that
 * runs it. */
#include "exi_core.h"

static void *context_main(void *arg) {
    ex_single_thread_context *ctx = arg;
    (void)ex_run_loop_run(&ctx->loop);
    return NULL;
}

ex_error ex_single_thread_context_init(ex_single_thread_context *ctx) {
    ex_error e = ex_run_loop_init(&ctx->loop);
    if (e.code) return e;
    if (pthread_create(&ctx->thread, NULL, context_main, ctx)) {
        (void)ex_run_loop_destroy(&ctx->loop);
        return ex_err(EX_EAGAIN, "ex_single_thread_context_init: pthread_create failed");
    }
    return ex_ok();
}

ex_scheduler ex_single_thread_context_scheduler(ex_single_thread_context *ctx) {
    return ex_run_loop_scheduler(&ctx->loop);
}

pthread_t ex_single_thread_context_thread_id(ex_single_thread_context *ctx) { return ctx->thread; }

ex_error ex_single_thread_context_destroy(ex_single_thread_context *ctx) {
    if (pthread_equal(pthread_self(), ctx->thread))
        return ex_err(EX_EINVAL, "ex_single_thread_context_destroy: called on the context's own thread");
    ex_run_loop_finish(&ctx->loop);
    pthread_join(ctx->thread, NULL);
    return ex_run_loop_destroy(&ctx->loop);
}
