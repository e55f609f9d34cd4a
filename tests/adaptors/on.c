/* SPDX-License-Identifier: MIT */
/* [exec.on]: on (both forms), the inline scheduler, and the input checks
 * of every transfer builder.  starts_on.c and continues_on.c test the
 * other transfer adaptors (same suite). */
#include <pthread.h>
#include <stdlib.h>

#include "adaptors/transfer_fixtures.h"

TEST_SUITE(exec_transfer, 10);

/* ------------------------------------------- input checks of the builders */

Test(exec_transfer, transfer_builders_reject_invalid_scheduler) {
    ex_sender *ss[] = {
        ex_schedule(bad_sched),
        ex_starts_on(bad_sched, ex_just(ex_int(1))),
        ex_continues_on(ex_just(ex_int(1)), bad_sched),
        ex_schedule_from(bad_sched, ex_just(ex_int(1))),
        ex_on(bad_sched, ex_just(ex_int(1))),
    };
    for (size_t i = 0; i < sizeof ss / sizeof ss[0]; i++) {
        ex_error e = ex_sender_status(ss[i]);
        cr_assert_eq(e.code, EX_EINVAL, "builder %zu: expected EX_EINVAL, got %d", i, e.code);
        cr_assert_not_null(e.msg);
        expect_sync_error(ss[i], EX_EINVAL);
    }
    expect_no_leaks();
}

static ex_sender *identity_closure(void *ctx, ex_sender *s) {
    int *calls = ctx;
    ++*calls;
    return s;
}

Test(exec_transfer, on_closure_rejects_invalid_scheduler_and_closure) {
    int calls = 0;
    ex_sender *s = ex_on_closure(ex_just(ex_int(1)), bad_sched, identity_closure, &calls);
    expect_invalid(s, EX_EINVAL);
    s = ex_on_closure(ex_just(ex_int(1)), ex_inline_scheduler(), NULL, NULL);
    expect_invalid_status(s, EX_EINVAL);
    cr_assert_eq(calls, 0);
    expect_no_leaks();
}

Test(exec_transfer, transfer_builders_reject_null_child) {
    ex_scheduler sch = ex_inline_scheduler();
    int calls = 0;
    ex_sender *ss[] = {
        ex_starts_on(sch, NULL),
        ex_continues_on(NULL, sch),
        ex_schedule_from(sch, NULL),
        ex_on(sch, NULL),
        ex_on_closure(NULL, sch, identity_closure, &calls),
    };
    for (size_t i = 0; i < sizeof ss / sizeof ss[0]; i++) {
        cr_assert_eq(ex_sender_status(ss[i]).code, EX_EINVAL, "builder %zu", i);
        cr_assert_not_null(ex_sender_status(ss[i]).msg);
        ex_sender_release(ss[i]);
    }
    cr_assert_eq(calls, 0);
    expect_no_leaks();
}

Test(exec_transfer, transfer_builders_propagate_invalid_child) {
    ex_scheduler sch = ex_inline_scheduler();
    ex_sender *ss[] = {
        ex_starts_on(sch, ex_invalid_sender(EX_EUSER + 1, "bad child")),
        ex_continues_on(ex_invalid_sender(EX_EUSER + 1, "bad child"), sch),
        ex_schedule_from(sch, ex_invalid_sender(EX_EUSER + 1, "bad child")),
        ex_on(sch, ex_invalid_sender(EX_EUSER + 1, "bad child")),
    };
    for (size_t i = 0; i < sizeof ss / sizeof ss[0]; i++) {
        cr_assert_eq(ex_sender_status(ss[i]).code, EX_EUSER + 1, "builder %zu", i);
        ex_result r = ex_sync_wait(ss[i]);
        expect_error(&r, EX_EUSER + 1);
        cr_assert_str_eq(r.error.msg, "bad child");
    }
    expect_no_leaks();
}

/* ------------------------------------------------------------------ inline */

Test(exec_transfer, inline_scheduler_schedule_completes_inline_in_start) {
    ex_scheduler sch = ex_inline_scheduler();
    cr_assert(ex_scheduler_valid(sch));
    cr_assert(ex_scheduler_equal(sch, ex_inline_scheduler()));
    ex_sender *s = ex_schedule(sch);
    cr_assert_eq(ex_sender_status(s).code, 0);
    expect_sigs(s, EX_SIG0, EX_SIGS_ERROR | EX_SIGS_STOPPED, 0); /* inline schedule never stops or fails */
    expect_completion_scheduler(s, &ex_key_completion_scheduler_value, sch);
    rec rc;
    rec_init(&rc);
    ex_operation *op;
    void *mem;
    cr_assert_eq(connect_heap(s, &rc, &op, &mem).code, 0);
    cr_assert_eq(rec_total(&rc), 0, "connect does not start");
    ex_start(op);
    cr_assert_eq(rc.values, 1, "completes inside start");
    cr_assert_eq(rc.n, 0);
    cr_assert_eq(rc.thread, test_thread_id());
    cr_assert_eq(rec_total(&rc), 1);
    ex_operation_destroy(op);
    free(mem);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_transfer, inline_scheduler_transfers_complete_inline) {
    rec rc;
    rec_init(&rc);
    ex_sender *s = ex_continues_on(ex_starts_on(ex_inline_scheduler(), ex_just(ex_int(3))), ex_inline_scheduler());
    ex_operation *op = run_start(s, &rc);
    rec_expect_value_int(&rc, 3);
    cr_assert_eq(rc.thread, test_thread_id());
    run_destroy_release(op, s);
    expect_no_leaks();
}

/* -------------------------------------------------------------- on, form 1 */

Test(exec_transfer, on_runs_child_on_sch_and_returns_to_sync_wait_thread) {
    ex_single_thread_context c;
    test_stc_init(&c);
    mark child = { .add = 1 }, after = { .add = 100 };
    ex_sender *s = then_mark(ex_on(ex_single_thread_context_scheduler(&c), then_mark(ex_just(ex_int(1)), &child)), &after);
    expect_sync_int(s, 102);
    cr_assert_eq(child.calls, 1);
    cr_assert_eq(after.calls, 1);
    cr_assert(on_thread(child.tid, &c), "the child runs on sch");
    cr_assert(pthread_equal(after.tid, pthread_self()), "the result comes back to sync_wait's run loop thread");
    test_stc_destroy(&c);
    expect_no_leaks();
}

Test(exec_transfer, on_child_env_get_scheduler_is_sch) {
    expect_child_env_scheduler_is_sch(ex_on);
    expect_no_leaks();
}

Test(exec_transfer, on_returns_to_receiver_env_scheduler) {
    ex_single_thread_context c;
    test_stc_init(&c);
    ex_run_loop loop;
    test_loop_init(&loop);
    rec rc;
    rec_init(&rc);
    rec_with_scheduler(&rc, ex_run_loop_scheduler(&loop));
    mark child = { .add = 2 };
    ex_sender *s = ex_on(ex_single_thread_context_scheduler(&c), then_mark(ex_just(ex_int(40)), &child));
    ex_operation *op = run_start(s, &rc);
    drive_until_complete(&loop, &rc);
    rec_expect_value_int(&rc, 42);
    cr_assert_eq(rc.thread, test_thread_id(), "the completion runs on the loop, driven by this thread");
    cr_assert(on_thread(child.tid, &c));
    run_destroy_release(op, s);
    test_loop_destroy(&loop);
    test_stc_destroy(&c);
    expect_no_leaks();
}

Test(exec_transfer, on_carries_error_and_stopped_back) {
    ex_single_thread_context c;
    ex_scheduler sch = test_stc_init(&c);
    mark m = { 0 };
    expect_sync_int(ex_upon_error(ex_on(sch, ex_just_error(ex_err(EX_EUSER + 4, "on error"))), mark_error, &m,
                                             EX_SIG(EX_T_INT)), EX_EUSER + 4);
    cr_assert(pthread_equal(m.tid, pthread_self()));
    mark m2 = { 0 };
    expect_sync_int(ex_upon_stopped(ex_on(sch, ex_just_stopped()), mark_stopped, &m2, EX_SIG(EX_T_INT)), -1);
    cr_assert(pthread_equal(m2.tid, pthread_self()));
    test_stc_destroy(&c);
    expect_no_leaks();
}

Test(exec_transfer, on_without_scheduler_in_receiver_env_fails_connect) {
    ex_single_thread_context c;
    test_stc_init(&c);
    rec rc;
    rec_init(&rc); /* empty environment */
    mark child = { 0 };
    ex_sender *s = ex_on(ex_single_thread_context_scheduler(&c), then_mark(ex_just(ex_int(1)), &child));
    cr_assert_eq(ex_sender_status(s).code, 0, "the sender itself is well-formed");
    ex_operation *op = (ex_operation *)&rc; /* must be reset */
    void *mem;
    ex_error e = connect_heap(s, &rc, &op, &mem);
    expect_connect_refused(e, op);
    cr_assert_eq(rec_total(&rc), 0);
    cr_assert_eq(child.calls, 0);
    ex_sender_release(s);
    test_stc_destroy(&c);
    expect_no_leaks();
}

/* A scheduler whose schedule operation is larger than EX_SCHEDULE_OP_INLINE:
 * schedules inline.  ex_on must allocate its return hop from the receiver
 * environment's allocator. */
typedef struct big_op {
    test_schedule_op head;
    unsigned char pad[2 * EX_SCHEDULE_OP_INLINE];
} big_op;

static const ex_scheduler_vtable big_vt = {
    .name = "big", .schedule_op_size = sizeof(big_op), .schedule_op_align = _Alignof(big_op),
    .schedule_flags = 0, .connect_schedule = test_connect_schedule_inline, .progress = EX_PROGRESS_WEAKLY_PARALLEL, .equal = NULL,
};

Test(exec_transfer, on_returning_to_scheduler_with_large_schedule_op) {
    ex_single_thread_context c;
    test_stc_init(&c);
    ex_scheduler big = { &big_vt, NULL };
    rec rc;
    rec_init(&rc);
    rec_with_scheduler(&rc, big);
    ex_sender *s = ex_on(ex_single_thread_context_scheduler(&c), ex_just(ex_int(8)));
    ex_operation *op = run_start(s, &rc);
    /* start queued the child on the context; destroying the context drains
     * its queue (the child, then the inline return hop) and joins it. */
    test_stc_destroy(&c);
    cr_assert_eq(rc.values, 1, "errors=%d (%s)", rc.errors, rc.err.msg ? rc.err.msg : "");
    cr_assert_eq(rc.v[0].as.i, 8);
    cr_assert_neq(rc.thread, test_thread_id());
    run_destroy_release(op, s);
    expect_no_leaks();
}

/* -------------------------------------------------------------- on, form 2 */

/* A closure that counts its applications and appends then(fn, &m) with
 * fn's signature (int -> int unless set). */
typedef struct closure_ctx {
    int calls;
    mark m;
    ex_error (*fn)(void *ctx, const ex_value *in, size_t n, ex_value *out);
    ex_sig sig;
} closure_ctx;

static ex_sender *closure_then(void *ctx, ex_sender *s) {
    closure_ctx *c = ctx;
    c->calls++;
    ex_sig sig = c->sig.arity ? c->sig : EX_SIG(EX_T_INT);
    return ex_then(s, c->fn ? c->fn : mark_int, &c->m, sig, sig);
}

/* int x -> int 10x, noting the thread. */
static ex_error times10(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)n;
    mark_here(ctx);
    out[0] = ex_int(in[0].as.i * 10);
    return ex_ok();
}

/* any x -> x, noting the thread. */
static ex_error pass_through(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)n;
    mark_here(ctx);
    out[0] = in[0];
    return ex_ok();
}

Test(exec_transfer, on_closure_runs_closure_on_sch_and_returns_to_env_scheduler) {
    ex_single_thread_context c;
    test_stc_init(&c);
    mark child = { .add = 1 }, after = { .add = 0 };
    closure_ctx cl = { .fn = times10 };
    ex_sender *s = ex_on_closure(then_mark(ex_just(ex_int(2)), &child), ex_single_thread_context_scheduler(&c),
                                 closure_then, &cl);
    cr_assert_eq(ex_sender_status(s).code, 0);
    cr_assert_eq(cl.calls, 1, "the closure is applied once, when the sender is built");
    cr_assert_eq(cl.m.calls, 0, "building starts nothing");
    expect_sync_int(then_mark(s, &after), 30);
    cr_assert_eq(cl.calls, 1);
    cr_assert(pthread_equal(child.tid, pthread_self()), "the child runs where the sender was started");
    cr_assert(on_thread(cl.m.tid, &c), "the closure's work runs on sch");
    cr_assert(pthread_equal(after.tid, pthread_self()), "the result returns to the env's scheduler");
    test_stc_destroy(&c);
    expect_no_leaks();
}

Test(exec_transfer, on_closure_returns_to_childs_completion_scheduler) {
    stc_pair two;
    stc_pair_init(&two);
    mark child = { .add = 4 }, after = { .add = 2 };
    closure_ctx cl = { .fn = times10 };
    ex_sender *ch = ex_then(ex_schedule(two.sa), mark_make_int, &child, EX_SIG0, EX_SIG(EX_T_INT));
    expect_completion_scheduler(ch, &ex_key_completion_scheduler_value, two.sa);
    ex_sender *s = then_mark(ex_on_closure(ch, two.sb, closure_then, &cl), &after);
    expect_sync_int(s, 42);
    cr_assert(on_thread(child.tid, &two.a));
    cr_assert(on_thread(cl.m.tid, &two.b), "the closure's work runs on sch");
    cr_assert(on_thread(after.tid, &two.a), "the result returns to the child's completion scheduler");
    stc_pair_destroy(&two);
    expect_no_leaks();
}

Test(exec_transfer, on_closure_child_env_scheduler_is_the_original) {
    ex_single_thread_context c;
    test_stc_init(&c);
    closure_ctx cl = { .fn = pass_through, .sig = EX_SIG(EX_T_SCHED) };
    /* The original scheduler is the env's (inline, written above); the child
     * sees it as get_scheduler (write-env(child, SCHED-ENV(orig_sch))). */
    ex_sender *s = ex_write_env(ex_on_closure(ex_read_env(&ex_key_get_scheduler, EX_T_SCHED),
                                              ex_single_thread_context_scheduler(&c), closure_then, &cl),
                                &ex_key_get_scheduler, ex_sched_value(ex_inline_scheduler()));
    expect_sync_sched(s, ex_inline_scheduler());
    cr_assert(on_thread(cl.m.tid, &c));
    test_stc_destroy(&c);
    expect_no_leaks();
}

Test(exec_transfer, on_closure_without_any_original_scheduler_fails_connect) {
    ex_single_thread_context c;
    test_stc_init(&c);
    rec rc;
    rec_init(&rc);
    closure_ctx cl = { 0 };
    ex_sender *s = ex_on_closure(ex_just(ex_int(1)), ex_single_thread_context_scheduler(&c), closure_then, &cl);
    ex_operation *op = NULL;
    void *mem;
    ex_error e = connect_heap(s, &rc, &op, &mem);
    expect_connect_refused(e, op);
    cr_assert_eq(rec_total(&rc), 0);
    cr_assert_eq(cl.m.calls, 0);
    ex_sender_release(s);
    test_stc_destroy(&c);
    expect_no_leaks();
}

static ex_sender *closure_null(void *ctx, ex_sender *s) {
    (void)ctx;
    ex_sender_release(s);
    return NULL;
}

Test(exec_transfer, on_closure_returning_null_is_einval) {
    ex_sender *s = ex_on_closure(ex_just(ex_int(1)), ex_inline_scheduler(), closure_null, NULL);
    expect_invalid(s, EX_EINVAL);
    expect_no_leaks();
}
