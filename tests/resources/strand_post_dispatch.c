/* SPDX-License-Identifier: MIT */
/* The strand: post never runs an item inline, dispatch runs it inline only
 * inside the strand (suite exec_strand, declared in strand_create.c). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "resources/strand_fixtures.h"

/* ===================================================== post never inline */

/* A pool item (not a strand item) that posts/dispatches `arg` to a strand
 * and notes whether it had run by the time the call returned. */
typedef struct caller {
    ex_work w;
    ex_scheduler target;
    item *inner;
    bool use_dispatch;
    ex_error err;
    int runs_at_return;
    atomic_int done;
    pthread_t tid;
} caller;

static void caller_exec(ex_work *w) {
    caller *c = (caller *)(void *)w;
    c->tid = pthread_self();
    tl_in_call = true;
    c->err = c->use_dispatch ? ex_dispatch(c->target, &c->inner->w) : ex_post(c->target, &c->inner->w);
    tl_in_call = false;
    c->runs_at_return = atomic_load(&c->inner->runs);
    atomic_store(&c->done, 1);
}

static void caller_init(caller *c, ex_scheduler target, item *inner, bool use_dispatch) {
    memset(c, 0, sizeof *c);
    c->w.execute = caller_exec;
    c->target = target;
    c->inner = inner;
    c->use_dispatch = use_dispatch;
}

/* From a worker of pool p: posts (or dispatches) a fresh item to strand s,
 * waits until both the caller and the item have run. */
static void call_from_worker(ex_pool *p, ex_strand *s, box *b, bool use_dispatch, caller *c, item *in) {
    item_init(in, 0, b);
    caller_init(c, ex_strand_scheduler(s), in, use_dispatch);
    cr_assert_eq(ex_post(ex_pool_scheduler(p), &c->w).code, 0);
    EXPECT_INT_REACHES(&c->done, 1);
    EXPECT_INT_REACHES(&in->runs, 1);
    cr_assert_eq(c->err.code, 0);
}

/* Inside a strand item: posts/dispatches it->arg (an item) to it->sch. */
static void call_action(item *it) {
    item *inner = it->arg;
    tl_in_call = true;
    it->call_err = it->flag ? ex_dispatch(it->sch, &inner->w) : ex_post(it->sch, &inner->w);
    tl_in_call = false;
    it->ran_seen = atomic_load(&inner->runs); /* (reused: inner runs at return) */
}

/* Makes outer an item that posts (or dispatches) inner to target. */
static void make_caller_item(item *outer, item *inner, ex_scheduler target, bool use_dispatch) {
    outer->action = call_action;
    outer->arg = inner;
    outer->flag = use_dispatch;
    outer->sch = target;
}

/* Posts outer to the strand `on`; outer dispatches inner to target.
 * Returns when inner ran. */
static void dispatch_from_an_item(item *outer, item *inner, ex_scheduler on, ex_scheduler target) {
    make_caller_item(outer, inner, target, true);
    post_ok(on, outer);
    EXPECT_INT_REACHES(&inner->runs, 1);
}

/* From main while the only worker of the rig's pool is busy: the item is
 * queued, and runs on the worker once it is free. */
static void call_from_main_while_busy(rig *r, bool use_dispatch) {
    item *a = &r->it[0];
    if (use_dispatch) dispatch_ok(r->sch, a);
    else post_ok(r->sch, a);
    cr_assert_eq(atomic_load(&a->runs), 0, "the only worker is busy: %s from main ran the item",
                 use_dispatch ? "dispatch" : "post");
    rig_release(r);
    EXPECT_INT_REACHES(&a->runs, 1);
    cr_assert_not(a->saw_in_call);
    cr_assert_eq(a->worker, 0);
}

/* From the only worker of the rig's pool, outside the strand, `rounds`
 * times: the item is queued, and runs on that worker after the call. */
static void call_from_the_worker(rig *r, bool use_dispatch, int rounds) {
    for (int k = 0; k < rounds; k++) {
        item in;
        caller c;
        call_from_worker(r->p, r->s, r->b, use_dispatch, &c, &in);
        cr_assert_eq(c.runs_at_return, 0, "round %d: %s on a pool worker outside the strand ran the item inline", k,
                     use_dispatch ? "dispatch" : "post");
        cr_assert_not(in.saw_in_call);
        cr_assert(pthread_equal(in.tid, c.tid), "one worker: the item runs on it, after the caller returned");
    }
}

Test(exec_strand, post_never_runs_inline_on_a_pool) {
    rig r;
    rig_open_held(&r, 1, 0);
    call_from_main_while_busy(&r, false);
    call_from_the_worker(&r, false, 20); /* to an idle strand */

    /* From inside a strand item to the same strand. */
    item outer, inner;
    item_init(&outer, 0, r.b);
    item_init(&inner, 1, r.b);
    make_caller_item(&outer, &inner, r.sch, false);
    post_ok(r.sch, &outer);
    EXPECT_INT_REACHES(&inner.runs, 1);
    cr_assert_eq(outer.call_err.code, 0);
    cr_assert_eq(outer.ran_seen, 0, "a post from inside the strand ran the item inline");
    cr_assert_not(inner.saw_in_call);
    cr_assert_eq(atomic_load(&r.b->violations), 0);
    rig_close(&r, false);
}

Test(exec_strand, post_never_runs_inline_on_four_workers) {
    rig r;
    rig_open(&r, 4, 0, 0);
    for (int k = 0; k < 200; k++) {
        item in;
        caller c;
        call_from_worker(r.p, r.s, r.b, false, &c, &in);
        cr_assert_not(in.saw_in_call, "round %d: the item ran inside ex_post", k);
        if (pthread_equal(in.tid, c.tid))
            cr_assert_eq(c.runs_at_return, 0, "round %d: ran on the poster's thread before post returned", k);
        cr_assert_geq(in.worker, 0);
    }
    rig_close(&r, false);
}

/* A run-loop item that posts to a strand over the same loop. */
Test(exec_strand, post_never_runs_inline_on_a_run_loop) {
    ex_run_loop loop;
    test_loop_init(&loop);
    rig r;
    rig_open_over(&r, ex_run_loop_scheduler(&loop), 2, 0);
    rig_post(&r, 0, 1);
    cr_assert_eq(atomic_load(&r.it[0].runs), 0, "nothing runs before the loop runs");

    /* A loop item (on the loop's thread, outside the strand) posts. */
    item *in = &r.it[1];
    caller c;
    caller_init(&c, r.sch, in, false);
    ex_run_loop_push(&loop, &c.w);
    cr_assert_eq(atomic_load(&in->runs), 0);
    double end = test_now_s() + TEST_WAIT_LIMIT_S;
    while (atomic_load(&r.b->ran) < 2 && test_now_s() < end) ex_run_loop_run_one(&loop);
    cr_assert_eq(atomic_load(&r.it[0].runs), 1);
    cr_assert_eq(atomic_load(&in->runs), 1);
    cr_assert_eq(c.err.code, 0);
    cr_assert_eq(c.runs_at_return, 0, "the posted item ran inside ex_post on the loop's thread");
    cr_assert_not(in->saw_in_call);
    cr_assert(pthread_equal(in->tid, pthread_self()));
    expect_log_in_order(r.b, 2);
    ex_run_loop_finish(&loop);
    cr_assert_eq(ex_run_loop_run(&loop).code, 0);
    rig_close(&r, true);
    test_loop_destroy(&loop);
}

Test(exec_strand, post_never_runs_inline_on_a_single_thread_context) {
    enum { N = 20 };
    ex_single_thread_context ctx;
    ex_scheduler under = test_stc_init(&ctx);
    rig r;
    rig_open_over(&r, under, N + 1, 0);
    caller c[N];
    for (int k = 0; k < N; k++) {
        caller_init(&c[k], r.sch, &r.it[k], false);
        cr_assert_eq(ex_post(under, &c[k].w).code, 0);
    }
    EXPECT_INT_REACHES(&r.b->ran, N);
    pthread_t ctx_thread = ex_single_thread_context_thread_id(&ctx);
    for (int k = 0; k < N; k++) {
        EXPECT_INT_REACHES(&c[k].done, 1);
        cr_assert_eq(c[k].err.code, 0);
        cr_assert_eq(c[k].runs_at_return, 0, "item %d ran inside ex_post on the context's thread", k);
        cr_assert_not(r.it[k].saw_in_call);
        cr_assert(pthread_equal(r.it[k].tid, ctx_thread), "item %d ran off the context's thread", k);
    }
    expect_log_in_order(r.b, N);
    /* From main as well: runs on the context's thread. */
    rig_post(&r, N, N + 1);
    EXPECT_INT_REACHES(&r.it[N].runs, 1);
    cr_assert(pthread_equal(r.it[N].tid, ctx_thread));
    test_stc_destroy(&ctx);
    rig_close(&r, true); /* the context ran its queue and joined: the strand is idle */
}

/* ============================================================== dispatch */

Test(exec_strand, dispatch_inside_an_item_runs_inline_ahead_of_the_queue) {
    rig r;
    rig_open(&r, 2, 0, 0);
    for (int round = 0; round < 50; round++) {
        r.b->nlog = 0;
        atomic_store(&r.b->ran, 0);
        /* log: outer (0), inner (1), then the item queued behind outer (2) */
        item outer, inner, behind;
        item_init(&outer, 0, r.b);
        item_init(&inner, 1, r.b);
        item_init(&behind, 2, r.b);
        inner.nested = true;
        make_caller_item(&outer, &inner, r.sch, true);
        post_ok(r.sch, &outer);
        post_ok(r.sch, &behind);
        EXPECT_INT_REACHES(&r.b->ran, 3);
        cr_assert_eq(outer.call_err.code, 0);
        cr_assert_eq(outer.ran_seen, 1, "round %d: the dispatched item had not run when ex_dispatch returned", round);
        cr_assert(inner.saw_in_call, "round %d: the dispatched item did not run inside the call", round);
        cr_assert(pthread_equal(inner.tid, outer.tid));
        cr_assert_geq(inner.worker, 0);
        cr_assert_eq(atomic_load(&inner.runs), 1);
        expect_log_in_order(r.b, 3);
    }
    cr_assert_eq(atomic_load(&r.b->violations), 0);
    rig_close(&r, false);
}

/* A schedule completion runs inside the strand: a then() callback on it can
 * dispatch to the strand inline. */
typedef struct inside_probe {
    ex_scheduler sch;
    item *inner;
    int runs_at_return;
    ex_error err;
} inside_probe;

static ex_error inside_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    inside_probe *x = ctx;
    tl_in_call = true;
    x->err = ex_dispatch(x->sch, &x->inner->w);
    tl_in_call = false;
    x->runs_at_return = atomic_load(&x->inner->runs);
    return ex_ok();
}

Test(exec_strand, schedule_completion_runs_inside_the_strand) {
    rig r;
    rig_open(&r, 2, 0, 0);
    for (int k = 0; k < 20; k++) {
        item inner;
        item_init(&inner, 0, r.b);
        inner.nested = true;
        inside_probe x = { r.sch, &inner, -1, ex_ok() };
        ex_result res = ex_sync_wait(ex_then(ex_schedule(r.sch), inside_fn, &x, EX_SIG0, EX_SIG0));
        cr_assert_eq(res.disposition, EX_DISP_VALUE);
        ex_result_destroy(&res);
        cr_assert_eq(x.err.code, 0);
        cr_assert_eq(x.runs_at_return, 1, "round %d: dispatch from a schedule completion of the strand did not run "
                     "inline", k);
        cr_assert(inner.saw_in_call);
        cr_assert_geq(inner.worker, 0);
    }
    rig_close(&r, false);
}

Test(exec_strand, dispatch_from_outside_the_strand_queues_the_item) {
    rig r;
    rig_open_held(&r, 1, 0);
    call_from_main_while_busy(&r, true);
    call_from_the_worker(&r, true, 20); /* a worker of the underlying pool, not inside the strand */
    rig_close(&r, false);
}

Test(exec_strand, dispatch_from_inside_a_different_strand_queues_the_item) {
    rig r;
    rig_open(&r, 1, 0, 0);
    ex_strand *s2 = strand_new(ex_pool_scheduler(r.p));
    box *b2 = box_new(r.p);
    for (int k = 0; k < 20; k++) {
        item outer, inner;
        item_init(&outer, 0, r.b);
        item_init(&inner, 0, b2);
        dispatch_from_an_item(&outer, &inner, r.sch, ex_strand_scheduler(s2));
        cr_assert_eq(outer.call_err.code, 0);
        cr_assert_eq(outer.ran_seen, 0, "round %d: dispatch to another (idle) strand ran inline", k);
        cr_assert_not(inner.saw_in_call);
    }
    strand_free(s2);
    free(b2);
    rig_close(&r, false);
}

/* Strand B over strand A: an item of B runs inside an item of A (B's turn),
 * so the thread is running an item of A: dispatch to A runs inline there.
 * From an item of A that is not B's turn, dispatch to B queues. */
Test(exec_strand, dispatch_to_the_outer_strand_from_an_inner_strand_item_runs_inline) {
    rig a;  /* strand A, items of A in a.b */
    rig_open(&a, 1, 0, 0);
    ex_strand *bs = strand_new(a.sch);
    box *b2 = box_new(a.p);

    item outer, inner;
    item_init(&outer, 0, a.b);
    item_init(&inner, 0, b2);
    inner.nested = true;
    dispatch_from_an_item(&outer, &inner, ex_strand_scheduler(bs), a.sch);
    EXPECT_INT_REACHES(&outer.runs, 1);

    item outer2, inner2;
    item_init(&outer2, 1, a.b);
    item_init(&inner2, 1, b2);
    dispatch_from_an_item(&outer2, &inner2, a.sch, ex_strand_scheduler(bs));
    cr_assert_eq(outer2.call_err.code, 0);
    cr_assert_eq(outer2.ran_seen, 0, "dispatch to the inner strand from an outer item (not its turn) ran inline");

    cr_assert_eq(outer.call_err.code, 0);
    cr_assert_eq(outer.ran_seen, 1,
                 "dispatch to strand A from an item of strand B (B over A: the thread runs A's item) "
                 "was queued instead of running inline");
    strand_free(bs);
    free(b2);
    rig_close(&a, false);
}
