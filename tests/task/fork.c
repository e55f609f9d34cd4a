/* [task] fork: ex_await of an ex_when_all whose children are all affine
 * tasks runs as a "fork" (task.c, "a when_all of tasks"): the children's
 * control blocks go into the awaiting task's await area, all but the last
 * are queued where thieves may take them, the last runs at once, nested.
 * What must hold is when_all's semantics: values concatenated in child
 * order; the first error (or stopped) wins and requests stop on the
 * fork's own source, which the siblings see; a stop request on the
 * awaiting task's token is forwarded; stop requested before the await
 * starts runs no child and gives EX_AWAIT_STOPPED — also for nested forks,
 * which link their source to the fork above only on demand and answer the
 * start check from a global epoch of fork stop requests.  And what falls
 * back to the generic when_all (a child that is not a task, a fork too big
 * for the await area) must give the same results.
 *
 * Bodies never assert (TCHECK into the probe; EXPECT_PROBE at the end). */
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "common/helpers.h"
#include "common/task_fixtures.h"

TEST_SUITE(exec_task_fork, 60);

/* One test's shared state (each test runs in its own process). */
static struct {
    ex_pool *pool;             /* NULL: the root runs on sync_wait's run loop */
    const void *home;          /* the test's thread, for tasks on sync_wait's loop */
    atomic_int runs[16];       /* per child index */
    atomic_int stops[16];      /* stopped awaits seen, per child index */
    atomic_int waiting;        /* children waiting for a stop */
    atomic_int outer_runs, outer_stops;
    atomic_int worker[16];     /* ex_pool_current_worker in child i */
    atomic_int started0;       /* child 0 has started */
    atomic_int status;         /* an await's status, as the body saw it */
    atomic_int code;           /* an await's error code */
} S;

static void reset_state(void) {
    ex_pool *p = S.pool;
    memset(&S, 0, sizeof S);
    S.pool = p;
    S.home = test_thread_id();
}

/* Whether a task runs where it belongs: a worker of S.pool, else the
 * thread of sync_wait's run loop. */
static bool on_home(void) { return S.pool ? ex_pool_current_worker(S.pool) >= 0 : test_thread_id() == S.home; }

/* A pool of `workers` threads, or none (0: the root runs on sync_wait's loop). */
static void use_pool(unsigned workers) {
    S.pool = workers ? make_pool(workers) : NULL;
    S.home = test_thread_id();
}

static void drop_pool(void) {
    if (S.pool) ex_pool_destroy(S.pool);
    S.pool = NULL;
}

/* task on the pool (its scheduler, no stop token), or on sync_wait's own
 * run loop when there is no pool. */
static ex_result run_on_pool(ex_sender *task) {
    return ex_sync_wait(S.pool ? ex_starts_on(ex_pool_scheduler(S.pool), task) : task);
}

/* task on the pool with src's token as its receiver's stop token. */
static ex_result run_on_pool_with_stop(ex_sender *task, ex_stop_source *src) {
    ex_sender *w = ex_write_env(task, &ex_key_get_stop_token, ex_token_value(ex_stop_source_token(src)));
    return ex_sync_wait(ex_starts_on(ex_pool_scheduler(S.pool), w));
}

static void expect_disp(const ex_result *r, ex_disposition d) {
    cr_assert_eq(r->disposition, d, "expected disposition %d, got %d (%s)", d, r->disposition,
                 r->disposition == EX_DISP_ERROR && r->error.msg ? r->error.msg : "");
}

/* What an await gave, as the task's own result. */
static ex_task_result pass_on(ex_await_result r) {
    if (r.status == EX_AWAIT_VALUE) return ex_task_values(r.n, r.v);
    if (r.status == EX_AWAIT_ERROR) return ex_task_with_error(r.error);
    return ex_task_stopped();
}

static ex_task_result child_value(ex_task *t, void *arg) {
    (void)t;
    intptr_t i = (intptr_t)arg;
    atomic_fetch_add(&S.runs[i & 15], 1);
    return ex_task_i64(10 * i + 1);
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

/* ------------------------------------------------ values in child order */

typedef struct spec {
    int n;
    int arity[8];
} spec;

static const spec *cur_spec;

/* Child i: yields (the earlier children more, so they tend to complete
 * last), then sends arity[i] values 100 * i + j. */
static ex_task_result child_spec(ex_task *t, void *arg) {
    int i = (int)(intptr_t)arg;
    atomic_fetch_add(&S.runs[i], 1);
    for (int k = 0; k < 2 * (cur_spec->n - i); k++) TCHECK(ex_task_yield(t).code == 0);
    TCHECK(on_home());
    ex_value v[EX_MAX_ARITY];
    for (int j = 0; j < cur_spec->arity[i]; j++) v[j] = ex_int(100 * i + j);
    return ex_task_values((size_t)cur_spec->arity[i], v);
}

static ex_task_result parent_spec(ex_task *t, void *arg) {
    (void)arg;
    ex_sender *kids[8];
    for (int i = 0; i < cur_spec->n; i++) kids[i] = ex_task_create(child_spec, (void *)(intptr_t)i, NULL);
    ex_await_result r = ex_await(t, ex_when_all_n(kids, (size_t)cur_spec->n));
    TCHECK(on_home());
    return pass_on(r);
}

static void expect_spec_values(const spec *sp, unsigned workers, int rounds) {
    use_pool(workers);
    cur_spec = sp;
    for (int round = 0; round < rounds; round++) {
        reset_state();
        ex_result r = run_on_pool(ex_task_create(parent_spec, NULL, NULL));
        expect_disp(&r, EX_DISP_VALUE);
        size_t k = 0;
        for (int i = 0; i < sp->n; i++) {
            cr_assert_eq(atomic_load(&S.runs[i]), 1, "child %d ran %d times", i, atomic_load(&S.runs[i]));
            for (int j = 0; j < sp->arity[i]; j++, k++) {
                cr_assert_lt(k, r.n, "%zu values, expected more", r.n);
                cr_assert_eq(r.values[k].type, EX_T_INT);
                cr_assert_eq(r.values[k].as.i, 100 * i + j, "value %zu: %lld, expected %d (child %d, value %d)", k,
                             (long long)r.values[k].as.i, 100 * i + j, i, j);
            }
        }
        cr_assert_eq(r.n, k, "%zu values, expected %zu", r.n, k);
        ex_result_destroy(&r);
    }
    drop_pool();
}

Test(exec_task_fork, values_arrive_in_child_order_with_three_and_five_children) {
    static const spec three = { 3, { 1, 2, 1 } };
    static const spec five = { 5, { 3, 0, 2, 1, 2 } };  /* 8 values: EX_MAX_ARITY exactly */
    for (unsigned workers = 0; workers <= 2; workers++) {  /* 0: on sync_wait's run loop */
        expect_spec_values(&three, workers, 30);
        expect_spec_values(&five, workers, 30);
    }
    EXPECT_PROBE();
    expect_no_leaks();
}

/* ------------------------------------------- the first error wins */

/* Child 0: waits for a stop. */
static ex_task_result b_waiter(ex_task *t, void *arg) {
    (void)arg;
    atomic_fetch_add(&S.runs[0], 1);
    atomic_fetch_add(&S.waiting, 1);
    ex_await_result r = ex_await(t, until_stopped());
    TCHECK(r.status == EX_AWAIT_STOPPED);
    if (r.status == EX_AWAIT_STOPPED) atomic_fetch_add(&S.stops[0], 1);
    TCHECK(ex_stop_token_stop_requested(ex_task_stop_token(t)));
    TCHECK(ex_task_is_stopped(t));
    return ex_task_i64(0);  /* ignored: the task completes stopped */
}

/* Child 1: waits for a stop too, then fails: a second error, which must
 * not replace the first. */
static ex_task_result b_second_error(ex_task *t, void *arg) {
    (void)arg;
    atomic_fetch_add(&S.runs[1], 1);
    atomic_fetch_add(&S.waiting, 1);
    ex_await_result r = ex_await(t, ex_stopped_as_error(until_stopped(), ex_err(EX_EUSER + 9, "second error")));
    TCHECK(r.status == EX_AWAIT_ERROR && r.error.code == EX_EUSER + 9);
    if (r.status == EX_AWAIT_ERROR) atomic_fetch_add(&S.stops[1], 1);
    return ex_task_with_error(r.error);
}

/* The last child (runs first): lets the others start and wait (yields,
 * bounded), then fails. */
static ex_task_result b_first_error(ex_task *t, void *arg) {
    (void)arg;
    atomic_fetch_add(&S.runs[2], 1);
    double deadline = test_now_s() + 20.0;
    while (atomic_load(&S.waiting) < 2 && test_now_s() < deadline) TCHECK(ex_task_yield(t).code == 0);
    TCHECK(atomic_load(&S.waiting) == 2);
    return ex_task_with_error(ex_err(EX_EUSER + 3, "first error"));
}

static ex_task_result b_parent(ex_task *t, void *arg) {
    (void)arg;
    ex_await_result r = ex_await(t, ex_when_all(ex_task_create(b_waiter, NULL, NULL), ex_task_create(b_second_error, NULL, NULL),
                                                ex_task_create(b_first_error, NULL, NULL)));
    atomic_store(&S.status, (int)r.status);
    atomic_store(&S.code, r.error.code);
    TCHECK(on_home());
    return pass_on(r);
}

/* The outer sibling of b_parent: waits for the stop b_parent's error
 * makes the outer fork request. */
static ex_task_result b_outer_sibling(ex_task *t, void *arg) {
    (void)arg;
    atomic_fetch_add(&S.outer_runs, 1);
    ex_await_result r = ex_await(t, until_stopped());
    TCHECK(r.status == EX_AWAIT_STOPPED);
    if (r.status == EX_AWAIT_STOPPED) atomic_fetch_add(&S.outer_stops, 1);
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
            reset_state();
            ex_result r = run_on_pool(ex_task_create(nested ? b_root : b_parent, NULL, NULL));
            expect_error(&r, EX_EUSER + 3);
            cr_assert_str_eq(r.error.msg, "first error");
            cr_assert_eq(atomic_load(&S.status), EX_AWAIT_ERROR);
            cr_assert_eq(atomic_load(&S.code), EX_EUSER + 3, "the fork's error: %d", atomic_load(&S.code));
            for (int i = 0; i < 3; i++) cr_assert_eq(atomic_load(&S.runs[i]), 1, "child %d ran %d times", i, atomic_load(&S.runs[i]));
            cr_assert_eq(atomic_load(&S.stops[0]), 1, "the waiting sibling was not stopped");
            cr_assert_eq(atomic_load(&S.stops[1]), 1, "the second waiting sibling was not stopped");
            if (nested) {
                cr_assert_eq(atomic_load(&S.outer_runs), 1);
                cr_assert_eq(atomic_load(&S.outer_stops), 1, "the outer sibling was not stopped by the inner error");
            }
            ex_result_destroy(&r);
        }
        drop_pool();
    }
}

Test(exec_task_fork, the_first_error_wins_and_stops_the_waiting_siblings) {
    first_error_wins(false);
    EXPECT_PROBE();
    expect_no_leaks();
}

Test(exec_task_fork, the_first_error_of_a_nested_fork_wins_and_stops_its_siblings_and_the_outer_ones) {
    first_error_wins(true);
    EXPECT_PROBE();
    expect_no_leaks();
}

/* The last child completes stopped (once the others wait): the siblings
 * are stopped, and the await is stopped — unless a sibling then fails,
 * whose error replaces the stop (when_all's disposition: error wins over
 * stopped, the first error over later ones). */
static ex_task_result b_stopped_last(ex_task *t, void *arg) {
    intptr_t want = (intptr_t)arg;
    atomic_fetch_add(&S.runs[2], 1);
    double deadline = test_now_s() + 20.0;
    while (atomic_load(&S.waiting) < want && test_now_s() < deadline) TCHECK(ex_task_yield(t).code == 0);
    TCHECK(atomic_load(&S.waiting) == want);
    return ex_task_stopped();
}

static ex_task_result b_stop_parent(ex_task *t, void *arg) {
    bool with_error = arg != NULL;
    ex_await_result r = ex_await(t, ex_when_all(ex_task_create(b_waiter, NULL, NULL),
                                                with_error ? ex_task_create(b_second_error, NULL, NULL) : ex_task_create(b_waiter, NULL, NULL),
                                                ex_task_create(b_stopped_last, (void *)(intptr_t)2, NULL)));
    atomic_store(&S.status, (int)r.status);
    atomic_store(&S.code, r.error.code);
    TCHECK(on_home());
    return pass_on(r);
}

Test(exec_task_fork, a_stopped_child_stops_its_siblings_and_a_later_error_still_wins) {
    for (unsigned workers = 0; workers <= 2; workers++) {
        use_pool(workers);
        for (int with_error = 0; with_error <= 1; with_error++)
            for (int round = 0; round < 10; round++) {
                reset_state();
                ex_result r = run_on_pool(ex_task_create(b_stop_parent, with_error ? (void *)1 : NULL, NULL));
                if (with_error) {
                    expect_error(&r, EX_EUSER + 9);
                    cr_assert_eq(atomic_load(&S.status), EX_AWAIT_ERROR);
                    cr_assert_eq(atomic_load(&S.stops[1]), 1, "the failing sibling was not stopped");
                } else {
                    expect_disp(&r, EX_DISP_STOPPED);
                    cr_assert_eq(atomic_load(&S.status), EX_AWAIT_STOPPED);
                    cr_assert_eq(atomic_load(&S.stops[0]), 2, "%d of 2 waiting siblings stopped", atomic_load(&S.stops[0]));
                }
                if (with_error) cr_assert_eq(atomic_load(&S.stops[0]), 1, "the waiting sibling was not stopped");
                cr_assert_eq(atomic_load(&S.runs[2]), 1);
                ex_result_destroy(&r);
            }
        drop_pool();
    }
    EXPECT_PROBE();
    expect_no_leaks();
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
    S.pool = make_pool(workers);
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
    ex_pool_destroy(S.pool);
    S.pool = NULL;
}

Test(exec_task_fork, a_stop_from_outside_reaches_every_leaf_of_a_recursion_of_forks) {
    for (unsigned workers = 1; workers <= 2; workers++) {
        stop_reaches_leaves(workers, 2, 4);
        stop_reaches_leaves(workers, 2, 6);
        stop_reaches_leaves(workers, 3, 4);
    }
    EXPECT_PROBE();
    expect_no_leaks();
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
    S.pool = make_pool(workers);
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
    ex_pool_destroy(S.pool);
    S.pool = NULL;
}

Test(exec_task_fork, a_fork_started_after_an_outside_stop_runs_no_child) {
    for (unsigned workers = 1; workers <= 2; workers++)
        for (int middle = 0; middle <= 3; middle++) {
            stop_before_fork(workers, middle, false);
            stop_before_fork(workers, middle, true);
        }
    EXPECT_PROBE();
    expect_no_leaks();
}

/* The erroring fork is at `level` (0: the root's); its child 0 (A), run
 * after the last child (B) failed, awaits when_all(X, Y). */
static ex_task_result e_fail(ex_task *t, void *arg) {
    (void)t, (void)arg;
    atomic_fetch_add(&S.runs[1], 1);
    return ex_task_with_error(ex_err(EX_EUSER + 4, "sibling error"));
}

static ex_task_result e_a(ex_task *t, void *arg) {
    (void)arg;
    atomic_fetch_add(&S.runs[0], 1);
    ex_await_result r = ex_await(t, ex_when_all(ex_task_create(d_counted, NULL, NULL), ex_task_create(d_counted, NULL, NULL)));
    atomic_store(&S.status, (int)r.status);
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

Test(exec_task_fork, a_fork_started_after_a_sibling_error_runs_no_child) {
    /* one thread (a 1-worker pool, sync_wait's loop): B runs (and fails) before A starts */
    for (unsigned workers = 0; workers <= 1; workers++) {
        use_pool(workers);
        for (int level = 0; level <= 2; level++)
            for (int round = 0; round < 5; round++) {
                reset_state();
                memset(&DS, 0, sizeof DS);
                atomic_store(&S.status, -1);
                ex_result r = run_on_pool(ex_task_create(e_level, (void *)(intptr_t)level, NULL));
                expect_error(&r, EX_EUSER + 4);
                cr_assert_eq(atomic_load(&S.runs[0]), 1);
                cr_assert_eq(atomic_load(&S.runs[1]), 1);
                cr_assert_eq(atomic_load(&DS.xy_runs), 0, "%u worker(s), level %d: %d child(ren) of a fork started after a sibling's error ran",
                             workers, level, atomic_load(&DS.xy_runs));
                cr_assert_eq(atomic_load(&S.status), EX_AWAIT_STOPPED, "%u worker(s), level %d: A's await gave %d", workers, level,
                             atomic_load(&S.status));
                cr_assert(atomic_load(&DS.tok_after), "A's token does not show its fork's stop");
                ex_result_destroy(&r);
            }
        drop_pool();
    }
    EXPECT_PROBE();
    expect_no_leaks();
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
    atomic_fetch_add(&S.runs[0], 1);
    atomic_fetch_add(&S.waiting, 1);
    ex_await_result r = ex_await(t, ex_stopped_as_error(until_stopped(), ex_err(EX_EUSER + 8, "A's wait stopped")));
    TCHECK(r.status == EX_AWAIT_ERROR && r.error.code == EX_EUSER + 8);
    bool requested = ex_stop_token_stop_requested(ex_task_stop_token(t));
    atomic_store(&DS.entered, requested);
    r = ex_await(t, k_generic ? ex_when_all(ex_task_create(d_counted, NULL, NULL), ex_just(ex_int(0)))
                              : ex_when_all(ex_task_create(d_counted, NULL, NULL), ex_task_create(d_counted, NULL, NULL)));
    atomic_store(&S.status, (int)r.status);
    return pass_on(r);
}

static ex_task_result k_b(ex_task *t, void *arg) {
    (void)arg;
    atomic_fetch_add(&S.runs[1], 1);
    double deadline = test_now_s() + 20.0;
    while (atomic_load(&S.waiting) < 1 && test_now_s() < deadline) TCHECK(ex_task_yield(t).code == 0);
    TCHECK(atomic_load(&S.waiting) == 1);
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
            atomic_store(&S.status, -1);
            ex_result r = run_on_pool(ex_task_create(k_root, NULL, NULL));
            if (stopped) expect_disp(&r, EX_DISP_STOPPED);
            else expect_error(&r, EX_EUSER + 4);
            cr_assert(atomic_load(&DS.entered), "A's token did not show the stop before its await");
            cr_assert_eq(atomic_load(&DS.xy_runs), 0, "%s, B %s, %u worker(s): %d child(ren) of a when_all awaited after its token was stopped ran",
                         generic ? "generic" : "fork", stopped ? "stopped" : "failed", workers, atomic_load(&DS.xy_runs));
            cr_assert_eq(atomic_load(&S.status), EX_AWAIT_STOPPED, "%s, B %s, %u worker(s): the await gave %d", generic ? "generic" : "fork",
                         stopped ? "stopped" : "failed", workers, atomic_load(&S.status));
            ex_result_destroy(&r);
        }
        drop_pool();
    }
}

Test(exec_task_fork, a_when_all_awaited_inside_the_stop_request_of_its_parents_fork_runs_no_child) {
    fork_inside_stop_request(true);
    EXPECT_PROBE();
    expect_no_leaks();
}

Test(exec_task_fork, a_fork_awaited_inside_the_stop_request_of_its_parents_fork_runs_no_child) {
    fork_inside_stop_request(false);
    EXPECT_PROBE();
    expect_no_leaks();
}

/* ------------------------------- a when_all that is not all tasks */

static ex_task_result e_mixed(ex_task *t, void *arg) {
    (void)arg;
    ex_await_result r = ex_await(t, ex_when_all(ex_task_create(child_value, (void *)1, NULL), ex_just(ex_int(7)),
                                                ex_task_create(child_value, (void *)2, NULL)));
    TCHECK(r.status == EX_AWAIT_VALUE && r.n == 3);
    if (r.status != EX_AWAIT_VALUE || r.n != 3) return pass_on(r);
    TCHECK(r.v[0].as.i == 11 && r.v[1].as.i == 7 && r.v[2].as.i == 21);
    int64_t a = r.v[0].as.i, b = r.v[1].as.i, c = r.v[2].as.i;
    /* The just first, with two values; then an EX_TASK_INLINE child among affine ones. */
    ex_task_options inl;
    memset(&inl, 0, sizeof inl);
    inl.affinity = EX_TASK_INLINE;
    r = ex_await(t, ex_when_all(ex_just(ex_int(5), ex_int(6)), ex_task_create(child_value, (void *)3, NULL)));
    TCHECK(r.status == EX_AWAIT_VALUE && r.n == 3 && r.v[0].as.i == 5 && r.v[1].as.i == 6 && r.v[2].as.i == 31);
    r = ex_await(t, ex_when_all(ex_task_create(child_value, (void *)4, NULL), ex_task_create(child_value, (void *)5, &inl)));
    TCHECK(r.status == EX_AWAIT_VALUE && r.n == 2 && r.v[0].as.i == 41 && r.v[1].as.i == 51);
    TCHECK(on_home());
    ex_value v[3] = { ex_int(a), ex_int(b), ex_int(c) };
    return ex_task_values(3, v);
}

Test(exec_task_fork, a_when_all_mixing_tasks_and_other_senders_keeps_the_order) {
    for (unsigned workers = 1; workers <= 2; workers++) {
        S.pool = make_pool(workers);
        for (int round = 0; round < 20; round++) {
            reset_state();
            ex_result r = run_on_pool(ex_task_create(e_mixed, NULL, NULL));
            expect_disp(&r, EX_DISP_VALUE);
            cr_assert_eq(r.n, 3);
            cr_assert_eq(r.values[0].as.i, 11);
            cr_assert_eq(r.values[1].as.i, 7);
            cr_assert_eq(r.values[2].as.i, 21);
            for (int i = 1; i <= 5; i++) cr_assert_eq(atomic_load(&S.runs[i]), 1, "child %d ran %d times", i, atomic_load(&S.runs[i]));
            ex_result_destroy(&r);
        }
        ex_pool_destroy(S.pool);
    }
    EXPECT_PROBE();
    expect_no_leaks();
}

/* An EX_TASK_INLINE parent (run by sync_wait, no pool) awaiting affine
 * tasks: the generic path. */
static ex_task_result e_inline_parent(ex_task *t, void *arg) {
    (void)arg;
    ex_await_result r = ex_await(t, ex_when_all(ex_task_create(child_value, (void *)1, NULL), ex_task_create(child_value, (void *)2, NULL)));
    return pass_on(r);
}

Test(exec_task_fork, an_inline_parent_awaiting_a_when_all_of_tasks_gets_the_values_in_order) {
    ex_task_options o;
    memset(&o, 0, sizeof o);
    o.affinity = EX_TASK_INLINE;
    ex_result r = ex_sync_wait(ex_task_create(e_inline_parent, NULL, &o));
    expect_disp(&r, EX_DISP_VALUE);
    cr_assert_eq(r.n, 2);
    cr_assert_eq(r.values[0].as.i, 11);
    cr_assert_eq(r.values[1].as.i, 21);
    ex_result_destroy(&r);
    EXPECT_PROBE();
    expect_no_leaks();
}

/* ----------------------------------------- a task connected before */

static ex_task_result f_reused(ex_task *t, void *arg) {
    (void)arg;
    ex_sender *once = ex_task_create(child_value, (void *)1, NULL);
    ex_sender_retain(once);
    ex_await_result r = ex_await(t, ex_when_all(once, ex_task_create(child_value, (void *)2, NULL)));
    TCHECK(r.status == EX_AWAIT_VALUE && r.n == 2 && r.v[0].as.i == 11 && r.v[1].as.i == 21);
    /* again, second: child 3 is connected before the failure is found */
    ex_sender_retain(once);
    r = ex_await(t, ex_when_all(ex_task_create(child_value, (void *)3, NULL), once));
    TCHECK(r.status == EX_AWAIT_ERROR && r.error.code == EX_EINVAL);
    /* again, first */
    r = ex_await(t, ex_when_all(once, ex_task_create(child_value, (void *)4, NULL)));
    TCHECK(r.status == EX_AWAIT_ERROR && r.error.code == EX_EINVAL);
    /* the same when_all twice: the children are not the when_all's alone */
    ex_sender *w = ex_when_all(ex_task_create(child_value, (void *)5, NULL), ex_task_create(child_value, (void *)6, NULL));
    ex_sender_retain(w);
    r = ex_await(t, w);
    TCHECK(r.status == EX_AWAIT_VALUE && r.n == 2 && r.v[0].as.i == 51 && r.v[1].as.i == 61);
    r = ex_await(t, w);
    TCHECK(r.status == EX_AWAIT_ERROR && r.error.code == EX_EINVAL);
    /* a task connected outside (arg) */
    ex_sender *connected = (ex_sender *)arg;
    if (connected) {
        r = ex_await(t, ex_when_all(ex_task_create(child_value, (void *)7, NULL), connected));
        TCHECK(r.status == EX_AWAIT_ERROR && r.error.code == EX_EINVAL);
    }
    /* and the task still forks */
    r = ex_await(t, ex_when_all(ex_task_create(child_value, (void *)8, NULL), ex_task_create(child_value, (void *)9, NULL)));
    TCHECK(r.status == EX_AWAIT_VALUE && r.n == 2 && r.v[0].as.i == 81 && r.v[1].as.i == 91);
    TCHECK(on_home());
    return ex_task_i64(1);
}

Test(exec_task_fork, a_when_all_holding_a_task_connected_before_gives_einval) {
    for (unsigned workers = 1; workers <= 2; workers++) {
        S.pool = make_pool(workers);
        reset_state();
        /* Connected with ex_connect_alloc, never started. */
        ex_sender *connected = ex_task_create(child_value, (void *)10, NULL);
        rec rr;
        rec_init(&rr);
        rec_with_scheduler(&rr, ex_pool_scheduler(S.pool));
        ex_operation *op = NULL;
        cr_assert_eq(ex_connect_alloc(connected, rec_receiver(&rr), &op).code, 0);
        ex_result r = run_on_pool(ex_task_create(f_reused, connected, NULL));
        expect_value_int(&r, 1);
        ex_result_destroy(&r);
        ex_operation_free(op);
        cr_assert_eq(rec_total(&rr), 0);
        for (int i = 1; i <= 9; i++) {
            int want = (i == 3 || i == 4 || i == 7) ? 0 : 1;
            cr_assert_eq(atomic_load(&S.runs[i]), want, "child %d ran %d times", i, atomic_load(&S.runs[i]));
        }
        cr_assert_eq(atomic_load(&S.runs[10]), 0);
        ex_pool_destroy(S.pool);
    }
    EXPECT_PROBE();
    expect_no_leaks();
}

/* --------------------------------------------------- tuples */

/* Child i: a tuple (10 i, 10 i + 1) borrowed from its last await; child 1
 * a plain int. */
static ex_task_result g_child(ex_task *t, void *arg) {
    intptr_t i = (intptr_t)arg;
    atomic_fetch_add(&S.runs[i], 1);
    if (i == 1) return ex_task_i64(99);
    ex_await_result r = ex_await(t, ex_into_variant(ex_just(ex_int(10 * i), ex_int(10 * i + 1))));
    TCHECK(r.status == EX_AWAIT_VALUE && r.n == 1 && r.v[0].type == EX_T_TUPLE);
    if (i == 2) {  /* suspends before it completes */
        TCHECK(ex_task_yield(t).code == 0);
        r = ex_await(t, ex_into_variant(ex_just(ex_int(20), ex_int(21))));
        TCHECK(r.status == EX_AWAIT_VALUE && r.n == 1 && r.v[0].type == EX_T_TUPLE);
    }
    return pass_on(r);
}

static bool tuple_is(const ex_value *v, int64_t a, int64_t b) {
    return v->type == EX_T_TUPLE && v->as.tuple->n == 2 && v->as.tuple->v[0].as.i == a && v->as.tuple->v[1].as.i == b;
}

static ex_task_result g_parent(ex_task *t, void *arg) {
    (void)arg;
    ex_await_result r = ex_await(t, ex_when_all(ex_task_create(g_child, (void *)0, NULL), ex_task_create(g_child, (void *)1, NULL),
                                                ex_task_create(g_child, (void *)2, NULL)));
    TCHECK(r.status == EX_AWAIT_VALUE && r.n == 3);
    if (r.status != EX_AWAIT_VALUE || r.n != 3) return pass_on(r);
    TCHECK(tuple_is(&r.v[0], 0, 1));
    TCHECK(r.v[1].type == EX_T_INT && r.v[1].as.i == 99);
    TCHECK(tuple_is(&r.v[2], 20, 21));
    return ex_task_values(r.n, r.v);  /* borrowed from the await: readable until the completion is delivered */
}

Test(exec_task_fork, tuples_from_children_are_readable_after_the_await_and_when_returned) {
    for (unsigned workers = 1; workers <= 2; workers++) {
        S.pool = make_pool(workers);
        for (int round = 0; round < 20; round++) {
            reset_state();
            cnt_alloc frames;
            cnt_alloc_init(&frames);
            frames.scribble = true;  /* a tuple read after its copy was freed shows */
            ex_task_options o;
            memset(&o, 0, sizeof o);
            o.allocator = &frames.base;
            ex_result r = run_on_pool(ex_task_create(g_parent, NULL, &o));
            expect_disp(&r, EX_DISP_VALUE);
            cr_assert_eq(r.n, 3);
            cr_assert(tuple_is(&r.values[0], 0, 1), "child 0's tuple");
            cr_assert_eq(r.values[1].as.i, 99);
            cr_assert(tuple_is(&r.values[2], 20, 21), "child 2's tuple");
            ex_result_destroy(&r);
            cr_assert_gt(atomic_load(&frames.allocs), 0, "the tuples were not copied with the task's allocator");
            cr_assert_eq(atomic_load(&frames.in_use), 0, "%ld tuple copies not freed", atomic_load(&frames.in_use));
        }
        ex_pool_destroy(S.pool);
    }
    EXPECT_PROBE();
    expect_no_leaks();
}

/* ------------------------------------- more than EX_MAX_ARITY values */

static ex_task_result h_three(ex_task *t, void *arg) {
    (void)t;
    intptr_t i = (intptr_t)arg;
    atomic_fetch_add(&S.runs[i], 1);
    ex_value v[3] = { ex_int(i), ex_int(i), ex_int(i) };
    return ex_task_values(3, v);
}

/* One value declared, two sent. */
static ex_task_result h_liar(ex_task *t, void *arg) {
    (void)t, (void)arg;
    ex_value v[2] = { ex_int(1), ex_int(2) };
    return ex_task_values(2, v);
}

static const ex_sig sig_int = { 1, { EX_T_INT } };
static const ex_sig sig_3int = { 3, { EX_T_INT, EX_T_INT, EX_T_INT } };

static ex_task_result h_parent(ex_task *t, void *arg) {
    (void)arg;
    /* run-time signatures: found when the values arrive */
    ex_await_result r = ex_await(t, ex_when_all(ex_task_create(h_three, (void *)0, NULL), ex_task_create(h_three, (void *)1, NULL),
                                                ex_task_create(h_three, (void *)2, NULL)));
    TCHECK(r.status == EX_AWAIT_ERROR && r.error.code == EX_EINVAL);
    /* declared signatures: found when the when_all is built */
    ex_task_options o;
    memset(&o, 0, sizeof o);
    o.value_sig = &sig_3int;
    r = ex_await(t, ex_when_all(ex_task_create(h_three, (void *)3, &o), ex_task_create(h_three, (void *)4, &o),
                                ex_task_create(h_three, (void *)5, &o)));
    TCHECK(r.status == EX_AWAIT_ERROR && r.error.code == EX_EINVAL);
    /* a child sending more than it declared */
    o.value_sig = &sig_int;
    r = ex_await(t, ex_when_all(ex_task_create(child_value, (void *)6, &o), ex_task_create(h_liar, NULL, &o)));
    TCHECK(r.status == EX_AWAIT_ERROR);
    atomic_store(&S.code, r.status == EX_AWAIT_ERROR ? r.error.code : -1);
    /* eight values still fit */
    r = ex_await(t, ex_when_all(ex_task_create(h_three, (void *)7, NULL), ex_task_create(h_three, (void *)8, NULL),
                                ex_task_create(child_value, (void *)9, NULL), ex_task_create(child_value, (void *)10, NULL)));
    TCHECK(r.status == EX_AWAIT_VALUE && r.n == 8);
    if (r.status == EX_AWAIT_VALUE && r.n == 8)
        TCHECK(r.v[0].as.i == 7 && r.v[2].as.i == 7 && r.v[3].as.i == 8 && r.v[5].as.i == 8 && r.v[6].as.i == 91 && r.v[7].as.i == 101);
    return ex_task_i64(1);
}

Test(exec_task_fork, children_sending_more_than_ex_max_arity_values_give_einval) {
    for (unsigned workers = 1; workers <= 2; workers++) {
        S.pool = make_pool(workers);
        for (int round = 0; round < 10; round++) {
            reset_state();
            ex_result r = run_on_pool(ex_task_create(h_parent, NULL, NULL));
            expect_value_int(&r, 1);
            ex_result_destroy(&r);
            for (int i = 0; i <= 2; i++) cr_assert_eq(atomic_load(&S.runs[i]), 1);
            cr_assert_eq(atomic_load(&S.runs[3]) + atomic_load(&S.runs[4]) + atomic_load(&S.runs[5]), 0,
                         "children of a rejected when_all ran");
            cr_assert_eq(atomic_load(&S.code), EX_EINVAL, "a child over its signature: error %d", atomic_load(&S.code));
        }
        ex_pool_destroy(S.pool);
    }
    EXPECT_PROBE();
    expect_no_leaks();
}

/* --------------------------- a fork too big for the await area */

static ex_task_result i_parent(ex_task *t, void *arg) {
    int n = (int)(intptr_t)arg;
    ex_sender *kids[8];
    for (int i = 0; i < n; i++) kids[i] = ex_task_create(child_value, (void *)(intptr_t)i, NULL);
    ex_await_result r = ex_await(t, ex_when_all_n(kids, (size_t)n));
    TCHECK(on_home());
    return pass_on(r);
}

static void expect_n_values(int n, size_t stack_size) {
    reset_state();
    ex_task_options o;
    memset(&o, 0, sizeof o);
    o.stack_size = stack_size;
    ex_result r = run_on_pool(ex_task_create(i_parent, (void *)(intptr_t)n, &o));
    expect_disp(&r, EX_DISP_VALUE);
    cr_assert_eq(r.n, (size_t)n, "stack %zu: %zu values of %d", stack_size, r.n, n);
    for (int i = 0; i < n; i++) {
        cr_assert_eq(r.values[i].as.i, 10 * i + 1, "stack %zu, %d children: value %d is %lld", stack_size, n, i,
                     (long long)r.values[i].as.i);
        cr_assert_eq(atomic_load(&S.runs[i]), 1);
    }
    ex_result_destroy(&r);
}

Test(exec_task_fork, a_fork_too_big_for_the_await_area_still_gives_the_values) {
    cr_assert_lt(ex_task_await_inline_size(4096), 2 * 600, "a 2-child fork would fit a 4096-byte task's await area");
    for (unsigned workers = 1; workers <= 2; workers++) {
        S.pool = make_pool(workers);
        for (int round = 0; round < 5; round++) {
            for (int n = 1; n <= 8; n++) expect_n_values(n, 0);  /* up to 6 fit the default 4 KiB */
            for (int n = 1; n <= 3; n++) expect_n_values(n, 4096);
            for (int n = 1; n <= 3; n++) expect_n_values(n, 16384);  /* one child fits its 1 KiB, two do not */
            expect_n_values(8, 16384);
        }
        ex_pool_destroy(S.pool);
    }
    EXPECT_PROBE();
    expect_no_leaks();
}

/* ------------------------------------------- a queued child is stolen */

static ex_task_result j_first(ex_task *t, void *arg) {
    (void)t, (void)arg;
    atomic_store(&S.worker[0], ex_pool_current_worker(S.pool));
    atomic_store(&S.started0, 1);
    return ex_task_i64(100);
}

/* The last child (runs at once, nested, on the parent's worker): holds
 * that worker until child 0 has started elsewhere. */
static ex_task_result j_last(ex_task *t, void *arg) {
    (void)t, (void)arg;
    atomic_store(&S.worker[1], ex_pool_current_worker(S.pool));
    double deadline = test_now_s() + 5.0;
    while (!atomic_load(&S.started0) && test_now_s() < deadline) sched_yield();
    TCHECK(atomic_load(&S.started0));
    return ex_task_i64(200);
}

static ex_task_result j_parent(ex_task *t, void *arg) {
    (void)arg;
    atomic_store(&S.worker[2], ex_pool_current_worker(S.pool));
    ex_await_result r = ex_await(t, ex_when_all(ex_task_create(j_first, NULL, NULL), ex_task_create(j_last, NULL, NULL)));
    atomic_store(&S.worker[3], ex_pool_current_worker(S.pool));
    return pass_on(r);
}

Test(exec_task_fork, a_queued_child_is_stolen_and_the_parent_resumes_on_the_pool) {
    S.pool = make_pool(2);
    for (int round = 0; round < 10; round++) {
        reset_state();
        for (int i = 0; i < 4; i++) atomic_store(&S.worker[i], -2);
        ex_result r = run_on_pool(ex_task_create(j_parent, NULL, NULL));
        expect_disp(&r, EX_DISP_VALUE);
        cr_assert_eq(r.n, 2);
        cr_assert_eq(r.values[0].as.i, 100);
        cr_assert_eq(r.values[1].as.i, 200);
        int w0 = atomic_load(&S.worker[0]), w1 = atomic_load(&S.worker[1]);
        cr_assert(w0 >= 0 && w1 >= 0, "children off the pool: %d %d", w0, w1);
        cr_assert_neq(w0, w1, "child 0 was not stolen: both ran on worker %d", w0);
        cr_assert_eq(w1, atomic_load(&S.worker[2]), "the last child did not run where its parent started the fork");
        cr_assert_geq(atomic_load(&S.worker[3]), 0, "the parent resumed off the pool");
        ex_result_destroy(&r);
    }
    ex_pool_destroy(S.pool);
    EXPECT_PROBE();
    expect_no_leaks();
}

/* ------------------- a child that saw its token stopped, then forks */

/* The stop flag of a fork's source becomes visible before the request's
 * count of completed requests moves (exi_stop_source_request_stop_counted):
 * a child that sees the flag in that window and forks must still find the
 * stop (task.c, "Stop linking").  The hook widens the window: the
 * requesting thread waits there until the child's fork has given its
 * result. */
static atomic_int k_forked;
extern void (*exi_stop_counted_hook)(void);  /* src/stop_token.c, for tests */

static void k_widen(void) {
    double deadline = test_now_s() + 5.0;
    while (!atomic_load(&k_forked) && test_now_s() < deadline) sched_yield();
}

/* Child 0: stolen by the other worker, fails once the last child runs. */
static ex_task_result k_failing(ex_task *t, void *arg) {
    (void)t, (void)arg;
    atomic_store(&S.started0, 1);
    return ex_task_with_error(ex_err(EX_EUSER + 11, "k: child 0 fails"));
}

/* The last child: waits until child 0 started elsewhere and its error has
 * set the fork's stop flag, then forks. */
static ex_task_result k_watching(ex_task *t, void *arg) {
    (void)arg;
    double deadline = test_now_s() + 5.0;
    while (!atomic_load(&S.started0) && test_now_s() < deadline) sched_yield();
    TCHECK(atomic_load(&S.started0));
    ex_stop_token tok = ex_task_stop_token(t);
    while (!ex_stop_token_stop_requested(tok) && test_now_s() < deadline) sched_yield();
    TCHECK(ex_stop_token_stop_requested(tok));
    ex_await_result r = ex_await(t, ex_when_all(ex_task_create(child_value, (void *)2, NULL),
                                                ex_task_create(child_value, (void *)3, NULL)));
    atomic_store(&S.status, (int)r.status);
    atomic_store(&k_forked, 1);
    return pass_on(r);
}

static ex_task_result k_parent(ex_task *t, void *arg) {
    (void)arg;
    return pass_on(ex_await(t, ex_when_all(ex_task_create(k_failing, NULL, NULL),
                                           ex_task_create(k_watching, NULL, NULL))));
}

Test(exec_task_fork, a_child_that_saw_its_token_stopped_forks_no_child) {
    S.pool = make_pool(2);
    exi_stop_counted_hook = k_widen;
    for (int round = 0; round < 5; round++) {
        reset_state();
        atomic_store(&k_forked, 0);
        ex_result r = run_on_pool(ex_task_create(k_parent, NULL, NULL));
        expect_disp(&r, EX_DISP_ERROR);
        cr_assert_eq(r.error.code, EX_EUSER + 11);
        cr_assert_eq(atomic_load(&S.status), EX_AWAIT_STOPPED, "round %d: the fork after the stop gave %d", round,
                     atomic_load(&S.status));
        cr_assert_eq(atomic_load(&S.runs[2]) + atomic_load(&S.runs[3]), 0, "round %d: its children ran", round);
        ex_result_destroy(&r);
    }
    exi_stop_counted_hook = NULL;
    ex_pool_destroy(S.pool);
    EXPECT_PROBE();
    expect_no_leaks();
}

/* ---------------------- a resumption queued by a dispatch that posts */

/* A scheduler may implement dispatch as post (it is allowed never to run
 * inline).  A child suspended in an await is then resumed through the
 * worker's deque, where its parent, helping before it suspends, finds the
 * item: only children that have not started may run nested there. */
static ex_scheduler_vtable posting_vt;
static ex_error posting_dispatch(void *self, ex_work *w) { return posting_vt.post(self, w); }

typedef struct gate_op_t {
    ex_operation base;
    ex_receiver r;
    _Atomic(struct gate_op_t *) *slot;  /* where start publishes the operation */
} gate_op_t;
static void gate_start(ex_operation *op) {
    gate_op_t *o = (gate_op_t *)op;
    atomic_store(o->slot, o);
}
static const ex_operation_vtable gate_op_vt = { gate_start, NULL };
typedef struct gate_sender_t {
    ex_sender base;
    _Atomic(gate_op_t *) *slot;
} gate_sender_t;
static ex_error gate_connect(const ex_sender *s, ex_receiver r, void *storage) {
    gate_op_t *o = storage;
    o->base.vt = &gate_op_vt;
    o->r = r;
    o->slot = ((const gate_sender_t *)s)->slot;
    return ex_ok();
}
static const ex_sender_vtable gate_vt = { "gate", gate_connect, NULL, NULL };

/* Completes with set_value() when someone calls ex_set_value on the
 * operation its start publishes in *slot. */
static ex_sender *gate_sender(_Atomic(gate_op_t *) *slot) {
    ex_sender *s = ex_sender_alloc(&gate_vt, sizeof(gate_sender_t));
    if (!s) return ex_invalid_sender(EX_ENOMEM, "gate: no memory");
    ((gate_sender_t *)s)->slot = slot;
    s->sigs.nvalues = 1;
    s->sigs.values[0].arity = 0;
    s->op_size = sizeof(gate_op_t);
    s->op_align = alignof(gate_op_t);
    return s;
}
static _Atomic(gate_op_t *) q_the_gate;

/* Child 0 (stolen): suspends on the gate. */
static ex_task_result q_waiting(ex_task *t, void *arg) {
    (void)arg;
    atomic_fetch_add(&S.runs[0], 1);
    ex_await_result r = ex_await(t, gate_sender(&q_the_gate));
    TCHECK(r.status == EX_AWAIT_VALUE);
    return ex_task_i64(1);
}

/* The last child, on the parent's worker: opens the gate once child 0 is
 * suspended on it, which queues child 0's resumption on this worker. */
static ex_task_result q_opening(ex_task *t, void *arg) {
    (void)t, (void)arg;
    double deadline = test_now_s() + 5.0;
    gate_op_t *o;
    while (!(o = atomic_load(&q_the_gate)) && test_now_s() < deadline) sched_yield();
    TCHECK(o != NULL);
    if (!o) return ex_task_i64(-1);
    /* Child 0's carrier publishes SUSPENDED after its switch; opening
     * before that resumes it without the queue (also correct, no check). */
    for (int i = 0; i < 2000; i++) sched_yield();
    ex_set_value(o->r, NULL, 0);
    return ex_task_i64(2);
}

static ex_task_result q_parent(ex_task *t, void *arg) {
    (void)arg;
    return pass_on(ex_await(t, ex_when_all(ex_task_create(q_waiting, NULL, NULL),
                                           ex_task_create(q_opening, NULL, NULL))));
}

Test(exec_task_fork, a_childs_queued_resumption_is_never_run_nested_as_a_new_start) {
    S.pool = make_pool(2);
    ex_scheduler ps = ex_pool_scheduler(S.pool);
    posting_vt = *ps.vt;
    posting_vt.name = "pool, dispatch posts";
    posting_vt.dispatch = posting_dispatch;
    ex_scheduler posting = { &posting_vt, ps.self };
    for (int round = 0; round < 10; round++) {
        reset_state();
        atomic_store(&q_the_gate, NULL);
        ex_result r = ex_sync_wait(ex_starts_on(posting, ex_task_create(q_parent, NULL, NULL)));
        expect_disp(&r, EX_DISP_VALUE);
        cr_assert_eq(r.n, 2);
        cr_assert_eq(r.values[0].as.i, 1);
        cr_assert_eq(r.values[1].as.i, 2);
        cr_assert_eq(atomic_load(&S.runs[0]), 1, "round %d: child 0's body ran %d times", round,
                     atomic_load(&S.runs[0]));
        ex_result_destroy(&r);
    }
    ex_pool_destroy(S.pool);
    EXPECT_PROBE();
    expect_no_leaks();
}

/* --------------- children held back by a fork and a sibling that waits */

/* A fork whose worker already holds queued work runs its children nested
 * one after the other instead of queueing them (lazy splitting).  A child
 * that waits for a sibling (here: the last child, which runs first, waits
 * on a gate child 0 opens) must not stop that sibling from starting: when
 * the stack switches away, the children held back are queued. */
static _Atomic(gate_op_t *) lz_gate;

static ex_task_result lz_filler(ex_task *t, void *arg) {
    (void)t;
    atomic_fetch_add(&S.runs[(intptr_t)arg & 15], 1);
    return ex_task_void();
}

/* Child 0 of the inner fork: opens the gate its sibling waits on. */
static ex_task_result lz_opener(ex_task *t, void *arg) {
    (void)t, (void)arg;
    atomic_fetch_add(&S.runs[4], 1);
    double deadline = test_now_s() + 5.0;
    gate_op_t *o;
    while (!(o = atomic_load(&lz_gate)) && test_now_s() < deadline) sched_yield();
    TCHECK(o != NULL);
    if (o) ex_set_value(o->r, NULL, 0);
    return ex_task_i64(4);
}

/* The inner fork's last child (runs first): waits on the gate. */
static ex_task_result lz_waiter(ex_task *t, void *arg) {
    (void)arg;
    atomic_fetch_add(&S.runs[5], 1);
    ex_await_result r = ex_await(t, gate_sender(&lz_gate));
    TCHECK(r.status == EX_AWAIT_VALUE);
    return ex_task_i64(5);
}

/* Runs after the outer fork queued two fillers on this worker. */
static ex_task_result lz_middle(ex_task *t, void *arg) {
    (void)arg;
    return pass_on(ex_await(t, ex_when_all(ex_task_create(lz_opener, NULL, NULL),
                                           ex_task_create(lz_waiter, NULL, NULL))));
}

static ex_task_result lz_root(ex_task *t, void *arg) {
    (void)arg;
    return pass_on(ex_await(t, ex_when_all(ex_task_create(lz_filler, (void *)1, NULL),
                                           ex_task_create(lz_filler, (void *)2, NULL),
                                           ex_task_create(lz_middle, NULL, NULL))));
}

Test(exec_task_fork, a_child_held_back_starts_when_its_sibling_waits_for_it) {
    for (unsigned workers = 1; workers <= 2; workers++) {
        S.pool = make_pool(workers);
        for (int round = 0; round < 20; round++) {
            reset_state();
            atomic_store(&lz_gate, NULL);
            ex_result r = run_on_pool(ex_task_create(lz_root, NULL, NULL));
            expect_disp(&r, EX_DISP_VALUE);
            cr_assert_eq(r.n, 2, "%u workers, round %d: %zu values", workers, round, r.n);
            cr_assert_eq(r.values[0].as.i, 4);
            cr_assert_eq(r.values[1].as.i, 5);
            for (int i = 1; i <= 5; i++)
                if (i != 3) cr_assert_eq(atomic_load(&S.runs[i]), 1, "child %d ran %d times", i, atomic_load(&S.runs[i]));
            ex_result_destroy(&r);
        }
        ex_pool_destroy(S.pool);
    }
    EXPECT_PROBE();
    expect_no_leaks();
}
