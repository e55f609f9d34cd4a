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

Test(exec_strand, post_never_runs_inline_on_a_pool) {
    ex_pool *p = test_pool_new(1);
    ex_strand *s = strand_new(ex_pool_scheduler(p));
    box *b = box_new(p);

    /* From main while the only worker is busy. */
    atomic_int release = 0;
    hold h;
    hold_init(&h, &release);
    hold_post(p, &h);
    item a;
    item_init(&a, 0, b);
    post_ok(ex_strand_scheduler(s), &a);
    cr_assert_eq(atomic_load(&a.runs), 0, "the only worker is busy: the item cannot have run");
    atomic_store(&release, 1);
    EXPECT_INT_REACHES(&a.runs, 1);
    cr_assert_not(a.saw_in_call);
    cr_assert_eq(a.worker, 0);

    /* From a worker of the pool, to an idle strand. */
    for (int k = 0; k < 20; k++) {
        item in;
        caller c;
        call_from_worker(p, s, b, false, &c, &in);
        cr_assert_eq(c.runs_at_return, 0, "round %d: the posted item ran inside ex_post on the worker", k);
        cr_assert_not(in.saw_in_call);
        cr_assert(pthread_equal(in.tid, c.tid), "one worker: the item runs on it, after the poster returned");
    }

    /* From inside a strand item to the same strand. */
    item outer, inner;
    item_init(&outer, 0, b);
    item_init(&inner, 1, b);
    outer.action = call_action;
    outer.arg = &inner;
    outer.sch = ex_strand_scheduler(s);
    post_ok(ex_strand_scheduler(s), &outer);
    EXPECT_INT_REACHES(&inner.runs, 1);
    cr_assert_eq(outer.call_err.code, 0);
    cr_assert_eq(outer.ran_seen, 0, "a post from inside the strand ran the item inline");
    cr_assert_not(inner.saw_in_call);
    cr_assert_eq(atomic_load(&b->violations), 0);
    strand_free(s);
    test_pool_free(p);
    free(b);
    expect_no_leaks();
}

Test(exec_strand, post_never_runs_inline_on_four_workers) {
    ex_pool *p = test_pool_new(4);
    ex_strand *s = strand_new(ex_pool_scheduler(p));
    box *b = box_new(p);
    for (int k = 0; k < 200; k++) {
        item in;
        caller c;
        call_from_worker(p, s, b, false, &c, &in);
        cr_assert_not(in.saw_in_call, "round %d: the item ran inside ex_post", k);
        if (pthread_equal(in.tid, c.tid))
            cr_assert_eq(c.runs_at_return, 0, "round %d: ran on the poster's thread before post returned", k);
        cr_assert_geq(in.worker, 0);
    }
    strand_free(s);
    test_pool_free(p);
    free(b);
    expect_no_leaks();
}

/* A run-loop item that posts to a strand over the same loop. */
Test(exec_strand, post_never_runs_inline_on_a_run_loop) {
    ex_run_loop loop;
    cr_assert_eq(ex_run_loop_init(&loop).code, 0);
    ex_strand *s = strand_new(ex_run_loop_scheduler(&loop));
    box *b = box_new(NULL);
    item a;
    item_init(&a, 0, b);
    post_ok(ex_strand_scheduler(s), &a);
    cr_assert_eq(atomic_load(&a.runs), 0, "nothing runs before the loop runs");

    /* A loop item (on the loop's thread, outside the strand) posts. */
    item in;
    item_init(&in, 1, b);
    caller c;
    caller_init(&c, ex_strand_scheduler(s), &in, false);
    ex_run_loop_push(&loop, &c.w);
    cr_assert_eq(atomic_load(&in.runs), 0);
    double end = test_now_s() + TEST_WAIT_LIMIT_S;
    while (atomic_load(&b->ran) < 2 && test_now_s() < end) ex_run_loop_run_one(&loop);
    cr_assert_eq(atomic_load(&a.runs), 1);
    cr_assert_eq(atomic_load(&in.runs), 1);
    cr_assert_eq(c.err.code, 0);
    cr_assert_eq(c.runs_at_return, 0, "the posted item ran inside ex_post on the loop's thread");
    cr_assert_not(in.saw_in_call);
    cr_assert(pthread_equal(in.tid, pthread_self()));
    expect_log_in_order(b, 2);
    strand_free_now(s);
    ex_run_loop_finish(&loop);
    cr_assert_eq(ex_run_loop_run(&loop).code, 0);
    cr_assert_eq(ex_run_loop_destroy(&loop).code, 0);
    free(b);
    expect_no_leaks();
}

Test(exec_strand, post_never_runs_inline_on_a_single_thread_context) {
    ex_single_thread_context ctx;
    cr_assert_eq(ex_single_thread_context_init(&ctx).code, 0);
    ex_scheduler under = ex_single_thread_context_scheduler(&ctx);
    ex_strand *s = strand_new(under);
    box *b = box_new(NULL);
    enum { N = 20 };
    item in[N];
    caller c[N];
    for (int k = 0; k < N; k++) {
        item_init(&in[k], k, b);
        caller_init(&c[k], ex_strand_scheduler(s), &in[k], false);
        cr_assert_eq(ex_post(under, &c[k].w).code, 0);
    }
    EXPECT_INT_REACHES(&b->ran, N);
    pthread_t ctx_thread = ex_single_thread_context_thread_id(&ctx);
    for (int k = 0; k < N; k++) {
        EXPECT_INT_REACHES(&c[k].done, 1);
        cr_assert_eq(c[k].err.code, 0);
        cr_assert_eq(c[k].runs_at_return, 0, "item %d ran inside ex_post on the context's thread", k);
        cr_assert_not(in[k].saw_in_call);
        cr_assert(pthread_equal(in[k].tid, ctx_thread), "item %d ran off the context's thread", k);
    }
    expect_log_in_order(b, N);
    /* From main as well: runs on the context's thread. */
    item m;
    item_init(&m, N, b);
    post_ok(ex_strand_scheduler(s), &m);
    EXPECT_INT_REACHES(&m.runs, 1);
    cr_assert(pthread_equal(m.tid, ctx_thread));
    cr_assert_eq(ex_single_thread_context_destroy(&ctx).code, 0);
    strand_free_now(s); /* the context ran its queue and joined: the strand is idle */
    free(b);
    expect_no_leaks();
}

/* ============================================================== dispatch */

Test(exec_strand, dispatch_inside_an_item_runs_inline_ahead_of_the_queue) {
    ex_pool *p = test_pool_new(2);
    ex_strand *s = strand_new(ex_pool_scheduler(p));
    box *b = box_new(p);
    for (int round = 0; round < 50; round++) {
        b->nlog = 0;
        atomic_store(&b->ran, 0);
        /* log: outer (0), inner (1), then the item queued behind outer (2) */
        item outer, inner, behind;
        item_init(&outer, 0, b);
        item_init(&inner, 1, b);
        item_init(&behind, 2, b);
        inner.nested = true;
        outer.action = call_action;
        outer.arg = &inner;
        outer.flag = 1; /* dispatch */
        outer.sch = ex_strand_scheduler(s);
        post_ok(ex_strand_scheduler(s), &outer);
        post_ok(ex_strand_scheduler(s), &behind);
        EXPECT_INT_REACHES(&b->ran, 3);
        cr_assert_eq(outer.call_err.code, 0);
        cr_assert_eq(outer.ran_seen, 1, "round %d: the dispatched item had not run when ex_dispatch returned", round);
        cr_assert(inner.saw_in_call, "round %d: the dispatched item did not run inside the call", round);
        cr_assert(pthread_equal(inner.tid, outer.tid));
        cr_assert_geq(inner.worker, 0);
        cr_assert_eq(atomic_load(&inner.runs), 1);
        expect_log_in_order(b, 3);
    }
    cr_assert_eq(atomic_load(&b->violations), 0);
    strand_free(s);
    test_pool_free(p);
    free(b);
    expect_no_leaks();
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
    ex_pool *p = test_pool_new(2);
    ex_strand *s = strand_new(ex_pool_scheduler(p));
    box *b = box_new(p);
    for (int k = 0; k < 20; k++) {
        item inner;
        item_init(&inner, 0, b);
        inner.nested = true;
        inside_probe x = { ex_strand_scheduler(s), &inner, -1, ex_ok() };
        ex_result r = ex_sync_wait(ex_then(ex_schedule(ex_strand_scheduler(s)), inside_fn, &x, EX_SIG0, EX_SIG0));
        cr_assert_eq(r.disposition, EX_DISP_VALUE);
        ex_result_destroy(&r);
        cr_assert_eq(x.err.code, 0);
        cr_assert_eq(x.runs_at_return, 1, "round %d: dispatch from a schedule completion of the strand did not run "
                     "inline", k);
        cr_assert(inner.saw_in_call);
        cr_assert_geq(inner.worker, 0);
    }
    strand_free(s);
    test_pool_free(p);
    free(b);
    expect_no_leaks();
}

Test(exec_strand, dispatch_from_outside_the_strand_queues_the_item) {
    ex_pool *p = test_pool_new(1);
    ex_strand *s = strand_new(ex_pool_scheduler(p));
    box *b = box_new(p);

    /* From main while the only worker is busy. */
    atomic_int release = 0;
    hold h;
    hold_init(&h, &release);
    hold_post(p, &h);
    item a;
    item_init(&a, 0, b);
    tl_in_call = true;
    cr_assert_eq(ex_dispatch(ex_strand_scheduler(s), &a.w).code, 0);
    tl_in_call = false;
    cr_assert_eq(atomic_load(&a.runs), 0, "dispatch from main ran the item");
    atomic_store(&release, 1);
    EXPECT_INT_REACHES(&a.runs, 1);
    cr_assert_not(a.saw_in_call);
    cr_assert_eq(a.worker, 0);

    /* From a worker of the underlying pool that is not inside the strand. */
    for (int k = 0; k < 20; k++) {
        item in;
        caller c;
        call_from_worker(p, s, b, true, &c, &in);
        cr_assert_eq(c.runs_at_return, 0, "round %d: dispatch on a pool worker outside the strand ran inline", k);
        cr_assert_not(in.saw_in_call);
    }
    strand_free(s);
    test_pool_free(p);
    free(b);
    expect_no_leaks();
}

Test(exec_strand, dispatch_from_inside_a_different_strand_queues_the_item) {
    ex_pool *p = test_pool_new(1);
    ex_strand *s1 = strand_new(ex_pool_scheduler(p));
    ex_strand *s2 = strand_new(ex_pool_scheduler(p));
    box *b1 = box_new(p), *b2 = box_new(p);
    for (int k = 0; k < 20; k++) {
        item outer, inner;
        item_init(&outer, 0, b1);
        item_init(&inner, 0, b2);
        outer.action = call_action;
        outer.arg = &inner;
        outer.flag = 1;
        outer.sch = ex_strand_scheduler(s2);
        post_ok(ex_strand_scheduler(s1), &outer);
        EXPECT_INT_REACHES(&inner.runs, 1);
        cr_assert_eq(outer.call_err.code, 0);
        cr_assert_eq(outer.ran_seen, 0, "round %d: dispatch to another (idle) strand ran inline", k);
        cr_assert_not(inner.saw_in_call);
    }
    strand_free(s1);
    strand_free(s2);
    test_pool_free(p);
    free(b1);
    free(b2);
    expect_no_leaks();
}

/* Strand B over strand A: an item of B runs inside an item of A (B's turn),
 * so the thread is running an item of A: dispatch to A runs inline there.
 * From an item of A that is not B's turn, dispatch to B queues. */
Test(exec_strand, dispatch_to_the_outer_strand_from_an_inner_strand_item_runs_inline) {
    ex_pool *p = test_pool_new(1);
    ex_strand *a = strand_new(ex_pool_scheduler(p));
    ex_strand *bs = strand_new(ex_strand_scheduler(a));
    box *b1 = box_new(p), *b2 = box_new(p);

    item outer, inner;
    item_init(&outer, 0, b1);
    item_init(&inner, 0, b2);
    inner.nested = true;
    outer.action = call_action;
    outer.arg = &inner;
    outer.flag = 1;
    outer.sch = ex_strand_scheduler(a);
    post_ok(ex_strand_scheduler(bs), &outer);
    EXPECT_INT_REACHES(&inner.runs, 1);
    EXPECT_INT_REACHES(&outer.runs, 1);

    item outer2, inner2;
    item_init(&outer2, 1, b1);
    item_init(&inner2, 1, b2);
    outer2.action = call_action;
    outer2.arg = &inner2;
    outer2.flag = 1;
    outer2.sch = ex_strand_scheduler(bs);
    post_ok(ex_strand_scheduler(a), &outer2);
    EXPECT_INT_REACHES(&inner2.runs, 1);
    cr_assert_eq(outer2.call_err.code, 0);
    cr_assert_eq(outer2.ran_seen, 0, "dispatch to the inner strand from an outer item (not its turn) ran inline");

    cr_assert_eq(outer.call_err.code, 0);
    cr_assert_eq(outer.ran_seen, 1,
                 "dispatch to strand A from an item of strand B (B over A: the thread runs A's item) "
                 "was queued instead of running inline");
    strand_free(bs);
    strand_free(a);
    test_pool_free(p);
    free(b1);
    free(b2);
    expect_no_leaks();
}

