/* SPDX-License-Identifier: MIT */
/* The jemalloc allocator with many threads handing blocks to each other,
 * and pool blocks freed by plain threads (suite jemalloc_allocator,
 * declared in jemalloc.c). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocators/jemalloc_fixtures.h"

/* ===================================================== many threads */

#define MT_THREADS 8
#define MT_ARENAS 4
#define MT_BLOCKS 3000

typedef struct handed {
    void *p;
    size_t size, align;
    uint32_t seed;
    unsigned arena; /* the producer's arena (NO_ARENA: not observed) */
} handed;

/* Blocks handed from thread i to thread i+1: a ring as large as all a
 * thread will ever receive, so pushing never waits. */
typedef struct mt_queue {
    pthread_mutex_t mu;
    handed items[MT_BLOCKS];
    int head, tail;
} mt_queue;

typedef struct mt_arg {
    const ex_allocator *a;
    int index;
    mt_queue *in, *out;
    atomic_int *go;
    thread_errors *errs;
    unsigned my_arena;
    long foreign; /* own blocks from another arena */
} mt_arg;

static bool mt_pop(mt_queue *q, handed *h) {
    pthread_mutex_lock(&q->mu);
    bool any = q->head != q->tail;
    if (any) *h = q->items[q->head++];
    pthread_mutex_unlock(&q->mu);
    return any;
}

static void mt_check_free(mt_arg *m, const handed *h) {
    size_t bad = first_bad(h->p, h->size, h->seed);
    if (bad != h->size) terr_record(m->errs, "a handed block changed (thread, byte)", m->index, (long)bad);
#ifndef JE_SANITIZED
    if (h->arena != NO_ARENA && arena_of(h->p) != h->arena)
        terr_record(m->errs, "a handed block changed arena (thread, seed)", m->index, (long)h->seed);
#endif
    ex_deallocate(m->a, h->p, h->size, h->align);
}

static void *mt_thread(void *v) {
    mt_arg *m = v;
    uint32_t rng = 0x9e37u + 7919u * (uint32_t)m->index;
    (void)wait_int_reaches(m->go, 1);
    m->my_arena = NO_ARENA;
    int received = 0;
    for (int i = 0; i < MT_BLOCKS; i++) {
        uint32_t r = lcg(&rng);
        size_t size = (r & 31) == 0 ? (size_t)(lcg(&rng) % 300000) : (size_t)(lcg(&rng) % 1500);
        size_t align = (size_t)1 << (lcg(&rng) % N_ALIGNS);
        handed h = { ex_allocate(m->a, size, align), size, align, (uint32_t)(m->index * 1000000 + i), NO_ARENA };
        if (!h.p) {
            terr_record(m->errs, "allocation failed (thread, i)", m->index, i);
            continue;
        }
        if (!aligned_to(h.p, align)) terr_record(m->errs, "misaligned (thread, i)", m->index, i);
        fill(h.p, size, h.seed);
#ifndef JE_SANITIZED
        if (arenas_observable() && lookup_works(size, align)) {
            h.arena = arena_of(h.p);
            if (m->my_arena == NO_ARENA) m->my_arena = h.arena;
            else if (h.arena != m->my_arena) m->foreign++;
        }
#endif
        pthread_mutex_lock(&m->out->mu);
        m->out->items[m->out->tail++] = h;
        pthread_mutex_unlock(&m->out->mu);
        /* take what the previous thread handed over so far */
        handed got;
        while (received < MT_BLOCKS && mt_pop(m->in, &got)) {
            mt_check_free(m, &got);
            received++;
        }
    }
    /* the rest, with a bound */
    double deadline = test_now_s() + ALLOC_WAIT_LIMIT_S;
    while (received < MT_BLOCKS && test_now_s() < deadline) {
        handed got;
        if (mt_pop(m->in, &got)) {
            mt_check_free(m, &got);
            received++;
        } else {
            sched_yield();
        }
    }
    if (received != MT_BLOCKS) terr_record(m->errs, "blocks never arrived (thread, received)", m->index, received);
    return NULL;
}

Test(jemalloc_allocator, many_threads_hand_blocks_to_each_other) {
    ex_jemalloc_allocator *j = make_je(MT_ARENAS);
    const ex_allocator *a = ex_jemalloc_allocator_get(j);
    static mt_queue queues[MT_THREADS];
    mt_arg args[MT_THREADS];
    pthread_t th[MT_THREADS];
    thread_errors errs;
    terr_init(&errs);
    atomic_int go;
    atomic_init(&go, 0);
    for (int i = 0; i < MT_THREADS; i++) {
        pthread_mutex_init(&queues[i].mu, NULL);
        queues[i].head = queues[i].tail = 0;
    }
    for (int i = 0; i < MT_THREADS; i++)
        args[i] = (mt_arg){ a, i, &queues[i], &queues[(i + 1) % MT_THREADS], &go, &errs, NO_ARENA, 0 };
    for (int i = 0; i < MT_THREADS; i++) cr_assert_eq(pthread_create(&th[i], NULL, mt_thread, &args[i]), 0);
    atomic_store(&go, 1);
    for (int i = 0; i < MT_THREADS; i++) cr_assert_eq(pthread_join(th[i], NULL), 0);
    terr_check(&errs, "many threads");
    for (int i = 0; i < MT_THREADS; i++) {
        cr_expect_eq(queues[i].head, queues[i].tail, "queue %d drained", i);
        pthread_mutex_destroy(&queues[i].mu);
    }
    ex_alloc_stats s = stats_of(a);
    cr_expect_eq(s.allocations, (uint64_t)MT_THREADS * MT_BLOCKS);
    cr_expect_eq(s.frees, s.allocations, "allocations %llu, frees %llu", (unsigned long long)s.allocations,
                 (unsigned long long)s.frees);
    cr_expect_eq(s.bytes_in_use, 0u, "bytes in use %lld", (long long)s.bytes_in_use);
    cr_expect_eq(s.failures, 0u);
    cr_expect_gt(s.peak_bytes, 0u);
#ifndef JE_SANITIZED
    if (arenas_observable()) {
        /* fresh allocator, 8 newcomers, 4 arenas: each arena serves two */
        for (int i = 0; i < MT_THREADS; i++) {
            cr_expect_eq(args[i].foreign, 0, "thread %d allocated only from its own arena", i);
            int same = 0;
            for (int k = 0; k < MT_THREADS; k++) same += args[k].my_arena == args[i].my_arena;
            cr_expect_eq(same, MT_THREADS / MT_ARENAS, "thread %d shares its arena with %d thread(s)", i, same - 1);
        }
    }
#endif
    ex_jemalloc_allocator_destroy(j);
    cr_expect_eq(test_alloc_count(), 0);
    expect_no_leaks();
}

/* Blocks allocated on pool workers of a pool with per-worker arenas and freed
 * by plain threads, concurrently (runs in every build). */
typedef struct xfree_ctx {
    const ex_allocator *a;
    thread_errors *errs;
    void *blocks[MAX_GANG][OWN_K];
} xfree_ctx;

static void xfree_alloc(void *v, unsigned w) {
    xfree_ctx *c = v;
    for (int k = 0; k < OWN_K; k++) {
        void *p = ex_allocate(c->a, own_size(k), own_align(k));
        if (!p) {
            terr_record(c->errs, "allocation failed", (long)w, k);
            continue;
        }
        fill(p, own_size(k), own_seed(w, 0, k));
        c->blocks[w][k] = p;
    }
}

typedef struct xfree_arg {
    xfree_ctx *c;
    unsigned owner;
} xfree_arg;

static void *xfree_thread(void *v) {
    xfree_arg *x = v;
    xfree_ctx *c = x->c;
    for (int k = 0; k < OWN_K; k++) {
        void *p = c->blocks[x->owner][k];
        if (!p) continue;
        if (first_bad(p, own_size(k), own_seed(x->owner, 0, k)) != own_size(k))
            terr_record(c->errs, "pattern changed", (long)x->owner, k);
        ex_deallocate(c->a, p, own_size(k), own_align(k));
        c->blocks[x->owner][k] = NULL;
    }
    return NULL;
}

Test(jemalloc_allocator, pool_blocks_freed_by_other_threads) {
    ex_pool *p = alloc_pool(4, true, NULL);
    static xfree_ctx c;
    memset(&c, 0, sizeof c);
    thread_errors errs;
    terr_init(&errs);
    c.a = pool_frame_allocator(p);
    cr_assert_str_eq(c.a->name, "jemalloc");
    c.errs = &errs;
    for (int round = 0; round < 20; round++) {
        on_each_worker(p, xfree_alloc, &c);
        pthread_t th[4];
        xfree_arg args[4];
        for (unsigned w = 0; w < 4; w++) {
            args[w] = (xfree_arg){ &c, w };
            cr_assert_eq(pthread_create(&th[w], NULL, xfree_thread, &args[w]), 0);
        }
        for (int w = 0; w < 4; w++) cr_assert_eq(pthread_join(th[w], NULL), 0);
    }
    terr_check(&errs, "freed by other threads");
    ex_alloc_stats s = stats_of(c.a);
    cr_expect_eq(s.allocations, 20u * 4u * OWN_K);
    cr_expect_eq(s.frees, s.allocations);
    cr_expect_eq(s.bytes_in_use, 0u);
    test_pool_free(p);
    expect_no_leaks();
}
