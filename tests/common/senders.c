/* senders.c - see senders.h. */
#include <criterion/criterion.h>
#include <stdalign.h>
#include <stddef.h>
#include <string.h>

#include "common/receivers.h"
#include "common/senders.h"
#include "common/wait.h"

/* ------------------------------------------------------------ test_gate */

typedef struct gate_op {
    ex_operation base;
    ex_receiver r;
    test_gate *g;
} gate_op;

typedef struct gate_sender {
    ex_sender base;
    test_gate *g;
} gate_sender;

static void gate_start(ex_operation *op) {
    gate_op *o = (gate_op *)op;
    atomic_store(&o->g->op, o);
    atomic_fetch_add(&o->g->started, 1);
}

static const ex_operation_vtable gate_op_vt = { gate_start, NULL };

static ex_error gate_connect(const ex_sender *s, ex_receiver r, void *storage) {
    gate_op *o = storage;
    o->base.vt = &gate_op_vt;
    o->r = r;
    o->g = ((const gate_sender *)s)->g;
    return ex_ok();
}

static const ex_sender_vtable gate_vt = { "test.gate", gate_connect, NULL, NULL };
static const ex_sig sig_int = { 1, { EX_T_INT } };

void test_gate_init(test_gate *g) {
    atomic_init(&g->op, NULL);
    atomic_init(&g->started, 0);
    atomic_init(&g->opened, 0);
}

ex_sender *test_gate_sender(test_gate *g) {
    gate_sender *s = (gate_sender *)ex_sender_alloc(&gate_vt, sizeof(gate_sender));
    cr_assert_not_null(s);
    s->g = g;
    s->base.sigs.nvalues = 1;
    s->base.sigs.values[0] = sig_int;
    s->base.sigs.flags = 0;
    s->base.op_size = sizeof(gate_op);
    s->base.op_align = alignof(gate_op);
    return &s->base;
}

static bool gate_has_op(void *ctx) { return atomic_load(&((test_gate *)ctx)->op) != NULL; }

bool test_gate_wait_started(test_gate *g) { return test_wait_until(gate_has_op, g, NULL, 2 * TEST_WAIT_LIMIT_S); }

void test_gate_open(test_gate *g, int64_t v) {
    gate_op *o = atomic_exchange(&g->op, NULL);
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

typedef struct until_stop_op {
    ex_operation base;
    ex_receiver r;
    ex_stop_callback cb;
} until_stop_op;

static void until_stop_fire(ex_stop_callback *cb) {
    until_stop_op *o = (until_stop_op *)(void *)((char *)cb - offsetof(until_stop_op, cb));
    ex_stop_callback_deregister(&o->cb);  /* from inside the callback: returns at once */
    ex_set_stopped(o->r);
}

static void until_stop_start(ex_operation *op) {
    until_stop_op *o = (until_stop_op *)op;
    ex_stop_callback_register(&o->cb, ex_get_stop_token(ex_receiver_env(o->r)), until_stop_fire);
}

static const ex_operation_vtable until_stop_op_vt = { until_stop_start, NULL };

static ex_error until_stop_connect(const ex_sender *s, ex_receiver r, void *storage) {
    (void)s;
    until_stop_op *o = storage;
    o->base.vt = &until_stop_op_vt;
    o->r = r;
    return ex_ok();
}

static const ex_sender_vtable until_stop_vt = { "test.until_stopped", until_stop_connect, NULL, NULL };

ex_sender *until_stopped(void) {
    ex_sender *s = ex_sender_alloc(&until_stop_vt, sizeof(ex_sender));
    if (!s) return ex_invalid_sender(EX_ENOMEM, "until_stopped");
    s->sigs.flags = EX_SIGS_STOPPED;
    s->op_size = sizeof(until_stop_op);
    s->op_align = alignof(until_stop_op);
    return s;
}
