/* SPDX-License-Identifier: MIT */
/* exi_builtin.h - the process default allocator without the calls.
 * Internal.
 *
 * The built-in default is a recycling allocator over libc; senders and
 * operations of the whole library come from it, so the hot paths reach
 * it through these inline checks instead of the ex_allocator interface. */
#ifndef EXI_BUILTIN_H
#define EXI_BUILTIN_H

#include <stdalign.h>
#include <stddef.h>

#include <cexec/allocator.h>
#include <cexec/allocators.h>

#include "base/exi_atomic.h"

/* The built-in default's recycling allocator (NULL until it exists, or if
 * the default fell back to plain libc).  exi_builtin_of(a): it, when a is
 * it, else NULL, so hot paths can use its inline entry points. */
extern ex_recycling_allocator *exi_builtin_recycler;
extern void *exi_builtin_fast;
static inline ex_recycling_allocator *exi_builtin_of(const ex_allocator *a) {
    return a == exi_load_acq_ptr(&exi_builtin_fast) ? exi_builtin_recycler : NULL;
}
/* ex_default_allocator() without the calls, once the built-in one exists. */
extern void *exi_default_set;  /* what ex_set_default_allocator set */
static inline const ex_allocator *exi_default_allocator(void) {
    const ex_allocator *a = exi_load_acq_ptr(&exi_default_set);
    if (a) return a;
    a = exi_load_acq_ptr(&exi_builtin_fast);
    return a ? a : ex_builtin_allocator();
}

/* A block of `size` bytes (max_align_t aligned) from `a`: through the
 * built-in default's inline entry points when it is `a`, else through
 * the interface.  exi_block_free gives it back the same way. */
static inline void *exi_block_alloc(const ex_allocator *a, size_t size) {
    ex_recycling_allocator *r = exi_builtin_of(a);
    return r ? ex_recycling_allocate(r, size, alignof(max_align_t)) : ex_allocate(a, size, alignof(max_align_t));
}
static inline void exi_block_free(const ex_allocator *a, void *p, size_t size) {
    ex_recycling_allocator *r = exi_builtin_of(a);
    if (r) ex_recycling_deallocate(r, p, size, alignof(max_align_t));
    else ex_deallocate(a, p, size, alignof(max_align_t));
}

/* Take / give back every lock of the built-in default and of the libc
 * allocator's registry, in the order the fork handlers take them (a test
 * holds them from another thread across a fork). */
void exi_builtin_prefork(void);
void exi_builtin_postfork(void);

#endif
