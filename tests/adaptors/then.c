/* [exec.then]: then, upon_error, upon_stopped. */
#include <string.h>

#include "common/helpers.h"

TEST_SUITE(exec_then, 10);

/* ------------------------------------------------------------- fixtures */

/* What a callback saw, so tests can check the datums it was given. */
typedef struct seen {
    int calls;
    size_t n;
    ex_value in[EX_MAX_ARITY];
    ex_error err;
    const void *thread;
} seen;

static void seen_init(seen *s) { memset(s, 0, sizeof *s); }

/* then: (int a, int b) -> int a + b */
static ex_error fn_add(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    seen *s = ctx;
    s->calls++;
    s->n = n;
    for (size_t i = 0; i < n && i < EX_MAX_ARITY; i++) s->in[i] = in[i];
    s->thread = test_thread_id();
    out[0] = ex_int(in[0].as.i + in[1].as.i);
    return ex_ok();
}

/* then: (int x) -> int 2x */
static ex_error fn_twice(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    seen *s = ctx;
    s->calls++;
    s->n = n;
    if (n) s->in[0] = in[0];
    out[0] = ex_int(in[0].as.i * 2);
    return ex_ok();
}

/* then: anything -> int n (the arity it was given) */
static ex_error fn_count(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    seen *s = ctx;
    s->calls++;
    s->n = n;
    for (size_t i = 0; i < n && i < EX_MAX_ARITY; i++) s->in[i] = in[i];
    out[0] = ex_int((int64_t)n);
    return ex_ok();
}

/* then: anything -> nothing */
static ex_error fn_void(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)out;
    seen *s = ctx;
    s->calls++;
    s->n = n;
    return ex_ok();
}

/* then: (int x) -> (int x + 1, double x / 2, str "tag") */
static ex_error fn_three(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    seen *s = ctx;
    s->calls++;
    s->n = n;
    out[0] = ex_int(in[0].as.i + 1);
    out[1] = ex_double((double)in[0].as.i / 2.0);
    out[2] = ex_str("tag");
    return ex_ok();
}

static const char fail_msg[] = "fn failed on purpose";
static int fail_payload;

/* then: fails with EX_EUSER + 2 */
static ex_error fn_fail(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    ((seen *)ctx)->calls++;
    return ex_err_data(EX_EUSER + 2, fail_msg, &fail_payload);
}

/* then: fails with a NULL message (the library must supply one) */
static ex_error fn_fail_nomsg(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    ((seen *)ctx)->calls++;
    return ex_err(EX_EUSER + 3, NULL);
}

/* then: declares int but writes a double */
static ex_error fn_wrong_type(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    ((seen *)ctx)->calls++;
    out[0] = ex_double(1.0);
    return ex_ok();
}

/* upon_error: error -> int code */
static ex_error ue_code(void *ctx, ex_error err, ex_value *out) {
    seen *s = ctx;
    s->calls++;
    s->err = err;
    out[0] = ex_int(err.code);
    return ex_ok();
}

/* upon_error: error -> nothing */
static ex_error ue_void(void *ctx, ex_error err, ex_value *out) {
    (void)out;
    seen *s = ctx;
    s->calls++;
    s->err = err;
    return ex_ok();
}

/* upon_error: error -> (str msg, int code) */
static ex_error ue_two(void *ctx, ex_error err, ex_value *out) {
    seen *s = ctx;
    s->calls++;
    s->err = err;
    out[0] = ex_str(err.msg);
    out[1] = ex_int(err.code);
    return ex_ok();
}

static ex_error ue_fail(void *ctx, ex_error err, ex_value *out) {
    (void)out;
    seen *s = ctx;
    s->calls++;
    s->err = err;
    return ex_err(EX_EUSER + 4, fail_msg);
}

static ex_error ue_wrong_type(void *ctx, ex_error err, ex_value *out) {
    (void)err;
    ((seen *)ctx)->calls++;
    out[0] = ex_str("not an int");
    return ex_ok();
}

/* upon_stopped: -> int 42 */
static ex_error us_42(void *ctx, ex_value *out) {
    seen *s = ctx;
    s->calls++;
    s->thread = test_thread_id();
    out[0] = ex_int(42);
    return ex_ok();
}

static ex_error us_void(void *ctx, ex_value *out) {
    (void)out;
    ((seen *)ctx)->calls++;
    return ex_ok();
}

/* upon_stopped: -> (bool true, uint 7) */
static ex_error us_two(void *ctx, ex_value *out) {
    ((seen *)ctx)->calls++;
    out[0] = ex_bool(true);
    out[1] = ex_uint(7);
    return ex_ok();
}

static ex_error us_fail(void *ctx, ex_value *out) {
    (void)out;
    ((seen *)ctx)->calls++;
    return ex_err(EX_EUSER + 5, fail_msg);
}

static ex_error us_wrong_type(void *ctx, ex_value *out) {
    ((seen *)ctx)->calls++;
    out[0] = ex_int(1);
    return ex_ok();
}

/* let_value functions that produce a sender with run-time signatures. */
static ex_sender *let_pair(void *ctx, const ex_value *in, size_t n) {
    (void)ctx, (void)n;
    return ex_just(in[0], ex_int(2));
}

static ex_sender *let_same(void *ctx, const ex_value *in, size_t n) {
    (void)ctx, (void)n;
    return ex_just(in[0]);
}

static ex_sender *let_str(void *ctx, const ex_value *in, size_t n) {
    (void)ctx, (void)in, (void)n;
    return ex_just(ex_str("not an int"));
}

/* Connects into local storage, starts, destroys the operation and releases s.
 * The completion is recorded in *rc. */
static void run_inline(ex_sender *s, rec *rc) {
    _Alignas(max_align_t) unsigned char buf[1024];
    cr_assert_leq(ex_sender_op_size(s), sizeof buf);
    ex_operation *op = NULL;
    ex_error e = ex_connect(s, rec_receiver(rc), buf, sizeof buf, &op);
    cr_assert_eq(e.code, 0, "connect failed: %s", e.msg ? e.msg : "");
    ex_start(op);
    ex_operation_destroy(op);
    ex_sender_release(s);
}

/* ------------------------------------------------------------------ then */

Test(exec_then, then_calls_fn_with_the_values_and_sends_its_result) {
    seen sn;
    seen_init(&sn);
    ex_sender *s = ex_then(ex_just(ex_int(3), ex_int(4)), fn_add, &sn, EX_SIG(EX_T_INT, EX_T_INT), EX_SIG(EX_T_INT));
    cr_assert_eq(ex_sender_status(s).code, 0);
    ex_result r = ex_sync_wait(s);
    expect_value_int(&r, 7);
    cr_assert_eq(sn.calls, 1);
    cr_assert_eq(sn.n, 2);
    cr_assert_eq(sn.in[0].type, EX_T_INT);
    cr_assert_eq(sn.in[0].as.i, 3);
    cr_assert_eq(sn.in[1].as.i, 4);
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(exec_then, then_runs_inline_where_the_child_completes) {
    seen sn;
    seen_init(&sn);
    rec rc;
    rec_init(&rc);
    run_inline(ex_then(ex_just(ex_int(1), ex_int(1)), fn_add, &sn, EX_SIG(EX_T_INT, EX_T_INT), EX_SIG(EX_T_INT)), &rc);
    cr_assert_eq(rc.values, 1);
    cr_assert_eq(rec_total(&rc), 1, "exactly one completion");
    cr_assert_eq(rc.n, 1);
    cr_assert_eq(rc.v[0].as.i, 2);
    cr_assert_eq(sn.thread, test_thread_id());
    cr_assert_eq(rc.thread, test_thread_id());
    expect_no_leaks();
}

Test(exec_then, then_fn_not_called_before_start) {
    seen sn;
    seen_init(&sn);
    rec rc;
    rec_init(&rc);
    ex_sender *s = ex_then(ex_just(ex_int(5)), fn_twice, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    cr_assert_eq(sn.calls, 0, "building must not call fn");
    _Alignas(max_align_t) unsigned char buf[512];
    ex_operation *op;
    cr_assert_eq(ex_connect(s, rec_receiver(&rc), buf, sizeof buf, &op).code, 0);
    cr_assert_eq(sn.calls, 0, "connect must not call fn");
    cr_assert_eq(rec_total(&rc), 0);
    ex_start(op);
    cr_assert_eq(sn.calls, 1);
    cr_assert_eq(rc.values, 1);
    cr_assert_eq(rc.v[0].as.i, 10);
    ex_operation_destroy(op);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_then, then_is_multi_shot) {
    seen sn;
    seen_init(&sn);
    ex_sender *s = ex_then(ex_just(ex_int(21)), fn_twice, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    for (int i = 0; i < 3; i++) {
        ex_result r = ex_sync_wait(ex_sender_retain(s));
        expect_value_int(&r, 42);
    }
    cr_assert_eq(sn.calls, 3);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_then, then_passes_error_through_unchanged) {
    seen sn;
    seen_init(&sn);
    static int payload;
    rec rc;
    rec_init(&rc);
    run_inline(ex_then(ex_just_error(ex_err_data(EX_EUSER + 1, "boom", &payload)), fn_twice, &sn, EX_SIG(EX_T_INT),
                       EX_SIG(EX_T_INT)),
               &rc);
    cr_assert_eq(rc.errors, 1);
    cr_assert_eq(rec_total(&rc), 1);
    cr_assert_eq(rc.err.code, EX_EUSER + 1);
    cr_assert_str_eq(rc.err.msg, "boom");
    cr_assert_eq(rc.err.data, &payload);
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}

Test(exec_then, then_passes_stopped_through) {
    seen sn;
    seen_init(&sn);
    rec rc;
    rec_init(&rc);
    run_inline(ex_then(ex_just_stopped(), fn_twice, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)), &rc);
    cr_assert_eq(rc.stops, 1);
    cr_assert_eq(rec_total(&rc), 1);
    cr_assert_eq(sn.calls, 0);
    ex_result r = ex_sync_wait(ex_then(ex_just_stopped(), fn_twice, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)));
    cr_assert_eq(r.disposition, EX_DISP_STOPPED);
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}

Test(exec_then, then_fn_error_becomes_set_error) {
    seen sn;
    seen_init(&sn);
    ex_result r = ex_sync_wait(ex_then(ex_just(ex_int(1)), fn_fail, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)));
    expect_error(&r, EX_EUSER + 2);
    cr_assert_str_eq(r.error.msg, fail_msg);
    cr_assert_eq(r.error.data, &fail_payload);
    cr_assert_eq(sn.calls, 1);
    expect_no_leaks();
}

Test(exec_then, then_fn_error_without_message_gets_one) {
    seen sn;
    seen_init(&sn);
    ex_result r = ex_sync_wait(ex_then(ex_just(ex_int(1)), fn_fail_nomsg, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)));
    expect_error(&r, EX_EUSER + 3); /* asserts msg != NULL */
    cr_assert_eq(sn.calls, 1);
    expect_no_leaks();
}

Test(exec_then, then_no_output_values) {
    seen sn;
    seen_init(&sn);
    ex_sender *s = ex_then(ex_just(ex_int(9)), fn_void, &sn, EX_SIG(EX_T_INT), EX_SIG0);
    const ex_sigs *sg = ex_sender_sigs(s);
    cr_assert_eq(sg->nvalues, 1);
    cr_assert_eq(sg->values[0].arity, 0);
    ex_result r = ex_sync_wait(s);
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_eq(r.n, 0);
    cr_assert_eq(sn.calls, 1);
    cr_assert_eq(sn.n, 1);
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(exec_then, then_no_input_values) {
    seen sn;
    seen_init(&sn);
    ex_result r = ex_sync_wait(ex_then(ex_just(), fn_count, &sn, EX_SIG0, EX_SIG(EX_T_INT)));
    expect_value_int(&r, 0);
    cr_assert_eq(sn.calls, 1);
    cr_assert_eq(sn.n, 0);
    expect_no_leaks();
}

Test(exec_then, then_several_output_values) {
    seen sn;
    seen_init(&sn);
    ex_sender *s = ex_then(ex_just(ex_int(5)), fn_three, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT, EX_T_DOUBLE, EX_T_STR));
    ex_result r = ex_sync_wait(s);
    cr_assert_eq(r.disposition, EX_DISP_VALUE, "%s", r.error.msg ? r.error.msg : "");
    cr_assert_eq(r.n, 3);
    cr_assert_eq(r.values[0].type, EX_T_INT);
    cr_assert_eq(r.values[0].as.i, 6);
    cr_assert_eq(r.values[1].type, EX_T_DOUBLE);
    cr_assert_float_eq(r.values[1].as.d, 2.5, 0);
    cr_assert_eq(r.values[2].type, EX_T_STR);
    cr_assert_str_eq(r.values[2].as.s, "tag");
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(exec_then, then_chained) {
    seen a, b;
    seen_init(&a);
    seen_init(&b);
    ex_sender *s = ex_then(ex_then(ex_just(ex_int(3)), fn_twice, &a, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)), fn_twice, &b,
                           EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    ex_result r = ex_sync_wait(s);
    expect_value_int(&r, 12);
    cr_assert_eq(a.calls, 1);
    cr_assert_eq(b.calls, 1);
    cr_assert_eq(b.in[0].as.i, 6);
    expect_no_leaks();
}

Test(exec_then, then_result_signatures) {
    seen sn;
    seen_init(&sn);
    /* The child's value signature is replaced by fn's output. */
    ex_sender *s = ex_then(ex_just(ex_int(5)), fn_three, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT, EX_T_DOUBLE, EX_T_STR));
    const ex_sigs *sg = ex_sender_sigs(s);
    cr_assert_eq(sg->nvalues, 1);
    cr_assert_eq(sg->values[0].arity, 3);
    cr_assert_eq(sg->values[0].types[0], EX_T_INT);
    cr_assert_eq(sg->values[0].types[1], EX_T_DOUBLE);
    cr_assert_eq(sg->values[0].types[2], EX_T_STR);
    cr_assert_eq(sg->flags & EX_SIGS_STOPPED, 0, "just never stops, neither does then over it");
    cr_assert_eq(sg->flags & EX_SIGS_DYNAMIC, 0);
    cr_assert_neq(sg->flags & EX_SIGS_ERROR, 0, "fn may fail");
    ex_sender_release(s);

    /* A child that cannot send values: fn is never called, no value signature. */
    s = ex_then(ex_just_error(ex_err(EX_EUSER, "e")), fn_twice, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    cr_assert_eq(ex_sender_status(s).code, 0);
    sg = ex_sender_sigs(s);
    cr_assert_eq(sg->nvalues, 0);
    cr_assert_eq(sg->flags, EX_SIGS_ERROR);
    ex_sender_release(s);

    s = ex_then(ex_just_stopped(), fn_twice, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    sg = ex_sender_sigs(s);
    cr_assert_eq(sg->nvalues, 0);
    cr_assert_eq(sg->flags, EX_SIGS_STOPPED, "stopped passes through; fn is never called");
    ex_sender_release(s);
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}

Test(exec_then, then_keeps_stopped_signature_of_the_child) {
    ex_run_loop loop;
    cr_assert_eq(ex_run_loop_init(&loop).code, 0);
    seen sn;
    seen_init(&sn);
    ex_sender *s = ex_then(ex_schedule(ex_run_loop_scheduler(&loop)), fn_count, &sn, EX_SIG0, EX_SIG(EX_T_INT));
    const ex_sigs *sg = ex_sender_sigs(s);
    cr_assert_eq(sg->nvalues, 1);
    cr_assert_eq(sg->values[0].arity, 1);
    cr_assert_eq(sg->values[0].types[0], EX_T_INT);
    cr_assert_neq(sg->flags & EX_SIGS_STOPPED, 0, "run_loop schedule may complete stopped");
    ex_sender_release(s);
    cr_assert_eq(ex_run_loop_destroy(&loop).code, 0);
    expect_no_leaks();
}

Test(exec_then, then_input_arity_mismatch_is_invalid) {
    seen sn;
    seen_init(&sn);
    ex_sender *s = ex_then(ex_just(ex_int(1), ex_int(2)), fn_twice, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    cr_assert_not_null(ex_sender_status(s).msg);
    ex_result r = ex_sync_wait(s);
    expect_error(&r, EX_EINVAL);
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}

Test(exec_then, then_input_type_mismatch_is_invalid) {
    seen sn;
    seen_init(&sn);
    ex_sender *s = ex_then(ex_just(ex_str("x")), fn_twice, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    ex_result r = ex_sync_wait(s);
    expect_error(&r, EX_EINVAL);
    /* Too few values is a mismatch as well. */
    s = ex_then(ex_just(), fn_twice, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    ex_sender_release(s);
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}

Test(exec_then, then_any_type_input_accepts_every_type) {
    seen sn;
    seen_init(&sn);
    ex_result r = ex_sync_wait(ex_then(ex_just(ex_str("s")), fn_count, &sn, EX_SIG_ANY1, EX_SIG(EX_T_INT)));
    expect_value_int(&r, 1);
    cr_assert_eq(sn.in[0].type, EX_T_STR);
    r = ex_sync_wait(ex_then(ex_just(ex_double(0.5)), fn_count, &sn, EX_SIG_ANY1, EX_SIG(EX_T_INT)));
    expect_value_int(&r, 1);
    cr_assert_eq(sn.in[0].type, EX_T_DOUBLE);
    cr_assert_eq(sn.calls, 2);
    expect_no_leaks();
}

Test(exec_then, then_variadic_input_accepts_any_arity) {
    seen sn;
    seen_init(&sn);
    ex_result r = ex_sync_wait(ex_then(ex_just(), fn_count, &sn, EX_SIG_VARIADIC, EX_SIG(EX_T_INT)));
    expect_value_int(&r, 0);
    r = ex_sync_wait(ex_then(ex_just(ex_int(1)), fn_count, &sn, EX_SIG_VARIADIC, EX_SIG(EX_T_INT)));
    expect_value_int(&r, 1);
    r = ex_sync_wait(
        ex_then(ex_just(ex_int(1), ex_str("a"), ex_double(2.0)), fn_count, &sn, EX_SIG_VARIADIC, EX_SIG(EX_T_INT)));
    expect_value_int(&r, 3);
    cr_assert_eq(sn.in[1].type, EX_T_STR);
    cr_assert_str_eq(sn.in[1].as.s, "a");
    ex_value v[EX_MAX_ARITY];
    for (int i = 0; i < EX_MAX_ARITY; i++) v[i] = ex_int(i);
    r = ex_sync_wait(ex_then(ex_just_n(v, EX_MAX_ARITY), fn_count, &sn, EX_SIG_VARIADIC, EX_SIG(EX_T_INT)));
    expect_value_int(&r, EX_MAX_ARITY);
    cr_assert_eq(sn.in[EX_MAX_ARITY - 1].as.i, EX_MAX_ARITY - 1);
    cr_assert_eq(sn.calls, 4);
    expect_no_leaks();
}

Test(exec_then, then_runtime_arity_mismatch_with_dynamic_child) {
    seen sn;
    seen_init(&sn);
    /* let_value's signatures are known only at run time: the check happens
     * when the values arrive. */
    ex_sender *child = ex_let_value(ex_just(ex_int(1)), let_pair, NULL, EX_SIG(EX_T_INT));
    cr_assert_neq(ex_sender_sigs(child)->flags & EX_SIGS_DYNAMIC, 0);
    ex_sender *s = ex_then(child, fn_twice, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    cr_assert_eq(ex_sender_status(s).code, 0, "cannot be rejected at build time");
    ex_result r = ex_sync_wait(s);
    expect_error(&r, EX_EINVAL);
    cr_assert_eq(sn.calls, 0, "fn must not see values that do not match its input");
    expect_no_leaks();
}

Test(exec_then, then_runtime_type_mismatch_with_dynamic_child) {
    seen sn;
    seen_init(&sn);
    ex_sender *s = ex_then(ex_let_value(ex_just(ex_int(1)), let_str, NULL, EX_SIG(EX_T_INT)), fn_twice, &sn,
                           EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    cr_assert_eq(ex_sender_status(s).code, 0);
    ex_result r = ex_sync_wait(s);
    expect_error(&r, EX_EINVAL);
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}

static const ex_key any_key = { "test.then.any_key", true };

Test(exec_then, then_checks_types_at_run_time_when_the_child_declares_any) {
    /* read_env of a user key declares one value of any type: compatible with
     * fn's int input at build time, so the type is checked when it arrives. */
    seen sn;
    seen_init(&sn);
    ex_sender *s = ex_then(ex_write_env(ex_read_env(&any_key, EX_T_ANY), &any_key, ex_str("a string")), fn_twice, &sn,
                           EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    cr_assert_eq(ex_sender_status(s).code, 0);
    ex_result r = ex_sync_wait(s);
    expect_error(&r, EX_EINVAL);
    cr_assert_eq(sn.calls, 0);
    r = ex_sync_wait(ex_then(ex_write_env(ex_read_env(&any_key, EX_T_ANY), &any_key, ex_int(4)), fn_twice, &sn,
                             EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)));
    expect_value_int(&r, 8);
    cr_assert_eq(sn.calls, 1);
    expect_no_leaks();
}

Test(exec_then, then_dynamic_child_with_matching_values_works) {
    seen sn;
    seen_init(&sn);
    ex_sender *s = ex_then(ex_let_value(ex_just(ex_int(8)), let_same, NULL, EX_SIG(EX_T_INT)), fn_twice, &sn,
                           EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    const ex_sigs *sg = ex_sender_sigs(s);
    cr_assert_eq(sg->nvalues, 1, "then's output is known even when its input is not");
    cr_assert_eq(sg->values[0].types[0], EX_T_INT);
    ex_result r = ex_sync_wait(s);
    expect_value_int(&r, 16);
    cr_assert_eq(sn.calls, 1);
    /* Variadic input with a dynamic child: no check, fn sees the pair. */
    r = ex_sync_wait(ex_then(ex_let_value(ex_just(ex_int(1)), let_pair, NULL, EX_SIG(EX_T_INT)), fn_count, &sn,
                             EX_SIG_VARIADIC, EX_SIG(EX_T_INT)));
    expect_value_int(&r, 2);
    expect_no_leaks();
}

Test(exec_then, then_result_of_wrong_type_is_einval) {
    seen sn;
    seen_init(&sn);
    ex_result r = ex_sync_wait(ex_then(ex_just(ex_int(1)), fn_wrong_type, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)));
    expect_error(&r, EX_EINVAL);
    cr_assert_eq(sn.calls, 1);
    expect_no_leaks();
}

Test(exec_then, then_any_output_left_unset_is_einval) {
    /* Declared output "one datum of any type", but fn writes nothing: the
     * datum has no type of its own. */
    seen sn;
    seen_init(&sn);
    ex_result r = ex_sync_wait(ex_then(ex_just(ex_int(1)), fn_void, &sn, EX_SIG(EX_T_INT), EX_SIG_ANY1));
    expect_error(&r, EX_EINVAL);
    cr_assert_eq(sn.calls, 1);
    /* Written: the datum keeps its own type. */
    r = ex_sync_wait(ex_then(ex_just(ex_int(1)), fn_twice, &sn, EX_SIG(EX_T_INT), EX_SIG_ANY1));
    expect_value_int(&r, 2);
    expect_no_leaks();
}

Test(exec_then, then_output_arity_too_large_is_invalid) {
    seen sn;
    seen_init(&sn);
    ex_sig big = EX_SIG0;
    big.arity = EX_MAX_ARITY + 1;
    ex_sender *s = ex_then(ex_just(ex_int(1)), fn_twice, &sn, EX_SIG(EX_T_INT), big);
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_then, null_child_or_function_is_invalid) {
    seen sn;
    seen_init(&sn);
    ex_sender *s = ex_then(NULL, fn_twice, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    ex_result r = ex_sync_wait(s);
    expect_error(&r, EX_EINVAL);

    s = ex_then(ex_just(ex_int(1)), NULL, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    r = ex_sync_wait(s);
    expect_error(&r, EX_EINVAL);

    s = ex_upon_error(NULL, ue_code, &sn, EX_SIG(EX_T_INT));
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    ex_sender_release(s);
    s = ex_upon_error(ex_just_error(ex_err(EX_EUSER, "e")), NULL, &sn, EX_SIG(EX_T_INT));
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    r = ex_sync_wait(s);
    expect_error(&r, EX_EINVAL);

    s = ex_upon_stopped(NULL, us_42, &sn, EX_SIG(EX_T_INT));
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    ex_sender_release(s);
    s = ex_upon_stopped(ex_just_stopped(), NULL, &sn, EX_SIG(EX_T_INT));
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    r = ex_sync_wait(s);
    expect_error(&r, EX_EINVAL);
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}

Test(exec_then, invalid_child_status_propagates) {
    seen sn;
    seen_init(&sn);
    ex_value v[EX_MAX_ARITY + 1];
    for (int i = 0; i <= EX_MAX_ARITY; i++) v[i] = ex_int(i);
    ex_sender *s = ex_then(ex_just_n(v, EX_MAX_ARITY + 1), fn_count, &sn, EX_SIG_VARIADIC, EX_SIG(EX_T_INT));
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    ex_sender_release(s);
    s = ex_upon_error(ex_just_n(v, EX_MAX_ARITY + 1), ue_code, &sn, EX_SIG(EX_T_INT));
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL, "an invalid child is not an error completion to handle");
    ex_result r = ex_sync_wait(s);
    expect_error(&r, EX_EINVAL);
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}

static ex_scheduler sched_attr(const ex_sender *s, const ex_key *key, bool *found) {
    ex_scheduler out = { 0, 0 };
    *found = ex_get_completion_scheduler(s, key, &out);
    return out;
}

Test(exec_then, completion_scheduler_is_forwarded_from_the_child) {
    ex_run_loop loop;
    cr_assert_eq(ex_run_loop_init(&loop).code, 0);
    ex_scheduler sch = ex_run_loop_scheduler(&loop);
    seen sn;
    seen_init(&sn);
    ex_sender *s = ex_then(ex_schedule(sch), fn_count, &sn, EX_SIG0, EX_SIG(EX_T_INT));
    bool found;
    ex_scheduler got = sched_attr(s, &ex_key_completion_scheduler_value, &found);
    cr_assert(found, "then over schedule(run_loop) must answer get_completion_scheduler<set_value>");
    cr_assert(ex_scheduler_equal(got, sch));
    got = sched_attr(s, &ex_key_completion_scheduler_stopped, &found);
    cr_assert(found);
    cr_assert(ex_scheduler_equal(got, sch));

    /* And the value is indeed produced on the loop. */
    rec rc;
    rec_init(&rc);
    ex_operation *op = run_start(s, &rc);
    cr_assert_eq(rec_total(&rc), 0, "schedule on a run_loop completes when the loop runs");
    ex_run_loop_finish(&loop);
    cr_assert_eq(ex_run_loop_run(&loop).code, 0);
    cr_assert_eq(rc.values, 1);
    cr_assert_eq(rc.v[0].type, EX_T_INT);
    cr_assert_eq(rc.v[0].as.i, 0);
    cr_assert_eq(sn.calls, 1);
    run_destroy(op);
    ex_sender_release(s);

    /* upon_error and upon_stopped forward the child's attributes too. */
    s = ex_upon_stopped(ex_schedule(sch), us_void, &sn, EX_SIG0);
    got = sched_attr(s, &ex_key_completion_scheduler_value, &found);
    cr_assert(found);
    cr_assert(ex_scheduler_equal(got, sch));
    ex_sender_release(s);
    s = ex_upon_error(ex_schedule(sch), ue_void, &sn, EX_SIG0);
    got = sched_attr(s, &ex_key_completion_scheduler_value, &found);
    cr_assert(found);
    cr_assert(ex_scheduler_equal(got, sch));
    ex_sender_release(s);

    /* A child without a completion scheduler: none. */
    s = ex_then(ex_just(), fn_count, &sn, EX_SIG0, EX_SIG(EX_T_INT));
    (void)sched_attr(s, &ex_key_completion_scheduler_value, &found);
    cr_assert_not(found);
    ex_sender_release(s);
    cr_assert_eq(ex_run_loop_destroy(&loop).code, 0);
    expect_no_leaks();
}

Test(exec_then, out_of_memory_while_building) {
    seen sn;
    seen_init(&sn);
    for (int kind = 0; kind < 3; kind++) {
        ex_sender *child = kind == 0 ? ex_just(ex_int(1)) : kind == 1 ? ex_just_error(ex_err(EX_EUSER, "e")) : ex_just_stopped();
        test_alloc_reset();
        test_alloc_fail_at(1); /* the adaptor's own allocation */
        ex_sender *s = kind == 0   ? ex_then(child, fn_twice, &sn, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT))
                       : kind == 1 ? ex_upon_error(child, ue_code, &sn, EX_SIG(EX_T_INT))
                                   : ex_upon_stopped(child, us_42, &sn, EX_SIG(EX_T_INT));
        cr_assert_eq(test_stats.failed, 1, "the injected failure was not hit");
        test_alloc_reset(); /* no further failures */
        cr_assert_eq(ex_sender_status(s).code, EX_ENOMEM, "kind %d", kind);
        ex_result r = ex_sync_wait(s);
        expect_error(&r, EX_ENOMEM);
    }
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}

/* ------------------------------------------------------------ upon_error */

Test(exec_then, upon_error_calls_fn_with_the_error) {
    seen sn;
    seen_init(&sn);
    static int payload;
    ex_sender *s = ex_upon_error(ex_just_error(ex_err_data(EX_EUSER + 7, "bad thing", &payload)), ue_code, &sn,
                                 EX_SIG(EX_T_INT));
    ex_result r = ex_sync_wait(s);
    expect_value_int(&r, EX_EUSER + 7);
    cr_assert_eq(sn.calls, 1);
    cr_assert_eq(sn.err.code, EX_EUSER + 7);
    cr_assert_str_eq(sn.err.msg, "bad thing");
    cr_assert_eq(sn.err.data, &payload);
    expect_no_leaks();
}

Test(exec_then, upon_error_handles_an_error_from_then) {
    seen a, b;
    seen_init(&a);
    seen_init(&b);
    ex_sender *s = ex_upon_error(ex_then(ex_just(ex_int(1)), fn_fail, &a, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)), ue_two,
                                 &b, EX_SIG(EX_T_STR, EX_T_INT));
    /* Two value signatures now: int from then, (str, int) from upon_error. */
    cr_assert_eq(ex_sender_sigs(s)->nvalues, 2);
    rec rc;
    rec_init(&rc);
    run_inline(s, &rc);
    cr_assert_eq(rc.values, 1);
    cr_assert_eq(rec_total(&rc), 1);
    cr_assert_eq(rc.n, 2);
    cr_assert_eq(rc.v[0].type, EX_T_STR);
    cr_assert_str_eq(rc.v[0].as.s, fail_msg);
    cr_assert_eq(rc.v[1].as.i, EX_EUSER + 2);
    cr_assert_eq(b.err.data, &fail_payload);
    expect_no_leaks();
}

Test(exec_then, upon_error_passes_values_through_unchanged) {
    seen sn;
    seen_init(&sn);
    rec rc;
    rec_init(&rc);
    run_inline(ex_upon_error(ex_just(ex_int(3), ex_str("x")), ue_code, &sn, EX_SIG(EX_T_INT)), &rc);
    cr_assert_eq(rc.values, 1);
    cr_assert_eq(rec_total(&rc), 1);
    cr_assert_eq(rc.n, 2);
    cr_assert_eq(rc.v[0].type, EX_T_INT);
    cr_assert_eq(rc.v[0].as.i, 3);
    cr_assert_eq(rc.v[1].type, EX_T_STR);
    cr_assert_str_eq(rc.v[1].as.s, "x");
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}

Test(exec_then, upon_error_passes_stopped_through) {
    seen sn;
    seen_init(&sn);
    rec rc;
    rec_init(&rc);
    run_inline(ex_upon_error(ex_just_stopped(), ue_code, &sn, EX_SIG(EX_T_INT)), &rc);
    cr_assert_eq(rc.stops, 1);
    cr_assert_eq(rec_total(&rc), 1);
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}

Test(exec_then, upon_error_fn_not_called_before_start) {
    seen sn;
    seen_init(&sn);
    rec rc;
    rec_init(&rc);
    ex_sender *s = ex_upon_error(ex_just_error(ex_err(EX_EUSER, "e")), ue_code, &sn, EX_SIG(EX_T_INT));
    _Alignas(max_align_t) unsigned char buf[512];
    ex_operation *op;
    cr_assert_eq(ex_connect(s, rec_receiver(&rc), buf, sizeof buf, &op).code, 0);
    cr_assert_eq(sn.calls, 0);
    cr_assert_eq(rec_total(&rc), 0);
    ex_start(op);
    cr_assert_eq(sn.calls, 1);
    cr_assert_eq(rc.values, 1);
    cr_assert_eq(rc.v[0].as.i, EX_EUSER);
    ex_operation_destroy(op);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_then, upon_error_fn_error_becomes_set_error) {
    seen sn;
    seen_init(&sn);
    ex_result r = ex_sync_wait(ex_upon_error(ex_just_error(ex_err(EX_EUSER, "first")), ue_fail, &sn, EX_SIG0));
    expect_error(&r, EX_EUSER + 4);
    cr_assert_str_eq(r.error.msg, fail_msg);
    cr_assert_eq(sn.calls, 1);
    cr_assert_eq(sn.err.code, EX_EUSER);
    expect_no_leaks();
}

Test(exec_then, upon_error_no_output_and_several_outputs) {
    seen sn;
    seen_init(&sn);
    ex_result r = ex_sync_wait(ex_upon_error(ex_just_error(ex_err(EX_EUSER, "e")), ue_void, &sn, EX_SIG0));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_eq(r.n, 0);
    r = ex_sync_wait(ex_upon_error(ex_just_error(ex_err(EX_EUSER + 1, "two")), ue_two, &sn, EX_SIG(EX_T_STR, EX_T_INT)));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_eq(r.n, 2);
    cr_assert_str_eq(r.values[0].as.s, "two");
    cr_assert_eq(r.values[1].as.i, EX_EUSER + 1);
    cr_assert_eq(sn.calls, 2);
    expect_no_leaks();
}

Test(exec_then, upon_error_result_signatures) {
    seen sn;
    seen_init(&sn);
    ex_sender *s = ex_upon_error(ex_just_error(ex_err(EX_EUSER, "e")), ue_two, &sn, EX_SIG(EX_T_STR, EX_T_INT));
    const ex_sigs *sg = ex_sender_sigs(s);
    cr_assert_eq(sg->nvalues, 1);
    cr_assert_eq(sg->values[0].arity, 2);
    cr_assert_eq(sg->values[0].types[0], EX_T_STR);
    cr_assert_eq(sg->values[0].types[1], EX_T_INT);
    cr_assert_eq(sg->flags & (EX_SIGS_STOPPED | EX_SIGS_DYNAMIC), 0);
    ex_sender_release(s);

    /* A child that never errors: fn is never called, signatures unchanged. */
    s = ex_upon_error(ex_just(ex_double(1.0)), ue_two, &sn, EX_SIG(EX_T_STR, EX_T_INT));
    sg = ex_sender_sigs(s);
    cr_assert_eq(sg->nvalues, 1);
    cr_assert_eq(sg->values[0].arity, 1);
    cr_assert_eq(sg->values[0].types[0], EX_T_DOUBLE);
    cr_assert_eq(sg->flags, 0, "just(double) neither errors nor stops");
    ex_sender_release(s);

    /* Stopped passes through. */
    s = ex_upon_error(ex_just_stopped(), ue_void, &sn, EX_SIG0);
    sg = ex_sender_sigs(s);
    cr_assert_eq(sg->nvalues, 0);
    cr_assert_eq(sg->flags, EX_SIGS_STOPPED);
    ex_sender_release(s);
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}

Test(exec_then, upon_error_result_of_wrong_type_is_einval) {
    seen sn;
    seen_init(&sn);
    ex_result r = ex_sync_wait(ex_upon_error(ex_just_error(ex_err(EX_EUSER, "e")), ue_wrong_type, &sn, EX_SIG(EX_T_INT)));
    expect_error(&r, EX_EINVAL);
    cr_assert_eq(sn.calls, 1);
    expect_no_leaks();
}

/* ---------------------------------------------------------- upon_stopped */

Test(exec_then, upon_stopped_calls_fn_and_sends_its_result) {
    seen sn;
    seen_init(&sn);
    rec rc;
    rec_init(&rc);
    run_inline(ex_upon_stopped(ex_just_stopped(), us_42, &sn, EX_SIG(EX_T_INT)), &rc);
    cr_assert_eq(rc.values, 1);
    cr_assert_eq(rec_total(&rc), 1);
    cr_assert_eq(rc.n, 1);
    cr_assert_eq(rc.v[0].type, EX_T_INT);
    cr_assert_eq(rc.v[0].as.i, 42);
    cr_assert_eq(sn.calls, 1);
    cr_assert_eq(sn.thread, test_thread_id());
    expect_no_leaks();
}

Test(exec_then, upon_stopped_of_a_stopped_schedule) {
    /* schedule on a run_loop whose receiver asked to stop completes stopped;
     * upon_stopped turns it into a value, on the loop. */
    ex_run_loop loop;
    cr_assert_eq(ex_run_loop_init(&loop).code, 0);
    seen sn;
    seen_init(&sn);
    rec rc;
    rec_init(&rc);
    rec_with_stop(&rc);
    ex_sender *s = ex_upon_stopped(ex_schedule(ex_run_loop_scheduler(&loop)), us_42, &sn, EX_SIG(EX_T_INT));
    ex_operation *op = run_start(s, &rc);
    ex_stop_source_request_stop(&rc.stop);
    cr_assert_eq(sn.calls, 0);
    ex_run_loop_finish(&loop);
    cr_assert_eq(ex_run_loop_run(&loop).code, 0);
    cr_assert_eq(rc.values, 1);
    cr_assert_eq(rec_total(&rc), 1);
    cr_assert_eq(rc.v[0].as.i, 42);
    cr_assert_eq(sn.calls, 1);
    run_destroy(op);
    ex_sender_release(s);
    cr_assert_eq(ex_run_loop_destroy(&loop).code, 0);
    expect_no_leaks();
}

Test(exec_then, upon_stopped_passes_values_and_errors_through) {
    seen sn;
    seen_init(&sn);
    rec rc;
    rec_init(&rc);
    run_inline(ex_upon_stopped(ex_just(ex_int(5), ex_double(0.25)), us_42, &sn, EX_SIG(EX_T_INT)), &rc);
    cr_assert_eq(rc.values, 1);
    cr_assert_eq(rec_total(&rc), 1);
    cr_assert_eq(rc.n, 2);
    cr_assert_eq(rc.v[0].as.i, 5);
    cr_assert_float_eq(rc.v[1].as.d, 0.25, 0);

    static int payload;
    rec_init(&rc);
    run_inline(ex_upon_stopped(ex_just_error(ex_err_data(EX_EUSER + 9, "err", &payload)), us_42, &sn, EX_SIG(EX_T_INT)),
               &rc);
    cr_assert_eq(rc.errors, 1);
    cr_assert_eq(rec_total(&rc), 1);
    cr_assert_eq(rc.err.code, EX_EUSER + 9);
    cr_assert_str_eq(rc.err.msg, "err");
    cr_assert_eq(rc.err.data, &payload);
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}

Test(exec_then, upon_stopped_fn_not_called_before_start) {
    seen sn;
    seen_init(&sn);
    rec rc;
    rec_init(&rc);
    ex_sender *s = ex_upon_stopped(ex_just_stopped(), us_42, &sn, EX_SIG(EX_T_INT));
    _Alignas(max_align_t) unsigned char buf[512];
    ex_operation *op;
    cr_assert_eq(ex_connect(s, rec_receiver(&rc), buf, sizeof buf, &op).code, 0);
    cr_assert_eq(sn.calls, 0);
    cr_assert_eq(rec_total(&rc), 0);
    ex_start(op);
    cr_assert_eq(sn.calls, 1);
    cr_assert_eq(rc.values, 1);
    ex_operation_destroy(op);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_then, upon_stopped_fn_error_becomes_set_error) {
    seen sn;
    seen_init(&sn);
    ex_result r = ex_sync_wait(ex_upon_stopped(ex_just_stopped(), us_fail, &sn, EX_SIG(EX_T_INT)));
    expect_error(&r, EX_EUSER + 5);
    cr_assert_str_eq(r.error.msg, fail_msg);
    cr_assert_eq(sn.calls, 1);
    expect_no_leaks();
}

Test(exec_then, upon_stopped_no_output_and_several_outputs) {
    seen sn;
    seen_init(&sn);
    ex_result r = ex_sync_wait(ex_upon_stopped(ex_just_stopped(), us_void, &sn, EX_SIG0));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_eq(r.n, 0);
    r = ex_sync_wait(ex_upon_stopped(ex_just_stopped(), us_two, &sn, EX_SIG(EX_T_BOOL, EX_T_UINT)));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_eq(r.n, 2);
    cr_assert_eq(r.values[0].type, EX_T_BOOL);
    cr_assert(r.values[0].as.b);
    cr_assert_eq(r.values[1].type, EX_T_UINT);
    cr_assert_eq(r.values[1].as.u, 7u);
    cr_assert_eq(sn.calls, 2);
    expect_no_leaks();
}

Test(exec_then, upon_stopped_result_signatures) {
    seen sn;
    seen_init(&sn);
    ex_sender *s = ex_upon_stopped(ex_just_stopped(), us_two, &sn, EX_SIG(EX_T_BOOL, EX_T_UINT));
    const ex_sigs *sg = ex_sender_sigs(s);
    cr_assert_eq(sg->nvalues, 1);
    cr_assert_eq(sg->values[0].arity, 2);
    cr_assert_eq(sg->values[0].types[0], EX_T_BOOL);
    cr_assert_eq(sg->values[0].types[1], EX_T_UINT);
    cr_assert_eq(sg->flags & EX_SIGS_STOPPED, 0, "upon_stopped consumes the stopped channel");
    cr_assert_eq(sg->flags & EX_SIGS_DYNAMIC, 0);
    ex_sender_release(s);

    /* Child that never stops: unchanged. */
    s = ex_upon_stopped(ex_just(ex_int(1)), us_two, &sn, EX_SIG(EX_T_BOOL, EX_T_UINT));
    sg = ex_sender_sigs(s);
    cr_assert_eq(sg->nvalues, 1);
    cr_assert_eq(sg->values[0].arity, 1);
    cr_assert_eq(sg->values[0].types[0], EX_T_INT);
    cr_assert_eq(sg->flags, 0);
    ex_sender_release(s);

    /* Child with a value and stopped: both value signatures. */
    ex_run_loop loop;
    cr_assert_eq(ex_run_loop_init(&loop).code, 0);
    s = ex_upon_stopped(ex_schedule(ex_run_loop_scheduler(&loop)), us_42, &sn, EX_SIG(EX_T_INT));
    sg = ex_sender_sigs(s);
    cr_assert_eq(sg->nvalues, 2);
    bool has_void = false, has_int = false;
    for (unsigned i = 0; i < sg->nvalues; i++) {
        if (sg->values[i].arity == 0) has_void = true;
        if (sg->values[i].arity == 1 && sg->values[i].types[0] == EX_T_INT) has_int = true;
    }
    cr_assert(has_void && has_int);
    cr_assert_eq(sg->flags & EX_SIGS_STOPPED, 0);
    ex_sender_release(s);
    cr_assert_eq(ex_run_loop_destroy(&loop).code, 0);
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}

Test(exec_then, upon_stopped_result_of_wrong_type_is_einval) {
    seen sn;
    seen_init(&sn);
    ex_result r = ex_sync_wait(ex_upon_stopped(ex_just_stopped(), us_wrong_type, &sn, EX_SIG(EX_T_STR)));
    expect_error(&r, EX_EINVAL);
    cr_assert_eq(sn.calls, 1);
    expect_no_leaks();
}
