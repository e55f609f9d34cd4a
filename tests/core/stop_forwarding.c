/* Adaptors that forward a stop request to a stop source they own (when_all,
 * split, spawn_future) while a child completes inside that very request:
 * the completion may free the adaptor's operation or shared state, and with
 * it the source request_stop is still walking.  Regression tests for a
 * use-after-free found in review; ASan makes a recurrence fail loudly, the
 * plain build checks the results. */
#include <stdalign.h>
#include <stddef.h>
#include <string.h>

#include "common/helpers.h"

TEST_SUITE(stop_forwarding, 10);

/* A leaf that completes set_stopped from inside its stop callback, i.e.
 * inside the request_stop of whoever stops it. */
typedef struct ws_op {
    ex_operation base;
    ex_receiver r;
    ex_stop_callback cb;
} ws_op;

static void ws_on_stop(ex_stop_callback *cb) {
    ws_op *o = (ws_op *)(void *)((char *)cb - offsetof(ws_op, cb));
    ex_stop_callback_deregister(&o->cb);  /* same thread, inside the callback: returns at once */
    ex_set_stopped(o->r);
}

static void ws_start(ex_operation *op) {
    ws_op *o = (ws_op *)op;
    ex_stop_callback_register(&o->cb, ex_get_stop_token(ex_receiver_env(o->r)), ws_on_stop);
}

static const ex_operation_vtable ws_op_vt = { ws_start, NULL };

static ex_error ws_connect(const ex_sender *s, ex_receiver r, void *storage) {
    (void)s;
    ws_op *o = storage;
    o->base.vt = &ws_op_vt;
    o->r = r;
    o->cb.src = NULL;
    return ex_ok();
}

static const ex_sender_vtable ws_vt = { "wait_for_stop", ws_connect, NULL, NULL };

static ex_sender *wait_for_stop(void) {
    ex_sender *s = ex_sender_alloc(&ws_vt, sizeof(ex_sender));
    cr_assert_not_null(s);
    s->sigs = ex_sigs_none();
    s->sigs.flags = EX_SIGS_STOPPED;
    s->op_size = sizeof(ws_op);
    s->op_align = alignof(ws_op);
    return s;
}

/* A receiver that frees its (allocated) operation when it completes. */
typedef struct self_freeing {
    ex_operation *op;
    ex_env_pair env;
    int stops, others;
} self_freeing;

static void sf_value(void *self, const ex_value *v, size_t n) {
    (void)v, (void)n;
    self_freeing *r = self;
    r->others++;
    ex_operation_free(r->op);
}
static void sf_error(void *self, ex_error e) {
    (void)e;
    self_freeing *r = self;
    r->others++;
    ex_operation_free(r->op);
}
static void sf_stopped(void *self) {
    self_freeing *r = self;
    r->stops++;
    ex_operation_free(r->op);
}
static ex_env sf_env(void *self) { return ex_env_of_pair(&((self_freeing *)self)->env); }
static const ex_receiver_vtable sf_vt = { sf_value, sf_error, sf_stopped, sf_env, NULL };

/* Connects s (released right after connect, as adaptors do) to a
 * self-freeing receiver with its own stop source, starts it, requests
 * stop, and checks it completed stopped exactly once. */
static void stop_inside_request(ex_sender *s) {
    ex_stop_source src;
    ex_stop_source_init(&src);
    self_freeing r;
    memset(&r, 0, sizeof r);
    ex_env_pair_init(&r.env, &ex_key_get_stop_token, ex_token_value(ex_stop_source_token(&src)), ex_env_empty());
    ex_receiver rcv = { &sf_vt, &r };
    cr_assert_eq(ex_connect_alloc(s, rcv, &r.op).code, 0);
    ex_sender_release(s);
    ex_start(r.op);
    cr_assert_eq(r.stops + r.others, 0, "nothing completes before the stop request");
    cr_assert(ex_stop_source_request_stop(&src));
    cr_expect_eq(r.stops, 1, "completed stopped exactly once");
    cr_expect_eq(r.others, 0);
}

Test(stop_forwarding, when_all_freed_inside_its_own_stop_request) {
    stop_inside_request(ex_when_all(wait_for_stop()));
    stop_inside_request(ex_when_all(wait_for_stop(), wait_for_stop(), wait_for_stop()));
    expect_no_leaks();
}

Test(stop_forwarding, split_freed_inside_its_own_stop_request) {
    stop_inside_request(ex_split(wait_for_stop()));
    expect_no_leaks();
}

Test(stop_forwarding, spawn_future_freed_inside_its_own_stop_request) {
    ex_counting_scope cs;
    ex_simple_counting_scope ss;
    cr_assert_eq(ex_counting_scope_init(&cs).code, 0);
    cr_assert_eq(ex_simple_counting_scope_init(&ss).code, 0);
    ex_sender *f = ex_spawn_future(wait_for_stop(), ex_counting_scope_token(&cs));
    /* The future's consumer runs in another scope and is freed when it completes. */
    cr_assert_eq(ex_spawn(f, ex_simple_counting_scope_token(&ss)).code, 0);
    ex_counting_scope_request_stop(&cs);  /* -> the future's stop -> the leaf completes inline */
    ex_result r = ex_sync_wait(ex_counting_scope_join(&cs));
    cr_expect_eq(r.disposition, EX_DISP_VALUE);
    r = ex_sync_wait(ex_simple_counting_scope_join(&ss));
    cr_expect_eq(r.disposition, EX_DISP_VALUE);
    cr_expect_eq(ex_counting_scope_destroy(&cs).code, 0);
    cr_expect_eq(ex_simple_counting_scope_destroy(&ss).code, 0);
    expect_no_leaks();
}

Test(stop_forwarding, spawn_future_consumer_stop_inside_request) {
    ex_simple_counting_scope sc;
    cr_assert_eq(ex_simple_counting_scope_init(&sc).code, 0);
    stop_inside_request(ex_spawn_future(wait_for_stop(), ex_simple_counting_scope_token(&sc)));
    ex_result r = ex_sync_wait(ex_simple_counting_scope_join(&sc));
    cr_expect_eq(r.disposition, EX_DISP_VALUE);
    cr_expect_eq(ex_simple_counting_scope_destroy(&sc).code, 0);
    expect_no_leaks();
}
