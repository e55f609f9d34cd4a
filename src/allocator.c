/* allocator.c - the libc allocator and the process default. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>

#include "exi_atomic.h"
#include "exi_core.h"
#include "exi_counters.h"

static ex_alloc_counters libc_counters;

static void *libc_allocate(void *ctx, size_t size, size_t align) {
    (void)ctx;
    void *p = NULL;
    if (align <= alignof(max_align_t)) p = malloc(size ? size : 1);
    else if (posix_memalign(&p, align, size ? size : 1)) p = NULL;
    if (p) exi_count_alloc(&libc_counters, size);
    else exi_count_fail(&libc_counters);
    return p;
}

static void libc_deallocate(void *ctx, void *p, size_t size, size_t align) {
    (void)ctx, (void)align;
    free(p);
    exi_count_free(&libc_counters, size);
}

static void libc_stats(void *ctx, ex_alloc_stats *out) {
    (void)ctx;
    exi_counters_read(&libc_counters, out);
}

static const ex_allocator libc_allocator = { libc_allocate, libc_deallocate, NULL, "libc", libc_stats };

ex_error ex_allocator_stats(const ex_allocator *a, ex_alloc_stats *out) {
    if (!a || !out) return ex_err(EX_EINVAL, "ex_allocator_stats: NULL argument");
    if (!a->stats) return ex_err(EX_EINVAL, "ex_allocator_stats: this allocator keeps no statistics");
    a->stats(a->ctx, out);
    return ex_ok();
}

const ex_allocator *ex_libc_allocator(void) { return &libc_allocator; }

static void *default_allocator; /* const ex_allocator *, NULL = libc */

const ex_allocator *ex_default_allocator(void) {
    const ex_allocator *a = exi_load_acq_ptr(&default_allocator);
    return a ? a : &libc_allocator;
}

void ex_set_default_allocator(const ex_allocator *a) {
    exi_store_rel_ptr(&default_allocator, (void *)(uintptr_t)a);
}
