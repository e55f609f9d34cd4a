/* [exec.bulk]: ex_bulk, ex_bulk_grain, ex_bulk_chunked - the sequential
 * default of the wording, the pool's parallel customisation (dynamic
 * chunks, first error / stop request skip what has not started, helper
 * items beyond EX_BULK_INLINE_HELPERS from the environment's allocator),
 * the environment-scheduler path and a user resource's own bulk hook.
 *
 * Nothing here asserts on timing: sleeps and spins only give threads a
 * chance to reach a point or make a body long, and every wait for
 * asynchronous work is bounded so a lost completion fails with a message. */
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/helpers.h"

TEST_SUITE(exec_bulk, 20);

/* ================================================================ fixtures */

#define WAIT_LIMIT_S 10.0

static void spin_us(long us) {
    double end = test_now_s() + (double)us / 1e6;
    while (test_now_s() < end) {}
}

static ex_pool *pool_new(unsigned threads) {
    ex_pool_config c;
    memset(&c, 0, sizeof c);
    c.threads = threads;
    c.name_prefix = "bulk";
    ex_pool *p = NULL;
    ex_error e = ex_pool_create(&c, &p);
    cr_assert_eq(e.code, 0, "ex_pool_create: %s", e.msg ? e.msg : "");
    cr_assert_not_null(p);
    return p;
}

static void pool_free(ex_pool *p) {
    ex_error e = ex_pool_destroy(p);
    cr_assert_eq(e.code, 0, "ex_pool_destroy: %s", e.msg ? e.msg : "");
}

static int popcount_u(unsigned m) { return __builtin_popcount(m); }

/* --------------------------------------------- a thread-safe receiver */

/* The environment answers get_scheduler with sch (keeps a stop token). */
static void arec_with_sched(arec *r, ex_scheduler sch) {
    if (r->has_env) {
        r->pair.key2 = &ex_key_get_scheduler;
        r->pair.value2 = ex_sched_value(sch);
    } else {
        ex_env_pair_init(&r->pair, &ex_key_get_scheduler, ex_sched_value(sch), ex_env_empty());
        r->has_env = true;
    }
}

static ex_operation *arec_start(arec *r, const ex_sender *s) {
    ex_operation *op = NULL;
    ex_error e = ex_connect_alloc(s, arec_receiver(r), &op);
    cr_assert_eq(e.code, 0, "ex_connect_alloc: %s", e.msg ? e.msg : "");
    ex_start(op);
    return op;
}

static void arec_wait(arec *r) {
    double end = test_now_s() + WAIT_LIMIT_S;
    while (atomic_load(&r->total) < 1 && test_now_s() < end) sched_yield();
    cr_assert_eq(atomic_load(&r->total), 1, "the operation did not complete exactly once (%d completions)",
                 atomic_load(&r->total));
}

/* ------------------------------------------- sequential recording body */

#define SEQ_MAX 64

typedef struct seq_ctx {
    size_t calls;
    size_t order[SEQ_MAX];
    const void *thread[SEQ_MAX];
    size_t n[SEQ_MAX];
    ex_value v0[SEQ_MAX];
    ex_value v1[SEQ_MAX];
    size_t fail_at;          /* SIZE_MAX: never */
    ex_error fail_err;
} seq_ctx;

static void seq_init(seq_ctx *c) {
    memset(c, 0, sizeof *c);
    c->fail_at = SIZE_MAX;
}

static ex_error seq_fn(void *ctx, size_t i, const ex_value *v, size_t n) {
    seq_ctx *c = ctx;
    if (c->calls < SEQ_MAX) {
        c->order[c->calls] = i;
        c->thread[c->calls] = test_thread_id();
        c->n[c->calls] = n;
        if (n >= 1) c->v0[c->calls] = v[0];
        if (n >= 2) c->v1[c->calls] = v[1];
    }
    c->calls++;
    if (i == c->fail_at) return c->fail_err;
    return ex_ok();
}

/* Connects into stack storage and starts on this thread. */
typedef struct inline_run {
    _Alignas(max_align_t) unsigned char buf[1024];
    ex_operation *op;
} inline_run;

static void run_inline(inline_run *ir, ex_sender *s, rec *r) {
    cr_assert_leq(ex_sender_op_size(s), sizeof ir->buf);
    ex_error e = ex_connect(s, rec_receiver(r), ir->buf, sizeof ir->buf, &ir->op);
    cr_assert_eq(e.code, 0, "ex_connect: %s", e.msg ? e.msg : "");
    cr_assert_eq(rec_total(r), 0, "connect must not start work");
    ex_start(ir->op);
}

/* ------------------------------------------------- parallel body */

typedef struct par_ctx {
    ex_pool *pool;
    size_t shape;
    atomic_int *hits;              /* per index */
    atomic_long calls;
    atomic_int out_of_range;
    atomic_int bad_values;
    atomic_int off_pool;           /* calls not on a worker of pool */
    atomic_uint workers;           /* bit per worker index that ran an index */
    atomic_long per_worker[32];
    size_t expect_n;
    ex_value expect[EX_MAX_ARITY];
    size_t fail_at;                /* SIZE_MAX: never */
    ex_error fail_err;
    size_t stop_at;                /* SIZE_MAX: never */
    ex_stop_source *stop;
    int body;                      /* BODY_* */
    size_t block_index;            /* BODY_BLOCK_FIRST: the index that waits ... */
    long block_until;              /* ... until this many indices ran */
    atomic_int block_timed_out;
} par_ctx;

enum { BODY_NONE, BODY_GROWING, BODY_BLOCK_FIRST, BODY_WAIT_OTHER_WORKER };

static void par_init(par_ctx *c, ex_pool *p, size_t shape) {
    memset(c, 0, sizeof *c);
    c->pool = p;
    c->shape = shape;
    c->hits = calloc(shape ? shape : 1, sizeof *c->hits);
    cr_assert_not_null(c->hits);
    for (size_t i = 0; i < shape; i++) atomic_init(&c->hits[i], 0);
    c->fail_at = SIZE_MAX;
    c->stop_at = SIZE_MAX;
}

static void par_fini(par_ctx *c) {
    free(c->hits);
    c->hits = NULL;
}

static void par_expect_values(par_ctx *c, const ex_value *v, size_t n) {
    c->expect_n = n;
    for (size_t i = 0; i < n; i++) c->expect[i] = v[i];
}

/* Every index in [0, shape) ran exactly once, nothing else ran. */
static void par_expect_each_once(par_ctx *c) {
    cr_assert_eq(atomic_load(&c->out_of_range), 0, "an index >= shape was run");
    for (size_t i = 0; i < c->shape; i++)
        cr_assert_eq(atomic_load(&c->hits[i]), 1, "index %zu of %zu ran %d times", i, c->shape,
                     atomic_load(&c->hits[i]));
    cr_assert_eq(atomic_load(&c->calls), (long)c->shape);
}

/* Has an index run on an agent other than worker `self` (-1: a thread
 * outside the pool)? */
static bool other_agent_ran(par_ctx *c, int self) {
    unsigned mine = self >= 0 ? 1u << (self & 31) : 0;
    if (atomic_load(&c->workers) & ~mine) return true;
    return self >= 0 && atomic_load(&c->off_pool) > 0;
}

/* Waits (bounded) until some index ran on another agent. */
static bool wait_other_worker(par_ctx *c, int self) {
    double end = test_now_s() + WAIT_LIMIT_S / 2;
    while (!other_agent_ran(c, self) && test_now_s() < end) sched_yield();
    return other_agent_ran(c, self);
}

static void par_note(par_ctx *c, size_t i, const ex_value *v, size_t n) {
    int w = ex_pool_current_worker(c->pool);
    if (w >= 0) {
        atomic_fetch_or(&c->workers, 1u << (w & 31));
        atomic_fetch_add(&c->per_worker[w & 31], 1);
    } else {
        atomic_fetch_add(&c->off_pool, 1);
    }
    if (i < c->shape) atomic_fetch_add(&c->hits[i], 1);
    else atomic_fetch_add(&c->out_of_range, 1);
    bool ok = n == c->expect_n;
    for (size_t k = 0; ok && k < n; k++) ok = ex_value_equal(&v[k], &c->expect[k]);
    if (!ok) atomic_fetch_add(&c->bad_values, 1);
    atomic_fetch_add(&c->calls, 1);
}

static ex_error par_body(par_ctx *c, size_t i) {
    switch (c->body) {
    case BODY_GROWING:
        spin_us(2 + (long)(i / 100));  /* cost grows with the index */
        break;
    case BODY_BLOCK_FIRST:
        /* One very slow index: it holds its agent until every other index
         * ran, which only happens if the other agents keep taking chunks. */
        if (i == c->block_index) {
            double end = test_now_s() + WAIT_LIMIT_S / 2;
            while (atomic_load(&c->calls) < c->block_until && test_now_s() < end) sched_yield();
            if (atomic_load(&c->calls) < c->block_until) atomic_store(&c->block_timed_out, 1);
        }
        break;
    case BODY_WAIT_OTHER_WORKER:
        if (i == 0 && !wait_other_worker(c, ex_pool_current_worker(c->pool))) atomic_store(&c->block_timed_out, 1);
        break;
    default:
        break;
    }
    if (i == c->stop_at && c->stop) ex_stop_source_request_stop(c->stop);
    if (i == c->fail_at) return c->fail_err;
    return ex_ok();
}

static ex_error par_fn(void *ctx, size_t i, const ex_value *v, size_t n) {
    par_ctx *c = ctx;
    par_note(c, i, v, n);
    return par_body(c, i);
}

/* ------------------------------------------------ chunked body */

typedef struct chunk_ctx {
    size_t shape, grain;
    atomic_int *hits;
    atomic_long chunks;
    atomic_int bad_chunk;      /* begin >= end, end > shape, or longer than grain */
    atomic_int off_thread;     /* calls not on `expect_thread` (if set) */
    const void *expect_thread;
    atomic_size_t first_begin, first_end;
} chunk_ctx;

static void chunk_init(chunk_ctx *c, size_t shape, size_t grain) {
    memset(c, 0, sizeof *c);
    c->shape = shape;
    c->grain = grain;
    c->hits = calloc(shape ? shape : 1, sizeof *c->hits);
    cr_assert_not_null(c->hits);
    for (size_t i = 0; i < shape; i++) atomic_init(&c->hits[i], 0);
}

static ex_error chunk_fn(void *ctx, size_t begin, size_t end, const ex_value *v, size_t n) {
    chunk_ctx *c = ctx;
    (void)v, (void)n;
    if (atomic_fetch_add(&c->chunks, 1) == 0) {
        atomic_store(&c->first_begin, begin);
        atomic_store(&c->first_end, end);
    }
    if (begin >= end || end > c->shape || (c->grain && end - begin > c->grain)) atomic_fetch_add(&c->bad_chunk, 1);
    if (c->expect_thread && test_thread_id() != c->expect_thread) atomic_fetch_add(&c->off_thread, 1);
    for (size_t i = begin; i < end && i < c->shape; i++) atomic_fetch_add(&c->hits[i], 1);
    return ex_ok();
}

static void chunk_expect_cover(chunk_ctx *c) {
    cr_assert_eq(atomic_load(&c->bad_chunk), 0, "a chunk was empty, past shape or longer than the grain");
    for (size_t i = 0; i < c->shape; i++)
        cr_assert_eq(atomic_load(&c->hits[i]), 1, "index %zu covered %d times", i, atomic_load(&c->hits[i]));
}

/* ------------------------------------- what ran after the bulk (a then) */

typedef struct after {
    ex_pool *pool;
    int calls;
    int worker;
    size_t n;
    ex_value v[EX_MAX_ARITY];
    int64_t tuple_sum;        /* sum of the int elements of a tuple v[0] */
    uint32_t tuple_n;
} after;

static ex_error after_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    after *a = ctx;
    a->calls++;
    a->worker = ex_pool_current_worker(a->pool);
    a->n = n;
    for (size_t i = 0; i < n && i < EX_MAX_ARITY; i++) a->v[i] = in[i];
    if (n >= 1 && in[0].type == EX_T_TUPLE) {
        const ex_tuple *t = in[0].as.tuple;
        a->tuple_n = t->n;
        for (uint32_t k = 0; k < t->n; k++)
            if (t->v[k].type == EX_T_INT) a->tuple_sum += t->v[k].as.i;
    }
    out[0] = ex_int(a->worker);
    return ex_ok();
}

static void after_init(after *a, ex_pool *p) {
    memset(a, 0, sizeof *a);
    a->pool = p;
    a->worker = -2;
}

static ex_sender *then_after(ex_sender *s, after *a) {
    return ex_then(s, after_fn, a, EX_SIG_VARIADIC, EX_SIG(EX_T_INT));
}

static void expect_value_result(ex_result *r) {
    cr_assert_eq(r->disposition, EX_DISP_VALUE, "expected a value, got disposition %d (%d: %s)", r->disposition,
                 r->error.code, r->error.msg ? r->error.msg : "");
}

/* ======================================================= sequential default */

Test(exec_bulk, sequential_runs_every_index_in_order_with_the_childs_values) {
    seq_ctx c;
    seq_init(&c);
    rec rc;
    rec_init(&rc);
    inline_run ir;
    ex_sender *s = ex_bulk(ex_just(ex_int(7), ex_str("seven")), 10, seq_fn, &c);
    cr_assert_eq(ex_sender_status(s).code, 0);
    run_inline(&ir, s, &rc);
    cr_assert_eq(rec_total(&rc), 1, "a bulk of just completes inside start");
    cr_assert_eq(rc.values, 1);
    cr_assert_eq(rc.thread, test_thread_id());
    cr_assert_eq(c.calls, 10);
    for (size_t i = 0; i < 10; i++) {
        cr_assert_eq(c.order[i], i, "call %zu got index %zu", i, c.order[i]);
        cr_assert_eq(c.thread[i], test_thread_id(), "index %zu ran on another thread", i);
        cr_assert_eq(c.n[i], 2);
        cr_assert_eq(c.v0[i].type, EX_T_INT);
        cr_assert_eq(c.v0[i].as.i, 7);
        cr_assert_eq(c.v1[i].type, EX_T_STR);
        cr_assert_str_eq(c.v1[i].as.s, "seven");
    }
    cr_assert_eq(rc.n, 2, "the child's values are forwarded");
    cr_assert_eq(rc.v[0].as.i, 7);
    cr_assert_str_eq(rc.v[1].as.s, "seven");
    ex_operation_destroy(ir.op);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_bulk, sequential_without_values_passes_none) {
    seq_ctx c;
    seq_init(&c);
    ex_result r = ex_sync_wait(ex_bulk(ex_just(), 5, seq_fn, &c));
    expect_value_result(&r);
    cr_assert_eq(r.n, 0);
    cr_assert_eq(c.calls, 5);
    for (size_t i = 0; i < 5; i++) {
        cr_assert_eq(c.order[i], i);
        cr_assert_eq(c.n[i], 0);
    }
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(exec_bulk, sequential_on_the_inline_scheduler) {
    seq_ctx c;
    seq_init(&c);
    rec rc;
    rec_init(&rc);
    inline_run ir;
    ex_sender *s = ex_bulk(ex_schedule(ex_inline_scheduler()), 6, seq_fn, &c);
    run_inline(&ir, s, &rc);
    cr_assert_eq(rc.values, 1);
    cr_assert_eq(rc.n, 0);
    cr_assert_eq(c.calls, 6);
    for (size_t i = 0; i < 6; i++) {
        cr_assert_eq(c.order[i], i);
        cr_assert_eq(c.thread[i], test_thread_id());
    }
    ex_operation_destroy(ir.op);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_bulk, shape_zero_never_calls_f_and_forwards_the_values) {
    seq_ctx c;
    seq_init(&c);
    ex_result r = ex_sync_wait(ex_bulk(ex_just(ex_int(3), ex_double(2.5)), 0, seq_fn, &c));
    expect_value_result(&r);
    cr_assert_eq(c.calls, 0);
    cr_assert_eq(r.n, 2);
    cr_assert_eq(r.values[0].as.i, 3);
    cr_assert_float_eq(r.values[1].as.d, 2.5, 0);
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(exec_bulk, sequential_error_stops_later_indices) {
    static int payload;
    seq_ctx c;
    seq_init(&c);
    c.fail_at = 3;
    c.fail_err = ex_err_data(EX_EUSER + 5, "index three failed", &payload);
    rec rc;
    rec_init(&rc);
    inline_run ir;
    ex_sender *s = ex_bulk(ex_just(ex_int(1)), 10, seq_fn, &c);
    run_inline(&ir, s, &rc);
    cr_assert_eq(rc.errors, 1);
    cr_assert_eq(rc.values + rc.stops, 0);
    cr_assert_eq(rc.err.code, EX_EUSER + 5);
    cr_assert_str_eq(rc.err.msg, "index three failed");
    cr_assert_eq(rc.err.data, &payload);
    cr_assert_eq(c.calls, 4, "indices after the failing one must not run (ran %zu)", c.calls);
    for (size_t i = 0; i < 4; i++) cr_assert_eq(c.order[i], i);
    ex_operation_destroy(ir.op);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_bulk, error_without_message_gets_one) {
    seq_ctx c;
    seq_init(&c);
    c.fail_at = 0;
    c.fail_err.code = EX_EUSER + 1;  /* msg NULL */
    ex_result r = ex_sync_wait(ex_bulk(ex_just(), 3, seq_fn, &c));
    expect_error(&r, EX_EUSER + 1);
    cr_assert_eq(c.calls, 1);
    expect_no_leaks();
}

Test(exec_bulk, child_error_passes_through_without_calling_f) {
    static int payload;
    seq_ctx c;
    seq_init(&c);
    ex_result r = ex_sync_wait(ex_bulk(ex_just_error(ex_err_data(EX_EUSER + 2, "child", &payload)), 5, seq_fn, &c));
    expect_error(&r, EX_EUSER + 2);
    cr_assert_str_eq(r.error.msg, "child");
    cr_assert_eq(r.error.data, &payload);
    cr_assert_eq(c.calls, 0);
    expect_no_leaks();
}

Test(exec_bulk, child_stopped_passes_through_without_calling_f) {
    seq_ctx c;
    seq_init(&c);
    ex_result r = ex_sync_wait(ex_bulk(ex_just_stopped(), 5, seq_fn, &c));
    cr_assert_eq(r.disposition, EX_DISP_STOPPED);
    cr_assert_eq(c.calls, 0);
    expect_no_leaks();
}

Test(exec_bulk, null_child_or_function_is_einval) {
    seq_ctx c;
    seq_init(&c);
    ex_sender *s[6];
    s[0] = ex_bulk(NULL, 3, seq_fn, &c);
    s[1] = ex_bulk(ex_just(ex_int(1)), 3, NULL, &c);
    s[2] = ex_bulk_grain(NULL, 3, 1, seq_fn, &c);
    s[3] = ex_bulk_grain(ex_just(), 3, 1, NULL, &c);
    s[4] = ex_bulk_chunked(NULL, 3, 1, chunk_fn, &c);
    s[5] = ex_bulk_chunked(ex_just(), 3, 1, NULL, &c);
    for (int i = 0; i < 6; i++) {
        cr_assert_eq(ex_sender_status(s[i]).code, EX_EINVAL, "builder %d: status %d", i, ex_sender_status(s[i]).code);
        cr_assert_not_null(ex_sender_status(s[i]).msg);
        ex_result r = ex_sync_wait(s[i]);
        expect_error(&r, EX_EINVAL);
    }
    cr_assert_eq(c.calls, 0);
    expect_no_leaks();
}

Test(exec_bulk, invalid_child_is_reported_with_its_error) {
    ex_value v[EX_MAX_ARITY + 1];
    for (int i = 0; i <= EX_MAX_ARITY; i++) v[i] = ex_int(i);
    seq_ctx c;
    seq_init(&c);
    ex_sender *s = ex_bulk(ex_just_n(v, EX_MAX_ARITY + 1), 3, seq_fn, &c);
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    ex_result r = ex_sync_wait(s);
    expect_error(&r, EX_EINVAL);
    cr_assert_eq(c.calls, 0);
    expect_no_leaks();
}

Test(exec_bulk, signatures_are_the_childs_plus_error) {
    seq_ctx c;
    seq_init(&c);
    ex_sender *s = ex_bulk(ex_just(ex_int(1), ex_str("a")), 3, seq_fn, &c);
    const ex_sigs *sg = ex_sender_sigs(s);
    cr_assert_eq(sg->nvalues, 1);
    cr_assert_eq(sg->values[0].arity, 2);
    cr_assert_eq(sg->values[0].types[0], EX_T_INT);
    cr_assert_eq(sg->values[0].types[1], EX_T_STR);
    cr_assert(sg->flags & EX_SIGS_ERROR, "f may fail: the bulk sender may complete with an error");
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_bulk, sender_is_multi_shot) {
    seq_ctx c;
    seq_init(&c);
    ex_sender *s = ex_bulk(ex_just(ex_int(4)), 4, seq_fn, &c);
    for (int k = 0; k < 3; k++) {
        ex_result r = ex_sync_wait(ex_sender_retain(s));
        expect_value_int(&r, 4);
    }
    cr_assert_eq(c.calls, 12);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_bulk, sequential_chunked_covers_the_shape_once) {
    chunk_ctx c;
    chunk_init(&c, 100, 0);
    c.expect_thread = test_thread_id();
    ex_result r = ex_sync_wait(ex_bulk_chunked(ex_just(ex_int(1)), 100, 7, chunk_fn, &c));
    expect_value_int(&r, 1);
    cr_assert_geq(atomic_load(&c.chunks), 1);
    chunk_expect_cover(&c);
    cr_assert_eq(atomic_load(&c.off_thread), 0, "the sequential loop runs on the completing thread");
    free(c.hits);
    expect_no_leaks();
}

Test(exec_bulk, sequential_chunked_shape_zero_is_not_called) {
    chunk_ctx c;
    chunk_init(&c, 0, 0);
    ex_result r = ex_sync_wait(ex_bulk_chunked(ex_just(ex_int(1)), 0, 1, chunk_fn, &c));
    expect_value_int(&r, 1);
    cr_assert_eq(atomic_load(&c.chunks), 0);
    free(c.hits);
    expect_no_leaks();
}

/* ============================================================== on a pool */

static void run_parallel_schedule(ex_pool *p, size_t shape, size_t grain) {
    par_ctx c;
    par_init(&c, p, shape);
    after a;
    after_init(&a, p);
    ex_sender *b = grain ? ex_bulk_grain(ex_schedule(ex_pool_scheduler(p)), shape, grain, par_fn, &c)
                         : ex_bulk(ex_schedule(ex_pool_scheduler(p)), shape, par_fn, &c);
    ex_result r = ex_sync_wait(then_after(b, &a));
    expect_value_result(&r);
    cr_assert_eq(a.calls, 1);
    cr_assert_geq(a.worker, 0, "shape %zu grain %zu: the bulk did not complete on a pool worker", shape, grain);
    cr_assert_eq(a.n, 0);
    par_expect_each_once(&c);
    cr_assert_eq(atomic_load(&c.bad_values), 0);
    cr_assert_eq(atomic_load(&c.off_pool), 0, "indices ran outside the pool");
    ex_result_destroy(&r);
    par_fini(&c);
}

Test(exec_bulk, pool_runs_every_index_once_large_shape) {
    ex_pool *p = pool_new(2);
    run_parallel_schedule(p, 100000, 0);
    pool_free(p);
    expect_no_leaks();
}

Test(exec_bulk, pool_runs_every_index_once_small_shapes) {
    ex_pool *p = pool_new(2);
    static const size_t shapes[] = { 1, 2, 3, 7 };
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        run_parallel_schedule(p, shapes[k], 0);
        run_parallel_schedule(p, shapes[k], 1);
    }
    pool_free(p);
    expect_no_leaks();
}

Test(exec_bulk, pool_shape_zero_completes_with_the_values) {
    ex_pool *p = pool_new(2);
    par_ctx c;
    par_init(&c, p, 0);
    after a;
    after_init(&a, p);
    ex_result r = ex_sync_wait(then_after(
        ex_bulk(ex_continues_on(ex_just(ex_int(11)), ex_pool_scheduler(p)), 0, par_fn, &c), &a));
    expect_value_result(&r);
    cr_assert_eq(atomic_load(&c.calls), 0);
    cr_assert_eq(a.n, 1);
    cr_assert_eq(a.v[0].as.i, 11);
    cr_assert_geq(a.worker, 0);
    ex_result_destroy(&r);
    par_fini(&c);
    pool_free(p);
    expect_no_leaks();
}

Test(exec_bulk, pool_continues_on_forwards_the_values) {
    ex_pool *p = pool_new(2);
    par_ctx c;
    par_init(&c, p, 5000);
    ex_value vals[3] = { ex_int(-5), ex_str("vals"), ex_double(0.25) };
    par_expect_values(&c, vals, 3);
    after a;
    after_init(&a, p);
    ex_result r = ex_sync_wait(then_after(
        ex_bulk(ex_continues_on(ex_just(vals[0], vals[1], vals[2]), ex_pool_scheduler(p)), 5000, par_fn, &c), &a));
    expect_value_result(&r);
    par_expect_each_once(&c);
    cr_assert_eq(atomic_load(&c.bad_values), 0, "f did not see the child's values");
    cr_assert_eq(atomic_load(&c.off_pool), 0);
    cr_assert_eq(a.calls, 1);
    cr_assert_geq(a.worker, 0, "the completion runs on a pool worker");
    cr_assert_eq(a.n, 3, "the values are forwarded");
    cr_assert_eq(a.v[0].as.i, -5);
    cr_assert_str_eq(a.v[1].as.s, "vals");
    cr_assert_float_eq(a.v[2].as.d, 0.25, 0);
    ex_result_destroy(&r);
    par_fini(&c);
    pool_free(p);
    expect_no_leaks();
}

Test(exec_bulk, pool_grain_one_and_grain_larger_than_shape) {
    ex_pool *p = pool_new(2);
    run_parallel_schedule(p, 3000, 1);
    run_parallel_schedule(p, 10, 100);
    run_parallel_schedule(p, 1000, 1000);
    run_parallel_schedule(p, 1001, 1000);
    pool_free(p);
    expect_no_leaks();
}

Test(exec_bulk, pool_chunked_chunks_are_disjoint_and_cover_the_shape) {
    ex_pool *p = pool_new(2);
    static const size_t cases[][2] = { { 10000, 64 }, { 10000, 0 }, { 1, 1 }, { 7, 3 }, { 1000, 1 } };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        chunk_ctx c;
        chunk_init(&c, cases[k][0], cases[k][1]);
        after a;
        after_init(&a, p);
        ex_result r = ex_sync_wait(then_after(
            ex_bulk_chunked(ex_schedule(ex_pool_scheduler(p)), cases[k][0], cases[k][1], chunk_fn, &c), &a));
        expect_value_result(&r);
        chunk_expect_cover(&c);
        if (cases[k][1])
            cr_assert_geq(atomic_load(&c.chunks), (long)((cases[k][0] + cases[k][1] - 1) / cases[k][1]),
                          "chunks are at most `grain` long");
        cr_assert_geq(a.worker, 0);
        ex_result_destroy(&r);
        free(c.hits);
    }
    pool_free(p);
    expect_no_leaks();
}

Test(exec_bulk, pool_chunked_grain_larger_than_shape_is_one_chunk) {
    ex_pool *p = pool_new(2);
    chunk_ctx c;
    chunk_init(&c, 50, 0);
    ex_result r = ex_sync_wait(ex_bulk_chunked(ex_schedule(ex_pool_scheduler(p)), 50, 1000, chunk_fn, &c));
    expect_value_result(&r);
    cr_assert_eq(atomic_load(&c.chunks), 1, "a grain above the shape gives one chunk");
    cr_assert_eq(atomic_load(&c.first_begin), 0);
    cr_assert_eq(atomic_load(&c.first_end), 50);
    chunk_expect_cover(&c);
    ex_result_destroy(&r);
    free(c.hits);
    pool_free(p);
    expect_no_leaks();
}

Test(exec_bulk, pool_uneven_body_uses_both_workers) {
    ex_pool *p = pool_new(2);
    par_ctx c;
    par_init(&c, p, 4000);
    c.body = BODY_GROWING;  /* 2us at index 0 up to ~42us at the end: ~90ms in all */
    ex_result r = ex_sync_wait(ex_bulk(ex_schedule(ex_pool_scheduler(p)), 4000, par_fn, &c));
    expect_value_result(&r);
    par_expect_each_once(&c);
    unsigned m = atomic_load(&c.workers);
    cr_assert_geq(popcount_u(m), 2, "only worker mask %#x ran indices of a long uneven bulk on a 2-thread pool", m);
    ex_result_destroy(&r);
    par_fini(&c);
    pool_free(p);
    expect_no_leaks();
}

Test(exec_bulk, pool_one_very_slow_index_does_not_hold_back_the_rest) {
    /* Index 0 blocks its agent until every index outside its own chunk has
     * run: that only finishes (before the bounded wait gives up) if the
     * remaining chunks are taken dynamically by the other worker rather than
     * split up front. */
    ex_pool *p = pool_new(2);
    for (size_t grain = 1; grain <= 4; grain *= 2) {
        par_ctx c;
        par_init(&c, p, 64);
        c.body = BODY_BLOCK_FIRST;
        c.block_index = 0;
        c.block_until = (long)(64 - grain + 1);  /* index 0 itself and every other chunk */
        ex_result r = ex_sync_wait(ex_bulk_grain(ex_schedule(ex_pool_scheduler(p)), 64, grain, par_fn, &c));
        expect_value_result(&r);
        cr_assert_eq(atomic_load(&c.block_timed_out), 0,
                     "grain %zu: the other chunks did not all run while index 0 was slow (%ld of 64 ran by the end)",
                     grain, atomic_load(&c.calls));
        par_expect_each_once(&c);
        cr_assert_eq(popcount_u(atomic_load(&c.workers)), 2);
        ex_result_destroy(&r);
        par_fini(&c);
    }
    pool_free(p);
    expect_no_leaks();
}

Test(exec_bulk, pool_first_error_stops_chunks_not_yet_started) {
    static int payload;
    ex_pool *p = pool_new(2);
    par_ctx c;
    par_init(&c, p, 100000);
    c.fail_at = 0;
    c.fail_err = ex_err_data(EX_EUSER + 9, "index 0 failed", &payload);
    after a;
    after_init(&a, p);
    ex_result r = ex_sync_wait(then_after(ex_bulk_grain(ex_schedule(ex_pool_scheduler(p)), 100000, 1, par_fn, &c), &a));
    expect_error(&r, EX_EUSER + 9);
    cr_assert_str_eq(r.error.msg, "index 0 failed");
    cr_assert_eq(r.error.data, &payload);
    cr_assert_eq(a.calls, 0, "the then after a failed bulk must not run");
    cr_assert_eq(atomic_load(&c.hits[0]), 1);
    long ran = atomic_load(&c.calls);
    cr_assert_lt(ran, 100000, "every index ran although index 0 failed");
    for (size_t i = 0; i < c.shape; i++) cr_assert_leq(atomic_load(&c.hits[i]), 1);
    par_fini(&c);
    pool_free(p);
    expect_no_leaks();
}

Test(exec_bulk, pool_error_in_a_late_index_is_the_result) {
    ex_pool *p = pool_new(2);
    par_ctx c;
    par_init(&c, p, 2000);
    c.fail_at = 1999;
    c.fail_err = ex_err(EX_EUSER + 3, "last index failed");
    ex_result r = ex_sync_wait(ex_bulk(ex_schedule(ex_pool_scheduler(p)), 2000, par_fn, &c));
    expect_error(&r, EX_EUSER + 3);
    cr_assert_eq(atomic_load(&c.hits[1999]), 1);
    par_fini(&c);
    pool_free(p);
    expect_no_leaks();
}

Test(exec_bulk, pool_error_with_a_grain_is_the_result) {
    ex_pool *p = pool_new(2);
    par_ctx c;
    par_init(&c, p, 1000);
    c.fail_at = 0;
    c.fail_err = ex_err(EX_EUSER + 4, "grain failed");
    ex_result r = ex_sync_wait(ex_bulk_grain(ex_schedule(ex_pool_scheduler(p)), 1000, 10, par_fn, &c));
    expect_error(&r, EX_EUSER + 4);
    cr_assert_str_eq(r.error.msg, "grain failed");
    for (size_t i = 0; i < c.shape; i++) cr_assert_leq(atomic_load(&c.hits[i]), 1);
    par_fini(&c);
    pool_free(p);
    expect_no_leaks();
}

Test(exec_bulk, pool_stop_requested_before_start_completes_stopped) {
    ex_pool *p = pool_new(2);
    /* The environment's scheduler is the pool: the bulk of just runs on it,
     * and sees the receiver's stop token already stopped. */
    par_ctx c;
    par_init(&c, p, 1000);
    arec ar;
    arec_init(&ar, p);
    arec_with_stop(&ar);
    arec_with_sched(&ar, ex_pool_scheduler(p));
    ex_stop_source_request_stop(&ar.stop);
    ex_sender *s = ex_bulk(ex_just(ex_int(1)), 1000, par_fn, &c);
    ex_operation *op = arec_start(&ar, s);
    arec_wait(&ar);
    cr_assert_eq(atomic_load(&ar.stops), 1, "values %d errors %d", atomic_load(&ar.values), atomic_load(&ar.errors));
    cr_assert_eq(atomic_load(&c.calls), 0, "no index may run once stop was requested");
    ex_operation_free(op);
    ex_sender_release(s);

    /* Child scheduled on the pool with stop already requested. */
    arec ar2;
    arec_init(&ar2, p);
    arec_with_stop(&ar2);
    ex_stop_source_request_stop(&ar2.stop);
    s = ex_bulk(ex_schedule(ex_pool_scheduler(p)), 1000, par_fn, &c);
    op = arec_start(&ar2, s);
    arec_wait(&ar2);
    cr_assert_eq(atomic_load(&ar2.stops), 1);
    cr_assert_eq(atomic_load(&c.calls), 0);
    ex_operation_free(op);
    ex_sender_release(s);
    par_fini(&c);
    pool_free(p);
    expect_no_leaks();
}

Test(exec_bulk, pool_stop_requested_during_the_bulk_completes_stopped) {
    ex_pool *p = pool_new(2);
    par_ctx c;
    par_init(&c, p, 100000);
    arec ar;
    arec_init(&ar, p);
    arec_with_stop(&ar);
    c.stop_at = 10;
    c.stop = &ar.stop;
    ex_sender *s = ex_bulk_grain(ex_schedule(ex_pool_scheduler(p)), 100000, 1, par_fn, &c);
    ex_operation *op = arec_start(&ar, s);
    arec_wait(&ar);
    cr_assert_eq(atomic_load(&ar.stops), 1, "expected set_stopped: values %d errors %d", atomic_load(&ar.values),
                 atomic_load(&ar.errors));
    cr_assert_geq(ar.worker, 0, "completes on a worker");
    long ran = atomic_load(&c.calls);
    cr_assert_geq(ran, 1);
    cr_assert_eq(atomic_load(&c.hits[10]), 1);
    cr_assert_lt(ran, 100000, "every index ran although stop was requested at index 10");
    ex_operation_free(op);
    ex_sender_release(s);
    par_fini(&c);
    pool_free(p);
    expect_no_leaks();
}

Test(exec_bulk, pool_stop_via_write_env_in_sync_wait) {
    ex_pool *p = pool_new(2);
    ex_stop_source src;
    ex_stop_source_init(&src);
    par_ctx c;
    par_init(&c, p, 50000);
    c.stop_at = 3;
    c.stop = &src;
    ex_result r = ex_sync_wait(ex_write_env(ex_bulk_grain(ex_schedule(ex_pool_scheduler(p)), 50000, 1, par_fn, &c),
                                            &ex_key_get_stop_token, ex_token_value(ex_stop_source_token(&src))));
    cr_assert_eq(r.disposition, EX_DISP_STOPPED, "disposition %d", r.disposition);
    cr_assert_lt(atomic_load(&c.calls), 50000);
    par_fini(&c);
    pool_free(p);
    expect_no_leaks();
}

Test(exec_bulk, env_scheduler_path_runs_in_parallel) {
    ex_pool *p = pool_new(2);
    par_ctx c;
    par_init(&c, p, 64);
    c.body = BODY_WAIT_OTHER_WORKER;  /* index 0 waits until another worker ran an index */
    ex_value v = ex_int(3);
    par_expect_values(&c, &v, 1);
    after a;
    after_init(&a, p);
    ex_result r = ex_sync_wait(
        then_after(ex_starts_on(ex_pool_scheduler(p), ex_bulk(ex_just(ex_int(3)), 64, par_fn, &c)), &a));
    expect_value_result(&r);
    cr_assert_eq(atomic_load(&c.block_timed_out), 0, "no second worker ran an index (worker mask %#x)",
                 atomic_load(&c.workers));
    par_expect_each_once(&c);
    cr_assert_geq(popcount_u(atomic_load(&c.workers)), 2);
    cr_assert_eq(atomic_load(&c.bad_values), 0);
    cr_assert_eq(a.n, 1);
    cr_assert_eq(a.v[0].as.i, 3);
    cr_assert_geq(a.worker, 0);
    ex_result_destroy(&r);
    par_fini(&c);
    pool_free(p);
    expect_no_leaks();
}

Test(exec_bulk, env_scheduler_from_the_receiver_on_the_main_thread) {
    ex_pool *p = pool_new(2);
    par_ctx c;
    par_init(&c, p, 20000);
    arec ar;
    arec_init(&ar, p);
    arec_with_sched(&ar, ex_pool_scheduler(p));
    c.body = BODY_WAIT_OTHER_WORKER;  /* index 0 waits until a pool worker ran an index */
    ex_sender *s = ex_bulk(ex_just(ex_int(8)), 20000, par_fn, &c);
    ex_value v = ex_int(8);
    par_expect_values(&c, &v, 1);
    ex_operation *op = arec_start(&ar, s);
    arec_wait(&ar);
    cr_assert_eq(atomic_load(&ar.values), 1);
    cr_assert_eq(ar.n, 1);
    cr_assert_eq(ar.v[0].as.i, 8);
    par_expect_each_once(&c);
    cr_assert_eq(atomic_load(&c.bad_values), 0);
    cr_assert_eq(atomic_load(&c.block_timed_out), 0, "no pool worker took part in the bulk");
    cr_assert_gt(atomic_load(&c.workers), 0u, "the pool's workers took part");
    ex_operation_free(op);
    ex_sender_release(s);
    par_fini(&c);
    pool_free(p);
    expect_no_leaks();
}

Test(exec_bulk, pool_with_more_helpers_than_inline_allocates_them) {
    ex_pool *p = pool_new(6);  /* 5 helpers > EX_BULK_INLINE_HELPERS */
    par_ctx c;
    par_init(&c, p, 100000);
    ex_sender *s = ex_bulk(ex_schedule(ex_pool_scheduler(p)), 100000, par_fn, &c);
    long before = test_alloc_count();
    ex_result r = ex_sync_wait(s);
    long during = test_alloc_count() - before;
    expect_value_result(&r);
    par_expect_each_once(&c);
    cr_assert_geq(during, 1, "the helper array was not allocated from the environment's allocator");
    ex_result_destroy(&r);
    par_fini(&c);

    /* Several runs back to back: nothing accumulates. */
    for (int k = 0; k < 20; k++) {
        par_init(&c, p, 5000);
        r = ex_sync_wait(ex_bulk_grain(ex_schedule(ex_pool_scheduler(p)), 5000, 7, par_fn, &c));
        expect_value_result(&r);
        par_expect_each_once(&c);
        par_fini(&c);
    }
    pool_free(p);
    expect_no_leaks();
}

Test(exec_bulk, pool_helper_allocation_failure_still_completes) {
    ex_pool *p = pool_new(6);
    /* Count the allocations a run makes, then fail each in turn: the run
     * must still complete correctly (the helper array failing means fewer
     * helpers, never a different result). */
    par_ctx c;
    par_init(&c, p, 50000);
    ex_sender *s = ex_bulk(ex_schedule(ex_pool_scheduler(p)), 50000, par_fn, &c);
    long before = test_alloc_count();
    ex_result r = ex_sync_wait(ex_sender_retain(s));
    long during = test_alloc_count() - before;
    expect_value_result(&r);
    par_expect_each_once(&c);
    par_fini(&c);
    cr_assert_geq(during, 1, "a 6-thread pool bulk allocates its helper array");
    long base_in_use = test_stats.in_use;  /* the pool and the sender */
    for (long k = 1; k <= during; k++) {
        par_init(&c, p, 50000);
        long failed_before = test_stats.failed;
        test_alloc_fail_at(k);
        r = ex_sync_wait(ex_sender_retain(s));
        test_alloc_fail_at(0);
        cr_assert_eq(test_stats.failed, failed_before + 1, "allocation %ld of the run was not made", k);
        expect_value_result(&r);
        par_expect_each_once(&c);
        cr_assert_eq(atomic_load(&c.off_pool), 0);
        par_fini(&c);
        cr_assert_eq(test_stats.in_use, base_in_use, "fail at %ld: %ld block(s) leaked", k,
                     test_stats.in_use - base_in_use);
    }
    ex_sender_release(s);
    pool_free(p);
    expect_no_leaks();
}

Test(exec_bulk, pool_stores_tuple_values_for_the_parallel_run) {
    ex_pool *p = pool_new(2);
    ex_value src[3] = { ex_int(10), ex_int(20), ex_int(12) };
    ex_value want[3] = { ex_int(10), ex_int(20), ex_int(12) };
    ex_tuple ts = { 2, 3, src }, tw = { 2, 3, want };
    par_ctx c;
    par_init(&c, p, 3000);
    ex_value expect[2] = { ex_tuple_value(&tw), ex_int(5) };
    par_expect_values(&c, expect, 2);
    after a;
    after_init(&a, p);
    ex_sender *s = then_after(
        ex_bulk(ex_continues_on(ex_just(ex_tuple_value(&ts), ex_int(5)), ex_pool_scheduler(p)), 3000, par_fn, &c), &a);
    src[0] = ex_int(-1);  /* the sender owns a deep copy */
    ex_result r = ex_sync_wait(s);
    expect_value_result(&r);
    par_expect_each_once(&c);
    cr_assert_eq(atomic_load(&c.bad_values), 0, "f did not see the tuple");
    cr_assert_eq(a.n, 2);
    cr_assert_eq(a.tuple_n, 3);
    cr_assert_eq(a.tuple_sum, 42);
    cr_assert_eq(a.v[1].as.i, 5);
    cr_assert_geq(a.worker, 0);
    ex_result_destroy(&r);
    par_fini(&c);
    pool_free(p);
    expect_no_leaks();
}

static void oom_sweep(unsigned threads) {
    ex_pool *p = pool_new(threads);
    ex_value inner[2] = { ex_int(40), ex_int(2) };
    ex_tuple t = { 0, 2, inner };
    bool clean_run = false;
    int nomem = 0;
    long base_in_use = test_stats.in_use;  /* the pool */
    for (long k = 1; k <= 200 && !clean_run; k++) {
        par_ctx c;
        par_init(&c, p, 2000);
        after a;
        after_init(&a, p);
        long failed_before = test_stats.failed;
        test_alloc_fail_at(k);
        ex_sender *s = then_after(
            ex_bulk(ex_continues_on(ex_just(ex_tuple_value(&t), ex_str("x")), ex_pool_scheduler(p)), 2000, par_fn, &c),
            &a);
        ex_result r = ex_sync_wait(s);
        bool failed = test_stats.failed != failed_before;
        test_alloc_fail_at(0);
        if (r.disposition == EX_DISP_ERROR) {
            cr_assert_eq(r.error.code, EX_ENOMEM, "fail at %ld: error %d (%s)", k, r.error.code,
                         r.error.msg ? r.error.msg : "");
            cr_assert(failed, "fail at %ld: ENOMEM without a failed allocation", k);
            cr_assert_not_null(r.error.msg);
            nomem++;
        } else {
            cr_assert_eq(r.disposition, EX_DISP_VALUE, "fail at %ld: disposition %d", k, r.disposition);
            par_expect_each_once(&c);
            cr_assert_eq(a.n, 2);
            cr_assert_eq(a.tuple_sum, 42);
            cr_assert_str_eq(a.v[1].as.s, "x");
            clean_run = !failed;
        }
        ex_result_destroy(&r);
        par_fini(&c);
        cr_assert_eq(test_stats.in_use, base_in_use, "fail at %ld: %ld block(s) leaked", k,
                     test_stats.in_use - base_in_use);
    }
    cr_assert(clean_run, "the sweep never reached a run without an injected failure");
    cr_assert_gt(nomem, 0, "no injected failure gave EX_ENOMEM");
    pool_free(p);
}

Test(exec_bulk, oom_sweep_over_a_pool_bulk_pipeline) {
    oom_sweep(2);
    expect_no_leaks();
}

Test(exec_bulk, oom_sweep_with_allocated_helpers) {
    oom_sweep(6);
    expect_no_leaks();
}

/* =========================================== a resource's own bulk hook */

/* An inline-ish resource: schedule completes inside start; its bulk hook
 * runs the upper half of the index space before the lower half, so the
 * order f sees proves the hook ran. */
typedef struct rev_res {
    atomic_int bulk_calls;
    size_t last_shape, last_grain;
} rev_res;

typedef struct rev_op {
    ex_operation base;
    ex_receiver r;
} rev_op;

static void rev_start(ex_operation *op) { ex_set_value(((rev_op *)op)->r, NULL, 0); }
static const ex_operation_vtable rev_op_vt = { rev_start, NULL };

static ex_error rev_connect(void *self, ex_receiver r, void *storage) {
    (void)self;
    rev_op *o = storage;
    o->base.vt = &rev_op_vt;
    o->r = r;
    return ex_ok();
}

static void rev_bulk(void *self, ex_bulk_job *job) {
    rev_res *res = self;
    atomic_fetch_add(&res->bulk_calls, 1);
    res->last_shape = job->shape;
    res->last_grain = job->grain;
    size_t half = job->shape / 2;
    if (ex_bulk_job_run(job, half, job->shape)) (void)ex_bulk_job_run(job, 0, half);
    ex_bulk_job_done(job);
}

static const ex_scheduler_vtable rev_vt = {
    .name = "reverse_halves",
    .schedule_op_size = sizeof(rev_op),
    .schedule_op_align = alignof(rev_op),
    .schedule_flags = 0,
    .connect_schedule = rev_connect,
    .progress = EX_PROGRESS_WEAKLY_PARALLEL,
    .equal = NULL,
    .post = NULL,
    .dispatch = NULL,
    .bulk = rev_bulk,
};

static ex_scheduler rev_sched(rev_res *r) {
    ex_scheduler s = { &rev_vt, r };
    return s;
}

static void expect_reversed_halves(const seq_ctx *c, size_t shape) {
    cr_assert_eq(c->calls, shape);
    size_t half = shape / 2, k = 0;
    for (size_t i = half; i < shape; i++, k++) cr_assert_eq(c->order[k], i, "call %zu: index %zu", k, c->order[k]);
    for (size_t i = 0; i < half; i++, k++) cr_assert_eq(c->order[k], i, "call %zu: index %zu", k, c->order[k]);
}

Test(exec_bulk, custom_bulk_hook_of_the_completion_scheduler_is_used) {
    rev_res res;
    memset(&res, 0, sizeof res);
    seq_ctx c;
    seq_init(&c);
    rec rc;
    rec_init(&rc);
    inline_run ir;
    ex_sender *s = ex_bulk_grain(ex_schedule(rev_sched(&res)), 10, 3, seq_fn, &c);
    run_inline(&ir, s, &rc);
    cr_assert_eq(rc.values, 1);
    cr_assert_eq(rc.thread, test_thread_id());
    cr_assert_eq(atomic_load(&res.bulk_calls), 1, "the resource's bulk hook was not used");
    cr_assert_eq(res.last_shape, 10);
    cr_assert_eq(res.last_grain, 3);
    expect_reversed_halves(&c, 10);
    ex_operation_destroy(ir.op);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_bulk, custom_bulk_hook_with_values_from_continues_on) {
    rev_res res;
    memset(&res, 0, sizeof res);
    seq_ctx c;
    seq_init(&c);
    ex_result r = ex_sync_wait(ex_bulk(ex_continues_on(ex_just(ex_int(21), ex_str("y")), rev_sched(&res)), 8, seq_fn, &c));
    expect_value_result(&r);
    cr_assert_eq(r.n, 2);
    cr_assert_eq(r.values[0].as.i, 21);
    cr_assert_eq(atomic_load(&res.bulk_calls), 1);
    expect_reversed_halves(&c, 8);
    for (size_t k = 0; k < 8; k++) {
        cr_assert_eq(c.n[k], 2);
        cr_assert_eq(c.v0[k].as.i, 21);
        cr_assert_str_eq(c.v1[k].as.s, "y");
    }
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(exec_bulk, custom_bulk_hook_error_skips_the_rest) {
    rev_res res;
    memset(&res, 0, sizeof res);
    seq_ctx c;
    seq_init(&c);
    c.fail_at = 7;  /* in the upper half, which runs first */
    c.fail_err = ex_err(EX_EUSER + 7, "seven");
    ex_result r = ex_sync_wait(ex_bulk(ex_schedule(rev_sched(&res)), 10, seq_fn, &c));
    expect_error(&r, EX_EUSER + 7);
    cr_assert_str_eq(r.error.msg, "seven");
    cr_assert_eq(c.calls, 3, "indices 5, 6, 7 ran, then nothing (ran %zu)", c.calls);
    for (size_t k = 0; k < 3; k++) cr_assert_eq(c.order[k], 5 + k);
    expect_no_leaks();
}

Test(exec_bulk, custom_bulk_hook_from_the_environment) {
    rev_res res;
    memset(&res, 0, sizeof res);
    seq_ctx c;
    seq_init(&c);
    rec rc;
    rec_init(&rc);
    rec_with_scheduler(&rc, rev_sched(&res));
    inline_run ir;
    ex_sender *s = ex_bulk(ex_just(ex_int(2)), 6, seq_fn, &c);
    run_inline(&ir, s, &rc);
    cr_assert_eq(rc.values, 1);
    cr_assert_eq(rc.v[0].as.i, 2);
    cr_assert_eq(atomic_load(&res.bulk_calls), 1);
    expect_reversed_halves(&c, 6);
    ex_operation_destroy(ir.op);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_bulk, completion_scheduler_wins_over_the_environment) {
    ex_pool *p = pool_new(2);
    rev_res res;
    memset(&res, 0, sizeof res);
    seq_ctx c;
    seq_init(&c);
    /* Child completes on the custom resource; the environment names the pool. */
    arec ar;
    arec_init(&ar, p);
    arec_with_sched(&ar, ex_pool_scheduler(p));
    ex_sender *s = ex_bulk(ex_schedule(rev_sched(&res)), 10, seq_fn, &c);
    ex_operation *op = arec_start(&ar, s);
    arec_wait(&ar);
    cr_assert_eq(atomic_load(&ar.values), 1);
    cr_assert_eq(atomic_load(&res.bulk_calls), 1);
    expect_reversed_halves(&c, 10);
    ex_operation_free(op);
    ex_sender_release(s);

    /* Child completes on the pool; the environment names the custom one. */
    par_ctx pc;
    par_init(&pc, p, 1000);
    arec ar2;
    arec_init(&ar2, p);
    arec_with_sched(&ar2, rev_sched(&res));
    s = ex_bulk(ex_schedule(ex_pool_scheduler(p)), 1000, par_fn, &pc);
    op = arec_start(&ar2, s);
    arec_wait(&ar2);
    cr_assert_eq(atomic_load(&ar2.values), 1);
    cr_assert_eq(atomic_load(&res.bulk_calls), 1, "the custom hook ran although the child completes on the pool");
    par_expect_each_once(&pc);
    cr_assert_eq(atomic_load(&pc.off_pool), 0);
    ex_operation_free(op);
    ex_sender_release(s);
    par_fini(&pc);
    pool_free(p);
    expect_no_leaks();
}
