/* SPDX-License-Identifier: MIT */
/* authored senders and the depth of sender chains (suite exec_sender, declared in sender.c). */
#include <stdlib.h>

#include "core/sender_fixtures.h"

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

/* Builds the operation in the storage connect was given. */
static ex_error answer_connect(const ex_sender *s, ex_receiver r, void *storage) {
    (void)s;
    *(answer_op *)storage = (answer_op){ { &answer_op_vt }, r };
    return ex_ok();
}
static int answer_destroyed;
static void answer_destroy(ex_sender *s) {
    (void)s;
    answer_destroyed++;
}
static const ex_sender_vtable answer_vt = { "answer", answer_connect, NULL, answer_destroy, NULL };

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
    expect_sync_int(then_count(s, &c), 43);
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
        ex_split(ex_sender_retain(t)), ex_bulk(ex_sender_retain(t), EX_PAR, 1, deep_pass, NULL),
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
    expect_sync_error(ex_sender_retain(s), EX_ETOODEEP);
    rec rc;
    rec_init(&rc);
    ex_operation *op;
    cr_assert_eq(ex_connect_alloc(s, rec_receiver(&rc), &op).code, EX_OK);
    ex_start(op);
    rec_expect_error(&rc, EX_ETOODEEP);
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
    expect_invalid_status(w, EX_ETOODEEP);
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
    case DEEP_BULK: return ex_bulk(s, EX_PAR, 1, deep_pass, NULL);
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
    expect_sync_int(ex_task_create(await_deep_chain, &c, &o), EX_SENDER_MAX_DEPTH - 1);
    expect_no_leaks();
}
