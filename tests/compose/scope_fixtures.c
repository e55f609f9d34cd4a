/* SPDX-License-Identifier: MIT */
/* scope_fixtures.c - the scope part of compose_fixtures.h. */
#include <sched.h>
#include <string.h>

#include "compose/compose_fixtures.h"

/* ------------------------------------------------ either kind of scope */

const char *scope_kind_name(const any_scope *s) { return s->counting ? "counting_scope" : "simple_counting_scope"; }

void sc_init(any_scope *s, bool counting) {
    memset(s, 0, sizeof *s);
    s->counting = counting;
    ex_error e = counting ? ex_counting_scope_init(&s->full) : ex_simple_counting_scope_init(&s->simple);
    cr_assert_eq(e.code, 0, "scope init: %s", e.msg ? e.msg : "");
}

ex_scope_token sc_token(any_scope *s) {
    return s->counting ? ex_counting_scope_token(&s->full) : ex_simple_counting_scope_token(&s->simple);
}

void sc_close(any_scope *s) {
    if (s->counting) ex_counting_scope_close(&s->full);
    else ex_simple_counting_scope_close(&s->simple);
}

ex_sender *sc_join(any_scope *s) {
    return s->counting ? ex_counting_scope_join(&s->full) : ex_simple_counting_scope_join(&s->simple);
}

ex_error sc_destroy(any_scope *s) {
    return s->counting ? ex_counting_scope_destroy(&s->full) : ex_simple_counting_scope_destroy(&s->simple);
}

void sc_destroy_ok(any_scope *s) {
    ex_error e = sc_destroy(s);
    cr_assert_eq(e.code, 0, "%s destroy: %d (%s)", scope_kind_name(s), e.code, e.msg ? e.msg : "");
}

void sc_join_ok(any_scope *s) {
    ex_result r = ex_sync_wait(sc_join(s));
    cr_assert_eq(r.disposition, EX_DISP_VALUE, "%s join: disposition %d (%d: %s)", scope_kind_name(s), r.disposition,
                 r.error.code, r.error.msg ? r.error.msg : "");
    cr_assert_eq(r.n, 0);
    ex_result_destroy(&r);
}

static void run_on_scope(scope_body *body, bool counting, ex_pool *p) {
    any_scope s;
    sc_init(&s, counting);
    body(&s, p);
    sc_destroy_ok(&s);
}

void one_scope_kind(scope_body *body, bool counting, unsigned pool_threads) {
    ex_pool *p = pool_threads ? test_pool_new(pool_threads) : NULL;
    run_on_scope(body, counting, p);
    if (p) test_pool_free(p);
    expect_no_leaks();
}

void each_scope_kind(scope_body *body, unsigned pool_threads) {
    ex_pool *p = pool_threads ? test_pool_new(pool_threads) : NULL;
    run_on_scope(body, false, p);
    run_on_scope(body, true, p);
    if (p) test_pool_free(p);
    expect_no_leaks();
}

join_run join_start_rec(any_scope *s, rec *rc) {
    join_run j;
    rec_with_scheduler(rc, ex_inline_scheduler());
    j.join = sc_join(s);
    j.op = run_start(j.join, rc);
    return j;
}

void join_run_free(join_run *j) {
    run_destroy(j->op);
    ex_sender_release(j->join);
}

void expect_nothing_associated(any_scope *s, const char *what) {
    rec rc;
    rec_init(&rc);
    join_run j = join_start_rec(s, &rc);
    cr_assert_eq(rc.values, 1, "%s: %s left an association", scope_kind_name(s), what);
    join_run_free(&j);
}

/* ------------------------------------------------------- work to spawn */

ex_error inc_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    atomic_fetch_add((atomic_int *)ctx, 1);
    return ex_ok();
}

ex_sender *pool_inc(ex_pool *p, atomic_int *counter) {
    return ex_then(ex_schedule(ex_pool_scheduler(p)), inc_fn, counter, EX_SIG0, EX_SIG0);
}

ex_sender *inline_inc(atomic_int *counter) { return ex_then(ex_just(), inc_fn, counter, EX_SIG0, EX_SIG0); }

void stopper_init(stopper *s, ex_pool *p) {
    memset(s, 0, sizeof *s);
    s->pool = p;
}

static bool stop_requested(void *token) { return ex_stop_token_stop_requested(*(ex_stop_token *)token); }

ex_error poll_stop_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    stopper *s = ctx;
    cr_assert_eq(n, 1);
    ex_stop_token t = in[0].as.token;
    atomic_fetch_add(&s->started, 1);
    bool seen = false;
    if (!ex_stop_token_stop_possible(t)) {
        atomic_fetch_add(&s->no_token, 1);
    } else {
        seen = test_wait_until(stop_requested, &t, NULL, TEST_WAIT_LIMIT_S);
    }
    if (seen) atomic_fetch_add(&s->observed, 1);
    out[0] = ex_bool(seen);
    atomic_fetch_add(&s->finished, 1);
    return ex_ok();
}

ex_sender *stop_waiter(stopper *s) {
    return ex_starts_on(ex_pool_scheduler(s->pool),
                        ex_then(ex_read_env(&ex_key_get_stop_token, EX_T_TOKEN), poll_stop_fn, s, EX_SIG(EX_T_TOKEN),
                                EX_SIG(EX_T_BOOL)));
}

