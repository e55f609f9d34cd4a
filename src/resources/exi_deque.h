/* SPDX-License-Identifier: MIT */
/* exi_deque.h - Chase-Lev work-stealing deque (Le, Pop, Cohen, Zappa
 * Nardelli, "Correct and Efficient Work-Stealing for Weak Memory Models",
 * PPoPP 2013) on the project's atomics.  The owner pushes and takes at the
 * bottom (LIFO); thieves steal at the top (FIFO).  Internal. */
#ifndef EXI_DEQUE_H
#define EXI_DEQUE_H

#include <cexec/types.h>

#include "base/exi_atomic.h"

typedef struct exi_deque_array {
    struct exi_deque_array *retired_next;  /* owner-private list of replaced arrays */
    uint64_t mask;                         /* capacity - 1, capacity a power of two */
    ex_work *slots[];
} exi_deque_array;

typedef struct exi_deque {
    _Alignas(64) uint64_t top;     /* int64 in two's complement; thieves CAS it */
    _Alignas(64) uint64_t bottom;  /* written by the owner only */
    void *array;                   /* exi_deque_array *, replaced on growth */
    exi_deque_array *retired;      /* freed at destroy: thieves may still read them */
    const struct ex_allocator *alloc;
} exi_deque;

/* capacity: initial slots (power of two).  EX_ENOMEM on failure. */
ex_error exi_deque_init(exi_deque *d, uint64_t capacity, const struct ex_allocator *alloc);
void exi_deque_destroy(exi_deque *d);

/* Owner only.  False when the deque had to grow and could not allocate (the
 * item was not pushed). */
bool exi_deque_push(exi_deque *d, ex_work *w);

/* Owner only: the most recently pushed item, or NULL. */
ex_work *exi_deque_take(exi_deque *d);

/* Owner only: the most recently pushed item, left in place, or NULL.  A
 * thief may be taking it meanwhile: only its address may be used, and the
 * take that follows (nothing pushed in between) returns it or NULL. */
ex_work *exi_deque_peek(exi_deque *d);

typedef enum exi_steal_result { EXI_STEAL_EMPTY, EXI_STEAL_ABORT, EXI_STEAL_OK } exi_steal_result;

/* Any thread: the oldest item.  ABORT means another thread won the race
 * (the deque may still hold items). */
exi_steal_result exi_deque_steal(exi_deque *d, ex_work **out);

/* Any thread: a hint that items are present. */
static inline bool exi_deque_nonempty(exi_deque *d) {
    int64_t t = (int64_t)exi_load_acq_u64(&d->top);
    int64_t b = (int64_t)exi_load_acq_u64(&d->bottom);
    return b > t;
}

#endif
