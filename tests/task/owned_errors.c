/* SPDX-License-Identifier: MIT */
/* [task] owned errors (cexec/error.h) in tasks: an await's error is the
 * body's (returned with ex_task_with_error, or released), a stopped task
 * releases the error its body returned, a fork keeps the first child's,
 * and ex_task_launch gives it to the handler or to the scope's join. */
#include <string.h>

#include "task/local_fixtures.h"

TEST_SUITE(task_owned_errors, 30);

static ex_task_result pass_it_on(ex_task *t, void *arg) {
    (void)arg;
    ex_await_result r = ex_await(t, ex_just_error(owned_error(1)));
    TCHECK(r.status == EX_AWAIT_ERROR);
    return ex_task_with_error(r.error);
}

Test(task_owned_errors, the_body_returns_the_awaited_error) {
    owned_errors_reset();
    ex_result r = run(ex_task_create(pass_it_on, NULL, NULL));
    expect_error(&r, EX_EUSER + 1);
    cr_assert_eq(owned_error_id(r.error), 1);
    ex_result_destroy(&r);
    EXPECT_PROBE();
    expect_owned_all_released(1);
}

static ex_task_result release_and_carry_on(ex_task *t, void *arg) {
    (void)arg;
    ex_await_result r = ex_await(t, ex_just_error(owned_error(2)));
    TCHECK(r.status == EX_AWAIT_ERROR && ex_error_is_owned(r.error));
    ex_error_release(r.error);
    ex_value v = ex_int(9);
    return ex_task_values(1, &v);
}

Test(task_owned_errors, the_body_releases_the_awaited_error) {
    owned_errors_reset();
    ex_result r = run(ex_task_create(release_and_carry_on, NULL, NULL));
    expect_value_int(&r, 9);
    ex_result_destroy(&r);
    EXPECT_PROBE();
    expect_owned_all_released(1);
}

static ex_task_result error_after_stop(ex_task *t, void *arg) {
    (void)arg;
    ex_await_result r = ex_await(t, ex_just_stopped());
    TCHECK(r.status == EX_AWAIT_STOPPED);
    return ex_task_with_error(owned_error(3));  /* the task is stopped: nobody sees this */
}

Test(task_owned_errors, a_stopped_task_releases_the_error_its_body_returned) {
    owned_errors_reset();
    ex_result r = run(ex_task_create(error_after_stop, NULL, NULL));
    expect_disp(&r, EX_DISP_STOPPED);
    ex_result_destroy(&r);
    EXPECT_PROBE();
    expect_owned_all_released(1);
}

static ex_task_result fail_with(ex_task *t, void *arg) {
    (void)t;
    return ex_task_with_error(owned_error((int)(intptr_t)arg));
}

static ex_task_result fork_of_failures(ex_task *t, void *arg) {
    (void)arg;
    ex_await_result r = ex_await(t, ex_when_all(ex_task_create(fail_with, (void *)1, NULL),
                                                ex_task_create(fail_with, (void *)2, NULL),
                                                ex_task_create(fail_with, (void *)3, NULL)));
    TCHECK(r.status == EX_AWAIT_ERROR);
    return ex_task_with_error(r.error);
}

Test(task_owned_errors, a_fork_keeps_the_first_error_and_releases_the_others) {
    owned_errors_reset();
    ex_pool *p = test_pool_new(2);
    for (int i = 0; i < 20; i++) {
        ex_result r = run(ex_starts_on(ex_pool_scheduler(p), ex_task_create(fork_of_failures, NULL, NULL)));
        expect_error(&r, EX_EUSER + 1);
        int id = owned_error_id(r.error);
        cr_assert(id >= 1 && id <= 3);
        ex_result_destroy(&r);
    }
    test_pool_free(p);
    EXPECT_PROBE();
    int made = atomic_load(&owned_made);  /* a child stopped before its body ran made none */
    cr_assert_geq(made, 20);
    expect_owned_all_released(made);
}

static atomic_int handled;

static void on_error_release(void *ctx, ex_error e) {
    (void)ctx;
    if (ex_error_is_owned(e)) atomic_fetch_add(&handled, 1);
    ex_error_release(e);
}

Test(task_owned_errors, launch_gives_it_to_the_handler_or_to_the_scope) {
    owned_errors_reset();
    ex_pool *p = test_pool_new(2);
    ex_counting_scope sc;
    cr_assert_eq(ex_counting_scope_init(&sc).code, EX_OK);
    ex_task_handlers h = { NULL, on_error_release, NULL, NULL };
    for (int i = 0; i < 4; i++)
        cr_assert_eq(ex_task_launch(ex_counting_scope_token(&sc), ex_pool_scheduler(p),
                                    ex_task_create(fail_with, (void *)(intptr_t)i, NULL), &h).code,
                     EX_OK);
    cr_assert_eq(ex_task_launch(ex_counting_scope_token(&sc), ex_pool_scheduler(p),
                                ex_task_create(fail_with, (void *)(intptr_t)10, NULL), NULL).code,
                 EX_OK);
    ex_result r = run(ex_counting_scope_join(&sc));
    expect_error(&r, EX_EUSER + 1);
    cr_assert_eq(owned_error_id(r.error), 10, "the unhandled error did not reach the join");
    ex_result_destroy(&r);
    cr_assert_eq(atomic_load(&handled), 4);
    cr_assert_eq(ex_counting_scope_destroy(&sc).code, EX_OK);
    test_pool_free(p);
    expect_owned_all_released(5);
}

/* A scheduler over a single-thread context that accepts its first
 * schedule (the task's start) and refuses every later one: the hop back
 * after an await fails. */
typedef struct refusing_sched {
    ex_scheduler under;
    atomic_int schedules;
} refusing_sched;

static ex_error refusing_connect(void *self, ex_receiver r, void *storage) {
    refusing_sched *w = self;
    if (atomic_fetch_add(&w->schedules, 1) > 0) return ex_err(EX_ESHUTDOWN, "test: the scheduler refuses");
    return ex_connect_schedule(w->under, r, storage);
}

static ex_scheduler_vtable refusing_vt;

static ex_scheduler refusing_scheduler(refusing_sched *w, ex_scheduler under) {
    w->under = under;
    atomic_init(&w->schedules, 0);
    memset(&refusing_vt, 0, sizeof refusing_vt);
    refusing_vt.name = "test.refusing";
    refusing_vt.schedule_op_size = under.vt->schedule_op_size;
    refusing_vt.schedule_op_align = under.vt->schedule_op_align;
    refusing_vt.schedule_flags = under.vt->schedule_flags | EX_SIGS_ERROR;
    refusing_vt.connect_schedule = refusing_connect;
    refusing_vt.progress = under.vt->progress;
    ex_scheduler s = { &refusing_vt, w };
    return s;
}

typedef struct elsewhere {
    ex_pool *pool;
    ex_scheduler context;  /* the context under the refusing scheduler */
} elsewhere;

static ex_sender *error_4(void *ctx, const ex_value *in, size_t n) {
    (void)ctx, (void)in, (void)n;
    return ex_just_error(owned_error(4));
}

/* The awaited error comes from the pool after a step on the task's own
 * context thread, which runs it only once the task suspended: the task
 * then must hop back.  (Straight from the pool, a worker could complete
 * the await before the task looked, under load, and no hop was tried.) */
static ex_task_result await_elsewhere(ex_task *t, void *arg) {
    const elsewhere *e = arg;
    ex_sender *s = ex_let_value(ex_schedule(e->context), error_4, NULL, EX_SIG0);
    ex_await_result r = ex_await(t, ex_continues_on(s, ex_pool_scheduler(e->pool)));
    TCHECK(r.status == EX_AWAIT_ERROR);
    TCHECK(r.error.code == EX_ESHUTDOWN);  /* the failed hop's outcome replaces the await's */
    return ex_task_with_error(r.error);
}

Test(task_owned_errors, a_failed_hop_back_releases_the_awaited_error) {
    owned_errors_reset();
    ex_pool *p = test_pool_new(1);
    ex_single_thread_context stc;
    refusing_sched w;
    elsewhere e = { p, test_stc_init(&stc) };
    ex_scheduler home = refusing_scheduler(&w, e.context);
    ex_result r = run(ex_write_env(ex_task_create(await_elsewhere, &e, NULL), &ex_key_get_scheduler, ex_sched_value(home)));
    expect_error(&r, EX_ESHUTDOWN);
    ex_result_destroy(&r);
    test_stc_destroy(&stc);
    test_pool_free(p);
    EXPECT_PROBE();
    cr_assert_geq(atomic_load(&w.schedules), 2, "no hop back was tried");
    expect_owned_all_released(1);
}
