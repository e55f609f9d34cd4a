/* SPDX-License-Identifier: MIT */
/* Owned errors (cexec/error.h) through every adaptor and composition that
 * keeps, copies or drops an error: each payload is destroyed exactly once,
 * after its last holder, and nothing is left (expect_owned_all_released). */
#include <stdio.h>
#include <string.h>

#include "common/helpers.h"

TEST_SUITE(owned_errors, 30);

/* Runs s to completion; asserts an owned error with payload id `id`. */
static void expect_owned_result(ex_sender *s, int id) {
    ex_result r = ex_sync_wait(s);
    expect_error(&r, EX_EUSER + 1);
    cr_assert_eq(owned_error_id(r.error), id);
    char want[32];
    snprintf(want, sizeof want, "owned error %d", id);
    cr_assert_str_eq(r.error.msg, want);
    ex_result_destroy(&r);
}

/* ------------------------------------------------------ just_error and co. */

Test(owned_errors, just_error_delivers_it_once_per_run_and_frees_it_with_the_sender) {
    owned_errors_reset();
    ex_sender *s = ex_just_error(owned_error(1));
    expect_owned_result(ex_sender_retain(s), 1);
    expect_owned_result(ex_sender_retain(s), 1);
    cr_assert_eq(atomic_load(&owned_destroyed), 0, "freed while the sender holds it");
    ex_sender_release(s);
    expect_owned_all_released(1);
}

Test(owned_errors, an_operation_never_started_gives_its_reference_back) {
    owned_errors_reset();
    ex_sender *s = ex_just_error(owned_error(1));
    rec rc;
    rec_init(&rc);
    ex_operation *op = NULL;
    cr_assert_eq(ex_connect_alloc(s, rec_receiver(&rc), &op).code, EX_OK);
    ex_sender_release(s);
    cr_assert_eq(atomic_load(&owned_destroyed), 0, "freed while the operation holds it");
    ex_operation_free(op);
    cr_assert_eq(rec_total(&rc), 0);
    expect_owned_all_released(1);
}

Test(owned_errors, just_error_refused_for_want_of_memory_releases_it) {
    owned_errors_reset();
    ex_error e = owned_error(1);
    test_alloc_fail_at(1);
    ex_sender *s = ex_just_error(e);
    cr_assert_eq(ex_sender_status(s).code, EX_ENOMEM);
    ex_sender_release(s);
    expect_owned_all_released(1);
}

Test(owned_errors, stopped_as_error_holds_it_for_every_run) {
    owned_errors_reset();
    ex_sender *s = ex_stopped_as_error(ex_just_stopped(), owned_error(2));
    expect_owned_result(ex_sender_retain(s), 2);
    expect_owned_result(ex_sender_retain(s), 2);
    ex_sender_release(s);
    expect_owned_all_released(1);
}

Test(owned_errors, stopped_as_error_that_never_stops_releases_it_with_the_sender) {
    owned_errors_reset();
    ex_result r = ex_sync_wait(ex_stopped_as_error(ex_just(ex_int(4)), owned_error(2)));
    expect_value_int(&r, 4);
    ex_result_destroy(&r);
    expect_owned_all_released(1);
}

Test(owned_errors, stopped_as_error_refused_releases_it) {
    owned_errors_reset();
    ex_sender *s = ex_stopped_as_error(NULL, owned_error(2));
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    ex_sender_release(s);
    expect_owned_all_released(1);
}

/* ---------------------------------------------------------- then, upon, let */

static ex_error fail_owned(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)n, (void)out;
    return owned_error((int)in[0].as.i);
}

Test(owned_errors, a_then_function_hands_its_error_over) {
    owned_errors_reset();
    expect_owned_result(ex_then(ex_just(ex_int(3)), fail_owned, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)), 3);
    expect_owned_all_released(1);
}

static ex_error consume(void *ctx, ex_error err, ex_value *out) {
    (void)ctx;
    out[0] = ex_int(owned_error_id(err) * 10);
    ex_error_release(err);  /* given to the function: its to release */
    return ex_ok();
}

static ex_error pass_on(void *ctx, ex_error err, ex_value *out) {
    (void)ctx, (void)out;
    return err;
}

Test(owned_errors, upon_error_may_consume_it) {
    owned_errors_reset();
    ex_result r = ex_sync_wait(ex_upon_error(ex_just_error(owned_error(4)), consume, NULL, EX_SIG(EX_T_INT)));
    expect_value_int(&r, 40);
    ex_result_destroy(&r);
    expect_owned_all_released(1);
}

Test(owned_errors, upon_error_may_pass_it_on) {
    owned_errors_reset();
    expect_owned_result(ex_upon_error(ex_just_error(owned_error(4)), pass_on, NULL, EX_SIG(EX_T_INT)), 4);
    expect_owned_all_released(1);
}

static ex_sender *rethrow(void *ctx, ex_error err) {
    (void)ctx;
    return ex_just_error(err);
}

static ex_sender *recover(void *ctx, ex_error err) {
    (void)ctx;
    int id = owned_error_id(err);
    ex_error_release(err);
    return ex_just(ex_int(id));
}

Test(owned_errors, let_error_may_hand_it_to_just_error) {
    owned_errors_reset();
    expect_owned_result(ex_let_error(ex_just_error(owned_error(5)), rethrow, NULL), 5);
    expect_owned_all_released(1);
}

Test(owned_errors, let_error_may_recover_from_it) {
    owned_errors_reset();
    ex_result r = ex_sync_wait(ex_let_error(ex_just_error(owned_error(5)), recover, NULL));
    expect_value_int(&r, 5);
    ex_result_destroy(&r);
    expect_owned_all_released(1);
}

/* ------------------------------------------------------------- scheduling */

Test(owned_errors, continues_on_carries_it_across_the_hop) {
    owned_errors_reset();
    ex_pool *p = test_pool_new(2);
    expect_owned_result(ex_continues_on(ex_just_error(owned_error(6)), ex_pool_scheduler(p)), 6);
    test_pool_free(p);
    expect_owned_all_released(1);
}

Test(owned_errors, a_hop_that_fails_releases_the_error_it_was_carrying) {
    owned_errors_reset();
    ex_pool *p = test_pool_new(1);
    cr_assert_eq(ex_pool_shutdown(p).code, EX_OK);
    ex_result r = ex_sync_wait(ex_continues_on(ex_just_error(owned_error(6)), ex_pool_scheduler(p)));
    cr_assert_eq(r.disposition == EX_DISP_ERROR ? r.error.code : EX_ESHUTDOWN, EX_ESHUTDOWN,
                 "the hop to a shut-down pool gave error %d", r.error.code);
    ex_result_destroy(&r);
    test_pool_free(p);
    expect_owned_all_released(1);
}

/* ------------------------------------------------------ when_all and split */

Test(owned_errors, when_all_keeps_the_first_and_releases_the_others) {
    owned_errors_reset();
    expect_owned_result(ex_when_all(ex_just_error(owned_error(1)), ex_just_error(owned_error(2)),
                                    ex_just_error(owned_error(3))),
                        1);
    expect_owned_all_released(3);
}

static ex_error fail_on_worker(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    return owned_error((int)(intptr_t)ctx);
}

Test(owned_errors, when_all_on_the_pool_releases_every_losing_error) {
    owned_errors_reset();
    ex_pool *p = test_pool_new(2);
    ex_scheduler sch = ex_pool_scheduler(p);
    for (int round = 0; round < 50; round++) {
        ex_sender *c[4];
        for (int i = 0; i < 4; i++)
            c[i] = ex_then(ex_schedule(sch), fail_on_worker, (void *)(intptr_t)(round * 4 + i), EX_SIG0, EX_SIG0);
        ex_result r = ex_sync_wait(ex_when_all_n(c, 4));
        expect_error(&r, EX_EUSER + 1);
        int id = owned_error_id(r.error);
        cr_assert(id >= round * 4 && id < round * 4 + 4, "the error of another round: %d", id);
        ex_result_destroy(&r);
    }
    test_pool_free(p);
    int made = atomic_load(&owned_made);  /* children stopped before their function ran made none */
    cr_assert_geq(made, 50);
    expect_owned_all_released(made);
}

Test(owned_errors, split_gives_each_consumer_a_reference) {
    owned_errors_reset();
    ex_sender *s = ex_split(ex_just_error(owned_error(7)));
    ex_result r[3];
    for (int i = 0; i < 3; i++) r[i] = ex_sync_wait(ex_sender_retain(s));
    ex_sender_release(s);
    for (int i = 0; i < 3; i++) {
        expect_error(&r[i], EX_EUSER + 1);
        cr_assert_eq(owned_error_id(r[i].error), 7);
    }
    for (int i = 0; i < 2; i++) ex_result_destroy(&r[i]);
    cr_assert_eq(atomic_load(&owned_destroyed), 0, "freed while a result holds it");
    ex_result_destroy(&r[2]);
    expect_owned_all_released(1);
}

/* ------------------------------------------------------------------ bulk */

static ex_error bulk_fail(void *ctx, size_t i, const ex_value *v, size_t n) {
    (void)ctx, (void)v, (void)n;
    return owned_error((int)i);
}

static ex_error chunk_fail(void *ctx, size_t b, size_t e, const ex_value *v, size_t n) {
    (void)ctx, (void)e, (void)v, (void)n;
    return owned_error((int)b);
}

Test(owned_errors, bulk_on_the_pool_keeps_one_and_releases_the_rest) {
    owned_errors_reset();
    ex_pool *p = test_pool_new(2);
    ex_result r = ex_sync_wait(ex_bulk_grain(ex_starts_on(ex_pool_scheduler(p), ex_just()), EX_PAR, 64, 1, bulk_fail, NULL));
    expect_error(&r, EX_EUSER + 1);
    (void)owned_error_id(r.error);
    ex_result_destroy(&r);
    r = ex_sync_wait(ex_bulk_chunked(ex_starts_on(ex_pool_scheduler(p), ex_just()), EX_PAR, 64, 1, chunk_fail, NULL));
    expect_error(&r, EX_EUSER + 1);
    ex_result_destroy(&r);
    test_pool_free(p);
    int made = atomic_load(&owned_made);
    cr_assert_geq(made, 2);
    expect_owned_all_released(made);
}

Test(owned_errors, sequential_bulk_hands_over_its_first_error) {
    owned_errors_reset();
    ex_result r = ex_sync_wait(ex_bulk(ex_just(), EX_PAR, 8, bulk_fail, NULL));
    expect_error(&r, EX_EUSER + 1);
    cr_assert_eq(owned_error_id(r.error), 0);
    ex_result_destroy(&r);
    expect_owned_all_released(1);
}

static ex_error index_fail(void *ctx, size_t b, size_t e) {
    (void)ctx, (void)e;
    return owned_error((int)b);
}

Test(owned_errors, for_each_index_keeps_one_and_releases_the_rest) {
    owned_errors_reset();
    ex_pool *p = test_pool_new(2);
    ex_result r = ex_sync_wait(ex_for_each_index(ex_pool_scheduler(p), 4096, 16, index_fail, NULL));
    expect_error(&r, EX_EUSER + 1);
    ex_result_destroy(&r);
    test_pool_free(p);
    int made = atomic_load(&owned_made);
    cr_assert_geq(made, 1);
    expect_owned_all_released(made);
}

/* ---------------------------------------------------------------- scopes */

Test(owned_errors, a_scope_keeps_the_first_until_it_is_destroyed) {
    owned_errors_reset();
    ex_counting_scope sc;
    cr_assert_eq(ex_counting_scope_init(&sc).code, EX_OK);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(ex_spawn(ex_just_error(owned_error(i)), ex_counting_scope_token(&sc)).code, EX_OK);
    expect_owned_result(ex_counting_scope_join(&sc), 0);
    cr_assert_eq(atomic_load(&owned_destroyed), 2, "the two later errors were not released");
    cr_assert_eq(ex_counting_scope_destroy(&sc).code, EX_OK);
    expect_owned_all_released(3);
}

Test(owned_errors, a_spawned_future_hands_it_to_its_consumer_or_drops_it) {
    owned_errors_reset();
    ex_simple_counting_scope sc;
    cr_assert_eq(ex_simple_counting_scope_init(&sc).code, EX_OK);
    ex_sender *f = ex_spawn_future(ex_just_error(owned_error(8)), ex_simple_counting_scope_token(&sc));
    expect_owned_result(f, 8);
    ex_sender *dropped = ex_spawn_future(ex_just_error(owned_error(9)), ex_simple_counting_scope_token(&sc));
    ex_sender_release(dropped);
    ex_result r = ex_sync_wait(ex_simple_counting_scope_join(&sc));
    cr_assert_eq(r.disposition, EX_DISP_VALUE, "a future's error went to the scope");
    ex_result_destroy(&r);
    cr_assert_eq(ex_simple_counting_scope_destroy(&sc).code, EX_OK);
    expect_owned_all_released(2);
}

/* --------------------------------------------- when_any, stop_when, link */

Test(owned_errors, when_any_keeps_the_winners_and_releases_the_losers) {
    owned_errors_reset();
    expect_owned_result(ex_when_any(ex_just_error(owned_error(1)), ex_just_error(owned_error(2))), 1);
    expect_owned_all_released(2);
}

Test(owned_errors, stop_when_releases_the_triggers_error) {
    owned_errors_reset();
    ex_result r = ex_sync_wait(ex_stop_when(ex_just(ex_int(3)), ex_just_error(owned_error(1))));
    expect_value_int(&r, 3);
    ex_result_destroy(&r);
    expect_owned_all_released(1);
}

Test(owned_errors, link_stop_token_passes_it_on) {
    owned_errors_reset();
    ex_stop_source src;
    ex_stop_source_init(&src);
    expect_owned_result(ex_link_stop_token(ex_just_error(owned_error(4)), ex_stop_source_token(&src)), 4);
    expect_owned_all_released(1);
}
