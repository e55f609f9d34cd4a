/* SPDX-License-Identifier: MIT */
/* [task] lifetime: a receiver may free the task inside its completion
 * (also inside a stop request), and a running task holds its scheduler
 * (exec_task suite, see task_results.c). */
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

#include "task/local_fixtures.h"

/* ============================================ the completion may free the task */

/* The receivers here free the task's operation inside their completion
 * (which the receiver contract allows: common frees_op_rec), with storage
 * from a scribbling allocator: any later access by the task to its own
 * state reads 0xA5 garbage. */

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
    frees_op_rec f;
    frees_op_rec_init(&f);
    ex_env_pair_init(&f.r.pair, &ex_key_get_allocator, ex_alloc_value(&frames.base), ex_env_empty());
    f.r.pair.key2 = &ex_key_get_scheduler;
    f.r.pair.value2 = ex_sched_value(ex_inline_scheduler());
    f.r.env = ex_env_of_pair(&f.r.pair);
    ex_task_options o = { .affinity = aff };
    ex_sender *s = ex_task_create(fn, NULL, &o);
    cr_assert_eq(ex_connect_alloc(s, frees_op_rec_receiver(&f), &f.op).code, 0);
    cr_assert_eq(atomic_load(&frames.allocs), 1, "the operation comes from the environment's allocator");
    ex_start(f.op);  /* completes inline; the completion frees the operation */
    if (want >= 0) rec_expect_value_int(&f.r, want);
    else rec_expect_stopped(&f.r);
    cr_assert_eq(atomic_load(&frames.in_use), 0);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_task, completion_may_free_the_task_affine) {
    completion_frees_the_task(body_small_awaits, EX_TASK_AFFINE, 3);
}

Test(exec_task, completion_may_free_the_task_inline) {
    completion_frees_the_task(body_small_awaits, EX_TASK_INLINE, 3);
}

Test(exec_task, completion_may_free_the_task_after_a_tuple) {
    completion_frees_the_task(body_tuple_last, EX_TASK_INLINE, 15);
}

Test(exec_task, completion_may_free_the_task_after_stopped) {
    completion_frees_the_task(body_stop_last, EX_TASK_INLINE, -1);
}

/* The same through a counting scope on a pool: the spawned operation, from
 * the scribbling allocator, is freed by the scope when the task completes. */
Test(exec_task, spawned_task_freed_by_the_scope) {
    ex_pool *pool = test_pool_new(2);
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
    task_test_end(pool, NULL);
}

/* ================================================= the task holds its scheduler */

typedef struct hold_arg {
    test_gate *g;
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
    ex_await_result r = ex_await(t, test_gate_sender(a->g));
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
    test_stc_init(&stc);
    ex_strand *strand = NULL;
    cr_assert_eq(ex_strand_create(ex_single_thread_context_scheduler(&stc), NULL, &strand).code, 0);
    ex_scheduler ss = ex_strand_scheduler(strand);
    test_gate g;
    test_gate_init(&g);
    hold_arg a = { .g = &g };
    trec tr;
    trec_setup(&tr, ss, false);
    ex_operation *op = start_with(ex_task_create(body_hold, &a, NULL), &tr);
    cr_assert(test_gate_wait_started(&g));
    strand_barrier(ss);  /* the task is suspended: nothing queued or running on the strand */
    cr_assert_eq(ex_strand_destroy(strand).code, EX_EBUSY, "a suspended task must hold its scheduler");
    test_gate_open(&g, 4);
    cr_assert(wait_int(&tr.done));
    cr_assert_eq(tr.r.values, 1);
    cr_assert_eq(tr.r.v[0].as.i, 4);
    ex_operation_free(op);
    strand_barrier(ss);
    cr_assert_eq(ex_strand_destroy(strand).code, 0, "a completed task must have released its scheduler");
    task_test_end(NULL, &stc);
}

/* The task holds the scheduler it moved to and, until it completes, the one
 * it left (the handle ex_change_coroutine_scheduler returned stays valid). */
Test(exec_task, change_coroutine_scheduler_keeps_the_hold_it_left) {
    ex_single_thread_context stc, stc2;
    test_stc_init(&stc);
    test_stc_init(&stc2);
    ex_strand *from = NULL, *to = NULL;
    cr_assert_eq(ex_strand_create(ex_single_thread_context_scheduler(&stc), NULL, &from).code, 0);
    cr_assert_eq(ex_strand_create(ex_single_thread_context_scheduler(&stc2), NULL, &to).code, 0);
    test_gate g;
    test_gate_init(&g);
    hold_arg a = { .g = &g, .to = ex_strand_scheduler(to), .to_thread = ex_single_thread_context_thread_id(&stc2) };
    trec tr;
    trec_setup(&tr, ex_strand_scheduler(from), false);
    ex_operation *op = start_with(ex_task_create(body_hold, &a, NULL), &tr);
    cr_assert(test_gate_wait_started(&g));
    strand_barrier(ex_strand_scheduler(from));
    strand_barrier(ex_strand_scheduler(to));
    cr_assert_eq(ex_strand_destroy(to).code, EX_EBUSY, "the task holds the scheduler it changed to");
    cr_assert_eq(ex_strand_destroy(from).code, EX_EBUSY, "the task holds the scheduler it left until it completes");
    test_gate_open(&g, 6);
    cr_assert(wait_int(&tr.done));
    cr_assert_eq(tr.r.values, 1);
    cr_assert_eq(tr.r.v[0].as.i, 6);
    cr_assert(a.moved);
    ex_operation_free(op);
    strand_barrier(ex_strand_scheduler(to));
    strand_barrier(ex_strand_scheduler(from));
    cr_assert_eq(ex_strand_destroy(to).code, 0);
    cr_assert_eq(ex_strand_destroy(from).code, 0, "a completed task released the scheduler it left");
    test_stc_destroy(&stc2);
    test_stc_destroy(&stc);
    expect_no_leaks();
}

/* ===================================== completing inside the stop request */

/* Regression (found by the soak): a stop request on the task's receiver
 * is forwarded to the task's own source; a callback there may complete the
 * awaited sender, the task resumes and finishes inline, inside the
 * request, and its receiver frees the operation.  request_stop must not
 * touch the task's source after that.  The operation comes from pages made
 * inaccessible when freed, so a late access crashes the test. */

static ex_task_result body_until_stopped(ex_task *t, void *arg) {
    (void)arg;
    ex_await_result r = ex_await(t, until_stopped());
    TCHECK(r.status == EX_AWAIT_STOPPED);
    return ex_task_void();
}

Test(exec_task, completion_inside_the_receivers_stop_request_may_free_the_task) {
    guard_alloc g;
    guard_alloc_init(&g);
    ex_stop_source src;
    ex_stop_source_init(&src);
    frees_op_rec r;
    frees_op_rec_init(&r);
    ex_env_pair alloc_env;
    ex_env_pair_init(&alloc_env, &ex_key_get_allocator, ex_alloc_value(&g.base), ex_env_empty());
    ex_env_pair_init(&r.r.pair, &ex_key_get_scheduler, ex_sched_value(ex_inline_scheduler()), ex_env_of_pair(&alloc_env));
    r.r.pair.key2 = &ex_key_get_stop_token;
    r.r.pair.value2 = ex_token_value(ex_stop_source_token(&src));
    r.r.env = ex_env_of_pair(&r.r.pair);
    ex_sender *task = ex_task_create(body_until_stopped, NULL, NULL);
    ex_error e = ex_connect_alloc(task, frees_op_rec_receiver(&r), &r.op);
    ex_sender_release(task);
    cr_assert_eq(e.code, 0, "%s", e.msg ? e.msg : "");
    ex_start(r.op);                     /* the body suspends in its await */
    cr_assert_eq(rec_total(&r.r), 0);
    ex_stop_source_request_stop(&src);  /* the task completes, and is freed, inside */
    rec_expect_stopped(&r.r);
    EXPECT_PROBE();
    guard_alloc_fini(&g);
    expect_no_leaks();
}
