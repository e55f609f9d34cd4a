/* SPDX-License-Identifier: MIT */
/* [task] stop: a stopped await stops the task (also through nested
 * tasks), and the task's stop token is linked to its receiver's
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
#include <sys/mman.h>
#include <unistd.h>

#include "task/local_fixtures.h"

/* Counts its runs (ctx: atomic_int). */
static ex_error count_run(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    atomic_fetch_add((atomic_int *)ctx, 1);
    return ex_ok();
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
        stop_arg a = { .ret_kind = kind };
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
    stop_arg a = { .ret_kind = 0 };
    ex_single_thread_context stc;
    test_stc_init(&stc);
    trec tr;
    trec_setup(&tr, ex_single_thread_context_scheduler(&stc), false);
    ex_operation *op = start_with(ex_task_create(body_stopped_await, &a, NULL), &tr);
    cr_assert(wait_int(&tr.done));
    cr_assert_eq(tr.r.stops, 1);
    cr_assert_eq(rec_total(&tr.r), 1);
    ex_operation_free(op);
    test_stc_destroy(&stc);
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

/* ============================================================= stop token */

typedef struct tok_arg {
    ex_run_loop *loop;         /* awaited: its schedule completes stopped */
    pthread_t home;
    _Atomic(ex_stop_source *) tok_src;  /* the (innermost) task's token */
    bool possible, requested_at_start;
    int status;
    bool requested_after, stopped_after, on_home;
    int outer_status;
    bool nested, outer_stopped;
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
    test_stc_init(&stc);
    ex_run_loop loop;
    test_loop_init(&loop);
    tok_arg a = { .loop = &loop, .home = ex_single_thread_context_thread_id(&stc), .nested = nested };
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
    test_loop_destroy(&loop);
    task_test_end(NULL, &stc);
}

Test(exec_task, stop_token_is_linked_to_the_receivers) { stop_token_linkage(false); }

Test(exec_task, stop_token_reaches_nested_tasks) { stop_token_linkage(true); }

/* Notes in a stop_arg whether it ran, whether its token showed a stop at
 * the start (before) and what an await of its own scheduler gave (st1). */
static ex_task_result body_early(ex_task *t, void *arg) {
    stop_arg *a = arg;
    atomic_fetch_add(&a->ran, 1);
    a->before = ex_stop_token_stop_requested(ex_task_stop_token(t));
    ex_await_result r = ex_await(t, ex_schedule(ex_task_scheduler(t)));
    a->st1 = (int)r.status;
    return ex_task_i64(1);
}

Test(exec_task, stop_requested_before_start) {
    ex_stop_source src;
    ex_stop_source_init(&src);
    ex_stop_source_request_stop(&src);
    stop_arg a;
    memset(&a, 0, sizeof a);
    ex_result r = run(ex_write_env(ex_task_create(body_early, &a, NULL), &ex_key_get_stop_token,
                                   ex_token_value(ex_stop_source_token(&src))));
    expect_disp(&r, EX_DISP_STOPPED);
    if (atomic_load(&a.ran)) {
        cr_assert(a.before, "the task's token must report the stop requested before start");
        cr_assert_eq(a.st1, EX_AWAIT_STOPPED);
    }
    expect_no_leaks();
}
