/* SPDX-License-Identifier: MIT */
/* Tests that must fail: each uses an assertion of <cexec/testing.h> on an
 * outcome that does not match, and must fail with the message its
 * MUST_FAIL declares (a substring of what Criterion prints).
 * scripts/check-failing-tests.sh runs this binary in `make test` and fails
 * when a test passes, crashes, times out, or prints another message.
 * Written as a user's test file would be: Criterion and the public
 * headers only. */
#include <stdlib.h>

#include <criterion/criterion.h>

#include <cexec/cexec.h>
#include <cexec/testing.h>

/* A test that must fail with an assertion whose message contains
 * `message` (its description: the checker reads it from the TAP output). */
#define MUST_FAIL(name, message) Test(must_fail, name, .description = message)

TestSuite(must_fail, .timeout = 30);

static ex_error parse(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)in, (void)n, (void)out;
    return ex_err(EX_EINVAL, "bad input");
}

/* An outcome of s, started. */
static ex_test_outcome *started(ex_test_outcome *o, ex_sender *s) {
    ex_test_outcome_init(o);
    ex_test_start(o, s);
    return o;
}

/* ------------------------------------------------------------------ values */

MUST_FAIL(value_int_got_an_error,
          "ex_then(parse) completed with error EX_EINVAL \"bad input\", expected value int 42") {
    ex_test_outcome o;
    started(&o, ex_then(ex_just(ex_int(1)), parse, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)));
    EX_ASSERT_VALUE_INT(&o, 42);
}

MUST_FAIL(value_int_got_another_int, "ex_just completed with value int 41, expected value int 42") {
    ex_test_outcome o;
    EX_ASSERT_VALUE_INT(started(&o, ex_just(ex_int(41))), 42);
}

MUST_FAIL(value_uint_got_an_int, "ex_just completed with value int 7, expected value uint 7") {
    ex_test_outcome o;
    EX_ASSERT_VALUE_UINT(started(&o, ex_just(ex_int(7))), 7u);
}

MUST_FAIL(value_bool, "ex_just completed with value bool false, expected value bool true") {
    ex_test_outcome o;
    EX_ASSERT_VALUE_BOOL(started(&o, ex_just(ex_bool(false))), 1);
}

MUST_FAIL(value_ptr, "ex_just completed with value ptr (nil), expected value ptr 0x") {
    static int x;
    ex_test_outcome o;
    EX_ASSERT_VALUE_PTR(started(&o, ex_just(ex_ptr(NULL))), &x);
}

MUST_FAIL(value_str, "ex_just completed with value str \"abc\", expected value str \"abd\"") {
    ex_test_outcome o;
    EX_ASSERT_VALUE_STR(started(&o, ex_just(ex_str("abc"))), "abd");
}

MUST_FAIL(value_double_out_of_tolerance,
          "ex_just completed with value double 0.30000000000000004, expected value double 0.3 (within 1e-18)") {
    ex_test_outcome o;
    EX_ASSERT_VALUE_DOUBLE(started(&o, ex_just(ex_double(0.1 + 0.2))), 0.3, 1e-18);
}

MUST_FAIL(values, "ex_just completed with values (int 1, str \"a\"), expected values (int 1, str \"b\")") {
    ex_test_outcome o;
    EX_ASSERT_VALUES(started(&o, ex_just(ex_int(1), ex_str("a"))), ex_int(1), ex_str("b"));
}

MUST_FAIL(value_generic, "ex_just completed with value none, expected value int 0") {
    ex_test_outcome o;
    EX_ASSERT_VALUE(started(&o, ex_just(ex_none())), ex_int(0));
}

MUST_FAIL(value_void, "ex_just completed with value int 1, expected value () (set_value with no datums)") {
    ex_test_outcome o;
    EX_ASSERT_VALUE_VOID(started(&o, ex_just(ex_int(1))));
}

MUST_FAIL(value_count, "ex_just completed with value (), expected a value of 2 datums") {
    ex_test_outcome o;
    EX_ASSERT_VALUE_COUNT(started(&o, ex_just()), 2);
}

/* ------------------------------------------------------- errors, stopped */

MUST_FAIL(error_code, "ex_just_error completed with error EX_ENOMEM \"no room\", expected error EX_EINVAL") {
    ex_test_outcome o;
    EX_ASSERT_ERROR(started(&o, ex_just_error(ex_err(EX_ENOMEM, "no room"))), EX_EINVAL);
}

MUST_FAIL(error_code_of_a_value, "ex_just completed with value int 1, expected error EX_EUSER + 1") {
    ex_test_outcome o;
    EX_ASSERT_ERROR(started(&o, ex_just(ex_int(1))), EX_EUSER + 1);
}

MUST_FAIL(error_message,
          "ex_just_error completed with error EX_ENOMEM \"no room\", expected error EX_ENOMEM with a message "
          "containing \"space\"") {
    ex_test_outcome o;
    EX_ASSERT_ERROR_MESSAGE(started(&o, ex_just_error(ex_err(EX_ENOMEM, "no room"))), EX_ENOMEM, "space");
}

MUST_FAIL(stopped, "ex_just completed with value int 1, expected set_stopped") {
    ex_test_outcome o;
    EX_ASSERT_STOPPED(started(&o, ex_just(ex_int(1))));
}

/* ------------------------------------------------------------ completions */

MUST_FAIL(not_completed, "ex_just completed with value int 1, expected no completion yet") {
    ex_test_outcome o;
    EX_ASSERT_NOT_COMPLETED(started(&o, ex_just(ex_int(1))));
}

MUST_FAIL(a_value_before_the_loop_ran, "ex_starts_on has not completed, expected value int 5") {
    static ex_run_loop loop;
    ex_run_loop_init(&loop);
    ex_test_outcome o;
    EX_ASSERT_VALUE_INT(started(&o, ex_starts_on(ex_run_loop_scheduler(&loop), ex_just(ex_int(5)))), 5);
}

MUST_FAIL(completed_twice,
          "twice completed 2 times (set_stopped, then set_stopped), expected exactly one completion") {
    ex_test_outcome o;
    ex_test_outcome_init(&o);
    ex_test_outcome_set_name(&o, "twice");
    ex_receiver r = ex_test_outcome_receiver(&o);
    ex_set_stopped(r);
    ex_set_stopped(r);
    EX_ASSERT_COMPLETED_ONCE(&o);
}

MUST_FAIL(stopped_twice, "twice completed 2 times (set_stopped, then a value), expected set_stopped") {
    ex_test_outcome o;
    ex_test_outcome_init(&o);
    ex_test_outcome_set_name(&o, "twice");
    ex_receiver r = ex_test_outcome_receiver(&o);
    ex_set_stopped(r);
    ex_set_value(r, NULL, 0);
    EX_ASSERT_STOPPED(&o);
}

MUST_FAIL(completed_inline,
          "ex_starts_on completed with value int 5 on the calling thread, after ex_test_start returned, expected a "
          "completion inside ex_test_start") {
    static ex_run_loop loop;
    ex_run_loop_init(&loop);
    ex_test_outcome o;
    started(&o, ex_starts_on(ex_run_loop_scheduler(&loop), ex_just(ex_int(5))));
    ex_run_loop_run_one(&loop);
    EX_ASSERT_VALUE_INT(&o, 5);
    EX_ASSERT_COMPLETED_INLINE(&o);
}

MUST_FAIL(completed_on, "ex_just completed with value int 1 inside ex_test_start, expected a completion on thread 0x") {
    static int elsewhere;
    ex_test_outcome o;
    EX_ASSERT_COMPLETED_ON(started(&o, ex_just(ex_int(1))), &elsewhere);
}

MUST_FAIL(run_twice,
          "ex_just was misused (ex_test_start: the outcome was already run (one run per outcome)), expected value "
          "int 1") {
    ex_test_outcome o;
    started(&o, ex_just(ex_int(1)));
    ex_test_start(&o, ex_just(ex_int(1)));
    EX_ASSERT_VALUE_INT(&o, 1);
}

/* EX_EXPECT_* marks the test failed and goes on: the second message is
 * printed too. */
MUST_FAIL(expect_goes_on, "ex_just completed with value int 2, expected value int 4") {
    ex_test_outcome o;
    started(&o, ex_just(ex_int(2)));
    EX_EXPECT_VALUE_INT(&o, 3);
    EX_EXPECT_COMPLETED_ONCE(&o);
    EX_EXPECT_VALUE_INT(&o, 4);
    ex_test_outcome_destroy(&o);
}

/* ------------------------------------------------------------ allocations */

MUST_FAIL(a_leaked_sender, "(the default allocator) leaked 1 block (") {
    ex_test_allocations c;
    ex_test_allocations_begin(&c);
    c.settle_ms = 0;
    ex_sender *s = ex_just(ex_int(1));
    (void)s;
    EX_ASSERT_NO_LEAKS(&c);
}

MUST_FAIL(a_leak_in_a_checked_body, "(the default allocator) leaked 2 blocks (") {
    EX_CHECK_ALLOCATIONS(
        ex_sender *a = ex_just(ex_int(1)), *b = ex_just(ex_int(2));
        (void)a, (void)b;
    );
}

MUST_FAIL(a_leaked_operation_state, "\"budget\" leaked 1 block (") {
    static ex_budget_allocator chain;
    ex_budget_allocator_init(&chain, NULL, 1 << 20);
    ex_test_allocations c;
    ex_test_allocations_begin(&c);
    c.settle_ms = 0;
    ex_test_allocations_watch(&c, ex_budget_allocator_get(&chain));
    ex_test_outcome o;
    ex_test_outcome_init(&o);
    ex_test_outcome_set_allocator(&o, ex_budget_allocator_get(&chain));
    ex_test_start(&o, ex_just(ex_int(1)));
    EX_ASSERT_VALUE_INT(&o, 1);
    EX_ASSERT_NO_LEAKS(&c);  /* the outcome, holding the operation, is not destroyed yet */
}

static void *plain_allocate(void *ctx, size_t size, size_t align) {
    (void)ctx, (void)align;
    return malloc(size);
}

static void plain_deallocate(void *ctx, void *p, size_t size, size_t align) {
    (void)ctx, (void)size, (void)align;
    free(p);
}

MUST_FAIL(an_allocator_without_statistics, "cannot check allocator \"plain\": it keeps no statistics") {
    static const ex_allocator plain = { plain_allocate, plain_deallocate, NULL, "plain", NULL };
    ex_set_default_allocator(&plain);
    ex_test_allocations c;
    ex_test_allocations_begin(&c);
    EX_EXPECT_NO_LEAKS(&c);
    ex_set_default_allocator(NULL);
}

/* ------------------------------------------------------- docs/testing.md */

/* The failure docs/testing.md shows: a parse_port that took "80a" as 80. */
static ex_error parse_port(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)n;
    out[0] = ex_int(strtol(in[0].as.s, NULL, 10));
    return ex_ok();
}

MUST_FAIL(the_failure_the_guide_shows,
          "ex_then(parse_port) completed with value int 80, expected error EX_EINVAL with a message containing "
          "\"not a port: \\\"80a\\\"\"") {
    ex_test_outcome o;
    ex_test_outcome_init(&o);
    ex_test_sync_wait(&o, ex_then(ex_just(ex_str("80a")), parse_port, NULL, EX_SIG(EX_T_STR), EX_SIG(EX_T_INT)));
    EX_ASSERT_ERROR_MESSAGE(&o, EX_EINVAL, "not a port: \"80a\"");
}
