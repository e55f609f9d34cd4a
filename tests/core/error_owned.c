/* SPDX-License-Identifier: MIT */
/* Errors that own a formatted message or a payload (cexec/error.h): the
 * makers, the counted box, allocation failure, and debug mode catching a
 * second release. */
#include <pthread.h>
#include <signal.h>
#include <string.h>

#include "common/helpers.h"

TEST_SUITE(error_owned, 30);

Test(error_owned, format_keeps_the_code_and_the_formatted_message) {
    ex_error e = ex_error_format(EX_EUSER + 7, "shard %d of %s is down", 3, "orders");
    cr_assert_eq(e.code, EX_EUSER + 7);
    cr_assert_str_eq(e.msg, "shard 3 of orders is down");
    cr_assert(ex_error_is_owned(e));
    cr_assert_null(e.data);
    ex_error_release(e);
    expect_no_leaks();
}

Test(error_owned, the_last_release_frees_the_box_and_runs_destroy_once) {
    owned_errors_reset();
    ex_error e = owned_error(5);
    cr_assert_str_eq(e.msg, "owned error 5");
    cr_assert_eq(owned_error_id(e), 5);
    ex_error copy = ex_error_retain(e);
    ex_error_release(e);
    cr_assert_eq(atomic_load(&owned_destroyed), 0, "destroyed while a reference is left");
    cr_assert_eq(owned_error_id(copy), 5, "the payload changed under the remaining reference");
    ex_error_release(copy);
    expect_owned_all_released(1);
}

static void *release_elsewhere(void *arg) {
    ex_error_release(*(ex_error *)arg);
    return NULL;
}

Test(error_owned, destroy_runs_on_the_thread_of_the_last_release) {
    owned_errors_reset();
    ex_error e = owned_error(1);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, release_elsewhere, &e), 0);
    cr_assert_eq(pthread_join(th, NULL), 0);
    cr_assert_neq(atomic_load(&owned_destroyed_on), test_thread_id(), "destroy ran on the test's thread");
    expect_owned_all_released(1);
}

Test(error_owned, errors_that_own_nothing_ignore_retain_and_release) {
    static const int payload = 42;
    ex_error a = ex_err(EX_EINVAL, "static");
    ex_error b = ex_err_data(EX_EUSER, "borrowed", &payload);
    cr_assert_not(ex_error_is_owned(a));
    cr_assert_not(ex_error_is_owned(b));
    long before = test_alloc_count();
    ex_error_release(ex_error_retain(a));
    ex_error_release(b);
    ex_error_release(ex_ok());
    cr_assert_eq(test_alloc_count(), before);
    cr_assert_eq(b.data, &payload);
    expect_no_leaks();
}

Test(error_owned, a_long_message_is_cut_and_marked) {
    char big[2 * EX_ERROR_MSG_MAX];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    ex_error e = ex_error_format(EX_EUSER, "%s", big);
    size_t len = strlen(e.msg);
    cr_assert_eq(len, EX_ERROR_MSG_MAX - 1, "message of %zu bytes", len);
    cr_assert_str_eq(e.msg + len - 3, "...");
    ex_error_release(e);
    expect_no_leaks();
}

Test(error_owned, a_null_format_gives_a_fixed_message) {
    ex_error e = ex_error_format(EX_EUSER, NULL);
    cr_assert_str_eq(e.msg, "(no message)");
    ex_error_release(e);
    expect_no_leaks();
}

Test(error_owned, code_ok_is_refused_and_the_payload_destroyed) {
    owned_errors_reset();
    ex_error e = ex_error_format(EX_OK, "fine");
    cr_assert_eq(e.code, EX_EINVAL);
    cr_assert_not(ex_error_is_owned(e));
    cr_assert_not_null(strstr(e.msg, "EX_OK"), "%s", e.msg);
    ex_error p = ex_error_with_payload(EX_OK, owned_payload_new(1), owned_payload_destroy, "fine");
    cr_assert_eq(p.code, EX_EINVAL);
    cr_assert_null(p.data);
    cr_assert_not(ex_error_is_owned(p));
    expect_owned_all_released(1);
}

Test(error_owned, no_memory_for_the_box_keeps_the_code_and_loses_the_text) {
    test_alloc_fail_at(1);
    ex_error e = ex_error_format(EX_EUSER + 2, "request %d", 9);
    cr_assert_eq(e.code, EX_EUSER + 2, "the code was replaced");
    cr_assert_not(ex_error_is_owned(e));
    cr_assert_not_null(strstr(e.msg, "no memory"), "%s", e.msg);
    ex_error_release(e);
    expect_no_leaks();
}

Test(error_owned, no_memory_for_the_box_destroys_the_payload_at_once) {
    owned_errors_reset();
    owned_payload *p = owned_payload_new(3);
    test_alloc_fail_at(1);
    ex_error e = ex_error_with_payload(EX_EUSER + 2, p, owned_payload_destroy, "request %d", 3);
    cr_assert_eq(e.code, EX_EUSER + 2);
    cr_assert_null(e.data);
    cr_assert_not(ex_error_is_owned(e));
    cr_assert_eq(atomic_load(&owned_destroyed), 1, "the payload was not destroyed");
    ex_error_release(e);
    expect_owned_all_released(1);
}

Test(error_owned, a_payload_without_destroy_is_only_carried) {
    static int carried = 7;
    ex_error e = ex_error_with_payload(EX_EUSER, &carried, NULL, "carried %d", carried);
    cr_assert_eq(e.data, &carried);
    cr_assert_str_eq(e.msg, "carried 7");
    ex_error_release(e);
    cr_assert_eq(carried, 7);
    expect_no_leaks();
}

Test(error_owned, debug_mode_catches_a_second_release, .signal = SIGABRT) {
    ex_debug_set(true);
    ex_error e = ex_error_format(EX_EUSER, "twice");
    ex_error_release(e);
    ex_error_release(e);
}

Test(error_owned, debug_mode_catches_a_retain_after_the_last_release, .signal = SIGABRT) {
    ex_debug_set(true);
    ex_error e = ex_error_format(EX_EUSER, "gone");
    ex_error_release(e);
    (void)ex_error_retain(e);
}

Test(error_owned, debug_mode_frees_kept_boxes_when_turned_off) {
    ex_debug_set(true);
    for (int i = 0; i < 10; i++) ex_error_release(ex_error_format(EX_EUSER, "kept %d", i));
    ex_debug_set(false);
    expect_no_leaks();
}
