/* SPDX-License-Identifier: MIT */
/* test_alloc.h - the test allocators: the counting / fault-injecting
 * default every suite installs (test_allocator, with the leak check each
 * test ends with), and cnt_alloc, a counting / failing allocator a test
 * owns and hands to a pool, a task, an environment or a stack option. */
#ifndef CEXEC_TEST_ALLOC_H
#define CEXEC_TEST_ALLOC_H

#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <cexec/cexec.h>

/* ------------------------------------------- the suite's default allocator */

typedef struct test_alloc_stats {
    long allocs, frees, failed;
    long in_use;        /* blocks not yet freed */
    long fail_at;       /* fail the allocation with this 1-based number (0: never) */
} test_alloc_stats;

/* The allocator all tests install as the default (see TEST_SUITE).
 * Thread-safe. */
extern ex_allocator test_allocator;
extern test_alloc_stats test_stats;

void test_alloc_reset(void);          /* zero the counters, no failure */
void test_alloc_fail_at(long nth);    /* fail allocation number nth from now on (1-based) */
long test_alloc_count(void);          /* allocations so far (including failed) */

/* Suite init/fini: install test_allocator as the default. */
void test_setup(void);
void test_teardown(void);

/* Asserts that every block from test_allocator was freed and, in sanitizer
 * builds, that LeakSanitizer finds nothing.  Call at the end of a test body
 * (assertions in .fini do not fail a test). */
void expect_no_leaks(void);

#define TEST_SUITE(name, secs) TestSuite(name, .init = test_setup, .fini = test_teardown, .timeout = secs)

/* ------------------------------------------ a counting allocator you own */

/* Counts calls, blocks and bytes; fails chosen calls; remembers the last
 * block given and freed (stack allocator checks); optionally scribbles
 * over freed memory.  Thread-safe counters; last_* / freed_* are for
 * single-threaded checks.  Blocks come from `under` (NULL: posix_memalign). */
typedef struct cnt_alloc {
    ex_allocator base;           /* hand &a->base to the code under test */
    const ex_allocator *under;
    atomic_long calls;           /* allocate calls, failed ones included */
    atomic_long allocs, frees;   /* blocks given and taken back */
    atomic_long in_use;          /* blocks not yet freed */
    atomic_long bytes;           /* bytes not yet freed */
    atomic_long failed;          /* calls made to fail */
    atomic_long fail_at;         /* fail call number fail_at (1-based, counted in calls); 0: never */
    atomic_long fail_next;       /* fail this many of the next calls */
    void *last_p;
    size_t last_size, last_align;
    void *freed_p;
    size_t freed_size, freed_align;
    bool scribble;               /* fill freed blocks with 0xA5 */
} cnt_alloc;

/* Zeroed counters, over posix_memalign, named "test.counting". */
void cnt_alloc_init(cnt_alloc *a);
/* The same, taking its blocks from under (e.g. &test_allocator). */
void cnt_alloc_init_over(cnt_alloc *a, const ex_allocator *under, const char *name);
/* Fails the nth call from now on (1-based). */
void cnt_alloc_fail_nth(cnt_alloc *a, long nth);
/* Asserts every block was given back (what names the allocator). */
void cnt_alloc_expect_balanced(cnt_alloc *a, const char *what);

/* ----------------------------------------------- a guard-page allocator */

/* Each block gets pages of its own (at most GUARD_MAX blocks); a freed
 * block stays mapped but inaccessible until guard_alloc_fini, so any late
 * access faults, in plain builds too.  Allocations are not thread-safe:
 * make them from one thread. */
enum { GUARD_MAX = 16 };
typedef struct guard_alloc {
    ex_allocator base;           /* hand &g->base to the code under test */
    void *maps[GUARD_MAX];
    size_t lens[GUARD_MAX];
    int n;
} guard_alloc;

/* No block yet, named "test.guard". */
void guard_alloc_init(guard_alloc *g);
/* Unmaps every block (freed or not). */
void guard_alloc_fini(guard_alloc *g);

#endif
