/* SPDX-License-Identifier: MIT */
/* [task] fork stop: the first error (or stopped) of a fork's children
 * wins and requests stop on the fork's own source, which the siblings see;
 * a stop request on the awaiting task's token is forwarded; stop requested
 * before the await starts runs no child and gives EX_AWAIT_STOPPED, also
 * for nested forks, which link their source to the fork above only on
 * demand and answer the start check from a global epoch of fork stop
 * requests (exec_task_fork suite, see fork_values.c). */
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "task/local_fixtures.h"

/* task on the pool with src's token as its receiver's stop token. */
static ex_result run_on_pool_with_stop(ex_sender *task, ex_stop_source *src) {
    ex_sender *w = ex_write_env(task, &ex_key_get_stop_token, ex_token_value(ex_stop_source_token(src)));
    return ex_sync_wait(ex_starts_on(ex_pool_scheduler(FS.pool), w));
}

/* A thread that, once *counter reaches target (bounded wait), requests
 * stop on src and then sets *go (if any). */
typedef struct stopper {
    pthread_t thread;
    atomic_int *counter;
    int target;
    long settle_ms;            /* sleep between seeing the target and the request */
    ex_stop_source *src;
    atomic_int *go;
    atomic_int reached;        /* the target was seen in time */
} stopper;

static void *stopper_main(void *p) {
    stopper *s = p;
    double deadline = test_now_s() + 20.0;
    while (atomic_load(s->counter) < s->target && test_now_s() < deadline) test_sleep_ms(1);
    atomic_store(&s->reached, atomic_load(s->counter) >= s->target);
    if (s->settle_ms) test_sleep_ms(s->settle_ms);
    ex_stop_source_request_stop(s->src);  /* requested even on a timeout: nothing hangs */
    if (s->go) atomic_store(s->go, 1);
    return NULL;
}

static void stopper_start(stopper *s, atomic_int *counter, int target, ex_stop_source *src, atomic_int *go) {
    memset(s, 0, sizeof *s);
    s->counter = counter;
    s->target = target;
    s->settle_ms = 5;
    s->src = src;
    s->go = go;
    cr_assert_eq(pthread_create(&s->thread, NULL, stopper_main, s), 0);
}

static void stopper_join(stopper *s) { cr_assert_eq(pthread_join(s->thread, NULL), 0); }

/* ------------------------------------------- the first error wins */

/* Child i, about to wait for a stop, counts its run and that it waits. */
static void note_waiting(int i) {
    atomic_fetch_add(&FS.runs[i], 1);
    atomic_fetch_add(&FS.waiting, 1);
}

/* Yields (bounded) until `count` siblings wait for a stop. */
static void yield_until_waiting(ex_task *t, int count) {
    double deadline = test_now_s() + 20.0;
    while (atomic_load(&FS.waiting) < count && test_now_s() < deadline) TCHECK(ex_task_yield(t).code == 0);
    TCHECK(atomic_load(&FS.waiting) == count);
}

/* Child 0: waits for a stop. */
static ex_task_result b_waiter(ex_task *t, void *arg) {
    (void)arg;
    note_waiting(0);
    ex_await_result r = ex_await(t, until_stopped());
    TCHECK(r.status == EX_AWAIT_STOPPED);
    if (r.status == EX_AWAIT_STOPPED) atomic_fetch_add(&FS.stops[0], 1);
    TCHECK(ex_stop_token_stop_requested(ex_task_stop_token(t)));
    TCHECK(ex_task_is_stopped(t));
    return ex_task_i64(0);  /* ignored: the task completes stopped */
}

/* Child 1: waits for a stop too, then fails: a second error, which must
 * not replace the first. */
static ex_task_result b_second_error(ex_task *t, void *arg) {
    (void)arg;
    note_waiting(1);
    ex_await_result r = ex_await(t, ex_stopped_as_error(until_stopped(), ex_err(EX_EUSER + 9, "second error")));
    TCHECK(r.status == EX_AWAIT_ERROR && r.error.code == EX_EUSER + 9);
    if (r.status == EX_AWAIT_ERROR) atomic_fetch_add(&FS.stops[1], 1);
    return ex_task_with_error(r.error);
}

/* The last child (runs first): lets the others start and wait (yields,
 * bounded), then fails. */
static ex_task_result b_first_error(ex_task *t, void *arg) {
    (void)arg;
    atomic_fetch_add(&FS.runs[2], 1);
    yield_until_waiting(t, 2);
    return ex_task_with_error(ex_err(EX_EUSER + 3, "first error"));
}

static ex_task_result b_parent(ex_task *t, void *arg) {
    (void)arg;
    ex_await_result r = ex_await(t, ex_when_all(ex_task_create(b_waiter, NULL, NULL), ex_task_create(b_second_error, NULL, NULL),
                                                ex_task_create(b_first_error, NULL, NULL)));
    atomic_store(&FS.status, (int)r.status);
    atomic_store(&FS.code, r.error.code);
    TCHECK(on_home());
    return pass_on(r);
}

/* The outer sibling of b_parent: waits for the stop b_parent's error
 * makes the outer fork request. */
static ex_task_result b_outer_sibling(ex_task *t, void *arg) {
    (void)arg;
    atomic_fetch_add(&FS.outer_runs, 1);
    ex_await_result r = ex_await(t, until_stopped());
    TCHECK(r.status == EX_AWAIT_STOPPED);
    if (r.status == EX_AWAIT_STOPPED) atomic_fetch_add(&FS.outer_stops, 1);
    return ex_task_void();
}

static ex_task_result b_root(ex_task *t, void *arg) {
    (void)arg;
    ex_await_result r = ex_await(t, ex_when_all(ex_task_create(b_outer_sibling, NULL, NULL), ex_task_create(b_parent, NULL, NULL)));
    TCHECK(r.status == EX_AWAIT_ERROR);
    return pass_on(r);
}

static void first_error_wins(bool nested) {
    for (unsigned workers = 0; workers <= 2; workers++) {  /* 0: on sync_wait's run loop */
        use_pool(workers);
        for (int round = 0; round < 20; round++) {
            ex_result r = run_round(nested ? b_root : b_parent, NULL);
            expect_error(&r, EX_EUSER + 3);
            cr_assert_str_eq(r.error.msg, "first error");
            cr_assert_eq(atomic_load(&FS.status), EX_AWAIT_ERROR);
            cr_assert_eq(atomic_load(&FS.code), EX_EUSER + 3, "the fork's error: %d", atomic_load(&FS.code));
            for (int i = 0; i < 3; i++) cr_assert_eq(atomic_load(&FS.runs[i]), 1, "child %d ran %d times", i, atomic_load(&FS.runs[i]));
            cr_assert_eq(atomic_load(&FS.stops[0]), 1, "the waiting sibling was not stopped");
            cr_assert_eq(atomic_load(&FS.stops[1]), 1, "the second waiting sibling was not stopped");
            if (nested) {
                cr_assert_eq(atomic_load(&FS.outer_runs), 1);
                cr_assert_eq(atomic_load(&FS.outer_stops), 1, "the outer sibling was not stopped by the inner error");
            }
            ex_result_destroy(&r);
        }
        drop_pool();
    }
}

Test(exec_task_fork, the_first_error_wins_and_stops_the_waiting_siblings) {
    first_error_wins(false);
    task_test_end(NULL, NULL);
}

Test(exec_task_fork, the_first_error_of_a_nested_fork_wins_and_stops_its_siblings_and_the_outer_ones) {
    first_error_wins(true);
    task_test_end(NULL, NULL);
}

/* The last child completes stopped (once the others wait): the siblings
 * are stopped, and the await is stopped — unless a sibling then fails,
 * whose error replaces the stop (when_all's disposition: error wins over
 * stopped, the first error over later ones). */
static ex_task_result b_stopped_last(ex_task *t, void *arg) {
    intptr_t want = (intptr_t)arg;
    atomic_fetch_add(&FS.runs[2], 1);
    yield_until_waiting(t, (int)want);
    return ex_task_stopped();
}

static ex_task_result b_stop_parent(ex_task *t, void *arg) {
    bool with_error = arg != NULL;
    ex_await_result r = ex_await(t, ex_when_all(ex_task_create(b_waiter, NULL, NULL),
                                                with_error ? ex_task_create(b_second_error, NULL, NULL) : ex_task_create(b_waiter, NULL, NULL),
                                                ex_task_create(b_stopped_last, (void *)(intptr_t)2, NULL)));
    atomic_store(&FS.status, (int)r.status);
    atomic_store(&FS.code, r.error.code);
    TCHECK(on_home());
    return pass_on(r);
}

static void a_stopped_child_stops_its_siblings_and_a_later_error_still_wins_on(unsigned workers) {
    (void)workers;
    for (int with_error = 0; with_error <= 1; with_error++)
        for (int round = 0; round < 10; round++) {
            ex_result r = run_round(b_stop_parent, with_error ? (void *)1 : NULL);
            if (with_error) {
                expect_error(&r, EX_EUSER + 9);
                cr_assert_eq(atomic_load(&FS.status), EX_AWAIT_ERROR);
                cr_assert_eq(atomic_load(&FS.stops[1]), 1, "the failing sibling was not stopped");
            } else {
                expect_disp(&r, EX_DISP_STOPPED);
                cr_assert_eq(atomic_load(&FS.status), EX_AWAIT_STOPPED);
                cr_assert_eq(atomic_load(&FS.stops[0]), 2, "%d of 2 waiting siblings stopped", atomic_load(&FS.stops[0]));
            }
            if (with_error) cr_assert_eq(atomic_load(&FS.stops[0]), 1, "the waiting sibling was not stopped");
            cr_assert_eq(atomic_load(&FS.runs[2]), 1);
            ex_result_destroy(&r);
        }
}

Test(exec_task_fork, a_stopped_child_stops_its_siblings_and_a_later_error_still_wins) {
    for_pools(0, 2, a_stopped_child_stops_its_siblings_and_a_later_error_still_wins_on);
}

/* ------------------------- a stop from outside reaches every leaf */

enum { TREE_MAX_NODES = 400 };

static struct {
    int kids, depth, nodes, first_leaf;
    atomic_int waiting;
    atomic_int runs[TREE_MAX_NODES];
    atomic_int stops[TREE_MAX_NODES];
} T;

/* Node id (k-ary heap numbering) at depth d: a leaf awaits until_stopped,
 * an inner node awaits when_all of its kids. */
static ex_task_result tree_node(ex_task *t, void *arg) {
    int id = (int)((intptr_t)arg >> 8), d = (int)((intptr_t)arg & 0xff);
    atomic_fetch_add(&T.runs[id], 1);
    ex_await_result r;
    if (d == T.depth) {
        atomic_fetch_add(&T.waiting, 1);
        r = ex_await(t, until_stopped());
    } else {
        ex_sender *kids[4];
        for (int j = 0; j < T.kids; j++)
            kids[j] = ex_task_create(tree_node, (void *)(((intptr_t)(id * T.kids + 1 + j) << 8) | (d + 1)), NULL);
        r = ex_await(t, ex_when_all_n(kids, (size_t)T.kids));
    }
    TCHECK(r.status == EX_AWAIT_STOPPED);
    if (r.status == EX_AWAIT_STOPPED) atomic_fetch_add(&T.stops[id], 1);
    TCHECK(ex_task_is_stopped(t));
    TCHECK(on_home());
    return ex_task_void();
}

static void stop_reaches_leaves(unsigned workers, int kids, int depth) {
    use_pool(workers);
    memset(&T, 0, sizeof T);
    T.kids = kids;
    T.depth = depth;
    int level = 1;
    for (int d = 0; d <= depth; d++) {
        if (d == depth) T.first_leaf = T.nodes;
        T.nodes += level;
        level *= kids;
    }
    cr_assert_leq(T.nodes, TREE_MAX_NODES);
    int leaves = T.nodes - T.first_leaf;
    ex_stop_source src;
    ex_stop_source_init(&src);
    stopper st;
    stopper_start(&st, &T.waiting, leaves, &src, NULL);
    ex_result r = run_on_pool_with_stop(ex_task_create(tree_node, (void *)(intptr_t)0, NULL), &src);
    stopper_join(&st);
    cr_assert(atomic_load(&st.reached), "%d of %d leaves waiting after 20 s", atomic_load(&T.waiting), leaves);
    expect_disp(&r, EX_DISP_STOPPED);
    for (int id = 0; id < T.nodes; id++) {
        cr_assert_eq(atomic_load(&T.runs[id]), 1, "%d x %d: node %d ran %d times", kids, depth, id, atomic_load(&T.runs[id]));
        cr_assert_eq(atomic_load(&T.stops[id]), 1, "%d x %d: %s %d saw %d stops", kids, depth,
                     id >= T.first_leaf ? "leaf" : "node", id, atomic_load(&T.stops[id]));
    }
    ex_result_destroy(&r);
    drop_pool();
}

Test(exec_task_fork, a_stop_from_outside_reaches_every_leaf_of_a_recursion_of_forks) {
    for (unsigned workers = 1; workers <= 2; workers++) {
        stop_reaches_leaves(workers, 2, 4);
        stop_reaches_leaves(workers, 2, 6);
        stop_reaches_leaves(workers, 3, 4);
    }
    task_test_end(NULL, NULL);
}

/* --------------------- stop requested before a nested fork starts */

static struct {
    int middle;                /* level of the task that blocks, then forks */
    bool query;                /* it asks for its stop token before blocking */
    atomic_int entered, go;
    atomic_int xy_runs, filler_runs;
    atomic_int status[8];
    atomic_int tok_after;
} DS;

static ex_task_result d_counted(ex_task *t, void *arg) {
    (void)t, (void)arg;
    atomic_fetch_add(&DS.xy_runs, 1);
    return ex_task_i64(1);
}

static ex_task_result d_filler(ex_task *t, void *arg) {
    (void)t, (void)arg;
    atomic_fetch_add(&DS.filler_runs, 1);
    return ex_task_i64(2);
}

/* Level L < middle awaits when_all(filler, level L + 1); the middle level
 * (maybe asks for its token), blocks until the test has requested stop,
 * then awaits when_all(X, Y), which must not start. */
static ex_task_result d_level(ex_task *t, void *arg) {
    int L = (int)(intptr_t)arg;
    ex_await_result r;
    if (L < DS.middle) {
        r = ex_await(t, ex_when_all(ex_task_create(d_filler, NULL, NULL), ex_task_create(d_level, (void *)(intptr_t)(L + 1), NULL)));
    } else {
        if (DS.query) TCHECK(!ex_stop_token_stop_requested(ex_task_stop_token(t)));
        atomic_store(&DS.entered, 1);
        double deadline = test_now_s() + 20.0;
        while (!atomic_load(&DS.go) && test_now_s() < deadline) sched_yield();
        TCHECK(atomic_load(&DS.go));
        r = ex_await(t, ex_when_all(ex_task_create(d_counted, NULL, NULL), ex_task_create(d_counted, NULL, NULL)));
        atomic_store(&DS.tok_after, ex_stop_token_stop_requested(ex_task_stop_token(t)));
    }
    atomic_store(&DS.status[L], (int)r.status);
    TCHECK(on_home());
    return pass_on(r);
}

static void stop_before_fork(unsigned workers, int middle, bool query) {
    use_pool(workers);
    for (int round = 0; round < 5; round++) {
        memset(&DS, 0, sizeof DS);
        DS.middle = middle;
        DS.query = query;
        for (int i = 0; i < 8; i++) atomic_store(&DS.status[i], -1);
        ex_stop_source src;
        ex_stop_source_init(&src);
        stopper st;
        stopper_start(&st, &DS.entered, 1, &src, &DS.go);
        st.settle_ms = 0;
        ex_result r = run_on_pool_with_stop(ex_task_create(d_level, (void *)(intptr_t)0, NULL), &src);
        stopper_join(&st);
        cr_assert(atomic_load(&st.reached), "the middle task never ran");
        cr_assert_eq(atomic_load(&DS.xy_runs), 0, "middle %d%s: %d child(ren) of a fork started after the stop ran", middle,
                     query ? " (token asked)" : "", atomic_load(&DS.xy_runs));
        for (int L = 0; L <= middle; L++)
            cr_assert_eq(atomic_load(&DS.status[L]), EX_AWAIT_STOPPED, "middle %d%s: level %d's await gave %d", middle,
                         query ? " (token asked)" : "", L, atomic_load(&DS.status[L]));
        cr_assert(atomic_load(&DS.tok_after), "the middle task's token does not show the stop");
        expect_disp(&r, EX_DISP_STOPPED);
        ex_result_destroy(&r);
    }
    drop_pool();
}

Test(exec_task_fork, a_fork_started_after_an_outside_stop_runs_no_child) {
    for (unsigned workers = 1; workers <= 2; workers++)
        for (int middle = 0; middle <= 3; middle++) {
            stop_before_fork(workers, middle, false);
            stop_before_fork(workers, middle, true);
        }
    task_test_end(NULL, NULL);
}

/* The erroring fork is at `level` (0: the root's); its child 0 (A), run
 * after the last child (B) failed, awaits when_all(X, Y). */
static ex_task_result e_fail(ex_task *t, void *arg) {
    (void)t, (void)arg;
    atomic_fetch_add(&FS.runs[1], 1);
    return ex_task_with_error(ex_err(EX_EUSER + 4, "sibling error"));
}

static ex_task_result e_a(ex_task *t, void *arg) {
    (void)arg;
    atomic_fetch_add(&FS.runs[0], 1);
    ex_await_result r = ex_await(t, ex_when_all(ex_task_create(d_counted, NULL, NULL), ex_task_create(d_counted, NULL, NULL)));
    atomic_store(&FS.status, (int)r.status);
    atomic_store(&DS.tok_after, ex_stop_token_stop_requested(ex_task_stop_token(t)));
    return pass_on(r);
}

static ex_task_result e_level(ex_task *t, void *arg) {
    int level = (int)(intptr_t)arg;
    ex_await_result r;
    if (level > 0)
        r = ex_await(t, ex_when_all(ex_task_create(d_filler, NULL, NULL), ex_task_create(e_level, (void *)(intptr_t)(level - 1), NULL)));
    else
        r = ex_await(t, ex_when_all(ex_task_create(e_a, NULL, NULL), ex_task_create(e_fail, NULL, NULL)));
    TCHECK(r.status == EX_AWAIT_ERROR && r.error.code == EX_EUSER + 4);
    return pass_on(r);
}

static void a_fork_started_after_a_sibling_error_runs_no_child_on(unsigned workers) {
    for (int level = 0; level <= 2; level++)
        for (int round = 0; round < 5; round++) {
            reset_state();
            memset(&DS, 0, sizeof DS);
            atomic_store(&FS.status, -1);
            ex_result r = run_on_pool(ex_task_create(e_level, (void *)(intptr_t)level, NULL));
            expect_error(&r, EX_EUSER + 4);
            cr_assert_eq(atomic_load(&FS.runs[0]), 1);
            cr_assert_eq(atomic_load(&FS.runs[1]), 1);
            cr_assert_eq(atomic_load(&DS.xy_runs), 0, "%u worker(s), level %d: %d child(ren) of a fork started after a sibling's error ran",
                         workers, level, atomic_load(&DS.xy_runs));
            cr_assert_eq(atomic_load(&FS.status), EX_AWAIT_STOPPED, "%u worker(s), level %d: A's await gave %d", workers, level,
                         atomic_load(&FS.status));
            cr_assert(atomic_load(&DS.tok_after), "A's token does not show its fork's stop");
            ex_result_destroy(&r);
        }
}

Test(exec_task_fork, a_fork_started_after_a_sibling_error_runs_no_child) {
    /* one thread (a 1-worker pool, sync_wait's loop): B runs (and fails) before A starts */
    for_pools(0, 1, a_fork_started_after_a_sibling_error_runs_no_child_on);
}

/* A, waiting for a stop through ex_stopped_as_error (so it is not stopped
 * itself), is resumed inside the stop request its sibling B's error makes
 * on their fork: on the same thread, through its scheduler's dispatch,
 * before that request has returned.  Its token already says stop, so a
 * when_all it awaits then must start no child — as the generic when_all
 * does (`generic`: the when_all holds an ex_just too). */
static bool k_generic, k_stopped;

static ex_task_result k_a(ex_task *t, void *arg) {
    (void)arg;
    note_waiting(0);
    ex_await_result r = ex_await(t, ex_stopped_as_error(until_stopped(), ex_err(EX_EUSER + 8, "A's wait stopped")));
    TCHECK(r.status == EX_AWAIT_ERROR && r.error.code == EX_EUSER + 8);
    bool requested = ex_stop_token_stop_requested(ex_task_stop_token(t));
    atomic_store(&DS.entered, requested);
    r = ex_await(t, k_generic ? ex_when_all(ex_task_create(d_counted, NULL, NULL), ex_just(ex_int(0)))
                              : ex_when_all(ex_task_create(d_counted, NULL, NULL), ex_task_create(d_counted, NULL, NULL)));
    atomic_store(&FS.status, (int)r.status);
    return pass_on(r);
}

static ex_task_result k_b(ex_task *t, void *arg) {
    (void)arg;
    atomic_fetch_add(&FS.runs[1], 1);
    yield_until_waiting(t, 1);
    return k_stopped ? ex_task_stopped() : ex_task_with_error(ex_err(EX_EUSER + 4, "sibling error"));
}

static ex_task_result k_root(ex_task *t, void *arg) {
    (void)arg;
    ex_await_result r = ex_await(t, ex_when_all(ex_task_create(k_a, NULL, NULL), ex_task_create(k_b, NULL, NULL)));
    return pass_on(r);
}

static void fork_inside_stop_request(bool generic) {
    k_generic = generic;
    for (int stopped = 0; stopped <= 1; stopped++)  /* B fails, or completes stopped */
    for (unsigned workers = 0; workers <= 2; workers++) {
        k_stopped = stopped;
        use_pool(workers);
        for (int round = 0; round < 5; round++) {
            reset_state();
            memset(&DS, 0, sizeof DS);
            atomic_store(&FS.status, -1);
            ex_result r = run_on_pool(ex_task_create(k_root, NULL, NULL));
            if (stopped) expect_disp(&r, EX_DISP_STOPPED);
            else expect_error(&r, EX_EUSER + 4);
            cr_assert(atomic_load(&DS.entered), "A's token did not show the stop before its await");
            cr_assert_eq(atomic_load(&DS.xy_runs), 0, "%s, B %s, %u worker(s): %d child(ren) of a when_all awaited after its token was stopped ran",
                         generic ? "generic" : "fork", stopped ? "stopped" : "failed", workers, atomic_load(&DS.xy_runs));
            cr_assert_eq(atomic_load(&FS.status), EX_AWAIT_STOPPED, "%s, B %s, %u worker(s): the await gave %d", generic ? "generic" : "fork",
                         stopped ? "stopped" : "failed", workers, atomic_load(&FS.status));
            ex_result_destroy(&r);
        }
        drop_pool();
    }
}

Test(exec_task_fork, a_when_all_awaited_inside_the_stop_request_of_its_parents_fork_runs_no_child) {
    fork_inside_stop_request(true);
    task_test_end(NULL, NULL);
}

Test(exec_task_fork, a_fork_awaited_inside_the_stop_request_of_its_parents_fork_runs_no_child) {
    fork_inside_stop_request(false);
    task_test_end(NULL, NULL);
}
