/* SPDX-License-Identifier: MIT */
/* recycling.c - per-thread recycling pool (see allocators.h).
 *
 * Size classes are powers of two from 32 to EX_RECYCLE_MAX_BLOCK bytes;
 * every class block is 64-byte aligned, so a request is a class request
 * exactly when size <= EX_RECYCLE_MAX_BLOCK and align is a power of two
 * up to 64, which deallocate can tell from its arguments.  Each thread has its own lists
 * (found through a pthread key per allocator), so the fast path touches no
 * shared cache line. */
#include <pthread.h>
#include <stdlib.h>

#include <string.h>

#include <stdalign.h>
#include <cexec/cexec.h>

#include "allocators/exi_alloc_limits.h"
#include "allocators/exi_counters.h"
#include "allocators/exi_recycling.h"
#include "base/exi_atomic.h"
#include "base/exi_poison.h"

#define MIN_SHIFT 5
#define NCLASSES EXI_RECYCLE_CLASSES  /* 32 .. 4096 */
#define BLOCK_ALIGN 64

/* A thread keeps free blocks in an array per class, so pushing or popping
 * never touches a block (a block another core wrote costs no cache miss
 * until its user touches it).  Blocks move between a thread and the shared
 * depot in batches of BATCH: a thread that only frees (a consumer) hands
 * full batches to threads that only allocate (a producer) at one lock per
 * batch.  In the depot a batch is a chain of nodes, each a free block of
 * the batch holding the addresses of others. */
#define BATCH (EX_RECYCLE_MAX_CACHED / 2)
#define DEPOT_MAX_BATCHES 64   /* per class; the built-in default keeps fewer */

typedef struct rnode {
    struct rnode *next_node;   /* within a batch */
    struct rnode *next_batch;  /* first node of a batch: the depot's next */
    uint32_t n, unused;
    struct rnode *items[];
} rnode;
_Static_assert(sizeof(rnode) < ((size_t)1 << MIN_SHIFT), "a node holds at least one address");

/* The block freed last in each class waits in front.hot, ahead of the
 * array: an allocation that follows a free (the common rhythm of operation
 * states) then reads and writes one slot and no array count, so the pair's
 * critical path is one store-to-load forward instead of two.  The arrays
 * are in the front too, so the header's inline entry points also serve a
 * few blocks in a row (a fork-join step allocates three senders) until a
 * class runs empty or full.  Likewise the byte
 * counters are split (given out, given back): one counter changed by both
 * halves of a pair chains them through memory.  The counters are written
 * by this thread only and read by stats (relaxed). */
typedef struct tcache {
    exi_recycle_front front;      /* first: the header's inline paths use it */
    struct ex_recycling_allocator *owner;
    struct tcache *prev, *next;   /* registry, under owner->mu */
} tcache;

struct ex_recycling_allocator {
    uint64_t fast_id;            /* first: id, or UINT64_MAX when blocks are poisoned (exi_recycle_fast_id) */
    ex_allocator base;
    uint64_t id;                 /* unique: the thread-local shortcut's key */
    const ex_allocator *under;
    pthread_key_t key;
    pthread_mutex_t mu;
    tcache *caches;
    uint64_t retired_allocations, retired_frees, retired_bytes, failures;  /* exited threads; under mu */
    uint64_t held, peak_held;    /* bytes taken from `under` (atomics; only on depot misses) */
    uint32_t depot_max;          /* batches kept per class */
    struct {
        pthread_mutex_t mu;
        rnode *batches;
        uint32_t n;              /* written under mu, peeked without */
    } depot[NCLASSES];
};

static unsigned class_of(size_t size) { return exi_recycle_class(size); }
static size_t class_size(unsigned c) { return (size_t)1 << (c + MIN_SHIFT); }
/* Must be the header's tests (exi_recycle_is_class, exi_recycle_freed_is_class):
 * a block's path is told from its size and alignment. */
static bool is_class(size_t size, size_t align) { return exi_recycle_is_class(size, align); }
static bool freed_is_class(size_t size, size_t align) { return exi_recycle_freed_is_class(size, align); }
static uint32_t node_cap(unsigned c) { return (uint32_t)((class_size(c) - sizeof(rnode)) / sizeof(rnode *)); }

/* The cache this thread used last, by allocator id (ids never repeat, so a
 * later allocator at a recycled address is not mistaken for it): one
 * thread-local load on the fast path; the pthread key finds the others.
 * Public (allocators.h) for the inline entry points. */
__thread exi_recycle_last_t exi_recycle_last __attribute__((tls_model("initial-exec")));
static inline tcache *last_cache(void) { return (tcache *)(void *)exi_recycle_last.front; }
/* Makes t (NULL: none) the cache this thread used last. */
static inline void set_last(uint64_t id, tcache *t) {
    exi_recycle_last.id = id;
    exi_recycle_last.front = t ? &t->front : NULL;
}
static uint64_t next_id = 1;

static void *under_alloc(ex_recycling_allocator *r, size_t size) {
    void *p = r->under->allocate(r->under->ctx, size, BLOCK_ALIGN);
    if (p) exi_peak_update(&r->peak_held, exi_faa_u64(&r->held, size) + size);
    return p;
}

static void under_free(ex_recycling_allocator *r, void *p, unsigned c) {
    exi_unpoison(p, class_size(c));
    r->under->deallocate(r->under->ctx, p, class_size(c), BLOCK_ALIGN);
    exi_faa_u64(&r->held, (uint64_t)0 - class_size(c));
}

/* Frees every block of a depot batch. */
static void free_batch(ex_recycling_allocator *r, rnode *node, unsigned c) {
    for (rnode *nn; node; node = nn) {
        nn = node->next_node;
        for (uint32_t k = 0; k < node->n; k++) under_free(r, node->items[k], c);
        under_free(r, node, c);
    }
}

/* Returns a thread's cached blocks and folds its counters into the
 * allocator's.  Caller holds r->mu. */
static void retire_locked(ex_recycling_allocator *r, tcache *t) {
    for (unsigned c = 0; c < NCLASSES; c++) {
        if (t->front.hot[c]) under_free(r, t->front.hot[c], c);
        for (uint32_t k = 0; k < t->front.n[c]; k++) under_free(r, t->front.items[c][k], c);
    }
    r->retired_allocations += t->front.allocations;
    r->retired_frees += t->front.frees;
    r->retired_bytes += t->front.bytes_out - t->front.bytes_back;
    if (t->prev) t->prev->next = t->next;
    else r->caches = t->next;
    if (t->next) t->next->prev = t->prev;
    r->under->deallocate(r->under->ctx, t, sizeof *t, alignof(tcache));
}

static void thread_exit(void *arg) {
    tcache *t = arg;
    ex_recycling_allocator *r = t->owner;
    if (last_cache() == t) {
        set_last(0, NULL);
    }
    pthread_mutex_lock(&r->mu);
    retire_locked(r, t);
    pthread_mutex_unlock(&r->mu);
}

static tcache *new_cache(ex_recycling_allocator *r);

/* Inline fast path; the pthread key and creation are out of line. */
static inline tcache *my_cache(ex_recycling_allocator *r) {
    if (__builtin_expect(exi_recycle_last.id == r->id, 1)) return last_cache();
    return new_cache(r);
}

static tcache *new_cache(ex_recycling_allocator *r) {
    tcache *t = pthread_getspecific(r->key);
    if (t) {
        set_last(r->id, t);
        return t;
    }
    t = r->under->allocate(r->under->ctx, sizeof *t, alignof(tcache));
    if (!t) return NULL;
    memset(&t->front, 0, offsetof(exi_recycle_front, items));
    memset((char *)t + sizeof t->front, 0, sizeof *t - sizeof t->front);
    t->owner = r;
    if (pthread_setspecific(r->key, t)) {
        r->under->deallocate(r->under->ctx, t, sizeof *t, alignof(tcache));
        return NULL;
    }
    pthread_mutex_lock(&r->mu);
    t->next = r->caches;
    if (r->caches) r->caches->prev = t;
    r->caches = t;
    pthread_mutex_unlock(&r->mu);
    set_last(r->id, t);
    return t;
}

/* Moves the top BATCH blocks of a full stack to the depot as a chain of
 * nodes (or back to `under` when the depot is full). */
static void spill(ex_recycling_allocator *r, tcache *t, unsigned c) {
    void **top = &t->front.items[c][t->front.n[c] - BATCH];
    t->front.n[c] -= BATCH;
    rnode *first = NULL, *node = NULL;
    uint32_t cap = node_cap(c);
    for (unsigned k = 0; k < BATCH; k++) {
        if (node && node->n < cap) {
            node->items[node->n++] = top[k];
            continue;
        }
        rnode *fresh = top[k];
        exi_unpoison(fresh, sizeof(rnode) + cap * sizeof(rnode *));
        fresh->next_node = NULL;
        fresh->n = 0;
        if (node) node->next_node = fresh;
        else first = fresh;
        node = fresh;
    }
    pthread_mutex_lock(&r->depot[c].mu);
    bool keep = r->depot[c].n < r->depot_max;
    if (keep) {
        first->next_batch = r->depot[c].batches;
        r->depot[c].batches = first;
        exi_store_rlx_u32(&r->depot[c].n, r->depot[c].n + 1);
    }
    pthread_mutex_unlock(&r->depot[c].mu);
    if (!keep) free_batch(r, first, c);
}

/* Takes a batch from the depot into an empty stack.  False if none. */
static bool refill(ex_recycling_allocator *r, tcache *t, unsigned c) {
    if (!exi_load_rlx_u32(&r->depot[c].n)) return false;  /* cheap miss */
    pthread_mutex_lock(&r->depot[c].mu);
    rnode *node = r->depot[c].batches;
    if (node) {
        r->depot[c].batches = node->next_batch;
        exi_store_rlx_u32(&r->depot[c].n, r->depot[c].n - 1);
    }
    pthread_mutex_unlock(&r->depot[c].mu);
    if (!node) return false;
    uint32_t n = 0;
    for (rnode *nn; node; node = nn) {
        nn = node->next_node;
        for (uint32_t k = 0; k < node->n; k++) t->front.items[c][n++] = node->items[k];
        exi_poison(node, class_size(c));
        t->front.items[c][n++] = node;
    }
    t->front.n[c] = n;
    return true;
}

__attribute__((noinline)) static void *allocate_slow(void *ctx, size_t size, size_t align) {
    ex_recycling_allocator *r = ctx;
    if (!exi_alloc_request_ok(size, align)) {  /* a class block would have the wrong alignment */
        exi_faa_u64(&r->failures, 1);
        return NULL;
    }
    tcache *t = my_cache(r);
    void *p = NULL;
    if (is_class(size, align)) {
        unsigned c = class_of(size);
        if (t && t->front.hot[c]) {
            p = t->front.hot[c];
            t->front.hot[c] = NULL;
            exi_unpoison(p, size);
        } else if (t && (t->front.n[c] || refill(r, t, c))) {
            p = t->front.items[c][--t->front.n[c]];
            exi_unpoison(p, size);
        } else {
            p = under_alloc(r, class_size(c));
        }
    } else {
        p = r->under->allocate(r->under->ctx, size, align);
    }
    if (!p) {
        exi_faa_u64(&r->failures, 1);
        return NULL;
    }
    if (t) {
        exi_owner_add_u64(&t->front.allocations, 1);
        exi_owner_add_u64(&t->front.bytes_out, size);
    } else {
        pthread_mutex_lock(&r->mu);
        r->retired_allocations++;
        r->retired_bytes += size;
        pthread_mutex_unlock(&r->mu);
    }
    return p;
}

/* The fast path: this thread's cache is the one it used last and the
 * class stack has a block.  Everything else is out of line, so the fast
 * path needs no stack frame. */
static void *recycle_allocate(void *ctx, size_t size, size_t align) {
    ex_recycling_allocator *r = ctx;
    if (__builtin_expect(exi_recycle_last.id == r->id && is_class(size, align), 1)) {
        tcache *t = last_cache();
        unsigned c = class_of(size);
        void *b = t->front.hot[c];
        if (__builtin_expect(b != NULL, 1)) {
            t->front.hot[c] = NULL;
        } else {
            uint32_t n = t->front.n[c];
            if (__builtin_expect(n == 0, 0)) return allocate_slow(ctx, size, align);
            b = t->front.items[c][n - 1];
            t->front.n[c] = n - 1;
        }
        exi_owner_add_u64(&t->front.allocations, 1);
        exi_owner_add_u64(&t->front.bytes_out, size);
        exi_unpoison(b, size);
        return b;
    }
    return allocate_slow(ctx, size, align);
}

__attribute__((noinline)) static void deallocate_slow(void *ctx, void *p, size_t size, size_t align) {
    ex_recycling_allocator *r = ctx;
    tcache *t = my_cache(r);
    if (freed_is_class(size, align)) {
        unsigned c = class_of(size);
        exi_poison(p, class_size(c));
        if (t && !t->front.hot[c]) {
            t->front.hot[c] = p;
        } else if (t) {
            if (t->front.n[c] == EX_RECYCLE_MAX_CACHED) spill(r, t, c);
            t->front.items[c][t->front.n[c]++] = p;
        } else {
            under_free(r, p, c);
        }
    } else {
        r->under->deallocate(r->under->ctx, p, size, align);
    }
    if (t) {
        exi_owner_add_u64(&t->front.frees, 1);
        exi_owner_add_u64(&t->front.bytes_back, size);
    } else {
        /* No cache for this thread (out of memory): count on the allocator. */
        pthread_mutex_lock(&r->mu);
        r->retired_frees++;
        r->retired_bytes -= size;
        pthread_mutex_unlock(&r->mu);
    }
}

static void recycle_deallocate(void *ctx, void *p, size_t size, size_t align) {
    ex_recycling_allocator *r = ctx;
    if (__builtin_expect(exi_recycle_last.id == r->id && freed_is_class(size, align), 1)) {
        tcache *t = last_cache();
        unsigned c = class_of(size);
        if (__builtin_expect(t->front.hot[c] == NULL, 1)) {
            t->front.hot[c] = p;
        } else {
            uint32_t n = t->front.n[c];
            if (__builtin_expect(n == EX_RECYCLE_MAX_CACHED, 0)) {
                deallocate_slow(ctx, p, size, align);
                return;
            }
            t->front.items[c][n] = p;
            t->front.n[c] = n + 1;
        }
        exi_poison(p, class_size(c));
        exi_owner_add_u64(&t->front.frees, 1);
        exi_owner_add_u64(&t->front.bytes_back, size);
        return;
    }
    deallocate_slow(ctx, p, size, align);
}

static void recycle_stats(void *ctx, ex_alloc_stats *out) {
    ex_recycling_allocator *r = ctx;
    pthread_mutex_lock(&r->mu);
    uint64_t a = r->retired_allocations, f = r->retired_frees, b = r->retired_bytes;
    for (tcache *t = r->caches; t; t = t->next) {
        a += exi_load_rlx_u64(&t->front.allocations);
        f += exi_load_rlx_u64(&t->front.frees);
        b -= exi_load_rlx_u64(&t->front.bytes_back);  /* given back first: see below */
        b += exi_load_rlx_u64(&t->front.bytes_out);
    }
    pthread_mutex_unlock(&r->mu);
    out->allocations = a;
    out->frees = f;
    out->failures = exi_load_rlx_u64(&r->failures);
    /* The counters are read while threads run: a pair given out and back
     * between two reads, or a block freed on another thread, can make the
     * sum momentarily negative; in use is never below zero. */
    out->bytes_in_use = (int64_t)b < 0 ? 0 : b;
    out->peak_bytes = exi_load_rlx_u64(&r->peak_held);
}

ex_error ex_recycling_allocator_create(const ex_allocator *under, ex_recycling_allocator **out) {
    return exi_recycling_allocator_create_bounded(under, DEPOT_MAX_BATCHES, out);
}

ex_error exi_recycling_allocator_create_bounded(const ex_allocator *under, uint32_t depot_batches,
                                                ex_recycling_allocator **out) {
    if (!out) return ex_err(EX_EINVAL, "ex_recycling_allocator_create: out is NULL");
    *out = NULL;
    if (!under) under = ex_libc_allocator();
    ex_recycling_allocator *r = under->allocate(under->ctx, sizeof *r, alignof(ex_recycling_allocator));
    if (!r) return ex_err(EX_ENOMEM, "ex_recycling_allocator_create: out of memory");
    memset(r, 0, sizeof *r);
    r->under = under;
    r->depot_max = depot_batches;
    r->id = exi_faa_u64(&next_id, 1);
#if defined(EXI_ASAN) || defined(EXI_MEMCHECK)
    r->fast_id = UINT64_MAX;  /* the inline paths would skip the poisoning */
#else
    r->fast_id = r->id;
#endif
    if (pthread_key_create(&r->key, thread_exit)) {
        under->deallocate(under->ctx, r, sizeof *r, alignof(ex_recycling_allocator));
        return ex_err(EX_EAGAIN, "ex_recycling_allocator_create: no thread-specific key left");
    }
    if (pthread_mutex_init(&r->mu, NULL)) {
        pthread_key_delete(r->key);
        under->deallocate(under->ctx, r, sizeof *r, alignof(ex_recycling_allocator));
        return ex_err(EX_EAGAIN, "ex_recycling_allocator_create: pthread_mutex_init failed");
    }
    for (unsigned c = 0; c < NCLASSES; c++) pthread_mutex_init(&r->depot[c].mu, NULL);
    r->base = (ex_allocator){ recycle_allocate, recycle_deallocate, r, "recycling", recycle_stats };
    *out = r;
    return ex_ok();
}

const ex_allocator *ex_recycling_allocator_get(ex_recycling_allocator *r) { return &r->base; }

void exi_recycling_lock_all(ex_recycling_allocator *r) {
    pthread_mutex_lock(&r->mu);  /* the order nothing else inverts: no path takes mu inside a depot lock */
    for (unsigned c = 0; c < NCLASSES; c++) pthread_mutex_lock(&r->depot[c].mu);
}

void exi_recycling_unlock_all(ex_recycling_allocator *r) {
    for (unsigned c = NCLASSES; c-- > 0;) pthread_mutex_unlock(&r->depot[c].mu);
    pthread_mutex_unlock(&r->mu);
}

void *exi_recycling_allocate_call(ex_recycling_allocator *r, size_t size, size_t align) {
    return recycle_allocate(r, size, align);
}

void exi_recycling_deallocate_call(ex_recycling_allocator *r, void *p, size_t size, size_t align) {
    if (p) recycle_deallocate(r, p, size, align);
}

void ex_recycling_allocator_destroy(ex_recycling_allocator *r) {
    if (!r) return;
    if (exi_recycle_last.id == r->id) {
        set_last(0, NULL);
    }
    /* Threads that exit later find no key: their destructor does not run. */
    pthread_key_delete(r->key);
    pthread_mutex_lock(&r->mu);
    while (r->caches) retire_locked(r, r->caches);
    pthread_mutex_unlock(&r->mu);
    pthread_mutex_destroy(&r->mu);
    for (unsigned c = 0; c < NCLASSES; c++) {
        for (rnode *batch = r->depot[c].batches, *nb; batch; batch = nb) {
            nb = batch->next_batch;
            free_batch(r, batch, c);
        }
        pthread_mutex_destroy(&r->depot[c].mu);
    }
    const ex_allocator *under = r->under;
    under->deallocate(under->ctx, r, sizeof *r, alignof(ex_recycling_allocator));
}
