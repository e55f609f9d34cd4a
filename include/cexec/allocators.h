/* SPDX-License-Identifier: MIT */
/* cexec/allocators.h - the built-in frame allocators.
 *
 * Each is an ex_allocator (the interface in allocator.h) embedded in a
 * struct the caller owns; pass ex_*_allocator_get(x) wherever an allocator
 * is wanted (ex_write_env with ex_key_get_allocator for one chain,
 * ex_set_default_allocator for the process, ex_pool_config.allocator for a
 * pool).  All are thread-safe and keep ex_alloc_stats. */
#ifndef CEXEC_ALLOCATORS_H
#define CEXEC_ALLOCATORS_H

#include <cexec/allocator.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Counters shared by the built-in allocators (relaxed atomics). */
typedef struct ex_alloc_counters {
    /* private */
    uint64_t allocations, frees, failures, bytes_in_use, peak_bytes;
} ex_alloc_counters;

/* ------------------------------------------------------------------ budget */

/* Wraps another allocator and fails (NULL, so EX_ENOMEM upstream) any
 * allocation that would take the bytes in use past `limit`: a per-tenant
 * memory limit for a compute service.  Bytes in use are the sizes asked
 * for. */
typedef struct ex_budget_allocator {
    /* private */
    ex_allocator base;
    const ex_allocator *under;
    uint64_t limit;
    ex_alloc_counters c;
} ex_budget_allocator;

/* under NULL: the default allocator at the time of the call. */
void ex_budget_allocator_init(ex_budget_allocator *b, const ex_allocator *under, size_t limit_bytes);
static inline const ex_allocator *ex_budget_allocator_get(ex_budget_allocator *b) { return &b->base; }

/* --------------------------------------------------------------- monotonic */

/* Bump allocation from a caller buffer; deallocate does nothing (the
 * memory comes back with ex_monotonic_allocator_reset).  When the buffer
 * is exhausted, allocations go to `upstream` (and are freed there), or
 * fail when upstream is NULL.  Lock-free. */
typedef struct ex_monotonic_allocator {
    /* private */
    ex_allocator base;
    char *buf;
    size_t size;
    uint64_t used;
    const ex_allocator *upstream;
    ex_alloc_counters c;
} ex_monotonic_allocator;

/* Initialises m over buf[0, size) (the caller's; it must outlive every
 * block given from it), with upstream for what does not fit (NULL: such
 * allocations fail). */
void ex_monotonic_allocator_init(ex_monotonic_allocator *m, void *buf, size_t size, const ex_allocator *upstream);
/* The ex_allocator to hand out (valid while m is). */
static inline const ex_allocator *ex_monotonic_allocator_get(ex_monotonic_allocator *m) { return &m->base; }
/* Makes the whole buffer available again.  Only when no block from it is
 * in use. */
void ex_monotonic_allocator_reset(ex_monotonic_allocator *m);

/* ------------------------------------------------------------------- fault */

/* For tests: wraps another allocator and fails chosen allocations. */
typedef struct ex_fault_allocator {
    /* private */
    ex_allocator base;
    const ex_allocator *under;
    uint64_t count;        /* allocations seen */
    uint64_t fail_nth;     /* 0: off */
    uint32_t per_million;  /* random failure rate */
    uint64_t seed;
    ex_alloc_counters c;
} ex_fault_allocator;

/* Initialises f over under (NULL: the default allocator at the time of
 * the call), failing nothing until told to. */
void ex_fault_allocator_init(ex_fault_allocator *f, const ex_allocator *under);
/* The ex_allocator to hand out (valid while f is). */
static inline const ex_allocator *ex_fault_allocator_get(ex_fault_allocator *f) { return &f->base; }
/* Fail allocation number n (1-based) counted from now; 0 turns it off. */
void ex_fault_allocator_fail_nth(ex_fault_allocator *f, uint64_t n);
/* Fail each allocation with probability per_million / 1e6 (xorshift from
 * seed: the same seed fails the same sequence on one thread). */
void ex_fault_allocator_fail_randomly(ex_fault_allocator *f, uint64_t seed, uint32_t per_million);
/* Allocations seen since init (including failed ones). */
uint64_t ex_fault_allocator_count(const ex_fault_allocator *f);

/* --------------------------------------------------------------- recycling */

/* A per-thread recycling pool for the sizes operation states and task
 * frames use: blocks of up to EX_RECYCLE_MAX_BLOCK bytes (power-of-two
 * classes from 32 bytes, 64-byte aligned) are kept in per-thread arrays by
 * size class and handed out again without touching the underlying
 * allocator.  A block freed on another thread goes to that thread's cache
 * (memory is memory); a class that reaches EX_RECYCLE_MAX_CACHED blocks
 * hands half of them, as one batch, to a shared depot, from which a thread
 * whose class is empty takes a batch (one lock per batch: a thread that
 * only frees feeds threads that only allocate).  The depot keeps at most
 * 64 batches per size class, beyond that blocks go back to the underlying
 * allocator.  A thread's cache (16 KiB of addresses, taken from the
 * underlying allocator on the thread's first use) is returned when it
 * exits, the depot when the allocator is destroyed.  In ASan builds cached
 * blocks are poisoned: a use after free is reported.  Counters:
 * allocations, frees and bytes in use count what users hold; peak_bytes is
 * the peak of memory taken from the underlying allocator. */
#define EX_RECYCLE_MAX_BLOCK 4096
#define EX_RECYCLE_MAX_CACHED 256

typedef struct ex_recycling_allocator ex_recycling_allocator;

/* under NULL: the libc allocator.  EX_ENOMEM, EX_EAGAIN (no thread key). */
ex_error ex_recycling_allocator_create(const ex_allocator *under, ex_recycling_allocator **out);
const ex_allocator *ex_recycling_allocator_get(ex_recycling_allocator *r);
/* Frees every cached block.  No block may be in use, no thread may use the
 * allocator any more, and no thread that used it may be exiting at the same
 * time (its exit returns its lists: join such threads first; a pool's
 * workers are joined by ex_pool_destroy). */
void ex_recycling_allocator_destroy(ex_recycling_allocator *r);

/* The same allocation and free as through ex_recycling_allocator_get(r)
 * (same blocks, rules, statistics; thread-safe alike; NULL on failure,
 * which is out of memory in the underlying allocator), for a caller that
 * holds r itself: the common case, a block this thread's cache holds for
 * the class (and a free while that cache has room), is inline at the call
 * site instead of two indirect calls (about half the cost of a pair, see
 * docs/PERFORMANCE.md).  The rest (refilling from the shared depot,
 * spilling to it, a first use on a thread) is an ordinary call.  Freeing NULL does nothing.  They read a thread-local of
 * libcexec with the initial-exec model: a shared object of yours that
 * calls them needs static TLS, as libcexec.so itself does (a dlopen late
 * in a process can fail for lack of it; docs/allocators.md).  In ASan and valgrind builds of cexec every call takes
 * the ordinary path, which poisons cached blocks. */
static inline void *ex_recycling_allocate(ex_recycling_allocator *r, size_t size, size_t align);
static inline void ex_recycling_deallocate(ex_recycling_allocator *r, void *p, size_t size, size_t align);

/* Their inline bodies (not an interface). */
#include <cexec/detail/recycling_inline.h>

/* ---------------------------------------------------------------- jemalloc */

/* jemalloc with one explicit arena per slot (create it with as many slots
 * as pool workers): a thread allocates from the arena of its slot (a pool
 * worker's index, else a slot given to the thread in turn).  A 16-byte
 * header records each block's arena, and a block always goes back to the
 * arena it came from:
 *  - blocks up to 8 KiB (header included, alignment <= 16) are cached by
 *    cexec in front of jemalloc, per thread and power-of-two class (at most
 *    512 blocks or 256 KiB per class); a block of another arena is gathered
 *    into a batch of up to 32 that goes, with one compare-and-swap, to that
 *    arena's remote list, which a thread of that arena takes whole when its
 *    cache is empty (so frames freed by another worker come back to the
 *    worker that made them without a lock or a jemalloc call);
 *  - everything else, and what the caches return, goes through jemalloc's
 *    mallocx/sdallocx with the thread's explicit tcache for that arena.
 *
 * cexec carries a private copy of jemalloc (Debian's libjemalloc_pic.a,
 * linked with every symbol but the three it calls made local): the
 * application's malloc is NOT replaced, whatever it links.  Sanitizer and
 * valgrind builds (make test-asan, test-tsan, CEXEC_JEMALLOC=malloc) route
 * this allocator to malloc/free instead, which those tools can see; the
 * arena structure and the caches are kept so the code paths stay the same,
 * and in ASan builds a cached block is poisoned (a use after free is
 * reported).  Counters are per thread (no shared write when allocating): bytes in use
 * are the sizes asked for; peak_bytes is the sum of every thread's own
 * peak, an upper bound of the true peak. */
typedef struct ex_jemalloc_allocator ex_jemalloc_allocator;

/* arenas in [1, 1024].  EX_ENOMEM, EX_EAGAIN (jemalloc refused to create an arena
 * or tcache, or no thread key is left), EX_EINVAL. */
ex_error ex_jemalloc_allocator_create(unsigned arenas, ex_jemalloc_allocator **out);
const ex_allocator *ex_jemalloc_allocator_get(ex_jemalloc_allocator *j);
/* True when the jemalloc allocator runs on malloc/free: in sanitizer and
 * valgrind builds, and in a libcexec.so that could not reach its private
 * jemalloc (dlopened without static TLS to spare; docs/allocators.md).
 * Decided once per process, at the first use. */
bool ex_jemalloc_is_malloc(void);
/* Destroys the arenas.  No block may be in use, no thread may use the
 * allocator any more, and no thread that used it may be exiting at the same
 * time (join such threads first).  jemalloc allows about 4094 explicit
 * tcaches per process and this allocator wants one per (thread, arena):
 * past that, threads allocate and free without a tcache (slower, correct). */
void ex_jemalloc_allocator_destroy(ex_jemalloc_allocator *j);

#ifdef __cplusplus
}
#endif
#endif
