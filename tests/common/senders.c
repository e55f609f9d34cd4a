/* SPDX-License-Identifier: MIT */
/* senders.c - see senders.h. */
#include <criterion/criterion.h>
#include <stdalign.h>
#include <stddef.h>
#include <string.h>

#include "common/receivers.h"
#include "common/senders.h"
#include "common/wait.h"

/* ---------------------------------------------------------- test_sender */

static void test_op_start(ex_operation *op) {
    test_op *o = (test_op *)op;
    o->start(o);
}

static const ex_operation_vtable test_op_vt = { test_op_start, NULL };

static ex_error test_connect(const ex_sender *s, ex_receiver r, void *storage) {
    const test_sender *ts = (const test_sender *)s;
    test_op *o = storage;
    o->base.vt = &test_op_vt;
    o->r = r;
    o->ctx = ts->ctx;
    o->start = ts->start;
    return ex_ok();
}

const ex_sender_vtable test_sender_vt = { "test.sender", test_connect, NULL, NULL, NULL };

ex_sender *test_sender_new(void (*start)(test_op *op), void *ctx, const ex_sigs *sigs) {
    test_sender *ts = (test_sender *)ex_sender_alloc(&test_sender_vt, sizeof(test_sender));
    if (!ts) return ex_invalid_sender(EX_ENOMEM, "test_sender_new: no memory");
    ts->start = start;
    ts->ctx = ctx;
    if (sigs) ts->base.sigs = *sigs;
    ts->base.op_size = sizeof(test_op);
    ts->base.op_align = alignof(test_op);
    return &ts->base;
}

/* ------------------------------------------------------------ test_gate */

static void gate_start(test_op *o) {
    test_gate *g = o->ctx;
    atomic_store(&g->op, o);
    atomic_fetch_add(&g->started, 1);
}

static const ex_sig sig_int = { 1, { EX_T_INT } };

void test_gate_init(test_gate *g) {
    atomic_init(&g->op, NULL);
    atomic_init(&g->started, 0);
    atomic_init(&g->opened, 0);
}

ex_sender *test_gate_sender(test_gate *g) {
    ex_sigs sigs = { 1, 0, { sig_int } };
    return test_sender_new(gate_start, g, &sigs);
}

static bool gate_has_op(void *ctx) { return atomic_load(&((test_gate *)ctx)->op) != NULL; }

bool test_gate_wait_started(test_gate *g) { return test_wait_until(gate_has_op, g, NULL, 2 * TEST_WAIT_LIMIT_S); }

void test_gate_open(test_gate *g, int64_t v) {
    test_op *o = atomic_exchange(&g->op, NULL);
    cr_assert_not_null(o, "the gate was opened before an operation started");
    atomic_fetch_add(&g->opened, 1);
    ex_value x = ex_int(v);
    ex_set_value(o->r, &x, 1);
}

/* ------------------------------------------------------------ work_gate */

void work_gate_init(work_gate *g, ex_pool *pool, int64_t value) {
    memset(g, 0, sizeof *g);
    atomic_init(&g->open, 0);
    atomic_init(&g->entered, 0);
    atomic_init(&g->finished, 0);
    atomic_init(&g->timed_out, 0);
    g->value = value;
    g->pool = pool;
    g->worker = -2;
}

ex_error work_gate_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    work_gate *g = ctx;
    (void)in, (void)n;
    g->thread = test_thread_id();
    g->worker = g->pool ? ex_pool_current_worker(g->pool) : -1;
    atomic_fetch_add(&g->entered, 1);
    if (wait_int_reaches(&g->open, 1) < 1) atomic_fetch_add(&g->timed_out, 1);
    out[0] = ex_int(g->value);
    atomic_fetch_add(&g->finished, 1);
    return ex_ok();
}

ex_sender *work_gated(work_gate *g, ex_scheduler sch) {
    return ex_then(ex_schedule(sch), work_gate_fn, g, EX_SIG0, EX_SIG(EX_T_INT));
}

void work_gate_open(work_gate *g) { atomic_store(&g->open, 1); }

void work_gate_wait_entered(work_gate *g, int count) {
    int seen = wait_int_reaches(&g->entered, count);
    cr_assert_geq(seen, count, "timed out waiting for the gated work: %d of %d entered", seen, count);
}

/* -------------------------------------------------------- until_stopped */

static void until_stop_fire(ex_stop_callback *cb) {
    test_op *o = (test_op *)(void *)((char *)cb - offsetof(test_op, cb));
    ex_stop_callback_deregister(&o->cb);  /* from inside the callback: returns at once */
    ex_set_stopped(o->r);
}

static void until_stop_start(test_op *o) {
    ex_stop_callback_register(&o->cb, ex_get_stop_token(ex_receiver_env(o->r)), until_stop_fire);
}

ex_sender *until_stopped(void) {
    ex_sigs sigs = { 0, EX_SIGS_STOPPED, { { 0, { 0 } } } };
    return test_sender_new(until_stop_start, NULL, &sigs);
}

/* ----------------------------------------------------------- stop_probe */

static ex_error stop_probe_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)n;
    ex_stop_token t = in[0].as.token;
    if (ctx) *(ex_stop_token *)ctx = t;
    out[0] = ex_int((ex_stop_token_stop_possible(t) ? STOP_PROBE_POSSIBLE : 0) |
                    (ex_stop_token_stop_requested(t) ? STOP_PROBE_REQUESTED : 0));
    return ex_ok();
}

ex_sender *stop_probe(ex_stop_token *seen) {
    return ex_then(ex_read_env(&ex_key_get_stop_token, EX_T_TOKEN), stop_probe_fn, seen, EX_SIG(EX_T_TOKEN),
                   EX_SIG(EX_T_INT));
}

/* --------------------------------------------------------- env_recorder */

static void record_env_start(test_op *o) {
    seen_env *s = o->ctx;
    ex_env e = ex_receiver_env(o->r);
    ex_stop_token t = ex_get_stop_token(e);
    s->calls++;
    s->sch = (ex_scheduler){ NULL, NULL };
    (void)ex_get_scheduler(e, &s->sch);
    s->alloc = ex_get_allocator(e);
    ex_scheduler domain_sch;
    s->domain = ex_get_domain(e, &domain_sch);
    s->stop_possible = ex_stop_token_stop_possible(t);
    s->stop_requested = ex_stop_token_stop_requested(t);
    ex_set_value(o->r, NULL, 0);
}

ex_sender *env_recorder(seen_env *s) {
    memset(s, 0, sizeof *s);
    ex_sigs sigs;
    memset(&sigs, 0, sizeof sigs);
    ex_sigs_add_value(&sigs, EX_SIG0);
    return test_sender_new(record_env_start, s, &sigs);
}
