/* [exec.connect], [exec.snd]: connect, operation states, sender lifetime and
 * the bad-input contract (invalid senders, connect errors). */
#include <stdlib.h>

#include "common/helpers.h"

TEST_SUITE(exec_sender, 10);

/* int -> int + c->add, counting calls. */
typedef struct counter {
    int calls;
    int64_t add;
} counter;

static ex_error count_add(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    counter *c = ctx;
    (void)n;
    c->calls++;
    out[0] = ex_int(in[0].as.i + c->add);
    return ex_ok();
}

static ex_sender *then_count(ex_sender *s, counter *c) {
    return ex_then(s, count_add, c, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
}

#define BUF_SIZE 1024
typedef struct big_buf {
    _Alignas(max_align_t) unsigned char b[BUF_SIZE + 64];
} big_buf;

/* ---------------------------------------------------------- bad input */

Test(exec_sender, connect_null_sender_is_einval) {
    rec rc;
    rec_init(&rc);
    big_buf buf;
    ex_operation *op = (ex_operation *)&buf;
    ex_error e = ex_connect(NULL, rec_receiver(&rc), buf.b, sizeof buf.b, &op);
    cr_assert_eq(e.code, EX_EINVAL);
    cr_assert_not_null(e.msg);
    cr_assert_null(op);
    cr_assert_eq(rec_total(&rc), 0);
    expect_no_leaks();
}

Test(exec_sender, connect_null_op_out_param_is_einval) {
    rec rc;
    rec_init(&rc);
    counter c = { 0, 1 };
    ex_sender *s = then_count(ex_just(ex_int(1)), &c);
    big_buf buf;
    ex_error e = ex_connect(s, rec_receiver(&rc), buf.b, sizeof buf.b, NULL);
    cr_assert_eq(e.code, EX_EINVAL);
    cr_assert_not_null(e.msg);
    cr_assert_eq(rec_total(&rc), 0);
    cr_assert_eq(c.calls, 0);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_sender, connect_receiver_with_null_vtable_is_einval) {
    counter c = { 0, 1 };
    ex_sender *s = then_count(ex_just(ex_int(1)), &c);
    big_buf buf;
    ex_operation *op = (ex_operation *)&buf;
    ex_receiver r = { NULL, NULL };
    ex_error e = ex_connect(s, r, buf.b, sizeof buf.b, &op);
    cr_assert_eq(e.code, EX_EINVAL);
    cr_assert_not_null(e.msg);
    cr_assert_null(op);
    cr_assert_eq(c.calls, 0);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_sender, connect_receiver_missing_a_completion_is_einval) {
    counter c = { 0, 1 };
    ex_sender *s = then_count(ex_just(ex_int(1)), &c);
    for (int which = 0; which < 3; which++) {
        rec rc;
        rec_init(&rc);
        if (which == 0) rc.vt.set_value = NULL;
        if (which == 1) rc.vt.set_error = NULL;
        if (which == 2) rc.vt.set_stopped = NULL;
        big_buf buf;
        ex_operation *op = (ex_operation *)&buf;
        ex_error e = ex_connect(s, rec_receiver(&rc), buf.b, sizeof buf.b, &op);
        cr_assert_eq(e.code, EX_EINVAL, "missing completion %d", which);
        cr_assert_not_null(e.msg);
        cr_assert_null(op);
        op = (ex_operation *)&buf;
        e = ex_connect_alloc(s, rec_receiver(&rc), &op);
        cr_assert_eq(e.code, EX_EINVAL, "ex_connect_alloc, missing completion %d", which);
        cr_assert_not_null(e.msg);
        cr_assert_null(op);
        cr_assert_eq(rec_total(&rc), 0);
    }
    cr_assert_eq(c.calls, 0);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_sender, connect_storage_too_small_is_einval) {
    rec rc;
    rec_init(&rc);
    counter c = { 0, 1 };
    ex_sender *s = then_count(ex_just(ex_int(1)), &c);
    size_t need = ex_sender_op_size(s);
    cr_assert_gt(need, 0);
    cr_assert_leq(need, BUF_SIZE);
    big_buf buf;
    ex_operation *op = (ex_operation *)&buf;
    ex_error e = ex_connect(s, rec_receiver(&rc), buf.b, need - 1, &op);
    cr_assert_eq(e.code, EX_EINVAL);
    cr_assert_not_null(e.msg);
    cr_assert_null(op);
    e = ex_connect(s, rec_receiver(&rc), buf.b, 0, &op);
    cr_assert_eq(e.code, EX_EINVAL);
    e = ex_connect(s, rec_receiver(&rc), NULL, need, &op);
    cr_assert_eq(e.code, EX_EINVAL, "NULL storage");
    cr_assert_null(op);
    cr_assert_eq(rec_total(&rc), 0);
    cr_assert_eq(c.calls, 0);
    /* exactly op_size is enough */
    e = ex_connect(s, rec_receiver(&rc), buf.b, need, &op);
    cr_assert_eq(e.code, 0);
    cr_assert_eq((void *)op, (void *)buf.b, "the operation is constructed in the storage given");
    ex_start(op);
    cr_assert_eq(rc.values, 1);
    cr_assert_eq(rc.v[0].as.i, 2);
    ex_operation_destroy(op);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_sender, connect_misaligned_storage_is_einval) {
    rec rc;
    rec_init(&rc);
    counter c = { 0, 1 };
    ex_sender *s = then_count(ex_just(ex_int(1)), &c);
    size_t align = ex_sender_op_align(s);
    cr_assert_gt(align, 1, "an operation holding pointers is aligned");
    cr_assert_eq(align & (align - 1), 0, "alignment is a power of two");
    big_buf buf;
    ex_operation *op = (ex_operation *)&buf;
    ex_error e = ex_connect(s, rec_receiver(&rc), buf.b + 1, BUF_SIZE, &op);
    cr_assert_eq(e.code, EX_EINVAL);
    cr_assert_not_null(e.msg);
    cr_assert_null(op);
    e = ex_connect(s, rec_receiver(&rc), buf.b + align / 2, BUF_SIZE, &op);
    cr_assert_eq(e.code, EX_EINVAL);
    cr_assert_eq(rec_total(&rc), 0);
    cr_assert_eq(c.calls, 0);
    ex_sender_release(s);
    expect_no_leaks();
}

/* --------------------------------------------------- receiver acceptance */

static ex_error connect_with_accepts(ex_sender *s, const ex_sigs *accepts, rec *rc) {
    rec_init(rc);
    rc->vt.accepts = accepts;
    big_buf buf;
    ex_operation *op = (ex_operation *)&buf;
    ex_error e = ex_connect(s, rec_receiver(rc), buf.b, sizeof buf.b, &op);
    if (!e.code) {
        ex_start(op);
        ex_operation_destroy(op);
    } else {
        cr_assert_null(op);
    }
    ex_sender_release(s);
    return e;
}

Test(exec_sender, connect_checks_receiver_accepts) {
    rec rc;
    ex_sigs ints_only = ex_sigs_none();
    cr_assert(ex_sigs_add_value(&ints_only, EX_SIG(EX_T_INT)));

    ex_error e = connect_with_accepts(ex_just_stopped(), &ints_only, &rc);
    cr_assert_eq(e.code, EX_EINVAL, "set_stopped is not accepted");
    cr_assert_not_null(e.msg);
    cr_assert_eq(rec_total(&rc), 0);

    e = connect_with_accepts(ex_just_error(ex_err(EX_EUSER, "x")), &ints_only, &rc);
    cr_assert_eq(e.code, EX_EINVAL, "set_error is not accepted");
    cr_assert_not_null(e.msg);

    e = connect_with_accepts(ex_just(ex_double(1.0)), &ints_only, &rc);
    cr_assert_eq(e.code, EX_EINVAL, "set_value(double) is not accepted");
    cr_assert_not_null(e.msg);

    e = connect_with_accepts(ex_just(ex_int(1), ex_int(2)), &ints_only, &rc);
    cr_assert_eq(e.code, EX_EINVAL, "set_value(int, int) is not accepted");

    e = connect_with_accepts(ex_just(ex_int(5)), &ints_only, &rc);
    cr_assert_eq(e.code, 0, "set_value(int) is accepted: %s", e.msg ? e.msg : "");
    cr_assert_eq(rc.values, 1);
    cr_assert_eq(rc.v[0].as.i, 5);

    /* a stoppable sender into a receiver that accepts stopped but not error */
    ex_sigs stopped_ok = ints_only;
    stopped_ok.flags = EX_SIGS_STOPPED;
    e = connect_with_accepts(ex_just_stopped(), &stopped_ok, &rc);
    cr_assert_eq(e.code, 0);
    cr_assert_eq(rc.stops, 1);
    e = connect_with_accepts(ex_just_error(ex_err(EX_EUSER, "x")), &stopped_ok, &rc);
    cr_assert_eq(e.code, EX_EINVAL);

    /* EX_T_ANY accepts every type */
    ex_sigs any1 = ex_sigs_none();
    ex_sigs_add_value(&any1, EX_SIG_ANY1);
    e = connect_with_accepts(ex_just(ex_str("s")), &any1, &rc);
    cr_assert_eq(e.code, 0);
    cr_assert_eq(rc.values, 1);
    expect_no_leaks();
}

Test(exec_sender, connect_accepts_rejects_adaptor_that_may_fail) {
    /* then may fail (its function returns an error): a receiver that accepts
     * no error cannot take it. */
    rec rc;
    counter c = { 0, 1 };
    ex_sigs ints_only = ex_sigs_none();
    ex_sigs_add_value(&ints_only, EX_SIG(EX_T_INT));
    ex_error e = connect_with_accepts(then_count(ex_just(ex_int(1)), &c), &ints_only, &rc);
    cr_assert_eq(e.code, EX_EINVAL);
    cr_assert_eq(c.calls, 0);
    ex_sigs with_error = ints_only;
    with_error.flags = EX_SIGS_ERROR;
    e = connect_with_accepts(then_count(ex_just(ex_int(1)), &c), &with_error, &rc);
    cr_assert_eq(e.code, 0);
    cr_assert_eq(rc.values, 1);
    cr_assert_eq(rc.v[0].as.i, 2);
    expect_no_leaks();
}

/* ------------------------------------------------------- connect_alloc */

Test(exec_sender, connect_alloc_and_operation_free) {
    rec rc;
    rec_init(&rc);
    ex_sender *s = ex_just(ex_int(3));
    long before_allocs = test_stats.allocs, before_use = test_stats.in_use;
    ex_operation *op = NULL;
    ex_error e = ex_connect_alloc(s, rec_receiver(&rc), &op);
    cr_assert_eq(e.code, 0);
    cr_assert_not_null(op);
    cr_assert_eq(test_stats.allocs, before_allocs + 1, "one block for the operation");
    cr_assert_eq(test_stats.in_use, before_use + 1);
    cr_assert_eq((uintptr_t)op % ex_sender_op_align(s), 0);
    cr_assert_eq(rec_total(&rc), 0);
    ex_start(op);
    cr_assert_eq(rc.values, 1);
    cr_assert_eq(rc.v[0].as.i, 3);
    ex_operation_free(op);
    cr_assert_eq(test_stats.in_use, before_use);
    ex_operation_free(NULL);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_sender, connect_alloc_unstarted_operation_can_be_freed) {
    rec rc;
    rec_init(&rc);
    counter c = { 0, 1 };
    ex_value inner[1] = { ex_int(1) };
    ex_tuple t = { 0, 1, inner };
    ex_sender *s = ex_then(ex_just(ex_tuple_value(&t)), count_add, &c, EX_SIG_VARIADIC, EX_SIG(EX_T_INT));
    ex_operation *op = NULL;
    cr_assert_eq(ex_connect_alloc(s, rec_receiver(&rc), &op).code, 0);
    ex_operation_free(op);
    cr_assert_eq(c.calls, 0);
    cr_assert_eq(rec_total(&rc), 0);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_sender, connect_alloc_bad_input_and_out_of_memory) {
    rec rc;
    rec_init(&rc);
    ex_operation *op = (ex_operation *)&rc;
    ex_error e = ex_connect_alloc(NULL, rec_receiver(&rc), &op);
    cr_assert_eq(e.code, EX_EINVAL);
    cr_assert_not_null(e.msg);
    cr_assert_null(op);
    ex_sender *s = ex_just(ex_int(1));
    e = ex_connect_alloc(s, rec_receiver(&rc), NULL);
    cr_assert_eq(e.code, EX_EINVAL);
    cr_assert_not_null(e.msg);
    test_alloc_fail_at(1);
    op = (ex_operation *)&rc;
    e = ex_connect_alloc(s, rec_receiver(&rc), &op);
    cr_assert_eq(e.code, EX_ENOMEM);
    cr_assert_not_null(e.msg);
    cr_assert_null(op);
    cr_assert_eq(test_stats.failed, 1);
    cr_assert_eq(rec_total(&rc), 0);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_sender, connect_alloc_failed_connect_frees_the_block) {
    /* ex_on into a receiver without a scheduler: connect fails after the
     * block was allocated; nothing may be left behind. */
    rec rc;
    rec_init(&rc);
    ex_sender *s = ex_on(ex_inline_scheduler(), ex_just(ex_int(1)));
    ex_operation *op = NULL;
    ex_error e = ex_connect_alloc(s, rec_receiver(&rc), &op);
    cr_assert_eq(e.code, EX_EINVAL);
    cr_assert_null(op);
    cr_assert_eq(rec_total(&rc), 0);
    ex_sender_release(s);
    expect_no_leaks();
}

/* --------------------------------------------------- lifetime and reuse */

Test(exec_sender, retain_release_counts) {
    long base = test_stats.in_use;
    ex_sender *s = ex_just(ex_int(4));
    cr_assert_eq(s->refs, 1u);
    cr_assert_eq(test_stats.in_use, base + 1);
    cr_assert_eq(ex_sender_retain(s), s);
    cr_assert_eq(s->refs, 2u);
    ex_sender_retain(s);
    cr_assert_eq(s->refs, 3u);
    ex_result r = ex_sync_wait(s); /* consumes one reference */
    expect_value_int(&r, 4);
    cr_assert_eq(s->refs, 2u);
    ex_result r2 = ex_sync_wait(s); /* the retained sender is still usable */
    expect_value_int(&r2, 4);
    cr_assert_eq(s->refs, 1u);
    cr_assert_eq(test_stats.in_use, base + 1, "still alive");
    ex_sender_release(s);
    cr_assert_eq(test_stats.in_use, base, "freed at the last release");
    cr_assert_null(ex_sender_retain(NULL));
    ex_sender_release(NULL);
    expect_no_leaks();
}

Test(exec_sender, adaptor_keeps_child_alive) {
    long base = test_stats.in_use;
    ex_sender *child = ex_just(ex_int(1));
    ex_sender_retain(child);
    counter c = { 0, 1 };
    ex_sender *s = then_count(child, &c); /* takes one reference */
    cr_assert_eq(child->refs, 2u);
    ex_sender_release(child); /* ours */
    cr_assert_eq(child->refs, 1u);
    ex_result r = ex_sync_wait(s);
    expect_value_int(&r, 2);
    cr_assert_eq(test_stats.in_use, base);
    expect_no_leaks();
}

Test(exec_sender, static_senders_ignore_refcounting) {
    ex_sender *s = ex_just_stopped();
    cr_assert_eq(s->refs, 0u);
    for (int i = 0; i < 3; i++) ex_sender_retain(s);
    cr_assert_eq(s->refs, 0u);
    for (int i = 0; i < 5; i++) ex_sender_release(s);
    ex_result r = ex_sync_wait(s);
    cr_assert_eq(r.disposition, EX_DISP_STOPPED);
    expect_no_leaks();
}

Test(exec_sender, connect_does_not_start_work) {
    rec rc;
    rec_init(&rc);
    counter c = { 0, 1 };
    ex_sender *s = then_count(ex_just(ex_int(1)), &c);
    cr_assert_eq(c.calls, 0, "building does not start work");
    big_buf buf;
    ex_operation *op;
    cr_assert_eq(ex_connect(s, rec_receiver(&rc), buf.b, sizeof buf.b, &op).code, 0);
    cr_assert_eq(c.calls, 0, "connect does not start work");
    cr_assert_eq(rec_total(&rc), 0);
    ex_start(op);
    cr_assert_eq(c.calls, 1);
    cr_assert_eq(rc.values, 1);
    ex_operation_destroy(op);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_sender, connect_schedule_does_not_enqueue) {
    ex_run_loop loop;
    cr_assert_eq(ex_run_loop_init(&loop).code, 0);
    rec rc;
    rec_init(&rc);
    ex_sender *s = ex_schedule(ex_run_loop_scheduler(&loop));
    big_buf buf;
    ex_operation *op;
    cr_assert_eq(ex_connect(s, rec_receiver(&rc), buf.b, sizeof buf.b, &op).code, 0);
    cr_assert_eq(ex_run_loop_count(&loop), 0, "connect does not schedule");
    ex_start(op);
    cr_assert_eq(ex_run_loop_count(&loop), 1);
    cr_assert_eq(rec_total(&rc), 0);
    cr_assert(ex_run_loop_run_one(&loop));
    cr_assert_eq(rc.values, 1);
    cr_assert_eq(rc.n, 0);
    ex_operation_destroy(op);
    ex_sender_release(s);
    cr_assert_eq(ex_run_loop_destroy(&loop).code, 0);
    expect_no_leaks();
}

Test(exec_sender, one_sender_many_operations) {
    counter c = { 0, 10 };
    ex_sender *s = then_count(ex_just(ex_int(1)), &c);
    enum { N = 4 };
    rec rcs[N];
    big_buf bufs[N];
    ex_operation *ops[N];
    for (int i = 0; i < N; i++) {
        rec_init(&rcs[i]);
        cr_assert_eq(ex_connect(s, rec_receiver(&rcs[i]), bufs[i].b, sizeof bufs[i].b, &ops[i]).code, 0);
    }
    cr_assert_eq(c.calls, 0);
    for (int i = N - 1; i >= 0; i--) {
        ex_start(ops[i]);
        cr_assert_eq(rcs[i].values, 1);
        cr_assert_eq(rcs[i].v[0].as.i, 11);
    }
    for (int i = 0; i < N; i++) {
        cr_assert_eq(rec_total(&rcs[i]), 1, "operation %d completed exactly once", i);
        ex_operation_destroy(ops[i]);
    }
    cr_assert_eq(c.calls, N);
    for (int i = 0; i < 3; i++) {
        ex_result r = ex_sync_wait(ex_sender_retain(s));
        expect_value_int(&r, 11);
    }
    ex_sender_release(s);
    expect_no_leaks();
}

static ex_error tuple_sum(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx;
    if (n != 1 || in[0].type != EX_T_TUPLE) return ex_err(EX_EUSER, "tuple_sum: bad input");
    int64_t sum = 0;
    for (uint32_t i = 0; i < in[0].as.tuple->n; i++) sum += in[0].as.tuple->v[i].as.i;
    out[0] = ex_int(sum);
    return ex_ok();
}

Test(exec_sender, operation_outlives_the_sender) {
    /* Operation states never point back into their sender after connect. */
    rec rc;
    rec_init(&rc);
    ex_value inner[2] = { ex_int(8), ex_int(9) };
    ex_tuple t = { 0, 2, inner };
    ex_sender *s = ex_continues_on(
        ex_write_env(ex_then(ex_just(ex_tuple_value(&t)), tuple_sum, NULL, EX_SIG(EX_T_TUPLE), EX_SIG(EX_T_INT)),
                     &ex_key_get_scheduler, ex_sched_value(ex_inline_scheduler())),
        ex_inline_scheduler());
    ex_operation *op = NULL;
    cr_assert_eq(ex_connect_alloc(s, rec_receiver(&rc), &op).code, 0);
    ex_sender_release(s);
    ex_start(op);
    cr_assert_eq(rc.values, 1, "err: %s", rc.err.msg ? rc.err.msg : "");
    cr_assert_eq(rc.v[0].as.i, 17);
    ex_operation_free(op);
    expect_no_leaks();
}

static ex_sender *let_tuple(void *ctx, const ex_value *in, size_t n) {
    (void)in, (void)n;
    return ex_just(ex_tuple_value(ctx));
}

Test(exec_sender, operation_outlives_the_sender_let_value) {
    rec rc;
    rec_init(&rc);
    ex_value inner[2] = { ex_int(8), ex_int(9) };
    ex_tuple t = { 0, 2, inner };
    ex_sender *s = ex_then(ex_let_value(ex_just(ex_int(0)), let_tuple, &t, EX_SIG(EX_T_INT)), tuple_sum, NULL,
                           EX_SIG(EX_T_TUPLE), EX_SIG(EX_T_INT));
    ex_operation *op = NULL;
    cr_assert_eq(ex_connect_alloc(s, rec_receiver(&rc), &op).code, 0);
    ex_sender_release(s);
    ex_start(op);
    cr_assert_eq(rc.values, 1, "err: %s", rc.err.msg ? rc.err.msg : "");
    cr_assert_eq(rc.v[0].as.i, 17);
    ex_operation_free(op);
    expect_no_leaks();
}

/* A receiver that frees its operation inside the completion. */
typedef struct self_freeing {
    ex_operation *op;
    int values, errors, stops;
    int64_t v;
} self_freeing;

static void sf_value(void *self, const ex_value *v, size_t n) {
    self_freeing *sf = self;
    sf->values++;
    if (n == 1 && v[0].type == EX_T_INT) sf->v = v[0].as.i;
    ex_operation_free(sf->op);
}
static void sf_error(void *self, ex_error e) {
    self_freeing *sf = self;
    (void)e;
    sf->errors++;
    ex_operation_free(sf->op);
}
static void sf_stopped(void *self) {
    self_freeing *sf = self;
    sf->stops++;
    ex_operation_free(sf->op);
}
static const ex_receiver_vtable sf_vt = { sf_value, sf_error, sf_stopped, NULL, NULL };

Test(exec_sender, receiver_may_destroy_the_operation_in_its_completion) {
    counter c = { 0, 1 };
    ex_sender *ss[] = {
        then_count(ex_just(ex_int(1)), &c),
        ex_continues_on(then_count(ex_just(ex_int(1)), &c), ex_inline_scheduler()),
        ex_starts_on(ex_inline_scheduler(), then_count(ex_just(ex_int(1)), &c)),
        ex_write_env(then_count(ex_just(ex_int(1)), &c), &ex_key_get_scheduler, ex_sched_value(ex_inline_scheduler())),
        ex_into_variant(ex_just_error(ex_err(EX_EUSER, "e"))),
        ex_stopped_as_error(ex_just_stopped(), ex_err(EX_EUSER, "stopped")),
        ex_upon_stopped(ex_just_stopped(), NULL, NULL, EX_SIG0), /* invalid: NULL function */
    };
    for (size_t i = 0; i < sizeof ss / sizeof ss[0]; i++) {
        self_freeing sf = { 0 };
        ex_receiver r = { &sf_vt, &sf };
        cr_assert_eq(ex_connect_alloc(ss[i], r, &sf.op).code, 0, "sender %zu", i);
        ex_start(sf.op);
        cr_assert_eq(sf.values + sf.errors + sf.stops, 1, "sender %zu completed once", i);
        if (i < 4) {
            cr_assert_eq(sf.values, 1);
            cr_assert_eq(sf.v, 2);
        } else {
            cr_assert_eq(sf.errors, 1);
        }
        ex_sender_release(ss[i]);
    }
    expect_no_leaks();
}

/* ----------------------------------------------------- op size / layout */

Test(exec_sender, op_size_grows_with_nesting) {
    counter c = { 0, 1 };
    ex_sender *s0 = ex_just(ex_int(1));
    size_t z0 = ex_sender_op_size(s0);
    ex_sender *s1 = then_count(ex_sender_retain(s0), &c);
    size_t z1 = ex_sender_op_size(s1);
    ex_sender *s2 = then_count(ex_sender_retain(s1), &c);
    size_t z2 = ex_sender_op_size(s2);
    ex_sender *s3 = ex_continues_on(ex_sender_retain(s2), ex_inline_scheduler());
    size_t z3 = ex_sender_op_size(s3);
    cr_assert_geq(z0, sizeof(ex_operation));
    cr_assert_gt(z1, z0);
    cr_assert_gt(z2, z1);
    cr_assert_gt(z3, z2);
    ex_sender *ss[] = { s0, s1, s2, s3 };
    for (int i = 0; i < 4; i++) {
        size_t a = ex_sender_op_align(ss[i]);
        cr_assert_gt(a, 0);
        cr_assert_eq(a & (a - 1), 0, "sender %d: alignment %zu is a power of two", i, a);
    }
    cr_assert_eq(ex_sender_op_size(NULL), 0);
    ex_result r = ex_sync_wait(s3);
    expect_value_int(&r, 3);
    ex_sender_release(s0);
    ex_sender_release(s1);
    ex_sender_release(s2);
    expect_no_leaks();
}

/* ---------------------------------------------------- invalid senders */

Test(exec_sender, invalid_sender_reports_and_completes_with_its_error) {
    ex_sender *s = ex_invalid_sender(EX_EUSER + 3, "made up");
    ex_error st = ex_sender_status(s);
    cr_assert_eq(st.code, EX_EUSER + 3);
    cr_assert_str_eq(st.msg, "made up");
    const ex_sigs *sg = ex_sender_sigs(s);
    cr_assert_eq(sg->nvalues, 0);
    cr_assert_eq(sg->flags, EX_SIGS_ERROR);
    rec rc;
    rec_init(&rc);
    ex_operation *op = run_start(s, &rc);
    cr_assert_eq(rc.errors, 1);
    cr_assert_eq(rec_total(&rc), 1);
    cr_assert_eq(rc.err.code, EX_EUSER + 3);
    cr_assert_str_eq(rc.err.msg, "made up");
    run_destroy(op);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_sender, invalid_sender_edge_codes) {
    ex_sender *s = ex_invalid_sender(EX_OK, NULL);
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL, "an invalid sender never reports success");
    cr_assert_not_null(ex_sender_status(s).msg);
    ex_result r = ex_sync_wait(s);
    expect_error(&r, EX_EINVAL);
    s = ex_invalid_sender(EX_ENOMEM, "oom");
    cr_assert_eq(ex_sender_status(s).code, EX_ENOMEM);
    ex_result r2 = ex_sync_wait(s);
    expect_error(&r2, EX_ENOMEM);
    s = ex_invalid_sender(EX_EUSER, NULL);
    cr_assert_not_null(ex_sender_status(s).msg);
    ex_sender_release(s);
    cr_assert_eq(ex_sender_status(NULL).code, EX_EINVAL);
    cr_assert_not_null(ex_sender_status(NULL).msg);
    expect_no_leaks();
}

Test(exec_sender, invalid_sender_when_out_of_memory) {
    test_alloc_fail_at(1);
    ex_sender *s = ex_invalid_sender(EX_EUSER, "x");
    cr_assert_neq(ex_sender_status(s).code, EX_OK);
    ex_result r = ex_sync_wait(s);
    cr_assert_eq(r.disposition, EX_DISP_ERROR);
    cr_assert(r.error.code == EX_EUSER || r.error.code == EX_ENOMEM, "code %d", r.error.code);
    expect_no_leaks();
}

Test(exec_sender, reject_releases_its_inputs) {
    long base = test_stats.in_use;
    ex_sender *in[3] = { ex_just(ex_int(1)), NULL, ex_just(ex_int(2), ex_int(3)) };
    cr_assert_eq(test_stats.in_use, base + 2);
    ex_sender *s = ex_reject(EX_EUSER + 9, "rejected", 3, in);
    cr_assert_eq(ex_sender_status(s).code, EX_EUSER + 9);
    cr_assert_str_eq(ex_sender_status(s).msg, "rejected");
    ex_result r = ex_sync_wait(s);
    expect_error(&r, EX_EUSER + 9);
    cr_assert_eq(test_stats.in_use, base);
    expect_no_leaks();
}

Test(exec_sender, check_input) {
    ex_error e = ex_check_input(NULL, "who: NULL");
    cr_assert_eq(e.code, EX_EINVAL);
    cr_assert_str_eq(e.msg, "who: NULL");
    ex_sender *ok = ex_just();
    cr_assert_eq(ex_check_input(ok, "x").code, EX_OK);
    ex_sender *bad = ex_invalid_sender(EX_EUSER, "bad");
    e = ex_check_input(bad, "x");
    cr_assert_eq(e.code, EX_EUSER);
    cr_assert_str_eq(e.msg, "bad");
    ex_sender_release(ok);
    ex_sender_release(bad);
    expect_no_leaks();
}

static ex_sender *let_just(void *ctx, const ex_value *in, size_t n) {
    (void)ctx, (void)in, (void)n;
    return ex_just(ex_int(0));
}

static ex_sender *closure_id(void *ctx, ex_sender *s) {
    (void)ctx;
    return s;
}

Test(exec_sender, invalid_input_propagates_through_adaptors) {
    enum { K = 12 };
    for (int k = 0; k < K; k++) {
        counter c = { 0, 1 };
        ex_sender *bad = ex_invalid_sender(EX_EUSER + 5, "bad input");
        ex_sender *s = NULL;
        switch (k) {
        case 0: s = ex_then(bad, count_add, &c, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)); break;
        case 1: s = ex_then(bad, count_add, &c, EX_SIG_VARIADIC, EX_SIG(EX_T_INT)); break;
        case 2: s = ex_let_value(bad, let_just, NULL, EX_SIG_VARIADIC); break;
        case 3: s = ex_into_variant(bad); break;
        case 4: s = ex_stopped_as_optional(bad); break;
        case 5: s = ex_stopped_as_error(bad, ex_err(EX_EUSER, "s")); break;
        case 6: s = ex_continues_on(bad, ex_inline_scheduler()); break;
        case 7: s = ex_starts_on(ex_inline_scheduler(), bad); break;
        case 8: s = ex_write_env(bad, &ex_key_get_scheduler, ex_sched_value(ex_inline_scheduler())); break;
        case 9: s = ex_on(ex_inline_scheduler(), bad); break;
        case 10: s = ex_on_closure(bad, ex_inline_scheduler(), closure_id, NULL); break;
        case 11: s = ex_then(ex_then(bad, count_add, &c, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)), count_add, &c,
                             EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)); break;
        }
        ex_error st = ex_sender_status(s);
        cr_assert_eq(st.code, EX_EUSER + 5, "adaptor %d: status %d", k, st.code);
        cr_assert_str_eq(st.msg, "bad input", "adaptor %d", k);
        ex_result r = ex_sync_wait(s);
        expect_error(&r, EX_EUSER + 5);
        cr_assert_str_eq(r.error.msg, "bad input");
        cr_assert_eq(c.calls, 0, "adaptor %d: no function is called", k);
    }
    expect_no_leaks();
}

Test(exec_sender, null_input_is_einval_for_every_adaptor) {
    counter c = { 0, 1 };
    ex_sender *ss[] = {
        ex_then(NULL, count_add, &c, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)),
        ex_let_value(NULL, let_just, NULL, EX_SIG_VARIADIC),
        ex_into_variant(NULL),
        ex_stopped_as_optional(NULL),
        ex_write_env(NULL, &ex_key_get_scheduler, ex_sched_value(ex_inline_scheduler())),
        ex_continues_on(NULL, ex_inline_scheduler()),
    };
    for (size_t i = 0; i < sizeof ss / sizeof ss[0]; i++) {
        ex_error st = ex_sender_status(ss[i]);
        cr_assert_eq(st.code, EX_EINVAL, "adaptor %zu", i);
        cr_assert_not_null(st.msg);
        ex_result r = ex_sync_wait(ss[i]);
        expect_error(&r, EX_EINVAL);
    }
    ex_result r = ex_sync_wait(NULL);
    expect_error(&r, EX_EINVAL);
    expect_no_leaks();
}

Test(exec_sender, signature_mismatch_is_einval_and_releases_child) {
    counter c = { 0, 1 };
    long base = test_stats.in_use;
    ex_sender *s = ex_then(ex_just(ex_double(1.0)), count_add, &c, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    cr_assert_not_null(ex_sender_status(s).msg);
    ex_sender_release(s);
    cr_assert_eq(test_stats.in_use, base, "the rejected child was released");
    cr_assert_eq(c.calls, 0);
    expect_no_leaks();
}

/* ---------------------------------------------------- authoring senders */

typedef struct answer_op {
    ex_operation base;
    ex_receiver r;
} answer_op;

static void answer_start(ex_operation *op) {
    ex_value v = ex_int(42);
    ex_set_value(((answer_op *)op)->r, &v, 1);
}
static const ex_operation_vtable answer_op_vt = { answer_start, NULL };
static ex_error answer_connect(const ex_sender *s, ex_receiver r, void *storage) {
    (void)s;
    answer_op *o = storage;
    o->base.vt = &answer_op_vt;
    o->r = r;
    return ex_ok();
}
static int answer_destroyed;
static void answer_destroy(ex_sender *s) {
    (void)s;
    answer_destroyed++;
}
static const ex_sender_vtable answer_vt = { "answer", answer_connect, NULL, answer_destroy };

Test(exec_sender, authored_sender_works_with_adaptors) {
    answer_destroyed = 0;
    ex_sender *s = ex_sender_alloc(&answer_vt, sizeof(ex_sender));
    cr_assert_not_null(s);
    cr_assert_eq(s->refs, 1u);
    cr_assert_eq(ex_sender_status(s).code, EX_OK);
    cr_assert_eq(ex_sender_op_size(s), sizeof(ex_operation));
    cr_assert_eq(ex_sender_sigs(s)->nvalues, 0);
    cr_assert_null(ex_sender_attrs(s).node);
    s->op_size = sizeof(answer_op);
    s->op_align = _Alignof(answer_op);
    s->sigs = ex_sigs_none();
    ex_sigs_add_value(&s->sigs, EX_SIG(EX_T_INT));
    counter c = { 0, 1 };
    ex_result r = ex_sync_wait(then_count(s, &c));
    expect_value_int(&r, 43);
    cr_assert_eq(answer_destroyed, 1, "the sender's destroy ran once at the last release");
    cr_assert_null(ex_sender_alloc(&answer_vt, sizeof(ex_sender) - 1), "too small a sender");
    test_alloc_fail_at(1);
    cr_assert_null(ex_sender_alloc(&answer_vt, sizeof(ex_sender)));
    expect_no_leaks();
}

/* ----------------------------------------------- depth of sender chains */

static ex_error deep_pass(void *ctx, size_t i, const ex_value *v, size_t n) {
    (void)ctx, (void)i, (void)v, (void)n;
    return ex_ok();
}

Test(exec_sender, every_adaptor_adds_one_level_of_depth) {
    counter c = { 0, 1 };
    ex_sender *j = ex_just(ex_int(1));
    cr_assert_eq(ex_sender_depth(j), 1u);
    cr_assert_eq(ex_sender_depth(NULL), 0u);
    ex_sender *t = then_count(ex_sender_retain(j), &c);
    cr_assert_eq(ex_sender_depth(t), 2u);
    ex_sender *l = ex_let_value(ex_sender_retain(t), let_just, NULL, EX_SIG_VARIADIC);
    cr_assert_eq(ex_sender_depth(l), 3u);
    ex_sender *pair[2] = { ex_sender_retain(l), ex_sender_retain(j) };
    ex_sender *w = ex_when_all_n(pair, 2);
    cr_assert_eq(ex_sender_depth(w), 4u, "one more than the deepest child");
    ex_sender *ss[] = {
        ex_into_variant(ex_sender_retain(t)), ex_stopped_as_optional(ex_sender_retain(t)),
        ex_continues_on(ex_sender_retain(t), ex_inline_scheduler()), ex_starts_on(ex_inline_scheduler(), ex_sender_retain(t)),
        ex_write_env(ex_sender_retain(t), &ex_key_get_scheduler, ex_sched_value(ex_inline_scheduler())),
        ex_split(ex_sender_retain(t)), ex_bulk(ex_sender_retain(t), 1, deep_pass, NULL),
    };
    for (size_t i = 0; i < sizeof ss / sizeof ss[0]; i++) {
        cr_assert_eq(ex_sender_status(ss[i]).code, EX_OK, "adaptor %zu", i);
        cr_assert_eq(ex_sender_depth(ss[i]), 3u, "adaptor %zu", i);
        ex_sender_release(ss[i]);
    }
    ex_sender_release(j);
    ex_sender_release(t);
    ex_sender_release(l);
    ex_sender_release(w);
    expect_no_leaks();
}

Test(exec_sender, a_chain_past_the_depth_limit_is_etoodeep_not_a_stack_overflow) {
    /* 30000 nested ex_then overflowed an 8 MiB stack when run (11000
     * under ASan): the builders now refuse to nest past the limit. */
    counter c = { 0, 1 };
    ex_sender *s = ex_just(ex_int(0));
    for (int i = 0; i < 30000; i++) s = then_count(s, &c);
    ex_error st = ex_sender_status(s);
    cr_assert_eq(st.code, EX_ETOODEEP, "status %d", st.code);
    cr_assert_not_null(st.msg);
    ex_result r = ex_sync_wait(ex_sender_retain(s));
    expect_error(&r, EX_ETOODEEP);
    rec rc;
    rec_init(&rc);
    ex_operation *op;
    cr_assert_eq(ex_connect_alloc(s, rec_receiver(&rc), &op).code, EX_OK);
    ex_start(op);
    cr_assert_eq(rc.errors, 1);
    cr_assert_eq(rc.err.code, EX_ETOODEEP);
    ex_operation_free(op);
    ex_sender_release(s);
    cr_assert_eq(c.calls, 0);
    expect_no_leaks();
}

Test(exec_sender, when_all_and_spawn_refuse_an_input_at_the_depth_limit) {
    counter c = { 0, 1 };
    ex_sender *s = ex_just(ex_int(0));
    while (ex_sender_depth(s) < EX_SENDER_MAX_DEPTH) s = then_count(s, &c);
    cr_assert_eq(ex_sender_status(s).code, EX_OK);
    ex_sender *two[2] = { ex_just(), ex_sender_retain(s) };
    ex_sender *w = ex_when_all_n(two, 2);
    cr_assert_eq(ex_sender_status(w).code, EX_ETOODEEP);
    ex_sender_release(w);
    ex_simple_counting_scope scope;
    ex_simple_counting_scope_init(&scope);
    cr_assert_eq(ex_spawn(ex_sender_retain(s), ex_simple_counting_scope_token(&scope)).code, EX_ETOODEEP);
    ex_result r = ex_sync_wait(ex_simple_counting_scope_join(&scope));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    ex_simple_counting_scope_destroy(&scope);
    ex_sender_release(s);
    expect_no_leaks();
}

/* Chains at the limit of each adaptor run on the test's thread (8 MiB of
 * stack; about 1.1 MiB at most at the limit, under ASan). */
enum { DEEP_THEN, DEEP_UPON_ERROR, DEEP_LET, DEEP_BULK, DEEP_WHEN_ALL, DEEP_SPLIT, DEEP_CONTINUES_ON, DEEP_STARTS_ON,
       DEEP_AFFINE_ON, DEEP_ON, DEEP_WRITE_ENV, DEEP_INTO_VARIANT, DEEP_STOPPED_AS_OPTIONAL, DEEP_KINDS };

static const ex_key deep_key = { "test.sender.deep", true };

static ex_error deep_unwrap(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)n;
    out[0] = in[0].type == EX_T_TUPLE ? in[0].as.tuple->v[0] : in[0];
    return ex_ok();
}

static ex_error deep_keep(void *ctx, ex_error e, ex_value *out) {
    (void)ctx, (void)e;
    out[0] = ex_int(-1);
    return ex_ok();
}

static ex_sender *deep_let_same(void *ctx, const ex_value *in, size_t n) {
    (void)ctx, (void)n;
    return ex_just(in[0]);
}

static ex_sender *deep_wrap(int kind, ex_sender *s, counter *c) {
    ex_scheduler in = ex_inline_scheduler();
    switch (kind) {
    case DEEP_THEN: return then_count(s, c);
    case DEEP_UPON_ERROR: return ex_upon_error(s, deep_keep, NULL, EX_SIG(EX_T_INT));
    case DEEP_LET: return ex_let_value(s, deep_let_same, NULL, EX_SIG(EX_T_INT));
    case DEEP_BULK: return ex_bulk(s, 1, deep_pass, NULL);
    case DEEP_WHEN_ALL: return ex_when_all_n(&s, 1);
    case DEEP_SPLIT: return ex_split(s);
    case DEEP_CONTINUES_ON: return ex_continues_on(s, in);
    case DEEP_STARTS_ON: return ex_starts_on(in, s);
    case DEEP_AFFINE_ON: return ex_affine_on(s, in);
    case DEEP_ON: return ex_on(in, s);
    case DEEP_WRITE_ENV: return ex_write_env(s, &deep_key, ex_int(1));
    case DEEP_INTO_VARIANT: return ex_then(ex_into_variant(s), deep_unwrap, NULL, EX_SIG_VARIADIC, EX_SIG(EX_T_INT));
    default: return ex_then(ex_stopped_as_optional(s), deep_unwrap, NULL, EX_SIG_VARIADIC, EX_SIG(EX_T_INT));
    }
}

Test(exec_sender, chains_at_the_depth_limit_run_for_every_adaptor) {
    for (int kind = 0; kind < DEEP_KINDS; kind++) {
        counter c = { 0, 1 };
        ex_sender *s = then_count(ex_just(ex_int(0)), &c);
        for (;;) {
            ex_sender *next = deep_wrap(kind, ex_sender_retain(s), &c);
            ex_error st = ex_sender_status(next);
            if (st.code) {
                cr_assert_eq(st.code, EX_ETOODEEP, "kind %d: status %d at depth %u", kind, st.code, ex_sender_depth(s));
                ex_sender_release(next);
                break;
            }
            ex_sender_release(s);
            s = next;
        }
        cr_assert_geq(ex_sender_depth(s), EX_SENDER_MAX_DEPTH - 3, "kind %d", kind);  /* ex_on adds 3 at a time */
        ex_result r = ex_sync_wait(s);
        cr_assert_eq(r.disposition, EX_DISP_VALUE, "kind %d: %s", kind, r.error.msg ? r.error.msg : "");
        /* the first then, and for DEEP_THEN one per level above it */
        cr_assert_eq(c.calls, kind == DEEP_THEN ? (int)EX_SENDER_MAX_DEPTH - 1 : 1, "kind %d: %d calls", kind, c.calls);
        cr_assert_eq(r.values[0].as.i, c.calls, "kind %d", kind);
        ex_result_destroy(&r);
    }
    expect_no_leaks();
}

/* A task's stack sized by the rule of sender.h for a chain at the limit. */
static ex_task_result await_deep_chain(ex_task *t, void *arg) {
    counter *c = arg;
    ex_sender *s = ex_just(ex_int(0));
    while (ex_sender_depth(s) < EX_SENDER_MAX_DEPTH) s = then_count(s, c);
    ex_await_result r = ex_await(t, s);
    return r.status == EX_AWAIT_VALUE ? ex_task_value(r.v[0]) : ex_task_i64(-1);
}

Test(exec_sender, a_task_with_a_stack_of_1_2_kib_a_level_awaits_a_chain_at_the_depth_limit) {
    counter c = { 0, 1 };
    ex_task_options o = { .stack_size = EX_SENDER_MAX_DEPTH * 1200 };
    ex_result r = ex_sync_wait(ex_task_create(await_deep_chain, &c, &o));
    expect_value_int(&r, EX_SENDER_MAX_DEPTH - 1);
    expect_no_leaks();
}
