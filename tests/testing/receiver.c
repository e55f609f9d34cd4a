/* SPDX-License-Identifier: MIT */
/* ex_test_outcome connected by hand (cexec/testing.h): the counting
 * receiver a sender author tests with.  It counts every completion, keeps
 * the first, releases the errors of the others, flags them in every check,
 * and passes the environment the test set. */
#include <pthread.h>
#include <string.h>

#include <cexec/testing.h>

#include "common/helpers.h"

TEST_SUITE(testing_receiver, 10);

/* Broken senders: they complete more than once. */
static void value_then_stopped(test_op *op) {
    ex_value v = ex_int(1);
    ex_set_value(op->r, &v, 1);
    ex_set_stopped(op->r);
}

static void value_then_owned_error(test_op *op) {
    ex_value v = ex_int(1);
    ex_set_value(op->r, &v, 1);
    ex_set_error(op->r, owned_error(1));
}

static void three_times(test_op *op) {
    ex_set_stopped(op->r);
    ex_set_error(op->r, ex_err(EX_EINVAL, "again"));
    ex_set_stopped(op->r);
}

/* Connects s (released) to o's receiver by hand and starts it; the
 * operation is returned for ex_operation_free. */
static ex_operation *connect_by_hand(ex_test_outcome *o, ex_sender *s) {
    ex_operation *op = NULL;
    ex_error e = ex_connect_alloc(s, ex_test_outcome_receiver(o), &op);
    ex_sender_release(s);
    cr_assert_eq(e.code, EX_OK);
    ex_start(op);
    return op;
}

static const ex_sigs value_and_stopped = { 1, EX_SIGS_STOPPED | EX_SIGS_ERROR, { { 1, { EX_T_INT } } } };

Test(testing_receiver, a_second_completion_is_counted_and_flagged) {
    ex_test_outcome o;
    ex_test_outcome_init(&o);
    ex_test_outcome_set_name(&o, "twice");
    ex_operation *op = connect_by_hand(&o, test_sender_new(value_then_stopped, NULL, &value_and_stopped));
    cr_assert_eq(ex_test_outcome_completions(&o), 2);
    ex_test_counts c = ex_test_outcome_counts(&o);
    cr_assert(c.values == 1 && c.errors == 0 && c.stopped == 1);
    cr_assert_eq(ex_test_outcome_disposition(&o), EX_DISP_VALUE, "the first completion is the one kept");
    char msg[EX_TEST_MESSAGE_MAX];
    cr_assert_not(ex_test_check_completed_once(msg, sizeof msg, &o));
    cr_assert_str_eq(msg, "twice completed 2 times (value int 1, then set_stopped), expected exactly one completion");
    cr_assert_not(ex_test_check_value(msg, sizeof msg, &o, ex_int(1)), "%s", msg);
    cr_assert_not(ex_test_check_stopped(msg, sizeof msg, &o), "%s", msg);
    ex_operation_free(op);
    ex_test_outcome_destroy(&o);
    expect_no_leaks();
}

Test(testing_receiver, the_error_of_a_second_completion_is_released) {
    owned_errors_reset();
    ex_test_outcome o;
    ex_test_outcome_init(&o);
    ex_operation *op = connect_by_hand(&o, test_sender_new(value_then_owned_error, NULL, &value_and_stopped));
    cr_assert_eq(atomic_load(&owned_destroyed), 1, "released when it came");
    ex_test_counts c = ex_test_outcome_counts(&o);
    cr_assert(c.values == 1 && c.errors == 1 && c.stopped == 0);
    char msg[EX_TEST_MESSAGE_MAX];
    cr_assert_not(ex_test_check_completed_once(msg, sizeof msg, &o));
    cr_assert_str_eq(msg, "the operation completed 2 times (value int 1, then an error), expected exactly one completion");
    ex_operation_free(op);
    ex_test_outcome_destroy(&o);
    expect_owned_all_released(1);
}

Test(testing_receiver, more_completions_are_all_counted) {
    ex_test_outcome o;
    ex_test_outcome_init(&o);
    ex_operation *op = connect_by_hand(&o, test_sender_new(three_times, NULL, &value_and_stopped));
    ex_test_counts c = ex_test_outcome_counts(&o);
    cr_assert(c.values == 0 && c.errors == 1 && c.stopped == 2);
    char msg[EX_TEST_MESSAGE_MAX];
    cr_assert_not(ex_test_check_completed_once(msg, sizeof msg, &o));
    cr_assert_str_eq(msg, "the operation completed 3 times (set_stopped, then an error, ...), expected exactly one completion");
    ex_operation_free(op);
    ex_test_outcome_destroy(&o);
    expect_no_leaks();
}

/* The environment reaches the sender: stop_probe reports the token its
 * environment gave, and whether stop was requested. */
Test(testing_receiver, the_environment_passes_the_tests_stop_token) {
    ex_stop_source src;
    ex_stop_source_init(&src);
    ex_stop_source_request_stop(&src);
    ex_stop_token seen = ex_never_stop_token();
    ex_test_outcome o;
    ex_test_outcome_init(&o);
    ex_test_outcome_set_stop_token(&o, ex_stop_source_token(&src));
    ex_operation *op = connect_by_hand(&o, stop_probe(&seen));
    cr_assert(ex_stop_token_equal(seen, ex_stop_source_token(&src)));
    EX_ASSERT_VALUE_INT(&o, STOP_PROBE_POSSIBLE | STOP_PROBE_REQUESTED);
    ex_operation_free(op);
    ex_test_outcome_destroy(&o);

    ex_test_outcome_init(&o);
    ex_test_outcome_set_stop_token(&o, ex_never_stop_token());
    op = connect_by_hand(&o, stop_probe(&seen));
    EX_ASSERT_VALUE_INT(&o, 0);
    ex_operation_free(op);
    ex_test_outcome_destroy(&o);
    expect_no_leaks();
}

/* Two completions at once from two threads: both counted, one kept
 * whole. */
typedef struct racer {
    ex_test_outcome *o;
    pthread_barrier_t *go;
    int64_t v;
} racer;

static void *complete_at_once(void *arg) {
    racer *r = arg;
    ex_value v = ex_int(r->v);
    pthread_barrier_wait(r->go);
    ex_set_value(ex_test_outcome_receiver(r->o), &v, 1);
    return NULL;
}

Test(testing_receiver, completions_racing_on_two_threads_are_both_counted) {
    for (int round = 0; round < 50; round++) {
        ex_test_outcome o;
        ex_test_outcome_init(&o);
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, 2);
        racer a = { &o, &go, 1 }, b = { &o, &go, 2 };
        pthread_t ta, tb;
        cr_assert_eq(pthread_create(&ta, NULL, complete_at_once, &a), 0);
        cr_assert_eq(pthread_create(&tb, NULL, complete_at_once, &b), 0);
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        pthread_barrier_destroy(&go);
        cr_assert_eq(ex_test_outcome_completions(&o), 2);
        cr_assert_eq(ex_test_outcome_counts(&o).values, 2);
        size_t n;
        const ex_value *v = ex_test_outcome_values(&o, &n);
        cr_assert(n == 1 && (v[0].as.i == 1 || v[0].as.i == 2));
        char msg[EX_TEST_MESSAGE_MAX];
        cr_assert_not(ex_test_check_completed_once(msg, sizeof msg, &o), "%s", msg);
        cr_assert(strstr(msg, "completed 2 times (value int ") != NULL, "%s", msg);
        ex_test_outcome_destroy(&o);
    }
    expect_no_leaks();
}

/* A value completion with more datums than a completion may carry is
 * counted and reported, not copied. */
Test(testing_receiver, too_many_datums_are_reported_not_kept) {
    ex_value v[EX_MAX_ARITY + 1];
    for (size_t i = 0; i <= EX_MAX_ARITY; i++) v[i] = ex_int((int64_t)i);
    ex_test_outcome o;
    ex_test_outcome_init(&o);
    ex_set_value(ex_test_outcome_receiver(&o), v, EX_MAX_ARITY + 1);
    size_t n = 1;
    cr_assert_eq(ex_test_outcome_values(&o, &n), NULL);
    cr_assert_eq(n, 0);
    char msg[EX_TEST_MESSAGE_MAX];
    cr_assert_not(ex_test_check_value_count(msg, sizeof msg, &o, EX_MAX_ARITY + 1));
    cr_assert_str_eq(msg, "the operation completed with a value of 9 datums (not kept: more than EX_MAX_ARITY), "
                          "expected a value of 9 datums");
    ex_test_outcome_destroy(&o);
    expect_no_leaks();
}
