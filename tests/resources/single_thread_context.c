/* SPDX-License-Identifier: MIT */
/* single_thread_context (P2300 §1.6.2): work on its thread, its scheduler,
 * destroy (drains, joins, refuses new work) (suite exec_run_loop, declared
 * in run_loop.c). */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resources/run_loop_fixtures.h"

/* ------------------------------------------------- single_thread_context */

/* Notes (in *ctx, a pthread_t) the thread it runs on. */
static ex_error rl_record_thread(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    *(pthread_t *)ctx = pthread_self();
    return ex_ok();
}

/* Destroys its own context from the context's thread. */
typedef struct rl_where {
    pthread_t thread;
    ex_single_thread_context *ctx;
    ex_error destroy_result;
} rl_where;

static ex_error rl_destroy_from_inside(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    rl_where *w = ctx;
    w->thread = pthread_self();
    w->destroy_result = ex_single_thread_context_destroy(w->ctx);
    out[0] = ex_int(w->destroy_result.code);
    return ex_ok();
}

/* Runs rl_record_thread on ctx through sync_wait; asserts it ran on the
 * context's thread. */
static void record_thread_on(ex_single_thread_context *ctx) {
    pthread_t ran_on = pthread_self();
    ex_result r = ex_sync_wait(
        ex_then(ex_schedule(ex_single_thread_context_scheduler(ctx)), rl_record_thread, &ran_on, EX_SIG0, EX_SIG0));
    cr_assert_eq(r.disposition, EX_DISP_VALUE, "got %d (%s)", r.disposition, r.error.msg ? r.error.msg : "");
    ex_result_destroy(&r);
    cr_assert(pthread_equal(ran_on, ex_single_thread_context_thread_id(ctx)), "work runs on the context's thread");
}

Test(exec_run_loop, single_thread_context_runs_work_on_its_thread) {
    ex_single_thread_context ctx;
    test_stc_init(&ctx);
    cr_assert_not(pthread_equal(ex_single_thread_context_thread_id(&ctx), pthread_self()));
    record_thread_on(&ctx);
    test_stc_destroy(&ctx);
    expect_no_leaks();
}

Test(exec_run_loop, single_thread_context_scheduler_properties) {
    ex_single_thread_context a, b;
    test_stc_init(&a);
    test_stc_init(&b);
    ex_scheduler sa = ex_single_thread_context_scheduler(&a), sb = ex_single_thread_context_scheduler(&b);
    cr_assert(ex_scheduler_equal(sa, ex_single_thread_context_scheduler(&a)));
    cr_assert_not(ex_scheduler_equal(sa, sb));
    cr_assert_not(pthread_equal(ex_single_thread_context_thread_id(&a), ex_single_thread_context_thread_id(&b)));
    ex_sender *s = ex_schedule(sa);
    ex_scheduler got;
    cr_assert(ex_get_completion_scheduler(s, &ex_key_completion_scheduler_value, &got));
    cr_assert(ex_scheduler_equal(got, sa));
    ex_sender_release(s);
    test_stc_destroy(&a);
    test_stc_destroy(&b);
    expect_no_leaks();
}

Test(exec_run_loop, single_thread_context_stopped_channel) {
    ex_single_thread_context ctx;
    test_stc_init(&ctx);
    ex_sender *s = ex_schedule(ex_single_thread_context_scheduler(&ctx));
    rl_sched_op o;
    rec_init(&o.r);
    rec_with_stop(&o.r);
    rl_connect_schedule(&o, s);
    cr_assert(ex_stop_source_request_stop(&o.r.stop));
    ex_start(o.op);
    test_stc_destroy(&ctx); /* drains and joins */
    cr_assert_eq(o.r.stops, 1);
    cr_assert_eq(rec_total(&o.r), 1);
    cr_assert_neq(o.r.thread, test_thread_id());
    ex_operation_destroy(o.op);
    ex_sender_release(s);
    expect_no_leaks();
}

static atomic_int rl_slow_done;

static ex_error rl_slow_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)in, (void)n, (void)out;
    rl_nap(20000);
    atomic_store(&rl_slow_done, 1);
    return ex_ok();
}

Test(exec_run_loop, single_thread_context_destroy_drains_and_joins) {
    enum { N = 8 };
    ex_single_thread_context ctx;
    test_stc_init(&ctx);
    atomic_store(&rl_slow_done, 0);
    ex_sender *s = ex_schedule(ex_single_thread_context_scheduler(&ctx));
    /* a slow item first, so the operations below are still queued at destroy */
    rec slow_rec;
    rec_init(&slow_rec);
    ex_sender *slow_s = ex_then(ex_sender_retain(s), rl_slow_fn, NULL, EX_SIG0, EX_SIG0);
    ex_operation *slow = run_start(slow_s, &slow_rec);
    rl_sched_op o[N];
    rl_sched_ops_start(o, N, s);
    test_stc_destroy(&ctx);
    /* destroy returned: everything queued ran and the thread is joined */
    cr_assert_eq(atomic_load(&rl_slow_done), 1);
    cr_assert_eq(slow_rec.values, 1);
    cr_assert_neq(slow_rec.thread, test_thread_id());
    rl_sched_ops_expect_values(o, N, slow_rec.thread);
    run_destroy(slow);
    ex_sender_release(slow_s);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_run_loop, single_thread_context_destroy_from_its_own_thread_is_einval) {
    ex_single_thread_context ctx;
    test_stc_init(&ctx);
    rl_where w;
    memset(&w, 0, sizeof w);
    w.ctx = &ctx;
    w.destroy_result = ex_err(-1, "not called");
    ex_result r = ex_sync_wait(ex_then(ex_schedule(ex_single_thread_context_scheduler(&ctx)), rl_destroy_from_inside,
                                       &w, EX_SIG0, EX_SIG(EX_T_INT)));
    expect_value_int(&r, EX_EINVAL);
    ex_result_destroy(&r);
    cr_assert(pthread_equal(w.thread, ex_single_thread_context_thread_id(&ctx)));
    cr_assert_eq(w.destroy_result.code, EX_EINVAL);
    cr_assert_not_null(w.destroy_result.msg);
    record_thread_on(&ctx); /* the context still works and is destroyed properly from here */
    test_stc_destroy(&ctx);
    expect_no_leaks();
}

/* Inside the context's work: a sync_wait of work bound for the context
 * would wait for ever (it used to hang, silently); it is refused before
 * anything starts. */
static ex_error rl_one(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)in, (void)n;
    out[0] = ex_int(1);
    return ex_ok();
}

static ex_error rl_sync_wait_inside(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    ex_single_thread_context *c = ctx;
    ex_result r = ex_sync_wait(ex_then(ex_schedule(ex_single_thread_context_scheduler(c)), rl_one, NULL, EX_SIG0,
                                       EX_SIG(EX_T_INT)));
    out[0] = ex_int(r.disposition == EX_DISP_ERROR ? r.error.code : -1);
    ex_result_destroy(&r);
    return ex_ok();
}

Test(exec_run_loop, sync_wait_on_a_single_thread_contexts_own_thread_is_edeadlk) {
    ex_single_thread_context ctx;
    test_stc_init(&ctx);
    ex_result r = ex_sync_wait(ex_then(ex_schedule(ex_single_thread_context_scheduler(&ctx)), rl_sync_wait_inside, &ctx,
                                       EX_SIG0, EX_SIG(EX_T_INT)));
    expect_value_int(&r, EX_EDEADLK);
    ex_result_destroy(&r);
    /* Elsewhere, sync_wait of the context's work goes on as before. */
    record_thread_on(&ctx);
    test_stc_destroy(&ctx);
    expect_no_leaks();
}

/* --------------------------- single_thread_context shutdown (issue 17, 8) */

/* A posted item that counts its runs; optionally posts a follow-up to its
 * own context when it runs (during destroy: must be refused). */
typedef struct rl_counted {
    ex_work work;   /* first member */
    atomic_int runs;
    ex_single_thread_context *repost_to;
    struct rl_counted *follow_up;
    int repost_code;
} rl_counted;

static void rl_counted_execute(ex_work *w) {
    rl_counted *c = (rl_counted *)(void *)w;
    atomic_fetch_add(&c->runs, 1);
    if (c->repost_to)
        c->repost_code = ex_post(ex_single_thread_context_scheduler(c->repost_to), &c->follow_up->work).code;
}

static void rl_counted_init(rl_counted *c) {
    memset(c, 0, sizeof *c);
    c->work.execute = rl_counted_execute;
    atomic_init(&c->runs, 0);
}

static ex_error destroy_context(void *ctx) { return ex_single_thread_context_destroy(ctx); }

/* Destroy has begun while the context's thread is held in an item: from
 * then on post, dispatch and schedule are refused with EX_ESHUTDOWN, and
 * everything accepted before still runs exactly once.  The old destroy
 * accepted every post (and lost those that came after run() returned). */
Test(exec_run_loop, single_thread_context_refuses_work_once_destroy_began) {
    enum { MAX_TRIES = 2000 };
    ex_single_thread_context ctx;
    ex_scheduler sch = test_stc_init(&ctx);
    rl_holder h;
    rl_holder_init(&h, NULL);
    cr_assert_eq(ex_post(sch, &h.work).code, 0);
    while (!atomic_load(&h.finished)) sched_yield();

    rl_counted *items = calloc(MAX_TRIES, sizeof *items);
    cr_assert_not_null(items);
    rl_counted reposter, follow_up;
    rl_counted_init(&reposter);
    rl_counted_init(&follow_up);
    reposter.repost_to = &ctx;
    reposter.follow_up = &follow_up;
    cr_assert_eq(ex_post(sch, &reposter.work).code, 0);

    rl_runner d;
    pthread_t th;
    rl_thread_start(&d, destroy_context, &ctx, &th);
    int accepted = 0, code = 0;
    while (accepted < MAX_TRIES) {
        rl_counted_init(&items[accepted]);
        if ((code = ex_post(sch, &items[accepted].work).code)) break;
        accepted++;
        rl_nap(1000);  /* let the destroyer start */
    }
    cr_assert_eq(code, EX_ESHUTDOWN, "post after destroy began: got %d after %d accepted", code, accepted);
    rl_counted late;
    rl_counted_init(&late);
    cr_assert_eq(ex_dispatch(sch, &late.work).code, EX_ESHUTDOWN);
    rec sr;
    rec_init(&sr);
    ex_sender *s = ex_schedule(sch);
    ex_operation *op = run_start(s, &sr);
    cr_assert_eq(sr.errors, 1, "schedule started after destroy began completes at once with an error");
    cr_assert_eq(sr.err.code, EX_ESHUTDOWN);
    cr_assert_eq(rec_total(&sr), 1);
    cr_assert_eq(atomic_load(&d.returned), 0, "destroy waits for the held item");

    atomic_store(&h.release, 1);
    pthread_join(th, NULL);
    cr_assert_eq(d.result.code, 0);
    for (int i = 0; i < accepted; i++) cr_assert_eq(atomic_load(&items[i].runs), 1, "accepted item %d", i);
    cr_assert_eq(atomic_load(&items[accepted].runs), 0, "the refused item never runs");
    cr_assert_eq(atomic_load(&late.runs), 0);
    cr_assert_eq(atomic_load(&reposter.runs), 1);
    cr_assert_eq(reposter.repost_code, EX_ESHUTDOWN, "work submitted by the drain is refused");
    cr_assert_eq(atomic_load(&follow_up.runs), 0);
    cr_assert_eq(ex_single_thread_context_destroy(&ctx).code, EX_EINVAL, "a second destroy does nothing");
    run_destroy(op);
    ex_sender_release(s);
    free(items);
    expect_no_leaks();
}

/* Submitters post as fast as they can while destroy runs: destroy returns
 * EX_OK every round and every accepted item ran exactly once (the old
 * destroy returned EX_EBUSY in about one round in five and never ran the
 * items pushed after its thread's run() returned). */
enum { RL_RACE_ROUNDS = 60, RL_RACE_SUBMITTERS = 2, RL_RACE_MAX = 20000 };

typedef struct rl_submitter {
    ex_single_thread_context *ctx;
    rl_counted *items;
    int accepted, last_code;
} rl_submitter;

static void *rl_submitter_main(void *arg) {
    rl_submitter *s = arg;
    ex_scheduler sch = ex_single_thread_context_scheduler(s->ctx);
    for (s->accepted = 0; s->accepted < RL_RACE_MAX; s->accepted++) {
        rl_counted_init(&s->items[s->accepted]);
        if ((s->last_code = ex_post(sch, &s->items[s->accepted].work).code)) break;
    }
    return NULL;
}

Test(exec_run_loop, single_thread_context_destroy_racing_submitters_loses_nothing) {
    rl_submitter sub[RL_RACE_SUBMITTERS];
    for (int i = 0; i < RL_RACE_SUBMITTERS; i++) {
        sub[i].items = calloc(RL_RACE_MAX, sizeof(rl_counted));
        cr_assert_not_null(sub[i].items);
    }
    for (int round = 0; round < RL_RACE_ROUNDS; round++) {
        ex_single_thread_context ctx;
        test_stc_init(&ctx);
        pthread_t th[RL_RACE_SUBMITTERS];
        for (int i = 0; i < RL_RACE_SUBMITTERS; i++) {
            sub[i].ctx = &ctx;
            cr_assert_eq(pthread_create(&th[i], NULL, rl_submitter_main, &sub[i]), 0);
        }
        for (int k = 0; k < round % 8; k++) sched_yield();
        ex_error e = ex_single_thread_context_destroy(&ctx);
        for (int i = 0; i < RL_RACE_SUBMITTERS; i++) pthread_join(th[i], NULL);  /* ctx's storage outlives them */
        cr_assert_eq(e.code, 0, "round %d: destroy returned %d", round, e.code);
        for (int i = 0; i < RL_RACE_SUBMITTERS; i++) {
            rl_submitter *s = &sub[i];
            cr_assert(s->accepted == RL_RACE_MAX || s->last_code == EX_ESHUTDOWN, "round %d: refused with %d", round,
                      s->last_code);
            for (int j = 0; j < s->accepted; j++)
                cr_assert_eq(atomic_load(&s->items[j].runs), 1, "round %d: accepted item %d of submitter %d ran %d times",
                             round, j, i, atomic_load(&s->items[j].runs));
            if (s->accepted < RL_RACE_MAX) cr_assert_eq(atomic_load(&s->items[s->accepted].runs), 0);
        }
    }
    for (int i = 0; i < RL_RACE_SUBMITTERS; i++) free(sub[i].items);
    expect_no_leaks();
}
