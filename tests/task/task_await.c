/* SPDX-License-Identifier: MIT */
/* [task] awaiting: ex_await of senders and of other tasks, where the
 * awaited operation lives and what awaited values point to (exec_task
 * suite, see task_results.c). */
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

/* int -> error EX_EUSER + in */
static ex_error fail_with(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)n, (void)out;
    return ex_err(EX_EUSER + (int)in[0].as.i, "fail_with");
}

/* A sender of `size` bytes completing with one int value, whose operation
 * takes op_size bytes; NULL when out of memory. */
static ex_sender *int_sender_alloc(const ex_sender_vtable *vt, size_t size, size_t op_size, size_t op_align,
                                   uint8_t flags) {
    ex_sender *s = ex_sender_alloc(vt, size);
    if (!s) return NULL;
    s->sigs.nvalues = 1;
    s->sigs.values[0] = sig_int;
    s->sigs.flags = flags;
    s->op_size = op_size;
    s->op_align = op_align;
    return s;
}

/* The head of the operations of the int senders here: their receiver and
 * the value they complete with. */
typedef struct int_op {
    ex_operation base;
    ex_receiver r;
    int64_t v;
} int_op;

static void int_op_init(int_op *o, const ex_operation_vtable *vt, ex_receiver r, int64_t v) {
    o->base.vt = vt;
    o->r = r;
    o->v = v;
}

/* Completes the operation with set_value(int v). */
static void int_op_send(int_op *o) {
    ex_value x = ex_int(o->v);
    ex_set_value(o->r, &x, 1);
}

/* ------------------------- a sender that completes elsewhere during start */

/* Start posts its completion to `sch` and returns only after the
 * completion call returned: the completion certainly happens on another
 * thread before the awaiting fiber could switch away. */
typedef struct remote_op {
    int_op head;
    ex_work w;
    ex_scheduler sch;
    atomic_int done;
} remote_op;

typedef struct remote_sender {
    ex_sender base;
    ex_scheduler sch;
    int64_t v;
} remote_sender;

static void remote_execute(ex_work *w) {
    remote_op *o = (remote_op *)((char *)w - offsetof(remote_op, w));
    int_op_send(&o->head);
    atomic_store(&o->done, 1);  /* safe here: start still runs, the op is alive */
}

static void remote_start(ex_operation *op) {
    remote_op *o = (remote_op *)op;
    if (ex_post(o->sch, &o->w).code) {
        ex_set_error(o->head.r, ex_err(EX_EUSER, "remote: post refused"));
        return;
    }
    while (!atomic_load(&o->done)) sched_yield();
}

static const ex_operation_vtable remote_op_vt = { remote_start, NULL };

static ex_error remote_connect(const ex_sender *s, ex_receiver r, void *storage) {
    const remote_sender *rs = (const remote_sender *)s;
    remote_op *o = storage;
    int_op_init(&o->head, &remote_op_vt, r, rs->v);
    o->w = (ex_work){ NULL, remote_execute, remote_execute };
    o->sch = rs->sch;
    atomic_init(&o->done, 0);
    return ex_ok();
}

static const ex_sender_vtable remote_vt = { "test.remote", remote_connect, NULL, NULL, NULL };

static ex_sender *remote_sender_new(ex_scheduler sch, int64_t v) {
    remote_sender *s = (remote_sender *)int_sender_alloc(&remote_vt, sizeof(remote_sender), sizeof(remote_op),
                                                         alignof(remote_op), EX_SIGS_ERROR);
    if (!s) return ex_invalid_sender(EX_ENOMEM, "remote_sender_new");
    s->sch = sch;
    s->v = v;
    return &s->base;
}

/* ------------------------------------------ a sender whose connect fails */

static ex_error refuse_connect(const ex_sender *s, ex_receiver r, void *storage) {
    (void)s, (void)r, (void)storage;
    return ex_err(EX_EUSER + 7, "test.refuse: connect refused");
}

static const ex_sender_vtable refuse_vt = { "test.refuse", refuse_connect, NULL, NULL, NULL };

static ex_sender *refuse_sender_new(void) {
    ex_sender *s = int_sender_alloc(&refuse_vt, sizeof(ex_sender), 64, alignof(max_align_t), 0);
    return s ? s : ex_invalid_sender(EX_ENOMEM, "refuse_sender_new");
}

/* ============================================================ awaiting */

static ex_task_result body_await_just(ex_task *t, void *arg) {
    (void)arg;
    ex_await_result r = ex_await(t, ex_just());
    TCHECK(r.status == EX_AWAIT_VALUE);
    TCHECK(r.n == 0);
    r = ex_await(t, ex_just(ex_int(7)));
    TCHECK(r.status == EX_AWAIT_VALUE && r.n == 1 && r.v[0].type == EX_T_INT && r.v[0].as.i == 7);
    r = ex_await(t, ex_just(ex_int(1), ex_double(2.5), ex_str("three"), ex_uint(4), ex_bool(false)));
    TCHECK(r.status == EX_AWAIT_VALUE && r.n == 5);
    TCHECK(r.v[0].as.i == 1 && r.v[1].as.d == 2.5 && strcmp(r.v[2].as.s, "three") == 0 && r.v[3].as.u == 4 &&
           r.v[4].type == EX_T_BOOL && !r.v[4].as.b);
    int64_t sum = r.v[0].as.i + (int64_t)r.v[3].as.u;
    return ex_task_i64(sum);
}

Test(exec_task, await_just_gives_zero_one_and_several_values) {
    ex_result r = run(ex_task_create(body_await_just, NULL, NULL));
    expect_value_int(&r, 5);
    task_test_end(NULL, NULL);
}

static ex_sender *lv_times3(void *ctx, const ex_value *in, size_t n) {
    (void)ctx, (void)n;
    return ex_then(ex_just(ex_int(in[0].as.i * 3)), add_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
}

static ex_sender *le_recover(void *ctx, ex_error e) {
    (void)ctx;
    return ex_just(ex_int(e.code));
}

static ex_task_result body_await_chains(ex_task *t, void *arg) {
    (void)arg;
    /* then */
    ex_await_result r = ex_await(t, ex_then(ex_just(ex_int(20)), add_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)));
    TCHECK(r.status == EX_AWAIT_VALUE && r.n == 1 && r.v[0].as.i == 21);
    /* then failing */
    r = ex_await(t, ex_then(ex_just(ex_int(3)), fail_with, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)));
    TCHECK(r.status == EX_AWAIT_ERROR && r.error.code == EX_EUSER + 3);
    TCHECK(r.error.msg && strcmp(r.error.msg, "fail_with") == 0);
    TCHECK(!ex_task_is_stopped(t));
    /* let_value */
    r = ex_await(t, ex_let_value(ex_just(ex_int(5)), lv_times3, NULL, EX_SIG(EX_T_INT)));
    TCHECK(r.status == EX_AWAIT_VALUE && r.n == 1 && r.v[0].as.i == 16);
    /* let_error recovering */
    r = ex_await(t, ex_let_error(ex_just_error(ex_err(EX_EUSER + 9, "x")), le_recover, NULL));
    TCHECK(r.status == EX_AWAIT_VALUE && r.n == 1 && r.v[0].as.i == EX_EUSER + 9);
    /* just_error */
    static int payload;
    r = ex_await(t, ex_just_error(ex_err_data(EX_EUSER + 4, "just_error", &payload)));
    TCHECK(r.status == EX_AWAIT_ERROR && r.error.code == EX_EUSER + 4 && r.error.data == &payload);
    TCHECK(!ex_task_is_stopped(t));
    /* when_all values */
    r = ex_await(t, ex_when_all(ex_just(ex_int(1)), ex_just(), ex_just(ex_int(2), ex_int(3))));
    TCHECK(r.status == EX_AWAIT_VALUE && r.n == 3 && r.v[0].as.i == 1 && r.v[1].as.i == 2 && r.v[2].as.i == 3);
    /* when_all error */
    r = ex_await(t, ex_when_all(ex_just(ex_int(1)), ex_just_error(ex_err(EX_EUSER + 5, "wa"))));
    TCHECK(r.status == EX_AWAIT_ERROR && r.error.code == EX_EUSER + 5);
    /* a chain after all that still works */
    r = ex_await(t, ex_then(ex_let_value(ex_just(ex_int(1)), lv_times3, NULL, EX_SIG(EX_T_INT)), add_one, NULL,
                            EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)));
    TCHECK(r.status == EX_AWAIT_VALUE && r.v[0].as.i == 5);
    return ex_task_i64(r.v[0].as.i);
}

Test(exec_task, await_then_let_when_all_chains) {
    ex_result r = run(ex_task_create(body_await_chains, NULL, NULL));
    expect_value_int(&r, 5);
    task_test_end(NULL, NULL);
}

typedef struct connect_err_arg {
    ex_sender *used_task;  /* connected before */
} connect_err_arg;

static ex_task_result body_await_connect_errors(ex_task *t, void *arg) {
    connect_err_arg *a = arg;
    ex_await_result r = ex_await(t, refuse_sender_new());
    TCHECK(r.status == EX_AWAIT_ERROR);
    TCHECK(r.error.code == EX_EUSER + 7);
    TCHECK(!ex_task_is_stopped(t));
    r = ex_await(t, a->used_task);  /* a task connected before: EX_EINVAL at connect */
    TCHECK(r.status == EX_AWAIT_ERROR && r.error.code == EX_EINVAL);
    r = ex_await(t, NULL);
    TCHECK(r.status == EX_AWAIT_ERROR && r.error.code == EX_EINVAL);
    r = ex_await(t, ex_invalid_sender(EX_EUSER + 8, "invalid on purpose"));
    TCHECK(r.status == EX_AWAIT_ERROR && r.error.code == EX_EUSER + 8);
    r = ex_await(t, ex_just(ex_int(3)));
    TCHECK(r.status == EX_AWAIT_VALUE && r.v[0].as.i == 3);
    return ex_task_i64(3);
}

Test(exec_task, await_of_a_connect_error_is_an_await_error) {
    connect_err_arg a;
    a.used_task = ex_task_create(body_void, NULL, NULL);
    ex_result r = run(ex_sender_retain(a.used_task));
    expect_disp(&r, EX_DISP_VALUE);
    r = run(ex_task_create(body_await_connect_errors, &a, NULL));
    expect_value_int(&r, 3);
    task_test_end(NULL, NULL);
}

/* A sender with two value signatures (set_value(int), set_value(double))
 * that sends an int; counts its starts. */
static void start_two_sigs(test_op *op) {
    atomic_fetch_add((atomic_int *)op->ctx, 1);
    ex_value v = ex_int(4);
    ex_set_value(op->r, &v, 1);
}

static ex_sender *two_sigs_sender(atomic_int *starts) {
    ex_sigs sigs = ex_sigs_none();
    (void)ex_sigs_add_value(&sigs, EX_SIG(EX_T_INT));
    (void)ex_sigs_add_value(&sigs, EX_SIG(EX_T_DOUBLE));
    return test_sender_new(start_two_sigs, starts, &sigs);
}

static ex_task_result body_await_two_sigs(ex_task *t, void *arg) {
    atomic_int *starts = arg;
    ex_await_result r = ex_await(t, two_sigs_sender(starts));
    TCHECK(r.status == EX_AWAIT_ERROR && r.error.code == EX_EINVAL);
    TCHECK(r.status == EX_AWAIT_ERROR && r.error.msg && strstr(r.error.msg, "ex_into_variant"));
    TCHECK(atomic_load(starts) == 0);  /* refused before it was connected */
    TCHECK(!ex_task_is_stopped(t));
    /* What the message says to do: one tuple, its index the signature. */
    r = ex_await(t, ex_into_variant(two_sigs_sender(starts)));
    TCHECK(r.status == EX_AWAIT_VALUE && r.n == 1 && r.v[0].type == EX_T_TUPLE);
    TCHECK(r.status == EX_AWAIT_VALUE && r.v[0].as.tuple->index == 0 && r.v[0].as.tuple->v[0].as.i == 4);
    TCHECK(atomic_load(starts) == 1);
    return ex_task_i64(1);
}

/* P3552R3 §4.4: awaiting a sender with more than one value signature is
 * ill-formed (as sync_wait of one is): EX_EINVAL, not whichever arrived. */
Test(exec_task, await_of_a_sender_with_two_value_signatures_is_einval) {
    atomic_int starts = 0;
    ex_result r = run(ex_task_create(body_await_two_sigs, &starts, NULL));
    expect_value_int(&r, 1);
    cr_assert_eq(atomic_load(&starts), 1);
    task_test_end(NULL, NULL);
}

/* A NULL task (called outside the body, or a lost pointer) is an error,
 * never a crash; the sender is released. */
Test(exec_task, task_functions_given_a_null_task_refuse) {
    ex_await_result r = ex_await(NULL, ex_just(ex_int(1)));
    cr_assert_eq(r.status, EX_AWAIT_ERROR);
    cr_assert_eq(r.error.code, EX_EINVAL);
    expect_err(ex_task_yield(NULL), EX_EINVAL);
    cr_assert_null(ex_task_scheduler(NULL).vt);
    cr_assert_null(ex_change_coroutine_scheduler(NULL, ex_inline_scheduler()).vt);
    cr_assert_not(ex_stop_token_stop_possible(ex_task_stop_token(NULL)));
    cr_assert_not(ex_task_is_stopped(NULL));
    cr_assert_null(ex_task_env(NULL).node);
    task_test_end(NULL, NULL);
}

/* A borrowed tuple stays valid until the next await. */
static ex_task_result body_tuple(ex_task *t, void *arg) {
    (void)arg;
    ex_await_result r = ex_await(t, ex_into_variant(ex_just(ex_int(11), ex_str("b"))));
    TCHECK(r.status == EX_AWAIT_VALUE && r.n == 1 && r.v[0].type == EX_T_TUPLE);
    const ex_tuple *tp = r.v[0].as.tuple;
    TCHECK(tp->n == 2 && tp->v[0].as.i == 11 && strcmp(tp->v[1].as.s, "b") == 0);
    int64_t x = tp->v[0].as.i;
    r = ex_await(t, ex_just(ex_int(x + 1)));
    return ex_task_i64(r.v[0].as.i);
}

Test(exec_task, await_tuple_values_are_readable_until_the_next_await) {
    ex_result r = run(ex_task_create(body_tuple, NULL, NULL));
    expect_value_int(&r, 12);
    task_test_end(NULL, NULL);
}

/* The body returns what its last await gave, a tuple: readable "when the
 * body returns them, until the task's completion has been delivered". */
static ex_task_result body_return_borrowed_tuple(ex_task *t, void *arg) {
    (void)arg;
    ex_await_result r = ex_await(t, ex_into_variant(ex_just(ex_int(31), ex_int(32))));
    if (r.status != EX_AWAIT_VALUE) return ex_task_with_error(r.error);
    return ex_task_values(r.n, r.v);
}

Test(exec_task, returned_values_borrowed_from_the_last_await_survive_completion) {
    cnt_alloc frames;
    cnt_alloc_init(&frames);
    frames.scribble = true;  /* freed memory is overwritten: a dangling tuple shows */
    ex_task_options o = { .allocator = &frames.base };
    ex_result r = run(ex_task_create(body_return_borrowed_tuple, NULL, &o));
    expect_disp(&r, EX_DISP_VALUE);
    cr_assert_eq(r.n, 1);
    cr_assert_eq(r.values[0].type, EX_T_TUPLE);
    const ex_tuple *tp = r.values[0].as.tuple;
    cr_assert_eq(tp->n, 2, "the tuple was freed before the task completed");
    cr_assert_eq(tp->v[0].as.i, 31);
    cr_assert_eq(tp->v[1].as.i, 32);
    ex_result_destroy(&r);
    cr_assert_eq(atomic_load(&frames.in_use), 0);
    expect_no_leaks();
}

/* ------------------------------------ where the awaited operation lives */

/* A sender with an operation of a chosen size that completes inline with
 * set_value(int v). */
typedef struct sized_sender {
    ex_sender base;
    int64_t v;
} sized_sender;

static void sized_start(ex_operation *op) { int_op_send((int_op *)op); }

static const ex_operation_vtable sized_op_vt = { sized_start, NULL };

static ex_error sized_connect(const ex_sender *s, ex_receiver r, void *storage) {
    int_op *o = storage;
    int_op_init(o, &sized_op_vt, r, ((const sized_sender *)s)->v);
    memset(o + 1, 0x3c, s->op_size - sizeof *o);  /* the whole operation is ours */
    return ex_ok();
}

static const ex_sender_vtable sized_vt = { "test.sized", sized_connect, NULL, NULL, NULL };

static ex_sender *sized_sender_new(size_t op_size, int64_t v) {
    sized_sender *s = (sized_sender *)int_sender_alloc(&sized_vt, sizeof(sized_sender),
                                                       op_size < sizeof(int_op) ? sizeof(int_op) : op_size,
                                                       alignof(max_align_t), 0);
    if (!s) return ex_invalid_sender(EX_ENOMEM, "sized_sender_new");
    s->v = v;
    return &s->base;
}

/* Up to EX_TASK_AWAIT_INLINE bytes the awaited operation lives in the task
 * (no allocation): a task whose allocator fails everything still awaits;
 * a bigger one needs the allocator and reports EX_ENOMEM. */
static ex_task_result body_await_no_alloc(ex_task *t, void *arg) {
    (void)arg;
    ex_await_result r = ex_await(t, ex_just(ex_int(8)));
    TCHECK(r.status == EX_AWAIT_VALUE && r.v[0].as.i == 8);
    r = ex_await(t, ex_then(ex_just(ex_int(8)), add_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)));
    TCHECK(r.status == EX_AWAIT_VALUE && r.v[0].as.i == 9);
    r = ex_await(t, sized_sender_new(EX_TASK_AWAIT_INLINE, 10));
    TCHECK(r.status == EX_AWAIT_VALUE && r.v[0].as.i == 10);
    r = ex_await(t, sized_sender_new(EX_TASK_AWAIT_INLINE + 1, 11));
    TCHECK(r.status == EX_AWAIT_ERROR && r.error.code == EX_ENOMEM);
    TCHECK(!ex_task_is_stopped(t));
    r = ex_await(t, ex_just(ex_int(12)));
    TCHECK(r.status == EX_AWAIT_VALUE && r.v[0].as.i == 12);
    return ex_task_i64(r.v[0].as.i);
}

Test(exec_task, await_up_to_the_inline_size_allocates_nothing) {
    ex_fault_allocator f;
    ex_fault_allocator_init(&f, ex_libc_allocator());
    ex_fault_allocator_fail_randomly(&f, 1, 1000000);  /* every allocation fails */
    ex_task_options o = { .allocator = ex_fault_allocator_get(&f) };
    ex_result r = run(ex_task_create(body_await_no_alloc, NULL, &o));
    expect_value_int(&r, 12);
    task_test_end(NULL, NULL);
}

/* Bigger operations go into a buffer from the task's allocator that later
 * awaits reuse. */
static ex_task_result body_await_big(ex_task *t, void *arg) {
    (void)arg;
    int64_t sum = 0;
    for (int i = 0; i < 100; i++) {
        ex_await_result r = ex_await(t, sized_sender_new(4 * EX_TASK_AWAIT_INLINE, i));
        TCHECK(r.status == EX_AWAIT_VALUE && r.v[0].as.i == i);
        sum += r.v[0].as.i;
        r = ex_await(t, ex_just(ex_int(i)));  /* small ones in between */
        TCHECK(r.status == EX_AWAIT_VALUE && r.v[0].as.i == i);
    }
    return ex_task_i64(sum);
}

Test(exec_task, big_await_operations_reuse_one_buffer) {
    cnt_alloc frames;
    cnt_alloc_init(&frames);
    ex_task_options o = { .allocator = &frames.base };
    ex_result r = run(ex_task_create(body_await_big, NULL, &o));
    expect_value_int(&r, 99 * 100 / 2);
    EXPECT_PROBE();
    cr_assert_eq(atomic_load(&frames.allocs), 1, "100 awaits of the same big operation took %ld allocations",
                 atomic_load(&frames.allocs));
    cr_assert_eq(atomic_load(&frames.in_use), 0);
    expect_no_leaks();
}

/* --------------------------------------------- what awaited values point to */

/* Overwrites a good stretch of the stack below the caller. */
__attribute__((noinline)) static void scribble_stack(void) {
    volatile unsigned char junk[8192];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = 0xEE;
}

static ex_error make_pair(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)in, (void)n;
    out[0] = ex_int(61);
    out[1] = ex_int(62);
    return ex_ok();
}

typedef struct tuple_arg {
    ex_pool *pool;
    const char *str;
} tuple_arg;

static ex_task_result body_tuple_copies(ex_task *t, void *arg) {
    tuple_arg *a = arg;
    /* completed inline, on the task's stack */
    ex_await_result r = ex_await(t, ex_into_variant(ex_just(ex_int(51), ex_int(52))));
    TCHECK(r.status == EX_AWAIT_VALUE && r.n == 1 && r.v[0].type == EX_T_TUPLE);
    scribble_stack();
    const ex_tuple *tp = r.v[0].as.tuple;
    TCHECK(tp->n == 2 && tp->v[0].as.i == 51 && tp->v[1].as.i == 52);
    /* completed on a pool worker, on its stack */
    r = ex_await(t, ex_into_variant(ex_then(ex_schedule(ex_pool_scheduler(a->pool)), make_pair, NULL, EX_SIG0,
                                            EX_SIG(EX_T_INT, EX_T_INT))));
    TCHECK(r.status == EX_AWAIT_VALUE && r.n == 1 && r.v[0].type == EX_T_TUPLE);
    scribble_stack();
    tp = r.v[0].as.tuple;
    TCHECK(tp->n == 2 && tp->v[0].as.i == 61 && tp->v[1].as.i == 62);
    r = ex_await(t, ex_into_variant(ex_then(ex_schedule(ex_pool_scheduler(a->pool)), make_pair, NULL, EX_SIG0,
                                            EX_SIG(EX_T_INT, EX_T_INT))));
    for (int i = 0; i < 3; i++) scribble_stack();
    tp = r.v[0].as.tuple;
    TCHECK(r.status == EX_AWAIT_VALUE && tp->n == 2 && tp->v[0].as.i == 61 && tp->v[1].as.i == 62);
    int64_t first = tp->v[0].as.i;  /* tp is not read after the next await */
    /* strings and pointers are not copied */
    r = ex_await(t, ex_just(ex_str(a->str), ex_ptr(a)));
    TCHECK(r.status == EX_AWAIT_VALUE && r.n == 2 && r.v[0].as.s == a->str && r.v[1].as.p == (void *)a);
    return ex_task_i64(first);
}

Test(exec_task, awaited_tuples_are_deep_copied) {
    ex_pool *pool = test_pool_new(2);
    static const char text[] = "not copied";
    tuple_arg a = { pool, text };
    for (int k = 0; k < 20; k++) {
        ex_result r = run(ex_task_create(body_tuple_copies, &a, NULL));
        expect_value_int(&r, 61);
        EXPECT_PROBE();
    }
    task_test_end(pool, NULL);
}

static ex_task_result body_tuple_enomem(ex_task *t, void *arg) {
    (void)arg;
    ex_await_result r = ex_await(t, ex_into_variant(ex_just(ex_int(1), ex_int(2))));
    TCHECK(r.status == EX_AWAIT_ERROR && r.error.code == EX_ENOMEM);
    TCHECK(!ex_task_is_stopped(t));
    return ex_task_i64(1);
}

Test(exec_task, awaited_tuple_copy_failure_is_enomem) {
    ex_fault_allocator f;
    ex_fault_allocator_init(&f, ex_libc_allocator());
    ex_fault_allocator_fail_randomly(&f, 1, 1000000);
    ex_task_options o = { .allocator = ex_fault_allocator_get(&f) };
    ex_result r = run(ex_task_create(body_tuple_enomem, NULL, &o));
    expect_value_int(&r, 1);
    task_test_end(NULL, NULL);
}

/* A completion on another thread while the awaited sender's start still
 * runs (before the task could suspend). */
typedef struct remote_arg {
    ex_scheduler other;
    const void *main_tid;
} remote_arg;

static ex_task_result body_remote(ex_task *t, void *arg) {
    const remote_arg *a = arg;
    int64_t sum = 0;
    for (int i = 0; i < 50; i++) {
        ex_await_result r = ex_await(t, remote_sender_new(a->other, i));
        TCHECK(r.status == EX_AWAIT_VALUE && r.n == 1 && r.v[0].as.i == i);
        TCHECK(test_thread_id() == a->main_tid);
        sum += r.v[0].as.i;
    }
    return ex_task_i64(sum);
}

Test(exec_task, await_completing_elsewhere_during_start) {
    ex_single_thread_context stc;
    test_stc_init(&stc);
    remote_arg a = { ex_single_thread_context_scheduler(&stc), test_thread_id() };
    ex_result r = run(ex_task_create(body_remote, &a, NULL));
    expect_value_int(&r, 49 * 50 / 2);
    task_test_end(NULL, &stc);
}

/* ======================================================== tasks awaiting tasks */

typedef struct child_arg {
    int64_t v;
    const void *tid;
} child_arg;

static ex_task_result body_child(ex_task *t, void *arg) {
    child_arg *c = arg;
    c->tid = test_thread_id();
    ex_await_result r = ex_await(t, ex_just(ex_int(c->v)));
    return ex_task_i64(r.v[0].as.i * 2);
}

typedef struct parent_arg {
    const void *main_tid;
    ex_pool *pool;
    int n;
} parent_arg;

static ex_task_result body_parent(ex_task *t, void *arg) {
    parent_arg *a = arg;
    int64_t sum = 0;
    for (int i = 0; i < a->n; i++) {
        child_arg c = { i, NULL };
        ex_await_result r = ex_await(t, ex_task_create(body_child, &c, NULL));
        TCHECK(r.status == EX_AWAIT_VALUE && r.n == 1 && r.v[0].as.i == 2 * i);
        TCHECK(c.tid == a->main_tid);  /* the child ran on the same scheduler */
        TCHECK(test_thread_id() == a->main_tid);
        sum += r.v[0].as.i;
    }
    /* A child on another scheduler. */
    child_arg c = { 50, NULL };
    ex_await_result r = ex_await(t, ex_starts_on(ex_pool_scheduler(a->pool), ex_task_create(body_child, &c, NULL)));
    TCHECK(r.status == EX_AWAIT_VALUE && r.v[0].as.i == 100);
    TCHECK(c.tid != a->main_tid);
    TCHECK(test_thread_id() == a->main_tid);
    return ex_task_i64(sum);
}

Test(exec_task, task_awaiting_tasks_gets_their_values) {
    /* No lending: the child on the pool must run on another thread than
     * main (lent, main would run it itself). */
    ex_pool_config c = test_pool_config(2, NULL);
    c.lend_slots = -1;
    ex_pool *pool = test_pool_new_cfg(&c);
    parent_arg a = { test_thread_id(), pool, 100 };
    ex_result r = run(ex_task_create(body_parent, &a, NULL));
    expect_value_int(&r, 99 * 100);
    task_test_end(pool, NULL);
}

typedef struct rt_arg {
    ex_pool *pool;
    int n;
} rt_arg;

static ex_task_result body_rt_child(ex_task *t, void *arg) {
    (void)t;
    return ex_task_i64(*(int *)arg);
}

static ex_task_result body_rt_parent(ex_task *t, void *arg) {
    rt_arg *a = arg;
    int64_t sum = 0;
    for (int i = 0; i < a->n; i++) {
        int k = i;
        ex_await_result r = ex_await(t, ex_task_create(body_rt_child, &k, NULL));
        TCHECK(r.status == EX_AWAIT_VALUE && r.v[0].as.i == i);
        TCHECK(ex_pool_current_worker(a->pool) >= 0);  /* the worker, or the lent caller */
        sum += r.v[0].as.i;
    }
    return ex_task_i64(sum);
}

/* Awaited work that completes on the task's own scheduler: no hop. */
static ex_task_result body_rt_own(ex_task *t, void *arg) {
    rt_arg *a = arg;
    for (int i = 0; i < a->n; i++) {
        ex_await_result r = ex_await(t, ex_schedule(ex_pool_scheduler(a->pool)));
        TCHECK(r.status == EX_AWAIT_VALUE);
        TCHECK(ex_pool_current_worker(a->pool) >= 0);
    }
    return ex_task_i64(a->n);
}

/* Items the agents of p (its worker and lent slots) have executed. */
static uint64_t pool_executed(ex_pool *p) {
    uint64_t sum = 0;
    for (unsigned i = 0; i < ex_pool_size(p) + ex_pool_lend_slots(p); i++) {
        ex_pool_worker_stats st;
        cr_assert_eq(ex_pool_worker_stats_get(p, i, &st).code, 0);
        sum += st.executed;
    }
    return sum;
}

/* Runs a task of body(a) on a's one-worker pool, expecting value want;
 * returns how many items the pool's agents executed meanwhile. */
static uint64_t pool_items_of(ex_task_fn body, rt_arg *a, int64_t want) {
    uint64_t before = pool_executed(a->pool);
    ex_result r = run(ex_starts_on(ex_pool_scheduler(a->pool), ex_task_create(body, a, NULL)));
    expect_value_int(&r, want);
    EXPECT_PROBE();
    return pool_executed(a->pool) - before;
}

Test(exec_task, completion_on_the_task_scheduler_skips_the_hop) {
    rt_arg a = { test_pool_new(1), 200 };
    uint64_t items = pool_items_of(body_rt_own, &a, 200);
    cr_assert_lt(items, 200 + 20, "%llu pool items for 200 awaits of the task's own pool: the hops were not skipped",
                 (unsigned long long)items);
    task_test_end(a.pool, NULL);
}

Test(exec_task, child_on_the_same_scheduler_needs_no_queue_round_trip) {
    rt_arg a = { test_pool_new(1), 200 };
    uint64_t items = pool_items_of(body_rt_parent, &a, 199 * 200 / 2);
    cr_assert_lt(items, 20, "%llu pool items for 200 child tasks on the parent's own scheduler",
                 (unsigned long long)items);
    task_test_end(a.pool, NULL);
}
