/* SPDX-License-Identifier: MIT */
/* exi_timer_heap.h - the timers of one resource: an intrusive binary
 * min-heap ordered by deadline, then by arming order (equal deadlines fire
 * first-armed first).  Nodes live in the timer operations, linked by
 * pointers, so arming never allocates and cannot fail; insert and remove
 * are O(log n), the earliest is O(1).  Not thread-safe: the resource's
 * lock guards it.  Internal. */
#ifndef EXI_TIMER_HEAP_H
#define EXI_TIMER_HEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cexec/detail/timer_heap.h>  /* exi_timer_heap: embedded in public structs */

typedef struct exi_timer {
    struct exi_timer *parent, *left, *right;
    int64_t deadline;   /* CLOCK_MONOTONIC nanoseconds */
    uint64_t seq;       /* arming order, set by insert */
    bool in_heap;
} exi_timer;

static inline void exi_timer_heap_init(exi_timer_heap *h) {
    h->root = NULL;
    h->count = 0;
    h->next_seq = 0;
}

/* The earliest timer, or NULL. */
static inline exi_timer *exi_timer_heap_min(const exi_timer_heap *h) { return h->root; }

/* Adds t (its deadline set, not in a heap). */
void exi_timer_heap_insert(exi_timer_heap *h, exi_timer *t);

/* Removes t, which is in h. */
void exi_timer_heap_remove(exi_timer_heap *h, exi_timer *t);

#endif
