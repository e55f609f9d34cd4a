/* SPDX-License-Identifier: MIT */
/* [task] fork values: ex_await of an ex_when_all whose children are all
 * affine tasks runs as a "fork" (src/task/task_await.c, "a when_all of tasks"): the
 * children's control blocks go into the awaiting task's await area, all
 * but the last are queued where thieves may take them, the last runs at
 * once, nested.  Its values are when_all's: concatenated in child order;
 * and what falls back to the generic when_all (a child that is not a task,
 * a fork too big for the await area) gives the same results.  The
 * exec_task_fork suite spans the fork_*.c files; its TestSuite (timeout) is
 * declared here once.
 *
 * Bodies never assert (TCHECK into the probe; EXPECT_PROBE at the end). */
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "task/local_fixtures.h"

TEST_SUITE(exec_task_fork, 60);

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
    atomic_fetch_add(&FS.runs[i], 1);
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
        ex_result r = run_round(parent_spec, NULL);
        expect_disp(&r, EX_DISP_VALUE);
        size_t k = 0;
        for (int i = 0; i < sp->n; i++) {
            cr_assert_eq(atomic_load(&FS.runs[i]), 1, "child %d ran %d times", i, atomic_load(&FS.runs[i]));
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
    task_test_end(NULL, NULL);
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
    ex_task_options inl = { .affinity = EX_TASK_INLINE };
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
        use_pool(workers);
        for (int round = 0; round < 20; round++) {
            ex_result r = run_round(e_mixed, NULL);
            expect_disp(&r, EX_DISP_VALUE);
            cr_assert_eq(r.n, 3);
            cr_assert_eq(r.values[0].as.i, 11);
            cr_assert_eq(r.values[1].as.i, 7);
            cr_assert_eq(r.values[2].as.i, 21);
            for (int i = 1; i <= 5; i++) cr_assert_eq(atomic_load(&FS.runs[i]), 1, "child %d ran %d times", i, atomic_load(&FS.runs[i]));
            ex_result_destroy(&r);
        }
        drop_pool();
    }
    task_test_end(NULL, NULL);
}

/* An EX_TASK_INLINE parent (run by sync_wait, no pool) awaiting affine
 * tasks: the generic path, through ex_await_all as well. */
static ex_task_result e_inline_parent(ex_task *t, void *arg) {
    (void)arg;
    ex_await_result r = ex_await_all(t, ex_task_create(child_value, (void *)3, NULL), ex_task_create(child_value, (void *)4, NULL));
    TCHECK(r.status == EX_AWAIT_VALUE && r.n == 2 && r.v[0].as.i == 31 && r.v[1].as.i == 41);
    r = ex_await(t, ex_when_all(ex_task_create(child_value, (void *)1, NULL), ex_task_create(child_value, (void *)2, NULL)));
    return pass_on(r);
}

Test(exec_task_fork, an_inline_parent_awaiting_a_when_all_of_tasks_gets_the_values_in_order) {
    ex_task_options o = { .affinity = EX_TASK_INLINE };
    ex_result r = ex_sync_wait(ex_task_create(e_inline_parent, NULL, &o));
    expect_disp(&r, EX_DISP_VALUE);
    cr_assert_eq(r.n, 2);
    cr_assert_eq(r.values[0].as.i, 11);
    cr_assert_eq(r.values[1].as.i, 21);
    ex_result_destroy(&r);
    task_test_end(NULL, NULL);
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
        use_pool(workers);
        reset_state();
        /* Connected with ex_connect_alloc, never started. */
        rec rr;
        ex_operation *op;
        ex_sender *connected = connected_task(10, &rr, &op);
        ex_result r = run_on_pool(ex_task_create(f_reused, connected, NULL));
        expect_value_int(&r, 1);
        ex_result_destroy(&r);
        drop_connected(op, &rr);
        for (int i = 1; i <= 9; i++) {
            int want = (i == 3 || i == 4 || i == 7) ? 0 : 1;
            cr_assert_eq(atomic_load(&FS.runs[i]), want, "child %d ran %d times", i, atomic_load(&FS.runs[i]));
        }
        cr_assert_eq(atomic_load(&FS.runs[10]), 0);
        drop_pool();
    }
    task_test_end(NULL, NULL);
}

/* --------------------------------------------------- tuples */

/* Child i: a tuple (10 i, 10 i + 1) borrowed from its last await; child 1
 * a plain int. */
static ex_task_result g_child(ex_task *t, void *arg) {
    intptr_t i = (intptr_t)arg;
    atomic_fetch_add(&FS.runs[i], 1);
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
        use_pool(workers);
        for (int round = 0; round < 20; round++) {
            reset_state();
            cnt_alloc frames;
            cnt_alloc_init(&frames);
            frames.scribble = true;  /* a tuple read after its copy was freed shows */
            ex_task_options o = { .allocator = &frames.base };
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
        drop_pool();
    }
    task_test_end(NULL, NULL);
}

/* The thread that completes is held inside the completion until the test
 * has destroyed the operation and looked at the allocator: the tuples the
 * task returned must go with the operation, not after the completion on
 * the completing thread (which raced a sync_wait that had returned and
 * dropped the allocator). */
static atomic_int held_delivered, held_released;

static void hold_in_completion(rec *r) {
    (void)r;
    atomic_store(&held_delivered, 1);
    (void)wait_int_equals(&held_released, 1);
}

Test(exec_task_fork, returned_tuples_are_freed_with_the_operation_not_after_the_completion) {
    use_pool(2);
    for (int direct = 0; direct <= 1; direct++) {
        reset_state();
        atomic_store(&held_delivered, 0);
        atomic_store(&held_released, 0);
        cnt_alloc frames;
        cnt_alloc_init(&frames);
        ex_task_options o = { .allocator = &frames.base };
        /* direct: the root returns its own await's tuple; else the fork's
         * children's, through the root. */
        ex_sender *s = direct ? ex_task_create(g_child, (void *)3, &o) : ex_task_create(g_parent, NULL, &o);
        rec rr;  /* its fields are written before held_delivered is */
        rec_init(&rr);
        rr.after = hold_in_completion;
        rec_with_scheduler(&rr, ex_pool_scheduler(FS.pool));
        ex_operation *op = NULL;
        cr_assert_eq(ex_connect_alloc(s, rec_receiver(&rr), &op).code, 0);
        ex_sender_release(s);
        ex_start(op);
        cr_assert(wait_int_equals(&held_delivered, 1), "the task did not complete");
        cr_assert_eq(rr.values, 1);
        cr_assert_str_eq(rr.text, direct ? "tuple#0(int 30, int 31)" : "tuple#0(int 0, int 1); int 99; tuple#0(int 20, int 21)");
        ex_operation_free(op);
        long left = atomic_load(&frames.in_use);
        atomic_store(&held_released, 1);
        cr_assert_eq(left, 0, "%ld blocks of the task's allocator outlived its operation", left);
        cr_assert_eq(atomic_load(&frames.in_use), 0);
    }
    drop_pool();
    task_test_end(NULL, NULL);
}

/* ------------------------------------- more than EX_MAX_ARITY values */

static ex_task_result h_three(ex_task *t, void *arg) {
    (void)t;
    intptr_t i = (intptr_t)arg;
    atomic_fetch_add(&FS.runs[i], 1);
    ex_value v[3] = { ex_int(i), ex_int(i), ex_int(i) };
    return ex_task_values(3, v);
}

/* One value declared, two sent. */
static ex_task_result h_liar(ex_task *t, void *arg) {
    (void)t, (void)arg;
    ex_value v[2] = { ex_int(1), ex_int(2) };
    return ex_task_values(2, v);
}

static const ex_sig sig_3int = { 3, { EX_T_INT, EX_T_INT, EX_T_INT } };

static ex_task_result h_parent(ex_task *t, void *arg) {
    (void)arg;
    /* run-time signatures: found when the values arrive */
    ex_await_result r = ex_await(t, ex_when_all(ex_task_create(h_three, (void *)0, NULL), ex_task_create(h_three, (void *)1, NULL),
                                                ex_task_create(h_three, (void *)2, NULL)));
    TCHECK(r.status == EX_AWAIT_ERROR && r.error.code == EX_EINVAL);
    /* declared signatures: found when the when_all is built */
    ex_task_options o = { .value_sig = &sig_3int };
    r = ex_await(t, ex_when_all(ex_task_create(h_three, (void *)3, &o), ex_task_create(h_three, (void *)4, &o),
                                ex_task_create(h_three, (void *)5, &o)));
    TCHECK(r.status == EX_AWAIT_ERROR && r.error.code == EX_EINVAL);
    /* a child sending more than it declared */
    o.value_sig = &sig_int;
    r = ex_await(t, ex_when_all(ex_task_create(child_value, (void *)6, &o), ex_task_create(h_liar, NULL, &o)));
    TCHECK(r.status == EX_AWAIT_ERROR);
    atomic_store(&FS.code, r.status == EX_AWAIT_ERROR ? r.error.code : -1);
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
        use_pool(workers);
        for (int round = 0; round < 10; round++) {
            ex_result r = run_round(h_parent, NULL);
            expect_value_int(&r, 1);
            ex_result_destroy(&r);
            for (int i = 0; i <= 2; i++) cr_assert_eq(atomic_load(&FS.runs[i]), 1);
            cr_assert_eq(atomic_load(&FS.runs[3]) + atomic_load(&FS.runs[4]) + atomic_load(&FS.runs[5]), 0,
                         "children of a rejected when_all ran");
            cr_assert_eq(atomic_load(&FS.code), EX_EINVAL, "a child over its signature: error %d", atomic_load(&FS.code));
        }
        drop_pool();
    }
    task_test_end(NULL, NULL);
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
    ex_task_options o = { .stack_size = stack_size };
    ex_result r = run_on_pool(ex_task_create(i_parent, (void *)(intptr_t)n, &o));
    expect_disp(&r, EX_DISP_VALUE);
    cr_assert_eq(r.n, (size_t)n, "stack %zu: %zu values of %d", stack_size, r.n, n);
    for (int i = 0; i < n; i++) {
        cr_assert_eq(r.values[i].as.i, 10 * i + 1, "stack %zu, %d children: value %d is %lld", stack_size, n, i,
                     (long long)r.values[i].as.i);
        cr_assert_eq(atomic_load(&FS.runs[i]), 1);
    }
    ex_result_destroy(&r);
}

Test(exec_task_fork, a_fork_too_big_for_the_await_area_still_gives_the_values) {
    cr_assert_lt(ex_task_await_inline_size(4096), 2 * 600, "a 2-child fork would fit a 4096-byte task's await area");
    for (unsigned workers = 1; workers <= 2; workers++) {
        use_pool(workers);
        for (int round = 0; round < 5; round++) {
            for (int n = 1; n <= 8; n++) expect_n_values(n, 0);  /* up to 6 fit the default 4 KiB */
            for (int n = 1; n <= 3; n++) expect_n_values(n, 4096);
            for (int n = 1; n <= 3; n++) expect_n_values(n, 16384);  /* one child fits its 1 KiB, two do not */
            expect_n_values(8, 16384);
        }
        drop_pool();
    }
    task_test_end(NULL, NULL);
}
