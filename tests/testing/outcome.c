/* SPDX-License-Identifier: MIT */
/* ex_test_outcome (cexec/testing.h): what ex_test_start and
 * ex_test_sync_wait record, its environment, its names, and the passing
 * side of the assertions (tests/testing/failing/ holds the failing side,
 * run as Criterion failures by scripts/check-failing-tests.sh). */
#include <string.h>

#include <cexec/testing.h>

#include "common/helpers.h"

TEST_SUITE(testing_outcome, 10);

/* Each check is asserted through the macro and through the accessors, so
 * a check that passes everything would fail here too. */
Test(testing_outcome, a_just_completes_inline_with_its_value) {
    ex_test_outcome o;
    ex_test_outcome_init(&o);
    cr_assert(ex_test_start(&o, ex_just(ex_int(42))));
    EX_ASSERT_VALUE_INT(&o, 42);
    EX_ASSERT_COMPLETED_ONCE(&o);
    EX_ASSERT_COMPLETED_INLINE(&o);
    EX_ASSERT_COMPLETED_ON(&o, ex_test_thread_id());
    cr_assert_eq(ex_test_outcome_disposition(&o), EX_DISP_VALUE);
    cr_assert_eq(ex_test_outcome_completions(&o), 1);
    ex_test_counts c = ex_test_outcome_counts(&o);
    cr_assert(c.values == 1 && c.errors == 0 && c.stopped == 0);
    size_t n;
    const ex_value *v = ex_test_outcome_values(&o, &n);
    cr_assert(n == 1 && v[0].type == EX_T_INT && v[0].as.i == 42);
    cr_assert(ex_test_outcome_thread(&o) == ex_test_thread_id());
    cr_assert(ex_test_outcome_completed_inline(&o));
    cr_assert_str_eq(ex_test_outcome_name(&o), "ex_just");
    cr_assert_eq(ex_test_outcome_destroy(&o).code, EX_OK);
    expect_no_leaks();
}

Test(testing_outcome, values_of_every_kind_compare_as_a_test_means) {
    int x = 0;
    char text[] = "abc";  /* not the literal's address: strings compare by text */
    ex_test_outcome o;
    ex_test_outcome_init(&o);
    ex_test_start(&o, ex_just(ex_int(-1), ex_uint(2), ex_bool(true), ex_double(0.5), ex_ptr(&x), ex_str("abc"),
                              ex_none()));
    EX_ASSERT_VALUES(&o, ex_int(-1), ex_uint(2), ex_bool(true), ex_double(0.5), ex_ptr(&x), ex_str(text), ex_none());
    EX_ASSERT_VALUE_COUNT(&o, 7);
    char msg[EX_TEST_MESSAGE_MAX];
    ex_value other[] = { ex_int(-1), ex_uint(2), ex_bool(true), ex_double(0.5), ex_ptr(&x), ex_str("abd"), ex_none() };
    cr_assert_not(ex_test_check_values(msg, sizeof msg, &o, other, 7), "%s", msg);
    other[5] = ex_str(text);
    other[4] = ex_ptr(text);
    cr_assert_not(ex_test_check_values(msg, sizeof msg, &o, other, 7), "pointers compare by address: %s", msg);
    other[4] = ex_ptr(&x);
    other[0] = ex_uint(1);
    cr_assert_not(ex_test_check_values(msg, sizeof msg, &o, other, 7), "types must match: %s", msg);
    cr_assert_not(ex_test_check_values(msg, sizeof msg, &o, other, 6), "%s", msg);
    ex_test_outcome_destroy(&o);

    ex_test_outcome_init(&o);
    ex_test_start(&o, ex_just(ex_double(0.1 + 0.2)));
    EX_ASSERT_VALUE_DOUBLE(&o, 0.3, 1e-12);
    EX_ASSERT_VALUE_DOUBLE(&o, 0.1 + 0.2, 0);
    cr_assert_not(ex_test_check_value_double(msg, sizeof msg, &o, 0.3, 0), "%s", msg);
    ex_test_outcome_destroy(&o);

    ex_test_outcome_init(&o);
    ex_test_start(&o, ex_just(ex_double(0.0 / 0.0)));
    EX_ASSERT_VALUE_DOUBLE(&o, 0.0 / 0.0, 0);
    EX_ASSERT_VALUE(&o, ex_double(0.0 / 0.0));
    cr_assert_not(ex_test_check_value_double(msg, sizeof msg, &o, 1.0, 1e300), "%s", msg);
    ex_test_outcome_destroy(&o);

    ex_test_outcome_init(&o);
    ex_test_start(&o, ex_just());
    EX_ASSERT_VALUE_VOID(&o);
    cr_assert_not(ex_test_check_value_count(msg, sizeof msg, &o, 1), "%s", msg);
    ex_test_outcome_destroy(&o);
    expect_no_leaks();
}

/* A then that sends the text of a buffer the test rewrites afterwards. */
static ex_error send_buffer(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    out[0] = ex_str(ctx);
    return ex_ok();
}

Test(testing_outcome, strings_and_tuples_are_copied) {
    char buf[16] = "first";
    ex_test_outcome o;
    ex_test_outcome_init(&o);
    ex_test_start(&o, ex_then(ex_just(), send_buffer, buf, EX_SIG0, EX_SIG(EX_T_STR)));
    strcpy(buf, "second");
    EX_ASSERT_VALUE_STR(&o, "first");
    size_t n;
    cr_assert(ex_test_outcome_values(&o, &n)[0].as.s != buf);
    ex_test_outcome_destroy(&o);

    /* sync_wait's result (and its tuple) is gone when the checks run. */
    ex_test_outcome_init(&o);
    ex_test_sync_wait(&o, ex_into_variant(ex_just(ex_int(7), ex_str("x"))));
    ex_value elems[] = { ex_int(7), ex_str("x") };
    ex_tuple want = { 0, 2, elems };
    EX_ASSERT_VALUE(&o, ex_tuple_value(&want));
    want.index = 1;
    char msg[EX_TEST_MESSAGE_MAX];
    cr_assert_not(ex_test_check_value(msg, sizeof msg, &o, ex_tuple_value(&want)), "%s", msg);
    want.index = 0;
    elems[1] = ex_str("y");
    cr_assert_not(ex_test_check_value(msg, sizeof msg, &o, ex_tuple_value(&want)), "%s", msg);
    ex_test_outcome_destroy(&o);
    expect_no_leaks();
}

Test(testing_outcome, an_error_is_kept_and_released_once) {
    owned_errors_reset();
    ex_test_outcome o;
    ex_test_outcome_init(&o);
    ex_test_start(&o, ex_just_error(owned_error(7)));
    EX_ASSERT_ERROR(&o, EX_EUSER + 1);
    EX_ASSERT_ERROR_MESSAGE(&o, EX_EUSER + 1, "error 7");
    cr_assert_eq(owned_error_id(ex_test_outcome_error(&o)), 7);
    cr_assert_eq(atomic_load(&owned_destroyed), 0, "the outcome holds the error until it is destroyed");
    char msg[EX_TEST_MESSAGE_MAX];
    cr_assert_not(ex_test_check_error(msg, sizeof msg, &o, EX_EINVAL), "%s", msg);
    cr_assert_not(ex_test_check_error_message(msg, sizeof msg, &o, EX_EUSER + 1, "error 8"), "%s", msg);
    cr_assert_not(ex_test_check_value_count(msg, sizeof msg, &o, 0), "%s", msg);
    cr_assert_eq(ex_test_outcome_values(&o, &(size_t){ 0 }), NULL);
    ex_test_outcome_destroy(&o);
    cr_assert_eq(ex_test_outcome_destroy(&o).code, EX_OK, "a second destroy does nothing");
    expect_owned_all_released(1);
}

Test(testing_outcome, stopped_is_recorded) {
    ex_test_outcome o;
    ex_test_outcome_init(&o);
    ex_test_start(&o, ex_just_stopped());
    EX_ASSERT_STOPPED(&o);
    char msg[EX_TEST_MESSAGE_MAX];
    cr_assert_not(ex_test_check_value_count(msg, sizeof msg, &o, 0), "%s", msg);
    cr_assert_not(ex_test_check_error(msg, sizeof msg, &o, EX_ECANCELED), "%s", msg);
    cr_assert_eq(ex_test_outcome_disposition(&o), EX_DISP_STOPPED);
    ex_test_outcome_destroy(&o);
    expect_no_leaks();
}

/* The test decides when the work runs: not completed until the loop runs
 * its item, and the outcome cannot be destroyed before. */
Test(testing_outcome, work_on_a_run_loop_waits_until_the_loop_runs_it) {
    ex_run_loop loop;
    ex_scheduler sch = test_loop_init(&loop);
    ex_test_outcome o;
    ex_test_outcome_init(&o);
    cr_assert(ex_test_start(&o, ex_starts_on(sch, ex_just(ex_int(5)))));
    EX_ASSERT_NOT_COMPLETED(&o);
    cr_assert_eq(ex_test_outcome_disposition(&o), 0);
    cr_assert_eq(ex_test_outcome_thread(&o), NULL);
    cr_assert_eq(ex_test_outcome_destroy(&o).code, EX_EBUSY);
    char msg[EX_TEST_MESSAGE_MAX];
    cr_assert_not(ex_test_check_value(msg, sizeof msg, &o, ex_int(5)), "%s", msg);
    cr_assert_not(ex_test_check_completed_once(msg, sizeof msg, &o), "%s", msg);
    cr_assert(ex_run_loop_run_one(&loop));
    EX_ASSERT_VALUE_INT(&o, 5);
    EX_ASSERT_COMPLETED_ON(&o, ex_test_thread_id());
    cr_assert_not(ex_test_outcome_completed_inline(&o));
    cr_assert_not(ex_test_check_completed_inline(msg, sizeof msg, &o), "%s", msg);
    cr_assert_not(ex_test_check_not_completed(msg, sizeof msg, &o), "%s", msg);
    cr_assert_eq(ex_test_outcome_destroy(&o).code, EX_OK);
    test_loop_destroy(&loop);
    expect_no_leaks();
}

Test(testing_outcome, the_outcomes_stop_source_stops_the_operation) {
    ex_test_outcome o;
    ex_test_outcome_init(&o);
    ex_test_start(&o, until_stopped());
    EX_ASSERT_NOT_COMPLETED(&o);
    cr_assert_not(ex_test_outcome_wait(&o, 0.01), "nothing completes it");
    cr_assert(ex_test_outcome_request_stop(&o));
    cr_assert_not(ex_test_outcome_request_stop(&o));
    EX_ASSERT_STOPPED(&o);
    cr_assert(ex_test_outcome_wait(&o, 0));
    ex_test_outcome_destroy(&o);
    expect_no_leaks();
}

Test(testing_outcome, the_environment_answers_what_the_test_set) {
    ex_run_loop loop;
    ex_scheduler sch = test_loop_init(&loop);
    ex_test_outcome o;
    ex_test_outcome_init(&o);
    ex_test_start(&o, ex_read_env(&ex_key_get_scheduler, EX_T_SCHED));
    EX_ASSERT_ERROR(&o, EX_EINVAL);  /* no scheduler unless the test sets one */
    ex_test_outcome_destroy(&o);

    ex_test_outcome_init(&o);
    ex_test_outcome_set_scheduler(&o, sch);
    ex_test_start(&o, ex_read_env(&ex_key_get_scheduler, EX_T_SCHED));
    EX_ASSERT_VALUE(&o, ex_sched_value(sch));
    ex_test_outcome_destroy(&o);
    ex_test_outcome_init(&o);
    ex_test_outcome_set_scheduler(&o, sch);
    ex_test_start(&o, ex_read_env(&ex_key_get_delegation_scheduler, EX_T_SCHED));
    EX_ASSERT_VALUE(&o, ex_sched_value(sch));
    ex_test_outcome_destroy(&o);

    ex_test_outcome_init(&o);
    ex_test_start(&o, ex_read_env(&ex_key_get_stop_token, EX_T_TOKEN));
    size_t n;
    ex_stop_token own = ex_test_outcome_values(&o, &n)[0].as.token;
    cr_assert(ex_stop_token_stop_possible(own));
    cr_assert_not(ex_stop_token_stop_requested(own));
    ex_test_outcome_request_stop(&o);
    cr_assert(ex_stop_token_stop_requested(own), "the token is the outcome's own source's");
    ex_test_outcome_destroy(&o);

    ex_stop_source src;
    ex_stop_source_init(&src);
    ex_test_outcome_init(&o);
    ex_test_outcome_set_stop_token(&o, ex_stop_source_token(&src));
    ex_test_start(&o, ex_read_env(&ex_key_get_stop_token, EX_T_TOKEN));
    EX_ASSERT_VALUE(&o, ex_token_value(ex_stop_source_token(&src)));
    ex_test_outcome_destroy(&o);

    cnt_alloc a;
    cnt_alloc_init(&a);
    ex_test_outcome_init(&o);
    ex_test_outcome_set_allocator(&o, &a.base);
    ex_test_outcome_set_scheduler(&o, sch);  /* both keys answered together */
    ex_test_start(&o, ex_read_env(&ex_key_get_allocator, EX_T_ALLOC));
    EX_ASSERT_VALUE(&o, ex_alloc_value(&a.base));
    cr_assert_eq(atomic_load(&a.allocs), 1, "the operation state comes from the outcome's allocator");
    ex_test_outcome_destroy(&o);
    cnt_alloc_expect_balanced(&a, "the outcome's allocator");
    test_loop_destroy(&loop);
    expect_no_leaks();
}

Test(testing_outcome, a_failed_connect_is_the_error_completion) {
    cnt_alloc a;
    cnt_alloc_init(&a);
    cnt_alloc_fail_nth(&a, 1);
    ex_test_outcome o;
    ex_test_outcome_init(&o);
    ex_test_outcome_set_allocator(&o, &a.base);
    cr_assert_not(ex_test_start(&o, ex_just(ex_int(1))));
    EX_ASSERT_ERROR(&o, EX_ENOMEM);
    char text[EX_TEST_MESSAGE_MAX];
    ex_test_outcome_describe(&o, text, sizeof text);
    cr_assert(strncmp(text, "failed to connect: error EX_ENOMEM \"", 36) == 0, "%s", text);
    cr_assert_eq(ex_test_outcome_destroy(&o).code, EX_OK);
    cnt_alloc_expect_balanced(&a, "the outcome's allocator");
    expect_no_leaks();
}

static ex_sender *keep_going(void *ctx, const ex_value *v, size_t n) {
    (void)ctx;
    return ex_just_n(v, n);
}

static ex_error each(void *ctx, size_t i, const ex_value *v, size_t n) {
    (void)ctx, (void)i, (void)v, (void)n;
    return ex_ok();
}

/* The name of the outermost stage: the builder, and the stage's name
 * for the adaptors that take one. */
static void expect_named(ex_sender *s, const char *want) {
    ex_test_outcome o;
    ex_test_outcome_init(&o);
    cr_assert_str_eq(ex_test_outcome_name(&o), "the operation");
    ex_test_start(&o, s);
    cr_assert_str_eq(ex_test_outcome_name(&o), want);
    ex_test_outcome_destroy(&o);
}

Test(testing_outcome, the_outcome_is_named_after_the_sender) {
    expect_named(ex_just(ex_int(1)), "ex_just");
    expect_named(ex_then(ex_just(ex_int(1)), add_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)), "ex_then(add_one)");
    expect_named(ex_then_named(ex_just(ex_int(1)), add_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT), NULL), "ex_then");
    expect_named(ex_let_value(ex_just(ex_int(1)), keep_going, NULL, EX_SIG(EX_T_INT)), "ex_let_value(keep_going)");
    expect_named(ex_bulk(ex_just(ex_int(1)), EX_PAR, 3, each, NULL), "ex_bulk(each)");
    expect_named(ex_just_stopped(), "ex_just_stopped");
    expect_named(NULL, "a NULL sender");

    ex_test_outcome o;
    ex_test_outcome_init(&o);
    ex_test_outcome_set_name(&o, "a name longer than an outcome keeps, a name longer than an outcome keeps, a name "
                                 "longer than an outcome keeps");
    cr_assert_eq(strlen(ex_test_outcome_name(&o)), EX_TEST_NAME_MAX - 1);
    cr_assert(strstr(ex_test_outcome_name(&o), "...") != NULL);
    ex_test_outcome_set_name(&o, NULL);
    cr_assert_str_eq(ex_test_outcome_name(&o), "the operation");
    ex_test_outcome_destroy(&o);
    expect_no_leaks();
}

Test(testing_outcome, a_null_sender_is_an_error_completion) {
    ex_test_outcome o;
    ex_test_outcome_init(&o);
    cr_assert_not(ex_test_start(&o, NULL));
    EX_ASSERT_ERROR(&o, EX_EINVAL);
    ex_test_outcome_destroy(&o);
    expect_no_leaks();
}

Test(testing_outcome, on_a_pool_the_completion_comes_from_a_worker) {
    ex_pool *p = test_pool_new(2);
    ex_test_outcome o;
    ex_test_outcome_init(&o);
    ex_test_start(&o, ex_starts_on(ex_pool_scheduler(p), ex_just(ex_int(3))));
    cr_assert(ex_test_outcome_wait(&o, TEST_WAIT_LIMIT_S));
    EX_ASSERT_VALUE_INT(&o, 3);
    cr_assert(ex_test_outcome_thread(&o) != ex_test_thread_id());
    cr_assert_not(ex_test_outcome_completed_inline(&o));
    char msg[EX_TEST_MESSAGE_MAX];
    cr_assert_not(ex_test_check_completed_on(msg, sizeof msg, &o, ex_test_thread_id()), "%s", msg);
    cr_assert(ex_test_check_completed_on(msg, sizeof msg, &o, ex_test_outcome_thread(&o)), "%s", msg);
    ex_test_outcome_destroy(&o);
    test_pool_free(p);
    expect_no_leaks();
}

Test(testing_outcome, sync_wait_records_its_result) {
    ex_test_outcome o;
    ex_test_outcome_init(&o);
    ex_test_sync_wait(&o, ex_then(ex_just(ex_int(20)), add_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)));
    EX_ASSERT_VALUE_INT(&o, 21);
    cr_assert_str_eq(ex_test_outcome_name(&o), "ex_then(add_one)");
    cr_assert_eq(ex_test_outcome_thread(&o), NULL, "sync_wait does not say where it completed");
    char msg[EX_TEST_MESSAGE_MAX];
    cr_assert_not(ex_test_check_completed_inline(msg, sizeof msg, &o), "%s", msg);
    cr_assert_not(ex_test_check_completed_on(msg, sizeof msg, &o, ex_test_thread_id()), "%s", msg);
    ex_test_outcome_destroy(&o);

    owned_errors_reset();
    ex_test_outcome_init(&o);
    ex_test_sync_wait(&o, ex_just_error(owned_error(3)));
    EX_ASSERT_ERROR_MESSAGE(&o, EX_EUSER + 1, "owned error 3");
    cr_assert_eq(atomic_load(&owned_destroyed), 0);
    ex_test_outcome_destroy(&o);
    expect_owned_all_released(1);

    ex_test_outcome_init(&o);
    ex_test_sync_wait(&o, ex_just_stopped());
    EX_ASSERT_STOPPED(&o);
    ex_test_outcome_destroy(&o);
    expect_no_leaks();
}

/* One run per outcome: a second is refused (its sender released) and
 * every check of the outcome fails from then on, saying why. */
Test(testing_outcome, a_second_run_is_a_misuse) {
    ex_test_outcome o;
    ex_test_outcome_init(&o);
    ex_test_start(&o, ex_just(ex_int(1)));
    cr_assert_not(ex_test_start(&o, ex_just(ex_int(2))));
    ex_test_sync_wait(&o, ex_just(ex_int(3)));
    char msg[EX_TEST_MESSAGE_MAX];
    cr_assert_not(ex_test_check_value(msg, sizeof msg, &o, ex_int(1)));
    cr_assert_str_eq(msg, "ex_just was misused (ex_test_start: the outcome was already run (one run per outcome)), "
                          "expected value int 1");
    cr_assert_not(ex_test_check_not_completed(msg, sizeof msg, &o), "%s", msg);
    cr_assert_eq(ex_test_outcome_completions(&o), 1);
    ex_test_outcome_destroy(&o);

    /* A receiver connected by hand that completed counts as a run. */
    ex_test_outcome_init(&o);
    ex_set_stopped(ex_test_outcome_receiver(&o));
    ex_test_sync_wait(&o, ex_just(ex_int(3)));
    cr_assert_not(ex_test_check_stopped(msg, sizeof msg, &o));
    cr_assert(strstr(msg, "ex_test_sync_wait: the outcome was already run") != NULL, "%s", msg);
    ex_test_outcome_destroy(&o);
    expect_no_leaks();
}
