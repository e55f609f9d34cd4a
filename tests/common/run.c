/* run.c - see run.h. */
#include <sched.h>

#include "common/run.h"
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

void run_destroy(ex_operation *op) { ex_operation_free(op); }

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
