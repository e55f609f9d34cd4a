/* SPDX-License-Identifier: MIT */
/* [exec.split]: stop tokens - split's own stop source, stop requests of
 * consumers and when the last consumer leaves.
 *
 * Nothing here asserts on timing: sleeps only give threads a chance to reach
 * a point, and every wait on asynchronous work is bounded so that a lost
 * completion or a missing stop request fails the test with a message
 * instead of hanging. */
#include <stdlib.h>
#include <string.h>

#include "compose/compose_fixtures.h"

/* ------------------------------------------------------------- stop tokens */

POOL_TEST(exec_split, stop_from_one_consumer_stops_the_shared_work_for_all, 2) {
    spin_ctx sc;
    spin_init(&sc);
    ex_sender *sp = ex_split(spinner(ex_pool_scheduler(p), &sc));
    enum { N = 3 };
    trec a[N];
    ex_operation *op[N];
    connect_consumers(sp, a, op, N);
    rec_with_stop(&a[1].r); /* only the second consumer has a stop token */
    for (int i = 0; i < N; i++) ex_start(op[i]);
    cr_assert_geq(wait_int_reaches(&sc.entered, 1), 1, "the shared work did not start");
    for (int i = 0; i < N; i++) cr_assert_eq(atomic_load(&a[i].done), 0, "consumer %d completed before the stop request", i);
    ex_stop_source_request_stop(&a[1].r.stop);
    for (int i = 0; i < N; i++) trec_wait_done(&a[i]);
    cr_assert_eq(atomic_load(&sc.timed_out), 0, "one consumer's stop request did not reach the shared work");
    cr_assert_eq(atomic_load(&sc.not_possible), 0, "the shared work's stop token must be stoppable");
    cr_assert_eq(atomic_load(&sc.saw_stop), 1);
    cr_assert_eq(atomic_load(&sc.entered), 1, "the child ran once");
    for (int i = 0; i < N; i++) {
        rec_expect_stopped(&a[i].r);
    }
    /* A late consumer gets the stored stopped result. */
    ex_result r = ex_sync_wait(ex_sender_retain(sp));
    cr_assert_eq(r.disposition, EX_DISP_STOPPED);
    for (int i = 0; i < N; i++) ex_operation_free(op[i]);
    ex_sender_release(sp);
}

Test(exec_split, consumer_token_stopped_before_start_stops_the_shared_work) {
    call_counter c;
    ex_sender *sp = ex_split(counted_int(&c, 1));
    rec r1, r2;
    rec_init(&r1);
    rec_init(&r2);
    rec_with_stop(&r1);
    ex_stop_source_request_stop(&r1.stop);
    inline_run b1, b2;
    ex_operation *o1 = connect_inline(&b1, sp, &r1), *o2 = connect_inline(&b2, sp, &r2);
    ex_start(o1);
    rec_expect_stopped(&r1);
    cr_assert_eq(atomic_load(&c.calls), 0, "the shared work sees the stop request and is not started");
    ex_start(o2);
    cr_assert_eq(r2.stops, 1, "the shared result is stopped for every consumer");
    cr_assert_eq(atomic_load(&c.calls), 0);
    ex_operation_destroy(o1);
    ex_operation_destroy(o2);
    ex_sender_release(sp);
    expect_no_leaks();
}

POOL_TEST(exec_split, consumer_token_stopped_before_start_stops_a_waiting_sibling, 2) {
    /* Consumer 1 is waiting for shared work that is running; consumer 2
     * starts with its token already stopped: the work sees the stop. */
    spin_ctx sc;
    spin_init(&sc);
    ex_sender *sp = ex_split(spinner(ex_pool_scheduler(p), &sc));
    trec a1, a2;
    trec_init(&a1);
    trec_init(&a2);
    rec_with_stop(&a2.r);
    ex_stop_source_request_stop(&a2.r.stop);
    ex_operation *o1 = NULL, *o2 = NULL;
    cr_assert_eq(ex_connect_alloc(sp, trec_receiver(&a1), &o1).code, 0);
    cr_assert_eq(ex_connect_alloc(sp, trec_receiver(&a2), &o2).code, 0);
    ex_start(o1);
    cr_assert_geq(wait_int_reaches(&sc.entered, 1), 1, "the shared work did not start");
    ex_start(o2);
    trec_wait_done(&a1);
    trec_wait_done(&a2);
    cr_assert_eq(atomic_load(&sc.timed_out), 0, "the shared work did not see the stop");
    cr_assert_eq(a1.r.stops, 1);
    cr_assert_eq(a2.r.stops, 1);
    ex_operation_free(o1);
    ex_operation_free(o2);
    ex_sender_release(sp);
}

Test(exec_split, stop_request_after_completion_changes_nothing) {
    call_counter c;
    ex_sender *sp = ex_split(counted_int(&c, 3));
    rec r1, r2;
    rec_init(&r1);
    rec_init(&r2);
    rec_with_stop(&r1);
    inline_run b2;
    ex_operation *o1 = NULL;
    cr_assert_eq(ex_connect_alloc(sp, rec_receiver(&r1), &o1).code, 0);
    ex_start(o1);
    cr_assert_eq(r1.values, 1);
    ex_operation_free(o1);
    /* The consumer is freed; its stop callback must have been removed (a
     * callback left registered would run on freed memory: ASan). */
    ex_stop_source_request_stop(&r1.stop);
    ex_operation *o2 = connect_inline(&b2, sp, &r2);
    ex_start(o2);
    cr_assert_eq(r2.values, 1, "the stored result stays the value");
    cr_assert_eq(r2.v[0].as.i, 3);
    ex_operation_destroy(o2);
    ex_sender_release(sp);
    cr_assert_eq(atomic_load(&c.calls), 1);
    expect_no_leaks();
}

