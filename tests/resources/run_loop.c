/* SPDX-License-Identifier: MIT */
/* [exec.run.loop]: run_loop itself.  The other exec_run_loop files:
 * run_loop_scheduler.c (its scheduler and sender, many producers) and
 * single_thread_context.c (P2300 §1.6.2); the suite is declared here. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resources/run_loop_fixtures.h"

TEST_SUITE(exec_run_loop, 20);

/* --------------------------------------------------------------- run_loop */

Test(exec_run_loop, init_and_destroy_empty) {
    rl_env e;
    rl_env_open(&e, 0);
    cr_assert_eq(ex_run_loop_count(&e.loop), 0);
    cr_assert_not(ex_run_loop_run_one(&e.loop), "an empty loop runs nothing");
    rl_env_close(&e);
}

Test(exec_run_loop, runs_items_in_fifo_order) {
    rl_env e;
    rl_env_open(&e, 10);
    cr_assert_eq(ex_run_loop_count(&e.loop), 10);
    cr_assert_eq(e.log.n, 0, "pushing runs nothing");
    e.it[9].finish = true;
    cr_assert_eq(ex_run_loop_run(&e.loop).code, 0);
    rl_expect_log_in_order(&e.log, 10);
    for (int i = 0; i < 10; i++) cr_assert_eq(e.it[i].thread, test_thread_id(), "items run on the thread calling run()");
    cr_assert_eq(ex_run_loop_count(&e.loop), 0);
    rl_env_close(&e);
}

Test(exec_run_loop, items_pushed_while_running_run_in_order) {
    /* item 0 pushes 2 and 3 from inside the loop; they run after item 1,
     * which was already queued. */
    rl_env e;
    rl_env_open(&e, 2);
    e.it[3].finish = true;
    e.it[0].push[0] = &e.it[2];
    e.it[0].push[1] = &e.it[3];
    cr_assert_eq(ex_run_loop_count(&e.loop), 2);
    cr_assert_eq(ex_run_loop_run(&e.loop).code, 0);
    rl_env_close_after(&e, 4);
}

Test(exec_run_loop, finish_inside_item_still_drains_the_queue) {
    rl_env e;
    rl_env_open(&e, 5);
    e.it[1].finish = true; /* items 2..4 are queued when finish is called */
    cr_assert_eq(ex_run_loop_run(&e.loop).code, 0);
    rl_expect_log_in_order(&e.log, 5); /* run returns only when finishing and the queue is empty */
    cr_assert_eq(ex_run_loop_count(&e.loop), 0);
    rl_env_close(&e);
}

/* A thread runs the loop (with `pushed` items queued first, or pushed
 * after it started); finish() is called once the queue drained and a
 * moment passed: run() must not have returned before. */
static void run_until_finish(int pushed_before, int pushed_after) {
    rl_env e;
    rl_env_open(&e, pushed_before);
    rl_runner rn;
    pthread_t th;
    rl_runner_start(&rn, &e.loop, &th);
    for (int i = pushed_before; i < pushed_before + pushed_after; i++) ex_run_loop_push(&e.loop, &e.it[i].work);
    while (ex_run_loop_count(&e.loop) != 0) sched_yield(); /* the runner executes them meanwhile */
    rl_nap(2000);
    int returned_early = atomic_load(&rn.returned);
    ex_run_loop_finish(&e.loop);
    pthread_join(th, NULL); /* would hang if finish did not wake run() */
    cr_assert_eq(returned_early, 0, "run() on a non-finishing loop returned before finish()");
    cr_assert_eq(rn.result.code, 0);
    int n = pushed_before + pushed_after;
    rl_expect_log_in_order(&e.log, n);
    for (int i = 0; i < n; i++) cr_assert_eq(e.it[i].thread, rn.thread, "items run on the thread running run()");
    rl_env_close(&e);
}

Test(exec_run_loop, run_blocks_until_finish_then_returns) { run_until_finish(0, 3); }

Test(exec_run_loop, finish_on_empty_running_loop_returns) { run_until_finish(0, 0); }

Test(exec_run_loop, finish_before_run_drains_queue_and_returns) {
    rl_env e;
    rl_env_open(&e, 3);
    ex_run_loop_finish(&e.loop);
    cr_assert_eq(e.log.n, 0, "finish runs nothing by itself");
    cr_assert_eq(ex_run_loop_run(&e.loop).code, 0);
    rl_env_close_after(&e, 3);
}

Test(exec_run_loop, finish_before_run_on_empty_loop_returns_at_once) {
    rl_env e;
    rl_env_open(&e, 0);
    ex_run_loop_finish(&e.loop);
    cr_assert_eq(ex_run_loop_run(&e.loop).code, 0);
    rl_env_close(&e);
}

Test(exec_run_loop, run_while_running_is_einval) {
    rl_env e;
    rl_env_open(&e, 2);
    rl_item *a = &e.it[0], *b = &e.it[1];
    a->nested_run = true;
    b->finish = true;
    cr_assert_eq(ex_run_loop_run(&e.loop).code, 0);
    cr_assert_eq(a->nested.code, EX_EINVAL, "run() on a running loop: got %d", a->nested.code);
    cr_assert_not_null(a->nested.msg);
    rl_expect_log_in_order(&e.log, 2); /* the nested run ran nothing; the outer run ran both */
    cr_assert_eq(b->thread, test_thread_id());
    rl_env_close(&e);
}

Test(exec_run_loop, destroy_with_queued_items_is_ebusy) {
    rl_env e;
    rl_env_open(&e, 2);
    ex_error err = ex_run_loop_destroy(&e.loop);
    cr_assert_eq(err.code, EX_EBUSY);
    cr_assert_not_null(err.msg);
    /* nothing was destroyed: the loop still works */
    cr_assert_eq(ex_run_loop_count(&e.loop), 2);
    ex_run_loop_finish(&e.loop);
    cr_assert_eq(ex_run_loop_run(&e.loop).code, 0);
    cr_assert_eq(e.log.n, 2);
    rl_env_close(&e);
}

Test(exec_run_loop, destroy_while_running_is_ebusy) {
    rl_env e;
    rl_env_open(&e, 1);
    e.it[0].try_destroy = true;
    e.it[0].finish = true;
    cr_assert_eq(ex_run_loop_run(&e.loop).code, 0);
    cr_assert_eq(e.it[0].nested.code, EX_EBUSY, "destroying a running loop: got %d", e.it[0].nested.code);
    rl_env_close(&e);
}

/* Issue 17 item 3: after finish() the state says finishing, but run() is
 * still executing an item on another thread; destroy used to return EX_OK
 * there (and destroy the mutex run() was about to lock). */
Test(exec_run_loop, destroy_after_finish_while_run_executes_is_ebusy) {
    rl_env e;
    rl_env_open(&e, 0);
    rl_holder h;
    rl_holder_init(&h, &e.loop);
    ex_run_loop_push(&e.loop, &h.work);
    rl_runner rn;
    pthread_t th;
    rl_runner_start(&rn, &e.loop, &th);
    while (!atomic_load(&h.finished)) sched_yield();
    ex_error err = ex_run_loop_destroy(&e.loop);
    cr_assert_eq(err.code, EX_EBUSY, "destroy while run() executes its last item: got %d", err.code);
    atomic_store(&h.release, 1);
    pthread_join(th, NULL);
    cr_assert_eq(rn.result.code, 0);
    rl_env_close(&e);
}

/* An item that finishes its loop and returns a moment later. */
static void rl_finish_then_nap(ex_work *w) {
    rl_item *it = (rl_item *)(void *)w;
    ex_run_loop_finish(it->loop);
    rl_nap(it->id);
}

/* The same misuse from the side of the memory: the loop lives on the heap
 * and is freed as soon as destroy says EX_OK, so ASan reports any later
 * touch by run(), whether while the last item still executes (even
 * rounds) or on run()'s way out (odd rounds: no nap). */
Test(exec_run_loop, destroy_ok_means_run_no_longer_touches_the_loop) {
    for (int round = 0; round < 40; round++) {
        ex_run_loop *loop = malloc(sizeof *loop);
        cr_assert_not_null(loop);
        test_loop_init(loop);
        rl_item fin;
        rl_item_init(&fin, round % 2 ? 0 : 500, NULL, loop);
        fin.work.execute = rl_finish_then_nap;
        rl_runner rn;
        pthread_t th;
        rl_runner_start(&rn, loop, &th);
        ex_run_loop_push(loop, &fin.work);
        while (ex_run_loop_destroy(loop).code == EX_EBUSY) sched_yield();
        free(loop);
        pthread_join(th, NULL);
        cr_assert_eq(rn.result.code, 0);
    }
    expect_no_leaks();
}

Test(exec_run_loop, run_one) {
    rl_env e;
    rl_env_open(&e, 0);
    cr_assert_not(ex_run_loop_run_one(&e.loop));
    ex_run_loop_push(&e.loop, &e.it[0].work);
    ex_run_loop_push(&e.loop, &e.it[1].work);
    cr_assert(ex_run_loop_run_one(&e.loop));
    cr_assert_eq(e.log.n, 1, "run_one runs exactly one item");
    cr_assert_eq(e.log.ids[0], 0, "the front one");
    cr_assert_eq(ex_run_loop_count(&e.loop), 1);
    cr_assert(ex_run_loop_run_one(&e.loop));
    cr_assert_eq(e.log.n, 2);
    cr_assert_eq(e.log.ids[1], 1);
    cr_assert_not(ex_run_loop_run_one(&e.loop));
    cr_assert_eq(e.log.n, 2);
    cr_assert_eq(ex_run_loop_count(&e.loop), 0);
    rl_env_close(&e);
}

