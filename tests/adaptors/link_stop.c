/* SPDX-License-Identifier: MIT */
/* ex_link_stop_token: the child's stop token follows the receiver's and an
 * extra one; the rest of the environment stays visible; a child that
 * completes inside the stop request passed on to it completes the
 * operation only once that request is through (its receiver may free the
 * operation); values kept then survive; out of memory; bad input. */
#include <stdalign.h>
#include <string.h>

#include "common/helpers.h"

TEST_SUITE(exec_link_stop, 20);

/* A rec whose environment answers get_stop_token with its own source, plus
 * a user key above it (to see the rest of the environment). */
static const ex_key user_key = { "test.link.user", true };

typedef struct env_rec {
    rec r;
    ex_env_pair user;
} env_rec;

static void env_rec_init(env_rec *e, bool with_stop) {
    rec_init(&e->r);
    if (with_stop) rec_with_stop(&e->r);
    ex_env_pair_init(&e->user, &user_key, ex_int(77), e->r.env);
    e->r.env = ex_env_of_pair(&e->user);
}

static ex_stop_token rec_token(rec *r) { return ex_stop_source_token(&r->stop); }

/* Runs s on r in stack storage (started; not destroyed). */
typedef struct run_buf {
    _Alignas(max_align_t) unsigned char buf[2048];
    ex_operation *op;
} run_buf;

static void start_in(run_buf *b, const ex_sender *s, rec *r) {
    cr_assert_leq(ex_sender_op_size(s), sizeof b->buf);
    ex_error e = ex_connect(s, rec_receiver(r), b->buf, sizeof b->buf, &b->op);
    cr_assert_eq(e.code, 0, "connect: %s", e.msg ? e.msg : "");
    ex_start(b->op);
}

/* ------------------------------------------------------------ the token */

Test(exec_link_stop, the_child_stops_when_the_receivers_token_does) {
    ex_stop_source extra;
    ex_stop_source_init(&extra);
    ex_sender *s = ex_link_stop_token(until_stopped(), ex_stop_source_token(&extra));
    env_rec e;
    env_rec_init(&e, true);
    run_buf b;
    start_in(&b, s, &e.r);
    cr_assert_eq(rec_total(&e.r), 0);
    cr_assert(ex_stop_source_request_stop(&e.r.stop));
    rec_expect_stopped(&e.r);
    cr_assert_not(ex_stop_source_stop_requested(&extra), "stop does not flow back to the extra token");
    ex_operation_destroy(b.op);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_link_stop, the_child_stops_when_the_extra_token_does) {
    ex_stop_source extra;
    ex_stop_source_init(&extra);
    ex_sender *s = ex_link_stop_token(until_stopped(), ex_stop_source_token(&extra));
    for (int round = 0; round < 2; round++) {  /* multi-shot */
        ex_stop_source_init(&extra);
        env_rec e;
        env_rec_init(&e, true);
        run_buf b;
        start_in(&b, s, &e.r);
        cr_assert_eq(rec_total(&e.r), 0);
        cr_assert(ex_stop_source_request_stop(&extra));
        rec_expect_stopped(&e.r);
        cr_assert_not(ex_stop_source_stop_requested(&e.r.stop), "the receiver's token is not touched");
        ex_operation_destroy(b.op);
    }
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_link_stop, a_token_stopped_before_start_gives_the_child_a_stopped_token) {
    for (int which = 0; which < 2; which++) {
        ex_stop_source extra;
        ex_stop_source_init(&extra);
        env_rec e;
        env_rec_init(&e, true);
        ex_stop_source_request_stop(which ? &extra : &e.r.stop);
        ex_sender *s = ex_link_stop_token(until_stopped(), ex_stop_source_token(&extra));
        run_buf b;
        start_in(&b, s, &e.r);
        rec_expect_stopped(&e.r);  /* inside start */
        ex_operation_destroy(b.op);
        ex_sender_release(s);
    }
    expect_no_leaks();
}

static ex_sender *seen_token(ex_stop_token *seen, ex_stop_token extra) { return ex_link_stop_token(stop_probe(seen), extra); }

/* Runs a probe linked to `extra` under e; asserts the probe's value
 * (whether its token could stop) and returns the token it saw. */
static ex_stop_token child_token(env_rec *e, ex_stop_token extra, int64_t possible) {
    ex_stop_token seen;
    run_buf b;
    ex_sender *s = seen_token(&seen, extra);
    start_in(&b, s, &e->r);
    rec_expect_value_int(&e->r, possible);
    ex_operation_destroy(b.op);
    ex_sender_release(s);
    return seen;
}

Test(exec_link_stop, the_child_sees_one_token_itself_when_the_other_cannot_stop) {
    ex_stop_source extra;
    ex_stop_source_init(&extra);
    ex_stop_token x = ex_stop_source_token(&extra);
    env_rec e;

    env_rec_init(&e, true);  /* extra never stops: the receiver's token, unchanged */
    cr_assert(ex_stop_token_equal(child_token(&e, ex_never_stop_token(), 1), rec_token(&e.r)));
    env_rec_init(&e, false);  /* the receiver's never stops: extra itself */
    cr_assert(ex_stop_token_equal(child_token(&e, x, 1), x));
    env_rec_init(&e, true);  /* both the same: that one */
    cr_assert(ex_stop_token_equal(child_token(&e, rec_token(&e.r), 1), rec_token(&e.r)));
    env_rec_init(&e, false);  /* neither can stop: the never-stop token */
    (void)child_token(&e, ex_never_stop_token(), 0);
    env_rec_init(&e, true);  /* both can: a token of the operation's own, stoppable, not stopped */
    ex_stop_token own = child_token(&e, x, 1);
    cr_assert_not(ex_stop_token_equal(own, rec_token(&e.r)));
    cr_assert_not(ex_stop_token_equal(own, x));
    expect_no_leaks();
}

Test(exec_link_stop, the_rest_of_the_environment_stays_visible) {
    ex_stop_source extra;
    ex_stop_source_init(&extra);
    env_rec e;
    env_rec_init(&e, true);
    ex_sender *s = ex_link_stop_token(ex_read_env(&user_key, EX_T_INT), ex_stop_source_token(&extra));
    run_buf b;
    start_in(&b, s, &e.r);
    rec_expect_value_int(&e.r, 77);
    ex_operation_destroy(b.op);
    ex_sender_release(s);

    /* Through sync_wait: its scheduler is still there. */
    ex_result r = ex_sync_wait(ex_link_stop_token(ex_read_env(&ex_key_get_scheduler, EX_T_SCHED), ex_stop_source_token(&extra)));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_eq(r.values[0].type, EX_T_SCHED);
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(exec_link_stop, values_and_errors_pass_through) {
    ex_stop_source extra;
    ex_stop_source_init(&extra);
    expect_sync_text(ex_link_stop_token(ex_just(ex_int(4), ex_str("four")), ex_stop_source_token(&extra)),
                     "int 4; str \"four\"");
    static int payload;
    ex_result r = ex_sync_wait(ex_link_stop_token(ex_just_error(ex_err_data(EX_EUSER + 1, "its own", &payload)),
                                                  ex_stop_source_token(&extra)));
    expect_error(&r, EX_EUSER + 1);
    cr_assert_eq(r.error.data, &payload);
    r = ex_sync_wait(ex_link_stop_token(ex_just_stopped(), ex_stop_source_token(&extra)));
    expect_stopped(&r);
    expect_no_leaks();
}

/* ------------------------------------------ completing inside a request */

/* A child that completes from its stop callback, with set_value(tuple(5,
 * "five")) built on the callback's stack, or with an error. */
typedef struct on_stop_ctx {
    bool error;
} on_stop_ctx;

static void value_on_stop_fire(ex_stop_callback *cb) {
    test_op *o = (test_op *)(void *)((char *)cb - offsetof(test_op, cb));
    ex_stop_callback_deregister(&o->cb);
    const on_stop_ctx *c = o->ctx;
    if (c && c->error) {
        ex_set_error(o->r, ex_err(EX_EUSER + 9, "failed on stop"));
        return;
    }
    ex_value items[2] = { ex_int(5), ex_str("five") };
    ex_tuple t = { 0, 2, items };
    ex_value v = ex_tuple_value(&t);
    ex_set_value(o->r, &v, 1);
    memset(items, 0, sizeof items);  /* gone once the completion returned */
}

static void value_on_stop_start(test_op *o) {
    ex_stop_callback_register(&o->cb, ex_get_stop_token(ex_receiver_env(o->r)), value_on_stop_fire);
}

static ex_sender *value_on_stop(on_stop_ctx *c) {
    ex_sigs sigs = ex_sigs_none();
    ex_sigs_add_value(&sigs, EX_SIG(EX_T_TUPLE));
    sigs.flags = EX_SIGS_ERROR;
    return test_sender_new(value_on_stop_start, c, &sigs);
}

/* The receiver's environment: its stop token, and an allocator that
 * scribbles over what it frees (a use after free then reads garbage). */
typedef struct freeing_rec {
    frees_op_rec f;
    ex_env_pair alloc_pair;
    cnt_alloc ca;
} freeing_rec;

static void freeing_rec_init(freeing_rec *fr) {
    frees_op_rec_init(&fr->f);
    rec_with_stop(&fr->f.r);
    cnt_alloc_init(&fr->ca);
    fr->ca.scribble = true;
    ex_env_pair_init(&fr->alloc_pair, &ex_key_get_allocator, ex_alloc_value(&fr->ca.base), fr->f.r.env);
    fr->f.r.env = ex_env_of_pair(&fr->alloc_pair);
}

static void connect_freeing(freeing_rec *fr, const ex_sender *s) {
    ex_error e = ex_connect_alloc(s, frees_op_rec_receiver(&fr->f), &fr->f.op);
    cr_assert_eq(e.code, 0, "connect: %s", e.msg ? e.msg : "");
}

Test(exec_link_stop, a_child_completing_inside_the_request_completes_after_it) {
    /* Through the extra token and through the receiver's: the receiver
     * frees the operation in its completion, which must come after the
     * request that ran the child's callback is through. */
    for (int which = 0; which < 2; which++) {
        ex_stop_source extra;
        ex_stop_source_init(&extra);
        freeing_rec fr;
        freeing_rec_init(&fr);
        ex_sender *s = ex_link_stop_token(until_stopped(), ex_stop_source_token(&extra));
        connect_freeing(&fr, s);
        ex_start(fr.f.op);
        cr_assert_eq(rec_total(&fr.f.r), 0);
        cr_assert(ex_stop_source_request_stop(which ? &extra : &fr.f.r.stop));
        rec_expect_stopped(&fr.f.r);
        cnt_alloc_expect_balanced(&fr.ca, "the operation's allocator");
        ex_sender_release(s);
    }
    expect_no_leaks();
}

Test(exec_link_stop, values_kept_across_the_request_survive) {
    ex_stop_source extra;
    ex_stop_source_init(&extra);
    freeing_rec fr;
    freeing_rec_init(&fr);
    ex_sender *s = ex_link_stop_token(value_on_stop(NULL), ex_stop_source_token(&extra));
    cr_assert(ex_sender_sigs(s)->flags & EX_SIGS_ERROR, "keeping a tuple may fail");
    connect_freeing(&fr, s);
    ex_start(fr.f.op);
    cr_assert(ex_stop_source_request_stop(&extra));
    cr_assert_eq(fr.f.r.values, 1, "values %d errors %d stops %d (%s)", fr.f.r.values, fr.f.r.errors, fr.f.r.stops,
                 fr.f.r.err.msg ? fr.f.r.err.msg : "");
    cr_assert_str_eq(fr.f.r.text, "tuple#0(int 5, str \"five\")");
    cnt_alloc_expect_balanced(&fr.ca, "the operation's allocator (its tuple copy included)");
    ex_sender_release(s);

    /* An error from inside the request is passed on as well. */
    on_stop_ctx c = { true };
    ex_stop_source_init(&extra);
    freeing_rec_init(&fr);
    s = ex_link_stop_token(value_on_stop(&c), ex_stop_source_token(&extra));
    connect_freeing(&fr, s);
    ex_start(fr.f.op);
    cr_assert(ex_stop_source_request_stop(&extra));
    rec_expect_error(&fr.f.r, EX_EUSER + 9);
    cr_assert_str_eq(fr.f.r.err.msg, "failed on stop");
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_link_stop, failing_to_keep_a_tuple_is_enomem) {
    ex_stop_source extra;
    ex_stop_source_init(&extra);
    freeing_rec fr;
    freeing_rec_init(&fr);
    ex_sender *s = ex_link_stop_token(value_on_stop(NULL), ex_stop_source_token(&extra));
    connect_freeing(&fr, s);
    ex_start(fr.f.op);
    cnt_alloc_fail_nth(&fr.ca, 1);  /* the tuple copy: the only allocation after connect */
    cr_assert(ex_stop_source_request_stop(&extra));
    rec_expect_error(&fr.f.r, EX_ENOMEM);
    cr_assert_not_null(fr.f.r.err.msg);
    cr_assert_eq(atomic_load(&fr.ca.failed), 1);
    cnt_alloc_expect_balanced(&fr.ca, "the operation's allocator");
    ex_sender_release(s);
    expect_no_leaks();
}

/* ------------------------------------------------------------- building */

Test(exec_link_stop, signatures_are_the_childs) {
    ex_stop_source extra;
    ex_stop_source_init(&extra);
    ex_sender *s = ex_link_stop_token(ex_just(ex_int(1)), ex_stop_source_token(&extra));
    expect_sigs(s, EX_SIG(EX_T_INT), EX_SIGS_ERROR | EX_SIGS_STOPPED, 0);
    ex_sender_release(s);
    s = ex_link_stop_token(until_stopped(), ex_stop_source_token(&extra));
    expect_no_value_sigs(s, EX_SIGS_STOPPED);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_link_stop, bad_input_is_an_invalid_sender) {
    ex_stop_source extra;
    ex_stop_source_init(&extra);
    expect_invalid(ex_link_stop_token(NULL, ex_stop_source_token(&extra)), EX_EINVAL);
    ex_sender *child = ex_just();
    test_alloc_fail_next();
    expect_built_enomem(ex_link_stop_token(child, ex_stop_source_token(&extra)));
    expect_no_leaks();
}
