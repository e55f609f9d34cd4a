/* SPDX-License-Identifier: MIT */
/* cexec/detail/timer_heap.h - NOT AN INTERFACE.
 *
 * The head of a resource's timer heap, embedded in public resource
 * structs (ex_run_loop) so that they can keep timers without allocating.
 * The layout may change in any release; do not include this header
 * yourself and do not touch these fields. */
#ifndef CEXEC_DETAIL_TIMER_HEAP_H
#define CEXEC_DETAIL_TIMER_HEAP_H

#include <stddef.h>
#include <stdint.h>

struct exi_timer;

typedef struct exi_timer_heap {
    struct exi_timer *root;
    size_t count;
    uint64_t next_seq;
} exi_timer_heap;

#endif
