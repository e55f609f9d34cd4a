/* SPDX-License-Identifier: MIT */
/* cexec/allocator.h - the pluggable frame allocator interface.
 *
 * Every allocation cexec makes goes through an ex_allocator: senders use the
 * process default (ex_default_allocator), running operations use the one
 * their environment answers for ex_key_get_allocator (falling back to the
 * default).  A failed allocation becomes EX_ENOMEM on the error channel. */
#ifndef CEXEC_ALLOCATOR_H
#define CEXEC_ALLOCATOR_H

#include <cexec/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Counters an allocator keeps (see each allocator for what "in use" and
 * "peak" count). */
typedef struct ex_alloc_stats {
    uint64_t allocations;   /* successful allocations */
    uint64_t frees;
    uint64_t failures;      /* allocations that returned NULL */
    uint64_t bytes_in_use;
    uint64_t peak_bytes;
} ex_alloc_stats;

/* Requests no allocator can meet: every built-in allocator returns NULL
 * (counted as a failure, so EX_ENOMEM upstream) for a size above
 * EX_ALLOC_MAX_SIZE (no C object is bigger than PTRDIFF_MAX bytes, and
 * adding a header or an alignment to such a size could wrap), and for an
 * alignment that is not a power of two or is above EX_ALLOC_MAX_ALIGN.
 * An alignment of 0 means none (as 1).  Size 0 gives a block (to be freed
 * with size 0).  An allocator of yours may refuse the same way. */
#define EX_ALLOC_MAX_SIZE ((size_t)PTRDIFF_MAX)
#define EX_ALLOC_MAX_ALIGN ((size_t)1 << 30)

typedef struct ex_allocator {
    /* Returns size bytes aligned to align (a power of two, 0 taken as 1), or
     * NULL. */
    void *(*allocate)(void *ctx, size_t size, size_t align);
    /* Frees a block from allocate with the same size and align. p != NULL. */
    void (*deallocate)(void *ctx, void *p, size_t size, size_t align);
    void *ctx;
    const char *name;
    /* Optional: fills *out with the allocator's counters. */
    void (*stats)(void *ctx, ex_alloc_stats *out);
} ex_allocator;

/* The allocator's counters.  EX_EINVAL for NULL arguments or an allocator
 * that keeps none. */
ex_error ex_allocator_stats(const ex_allocator *a, ex_alloc_stats *out);

/* The libc allocator (malloc / posix_memalign).  Thread-safe.  Keeps
 * counters per thread, summed by ex_allocator_stats (no shared write on
 * the allocation path): bytes in use are the bytes requested; peak_bytes
 * is the sum of the threads' own peaks, an upper bound of the true peak. */
const ex_allocator *ex_libc_allocator(void);

/* The allocator used for senders and for operations whose environment has
 * none.  Initially ex_builtin_allocator(); ex_set_default_allocator(NULL)
 * restores it, ex_set_default_allocator(ex_libc_allocator()) makes every
 * such allocation a plain malloc.  Set it before building senders: a
 * sender remembers the allocator that made it and frees itself through
 * that one.  Thread-safe. */
const ex_allocator *ex_default_allocator(void);
void ex_set_default_allocator(const ex_allocator *a);

/* The built-in process default: a recycling allocator (cexec/allocators.h)
 * over ex_libc_allocator(), made at its first use and never destroyed.
 * Each thread that allocates through it keeps a cache of freed blocks of
 * up to 4 KiB (at most 257 per size class), returned to malloc when the
 * thread exits; blocks freed beyond that wait in a shared depot of at most
 * 512 blocks per class for threads that allocate, the rest go back to
 * malloc.  Its statistics count the blocks users hold.  fork() is safe
 * (handlers hold its locks across it).  If it cannot be made (no memory,
 * no thread-specific key left) it is ex_libc_allocator(). */
const ex_allocator *ex_builtin_allocator(void);

/* Convenience wrappers (a NULL allocator means the default one);
 * ex_allocate returns NULL on failure, ex_deallocate ignores NULL. */
static inline void *ex_allocate(const ex_allocator *a, size_t size, size_t align) {
    if (!a) a = ex_default_allocator();
    return a->allocate(a->ctx, size, align);
}
static inline void ex_deallocate(const ex_allocator *a, void *p, size_t size, size_t align) {
    if (!p) return;
    if (!a) a = ex_default_allocator();
    a->deallocate(a->ctx, p, size, align);
}

#ifdef __cplusplus
}
#endif
#endif
