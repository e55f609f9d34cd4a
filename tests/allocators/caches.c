/* SPDX-License-Identifier: MIT */
/* The per-thread caches of the recycling and jemalloc allocators: blocks
 * freed on another thread come back to the thread (or arena) that made
 * them, a cache that overflows hands blocks back without losing count, and
 * in ASan builds a use after free of a cached block is reported. */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/helpers.h"

TEST_SUITE(alloc_caches, 60);

#if defined(__SANITIZE_ADDRESS__)
#define CACHES_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CACHES_ASAN 1
#endif
#endif

enum { N = 64 };

typedef struct blocks {
    const ex_allocator *a;
    void *p[N];
    size_t size;
} blocks;

static void *free_all(void *v) {
    blocks *b = v;
    for (int i = 0; i < N; i++) ex_deallocate(b->a, b->p[i], b->size, 16);
    return NULL;
}

static int cmp_ptr(const void *x, const void *y) {
    uintptr_t a = (uintptr_t) * (void *const *)x, b = (uintptr_t) * (void *const *)y;
    return a < b ? -1 : a > b;
}

/* This thread allocates N blocks, another thread frees them all, this
 * thread allocates N again: it gets exactly the same blocks back (the
 * freer's batches reached this thread's arena and its cache), and the
 * counters balance. */
static void remote_blocks_come_back(const ex_allocator *a, size_t size) {
    blocks b = { .a = a, .size = size };
    for (int i = 0; i < N; i++) cr_assert_not_null(b.p[i] = ex_allocate(a, size, 16));
    void *first[N];
    memcpy(first, b.p, sizeof first);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, free_all, &b), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    for (int i = 0; i < N; i++) cr_assert_not_null(b.p[i] = ex_allocate(a, size, 16));
    qsort(first, N, sizeof first[0], cmp_ptr);
    qsort(b.p, N, sizeof b.p[0], cmp_ptr);
    for (int i = 0; i < N; i++) cr_expect_eq(first[i], b.p[i], "block %d of the second round was not a returned one", i);
    for (int i = 0; i < N; i++) ex_deallocate(a, b.p[i], size, 16);
    ex_alloc_stats s;
    ex_allocator_stats(a, &s);
    cr_expect_eq(s.allocations, 2u * N);
    cr_expect_eq(s.frees, 2u * N);
    cr_expect_eq(s.bytes_in_use, 0u);
}

Test(alloc_caches, jemalloc_blocks_freed_elsewhere_return_to_their_arena_and_thread) {
    ex_jemalloc_allocator *j;
    cr_assert_eq(ex_jemalloc_allocator_create(2, &j).code, 0);
    /* 400 bytes: a 512-byte class, whose batches hold 32 blocks; 64 blocks
     * are two full batches (a partial one would go back to jemalloc when
     * the freeing thread exits). */
    remote_blocks_come_back(ex_jemalloc_allocator_get(j), 400);
    ex_jemalloc_allocator_destroy(j);
    expect_no_leaks();
}

/* The recycling allocator has no arenas: a thread that only frees keeps
 * blocks until its cache overflows, then hands batches to the depot, where
 * a thread that only allocates finds them. */
typedef struct flood { const ex_allocator *a; void **p; int n; size_t size; } flood;

static void *free_flood(void *v) {
    flood *f = v;
    for (int i = 0; i < f->n; i++) ex_deallocate(f->a, f->p[i], f->size, 16);
    return NULL;
}

Test(alloc_caches, recycling_batches_reach_an_allocating_thread_through_the_depot) {
    ex_recycling_allocator *r;
    cr_assert_eq(ex_recycling_allocator_create(NULL, &r).code, 0);
    const ex_allocator *a = ex_recycling_allocator_get(r);
    enum { MANY = 1024 };
    void **p = calloc(MANY, sizeof *p), **again = calloc(MANY, sizeof *again);
    cr_assert(p && again);
    for (int i = 0; i < MANY; i++) cr_assert_not_null(p[i] = ex_allocate(a, 96, 16));
    flood f = { a, p, MANY, 96 };
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, free_flood, &f), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    for (int i = 0; i < MANY; i++) cr_assert_not_null(again[i] = ex_allocate(a, 96, 16));
    qsort(p, MANY, sizeof *p, cmp_ptr);
    int reused = 0;
    for (int i = 0; i < MANY; i++) reused += bsearch(&again[i], p, MANY, sizeof *p, cmp_ptr) != NULL;
    /* the freer kept at most 256 (returned to libc at its exit); the rest went to the depot */
    cr_expect_geq(reused, MANY - 256, "only %d of %d blocks came back through the depot", reused, MANY);
    for (int i = 0; i < MANY; i++) ex_deallocate(a, again[i], 96, 16);
    free(p);
    free(again);
    ex_alloc_stats s;
    ex_allocator_stats(a, &s);
    cr_expect_eq(s.allocations, 2u * MANY);
    cr_expect_eq(s.frees, 2u * MANY);
    cr_expect_eq(s.bytes_in_use, 0u);
    ex_recycling_allocator_destroy(r);
    expect_no_leaks();
}

/* A thread that only frees foreign blocks, far more than any cache keeps:
 * batches go to the owner's remote list until it is full, then back to
 * jemalloc; nothing is lost and the counters balance. */
Test(alloc_caches, jemalloc_remote_overflow_goes_back_to_jemalloc) {
    ex_jemalloc_allocator *j;
    cr_assert_eq(ex_jemalloc_allocator_create(2, &j).code, 0);
    const ex_allocator *a = ex_jemalloc_allocator_get(j);
    size_t sizes[] = { 1, 16, 100, 1000, 4000, 8000 };
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        enum { MANY = 3000 };
        void **p = calloc(MANY, sizeof *p);
        cr_assert_not_null(p);
        for (int i = 0; i < MANY; i++) {
            cr_assert_not_null(p[i] = ex_allocate(a, sizes[k], 16));
            memset(p[i], 0xA5, sizes[k]);
        }
        flood f = { a, p, MANY, sizes[k] };
        pthread_t t;
        cr_assert_eq(pthread_create(&t, NULL, free_flood, &f), 0);
        cr_assert_eq(pthread_join(t, NULL), 0);
        /* take some back, then free them here */
        for (int i = 0; i < MANY; i++) cr_assert_not_null(p[i] = ex_allocate(a, sizes[k], 16));
        for (int i = 0; i < MANY; i++) ex_deallocate(a, p[i], sizes[k], 16);
        free(p);
        ex_alloc_stats s;
        ex_allocator_stats(a, &s);
        cr_expect_eq(s.allocations, s.frees, "size %zu", sizes[k]);
        cr_expect_eq(s.bytes_in_use, 0u, "size %zu", sizes[k]);
    }
    ex_jemalloc_allocator_destroy(j);
    expect_no_leaks();
}

#ifdef CACHES_ASAN
/* ASan exits with status 1 on its first report. */
static void use_after_free(const ex_allocator *a) {
    volatile char *p = ex_allocate(a, 128, 16);
    p[0] = 1;
    ex_deallocate(a, (void *)p, 128, 16);  /* into the thread's cache */
    p[64] = 2;                             /* reported: the cached block is poisoned */
}

static void overflow_within_class(const ex_allocator *a) {
    volatile char *p = ex_allocate(a, 100, 16);  /* a 128-byte class block */
    p[110] = 1;                                  /* past the size asked for */
    ex_deallocate(a, (void *)p, 100, 16);
}

Test(alloc_caches, recycling_use_after_free_is_reported, .exit_code = 1) {
    ex_recycling_allocator *r;
    cr_assert_eq(ex_recycling_allocator_create(NULL, &r).code, 0);
    use_after_free(ex_recycling_allocator_get(r));
}

Test(alloc_caches, jemalloc_use_after_free_is_reported, .exit_code = 1) {
    ex_jemalloc_allocator *j;
    cr_assert_eq(ex_jemalloc_allocator_create(1, &j).code, 0);
    use_after_free(ex_jemalloc_allocator_get(j));
}

Test(alloc_caches, recycling_overflow_past_the_size_is_reported, .exit_code = 1) {
    ex_recycling_allocator *r;
    cr_assert_eq(ex_recycling_allocator_create(NULL, &r).code, 0);
    const ex_allocator *a = ex_recycling_allocator_get(r);
    ex_deallocate(a, ex_allocate(a, 100, 16), 100, 16);  /* the block is cached: the next one comes from it */
    overflow_within_class(a);
}

Test(alloc_caches, jemalloc_overflow_past_the_size_is_reported, .exit_code = 1) {
    ex_jemalloc_allocator *j;
    cr_assert_eq(ex_jemalloc_allocator_create(1, &j).code, 0);
    const ex_allocator *a = ex_jemalloc_allocator_get(j);
    ex_deallocate(a, ex_allocate(a, 100, 16), 100, 16);
    overflow_within_class(a);
}
#endif
