/* SPDX-License-Identifier: MIT */
/* Virtual clocks (cexec/virtual_clock.h): time stands still until the test
 * advances it; an advance fires exactly the timers that fall due, in
 * deadline order (equal deadlines first-armed first); relative deadlines
 * count from the clock's time; stop requests still remove a timer at
 * once; run loops and pools on the clock never fire a timer by real time;
 * the clock outlives its resources; bad input and allocation failure. */
#include <string.h>

#include "common/helpers.h"

TEST_SUITE(virtual_clock, 30);

#define HOUR (3600 * EX_NS_PER_S)

static ex_clock *clock_at(int64_t start) {
    ex_clock *c = NULL;
    cr_assert_eq(ex_virtual_clock_create(start, &c).code, EX_OK);
    cr_assert(c);
    return c;
}

static size_t advance(ex_clock *c, int64_t d) {
    size_t fired = 99;
    cr_assert_eq(ex_virtual_clock_advance(c, d, &fired).code, EX_OK);
    return fired;
}

/* ------------------------------------------------------------- the clock */

Test(virtual_clock, time_moves_only_when_advanced) {
    ex_clock *c = clock_at(5 * EX_NS_PER_S);
    cr_assert_eq(ex_clock_now(c), 5 * EX_NS_PER_S);
    test_sleep_ms(2);
    cr_assert_eq(ex_clock_now(c), 5 * EX_NS_PER_S, "a virtual clock moved by itself");
    cr_assert_eq(advance(c, 7), 0u);
    cr_assert_eq(ex_clock_now(c), 5 * EX_NS_PER_S + 7);
    cr_assert_eq(ex_virtual_clock_advance_to(c, 6 * EX_NS_PER_S, NULL).code, EX_OK);
    cr_assert_eq(ex_clock_now(c), 6 * EX_NS_PER_S);
    cr_assert_eq(ex_virtual_clock_next_deadline(c), INT64_MAX);
    cr_assert_eq(ex_virtual_clock_armed(c), 0u);
    cr_assert_eq(ex_virtual_clock_destroy(c).code, EX_OK);
    int64_t real = ex_clock_now(NULL), after = ex_now();
    cr_assert_leq(real, after, "ex_clock_now(NULL) is CLOCK_MONOTONIC");
    expect_no_leaks();
}

Test(virtual_clock, bad_input_is_einval) {
    ex_clock *c = (ex_clock *)(uintptr_t)1;
    cr_assert_eq(ex_virtual_clock_create(0, NULL).code, EX_EINVAL);
    cr_assert_eq(ex_virtual_clock_create(-1, &c).code, EX_EINVAL);
    cr_assert_null(c, "a failed create leaves *out NULL");
    c = clock_at(100);
    size_t fired = 7;
    cr_assert_eq(ex_virtual_clock_advance(NULL, 1, &fired).code, EX_EINVAL);
    cr_assert_eq(fired, 0u);
    cr_assert_eq(ex_virtual_clock_advance(c, -1, NULL).code, EX_EINVAL);
    cr_assert_eq(ex_virtual_clock_advance(c, INT64_MAX, NULL).code, EX_EINVAL, "overflows the clock");
    cr_assert_eq(ex_virtual_clock_advance_to(c, 99, NULL).code, EX_EINVAL, "before the clock's time");
    cr_assert_eq(ex_virtual_clock_advance_to(NULL, 99, NULL).code, EX_EINVAL);
    cr_assert_eq(ex_clock_now(c), 100, "a refused advance moved the clock");
    cr_assert_eq(ex_virtual_clock_destroy(NULL).code, EX_OK);
    cr_assert_eq(ex_virtual_clock_destroy(c).code, EX_OK);
    cr_assert_eq(ex_run_loop_init_clock(NULL, NULL).code, EX_EINVAL);
    expect_no_leaks();
}

Test(virtual_clock, allocation_failure_is_enomem_and_leaks_nothing) {
    ex_clock *c = NULL;
    test_alloc_fail_at(1);
    cr_assert_eq(ex_virtual_clock_create(0, &c).code, EX_ENOMEM);
    cr_assert_null(c);
    c = clock_at(0);
    ex_run_loop loop;
    test_alloc_fail_at(1);  /* the clock's list of resources */
    cr_assert_eq(ex_run_loop_init_clock(&loop, c).code, EX_ENOMEM);
    ex_pool *p = NULL;
    ex_pool_config cfg = test_pool_config(1, "vclock");
    cfg.clock = c;
    for (long nth = 1;; nth++) {
        test_alloc_fail_at(nth);
        ex_error e = ex_pool_create(&cfg, &p);
        test_alloc_fail_at(0);
        if (!e.code) break;
        cr_assert_eq(e.code, EX_ENOMEM, "allocation %ld: %s", nth, e.msg);
        cr_assert_eq(ex_virtual_clock_destroy(c).code, EX_OK, "a failed create stayed attached");
        c = clock_at(0);
        cfg.clock = c;
    }
    cr_assert_eq(ex_virtual_clock_destroy(c).code, EX_EBUSY);
    cr_assert_eq(ex_pool_destroy(p).code, EX_OK);
    cr_assert_eq(ex_virtual_clock_destroy(c).code, EX_OK);
    expect_no_leaks();
}

/* The default allocator changes while the clock lives: the clock frees
 * what it allocated with the allocator it was created under. */
Test(virtual_clock, the_clock_keeps_the_allocator_it_was_created_under) {
    ex_clock *c = clock_at(0);
    cnt_alloc other;
    cnt_alloc_init(&other);
    ex_set_default_allocator(&other.base);
    ex_run_loop loop;
    ex_error e = ex_run_loop_init_clock(&loop, c);  /* the clock grows its array of resources */
    ex_set_default_allocator(&test_allocator);
    cr_assert_eq(e.code, EX_OK);
    cr_assert_eq(ex_run_loop_destroy(&loop).code, EX_OK);
    ex_set_default_allocator(&other.base);
    cr_assert_eq(ex_virtual_clock_destroy(c).code, EX_OK);
    ex_set_default_allocator(&test_allocator);
    cr_assert_eq(atomic_load(&other.allocs), 0, "the clock allocated from the new default");
    cr_assert_eq(atomic_load(&other.frees), 0, "the clock freed into the new default");
    expect_no_leaks();
}

/* ---------------------------------------------------- on a run loop */

typedef struct vloop {
    ex_clock *clock;
    ex_run_loop loop;
    ex_scheduler sch;
} vloop;

static void vloop_init(vloop *v, int64_t start) {
    v->clock = clock_at(start);
    cr_assert_eq(ex_run_loop_init_clock(&v->loop, v->clock).code, EX_OK);
    v->sch = ex_run_loop_scheduler(&v->loop);
}

static size_t vloop_run(vloop *v) {
    size_t n = 0;
    while (ex_run_loop_run_one(&v->loop)) n++;
    return n;
}

static void vloop_fini(vloop *v) {
    cr_assert_eq(ex_virtual_clock_destroy(v->clock).code, EX_EBUSY, "the loop still keeps time on the clock");
    cr_assert_eq(ex_run_loop_destroy(&v->loop).code, EX_OK);
    cr_assert_eq(ex_virtual_clock_destroy(v->clock).code, EX_OK);
}

Test(virtual_clock, a_timer_fires_exactly_when_the_clock_reaches_its_deadline) {
    vloop v;
    vloop_init(&v, 1000 * EX_NS_PER_S);
    ex_sender *s = ex_schedule_after(v.sch, 30 * EX_NS_PER_S);
    rec r;
    rec_init(&r);
    ex_operation *op = run_start(s, &r);
    cr_assert_eq(ex_virtual_clock_armed(v.clock), 1u);
    cr_assert_eq(ex_virtual_clock_next_deadline(v.clock), 1030 * EX_NS_PER_S,
                 "a relative deadline counts from the clock's time");
    test_sleep_ms(2);
    cr_assert_eq(vloop_run(&v), 0u, "a timer on a virtual clock fired by real time");
    cr_assert_eq(advance(v.clock, 30 * EX_NS_PER_S - 1), 0u);
    cr_assert_eq(vloop_run(&v), 0u);
    cr_assert_eq(rec_total(&r), 0);
    cr_assert_eq(advance(v.clock, 1), 1u, "the timer falls due at its deadline");
    cr_assert_eq(ex_virtual_clock_armed(v.clock), 0u);
    cr_assert_eq(rec_total(&r), 0, "the advance queues the completion; the loop runs it");
    cr_assert_eq(vloop_run(&v), 1u);
    cr_assert_eq(r.values, 1);
    cr_assert_eq(rec_total(&r), 1);
    cr_assert_eq(r.thread, test_thread_id());
    run_destroy_release(op, s);
    vloop_fini(&v);
    expect_no_leaks();
}

typedef struct step {
    int *order, *n, id;
} step;

static ex_error note_step(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    step *s = ctx;
    s->order[(*s->n)++] = s->id;
    return ex_ok();
}

Test(virtual_clock, an_advance_fires_what_falls_due_in_deadline_order) {
    vloop v;
    vloop_init(&v, 0);
    static const int64_t ms[6] = { 5, 2, 9, 2, 1, 20 };  /* 20 ms stays armed */
    int order[6] = { 0 }, n = 0;
    step steps[6];
    ex_sender *s[6];
    ex_operation *op[6];
    rec r[6];
    for (int i = 0; i < 6; i++) {
        steps[i] = (step){ order, &n, i };
        s[i] = ex_then(ex_schedule_at(v.sch, ms[i] * EX_NS_PER_MS), note_step, &steps[i], EX_SIG0, EX_SIG0);
        rec_init(&r[i]);
        op[i] = run_start(s[i], &r[i]);
    }
    cr_assert_eq(ex_virtual_clock_armed(v.clock), 6u);
    cr_assert_eq(ex_virtual_clock_next_deadline(v.clock), 1 * EX_NS_PER_MS);
    cr_assert_eq(advance(v.clock, 10 * EX_NS_PER_MS), 5u);
    cr_assert_eq(vloop_run(&v), 5u);
    static const int want[5] = { 4, 1, 3, 0, 2 };  /* 1, 2, 2 (armed first: 1), 5, 9 ms */
    cr_assert_eq(n, 5);
    for (int i = 0; i < 5; i++) cr_assert_eq(order[i], want[i], "%d-th: timer %d, expected %d", i, order[i], want[i]);
    cr_assert_eq(ex_virtual_clock_armed(v.clock), 1u);
    for (int i = 0; i < 5; i++) run_destroy_release(op[i], s[i]);
    /* Finishing: the 20 ms timer, not due on the clock, completes stopped. */
    ex_run_loop_finish(&v.loop);
    cr_assert_eq(ex_run_loop_run(&v.loop).code, EX_OK);
    cr_assert_eq(r[5].stops, 1);
    cr_assert_eq(ex_virtual_clock_armed(v.clock), 0u);
    run_destroy_release(op[5], s[5]);
    vloop_fini(&v);
    expect_no_leaks();
}

Test(virtual_clock, a_stop_request_removes_a_pending_timer_at_once) {
    vloop v;
    vloop_init(&v, 0);
    ex_sender *s = ex_schedule_after(v.sch, HOUR);
    rec r;
    rec_init(&r);
    rec_with_stop(&r);
    ex_operation *op = run_start(s, &r);
    cr_assert_eq(ex_virtual_clock_armed(v.clock), 1u);
    ex_stop_source_request_stop(&r.stop);
    cr_assert_eq(r.stops, 1, "the stop request completed the timer stopped");
    cr_assert_eq(ex_virtual_clock_armed(v.clock), 0u);
    cr_assert_eq(advance(v.clock, 2 * HOUR), 0u);
    cr_assert_eq(vloop_run(&v), 0u);
    cr_assert_eq(rec_total(&r), 1);
    run_destroy_release(op, s);
    vloop_fini(&v);
    expect_no_leaks();
}

/* A 30-second timeout in virtual time: the child would take an hour. */
Test(virtual_clock, a_timeout_is_tested_without_waiting_for_it) {
    vloop v;
    vloop_init(&v, 0);
    ex_sender *s = ex_timeout(ex_schedule_after(v.sch, HOUR), v.sch, 30 * EX_NS_PER_S);
    rec r;
    rec_init(&r);
    double t0 = test_now_s();
    ex_operation *op = run_start(s, &r);
    cr_assert_eq(ex_virtual_clock_armed(v.clock), 2u, "the child's timer and the timeout's");
    cr_assert_eq(advance(v.clock, 30 * EX_NS_PER_S - 1), 0u);
    vloop_run(&v);
    cr_assert_eq(rec_total(&r), 0, "the timeout fired early");
    cr_assert_eq(advance(v.clock, 1), 1u);
    vloop_run(&v);
    double wall = test_now_s() - t0;
    cr_assert_eq(r.errors, 1);
    cr_assert_eq(r.err.code, EX_ETIMEDOUT);
    cr_assert_eq(ex_virtual_clock_armed(v.clock), 0u, "the timeout stopped its child's timer");
    cr_log_info("virtual_clock: a 30 s timeout tested in %.1f us of wall time", wall * 1e6);
    ex_error_release(r.err);
    r.err = ex_ok();
    run_destroy_release(op, s);
    vloop_fini(&v);
    expect_no_leaks();
}

/* ------------------------------------------------------------ on a pool */

Test(virtual_clock, a_pool_fires_only_when_advanced_on_a_worker) {
    ex_clock *c = clock_at(0);
    ex_pool_config cfg = test_pool_config(2, "vclock");
    cfg.clock = c;
    ex_pool *p = test_pool_new_cfg(&cfg);
    ex_sender *s = ex_schedule_after(ex_pool_scheduler(p), 10 * EX_NS_PER_MS);
    arec r;
    arec_init(&r, p);
    ex_operation *op = arec_run_start(s, &r);
    cr_assert_eq(ex_virtual_clock_armed(c), 1u);
    test_sleep_ms(30);
    cr_assert_eq(atomic_load(&r.total), 0, "a timer on a virtual clock fired by real time");
    cr_assert_eq(advance(c, 10 * EX_NS_PER_MS), 1u);
    cr_assert_eq(wait_int_reaches(&r.total, 1), 1);
    cr_assert_eq(atomic_load(&r.values), 1);
    cr_assert(r.worker >= 0, "the completion ran on a worker");
    run_destroy_release(op, s);
    /* A timer left armed: the pool's shutdown completes it stopped. */
    s = ex_schedule_after(ex_pool_scheduler(p), HOUR);
    arec_init(&r, p);
    op = arec_run_start(s, &r);
    cr_assert_eq(ex_virtual_clock_armed(c), 1u);
    cr_assert_eq(ex_virtual_clock_destroy(c).code, EX_EBUSY);
    test_pool_free(p);
    cr_assert_eq(atomic_load(&r.stops), 1);
    cr_assert_eq(ex_virtual_clock_armed(c), 0u);
    run_destroy_release(op, s);
    cr_assert_eq(ex_virtual_clock_destroy(c).code, EX_OK);
    expect_no_leaks();
}

/* A task's sleep on a pool on a virtual clock. */
static ex_task_result sleep_an_hour(ex_task *t, void *arg) {
    ex_error e = ex_task_sleep_for(t, HOUR);
    *(int *)arg = e.code;
    ex_error_release(e);
    return ex_task_value(ex_int(5));
}

Test(virtual_clock, a_task_sleeps_an_hour_in_no_time) {
    ex_clock *c = clock_at(0);
    ex_pool_config cfg = test_pool_config(2, "vclock");
    cfg.clock = c;
    ex_pool *p = test_pool_new_cfg(&cfg);
    int code = -1;
    ex_sender *s = ex_starts_on(ex_pool_scheduler(p), ex_task_create(sleep_an_hour, &code, NULL));
    arec r;
    arec_init(&r, p);
    ex_operation *op = arec_run_start(s, &r);
    while (ex_virtual_clock_armed(c) == 0) test_nap_us(100);  /* the task reached its sleep */
    cr_assert_eq(advance(c, HOUR), 1u);
    cr_assert_eq(wait_int_reaches(&r.total, 1), 1);
    cr_assert_eq(atomic_load(&r.values), 1);
    cr_assert_eq(code, EX_OK);
    run_destroy_release(op, s);
    test_pool_free(p);
    cr_assert_eq(ex_virtual_clock_destroy(c).code, EX_OK);
    expect_no_leaks();
}

/* ------------------------------------------------ on a manual scheduler */

Test(virtual_clock, a_manual_scheduler_queues_timers_the_advance_reaches) {
    ex_clock *c = clock_at(0);
    ex_manual_scheduler m;
    cr_assert_eq(ex_manual_scheduler_init_clock(&m, c).code, EX_OK);
    ex_scheduler sch = ex_manual_scheduler_get(&m);
    int order[3] = { 0 }, n = 0;
    step steps[3];
    ex_sender *s[3];
    ex_operation *op[3];
    rec r[3];
    static const int64_t ms[3] = { 30, 10, 20 };
    for (int i = 0; i < 3; i++) {
        steps[i] = (step){ order, &n, i };
        s[i] = ex_then(ex_schedule_after(sch, ms[i] * EX_NS_PER_MS), note_step, &steps[i], EX_SIG0, EX_SIG0);
        rec_init(&r[i]);
        op[i] = run_start(s[i], &r[i]);
    }
    test_sleep_ms(2);
    cr_assert_eq(ex_manual_pending(&m), 0u, "a timer on a virtual clock fell due by real time");
    cr_assert_eq(ex_manual_timers_armed(&m), 3u);
    cr_assert_eq(advance(c, 20 * EX_NS_PER_MS), 2u);
    cr_assert_eq(ex_manual_pending(&m), 2u);
    cr_assert_eq(ex_manual_timers_armed(&m), 1u);
    cr_assert_eq(n, 0, "the advance queues; the test runs");
    cr_assert_eq(ex_manual_run_until_idle(&m), 2u);
    cr_assert_eq(n, 2);
    cr_assert_eq(order[0], 1);
    cr_assert_eq(order[1], 2);
    cr_assert_eq(ex_virtual_clock_next_deadline(c), 30 * EX_NS_PER_MS);
    cr_assert_eq(ex_virtual_clock_advance_to(c, ex_virtual_clock_next_deadline(c), NULL).code, EX_OK);
    cr_assert_eq(ex_manual_run_until_idle(&m), 1u);
    cr_assert_eq(order[2], 0);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(r[i].values, 1);
        run_destroy_release(op[i], s[i]);
    }
    cr_assert_eq(ex_virtual_clock_destroy(c).code, EX_EBUSY);
    cr_assert_eq(ex_manual_scheduler_destroy(&m).code, EX_OK);
    cr_assert_eq(ex_virtual_clock_destroy(c).code, EX_OK);
    expect_no_leaks();
}

Test(virtual_clock, a_manual_scheduler_that_cannot_attach_is_enomem) {
    ex_clock *c = clock_at(0);
    ex_manual_scheduler m;
    test_alloc_fail_at(1);
    cr_assert_eq(ex_manual_scheduler_init_clock(&m, c).code, EX_ENOMEM);
    test_alloc_fail_at(0);
    cr_assert_eq(ex_manual_scheduler_init_clock(NULL, c).code, EX_EINVAL);
    cr_assert_eq(ex_virtual_clock_destroy(c).code, EX_OK, "a failed init stayed attached");
    expect_no_leaks();
}

/* A timer already due when armed fires at once on a pool on a virtual
 * clock too (no worker watches the clock: the arm posts it), as on a run
 * loop or a manual scheduler; without that a zero timeout waited for the
 * next advance. */
Test(virtual_clock, a_timer_due_when_armed_fires_on_a_pool_without_an_advance) {
    ex_clock *c = clock_at(5 * EX_NS_PER_S);
    ex_pool_config cfg = test_pool_config(2, "vclock");
    cfg.clock = c;
    ex_pool *p = test_pool_new_cfg(&cfg);
    ex_scheduler sch = ex_pool_scheduler(p);
    ex_result r = ex_sync_wait(ex_schedule_after(sch, 0));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    r = ex_sync_wait(ex_schedule_at(sch, EX_NS_PER_S));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_eq(ex_virtual_clock_armed(c), 0u);
    /* Stopped before it ran: exactly one completion, stopped. */
    arec ar;
    arec_init(&ar, p);
    arec_with_stop(&ar);
    ex_stop_source_request_stop(&ar.stop);
    ex_sender *s = ex_schedule_after(sch, 0);
    ex_operation *op = arec_run_start(s, &ar);
    cr_assert_eq(wait_int_reaches(&ar.total, 1), 1);
    cr_assert_eq(atomic_load(&ar.stops), 1);
    run_destroy_release(op, s);
    test_pool_free(p);
    cr_assert_eq(ex_virtual_clock_destroy(c).code, EX_OK);
    expect_no_leaks();
}

/* A pool shut down but not destroyed still reads the clock (a retained
 * handle's timer computes its deadline before the refusal): the clock's
 * destroy waits for the pool's. */
Test(virtual_clock, a_shut_down_pool_still_holds_its_clock) {
    ex_clock *c = clock_at(0);
    ex_pool_config cfg = test_pool_config(1, "vclock");
    cfg.clock = c;
    ex_pool *p = test_pool_new_cfg(&cfg);
    cr_assert_eq(ex_pool_shutdown(p).code, EX_OK);
    cr_assert_eq(ex_virtual_clock_destroy(c).code, EX_EBUSY);
    ex_result r = ex_sync_wait(ex_schedule_after(ex_pool_scheduler(p), EX_NS_PER_S));
    cr_assert_eq(r.disposition, EX_DISP_ERROR);
    cr_assert_eq(r.error.code, EX_ESHUTDOWN);
    ex_result_destroy(&r);
    test_pool_free(p);
    cr_assert_eq(ex_virtual_clock_destroy(c).code, EX_OK);
    expect_no_leaks();
}
