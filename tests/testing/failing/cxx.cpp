// SPDX-License-Identifier: MIT
// The assertions of <cexec/testing.h> from C++17: the macros with their
// C++ branches (EX_ASSERT_VALUES takes a list, no compound literal),
// passing first, then failing with their messages as in C (run by
// scripts/check-failing-tests.sh with failing.c).
#include <criterion/criterion.h>

#include <cexec/cexec.h>
#include <cexec/testing.h>

#define MUST_FAIL(name, message) Test(must_fail_cxx, name, .description = message)

TestSuite(must_fail_cxx, .timeout = 30);

static ex_error twice(void *, const ex_value *in, size_t, ex_value *out) {
    out[0] = ex_int(2 * in[0].as.i);
    return ex_ok();
}

MUST_FAIL(values_from_cxx, "ex_just completed with values (int 1, str \"a\"), expected values (int 1, str \"b\")") {
    ex_test_outcome o;
    ex_test_outcome_init(&o);
    ex_test_start(&o, ex_just(ex_int(1), ex_str("a")));
    EX_ASSERT_VALUES(&o, ex_int(1), ex_str("a"));
    EX_ASSERT_VALUE_COUNT(&o, 2);
    EX_ASSERT_COMPLETED_INLINE(&o);
    EX_ASSERT_VALUES(&o, ex_int(1), ex_str("b"));
}

MUST_FAIL(a_named_stage_from_cxx, "ex_then(twice) completed with value int 42, expected value int 43") {
    ex_test_outcome o;
    ex_test_outcome_init(&o);
    ex_test_sync_wait(&o, ex_then_named(ex_just(ex_int(21)), twice, nullptr, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT),
                                        "twice"));
    EX_ASSERT_VALUE_INT(&o, 42);
    EX_EXPECT_VALUE_DOUBLE(&o, 42.0, 0.5);  // an int is not a double: fails, goes on
    EX_ASSERT_VALUE_INT(&o, 43);
}

MUST_FAIL(an_assertion_in_a_checked_body, "ex_just_stopped completed with set_stopped, expected no completion yet") {
    EX_CHECK_ALLOCATIONS(
        ex_test_outcome o;
        ex_test_outcome_init(&o);
        ex_test_start(&o, ex_just_stopped());
        EX_ASSERT_STOPPED(&o);
        EX_ASSERT_NOT_COMPLETED(&o);  // fails: the test ends here
    );
}

MUST_FAIL(a_leak_from_cxx, "(the default allocator) leaked 1 block (") {
    EX_CHECK_ALLOCATIONS(
        ex_test_outcome o;
        ex_test_outcome_init(&o);
        ex_test_start(&o, ex_just_stopped());
        EX_EXPECT_STOPPED(&o);
        ex_sender *kept = ex_just(ex_int(1));
        (void)kept;
        ex_test_outcome_destroy(&o);
    );
}
