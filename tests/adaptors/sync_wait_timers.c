/* SPDX-License-Identifier: MIT */
/* ex_sync_wait's own run loop has a clock: timers on its scheduler fire
 * on the waiting thread, in deadline order, never early; a stop request
 * from another thread removes one while the waiter sleeps; an arm from
 * another thread of an earlier deadline wakes a waiter sleeping until a
 * later one; when the wait ends, timers still armed on the loop fire if
 * due and complete stopped if not.  Times are checked from below only. */
#include <string.h>

#include <pthread.h>

#include "common/helpers.h"
#include "base/exi_test_hooks.h"

TEST_SUITE(sync_wait_timers, 30);

#define HOUR (3600 * EX_NS_PER_S)

static ex_sender *loop_scheduler_then(ex_sender *(*fn)(void *, const ex_value *, size_t), void *ctx) {
    return ex_let_value(ex_read_env(&ex_key_get_scheduler, EX_T_SCHED), fn, ctx, EX_SIG(EX_T_SCHED));
}

/* ------------------------------------------------- one timer, its thread */

typedef struct fired_at {
    const void *thread;
    int64_t when;
} fired_at;

static ex_error note_fired(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    fired_at *f = ctx;
    f->thread = test_thread_id();
    f->when = ex_now();
    out[0] = ex_int(1);
    return ex_ok();
}

static ex_error return_ctx_int(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    out[0] = ex_int((int64_t)(intptr_t)ctx);
    return ex_ok();
}

static ex_sender *after_2ms(void *ctx, const ex_value *in, size_t n) {
    (void)n;
    return ex_then(ex_schedule_after(in[0].as.sched, 2 * EX_NS_PER_MS), note_fired, ctx, EX_SIG0, EX_SIG(EX_T_INT));
}

Test(sync_wait_timers, a_timer_fires_on_the_waiting_thread_never_early) {
    fired_at f = { NULL, 0 };
    int64_t start = ex_now();
    expect_sync_int(loop_scheduler_then(after_2ms, &f), 1);
    cr_assert_eq(f.thread, test_thread_id(), "the loop's timer fired on another thread");
    cr_assert_geq(f.when - start, 2 * EX_NS_PER_MS, "fired after %lld ns of 2 ms", (long long)(f.when - start));
    expect_no_leaks();
}

static ex_sender *at_zero(void *ctx, const ex_value *in, size_t n) {
    (void)n;
    return ex_then(ex_schedule_at(in[0].as.sched, 0), note_fired, ctx, EX_SIG0, EX_SIG(EX_T_INT));
}

Test(sync_wait_timers, a_deadline_in_the_past_fires_at_once) {
    fired_at f = { NULL, 0 };
    expect_sync_int(loop_scheduler_then(at_zero, &f), 1);
    cr_assert_eq(f.thread, test_thread_id());
    expect_no_leaks();
}

/* ------------------------------------------------------------ the order */

typedef struct order {
    int seen[6];
    int n;
} order;

typedef struct order_step {
    order *o;
    int id;
} order_step;

static ex_error note_order(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    order_step *s = ctx;
    if (s->o->n < 6) s->o->seen[s->o->n] = s->id;
    s->o->n++;
    out[0] = ex_int(s->id);
    return ex_ok();
}

typedef struct order_test {
    order o;
    order_step steps[6];
    int64_t base;
} order_test;

/* Armed in the order 0..5 (when_all starts its children in order); the
 * deadlines put them in the order 5, 3, 4, 1, 2, 0 (3 and 4 equal: armed
 * first, fired first). */
static ex_sender *six_timers(void *ctx, const ex_value *in, size_t n) {
    (void)n;
    order_test *t = ctx;
    static const int ms[6] = { 6, 4, 5, 3, 3, 1 };
    ex_sender *children[6];
    for (int i = 0; i < 6; i++) {
        t->steps[i] = (order_step){ &t->o, i };
        children[i] = ex_then(ex_schedule_at(in[0].as.sched, t->base + ms[i] * EX_NS_PER_MS), note_order,
                              &t->steps[i], EX_SIG0, EX_SIG(EX_T_INT));
    }
    return ex_when_all_n(children, 6);
}

Test(sync_wait_timers, timers_fire_in_deadline_order_equal_ones_in_arming_order) {
    order_test t;
    memset(&t, 0, sizeof t);
    t.base = ex_now();
    ex_result r = ex_sync_wait(loop_scheduler_then(six_timers, &t));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    ex_result_destroy(&r);
    static const int want[6] = { 5, 3, 4, 1, 2, 0 };
    cr_assert_eq(t.o.n, 6);
    for (int i = 0; i < 6; i++) cr_assert_eq(t.o.seen[i], want[i], "fired %d-th: timer %d, expected %d", i, t.o.seen[i], want[i]);
    expect_no_leaks();
}

/* ------------------------------------------------ other threads, racing */

typedef struct cross {
    ex_pool *pool;
    ex_scheduler loop;
    int64_t armed_late;  /* when the worker armed the short timer */
} cross;

static ex_sender *short_timer_on_loop(void *ctx, const ex_value *in, size_t n) {
    (void)in, (void)n;
    cross *c = ctx;
    c->armed_late = ex_now();
    return ex_then(ex_schedule_after(c->loop, EX_NS_PER_MS), return_ctx_int, (void *)(intptr_t)2, EX_SIG0, EX_SIG(EX_T_INT));
}

/* The waiter sleeps until an hour from now; a worker then arms a 1 ms
 * timer on the loop.  Its arm must wake the waiter, or the test times out. */
static ex_sender *hour_and_late_short(void *ctx, const ex_value *in, size_t n) {
    (void)n;
    cross *c = ctx;
    c->loop = in[0].as.sched;
    ex_sender *hour = ex_then(ex_schedule_after(c->loop, HOUR), return_ctx_int, (void *)(intptr_t)2, EX_SIG0, EX_SIG(EX_T_INT));
    ex_sender *late = ex_let_value(ex_schedule_after(ex_pool_scheduler(c->pool), 5 * EX_NS_PER_MS),
                                   short_timer_on_loop, c, EX_SIG0);
    return ex_when_any(hour, late);
}

Test(sync_wait_timers, an_earlier_arm_from_another_thread_wakes_the_sleeping_waiter) {
    cross c = { .pool = test_pool_new(2) };
    int64_t start = ex_now();
    expect_sync_int(loop_scheduler_then(hour_and_late_short, &c), 2);
    int64_t end = ex_now();
    cr_assert_geq(c.armed_late - start, 5 * EX_NS_PER_MS);
    cr_assert_geq(end - c.armed_late, EX_NS_PER_MS);
    test_pool_free(c.pool);
    expect_no_leaks();
}

/* The waiter sleeps with an hour's timer armed on its loop; a worker's
 * value wins the race and its stop request removes the timer from the
 * worker's thread. */
static ex_sender *hour_or_worker(void *ctx, const ex_value *in, size_t n) {
    (void)n;
    cross *c = ctx;
    ex_sender *hour = ex_then(ex_schedule_after(in[0].as.sched, HOUR), return_ctx_int, (void *)(intptr_t)2, EX_SIG0, EX_SIG(EX_T_INT));
    ex_sender *worker = ex_then(ex_schedule_after(ex_pool_scheduler(c->pool), 2 * EX_NS_PER_MS), return_ctx_int, (void *)(intptr_t)3,
                                EX_SIG0, EX_SIG(EX_T_INT));
    return ex_when_any(hour, worker);
}

Test(sync_wait_timers, a_stop_from_another_thread_removes_the_sleeping_waiters_timer) {
    cross c = { .pool = test_pool_new(2) };
    expect_sync_int(loop_scheduler_then(hour_or_worker, &c), 3);
    test_pool_free(c.pool);
    expect_no_leaks();
}

static ex_sender *hour_timed_out(void *ctx, const ex_value *in, size_t n) {
    (void)ctx, (void)n;
    return ex_timeout(ex_schedule_after(in[0].as.sched, HOUR), in[0].as.sched, EX_NS_PER_MS);
}

Test(sync_wait_timers, a_timeout_on_the_loop_stops_its_child) {
    ex_result r = ex_sync_wait(loop_scheduler_then(hour_timed_out, NULL));
    cr_assert_eq(r.disposition, EX_DISP_ERROR);
    cr_assert_eq(r.error.code, EX_ETIMEDOUT);
    ex_result_destroy(&r);
    expect_no_leaks();
}

/* ------------------------------------------------------- the wait's end */

typedef struct left_armed {
    ex_operation *op[2];
    void *storage[2];
    int values, stopped;
    const void *thread[2];
} left_armed;

static void la_value(void *self, const ex_value *v, size_t n) {
    (void)v, (void)n;
    left_armed *l = self;
    l->thread[0] = test_thread_id();
    l->values++;
}
static void la_error(void *self, ex_error e) {
    (void)self;
    ex_error_release(e);
    cr_assert_fail("a timer left armed completed with an error");
}
static void la_stopped(void *self) {
    left_armed *l = self;
    l->thread[1] = test_thread_id();
    l->stopped++;
}
static ex_env la_env(void *self) {
    (void)self;
    return ex_env_empty();
}
static const ex_receiver_vtable la_vt = { la_value, la_error, la_stopped, la_env, NULL };

/* Starts two timers on the loop that nobody waits for (a due one and one
 * an hour away) and completes at once. */
static ex_sender *arm_and_leave(void *ctx, const ex_value *in, size_t n) {
    (void)n;
    left_armed *l = ctx;
    ex_sender *s[2] = { ex_schedule_at(in[0].as.sched, 0), ex_schedule_after(in[0].as.sched, HOUR) };
    for (int i = 0; i < 2; i++) {
        l->storage[i] = malloc(s[i]->op_size);
        cr_assert(l->storage[i]);
        cr_assert_eq(ex_connect(s[i], (ex_receiver){ &la_vt, l }, l->storage[i], s[i]->op_size, &l->op[i]).code, EX_OK);
        ex_start(l->op[i]);
        ex_sender_release(s[i]);
    }
    return ex_just(ex_int(1));
}

Test(sync_wait_timers, when_the_wait_ends_due_timers_fire_and_others_complete_stopped) {
    left_armed l;
    memset(&l, 0, sizeof l);
    expect_sync_int(loop_scheduler_then(arm_and_leave, &l), 1);
    cr_assert_eq(l.values, 1, "the due timer did not fire");
    cr_assert_eq(l.stopped, 1, "the hour's timer did not complete stopped");
    cr_assert_eq(l.thread[0], test_thread_id());
    cr_assert_eq(l.thread[1], test_thread_id());
    for (int i = 0; i < 2; i++) {
        ex_operation_destroy(l.op[i]);
        free(l.storage[i]);
    }
    expect_no_leaks();
}

/* ------------------------------------------- a cancel as the wait ends */

/* A timer on the loop that the waited operation does not own, cancelled
 * from another thread just as the wait ends: the cancel takes it out of
 * the heap, so the wait sees no timer left; it must still not return
 * (and its frame go) before the cancel let go of the heap's lock.  The
 * hook holds the cancel there for 50 ms and notes whether sync_wait
 * returned meanwhile. */
static atomic_int cancel_inside, returned_during_cancel, wait_returned;

static void hold_the_cancel(void) {
    atomic_store(&cancel_inside, 1);
    test_sleep_ms(50);
    if (atomic_load(&wait_returned)) atomic_store(&returned_during_cancel, 1);
}

typedef struct detached {
    ex_stop_source src;
    ex_env_pair pair;
    ex_operation *op;
    void *storage;
    atomic_int stopped;
    pthread_t canceller;
} detached;

static void det_value(void *self, const ex_value *v, size_t n) {
    (void)self, (void)v, (void)n;
}
static void det_error(void *self, ex_error e) {
    (void)self;
    ex_error_release(e);
}
static void det_stopped(void *self) { atomic_store(&((detached *)self)->stopped, 1); }
static ex_env det_env(void *self) { return ex_env_of_pair(&((detached *)self)->pair); }
static const ex_receiver_vtable det_vt = { det_value, det_error, det_stopped, det_env, NULL };

static void *request_stop_elsewhere(void *arg) {
    ex_stop_source_request_stop(&((detached *)arg)->src);
    return NULL;
}

/* Arms an hour's timer on the loop that nobody waits for, has another
 * thread cancel it, and completes once that cancel is inside the lock. */
static ex_sender *arm_and_cancel_elsewhere(void *ctx, const ex_value *in, size_t n) {
    (void)n;
    detached *d = ctx;
    ex_sender *s = ex_schedule_after(in[0].as.sched, HOUR);
    d->storage = malloc(s->op_size);
    cr_assert(d->storage);
    cr_assert_eq(ex_connect(s, (ex_receiver){ &det_vt, d }, d->storage, s->op_size, &d->op).code, EX_OK);
    ex_sender_release(s);
    ex_start(d->op);
    cr_assert_eq(pthread_create(&d->canceller, NULL, request_stop_elsewhere, d), 0);
    while (!atomic_load(&cancel_inside)) test_nap_us(50);
    return ex_just(ex_int(1));
}

Test(sync_wait_timers, a_cancel_elsewhere_as_the_wait_ends_is_over_before_it_returns) {
    detached d;
    memset(&d, 0, sizeof d);
    ex_stop_source_init(&d.src);
    ex_env_pair_init(&d.pair, &ex_key_get_stop_token, ex_token_value(ex_stop_source_token(&d.src)), ex_env_empty());
    exi_sync_cancel_hook = hold_the_cancel;
    expect_sync_int(loop_scheduler_then(arm_and_cancel_elsewhere, &d), 1);
    atomic_store(&wait_returned, 1);
    pthread_join(d.canceller, NULL);
    exi_sync_cancel_hook = NULL;
    cr_assert_eq(atomic_load(&returned_during_cancel), 0,
                 "ex_sync_wait returned while a cancel still held its loop's lock (a write into a dead frame)");
    cr_assert_eq(atomic_load(&d.stopped), 1);
    ex_operation_destroy(d.op);
    free(d.storage);
    expect_no_leaks();
}
