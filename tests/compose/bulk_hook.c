/* SPDX-License-Identifier: MIT */
/* [exec.bulk] through a resource's own bulk hook: the completion
 * scheduler's hook is used, before the environment's scheduler. */
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#include "compose/compose_fixtures.h"

/* =========================================== a resource's own bulk hook */

/* An inline-ish resource: schedule completes inside start; its bulk hook
 * runs the upper half of the index space before the lower half, so the
 * order f sees proves the hook ran. */
typedef struct rev_res {
    atomic_int bulk_calls;
    size_t last_shape, last_grain;
    ex_execution_policy last_policy;
    bool last_unchunked;
} rev_res;

static void rev_bulk(void *self, ex_bulk_job *job) {
    rev_res *res = self;
    atomic_fetch_add(&res->bulk_calls, 1);
    res->last_shape = job->shape;
    res->last_grain = job->grain;
    res->last_policy = job->policy;
    res->last_unchunked = job->unchunked;
    size_t half = job->shape / 2;
    if (ex_bulk_job_run(job, half, job->shape)) (void)ex_bulk_job_run(job, 0, half);
    ex_bulk_job_done(job);
}

static const ex_bulk_domain rev_domain = EX_BULK_DOMAIN("reverse_halves", NULL, rev_bulk);

static const ex_scheduler_vtable rev_vt = {
    .name = "reverse_halves",
    .schedule_op_size = sizeof(test_schedule_op),
    .schedule_op_align = alignof(test_schedule_op),
    .connect_schedule = test_connect_schedule_inline,
    .progress = EX_PROGRESS_WEAKLY_PARALLEL,
    .domain = &rev_domain.domain,
};

static ex_error chunk_fn_unused(void *ctx, size_t begin, size_t end, const ex_value *v, size_t n) {
    (void)ctx, (void)begin, (void)end, (void)v, (void)n;
    return ex_ok();
}

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

/* A fresh resource and a recording body for it. */
static void hook_init(rev_res *res, seq_ctx *c) {
    memset(res, 0, sizeof *res);
    seq_init(c);
}

Test(exec_bulk, custom_bulk_hook_of_the_completion_scheduler_is_used) {
    rev_res res;
    seq_ctx c;
    hook_init(&res, &c);
    rec rc;
    rec_init(&rc);
    inline_run ir;
    ex_sender *s = ex_bulk_grain(ex_schedule(rev_sched(&res)), EX_PAR, 10, 3, seq_fn, &c);
    run_inline(&ir, s, &rc);
    cr_assert_eq(rc.values, 1);
    cr_assert_eq(rc.thread, test_thread_id());
    cr_assert_eq(atomic_load(&res.bulk_calls), 1, "the resource's bulk hook was not used");
    cr_assert_eq(res.last_shape, 10);
    cr_assert_eq(res.last_grain, 3);
    cr_assert_eq(res.last_policy, EX_PAR);
    cr_assert(!res.last_unchunked);
    expect_reversed_halves(&c, 10);
    ex_operation_destroy(ir.op);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_bulk, custom_bulk_hook_with_values_from_continues_on) {
    rev_res res;
    seq_ctx c;
    hook_init(&res, &c);
    ex_result r = ex_sync_wait(ex_bulk(ex_continues_on(ex_just(ex_int(21), ex_str("y")), rev_sched(&res)), EX_PAR, 8, seq_fn, &c));
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
    seq_ctx c;
    hook_init(&res, &c);
    c.fail_at = 7;  /* in the upper half, which runs first */
    c.fail_err = ex_err(EX_EUSER + 7, "seven");
    ex_result r = ex_sync_wait(ex_bulk(ex_schedule(rev_sched(&res)), EX_PAR, 10, seq_fn, &c));
    expect_error(&r, EX_EUSER + 7);
    cr_assert_str_eq(r.error.msg, "seven");
    cr_assert_eq(c.calls, 3, "indices 5, 6, 7 ran, then nothing (ran %zu)", c.calls);
    for (size_t k = 0; k < 3; k++) cr_assert_eq(c.order[k], 5 + k);
    expect_no_leaks();
}

Test(exec_bulk, custom_bulk_hook_from_the_environment) {
    rev_res res;
    seq_ctx c;
    hook_init(&res, &c);
    rec rc;
    rec_init(&rc);
    rec_with_scheduler(&rc, rev_sched(&res));
    inline_run ir;
    ex_sender *s = ex_bulk(ex_just(ex_int(2)), EX_PAR, 6, seq_fn, &c);
    run_inline(&ir, s, &rc);
    cr_assert_eq(rc.values, 1);
    cr_assert_eq(rc.v[0].as.i, 2);
    cr_assert_eq(atomic_load(&res.bulk_calls), 1);
    expect_reversed_halves(&c, 6);
    ex_operation_destroy(ir.op);
    ex_sender_release(s);
    expect_no_leaks();
}

POOL_TEST(exec_bulk, completion_scheduler_wins_over_the_environment, 2) {
    rev_res res;
    seq_ctx c;
    hook_init(&res, &c);
    /* Child completes on the custom resource; the environment names the pool. */
    arec ar;
    arec_init(&ar, p);
    arec_with_scheduler(&ar, ex_pool_scheduler(p));
    ex_sender *s = ex_bulk(ex_schedule(rev_sched(&res)), EX_PAR, 10, seq_fn, &c);
    arec_run_to_end(s, &ar);
    cr_assert_eq(atomic_load(&ar.values), 1);
    cr_assert_eq(atomic_load(&res.bulk_calls), 1);
    expect_reversed_halves(&c, 10);

    /* Child completes on the pool; the environment names the custom one. */
    par_ctx pc;
    par_init(&pc, p, 1000);
    arec ar2;
    arec_init(&ar2, p);
    arec_with_scheduler(&ar2, rev_sched(&res));
    s = ex_bulk(ex_schedule(ex_pool_scheduler(p)), EX_PAR, 1000, par_fn, &pc);
    arec_run_to_end(s, &ar2);
    cr_assert_eq(atomic_load(&ar2.values), 1);
    cr_assert_eq(atomic_load(&res.bulk_calls), 1, "the custom hook ran although the child completes on the pool");
    par_expect_each_once(&pc);
    cr_assert_eq(atomic_load(&pc.off_pool), 0);
    par_fini(&pc);
}

/* ------------------------------------------- the policy reaches the hook */

Test(exec_bulk, the_hook_gets_the_policy_and_whether_the_bulk_is_unchunked) {
    static const ex_execution_policy all[] = { EX_SEQ, EX_PAR, EX_PAR_UNSEQ, EX_UNSEQ };
    for (size_t q = 0; q < 4; q++) {
        rev_res res;
        seq_ctx c;
        hook_init(&res, &c);
        ex_result r = ex_sync_wait(ex_bulk_chunked(ex_schedule(rev_sched(&res)), all[q], 8, 2, chunk_fn_unused, NULL));
        expect_value_result(&r);
        cr_assert_eq(res.last_policy, all[q]);
        cr_assert(!res.last_unchunked);
        cr_assert_eq(res.last_grain, 2);
        ex_result_destroy(&r);

        r = ex_sync_wait(ex_bulk_unchunked(ex_schedule(rev_sched(&res)), all[q], 6, seq_fn, &c));
        expect_value_result(&r);
        cr_assert_eq(atomic_load(&res.bulk_calls), 2);
        cr_assert_eq(res.last_policy, all[q]);
        cr_assert(res.last_unchunked, "the hook was not told the bulk is unchunked");
        cr_assert_eq(res.last_grain, 1, "an unchunked bulk asks for one index a chunk");
        expect_reversed_halves(&c, 6);
        ex_result_destroy(&r);
    }
    expect_no_leaks();
}

/* ------------------------- concurrent forward progress without a hook */

/* A resource that promises concurrent forward progress (P2300) but does
 * not customise bulk: bulk_unchunked's sequential loop would break the
 * promise, so connect refuses it; the other builders run their loop. */
static const ex_scheduler_vtable concurrent_vt = {
    .name = "concurrent_without_bulk",
    .schedule_op_size = sizeof(test_schedule_op),
    .schedule_op_align = alignof(test_schedule_op),
    .connect_schedule = test_connect_schedule_inline,
    .progress = EX_PROGRESS_CONCURRENT,
};

static ex_scheduler concurrent_sched(void) {
    ex_scheduler s = { &concurrent_vt, NULL };
    return s;
}

static void expect_unchunked_refused(ex_sender *s, rec *rc, const char *msg) {
    inline_run ir;
    ex_operation *op = NULL;
    ex_error e = ex_connect(s, rec_receiver(rc), ir.buf, sizeof ir.buf, &op);
    cr_assert_eq(e.code, EX_EINVAL, "connect gave %d", e.code);
    cr_assert_str_eq(e.msg, msg);
    cr_assert_eq(rec_total(rc), 0);
    ex_sender_release(s);
}

Test(exec_bulk, unchunked_on_a_concurrent_scheduler_without_a_hook_is_refused) {
    seq_ctx c;
    seq_init(&c);
    rec rc;
    rec_init(&rc);
    /* The child completes on it. */
    expect_unchunked_refused(ex_bulk_unchunked(ex_schedule(concurrent_sched()), EX_PAR, 4, seq_fn, &c), &rc,
                             "ex_bulk_unchunked(seq_fn): the scheduler promises concurrent forward progress but "
                             "does not customise bulk");
    /* The receiver's environment names it. */
    rec_with_scheduler(&rc, concurrent_sched());
    expect_unchunked_refused(ex_bulk_unchunked_named(ex_just(), EX_SEQ, 4, seq_fn, &c, "rows"), &rc,
                             "ex_bulk_unchunked(rows): the scheduler promises concurrent forward progress but "
                             "does not customise bulk");
    cr_assert_eq(c.calls, 0);

    /* ex_bulk promises no agent per index: its loop runs. */
    ex_result r = ex_sync_wait(ex_bulk(ex_schedule(concurrent_sched()), EX_PAR, 4, seq_fn, &c));
    expect_value_result(&r);
    cr_assert_eq(c.calls, 4);
    ex_result_destroy(&r);
    expect_no_leaks();
}
