/* SPDX-License-Identifier: MIT */
/* Frame allocators (cexec/allocator.h, cexec/allocators.h): the libc
 * allocator, the statistics call, the process default and the built-in
 * recycling default, and fork() with their locks held.  The other
 * frame_allocators files: budget.c, monotonic.c, fault.c, recycling.c,
 * frame_propagation.c, frame_oom_sweeps.c; the suite is declared here. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <signal.h>
#include <sys/wait.h>

#include "allocators/alloc_fixtures.h"
#include "allocators/exi_builtin.h"

TEST_SUITE(frame_allocators, 30);

/* ================================================================= libc */

Test(frame_allocators, libc_counters_move) {
    const ex_allocator *a = ex_libc_allocator();
    cr_assert_not_null(a);
    cr_assert_not_null(a->stats, "the libc allocator keeps statistics");
    ex_alloc_stats s0 = stats_of(a);
    size_t sizes[3] = { 100, 200, 300 };
    void *p[3];
    for (int i = 0; i < 3; i++) {
        p[i] = ex_allocate(a, sizes[i], 8);
        cr_assert_not_null(p[i]);
        memset(p[i], 0xA5, sizes[i]);
    }
    ex_alloc_stats s1 = stats_of(a);
    /* Process-wide counters: compare deltas. */
    cr_expect_eq(s1.allocations - s0.allocations, 3u, "allocations moved by %llu",
                 (unsigned long long)(s1.allocations - s0.allocations));
    cr_expect_eq(s1.frees - s0.frees, 0u);
    cr_expect_eq(s1.bytes_in_use - s0.bytes_in_use, 600u, "bytes in use are the bytes requested (moved by %llu)",
                 (unsigned long long)(s1.bytes_in_use - s0.bytes_in_use));
    cr_expect_geq(s1.peak_bytes, s0.bytes_in_use + 600u, "peak covers the three live blocks");
    cr_expect_geq(s1.peak_bytes, s0.peak_bytes, "peak never decreases");
    for (int i = 0; i < 3; i++) ex_deallocate(a, p[i], sizes[i], 8);
    ex_alloc_stats s2 = stats_of(a);
    cr_expect_eq(s2.frees - s0.frees, 3u);
    cr_expect_eq(s2.bytes_in_use, s0.bytes_in_use, "freeing gives the bytes back");
    cr_expect_eq(s2.peak_bytes, s1.peak_bytes, "freeing does not lower the peak");
    cr_expect_eq(s2.failures, s0.failures);
    expect_no_leaks();
}

Test(frame_allocators, libc_honours_alignment) {
    const ex_allocator *a = ex_libc_allocator();
    static const size_t aligns[] = { 1, 8, 16, 64, 4096 };
    static const size_t sizes[] = { 1, 24, 100, 4096, 10000 };
    ex_alloc_stats s0 = stats_of(a);
    unsigned long n = 0;
    for (size_t i = 0; i < sizeof aligns / sizeof *aligns; i++)
        for (size_t j = 0; j < sizeof sizes / sizeof *sizes; j++) {
            void *p = a->allocate(a->ctx, sizes[j], aligns[i]);
            cr_assert_not_null(p, "size %zu align %zu", sizes[j], aligns[i]);
            cr_assert(aligned_to(p, aligns[i]), "size %zu: %p is not aligned to %zu", sizes[j], p, aligns[i]);
            memset(p, 0x5A, sizes[j]); /* the whole block is usable */
            a->deallocate(a->ctx, p, sizes[j], aligns[i]);
            n++;
        }
    ex_alloc_stats s1 = stats_of(a);
    cr_expect_eq(s1.allocations - s0.allocations, n);
    cr_expect_eq(s1.frees - s0.frees, n);
    cr_expect_eq(s1.bytes_in_use, s0.bytes_in_use);
    expect_no_leaks();
}

Test(frame_allocators, stats_reject_null_and_allocators_without_counters) {
    ex_alloc_stats s;
    cr_expect_eq(ex_allocator_stats(NULL, &s).code, EX_EINVAL);
    cr_expect_eq(ex_allocator_stats(ex_libc_allocator(), NULL).code, EX_EINVAL);
    ex_error e = ex_allocator_stats(&test_allocator, &s); /* keeps none */
    cr_expect_eq(e.code, EX_EINVAL);
    cr_expect_not_null(e.msg);
    expect_no_leaks();
}

Test(frame_allocators, default_allocator_set_and_restore) {
    cr_assert_eq(ex_default_allocator(), &test_allocator, "the fixture installs the test allocator");
    ex_set_default_allocator(NULL);
    cr_expect_eq(ex_default_allocator(), ex_builtin_allocator(), "NULL restores the built-in default");
    ex_set_default_allocator(ex_libc_allocator());
    cr_expect_eq(ex_default_allocator(), ex_libc_allocator());
    ex_budget_allocator b;
    ex_budget_allocator_init(&b, &test_allocator, 1 << 20);
    ex_set_default_allocator(ex_budget_allocator_get(&b));
    cr_expect_eq(ex_default_allocator(), ex_budget_allocator_get(&b));
    ex_sender *s = ex_just(ex_int(3));
    cr_expect_eq(s->alloc, ex_budget_allocator_get(&b), "a sender comes from the default allocator of its time");
    ex_set_default_allocator(&test_allocator);
    ex_sender_release(s); /* frees through the allocator that made it */
    ex_alloc_stats bs = stats_of(ex_budget_allocator_get(&b));
    cr_expect_eq(bs.allocations, 1u);
    cr_expect_eq(bs.frees, 1u);
    cr_expect_eq(bs.bytes_in_use, 0u);
    expect_no_leaks();
}

/* The built-in default recycles: a sender's block comes back for the next
 * sender of its size class on this thread, the counters balance, and a
 * thread that built and released senders leaves nothing in use. */
static void *build_and_release(void *arg) {
    (void)arg;
    for (int i = 0; i < 100; i++) ex_sender_release(ex_just(ex_int(i)));
    return NULL;
}

Test(frame_allocators, the_builtin_default_recycles_sender_blocks) {
    const ex_allocator *b = ex_builtin_allocator();
    cr_assert_not_null(b);
    cr_expect_eq(ex_builtin_allocator(), b, "made once");
    cr_expect_str_eq(b->name, "recycling");
    ex_set_default_allocator(NULL);
    ex_alloc_stats s0 = stats_of(b);
    ex_sender *s = ex_just(ex_int(1));
    cr_assert_eq(s->alloc, b);
    void *first = s;
    ex_sender_release(s);
    ex_sender *again = ex_just(ex_int(2));
    cr_expect_eq((void *)again, first, "the freed block is handed out again");
    ex_result r = ex_sync_wait(again);
    cr_expect_eq(r.values[0].as.i, 2);
    ex_alloc_stats l0 = stats_of(ex_libc_allocator());
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, build_and_release, NULL), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    ex_alloc_stats l1 = stats_of(ex_libc_allocator());
    cr_expect_eq(l1.bytes_in_use, l0.bytes_in_use, "the exited thread's cache went back to malloc");
    cr_expect_gt(l1.allocations, l0.allocations, "the thread's cache came from malloc");
    ex_alloc_stats s1 = stats_of(b);
    cr_expect_eq(s1.allocations - s0.allocations, 102u);
    cr_expect_eq(s1.frees - s0.frees, 102u);
    cr_expect_eq(s1.bytes_in_use, s0.bytes_in_use, "nothing left in use");
    ex_set_default_allocator(&test_allocator);
    expect_no_leaks();
}

/* fork() while another thread holds the built-in default's locks (as a
 * thread inside a depot hand-over does): the child, which allocates
 * senders through the same allocator, must not find them held by a thread
 * it does not have.  The other thread here holds every lock for a while,
 * deterministically, through the fork handlers' own entry points; the
 * child then goes through the shared depot.  Without the handlers the
 * child hangs on the depot's lock. */

enum { FORK_SENDERS = 600 };

static void senders_through_the_depot(void) {
    static ex_sender *held[FORK_SENDERS];
    for (int i = 0; i < FORK_SENDERS; i++) held[i] = ex_just(ex_int(i));
    for (int i = 0; i < FORK_SENDERS; i++) ex_sender_release(held[i]);  /* spills to the depot */
    for (int i = 0; i < FORK_SENDERS; i++) held[i] = ex_just(ex_int(i));  /* refills from it */
    for (int i = 0; i < FORK_SENDERS; i++) ex_sender_release(held[i]);
}

/* Waits up to 5 s for a child; kills it and returns false if it is stuck. */
static bool child_exits_in_time(pid_t pid, int *status) {
    struct timespec nap = { 0, 1000000 };
    for (int waited = 0; waited < 5000; waited++) {
        if (waitpid(pid, status, WNOHANG) != 0) return true;
        nanosleep(&nap, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, status, 0);
    return false;
}

static atomic_int locks_held;

static void *hold_the_locks(void *arg) {
    (void)arg;
    exi_builtin_prefork();
    atomic_store(&locks_held, 1);
    struct timespec d = { 0, 200 * 1000000 };
    nanosleep(&d, NULL);  /* the main thread forks meanwhile */
    exi_builtin_postfork();
    return NULL;
}

Test(frame_allocators, fork_while_another_thread_holds_the_builtin_defaults_locks) {
    ex_set_default_allocator(NULL);
    ex_sender_release(ex_just(ex_int(0)));  /* the built-in default exists */
    atomic_store(&locks_held, 0);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, hold_the_locks, NULL), 0);
    while (!atomic_load(&locks_held)) sched_yield();
    pid_t pid = fork();  /* the handlers wait for the other thread to let go */
    cr_assert_geq(pid, 0, "fork failed");
    if (pid == 0) {
        senders_through_the_depot();
        _exit(0);
    }
    int status = 0;
    bool hung = !child_exits_in_time(pid, &status);
    pthread_join(t, NULL);
    cr_expect(!hung, "the child hung on a lock of the default allocator held by a thread it does not have");
    cr_expect(hung || (WIFEXITED(status) && WEXITSTATUS(status) == 0), "the child failed (status %d)", status);
    senders_through_the_depot();  /* the parent's allocator works too */
    ex_set_default_allocator(&test_allocator);
    expect_no_leaks();
}

/* The libc allocator lists each thread's counters, which live in that
 * thread's thread-local storage.  In a child of fork() the parent's other
 * threads are gone and glibc hands their stacks (with that storage) to the
 * threads the child creates: a listed record of a vanished thread must not
 * be listed a second time by the new thread that reuses it (a cycle in the
 * list would make the statistics loop for ever). */
static pthread_mutex_t park_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t park_cv = PTHREAD_COND_INITIALIZER;
static int park_state;  /* 1: the thread is listed and waits; 2: let it go */

static void *listed_and_parked(void *arg) {
    (void)arg;
    ex_deallocate(ex_libc_allocator(), ex_allocate(ex_libc_allocator(), 64, 16), 64, 16);
    pthread_mutex_lock(&park_mu);
    park_state = 1;
    pthread_cond_broadcast(&park_cv);
    while (park_state != 2) pthread_cond_wait(&park_cv, &park_mu);
    pthread_mutex_unlock(&park_mu);
    return NULL;
}

/* Lists this thread, then sums the list while the thread still lives. */
static void *allocate_through_libc(void *arg) {
    (void)arg;
    ex_deallocate(ex_libc_allocator(), ex_allocate(ex_libc_allocator(), 64, 16), 64, 16);
    ex_alloc_stats st;
    if (ex_allocator_stats(ex_libc_allocator(), &st).code) _exit(3);  /* loops for ever on a cycle */
    return NULL;
}

Test(frame_allocators, a_forked_child_lists_only_its_own_threads) {
    (void)ex_libc_allocator();  /* nothing to make: the handlers come with the first libc allocation */
    park_state = 0;
    pthread_t parked;
    cr_assert_eq(pthread_create(&parked, NULL, listed_and_parked, NULL), 0);
    pthread_mutex_lock(&park_mu);
    while (park_state != 1) pthread_cond_wait(&park_cv, &park_mu);
    pthread_mutex_unlock(&park_mu);
    pid_t pid = fork();
    cr_assert_geq(pid, 0, "fork failed");
    if (pid == 0) {
        for (int i = 0; i < 4; i++) {  /* new threads, on the vanished thread's stack */
            pthread_t t;
            if (pthread_create(&t, NULL, allocate_through_libc, NULL) || pthread_join(t, NULL)) _exit(2);
        }
        _exit(0);
    }
    int status = 0;
    bool hung = !child_exits_in_time(pid, &status);
    pthread_mutex_lock(&park_mu);
    park_state = 2;
    pthread_cond_broadcast(&park_cv);
    pthread_mutex_unlock(&park_mu);
    pthread_join(parked, NULL);
    cr_expect(!hung, "the child's statistics never returned: its thread list has a cycle");
    cr_expect(hung || (WIFEXITED(status) && WEXITSTATUS(status) == 0), "the child failed (status %d)", status);
    expect_no_leaks();
}

