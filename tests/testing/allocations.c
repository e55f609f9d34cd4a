/* SPDX-License-Identifier: MIT */
/* The allocation check of cexec/testing.h (ex_test_allocations,
 * EX_CHECK_ALLOCATIONS, EX_ASSERT_NO_LEAKS): it finds what a test body
 * left allocated, through which allocator, and waits for frees still on
 * their way. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <cexec/testing.h>

#include "common/helpers.h"

/* The suite's default allocator must keep statistics to be watched:
 * a budget allocator without a limit, over the counting test_allocator
 * (so expect_no_leaks still sees every block). */
static ex_budget_allocator counted_default;

static void counted_setup(void) {
    test_setup();
    ex_budget_allocator_init(&counted_default, &test_allocator, SIZE_MAX);
    ex_set_default_allocator(ex_budget_allocator_get(&counted_default));
}

TestSuite(testing_allocations, .init = counted_setup, .fini = test_teardown, .timeout = 30);

Test(testing_allocations, a_body_that_frees_everything_passes) {
    EX_CHECK_ALLOCATIONS(
        ex_test_outcome o;
        ex_test_outcome_init(&o);
        ex_test_start(&o, ex_then(ex_just(ex_int(1)), add_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)));
        EX_ASSERT_VALUE_INT(&o, 2);
        ex_test_outcome_destroy(&o);
    );
    ex_test_allocations c;
    ex_test_allocations_begin(&c);
    cr_assert_eq(c.settle_ms, 2000);
    ex_sender_release(ex_just(ex_int(3)));
    char msg[EX_TEST_MESSAGE_MAX];
    cr_assert(ex_test_check_no_leaks(msg, sizeof msg, &c), "%s", msg);
    cr_assert_str_eq(msg, "no block leaked through the 1 allocator watched");
    expect_no_leaks();
}

Test(testing_allocations, a_sender_left_behind_is_reported_with_its_allocator) {
    ex_test_allocations c;
    ex_test_allocations_begin(&c);
    c.settle_ms = 0;  /* nothing is on its way: report at once */
    ex_sender *s = ex_just(ex_int(1));
    char msg[EX_TEST_MESSAGE_MAX];
    cr_assert_not(ex_test_check_no_leaks(msg, sizeof msg, &c));
    char want[EX_TEST_MESSAGE_MAX];
    snprintf(want, sizeof want,
             "\"budget\" (the default allocator) leaked 1 block (%u bytes) during the check (1 allocations, 0 frees)",
             s->size);
    cr_assert_str_eq(msg, want);
    ex_sender_release(s);
    cr_assert(ex_test_check_no_leaks(msg, sizeof msg, &c), "%s", msg);
    expect_no_leaks();
}

/* A block from before the check, freed during it, is no leak (and the
 * check counts blocks: a leak of the same size would hide behind it). */
Test(testing_allocations, blocks_from_before_the_check_may_go_during_it) {
    ex_sender *old = ex_just(ex_int(1));
    ex_test_allocations c;
    ex_test_allocations_begin(&c);
    c.settle_ms = 0;
    ex_sender_release(old);
    char msg[EX_TEST_MESSAGE_MAX];
    cr_assert(ex_test_check_no_leaks(msg, sizeof msg, &c), "%s", msg);
    expect_no_leaks();
}

/* An operation state from the outcome's own allocator: watched, it is a
 * leak until the outcome is destroyed. */
Test(testing_allocations, another_watched_allocator_is_named_in_the_message) {
    ex_budget_allocator chain;
    ex_budget_allocator_init(&chain, &test_allocator, SIZE_MAX);
    ex_test_allocations c;
    ex_test_allocations_begin(&c);
    c.settle_ms = 0;
    ex_test_allocations_watch(&c, ex_budget_allocator_get(&chain));
    ex_test_allocations_watch(&c, ex_budget_allocator_get(&chain));  /* once is enough */
    ex_test_allocations_watch(&c, ex_default_allocator());
    ex_test_outcome o;
    ex_test_outcome_init(&o);
    ex_test_outcome_set_allocator(&o, ex_budget_allocator_get(&chain));
    ex_test_start(&o, ex_just(ex_int(1)));
    char msg[EX_TEST_MESSAGE_MAX];
    cr_assert_not(ex_test_check_no_leaks(msg, sizeof msg, &c));
    cr_assert(strncmp(msg, "\"budget\" leaked 1 block (", 25) == 0, "%s", msg);
    cr_assert(strstr(msg, "(1 allocations, 0 frees)") != NULL, "%s", msg);
    ex_test_outcome_destroy(&o);
    cr_assert(ex_test_check_no_leaks(msg, sizeof msg, &c), "%s", msg);
    cr_assert_str_eq(msg, "no block leaked through the 2 allocators watched");
    expect_no_leaks();
}

Test(testing_allocations, leaks_through_two_allocators_are_both_reported) {
    ex_budget_allocator chain;
    ex_budget_allocator_init(&chain, &test_allocator, SIZE_MAX);
    ex_test_allocations c;
    ex_test_allocations_begin(&c);
    c.settle_ms = 0;
    ex_test_allocations_watch(&c, ex_budget_allocator_get(&chain));
    ex_sender *s1 = ex_just(ex_int(1)), *s2 = ex_just(ex_int(2));
    void *block = ex_allocate(ex_budget_allocator_get(&chain), 24, 8);
    char msg[EX_TEST_MESSAGE_MAX];
    cr_assert_not(ex_test_check_no_leaks(msg, sizeof msg, &c));
    char want[EX_TEST_MESSAGE_MAX];
    snprintf(want, sizeof want,
             "\"budget\" (the default allocator) leaked 2 blocks (%u bytes) during the check (2 allocations, 0 "
             "frees); \"budget\" leaked 1 block (24 bytes) during the check (1 allocations, 0 frees)",
             s1->size + s2->size);
    cr_assert_str_eq(msg, want);
    ex_deallocate(ex_budget_allocator_get(&chain), block, 24, 8);
    ex_sender_release(s1);
    ex_sender_release(s2);
    expect_no_leaks();
}

/* test_allocator keeps no statistics: the check cannot be trusted and
 * says so instead of passing. */
Test(testing_allocations, an_allocator_without_statistics_fails_the_check) {
    ex_set_default_allocator(&test_allocator);
    ex_test_allocations c;
    ex_test_allocations_begin(&c);
    char msg[EX_TEST_MESSAGE_MAX];
    cr_assert_not(ex_test_check_no_leaks(msg, sizeof msg, &c));
    cr_assert_str_eq(msg, "cannot check allocator \"test\": it keeps no statistics (ex_alloc_stats); wrap it in an "
                          "ex_budget_allocator to watch it");
    ex_set_default_allocator(ex_budget_allocator_get(&counted_default));
    ex_test_allocations_begin(&c);
    ex_test_allocations_watch(&c, NULL);
    cr_assert_not(ex_test_check_no_leaks(msg, sizeof msg, &c));
    cr_assert_str_eq(msg, "cannot check allocator \"(unnamed)\": ex_test_allocations_watch was given a NULL allocator");
    expect_no_leaks();
}

Test(testing_allocations, more_allocators_than_it_watches_fail_the_check) {
    ex_budget_allocator many[EX_TEST_WATCH_MAX];
    ex_test_allocations c;
    ex_test_allocations_begin(&c);
    for (int i = 0; i < EX_TEST_WATCH_MAX; i++) {
        ex_budget_allocator_init(&many[i], &test_allocator, SIZE_MAX);
        ex_test_allocations_watch(&c, ex_budget_allocator_get(&many[i]));
    }
    char msg[EX_TEST_MESSAGE_MAX];
    cr_assert_not(ex_test_check_no_leaks(msg, sizeof msg, &c));
    cr_assert_str_eq(msg, "cannot check allocator \"budget\": more than EX_TEST_WATCH_MAX allocators watched");
    expect_no_leaks();
}

/* A block another thread frees a moment after the check began waiting:
 * the check waits for it (bounded by settle_ms) instead of reporting it. */
static void *release_later(void *arg) {
    test_sleep_ms(50);
    ex_sender_release(arg);
    return NULL;
}

Test(testing_allocations, the_check_waits_for_frees_on_their_way) {
    ex_test_allocations c;
    ex_test_allocations_begin(&c);
    c.settle_ms = (unsigned)(TEST_WAIT_LIMIT_S * 1000);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, release_later, ex_just(ex_int(1))), 0);
    char msg[EX_TEST_MESSAGE_MAX];
    cr_assert(ex_test_check_no_leaks(msg, sizeof msg, &c), "%s", msg);
    pthread_join(t, NULL);
    expect_no_leaks();
}

/* The process's own default (the built-in recycling allocator) counts
 * the blocks its users hold, cached ones aside. */
Test(testing_allocations, the_builtin_default_is_watched_too) {
    ex_set_default_allocator(NULL);
    ex_sender_release(ex_just(ex_int(0)));  /* a block in this thread's cache */
    ex_test_allocations c;
    ex_test_allocations_begin(&c);
    c.settle_ms = 0;
    ex_sender *s = ex_just(ex_int(1));
    char msg[EX_TEST_MESSAGE_MAX];
    cr_assert_not(ex_test_check_no_leaks(msg, sizeof msg, &c));
    cr_assert(strstr(msg, "(the default allocator) leaked 1 block (") != NULL, "%s", msg);
    ex_sender_release(s);
    cr_assert(ex_test_check_no_leaks(msg, sizeof msg, &c), "%s", msg);
    ex_set_default_allocator(ex_budget_allocator_get(&counted_default));
    expect_no_leaks();
}
