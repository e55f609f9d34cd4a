/* SPDX-License-Identifier: MIT */
/* [task] ex_await_all: awaiting n senders at once gives what ex_await of
 * their ex_when_all_n gives (values in order, when_all's errors and
 * refusals, the first error wins and stops the others), and a fork of
 * fresh affine tasks runs without building the when_all sender.
 *
 * Bodies never assert (TCHECK into the probe; EXPECT_PROBE at the end). */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "task/local_fixtures.h"

TEST_SUITE(exec_task_await_all, 60);

/* ------------------------------------------------------ values in order */

/* Child i of n: yields 2 (n - i) times (the earlier children complete
 * last), then sends 10 i + 1. */
static ex_task_result yielding_child(ex_task *t, void *arg) {
    intptr_t i = (intptr_t)arg;
    for (intptr_t k = 0; k < 2 * (6 - i); k++) TCHECK(ex_task_yield(t).code == 0);
    TCHECK(on_home());
    return child_value(t, arg);
}

static ex_task_result ordered_parent(ex_task *t, void *arg) {
    size_t n = (size_t)(uintptr_t)arg;
    ex_sender *kids[6];
    for (size_t i = 0; i < n; i++) kids[i] = ex_task_create(yielding_child, (void *)(uintptr_t)i, NULL);
    ex_await_result r = ex_await_all_n(t, kids, n);
    TCHECK(on_home());
    return pass_on(r);
}

static void values_arrive_in_child_order_on(unsigned workers) {
    (void)workers;
    for (int round = 0; round < 20; round++) {
        for (size_t n = 1; n <= 6; n++) {
            ex_result r = run_round(ordered_parent, (void *)(uintptr_t)n);
            expect_disp(&r, EX_DISP_VALUE);
            cr_assert_eq(r.n, n, "%zu values from %zu children", r.n, n);
            for (size_t i = 0; i < n; i++) {
                cr_assert_eq(r.values[i].as.i, 10 * (int64_t)i + 1, "%zu children: value %zu is %lld", n, i,
                             (long long)r.values[i].as.i);
                cr_assert_eq(atomic_load(&FS.runs[i]), 1, "child %zu ran %d times", i, atomic_load(&FS.runs[i]));
            }
            ex_result_destroy(&r);
        }
    }
}

Test(exec_task_await_all, values_arrive_in_child_order) { for_pools(0, 2, values_arrive_in_child_order_on); }

/* Other senders among the children, an EX_TASK_INLINE child, a fork too
 * big for a small stack's await area: when_all's path, the same values. */
static ex_task_result mixed_parent(ex_task *t, void *arg) {
    (void)arg;
    ex_task_options inl = { .affinity = EX_TASK_INLINE };
    ex_await_result r = ex_await_all(t, ex_task_create(child_value, (void *)1, NULL), ex_just(ex_int(7), ex_int(8)),
                                     ex_task_create(child_value, (void *)2, &inl));
    TCHECK(r.status == EX_AWAIT_VALUE && r.n == 4);
    if (r.status != EX_AWAIT_VALUE || r.n != 4) return pass_on(r);
    TCHECK(r.v[0].as.i == 11 && r.v[1].as.i == 7 && r.v[2].as.i == 8 && r.v[3].as.i == 21);
    r = ex_await_all(t, ex_just());
    TCHECK(r.status == EX_AWAIT_VALUE && r.n == 0);
    TCHECK(on_home());
    return ex_task_i64(1);
}

static ex_task_result small_parent(ex_task *t, void *arg) {
    (void)arg;
    ex_await_result r = ex_await_all(t, ex_task_create(child_value, (void *)3, NULL),
                                     ex_task_create(child_value, (void *)4, NULL));
    TCHECK(r.status == EX_AWAIT_VALUE && r.n == 2 && r.v[0].as.i == 31 && r.v[1].as.i == 41);
    return ex_task_i64(1);
}

static void other_senders_among_the_children_keep_the_order_on(unsigned workers) {
    (void)workers;
    for (int round = 0; round < 10; round++) {
        ex_result r = run_round(mixed_parent, NULL);
        expect_value_int(&r, 1);
        ex_result_destroy(&r);
        cr_assert_eq(atomic_load(&FS.runs[1]) + atomic_load(&FS.runs[2]), 2);
        /* A 4096-byte stack's await area (256 bytes) holds no fork. */
        ex_task_options small = { .stack_size = 4096 };
        reset_state();
        r = run_on_pool(ex_task_create(small_parent, NULL, &small));
        expect_value_int(&r, 1);
        ex_result_destroy(&r);
        cr_assert_eq(atomic_load(&FS.runs[3]) + atomic_load(&FS.runs[4]), 2);
    }
}

Test(exec_task_await_all, other_senders_among_the_children_keep_the_order) {
    for_pools(0, 2, other_senders_among_the_children_keep_the_order_on);
}

/* ------------------------------------------------ no when_all is built */

enum { FORKS = 50 };

/* Awaits FORKS pairs of children created beforehand, each pair with
 * ex_await_all (arg NULL) or ex_await of their ex_when_all; the
 * allocations of the default allocator during the awaits go to FS.code. */
static ex_task_result counting_parent(ex_task *t, void *arg) {
    bool through_when_all = arg != NULL;
    ex_sender *kids[FORKS][2];
    for (int i = 0; i < FORKS; i++)
        for (int j = 0; j < 2; j++) kids[i][j] = ex_task_create(child_value, (void *)(intptr_t)j, NULL);
    long before = test_alloc_count();
    for (int i = 0; i < FORKS; i++) {
        ex_await_result r = through_when_all ? ex_await(t, ex_when_all_n(kids[i], 2)) : ex_await_all_n(t, kids[i], 2);
        TCHECK(r.status == EX_AWAIT_VALUE && r.n == 2 && r.v[0].as.i == 1 && r.v[1].as.i == 11);
    }
    atomic_store(&FS.code, (int)(test_alloc_count() - before));
    return ex_task_i64(1);
}

static long allocations_of(bool through_when_all) {
    ex_result r = run_round(counting_parent, through_when_all ? (void *)1 : NULL);
    expect_value_int(&r, 1);
    ex_result_destroy(&r);
    cr_assert_eq(atomic_load(&FS.runs[0]), FORKS);
    cr_assert_eq(atomic_load(&FS.runs[1]), FORKS);
    return atomic_load(&FS.code);
}

static void a_fork_of_tasks_allocates_no_when_all_on(unsigned workers) {
    long direct = allocations_of(false), through = allocations_of(true);
    cr_assert_eq(direct, 0, "%u workers: ex_await_all of two tasks allocated %ld times in %d forks", workers,
                 direct, FORKS);
    cr_assert_geq(through, FORKS, "%u workers: the when_all path allocated %ld times in %d forks (the "
                  "comparison means nothing if it does not allocate)", workers, through, FORKS);
}

Test(exec_task_await_all, a_fork_of_tasks_allocates_no_when_all) {
    for_pools(1, 2, a_fork_of_tasks_allocates_no_when_all_on);
}

/* ------------------------------------------- when_all's errors, as is */

/* What ex_await of ex_when_all_n(kids, n) refuses with: its message. */
static const char *when_all_refusal(ex_sender *const *kids, size_t n, char *buf, size_t cap) {
    ex_sender *w = ex_when_all_n(kids, n);
    ex_error e = ex_sender_status(w);
    snprintf(buf, cap, "%s", e.msg ? e.msg : "");
    ex_sender_release(w);
    return buf;
}

static ex_task_result three_ints(ex_task *t, void *arg) {
    (void)t;
    atomic_fetch_add(&FS.runs[(intptr_t)arg & 15], 1);
    ex_value v[3] = { ex_int(1), ex_int(2), ex_int(3) };
    return ex_task_values(3, v);
}

static const ex_sig sig_three_ints = EX_SIG(EX_T_INT, EX_T_INT, EX_T_INT);

static ex_task_result refused_parent(ex_task *t, void *arg) {
    (void)arg;
    char want[512];
    /* A NULL child: the others are released, none runs. */
    ex_sender *kids[3] = { ex_task_create(child_value, (void *)1, NULL), NULL, ex_just(ex_int(3)) };
    ex_sender *probe_kids[3] = { ex_just(), NULL, ex_just() };
    when_all_refusal(probe_kids, 3, want, sizeof want);
    ex_await_result r = ex_await_all_n(t, kids, 3);
    TCHECK(r.status == EX_AWAIT_ERROR && r.error.code == EX_EINVAL);
    if (r.status == EX_AWAIT_ERROR) {
        TCHECK(r.error.msg && strcmp(r.error.msg, want) == 0);
        ex_error_release(r.error);
    }
    /* No children, no array. */
    r = ex_await_all_n(t, kids, 0);
    TCHECK(r.status == EX_AWAIT_ERROR && r.error.code == EX_EINVAL);
    if (r.status == EX_AWAIT_ERROR) ex_error_release(r.error);
    r = ex_await_all_n(t, NULL, 2);
    TCHECK(r.status == EX_AWAIT_ERROR && r.error.code == EX_EINVAL);
    if (r.status == EX_AWAIT_ERROR) ex_error_release(r.error);
    /* Nine values declared in all (three tasks of three): refused before
     * any runs, with when_all's message. */
    ex_task_options three = { .value_sig = &sig_three_ints };
    ex_sender *probe9[3] = { ex_just(ex_int(1), ex_int(2), ex_int(3)), ex_just(ex_int(1), ex_int(2), ex_int(3)),
                             ex_just(ex_int(1), ex_int(2), ex_int(3)) };
    when_all_refusal(probe9, 3, want, sizeof want);
    r = ex_await_all(t, ex_task_create(three_ints, (void *)2, &three), ex_task_create(three_ints, (void *)3, &three),
                     ex_task_create(three_ints, (void *)4, &three));
    TCHECK(r.status == EX_AWAIT_ERROR && r.error.code == EX_EINVAL);
    if (r.status == EX_AWAIT_ERROR) {
        TCHECK(r.error.msg && strcmp(r.error.msg, want) == 0);
        ex_error_release(r.error);
    }
    /* Eight fit. */
    ex_task_options one = { .value_sig = &sig_int };
    r = ex_await_all(t, ex_task_create(three_ints, (void *)5, &three), ex_task_create(three_ints, (void *)6, &three),
                     ex_task_create(child_value, (void *)7, &one), ex_task_create(child_value, (void *)8, &one));
    TCHECK(r.status == EX_AWAIT_VALUE && r.n == 8);
    if (r.status == EX_AWAIT_VALUE && r.n == 8) TCHECK(r.v[3].as.i == 1 && r.v[6].as.i == 71 && r.v[7].as.i == 81);
    return ex_task_i64(1);
}

static void when_alls_refusals_come_back_with_its_messages_on(unsigned workers) {
    (void)workers;
    ex_result r = run_round(refused_parent, NULL);
    expect_value_int(&r, 1);
    ex_result_destroy(&r);
    for (int i = 1; i <= 4; i++) cr_assert_eq(atomic_load(&FS.runs[i]), 0, "child %d of a refused await ran", i);
    for (int i = 5; i <= 8; i++) cr_assert_eq(atomic_load(&FS.runs[i]), 1, "child %d ran %d times", i, atomic_load(&FS.runs[i]));
}

Test(exec_task_await_all, when_alls_refusals_come_back_with_its_messages) {
    for_pools(0, 2, when_alls_refusals_come_back_with_its_messages_on);
}

/* A task connected before, first or last among the children: EX_EINVAL,
 * the others released unrun; the task forks again afterwards. */
static ex_task_result reused_parent(ex_task *t, void *arg) {
    ex_sender *connected = arg;
    ex_sender_retain(connected);
    ex_await_result r = ex_await_all(t, connected, ex_task_create(child_value, (void *)1, NULL));
    TCHECK(r.status == EX_AWAIT_ERROR && r.error.code == EX_EINVAL);
    if (r.status == EX_AWAIT_ERROR) ex_error_release(r.error);
    r = ex_await_all(t, ex_task_create(child_value, (void *)2, NULL), connected);
    TCHECK(r.status == EX_AWAIT_ERROR && r.error.code == EX_EINVAL);
    if (r.status == EX_AWAIT_ERROR) ex_error_release(r.error);
    r = ex_await_all(t, ex_task_create(child_value, (void *)3, NULL), ex_task_create(child_value, (void *)4, NULL));
    TCHECK(r.status == EX_AWAIT_VALUE && r.n == 2 && r.v[0].as.i == 31 && r.v[1].as.i == 41);
    TCHECK(on_home());
    return ex_task_i64(1);
}

static void a_task_connected_before_gives_einval_and_runs_nothing_on(unsigned workers) {
    (void)workers;
    reset_state();
    rec rr;
    ex_operation *op;
    ex_sender *connected = connected_task(5, &rr, &op);
    ex_result r = run_on_pool(ex_task_create(reused_parent, connected, NULL));
    expect_value_int(&r, 1);
    ex_result_destroy(&r);
    drop_connected(op, &rr);
    for (int i = 1; i <= 5; i++) {
        int want = i == 3 || i == 4;
        cr_assert_eq(atomic_load(&FS.runs[i]), want, "child %d ran %d times", i, atomic_load(&FS.runs[i]));
    }
}

Test(exec_task_await_all, a_task_connected_before_gives_einval_and_runs_nothing) {
    for_pools(1, 2, a_task_connected_before_gives_einval_and_runs_nothing_on);
}

/* ------------------------------------------------------- stop and NULL */

static ex_task_result failing_child(ex_task *t, void *arg) {
    (void)t;
    atomic_fetch_add(&FS.runs[(intptr_t)arg & 15], 1);
    return ex_task_with_error(ex_err(EX_EIO, "child failed"));
}

/* Child 0 waits, yielding, until its token is stopped (the failing
 * sibling's error stops it), then notes it. */
static ex_task_result stoppable_child(ex_task *t, void *arg) {
    atomic_fetch_add(&FS.runs[(intptr_t)arg & 15], 1);
    ex_stop_token tok = ex_task_stop_token(t);
    for (long k = 0; k < 1000000 && !ex_stop_token_stop_requested(tok); k++)
        if (ex_task_yield(t).code) break;
    if (ex_stop_token_stop_requested(tok)) atomic_fetch_add(&FS.stops[(intptr_t)arg & 15], 1);
    return ex_task_i64(0);
}

static ex_task_result error_parent(ex_task *t, void *arg) {
    (void)arg;
    ex_await_result r = ex_await_all(t, ex_task_create(stoppable_child, (void *)0, NULL),
                                     ex_task_create(failing_child, (void *)1, NULL));
    TCHECK(r.status == EX_AWAIT_ERROR && r.error.code == EX_EIO);
    if (r.status == EX_AWAIT_ERROR) ex_error_release(r.error);
    /* Stopped for good afterwards?  No: an error does not stop the parent. */
    r = ex_await_all(t, ex_task_create(child_value, (void *)2, NULL));
    TCHECK(r.status == EX_AWAIT_VALUE && r.n == 1 && r.v[0].as.i == 21);
    return ex_task_i64(1);
}

static void the_first_error_wins_and_stops_the_sibling_on(unsigned workers) {
    (void)workers;
    for (int round = 0; round < 10; round++) {
        ex_result r = run_round(error_parent, NULL);
        expect_value_int(&r, 1);
        ex_result_destroy(&r);
        cr_assert_eq(atomic_load(&FS.runs[0]), 1);
        cr_assert_eq(atomic_load(&FS.runs[1]), 1);
        cr_assert_eq(atomic_load(&FS.stops[0]), 1, "the sibling of the failed child never saw stop");
    }
}

Test(exec_task_await_all, the_first_error_wins_and_stops_the_sibling) {
    for_pools(0, 2, the_first_error_wins_and_stops_the_sibling_on);
}

/* A task stopped by an earlier await: ex_await_all gives stopped at once
 * and releases its children unrun. */
static ex_task_result stopped_parent(ex_task *t, void *arg) {
    (void)arg;
    ex_await_result r = ex_await(t, ex_just_stopped());
    TCHECK(r.status == EX_AWAIT_STOPPED);
    r = ex_await_all(t, ex_task_create(child_value, (void *)1, NULL), ex_task_create(child_value, (void *)2, NULL));
    TCHECK(r.status == EX_AWAIT_STOPPED);
    return ex_task_void();
}

static void a_stopped_task_runs_no_child_on(unsigned workers) {
    (void)workers;
    ex_result r = run_round(stopped_parent, NULL);
    expect_disp(&r, EX_DISP_STOPPED);
    ex_result_destroy(&r);
    cr_assert_eq(atomic_load(&FS.runs[1]) + atomic_load(&FS.runs[2]), 0);
}

Test(exec_task_await_all, a_stopped_task_runs_no_child) { for_pools(0, 2, a_stopped_task_runs_no_child_on); }

Test(exec_task_await_all, a_null_task_gives_einval_and_releases_the_children) {
    reset_state();
    ex_await_result r = ex_await_all(NULL, ex_task_create(child_value, (void *)1, NULL), ex_just(ex_int(2)));
    cr_assert_eq(r.status, EX_AWAIT_ERROR);
    cr_assert_eq(r.error.code, EX_EINVAL);
    ex_error_release(r.error);
    cr_assert_eq(atomic_load(&FS.runs[1]), 0);
    task_test_end(NULL, NULL);  /* the children were freed */
}
