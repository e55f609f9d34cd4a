/* SPDX-License-Identifier: MIT */
/* The fault-injecting allocator: the nth allocation, random failures per
 * seed and rate (suite frame_allocators, declared in libc_default.c). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "allocators/alloc_fixtures.h"

/* ================================================================ fault */

Test(frame_allocators, fault_fail_nth_fails_exactly_that_allocation) {
    ex_fault_allocator f;
    ex_fault_allocator_init(&f, &test_allocator);
    const ex_allocator *a = ex_fault_allocator_get(&f);
    void *keep[40];
    int nkeep = 0;
    for (int i = 0; i < 5; i++) cr_assert_not_null(keep[nkeep++] = ex_allocate(a, 32, 8), "before fail_nth: %d", i);
    ex_fault_allocator_fail_nth(&f, 3);
    for (int i = 1; i <= 20; i++) {
        void *p = ex_allocate(a, 32, 8);
        if (i == 3) {
            cr_expect_null(p, "allocation 3 after fail_nth(3) fails");
        } else {
            cr_expect_not_null(p, "allocation %d after fail_nth(3) succeeds", i);
            if (p) keep[nkeep++] = p;
        }
    }
    cr_expect_eq(ex_fault_allocator_count(&f), 25u, "count includes the failed allocation");
    ex_alloc_stats s = stats_of(a);
    cr_expect_eq(s.failures, 1u);
    cr_expect_eq(s.allocations, 24u);
    cr_expect_eq(s.bytes_in_use, 24u * 32u);
    cr_expect_eq(test_stats.allocs, 24, "the failed request never reached the underlying allocator");

    ex_fault_allocator_fail_nth(&f, 1);
    cr_expect_null(ex_allocate(a, 8, 8), "fail_nth(1): the very next one fails");
    ex_fault_allocator_fail_nth(&f, 2);
    ex_fault_allocator_fail_nth(&f, 0);
    for (int i = 0; i < 5; i++) {
        void *p = ex_allocate(a, 8, 8);
        cr_expect_not_null(p, "fail_nth(0) turned failures off");
        ex_deallocate(a, p, 8, 8);
    }
    for (int i = 0; i < nkeep; i++) ex_deallocate(a, keep[i], 32, 8);
    s = stats_of(a);
    cr_expect_eq(s.failures, 2u);
    cr_expect_eq(s.frees, s.allocations);
    cr_expect_eq(s.bytes_in_use, 0u);
    expect_no_leaks();
}

static void random_pattern(uint64_t seed, uint32_t per_million, bool *out, int n) {
    ex_fault_allocator f;
    ex_fault_allocator_init(&f, &test_allocator);
    ex_fault_allocator_fail_randomly(&f, seed, per_million);
    const ex_allocator *a = ex_fault_allocator_get(&f);
    for (int i = 0; i < n; i++) {
        void *p = ex_allocate(a, 8, 8);
        out[i] = p == NULL;
        ex_deallocate(a, p, 8, 8);
    }
}

Test(frame_allocators, fault_random_failures_are_deterministic_per_seed) {
    enum { N = 4000 };
    static bool a[N], b[N], c[N];
    random_pattern(42, 100000, a, N);
    random_pattern(42, 100000, b, N);
    random_pattern(43, 100000, c, N);
    int fails = 0, diff_same = 0, diff_other = 0;
    for (int i = 0; i < N; i++) {
        fails += a[i];
        diff_same += a[i] != b[i];
        diff_other += a[i] != c[i];
    }
    cr_expect_eq(diff_same, 0, "the same seed fails the same allocations (%d differ)", diff_same);
    cr_expect_gt(diff_other, 0, "another seed gives another pattern");
    cr_expect(fails > 0 && fails < N, "some, not all, fail (%d)", fails);
    /* seed 0 is replaced by a fixed non-zero seed: still deterministic */
    random_pattern(0, 100000, a, N);
    random_pattern(0, 100000, b, N);
    fails = 0;
    for (int i = 0; i < N; i++) {
        fails += a[i];
        cr_assert_eq(a[i], b[i], "seed 0, allocation %d", i);
    }
    cr_expect_gt(fails, 0, "seed 0 does not disable the failures");
    expect_no_leaks();
}

Test(frame_allocators, fault_random_rate_is_roughly_right) {
    enum { N = 100000 };
    ex_fault_allocator f;
    ex_fault_allocator_init(&f, &test_allocator);
    ex_fault_allocator_fail_randomly(&f, 0xC0FFEE, 100000); /* 10% */
    const ex_allocator *a = ex_fault_allocator_get(&f);
    long fails = 0;
    for (int i = 0; i < N; i++) {
        void *p = ex_allocate(a, 16, 16);
        if (!p) fails++;
        ex_deallocate(a, p, 16, 16);
    }
    cr_expect(fails >= 8000 && fails <= 12000, "10%% of %d should fail, %ld did", N, fails);
    ex_alloc_stats s = stats_of(a);
    cr_expect_eq(s.failures, (uint64_t)fails);
    cr_expect_eq(s.allocations, (uint64_t)(N - fails));
    cr_expect_eq(s.frees, s.allocations);
    cr_expect_eq(ex_fault_allocator_count(&f), (uint64_t)N);

    ex_fault_allocator_fail_randomly(&f, 5, 0);
    for (int i = 0; i < 1000; i++) {
        void *p = ex_allocate(a, 16, 16);
        cr_assert_not_null(p, "rate 0: nothing fails");
        ex_deallocate(a, p, 16, 16);
    }
    ex_fault_allocator_fail_randomly(&f, 5, 1000000);
    for (int i = 0; i < 1000; i++) cr_assert_null(ex_allocate(a, 16, 16), "rate 1e6: everything fails");
    ex_fault_allocator_fail_randomly(&f, 5, 2000000); /* clamped */
    cr_expect_null(ex_allocate(a, 16, 16));
    expect_no_leaks();
}

