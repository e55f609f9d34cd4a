/* SPDX-License-Identifier: MIT */
/* pool_poller.c - pollers (cexec/poller.h): who polls, when polling
 * stops, activations during a poll, removal from inside and outside a
 * poll, and the waiting caller that polls instead of a worker. */
#include <pthread.h>
#include <time.h>

#include <criterion/criterion.h>
#include <cexec/cexec.h>

#include "base/exi_atomic.h"
#include "common/pool.h"

typedef struct probe {
    ex_pool *pool;
    uint32_t polls;          /* calls of the poll function */
    uint32_t idle_after;     /* return EX_POLL_IDLE from this many polls on (0: never) */
    uint32_t off_pool;       /* polls that ran on no agent of the pool */
    uint32_t inside;         /* 1 while a poll runs */
    uint32_t overlap;        /* polls that found another one running */
    uint32_t reactivate;     /* the first poll activates its own poller */
    uint32_t remove_inside;  /* the poll removes its own poller at this poll */
    uint32_t sleep_us;       /* each poll takes this long */
    pthread_t last_thread;
    ex_pool_poller *self;
} probe;

static void nap_us(unsigned us) {
    struct timespec ts = { 0, (long)us * 1000 };
    nanosleep(&ts, NULL);
}

static ex_poll_result probe_poll(void *ctx) {
    probe *pr = ctx;
    if (exi_fas_u32(&pr->inside, 1)) (void)exi_faa_u32(&pr->overlap, 1);
    uint32_t k = exi_faa_u32(&pr->polls, 1) + 1;
    if (ex_pool_current_worker(pr->pool) < 0) (void)exi_faa_u32(&pr->off_pool, 1);
    pr->last_thread = pthread_self();
    if (pr->sleep_us) nap_us(pr->sleep_us);
    if (k == 1 && pr->reactivate) ex_pool_poller_activate(pr->self);
    exi_store_rel_u32(&pr->inside, 0);
    if (pr->remove_inside && k == pr->remove_inside) {
        cr_expect_eq(ex_pool_poller_remove(pr->self).code, EX_OK);
        return EX_POLL_PENDING;
    }
    return pr->idle_after && k >= pr->idle_after ? EX_POLL_IDLE : EX_POLL_PENDING;
}

static uint32_t polls_of(probe *pr) { return exi_load_acq_u32(&pr->polls); }

/* Waits (bounded) until pr was polled at least n times. */
static bool wait_polls(probe *pr, uint32_t n) {
    for (int i = 0; i < 20000 && polls_of(pr) < n; i++) nap_us(100);
    return polls_of(pr) >= n;
}

static ex_pool_poller *add_probe(ex_pool *p, probe *pr) {
    pr->pool = p;
    ex_pool_poller *q = NULL;
    cr_assert_eq(ex_pool_poller_add(p, probe_poll, pr, &q).code, EX_OK);
    pr->self = q;
    return q;
}

Test(pool_poller, add_and_remove_check_their_arguments_and_the_room) {
    ex_pool *p = test_pool_new(1);
    ex_pool_poller *q = NULL, *all[EX_POOL_POLLERS_MAX];
    probe pr = { 0 };
    cr_expect_eq(ex_pool_poller_add(NULL, probe_poll, &pr, &q).code, EX_EINVAL);
    cr_expect_eq(ex_pool_poller_add(p, NULL, &pr, &q).code, EX_EINVAL);
    cr_expect_eq(ex_pool_poller_add(p, probe_poll, &pr, NULL).code, EX_EINVAL);
    cr_expect_eq(ex_pool_poller_remove(NULL).code, EX_EINVAL);
    for (int i = 0; i < EX_POOL_POLLERS_MAX; i++) cr_assert_eq(ex_pool_poller_add(p, probe_poll, &pr, &all[i]).code, EX_OK);
    ex_error e = ex_pool_poller_add(p, probe_poll, &pr, &q);
    cr_expect_eq(e.code, EX_EBUSY);
    cr_expect_null(q);
    ex_error_release(e);
    cr_expect_eq(ex_pool_poller_remove(all[3]).code, EX_OK);
    cr_expect_eq(ex_pool_poller_add(p, probe_poll, &pr, &q).code, EX_OK, "a removed poller's room is free again");
    cr_expect_eq(ex_pool_poller_remove(q).code, EX_OK);
    for (int i = 0; i < EX_POOL_POLLERS_MAX; i++)
        if (i != 3) cr_expect_eq(ex_pool_poller_remove(all[i]).code, EX_OK);
    cr_expect_eq(polls_of(&pr), 0u, "pollers never activated were polled");
    test_pool_free(p);
}

Test(pool_poller, the_scheduler_names_its_pool) {
    ex_pool *p = test_pool_new(1);
    cr_expect_eq(ex_pool_of_scheduler(ex_pool_scheduler(p)), p);
    cr_expect_null(ex_pool_of_scheduler(ex_inline_scheduler()));
    cr_expect_null(ex_pool_of_scheduler(ex_pool_scheduler(NULL)));
    test_pool_free(p);
}

Test(pool_poller, an_activation_from_outside_gets_polled_on_a_worker_until_idle) {
    ex_pool *p = test_pool_parked(2, -1);
    probe pr = { .idle_after = 5 };
    ex_pool_poller *q = add_probe(p, &pr);
    nap_us(2000);
    cr_expect_eq(polls_of(&pr), 0u, "an inactive poller was polled");
    ex_pool_poller_activate(q);
    cr_assert(wait_polls(&pr, 5), "polled %u times", polls_of(&pr));
    nap_us(5000);
    cr_expect_eq(polls_of(&pr), 5u, "polled after it said idle: %u", polls_of(&pr));
    cr_expect_eq(exi_load_acq_u32(&pr.off_pool), 0u, "a poll ran off the pool");
    cr_expect_eq(ex_pool_poller_remove(q).code, EX_OK);
    test_pool_free(p);
}

Test(pool_poller, a_pending_poller_on_an_idle_pool_is_polled_by_the_wake_up_timer) {
    ex_pool *p = test_pool_parked(2, -1);
    probe pr = { 0 };  /* pending for ever */
    ex_pool_poller *q = add_probe(p, &pr);
    ex_pool_poller_activate(q);
    cr_assert(wait_polls(&pr, 3));
    uint32_t before = polls_of(&pr);
    nap_us(20000);
    /* Backed off to at most one poll a millisecond or so, but never stops. */
    cr_expect_gt(polls_of(&pr), before, "a pending poller stopped being polled");
    cr_expect_eq(exi_load_acq_u32(&pr.overlap), 0u, "two polls of one poller overlapped");
    cr_expect_eq(ex_pool_poller_remove(q).code, EX_OK);
    uint32_t at_remove = polls_of(&pr);
    nap_us(5000);
    cr_expect_eq(polls_of(&pr), at_remove, "polled after remove returned");
    test_pool_free(p);
}

Test(pool_poller, an_activation_during_a_poll_keeps_it_active) {
    ex_pool *p = test_pool_parked(1, -1);
    /* The first poll activates again and says idle: the activation wins. */
    probe pr = { .idle_after = 1, .reactivate = 1 };
    ex_pool_poller *q = add_probe(p, &pr);
    ex_pool_poller_activate(q);
    cr_assert(wait_polls(&pr, 2), "the activation made during the poll was lost (%u polls)", polls_of(&pr));
    nap_us(3000);
    cr_expect_eq(polls_of(&pr), 2u);
    cr_expect_eq(ex_pool_poller_remove(q).code, EX_OK);
    test_pool_free(p);
}

Test(pool_poller, a_poll_may_remove_its_own_poller) {
    ex_pool *p = test_pool_new(2);
    probe pr = { .remove_inside = 3 };
    ex_pool_poller *q = add_probe(p, &pr);
    ex_pool_poller_activate(q);
    cr_assert(wait_polls(&pr, 3));
    nap_us(5000);
    cr_expect_eq(polls_of(&pr), 3u, "polled after removing itself");
    /* Its room is free again once that poll left. */
    ex_pool_poller *again = NULL;
    probe other = { 0 };
    for (int i = 0; i < 100 && !again; i++) {
        ex_error e = ex_pool_poller_add(p, probe_poll, &other, &again);
        ex_error_release(e);
        if (!again) nap_us(100);
    }
    cr_assert_not_null(again);
    cr_expect_eq(ex_pool_poller_remove(again).code, EX_OK);
    test_pool_free(p);
}

Test(pool_poller, remove_waits_for_a_poll_running_elsewhere) {
    ex_pool *p = test_pool_new(1);
    probe pr = { .sleep_us = 20000 };
    ex_pool_poller *q = add_probe(p, &pr);
    ex_pool_poller_activate(q);
    while (!exi_load_acq_u32(&pr.inside)) nap_us(50);
    cr_expect_eq(ex_pool_poller_remove(q).code, EX_OK);
    cr_expect_eq(exi_load_acq_u32(&pr.inside), 0u, "remove returned while the poll still ran");
    uint32_t at_remove = polls_of(&pr);
    nap_us(5000);
    cr_expect_eq(polls_of(&pr), at_remove);
    test_pool_free(p);
}

/* A sender whose start activates the poller and completes once the
 * poller's polls say so: what an MPI receive does. */
typedef struct polled_op {
    ex_operation base;
    ex_receiver r;
    probe *pr;
    uint32_t needed;
} polled_op;

typedef struct polled_sender {
    ex_sender base;
    probe *pr;
} polled_sender;

static polled_op *the_op;

static ex_poll_result completing_poll(void *ctx) {
    probe *pr = ctx;
    uint32_t k = exi_faa_u32(&pr->polls, 1) + 1;
    if (ex_pool_current_worker(pr->pool) < 0) (void)exi_faa_u32(&pr->off_pool, 1);
    pr->last_thread = pthread_self();
    polled_op *o = exi_load_acq_ptr((void *const *)&the_op);
    if (o && k >= o->needed) {
        exi_store_rel_ptr((void **)&the_op, NULL);
        ex_set_value(o->r, NULL, 0);
        return EX_POLL_IDLE;
    }
    return EX_POLL_PENDING;
}

static void polled_start(ex_operation *op) {
    polled_op *o = (polled_op *)op;
    exi_store_rel_ptr((void **)&the_op, o);
    ex_pool_poller_activate(o->pr->self);
}

static const ex_operation_vtable polled_op_vt = { polled_start, NULL };

static ex_error polled_connect(const ex_sender *s, ex_receiver r, void *storage) {
    polled_op *o = storage;
    o->base.vt = &polled_op_vt;
    o->r = r;
    o->pr = ((const polled_sender *)s)->pr;
    o->needed = 50;
    return ex_ok();
}

static const ex_sender_vtable polled_vt = { "polled", polled_connect, NULL, NULL, NULL };

Test(pool_poller, a_caller_waiting_in_sync_wait_polls_itself_and_wakes_nobody) {
    ex_pool *p = test_pool_parked(1, 1);
    probe pr = { 0 };
    pr.pool = p;
    cr_assert_eq(ex_pool_poller_add(p, completing_poll, &pr, &pr.self).code, EX_OK);
    uint64_t woken = test_pool_workers_woken(p);
    ex_sender *s = ex_sender_alloc(&polled_vt, sizeof(polled_sender));
    cr_assert_not_null(s);
    ((polled_sender *)s)->pr = &pr;
    s->op_size = sizeof(polled_op);
    s->op_align = _Alignof(polled_op);
    s->sigs = ex_sigs_none();
    (void)ex_sigs_add_value(&s->sigs, EX_SIG0);
    ex_result r = ex_sync_wait(s);
    cr_expect_eq(r.disposition, EX_DISP_VALUE);
    ex_result_destroy(&r);
    cr_expect(pthread_equal(pr.last_thread, pthread_self()), "the last poll ran on a worker, not on the waiting caller");
    cr_expect_eq(test_pool_workers_woken(p), woken, "a worker was woken to poll");
    cr_expect_eq(ex_pool_poller_remove(pr.self).code, EX_OK);
    test_pool_free(p);
}

/* Items keep one worker busy: it polls between them. */
static ex_poll_result counting_poll(void *ctx) {
    (void)exi_faa_u32(&((probe *)ctx)->polls, 1);
    return EX_POLL_PENDING;
}

static void spin_item(ex_work *w) {
    (void)w;
    int64_t t0 = ex_now();
    while (ex_now() - t0 < 20000) {}
}

Test(pool_poller, a_busy_worker_polls_between_its_items) {
    ex_pool *p = test_pool_new(1);
    probe pr = { 0 };
    pr.pool = p;
    ex_pool_poller *q = NULL;
    cr_assert_eq(ex_pool_poller_add(p, counting_poll, &pr, &q).code, EX_OK);
    enum { N = 400 };
    static ex_work items[N];
    ex_pool_poller_activate(q);
    for (int i = 0; i < N; i++) {
        items[i] = (ex_work){ NULL, spin_item, NULL };
        cr_assert_eq(ex_post(ex_pool_scheduler(p), &items[i]).code, EX_OK);
    }
    /* 400 items of 20 us: 8 ms of work, a poll every 4 us of it at most. */
    cr_assert(wait_polls(&pr, 20), "polls between items: %u", polls_of(&pr));
    cr_expect_eq(ex_pool_poller_remove(q).code, EX_OK);
    test_pool_free(p);
}
