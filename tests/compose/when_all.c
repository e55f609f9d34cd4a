/* [exec.when.all]: when_all and when_all_with_variant.
 *
 * Nothing here asserts on timing: sleeps only give threads a chance to reach
 * a point, and every wait on asynchronous work is bounded (WAIT_LIMIT_S) so
 * that a lost completion or a missing stop request fails the test with a
 * message instead of hanging. */
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/helpers.h"

TEST_SUITE(exec_when_all, 20);

/* ================================================================ fixtures */

/* Far above what any wait here needs, below the suite timeout. */
#define WAIT_LIMIT_S 8.0

/* Waits (bounded) until *f >= target; returns whether it got there. */
static bool wait_flag(atomic_int *f, int target) {
    double end = test_now_s() + WAIT_LIMIT_S;
    while (atomic_load(f) < target) {
        if (test_now_s() > end) return false;
        sched_yield();
    }
    return true;
}

static ex_pool *pool_new(unsigned threads) {
    ex_pool_config c;
    memset(&c, 0, sizeof c);
    c.threads = threads;
    c.name_prefix = "wa";
    ex_pool *p = NULL;
    ex_error e = ex_pool_create(&c, &p);
    cr_assert_eq(e.code, 0, "ex_pool_create: %s", e.msg ? e.msg : "");
    return p;
}

static void pool_free(ex_pool *p) {
    ex_error e = ex_pool_destroy(p);
    cr_assert_eq(e.code, 0, "ex_pool_destroy: %s", e.msg ? e.msg : "");
}


static void arec_wait(trec *a) {
    cr_assert(wait_flag(&a->done, 1), "timed out waiting for the when_all completion");
}

/* A then callback that counts its calls and passes its input through. */
static ex_error count_pass(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    atomic_fetch_add((atomic_int *)ctx, 1);
    for (size_t i = 0; i < n; i++) out[i] = in[i];
    return ex_ok();
}

/* ---------------------------------------------- children that wait for stop */

/* A child that runs on a scheduler and spins (bounded) until its stop token
 * (read from the environment when connected to when_all: when_all's own)
 * reports stop, then completes stopped (or with a late error). */
typedef struct spin_ctx {
    atomic_int entered;     /* spinners that began spinning */
    atomic_int saw_stop;    /* spinners that saw the stop request */
    atomic_int timed_out;   /* spinners that gave up waiting */
    atomic_int not_possible;/* spinners whose token could never be stopped */
    bool late_error;        /* after the stop: set_error(EX_EUSER + 2) instead of set_stopped */
} spin_ctx;

static void spin_init(spin_ctx *sc) {
    memset(sc, 0, sizeof *sc);
    atomic_init(&sc->entered, 0);
    atomic_init(&sc->saw_stop, 0);
    atomic_init(&sc->timed_out, 0);
    atomic_init(&sc->not_possible, 0);
}

static ex_sender *lv_spin_until_stop(void *ctx, const ex_value *in, size_t n) {
    spin_ctx *sc = ctx;
    (void)n;
    ex_stop_token tok = in[0].as.token;
    if (!ex_stop_token_stop_possible(tok)) atomic_fetch_add(&sc->not_possible, 1);
    atomic_fetch_add(&sc->entered, 1);
    double end = test_now_s() + WAIT_LIMIT_S;
    while (!ex_stop_token_stop_requested(tok)) {
        if (test_now_s() > end) {
            atomic_fetch_add(&sc->timed_out, 1);
            return ex_just_error(ex_err(EX_EUSER + 99, "spinner: no stop request arrived"));
        }
        sched_yield();
    }
    atomic_fetch_add(&sc->saw_stop, 1);
    if (sc->late_error) return ex_just_error(ex_err(EX_EUSER + 2, "late error after stop"));
    return ex_just_stopped();
}

static ex_sender *spinner(ex_scheduler sch, spin_ctx *sc) {
    return ex_let_value(ex_starts_on(sch, ex_read_env(&ex_key_get_stop_token, EX_T_TOKEN)), lv_spin_until_stop, sc,
                        EX_SIG(EX_T_TOKEN));
}

/* A child that runs on a scheduler, waits (bounded) until `want` spinners
 * are spinning, then completes with an error, stopped or a value. */
typedef enum trig_kind { TRIG_ERROR, TRIG_STOPPED, TRIG_VALUE } trig_kind;

typedef struct trigger_ctx {
    spin_ctx *sc;
    int want;
    trig_kind kind;
    atomic_int calls;
    atomic_int timed_out;
} trigger_ctx;

static int first_payload;

static ex_sender *lv_trigger(void *ctx, const ex_value *in, size_t n) {
    trigger_ctx *tc = ctx;
    (void)in, (void)n;
    atomic_fetch_add(&tc->calls, 1);
    if (!wait_flag(&tc->sc->entered, tc->want)) atomic_fetch_add(&tc->timed_out, 1);
    switch (tc->kind) {
    case TRIG_ERROR: return ex_just_error(ex_err_data(EX_EUSER + 1, "first error", &first_payload));
    case TRIG_STOPPED: return ex_just_stopped();
    default: return ex_just(ex_int(5));
    }
}

static ex_sender *trigger(ex_scheduler sch, trigger_ctx *tc, spin_ctx *sc, int want, trig_kind kind) {
    memset(tc, 0, sizeof *tc);
    tc->sc = sc;
    tc->want = want;
    tc->kind = kind;
    atomic_init(&tc->calls, 0);
    atomic_init(&tc->timed_out, 0);
    return ex_let_value(ex_starts_on(sch, ex_just()), lv_trigger, tc, EX_SIG0);
}

static ex_error plus1(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)n;
    out[0] = ex_int(in[0].as.i + 1);
    return ex_ok();
}

/* ====================================================== values in order */

Test(exec_when_all, values_concatenated_in_argument_order) {
    int x = 0;
    ex_sender *s = ex_when_all(ex_just(), ex_just(ex_int(1)), ex_just(ex_double(2.5), ex_str("two"), ex_bool(true)),
                               ex_just(), ex_just(ex_uint(7), ex_ptr(&x)));
    cr_assert_eq(ex_sender_status(s).code, 0);
    ex_result r = ex_sync_wait(s);
    cr_assert_eq(r.disposition, EX_DISP_VALUE, "disposition %d (%s)", r.disposition, r.error.msg ? r.error.msg : "");
    cr_assert_eq(r.n, 6);
    cr_assert_eq(r.values[0].type, EX_T_INT);
    cr_assert_eq(r.values[0].as.i, 1);
    cr_assert_eq(r.values[1].type, EX_T_DOUBLE);
    cr_assert_float_eq(r.values[1].as.d, 2.5, 0);
    cr_assert_eq(r.values[2].type, EX_T_STR);
    cr_assert_str_eq(r.values[2].as.s, "two");
    cr_assert_eq(r.values[3].type, EX_T_BOOL);
    cr_assert(r.values[3].as.b);
    cr_assert_eq(r.values[4].type, EX_T_UINT);
    cr_assert_eq(r.values[4].as.u, 7u);
    cr_assert_eq(r.values[5].type, EX_T_PTR);
    cr_assert_eq(r.values[5].as.p, &x);
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
    const ex_sigs *sg = ex_sender_sigs(s);
    cr_assert_eq(sg->nvalues, 1);
    cr_assert_eq(sg->values[0].arity, 2);
    cr_assert_eq(sg->values[0].types[0], EX_T_INT);
    cr_assert_eq(sg->values[0].types[1], EX_T_STR);
    ex_result r = ex_sync_wait(s);
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_eq(r.n, 2);
    cr_assert_eq(r.values[0].as.i, 5);
    cr_assert_str_eq(r.values[1].as.s, "five");
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
    cr_assert_eq(r.disposition, EX_DISP_VALUE, "disposition %d (%s)", r.disposition, r.error.msg ? r.error.msg : "");
    cr_assert_eq(r.n, 4);
    cr_assert_eq(r.values[0].as.i, 10);
    cr_assert_eq(r.values[1].as.i, 11);
    cr_assert_str_eq(r.values[2].as.s, "mid");
    cr_assert_eq(r.values[3].as.i, 12);
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
    const ex_sigs *sg = ex_sender_sigs(s);
    cr_assert_eq(sg->nvalues, 1);
    cr_assert_eq(sg->values[0].arity, 4);
    cr_assert_eq(sg->values[0].types[0], EX_T_INT);
    cr_assert_eq(sg->values[0].types[1], EX_T_DOUBLE);
    cr_assert_eq(sg->values[0].types[2], EX_T_STR);
    cr_assert_eq(sg->values[0].types[3], EX_T_BOOL);
    cr_assert_neq(sg->flags & EX_SIGS_STOPPED, 0, "when_all may always complete stopped");
    cr_assert_eq(sg->flags & EX_SIGS_ERROR, 0, "no child errors and no tuple to copy: no set_error");
    cr_assert_eq(sg->flags & EX_SIGS_DYNAMIC, 0);
    ex_sender_release(s);

    /* A child that may fail adds set_error. */
    atomic_int unused;
    atomic_init(&unused, 0);
    s = ex_when_all(ex_just(ex_int(1)), ex_then(ex_just(), count_pass, &unused, EX_SIG0, EX_SIG0));
    sg = ex_sender_sigs(s);
    cr_assert_eq(sg->nvalues, 1);
    cr_assert_eq(sg->values[0].arity, 1);
    cr_assert_neq(sg->flags & EX_SIGS_ERROR, 0);
    ex_sender_release(s);

    /* A tuple value may fail to copy: set_error. */
    ex_value e[1] = { ex_int(1) };
    ex_tuple t = { 0, 1, e };
    s = ex_when_all(ex_just(ex_tuple_value(&t)), ex_just(ex_int(2)));
    sg = ex_sender_sigs(s);
    cr_assert_eq(sg->nvalues, 1);
    cr_assert_eq(sg->values[0].arity, 2);
    cr_assert_eq(sg->values[0].types[0], EX_T_TUPLE);
    cr_assert_eq(sg->values[0].types[1], EX_T_INT);
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
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    ex_result r = ex_sync_wait(s);
    expect_error(&r, EX_EINVAL);
    s = ex_when_all_n(NULL, 0);
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    r = ex_sync_wait(s);
    expect_error(&r, EX_EINVAL);
    s = ex_when_all_n(NULL, 2);
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    ex_sender_release(s);
    s = ex_when_all_with_variant_n(NULL, 0);
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    ex_sender_release(s);
    s = ex_when_all_with_variant_n(arr, 0);
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    r = ex_sync_wait(s);
    expect_error(&r, EX_EINVAL);
    expect_no_leaks();
}

Test(exec_when_all, null_child_is_invalid_and_releases_the_others) {
    atomic_int calls;
    atomic_init(&calls, 0);
    ex_sender *s = ex_when_all(ex_then(ex_just(ex_int(1)), count_pass, &calls, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)), NULL,
                               ex_just(ex_int(2)));
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    cr_assert_not_null(ex_sender_status(s).msg);
    ex_result r = ex_sync_wait(s);
    expect_error(&r, EX_EINVAL);
    cr_assert_eq(atomic_load(&calls), 0, "no child of an invalid when_all runs");
    s = ex_when_all_with_variant(ex_just(ex_int(1)), NULL);
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_when_all, invalid_child_makes_an_invalid_sender_with_its_error) {
    ex_value v[EX_MAX_ARITY + 1];
    for (int i = 0; i <= EX_MAX_ARITY; i++) v[i] = ex_int(i);
    ex_sender *bad = ex_just_n(v, EX_MAX_ARITY + 1);
    cr_assert_eq(ex_sender_status(bad).code, EX_EINVAL);
    ex_sender *s = ex_when_all(ex_just(ex_int(1)), bad);
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    ex_result r = ex_sync_wait(s);
    expect_error(&r, EX_EINVAL);
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
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    ex_result r = ex_sync_wait(s);
    expect_error(&r, EX_EINVAL);
    expect_no_leaks();
}

Test(exec_when_all, with_variant_accepts_several_signatures_one_tuple_per_child) {
    static const bool yes = true, no = false;
    ex_sender *s = ex_when_all_with_variant(two_sigs(4, &yes), two_sigs(5, &no), ex_just(ex_double(0.5), ex_int(6)));
    cr_assert_eq(ex_sender_status(s).code, 0, "%s", ex_sender_status(s).msg ? ex_sender_status(s).msg : "");
    const ex_sigs *sg = ex_sender_sigs(s);
    cr_assert_eq(sg->nvalues, 1);
    cr_assert_eq(sg->values[0].arity, 3);
    for (int i = 0; i < 3; i++) cr_assert_eq(sg->values[0].types[i], EX_T_TUPLE);
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
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    ex_result r = ex_sync_wait(s);
    expect_error(&r, EX_EINVAL);
    /* Spread over many children. */
    ex_sender *kids[EX_MAX_ARITY + 1];
    for (int i = 0; i <= EX_MAX_ARITY; i++) kids[i] = ex_just(ex_int(i));
    s = ex_when_all_n(kids, EX_MAX_ARITY + 1);
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    ex_sender_release(s);
    expect_no_leaks();
}

/* ---------------------------------------------------------- errors, stopped */

Test(exec_when_all, error_child_gives_its_error) {
    static int payload;
    ex_result r = ex_sync_wait(ex_when_all(ex_just(ex_int(1)), ex_just_error(ex_err_data(EX_EUSER + 3, "boom", &payload)),
                                           ex_just(ex_int(2))));
    expect_error(&r, EX_EUSER + 3);
    cr_assert_str_eq(r.error.msg, "boom");
    cr_assert_eq(r.error.data, &payload);
    expect_no_leaks();
}

Test(exec_when_all, first_error_wins_inline) {
    static int p1, p2;
    ex_result r = ex_sync_wait(ex_when_all(ex_just_error(ex_err_data(EX_EUSER + 1, "first", &p1)),
                                           ex_just_error(ex_err_data(EX_EUSER + 2, "second", &p2))));
    expect_error(&r, EX_EUSER + 1);
    cr_assert_str_eq(r.error.msg, "first");
    cr_assert_eq(r.error.data, &p1);
    expect_no_leaks();
}

Test(exec_when_all, stopped_child_gives_stopped) {
    ex_result r = ex_sync_wait(ex_when_all(ex_just(ex_int(1)), ex_just_stopped(), ex_just(ex_int(2))));
    cr_assert_eq(r.disposition, EX_DISP_STOPPED);
    expect_no_leaks();
}

Test(exec_when_all, an_error_wins_over_stopped_in_either_order) {
    ex_result r = ex_sync_wait(ex_when_all(ex_just_stopped(), ex_just_error(ex_err(EX_EUSER + 4, "after stop"))));
    expect_error(&r, EX_EUSER + 4);
    r = ex_sync_wait(ex_when_all(ex_just_error(ex_err(EX_EUSER + 5, "before stop")), ex_just_stopped()));
    expect_error(&r, EX_EUSER + 5);
    expect_no_leaks();
}

Test(exec_when_all, first_error_wins_and_running_siblings_get_a_stop_request) {
    ex_pool *p = pool_new(3);
    ex_scheduler sch = ex_pool_scheduler(p);
    spin_ctx sc;
    spin_init(&sc);
    sc.late_error = true; /* after the stop they fail too: that error must lose */
    trigger_ctx tc;
    ex_sender *trig = trigger(sch, &tc, &sc, 2, TRIG_ERROR);
    ex_result r = ex_sync_wait(ex_when_all(spinner(sch, &sc), spinner(sch, &sc), trig));
    cr_assert_eq(atomic_load(&tc.timed_out), 0, "the spinners never started");
    cr_assert_eq(atomic_load(&sc.timed_out), 0, "the running siblings got no stop request after the error");
    cr_assert_eq(atomic_load(&sc.not_possible), 0, "the children's stop token must be stoppable");
    cr_assert_eq(atomic_load(&sc.entered), 2);
    cr_assert_eq(atomic_load(&sc.saw_stop), 2);
    expect_error(&r, EX_EUSER + 1);
    cr_assert_str_eq(r.error.msg, "first error");
    cr_assert_eq(r.error.data, &first_payload);
    pool_free(p);
    expect_no_leaks();
}

Test(exec_when_all, stopped_child_stops_running_siblings) {
    ex_pool *p = pool_new(3);
    ex_scheduler sch = ex_pool_scheduler(p);
    spin_ctx sc;
    spin_init(&sc);
    trigger_ctx tc;
    ex_sender *trig = trigger(sch, &tc, &sc, 2, TRIG_STOPPED);
    ex_result r = ex_sync_wait(ex_when_all(spinner(sch, &sc), trig, spinner(sch, &sc)));
    cr_assert_eq(atomic_load(&tc.timed_out), 0, "the spinners never started");
    cr_assert_eq(atomic_load(&sc.timed_out), 0, "the running siblings got no stop request after set_stopped");
    cr_assert_eq(atomic_load(&sc.saw_stop), 2);
    cr_assert_eq(r.disposition, EX_DISP_STOPPED, "disposition %d (%s)", r.disposition, r.error.msg ? r.error.msg : "");
    pool_free(p);
    expect_no_leaks();
}

Test(exec_when_all, error_after_a_stopped_child_still_wins) {
    /* A sibling stops first; a spinner then fails after seeing the stop:
     * the error replaces the stopped disposition. */
    ex_pool *p = pool_new(2);
    ex_scheduler sch = ex_pool_scheduler(p);
    spin_ctx sc;
    spin_init(&sc);
    sc.late_error = true;
    trigger_ctx tc;
    ex_sender *trig = trigger(sch, &tc, &sc, 1, TRIG_STOPPED);
    ex_result r = ex_sync_wait(ex_when_all(spinner(sch, &sc), trig));
    cr_assert_eq(atomic_load(&sc.timed_out), 0, "the spinner got no stop request");
    cr_assert_eq(atomic_load(&sc.saw_stop), 1);
    expect_error(&r, EX_EUSER + 2);
    pool_free(p);
    expect_no_leaks();
}

/* ------------------------------------------------------------- stop tokens */

Test(exec_when_all, stop_requested_before_start_starts_no_child) {
    atomic_int calls;
    atomic_init(&calls, 0);
    rec rc;
    rec_init(&rc);
    rec_with_stop(&rc);
    ex_stop_source_request_stop(&rc.stop);
    ex_sender *s = ex_when_all(ex_then(ex_just(ex_int(1)), count_pass, &calls, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)),
                               ex_then(ex_just(), count_pass, &calls, EX_SIG0, EX_SIG0));
    ex_operation *op = run_start(s, &rc);
    cr_assert_eq(rc.stops, 1, "values %d errors %d stops %d", rc.values, rc.errors, rc.stops);
    cr_assert_eq(rec_total(&rc), 1);
    cr_assert_eq(rc.thread, test_thread_id(), "completes inside start");
    cr_assert_eq(atomic_load(&calls), 0, "no child may be started");
    run_destroy(op);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_when_all, stop_requested_before_start_on_a_pool_starts_no_child) {
    ex_pool *p = pool_new(2);
    atomic_int calls;
    atomic_init(&calls, 0);
    rec rc;
    rec_init(&rc);
    rec_with_stop(&rc);
    ex_stop_source_request_stop(&rc.stop);
    ex_scheduler sch = ex_pool_scheduler(p);
    ex_sender *s = ex_when_all(ex_then(ex_schedule(sch), count_pass, &calls, EX_SIG0, EX_SIG0),
                               ex_then(ex_schedule(sch), count_pass, &calls, EX_SIG0, EX_SIG0));
    ex_operation *op = run_start(s, &rc);
    cr_assert_eq(rc.stops, 1, "stopped inside start");
    run_destroy(op);
    ex_sender_release(s);
    pool_free(p);
    cr_assert_eq(atomic_load(&calls), 0, "no child may be started");
    expect_no_leaks();
}

Test(exec_when_all, stop_requested_from_outside_while_running_completes_stopped) {
    ex_pool *p = pool_new(2);
    ex_scheduler sch = ex_pool_scheduler(p);
    spin_ctx sc;
    spin_init(&sc);
    trec a;
    trec_init(&a);
    rec_with_stop(&a.r);
    ex_sender *s = ex_when_all(spinner(sch, &sc), spinner(sch, &sc));
    ex_operation *op = NULL;
    cr_assert_eq(ex_connect_alloc(s, trec_receiver(&a), &op).code, 0);
    ex_start(op);
    cr_assert(wait_flag(&sc.entered, 2), "the children did not start");
    cr_assert_eq(atomic_load(&a.done), 0, "completed before the stop request");
    cr_assert(ex_stop_source_request_stop(&a.r.stop));
    arec_wait(&a);
    cr_assert_eq(atomic_load(&sc.timed_out), 0, "the children did not see the receiver's stop request");
    cr_assert_eq(atomic_load(&sc.saw_stop), 2);
    cr_assert_eq(a.r.stops, 1, "values %d errors %d stops %d", a.r.values, a.r.errors, a.r.stops);
    cr_assert_eq(rec_total(&a.r), 1);
    ex_operation_free(op);
    ex_sender_release(s);
    pool_free(p);
    expect_no_leaks();
}

/* A then callback that waits (bounded) for a gate. */
typedef struct gate_ctx {
    atomic_int entered, open, timed_out;
} gate_ctx;

static ex_error gated_int(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    gate_ctx *g = ctx;
    (void)in, (void)n;
    atomic_fetch_add(&g->entered, 1);
    if (!wait_flag(&g->open, 1)) atomic_fetch_add(&g->timed_out, 1);
    out[0] = ex_int(3);
    return ex_ok();
}

Test(exec_when_all, stop_request_ignored_by_the_children_still_gives_their_values) {
    /* [exec.when.all]: complete() looks only at the disposition, which only
     * the children's completions change. */
    ex_pool *p = pool_new(2);
    ex_scheduler sch = ex_pool_scheduler(p);
    gate_ctx g;
    memset(&g, 0, sizeof g);
    trec a;
    trec_init(&a);
    rec_with_stop(&a.r);
    ex_sender *s = ex_when_all(ex_then(ex_schedule(sch), gated_int, &g, EX_SIG0, EX_SIG(EX_T_INT)), ex_just(ex_int(4)));
    ex_operation *op = NULL;
    cr_assert_eq(ex_connect_alloc(s, trec_receiver(&a), &op).code, 0);
    ex_start(op);
    cr_assert(wait_flag(&g.entered, 1), "the child did not start");
    ex_stop_source_request_stop(&a.r.stop);
    atomic_store(&g.open, 1);
    arec_wait(&a);
    cr_assert_eq(atomic_load(&g.timed_out), 0);
    cr_assert_eq(a.r.values, 1, "values %d errors %d stops %d", a.r.values, a.r.errors, a.r.stops);
    cr_assert_eq(a.r.n, 2);
    cr_assert_eq(a.r.v[0].as.i, 3);
    cr_assert_eq(a.r.v[1].as.i, 4);
    ex_operation_free(op);
    ex_sender_release(s);
    pool_free(p);
    expect_no_leaks();
}

Test(exec_when_all, stop_racing_with_completion_on_a_pool) {
    /* The stop request arrives at any point while the children run: the
     * result is either the values or stopped, exactly once, and the stop
     * callback on the receiver's token is gone before the completion. */
    ex_pool *p = pool_new(2);
    ex_scheduler sch = ex_pool_scheduler(p);
    int values = 0, stops = 0;
    for (int i = 0; i < 500; i++) {
        trec a;
        trec_init(&a);
        rec_with_stop(&a.r);
        ex_sender *s = ex_when_all(ex_then(ex_continues_on(ex_just(ex_int(i)), sch), plus1, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)),
                                   ex_continues_on(ex_just(ex_int(-i)), sch));
        ex_operation *op = NULL;
        cr_assert_eq(ex_connect_alloc(s, trec_receiver(&a), &op).code, 0);
        ex_sender_release(s);
        ex_start(op);
        if (i % 3 != 2) ex_stop_source_request_stop(&a.r.stop);
        arec_wait(&a);
        cr_assert_eq(rec_total(&a.r), 1, "iteration %d", i);
        cr_assert_eq(a.r.errors, 0, "iteration %d: error %d (%s)", i, a.r.err.code, a.r.err.msg ? a.r.err.msg : "");
        if (a.r.values) {
            values++;
            cr_assert_eq(a.r.n, 2);
            cr_assert_eq(a.r.v[0].as.i, i + 1, "iteration %d", i);
            cr_assert_eq(a.r.v[1].as.i, -i, "iteration %d", i);
        } else {
            stops++;
        }
        ex_operation_free(op);
        /* Requesting again after the operation is freed must be harmless. */
        ex_stop_source_request_stop(&a.r.stop);
    }
    cr_assert_geq(values, 1, "the iterations without a stop request complete with values");
    (void)stops;
    pool_free(p);
    expect_no_leaks();
}

static const ex_key user_key = { "test.when_all.user_key", true };

Test(exec_when_all, children_see_own_stop_token_and_the_forwarded_env) {
    rec rc;
    rec_init(&rc);
    rec_with_stop(&rc);
    ex_sender *s = ex_write_env(ex_when_all(ex_read_env(&ex_key_get_stop_token, EX_T_TOKEN), ex_read_env(&user_key, EX_T_ANY)),
                                &user_key, ex_int(42));
    ex_operation *op = run_start(s, &rc);
    cr_assert_eq(rc.values, 1, "errors %d (%s)", rc.errors, rc.err.msg ? rc.err.msg : "");
    cr_assert_eq(rc.n, 2);
    cr_assert_eq(rc.v[0].type, EX_T_TOKEN);
    cr_assert(ex_stop_token_stop_possible(rc.v[0].as.token), "the children's token is when_all's own in-place token");
    cr_assert_not(ex_stop_token_equal(rc.v[0].as.token, ex_stop_source_token(&rc.stop)),
                  "the children must not get the receiver's token itself");
    cr_assert_eq(rc.v[1].as.i, 42, "the receiver's environment is forwarded");
    run_destroy(op);
    ex_sender_release(s);
    /* The operation is gone: a stop request must not reach freed state. */
    ex_stop_source_request_stop(&rc.stop);
    expect_no_leaks();
}

/* ----------------------------------------------------- where it completes */

typedef struct last_ctx {
    ex_single_thread_context *stc[2];
    atomic_int ran[2];
    const void *tid[2];
    const void *final_tid;
    int waiter;             /* the child that makes sure it arrives last */
    atomic_int timed_out;
    int final_calls;
} last_ctx;

typedef struct last_child {
    last_ctx *lc;
    int idx;
} last_child;

static ex_error lc_child(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    last_child *c = ctx;
    last_ctx *lc = c->lc;
    (void)in, (void)n;
    lc->tid[c->idx] = test_thread_id();
    atomic_store(&lc->ran[c->idx], 1);
    if (c->idx == lc->waiter) {
        int other = 1 - c->idx;
        if (!wait_flag(&lc->ran[other], 1)) {
            atomic_fetch_add(&lc->timed_out, 1);
        } else {
            /* The other child's item is running on its single-thread
             * context; an item queued there now runs after it returned,
             * i.e. after the other child arrived. */
            ex_result r = ex_sync_wait(ex_schedule(ex_single_thread_context_scheduler(lc->stc[other])));
            ex_result_destroy(&r);
        }
    }
    out[0] = ex_int(c->idx);
    return ex_ok();
}

static ex_error lc_final(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    last_ctx *lc = ctx;
    (void)n;
    lc->final_calls++;
    lc->final_tid = test_thread_id();
    out[0] = ex_int(in[0].as.i * 10 + in[1].as.i);
    return ex_ok();
}

static void run_last_on(int waiter) {
    ex_single_thread_context a, b;
    cr_assert_eq(ex_single_thread_context_init(&a).code, 0);
    cr_assert_eq(ex_single_thread_context_init(&b).code, 0);
    last_ctx lc;
    memset(&lc, 0, sizeof lc);
    lc.stc[0] = &a;
    lc.stc[1] = &b;
    lc.waiter = waiter;
    last_child c0 = { &lc, 0 }, c1 = { &lc, 1 };
    ex_sender *s = ex_then(ex_when_all(ex_then(ex_schedule(ex_single_thread_context_scheduler(&a)), lc_child, &c0, EX_SIG0,
                                               EX_SIG(EX_T_INT)),
                                       ex_then(ex_schedule(ex_single_thread_context_scheduler(&b)), lc_child, &c1, EX_SIG0,
                                               EX_SIG(EX_T_INT))),
                           lc_final, &lc, EX_SIG(EX_T_INT, EX_T_INT), EX_SIG(EX_T_INT));
    ex_result r = ex_sync_wait(s);
    cr_assert_eq(atomic_load(&lc.timed_out), 0);
    expect_value_int(&r, 1);
    cr_assert_eq(lc.final_calls, 1);
    cr_assert_neq(lc.tid[0], lc.tid[1], "the children ran on two threads");
    cr_assert_eq(lc.final_tid, lc.tid[waiter], "when_all must complete on the agent of the last child (%d)", waiter);
    cr_assert_neq(lc.final_tid, test_thread_id());
    cr_assert_eq(ex_single_thread_context_destroy(&a).code, 0);
    cr_assert_eq(ex_single_thread_context_destroy(&b).code, 0);
}

Test(exec_when_all, completes_on_the_agent_of_the_last_child) {
    run_last_on(1);
    run_last_on(0);
    expect_no_leaks();
}

static ex_error note_thread(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    *(const void **)ctx = test_thread_id();
    return ex_ok();
}

Test(exec_when_all, completes_on_the_other_thread_when_the_inline_child_is_first) {
    ex_single_thread_context stc;
    cr_assert_eq(ex_single_thread_context_init(&stc).code, 0);
    const void *child_tid = NULL, *final_tid = NULL;
    ex_sender *s = ex_then(ex_when_all(ex_just(), ex_then(ex_schedule(ex_single_thread_context_scheduler(&stc)), note_thread,
                                                          &child_tid, EX_SIG0, EX_SIG0)),
                           note_thread, &final_tid, EX_SIG0, EX_SIG0);
    ex_result r = ex_sync_wait(s);
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_not_null(child_tid);
    cr_assert_neq(child_tid, test_thread_id());
    cr_assert_eq(final_tid, child_tid);
    cr_assert_eq(ex_single_thread_context_destroy(&stc).code, 0);
    expect_no_leaks();
}

/* ------------------------------------------------------------ on a pool */

static ex_error make_str_b(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)in, (void)n;
    out[0] = ex_str("b");
    return ex_ok();
}

Test(exec_when_all, on_a_two_thread_pool_1000_times) {
    ex_pool *p = pool_new(2);
    ex_scheduler sch = ex_pool_scheduler(p);
    for (int i = 0; i < 1000; i++) {
        ex_sender *s = ex_when_all(ex_then(ex_continues_on(ex_just(ex_int(i)), sch), plus1, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)),
                                   ex_then(ex_schedule(sch), make_str_b, NULL, EX_SIG0, EX_SIG(EX_T_STR)),
                                   ex_continues_on(ex_just(ex_double(i * 0.5), ex_int(-i)), sch), ex_just(ex_int(7)));
        ex_result r = ex_sync_wait(s);
        cr_assert_eq(r.disposition, EX_DISP_VALUE, "iteration %d: disposition %d (%s)", i, r.disposition,
                     r.error.msg ? r.error.msg : "");
        cr_assert_eq(r.n, 5, "iteration %d", i);
        cr_assert_eq(r.values[0].as.i, i + 1, "iteration %d", i);
        cr_assert_str_eq(r.values[1].as.s, "b", "iteration %d", i);
        cr_assert_float_eq(r.values[2].as.d, i * 0.5, 0, "iteration %d", i);
        cr_assert_eq(r.values[3].as.i, -i, "iteration %d", i);
        cr_assert_eq(r.values[4].as.i, 7, "iteration %d", i);
        ex_result_destroy(&r);
    }
    pool_free(p);
    expect_no_leaks();
}

Test(exec_when_all, nested_when_alls_on_a_pool) {
    ex_pool *p = pool_new(2);
    ex_scheduler sch = ex_pool_scheduler(p);
    for (int i = 0; i < 200; i++) {
        ex_sender *inner1 = ex_when_all(ex_continues_on(ex_just(ex_int(1)), sch), ex_continues_on(ex_just(ex_int(2)), sch));
        ex_sender *inner2 = ex_when_all(ex_continues_on(ex_just(ex_int(3)), sch), ex_just(ex_int(4)));
        ex_result r = ex_sync_wait(ex_when_all(inner1, ex_starts_on(sch, inner2)));
        cr_assert_eq(r.disposition, EX_DISP_VALUE, "iteration %d", i);
        cr_assert_eq(r.n, 4);
        for (int k = 0; k < 4; k++) cr_assert_eq(r.values[k].as.i, k + 1, "iteration %d", i);
        ex_result_destroy(&r);
    }
    pool_free(p);
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
    cr_assert_eq(ex_single_thread_context_init(&stc).code, 0);
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
    cr_assert_eq(ex_single_thread_context_destroy(&stc).code, 0);
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
    cr_assert_eq(rc.errors, 1, "values %d errors %d stops %d", rc.values, rc.errors, rc.stops);
    cr_assert_eq(rec_total(&rc), 1);
    cr_assert_eq(rc.err.code, EX_ENOMEM);
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
    atomic_int calls;
    atomic_init(&calls, 0);
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
    cr_assert_eq(atomic_load(&calls), 4, "every run runs every child");
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
    cr_assert_eq(atomic_load(&calls), 6);
    expect_no_leaks();
}
