/* SPDX-License-Identifier: MIT */
/* Out-of-memory sweep: for representative pipelines, fail allocation number
 * k (k = 1, 2, ...) and check that the run either ends with EX_ENOMEM or
 * with exactly the correct result, and leaks nothing; stop at the first k
 * that fails no allocation. */
#include <pthread.h>

#include "allocators/alloc_fixtures.h"

TEST_SUITE(oom_sweep, 20);

static void check_int(const ex_result *r, int64_t want) {
    cr_assert_eq(r->n, 1);
    cr_assert_eq(r->values[0].type, EX_T_INT);
    cr_assert_eq(r->values[0].as.i, want, "got %lld, want %lld", (long long)r->values[0].as.i, (long long)want);
}

/* Asserts r has n_values values, the first a tuple of `size` datums with
 * index `index`; returns that tuple. */
static const ex_tuple *expect_tuple(const ex_result *r, size_t n_values, size_t index, size_t size) {
    cr_assert_eq(r->n, n_values);
    cr_assert_eq(r->values[0].type, EX_T_TUPLE);
    const ex_tuple *t = r->values[0].as.tuple;
    cr_assert_eq(t->index, index);
    cr_assert_eq(t->n, size);
    return t;
}

/* A single-thread context some pipelines run on. */
typedef struct ctx_fixture {
    ex_single_thread_context ctx;
    ex_scheduler sch;
} ctx_fixture;

/* One pipeline to sweep: its result is the int `want`, or what check
 * accepts; on_context: it runs partly on a single-thread context. */
typedef struct sweep_case {
    const char *name;
    sweep_build build;
    void (*check)(const ex_result *r);  /* NULL: a single int, `want` */
    int64_t want;
    bool on_context;
} sweep_case;

static const sweep_case *current_case;

/* A value result, as the current case wants. */
static void check_case(const ex_result *r, void *ctx, long k, bool failed) {
    (void)ctx, (void)failed;
    cr_assert_eq(r->disposition, EX_DISP_VALUE, "%s, k=%ld: expected EX_ENOMEM or the value, got disposition %d (%d: %s)",
                 current_case->name, k, r->disposition, r->error.code, r->error.msg ? r->error.msg : "");
    if (current_case->check) current_case->check(r);
    else check_int(r, current_case->want);
}

static void sweep_case_run(const sweep_case *c) {
    ctx_fixture f;
    if (c->on_context) {
        f.sch = test_stc_init(&f.ctx);
    }
    current_case = c;
    oom_sweep(c->name, SWEEP_TEST_ALLOCATOR, c->build, check_case, &f);
    if (c->on_context) test_stc_destroy(&f.ctx);
    expect_no_leaks();
}

#define SWEEP(...) sweep_case_run(&(const sweep_case){ __VA_ARGS__ })

static ex_error times2(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)n;
    out[0] = ex_int(in[0].as.i * 2);
    return ex_ok();
}

/* ------------------------------------------------------ let_value chain */

static ex_sender *build_let_chain(void *ctx) {
    (void)ctx;
    ex_sender *s = ex_just(ex_int(1));
    for (int i = 0; i < 3; i++) s = ex_let_value(s, let_plus1, NULL, EX_SIG(EX_T_INT));
    return s;
}

Test(oom_sweep, let_value_chain_of_three) { SWEEP("let_value chain", build_let_chain, NULL, 4, false); }

/* let_value whose datums are tuples (stored in the operation) */
static ex_sender *let_tuple_sum(void *ctx, const ex_value *in, size_t n) {
    (void)ctx, (void)n;
    const ex_tuple *t = in[0].as.tuple;
    return ex_just(ex_int(t->v[0].as.i + t->v[1].as.i), ex_tuple_value(t));
}

static ex_error first_of_two(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)n;
    if (in[1].type != EX_T_TUPLE || in[1].as.tuple->n != 2) return ex_err(EX_EUSER, "first_of_two: bad tuple");
    out[0] = in[0];
    return ex_ok();
}

static ex_sender *build_let_tuple(void *ctx) {
    (void)ctx;
    ex_value inner[2] = { ex_int(20), ex_int(22) };
    ex_tuple t = { 0, 2, inner };
    return ex_then(ex_let_value(ex_just(ex_tuple_value(&t)), let_tuple_sum, NULL, EX_SIG(EX_T_TUPLE)), first_of_two, NULL,
                   EX_SIG(EX_T_INT, EX_T_TUPLE), EX_SIG(EX_T_INT));
}

Test(oom_sweep, let_value_with_tuple_datums) { SWEEP("let_value tuple", build_let_tuple, NULL, 42, false); }

/* ------------------------------------------------------ then + upon_error */

static ex_error fail_user(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)in, (void)n, (void)out;
    return ex_err(EX_EUSER + 1, "fail_user");
}

static ex_error recover_user(void *ctx, ex_error e, ex_value *out) {
    (void)ctx;
    if (e.code != EX_EUSER + 1) return e; /* only the expected error is recovered */
    out[0] = ex_int(7);
    return ex_ok();
}

static ex_sender *build_then_upon_error(void *ctx) {
    (void)ctx;
    ex_sender *s = ex_then(ex_just(ex_int(5)), fail_user, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    s = ex_upon_error(s, recover_user, NULL, EX_SIG(EX_T_INT));
    return ex_then(s, times2, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
}

Test(oom_sweep, then_and_upon_error) { SWEEP("then + upon_error", build_then_upon_error, NULL, 14, false); }

/* ------------------------------------ into_variant + stopped_as_optional */

static ex_sender *build_variant_optional(void *ctx) {
    (void)ctx;
    return ex_into_variant(ex_stopped_as_optional(ex_just(ex_int(1), ex_int(2))));
}

static void check_variant_optional(const ex_result *r) {
    const ex_tuple *v = expect_tuple(r, 1, 0, 1);
    cr_assert_eq(v->v[0].type, EX_T_TUPLE);
    const ex_tuple *o = v->v[0].as.tuple;
    cr_assert_eq(o->n, 2);
    cr_assert_eq(o->v[0].as.i, 1);
    cr_assert_eq(o->v[1].as.i, 2);
}

Test(oom_sweep, into_variant_and_stopped_as_optional) {
    SWEEP("into_variant + stopped_as_optional", build_variant_optional, check_variant_optional, 0, false);
}

static ex_sender *let_stop(void *ctx, const ex_value *in, size_t n) {
    (void)ctx, (void)in, (void)n;
    return ex_just_stopped();
}

static ex_sender *build_variant_optional_stopped(void *ctx) {
    (void)ctx;
    return ex_into_variant(ex_stopped_as_optional(ex_let_value(ex_just(ex_int(1)), let_stop, NULL, EX_SIG(EX_T_INT))));
}

static void check_variant_none(const ex_result *r) {
    const ex_tuple *v = expect_tuple(r, 1, 0, 1);
    cr_assert_eq(v->v[0].type, EX_T_NONE, "stopped became a disengaged optional");
}

Test(oom_sweep, into_variant_and_stopped_as_optional_of_stopped) {
    SWEEP("into_variant + stopped_as_optional (stopped)", build_variant_optional_stopped, check_variant_none, 0, false);
}

/* ------------------------------------------ continues_on with a tuple */

static ex_sender *build_continues_tuple(void *ctx) {
    ctx_fixture *f = ctx;
    ex_value inner[3] = { ex_int(1), ex_str("two"), ex_double(3.0) };
    ex_tuple t = { 5, 3, inner };
    return ex_continues_on(ex_just(ex_tuple_value(&t), ex_int(9)), f->sch);
}

static void check_continues_tuple(const ex_result *r) {
    const ex_tuple *t = expect_tuple(r, 2, 5, 3);
    cr_assert_eq(t->v[0].as.i, 1);
    cr_assert_str_eq(t->v[1].as.s, "two");
    cr_assert_float_eq(t->v[2].as.d, 3.0, 0);
    cr_assert_eq(r->values[1].as.i, 9);
}

Test(oom_sweep, continues_on_context_with_tuple) {
    SWEEP("continues_on tuple", build_continues_tuple, check_continues_tuple, 0, true);
}

/* ------------------------------------------------- write_env + read_env */

static const ex_key sweep_key = { "test.oom.key", true };

static ex_sender *build_write_read(void *ctx) {
    (void)ctx;
    return ex_write_env(ex_then(ex_read_env(&sweep_key, EX_T_ANY), then_plus1, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)),
                        &sweep_key, ex_int(41));
}

Test(oom_sweep, write_env_and_read_env) { SWEEP("write_env + read_env", build_write_read, NULL, 42, false); }

static ex_sender *build_write_read_tuple(void *ctx) {
    (void)ctx;
    ex_value inner[2] = { ex_int(4), ex_int(2) };
    ex_tuple t = { 1, 2, inner };
    return ex_write_env(ex_read_env(&sweep_key, EX_T_TUPLE), &sweep_key, ex_tuple_value(&t));
}

static void check_tuple_42(const ex_result *r) {
    const ex_tuple *t = expect_tuple(r, 1, 1, 2);
    cr_assert_eq(t->v[0].as.i, 4);
    cr_assert_eq(t->v[1].as.i, 2);
}

Test(oom_sweep, write_env_tuple_and_read_env) {
    SWEEP("write_env tuple + read_env", build_write_read_tuple, check_tuple_42, 0, false);
}

/* ------------------------------------------------------ on across a context */

static ex_sender *build_on(void *ctx) {
    ctx_fixture *f = ctx;
    return ex_then(ex_on(f->sch, ex_then(ex_just(ex_int(20)), then_plus1, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT))), times2,
                   NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
}

Test(oom_sweep, on_across_a_context) { SWEEP("on", build_on, NULL, 42, true); }

static ex_sender *closure_times2(void *ctx, ex_sender *s) {
    (void)ctx;
    return ex_then(s, times2, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
}

static ex_sender *build_on_closure(void *ctx) {
    ctx_fixture *f = ctx;
    return ex_on_closure(ex_just(ex_int(21)), f->sch, closure_times2, NULL);
}

Test(oom_sweep, on_closure_across_a_context) { SWEEP("on closure", build_on_closure, NULL, 42, true); }

/* A scheduler whose schedule operation does not fit EX_SCHEDULE_OP_INLINE:
 * ex_on allocates the return hop when it is connected. */
typedef struct big_op { ex_operation base; ex_receiver r; unsigned char pad[2 * EX_SCHEDULE_OP_INLINE]; } big_op;

static void big_start(ex_operation *op) { ex_set_value(((big_op *)op)->r, NULL, 0); }

static const ex_operation_vtable big_op_vt = { big_start, NULL };

/* Completes inline on start. */
static ex_error big_connect(void *self, ex_receiver r, void *storage) {
    (void)self;
    *(big_op *)storage = (big_op){ .base = { &big_op_vt }, .r = r };
    return ex_ok();
}

static const ex_scheduler_vtable big_vt = { .name = "big", .schedule_op_size = sizeof(big_op),
                                            .schedule_op_align = _Alignof(big_op), .connect_schedule = big_connect,
                                            .progress = EX_PROGRESS_WEAKLY_PARALLEL };

static ex_sender *build_on_big_return(void *ctx) {
    ctx_fixture *f = ctx;
    ex_scheduler big = { &big_vt, NULL };
    return ex_write_env(ex_on(f->sch, ex_just(ex_int(42))), &ex_key_get_scheduler, ex_sched_value(big));
}

Test(oom_sweep, on_returning_to_a_large_schedule_operation) {
    SWEEP("on, large return hop", build_on_big_return, NULL, 42, true);
}
