/* SPDX-License-Identifier: MIT */
/* exi_inbox.h - the queue for submissions from threads outside the pool.
 *
 * An intrusive multi-producer queue after Vyukov's non-blocking MPSC node
 * queue: a producer does one atomic exchange on the tail and one store, so
 * its cost does not depend on how many threads submit.  Consumers (any
 * worker) serialise through a try-lock on the consumer side.  Internal. */
#ifndef EXI_INBOX_H
#define EXI_INBOX_H

#include <cexec/types.h>

#include "base/exi_atomic.h"

typedef struct exi_inbox {
    _Alignas(64) void *tail;  /* ex_work *: last pushed node (producers) */
    uint32_t gate;            /* producers inside push; shutdown waits for 0 */
    _Alignas(64) void *head;  /* ex_work *: next node to return; written under lock */
    uint32_t lock;
    ex_work stub;
} exi_inbox;

void exi_inbox_init(exi_inbox *q);

/* Any thread.  A full barrier (the exchange). */
void exi_inbox_push(exi_inbox *q, ex_work *w);

/* Any thread; NULL when empty, when another consumer holds the queue, or
 * while a producer is half-way through a push (it wakes a worker after). */
ex_work *exi_inbox_pop(exi_inbox *q);

/* Items pushed and not yet popped (or a push in progress).  The tail alone
 * is not enough: when a consumer re-inserts the stub while a producer is
 * mid-push, the tail is the stub but unreturned nodes precede it, and then
 * the head is a real node. */
static inline bool exi_inbox_nonempty(exi_inbox *q) {
    return exi_load_acq_ptr(&q->tail) != (void *)&q->stub || exi_load_acq_ptr(&q->head) != (void *)&q->stub;
}

#endif
