/* SPDX-License-Identifier: MIT */
/* pool_lend_takeback.c - a lent caller whose slot is empty takes back work
 * that descends from its own items (queued by a worker that stole one of
 * them), and never work that does not (docs/pool.md, "Isolation"). */
#include <stdatomic.h>

#include "common/wait.h"
#include "resources/pool_fixtures.h"

/* An item that notes the agent it ran on. */
typedef struct noted_work {
    ex_work work;
    ex_pool *pool;
    atomic_int ran, agent;
} noted_work;

static void noted_run(ex_work *w) {
    noted_work *t = (noted_work *)w;
    atomic_store(&t->agent, ex_pool_current_worker(t->pool));
    atomic_store(&t->ran, 1);
}

static void noted_init(noted_work *t, ex_pool *p) {
    t->work = (ex_work){ .execute = noted_run };
    t->pool = p;
    atomic_store(&t->ran, 0);
    atomic_store(&t->agent, -2);
}

static bool is_lent(ex_pool *p, int agent) { return agent >= (int)ex_pool_size(p); }

/* ------------------------------------------------- taking back its own */

typedef struct fork_arg {
    ex_pool *pool;
    noted_work child;        /* queued by whichever item runs on the worker */
    atomic_int child_queued;
    atomic_int child_waited; /* 1: the worker's item saw the child run; -1: gave up */
} fork_arg;

static bool child_queued(void *ctx) { return atomic_load(&((fork_arg *)ctx)->child_queued) != 0; }
static bool child_ran(void *ctx) { return atomic_load(&((fork_arg *)ctx)->child.ran) != 0; }

/* Two of these are forked from main.  The one a worker runs queues a child
 * on that worker's deque and waits for it; the one main runs waits until
 * the child is queued and returns, leaving main's slot empty while its wait
 * goes on.  With one worker, busy waiting, only main can run the child. */
static ex_error fork_half(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    fork_arg *a = ctx;
    if (is_lent(a->pool, ex_pool_current_worker(a->pool))) {
        cr_assert(test_wait_until(child_queued, a, NULL, TEST_WAIT_LIMIT_S), "the worker never took its half");
        return ex_ok();
    }
    cr_assert_eq(ex_post(ex_pool_scheduler(a->pool), &a->child.work).code, EX_OK);
    atomic_store(&a->child_queued, 1);
    /* Bounded: without the take-back the child would run only after this
     * wait gives up, on this worker. */
    atomic_store(&a->child_waited, test_wait_until(child_ran, a, NULL, 5.0) ? 1 : -1);
    return ex_ok();
}

Test(exec_pool_lend, a_lent_caller_takes_back_work_its_thief_queued) {
    ex_pool *p = test_pool_parked(1, 0);
    for (int round = 0; round < 10; round++) {
        fork_arg a = { .pool = p };
        noted_init(&a.child, p);
        ex_sender *one = ex_then(ex_schedule(ex_pool_scheduler(p)), fork_half, &a, EX_SIG0, EX_SIG0);
        ex_sender *two = ex_then(ex_schedule(ex_pool_scheduler(p)), fork_half, &a, EX_SIG0, EX_SIG0);
        ex_result r = ex_sync_wait(ex_when_all(one, two));
        cr_assert_eq(r.disposition, EX_DISP_VALUE, "round %d: %s", round, r.error.msg ? r.error.msg : "stopped");
        ex_result_destroy(&r);
        cr_assert_eq(atomic_load(&a.child_waited), 1, "round %d: nobody ran the child while its worker waited", round);
        int agent = atomic_load(&a.child.agent);
        cr_assert(is_lent(p, agent), "round %d: the child ran on agent %d, not on main's lent slot", round, agent);
    }
    test_pool_free(p);
    expect_no_leaks();
}

/* ------------------------------------------------- leaving others' alone */

typedef struct apart_arg {
    ex_pool *pool;
    noted_work unrelated;    /* queued by an item posted from outside */
    atomic_int unrelated_queued, main_done, outside_done;
} apart_arg;

static bool unrelated_queued(void *ctx) { return atomic_load(&((apart_arg *)ctx)->unrelated_queued) != 0; }
static bool main_done(void *ctx) { return atomic_load(&((apart_arg *)ctx)->main_done) != 0; }

typedef struct outside_work {
    ex_work work;
    apart_arg *arg;
} outside_work;

/* Posted from main before its wait: occupies the one worker, queues an item
 * on its deque, and holds on until main's wait is over. */
static void outside_item(ex_work *w) {
    apart_arg *a = ((outside_work *)w)->arg;
    cr_assert_eq(ex_post(ex_pool_scheduler(a->pool), &a->unrelated.work).code, EX_OK);
    atomic_store(&a->unrelated_queued, 1);
    (void)test_wait_until(main_done, a, NULL, TEST_WAIT_LIMIT_S);
    atomic_store(&a->outside_done, 1);  /* its last access to a */
}

static ex_error nothing(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)in, (void)n, (void)out;
    return ex_ok();
}

static ex_error nap(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)in, (void)n, (void)out;
    test_sleep_ms(20);  /* main, its slot empty, looks for work meanwhile */
    return ex_ok();
}

Test(exec_pool_lend, a_lent_caller_leaves_work_that_is_not_its_own) {
    ex_pool *p = test_pool_parked(1, 0);
    ex_single_thread_context other;
    cr_assert_eq(ex_single_thread_context_init(&other).code, EX_OK);
    for (int round = 0; round < 5; round++) {
        apart_arg a = { .pool = p };
        noted_init(&a.unrelated, p);
        outside_work u = { .work = { .execute = outside_item }, .arg = &a };
        cr_assert_eq(ex_post(ex_pool_scheduler(p), &u.work).code, EX_OK);
        cr_assert(test_wait_until(unrelated_queued, &a, NULL, TEST_WAIT_LIMIT_S));
        /* main lends itself for the first child and then waits, its slot
         * empty, for the second, which another thread runs. */
        ex_sender *mine = ex_then(ex_schedule(ex_pool_scheduler(p)), nothing, NULL, EX_SIG0, EX_SIG0);
        ex_sender *elsewhere = ex_then(ex_schedule(ex_single_thread_context_scheduler(&other)), nap, NULL, EX_SIG0, EX_SIG0);
        ex_result r = ex_sync_wait(ex_when_all(mine, elsewhere));
        cr_assert_eq(r.disposition, EX_DISP_VALUE);
        ex_result_destroy(&r);
        atomic_store(&a.main_done, 1);
        EXPECT_INT_REACHES(&a.outside_done, 1);
        EXPECT_INT_REACHES(&a.unrelated.ran, 1);
        int agent = atomic_load(&a.unrelated.agent);
        cr_assert_eq(agent, 0, "round %d: unrelated work ran on agent %d, not on the worker that queued it", round, agent);
    }
    cr_assert_eq(ex_single_thread_context_destroy(&other).code, EX_OK);
    test_pool_free(p);
    expect_no_leaks();
}
