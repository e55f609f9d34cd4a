/* SPDX-License-Identifier: MIT */
/* inbox.c - Vyukov-style intrusive MPSC queue with a consumer try-lock. */
#include <cexec/cexec.h>

#include "base/exi_atomic.h"
#include "resources/exi_inbox.h"

static ex_work *next_of(ex_work *w) { return exi_load_acq_ptr((void *const *)&w->next); }

void exi_inbox_init(exi_inbox *q) {
    q->stub.next = NULL;
    q->stub.execute = NULL;
    q->stub.cancel = NULL;
    q->tail = &q->stub;
    q->head = &q->stub;
    q->lock = 0;
    q->gate = 0;
}

void exi_inbox_push(exi_inbox *q, ex_work *w) {
    exi_store_rlx_ptr((void **)&w->next, NULL);
    ex_work *prev = exi_fas_ptr(&q->tail, w);
    /* Between the exchange and this store the queue is briefly unlinked. */
    exi_store_rel_ptr((void **)&prev->next, w);
}

static void set_head(exi_inbox *q, ex_work *w) { exi_store_rel_ptr(&q->head, w); }

/* Caller holds the lock. */
static ex_work *pop_locked(exi_inbox *q) {
    ex_work *head = exi_load_rlx_ptr(&q->head);
    ex_work *next = next_of(head);
    if (head == &q->stub) {
        if (!next) return NULL;
        set_head(q, next);
        head = next;
        next = next_of(head);
    }
    if (next) {
        set_head(q, next);
        return head;
    }
    if (exi_load_acq_ptr(&q->tail) != head) return NULL;  /* a push is in progress */
    exi_inbox_push(q, &q->stub);
    next = next_of(head);
    if (next) {
        set_head(q, next);
        return head;
    }
    return NULL;  /* a push overtook the stub's; head stays on a real node */
}

ex_work *exi_inbox_pop(exi_inbox *q) {
    if (!exi_inbox_nonempty(q)) return NULL;
    uint32_t unlocked = 0;
    if (!exi_cas_u32(&q->lock, &unlocked, 1)) return NULL;
    ex_work *w = pop_locked(q);
    exi_store_rel_u32(&q->lock, 0);
    return w;
}
