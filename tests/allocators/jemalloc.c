/* SPDX-License-Identifier: MIT */
/* The jemalloc frame allocator (cexec/allocators.h, "jemalloc"): argument
 * checks, creating and destroying many allocators, alignment / size /
 * pattern / counter checks, round-robin slots of non-worker threads, and
 * destroy while a thread that used it lives on.  Which arena owns a block
 * is asked of jemalloc ("arenas.lookup") in plain builds only.  The other
 * jemalloc_allocator files: jemalloc_pool.c, jemalloc_threads.c; the suite
 * is declared here. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocators/jemalloc_fixtures.h"

TEST_SUITE(jemalloc_allocator, 30);

/* ============================================================ arguments */

Test(jemalloc_allocator, create_rejects_bad_arguments) {
    ex_jemalloc_allocator *j = (ex_jemalloc_allocator *)(uintptr_t)1;
    ex_error e = ex_jemalloc_allocator_create(0, &j);
    cr_expect_eq(e.code, EX_EINVAL, "0 arenas");
    cr_expect_null(j, "*out is cleared on failure");

    j = (ex_jemalloc_allocator *)(uintptr_t)1;
    e = ex_jemalloc_allocator_create(1025, &j);
    cr_expect_eq(e.code, EX_EINVAL, "1025 arenas");
    cr_expect_null(j);
    e = ex_jemalloc_allocator_create(0xffffffffu, &j);
    cr_expect_eq(e.code, EX_EINVAL, "UINT_MAX arenas");
    cr_expect_null(j);

    cr_expect_eq(ex_jemalloc_allocator_create(1, NULL).code, EX_EINVAL, "NULL out");
    cr_expect_eq(ex_jemalloc_allocator_create(0, NULL).code, EX_EINVAL, "NULL out and 0 arenas");

    ex_jemalloc_allocator_destroy(NULL); /* NULL-safe */
    cr_expect_eq(test_alloc_count(), 0, "nothing came from the default allocator");
    expect_no_leaks();
}

Test(jemalloc_allocator, create_accepts_one_and_1024_arenas) {
    unsigned counts[2] = { 1, 1024 };
    for (int k = 0; k < 2; k++) {
        ex_jemalloc_allocator *j = make_je(counts[k]);
        const ex_allocator *a = ex_jemalloc_allocator_get(j);
        cr_assert_not_null(a);
        cr_expect_str_eq(a->name, "jemalloc");
        cr_expect_not_null(a->stats, "keeps statistics");
        ex_alloc_stats s = stats_of(a);
        cr_expect_eq(s.allocations, 0u);
        cr_expect_eq(s.frees, 0u);
        cr_expect_eq(s.bytes_in_use, 0u);
        void *p = ex_allocate(a, 100, 8);
        cr_assert_not_null(p, "%u arenas: allocation", counts[k]);
        fill(p, 100, 7);
        cr_expect_eq(first_bad(p, 100, 7), 100u);
        ex_deallocate(a, p, 100, 8);
        s = stats_of(a);
        cr_expect_eq(s.allocations, 1u);
        cr_expect_eq(s.frees, 1u);
        cr_expect_eq(s.bytes_in_use, 0u);
        ex_jemalloc_allocator_destroy(j);
    }
    cr_expect_eq(test_alloc_count(), 0, "the jemalloc allocator does not use the default allocator");
    expect_no_leaks();
}

/* More rounds than jemalloc has arena indices (4095) and explicit tcaches
 * (about 4094) when multiplied by the arenas and tcaches of each round: a
 * destroyed allocator must give both back. */
#define CYCLE_ROUNDS 4200
#define CYCLE_ARENAS 2

Test(jemalloc_allocator, create_and_destroy_many_times) {
#ifndef JE_SANITIZED
    unsigned narenas_before = arenas_observable() ? mallctl_unsigned("arenas.narenas") : 0;
#endif
    for (int i = 0; i < CYCLE_ROUNDS; i++) {
        ex_jemalloc_allocator *j = NULL;
        ex_error e = ex_jemalloc_allocator_create(CYCLE_ARENAS, &j);
        cr_assert_eq(e.code, 0, "round %d: %s", i, e.msg ? e.msg : "");
        const ex_allocator *a = ex_jemalloc_allocator_get(j);
        size_t size = (size_t)(16 + (i % 7) * 40);
        void *p = ex_allocate(a, size, 16);
        cr_assert_not_null(p, "round %d", i);
        fill(p, size, (uint32_t)i);
        cr_assert_eq(first_bad(p, size, (uint32_t)i), size, "round %d", i);
        ex_deallocate(a, p, size, 16);
        ex_alloc_stats s = stats_of(a);
        cr_assert_eq(s.allocations, 1u, "round %d: a new allocator starts from zero", i);
        cr_assert_eq(s.frees, 1u, "round %d", i);
        cr_assert_eq(s.bytes_in_use, 0u, "round %d", i);
        ex_jemalloc_allocator_destroy(j);
    }
#ifndef JE_SANITIZED
    if (arenas_observable()) {
        /* jemalloc reuses destroyed arenas: the total stays far below what
         * CYCLE_ROUNDS * CYCLE_ARENAS fresh arenas would need. */
        unsigned narenas_after = mallctl_unsigned("arenas.narenas");
        cr_expect_leq(narenas_after, narenas_before + 2 * CYCLE_ARENAS,
                      "destroyed arenas are reused (%u arenas before, %u after %d rounds)", narenas_before,
                      narenas_after, CYCLE_ROUNDS);
        /* and an explicit tcache is still available */
        unsigned tc = 0;
        size_t sz = sizeof tc;
        int rc = exi_je_mallctl("tcache.create", &tc, &sz, NULL, 0);
        cr_expect_eq(rc, 0, "the tcaches were given back (tcache.create: %d)", rc);
        if (rc == 0) cr_expect_eq(exi_je_mallctl("tcache.destroy", NULL, NULL, &tc, sizeof tc), 0);
    }
#endif
    cr_expect_eq(test_alloc_count(), 0, "the jemalloc allocator does not use the default allocator");
    expect_no_leaks();
}

Test(jemalloc_allocator, is_malloc_matches_the_build) {
#ifdef JE_SANITIZED
    cr_expect(ex_jemalloc_is_malloc(), "sanitizer builds route the jemalloc allocator to malloc");
#else
    if (have_mallctl())
        cr_expect(!ex_jemalloc_is_malloc(), "the plain build uses its private jemalloc");
    else
        cr_expect(ex_jemalloc_is_malloc(), "no private jemalloc linked (CEXEC_JEMALLOC=malloc): routed to malloc");
#endif
    expect_no_leaks();
}

/* ========================================================== allocation */

static const size_t test_sizes[] = { 0,    1,     7,     15,    16,    17,     63,         64,     100,
                                     255,  256,   1000,  4095,  4096,  4097,   16383,      16384,  32767,
                                     32768, 65539, 262144, 524288, 1048575, 1u << 20 };
#define N_SIZES (sizeof test_sizes / sizeof test_sizes[0])

Test(jemalloc_allocator, alignments_sizes_patterns_and_counters) {
    ex_jemalloc_allocator *j = make_je(2);
    const ex_allocator *a = ex_jemalloc_allocator_get(j);
    static void *blocks[N_ALIGNS][N_SIZES];
    uint64_t total = 0;
    for (int la = 0; la < N_ALIGNS; la++) {
        size_t align = (size_t)1 << la;
        for (size_t k = 0; k < N_SIZES; k++) {
            size_t size = test_sizes[k];
            void *p = ex_allocate(a, size, align);
            cr_assert_not_null(p, "size %zu align %zu", size, align);
            cr_assert(aligned_to(p, align), "%p is aligned to %zu (size %zu)", p, align, size);
            fill(p, size, (uint32_t)(la * 100 + (int)k));
            blocks[la][k] = p;
            total += size;
        }
    }
    ex_alloc_stats s = stats_of(a);
    cr_expect_eq(s.allocations, (uint64_t)(N_ALIGNS * N_SIZES));
    cr_expect_eq(s.frees, 0u);
    cr_expect_eq(s.failures, 0u);
    cr_expect_eq(s.bytes_in_use, total, "bytes in use are the sizes asked for (%llu, expected %llu)",
                 (unsigned long long)s.bytes_in_use, (unsigned long long)total);
    cr_expect_geq(s.peak_bytes, total);
    /* every block intact once all are filled: no two overlap */
    for (int la = 0; la < N_ALIGNS; la++)
        for (size_t k = 0; k < N_SIZES; k++) {
            size_t size = test_sizes[k];
            size_t bad = first_bad(blocks[la][k], size, (uint32_t)(la * 100 + (int)k));
            cr_assert_eq(bad, size, "size %zu align %zu: byte %zu changed", size, (size_t)1 << la, bad);
        }
    /* free in an order different from allocation */
    for (size_t k = N_SIZES; k-- > 0;)
        for (int la = 0; la < N_ALIGNS; la++) ex_deallocate(a, blocks[la][k], test_sizes[k], (size_t)1 << la);
    s = stats_of(a);
    cr_expect_eq(s.allocations, (uint64_t)(N_ALIGNS * N_SIZES));
    cr_expect_eq(s.frees, s.allocations);
    cr_expect_eq(s.bytes_in_use, 0u);
    cr_expect_eq(s.failures, 0u);
    ex_jemalloc_allocator_destroy(j);
    cr_expect_eq(test_alloc_count(), 0);
    expect_no_leaks();
}

Test(jemalloc_allocator, reuse_after_free_keeps_patterns) {
    /* alloc / free churn with random sizes and alignments, a window of
     * live blocks whose patterns are checked when they are freed */
    ex_jemalloc_allocator *j = make_je(1);
    const ex_allocator *a = ex_jemalloc_allocator_get(j);
    enum { WINDOW = 64, STEPS = 20000 };
    struct { void *p; size_t size, align; uint32_t seed; } live[WINDOW];
    memset(live, 0, sizeof live);
    uint32_t rng = 12345;
    uint64_t allocs = 0;
    for (uint32_t step = 0; step < STEPS; step++) {
        int w = (int)(lcg(&rng) % WINDOW);
        if (live[w].p) {
            size_t bad = first_bad(live[w].p, live[w].size, live[w].seed);
            cr_assert_eq(bad, live[w].size, "step %u: block of %zu (align %zu) changed at %zu", step, live[w].size,
                         live[w].align, bad);
            ex_deallocate(a, live[w].p, live[w].size, live[w].align);
            live[w].p = NULL;
        }
        uint32_t r = lcg(&rng);
        size_t size = (r & 63) == 0 ? (size_t)(lcg(&rng) % (1u << 20)) : (size_t)(lcg(&rng) % 2048);
        size_t align = (size_t)1 << (lcg(&rng) % N_ALIGNS);
        void *p = ex_allocate(a, size, align);
        cr_assert_not_null(p);
        cr_assert(aligned_to(p, align));
        fill(p, size, step);
        live[w].p = p, live[w].size = size, live[w].align = align, live[w].seed = step;
        allocs++;
    }
    for (int w = 0; w < WINDOW; w++)
        if (live[w].p) {
            cr_assert_eq(first_bad(live[w].p, live[w].size, live[w].seed), live[w].size);
            ex_deallocate(a, live[w].p, live[w].size, live[w].align);
        }
    ex_alloc_stats s = stats_of(a);
    cr_expect_eq(s.allocations, allocs);
    cr_expect_eq(s.frees, allocs);
    cr_expect_eq(s.bytes_in_use, 0u);
    cr_expect_eq(s.failures, 0u);
    ex_jemalloc_allocator_destroy(j);
    expect_no_leaks();
}

Test(jemalloc_allocator, two_allocators_on_one_thread_keep_their_own_blocks_and_counters) {
    ex_jemalloc_allocator *j1 = make_je(2), *j2 = make_je(3);
    const ex_allocator *a1 = ex_jemalloc_allocator_get(j1), *a2 = ex_jemalloc_allocator_get(j2);
    enum { N = 200 };
    static void *b1[N], *b2[N];
    for (int i = 0; i < N; i++) { /* alternate: the thread's cached allocator changes every call */
        b1[i] = ex_allocate(a1, 48, 8);
        b2[i] = ex_allocate(a2, 80, 32);
        cr_assert(b1[i] && b2[i]);
        fill(b1[i], 48, (uint32_t)i);
        fill(b2[i], 80, (uint32_t)(i + N));
    }
#ifndef JE_SANITIZED
    if (arenas_observable()) {
        unsigned r1 = arena_of(b1[0]), r2 = arena_of(b2[0]);
        cr_expect_neq(r1, NO_ARENA);
        cr_expect_neq(r2, NO_ARENA);
        cr_expect_neq(r1, r2, "two allocators never share an arena");
        for (int i = 0; i < N; i++) {
            cr_expect_eq(arena_of(b1[i]), r1, "block %d of allocator 1", i);
            cr_expect_eq(arena_of(b2[i]), r2, "block %d of allocator 2", i);
        }
    }
#endif
    ex_alloc_stats s1 = stats_of(a1), s2 = stats_of(a2);
    cr_expect_eq(s1.allocations, (uint64_t)N);
    cr_expect_eq(s2.allocations, (uint64_t)N);
    cr_expect_eq(s1.bytes_in_use, (uint64_t)N * 48);
    cr_expect_eq(s2.bytes_in_use, (uint64_t)N * 80);
    for (int i = 0; i < N; i++) {
        cr_assert_eq(first_bad(b1[i], 48, (uint32_t)i), 48u);
        cr_assert_eq(first_bad(b2[i], 80, (uint32_t)(i + N)), 80u);
        ex_deallocate(a2, b2[i], 80, 32);
        ex_deallocate(a1, b1[i], 48, 8);
    }
    s1 = stats_of(a1), s2 = stats_of(a2);
    cr_expect_eq(s1.frees, (uint64_t)N);
    cr_expect_eq(s2.frees, (uint64_t)N);
    cr_expect_eq(s1.bytes_in_use, 0u);
    cr_expect_eq(s2.bytes_in_use, 0u);
    ex_jemalloc_allocator_destroy(j1);
    /* the other one still works after its neighbour is gone */
    void *p = ex_allocate(a2, 1000, 64);
    cr_assert_not_null(p);
    fill(p, 1000, 3);
    cr_expect_eq(first_bad(p, 1000, 3), 1000u);
    ex_deallocate(a2, p, 1000, 64);
    ex_jemalloc_allocator_destroy(j2);
    expect_no_leaks();
}

/* ====================================================== round-robin slots */

#define RR_ARENAS 3
#define RR_THREADS 6
#define RR_BLOCKS 16

typedef struct rr_arg {
    int index;       /* of the thread */
    const ex_allocator *a;
    thread_errors *errs;
    unsigned arena;  /* where its blocks came from */
} rr_arg;

static void *rr_thread(void *v) {
    rr_arg *r = v;
    void *b[RR_BLOCKS];
    size_t sizes[RR_BLOCKS];
    r->arena = 0;
    for (int i = 0; i < RR_BLOCKS; i++) {
        sizes[i] = (size_t)(8 + i * 97);
        b[i] = ex_allocate(r->a, sizes[i], 16);
        if (!b[i]) {
            terr_record(r->errs, "allocation failed", r->index, i);
            return NULL;
        }
        fill(b[i], sizes[i], (uint32_t)(r->index * 1000 + i));
    }
#ifndef JE_SANITIZED
    if (arenas_observable()) {
        r->arena = arena_of(b[0]);
        if (r->arena == NO_ARENA) terr_record(r->errs, "arenas.lookup failed", r->index, 0);
        for (int i = 1; i < RR_BLOCKS; i++)
            if (arena_of(b[i]) != r->arena)
                terr_record(r->errs, "a thread's blocks come from more than one arena", r->index, i);
    }
#endif
    for (int i = 0; i < RR_BLOCKS; i++) {
        if (first_bad(b[i], sizes[i], (uint32_t)(r->index * 1000 + i)) != sizes[i])
            terr_record(r->errs, "pattern changed", r->index, i);
        ex_deallocate(r->a, b[i], sizes[i], 16);
    }
    return NULL;
}

Test(jemalloc_allocator, threads_other_than_workers_get_slots_round_robin) {
    ex_jemalloc_allocator *j = make_je(RR_ARENAS);
    const ex_allocator *a = ex_jemalloc_allocator_get(j);
    thread_errors errs;
    terr_init(&errs);
    rr_arg args[RR_THREADS];
    for (int t = 0; t < RR_THREADS; t++) {
        /* one after another, so the order of first use is known */
        args[t] = (rr_arg){ t, a, &errs, 0 };
        pthread_t th;
        cr_assert_eq(pthread_create(&th, NULL, rr_thread, &args[t]), 0);
        cr_assert_eq(pthread_join(th, NULL), 0);
    }
    terr_check(&errs, "round-robin threads");
    ex_alloc_stats s = stats_of(a);
    cr_expect_eq(s.allocations, (uint64_t)(RR_THREADS * RR_BLOCKS), "counters of exited threads are kept");
    cr_expect_eq(s.frees, s.allocations);
    cr_expect_eq(s.bytes_in_use, 0u);
    /* the test thread is the next newcomer: slot RR_THREADS % RR_ARENAS */
    void *mine = ex_allocate(a, 64, 8);
    cr_assert_not_null(mine);
    fill(mine, 64, 99);
#ifndef JE_SANITIZED
    if (arenas_observable()) {
        unsigned auto_arenas = mallctl_unsigned("opt.narenas");
        for (int t = 0; t < RR_THREADS; t++)
            cr_expect_geq(args[t].arena, auto_arenas, "thread %d: an explicit arena (%u), not an automatic one",
                          t, args[t].arena);
        for (int t = 0; t < RR_ARENAS; t++)
            for (int u = t + 1; u < RR_ARENAS; u++)
                cr_expect_neq(args[t].arena, args[u].arena, "threads %d and %d have different slots", t, u);
        for (int t = RR_ARENAS; t < RR_THREADS; t++)
            cr_expect_eq(args[t].arena, args[t - RR_ARENAS].arena, "thread %d takes the slot of thread %d again", t,
                         t - RR_ARENAS);
        cr_expect_eq(arena_of(mine), args[RR_THREADS % RR_ARENAS].arena, "the test thread came next in turn");
    }
#endif
    cr_expect_eq(first_bad(mine, 64, 99), 64u);
    ex_deallocate(a, mine, 64, 8);
    s = stats_of(a);
    cr_expect_eq(s.frees, s.allocations);
    cr_expect_eq(s.bytes_in_use, 0u);
    ex_jemalloc_allocator_destroy(j);
    expect_no_leaks();
}

/* ---- destroy while a thread that used it is still alive */

typedef struct linger_arg {
    const ex_allocator *first;
    const ex_allocator *_Atomic second;
    atomic_int phase; /* 1: used first, 2: may use second, 3: done */
    thread_errors *errs;
} linger_arg;

static void *linger_thread(void *v) {
    linger_arg *l = v;
    void *p = ex_allocate(l->first, 200, 16);
    if (!p) terr_record(l->errs, "allocation from the first allocator failed", 0, 0);
    else {
        fill(p, 200, 1);
        ex_deallocate(l->first, p, 200, 16);
    }
    atomic_store(&l->phase, 1);
    if (!wait_int_equals(&l->phase, 2)) {
        terr_record(l->errs, "the test thread did not go on", 0, 0);
        return NULL;
    }
    const ex_allocator *b = atomic_load(&l->second);
    for (int i = 0; i < 100; i++) {
        p = ex_allocate(b, 300, 16);
        if (!p) {
            terr_record(l->errs, "allocation from the second allocator failed", i, 0);
            break;
        }
        fill(p, 300, (uint32_t)i);
        if (first_bad(p, 300, (uint32_t)i) != 300) terr_record(l->errs, "pattern changed", i, 0);
        ex_deallocate(b, p, 300, 16);
    }
    atomic_store(&l->phase, 3);
    return NULL; /* exits: the second allocator's thread record is retired */
}

Test(jemalloc_allocator, destroy_while_a_thread_that_used_it_lives_on) {
    thread_errors errs;
    terr_init(&errs);
    ex_jemalloc_allocator *j1 = make_je(2);
    linger_arg l;
    l.first = ex_jemalloc_allocator_get(j1);
    atomic_init(&l.second, NULL);
    atomic_init(&l.phase, 0);
    l.errs = &errs;
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, linger_thread, &l), 0);
    cr_assert(wait_int_equals(&l.phase, 1), "the thread used the first allocator");
    ex_alloc_stats s = stats_of(l.first);
    cr_expect_eq(s.allocations, 1u);
    cr_expect_eq(s.frees, 1u);
    /* the thread is idle, alive, and no longer uses j1 */
    ex_jemalloc_allocator_destroy(j1);
    ex_jemalloc_allocator *j2 = make_je(2); /* may get the same thread key */
    atomic_store(&l.second, ex_jemalloc_allocator_get(j2));
    atomic_store(&l.phase, 2);
    cr_assert_eq(pthread_join(th, NULL), 0);
    terr_check(&errs, "lingering thread");
    cr_expect_eq(atomic_load(&l.phase), 3);
    s = stats_of(ex_jemalloc_allocator_get(j2));
    cr_expect_eq(s.allocations, 100u, "the exited thread's counters are kept");
    cr_expect_eq(s.frees, 100u);
    cr_expect_eq(s.bytes_in_use, 0u);
    ex_jemalloc_allocator_destroy(j2);
    expect_no_leaks();
}

