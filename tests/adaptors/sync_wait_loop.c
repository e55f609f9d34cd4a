/* SPDX-License-Identifier: MIT */
/* ex_sync_wait's own run loop: a post made, from start to wake-up, between
 * the waiter's last look for items and its sleep is not lost.  The test
 * hook (base/exi_test_hooks.h) runs exactly there and makes a whole post
 * from another thread before the waiter sleeps; with the post's pin as the
 * only change to the futex word, the word was back to the value the
 * waiter compares, and the waiter slept for good (a task changing back to
 * a sync_wait's scheduler hung about once in 70 runs). */
#include <pthread.h>

#include "common/helpers.h"
#include "base/exi_test_hooks.h"

TEST_SUITE(sync_wait_loop, 20);

static test_op *pending;          /* the operation the post completes */
static ex_scheduler loop_sched;   /* the waiter's loop (get_scheduler) */
static ex_work completion;
static atomic_int hook_calls, posted;

static void complete_pending(ex_work *w) {
    (void)w;
    ex_value v = ex_int(7);
    ex_set_value(pending->r, &v, 1);
}

static void start_pending(test_op *op) {
    pending = op;
    cr_assert(ex_get_scheduler(ex_receiver_env(op->r), &loop_sched), "sync_wait's environment has no scheduler");
}

static void *post_from_elsewhere(void *arg) {
    (void)arg;
    completion = (ex_work){ NULL, complete_pending, NULL };
    ex_error e = ex_post(loop_sched, &completion);  /* returns after its wake-up */
    atomic_store(&posted, e.code == EX_OK);
    return NULL;
}

/* The waiter found nothing and is about to sleep: a whole post now. */
static void post_before_sleep(void) {
    if (atomic_fetch_add(&hook_calls, 1) != 0) return;
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, post_from_elsewhere, NULL), 0);
    pthread_join(th, NULL);
}

Test(sync_wait_loop, a_post_between_the_last_look_and_the_sleep_wakes_the_waiter) {
    static const ex_sigs sigs = { 1, 0, { { 1, { EX_T_INT } } } };
    exi_sync_sleep_hook = post_before_sleep;
    ex_result r = ex_sync_wait(test_sender_new(start_pending, NULL, &sigs));
    exi_sync_sleep_hook = NULL;
    cr_assert_geq(atomic_load(&hook_calls), 1, "the waiter never went to sleep");
    cr_assert(atomic_load(&posted));
    expect_value_int(&r, 7);
    ex_result_destroy(&r);
    expect_no_leaks();
}
