/* SPDX-License-Identifier: MIT */
/* [task] results: what a task completes with (values, errors, stopped),
 * creation errors, laziness and single-shot connects (cexec/task.h).
 * The exec_task suite spans the task_*.c files of this folder; its
 * TestSuite (timeout) is declared here once.  Task bodies never assert:
 * see local_fixtures.h. */
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#include "task/local_fixtures.h"

TEST_SUITE(exec_task, 60);

/* rec_init with the inline scheduler in the environment. */
static void rec_init_inline(rec *rc) {
    rec_init(rc);
    rec_with_scheduler(rc, ex_inline_scheduler());
}

/* Connects s to rc in the caller's buffer; asserts connect gave `code`
 * (and returns the operation when it is 0). */
static ex_operation *connect_into(ex_sender *s, rec *rc, void *buf, size_t size, int code) {
    ex_operation *op = NULL;
    ex_error e = ex_connect(s, rec_receiver(rc), buf, size, &op);
    cr_assert_eq(e.code, code, "connect gave %d (%s)", e.code, e.msg ? e.msg : "");
    return op;
}

/* Runs a task of body (no argument) into rc, on the inline scheduler. */
static void run_raw(ex_task_fn body, rec *rc) {
    rec_init_inline(rc);
    ex_sender *s = ex_task_create(body, NULL, NULL);
    run_destroy(run_start(s, rc));
    ex_sender_release(s);
}

/* ================================================================ results */

/* What body_several and body_max_arity return. */
static void several_values(ex_value v[4]) {
    v[0] = ex_int(-3), v[1] = ex_double(2.5), v[2] = ex_str("four"), v[3] = ex_bool(true);
}

static void max_arity_values(ex_value v[EX_MAX_ARITY]) {
    for (int i = 0; i < EX_MAX_ARITY; i++) v[i] = ex_int(i * 10);
}

static ex_task_result body_several(ex_task *t, void *arg) {
    (void)t, (void)arg;
    ex_value v[4];
    several_values(v);
    return ex_task_values(4, v);
}

static ex_task_result body_max_arity(ex_task *t, void *arg) {
    (void)t, (void)arg;
    ex_value v[EX_MAX_ARITY];
    max_arity_values(v);
    return ex_task_values(EX_MAX_ARITY, v);
}

/* Asserts r completed with exactly the values want[0..n): same types, and
 * equal ints, doubles, booleans and string texts. */
static void expect_task_values(ex_result *r, size_t n, const ex_value *want) {
    expect_disp(r, EX_DISP_VALUE);
    cr_assert_eq(r->n, n);
    for (size_t i = 0; i < n; i++) {
        const ex_value *got = &r->values[i];
        cr_assert_eq(got->type, want[i].type, "value %zu: type %d, not %d", i, got->type, want[i].type);
        switch (want[i].type) {
        case EX_T_INT: cr_assert_eq(got->as.i, want[i].as.i, "value %zu", i); break;
        case EX_T_DOUBLE: cr_assert_float_eq(got->as.d, want[i].as.d, 0, "value %zu", i); break;
        case EX_T_STR: cr_assert_str_eq(got->as.s, want[i].as.s, "value %zu", i); break;
        case EX_T_BOOL: cr_assert_eq(got->as.b, want[i].as.b, "value %zu", i); break;
        default: cr_assert_fail("value %zu: type %d not compared", i, want[i].type);
        }
    }
    ex_result_destroy(r);
}

static ex_task_result body_too_many(ex_task *t, void *arg) {
    (void)t, (void)arg;
    ex_value v[EX_MAX_ARITY + 1];
    for (int i = 0; i <= EX_MAX_ARITY; i++) v[i] = ex_int(i);
    return ex_task_values(EX_MAX_ARITY + 1, v);
}

static ex_task_result body_value_double(ex_task *t, void *arg) {
    (void)t, (void)arg;
    return ex_task_value(ex_double(0.25));
}

static int error_payload;
static ex_task_result body_error(ex_task *t, void *arg) {
    (void)t, (void)arg;
    return ex_task_with_error(ex_err_data(EX_EUSER + 42, "body_error: it failed", &error_payload));
}

static ex_task_result body_stopped(ex_task *t, void *arg) {
    (void)t, (void)arg;
    return ex_task_stopped();
}

Test(exec_task, completes_with_no_value) {
    ex_result r = run(ex_task_create(body_void, NULL, NULL));
    expect_disp(&r, EX_DISP_VALUE);
    cr_assert_eq(r.n, 0);
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(exec_task, completes_with_one_value_i64) {
    int64_t x = 42;
    ex_result r = run(ex_task_create(body_i64, &x, NULL));
    expect_value_int(&r, 42);
    x = INT64_MIN;
    r = run(ex_task_create(body_i64, &x, NULL));
    expect_value_int(&r, INT64_MIN);
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(exec_task, completes_with_several_values) {
    ex_value want[EX_MAX_ARITY];
    several_values(want);
    ex_result r = run(ex_task_create(body_several, NULL, NULL));
    expect_task_values(&r, 4, want);
    max_arity_values(want);
    r = run(ex_task_create(body_max_arity, NULL, NULL));
    expect_task_values(&r, EX_MAX_ARITY, want);
    want[0] = ex_double(0.25);
    r = run(ex_task_create(body_value_double, NULL, NULL));
    expect_task_values(&r, 1, want);
    expect_no_leaks();
}

Test(exec_task, task_values_helpers_build_results) {
    ex_value v[2] = { ex_int(1), ex_str("x") };
    ex_task_result a = ex_task_values(2, v);
    cr_assert_eq(a.kind, EX_TASK_VALUE);
    cr_assert_eq(a.n, 2);
    cr_assert_eq(a.v[0].as.i, 1);
    cr_assert_str_eq(a.v[1].as.s, "x");
    ex_task_result b = ex_task_void();
    cr_assert_eq(b.kind, EX_TASK_VALUE);
    cr_assert_eq(b.n, 0);
    ex_task_result c = ex_task_i64(-9);
    cr_assert_eq(c.kind, EX_TASK_VALUE);
    cr_assert_eq(c.n, 1);
    cr_assert_eq(c.v[0].type, EX_T_INT);
    cr_assert_eq(c.v[0].as.i, -9);
    ex_task_result d = ex_task_with_error(ex_err(EX_EUSER + 1, "d"));
    cr_assert_eq(d.kind, EX_TASK_ERROR);
    cr_assert_eq(d.error.code, EX_EUSER + 1);
    cr_assert_str_eq(d.error.msg, "d");
    ex_task_result e = ex_task_stopped();
    cr_assert_eq(e.kind, EX_TASK_STOPPED);
    ex_value many[EX_MAX_ARITY + 1];
    for (int i = 0; i <= EX_MAX_ARITY; i++) many[i] = ex_int(i);
    ex_task_result f = ex_task_values(EX_MAX_ARITY + 1, many);
    cr_assert_eq(f.kind, EX_TASK_ERROR, "more than EX_MAX_ARITY values must be refused");
    cr_assert_eq(f.error.code, EX_EINVAL);
    expect_no_leaks();
}

Test(exec_task, too_many_values_complete_with_einval) {
    ex_result r = run(ex_task_create(body_too_many, NULL, NULL));
    expect_error(&r, EX_EINVAL);
    expect_no_leaks();
}

/* The error body_error returns, the same in every field. */
static void expect_body_error(ex_error e) {
    cr_assert_eq(e.code, EX_EUSER + 42);
    cr_assert_str_eq(e.msg, "body_error: it failed");
    cr_assert_eq(e.data, &error_payload);
}

Test(exec_task, with_error_completes_set_error_with_the_same_error) {
    ex_result r = run(ex_task_create(body_error, NULL, NULL));
    expect_error(&r, EX_EUSER + 42);
    expect_body_error(r.error);

    /* The same through a raw receiver. */
    rec rc;
    run_raw(body_error, &rc);
    rec_expect_error(&rc, EX_EUSER + 42);
    expect_body_error(rc.err);
    expect_no_leaks();
}

Test(exec_task, task_stopped_completes_set_stopped) {
    ex_result r = run(ex_task_create(body_stopped, NULL, NULL));
    expect_disp(&r, EX_DISP_STOPPED);
    rec rc;
    run_raw(body_stopped, &rc);
    rec_expect_stopped(&rc);
    expect_no_leaks();
}

Test(exec_task, value_sig_gives_the_completion_signatures) {
    ex_task_options o = { .value_sig = &sig_int };
    ex_sender *s = ex_task_create(body_i64, NULL, &o);
    cr_assert_eq(ex_sender_status(s).code, 0);
    const ex_sigs *sg = ex_sender_sigs(s);
    cr_assert_eq(sg->nvalues, 1);
    cr_assert_eq(sg->values[0].arity, 1);
    cr_assert_eq(sg->values[0].types[0], EX_T_INT);
    cr_assert(sg->flags & EX_SIGS_ERROR);
    cr_assert(sg->flags & EX_SIGS_STOPPED);
    cr_assert_not(sg->flags & EX_SIGS_DYNAMIC);
    ex_sender_release(s);

    s = ex_task_create(body_i64, NULL, NULL);
    sg = ex_sender_sigs(s);
    cr_assert(sg->flags & EX_SIGS_DYNAMIC, "no value_sig: the values are dynamic");
    cr_assert(sg->flags & EX_SIGS_ERROR);
    cr_assert(sg->flags & EX_SIGS_STOPPED);
    ex_sender_release(s);

    /* A typed task composes with then. */
    int64_t x = 41;
    ex_result r = run(ex_then(ex_task_create(body_i64, &x, &o), add_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)));
    expect_value_int(&r, 42);
    expect_no_leaks();
}

/* ====================================================== creation errors */

Test(exec_task, create_rejects_bad_arguments) {
    ex_sender *s = ex_task_create(NULL, NULL, NULL);
    cr_assert_not_null(s, "ex_task_create never returns NULL");
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    ex_result r = run(s);
    expect_error(&r, EX_EINVAL);

    ex_task_options o = { .affinity = (ex_task_affinity)7 };
    s = ex_task_create(body_void, NULL, &o);
    cr_assert_not_null(s);
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL, "a bad affinity is EX_EINVAL");
    ex_sender_release(s);

    memset(&o, 0, sizeof o);
    o.stack_size = 100;
    s = ex_task_create(body_void, NULL, &o);
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL, "a tiny stack is EX_EINVAL");
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_task, create_out_of_memory_gives_an_enomem_sender) {
    test_alloc_fail_at(1);
    ex_sender *s = ex_task_create(body_void, NULL, NULL);
    cr_assert_not_null(s);
    cr_assert_eq(ex_sender_status(s).code, EX_ENOMEM);
    ex_result r = run(s);
    expect_error(&r, EX_ENOMEM);
    expect_no_leaks();
}

/* ================================================ laziness, single shot */

Test(exec_task, lazy_nothing_runs_before_start) {
    atomic_int ran = 0;
    cnt_alloc stacks;
    cnt_alloc_init(&stacks);
    ex_task_options o = { .stack_allocator = &stacks.base };
    ex_sender *s = ex_task_create(body_mark, &ran, &o);
    cr_assert_eq(atomic_load(&ran), 0, "creating a task must not run it");
    rec rc;
    rec_init_inline(&rc);
    _Alignas(max_align_t) unsigned char buf[4096];
    cr_assert_leq(ex_sender_op_size(s), sizeof buf);
    ex_operation *op = connect_into(s, &rc, buf, sizeof buf, 0);
    cr_assert_eq(atomic_load(&ran), 0, "connecting a task must not run it");
    cr_assert_eq(atomic_load(&stacks.allocs), 0, "connecting a task must not take its stack");
    cr_assert_eq(rec_total(&rc), 0);
    ex_start(op);
    cr_assert_eq(atomic_load(&ran), 1);
    rec_expect_value_int(&rc, 5);
    cr_assert_eq(atomic_load(&stacks.allocs), 1);
    cr_assert_eq(atomic_load(&stacks.in_use), 0, "the stack is returned when the task completes");
    ex_operation_destroy(op);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_task, created_but_never_connected_leaks_nothing) {
    atomic_int ran = 0;
    ex_sender_release(ex_task_create(body_mark, &ran, NULL));
    ex_task_options o = { .affinity = EX_TASK_INLINE, .stack_size = 32768 };
    ex_sender_release(ex_task_create(body_mark, &ran, &o));
    cr_assert_eq(atomic_load(&ran), 0);
    expect_no_leaks();
}

Test(exec_task, connected_but_never_started_leaks_nothing) {
    atomic_int ran = 0;
    cnt_alloc stacks, frames;
    cnt_alloc_init(&stacks);
    cnt_alloc_init(&frames);
    ex_task_options o = { .stack_allocator = &stacks.base, .allocator = &frames.base };

    /* caller storage */
    ex_sender *s = ex_task_create(body_mark, &ran, &o);
    rec rc;
    rec_init_inline(&rc);
    _Alignas(max_align_t) unsigned char buf[4096];
    ex_operation *op = connect_into(s, &rc, buf, sizeof buf, 0);
    ex_operation_destroy(op);
    ex_sender_release(s);

    /* storage from the environment's allocator */
    s = ex_task_create(body_mark, &ran, &o);
    cr_assert_eq(ex_connect_alloc(s, rec_receiver(&rc), &op).code, 0);
    ex_operation_free(op);
    ex_sender_release(s);

    cr_assert_eq(atomic_load(&ran), 0);
    cr_assert_eq(rec_total(&rc), 0);
    cr_assert_eq(atomic_load(&stacks.allocs), 0);
    cr_assert_eq(atomic_load(&frames.in_use), 0);
    expect_no_leaks();
}

Test(exec_task, second_connect_is_einval) {
    atomic_int ran = 0;
    ex_sender *s = ex_task_create(body_mark, &ran, NULL);
    ex_result r = run(ex_sender_retain(s));
    expect_value_int(&r, 5);
    r = run(ex_sender_retain(s));
    expect_error(&r, EX_EINVAL);
    cr_assert_eq(atomic_load(&ran), 1, "a task runs once");
    ex_sender_release(s);

    /* Two connects before any start: the second fails, the first still runs. */
    s = ex_task_create(body_mark, &ran, NULL);
    rec a, b;
    rec_init_inline(&a);
    rec_init_inline(&b);
    _Alignas(max_align_t) unsigned char buf1[4096], buf2[4096];
    ex_operation *op1 = connect_into(s, &a, buf1, sizeof buf1, 0);
    connect_into(s, &b, buf2, sizeof buf2, EX_EINVAL);
    ex_start(op1);
    rec_expect_value_int(&a, 5);
    cr_assert_eq(rec_total(&b), 0);
    cr_assert_eq(atomic_load(&ran), 2);
    ex_operation_destroy(op1);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_task, no_scheduler_in_the_receiver_env_is_einval) {
    atomic_int ran = 0;
    ex_sender *s = ex_task_create(body_mark, &ran, NULL);
    rec rc;
    rec_init(&rc);  /* empty environment */
    _Alignas(max_align_t) unsigned char buf[4096];
    ex_operation *op;
    ex_error e = ex_connect(s, rec_receiver(&rc), buf, sizeof buf, &op);
    cr_assert_eq(e.code, EX_EINVAL);
    cr_assert_not_null(e.msg);
    cr_assert_eq(atomic_load(&ran), 0);
    cr_assert_eq(rec_total(&rc), 0);
    /* A refused connect did not use up the task. */
    ex_result r = run(s);
    expect_value_int(&r, 5);
    cr_assert_eq(atomic_load(&ran), 1);
    expect_no_leaks();
}

Test(exec_task, inline_affinity_needs_no_scheduler) {
    atomic_int ran = 0;
    ex_task_options o = { .affinity = EX_TASK_INLINE };
    ex_sender *s = ex_task_create(body_mark, &ran, &o);
    rec rc;
    rec_init(&rc);  /* empty environment */
    _Alignas(max_align_t) unsigned char buf[4096];
    ex_operation *op = connect_into(s, &rc, buf, sizeof buf, 0);
    ex_start(op);
    cr_assert_eq(rc.values, 1, "an inline task without awaits completes inside start");
    rec_expect_value_int(&rc, 5);
    cr_assert_eq(rc.thread, test_thread_id());
    ex_operation_destroy(op);
    ex_sender_release(s);
    expect_no_leaks();
}
