/* SPDX-License-Identifier: MIT */
/* cexec/strand.h - a strand: a scheduler adaptor that serialises
 * everything scheduled through it (D4003's strand executor).
 *
 * Work given to a strand runs one item at a time, in the order it was
 * given, on agents of the underlying scheduler; an item runs only after the
 * previous one returned, and what one item wrote is visible to the next
 * (the strand's lock orders them).  The underlying scheduler may be any:
 * a pool, a run loop, a single-thread context, another strand.
 *
 * The strand's scheduler:
 *  - schedule completes with set_value on an agent of the underlying
 *    scheduler, inside the strand; with set_stopped when the receiver's
 *    stop token has stop requested when the item's turn comes.  When the
 *    underlying scheduler refuses work (a pool being destroyed), the queued
 *    items are dropped like a pool drops its queue: a schedule operation
 *    completes with set_stopped, a posted ex_work runs its cancel (or
 *    execute when cancel is NULL).
 *  - ex_post never runs the item inside the post call (unless the
 *    underlying scheduler itself runs work inline, like
 *    ex_inline_scheduler: then the strand is only a serialiser);
 *  - ex_dispatch runs the item inline only when the calling thread is
 *    already running an item of this strand, else it posts it.
 *  - forward progress: the underlying scheduler's, at most weakly parallel
 *    (one agent at a time); allocator: the underlying scheduler's.
 * Two strand schedulers are equal when they come from the same strand.
 *
 * Fairness: a strand runs at most 64 items per turn on an underlying agent,
 * then queues itself again behind the work waiting there (the scheduler's
 * yield, else post), so a busy strand does not starve other work.  Over a
 * scheduler that completes inline, turns follow each other in a loop: the
 * stack does not grow with the queue. */
#ifndef CEXEC_STRAND_H
#define CEXEC_STRAND_H

#include <cexec/types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ex_strand ex_strand;

/* Creates a strand over `under` (which must outlive the strand), with
 * memory from `alloc` (NULL: the process default).  Allocation happens
 * here only: running work through the strand allocates nothing.  Errors:
 * EX_EINVAL (invalid scheduler or out NULL; a scheduler whose schedule
 * operation is aligned beyond max_align_t), EX_ENOMEM, EX_EAGAIN (mutex). */
ex_error ex_strand_create(ex_scheduler under, const struct ex_allocator *alloc, ex_strand **out);

/* The strand's scheduler handle (valid while the strand lives); NULL s:
 * the invalid handle (vt NULL). */
ex_scheduler ex_strand_scheduler(ex_strand *s);

/* Items the strand took from its queue so far (posted or scheduled ones,
 * including schedule operations that completed stopped; not items that
 * ex_dispatch ran inline). */
uint64_t ex_strand_executed(const ex_strand *s);

/* Destroys an idle strand.  EX_EBUSY (nothing destroyed) while items are
 * queued or running — including the moment after the last item returned
 * and before its turn has ended, so a caller that saw its last item finish
 * may have to retry — or an owning handle (ex_scheduler_retain, e.g. a task
 * running on the strand) holds it.  NULL-safe. */
ex_error ex_strand_destroy(ex_strand *s);

#ifdef __cplusplus
}
#endif
#endif
