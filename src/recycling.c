/* recycling.c - per-thread recycling pool (see allocators.h).
 *
 * Size classes are powers of two from 16 to EX_RECYCLE_MAX_BLOCK bytes;
 * every class block is 64-byte aligned, so a request is a class request
 * exactly when size <= EX_RECYCLE_MAX_BLOCK and align <= 64, which
 * deallocate can tell from its arguments.  Each thread has its own lists
 * (found through a pthread key per allocator), so the fast path touches no
 * shared cache line. */
#include <pthread.h>
#include <stdlib.h>

#include "exi_core.h"
#include "exi_counters.h"

#define MIN_SHIFT 4
#define NCLASSES 9          /* 16 .. 4096 */
#define BLOCK_ALIGN 64

/* A free block; the first block of a depot batch also links the batches. */
typedef struct rblock { struct rblock *next, *next_batch; } rblock;

/* Blocks move between a thread's list and the shared depot in batches of
 * this many: a thread that only frees (a consumer) hands full batches to
 * threads that only allocate (a producer) at one lock per batch. */
#define BATCH (EX_RECYCLE_MAX_CACHED / 2)
#define DEPOT_MAX_BATCHES 64

typedef struct tcache {
    struct ex_recycling_allocator *owner;
    struct tcache *prev, *next;   /* registry, under owner->mu */
    rblock *lists[NCLASSES];
    uint32_t counts[NCLASSES];
    /* written by this thread only, read by stats (relaxed) */
    uint64_t allocations, frees, bytes;  /* bytes: handed out minus returned; wraps */
} tcache;

struct ex_recycling_allocator {
    ex_allocator base;
    uint64_t id;                 /* unique: the thread-local shortcut's key */
    const ex_allocator *under;
    pthread_key_t key;
    pthread_mutex_t mu;
    tcache *caches;
    uint64_t retired_allocations, retired_frees, retired_bytes, failures;  /* exited threads; under mu */
    uint64_t held, peak_held;    /* bytes taken from `under` (atomics; only on depot misses) */
    struct {
        pthread_mutex_t mu;
        rblock *batches;         /* each: BATCH blocks linked by next */
        uint32_t n;              /* written under mu, peeked without */
    } depot[NCLASSES];
};

static unsigned class_of(size_t size) {
    if (size <= ((size_t)1 << MIN_SHIFT)) return 0;
    return (unsigned)(64 - __builtin_clzll((unsigned long long)size - 1)) - MIN_SHIFT;
}
static size_t class_size(unsigned c) { return (size_t)1 << (c + MIN_SHIFT); }
static bool is_class(size_t size, size_t align) { return size <= EX_RECYCLE_MAX_BLOCK && align <= BLOCK_ALIGN; }

/* The cache this thread used last, by allocator id (ids never repeat, so a
 * later allocator at a recycled address is not mistaken for it): one
 * thread-local load on the fast path; the pthread key finds the others. */
static EXI_TLS struct { uint64_t id; tcache *t; } last;
static uint64_t next_id = 1;

static void *under_alloc(ex_recycling_allocator *r, size_t size) {
    void *p = r->under->allocate(r->under->ctx, size, BLOCK_ALIGN);
    if (p) exi_peak_update(&r->peak_held, exi_faa_u64(&r->held, size) + size);
    return p;
}

static void under_free(ex_recycling_allocator *r, void *p, size_t size) {
    r->under->deallocate(r->under->ctx, p, size, BLOCK_ALIGN);
    exi_faa_u64(&r->held, (uint64_t)0 - size);
}

/* Returns a thread's cached blocks and folds its counters into the
 * allocator's.  Caller holds r->mu. */
static void retire_locked(ex_recycling_allocator *r, tcache *t) {
    for (unsigned c = 0; c < NCLASSES; c++)
        for (rblock *b = t->lists[c], *next; b; b = next) {
            next = b->next;
            under_free(r, b, class_size(c));
        }
    r->retired_allocations += t->allocations;
    r->retired_frees += t->frees;
    r->retired_bytes += t->bytes;
    if (t->prev) t->prev->next = t->next;
    else r->caches = t->next;
    if (t->next) t->next->prev = t->prev;
    r->under->deallocate(r->under->ctx, t, sizeof *t, alignof(tcache));
}

static void thread_exit(void *arg) {
    tcache *t = arg;
    ex_recycling_allocator *r = t->owner;
    if (last.t == t) {
        last.id = 0;
        last.t = NULL;
    }
    pthread_mutex_lock(&r->mu);
    retire_locked(r, t);
    pthread_mutex_unlock(&r->mu);
}

static tcache *new_cache(ex_recycling_allocator *r);

/* Inline fast path; the pthread key and creation are out of line. */
static inline tcache *my_cache(ex_recycling_allocator *r) {
    if (__builtin_expect(last.id == r->id, 1)) return last.t;
    return new_cache(r);
}

static tcache *new_cache(ex_recycling_allocator *r) {
    tcache *t = pthread_getspecific(r->key);
    if (t) {
        last.id = r->id;
        last.t = t;
        return t;
    }
    t = r->under->allocate(r->under->ctx, sizeof *t, alignof(tcache));
    if (!t) return NULL;
    memset(t, 0, sizeof *t);
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
    last.id = r->id;
    last.t = t;
    return t;
}

/* Moves BATCH blocks of a full list to the depot (or back to `under` when
 * the depot is full). */
static void spill(ex_recycling_allocator *r, tcache *t, unsigned c) {
    rblock *first = t->lists[c], *tail = first;
    for (unsigned k = 1; k < BATCH; k++) tail = tail->next;
    t->lists[c] = tail->next;
    t->counts[c] -= BATCH;
    tail->next = NULL;
    pthread_mutex_lock(&r->depot[c].mu);
    bool keep = r->depot[c].n < DEPOT_MAX_BATCHES;
    if (keep) {
        first->next_batch = r->depot[c].batches;
        r->depot[c].batches = first;
        exi_store_rlx_u32(&r->depot[c].n, r->depot[c].n + 1);
    }
    pthread_mutex_unlock(&r->depot[c].mu);
    if (!keep)
        for (rblock *b = first, *next; b; b = next) {
            next = b->next;
            under_free(r, b, class_size(c));
        }
}

/* Takes a batch from the depot into an empty list.  False if none. */
static bool refill(ex_recycling_allocator *r, tcache *t, unsigned c) {
    if (!exi_load_rlx_u32(&r->depot[c].n)) return false;  /* cheap miss */
    pthread_mutex_lock(&r->depot[c].mu);
    rblock *batch = r->depot[c].batches;
    if (batch) {
        r->depot[c].batches = batch->next_batch;
        exi_store_rlx_u32(&r->depot[c].n, r->depot[c].n - 1);
    }
    pthread_mutex_unlock(&r->depot[c].mu);
    if (!batch) return false;
    t->lists[c] = batch;
    t->counts[c] = BATCH;
    return true;
}

static void bump(uint64_t *field, uint64_t delta) { exi_store_rlx_u64(field, exi_load_rlx_u64(field) + delta); }

__attribute__((noinline)) static void *allocate_slow(void *ctx, size_t size, size_t align) {
    ex_recycling_allocator *r = ctx;
    tcache *t = my_cache(r);
    void *p = NULL;
    if (is_class(size, align)) {
        unsigned c = class_of(size);
        rblock *b = t ? t->lists[c] : NULL;
        if (!b && t && refill(r, t, c)) b = t->lists[c];
        if (b) {
            t->lists[c] = b->next;
            t->counts[c]--;
            p = b;
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
        bump(&t->allocations, 1);
        bump(&t->bytes, size);
    } else {
        pthread_mutex_lock(&r->mu);
        r->retired_allocations++;
        r->retired_bytes += size;
        pthread_mutex_unlock(&r->mu);
    }
    return p;
}

/* The fast path: this thread's cache is the one it used last and the
 * class list has a block.  Everything else is out of line, so the fast path
 * needs no stack frame. */
static void *recycle_allocate(void *ctx, size_t size, size_t align) {
    ex_recycling_allocator *r = ctx;
    if (__builtin_expect(last.id == r->id && is_class(size, align), 1)) {
        tcache *t = last.t;
        unsigned c = class_of(size);
        rblock *b = t->lists[c];
        if (__builtin_expect(b != NULL, 1)) {
            t->lists[c] = b->next;
            t->counts[c]--;
            bump(&t->allocations, 1);
            bump(&t->bytes, size);
            return b;
        }
    }
    return allocate_slow(ctx, size, align);
}

__attribute__((noinline)) static void deallocate_slow(void *ctx, void *p, size_t size, size_t align) {
    ex_recycling_allocator *r = ctx;
    tcache *t = my_cache(r);
    if (is_class(size, align)) {
        unsigned c = class_of(size);
        if (t && t->counts[c] == EX_RECYCLE_MAX_CACHED) spill(r, t, c);
        if (t) {
            rblock *b = p;
            b->next = t->lists[c];
            t->lists[c] = b;
            t->counts[c]++;
        } else {
            under_free(r, p, class_size(c));
        }
    } else {
        r->under->deallocate(r->under->ctx, p, size, align);
    }
    if (t) {
        bump(&t->frees, 1);
        bump(&t->bytes, (uint64_t)0 - size);
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
    if (__builtin_expect(last.id == r->id && is_class(size, align), 1)) {
        tcache *t = last.t;
        unsigned c = class_of(size);
        if (__builtin_expect(t->counts[c] < EX_RECYCLE_MAX_CACHED, 1)) {
            rblock *b = p;
            b->next = t->lists[c];
            t->lists[c] = b;
            t->counts[c]++;
            bump(&t->frees, 1);
            bump(&t->bytes, (uint64_t)0 - size);
            return;
        }
    }
    deallocate_slow(ctx, p, size, align);
}

static void recycle_stats(void *ctx, ex_alloc_stats *out) {
    ex_recycling_allocator *r = ctx;
    pthread_mutex_lock(&r->mu);
    uint64_t a = r->retired_allocations, f = r->retired_frees, b = r->retired_bytes;
    for (tcache *t = r->caches; t; t = t->next) {
        a += exi_load_rlx_u64(&t->allocations);
        f += exi_load_rlx_u64(&t->frees);
        b += exi_load_rlx_u64(&t->bytes);
    }
    pthread_mutex_unlock(&r->mu);
    out->allocations = a;
    out->frees = f;
    out->failures = exi_load_rlx_u64(&r->failures);
    out->bytes_in_use = b;
    out->peak_bytes = exi_load_rlx_u64(&r->peak_held);
}

ex_error ex_recycling_allocator_create(const ex_allocator *under, ex_recycling_allocator **out) {
    if (!out) return ex_err(EX_EINVAL, "ex_recycling_allocator_create: out is NULL");
    *out = NULL;
    if (!under) under = ex_libc_allocator();
    ex_recycling_allocator *r = under->allocate(under->ctx, sizeof *r, alignof(ex_recycling_allocator));
    if (!r) return ex_err(EX_ENOMEM, "ex_recycling_allocator_create: out of memory");
    memset(r, 0, sizeof *r);
    r->under = under;
    r->id = exi_faa_u64(&next_id, 1);
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

void ex_recycling_allocator_destroy(ex_recycling_allocator *r) {
    if (!r) return;
    if (last.id == r->id) {
        last.id = 0;
        last.t = NULL;
    }
    /* Threads that exit later find no key: their destructor does not run. */
    pthread_key_delete(r->key);
    pthread_mutex_lock(&r->mu);
    while (r->caches) retire_locked(r, r->caches);
    pthread_mutex_unlock(&r->mu);
    pthread_mutex_destroy(&r->mu);
    for (unsigned c = 0; c < NCLASSES; c++) {
        for (rblock *batch = r->depot[c].batches, *nb; batch; batch = nb) {
            nb = batch->next_batch;
            for (rblock *b = batch, *next; b; b = next) {
                next = b->next;
                under_free(r, b, class_size(c));
            }
        }
        pthread_mutex_destroy(&r->depot[c].mu);
    }
    const ex_allocator *under = r->under;
    under->deallocate(under->ctx, r, sizeof *r, alignof(ex_recycling_allocator));
}
