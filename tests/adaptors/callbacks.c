/* SPDX-License-Identifier: MIT */
/* callbacks.c - see callbacks.h. */
#include <stddef.h>

#include "adaptors/callbacks.h"


static seen *record(void *ctx, const ex_value *in, size_t n) {
    seen *s = ctx;
    s->calls++;
    s->n = n;
    s->in_ptr = in;
    for (size_t i = 0; i < n && i < EX_MAX_ARITY; i++) s->in[i] = in[i];
    s->thread = test_thread_id();
    return s;
}

static seen *record_error(void *ctx, ex_error err) {
    seen *s = ctx;
    s->calls++;
    s->err = err;
    s->thread = test_thread_id();
    return s;
}

static seen *record_call(void *ctx) {
    seen *s = ctx;
    s->calls++;
    s->thread = test_thread_id();
    return s;
}

void expect_called_once_with(const seen *sn, size_t n) {
    cr_assert_eq(sn->calls, 1, "fn called %d times", sn->calls);
    cr_assert_eq(sn->n, n, "fn got %zu datums, expected %zu", sn->n, n);
}

void expect_called_only_at_start(ex_sender *s, seen *sn, rec *rc) {
    cr_assert_eq(sn->calls, 0, "building must not call fn");
    _Alignas(max_align_t) unsigned char buf[2048];
    ex_operation *op;
    cr_assert_eq(ex_connect(s, rec_receiver(rc), buf, sizeof buf, &op).code, 0);
    cr_assert_eq(sn->calls, 0, "connect must not call fn");
    cr_assert_eq(rec_total(rc), 0);
    ex_start(op);
    cr_assert_eq(sn->calls, 1);
    cr_assert_eq(rec_total(rc), 1);
    ex_operation_destroy(op);
    ex_sender_release(s);
}

static rec run_adapted(adapt_fn adapt, ex_sender *child) {
    seen sn = { 0 };
    rec rc;
    rec_init(&rc);
    run_in_place(adapt(child, &sn), &rc);
    cr_assert_eq(sn.calls, 0, "fn must not see a completion it does not handle");
    return rc;
}

void expect_error_passes(adapt_fn adapt) {
    static int payload;
    rec rc = run_adapted(adapt, ex_just_error(ex_err_data(EX_EUSER + 1, "boom", &payload)));
    rec_expect_error(&rc, EX_EUSER + 1);
    cr_assert_str_eq(rc.err.msg, "boom");
    cr_assert_eq(rc.err.data, &payload);
}

void expect_stopped_passes(adapt_fn adapt) {
    rec rc = run_adapted(adapt, ex_just_stopped());
    rec_expect_stopped(&rc);
}

void expect_values_pass(adapt_fn adapt) {
    rec rc = run_adapted(adapt, ex_just(ex_int(3), ex_str("x")));
    rec_expect_values(&rc, 2);
    cr_assert_eq(rc.v[0].type, EX_T_INT);
    cr_assert_eq(rc.v[0].as.i, 3);
    cr_assert_eq(rc.v[1].type, EX_T_STR);
    cr_assert_str_eq(rc.v[1].as.s, "x");
}

const char fail_msg[] = "fn failed on purpose";
int fail_payload;

/* ------------------------------------------------------------------ then */

ex_error fn_add(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    record(ctx, in, n);
    out[0] = ex_int(in[0].as.i + in[1].as.i);
    return ex_ok();
}

ex_error fn_twice(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    record(ctx, in, n);
    out[0] = ex_int(in[0].as.i * 2);
    return ex_ok();
}

ex_error fn_count(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    record(ctx, in, n);
    out[0] = ex_int((int64_t)n);
    return ex_ok();
}

ex_error fn_void(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)out;
    record(ctx, in, n);
    return ex_ok();
}

ex_error fn_three(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    record(ctx, in, n);
    out[0] = ex_int(in[0].as.i + 1);
    out[1] = ex_double((double)in[0].as.i / 2.0);
    out[2] = ex_str("tag");
    return ex_ok();
}

ex_error fn_fail(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)out;
    record(ctx, in, n);
    return ex_err_data(EX_EUSER + 2, fail_msg, &fail_payload);
}

ex_error fn_fail_nomsg(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)out;
    record(ctx, in, n);
    return ex_err(EX_EUSER + 3, NULL);
}

ex_error fn_wrong_type(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    record(ctx, in, n);
    out[0] = ex_double(1.0);
    return ex_ok();
}

ex_error fn_writes_two(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)in, (void)n;
    out[0] = ex_int(1);
    out[1] = ex_int(2);
    return ex_ok();
}

/* ------------------------------------------------------------ upon_error */

ex_error ue_code(void *ctx, ex_error err, ex_value *out) {
    record_error(ctx, err);
    out[0] = ex_int(err.code);
    return ex_ok();
}

ex_error ue_void(void *ctx, ex_error err, ex_value *out) {
    (void)out;
    record_error(ctx, err);
    return ex_ok();
}

ex_error ue_two(void *ctx, ex_error err, ex_value *out) {
    record_error(ctx, err);
    out[0] = ex_str(err.msg);
    out[1] = ex_int(err.code);
    return ex_ok();
}

ex_error ue_fail(void *ctx, ex_error err, ex_value *out) {
    (void)out;
    record_error(ctx, err);
    return ex_err(EX_EUSER + 4, fail_msg);
}

ex_error ue_wrong_type(void *ctx, ex_error err, ex_value *out) {
    record_error(ctx, err);
    out[0] = ex_str("not an int");
    return ex_ok();
}

/* ---------------------------------------------------------- upon_stopped */

ex_error us_42(void *ctx, ex_value *out) {
    record_call(ctx);
    out[0] = ex_int(42);
    return ex_ok();
}

ex_error us_void(void *ctx, ex_value *out) {
    (void)out;
    record_call(ctx);
    return ex_ok();
}

ex_error us_two(void *ctx, ex_value *out) {
    record_call(ctx);
    out[0] = ex_bool(true);
    out[1] = ex_uint(7);
    return ex_ok();
}

ex_error us_fail(void *ctx, ex_value *out) {
    (void)out;
    record_call(ctx);
    return ex_err(EX_EUSER + 5, fail_msg);
}

ex_error us_wrong_type(void *ctx, ex_value *out) {
    record_call(ctx);
    out[0] = ex_int(1);
    return ex_ok();
}

/* ------------------------------------------------------------- let_value */

ex_sender *let_pair(void *ctx, const ex_value *in, size_t n) {
    (void)ctx, (void)n;
    return ex_just(in[0], ex_int(2));
}

ex_sender *let_same(void *ctx, const ex_value *in, size_t n) {
    (void)ctx, (void)n;
    return ex_just(in[0]);
}

ex_sender *let_str(void *ctx, const ex_value *in, size_t n) {
    (void)ctx, (void)in, (void)n;
    return ex_just(ex_str("not an int"));
}

ex_sender *lv_times10(void *ctx, const ex_value *in, size_t n) {
    record(ctx, in, n);
    return ex_just(ex_int(in[0].as.i * 10));
}

ex_sender *lv_count(void *ctx, const ex_value *in, size_t n) {
    record(ctx, in, n);
    return ex_just(ex_int((int64_t)n));
}

ex_sender *lv_ret(void *ctx, const ex_value *in, size_t n) { return ex_sender_retain(record(ctx, in, n)->ret); }

ex_sender *lv_lend(void *ctx, const ex_value *in, size_t n) { return record(ctx, in, n)->ret; }

ex_sender *lv_null(void *ctx, const ex_value *in, size_t n) {
    record(ctx, in, n);
    return NULL;
}

ex_sender *lv_read_sched(void *ctx, const ex_value *in, size_t n) {
    record(ctx, in, n);
    return ex_read_env(&ex_key_get_scheduler, EX_T_SCHED);
}

ex_sender *lv_read_token(void *ctx, const ex_value *in, size_t n) {
    record(ctx, in, n);
    return ex_read_env(&ex_key_get_stop_token, EX_T_TOKEN);
}

/* ------------------------------------------------------------- let_error */

ex_sender *le_ret(void *ctx, ex_error err) { return ex_sender_retain(record_error(ctx, err)->ret); }

ex_sender *le_null(void *ctx, ex_error err) {
    record_error(ctx, err);
    return NULL;
}

ex_sender *le_code(void *ctx, ex_error err) {
    record_error(ctx, err);
    return ex_just(ex_int(err.code), ex_str(err.msg));
}

ex_sender *le_read_sched(void *ctx, ex_error err) {
    record_error(ctx, err);
    return ex_read_env(&ex_key_get_scheduler, EX_T_SCHED);
}

/* ----------------------------------------------------------- let_stopped */

ex_sender *ls_ret(void *ctx) { return ex_sender_retain(record_call(ctx)->ret); }

ex_sender *ls_null(void *ctx) {
    record_call(ctx);
    return NULL;
}

ex_sender *ls_seven(void *ctx) {
    record_call(ctx);
    return ex_just(ex_int(7));
}

ex_sender *ls_read_sched(void *ctx) {
    record_call(ctx);
    return ex_read_env(&ex_key_get_scheduler, EX_T_SCHED);
}
