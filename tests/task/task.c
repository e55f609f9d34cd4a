/* [task]: stackful coroutine tasks with scheduler affinity (cexec/task.h,
 * P3552 in C).
 *
 * Task bodies may run on pool workers, on a single_thread_context or on a
 * fiber of the main thread: they never assert (a Criterion assertion
 * long-jumps, which cannot leave a fiber or another thread).  They note
 * what they see in a `probe` (TCHECK) and the test asserts on it once the
 * task completed (EXPECT_PROBE).  Thread identity after an await is read
 * through out-of-line calls (test_thread_id, pthread_self,
 * ex_pool_current_worker): never a TLS address kept across ex_await. */
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/helpers.h"
#include "common/task_fixtures.h"

TEST_SUITE(exec_task, 60);


/* ------------------------------------------------------------- fixtures */

static const ex_sig sig_void = { 0, { 0 } };
static const ex_sig sig_int = { 1, { EX_T_INT } };

static const ex_key key_fwd = { "test.task.forwarding", true };
static const ex_key key_nofwd = { "test.task.non_forwarding", false };


static ex_result run(ex_sender *s) { return ex_sync_wait(s); }

static void expect_disp(ex_result *r, ex_disposition d) {
    cr_assert_eq(r->disposition, d, "expected disposition %d, got %d (%s)", d, r->disposition,
                 r->disposition == EX_DISP_ERROR && r->error.msg ? r->error.msg : "");
}

/* int -> int + 1 */
static ex_error add_one(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)n;
    out[0] = ex_int(in[0].as.i + 1);
    return ex_ok();
}

/* int -> error EX_EUSER + in */
static ex_error fail_with(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)n, (void)out;
    return ex_err(EX_EUSER + (int)in[0].as.i, "fail_with");
}

/* Counts its runs (ctx: atomic_int). */
static ex_error count_run(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    atomic_fetch_add((atomic_int *)ctx, 1);
    return ex_ok();
}

/* Records the pool worker it runs on (ctx: int[2] = {pool index seen, unused}). */
typedef struct where {
    ex_pool *pool;
    atomic_int worker;
} where;
static ex_error note_worker(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    where *w = ctx;
    atomic_store(&w->worker, ex_pool_current_worker(w->pool));
    return ex_ok();
}


/* A stack allocator that knows which blocks are live (thread-safe), to
 * ask whether an address still lies in a task's stack.  Freed blocks are
 * kept until reg_alloc_fini: a block reused by a later task would make a
 * finished task's address look live again. */
enum { REG_MAX = 256 };
typedef struct reg_alloc {
    ex_allocator base;
    pthread_mutex_t mu;
    uintptr_t lo[REG_MAX], hi[REG_MAX];
    long live;
    void *dead[REG_MAX];
    int ndead;
} reg_alloc;

static void *reg_allocate(void *ctx, size_t size, size_t align) {
    reg_alloc *a = ctx;
    void *p = NULL;
    if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size)) return NULL;
    pthread_mutex_lock(&a->mu);
    for (int i = 0; i < REG_MAX; i++)
        if (!a->lo[i]) {
            a->lo[i] = (uintptr_t)p;
            a->hi[i] = (uintptr_t)p + size;
            a->live++;
            break;
        }
    pthread_mutex_unlock(&a->mu);
    return p;
}

static void reg_deallocate(void *ctx, void *p, size_t size, size_t align) {
    (void)size, (void)align;
    reg_alloc *a = ctx;
    pthread_mutex_lock(&a->mu);
    for (int i = 0; i < REG_MAX; i++)
        if (a->lo[i] == (uintptr_t)p) {
            a->lo[i] = a->hi[i] = 0;
            a->live--;
            break;
        }
    bool keep = a->ndead < REG_MAX;
    if (keep) a->dead[a->ndead++] = p;
    pthread_mutex_unlock(&a->mu);
    if (!keep) free(p);
}

static void reg_alloc_fini(reg_alloc *a) {
    for (int i = 0; i < a->ndead; i++) free(a->dead[i]);
    a->ndead = 0;
    pthread_mutex_destroy(&a->mu);
}

static void reg_alloc_init(reg_alloc *a) {
    memset(a, 0, sizeof *a);
    pthread_mutex_init(&a->mu, NULL);
    a->base.allocate = reg_allocate;
    a->base.deallocate = reg_deallocate;
    a->base.ctx = a;
    a->base.name = "test.registry";
}

/* Whether addr lies in a live block. */
static bool reg_live(reg_alloc *a, uintptr_t addr) {
    bool live = false;
    pthread_mutex_lock(&a->mu);
    for (int i = 0; i < REG_MAX; i++)
        if (a->lo[i] && addr >= a->lo[i] && addr < a->hi[i]) live = true;
    pthread_mutex_unlock(&a->mu);
    return live;
}

/* --------------------------------------------- a gate: a manual sender */

/* Completes with set_value(int) when gate_open is called, on the thread
 * that calls it.  Start publishes the operation. */
typedef struct gate {
    _Atomic(void *) op;
    atomic_int opened;
} gate;

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

static ex_sender *gate_sender_new(gate *g) {
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

/* Waits (bounded) until an operation of g was started; false on timeout. */
static bool gate_wait(gate *g) {
    double deadline = test_now_s() + 20.0;
    while (!atomic_load(&g->op)) {
        if (test_now_s() > deadline) return false;
        sched_yield();
    }
    return true;
}

static void gate_open(gate *g, int64_t v) {
    gate_op *o = atomic_exchange(&g->op, NULL);
    atomic_fetch_add(&g->opened, 1);
    ex_value x = ex_int(v);
    ex_set_value(o->r, &x, 1);
}

/* ------------------------- a sender that completes elsewhere during start */

/* Start posts its completion to `sch` and returns only after the
 * completion call returned: the completion certainly happens on another
 * thread before the awaiting fiber could switch away. */
typedef struct remote_op {
    ex_operation base;
    ex_receiver r;
    ex_work w;
    ex_scheduler sch;
    int64_t v;
    atomic_int done;
} remote_op;

typedef struct remote_sender {
    ex_sender base;
    ex_scheduler sch;
    int64_t v;
} remote_sender;

static void remote_execute(ex_work *w) {
    remote_op *o = (remote_op *)((char *)w - offsetof(remote_op, w));
    ex_value x = ex_int(o->v);
    ex_set_value(o->r, &x, 1);
    atomic_store(&o->done, 1);  /* safe here: start still runs, the op is alive */
}

static void remote_start(ex_operation *op) {
    remote_op *o = (remote_op *)op;
    if (ex_post(o->sch, &o->w).code) {
        ex_set_error(o->r, ex_err(EX_EUSER, "remote: post refused"));
        return;
    }
    while (!atomic_load(&o->done)) sched_yield();
}

static const ex_operation_vtable remote_op_vt = { remote_start, NULL };

static ex_error remote_connect(const ex_sender *s, ex_receiver r, void *storage) {
    const remote_sender *rs = (const remote_sender *)s;
    remote_op *o = storage;
    o->base.vt = &remote_op_vt;
    o->r = r;
    o->w = (ex_work){ NULL, remote_execute, remote_execute };
    o->sch = rs->sch;
    o->v = rs->v;
    atomic_init(&o->done, 0);
    return ex_ok();
}

static const ex_sender_vtable remote_vt = { "test.remote", remote_connect, NULL, NULL };

static ex_sender *remote_sender_new(ex_scheduler sch, int64_t v) {
    remote_sender *s = (remote_sender *)ex_sender_alloc(&remote_vt, sizeof(remote_sender));
    if (!s) return ex_invalid_sender(EX_ENOMEM, "remote_sender_new");
    s->sch = sch;
    s->v = v;
    s->base.sigs.nvalues = 1;
    s->base.sigs.values[0] = sig_int;
    s->base.sigs.flags = EX_SIGS_ERROR;
    s->base.op_size = sizeof(remote_op);
    s->base.op_align = alignof(remote_op);
    return &s->base;
}

/* ------------------------------- a sender that completes when stop is asked */

/* Completes with set_stopped from the stop callback of its receiver's
 * token (at once if stop was requested already); never otherwise. */
typedef struct stopwait_op {
    ex_operation base;
    ex_receiver r;
    ex_stop_callback cb;
} stopwait_op;

static void stopwait_fire(ex_stop_callback *cb) {
    stopwait_op *o = (stopwait_op *)((char *)cb - offsetof(stopwait_op, cb));
    ex_set_stopped(o->r);
}

static void stopwait_start(ex_operation *op) {
    stopwait_op *o = (stopwait_op *)op;
    ex_stop_callback_register(&o->cb, ex_get_stop_token(ex_receiver_env(o->r)), stopwait_fire);
}

static void stopwait_destroy(ex_operation *op) { ex_stop_callback_deregister(&((stopwait_op *)op)->cb); }

static const ex_operation_vtable stopwait_op_vt = { stopwait_start, stopwait_destroy };

static ex_error stopwait_connect(const ex_sender *s, ex_receiver r, void *storage) {
    (void)s;
    stopwait_op *o = storage;
    memset(o, 0, sizeof *o);
    o->base.vt = &stopwait_op_vt;
    o->r = r;
    return ex_ok();
}

static const ex_sender_vtable stopwait_vt = { "test.stopwait", stopwait_connect, NULL, NULL };

static ex_sender *stopwait_sender_new(void) {
    ex_sender *s = ex_sender_alloc(&stopwait_vt, sizeof(ex_sender));
    if (!s) return ex_invalid_sender(EX_ENOMEM, "stopwait_sender_new");
    s->sigs.nvalues = 0;
    s->sigs.flags = EX_SIGS_STOPPED;
    s->op_size = sizeof(stopwait_op);
    s->op_align = alignof(stopwait_op);
    return s;
}

/* ------------------------------------------ a sender whose connect fails */

static ex_error refuse_connect(const ex_sender *s, ex_receiver r, void *storage) {
    (void)s, (void)r, (void)storage;
    return ex_err(EX_EUSER + 7, "test.refuse: connect refused");
}

static const ex_sender_vtable refuse_vt = { "test.refuse", refuse_connect, NULL, NULL };

static ex_sender *refuse_sender_new(void) {
    ex_sender *s = ex_sender_alloc(&refuse_vt, sizeof(ex_sender));
    cr_assert_not_null(s);
    s->sigs.nvalues = 1;
    s->sigs.values[0] = sig_int;
    s->op_size = 64;
    s->op_align = alignof(max_align_t);
    return s;
}

/* ------------------------- a scheduler without post/dispatch (a wrapper) */

/* Forwards schedule to `under`; no post, no dispatch.  The big variant
 * declares a schedule operation larger than EX_SCHEDULE_OP_INLINE (as a
 * scheduler may: ex_on allocates for those). */
typedef struct wrap_sched {
    ex_scheduler under;
    atomic_int schedules;
} wrap_sched;

static ex_error wrap_connect(void *self, ex_receiver r, void *storage) {
    wrap_sched *w = self;
    atomic_fetch_add(&w->schedules, 1);
    return ex_connect_schedule(w->under, r, storage);
}

static ex_scheduler_vtable wrap_vt_small, wrap_vt_big;

static ex_scheduler wrap_scheduler(wrap_sched *w, ex_scheduler under, bool big) {
    w->under = under;
    atomic_init(&w->schedules, 0);
    ex_scheduler_vtable *vt = big ? &wrap_vt_big : &wrap_vt_small;
    memset(vt, 0, sizeof *vt);
    vt->name = big ? "test.wrap_big" : "test.wrap";
    vt->schedule_op_size = big ? 4 * EX_SCHEDULE_OP_INLINE : under.vt->schedule_op_size;
    vt->schedule_op_align = under.vt->schedule_op_align;
    vt->schedule_flags = under.vt->schedule_flags;
    vt->connect_schedule = wrap_connect;
    vt->progress = under.vt->progress;
    ex_scheduler s = { vt, w };
    return s;
}

/* A recording receiver that can be completed on any thread, with a
 * scheduler and a stop source in its environment. */
static void trec_setup(trec *tr, ex_scheduler sch, bool with_stop) {
    trec_init(tr);
    if (with_stop) rec_with_stop(&tr->r);
    rec_with_scheduler(&tr->r, sch);
}

/* Connects s (consumed) to tr with storage from the environment's
 * allocator and starts it. */
static ex_operation *start_with(ex_sender *s, trec *tr) {
    ex_operation *op = NULL;
    ex_error e = ex_connect_alloc(s, trec_receiver(tr), &op);
    ex_sender_release(s);
    cr_assert_eq(e.code, 0, "connect failed: %s", e.msg ? e.msg : "");
    ex_start(op);
    return op;
}

/* ================================================================ results */

static ex_task_result body_void(ex_task *t, void *arg) {
    (void)t, (void)arg;
    return ex_task_void();
}

static ex_task_result body_i64(ex_task *t, void *arg) {
    (void)t;
    return ex_task_i64(*(int64_t *)arg);
}

static ex_task_result body_several(ex_task *t, void *arg) {
    (void)t, (void)arg;
    ex_value v[4] = { ex_int(-3), ex_double(2.5), ex_str("four"), ex_bool(true) };
    return ex_task_values(4, v);
}

static ex_task_result body_max_arity(ex_task *t, void *arg) {
    (void)t, (void)arg;
    ex_value v[EX_MAX_ARITY];
    for (int i = 0; i < EX_MAX_ARITY; i++) v[i] = ex_int(i * 10);
    return ex_task_values(EX_MAX_ARITY, v);
}

static ex_task_result body_too_many(ex_task *t, void *arg) {
    (void)t, (void)arg;
    ex_value v[EX_MAX_ARITY + 1];
    for (int i = 0; i <= EX_MAX_ARITY; i++) v[i] = ex_int(i);
    return ex_task_values(EX_MAX_ARITY + 1, v);
}

static ex_task_result body_value_double(ex_task *t, void *arg) {
    (void)t, (void)arg;
    return ex_task_value(ex_double(0.25));
}

static int error_payload;
static ex_task_result body_error(ex_task *t, void *arg) {
    (void)t, (void)arg;
    return ex_task_with_error(ex_err_data(EX_EUSER + 42, "body_error: it failed", &error_payload));
}

static ex_task_result body_stopped(ex_task *t, void *arg) {
    (void)t, (void)arg;
    return ex_task_stopped();
}

Test(exec_task, completes_with_no_value) {
    ex_result r = run(ex_task_create(body_void, NULL, NULL));
    expect_disp(&r, EX_DISP_VALUE);
    cr_assert_eq(r.n, 0);
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(exec_task, completes_with_one_value_i64) {
    int64_t x = 42;
    ex_result r = run(ex_task_create(body_i64, &x, NULL));
    expect_value_int(&r, 42);
    x = INT64_MIN;
    r = run(ex_task_create(body_i64, &x, NULL));
    expect_value_int(&r, INT64_MIN);
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(exec_task, completes_with_several_values) {
    ex_result r = run(ex_task_create(body_several, NULL, NULL));
    expect_disp(&r, EX_DISP_VALUE);
    cr_assert_eq(r.n, 4);
    cr_assert_eq(r.values[0].type, EX_T_INT);
    cr_assert_eq(r.values[0].as.i, -3);
    cr_assert_eq(r.values[1].type, EX_T_DOUBLE);
    cr_assert_float_eq(r.values[1].as.d, 2.5, 0);
    cr_assert_eq(r.values[2].type, EX_T_STR);
    cr_assert_str_eq(r.values[2].as.s, "four");
    cr_assert_eq(r.values[3].type, EX_T_BOOL);
    cr_assert(r.values[3].as.b);
    ex_result_destroy(&r);

    r = run(ex_task_create(body_max_arity, NULL, NULL));
    expect_disp(&r, EX_DISP_VALUE);
    cr_assert_eq(r.n, EX_MAX_ARITY);
    for (int i = 0; i < EX_MAX_ARITY; i++) cr_assert_eq(r.values[i].as.i, i * 10);
    ex_result_destroy(&r);

    r = run(ex_task_create(body_value_double, NULL, NULL));
    expect_disp(&r, EX_DISP_VALUE);
    cr_assert_eq(r.n, 1);
    cr_assert_eq(r.values[0].type, EX_T_DOUBLE);
    cr_assert_float_eq(r.values[0].as.d, 0.25, 0);
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(exec_task, task_values_helpers_build_results) {
    ex_value v[2] = { ex_int(1), ex_str("x") };
    ex_task_result a = ex_task_values(2, v);
    cr_assert_eq(a.kind, EX_TASK_VALUE);
    cr_assert_eq(a.n, 2);
    cr_assert_eq(a.v[0].as.i, 1);
    cr_assert_str_eq(a.v[1].as.s, "x");
    ex_task_result b = ex_task_void();
    cr_assert_eq(b.kind, EX_TASK_VALUE);
    cr_assert_eq(b.n, 0);
    ex_task_result c = ex_task_i64(-9);
    cr_assert_eq(c.kind, EX_TASK_VALUE);
    cr_assert_eq(c.n, 1);
    cr_assert_eq(c.v[0].type, EX_T_INT);
    cr_assert_eq(c.v[0].as.i, -9);
    ex_task_result d = ex_task_with_error(ex_err(EX_EUSER + 1, "d"));
    cr_assert_eq(d.kind, EX_TASK_ERROR);
    cr_assert_eq(d.error.code, EX_EUSER + 1);
    cr_assert_str_eq(d.error.msg, "d");
    ex_task_result e = ex_task_stopped();
    cr_assert_eq(e.kind, EX_TASK_STOPPED);
    ex_value many[EX_MAX_ARITY + 1];
    for (int i = 0; i <= EX_MAX_ARITY; i++) many[i] = ex_int(i);
    ex_task_result f = ex_task_values(EX_MAX_ARITY + 1, many);
    cr_assert_eq(f.kind, EX_TASK_ERROR, "more than EX_MAX_ARITY values must be refused");
    cr_assert_eq(f.error.code, EX_EINVAL);
    expect_no_leaks();
}

Test(exec_task, too_many_values_complete_with_einval) {
    ex_result r = run(ex_task_create(body_too_many, NULL, NULL));
    expect_error(&r, EX_EINVAL);
    expect_no_leaks();
}

Test(exec_task, with_error_completes_set_error_with_the_same_error) {
    ex_result r = run(ex_task_create(body_error, NULL, NULL));
    expect_error(&r, EX_EUSER + 42);
    cr_assert_str_eq(r.error.msg, "body_error: it failed");
    cr_assert_eq(r.error.data, &error_payload);

    /* The same through a raw receiver. */
    rec rc;
    rec_init(&rc);
    rec_with_scheduler(&rc, ex_inline_scheduler());
    ex_sender *s = ex_task_create(body_error, NULL, NULL);
    ex_operation *op = run_start(s, &rc);
    cr_assert_eq(rc.errors, 1);
    cr_assert_eq(rec_total(&rc), 1);
    cr_assert_eq(rc.err.code, EX_EUSER + 42);
    cr_assert_str_eq(rc.err.msg, "body_error: it failed");
    cr_assert_eq(rc.err.data, &error_payload);
    run_destroy(op);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_task, task_stopped_completes_set_stopped) {
    ex_result r = run(ex_task_create(body_stopped, NULL, NULL));
    expect_disp(&r, EX_DISP_STOPPED);
    rec rc;
    rec_init(&rc);
    rec_with_scheduler(&rc, ex_inline_scheduler());
    ex_sender *s = ex_task_create(body_stopped, NULL, NULL);
    ex_operation *op = run_start(s, &rc);
    cr_assert_eq(rc.stops, 1);
    cr_assert_eq(rec_total(&rc), 1);
    run_destroy(op);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_task, value_sig_gives_the_completion_signatures) {
    ex_task_options o;
    memset(&o, 0, sizeof o);
    o.value_sig = &sig_int;
    ex_sender *s = ex_task_create(body_i64, NULL, &o);
    cr_assert_eq(ex_sender_status(s).code, 0);
    const ex_sigs *sg = ex_sender_sigs(s);
    cr_assert_eq(sg->nvalues, 1);
    cr_assert_eq(sg->values[0].arity, 1);
    cr_assert_eq(sg->values[0].types[0], EX_T_INT);
    cr_assert(sg->flags & EX_SIGS_ERROR);
    cr_assert(sg->flags & EX_SIGS_STOPPED);
    cr_assert_not(sg->flags & EX_SIGS_DYNAMIC);
    ex_sender_release(s);

    s = ex_task_create(body_i64, NULL, NULL);
    sg = ex_sender_sigs(s);
    cr_assert(sg->flags & EX_SIGS_DYNAMIC, "no value_sig: the values are dynamic");
    cr_assert(sg->flags & EX_SIGS_ERROR);
    cr_assert(sg->flags & EX_SIGS_STOPPED);
    ex_sender_release(s);

    /* A typed task composes with then. */
    int64_t x = 41;
    ex_result r = run(ex_then(ex_task_create(body_i64, &x, &o), add_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)));
    expect_value_int(&r, 42);
    expect_no_leaks();
}

/* ====================================================== creation errors */

Test(exec_task, create_rejects_bad_arguments) {
    ex_sender *s = ex_task_create(NULL, NULL, NULL);
    cr_assert_not_null(s, "ex_task_create never returns NULL");
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    ex_result r = run(s);
    expect_error(&r, EX_EINVAL);

    ex_task_options o;
    memset(&o, 0, sizeof o);
    o.affinity = (ex_task_affinity)7;
    s = ex_task_create(body_void, NULL, &o);
    cr_assert_not_null(s);
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL, "a bad affinity is EX_EINVAL");
    ex_sender_release(s);

    memset(&o, 0, sizeof o);
    o.stack_size = 100;
    s = ex_task_create(body_void, NULL, &o);
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL, "a tiny stack is EX_EINVAL");
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_task, create_out_of_memory_gives_an_enomem_sender) {
    test_alloc_fail_at(1);
    ex_sender *s = ex_task_create(body_void, NULL, NULL);
    cr_assert_not_null(s);
    cr_assert_eq(ex_sender_status(s).code, EX_ENOMEM);
    ex_result r = run(s);
    expect_error(&r, EX_ENOMEM);
    expect_no_leaks();
}

/* ================================================ laziness, single shot */

static ex_task_result body_mark(ex_task *t, void *arg) {
    (void)t;
    atomic_fetch_add((atomic_int *)arg, 1);
    return ex_task_i64(5);
}

Test(exec_task, lazy_nothing_runs_before_start) {
    atomic_int ran = 0;
    cnt_alloc stacks;
    cnt_alloc_init(&stacks);
    ex_task_options o;
    memset(&o, 0, sizeof o);
    o.stack_allocator = &stacks.base;
    ex_sender *s = ex_task_create(body_mark, &ran, &o);
    cr_assert_eq(atomic_load(&ran), 0, "creating a task must not run it");
    rec rc;
    rec_init(&rc);
    rec_with_scheduler(&rc, ex_inline_scheduler());
    _Alignas(max_align_t) unsigned char buf[4096];
    cr_assert_leq(ex_sender_op_size(s), sizeof buf);
    ex_operation *op;
    cr_assert_eq(ex_connect(s, rec_receiver(&rc), buf, sizeof buf, &op).code, 0);
    cr_assert_eq(atomic_load(&ran), 0, "connecting a task must not run it");
    cr_assert_eq(atomic_load(&stacks.allocs), 0, "connecting a task must not take its stack");
    cr_assert_eq(rec_total(&rc), 0);
    ex_start(op);
    cr_assert_eq(atomic_load(&ran), 1);
    cr_assert_eq(rc.values, 1);
    cr_assert_eq(rc.v[0].as.i, 5);
    cr_assert_eq(atomic_load(&stacks.allocs), 1);
    cr_assert_eq(atomic_load(&stacks.in_use), 0, "the stack is returned when the task completes");
    ex_operation_destroy(op);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_task, created_but_never_connected_leaks_nothing) {
    atomic_int ran = 0;
    ex_sender_release(ex_task_create(body_mark, &ran, NULL));
    ex_task_options o;
    memset(&o, 0, sizeof o);
    o.affinity = EX_TASK_INLINE;
    o.stack_size = 32768;
    ex_sender_release(ex_task_create(body_mark, &ran, &o));
    cr_assert_eq(atomic_load(&ran), 0);
    expect_no_leaks();
}

Test(exec_task, connected_but_never_started_leaks_nothing) {
    atomic_int ran = 0;
    cnt_alloc stacks, frames;
    cnt_alloc_init(&stacks);
    cnt_alloc_init(&frames);
    ex_task_options o;
    memset(&o, 0, sizeof o);
    o.stack_allocator = &stacks.base;
    o.allocator = &frames.base;

    /* caller storage */
    ex_sender *s = ex_task_create(body_mark, &ran, &o);
    rec rc;
    rec_init(&rc);
    rec_with_scheduler(&rc, ex_inline_scheduler());
    _Alignas(max_align_t) unsigned char buf[4096];
    ex_operation *op;
    cr_assert_eq(ex_connect(s, rec_receiver(&rc), buf, sizeof buf, &op).code, 0);
    ex_operation_destroy(op);
    ex_sender_release(s);

    /* storage from the environment's allocator */
    s = ex_task_create(body_mark, &ran, &o);
    cr_assert_eq(ex_connect_alloc(s, rec_receiver(&rc), &op).code, 0);
    ex_operation_free(op);
    ex_sender_release(s);

    cr_assert_eq(atomic_load(&ran), 0);
    cr_assert_eq(rec_total(&rc), 0);
    cr_assert_eq(atomic_load(&stacks.allocs), 0);
    cr_assert_eq(atomic_load(&frames.in_use), 0);
    expect_no_leaks();
}

Test(exec_task, second_connect_is_einval) {
    atomic_int ran = 0;
    ex_sender *s = ex_task_create(body_mark, &ran, NULL);
    ex_result r = run(ex_sender_retain(s));
    expect_value_int(&r, 5);
    r = run(ex_sender_retain(s));
    expect_error(&r, EX_EINVAL);
    cr_assert_eq(atomic_load(&ran), 1, "a task runs once");
    ex_sender_release(s);

    /* Two connects before any start: the second fails, the first still runs. */
    s = ex_task_create(body_mark, &ran, NULL);
    rec a, b;
    rec_init(&a);
    rec_init(&b);
    rec_with_scheduler(&a, ex_inline_scheduler());
    rec_with_scheduler(&b, ex_inline_scheduler());
    _Alignas(max_align_t) unsigned char buf1[4096], buf2[4096];
    ex_operation *op1, *op2;
    cr_assert_eq(ex_connect(s, rec_receiver(&a), buf1, sizeof buf1, &op1).code, 0);
    cr_assert_eq(ex_connect(s, rec_receiver(&b), buf2, sizeof buf2, &op2).code, EX_EINVAL);
    ex_start(op1);
    cr_assert_eq(a.values, 1);
    cr_assert_eq(a.v[0].as.i, 5);
    cr_assert_eq(rec_total(&b), 0);
    cr_assert_eq(atomic_load(&ran), 2);
    ex_operation_destroy(op1);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_task, no_scheduler_in_the_receiver_env_is_einval) {
    atomic_int ran = 0;
    ex_sender *s = ex_task_create(body_mark, &ran, NULL);
    rec rc;
    rec_init(&rc);  /* empty environment */
    _Alignas(max_align_t) unsigned char buf[4096];
    ex_operation *op;
    ex_error e = ex_connect(s, rec_receiver(&rc), buf, sizeof buf, &op);
    cr_assert_eq(e.code, EX_EINVAL);
    cr_assert_not_null(e.msg);
    cr_assert_eq(atomic_load(&ran), 0);
    cr_assert_eq(rec_total(&rc), 0);
    /* A refused connect did not use up the task. */
    ex_result r = run(s);
    expect_value_int(&r, 5);
    cr_assert_eq(atomic_load(&ran), 1);
    expect_no_leaks();
}

Test(exec_task, inline_affinity_needs_no_scheduler) {
    atomic_int ran = 0;
    ex_task_options o;
    memset(&o, 0, sizeof o);
    o.affinity = EX_TASK_INLINE;
    ex_sender *s = ex_task_create(body_mark, &ran, &o);
    rec rc;
    rec_init(&rc);  /* empty environment */
    _Alignas(max_align_t) unsigned char buf[4096];
    ex_operation *op;
    cr_assert_eq(ex_connect(s, rec_receiver(&rc), buf, sizeof buf, &op).code, 0);
    ex_start(op);
    cr_assert_eq(rc.values, 1, "an inline task without awaits completes inside start");
    cr_assert_eq(rc.v[0].as.i, 5);
    cr_assert_eq(rc.thread, test_thread_id());
    ex_operation_destroy(op);
    ex_sender_release(s);
    expect_no_leaks();
}

/* ============================================================ awaiting */

static ex_task_result body_await_just(ex_task *t, void *arg) {
    (void)arg;
    ex_await_result r = ex_await(t, ex_just());
    TCHECK(r.status == EX_AWAIT_VALUE);
    TCHECK(r.n == 0);
    r = ex_await(t, ex_just(ex_int(7)));
    TCHECK(r.status == EX_AWAIT_VALUE && r.n == 1 && r.v[0].type == EX_T_INT && r.v[0].as.i == 7);
    r = ex_await(t, ex_just(ex_int(1), ex_double(2.5), ex_str("three"), ex_uint(4), ex_bool(false)));
    TCHECK(r.status == EX_AWAIT_VALUE && r.n == 5);
    TCHECK(r.v[0].as.i == 1 && r.v[1].as.d == 2.5 && strcmp(r.v[2].as.s, "three") == 0 && r.v[3].as.u == 4 &&
           r.v[4].type == EX_T_BOOL && !r.v[4].as.b);
    int64_t sum = r.v[0].as.i + (int64_t)r.v[3].as.u;
    return ex_task_i64(sum);
}

Test(exec_task, await_just_gives_zero_one_and_several_values) {
    ex_result r = run(ex_task_create(body_await_just, NULL, NULL));
    expect_value_int(&r, 5);
    EXPECT_PROBE();
    expect_no_leaks();
}

static ex_sender *lv_times3(void *ctx, const ex_value *in, size_t n) {
    (void)ctx, (void)n;
    return ex_then(ex_just(ex_int(in[0].as.i * 3)), add_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
}

static ex_sender *le_recover(void *ctx, ex_error e) {
    (void)ctx;
    return ex_just(ex_int(e.code));
}

static ex_task_result body_await_chains(ex_task *t, void *arg) {
    (void)arg;
    /* then */
    ex_await_result r = ex_await(t, ex_then(ex_just(ex_int(20)), add_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)));
    TCHECK(r.status == EX_AWAIT_VALUE && r.n == 1 && r.v[0].as.i == 21);
    /* then failing */
    r = ex_await(t, ex_then(ex_just(ex_int(3)), fail_with, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)));
    TCHECK(r.status == EX_AWAIT_ERROR && r.error.code == EX_EUSER + 3);
    TCHECK(r.error.msg && strcmp(r.error.msg, "fail_with") == 0);
    TCHECK(!ex_task_is_stopped(t));
    /* let_value */
    r = ex_await(t, ex_let_value(ex_just(ex_int(5)), lv_times3, NULL, EX_SIG(EX_T_INT)));
    TCHECK(r.status == EX_AWAIT_VALUE && r.n == 1 && r.v[0].as.i == 16);
    /* let_error recovering */
    r = ex_await(t, ex_let_error(ex_just_error(ex_err(EX_EUSER + 9, "x")), le_recover, NULL));
    TCHECK(r.status == EX_AWAIT_VALUE && r.n == 1 && r.v[0].as.i == EX_EUSER + 9);
    /* just_error */
    static int payload;
    r = ex_await(t, ex_just_error(ex_err_data(EX_EUSER + 4, "just_error", &payload)));
    TCHECK(r.status == EX_AWAIT_ERROR && r.error.code == EX_EUSER + 4 && r.error.data == &payload);
    TCHECK(!ex_task_is_stopped(t));
    /* when_all values */
    r = ex_await(t, ex_when_all(ex_just(ex_int(1)), ex_just(), ex_just(ex_int(2), ex_int(3))));
    TCHECK(r.status == EX_AWAIT_VALUE && r.n == 3 && r.v[0].as.i == 1 && r.v[1].as.i == 2 && r.v[2].as.i == 3);
    /* when_all error */
    r = ex_await(t, ex_when_all(ex_just(ex_int(1)), ex_just_error(ex_err(EX_EUSER + 5, "wa"))));
    TCHECK(r.status == EX_AWAIT_ERROR && r.error.code == EX_EUSER + 5);
    /* a chain after all that still works */
    r = ex_await(t, ex_then(ex_let_value(ex_just(ex_int(1)), lv_times3, NULL, EX_SIG(EX_T_INT)), add_one, NULL,
                            EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)));
    TCHECK(r.status == EX_AWAIT_VALUE && r.v[0].as.i == 5);
    return ex_task_i64(r.v[0].as.i);
}

Test(exec_task, await_then_let_when_all_chains) {
    ex_result r = run(ex_task_create(body_await_chains, NULL, NULL));
    expect_value_int(&r, 5);
    EXPECT_PROBE();
    expect_no_leaks();
}

typedef struct connect_err_arg {
    ex_sender *used_task;  /* connected before */
} connect_err_arg;

static ex_task_result body_await_connect_errors(ex_task *t, void *arg) {
    connect_err_arg *a = arg;
    ex_await_result r = ex_await(t, refuse_sender_new());
    TCHECK(r.status == EX_AWAIT_ERROR);
    TCHECK(r.error.code == EX_EUSER + 7);
    TCHECK(!ex_task_is_stopped(t));
    r = ex_await(t, a->used_task);  /* a task connected before: EX_EINVAL at connect */
    TCHECK(r.status == EX_AWAIT_ERROR && r.error.code == EX_EINVAL);
    r = ex_await(t, NULL);
    TCHECK(r.status == EX_AWAIT_ERROR && r.error.code == EX_EINVAL);
    r = ex_await(t, ex_invalid_sender(EX_EUSER + 8, "invalid on purpose"));
    TCHECK(r.status == EX_AWAIT_ERROR && r.error.code == EX_EUSER + 8);
    r = ex_await(t, ex_just(ex_int(3)));
    TCHECK(r.status == EX_AWAIT_VALUE && r.v[0].as.i == 3);
    return ex_task_i64(3);
}

Test(exec_task, await_of_a_connect_error_is_an_await_error) {
    connect_err_arg a;
    a.used_task = ex_task_create(body_void, NULL, NULL);
    ex_result r = run(ex_sender_retain(a.used_task));
    expect_disp(&r, EX_DISP_VALUE);
    r = run(ex_task_create(body_await_connect_errors, &a, NULL));
    expect_value_int(&r, 3);
    EXPECT_PROBE();
    expect_no_leaks();
}

/* A borrowed tuple stays valid until the next await. */
static ex_task_result body_tuple(ex_task *t, void *arg) {
    (void)arg;
    ex_await_result r = ex_await(t, ex_into_variant(ex_just(ex_int(11), ex_str("b"))));
    TCHECK(r.status == EX_AWAIT_VALUE && r.n == 1 && r.v[0].type == EX_T_TUPLE);
    const ex_tuple *tp = r.v[0].as.tuple;
    TCHECK(tp->n == 2 && tp->v[0].as.i == 11 && strcmp(tp->v[1].as.s, "b") == 0);
    int64_t x = tp->v[0].as.i;
    r = ex_await(t, ex_just(ex_int(x + 1)));
    return ex_task_i64(r.v[0].as.i);
}

Test(exec_task, await_tuple_values_are_readable_until_the_next_await) {
    ex_result r = run(ex_task_create(body_tuple, NULL, NULL));
    expect_value_int(&r, 12);
    EXPECT_PROBE();
    expect_no_leaks();
}

/* The body returns what its last await gave, a tuple: readable "when the
 * body returns them, until the task's completion has been delivered". */
static ex_task_result body_return_borrowed_tuple(ex_task *t, void *arg) {
    (void)arg;
    ex_await_result r = ex_await(t, ex_into_variant(ex_just(ex_int(31), ex_int(32))));
    if (r.status != EX_AWAIT_VALUE) return ex_task_with_error(r.error);
    return ex_task_values(r.n, r.v);
}

Test(exec_task, returned_values_borrowed_from_the_last_await_survive_completion) {
    cnt_alloc frames;
    cnt_alloc_init(&frames);
    frames.scribble = true;  /* freed memory is overwritten: a dangling tuple shows */
    ex_task_options o;
    memset(&o, 0, sizeof o);
    o.allocator = &frames.base;
    ex_result r = run(ex_task_create(body_return_borrowed_tuple, NULL, &o));
    expect_disp(&r, EX_DISP_VALUE);
    cr_assert_eq(r.n, 1);
    cr_assert_eq(r.values[0].type, EX_T_TUPLE);
    const ex_tuple *tp = r.values[0].as.tuple;
    cr_assert_eq(tp->n, 2, "the tuple was freed before the task completed");
    cr_assert_eq(tp->v[0].as.i, 31);
    cr_assert_eq(tp->v[1].as.i, 32);
    ex_result_destroy(&r);
    cr_assert_eq(atomic_load(&frames.in_use), 0);
    expect_no_leaks();
}

/* ------------------------------------ where the awaited operation lives */

/* A sender with an operation of a chosen size that completes inline with
 * set_value(int v). */
typedef struct sized_op {
    ex_operation base;
    ex_receiver r;
    int64_t v;
} sized_op;

typedef struct sized_sender {
    ex_sender base;
    int64_t v;
} sized_sender;

static void sized_start(ex_operation *op) {
    sized_op *o = (sized_op *)op;
    ex_value x = ex_int(o->v);
    ex_set_value(o->r, &x, 1);
}

static const ex_operation_vtable sized_op_vt = { sized_start, NULL };

static ex_error sized_connect(const ex_sender *s, ex_receiver r, void *storage) {
    sized_op *o = storage;
    o->base.vt = &sized_op_vt;
    o->r = r;
    o->v = ((const sized_sender *)s)->v;
    memset(o + 1, 0x3c, s->op_size - sizeof *o);  /* the whole operation is ours */
    return ex_ok();
}

static const ex_sender_vtable sized_vt = { "test.sized", sized_connect, NULL, NULL };

static ex_sender *sized_sender_new(size_t op_size, int64_t v) {
    sized_sender *s = (sized_sender *)ex_sender_alloc(&sized_vt, sizeof(sized_sender));
    if (!s) return ex_invalid_sender(EX_ENOMEM, "sized_sender_new");
    s->v = v;
    s->base.sigs.nvalues = 1;
    s->base.sigs.values[0] = sig_int;
    s->base.op_size = op_size < sizeof(sized_op) ? sizeof(sized_op) : op_size;
    s->base.op_align = alignof(max_align_t);
    return &s->base;
}

/* Up to EX_TASK_AWAIT_INLINE bytes the awaited operation lives in the task
 * (no allocation): a task whose allocator fails everything still awaits;
 * a bigger one needs the allocator and reports EX_ENOMEM. */
static ex_task_result body_await_no_alloc(ex_task *t, void *arg) {
    (void)arg;
    ex_await_result r = ex_await(t, ex_just(ex_int(8)));
    TCHECK(r.status == EX_AWAIT_VALUE && r.v[0].as.i == 8);
    r = ex_await(t, ex_then(ex_just(ex_int(8)), add_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)));
    TCHECK(r.status == EX_AWAIT_VALUE && r.v[0].as.i == 9);
    r = ex_await(t, sized_sender_new(EX_TASK_AWAIT_INLINE, 10));
    TCHECK(r.status == EX_AWAIT_VALUE && r.v[0].as.i == 10);
    r = ex_await(t, sized_sender_new(EX_TASK_AWAIT_INLINE + 1, 11));
    TCHECK(r.status == EX_AWAIT_ERROR && r.error.code == EX_ENOMEM);
    TCHECK(!ex_task_is_stopped(t));
    r = ex_await(t, ex_just(ex_int(12)));
    TCHECK(r.status == EX_AWAIT_VALUE && r.v[0].as.i == 12);
    return ex_task_i64(r.v[0].as.i);
}

Test(exec_task, await_up_to_the_inline_size_allocates_nothing) {
    ex_fault_allocator f;
    ex_fault_allocator_init(&f, ex_libc_allocator());
    ex_fault_allocator_fail_randomly(&f, 1, 1000000);  /* every allocation fails */
    ex_task_options o;
    memset(&o, 0, sizeof o);
    o.allocator = ex_fault_allocator_get(&f);
    ex_result r = run(ex_task_create(body_await_no_alloc, NULL, &o));
    expect_value_int(&r, 12);
    EXPECT_PROBE();
    expect_no_leaks();
}

/* Bigger operations go into a buffer from the task's allocator that later
 * awaits reuse. */
static ex_task_result body_await_big(ex_task *t, void *arg) {
    (void)arg;
    int64_t sum = 0;
    for (int i = 0; i < 100; i++) {
        ex_await_result r = ex_await(t, sized_sender_new(4 * EX_TASK_AWAIT_INLINE, i));
        TCHECK(r.status == EX_AWAIT_VALUE && r.v[0].as.i == i);
        sum += r.v[0].as.i;
        r = ex_await(t, ex_just(ex_int(i)));  /* small ones in between */
        TCHECK(r.status == EX_AWAIT_VALUE && r.v[0].as.i == i);
    }
    return ex_task_i64(sum);
}

Test(exec_task, big_await_operations_reuse_one_buffer) {
    cnt_alloc frames;
    cnt_alloc_init(&frames);
    ex_task_options o;
    memset(&o, 0, sizeof o);
    o.allocator = &frames.base;
    ex_result r = run(ex_task_create(body_await_big, NULL, &o));
    expect_value_int(&r, 99 * 100 / 2);
    EXPECT_PROBE();
    cr_assert_eq(atomic_load(&frames.allocs), 1, "100 awaits of the same big operation took %ld allocations",
                 atomic_load(&frames.allocs));
    cr_assert_eq(atomic_load(&frames.in_use), 0);
    expect_no_leaks();
}

/* --------------------------------------------- what awaited values point to */

/* Overwrites a good stretch of the stack below the caller. */
__attribute__((noinline)) static void scribble_stack(void) {
    volatile unsigned char junk[8192];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = 0xEE;
}

static ex_error make_pair(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)in, (void)n;
    out[0] = ex_int(61);
    out[1] = ex_int(62);
    return ex_ok();
}

typedef struct tuple_arg {
    ex_pool *pool;
    const char *str;
} tuple_arg;

static ex_task_result body_tuple_copies(ex_task *t, void *arg) {
    tuple_arg *a = arg;
    /* completed inline, on the task's stack */
    ex_await_result r = ex_await(t, ex_into_variant(ex_just(ex_int(51), ex_int(52))));
    TCHECK(r.status == EX_AWAIT_VALUE && r.n == 1 && r.v[0].type == EX_T_TUPLE);
    scribble_stack();
    const ex_tuple *tp = r.v[0].as.tuple;
    TCHECK(tp->n == 2 && tp->v[0].as.i == 51 && tp->v[1].as.i == 52);
    /* completed on a pool worker, on its stack */
    r = ex_await(t, ex_into_variant(ex_then(ex_schedule(ex_pool_scheduler(a->pool)), make_pair, NULL, EX_SIG0,
                                            EX_SIG(EX_T_INT, EX_T_INT))));
    TCHECK(r.status == EX_AWAIT_VALUE && r.n == 1 && r.v[0].type == EX_T_TUPLE);
    scribble_stack();
    tp = r.v[0].as.tuple;
    TCHECK(tp->n == 2 && tp->v[0].as.i == 61 && tp->v[1].as.i == 62);
    r = ex_await(t, ex_into_variant(ex_then(ex_schedule(ex_pool_scheduler(a->pool)), make_pair, NULL, EX_SIG0,
                                            EX_SIG(EX_T_INT, EX_T_INT))));
    for (int i = 0; i < 3; i++) scribble_stack();
    tp = r.v[0].as.tuple;
    TCHECK(r.status == EX_AWAIT_VALUE && tp->n == 2 && tp->v[0].as.i == 61 && tp->v[1].as.i == 62);
    int64_t first = tp->v[0].as.i;  /* tp is not read after the next await */
    /* strings and pointers are not copied */
    r = ex_await(t, ex_just(ex_str(a->str), ex_ptr(a)));
    TCHECK(r.status == EX_AWAIT_VALUE && r.n == 2 && r.v[0].as.s == a->str && r.v[1].as.p == (void *)a);
    return ex_task_i64(first);
}

Test(exec_task, awaited_tuples_are_deep_copied) {
    ex_pool *pool = make_pool(2);
    static const char text[] = "not copied";
    tuple_arg a = { pool, text };
    for (int k = 0; k < 20; k++) {
        ex_result r = run(ex_task_create(body_tuple_copies, &a, NULL));
        expect_value_int(&r, 61);
        EXPECT_PROBE();
    }
    ex_pool_destroy(pool);
    expect_no_leaks();
}

static ex_task_result body_tuple_enomem(ex_task *t, void *arg) {
    (void)arg;
    ex_await_result r = ex_await(t, ex_into_variant(ex_just(ex_int(1), ex_int(2))));
    TCHECK(r.status == EX_AWAIT_ERROR && r.error.code == EX_ENOMEM);
    TCHECK(!ex_task_is_stopped(t));
    return ex_task_i64(1);
}

Test(exec_task, awaited_tuple_copy_failure_is_enomem) {
    ex_fault_allocator f;
    ex_fault_allocator_init(&f, ex_libc_allocator());
    ex_fault_allocator_fail_randomly(&f, 1, 1000000);
    ex_task_options o;
    memset(&o, 0, sizeof o);
    o.allocator = ex_fault_allocator_get(&f);
    ex_result r = run(ex_task_create(body_tuple_enomem, NULL, &o));
    expect_value_int(&r, 1);
    EXPECT_PROBE();
    expect_no_leaks();
}

/* A completion on another thread while the awaited sender's start still
 * runs (before the task could suspend). */
typedef struct remote_arg {
    ex_scheduler other;
    const void *main_tid;
} remote_arg;

static ex_task_result body_remote(ex_task *t, void *arg) {
    remote_arg *a = arg;
    int64_t sum = 0;
    for (int i = 0; i < 50; i++) {
        ex_await_result r = ex_await(t, remote_sender_new(a->other, i));
        TCHECK(r.status == EX_AWAIT_VALUE && r.n == 1 && r.v[0].as.i == i);
        TCHECK(test_thread_id() == a->main_tid);
        sum += r.v[0].as.i;
    }
    return ex_task_i64(sum);
}

Test(exec_task, await_completing_elsewhere_during_start) {
    ex_single_thread_context stc;
    cr_assert_eq(ex_single_thread_context_init(&stc).code, 0);
    remote_arg a = { ex_single_thread_context_scheduler(&stc), test_thread_id() };
    ex_result r = run(ex_task_create(body_remote, &a, NULL));
    expect_value_int(&r, 49 * 50 / 2);
    EXPECT_PROBE();
    cr_assert_eq(ex_single_thread_context_destroy(&stc).code, 0);
    expect_no_leaks();
}

/* ============================================================= stopped */

typedef struct stop_arg {
    int ret_kind;  /* 0 value, 1 error, 2 void, 3 stopped */
    atomic_int ran;
    int st1, st2, st3;
    bool before, after;
} stop_arg;

static ex_task_result body_stopped_await(ex_task *t, void *arg) {
    stop_arg *a = arg;
    a->before = ex_task_is_stopped(t);
    ex_await_result r = ex_await(t, ex_just_stopped());
    a->st1 = (int)r.status;
    a->after = ex_task_is_stopped(t);
    /* Later awaits return stopped at once: their senders are released, not run. */
    r = ex_await(t, ex_then(ex_just(ex_int(1)), count_run, &a->ran, EX_SIG(EX_T_INT), EX_SIG0));
    a->st2 = (int)r.status;
    r = ex_await(t, ex_then(ex_schedule(ex_task_scheduler(t)), count_run, &a->ran, EX_SIG0, EX_SIG0));
    a->st3 = (int)r.status;
    switch (a->ret_kind) {
    case 0: return ex_task_i64(5);
    case 1: return ex_task_with_error(ex_err(EX_EUSER + 1, "ignored"));
    case 2: return ex_task_void();
    default: return ex_task_stopped();
    }
}

Test(exec_task, awaited_stopped_stops_the_task_whatever_the_body_returns) {
    for (int kind = 0; kind < 4; kind++) {
        stop_arg a;
        memset(&a, 0, sizeof a);
        a.ret_kind = kind;
        ex_result r = run(ex_task_create(body_stopped_await, &a, NULL));
        expect_disp(&r, EX_DISP_STOPPED);
        cr_assert_not(a.before);
        cr_assert_eq(a.st1, EX_AWAIT_STOPPED);
        cr_assert(a.after, "ex_task_is_stopped after a stopped await");
        cr_assert_eq(a.st2, EX_AWAIT_STOPPED, "a later await must return stopped at once");
        cr_assert_eq(a.st3, EX_AWAIT_STOPPED, "a later await must return stopped at once");
        cr_assert_eq(atomic_load(&a.ran), 0, "a later await must not run its sender");
        expect_no_leaks();
    }
}

Test(exec_task, awaited_stopped_stops_the_task_through_a_raw_receiver) {
    stop_arg a;
    memset(&a, 0, sizeof a);
    a.ret_kind = 0;
    ex_single_thread_context stc;
    cr_assert_eq(ex_single_thread_context_init(&stc).code, 0);
    trec tr;
    trec_setup(&tr, ex_single_thread_context_scheduler(&stc), false);
    ex_operation *op = start_with(ex_task_create(body_stopped_await, &a, NULL), &tr);
    cr_assert(wait_int(&tr.done));
    cr_assert_eq(tr.r.stops, 1);
    cr_assert_eq(rec_total(&tr.r), 1);
    ex_operation_free(op);
    cr_assert_eq(ex_single_thread_context_destroy(&stc).code, 0);
    cr_assert_eq(atomic_load(&a.ran), 0);
    expect_no_leaks();
}

typedef struct nest_arg {
    int depth;         /* this level */
    int status[4];     /* what each level's await returned */
    bool stopped[4];
    int leaf_kind;     /* 0: leaf awaits just_stopped; 1: leaf returns ex_task_stopped */
} nest_arg;

typedef struct nest_ctx {
    nest_arg *a;
    int level;
} nest_ctx;

static ex_task_result body_nest(ex_task *t, void *arg) {
    nest_ctx *c = arg;
    nest_arg *a = c->a;
    if (c->level == 3) {
        if (a->leaf_kind == 1) return ex_task_stopped();
        ex_await_result r = ex_await(t, ex_just_stopped());
        a->status[3] = (int)r.status;
        a->stopped[3] = ex_task_is_stopped(t);
        return ex_task_i64(3);
    }
    nest_ctx child = { a, c->level + 1 };
    ex_await_result r = ex_await(t, ex_task_create(body_nest, &child, NULL));
    a->status[c->level] = (int)r.status;
    a->stopped[c->level] = ex_task_is_stopped(t);
    if (c->level == 2) return ex_task_with_error(ex_err(EX_EUSER, "ignored"));
    return ex_task_i64(c->level);
}

Test(exec_task, stopped_propagates_through_nested_tasks) {
    for (int kind = 0; kind < 2; kind++) {
        nest_arg a;
        memset(&a, 0, sizeof a);
        for (int i = 0; i < 4; i++) a.status[i] = -1;
        a.leaf_kind = kind;
        nest_ctx top = { &a, 1 };
        ex_result r = run(ex_task_create(body_nest, &top, NULL));
        expect_disp(&r, EX_DISP_STOPPED);
        if (kind == 0) {
            cr_assert_eq(a.status[3], EX_AWAIT_STOPPED);
            cr_assert(a.stopped[3]);
        }
        cr_assert_eq(a.status[2], EX_AWAIT_STOPPED, "the middle task's await of the leaf");
        cr_assert(a.stopped[2]);
        cr_assert_eq(a.status[1], EX_AWAIT_STOPPED, "the top task's await of the middle");
        cr_assert(a.stopped[1]);
        expect_no_leaks();
    }
}

/* ======================================================= scheduler affinity */

typedef struct aff_arg {
    ex_pool *pool, *other_pool;
    ex_scheduler other;      /* where awaited work completes */
    const void *main_tid;
    pthread_t stc_thread;
    int rounds;
    atomic_int worker_seen;  /* the awaited work did run on the other pool */
} aff_arg;

static ex_task_result body_home_thread(ex_task *t, void *arg) {
    aff_arg *a = arg;
    TCHECK(test_thread_id() == a->main_tid);
    for (int i = 0; i < a->rounds; i++) {
        where w = { a->pool, -2 };
        ex_await_result r = ex_await(t, ex_then(ex_schedule(ex_pool_scheduler(a->pool)), note_worker, &w, EX_SIG0, EX_SIG0));
        TCHECK(r.status == EX_AWAIT_VALUE);
        TCHECK(atomic_load(&w.worker) >= 0);  /* the work ran on the pool */
        TCHECK(test_thread_id() == a->main_tid);
        TCHECK(ex_pool_current_worker(a->pool) == -1);
        r = ex_await(t, ex_schedule(a->other));
        TCHECK(r.status == EX_AWAIT_VALUE);
        TCHECK(test_thread_id() == a->main_tid);
    }
    return ex_task_i64(a->rounds);
}

Test(exec_task, sync_wait_task_resumes_on_the_calling_thread) {
    ex_pool *pool = make_pool(2);
    ex_single_thread_context stc;
    cr_assert_eq(ex_single_thread_context_init(&stc).code, 0);
    aff_arg a;
    memset(&a, 0, sizeof a);
    a.pool = pool;
    a.other = ex_single_thread_context_scheduler(&stc);
    a.main_tid = test_thread_id();
    a.rounds = 200;
    ex_result r = run(ex_task_create(body_home_thread, &a, NULL));
    expect_value_int(&r, 200);
    EXPECT_PROBE();
    cr_assert_eq(ex_single_thread_context_destroy(&stc).code, 0);
    ex_pool_destroy(pool);
    expect_no_leaks();
}

static ex_task_result body_pool_affine(ex_task *t, void *arg) {
    aff_arg *a = arg;
    TCHECK(ex_pool_current_worker(a->pool) >= 0);  /* starts on the task's scheduler */
    TCHECK(ex_scheduler_equal(ex_task_scheduler(t), ex_pool_scheduler(a->pool)));
    for (int i = 0; i < a->rounds; i++) {
        where w = { a->other_pool, -2 };
        ex_await_result r =
            ex_await(t, ex_then(ex_schedule(ex_pool_scheduler(a->other_pool)), note_worker, &w, EX_SIG0, EX_SIG0));
        TCHECK(r.status == EX_AWAIT_VALUE);
        TCHECK(atomic_load(&w.worker) >= 0);
        TCHECK(ex_pool_current_worker(a->pool) >= 0);
        TCHECK(ex_pool_current_worker(a->other_pool) == -1);
        r = ex_await(t, ex_schedule(a->other));
        TCHECK(r.status == EX_AWAIT_VALUE);
        TCHECK(ex_pool_current_worker(a->pool) >= 0);
        TCHECK(test_thread_id() != a->main_tid);
    }
    return ex_task_i64(a->rounds);
}

Test(exec_task, task_started_on_a_pool_resumes_on_its_workers) {
    ex_pool *pool = make_pool(2), *other = make_pool(2);
    ex_single_thread_context stc;
    cr_assert_eq(ex_single_thread_context_init(&stc).code, 0);
    aff_arg a;
    memset(&a, 0, sizeof a);
    a.pool = pool;
    a.other_pool = other;
    a.other = ex_single_thread_context_scheduler(&stc);
    a.main_tid = test_thread_id();
    a.rounds = 200;
    /* starts_on */
    ex_result r = run(ex_starts_on(ex_pool_scheduler(pool), ex_task_create(body_pool_affine, &a, NULL)));
    expect_value_int(&r, 200);
    EXPECT_PROBE();
    /* write_env get_scheduler: started on this thread, the body starts on the pool */
    r = run(ex_write_env(ex_task_create(body_pool_affine, &a, NULL), &ex_key_get_scheduler,
                         ex_sched_value(ex_pool_scheduler(pool))));
    expect_value_int(&r, 200);
    EXPECT_PROBE();
    cr_assert_eq(ex_single_thread_context_destroy(&stc).code, 0);
    ex_pool_destroy(other);
    ex_pool_destroy(pool);
    expect_no_leaks();
}

/* Deterministic suspend-then-foreign-completion: the task on a
 * single_thread_context awaits a gate the main thread opens. */
typedef struct gate_arg {
    gate *g;
    pthread_t home;
    int rounds;
    const void *resumed_tid;
    const void *start_tid;
} gate_arg;

static ex_task_result body_gate_affine(ex_task *t, void *arg) {
    gate_arg *a = arg;
    TCHECK(pthread_equal(pthread_self(), a->home));
    int64_t sum = 0;
    for (int i = 0; i < a->rounds; i++) {
        ex_await_result r = ex_await(t, gate_sender_new(a->g));
        TCHECK(r.status == EX_AWAIT_VALUE && r.n == 1 && r.v[0].as.i == i);
        TCHECK(pthread_equal(pthread_self(), a->home));
        sum += r.v[0].as.i;
    }
    return ex_task_i64(sum);
}

Test(exec_task, foreign_completion_resumes_on_the_task_scheduler) {
    ex_single_thread_context stc;
    cr_assert_eq(ex_single_thread_context_init(&stc).code, 0);
    gate g;
    atomic_init(&g.op, NULL);
    atomic_init(&g.opened, 0);
    gate_arg a = { &g, ex_single_thread_context_thread_id(&stc), 100, NULL, NULL };
    trec tr;
    trec_setup(&tr, ex_single_thread_context_scheduler(&stc), false);
    ex_operation *op = start_with(ex_task_create(body_gate_affine, &a, NULL), &tr);
    for (int i = 0; i < a.rounds; i++) {
        cr_assert(gate_wait(&g), "the task did not reach await %d", i);
        gate_open(&g, i);  /* completes on this (the main) thread */
    }
    cr_assert(wait_int(&tr.done));
    cr_assert_eq(tr.r.values, 1);
    cr_assert_eq(tr.r.v[0].as.i, 99 * 100 / 2);
    EXPECT_PROBE();
    ex_operation_free(op);
    cr_assert_eq(ex_single_thread_context_destroy(&stc).code, 0);
    expect_no_leaks();
}

/* EX_TASK_INLINE: the task resumes on the thread that completed the await. */
static ex_task_result body_gate_inline(ex_task *t, void *arg) {
    gate_arg *a = arg;
    a->start_tid = test_thread_id();
    TCHECK(ex_scheduler_equal(ex_task_scheduler(t), ex_inline_scheduler()));
    ex_await_result r = ex_await(t, gate_sender_new(a->g));
    TCHECK(r.status == EX_AWAIT_VALUE && r.v[0].as.i == 77);
    a->resumed_tid = test_thread_id();
    return ex_task_i64(r.v[0].as.i);
}

typedef struct opener {
    gate *g;
    const void *tid;
} opener;

static void *opener_main(void *p) {
    opener *o = p;
    o->tid = test_thread_id();
    gate_open(o->g, 77);
    return NULL;
}

Test(exec_task, inline_affinity_resumes_where_the_sender_completed) {
    gate g;
    atomic_init(&g.op, NULL);
    atomic_init(&g.opened, 0);
    gate_arg a;
    memset(&a, 0, sizeof a);
    a.g = &g;
    ex_task_options o;
    memset(&o, 0, sizeof o);
    o.affinity = EX_TASK_INLINE;
    ex_sender *s = ex_task_create(body_gate_inline, &a, &o);
    rec rc;
    rec_init(&rc);
    ex_operation *op = NULL;
    _Alignas(max_align_t) unsigned char buf[4096];
    cr_assert_eq(ex_connect(s, rec_receiver(&rc), buf, sizeof buf, &op).code, 0);
    ex_start(op);  /* runs the body up to the await, then returns */
    cr_assert_eq(a.start_tid, test_thread_id(), "an inline task starts where it is started");
    cr_assert_eq(rec_total(&rc), 0);
    cr_assert_not_null(atomic_load(&g.op));
    opener on = { &g, NULL };
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, opener_main, &on), 0);
    pthread_join(th, NULL);
    cr_assert_eq(rc.values, 1);
    cr_assert_eq(rc.v[0].as.i, 77);
    cr_assert_eq(a.resumed_tid, on.tid, "the inline task did not resume on the completing thread");
    cr_assert_eq(rc.thread, on.tid);
    EXPECT_PROBE();
    ex_operation_destroy(op);
    ex_sender_release(s);
    expect_no_leaks();
}

/* A scheduler without dispatch: every resumption goes through schedule. */
typedef struct wrap_arg {
    ex_pool *pool;
    pthread_t home;
    int rounds;
    atomic_int start_on_home;
} wrap_arg;

static ex_task_result body_wrap(ex_task *t, void *arg) {
    wrap_arg *a = arg;
    atomic_store(&a->start_on_home, pthread_equal(pthread_self(), a->home) ? 1 : -1);
    TCHECK(pthread_equal(pthread_self(), a->home));
    for (int i = 0; i < a->rounds; i++) {
        ex_await_result r = ex_await(t, ex_schedule(ex_pool_scheduler(a->pool)));
        TCHECK(r.status == EX_AWAIT_VALUE);
        TCHECK(pthread_equal(pthread_self(), a->home));
        r = ex_await(t, ex_just(ex_int(i)));  /* inline: no hop needed */
        TCHECK(r.status == EX_AWAIT_VALUE && r.v[0].as.i == i);
        TCHECK(pthread_equal(pthread_self(), a->home));
    }
    return ex_task_i64(a->rounds);
}

static void affinity_through_schedule(bool big) {
    ex_pool *pool = make_pool(2);
    ex_single_thread_context stc;
    cr_assert_eq(ex_single_thread_context_init(&stc).code, 0);
    wrap_sched w;
    ex_scheduler sch = wrap_scheduler(&w, ex_single_thread_context_scheduler(&stc), big);
    wrap_arg a;
    memset(&a, 0, sizeof a);
    a.pool = pool;
    a.home = ex_single_thread_context_thread_id(&stc);
    a.rounds = 100;
    ex_result r = run(ex_write_env(ex_task_create(body_wrap, &a, NULL), &ex_key_get_scheduler, ex_sched_value(sch)));
    expect_value_int(&r, 100);
    cr_assert_eq(atomic_load(&a.start_on_home), 1, "the body did not start on its scheduler's thread");
    EXPECT_PROBE();
    cr_assert_geq(atomic_load(&w.schedules), 1, "the hops went through the scheduler");
    cr_assert_eq(ex_single_thread_context_destroy(&stc).code, 0);
    ex_pool_destroy(pool);
    expect_no_leaks();
}

Test(exec_task, affinity_with_a_scheduler_without_dispatch) { affinity_through_schedule(false); }

Test(exec_task, affinity_with_a_scheduler_whose_schedule_op_is_large) { affinity_through_schedule(true); }

/* The same scheduler (schedule operation larger than the task keeps
 * inline, so a hop needs memory) with a task allocator that fails: the
 * task may fail (set_error, or EX_AWAIT_ERROR from an await, as P3552's
 * affine_on completes with an error when scheduling fails), but must never
 * run off its scheduler while reporting success. */
typedef struct oomhop_arg {
    ex_pool *pool;
    pthread_t home;
    atomic_int ran, silent_off_home;
} oomhop_arg;

static ex_task_result body_oomhop(ex_task *t, void *arg) {
    oomhop_arg *a = arg;
    atomic_fetch_add(&a->ran, 1);
    if (!pthread_equal(pthread_self(), a->home)) atomic_fetch_add(&a->silent_off_home, 1);
    for (int i = 0; i < 3; i++) {
        ex_await_result r = ex_await(t, ex_schedule(ex_pool_scheduler(a->pool)));
        if (r.status == EX_AWAIT_ERROR) return ex_task_with_error(r.error);
        if (!pthread_equal(pthread_self(), a->home)) atomic_fetch_add(&a->silent_off_home, 1);
    }
    return ex_task_void();
}

Test(exec_task, affinity_is_never_silently_lost_when_a_hop_cannot_be_allocated) {
    ex_pool *pool = make_pool(2);
    ex_single_thread_context stc;
    cr_assert_eq(ex_single_thread_context_init(&stc).code, 0);
    wrap_sched w;
    ex_scheduler sch = wrap_scheduler(&w, ex_single_thread_context_scheduler(&stc), true);
    ex_fault_allocator f;
    ex_fault_allocator_init(&f, ex_libc_allocator());
    ex_fault_allocator_fail_randomly(&f, 1, 1000000);
    ex_task_options o;
    memset(&o, 0, sizeof o);
    o.allocator = ex_fault_allocator_get(&f);
    oomhop_arg a;
    memset(&a, 0, sizeof a);
    a.pool = pool;
    a.home = ex_single_thread_context_thread_id(&stc);
    ex_result r = run(ex_write_env(ex_task_create(body_oomhop, &a, &o), &ex_key_get_scheduler, ex_sched_value(sch)));
    cr_assert_eq(ex_single_thread_context_destroy(&stc).code, 0);
    ex_pool_destroy(pool);
    cr_assert(r.disposition == EX_DISP_VALUE || (r.disposition == EX_DISP_ERROR && r.error.code == EX_ENOMEM),
              "disposition %d", r.disposition);
    cr_assert_eq(atomic_load(&a.silent_off_home), 0,
                 "the body ran %d time(s) off its scheduler's thread with no error (disposition %d)",
                 atomic_load(&a.silent_off_home), r.disposition);
    expect_no_leaks();
}

/* ===================================================== change scheduler */

typedef struct chg_arg {
    ex_pool *pool;
    ex_scheduler stc;
    pthread_t stc_thread;
    const void *main_tid;
} chg_arg;

static ex_task_result body_change(ex_task *t, void *arg) {
    chg_arg *a = arg;
    ex_scheduler pool = ex_pool_scheduler(a->pool);
    ex_scheduler home = ex_task_scheduler(t);
    ex_scheduler env_sch;
    TCHECK(ex_get_scheduler(ex_task_env(t), &env_sch) && ex_scheduler_equal(env_sch, home));
    TCHECK(test_thread_id() == a->main_tid);

    ex_scheduler prev = ex_change_coroutine_scheduler(t, a->stc);
    TCHECK(ex_scheduler_equal(prev, home));
    TCHECK(pthread_equal(pthread_self(), a->stc_thread));
    TCHECK(ex_scheduler_equal(ex_task_scheduler(t), a->stc));
    TCHECK(ex_get_scheduler(ex_task_env(t), &env_sch) && ex_scheduler_equal(env_sch, a->stc));
    for (int i = 0; i < 20; i++) {
        ex_await_result r = ex_await(t, ex_schedule(pool));
        TCHECK(r.status == EX_AWAIT_VALUE);
        TCHECK(pthread_equal(pthread_self(), a->stc_thread));
    }

    prev = ex_change_coroutine_scheduler(t, pool);
    TCHECK(ex_scheduler_equal(prev, a->stc));
    TCHECK(ex_pool_current_worker(a->pool) >= 0);
    for (int i = 0; i < 20; i++) {
        ex_await_result r = ex_await(t, ex_schedule(a->stc));
        TCHECK(r.status == EX_AWAIT_VALUE);
        TCHECK(ex_pool_current_worker(a->pool) >= 0);
    }

    prev = ex_change_coroutine_scheduler(t, home);  /* back to sync_wait's thread */
    TCHECK(ex_scheduler_equal(prev, pool));
    TCHECK(test_thread_id() == a->main_tid);
    TCHECK(ex_scheduler_equal(ex_task_scheduler(t), home));
    for (int i = 0; i < 20; i++) {
        ex_await_result r = ex_await(t, ex_schedule(pool));
        TCHECK(r.status == EX_AWAIT_VALUE);
        TCHECK(test_thread_id() == a->main_tid);
    }
    /* Changing to the scheduler it is on already. */
    prev = ex_change_coroutine_scheduler(t, home);
    TCHECK(ex_scheduler_equal(prev, home));
    TCHECK(test_thread_id() == a->main_tid);
    return ex_task_i64(1);
}

Test(exec_task, change_coroutine_scheduler_switches_and_back) {
    ex_pool *pool = make_pool(2);
    ex_single_thread_context stc;
    cr_assert_eq(ex_single_thread_context_init(&stc).code, 0);
    chg_arg a = { pool, ex_single_thread_context_scheduler(&stc), ex_single_thread_context_thread_id(&stc),
                  test_thread_id() };
    for (int k = 0; k < 10; k++) {
        ex_result r = run(ex_task_create(body_change, &a, NULL));
        expect_value_int(&r, 1);
        EXPECT_PROBE();
    }
    cr_assert_eq(ex_single_thread_context_destroy(&stc).code, 0);
    ex_pool_destroy(pool);
    expect_no_leaks();
}

/* "a task that is already stopped does not move": the scheduler it reports
 * and the thread it runs on stay the old ones (it is about to clean up and
 * complete where it is). */
typedef struct chg_stopped_arg {
    ex_scheduler stc;
    pthread_t stc_thread;
    bool on_stc, sched_is_stc;
} chg_stopped_arg;

static ex_task_result body_change_stopped(ex_task *t, void *arg) {
    chg_stopped_arg *a = arg;
    (void)ex_await(t, ex_just_stopped());
    (void)ex_change_coroutine_scheduler(t, a->stc);
    a->sched_is_stc = ex_scheduler_equal(ex_task_scheduler(t), a->stc);
    a->on_stc = pthread_equal(pthread_self(), a->stc_thread);
    return ex_task_void();
}

Test(exec_task, change_coroutine_scheduler_of_a_stopped_task_stays_where_it_is) {
    ex_single_thread_context stc;
    cr_assert_eq(ex_single_thread_context_init(&stc).code, 0);
    chg_stopped_arg a = { ex_single_thread_context_scheduler(&stc), ex_single_thread_context_thread_id(&stc), false, false };
    ex_result r = run(ex_task_create(body_change_stopped, &a, NULL));
    cr_assert_eq(ex_single_thread_context_destroy(&stc).code, 0);
    expect_disp(&r, EX_DISP_STOPPED);
    cr_assert(!a.sched_is_stc, "a stopped task reports the scheduler it was asked to move to");
    cr_assert(!a.on_stc, "a stopped task moved");
    expect_no_leaks();
}

/* An inline task hops once, then resumes where awaited work completes. */
typedef struct chg_inline_arg {
    ex_scheduler stc;
    pthread_t stc_thread;
    gate *g;
    const void *resumed_tid;
} chg_inline_arg;

static ex_task_result body_change_inline(ex_task *t, void *arg) {
    chg_inline_arg *a = arg;
    ex_scheduler prev = ex_change_coroutine_scheduler(t, a->stc);
    TCHECK(ex_scheduler_equal(prev, ex_inline_scheduler()));
    TCHECK(pthread_equal(pthread_self(), a->stc_thread));
    TCHECK(ex_scheduler_equal(ex_task_scheduler(t), a->stc));
    ex_await_result r = ex_await(t, gate_sender_new(a->g));
    TCHECK(r.status == EX_AWAIT_VALUE && r.v[0].as.i == 5);
    a->resumed_tid = test_thread_id();
    return ex_task_i64(5);
}

static ex_error noop_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)in, (void)n, (void)out;
    return ex_ok();
}

Test(exec_task, change_coroutine_scheduler_of_an_inline_task) {
    ex_single_thread_context stc;
    cr_assert_eq(ex_single_thread_context_init(&stc).code, 0);
    gate g;
    atomic_init(&g.op, NULL);
    atomic_init(&g.opened, 0);
    chg_inline_arg a = { ex_single_thread_context_scheduler(&stc), ex_single_thread_context_thread_id(&stc), &g, NULL };
    ex_task_options o;
    memset(&o, 0, sizeof o);
    o.affinity = EX_TASK_INLINE;
    trec tr;
    trec_init(&tr);  /* empty environment */
    ex_operation *op = start_with(ex_task_create(body_change_inline, &a, &o), &tr);
    cr_assert(gate_wait(&g));
    /* Let the task's stc item (the one that ran it up to the await) finish:
     * an item queued after it runs once the task suspended. */
    ex_result r = run(ex_then(ex_schedule(a.stc), noop_fn, NULL, EX_SIG0, EX_SIG0));
    expect_disp(&r, EX_DISP_VALUE);
    gate_open(&g, 5);
    cr_assert(wait_int(&tr.done));
    cr_assert_eq(tr.r.values, 1);
    cr_assert_eq(a.resumed_tid, test_thread_id(), "after the one hop an inline task resumes where work completes");
    EXPECT_PROBE();
    ex_operation_free(op);
    cr_assert_eq(ex_single_thread_context_destroy(&stc).code, 0);
    expect_no_leaks();
}

/* ======================================================== environment */

typedef struct env_arg {
    ex_pool *pool;
    const ex_allocator *want_alloc;
    ex_scheduler decoy;
    bool expect_user;        /* key_fwd answers 42 (opt.env) */
    int64_t expect_fwd;      /* key_fwd value expected (0: not answered) */
    bool expect_nofwd;       /* whether key_nofwd is answered */
} env_arg;

static ex_task_result body_env(ex_task *t, void *arg) {
    env_arg *a = arg;
    ex_env e = ex_task_env(t);
    ex_scheduler s;
    TCHECK(ex_get_scheduler(e, &s));
    TCHECK(ex_scheduler_equal(s, ex_task_scheduler(t)));
    TCHECK(!ex_scheduler_equal(s, a->decoy));
    TCHECK(ex_get_allocator(e) == a->want_alloc);
    ex_stop_token tok = ex_get_stop_token(e);
    TCHECK(ex_stop_token_equal(tok, ex_task_stop_token(t)));
    ex_value v;
    bool has = ex_env_query(e, &key_fwd, &v);
    if (a->expect_fwd) TCHECK(has && v.type == EX_T_INT && v.as.i == a->expect_fwd);
    else TCHECK(!has);
    TCHECK(ex_env_query(e, &key_nofwd, &v) == a->expect_nofwd);
    /* Awaited children see the same environment. */
    ex_await_result r = ex_await(t, ex_read_env(&ex_key_get_scheduler, EX_T_SCHED));
    TCHECK(r.status == EX_AWAIT_VALUE && ex_scheduler_equal(r.v[0].as.sched, ex_task_scheduler(t)));
    r = ex_await(t, ex_read_env(&ex_key_get_allocator, EX_T_ALLOC));
    TCHECK(r.status == EX_AWAIT_VALUE && r.v[0].as.alloc == a->want_alloc);
    r = ex_await(t, ex_read_env(&ex_key_get_stop_token, EX_T_TOKEN));
    TCHECK(r.status == EX_AWAIT_VALUE && ex_stop_token_equal(r.v[0].as.token, ex_task_stop_token(t)));
    if (a->expect_fwd) {
        r = ex_await(t, ex_read_env(&key_fwd, EX_T_INT));
        TCHECK(r.status == EX_AWAIT_VALUE && r.v[0].as.i == a->expect_fwd);
    }
    return ex_task_void();
}

Test(exec_task, env_answers_scheduler_allocator_stop_token) {
    ex_pool *pool = make_pool(2);
    env_arg a;
    memset(&a, 0, sizeof a);
    a.pool = pool;
    a.decoy = ex_inline_scheduler();
    /* defaults: the receiver environment's allocator (here the process default) */
    a.want_alloc = ex_default_allocator();
    ex_result r = run(ex_task_create(body_env, &a, NULL));
    expect_disp(&r, EX_DISP_VALUE);
    EXPECT_PROBE();
    /* on a pool: the pool's (its per-worker arenas) */
    ex_env_pair ps;
    ex_env_pair_init(&ps, &ex_key_get_scheduler, ex_sched_value(ex_pool_scheduler(pool)), ex_env_empty());
    a.want_alloc = ex_get_allocator(ex_env_of_pair(&ps));
    cr_assert_str_eq(a.want_alloc->name, "jemalloc");
    r = run(ex_starts_on(ex_pool_scheduler(pool), ex_task_create(body_env, &a, NULL)));
    expect_disp(&r, EX_DISP_VALUE);
    EXPECT_PROBE();
    /* the receiver environment's allocator */
    cnt_alloc env_alloc;
    cnt_alloc_init(&env_alloc);
    a.want_alloc = &env_alloc.base;
    r = run(ex_write_env(ex_task_create(body_env, &a, NULL), &ex_key_get_allocator, ex_alloc_value(&env_alloc.base)));
    expect_disp(&r, EX_DISP_VALUE);
    EXPECT_PROBE();
    /* the allocator option wins over the environment's */
    cnt_alloc opt_alloc;
    cnt_alloc_init(&opt_alloc);
    ex_task_options o;
    memset(&o, 0, sizeof o);
    o.allocator = &opt_alloc.base;
    a.want_alloc = &opt_alloc.base;
    r = run(ex_write_env(ex_task_create(body_env, &a, &o), &ex_key_get_allocator, ex_alloc_value(&env_alloc.base)));
    expect_disp(&r, EX_DISP_VALUE);
    EXPECT_PROBE();
    cr_assert_eq(atomic_load(&opt_alloc.in_use), 0);
    cr_assert_eq(atomic_load(&env_alloc.in_use), 0);
    ex_pool_destroy(pool);
    expect_no_leaks();
}

Test(exec_task, env_forwards_the_user_environment) {
    ex_env_pair p1, p2;
    ex_env_pair_init(&p1, &key_fwd, ex_int(42), ex_env_empty());
    p1.key2 = &ex_key_get_scheduler;  /* the task's own answer wins */
    ex_pool *decoy_pool = make_pool(1);
    p1.value2 = ex_sched_value(ex_pool_scheduler(decoy_pool));
    ex_env_pair_init(&p2, &key_nofwd, ex_int(43), ex_env_of_pair(&p1));
    ex_task_options o;
    memset(&o, 0, sizeof o);
    o.env = ex_env_of_pair(&p2);
    env_arg a;
    memset(&a, 0, sizeof a);
    a.decoy = ex_pool_scheduler(decoy_pool);
    a.want_alloc = ex_default_allocator();
    a.expect_fwd = 42;
    a.expect_nofwd = false;  /* only forwarding queries */
    ex_result r = run(ex_task_create(body_env, &a, &o));
    expect_disp(&r, EX_DISP_VALUE);
    EXPECT_PROBE();
    ex_pool_destroy(decoy_pool);
    expect_no_leaks();
}

Test(exec_task, env_forwards_the_receiver_environment_without_a_user_one) {
    env_arg a;
    memset(&a, 0, sizeof a);
    a.decoy = ex_inline_scheduler();
    a.want_alloc = ex_default_allocator();
    a.expect_fwd = 5;
    a.expect_nofwd = false;
    ex_sender *s = ex_task_create(body_env, &a, NULL);
    s = ex_write_env(s, &key_fwd, ex_int(5));
    s = ex_write_env(s, &key_nofwd, ex_int(6));
    ex_result r = run(s);
    expect_disp(&r, EX_DISP_VALUE);
    EXPECT_PROBE();
    expect_no_leaks();
}

Test(exec_task, task_scheduler_of_an_inline_task_is_the_inline_scheduler) {
    ex_run_loop decoy;
    cr_assert_eq(ex_run_loop_init(&decoy).code, 0);
    env_arg a;
    memset(&a, 0, sizeof a);
    a.decoy = ex_run_loop_scheduler(&decoy);  /* never run: only compared */
    a.want_alloc = ex_default_allocator();
    ex_task_options o;
    memset(&o, 0, sizeof o);
    o.affinity = EX_TASK_INLINE;
    ex_result r = run(ex_task_create(body_env, &a, &o));
    expect_disp(&r, EX_DISP_VALUE);
    EXPECT_PROBE();
    cr_assert_eq(ex_run_loop_destroy(&decoy).code, 0);
    expect_no_leaks();
}

/* ---------------------------------------------------------- stop token */

typedef struct tok_arg {
    ex_run_loop *loop;         /* awaited: its schedule completes stopped */
    pthread_t home;
    _Atomic(ex_stop_source *) tok_src;  /* the (innermost) task's token */
    bool possible, requested_at_start;
    int status;
    bool requested_after, stopped_after, on_home;
    bool nested;
    int outer_status;
    bool outer_stopped;
} tok_arg;

static ex_task_result body_tok_leaf(ex_task *t, void *arg) {
    tok_arg *a = arg;
    ex_stop_token tok = ex_task_stop_token(t);
    a->possible = ex_stop_token_stop_possible(tok);
    a->requested_at_start = ex_stop_token_stop_requested(tok);
    atomic_store(&a->tok_src, tok.src);
    ex_await_result r = ex_await(t, ex_schedule(ex_run_loop_scheduler(a->loop)));
    a->status = (int)r.status;
    a->requested_after = ex_stop_token_stop_requested(ex_task_stop_token(t));
    a->stopped_after = ex_task_is_stopped(t);
    a->on_home = pthread_equal(pthread_self(), a->home);
    return ex_task_i64(1);
}

static ex_task_result body_tok_outer(ex_task *t, void *arg) {
    tok_arg *a = arg;
    ex_await_result r = ex_await(t, ex_task_create(body_tok_leaf, a, NULL));
    a->outer_status = (int)r.status;
    a->outer_stopped = ex_task_is_stopped(t);
    TCHECK(ex_stop_token_stop_requested(ex_task_stop_token(t)));
    TCHECK(pthread_equal(pthread_self(), a->home));
    return ex_task_i64(2);
}

static void stop_token_linkage(bool nested) {
    ex_single_thread_context stc;
    cr_assert_eq(ex_single_thread_context_init(&stc).code, 0);
    ex_run_loop loop;
    cr_assert_eq(ex_run_loop_init(&loop).code, 0);
    tok_arg a;
    memset(&a, 0, sizeof a);
    a.loop = &loop;
    a.home = ex_single_thread_context_thread_id(&stc);
    a.nested = nested;
    trec tr;
    trec_setup(&tr, ex_single_thread_context_scheduler(&stc), true);
    ex_operation *op = start_with(ex_task_create(nested ? body_tok_outer : body_tok_leaf, &a, NULL), &tr);
    /* Wait until the (innermost) task's await is queued on the loop. */
    double deadline = test_now_s() + 20.0;
    while (ex_run_loop_count(&loop) == 0 && test_now_s() < deadline) sched_yield();
    cr_assert_eq(ex_run_loop_count(&loop), 1);
    ex_stop_source *src = atomic_load(&a.tok_src);
    cr_assert_not_null(src);
    ex_stop_token tok = { src };
    cr_assert(a.possible, "the task's stop token can be stopped");
    cr_assert_not(a.requested_at_start);
    cr_assert_not(ex_stop_token_stop_requested(tok));
    ex_stop_source_request_stop(&tr.r.stop);
    cr_assert(ex_stop_token_stop_requested(tok), "stop on the receiver's token must reach the task's token");
    ex_run_loop_finish(&loop);
    cr_assert_eq(ex_run_loop_run(&loop).code, 0);  /* the awaited schedule completes stopped */
    cr_assert(wait_int(&tr.done));
    cr_assert_eq(tr.r.stops, 1);
    cr_assert_eq(rec_total(&tr.r), 1);
    cr_assert_eq(a.status, EX_AWAIT_STOPPED);
    cr_assert(a.requested_after);
    cr_assert(a.stopped_after);
    cr_assert(a.on_home, "after a stopped await the task still resumes on its scheduler");
    if (nested) {
        cr_assert_eq(a.outer_status, EX_AWAIT_STOPPED);
        cr_assert(a.outer_stopped);
    }
    EXPECT_PROBE();
    ex_operation_free(op);
    cr_assert_eq(ex_run_loop_destroy(&loop).code, 0);
    cr_assert_eq(ex_single_thread_context_destroy(&stc).code, 0);
    expect_no_leaks();
}

Test(exec_task, stop_token_is_linked_to_the_receivers) { stop_token_linkage(false); }

Test(exec_task, stop_token_reaches_nested_tasks) { stop_token_linkage(true); }

typedef struct early_arg {
    atomic_int ran;
    bool requested;
    int status;
} early_arg;

static ex_task_result body_early(ex_task *t, void *arg) {
    early_arg *a = arg;
    atomic_fetch_add(&a->ran, 1);
    a->requested = ex_stop_token_stop_requested(ex_task_stop_token(t));
    ex_await_result r = ex_await(t, ex_schedule(ex_task_scheduler(t)));
    a->status = (int)r.status;
    return ex_task_i64(1);
}

Test(exec_task, stop_requested_before_start) {
    ex_stop_source src;
    ex_stop_source_init(&src);
    ex_stop_source_request_stop(&src);
    early_arg a;
    memset(&a, 0, sizeof a);
    ex_result r = run(ex_write_env(ex_task_create(body_early, &a, NULL), &ex_key_get_stop_token,
                                   ex_token_value(ex_stop_source_token(&src))));
    expect_disp(&r, EX_DISP_STOPPED);
    if (atomic_load(&a.ran)) {
        cr_assert(a.requested, "the task's token must report the stop requested before start");
        cr_assert_eq(a.status, EX_AWAIT_STOPPED);
    }
    expect_no_leaks();
}

/* ======================================================== tasks awaiting tasks */

typedef struct child_arg {
    int64_t v;
    const void *tid;
} child_arg;

static ex_task_result body_child(ex_task *t, void *arg) {
    child_arg *c = arg;
    c->tid = test_thread_id();
    ex_await_result r = ex_await(t, ex_just(ex_int(c->v)));
    return ex_task_i64(r.v[0].as.i * 2);
}

typedef struct parent_arg {
    const void *main_tid;
    ex_pool *pool;
    int n;
} parent_arg;

static ex_task_result body_parent(ex_task *t, void *arg) {
    parent_arg *a = arg;
    int64_t sum = 0;
    for (int i = 0; i < a->n; i++) {
        child_arg c = { i, NULL };
        ex_await_result r = ex_await(t, ex_task_create(body_child, &c, NULL));
        TCHECK(r.status == EX_AWAIT_VALUE && r.n == 1 && r.v[0].as.i == 2 * i);
        TCHECK(c.tid == a->main_tid);  /* the child ran on the same scheduler */
        TCHECK(test_thread_id() == a->main_tid);
        sum += r.v[0].as.i;
    }
    /* A child on another scheduler. */
    child_arg c = { 50, NULL };
    ex_await_result r = ex_await(t, ex_starts_on(ex_pool_scheduler(a->pool), ex_task_create(body_child, &c, NULL)));
    TCHECK(r.status == EX_AWAIT_VALUE && r.v[0].as.i == 100);
    TCHECK(c.tid != a->main_tid);
    TCHECK(test_thread_id() == a->main_tid);
    return ex_task_i64(sum);
}

Test(exec_task, task_awaiting_tasks_gets_their_values) {
    ex_pool *pool = make_pool(2);
    parent_arg a = { test_thread_id(), pool, 100 };
    ex_result r = run(ex_task_create(body_parent, &a, NULL));
    expect_value_int(&r, 99 * 100);
    EXPECT_PROBE();
    ex_pool_destroy(pool);
    expect_no_leaks();
}

typedef struct rt_arg {
    ex_pool *pool;
    int n;
} rt_arg;

static ex_task_result body_rt_child(ex_task *t, void *arg) {
    (void)t;
    return ex_task_i64(*(int *)arg);
}

static ex_task_result body_rt_parent(ex_task *t, void *arg) {
    rt_arg *a = arg;
    int64_t sum = 0;
    for (int i = 0; i < a->n; i++) {
        int k = i;
        ex_await_result r = ex_await(t, ex_task_create(body_rt_child, &k, NULL));
        TCHECK(r.status == EX_AWAIT_VALUE && r.v[0].as.i == i);
        TCHECK(ex_pool_current_worker(a->pool) == 0);
        sum += r.v[0].as.i;
    }
    return ex_task_i64(sum);
}

/* Awaited work that completes on the task's own scheduler: no hop. */
static ex_task_result body_rt_own(ex_task *t, void *arg) {
    rt_arg *a = arg;
    for (int i = 0; i < a->n; i++) {
        ex_await_result r = ex_await(t, ex_schedule(ex_pool_scheduler(a->pool)));
        TCHECK(r.status == EX_AWAIT_VALUE);
        TCHECK(ex_pool_current_worker(a->pool) == 0);
    }
    return ex_task_i64(a->n);
}

Test(exec_task, completion_on_the_task_scheduler_skips_the_hop) {
    ex_pool *pool = make_pool(1);
    rt_arg a = { pool, 200 };
    ex_pool_worker_stats before, after;
    cr_assert_eq(ex_pool_worker_stats_get(pool, 0, &before).code, 0);
    ex_result r = run(ex_starts_on(ex_pool_scheduler(pool), ex_task_create(body_rt_own, &a, NULL)));
    expect_value_int(&r, 200);
    EXPECT_PROBE();
    cr_assert_eq(ex_pool_worker_stats_get(pool, 0, &after).code, 0);
    uint64_t items = after.executed - before.executed;
    cr_assert_lt(items, 200 + 20, "%llu pool items for 200 awaits of the task's own pool: the hops were not skipped",
                 (unsigned long long)items);
    ex_pool_destroy(pool);
    expect_no_leaks();
}

Test(exec_task, child_on_the_same_scheduler_needs_no_queue_round_trip) {
    ex_pool *pool = make_pool(1);
    rt_arg a = { pool, 200 };
    ex_pool_worker_stats before, after;
    cr_assert_eq(ex_pool_worker_stats_get(pool, 0, &before).code, 0);
    ex_result r = run(ex_starts_on(ex_pool_scheduler(pool), ex_task_create(body_rt_parent, &a, NULL)));
    expect_value_int(&r, 199 * 200 / 2);
    EXPECT_PROBE();
    cr_assert_eq(ex_pool_worker_stats_get(pool, 0, &after).code, 0);
    uint64_t items = after.executed - before.executed;
    cr_assert_lt(items, 20, "%llu pool items for 200 child tasks on the parent's own scheduler",
                 (unsigned long long)items);
    ex_pool_destroy(pool);
    expect_no_leaks();
}

/* ================================================================ stacks */

typedef struct loop_arg {
    long n;
    uintptr_t body0, bodyN;    /* a local of the body */
    uintptr_t cb0, cbN;        /* a local of a then callback run inline by the await */
    uintptr_t cb_cur;
    uintptr_t stack_lo, stack_hi;  /* when known: the task's stack */
    int64_t sum;
} loop_arg;

static ex_error note_sp(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)n;
    volatile char here = 0;
    ((loop_arg *)ctx)->cb_cur = (uintptr_t)&here;
    out[0] = in[0];
    return ex_ok();
}

static ex_task_result body_million(ex_task *t, void *arg) {
    loop_arg *a = arg;
    for (long i = 0; i < a->n; i++) {
        volatile char local = 0;
        ex_await_result r;
        if (i == 0 || i == a->n / 2 || i == a->n - 1)
            r = ex_await(t, ex_then(ex_just(ex_int(i)), note_sp, a, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)));
        else
            r = ex_await(t, ex_just(ex_int(i)));
        if (r.status != EX_AWAIT_VALUE || r.v[0].as.i != i) return ex_task_with_error(ex_err(EX_EUSER, "body_million: bad await"));
        a->sum += r.v[0].as.i;
        if (i == 0) {
            a->body0 = (uintptr_t)&local;
            a->cb0 = a->cb_cur;
        }
        if (i == a->n - 1) {
            a->bodyN = (uintptr_t)&local;
            a->cbN = a->cb_cur;
        }
    }
    return ex_task_i64(a->n);
}

static void million_awaits(bool inline_affinity) {
    loop_arg a;
    memset(&a, 0, sizeof a);
    a.n = 1000000;
    ex_task_options o;
    memset(&o, 0, sizeof o);
    o.affinity = inline_affinity ? EX_TASK_INLINE : EX_TASK_AFFINE;
    ex_result r = run(ex_task_create(body_million, &a, &o));
    expect_value_int(&r, a.n);
    cr_assert_eq(a.sum, (int64_t)a.n * (a.n - 1) / 2);
    cr_assert_eq(a.body0, a.bodyN, "the body's frame moved");
    cr_assert_eq(a.cb0, a.cbN, "an inline await at iteration %ld ran %ld bytes deeper than at iteration 0", a.n - 1,
                 (long)(a.cb0 - a.cbN));
    /* The inline completion ran on the task's own stack, just below the body. */
    cr_assert_lt(a.cb0, a.body0);
    cr_assert_lt(a.body0 - a.cb0, (uintptr_t)EX_TASK_STACK_DEFAULT, "the inline await switched stacks");
    expect_no_leaks();
}

Test(exec_task, million_inline_awaits_on_the_inline_scheduler) { million_awaits(true); }

Test(exec_task, million_inline_awaits_on_a_run_loop) { million_awaits(false); }

/* Suspending awaits: the loop's thread resumes the task over and over; its
 * own stack must not grow either. */
static ex_error note_sp0(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    volatile char here = 0;
    ((loop_arg *)ctx)->cb_cur = (uintptr_t)&here;
    return ex_ok();
}

static ex_task_result body_suspend_loop0(ex_task *t, void *arg) {
    loop_arg *a = arg;
    ex_scheduler home = ex_task_scheduler(t);
    for (long i = 0; i < a->n; i++) {
        ex_await_result r = ex_await(t, ex_then(ex_schedule(home), note_sp0, a, EX_SIG0, EX_SIG0));
        if (r.status != EX_AWAIT_VALUE) return ex_task_with_error(ex_err(EX_EUSER, "body_suspend_loop: bad await"));
        if (i == 1) a->cb0 = a->cb_cur;
        if (i == a->n - 1) a->cbN = a->cb_cur;
    }
    return ex_task_i64(a->n);
}

Test(exec_task, suspending_awaits_do_not_grow_the_resuming_stack) {
    loop_arg a;
    memset(&a, 0, sizeof a);
    a.n = 100000;
    ex_result r = run(ex_task_create(body_suspend_loop0, &a, NULL));
    expect_value_int(&r, a.n);
    uintptr_t d = a.cb0 > a.cbN ? a.cb0 - a.cbN : a.cbN - a.cb0;
    cr_assert_lt(d, 4096, "the resuming thread's stack moved by %lu bytes over %ld awaits", (unsigned long)d, a.n);
    expect_no_leaks();
}

/* Recursion: uses the stack it was given. */
static volatile int recursion_limit = INT_MAX;

__attribute__((noinline)) static int recurse(int depth, int until, uintptr_t *deepest) {
    volatile char buf[1024];
    buf[0] = (char)depth;
    buf[sizeof buf - 1] = (char)depth;
    if (depth >= until || depth >= recursion_limit) {
        *deepest = (uintptr_t)&buf[0];
        return buf[0];
    }
    return recurse(depth + 1, until, deepest) + buf[sizeof buf - 1];
}

typedef struct deep_arg {
    int depth;
    uintptr_t top, deepest;
    int result;
} deep_arg;

static ex_task_result body_deep(ex_task *t, void *arg) {
    (void)t;
    deep_arg *a = arg;
    volatile char top = 0;
    a->top = (uintptr_t)&top;
    a->result = recurse(0, a->depth, &a->deepest);
    return ex_task_i64(a->depth);
}

Test(exec_task, deep_recursion_within_the_stack_size) {
    cnt_alloc stacks;
    cnt_alloc_init(&stacks);
    ex_task_options o;
    memset(&o, 0, sizeof o);
    o.stack_size = 512 * 1024;
    o.stack_allocator = &stacks.base;
    deep_arg a = { 200, 0, 0, 0 };  /* >= 200 KiB of frames */
    ex_result r = run(ex_task_create(body_deep, &a, &o));
    expect_value_int(&r, 200);
    cr_assert_eq(atomic_load(&stacks.allocs), 1);
    uintptr_t lo = (uintptr_t)stacks.last_p, hi = lo + stacks.last_size;
    cr_assert(a.top > lo && a.top < hi, "the body did not run on the stack from stack_allocator");
    cr_assert(a.deepest >= lo && a.deepest < hi, "the recursion left the task's stack");
    cr_assert_geq(a.top - a.deepest, (uintptr_t)200 * 1024);

    /* and with the default guarded stacks */
    memset(&o, 0, sizeof o);
    o.stack_size = 512 * 1024;
    a = (deep_arg){ 200, 0, 0, 0 };
    r = run(ex_task_create(body_deep, &a, &o));
    expect_value_int(&r, 200);
    cr_assert_geq(a.top - a.deepest, (uintptr_t)200 * 1024);
    expect_no_leaks();
}

static ex_task_result body_overflow(ex_task *t, void *arg) {
    (void)t, (void)arg;
    uintptr_t deepest = 0;
    int x = recurse(0, INT_MAX, &deepest);
    return ex_task_i64(x);
}

/* Running off the end of the stack hits the guard page. */
Test(exec_task, stack_overflow_hits_the_guard_page, .signal = SIGSEGV) {
    signal(SIGSEGV, SIG_DFL);  /* die by the signal (sanitizers would report and exit instead) */
    ex_task_options o;
    memset(&o, 0, sizeof o);
    o.stack_size = 16384;
    ex_result r = run(ex_task_create(body_overflow, NULL, &o));
    (void)r;
}

typedef struct where_stack {
    uintptr_t local;
} where_stack;

static ex_task_result body_where(ex_task *t, void *arg) {
    (void)t;
    volatile char here = 0;
    ((where_stack *)arg)->local = (uintptr_t)&here;
    return ex_task_void();
}

Test(exec_task, stack_allocator_option_provides_the_stack) {
    cnt_alloc stacks;
    cnt_alloc_init(&stacks);
    ex_task_options o;
    memset(&o, 0, sizeof o);
    o.stack_allocator = &stacks.base;
    o.stack_size = 100000;
    where_stack w = { 0 };
    ex_result r = run(ex_task_create(body_where, &w, &o));
    expect_disp(&r, EX_DISP_VALUE);
    cr_assert_eq(atomic_load(&stacks.allocs), 1);
    cr_assert_eq(atomic_load(&stacks.frees), 1);
    cr_assert_geq(stacks.last_size, 100000);
    cr_assert_eq(stacks.last_align, 16);
    cr_assert_eq(stacks.freed_p, stacks.last_p);
    cr_assert_eq(stacks.freed_size, stacks.last_size);
    cr_assert_eq(stacks.freed_align, stacks.last_align);
    uintptr_t lo = (uintptr_t)stacks.last_p;
    cr_assert(w.local > lo && w.local < lo + stacks.last_size, "the body did not run on the given stack");

    /* stack_size 0: EX_TASK_STACK_DEFAULT */
    o.stack_size = 0;
    r = run(ex_task_create(body_where, &w, &o));
    expect_disp(&r, EX_DISP_VALUE);
    cr_assert_geq(stacks.last_size, EX_TASK_STACK_DEFAULT);
    cr_assert_eq(atomic_load(&stacks.in_use), 0);

    /* the libc allocator and a recycling allocator work as stack allocators */
    o.stack_allocator = ex_libc_allocator();
    o.stack_size = 32768;
    for (int i = 0; i < 20; i++) {
        r = run(ex_task_create(body_where, &w, &o));
        expect_disp(&r, EX_DISP_VALUE);
    }
    ex_recycling_allocator *rc = NULL;
    cr_assert_eq(ex_recycling_allocator_create(NULL, &rc).code, 0);
    o.stack_allocator = ex_recycling_allocator_get(rc);
    for (int i = 0; i < 20; i++) {
        int64_t x = i;
        r = run(ex_task_create(body_i64, &x, &o));
        expect_value_int(&r, i);
    }
    ex_alloc_stats st;
    cr_assert_eq(ex_allocator_stats(ex_recycling_allocator_get(rc), &st).code, 0);
    cr_assert_eq(st.allocations, 20);
    cr_assert_eq(st.frees, 20);
    ex_recycling_allocator_destroy(rc);

    /* a per-worker jemalloc arena allocator (no guard page) */
    ex_jemalloc_allocator *je = NULL;
    cr_assert_eq(ex_jemalloc_allocator_create(2, &je).code, 0);
    o.stack_allocator = ex_jemalloc_allocator_get(je);
    ex_pool *pool = make_pool(2);
    for (int i = 0; i < 20; i++) {
        int64_t x = i;
        r = run(ex_starts_on(ex_pool_scheduler(pool), ex_task_create(body_i64, &x, &o)));
        expect_value_int(&r, i);
    }
    ex_pool_destroy(pool);
    ex_jemalloc_allocator_destroy(je);
    expect_no_leaks();
}

/* =================================================================== OOM */

Test(exec_task, stack_allocation_failure_completes_with_enomem) {
    ex_fault_allocator f;
    ex_fault_allocator_init(&f, ex_libc_allocator());
    ex_fault_allocator_fail_nth(&f, 1);
    ex_task_options o;
    memset(&o, 0, sizeof o);
    o.stack_allocator = ex_fault_allocator_get(&f);
    atomic_int ran = 0;
    ex_result r = run(ex_task_create(body_mark, &ran, &o));
    expect_error(&r, EX_ENOMEM);
    cr_assert_eq(atomic_load(&ran), 0);

    /* through a raw receiver, on a pool */
    ex_pool *pool = make_pool(2);
    ex_fault_allocator_fail_nth(&f, 1);
    trec tr;
    trec_setup(&tr, ex_pool_scheduler(pool), true);
    ex_operation *op = start_with(ex_task_create(body_mark, &ran, &o), &tr);
    cr_assert(wait_int(&tr.done));
    cr_assert_eq(tr.r.errors, 1);
    cr_assert_eq(rec_total(&tr.r), 1);
    cr_assert_eq(tr.r.err.code, EX_ENOMEM);
    cr_assert_eq(atomic_load(&ran), 0);
    ex_operation_free(op);

    /* the next one gets its stack */
    r = run(ex_task_create(body_mark, &ran, &o));
    expect_value_int(&r, 5);
    ex_alloc_stats st;
    cr_assert_eq(ex_allocator_stats(ex_fault_allocator_get(&f), &st).code, 0);
    cr_assert_eq(st.bytes_in_use, 0);
    ex_pool_destroy(pool);
    expect_no_leaks();
}

static ex_sender *lv_sweep_fn(void *ctx, const ex_value *in, size_t n) {
    (void)ctx, (void)n;
    return ex_then(ex_just(ex_int(in[0].as.i * 2)), add_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
}

static ex_task_result body_sweep_child(ex_task *t, void *arg) {
    (void)arg;
    ex_await_result r = ex_await(t, ex_then(ex_just(ex_int(4)), add_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)));
    if (r.status == EX_AWAIT_ERROR) return ex_task_with_error(r.error);
    return ex_task_i64(r.v[0].as.i);  /* 5 */
}

static ex_task_result body_sweep(ex_task *t, void *arg) {
    (void)arg;
    ex_await_result r = ex_await(t, ex_let_value(ex_just(ex_int(10)), lv_sweep_fn, NULL, EX_SIG(EX_T_INT)));
    if (r.status == EX_AWAIT_ERROR) return ex_task_with_error(r.error);
    TCHECK(r.status == EX_AWAIT_VALUE && r.v[0].as.i == 21);
    int64_t a = r.v[0].as.i;
    ex_task_options o;
    memset(&o, 0, sizeof o);
    o.value_sig = &sig_int;
    r = ex_await(t, ex_when_all(ex_just(ex_int(100)), ex_task_create(body_sweep_child, NULL, &o),
                                ex_then(ex_just(ex_int(1)), add_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT))));
    if (r.status == EX_AWAIT_ERROR) return ex_task_with_error(r.error);
    TCHECK(r.status == EX_AWAIT_VALUE && r.n == 3);
    return ex_task_i64(a + r.v[0].as.i + r.v[1].as.i + r.v[2].as.i);  /* 21 + 100 + 5 + 2 */
}

Test(exec_task, oom_sweep_let_value_and_when_all) {
    int values = 0, enomem = 0;
    long k;
    for (k = 1; k < 10000; k++) {
        test_alloc_reset();
        test_alloc_fail_at(k);
        ex_result r = run(ex_task_create(body_sweep, NULL, NULL));
        long failed = test_stats.failed;
        test_alloc_fail_at(0);
        cr_assert(r.disposition == EX_DISP_VALUE || r.disposition == EX_DISP_ERROR, "k=%ld: disposition %d", k,
                  r.disposition);
        if (r.disposition == EX_DISP_VALUE) {
            cr_assert_eq(r.n, 1);
            cr_assert_eq(r.values[0].as.i, 128, "k=%ld", k);
            values++;
        } else {
            cr_assert_eq(r.error.code, EX_ENOMEM, "k=%ld: error %d (%s)", k, r.error.code, r.error.msg ? r.error.msg : "");
            enomem++;
        }
        ex_result_destroy(&r);
        cr_assert_eq(test_stats.in_use, 0, "k=%ld: %ld block(s) leaked", k, test_stats.in_use);
        if (!failed) break;
    }
    cr_assert_lt(k, 10000);
    cr_assert_gt(enomem, 3, "the sweep failed too few allocations (%d)", enomem);
    cr_assert_geq(values, 1);
    EXPECT_PROBE();
    expect_no_leaks();
}

/* ======================================================== many tasks */

enum { MANY = 1000, MANY_STEPS = 6 };

typedef struct many_slot {
    atomic_int steps, done;
    atomic_int bad;
} many_slot;

typedef struct many_ctx {
    ex_pool *pool, *other;
    many_slot slots[MANY];
} many_ctx;

typedef struct many_arg {
    many_ctx *c;
    int i;
} many_arg;

static ex_task_result body_many(ex_task *t, void *arg) {
    many_arg *m = arg;
    many_ctx *c = m->c;
    many_slot *s = &c->slots[m->i];
    volatile uint64_t canary = 0x5eed0000u + (uint64_t)m->i;
    for (int k = 0; k < MANY_STEPS; k++) {
        ex_pool *p = (k & 1) ? c->other : c->pool;
        ex_await_result r = ex_await(t, ex_schedule(ex_pool_scheduler(p)));
        if (r.status != EX_AWAIT_VALUE) atomic_fetch_add(&s->bad, 1);
        if (ex_pool_current_worker(c->pool) < 0) atomic_fetch_add(&s->bad, 1);
        if (canary != 0x5eed0000u + (uint64_t)m->i) atomic_fetch_add(&s->bad, 1);
        atomic_fetch_add(&s->steps, 1);
    }
    atomic_fetch_add(&s->done, 1);
    return ex_task_void();
}

static many_ctx *many_setup(many_arg **args) {
    many_ctx *c = calloc(1, sizeof *c);
    cr_assert_not_null(c);
    c->pool = make_pool(2);
    c->other = make_pool(2);
    *args = calloc(MANY, sizeof **args);
    cr_assert_not_null(*args);
    for (int i = 0; i < MANY; i++) (*args)[i] = (many_arg){ c, i };
    return c;
}

static void many_check(many_ctx *c) {
    for (int i = 0; i < MANY; i++) {
        cr_assert_eq(atomic_load(&c->slots[i].done), 1, "task %d completed %d times", i, atomic_load(&c->slots[i].done));
        cr_assert_eq(atomic_load(&c->slots[i].steps), MANY_STEPS, "task %d", i);
        cr_assert_eq(atomic_load(&c->slots[i].bad), 0, "task %d saw %d bad steps", i, atomic_load(&c->slots[i].bad));
    }
}

static void many_teardown(many_ctx *c, many_arg *args) {
    ex_pool_destroy(c->other);
    ex_pool_destroy(c->pool);
    free(args);
    free(c);
}

Test(exec_task, thousand_tasks_on_a_pool_via_when_all) {
    many_arg *args;
    many_ctx *c = many_setup(&args);
    ex_sender **kids = calloc(MANY, sizeof *kids);
    cr_assert_not_null(kids);
    ex_task_options o;
    memset(&o, 0, sizeof o);
    o.value_sig = &sig_void;
    for (int i = 0; i < MANY; i++) kids[i] = ex_task_create(body_many, &args[i], &o);
    ex_result r = run(ex_starts_on(ex_pool_scheduler(c->pool), ex_when_all_n(kids, MANY)));
    free(kids);
    expect_disp(&r, EX_DISP_VALUE);
    cr_assert_eq(r.n, 0);
    many_check(c);
    many_teardown(c, args);
    expect_no_leaks();
}

Test(exec_task, thousand_tasks_on_a_pool_via_a_counting_scope) {
    many_arg *args;
    many_ctx *c = many_setup(&args);
    ex_counting_scope scope;
    cr_assert_eq(ex_counting_scope_init(&scope).code, 0);
    ex_env_pair env;
    ex_env_pair_init(&env, &ex_key_get_scheduler, ex_sched_value(ex_pool_scheduler(c->pool)), ex_env_empty());
    for (int i = 0; i < MANY; i++) {
        ex_error e = ex_spawn_env(ex_task_create(body_many, &args[i], NULL), ex_counting_scope_token(&scope),
                                  ex_env_of_pair(&env));
        cr_assert_eq(e.code, 0, "spawn %d: %s", i, e.msg ? e.msg : "");
    }
    ex_result r = run(ex_counting_scope_join(&scope));
    expect_disp(&r, EX_DISP_VALUE);
    cr_assert_eq(ex_counting_scope_destroy(&scope).code, 0);
    many_check(c);
    many_teardown(c, args);
    expect_no_leaks();
}

/* ============================================ the completion may free the task */

/* A receiver that frees the task's operation inside its completion (which
 * the receiver contract allows), with storage from a scribbling allocator:
 * any later access by the task to its own state reads 0xA5 garbage. */
typedef struct freeing_rec {
    ex_operation *op;
    int values, errors, stops;
    int64_t v;
    ex_env_pair env;
} freeing_rec;

static void fr_value(void *self, const ex_value *v, size_t n) {
    freeing_rec *f = self;
    f->values++;
    f->v = n ? v[0].as.i : -1;
    ex_operation_free(f->op);
}
static void fr_error(void *self, ex_error e) {
    (void)e;
    freeing_rec *f = self;
    f->errors++;
    ex_operation_free(f->op);
}
static void fr_stopped(void *self) {
    freeing_rec *f = self;
    f->stops++;
    ex_operation_free(f->op);
}
static ex_env fr_env(void *self) { return ex_env_of_pair(&((freeing_rec *)self)->env); }
static const ex_receiver_vtable freeing_vt = { fr_value, fr_error, fr_stopped, fr_env, NULL };

static ex_task_result body_small_awaits(ex_task *t, void *arg) {
    (void)arg;
    ex_await_result r = ex_await(t, ex_just(ex_int(2)));
    r = ex_await(t, ex_then(ex_just(ex_int(r.v[0].as.i)), add_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)));
    if (r.status != EX_AWAIT_VALUE) return ex_task_with_error(r.error);
    return ex_task_i64(r.v[0].as.i);  /* 3 */
}

static ex_task_result body_tuple_last(ex_task *t, void *arg) {
    (void)arg;
    ex_await_result r = ex_await(t, ex_into_variant(ex_just(ex_int(7), ex_int(8))));
    if (r.status != EX_AWAIT_VALUE) return ex_task_with_error(r.error);
    return ex_task_i64(r.v[0].as.tuple->v[0].as.i + r.v[0].as.tuple->v[1].as.i);  /* 15 */
}

static ex_task_result body_stop_last(ex_task *t, void *arg) {
    (void)arg;
    ex_await_result r = ex_await(t, ex_just_stopped());
    return ex_task_i64(r.status);
}

static void completion_frees_the_task(ex_task_fn fn, ex_task_affinity aff, int64_t want) {
    cnt_alloc frames;
    cnt_alloc_init(&frames);
    frames.scribble = true;
    freeing_rec f;
    memset(&f, 0, sizeof f);
    ex_env_pair_init(&f.env, &ex_key_get_allocator, ex_alloc_value(&frames.base), ex_env_empty());
    f.env.key2 = &ex_key_get_scheduler;
    f.env.value2 = ex_sched_value(ex_inline_scheduler());
    ex_task_options o;
    memset(&o, 0, sizeof o);
    o.affinity = aff;
    ex_sender *s = ex_task_create(fn, NULL, &o);
    ex_receiver r = { &freeing_vt, &f };
    cr_assert_eq(ex_connect_alloc(s, r, &f.op).code, 0);
    cr_assert_eq(atomic_load(&frames.allocs), 1, "the operation comes from the environment's allocator");
    ex_start(f.op);  /* completes inline; the completion frees the operation */
    cr_assert_eq(f.values + f.errors + f.stops, 1);
    if (want >= 0) {
        cr_assert_eq(f.values, 1);
        cr_assert_eq(f.v, want);
    } else {
        cr_assert_eq(f.stops, 1);
    }
    cr_assert_eq(atomic_load(&frames.in_use), 0);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_task, completion_may_free_the_task_affine) { completion_frees_the_task(body_small_awaits, EX_TASK_AFFINE, 3); }

Test(exec_task, completion_may_free_the_task_inline) { completion_frees_the_task(body_small_awaits, EX_TASK_INLINE, 3); }

Test(exec_task, completion_may_free_the_task_after_a_tuple) {
    completion_frees_the_task(body_tuple_last, EX_TASK_INLINE, 15);
}

Test(exec_task, completion_may_free_the_task_after_stopped) {
    completion_frees_the_task(body_stop_last, EX_TASK_INLINE, -1);
}

/* The same through a counting scope on a pool: the spawned operation, from
 * the scribbling allocator, is freed by the scope when the task completes. */
Test(exec_task, spawned_task_freed_by_the_scope) {
    ex_pool *pool = make_pool(2);
    cnt_alloc frames;
    cnt_alloc_init(&frames);
    frames.scribble = true;
    ex_counting_scope scope;
    cr_assert_eq(ex_counting_scope_init(&scope).code, 0);
    ex_env_pair env;
    ex_env_pair_init(&env, &ex_key_get_allocator, ex_alloc_value(&frames.base), ex_env_empty());
    env.key2 = &ex_key_get_scheduler;
    env.value2 = ex_sched_value(ex_pool_scheduler(pool));
    for (int i = 0; i < 100; i++) {
        ex_task_fn fn = (i % 3 == 0) ? body_small_awaits : (i % 3 == 1) ? body_tuple_last : body_stop_last;
        cr_assert_eq(ex_spawn_env(ex_task_create(fn, NULL, NULL), ex_counting_scope_token(&scope), ex_env_of_pair(&env)).code, 0);
    }
    ex_result r = run(ex_counting_scope_join(&scope));
    expect_disp(&r, EX_DISP_VALUE);
    cr_assert_eq(ex_counting_scope_destroy(&scope).code, 0);
    cr_assert_eq(atomic_load(&frames.in_use), 0);
    ex_pool_destroy(pool);
    expect_no_leaks();
}

/* ================================================= the task holds its scheduler */

typedef struct hold_arg {
    gate *g;
    ex_scheduler to;         /* change to this first (vt NULL: stay) */
    pthread_t to_thread;
    bool moved;
} hold_arg;

static ex_task_result body_hold(ex_task *t, void *arg) {
    hold_arg *a = arg;
    if (a->to.vt) {
        ex_change_coroutine_scheduler(t, a->to);
        a->moved = pthread_equal(pthread_self(), a->to_thread);
    }
    ex_await_result r = ex_await(t, gate_sender_new(a->g));
    return ex_task_i64(r.status == EX_AWAIT_VALUE ? r.v[0].as.i : -1);
}

static ex_error noop0(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)in, (void)n, (void)out;
    return ex_ok();
}

/* Returns once the strand ran everything queued before (it serialises). */
static void strand_barrier(ex_scheduler strand) {
    ex_result r = run(ex_then(ex_schedule(strand), noop0, NULL, EX_SIG0, EX_SIG0));
    expect_disp(&r, EX_DISP_VALUE);
}

Test(exec_task, a_running_task_holds_its_scheduler) {
    ex_single_thread_context stc;
    cr_assert_eq(ex_single_thread_context_init(&stc).code, 0);
    ex_strand *strand = NULL;
    cr_assert_eq(ex_strand_create(ex_single_thread_context_scheduler(&stc), NULL, &strand).code, 0);
    ex_scheduler ss = ex_strand_scheduler(strand);
    gate g;
    atomic_init(&g.op, NULL);
    atomic_init(&g.opened, 0);
    hold_arg a;
    memset(&a, 0, sizeof a);
    a.g = &g;
    trec tr;
    trec_setup(&tr, ss, false);
    ex_operation *op = start_with(ex_task_create(body_hold, &a, NULL), &tr);
    cr_assert(gate_wait(&g));
    strand_barrier(ss);  /* the task is suspended: nothing queued or running on the strand */
    cr_assert_eq(ex_strand_destroy(strand).code, EX_EBUSY, "a suspended task must hold its scheduler");
    gate_open(&g, 4);
    cr_assert(wait_int(&tr.done));
    cr_assert_eq(tr.r.values, 1);
    cr_assert_eq(tr.r.v[0].as.i, 4);
    ex_operation_free(op);
    strand_barrier(ss);
    cr_assert_eq(ex_strand_destroy(strand).code, 0, "a completed task must have released its scheduler");
    cr_assert_eq(ex_single_thread_context_destroy(&stc).code, 0);
    expect_no_leaks();
}

/* The task holds the scheduler it moved to and, until it completes, the one
 * it left (the handle ex_change_coroutine_scheduler returned stays valid). */
Test(exec_task, change_coroutine_scheduler_keeps_the_hold_it_left) {
    ex_single_thread_context stc, stc2;
    cr_assert_eq(ex_single_thread_context_init(&stc).code, 0);
    cr_assert_eq(ex_single_thread_context_init(&stc2).code, 0);
    ex_strand *from = NULL, *to = NULL;
    cr_assert_eq(ex_strand_create(ex_single_thread_context_scheduler(&stc), NULL, &from).code, 0);
    cr_assert_eq(ex_strand_create(ex_single_thread_context_scheduler(&stc2), NULL, &to).code, 0);
    gate g;
    atomic_init(&g.op, NULL);
    atomic_init(&g.opened, 0);
    hold_arg a;
    memset(&a, 0, sizeof a);
    a.g = &g;
    a.to = ex_strand_scheduler(to);
    a.to_thread = ex_single_thread_context_thread_id(&stc2);
    trec tr;
    trec_setup(&tr, ex_strand_scheduler(from), false);
    ex_operation *op = start_with(ex_task_create(body_hold, &a, NULL), &tr);
    cr_assert(gate_wait(&g));
    strand_barrier(ex_strand_scheduler(from));
    strand_barrier(ex_strand_scheduler(to));
    cr_assert_eq(ex_strand_destroy(to).code, EX_EBUSY, "the task holds the scheduler it changed to");
    cr_assert_eq(ex_strand_destroy(from).code, EX_EBUSY, "the task holds the scheduler it left until it completes");
    gate_open(&g, 6);
    cr_assert(wait_int(&tr.done));
    cr_assert_eq(tr.r.values, 1);
    cr_assert_eq(tr.r.v[0].as.i, 6);
    cr_assert(a.moved);
    ex_operation_free(op);
    strand_barrier(ex_strand_scheduler(to));
    strand_barrier(ex_strand_scheduler(from));
    cr_assert_eq(ex_strand_destroy(to).code, 0);
    cr_assert_eq(ex_strand_destroy(from).code, 0, "a completed task released the scheduler it left");
    cr_assert_eq(ex_single_thread_context_destroy(&stc2).code, 0);
    cr_assert_eq(ex_single_thread_context_destroy(&stc).code, 0);
    expect_no_leaks();
}

/* ================================================================ launch */

typedef struct launch_ctx {
    ex_pool *pool;
    reg_alloc *stacks;
    atomic_int values, errors, stops;
    atomic_int on_pool;          /* handlers that ran on a worker of pool */
    atomic_int stack_live;       /* handlers that ran while their task's stack was still allocated */
    atomic_long sum;
    atomic_int last_error;
    atomic_int started;
} launch_ctx;

typedef struct launch_arg {
    launch_ctx *c;
    int kind;   /* 0 value, 1 error, 2 stopped, 3 wait for stop */
    int64_t v;
    _Atomic(uintptr_t) local;  /* an address on the task's stack */
} launch_arg;

static void lh_note(launch_arg *a) {
    launch_ctx *c = a->c;
    if (ex_pool_current_worker(c->pool) >= 0) atomic_fetch_add(&c->on_pool, 1);
    if (c->stacks && reg_live(c->stacks, atomic_load(&a->local))) atomic_fetch_add(&c->stack_live, 1);
}
static void lh_value(void *ctx, const ex_value *v, size_t n) {
    launch_arg *a = ctx;
    lh_note(a);
    if (n == 1) atomic_fetch_add(&a->c->sum, (long)v[0].as.i);
    atomic_fetch_add(&a->c->values, 1);
}
static void lh_error(void *ctx, ex_error e) {
    launch_arg *a = ctx;
    lh_note(a);
    atomic_store(&a->c->last_error, e.code);
    atomic_fetch_add(&a->c->errors, 1);
}
static void lh_stopped(void *ctx) {
    launch_arg *a = ctx;
    lh_note(a);
    atomic_fetch_add(&a->c->stops, 1);
}

static ex_task_result body_launched(ex_task *t, void *arg) {
    launch_arg *a = arg;
    volatile char here = 0;
    atomic_store(&a->local, (uintptr_t)&here);
    TCHECK(ex_scheduler_equal(ex_task_scheduler(t), ex_pool_scheduler(a->c->pool)));
    TCHECK(ex_pool_current_worker(a->c->pool) >= 0);
    TCHECK(ex_stop_token_stop_possible(ex_task_stop_token(t)));  /* the scope's token */
    atomic_fetch_add(&a->c->started, 1);
    ex_await_result r = ex_await(t, ex_schedule(ex_pool_scheduler(a->c->pool)));
    switch (a->kind) {
    case 0: return ex_task_i64(a->v);
    case 1: return ex_task_with_error(ex_err(EX_EUSER + 3, "launched task failed"));
    case 2: return ex_task_stopped();
    default:
        r = ex_await(t, stopwait_sender_new());  /* until the scope's stop request */
        TCHECK(r.status == EX_AWAIT_STOPPED);
        TCHECK(ex_pool_current_worker(a->c->pool) >= 0);
        return ex_task_i64(0);
    }
}

Test(exec_task, launch_runs_tasks_detached_into_a_scope) {
    ex_pool *pool = make_pool(2);
    reg_alloc stacks;
    reg_alloc_init(&stacks);
    launch_ctx c;
    memset(&c, 0, sizeof c);
    c.pool = pool;
    c.stacks = &stacks;
    ex_counting_scope scope;
    cr_assert_eq(ex_counting_scope_init(&scope).code, 0);
    ex_task_options o;
    memset(&o, 0, sizeof o);
    o.stack_allocator = &stacks.base;
    enum { N = 30 };
    launch_arg args[N];
    ex_task_handlers h[N];
    long want = 0;
    for (int i = 0; i < N; i++) {
        args[i] = (launch_arg){ &c, i % 3, i, 0 };
        h[i] = (ex_task_handlers){ lh_value, lh_error, lh_stopped, &args[i] };
        if (i % 3 == 0) want += i;
        ex_error e = ex_task_launch(ex_counting_scope_token(&scope), ex_pool_scheduler(pool),
                                    ex_task_create(body_launched, &args[i], &o), &h[i]);
        cr_assert_eq(e.code, 0, "%s", e.msg ? e.msg : "");
    }
    ex_result r = run(ex_counting_scope_join(&scope));
    expect_disp(&r, EX_DISP_VALUE);  /* errors went to the handler */
    cr_assert_eq(atomic_load(&c.values), N / 3);
    cr_assert_eq(atomic_load(&c.errors), N / 3);
    cr_assert_eq(atomic_load(&c.stops), N / 3);
    cr_assert_eq(atomic_load(&c.sum), want);
    cr_assert_eq(atomic_load(&c.last_error), EX_EUSER + 3);
    cr_assert_eq(atomic_load(&c.on_pool), N, "handlers run on the task's scheduler");
    cr_assert_eq(atomic_load(&c.stack_live), 0, "handlers run after the task's stack is gone");
    cr_assert_eq(stacks.live, 0);
    EXPECT_PROBE();
    cr_assert_eq(ex_counting_scope_destroy(&scope).code, 0);
    ex_pool_destroy(pool);
    reg_alloc_fini(&stacks);
    expect_no_leaks();
}

Test(exec_task, launch_with_the_scope_stop_token) {
    ex_pool *pool = make_pool(2);
    launch_ctx c;
    memset(&c, 0, sizeof c);
    c.pool = pool;
    ex_counting_scope scope;
    cr_assert_eq(ex_counting_scope_init(&scope).code, 0);
    enum { N = 8 };
    launch_arg args[N];
    ex_task_handlers hs[N];
    for (int i = 0; i < N; i++) {
        args[i] = (launch_arg){ &c, 3, 0, 0 };
        hs[i] = (ex_task_handlers){ lh_value, lh_error, lh_stopped, &args[i] };
        cr_assert_eq(ex_task_launch(ex_counting_scope_token(&scope), ex_pool_scheduler(pool),
                                    ex_task_create(body_launched, &args[i], NULL), &hs[i]).code, 0);
    }
    double deadline = test_now_s() + 20.0;
    while (atomic_load(&c.started) < N && test_now_s() < deadline) sched_yield();
    cr_assert_eq(atomic_load(&c.started), N);
    ex_counting_scope_request_stop(&scope);
    ex_result r = run(ex_counting_scope_join(&scope));
    expect_disp(&r, EX_DISP_VALUE);
    cr_assert_eq(atomic_load(&c.stops), N, "a stop request on the scope stops launched tasks");
    EXPECT_PROBE();
    cr_assert_eq(ex_counting_scope_destroy(&scope).code, 0);
    ex_pool_destroy(pool);
    expect_no_leaks();
}

Test(exec_task, launch_errors_release_the_task) {
    ex_pool *pool = make_pool(1);
    ex_counting_scope scope;
    cr_assert_eq(ex_counting_scope_init(&scope).code, 0);
    atomic_int ran = 0;
    /* invalid task, invalid scheduler */
    cr_assert_eq(ex_task_launch(ex_counting_scope_token(&scope), ex_pool_scheduler(pool), NULL, NULL).code, EX_EINVAL);
    cr_assert_eq(ex_task_launch(ex_counting_scope_token(&scope), ex_pool_scheduler(pool),
                                ex_invalid_sender(EX_EUSER, "bad"), NULL).code, EX_EINVAL);
    ex_scheduler none = { NULL, NULL };
    cr_assert_eq(ex_task_launch(ex_counting_scope_token(&scope), none, ex_task_create(body_mark, &ran, NULL), NULL).code,
                 EX_EINVAL);
    /* closed scope */
    ex_counting_scope_close(&scope);
    cr_assert_eq(ex_task_launch(ex_counting_scope_token(&scope), ex_pool_scheduler(pool),
                                ex_task_create(body_mark, &ran, NULL), NULL).code, EX_ESHUTDOWN);
    ex_result r = run(ex_counting_scope_join(&scope));
    expect_disp(&r, EX_DISP_VALUE);
    cr_assert_eq(atomic_load(&ran), 0);
    cr_assert_eq(ex_counting_scope_destroy(&scope).code, 0);
    ex_pool_destroy(pool);
    expect_no_leaks();
}

Test(exec_task, launch_without_an_error_handler_reports_on_stderr) {
    ex_pool *pool = make_pool(1);
    launch_ctx c;
    memset(&c, 0, sizeof c);
    c.pool = pool;
    ex_counting_scope scope;
    cr_assert_eq(ex_counting_scope_init(&scope).code, 0);
    FILE *cap = tmpfile();
    cr_assert_not_null(cap);
    fflush(stderr);
    int saved = dup(2);
    cr_assert_geq(saved, 0);
    dup2(fileno(cap), 2);
    launch_arg a = { &c, 1, 0, 0 };
    ex_task_handlers h = { lh_value, NULL, lh_stopped, &a };  /* no on_error */
    ex_error e = ex_task_launch(ex_counting_scope_token(&scope), ex_pool_scheduler(pool),
                                ex_task_create(body_launched, &a, NULL), &h);
    launch_arg b = { &c, 0, 9, 0 };
    ex_error e2 = ex_task_launch(ex_counting_scope_token(&scope), ex_pool_scheduler(pool),
                                 ex_task_create(body_launched, &b, NULL), NULL);  /* h NULL: dropped */
    ex_result r = run(ex_counting_scope_join(&scope));
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    cr_assert_eq(e.code, 0);
    cr_assert_eq(e2.code, 0);
    expect_disp(&r, EX_DISP_VALUE);
    char buf[1024] = { 0 };
    rewind(cap);
    size_t got = fread(buf, 1, sizeof buf - 1, cap);
    fclose(cap);
    cr_assert_gt(got, 0, "an unhandled error of a launched task must be reported on stderr");
    cr_assert_not_null(strstr(buf, "launched task failed"), "stderr: %s", buf);
    cr_assert_eq(atomic_load(&c.values), 0, "h NULL: results dropped");
    EXPECT_PROBE();
    cr_assert_eq(ex_counting_scope_destroy(&scope).code, 0);
    ex_pool_destroy(pool);
    expect_no_leaks();
}

Test(exec_task, launch_out_of_memory_sweep) {
    ex_pool *pool = make_pool(2);
    launch_ctx c;
    memset(&c, 0, sizeof c);
    c.pool = pool;
    int ok = 0, enomem = 0;
    long k, base = test_stats.in_use;  /* the pool's */
    for (k = 1; k < 1000; k++) {
        ex_counting_scope scope;
        cr_assert_eq(ex_counting_scope_init(&scope).code, 0);
        atomic_store(&c.values, 0);
        atomic_store(&c.started, 0);
        launch_arg a = { &c, 0, 5, 0 };
        ex_task_handlers h = { lh_value, lh_error, lh_stopped, &a };
        ex_sender *task = ex_task_create(body_launched, &a, NULL);
        test_alloc_reset();
        test_alloc_fail_at(k);
        ex_error e = ex_task_launch(ex_counting_scope_token(&scope), ex_pool_scheduler(pool), task, &h);
        long failed = test_stats.failed;
        test_alloc_fail_at(0);
        ex_result r = run(ex_counting_scope_join(&scope));
        cr_assert(e.code == 0 || e.code == EX_ENOMEM, "k=%ld: launch error %d (%s)", k, e.code, e.msg ? e.msg : "");
        expect_disp(&r, EX_DISP_VALUE);
        if (e.code == 0) {
            ok++;
            cr_assert_eq(atomic_load(&c.started), 1, "k=%ld", k);
            cr_assert_eq(atomic_load(&c.values) + atomic_load(&c.errors), 1, "k=%ld: handlers", k);
        } else {
            enomem++;
            cr_assert_eq(atomic_load(&c.started), 0, "k=%ld: a refused task ran", k);
        }
        atomic_store(&c.errors, 0);
        cr_assert_eq(ex_counting_scope_destroy(&scope).code, 0);
        cr_assert_eq(test_stats.in_use, base, "k=%ld: %ld block(s) leaked", k, test_stats.in_use - base);
        if (!failed) break;
    }
    cr_assert_lt(k, 1000);
    cr_assert_geq(enomem, 1);
    cr_assert_geq(ok, 1);
    EXPECT_PROBE();
    ex_pool_destroy(pool);
    expect_no_leaks();
}

/* ===================================== completing inside the stop request */

/* Regression (found by the soak): a stop request on the task's receiver
 * is forwarded to the task's own source; a callback there may complete the
 * awaited sender, the task resumes and finishes inline, inside the
 * request, and its receiver frees the operation.  request_stop must not
 * touch the task's source after that.  The operation comes from pages made
 * inaccessible when freed, so a late access crashes the test. */

enum { GUARD_MAX = 8 };
typedef struct guard_alloc {
    ex_allocator base;
    void *maps[GUARD_MAX];
    size_t lens[GUARD_MAX];
    int n;
} guard_alloc;

static size_t page_round(size_t size) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (size + page - 1) / page * page;
}

static void *guard_allocate(void *ctx, size_t size, size_t align) {
    (void)align;
    guard_alloc *g = ctx;
    if (g->n == GUARD_MAX) return NULL;
    void *p = mmap(NULL, page_round(size), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    g->maps[g->n] = p;
    g->lens[g->n++] = page_round(size);
    return p;
}

/* Kept mapped but inaccessible until guard_fini: any late access faults. */
static void guard_deallocate(void *ctx, void *p, size_t size, size_t align) {
    (void)ctx, (void)align;
    mprotect(p, page_round(size), PROT_NONE);
}

static void guard_fini(guard_alloc *g) {
    for (int i = 0; i < g->n; i++) munmap(g->maps[i], g->lens[i]);
    g->n = 0;
}


static ex_task_result body_until_stopped(ex_task *t, void *arg) {
    (void)arg;
    ex_await_result r = ex_await(t, until_stopped());
    TCHECK(r.status == EX_AWAIT_STOPPED);
    return ex_task_void();
}

typedef struct freeing_rcvr {
    ex_env_pair env, alloc_env;
    ex_operation *op;
    int values, errors, stops;
} freeing_rcvr;

static void frv_value(void *self, const ex_value *v, size_t n) {
    (void)v, (void)n;
    freeing_rcvr *r = self;
    r->values++;
    ex_operation_free(r->op);
}
static void frv_error(void *self, ex_error e) {
    (void)e;
    freeing_rcvr *r = self;
    r->errors++;
    ex_operation_free(r->op);
}
static void frv_stopped(void *self) {
    freeing_rcvr *r = self;
    r->stops++;
    ex_operation_free(r->op);  /* allowed inside the completion */
}
static ex_env frv_env(void *self) { return ex_env_of_pair(&((freeing_rcvr *)self)->env); }
static const ex_receiver_vtable freeing_rcvr_vt = { frv_value, frv_error, frv_stopped, frv_env, NULL };

Test(exec_task, completion_inside_the_receivers_stop_request_may_free_the_task) {
    guard_alloc g;
    memset(&g, 0, sizeof g);
    g.base = (ex_allocator){ guard_allocate, guard_deallocate, &g, "test.guard", NULL };
    ex_stop_source src;
    ex_stop_source_init(&src);
    freeing_rcvr r;
    memset(&r, 0, sizeof r);
    ex_env_pair_init(&r.alloc_env, &ex_key_get_allocator, ex_alloc_value(&g.base), ex_env_empty());
    ex_env_pair_init(&r.env, &ex_key_get_scheduler, ex_sched_value(ex_inline_scheduler()), ex_env_of_pair(&r.alloc_env));
    r.env.key2 = &ex_key_get_stop_token;
    r.env.value2 = ex_token_value(ex_stop_source_token(&src));
    ex_sender *task = ex_task_create(body_until_stopped, NULL, NULL);
    ex_error e = ex_connect_alloc(task, (ex_receiver){ &freeing_rcvr_vt, &r }, &r.op);
    ex_sender_release(task);
    cr_assert_eq(e.code, 0, "%s", e.msg ? e.msg : "");
    ex_start(r.op);                     /* the body suspends in its await */
    cr_assert_eq(r.stops + r.values + r.errors, 0);
    ex_stop_source_request_stop(&src);  /* the task completes, and is freed, inside */
    cr_assert_eq(r.stops, 1, "the task completed stopped (values %d, errors %d)", r.values, r.errors);
    cr_assert_eq(r.values + r.errors, 0);
    EXPECT_PROBE();
    guard_fini(&g);
    expect_no_leaks();
}

/* ================================================================ yield */

/* ex_task_yield on a pool lets the work queued on the worker run first:
 * each round queues an increment (on the worker's deque, as anything
 * started from a worker) and yields; when the task resumes, the increment
 * has run. */
typedef struct yield_arg {
    ex_pool *pool;
    ex_counting_scope *scope;
    atomic_int count;
    int rounds, behind;
} yield_arg;

static ex_error yield_incr(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    atomic_fetch_add(&((yield_arg *)ctx)->count, 1);
    return ex_ok();
}

static ex_task_result body_yield_rounds(ex_task *t, void *arg) {
    yield_arg *a = arg;
    for (int i = 0; i < a->rounds; i++) {
        ex_sender *incr = ex_then(ex_schedule(ex_pool_scheduler(a->pool)), yield_incr, a, EX_SIG(), EX_SIG());
        TCHECK(ex_spawn(incr, ex_counting_scope_token(a->scope)).code == 0);
        ex_error e = ex_task_yield(t);
        TCHECK(e.code == 0);
        TCHECK(ex_pool_current_worker(a->pool) == 0);
        if (atomic_load(&a->count) == i + 1) a->behind++;
    }
    return ex_task_void();
}

Test(exec_task, yield_on_a_pool_runs_the_queued_work_first) {
    ex_pool *pool = make_pool(1);
    ex_counting_scope scope;
    cr_assert_eq(ex_counting_scope_init(&scope).code, 0);
    yield_arg a;
    memset(&a, 0, sizeof a);
    a.pool = pool;
    a.scope = &scope;
    a.rounds = 200;
    ex_result r = run(ex_starts_on(ex_pool_scheduler(pool), ex_task_create(body_yield_rounds, &a, NULL)));
    expect_disp(&r, EX_DISP_VALUE);
    EXPECT_PROBE();
    cr_assert_eq(a.behind, a.rounds, "the queued increment ran before the task resumed in %d of %d rounds", a.behind,
                 a.rounds);
    r = run(ex_counting_scope_join(&scope));
    expect_disp(&r, EX_DISP_VALUE);
    cr_assert_eq(atomic_load(&a.count), a.rounds);
    cr_assert_eq(ex_counting_scope_destroy(&scope).code, 0);
    ex_pool_destroy(pool);
    expect_no_leaks();
}

/* Without a yield hook (inline scheduler, run_loop) the yield is an await
 * of schedule; a stopped task does not yield. */
static ex_task_result body_yield_plain(ex_task *t, void *arg) {
    (void)arg;
    for (int i = 0; i < 1000; i++) TCHECK(ex_task_yield(t).code == 0);
    ex_await_result r = ex_await(t, ex_just_stopped());
    TCHECK(r.status == EX_AWAIT_STOPPED);
    TCHECK(ex_task_yield(t).code == EX_ECANCELED);
    return ex_task_void();
}

Test(exec_task, yield_without_a_hook_and_when_stopped) {
    ex_task_options o;
    memset(&o, 0, sizeof o);
    o.affinity = EX_TASK_INLINE;
    ex_result r = run(ex_task_create(body_yield_plain, NULL, &o));  /* the inline scheduler */
    expect_disp(&r, EX_DISP_STOPPED);
    EXPECT_PROBE();
    r = run(ex_task_create(body_yield_plain, NULL, NULL));  /* sync_wait's run_loop */
    expect_disp(&r, EX_DISP_STOPPED);
    EXPECT_PROBE();
    expect_no_leaks();
}
