/* SPDX-License-Identifier: MIT */
/* The pool's lent callers (cexec/pool.h, docs/pool.md "Lent callers"): a
 * thread outside the pool that waits in ex_sync_wait for the pool's work
 * takes a lent slot and runs that work itself; the number of such threads
 * is bounded by lend_slots; lent items may nest waits and post more work;
 * a held slot keeps destroy waiting; and the wait policy configuration.
 *
 * Where an item runs is made deterministic by parking every worker first
 * (wait_policy PASSIVE, one spin round): the first item of a lending wakes
 * nobody, so only the lent caller can run it. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/task_fixtures.h"
#include "resources/pool_fixtures.h"

TEST_SUITE(exec_pool_lend, 30);

/* ---------------------------------------------------------- fixtures */

static ex_pool_worker_stats slot_stats(ex_pool *p, unsigned i) {
    ex_pool_worker_stats st;
    ex_error e = ex_pool_worker_stats_get(p, i, &st);
    cr_assert_eq(e.code, 0, "ex_pool_worker_stats_get(%u): %s", i, e.msg ? e.msg : "");
    return st;
}


static bool is_lent_index(ex_pool *p, int i) {
    return i >= (int)ex_pool_size(p) && i < (int)(ex_pool_size(p) + ex_pool_lend_slots(p));
}

static ex_result sync_schedule_then(ex_pool *p, ex_then_fn fn, void *ctx) {
    return ex_sync_wait(ex_then(ex_schedule(ex_pool_scheduler(p)), fn, ctx, EX_SIG0, EX_SIG(EX_T_INT)));
}

static void expect_value(ex_result *r) {
    cr_assert_eq(r->disposition, EX_DISP_VALUE, "disposition %d (%s)", r->disposition,
                 r->error.msg ? r->error.msg : "");
    ex_result_destroy(r);
}

/* A work item that counts how it was settled and where it ran. */
typedef struct counted_work {
    ex_work work;
    ex_pool *pool;
    atomic_int ran, cancelled, worker;
} counted_work;

static void counted_run(ex_work *w) {
    counted_work *c = (counted_work *)w;
    atomic_store(&c->worker, ex_pool_current_worker(c->pool));
    atomic_fetch_add(&c->ran, 1);
}

static void counted_cancel(ex_work *w) { atomic_fetch_add(&((counted_work *)w)->cancelled, 1); }

static void counted_init(counted_work *c, ex_pool *p) {
    memset(c, 0, sizeof *c);
    c->work.execute = counted_run;
    c->work.cancel = counted_cancel;
    c->pool = p;
    atomic_store(&c->worker, -2);
}

/* ================================================= 1. the caller runs it */

Test(exec_pool_lend, sync_wait_from_main_runs_the_item_on_main_as_a_lent_agent) {
    ex_pool *p = test_pool_parked(2, 0);
    uint64_t woken0 = test_pool_workers_woken(p);
    where w;
    run_where(p, &w);
    cr_assert(pthread_equal(w.tid, pthread_self()), "the item ran on thread '%s', not on the waiting caller", w.name);
    cr_assert(is_lent_index(p, w.worker), "inside the item the caller is agent %d, not a lent slot", w.worker);
    cr_assert_eq(ex_pool_current_worker(p), -1, "the caller is still an agent of the pool after the wait");
    cr_assert_eq(slot_stats(p, (unsigned)w.worker).executed, 1u, "the lent slot did not count the item");
    cr_assert_eq(test_pool_workers_woken(p), woken0, "a worker was woken for the lent caller's own item");
    test_pool_free(p);
    expect_no_leaks();
}

/* ====================================== 2. lend_slots and its resolution */

Test(exec_pool_lend, lending_off_runs_the_item_on_a_worker) {
    ex_pool_config c = test_pool_passive_config(2, -1);
    ex_pool *p = test_pool_new_cfg(&c);
    cr_assert_eq(ex_pool_lend_slots(p), 0u);
    test_pool_wait_parked(p);
    where w;
    run_where(p, &w);
    cr_assert(!pthread_equal(w.tid, pthread_self()), "lending is off, yet the caller ran the item");
    cr_assert_geq(w.worker, 0);
    cr_assert_lt(w.worker, (int)ex_pool_size(p), "agent %d is not a worker", w.worker);
    test_pool_free(p);
    expect_no_leaks();
}

Test(exec_pool_lend, lend_slots_resolution_and_bounds) {
    ex_pool_config c = test_pool_config(2, "lend");
    ex_pool *p = test_pool_new_cfg(&c);
    cr_assert_eq(ex_pool_lend_slots(p), 2u, "default: as many lent slots as workers");
    test_pool_free(p);

    c.lend_slots = 3;
    p = test_pool_new_cfg(&c);
    cr_assert_eq(ex_pool_lend_slots(p), 3u);
    ex_pool_worker_stats st;
    cr_assert_eq(ex_pool_worker_stats_get(p, 4, &st).code, 0, "the last lent slot has counters");
    cr_assert_eq(ex_pool_worker_stats_get(p, 5, &st).code, EX_EINVAL);
    test_pool_free(p);

    c.lend_slots = -7;
    p = test_pool_new_cfg(&c);
    cr_assert_eq(ex_pool_lend_slots(p), 0u, "any negative count turns lending off");
    test_pool_free(p);

    c.lend_slots = 4097;
    ex_pool *bad = (ex_pool *)&c;
    ex_error e = ex_pool_create(&c, &bad);
    cr_assert_eq(e.code, EX_EINVAL, "4097 lent slots: %d", e.code);
    cr_assert_null(bad, "*out is not cleared on failure");
    cr_assert_eq(ex_pool_lend_slots(NULL), 0u);
    expect_no_leaks();
}

/* =================================================== 3. the bound holds */

typedef struct bound_state {
    ex_pool *pool;
    where a;           /* where A's item ran */
    where b;           /* where B's item ran */
    atomic_int b_disp; /* B's sync_wait disposition, -1 until it returned */
    atomic_int b_done;
    int b_done_seen;   /* A's item saw B done before returning */
    pthread_t b_thread;
    int b_started;
} bound_state;

/* Thread B: a sync_wait on the same pool while A holds the only slot. */
static void *bound_b_main(void *arg) {
    bound_state *s = arg;
    memset(&s->b, 0, sizeof s->b);
    s->b.pool = s->pool;
    s->b.worker = -2;
    ex_result r = sync_schedule_then(s->pool, where_fn, &s->b);
    atomic_store(&s->b_disp, (int)r.disposition);
    ex_result_destroy(&r);
    atomic_store(&s->b_done, 1);
    return NULL;
}

/* A's item, on A as the lent agent: starts B and waits for it to finish. */
static ex_error bound_a_item(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    bound_state *s = ctx;
    where_fn(&s->a, in, n, out);
    s->b_started = pthread_create(&s->b_thread, NULL, bound_b_main, s) == 0;
    if (s->b_started) s->b_done_seen = wait_int_equals(&s->b_done, 1);
    return ex_ok();
}

Test(exec_pool_lend, a_second_caller_finds_no_free_slot_and_its_item_runs_on_a_worker) {
    ex_pool *p = test_pool_parked(2, 1);
    bound_state s;
    memset(&s, 0, sizeof s);
    s.pool = p;
    s.a.pool = p;
    s.a.worker = -2;
    atomic_store(&s.b_disp, -1);
    ex_result r = sync_schedule_then(p, bound_a_item, &s);
    expect_value(&r);
    cr_assert(s.b_started, "pthread_create failed");
    cr_assert_eq(pthread_join(s.b_thread, NULL), 0);
    cr_assert(pthread_equal(s.a.tid, pthread_self()), "A's item did not run on A");
    cr_assert_eq(s.a.worker, (int)ex_pool_size(p), "A's item ran as agent %d, not in the only lent slot", s.a.worker);
    cr_assert(s.b_done_seen, "B's sync_wait did not complete while A held the slot");
    cr_assert_eq(atomic_load(&s.b_disp), EX_DISP_VALUE);
    cr_assert_eq(s.b.calls, 1);
    cr_assert(!pthread_equal(s.b.tid, s.b_thread), "B ran its item itself: it took a second slot");
    cr_assert_geq(s.b.worker, 0);
    cr_assert_lt(s.b.worker, (int)ex_pool_size(p), "B's item ran as agent %d, not on a worker", s.b.worker);
    test_pool_free(p);
    expect_no_leaks();
}

/* ====================================================== 4. nesting */

typedef struct nest_state {
    ex_pool *pool;
    int outer_worker;
    int inner_disp;
    int inner_worker;    /* the agent the inner item ran on */
    int after_worker;    /* the outer item's agent after the nested wait */
} nest_state;

static ex_error note_agent(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    nest_state *s = ctx;
    s->inner_worker = ex_pool_current_worker(s->pool);
    out[0] = ex_int(7);
    return ex_ok();
}

static ex_error nested_wait_item(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    nest_state *s = ctx;
    s->outer_worker = ex_pool_current_worker(s->pool);
    ex_result r = sync_schedule_then(s->pool, note_agent, s);
    s->inner_disp = (int)r.disposition;
    ex_result_destroy(&r);
    s->after_worker = ex_pool_current_worker(s->pool);
    out[0] = ex_int(1);
    return ex_ok();
}

Test(exec_pool_lend, a_lent_item_may_wait_for_more_of_the_pools_work) {
    ex_pool_config c = test_pool_passive_config(2, 0);
    ex_pool *p = test_pool_new_cfg(&c);
    for (int round = 0; round < 20; round++) {
        if (round == 0) test_pool_wait_parked(p);
        nest_state s = { .pool = p, .outer_worker = -2, .inner_disp = -1, .inner_worker = -2, .after_worker = -2 };
        ex_result r = sync_schedule_then(p, nested_wait_item, &s);
        expect_value(&r);
        if (round == 0) cr_assert(is_lent_index(p, s.outer_worker), "outer item on agent %d", s.outer_worker);
        cr_assert_eq(s.inner_disp, EX_DISP_VALUE, "round %d: nested wait gave %d", round, s.inner_disp);
        cr_assert_geq(s.inner_worker, 0, "round %d: the nested item ran off the pool", round);
        cr_assert_eq(s.after_worker, s.outer_worker, "round %d: the outer item changed agent", round);
        cr_assert_eq(ex_pool_current_worker(p), -1);
    }
    test_pool_free(p);
    expect_no_leaks();
}

enum { DETACHED = 64 };

typedef struct post_state {
    ex_pool *pool;
    counted_work items[DETACHED];
    int worker;
    int posted;
} post_state;

/* Posts DETACHED items it does not wait for, then returns. */
static ex_error posting_item(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    post_state *s = ctx;
    s->worker = ex_pool_current_worker(s->pool);
    for (int i = 0; i < DETACHED; i++)
        if (ex_post(ex_pool_scheduler(s->pool), &s->items[i].work).code == EX_OK) s->posted++;
    out[0] = ex_int(0);
    return ex_ok();
}

static atomic_int detached_ran;

static void detached_run(ex_work *w) {
    counted_run(w);
    atomic_fetch_add(&detached_ran, 1);
}

Test(exec_pool_lend, items_a_lent_item_posts_and_leaves_behind_run_exactly_once) {
    ex_pool *p = test_pool_parked(2, 0);
    post_state *s = calloc(1, sizeof *s);
    cr_assert_not_null(s);
    s->pool = p;
    s->worker = -2;
    atomic_store(&detached_ran, 0);
    for (int i = 0; i < DETACHED; i++) {
        counted_init(&s->items[i], p);
        s->items[i].work.execute = detached_run;
    }
    ex_result r = sync_schedule_then(p, posting_item, s);
    expect_value(&r);
    cr_assert(is_lent_index(p, s->worker), "the posting item ran on agent %d", s->worker);
    cr_assert_eq(s->posted, DETACHED, "a post from the lent item was refused");
    EXPECT_INT_REACHES(&detached_ran, DETACHED);
    test_pool_free(p);  /* after the join: nothing can run them again */
    for (int i = 0; i < DETACHED; i++) {
        cr_assert_eq(atomic_load(&s->items[i].ran), 1, "item %d ran %d times", i, atomic_load(&s->items[i].ran));
        cr_assert_eq(atomic_load(&s->items[i].cancelled), 0, "item %d was cancelled", i);
        /* Run by a worker (stolen or handed over at close), or by the
         * caller before it closed: never off the pool. */
        cr_assert_geq(atomic_load(&s->items[i].worker), 0, "item %d ran off the pool", i);
    }
    free(s);
    expect_no_leaks();
}

/* A then() on main, inside sync_wait but before any item of the pool ran:
 * its post is the thread's first submission, so it takes a lent slot (and
 * wakes a worker, which may steal it); the wait is over at once, so if the
 * worker has not taken it yet, close must hand it over. */
static ex_error post_one_detached(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    counted_work *c = ctx;
    out[0] = ex_int(ex_post(ex_pool_scheduler(c->pool), &c->work).code);
    return ex_ok();
}

Test(exec_pool_lend, an_item_left_in_the_slot_at_close_goes_to_a_worker) {
    ex_pool *p = test_pool_parked(2, 0);
    counted_work item;
    counted_init(&item, p);
    ex_result r = ex_sync_wait(ex_then(ex_just(), post_one_detached, &item, EX_SIG0, EX_SIG(EX_T_INT)));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_eq(r.values[0].as.i, EX_OK, "the post was refused");
    ex_result_destroy(&r);
    EXPECT_INT_REACHES(&item.ran, 1);
    test_pool_free(p);
    cr_assert_eq(atomic_load(&item.ran), 1);
    cr_assert_eq(atomic_load(&item.cancelled), 0);
    int w = atomic_load(&item.worker);
    cr_assert(w >= 0 && w < 2, "the left-over item ran as agent %d, not on a worker", w);
    expect_no_leaks();
}

/* ======================================== 5. shutdown and destroy races */

typedef struct destroy_race {
    ex_pool *pool;
    int item_worker;
    atomic_int destroyed;
    int destroy_code;
    int early;          /* the lent item saw destroy finish while it held the slot */
    pthread_t thread;
    int started;
} destroy_race;

static void *destroyer_main(void *arg) {
    destroy_race *d = arg;
    d->destroy_code = ex_pool_destroy(d->pool).code;
    atomic_store(&d->destroyed, 1);
    return NULL;
}

/* On main as the lent agent: destroy begins elsewhere, and must wait for
 * this slot to be given back. */
static ex_error item_racing_destroy(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    destroy_race *d = ctx;
    d->item_worker = ex_pool_current_worker(d->pool);
    /* On a worker, destroy would wait for this item: it would never end. */
    if (d->item_worker < (int)ex_pool_size(d->pool)) {
        out[0] = ex_int(3);
        return ex_ok();
    }
    d->started = pthread_create(&d->thread, NULL, destroyer_main, d) == 0;
    test_sleep_ms(20);  /* long enough for destroy to finish, were it not waiting */
    d->early = atomic_load(&d->destroyed);
    out[0] = ex_int(3);
    return ex_ok();
}

Test(exec_pool_lend, destroy_waits_for_a_held_lent_slot) {
    ex_pool *p = test_pool_parked(2, 0);
    int first_lent = (int)ex_pool_size(p);  /* p is freed by the end */
    destroy_race d;
    memset(&d, 0, sizeof d);
    d.pool = p;
    d.item_worker = -2;
    ex_result r = sync_schedule_then(p, item_racing_destroy, &d);
    expect_value(&r);
    cr_assert_eq(d.item_worker, first_lent, "the item ran as agent %d, not on main's lent slot", d.item_worker);
    cr_assert(d.started, "pthread_create failed");
    cr_assert_eq(pthread_join(d.thread, NULL), 0);
    cr_assert(!d.early, "destroy finished while the lent caller still held its slot");
    cr_assert(atomic_load(&d.destroyed));
    cr_assert_eq(d.destroy_code, EX_OK);
    expect_no_leaks();
}

typedef struct shutdown_race {
    ex_pool *pool;
    int item_worker;
    int shutdown_code;
    int joined;
    int post_code;
    counted_work late;
} shutdown_race;

static void *shutter_main(void *arg) {
    shutdown_race *s = arg;
    s->shutdown_code = ex_pool_shutdown(s->pool).code;
    return NULL;
}

/* On main as the lent agent: waits for a shutdown from another thread,
 * then posts. */
static ex_error item_posting_after_shutdown(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    shutdown_race *s = ctx;
    s->item_worker = ex_pool_current_worker(s->pool);
    /* On a worker, shutdown would wait for this item: it would never end. */
    if (s->item_worker < (int)ex_pool_size(s->pool)) goto out;
    pthread_t t;
    if (pthread_create(&t, NULL, shutter_main, s) == 0) s->joined = pthread_join(t, NULL) == 0;
    s->post_code = ex_post(ex_pool_scheduler(s->pool), &s->late.work).code;
out:
    out[0] = ex_int(4);
    return ex_ok();
}

Test(exec_pool_lend, a_lent_item_posting_after_shutdown_is_refused) {
    ex_pool *p = test_pool_parked(2, 0);
    shutdown_race s;
    memset(&s, 0, sizeof s);
    s.pool = p;
    s.item_worker = -2;
    s.post_code = -1;
    counted_init(&s.late, p);
    ex_result r = sync_schedule_then(p, item_posting_after_shutdown, &s);
    expect_value(&r);
    cr_assert(s.joined, "the shutdown thread did not run");
    cr_assert_eq(s.shutdown_code, EX_OK);
    cr_assert(is_lent_index(p, s.item_worker), "item ran as agent %d", s.item_worker);
    cr_assert_eq(s.post_code, EX_ESHUTDOWN, "post after shutdown gave %d", s.post_code);
    test_pool_free(p);
    cr_assert_eq(atomic_load(&s.late.ran), 0, "a refused item ran");
    cr_assert_eq(atomic_load(&s.late.cancelled), 0, "a refused item was cancelled");
    expect_no_leaks();
}

/* ======================================================= 6. wait policy */

/* ex_pool_create's error with the environment variable set to value. */
static int create_code_with_env(const char *var, const char *value, const ex_pool_config *c) {
    cr_assert_eq(setenv(var, value, 1), 0);
    ex_pool *p = NULL;
    ex_error e = ex_pool_create(c, &p);
    cr_assert_eq(unsetenv(var), 0);
    if (!e.code) {
        cr_assert_not_null(p);
        test_pool_free(p);
    } else {
        cr_assert_null(p);
    }
    return e.code;
}

Test(exec_pool_lend, wait_policy_from_the_environment) {
    ex_pool_config c = test_pool_config(1, "wp");
    cr_assert_eq(create_code_with_env("CEXEC_WAIT_POLICY", "bogus", &c), EX_EINVAL);
    cr_assert_eq(create_code_with_env("CEXEC_WAIT_POLICY", "passive", &c), EX_OK);
    cr_assert_eq(create_code_with_env("CEXEC_WAIT_POLICY", "active", &c), EX_OK);
    cr_assert_eq(create_code_with_env("CEXEC_WAIT_POLICY", "adaptive", &c), EX_OK);
    /* An explicit policy does not read the variable. */
    c.wait_policy = EX_POOL_WAIT_PASSIVE;
    cr_assert_eq(create_code_with_env("CEXEC_WAIT_POLICY", "bogus", &c), EX_OK);
    c.wait_policy = (ex_pool_wait_policy)42;
    cr_assert_eq(create_code_with_env("CEXEC_WAIT_POLICY", "passive", &c), EX_EINVAL, "unknown enum value");
    expect_no_leaks();
}

Test(exec_pool_lend, linger_bounds) {
    ex_pool_config c = test_pool_config(1, "lg");
    c.wait_policy = EX_POOL_WAIT_PASSIVE;  /* a valid linger that never lingers */
    c.linger_us = 10000001;
    ex_pool *p = NULL;
    cr_assert_eq(ex_pool_create(&c, &p).code, EX_EINVAL);
    cr_assert_null(p);
    c.linger_us = 10000000;
    p = test_pool_new_cfg(&c);
    test_pool_free(p);
    c.linger_us = 0;
    cr_assert_eq(create_code_with_env("CEXEC_LINGER_US", "abc", &c), EX_EINVAL);
    cr_assert_eq(create_code_with_env("CEXEC_LINGER_US", "12x", &c), EX_EINVAL);
    cr_assert_eq(create_code_with_env("CEXEC_LINGER_US", "-1", &c), EX_EINVAL);
    cr_assert_eq(create_code_with_env("CEXEC_LINGER_US", "10000001", &c), EX_EINVAL);
    cr_assert_eq(create_code_with_env("CEXEC_LINGER_US", "500", &c), EX_OK);
    /* An explicit linger does not read the variable. */
    c.linger_us = 5;
    cr_assert_eq(create_code_with_env("CEXEC_LINGER_US", "abc", &c), EX_OK);
    expect_no_leaks();
}

Test(exec_pool_lend, active_workers_never_park_passive_ones_do) {
    ex_pool_config c = test_pool_config(2, "act");
    c.wait_policy = EX_POOL_WAIT_ACTIVE;
    c.spin_rounds = 1;
    ex_pool *p = test_pool_new_cfg(&c);
    where w;
    run_where(p, &w);
    test_sleep_ms(50);
    for (unsigned i = 0; i < ex_pool_size(p); i++)
        cr_assert_eq(slot_stats(p, i).parked, 0u, "active worker %u parked", i);
    test_pool_free(p);

    c = test_pool_passive_config(2, 0);
    p = test_pool_new_cfg(&c);
    test_pool_wait_parked(p);
    test_pool_free(p);
    expect_no_leaks();
}

/* ======================================== 7. a forking task on main */

enum { FIB_N = 14, FIB_VALUE = 377 };

static ex_pool *fib_pool;
static atomic_int fib_root_worker = -2;
static atomic_int fib_on_main;
static pthread_t fib_main;

static ex_task_result fib_task(ex_task *t, void *arg) {
    long n = (long)(intptr_t)arg;
    if (n < 2) return ex_task_i64(n);
    ex_await_result r = ex_await(t, ex_when_all(ex_task_create(fib_task, (void *)(intptr_t)(n - 1), NULL),
                                                ex_task_create(fib_task, (void *)(intptr_t)(n - 2), NULL)));
    TCHECK(r.status == EX_AWAIT_VALUE && r.n == 2);
    if (r.status != EX_AWAIT_VALUE || r.n != 2) return ex_task_i64(-1000000);
    return ex_task_i64(r.v[0].as.i + r.v[1].as.i);
}

static ex_task_result fib_root(ex_task *t, void *arg) {
    atomic_store(&fib_root_worker, ex_pool_current_worker(fib_pool));
    atomic_store(&fib_on_main, pthread_equal(pthread_self(), fib_main));
    return fib_task(t, arg);
}

/* The task on the pool: through starts_on (its schedule item runs on the
 * lent caller, whose task start then posts the body with a wake-up: the
 * body may run on either), or with the pool as its receiver's scheduler
 * (its start posts from main: the body's first run is on main's slot). */
static ex_sender *fib_sender(bool starts_on) {
    ex_sender *task = ex_task_create(fib_root, (void *)(intptr_t)FIB_N, NULL);
    ex_scheduler sch = ex_pool_scheduler(fib_pool);
    if (starts_on) return ex_starts_on(sch, task);
    return ex_write_env(task, &ex_key_get_scheduler, ex_sched_value(sch));
}

static void run_fib_rounds(bool starts_on) {
    ex_pool_config c = test_pool_passive_config(2, 0);
    fib_pool = test_pool_new_cfg(&c);
    fib_main = pthread_self();
    for (int round = 0; round < 5; round++) {
        if (round == 0) test_pool_wait_parked(fib_pool);
        atomic_store(&fib_root_worker, -2);
        ex_result r = ex_sync_wait(fib_sender(starts_on));
        cr_assert_eq(r.disposition, EX_DISP_VALUE, "round %d: disposition %d (%s)", round, r.disposition,
                     r.error.msg ? r.error.msg : "");
        cr_assert_eq(r.n, 1);
        cr_assert_eq(r.values[0].as.i, FIB_VALUE, "round %d: fib(%d) = %lld", round, FIB_N,
                     (long long)r.values[0].as.i);
        ex_result_destroy(&r);
        int root = atomic_load(&fib_root_worker);
        cr_assert_geq(root, 0, "round %d: the root task ran off the pool", round);
        if (round == 0 && !starts_on) {
            cr_assert(atomic_load(&fib_on_main), "the root task did not start on the waiting main thread (agent %d)", root);
            cr_assert(is_lent_index(fib_pool, root), "root task on agent %d", root);
        }
        cr_assert_eq(ex_pool_current_worker(fib_pool), -1);
    }
    EXPECT_PROBE();
    test_pool_free(fib_pool);
    expect_no_leaks();
}

Test(exec_pool_lend, a_forking_task_started_on_the_pool_from_main_completes) { run_fib_rounds(true); }

Test(exec_pool_lend, a_forking_task_whose_scheduler_is_the_pool_starts_on_main) { run_fib_rounds(false); }

/* ===================== a caller that blocks or destroys while it lends */

/* Both deadlocked on 985c2da: a thread that took a lent slot outside any
 * pool item (a post from a then() that sync_wait's start runs inline)
 * holds it until its wait ends, and nobody was woken for its first item.
 * A post now wakes a worker even when it takes a slot, and destroy from a
 * thread holding a slot of the pool is EX_EBUSY. */

typedef struct blocking_state {
    ex_pool *pool;
    counted_work item;
    int post_code;
    int ran_in_time;      /* the item ran while the poster waited for it */
    int destroy_code;
    atomic_int done;
} blocking_state;

/* Posts, then blocks (bounded) until the item has run elsewhere. */
static ex_error post_then_block(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    blocking_state *s = ctx;
    s->post_code = ex_post(ex_pool_scheduler(s->pool), &s->item.work).code;
    s->ran_in_time = wait_int_equals(&s->item.ran, 1);
    out[0] = ex_int(0);
    return ex_ok();
}

Test(exec_pool_lend, a_caller_blocking_on_an_item_it_posted_inline_is_not_deadlocked) {
    ex_pool *p = test_pool_parked(2, 0);
    blocking_state s;
    memset(&s, 0, sizeof s);
    s.pool = p;
    counted_init(&s.item, p);
    ex_result r = ex_sync_wait(ex_then(ex_just(), post_then_block, &s, EX_SIG0, EX_SIG(EX_T_INT)));
    expect_value(&r);
    cr_assert_eq(s.post_code, EX_OK);
    cr_assert(s.ran_in_time, "the posted item sat in the poster's lent slot, no worker woken, while it blocked");
    test_pool_free(p);
    expect_no_leaks();
}

/* Posts (taking a lent slot), then destroys the pool. */
static ex_error post_then_destroy(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    blocking_state *s = ctx;
    s->post_code = ex_post(ex_pool_scheduler(s->pool), &s->item.work).code;
    s->destroy_code = ex_pool_destroy(s->pool).code;
    out[0] = ex_int(0);
    return ex_ok();
}

static void *post_then_destroy_main(void *arg) {
    blocking_state *s = arg;
    ex_result r = ex_sync_wait(ex_then(ex_just(), post_then_destroy, s, EX_SIG0, EX_SIG(EX_T_INT)));
    ex_result_destroy(&r);
    atomic_store(&s->done, 1);
    return NULL;
}

Test(exec_pool_lend, destroy_from_a_thread_holding_a_lent_slot_is_ebusy_not_a_deadlock) {
    ex_pool_config c = test_pool_passive_config(2, 0);
    blocking_state s;
    memset(&s, 0, sizeof s);
    s.pool = test_pool_new_cfg(&c);
    counted_init(&s.item, s.pool);
    pthread_t t;  /* on a thread: a deadlock fails the bounded wait instead of hanging the test */
    cr_assert_eq(pthread_create(&t, NULL, post_then_destroy_main, &s), 0);
    cr_assert(wait_int_equals(&s.done, 1), "destroy waits for the lent slot its own thread holds");
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(s.post_code, EX_OK);
    cr_assert_eq(s.destroy_code, EX_EBUSY, "destroy from a thread lending itself to the pool: %d", s.destroy_code);
    test_pool_free(s.pool);  /* from here, with the slot given back */
    cr_assert_eq(atomic_load(&s.item.ran) + atomic_load(&s.item.cancelled), 1, "the item was not settled once");
    expect_no_leaks();
}
