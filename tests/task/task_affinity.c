/* SPDX-License-Identifier: MIT */
/* [task] scheduler affinity: where a task resumes after an await,
 * change_coroutine_scheduler and ex_task_yield (exec_task suite, see
 * task_results.c). */
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

#include "task/local_fixtures.h"

/* A then function that records the worker of pool it runs on (ctx: a
 * where; -1 off the pool). */
typedef struct where { ex_pool *pool; atomic_int worker; } where;
static ex_error note_worker(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    where *w = ctx;
    atomic_store(&w->worker, ex_pool_current_worker(w->pool));
    return ex_ok();
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
    ex_pool *pool = test_pool_new(2);
    ex_single_thread_context stc;
    test_stc_init(&stc);
    aff_arg a = {
        .pool = pool,
        .other = ex_single_thread_context_scheduler(&stc),
        .main_tid = test_thread_id(),
        .rounds = 200,
    };
    ex_result r = run(ex_task_create(body_home_thread, &a, NULL));
    expect_value_int(&r, 200);
    task_test_end(pool, &stc);
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
        TCHECK(ex_pool_current_worker(a->pool) >= 0);  /* a worker, or main lent to the pool */
    }
    return ex_task_i64(a->rounds);
}

Test(exec_task, task_started_on_a_pool_resumes_on_its_workers) {
    ex_pool *pool = test_pool_new(2), *other = test_pool_new(2);
    ex_single_thread_context stc;
    test_stc_init(&stc);
    aff_arg a = {
        .pool = pool,
        .other_pool = other,
        .other = ex_single_thread_context_scheduler(&stc),
        .main_tid = test_thread_id(),
        .rounds = 200,
    };
    /* starts_on */
    ex_result r = run(ex_starts_on(ex_pool_scheduler(pool), ex_task_create(body_pool_affine, &a, NULL)));
    expect_value_int(&r, 200);
    EXPECT_PROBE();
    /* write_env get_scheduler: started on this thread, the body starts on the pool */
    r = run(ex_write_env(ex_task_create(body_pool_affine, &a, NULL), &ex_key_get_scheduler,
                         ex_sched_value(ex_pool_scheduler(pool))));
    expect_value_int(&r, 200);
    EXPECT_PROBE();
    test_stc_destroy(&stc);
    ex_pool_destroy(other);
    ex_pool_destroy(pool);
    expect_no_leaks();
}

/* Deterministic suspend-then-foreign-completion: the task on a
 * single_thread_context awaits a gate the main thread opens. */
typedef struct gate_arg {
    test_gate *g;
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
        ex_await_result r = ex_await(t, test_gate_sender(a->g));
        TCHECK(r.status == EX_AWAIT_VALUE && r.n == 1 && r.v[0].as.i == i);
        TCHECK(pthread_equal(pthread_self(), a->home));
        sum += r.v[0].as.i;
    }
    return ex_task_i64(sum);
}

Test(exec_task, foreign_completion_resumes_on_the_task_scheduler) {
    ex_single_thread_context stc;
    test_stc_init(&stc);
    test_gate g;
    test_gate_init(&g);
    gate_arg a = { &g, ex_single_thread_context_thread_id(&stc), 100, NULL, NULL };
    trec tr;
    trec_setup(&tr, ex_single_thread_context_scheduler(&stc), false);
    ex_operation *op = start_with(ex_task_create(body_gate_affine, &a, NULL), &tr);
    for (int i = 0; i < a.rounds; i++) {
        cr_assert(test_gate_wait_started(&g), "the task did not reach await %d", i);
        test_gate_open(&g, i);  /* completes on this (the main) thread */
    }
    cr_assert(wait_int(&tr.done));
    cr_assert_eq(tr.r.values, 1);
    cr_assert_eq(tr.r.v[0].as.i, 99 * 100 / 2);
    EXPECT_PROBE();
    ex_operation_free(op);
    task_test_end(NULL, &stc);
}

/* EX_TASK_INLINE: the task resumes on the thread that completed the await. */
static ex_task_result body_gate_inline(ex_task *t, void *arg) {
    gate_arg *a = arg;
    a->start_tid = test_thread_id();
    TCHECK(ex_scheduler_equal(ex_task_scheduler(t), ex_inline_scheduler()));
    ex_await_result r = ex_await(t, test_gate_sender(a->g));
    TCHECK(r.status == EX_AWAIT_VALUE && r.v[0].as.i == 77);
    a->resumed_tid = test_thread_id();
    return ex_task_i64(r.v[0].as.i);
}

typedef struct opener {
    test_gate *g;
    const void *tid;
} opener;

static void *opener_main(void *p) {
    opener *o = p;
    o->tid = test_thread_id();
    test_gate_open(o->g, 77);
    return NULL;
}

Test(exec_task, inline_affinity_resumes_where_the_sender_completed) {
    test_gate g;
    test_gate_init(&g);
    gate_arg a = { .g = &g };
    ex_task_options o = { .affinity = EX_TASK_INLINE };
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
    ex_pool *pool = test_pool_new(2);
    ex_single_thread_context stc;
    test_stc_init(&stc);
    wrap_sched w;
    ex_scheduler sch = wrap_scheduler(&w, ex_single_thread_context_scheduler(&stc), big);
    wrap_arg a = { .pool = pool, .home = ex_single_thread_context_thread_id(&stc), .rounds = 100 };
    ex_result r = run(ex_write_env(ex_task_create(body_wrap, &a, NULL), &ex_key_get_scheduler, ex_sched_value(sch)));
    expect_value_int(&r, 100);
    cr_assert_eq(atomic_load(&a.start_on_home), 1, "the body did not start on its scheduler's thread");
    EXPECT_PROBE();
    cr_assert_geq(atomic_load(&w.schedules), 1, "the hops went through the scheduler");
    task_test_end(pool, &stc);
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
    ex_pool *pool = test_pool_new(2);
    ex_single_thread_context stc;
    test_stc_init(&stc);
    wrap_sched w;
    ex_scheduler sch = wrap_scheduler(&w, ex_single_thread_context_scheduler(&stc), true);
    ex_fault_allocator f;
    ex_fault_allocator_init(&f, ex_libc_allocator());
    ex_fault_allocator_fail_randomly(&f, 1, 1000000);
    ex_task_options o = { .allocator = ex_fault_allocator_get(&f) };
    oomhop_arg a = { .pool = pool, .home = ex_single_thread_context_thread_id(&stc) };
    ex_result r = run(ex_write_env(ex_task_create(body_oomhop, &a, &o), &ex_key_get_scheduler, ex_sched_value(sch)));
    test_stc_destroy(&stc);
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
    ex_pool *pool = test_pool_new(2);
    ex_single_thread_context stc;
    test_stc_init(&stc);
    chg_arg a = { pool, ex_single_thread_context_scheduler(&stc), ex_single_thread_context_thread_id(&stc),
                  test_thread_id() };
    for (int k = 0; k < 10; k++) {
        ex_result r = run(ex_task_create(body_change, &a, NULL));
        expect_value_int(&r, 1);
        EXPECT_PROBE();
    }
    task_test_end(pool, &stc);
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
    test_stc_init(&stc);
    chg_stopped_arg a = { ex_single_thread_context_scheduler(&stc), ex_single_thread_context_thread_id(&stc), false, false };
    ex_result r = run(ex_task_create(body_change_stopped, &a, NULL));
    test_stc_destroy(&stc);
    expect_disp(&r, EX_DISP_STOPPED);
    cr_assert(!a.sched_is_stc, "a stopped task reports the scheduler it was asked to move to");
    cr_assert(!a.on_stc, "a stopped task moved");
    expect_no_leaks();
}

/* An inline task hops once, then resumes where awaited work completes. */
typedef struct chg_inline_arg {
    ex_scheduler stc;
    pthread_t stc_thread;
    test_gate *g;
    const void *resumed_tid;
} chg_inline_arg;

static ex_task_result body_change_inline(ex_task *t, void *arg) {
    chg_inline_arg *a = arg;
    ex_scheduler prev = ex_change_coroutine_scheduler(t, a->stc);
    TCHECK(ex_scheduler_equal(prev, ex_inline_scheduler()));
    TCHECK(pthread_equal(pthread_self(), a->stc_thread));
    TCHECK(ex_scheduler_equal(ex_task_scheduler(t), a->stc));
    ex_await_result r = ex_await(t, test_gate_sender(a->g));
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
    test_stc_init(&stc);
    test_gate g;
    test_gate_init(&g);
    chg_inline_arg a = { ex_single_thread_context_scheduler(&stc), ex_single_thread_context_thread_id(&stc), &g, NULL };
    ex_task_options o = { .affinity = EX_TASK_INLINE };
    trec tr;
    trec_init(&tr);  /* empty environment */
    ex_operation *op = start_with(ex_task_create(body_change_inline, &a, &o), &tr);
    cr_assert(test_gate_wait_started(&g));
    /* Let the task's stc item (the one that ran it up to the await) finish:
     * an item queued after it runs once the task suspended. */
    ex_result r = run(ex_then(ex_schedule(a.stc), noop_fn, NULL, EX_SIG0, EX_SIG0));
    expect_disp(&r, EX_DISP_VALUE);
    test_gate_open(&g, 5);
    cr_assert(wait_int(&tr.done));
    cr_assert_eq(tr.r.values, 1);
    cr_assert_eq(a.resumed_tid, test_thread_id(), "after the one hop an inline task resumes where work completes");
    EXPECT_PROBE();
    ex_operation_free(op);
    task_test_end(NULL, &stc);
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
        TCHECK(ex_pool_current_worker(a->pool) >= 0);  /* the worker, or the lent caller */
        if (atomic_load(&a->count) == i + 1) a->behind++;
    }
    return ex_task_void();
}

Test(exec_task, yield_on_a_pool_runs_the_queued_work_first) {
    /* One agent: with main lent as a second one, the worker could resume
     * the task while main still runs the increment. */
    ex_pool_config c = test_pool_config(1, NULL);
    c.lend_slots = -1;
    ex_pool *pool = test_pool_new_cfg(&c);
    ex_counting_scope scope;
    cr_assert_eq(ex_counting_scope_init(&scope).code, 0);
    yield_arg a = { .pool = pool, .scope = &scope, .rounds = 200 };
    ex_result r = run(ex_starts_on(ex_pool_scheduler(pool), ex_task_create(body_yield_rounds, &a, NULL)));
    expect_disp(&r, EX_DISP_VALUE);
    EXPECT_PROBE();
    cr_assert_eq(a.behind, a.rounds, "the queued increment ran before the task resumed in %d of %d rounds", a.behind,
                 a.rounds);
    r = run(ex_counting_scope_join(&scope));
    expect_disp(&r, EX_DISP_VALUE);
    cr_assert_eq(atomic_load(&a.count), a.rounds);
    cr_assert_eq(ex_counting_scope_destroy(&scope).code, 0);
    task_test_end(pool, NULL);
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
    ex_task_options o = { .affinity = EX_TASK_INLINE };
    ex_result r = run(ex_task_create(body_yield_plain, NULL, &o));  /* the inline scheduler */
    expect_disp(&r, EX_DISP_STOPPED);
    EXPECT_PROBE();
    r = run(ex_task_create(body_yield_plain, NULL, NULL));  /* sync_wait's run_loop */
    expect_disp(&r, EX_DISP_STOPPED);
    task_test_end(NULL, NULL);
}
