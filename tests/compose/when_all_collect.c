/* SPDX-License-Identifier: MIT */
/* ex_when_all_collect_n (a cexec extension): a fan-out over a run-time
 * number of children.  Every child's values, in order, as one tuple of
 * tuples, past EX_MAX_ARITY values in all; children of any arity, with
 * tuples or several value signatures; when_all's stop and error rules;
 * bad input; allocation failures; children on a pool.
 *
 * Nothing here asserts on timing; every wait is bounded. */
#include <stdlib.h>
#include <string.h>

#include "allocators/alloc_fixtures.h"
#include "compose/compose_fixtures.h"

TEST_SUITE(exec_when_all_collect, 30);

/* ============================================================ helpers */

/* An array the test frees: n children, child i just(int(3 i)). */
static ex_sender **int_children(size_t n) {
    ex_sender **c = calloc(n ? n : 1, sizeof *c);
    cr_assert_not_null(c);
    for (size_t i = 0; i < n; i++) c[i] = ex_just(ex_int((int64_t)i * 3));
    return c;
}

static ex_sender *collect_of(ex_sender **children, size_t n) {
    ex_sender *s = ex_when_all_collect_n(children, n);
    free(children);
    return s;
}

/* The one datum of a value completion: the collected tuple of n elements. */
static const ex_tuple *collected(const ex_result *r, size_t n) {
    cr_assert_eq(r->disposition, EX_DISP_VALUE, "disposition %d (%d: %s)", r->disposition, r->error.code,
                 r->error.msg ? r->error.msg : "");
    cr_assert_eq(r->n, 1, "one datum, got %zu", r->n);
    cr_assert_eq(r->values[0].type, EX_T_TUPLE);
    const ex_tuple *all = r->values[0].as.tuple;
    cr_assert_eq(all->index, 0);
    cr_assert_eq(all->n, n, "%u elements, expected %zu", all->n, n);
    return all;
}

/* Element i: child i's values, `count` of them, from its signature `index`. */
static const ex_tuple *element(const ex_tuple *all, size_t i, uint32_t index, uint32_t count) {
    cr_assert_eq(all->v[i].type, EX_T_TUPLE, "element %zu is not a tuple", i);
    const ex_tuple *t = all->v[i].as.tuple;
    cr_assert_eq(t->n, count, "element %zu has %u values, expected %u", i, t->n, count);
    cr_assert_eq(t->index, index, "element %zu: index %u, expected %u", i, t->index, index);
    return t;
}

static void expect_element(const ex_tuple *all, size_t i, uint32_t index, const ex_value *want, uint32_t count) {
    const ex_tuple *t = element(all, i, index, count);
    for (uint32_t k = 0; k < count; k++) {
        char a[96], b[96];
        ex_value_format(&t->v[k], a, sizeof a);
        ex_value_format(&want[k], b, sizeof b);
        cr_assert(ex_value_equal(&t->v[k], &want[k]), "element %zu, value %u: %s, expected %s", i, k, a, b);
    }
}

/* Every element of what int_children(n) sent. */
static void expect_int_elements(const ex_tuple *all) {
    for (size_t i = 0; i < all->n; i++) {
        const ex_tuple *t = element(all, i, 0, 1);
        cr_assert_eq(t->v[0].type, EX_T_INT);
        cr_assert_eq(t->v[0].as.i, (int64_t)i * 3, "element %zu", i);
    }
}

static void collect_ints(size_t n) {
    ex_sender *s = collect_of(int_children(n), n);
    cr_assert_eq(ex_sender_status(s).code, EX_OK);
    expect_sigs(s, EX_SIG(EX_T_TUPLE), EX_SIGS_ERROR | EX_SIGS_STOPPED | EX_SIGS_DYNAMIC, EX_SIGS_STOPPED);
    ex_result r = ex_sync_wait(s);
    expect_int_elements(collected(&r, n));
    ex_result_destroy(&r);
    expect_no_leaks();
}

/* ======================================================= every value */

Test(exec_when_all_collect, one_child) { collect_ints(1); }
Test(exec_when_all_collect, eight_children) { collect_ints(8); }

Test(exec_when_all_collect, nine_children_one_past_when_alls_limit) {
    collect_ints(9);
    ex_sender **c = int_children(9);
    ex_sender *s = ex_when_all_n(c, 9);  /* what the collect lifts */
    free(c);
    expect_invalid(s, EX_EINVAL);
    expect_no_leaks();
}

Test(exec_when_all_collect, a_hundred_children) { collect_ints(100); }
Test(exec_when_all_collect, ten_thousand_children) { collect_ints(10000); }

Test(exec_when_all_collect, no_children_is_an_empty_tuple) {
    ex_sender *s = ex_when_all_collect_n(NULL, 0);
    cr_assert_eq(ex_sender_status(s).code, EX_OK);
    expect_sigs(s, EX_SIG(EX_T_TUPLE), EX_SIGS_ERROR | EX_SIGS_DYNAMIC, 0);
    ex_result r = ex_sync_wait(s);
    collected(&r, 0);
    ex_result_destroy(&r);

    /* Stop requested before start: stopped, as any when_all. */
    rec rc;
    rec_init_stop_requested(&rc);
    run_in_place(ex_when_all_collect_n(NULL, 0), &rc);
    rec_expect_stopped(&rc);
    expect_no_leaks();
}

Test(exec_when_all_collect, the_operation_grows_by_a_bounded_amount_per_child) {
    ex_sender *one = ex_just(ex_int(0));
    size_t child_op = ex_sender_op_size(one);
    ex_sender_release(one);
    ex_sender *a = collect_of(int_children(100), 100), *b = collect_of(int_children(200), 200);
    size_t per_child = (ex_sender_op_size(b) - ex_sender_op_size(a)) / 100;
    /* Its slot, element and tuple (the header says about 90 bytes), one value, the child's own operation. */
    cr_assert_leq(per_child, 96 + sizeof(ex_value) + ex_align_up(child_op, 16), "%zu bytes a child", per_child);
    ex_sender_release(a);
    ex_sender_release(b);
    expect_no_leaks();
}

static void never_started(test_op *op) { (void)op; }

Test(exec_when_all_collect, an_operation_too_large_for_memory_saturates_and_is_refused) {
    ex_sigs sg = ex_sigs_none();
    ex_sigs_add_value(&sg, EX_SIG(EX_T_INT));
    ex_sender *c[3];
    for (int i = 0; i < 3; i++) {
        c[i] = test_sender_new(never_started, NULL, &sg);
        c[i]->op_size = SIZE_MAX / 2;
    }
    ex_sender *s = ex_when_all_collect_n(c, 3);
    cr_assert_eq(ex_sender_status(s).code, EX_OK);
    cr_assert_eq(ex_sender_op_size(s), SIZE_MAX, "the size saturates instead of wrapping to a small one");
    ex_result r = ex_sync_wait(s);
    expect_error(&r, EX_ENOMEM);
    ex_result_destroy(&r);
    expect_no_leaks();
}

static ex_sender *lv_pair(void *ctx, const ex_value *in, size_t n) {
    (void)ctx, (void)n;
    return ex_just(in[0], ex_int(in[0].as.i + 1));
}

static ex_sender *lv_nothing(void *ctx, const ex_value *in, size_t n) {
    (void)ctx, (void)in, (void)n;
    return ex_just();
}

Test(exec_when_all_collect, children_of_any_arity_each_get_their_own_tuple) {
    int x = 0;
    ex_sender *c[] = {
        ex_just(),
        ex_just(ex_int(1)),
        ex_just(ex_double(2.5), ex_str("two"), ex_bool(true)),
        ex_just(),
        ex_just(ex_int(0), ex_int(1), ex_int(2), ex_int(3), ex_int(4), ex_int(5), ex_int(6), ex_int(7)),
        ex_let_value(ex_just(ex_int(10)), lv_pair, NULL, EX_SIG(EX_T_INT)),  /* known at run time only */
        ex_let_value(ex_just(), lv_nothing, NULL, EX_SIG0),
        ex_just(ex_uint(7), ex_ptr(&x)),
    };
    ex_sender *s = ex_when_all_collect_n(c, 8);
    cr_assert_eq(ex_sender_status(s).code, EX_OK);
    /* Dynamic children may send too many values: set_error; the collect's own shape is fixed. */
    expect_sigs(s, EX_SIG(EX_T_TUPLE), EX_SIGS_ERROR | EX_SIGS_DYNAMIC, EX_SIGS_ERROR);
    ex_result r = ex_sync_wait(s);
    const ex_tuple *all = collected(&r, 8);
    expect_element(all, 0, 0, NULL, 0);
    expect_element(all, 1, 0, (const ex_value[]){ ex_int(1) }, 1);
    expect_element(all, 2, 0, (const ex_value[]){ ex_double(2.5), ex_str("two"), ex_bool(true) }, 3);
    expect_element(all, 3, 0, NULL, 0);
    const ex_tuple *eight = element(all, 4, 0, 8);
    for (int k = 0; k < 8; k++) cr_assert_eq(eight->v[k].as.i, k);
    expect_element(all, 5, 0, (const ex_value[]){ ex_int(10), ex_int(11) }, 2);
    expect_element(all, 6, 0, NULL, 0);
    expect_element(all, 7, 0, (const ex_value[]){ ex_uint(7), ex_ptr(&x) }, 2);
    ex_result_destroy(&r);
    expect_no_leaks();
}

/* A child of two value signatures, (int) and (str, int): sends the one
 * *(int *)ctx says. */
static void send_either(test_op *op) {
    int which = *(const int *)op->ctx;
    if (which == 0) {
        ex_value v = ex_int(5);
        ex_set_value(op->r, &v, 1);
    } else {
        ex_value v[2] = { ex_str("x"), ex_int(6) };
        ex_set_value(op->r, v, 2);
    }
}

static ex_sender *either(const int *which) {
    ex_sigs sg = ex_sigs_none();
    ex_sigs_add_value(&sg, EX_SIG(EX_T_INT));
    ex_sigs_add_value(&sg, EX_SIG(EX_T_STR, EX_T_INT));
    return test_sender_new(send_either, (void *)which, &sg);
}

Test(exec_when_all_collect, a_child_of_several_signatures_says_which_in_the_index) {
    static const int first = 0, second = 1;
    ex_sender *c[] = { either(&second), ex_just(ex_int(7)), either(&first), either(&second) };
    ex_sender *s = ex_when_all_collect_n(c, 4);
    cr_assert_eq(ex_sender_status(s).code, EX_OK, "ex_when_all_n refuses them; the collect takes them");
    expect_sigs(s, EX_SIG(EX_T_TUPLE), EX_SIGS_ERROR, 0);
    ex_result r = ex_sync_wait(s);
    const ex_tuple *all = collected(&r, 4);
    expect_element(all, 0, 1, (const ex_value[]){ ex_str("x"), ex_int(6) }, 2);
    expect_element(all, 1, 0, (const ex_value[]){ ex_int(7) }, 1);
    expect_element(all, 2, 0, (const ex_value[]){ ex_int(5) }, 1);
    expect_element(all, 3, 1, (const ex_value[]){ ex_str("x"), ex_int(6) }, 2);
    ex_result_destroy(&r);
    expect_no_leaks();
}

/* ============================================================ tuples */

/* A tuple (int 10, tuple(str "in")) in the producer's storage, clobbered
 * as soon as the child's set_value returns: values are lent for the call
 * only. */
typedef struct tuple_src {
    ex_value inner_v[1];
    ex_tuple inner;
    ex_value outer_v[2];
    ex_tuple outer;
} tuple_src;

static void send_tuple_then_clobber(test_op *op) {
    tuple_src *ts = op->ctx;
    ts->inner_v[0] = ex_str("in");
    ts->inner = (ex_tuple){ 4, 1, ts->inner_v };
    ts->outer_v[0] = ex_int(10);
    ts->outer_v[1] = ex_tuple_value(&ts->inner);
    ts->outer = (ex_tuple){ 2, 2, ts->outer_v };
    ex_value v = ex_tuple_value(&ts->outer);
    ex_set_value(op->r, &v, 1);
    memset(ts, 0xa5, sizeof *ts);
}

static ex_sender *tuple_child(tuple_src *ts) {
    ex_sigs sg = ex_sigs_none();
    ex_sigs_add_value(&sg, EX_SIG(EX_T_TUPLE));
    return test_sender_new(send_tuple_then_clobber, ts, &sg);
}

/* What element i holds for a tuple_child. */
static void expect_tuple_element(const ex_tuple *all, size_t i) {
    const ex_tuple *t = element(all, i, 0, 1);
    cr_assert_eq(t->v[0].type, EX_T_TUPLE);
    const ex_tuple *outer = t->v[0].as.tuple;
    cr_assert_eq(outer->index, 2);
    cr_assert_eq(outer->n, 2);
    cr_assert_eq(outer->v[0].as.i, 10);
    cr_assert_eq(outer->v[1].type, EX_T_TUPLE);
    const ex_tuple *inner = outer->v[1].as.tuple;
    cr_assert_eq(inner->index, 4);
    cr_assert_eq(inner->n, 1);
    cr_assert_str_eq(inner->v[0].as.s, "in");
}

Test(exec_when_all_collect, tuples_children_send_are_deep_copied_when_they_complete) {
    tuple_src ts[2];
    test_gate gate;
    test_gate_init(&gate);
    /* The gate child completes last: by then both producers clobbered their tuples. */
    ex_sender *c[] = { tuple_child(&ts[0]), ex_into_variant(ex_just(ex_int(1), ex_str("a"))), tuple_child(&ts[1]),
                       test_gate_sender(&gate) };
    ex_sender *s = ex_when_all_collect_n(c, 4);
    expect_sigs(s, EX_SIG(EX_T_TUPLE), EX_SIGS_ERROR, EX_SIGS_ERROR);  /* copying a tuple may fail */
    rec rc;
    rec_init(&rc);
    ex_operation *op = run_start(s, &rc);
    cr_assert_eq(rec_total(&rc), 0);
    test_gate_open(&gate, 9);
    cr_assert_eq(rc.values, 1);
    /* rc.text: the values formatted during the completion, while lent. */
    cr_assert_str_eq(rc.text, "tuple#0(tuple#0(tuple#2(int 10, tuple#4(str \"in\"))), tuple#0(tuple#0(int 1, str \"a\")), "
                              "tuple#0(tuple#2(int 10, tuple#4(str \"in\"))), tuple#0(int 9))");
    run_destroy_release(op, s);
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

static ex_allocator env_allocator = { env_allocate, env_deallocate, NULL, "test.collect_env", NULL };

Test(exec_when_all_collect, tuple_copies_come_from_the_environments_allocator) {
    tuple_src ts[3];
    atomic_store(&env_allocs, 0);
    atomic_store(&env_frees, 0);
    ex_sender *c[] = { tuple_child(&ts[0]), ex_just(ex_int(3)), tuple_child(&ts[1]), tuple_child(&ts[2]) };
    ex_sender *s = ex_write_env(ex_when_all_collect_n(c, 4), &ex_key_get_allocator, ex_alloc_value(&env_allocator));
    ex_result r = ex_sync_wait(s);
    const ex_tuple *all = collected(&r, 4);
    expect_tuple_element(all, 0);
    expect_element(all, 1, 0, (const ex_value[]){ ex_int(3) }, 1);
    expect_tuple_element(all, 3);
    ex_result_destroy(&r);
    cr_assert_eq(atomic_load(&env_allocs), 3, "one copy per tuple child, from the environment's allocator");
    cr_assert_eq(atomic_load(&env_frees), 3);
    expect_no_leaks();
}

/* ================================================= errors and stopped */

Test(exec_when_all_collect, the_error_of_child_k_wins_and_stops_the_others) {
    static int payload;
    enum { N = 50, K = 17 };
    ex_sender *c[N];
    /* The others complete only when asked to stop: before K they are
     * running when it fails, after K they start with stop requested. */
    for (int i = 0; i < N; i++)
        c[i] = i == K ? ex_just_error(ex_err_data(EX_EUSER + 3, "child 17 failed", &payload)) : until_stopped();
    ex_result r = ex_sync_wait(ex_when_all_collect_n(c, N));
    expect_error(&r, EX_EUSER + 3);
    cr_assert_str_eq(r.error.msg, "child 17 failed");
    cr_assert_eq(r.error.data, &payload);
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(exec_when_all_collect, the_first_owned_error_wins_the_others_are_released) {
    owned_errors_reset();
    enum { N = 30 };
    ex_sender *c[N];
    for (int i = 0; i < N; i++) c[i] = i % 10 == 4 ? ex_just_error(owned_error(i)) : ex_just(ex_int(i));
    ex_result r = ex_sync_wait(ex_when_all_collect_n(c, N));
    expect_error(&r, EX_EUSER + 1);
    cr_assert_eq(owned_error_id(r.error), 4, "children complete in order here: child 4's error is the first");
    ex_result_destroy(&r);
    expect_owned_all_released(3);
}

Test(exec_when_all_collect, a_stopped_child_gives_stopped_unless_one_failed) {
    ex_sender *c[] = { ex_just(ex_int(1)), ex_just_stopped(), ex_just(ex_int(2)), until_stopped() };
    ex_result r = ex_sync_wait(ex_when_all_collect_n(c, 4));
    cr_assert_eq(r.disposition, EX_DISP_STOPPED);
    ex_sender *d[] = { ex_just_stopped(), ex_just(ex_int(1)), ex_just_error(ex_err(EX_EUSER + 4, "after stop")) };
    r = ex_sync_wait(ex_when_all_collect_n(d, 3));
    expect_error(&r, EX_EUSER + 4);
    expect_no_leaks();
}

Test(exec_when_all_collect, stop_before_start_starts_no_child) {
    enum { N = 20 };
    call_counter calls[N];
    ex_sender *c[N];
    for (int i = 0; i < N; i++) c[i] = counted_int(&calls[i], i);
    rec rc;
    rec_init_stop_requested(&rc);
    ex_sender *s = ex_when_all_collect_n(c, N);
    run_destroy_release(run_start(s, &rc), s);
    rec_expect_stopped(&rc);
    for (int i = 0; i < N; i++) cr_assert_eq(atomic_load(&calls[i].calls), 0, "child %d ran", i);
    expect_no_leaks();
}

Test(exec_when_all_collect, the_receivers_stop_request_reaches_every_child) {
    enum { N = 300 };
    ex_sender *c[N];
    for (int i = 0; i < N; i++) c[i] = i % 3 ? until_stopped() : ex_just(ex_int(i));
    rec rc;
    rec_init(&rc);
    rec_with_stop(&rc);
    ex_sender *s = ex_when_all_collect_n(c, N);
    ex_operation *op = run_start(s, &rc);
    cr_assert_eq(rec_total(&rc), 0, "the children wait for a stop request");
    ex_stop_source_request_stop(&rc.stop);
    rec_expect_stopped(&rc);
    run_destroy_release(op, s);
    expect_no_leaks();
}

/* ============================================================ bad input */

Test(exec_when_all_collect, a_null_array_of_children_is_invalid) {
    expect_invalid(ex_when_all_collect_n(NULL, 3), EX_EINVAL);
    expect_no_leaks();
}

Test(exec_when_all_collect, a_null_child_is_named_and_the_others_released) {
    enum { N = 10 };
    call_counter calls;
    ex_sender *c[N];
    for (int i = 0; i < N; i++) c[i] = i == 3 ? NULL : i == 5 ? counted_int(&calls, 5) : ex_just(ex_int(i));
    expect_invalid_msg(ex_when_all_collect_n(c, N), EX_EINVAL, "ex_when_all_collect: child 3 is a NULL input sender");
    cr_assert_eq(atomic_load(&calls.calls), 0);
    expect_no_leaks();
}

Test(exec_when_all_collect, an_invalid_child_gives_its_error) {
    ex_sender *c[] = { ex_just(ex_int(1)), too_many_values(), ex_just() };
    expect_invalid(ex_when_all_collect_n(c, 3), EX_EINVAL);
    expect_no_leaks();
}

Test(exec_when_all_collect, signatures) {
    /* A child that may fail adds set_error. */
    call_counter unused;
    ex_sender *c1[] = { ex_just(ex_int(1)), ex_then(ex_just(), count_pass, &unused, EX_SIG0, EX_SIG0) };
    ex_sender *s = ex_when_all_collect_n(c1, 2);
    expect_sigs(s, EX_SIG(EX_T_TUPLE), EX_SIGS_ERROR | EX_SIGS_STOPPED, EX_SIGS_ERROR | EX_SIGS_STOPPED);
    ex_sender_release(s);
    /* A child that never sends a value: no value completion. */
    ex_sender *c2[] = { ex_just(ex_int(1)), ex_just_error(ex_err(EX_EUSER, "e")) };
    s = ex_when_all_collect_n(c2, 2);
    expect_no_value_sigs(s, EX_SIGS_ERROR | EX_SIGS_STOPPED);
    ex_sender_release(s);
    expect_no_leaks();
}

/* ================================================ running out of memory */

Test(exec_when_all_collect, failing_to_copy_a_tuple_is_enomem) {
    tuple_src ts;
    ex_sender *c[] = { ex_just(ex_int(1)), tuple_child(&ts), ex_just() };
    run_with_failing_allocation(ex_when_all_collect_n(c, 3));
    expect_no_leaks();
}

Test(exec_when_all_collect, failing_to_allocate_a_large_operation_is_enomem) {
    ex_sender *s = collect_of(int_children(10000), 10000);
    test_alloc_fail_next();
    ex_result r = ex_sync_wait(s);
    expect_injected_failure_hit();
    expect_error(&r, EX_ENOMEM);
    ex_result_destroy(&r);
    expect_no_leaks();
}

/* Twelve children: flat, none, a tuple, a dynamic pair, two signatures. */
static ex_sender *build_mixed(void *ctx) {
    tuple_src *ts = ctx;
    static const int second = 1;
    ex_sender *c[12];
    for (int i = 0; i < 12; i++) {
        switch (i % 4) {
        case 0: c[i] = ex_just(ex_int(i)); break;
        case 1: c[i] = i == 5 ? either(&second) : ex_just(); break;
        case 2: c[i] = tuple_child(&ts[i / 4]); break;
        default: c[i] = ex_let_value(ex_just(ex_int(i)), lv_pair, NULL, EX_SIG(EX_T_INT)); break;
        }
    }
    return ex_when_all_collect_n(c, 12);
}

static void check_mixed(const ex_result *r, void *ctx, long k, bool failed) {
    (void)ctx, (void)failed;
    cr_assert_eq(r->disposition, EX_DISP_VALUE, "k=%ld: disposition %d (%d: %s)", k, r->disposition, r->error.code,
                 r->error.msg ? r->error.msg : "");
    const ex_tuple *all = collected(r, 12);
    for (uint32_t i = 0; i < 12; i++) {
        switch (i % 4) {
        case 0: expect_element(all, i, 0, (const ex_value[]){ ex_int(i) }, 1); break;
        case 1:
            if (i == 5) expect_element(all, i, 1, (const ex_value[]){ ex_str("x"), ex_int(6) }, 2);
            else expect_element(all, i, 0, NULL, 0);
            break;
        case 2: expect_tuple_element(all, i); break;
        default: expect_element(all, i, 0, (const ex_value[]){ ex_int(i), ex_int(i + 1) }, 2); break;
        }
    }
}

Test(exec_when_all_collect, out_of_memory_at_every_allocation) {
    tuple_src ts[3];
    long hits = oom_sweep("collect of mixed children", SWEEP_TEST_ALLOCATOR, build_mixed, check_mixed, ts);
    cr_assert_gt(hits, 12, "every child's sender allocates: %ld runs hit a failure", hits);
    /* Only the environment's allocator failing: the tuple copies (the
     * collect's and let_value's). */
    oom_sweep("collect of mixed children, chain allocator", SWEEP_FAULT_CHAIN, build_mixed, check_mixed, ts);
    expect_no_leaks();
}

/* ============================================================ multi-shot */

Test(exec_when_all_collect, is_multi_shot_and_operations_are_independent) {
    tuple_src ts[2];
    ex_sender *c[] = { ex_just(ex_int(1)), tuple_child(&ts[0]), ex_just(ex_str("z")) };
    ex_sender *s = ex_when_all_collect_n(c, 3);
    for (int i = 0; i < 3; i++) {
        ex_result r = ex_sync_wait(ex_sender_retain(s));
        const ex_tuple *all = collected(&r, 3);
        expect_tuple_element(all, 1);
        ex_result_destroy(&r);
    }
    rec r1, r2;
    rec_init(&r1);
    rec_init(&r2);
    ex_operation *o1 = run_start(s, &r1);
    ex_operation *o2 = run_start(s, &r2);
    const char *want = "tuple#0(tuple#0(int 1), tuple#0(tuple#2(int 10, tuple#4(str \"in\"))), tuple#0(str \"z\"))";
    cr_assert_str_eq(r1.text, want);
    cr_assert_str_eq(r2.text, want);
    run_destroy(o1);
    run_destroy(o2);
    ex_sender_release(s);
    expect_no_leaks();
}

/* ================================================================ a pool */

/* ex_then function: notes the thread it ran on in *(const void **)ctx. */
static ex_error note_thread(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    *(const void **)ctx = test_thread_id();
    out[0] = ex_int(-1);
    return ex_ok();
}

Test(exec_when_all_collect, completes_on_the_agent_of_the_last_child) {
    ex_single_thread_context stc;
    ex_scheduler sch = test_stc_init(&stc);
    enum { N = 40 };
    const void *last_tid = NULL;
    ex_sender **c = int_children(N);
    /* The others complete inline, in the start, before it is started. */
    ex_sender_release(c[N - 1]);
    c[N - 1] = ex_then(ex_schedule(sch), note_thread, (void *)&last_tid, EX_SIG0, EX_SIG(EX_T_INT));
    trec tr;
    trec_init(&tr);
    ex_sender *s = collect_of(c, N);
    ex_operation *op = trec_run_start(s, &tr);
    trec_wait_done(&tr);
    cr_assert_eq(tr.r.values, 1);
    cr_assert_not_null(last_tid);
    cr_assert_eq(tr.r.thread, last_tid, "the collect completes on the thread of its last child");
    run_destroy_release(op, s);
    test_stc_destroy(&stc);
    expect_no_leaks();
}

/* n children on the pool: even ones hop there (starts_on), odd ones
 * continue there; child i sends int 3 i. */
static ex_sender *pool_collect(ex_scheduler sch, size_t n) {
    ex_sender **c = calloc(n, sizeof *c);
    cr_assert_not_null(c);
    for (size_t i = 0; i < n; i++) {
        ex_sender *v = ex_just(ex_int((int64_t)i * 3));
        c[i] = i % 2 ? ex_continues_on(v, sch) : ex_starts_on(sch, v);
    }
    return collect_of(c, n);
}

POOL_TEST(exec_when_all_collect, ten_thousand_children_on_a_pool, 2) {
    ex_scheduler sch = ex_pool_scheduler(p);
    ex_result r = ex_sync_wait(pool_collect(sch, 10000));
    expect_int_elements(collected(&r, 10000));
    ex_result_destroy(&r);
    /* Started on a worker: the fork-join path (children run by that worker unless stolen). */
    r = ex_sync_wait(ex_starts_on(sch, pool_collect(sch, 10000)));
    expect_int_elements(collected(&r, 10000));
    ex_result_destroy(&r);
}

POOL_TEST(exec_when_all_collect, an_error_on_a_worker_wins_over_the_values, 2) {
    ex_scheduler sch = ex_pool_scheduler(p);
    enum { N = 1000, K = 611 };
    ex_sender *c[N];
    for (int i = 0; i < N; i++)
        c[i] = ex_starts_on(sch, i == K ? ex_just_error(ex_err(EX_EUSER + 6, "child 611")) : ex_just(ex_int(i)));
    ex_result r = ex_sync_wait(ex_when_all_collect_n(c, N));
    expect_error(&r, EX_EUSER + 6);
    cr_assert_str_eq(r.error.msg, "child 611");
    ex_result_destroy(&r);
}
