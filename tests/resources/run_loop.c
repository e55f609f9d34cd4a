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
    ex_run_loop loop;
    cr_assert_eq(ex_run_loop_init(&loop).code, 0);
    cr_assert_eq(ex_run_loop_count(&loop), 0);
    cr_assert_not(ex_run_loop_run_one(&loop), "an empty loop runs nothing");
    cr_assert_eq(ex_run_loop_destroy(&loop).code, 0);
    expect_no_leaks();
}

Test(exec_run_loop, runs_items_in_fifo_order) {
    ex_run_loop loop;
    cr_assert_eq(ex_run_loop_init(&loop).code, 0);
    rl_log log = { { 0 }, 0 };
    rl_item it[10];
    rl_items_push(it, 10, &log, &loop);
    cr_assert_eq(ex_run_loop_count(&loop), 10);
    cr_assert_eq(log.n, 0, "pushing runs nothing");
    it[9].finish = true;
    cr_assert_eq(ex_run_loop_run(&loop).code, 0);
    rl_expect_log_in_order(&log, 10);
    for (int i = 0; i < 10; i++) cr_assert_eq(it[i].thread, test_thread_id(), "items run on the thread calling run()");
    cr_assert_eq(ex_run_loop_count(&loop), 0);
    cr_assert_eq(ex_run_loop_destroy(&loop).code, 0);
    expect_no_leaks();
}

Test(exec_run_loop, items_pushed_while_running_run_in_order) {
    /* item 0 pushes 2 and 3 from inside the loop; they run after item 1,
     * which was already queued. */
    ex_run_loop loop;
    cr_assert_eq(ex_run_loop_init(&loop).code, 0);
    rl_log log = { { 0 }, 0 };
    rl_item a, b, c, d;
    rl_item_init(&a, 0, &log, &loop);
    rl_item_init(&b, 1, &log, &loop);
    rl_item_init(&c, 2, &log, &loop);
    rl_item_init(&d, 3, &log, &loop);
    d.finish = true;
    a.push[0] = &c;
    a.push[1] = &d;
    ex_run_loop_push(&loop, &a.work);
    ex_run_loop_push(&loop, &b.work);
    cr_assert_eq(ex_run_loop_count(&loop), 2);
    cr_assert_eq(ex_run_loop_run(&loop).code, 0);
    rl_expect_log_in_order(&log, 4);
    cr_assert_eq(ex_run_loop_destroy(&loop).code, 0);
    expect_no_leaks();
}

Test(exec_run_loop, finish_inside_item_still_drains_the_queue) {
    ex_run_loop loop;
    cr_assert_eq(ex_run_loop_init(&loop).code, 0);
    rl_log log = { { 0 }, 0 };
    rl_item it[5];
    rl_items_push(it, 5, &log, &loop);
    it[1].finish = true; /* items 2..4 are queued when finish is called */
    cr_assert_eq(ex_run_loop_run(&loop).code, 0);
    rl_expect_log_in_order(&log, 5); /* run returns only when finishing and the queue is empty */
    cr_assert_eq(ex_run_loop_count(&loop), 0);
    cr_assert_eq(ex_run_loop_destroy(&loop).code, 0);
    expect_no_leaks();
}

Test(exec_run_loop, run_blocks_until_finish_then_returns) {
    ex_run_loop loop;
    cr_assert_eq(ex_run_loop_init(&loop).code, 0);
    rl_log log = { { 0 }, 0 };
    rl_runner rn;
    pthread_t th;
    rl_runner_start(&rn, &loop, &th);
    rl_item it[3];
    rl_items_push(it, 3, &log, &loop);
    /* The runner must execute those while waiting; we wait for it. */
    while (ex_run_loop_count(&loop) != 0) sched_yield();
    rl_nap(1000);
    /* queue empty but not finishing: run() must still be waiting */
    int returned_early = atomic_load(&rn.returned);
    ex_run_loop_finish(&loop);
    pthread_join(th, NULL);
    cr_assert_eq(returned_early, 0, "run() returned before finish()");
    cr_assert_eq(rn.result.code, 0);
    rl_expect_log_in_order(&log, 3);
    for (int i = 0; i < 3; i++) cr_assert_eq(it[i].thread, rn.thread, "items run on the thread running run()");
    cr_assert_eq(ex_run_loop_destroy(&loop).code, 0);
    expect_no_leaks();
}

Test(exec_run_loop, finish_on_empty_running_loop_returns) {
    ex_run_loop loop;
    cr_assert_eq(ex_run_loop_init(&loop).code, 0);
    rl_runner rn;
    pthread_t th;
    rl_runner_start(&rn, &loop, &th);
    rl_nap(2000); /* let it block in pop-front */
    int returned_early = atomic_load(&rn.returned);
    ex_run_loop_finish(&loop);
    pthread_join(th, NULL); /* would hang if finish did not wake run() */
    cr_assert_eq(returned_early, 0, "run() on an empty, non-finishing loop must block");
    cr_assert_eq(rn.result.code, 0);
    cr_assert_eq(ex_run_loop_destroy(&loop).code, 0);
    expect_no_leaks();
}

Test(exec_run_loop, finish_before_run_drains_queue_and_returns) {
    ex_run_loop loop;
    cr_assert_eq(ex_run_loop_init(&loop).code, 0);
    rl_log log = { { 0 }, 0 };
    rl_item it[3];
    rl_items_push(it, 3, &log, &loop);
    ex_run_loop_finish(&loop);
    cr_assert_eq(log.n, 0, "finish runs nothing by itself");
    cr_assert_eq(ex_run_loop_run(&loop).code, 0);
    rl_expect_log_in_order(&log, 3);
    cr_assert_eq(ex_run_loop_destroy(&loop).code, 0);
    expect_no_leaks();
}

Test(exec_run_loop, finish_before_run_on_empty_loop_returns_at_once) {
    ex_run_loop loop;
    cr_assert_eq(ex_run_loop_init(&loop).code, 0);
    ex_run_loop_finish(&loop);
    cr_assert_eq(ex_run_loop_run(&loop).code, 0);
    cr_assert_eq(ex_run_loop_destroy(&loop).code, 0);
    expect_no_leaks();
}

Test(exec_run_loop, run_while_running_is_einval) {
    ex_run_loop loop;
    cr_assert_eq(ex_run_loop_init(&loop).code, 0);
    rl_log log = { { 0 }, 0 };
    rl_item a, b;
    rl_item_init(&a, 0, &log, &loop);
    rl_item_init(&b, 1, &log, &loop);
    a.nested_run = true;
    b.finish = true;
    ex_run_loop_push(&loop, &a.work);
    ex_run_loop_push(&loop, &b.work);
    cr_assert_eq(ex_run_loop_run(&loop).code, 0);
    cr_assert_eq(a.nested.code, EX_EINVAL, "run() on a running loop: got %d", a.nested.code);
    cr_assert_not_null(a.nested.msg);
    cr_assert_eq(log.n, 2, "the nested run ran nothing; the outer run ran both");
    cr_assert_eq(log.ids[0], 0);
    cr_assert_eq(log.ids[1], 1);
    cr_assert_eq(b.thread, test_thread_id());
    cr_assert_eq(ex_run_loop_destroy(&loop).code, 0);
    expect_no_leaks();
}

Test(exec_run_loop, destroy_with_queued_items_is_ebusy) {
    ex_run_loop loop;
    cr_assert_eq(ex_run_loop_init(&loop).code, 0);
    rl_log log = { { 0 }, 0 };
    rl_item it[2];
    rl_items_push(it, 2, &log, &loop);
    ex_error e = ex_run_loop_destroy(&loop);
    cr_assert_eq(e.code, EX_EBUSY);
    cr_assert_not_null(e.msg);
    /* nothing was destroyed: the loop still works */
    cr_assert_eq(ex_run_loop_count(&loop), 2);
    ex_run_loop_finish(&loop);
    cr_assert_eq(ex_run_loop_run(&loop).code, 0);
    cr_assert_eq(log.n, 2);
    cr_assert_eq(ex_run_loop_destroy(&loop).code, 0);
    expect_no_leaks();
}

Test(exec_run_loop, destroy_while_running_is_ebusy) {
    ex_run_loop loop;
    cr_assert_eq(ex_run_loop_init(&loop).code, 0);
    rl_item a;
    rl_item_init(&a, 0, NULL, &loop);
    a.try_destroy = true;
    a.finish = true;
    ex_run_loop_push(&loop, &a.work);
    cr_assert_eq(ex_run_loop_run(&loop).code, 0);
    cr_assert_eq(a.nested.code, EX_EBUSY, "destroying a running loop: got %d", a.nested.code);
    cr_assert_eq(ex_run_loop_destroy(&loop).code, 0);
    expect_no_leaks();
}


/* Issue 17 item 3: after finish() the state says finishing, but run() is
 * still executing an item on another thread; destroy used to return EX_OK
 * there (and destroy the mutex run() was about to lock). */
Test(exec_run_loop, destroy_after_finish_while_run_executes_is_ebusy) {
    ex_run_loop loop;
    cr_assert_eq(ex_run_loop_init(&loop).code, 0);
    rl_holder h;
    rl_holder_init(&h, &loop);
    ex_run_loop_push(&loop, &h.work);
    rl_runner rn;
    pthread_t th;
    rl_runner_start(&rn, &loop, &th);
    while (!atomic_load(&h.finished)) sched_yield();
    ex_error e = ex_run_loop_destroy(&loop);
    cr_assert_eq(e.code, EX_EBUSY, "destroy while run() executes its last item: got %d", e.code);
    atomic_store(&h.release, 1);
    pthread_join(th, NULL);
    cr_assert_eq(rn.result.code, 0);
    cr_assert_eq(ex_run_loop_destroy(&loop).code, 0);
    expect_no_leaks();
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
        cr_assert_eq(ex_run_loop_init(loop).code, 0);
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
    ex_run_loop loop;
    cr_assert_eq(ex_run_loop_init(&loop).code, 0);
    rl_log log = { { 0 }, 0 };
    cr_assert_not(ex_run_loop_run_one(&loop));
    rl_item it[2];
    rl_items_push(it, 2, &log, &loop);
    cr_assert(ex_run_loop_run_one(&loop));
    cr_assert_eq(log.n, 1, "run_one runs exactly one item");
    cr_assert_eq(log.ids[0], 0, "the front one");
    cr_assert_eq(ex_run_loop_count(&loop), 1);
    cr_assert(ex_run_loop_run_one(&loop));
    cr_assert_eq(log.n, 2);
    cr_assert_eq(log.ids[1], 1);
    cr_assert_not(ex_run_loop_run_one(&loop));
    cr_assert_eq(log.n, 2);
    cr_assert_eq(ex_run_loop_count(&loop), 0);
    cr_assert_eq(ex_run_loop_destroy(&loop).code, 0);
    expect_no_leaks();
}

