/* SPDX-License-Identifier: MIT */
/* when_all's messages name the child (counted from 0) and the types or
 * counts involved (when_all.h), when built and at run time. */
#include "compose/compose_fixtures.h"

TEST_SUITE(when_all_messages, 20);

static void never_started(test_op *op) { (void)op; }

Test(when_all_messages, a_child_with_several_value_signatures_is_named_with_them) {
    ex_sigs two = ex_sigs_none();
    cr_assert(ex_sigs_add_value(&two, EX_SIG(EX_T_INT, EX_T_INT)));
    cr_assert(ex_sigs_add_value(&two, EX_SIG(EX_T_DOUBLE)));
    ex_sender *s = ex_when_all(ex_just(), ex_just(ex_int(1)), test_sender_new(never_started, NULL, &two));
    expect_invalid_msg(s, EX_EINVAL,
                       "ex_when_all: child 2 sends (int, int) and (double); a when_all child may send at most one "
                       "value signature (ex_when_all_with_variant takes several)");
    expect_no_leaks();
}

Test(when_all_messages, too_many_values_in_all_names_the_totals) {
    ex_sender *s = ex_when_all(ex_just(ex_int(0), ex_int(1), ex_int(2), ex_int(3)), ex_just(ex_int(4), ex_int(5)),
                               ex_just(ex_int(6), ex_int(7), ex_int(8)), ex_just(ex_int(9)));
    expect_invalid_msg(s, EX_EINVAL,
                       "ex_when_all: the children send 10 values in all; at most EX_MAX_ARITY (8) fit "
                       "(child 2 takes the count from 6 to 9; ex_when_all_collect_n takes any number)");
    expect_no_leaks();
}

Test(when_all_messages, a_null_child_is_named) {
    expect_invalid_msg(ex_when_all(ex_just(), NULL), EX_EINVAL, "ex_when_all: child 1 is a NULL input sender");
    expect_no_leaks();
}

static ex_sender *lv_five(void *ctx, const ex_value *in, size_t n) {
    (void)ctx, (void)in, (void)n;
    return ex_just(ex_int(0), ex_int(1), ex_int(2), ex_int(3), ex_int(4));
}

/* Children known only at run time: their values are counted when they
 * arrive. */
Test(when_all_messages, too_many_values_at_run_time_names_the_total) {
    ex_sender *s = ex_when_all(ex_let_value(ex_just(), lv_five, NULL, EX_SIG0), ex_let_value(ex_just(), lv_five, NULL, EX_SIG0));
    expect_sync_error_msg(s, EX_EINVAL, "ex_when_all: the children sent 10 values in all; at most EX_MAX_ARITY (8) fit "
                                        "(ex_when_all_collect_n takes any number)");
    expect_no_leaks();
}

/* A sender that declares (int) and sends (int, int). */
static void sends_two(test_op *op) { ex_set_value(op->r, (ex_value[]){ ex_int(1), ex_int(2) }, 2); }

Test(when_all_messages, a_child_sending_more_than_its_signature_is_named) {
    ex_sigs one = ex_sigs_none();
    cr_assert(ex_sigs_add_value(&one, EX_SIG(EX_T_INT)));
    ex_sender *s = ex_when_all(ex_just(ex_str("a")), test_sender_new(sends_two, NULL, &one));
    expect_sync_error_msg(s, EX_EINVAL, "ex_when_all: child 1 sent 2 values (int, int); its signature allows at most 1");
    expect_no_leaks();
}
