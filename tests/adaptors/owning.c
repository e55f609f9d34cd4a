/* SPDX-License-Identifier: MIT */
/* ex_owning_ctx: the context goes exactly once, after the last reference
 * and the last operation; the sender behaves as the one it wraps; a
 * refused build destroys the context at once. */
#include <stdlib.h>

#include "common/helpers.h"

TEST_SUITE(exec_owning, 10);

/* A context that counts its destruction. */
typedef struct owned {
    int destroyed;
    int value;
} owned;

static void destroy_owned(void *ctx) { ((owned *)ctx)->destroyed++; }

static ex_error read_ctx(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    out[0] = ex_int(((owned *)ctx)->value);
    return ex_ok();
}

static ex_sender *reader(owned *c) { return ex_then(ex_just(), read_ctx, c, EX_SIG0, EX_SIG(EX_T_INT)); }

Test(exec_owning, the_context_goes_with_the_last_reference) {
    owned c = { 0, 5 };
    ex_sender *s = ex_owning_ctx(reader(&c), &c, destroy_owned);
    ex_sender *second = ex_sender_retain(s);
    ex_sender_release(s);
    cr_assert_eq(c.destroyed, 0, "destroyed while a reference was left");
    expect_sync_int(second, 5);  /* consumes the last reference */
    cr_assert_eq(c.destroyed, 1);
    expect_no_leaks();
}

Test(exec_owning, an_operation_keeps_the_context_after_the_sender_is_released) {
    owned c = { 0, 7 };
    ex_sender *s = ex_owning_ctx(reader(&c), &c, destroy_owned);
    rec r1, r2;
    rec_init(&r1);
    rec_init(&r2);
    ex_operation *op1 = NULL, *op2 = NULL;
    cr_assert_eq(ex_connect_alloc(s, rec_receiver(&r1), &op1).code, 0);
    cr_assert_eq(ex_connect_alloc(s, rec_receiver(&r2), &op2).code, 0);  /* multi-shot */
    ex_sender_release(s);
    cr_assert_eq(c.destroyed, 0, "destroyed while operations were connected");
    ex_start(op1);
    rec_expect_value_int(&r1, 7);
    ex_operation_free(op1);
    cr_assert_eq(c.destroyed, 0, "destroyed while an operation was left");
    ex_start(op2);
    rec_expect_value_int(&r2, 7);
    ex_operation_free(op2);
    cr_assert_eq(c.destroyed, 1);
    expect_no_leaks();
}

Test(exec_owning, it_behaves_as_the_sender_it_wraps) {
    owned c = { 0, 0 };
    ex_single_thread_context ctx;
    test_stc_init(&ctx);
    ex_scheduler sch = ex_single_thread_context_scheduler(&ctx);
    ex_sender *s = ex_owning_ctx(ex_schedule(sch), &c, destroy_owned);
    ex_value v;
    cr_assert(ex_env_query(ex_sender_attrs(s), &ex_key_completion_scheduler_value, &v), "no completion scheduler");
    cr_assert(ex_scheduler_equal(v.as.sched, sch));
    cr_assert_eq(ex_sender_sigs(s)->nvalues, 1);
    expect_sync_values(s, 0);  /* schedule's set_value(), on the context */
    cr_assert_eq(c.destroyed, 1);
    expect_sync_error(ex_owning_ctx(ex_just_error(ex_err(EX_EUSER + 2, "child error")), &c, destroy_owned), EX_EUSER + 2);
    cr_assert_eq(c.destroyed, 2);
    test_stc_destroy(&ctx);
    expect_no_leaks();
}

Test(exec_owning, a_refused_build_destroys_the_context_at_once) {
    owned c = { 0, 0 };
    expect_invalid(ex_owning_ctx(NULL, &c, destroy_owned), EX_EINVAL);
    cr_assert_eq(c.destroyed, 1);
    expect_invalid(ex_owning_ctx(ex_invalid_sender(EX_EUSER + 3, "invalid on purpose"), &c, destroy_owned), EX_EUSER + 3);
    cr_assert_eq(c.destroyed, 2);
    ex_sender *child = reader(&c);
    test_alloc_fail_next();
    expect_built_enomem(ex_owning_ctx(child, &c, destroy_owned));
    cr_assert_eq(c.destroyed, 3);
    /* No destroy function: refused, the child released, ctx untouched. */
    expect_invalid(ex_owning_ctx(reader(&c), &c, NULL), EX_EINVAL);
    cr_assert_eq(c.destroyed, 3);
    expect_no_leaks();
}
