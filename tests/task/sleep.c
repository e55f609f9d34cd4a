/* SPDX-License-Identifier: MIT */
/* ex_task_sleep_for and ex_task_sleep_until: the task resumes on its
 * scheduler once the time has passed (never before), a stop request ends
 * the sleep (EX_ECANCELED, the task stopped), the scheduler's error comes
 * back, a scheduler without a clock is EX_ENOTSUP, bad input EX_EINVAL.
 * Bodies never assert (local_fixtures.h); times are checked from below
 * only. */
#include <stdalign.h>
#include <string.h>

#include "common/owned_errors.h"
#include "common/schedulers.h"
#include "task/local_fixtures.h"

TEST_SUITE(exec_task_sleep, 30);

#define HOUR (3600 * EX_NS_PER_S)

/* What a sleeping body saw. */
typedef struct sleep_seen {
    ex_pool *pool;                /* to note the worker, or NULL */
    int64_t ns;                   /* the duration to sleep */
    int code, code_again;         /* the sleep's error code, and a second sleep's */
    bool stopped_after;           /* ex_task_is_stopped after the sleep */
    int64_t slept;                /* ex_now() after minus before */
    const void *before, *after;   /* test_thread_id() around the sleep */
    int worker_after;             /* ex_pool_current_worker after, with a pool */
    atomic_int sleeping;          /* about to sleep */
} sleep_seen;

static void seen_init(sleep_seen *s, ex_pool *p, int64_t ns) {
    memset(s, 0, sizeof *s);
    s->pool = p;
    s->ns = ns;
    s->worker_after = -2;
}

static void note_after(sleep_seen *s, ex_task *t, int64_t start) {
    s->slept = ex_now() - start;
    s->after = test_thread_id();
    s->stopped_after = ex_task_is_stopped(t);
    if (s->pool) s->worker_after = ex_pool_current_worker(s->pool);
}

static ex_task_result body_sleep_for(ex_task *t, void *arg) {
    sleep_seen *s = arg;
    s->before = test_thread_id();
    int64_t start = ex_now();
    atomic_store(&s->sleeping, 1);
    ex_error e = ex_task_sleep_for(t, s->ns);
    s->code = e.code;
    ex_error_release(e);
    note_after(s, t, start);
    e = ex_task_sleep_for(t, 0);
    s->code_again = e.code;
    ex_error_release(e);
    return ex_task_void();
}

/* Runs task on a run loop the test's thread drives, until it completes
 * (with a value). */
static void run_on_loop(ex_sender *task) {
    ex_run_loop loop;
    ex_scheduler sch = test_loop_init(&loop);
    rec rc;
    rec_init(&rc);
    ex_sender *s = ex_starts_on(sch, task);
    ex_operation *op = run_start(s, &rc);
    double limit = test_now_s() + TEST_WAIT_LIMIT_S;
    while (rec_total(&rc) == 0) {
        cr_assert_lt(test_now_s(), limit, "timed out waiting for the task");
        if (!ex_run_loop_run_one(&loop)) test_nap_us(50);
    }
    rec_expect_values(&rc, 0);
    run_destroy_release(op, s);
    test_loop_destroy(&loop);
}

/* ------------------------------------------------------------- sleeping */

Test(exec_task_sleep, sleep_for_resumes_after_the_time_on_the_tasks_loop) {
    sleep_seen s;
    seen_init(&s, NULL, 2 * EX_NS_PER_MS);
    run_on_loop(ex_task_create(body_sleep_for, &s, NULL));
    cr_assert_eq(s.code, 0);
    cr_assert_eq(s.code_again, 0);
    cr_assert_geq(s.slept, 2 * EX_NS_PER_MS, "woke %lld ns early", (long long)(2 * EX_NS_PER_MS - s.slept));
    cr_assert_eq(s.after, test_thread_id(), "resumed off sync_wait's thread");
    task_test_end(NULL, NULL);
}

static ex_task_result body_sleep_until(ex_task *t, void *arg) {
    sleep_seen *s = arg;
    int64_t start = ex_now();
    ex_error e = ex_task_sleep_until(t, 0);  /* long past */
    s->code = e.code;
    ex_error_release(e);
    int64_t deadline = ex_now() + s->ns;
    e = ex_task_sleep_until(t, deadline);
    s->code_again = e.code;
    ex_error_release(e);
    TCHECK(ex_now() >= deadline);
    note_after(s, t, start);
    return ex_task_void();
}

Test(exec_task_sleep, sleep_until_a_past_deadline_and_a_near_one) {
    sleep_seen s;
    seen_init(&s, NULL, 500 * EX_NS_PER_US);
    run_on_loop(ex_task_create(body_sleep_until, &s, NULL));
    cr_assert_eq(s.code, 0);
    cr_assert_eq(s.code_again, 0);
    task_test_end(NULL, NULL);
}

Test(exec_task_sleep, on_a_pool_the_task_resumes_on_the_pool) {
    ex_pool *p = test_pool_new(2);
    for (int round = 0; round < 4; round++) {
        sleep_seen s;
        seen_init(&s, p, 300 * EX_NS_PER_US);
        ex_result r = run(ex_starts_on(ex_pool_scheduler(p), ex_task_create(body_sleep_for, &s, NULL)));
        expect_disp(&r, EX_DISP_VALUE);
        cr_assert_eq(s.code, 0);
        cr_assert_geq(s.slept, s.ns);
        cr_assert_geq(s.worker_after, 0, "round %d: resumed off the pool", round);  /* a worker, or the lent caller */
    }
    task_test_end(p, NULL);
}

Test(exec_task_sleep, on_a_context_the_task_resumes_on_its_thread) {
    ex_single_thread_context ctx;
    ex_scheduler sch = test_stc_init(&ctx);
    sleep_seen s;
    seen_init(&s, NULL, 300 * EX_NS_PER_US);
    ex_result r = run(ex_starts_on(sch, ex_task_create(body_sleep_for, &s, NULL)));
    expect_disp(&r, EX_DISP_VALUE);
    cr_assert_eq(s.code, 0);
    cr_assert_geq(s.slept, s.ns);
    cr_assert_neq(s.before, test_thread_id(), "the task ran on the test's thread");
    cr_assert_eq(s.after, s.before, "resumed off the context's thread");
    task_test_end(NULL, &ctx);
}

/* ------------------------------------------------------------- stopping */

Test(exec_task_sleep, a_stop_request_ends_the_sleep_with_ecanceled) {
    ex_pool *p = test_pool_new(2);
    sleep_seen s;
    seen_init(&s, p, HOUR);
    trec tr;
    trec_setup(&tr, ex_pool_scheduler(p), true);
    ex_operation *op = start_with(ex_task_create(body_sleep_for, &s, NULL), &tr);
    cr_assert(wait_int(&s.sleeping));
    cr_assert(ex_stop_source_request_stop(&tr.r.stop));  /* before or after the timer is armed: either ends it */
    trec_wait_done(&tr);
    cr_assert_eq(tr.r.stops, 1, "the task completes stopped");
    cr_assert_eq(s.code, EX_ECANCELED);
    cr_assert(s.stopped_after);
    cr_assert_eq(s.code_again, EX_ECANCELED, "a stopped task does not sleep");
    ex_operation_free(op);
    task_test_end(p, NULL);
}

/* ------------------------------------------------------ no clock, errors */

static ex_task_result body_no_clock(ex_task *t, void *arg) {
    sleep_seen *s = arg;
    ex_error e = ex_task_sleep_for(t, 1);
    s->code = e.code;
    TCHECK(e.msg && strcmp(e.msg, "ex_task_sleep_for: the task's scheduler has no clock (no connect_schedule_at)") == 0);
    e = ex_task_sleep_until(t, 0);
    s->code_again = e.code;
    s->stopped_after = ex_task_is_stopped(t);
    return ex_task_void();
}

Test(exec_task_sleep, a_scheduler_without_a_clock_is_enotsup) {
    sleep_seen s;
    seen_init(&s, NULL, 0);
    ex_task_options o = { .affinity = EX_TASK_INLINE };  /* the inline scheduler */
    ex_result r = run(ex_task_create(body_no_clock, &s, &o));
    expect_disp(&r, EX_DISP_VALUE);
    cr_assert_eq(s.code, EX_ENOTSUP);
    cr_assert_eq(s.code_again, EX_ENOTSUP);
    cr_assert(!s.stopped_after);
    /* An affine task on a scheduler of one's own without connect_schedule_at. */
    static const ex_scheduler_vtable no_clock_vt = {
        .name = "test.no-clock",
        .schedule_op_size = sizeof(test_schedule_op),
        .schedule_op_align = alignof(test_schedule_op),
        .connect_schedule = test_connect_schedule_inline,
    };
    ex_scheduler none = { &no_clock_vt, NULL };
    seen_init(&s, NULL, 0);
    r = run(ex_starts_on(none, ex_task_create(body_no_clock, &s, NULL)));
    expect_disp(&r, EX_DISP_VALUE);
    cr_assert_eq(s.code, EX_ENOTSUP);
    cr_assert_eq(s.code_again, EX_ENOTSUP);
    task_test_end(NULL, NULL);
}

/* A task given straight to ex_sync_wait runs on sync_wait's own loop,
 * which has a clock: it sleeps there, on the waiting thread. */
Test(exec_task_sleep, a_task_given_to_sync_wait_sleeps_on_its_loop) {
    sleep_seen s;
    seen_init(&s, NULL, 2 * EX_NS_PER_MS);
    ex_result r = ex_sync_wait(ex_task_create(body_sleep_for, &s, NULL));
    expect_disp(&r, EX_DISP_VALUE);
    ex_result_destroy(&r);
    cr_assert_eq(s.code, EX_OK);
    cr_assert_eq(s.code_again, EX_OK);
    cr_assert_geq(s.slept, s.ns, "the task resumed after %lld ns of %lld", (long long)s.slept, (long long)s.ns);
    cr_assert_eq(s.before, test_thread_id());
    cr_assert_eq(s.after, test_thread_id(), "the timer fires on the waiting thread");
    task_test_end(NULL, NULL);
}

/* A scheduler that runs inline and whose timers fail at start with
 * owned_error(5) (a resource refusing them). */
typedef struct refusing_timer_op {
    ex_operation base;
    ex_receiver r;
} refusing_timer_op;

static void refusing_timer_start(ex_operation *op) { ex_set_error(((refusing_timer_op *)op)->r, owned_error(5)); }
static const ex_operation_vtable refusing_timer_vt = { refusing_timer_start, NULL };

static ex_error refusing_connect_at(void *self, ex_timer_when when, ex_receiver r, void *storage) {
    (void)self, (void)when;
    refusing_timer_op *o = storage;
    o->base.vt = &refusing_timer_vt;
    o->r = r;
    return ex_ok();
}

static ex_task_result body_refused(ex_task *t, void *arg) {
    sleep_seen *s = arg;
    ex_error e = ex_task_sleep_for(t, EX_NS_PER_MS);
    s->code = e.code;
    TCHECK(owned_error_id(e) == 5);
    ex_error_release(e);  /* the caller's */
    s->stopped_after = ex_task_is_stopped(t);
    return ex_task_void();
}

Test(exec_task_sleep, the_schedulers_error_comes_back_to_the_caller) {
    owned_errors_reset();
    static const ex_scheduler_vtable refusing_vt = {
        .name = "test.refusing-timers",
        .schedule_op_size = sizeof(test_schedule_op),
        .schedule_op_align = alignof(test_schedule_op),
        .connect_schedule = test_connect_schedule_inline,
        .timer_op_size = sizeof(refusing_timer_op),
        .timer_op_align = alignof(refusing_timer_op),
        .connect_schedule_at = refusing_connect_at,
    };
    ex_scheduler sch = { &refusing_vt, NULL };
    sleep_seen s;
    seen_init(&s, NULL, 0);
    ex_result r = run(ex_starts_on(sch, ex_task_create(body_refused, &s, NULL)));
    expect_disp(&r, EX_DISP_VALUE);
    cr_assert_eq(s.code, EX_EUSER + 1);
    cr_assert(!s.stopped_after);
    EXPECT_PROBE();
    expect_owned_all_released(1);
}

Test(exec_task_sleep, a_context_shut_down_during_the_sleep_stops_it) {
    /* Destroying the context stops its pending timers: the sleep ends
     * EX_ECANCELED, and the task completes stopped on the context's
     * thread as it leaves. */
    ex_single_thread_context ctx;
    ex_scheduler sch = test_stc_init(&ctx);
    sleep_seen s;
    seen_init(&s, NULL, HOUR);
    trec tr;
    trec_setup(&tr, sch, false);
    ex_operation *op = start_with(ex_starts_on(sch, ex_task_create(body_sleep_for, &s, NULL)), &tr);
    cr_assert(wait_int(&s.sleeping));
    /* The context's one thread runs this schedule only once the task,
     * running there now, has armed its timer and suspended. */
    ex_result r = run(ex_schedule(sch));
    expect_disp(&r, EX_DISP_VALUE);
    test_stc_destroy(&ctx);
    trec_wait_done(&tr);
    cr_assert_eq(s.code, EX_ECANCELED, "code %d", s.code);
    ex_operation_free(op);
    task_test_end(NULL, NULL);
}

/* ------------------------------------------------------------ bad input */

static ex_task_result body_bad_input(ex_task *t, void *arg) {
    sleep_seen *s = arg;
    TCHECK(ex_task_sleep_for(t, -1).code == EX_EINVAL);
    TCHECK(ex_task_sleep_for(t, INT64_MAX).code == EX_EINVAL);
    TCHECK(ex_task_sleep_until(t, -1).code == EX_EINVAL);
    s->stopped_after = ex_task_is_stopped(t);
    return ex_task_void();
}

Test(exec_task_sleep, bad_input_is_einval) {
    cr_assert_eq(ex_task_sleep_for(NULL, 1).code, EX_EINVAL);
    cr_assert_eq(ex_task_sleep_until(NULL, 1).code, EX_EINVAL);
    sleep_seen s;
    seen_init(&s, NULL, 0);
    run_on_loop(ex_task_create(body_bad_input, &s, NULL));
    cr_assert(!s.stopped_after);
    task_test_end(NULL, NULL);
}

static ex_task_result body_no_memory(ex_task *t, void *arg) {
    sleep_seen *s = arg;
    test_alloc_fail_next();  /* the timer's sender */
    ex_error e = ex_task_sleep_for(t, 1);
    s->code = e.code;
    ex_error_release(e);
    s->stopped_after = ex_task_is_stopped(t);
    return ex_task_void();
}

Test(exec_task_sleep, no_memory_for_the_timer_is_enomem) {
    sleep_seen s;
    seen_init(&s, NULL, 0);
    run_on_loop(ex_task_create(body_no_memory, &s, NULL));
    expect_injected_failure_hit();
    cr_assert_eq(s.code, EX_ENOMEM);
    cr_assert(!s.stopped_after, "a sleep that could not start does not stop the task");
    task_test_end(NULL, NULL);
}
