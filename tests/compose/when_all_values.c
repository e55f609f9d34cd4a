/* SPDX-License-Identifier: MIT */
/* [exec.when.all]: when_all and when_all_with_variant - values in order,
 * signatures, bad input, tuples, allocation failures, multi-shot.
 *
 * Nothing here asserts on timing: sleeps only give threads a chance to reach
 * a point, and every wait on asynchronous work is bounded so that a lost
 * completion or a missing stop request fails the test with a message
 * instead of hanging. */
#include <stdlib.h>
#include <string.h>

#include "compose/compose_fixtures.h"

TEST_SUITE(exec_when_all, 20);

/* ====================================================== values in order */

Test(exec_when_all, values_concatenated_in_argument_order) {
    int x = 0;
    ex_sender *s = ex_when_all(ex_just(), ex_just(ex_int(1)), ex_just(ex_double(2.5), ex_str("two"), ex_bool(true)),
                               ex_just(), ex_just(ex_uint(7), ex_ptr(&x)));
    cr_assert_eq(ex_sender_status(s).code, 0);
    ex_result r = ex_sync_wait(s);
    ex_value want[6] = { ex_int(1), ex_double(2.5), ex_str("two"), ex_bool(true), ex_uint(7), ex_ptr(&x) };
    expect_result_values(&r, want, 6);
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(exec_when_all, children_without_values_give_an_empty_value_completion) {
    ex_result r = ex_sync_wait(ex_when_all(ex_just(), ex_just(), ex_just()));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_eq(r.n, 0);
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(exec_when_all, one_child_gives_its_values) {
    ex_sender *s = ex_when_all(ex_just(ex_int(5), ex_str("five")));
    expect_sigs(s, EX_SIG(EX_T_INT, EX_T_STR), 0, 0);
    ex_result r = ex_sync_wait(s);
    expect_result_values(&r, (const ex_value[]){ ex_int(5), ex_str("five") }, 2);
    ex_result_destroy(&r);
    expect_no_leaks();
}

static ex_sender *lv_pair(void *ctx, const ex_value *in, size_t n) {
    (void)n;
    atomic_fetch_add((atomic_int *)ctx, 1);
    return ex_just(in[0], ex_int(in[0].as.i + 1));
}

static ex_sender *lv_str(void *ctx, const ex_value *in, size_t n) {
    (void)in, (void)n;
    atomic_fetch_add((atomic_int *)ctx, 1);
    return ex_just(ex_str("mid"));
}

Test(exec_when_all, values_from_dynamic_children_are_concatenated) {
    /* let_value children: signatures known only at run time. */
    atomic_int calls;
    atomic_init(&calls, 0);
    ex_sender *a = ex_let_value(ex_just(ex_int(10)), lv_pair, &calls, EX_SIG(EX_T_INT));
    ex_sender *b = ex_let_value(ex_just(), lv_str, &calls, EX_SIG0);
    ex_sender *s = ex_when_all(a, b, ex_just(ex_int(12)));
    cr_assert_eq(ex_sender_status(s).code, 0);
    cr_assert_neq(ex_sender_sigs(s)->flags & EX_SIGS_DYNAMIC, 0);
    ex_result r = ex_sync_wait(s);
    expect_result_values(&r, (const ex_value[]){ ex_int(10), ex_int(11), ex_str("mid"), ex_int(12) }, 4);
    cr_assert_eq(atomic_load(&calls), 2);
    ex_result_destroy(&r);
    expect_no_leaks();
}

static ex_sender *lv_five(void *ctx, const ex_value *in, size_t n) {
    (void)ctx, (void)in, (void)n;
    return ex_just(ex_int(0), ex_int(1), ex_int(2), ex_int(3), ex_int(4));
}

Test(exec_when_all, dynamic_children_with_too_many_values_in_total_fail_at_run_time) {
    ex_sender *s = ex_when_all(ex_let_value(ex_just(), lv_five, NULL, EX_SIG0), ex_let_value(ex_just(), lv_five, NULL, EX_SIG0));
    cr_assert_eq(ex_sender_status(s).code, 0, "checked when the values arrive");
    ex_result r = ex_sync_wait(s);
    expect_error(&r, EX_EINVAL);
    expect_no_leaks();
}

/* --------------------------------------------------------- signatures */

Test(exec_when_all, result_signature_is_the_concatenation) {
    ex_sender *s = ex_when_all(ex_just(ex_int(1)), ex_just(), ex_just(ex_double(1.0), ex_str("s")), ex_just(ex_bool(false)));
    expect_sigs(s, EX_SIG(EX_T_INT, EX_T_DOUBLE, EX_T_STR, EX_T_BOOL), 0, 0);
    const ex_sigs *sg = ex_sender_sigs(s);
    cr_assert_neq(sg->flags & EX_SIGS_STOPPED, 0, "when_all may always complete stopped");
    cr_assert_eq(sg->flags & EX_SIGS_ERROR, 0, "no child errors and no tuple to copy: no set_error");
    cr_assert_eq(sg->flags & EX_SIGS_DYNAMIC, 0);
    ex_sender_release(s);

    /* A child that may fail adds set_error. */
    call_counter unused;
    memset(&unused, 0, sizeof unused);
    s = ex_when_all(ex_just(ex_int(1)), ex_then(ex_just(), count_pass, &unused, EX_SIG0, EX_SIG0));
    expect_sigs(s, EX_SIG(EX_T_INT), EX_SIGS_ERROR, EX_SIGS_ERROR);
    ex_sender_release(s);

    /* A tuple value may fail to copy: set_error. */
    ex_value e[1] = { ex_int(1) };
    ex_tuple t = { 0, 1, e };
    s = ex_when_all(ex_just(ex_tuple_value(&t)), ex_just(ex_int(2)));
    expect_sigs(s, EX_SIG(EX_T_TUPLE, EX_T_INT), 0, 0);
    sg = ex_sender_sigs(s);
    cr_assert_neq(sg->flags & EX_SIGS_ERROR, 0);
    ex_sender_release(s);

    /* A child that never sends a value: no value completion at all. */
    s = ex_when_all(ex_just(ex_int(1)), ex_just_error(ex_err(EX_EUSER, "e")));
    sg = ex_sender_sigs(s);
    cr_assert_eq(sg->nvalues, 0);
    cr_assert_neq(sg->flags & EX_SIGS_ERROR, 0);
    cr_assert_neq(sg->flags & EX_SIGS_STOPPED, 0);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_when_all, exactly_max_arity_values_is_accepted) {
    ex_sender *s = ex_when_all(ex_just(ex_int(0), ex_int(1), ex_int(2), ex_int(3), ex_int(4)),
                               ex_just(ex_int(5), ex_int(6), ex_int(7)));
    cr_assert_eq(ex_sender_status(s).code, 0);
    cr_assert_eq(ex_sender_sigs(s)->values[0].arity, EX_MAX_ARITY);
    ex_result r = ex_sync_wait(s);
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_eq(r.n, EX_MAX_ARITY);
    for (int i = 0; i < EX_MAX_ARITY; i++) cr_assert_eq(r.values[i].as.i, i);
    ex_result_destroy(&r);
    expect_no_leaks();
}

/* ------------------------------------------------------------ bad input */

Test(exec_when_all, zero_children_or_null_array_is_invalid) {
    ex_sender *arr[1] = { NULL };
    ex_sender *s = ex_when_all_n(arr, 0);
    expect_invalid(s, EX_EINVAL);
    s = ex_when_all_n(NULL, 0);
    expect_invalid(s, EX_EINVAL);
    s = ex_when_all_n(NULL, 2);
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    ex_sender_release(s);
    s = ex_when_all_with_variant_n(NULL, 0);
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    ex_sender_release(s);
    s = ex_when_all_with_variant_n(arr, 0);
    expect_invalid(s, EX_EINVAL);
    expect_no_leaks();
}

Test(exec_when_all, null_child_is_invalid_and_releases_the_others) {
    call_counter calls;
    ex_sender *s = ex_when_all(counted_int(&calls, 1), NULL,
                               ex_just(ex_int(2)));
    expect_invalid(s, EX_EINVAL);
    cr_assert_eq(atomic_load(&calls.calls), 0, "no child of an invalid when_all runs");
    s = ex_when_all_with_variant(ex_just(ex_int(1)), NULL);
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_when_all, invalid_child_makes_an_invalid_sender_with_its_error) {
    ex_sender *bad = too_many_values();
    cr_assert_eq(ex_sender_status(bad).code, EX_EINVAL);
    ex_sender *s = ex_when_all(ex_just(ex_int(1)), bad);
    expect_invalid(s, EX_EINVAL);
    expect_no_leaks();
}

/* A child with two value signatures: set_value(int) or, when the then fails,
 * upon_error turns the error into set_value(str). */
static ex_error maybe_fail(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)n;
    if (*(const bool *)ctx) return ex_err(EX_EUSER + 7, "asked to fail");
    out[0] = in[0];
    return ex_ok();
}

static ex_error err_to_str(void *ctx, ex_error e, ex_value *out) {
    (void)ctx;
    out[0] = ex_str(e.msg);
    return ex_ok();
}

static ex_sender *two_sigs(int64_t v, const bool *fail) {
    return ex_upon_error(ex_then(ex_just(ex_int(v)), maybe_fail, (void *)fail, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)),
                         err_to_str, NULL, EX_SIG(EX_T_STR));
}

Test(exec_when_all, child_with_two_value_signatures_is_invalid) {
    static const bool no = false;
    ex_sender *c = two_sigs(1, &no);
    cr_assert_eq(ex_sender_sigs(c)->nvalues, 2, "fixture: the child has two value signatures");
    ex_sender *s = ex_when_all(ex_just(ex_int(0)), c);
    expect_invalid(s, EX_EINVAL);
    expect_no_leaks();
}

Test(exec_when_all, with_variant_accepts_several_signatures_one_tuple_per_child) {
    static const bool yes = true, no = false;
    ex_sender *s = ex_when_all_with_variant(two_sigs(4, &yes), two_sigs(5, &no), ex_just(ex_double(0.5), ex_int(6)));
    cr_assert_eq(ex_sender_status(s).code, 0, "%s", ex_sender_status(s).msg ? ex_sender_status(s).msg : "");
    expect_sigs(s, EX_SIG(EX_T_TUPLE, EX_T_TUPLE, EX_T_TUPLE), 0, 0);
    ex_result r = ex_sync_wait(s);
    cr_assert_eq(r.disposition, EX_DISP_VALUE, "disposition %d (%s)", r.disposition, r.error.msg ? r.error.msg : "");
    cr_assert_eq(r.n, 3);
    for (int i = 0; i < 3; i++) cr_assert_eq(r.values[i].type, EX_T_TUPLE);
    const ex_tuple *t0 = r.values[0].as.tuple, *t1 = r.values[1].as.tuple, *t2 = r.values[2].as.tuple;
    /* The failing child completed with its second signature, set_value(str). */
    cr_assert_eq(t0->index, 1);
    cr_assert_eq(t0->n, 1);
    cr_assert_eq(t0->v[0].type, EX_T_STR);
    cr_assert_str_eq(t0->v[0].as.s, "asked to fail");
    cr_assert_eq(t1->index, 0);
    cr_assert_eq(t1->n, 1);
    cr_assert_eq(t1->v[0].type, EX_T_INT);
    cr_assert_eq(t1->v[0].as.i, 5);
    cr_assert_eq(t2->index, 0);
    cr_assert_eq(t2->n, 2);
    cr_assert_float_eq(t2->v[0].as.d, 0.5, 0);
    cr_assert_eq(t2->v[1].as.i, 6);
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(exec_when_all, too_many_values_in_total_is_invalid) {
    ex_sender *s = ex_when_all(ex_just(ex_int(0), ex_int(1), ex_int(2), ex_int(3), ex_int(4)),
                               ex_just(ex_int(5), ex_int(6), ex_int(7), ex_int(8)));
    expect_invalid(s, EX_EINVAL);
    /* Spread over many children. */
    ex_sender *kids[EX_MAX_ARITY + 1];
    for (int i = 0; i <= EX_MAX_ARITY; i++) kids[i] = ex_just(ex_int(i));
    s = ex_when_all_n(kids, EX_MAX_ARITY + 1);
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    ex_sender_release(s);
    expect_no_leaks();
}


/* ------------------------------------------------------------------ tuples */

typedef struct tuple_src {
    ex_value elems[2];
    ex_tuple t;
} tuple_src;

/* set_value() -> set_value(tuple(10, "ten")) pointing into ctx storage. */
static ex_error make_tuple(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    tuple_src *ts = ctx;
    (void)in, (void)n;
    ts->elems[0] = ex_int(10);
    ts->elems[1] = ex_str("ten");
    ts->t.index = 2;
    ts->t.n = 2;
    ts->t.v = ts->elems;
    out[0] = ex_tuple_value(&ts->t);
    return ex_ok();
}

/* Runs after the tuple child completed: overwrites its storage. */
static ex_error clobber_tuple(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    tuple_src *ts = ctx;
    (void)in, (void)n;
    ts->elems[0] = ex_str("clobbered");
    ts->elems[1] = ex_int(-1);
    ts->t.n = 0;
    ts->t.index = 99;
    out[0] = ex_int(1);
    return ex_ok();
}

typedef struct tuple_check {
    int calls;
    int ok;
    const ex_tuple *seen;
} tuple_check;

/* Inspects when_all's own value completion (before sync_wait copies). */
static ex_error check_tuples(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    tuple_check *tc = ctx;
    (void)out;
    tc->calls++;
    tc->ok = 0;
    if (n != 3 || in[0].type != EX_T_TUPLE || in[1].type != EX_T_TUPLE || in[2].type != EX_T_INT) return ex_ok();
    const ex_tuple *a = in[0].as.tuple, *b = in[1].as.tuple;
    tc->seen = b;
    if (a->index != 0 || a->n != 2 || a->v[0].type != EX_T_INT || a->v[0].as.i != 1 || a->v[1].type != EX_T_STR ||
        strcmp(a->v[1].as.s, "a") != 0)
        return ex_ok();
    if (b->index != 2 || b->n != 2 || b->v[0].type != EX_T_INT || b->v[0].as.i != 10 || b->v[1].type != EX_T_STR ||
        strcmp(b->v[1].as.s, "ten") != 0)
        return ex_ok();
    tc->ok = 1;
    return ex_ok();
}

Test(exec_when_all, tuple_values_are_copied_and_survive_their_producers) {
    ex_single_thread_context stc;
    test_stc_init(&stc);
    tuple_src ts;
    memset(&ts, 0, sizeof ts);
    tuple_check tc;
    memset(&tc, 0, sizeof tc);
    /* Child 0: into_variant's tuple lives on its stack during the completion.
     * Child 1: a tuple into ts, clobbered by child 2 on another thread after
     * children 0 and 1 completed inline. */
    ex_sender *s = ex_when_all(ex_into_variant(ex_just(ex_int(1), ex_str("a"))),
                               ex_then(ex_just(), make_tuple, &ts, EX_SIG0, EX_SIG(EX_T_TUPLE)),
                               ex_then(ex_schedule(ex_single_thread_context_scheduler(&stc)), clobber_tuple, &ts, EX_SIG0,
                                       EX_SIG(EX_T_INT)));
    ex_sender *chk = ex_then(ex_sender_retain(s), check_tuples, &tc, EX_SIG_VARIADIC, EX_SIG0);
    ex_result r = ex_sync_wait(chk);
    cr_assert_eq(r.disposition, EX_DISP_VALUE, "disposition %d (%s)", r.disposition, r.error.msg ? r.error.msg : "");
    cr_assert_eq(tc.calls, 1);
    cr_assert_eq(tc.ok, 1, "when_all's tuples were not intact when it completed");
    cr_assert_neq(tc.seen, &ts.t, "the tuple must be a copy, not the producer's");
    ex_result_destroy(&r);

    /* Through sync_wait's copy too. */
    memset(&ts, 0, sizeof ts);
    r = ex_sync_wait(s);
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_eq(r.n, 3);
    cr_assert_eq(r.values[0].as.tuple->n, 2);
    cr_assert_eq(r.values[0].as.tuple->v[0].as.i, 1);
    cr_assert_str_eq(r.values[0].as.tuple->v[1].as.s, "a");
    cr_assert_eq(r.values[1].as.tuple->index, 2);
    cr_assert_eq(r.values[1].as.tuple->v[0].as.i, 10);
    cr_assert_str_eq(r.values[1].as.tuple->v[1].as.s, "ten");
    ex_result_destroy(&r);
    test_stc_destroy(&stc);
    expect_no_leaks();
}

/* A second counting allocator, handed to the operation through the env. */
static atomic_long env_allocs, env_frees;

static void *env_allocate(void *ctx, size_t size, size_t align) {
    (void)ctx;
    void *p = NULL;
    if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size ? size : 1)) return NULL;
    atomic_fetch_add(&env_allocs, 1);
    return p;
}

static void env_deallocate(void *ctx, void *p, size_t size, size_t align) {
    (void)ctx, (void)size, (void)align;
    free(p);
    atomic_fetch_add(&env_frees, 1);
}

static ex_allocator env_allocator = { env_allocate, env_deallocate, NULL, "test.env", NULL };

Test(exec_when_all, tuple_copies_come_from_the_environments_allocator) {
    tuple_src ts;
    memset(&ts, 0, sizeof ts);
    atomic_store(&env_allocs, 0);
    atomic_store(&env_frees, 0);
    ex_sender *s = ex_write_env(ex_when_all(ex_then(ex_just(), make_tuple, &ts, EX_SIG0, EX_SIG(EX_T_TUPLE)), ex_just(ex_int(3))),
                                &ex_key_get_allocator, ex_alloc_value(&env_allocator));
    ex_result r = ex_sync_wait(s);
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_eq(r.values[0].as.tuple->v[0].as.i, 10);
    cr_assert_eq(r.values[1].as.i, 3);
    ex_result_destroy(&r);
    cr_assert_geq(atomic_load(&env_allocs), 1, "the tuple copy uses the environment's allocator");
    cr_assert_eq(atomic_load(&env_allocs), atomic_load(&env_frees));
    expect_no_leaks();
}

Test(exec_when_all, failing_to_copy_a_tuple_is_enomem) {
    tuple_src ts;
    memset(&ts, 0, sizeof ts);
    ex_sender *s = ex_when_all(ex_just(ex_int(1)), ex_then(ex_just(), make_tuple, &ts, EX_SIG0, EX_SIG(EX_T_TUPLE)));
    rec rc;
    rec_init(&rc);
    _Alignas(max_align_t) unsigned char buf[4096];
    cr_assert_leq(ex_sender_op_size(s), sizeof buf);
    ex_operation *op;
    cr_assert_eq(ex_connect(s, rec_receiver(&rc), buf, sizeof buf, &op).code, 0);
    test_alloc_reset();
    test_alloc_fail_at(1);
    ex_start(op);
    cr_assert_eq(test_stats.failed, 1, "the tuple copy is the only allocation while running");
    test_alloc_reset();
    rec_expect_error(&rc, EX_ENOMEM);
    cr_assert_not_null(rc.err.msg);
    ex_operation_destroy(op);
    ex_sender_release(s);
    expect_no_leaks();
}

/* ---------------------------------------------------------- OOM sweep */

#define MAX_K 400

typedef ex_sender *(*build_fn)(void *ctx);
typedef void (*check_fn)(const ex_result *r);

static void sweep(const char *name, build_fn build, check_fn check, void *ctx) {
    long hits = 0, k;
    for (k = 1; k <= MAX_K; k++) {
        test_alloc_reset();
        test_alloc_fail_at(k);
        ex_result r = ex_sync_wait(build(ctx));
        long failed = test_stats.failed;
        if (r.disposition == EX_DISP_ERROR && r.error.code == EX_ENOMEM) {
            cr_assert_eq(failed, 1, "%s, k=%ld: EX_ENOMEM without a failed allocation", name, k);
            cr_assert_not_null(r.error.msg, "%s, k=%ld", name, k);
        } else {
            cr_assert_eq(r.disposition, EX_DISP_VALUE, "%s, k=%ld: expected EX_ENOMEM or the value, got %d (%d: %s)", name, k,
                         r.disposition, r.error.code, r.error.msg ? r.error.msg : "");
            check(&r);
        }
        ex_result_destroy(&r);
        cr_assert_eq(test_stats.in_use, 0, "%s, k=%ld: leaked %ld block(s)", name, k, test_stats.in_use);
        if (failed == 0) break;
        hits++;
    }
    cr_assert_leq(k, MAX_K, "%s: never reached a run without failures", name);
    cr_assert_gt(hits, 2, "%s: too few runs hit an allocation failure", name);
    test_alloc_reset();
}

static ex_sender *build_tuples(void *ctx) {
    return ex_when_all(ex_into_variant(ex_just(ex_int(1), ex_str("a"))), ex_then(ex_just(), make_tuple, ctx, EX_SIG0, EX_SIG(EX_T_TUPLE)),
                       ex_just(ex_int(3)));
}

static void check_tuples_result(const ex_result *r) {
    cr_assert_eq(r->n, 3);
    cr_assert_eq(r->values[0].type, EX_T_TUPLE);
    cr_assert_eq(r->values[0].as.tuple->n, 2);
    cr_assert_eq(r->values[0].as.tuple->v[0].as.i, 1);
    cr_assert_str_eq(r->values[0].as.tuple->v[1].as.s, "a");
    cr_assert_eq(r->values[1].type, EX_T_TUPLE);
    cr_assert_eq(r->values[1].as.tuple->index, 2);
    cr_assert_eq(r->values[1].as.tuple->v[0].as.i, 10);
    cr_assert_str_eq(r->values[1].as.tuple->v[1].as.s, "ten");
    cr_assert_eq(r->values[2].as.i, 3);
}

static ex_sender *build_variant(void *ctx) {
    (void)ctx;
    static const bool yes = true;
    return ex_when_all_with_variant(two_sigs(1, &yes), ex_just(ex_int(2), ex_int(3)));
}

static void check_variant_result(const ex_result *r) {
    cr_assert_eq(r->n, 2);
    cr_assert_eq(r->values[0].as.tuple->index, 1);
    cr_assert_str_eq(r->values[0].as.tuple->v[0].as.s, "asked to fail");
    cr_assert_eq(r->values[1].as.tuple->n, 2);
    cr_assert_eq(r->values[1].as.tuple->v[1].as.i, 3);
}

Test(exec_when_all, out_of_memory_sweep) {
    tuple_src ts;
    memset(&ts, 0, sizeof ts);
    sweep("when_all with tuple children", build_tuples, check_tuples_result, &ts);
    sweep("when_all_with_variant", build_variant, check_variant_result, NULL);
    expect_no_leaks();
}

/* ------------------------------------------------------------- multi-shot */

Test(exec_when_all, is_multi_shot) {
    call_counter calls;
    memset(&calls, 0, sizeof calls);
    tuple_src ts;
    memset(&ts, 0, sizeof ts);
    ex_sender *s = ex_when_all(ex_then(ex_just(ex_int(1)), count_pass, &calls, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)),
                               ex_then(ex_just(), make_tuple, &ts, EX_SIG0, EX_SIG(EX_T_TUPLE)), ex_just(ex_str("z")));
    for (int i = 0; i < 4; i++) {
        ex_result r = ex_sync_wait(ex_sender_retain(s));
        cr_assert_eq(r.disposition, EX_DISP_VALUE, "run %d", i);
        cr_assert_eq(r.n, 3);
        cr_assert_eq(r.values[0].as.i, 1);
        cr_assert_eq(r.values[1].as.tuple->v[0].as.i, 10);
        cr_assert_str_eq(r.values[2].as.s, "z");
        ex_result_destroy(&r);
    }
    cr_assert_eq(atomic_load(&calls.calls), 4, "every run runs every child");
    /* Two operations of the same sender alive at once. */
    rec r1, r2;
    rec_init(&r1);
    rec_init(&r2);
    ex_operation *o1 = NULL, *o2 = NULL;
    cr_assert_eq(ex_connect_alloc(s, rec_receiver(&r1), &o1).code, 0);
    cr_assert_eq(ex_connect_alloc(s, rec_receiver(&r2), &o2).code, 0);
    ex_start(o2);
    ex_start(o1);
    cr_assert_eq(r1.values, 1);
    cr_assert_eq(r2.values, 1);
    cr_assert_eq(r1.v[0].as.i, 1);
    cr_assert_eq(r2.v[2].type, EX_T_STR);
    ex_operation_free(o1);
    ex_operation_free(o2);
    ex_sender_release(s);
    cr_assert_eq(atomic_load(&calls.calls), 6);
    expect_no_leaks();
}
