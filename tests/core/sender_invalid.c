/* SPDX-License-Identifier: MIT */
/* [exec.snd]: invalid senders and the bad-input contract of the builders (suite exec_sender, declared in sender.c). */
#include <stdlib.h>

#include "core/sender_fixtures.h"

/* ---------------------------------------------------- invalid senders */

Test(exec_sender, invalid_sender_reports_and_completes_with_its_error) {
    ex_sender *s = ex_invalid_sender(EX_EUSER + 3, "made up");
    ex_error st = ex_sender_status(s);
    cr_assert_eq(st.code, EX_EUSER + 3);
    cr_assert_str_eq(st.msg, "made up");
    const ex_sigs *sg = ex_sender_sigs(s);
    cr_assert_eq(sg->nvalues, 0);
    cr_assert_eq(sg->flags, EX_SIGS_ERROR);
    rec rc;
    rec_init(&rc);
    ex_operation *op = run_start(s, &rc);
    rec_expect_error(&rc, EX_EUSER + 3);
    cr_assert_str_eq(rc.err.msg, "made up");
    run_destroy_release(op, s);
    expect_no_leaks();
}

Test(exec_sender, invalid_sender_edge_codes) {
    ex_sender *s = ex_invalid_sender(EX_OK, NULL);
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL, "an invalid sender never reports success");
    cr_assert_not_null(ex_sender_status(s).msg);
    expect_sync_error(s, EX_EINVAL);
    s = ex_invalid_sender(EX_ENOMEM, "oom");
    cr_assert_eq(ex_sender_status(s).code, EX_ENOMEM);
    expect_sync_error(s, EX_ENOMEM);
    s = ex_invalid_sender(EX_EUSER, NULL);
    cr_assert_not_null(ex_sender_status(s).msg);
    ex_sender_release(s);
    cr_assert_eq(ex_sender_status(NULL).code, EX_EINVAL);
    cr_assert_not_null(ex_sender_status(NULL).msg);
    expect_no_leaks();
}

Test(exec_sender, invalid_sender_when_out_of_memory) {
    test_alloc_fail_at(1);
    ex_sender *s = ex_invalid_sender(EX_EUSER, "x");
    cr_assert_neq(ex_sender_status(s).code, EX_OK);
    ex_result r = ex_sync_wait(s);
    cr_assert_eq(r.disposition, EX_DISP_ERROR);
    cr_assert(r.error.code == EX_EUSER || r.error.code == EX_ENOMEM, "code %d", r.error.code);
    expect_no_leaks();
}

Test(exec_sender, reject_releases_its_inputs) {
    long base = test_stats.in_use;
    ex_sender *in[3] = { ex_just(ex_int(1)), NULL, ex_just(ex_int(2), ex_int(3)) };
    cr_assert_eq(test_stats.in_use, base + 2);
    ex_sender *s = ex_reject(EX_EUSER + 9, "rejected", 3, in);
    cr_assert_eq(ex_sender_status(s).code, EX_EUSER + 9);
    cr_assert_str_eq(ex_sender_status(s).msg, "rejected");
    expect_sync_error(s, EX_EUSER + 9);
    cr_assert_eq(test_stats.in_use, base);
    expect_no_leaks();
}

Test(exec_sender, check_input) {
    ex_error e = ex_check_input(NULL, "who: NULL");
    cr_assert_eq(e.code, EX_EINVAL);
    cr_assert_str_eq(e.msg, "who: NULL");
    ex_sender *ok = ex_just();
    cr_assert_eq(ex_check_input(ok, "x").code, EX_OK);
    ex_sender *bad = ex_invalid_sender(EX_EUSER, "bad");
    e = ex_check_input(bad, "x");
    cr_assert_eq(e.code, EX_EUSER);
    cr_assert_str_eq(e.msg, "bad");
    ex_sender_release(ok);
    ex_sender_release(bad);
    expect_no_leaks();
}

static ex_sender *closure_id(void *ctx, ex_sender *s) {
    (void)ctx;
    return s;
}

Test(exec_sender, invalid_input_propagates_through_adaptors) {
    enum { K = 12 };
    for (int k = 0; k < K; k++) {
        counter c = { 0, 1 };
        ex_sender *bad = ex_invalid_sender(EX_EUSER + 5, "bad input");
        ex_sender *s = NULL;
        switch (k) {
        case 0: s = ex_then(bad, count_add, &c, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)); break;
        case 1: s = ex_then(bad, count_add, &c, EX_SIG_VARIADIC, EX_SIG(EX_T_INT)); break;
        case 2: s = ex_let_value(bad, let_just, NULL, EX_SIG_VARIADIC); break;
        case 3: s = ex_into_variant(bad); break;
        case 4: s = ex_stopped_as_optional(bad); break;
        case 5: s = ex_stopped_as_error(bad, ex_err(EX_EUSER, "s")); break;
        case 6: s = ex_continues_on(bad, ex_inline_scheduler()); break;
        case 7: s = ex_starts_on(ex_inline_scheduler(), bad); break;
        case 8: s = ex_write_env(bad, &ex_key_get_scheduler, ex_sched_value(ex_inline_scheduler())); break;
        case 9: s = ex_on(ex_inline_scheduler(), bad); break;
        case 10: s = ex_on_closure(bad, ex_inline_scheduler(), closure_id, NULL); break;
        case 11: s = ex_then(ex_then(bad, count_add, &c, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)), count_add, &c,
                             EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)); break;
        }
        ex_error st = ex_sender_status(s);
        cr_assert_eq(st.code, EX_EUSER + 5, "adaptor %d: status %d", k, st.code);
        cr_assert_str_eq(st.msg, "bad input", "adaptor %d", k);
        ex_result r = ex_sync_wait(s);
        expect_error(&r, EX_EUSER + 5);
        cr_assert_str_eq(r.error.msg, "bad input");
        cr_assert_eq(c.calls, 0, "adaptor %d: no function is called", k);
    }
    expect_no_leaks();
}

Test(exec_sender, null_input_is_einval_for_every_adaptor) {
    counter c = { 0, 1 };
    ex_sender *ss[] = {
        ex_then(NULL, count_add, &c, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)),
        ex_let_value(NULL, let_just, NULL, EX_SIG_VARIADIC),
        ex_into_variant(NULL),
        ex_stopped_as_optional(NULL),
        ex_write_env(NULL, &ex_key_get_scheduler, ex_sched_value(ex_inline_scheduler())),
        ex_continues_on(NULL, ex_inline_scheduler()),
    };
    for (size_t i = 0; i < sizeof ss / sizeof ss[0]; i++) {
        ex_error st = ex_sender_status(ss[i]);
        cr_assert_eq(st.code, EX_EINVAL, "adaptor %zu", i);
        cr_assert_not_null(st.msg);
        expect_sync_error(ss[i], EX_EINVAL);
    }
    expect_sync_error(NULL, EX_EINVAL);
    expect_no_leaks();
}

Test(exec_sender, signature_mismatch_is_einval_and_releases_child) {
    counter c = { 0, 1 };
    long base = test_stats.in_use;
    ex_sender *s = ex_then(ex_just(ex_double(1.0)), count_add, &c, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    cr_assert_not_null(ex_sender_status(s).msg);
    ex_sender_release(s);
    cr_assert_eq(test_stats.in_use, base, "the rejected child was released");
    cr_assert_eq(c.calls, 0);
    expect_no_leaks();
}
