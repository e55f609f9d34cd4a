/* SPDX-License-Identifier: MIT */
/* [exec.into.variant], [exec.stopped.as.optional], [exec.stopped.as.error],
 * and sync_wait_with_variant ([exec.sync.wait.var]). */
#include <stdio.h>
#include <string.h>

#include "common/helpers.h"

TEST_SUITE(exec_into_variant, 10);

/* ------------------------------------------------------------- fixtures */

/* Starts s (over a schedule on loop) into rc, whose stop token is then
 * stopped, and runs the loop's item: the schedule completes stopped. */
static ex_operation *start_stopped_schedule(ex_sender *s, rec *rc, ex_run_loop *loop) {
    rec_init(rc);
    rec_with_stop(rc);
    ex_operation *op = run_start(s, rc);
    ex_stop_source_request_stop(&rc->stop);
    cr_assert(ex_run_loop_run_one(loop));
    return op;
}

/* then: int x -> int x + 1, or fails when *ctx is true. */
static ex_error then_maybe_fail(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)n;
    if (*(const bool *)ctx) return ex_err(EX_EUSER + 1, "failed");
    out[0] = ex_int(in[0].as.i + 1);
    return ex_ok();
}

/* upon_error: e -> (str msg, double 2.5) */
static ex_error err_to_pair(void *ctx, ex_error e, ex_value *out) {
    (void)ctx;
    out[0] = ex_str(e.msg);
    out[1] = ex_double(2.5);
    return ex_ok();
}

/* A sender with two value signatures: set_value(int) from then, and
 * set_value(str, double) from upon_error when then fails. */
static ex_sender *two_sig_child(const bool *fail) {
    return ex_upon_error(ex_then(ex_just(ex_int(1)), then_maybe_fail, (void *)(uintptr_t)fail, EX_SIG(EX_T_INT),
                                 EX_SIG(EX_T_INT)),
                         err_to_pair, NULL, EX_SIG(EX_T_STR, EX_T_DOUBLE));
}

/* Index of sig in s's value signatures (exact match), or -1. */
static int sig_index(const ex_sigs *s, ex_sig sig) {
    for (unsigned i = 0; i < s->nvalues; i++) {
        if (s->values[i].arity != sig.arity) continue;
        if (memcmp(s->values[i].types, sig.types, sig.arity) == 0) return (int)i;
    }
    return -1;
}

static ex_error to_int(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)in, (void)n;
    out[0] = ex_int(1);
    return ex_ok();
}

static ex_error stopped_to_int(void *ctx, ex_value *out) {
    (void)ctx;
    out[0] = ex_int(-1);
    return ex_ok();
}

static ex_sender *let_ret(void *ctx, const ex_value *in, size_t n) {
    (void)in, (void)n;
    return ex_sender_retain(ctx);
}

/* ----------------------------------------------------------- into_variant */

Test(exec_into_variant, into_variant_wraps_values_in_one_tuple) {
    ex_sender *s = ex_into_variant(ex_just(ex_int(1), ex_str("a")));
    expect_sigs(s, EX_SIG(EX_T_TUPLE), 0xff, 0); /* just(...) neither errors nor stops */
    rec fr;
    rec_init(&fr);
    run_in_place(s, &fr);
    rec_expect_values(&fr, 1);
    cr_assert_eq(fr.v[0].type, EX_T_TUPLE);
    cr_assert_str_eq(fr.text, "tuple#0(int 1, str \"a\")");
    expect_no_leaks();
}

Test(exec_into_variant, into_variant_of_no_values_is_an_empty_tuple) {
    ex_result r = ex_sync_wait(ex_into_variant(ex_just()));
    expect_value_arity(&r, 1);
    cr_assert_eq(r.values[0].type, EX_T_TUPLE);
    cr_assert_eq(r.values[0].as.tuple->n, 0);
    cr_assert_eq(r.values[0].as.tuple->index, 0);
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(exec_into_variant, into_variant_index_names_the_matching_value_signature) {
    bool fail = false;
    ex_sender *child = two_sig_child(&fail);
    const ex_sigs *cs = ex_sender_sigs(child);
    cr_assert_eq(cs->nvalues, 2, "the fixture must have two value signatures");
    int i_int = sig_index(cs, EX_SIG(EX_T_INT));
    int i_pair = sig_index(cs, EX_SIG(EX_T_STR, EX_T_DOUBLE));
    cr_assert(i_int >= 0 && i_pair >= 0 && i_int != i_pair);
    ex_sender *s = ex_into_variant(ex_sender_retain(child));
    cr_assert_eq(ex_sender_sigs(s)->nvalues, 1);
    cr_assert_eq(ex_sender_sigs(s)->values[0].types[0], EX_T_TUPLE);

    /* Value path: set_value(int 2). */
    rec fr;
    rec_init(&fr);
    ex_sender_retain(s);
    run_in_place(s, &fr);
    cr_assert_eq(fr.values, 1);
    char want[64];
    snprintf(want, sizeof want, "tuple#%d(int 2)", i_int);
    cr_assert_str_eq(fr.text, want);

    /* Error path turned into set_value(str, double). */
    fail = true;
    rec_init(&fr);
    run_in_place(s, &fr);
    cr_assert_eq(fr.values, 1);
    snprintf(want, sizeof want, "tuple#%d(str \"failed\", double 2.5)", i_pair);
    cr_assert_str_eq(fr.text, want);

    /* The same through sync_wait_with_variant (which applies into_variant). */
    ex_result r = ex_sync_wait_with_variant(child);
    expect_value_arity(&r, 1);
    const ex_tuple *t = r.values[0].as.tuple;
    cr_assert_eq(t->index, (uint32_t)i_pair);
    cr_assert_eq(t->n, 2);
    cr_assert_str_eq(t->v[0].as.s, "failed");
    cr_assert_float_eq(t->v[1].as.d, 2.5, 0);
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(exec_into_variant, into_variant_index_with_upon_stopped) {
    ex_run_loop loop;
    test_loop_init(&loop);
    /* schedule(run_loop) gives set_value() or set_stopped(); upon_stopped
     * turns the latter into set_value(int -1). */
    ex_sender *child = ex_upon_stopped(ex_schedule(ex_run_loop_scheduler(&loop)), stopped_to_int, NULL, EX_SIG(EX_T_INT));
    int i_void = sig_index(ex_sender_sigs(child), EX_SIG0);
    int i_int = sig_index(ex_sender_sigs(child), EX_SIG(EX_T_INT));
    cr_assert(i_void >= 0 && i_int >= 0 && i_void != i_int);
    ex_sender *s = ex_into_variant(child);
    cr_assert_eq(ex_sender_sigs(s)->flags & EX_SIGS_STOPPED, 0);
    char want[64];
    for (int stop = 0; stop < 2; stop++) {
        rec fr;
        rec_init(&fr);
        ex_stop_source src;
        ex_stop_source_init(&src);
        ex_env_pair pair;
        ex_env_pair_init(&pair, &ex_key_get_stop_token, ex_token_value(ex_stop_source_token(&src)), ex_env_empty());
        fr.env = ex_env_of_pair(&pair);
        _Alignas(max_align_t) unsigned char buf[1024];
        ex_operation *op;
        cr_assert_eq(ex_connect(s, (ex_receiver){ &fr.vt, &fr }, buf, sizeof buf, &op).code, 0);
        ex_start(op);
        if (stop) ex_stop_source_request_stop(&src);
        cr_assert_eq(ex_run_loop_run_one(&loop), true);
        cr_assert_eq(fr.values, 1);
        cr_assert_eq(fr.errors + fr.stops, 0);
        if (stop) snprintf(want, sizeof want, "tuple#%d(int -1)", i_int);
        else snprintf(want, sizeof want, "tuple#%d()", i_void);
        cr_assert_str_eq(fr.text, want);
        ex_operation_destroy(op);
    }
    ex_sender_release(s);
    test_loop_destroy(&loop);
    expect_no_leaks();
}

Test(exec_into_variant, into_variant_passes_error_through) {
    static int payload;
    ex_sender *s = ex_into_variant(ex_just_error(ex_err_data(EX_EUSER + 2, "boom", &payload)));
    cr_assert_eq(ex_sender_sigs(s)->nvalues, 0, "no value completions, no tuple signature");
    cr_assert_eq(ex_sender_sigs(s)->flags, EX_SIGS_ERROR);
    rec fr;
    rec_init(&fr);
    run_in_place(s, &fr);
    rec_expect_error(&fr, EX_EUSER + 2);
    cr_assert_str_eq(fr.err.msg, "boom");
    cr_assert_eq(fr.err.data, &payload);
    expect_no_leaks();
}

Test(exec_into_variant, into_variant_passes_stopped_through) {
    ex_sender *s = ex_into_variant(ex_just_stopped());
    cr_assert_eq(ex_sender_sigs(s)->flags, EX_SIGS_STOPPED);
    rec fr;
    rec_init(&fr);
    run_in_place(s, &fr);
    cr_assert_eq(fr.stops, 1);
    ex_result r = ex_sync_wait_with_variant(ex_just_stopped());
    expect_stopped(&r);
    expect_no_leaks();
}

Test(exec_into_variant, into_variant_of_a_dynamic_child) {
    ex_sender *inner = ex_just(ex_int(4), ex_bool(true));
    ex_sender *s = ex_into_variant(ex_let_value(ex_just(), let_ret, inner, EX_SIG0));
    cr_assert_eq(ex_sender_status(s).code, 0);
    cr_assert_eq(ex_sender_sigs(s)->nvalues, 1);
    cr_assert_eq(ex_sender_sigs(s)->values[0].types[0], EX_T_TUPLE);
    rec fr;
    rec_init(&fr);
    run_in_place(s, &fr);
    cr_assert_eq(fr.values, 1);
    cr_assert_str_eq(fr.text, "tuple#0(int 4, bool true)");
    ex_sender_release(inner);
    expect_no_leaks();
}

Test(exec_into_variant, into_variant_bad_input) {
    ex_sender *s = ex_into_variant(NULL);
    expect_invalid(s, EX_EINVAL);
    ex_sender *child = ex_just(ex_int(1));
    test_alloc_fail_next();
    s = ex_into_variant(child);
    expect_built_enomem(s);
    expect_no_leaks();
}

/* ---------------------------------------------------- stopped_as_optional */

Test(exec_into_variant, stopped_as_optional_single_value_is_the_value) {
    ex_sender *s = ex_stopped_as_optional(ex_just(ex_int(5)));
    cr_assert_eq(ex_sender_status(s).code, 0);
    const ex_sigs *sg = ex_sender_sigs(s);
    cr_assert_eq(sg->nvalues, 1);
    cr_assert_eq(sg->values[0].arity, 1);
    cr_assert_eq(sg->flags & EX_SIGS_STOPPED, 0);
    expect_sync_int(s, 5);
    expect_no_leaks();
}

Test(exec_into_variant, stopped_as_optional_several_values_become_a_tuple) {
    ex_sender *s = ex_stopped_as_optional(ex_just(ex_int(1), ex_str("b")));
    cr_assert_eq(ex_sender_status(s).code, 0);
    cr_assert_eq(ex_sender_sigs(s)->nvalues, 1);
    cr_assert_eq(ex_sender_sigs(s)->values[0].arity, 1);
    rec fr;
    rec_init(&fr);
    ex_sender_retain(s);
    run_in_place(s, &fr);
    rec_expect_values(&fr, 1);
    cr_assert_eq(fr.v[0].type, EX_T_TUPLE);
    cr_assert_str_eq(fr.text, "tuple#0(int 1, str \"b\")");
    ex_result r = ex_sync_wait(s);
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_eq(r.values[0].as.tuple->n, 2);
    cr_assert_str_eq(r.values[0].as.tuple->v[1].as.s, "b");
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(exec_into_variant, stopped_as_optional_stopped_becomes_none) {
    ex_run_loop loop;
    test_loop_init(&loop);
    /* then(schedule(run_loop)) : set_value(int) or set_stopped(). */
    ex_sender *child = ex_then(ex_schedule(ex_run_loop_scheduler(&loop)), to_int, NULL, EX_SIG0, EX_SIG(EX_T_INT));
    cr_assert_neq(ex_sender_sigs(child)->flags & EX_SIGS_STOPPED, 0);
    ex_sender *s = ex_stopped_as_optional(child);
    cr_assert_eq(ex_sender_status(s).code, 0);
    cr_assert_eq(ex_sender_sigs(s)->flags & EX_SIGS_STOPPED, 0, "never completes stopped");
    cr_assert_eq(ex_sender_sigs(s)->nvalues, 1);

    rec rc;
    ex_operation *op = start_stopped_schedule(s, &rc, &loop);
    rec_expect_values(&rc, 1);
    cr_assert_eq(rc.v[0].type, EX_T_NONE);
    run_destroy(op);

    /* Without stop: the value. */
    rec_init(&rc);
    op = run_start(s, &rc);
    cr_assert(ex_run_loop_run_one(&loop));
    cr_assert_eq(rc.values, 1);
    cr_assert_eq(rc.v[0].type, EX_T_INT);
    cr_assert_eq(rc.v[0].as.i, 1);
    run_destroy_release(op, s);
    test_loop_destroy(&loop);
    expect_no_leaks();
}

Test(exec_into_variant, stopped_as_optional_dynamic_child_stopped_becomes_none) {
    ex_sender *inner = ex_just_stopped();
    ex_sender *s = ex_stopped_as_optional(ex_let_value(ex_just(ex_int(1)), let_ret, inner, EX_SIG(EX_T_INT)));
    cr_assert_eq(ex_sender_status(s).code, 0);
    cr_assert_eq(ex_sender_sigs(s)->flags & EX_SIGS_STOPPED, 0);
    ex_result r = ex_sync_wait(s);
    expect_value_arity(&r, 1);
    cr_assert_eq(r.values[0].type, EX_T_NONE);
    expect_no_leaks();
}

Test(exec_into_variant, stopped_as_optional_passes_error_through) {
    static int payload;
    /* A child with one value signature that fails: then(just(int)) whose fn errors. */
    bool fail = true;
    ex_sender *s = ex_stopped_as_optional(
        ex_then(ex_just(ex_int(1)), then_maybe_fail, &fail, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)));
    cr_assert_eq(ex_sender_status(s).code, 0);
    cr_assert_neq(ex_sender_sigs(s)->flags & EX_SIGS_ERROR, 0);
    ex_result r = ex_sync_wait(s);
    expect_error(&r, EX_EUSER + 1);
    cr_assert_str_eq(r.error.msg, "failed");

    ex_sender *inner = ex_just_error(ex_err_data(EX_EUSER + 3, "inner", &payload));
    r = ex_sync_wait(ex_stopped_as_optional(ex_let_value(ex_just(ex_int(1)), let_ret, inner, EX_SIG(EX_T_INT))));
    expect_error(&r, EX_EUSER + 3);
    cr_assert_eq(r.error.data, &payload);
    ex_sender_release(inner);
    expect_no_leaks();
}

Test(exec_into_variant, stopped_as_optional_rejects_void_or_several_value_signatures) {
    ex_sender *s = ex_stopped_as_optional(ex_just());
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL, "set_value() has no value to make optional");
    expect_sync_error(s, EX_EINVAL);

    bool fail = false;
    s = ex_stopped_as_optional(two_sig_child(&fail));
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL, "two value signatures");
    expect_sync_error(s, EX_EINVAL);

    s = ex_stopped_as_optional(ex_just_stopped());
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL, "no value signature at all");
    ex_sender_release(s);

    s = ex_stopped_as_optional(NULL);
    expect_invalid_status(s, EX_EINVAL);
    expect_no_leaks();
}

Test(exec_into_variant, stopped_as_optional_dynamic_child_without_values_is_einval) {
    ex_sender *inner = ex_just();
    ex_sender *s = ex_stopped_as_optional(ex_let_value(ex_just(ex_int(1)), let_ret, inner, EX_SIG(EX_T_INT)));
    expect_sync_error(s, EX_EINVAL);
    ex_sender_release(inner);
    expect_no_leaks();
}

/* ------------------------------------------------------- stopped_as_error */

Test(exec_into_variant, stopped_as_error_turns_stopped_into_the_error) {
    static int payload;
    ex_sender *s = ex_stopped_as_error(ex_just_stopped(), ex_err_data(EX_EUSER + 5, "was stopped", &payload));
    cr_assert_eq(ex_sender_status(s).code, 0);
    const ex_sigs *sg = ex_sender_sigs(s);
    cr_assert_eq(sg->flags & EX_SIGS_STOPPED, 0, "never completes stopped");
    cr_assert_neq(sg->flags & EX_SIGS_ERROR, 0);
    cr_assert_eq(sg->nvalues, 0);
    rec rc;
    rec_init(&rc);
    ex_operation *op = run_start(s, &rc);
    rec_expect_error(&rc, EX_EUSER + 5);
    cr_assert_str_eq(rc.err.msg, "was stopped");
    cr_assert_eq(rc.err.data, &payload);
    run_destroy_release(op, s);
    expect_sync_error(ex_stopped_as_error(ex_just_stopped(), ex_err(EX_ECANCELED, "cancelled")), EX_ECANCELED);
    expect_no_leaks();
}

Test(exec_into_variant, stopped_as_error_without_message_gets_one) {
    ex_result r = ex_sync_wait(ex_stopped_as_error(ex_just_stopped(), ex_err(EX_ECANCELED, NULL)));
    expect_error(&r, EX_ECANCELED); /* asserts msg != NULL */
    expect_no_leaks();
}

Test(exec_into_variant, stopped_as_error_passes_values_and_errors_through) {
    ex_sender *s = ex_stopped_as_error(ex_just(ex_int(3), ex_str("v")), ex_err(EX_ECANCELED, "c"));
    const ex_sigs *sg = ex_sender_sigs(s);
    cr_assert_eq(sg->nvalues, 1);
    cr_assert_eq(sg->values[0].arity, 2);
    cr_assert_eq(sg->values[0].types[1], EX_T_STR);
    cr_assert_eq(sg->flags & EX_SIGS_STOPPED, 0);
    ex_result r = ex_sync_wait(s);
    expect_value_arity(&r, 2);
    cr_assert_eq(r.values[0].as.i, 3);
    cr_assert_str_eq(r.values[1].as.s, "v");
    ex_result_destroy(&r);

    static int payload;
    r = ex_sync_wait(ex_stopped_as_error(ex_just_error(ex_err_data(EX_EUSER + 6, "orig", &payload)), ex_err(EX_ECANCELED, "c")));
    expect_error(&r, EX_EUSER + 6);
    cr_assert_str_eq(r.error.msg, "orig");
    cr_assert_eq(r.error.data, &payload);
    expect_no_leaks();
}

Test(exec_into_variant, stopped_as_error_of_a_stopped_schedule) {
    ex_run_loop loop;
    test_loop_init(&loop);
    ex_sender *s = ex_stopped_as_error(ex_schedule(ex_run_loop_scheduler(&loop)), ex_err(EX_EUSER + 8, "stop"));
    cr_assert_eq(ex_sender_sigs(s)->flags & EX_SIGS_STOPPED, 0);
    cr_assert_eq(ex_sender_sigs(s)->nvalues, 1);
    rec rc;
    ex_operation *op = start_stopped_schedule(s, &rc, &loop);
    rec_expect_error(&rc, EX_EUSER + 8);
    run_destroy(op);
    rec_init(&rc);
    op = run_start(s, &rc);
    cr_assert(ex_run_loop_run_one(&loop));
    rec_expect_values(&rc, 0);
    run_destroy_release(op, s);
    test_loop_destroy(&loop);
    expect_no_leaks();
}

Test(exec_into_variant, stopped_as_error_bad_input) {
    ex_sender *s = ex_stopped_as_error(ex_just_stopped(), ex_ok());
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL, "EX_OK is not an error");
    expect_sync_error(s, EX_EINVAL);
    s = ex_stopped_as_error(ex_just(ex_int(1)), ex_err(EX_OK, "ok"));
    expect_invalid_status(s, EX_EINVAL);
    s = ex_stopped_as_error(NULL, ex_err(EX_ECANCELED, "c"));
    expect_invalid_status(s, EX_EINVAL);
    ex_sender *child = ex_just_stopped();
    test_alloc_fail_next();
    s = ex_stopped_as_error(child, ex_err(EX_ECANCELED, "c"));
    expect_injected_failure_hit();
    expect_invalid_status(s, EX_ENOMEM);
    expect_no_leaks();
}

/* ------------------------------------------------- sync_wait_with_variant */

/* Uses a good amount of stack, to overwrite whatever a completion left there. */
static int scribble_stack(int depth) {
    volatile char junk[512];
    memset((char *)junk, 0x5a, sizeof junk);
    return depth ? scribble_stack(depth - 1) + junk[depth % 512] : junk[0];
}

Test(exec_into_variant, sync_wait_with_variant_result_owns_its_tuples) {
    ex_value inner_elems[2] = { ex_int(10), ex_str("deep") };
    ex_tuple inner = { 4, 2, inner_elems };
    long base = test_stats.in_use;
    ex_result r = ex_sync_wait_with_variant(ex_just(ex_tuple_value(&inner), ex_double(0.5)));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_gt(test_stats.in_use, base, "the result holds a copy of the tuples");
    (void)scribble_stack(16);
    inner_elems[0] = ex_int(-1); /* the caller's data is not what the result refers to */
    cr_assert_eq(r.n, 1);
    cr_assert_eq(r.values[0].type, EX_T_TUPLE);
    const ex_tuple *t = r.values[0].as.tuple;
    cr_assert_eq(t->index, 0);
    cr_assert_eq(t->n, 2);
    cr_assert_eq(t->v[0].type, EX_T_TUPLE);
    cr_assert_eq(t->v[0].as.tuple->index, 4);
    cr_assert_eq(t->v[0].as.tuple->n, 2);
    cr_assert_eq(t->v[0].as.tuple->v[0].as.i, 10);
    cr_assert_str_eq(t->v[0].as.tuple->v[1].as.s, "deep");
    cr_assert_float_eq(t->v[1].as.d, 0.5, 0);
    ex_result_destroy(&r);
    cr_assert_eq(test_stats.in_use, base, "ex_result_destroy frees the tuple storage");
    ex_result_destroy(&r); /* safe twice */
    expect_no_leaks();
}

Test(exec_into_variant, sync_wait_with_variant_tuple_outlives_the_operation) {
    bool fail = true;
    ex_result r = ex_sync_wait_with_variant(two_sig_child(&fail));
    (void)scribble_stack(16);
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    const ex_tuple *t = r.values[0].as.tuple;
    cr_assert_eq(t->n, 2);
    cr_assert_eq(t->v[0].type, EX_T_STR);
    cr_assert_str_eq(t->v[0].as.s, "failed");
    cr_assert_eq(t->v[1].type, EX_T_DOUBLE);
    cr_assert_float_eq(t->v[1].as.d, 2.5, 0);
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(exec_into_variant, sync_wait_rejects_two_value_signatures_with_variant_accepts) {
    bool fail = false;
    expect_sync_error(two_sig_child(&fail), EX_EINVAL);
    ex_result r = ex_sync_wait_with_variant(two_sig_child(&fail));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_eq(r.values[0].as.tuple->n, 1);
    cr_assert_eq(r.values[0].as.tuple->v[0].as.i, 2);
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(exec_into_variant, sync_wait_with_variant_errors_and_stopped) {
    ex_result r = ex_sync_wait_with_variant(ex_just_error(ex_err(EX_EUSER + 9, "e")));
    expect_error(&r, EX_EUSER + 9);
    ex_result_destroy(&r);
    r = ex_sync_wait_with_variant(ex_just_stopped());
    expect_stopped(&r);
    ex_result_destroy(&r);
    r = ex_sync_wait_with_variant(NULL);
    expect_error(&r, EX_EINVAL);
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(exec_into_variant, sync_wait_with_variant_out_of_memory_copying_the_tuple) {
    ex_sender *s = ex_just(ex_int(1));
    ex_sender *v = ex_into_variant(s);
    /* The only allocation left is the copy of the tuple into the result. */
    test_alloc_fail_next();
    ex_result r = ex_sync_wait(v);
    expect_injected_failure_hit();
    expect_error(&r, EX_ENOMEM);
    ex_result_destroy(&r);
    expect_no_leaks();
}
