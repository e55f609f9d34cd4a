/* SPDX-License-Identifier: MIT */
/* The monotonic allocator: bump allocation in a buffer, upstream, reset,
 * threads (suite frame_allocators, declared in libc_default.c). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "allocators/alloc_fixtures.h"

/* Initialises m over buf (len bytes) and upstream; returns its allocator. */
static const ex_allocator *mono_init(ex_monotonic_allocator *m, void *buf, size_t len, const ex_allocator *upstream) {
    ex_monotonic_allocator_init(m, buf, len, upstream);
    return ex_monotonic_allocator_get(m);
}

/* ============================================================ monotonic */

Test(frame_allocators, monotonic_bumps_with_alignment_inside_the_buffer) {
    static _Alignas(64) unsigned char storage[4096 + 1];
    /* Start one byte in, so alignment must come from the address. */
    unsigned char *buf = storage + 1;
    size_t len = 4096;
    ex_monotonic_allocator m;
    const ex_allocator *a = mono_init(&m, buf, len, NULL);
    static const size_t req[][2] = { { 1, 1 }, { 10, 16 }, { 3, 8 }, { 100, 64 }, { 7, 2 }, { 33, 32 }, { 1, 4 },
                                     { 200, 128 }, { 5, 1 }, { 64, 64 } };
    enum { N = sizeof req / sizeof req[0] };
    unsigned char *p[N];
    uint64_t bytes = 0;
    for (size_t i = 0; i < N; i++) {
        p[i] = ex_allocate(a, req[i][0], req[i][1]);
        cr_assert_not_null(p[i], "request %zu", i);
        cr_expect(p[i] >= buf && p[i] + req[i][0] <= buf + len, "block %zu lies inside the buffer", i);
        cr_expect(aligned_to(p[i], req[i][1]), "block %zu (%p) aligned to %zu", i, (void *)p[i], req[i][1]);
        if (i) cr_expect(p[i] >= p[i - 1] + req[i - 1][0], "bump allocation: block %zu after block %zu", i, i - 1);
        memset(p[i], (int)i + 1, req[i][0]);
        bytes += req[i][0];
    }
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < req[i][0]; j++) cr_assert_eq(p[i][j], (unsigned char)(i + 1), "block %zu intact", i);
    ex_alloc_stats s = stats_of(a);
    cr_expect_eq(s.allocations, (uint64_t)N);
    cr_expect_eq(s.bytes_in_use, bytes);
    cr_expect_eq(s.peak_bytes, bytes);
    for (size_t i = 0; i < N; i++) ex_deallocate(a, p[i], req[i][0], req[i][1]);
    s = stats_of(a);
    cr_expect_eq(s.frees, (uint64_t)N);
    cr_expect_eq(s.bytes_in_use, 0u);
    /* deallocate gives nothing back: the next block still comes after the last one */
    unsigned char *q = ex_allocate(a, 1, 1);
    cr_assert_not_null(q);
    cr_expect_geq(q, p[N - 1] + req[N - 1][0]);
    ex_deallocate(a, q, 1, 1);
    expect_no_leaks();
}

Test(frame_allocators, monotonic_exhaustion_without_upstream_fails) {
    static _Alignas(16) unsigned char buf[256];
    ex_monotonic_allocator m;
    const ex_allocator *a = mono_init(&m, buf, sizeof buf, NULL);
    void *p = ex_allocate(a, 200, 8);
    cr_assert_not_null(p);
    cr_expect_null(ex_allocate(a, 100, 8), "200 + 100 > 256 and there is no upstream");
    void *q = ex_allocate(a, 56, 8);
    cr_expect_not_null(q, "the rest of the buffer still serves a request that fits");
    cr_expect_null(ex_allocate(a, 1, 1), "the buffer is full");
    ex_alloc_stats s = stats_of(a);
    cr_expect_eq(s.failures, 2u);
    cr_expect_eq(s.allocations, 2u);
    cr_expect_eq(s.bytes_in_use, 256u);
    ex_deallocate(a, p, 200, 8);
    ex_deallocate(a, q, 56, 8);
    cr_expect_null(ex_allocate(a, 8, 8), "freeing alone does not make room: only reset does");
    expect_no_leaks();
}

Test(frame_allocators, monotonic_exhaustion_goes_upstream_and_frees_there) {
    static _Alignas(16) unsigned char buf[256];
    ex_monotonic_allocator m;
    const ex_allocator *a = mono_init(&m, buf, sizeof buf, &test_allocator);
    unsigned char *in = ex_allocate(a, 200, 8);
    cr_assert_not_null(in);
    cr_expect_eq(test_stats.allocs, 0, "a block from the buffer does not touch upstream");
    unsigned char *out = ex_allocate(a, 100, 64);
    cr_assert_not_null(out, "exhaustion falls back to upstream");
    cr_expect(out < buf || out >= buf + sizeof buf, "the upstream block is outside the buffer");
    cr_expect(aligned_to(out, 64));
    cr_expect_eq(test_stats.allocs, 1);
    cr_expect_eq(test_stats.in_use, 1);
    memset(out, 7, 100);
    ex_alloc_stats s = stats_of(a);
    cr_expect_eq(s.allocations, 2u);
    cr_expect_eq(s.failures, 0u);
    cr_expect_eq(s.bytes_in_use, 300u);
    ex_deallocate(a, out, 100, 64);
    cr_expect_eq(test_stats.frees, 1, "the upstream block is freed upstream");
    cr_expect_eq(test_stats.in_use, 0);
    ex_deallocate(a, in, 200, 8);
    cr_expect_eq(test_stats.frees, 1, "a buffer block is not given to upstream");
    s = stats_of(a);
    cr_expect_eq(s.frees, 2u);
    cr_expect_eq(s.bytes_in_use, 0u);

    /* No buffer at all: everything comes from upstream. */
    ex_monotonic_allocator none;
    ex_monotonic_allocator_init(&none, NULL, 1024, &test_allocator);
    void *x = ex_allocate(ex_monotonic_allocator_get(&none), 16, 16);
    cr_assert_not_null(x);
    cr_expect_eq(test_stats.in_use, 1);
    ex_deallocate(ex_monotonic_allocator_get(&none), x, 16, 16);
    expect_no_leaks();
}

Test(frame_allocators, monotonic_reset_makes_the_buffer_reusable) {
    static _Alignas(64) unsigned char buf[512];
    ex_monotonic_allocator m;
    const ex_allocator *a = mono_init(&m, buf, sizeof buf, NULL);
    for (int round = 0; round < 5; round++) {
        unsigned char *first = ex_allocate(a, 64, 64);
        cr_assert_eq(first, buf, "round %d: the first block is the start of the buffer", round);
        void *blocks[7];
        for (int i = 0; i < 7; i++) {
            blocks[i] = ex_allocate(a, 64, 64);
            cr_assert_not_null(blocks[i], "round %d block %d", round, i);
        }
        cr_expect_null(ex_allocate(a, 1, 1), "round %d: full", round);
        ex_deallocate(a, first, 64, 64);
        for (int i = 0; i < 7; i++) ex_deallocate(a, blocks[i], 64, 64);
        ex_monotonic_allocator_reset(&m);
    }
    ex_alloc_stats s = stats_of(a);
    cr_expect_eq(s.allocations, 40u);
    cr_expect_eq(s.frees, 40u);
    cr_expect_eq(s.failures, 5u);
    cr_expect_eq(s.bytes_in_use, 0u);
    cr_expect_eq(s.peak_bytes, 512u);
    expect_no_leaks();
}

#define MONO_THREADS 4
#define MONO_PER_THREAD 20000

typedef struct mono_arg {
    const ex_allocator *a;
    atomic_int *go;
    uint32_t seed;
    unsigned char fill;
    unsigned char *p[MONO_PER_THREAD];
    size_t size[MONO_PER_THREAD];
    size_t align[MONO_PER_THREAD];
} mono_arg;

static void *mono_worker(void *p) {
    mono_arg *arg = p;
    for (int i = 0; i < MONO_PER_THREAD; i++) {
        arg->size[i] = 1 + lcg(&arg->seed) % 24;
        arg->align[i] = (size_t)1 << (lcg(&arg->seed) % 5); /* 1 .. 16 */
    }
    /* Start together, allocate in a tight loop (most contention), fill after. */
    atomic_fetch_add(arg->go, 1);
    while (atomic_load(arg->go) < MONO_THREADS) sched_yield();
    for (int i = 0; i < MONO_PER_THREAD; i++) arg->p[i] = ex_allocate(arg->a, arg->size[i], arg->align[i]);
    for (int i = 0; i < MONO_PER_THREAD; i++)
        if (arg->p[i]) memset(arg->p[i], arg->fill, arg->size[i]);
    return NULL;
}

typedef struct span {
    uintptr_t begin, end;
    int owner;
} span;

static int span_cmp(const void *a, const void *b) {
    const span *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

Test(frame_allocators, monotonic_concurrent_blocks_are_disjoint) {
    size_t len = (size_t)4 << 20;
    unsigned char *buf = aligned_alloc(64, len);
    cr_assert_not_null(buf);
    ex_monotonic_allocator m;
    ex_monotonic_allocator_init(&m, buf, len, NULL);
    static mono_arg args[MONO_THREADS];
    pthread_t th[MONO_THREADS];
    atomic_int go;
    atomic_init(&go, 0);
    for (int i = 0; i < MONO_THREADS; i++) {
        memset(&args[i], 0, sizeof args[i]);
        args[i].a = ex_monotonic_allocator_get(&m);
        args[i].go = &go;
        args[i].seed = 99u + 1000u * (unsigned)i;
        args[i].fill = (unsigned char)(0x11 * (i + 1));
    }
    start_threads(th, MONO_THREADS, mono_worker, args, sizeof args[0]);
    join_threads(th, MONO_THREADS);
    static span spans[MONO_THREADS * MONO_PER_THREAD];
    size_t n = 0;
    for (int t = 0; t < MONO_THREADS; t++)
        for (int i = 0; i < MONO_PER_THREAD; i++) {
            unsigned char *p = args[t].p[i];
            cr_assert_not_null(p, "thread %d block %d: the buffer is large enough", t, i);
            cr_assert(p >= buf && p + args[t].size[i] <= buf + len, "thread %d block %d inside the buffer", t, i);
            cr_assert(aligned_to(p, args[t].align[i]), "thread %d block %d aligned to %zu", t, i, args[t].align[i]);
            for (size_t j = 0; j < args[t].size[i]; j++)
                if (p[j] != args[t].fill) cr_assert_fail("thread %d block %d was overwritten by another thread", t, i);
            spans[n++] = (span){ (uintptr_t)p, (uintptr_t)p + args[t].size[i], t };
        }
    qsort(spans, n, sizeof spans[0], span_cmp);
    for (size_t i = 1; i < n; i++)
        cr_assert_leq(spans[i - 1].end, spans[i].begin, "blocks of threads %d and %d overlap", spans[i - 1].owner,
                      spans[i].owner);
    ex_alloc_stats s = stats_of(ex_monotonic_allocator_get(&m));
    cr_expect_eq(s.allocations, (uint64_t)(MONO_THREADS * MONO_PER_THREAD));
    cr_expect_eq(s.failures, 0u);
    for (int t = 0; t < MONO_THREADS; t++)
        for (int i = 0; i < MONO_PER_THREAD; i++)
            ex_deallocate(ex_monotonic_allocator_get(&m), args[t].p[i], args[t].size[i], args[t].align[i]);
    s = stats_of(ex_monotonic_allocator_get(&m));
    cr_expect_eq(s.bytes_in_use, 0u);
    free(buf);
    expect_no_leaks();
}

