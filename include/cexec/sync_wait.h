/* SPDX-License-Identifier: MIT */
/* cexec/sync_wait.h - sync_wait and sync_wait_with_variant ([exec.sync.wait]).
 *
 * Blocks the calling thread, running a run_loop on it, until the sender
 * completes.  The receiver's environment answers get_scheduler and
 * get_delegation_scheduler with that run_loop's scheduler; its stop token is
 * the never-stop token.  The loop has a clock (cexec/timer.h): timers on
 * its scheduler fire on the waiting thread, which sleeps until the
 * earliest deadline; when the wait ends, those already due fire and the
 * others complete set_stopped there.  Called on a worker of an ex_pool, it does not block
 * the worker: it runs the loop's items and the pool's queued work until the
 * sender completes (a pool task that sync_waits on work for its own pool
 * finishes instead of deadlocking).
 *
 * Called on any other thread, it lends that thread to the pool its
 * operation submits to first (if that pool has a free lent slot,
 * ex_pool_config.lend_slots): the item goes to the slot with no wake-up and
 * the calling thread runs it, and the items its work queues there, as an
 * agent of the pool, until the sender completes or it is about to sleep.
 * Items still in the slot then go to a worker.  So a request on an idle
 * pool pays no wake-up (docs/pool.md, "Lent callers"). */
#ifndef CEXEC_SYNC_WAIT_H
#define CEXEC_SYNC_WAIT_H

#include <cexec/types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ex_disposition {
    EX_DISP_VALUE = 1,
    EX_DISP_ERROR,
    EX_DISP_STOPPED
} ex_disposition;

/* The async result.  values[0..n) are deep copies owned by the result;
 * the entries after them are unspecified (not cleared).  The result owns
 * its error's reference too (an error that owns a message or payload,
 * cexec/error.h): ex_result_destroy releases it; to keep the error
 * longer, ex_error_retain it first. */
typedef struct ex_result {
    ex_disposition disposition;
    size_t n;                       /* number of values (EX_DISP_VALUE) */
    ex_value values[EX_MAX_ARITY];
    ex_error error;                 /* EX_DISP_ERROR */
    /* private: storage for tuple contents */
    void *nested;
    size_t nested_size;
    const struct ex_allocator *nested_alloc;
} ex_result;

/* Runs s (taking ownership) to completion.  The sender must have at most
 * one value signature (use ex_sync_wait_with_variant otherwise): a sender
 * with more, a NULL sender or a failed connect gives an EX_DISP_ERROR result
 * with EX_EINVAL.  Failing to copy tuple values gives EX_ENOMEM.  Called on
 * a single_thread_context's own thread (inside its work), which alone runs
 * that context's work and would wait for ever, it starts nothing and gives
 * EX_EDEADLK.  (On a pool worker it runs pool work while it waits.) */
ex_result ex_sync_wait(ex_sender *s);

/* ex_sync_wait(ex_into_variant(s)): accepts several value signatures; a
 * value result is one EX_T_TUPLE datum. */
ex_result ex_sync_wait_with_variant(ex_sender *s);

/* Frees what a result holds (tuple storage, the error's reference).  Safe
 * on every result, and more than once. */
void ex_result_destroy(ex_result *r);

#ifdef __cplusplus
}
#endif
#endif
