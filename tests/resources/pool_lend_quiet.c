/* SPDX-License-Identifier: MIT */
/* pool_lend_quiet.c - the lent caller's quiet first item: it wakes nobody,
 * and a wait nested in the operation's start wakes a worker for it. */
#include <stdatomic.h>

#include "common/wait.h"
#include "resources/pool_fixtures.h"

typedef struct quiet_arg {
    ex_pool *pool, *other;
    atomic_int flag;
    atomic_int seen;
} quiet_arg;

static ex_error set_flag(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    atomic_store(&((quiet_arg *)ctx)->flag, 1);
    return ex_ok();
}

static bool flag_set(void *ctx) { return atomic_load(&((quiet_arg *)ctx)->flag) != 0; }

/* On the other pool (main lent to it): waits, bounded, for the first
 * pool's item, which only a worker of that pool can run now. */
static ex_error wait_for_flag(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    quiet_arg *a = ctx;
    atomic_store(&a->seen, test_wait_until(flag_set, a, NULL, TEST_WAIT_LIMIT_S) ? 1 : -1);
    return ex_ok();
}

/* Inline in the outer start, after the first child queued its item on
 * main's lent slot of pool: a nested sync_wait that waits for that item. */
static ex_error nested_wait(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    quiet_arg *a = ctx;
    ex_result r = ex_sync_wait(ex_then(ex_schedule(ex_pool_scheduler(a->other)), wait_for_flag, a, EX_SIG0, EX_SIG0));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    return ex_ok();
}

Test(exec_pool_lend, a_wait_nested_in_start_wakes_a_worker_for_the_quiet_item) {
    quiet_arg a = { .pool = test_pool_parked(2, 0), .other = test_pool_new(1) };
    ex_sender *first = ex_then(ex_schedule(ex_pool_scheduler(a.pool)), set_flag, &a, EX_SIG0, EX_SIG0);
    ex_sender *second = ex_then(ex_just(), nested_wait, &a, EX_SIG0, EX_SIG0);
    ex_result r = ex_sync_wait(ex_when_all(first, second));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_eq(atomic_load(&a.seen), 1, "the quiet item of the lent slot never ran while main waited");
    test_pool_free(a.other);
    test_pool_free(a.pool);
    expect_no_leaks();
}

Test(exec_pool_lend, the_first_item_of_a_lent_caller_wakes_nobody) {
    ex_pool *p = test_pool_parked(2, 0);
    ex_pool_worker_stats before = stats_sum(p);
    where w;
    run_where(p, &w);
    cr_assert_geq(w.worker, (int)ex_pool_size(p), "ran on worker %d, not on main's lent slot", w.worker);
    cr_assert(pthread_equal(w.tid, pthread_self()));
    cr_assert_eq(ex_pool_current_worker(p), -1, "main is an agent only while it runs the pool's items");
    /* Joined workers have counted every wake-up they got (shutdown's own
     * wake-up of all is not counted as woken: it claims no idle bit). */
    cr_assert_eq(ex_pool_shutdown(p).code, 0);
    ex_pool_worker_stats after = stats_sum(p);
    cr_assert_eq(after.woken, before.woken, "a worker was woken for an item the caller runs itself");
    cr_assert_eq(after.executed, before.executed + 1);
    test_pool_free(p);
    expect_no_leaks();
}

/* The wait ends before the caller ran its quiet item: an operation spawned
 * from inline work in start took main's lent slot (the item waits in the
 * slot's `next`), and sync_wait's own operation was done at once.  Close
 * hands the item to a worker (the workers are parked: nobody would steal
 * it), and the next lending of the slot starts empty. */
typedef struct spawn_arg {
    ex_pool *pool;
    ex_counting_scope scope;
    atomic_int ran;
    int spawn_code;
} spawn_arg;

static ex_error count_ran(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    atomic_fetch_add(&((spawn_arg *)ctx)->ran, 1);
    return ex_ok();
}

static ex_error spawn_on_pool(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    spawn_arg *a = ctx;
    ex_sender *s = ex_then(ex_schedule(ex_pool_scheduler(a->pool)), count_ran, a, EX_SIG0, EX_SIG0);
    a->spawn_code = ex_spawn(s, ex_counting_scope_token(&a->scope)).code;
    return ex_ok();
}

Test(exec_pool_lend, a_quiet_item_left_when_the_wait_ends_goes_to_a_worker) {
    spawn_arg a = { .pool = test_pool_parked(2, 0) };
    cr_assert_eq(ex_counting_scope_init(&a.scope).code, EX_OK);
    for (int round = 1; round <= 3; round++) {
        ex_result r = ex_sync_wait(ex_then(ex_just(), spawn_on_pool, &a, EX_SIG0, EX_SIG0));
        cr_assert_eq(r.disposition, EX_DISP_VALUE);
        cr_assert_eq(a.spawn_code, EX_OK);
        cr_assert(wait_int_equals(&a.ran, round), "round %d: the spawned item left in the lent slot never ran", round);
    }
    ex_result j = ex_sync_wait(ex_counting_scope_join(&a.scope));
    cr_assert_eq(j.disposition, EX_DISP_VALUE);
    cr_assert_eq(ex_counting_scope_destroy(&a.scope).code, EX_OK);
    test_pool_free(a.pool);
    expect_no_leaks();
}

/* A bulk's helper that its lent caller took back unrun says that a worker
 * counted awake was not looking: the next bulk wakes a parked one instead
 * of trusting the count.  Here the awake worker is busy in an item that
 * waits; on a machine it may be one queued behind the caller on the
 * caller's own CPU while the parked one sits on an idle CPU. */
typedef struct busy_item {
    ex_work work;
    atomic_int started, release;
} busy_item;

static bool busy_released(void *ctx) { return atomic_load(&((busy_item *)ctx)->release) != 0; }
static bool busy_started(void *ctx) { return atomic_load(&((busy_item *)ctx)->started) != 0; }

static void busy_run(ex_work *w) {
    busy_item *b = (busy_item *)w;
    atomic_store(&b->started, 1);
    cr_assert(test_wait_until(busy_released, b, NULL, TEST_WAIT_LIMIT_S), "the busy item was never released");
}

static ex_error count_chunk(void *ctx, size_t i, const ex_value *v, size_t n) {
    (void)i, (void)v, (void)n;
    atomic_fetch_add((atomic_int *)ctx, 1);
    return ex_ok();
}

typedef struct woken_arg {
    ex_pool *pool;
    uint64_t before;
} woken_arg;

static bool woken_since(void *ctx) {
    woken_arg *a = ctx;
    return test_pool_workers_woken(a->pool) > a->before;
}

Test(exec_pool_lend, helpers_taken_back_unrun_wake_a_parked_worker_next_time) {
    ex_pool *p = test_pool_parked(2, 0);
    busy_item b = { .work = { .execute = busy_run } };
    cr_assert_eq(ex_post(ex_pool_scheduler(p), &b.work).code, EX_OK);
    cr_assert(test_wait_until(busy_started, &b, NULL, TEST_WAIT_LIMIT_S), "no worker ran the busy item");
    woken_arg w = { p, test_pool_workers_woken(p) };
    atomic_int chunks = 0;
    /* One worker busy, one parked: counted awake, the busy one keeps the
     * first bulk from waking the parked one, and main runs both chunks,
     * taking its helper back unrun.  The second bulk must wake. */
    for (int round = 1; round <= 2; round++) {
        ex_sender *s = ex_bulk_grain(ex_schedule(ex_pool_scheduler(p)), EX_PAR, 2, 1, count_chunk, &chunks);
        ex_result r = ex_sync_wait(s);
        cr_assert_eq(r.disposition, EX_DISP_VALUE, "round %d", round);
        cr_assert_eq(atomic_load(&chunks), 2 * round, "round %d: every chunk ran once", round);
    }
    bool woken = test_wait_until(woken_since, &w, NULL, TEST_WAIT_LIMIT_S);
    atomic_store(&b.release, 1);
    cr_assert(woken, "after a bulk whose helper came back unrun, the next one woke no parked worker");
    test_pool_free(p);
    expect_no_leaks();
}
