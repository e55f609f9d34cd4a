/* cexec/single_thread_context.h - a run loop driven by its own thread
 * (P2300 §1.6.2). */
#ifndef CEXEC_SINGLE_THREAD_CONTEXT_H
#define CEXEC_SINGLE_THREAD_CONTEXT_H

#include <cexec/run_loop.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ex_single_thread_context {
    /* private */
    ex_run_loop loop;
    pthread_t thread;
} ex_single_thread_context;

/* Starts the thread.  EX_EAGAIN when it cannot be created. */
ex_error ex_single_thread_context_init(ex_single_thread_context *ctx);

/* Schedules onto the context's thread; allocation-free. */
ex_scheduler ex_single_thread_context_scheduler(ex_single_thread_context *ctx);

pthread_t ex_single_thread_context_thread_id(ex_single_thread_context *ctx);

/* Finishes the loop, runs what is queued, and joins the thread.  Must not be
 * called from the context's own thread (EX_EINVAL). */
ex_error ex_single_thread_context_destroy(ex_single_thread_context *ctx);

#ifdef __cplusplus
}
#endif
#endif
