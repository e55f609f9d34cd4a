/* SPDX-License-Identifier: MIT */
/* Stage names in the messages of bulk, bulk_grain and bulk_chunked
 * (bulk.h): through the C macros (the fn argument's spelling), the _named
 * forms, and the functions (no name); sequential and on a pool. */
#include <stdint.h>
#include <string.h>

#include "compose/compose_fixtures.h"

TEST_SUITE(bulk_names, 20);

/* A function that fails without a message gets the stage's. */
Test(bulk_names, a_function_failing_without_a_message_is_named) {
    seq_ctx c;
    seq_init(&c);
    c.fail_at = 1;
    c.fail_err.code = EX_EUSER + 1;  /* msg NULL */
    expect_sync_error_msg(ex_bulk(ex_just(), EX_PAR, 3, seq_fn, &c), EX_EUSER + 1, "ex_bulk(seq_fn): the function failed");
    expect_sync_error_msg(ex_bulk_named(ex_just(), EX_PAR, 3, seq_fn, &c, "scale_rows"), EX_EUSER + 1,
                          "ex_bulk(scale_rows): the function failed");
    expect_sync_error_msg((ex_bulk)(ex_just(), EX_PAR, 3, seq_fn, &c), EX_EUSER + 1, "ex_bulk: the function failed");
    expect_sync_error_msg(ex_bulk_grain(ex_just(), EX_PAR, 3, 2, seq_fn, &c), EX_EUSER + 1,
                          "ex_bulk_grain(seq_fn): the function failed");
    expect_sync_error_msg(ex_bulk_grain_named(ex_just(), EX_PAR, 3, 2, seq_fn, &c, "g"), EX_EUSER + 1,
                          "ex_bulk_grain(g): the function failed");
    expect_sync_error_msg((ex_bulk_grain)(ex_just(), EX_PAR, 3, 2, seq_fn, &c), EX_EUSER + 1, "ex_bulk_grain: the function failed");
    /* A message of the function's own stays as it is. */
    c.fail_err = ex_err(EX_EUSER + 2, "row 1 is bad");
    expect_sync_error_msg(ex_bulk(ex_just(), EX_PAR, 3, seq_fn, &c), EX_EUSER + 2, "row 1 is bad");
    expect_no_leaks();
}

static ex_error chunk_fails_quietly(void *ctx, size_t begin, size_t end, const ex_value *v, size_t n) {
    (void)ctx, (void)begin, (void)end, (void)v, (void)n;
    return (ex_error){ .code = EX_EUSER + 3 };  /* no message */
}

Test(bulk_names, bulk_chunked_messages_are_named) {
    expect_sync_error_msg(ex_bulk_chunked(ex_just(ex_int(1)), EX_PAR, 8, 0, chunk_fails_quietly, NULL), EX_EUSER + 3,
                          "ex_bulk_chunked(chunk_fails_quietly): the function failed");
    expect_sync_error_msg(ex_bulk_chunked_named(ex_just(ex_int(1)), EX_PAR, 8, 0, chunk_fails_quietly, NULL, "fill"), EX_EUSER + 3,
                          "ex_bulk_chunked(fill): the function failed");
    expect_sync_error_msg((ex_bulk_chunked)(ex_just(ex_int(1)), EX_PAR, 8, 0, chunk_fails_quietly, NULL), EX_EUSER + 3,
                          "ex_bulk_chunked: the function failed");
    expect_invalid_msg(ex_bulk_chunked(ex_just(), EX_PAR, 8, 0, NULL, NULL), EX_EINVAL, "ex_bulk_chunked(NULL): NULL function");
    expect_no_leaks();
}

Test(bulk_names, argument_errors_name_the_stage) {
    seq_ctx c;
    seq_init(&c);
    expect_invalid_msg(ex_bulk(NULL, EX_PAR, 3, seq_fn, &c), EX_EINVAL, "ex_bulk(seq_fn): NULL input sender");
    expect_invalid_msg(ex_bulk_grain_named(NULL, EX_PAR, 3, 1, seq_fn, &c, "g"), EX_EINVAL, "ex_bulk_grain(g): NULL input sender");
    expect_invalid_msg((ex_bulk)(ex_just(), EX_PAR, 3, NULL, &c), EX_EINVAL, "ex_bulk: NULL function");
    cr_assert_eq(c.calls, 0);
    expect_no_leaks();
}

/* On a pool: the chunks run on the workers, the first error is kept and
 * named. */
POOL_TEST(bulk_names, a_parallel_failure_is_named, 2) {
    par_ctx c;
    par_init(&c, p, 1000);
    c.fail_at = 500;
    c.fail_err.code = EX_EUSER + 4;  /* msg NULL */
    expect_sync_error_msg(ex_bulk(ex_starts_on(ex_pool_scheduler(p), ex_just(ex_int(1))), EX_PAR, 1000, par_fn, &c), EX_EUSER + 4,
                          "ex_bulk(par_fn): the function failed");
    par_fini(&c);
    par_init(&c, p, 1000);
    c.fail_at = 999;
    c.fail_err.code = EX_EUSER + 4;
    expect_sync_error_msg((ex_bulk_grain)(ex_starts_on(ex_pool_scheduler(p), ex_just(ex_int(1))), EX_PAR, 1000, 10, par_fn, &c),
                          EX_EUSER + 4, "ex_bulk_grain: the function failed");
    par_fini(&c);
}

/* A parallel bulk copies tuple values into its operation: out of memory
 * there is named too.  (Each allocation in turn fails until the bulk's.) */
Test(bulk_names, out_of_memory_storing_values_is_named) {
    ex_pool *p = test_pool_new(2);
    ex_value inner[2] = { ex_int(40), ex_int(2) };
    ex_tuple t = { 0, 2, inner };
    bool seen_bulk = false;
    for (long k = 1; k <= 50 && !seen_bulk; k++) {
        par_ctx c;
        par_init(&c, p, 100);
        test_alloc_fail_at(k);
        ex_result r = ex_sync_wait(
            ex_bulk_named(ex_continues_on(ex_just(ex_tuple_value(&t)), ex_pool_scheduler(p)), EX_PAR, 100, par_fn, &c, "sum_rows"));
        test_alloc_fail_at(0);
        if (r.disposition == EX_DISP_ERROR && r.error.code == EX_ENOMEM)
            seen_bulk = !strcmp(r.error.msg, "ex_bulk(sum_rows): out of memory copying tuple values");
        ex_result_destroy(&r);
        par_fini(&c);
    }
    cr_assert(seen_bulk, "no run failed in the bulk's copy of the values");
    test_pool_free(p);
    expect_no_leaks();
}
