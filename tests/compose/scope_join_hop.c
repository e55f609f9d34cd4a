/* SPDX-License-Identifier: MIT */
/* Counting scopes (cexec/scope.h), where a join completes (C++26
 * [exec.scope.counting], P3149): a join that had to wait completes through
 * a schedule operation on its receiver's scheduler, one that did not wait
 * completes inline (scope_join.c); the hop's error and stopped reach the
 * receiver, a receiver without a scheduler is refused at connect, and the
 * schedule operation lives in the join's operation (or a block allocated
 * at connect).  Suite exec_scope (scope_join.c).
 *
 * The tests hold an association with ex_scope_token_try_associate and end
 * it on the test's thread, so the join's hop is the only thing in flight. */
#include <string.h>

#include "common/owned_errors.h"
#include "compose/compose_fixtures.h"

/* ------------------------------------------------------------- helpers */

/* Is the completion in, or is something queued on the loop? */
typedef struct hop_watch {
    trec *tr;
    ex_run_loop *loop;
} hop_watch;

static bool completed_or_queued(void *ctx) {
    hop_watch *w = ctx;
    return atomic_load(&w->tr->done) || ex_run_loop_count(w->loop) > 0;
}

static ex_error thread_id_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)in, (void)n;
    out[0] = ex_ptr((void *)test_thread_id());
    return ex_ok();
}

/* test_thread_id() of the thread that runs sch's work. */
static const void *thread_of(ex_scheduler sch) {
    ex_result r = ex_sync_wait(ex_then(ex_schedule(sch), thread_id_fn, NULL, EX_SIG0, EX_SIG(EX_T_PTR)));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    const void *id = r.values[0].as.p;
    ex_result_destroy(&r);
    return id;
}

/* A scheduler whose schedule operation completes at start with
 * set_error(EX_EUSER + 3). */
static void failing_start(ex_operation *op) {
    ex_set_error(((test_schedule_op *)op)->r, ex_err(EX_EUSER + 3, "schedule failed"));
}
static const ex_operation_vtable failing_op_vt = { failing_start, NULL };
static ex_error failing_connect(void *self, ex_receiver r, void *storage) {
    (void)self;
    test_schedule_op *o = storage;
    o->base.vt = &failing_op_vt;
    o->r = r;
    return ex_ok();
}
static const ex_scheduler_vtable failing_vt = {
    .name = "test.failing",
    .schedule_op_size = sizeof(test_schedule_op),
    .schedule_op_align = alignof(test_schedule_op),
    .schedule_flags = EX_SIGS_ERROR,
    .connect_schedule = failing_connect,
    .progress = EX_PROGRESS_WEAKLY_PARALLEL,
};

/* A scheduler that completes inline but needs more room than a join keeps
 * for its schedule operation. */
static const ex_scheduler_vtable big_vt = {
    .name = "test.big",
    .schedule_op_size = 4 * EX_SCHEDULE_OP_INLINE,
    .schedule_op_align = alignof(test_schedule_op),
    .schedule_flags = 0,
    .connect_schedule = test_connect_schedule_inline,
    .progress = EX_PROGRESS_WEAKLY_PARALLEL,
};

/* A scheduler whose connect_schedule refuses. */
static ex_error refusing_connect(void *self, ex_receiver r, void *storage) {
    (void)self, (void)r, (void)storage;
    return ex_err(EX_EUSER + 4, "no schedule here");
}
static const ex_scheduler_vtable refusing_vt = {
    .name = "test.refusing",
    .schedule_op_size = sizeof(test_schedule_op),
    .schedule_op_align = alignof(test_schedule_op),
    .connect_schedule = refusing_connect,
    .progress = EX_PROGRESS_WEAKLY_PARALLEL,
};

/* ------------------------------------------------- where a join completes */

/* The last association ends on a pool worker; the join's completion waits
 * on its receiver's run loop and is delivered by whoever runs the loop. */
SCOPE_TEST(a_join_that_waited_completes_on_its_receivers_scheduler, 2) {
    ex_run_loop loop;
    trec tr;
    trec_init(&tr);
    rec_with_scheduler(&tr.r, test_loop_init(&loop));
    work_gate g;
    work_gate_init(&g, p, 7);
    cr_assert_eq(ex_spawn(work_gated(&g, ex_pool_scheduler(p)), sc_token(s)).code, 0);
    work_gate_wait_entered(&g, 1);
    ex_sender *j = sc_join(s);
    inline_run buf;
    ex_operation *op = connect_inline(&buf, j, &tr.r);
    ex_start(op);
    cr_assert_eq(atomic_load(&tr.done), 0, "%s: the join completed with work associated", scope_kind_name(s));
    work_gate_open(&g);
    hop_watch w = { &tr, &loop };
    cr_assert(test_wait_until(completed_or_queued, &w, NULL, TEST_WAIT_LIMIT_S), "the last association never ended");
    cr_assert_eq(atomic_load(&tr.done), 0,
                 "%s: the join completed on the agent that ended the last association, not on its scheduler",
                 scope_kind_name(s));
    cr_assert_eq(ex_run_loop_count(&loop), 1);
    cr_assert(ex_run_loop_run_one(&loop));
    rec_expect_values(&tr.r, 0);
    cr_assert_eq(tr.r.thread, test_thread_id(), "the join completes on the thread that runs its run loop");
    cr_assert_neq(tr.r.thread, g.thread);
    ex_operation_destroy(op);
    ex_sender_release(j);
    test_loop_destroy(&loop);
}

/* The same with a single-thread context: the completion thread is the
 * context's, not the one that ended the last association. */
SCOPE_TEST(a_join_that_waited_completes_on_its_receivers_single_thread_context, 0) {
    ex_single_thread_context c;
    ex_scheduler sch = test_stc_init(&c);
    const void *context_thread = thread_of(sch);
    trec tr;
    trec_init(&tr);
    rec_with_scheduler(&tr.r, sch);
    ex_scope_token t = sc_token(s);
    cr_assert(ex_scope_token_try_associate(t));
    ex_sender *j = sc_join(s);
    inline_run buf;
    ex_operation *op = connect_inline(&buf, j, &tr.r);
    ex_start(op);
    cr_assert_eq(atomic_load(&tr.done), 0);
    ex_scope_token_disassociate(t);
    trec_wait_done(&tr);
    rec_expect_values(&tr.r, 0);
    cr_assert_eq(tr.r.thread, context_thread, "%s: the join completed on %p, not on the context's thread %p",
                 scope_kind_name(s), tr.r.thread, context_thread);
    cr_assert_neq(tr.r.thread, test_thread_id());
    ex_operation_destroy(op);
    ex_sender_release(j);
    test_stc_destroy(&c);
}

/* ------------------------------------------------ outcomes through the hop */

/* The scope's first error, held for a waiting join, arrives after the hop. */
Test(exec_scope, the_first_error_of_spawned_work_arrives_through_the_hop) {
    owned_errors_reset();
    ex_counting_scope sc;
    cr_assert_eq(ex_counting_scope_init(&sc).code, 0);
    ex_scope_token t = ex_counting_scope_token(&sc);
    cr_assert(ex_scope_token_try_associate(t));
    cr_assert_eq(ex_spawn(ex_just_error(owned_error(1)), t).code, 0);
    ex_run_loop loop;
    rec rc;
    rec_init(&rc);
    rec_with_scheduler(&rc, test_loop_init(&loop));
    ex_sender *j = ex_counting_scope_join(&sc);
    inline_run buf;
    ex_operation *op = connect_inline(&buf, j, &rc);
    ex_start(op);
    ex_scope_token_disassociate(t);
    cr_assert_eq(rec_total(&rc), 0, "the join completed before its hop");
    cr_assert(ex_run_loop_run_one(&loop));
    rec_expect_error(&rc, EX_EUSER + 1);
    cr_assert_eq(owned_error_id(rc.err), 1);
    ex_error_release(rc.err);
    ex_operation_destroy(op);
    ex_sender_release(j);
    test_loop_destroy(&loop);
    cr_assert_eq(ex_counting_scope_destroy(&sc).code, 0);
    expect_owned_all_released(1);
}

/* A schedule that fails: its error, and the scope's error this join held is
 * released.  A join that does not wait never schedules. */
Test(exec_scope, a_failing_hop_delivers_its_error) {
    owned_errors_reset();
    ex_counting_scope sc;
    cr_assert_eq(ex_counting_scope_init(&sc).code, 0);
    ex_scope_token t = ex_counting_scope_token(&sc);
    cr_assert(ex_scope_token_try_associate(t));
    cr_assert_eq(ex_spawn(ex_just_error(owned_error(2)), t).code, 0);
    rec rc;
    rec_init(&rc);
    rec_with_scheduler(&rc, (ex_scheduler){ &failing_vt, NULL });
    ex_sender *j = ex_counting_scope_join(&sc);
    inline_run buf;
    ex_operation *op = connect_inline(&buf, j, &rc);
    ex_start(op);
    cr_assert_eq(rec_total(&rc), 0);
    ex_scope_token_disassociate(t);
    rec_expect_error(&rc, EX_EUSER + 3);
    cr_assert_str_eq(rc.err.msg, "schedule failed");
    ex_operation_destroy(op);

    /* Joined now: the next join does not wait, so nothing is scheduled. */
    rec_init(&rc);
    rec_with_scheduler(&rc, (ex_scheduler){ &failing_vt, NULL });
    op = connect_inline(&buf, j, &rc);
    ex_start(op);
    rec_expect_error(&rc, EX_EUSER + 1);
    cr_assert_eq(owned_error_id(rc.err), 2);
    ex_error_release(rc.err);
    ex_operation_destroy(op);
    ex_sender_release(j);
    cr_assert_eq(ex_counting_scope_destroy(&sc).code, 0);
    expect_owned_all_released(1);
}

/* A scheduler whose connect asks the receiver for its environment (here:
 * the stop token), as any scheduler may: the join's hop must answer with
 * the join's receiver's environment already at connect. */
static ex_error env_reading_connect(void *self, ex_receiver r, void *storage) {
    (void)ex_stop_token_stop_requested(ex_get_stop_token(ex_receiver_env(r)));
    return test_connect_schedule_inline(self, r, storage);
}
static const ex_scheduler_vtable env_reading_vt = {
    .name = "test.env-reading",
    .schedule_op_size = sizeof(test_schedule_op),
    .schedule_op_align = alignof(test_schedule_op),
    .connect_schedule = env_reading_connect,
    .progress = EX_PROGRESS_WEAKLY_PARALLEL,
};

Test(exec_scope, a_scheduler_may_read_the_hops_environment_at_connect) {
    ex_counting_scope sc;
    cr_assert_eq(ex_counting_scope_init(&sc).code, 0);
    ex_scope_token t = ex_counting_scope_token(&sc);
    cr_assert(ex_scope_token_try_associate(t));
    rec rc;
    rec_init(&rc);
    rec_with_scheduler(&rc, (ex_scheduler){ &env_reading_vt, NULL });
    ex_sender *j = ex_counting_scope_join(&sc);
    inline_run buf;
    memset(&buf, 0xa5, sizeof buf);  /* what the hop would read before its receiver is set */
    ex_operation *op = connect_inline(&buf, j, &rc);
    ex_start(op);
    ex_scope_token_disassociate(t);
    rec_expect_values(&rc, 0);
    ex_operation_destroy(op);
    ex_sender_release(j);
    cr_assert_eq(ex_counting_scope_destroy(&sc).code, 0);
    expect_no_leaks();
}

/* The hop sees the receiver's stop token: a run loop's schedule completes
 * stopped when stop was requested.  (The wait itself is not cancelled: the
 * join completes only once the last association ended.) */
Test(exec_scope, a_stop_request_reaches_the_hop) {
    owned_errors_reset();
    ex_simple_counting_scope sc;
    cr_assert_eq(ex_simple_counting_scope_init(&sc).code, 0);
    ex_scope_token t = ex_simple_counting_scope_token(&sc);
    cr_assert(ex_scope_token_try_associate(t));
    cr_assert_eq(ex_spawn(ex_just_error(owned_error(3)), t).code, 0);
    ex_run_loop loop;
    rec rc;
    rec_init_stop_requested(&rc);
    rec_with_scheduler(&rc, test_loop_init(&loop));
    ex_sender *j = ex_simple_counting_scope_join(&sc);
    inline_run buf;
    ex_operation *op = connect_inline(&buf, j, &rc);
    ex_start(op);
    cr_assert_eq(rec_total(&rc), 0, "a stop request does not end the join's wait");
    ex_scope_token_disassociate(t);
    cr_assert_eq(rec_total(&rc), 0);
    cr_assert(ex_run_loop_run_one(&loop));
    rec_expect_stopped(&rc);
    ex_operation_destroy(op);
    ex_sender_release(j);
    test_loop_destroy(&loop);
    cr_assert_eq(ex_simple_counting_scope_destroy(&sc).code, 0);
    expect_owned_all_released(1);
}

/* ------------------------------------------------------------- connect */

/* Without get_scheduler the join cannot complete as P3149 says: connect
 * refuses it (C++ does not compile it). */
SCOPE_TEST(a_receiver_without_a_scheduler_is_refused_at_connect, 0) {
    rec rc;
    rec_init(&rc);
    ex_sender *j = sc_join(s);
    inline_run buf;
    ex_operation *op = (ex_operation *)&buf;
    ex_error e = ex_connect(j, rec_receiver(&rc), buf.buf, sizeof buf.buf, &op);
    expect_connect_refused(e, op);
    cr_assert(strstr(e.msg, "get_scheduler") != NULL, "message: %s", e.msg);
    cr_assert_eq(rec_total(&rc), 0);
    expect_nothing_associated(s, "a refused join");
    ex_sender_release(j);
}

SCOPE_TEST(the_schedulers_connect_error_is_the_joins, 0) {
    rec rc;
    rec_init(&rc);
    rec_with_scheduler(&rc, (ex_scheduler){ &refusing_vt, NULL });
    ex_sender *j = sc_join(s);
    inline_run buf;
    ex_operation *op = (ex_operation *)&buf;
    ex_error e = ex_connect(j, rec_receiver(&rc), buf.buf, sizeof buf.buf, &op);
    cr_assert_eq(e.code, EX_EUSER + 4, "connect: %d", e.code);
    cr_assert_null(op);
    ex_sender_release(j);
}

/* A schedule operation larger than the join keeps room for comes from the
 * environment's allocator when the join is connected (EX_ENOMEM there), so
 * completing allocates nothing. */
SCOPE_TEST(a_large_schedule_operation_is_allocated_at_connect, 0) {
    ex_sender *j = sc_join(s);
    cr_assert_lt(ex_sender_op_size(j), big_vt.schedule_op_size, "the join's room would hold it");
    inline_run buf;
    rec rc;
    rec_init(&rc);
    rec_with_scheduler(&rc, (ex_scheduler){ &big_vt, NULL });
    ex_operation *op = (ex_operation *)&buf;
    test_alloc_fail_next();
    ex_error e = ex_connect(j, rec_receiver(&rc), buf.buf, sizeof buf.buf, &op);
    cr_assert_eq(e.code, EX_ENOMEM, "connect with the allocation failing: %d", e.code);
    cr_assert_null(op);
    expect_injected_failure_hit();

    ex_scope_token t = sc_token(s);
    cr_assert(ex_scope_token_try_associate(t));
    long before = test_alloc_count();
    op = connect_inline(&buf, j, &rc);
    cr_assert_eq(test_alloc_count(), before + 1, "the schedule operation is allocated at connect");
    ex_start(op);
    ex_scope_token_disassociate(t);
    cr_assert_eq(test_alloc_count(), before + 1, "completing allocated");
    rec_expect_values(&rc, 0);
    ex_operation_destroy(op);
    ex_sender_release(j);
}

/* Value, the first error, and the scheduler's error or stopped (known only
 * at connect). */
SCOPE_TEST(the_join_declares_value_error_and_stopped, 0) {
    ex_sender *j = sc_join(s);
    expect_sigs(j, EX_SIG0, EX_SIGS_ERROR | EX_SIGS_STOPPED | EX_SIGS_DYNAMIC, EX_SIGS_ERROR | EX_SIGS_STOPPED);
    ex_sender_release(j);
}
