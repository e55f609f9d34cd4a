/* SPDX-License-Identifier: MIT */
/* cexec/detail/recycling_inline.h - NOT AN INTERFACE.
 *
 * The inline bodies of ex_recycling_allocate and ex_recycling_deallocate
 * (declared and documented in <cexec/allocators.h>, which includes this
 * file).  Everything here may change in any release: the names, the
 * layout of a thread's cache, the thread-local it reads.  Do not include
 * this header yourself and do not use anything it declares.
 *
 * It is read in the middle of allocators.h, after ex_recycling_allocator
 * and EX_RECYCLE_MAX_* are declared.  exi_recycle_count is the one atomic
 * access outside src/base/exi_atomic.h: an inline function of a public
 * header cannot include an internal one. */
#ifndef CEXEC_DETAIL_RECYCLING_INLINE_H
#define CEXEC_DETAIL_RECYCLING_INLINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

void *exi_recycling_allocate_call(ex_recycling_allocator *r, size_t size, size_t align);
void exi_recycling_deallocate_call(ex_recycling_allocator *r, void *p, size_t size, size_t align);
#define EXI_RECYCLE_CLASSES 8
typedef struct exi_recycle_front {      /* a thread's cache begins with this */
    void *hot[EXI_RECYCLE_CLASSES];     /* per class, the block freed last, else NULL */
    uint64_t allocations, frees, bytes_out, bytes_back;  /* this thread's writes only */
    uint32_t n[EXI_RECYCLE_CLASSES];    /* per class, blocks in items */
    void *items[EXI_RECYCLE_CLASSES][EX_RECYCLE_MAX_CACHED];
} exi_recycle_front;
typedef struct exi_recycle_last {       /* the cache this thread used last */
    uint64_t id;                        /* of its allocator, 0: none */
    exi_recycle_front *front;
} exi_recycle_last_t;
extern __thread exi_recycle_last_t exi_recycle_last __attribute__((tls_model("initial-exec")));
/* An allocator begins with its fast id: its id, or UINT64_MAX (matches no
 * thread) in builds that poison cached blocks. */
static inline uint64_t exi_recycle_fast_id(const ex_recycling_allocator *r) { return *(const uint64_t *)(const void *)r; }
static inline unsigned exi_recycle_class(size_t size) {
    if (size <= 32) return 0;
    return (unsigned)(64 - __builtin_clzll((unsigned long long)size - 1)) - 5;
}
/* A class request: every class block is 64-byte aligned, which meets a
 * power-of-two alignment up to 64 (others go to the ordinary call, which
 * refuses them). */
static inline bool exi_recycle_is_class(size_t size, size_t align) {
    return size <= EX_RECYCLE_MAX_BLOCK && align <= 64 && (align & (align - 1)) == 0;
}
/* The same for a block being freed: no block was given out for another
 * alignment, so the power-of-two test is left out. */
static inline bool exi_recycle_freed_is_class(size_t size, size_t align) {
    return size <= EX_RECYCLE_MAX_BLOCK && align <= 64;
}
static inline void exi_recycle_count(uint64_t *c, uint64_t d) {
    __atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + d, __ATOMIC_RELAXED);
}

static inline void *ex_recycling_allocate(ex_recycling_allocator *r, size_t size, size_t align) {
    exi_recycle_last_t *l = &exi_recycle_last;
    if (__builtin_expect(l->id == exi_recycle_fast_id(r) && exi_recycle_is_class(size, align), 1)) {
        exi_recycle_front *f = l->front;
        unsigned c = exi_recycle_class(size);
        void *b = f->hot[c];
        if (__builtin_expect(b != NULL, 1)) {
            f->hot[c] = NULL;
        } else if (__builtin_expect(f->n[c] != 0, 1)) {
            uint32_t n = f->n[c];
            b = f->items[c][n - 1];  /* a few blocks in a row: the array, still inline */
            f->n[c] = n - 1;
        } else {
            return exi_recycling_allocate_call(r, size, align);
        }
        exi_recycle_count(&f->allocations, 1);
        exi_recycle_count(&f->bytes_out, size);
        return b;
    }
    return exi_recycling_allocate_call(r, size, align);
}

static inline void ex_recycling_deallocate(ex_recycling_allocator *r, void *p, size_t size, size_t align) {
    exi_recycle_last_t *l = &exi_recycle_last;
    if (__builtin_expect(p && l->id == exi_recycle_fast_id(r) && exi_recycle_freed_is_class(size, align), 1)) {
        exi_recycle_front *f = l->front;
        unsigned c = exi_recycle_class(size);
        if (__builtin_expect(f->hot[c] == NULL, 1)) {
            f->hot[c] = p;
        } else if (__builtin_expect(f->n[c] != EX_RECYCLE_MAX_CACHED, 1)) {
            uint32_t n = f->n[c];
            f->items[c][n] = p;
            f->n[c] = n + 1;
        } else {
            exi_recycling_deallocate_call(r, p, size, align);  /* spills half to the depot */
            return;
        }
        exi_recycle_count(&f->frees, 1);
        exi_recycle_count(&f->bytes_back, size);
        return;
    }
    exi_recycling_deallocate_call(r, p, size, align);
}

#endif
