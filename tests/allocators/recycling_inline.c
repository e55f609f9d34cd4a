/* SPDX-License-Identifier: MIT */
/* The recycling allocator's inline entry points (ex_recycling_allocate /
 * ex_recycling_deallocate): the same blocks, counters and cross-thread
 * rules as the ex_allocator interface, whichever of the two allocates and
 * whichever frees; requests outside the classes, NULL, a second allocator
 * on the same thread and exiting threads take the ordinary path. */
#include <pthread.h>
#include <stdint.h>

#include "allocators/alloc_fixtures.h"

TEST_SUITE(recycling_inline, 60);

/* Its statistics, asserting it keeps them. */
static ex_alloc_stats stats(ex_recycling_allocator *r) { return stats_of(ex_recycling_allocator_get(r)); }

Test(recycling_inline, a_freed_block_comes_back_through_either_entry) {
    ex_recycling_allocator *r = make_recycling(&test_allocator);
    const ex_allocator *a = ex_recycling_allocator_get(r);
    void *p = ex_recycling_allocate(r, 200, 16);
    cr_assert_not_null(p);
    cr_expect(aligned_to(p, 64));
    memset(p, 1, 200);
    long under = test_stats.allocs;
    ex_recycling_deallocate(r, p, 200, 16);
    cr_expect_eq(ex_recycling_allocate(r, 256, 64), p, "same class, inline both ways");
    ex_deallocate(a, p, 256, 64);
    cr_expect_eq(ex_recycling_allocate(r, 129, 8), p, "freed through the interface, taken inline");
    ex_recycling_deallocate(r, p, 129, 8);
    cr_expect_eq(ex_allocate(a, 150, 16), p, "freed inline, taken through the interface");
    ex_recycling_deallocate(r, p, 150, 16);
    cr_expect_eq(test_stats.allocs, under, "reuse never reaches the underlying allocator");
    ex_alloc_stats s = stats(r);
    cr_expect_eq(s.allocations, 4u);
    cr_expect_eq(s.frees, 4u);
    cr_expect_eq(s.bytes_in_use, 0u);
    ex_recycling_allocator_destroy(r);
    cr_expect_eq(test_stats.in_use, 0, "destroy gives back the block waiting in front");
    expect_no_leaks();
}

/* In a build that does not poison cached blocks the inline entry points
 * must actually serve this thread (the allocator's fast id is its id, and
 * the thread's last cache is this allocator's); in ASan and valgrind builds
 * they must never (fast id UINT64_MAX). */
#if defined(__SANITIZE_ADDRESS__) || defined(CEXEC_JEMALLOC_VIA_MALLOC)
#define POISONING_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define POISONING_BUILD 1
#endif
#endif

Test(recycling_inline, the_inline_path_serves_this_thread_unless_blocks_are_poisoned) {
    ex_recycling_allocator *r = make_recycling(&test_allocator);
    void *p = ex_recycling_allocate(r, 64, 16);
    cr_assert_not_null(p);
    ex_recycling_deallocate(r, p, 64, 16);
#ifdef POISONING_BUILD
    /* valgrind builds poison only where memcheck.h exists: either id is right */
    cr_expect(exi_recycle_fast_id(r) == UINT64_MAX || exi_recycle_last.id == exi_recycle_fast_id(r));
#else
    cr_expect_neq(exi_recycle_fast_id(r), UINT64_MAX, "a plain build takes the inline path");
    cr_expect_eq(exi_recycle_last.id, exi_recycle_fast_id(r), "this thread's last cache is r's");
    cr_expect_eq(exi_recycle_last.front->hot[exi_recycle_class(64)], p, "the freed block waits in front");
#endif
    ex_recycling_allocator_destroy(r);
    expect_no_leaks();
}

Test(recycling_inline, bytes_in_use_are_the_bytes_requested) {
    ex_recycling_allocator *r = make_recycling(&test_allocator);
    void *p = ex_recycling_allocate(r, 100, 16), *q = ex_recycling_allocate(r, 3000, 16);
    cr_assert(p && q);
    cr_expect_eq(stats(r).bytes_in_use, 3100u);
    ex_recycling_deallocate(r, p, 100, 16);
    cr_expect_eq(stats(r).bytes_in_use, 3000u);
    void *p2 = ex_recycling_allocate(r, 70, 16);  /* the 128-byte block again */
    cr_expect_eq(p2, p);
    cr_expect_eq(stats(r).bytes_in_use, 3070u);
    ex_recycling_deallocate(r, p2, 70, 16);
    ex_recycling_deallocate(r, q, 3000, 16);
    cr_expect_eq(stats(r).bytes_in_use, 0u);
    ex_recycling_allocator_destroy(r);
    expect_no_leaks();
}

Test(recycling_inline, requests_outside_the_classes_pass_through) {
    ex_recycling_allocator *r = make_recycling(&test_allocator);
    ex_recycling_deallocate(r, ex_recycling_allocate(r, 64, 16), 64, 16);  /* this thread's cache exists */
    static const size_t cases[][2] = { { EX_RECYCLE_MAX_BLOCK + 1, 16 }, { 64, 128 }, { 50000, 8 } };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t size = cases[i][0], align = cases[i][1];
        long allocs = test_stats.allocs, frees = test_stats.frees;
        void *p = ex_recycling_allocate(r, size, align);
        cr_assert_not_null(p);
        cr_expect(aligned_to(p, align), "size %zu align %zu", size, align);
        memset(p, 2, size);
        cr_expect_eq(test_stats.allocs - allocs, 1, "size %zu align %zu: from the underlying allocator", size, align);
        ex_recycling_deallocate(r, p, size, align);
        cr_expect_eq(test_stats.frees - frees, 1, "size %zu align %zu: straight back", size, align);
    }
    ex_recycling_deallocate(r, NULL, 64, 16);  /* ignored, like ex_deallocate */
    ex_alloc_stats s = stats(r);
    cr_expect_eq(s.allocations, 4u);
    cr_expect_eq(s.frees, 4u, "freeing NULL counts nothing");
    ex_recycling_allocator_destroy(r);
    expect_no_leaks();
}

Test(recycling_inline, two_allocators_on_one_thread_keep_their_blocks_apart) {
    ex_recycling_allocator *r1 = make_recycling(&test_allocator), *r2 = make_recycling(&test_allocator);
    void *p1 = ex_recycling_allocate(r1, 96, 16);
    void *p2 = ex_recycling_allocate(r2, 96, 16);  /* the thread's last cache is now r2's */
    cr_assert(p1 && p2 && p1 != p2);
    ex_recycling_deallocate(r1, p1, 96, 16);       /* must land in r1's cache, not r2's */
    void *q2 = ex_recycling_allocate(r2, 96, 16);
    cr_expect_neq(q2, p1, "r2 never hands out a block of r1");
    void *q1 = ex_recycling_allocate(r1, 96, 16);
    cr_expect_eq(q1, p1, "r1 hands its own block out again");
    ex_recycling_deallocate(r1, q1, 96, 16);
    ex_recycling_deallocate(r2, q2, 96, 16);
    ex_recycling_deallocate(r2, p2, 96, 16);
    cr_expect_eq(stats(r1).bytes_in_use, 0u);
    cr_expect_eq(stats(r2).bytes_in_use, 0u);
    ex_recycling_allocator_destroy(r1);
    /* r1's id is never reused: a later allocator is not mistaken for it. */
    ex_recycling_allocator *r3 = make_recycling(&test_allocator);
    void *p3 = ex_recycling_allocate(r3, 96, 16);
    cr_assert_not_null(p3);
    ex_recycling_deallocate(r3, p3, 96, 16);
    ex_recycling_allocator_destroy(r3);
    ex_recycling_allocator_destroy(r2);
    cr_expect_eq(test_stats.in_use, 0);
    expect_no_leaks();
}

/* Threads hand each other blocks through a ring: every block is filled by
 * its allocating thread with a pattern naming it, checked and freed by the
 * other thread, which then allocates its own (reusing those blocks).  Two
 * live blocks that shared memory would break a pattern; the counters must
 * balance and every block must come back when the threads are gone. */
enum { RING = 64, ROUNDS = 20000, BLOCK = 160 };

typedef struct ring {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned char *slot[RING];
    unsigned head, tail;
} ring;

typedef struct peer {
    ex_recycling_allocator *r;
    ring *in, *out;
    unsigned char tag;
    long bad;
} peer;

static void ring_put(ring *q, unsigned char *b) {
    pthread_mutex_lock(&q->mu);
    while (q->tail - q->head == RING) pthread_cond_wait(&q->cv, &q->mu);
    q->slot[q->tail++ % RING] = b;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

static unsigned char *ring_get(ring *q) {
    pthread_mutex_lock(&q->mu);
    while (q->tail == q->head) pthread_cond_wait(&q->cv, &q->mu);
    unsigned char *b = q->slot[q->head++ % RING];
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    return b;
}

static void *peer_main(void *arg) {
    peer *p = arg;
    for (int i = 0; i < ROUNDS; i++) {
        unsigned char *b = ex_recycling_allocate(p->r, BLOCK, 16);
        if (!b) {
            p->bad++;
            continue;
        }
        memset(b, p->tag, BLOCK);
        ring_put(p->out, b);
        unsigned char *theirs = ring_get(p->in);
        for (int k = 0; k < BLOCK; k++)
            if (theirs[k] == p->tag || theirs[k] == 0) {
                p->bad++;
                break;
            }
        ex_recycling_deallocate(p->r, theirs, BLOCK, 16);  /* freed on the other thread */
    }
    return NULL;
}

Test(recycling_inline, blocks_passed_between_threads_never_overlap) {
    ex_recycling_allocator *r = make_recycling(&test_allocator);
    ring a = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, { 0 }, 0, 0 };
    ring b = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, { 0 }, 0, 0 };
    peer p1 = { r, &a, &b, 0x11, 0 }, p2 = { r, &b, &a, 0x22, 0 };
    pthread_t t1, t2;
    cr_assert_eq(pthread_create(&t1, NULL, peer_main, &p1), 0);
    cr_assert_eq(pthread_create(&t2, NULL, peer_main, &p2), 0);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    cr_expect_eq(p1.bad + p2.bad, 0, "a block was shared or lost (%ld, %ld)", p1.bad, p2.bad);
    ex_alloc_stats s = stats(r);
    cr_expect_eq(s.allocations, 2u * ROUNDS);
    cr_expect_eq(s.frees, 2u * ROUNDS);
    cr_expect_eq(s.bytes_in_use, 0u, "counters of exited threads are kept");
    ex_recycling_allocator_destroy(r);
    cr_expect_eq(test_stats.in_use, 0, "the exited threads' caches and the depot went back");
    expect_no_leaks();
}
