/* SPDX-License-Identifier: MIT */
/* [exec.sync.wait]: this_thread::sync_wait and sync_wait_with_variant. */
#include <pthread.h>
#include <stdalign.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/helpers.h"

TEST_SUITE(exec_sync_wait, 10);

/* ------------------------------------------------------------------ helpers */

static ex_error sw_add1(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)n;
    out[0] = ex_int(in[0].as.i + 1);
    return ex_ok();
}

static ex_sender *sw_chain(ex_sender *s, int depth) {
    for (int i = 0; i < depth; i++) s = ex_then(s, sw_add1, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    return s;
}

/* then: doubles, or fails with EX_EUSER+7 when *ctx is true */
static ex_error sw_double_or_fail(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)n;
    if (*(const bool *)ctx) return ex_err(EX_EUSER + 7, "sw_double_or_fail: asked to fail");
    out[0] = ex_int(in[0].as.i * 2);
    return ex_ok();
}

/* upon_error: the error becomes a string */
static ex_error sw_err_to_str(void *ctx, ex_error err, ex_value *out) {
    (void)ctx;
    out[0] = ex_str(err.code == EX_EUSER + 7 ? "failed" : "other");
    return ex_ok();
}

/* A sender with two value signatures, set_value(int) and set_value(str). */
static ex_sender *sw_two_sigs(bool *fail) {
    return ex_upon_error(ex_then(ex_just(ex_int(21)), sw_double_or_fail, fail, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)),
                         sw_err_to_str, NULL, EX_SIG(EX_T_STR));
}

static void sw_expect_two_sigs(const ex_sender *s) {
    const ex_sigs *sg = ex_sender_sigs(s);
    cr_assert_eq(ex_sender_status(s).code, 0);
    cr_assert_eq(sg->nvalues, 2, "the test sender must have two value signatures (has %d)", sg->nvalues);
    cr_assert_eq(sg->values[0].arity, 1);
    cr_assert_eq(sg->values[0].types[0], EX_T_INT);
    cr_assert_eq(sg->values[1].arity, 1);
    cr_assert_eq(sg->values[1].types[0], EX_T_STR);
}

/* ------------------------------------------------------------- results */

Test(exec_sync_wait, value_result) {
    expect_sync_int(ex_just(ex_int(42)), 42);
    expect_no_leaks();
}

Test(exec_sync_wait, no_values_result) {
    expect_sync_values(ex_just(), 0);
    expect_no_leaks();
}

Test(exec_sync_wait, several_values_result) {
    static int obj;
    char want[160];
    snprintf(want, sizeof want, "int -5; double 2.5; str \"x\"; bool true; uint 18446744073709551615; ptr %p", (void *)&obj);
    expect_sync_text(ex_just(ex_int(-5), ex_double(2.5), ex_str("x"), ex_bool(true), ex_uint(UINT64_MAX), ex_ptr(&obj)),
                     want);
    expect_no_leaks();
}

Test(exec_sync_wait, max_arity_values_result) {
    ex_value v[EX_MAX_ARITY];
    for (int i = 0; i < EX_MAX_ARITY; i++) v[i] = ex_int(i * 10);
    ex_result r = ex_sync_wait(ex_just_n(v, EX_MAX_ARITY));
    expect_value_arity(&r, EX_MAX_ARITY);
    for (int i = 0; i < EX_MAX_ARITY; i++) cr_assert_eq(r.values[i].as.i, i * 10);
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(exec_sync_wait, error_result) {
    static int payload;
    ex_result r = ex_sync_wait(ex_just_error(ex_err_data(EX_EUSER + 3, "sw: boom", &payload)));
    expect_error(&r, EX_EUSER + 3);
    cr_assert_str_eq(r.error.msg, "sw: boom");
    cr_assert_eq(r.error.data, &payload);
    cr_assert_eq(r.n, 0);
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(exec_sync_wait, error_from_a_callback) {
    bool fail = true;
    expect_sync_error(ex_then(ex_just(ex_int(1)), sw_double_or_fail, &fail, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)), EX_EUSER + 7);
    fail = false;
    expect_sync_int(ex_then(ex_just(ex_int(4)), sw_double_or_fail, &fail, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)), 8);
    expect_no_leaks();
}

Test(exec_sync_wait, stopped_result) {
    ex_result r = ex_sync_wait(ex_just_stopped());
    expect_stopped(&r);
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(exec_sync_wait, result_tuples_are_deep_copies) {
    ex_value inner[2] = { ex_int(1), ex_str("two") };
    ex_tuple t = { 5, 2, inner };
    ex_result r = ex_sync_wait(ex_just(ex_tuple_value(&t), ex_int(3)));
    inner[0] = ex_int(100);
    expect_value_arity(&r, 2);
    cr_assert_eq(r.values[0].type, EX_T_TUPLE);
    const ex_tuple *rt = r.values[0].as.tuple;
    cr_assert_neq(rt, &t);
    cr_assert_neq(rt->v, inner, "the result owns its tuple contents");
    cr_assert_eq(rt->index, 5);
    cr_assert_eq(rt->n, 2);
    cr_assert_eq(rt->v[0].as.i, 1);
    cr_assert_str_eq(rt->v[1].as.s, "two");
    cr_assert_eq(r.values[1].as.i, 3);
    ex_result_destroy(&r);
    ex_result_destroy(&r); /* safe twice */
    expect_no_leaks();
}

Test(exec_sync_wait, result_destroy_is_safe_on_every_result) {
    ex_result v = ex_sync_wait(ex_just(ex_int(1)));
    ex_result e = ex_sync_wait(ex_just_error(ex_err(EX_EUSER, "sw: e")));
    ex_result s = ex_sync_wait(ex_just_stopped());
    ex_result n = ex_sync_wait(NULL);
    ex_result_destroy(&v);
    ex_result_destroy(&e);
    ex_result_destroy(&s);
    ex_result_destroy(&n);
    ex_result_destroy(&v); /* safe twice */
    ex_result_destroy(NULL);
    expect_no_leaks();
}

Test(exec_sync_wait, null_sender_is_einval) {
    expect_sync_error(NULL, EX_EINVAL);
    ex_result r = ex_sync_wait_with_variant(NULL);
    expect_error(&r, EX_EINVAL);
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(exec_sync_wait, invalid_sender_reports_its_error) {
    expect_sync_error(ex_then(NULL, sw_add1, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)), EX_EINVAL);
    expect_no_leaks();
}

/* --------------------------------------------------- several value signatures */

Test(exec_sync_wait, several_value_signatures_is_einval) {
    bool fail = false;
    ex_sender *s = sw_two_sigs(&fail);
    sw_expect_two_sigs(s);
    ex_result r = ex_sync_wait(s); /* consumes s */
    expect_error(&r, EX_EINVAL);
    ex_result_destroy(&r);
    fail = true;
    expect_sync_error(sw_two_sigs(&fail), EX_EINVAL);
    expect_no_leaks();
}

Test(exec_sync_wait, with_variant_accepts_several_signatures) {
    bool fail = false;
    ex_sender *s = sw_two_sigs(&fail);
    sw_expect_two_sigs(s);

    ex_result r = ex_sync_wait_with_variant(ex_sender_retain(s));
    expect_value_arity(&r, 1); /* one datum: the variant */
    cr_assert_eq(r.values[0].type, EX_T_TUPLE);
    const ex_tuple *t = r.values[0].as.tuple;
    cr_assert_eq(t->index, 0, "the value path is signature 0 (int)");
    cr_assert_eq(t->n, 1);
    cr_assert_eq(t->v[0].type, EX_T_INT);
    cr_assert_eq(t->v[0].as.i, 42);
    ex_result_destroy(&r);

    fail = true;
    r = ex_sync_wait_with_variant(s);
    expect_value_arity(&r, 1);
    cr_assert_eq(r.values[0].type, EX_T_TUPLE);
    t = r.values[0].as.tuple;
    cr_assert_eq(t->index, 1, "the error path produced signature 1 (str)");
    cr_assert_eq(t->n, 1);
    cr_assert_eq(t->v[0].type, EX_T_STR);
    cr_assert_str_eq(t->v[0].as.s, "failed");
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(exec_sync_wait, with_variant_single_signature_and_other_channels) {
    ex_result r = ex_sync_wait_with_variant(ex_just(ex_int(1), ex_int(2)));
    expect_value_arity(&r, 1);
    cr_assert_eq(r.values[0].type, EX_T_TUPLE);
    cr_assert_eq(r.values[0].as.tuple->index, 0);
    cr_assert_eq(r.values[0].as.tuple->n, 2);
    cr_assert_eq(r.values[0].as.tuple->v[0].as.i, 1);
    cr_assert_eq(r.values[0].as.tuple->v[1].as.i, 2);
    ex_result_destroy(&r);

    r = ex_sync_wait_with_variant(ex_just());
    expect_value_arity(&r, 1);
    cr_assert_eq(r.values[0].type, EX_T_TUPLE);
    cr_assert_eq(r.values[0].as.tuple->n, 0);
    ex_result_destroy(&r);

    r = ex_sync_wait_with_variant(ex_just_error(ex_err(EX_EUSER + 1, "sw: err")));
    expect_error(&r, EX_EUSER + 1);
    ex_result_destroy(&r);

    r = ex_sync_wait_with_variant(ex_just_stopped());
    expect_stopped(&r);
    ex_result_destroy(&r);
    expect_no_leaks();
}

/* ------------------------------------------------------------ environment */

typedef struct sw_probe {
    ex_scheduler sched;
    const void *thread;
    int calls;
} sw_probe;

static ex_sender *sw_keep_sched_read_delegation(void *ctx, const ex_value *in, size_t n) {
    sw_probe *p = ctx;
    p->calls++;
    if (n == 1 && in[0].type == EX_T_SCHED) p->sched = in[0].as.sched;
    return ex_read_env(&ex_key_get_delegation_scheduler, EX_T_SCHED);
}

Test(exec_sync_wait, env_answers_scheduler_and_delegation_scheduler_with_the_loop) {
    sw_probe p;
    memset(&p, 0, sizeof p);
    ex_result r = ex_sync_wait(ex_let_value(ex_read_env(&ex_key_get_scheduler, EX_T_SCHED),
                                            sw_keep_sched_read_delegation, &p, EX_SIG(EX_T_SCHED)));
    cr_assert_eq(r.disposition, EX_DISP_VALUE, "got %d (%s)", r.disposition, r.error.msg ? r.error.msg : "");
    cr_assert_eq(p.calls, 1);
    cr_assert_eq(r.n, 1);
    cr_assert_eq(r.values[0].type, EX_T_SCHED);
    cr_assert(ex_scheduler_valid(p.sched));
    cr_assert_str_eq(p.sched.vt->name, "run_loop");
    cr_assert_str_eq(r.values[0].as.sched.vt->name, "run_loop");
    /* handles only compared, never used: the loop is gone */
    cr_assert(ex_scheduler_equal(p.sched, r.values[0].as.sched),
              "get_scheduler and get_delegation_scheduler are the same run loop");
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(exec_sync_wait, env_stop_token_is_never_stop) {
    ex_result r = ex_sync_wait(ex_read_env(&ex_key_get_stop_token, EX_T_TOKEN));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_eq(r.values[0].type, EX_T_TOKEN);
    cr_assert_not(ex_stop_token_stop_possible(r.values[0].as.token));
    cr_assert_not(ex_stop_token_stop_requested(r.values[0].as.token));
    ex_result_destroy(&r);
    expect_no_leaks();
}

static ex_error sw_record_thread(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    sw_probe *p = ctx;
    p->thread = test_thread_id();
    p->calls++;
    out[0] = ex_int(p->calls);
    return ex_ok();
}

static ex_sender *sw_schedule_on(void *ctx, const ex_value *in, size_t n) {
    (void)n;
    return ex_then(ex_schedule(in[0].as.sched), sw_record_thread, ctx, EX_SIG0, EX_SIG(EX_T_INT));
}

Test(exec_sync_wait, the_loop_is_driven_by_the_calling_thread) {
    sw_probe p;
    memset(&p, 0, sizeof p);
    expect_sync_int(
        ex_let_value(ex_read_env(&ex_key_get_scheduler, EX_T_SCHED), sw_schedule_on, &p, EX_SIG(EX_T_SCHED)), 1);
    cr_assert_eq(p.thread, test_thread_id(), "work scheduled on sync_wait's loop runs on the waiting thread");
    expect_no_leaks();
}

/* Items posted to the loop run in the order they were posted, on the
 * waiting thread; a dispatch from one of them runs inline (its thread runs
 * the loop), one from outside an item is queued. */
typedef struct sw_fifo sw_fifo;
typedef struct sw_fifo_item {
    ex_work work;  /* first: the item is its work */
    sw_fifo *f;
    int id;
} sw_fifo_item;

struct sw_fifo {
    sw_fifo_item items[5];  /* [4]: dispatched from inside items[1] */
    ex_scheduler loop;
    int order[8];
    int ran;
    const void *thread;
    bool off_thread;
};

static void sw_fifo_run(ex_work *w) {
    sw_fifo_item *it = (sw_fifo_item *)(void *)w;
    sw_fifo *f = it->f;
    if (f->thread != test_thread_id()) f->off_thread = true;
    if (f->ran < 8) f->order[f->ran] = it->id;
    f->ran++;
    if (it->id == 1) cr_assert_eq(ex_dispatch(f->loop, &f->items[4].work).code, EX_OK);  /* inline: 4 right after 1 */
}

static ex_sender *sw_fifo_post(void *ctx, const ex_value *in, size_t n) {
    sw_fifo *f = ctx;
    cr_assert_eq(n, 1);
    f->loop = in[0].as.sched;
    for (int i = 0; i < 5; i++) f->items[i] = (sw_fifo_item){ .work.execute = sw_fifo_run, .f = f, .id = i };
    for (int i = 0; i < 4; i++) {
        /* Not inside an item: dispatch queues like post. */
        ex_work *w = &f->items[i].work;
        cr_assert_eq((i % 2 ? ex_dispatch(f->loop, w) : ex_post(f->loop, w)).code, EX_OK);
    }
    return ex_schedule(f->loop);  /* after the four */
}

Test(exec_sync_wait, loop_items_run_in_post_order_on_the_waiting_thread) {
    sw_fifo f;
    memset(&f, 0, sizeof f);
    f.thread = test_thread_id();
    ex_result r = ex_sync_wait(ex_let_value(ex_read_env(&ex_key_get_scheduler, EX_T_SCHED), sw_fifo_post, &f, EX_SIG(EX_T_SCHED)));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_eq(f.ran, 5);
    int want[5] = { 0, 1, 4, 2, 3 };
    for (int i = 0; i < 5; i++) cr_assert_eq(f.order[i], want[i], "item %d: ran %d, expected %d", i, f.order[i], want[i]);
    cr_assert_not(f.off_thread);
    ex_result_destroy(&r);
    expect_no_leaks();
}

/* sync_wait inside sync_wait (inside a callback): each has its own loop. */
static ex_error sw_nested_wait(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)n;
    ex_result inner = ex_sync_wait(ex_just(ex_int(100)));
    if (inner.disposition != EX_DISP_VALUE) return ex_err(EX_EUSER + 9, "sw_nested_wait: inner wait failed");
    out[0] = ex_int(in[0].as.i + inner.values[0].as.i);
    ex_result_destroy(&inner);
    return ex_ok();
}

Test(exec_sync_wait, nested_sync_wait) {
    expect_sync_int(ex_then(ex_just(ex_int(5)), sw_nested_wait, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)), 105);
    expect_no_leaks();
}

/* ---------------------------------------------------- other threads */

typedef struct sw_where {
    pthread_t thread;
} sw_where;

static ex_error sw_where_add1(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)n;
    ((sw_where *)ctx)->thread = pthread_self();
    out[0] = ex_int(in[0].as.i + 1);
    return ex_ok();
}

Test(exec_sync_wait, completion_from_another_thread_all_channels) {
    ex_single_thread_context ctx;
    ex_scheduler sch = test_stc_init(&ctx);
    pthread_t tid = ex_single_thread_context_thread_id(&ctx);
    for (int i = 0; i < 100; i++) {
        sw_where w;
        w.thread = pthread_self();
        expect_sync_int(ex_then(ex_continues_on(ex_just(ex_int(i)), sch), sw_where_add1, &w,
                                           EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)), i + 1);
        cr_assert(pthread_equal(w.thread, tid), "the value arrived on the context's thread");

        expect_sync_error(ex_continues_on(ex_just_error(ex_err(EX_EUSER + 2, "sw: remote error")), sch), EX_EUSER + 2);

        ex_result r = ex_sync_wait(ex_continues_on(ex_just_stopped(), sch));
        expect_stopped(&r);
        ex_result_destroy(&r);

        expect_sync_int(ex_starts_on(sch, ex_then(ex_just(ex_int(i)), sw_where_add1, &w, EX_SIG(EX_T_INT),
                                                   EX_SIG(EX_T_INT))), i + 1);
        cr_assert(pthread_equal(w.thread, tid));
    }
    test_stc_destroy(&ctx);
    expect_no_leaks();
}

Test(exec_sync_wait, tuple_result_from_another_thread) {
    ex_single_thread_context ctx;
    test_stc_init(&ctx);
    ex_value inner[3] = { ex_int(7), ex_int(8), ex_int(9) };
    ex_tuple t = { 2, 3, inner };
    for (int i = 0; i < 50; i++) {
        ex_result r = ex_sync_wait(ex_continues_on(ex_just(ex_tuple_value(&t)), ex_single_thread_context_scheduler(&ctx)));
        cr_assert_eq(r.disposition, EX_DISP_VALUE);
        cr_assert_eq(r.values[0].type, EX_T_TUPLE);
        cr_assert_eq(r.values[0].as.tuple->index, 2);
        cr_assert_eq(r.values[0].as.tuple->n, 3);
        cr_assert_eq(r.values[0].as.tuple->v[2].as.i, 9);
        ex_result_destroy(&r);
    }
    test_stc_destroy(&ctx);
    expect_no_leaks();
}

/* ------------------------------------------------- large operations */

enum { SW_DEPTH = 40 };

Test(exec_sync_wait, large_operation_uses_the_heap_path) {
    ex_sender *s = sw_chain(ex_just(ex_int(0)), SW_DEPTH);
    cr_assert_eq(ex_sender_status(s).code, 0);
    cr_assert_gt(ex_sender_op_size(s), 1024, "the chain must not fit the 1024-byte inline storage (%zu)",
                 ex_sender_op_size(s));
    long before = test_alloc_count();
    ex_result r = ex_sync_wait(s);
    long during = test_alloc_count() - before;
    expect_value_int(&r, SW_DEPTH);
    cr_assert_geq(during, 1, "the operation state came from the default allocator");
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(exec_sync_wait, large_operation_completing_on_another_thread) {
    ex_single_thread_context ctx;
    test_stc_init(&ctx);
    ex_sender *s = ex_continues_on(sw_chain(ex_just(ex_int(0)), SW_DEPTH), ex_single_thread_context_scheduler(&ctx));
    s = sw_chain(s, 2);
    cr_assert_gt(ex_sender_op_size(s), 1024);
    for (int i = 0; i < 100; i++) {
        expect_sync_int(ex_sender_retain(s), SW_DEPTH + 2);
    }
    ex_sender_release(s);
    test_stc_destroy(&ctx);
    expect_no_leaks();
}

/* A sender whose operation needs 256-byte alignment: more than the inline
 * storage offers, so sync_wait must place it on the heap, aligned. */
static void sw_aligned_start(test_op *op) {
    ex_value v = ex_bool(((uintptr_t)op % 256) == 0);
    ex_set_value(op->r, &v, 1);
}

Test(exec_sync_wait, over_aligned_operation) {
    ex_sigs sigs = ex_sigs_none();
    cr_assert(ex_sigs_add_value(&sigs, EX_SIG(EX_T_BOOL)));
    ex_sender *s = test_sender_new(sw_aligned_start, NULL, &sigs);
    s->op_size = 256;
    s->op_align = 256;
    ex_result r = ex_sync_wait(s);
    cr_assert_eq(r.disposition, EX_DISP_VALUE, "got %d (%s)", r.disposition, r.error.msg ? r.error.msg : "");
    cr_assert_eq(r.values[0].type, EX_T_BOOL);
    cr_assert(r.values[0].as.b, "the operation state is aligned as the sender asked");
    ex_result_destroy(&r);
    expect_no_leaks();
}

/* ---------------------------------------------------- allocation failure */

/* Runs build() with allocation number k failing, for k = 1, 2, ... until
 * a run sees no failure.  Each run must give EX_ENOMEM (when an allocation
 * failed) or the right result, and leak nothing. */
typedef ex_sender *(*sw_build_fn)(void *ctx);
typedef void (*sw_check_fn)(ex_result *r, void *ctx);

static void sw_fail_everywhere(sw_build_fn build, sw_check_fn check, void *ctx, bool with_variant) {
    int enomem = 0;
    int k;
    for (k = 1; k < 1000; k++) {
        test_alloc_reset();
        test_alloc_fail_at(k);
        ex_sender *s = build(ctx);
        ex_result r = with_variant ? ex_sync_wait_with_variant(s) : ex_sync_wait(s);
        long failed = test_stats.failed;
        if (r.disposition == EX_DISP_ERROR) {
            cr_assert_eq(r.error.code, EX_ENOMEM, "allocation %d failing gave error %d (%s)", k, r.error.code,
                         r.error.msg ? r.error.msg : "");
            cr_assert_gt(failed, 0, "EX_ENOMEM without a failed allocation");
            cr_assert_not_null(r.error.msg);
            enomem++;
        } else {
            check(&r, ctx);
        }
        ex_result_destroy(&r);
        cr_assert_eq(test_stats.in_use, 0, "allocation %d failing leaked %ld block(s)", k, test_stats.in_use);
        if (failed == 0) break;
    }
    test_alloc_reset();
    cr_assert_lt(k, 1000, "allocation failures never stopped");
    cr_assert_gt(enomem, 0, "some allocation failure must surface as EX_ENOMEM");
}

static ex_sender *sw_build_chain(void *ctx) {
    (void)ctx;
    return sw_chain(ex_just(ex_int(0)), SW_DEPTH);
}

static void sw_check_chain(ex_result *r, void *ctx) {
    (void)ctx;
    expect_value_int(r, SW_DEPTH);
}

Test(exec_sync_wait, allocation_failure_anywhere_large_chain) {
    sw_fail_everywhere(sw_build_chain, sw_check_chain, NULL, false);
    expect_no_leaks();
}

/* then over a tuple: passes the tuple through. */
static ex_error sw_identity(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx;
    for (size_t i = 0; i < n; i++) out[i] = in[i];
    return ex_ok();
}

static ex_sender *sw_build_tuple_identity(void *ctx) {
    (void)ctx;
    static const ex_value inner[2] = { { EX_T_INT, { .i = 4 } }, { EX_T_INT, { .i = 5 } } };
    ex_tuple t = { 1, 2, inner };
    return ex_then(ex_just(ex_tuple_value(&t)), sw_identity, NULL, EX_SIG(EX_T_TUPLE), EX_SIG(EX_T_TUPLE));
}

static void sw_check_tuple(ex_result *r, void *ctx) {
    (void)ctx;
    cr_assert_eq(r->disposition, EX_DISP_VALUE);
    cr_assert_eq(r->n, 1);
    cr_assert_eq(r->values[0].type, EX_T_TUPLE);
    cr_assert_eq(r->values[0].as.tuple->index, 1);
    cr_assert_eq(r->values[0].as.tuple->n, 2);
    cr_assert_eq(r->values[0].as.tuple->v[0].as.i, 4);
    cr_assert_eq(r->values[0].as.tuple->v[1].as.i, 5);
}

Test(exec_sync_wait, allocation_failure_copying_tuple_results) {
    sw_fail_everywhere(sw_build_tuple_identity, sw_check_tuple, NULL, false);
    expect_no_leaks();
}

static ex_sender *sw_build_two_sigs(void *ctx) { return sw_two_sigs(ctx); }

static void sw_check_two_sigs(ex_result *r, void *ctx) {
    bool fail = *(bool *)ctx;
    cr_assert_eq(r->disposition, EX_DISP_VALUE);
    cr_assert_eq(r->n, 1);
    cr_assert_eq(r->values[0].type, EX_T_TUPLE);
    const ex_tuple *t = r->values[0].as.tuple;
    cr_assert_eq(t->n, 1);
    if (fail) {
        cr_assert_eq(t->index, 1);
        cr_assert_str_eq(t->v[0].as.s, "failed");
    } else {
        cr_assert_eq(t->index, 0);
        cr_assert_eq(t->v[0].as.i, 42);
    }
}

Test(exec_sync_wait, allocation_failure_anywhere_with_variant) {
    bool fail = false;
    sw_fail_everywhere(sw_build_two_sigs, sw_check_two_sigs, &fail, true);
    fail = true;
    sw_fail_everywhere(sw_build_two_sigs, sw_check_two_sigs, &fail, true);
    expect_no_leaks();
}

typedef struct sw_remote {
    ex_single_thread_context *ctx;
} sw_remote;

static ex_sender *sw_build_remote(void *ctx) {
    sw_remote *rm = ctx;
    ex_sender *s = ex_continues_on(sw_chain(ex_just(ex_int(0)), SW_DEPTH), ex_single_thread_context_scheduler(rm->ctx));
    return sw_chain(s, 1);
}

static void sw_check_remote(ex_result *r, void *ctx) {
    (void)ctx;
    expect_value_int(r, SW_DEPTH + 1);
}

Test(exec_sync_wait, allocation_failure_anywhere_remote_completion) {
    ex_single_thread_context ctx;
    test_stc_init(&ctx);
    sw_remote rm = { &ctx };
    sw_fail_everywhere(sw_build_remote, sw_check_remote, &rm, false);
    test_stc_destroy(&ctx);
    expect_no_leaks();
}
