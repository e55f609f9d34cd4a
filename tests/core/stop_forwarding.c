/* SPDX-License-Identifier: MIT */
/* Adaptors that forward a stop request to a stop source they own (when_all,
 * split, spawn_future) while a child completes inside that very request:
 * the completion may free the adaptor's operation or shared state, and with
 * it the source request_stop is still walking.  Regression tests for a
 * use-after-free found in review; ASan makes a recurrence fail loudly, the
 * plain build checks the results. */
#include "common/helpers.h"

TEST_SUITE(stop_forwarding, 10);

/* The leaf is until_stopped(): it completes set_stopped from inside its
 * stop callback, i.e. inside the request_stop of whoever stops it.  The
 * receiver is a frees_op_rec: it frees its (allocated) operation when it
 * completes. */

/* Connects s (released right after connect, as adaptors do) to a
 * self-freeing receiver with its own stop source, starts it, requests
 * stop, and checks it completed stopped exactly once. */
static void stop_inside_request(ex_sender *s) {
    frees_op_rec f;
    frees_op_rec_init(&f);
    rec_with_stop(&f.r);
    cr_assert_eq(ex_connect_alloc(s, frees_op_rec_receiver(&f), &f.op).code, 0);
    ex_sender_release(s);
    ex_start(f.op);
    cr_assert_eq(rec_total(&f.r), 0, "nothing completes before the stop request");
    cr_assert(ex_stop_source_request_stop(&f.r.stop));
    cr_expect_eq(f.r.stops, 1, "completed stopped exactly once");
    cr_expect_eq(f.r.values + f.r.errors, 0);
}

Test(stop_forwarding, when_all_freed_inside_its_own_stop_request) {
    stop_inside_request(ex_when_all(until_stopped()));
    stop_inside_request(ex_when_all(until_stopped(), until_stopped(), until_stopped()));
    expect_no_leaks();
}

Test(stop_forwarding, split_freed_inside_its_own_stop_request) {
    stop_inside_request(ex_split(until_stopped()));
    expect_no_leaks();
}

Test(stop_forwarding, spawn_future_freed_inside_its_own_stop_request) {
    ex_counting_scope cs;
    ex_simple_counting_scope ss;
    cr_assert_eq(ex_counting_scope_init(&cs).code, 0);
    cr_assert_eq(ex_simple_counting_scope_init(&ss).code, 0);
    ex_sender *f = ex_spawn_future(until_stopped(), ex_counting_scope_token(&cs));
    /* The future's consumer runs in another scope and is freed when it completes. */
    cr_assert_eq(ex_spawn(f, ex_simple_counting_scope_token(&ss)).code, 0);
    ex_counting_scope_request_stop(&cs);  /* -> the future's stop -> the leaf completes inline */
    ex_result r = ex_sync_wait(ex_counting_scope_join(&cs));
    cr_expect_eq(r.disposition, EX_DISP_VALUE);
    r = ex_sync_wait(ex_simple_counting_scope_join(&ss));
    cr_expect_eq(r.disposition, EX_DISP_VALUE);
    cr_expect_eq(ex_counting_scope_destroy(&cs).code, 0);
    cr_expect_eq(ex_simple_counting_scope_destroy(&ss).code, 0);
    expect_no_leaks();
}

Test(stop_forwarding, spawn_future_consumer_stop_inside_request) {
    ex_simple_counting_scope sc;
    cr_assert_eq(ex_simple_counting_scope_init(&sc).code, 0);
    stop_inside_request(ex_spawn_future(until_stopped(), ex_simple_counting_scope_token(&sc)));
    ex_result r = ex_sync_wait(ex_simple_counting_scope_join(&sc));
    cr_expect_eq(r.disposition, EX_DISP_VALUE);
    cr_expect_eq(ex_simple_counting_scope_destroy(&sc).code, 0);
    expect_no_leaks();
}
