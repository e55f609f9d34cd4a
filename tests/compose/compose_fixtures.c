/* SPDX-License-Identifier: MIT */
/* compose_fixtures.c - the generic and the split / when_all parts of
 * compose_fixtures.h. */
#include <string.h>

#include "compose/compose_fixtures.h"

void run_with_pool(void (*body)(ex_pool *p), unsigned threads) {
    ex_pool *p = test_pool_new(threads);
    body(p);
    test_pool_free(p);
    expect_no_leaks();
}

void arec_init_stoppable(arec *r, ex_pool *p, bool stop_now) {
    arec_init(r, p);
    arec_with_stop(r);
    if (stop_now) ex_stop_source_request_stop(&r->stop);
}

void arec_run_to_end(ex_sender *s, arec *r) {
    ex_operation *op = arec_run_start(s, r);
    arec_wait_done(r);
    ex_operation_free(op);
    ex_sender_release(s);
}

void expect_result_values(const ex_result *r, const ex_value *want, size_t n) {
    cr_assert_eq(r->disposition, EX_DISP_VALUE, "disposition %d (%s)", r->disposition,
                 r->error.msg ? r->error.msg : "");
    cr_assert_eq(r->n, n);
    for (size_t i = 0; i < n; i++) {
        const ex_value *got = &r->values[i];
        bool same = got->type == EX_T_STR && want[i].type == EX_T_STR ? strcmp(got->as.s, want[i].as.s) == 0
                                                                    : ex_value_equal(got, &want[i]);
        cr_assert(same, "value %zu differs (type %d, want type %d)", i, (int)got->type, (int)want[i].type);
    }
}

ex_sender *too_many_values(void) {
    ex_value v[EX_MAX_ARITY + 1];
    for (int i = 0; i <= EX_MAX_ARITY; i++) v[i] = ex_int(i);
    return ex_just_n(v, EX_MAX_ARITY + 1);
}

ex_operation *connect_inline(inline_run *ir, const ex_sender *s, rec *r) {
    cr_assert_leq(ex_sender_op_size(s), sizeof ir->buf);
    ex_error e = ex_connect(s, rec_receiver(r), ir->buf, sizeof ir->buf, &ir->op);
    cr_assert_eq(e.code, 0, "ex_connect: %s", e.msg ? e.msg : "");
    return ir->op;
}

void run_inline(inline_run *ir, ex_sender *s, rec *r) {
    connect_inline(ir, s, r);
    cr_assert_eq(rec_total(r), 0, "connect must not start work");
    ex_start(ir->op);
}

bool stop_requested_at(void *token) { return ex_stop_token_stop_requested(*(const ex_stop_token *)token); }

ex_error count_pass(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    call_counter *c = ctx;
    c->tid = test_thread_id();
    atomic_fetch_add(&c->calls, 1);
    for (size_t i = 0; i < n; i++) out[i] = in[i];
    return ex_ok();
}

ex_error count_seven(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    call_counter *c = ctx;
    (void)in, (void)n;
    c->tid = test_thread_id();
    atomic_fetch_add(&c->calls, 1);
    out[0] = ex_int(7);
    return ex_ok();
}

void connect_consumers(const ex_sender *s, trec *a, ex_operation **op, int n) {
    for (int i = 0; i < n; i++) {
        trec_init(&a[i]);
        ex_error e = ex_connect_alloc(s, trec_receiver(&a[i]), &op[i]);
        cr_assert_eq(e.code, 0, "consumer %d: ex_connect_alloc: %s", i, e.msg ? e.msg : "");
    }
}

ex_sender *counted_int(call_counter *c, int64_t v) {
    memset(c, 0, sizeof *c);
    return ex_then(ex_just(ex_int(v)), count_pass, c, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
}

ex_sender *counted_seven_on(call_counter *c, ex_scheduler sch) {
    memset(c, 0, sizeof *c);
    return ex_then(ex_schedule(sch), count_seven, c, EX_SIG0, EX_SIG(EX_T_INT));
}


void spin_init(spin_ctx *sc) {
    memset(sc, 0, sizeof *sc);
    atomic_init(&sc->entered, 0);
    atomic_init(&sc->saw_stop, 0);
    atomic_init(&sc->timed_out, 0);
    atomic_init(&sc->not_possible, 0);
}

static ex_sender *lv_spin_until_stop(void *ctx, const ex_value *in, size_t n) {
    spin_ctx *sc = ctx;
    (void)n;
    ex_stop_token tok = in[0].as.token;
    if (!ex_stop_token_stop_possible(tok)) atomic_fetch_add(&sc->not_possible, 1);
    atomic_fetch_add(&sc->entered, 1);
    if (!test_wait_until(stop_requested_at, &tok, NULL, TEST_WAIT_LIMIT_S)) {
        atomic_fetch_add(&sc->timed_out, 1);
        return ex_just_error(ex_err(EX_EUSER + 99, "spinner: no stop request arrived"));
    }
    atomic_fetch_add(&sc->saw_stop, 1);
    if (sc->late_error) return ex_just_error(ex_err(EX_EUSER + 2, "late error after stop"));
    return ex_just_stopped();
}

ex_sender *spinner(ex_scheduler sch, spin_ctx *sc) {
    return ex_let_value(ex_starts_on(sch, ex_read_env(&ex_key_get_stop_token, EX_T_TOKEN)), lv_spin_until_stop, sc,
                        EX_SIG(EX_T_TOKEN));
}
