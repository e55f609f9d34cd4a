/* SPDX-License-Identifier: MIT */
/* The pool: stop tokens, post and dispatch, sync_wait on a worker (suite
 * exec_pool, declared in pool_create.c). */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "resources/pool_fixtures.h"

/* =========================================================== stop tokens */

Test(exec_pool, stop_requested_before_start_completes_stopped) {
    ex_pool *p = test_pool_new(2);
    ex_sender *snd = ex_schedule(ex_pool_scheduler(p));
    cr_assert(ex_sender_sigs(snd)->flags & EX_SIGS_STOPPED, "schedule declares set_stopped");
    slot s[2];
    slot_init(&s[0], p);
    arec_with_stop(&s[0].r);
    ex_stop_source_request_stop(&s[0].r.stop);
    slot_init(&s[1], p); /* a stop token that is never stopped: a value */
    arec_with_stop(&s[1].r);
    atomic_store(&g_completed, 0);
    slot_start(&s[0], snd);
    slot_start(&s[1], snd);
    cr_assert_eq(wait_long_reaches(&g_completed, 2), 2);
    slots_expect_once(s, 2);
    cr_assert_eq(atomic_load(&s[0].r.stops), 1, "stopped token: values %d errors %d", atomic_load(&s[0].r.values),
                 atomic_load(&s[0].r.errors));
    cr_assert_geq(s[0].r.worker, 0, "set_stopped runs on a worker when the item runs");
    cr_assert_eq(atomic_load(&s[1].r.values), 1);
    slots_destroy(s, 2);
    ex_sender_release(snd);
    test_pool_free(p);
    expect_no_leaks();
}

Test(exec_pool, stop_requested_while_queued_completes_stopped) {
    hold h;
    ex_pool *p = held_pool(&h);
    ex_sender *snd = ex_schedule(ex_pool_scheduler(p));
    slot s;
    slot_init(&s, p);
    arec_with_stop(&s.r);
    atomic_store(&g_completed, 0);
    slot_start(&s, snd);
    cr_assert_eq(atomic_load(&s.r.total), 0, "the only worker is busy: nothing ran yet");
    ex_stop_source_request_stop(&s.r.stop);
    hold_release(&h);
    cr_assert_eq(wait_long_reaches(&g_completed, 1), 1);
    cr_assert_eq(atomic_load(&s.r.stops), 1, "stop requested before the item ran: values %d errors %d",
                 atomic_load(&s.r.values), atomic_load(&s.r.errors));
    cr_assert_geq(s.r.worker, 0);
    slots_destroy(&s, 1);
    ex_sender_release(snd);
    test_pool_free(p);
    cr_assert_eq(atomic_load(&h.done), 1);
    expect_no_leaks();
}

Test(exec_pool, sync_wait_with_stopped_token_in_env_is_stopped) {
    ex_pool *p = test_pool_new(2);
    ex_stop_source src;
    ex_stop_source_init(&src);
    ex_stop_source_request_stop(&src);
    ex_result r = ex_sync_wait(ex_write_env(ex_schedule(ex_pool_scheduler(p)), &ex_key_get_stop_token,
                                            ex_token_value(ex_stop_source_token(&src))));
    cr_assert_eq(r.disposition, EX_DISP_STOPPED, "disposition %d", r.disposition);
    ex_result_destroy(&r);
    test_pool_free(p);
    expect_no_leaks();
}

/* ========================================================= post / dispatch */

static _Thread_local bool tl_inside_call; /* this thread is inside ex_post/ex_dispatch of the test */


/* outer runs on a worker and posts/dispatches inner to `target`. */
typedef struct pd {
    ex_work outer;
    ex_work inner;
    ex_scheduler target;
    bool use_dispatch;
    ex_pool *pool;                  /* the pool inner should run on */
    atomic_int outer_done, inner_runs;
    ex_error call_err;
    pthread_t outer_tid, inner_tid;
    int inner_runs_after_call;      /* inner_runs read by outer right after the call returned */
    bool inner_saw_inside_call;     /* inner ran while its own thread was inside the call */
    int inner_saw_outer_done;
    int inner_worker;
} pd;

static void pd_outer(ex_work *w) {
    pd *x = (pd *)((char *)w - offsetof(pd, outer));
    x->outer_tid = pthread_self();
    tl_inside_call = true;
    x->call_err = x->use_dispatch ? ex_dispatch(x->target, &x->inner) : ex_post(x->target, &x->inner);
    tl_inside_call = false;
    x->inner_runs_after_call = atomic_load(&x->inner_runs);
    atomic_store(&x->outer_done, 1);
}

static void pd_inner(ex_work *w) {
    pd *x = (pd *)((char *)w - offsetof(pd, inner));
    x->inner_tid = pthread_self();
    x->inner_saw_inside_call = tl_inside_call;
    x->inner_saw_outer_done = atomic_load(&x->outer_done);
    x->inner_worker = ex_pool_current_worker(x->pool);
    atomic_fetch_add(&x->inner_runs, 1);
}

static void pd_init(pd *x, ex_pool *target, bool use_dispatch) {
    memset(x, 0, sizeof *x);
    x->outer.execute = pd_outer;
    x->inner.execute = pd_inner;
    x->target = ex_pool_scheduler(target);
    x->pool = target;
    x->use_dispatch = use_dispatch;
    x->inner_worker = -2;
}

/* Posts x->outer to `on` and waits for outer and inner to finish. */
static void pd_run(pd *x, ex_pool *on) {
    ex_error e = ex_post(ex_pool_scheduler(on), &x->outer);
    cr_assert_eq(e.code, 0, "ex_post: %s", e.msg ? e.msg : "");
    EXPECT_INT_REACHES(&x->outer_done, 1);
    cr_assert_eq(x->call_err.code, 0, "post/dispatch from the worker: %s", x->call_err.msg ? x->call_err.msg : "");
    EXPECT_INT_REACHES(&x->inner_runs, 1);
}

/* outer runs on a worker of `on` and posts (or dispatches) inner to
 * target; returns when both ran. */
static void pd_go(pd *x, ex_pool *target, bool use_dispatch, ex_pool *on) {
    pd_init(x, target, use_dispatch);
    pd_run(x, on);
}

/* From main while the only worker is busy: the item is queued, and runs
 * once on the worker when it is free. */
static void pd_from_main_while_busy(bool use_dispatch) {
    hold h;
    ex_pool *p = held_pool(&h);
    pd x;
    pd_init(&x, p, use_dispatch);
    atomic_store(&x.outer_done, 1); /* inner only */
    tl_inside_call = true;
    ex_error e = use_dispatch ? ex_dispatch(ex_pool_scheduler(p), &x.inner) : ex_post(ex_pool_scheduler(p), &x.inner);
    tl_inside_call = false;
    cr_assert_eq(e.code, 0, "%s: %s", use_dispatch ? "ex_dispatch" : "ex_post", e.msg ? e.msg : "");
    cr_assert_eq(atomic_load(&x.inner_runs), 0, "the only worker is busy: %s from a non-worker ran the item",
                 use_dispatch ? "dispatch" : "post");
    hold_release(&h);
    EXPECT_INT_REACHES(&x.inner_runs, 1);
    cr_assert_not(x.inner_saw_inside_call);
    cr_assert_not(pthread_equal(x.inner_tid, pthread_self()));
    cr_assert_eq(x.inner_worker, 0);
    test_pool_free(p);
    cr_assert_eq(atomic_load(&x.inner_runs), 1, "the item ran more than once");
    cr_assert_eq(atomic_load(&h.cancelled), 0);
    expect_no_leaks();
}

Test(exec_pool, post_and_dispatch_reject_bad_work_items) {
    ex_pool *p = test_pool_new(1);
    ex_work w;
    memset(&w, 0, sizeof w);
    ex_scheduler sch = ex_pool_scheduler(p);
    cr_assert_eq(ex_post(sch, NULL).code, EX_EINVAL);
    cr_assert_eq(ex_post(sch, &w).code, EX_EINVAL, "execute NULL");
    cr_assert_eq(ex_dispatch(sch, NULL).code, EX_EINVAL);
    cr_assert_eq(ex_dispatch(sch, &w).code, EX_EINVAL);
    test_pool_free(p);
    expect_no_leaks();
}

Test(exec_pool, post_from_a_worker_never_runs_inline_one_thread) {
    ex_pool *p = test_pool_new(1);
    pd x;
    pd_go(&x, p, false, p);
    cr_assert_not(x.inner_saw_inside_call, "posted item ran inside ex_post");
    cr_assert_eq(x.inner_runs_after_call, 0, "posted item ran before ex_post returned");
    cr_assert_eq(x.inner_saw_outer_done, 1, "on a 1-thread pool the posted item runs after the poster returned");
    cr_assert(pthread_equal(x.inner_tid, x.outer_tid));
    cr_assert_eq(x.inner_worker, 0);
    test_pool_free(p);
    cr_assert_eq(atomic_load(&x.inner_runs), 1, "posted item ran more than once");
    expect_no_leaks();
}

Test(exec_pool, post_from_a_worker_never_runs_inline_four_threads) {
    ex_pool *p = test_pool_new(4);
    for (int i = 0; i < 200; i++) {
        pd x;
        pd_go(&x, p, false, p);
        cr_assert_not(x.inner_saw_inside_call, "iteration %d: posted item ran inside ex_post", i);
        if (pthread_equal(x.inner_tid, x.outer_tid))
            cr_assert_eq(x.inner_saw_outer_done, 1, "iteration %d: ran on the poster's thread before it returned", i);
        cr_assert_geq(x.inner_worker, 0);
        cr_assert_eq(atomic_load(&x.inner_runs), 1);
    }
    test_pool_free(p);
    expect_no_leaks();
}

Test(exec_pool, post_from_main_is_queued_and_runs_once_on_a_worker) { pd_from_main_while_busy(false); }

Test(exec_pool, dispatch_on_a_worker_runs_inline) {
    ex_pool *p = test_pool_new(2);
    for (int i = 0; i < 50; i++) {
        pd x;
        pd_go(&x, p, true, p);
        cr_assert(x.inner_saw_inside_call, "dispatch on a worker of the pool must run the item inline");
        cr_assert_eq(x.inner_runs_after_call, 1, "the item had not run when ex_dispatch returned");
        cr_assert_eq(x.inner_saw_outer_done, 0);
        cr_assert(pthread_equal(x.inner_tid, x.outer_tid));
        cr_assert_geq(x.inner_worker, 0);
    }
    test_pool_free(p);
    expect_no_leaks();
}

Test(exec_pool, dispatch_from_main_is_queued) { pd_from_main_while_busy(true); }

Test(exec_pool, dispatch_from_a_worker_of_another_pool_is_queued) {
    ex_pool *p = test_pool_new(1);
    ex_pool *q = test_pool_new(1);
    pd x;
    pd_go(&x, p, true, q); /* outer runs on q, dispatches to p */
    cr_assert_not(x.inner_saw_inside_call, "dispatch to p from q's worker ran inline");
    cr_assert_eq(x.inner_worker, 0, "the item must run on p's worker");
    cr_assert_not(pthread_equal(x.inner_tid, x.outer_tid));
    test_pool_free(q);
    test_pool_free(p);
    expect_no_leaks();
}

/* ================================================= sync_wait on a worker */

typedef struct chain chain;
typedef struct lvl {
    chain *c;
    int d;
} lvl;
struct chain {
    ex_pool *pool;
    int max;
    int workers[16];
    lvl lv[16];
};

static ex_error level_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    lvl *l = ctx;
    chain *c = l->c;
    (void)in, (void)n;
    c->workers[l->d] = ex_pool_current_worker(c->pool);
    if (l->d + 1 >= c->max) {
        out[0] = ex_int(1);
        return ex_ok();
    }
    ex_result r = ex_sync_wait(
        ex_then(ex_schedule(ex_pool_scheduler(c->pool)), level_fn, &c->lv[l->d + 1], EX_SIG0, EX_SIG(EX_T_INT)));
    if (r.disposition != EX_DISP_VALUE || r.n != 1) {
        ex_result_destroy(&r);
        return ex_err(EX_EUSER + 1, "level_fn: nested sync_wait failed");
    }
    int64_t v = r.values[0].as.i;
    ex_result_destroy(&r);
    out[0] = ex_int(v + 1);
    return ex_ok();
}

static void chain_init(chain *c, ex_pool *p, int levels) {
    memset(c, 0, sizeof *c);
    c->pool = p;
    c->max = levels;
    for (int d = 0; d < 16; d++) {
        c->lv[d].c = c;
        c->lv[d].d = d;
        c->workers[d] = -2;
    }
}

static ex_sender *chain_sender(chain *c) {
    return ex_then(ex_schedule(ex_pool_scheduler(c->pool)), level_fn, &c->lv[0], EX_SIG0, EX_SIG(EX_T_INT));
}

static void chain_check_workers(const chain *c) {
    for (int d = 0; d < c->max; d++)
        cr_assert_geq(c->workers[d], 0, "level %d ran off the workers (%d)", d, c->workers[d]);
}

static void nested_from_main(unsigned threads, int levels) {
    ex_pool *p = test_pool_new(threads);
    chain c;
    chain_init(&c, p, levels);
    ex_result r = ex_sync_wait(chain_sender(&c));
    cr_assert_eq(r.disposition, EX_DISP_VALUE, "disposition %d (%s)", r.disposition, r.error.msg ? r.error.msg : "");
    expect_value_int(&r, levels);
    chain_check_workers(&c);
    ex_result_destroy(&r);
    test_pool_free(p);
}

Test(exec_pool, sync_wait_on_the_only_worker_helps_instead_of_deadlocking) {
    nested_from_main(1, 2); /* one nested sync_wait */
    expect_no_leaks();
}

Test(exec_pool, sync_wait_nested_three_levels_on_one_thread) {
    nested_from_main(1, 4); /* the item and three nested sync_waits */
    nested_from_main(1, 12);
    expect_no_leaks();
}

Test(exec_pool, sync_wait_nested_three_levels_on_two_threads) {
    nested_from_main(2, 4);
    expect_no_leaks();
}

Test(exec_pool, concurrent_nested_sync_waits_on_two_threads) {
    enum { CHAINS = 8, LEVELS = 4 };
    ex_pool *p = test_pool_new(2);
    chain *c = calloc(CHAINS, sizeof *c);
    slot *s = calloc(CHAINS, sizeof *s);
    cr_assert_not_null(c);
    cr_assert_not_null(s);
    atomic_store(&g_completed, 0);
    for (int i = 0; i < CHAINS; i++) {
        chain_init(&c[i], p, LEVELS);
        slot_init(&s[i], p);
        ex_sender *snd = chain_sender(&c[i]);
        slot_start(&s[i], snd);
        ex_sender_release(snd);
    }
    long got = wait_long_reaches(&g_completed, CHAINS);
    cr_assert_eq(got, CHAINS, "%ld of %d chains finished (deadlock?)", got, CHAINS);
    cr_assert_eq(slots_expect_once(s, CHAINS), CHAINS);
    for (int i = 0; i < CHAINS; i++) {
        cr_assert_eq(s[i].r.n, 1);
        cr_assert_eq(s[i].r.v[0].as.i, LEVELS, "chain %d: %lld", i, (long long)s[i].r.v[0].as.i);
        chain_check_workers(&c[i]);
    }
    slots_destroy(s, CHAINS);
    free(s);
    free(c);
    test_pool_free(p);
    expect_no_leaks();
}

