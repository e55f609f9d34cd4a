/* SPDX-License-Identifier: MIT */
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
    uint32_t gate;   /* submissions under way; top bit: destroy has begun */
    uint32_t holders;  /* owning handles (ex_scheduler_retain): destroy waits for them */
    uint64_t fork_gen; /* the process's fork generation at init */
} ex_single_thread_context;

/* Starts the thread.  EX_EAGAIN when it cannot be created. */
ex_error ex_single_thread_context_init(ex_single_thread_context *ctx);

/* Schedules onto the context's thread; allocation-free.  schedule()
 * completes with set_value on the context's thread (set_stopped when the
 * receiver's stop token has stop requested by then), or with
 * set_error(EX_ESHUTDOWN) on the starting thread when started after destroy
 * began.  ex_post and ex_dispatch from another thread return EX_ESHUTDOWN
 * from then on; ex_dispatch on the context's own thread runs the item
 * inline.  Every accepted submission runs exactly once before destroy
 * returns.  NULL ctx: the invalid handle (vt NULL). */
ex_scheduler ex_single_thread_context_scheduler(ex_single_thread_context *ctx);

/* The context's own thread, which runs all its work. */
pthread_t ex_single_thread_context_thread_id(ex_single_thread_context *ctx);

/* Refuses new work (EX_ESHUTDOWN, see above), waits for submissions
 * already admitted to be queued, finishes the loop, runs what is queued
 * (work it submits is refused), joins the thread, then waits until no
 * owning handle holds the context (ex_scheduler_retain: a task holds every
 * scheduler it ran on until its completion has been delivered, even while
 * it is away on another resource; its hop back is refused meanwhile).
 * fork(): in a child process, a context created before the fork has no
 * thread; its work is refused with EX_ESHUTDOWN and destroy returns
 * EX_EINVAL, doing nothing.  Returns:
 *   EX_OK      everything accepted ran, the thread is joined and the
 *              context's resources are released;
 *   EX_EINVAL  called on the context's own thread, or destroy has already
 *              begun (another or an earlier call), or a context of the
 *              parent process after fork(): nothing is done.
 * Never EX_EBUSY: no accepted work is left behind.  Submissions that race
 * destroy are refused as long as ctx's storage is still there; the caller
 * frees it only once no thread submits any more. */
ex_error ex_single_thread_context_destroy(ex_single_thread_context *ctx);

#ifdef __cplusplus
}
#endif
#endif
