/* SPDX-License-Identifier: MIT */
/* The strand (cexec/strand.h): create and destroy (argument errors, OOM,
 * EX_EBUSY while busy), the scheduler's properties (equality, forward
 * progress, completion scheduler, executed count) and the allocator it
 * answers.  The other exec_strand files: strand_order.c,
 * strand_post_dispatch.c, strand_underneath.c, strand_pool_destroy.c. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "resources/strand_fixtures.h"

TEST_SUITE(exec_strand, 30);

/* ======================================================= create / destroy */

static const ex_scheduler_vtable no_connect_vt = { .name = "no-connect" };

Test(exec_strand, create_rejects_an_invalid_scheduler_and_a_null_out) {
    ex_strand *s = (ex_strand *)(uintptr_t)0x1;
    ex_scheduler invalid = { NULL, NULL };
    ex_error e = ex_strand_create(invalid, NULL, &s);
    cr_assert_eq(e.code, EX_EINVAL, "invalid scheduler: got %d", e.code);
    cr_assert_not_null(e.msg);
    cr_assert_null(s, "out is set to NULL on failure");

    s = (ex_strand *)(uintptr_t)0x1;
    ex_scheduler no_connect = { &no_connect_vt, NULL };
    e = ex_strand_create(no_connect, NULL, &s);
    cr_assert_eq(e.code, EX_EINVAL, "scheduler without connect_schedule: got %d", e.code);
    cr_assert_null(s);

    e = ex_strand_create(ex_inline_scheduler(), NULL, NULL);
    cr_assert_eq(e.code, EX_EINVAL, "NULL out: got %d", e.code);
    cr_assert_not_null(e.msg);

    cr_assert_eq(test_stats.in_use, 0, "a failed create left %ld block(s)", test_stats.in_use);
    expect_no_leaks();
}

Test(exec_strand, create_out_of_memory_is_enomem_and_leaks_nothing) {
    /* The process default (the test allocator) fails. */
    ex_strand *s = (ex_strand *)(uintptr_t)0x1;
    test_alloc_fail_at(1);
    ex_error e = ex_strand_create(ex_inline_scheduler(), NULL, &s);
    cr_assert_eq(e.code, EX_ENOMEM, "default allocator failing: got %d (%s)", e.code, e.msg ? e.msg : "");
    cr_assert_not_null(e.msg);
    cr_assert_null(s);
    cr_assert_geq(test_stats.failed, 1, "the create did not allocate from the default allocator");
    cr_assert_eq(test_stats.in_use, 0);
    test_alloc_reset();

    /* An explicit allocator fails, over a pool and over the inline scheduler. */
    ex_pool *p = test_pool_new(1);
    cnt_alloc c;
    cnt_alloc_init_over(&c, &test_allocator, "counting");
    ex_scheduler unders[2] = { ex_pool_scheduler(p), ex_inline_scheduler() };
    for (int k = 0; k < 2; k++) {
        atomic_store(&c.fail_next, 1);
        s = (ex_strand *)(uintptr_t)0x1;
        long before = test_alloc_count();
        e = ex_strand_create(unders[k], &c.base, &s);
        cr_assert_eq(e.code, EX_ENOMEM, "under %d: got %d", k, e.code);
        cr_assert_null(s);
        cr_assert_eq(atomic_load(&c.in_use), 0);
        cr_assert_eq(test_alloc_count(), before, "a failing explicit allocator fell back to the default one");
    }
    /* The same call works once memory is back. */
    e = ex_strand_create(ex_pool_scheduler(p), &c.base, &s);
    cr_assert_eq(e.code, 0);
    strand_free_now(s);
    test_pool_free(p);
    expect_no_leaks();
}

Test(exec_strand, create_allocates_from_the_given_allocator_only) {
    cnt_alloc c;
    cnt_alloc_init_over(&c, &test_allocator, "counting");
    long before = test_alloc_count();
    ex_strand *s = NULL;
    cr_assert_eq(ex_strand_create(ex_inline_scheduler(), &c.base, &s).code, 0);
    cr_assert_geq(atomic_load(&c.allocs), 1, "nothing allocated from the given allocator");
    cr_assert_eq(test_alloc_count() - before, atomic_load(&c.allocs),
                 "the strand allocated from the process default as well");
    strand_free_now(s);
    cr_assert_eq(atomic_load(&c.in_use), 0, "destroy did not give the memory back to the given allocator");
    cr_assert_eq(atomic_load(&c.frees), atomic_load(&c.allocs));

    /* NULL: the process default. */
    before = test_alloc_count();
    s = strand_new(ex_inline_scheduler());
    cr_assert_geq(test_alloc_count() - before, 1);
    strand_free_now(s);
    expect_no_leaks();
}

Test(exec_strand, destroy_null_is_a_no_op) {
    ex_error e = ex_strand_destroy(NULL);
    cr_assert_eq(e.code, 0);
    expect_no_leaks();
}

Test(exec_strand, post_and_dispatch_reject_bad_work_items) {
    ex_strand *s = strand_new(ex_inline_scheduler());
    ex_scheduler sch = ex_strand_scheduler(s);
    cr_assert_eq(ex_post(sch, NULL).code, EX_EINVAL);
    cr_assert_eq(ex_dispatch(sch, NULL).code, EX_EINVAL);
    ex_work w = { NULL, NULL, NULL };
    cr_assert_eq(ex_post(sch, &w).code, EX_EINVAL);
    cr_assert_eq(ex_dispatch(sch, &w).code, EX_EINVAL);
    cr_assert_eq(ex_strand_executed(s), 0);
    strand_free_now(s);
    expect_no_leaks();
}

Test(exec_strand, destroy_while_items_are_queued_is_ebusy_and_destroys_nothing) {
    rig r;
    rig_open_held(&r, 3, 1);
    r.o[0].id = 1;  /* between item 0 and item 2 */
    rig_post(&r, 0, 1);
    rig_start(&r, 0, 1);
    for (int k = 0; k < 3; k++) {
        ex_error e = ex_strand_destroy(r.s);
        cr_assert_eq(e.code, EX_EBUSY, "destroy with queued items: got %d", e.code);
        cr_assert_not_null(e.msg);
    }
    /* Nothing was destroyed: the queue and the strand still work. */
    rig_post(&r, 2, 3);
    rig_release(&r);
    EXPECT_INT_REACHES(&r.b->ran, 3);
    expect_log_in_order(r.b, 3);
    cr_assert_eq(atomic_load(&r.it[0].runs), 1);
    cr_assert_eq(atomic_load(&r.o[0].values), 1);
    cr_assert_eq(atomic_load(&r.it[2].runs), 1);
    cr_assert_eq(ex_strand_executed(r.s), 3);
    rig_close(&r, false);
}

/* The item holds the strand until main tried to destroy it. */
static void wait_flag_action(item *it) {
    atomic_int *go = it->arg;
    atomic_store((atomic_int *)it->arg2, 1);
    (void)wait_int_reaches(go, 1);
}

Test(exec_strand, destroy_while_an_item_runs_is_ebusy) {
    rig r;
    rig_open(&r, 2, 2, 0);
    atomic_int go = 0, entered = 0;
    r.it[0].action = wait_flag_action;
    r.it[0].arg = &go;
    r.it[0].arg2 = &entered;
    rig_post(&r, 0, 1);
    EXPECT_INT_REACHES(&entered, 1);
    ex_error e = ex_strand_destroy(r.s);
    cr_assert_eq(e.code, EX_EBUSY, "destroy while an item runs: got %d", e.code);
    cr_assert_not_null(e.msg);
    atomic_store(&go, 1);
    EXPECT_INT_REACHES(&r.it[0].runs, 1);
    rig_post(&r, 1, 2);
    EXPECT_INT_REACHES(&r.b->ran, 2);
    expect_log_in_order(r.b, 2);
    rig_close(&r, false);
}

Test(exec_strand, destroy_while_an_owning_handle_holds_it_is_ebusy) {
    rig r;
    rig_open(&r, 1, 0, 0);
    ex_scheduler h1 = ex_scheduler_retain(r.sch);
    cr_assert(ex_scheduler_equal(h1, r.sch), "retain returns the handle");
    ex_scheduler h2 = ex_scheduler_retain(r.sch);
    ex_error e = ex_strand_destroy(r.s);
    cr_assert_eq(e.code, EX_EBUSY, "two holders: got %d", e.code);
    cr_assert_not_null(e.msg);
    sync_schedule_ok(h1); /* still usable while held */
    ex_scheduler_release(h1);
    e = ex_strand_destroy(r.s);
    cr_assert_eq(e.code, EX_EBUSY, "one holder left: got %d", e.code);
    ex_scheduler_release(h2);
    rig_close(&r, false);
}

Test(exec_strand, strand_is_idle_once_its_only_worker_moved_on) {
    /* On a one-worker pool, work posted after the strand's last item ran
     * runs after the strand's turn ended: the strand must be idle then. */
    ex_pool *p = test_pool_new(1);
    box *b = box_new(p);
    for (int round = 0; round < 50; round++) {
        ex_strand *s = strand_new(ex_pool_scheduler(p));
        sync_schedule_ok(ex_strand_scheduler(s));
        direct d;
        direct_init(&d, b);
        cr_assert_eq(ex_post(ex_pool_scheduler(p), &d.w).code, 0);
        EXPECT_INT_REACHES(&d.runs, 1);
        strand_free_now(s);
    }
    test_pool_free(p);
    free(b);
    expect_no_leaks();
}

/* ======================================================= scheduler properties */

Test(exec_strand, schedulers_compare_by_strand) {
    rig r;
    rig_open(&r, 1, 0, 0);
    ex_strand *b = strand_new(ex_pool_scheduler(r.p));
    ex_scheduler sa = r.sch, sb = ex_strand_scheduler(b), sp = ex_pool_scheduler(r.p);
    cr_assert(ex_scheduler_equal(sa, sa));
    cr_assert(ex_scheduler_equal(sb, sb));
    cr_assert_not(ex_scheduler_equal(sa, sb));
    cr_assert_not(ex_scheduler_equal(sb, sa));
    cr_assert_not(ex_scheduler_equal(sa, sp), "a strand is not its underlying scheduler");
    cr_assert_not(ex_scheduler_equal(sp, sa));
    /* Equal through a value copy as well. */
    ex_value v = ex_sched_value(sa);
    cr_assert(ex_scheduler_equal(v.as.sched, sa));
    strand_free_now(b);
    rig_close(&r, true);
}

Test(exec_strand, forward_progress_and_completion_scheduler) {
    rig r;
    rig_open(&r, 1, 0, 0);
    cr_assert_eq(ex_get_forward_progress_guarantee(r.sch), EX_PROGRESS_WEAKLY_PARALLEL,
                 "one agent at a time: weakly parallel at most");
    ex_strand *si = strand_new(ex_inline_scheduler());
    cr_assert_eq(ex_get_forward_progress_guarantee(ex_strand_scheduler(si)), EX_PROGRESS_WEAKLY_PARALLEL);
    cr_assert_eq(ex_sender_status(r.snd).code, 0);
    ex_scheduler got;
    cr_assert(ex_get_completion_scheduler(r.snd, &ex_key_completion_scheduler_value, &got));
    cr_assert(ex_scheduler_equal(got, r.sch), "the value completion scheduler is the strand");
    strand_free_now(si);
    rig_close(&r, true);
}

Test(exec_strand, executed_counts_items_run_through_the_strand) {
    rig r;
    rig_open(&r, 2, 11, 0);
    cr_assert_eq(ex_strand_executed(r.s), 0);
    rig_post(&r, 0, 10);
    EXPECT_INT_REACHES(&r.b->ran, 10);
    cr_assert_eq(ex_strand_executed(r.s), 10);
    for (int i = 0; i < 5; i++) sync_schedule_ok(r.sch);
    cr_assert_eq(ex_strand_executed(r.s), 15);
    /* dispatch from outside the strand queues the item: it counts too. */
    dispatch_ok(r.sch, &r.it[10]);
    EXPECT_INT_REACHES(&r.it[10].runs, 1);
    cr_assert_eq(ex_strand_executed(r.s), 16);
    /* Another strand counts its own. */
    ex_strand *s2 = strand_new(ex_pool_scheduler(r.p));
    cr_assert_eq(ex_strand_executed(s2), 0);
    strand_free(s2);
    rig_close(&r, false);
}

/* ============================================================== allocator */

typedef struct spawn_env {
    ex_env_pair pair;
} spawn_env;

static ex_error count_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    atomic_fetch_add((atomic_int *)ctx, 1);
    return ex_ok();
}

Test(exec_strand, allocator_is_the_underlying_schedulers) {
    cnt_alloc c;
    cnt_alloc_init_over(&c, &test_allocator, "counting");
    ex_pool_config pc = test_pool_config(2, NULL);
    pc.allocator = &c.base;
    ex_pool *p = test_pool_new_cfg(&pc);
    pc = test_pool_config(1, NULL);
    pc.frames = EX_POOL_FRAMES_PROCESS;  /* a pool without a frame allocator */
    ex_pool *plain = test_pool_new_cfg(&pc);
    ex_run_loop loop;
    test_loop_init(&loop);
    ex_strand *s = strand_new(ex_pool_scheduler(p));
    ex_strand *ss = strand_new(ex_strand_scheduler(s));
    ex_strand *sp = strand_new(ex_pool_scheduler(plain));
    ex_strand *sl = strand_new(ex_run_loop_scheduler(&loop));

    ex_env_pair e;
    ex_env_pair_init(&e, &ex_key_get_scheduler, ex_sched_value(ex_strand_scheduler(s)), ex_env_empty());
    cr_assert_eq(ex_get_allocator(ex_env_of_pair(&e)), &c.base, "a strand over the pool answers the pool's allocator");
    ex_env_pair_init(&e, &ex_key_get_scheduler, ex_sched_value(ex_strand_scheduler(ss)), ex_env_empty());
    cr_assert_eq(ex_get_allocator(ex_env_of_pair(&e)), &c.base, "a strand over that strand: the same");
    ex_env_pair_init(&e, &ex_key_get_scheduler, ex_sched_value(ex_strand_scheduler(sp)), ex_env_empty());
    cr_assert_eq(ex_get_allocator(ex_env_of_pair(&e)), ex_default_allocator(), "a pool without one: the default");
    ex_env_pair_init(&e, &ex_key_get_scheduler, ex_sched_value(ex_strand_scheduler(sl)), ex_env_empty());
    cr_assert_eq(ex_get_allocator(ex_env_of_pair(&e)), ex_default_allocator());

    /* Used for real: spawned work whose environment names the strand gets
     * its operation from the pool's allocator. */
    ex_counting_scope scope;
    cr_assert_eq(ex_counting_scope_init(&scope).code, 0);
    atomic_int ran = 0;
    long before = atomic_load(&c.allocs);
    ex_env_pair_init(&e, &ex_key_get_scheduler, ex_sched_value(ex_strand_scheduler(s)), ex_env_empty());
    for (int i = 0; i < 10; i++) {
        ex_sender *w = ex_then(ex_schedule(ex_strand_scheduler(s)), count_fn, &ran, EX_SIG0, EX_SIG0);
        cr_assert_eq(ex_spawn_env(w, ex_counting_scope_token(&scope), ex_env_of_pair(&e)).code, 0);
    }
    ex_result jr = ex_sync_wait(ex_counting_scope_join(&scope));
    cr_assert_eq(jr.disposition, EX_DISP_VALUE);
    ex_result_destroy(&jr);
    cr_assert_eq(atomic_load(&ran), 10);
    cr_assert_geq(atomic_load(&c.allocs) - before, 10, "spawned operations did not come from the pool's allocator");
    cr_assert_eq(ex_counting_scope_destroy(&scope).code, 0);

    strand_free(ss);
    strand_free(s);
    strand_free_now(sp);
    strand_free_now(sl);
    test_loop_destroy(&loop);
    test_pool_free(plain);
    test_pool_free(p);
    cr_assert_eq(atomic_load(&c.in_use), 0);
    expect_no_leaks();
}

