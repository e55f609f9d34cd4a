/* SPDX-License-Identifier: MIT */
/* alloc_fixtures.c - see alloc_fixtures.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocators/alloc_fixtures.h"

ex_alloc_stats stats_of(const ex_allocator *a) {
    ex_alloc_stats s;
    memset(&s, 0, sizeof s);
    ex_error e = ex_allocator_stats(a, &s);
    cr_assert_eq(e.code, 0, "ex_allocator_stats(%s): %s", a->name, e.msg ? e.msg : "");
    return s;
}

bool aligned_to(const void *p, size_t align) { return ((uintptr_t)p & (align - 1)) == 0; }

/* A small deterministic generator for sizes (per thread). */
uint32_t lcg(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

/* ------------------------------------------------- common sender pieces */

ex_error then_plus1(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)n;
    out[0] = ex_int(in[0].as.i + 1);
    return ex_ok();
}

ex_sender *let_plus1(void *ctx, const ex_value *in, size_t n) {
    (void)ctx, (void)n;
    return ex_just(ex_int(in[0].as.i + 1));
}

/* An inner sender with a larger operation: just -> then -> then. */
ex_sender *let_plus3(void *ctx, const ex_value *in, size_t n) {
    (void)ctx, (void)n;
    ex_sender *s = ex_then(ex_just(ex_int(in[0].as.i + 1)), then_plus1, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    return ex_then(s, then_plus1, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
}

ex_error then_ret1(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)in, (void)n;
    out[0] = ex_int(1);
    return ex_ok();
}

ex_error bulk_count(void *ctx, size_t i, const ex_value *v, size_t n) {
    (void)v, (void)n;
    atomic_uint *hits = ctx;
    atomic_fetch_add(&hits[i], 1);
    return ex_ok();
}

/* ------------------------------------------------- errors on other threads */

void terr_init(thread_errors *t) {
    atomic_init(&t->count, 0);
    t->first[0] = 0;
    pthread_mutex_init(&t->mu, NULL);
}

void terr_record(thread_errors *t, const char *what, long a, long b) {
    pthread_mutex_lock(&t->mu);
    if (atomic_fetch_add(&t->count, 1) == 0) snprintf(t->first, sizeof t->first, "%s (%ld, %ld)", what, a, b);
    pthread_mutex_unlock(&t->mu);
}

void terr_check(thread_errors *t, const char *test) {
    pthread_mutex_lock(&t->mu);
    int n = atomic_load(&t->count);
    cr_expect_eq(n, 0, "%s: %d error(s) on other threads, first: %s", test, n, t->first);
    pthread_mutex_unlock(&t->mu);
    pthread_mutex_destroy(&t->mu);
}

void start_threads(pthread_t *th, int n, void *(*fn)(void *), void *args, size_t arg_size) {
    for (int i = 0; i < n; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, fn, (char *)args + (size_t)i * arg_size), 0, "pthread_create %d", i);
}

void join_threads(pthread_t *th, int n) {
    for (int i = 0; i < n; i++) cr_assert_eq(pthread_join(th[i], NULL), 0);
}

void expect_made(ex_error e, const void *made, const char *what) {
    cr_assert_eq(e.code, 0, "%s: %d (%s)", what, e.code, e.msg ? e.msg : "");
    cr_assert_not_null(made, "%s succeeded without its object", what);
}

ex_recycling_allocator *make_recycling(const ex_allocator *under) {
    ex_recycling_allocator *r = NULL;
    ex_error e = ex_recycling_allocator_create(under, &r);
    expect_made(e, r, "ex_recycling_allocator_create");
    return r;
}

/* ------------------------------------------------------------ OOM sweeps */

#define SWEEP_MAX_K 500

/* Makes the run's sender with allocation k failing; returns the fault
 * allocator (NULL: the test allocator fails). */
static ex_sender *sweep_arm(sweep_mode mode, long k, ex_fault_allocator *f, const ex_allocator **fa, sweep_build build,
                            void *ctx) {
    *fa = NULL;
    if (mode == SWEEP_TEST_ALLOCATOR) {
        test_alloc_reset();
        test_alloc_fail_at(k);
        return build(ctx);
    }
    ex_fault_allocator_init(f, &test_allocator);
    *fa = ex_fault_allocator_get(f);
    ex_fault_allocator_fail_nth(f, (uint64_t)k);
    if (mode == SWEEP_FAULT_CHAIN) return ex_write_env(build(ctx), &ex_key_get_allocator, ex_alloc_value(*fa));
    ex_set_default_allocator(*fa); /* for the build and the run */
    return build(ctx);
}

long oom_sweep(const char *name, sweep_mode mode, sweep_build build, sweep_check check, void *ctx) {
    long hits = 0, k;
    long base = test_stats.in_use; /* e.g. a pool made before the sweep */
    for (k = 1; k <= SWEEP_MAX_K; k++) {
        ex_fault_allocator f;
        const ex_allocator *fa;
        ex_sender *s = sweep_arm(mode, k, &f, &fa, build, ctx);
        ex_result r = ex_sync_wait(s);
        ex_set_default_allocator(&test_allocator);
        long failures = fa ? (long)stats_of(fa).failures : test_stats.failed;
        cr_assert_leq(failures, 1, "%s, k=%ld: only one allocation fails", name, k);
        bool failed = failures == 1;
        if (r.disposition == EX_DISP_ERROR && r.error.code == EX_ENOMEM) {
            cr_assert(failed, "%s, k=%ld: EX_ENOMEM without a failed allocation (%s)", name, k,
                      r.error.msg ? r.error.msg : "");
            cr_assert_not_null(r.error.msg, "%s, k=%ld", name, k);
        } else {
            check(&r, ctx, k, failed);
        }
        ex_result_destroy(&r);
        if (fa) {
            ex_alloc_stats fs = stats_of(fa);
            cr_assert_eq(fs.allocations, fs.frees, "%s, k=%ld: %llu allocation(s) from the fault allocator, %llu free(s)",
                         name, k, (unsigned long long)fs.allocations, (unsigned long long)fs.frees);
            cr_assert_eq(fs.bytes_in_use, 0u, "%s, k=%ld", name, k);
        } else {
            expect_no_leaks();
        }
        cr_assert_eq(test_stats.in_use, base, "%s, k=%ld: leaked %ld block(s)", name, k, test_stats.in_use - base);
        if (!failed) break;
        hits++;
    }
    if (mode == SWEEP_TEST_ALLOCATOR) test_alloc_reset();
    cr_assert_leq(k, SWEEP_MAX_K, "%s: the sweep did not reach a run without failures", name);
    cr_assert_gt(hits, 0, "%s: no run hit an allocation failure", name);
    return hits;
}

/* ---------------------------------------------------------------- pools */

ex_pool *alloc_pool(unsigned threads, bool arenas, const ex_allocator *frame_alloc) {
    ex_pool_config cfg = test_pool_config(threads, "fa");
    cfg.allocator = frame_alloc;
    cfg.frames = arenas ? EX_POOL_FRAMES_ARENAS : EX_POOL_FRAMES_PROCESS;
    return test_pool_new_cfg(&cfg);
}
