/* [exec.run.loop]: run_loop, its scheduler and sender; and
 * single_thread_context (P2300 §1.6.2). */
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/helpers.h"

TEST_SUITE(exec_run_loop, 20);

/* ------------------------------------------------------------------ helpers */

static void rl_nap(long usec) {
    struct timespec ts = { usec / 1000000, (usec % 1000000) * 1000 };
    nanosleep(&ts, NULL);
}

/* A work item that appends its id to a shared log. */
typedef struct rl_log {
    int ids[64];
    int n;
} rl_log;

typedef struct rl_item {
    ex_work work;     /* first member */
    int id;
    rl_log *log;
    ex_run_loop *loop;
    /* optional actions */
    bool finish;                 /* call finish() when executed */
    bool nested_run;             /* call run() when executed */
    bool try_destroy;            /* call destroy() when executed */
    struct rl_item *push[2];     /* items to push when executed */
    ex_error nested;             /* what run()/destroy() returned */
    const void *thread;
} rl_item;

static void rl_execute(ex_work *w) {
    rl_item *it = (rl_item *)(void *)w;
    it->thread = test_thread_id();
    if (it->log && it->log->n < 64) it->log->ids[it->log->n++] = it->id;
    if (it->nested_run) it->nested = ex_run_loop_run(it->loop);
    if (it->try_destroy) it->nested = ex_run_loop_destroy(it->loop);
    for (int i = 0; i < 2; i++)
        if (it->push[i]) ex_run_loop_push(it->loop, &it->push[i]->work);
    if (it->finish) ex_run_loop_finish(it->loop);
}

static void rl_item_init(rl_item *it, int id, rl_log *log, ex_run_loop *loop) {
    memset(it, 0, sizeof *it);
    it->work.execute = rl_execute;
    it->id = id;
    it->log = log;
    it->loop = loop;
}

/* A thread that runs a loop. */
typedef struct rl_runner {
    ex_run_loop *loop;
    ex_error result;
    const void *thread;
    atomic_int started;
    atomic_int returned;
} rl_runner;

static void *rl_runner_main(void *arg) {
    rl_runner *r = arg;
    r->thread = test_thread_id();
    atomic_store(&r->started, 1);
    r->result = ex_run_loop_run(r->loop);
    atomic_store(&r->returned, 1);
    return NULL;
}

static void rl_runner_start(rl_runner *r, ex_run_loop *loop, pthread_t *th) {
    r->loop = loop;
    r->result = ex_err(-1, "not run");
    r->thread = NULL;
    atomic_init(&r->started, 0);
    atomic_init(&r->returned, 0);
    cr_assert_eq(pthread_create(th, NULL, rl_runner_main, r), 0);
    while (!atomic_load(&r->started)) sched_yield();
}

/* A connected schedule operation with a recording receiver. */
typedef struct rl_sched_op {
    rec r;
    _Alignas(max_align_t) unsigned char storage[256];
    ex_operation *op;
} rl_sched_op;

static void rl_connect_schedule(rl_sched_op *o, ex_sender *s) {
    cr_assert_leq(ex_sender_op_size(s), sizeof o->storage);
    ex_error e = ex_connect(s, rec_receiver(&o->r), o->storage, sizeof o->storage, &o->op);
    cr_assert_eq(e.code, 0, "connect failed: %s", e.msg ? e.msg : "");
}

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
    for (int i = 0; i < 10; i++) {
        rl_item_init(&it[i], i, &log, &loop);
        ex_run_loop_push(&loop, &it[i].work);
    }
    cr_assert_eq(ex_run_loop_count(&loop), 10);
    cr_assert_eq(log.n, 0, "pushing runs nothing");
    it[9].finish = true;
    cr_assert_eq(ex_run_loop_run(&loop).code, 0);
    cr_assert_eq(log.n, 10);
    for (int i = 0; i < 10; i++) {
        cr_assert_eq(log.ids[i], i, "position %d ran item %d", i, log.ids[i]);
        cr_assert_eq(it[i].thread, test_thread_id(), "items run on the thread calling run()");
    }
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
    cr_assert_eq(log.n, 4);
    for (int i = 0; i < 4; i++) cr_assert_eq(log.ids[i], i);
    cr_assert_eq(ex_run_loop_destroy(&loop).code, 0);
    expect_no_leaks();
}

Test(exec_run_loop, finish_inside_item_still_drains_the_queue) {
    ex_run_loop loop;
    cr_assert_eq(ex_run_loop_init(&loop).code, 0);
    rl_log log = { { 0 }, 0 };
    rl_item it[5];
    for (int i = 0; i < 5; i++) {
        rl_item_init(&it[i], i, &log, &loop);
        ex_run_loop_push(&loop, &it[i].work);
    }
    it[1].finish = true; /* items 2..4 are queued when finish is called */
    cr_assert_eq(ex_run_loop_run(&loop).code, 0);
    cr_assert_eq(log.n, 5, "run returns only when finishing and the queue is empty");
    for (int i = 0; i < 5; i++) cr_assert_eq(log.ids[i], i);
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
    for (int i = 0; i < 3; i++) {
        rl_item_init(&it[i], i, &log, &loop);
        ex_run_loop_push(&loop, &it[i].work);
    }
    /* The runner must execute those while waiting; we wait for it. */
    while (ex_run_loop_count(&loop) != 0) sched_yield();
    rl_nap(1000);
    /* queue empty but not finishing: run() must still be waiting */
    int returned_early = atomic_load(&rn.returned);
    ex_run_loop_finish(&loop);
    pthread_join(th, NULL);
    cr_assert_eq(returned_early, 0, "run() returned before finish()");
    cr_assert_eq(rn.result.code, 0);
    cr_assert_eq(log.n, 3);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(log.ids[i], i);
        cr_assert_eq(it[i].thread, rn.thread, "items run on the thread running run()");
    }
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
    for (int i = 0; i < 3; i++) {
        rl_item_init(&it[i], i, &log, &loop);
        ex_run_loop_push(&loop, &it[i].work);
    }
    ex_run_loop_finish(&loop);
    cr_assert_eq(log.n, 0, "finish runs nothing by itself");
    cr_assert_eq(ex_run_loop_run(&loop).code, 0);
    cr_assert_eq(log.n, 3);
    for (int i = 0; i < 3; i++) cr_assert_eq(log.ids[i], i);
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
    for (int i = 0; i < 2; i++) {
        rl_item_init(&it[i], i, &log, &loop);
        ex_run_loop_push(&loop, &it[i].work);
    }
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

/* An item that finishes its loop (if any), then holds its thread inside it
 * until the test lets it go. */
typedef struct rl_holder {
    ex_work work;   /* first member */
    ex_run_loop *loop;
    atomic_int finished, release;
} rl_holder;

static void rl_holder_execute(ex_work *w) {
    rl_holder *h = (rl_holder *)(void *)w;
    if (h->loop) ex_run_loop_finish(h->loop);
    atomic_store(&h->finished, 1);
    while (!atomic_load(&h->release)) sched_yield();
}

/* Issue 17 item 3: after finish() the state says finishing, but run() is
 * still executing an item on another thread; destroy used to return EX_OK
 * there (and destroy the mutex run() was about to lock). */
Test(exec_run_loop, destroy_after_finish_while_run_executes_is_ebusy) {
    ex_run_loop loop;
    cr_assert_eq(ex_run_loop_init(&loop).code, 0);
    rl_holder h = { .loop = &loop };
    h.work.execute = rl_holder_execute;
    atomic_init(&h.finished, 0);
    atomic_init(&h.release, 0);
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
    for (int i = 0; i < 2; i++) {
        rl_item_init(&it[i], i, &log, &loop);
        ex_run_loop_push(&loop, &it[i].work);
    }
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

/* ------------------------------------------------------------ scheduler */

Test(exec_run_loop, scheduler_equality) {
    ex_run_loop a, b;
    cr_assert_eq(ex_run_loop_init(&a).code, 0);
    cr_assert_eq(ex_run_loop_init(&b).code, 0);
    ex_scheduler sa1 = ex_run_loop_scheduler(&a), sa2 = ex_run_loop_scheduler(&a);
    ex_scheduler sb = ex_run_loop_scheduler(&b);
    cr_assert(ex_scheduler_valid(sa1));
    cr_assert(ex_scheduler_equal(sa1, sa2), "schedulers from the same loop compare equal");
    cr_assert(ex_scheduler_equal(sa1, sa1));
    cr_assert_not(ex_scheduler_equal(sa1, sb), "schedulers from different loops are not equal");
    cr_assert_not(ex_scheduler_equal(sb, sa2));
    cr_assert_not(ex_scheduler_equal(sa1, ex_inline_scheduler()));
    cr_assert_eq(ex_run_loop_destroy(&a).code, 0);
    cr_assert_eq(ex_run_loop_destroy(&b).code, 0);
    expect_no_leaks();
}

Test(exec_run_loop, forward_progress_guarantee) {
    /* run-loop-scheduler defines no get_forward_progress_guarantee query, so
     * [exec.get.forward.progress.guarantee] gives the default. */
    ex_run_loop loop;
    cr_assert_eq(ex_run_loop_init(&loop).code, 0);
    cr_assert_eq(ex_get_forward_progress_guarantee(ex_run_loop_scheduler(&loop)), EX_PROGRESS_WEAKLY_PARALLEL);
    cr_assert_eq(ex_run_loop_destroy(&loop).code, 0);
    expect_no_leaks();
}

Test(exec_run_loop, schedule_sender_attributes_and_signatures) {
    ex_run_loop loop, other;
    cr_assert_eq(ex_run_loop_init(&loop).code, 0);
    cr_assert_eq(ex_run_loop_init(&other).code, 0);
    ex_scheduler sch = ex_run_loop_scheduler(&loop);
    ex_sender *s = ex_schedule(sch);
    cr_assert_eq(ex_sender_status(s).code, 0);
    ex_scheduler got;
    memset(&got, 0, sizeof got);
    cr_assert(ex_get_completion_scheduler(s, &ex_key_completion_scheduler_value, &got));
    cr_assert(ex_scheduler_equal(got, sch), "value completion scheduler is the loop's");
    cr_assert_not(ex_scheduler_equal(got, ex_run_loop_scheduler(&other)));
    memset(&got, 0, sizeof got);
    cr_assert(ex_get_completion_scheduler(s, &ex_key_completion_scheduler_stopped, &got));
    cr_assert(ex_scheduler_equal(got, sch), "stopped completion scheduler is the loop's");
    cr_assert_not(ex_get_completion_scheduler(s, &ex_key_completion_scheduler_error, &got),
                  "no error completion scheduler");
    const ex_sigs *sg = ex_sender_sigs(s);
    cr_assert_eq(sg->nvalues, 1);
    cr_assert_eq(sg->values[0].arity, 0, "set_value()");
    cr_assert(sg->flags & EX_SIGS_STOPPED, "set_stopped() is a completion of the run-loop sender");
    ex_sender_release(s);
    cr_assert_eq(ex_run_loop_destroy(&loop).code, 0);
    cr_assert_eq(ex_run_loop_destroy(&other).code, 0);
    expect_no_leaks();
}

Test(exec_run_loop, schedule_completes_on_the_thread_running_run) {
    ex_run_loop loop;
    cr_assert_eq(ex_run_loop_init(&loop).code, 0);
    ex_sender *s = ex_schedule(ex_run_loop_scheduler(&loop));
    rl_sched_op o;
    rec_init(&o.r);
    rl_connect_schedule(&o, s);
    ex_start(o.op);
    cr_assert_eq(rec_total(&o.r), 0, "start only queues the operation");
    cr_assert_eq(ex_run_loop_count(&loop), 1);
    rl_runner rn;
    pthread_t th;
    rl_runner_start(&rn, &loop, &th);
    while (ex_run_loop_count(&loop) != 0) sched_yield();
    ex_run_loop_finish(&loop);
    pthread_join(th, NULL);
    cr_assert_eq(o.r.values, 1);
    cr_assert_eq(rec_total(&o.r), 1);
    cr_assert_eq(o.r.n, 0);
    cr_assert_eq(o.r.thread, rn.thread, "completes on the thread running run()");
    cr_assert_neq(o.r.thread, test_thread_id());
    ex_operation_destroy(o.op);
    ex_sender_release(s);
    cr_assert_eq(ex_run_loop_destroy(&loop).code, 0);
    expect_no_leaks();
}

Test(exec_run_loop, schedule_sender_is_multi_shot_and_fifo) {
    ex_run_loop loop;
    cr_assert_eq(ex_run_loop_init(&loop).code, 0);
    ex_sender *s = ex_schedule(ex_run_loop_scheduler(&loop));
    rl_sched_op o[3];
    rl_log log = { { 0 }, 0 };
    for (int i = 0; i < 3; i++) {
        rec_init(&o[i].r);
        rl_connect_schedule(&o[i], s);
        ex_start(o[i].op);
    }
    rl_item marker;
    rl_item_init(&marker, 99, &log, &loop);
    marker.finish = true;
    ex_run_loop_push(&loop, &marker.work);
    /* run_one: completes the first operation only */
    cr_assert(ex_run_loop_run_one(&loop));
    cr_assert_eq(o[0].r.values, 1);
    cr_assert_eq(rec_total(&o[1].r), 0);
    cr_assert_eq(rec_total(&o[2].r), 0);
    cr_assert_eq(ex_run_loop_run(&loop).code, 0);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(o[i].r.values, 1);
        cr_assert_eq(rec_total(&o[i].r), 1);
        ex_operation_destroy(o[i].op);
    }
    cr_assert_eq(log.n, 1);
    ex_sender_release(s);
    cr_assert_eq(ex_run_loop_destroy(&loop).code, 0);
    expect_no_leaks();
}

Test(exec_run_loop, stop_requested_before_the_item_runs_gives_set_stopped) {
    ex_run_loop loop;
    cr_assert_eq(ex_run_loop_init(&loop).code, 0);
    ex_sender *s = ex_schedule(ex_run_loop_scheduler(&loop));
    rl_sched_op stopped_before_start, stopped_after_start, not_stopped;
    rec_init(&stopped_before_start.r);
    rec_init(&stopped_after_start.r);
    rec_init(&not_stopped.r);
    rec_with_stop(&stopped_before_start.r);
    rec_with_stop(&stopped_after_start.r);
    rec_with_stop(&not_stopped.r);

    rl_connect_schedule(&stopped_before_start, s);
    rl_connect_schedule(&stopped_after_start, s);
    rl_connect_schedule(&not_stopped, s);
    cr_assert(ex_stop_source_request_stop(&stopped_before_start.r.stop));
    ex_start(stopped_before_start.op);
    ex_start(stopped_after_start.op);
    ex_start(not_stopped.op);
    cr_assert(ex_stop_source_request_stop(&stopped_after_start.r.stop));
    cr_assert_eq(rec_total(&stopped_before_start.r) + rec_total(&stopped_after_start.r), 0,
                 "stop does not complete a queued run-loop operation early");
    ex_run_loop_finish(&loop);
    cr_assert_eq(ex_run_loop_run(&loop).code, 0);

    cr_assert_eq(stopped_before_start.r.stops, 1);
    cr_assert_eq(rec_total(&stopped_before_start.r), 1);
    cr_assert_eq(stopped_after_start.r.stops, 1);
    cr_assert_eq(rec_total(&stopped_after_start.r), 1);
    cr_assert_eq(not_stopped.r.values, 1);
    cr_assert_eq(rec_total(&not_stopped.r), 1);
    cr_assert_eq(stopped_before_start.r.thread, test_thread_id());
    ex_operation_destroy(stopped_before_start.op);
    ex_operation_destroy(stopped_after_start.op);
    ex_operation_destroy(not_stopped.op);
    ex_sender_release(s);
    cr_assert_eq(ex_run_loop_destroy(&loop).code, 0);
    expect_no_leaks();
}

Test(exec_run_loop, schedule_through_sync_wait_from_another_thread) {
    /* A loop run by another thread: sync_wait on its schedule sender. */
    ex_run_loop loop;
    cr_assert_eq(ex_run_loop_init(&loop).code, 0);
    rl_runner rn;
    pthread_t th;
    rl_runner_start(&rn, &loop, &th);
    for (int i = 0; i < 20; i++) {
        ex_result r = ex_sync_wait(ex_schedule(ex_run_loop_scheduler(&loop)));
        cr_assert_eq(r.disposition, EX_DISP_VALUE);
        cr_assert_eq(r.n, 0);
        ex_result_destroy(&r);
    }
    ex_run_loop_finish(&loop);
    pthread_join(th, NULL);
    cr_assert_eq(rn.result.code, 0);
    cr_assert_eq(ex_run_loop_destroy(&loop).code, 0);
    expect_no_leaks();
}

/* ------------------------------------------------------- many producers */

enum { RL_PRODUCERS = 4, RL_PER_PRODUCER = 2000 };

typedef struct rl_pitem {
    ex_work work;   /* first member */
    int producer, seq;
    int runs;
    struct rl_consumer *consumer;
} rl_pitem;

typedef struct rl_consumer {
    int last_seq[RL_PRODUCERS];
    int order_errors;
    long executed;
} rl_consumer;

static void rl_pitem_execute(ex_work *w) {
    rl_pitem *it = (rl_pitem *)(void *)w;
    it->runs++;
    rl_consumer *c = it->consumer;
    if (it->seq != c->last_seq[it->producer] + 1) c->order_errors++;
    c->last_seq[it->producer] = it->seq;
    c->executed++;
}

typedef struct rl_producer {
    ex_run_loop *loop;
    int id;
    rl_pitem *items;       /* raw work items (even producers) */
    rl_sched_op *ops;      /* schedule operations (odd producers) */
    ex_sender *sched;
} rl_producer;

static void *rl_producer_main(void *arg) {
    rl_producer *p = arg;
    for (int i = 0; i < RL_PER_PRODUCER; i++) {
        if (p->items) ex_run_loop_push(p->loop, &p->items[i].work);
        else ex_start(p->ops[i].op);
        if (i % 256 == 0) sched_yield();
    }
    return NULL;
}

Test(exec_run_loop, many_producers_each_item_exactly_once) {
    ex_run_loop loop;
    cr_assert_eq(ex_run_loop_init(&loop).code, 0);
    rl_consumer cons;
    memset(&cons, 0, sizeof cons);
    for (int p = 0; p < RL_PRODUCERS; p++) cons.last_seq[p] = -1;
    ex_sender *sched = ex_schedule(ex_run_loop_scheduler(&loop));

    rl_producer prod[RL_PRODUCERS];
    for (int p = 0; p < RL_PRODUCERS; p++) {
        prod[p].loop = &loop;
        prod[p].id = p;
        prod[p].items = NULL;
        prod[p].ops = NULL;
        prod[p].sched = sched;
        if (p % 2 == 0) {
            prod[p].items = calloc(RL_PER_PRODUCER, sizeof(rl_pitem));
            cr_assert_not_null(prod[p].items);
            for (int i = 0; i < RL_PER_PRODUCER; i++) {
                rl_pitem *it = &prod[p].items[i];
                it->work.execute = rl_pitem_execute;
                it->producer = p;
                it->seq = i;
                it->consumer = &cons;
            }
        } else {
            prod[p].ops = aligned_alloc(alignof(rl_sched_op), RL_PER_PRODUCER * sizeof(rl_sched_op));
            cr_assert_not_null(prod[p].ops);
            for (int i = 0; i < RL_PER_PRODUCER; i++) {
                rec_init(&prod[p].ops[i].r);
                rl_connect_schedule(&prod[p].ops[i], sched);
            }
        }
    }

    rl_runner rn;
    pthread_t consumer;
    rl_runner_start(&rn, &loop, &consumer);
    pthread_t th[RL_PRODUCERS];
    for (int p = 0; p < RL_PRODUCERS; p++) cr_assert_eq(pthread_create(&th[p], NULL, rl_producer_main, &prod[p]), 0);
    for (int p = 0; p < RL_PRODUCERS; p++) pthread_join(th[p], NULL);
    ex_run_loop_finish(&loop);
    pthread_join(consumer, NULL);

    char why[200] = "";
    long completions = 0;
    for (int p = 0; p < RL_PRODUCERS && !why[0]; p++) {
        for (int i = 0; i < RL_PER_PRODUCER && !why[0]; i++) {
            if (prod[p].items) {
                if (prod[p].items[i].runs != 1)
                    snprintf(why, sizeof why, "producer %d item %d ran %d times", p, i, prod[p].items[i].runs);
            } else {
                rec *r = &prod[p].ops[i].r;
                if (r->values != 1 || rec_total(r) != 1)
                    snprintf(why, sizeof why, "producer %d op %d: %d values, %d total", p, i, r->values, rec_total(r));
                else if (r->thread != rn.thread)
                    snprintf(why, sizeof why, "producer %d op %d completed off the loop thread", p, i);
                completions++;
            }
        }
    }
    for (int p = 0; p < RL_PRODUCERS; p++) {
        if (prod[p].ops)
            for (int i = 0; i < RL_PER_PRODUCER; i++) ex_operation_destroy(prod[p].ops[i].op);
        free(prod[p].items);
        free(prod[p].ops);
    }
    ex_sender_release(sched);
    cr_assert_str_empty(why, "%s", why);
    cr_assert_eq(rn.result.code, 0);
    cr_assert_eq(cons.order_errors, 0, "items of one producer ran out of order");
    cr_assert_eq(cons.executed, (long)(RL_PRODUCERS / 2) * RL_PER_PRODUCER);
    cr_assert_eq(completions, (long)(RL_PRODUCERS / 2) * RL_PER_PRODUCER);
    cr_assert_eq(ex_run_loop_count(&loop), 0);
    cr_assert_eq(ex_run_loop_destroy(&loop).code, 0);
    expect_no_leaks();
}

/* ------------------------------------------------- single_thread_context */

typedef struct rl_where {
    pthread_t thread;
    ex_single_thread_context *ctx;
    ex_error destroy_result;
} rl_where;

static ex_error rl_record_thread(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    rl_where *w = ctx;
    w->thread = pthread_self();
    return ex_ok();
}

static ex_error rl_destroy_from_inside(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    rl_where *w = ctx;
    w->thread = pthread_self();
    w->destroy_result = ex_single_thread_context_destroy(w->ctx);
    out[0] = ex_int(w->destroy_result.code);
    return ex_ok();
}

Test(exec_run_loop, single_thread_context_runs_work_on_its_thread) {
    ex_single_thread_context ctx;
    cr_assert_eq(ex_single_thread_context_init(&ctx).code, 0);
    pthread_t tid = ex_single_thread_context_thread_id(&ctx);
    cr_assert_not(pthread_equal(tid, pthread_self()));
    rl_where w;
    memset(&w, 0, sizeof w);
    w.thread = pthread_self();
    ex_result r = ex_sync_wait(
        ex_then(ex_schedule(ex_single_thread_context_scheduler(&ctx)), rl_record_thread, &w, EX_SIG0, EX_SIG0));
    cr_assert_eq(r.disposition, EX_DISP_VALUE, "got %d (%s)", r.disposition, r.error.msg ? r.error.msg : "");
    ex_result_destroy(&r);
    cr_assert(pthread_equal(w.thread, tid), "work runs on the context's thread");
    cr_assert_eq(ex_single_thread_context_destroy(&ctx).code, 0);
    expect_no_leaks();
}

Test(exec_run_loop, single_thread_context_scheduler_properties) {
    ex_single_thread_context a, b;
    cr_assert_eq(ex_single_thread_context_init(&a).code, 0);
    cr_assert_eq(ex_single_thread_context_init(&b).code, 0);
    ex_scheduler sa = ex_single_thread_context_scheduler(&a), sb = ex_single_thread_context_scheduler(&b);
    cr_assert(ex_scheduler_equal(sa, ex_single_thread_context_scheduler(&a)));
    cr_assert_not(ex_scheduler_equal(sa, sb));
    cr_assert_not(pthread_equal(ex_single_thread_context_thread_id(&a), ex_single_thread_context_thread_id(&b)));
    ex_sender *s = ex_schedule(sa);
    ex_scheduler got;
    cr_assert(ex_get_completion_scheduler(s, &ex_key_completion_scheduler_value, &got));
    cr_assert(ex_scheduler_equal(got, sa));
    ex_sender_release(s);
    cr_assert_eq(ex_single_thread_context_destroy(&a).code, 0);
    cr_assert_eq(ex_single_thread_context_destroy(&b).code, 0);
    expect_no_leaks();
}

Test(exec_run_loop, single_thread_context_stopped_channel) {
    ex_single_thread_context ctx;
    cr_assert_eq(ex_single_thread_context_init(&ctx).code, 0);
    ex_sender *s = ex_schedule(ex_single_thread_context_scheduler(&ctx));
    rl_sched_op o;
    rec_init(&o.r);
    rec_with_stop(&o.r);
    rl_connect_schedule(&o, s);
    cr_assert(ex_stop_source_request_stop(&o.r.stop));
    ex_start(o.op);
    cr_assert_eq(ex_single_thread_context_destroy(&ctx).code, 0); /* drains and joins */
    cr_assert_eq(o.r.stops, 1);
    cr_assert_eq(rec_total(&o.r), 1);
    cr_assert_neq(o.r.thread, test_thread_id());
    ex_operation_destroy(o.op);
    ex_sender_release(s);
    expect_no_leaks();
}

static atomic_int rl_slow_done;

static ex_error rl_slow_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)in, (void)n, (void)out;
    rl_nap(20000);
    atomic_store(&rl_slow_done, 1);
    return ex_ok();
}

Test(exec_run_loop, single_thread_context_destroy_drains_and_joins) {
    ex_single_thread_context ctx;
    cr_assert_eq(ex_single_thread_context_init(&ctx).code, 0);
    enum { N = 8 };
    atomic_store(&rl_slow_done, 0);
    ex_sender *s = ex_schedule(ex_single_thread_context_scheduler(&ctx));
    /* a slow item first, so the operations below are still queued at destroy */
    rec slow_rec;
    rec_init(&slow_rec);
    ex_sender *slow_s = ex_then(ex_sender_retain(s), rl_slow_fn, NULL, EX_SIG0, EX_SIG0);
    ex_operation *slow = run_start(slow_s, &slow_rec);
    rl_sched_op o[N];
    for (int i = 0; i < N; i++) {
        rec_init(&o[i].r);
        rl_connect_schedule(&o[i], s);
        ex_start(o[i].op);
    }
    cr_assert_eq(ex_single_thread_context_destroy(&ctx).code, 0);
    /* destroy returned: everything queued ran and the thread is joined */
    cr_assert_eq(atomic_load(&rl_slow_done), 1);
    cr_assert_eq(slow_rec.values, 1);
    for (int i = 0; i < N; i++) {
        cr_assert_eq(o[i].r.values, 1, "op %d was not run before destroy returned", i);
        cr_assert_eq(rec_total(&o[i].r), 1);
        cr_assert_eq(o[i].r.thread, slow_rec.thread);
        cr_assert_neq(o[i].r.thread, test_thread_id());
        ex_operation_destroy(o[i].op);
    }
    run_destroy(slow);
    ex_sender_release(slow_s);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_run_loop, single_thread_context_destroy_from_its_own_thread_is_einval) {
    ex_single_thread_context ctx;
    cr_assert_eq(ex_single_thread_context_init(&ctx).code, 0);
    rl_where w;
    memset(&w, 0, sizeof w);
    w.ctx = &ctx;
    w.destroy_result = ex_err(-1, "not called");
    ex_result r = ex_sync_wait(ex_then(ex_schedule(ex_single_thread_context_scheduler(&ctx)), rl_destroy_from_inside,
                                       &w, EX_SIG0, EX_SIG(EX_T_INT)));
    expect_value_int(&r, EX_EINVAL);
    ex_result_destroy(&r);
    cr_assert(pthread_equal(w.thread, ex_single_thread_context_thread_id(&ctx)));
    cr_assert_eq(w.destroy_result.code, EX_EINVAL);
    cr_assert_not_null(w.destroy_result.msg);
    /* the context still works and is destroyed properly from here */
    memset(&w, 0, sizeof w);
    r = ex_sync_wait(
        ex_then(ex_schedule(ex_single_thread_context_scheduler(&ctx)), rl_record_thread, &w, EX_SIG0, EX_SIG0));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert(pthread_equal(w.thread, ex_single_thread_context_thread_id(&ctx)));
    cr_assert_eq(ex_single_thread_context_destroy(&ctx).code, 0);
    expect_no_leaks();
}

/* --------------------------- single_thread_context shutdown (issue 17, 8) */

/* A posted item that counts its runs; optionally posts a follow-up to its
 * own context when it runs (during destroy: must be refused). */
typedef struct rl_counted {
    ex_work work;   /* first member */
    atomic_int runs;
    ex_single_thread_context *repost_to;
    struct rl_counted *follow_up;
    int repost_code;
} rl_counted;

static void rl_counted_execute(ex_work *w) {
    rl_counted *c = (rl_counted *)(void *)w;
    atomic_fetch_add(&c->runs, 1);
    if (c->repost_to)
        c->repost_code = ex_post(ex_single_thread_context_scheduler(c->repost_to), &c->follow_up->work).code;
}

static void rl_counted_init(rl_counted *c) {
    memset(c, 0, sizeof *c);
    c->work.execute = rl_counted_execute;
    atomic_init(&c->runs, 0);
}

typedef struct rl_destroyer {
    ex_single_thread_context *ctx;
    ex_error result;
    atomic_int done;
} rl_destroyer;

static void *rl_destroyer_main(void *arg) {
    rl_destroyer *d = arg;
    d->result = ex_single_thread_context_destroy(d->ctx);
    atomic_store(&d->done, 1);
    return NULL;
}

/* Destroy has begun while the context's thread is held in an item: from
 * then on post, dispatch and schedule are refused with EX_ESHUTDOWN, and
 * everything accepted before still runs exactly once.  The old destroy
 * accepted every post (and lost those that came after run() returned). */
Test(exec_run_loop, single_thread_context_refuses_work_once_destroy_began) {
    enum { MAX_TRIES = 2000 };
    ex_single_thread_context ctx;
    cr_assert_eq(ex_single_thread_context_init(&ctx).code, 0);
    ex_scheduler sch = ex_single_thread_context_scheduler(&ctx);
    rl_holder h = { .loop = NULL };
    h.work.execute = rl_holder_execute;
    atomic_init(&h.finished, 0);
    atomic_init(&h.release, 0);
    cr_assert_eq(ex_post(sch, &h.work).code, 0);
    while (!atomic_load(&h.finished)) sched_yield();

    rl_counted *items = calloc(MAX_TRIES, sizeof *items);
    cr_assert_not_null(items);
    rl_counted reposter, follow_up;
    rl_counted_init(&reposter);
    rl_counted_init(&follow_up);
    reposter.repost_to = &ctx;
    reposter.follow_up = &follow_up;
    cr_assert_eq(ex_post(sch, &reposter.work).code, 0);

    rl_destroyer d = { .ctx = &ctx };
    atomic_init(&d.done, 0);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, rl_destroyer_main, &d), 0);
    int accepted = 0, code = 0;
    while (accepted < MAX_TRIES) {
        rl_counted_init(&items[accepted]);
        if ((code = ex_post(sch, &items[accepted].work).code)) break;
        accepted++;
        rl_nap(1000);  /* let the destroyer start */
    }
    cr_assert_eq(code, EX_ESHUTDOWN, "post after destroy began: got %d after %d accepted", code, accepted);
    rl_counted late;
    rl_counted_init(&late);
    cr_assert_eq(ex_dispatch(sch, &late.work).code, EX_ESHUTDOWN);
    rec sr;
    rec_init(&sr);
    ex_sender *s = ex_schedule(sch);
    ex_operation *op = run_start(s, &sr);
    cr_assert_eq(sr.errors, 1, "schedule started after destroy began completes at once with an error");
    cr_assert_eq(sr.err.code, EX_ESHUTDOWN);
    cr_assert_eq(rec_total(&sr), 1);
    cr_assert_eq(atomic_load(&d.done), 0, "destroy waits for the held item");

    atomic_store(&h.release, 1);
    pthread_join(th, NULL);
    cr_assert_eq(d.result.code, 0);
    for (int i = 0; i < accepted; i++) cr_assert_eq(atomic_load(&items[i].runs), 1, "accepted item %d", i);
    cr_assert_eq(atomic_load(&items[accepted].runs), 0, "the refused item never runs");
    cr_assert_eq(atomic_load(&late.runs), 0);
    cr_assert_eq(atomic_load(&reposter.runs), 1);
    cr_assert_eq(reposter.repost_code, EX_ESHUTDOWN, "work submitted by the drain is refused");
    cr_assert_eq(atomic_load(&follow_up.runs), 0);
    cr_assert_eq(ex_single_thread_context_destroy(&ctx).code, EX_EINVAL, "a second destroy does nothing");
    run_destroy(op);
    ex_sender_release(s);
    free(items);
    expect_no_leaks();
}

/* Submitters post as fast as they can while destroy runs: destroy returns
 * EX_OK every round and every accepted item ran exactly once (the old
 * destroy returned EX_EBUSY in about one round in five and never ran the
 * items pushed after its thread's run() returned). */
enum { RL_RACE_ROUNDS = 60, RL_RACE_SUBMITTERS = 2, RL_RACE_MAX = 20000 };

typedef struct rl_submitter {
    ex_single_thread_context *ctx;
    rl_counted *items;
    int accepted;
    int last_code;
} rl_submitter;

static void *rl_submitter_main(void *arg) {
    rl_submitter *s = arg;
    ex_scheduler sch = ex_single_thread_context_scheduler(s->ctx);
    for (s->accepted = 0; s->accepted < RL_RACE_MAX; s->accepted++) {
        rl_counted_init(&s->items[s->accepted]);
        if ((s->last_code = ex_post(sch, &s->items[s->accepted].work).code)) break;
    }
    return NULL;
}

Test(exec_run_loop, single_thread_context_destroy_racing_submitters_loses_nothing) {
    rl_submitter sub[RL_RACE_SUBMITTERS];
    for (int i = 0; i < RL_RACE_SUBMITTERS; i++) {
        sub[i].items = calloc(RL_RACE_MAX, sizeof(rl_counted));
        cr_assert_not_null(sub[i].items);
    }
    for (int round = 0; round < RL_RACE_ROUNDS; round++) {
        ex_single_thread_context ctx;
        cr_assert_eq(ex_single_thread_context_init(&ctx).code, 0);
        pthread_t th[RL_RACE_SUBMITTERS];
        for (int i = 0; i < RL_RACE_SUBMITTERS; i++) {
            sub[i].ctx = &ctx;
            cr_assert_eq(pthread_create(&th[i], NULL, rl_submitter_main, &sub[i]), 0);
        }
        for (int k = 0; k < round % 8; k++) sched_yield();
        ex_error e = ex_single_thread_context_destroy(&ctx);
        for (int i = 0; i < RL_RACE_SUBMITTERS; i++) pthread_join(th[i], NULL);  /* ctx's storage outlives them */
        cr_assert_eq(e.code, 0, "round %d: destroy returned %d", round, e.code);
        for (int i = 0; i < RL_RACE_SUBMITTERS; i++) {
            rl_submitter *s = &sub[i];
            cr_assert(s->accepted == RL_RACE_MAX || s->last_code == EX_ESHUTDOWN, "round %d: refused with %d", round,
                      s->last_code);
            for (int j = 0; j < s->accepted; j++)
                cr_assert_eq(atomic_load(&s->items[j].runs), 1, "round %d: accepted item %d of submitter %d ran %d times",
                             round, j, i, atomic_load(&s->items[j].runs));
            if (s->accepted < RL_RACE_MAX) cr_assert_eq(atomic_load(&s->items[s->accepted].runs), 0);
        }
    }
    for (int i = 0; i < RL_RACE_SUBMITTERS; i++) free(sub[i].items);
    expect_no_leaks();
}
