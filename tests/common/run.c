/* SPDX-License-Identifier: MIT */
/* run.c - see run.h. */
#include <sched.h>
#include <stddef.h>

#include "common/run.h"
#include "common/test_alloc.h"
#include "common/wait.h"

static ex_operation *start_into(const ex_sender *s, ex_receiver r) {
    ex_operation *op = NULL;
    ex_error e = ex_connect_alloc(s, r, &op);
    cr_assert_eq(e.code, 0, "connect failed: %s", e.msg ? e.msg : "");
    ex_start(op);
    return op;
}

ex_operation *run_start(ex_sender *s, rec *r) { return start_into(s, rec_receiver(r)); }
ex_operation *trec_run_start(const ex_sender *s, trec *r) { return start_into(s, trec_receiver(r)); }
ex_operation *arec_run_start(const ex_sender *s, arec *r) { return start_into(s, arec_receiver(r)); }

ex_operation *run_start_released(ex_sender *s, rec *r) {
    ex_operation *op = NULL;
    ex_error e = ex_connect_alloc(s, rec_receiver(r), &op);
    cr_assert_eq(e.code, 0, "connect failed: %s", e.msg ? e.msg : "");
    ex_sender_release(s);
    ex_start(op);
    return op;
}

void run_destroy(ex_operation *op) { ex_operation_free(op); }

void run_destroy_release(ex_operation *op, ex_sender *s) {
    ex_operation_free(op);
    ex_sender_release(s);
}

/* Storage for an operation connected in place. */
typedef struct op_buf {
    _Alignas(max_align_t) unsigned char b[4096];
} op_buf;

static ex_operation *connect_in(op_buf *buf, ex_sender *s, rec *r) {
    cr_assert_leq(ex_sender_op_size(s), sizeof buf->b);
    ex_operation *op = NULL;
    ex_error e = ex_connect(s, rec_receiver(r), buf->b, sizeof buf->b, &op);
    cr_assert_eq(e.code, 0, "connect failed: %s", e.msg ? e.msg : "");
    return op;
}

void run_in_place(ex_sender *s, rec *r) {
    op_buf buf;
    ex_operation *op = connect_in(&buf, s, r);
    ex_start(op);
    cr_assert_eq(rec_total(r), 1, "exactly one completion expected, got %d", rec_total(r));
    ex_operation_destroy(op);
    ex_sender_release(s);
}

void run_with_failing_allocation_msg(ex_sender *s, const char *msg) {
    rec rc;
    rec_init(&rc);
    op_buf buf;
    ex_operation *op = connect_in(&buf, s, &rc);
    test_alloc_fail_next();
    ex_start(op);
    expect_injected_failure_hit();
    rec_expect_error(&rc, EX_ENOMEM);
    cr_assert_not_null(rc.err.msg);
    if (msg) cr_assert_str_eq(rc.err.msg, msg);
    ex_operation_destroy(op);
    ex_sender_release(s);
}

void run_with_failing_allocation(ex_sender *s) { run_with_failing_allocation_msg(s, NULL); }

void trec_wait_done(trec *r) {
    cr_assert_geq(wait_int_reaches(&r->done, 1), 1, "timed out waiting for the completion");
    cr_assert_eq(rec_total(&r->r), 1, "completed %d times", rec_total(&r->r));
}

void arec_wait_done(arec *r) {
    int total = wait_int_reaches(&r->total, 1);
    /* A second completion would come right after the first; let it show. */
    sched_yield();
    cr_assert_eq(atomic_load(&r->total), 1, "the operation did not complete exactly once (%d completions)", total);
}

void expect_value_int(ex_result *r, int64_t v) {
    cr_assert_eq(r->disposition, EX_DISP_VALUE, "expected a value, got disposition %d (%s)", r->disposition,
                 r->error.msg ? r->error.msg : "");
    cr_assert_eq(r->n, 1);
    cr_assert_eq(r->values[0].type, EX_T_INT);
    cr_assert_eq(r->values[0].as.i, v);
}

void expect_error(ex_result *r, int code) {
    cr_assert_eq(r->disposition, EX_DISP_ERROR, "expected an error, got disposition %d", r->disposition);
    cr_assert_eq(r->error.code, code, "expected error %d, got %d (%s)", code, r->error.code,
                 r->error.msg ? r->error.msg : "");
    cr_assert_not_null(r->error.msg);
}

void expect_values_text(ex_result *r, const char *want) {
    expect_value_arity(r, r->n);
    char text[512];
    test_format_values(text, sizeof text, r->values, r->n);
    cr_assert_str_eq(text, want);
}

/* What an expect_sync_* check wants of the result. */
typedef enum want_kind { WANT_VALUES, WANT_INT, WANT_SCHED, WANT_ERROR, WANT_TEXT } want_kind;
typedef struct sync_want {
    want_kind kind;
    size_t n;
    int64_t i;
    ex_scheduler sched;
    int code;
    const char *text;
} sync_want;

static void expect_sync(ex_sender *s, sync_want w) {
    ex_result r = ex_sync_wait(s);
    switch (w.kind) {
    case WANT_VALUES: expect_value_arity(&r, w.n); break;
    case WANT_INT: expect_value_int(&r, w.i); break;
    case WANT_ERROR:
        expect_error(&r, w.code);
        if (w.text) cr_assert_str_eq(r.error.msg, w.text);
        break;
    case WANT_TEXT: expect_values_text(&r, w.text); break;
    case WANT_SCHED:
        expect_value_arity(&r, 1);
        cr_assert_eq(r.values[0].type, EX_T_SCHED);
        cr_assert(ex_scheduler_equal(r.values[0].as.sched, w.sched), "not the scheduler expected");
        break;
    }
    ex_result_destroy(&r);
}

void expect_sync_values(ex_sender *s, size_t n) { expect_sync(s, (sync_want){ .kind = WANT_VALUES, .n = n }); }
void expect_sync_int(ex_sender *s, int64_t v) { expect_sync(s, (sync_want){ .kind = WANT_INT, .i = v }); }
void expect_sync_sched(ex_sender *s, ex_scheduler want) { expect_sync(s, (sync_want){ .kind = WANT_SCHED, .sched = want }); }
void expect_sync_text(ex_sender *s, const char *want) { expect_sync(s, (sync_want){ .kind = WANT_TEXT, .text = want }); }
void expect_sync_error(ex_sender *s, int code) { expect_sync(s, (sync_want){ .kind = WANT_ERROR, .code = code }); }
void expect_sync_error_msg(ex_sender *s, int code, const char *msg) {
    expect_sync(s, (sync_want){ .kind = WANT_ERROR, .code = code, .text = msg });
}

void expect_value_arity(ex_result *r, size_t n) {
    cr_assert_eq(r->disposition, EX_DISP_VALUE, "expected a value, got disposition %d (%s)", r->disposition,
                 r->error.msg ? r->error.msg : "");
    cr_assert_eq(r->n, n, "%zu datums, expected %zu", r->n, n);
}

void expect_stopped(ex_result *r) {
    cr_assert_eq(r->disposition, EX_DISP_STOPPED, "expected stopped, got disposition %d", r->disposition);
    cr_assert_eq(r->n, 0);
}

void expect_err(ex_error e, int code) {
    cr_assert_eq(e.code, code, "expected error %d, got %d (%s)", code, e.code, e.msg ? e.msg : "");
    cr_assert_not_null(e.msg, "error %d without a message", code);
}

void expect_connect_refused(ex_error e, const ex_operation *op) {
    expect_err(e, EX_EINVAL);
    cr_assert_null(op, "a refused connect leaves no operation");
}

void expect_invalid_status(ex_sender *s, int code) {
    cr_assert_not_null(s, "builders never return NULL");
    expect_err(ex_sender_status(s), code);
    ex_sender_release(s);
}

void expect_invalid(ex_sender *s, int code) {
    cr_assert_not_null(s, "builders never return NULL");
    expect_err(ex_sender_status(s), code);
    ex_result r = ex_sync_wait(s);
    expect_error(&r, code);
}

void expect_invalid_msg(ex_sender *s, int code, const char *msg) {
    cr_assert_not_null(s, "builders never return NULL");
    expect_err(ex_sender_status(s), code);
    cr_assert_str_eq(ex_sender_status(s).msg, msg);
    expect_sync_error_msg(s, code, msg);
}

void test_alloc_fail_next(void) {
    test_alloc_reset();
    test_alloc_fail_at(1);
}

void expect_injected_failure_hit(void) {
    cr_assert_eq(test_stats.failed, 1, "the injected failure was not hit");
    test_alloc_reset(); /* no further failures */
}

void expect_built_enomem(ex_sender *s) {
    expect_injected_failure_hit();
    expect_invalid(s, EX_ENOMEM);
}

void rec_expect_values(const rec *r, size_t n) {
    cr_assert_eq(r->values, 1, "expected set_value, got values %d errors %d (%d: %s) stops %d", r->values, r->errors,
                 r->err.code, r->err.msg ? r->err.msg : "", r->stops);
    cr_assert_eq(rec_total(r), 1, "completed %d times", rec_total(r));
    cr_assert_eq(r->n, n, "%zu datums, expected %zu", r->n, n);
}

void rec_expect_value_int(const rec *r, int64_t v) {
    rec_expect_values(r, 1);
    cr_assert_eq(r->v[0].type, EX_T_INT);
    cr_assert_eq(r->v[0].as.i, v);
}

void rec_expect_error(const rec *r, int code) {
    cr_assert_eq(r->errors, 1, "expected set_error, got values %d errors %d stops %d", r->values, r->errors, r->stops);
    cr_assert_eq(rec_total(r), 1, "completed %d times", rec_total(r));
    cr_assert_eq(r->err.code, code, "expected error %d, got %d (%s)", code, r->err.code, r->err.msg ? r->err.msg : "");
}

void rec_expect_stopped(const rec *r) {
    cr_assert_eq(r->stops, 1, "expected set_stopped, got values %d errors %d stops %d", r->values, r->errors, r->stops);
    cr_assert_eq(rec_total(r), 1, "completed %d times", rec_total(r));
}

void rec_expect_sched(const rec *r, ex_scheduler want) {
    rec_expect_values(r, 1);
    cr_assert_eq(r->v[0].type, EX_T_SCHED);
    cr_assert(ex_scheduler_equal(r->v[0].as.sched, want), "not the scheduler expected");
}
