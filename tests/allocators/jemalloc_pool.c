/* SPDX-License-Identifier: MIT */
/* Pools with per-worker jemalloc arenas (EX_POOL_FRAMES_ARENAS, the
 * default): which arena owns a worker's blocks, worker indexes as slots,
 * the pool's work allocating from its arenas, and an explicit pool
 * allocator winning over them (suite jemalloc_allocator, declared in
 * jemalloc.c). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocators/jemalloc_fixtures.h"

/* ============================================= arena ownership on a pool */

#define OWN_ROUNDS 40

#ifndef JE_SANITIZED
enum { PH_ALLOC, PH_FREE_NEIGHBOUR, PH_FREE_OWN };

typedef struct own_ctx {
    const ex_allocator *a;
    unsigned n;
    int phase;
    int round;
    thread_errors *errs;
    void *blocks[MAX_GANG][OWN_K];
    unsigned arena[MAX_GANG];        /* arena of the worker's first block */
    unsigned foreign[MAX_GANG];      /* new blocks of worker i from another arena */
} own_ctx;


static void own_free(own_ctx *c, unsigned owner) {
    for (int k = 0; k < OWN_K; k++) {
        void *p = c->blocks[owner][k];
        if (!p) continue;
        if (first_bad(p, own_size(k), own_seed(owner, c->round, k)) != own_size(k))
            terr_record(c->errs, "pattern changed before the free (owner, block)", (long)owner, k);
        ex_deallocate(c->a, p, own_size(k), own_align(k));
        c->blocks[owner][k] = NULL;
    }
}

static void own_step(void *v, unsigned w) {
    own_ctx *c = v;
    switch (c->phase) {
    case PH_ALLOC:
        for (int k = 0; k < OWN_K; k++) {
            void *p = ex_allocate(c->a, own_size(k), own_align(k));
            if (!p) {
                terr_record(c->errs, "allocation failed (worker, block)", (long)w, k);
                continue;
            }
            if (!aligned_to(p, own_align(k))) terr_record(c->errs, "misaligned (worker, block)", (long)w, k);
            fill(p, own_size(k), own_seed(w, c->round, k));
            c->blocks[w][k] = p;
            unsigned ar = arena_of(p);
            if (ar == NO_ARENA) terr_record(c->errs, "arenas.lookup failed (worker, block)", (long)w, k);
            if (c->round == 0 && k == 0) c->arena[w] = ar;
            else if (ar != c->arena[w]) c->foreign[w]++;
        }
        break;
    case PH_FREE_NEIGHBOUR: /* blocks of worker w+1 freed on worker w */
        own_free(c, (w + 1) % c->n);
        break;
    case PH_FREE_OWN:
        own_free(c, w);
        break;
    }
}

typedef struct slot_probe {
    const ex_allocator *a;
    unsigned arena;
} slot_probe;

static void *slot_probe_thread(void *v) {
    slot_probe *s = v;
    void *p = ex_allocate(s->a, 64, 16);
    if (p) {
        s->arena = arena_of(p);
        ex_deallocate(s->a, p, 64, 16);
    }
    return NULL;
}

static void ownership_on_pool(unsigned workers) {
    SKIP_UNLESS_ARENAS_OBSERVABLE();
    ex_pool *p = alloc_pool(workers, true, NULL);
    static own_ctx c;
    memset(&c, 0, sizeof c);
    thread_errors errs;
    terr_init(&errs);
    c.a = pool_frame_allocator(p);
    cr_assert_not_null(c.a);
    cr_assert_str_eq(c.a->name, "jemalloc", "EX_POOL_FRAMES_ARENAS makes the pool's work allocate from jemalloc arenas");
    c.n = workers;
    c.errs = &errs;
    for (c.round = 0; c.round < OWN_ROUNDS; c.round++) {
        c.phase = PH_ALLOC;
        on_each_worker(p, own_step, &c);
        if (c.round == 0) {
            unsigned auto_arenas = mallctl_unsigned("opt.narenas");
            for (unsigned w = 0; w < workers; w++) {
                cr_assert_neq(c.arena[w], NO_ARENA);
                cr_expect_geq(c.arena[w], auto_arenas, "worker %u allocates from an explicit arena, not automatic %u",
                              w, c.arena[w]);
                for (unsigned u = w + 1; u < workers; u++)
                    cr_expect_neq(c.arena[w], c.arena[u], "workers %u and %u allocate from different arenas", w, u);
            }
        }
        if (c.round % 4 == 3) {
            /* freed on the test thread (which has a slot of its own) */
            for (unsigned w = 0; w < workers; w++) own_free(&c, w);
        } else {
            c.phase = PH_FREE_NEIGHBOUR;
            on_each_worker(p, own_step, &c);
        }
    }
    /* Non-worker threads take slots in turn from 0: the test thread (first
     * used above to free) has slot 0, worker 0's arena; the next newcomer
     * slot 1, worker 1's arena.  So worker i's arena is slot i's. */
    void *mine = ex_allocate(c.a, 64, 16);
    cr_assert_not_null(mine);
    cr_expect_eq(arena_of(mine), c.arena[0], "the test thread's slot 0 is worker 0's arena (%u, worker 0: %u)",
                 arena_of(mine), c.arena[0]);
    ex_deallocate(c.a, mine, 64, 16);
    slot_probe probe = { c.a, NO_ARENA };
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, slot_probe_thread, &probe), 0);
    cr_assert_eq(pthread_join(th, NULL), 0);
    cr_expect_eq(probe.arena, c.arena[1], "the next thread's slot 1 is worker 1's arena (%u, worker 1: %u)",
                 probe.arena, c.arena[1]);
    terr_check(&errs, "ownership");
    for (unsigned w = 0; w < workers; w++)
        cr_expect_eq(c.foreign[w], 0u,
                     "worker %u: %u of its %d new blocks came from another arena after blocks of other workers were "
                     "freed on it (a block must return to its own arena)",
                     w, c.foreign[w], OWN_ROUNDS * OWN_K - 1);
    ex_alloc_stats s = stats_of(c.a);
    cr_expect_eq(s.allocations, (uint64_t)workers * OWN_ROUNDS * OWN_K + 2);
    cr_expect_eq(s.frees, s.allocations);
    cr_expect_eq(s.bytes_in_use, 0u);
    cr_expect_eq(s.failures, 0u);
    test_pool_free(p);
    expect_no_leaks();
}
#else
static void ownership_on_pool(unsigned workers) {
    (void)workers;
    SKIP_UNLESS_ARENAS_OBSERVABLE();
}
#endif

Test(jemalloc_allocator, arena_ownership_two_workers) { ownership_on_pool(2); }
Test(jemalloc_allocator, arena_ownership_four_workers) { ownership_on_pool(4); }

/* The pool's worker index is also the slot of a standalone allocator
 * (modulo its arenas). */
typedef struct slot_ctx {
    const ex_allocator *a;
    thread_errors *errs;
    unsigned arena[MAX_GANG];
} slot_ctx;

static void slot_step(void *v, unsigned w) {
    slot_ctx *c = v;
    void *b[8];
    for (int k = 0; k < 8; k++) {
        b[k] = ex_allocate(c->a, 128, 16);
        if (!b[k]) {
            terr_record(c->errs, "allocation failed", (long)w, k);
            return;
        }
        fill(b[k], 128, w);
    }
#ifndef JE_SANITIZED
    if (arenas_observable()) {
        c->arena[w] = arena_of(b[0]);
        for (int k = 1; k < 8; k++)
            if (arena_of(b[k]) != c->arena[w]) terr_record(c->errs, "blocks of one worker in two arenas", (long)w, k);
    }
#endif
    for (int k = 0; k < 8; k++) {
        if (first_bad(b[k], 128, w) != 128) terr_record(c->errs, "pattern changed", (long)w, k);
        ex_deallocate(c->a, b[k], 128, 16);
    }
}

Test(jemalloc_allocator, standalone_allocator_on_pool_workers_uses_worker_index_slots) {
    ex_jemalloc_allocator *j = make_je(2);
    ex_pool *p = alloc_pool(4, false, NULL);
    thread_errors errs;
    terr_init(&errs);
    slot_ctx c;
    memset(&c, 0, sizeof c);
    c.a = ex_jemalloc_allocator_get(j);
    c.errs = &errs;
    on_each_worker(p, slot_step, &c);
    terr_check(&errs, "worker slots");
#ifndef JE_SANITIZED
    if (arenas_observable()) {
        cr_expect_eq(c.arena[0], c.arena[2], "workers 0 and 2: slot 0");
        cr_expect_eq(c.arena[1], c.arena[3], "workers 1 and 3: slot 1");
        cr_expect_neq(c.arena[0], c.arena[1], "slots 0 and 1 are different arenas");
    }
#endif
    test_pool_free(p); /* the workers exit: their records are retired */
    ex_alloc_stats s = stats_of(c.a);
    cr_expect_eq(s.allocations, 32u);
    cr_expect_eq(s.frees, 32u);
    cr_expect_eq(s.bytes_in_use, 0u);
    ex_jemalloc_allocator_destroy(j);
    expect_no_leaks();
}

/* ====================================== pool work allocates from its arenas */

#define LET_RUNS 40

/* Runs LET_RUNS pipelines of two let_values on p; returns how many
 * allocations the default (test) allocator saw meanwhile. */
static long run_lets(ex_pool *p) {
    ex_scheduler sch = ex_pool_scheduler(p);
    long before = test_alloc_count();
    for (int i = 0; i < LET_RUNS; i++) {
        ex_sender *s = ex_let_value(ex_just(ex_int(i)), let_plus3, NULL, EX_SIG(EX_T_INT));
        s = ex_let_value(s, let_plus1, NULL, EX_SIG(EX_T_INT));
        ex_result r = ex_sync_wait(ex_starts_on(sch, s));
        expect_value_int(&r, i + 4);
        ex_result_destroy(&r);
    }
    return test_alloc_count() - before;
}

Test(jemalloc_allocator, let_value_on_per_worker_arena_pool_allocates_from_the_arenas) {
    ex_pool *plain = alloc_pool(2, false, NULL);
    cr_expect_eq(pool_frame_allocator(plain), &test_allocator, "a plain pool's work uses the process default");
    long on_plain = run_lets(plain);
    test_pool_free(plain);

    ex_pool *arenas = alloc_pool(2, true, NULL);
    const ex_allocator *a = pool_frame_allocator(arenas);
    cr_assert_not_null(a);
    cr_expect_neq(a, &test_allocator);
    cr_expect_str_eq(a->name, "jemalloc");
    long on_arenas = run_lets(arenas);
    ex_alloc_stats s = stats_of(a);
    cr_expect_eq(s.allocations, (uint64_t)(2 * LET_RUNS), "the two inner operations of each run came from the arenas");
    cr_expect_eq(s.frees, s.allocations);
    cr_expect_eq(s.bytes_in_use, 0u);
    cr_expect_eq(on_plain - on_arenas, 2 * LET_RUNS,
                 "the inner operations are not in the default allocator's count (plain pool %ld, arena pool %ld)",
                 on_plain, on_arenas);
    test_pool_free(arenas);
    expect_no_leaks();
}

#define BULK_SHAPE 1000
#define BULK_RUNS 10

static long run_bulks(ex_pool *p, atomic_uint *hits) {
    long before = test_alloc_count();
    for (int k = 0; k < BULK_RUNS; k++) {
        for (int i = 0; i < BULK_SHAPE; i++) atomic_init(&hits[i], 0);
        ex_sender *s = ex_bulk(ex_just(ex_int(5)), EX_PAR, BULK_SHAPE, bulk_count, hits);
        ex_result r = ex_sync_wait(ex_starts_on(ex_pool_scheduler(p), s));
        expect_value_int(&r, 5);
        ex_result_destroy(&r);
        for (int i = 0; i < BULK_SHAPE; i++) cr_assert_eq(atomic_load(&hits[i]), 1u, "run %d: index %d ran once", k, i);
    }
    return test_alloc_count() - before;
}

Test(jemalloc_allocator, bulk_on_per_worker_arena_pool_allocates_helpers_from_the_arenas) {
    static atomic_uint hits[BULK_SHAPE];
    /* 6 workers: 5 helpers, more than EX_BULK_INLINE_HELPERS: one allocation per run */
    ex_pool *plain = alloc_pool(6, false, NULL);
    long on_plain = run_bulks(plain, hits);
    test_pool_free(plain);

    ex_pool *arenas = alloc_pool(6, true, NULL);
    const ex_allocator *a = pool_frame_allocator(arenas);
    cr_assert_str_eq(a->name, "jemalloc");
    long on_arenas = run_bulks(arenas, hits);
    ex_alloc_stats s = stats_of(a);
    cr_expect_eq(s.allocations, (uint64_t)BULK_RUNS, "the helper items of each run came from the arenas (%llu)",
                 (unsigned long long)s.allocations);
    cr_expect_eq(s.frees, s.allocations);
    cr_expect_eq(s.bytes_in_use, 0u);
    cr_expect_eq(on_plain - on_arenas, BULK_RUNS,
                 "the helpers are not in the default allocator's count (plain pool %ld, arena pool %ld)", on_plain,
                 on_arenas);
    test_pool_free(arenas);
    expect_no_leaks();
}

/* ---- an explicit allocator wins over the arenas */

Test(jemalloc_allocator, explicit_pool_allocator_wins_over_the_arenas) {
    cnt_alloc x;
    cnt_alloc_init_over(&x, NULL, "counted");
#ifndef JE_SANITIZED
    unsigned narenas_before = arenas_observable() ? mallctl_unsigned("arenas.narenas") : 0;
#endif
    ex_pool *p = alloc_pool(3, true, &x.base);
#ifndef JE_SANITIZED
    if (arenas_observable())
        cr_expect_eq(mallctl_unsigned("arenas.narenas"), narenas_before, "no arena was created for the pool");
#endif
    cr_expect_eq(pool_frame_allocator(p), &x.base, "the configured allocator is the pool's");
    long on_default = run_lets(p);
    cr_expect_eq(atomic_load(&x.allocs), 2 * LET_RUNS, "the inner operations came from the configured allocator (%ld)",
                 atomic_load(&x.allocs));
    cr_expect_eq(atomic_load(&x.in_use), 0);
    cr_expect_gt(on_default, 0, "the senders still come from the default allocator");
    test_pool_free(p);
    cr_expect_eq(atomic_load(&x.allocs), 2 * LET_RUNS, "creating and destroying the pool did not use it");
    expect_no_leaks();
}

/* A pool created without a config, or with a zeroed one, gives its work
 * per-worker jemalloc arenas; EX_POOL_FRAMES_PROCESS opts out. */
Test(jemalloc_allocator, pools_default_to_per_worker_arenas) {
    ex_pool *p = NULL;
    cr_assert_eq(ex_pool_create(NULL, &p).code, 0);
    const ex_allocator *a = pool_frame_allocator(p);
    cr_assert_not_null(a);
    cr_expect_str_eq(a->name, "jemalloc", "a pool made with a NULL config allocates frames from its arenas");
    long on_default = run_lets(p);
    ex_alloc_stats st = stats_of(a);
    cr_expect_geq(st.allocations, (uint64_t)(2 * LET_RUNS), "the let operations came from the arenas (%llu)",
                  (unsigned long long)st.allocations);
    cr_expect_eq(st.bytes_in_use, 0u);
    cr_expect_gt(on_default, 0, "the senders still come from the process default");
    test_pool_free(p);

    ex_pool_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.threads = 2;
    cr_assert_eq(ex_pool_create(&cfg, &p).code, 0);
    cr_expect_str_eq(pool_frame_allocator(p)->name, "jemalloc", "a zeroed config means the arenas too");
    test_pool_free(p);

    cfg.frames = EX_POOL_FRAMES_PROCESS;
    cr_assert_eq(ex_pool_create(&cfg, &p).code, 0);
    cr_expect_eq(pool_frame_allocator(p), &test_allocator, "EX_POOL_FRAMES_PROCESS: the process default");
    test_pool_free(p);
    expect_no_leaks();
}

