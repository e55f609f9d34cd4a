/* SPDX-License-Identifier: MIT */
/* [task] fork scheduling: a queued child is stolen, a child that saw its
 * token stopped forks no child, a queued resumption is never run as a new
 * start, and children held back by lazy splitting start when a sibling
 * waits for them (exec_task_fork suite, see fork_values.c). */
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "task/local_fixtures.h"

/* ------------------------------------------- a queued child is stolen */

static ex_task_result j_first(ex_task *t, void *arg) {
    (void)t, (void)arg;
    atomic_store(&FS.worker[0], ex_pool_current_worker(FS.pool));
    atomic_store(&FS.started0, 1);
    return ex_task_i64(100);
}

/* The last child (runs at once, nested, on the parent's worker): holds
 * that worker until child 0 has started elsewhere. */
static ex_task_result j_last(ex_task *t, void *arg) {
    (void)t, (void)arg;
    atomic_store(&FS.worker[1], ex_pool_current_worker(FS.pool));
    double deadline = test_now_s() + 5.0;
    while (!atomic_load(&FS.started0) && test_now_s() < deadline) sched_yield();
    TCHECK(atomic_load(&FS.started0));
    return ex_task_i64(200);
}

static ex_task_result j_parent(ex_task *t, void *arg) {
    (void)arg;
    atomic_store(&FS.worker[2], ex_pool_current_worker(FS.pool));
    ex_await_result r = ex_await(t, ex_when_all(ex_task_create(j_first, NULL, NULL), ex_task_create(j_last, NULL, NULL)));
    atomic_store(&FS.worker[3], ex_pool_current_worker(FS.pool));
    return pass_on(r);
}

Test(exec_task_fork, a_queued_child_is_stolen_and_the_parent_resumes_on_the_pool) {
    use_pool(2);
    for (int round = 0; round < 10; round++) {
        reset_state();
        for (int i = 0; i < 4; i++) atomic_store(&FS.worker[i], -2);
        ex_result r = run_on_pool(ex_task_create(j_parent, NULL, NULL));
        expect_disp(&r, EX_DISP_VALUE);
        cr_assert_eq(r.n, 2);
        cr_assert_eq(r.values[0].as.i, 100);
        cr_assert_eq(r.values[1].as.i, 200);
        int w0 = atomic_load(&FS.worker[0]), w1 = atomic_load(&FS.worker[1]);
        cr_assert(w0 >= 0 && w1 >= 0, "children off the pool: %d %d", w0, w1);
        cr_assert_neq(w0, w1, "child 0 was not stolen: both ran on worker %d", w0);
        cr_assert_eq(w1, atomic_load(&FS.worker[2]), "the last child did not run where its parent started the fork");
        cr_assert_geq(atomic_load(&FS.worker[3]), 0, "the parent resumed off the pool");
        ex_result_destroy(&r);
    }
    task_test_end(FS.pool, NULL);
}

/* ------------------- a child that saw its token stopped, then forks */

/* The stop flag of a fork's source becomes visible before the request's
 * count of completed requests moves (src/core/exi_lazy_stop.h): a child
 * that sees the flag in that window and forks must still find the stop.
 * The hook widens the window: the
 * requesting thread waits there until the child's fork has given its
 * result. */
static atomic_int k_forked;
extern void (*exi_stop_counted_hook)(void);  /* src/core/stop_token.c, for tests */

static void k_widen(void) {
    double deadline = test_now_s() + 5.0;
    while (!atomic_load(&k_forked) && test_now_s() < deadline) sched_yield();
}

/* Child 0: stolen by the other worker, fails once the last child runs. */
static ex_task_result k_failing(ex_task *t, void *arg) {
    (void)t, (void)arg;
    atomic_store(&FS.started0, 1);
    return ex_task_with_error(ex_err(EX_EUSER + 11, "k: child 0 fails"));
}

/* The last child: waits until child 0 started elsewhere and its error has
 * set the fork's stop flag, then forks. */
static ex_task_result k_watching(ex_task *t, void *arg) {
    (void)arg;
    double deadline = test_now_s() + 5.0;
    while (!atomic_load(&FS.started0) && test_now_s() < deadline) sched_yield();
    TCHECK(atomic_load(&FS.started0));
    ex_stop_token tok = ex_task_stop_token(t);
    while (!ex_stop_token_stop_requested(tok) && test_now_s() < deadline) sched_yield();
    TCHECK(ex_stop_token_stop_requested(tok));
    ex_await_result r = ex_await(t, ex_when_all(ex_task_create(child_value, (void *)2, NULL),
                                                ex_task_create(child_value, (void *)3, NULL)));
    atomic_store(&FS.status, (int)r.status);
    atomic_store(&k_forked, 1);
    return pass_on(r);
}

static ex_task_result k_parent(ex_task *t, void *arg) {
    (void)arg;
    return pass_on(ex_await(t, ex_when_all(ex_task_create(k_failing, NULL, NULL),
                                           ex_task_create(k_watching, NULL, NULL))));
}

Test(exec_task_fork, a_child_that_saw_its_token_stopped_forks_no_child) {
    use_pool(2);
    exi_stop_counted_hook = k_widen;
    for (int round = 0; round < 5; round++) {
        reset_state();
        atomic_store(&k_forked, 0);
        ex_result r = run_on_pool(ex_task_create(k_parent, NULL, NULL));
        expect_disp(&r, EX_DISP_ERROR);
        cr_assert_eq(r.error.code, EX_EUSER + 11);
        cr_assert_eq(atomic_load(&FS.status), EX_AWAIT_STOPPED, "round %d: the fork after the stop gave %d", round,
                     atomic_load(&FS.status));
        cr_assert_eq(atomic_load(&FS.runs[2]) + atomic_load(&FS.runs[3]), 0, "round %d: its children ran", round);
        ex_result_destroy(&r);
    }
    exi_stop_counted_hook = NULL;
    task_test_end(FS.pool, NULL);
}

/* ---------------------- a resumption queued by a dispatch that posts */

/* A scheduler may implement dispatch as post (it is allowed never to run
 * inline).  A child suspended in an await is then resumed through the
 * worker's deque, where its parent, helping before it suspends, finds the
 * item: only children that have not started may run nested there. */
static ex_scheduler_vtable posting_vt;
static ex_error posting_dispatch(void *self, ex_work *w) { return posting_vt.post(self, w); }

static test_gate q_the_gate;

/* A child that counts its run in FS.runs[run_index], suspends on gate g
 * and returns result. */
typedef struct gate_child {
    test_gate *g;
    int run_index;
    int64_t result;
} gate_child;

static ex_task_result child_waiting_on_gate(ex_task *t, void *arg) {
    const gate_child *c = arg;
    atomic_fetch_add(&FS.runs[c->run_index], 1);
    ex_await_result r = ex_await(t, test_gate_sender(c->g));
    TCHECK(r.status == EX_AWAIT_VALUE);
    return ex_task_i64(c->result);
}

/* Child 0 (stolen): suspends on the gate. */
static const gate_child q_waiting = { &q_the_gate, 0, 1 };

/* The last child, on the parent's worker: opens the gate once child 0 is
 * suspended on it, which queues child 0's resumption on this worker. */
static ex_task_result q_opening(ex_task *t, void *arg) {
    (void)t, (void)arg;
    bool started = test_gate_wait_started(&q_the_gate);
    TCHECK(started);
    if (!started) return ex_task_i64(-1);
    /* Child 0's carrier publishes SUSPENDED after its switch; opening
     * before that resumes it without the queue (also correct, no check). */
    for (int i = 0; i < 2000; i++) sched_yield();
    test_gate_open(&q_the_gate, 0);
    return ex_task_i64(2);
}

static ex_task_result q_parent(ex_task *t, void *arg) {
    (void)arg;
    return pass_on(ex_await(t, ex_when_all(ex_task_create(child_waiting_on_gate, (void *)&q_waiting, NULL),
                                           ex_task_create(q_opening, NULL, NULL))));
}

Test(exec_task_fork, a_childs_queued_resumption_is_never_run_nested_as_a_new_start) {
    use_pool(2);
    ex_scheduler ps = ex_pool_scheduler(FS.pool);
    posting_vt = *ps.vt;
    posting_vt.name = "pool, dispatch posts";
    posting_vt.dispatch = posting_dispatch;
    ex_scheduler posting = { &posting_vt, ps.self };
    for (int round = 0; round < 10; round++) {
        reset_state();
        test_gate_init(&q_the_gate);
        ex_result r = ex_sync_wait(ex_starts_on(posting, ex_task_create(q_parent, NULL, NULL)));
        expect_disp(&r, EX_DISP_VALUE);
        cr_assert_eq(r.n, 2);
        cr_assert_eq(r.values[0].as.i, 1);
        cr_assert_eq(r.values[1].as.i, 2);
        cr_assert_eq(atomic_load(&FS.runs[0]), 1, "round %d: child 0's body ran %d times", round,
                     atomic_load(&FS.runs[0]));
        ex_result_destroy(&r);
    }
    task_test_end(FS.pool, NULL);
}

/* --------------- children held back by a fork and a sibling that waits */

/* A fork whose worker already holds queued work runs its children nested
 * one after the other instead of queueing them (lazy splitting).  A child
 * that waits for a sibling (here: the last child, which runs first, waits
 * on a gate child 0 opens) must not stop that sibling from starting: when
 * the stack switches away, the children held back are queued. */
static test_gate lz_gate;

static ex_task_result lz_filler(ex_task *t, void *arg) {
    (void)t;
    atomic_fetch_add(&FS.runs[(intptr_t)arg & 15], 1);
    return ex_task_void();
}

/* Child 0 of the inner fork: opens the gate its sibling waits on. */
static ex_task_result lz_opener(ex_task *t, void *arg) {
    (void)t, (void)arg;
    atomic_fetch_add(&FS.runs[4], 1);
    bool started = test_gate_wait_started(&lz_gate);
    TCHECK(started);
    if (started) test_gate_open(&lz_gate, 0);
    return ex_task_i64(4);
}

/* The inner fork's last child (runs first): waits on the gate. */
static const gate_child lz_waiter = { &lz_gate, 5, 5 };

/* Runs after the outer fork queued two fillers on this worker. */
static ex_task_result lz_middle(ex_task *t, void *arg) {
    (void)arg;
    return pass_on(ex_await(t, ex_when_all(ex_task_create(lz_opener, NULL, NULL),
                                           ex_task_create(child_waiting_on_gate, (void *)&lz_waiter, NULL))));
}

static ex_task_result lz_root(ex_task *t, void *arg) {
    (void)arg;
    return pass_on(ex_await(t, ex_when_all(ex_task_create(lz_filler, (void *)1, NULL),
                                           ex_task_create(lz_filler, (void *)2, NULL),
                                           ex_task_create(lz_middle, NULL, NULL))));
}

Test(exec_task_fork, a_child_held_back_starts_when_its_sibling_waits_for_it) {
    for (unsigned workers = 1; workers <= 2; workers++) {
        use_pool(workers);
        for (int round = 0; round < 20; round++) {
            reset_state();
            test_gate_init(&lz_gate);
            ex_result r = run_on_pool(ex_task_create(lz_root, NULL, NULL));
            expect_disp(&r, EX_DISP_VALUE);
            cr_assert_eq(r.n, 2, "%u workers, round %d: %zu values", workers, round, r.n);
            cr_assert_eq(r.values[0].as.i, 4);
            cr_assert_eq(r.values[1].as.i, 5);
            for (int i = 1; i <= 5; i++)
                if (i != 3) cr_assert_eq(atomic_load(&FS.runs[i]), 1, "child %d ran %d times", i, atomic_load(&FS.runs[i]));
            ex_result_destroy(&r);
        }
        drop_pool();
    }
    task_test_end(NULL, NULL);
}
