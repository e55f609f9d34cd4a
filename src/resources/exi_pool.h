/* SPDX-License-Identifier: MIT */
/* exi_pool.h - what the rest of the library needs from the pool. Internal. */
#ifndef EXI_POOL_H
#define EXI_POOL_H

#include <stdbool.h>

#include <cexec/types.h>

/* On a pool worker: takes the newest item of its own deque when
 * accept(item, ctx) says so, for the caller to run (counted as executed);
 * otherwise leaves the deque as it was and returns NULL.  NULL elsewhere.
 * Used by a task about to suspend to run its own children nested. */
ex_work *exi_pool_take_own_if(bool (*accept)(ex_work *w, void *ctx), void *ctx);

/* On a pool agent (a worker, or a lent caller running a pool item): takes
 * the newest item of its own deque if it lies in [lo, hi) (an operation
 * block whose queued children its owner will run nested: only the item's
 * address is looked at, before it is taken), for the caller to run
 * (counted as executed).  NULL, with nothing done, otherwise, and when
 * the caller runs on another stack than its thread's own (a task's) or
 * has used half of it: items run nested go as deep as the recursion
 * that makes them. */
ex_work *exi_pool_take_own_within(uintptr_t lo, uintptr_t hi);

/* Lazy splitting for a parent that starts children and then runs them
 * itself unless they were taken (when_all, compose/).  op: a schedule
 * operation, connected, not started.  When it is the pool's, the caller is
 * one of that pool's agents, and its own deque already holds at least
 * EXI_POOL_HOLD_BACKLOG items for thieves (and it has room on its stack,
 * as for exi_pool_take_own_within), the operation's item is held
 * back on the agent instead of queued: returned, for the caller to run
 * once it has started its other children (exi_pool_unhold).  Should the
 * agent wait for something meanwhile (ex_sync_wait helping on it), its
 * held items are queued first: a sibling may wait for a held child.  A
 * hold left when the pool item that made it returns (its stack switched
 * away: a task's) is queued then.  NULL, with nothing done, otherwise
 * (the caller starts op). */
#define EXI_POOL_HOLD_BACKLOG 2
ex_work *exi_pool_hold_started(ex_operation *op);

/* True when w, held by exi_pool_hold_started, still is: no longer held,
 * it is the caller's to run now (counted as executed).  False once a wait
 * queued it (a thief may have it; exi_pool_take_own_within may get it
 * back).  Holds are undone newest first, by the agent that made them. */
bool exi_pool_unhold(ex_work *w);

/* On a worker of the pool behind sch: queues w on its own deque, as
 * ex_post would, and returns true.  False, with nothing done, anywhere
 * else or once the pool is shutting down (ex_post then gives the error). */
bool exi_pool_post_here(ex_scheduler sch, ex_work *w);

/* ex_post(sch, w) for the item of an operation being started (a task's
 * hop onto its scheduler): when sch is a pool and the calling thread lends
 * itself for its wait, the item may take a lent slot without waking
 * anyone, as a schedule operation's does (it runs once start returns).
 * Other schedulers: ex_post. */
ex_error exi_pool_post_started(ex_scheduler sch, ex_work *w);

/* On a worker of the pool behind sch: about how many items its own deque
 * holds (thieves may be taking some).  0 anywhere else. */
uint64_t exi_pool_backlog_here(ex_scheduler sch);

/* ex_pool_shutdown that waits at most wait_ns for the workers to finish
 * the items they run: for the end of the process, where an item may never
 * return (the parallel scheduler's exit handler).  EX_ETIMEDOUT when a
 * worker has not come back by then: p refuses work from then on, the
 * workers that came back are joined, queued items are left as they are
 * (neither run nor cancelled) and the trace is not written; a later
 * ex_pool_shutdown or ex_pool_destroy completes the shutdown, waiting as
 * usual.  Other errors as ex_pool_shutdown's. */
ex_error exi_pool_shutdown_by(struct ex_pool *p, int64_t wait_ns);

/* Lending (docs/pool.md, "Lent callers").  A thread outside every pool
 * that is about to wait for an operation (ex_sync_wait) opens an offer
 * before it starts the operation.  While the offer is open, the thread's
 * first submission to a pool with a free lent slot takes that slot: the
 * thread becomes an agent of the pool, and the item goes to the slot's
 * `next` (before its deque) without waking anyone (its holder runs it
 * next; a thief may take it too).  The holder then
 * runs its slot's items (exi_lend_run_one) until it stops waiting, and
 * closes: the slot is given back, with any items still in it handed to a
 * worker (or cancelled, once the pool is shutting down).  A holder must not
 * block while its slot may hold items: nobody else is told about the first
 * one (only a schedule operation's item is queued that quietly).  Offers
 * nest: close restores what open saved. */
typedef struct exi_lend_state {
    bool open;
    struct exi_worker *slot;             /* the lent slot held, or NULL */
    const struct exi_lend_state *outer;  /* the offer this one is nested in (its saved copy), or NULL */
} exi_lend_state;

/* Opens an offer, saving the thread's current one in *outer (which must
 * stay in place until the matching close). */
void exi_lend_open(exi_lend_state *outer);
/* Runs one item of the held slot, or, the slot empty, one that a thief of
 * its items queued (docs/pool.md, "Taking its work back"), or polls; false
 * when there is nothing (or no slot). */
bool exi_lend_run_one(void);
/* Gives the held slot back (if any) and restores *outer. */
void exi_lend_close(const exi_lend_state *outer);

#endif
