/* allocator.c - the libc allocator and the process default. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>

#include "exi_atomic.h"
#include "exi_core.h"

static void *libc_allocate(void *ctx, size_t size, size_t align) {
    (void)ctx;
    if (size == 0) size = 1;
    if (align <= alignof(max_align_t)) return malloc(size);
    void *p = NULL;
    return posix_memalign(&p, align, size) == 0 ? p : NULL;
}

static void libc_deallocate(void *ctx, void *p, size_t size, size_t align) {
    (void)ctx, (void)size, (void)align;
    free(p);
}

static const ex_allocator libc_allocator = { libc_allocate, libc_deallocate, NULL, "libc" };

const ex_allocator *ex_libc_allocator(void) { return &libc_allocator; }

static void *default_allocator; /* const ex_allocator *, NULL = libc */

const ex_allocator *ex_default_allocator(void) {
    const ex_allocator *a = exi_load_acq_ptr(&default_allocator);
    return a ? a : &libc_allocator;
}

void ex_set_default_allocator(const ex_allocator *a) {
    exi_store_rel_ptr(&default_allocator, (void *)(uintptr_t)a);
}

void *ex_allocate(const ex_allocator *a, size_t size, size_t align) {
    if (!a) a = ex_default_allocator();
    return a->allocate(a->ctx, size, align);
}

void ex_deallocate(const ex_allocator *a, void *p, size_t size, size_t align) {
    if (!p) return;
    if (!a) a = ex_default_allocator();
    a->deallocate(a->ctx, p, size, align);
}
