/* SPDX-License-Identifier: MIT */
/* The messages of the ex_test_check_* checks (cexec/testing.h), word for
 * word: "<name> <what it did>, expected <what was expected>".  The
 * Criterion side (the macros failing a test with them) is checked by
 * tests/testing/failing/. */
#include <stdio.h>
#include <string.h>

#include <cexec/testing.h>

#include "common/helpers.h"

TEST_SUITE(testing_messages, 10);

/* A then that fails as a parser would. */
static ex_error parse(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)in, (void)n, (void)out;
    return ex_err(EX_EINVAL, "bad input");
}

/* Runs s into a fresh outcome (destroyed by done). */
static ex_test_outcome *run(ex_test_outcome *o, ex_sender *s) {
    ex_test_outcome_init(o);
    ex_test_start(o, s);
    return o;
}

static void done(ex_test_outcome *o) { cr_assert_eq(ex_test_outcome_destroy(o).code, EX_OK); }

Test(testing_messages, a_value_check_names_the_stage_what_came_and_what_was_expected) {
    char msg[EX_TEST_MESSAGE_MAX];
    ex_test_outcome o;
    run(&o, ex_then(ex_just(ex_int(1)), parse, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)));
    cr_assert_not(ex_test_check_value(msg, sizeof msg, &o, ex_int(42)));
    cr_assert_str_eq(msg, "ex_then(parse) completed with error EX_EINVAL \"bad input\", expected value int 42");
    done(&o);

    run(&o, ex_just(ex_int(41)));
    cr_assert_not(ex_test_check_value(msg, sizeof msg, &o, ex_int(42)));
    cr_assert_str_eq(msg, "ex_just completed with value int 41, expected value int 42");
    cr_assert_not(ex_test_check_value(msg, sizeof msg, &o, ex_uint(41)));
    cr_assert_str_eq(msg, "ex_just completed with value int 41, expected value uint 41");
    done(&o);

    run(&o, ex_just_stopped());
    cr_assert_not(ex_test_check_value(msg, sizeof msg, &o, ex_str("x")));
    cr_assert_str_eq(msg, "ex_just_stopped completed with set_stopped, expected value str \"x\"");
    done(&o);

    run(&o, ex_just(ex_int(1), ex_str("a")));
    ex_value want[] = { ex_int(1), ex_str("b") };
    cr_assert_not(ex_test_check_values(msg, sizeof msg, &o, want, 2));
    cr_assert_str_eq(msg, "ex_just completed with values (int 1, str \"a\"), expected values (int 1, str \"b\")");
    cr_assert_not(ex_test_check_values(msg, sizeof msg, &o, NULL, 0));
    cr_assert_str_eq(msg, "ex_just completed with values (int 1, str \"a\"), expected value ()");
    done(&o);

    run(&o, ex_just(ex_bool(false), ex_none()));
    cr_assert_not(ex_test_check_value_count(msg, sizeof msg, &o, 1));
    cr_assert_str_eq(msg, "ex_just completed with values (bool false, none), expected a value of 1 datum");
    cr_assert_not(ex_test_check_value_count(msg, sizeof msg, &o, 0));
    cr_assert_str_eq(msg, "ex_just completed with values (bool false, none), expected value () (set_value with no "
                          "datums)");
    done(&o);
    expect_no_leaks();
}

Test(testing_messages, doubles_show_the_digits_that_tell_them_apart) {
    char msg[EX_TEST_MESSAGE_MAX];
    ex_test_outcome o;
    run(&o, ex_just(ex_double(0.1 + 0.2)));
    cr_assert_not(ex_test_check_value_double(msg, sizeof msg, &o, 0.3, 0));
    cr_assert_str_eq(msg, "ex_just completed with value double 0.30000000000000004, expected value double 0.3");
    cr_assert_not(ex_test_check_value_double(msg, sizeof msg, &o, 0.3, 1e-20));
    cr_assert_str_eq(msg, "ex_just completed with value double 0.30000000000000004, expected value double 0.3 "
                          "(within 1e-20)");
    cr_assert_not(ex_test_check_value(msg, sizeof msg, &o, ex_double(0.5)));
    cr_assert_str_eq(msg, "ex_just completed with value double 0.30000000000000004, expected value double 0.5");
    done(&o);
    expect_no_leaks();
}

Test(testing_messages, strings_are_quoted_escaped_and_cut) {
    char msg[EX_TEST_MESSAGE_MAX];
    ex_test_outcome o;
    run(&o, ex_just(ex_str("a\"b\\c\n\t\x01")));
    cr_assert_not(ex_test_check_value(msg, sizeof msg, &o, ex_str(NULL)));
    cr_assert_str_eq(msg, "ex_just completed with value str \"a\\\"b\\\\c\\n\\t\\x01\", expected value str (null)");
    done(&o);

    char longer[301];
    memset(longer, 'x', 300);
    longer[300] = '\0';
    run(&o, ex_just(ex_str(longer)));
    cr_assert_not(ex_test_check_value(msg, sizeof msg, &o, ex_str("y")));
    char want[EX_TEST_MESSAGE_MAX];
    snprintf(want, sizeof want, "ex_just completed with value str \"%.160s\"..., expected value str \"y\"", longer);
    cr_assert_str_eq(msg, want);
    done(&o);
    expect_no_leaks();
}

Test(testing_messages, tuples_and_handles_are_shown) {
    char msg[EX_TEST_MESSAGE_MAX];
    ex_test_outcome o;
    ex_test_outcome_init(&o);
    ex_test_sync_wait(&o, ex_into_variant(ex_just(ex_int(7), ex_str("x"))));
    cr_assert_not(ex_test_check_value(msg, sizeof msg, &o, ex_int(7)));
    cr_assert_str_eq(msg, "ex_into_variant completed with value tuple#0(int 7, str \"x\"), expected value int 7");
    done(&o);

    run(&o, ex_just(ex_alloc_value(ex_libc_allocator())));
    cr_assert_not(ex_test_check_value(msg, sizeof msg, &o, ex_alloc_value(NULL)));
    cr_assert_str_eq(msg, "ex_just completed with value allocator libc, expected value allocator (unnamed)");
    done(&o);
    expect_no_leaks();
}

Test(testing_messages, error_checks_name_the_codes) {
    char msg[EX_TEST_MESSAGE_MAX];
    ex_test_outcome o;
    run(&o, ex_just_error(ex_err(EX_ENOMEM, "no room")));
    cr_assert_not(ex_test_check_error(msg, sizeof msg, &o, EX_EINVAL));
    cr_assert_str_eq(msg, "ex_just_error completed with error EX_ENOMEM \"no room\", expected error EX_EINVAL");
    cr_assert_not(ex_test_check_error_message(msg, sizeof msg, &o, EX_ENOMEM, "space"));
    cr_assert_str_eq(msg, "ex_just_error completed with error EX_ENOMEM \"no room\", expected error EX_ENOMEM with a "
                          "message containing \"space\"");
    cr_assert(ex_test_check_error_message(msg, sizeof msg, &o, EX_ENOMEM, "room"), "%s", msg);
    cr_assert(ex_test_check_error_message(msg, sizeof msg, &o, EX_ENOMEM, NULL), "%s", msg);
    done(&o);

    run(&o, ex_just_error(ex_err(EX_EUSER + 3, "mine")));
    cr_assert_not(ex_test_check_error(msg, sizeof msg, &o, EX_EUSER));
    cr_assert_str_eq(msg, "ex_just_error completed with error EX_EUSER + 3 \"mine\", expected error EX_EUSER");
    cr_assert_not(ex_test_check_error(msg, sizeof msg, &o, EIO));
    cr_assert(strstr(msg, "expected error code 5") != NULL, "%s", msg);
    cr_assert_not(ex_test_check_stopped(msg, sizeof msg, &o));
    cr_assert_str_eq(msg, "ex_just_error completed with error EX_EUSER + 3 \"mine\", expected set_stopped");
    done(&o);

    const int codes[] = { EX_ESHUTDOWN, EX_EBUSY, EX_EAGAIN, EX_ECANCELED, EX_ETOODEEP, EX_EDEADLK, EX_ENOTSUP,
                          EX_ETIMEDOUT };
    const char *names[] = { "EX_ESHUTDOWN", "EX_EBUSY", "EX_EAGAIN", "EX_ECANCELED", "EX_ETOODEEP", "EX_EDEADLK",
                            "EX_ENOTSUP", "EX_ETIMEDOUT" };
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        run(&o, ex_just_stopped());
        cr_assert_not(ex_test_check_error(msg, sizeof msg, &o, codes[i]));
        char want[128];
        snprintf(want, sizeof want, "ex_just_stopped completed with set_stopped, expected error %s", names[i]);
        cr_assert_str_eq(msg, want);
        done(&o);
    }
    expect_no_leaks();
}

Test(testing_messages, completion_checks_say_when_and_where) {
    char msg[EX_TEST_MESSAGE_MAX];
    ex_run_loop loop;
    ex_scheduler sch = test_loop_init(&loop);
    ex_test_outcome o;
    run(&o, ex_starts_on(sch, ex_just(ex_int(5))));
    cr_assert_not(ex_test_check_value(msg, sizeof msg, &o, ex_int(5)));
    cr_assert_str_eq(msg, "ex_starts_on has not completed, expected value int 5");
    cr_assert_not(ex_test_check_completed_once(msg, sizeof msg, &o));
    cr_assert_str_eq(msg, "ex_starts_on has not completed, expected exactly one completion");
    cr_assert(ex_test_check_not_completed(msg, sizeof msg, &o), "%s", msg);
    ex_run_loop_run_one(&loop);
    cr_assert_not(ex_test_check_not_completed(msg, sizeof msg, &o));
    cr_assert_str_eq(msg, "ex_starts_on completed with value int 5, expected no completion yet");
    cr_assert_not(ex_test_check_completed_inline(msg, sizeof msg, &o));
    cr_assert_str_eq(msg, "ex_starts_on completed with value int 5 on the calling thread, after ex_test_start "
                          "returned, expected a completion inside ex_test_start");
    int elsewhere;
    cr_assert_not(ex_test_check_completed_on(msg, sizeof msg, &o, &elsewhere));
    char want[EX_TEST_MESSAGE_MAX];
    snprintf(want, sizeof want, "ex_starts_on completed with value int 5 on the calling thread, after ex_test_start "
                                "returned, expected a completion on thread %p", (void *)&elsewhere);
    cr_assert_str_eq(msg, want);
    done(&o);

    run(&o, ex_just(ex_int(1)));
    cr_assert_not(ex_test_check_completed_on(msg, sizeof msg, &o, &elsewhere));
    snprintf(want, sizeof want, "ex_just completed with value int 1 inside ex_test_start, expected a completion on "
                                "thread %p", (void *)&elsewhere);
    cr_assert_str_eq(msg, want);
    cr_assert(ex_test_check_completed_once(msg, sizeof msg, &o), "%s", msg);
    cr_assert_str_eq(msg, "ex_just completed with value int 1, expected exactly one completion");
    done(&o);
    test_loop_destroy(&loop);
    expect_no_leaks();
}

Test(testing_messages, a_short_buffer_is_cut_and_marked) {
    ex_test_outcome o;
    run(&o, ex_just(ex_int(41)));
    char small[16];
    cr_assert_not(ex_test_check_value(small, sizeof small, &o, ex_int(42)));
    cr_assert_str_eq(small, "ex_just comp...");
    cr_assert_eq(ex_test_outcome_describe(&o, small, sizeof small), strlen("completed with value int 41"));
    cr_assert_str_eq(small, "completed wi...");
    cr_assert_eq(ex_test_outcome_describe(&o, NULL, 0), strlen("completed with value int 41"));
    done(&o);
    expect_no_leaks();
}

/* Values the outcome could not copy (here: nested deeper than it copies;
 * the same for no memory): the check fails and says why; the count check
 * still knows how many there were. */
Test(testing_messages, values_that_could_not_be_kept_are_reported) {
    char msg[EX_TEST_MESSAGE_MAX];
    ex_test_outcome o;
    ex_test_outcome_init(&o);
    ex_value v = ex_int(1);
    ex_tuple deep[20];
    ex_value link[20];
    for (int i = 0; i < 20; i++) {
        deep[i] = (ex_tuple){ 0, 1, i == 19 ? &v : &link[i + 1] };
        link[i] = ex_tuple_value(&deep[i]);
    }
    ex_set_value(ex_test_outcome_receiver(&o), &link[0], 1);  /* nested deeper than the copy goes */
    cr_assert_not(ex_test_check_value(msg, sizeof msg, &o, ex_int(1)));
    cr_assert_str_eq(msg, "the operation completed with a value of 1 datum (not kept: tuples nested too deep to copy), "
                          "expected value int 1");
    EX_ASSERT_VALUE_COUNT(&o, 1);
    done(&o);
    expect_no_leaks();
}

/* Bad arguments fail the check (or are refused) and say why; nothing
 * crashes and nothing leaks. */
Test(testing_messages, null_arguments_fail_and_say_so) {
    char msg[EX_TEST_MESSAGE_MAX];
    cr_assert_not(ex_test_check_value(msg, sizeof msg, NULL, ex_int(1)));
    cr_assert_str_eq(msg, "the check was given a NULL outcome");
    cr_assert_not(ex_test_check_not_completed(msg, sizeof msg, NULL));
    cr_assert_str_eq(msg, "the check was given a NULL outcome");
    cr_assert_not(ex_test_check_no_leaks(msg, sizeof msg, NULL));
    cr_assert_str_eq(msg, "the check was given a NULL ex_test_allocations");
    cr_assert_not(ex_test_start(NULL, ex_just(ex_int(1))));
    ex_test_sync_wait(NULL, ex_just(ex_int(1)));
    cr_assert_eq(ex_test_outcome_destroy(NULL).code, EX_EINVAL);

    ex_test_outcome o;
    run(&o, ex_just(ex_int(1)));
    cr_assert_not(ex_test_check_values(msg, sizeof msg, &o, NULL, 1));
    cr_assert_str_eq(msg, "ex_just completed with value int 1, expected 1 values given as NULL");
    done(&o);
    expect_no_leaks();
}
