/* local_fixtures.c - see local_fixtures.h. */
#include <sched.h>
#include <stdalign.h>
#include <string.h>

#include "task/local_fixtures.h"

const ex_sig sig_int = { 1, { EX_T_INT } };

ex_result run(ex_sender *s) { return ex_sync_wait(s); }

void expect_disp(ex_result *r, ex_disposition d) {
    cr_assert_eq(r->disposition, d, "expected disposition %d, got %d (%s)", d, r->disposition,
                 r->disposition == EX_DISP_ERROR && r->error.msg ? r->error.msg : "");
}

ex_error add_one(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)n;
    out[0] = ex_int(in[0].as.i + 1);
    return ex_ok();
}

ex_task_result body_void(ex_task *t, void *arg) {
    (void)t, (void)arg;
    return ex_task_void();
}

ex_task_result body_i64(ex_task *t, void *arg) {
    (void)t;
    return ex_task_i64(*(int64_t *)arg);
}

ex_task_result body_mark(ex_task *t, void *arg) {
    (void)t;
    atomic_fetch_add((atomic_int *)arg, 1);
    return ex_task_i64(5);
}

typedef struct gate_op {
    ex_operation base;
    ex_receiver r;
    gate *g;
} gate_op;

typedef struct gate_sender {
    ex_sender base;
    gate *g;
} gate_sender;

static void gate_start(ex_operation *op) {
    gate_op *o = (gate_op *)op;
    atomic_store(&o->g->op, o);
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

ex_sender *gate_sender_new(gate *g) {
    gate_sender *s = (gate_sender *)ex_sender_alloc(&gate_vt, sizeof(gate_sender));
    if (!s) return ex_invalid_sender(EX_ENOMEM, "gate_sender_new");
    s->g = g;
    s->base.sigs.nvalues = 1;
    s->base.sigs.values[0] = sig_int;
    s->base.sigs.flags = 0;
    s->base.op_size = sizeof(gate_op);
    s->base.op_align = alignof(gate_op);
    return &s->base;
}

bool gate_wait(gate *g) {
    double deadline = test_now_s() + 20.0;
    while (!atomic_load(&g->op)) {
        if (test_now_s() > deadline) return false;
        sched_yield();
    }
    return true;
}

void gate_init(gate *g) {
    atomic_init(&g->op, NULL);
    atomic_init(&g->opened, 0);
}

void gate_open(gate *g, int64_t v) {
    gate_op *o = atomic_exchange(&g->op, NULL);
    atomic_fetch_add(&g->opened, 1);
    ex_value x = ex_int(v);
    ex_set_value(o->r, &x, 1);
}

void trec_setup(trec *tr, ex_scheduler sch, bool with_stop) {
    trec_init(tr);
    if (with_stop) rec_with_stop(&tr->r);
    rec_with_scheduler(&tr->r, sch);
}

ex_operation *start_with(ex_sender *s, trec *tr) {
    ex_operation *op = NULL;
    ex_error e = ex_connect_alloc(s, trec_receiver(tr), &op);
    ex_sender_release(s);
    cr_assert_eq(e.code, 0, "connect failed: %s", e.msg ? e.msg : "");
    ex_start(op);
    return op;
}

/* ------------------------------------------------ the exec_task_fork suite */

fork_state FS;

void reset_state(void) {
    ex_pool *p = FS.pool;
    memset(&FS, 0, sizeof FS);
    FS.pool = p;
    FS.home = test_thread_id();
}

bool on_home(void) { return FS.pool ? ex_pool_current_worker(FS.pool) >= 0 : test_thread_id() == FS.home; }

void use_pool(unsigned workers) {
    FS.pool = workers ? make_pool(workers) : NULL;
    FS.home = test_thread_id();
}

void drop_pool(void) {
    if (FS.pool) ex_pool_destroy(FS.pool);
    FS.pool = NULL;
}

ex_result run_on_pool(ex_sender *task) {
    return ex_sync_wait(FS.pool ? ex_starts_on(ex_pool_scheduler(FS.pool), task) : task);
}

ex_task_result pass_on(ex_await_result r) {
    if (r.status == EX_AWAIT_VALUE) return ex_task_values(r.n, r.v);
    if (r.status == EX_AWAIT_ERROR) return ex_task_with_error(r.error);
    return ex_task_stopped();
}

ex_task_result child_value(ex_task *t, void *arg) {
    (void)t;
    intptr_t i = (intptr_t)arg;
    atomic_fetch_add(&FS.runs[i & 15], 1);
    return ex_task_i64(10 * i + 1);
}
