/* [exec.let]: let_value, let_error, let_stopped. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/helpers.h"

TEST_SUITE(exec_let, 10);

/* ------------------------------------------------------------- fixtures */

typedef struct seen {
    int calls;
    size_t n;
    ex_value in[EX_MAX_ARITY];
    const ex_value *in_ptr;  /* the array fn was given */
    ex_error err;
    ex_sender *ret;          /* what fn returns (a new reference is handed out) */
} seen;

static void seen_init(seen *s) { memset(s, 0, sizeof *s); }

static void record(seen *s, const ex_value *in, size_t n) {
    s->calls++;
    s->n = n;
    s->in_ptr = in;
    for (size_t i = 0; i < n && i < EX_MAX_ARITY; i++) s->in[i] = in[i];
}

/* let_value: (int x, ...) -> just(int 10x) */
static ex_sender *lv_times10(void *ctx, const ex_value *in, size_t n) {
    record(ctx, in, n);
    return ex_just(ex_int(in[0].as.i * 10));
}

/* let_value: anything -> just(int n) */
static ex_sender *lv_count(void *ctx, const ex_value *in, size_t n) {
    record(ctx, in, n);
    return ex_just(ex_int((int64_t)n));
}

/* let_value / let_error / let_stopped: return the prepared sender. */
static ex_sender *lv_ret(void *ctx, const ex_value *in, size_t n) {
    seen *s = ctx;
    record(s, in, n);
    return ex_sender_retain(s->ret);
}
static ex_sender *le_ret(void *ctx, ex_error err) {
    seen *s = ctx;
    s->calls++;
    s->err = err;
    return ex_sender_retain(s->ret);
}
static ex_sender *ls_ret(void *ctx) {
    seen *s = ctx;
    s->calls++;
    return ex_sender_retain(s->ret);
}

static ex_sender *lv_null(void *ctx, const ex_value *in, size_t n) {
    record(ctx, in, n);
    return NULL;
}
static ex_sender *le_null(void *ctx, ex_error err) {
    ((seen *)ctx)->calls++;
    ((seen *)ctx)->err = err;
    return NULL;
}
static ex_sender *ls_null(void *ctx) {
    ((seen *)ctx)->calls++;
    return NULL;
}

/* let_error: error -> just(int code, str msg) */
static ex_sender *le_code(void *ctx, ex_error err) {
    seen *s = ctx;
    s->calls++;
    s->err = err;
    return ex_just(ex_int(err.code), ex_str(err.msg));
}

/* let_stopped: -> just(int 7) */
static ex_sender *ls_seven(void *ctx) {
    ((seen *)ctx)->calls++;
    return ex_just(ex_int(7));
}

/* Read get_scheduler from the environment fn's sender is connected to. */
static ex_sender *lv_read_sched(void *ctx, const ex_value *in, size_t n) {
    record(ctx, in, n);
    return ex_read_env(&ex_key_get_scheduler, EX_T_SCHED);
}
static ex_sender *le_read_sched(void *ctx, ex_error err) {
    ((seen *)ctx)->calls++;
    ((seen *)ctx)->err = err;
    return ex_read_env(&ex_key_get_scheduler, EX_T_SCHED);
}
static ex_sender *ls_read_sched(void *ctx) {
    ((seen *)ctx)->calls++;
    return ex_read_env(&ex_key_get_scheduler, EX_T_SCHED);
}
static ex_sender *lv_read_token(void *ctx, const ex_value *in, size_t n) {
    record(ctx, in, n);
    return ex_read_env(&ex_key_get_stop_token, EX_T_TOKEN);
}

/* Connects into local storage, starts, destroys the operation and releases s. */
static void run_inline(ex_sender *s, rec *rc) {
    _Alignas(max_align_t) unsigned char buf[2048];
    cr_assert_leq(ex_sender_op_size(s), sizeof buf);
    ex_operation *op = NULL;
    ex_error e = ex_connect(s, rec_receiver(rc), buf, sizeof buf, &op);
    cr_assert_eq(e.code, 0, "connect failed: %s", e.msg ? e.msg : "");
    ex_start(op);
    cr_assert_eq(rec_total(rc), 1, "exactly one completion expected");
    ex_operation_destroy(op);
    ex_sender_release(s);
}

/* ------------------------------------------------------------- let_value */

Test(exec_let, let_value_calls_fn_with_the_values) {
    seen sn;
    seen_init(&sn);
    ex_sender *s = ex_let_value(ex_just(ex_int(4), ex_str("a")), lv_times10, &sn, EX_SIG(EX_T_INT, EX_T_STR));
    cr_assert_eq(ex_sender_status(s).code, 0);
    ex_result r = ex_sync_wait(s);
    expect_value_int(&r, 40);
    cr_assert_eq(sn.calls, 1);
    cr_assert_eq(sn.n, 2);
    cr_assert_eq(sn.in[0].type, EX_T_INT);
    cr_assert_eq(sn.in[0].as.i, 4);
    cr_assert_eq(sn.in[1].type, EX_T_STR);
    cr_assert_str_eq(sn.in[1].as.s, "a");
    expect_no_leaks();
}

Test(exec_let, let_value_fn_not_called_before_start) {
    seen sn;
    seen_init(&sn);
    rec rc;
    rec_init(&rc);
    ex_sender *s = ex_let_value(ex_just(ex_int(2)), lv_times10, &sn, EX_SIG(EX_T_INT));
    cr_assert_eq(sn.calls, 0);
    _Alignas(max_align_t) unsigned char buf[2048];
    ex_operation *op;
    cr_assert_eq(ex_connect(s, rec_receiver(&rc), buf, sizeof buf, &op).code, 0);
    cr_assert_eq(sn.calls, 0, "connect must not call fn");
    cr_assert_eq(rec_total(&rc), 0);
    ex_start(op);
    cr_assert_eq(sn.calls, 1);
    cr_assert_eq(rc.values, 1);
    cr_assert_eq(rc.v[0].as.i, 20);
    ex_operation_destroy(op);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_let, let_value_result_is_the_returned_senders_values) {
    seen sn;
    seen_init(&sn);
    sn.ret = ex_just(ex_double(1.5), ex_str("x"), ex_uint(3));
    ex_result r = ex_sync_wait(ex_let_value(ex_just(), lv_ret, &sn, EX_SIG0));
    cr_assert_eq(r.disposition, EX_DISP_VALUE, "%s", r.error.msg ? r.error.msg : "");
    cr_assert_eq(r.n, 3);
    cr_assert_float_eq(r.values[0].as.d, 1.5, 0);
    cr_assert_str_eq(r.values[1].as.s, "x");
    cr_assert_eq(r.values[2].as.u, 3u);
    cr_assert_eq(sn.calls, 1);
    cr_assert_eq(sn.n, 0);
    ex_result_destroy(&r);
    ex_sender_release(sn.ret);
    expect_no_leaks();
}

Test(exec_let, let_value_result_is_the_returned_senders_error) {
    seen sn;
    seen_init(&sn);
    static int payload;
    sn.ret = ex_just_error(ex_err_data(EX_EUSER + 11, "inner failed", &payload));
    ex_result r = ex_sync_wait(ex_let_value(ex_just(ex_int(1)), lv_ret, &sn, EX_SIG(EX_T_INT)));
    expect_error(&r, EX_EUSER + 11);
    cr_assert_str_eq(r.error.msg, "inner failed");
    cr_assert_eq(r.error.data, &payload);
    cr_assert_eq(sn.calls, 1);
    ex_sender_release(sn.ret);
    expect_no_leaks();
}

Test(exec_let, let_value_result_is_the_returned_senders_stopped) {
    seen sn;
    seen_init(&sn);
    sn.ret = ex_just_stopped();
    rec rc;
    rec_init(&rc);
    run_inline(ex_let_value(ex_just(ex_int(1)), lv_ret, &sn, EX_SIG(EX_T_INT)), &rc);
    cr_assert_eq(rc.stops, 1);
    cr_assert_eq(sn.calls, 1);
    ex_sender_release(sn.ret);
    expect_no_leaks();
}

Test(exec_let, let_value_passes_error_through) {
    seen sn;
    seen_init(&sn);
    static int payload;
    rec rc;
    rec_init(&rc);
    run_inline(ex_let_value(ex_just_error(ex_err_data(EX_EUSER + 1, "boom", &payload)), lv_times10, &sn, EX_SIG(EX_T_INT)),
               &rc);
    cr_assert_eq(rc.errors, 1);
    cr_assert_eq(rc.err.code, EX_EUSER + 1);
    cr_assert_str_eq(rc.err.msg, "boom");
    cr_assert_eq(rc.err.data, &payload);
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}

Test(exec_let, let_value_passes_stopped_through) {
    seen sn;
    seen_init(&sn);
    rec rc;
    rec_init(&rc);
    run_inline(ex_let_value(ex_just_stopped(), lv_times10, &sn, EX_SIG(EX_T_INT)), &rc);
    cr_assert_eq(rc.stops, 1);
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}

Test(exec_let, let_value_is_multi_shot) {
    seen sn;
    seen_init(&sn);
    ex_sender *s = ex_let_value(ex_just(ex_int(6)), lv_times10, &sn, EX_SIG(EX_T_INT));
    for (int i = 0; i < 3; i++) {
        ex_result r = ex_sync_wait(ex_sender_retain(s));
        expect_value_int(&r, 60);
    }
    cr_assert_eq(sn.calls, 3);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_let, let_value_input_signature_mismatch_is_invalid) {
    seen sn;
    seen_init(&sn);
    ex_sender *s = ex_let_value(ex_just(ex_int(1), ex_int(2)), lv_times10, &sn, EX_SIG(EX_T_INT));
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    ex_result r = ex_sync_wait(s);
    expect_error(&r, EX_EINVAL);
    s = ex_let_value(ex_just(ex_str("s")), lv_times10, &sn, EX_SIG(EX_T_INT));
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    r = ex_sync_wait(s);
    expect_error(&r, EX_EINVAL);
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}

Test(exec_let, let_value_runtime_input_mismatch_is_einval) {
    /* The child's signatures are dynamic (another let_value), so the check
     * happens when the values arrive. */
    seen a, b;
    seen_init(&a);
    seen_init(&b);
    a.ret = ex_just(ex_str("not an int"));
    ex_sender *s = ex_let_value(ex_let_value(ex_just(), lv_ret, &a, EX_SIG0), lv_times10, &b, EX_SIG(EX_T_INT));
    cr_assert_eq(ex_sender_status(s).code, 0);
    ex_result r = ex_sync_wait(s);
    expect_error(&r, EX_EINVAL);
    cr_assert_eq(a.calls, 1);
    cr_assert_eq(b.calls, 0);
    ex_sender_release(a.ret);
    expect_no_leaks();
}

Test(exec_let, let_value_variadic_input_accepts_any_arity) {
    seen sn;
    seen_init(&sn);
    ex_result r = ex_sync_wait(ex_let_value(ex_just(), lv_count, &sn, EX_SIG_VARIADIC));
    expect_value_int(&r, 0);
    r = ex_sync_wait(ex_let_value(ex_just(ex_int(1), ex_bool(false), ex_str("z")), lv_count, &sn, EX_SIG_VARIADIC));
    expect_value_int(&r, 3);
    cr_assert_eq(sn.in[2].type, EX_T_STR);
    cr_assert_str_eq(sn.in[2].as.s, "z");
    cr_assert_eq(sn.calls, 2);
    expect_no_leaks();
}

Test(exec_let, result_signatures_are_dynamic) {
    seen sn;
    seen_init(&sn);
    ex_sender *s = ex_let_value(ex_just(ex_int(1)), lv_times10, &sn, EX_SIG(EX_T_INT));
    cr_assert_neq(ex_sender_sigs(s)->flags & EX_SIGS_DYNAMIC, 0);
    ex_sender_release(s);
    s = ex_let_error(ex_just_error(ex_err(EX_EUSER, "e")), le_code, &sn);
    cr_assert_neq(ex_sender_sigs(s)->flags & EX_SIGS_DYNAMIC, 0);
    ex_sender_release(s);
    s = ex_let_stopped(ex_just_stopped(), ls_seven, &sn);
    cr_assert_neq(ex_sender_sigs(s)->flags & EX_SIGS_DYNAMIC, 0);
    ex_sender_release(s);

    /* When fn can never be called, the child's signatures are the result's. */
    s = ex_let_error(ex_just(ex_double(2.0)), le_code, &sn);
    const ex_sigs *sg = ex_sender_sigs(s);
    cr_assert_eq(sg->flags & EX_SIGS_DYNAMIC, 0);
    cr_assert_eq(sg->flags & EX_SIGS_ERROR, 0);
    cr_assert_eq(sg->nvalues, 1);
    cr_assert_eq(sg->values[0].types[0], EX_T_DOUBLE);
    ex_sender_release(s);
    s = ex_let_stopped(ex_just(ex_int(1)), ls_seven, &sn);
    cr_assert_eq(ex_sender_sigs(s)->flags & (EX_SIGS_DYNAMIC | EX_SIGS_STOPPED), 0);
    ex_sender_release(s);
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}

/* --------------------------------------------------- lifetime of the datums */

typedef struct lifetime_ctx {
    ex_scheduler sch;           /* the other thread */
    ex_value tuple_elems[2];    /* storage the child's tuple points into */
    ex_tuple tuple;
    int let_calls, read_calls;
    pthread_t reader_thread;
    const ex_value *in_ptr;
} lifetime_ctx;

/* Child: int x -> (int x, tuple(int 100, int 200)) from a stack array. */
static ex_error make_values(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)n;
    lifetime_ctx *lc = ctx;
    lc->tuple_elems[0] = ex_int(100);
    lc->tuple_elems[1] = ex_int(200);
    lc->tuple.index = 0;
    lc->tuple.n = 2;
    lc->tuple.v = lc->tuple_elems;
    out[0] = in[0];
    out[1] = ex_tuple_value(&lc->tuple);
    return ex_ok();
}

/* Runs on the other thread, long after fn returned: reads through the
 * pointers fn handed out. */
static ex_error read_pointed(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)n;
    lifetime_ctx *lc = ctx;
    lc->read_calls++;
    lc->reader_thread = pthread_self();
    const ex_value *a = in[0].as.p, *b = in[1].as.p;
    if (a->type != EX_T_INT || b->type != EX_T_TUPLE || b->as.tuple->n != 2)
        return ex_err(EX_EUSER + 50, "stored datums were clobbered");
    out[0] = ex_int(a->as.i + b->as.tuple->v[0].as.i + b->as.tuple->v[1].as.i);
    return ex_ok();
}

static ex_sender *lv_async_reader(void *ctx, const ex_value *in, size_t n) {
    (void)n;
    lifetime_ctx *lc = ctx;
    lc->let_calls++;
    lc->in_ptr = in;
    /* The producer's tuple storage is gone from now on: let must have
     * copied the tuple contents. */
    lc->tuple_elems[0] = ex_str("clobbered");
    lc->tuple_elems[1] = ex_str("clobbered");
    lc->tuple.n = 0;
    return ex_then(ex_continues_on(ex_just(ex_ptr((void *)&in[0]), ex_ptr((void *)&in[1])), lc->sch), read_pointed, lc,
                   EX_SIG(EX_T_PTR, EX_T_PTR), EX_SIG(EX_T_INT));
}

Test(exec_let, datums_live_until_the_returned_sender_completes) {
    ex_single_thread_context stc;
    cr_assert_eq(ex_single_thread_context_init(&stc).code, 0);
    lifetime_ctx lc;
    memset(&lc, 0, sizeof lc);
    lc.sch = ex_single_thread_context_scheduler(&stc);
    ex_sender *child = ex_then(ex_just(ex_int(5)), make_values, &lc, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT, EX_T_TUPLE));
    ex_sender *s = ex_let_value(child, lv_async_reader, &lc, EX_SIG(EX_T_INT, EX_T_TUPLE));
    cr_assert_eq(ex_sender_status(s).code, 0);
    ex_result r = ex_sync_wait(s);
    expect_value_int(&r, 5 + 100 + 200);
    cr_assert_eq(lc.let_calls, 1);
    cr_assert_eq(lc.read_calls, 1);
    cr_assert(pthread_equal(lc.reader_thread, ex_single_thread_context_thread_id(&stc)), "the read ran on the other thread");
    cr_assert_eq(ex_single_thread_context_destroy(&stc).code, 0);
    expect_no_leaks();
}

/* ------------------------------------------------------ scheduler in the env */

Test(exec_let, inner_env_get_scheduler_is_the_childs_value_completion_scheduler) {
    ex_run_loop loop;
    cr_assert_eq(ex_run_loop_init(&loop).code, 0);
    ex_scheduler sch = ex_run_loop_scheduler(&loop);
    seen sn;
    seen_init(&sn);
    rec rc;
    rec_init(&rc);
    /* The receiver's own scheduler is a different one: the let-env wins. */
    rec_with_scheduler(&rc, ex_inline_scheduler());
    ex_sender *s = ex_let_value(ex_schedule(sch), lv_read_sched, &sn, EX_SIG0);
    ex_operation *op = run_start(s, &rc);
    cr_assert_eq(sn.calls, 0);
    ex_run_loop_finish(&loop);
    cr_assert_eq(ex_run_loop_run(&loop).code, 0);
    cr_assert_eq(sn.calls, 1);
    cr_assert_eq(rc.values, 1, "read_env failed: %s", rc.err.msg ? rc.err.msg : "");
    cr_assert_eq(rec_total(&rc), 1);
    cr_assert_eq(rc.v[0].type, EX_T_SCHED);
    cr_assert(ex_scheduler_equal(rc.v[0].as.sched, sch), "get_scheduler must be the run_loop's scheduler");
    run_destroy(op);
    ex_sender_release(s);
    cr_assert_eq(ex_run_loop_destroy(&loop).code, 0);
    expect_no_leaks();
}

Test(exec_let, inner_env_get_scheduler_with_a_receiver_without_scheduler) {
    ex_run_loop loop;
    cr_assert_eq(ex_run_loop_init(&loop).code, 0);
    ex_scheduler sch = ex_run_loop_scheduler(&loop);
    seen sn;
    seen_init(&sn);
    rec rc;
    rec_init(&rc); /* empty env: without let-env read_env would fail */
    ex_sender *s = ex_let_value(ex_schedule(sch), lv_read_sched, &sn, EX_SIG0);
    ex_operation *op = run_start(s, &rc);
    ex_run_loop_finish(&loop);
    cr_assert_eq(ex_run_loop_run(&loop).code, 0);
    cr_assert_eq(rc.values, 1, "read_env failed: %s", rc.err.msg ? rc.err.msg : "");
    cr_assert(ex_scheduler_equal(rc.v[0].as.sched, sch));
    run_destroy(op);
    ex_sender_release(s);
    cr_assert_eq(ex_run_loop_destroy(&loop).code, 0);
    expect_no_leaks();
}

Test(exec_let, inner_env_get_scheduler_in_sync_wait_is_the_childs_scheduler) {
    ex_single_thread_context stc;
    cr_assert_eq(ex_single_thread_context_init(&stc).code, 0);
    ex_scheduler sch = ex_single_thread_context_scheduler(&stc);
    seen sn;
    seen_init(&sn);
    ex_result r = ex_sync_wait(ex_let_value(ex_schedule(sch), lv_read_sched, &sn, EX_SIG0));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_eq(r.values[0].type, EX_T_SCHED);
    cr_assert(ex_scheduler_equal(r.values[0].as.sched, sch), "not sync_wait's run_loop but the child's scheduler");
    cr_assert_eq(sn.calls, 1);
    cr_assert_eq(ex_single_thread_context_destroy(&stc).code, 0);
    expect_no_leaks();
}

Test(exec_let, let_stopped_inner_env_get_scheduler_is_the_stopped_completion_scheduler) {
    ex_run_loop loop;
    cr_assert_eq(ex_run_loop_init(&loop).code, 0);
    ex_scheduler sch = ex_run_loop_scheduler(&loop);
    seen sn;
    seen_init(&sn);
    rec rc;
    rec_init(&rc);
    rec_with_stop(&rc);
    ex_sender *s = ex_let_stopped(ex_schedule(sch), ls_read_sched, &sn);
    ex_operation *op = run_start(s, &rc);
    ex_stop_source_request_stop(&rc.stop); /* the schedule completes stopped */
    ex_run_loop_finish(&loop);
    cr_assert_eq(ex_run_loop_run(&loop).code, 0);
    cr_assert_eq(sn.calls, 1);
    cr_assert_eq(rc.values, 1, "read_env failed: %s", rc.err.msg ? rc.err.msg : "");
    cr_assert_eq(rec_total(&rc), 1);
    cr_assert(ex_scheduler_equal(rc.v[0].as.sched, sch));
    run_destroy(op);
    ex_sender_release(s);
    cr_assert_eq(ex_run_loop_destroy(&loop).code, 0);
    expect_no_leaks();
}

Test(exec_let, inner_env_forwards_the_receivers_env_without_completion_scheduler) {
    seen sn;
    seen_init(&sn);
    rec rc;
    rec_init(&rc);
    rec_with_stop(&rc);
    rec_with_scheduler(&rc, ex_inline_scheduler());
    /* just has no completion scheduler: FWD-ENV(env) answers. */
    run_inline(ex_let_value(ex_just(), lv_read_sched, &sn, EX_SIG0), &rc);
    cr_assert_eq(rc.values, 1, "read_env failed: %s", rc.err.msg ? rc.err.msg : "");
    cr_assert(ex_scheduler_equal(rc.v[0].as.sched, ex_inline_scheduler()));
    rec_init(&rc);
    rec_with_stop(&rc);
    rec_with_scheduler(&rc, ex_inline_scheduler());
    run_inline(ex_let_error(ex_just_error(ex_err(EX_EUSER, "e")), le_read_sched, &sn), &rc);
    cr_assert_eq(rc.values, 1, "read_env failed: %s", rc.err.msg ? rc.err.msg : "");
    cr_assert(ex_scheduler_equal(rc.v[0].as.sched, ex_inline_scheduler()));
    rec_init(&rc);
    rec_with_stop(&rc);
    run_inline(ex_let_value(ex_just(), lv_read_token, &sn, EX_SIG0), &rc);
    cr_assert_eq(rc.values, 1);
    cr_assert_eq(rc.v[0].type, EX_T_TOKEN);
    cr_assert(ex_stop_token_equal(rc.v[0].as.token, ex_stop_source_token(&rc.stop)), "the stop token is forwarded");
    cr_assert_eq(sn.calls, 3);
    expect_no_leaks();
}

/* ------------------------------------------------------------ bad input */

Test(exec_let, fn_returning_null_is_einval) {
    seen sn;
    seen_init(&sn);
    ex_result r = ex_sync_wait(ex_let_value(ex_just(ex_int(1)), lv_null, &sn, EX_SIG(EX_T_INT)));
    expect_error(&r, EX_EINVAL);
    r = ex_sync_wait(ex_let_error(ex_just_error(ex_err(EX_EUSER, "e")), le_null, &sn));
    expect_error(&r, EX_EINVAL);
    r = ex_sync_wait(ex_let_stopped(ex_just_stopped(), ls_null, &sn));
    expect_error(&r, EX_EINVAL);
    cr_assert_eq(sn.calls, 3);
    expect_no_leaks();
}

Test(exec_let, null_child_or_function_is_invalid) {
    seen sn;
    seen_init(&sn);
    ex_sender *s = ex_let_value(NULL, lv_times10, &sn, EX_SIG(EX_T_INT));
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    ex_result r = ex_sync_wait(s);
    expect_error(&r, EX_EINVAL);
    s = ex_let_value(ex_just(ex_int(1)), NULL, &sn, EX_SIG(EX_T_INT));
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    r = ex_sync_wait(s);
    expect_error(&r, EX_EINVAL);
    s = ex_let_error(NULL, le_code, &sn);
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    ex_sender_release(s);
    s = ex_let_error(ex_just_error(ex_err(EX_EUSER, "e")), NULL, &sn);
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    ex_sender_release(s);
    s = ex_let_stopped(NULL, ls_seven, &sn);
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    ex_sender_release(s);
    s = ex_let_stopped(ex_just_stopped(), NULL, &sn);
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    r = ex_sync_wait(s);
    expect_error(&r, EX_EINVAL);
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}

Test(exec_let, returned_sender_that_fails_to_connect_completes_with_its_error) {
    /* ex_on needs get_scheduler in the environment to connect; the receiver
     * has none and just has no completion scheduler. */
    seen sn;
    seen_init(&sn);
    sn.ret = ex_on(ex_inline_scheduler(), ex_just(ex_int(1)));
    rec rc;
    rec_init(&rc);
    run_inline(ex_let_value(ex_just(), lv_ret, &sn, EX_SIG0), &rc);
    cr_assert_eq(rc.errors, 1);
    cr_assert_eq(rc.err.code, EX_EINVAL);
    cr_assert_eq(sn.calls, 1);
    ex_sender_release(sn.ret);
    expect_no_leaks();
}

/* ---------------------------------------------------------- allocation */

Test(exec_let, out_of_memory_while_building) {
    seen sn;
    seen_init(&sn);
    for (int kind = 0; kind < 3; kind++) {
        ex_sender *child = ex_just(ex_int(1));
        test_alloc_reset();
        test_alloc_fail_at(1);
        ex_sender *s = kind == 0   ? ex_let_value(child, lv_times10, &sn, EX_SIG(EX_T_INT))
                       : kind == 1 ? ex_let_error(child, le_code, &sn)
                                   : ex_let_stopped(child, ls_seven, &sn);
        cr_assert_eq(test_stats.failed, 1);
        test_alloc_reset();
        cr_assert_eq(ex_sender_status(s).code, EX_ENOMEM, "kind %d", kind);
        ex_result r = ex_sync_wait(s);
        expect_error(&r, EX_ENOMEM);
    }
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}

/* Starts s into local storage with the next allocation failing; expects an
 * EX_ENOMEM error completion. */
static void start_with_failing_allocation(ex_sender *s) {
    rec rc;
    rec_init(&rc);
    _Alignas(max_align_t) unsigned char buf[2048];
    cr_assert_leq(ex_sender_op_size(s), sizeof buf);
    ex_operation *op;
    cr_assert_eq(ex_connect(s, rec_receiver(&rc), buf, sizeof buf, &op).code, 0);
    test_alloc_reset();
    test_alloc_fail_at(1);
    ex_start(op);
    cr_assert_eq(test_stats.failed, 1, "the injected failure was not hit");
    test_alloc_reset();
    cr_assert_eq(rc.errors, 1);
    cr_assert_eq(rec_total(&rc), 1);
    cr_assert_eq(rc.err.code, EX_ENOMEM);
    cr_assert_not_null(rc.err.msg);
    ex_operation_destroy(op);
    ex_sender_release(s);
}

Test(exec_let, out_of_memory_for_the_inner_operation) {
    seen sn;
    seen_init(&sn);
    sn.ret = ex_just(ex_int(9)); /* prebuilt: the only allocation while running is the inner operation */
    start_with_failing_allocation(ex_let_value(ex_just(ex_int(1)), lv_ret, &sn, EX_SIG(EX_T_INT)));
    start_with_failing_allocation(ex_let_error(ex_just_error(ex_err(EX_EUSER, "e")), le_ret, &sn));
    start_with_failing_allocation(ex_let_stopped(ex_just_stopped(), ls_ret, &sn));
    cr_assert_eq(sn.calls, 3);
    /* The same senders run fine without the failure. */
    ex_result r = ex_sync_wait(ex_let_value(ex_just(ex_int(1)), lv_ret, &sn, EX_SIG(EX_T_INT)));
    expect_value_int(&r, 9);
    ex_sender_release(sn.ret);
    expect_no_leaks();
}

Test(exec_let, out_of_memory_storing_tuple_datums) {
    seen sn;
    seen_init(&sn);
    ex_value elems[2] = { ex_int(1), ex_int(2) };
    ex_tuple t = { 0, 2, elems };
    start_with_failing_allocation(ex_let_value(ex_just(ex_tuple_value(&t)), lv_count, &sn, EX_SIG(EX_T_TUPLE)));
    cr_assert_eq(sn.calls, 0, "fn must not run without its datums");
    expect_no_leaks();
}

/* A second counting allocator, handed to the operation through the env. */
static long env_allocs, env_frees;

static void *env_allocate(void *ctx, size_t size, size_t align) {
    (void)ctx;
    void *p = NULL;
    if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size ? size : 1)) return NULL;
    __atomic_add_fetch(&env_allocs, 1, __ATOMIC_SEQ_CST);
    return p;
}

static void env_deallocate(void *ctx, void *p, size_t size, size_t align) {
    (void)ctx, (void)size, (void)align;
    free(p);
    __atomic_add_fetch(&env_frees, 1, __ATOMIC_SEQ_CST);
}

static ex_allocator env_allocator = { env_allocate, env_deallocate, NULL, "test.env", NULL };

Test(exec_let, inner_operation_comes_from_the_environments_allocator) {
    seen sn;
    seen_init(&sn);
    sn.ret = ex_just(ex_int(9));
    ex_value elems[1] = { ex_int(3) };
    ex_tuple t = { 0, 1, elems };
    ex_sender *s = ex_write_env(ex_let_value(ex_just(ex_tuple_value(&t)), lv_ret, &sn, EX_SIG(EX_T_TUPLE)),
                                &ex_key_get_allocator, ex_alloc_value(&env_allocator));
    env_allocs = env_frees = 0;
    ex_result r = ex_sync_wait(s);
    expect_value_int(&r, 9);
    cr_assert_eq(sn.calls, 1);
    cr_assert_eq(sn.n, 1);
    cr_assert_eq(sn.in[0].type, EX_T_TUPLE); /* its storage is gone now: do not read through it */
    cr_assert_geq(env_allocs, 2, "the stored tuple and the inner operation use the env's allocator");
    cr_assert_eq(env_allocs, env_frees);
    ex_sender_release(sn.ret);
    expect_no_leaks();
}

/* ------------------------------------------------------------- nesting */

static ex_sender *lv_inc(void *ctx, const ex_value *in, size_t n) {
    (void)n;
    ((seen *)ctx)->calls++;
    return ex_just(ex_int(in[0].as.i + 1));
}

Test(exec_let, chain_of_1000_let_values) {
    seen sn;
    seen_init(&sn);
    ex_sender *s = ex_just(ex_int(0));
    for (int i = 0; i < 1000; i++) s = ex_let_value(s, lv_inc, &sn, EX_SIG(EX_T_INT));
    cr_assert_eq(ex_sender_status(s).code, 0);
    ex_result r = ex_sync_wait(s);
    expect_value_int(&r, 1000);
    cr_assert_eq(sn.calls, 1000);
    expect_no_leaks();
}

typedef struct nest_ctx {
    int depth, max, calls;
} nest_ctx;

/* Each level returns another let_value until max levels deep. */
static ex_sender *lv_nest(void *ctx, const ex_value *in, size_t n) {
    (void)n;
    nest_ctx *nc = ctx;
    nc->calls++;
    if (in[0].as.i + 1 >= nc->max) return ex_just(ex_int(in[0].as.i + 1));
    return ex_let_value(ex_just(ex_int(in[0].as.i + 1)), lv_nest, nc, EX_SIG(EX_T_INT));
}

Test(exec_let, returned_senders_nested_1000_deep) {
    nest_ctx nc = { 0, 1000, 0 };
    ex_result r = ex_sync_wait(ex_let_value(ex_just(ex_int(0)), lv_nest, &nc, EX_SIG(EX_T_INT)));
    expect_value_int(&r, 1000);
    cr_assert_eq(nc.calls, 1000);
    expect_no_leaks();
}

/* A recursion 100000 levels deep whose function builds the next level:
 * each level's operation is connected to the inner receiver of the level
 * above.  Environment lookups that walked the receivers or the environment
 * nodes of every level above took about 80 s here (quadratic); the suite's
 * timeout fails that. */
#define DEEP_LETS 100000

typedef struct deep_let {
    int64_t level;
    bool scheduled;      /* each level waits for a schedule on sync_wait's run loop */
    bool writes_key;     /* each level also writes a key of its own (write_env) */
    ex_scheduler sch;
    ex_result result;
} deep_let;

static const ex_key deep_let_key = { "test.let.deep", true };

static ex_sender *deep_let_step(void *ctx, const ex_value *in, size_t n);

static ex_sender *deep_let_level(deep_let *d) {
    if (d->level == DEEP_LETS) return ex_just(ex_int(d->level));
    ex_sender *first = d->scheduled ? ex_schedule(d->sch) : ex_just();
    ex_sender *level = ex_let_value(first, deep_let_step, d, EX_SIG0);
    return d->writes_key ? ex_write_env(level, &deep_let_key, ex_int(d->level)) : level;
}

static ex_sender *deep_let_step(void *ctx, const ex_value *in, size_t n) {
    (void)in, (void)n;
    deep_let *d = ctx;
    d->level++;
    return deep_let_level(d);
}

static ex_sender *deep_let_start(void *ctx, const ex_value *in, size_t n) {
    (void)n;
    deep_let *d = ctx;
    d->sch = in[0].as.sched;
    return deep_let_level(d);
}

static void deep_let_run(deep_let *d) {
    d->result = ex_sync_wait(
        ex_let_value(ex_read_env(&ex_key_get_scheduler, EX_T_SCHED), deep_let_start, d, EX_SIG(EX_T_SCHED)));
}

Test(exec_let, recursion_100000_deep_through_a_run_loop) {
    /* The levels complete one into the next: the stack stays flat (also at
     * -O1 under ASan, where the completions used to nest one call per level). */
    deep_let d = { .scheduled = true };
    deep_let_run(&d);
    expect_value_int(&d.result, DEEP_LETS);
    cr_assert_eq(d.level, DEEP_LETS);
    expect_no_leaks();
}

static void *deep_let_thread(void *arg) {
    deep_let_run(arg);
    return NULL;
}

/* Runs the recursion on a thread with a big stack, for recursions whose
 * stack grows with the depth in some builds (about 1 KiB a level under
 * ASan). */
static void deep_let_run_on_a_big_stack(deep_let *d) {
    pthread_attr_t attr;
    cr_assert_eq(pthread_attr_init(&attr), 0);
    cr_assert_eq(pthread_attr_setstacksize(&attr, (size_t)512 << 20), 0);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, &attr, deep_let_thread, d), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    pthread_attr_destroy(&attr);
}

Test(exec_let, recursion_100000_deep_writing_a_key_at_every_level) {
    /* The levels add nodes with different keys in turn (the key, and the
     * let's scheduler): the stop token the run loop asks for, which no
     * level answers, is still found missing in one step.  The completions
     * pass through write_env at every level: without tail calls (ASan)
     * they nest a call per level. */
    deep_let d = { .scheduled = true, .writes_key = true };
    deep_let_run_on_a_big_stack(&d);
    expect_value_int(&d.result, DEEP_LETS);
    expect_no_leaks();
}

Test(exec_let, recursion_100000_deep_completing_inline) {
    /* Every level starts the next inside its own start: the stack grows
     * with the depth like a recursive function's (about 1 KiB a level
     * under ASan). */
    deep_let d = { .scheduled = false };
    deep_let_run_on_a_big_stack(&d);
    expect_value_int(&d.result, DEEP_LETS);
    cr_assert_eq(d.level, DEEP_LETS);
    expect_no_leaks();
}

/* ------------------------------------------------------------- let_error */

Test(exec_let, let_error_gets_the_childs_error) {
    seen sn;
    seen_init(&sn);
    static int payload;
    ex_sender *s = ex_let_error(ex_just_error(ex_err_data(EX_EUSER + 3, "the datum", &payload)), le_code, &sn);
    rec rc;
    rec_init(&rc);
    run_inline(s, &rc);
    cr_assert_eq(rc.values, 1);
    cr_assert_eq(rc.n, 2);
    cr_assert_eq(rc.v[0].as.i, EX_EUSER + 3);
    cr_assert_str_eq(rc.v[1].as.s, "the datum");
    cr_assert_eq(sn.calls, 1);
    cr_assert_eq(sn.err.code, EX_EUSER + 3);
    cr_assert_str_eq(sn.err.msg, "the datum");
    cr_assert_eq(sn.err.data, &payload);
    expect_no_leaks();
}

static ex_error then_fail(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)in, (void)n, (void)out;
    return ex_err(EX_EUSER + 20, "then failed");
}

Test(exec_let, let_error_handles_an_error_from_an_adaptor) {
    seen sn;
    seen_init(&sn);
    ex_sender *s = ex_let_error(ex_then(ex_just(ex_int(1)), then_fail, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)),
                                le_code, &sn);
    ex_result r = ex_sync_wait_with_variant(s);
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_eq(r.values[0].type, EX_T_TUPLE);
    const ex_tuple *t = r.values[0].as.tuple;
    cr_assert_eq(t->n, 2);
    cr_assert_eq(t->v[0].as.i, EX_EUSER + 20);
    cr_assert_str_eq(t->v[1].as.s, "then failed");
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(exec_let, let_error_result_is_the_returned_senders_completion) {
    seen sn;
    seen_init(&sn);
    sn.ret = ex_just_error(ex_err(EX_EUSER + 30, "replacement"));
    ex_result r = ex_sync_wait(ex_let_error(ex_just_error(ex_err(EX_EUSER, "original")), le_ret, &sn));
    expect_error(&r, EX_EUSER + 30);
    cr_assert_str_eq(r.error.msg, "replacement");
    ex_sender_release(sn.ret);
    sn.ret = ex_just_stopped();
    r = ex_sync_wait(ex_let_error(ex_just_error(ex_err(EX_EUSER, "original")), le_ret, &sn));
    cr_assert_eq(r.disposition, EX_DISP_STOPPED);
    ex_sender_release(sn.ret);
    cr_assert_eq(sn.calls, 2);
    cr_assert_eq(sn.err.code, EX_EUSER);
    expect_no_leaks();
}

Test(exec_let, let_error_passes_values_and_stopped_through) {
    seen sn;
    seen_init(&sn);
    rec rc;
    rec_init(&rc);
    run_inline(ex_let_error(ex_just(ex_int(8), ex_str("v")), le_code, &sn), &rc);
    cr_assert_eq(rc.values, 1);
    cr_assert_eq(rc.n, 2);
    cr_assert_eq(rc.v[0].as.i, 8);
    cr_assert_str_eq(rc.v[1].as.s, "v");
    rec_init(&rc);
    run_inline(ex_let_error(ex_just_stopped(), le_code, &sn), &rc);
    cr_assert_eq(rc.stops, 1);
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}

/* ------------------------------------------------------------ let_stopped */

Test(exec_let, let_stopped_runs_the_returned_sender) {
    seen sn;
    seen_init(&sn);
    rec rc;
    rec_init(&rc);
    ex_sender *s = ex_let_stopped(ex_just_stopped(), ls_seven, &sn);
    _Alignas(max_align_t) unsigned char buf[2048];
    ex_operation *op;
    cr_assert_eq(ex_connect(s, rec_receiver(&rc), buf, sizeof buf, &op).code, 0);
    cr_assert_eq(sn.calls, 0, "not called before start");
    ex_start(op);
    cr_assert_eq(sn.calls, 1);
    cr_assert_eq(rc.values, 1);
    cr_assert_eq(rec_total(&rc), 1);
    cr_assert_eq(rc.v[0].as.i, 7);
    ex_operation_destroy(op);
    ex_sender_release(s);
    sn.ret = ex_just_error(ex_err(EX_EUSER + 40, "after stop"));
    ex_result r = ex_sync_wait(ex_let_stopped(ex_just_stopped(), ls_ret, &sn));
    expect_error(&r, EX_EUSER + 40);
    ex_sender_release(sn.ret);
    sn.ret = ex_just_stopped();
    r = ex_sync_wait(ex_let_stopped(ex_just_stopped(), ls_ret, &sn));
    cr_assert_eq(r.disposition, EX_DISP_STOPPED);
    ex_sender_release(sn.ret);
    cr_assert_eq(sn.calls, 3);
    expect_no_leaks();
}

Test(exec_let, let_stopped_passes_values_and_errors_through) {
    seen sn;
    seen_init(&sn);
    rec rc;
    rec_init(&rc);
    run_inline(ex_let_stopped(ex_just(ex_int(3)), ls_seven, &sn), &rc);
    cr_assert_eq(rc.values, 1);
    cr_assert_eq(rc.v[0].as.i, 3);
    static int payload;
    rec_init(&rc);
    run_inline(ex_let_stopped(ex_just_error(ex_err_data(EX_EUSER + 2, "err", &payload)), ls_seven, &sn), &rc);
    cr_assert_eq(rc.errors, 1);
    cr_assert_eq(rc.err.code, EX_EUSER + 2);
    cr_assert_str_eq(rc.err.msg, "err");
    cr_assert_eq(rc.err.data, &payload);
    cr_assert_eq(sn.calls, 0);
    expect_no_leaks();
}

/* -------------------------------------------------- across threads */

typedef struct thread_ctx {
    ex_scheduler sch;
    pthread_t where;
    int calls;
} thread_ctx;

static ex_error note_thread(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)n;
    thread_ctx *tc = ctx;
    tc->calls++;
    tc->where = pthread_self();
    out[0] = ex_int(in[0].as.i + 1);
    return ex_ok();
}

static ex_sender *lv_elsewhere(void *ctx, const ex_value *in, size_t n) {
    (void)n;
    thread_ctx *tc = ctx;
    return ex_then(ex_continues_on(ex_just(in[0]), tc->sch), note_thread, tc, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
}

static ex_sender *le_elsewhere(void *ctx, ex_error err) {
    thread_ctx *tc = ctx;
    tc->calls++;
    return ex_continues_on(ex_just_error(ex_err(err.code + 1, "from the other thread")), tc->sch);
}

Test(exec_let, inside_sync_wait_inner_sender_completes_on_another_thread) {
    ex_single_thread_context stc;
    cr_assert_eq(ex_single_thread_context_init(&stc).code, 0);
    thread_ctx tc;
    memset(&tc, 0, sizeof tc);
    tc.sch = ex_single_thread_context_scheduler(&stc);
    ex_result r = ex_sync_wait(ex_let_value(ex_just(ex_int(41)), lv_elsewhere, &tc, EX_SIG(EX_T_INT)));
    expect_value_int(&r, 42);
    cr_assert_eq(tc.calls, 1);
    cr_assert(pthread_equal(tc.where, ex_single_thread_context_thread_id(&stc)));
    cr_assert_not(pthread_equal(tc.where, pthread_self()));

    r = ex_sync_wait(ex_let_error(ex_just_error(ex_err(EX_EUSER, "e")), le_elsewhere, &tc));
    expect_error(&r, EX_EUSER + 1);
    cr_assert_str_eq(r.error.msg, "from the other thread");
    cr_assert_eq(tc.calls, 2);
    cr_assert_eq(ex_single_thread_context_destroy(&stc).code, 0);
    expect_no_leaks();
}
