/* Counting scopes (cexec/scope.h): ex_simple_counting_scope and
 * ex_counting_scope, ex_spawn / ex_spawn_env, ex_spawn_future, join,
 * close, request_stop, destroy, and the association primitives - C++26
 * simple_counting_scope / counting_scope with the documented deviations
 * (errors of spawned work are kept and reported by join; spawning into a
 * closed scope is EX_ESHUTDOWN).
 *
 * Nothing here asserts on timing: sleeps only give threads a chance to
 * reach a point, and every wait for asynchronous work is bounded so a lost
 * completion fails with a message instead of hanging. */
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/helpers.h"

TEST_SUITE(exec_scope, 20);

/* ================================================================ fixtures */

#define WAIT_LIMIT_S 8.0

static void wait_int(atomic_int *c, int target, const char *what) {
    double end = test_now_s() + WAIT_LIMIT_S;
    while (atomic_load(c) < target && test_now_s() < end) sched_yield();
    cr_assert_geq(atomic_load(c), target, "timed out waiting for %s: %d of %d", what, atomic_load(c), target);
}

static ex_pool *pool_new(unsigned threads) {
    ex_pool_config c;
    memset(&c, 0, sizeof c);
    c.threads = threads;
    c.name_prefix = "scope";
    ex_pool *p = NULL;
    ex_error e = ex_pool_create(&c, &p);
    cr_assert_eq(e.code, 0, "ex_pool_create: %s", e.msg ? e.msg : "");
    return p;
}

static void pool_free(ex_pool *p) {
    ex_error e = ex_pool_destroy(p);
    cr_assert_eq(e.code, 0, "ex_pool_destroy: %s", e.msg ? e.msg : "");
}

/* ------------------------------------------------ either kind of scope */

typedef struct any_scope {
    bool counting;
    ex_simple_counting_scope simple;
    ex_counting_scope full;
} any_scope;

static const char *kind_name(const any_scope *s) { return s->counting ? "counting_scope" : "simple_counting_scope"; }

static void sc_init(any_scope *s, bool counting) {
    memset(s, 0, sizeof *s);
    s->counting = counting;
    ex_error e = counting ? ex_counting_scope_init(&s->full) : ex_simple_counting_scope_init(&s->simple);
    cr_assert_eq(e.code, 0, "scope init: %s", e.msg ? e.msg : "");
}

static ex_scope_token sc_token(any_scope *s) {
    return s->counting ? ex_counting_scope_token(&s->full) : ex_simple_counting_scope_token(&s->simple);
}

static void sc_close(any_scope *s) {
    if (s->counting) ex_counting_scope_close(&s->full);
    else ex_simple_counting_scope_close(&s->simple);
}

static ex_sender *sc_join(any_scope *s) {
    return s->counting ? ex_counting_scope_join(&s->full) : ex_simple_counting_scope_join(&s->simple);
}

static ex_error sc_destroy(any_scope *s) {
    return s->counting ? ex_counting_scope_destroy(&s->full) : ex_simple_counting_scope_destroy(&s->simple);
}

static void sc_destroy_ok(any_scope *s) {
    ex_error e = sc_destroy(s);
    cr_assert_eq(e.code, 0, "%s destroy: %d (%s)", kind_name(s), e.code, e.msg ? e.msg : "");
}

/* Joins through sync_wait and expects set_value(). */
static void sc_join_ok(any_scope *s) {
    ex_result r = ex_sync_wait(sc_join(s));
    cr_assert_eq(r.disposition, EX_DISP_VALUE, "%s join: disposition %d (%d: %s)", kind_name(s), r.disposition,
                 r.error.code, r.error.msg ? r.error.msg : "");
    cr_assert_eq(r.n, 0);
    ex_result_destroy(&r);
}

/* Connects a join to rc (heap storage) and starts it on this thread. */
typedef struct join_run {
    ex_sender *join;
    ex_operation *op;
} join_run;

static join_run join_start_rec(any_scope *s, rec *rc) {
    join_run j;
    j.join = sc_join(s);
    j.op = run_start(j.join, rc);
    return j;
}

static void join_run_free(join_run *j) {
    run_destroy(j->op);
    ex_sender_release(j->join);
}

/* --------------------------------------------- a thread-safe receiver */

static ex_operation *arec_start(arec *r, const ex_sender *s) {
    ex_operation *op = NULL;
    ex_receiver x = { &arec_vt, r };
    ex_error e = ex_connect_alloc(s, x, &op);
    cr_assert_eq(e.code, 0, "ex_connect_alloc: %s", e.msg ? e.msg : "");
    ex_start(op);
    return op;
}

static void arec_wait(arec *r, const char *what) {
    double end = test_now_s() + WAIT_LIMIT_S;
    while (atomic_load(&r->total) < 1 && test_now_s() < end) sched_yield();
    cr_assert_eq(atomic_load(&r->total), 1, "%s did not complete exactly once (%d completions)", what,
                 atomic_load(&r->total));
}

/* ------------------------------------------------------- work to spawn */

/* Counts its runs. */
static ex_error inc_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    atomic_fetch_add((atomic_int *)ctx, 1);
    return ex_ok();
}

/* then(schedule(pool), ++*counter) */
static ex_sender *pool_inc(ex_pool *p, atomic_int *counter) {
    return ex_then(ex_schedule(ex_pool_scheduler(p)), inc_fn, counter, EX_SIG0, EX_SIG0);
}

/* then(just(), ++*counter): runs inside start, if it is ever started. */
static ex_sender *inline_inc(atomic_int *counter) { return ex_then(ex_just(), inc_fn, counter, EX_SIG0, EX_SIG0); }

/* Work that holds its worker until the gate opens; produces int 7. */
typedef struct gate {
    atomic_int open, started, finished;
    ex_pool *pool;
    const void *thread;   /* where it ran */
    int worker;
} gate;

static void gate_init(gate *g, ex_pool *p) {
    memset(g, 0, sizeof *g);
    g->pool = p;
    g->worker = -2;
}

static void gate_wait_open(gate *g) {
    double end = test_now_s() + WAIT_LIMIT_S;
    while (!atomic_load(&g->open) && test_now_s() < end) sched_yield();
}

static ex_error gate_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    gate *g = ctx;
    (void)in, (void)n;
    g->thread = test_thread_id();
    g->worker = ex_pool_current_worker(g->pool);
    atomic_fetch_add(&g->started, 1);
    gate_wait_open(g);
    out[0] = ex_int(7);
    atomic_fetch_add(&g->finished, 1);
    return ex_ok();
}

static ex_sender *gated(gate *g) {
    return ex_then(ex_schedule(ex_pool_scheduler(g->pool)), gate_fn, g, EX_SIG0, EX_SIG(EX_T_INT));
}

/* Work that waits (bounded) for a stop request on the stop token of its
 * environment; produces bool(stop was observed). */
typedef struct stopper {
    ex_pool *pool;
    atomic_int started, observed, no_token, finished;
} stopper;

static void stopper_init(stopper *s, ex_pool *p) {
    memset(s, 0, sizeof *s);
    s->pool = p;
}

static ex_error poll_stop_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    stopper *s = ctx;
    cr_assert_eq(n, 1);
    ex_stop_token t = in[0].as.token;
    atomic_fetch_add(&s->started, 1);
    bool seen = false;
    if (!ex_stop_token_stop_possible(t)) {
        atomic_fetch_add(&s->no_token, 1);
    } else {
        double end = test_now_s() + WAIT_LIMIT_S;
        while (!(seen = ex_stop_token_stop_requested(t)) && test_now_s() < end) sched_yield();
    }
    if (seen) atomic_fetch_add(&s->observed, 1);
    out[0] = ex_bool(seen);
    atomic_fetch_add(&s->finished, 1);
    return ex_ok();
}

/* starts_on(pool, then(read_env(get_stop_token), poll)) */
static ex_sender *stop_waiter(stopper *s) {
    return ex_starts_on(ex_pool_scheduler(s->pool),
                        ex_then(ex_read_env(&ex_key_get_stop_token, EX_T_TOKEN), poll_stop_fn, s, EX_SIG(EX_T_TOKEN),
                                EX_SIG(EX_T_BOOL)));
}

/* let_value(read_env(get_stop_token), token -> starts_on(pool, then(just(token), poll))) */
static ex_sender *let_stop_fn(void *ctx, const ex_value *in, size_t n) {
    stopper *s = ctx;
    if (n != 1 || in[0].type != EX_T_TOKEN) return NULL;
    return ex_starts_on(ex_pool_scheduler(s->pool),
                        ex_then(ex_just(in[0]), poll_stop_fn, s, EX_SIG(EX_T_TOKEN), EX_SIG(EX_T_BOOL)));
}

static ex_sender *let_stop_waiter(stopper *s) {
    return ex_let_value(ex_read_env(&ex_key_get_stop_token, EX_T_TOKEN), let_stop_fn, s, EX_SIG(EX_T_TOKEN));
}

/* then(read_env(key), record the value) - runs inline. */
typedef struct seen_value {
    atomic_int calls;
    ex_value v;
} seen_value;

static ex_error record_value_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    seen_value *s = ctx;
    (void)out;
    if (n == 1) s->v = in[0];
    atomic_fetch_add(&s->calls, 1);
    return ex_ok();
}

static ex_sender *read_into(const ex_key *key, ex_type type, seen_value *s) {
    return ex_then(ex_read_env(key, type), record_value_fn, s, EX_SIG_VARIADIC, EX_SIG0);
}

/* Fails with the error in ctx on a pool worker. */
static ex_error fail_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    return *(const ex_error *)ctx;
}

/* --------------------------------------------- a second counting allocator */

typedef struct count_alloc {
    ex_allocator a;
    atomic_long allocs, frees, in_use;
    long fail_at;   /* fail allocation number fail_at (1-based); 0: never */
} count_alloc;

static void *ca_allocate(void *ctx, size_t size, size_t align) {
    count_alloc *c = ctx;
    long nth = atomic_fetch_add(&c->allocs, 1) + 1;
    if (c->fail_at && nth == c->fail_at) return NULL;
    void *p = NULL;
    if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size ? size : 1)) return NULL;
    atomic_fetch_add(&c->in_use, 1);
    return p;
}

static void ca_deallocate(void *ctx, void *p, size_t size, size_t align) {
    count_alloc *c = ctx;
    (void)size, (void)align;
    free(p);
    atomic_fetch_add(&c->frees, 1);
    atomic_fetch_sub(&c->in_use, 1);
}

static void ca_init(count_alloc *c) {
    memset(c, 0, sizeof *c);
    c->a.allocate = ca_allocate;
    c->a.deallocate = ca_deallocate;
    c->a.ctx = c;
    c->a.name = "second";
}

/* Reads the counter at the moment the join completes. */
typedef struct join_seen {
    atomic_int *counter;
    int seen, calls;
} join_seen;

static ex_error join_seen_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    join_seen *j = ctx;
    (void)in, (void)n;
    j->calls++;
    j->seen = atomic_load(j->counter);
    out[0] = ex_int(j->seen);
    return ex_ok();
}

static const ex_key user_key = { "test.scope_key", true };

/* =================================================================== join */

Test(exec_scope, join_with_nothing_spawned_completes_inline) {
    for (int k = 0; k < 2; k++) {
        any_scope s;
        sc_init(&s, k);
        rec rc;
        rec_init(&rc);
        ex_sender *j = sc_join(&s);
        cr_assert_eq(ex_sender_status(j).code, 0);
        _Alignas(max_align_t) unsigned char buf[256];
        ex_operation *op;
        cr_assert_leq(ex_sender_op_size(j), sizeof buf);
        cr_assert_eq(ex_connect(j, rec_receiver(&rc), buf, sizeof buf, &op).code, 0);
        cr_assert_eq(rec_total(&rc), 0, "connect must not start the join");
        ex_start(op);
        cr_assert_eq(rc.values, 1, "%s: join of an empty scope completes inside start", kind_name(&s));
        cr_assert_eq(rec_total(&rc), 1);
        cr_assert_eq(rc.n, 0);
        cr_assert_eq(rc.thread, test_thread_id());
        ex_operation_destroy(op);
        ex_sender_release(j);
        sc_destroy_ok(&s);
    }
    expect_no_leaks();
}

Test(exec_scope, join_sender_may_be_connected_many_times) {
    for (int k = 0; k < 2; k++) {
        any_scope s;
        sc_init(&s, k);
        ex_sender *j = sc_join(&s);
        for (int i = 0; i < 3; i++) {
            ex_result r = ex_sync_wait(ex_sender_retain(j));
            cr_assert_eq(r.disposition, EX_DISP_VALUE);
        }
        ex_sender_release(j);
        sc_destroy_ok(&s);
    }
    expect_no_leaks();
}

Test(exec_scope, spawn_many_then_join_waits_for_all) {
    ex_pool *p = pool_new(2);
    for (int k = 0; k < 2; k++) {
        any_scope s;
        sc_init(&s, k);
        atomic_int counter = 0;
        enum { N = 1000 };
        for (int i = 0; i < N; i++) {
            ex_error e = ex_spawn(pool_inc(p, &counter), sc_token(&s));
            cr_assert_eq(e.code, 0, "spawn %d: %s", i, e.msg ? e.msg : "");
        }
        join_seen js = { &counter, -1, 0 };
        ex_result r = ex_sync_wait(ex_then(sc_join(&s), join_seen_fn, &js, EX_SIG0, EX_SIG(EX_T_INT)));
        cr_assert_eq(r.disposition, EX_DISP_VALUE, "%s: disposition %d", kind_name(&s), r.disposition);
        cr_assert_eq(js.calls, 1);
        cr_assert_eq(js.seen, N, "%s: the join completed when %d of %d spawned operations had run", kind_name(&s),
                     js.seen, N);
        ex_result_destroy(&r);
        sc_destroy_ok(&s);
    }
    pool_free(p);
    expect_no_leaks();
}

Test(exec_scope, join_started_before_the_work_finishes_completes_on_the_worker) {
    ex_pool *p = pool_new(2);
    for (int k = 0; k < 2; k++) {
        any_scope s;
        sc_init(&s, k);
        gate g;
        gate_init(&g, p);
        cr_assert_eq(ex_spawn(gated(&g), sc_token(&s)).code, 0);
        wait_int(&g.started, 1, "the gated work to start");
        arec jr;
        arec_init(&jr, p);
        ex_sender *j = sc_join(&s);
        ex_operation *op = arec_start(&jr, j);
        test_sleep_ms(20);
        cr_assert_eq(atomic_load(&jr.total), 0, "%s: join completed while spawned work was running", kind_name(&s));
        ex_error e = sc_destroy(&s);
        cr_assert_eq(e.code, EX_EBUSY, "%s: destroy with a waiting join and outstanding work: %d", kind_name(&s),
                     e.code);
        cr_assert_not_null(e.msg);
        atomic_store(&g.open, 1);
        arec_wait(&jr, "the join");
        cr_assert_eq(atomic_load(&jr.values), 1);
        cr_assert_geq(jr.worker, 0, "%s: the join completes on the worker that ran the last work", kind_name(&s));
        cr_assert_eq(jr.thread, g.thread, "%s: the join completed on another thread than the last work",
                     kind_name(&s));
        ex_operation_free(op);
        ex_sender_release(j);
        sc_destroy_ok(&s);
    }
    pool_free(p);
    expect_no_leaks();
}

Test(exec_scope, two_waiting_joins_both_complete) {
    ex_pool *p = pool_new(2);
    for (int k = 0; k < 2; k++) {
        any_scope s;
        sc_init(&s, k);
        gate g;
        gate_init(&g, p);
        cr_assert_eq(ex_spawn(gated(&g), sc_token(&s)).code, 0);
        arec j1, j2;
        arec_init(&j1, p);
        arec_init(&j2, p);
        ex_sender *j = sc_join(&s);
        ex_operation *o1 = arec_start(&j1, j);
        ex_operation *o2 = arec_start(&j2, j);
        cr_assert_eq(atomic_load(&j1.total) + atomic_load(&j2.total), 0);
        atomic_store(&g.open, 1);
        arec_wait(&j1, "the first join");
        arec_wait(&j2, "the second join");
        cr_assert_eq(atomic_load(&j1.values) + atomic_load(&j2.values), 2);
        ex_operation_free(o1);
        ex_operation_free(o2);
        ex_sender_release(j);
        sc_destroy_ok(&s);
    }
    pool_free(p);
    expect_no_leaks();
}

Test(exec_scope, spawn_while_a_join_waits_is_accepted_and_awaited) {
    ex_pool *p = pool_new(2);
    for (int k = 0; k < 2; k++) {
        any_scope s;
        sc_init(&s, k);
        gate g1, g2;
        gate_init(&g1, p);
        gate_init(&g2, p);
        cr_assert_eq(ex_spawn(gated(&g1), sc_token(&s)).code, 0);
        arec jr;
        arec_init(&jr, p);
        ex_sender *j = sc_join(&s);
        ex_operation *op = arec_start(&jr, j);
        /* The scope is joining but not closed: new work is still associated. */
        ex_error e = ex_spawn(gated(&g2), sc_token(&s));
        cr_assert_eq(e.code, 0, "%s: spawn while joining: %d (%s)", kind_name(&s), e.code, e.msg ? e.msg : "");
        atomic_store(&g1.open, 1);
        wait_int(&g1.finished, 1, "the first work");
        test_sleep_ms(20);
        cr_assert_eq(atomic_load(&jr.total), 0, "%s: join completed while the second work was outstanding",
                     kind_name(&s));
        atomic_store(&g2.open, 1);
        arec_wait(&jr, "the join");
        cr_assert_eq(atomic_load(&jr.values), 1);
        cr_assert_eq(atomic_load(&g2.finished), 1);
        ex_operation_free(op);
        ex_sender_release(j);
        sc_destroy_ok(&s);
    }
    pool_free(p);
    expect_no_leaks();
}

/* ============================================================ closed scope */

Test(exec_scope, spawn_after_close_is_eshutdown_and_releases_the_sender) {
    for (int k = 0; k < 2; k++) {
        any_scope s;
        sc_init(&s, k);
        sc_close(&s);
        atomic_int counter = 0;
        ex_error e = ex_spawn(inline_inc(&counter), sc_token(&s));
        cr_assert_eq(e.code, EX_ESHUTDOWN, "%s: spawn after close: %d", kind_name(&s), e.code);
        cr_assert_not_null(e.msg);
        cr_assert_eq(atomic_load(&counter), 0, "a refused sender must not run");
        cr_assert_not(ex_scope_token_try_associate(sc_token(&s)));
        sc_join_ok(&s);
        sc_destroy_ok(&s);
    }
    expect_no_leaks();
}

Test(exec_scope, spawn_after_a_completed_join_is_eshutdown) {
    for (int k = 0; k < 2; k++) {
        any_scope s;
        sc_init(&s, k);
        atomic_int counter = 0;
        cr_assert_eq(ex_spawn(inline_inc(&counter), sc_token(&s)).code, 0);
        cr_assert_eq(atomic_load(&counter), 1);
        sc_join_ok(&s);
        ex_error e = ex_spawn(inline_inc(&counter), sc_token(&s));
        cr_assert_eq(e.code, EX_ESHUTDOWN, "%s: spawn after join: %d", kind_name(&s), e.code);
        cr_assert_not_null(e.msg);
        cr_assert_eq(atomic_load(&counter), 1);
        sc_destroy_ok(&s);
    }
    expect_no_leaks();
}

Test(exec_scope, spawn_of_null_or_invalid_sender_is_einval) {
    ex_pool *p = pool_new(1);
    ex_value v[EX_MAX_ARITY + 1];
    for (int i = 0; i <= EX_MAX_ARITY; i++) v[i] = ex_int(i);
    for (int k = 0; k < 2; k++) {
        any_scope s;
        sc_init(&s, k);
        atomic_int counter = 0;
        ex_error e = ex_spawn(NULL, sc_token(&s));
        cr_assert_eq(e.code, EX_EINVAL);
        cr_assert_not_null(e.msg);
        e = ex_spawn(ex_just_n(v, EX_MAX_ARITY + 1), sc_token(&s));
        cr_assert_eq(e.code, EX_EINVAL, "invalid sender: %d", e.code);
        cr_assert_not_null(e.msg);
        ex_scope_token none = { NULL };
        e = ex_spawn(inline_inc(&counter), none);
        cr_assert_eq(e.code, EX_EINVAL, "NULL scope token: %d", e.code);
        /* Connect failure: ex_on needs a scheduler in the environment. */
        e = ex_spawn(ex_on(ex_pool_scheduler(p), inline_inc(&counter)), sc_token(&s));
        cr_assert_eq(e.code, EX_EINVAL, "connect failure: %d", e.code);
        cr_assert_not_null(e.msg);
        cr_assert_eq(atomic_load(&counter), 0);
        /* Nothing stayed associated. */
        rec rc;
        rec_init(&rc);
        join_run jrun = join_start_rec(&s, &rc);
        cr_assert_eq(rc.values, 1, "%s: a refused spawn left an association", kind_name(&s));
        join_run_free(&jrun);
        sc_destroy_ok(&s);
    }
    pool_free(p);
    expect_no_leaks();
}

/* ================================================================ results */

Test(exec_scope, failing_spawned_work_makes_join_complete_with_the_first_error) {
    static int payload1, payload2;
    for (int k = 0; k < 2; k++) {
        any_scope s;
        sc_init(&s, k);
        atomic_int counter = 0;
        cr_assert_eq(ex_spawn(inline_inc(&counter), sc_token(&s)).code, 0);
        cr_assert_eq(ex_spawn(ex_just_error(ex_err_data(EX_EUSER + 1, "first", &payload1)), sc_token(&s)).code, 0);
        cr_assert_eq(ex_spawn(ex_just_error(ex_err_data(EX_EUSER + 2, "second", &payload2)), sc_token(&s)).code, 0);
        cr_assert_eq(ex_spawn(inline_inc(&counter), sc_token(&s)).code, 0);
        ex_result r = ex_sync_wait(sc_join(&s));
        expect_error(&r, EX_EUSER + 1);
        cr_assert_str_eq(r.error.msg, "first");
        cr_assert_eq(r.error.data, &payload1);
        cr_assert_eq(atomic_load(&counter), 2);
        sc_destroy_ok(&s);
    }
    expect_no_leaks();
}

Test(exec_scope, failing_work_on_the_pool_is_reported_by_join) {
    ex_pool *p = pool_new(2);
    static const ex_error boom = { EX_EUSER + 3, "boom on a worker", NULL };
    for (int k = 0; k < 2; k++) {
        any_scope s;
        sc_init(&s, k);
        atomic_int counter = 0;
        for (int i = 0; i < 200; i++) {
            ex_sender *w = i == 100 ? ex_then(ex_schedule(ex_pool_scheduler(p)), fail_fn, (void *)&boom, EX_SIG0, EX_SIG0)
                                    : pool_inc(p, &counter);
            cr_assert_eq(ex_spawn(w, sc_token(&s)).code, 0);
        }
        ex_result r = ex_sync_wait(sc_join(&s));
        expect_error(&r, EX_EUSER + 3);
        cr_assert_str_eq(r.error.msg, "boom on a worker");
        cr_assert_eq(atomic_load(&counter), 199, "join completed before all work ran");
        sc_destroy_ok(&s);
    }
    pool_free(p);
    expect_no_leaks();
}

Test(exec_scope, spawned_values_are_discarded) {
    ex_pool *p = pool_new(2);
    for (int k = 0; k < 2; k++) {
        any_scope s;
        sc_init(&s, k);
        gate g;
        gate_init(&g, p);
        atomic_store(&g.open, 1);
        ex_value inner[2] = { ex_int(1), ex_int(2) };
        ex_tuple t = { 0, 2, inner };
        cr_assert_eq(ex_spawn(ex_just(ex_int(5), ex_str("five")), sc_token(&s)).code, 0);
        cr_assert_eq(ex_spawn(ex_just(ex_tuple_value(&t)), sc_token(&s)).code, 0);
        cr_assert_eq(ex_spawn(gated(&g), sc_token(&s)).code, 0);
        ex_result r = ex_sync_wait(sc_join(&s));
        cr_assert_eq(r.disposition, EX_DISP_VALUE);
        cr_assert_eq(r.n, 0, "join completes with set_value() whatever the spawned work produced");
        cr_assert_eq(atomic_load(&g.finished), 1);
        ex_result_destroy(&r);
        sc_destroy_ok(&s);
    }
    pool_free(p);
    expect_no_leaks();
}

Test(exec_scope, stopped_spawned_work_is_not_an_error) {
    for (int k = 0; k < 2; k++) {
        any_scope s;
        sc_init(&s, k);
        cr_assert_eq(ex_spawn(ex_just_stopped(), sc_token(&s)).code, 0);
        sc_join_ok(&s);
        sc_destroy_ok(&s);
    }
    expect_no_leaks();
}

/* ============================================================ allocation */

Test(exec_scope, spawn_env_allocates_from_the_environments_allocator) {
    ex_pool *p = pool_new(2);
    for (int k = 0; k < 2; k++) {
        any_scope s;
        sc_init(&s, k);
        count_alloc ca;
        ca_init(&ca);
        ex_env_pair env;
        ex_env_pair_init(&env, &ex_key_get_allocator, ex_alloc_value(&ca.a), ex_env_empty());
        env.key2 = &user_key;
        env.value2 = ex_int(99);
        gate g;
        gate_init(&g, p);
        ex_sender *w = gated(&g);
        long test_in_use = test_stats.in_use;
        ex_error e = ex_spawn_env(w, sc_token(&s), ex_env_of_pair(&env));
        cr_assert_eq(e.code, 0, "ex_spawn_env: %s", e.msg ? e.msg : "");
        wait_int(&g.started, 1, "the spawned work");
        cr_assert_eq(atomic_load(&ca.allocs), 1, "%s: the operation was not allocated from the env allocator",
                     kind_name(&s));
        cr_assert_eq(atomic_load(&ca.in_use), 1);
        cr_assert_leq(test_stats.in_use, test_in_use, "the default allocator was used for the operation");

        /* The spawned work sees that environment. */
        seen_value sa, su;
        memset(&sa, 0, sizeof sa);
        memset(&su, 0, sizeof su);
        cr_assert_eq(ex_spawn_env(read_into(&ex_key_get_allocator, EX_T_ALLOC, &sa), sc_token(&s), ex_env_of_pair(&env)).code, 0);
        cr_assert_eq(ex_spawn_env(read_into(&user_key, EX_T_ANY, &su), sc_token(&s), ex_env_of_pair(&env)).code, 0);
        cr_assert_eq(atomic_load(&sa.calls), 1);
        cr_assert_eq(sa.v.as.alloc, &ca.a);
        cr_assert_eq(atomic_load(&su.calls), 1);
        cr_assert_eq(su.v.as.i, 99);

        atomic_store(&g.open, 1);
        sc_join_ok(&s);
        cr_assert_eq(atomic_load(&ca.allocs), 3);
        cr_assert_eq(atomic_load(&ca.in_use), 0, "%s: the operation was not returned to its allocator",
                     kind_name(&s));
        sc_destroy_ok(&s);
    }
    pool_free(p);
    expect_no_leaks();
}

Test(exec_scope, spawn_allocation_failure_is_enomem_and_starts_nothing) {
    for (int k = 0; k < 2; k++) {
        any_scope s;
        sc_init(&s, k);
        atomic_int counter = 0;
        ex_sender *w = inline_inc(&counter);
        test_alloc_fail_at(1);
        ex_error e = ex_spawn(w, sc_token(&s));
        test_alloc_fail_at(0);
        cr_assert_eq(e.code, EX_ENOMEM, "%s: %d", kind_name(&s), e.code);
        cr_assert_not_null(e.msg);
        cr_assert_eq(atomic_load(&counter), 0);

        count_alloc ca;
        ca_init(&ca);
        ca.fail_at = 1;
        ex_env_pair env;
        ex_env_pair_init(&env, &ex_key_get_allocator, ex_alloc_value(&ca.a), ex_env_empty());
        e = ex_spawn_env(inline_inc(&counter), sc_token(&s), ex_env_of_pair(&env));
        cr_assert_eq(e.code, EX_ENOMEM);
        cr_assert_eq(atomic_load(&counter), 0);
        cr_assert_eq(atomic_load(&ca.in_use), 0);

        rec rc;
        rec_init(&rc);
        join_run jrun = join_start_rec(&s, &rc);
        cr_assert_eq(rc.values, 1, "a failed spawn left an association");
        join_run_free(&jrun);
        sc_destroy_ok(&s);
    }
    expect_no_leaks();
}

Test(exec_scope, spawn_oom_sweep) {
    ex_pool *p = pool_new(2);
    for (int k = 0; k < 2; k++) {
        any_scope s;
        sc_init(&s, k);
        atomic_int counter = 0;
        int ok = 0;
        bool clean = false;
        for (long n = 1; n <= 100 && !clean; n++) {
            long failed_before = test_stats.failed;
            test_alloc_fail_at(n);
            ex_error e = ex_spawn(ex_then(pool_inc(p, &counter), inc_fn, &counter, EX_SIG0, EX_SIG0), sc_token(&s));
            test_alloc_fail_at(0);
            bool failed = test_stats.failed != failed_before;
            if (e.code) {
                cr_assert_eq(e.code, EX_ENOMEM, "fail at %ld: %d (%s)", n, e.code, e.msg ? e.msg : "");
                cr_assert(failed);
            } else {
                ok++;
                clean = !failed;
            }
        }
        cr_assert(clean, "never reached a spawn without an injected failure");
        sc_join_ok(&s);
        cr_assert_eq(atomic_load(&counter), 2 * ok, "%s: %d spawns succeeded, counter %d", kind_name(&s), ok,
                     atomic_load(&counter));
        sc_destroy_ok(&s);
    }
    pool_free(p);
    expect_no_leaks();
}

/* ================================================================== stop */

Test(exec_scope, counting_scope_request_stop_reaches_spawned_work) {
    ex_pool *p = pool_new(2);
    any_scope s;
    sc_init(&s, true);
    stopper st;
    stopper_init(&st, p);
    cr_assert_eq(ex_spawn(stop_waiter(&st), sc_token(&s)).code, 0);
    cr_assert_eq(ex_spawn(let_stop_waiter(&st), sc_token(&s)).code, 0);
    wait_int(&st.started, 2, "both stop waiters to run");
    cr_assert_eq(atomic_load(&st.finished), 0);
    ex_counting_scope_request_stop(&s.full);
    sc_join_ok(&s);
    cr_assert_eq(atomic_load(&st.no_token), 0, "spawned work of a counting scope has a stop token");
    cr_assert_eq(atomic_load(&st.observed), 2, "the scope's stop request was not seen by its work");

    sc_destroy_ok(&s);
    pool_free(p);
    expect_no_leaks();
}

Test(exec_scope, counting_scope_work_spawned_after_request_stop_sees_it) {
    any_scope s;
    sc_init(&s, true);
    ex_counting_scope_request_stop(&s.full);
    seen_value sv;
    memset(&sv, 0, sizeof sv);
    cr_assert_eq(ex_spawn(read_into(&ex_key_get_stop_token, EX_T_TOKEN, &sv), sc_token(&s)).code, 0);
    cr_assert_eq(atomic_load(&sv.calls), 1);
    cr_assert(ex_stop_token_stop_possible(sv.v.as.token));
    cr_assert(ex_stop_token_stop_requested(sv.v.as.token), "work spawned after request_stop starts stopped");
    sc_join_ok(&s);
    sc_destroy_ok(&s);
    expect_no_leaks();
}

Test(exec_scope, simple_scope_gives_spawned_work_no_stop_token) {
    any_scope s;
    sc_init(&s, false);
    seen_value sv;
    memset(&sv, 0, sizeof sv);
    cr_assert_eq(ex_spawn(read_into(&ex_key_get_stop_token, EX_T_TOKEN, &sv), sc_token(&s)).code, 0);
    cr_assert_eq(atomic_load(&sv.calls), 1);
    cr_assert_not(ex_stop_token_stop_possible(sv.v.as.token));
    sc_join_ok(&s);
    sc_destroy_ok(&s);
    expect_no_leaks();
}

Test(exec_scope, spawn_env_stop_token_is_replaced_by_the_counting_scopes) {
    /* The spawned work of a counting scope sees the scope's token, so the
     * scope's request_stop reaches it even if env carried another token. */
    ex_pool *p = pool_new(2);
    any_scope s;
    sc_init(&s, true);
    ex_stop_source other;
    ex_stop_source_init(&other);
    ex_env_pair env;
    ex_env_pair_init(&env, &ex_key_get_stop_token, ex_token_value(ex_stop_source_token(&other)), ex_env_empty());
    stopper st;
    stopper_init(&st, p);
    cr_assert_eq(ex_spawn_env(stop_waiter(&st), sc_token(&s), ex_env_of_pair(&env)).code, 0);
    wait_int(&st.started, 1, "the stop waiter");
    ex_counting_scope_request_stop(&s.full);
    sc_join_ok(&s);
    cr_assert_eq(atomic_load(&st.observed), 1);
    sc_destroy_ok(&s);
    pool_free(p);
    expect_no_leaks();
}

/* =============================================================== destroy */

Test(exec_scope, destroy_with_outstanding_work_is_ebusy_then_ok_after_join) {
    ex_pool *p = pool_new(2);
    for (int k = 0; k < 2; k++) {
        any_scope s;
        sc_init(&s, k);
        gate g;
        gate_init(&g, p);
        cr_assert_eq(ex_spawn(gated(&g), sc_token(&s)).code, 0);
        ex_error e = sc_destroy(&s);
        cr_assert_eq(e.code, EX_EBUSY, "%s: destroy with outstanding work: %d", kind_name(&s), e.code);
        cr_assert_not_null(e.msg);
        atomic_store(&g.open, 1);
        sc_join_ok(&s);
        sc_destroy_ok(&s);
    }
    pool_free(p);
    expect_no_leaks();
}

Test(exec_scope, destroy_of_an_unused_scope_is_ok) {
    for (int k = 0; k < 2; k++) {
        any_scope s;
        sc_init(&s, k);
        sc_destroy_ok(&s);
    }
    expect_no_leaks();
}

/* ====================================================== association */

Test(exec_scope, try_associate_keeps_join_pending_until_disassociated) {
    for (int k = 0; k < 2; k++) {
        any_scope s;
        sc_init(&s, k);
        ex_scope_token t = sc_token(&s);
        cr_assert(ex_scope_token_try_associate(t));
        cr_assert(ex_scope_token_try_associate(t));
        arec jr;
        arec_init(&jr, NULL);
        ex_sender *j = sc_join(&s);
        ex_operation *op = arec_start(&jr, j);
        cr_assert_eq(atomic_load(&jr.total), 0, "%s: join completed with associations left", kind_name(&s));
        cr_assert_eq(sc_destroy(&s).code, EX_EBUSY);
        ex_scope_token_disassociate(t);
        cr_assert_eq(atomic_load(&jr.total), 0, "%s: join completed with one association left", kind_name(&s));
        ex_scope_token_disassociate(t);
        cr_assert_eq(atomic_load(&jr.total), 1, "%s: the last disassociation completes the join", kind_name(&s));
        cr_assert_eq(atomic_load(&jr.values), 1);
        cr_assert_eq(jr.thread, test_thread_id(), "the join completes on the agent of the last disassociation");
        cr_assert_not(ex_scope_token_try_associate(t), "a joined scope is closed");
        ex_operation_free(op);
        ex_sender_release(j);
        sc_destroy_ok(&s);
    }
    expect_no_leaks();
}

Test(exec_scope, try_associate_fails_when_closed_or_without_a_scope) {
    for (int k = 0; k < 2; k++) {
        any_scope s;
        sc_init(&s, k);
        cr_assert(ex_scope_token_try_associate(sc_token(&s)));
        sc_close(&s);
        cr_assert_not(ex_scope_token_try_associate(sc_token(&s)));
        /* Closing does not drop existing associations. */
        rec rc;
        rec_init(&rc);
        join_run jrun = join_start_rec(&s, &rc);
        cr_assert_eq(rec_total(&rc), 0);
        ex_scope_token_disassociate(sc_token(&s));
        cr_assert_eq(rc.values, 1);
        join_run_free(&jrun);
        sc_destroy_ok(&s);
    }
    ex_scope_token none = { NULL };
    cr_assert_not(ex_scope_token_try_associate(none));
    expect_no_leaks();
}

/* ============================================================ concurrency */

typedef struct spawner {
    pthread_t tid;
    ex_pool *pool;
    ex_scope_token token;
    atomic_int *go;
    atomic_int *hits;     /* this thread's 500 slots */
    int spawned, refused;
} spawner;

enum { SPAWN_THREADS = 4, SPAWN_EACH = 500 };

static void *spawner_main(void *arg) {
    spawner *sp = arg;
    while (!atomic_load(sp->go)) sched_yield();
    for (int i = 0; i < SPAWN_EACH; i++) {
        ex_error e = ex_spawn(pool_inc(sp->pool, &sp->hits[i]), sp->token);
        if (e.code) sp->refused++;
        else sp->spawned++;
    }
    return NULL;
}

Test(exec_scope, many_threads_spawning_into_one_scope) {
    ex_pool *p = pool_new(2);
    for (int k = 0; k < 2; k++) {
        any_scope s;
        sc_init(&s, k);
        static atomic_int hits[SPAWN_THREADS * SPAWN_EACH];
        for (int i = 0; i < SPAWN_THREADS * SPAWN_EACH; i++) atomic_store(&hits[i], 0);
        atomic_int go = 0;
        spawner sp[SPAWN_THREADS];
        for (int t = 0; t < SPAWN_THREADS; t++) {
            memset(&sp[t], 0, sizeof sp[t]);
            sp[t].pool = p;
            sp[t].token = sc_token(&s);
            sp[t].go = &go;
            sp[t].hits = &hits[t * SPAWN_EACH];
            cr_assert_eq(pthread_create(&sp[t].tid, NULL, spawner_main, &sp[t]), 0);
        }
        atomic_store(&go, 1);
        for (int t = 0; t < SPAWN_THREADS; t++) pthread_join(sp[t].tid, NULL);
        for (int t = 0; t < SPAWN_THREADS; t++) {
            cr_assert_eq(sp[t].refused, 0, "thread %d: %d spawns refused", t, sp[t].refused);
            cr_assert_eq(sp[t].spawned, SPAWN_EACH);
        }
        sc_join_ok(&s);
        for (int i = 0; i < SPAWN_THREADS * SPAWN_EACH; i++)
            cr_assert_eq(atomic_load(&hits[i]), 1, "%s: op %d ran %d times", kind_name(&s), i, atomic_load(&hits[i]));
        sc_destroy_ok(&s);
    }
    pool_free(p);
    expect_no_leaks();
}

/* =========================================================== spawn_future */

Test(exec_scope, future_of_completed_work_completes_inline_with_its_value) {
    for (int k = 0; k < 2; k++) {
        any_scope s;
        sc_init(&s, k);
        ex_sender *f = ex_spawn_future(ex_just(ex_int(42), ex_str("answer")), sc_token(&s));
        cr_assert_eq(ex_sender_status(f).code, 0);
        rec rc;
        rec_init(&rc);
        _Alignas(max_align_t) unsigned char buf[256];
        ex_operation *op;
        cr_assert_leq(ex_sender_op_size(f), sizeof buf);
        cr_assert_eq(ex_connect(f, rec_receiver(&rc), buf, sizeof buf, &op).code, 0);
        ex_start(op);
        cr_assert_eq(rc.values, 1, "%s: a late consumer completes inside start", kind_name(&s));
        cr_assert_eq(rc.thread, test_thread_id());
        cr_assert_eq(rc.n, 2);
        cr_assert_eq(rc.v[0].as.i, 42);
        cr_assert_str_eq(rc.v[1].as.s, "answer");
        ex_operation_destroy(op);
        ex_sender_release(f);
        sc_join_ok(&s);
        sc_destroy_ok(&s);
    }
    expect_no_leaks();
}

Test(exec_scope, future_started_before_completion_gets_the_value_on_the_worker) {
    ex_pool *p = pool_new(2);
    for (int k = 0; k < 2; k++) {
        any_scope s;
        sc_init(&s, k);
        gate g;
        gate_init(&g, p);
        ex_sender *f = ex_spawn_future(gated(&g), sc_token(&s));
        cr_assert_eq(ex_sender_status(f).code, 0);
        wait_int(&g.started, 1, "the future's work to start");
        arec fr, jr;
        arec_init(&fr, p);
        arec_init(&jr, p);
        ex_operation *fop = arec_start(&fr, f);
        ex_sender *j = sc_join(&s);
        ex_operation *jop = arec_start(&jr, j);
        test_sleep_ms(20);
        cr_assert_eq(atomic_load(&fr.total), 0, "the future completed before its work");
        cr_assert_eq(atomic_load(&jr.total), 0, "the join completed before the future's work");
        atomic_store(&g.open, 1);
        arec_wait(&fr, "the future");
        cr_assert_eq(atomic_load(&fr.values), 1);
        cr_assert_eq(fr.n, 1);
        cr_assert_eq(fr.v[0].as.i, 7);
        cr_assert_eq(fr.thread, g.thread, "the future completes where its work completed");
        arec_wait(&jr, "the join");
        cr_assert_eq(atomic_load(&jr.values), 1);
        ex_operation_free(fop);
        ex_operation_free(jop);
        ex_sender_release(f);
        ex_sender_release(j);
        sc_destroy_ok(&s);
    }
    pool_free(p);
    expect_no_leaks();
}

Test(exec_scope, future_delivers_error_and_stopped) {
    static int payload;
    for (int k = 0; k < 2; k++) {
        any_scope s;
        sc_init(&s, k);
        ex_result r = ex_sync_wait(
            ex_spawn_future(ex_just_error(ex_err_data(EX_EUSER + 6, "future failed", &payload)), sc_token(&s)));
        expect_error(&r, EX_EUSER + 6);
        cr_assert_str_eq(r.error.msg, "future failed");
        cr_assert_eq(r.error.data, &payload);
        r = ex_sync_wait(ex_spawn_future(ex_just_stopped(), sc_token(&s)));
        cr_assert_eq(r.disposition, EX_DISP_STOPPED);
        rec rc;
        rec_init(&rc);
        join_run jrun = join_start_rec(&s, &rc);
        cr_assert_eq(rec_total(&rc), 1, "%s: the join completes once the futures' work completed", kind_name(&s));
        join_run_free(&jrun);
        sc_destroy_ok(&s);
    }
    expect_no_leaks();
}

Test(exec_scope, future_keeps_tuple_values) {
    any_scope s;
    sc_init(&s, false);
    ex_value inner[2] = { ex_int(3), ex_str("t") };
    ex_tuple t = { 1, 2, inner };
    ex_sender *f = ex_spawn_future(ex_just(ex_tuple_value(&t)), sc_token(&s));
    inner[0] = ex_int(-3);
    ex_result r = ex_sync_wait(f);
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_eq(r.values[0].type, EX_T_TUPLE);
    cr_assert_eq(r.values[0].as.tuple->n, 2);
    cr_assert_eq(r.values[0].as.tuple->v[0].as.i, 3);
    cr_assert_str_eq(r.values[0].as.tuple->v[1].as.s, "t");
    ex_result_destroy(&r);
    sc_join_ok(&s);
    sc_destroy_ok(&s);
    expect_no_leaks();
}

Test(exec_scope, future_connected_twice_is_einval) {
    any_scope s;
    sc_init(&s, true);
    ex_sender *f = ex_spawn_future(ex_just(ex_int(1)), sc_token(&s));
    rec r1, r2;
    rec_init(&r1);
    rec_init(&r2);
    _Alignas(max_align_t) unsigned char b1[256], b2[256];
    ex_operation *o1, *o2 = NULL;
    cr_assert_eq(ex_connect(f, rec_receiver(&r1), b1, sizeof b1, &o1).code, 0);
    ex_error e = ex_connect(f, rec_receiver(&r2), b2, sizeof b2, &o2);
    cr_assert_eq(e.code, EX_EINVAL, "second connect: %d", e.code);
    cr_assert_not_null(e.msg);
    ex_start(o1);
    cr_assert_eq(r1.values, 1);
    cr_assert_eq(r1.v[0].as.i, 1);
    cr_assert_eq(rec_total(&r2), 0);
    ex_operation_destroy(o1);
    ex_sender_release(f);
    sc_join_ok(&s);
    sc_destroy_ok(&s);
    expect_no_leaks();
}

Test(exec_scope, releasing_the_future_without_starting_it_stops_the_work) {
    ex_pool *p = pool_new(2);
    for (int k = 0; k < 2; k++) {
        any_scope s;
        sc_init(&s, k);
        stopper st;
        stopper_init(&st, p);
        ex_sender *f = ex_spawn_future(stop_waiter(&st), sc_token(&s));
        cr_assert_eq(ex_sender_status(f).code, 0);
        wait_int(&st.started, 1, "the future's work");
        ex_sender_release(f);
        wait_int(&st.finished, 1, "the future's work to finish");
        cr_assert_eq(atomic_load(&st.no_token), 0, "the future's work has a stop token");
        cr_assert_eq(atomic_load(&st.observed), 1, "%s: releasing an unstarted future did not request stop",
                     kind_name(&s));
        sc_join_ok(&s);
        sc_destroy_ok(&s);
    }
    pool_free(p);
    expect_no_leaks();
}

Test(exec_scope, future_connected_but_never_started_stops_the_work) {
    ex_pool *p = pool_new(2);
    any_scope s;
    sc_init(&s, false);
    stopper st;
    stopper_init(&st, p);
    ex_sender *f = ex_spawn_future(stop_waiter(&st), sc_token(&s));
    wait_int(&st.started, 1, "the future's work");
    rec rc;
    rec_init(&rc);
    _Alignas(max_align_t) unsigned char buf[256];
    ex_operation *op;
    cr_assert_eq(ex_connect(f, rec_receiver(&rc), buf, sizeof buf, &op).code, 0);
    ex_operation_destroy(op);
    ex_sender_release(f);
    wait_int(&st.finished, 1, "the future's work to finish");
    cr_assert_eq(atomic_load(&st.observed), 1, "nobody will consume the result: stop must be requested");
    cr_assert_eq(rec_total(&rc), 0);
    sc_join_ok(&s);
    sc_destroy_ok(&s);
    pool_free(p);
    expect_no_leaks();
}

Test(exec_scope, stop_on_the_future_consumer_stops_the_work) {
    ex_pool *p = pool_new(2);
    for (int before = 0; before < 2; before++) {
        any_scope s;
        sc_init(&s, before);
        stopper st;
        stopper_init(&st, p);
        ex_sender *f = ex_spawn_future(stop_waiter(&st), sc_token(&s));
        wait_int(&st.started, 1, "the future's work");
        arec fr;
        arec_init(&fr, p);
        arec_with_stop(&fr);
        if (before) ex_stop_source_request_stop(&fr.stop);
        ex_operation *op = arec_start(&fr, f);
        if (!before) {
            test_sleep_ms(10);
            cr_assert_eq(atomic_load(&fr.total), 0);
            ex_stop_source_request_stop(&fr.stop);
        }
        arec_wait(&fr, "the future's consumer");
        cr_assert_eq(atomic_load(&st.observed), 1, "the consumer's stop request did not reach the work (%s)",
                     before ? "requested before start" : "requested while waiting");
        cr_assert_eq(atomic_load(&fr.values), 1, "the future completes with the work's result");
        cr_assert_eq(fr.v[0].type, EX_T_BOOL);
        cr_assert(fr.v[0].as.b);
        ex_operation_free(op);
        ex_sender_release(f);
        sc_join_ok(&s);
        sc_destroy_ok(&s);
    }
    pool_free(p);
    expect_no_leaks();
}

Test(exec_scope, counting_scope_request_stop_reaches_future_work) {
    ex_pool *p = pool_new(2);
    any_scope s;
    sc_init(&s, true);
    stopper st;
    stopper_init(&st, p);
    ex_sender *f = ex_spawn_future(stop_waiter(&st), sc_token(&s));
    wait_int(&st.started, 1, "the future's work");
    arec fr;
    arec_init(&fr, p);
    ex_operation *op = arec_start(&fr, f);
    ex_counting_scope_request_stop(&s.full);
    arec_wait(&fr, "the future");
    cr_assert_eq(atomic_load(&st.observed), 1, "the scope's stop request did not reach the future's work");
    cr_assert_eq(atomic_load(&fr.values), 1);
    cr_assert(fr.v[0].as.b);
    ex_operation_free(op);
    ex_sender_release(f);
    sc_join_ok(&s);
    sc_destroy_ok(&s);
    pool_free(p);
    expect_no_leaks();
}

/* Work that signals it started, waits for the gate, and reports whether
 * its stop token was stopped by then. */
typedef struct tgate {
    atomic_int open, started;
} tgate;

static ex_error tgate_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    tgate *g = ctx;
    (void)n;
    atomic_fetch_add(&g->started, 1);
    double end = test_now_s() + WAIT_LIMIT_S;
    while (!atomic_load(&g->open) && test_now_s() < end) sched_yield();
    out[0] = ex_bool(ex_stop_token_stop_requested(in[0].as.token));
    return ex_ok();
}

static ex_sender *return_future(void *ctx, const ex_value *in, size_t n) {
    (void)in, (void)n;
    ex_sender **f = ctx;
    ex_sender *out = *f;
    *f = NULL;
    return out;
}

Test(exec_scope, future_consumed_through_let_value_is_not_stopped) {
    /* let_value connects the sender its function returns, releases it, and
     * starts the operation: the future is consumed, so its work must not be
     * asked to stop. */
    ex_pool *p = pool_new(2);
    any_scope s;
    sc_init(&s, false);
    tgate g;
    memset(&g, 0, sizeof g);
    ex_sender *f = ex_spawn_future(
        ex_starts_on(ex_pool_scheduler(p), ex_then(ex_read_env(&ex_key_get_stop_token, EX_T_TOKEN), tgate_fn, &g,
                                                   EX_SIG(EX_T_TOKEN), EX_SIG(EX_T_BOOL))),
        sc_token(&s));
    wait_int(&g.started, 1, "the future's work");
    arec r;
    arec_init(&r, p);
    ex_sender *outer = ex_let_value(ex_just(), return_future, &f, EX_SIG0);
    ex_operation *op = arec_start(&r, outer);
    cr_assert_null(f, "the let_value function ran inside start");
    atomic_store(&g.open, 1);
    arec_wait(&r, "the let_value of the future");
    cr_assert_eq(atomic_load(&r.values), 1, "the consumed future completed with values %d errors %d stops %d",
                 atomic_load(&r.values), atomic_load(&r.errors), atomic_load(&r.stops));
    cr_assert_eq(r.v[0].type, EX_T_BOOL);
    cr_assert_not(r.v[0].as.b, "stop was requested on the work of a future that is being consumed");
    ex_operation_free(op);
    ex_sender_release(outer);
    sc_join_ok(&s);
    sc_destroy_ok(&s);
    pool_free(p);
    expect_no_leaks();
}

Test(exec_scope, spawn_future_into_a_closed_scope_completes_with_eshutdown) {
    for (int k = 0; k < 2; k++) {
        any_scope s;
        sc_init(&s, k);
        sc_close(&s);
        atomic_int counter = 0;
        ex_result r = ex_sync_wait(ex_spawn_future(inline_inc(&counter), sc_token(&s)));
        expect_error(&r, EX_ESHUTDOWN);
        cr_assert_eq(atomic_load(&counter), 0, "a refused sender must not run");
        sc_join_ok(&s);
        sc_destroy_ok(&s);
    }
    expect_no_leaks();
}

Test(exec_scope, spawn_future_of_null_or_invalid_is_einval) {
    any_scope s;
    sc_init(&s, true);
    ex_result r = ex_sync_wait(ex_spawn_future(NULL, sc_token(&s)));
    expect_error(&r, EX_EINVAL);
    ex_value v[EX_MAX_ARITY + 1];
    for (int i = 0; i <= EX_MAX_ARITY; i++) v[i] = ex_int(i);
    r = ex_sync_wait(ex_spawn_future(ex_just_n(v, EX_MAX_ARITY + 1), sc_token(&s)));
    expect_error(&r, EX_EINVAL);
    atomic_int counter = 0;
    ex_scope_token none = { NULL };
    r = ex_sync_wait(ex_spawn_future(inline_inc(&counter), none));
    expect_error(&r, EX_EINVAL);
    cr_assert_eq(atomic_load(&counter), 0);
    rec rc;
    rec_init(&rc);
    join_run jrun = join_start_rec(&s, &rc);
    cr_assert_eq(rc.values, 1, "a refused spawn_future left an association");
    join_run_free(&jrun);
    sc_destroy_ok(&s);
    expect_no_leaks();
}

Test(exec_scope, spawn_future_oom_sweep) {
    for (int k = 0; k < 2; k++) {
        any_scope s;
        sc_init(&s, k);
        bool clean = false;
        int nomem = 0;
        for (long n = 1; n <= 100 && !clean; n++) {
            ex_value inner[2] = { ex_int(40), ex_int(2) };
            ex_tuple t = { 0, 2, inner };
            long failed_before = test_stats.failed;
            test_alloc_fail_at(n);
            ex_sender *f = ex_spawn_future(ex_just(ex_tuple_value(&t)), sc_token(&s));
            ex_result r = ex_sync_wait(f);
            test_alloc_fail_at(0);
            bool failed = test_stats.failed != failed_before;
            if (r.disposition == EX_DISP_ERROR) {
                cr_assert_eq(r.error.code, EX_ENOMEM, "fail at %ld: %d (%s)", n, r.error.code,
                             r.error.msg ? r.error.msg : "");
                cr_assert(failed);
                nomem++;
            } else {
                cr_assert_eq(r.disposition, EX_DISP_VALUE, "fail at %ld: disposition %d", n, r.disposition);
                cr_assert_eq(r.values[0].as.tuple->v[0].as.i + r.values[0].as.tuple->v[1].as.i, 42);
                clean = !failed;
            }
            ex_result_destroy(&r);
            cr_assert_eq(test_stats.in_use, 0, "fail at %ld: %ld block(s) leaked", n, test_stats.in_use);
        }
        cr_assert(clean);
        cr_assert_gt(nomem, 0);
        sc_join_ok(&s);
        sc_destroy_ok(&s);
    }
    expect_no_leaks();
}
