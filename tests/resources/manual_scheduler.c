/* SPDX-License-Identifier: MIT */
/* cexec/manual_scheduler.h: the queue, the run functions, one runner,
 * stop requests, shutdown and destroy.  Its timers are in
 * manual_timers.c; the suite is declared here. */
#include <pthread.h>
#include <string.h>

#include "resources/manual_fixtures.h"

TEST_SUITE(manual_scheduler, 20);

/* ------------------------------------------------------------ the basics */

Test(manual_scheduler, an_empty_scheduler_runs_nothing) {
    ex_manual_scheduler m;
    ms_init(&m);
    cr_assert_eq(ex_manual_pending(&m), 0);
    cr_assert_eq(ex_manual_timers_armed(&m), 0);
    cr_assert_not(ex_manual_run_one(&m));
    cr_assert_eq(ex_manual_run_pending(&m), 0);
    cr_assert_eq(ex_manual_run_until_idle(&m), 0);
    size_t ran = 99;
    cr_assert_eq(ex_manual_run(&m, 10, &ran).code, 0);
    cr_assert_eq(ran, 0);
    cr_assert_eq(ex_manual_run(&m, 0, NULL).code, 0, "nothing runnable: no step was needed");
    ms_destroy(&m);
    expect_no_leaks();
}

Test(manual_scheduler, bad_input_is_einval) {
    expect_err(ex_manual_scheduler_init(NULL), EX_EINVAL);
    cr_assert_not(ex_scheduler_valid(ex_manual_scheduler_get(NULL)), "NULL gives the invalid handle");
    size_t ran = 7;
    expect_err(ex_manual_run(NULL, 1, &ran), EX_EINVAL);
    cr_assert_eq(ran, 0);
    cr_assert_not(ex_manual_run_one(NULL));
    cr_assert_eq(ex_manual_run_pending(NULL), 0);
    cr_assert_eq(ex_manual_run_until_idle(NULL), 0);
    cr_assert_eq(ex_manual_pending(NULL), 0);
    cr_assert_eq(ex_manual_timers_armed(NULL), 0);
    expect_err(ex_manual_scheduler_shutdown(NULL), EX_EINVAL);
    expect_err(ex_manual_scheduler_destroy(NULL), EX_EINVAL);
    expect_invalid(ex_schedule(ex_manual_scheduler_get(NULL)), EX_EINVAL);

    ex_manual_scheduler m;
    ex_scheduler sch = ms_init(&m);
    expect_err(ex_post(sch, NULL), EX_EINVAL);
    ex_work no_fn = { 0 };
    expect_err(ex_post(sch, &no_fn), EX_EINVAL);
    expect_err(ex_dispatch(sch, &no_fn), EX_EINVAL);
    cr_assert_eq(ex_manual_pending(&m), 0, "a refused item is not queued");
    ms_destroy(&m);
    expect_no_leaks();
}

Test(manual_scheduler, the_scheduler_and_its_sender) {
    ex_manual_scheduler a, b;
    ex_scheduler sa = ms_init(&a), sb = ms_init(&b);
    cr_assert(ex_scheduler_equal(sa, ex_manual_scheduler_get(&a)));
    cr_assert_not(ex_scheduler_equal(sa, sb));
    cr_assert_eq(ex_get_forward_progress_guarantee(sa), EX_PROGRESS_WEAKLY_PARALLEL);
    ex_sender *s = ex_schedule(sa);
    cr_assert_eq(ex_sender_status(s).code, 0);
    expect_sigs(s, EX_SIG0, EX_SIGS_ERROR | EX_SIGS_STOPPED, EX_SIGS_ERROR | EX_SIGS_STOPPED);
    expect_completion_scheduler(s, &ex_key_completion_scheduler_value, sa);
    ex_sender_release(s);
    ms_destroy(&a);
    ms_destroy(&b);
    expect_no_leaks();
}

/* ----------------------------------------------------------------- order */

Test(manual_scheduler, schedules_and_posts_run_in_fifo_order_on_the_running_thread) {
    ex_manual_scheduler m;
    ex_scheduler sch = ms_init(&m);
    ms_log log = { .n = 0 };
    ms_item it[3];
    ms_op op[3];
    for (int i = 0; i < 3; i++) {
        ms_item_init(&it[i], 10 + i, &log, &m);
        ms_op_start(&op[i], i, &log, ex_schedule(sch));
        ms_post(&it[i]);
    }
    cr_assert_eq(log.n, 0, "scheduling runs nothing");
    cr_assert_eq(ex_manual_pending(&m), 6);
    cr_assert_eq(ex_manual_run_until_idle(&m), 6);
    MS_EXPECT_LOG(&log, 0, 10, 1, 11, 2, 12);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(op[i].r.thread, test_thread_id(), "completed on the thread that ran it");
        cr_assert_eq(it[i].thread, test_thread_id());
        ms_op_expect(&op[i], EX_DISP_VALUE, 0);
    }
    cr_assert_eq(ex_manual_pending(&m), 0);
    ms_destroy(&m);
    expect_no_leaks();
}

Test(manual_scheduler, run_one_runs_the_first_item_only) {
    ex_manual_scheduler m;
    ms_init(&m);
    ms_log log = { .n = 0 };
    ms_item it[3];
    for (int i = 0; i < 3; i++) {
        ms_item_init(&it[i], i, &log, &m);
        ms_post(&it[i]);
    }
    cr_assert(ex_manual_run_one(&m));
    MS_EXPECT_LOG(&log, 0);
    cr_assert_eq(ex_manual_pending(&m), 2);
    cr_assert(ex_manual_run_one(&m));
    cr_assert(ex_manual_run_one(&m));
    cr_assert_not(ex_manual_run_one(&m));
    MS_EXPECT_LOG(&log, 0, 1, 2);
    ms_destroy(&m);
    expect_no_leaks();
}

Test(manual_scheduler, run_pending_runs_one_round_and_not_what_it_queues) {
    ex_manual_scheduler m;
    ms_init(&m);
    ms_log log = { .n = 0 };
    ms_item first, second, queued_by_first, queued_by_that;
    ms_item_init(&first, 1, &log, &m);
    ms_item_init(&second, 2, &log, &m);
    ms_item_init(&queued_by_first, 3, &log, &m);
    ms_item_init(&queued_by_that, 4, &log, &m);
    first.post = &queued_by_first;
    queued_by_first.post = &queued_by_that;
    ms_post(&first);
    ms_post(&second);
    cr_assert_eq(ex_manual_run_pending(&m), 2, "the two items queued at the call");
    MS_EXPECT_LOG(&log, 1, 2);
    cr_assert_eq(ex_manual_pending(&m), 1);
    cr_assert_eq(ex_manual_run_pending(&m), 1);
    cr_assert_eq(ex_manual_run_pending(&m), 1);
    cr_assert_eq(ex_manual_run_pending(&m), 0);
    MS_EXPECT_LOG(&log, 1, 2, 3, 4);
    ms_destroy(&m);
    expect_no_leaks();
}

Test(manual_scheduler, run_until_idle_runs_what_the_items_queue) {
    ex_manual_scheduler m;
    ms_init(&m);
    ms_log log = { .n = 0 };
    ms_item a, b, c;
    ms_item_init(&a, 1, &log, &m);
    ms_item_init(&b, 2, &log, &m);
    ms_item_init(&c, 3, &log, &m);
    a.post = &c;
    b.requeue = 2;
    ms_post(&a);
    ms_post(&b);
    cr_assert_eq(ex_manual_run_until_idle(&m), 5);
    MS_EXPECT_LOG(&log, 1, 2, 3, 2, 2);
    cr_assert_eq(ex_manual_pending(&m), 0);
    ms_destroy(&m);
    expect_no_leaks();
}

Test(manual_scheduler, a_step_limit_stops_an_item_that_keeps_queueing_itself) {
    ex_manual_scheduler m;
    ms_init(&m);
    ms_log log = { .n = 0 };
    ms_item forever;
    ms_item_init(&forever, 7, &log, &m);
    forever.requeue = 1000;
    ms_post(&forever);
    size_t ran = 0;
    expect_err(ex_manual_run(&m, 10, &ran), EX_EAGAIN);
    cr_assert_eq(ran, 10);
    cr_assert_eq(forever.runs, 10);
    cr_assert_eq(ex_manual_pending(&m), 1, "it queued itself again");
    forever.requeue = 0;
    cr_assert_eq(ex_manual_run(&m, 10, &ran).code, 0, "idle before the limit");
    cr_assert_eq(ran, 1);
    ms_destroy(&m);
    expect_no_leaks();
}

/* ------------------------------------------------ only when the test says */

typedef struct poster {
    ex_manual_scheduler *m;
    ms_item *items;
    ms_op *ops;
    int n;
} poster;

static void *post_from_thread(void *arg) {
    poster *p = arg;
    ex_scheduler sch = ex_manual_scheduler_get(p->m);
    for (int i = 0; i < p->n; i++) {
        if (ex_post(sch, &p->items[i].work).code) return (void *)1;
        ex_sender *s = ex_schedule(sch);
        if (ex_connect(s, rec_receiver(&p->ops[i].r), p->ops[i].storage, sizeof p->ops[i].storage, &p->ops[i].op).code)
            return (void *)1;
        ex_sender_release(s);
        ex_start(p->ops[i].op);
    }
    return NULL;
}

Test(manual_scheduler, work_from_another_thread_waits_for_a_run_call) {
    enum { N = 20 };
    ex_manual_scheduler m;
    ms_init(&m);
    ms_log log = { .n = 0 };
    ms_item items[N];
    ms_op ops[N];
    for (int i = 0; i < N; i++) {
        ms_item_init(&items[i], i, &log, &m);
        rec_init(&ops[i].r);
    }
    poster p = { &m, items, ops, N };
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, post_from_thread, &p), 0);
    void *failed = NULL;
    pthread_join(th, &failed);
    cr_assert_null(failed, "a post or a connect failed");
    cr_assert_eq(ex_manual_pending(&m), 2 * N, "everything waits");
    cr_assert_eq(log.n, 0);
    for (int i = 0; i < N; i++) cr_assert_eq(rec_total(&ops[i].r), 0);
    cr_assert_eq(ex_manual_run_until_idle(&m), 2 * N);
    for (int i = 0; i < N; i++) {
        cr_assert_eq(items[i].thread, test_thread_id(), "ran on the thread that called run");
        cr_assert_eq(ops[i].r.thread, test_thread_id());
        rec_expect_values(&ops[i].r, 0);
        ex_operation_destroy(ops[i].op);
    }
    ms_destroy(&m);
    expect_no_leaks();
}

/* A pool's work continuing on the manual scheduler: it waits there until
 * the test runs it, then completes on the test's thread. */
Test(manual_scheduler, a_pool_completion_continues_on_the_manual_scheduler) {
    ex_pool *pool = test_pool_new(2);
    ex_manual_scheduler m;
    ex_scheduler sch = ms_init(&m);
    ex_sender *s = ex_continues_on(ex_starts_on(ex_pool_scheduler(pool), ex_just(ex_int(41))), sch);
    s = ex_then(s, add_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    rec r;
    rec_init(&r);
    ex_operation *op = run_start_released(s, &r);
    double limit = test_now_s() + TEST_WAIT_LIMIT_S;
    while (ex_manual_pending(&m) == 0) {
        cr_assert_lt(test_now_s(), limit, "the pool's completion never reached the manual scheduler");
        test_nap_us(100);
    }
    cr_assert_eq(rec_total(&r), 0, "the continuation waits for the test");
    cr_assert_eq(ex_manual_run_until_idle(&m), 1);
    cr_assert_eq(r.values, 1);
    cr_assert_eq(r.v[0].as.i, 42);
    cr_assert_eq(r.thread, test_thread_id());
    run_destroy(op);
    ms_destroy(&m);
    test_pool_free(pool);
    expect_no_leaks();
}

/* ------------------------------------------------------------- dispatch */

static void dispatch_next(ms_item *it) {
    cr_assert_eq(ex_dispatch(ex_manual_scheduler_get(it->m), &((ms_item *)it->ctx)->work).code, 0);
}

Test(manual_scheduler, dispatch_runs_inline_only_from_an_item_it_runs) {
    ex_manual_scheduler m;
    ex_scheduler sch = ms_init(&m);
    ms_log log = { .n = 0 };
    ms_item outside, dispatcher, inline_one, later;
    ms_item_init(&outside, 1, &log, &m);
    ms_item_init(&dispatcher, 2, &log, &m);
    ms_item_init(&inline_one, 3, &log, &m);
    ms_item_init(&later, 4, &log, &m);
    cr_assert_eq(ex_dispatch(sch, &outside.work).code, 0);
    cr_assert_eq(outside.runs, 0, "dispatch outside a run call queues");
    cr_assert_eq(ex_manual_pending(&m), 1);
    dispatcher.also = dispatch_next;
    dispatcher.ctx = &inline_one;
    ms_post(&dispatcher);
    ms_post(&later);
    cr_assert_eq(ex_manual_run_until_idle(&m), 3, "the inline one is no step of its own");
    MS_EXPECT_LOG(&log, 1, 2, 3, 4);
    ms_destroy(&m);
    expect_no_leaks();
}

/* ------------------------------------------------------------ one runner */

Test(manual_scheduler, a_run_or_destroy_from_inside_an_item_is_ebusy) {
    ex_manual_scheduler m;
    ms_init(&m);
    ms_log log = { .n = 0 };
    ms_item runs, destroys, after;
    ms_item_init(&runs, 1, &log, &m);
    ms_item_init(&destroys, 2, &log, &m);
    ms_item_init(&after, 3, &log, &m);
    runs.try_run = true;
    destroys.try_destroy = true;
    ms_post(&runs);
    ms_post(&destroys);
    ms_post(&after);
    cr_assert_eq(ex_manual_run_until_idle(&m), 3);
    expect_err(runs.result, EX_EBUSY);
    cr_assert_eq(runs.ran, 0, "the nested run ran nothing");
    expect_err(destroys.result, EX_EBUSY);
    MS_EXPECT_LOG(&log, 1, 2, 3);
    ms_destroy(&m);
    expect_no_leaks();
}

typedef struct second_runner {
    ex_manual_scheduler *m;
    ex_error run, destroy;
    size_t ran;
    bool one;
    size_t pending_ran, idle_ran;
} second_runner;

static void *try_to_run(void *arg) {
    second_runner *s = arg;
    s->run = ex_manual_run(s->m, SIZE_MAX, &s->ran);
    s->one = ex_manual_run_one(s->m);
    s->pending_ran = ex_manual_run_pending(s->m);
    s->idle_ran = ex_manual_run_until_idle(s->m);
    s->destroy = ex_manual_scheduler_destroy(s->m);
    return NULL;
}

/* While the test thread is inside an item, another thread's run calls
 * and destroy are refused and run nothing. */
static void run_another_thread(ms_item *it) {
    second_runner *s = it->ctx;
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, try_to_run, s), 0);
    pthread_join(th, NULL);
}

Test(manual_scheduler, a_second_runner_on_another_thread_runs_nothing) {
    ex_manual_scheduler m;
    ms_init(&m);
    ms_log log = { .n = 0 };
    ms_item holder, waiting;
    ms_item_init(&holder, 1, &log, &m);
    ms_item_init(&waiting, 2, &log, &m);
    second_runner s = { .m = &m };
    holder.also = run_another_thread;
    holder.ctx = &s;
    ms_post(&holder);
    ms_post(&waiting);
    cr_assert(ex_manual_run_one(&m));
    expect_err(s.run, EX_EBUSY);
    cr_assert_eq(s.ran, 0);
    cr_assert_not(s.one);
    cr_assert_eq(s.pending_ran, 0);
    cr_assert_eq(s.idle_ran, 0);
    expect_err(s.destroy, EX_EBUSY);
    cr_assert_eq(waiting.runs, 0);
    cr_assert_eq(ex_manual_pending(&m), 1);
    cr_assert_eq(ex_manual_run_until_idle(&m), 1, "the runner's turn ended: the next call runs");
    ms_destroy(&m);
    expect_no_leaks();
}

/* ---------------------------------------------------------- stop requests */

Test(manual_scheduler, a_stopped_schedule_operation_completes_stopped_when_run) {
    ex_manual_scheduler m;
    ex_scheduler sch = ms_init(&m);
    ms_log log = { .n = 0 };
    ms_op before, after, plain;
    ms_op_start_stopped(&before, 1, &log, ex_schedule(sch));
    ms_op_start(&after, 2, &log, ex_schedule(sch));
    ms_op_start(&plain, 3, &log, ex_schedule(sch));
    (void)ex_stop_source_request_stop(&after.r.stop);
    cr_assert_eq(log.n, 0, "a stop does not complete a queued operation early");
    cr_assert_eq(ex_manual_pending(&m), 3, "stopped operations stay queued until they run");
    cr_assert_eq(ex_manual_run_until_idle(&m), 3);
    MS_EXPECT_LOG(&log, 1, 2, 3);
    ms_op_expect(&before, EX_DISP_STOPPED, 0);
    ms_op_expect(&after, EX_DISP_STOPPED, 0);
    ms_op_expect(&plain, EX_DISP_VALUE, 0);
    ms_destroy(&m);
    expect_no_leaks();
}

/* ------------------------------------------------------ shutdown, destroy */

static void must_not_run(ex_work *w) {
    (void)w;
    cr_assert_fail("a dropped item ran");
}

Test(manual_scheduler, shutdown_stops_what_is_queued_and_refuses_what_comes_after) {
    ex_manual_scheduler m;
    ex_scheduler sch = ms_init(&m);
    ms_log log = { .n = 0 };
    ms_op queued[2];
    ms_item item;
    ms_item_init(&item, 10, &log, &m);
    ms_op_start(&queued[0], 1, &log, ex_schedule(sch));
    ms_post(&item);
    ms_op_start(&queued[1], 2, &log, ex_schedule(sch));
    ex_work no_cancel = { .execute = must_not_run };
    cr_assert_eq(ex_post(sch, &no_cancel).code, 0);

    cr_assert_eq(ex_manual_scheduler_shutdown(&m).code, 0);
    MS_EXPECT_LOG(&log, 1, 2);  /* completed on this thread, in queue order */
    ms_op_expect(&queued[0], EX_DISP_STOPPED, 0);
    ms_op_expect(&queued[1], EX_DISP_STOPPED, 0);
    cr_assert_eq(queued[0].r.thread, test_thread_id());
    cr_assert_eq(item.cancels, 1, "a posted item is cancelled");
    cr_assert_eq(item.runs, 0);
    cr_assert_eq(ex_manual_pending(&m), 0, "an item without cancel is dropped");

    ms_op late;
    ms_op_start(&late, 3, &log, ex_schedule(sch));
    ms_op_expect(&late, EX_DISP_ERROR, EX_ESHUTDOWN);
    cr_assert_eq(late.r.thread, test_thread_id(), "refused on the starting thread");
    expect_err(ex_post(sch, &item.work), EX_ESHUTDOWN);
    expect_err(ex_dispatch(sch, &item.work), EX_ESHUTDOWN);
    cr_assert_eq(ex_manual_pending(&m), 0);
    cr_assert_eq(ex_manual_run_until_idle(&m), 0);
    cr_assert_eq(ex_manual_scheduler_shutdown(&m).code, 0, "idempotent");
    ms_destroy(&m);
    cr_assert_eq(item.cancels, 1, "nothing completes twice");
    expect_no_leaks();
}

/* After the shutdown, even inline dispatch from the running item is refused. */
static void dispatch_after_shutdown(ms_item *it) {
    it->result = ex_dispatch(ex_manual_scheduler_get(it->m), &((ms_item *)it->ctx)->work);
}

Test(manual_scheduler, shutdown_from_inside_an_item_leaves_nothing_to_run) {
    ex_manual_scheduler m;
    ex_scheduler sch = ms_init(&m);
    ms_log log = { .n = 0 };
    ms_item stopper, rest;
    ms_item_init(&stopper, 1, &log, &m);
    ms_item_init(&rest, 2, &log, &m);
    ms_item never;
    ms_item_init(&never, 4, &log, &m);
    stopper.shutdown = true;
    stopper.also = dispatch_after_shutdown;
    stopper.ctx = &never;
    ms_post(&stopper);
    ms_post(&rest);
    ms_op op;
    ms_op_start(&op, 3, &log, ex_schedule(sch));
    cr_assert_eq(ex_manual_run_until_idle(&m), 1);
    MS_EXPECT_LOG(&log, 1, 3);
    cr_assert_eq(rest.cancels, 1);
    cr_assert_eq(rest.runs, 0);
    expect_err(stopper.result, EX_ESHUTDOWN);
    cr_assert_eq(never.runs + never.cancels, 0);
    ms_op_expect(&op, EX_DISP_STOPPED, 0);
    ms_destroy(&m);
    expect_no_leaks();
}

Test(manual_scheduler, destroy_completes_work_left_queued_with_set_stopped) {
    ex_manual_scheduler m;
    ex_scheduler sch = ms_init(&m);
    ms_log log = { .n = 0 };
    ms_op op[3];
    for (int i = 0; i < 3; i++) ms_op_start(&op[i], i, &log, ex_schedule(sch));
    ms_item item;
    ms_item_init(&item, 9, &log, &m);
    ms_post(&item);
    ms_destroy(&m);
    MS_EXPECT_LOG(&log, 0, 1, 2);
    for (int i = 0; i < 3; i++) ms_op_expect(&op[i], EX_DISP_STOPPED, 0);
    cr_assert_eq(item.cancels, 1);
    cr_assert_eq(item.runs, 0);
    expect_no_leaks();
}

/* A receiver that schedules again from its stopped completion during
 * destroy is refused, and the scheduler is still there to refuse it. */
typedef struct reschedules {
    rec r;
    ex_scheduler sch;
    ms_op again;
    ms_log log;
} reschedules;

static void schedule_again(rec *r) {
    reschedules *x = (reschedules *)(void *)r;
    ms_op_start(&x->again, 2, &x->log, ex_schedule(x->sch));
}

Test(manual_scheduler, work_scheduled_by_a_completion_during_destroy_is_refused) {
    ex_manual_scheduler m;
    reschedules x;
    x.sch = ms_init(&m);
    x.log.n = 0;
    rec_init(&x.r);
    x.r.after = schedule_again;
    ex_operation *op = run_start_released(ex_schedule(x.sch), &x.r);
    ms_destroy(&m);
    rec_expect_stopped(&x.r);
    ms_op_expect(&x.again, EX_DISP_ERROR, EX_ESHUTDOWN);
    run_destroy(op);
    expect_no_leaks();
}

/* --------------------------------------------------------------- memory */

Test(manual_scheduler, scheduling_and_running_allocate_nothing) {
    ex_manual_scheduler m;
    ex_scheduler sch = ms_init(&m);
    ex_sender *s = ex_schedule(sch);
    ex_sender *t = ex_schedule_at(sch, ms_past());
    ms_log log = { .n = 0 };
    ms_op op[2];
    ms_item item;
    ms_item_init(&item, 5, &log, &m);
    test_alloc_fail_at(1);  /* any allocation from here on fails */
    long before = test_alloc_count();
    ms_op_start(&op[0], 1, &log, ex_sender_retain(s));
    ms_op_start(&op[1], 2, &log, ex_sender_retain(t));
    ms_post(&item);
    cr_assert_eq(ex_manual_run_until_idle(&m), 3);
    cr_assert_eq(test_alloc_count(), before, "an allocation was made");
    test_alloc_reset();
    ms_op_expect(&op[0], EX_DISP_VALUE, 0);
    ms_op_expect(&op[1], EX_DISP_VALUE, 0);
    ex_sender_release(s);
    ex_sender_release(t);
    ms_destroy(&m);
    expect_no_leaks();
}

Test(manual_scheduler, no_memory_for_a_sender_gives_enomem) {
    ex_manual_scheduler m;
    ex_scheduler sch = ms_init(&m);
    test_alloc_fail_next();
    expect_built_enomem(ex_schedule(sch));
    test_alloc_fail_next();
    expect_built_enomem(ex_schedule_after(sch, 0));
    cr_assert_eq(ex_manual_pending(&m), 0);
    ms_destroy(&m);
    expect_no_leaks();
}
