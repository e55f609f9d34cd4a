/* SPDX-License-Identifier: MIT */
/* The example of docs/testing.md ("Assertions and receivers"): a user's
 * Criterion file that tests a pipeline of their own with
 * <cexec/testing.h>.  It is built and run with the suite (make test), so
 * the document's copy of it compiles and passes. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include <cexec/cexec.h>
#include <cexec/testing.h>

/* The code under test: a port number parsed on a scheduler the caller
 * chooses. */
static ex_error parse_port(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)n;
    char *end;
    long port = strtol(in[0].as.s, &end, 10);
    if (*end || port < 1 || port > 65535) return ex_error_format(EX_EINVAL, "not a port: \"%s\"", in[0].as.s);
    out[0] = ex_int(port);
    return ex_ok();
}

static ex_sender *port_of(ex_scheduler sch, const char *text) {
    return ex_then(ex_starts_on(sch, ex_just(ex_str(text))), parse_port, NULL, EX_SIG(EX_T_STR), EX_SIG(EX_T_INT));
}

/* The tests. */
TestSuite(testing_ports, .timeout = 10);

Test(testing_ports, a_port_is_parsed_when_its_scheduler_runs) {
    ex_run_loop loop;
    cr_assert_eq(ex_run_loop_init(&loop).code, EX_OK);
    EX_CHECK_ALLOCATIONS(
        ex_test_outcome o;
        ex_test_outcome_init(&o);
        ex_test_start(&o, port_of(ex_run_loop_scheduler(&loop), "8080"));
        EX_ASSERT_NOT_COMPLETED(&o);      /* nothing ran yet: the loop has not */
        cr_assert(ex_run_loop_run_one(&loop));
        EX_ASSERT_VALUE_INT(&o, 8080);
        EX_ASSERT_COMPLETED_ON(&o, ex_test_thread_id());
        cr_assert_eq(ex_test_outcome_destroy(&o).code, EX_OK);
    );
    ex_run_loop_finish(&loop);
    cr_assert_eq(ex_run_loop_destroy(&loop).code, EX_OK);
}

Test(testing_ports, a_bad_port_is_an_error_that_says_which) {
    ex_test_outcome o;
    ex_test_outcome_init(&o);
    ex_test_sync_wait(&o, port_of(ex_inline_scheduler(), "80a"));
    EX_ASSERT_ERROR_MESSAGE(&o, EX_EINVAL, "not a port: \"80a\"");
    ex_test_outcome_destroy(&o);  /* releases the error */
}

Test(testing_ports, a_stop_before_the_scheduler_runs_stops_the_parse) {
    ex_run_loop loop;
    cr_assert_eq(ex_run_loop_init(&loop).code, EX_OK);
    ex_test_outcome o;
    ex_test_outcome_init(&o);
    ex_test_start(&o, port_of(ex_run_loop_scheduler(&loop), "443"));
    ex_test_outcome_request_stop(&o);
    EX_ASSERT_NOT_COMPLETED(&o);
    ex_run_loop_run_one(&loop);
    EX_ASSERT_STOPPED(&o);
    ex_test_outcome_destroy(&o);
    ex_run_loop_finish(&loop);
    cr_assert_eq(ex_run_loop_destroy(&loop).code, EX_OK);
}
