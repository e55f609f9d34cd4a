/* SPDX-License-Identifier: MIT */
/* The manual scheduler's timers (suite manual_scheduler): when a timer
 * becomes runnable, its place in the queue, stop requests wherever it
 * waits, shutdown and destroy with timers armed.  No timing assertion:
 * tests wait for the clock to pass a deadline, never check how late. */
#include <pthread.h>

#include "resources/manual_fixtures.h"

enum { HOUR_NS = 3600 };

static ex_sender *in_an_hour(ex_scheduler sch) { return ex_schedule_after(sch, HOUR_NS * EX_NS_PER_S); }

Test(manual_scheduler, a_timer_already_due_is_runnable_at_once) {
    ex_manual_scheduler m;
    ex_scheduler sch = ms_init(&m);
    ms_log log = { .n = 0 };
    ms_op past, zero, now;
    ms_op_start(&past, 1, &log, ex_schedule_at(sch, ms_past()));
    ms_op_start(&zero, 2, &log, ex_schedule_after(sch, 0));
    ms_op_start(&now, 3, &log, ex_schedule_at(sch, 0));
    cr_assert_eq(log.n, 0, "a due timer still waits for a run call");
    cr_assert_eq(ex_manual_pending(&m), 3);
    cr_assert_eq(ex_manual_timers_armed(&m), 0);
    cr_assert_eq(ex_manual_run_until_idle(&m), 3);
    MS_EXPECT_LOG(&log, 1, 2, 3);  /* queued as they were armed */
    ms_op_expect(&past, EX_DISP_VALUE, 0);
    ms_op_expect(&zero, EX_DISP_VALUE, 0);
    ms_op_expect(&now, EX_DISP_VALUE, 0);
    cr_assert_eq(now.r.thread, test_thread_id());
    ms_destroy(&m);
    expect_no_leaks();
}

Test(manual_scheduler, a_timer_not_due_is_armed_and_not_runnable) {
    ex_manual_scheduler m;
    ex_scheduler sch = ms_init(&m);
    ms_log log = { .n = 0 };
    ms_op later;
    ms_op_start(&later, 1, &log, in_an_hour(sch));
    cr_assert_eq(ex_manual_timers_armed(&m), 1);
    cr_assert_eq(ex_manual_pending(&m), 0);
    cr_assert_not(ex_manual_run_one(&m));
    cr_assert_eq(ex_manual_run_pending(&m), 0);
    cr_assert_eq(ex_manual_run_until_idle(&m), 0, "no run function waits for a timer");
    cr_assert_eq(ex_manual_run(&m, 5, NULL).code, 0);
    cr_assert_eq(rec_total(&later.r), 0);
    (void)ex_stop_source_request_stop(&later.r.stop);
    ms_op_expect(&later, EX_DISP_STOPPED, 0);
    ms_destroy(&m);
    expect_no_leaks();
}

/* Timers that become due at the same look join the queue in deadline
 * order (equal deadlines in arming order), behind the items queued before
 * the look and ahead of those queued after. */
typedef struct order_round {
    ms_log log;
    ms_op t1, t2, t2b, t3;
    ms_item before, after;
} order_round;

/* Arms the timers (out of order) and posts `before`; false if a timer was
 * due before all were armed (a stalled thread): the round proves nothing
 * then, and is drained. */
static bool arm_out_of_order(ex_manual_scheduler *m, order_round *o, int64_t margin) {
    ex_scheduler sch = ex_manual_scheduler_get(m);
    o->log.n = 0;
    int64_t d = ex_now() + margin;
    ms_op_start(&o->t3, 3, &o->log, ex_schedule_at(sch, d + 3));
    ms_op_start(&o->t1, 1, &o->log, ex_schedule_at(sch, d + 1));
    ms_op_start(&o->t2, 2, &o->log, ex_schedule_at(sch, d + 2));
    ms_op_start(&o->t2b, 22, &o->log, ex_schedule_at(sch, d + 2));
    ms_item_init(&o->before, 10, &o->log, m);
    ms_item_init(&o->after, 20, &o->log, m);
    ms_post(&o->before);
    bool in_time = ex_manual_timers_armed(m) == 4;
    ms_wait_clock(d + 3);
    if (in_time) return true;
    cr_assert_eq(ex_manual_run_until_idle(m), 5);
    ms_op *ops[] = { &o->t1, &o->t2, &o->t2b, &o->t3 };
    for (int i = 0; i < 4; i++) ms_op_expect(ops[i], EX_DISP_VALUE, 0);
    return false;
}

Test(manual_scheduler, due_timers_join_the_tail_in_deadline_order) {
    ex_manual_scheduler m;
    ms_init(&m);
    order_round o;
    int64_t margin = 5 * EX_NS_PER_MS;
    while (!arm_out_of_order(&m, &o, margin)) {
        margin *= 10;
        cr_assert_lt(margin, 10 * EX_NS_PER_S, "this thread keeps stalling for longer than the margin");
    }
    cr_assert_eq(ex_manual_pending(&m), 5, "the look queues the due timers");
    cr_assert_eq(ex_manual_timers_armed(&m), 0);
    ms_post(&o.after);
    cr_assert_eq(ex_manual_run_until_idle(&m), 6);
    MS_EXPECT_LOG(&o.log, 10, 1, 2, 22, 3, 20);
    ms_op_expect(&o.t1, EX_DISP_VALUE, 0);
    ms_op_expect(&o.t2, EX_DISP_VALUE, 0);
    ms_op_expect(&o.t2b, EX_DISP_VALUE, 0);
    ms_op_expect(&o.t3, EX_DISP_VALUE, 0);
    ms_destroy(&m);
    expect_no_leaks();
}

/* An item that arms a timer and waits until the clock passes its
 * deadline: the timer becomes runnable during the run call, after its
 * round began (at the arm or at the next step's look). */
typedef struct arms_timer {
    ms_op t;
    ms_log *log;
} arms_timer;

static void arm_and_wait(ms_item *it) {
    arms_timer *a = it->ctx;
    int64_t deadline = ex_now() + 2 * EX_NS_PER_MS;
    ms_op_start(&a->t, 1, a->log, ex_schedule_at(ex_manual_scheduler_get(it->m), deadline));
    ms_wait_clock(deadline);
}

Test(manual_scheduler, a_timer_due_during_a_run_joins_until_idle_but_not_the_round) {
    ex_manual_scheduler m;
    ms_init(&m);
    ms_log log = { .n = 0 };
    for (int pass = 0; pass < 2; pass++) {
        log.n = 0;
        arms_timer a = { .log = &log };
        ms_item item;
        ms_item_init(&item, 2, &log, &m);
        item.also = arm_and_wait;
        item.ctx = &a;
        ms_post(&item);
        if (pass == 0) {
            cr_assert_eq(ex_manual_run_until_idle(&m), 2);
        } else {
            cr_assert_eq(ex_manual_run_pending(&m), 1, "the timer was not runnable when the round began");
            cr_assert_eq(ex_manual_pending(&m), 1);
            cr_assert_eq(ex_manual_run_pending(&m), 1);
        }
        MS_EXPECT_LOG(&log, 2, 1);
        ms_op_expect(&a.t, EX_DISP_VALUE, 0);
    }
    ms_destroy(&m);
    expect_no_leaks();
}

/* ------------------------------------------------------------------ stops */

Test(manual_scheduler, a_stop_removes_an_armed_timer_at_once) {
    ex_manual_scheduler m;
    ex_scheduler sch = ms_init(&m);
    ms_log log = { .n = 0 };
    ms_op t;
    ms_op_start(&t, 1, &log, in_an_hour(sch));
    (void)ex_stop_source_request_stop(&t.r.stop);
    cr_assert_eq(t.r.thread, test_thread_id(), "completed inside the request");
    cr_assert_eq(ex_manual_timers_armed(&m), 0);
    cr_assert_eq(ex_manual_run_until_idle(&m), 0);
    ms_op_expect(&t, EX_DISP_STOPPED, 0);  /* exactly once */
    ms_destroy(&m);
    expect_no_leaks();
}

Test(manual_scheduler, a_stop_removes_a_due_timer_from_the_queue_at_once) {
    ex_manual_scheduler m;
    ex_scheduler sch = ms_init(&m);
    ms_log log = { .n = 0 };
    ms_item first, last;
    ms_item_init(&first, 10, &log, &m);
    ms_item_init(&last, 20, &log, &m);
    ms_op middle, tail;
    ms_post(&first);
    ms_op_start(&middle, 1, &log, ex_schedule_at(sch, ms_past()));
    ms_post(&last);
    ms_op_start(&tail, 2, &log, ex_schedule_at(sch, ms_past()));
    cr_assert_eq(ex_manual_pending(&m), 4);
    (void)ex_stop_source_request_stop(&middle.r.stop);
    (void)ex_stop_source_request_stop(&tail.r.stop);
    MS_EXPECT_LOG(&log, 1, 2);
    cr_assert_eq(ex_manual_pending(&m), 2);
    ms_item extra;  /* the removed tail was unlinked as the tail: this lands after `last` */
    ms_item_init(&extra, 30, &log, &m);
    ms_post(&extra);
    cr_assert_eq(ex_manual_run_until_idle(&m), 3);
    MS_EXPECT_LOG(&log, 1, 2, 10, 20, 30);
    ms_op_expect(&middle, EX_DISP_STOPPED, 0);
    ms_op_expect(&tail, EX_DISP_STOPPED, 0);
    ms_destroy(&m);
    expect_no_leaks();
}

/* Inside a round: the first item stops a due timer queued behind it; the
 * round then runs the remaining item of the round, not the one the first
 * item queued after the round began. */
static void stop_the_timer(ms_item *it) { (void)ex_stop_source_request_stop(&((ms_op *)it->ctx)->r.stop); }

Test(manual_scheduler, a_timer_stopped_inside_a_round_shortens_the_round) {
    ex_manual_scheduler m;
    ex_scheduler sch = ms_init(&m);
    ms_log log = { .n = 0 };
    ms_item stopper, second, queued_by_stopper;
    ms_item_init(&stopper, 10, &log, &m);
    ms_item_init(&second, 30, &log, &m);
    ms_item_init(&queued_by_stopper, 40, &log, &m);
    ms_op t;
    ms_post(&stopper);
    ms_op_start(&t, 20, &log, ex_schedule_at(sch, ms_past()));
    ms_post(&second);
    stopper.also = stop_the_timer;
    stopper.ctx = &t;
    stopper.post = &queued_by_stopper;
    cr_assert_eq(ex_manual_run_pending(&m), 2, "a round of three lost one");
    MS_EXPECT_LOG(&log, 10, 20, 30);
    ms_op_expect(&t, EX_DISP_STOPPED, 0);
    cr_assert_eq(ex_manual_pending(&m), 1);
    cr_assert_eq(ex_manual_run_pending(&m), 1);
    MS_EXPECT_LOG(&log, 10, 20, 30, 40);
    ms_destroy(&m);
    expect_no_leaks();
}

Test(manual_scheduler, a_timer_stopped_before_start_completes_stopped_unarmed) {
    ex_manual_scheduler m;
    ex_scheduler sch = ms_init(&m);
    ms_log log = { .n = 0 };
    ms_op t;
    ms_op_start_stopped(&t, 1, &log, in_an_hour(sch));
    ms_op_expect(&t, EX_DISP_STOPPED, 0);
    cr_assert_eq(ex_manual_timers_armed(&m), 0);
    cr_assert_eq(ex_manual_pending(&m), 0);
    ms_destroy(&m);
    expect_no_leaks();
}

Test(manual_scheduler, a_stop_after_the_timer_ran_changes_nothing) {
    ex_manual_scheduler m;
    ex_scheduler sch = ms_init(&m);
    ms_log log = { .n = 0 };
    ms_op t;
    ms_op_start(&t, 1, &log, ex_schedule_after(sch, 0));
    cr_assert_eq(ex_manual_run_until_idle(&m), 1);
    rec_expect_values(&t.r, 0);
    ms_op_expect(&t, EX_DISP_VALUE, 0);  /* deregistered its stop callback */
    (void)ex_stop_source_request_stop(&t.r.stop);
    cr_assert_eq(rec_total(&t.r), 1);
    ms_destroy(&m);
    expect_no_leaks();
}

/* --------------------------------------------------- shutdown and destroy */

Test(manual_scheduler, shutdown_stops_armed_and_due_timers_and_refuses_new_ones) {
    ex_manual_scheduler m;
    ex_scheduler sch = ms_init(&m);
    ms_log log = { .n = 0 };
    ms_op armed, due, late, late_due;
    ms_op_start(&armed, 1, &log, in_an_hour(sch));
    ms_op_start(&due, 2, &log, ex_schedule_after(sch, 0));
    cr_assert_eq(ex_manual_scheduler_shutdown(&m).code, 0);
    MS_EXPECT_LOG(&log, 2, 1);  /* the queue first, then the armed timers */
    ms_op_expect(&armed, EX_DISP_STOPPED, 0);
    ms_op_expect(&due, EX_DISP_STOPPED, 0);
    cr_assert_eq(ex_manual_timers_armed(&m), 0);
    ms_op_start(&late, 3, &log, in_an_hour(sch));
    ms_op_expect(&late, EX_DISP_ERROR, EX_ESHUTDOWN);
    ms_op_start(&late_due, 4, &log, ex_schedule_after(sch, 0));
    ms_op_expect(&late_due, EX_DISP_ERROR, EX_ESHUTDOWN);
    ms_destroy(&m);
    expect_no_leaks();
}

Test(manual_scheduler, destroy_stops_timers_still_armed) {
    ex_manual_scheduler m;
    ex_scheduler sch = ms_init(&m);
    ms_log log = { .n = 0 };
    ms_op t[3];
    for (int i = 0; i < 3; i++) ms_op_start(&t[i], i, &log, ex_schedule_after(sch, (3 - i) * HOUR_NS * EX_NS_PER_S));
    ms_destroy(&m);
    MS_EXPECT_LOG(&log, 2, 1, 0);  /* deadline order */
    for (int i = 0; i < 3; i++) ms_op_expect(&t[i], EX_DISP_STOPPED, 0);
    expect_no_leaks();
}

/* --------------------------------------------------- stop from elsewhere */

typedef struct stopper_thread {
    ex_stop_source *src;
} stopper_thread;

static void *request_stop(void *arg) {
    (void)ex_stop_source_request_stop(((stopper_thread *)arg)->src);
    return NULL;
}

Test(manual_scheduler, a_stop_from_another_thread_completes_the_timer_there_once) {
    ex_manual_scheduler m;
    ex_scheduler sch = ms_init(&m);
    for (int round = 0; round < 50; round++) {
        trec t;
        trec_init(&t);
        rec_with_stop(&t.r);
        ex_sender *s = round % 2 ? in_an_hour(sch) : ex_schedule_after(sch, 0);
        ex_operation *op = trec_run_start(s, &t);
        ex_sender_release(s);
        stopper_thread st = { &t.r.stop };
        pthread_t th;
        cr_assert_eq(pthread_create(&th, NULL, request_stop, &st), 0);
        pthread_join(th, NULL);
        trec_wait_done(&t);
        cr_assert_eq(t.r.stops, 1, "round %d", round);
        cr_assert_neq(t.r.thread, test_thread_id(), "completed on the stopping thread");
        cr_assert_eq(ex_manual_run_until_idle(&m), 0);
        cr_assert_eq(rec_total(&t.r), 1);
        ex_operation_free(op);
    }
    ms_destroy(&m);
    expect_no_leaks();
}
