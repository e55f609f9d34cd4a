/* SPDX-License-Identifier: MIT */
/* The recycling allocator: classes, caches, the depot, failures, blocks
 * freed on other threads, use by a pool (suite frame_allocators, declared
 * in libc_default.c). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "allocators/alloc_fixtures.h"

/* ============================================================ recycling */

Test(frame_allocators, recycling_create_rejects_null_out) {
    ex_error e = ex_recycling_allocator_create(&test_allocator, NULL);
    cr_expect_eq(e.code, EX_EINVAL);
    cr_expect_not_null(e.msg);
    cr_expect_eq(test_stats.allocs, 0, "nothing allocated");
    expect_no_leaks();
}

Test(frame_allocators, recycling_create_fails_cleanly_when_under_fails) {
    ex_fault_allocator f;
    ex_fault_allocator_init(&f, &test_allocator);
    ex_fault_allocator_fail_nth(&f, 1);
    ex_recycling_allocator *r = (ex_recycling_allocator *)&f; /* must be reset */
    ex_error e = ex_recycling_allocator_create(ex_fault_allocator_get(&f), &r);
    cr_expect_eq(e.code, EX_ENOMEM);
    cr_expect_null(r, "*out is NULL on failure");
    expect_no_leaks();
}

Test(frame_allocators, recycling_hands_a_freed_block_out_again) {
    ex_recycling_allocator *r = make_recycling(&test_allocator);
    const ex_allocator *a = ex_recycling_allocator_get(r);
    void *p = ex_allocate(a, 100, 8);
    cr_assert_not_null(p);
    cr_expect(aligned_to(p, 64), "class blocks are 64-byte aligned");
    memset(p, 1, 100);
    long under_allocs = test_stats.allocs, under_frees = test_stats.frees;
    ex_deallocate(a, p, 100, 8);
    cr_expect_eq(test_stats.frees, under_frees, "a freed class block is kept, not given back");
    void *q = ex_allocate(a, 100, 8);
    cr_expect_eq(q, p, "the same block is handed out again");
    ex_deallocate(a, q, 100, 8);
    void *q2 = ex_allocate(a, 128, 64); /* same class (65..128) */
    cr_expect_eq(q2, p, "any size of the same class reuses it");
    memset(q2, 2, 128);
    ex_deallocate(a, q2, 128, 64);
    cr_expect_eq(test_stats.allocs, under_allocs, "reuse does not touch the underlying allocator");

    /* Alignment of class blocks up to 64. */
    for (size_t align = 1; align <= 64; align *= 2) {
        void *x = ex_allocate(a, 24, align);
        cr_assert_not_null(x);
        cr_expect(aligned_to(x, align), "align %zu", align);
        ex_deallocate(a, x, 24, align);
    }
    ex_recycling_allocator_destroy(r);
    cr_expect_eq(test_stats.in_use, 0, "destroy gives every cached block back");
    expect_no_leaks();
}

Test(frame_allocators, recycling_large_or_overaligned_requests_pass_through) {
    ex_recycling_allocator *r = make_recycling(&test_allocator);
    const ex_allocator *a = ex_recycling_allocator_get(r);
    void *warm = ex_allocate(a, 16, 8); /* creates this thread's cache */
    ex_deallocate(a, warm, 16, 8);
    static const size_t cases[][2] = { { EX_RECYCLE_MAX_BLOCK + 1, 8 }, { 100000, 16 }, { 100, 128 }, { 64, 4096 } };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t size = cases[i][0], align = cases[i][1];
        for (int round = 0; round < 2; round++) {
            long allocs = test_stats.allocs, frees = test_stats.frees;
            void *p = ex_allocate(a, size, align);
            cr_assert_not_null(p);
            cr_expect(aligned_to(p, align), "size %zu align %zu", size, align);
            memset(p, 3, size);
            cr_expect_eq(test_stats.allocs - allocs, 1, "size %zu align %zu round %d: straight from the underlying allocator",
                         size, align, round);
            ex_deallocate(a, p, size, align);
            cr_expect_eq(test_stats.frees - frees, 1, "size %zu align %zu: straight back", size, align);
        }
    }
    /* EX_RECYCLE_MAX_BLOCK itself is a class size */
    void *p = ex_allocate(a, EX_RECYCLE_MAX_BLOCK, 64);
    cr_assert_not_null(p);
    ex_deallocate(a, p, EX_RECYCLE_MAX_BLOCK, 64);
    long allocs = test_stats.allocs;
    void *q = ex_allocate(a, EX_RECYCLE_MAX_BLOCK, 64);
    cr_expect_eq(q, p);
    cr_expect_eq(test_stats.allocs, allocs);
    ex_deallocate(a, q, EX_RECYCLE_MAX_BLOCK, 64);
    ex_recycling_allocator_destroy(r);
    expect_no_leaks();
}

Test(frame_allocators, recycling_caches_at_most_max_cached_blocks_per_class) {
    enum { N = EX_RECYCLE_MAX_CACHED + 44 };
    ex_recycling_allocator *r = make_recycling(&test_allocator);
    const ex_allocator *a = ex_recycling_allocator_get(r);
    static void *blocks[N];
    for (int i = 0; i < N; i++) cr_assert_not_null(blocks[i] = ex_allocate(a, 64, 16));
    long frees = test_stats.frees;
    for (int i = 0; i < N; i++) ex_deallocate(a, blocks[i], 64, 16);
    /* Past the bound, half a list moves to the shared depot, which still has
     * room: nothing goes back to the underlying allocator yet. */
    cr_expect_eq(test_stats.frees - frees, 0, "the blocks beyond the cache bound went to the depot, not back");
    long allocs = test_stats.allocs;
    for (int i = 0; i < N; i++) cr_assert_not_null(blocks[i] = ex_allocate(a, 64, 16));
    cr_expect_eq(test_stats.allocs, allocs, "the thread's list and the depot serve the next requests");
    for (int i = 0; i < N; i++) ex_deallocate(a, blocks[i], 64, 16);
    ex_recycling_allocator_destroy(r);
    expect_no_leaks();
}

Test(frame_allocators, recycling_stats_after_balanced_use) {
    ex_recycling_allocator *r = make_recycling(&test_allocator);
    const ex_allocator *a = ex_recycling_allocator_get(r);
    cr_assert_not_null(a->stats);
    static void *blocks[500];
    static size_t sizes[500];
    uint32_t seed = 7;
    uint64_t max_live = 0, live = 0;
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < 500; i++) {
            sizes[i] = 1 + lcg(&seed) % 6000; /* some pass through */
            blocks[i] = ex_allocate(a, sizes[i], 16);
            cr_assert_not_null(blocks[i]);
            live += sizes[i];
        }
        if (live > max_live) max_live = live;
        ex_alloc_stats mid = stats_of(a);
        cr_expect_eq(mid.bytes_in_use, live, "bytes in use are what users hold");
        for (int i = 0; i < 500; i++) ex_deallocate(a, blocks[i], sizes[i], 16);
        live = 0;
    }
    ex_alloc_stats s = stats_of(a);
    cr_expect_eq(s.allocations, 2000u);
    cr_expect_eq(s.frees, 2000u);
    cr_expect_eq(s.bytes_in_use, 0u);
    cr_expect_eq(s.failures, 0u);
    cr_expect_gt(s.peak_bytes, 0u, "peak of memory taken from the underlying allocator");
    ex_recycling_allocator_destroy(r);
    expect_no_leaks();
}

Test(frame_allocators, recycling_returns_null_and_counts_when_under_fails) {
    ex_fault_allocator f;
    ex_fault_allocator_init(&f, &test_allocator);
    ex_recycling_allocator *r = make_recycling(ex_fault_allocator_get(&f));
    const ex_allocator *a = ex_recycling_allocator_get(r);
    void *warm = ex_allocate(a, 16, 8); /* this thread's cache exists from now on */
    cr_assert_not_null(warm);
    ex_deallocate(a, warm, 16, 8);

    ex_fault_allocator_fail_nth(&f, 1);
    cr_expect_null(ex_allocate(a, 1000, 8), "an empty class list goes to the underlying allocator, which fails");
    ex_alloc_stats s = stats_of(a);
    cr_expect_eq(s.failures, 1u);
    ex_fault_allocator_fail_nth(&f, 1);
    cr_expect_null(ex_allocate(a, 10000, 8), "a pass-through request fails too");
    s = stats_of(a);
    cr_expect_eq(s.failures, 2u);
    cr_expect_eq(s.allocations, 1u, "failed requests are not counted as allocations");
    cr_expect_eq(s.bytes_in_use, 0u);
    /* a cached block is still served while the underlying allocator fails */
    ex_fault_allocator_fail_randomly(&f, 1, 1000000);
    void *p = ex_allocate(a, 16, 8);
    cr_expect_eq(p, warm, "the cached block does not need the underlying allocator");
    ex_deallocate(a, p, 16, 8);
    ex_fault_allocator_fail_randomly(&f, 1, 0);
    ex_recycling_allocator_destroy(r);
    ex_alloc_stats fs = stats_of(ex_fault_allocator_get(&f));
    cr_expect_eq(fs.bytes_in_use, 0u, "everything taken from the fault allocator went back");
    expect_no_leaks();
}

/* When the allocation of a thread's cache fails, the request must still be
 * answered consistently: NULL (and a failure counted), or a block that can
 * later be freed and reused without breaking anything (its real size, the
 * counters). */
typedef struct cachefail_arg {
    const ex_allocator *a;
    ex_fault_allocator *f;
    void *p;
    uint64_t p_under_bytes;  /* bytes taken from the underlying allocator for p */
    bool overflow;           /* p came back for a request larger than its block */
} cachefail_arg;

static uint64_t fault_bytes(ex_fault_allocator *f) {
    ex_alloc_stats s;
    memset(&s, 0, sizeof s);
    (void)ex_allocator_stats(ex_fault_allocator_get(f), &s);
    return s.bytes_in_use;
}

static void *cachefail_worker(void *v) {
    cachefail_arg *arg = v;
    /* The first request on a new thread first allocates the thread's cache:
     * make exactly that allocation fail. */
    ex_fault_allocator_fail_nth(arg->f, 1);
    uint64_t before = fault_bytes(arg->f);
    arg->p = ex_allocate(arg->a, 100, 8);
    arg->p_under_bytes = fault_bytes(arg->f) - before;
    if (arg->p) {
        memset(arg->p, 1, 100);
        ex_deallocate(arg->a, arg->p, 100, 8); /* the cache can be created now */
        /* Same size class (65..128). */
        unsigned char *q = ex_allocate(arg->a, 128, 8);
        if (q == arg->p && arg->p_under_bytes < 128) {
            arg->overflow = true; /* writing 128 bytes would overrun the block */
        } else if (q) {
            memset(q, 2, 128);
        }
        if (q) ex_deallocate(arg->a, q, 128, 8);
    }
    return NULL;
}

Test(frame_allocators, recycling_consistent_when_the_thread_cache_cannot_be_allocated) {
    ex_fault_allocator f;
    ex_fault_allocator_init(&f, &test_allocator);
    ex_recycling_allocator *r = make_recycling(ex_fault_allocator_get(&f));
    cachefail_arg arg = { ex_recycling_allocator_get(r), &f, NULL, 0, false };
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, cachefail_worker, &arg), 0);
    cr_assert_eq(pthread_join(th, NULL), 0);
    cr_expect(!arg.overflow,
              "a 100-byte request served with a %llu-byte block from the underlying allocator (the thread's cache could "
              "not be allocated) was cached and handed out again for a 128-byte request: heap buffer overflow",
              (unsigned long long)arg.p_under_bytes);
    ex_alloc_stats s = stats_of(ex_recycling_allocator_get(r));
    if (!arg.p) cr_expect_eq(s.failures, 1u, "a NULL answer counts a failure");
    cr_expect_eq(s.allocations, s.frees, "balanced use gives balanced counters (allocations %llu, frees %llu)",
                 (unsigned long long)s.allocations, (unsigned long long)s.frees);
    cr_expect_eq(s.bytes_in_use, 0u, "bytes in use after balanced use: %llu", (unsigned long long)s.bytes_in_use);
    ex_recycling_allocator_destroy(r);
    ex_alloc_stats fs = stats_of(ex_fault_allocator_get(&f));
    cr_expect_eq(fs.bytes_in_use, 0u, "everything taken from the underlying allocator went back (%llu bytes left)",
                 (unsigned long long)fs.bytes_in_use);
    cr_expect_eq(fs.allocations, fs.frees);
    expect_no_leaks();
}

/* Cross-thread free: allocate on A, free on B, B reuses it. */
typedef struct xthread_arg {
    const ex_allocator *a;
    void *block;
    void *reused;
} xthread_arg;

static void *xthread_alloc(void *v) {
    xthread_arg *x = v;
    x->block = ex_allocate(x->a, 200, 16);
    if (x->block) memset(x->block, 0xAB, 200);
    /* Cached blocks of this thread go back when it exits. */
    void *tmp[8];
    for (int i = 0; i < 8; i++) tmp[i] = ex_allocate(x->a, 48, 16);
    for (int i = 0; i < 8; i++) ex_deallocate(x->a, tmp[i], 48, 16);
    return NULL;
}

static void *xthread_free_reuse(void *v) {
    xthread_arg *x = v;
    ex_deallocate(x->a, x->block, 200, 16);
    x->reused = ex_allocate(x->a, 256, 16);
    if (x->reused) memset(x->reused, 0xCD, 256);
    ex_deallocate(x->a, x->reused, 256, 16);
    return NULL;
}

Test(frame_allocators, recycling_cross_thread_free_is_reused_by_the_freeing_thread) {
    ex_recycling_allocator *r = make_recycling(&test_allocator);
    long base = test_stats.in_use; /* the allocator itself */
    xthread_arg x = { ex_recycling_allocator_get(r), NULL, NULL };
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, xthread_alloc, &x), 0);
    cr_assert_eq(pthread_join(th, NULL), 0);
    cr_assert_not_null(x.block);
    cr_expect_eq(test_stats.in_use, base + 1, "thread A exited: its cache went back, only the live block is held (%ld)",
                 test_stats.in_use - base);
    unsigned char *b = x.block;
    for (int i = 0; i < 200; i++) cr_assert_eq(b[i], 0xAB);
    cr_assert_eq(pthread_create(&th, NULL, xthread_free_reuse, &x), 0);
    cr_assert_eq(pthread_join(th, NULL), 0);
    cr_expect_eq(x.reused, x.block, "B reuses the block A allocated and B freed");
    cr_expect_eq(test_stats.in_use, base, "thread B exited: its cache (with the block) went back");
    ex_alloc_stats s = stats_of(ex_recycling_allocator_get(r));
    cr_expect_eq(s.allocations, 10u);
    cr_expect_eq(s.frees, 10u);
    cr_expect_eq(s.bytes_in_use, 0u, "counters of exited threads are kept");
    ex_recycling_allocator_destroy(r);
    cr_expect_eq(test_stats.in_use, 0);
    expect_no_leaks();
}

/* Producer / consumer: 2 producers allocate and fill blocks, 2 consumers
 * verify, free (cross-thread), allocate their own (reusing those blocks),
 * fill and verify them.  An overlap between two live blocks shows as a
 * broken pattern. */
#define PC_BLOCKS 50000
#define PC_PRODUCERS 2
#define PC_CONSUMERS 2
#define PC_QUEUE 256
#define PC_RING 8

typedef struct pc_queue {
    pthread_mutex_t mu;
    pthread_cond_t not_empty, not_full;
    void *items[PC_QUEUE];
    size_t head, count;
} pc_queue;

typedef struct pc_shared {
    const ex_allocator *a;
    pc_queue q;
    thread_errors errs;
    atomic_long consumed;
} pc_shared;

typedef struct pc_arg {
    pc_shared *sh;
    int id;
    uint32_t seed;
    long reuse_hits;
} pc_arg;

/* Block layout: [size_t size][uint64_t tag] then bytes derived from tag. */
typedef struct pc_hdr {
    size_t size;
    uint64_t tag;
} pc_hdr;

static const size_t pc_sizes[] = { 16, 24, 40, 64, 100, 128, 200, 256, 500, 1000, 2048, 3000, 4096, 5000 };

static void pc_fill(unsigned char *p, size_t size, uint64_t tag) {
    pc_hdr h = { size, tag };
    memcpy(p, &h, sizeof h);
    for (size_t i = sizeof h; i < size; i++) p[i] = (unsigned char)(tag * 131u + i);
}

static bool pc_check(const unsigned char *p, size_t size, uint64_t *tag_out) {
    pc_hdr h;
    memcpy(&h, p, sizeof h);
    if (h.size != size) return false;
    for (size_t i = sizeof h; i < size; i++)
        if (p[i] != (unsigned char)(h.tag * 131u + i)) return false;
    if (tag_out) *tag_out = h.tag;
    return true;
}

static struct timespec pc_deadline(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)ALLOC_WAIT_LIMIT_S;
    return ts;
}

static bool pc_push(pc_shared *sh, void *item) {
    struct timespec dl = pc_deadline();
    pthread_mutex_lock(&sh->q.mu);
    while (sh->q.count == PC_QUEUE)
        if (pthread_cond_timedwait(&sh->q.not_full, &sh->q.mu, &dl)) {
            pthread_mutex_unlock(&sh->q.mu);
            return false;
        }
    sh->q.items[(sh->q.head + sh->q.count) % PC_QUEUE] = item;
    sh->q.count++;
    pthread_cond_signal(&sh->q.not_empty);
    pthread_mutex_unlock(&sh->q.mu);
    return true;
}

static bool pc_pop(pc_shared *sh, void **item) {
    struct timespec dl = pc_deadline();
    pthread_mutex_lock(&sh->q.mu);
    while (sh->q.count == 0)
        if (pthread_cond_timedwait(&sh->q.not_empty, &sh->q.mu, &dl)) {
            pthread_mutex_unlock(&sh->q.mu);
            return false;
        }
    *item = sh->q.items[sh->q.head];
    sh->q.head = (sh->q.head + 1) % PC_QUEUE;
    sh->q.count--;
    pthread_cond_signal(&sh->q.not_full);
    pthread_mutex_unlock(&sh->q.mu);
    return true;
}

static void *pc_producer(void *v) {
    pc_arg *arg = v;
    pc_shared *sh = arg->sh;
    for (long i = 0; i < PC_BLOCKS / PC_PRODUCERS; i++) {
        size_t size = pc_sizes[lcg(&arg->seed) % (sizeof pc_sizes / sizeof pc_sizes[0])];
        unsigned char *p = ex_allocate(sh->a, size, 16);
        if (!p) {
            terr_record(&sh->errs, "producer: allocation failed", arg->id, i);
            break;
        }
        pc_fill(p, size, ((uint64_t)arg->id << 40) | (uint64_t)i);
        if (!pc_push(sh, p)) {
            terr_record(&sh->errs, "producer: queue full for too long", arg->id, i);
            ex_deallocate(sh->a, p, size, 16);
            break;
        }
    }
    return NULL;
}

static void *pc_consumer(void *v) {
    pc_arg *arg = v;
    pc_shared *sh = arg->sh;
    unsigned char *ring[PC_RING] = { 0 };
    size_t ring_size[PC_RING] = { 0 };
    uint64_t ring_tag[PC_RING] = { 0 };
    uint64_t seq = 0;
    for (;;) {
        void *item;
        if (!pc_pop(sh, &item)) {
            terr_record(&sh->errs, "consumer: nothing to consume for too long", arg->id, (long)seq);
            break;
        }
        if (!item) break; /* end marker */
        unsigned char *p = item;
        pc_hdr h;
        memcpy(&h, p, sizeof h);
        bool known = false;
        for (size_t k = 0; k < sizeof pc_sizes / sizeof pc_sizes[0]; k++) known |= pc_sizes[k] == h.size;
        if (!known || !pc_check(p, h.size, NULL)) {
            terr_record(&sh->errs, "consumer: a producer's block was overwritten", arg->id, (long)h.size);
            continue; /* do not free a block whose size is unknown */
        }
        size_t size = h.size;
        ex_deallocate(sh->a, p, size, 16); /* cross-thread free */
        atomic_fetch_add(&sh->consumed, 1);
        /* Allocate one of our own of the same size (often the block just freed). */
        unsigned k = (unsigned)(seq % PC_RING);
        if (ring[k]) {
            uint64_t tag;
            if (!pc_check(ring[k], ring_size[k], &tag) || tag != ring_tag[k])
                terr_record(&sh->errs, "consumer: its own block was overwritten", arg->id, (long)ring_size[k]);
            ex_deallocate(sh->a, ring[k], ring_size[k], 16);
            ring[k] = NULL;
        }
        unsigned char *mine = ex_allocate(sh->a, size, 16);
        if (!mine) {
            terr_record(&sh->errs, "consumer: allocation failed", arg->id, (long)seq);
            break;
        }
        if (mine == p) arg->reuse_hits++;
        ring_tag[k] = ((uint64_t)(100 + arg->id) << 40) | seq;
        ring_size[k] = size;
        pc_fill(mine, size, ring_tag[k]);
        ring[k] = mine;
        seq++;
    }
    for (unsigned k = 0; k < PC_RING; k++)
        if (ring[k]) {
            uint64_t tag;
            if (!pc_check(ring[k], ring_size[k], &tag) || tag != ring_tag[k])
                terr_record(&sh->errs, "consumer: its own block was overwritten (end)", arg->id, (long)ring_size[k]);
            ex_deallocate(sh->a, ring[k], ring_size[k], 16);
        }
    return NULL;
}

Test(frame_allocators, recycling_producer_consumer_blocks_never_overlap) {
    ex_recycling_allocator *r = make_recycling(&test_allocator);
    long base = test_stats.in_use;
    static pc_shared sh;
    memset(&sh, 0, sizeof sh);
    sh.a = ex_recycling_allocator_get(r);
    pthread_mutex_init(&sh.q.mu, NULL);
    pthread_cond_init(&sh.q.not_empty, NULL);
    pthread_cond_init(&sh.q.not_full, NULL);
    terr_init(&sh.errs);
    atomic_init(&sh.consumed, 0);
    pc_arg prod[PC_PRODUCERS], cons[PC_CONSUMERS];
    pthread_t pt[PC_PRODUCERS], ct[PC_CONSUMERS];
    for (int i = 0; i < PC_PRODUCERS; i++) prod[i] = (pc_arg){ &sh, i, 11u + (uint32_t)i * 7919u, 0 };
    for (int i = 0; i < PC_CONSUMERS; i++) cons[i] = (pc_arg){ &sh, i, 0, 0 };
    start_threads(ct, PC_CONSUMERS, pc_consumer, cons, sizeof cons[0]);
    start_threads(pt, PC_PRODUCERS, pc_producer, prod, sizeof prod[0]);
    join_threads(pt, PC_PRODUCERS);
    for (int i = 0; i < PC_CONSUMERS; i++) cr_assert(pc_push(&sh, NULL), "end marker");
    join_threads(ct, PC_CONSUMERS);
    terr_check(&sh.errs, "producer/consumer");
    cr_expect_eq(atomic_load(&sh.consumed), PC_BLOCKS, "every block was consumed");
    for (int i = 0; i < PC_CONSUMERS; i++)
        cr_expect_gt(cons[i].reuse_hits, 0, "consumer %d reused blocks freed across threads", i);
    /* Exited threads returned their lists; what remains is the shared
     * depot's, bounded by 64 batches of half a list per size class. */
    cr_expect_leq(test_stats.in_use - base, 9L * 64 * (EX_RECYCLE_MAX_CACHED / 2),
                  "the threads exited; %ld blocks are still held, more than the depot may keep", test_stats.in_use - base);
    ex_alloc_stats s = stats_of(sh.a);
    cr_expect_eq(s.allocations, s.frees, "allocations %llu, frees %llu", (unsigned long long)s.allocations,
                 (unsigned long long)s.frees);
    cr_expect_eq(s.allocations, (uint64_t)(2 * PC_BLOCKS));
    cr_expect_eq(s.bytes_in_use, 0u);
    cr_expect_gt(s.peak_bytes, 0u);
    cr_expect_eq(s.failures, 0u);
    ex_recycling_allocator_destroy(r);
    cr_expect_eq(test_stats.in_use, 0, "destroy frees the rest");
    pthread_cond_destroy(&sh.q.not_empty);
    pthread_cond_destroy(&sh.q.not_full);
    pthread_mutex_destroy(&sh.q.mu);
    expect_no_leaks();
}

Test(frame_allocators, recycling_as_pool_allocator_returns_worker_caches) {
    ex_recycling_allocator *r = make_recycling(&test_allocator);
    ex_pool *p = alloc_pool(3, false, ex_recycling_allocator_get(r));
    ex_scheduler sch = ex_pool_scheduler(p);
    for (int i = 0; i < 50; i++) {
        ex_sender *s = ex_let_value(ex_just(ex_int(i)), let_plus3, NULL, EX_SIG(EX_T_INT));
        s = ex_let_value(s, let_plus1, NULL, EX_SIG(EX_T_INT));
        ex_result res = ex_sync_wait(ex_starts_on(sch, s));
        expect_value_int(&res, i + 4);
        ex_result_destroy(&res);
    }
    ex_alloc_stats s = stats_of(ex_recycling_allocator_get(r));
    cr_expect_geq(s.allocations, 100u, "the pool's work allocated its inner operations from the recycling allocator");
    cr_expect_eq(s.allocations, s.frees);
    test_pool_free(p);
    ex_recycling_allocator_destroy(r);
    expect_no_leaks();
}

Test(frame_allocators, recycling_allocators_created_one_after_another) {
    for (int i = 0; i < 20; i++) {
        ex_recycling_allocator *r = make_recycling(&test_allocator);
        const ex_allocator *a = ex_recycling_allocator_get(r);
        void *p = ex_allocate(a, 32, 8);
        cr_assert_not_null(p);
        memset(p, i, 32);
        ex_deallocate(a, p, 32, 8);
        ex_alloc_stats s = stats_of(a);
        cr_expect_eq(s.allocations, 1u, "round %d: a new allocator starts from zero", i);
        ex_recycling_allocator_destroy(r);
        cr_expect_eq(test_stats.in_use, 0, "round %d", i);
    }
    ex_recycling_allocator_destroy(NULL); /* NULL-safe */
    expect_no_leaks();
}

