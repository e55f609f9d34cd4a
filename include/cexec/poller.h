/* SPDX-License-Identifier: MIT */
/* cexec/poller.h - something a pool's agents poll while it has work
 * pending: the requests of a network library, an MPI progress engine
 * (cexec/mpi.h), a completion queue that has no file descriptor.
 *
 * A poller is a function the pool calls on its agents, one agent at a
 * time, while the poller is active.  Between items, a worker that runs
 * items polls after an item when its last poll is a few microseconds
 * old.  Instead of idling, a worker that found no work polls on each of
 * its spin rounds, and a thread lent to the pool in ex_sync_wait polls
 * while it waits (pool.h, "the waiting caller works").  Before parking, a
 * worker polls once more, and if the poller is still active its wake-up
 * timer is armed (50 us, doubling while polls find nothing, up to 1 ms)
 * and the pool's timekeeper parks until then: a request that stays
 * pending on an idle pool costs about a thousand polls a second, not a
 * core.
 * An inactive poller costs nothing: workers read one counter between
 * items, and nobody polls.  The poll function says when the poller goes
 * inactive (EX_POLL_IDLE); ex_pool_poller_activate makes it active again.
 * An activation never gets lost: one made while a poll is running makes
 * that poll's EX_POLL_IDLE leave the poller active.
 *
 * Threads: the poll function runs on an agent of the pool (a worker, a
 * lent caller, or the worker that fires the wake-up timer), never on two
 * at once for one poller; what it completes runs there.  It may activate
 * its own poller and remove it (ex_pool_poller_remove from inside the poll
 * returns at once; the poll is the poller's last).
 *
 * A pool has room for EX_POOL_POLLERS_MAX pollers.  Adding and removing
 * allocate nothing. */
#ifndef CEXEC_POLLER_H
#define CEXEC_POLLER_H

#include <cexec/pool.h>
#include <cexec/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Pollers a pool holds at once. */
#define EX_POOL_POLLERS_MAX 8

/* What one poll found. */
typedef enum ex_poll_result {
    EX_POLL_IDLE = 0,      /* nothing is pending: poll no more until the next activate */
    EX_POLL_PENDING = 1,   /* work is pending and nothing moved: polls back off */
    EX_POLL_PROGRESS = 2,  /* something completed: poll again soon */
} ex_poll_result;

/* A poll: called with the ctx given to ex_pool_poller_add. */
typedef ex_poll_result (*ex_poll_fn)(void *ctx);

/* A poller added to a pool: a handle, valid until ex_pool_poller_remove. */
typedef struct ex_pool_poller ex_pool_poller;

/* Adds an inactive poller to p: fn(ctx) is called once it is activated.
 * Errors: EX_EINVAL (NULL p, fn or out), EX_EBUSY (p holds
 * EX_POOL_POLLERS_MAX pollers), EX_ESHUTDOWN (p is shutting down). */
ex_error ex_pool_poller_add(ex_pool *p, ex_poll_fn fn, void *ctx, ex_pool_poller **out);

/* Marks q active: the pool's agents poll it until a poll returns
 * EX_POLL_IDLE with no activation since that poll began.  Any thread; a
 * call on an active poller makes the next polls eager again (the backoff
 * starts over).  From a worker of the pool it wakes nobody at once (the
 * worker polls before it parks, and wakes a timekeeper if it goes on to
 * other work); from a thread in ex_sync_wait it lends that thread to the
 * pool like a submission would, and the thread polls while it waits;
 * from any other thread the wake-up timer is armed due now, so a parked
 * worker polls at once. */
void ex_pool_poller_activate(ex_pool_poller *q);

/* Removes q from its pool: once it returns, fn is not running and will not
 * be called again, and q is invalid.  Waits for a poll of q running on
 * another thread; from inside q's own poll it returns at once.  Must be
 * called before the pool is destroyed (destroy forgets pollers still
 * added).  Errors: EX_EINVAL (NULL q). */
ex_error ex_pool_poller_remove(ex_pool_poller *q);

/* The pool behind sch, if sch is a pool's scheduler (ex_pool_scheduler);
 * NULL for any other scheduler. */
ex_pool *ex_pool_of_scheduler(ex_scheduler sch);

#ifdef __cplusplus
}
#endif
#endif
