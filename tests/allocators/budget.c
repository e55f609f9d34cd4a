/* SPDX-License-Identifier: MIT */
/* The budget allocator: its limit, alone, under threads and as a chain's
 * allocator (suite frame_allocators, declared in libc_default.c). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "allocators/alloc_fixtures.h"

/* =============================================================== budget */

Test(frame_allocators, budget_limit_enforced_and_freeing_makes_room) {
    ex_budget_allocator b;
    ex_budget_allocator_init(&b, &test_allocator, 1000);
    const ex_allocator *a = ex_budget_allocator_get(&b);
    cr_assert_not_null(a->stats);
    void *p1 = ex_allocate(a, 400, 8), *p2 = ex_allocate(a, 400, 16);
    cr_assert_not_null(p1);
    cr_assert_not_null(p2);
    cr_expect(aligned_to(p2, 16));
    memset(p1, 1, 400);
    memset(p2, 2, 400);
    void *p3 = ex_allocate(a, 300, 8);
    cr_expect_null(p3, "800 + 300 > 1000 must fail");
    ex_alloc_stats s = stats_of(a);
    cr_expect_eq(s.failures, 1u);
    cr_expect_eq(s.allocations, 2u);
    cr_expect_eq(s.bytes_in_use, 800u, "a failed allocation reserves nothing");
    cr_expect_eq(test_stats.in_use, 2, "nothing was taken from the underlying allocator for the failed request");
    void *p4 = ex_allocate(a, 200, 8); /* exactly the limit */
    cr_assert_not_null(p4, "800 + 200 == limit fits");
    cr_expect_null(ex_allocate(a, 1, 1), "one byte over the limit fails");
    ex_deallocate(a, p1, 400, 8);
    void *p5 = ex_allocate(a, 300, 8);
    cr_assert_not_null(p5, "freeing made room");
    s = stats_of(a);
    cr_expect_eq(s.allocations, 4u);
    cr_expect_eq(s.frees, 1u);
    cr_expect_eq(s.failures, 2u);
    cr_expect_eq(s.bytes_in_use, 900u);
    cr_expect_eq(s.peak_bytes, 1000u, "peak is the limit reached with p1, p2, p4");
    ex_deallocate(a, p2, 400, 16);
    ex_deallocate(a, p4, 200, 8);
    ex_deallocate(a, p5, 300, 8);
    s = stats_of(a);
    cr_expect_eq(s.bytes_in_use, 0u);
    cr_expect_eq(s.frees, 4u);
    cr_expect_eq(s.peak_bytes, 1000u);
    expect_no_leaks();
}

Test(frame_allocators, budget_fails_when_the_underlying_allocator_fails) {
    ex_fault_allocator f;
    ex_fault_allocator_init(&f, &test_allocator);
    ex_budget_allocator b;
    ex_budget_allocator_init(&b, ex_fault_allocator_get(&f), 1000);
    const ex_allocator *a = ex_budget_allocator_get(&b);
    ex_fault_allocator_fail_nth(&f, 1);
    cr_expect_null(ex_allocate(a, 100, 8));
    ex_alloc_stats s = stats_of(a);
    cr_expect_eq(s.failures, 1u);
    cr_expect_eq(s.allocations, 0u);
    cr_expect_eq(s.bytes_in_use, 0u, "the reservation is given back when the underlying allocator fails");
    void *p = ex_allocate(a, 1000, 8);
    cr_assert_not_null(p, "the whole budget is still available");
    ex_deallocate(a, p, 1000, 8);
    expect_no_leaks();
}

Test(frame_allocators, budget_init_with_null_under_uses_the_default) {
    ex_budget_allocator b;
    ex_budget_allocator_init(&b, NULL, 100);
    long before = test_alloc_count();
    void *p = ex_allocate(ex_budget_allocator_get(&b), 10, 8);
    cr_assert_not_null(p);
    cr_expect_eq(test_alloc_count() - before, 1, "the default (test) allocator served the block");
    ex_deallocate(ex_budget_allocator_get(&b), p, 10, 8);
    expect_no_leaks();
}

#define BUDGET_THREADS 4
#define BUDGET_LIMIT 2048
#define BUDGET_ITERS 20000
#define BUDGET_SLOTS 32 /* about 16 live blocks of 136 bytes on average: one thread alone reaches the limit */

/* Bytes the test threads hold (counted after a block is obtained and before
 * it is given back, so never more than the allocator has reserved). */
static atomic_long budget_live, budget_live_max;

static void budget_note(long delta) {
    long now = atomic_fetch_add(&budget_live, delta) + delta;
    long max = atomic_load(&budget_live_max);
    while (now > max && !atomic_compare_exchange_weak(&budget_live_max, &max, now)) {}
}

typedef struct budget_arg {
    const ex_allocator *a;
    atomic_int *go;
    thread_errors *errs;
    uint32_t seed;
    long ok, failed;
} budget_arg;

static void *budget_worker(void *p) {
    budget_arg *arg = p;
    unsigned char *blk[BUDGET_SLOTS] = { 0 };
    size_t sz[BUDGET_SLOTS] = { 0 };
    unsigned char tag = (unsigned char)(arg->seed & 0xff);
    atomic_fetch_add(arg->go, 1); /* start together */
    while (atomic_load(arg->go) < BUDGET_THREADS) sched_yield();
    for (long it = 0; it < BUDGET_ITERS; it++) {
        unsigned k = lcg(&arg->seed) % BUDGET_SLOTS;
        if (blk[k]) {
            for (size_t i = 0; i < sz[k]; i++)
                if (blk[k][i] != (unsigned char)(tag + k)) {
                    terr_record(arg->errs, "budget block overwritten", (long)k, (long)i);
                    break;
                }
            budget_note(-(long)sz[k]);
            ex_deallocate(arg->a, blk[k], sz[k], 16);
            blk[k] = NULL;
        } else {
            size_t size = 16 + lcg(&arg->seed) % 241; /* 16 .. 256 */
            blk[k] = ex_allocate(arg->a, size, 16);
            if (blk[k]) {
                sz[k] = size;
                budget_note((long)size);
                memset(blk[k], (unsigned char)(tag + k), size);
                arg->ok++;
            } else {
                arg->failed++;
            }
        }
    }
    for (unsigned k = 0; k < BUDGET_SLOTS; k++)
        if (blk[k]) {
            budget_note(-(long)sz[k]);
            ex_deallocate(arg->a, blk[k], sz[k], 16);
        }
    return NULL;
}

Test(frame_allocators, budget_concurrent_allocation_never_exceeds_the_limit) {
    ex_budget_allocator b;
    ex_budget_allocator_init(&b, &test_allocator, BUDGET_LIMIT);
    thread_errors errs;
    terr_init(&errs);
    atomic_store(&budget_live, 0);
    atomic_store(&budget_live_max, 0);
    atomic_int go;
    atomic_init(&go, 0);
    budget_arg args[BUDGET_THREADS];
    pthread_t th[BUDGET_THREADS];
    for (int i = 0; i < BUDGET_THREADS; i++)
        args[i] = (budget_arg){ ex_budget_allocator_get(&b), &go, &errs, (uint32_t)(0x1234u + 77u * (unsigned)i), 0, 0 };
    start_threads(th, BUDGET_THREADS, budget_worker, args, sizeof args[0]);
    join_threads(th, BUDGET_THREADS);
    terr_check(&errs, "budget threads");
    long ok = 0, failed = 0;
    for (int i = 0; i < BUDGET_THREADS; i++) ok += args[i].ok, failed += args[i].failed;
    ex_alloc_stats s = stats_of(ex_budget_allocator_get(&b));
    cr_expect_leq(s.peak_bytes, (uint64_t)BUDGET_LIMIT, "bytes in use peaked at %llu > limit %d",
                  (unsigned long long)s.peak_bytes, BUDGET_LIMIT);
    cr_expect_gt(s.peak_bytes, (uint64_t)(BUDGET_LIMIT - 256), "the load did reach the limit");
    cr_expect_leq(atomic_load(&budget_live_max), BUDGET_LIMIT, "the threads held %ld bytes at once, over the limit %d",
                  atomic_load(&budget_live_max), BUDGET_LIMIT);
    cr_expect_eq(atomic_load(&budget_live), 0);
    cr_expect_eq(s.allocations, (uint64_t)ok);
    cr_expect_eq(s.failures, (uint64_t)failed);
    cr_expect_gt(failed, 0, "one thread alone holds more than the limit on average, so some requests failed");
    cr_expect_eq(s.frees, s.allocations);
    cr_expect_eq(s.bytes_in_use, 0u);
    expect_no_leaks();
}

/* let_value whose inner operation is allocated from the chain allocator. */
static ex_sender *budget_pipeline(const ex_allocator *a) {
    return ex_write_env(ex_let_value(ex_just(ex_int(1)), let_plus3, NULL, EX_SIG(EX_T_INT)), &ex_key_get_allocator,
                        ex_alloc_value(a));
}

Test(frame_allocators, budget_as_chain_allocator_fails_let_value_with_enomem) {
    /* The operation of the function's sender is what the chain allocates. */
    ex_value one = ex_int(1);
    ex_sender *inner = let_plus3(NULL, &one, 1);
    size_t need = ex_sender_op_size(inner);
    ex_sender_release(inner);
    cr_assert_gt(need, 0u);

    ex_budget_allocator small;
    ex_budget_allocator_init(&small, &test_allocator, need - 1);
    ex_result r = ex_sync_wait(budget_pipeline(ex_budget_allocator_get(&small)));
    expect_error(&r, EX_ENOMEM);
    ex_result_destroy(&r);
    ex_alloc_stats s = stats_of(ex_budget_allocator_get(&small));
    cr_expect_geq(s.failures, 1u, "the budget refused the inner operation");
    cr_expect_eq(s.allocations, s.frees);
    cr_expect_eq(s.bytes_in_use, 0u);

    ex_budget_allocator zero;
    ex_budget_allocator_init(&zero, &test_allocator, 0);
    r = ex_sync_wait(budget_pipeline(ex_budget_allocator_get(&zero)));
    expect_error(&r, EX_ENOMEM);
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(frame_allocators, budget_as_chain_allocator_large_enough_gives_the_value) {
    ex_value one = ex_int(1);
    ex_sender *inner = let_plus3(NULL, &one, 1);
    size_t need = ex_sender_op_size(inner);
    ex_sender_release(inner);

    ex_budget_allocator exact;
    ex_budget_allocator_init(&exact, &test_allocator, need);
    ex_result r = ex_sync_wait(budget_pipeline(ex_budget_allocator_get(&exact)));
    expect_value_int(&r, 4);
    ex_result_destroy(&r);
    ex_alloc_stats s = stats_of(ex_budget_allocator_get(&exact));
    cr_expect_eq(s.allocations, 1u, "one allocation from the chain allocator: the inner operation");
    cr_expect_eq(s.peak_bytes, (uint64_t)need);
    cr_expect_eq(s.failures, 0u);
    cr_expect_eq(s.frees, 1u);
    cr_expect_eq(s.bytes_in_use, 0u);

    ex_budget_allocator big;
    ex_budget_allocator_init(&big, &test_allocator, 1 << 20);
    for (int i = 0; i < 10; i++) {
        r = ex_sync_wait(budget_pipeline(ex_budget_allocator_get(&big)));
        expect_value_int(&r, 4);
        ex_result_destroy(&r);
    }
    s = stats_of(ex_budget_allocator_get(&big));
    cr_expect_eq(s.allocations, 10u);
    cr_expect_eq(s.frees, 10u);
    cr_expect_eq(s.bytes_in_use, 0u);
    expect_no_leaks();
}

